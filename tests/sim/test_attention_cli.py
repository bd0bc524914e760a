"""lpu attention: the flow's report (golden model) and its argument errors."""

import json

from sim.cli.main import main
from sim.flows.attention import attention_config, read_bound, run_attention


def test_flow_passes_and_cycles_grow_with_blocks():
    rep = run_attention(attention_config(), 2, [1, 16, 17, 64])
    assert rep.passed, rep.problems
    cyc = [r["cycles"] for r in rep.rows]
    assert cyc[0] == cyc[1] < cyc[2] < cyc[3]
    assert all(r["cycles"] == r["predicted"] for r in rep.rows)
    assert [r["bound"] for r in rep.rows] == [read_bound(attention_config(), 2, nb) for nb in (1, 1, 2, 4)]


def test_cli_json(capsys):
    assert main(["attention", "--lengths", "3,20", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["passed"] and [r["L"] for r in out["lengths"]] == [3, 20]


def test_cli_rejects_a_context_beyond_the_cache(capsys):
    assert main(["attention", "--lengths", "65"]) == 2
    assert "1..64" in capsys.readouterr().err
