"""Compiled FFNs on the RTL, on every simulator: y read back from the SRAM after the run
bit-exact against the integer FFN, every output write at the cycle the compiler
predicted, cycle count and per-slice busy counters as predicted (all in
``scoreboard.check_run``), and the two simulators identical."""

import dataclasses

import numpy as np
import pytest

from lpu_arch import TileConfig, fp8
from lpu_arch.hostmap import Status

from firmware_gen.golden import archmodel
from firmware_gen.compiler.ffn import compile_ffn
from firmware_gen.compiler.ffn_example import example_ffn
from firmware_gen.golden.numerics import ffn_int
from firmware_gen.scoreboard import compare, golden_observed, promise
from sim.flows.decode import DECODE_TILE
from sim.harness.runner import job
from sim.harness.scoreboard import check_run, diff_runs, output_rows

from tests.helpers import ONE_SIM, RAMP_TILE, SIMS, each_sim, get_sim

CASES = {
    "tiny": [("swiglu", 4, 4, 1), ("swiglu", 5, 7, 1), ("classic", 6, 10, 3), ("classic", 8, 12, 4),
             ("swiglu", 8, 8, 4)],
    "board": [("swiglu", 32, 64, 1), ("classic", 24, 40, 3), ("swiglu", 16, 32, 8)],
    "default": [("swiglu", 16, 16, 1), ("classic", 40, 72, 2), ("swiglu", 64, 128, 1), ("swiglu", 32, 64, 16)],
}


# An FP8 tile: the tiny tile with 6 streams (48-bit accumulators travel in 6 planes) and
# mxm_dtype = "fp8", at lpu decode's depths (DECODE_TILE), so that test_decode's FP8 loop
# uses the same build.  make bench runs its FFN suite on the FP8 default tile.
FP8_TILE = ("tiny", [*DECODE_TILE, "streams=6", "mxm_dtype=fp8"])
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
@pytest.mark.parametrize("preset", ["tiny", "default"])
def test_ffn_on_rtl(simulator, preset):
    run_ffns(preset, simulator, CASES[preset])


@pytest.mark.sim
@pytest.mark.parametrize("simulator", ONE_SIM)
def test_ffn_on_the_board_tile(simulator):
    """The FPGA preset: the same HDL as the tiny and default tiles, at 8 lanes and 4
    streams, on one simulator (``helpers.ONE_SIM``)."""
    run_ffns("board", simulator, CASES["board"])


@pytest.mark.sim
@pytest.mark.parametrize("simulator", each_sim())
def test_center_layout_and_ramp_blocks_on_rtl(simulator):
    """The MXMs beside the VXM (``mxm_layout`` center: weights flow towards the VXM, results
    reach it on the next position), ramp blocks (``LW`` n below the weight streams) and
    partial loads (``LW rows=R`` for the last W1/W3 blocks of an I the lanes do not
    divide): the programs use all three, and run as predicted."""
    cases = [("swiglu", 16, 20, 1), ("classic", 12, 20, 2), ("swiglu", 8, 8, 3)]
    cfg = TileConfig.load(*RAMP_TILE)
    assert cfg.mxm_layout == "center"
    ex = example_ffn(*cases[0], seed=0)
    lws = [i for i in compile_ffn(ex.spec, ex.x_int8, cfg)[0].queues["MXL_W"] if i.op.name == "LW"]
    lw_n = [i.operand("n") for i in lws]
    assert min(lw_n) < max(lw_n)
    assert {i.operand("rows") for i in lws} == {0, 20 % cfg.lanes}
    run_ffns(*RAMP_TILE[:1], simulator, cases, sets=RAMP_TILE[1])


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


def nan_ffn(seed=82):
    """An FP8 FFN (classic, H=8, I=12, batch 3) with x as drawn and x with two NaN codes
    (0x7F and 0xFF): ``(spec, x clean, x with NaN)``."""
    ex = example_ffn("classic", 8, 12, 3, seed=seed, dtype="fp8")
    x_nan = ex.x_int8.copy()
    x_nan[1, 3], x_nan[2, 0] = fp8.NAN_CODES
    return ex.spec, ex.x_int8, x_nan


