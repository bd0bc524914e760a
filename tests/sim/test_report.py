"""A flow's report (sim/report.py): the JSON in the flow's key order, figures left out of
it, the rows and the problems.  No simulator."""

from __future__ import annotations

import json

import pytest

from sim.report import Report


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
