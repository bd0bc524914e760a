"""The bench history (sim/bench/history.py): entries from bench and synthesis results, appending and
reading back, the picture over commits, malformed files, the command line.  No simulator."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from lpu_arch import TileConfig

from sim.bench import history
from sim.bench.history import HistoryError


def bench_result(verilator=50_000.0, icarus=700.0, cycles=1563, speedup=6.13, sims=("verilator", "icarus")):
    """A small bench.json as sim.bench.suite writes it (two FFNs, a tray, an MoE row, a build)."""
    ffn = []
    for sim in sims:
        ffn += [{"simulator": sim, "ffn": "swiglu 16x16 b1", "kind": "swiglu", "H": 16, "I": 16, "batch": 1,
                 "cycles": 43, "predicted": 43, "sram_bound": 6, "mac_bound": 2, "ratio_to_sram_bound": 7.1667,
                 "mxm_utilisation": 0.05, "exact": True, "target": "none", "meets_target": None},
                {"simulator": sim, "ffn": "swiglu 128x512 b1", "kind": "swiglu", "H": 128, "I": 512, "batch": 1,
                 "cycles": cycles, "predicted": cycles, "sram_bound": 1536, "mac_bound": 384,
                 "ratio_to_sram_bound": round(cycles / 1536, 4), "mxm_utilisation": 0.25,
                 "exact": sim == "verilator" or True, "target": "<= 1.15x SRAM bound",
                 "meets_target": cycles <= 1.15 * 1536}]
    speeds = {"verilator": verilator, "icarus": icarus}
    return {"config": TileConfig.default().to_dict(), "host": "test", "ffn": ffn,
            "speed": [{"simulator": s, "program": "ffn suite", "cycles": 7541, "run_seconds": 7541 / speeds[s],
                       "cycles_per_second": speeds[s]} for s in sims]
            + [{"simulator": "verilator", "program": "sweep (8 copies)", "cycles": 9000, "run_seconds": 0.1,
                "cycles_per_second": 90000.0}],
            "loading": [{"simulator": "verilator", "path": "port", "bytes": 810304, "load_seconds": 1.2,
                         "bytes_per_second": 675253}],
            "build": [{"simulator": "verilator", "config": "default", "key": "k", "build_seconds": 48.0,
                       "verilog_seconds": 12.0}],
            "builds_used": {"verilator": {"fresh": True, "seconds": 61.0, "verilog_seconds": 12.0}},
            "tray": [{"tiles": 1, "ffn": "swiglu 128x512 b1", "cycles": cycles, "speedup": 1.0, "c2c_share": 0.0,
                      "exact": True},
                     {"tiles": 8, "ffn": "swiglu 128x512 b1", "cycles": round(cycles / speedup),
                      "speedup": speedup, "c2c_share": 0.2, "link_vectors": 56, "exact": True}],
            "moe": [{"mapping": "ep", "routing": "spread", "tiles": 8, "tokens": 1, "capacity": 2,
                     "rounds": 1, "cycles": 300, "cycles_per_token": 300.0, "needed_bound_per_token": 260,
                     "ratio_to_needed_bound": 1.154, "batch_bound_per_token": 260, "ratio_to_batch_bound": 1.154,
                     "meets_target": True, "weight_bytes_read_per_token": 1000,
                     "needed_weight_bytes_per_token": 1000, "exact": True}],
            "model": [], **({"verilator_over_icarus": round(verilator / icarus, 2)} if len(sims) == 2 else {})}


def git(commit="a" * 40, dirty=False, date="2026-12-01T10:00:00+00:00"):
    return {"commit": commit, "short": commit[:7], "subject": "test", "commit_date": date, "dirty": dirty,
            "dirty_files": ["hdl/top/tile.py"] if dirty else []}


def synth_report(luts=20_000, fmax=55.3):
    return {"board": "ulx3s-85f", "device": "LFE5U-85F", "config": {**TileConfig.preset("tiny").to_dict(),
                                                                   "trace_depth": 0},
            "utilization": {"LUT4": {"used": luts, "available": 83640},
                            "flip-flops": {"used": 9000, "available": 83640},
                            "block RAMs (DP16KD)": {"used": 40, "available": 208},
                            "DSPs (MULT18X18D)": {"used": 20, "available": 156}},
            "placed": True, "fits": True, "fmax_mhz": {"clk": fmax, "uart": 90.0}, "board_clock_mhz": 25.0,
            "flow_seconds": 600.0}


def test_bench_entry_keeps_the_figures():
    e = history.bench_entry(bench_result(), git(), date="2026-12-01T11:00:00+00:00",
                            targets={"tray": 6.0})
    assert e["kind"] == "bench" and e["schema"] == history.SCHEMA and e["config"] == "default"
    assert e["commit"] == "a" * 40 and e["dirty"] is False and e["date"] == "2026-12-01T11:00:00+00:00"
    assert e["simulators"] == ["verilator", "icarus"]
    # One row per FFN (the first simulator's cycles), exact only if exact on every simulator.
    assert [r["ffn"] for r in e["ffn"]] == ["swiglu 16x16 b1", "swiglu 128x512 b1"]
    assert e["ffn"][1]["cycles"] == 1563 and e["ffn"][1]["sram_bound"] == 1536 and e["ffn"][1]["exact"]
    assert e["speed"] == {"verilator": {"cycles": 7541, "run_seconds": 7541 / 50000.0, "cycles_per_second": 50000.0},
                          "icarus": {"cycles": 7541, "run_seconds": 7541 / 700.0, "cycles_per_second": 700.0}}
    assert e["verilator_over_icarus"] == round(50000 / 700, 2)
    assert [r["speedup"] for r in e["tray"]] == [1.0, 6.13]
    assert e["moe"][0]["cycles_per_token"] == 300.0 and e["moe"][0]["ratio_to_needed_bound"] == 1.154
    assert e["build_seconds"] == {"default": 48.0} and e["builds_used"]["verilator"]["seconds"] == 61.0
    assert e["loading"] == {"verilator/port": 675253} and e["targets"] == {"tray": 6.0}
    assert e["attention"] == e["token_loop"] == e["bert_loop"] == []     # (this bench ran none)
    json.dumps(e)                     # one JSON line


def test_bench_entry_keeps_the_on_chip_figures():
    """The attention step's, the token loop's and the int8 MiniLM's rows are recorded too."""
    result = bench_result()
    result["attention"] = [{"context": 16, "blocks": 1, "heads": 2, "cycles": 400, "predicted": 400, "read_bound": 64,
                            "ratio_to_read_bound": 6.25, "exact": True}]
    result["token_loop"] = [{"model": "m", "tokens": 16, "per_call": 16, "runs": 1, "cycles_per_token": 904.0,
                             "first_token_cycles": 1715, "weight_read_bound": 182, "ratio_to_bound": 4.97,
                             "iq_needed": 4044, "top1_agreement_with_float": 0.979, "passed": True}]
    result["bert_loop"] = [{"model": "minilm", "positions": 64, "agree": 53, "top1_agreement": 0.8281,
                            "logit_cosine_mean": 0.9836, "logit_cosine_min": 0.9513}]
    e = history.bench_entry(result, git())
    assert e["attention"][0]["cycles"] == 400 and "blocks" not in e["attention"][0]
    assert e["token_loop"][0]["cycles_per_token"] == 904.0 and e["token_loop"][0]["passed"]
    assert e["bert_loop"][0]["agree"] == 53 and e["bert_loop"][0]["logit_cosine_mean"] == 0.9836


