"""lpu attention: the flow's report (golden model), its argument errors, --out for lpu show,
and the bench's rows of cycles against context length."""

import json

from sim.cli.main import main
from sim.bench.attention import cycle_rows
from sim.flows.attention import STEP_FILE, attention_config, read_bound, run_attention


def test_flow_passes_and_cycles_grow_with_blocks():
    rep = run_attention(attention_config(), 2, [1, 16, 17, 64])
    assert rep.passed, rep.problems
    cyc = [r["cycles"] for r in rep.rows]
    assert cyc[0] == cyc[1] < cyc[2] < cyc[3]
    assert all(r["cycles"] == r["predicted"] for r in rep.rows)
    assert [r["bound"] for r in rep.rows] == [read_bound(attention_config(), 2, nb) for nb in (1, 1, 2, 4)]


def test_cli_json(capsys):
    assert main(["attention", "--no-run", "--lengths", "3,20", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["passed"] and [r["L"] for r in out["lengths"]] == [3, 20]
    assert out["simulator"] == "golden model" and all("rtl_cycles" not in r for r in out["lengths"])


def test_cli_rejects_a_context_beyond_the_cache(capsys):
    assert main(["attention", "--lengths", "65"]) == 2
    assert "1..64" in capsys.readouterr().err


def test_out_writes_the_step_and_lpu_show_draws_it(tmp_path, capsys):
    d = tmp_path / "step"
    assert main(["attention", "--no-run", "--lengths", "5,40", "--out", str(d)]) == 0
    step = json.loads((d / STEP_FILE).read_text())
    assert step["L"] == 40 and step["nb"] == 3 and len(step["bases"]) == attention_config().base_regs
    assert step["sram_read_bound"] == read_bound(attention_config(), 2, 3)
    again = run_attention(attention_config(), 2, [40])
    assert step["predicted_cycles"] == again.rows[0]["predicted"]
    capsys.readouterr()
    assert main(["show", str(d), "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["chart"] == str(d / "schedule.svg") and (d / "schedule.svg").stat().st_size == shown["bytes"] > 0
    assert f"context 40 (3 blocks of 16) on the 16-lane tile: {step['predicted_cycles']:,} cycles predicted" in \
        (d / "schedule.svg").read_text()
    assert main(["attention", "--no-run", "--lengths", "7", "--out", str(d)]) == 2      # another program: --force
    assert "--force" in capsys.readouterr().err


def test_bench_rows_cycles_against_context():
    rows = cycle_rows()
    assert [r["context"] for r in rows] == [16, 32, 48, 64] and all(r["exact"] for r in rows)
    assert [r["read_bound"] for r in rows] == [read_bound(attention_config(), 2, nb) for nb in (1, 2, 3, 4)]
    assert all(r["cycles"] == r["predicted"] for r in rows)
    assert [r["cycles"] for r in rows] == sorted({r["cycles"] for r in rows})
