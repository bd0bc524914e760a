"""The `lpu` command line end to end (compile, sim, show, tray, c2c, bench, synth's argument
checks), its schedule and tray pictures, progress from the testbench's log and the GTKWave
view written with waveforms."""

import io
import json
import shutil
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest

from lpu_arch import TileConfig
from firmware_gen.golden import archmodel
from firmware_gen.chart import schedule_chart, stream_occupancy, tray_chart, tray_transfers
from firmware_gen.compiler.ffn_example import example_ffn
from lpu_arch.isa import Op
from firmware_gen.program import Program
from sim.cli import main as cli
from sim.harness.compiled import CompiledFfn
from firmware_gen.golden.numerics import ffn_int
from lpu_arch.topology import Topology
from firmware_gen.compiler.tray import compile_ffn_tray, tray_config
from sim.flows.tray import TRAY_H, TRAY_I, tray_tile_config
from sim.harness.progress import LogWatcher, ProgressPrinter

from tests.helpers import SIMS, each_sim

TINY = ["--config", "tiny", "--H", "8", "--I", "16"]
LPU = Path(sys.executable).parent / "lpu"


def run(capsys, *argv):
    code = cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    """One tiny SwiGLU compiled once for the tests that only read it."""
    d = tmp_path_factory.mktemp("ffn")
    assert cli.main(["compile", *TINY, "--out", str(d)]) == 0
    return d


# ---- help and errors --------------------------------------------------------------------------
@pytest.mark.parametrize("sub, words", [
    ("compile", ["--kind", "--weights", "W3", "--config", "--out", "--json"]),
    ("sim", ["--sim", "--waves", "gtkwave", "Exit status"]),
    ("show", ["--chart", "--window", "occupancy"]),
    ("bench", ["--sims", "--sweep", "--json"]),
    ("synth", ["--board", "ulx3s-85f", "--config"]),
    ("tray", ["--tiles", "--chart", "--no-run", "--sim", "SAC", "SENDM", "Exit status"]),
    ("c2c", ["--ppm", "--latency", "--plot", "HAC error", "--beyond-spec", "Exit status"]),
    ("moe", ["--experts", "--top-k", "--capacity", "--mapping", "--routing", "--weights", "rounds", "Exit status"]),
    ("plan", ["--model", "--hf-config", "--dtype", "lp30", "--no-golden", "Placement rule"]),
    ("attention", ["--heads", "--lengths", "--no-run", "--out", "--sim", "sxm_max", "Exit status"]),
])
def test_every_subcommand_has_a_complete_help(capsys, sub, words):
    with pytest.raises(SystemExit) as e:
        cli.main([sub, "--help"])
    assert e.value.code == 0
    text = capsys.readouterr().out
    for w in words:
        assert w in text, (sub, w)


