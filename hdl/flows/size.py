"""`python -m hdl.flows.size`: elaborate a tile configuration to Verilog and report its size.

    python -m hdl.flows.size [--config tiny|default|full_scale] [--set FIELD=VALUE] [--json] [--verilog OUT.v]

The tile is built as the synthesised tile is (no event trace), one Verilog module per
distinct unit: the tile's control logic, each distinct column (``hdl/units/column.py``) and
MXM output lane (``hdl/top/dedup.py``), under a top ``lpu_tile`` with ``hdl.top.tile.Tile``'s
ports that wires a column at every position as the simulated tile connects them.

The figures are counted on Amaranth's netlist of each module and multiplied by its
instance count: flip-flop bits, memory bits (each memory), multipliers (operand widths,
``s8`` a signed 8-bit operand, ``const`` a constant) per unit, and the total; with the
elaboration time and the peak memory (Amaranth's; Yosys's, which writes the Verilog of one
module at a time in another process).  ``--json`` prints them as ``units.<unit>`` with
``instances``, ``ff_bits``, ``memory_bits``, ``memories``, ``multipliers`` (constant
factors not counted), ``multiplier_kinds``; ``total``; ``modules`` (instances and the
seconds of each step); ``elaboration_seconds``, ``peak_memory_mb``, ``yosys_peak_memory_mb``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path

from amaranth import Elaboratable, Module
from amaranth.back import rtlil
from amaranth.hdl import Fragment, IOBufferInstance, IOPort, _ast, _ir, _nir
from amaranth.lib import wiring

from lpu_arch.config import ConfigError, TileConfig
from lpu_arch.errors import LpuError, error_line

from hdl.units.column import Column, column_signature, served_links
from hdl.top.dedup import separate_modules
from hdl.top.tile import Tile

TOP = "lpu_tile"
UNIT_OF_PART = {"icu": "ICU", "icu_ld": "ICU", "fabric": "fabric", "trace": "event trace"}
UNIT_OF_KIND = {"MEM": "MEM slice", "MXM": "MXM", "VXM": "VXM", "SXM": "SXM", "C2C": "C2C"}
UNIT_ORDER = ["MXM", "VXM", "SXM", "MEM slice", "C2C", "ICU", "fabric", "event trace", "control"]


class SizeError(LpuError, RuntimeError):
    """The configuration cannot be built this way; the message says why."""


# ---- building one module --------------------------------------------------------------
class _Fast(rtlil.ModuleEmitter):
    """Amaranth's RTLIL emitter with the memory initialisation written as one constant
    (the stock emitter spends microseconds per bit: 30 minutes on a full-scale tile's
    2 Gbit of SRAM)."""

    def emit_memory(self, cell_idx, cell):
        info = self.memories[cell_idx]
        data = "".join(format(row, f"0{cell.width}b") for row in reversed(cell.init))
        self.builder.cell("$meminit_v2", ports={
            "ADDR": self.sigspec(),
            "DATA": f"{cell.width * cell.depth}'{data}",
            "EN": self.sigspec(_nir.Value.ones(cell.width)),
        }, parameters={"MEMID": info.memid, "ABITS": 0, "WIDTH": cell.width, "WORDS": cell.depth,
                       "PRIORITY": 0}, src_loc=cell.src_loc)


def _rtlil(netlist) -> str:
    """RTLIL of a netlist (``amaranth.back.rtlil.convert_fragment`` without building it again)."""
    empty = rtlil.EmptyModuleChecker(netlist)
    builder = rtlil.Design(emit_src=False)
    for idx, module in enumerate(netlist.modules):
        if empty.is_empty(idx):
            continue
        mb = builder.module(".".join(module.name), src_loc=module.src_loc)
        if idx == 0:
            mb.attribute("top", 1)
        _Fast(mb, netlist, module, _ast.SignalDict(), empty_checker=empty).emit()
    return str(builder)


def _operand(value) -> str:
    """Width of a multiplier operand before Amaranth's extension: ``s8``, ``u15``, ``const``."""
    nets = list(value)
    if all(n.is_const for n in nets):
        return "const"
    zero = lambda n: n.is_const and n.const == 0        # noqa: E731
    kind = "u" if zero(nets[-1]) else "s"
    # Drop the extension: zeros above an unsigned operand, copies of a signed one's sign bit.
    while len(nets) > 1 and (zero(nets[-1]) if kind == "u" else nets[-2] == nets[-1]):
        nets.pop()
    return f"{kind}{len(nets)}"


