"""Attention steps on the RTL tile (``sim/flows/attention.py``): 2 heads of D = 32 on the
default tile with ``DECODER_FIELDS``, every length a job of one testbench run per simulator
(Verilator in make test, Icarus in make test-long), checked by ``scoreboard.compare`` against the
golden model's run of the same program, the compiler's promise and ``head_int``."""

import copy
import functools

import pytest

from firmware_gen.compiler.attention import AttentionStep
from firmware_gen.golden.attention import BLOCK

from sim.flows.attention import Case, attention_config, random_specs, read_bound, run_attention

from tests.helpers import FAST_SIM, SIMS

pytestmark = pytest.mark.sim

LENGTHS = [1, 15, 16, 17, 64]          # the positions in make test
HEADS = 2


@functools.cache
def predicted(L):
    """The compiler's cycle count for a step of context ``L`` (independent of the RTL run)."""
    return AttentionStep(attention_config(), random_specs(HEADS, 0), -(-L // BLOCK)).cycles


def check(rep, lengths, sim):
    assert rep.passed, rep.problems[:10]
    assert [r["L"] for r in rep.rows] == lengths
    for r in rep.rows:
        assert r["ok"], r
        assert r["rtl_cycles"] == r["cycles"] == r["predicted"] == predicted(r["L"])
        assert r["bound"] == read_bound(attention_config(), HEADS, r["nb"])
    assert rep.figures["simulator"] == sim


# make test: Verilator; make test-long: Icarus as well (each compared with the golden model and the
# compiler, hence with the other).
@pytest.fixture(scope="module", params=[pytest.param(s, marks=[pytest.mark.long] if s == "icarus" else []) for s in SIMS])
def ran(request):
    """The lengths of ``LENGTHS`` on one simulator, in one testbench invocation."""
    return request.param, run_attention(attention_config(), HEADS, LENGTHS, sim=request.param)


def test_steps_bit_exact_and_every_write_at_its_predicted_cycle(ran):
    sim, rep = ran
    check(rep, LENGTHS, sim)
    per_nb = {}
    for r in rep.rows:
        per_nb.setdefault(r["nb"], set()).add(r["rtl_cycles"])
    assert all(len(c) == 1 for c in per_nb.values())            # cycles depend on the blocks only
    (one,), (two,), (four,) = per_nb[1], per_nb[2], per_nb[4]
    assert one < two < four


def test_the_check_sees_a_late_write_and_a_wrong_output():
    """The RTL check is not vacuous: a write one cycle late, or an output byte changed, in a
    (copied) observation of the golden model's run is a problem against its references."""
    cfg = attention_config()
    c = Case(cfg, random_specs(HEADS, 0), {}, 17, 0)
    events = [[e.cycle, e.slice, e.addr, list(e.data)] for e in c.gold.events]
    rows = {}
    for e in c.gold.events:
        rows.setdefault(e.slice, set()).add(int(e.addr))
    rows = {n: sorted(r) for n, r in rows.items()}
    res = {"cycles": c.gold.cycles, "busy": dict(c.gold.busy), "status": 0, "illegal": 0, "addr_fault": 0,
           "events": events, "read_back_rows": rows,
           "read_back": {n: [c.gold.memory[n][a].tolist() for a in r] for n, r in rows.items()}}
    assert c.rtl_problems(res) == []
    late = copy.deepcopy(res)
    late["events"][0][0] += 1
    assert {p.part for p in c.rtl_problems(late)} == {"writes"}
    assert {p.reference for p in c.rtl_problems(late)} == {"golden model", "compiler"}
    wrong = copy.deepcopy(res)
    (h, b), row = next(iter(c.step.y_row.items()))
    i = wrong["read_back_rows"]["MEM_E0"].index(row)
    wrong["read_back"]["MEM_E0"][i][0] ^= 1
    assert {(p.part, p.reference) for p in c.rtl_problems(wrong)} == {("read-back", "golden model"),
                                                                       ("outputs", "head_int")}


@pytest.mark.long
@pytest.mark.parametrize("sim", FAST_SIM)
def test_every_context_length(sim):
    lengths = list(range(1, 65))
    check(run_attention(attention_config(), HEADS, lengths, sim=sim), lengths, sim)
