"""The FFN compiler against the golden models, without a simulator: the architectural
model runs the compiled program; its output must equal the integer FFN bit for bit and
its MEM writes must happen exactly where and when the compiler predicted."""

import dataclasses

import numpy as np
import pytest

from lpu_arch import TileConfig
from lpu_arch.isa import Instr, Op

from firmware_gen.golden import archmodel
from firmware_gen.compiler import CompileError
from firmware_gen.compiler.ffn import StoreH, compile_ffn
from firmware_gen.compiler.ffn_example import example_ffn
from firmware_gen.compiler.ffn_manifest import output_matrix
from firmware_gen.golden.numerics import FfnSpec, NumericsError, ffn_hidden, ffn_int
from firmware_gen.compiler.reserve import lower

from firmware_gen.scoreboard import compare, golden_observed, promise

from tests.helpers import RAMP_TILE, ffn_on_golden_model


def check_compiled(cfg, ex, h_route=None):
    prog, man = compile_ffn(ex.spec, ex.x_int8, cfg, h_route=h_route)
    gold, y, problems = ffn_on_golden_model(prog, man, ex)
    assert not problems, "\n".join(problems)
    assert sum(gold.mm_count.values()) == man.mm_count
    return prog, man, y


@pytest.mark.parametrize("kind", ["swiglu", "classic"])
@pytest.mark.parametrize("preset, H, I, batch", [
    ("tiny", 4, 4, 1), ("tiny", 4, 8, 1), ("tiny", 5, 7, 1), ("tiny", 6, 10, 3), ("tiny", 8, 12, 4),
    ("default", 16, 16, 1), ("default", 17, 33, 1), ("default", 48, 80, 2), ("default", 64, 128, 1),
    ("default", 32, 64, 16),
])
def test_ffn_bit_and_cycle_exact_on_the_golden_model(kind, preset, H, I, batch):
    cfg = TileConfig.preset(preset)
    ex = example_ffn(kind, H, I, batch, seed=H * 31 + I)
    _, man, y = check_compiled(cfg, ex)
    assert len(man.writes) == batch * -(-H // cfg.lanes)
    err = ex.error_vs_float(y)
    assert err["cosine"] > 0.9, err


@pytest.mark.parametrize("kind, preset, H, I, batch", [
    ("swiglu", "tiny", 6, 10, 2), ("classic", "tiny", 5, 7, 1), ("swiglu", "default", 48, 80, 1)])
def test_stored_h_route_writes_every_h_vector_where_and_when_predicted(kind, preset, H, I, batch):
    """StoreH: h is also written into the SRAM as it passes; the golden model's writes
    (y and h) are the compiler's predictions, the stored h is numerics.ffn_hidden and y is
    unchanged."""
    cfg = TileConfig.preset(preset)
    ex = example_ffn(kind, H, I, batch, seed=7)
    prog, man, y = check_compiled(cfg, ex, h_route=StoreH())
    gold = archmodel.run(prog)
    h = np.atleast_2d(ffn_hidden(ex.spec, ex.x_int8))
    stored = [w for w in man.writes if w.transfer < 0]
    assert len(stored) == batch * -(-I // cfg.lanes)
    L = cfg.lanes
    hp = np.zeros((batch, -(-I // L) * L), np.int64)
    hp[:, :I] = h
    for i in range(-(-I // L)):       # per h block, the stored vectors are the batch's h vectors
        got = sorted(tuple(np.asarray(gold.memory[w.slice][w.addr], np.uint8).astype(np.int8))
                     for w in stored if w.transfer == -1 - i)
        assert got == sorted(tuple(hp[b, i * L:(i + 1) * L].astype(np.int8)) for b in range(batch)), i
    assert np.array_equal(y, compile_and_run_plain(cfg, ex))


def compile_and_run_plain(cfg, ex):
    prog, man = compile_ffn(ex.spec, ex.x_int8, cfg)
    return output_matrix(man, archmodel.run(prog).memory, cfg.lanes, ex.spec.H)


@pytest.mark.parametrize("seed", range(3))
def test_random_seeds_and_activations(seed):
    cfg = TileConfig.tiny()
    for act in ("silu", "gelu", "relu", "identity"):
        check_compiled(cfg, example_ffn("classic", 7, 9, 2, seed=seed, activation=act))


def test_padding_is_invisible():
    """The padded lanes of the last output block come out as 0 and the rest equals the
    unpadded FFN."""
    cfg = TileConfig.tiny()
    ex = example_ffn("swiglu", 5, 6, 2, seed=4)
    prog, man = compile_ffn(ex.spec, ex.x_int8, cfg)
    gold = archmodel.run(prog)
    full = output_matrix(man, gold.memory, cfg.lanes, man.padded[0])
    assert not full[:, 5:].any()


def test_decode_is_close_to_the_sram_bound():
    cfg = TileConfig.default()
    ex = example_ffn("swiglu", 64, 128, 1)
    _, man = compile_ffn(ex.spec, ex.x_int8, cfg)
    assert man.sram_bound == 3 * 64 * 128 // cfg.lanes // (2 * cfg.mem_slices)
    assert man.cycles <= 1.15 * man.sram_bound, man.summary()


def test_lower_makes_repeats_and_nops():
    r = Instr.read(0, 0, 5)
    entries = [(3, r), (4, Instr.read(0, 0, 6)), (5, Instr.read(0, 0, 7)), (9, Instr.read(0, 0, 3))]
    q = lower(entries)
    assert [str(i) for i in q] == ["NOP 3", "READ E0, 5", "REPEAT 2, 1, +1", "NOP 3", "READ E0, 3"]
    assert archmodel.expand(q)[0] == [(c, i) for c, i in entries]


def test_weights_that_do_not_fit_name_bytes_and_limit():
    cfg = TileConfig.tiny()
    ex = example_ffn("swiglu", 32, 64, 1)
    with pytest.raises(CompileError, match=r"does not fit the tile's SRAM: .* need \d+ rows .* \(\d+ bytes in all\); a MEM slice holds 64 rows"):
        compile_ffn(ex.spec, ex.x_int8, cfg)


def test_other_limits_are_named():
    cfg = dataclasses.replace(TileConfig.tiny(), mem_depth=1024)
    with pytest.raises(CompileError, match=r"x slots per MXM .* an MXM has 64"):
        ex = example_ffn("classic", 8, 8, 20)
        compile_ffn(ex.spec, ex.x_int8, cfg)
    ex = example_ffn("classic", 8, 8, 1)
    with pytest.raises(CompileError, match=r"x has shape \(9,\); the FFN has H = 8"):
        compile_ffn(ex.spec, np.zeros(9, np.int8), cfg)
    with pytest.raises(CompileError, match="unknown FFN kind 'moe'"):
        example_ffn("moe")


def test_bad_specs_are_named():
    ex = example_ffn("swiglu", 8, 8, 1)
    s = ex.spec
    with pytest.raises(NumericsError, match="activation table has 255 entries; it must have 256"):
        FfnSpec("swiglu", s.W1, s.W2, s.table[:255], s.rq1, s.rq2, W3=s.W3, rq3=s.rq3, rq_mul=s.rq_mul)
    with pytest.raises(NumericsError, match=r"multiplier"):
        FfnSpec("swiglu", s.W1, s.W2, s.table, (0, 3), s.rq2, W3=s.W3, rq3=s.rq3, rq_mul=s.rq_mul)
    with pytest.raises(NumericsError, match=r"W2"):
        FfnSpec("swiglu", s.W1, s.W2[:, :5], s.table, s.rq1, s.rq2, W3=s.W3, rq3=s.rq3, rq_mul=s.rq_mul)


def test_program_round_trips_through_json():
    from firmware_gen.program import Program
    cfg = TileConfig.tiny()
    ex = example_ffn("classic", 6, 6, 2)
    prog, man = compile_ffn(ex.spec, ex.x_int8, cfg)
    again = Program.from_json(prog.to_json())
    assert not compare(golden_observed(archmodel.run(again)), promise(man.writes))
    assert any(i.op == Op.VOP for i in again.queues["VXM"])


@pytest.mark.parametrize("preset, kind, H, I, batch", [
    ("tiny", "swiglu", 4, 4, 1), ("tiny", "classic", 5, 7, 1), ("tiny", "classic", 8, 16, 3),
    ("default", "swiglu", 16, 16, 1), ("default", "swiglu", 64, 128, 1), ("default", "classic", 128, 512, 1),
    ("default", "swiglu", 128, 256, 16), ("default", "classic", 32, 64, 3),
    ("ramp", "swiglu", 16, 24, 1), ("ramp", "classic", 12, 20, 2)])
def test_no_schedule_beats_a_bound(preset, kind, H, I, batch):
    """Every bound the manifest reports is a lower bound on the compiled cycles (on one
    tile and on a tray of 2 and 4), and the tightest one is named."""
    from firmware_gen.compiler.ffn_manifest import BOUNDS
    from firmware_gen.compiler.tray import compile_ffn_tray
    cfg = TileConfig.load(*RAMP_TILE) if preset == "ramp" else TileConfig.preset(preset)
    ex = example_ffn(kind, H, I, batch, seed=5)
    _, man = compile_ffn(ex.spec, ex.x_int8, cfg)
    assert set(man.bounds) == set(BOUNDS)
    assert man.bounds["sram"] == man.sram_bound and man.bounds["mac"] == man.mac_bound
    assert man.bounds["sram_real"] <= man.bounds["sram"]
    assert all(v <= man.cycles for v in man.bounds.values()), (man.cycles, man.bounds)
    assert man.bounds[man.tightest] == man.bound and 0 < man.efficiency <= 1
    for tiles in (2, 4):
        if cfg.mxm_layout == "center":
            continue                      # single tiles only (TileConfig.mxm_layout)
        _, tray = compile_ffn_tray(ex.spec, ex.x_int8, cfg, tiles)
        assert all(v <= tray.cycles for v in tray.bounds.values()), (tray.cycles, tray.bounds)


def test_per_row_output_scales_compile_and_pad():
    """A spec with one output scale per row compiles on a tile whose lanes do not divide H
    (the padding rows get scale 1.0), and the golden model's y is the integer FFN's."""
    cfg = TileConfig.tiny()
    rng = np.random.default_rng(11)
    H, I = 6, 10
    W1, W2, W3 = rng.normal(size=(I, H)), rng.normal(size=(H, I)), rng.normal(size=(I, H))
    spec = FfnSpec.from_float("swiglu", W1, W2, W3, x_calibration=rng.normal(size=(16, H)), out_scale_per_row=True)
    x = rng.integers(-100, 100, size=H).astype(np.int8)
    prog, man = compile_ffn(spec, x, cfg)
    assert np.array_equal(output_matrix(man, archmodel.run(prog).memory, cfg.lanes, H)[0], ffn_int(spec, x))


@pytest.mark.parametrize("layout", ["center", "edge"])
@pytest.mark.parametrize("kind, H, I, batch", [("swiglu", 16, 24, 1), ("classic", 12, 20, 2), ("swiglu", 8, 8, 3)])
def test_ramp_blocks_start_the_mxms_early(layout, kind, H, I, batch):
    """Where the farthest weight slice's row would reach an MXM later than a block from the
    nearer slices alone could be loaded, the first blocks load from fewer slices (LW n below
    the weight streams): bit- and cycle-exact on the golden model, and never slower than
    without ramp blocks."""
    from firmware_gen.compiler.ffn import FfnPlan
    from firmware_gen.compiler.tile_plan import weight_streams
    cfg = TileConfig.load(*RAMP_TILE).with_overrides([f"mxm_layout={layout}"])
    ex = example_ffn(kind, H, I, batch, seed=9)
    prog, man, _ = check_compiled(cfg, ex)
    lw_n = [i.operand("n") for i in prog.queues["MXL_W"] if i.op == Op.LW]
    assert lw_n[0] < weight_streams(cfg) and lw_n[-1] == weight_streams(cfg)
    flat = FfnPlan(cfg, ex.spec, ex.x_int8)
    flat.ramp = False
    assert man.cycles <= flat.compile().state.res.done_cycles()


def test_center_layout_shortens_the_drain():
    """The same FFN on the same tile, MXMs at the ends or beside the VXM: beside it, the
    last MM's result reaches the VXM on the next position instead of across a hemisphere."""
    cycles = {}
    for layout in ("edge", "center"):
        cfg = TileConfig.load("default", ["mem_slices=12", "streams=13", f"mxm_layout={layout}"])
        _, man, _ = check_compiled(cfg, example_ffn("swiglu", 64, 128, 1, seed=4))
        cycles[layout] = man.cycles
    assert cycles["center"] < cycles["edge"] - 12, cycles
