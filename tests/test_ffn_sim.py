"""Compiled FFNs on the RTL, on every simulator: every output bit-exact against the
integer FFN, every output write at the cycle the compiler predicted, cycle count and
per-slice busy counters as predicted, and the two simulators identical."""

import numpy as np
import pytest

from lpu_arch import TileConfig

from firmware_gen import archmodel
from firmware_gen.compile_ffn import compile_ffn, example_ffn
from firmware_gen.numerics import ffn_int
from sim.runner import job, observed_events
from sim.scoreboard import check_run

from .conftest import get_sim

pytestmark = pytest.mark.sim

CASES = {
    "tiny": [("swiglu", 4, 4, 1), ("swiglu", 5, 7, 1), ("classic", 6, 10, 3), ("classic", 8, 12, 4),
             ("swiglu", 8, 8, 4)],
    "default": [("swiglu", 16, 16, 1), ("classic", 40, 72, 2), ("swiglu", 64, 128, 1), ("swiglu", 32, 64, 16)],
}


def run_ffns(preset, simulator, cases, seed=0):
    cfg = TileConfig.preset(preset)
    compiled = []
    for i, (kind, H, I, B) in enumerate(cases):
        ex = example_ffn(kind, H, I, B, seed=seed + i)
        prog, man = compile_ffn(ex.spec, ex.x_int8, cfg)
        compiled.append((ex, prog, man))
    results = get_sim(cfg, simulator).run(
        [job(prog, name=f"{man.kind} {man.H}x{man.I} b{man.batch}") for _, prog, man in compiled])
    for (ex, prog, man), res in zip(compiled, results):
        gold = archmodel.run(prog)
        problems = check_run(res, gold, man.writes, man.cycles)
        problems += [f"busy {n}: predicted {v}, hardware {res['busy'].get(n)}"
                     for n, v in man.busy.items() if res["busy"].get(n) != v]
        assert not problems, f"{res['name']}:\n" + "\n".join(problems)
        # Bit-exact: the values the hardware wrote are the integer FFN's output.
        y = ffn_int(ex.spec, ex.x_int8)
        L = cfg.lanes
        got = {(s, a): d for _, s, a, d in observed_events(res)}
        for (b, j), (s, a) in man.outputs.items():
            lanes = np.asarray(got[(s, a)], np.uint8).astype(np.int8)[: max(0, min(L, ex.spec.H - j * L))]
            assert np.array_equal(lanes, y[b, j * L:j * L + len(lanes)]), (res["name"], b, j)
    return results


@pytest.mark.parametrize("preset", ["tiny", "default"])
def test_ffn_on_rtl(simulator, preset):
    run_ffns(preset, simulator, CASES[preset])


def test_simulators_agree_on_an_ffn():
    from .conftest import SIMS
    if len(SIMS) < 2:
        pytest.skip("needs both simulators (LPU_SIMS)")
    runs = [run_ffns("tiny", sim, CASES["tiny"][2:3], seed=5)[0] for sim in SIMS]
    assert observed_events(runs[0]) == observed_events(runs[1])
    assert runs[0]["cycles"] == runs[1]["cycles"] and runs[0]["busy"] == runs[1]["busy"]