@pytest.mark.parametrize("argv, names", [
    (["compile", "--H", "0"], "--H: must be a positive integer, got '0'"),
    (["compile", "--config", "huge"], "huge is neither a preset (default, tiny, board, full_scale, lp30) nor a configuration file"),
    (["compile", "--config", "tiny", "--H", "512", "--I", "512"], "does not fit the tile's SRAM"),
    (["compile", "--weights", "no/such.npz"], "weights file no/such.npz does not exist"),
    (["compile", "--weights", "x.npz", "--H", "8"], "--H cannot be used with --weights"),
    (["show", "no/such/dir"], "no/such/dir is not a compiled program directory"),
    (["show", *TINY, "--chart", "schedule.pdf"], "cannot write a chart as '.pdf'"),
    (["show", *TINY, "--window", "9:3"], "--window: expected FIRST:LAST"),
    (["sim", "--sim", "modelsim"], "invalid choice: 'modelsim'"),
    (["bench", "--sims", "verilator,xsim"], "unknown simulator(s) xsim"),
    (["bench", "--build-configs", "tiny,huge"], "unknown preset(s) huge"),     # before any run
    (["sim", "--copy", "--json"], "--copy runs its own program and prints a table: leave out --json"),
    (["sim", "--copy", "--H", "8", "--weights", "w.npz"], "leave out --H, --weights"),
    (["bench", "--config", "tiny", "--dtype", "fp8"], "--dtype fp8 on the tiny tile: streams per direction must be"),
    (["synth", "--board", "ulx3s-99f"], "invalid choice: 'ulx3s-99f'"),
    (["synth", "--baud", "fast"], "--baud: must be a positive integer"),
    (["frobnicate"], "invalid choice: 'frobnicate'"),
    (["tray", "--tiles", "3"], "argument --tiles: a tray has 2, 4 or 8 tiles (all-to-all links), got '3'"),
    (["tray", "--no-run", "--chart", "tray.pdf"], "cannot write a picture as '.pdf'"),
    (["tray", "--no-run", "--window", "0:50"], "--window limits the picture: give --chart FILE"),
    (["tray", "--no-run", "--H", "64", "--I", "128"], "the FFN is too large for a tray of 8 tiles"),
    (["c2c", "--ppm", "2000", "0"], "+2000 ppm is beyond the configuration's tolerance"),
    (["c2c", "--latency", "99"], "link latency 99 is outside the declared range"),
    (["c2c", "--plot", "run.jpg"], "cannot write a picture as '.jpg'"),
    (["moe", "--no-run", "--routing", "99,0"], "expert 99 does not exist: the layer has experts 0..7"),
    (["moe", "--no-run", "--routing", "0,0"], "token 0's experts 0,0 repeat one"),
    (["moe", "--no-run", "--routing", "0"], "a routing names top-2 experts for each of 1 token(s), 2 indices; got 1"),
    (["decode", "--no-run", "--heads", "3"], "--H 8 must be a multiple of --heads 3"),
    (["decode", "--no-run", "--prompt", "1,x"], "--prompt: expected comma-separated token ids (integers >= 0), got '1,x'"),
    (["decode", "--no-run", "--prompt", "-1"], "got '-1'"),
    (["decode", "--no-run", "--prompt", "3,64"], "--prompt: token id 64 is outside the vocabulary (0..63, --vocab 64)"),
    (["compile", "--H", "100000", "--I", "100000"], "needs arrays of 10,000,000,000 float values; the limit is 134,217,728"),
    (["decode", "--no-run", "--tiles", "2", "--clock-seed", "3"], "--clock-seed draws the clocks of a tray on the RTL"),
    (["c2c", "--figures", "img", "--json"], "--figures writes pictures and no report: leave out --json"),
    (["moe", "--no-run", "--experts", "6"], "6 routed experts do not divide evenly over 4 tiles"),
    (["moe", "--no-run", "--routing", "0,x"], "a routing is one of router, spread"),
    (["moe", "--no-run", "--tiles", "8", "--experts", "16", "--top-k", "4", "--capacity", "3"],
     "capacity must be in 1..2"),
    (["moe", "--no-run", "--layer", "0"], "--layer and --model-config choose what to read from --weights"),
])
def test_bad_arguments_give_one_clear_line_and_exit_2(capsys, tmp_path, monkeypatch, argv, names):
    monkeypatch.chdir(tmp_path)
    if "x.npz" in argv:
        np.savez(tmp_path / "x.npz", W1=np.ones((4, 4)), W2=np.ones((4, 4)), x=np.ones(4))
    try:
        code = cli.main(argv)
    except SystemExit as e:          # argparse's own errors
        code = e.code
    out, err = capsys.readouterr()
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and names in lines[0], err
    assert "Traceback" not in err and not out


def test_installed_command(tmp_path):
    if not LPU.exists():
        pytest.skip("the lpu script is not installed (pip install -e .)")
    ok = subprocess.run([LPU, "--version"], capture_output=True, text=True)
    assert ok.returncode == 0 and ok.stdout.startswith("lpu ")
    bad = subprocess.run([LPU, "compile", "--batch", "-1"], capture_output=True, text=True, cwd=tmp_path)
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    assert bad.stderr.strip() == ("lpu compile: error: argument --batch: must be a positive integer, "
                                  "got '-1' (see lpu compile --help)")


# ---- compile ----------------------------------------------------------------------------------
def test_compile_writes_program_and_manifest(capsys, tmp_path):
    out = tmp_path / "ffn"
    code, text, _ = run(capsys, "compile", *TINY, "--batch", "2", "--out", out, "--json")
    assert code == 0
    s = json.loads(text)
    assert (s["kind"], s["H"], s["I"], s["batch"]) == ("swiglu", 8, 16, 2)
    assert s["cycles"] >= max(s["sram_bound"], s["mac_bound"]) and 0 < s["efficiency"] <= 1
    prog = Program.from_json((out / "program.json").read_text())
    assert prog.config == TileConfig.tiny()
    man = json.loads((out / "manifest.json").read_text())
    assert len(man["writes"]) == man["output_writes"] == 2 * 8 // 4      # batch x output blocks
    assert man["predicted_cycles"] == s["cycles"]
    c = CompiledFfn.load(out)
    assert c.manifest.cycles == s["cycles"] and c.y_int8.shape == (2, 8)
    # The human summary names shape, cycles, bounds and efficiency.
    code, text, _ = run(capsys, "compile", *TINY, "--out", tmp_path / "again")
    for w in ("H=8, I=16", "predicted cycles", "SRAM-read bound", "MAC bound", "efficiency"):
        assert w in text


