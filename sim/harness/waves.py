"""Waveforms of a run and a saved GTKWave view of them.

With waves on (``lpu sim --waves``, ``make sim WAVES=1``) Verilator writes ``dump.fst`` in
the run's directory (its build needs lz4's headers, Debian ``liblz4-dev``), Icarus
``<toplevel>.fst`` in the build directory.  :func:`write_gtkw` writes a GTKWave view next to
it: the tile's clock, cycle counter, running, done and fault, then a group per slice, west
to east (issue with opcodes by name, stream drive masks), the names taken from the
simulated Verilog so that slices not built are absent."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from vcd.gtkw import GTKWSave, make_translation_filter

from lpu_arch.config import TileConfig
from lpu_arch.isa import Op
from lpu_arch.errors import LpuError

OPS_FILTER = "lpu_ops.txt"
OP = "\\issue__instr.op"

_MODULE = re.compile(r"^module\s+(\\\S+|\w+)\s*\(")
_DECL = re.compile(r"^\s*(?:input|output|inout|wire|reg)\s+(?:signed\s+)?(?:\[(\d+):(\d+)\]\s+)?(\\\S+|[A-Za-z_][\w$]*)")


class WavesError(LpuError, RuntimeError):
    """Waveforms cannot be made or found; the message says what to install or where to look."""


def build_failure_hint(sim: str, build_dir: Path) -> str | None:
    """A clear reason for a failed waveform build, from its log, or None."""
    log = Path(build_dir) / "build.log"
    if sim == "verilator" and log.exists() and "lz4.h" in log.read_text(errors="replace"):
        return ("Verilator's FST waveforms need lz4's headers: install them with "
                "`sudo apt-get install liblz4-dev` (macOS: `brew install lz4`), or use --sim icarus")
    return None


CORE = "core"        # the instance name of the design under hdl/top/simtop.py's registers


def declared_signals(verilog: str, top: str) -> dict[str, dict[str, tuple]]:
    """``{scope: {name: (msb, lsb) or None}}`` for the Verilog Amaranth wrote: the top module
    is scope ``top``; a submodule ``\\top.a.b`` is instance scope ``top.a.b``."""
    scopes, cur = {}, None
    for line in verilog.splitlines():
        if m := _MODULE.match(line):
            cur = scopes.setdefault(m[1].lstrip("\\"), {})
        elif cur is not None and (m := _DECL.match(line)):
            cur.setdefault(m[3], (int(m[1]), int(m[2])) if m[1] is not None else None)
    return {k: v for k, v in scopes.items() if k == top or k.startswith(top + ".")}


def _ref(sim, scope, name, rng):
    # Icarus keeps the backslash of an escaped identifier (``\issue__instr.op``); Verilator drops it.
    shown = name if sim == "icarus" else name.lstrip("\\")
    return f"{scope}.{shown}" + (f"[{rng[0]}:{rng[1]}]" if rng is not None else "")


def write_gtkw(cfg: TileConfig, sim: str, dump: Path, verilog: Path, top: str) -> Path:
    """Write ``<dump stem>.gtkw`` and the opcode names file next to the dump (of toplevel ``top``)."""
    dump = Path(dump).resolve()
    out = dump.with_suffix(".gtkw")
    try:
        sigs = declared_signals(Path(verilog).read_text(), top)
    except OSError as e:
        raise WavesError(f"cannot read the simulated Verilog {verilog}: {e}") from None
    # The tile itself: the instance under the testbenches' input registers (hdl/top/simtop.py).
    tile = f"{top}.{CORE}" if f"{top}.{CORE}" in sigs else top
    ops = out.parent / OPS_FILTER
    ops.write_text(make_translation_filter([(int(o), o.name if o != Op.HALT else "-") for o in Op], "dec") + "\n")
    # (title, [(scope, Verilog name, display format, alias)]); absent signals are left out.
    groups = [("tile", [(tile, n, "dec" if n == "sac" else "bin", n)
                        for n in ("clk", "sac", "running", "done", "fault")])]
    for p, s in enumerate(cfg.slice_names):
        icu, sl = f"{tile}.icu_{s}", f"{tile}.slice_{s}"
        groups.append((f"{s} (position {p})", [
            (icu, "issue__valid", "bin", f"{s} issue"), (icu, OP, "dec", f"{s} op"),
            (icu, "\\issue__instr.dir", "bin", f"{s} dir (1=W)"), (icu, "\\issue__instr.stream", "dec", f"{s} stream"),
            (icu, "\\issue__instr.addr", "dec", f"{s} addr"), (sl, "drive__east__mask", "bin", f"{s} drives E"),
            (sl, "drive__west__mask", "bin", f"{s} drives W"), (icu, "halted", "bin", f"{s} halted")]))
    with open(out, "w") as f:
        g = GTKWSave(f)
        g.comment("lpu tile: one group per slice, west to east (written by sim/harness/waves.py)")
        g.dumpfile(str(dump))
        g.savefile(str(out.resolve()))
        g.timestart(0)
        g.size(1600, 1000)
        g.pos(-1, -1)
        f.write("[sst_width] 260\n")                  # no GTKWSave method for these two
        g.signals_width(300)
        g.sst_expanded(True)
        f.write("[sst_vpaned_height] 300\n")
        for title, traces in groups:
            present = [t for t in traces if t[1] in sigs.get(t[0], {})]
            if present:
                with g.group(title):
                    for scope, name, fmt, alias in present:
                        g.trace(_ref(sim, scope, name, sigs[scope][name]), alias, datafmt=fmt,
                                translate_filter_file=str(ops.resolve()) if name == OP else None)
    return out


def save_waves(tile, cfg: TileConfig, dest: Path | None = None) -> tuple[Path, Path]:
    """After ``tile.run``: move the dump to ``dest/<simulator>.fst`` (if given) and write the
    GTKWave view next to it.  Returns ``(dump, view)``."""
    dump = (Path(tile.last_work) / "dump.fst" if tile.sim == "verilator"      # where the run wrote it
            else Path(tile.build_dir) / f"{tile.toplevel}.fst")
    if not dump.exists():
        raise WavesError(f"the {tile.sim} run wrote no waveform at {dump}")
    if dest is not None:
        Path(dest).mkdir(parents=True, exist_ok=True)
        dump = Path(shutil.move(str(dump), Path(dest) / f"{tile.sim}.fst"))
    view = write_gtkw(cfg, tile.sim, dump, Path(tile.build_dir) / f"{tile.toplevel}.v", tile.toplevel)
    return dump, view