def test_bench_entry_of_an_older_bench_and_a_non_bench_file():
    old = bench_result()
    for k in ("loading", "build", "builds_used", "moe", "model"):
        del old[k]                    # a bench of an older commit wrote less
    old["config"] = {k: v for k, v in old["config"].items() if k in ("lanes", "streams", "mem_slices", "mem_depth")}
    e = history.bench_entry(old, git())
    assert e["config"] == "default" and e["moe"] == [] and e["build_seconds"] == {}
    with pytest.raises(HistoryError, match="not a bench result"):
        history.bench_entry({"utilization": {}}, git())


def test_synth_entry():
    e = history.synth_entry(synth_report(), git())
    assert (e["kind"], e["config"], e["luts"], e["fmax_min_mhz"], e["block_rams"]) == ("synth", "tiny", 20_000, 55.3, 40)
    with pytest.raises(HistoryError, match="not a synthesis report"):
        history.synth_entry(bench_result(), git())


def test_append_and_read_back(tmp_path):
    path = tmp_path / "sub" / "history.jsonl"
    assert history.read(path) == []                      # no file yet: an empty history
    entries = [history.bench_entry(bench_result(), git()),
               history.bench_entry(bench_result(verilator=60_000), git("b" * 40, dirty=True)),
               history.synth_entry(synth_report(), git("b" * 40))]
    for e in entries:
        history.append(e, path)
    assert history.read(path) == entries
    assert len(path.read_text().splitlines()) == 3      # one line per entry
    # A last line cut short of its newline: the next entry still goes on a line of its own.
    path.write_text(path.read_text().rstrip("\n"))
    history.append(entries[0], path)
    assert history.read(path) == entries + entries[:1]
    with pytest.raises(HistoryError, match="missing"):
        history.append({"kind": "bench"}, path)


