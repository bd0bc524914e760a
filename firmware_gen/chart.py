"""Schedule pictures of a compiled program (matplotlib, Agg backend; SVG or PNG).

:func:`schedule_chart` draws, over one cycle axis, the issue of every data instruction per
queue (from :func:`archmodel.expand`: the cycles the golden model and the hardware issue
on) and, per direction, how many streams carry a *live* value at each position and cycle
(from the position after its driver to its last reader, the span the compiler reserves;
:func:`stream_occupancy`).  Everything is numpy and a few collections and images, so
programs of tens of thousands of cycles render in a few seconds.

:func:`tray_chart` draws a tray (several tiles, ``tray.compile_ffn_tray``) on one SAC cycle
axis: a band per tile with a row per slice kind, and every C2C transfer as an arrow from
its SEND/SENDM to its RECV (:func:`tray_transfers` pairs them from the programs).
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from lpu_arch.effects import effects
from lpu_arch.isa import EAST, WEST, Op
from lpu_arch.timing import diagonal
from lpu_arch.errors import LpuError

from firmware_gen.golden.archmodel import expand
from firmware_gen.program import Program

# One colour per opcode, fixed so that pictures of different programs compare.
OP_COLOURS = {          # every data opcode (tests/firmware_gen/test_chart.py checks it)
    Op.READ: "#1f77b4", Op.WRITE: "#ff7f0e", Op.LW: "#2ca02c", Op.MM: "#d62728", Op.LX: "#9467bd",
    Op.VOP: "#8c564b", Op.SHIFT: "#e377c2", Op.PERM: "#7f7f7f", Op.DIST: "#bcbd22", Op.TRI: "#17becf",
    Op.TRO: "#aec7e8", Op.MAX: "#ffbb78", Op.ARGMAX: "#98df8a", Op.SETB: "#c5b0d5",
    # C2C slices (tiles with links)
    Op.SEND: "#393b79", Op.SENDM: "#6b6ecf", Op.RECV: "#e7ba52", Op.DESKEW: "#252525",
    Op.RUNTIME_DESKEW: "#969696",
}
FORMATS = (".svg", ".png")


class ChartError(LpuError, ValueError):
    """The picture cannot be made (bad file type, empty window); the message says why."""


@dataclass
class Timeline:
    """What a program does, cycle by cycle, as the chart draws it."""
    issues: dict            # queue name -> [(cycle, Instr)] data instructions in issue order
    drives: list            # (dir, stream, position, drive cycle)
    reads: list             # (dir, stream, position, cycle)
    end: int                # first cycle after the last issue or drive


def timeline(program: Program) -> Timeline:
    """Issue cycles of every data instruction, and every stream drive and read, from the
    program and the opcodes' effects (``lpu_arch/effects.py``)."""
    cfg = program.config
    issues, drives, reads, end = {}, [], [], 0
    for name in cfg.queue_names:
        tl, halt = expand(program.queues.get(name, []))
        issues[name] = tl
        end = max(end, halt)
        p = cfg.position(name)
        for t, ins in tl:
            eff = effects(ins, name, cfg.lanes, cfg.acc_planes, cfg.vxm_latency)
            reads += [(a.dir, a.stream, p, t + a.offset) for a in eff.reads]
            drives += [(a.dir, a.stream, p, t + a.offset) for a in eff.drives]
    end = max([end] + [t + 1 for *_, t in drives + reads])
    return Timeline(issues, drives, reads, end)


def queue_rows(cfg) -> list[str]:
    """The issue panel's rows: every position's queue west to east, each MXM's loader on
    the MXM's outer side (``MXL_W``, ``MXM_W``, ..., ``MXM_E``, ``MXL_E``)."""
    rows = []
    for p, name in enumerate(cfg.slice_names):
        loader = cfg.LOADER_OF.get(name)
        rows += [name] if loader is None else [loader, name] if p == 0 else [name, loader]
    return rows