@pytest.mark.sim
def test_fp8_nan_operand_on_rtl(simulator):
    """An FP8 FFN whose x holds NaN codes, then the same FFN without them, as two jobs of
    one simulation: both bit-exact against the integer FFN (a NaN counts 0) with every
    write on its predicted cycle, and ``Status.NAN_OPERAND`` exactly as the golden model
    predicts (``check_run``): set after the first run, cleared by the second's start."""
    cfg = TileConfig.load(FP8_TILE[0], FP8_TILE[1])
    spec, x_clean, x_nan = nan_ffn()
    runs = []
    for x in (x_nan, x_clean):
        prog, man = compile_ffn(spec, x, cfg)
        runs.append((x, prog, man, archmodel.run(prog)))
    assert runs[0][3].nan_operand is not None and runs[1][3].nan_operand is None, (
        [r[3].nan_operand for r in runs])
    results = get_sim(cfg, simulator).run(
        [job(prog, name=f"{what} x", read_back=output_rows(man))
         for what, (_, prog, man, _) in zip(("NaN", "clean"), runs)])
    for (x, prog, man, gold), res in zip(runs, results):
        problems = check_run(res, gold, manifest=man, y=ffn_int(spec, x))
        assert not problems, f"{res['name']}:\n" + "\n".join(problems)
    flags = [bool(res["status"] & Status.NAN_OPERAND) for res in results]
    assert flags == [True, False], f"NAN_OPERAND after the NaN run and after the clean run: {flags}"


def test_nan_operand_prediction_and_scoreboard():
    """No simulator: the golden model predicts ``NAN_OPERAND`` for an FP8 FFN with a NaN
    code in x or in a weight matrix (whose products count 0: y is the FFN's with those
    codes 0) and for no other; the scoreboard names a flag raised without its prediction
    and one missing."""
    cfg = TileConfig.load(FP8_TILE[0], FP8_TILE[1])
    spec, x_clean, x_nan = nan_ffn()
    zeroed = np.where(fp8.is_nan(x_nan), 0, x_nan).astype(x_nan.dtype)
    assert np.array_equal(ffn_int(spec, x_nan), ffn_int(spec, zeroed))
    W2 = spec.W2.copy()
    W2[3, 5] = fp8.NAN_CODES[0]
    w_nan = dataclasses.replace(spec, W2=W2)
    gold = {}
    for what, sp, x in (("clean", spec, x_clean), ("x", spec, x_nan), ("W2", w_nan, x_clean)):
        prog, man = compile_ffn(sp, x, cfg)
        g = gold[what] = archmodel.run(prog)
        assert not compare(golden_observed(g), promise(man.writes, man.cycles)), what
    assert gold["clean"].nan_operand is None
    assert gold["x"].nan_operand is not None and gold["W2"].nan_operand is not None
    assert gold["W2"].nan_operand[0] > gold["x"].nan_operand[0]      # W2's MMs come after W1's

    def observed(g, status):
        return {"cycles": g.cycles, "status": status, "illegal": 0, "addr_fault": 0, "busy": dict(g.busy),
                "events": [list(e.as_tuple()) for e in g.events]}
    done = int(Status.DONE)
    assert check_run(observed(gold["clean"], done), gold["clean"]) == []
    assert check_run(observed(gold["x"], done | Status.NAN_OPERAND), gold["x"]) == []
    text = "\n".join(check_run(observed(gold["x"], done), gold["x"]))
    assert "NAN_OPERAND missing from STATUS" in text, text
    text = "\n".join(check_run(observed(gold["clean"], done | Status.NAN_OPERAND), gold["clean"]))
    assert "NAN_OPERAND set in STATUS" in text, text
    assert max(Status).bit_length() <= cfg.HOST_WORD          # every flag fits the STATUS CSR


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
