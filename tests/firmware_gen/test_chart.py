"""Charts are files the project keeps and compares (docs/img/, bench/results/): the same
picture must give the same bytes."""

import matplotlib

from lpu_arch import TileConfig
from firmware_gen.chart import schedule_chart
from firmware_gen.compiler.ffn_example import example_ffn
from firmware_gen.compiler.ffn import compile_ffn


def test_the_same_chart_is_the_same_svg(tmp_path):
    ex = example_ffn("swiglu", 8, 16, 1, seed=2)
    program = compile_ffn(ex.spec, ex.x_int8, TileConfig.tiny())[0]
    salt = matplotlib.rcParams["svg.hashsalt"]
    a = schedule_chart(program, tmp_path / "a.svg").read_bytes()
    b = schedule_chart(program, tmp_path / "b.svg").read_bytes()
    assert b'clip-path="url(#' in a          # ids matplotlib derives from its salt
    assert a == b
    assert matplotlib.rcParams["svg.hashsalt"] == salt      # the salt is set for the save alone


def test_every_data_opcode_has_a_colour():
    """The schedule picture draws every data instruction in its opcode's colour: a new opcode
    without one would stop ``lpu show`` with a KeyError."""
    from firmware_gen.chart import OP_COLOURS
    from lpu_arch.isa import DATA_OPS
    assert set(DATA_OPS) <= set(OP_COLOURS), sorted(o.name for o in set(DATA_OPS) - set(OP_COLOURS))