def stream_occupancy(program: Program, tl: Timeline | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``(east, west)``: int arrays ``[position, cycle]`` counting the streams of that
    direction that carry a live value there (from the position after the driver up to the
    value's last reader; a later drive on the same stream downstream ends the value)."""
    cfg = program.config
    tl = tl or timeline(program)
    P, T = cfg.positions, max(tl.end, 1)
    occ = {d: np.zeros((P, T + P), np.int32) for d in (EAST, WEST)}
    # A value keeps its diagonal as it moves (lpu_arch.timing): drivers and readers of
    # one value share (direction, stream, diagonal).
    drivers, readers = defaultdict(list), defaultdict(list)
    for d, s, p, t in tl.drives:
        drivers[d, s, diagonal(d, p, t)].append((p, t))
    for d, s, p, t in tl.reads:
        readers[d, s, diagonal(d, p, t)].append(p)
    for key, drv in drivers.items():
        d, rd = key[0], readers.get(key)
        if not rd:
            continue
        sign = 1 if d == EAST else -1
        # Walk downstream: drivers in flow order; each value ends at the next driver's
        # position (that position still sees the old value) or the edge.
        drv = sorted(drv, key=lambda x: sign * x[0])
        rd = np.asarray(sorted(rd, key=lambda q: sign * q))
        for i, (p, t) in enumerate(drv):
            stop = drv[i + 1][0] if i + 1 < len(drv) else (P - 1 if d == EAST else 0)
            mine = rd[(sign * rd > sign * p) & (sign * rd <= sign * stop)]
            if len(mine):
                k = np.arange(1, abs(int(mine[-1]) - p) + 1)
                occ[d][p + sign * k, t + k] += 1      # one cell per cycle: no index repeats
    return occ[EAST][:, :T], occ[WEST][:, :T]


def _runs(issues: list, lo: int, hi: int) -> list:
    """An issue timeline ``[(cycle, Instr)]`` as runs of consecutive cycles with one opcode,
    ``(op, start, length)``, those that reach into cycles ``lo..hi``."""
    if not issues:
        return []
    cycles = np.fromiter((c for c, _ in issues), np.int64, len(issues))
    ops = np.fromiter((int(i.op) for _, i in issues), np.int64, len(issues))
    order = np.argsort(cycles, kind="stable")
    cycles, ops = cycles[order], ops[order]
    brk = np.flatnonzero((np.diff(cycles) != 1) | (np.diff(ops) != 0)) + 1
    runs = [(int(ops[a]), int(cycles[a]), int(cycles[b - 1] - cycles[a] + 1))
            for a, b in zip(np.r_[0, brk], np.r_[brk, len(cycles)])]
    return [r for r in runs if r[1] + r[2] - 1 >= lo and r[1] <= hi]


def chart_path(path) -> Path:
    """``path`` as a Path, if its suffix is one of ``FORMATS`` (a :class:`ChartError`
    naming them otherwise): where a chart is written."""
    path = Path(path)
    if path.suffix.lower() not in FORMATS:
        raise ChartError(f"cannot write a chart as {path.suffix or 'a file without extension'!r} "
                         f"({path.name}); use a name ending in {' or '.join(FORMATS)}")
    return path


def _window(window, end: int, runs: str) -> tuple[int, int]:
    """The cycles ``lo..hi`` to draw of ``0..end - 1``: all, or ``window = (first, last)``."""
    lo, hi = 0, max(end - 1, 0)
    if window is not None:
        lo, hi = max(0, int(window[0])), min(hi, int(window[1]))
        if hi < lo:
            raise ChartError(f"the cycle window {window[0]}..{window[1]} holds nothing: {runs} "
                             f"cycles 0..{max(end - 1, 0)}")
    return lo, hi


def pyplot():
    """matplotlib's pyplot on the Agg backend (files only, no display)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def _legend(ax, ops, extra=()):
    """The opcode colours of ``ops`` (and ``extra`` handles), right of the axes."""
    from matplotlib.patches import Patch
    handles = [Patch(color=OP_COLOURS[Op(o)], label=Op(o).name) for o in sorted(ops)] + list(extra)
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.005, 1.0), fontsize=8, title="issued",
              frameon=False)


def schedule_chart(program: Program, path, *, title: str | None = None, window: tuple | None = None,
                   dpi: int = 110) -> Path:
    """Draw the schedule of ``program`` to ``path`` (``.svg`` or ``.png``).

    ``window = (first, last)`` limits the cycle axis (inclusive; None = whole program).
    Returns the path written."""
    path = chart_path(path)
    plt = pyplot()
    from matplotlib.colors import BoundaryNorm, ListedColormap

    cfg = program.config
    names, P, S = queue_rows(cfg), cfg.positions, cfg.streams
    tl = timeline(program)
    east, west = stream_occupancy(program, tl)
    lo, hi = _window(window, tl.end, "the program runs")
    n_issue = sum(len(v) for v in tl.issues.values())

    with plt.rc_context({"svg.fonttype": "none", "font.size": 9, "path.simplify": True}):
        fig, axes = plt.subplots(3, 1, sharex=True, figsize=(14, 9.5), dpi=dpi,
                                 gridspec_kw={"height_ratios": [1.25, 1, 1], "hspace": 0.12})
        ax = axes[0]
        used = set()
        many = n_issue > 4000
        for p, name in enumerate(names):
            by_op = defaultdict(list)
            for op, start, length in _runs(tl.issues[name], lo, hi):
                by_op[op].append((start - 0.5, length))
            for op, bars in by_op.items():
                used.add(op)
                ax.broken_barh(bars, (p - 0.38, 0.76), facecolors=OP_COLOURS[Op(op)], linewidth=0,
                               rasterized=many)
        ax.set_ylim(len(names) - 0.5, -0.5)
        ax.set_yticks(range(len(names)), names)
        ax.set_ylabel("queue (west to east)")
        ax.grid(axis="x", alpha=0.3)
        _legend(ax, used)
        ax.set_title(title or f"schedule: {tl.end} cycles, {n_issue} data instructions issued", loc="left")

        cmap = ListedColormap(plt.get_cmap("viridis")(np.linspace(0, 1, S + 1)))
        cmap.colors[0] = (1, 1, 1, 1)
        norm = BoundaryNorm(np.arange(-0.5, S + 1), S + 1)
        for ax, occ, label in ((axes[1], east, "east-flowing"), (axes[2], west, "west-flowing")):
            img = ax.imshow(occ[:, lo:hi + 1], aspect="auto", interpolation="nearest", cmap=cmap, norm=norm,
                            extent=(lo - 0.5, hi + 0.5, P - 0.5, -0.5))
            ax.set_yticks(range(P), cfg.slice_names)
            busiest = int(occ.max()) if occ.size else 0
            ax.set_ylabel(f"{label} streams\n(peak {busiest} of {S} in use)")
            cb = fig.colorbar(img, ax=ax, pad=0.01, fraction=0.03, ticks=range(0, S + 1, max(1, S // 8)))
            cb.set_label("live values", fontsize=8)
        axes[1].set_title(f"stream occupancy: streams (of {S} per direction) carrying a live value at each "
                          "position and cycle, from the position after its driver to its last reader",
                          loc="left", fontsize=9)
        axes[2].set_xlabel("cycle")
        axes[2].set_xlim(lo - 0.5, hi + 0.5)
        # The issue panel has no colour bar; keep the three x axes aligned.
        fig.canvas.draw()
        b0 = axes[0].get_position()
        axes[0].set_position([b0.x0, b0.y0, axes[1].get_position().width, b0.height])
        return save_figure(plt, fig, path, compact=False)


# ---- several tiles: the tray ---------------------------------------------------------------------
GROUPS = ("MEM", "MXM", "MXL", "VXM", "SXM", "C2C")    # one row per queue kind in a tile's band
BAND_GAP = 0.6      # rows between two tiles' bands


@dataclass(frozen=True)
class LinkArrow:
    """One vector over a C2C link, in SAC time: SEND/SENDM on ``src`` (its slice
    ``src_slice``, its ``link``) on ``send``, RECV on ``dst`` (``dst_slice``, ``dst_link``)
    on ``recv``."""
    src: int
    link: int
    src_slice: str
    send: int
    dst: int
    dst_link: int
    dst_slice: str
    recv: int


def tray_transfers(programs: list[Program], peer=None) -> list[LinkArrow]:
    """Every C2C transfer of a multi-tile program set, paired from the programs themselves
    (the tray compiler keeps no list): a link's receive buffer is a FIFO, so the k-th vector
    sent on a link (``SEND``, or ``SENDM`` on each link its slice serves) is the one the k-th
    ``RECV`` on the link's other end takes.  ``peer(tile, link) -> (tile', link')``: the
    topology (default ``Topology(len(programs)).peer``)."""
    if peer is None:
        from lpu_arch.topology import Topology
        peer = Topology(len(programs)).peer
    sends, recvs = defaultdict(list), defaultdict(list)
    for t, prog in enumerate(programs):
        cfg = prog.config
        for name in ("C2C_W", "C2C_E"):     # (no such queues without links)
            for c, ins in expand(prog.queues.get(name, []))[0]:
                if ins.op in (Op.SEND, Op.SENDM):
                    for link in ins.links():     # a SENDM's links: those its slice serves
                        if ins.op == Op.SEND or link < cfg.links and cfg.link_slice(link) == name:
                            sends[t, link].append((c, name))
                elif ins.op == Op.RECV:
                    recvs[t, ins.operand("link")].append((c, name))
    out = []
    for (t, link), sent in sorted(sends.items()):
        u, rlink = peer(t, link)
        got = recvs.get((u, rlink), [])
        if len(got) != len(sent):
            raise ChartError(f"tile {t} sends {len(sent)} vector(s) on link {link} but tile {u} receives "
                             f"{len(got)} on its link {rlink}: the programs do not pair up")
        out += [LinkArrow(t, link, sn, s, u, rlink, rn, r) for (s, sn), (r, rn) in zip(sent, got)]
    fed = {peer(t, link) for t, link in sends}
    unsent = [(u, k) for (u, k), got in recvs.items() if got and (u, k) not in fed]
    if unsent:
        u, k = unsent[0]
        raise ChartError(f"tile {u} receives on link {k} but nothing is sent to it")
    return sorted(out, key=lambda x: (x.send, x.src, x.link))


def tray_chart(programs: list[Program], path, manifest=None, *, title: str | None = None,
               window: tuple | None = None, dpi: int = 110, spans=()) -> Path:
    """Draw a tray's schedule to ``path`` (``.svg`` or ``.png``) in SAC cycles: per tile a
    band with a row per queue kind (``GROUPS``), a thin lane per slice, a bar on every cycle
    a slice issues (coloured as in :func:`schedule_chart`), the predicted done cycle
    (``manifest.tile[t].cycles``, if given) as a black tick, and every C2C transfer
    (:func:`tray_transfers`) as an arrow from SEND to RECV, coloured by sending tile.
    ``window = (first, last)`` limits the cycle axis; ``spans``: ``(tile, first, last,
    label)`` frames over a tile's band (an MoE slot and its expert).  Returns the path."""
    path = chart_path(path)
    if not programs:
        raise ChartError("no programs to draw")
    plt = pyplot()
    from matplotlib.lines import Line2D

    n = len(programs)
    transfers = tray_transfers(programs)
    rows = _tray_rows(programs)
    end = rows.end
    if manifest is not None:        # room for the done ticks
        end = max(end, max(m.cycles for m in manifest.tile) + 1)
    lo, hi = _window(window, end, "the programs run")
    n_issue = sum(len(v) for v in rows.issues.values())

    with plt.rc_context({"svg.fonttype": "none", "font.size": 9, "path.simplify": True}):
        fig, ax = plt.subplots(figsize=(14, 1.0 + 0.32 * rows.height), dpi=dpi)
        by_op = _draw_issues(ax, rows, lo, hi, rasterized=n_issue > 20000)
        if manifest is not None:
            for t, (top, bottom) in enumerate(rows.bands):
                c = manifest.tile[t].cycles
                if lo <= c <= hi + 1:
                    ax.plot([c - 0.5, c - 0.5], [top - 0.15, bottom + 0.15], color="black", linewidth=1.2)
        colours = plt.get_cmap("tab10" if n <= 10 else "tab20")
        _draw_transfers(ax, transfers, rows, colours, lo, hi)
        _draw_spans(ax, spans, rows, lo, hi)
        for t, (top, bottom) in enumerate(rows.bands):
            ax.text(-0.065, (top + bottom) / 2, f"tile {t}", transform=ax.get_yaxis_transform(), ha="right",
                    va="center", fontsize=10, fontweight="bold", color=colours(t % colours.N))
            if t:
                ax.axhline(top - BAND_GAP / 2, color="0.6", linewidth=0.6)
        ax.set_yticks([r[0] for r in rows.ticks], [r[1] for r in rows.ticks], fontsize=7)
        ax.set_ylim(rows.height + 0.2, -0.2)
        ax.set_xlim(lo - 0.5, hi + 0.5)
        ax.set_xlabel("SAC cycle (program time, the same on every tile)")
        ax.grid(axis="x", alpha=0.3)
        extra = [Line2D([], [], color="0.3", linewidth=0.8, marker=">", markevery=[1],
                        label="C2C transfer:\nSEND -> RECV")]
        if manifest is not None:
            extra.append(Line2D([], [], color="black", linewidth=1.2, label="predicted done"))
        _legend(ax, by_op, extra)
        if title is None:
            title = f"tray of {n} tiles: {end} SAC cycles, {n_issue} instructions issued, {len(transfers)} " \
                    "vectors over C2C links"
        ax.set_title(title, loc="left")
        return save_figure(plt, fig, path)


@dataclass
class TrayRows:
    """The rows of :func:`tray_chart` (y grows downwards, a row is 1.0 high)."""
    lanes: dict          # (tile, queue) -> (top, height) of the queue's lane
    ticks: list          # (centre, group) of every row
    bands: list          # (top, bottom) of every tile's band
    issues: dict         # (tile, queue) -> the queue's issue timeline (archmodel.expand)
    end: int             # the latest halt cycle
    height: float        # of all the bands


def _tray_rows(programs: list[Program]) -> TrayRows:
    """Per tile, top to bottom, the groups present; each group's lanes one per slice."""
    lane_y, row_ticks, bands, issues, end = {}, [], [], {}, 0
    y = 0.0
    for t, prog in enumerate(programs):
        names = prog.config.queue_names
        for name in names:
            tl, halt = expand(prog.queues.get(name, []))
            issues[t, name] = tl
            end = max(end, halt)
        top = y
        for g in GROUPS:
            members = [s for s in names if s.startswith(g)]
            if not members:
                continue
            h = 1.0 / len(members)
            for k, s in enumerate(members):
                lane_y[t, s] = (y + k * h, h)
            row_ticks.append((y + 0.5, g))
            y += 1.0
        bands.append((top, y))
        y += BAND_GAP
    return TrayRows(lane_y, row_ticks, bands, issues, end, y - BAND_GAP)


def _draw_issues(ax, rows: TrayRows, lo: int, hi: int, rasterized: bool) -> dict:
    """Every lane's issue bars within ``lo..hi``, one compound path per opcode (small SVGs);
    returns the bars by opcode (for the legend)."""
    from matplotlib.patches import PathPatch
    from matplotlib.path import Path as MplPath

    by_op = defaultdict(list)
    for (t, name), tl in rows.issues.items():
        y0, h = rows.lanes[t, name]
        a, b = y0 + 0.06 * h, y0 + 0.94 * h
        for op, start, length in _runs(tl, lo, hi):
            x0, x1 = start - 0.5, start + length - 0.5
            by_op[op].append(((x0, a), (x1, a), (x1, b), (x0, b)))
    for op, polys in by_op.items():
        ax.add_patch(PathPatch(MplPath.make_compound_path_from_polys(np.asarray(polys, float)),
                               facecolor=OP_COLOURS[Op(op)], linewidth=0, rasterized=rasterized))
    return by_op


def _draw_transfers(ax, transfers: list[LinkArrow], rows: TrayRows, colours, lo: int, hi: int) -> None:
    """The C2C transfers that overlap ``lo..hi``: SEND lane -> RECV lane, coloured by sender."""
    mid = {k: y0 + h / 2 for k, (y0, h) in rows.lanes.items()}      # a lane's centre line
    shown = [x for x in transfers if x.recv >= lo and x.send <= hi]
    if shown:
        ax.quiver([x.send for x in shown], [mid[x.src, x.src_slice] for x in shown],
                  [x.recv - x.send for x in shown],
                  [mid[x.dst, x.dst_slice] - mid[x.src, x.src_slice] for x in shown],
                  color=[colours(x.src % colours.N) for x in shown], angles="xy", scale_units="xy", scale=1,
                  width=0.0012, headwidth=5, headlength=7, headaxislength=6, alpha=0.7, zorder=3)


def _draw_spans(ax, spans, rows: TrayRows, lo: int, hi: int) -> None:
    """Each ``(tile, first, last, label)`` of ``spans`` that overlaps ``lo..hi`` as a
    labelled dashed frame over the tile's band."""
    from matplotlib.patches import Rectangle

    for t, first, last, label in spans:
        if last < lo or first > hi:
            continue
        top, bottom = rows.bands[t]
        ax.add_patch(Rectangle((first - 0.5, top - 0.12), last - first + 1, bottom - top + 0.24, fill=False,
                               edgecolor="0.25", linestyle="--", linewidth=0.8, zorder=4))
        ax.text(max(first, lo), top - 0.14, label, fontsize=7, va="bottom", ha="left", color="0.15", zorder=5)


def save_figure(plt, fig, path: Path, compact: bool = True, dpi: float | None = None) -> Path:
    """Write ``fig`` to ``path`` (its directory made) and close it: an SVG without a date
    (the same picture, the same file: matplotlib would salt its ids at random without
    ``svg.hashsalt``) and, with ``compact``, its path coordinates shortened."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    svg = path.suffix.lower() == ".svg"
    with plt.rc_context({"svg.hashsalt": "lpu"}):
        fig.savefig(path, bbox_inches="tight", dpi=dpi or "figure", metadata={"Date": None} if svg else None)
    plt.close(fig)
    if svg and compact:
        _compact_svg(path)
    return path


def _compact_svg(path: Path) -> None:
    """Path coordinates to 0.1 pt and one line each: the picture is the same, the file
    about a third smaller (matplotlib writes six decimals and a line per vertex)."""
    def short(m):
        return re.sub(r"\s*\n\s*", " ", re.sub(r"(\d+\.\d)\d+", r"\1", m.group(0)))
    path.write_text(re.sub(r' d="[^"]*"', short, path.read_text()))


def loop_schedule(host_us: list, tray_us: list, streams: int, tokens: int) -> list:
    """The decode loop on two engines, the host and the tray, each one thing at a time:
    ``streams`` micro-batches (1: batch 1) each decode ``tokens`` positions; a position is
    ``host_us[0]``, ``tray_us[0]``, ``host_us[1]``, ... ``host_us[L]`` (the host's part
    before each layer's FFN, the FFN, and the host's last part).  Greedy in time: each
    engine takes the ready step that has waited longest.  Returns ``[(engine, stream,
    position, step, start, end)]`` (microseconds)."""
    L = len(tray_us)
    steps = [("host", host_us[0])] + [s for l in range(L) for s in (("tray", tray_us[l]), ("host", host_us[l + 1]))]
    nxt = [0] * streams                 # next step index per stream (over all its positions)
    ready = [0.0] * streams
    free = {"host": 0.0, "tray": 0.0}
    out, total = [], len(steps) * tokens
    while any(n < total for n in nxt):
        cands = []
        for s in range(streams):
            if nxt[s] < total:
                eng, dur = steps[nxt[s] % len(steps)]
                cands.append((max(ready[s], free[eng]), ready[s], s, eng, dur))
        start, _, s, eng, dur = min(cands)
        k = nxt[s]
        out.append((eng, s, k // len(steps), k % len(steps), start, start + dur))
        free[eng] = ready[s] = start + dur
        nxt[s] += 1
    return out


def loop_chart(host_us: list, tray_us: list, path, *, tokens: int = 2, title: str | None = None,
               dpi: int = 110) -> tuple[Path, dict]:
    """Two timelines of the decode loop (:func:`loop_schedule`): batch 1, and two
    micro-batches in flight (the tray works on one while the host works on the other);
    returns the path and each one's tokens per second."""
    path = chart_path(path)
    plt = pyplot()
    rates = {}
    with plt.rc_context({"svg.fonttype": "none", "font.size": 9}):
        fig, axes = plt.subplots(2, 1, figsize=(12, 3.6), dpi=dpi, sharex=True)
        colours = plt.get_cmap("tab10")
        for ax, streams in zip(axes, (1, 2)):
            sched = loop_schedule(host_us, tray_us, streams, tokens)
            end = max(e for *_, e in sched)
            rates[streams] = streams * tokens / end * 1e6
            for eng, s, pos, k, a, b in sched:
                y = 0 if eng == "host" else 1
                ax.broken_barh([(a, b - a)], (y + 0.1 + 0.4 * s / streams, 0.8 / streams),
                               facecolors=colours(s), edgecolor="white", linewidth=0.3)
                if eng == "tray":
                    ax.text((a + b) / 2, y + 0.5, f"L{(k - 1) // 2}", ha="center", va="center", fontsize=6,
                            color="white")
            ax.set_yticks([0.5, 1.5], ["host", "tray"])
            ax.set_ylim(0, 2)
            ax.set_title(f"{'batch 1' if streams == 1 else 'two micro-batches in flight'}: "
                         f"{rates[streams]:,.0f} tokens/s", loc="left", fontsize=9)
            ax.grid(axis="x", alpha=0.3)
        axes[-1].set_xlabel("microseconds")
        if title:
            fig.suptitle(title, x=0.01, ha="left", fontsize=10)
        fig.tight_layout()
        save_figure(plt, fig, path, compact=False)
    return path, rates