@pytest.mark.parametrize("line, message", [
    ("{not json", r":2: not JSON"),
    ("[1, 2]", r":2: not a JSON object but list"),
    ('{"schema": "lpu-history/1", "kind": "bench"}', r":2: missing commit, date, dirty"),
    ('{"schema": "other/9", "kind": "bench", "commit": "x", "date": "d", "dirty": false}', r":2: schema 'other/9'"),
    ('{"schema": "lpu-history/1", "kind": "run", "commit": "x", "date": "d", "dirty": false}', r":2: kind 'run'"),
])
def test_malformed_file_is_a_clear_error(tmp_path, line, message, capsys):
    path = tmp_path / "history.jsonl"
    history.append(history.bench_entry(bench_result(), git()), path)
    with open(path, "a") as f:
        f.write(line + "\n\n")
    with pytest.raises(HistoryError, match=message) as err:
        history.read(path)
    assert str(path) in str(err.value)
    assert history.main(["draw", "--file", str(path), "--out", str(tmp_path / "h.svg")]) == 2
    assert f"error: {path}:2:" in capsys.readouterr().err
    assert not (tmp_path / "h.svg").exists()


def synthetic_history(path):
    """Three commits (the second run twice, once on a dirty tree), a speed regression on the
    third, a synthesis report, and a run of another configuration."""
    runs = [(git("1" * 40, date="2026-11-30T00:00:00+00:00"), bench_result(verilator=25_000, icarus=450)),
            (git("2" * 40, date="2026-12-01T00:00:00+00:00"), bench_result(verilator=60_000, icarus=800)),
            (git("2" * 40, True, date="2026-12-01T00:00:00+00:00"), bench_result(verilator=61_000, icarus=790)),
            (git("3" * 40, date="2026-12-01T05:00:00+00:00"), bench_result(verilator=30_000, icarus=800,
                                                                            cycles=1600, speedup=5.9))]
    for n, (g, r) in enumerate(runs):
        history.append(history.bench_entry(r, g, date=f"2026-12-02T0{n}:00:00+00:00",
                                           targets={"decode": 1.15, "tray": 6.0, "moe": 1.25}), path)
    history.append(history.synth_entry(synth_report(), git("3" * 40), date="2026-12-02T09:00:00+00:00"), path)
    tiny = bench_result(sims=("verilator",))
    tiny["config"] = TileConfig.preset("tiny").to_dict()
    history.append(history.bench_entry(tiny, git("3" * 40), date="2026-12-02T10:00:00+00:00"), path)
    # Imported later, the first commit's run still goes left of the others.
    history.append(history.bench_entry(bench_result(verilator=24_000), git("1" * 40, date="2026-11-30T00:00:00+00:00"),
                                       date="2026-12-02T11:00:00+00:00"), path)