def test_compile_weights_file(capsys, tmp_path):
    rng = np.random.default_rng(3)
    H, I = 6, 10
    np.savez(tmp_path / "classic.npz", W1=rng.normal(size=(I, H)), W2=rng.normal(size=(H, I)),
             b1=rng.normal(size=I) * 0.1, b2=rng.normal(size=H) * 0.1, x=rng.normal(size=(3, H)))
    code, text, _ = run(capsys, "compile", "--weights", tmp_path / "classic.npz", "--config", "tiny",
                        "--activation", "relu", "--out", tmp_path / "c", "--json")
    assert code == 0
    s = json.loads(text)
    assert (s["kind"], s["H"], s["I"], s["batch"], s["source"]["activation"]) == ("classic", H, I, 3, "relu")
    np.savez(tmp_path / "odd.npz", W1=np.ones((4, 4)), W2=np.ones((4, 4)), x=np.ones(4), W4=np.ones(2))
    code, _, err = run(capsys, "compile", "--weights", tmp_path / "odd.npz")
    assert code == 2 and "unknown array(s) W4" in err


# ---- show -------------------------------------------------------------------------------------
def test_show_svg_has_the_slices_and_opcodes(capsys, compiled, tmp_path):
    chart = tmp_path / "schedule.svg"
    code, text, _ = run(capsys, "show", compiled, "--chart", chart, "--json")
    assert code == 0 and json.loads(text)["chart"] == str(chart)
    assert chart.stat().st_size > 0
    root = ET.parse(chart).getroot()
    words = " ".join(t.strip() for el in root.iter() for t in [el.text or ""] if t.strip())
    for name in TileConfig.tiny().slice_names + ["READ", "LW", "MM", "LX", "VOP", "WRITE"]:
        assert name in words, name


def test_show_png_of_a_fresh_compile(capsys, tmp_path):
    chart = tmp_path / "pic.png"
    code, text, _ = run(capsys, "show", "--config", "tiny", "--kind", "classic", "--H", "8", "--I", "8",
                        "--out", tmp_path / "c", "--chart", chart, "--window", "0:30", "--asm")
    assert code == 0 and "chart:" in text and "[MXM_W]" in text
    assert chart.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (tmp_path / "c" / "program.json").exists()


def test_show_a_bare_program_json(capsys, tmp_path):
    """Any Program.to_json (here hand-written copies) can be pictured, without a manifest."""
    cfg = TileConfig.tiny()
    prog = Program.assemble(cfg, "[MEM_W1]\n READ E0, 0\n REPEAT 3, 1, +1\n[MEM_E1]\n NOP 5\n WRITE E0, 8\n"
                                 " REPEAT 3, 1, +1\n")
    (tmp_path / "copy.json").write_text(prog.to_json())
    code, text, _ = run(capsys, "show", tmp_path / "copy.json")
    assert code == 0 and (tmp_path / "copy.svg").stat().st_size > 0


def test_stream_occupancy_follows_a_value_to_its_reader():
    cfg = TileConfig.tiny()
    src, dst = cfg.position("MEM_W1"), cfg.position("MEM_E1")
    d = dst - src
    prog = Program.assemble(cfg, f"[MEM_W1]\n READ E2, 0\n[MEM_E1]\n NOP {1 + d}\n WRITE E2, 1\n"
                                 "[MEM_E0]\n READ E3, 0\n")           # MEM_E0's value: nobody reads it
    east, west = stream_occupancy(prog)
    want = np.zeros_like(east)
    for k in range(1, d + 1):                  # driven on cycle 1 at src, at src + k on cycle 1 + k
        want[src + k, 1 + k] = 1
    assert np.array_equal(east, want) and not west.any()


def test_long_program_renders_compactly(tmp_path):
    cfg = TileConfig.default()
    n = 12000
    d = cfg.position("MEM_E3") - cfg.position("MEM_W3")
    prog = Program.assemble(cfg, f"""
        [MEM_W3]
            READ E1, 0
            REPEAT {n}, 1, +0
        [MEM_E3]
            NOP {1 + d}
            WRITE E1, 5
            REPEAT {n // 2}, 2, +0
        [MEM_E2]
            READ W2, 7
            REPEAT {n // 3}, 3, +0
        [MEM_W0]
            NOP {1 + cfg.position('MEM_E2') - cfg.position('MEM_W0')}
            WRITE W2, 9
            REPEAT {n // 3}, 3, +0
        """)
    for ext in ("png", "svg"):
        schedule_chart(prog, tmp_path / f"long.{ext}")
    # What keeps it fast: one bar per run of one opcode, and rasterised beyond a few
    # thousand bars, so the vector file holds far fewer elements than the ~29,000 issues.
    svg = (tmp_path / "long.svg").read_text()
    assert "<image" in svg and sum(svg.count(t) for t in ("<path", "<use", "<image")) < 1000
    east, _ = stream_occupancy(prog)
    assert east.shape[1] > n and east.max() == 1


