"""The LPX's steady state: a MoE decoder with every layer's experts resident across a tray
of default tiles (``resident_tray.compile_resident_tray``), decoded token after token on a
tray that never stops (``sim.flows.decode.run_tray_rtl``; docs/afd.md, "MoE layers on a
tray")."""

from __future__ import annotations

import numpy as np
import pytest

from firmware_gen.compiler import CompileError
from firmware_gen.compiler.resident_tray import compile_resident_tray
from firmware_gen.host.decoder import IntFfn, calibrate, generate, synthetic
from lpu_arch import TileConfig
from sim.flows.decode import (STEADY_MOE, STEADY_SETS, STEADY_TILES, moe_decoder, per_position, run_moe_tray,
                              run_tray_rtl)
from tests.helpers import FAST_SIM, SIMS

CFG = TileConfig.default().with_overrides(list(STEADY_SETS))


@pytest.fixture(scope="module")
def steady():
    """The model as ``lpu decode`` and the bench calibrate it: the compiler's choice of tables."""
    return moe_decoder(STEADY_MOE, CFG, STEADY_TILES)


def test_every_layer_resident_on_8_default_tiles(steady):
    """Every layer's 16 experts and shared expert on 8 default tiles (vxm_param_depth grown
    to 128, named in STEADY_SETS with its reason): each tile within its rows, parameter
    entries and activation tables; the weights about 1.7 MB of the tray's 2 MiB.  A table
    per expert does not fit the default VXM's 8 tables, so the compiler chose one per layer
    and reported the accuracy of both against float."""
    model, tables, _ = steady
    assert tables["chosen"] == "layer" and "vxm_tables = 8" in tables["why"], tables
    assert set(tables["accuracy"]) == {"expert", "layer"}
    for a in tables["accuracy"].values():
        assert 0 <= a["top1_agreement"] <= 1 and a["ffn_cosine_min"] > 0.98, tables
    rt = compile_resident_tray(model.specs, CFG, STEADY_TILES)
    s = rt.summary()
    assert s["rows"] <= CFG.mem_depth and s["params"] <= CFG.vxm_param_depth and s["tables"] <= CFG.vxm_tables, s
    assert s["tables"] == STEADY_MOE["layers"]           # one table per layer on every tile
    weights = 3 * STEADY_MOE["H"] * STEADY_MOE["I"] * (STEADY_MOE["experts"] + 1) * STEADY_MOE["layers"]
    assert weights <= s["weight_bytes"] <= 2 * 2 ** 20 and weights > 1.6e6, (weights, s)
    assert len(set(rt.entries)) == STEADY_MOE["layers"]


def test_a_model_that_does_not_fit_names_the_limit_the_tile_and_the_layer(steady):
    model, _, _ = steady
    with pytest.raises(CompileError, match=r"layer 2: tile 0: .*vxm_param_depth = 64"):
        compile_resident_tray(model.specs, TileConfig.default(), STEADY_TILES)
    per_expert = calibrate(synthetic(**STEADY_MOE))
    with pytest.raises(CompileError, match=r"layer 2 on tile 0: .*vxm_tables = 8"):
        compile_resident_tray(per_expert.specs, CFG, STEADY_TILES)
    with pytest.raises(CompileError, match=r"layer \d: tile \d: .* mem_depth = 1024"):
        compile_resident_tray(model.specs, CFG.with_overrides(["mem_depth=1024"]), STEADY_TILES)


def test_the_golden_loop_carries_the_tray_from_run_to_run(steady):
    """On the system golden model the tray's memories carry from run to run: per run the
    host writes x, the routing and the entry; every run's writes, cycles and busy counters as
    compiled, every expert's output moe_int's, the tokens those of the loop with moe_int,
    a layer's program and wall cycles the same for every token."""
    model, _, _ = steady
    g = run_moe_tray(model, [1], 2, CFG, STEADY_TILES, resident=True)
    assert not g["problems"], g["problems"][:5]
    assert g["resident"] and g["tokens"] == generate(model, [1], 2, IntFfn(model))
    L = STEADY_MOE["layers"]
    assert len(set(per_position(g["runs"], L))) == 1 and len(set(per_position(g["runs"], L, "wall_cycles"))) == 1
    for r in g["runs"]:
        assert set(r["bytes"]) == {"x", "routing", "entry"} and r["rounds"] == 1


@pytest.mark.sim
@pytest.mark.long
@pytest.mark.timeout(75 * 60)      # the suite's largest Verilator build: 8 default tiles, 46 MB of Verilog
@pytest.mark.parametrize("simulator", SIMS)
def test_16_tokens_on_a_tray_that_never_stops(simulator):
    """The 4-layer, 16-expert MoE decoder generates 16 tokens (2 on Icarus) on 8 default RTL
    tiles in one testbench session (every tile on its own clock, --clock-seed 1's draw): one reset and clock start per tile
    before the first load, none after; per run (run_tray_rtl's checks) every tile's writes,
    cycles and busy counters against the system golden model, every expert's output
    against moe_int, the wall cycles as c2c.wall_cycles predicts, no fault, the HAC locked;
    the tokens the golden loop's; program and wall cycles the same for every token; after
    the first load each run writes x's rows (the compiler's count), the routing and the
    entry, and reloads nothing."""
    tokens = 16 if simulator in FAST_SIM else 2       # Icarus: about 20 s a run on this tray
    g = run_tray_rtl(STEADY_MOE, [1], tokens, CFG, STEADY_TILES, simulator, clock_seed=1)
    assert not g["problems"], g["problems"][:5]
    assert g["rtl_tokens"] == g["tokens"] and len(g["tokens"]) == tokens
    assert g["resets"] == [1] * STEADY_TILES and g["clock_starts"] == [1] * STEADY_TILES
    L = STEADY_MOE["layers"]
    cycles = per_position(g["runs"], L, "rtl_cycles")
    walls = per_position(g["runs"], L, "rtl_wall_cycles")
    assert len(set(cycles)) == 1 and len(set(walls)) == 1, (cycles, walls)
    assert cycles == per_position(g["runs"], L, "cycles")       # the golden loop's, run by run
    for n, r in enumerate(g["runs"][1:], 1):
        b = r["rtl_bytes_in"]
        assert b["reloaded"] == 0 and b["x"] > 0 and b["routing"] > 0, (n, b)
    assert np.all([r["rounds"] == 1 for r in g["runs"]])