@pytest.mark.parametrize("suffix", [".svg", ".png"])
def test_draw_a_small_history(tmp_path, suffix):
    path = tmp_path / "history.jsonl"
    synthetic_history(path)
    out = history.draw(history.read(path), tmp_path / "out" / f"history{suffix}")
    assert out.exists() and out.stat().st_size > 10_000
    if suffix == ".svg":
        text = out.read_text()
        # Commits oldest first, the dirty run marked, the synthesis report's panels there.
        assert text.index("1111111") < text.index("2222222") < text.index("2222222*") < text.index("3333333")
        assert "LUT4s used" in text and "Fmax" in text and "target 6" in text
        assert "5 runs over 4 commits, 1 synthesis report" in text
        assert 'Date' not in text.split("<svg", 1)[0]    # no date in the file: same picture, same bytes
    tiny = history.draw(history.read(path), tmp_path / f"tiny{suffix}", config="tiny", last=1)
    assert tiny.exists()


def test_draw_errors(tmp_path):
    path = tmp_path / "history.jsonl"
    with pytest.raises(HistoryError, match="the history is empty"):
        history.draw(history.read(path), tmp_path / "h.svg")
    history.append(history.bench_entry(bench_result(), git()), path)
    with pytest.raises(HistoryError, match="no bench runs of the 'tiny' configuration.*has default"):
        history.draw(history.read(path), tmp_path / "h.svg", config="tiny")
    with pytest.raises(HistoryError, match="'.pdf'"):
        history.draw(history.read(path), tmp_path / "h.pdf")