# ---- sim --------------------------------------------------------------------------------------
@pytest.mark.sim
def test_sim_passes_on_a_compiled_directory(capsys, compiled):
    sim = SIMS[0]
    code, text, err = run(capsys, "sim", compiled, "--sim", sim, "--json")
    r = json.loads(text)
    assert code == 0 and r["passed"], r
    assert r["cycles"] == r["predicted_cycles"] == r["golden_model_cycles"]
    assert r["bit_exact"] and r["writes_as_predicted"] and r["error_vs_float"]["cosine"] > 0.99
    assert f"[{sim}] job 1/1 loaded in" in err              # progress from the testbench's log
    assert f"[{sim}] job 1/1 done" in err
    assert "PASS: FFN on" in err                            # the table goes to stderr with --json
    tight = max(r["bounds"], key=r["bounds"].get)            # efficiency names the bound it divides
    assert r["efficiency"] == round(r["bounds"][tight] / r["cycles"], 4)
    assert f"tightest bound ({tight} {r['bounds'][tight]}) / cycles" in err, err


@pytest.mark.sim
def test_sim_copy_runs_the_data_movement_demo(capsys):
    """``lpu sim --copy``: the MEM-to-MEM scheduler's sweeps on the RTL, the cycle count as the
    scheduler predicts and the golden model runs it."""
    from sim.flows.ffn import demo_schedule
    s = demo_schedule(TileConfig.tiny(), 1)
    code, text, _ = run(capsys, "sim", "--copy", "--config", "tiny", "--sim", SIMS[0], "-q")
    assert code == 0 and "MISMATCH" not in text and "\nPASS: " in text, text
    cycles = s.predicted_cycles()
    assert f"cycles: predicted {cycles}, golden model {archmodel.run(s.program()).cycles}, hardware {cycles}" in text
    assert text.count(" match") == len(s.transfers)


def test_sim_copy_defaults_to_the_default_tile(capsys, monkeypatch):
    import sim.flows.ffn
    from sim.report import Report
    seen = []
    monkeypatch.setattr(sim.flows.ffn, "run_copy",
                        lambda cfg, sim_, seed, waves: seen.append((cfg, sim_, seed, waves)) or Report("copy", True))
    assert run(capsys, "sim", "--copy", "--sim", "icarus")[0] == 0
    assert run(capsys, "sim", "--copy", "--config", "tiny", "--seed", "5", "--waves")[0] == 0
    assert seen == [(TileConfig.default(), "icarus", 1, False), (TileConfig.tiny(), "verilator", 5, True)]


def test_c2c_testbench_failure_is_a_fail_not_a_traceback(capsys, monkeypatch):
    import sim.flows.c2c

    def broken(*args, **kw):
        raise RuntimeError("the testbench timed out")
    monkeypatch.setattr(sim.flows.c2c, "run_c2c", broken)
    code, text, err = run(capsys, "c2c", "--json", "-q")
    assert code == 1 and "FAIL: the testbench timed out" in err and "Traceback" not in err
    assert json.loads(text) == {"passed": False, "simulator": "verilator", "error": "the testbench timed out"}


def test_compile_fit_quantises_for_the_tiles_number_format(capsys):
    code, text, err = run(capsys, "compile", "--fit", "--dtype", "fp8", "--H", "64", "--I", "1024")
    assert code == 0 and 'mxm_dtype = "fp8"' in text, err


@pytest.mark.sim
def test_sim_fails_when_the_prediction_is_wrong(capsys, compiled, tmp_path):
    bad = tmp_path / "bad"
    shutil.copytree(compiled, bad)
    m = json.loads((bad / "manifest.json").read_text())
    m["writes"][0]["cycle"] += 1
    (bad / "manifest.json").write_text(json.dumps(m))
    code, text, _ = run(capsys, "sim", bad, "--sim", SIMS[0], "-q")
    assert code == 1 and "FAIL" in text and "compiler prediction" in text


