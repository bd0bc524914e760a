"""The token loop on chip on the RTL tile (``sim/flows/token_loop.py``), the default tile with
``DECODER_FIELDS``, in one testbench session each:

* the default 2-layer decoder with attention (one head) generates 16 tokens after a 2-token
  prompt in one run, the host writing only the prompt (with the first load) and reading the ids;
  then the same run again on the tile as the first left it (nothing written): the same tokens at
  the same cycles;
* the same without attention, 4 runs of 4 tokens, the host writing nothing before runs 2..4.

The decoder with attention on Verilator in make test; everything on both simulators in make
test-long.

Each run is checked by ``scoreboard.compare`` against the golden model's run (every MEM write
with its value, the cycles, the busy counters, the rows read back) and the compiler's promise
(every write at its predicted cycle, the cycle count), and the ids read back against the
pure-integer reference."""

import pytest

from firmware_gen.compiler.token_loop import TokenLoop
from firmware_gen.golden.token_loop import generate, synthetic

from sim.flows.token_loop import ON_CHIP_MODEL, on_chip_config, run_token_loop

from tests.helpers import SIMS

pytestmark = pytest.mark.sim

TOKENS, PROMPT = 16, [1, 2]
CASES = {"attention": (ON_CHIP_MODEL, TOKENS, 2), "mlp-4x4": (dict(ON_CHIP_MODEL, heads=0), 4, 1)}   # model, per run, repeat


# make test: the decoder with attention on Verilator; make test-long: Icarus as well (the same cycles, as
# every test compares both with the compiler's prediction), and the model without attention on both.
PARAMS = [pytest.param((s, c), id=f"{c}-{s}", marks=[pytest.mark.long] if s == "icarus" or c != "attention" else [])
          for s in SIMS for c in CASES]


@pytest.fixture(scope="module", params=PARAMS)
def ran(request):
    sim, case = request.param
    model, per_call, repeat = CASES[case]
    return sim, case, run_token_loop(on_chip_config(), model, tokens=TOKENS, per_call=per_call, prompt=PROMPT, sim=sim,
                                     repeat=repeat)


def test_sixteen_tokens_on_chip(ran):
    sim, case, rep = ran
    assert rep.passed, rep.problems[:10]
    args, per_call, repeat = CASES[case]
    model = synthetic(**args)
    want = generate(model, PROMPT, TOKENS)                       # the pure-integer reference
    assert [r["rtl_id"] for r in rep.rows] == [r["id"] for r in rep.rows] == want * repeat
    loop = TokenLoop(on_chip_config(), model, per_call, prompt_len=len(PROMPT))     # the compiler's prediction
    assert [r["cycles"] for r in rep.rows] == loop.token_cycles() * (TOKENS // per_call) * repeat
    assert rep.figures["cycles_per_run"] == loop.cycles          # (every run's cycle count is checked against it)
    assert rep.figures["host_bytes_after_first_load"] == [0] * (TOKENS // per_call * repeat - 1)
    assert rep.figures["simulator"] == sim


# make test-long: LayerNorms on the RTL tile (the golden model's test is in make test:
# tests/firmware_gen/test_token_loop.py), on a tile with room for their parameter entries.
@pytest.mark.long
@pytest.mark.parametrize("sim", SIMS)
def test_layer_norms_on_the_rtl_tile(sim):
    from sim.flows.ffn import build_tile
    from sim.flows.token_loop import LoopRuns
    from tests.helpers import with_layer_norms
    cfg = on_chip_config().with_overrides(["vxm_param_depth=256"])
    model = with_layer_norms(synthetic(**ON_CHIP_MODEL))
    runs = LoopRuns(cfg, model, PROMPT, 4, 4, 1)
    assert runs.golden_problems() == []
    res = build_tile(cfg, sim).run(runs.jobs(), name="layer norms")
    problems, ids = runs.rtl_problems(0, res[0])
    assert problems == [] and ids == generate(model, PROMPT, 4)


# make test-long: a small BERT (every piece all-MiniLM-L6-v2's integer model has: position rows,
# LayerNorms after the residuals and position 0's own, biases, per-lane requantisations, GELU
# tables by lane) on the RTL tile of 8 + 8 MEM slices all-MiniLM-L6-v2's takes (the blocks striped
# over both groups of four, the attention's maxima through the slice beside SXM_W); the golden
# model's tests are in make test (tests/firmware_gen/test_bert_loop.py, tests/sim/test_bert_on_chip.py).
@pytest.mark.long
@pytest.mark.parametrize("sim", SIMS)
def test_a_small_bert_on_the_rtl_tile(sim):
    import numpy as np
    from firmware_gen.host.bert_loop import quantise_bert
    from sim.flows.ffn import build_tile
    from sim.flows.token_loop import LoopRuns
    from tests.firmware_gen.test_bert_loop import small_bert
    rng = np.random.default_rng(5)
    model = quantise_bert(small_bert(H=64, I=128, vocab=48), [list(rng.integers(0, 48, 24)) for _ in range(8)])
    cfg = on_chip_config().with_overrides(["vxm_param_depth=1024", "vxm_tables=32", "mxm_xbuf_depth=1024",
                                           "mem_slices=8"])
    runs = LoopRuns(cfg, model, [3, 5, 7], 3, 3, 1)
    assert runs.golden_problems() == []
    res = build_tile(cfg, sim).run(runs.jobs(), name="small BERT")
    problems, ids = runs.rtl_problems(0, res[0])
    assert problems == [] and ids == generate(model, [3, 5, 7], 3)
