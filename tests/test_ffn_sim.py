"""Compiled FFNs on the RTL, on every simulator: y read back from the SRAM after the run
bit-exact against the integer FFN, every output write at the cycle the compiler
predicted, cycle count and per-slice busy counters as predicted (all in
``scoreboard.check_run``), and the two simulators identical."""

import pytest

from lpu_arch import TileConfig

from firmware_gen import archmodel
from firmware_gen.compile_ffn import compile_ffn, example_ffn
from firmware_gen.numerics import ffn_int
from sim.runner import job
from sim.scoreboard import check_run, diff_runs, output_rows

from .helpers import SIMS, get_sim

CASES = {
    "tiny": [("swiglu", 4, 4, 1), ("swiglu", 5, 7, 1), ("classic", 6, 10, 3), ("classic", 8, 12, 4),
             ("swiglu", 8, 8, 4)],
    "board": [("swiglu", 32, 64, 1), ("classic", 24, 40, 3), ("swiglu", 16, 32, 8)],
    "default": [("swiglu", 16, 16, 1), ("classic", 40, 72, 2), ("swiglu", 64, 128, 1), ("swiglu", 32, 64, 16)],
}


# An FP8 tile: the tiny tile with 6 streams (48-bit accumulators travel in 6 planes) and
# mxm_dtype = "fp8".  make bench runs its FFN suite on the FP8 default tile.
FP8_TILE = ("tiny", ["streams=6", "mxm_dtype=fp8"])
FP8_CASES = [("swiglu", 8, 16, 2), ("classic", 8, 12, 3), ("swiglu", 5, 7, 1), ("swiglu", 8, 8, 4)]


def run_ffns(preset, simulator, cases, seed=0, sets=()):
    """Compile ``cases`` ((kind, H, I, batch)) for the tile ``preset`` with the overrides
    ``sets``, run them as the jobs of one simulation (each reads back only its output rows)
    and check every one in the scoreboard."""
    cfg = TileConfig.load(preset, sets)
    compiled = []
    for i, (kind, H, I, B) in enumerate(cases):
        ex = example_ffn(kind, H, I, B, seed=seed + i, dtype=cfg.mxm_dtype)
        prog, man = compile_ffn(ex.spec, ex.x_int8, cfg)
        compiled.append((ex, prog, man))
    results = get_sim(cfg, simulator).run(
        [job(prog, name=f"{man.kind} {man.H}x{man.I} b{man.batch}", read_back=output_rows(man))
         for _, prog, man in compiled])
    for (ex, prog, man), res in zip(compiled, results):
        problems = check_run(res, archmodel.run(prog), manifest=man, y=ffn_int(ex.spec, ex.x_int8))
        assert not problems, f"{res['name']}:\n" + "\n".join(problems)
    return results


@pytest.mark.sim
@pytest.mark.parametrize("preset", ["tiny", "board", "default"])
def test_ffn_on_rtl(simulator, preset):
    run_ffns(preset, simulator, CASES[preset])


@pytest.mark.sim
def test_fp8_ffn_on_rtl(simulator):
    """FP8 FFNs: y in E4M3 bit-exact against the FP8 golden model, every write on its
    predicted cycle (``check_run``)."""
    run_ffns(FP8_TILE[0], simulator, FP8_CASES, seed=80, sets=FP8_TILE[1])


@pytest.mark.sim
@pytest.mark.skipif(len(SIMS) < 2, reason="needs both simulators (LPU_SIMS)")
def test_simulators_agree_on_an_fp8_ffn():
    runs = [run_ffns(FP8_TILE[0], sim, FP8_CASES[1:2], seed=81, sets=FP8_TILE[1])[0] for sim in SIMS]
    problems = diff_runs(runs[0], runs[1], tuple(SIMS))
    assert not problems, "\n".join(problems)


@pytest.mark.sim
@pytest.mark.skipif(len(SIMS) < 2, reason="needs both simulators (LPU_SIMS)")
def test_simulators_agree_on_an_ffn():
    runs = [run_ffns("tiny", sim, CASES["tiny"][2:3], seed=5)[0] for sim in SIMS]
    problems = diff_runs(runs[0], runs[1], tuple(SIMS))
    assert not problems, "\n".join(problems)


def test_scoreboard_checks_y_in_the_sram():
    """No simulator: an observation made from the golden model passes; y missing from the
    read-back, a wrong byte in an output row, or a busy counter off by one are named."""
    cfg = TileConfig.tiny()
    ex = example_ffn("classic", 6, 10, 3, seed=1)
    prog, man = compile_ffn(ex.spec, ex.x_int8, cfg)
    gold = archmodel.run(prog)
    y = ffn_int(ex.spec, ex.x_int8)
    rows = output_rows(man)
    assert sum(map(len, rows.values())) == len(man.outputs) < cfg.mem_depth   # only y's rows
    obs = {"cycles": gold.cycles, "status": 2, "illegal": 0, "addr_fault": 0, "busy": dict(gold.busy),
           "events": [list(e.as_tuple()) for e in gold.events], "read_back_rows": rows,
           "read_back": {n: [gold.memory[n][r].tolist() for r in rs] for n, rs in rows.items()}}
    assert check_run(obs, gold, manifest=man, y=y) == []
    assert "y was not read back from the SRAM" in "\n".join(check_run({**obs, "read_back": {}, "read_back_rows": {}},
                                                                    gold, manifest=man, y=y))
    (b, j), (s, a) = sorted(man.outputs.items())[0]
    bad = {n: [list(v) for v in vs] for n, vs in obs["read_back"].items()}
    bad[s][rows[s].index(a)][0] ^= 1
    text = "\n".join(check_run({**obs, "read_back": bad}, gold, manifest=man, y=y))
    assert "y read back from the SRAM vs integer FFN: 1 of" in text and f"y[{b}, 0:" in text, text
    assert "SRAM read back after the run vs golden model: 1 of" in text, text
    off = {**obs, "busy": {**obs["busy"], "VXM": obs["busy"]["VXM"] + 1}}
    text = "\n".join(check_run(off, gold, manifest=man, y=y))
    assert "busy cycles of VXM: golden model" in text and "busy cycles of VXM: predicted" in text, text