@pytest.mark.sim
@pytest.mark.parametrize("sim", each_sim())       # Verilator's in make test-long: a build of its own
def test_sim_waves_write_a_gtkwave_view(capsys, tmp_path, sim):
    out = tmp_path / "w"
    code, text, err = run(capsys, "sim", "--config", "tiny", "--H", "4", "--I", "4", "--out", out, "--sim", sim,
                          "--waves", "-q")
    if code == 2 and "liblz4-dev" in err:
        pytest.skip("Verilator's FST waveforms need lz4's headers, not installed here (Debian: liblz4-dev, "
                    "which .ci/run installs)")
    assert code == 0, text
    view = out / "waves" / f"{sim}.gtkw"
    gtkw = view.read_text()
    dump = gtkw.split('[dumpfile] "')[1].split('"')[0]
    assert Path(dump).stat().st_size > 0 and f"gtkwave {view}" in text
    tile = "lpu_tile.core" if sim == "verilator" else "lpu_tile"     # under hdl/top/simtop.py's registers
    for name in TileConfig.tiny().slice_names:
        assert f"-{name} (position" in gtkw
        assert f"+{{{name} issue}} {tile}.icu_{name}.issue__valid" in gtkw
    assert f"+{{MEM_W0 drives W}} {tile}.slice_MEM_W0.drive__west__mask[3:0]" in gtkw
    assert f"+{{sac}} {tile}.sac[31:0]" in gtkw and f"+{{running}} {tile}.running" in gtkw
    ops = (out / "waves" / "lpu_ops.txt").read_text()
    assert f"{int(Op.READ)} READ" in ops and f"{int(Op.VOP)} VOP" in ops


def _watched(tmp_path, pieces) -> list[dict]:
    """The events a LogWatcher (2 jobs) sends while ``pieces`` of a testbench log are
    written, each piece followed by a pause of its seconds (lines may be split)."""
    log = tmp_path / "sim.log"
    log.write_text("")
    seen = []
    w = LogWatcher(log, 2, seen.append, tick_s=0.05, poll_s=0.02)
    with open(log, "a") as f:
        for text, pause in pieces:
            f.write(text)
            f.flush()
            time.sleep(pause)
    w.stop()
    return seen


def test_progress_events_from_the_log(tmp_path):
    seen = _watched(tmp_path, [("  5795.00ns INFO     cocotb.lpu_tile   job ffn: a: 41 cycles, 2 events\n", 0.2),
                               ("  9000.00ns INFO     cocotb.lpu_tile   job second: 1234 cycles, 0 ev", 0.1),
                               ("ents\n", 0)])
    jobs = [e for e in seen if e["event"] == "job"]
    assert [(e["index"], e["name"], e["cycles"], e["events"]) for e in jobs] == [(1, "ffn: a", 41, 2),
                                                                                 (2, "second", 1234, 0)]
    assert any(e["event"] == "tick" for e in seen)


def test_progress_loaded_event(tmp_path):
    """The testbench's "loaded, running" line becomes a "loaded" event (and the heartbeat
    says which phase a job is in); the job lines still count jobs."""
    seen = _watched(tmp_path, [
        ("  100.00ns INFO     cocotb.lpu_tile   job first: loaded, running\n", 0.2),
        ("  5795.00ns INFO     cocotb.lpu_tile   job first: 41 cycles, 2 events\n"
         "  6000.00ns INFO     cocotb.lpu_tile   job second: loa", 0.1),
        ("ded, running\n  9000.00ns INFO     cocotb.lpu_tile   job second: 1234 cycles, 0 events\n", 0)])
    kinds = [(e["event"], e.get("index"), e.get("name")) for e in seen if e["event"] != "tick"]
    assert kinds == [("loaded", 1, "first"), ("job", 1, "first"), ("loaded", 2, "second"), ("job", 2, "second")]
    jobs = [e for e in seen if e["event"] == "job"]
    assert all(e["run_seconds"] is not None and 0 <= e["run_seconds"] <= e["seconds"] for e in jobs)
    ticks = [e for e in seen if e["event"] == "tick"]
    assert ticks and {t["phase"] for t in ticks} <= {"loading", "running"}
    assert any(t["phase"] == "running" and t["done"] == 0 for t in ticks)   # between job 1's two lines

    out = io.StringIO()
    show = ProgressPrinter("icarus", stream=out, expected=[41, 1234])
    for ev in [e for e in seen if e["event"] != "tick"] + [{"event": "tick", "done": 0, "total": 2,
                                                           "phase": "running", "elapsed": 3.0}]:
        show(ev)
    text = out.getvalue()
    assert "[icarus] job 1/2 loaded in " in text and "s, running (predicted 41 cycles)" in text
    assert "[icarus] job 2/2 done: second, 1,234 cycles, 0 writes traced" in text
    assert "[icarus] running job 1/2, 3 s elapsed (predicted 41 cycles)" in text


