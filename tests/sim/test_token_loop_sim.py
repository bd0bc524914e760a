"""The token loop on chip on the RTL tile (``sim/flows/token_loop.py``): 16 tokens of the
default 2-layer loop model on the default tile with ``sxm_argmax`` and ``sxm_setb``, 4 runs of 4
tokens in one testbench session, the host writing only the prompt's token (with the first load)
and nothing before the later runs.  Each run is checked by ``scoreboard.compare`` against the
golden model's run and the compiler's promise (every id WRITE at its predicted cycle, with the
id the pure-integer reference generates; the cycle count), and the ids read back against the
integer reference."""

import pytest

from firmware_gen.compiler.token_loop import TokenLoop
from firmware_gen.golden.token_loop import generate, synthetic

from sim.flows.token_loop import ON_CHIP_MODEL, on_chip_config, run_token_loop

from tests.helpers import SIMS

pytestmark = pytest.mark.sim

TOKENS, PER_CALL, PROMPT = 16, 4, [1]


@pytest.fixture(scope="module", params=SIMS)
def ran(request):
    return request.param, run_token_loop(on_chip_config(), tokens=TOKENS, per_call=PER_CALL, prompt=PROMPT,
                                         sim=request.param)


def test_sixteen_tokens_on_chip(ran):
    sim, rep = ran
    assert rep.passed, rep.problems[:10]
    model = synthetic(**ON_CHIP_MODEL)
    want = generate(model, PROMPT, TOKENS)                       # the pure-integer reference
    assert [r["rtl_id"] for r in rep.rows] == [r["id"] for r in rep.rows] == want
    loop = TokenLoop(on_chip_config(), model, PER_CALL)          # the compiler's prediction
    assert [r["cycles"] for r in rep.rows] == loop.token_cycles() * (TOKENS // PER_CALL)
    assert rep.figures["cycles_per_run"] == loop.cycles
    assert rep.figures["host_bytes_after_first_load"] == [0] * (TOKENS // PER_CALL - 1)
    assert rep.figures["simulator"] == sim