def test_speed_against_the_baseline(tmp_path):
    entries = [history.bench_entry(bench_result(verilator=20_000, icarus=400), git(history.BASELINE + "0" * 33)),
               history.bench_entry(bench_result(verilator=25_000, icarus=350), git(history.BASELINE + "0" * 33)),
               history.bench_entry(bench_result(), git())]
    assert history.baseline_speed(entries) == {"verilator": 25_000, "icarus": 400}
    lines = history.speed_lines(entries, {"verilator": 75_000, "icarus": 800})
    assert lines[0].startswith("verilator: 75,000 tile-cycles/s, 3.00x the f83d8c0 build's 25,000")
    assert "2.00x" in lines[1]
    assert history.speed_lines(entries[2:], {"verilator": 1.0}) == []


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_git_state_marks_a_dirty_tree(tmp_path):
    def run(*args):
        subprocess.run(["git", "-C", str(tmp_path), *args], check=True, capture_output=True)
    run("init", "-q")
    (tmp_path / "tile.py").write_text("x = 0\n")
    run("add", "tile.py")
    run("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "first commit")
    (tmp_path / "bench" / "results").mkdir(parents=True)
    (tmp_path / "bench" / "history.jsonl").write_text("")
    (tmp_path / "bench" / "results" / "bench.json").write_text("{}")
    clean = history.git_state(tmp_path)
    assert clean["dirty"] is False and clean["subject"] == "first commit" and len(clean["commit"]) == 40
    (tmp_path / "tile.py").write_text("x = 1\n")            # " M tile.py": the path whole
    (tmp_path / "new.py").write_text("")
    dirty = history.git_state(tmp_path)
    assert dirty["dirty"] is True and dirty["dirty_files"] == ["tile.py", "new.py"]
    assert dirty["commit"] == clean["commit"]
    # Another commit named explicitly: as given, not the work tree's state.
    assert history.git_state(tmp_path, commit="HEAD", dirty=False)["dirty"] is False
    with pytest.raises(HistoryError, match="not a commit"):
        history.git_state(tmp_path, commit="no-such-rev")
    assert history.git_state(tmp_path / "bench")["commit"] == clean["commit"]
    outside = tmp_path.parent / f"{tmp_path.name}-not-a-repo"
    outside.mkdir()
    if subprocess.run(["git", "-C", str(outside), "rev-parse"], capture_output=True).returncode:
        assert history.git_state(outside)["commit"] == "unknown"


def test_command_line(tmp_path, capsys):
    path, svg = tmp_path / "history.jsonl", tmp_path / "h.svg"
    bench_json, report = tmp_path / "bench.json", tmp_path / "report.json"
    bench_json.write_text(json.dumps(bench_result()))
    report.write_text(json.dumps(synth_report()))
    assert history.main(["add-bench", str(bench_json), "--file", str(path), "--commit", "HEAD"]) == 0
    assert history.main(["add-bench", str(bench_json), "--file", str(path), "--commit", "HEAD", "--dirty"]) == 0
    assert history.main(["add-synth", str(report), "--file", str(path), "--commit", "HEAD"]) == 0
    entries = history.read(path)
    assert [e["kind"] for e in entries] == ["bench", "bench", "synth"]
    assert [e["dirty"] for e in entries] == [False, True, False]
    assert history.main(["--file", str(path), "--out", str(svg)]) == 0 and svg.exists()   # draw by default
    assert history.main(["show", "--file", str(path)]) == 0
    out = capsys.readouterr().out
    assert "tile-cycles/s: verilator 50,000, icarus 700; 8-tile speed-up: 6.13x" in out
    assert "LFE5U-85F: 20000 LUT4, Fmax 55.3 MHz" in out
    bench_json.write_text("{")
    assert history.main(["add-bench", str(bench_json), "--file", str(path)]) == 2
    assert "not JSON" in capsys.readouterr().err
    assert history.main(["add-bench", str(tmp_path / "none.json"), "--file", str(path)]) == 2
    assert history.main(["add-bench", str(report), "--file", str(path), "--commit", "no-such-rev"]) == 2
    assert "not a commit" in capsys.readouterr().err
    assert len(history.read(path)) == 3                  # nothing appended by a failed command
    for argv in (["--help"], ["draw", "--help"], ["add-bench", "--help"], ["add-synth", "--help"]):
        with pytest.raises(SystemExit) as e:
            history.main(argv)
        assert e.value.code == 0
    assert "add-synth" in capsys.readouterr().out


def test_the_bench_records_its_run(tmp_path, capsys):
    """sim.bench.suite's last step: the run appended to the history, drawn, and its speed compared
    with the baseline commit's runs (no simulator: a result as run_ffns returns it)."""
    from sim.bench import suite as bench
    path, svg = tmp_path / "history.jsonl", tmp_path / "results" / "history.svg"
    history.append(history.bench_entry(bench_result(verilator=20_000, icarus=400),
                                       git(history.BASELINE + "0" * 33, date="2026-11-30T00:00:00+00:00")), path)
    bench.record_history(bench_result(verilator=60_000, icarus=800), git(dirty=True), "default",
                         TileConfig.default(), path, svg)
    entries = history.read(path)
    assert len(entries) == 2 and entries[1]["dirty"] and entries[1]["config_key"] == TileConfig.default().key()
    assert entries[1]["targets"]["tray"] == bench.TRAY_TARGET and svg.exists()
    out = capsys.readouterr().out
    assert "aaaaaaa, dirty tree; 2 default runs" in out
    assert "verilator: 60,000 tile-cycles/s, 3.00x the f83d8c0 build's 20,000" in out
    with open(path, "a") as f:
        f.write("oops\n")
    bench.record_history(bench_result(), git(), "default", TileConfig.default(), path, svg)
    assert f"error: the history: {path}:3: not JSON" in capsys.readouterr().err