# ---- tray and c2c -----------------------------------------------------------------------------
def _tray(tiles, preset="tiny", kind="swiglu", H=TRAY_H, I=TRAY_I, seed=1):
    """The tray the command compiles for these options, compiled here from the compiler itself."""
    ex = example_ffn(kind, H, I, 1, seed=seed)
    programs, man = compile_ffn_tray(ex.spec, ex.x_int8, tray_config(tray_tile_config(preset), tiles), tiles)
    return ex, programs, man


def test_tray_transfers_pair_every_send_with_its_recv():
    ex, programs, man = _tray(4, H=16, I=32)
    xs = tray_transfers(programs)
    assert len(xs) == man.transfers > 0
    assert all(x.recv - x.send >= man.min_distance for x in xs)
    topo = Topology(4)
    for x in xs:
        assert topo.peer(x.src, x.link) == (x.dst, x.dst_link)
        assert x.src_slice == programs[x.src].config.link_slice(x.link)
    # The sends are the golden model's, link by link.
    gold = archmodel.run_system(programs, topo.peer, man.min_distance)
    for t in range(4):
        assert sorted((v.sent, v.link) for v in gold[t].sent) == sorted((x.send, x.link) for x in xs if x.src == t)


def test_tray_no_run_draws_the_timeline(capsys, tmp_path):
    chart = tmp_path / "tray.svg"
    code, text, err = run(capsys, "tray", "--no-run", "--chart", chart, "--json")
    assert code == 0, err
    r = json.loads(text)
    _, programs, man = _tray(8)
    assert not r["ran"] and r["tiles"] == 8 and r["chart"] == str(chart)
    assert r["per_tile_predicted_cycles"] == [m.cycles for m in man.tile]
    assert r["transfers"] == man.transfers == sum(t["vectors_sent"] for t in r["per_tile"])
    assert chart.stat().st_size > 0
    root = ET.parse(chart).getroot()
    words = " ".join(t.strip() for el in root.iter() for t in [el.text or ""] if t.strip())
    for w in [f"tile {t}" for t in range(8)] + ["MEM", "MXM", "VXM", "SXM", "C2C", "SENDM", "RECV", "SEND -> RECV"]:
        assert w in words, w
    assert "predicted cycles" in err and "vectors sent" in err          # the table goes to stderr with --json
    # A tile's own schedule picture shows its C2C instructions too.
    schedule_chart(programs[3], tmp_path / "tile3.svg")
    assert "SENDM" in (tmp_path / "tile3.svg").read_text()


def test_eight_default_tiles_render_compactly(tmp_path):
    _, programs, man = _tray(8, "default", H=128, I=512)
    for ext in ("svg", "png"):
        tray_chart(programs, tmp_path / f"tray.{ext}", man)
    assert (tmp_path / "tray.png").stat().st_size > 0
    # One bar per run of one opcode: fewer drawn elements than the tray has instructions.
    svg = (tmp_path / "tray.svg").read_text()
    instructions = sum(len(q) for p in programs for q in p.queues.values())
    assert 0 < sum(svg.count(t) for t in ("<path", "<use", "<image")) < instructions


@pytest.mark.sim
@pytest.mark.skipif("icarus" not in SIMS, reason="the tray's system builds in seconds on Icarus")
def test_tray_runs_on_two_tiles(capsys, tmp_path):
    code, text, err = run(capsys, "tray", "--tiles", "2", "--H", "8", "--I", "16", "--sim", "icarus", "--json",
                          "--repeat", "3")
    r = json.loads(text)
    ex, programs, man = _tray(2, H=8, I=16)
    gold = archmodel.run_system(programs, Topology(2).peer, man.min_distance)
    assert code == 0 and r["ran"] and r["passed"], r
    assert [t["cycles"] for t in r["tile"]] == [m.cycles for m in man.tile] == [g.cycles for g in gold]
    assert all(t["writes_as_predicted"] and t["writes"] == len(m.writes) and not t["link_faults"]
               for t, m in zip(r["tile"], man.tile))
    assert r["bit_exact"] and r["y"] == ffn_int(ex.spec, ex.x_int8).tolist()
    assert "[icarus] job 1/3 loaded in" in err and "PASS: FFN on 2 tiles" in err
    # Three clock draws (different ppm and phases), one digest: the same cycles and traces.
    reps = r["repeats"]
    assert len(reps) == 3 and len({tuple(d["ppm"]) for d in reps}) == 3, reps
    assert len({d["digest"] for d in reps}) == 1 and all(d["passed"] for d in reps), reps
    assert all(d["cycles"] == [m.cycles for m in man.tile] for d in reps)
    assert "3 clock draws: every tile's cycles and trace identical" in err


