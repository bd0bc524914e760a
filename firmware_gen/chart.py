"""Schedule pictures of a compiled program (matplotlib, Agg backend; SVG or PNG).

:func:`schedule_chart` draws three panels over one cycle axis:

1. **Issue**: one row per slice, west to east (``cfg.slice_names``), one bar per issued
   data instruction, coloured by opcode.  Issue cycles come from
   :func:`archmodel.expand` on each queue, so they are exactly the cycles the golden
   model and the hardware issue on (``NOP`` gaps and ``REPEAT`` re-issues included).
2. **East-flowing** and 3. **west-flowing stream occupancy**: at each position and
   cycle, how many of the direction's ``streams`` carry a *live* value: one that some
   slice downstream will still read.  A value is live from the position after its
   driver up to its last reader (the span the compiler reserves in
   :class:`reserve.Reservations`), so values that nobody reads, or that have passed
   their last reader, are not counted.  The values are derived from the program alone
   with the ISA's latencies (:func:`stream_occupancy`).

Everything is computed with numpy and drawn as a few collections and images, so programs
of tens of thousands of cycles render in a few seconds.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .archmodel import expand
from .isa import (DATA_OPS, EAST, INT32_PLANES, MXM_LATENCY, READ_LATENCY, SXM_LATENCY, VXM_LATENCY, WEST,
                  MMFlag, Op, SxmFlag, VopFlag)
from .program import Program

# One colour per opcode, fixed so that pictures of different programs compare.
OP_COLOURS = {
    Op.READ: "#1f77b4", Op.WRITE: "#ff7f0e", Op.LW: "#2ca02c", Op.MM: "#d62728", Op.LX: "#9467bd",
    Op.VOP: "#8c564b", Op.SHIFT: "#e377c2", Op.PERM: "#7f7f7f", Op.DIST: "#bcbd22", Op.TRI: "#17becf",
    Op.TRO: "#aec7e8",
}
FORMATS = (".svg", ".png")


class ChartError(ValueError):
    """The picture cannot be made (bad file type, empty window); the message says why."""


@dataclass
class Timeline:
    """What a program does, cycle by cycle, as the chart draws it."""
    issues: dict            # slice name -> [(cycle, Instr)] data instructions in issue order
    drives: list            # (dir, stream, position, drive cycle)
    reads: list             # (dir, stream, position, cycle)
    end: int                # first cycle after the last issue or drive


def timeline(program: Program) -> Timeline:
    """Issue cycles of every data instruction, and every stream drive and read, from the
    program and the ISA's latencies (``isa.py``)."""
    cfg = program.config
    L = cfg.lanes
    issues, drives, reads, end = {}, [], [], 0
    for name in cfg.slice_names:
        tl, halt = expand(program.queues.get(name, []))
        issues[name] = tl
        end = max(end, halt)
        p = cfg.position(name)
        for t, ins in tl:
            op, d, s = ins.op, ins.dir, ins.stream
            if op == Op.READ:
                drives.append((d, s, p, t + READ_LATENCY))
            elif op in (Op.WRITE, Op.LX, Op.TRI, Op.SHIFT, Op.DIST):
                reads.append((d, s, p, t))
            elif op == Op.PERM:
                reads += [(d, s, p, t), (d, ins.operand("map"), p, t)]
            elif op == Op.LW:
                n, delay = ins.operand("n"), ins.operand("delay")
                reads += [(d, s + r % n, p, t + delay + r // n) for r in range(L)]
            elif op == Op.MM:
                if not ins.aux & MMFlag.XBUF:
                    reads.append((d, s, p, t))
                if ins.aux & MMFlag.EMIT:
                    out_dir = EAST if name == "MXM_W" else WEST
                    drives += [(out_dir, ins.operand("out") + b, p, t + MXM_LATENCY) for b in range(INT32_PLANES)]
            elif op == Op.VOP:
                reads += [(d, s + b, p, t) for b in range(INT32_PLANES)]
                if ins.aux & VopFlag.GATE:
                    reads += [(1 - d, s + b, p, t) for b in range(INT32_PLANES)]
            if op == Op.VOP:
                outs, lat = ((VopFlag.OUT_E, EAST), (VopFlag.OUT_W, WEST)), VXM_LATENCY
            elif op in (Op.SHIFT, Op.PERM, Op.DIST, Op.TRO):
                outs, lat = ((SxmFlag.OUT_E, EAST), (SxmFlag.OUT_W, WEST)), SXM_LATENCY
            else:
                outs = ()
            for flag, od in outs:
                if ins.aux & flag:
                    drives.append((od, ins.operand("out"), p, t + lat))
    if drives:
        end = max(end, max(t for *_, t in drives) + 1)
    if reads:
        end = max(end, max(t for *_, t in reads) + 1)
    return Timeline(issues, drives, reads, end)


def stream_occupancy(program: Program, tl: Timeline | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``(east, west)``: int arrays ``[position, cycle]`` counting the streams of that
    direction that carry a live value there (from the position after the driver up to the
    value's last reader; a later drive on the same stream downstream ends the value)."""
    cfg = program.config
    tl = tl or timeline(program)
    P, T = cfg.positions, max(tl.end, 1)
    occ = {EAST: np.zeros((P, T + P), np.int32), WEST: np.zeros((P, T + P), np.int32)}
    # A value driven at p on cycle t is at p + k (east) / p - k (west) on cycle t + k: it
    # keeps t - p (east) or t + p (west) constant, its diagonal.
    diag = lambda d, p, t: t - p if d == EAST else t + p   # noqa: E731
    drivers, readers = defaultdict(list), defaultdict(list)
    for d, s, p, t in tl.drives:
        drivers[(d, s, diag(d, p, t))].append((p, t))
    for d, s, p, t in tl.reads:
        readers[(d, s, diag(d, p, t))].append(p)
    qs, ts, ds = [], [], []
    for key, drv in drivers.items():
        d = key[0]
        rd = readers.get(key)
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
            if not len(mine):
                continue
            far = int(mine[-1])
            k = np.arange(1, abs(far - p) + 1)
            qs.append(p + sign * k)
            ts.append(t + k)
            ds.append(np.full(len(k), d))
    if qs:
        q, t, d = np.concatenate(qs), np.concatenate(ts), np.concatenate(ds)
        for dd in (EAST, WEST):
            sel = d == dd
            np.add.at(occ[dd], (q[sel], t[sel]), 1)
    return occ[EAST][:, :T], occ[WEST][:, :T]


def _runs(cycles: np.ndarray, ops: np.ndarray):
    """Consecutive cycles with one opcode -> (op, start, length) runs."""
    if not len(cycles):
        return []
    brk = np.flatnonzero((np.diff(cycles) != 1) | (np.diff(ops) != 0)) + 1
    starts = np.r_[0, brk]
    stops = np.r_[brk, len(cycles)]
    return [(int(ops[a]), int(cycles[a]), int(cycles[b - 1] - cycles[a] + 1)) for a, b in zip(starts, stops)]


def schedule_chart(program: Program, path, *, title: str | None = None, window: tuple | None = None,
                   dpi: int = 110) -> Path:
    """Draw the schedule of ``program`` to ``path`` (``.svg`` or ``.png``).

    ``window = (first, last)`` limits the cycle axis (inclusive; None = whole program).
    Returns the path written."""
    path = Path(path)
    if path.suffix.lower() not in FORMATS:
        raise ChartError(f"cannot write a chart as {path.suffix or 'a file without extension'!r} "
                         f"({path.name}); use a name ending in {' or '.join(FORMATS)}")
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.colors import BoundaryNorm, ListedColormap
    from matplotlib.patches import Patch

    cfg = program.config
    names, P, S = cfg.slice_names, cfg.positions, cfg.streams
    tl = timeline(program)
    east, west = stream_occupancy(program, tl)
    lo, hi = 0, max(tl.end - 1, 0)
    if window is not None:
        lo, hi = max(0, int(window[0])), min(hi, int(window[1]))
        if hi < lo:
            raise ChartError(f"the cycle window {window[0]}..{window[1]} holds nothing: the program "
                             f"runs cycles 0..{max(tl.end - 1, 0)}")
    n_issue = sum(len(v) for v in tl.issues.values())

    with matplotlib.rc_context({"svg.fonttype": "none", "font.size": 9, "path.simplify": True}):
        fig, axes = plt.subplots(3, 1, sharex=True, figsize=(14, 9.5), dpi=dpi,
                                 gridspec_kw={"height_ratios": [1.25, 1, 1], "hspace": 0.12})
        ax = axes[0]
        used = set()
        many = n_issue > 4000
        for p, name in enumerate(names):
            tl_q = tl.issues[name]
            if not tl_q:
                continue
            cyc = np.fromiter((c for c, _ in tl_q), np.int64, len(tl_q))
            ops = np.fromiter((int(i.op) for _, i in tl_q), np.int64, len(tl_q))
            order = np.argsort(cyc, kind="stable")
            runs = _runs(cyc[order], ops[order])
            by_op = defaultdict(list)
            for op, start, length in runs:
                if start + length - 1 >= lo and start <= hi:
                    by_op[op].append((start - 0.5, length))
            for op, bars in by_op.items():
                used.add(op)
                ax.broken_barh(bars, (p - 0.38, 0.76), facecolors=OP_COLOURS[Op(op)], linewidth=0,
                               rasterized=many)
        ax.set_ylim(P - 0.5, -0.5)
        ax.set_yticks(range(P), names)
        ax.set_ylabel("slice (west to east)")
        ax.grid(axis="x", alpha=0.3)
        ax.legend(handles=[Patch(color=OP_COLOURS[Op(o)], label=Op(o).name) for o in sorted(used)],
                  loc="upper left", bbox_to_anchor=(1.005, 1.0), fontsize=8, title="issued", frameon=False)
        ax.set_title(title or f"schedule: {tl.end} cycles, {n_issue} data instructions issued", loc="left")

        cmap = ListedColormap(plt.get_cmap("viridis")(np.linspace(0, 1, S + 1)))
        cmap.colors[0] = (1, 1, 1, 1)
        norm = BoundaryNorm(np.arange(-0.5, S + 1), S + 1)
        for ax, occ, label in ((axes[1], east, "east-flowing"), (axes[2], west, "west-flowing")):
            img = ax.imshow(occ[:, lo:hi + 1], aspect="auto", interpolation="nearest", cmap=cmap, norm=norm,
                            extent=(lo - 0.5, hi + 0.5, P - 0.5, -0.5))
            ax.set_yticks(range(P), names)
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
        b1 = axes[1].get_position()
        b0 = axes[0].get_position()
        axes[0].set_position([b0.x0, b0.y0, b1.width, b0.height])
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, bbox_inches="tight")
        plt.close(fig)
    return path
