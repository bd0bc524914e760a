"""Simulator speed against a reference commit's build, both measured in the same bench run.

The workload (``WORKLOAD``, make sim's FFN) is compiled by each checkout's own compiler,
loaded once and run ``n`` times in one invocation (``sim/tb/speed.py``) for at least
``MIN_SECONDS``; best of ``REPEATS`` invocations, the two checkouts taking turns.
tile-cycles/s = the runs' cycles over their wall time; every run's cycles are checked
against the checkout's prediction.  The reference checkout is extracted with ``git
archive``; without it the rows say so and carry no ratio."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

from lpu_arch.errors import LpuError
from sim.bench.history import BASELINE as REFERENCE          # the build the speed targets are stated against
from sim.harness.runner import BUILD, ROOT
from sim.table import Table, right

TARGETS = {"verilator": 3.0, "icarus": 2.0}
WORKLOAD = ("swiglu", 128, 512, 1)
WORKLOAD_NAME = "{} {}x{} b{}".format(*WORKLOAD)
MIN_SECONDS = 10.0
REPEATS = 3
ROWS = Table("simulator", right("this build"), right("reference build"), right("speed-up"), right("target"),
             "met", "runs as predicted")

# Run inside a checkout (its own compiler, runner and RTL).  It builds, loads and calibrates
# the number of runs, prints "READY", then measures once per "GO" line on its stdin and
# prints one line "SPEED {json}" each time; it exits at the end of its input.
WORKER = r"""
import json, math, sys
sim, kind, H, I, B, min_s = sys.argv[1], sys.argv[2], *map(int, sys.argv[3:6]), float(sys.argv[6])
try:                       # a checkout's own first: its missing modules resolve to this checkout's
    from firmware_gen import TileConfig
except ImportError:
    from lpu_arch.config import TileConfig
try:
    from firmware_gen.compiler.ffn import compile_ffn
    from firmware_gen.compiler.ffn_example import example_ffn
    from sim.harness import runner
    TB = "sim.tb.speed"
except ImportError:        # a reference checkout from before the packages by role
    from firmware_gen.compile_ffn import compile_ffn, example_ffn
    from sim import runner
    TB = "sim.tb_speed"
cfg = TileConfig.default()
ex = example_ffn(kind, H, I, B, seed=1)
prog, man = compile_ffn(ex.spec, ex.x_int8, cfg)
tile = runner.TileSim(cfg, sim, waves=False)
job = runner.job(prog, name="speed")

def measure(n):
    spec = {"config": cfg.to_dict(), "job": job, "runs": n, "timeout_cycles": 10 * man.cycles + 10000}
    run = getattr(runner, "run_testbench", None) or runner._run      # _run: a checkout before the rename
    return run(tile, TB, spec, "speed-" + sim, runner.TIMESCALE)[0]

first = measure(2)
n = max(2, math.ceil(1.2 * min_s * len(first) / max(sum(r["wall_run_s"] for r in first), 1e-6)))
print("READY", flush=True)
for line in sys.stdin:
    out = measure(n)
    secs, cycles = sum(r["wall_run_s"] for r in out), sum(r["cycles"] for r in out)
    print("SPEED " + json.dumps({"cycles": cycles, "run_seconds": round(secs, 3),
                                 "cycles_per_second": round(cycles / secs, 1), "runs": n,
                                 "as_predicted": all(r["cycles"] == man.cycles for r in out),
                                 "predicted_cycles": man.cycles}), flush=True)
"""


class SpeedError(LpuError, RuntimeError):
    pass


def reference_tree(commit: str = REFERENCE) -> Path:
    """The checkout of ``commit`` under the build directory (extracted once), with this
    checkout's ``sim/tb/speed.py`` in it."""
    dest = BUILD / f"ref-{commit}"
    if not (dest / ".complete").exists():
        if shutil.which("git") is None:
            raise SpeedError("git is not installed: the reference build cannot be extracted")
        r = subprocess.run(["git", "-C", str(ROOT), "archive", "--format=tar", commit],
                           capture_output=True)
        if r.returncode != 0:
            raise SpeedError(f"commit {commit} is not in this repository's history "
                             f"({r.stderr.decode().strip() or 'git archive failed'})")
        shutil.rmtree(dest, ignore_errors=True)
        dest.mkdir(parents=True)
        with tarfile.open(fileobj=io.BytesIO(r.stdout)) as tar:
            tar.extractall(dest, filter="data")
        (dest / ".complete").write_text(commit + "\n")
    shutil.copy(ROOT / "sim" / "tb" / "speed.py", dest / "sim" / "tb_speed.py")
    return dest