def test_tray_seeds_are_separate():
    """--seed draws the weights and input, --clock-seed the clocks and wires."""
    from sim.flows.tray import compile_tray
    a, b, c = (compile_tray(tiles=2, H=8, I=16, seed=s, clock_seed=k) for s, k in ((1, 1), (2, 1), (1, 2)))
    assert a.clocks() == b.clocks() and a.latencies() == b.latencies()
    assert (a.x != b.x).any()
    assert a.clocks() != c.clocks() and (a.x == c.x).all()
    assert a.clocks(0) != a.clocks(1)


@pytest.mark.sim
@pytest.mark.skipif("icarus" not in SIMS, reason="the two-tile system builds in seconds on Icarus")
@pytest.mark.parametrize("ppm, reasons", [(("5000", "-5000"), ["tile 0: LINK_UNDERFLOW", "program skew beyond"]),
                                          (("5000", "0"), ["program skew beyond"])])
def test_c2c_failure_names_its_cause(capsys, ppm, reasons):
    """Out of specification (the --help example): the fault flags come first in each
    tile's problems, the FAIL line gives the reasons, a skew beyond the budget is warned."""
    code, text, err = run(capsys, "c2c", "--beyond-spec", "--ppm", *ppm, "--sim", "icarus", "--json", "-q")
    r = json.loads(text)
    assert code == 1 and not r["passed"] and not r["skew_within_budget"], r["reasons"]
    assert all(any(w in x for x in r["reasons"]) for w in reasons), r["reasons"]
    for t in r["tiles"]:
        if any("C2C fault flags" in p for p in t["problems"]):
            assert t["problems"][0].startswith("C2C fault flags in STATUS: "), t["problems"][:2]
    fail = [line for line in err.splitlines() if line.startswith("FAIL: ")]
    assert fail and all(w in fail[0] for w in reasons) and "warning: the program skew" in err, err


@pytest.mark.sim
@pytest.mark.skipif("icarus" not in SIMS, reason="the two-tile system builds in seconds on Icarus")
def test_c2c_runs_and_draws(capsys, tmp_path):
    from sim.flows.c2c import c2c_config, exchange
    plot = tmp_path / "run.png"
    code, text, err = run(capsys, "c2c", "--sim", "icarus", "--vectors", "1", "--spread", "0", "--plot", plot,
                          "--json", "-q")
    r = json.loads(text)
    sched = exchange(c2c_config(), 2, 1, 0, 1)
    assert code == 0 and r["passed"], r
    assert [t["cycles"] for t in r["tiles"]] == [sched.predicted_cycles(t) for t in range(2)]
    assert max(map(abs, r["hac_error"])) <= r["hac_error_max"]
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


# ---- bench --------------------------------------------------------------------------------------
@pytest.mark.sim
def test_bench_on_the_tiny_tile(capsys, tmp_path):
    # its own history file: a test run must not append to the project's bench/history.jsonl
    hist = tmp_path / "history.jsonl"
    code, text, err = run(capsys, "bench", "--config", "tiny", "--sims", SIMS[0], "--out", tmp_path, "--json",
                          "--history", hist, "--quick")
    r = json.loads(text)
    assert code == 0 and r["ffn"] and all(row["exact"] for row in r["ffn"])
    assert (tmp_path / "bench.md").read_text().startswith("FFNs on the tiny tile")
    assert "job 1/" in err
    assert [json.loads(line)["config"] for line in hist.read_text().splitlines()] == ["tiny"]


def test_moe_no_run_lists_routings_and_rounds(capsys, tmp_path):
    """lpu moe --no-run --json: the routings, their rounds (two for one beyond capacity)
    and the compiler's prediction; --chart writes the framed timeline."""
    code, out, err = run(capsys, "moe", "--no-run", "--json", "--capacity", "1", "--routing", "over",
                         "--chart", tmp_path / "moe.svg")
    assert code == 0, err
    d = json.loads(out)
    assert d["ran"] is False and d["rounds"] == {"over": 2} and d["capacity"] == 1
    assert d["cycles"] == max(d["per_tile_cycles"]) and "token 0: expert" in (tmp_path / "moe.svg").read_text()


