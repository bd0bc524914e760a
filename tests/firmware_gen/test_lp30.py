"""The ``lp30`` preset (docs/lp30.md): its capacity and SRAM bandwidth against LP30's
public figures, its weight path against its SRAM, and an FFN on it compiled and run on the
golden model (cycles and every write as predicted, y bit-exact)."""

from firmware_gen.golden import archmodel
from firmware_gen.compiler.ffn import compile_ffn
from firmware_gen.compiler.ffn_example import example_ffn
from firmware_gen.compiler.ffn_manifest import ffn_bounds, output_matrix
from firmware_gen.compiler.tile_plan import weight_streams
from firmware_gen.golden.numerics import ffn_int
from firmware_gen.scoreboard import compare, ffn_reference, golden_observed, manifest_promise, row_vectors
from lpu_arch.config import PRESET_CLOCK_MHZ, TileConfig

LP30_SRAM_BYTES, LP30_SRAM_BYTES_PER_S = 500e6, 150e12     # per chip, public


def test_capacity_and_bandwidth_match_the_public_figures():
    cfg = TileConfig.preset("lp30")
    assert abs(cfg.mem_bytes / LP30_SRAM_BYTES - 1) < 0.15          # 561 MB: mem_depth is a power of two
    per_cycle = 2 * cfg.mem_slices * cfg.lanes                      # every MEM slice reads a vector a cycle
    assert abs(per_cycle * PRESET_CLOCK_MHZ["lp30"] * 1e6 / LP30_SRAM_BYTES_PER_S - 1) < 0.01
    assert cfg.lanes == 320                                         # as reported for LP30
    # Every MEM slice of a hemisphere feeds its MXM, each on its own stream, x and h on one more.
    assert weight_streams(cfg) == cfg.mem_slices == cfg.streams - 1


def test_decode_expert_is_bound_by_sram_reads_not_by_the_weight_path():
    """The H=7168, I=2048 expert (DeepSeek-V3's routed expert): arithmetic on the preset."""
    cfg = TileConfig.preset("lp30")
    L = cfg.lanes
    KH, KI = -(-7168 // L), -(-2048 // L)
    b = ffn_bounds(cfg, weight_streams(cfg), 3, 7168, 2048, KH, KI, 1)
    assert b["weight_load"] <= 1.005 * b["sram"] and b["streams"] <= b["sram"]
    assert max(b, key=b.get) == "sram_path"      # the slices' distances to the MXM: fill and drain


def test_an_ffn_on_lp30_runs_as_predicted_on_the_golden_model():
    cfg = TileConfig.preset("lp30")
    ex = example_ffn("swiglu", 2 * cfg.lanes, 2 * cfg.lanes, 1, seed=3)
    prog, man = compile_ffn(ex.spec, ex.x_int8, cfg)
    res = archmodel.run(prog)
    y = output_matrix(man, res.memory, cfg.lanes, ex.spec.H)
    problems = compare(golden_observed(res, outputs=row_vectors("y", y)), manifest_promise(man),
                       ffn_reference(ffn_int(ex.spec, ex.x_int8)))
    assert not problems, "\n".join(problems)
    assert all(man.cycles >= v for v in man.bounds.values())