def _unit_counts() -> dict:
    return {"ff_bits": 0, "memories": Counter(), "multipliers": Counter()}


def _count(netlist, label) -> dict:
    """Per unit (``label(module name) -> unit``): flip-flop bits, memories, multipliers; and
    the instances of other modules."""
    units = defaultdict(_unit_counts)
    children = Counter()
    for cell in netlist.cells:
        if not hasattr(cell, "module_idx"):
            continue
        unit = units[label(netlist.modules[cell.module_idx].name)]
        if isinstance(cell, _nir.FlipFlop):
            unit["ff_bits"] += len(cell.data)
        elif isinstance(cell, _nir.Memory):
            unit["memories"][(cell.name, cell.width, cell.depth)] += 1
        elif isinstance(cell, _nir.Operator) and cell.operator == "*":
            a, b = sorted((_operand(cell.inputs[0]), _operand(cell.inputs[1])), key=lambda w: w == "const")
            unit["multipliers"][(a, b, cell.width)] += 1
        elif isinstance(cell, _nir.Instance):
            children[cell.type] += 1
    return {"units": dict(units), "children": children}


def _ports(pairs):
    """``{name: (value, PortDirection)}`` from ``(name, value, is_input)``."""
    return {n: (v, _ir.PortDirection.Input if i else _ir.PortDirection.Output) for n, v, i in pairs}


def _flat(signature, obj, prefix=(), flip=False):
    """``(name, value, is_input)`` of an interface's members, names joined with ``__``."""
    for path, member, value in signature.flatten(obj):
        if isinstance(value, _ast.ValueCastable):
            value = value.as_value()
        yield "__".join(map(str, prefix + path)), value, (member.flow == wiring.In) != flip


class _ColumnTop(Elaboratable):
    """A column as a module of its own: the tap inputs (2 x streams x vector bits, more than
    Amaranth's 65535 input bits of a top module at full scale) arrive on I/O ports."""

    def __init__(self, column):
        self.column = column

    def elaborate(self, platform):
        m = Module()
        m.submodules.column = col = self.column
        for d in ("east", "west"):
            for s, sig in enumerate(getattr(col.tap, d)):
                m.submodules[f"tap_{d}_{s}"] = IOBufferInstance(IOPort(len(sig), name=f"tap__{d}__{s}"), i=sig)
        return m


class _Built:
    """One module: its counts, its ports ``{name: (width, is_input)}``, its Verilog and
    how long each step took (seconds) and the memory Yosys used (MB)."""

    def __init__(self, name, counts, ports, verilog_text, steps):
        self.name, self.counts, self.ports, self.verilog, self.steps = name, counts, ports, verilog_text, steps


def _yosys(il: str) -> tuple[str, int]:
    """Verilog of an RTLIL text (``amaranth.back.verilog``'s Yosys script), and Yosys's peak
    memory in MB: it runs under a small helper process, whose children's peak is Yosys's
    alone (a child of this process would also count the pages it shares with it)."""
    with tempfile.TemporaryDirectory(prefix="lpu-size-") as tmp:
        src, dst = os.path.join(tmp, "in.il"), os.path.join(tmp, "out.v")
        Path(src).write_text(il)
        del il
        p = subprocess.run([sys.executable, "-c", _HELPER, src, dst], capture_output=True, text=True)
        if p.returncode != 0:
            raise SizeError(f"Yosys failed to write Verilog:\n{p.stderr[-3000:]}")
        return Path(dst).read_text(), int(p.stdout.split()[-1])


_HELPER = """
import resource, sys
from pathlib import Path
from amaranth.back import verilog
src, dst = sys.argv[1], sys.argv[2]
Path(dst).write_text(verilog._convert_rtlil_text(Path(src).read_text(), strip_internal_attrs=True))
print(round(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024))
"""


def _build(name, elaboratable, ports, label, want_verilog) -> tuple[_Built, dict]:
    """Elaborate and count one module (units placed with ``hdl.top.dedup`` become instances:
    returned as ``{module name: standalone unit}``)."""
    t = [time.perf_counter()]
    with separate_modules() as found:
        fragment = Fragment.get(elaboratable, None)
    netlist = _ir.build_netlist(fragment, ports=ports, name=name)
    counts = _count(netlist, label)
    t.append(time.perf_counter())
    text, yosys_mb = None, 0
    if want_verilog:
        il = _rtlil(netlist)
        del netlist, fragment
        t.append(time.perf_counter())
        text, yosys_mb = _yosys(il)
        del il
        t.append(time.perf_counter())
    steps = dict(zip(("netlist_s", "rtlil_s", "yosys_s"), (round(b - a, 1) for a, b in zip(t, t[1:]))))
    steps["yosys_mb"] = yosys_mb
    widths = {n: (len(v), d == _ir.PortDirection.Input) for n, (v, d) in ports.items()}
    return _Built(name, counts, widths, text, steps), found.units