def test_moe_chooses_tps_and_prints_the_floor(capsys):
    """lpu moe --no-run --json on a layer whose tiles hold a share of every expert: the
    compiler chooses tps; the bound, the floor (timing.token_floor) and the ratio to the
    larger are printed."""
    import dataclasses

    from lpu_arch import TileConfig
    from lpu_arch.timing import token_floor
    code, out, err = run(capsys, "moe", "--no-run", "--json", "--experts", "3", "--I", "16")
    assert code == 0, err
    d = json.loads(out)
    # 3 experts (top-2 and the shared one) of 2 x 4 W1 and W3 blocks of 4 rows each on 4 tiny tray tiles
    floor = token_floor(dataclasses.replace(TileConfig.tiny_tray(), links=3), 4, 3 * 2 * 2 * 4 * 4)["floor"]
    assert d["mapping"] == "tps" and d["floor"] == floor and d["limit_per_token"] == floor
    assert d["ratio_to_limit"] == round(d["cycles"] / floor, 4) and d["cycles"] >= floor


def test_moe_tp_chart_frames_only_slots_with_work(capsys, tmp_path):
    """lpu moe --mapping tp --chart: a tile whose share of an expert is no block (I of one
    block over 4 tiles) has no span to frame; the others are framed."""
    code, out, err = run(capsys, "moe", "--no-run", "--mapping", "tp", "--set", "vxm_tables=16",
                         "--set", "mem_depth=256", "--set", "vxm_param_depth=32", "--chart", tmp_path / "tp.svg")
    assert code == 0, err
    assert "t0 e" in (tmp_path / "tp.svg").read_text()


def test_plan_is_a_subcommand(capsys, tmp_path):
    """lpu plan: the options of docs/plan.md, as a subcommand (sim/cli/plan.py; firmware_gen.host.plan plans)."""
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"model_type": "llama", "hidden_size": 32, "intermediate_size": 48,
                                "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
                                "vocab_size": 100, "tie_word_embeddings": False}))
    code, out, err = run(capsys, "plan", "--hf-config", path, "--config", "default", "--no-golden", "--json")
    assert code == 0, err
    d = json.loads(out)
    assert d["config"] == "default" and d["clock_mhz"] == 900 and d["params"]["total"] > 0


def test_moe_from_a_weights_file(capsys, tmp_path):
    """lpu moe --weights: experts, router and shared expert under the DeepSeek names, top-k
    from --top-k; compiled for the tray and listed."""
    rng = np.random.default_rng(3)
    H, I, E = 8, 8, 8
    arrays = {"model.layers.0.mlp.gate.weight": rng.normal(size=(E, H))}
    for e in range(E):
        for proj, shape in (("gate_proj", (I, H)), ("up_proj", (I, H)), ("down_proj", (H, I))):
            arrays[f"model.layers.0.mlp.experts.{e}.{proj}.weight"] = rng.normal(size=shape) / 3
    for proj, shape in (("gate_proj", (I, H)), ("up_proj", (I, H)), ("down_proj", (H, I))):
        arrays[f"model.layers.0.mlp.shared_experts.{proj}.weight"] = rng.normal(size=shape) / 3
    np.savez(tmp_path / "moe.npz", **arrays)
    code, out, err = run(capsys, "moe", "--no-run", "--json", "--weights", tmp_path / "moe.npz", "--top-k", "2")
    assert code == 0, err
    d = json.loads(out)
    assert d["experts_per_tile"] == [2, 2, 2, 2] and set(d["routings"]) == {"router", "spread", "packed", "random"}
    assert all(len(row) == 2 for rows in d["routings"].values() for row in rows)


def test_compile_fp8(capsys, tmp_path):
    """--dtype fp8: the tile's MXM format and the FFN's quantisation (random or from a file);
    the saved reference is E4M3 codes and equals the golden model's; a tile that cannot
    carry FP8 accumulators is a one-line error."""
    from firmware_gen.golden.numerics import ffn_int
    out = tmp_path / "f8"
    code, text, _ = run(capsys, "compile", "--dtype", "fp8", "--H", "16", "--I", "32", "--out", out, "--json")
    assert code == 0
    c = CompiledFfn.load(out)
    assert c.config.mxm_dtype == "fp8" and c.y_int8.dtype == np.uint8
    rng = np.random.default_rng(4)
    np.savez(tmp_path / "w.npz", W1=rng.normal(size=(24, 16)), W2=rng.normal(size=(16, 24)), x=rng.normal(size=(2, 16)))
    code, text, _ = run(capsys, "compile", "--weights", tmp_path / "w.npz", "--set", "mxm_dtype=fp8",
                        "--out", tmp_path / "w8", "--json")
    assert code == 0
    from sim.harness.compiled import example_from_weights
    ex, _ = example_from_weights(tmp_path / "w.npz", dtype="fp8")
    assert np.array_equal(CompiledFfn.load(tmp_path / "w8").y_int8, ffn_int(ex.spec, ex.x_int8))
    code, _, err = run(capsys, "compile", "--dtype", "fp8", "--config", "tiny")
    assert code == 2 and "streams per direction must be at least 6" in err
