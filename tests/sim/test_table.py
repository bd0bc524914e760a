"""The table helper (sim/table.py): Markdown and aligned text laid out as the bench and the
``lpu`` command print them.  No simulator."""

from __future__ import annotations

import pytest

from sim.table import Column, Table


def test_markdown_table():
    t = Table("FFN", Column("cycles", align=">"), "exact")
    assert t.markdown([["swiglu 8x16 b1", 53, "yes"], ["classic", 1.5, None]]) == [
        "| FFN | cycles | exact |", "|---|---:|---|", "| swiglu 8x16 b1 | 53 | yes |", "| classic | 1.5 | None |"]
    with pytest.raises(ValueError, match="2 cells in a table of 3"):
        t.markdown([["a", 1]])


def test_text_table_pads_each_column():
    """Widths pad (a wider cell is not cut), gaps separate, and a line may stop early: the
    header's last column here is a note the rows leave out."""
    t = Table(Column("tile", 4, ">"), Column("ppm", 9, ">"), Column("link faults", 12, gap=2),
              Column("verdict"), Column("(note)", gap=3))
    assert t.head() == "tile       ppm  link faults  verdict   (note)"
    assert t.line(0, f"{812.94:+.1f}", "none", "yes") == "   0    +812.9  none         yes"
    assert t.line(12345, "x") == "12345         x"
    assert t.text([[1, 2]], head=False) == ["   1         2"]
    with pytest.raises(ValueError, match="6 cells"):
        t.line(*range(6))
    with pytest.raises(ValueError, match="align"):
        Column("x", align="^")


def test_markdown_rows_one_at_a_time():
    """A note under a row (the speed table's missing reference): the header and each row apart."""
    t = Table("simulator", Column("speed-up", align=">"))
    assert t.markdown_head() == ["| simulator | speed-up |", "|---|---:|"]
    assert t.markdown_row("icarus", "-") == "| icarus | - |"