class _Worker:
    """WORKER running in ``tree`` on ``sim`` (builds in ``build_dir``, default: that tree's own)."""

    def __init__(self, tree: Path, sim: str, build_dir: Path | None = None):
        kind, H, I, B = WORKLOAD
        env = {**os.environ, "PYTHONPATH": str(tree), "PYTHONHASHSEED": "0"}
        if build_dir is not None:
            env["LPU_BUILD_DIR"] = str(build_dir)
        self.tree, self.sim = tree, sim
        self.err = tempfile.TemporaryFile(mode="w+")     # (a pipe could fill while we wait on stdout)
        self.proc = subprocess.Popen([sys.executable, "-c", WORKER, sim, kind, str(H), str(I), str(B),
                                      str(MIN_SECONDS)], cwd=tree, env=env, text=True,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.err)

    def _line(self, prefix: str) -> str:
        for line in self.proc.stdout:
            if line.startswith(prefix):
                return line[len(prefix):]
        self.proc.kill()
        self.proc.wait()
        self.err.seek(0)
        err = self.err.read()
        raise SpeedError(f"the speed run on {self.sim} in {self.tree} failed:\n{err[-2000:]}")

    def measure(self) -> dict:
        self.proc.stdin.write("GO\n")
        self.proc.stdin.flush()
        return json.loads(self._line("SPEED "))

    def close(self):
        if self.proc.poll() is None:
            self.proc.stdin.close()
            self.proc.wait()
        self.err.close()


def measure_in_turns(trees, sim: str) -> list[dict]:
    """Per ``(tree, build_dir)``, the best of ``REPEATS`` measurements on ``sim``, the
    trees taking turns so that a slow spell of the machine falls on both."""
    workers = [_Worker(tree, sim, build_dir) for tree, build_dir in trees]
    try:
        for w in workers:
            w._line("READY")                # built and calibrated
        best = [None] * len(workers)
        for k in range(REPEATS):
            for i, w in enumerate(workers):
                print(f"speed: {sim} on {'this checkout' if w.tree == ROOT else w.tree.name} "
                      f"({WORKLOAD_NAME}, runs of at least {MIN_SECONDS:.0f} s, round {k + 1} of {REPEATS}) ...")
                row = w.measure()
                if best[i] is None or row["cycles_per_second"] > best[i]["cycles_per_second"]:
                    best[i] = row
        return best
    finally:
        for w in workers:
            w.close()


def speed_rows(sims, reference: str = REFERENCE) -> list[dict]:
    """Per simulator: this checkout's tile-cycles/s, the reference's, their ratio and the target."""
    try:
        ref_tree, ref_error = reference_tree(reference), None
    except SpeedError as e:
        ref_tree, ref_error = None, str(e)
    rows = []
    for sim in sims:
        trees = [(ROOT, None)] + ([] if ref_tree is None else [(ref_tree, BUILD / f"ref-{reference}-build")])
        ours, *ref = measure_in_turns(trees, sim)
        row = {"simulator": sim, "workload": WORKLOAD_NAME, "ours": ours,
               "reference": reference, "target": TARGETS.get(sim)}
        if ref_tree is None:
            row["reference_error"] = ref_error
        else:
            ref = ref[0]
            row["theirs"] = ref
            row["speedup"] = round(ours["cycles_per_second"] / ref["cycles_per_second"], 2)
            row["meets_target"] = row["target"] is not None and row["speedup"] >= row["target"]
        rows.append(row)
    return rows


def markdown(rows: list[dict]) -> list[str]:
    """bench.md's section of :func:`speed_rows` (none without rows)."""
    if not rows:
        return []
    out = ["", f"Simulator speed against the build of commit {rows[0]['reference']} (the same run; {WORKLOAD_NAME} "
               f"on the default tile, each checkout's own program, loaded once and run to done "
               f"repeatedly for at least {MIN_SECONDS:.0f} s, best of {REPEATS} rounds in which the two builds take turns; tile-cycles/s from the RTL's "
               "cycle counter over the runs' wall time):", ""]
    out += ROWS.markdown_head()
    for r in rows:
        ours = r["ours"]
        if "theirs" in r:
            theirs = r["theirs"]
            out.append(ROWS.markdown_row(r["simulator"], f"{ours['cycles_per_second']:,.0f}",
                                         f"{theirs['cycles_per_second']:,.0f}", f"{r['speedup']:.2f}x",
                                         f"{r['target']}x", "yes" if r["meets_target"] else "NO",
                                         "yes" if ours["as_predicted"] and theirs["as_predicted"] else "NO"))
        else:
            out.append(ROWS.markdown_row(r["simulator"], f"{ours['cycles_per_second']:,.0f}", "-", "-",
                                         f"{r['target']}x", "-", "yes" if ours["as_predicted"] else "NO"))
            out.append(f"\n(no reference: {r['reference_error']})")      # under the row it explains
    return out
