"""A flow's report (sim/report.py) and the table helper (sim/table.py): the JSON in the
flow's key order, figures left out of it, rows; Markdown and aligned text laid out as the
bench and the ``lpu`` command print them.  No simulator."""

from __future__ import annotations

import json

import pytest

from sim.report import Report
from sim.table import Column, Table


# ---- Report --------------------------------------------------------------------------------------
def test_report_json_keeps_the_flows_order():
    data = {"passed": False, "simulator": "icarus", "cycles": 53, "problems": ["tile 0: late"], "build_dir": "b"}
    r = Report.of("ffn", data)
    assert (r.flow, r.passed, r.problems, r.rows) == ("ffn", False, ["tile 0: late"], [])
    assert r.figures == {"simulator": "icarus", "cycles": 53, "build_dir": "b"}
    assert json.dumps(r.to_json()) == json.dumps(data)          # the same keys, in the same order


def test_report_rows_and_problems_kept_out_of_the_json():
    """A tray's JSON has its rows under ``tile`` and no top-level problems: the report's
    problems (given apart) and its figures for the text only stay out of it."""
    data = {"ran": True, "passed": True, "tile": [{"tile": 0, "cycles": 9}], "bit_exact": True}
    r = Report.of("tray", data, rows_key="tile", problems=[], figures={"identical_every_token": True},
                  observed=[{"raw": 1}])
    assert r.rows == [{"tile": 0, "cycles": 9}] and r.observed == [{"raw": 1}]
    assert r.figures["identical_every_token"] and list(r.to_json()) == ["ran", "passed", "tile", "bit_exact"]
    assert r.to_json() == data
    with pytest.raises(ValueError, match="problems"):
        Report.of("ffn", {"passed": True, "problems": []}, problems=["twice"])


def test_report_default_layout():
    r = Report("copy", True, [], {"cycles": 46}, [{"tile": 0}], "tiles")
    assert list(r.to_json().items()) == [("passed", True), ("cycles", 46), ("problems", []), ("tiles", [{"tile": 0}])]


# ---- Table ---------------------------------------------------------------------------------------
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