# ---- the tile -----------------------------------------------------------------------------
def _column_key(cfg, p):
    name = cfg.slice_names[p]
    kind = cfg.kind(name)
    return (kind, name[-1] if kind == "MXM" else "", p + 1 < cfg.positions, p > 0, tuple(served_links(cfg, p)))


def _column_name(key, taken):
    kind, side = key[:2]
    base = f"lpu_col_{kind.lower()}" + (f"_{side.lower()}" if side else "")
    name, k = base, 2
    while name in taken:
        name, k = f"{base}_{k}", k + 1
    return name


def elaborate(cfg: TileConfig, want_verilog: bool = True, progress=None) -> dict:
    """Build ``cfg``'s tile (event trace removed) as separate modules; returns the report
    (``report["verilog"]``: the whole tile's Verilog, when ``want_verilog``)."""
    if cfg.links:
        raise SizeError("tiles with C2C links are not supported (the C2C slices' links are outside the columns)")
    cfg = dataclasses.replace(cfg, trace_depth=0)
    say = progress or (lambda msg: None)
    t0 = time.perf_counter()
    built, pending, instances = {}, {}, Counter()

    def enqueue(found: dict, unit: str):
        """Units a build placed with hdl.top.dedup: new ones wait to be built; a copy of one built
        or waiting already is marked used (Amaranth warns of elaboratables never used)."""
        for n, u in found.items():
            if n in pending or n in built:
                u._MustUse__used = True
            else:
                pending[n] = (u, unit)

    # The tile's control logic, every position's ports on its ports.
    tile = Tile(cfg, separate_columns=True)
    glue_ports = list(_flat(tile.signature, tile))
    for p, name in enumerate(cfg.slice_names):
        glue_ports += _flat(column_signature(cfg, p, streams=False), tile.column_ports[p], (name,), flip=True)
    say(f"{TOP}_control")
    built[f"{TOP}_control"], _ = _build(f"{TOP}_control", tile, _ports(glue_ports),
                                        lambda path: "control", want_verilog)
    instances[f"{TOP}_control"] = 1

    # One module per distinct column.
    col_names, keys, first = {}, {}, {}      # position -> module; key -> module; module -> position
    for p in range(cfg.positions):
        key = _column_key(cfg, p)
        if key not in keys:
            keys[key] = _column_name(key, set(keys.values()))
            first[keys[key]] = p
        col_names[p] = keys[key]
        instances[keys[key]] += 1
    for mod, p in first.items():
        col = Column(cfg, p)
        unit = UNIT_OF_KIND[cfg.kind(cfg.slice_names[p])]

        def label(path, unit=unit):
            part = path[2] if len(path) > 2 else "fabric"
            return unit if part == "slice" else UNIT_OF_PART.get(part, "fabric")

        ports = _ports(x for x in _flat(col.signature, col) if not x[0].startswith("tap__"))
        say(mod)
        b, found = _build(mod, _ColumnTop(col), ports, label, want_verilog)
        b.ports.update({f"tap__{d}__{i}": (cfg.vector_bits, True)
                        for d in ("east", "west") for i in range(cfg.streams)})
        built[mod] = b
        enqueue(found, unit)

    # One module per distinct unit placed with hdl.top.dedup (the MXM's output lanes).
    while pending:
        name, (u, unit) = pending.popitem()          # (enqueue never queues a module built already)
        say(name)
        b, found = _build(name, u, _ports((n, v, d == "i") for n, (v, d) in u.ports().items()),
                          lambda path, unit=unit: unit, want_verilog)
        built[name] = b
        enqueue(found, unit)

    seconds = time.perf_counter() - t0
    report = _report(cfg, built, instances)
    report["elaboration_seconds"] = round(seconds, 1)
    # Yosys runs in another process, one module at a time, after its netlist is freed.
    report["peak_memory_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
    report["yosys_peak_memory_mb"] = max(b.steps["yosys_mb"] for b in built.values())
    report["modules"] = {n: {"instances": _total_instances(built, instances, n), **b.steps} for n, b in built.items()}
    if want_verilog:
        report["verilog"] = "\n".join(b.verilog for b in built.values()) + "\n" + _top(cfg, built, col_names)
    return report


def _total_instances(built, top_counts, name) -> int:
    total = top_counts.get(name, 0)
    for parent, b in built.items():
        if name in b.counts["children"]:
            total += b.counts["children"][name] * _total_instances(built, top_counts, parent)
    return total


def _report(cfg, built, top_counts) -> dict:
    unit_instances = Counter(UNIT_OF_KIND[cfg.kind(name)] for name in cfg.slice_names)
    unit_instances.update(ICU=cfg.queues, fabric=cfg.positions, control=1)
    units = defaultdict(_unit_counts)
    for name, b in built.items():
        n = _total_instances(built, top_counts, name)
        for unit, c in b.counts["units"].items():
            units[unit]["ff_bits"] += n * c["ff_bits"]
            for k in ("memories", "multipliers"):
                units[unit][k].update({key: n * v for key, v in c[k].items()})
    out = {}
    for unit in sorted(units, key=lambda u: UNIT_ORDER.index(u) if u in UNIT_ORDER else 99):
        u = units[unit]
        mems = [{"name": k[0], "width": k[1], "depth": k[2], "count": v, "bits": k[1] * k[2] * v}
                for k, v in sorted(u["memories"].items())]
        mults = [{"a": k[0], "b": k[1], "product_bits": k[2], "count": v}
                 for k, v in sorted(u["multipliers"].items(), key=lambda kv: -kv[1])]
        out[unit] = {"instances": unit_instances.get(unit, 0), "ff_bits": u["ff_bits"],
                     "memory_bits": sum(x["bits"] for x in mems), "memories": mems,
                     "multipliers": sum(x["count"] for x in mults if x["b"] != "const"),
                     "multiplier_kinds": mults}
    total = {k: sum(u[k] for u in out.values()) for k in ("ff_bits", "memory_bits", "multipliers")}
    return {"config": cfg.to_dict(), "units": out, "total": total}


# ---- the top: columns and control wired as the tile wires them ------------------------------
def _top(cfg, built, col_names) -> str:
    VB, S, P = cfg.vector_bits, cfg.streams, cfg.positions
    ctrl = built[f"{TOP}_control"]
    cols = tuple(f"{n}__" for n in cfg.slice_names)      # a column's ports on the control module
    tile_ports = {n: w for n, w in ctrl.ports.items() if not n.startswith(cols)}
    lines = ["/* The tile: its control logic and a column at every position (python -m hdl.flows.size). */",
             f"module {TOP}(clk, rst, {', '.join(tile_ports)});",
             "  input clk;", "  input rst;"]
    lines += [f"  {'input' if i else 'output'} {_range(w)}{n};" for n, (w, i) in tile_ports.items()]
    lines += [f"  wire {_range(w)}{n};" for n, (w, i) in ctrl.ports.items() if n.startswith(cols)]
    lines += [f"  wire [{VB - 1}:0] {d}_{p}_{s};" for p in range(P) for s in range(S)
              for d, loaded in (("east", p + 1 < P), ("west", p > 0)) if loaded]
    conns = [f".{n}({n})" for n in ctrl.ports] + [".clk(clk)", ".rst(rst)"]
    lines.append(f"  {TOP}_control control ({', '.join(conns)});")
    zero = f"{VB}'d0"
    for p, name in enumerate(cfg.slice_names):
        col = built[col_names[p]]
        conns = [".clk(clk)", ".rst(rst)"]
        for n in col.ports:
            if n.startswith("tap__"):
                _, d, s = n.split("__")
                src = p - 1 if d == "east" else p + 1
                conns.append(f".{n}({f'{d}_{src}_{s}' if 0 <= src < P else zero})")
            elif n.startswith(("east_out__", "west_out__")):
                d, s = n.split("_out__")
                conns.append(f".{n}({d}_{p}_{s})")
            else:
                conns.append(f".{n}({name}__{n})")
        lines.append(f"  {col_names[p]} col_{name} ({', '.join(conns)});")
    lines.append("endmodule")
    return "\n".join(lines) + "\n"


def _range(w):
    return f"[{w - 1}:0] " if w > 1 else ""


# ---- command line -----------------------------------------------------------------------------
def _fmt_bits(b: int) -> str:
    for unit, scale in (("Gbit", 1 << 30), ("Mbit", 1 << 20), ("kbit", 1 << 10)):
        if b >= scale:
            return f"{b / scale:.2f} {unit}"
    return f"{b} bit"


def markdown(r: dict) -> str:
    c = r["config"]
    lines = [f"# Size of the tile: {c['lanes']} lanes, {c['streams']} streams per direction, "
             f"{c['mem_slices']}+{c['mem_slices']} MEM slices of {c['mem_depth']} vectors", "",
             "| unit | instances | flip-flop bits | memory bits | multipliers |", "|---|---:|---:|---:|---:|"]
    lines += [f"| {unit} | {u['instances']} | {u['ff_bits']:,} | {u['memory_bits']:,} | {u['multipliers']:,} |"
              for unit, u in r["units"].items()]
    t = r["total"]
    lines.append(f"| **total** | | **{t['ff_bits']:,}** | **{t['memory_bits']:,}** ({_fmt_bits(t['memory_bits'])}) "
                 f"| **{t['multipliers']:,}** |")
    lines += ["", "Memories (depth x width; memories named alike but for a number are one line):", ""]
    for unit, u in r["units"].items():
        groups = defaultdict(list)
        for m in u["memories"]:
            groups[(re.sub(r"\d+$", "", m["name"]), m["width"], m["depth"])].append(m)
        for (stem, width, depth), ms in groups.items():
            name = ms[0]["name"] if len(ms) == 1 else f"{stem}*"
            lines.append(f"- {unit}: `{name}` {depth} x {width} bits, {sum(m['count'] for m in ms)} of them "
                         f"({_fmt_bits(sum(m['bits'] for m in ms))})")
    lines += ["", "Multipliers (operand widths; `s8` a signed 8-bit operand, `const` a constant):", ""]
    lines += [f"- {unit}: {k['count']:,} x ({k['a']} * {k['b']} -> {k['product_bits']} bits)"
              for unit, u in r["units"].items() for k in u["multiplier_kinds"]]
    lines += ["", f"Elaborated to Verilog in {r['elaboration_seconds']} s; peak memory {r['peak_memory_mb']} MB "
              f"(Amaranth), {r['yosys_peak_memory_mb']} MB (Yosys, one module at a time).", "",
              "| module | instances | netlist s | RTLIL s | Yosys s | Yosys MB |", "|---|---:|---:|---:|---:|---:|"]
    lines += [f"| {n} | {m['instances']} | {m['netlist_s']} | {m.get('rtlil_s', '')} | {m.get('yosys_s', '')} | "
              f"{m['yosys_mb']} |" for n, m in r["modules"].items()]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m hdl.flows.size", formatter_class=argparse.RawDescriptionHelpFormatter,
        description=__doc__.split("\n\n", 2)[2],
        epilog="The full_scale preset takes minutes and about 2 GB (docs/size.md).  Exit status: 0; 2 with\n"
               "a message on a bad option, an unwritable output or a configuration that cannot be built.")
    ap.add_argument("--config", default="default", choices=TileConfig.PRESETS,
                    help="tile preset (default: default)")
    ap.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE",
                    help="override one field of the preset, repeatable (e.g. --set mxm_dtype=fp8)")
    ap.add_argument("--json", action="store_true", help="print the report as JSON instead of a table")
    ap.add_argument("--verilog", metavar="OUT.v", type=Path, default=None,
                    help="also write the tile's Verilog (top module lpu_tile) to this file")
    ap.add_argument("--quiet", action="store_true", help="no progress lines on standard error")
    args = ap.parse_args(argv)
    if args.verilog is not None:
        parent = args.verilog.resolve().parent
        if not parent.is_dir():
            ap.error(f"--verilog: directory {parent} does not exist")
    progress = None if args.quiet else (lambda m: print(f"elaborating {m} ...", file=sys.stderr, flush=True))
    try:
        report = elaborate(TileConfig.preset(args.config).with_overrides(args.set), want_verilog=True,
                           progress=progress)
    except (SizeError, ConfigError) as e:
        print(error_line(e, whole=True), file=sys.stderr)       # whole: Yosys's log follows its failure
        return 2
    text = report.pop("verilog")
    if args.verilog is not None:
        try:
            args.verilog.write_text(text)
        except OSError as e:
            print(error_line(f"cannot write {args.verilog}: {e.strerror}"), file=sys.stderr)
            return 2
        report["verilog_file"] = str(args.verilog)
    report["verilog_bytes"] = len(text)
    print(json.dumps(report, indent=2) if args.json else markdown(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
