"""The steady state of a tray in one picture (``lpu decode --tiles N --chart FILE``).

:func:`steady_chart` draws a few token positions of a decode loop on one time axis in
cycles: a row for the host (its bus segments between runs), a row per pair of linked tiles
(every C2C transfer, from its SEND to its RECV) and a row per tile (from its start to its
done in each run, labelled with the layer and the experts it ran).  Runs follow one
another with nothing but the host's bus traffic between them: the tray is loaded, reset and
clocked once, before the first run, and never again.

The data are plain dicts, one per armed run of the tray (:func:`steady_chart` says which
keys); :func:`run_timeline` makes a run's tiles and links from its programs and each
tile's cycles, as the golden model times them (``c2c.wall_cycles``) or as measured.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import numpy as np

from lpu_arch import c2c
from lpu_arch.isa import Op

from firmware_gen.chart import ChartError, chart_path, pyplot, save_figure, tray_transfers
from firmware_gen.compiler.system import DESKEW_SLICE
from firmware_gen.golden.archmodel import expand

MAX_LINK_ROWS = 12          # more linked pairs than this: one "links" row for them all
MAX_POSITIONS = 8           # token positions one picture shows at most (each its layers' runs)
HOST_COLOURS = {"before": "#4c72b0", "after": "#dd8452"}
LEAD_COLOUR = "#d9d9d9"


def run_timeline(programs, cycles, start: int = c2c.START_LEAD, offsets=None, assignment=None) -> dict:
    """One armed run of a tray's ``programs`` in cycles from the host's HAC read that arms
    it: ``tiles``, each tile's ``[start, done]`` (SAC cycle 0 at ``start``; ``cycles[t]``
    SAC cycles); ``links``, every C2C transfer (:func:`chart.tray_transfers`) as ``[src,
    dst, send, recv]``, SAC cycle ``s`` of tile ``t`` at ``start + s`` plus the slack of
    every RUNTIME_DESKEW it issued before ``s``; with an MoE round's ``assignment``
    (``{(tile, token, slot): expert}``), ``experts``: per tile the experts it ran.

    Default: the golden model's timing (``c2c.wall_cycles``: the arming lead
    ``START_LEAD``, then the deskews' slacks).  Measured: ``start`` and ``offsets``, each
    tile's last deskew offset, both from the HAC read; the slack then is ``offsets[t] -
    start`` (``scoreboard.check_wall``'s)."""
    slacks = []
    for t, prog in enumerate(programs):
        issued, _ = expand(prog.queues.get(DESKEW_SLICE, []))
        own = [(c, ins.count) for c, ins in issued if ins.op == Op.RUNTIME_DESKEW]
        if offsets is not None and own:      # the measured slack, at the last deskew
            total = offsets[t] - start
            own = own[:-1] + [(own[-1][0], total - sum(n for _, n in own[:-1]))]
        slacks.append(own)

    def at(t, s):
        return start + s + sum(n for c, n in slacks[t] if c < s)

    done = [start + c + sum(n for _, n in slacks[t]) for t, c in enumerate(cycles)]
    out = {"tiles": [[start, d] for d in done],
           "links": [[x.src, x.dst, at(x.src, x.send), at(x.dst, x.recv)] for x in tray_transfers(programs)]}
    if assignment is not None:
        out["experts"] = [sorted(e for (u, _, _), e in assignment.items() if u == t) for t in range(len(programs))]
    return out


def place_runs(runs: list, positions: int = 3) -> list[dict]:
    """The runs of the first ``positions`` token positions laid end to end on one axis:
    per run its host segment before (``host[0]`` cycles), its start, its tiles, links and
    end (the last tile's done), and the host's segment after it (``host[1]``).  A run
    without ``host`` (host time not simulated) follows the one before at once."""
    placed, now = [], 0
    for r in runs:
        if r["position"] >= positions:
            break
        before, after = r.get("host") or (0, 0)
        s = now + before
        tiles = [(s + a, s + b) for a, b in r["tiles"]]
        end = max([s] + [b for _, b in tiles])
        placed.append({**r, "host_before": (now, s), "start": s, "spans": tiles, "end": end,
                       "host_after": (end, end + after),
                       "transfers": [(u, v, s + a, s + b) for u, v, a, b in r.get("links", ())]})
        now = end + after
    return placed


def _rows(placed: list) -> tuple[list, dict, int]:
    """Row labels top to bottom (host, the linked pairs, the tiles), the row of each pair
    ``(a, b)``, a < b (every pair's row is 1, "links", when there are more pairs than
    ``MAX_LINK_ROWS``), and the first tile row."""
    pairs = sorted({(min(u, v), max(u, v)) for p in placed for u, v, *_ in p["transfers"]})
    tiles = max(len(p["spans"]) for p in placed)
    if len(pairs) > MAX_LINK_ROWS:
        labels, row = ["host", "links"], {pr: 1 for pr in pairs}
    else:
        labels, row = ["host"] + [f"link {a}\u2013{b}" for a, b in pairs], {pr: 1 + k for k, pr in enumerate(pairs)}
    first_tile = len(labels)
    return labels + [f"tile {t}" for t in range(tiles)], row, first_tile


def _fits(ax, width: float, text: str) -> bool:
    """Whether ``text`` at 7 pt fits in ``width`` cycles of the axes."""
    lo, hi = ax.get_xlim()
    inches = ax.figure.get_figwidth() * ax.get_position().width * width / max(hi - lo, 1)
    return inches > 0.065 * len(text) + 0.04


def _draw_tiles(ax, placed: list, first: int, colours) -> None:
    """Per run and tile: the armed lead (from the run's start to the tile's SAC 0) in grey,
    then its busy span, coloured by layer and labelled ``L<layer>`` and its experts."""
    for p in placed:
        for t, (a, b) in enumerate(p["spans"]):
            y = first + t
            if a > p["start"]:
                ax.broken_barh([(p["start"], a - p["start"])], (y - 0.3, 0.6), facecolors=LEAD_COLOUR, linewidth=0)
            ax.broken_barh([(a, b - a)], (y - 0.38, 0.76), facecolors=colours(2 * (p["layer"] % 10) + 1),
                           edgecolor=colours(2 * (p["layer"] % 10)), linewidth=0.8)
            label = f"L{p['layer']}"
            if "tile_experts" in p:
                label += " e" + ",".join(map(str, p["tile_experts"][t])) if p["tile_experts"][t] else " \u2013"
            if _fits(ax, b - a, label):
                ax.text((a + b) / 2, y, label, ha="center", va="center", fontsize=7)


def _draw_links(ax, placed: list, row: dict, colours) -> str | None:
    """Every transfer as a bar from its send to its receive, in its pair's row (the lower
    tile's sends above the middle, the higher tile's below), coloured by sending tile; with
    one row for every link (``row`` maps every pair to 1), how many vectors are in flight
    (then the row's label, naming the peak)."""
    if len(row) > MAX_LINK_ROWS:
        return f"links: vectors\nin flight (peak {_draw_in_flight(ax, placed, 1)})"
    for p in placed:
        for u, v, a, b in p["transfers"]:
            y = row[min(u, v), max(u, v)]
            top = y - 0.4 if u < v else y + 0.02
            ax.broken_barh([(a, max(b - a, 1))], (top, 0.38), facecolors=colours(u % colours.N), alpha=0.75,
                           linewidth=0)
    return None


def _draw_in_flight(ax, placed: list, y: int) -> int:
    """The vectors in flight on all links (sent, not yet received) over time, as a filled
    step in row ``y`` scaled to its peak; returns the peak."""
    steps = {}
    for p in placed:
        for _, _, a, b in p["transfers"]:
            steps[a] = steps.get(a, 0) + 1
            steps[b + 1] = steps.get(b + 1, 0) - 1
    xs = sorted(steps)
    level = np.cumsum([steps[x] for x in xs])
    peak = max(int(level.max()), 1) if len(level) else 1
    ax.fill_between(xs, y + 0.4, y + 0.4 - 0.8 * level / peak, step="post", color="0.35", linewidth=0)
    return peak


def _draw_host(ax, placed: list, simulated: bool) -> None:
    """The host's bus segments (before a run: STATUS read, x, routing and entry written;
    after: y read), or, when host time is not simulated, a tick where each run is armed."""
    for p in placed:
        if simulated:
            for key in ("before", "after"):
                a, b = p[f"host_{key}"]
                if b > a:
                    ax.broken_barh([(a, b - a)], (-0.38, 0.76), facecolors=HOST_COLOURS[key], linewidth=0)
        else:
            ax.plot([p["start"]] * 2, [-0.38, 0.38], color=HOST_COLOURS["before"], linewidth=1.2)
    if not simulated:
        ax.text(placed[-1]["end"] / 2, 0, "host time not simulated: the runs are drawn back to back, a tick where "
                "the host arms each", ha="center", va="center", fontsize=7, color="0.3",
                bbox={"facecolor": "white", "edgecolor": "none", "pad": 1})


def _draw_positions(ax, placed: list, tokens) -> None:
    """A dashed line where each position's first run begins (its host segment included),
    a dotted one between its runs, and the position (and its input token) above."""
    seen = set()
    for p in placed:
        x = p["host_before"][0]
        if p["position"] in seen:
            ax.axvline(x, color="0.75", linestyle=":", linewidth=0.7, zorder=0)
            continue
        seen.add(p["position"])
        ax.axvline(x, color="0.35", linestyle="--", linewidth=0.8, zorder=0)
        token = f", token {tokens[p['position']]}" if tokens is not None else ""
        ax.text(x, -0.62, f" position {p['position']}{token}", ha="left", va="bottom", fontsize=8)


def _legend(ax, sources: dict, simulated: bool, links, layer_colours, layers: list, moe: bool) -> None:
    """What each mark is, and where each figure came from (``sources``)."""
    from matplotlib.patches import Patch
    handles = []
    if simulated:
        handles += [Patch(color=HOST_COLOURS["before"], label="host bus: STATUS read,\nx, routing, entry written"),
                    Patch(color=HOST_COLOURS["after"], label="host bus: y read")]
    handles += [Patch(color=links(0), alpha=0.75, label="link transfer, SEND to RECV\n(the sending tile's colour;\n"
                                                       "the lower tile's above)") if links else
                Patch(color="0.35", label="vectors in flight on all\nlinks, SEND to RECV"),
                Patch(color=LEAD_COLOUR, label="tile armed: from the host's\nHAC read to START_HAC")]
    handles += [Patch(facecolor=layer_colours(2 * (l % 10) + 1), edgecolor=layer_colours(2 * (l % 10)),
                      label=f"tile busy, layer {l} (L{l})")
                for l in layers]
    if moe:
        handles.append(Patch(color="none", label="e<n>: the routed experts\nthe tile ran (\u2013: none)"))
    leg = ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.005, 1.0), fontsize=7, frameon=False)
    ax.add_artist(leg)
    notes = "\n".join(textwrap.fill(f"{k}: {v}", 44, subsequent_indent="  ") for k, v in sources.items())
    ax.text(1.012, 0.0, "where each figure comes from:\n" + notes, transform=ax.transAxes, fontsize=7, va="bottom",
            ha="left")


def steady_chart(runs: list, path, *, sources: dict, clock_mhz: float = 900.0, positions: int = 3, tokens=None,
                 title: str | None = None, first_load: str | None = None, xlabel: str | None = None,
                 dpi: int = 110) -> Path:
    """Draw the first ``positions`` token positions of a tray's decode loop to ``path``
    (``.svg`` or ``.png``) on one axis in cycles, microseconds at ``clock_mhz`` above.

    ``runs``: one dict per armed run of the tray, in order: ``position``, ``layer``,
    ``tiles`` (each tile's ``[start, done]`` from the HAC read that arms the run), ``links``
    (``[src, dst, send, recv]``, the same frame), optionally ``host`` (``[before, after]``:
    the host's bus cycles before and after the run; absent when host time is not simulated)
    and ``tile_experts`` (per tile the experts it ran).  ``sources``: where each row's
    figures came from (``{"host": ..., "tiles": ..., "links": ...}``), said in the legend;
    ``tokens``: the input token of each position; ``first_load``: what happened before
    cycle 0, said in the title; ``xlabel``: what the cycles are.  Returns the path written."""
    path = chart_path(path)
    if not 1 <= positions <= MAX_POSITIONS:
        raise ChartError(f"cannot draw {positions} token positions: 1 to {MAX_POSITIONS} fit one picture")
    placed = place_runs(runs, positions)
    if not placed:
        raise ChartError("no tray runs to draw")
    plt = pyplot()
    labels, row, first = _rows(placed)
    simulated = any(p.get("host") for p in placed)
    end = max(p["host_after"][1] for p in placed)
    with plt.rc_context({"svg.fonttype": "none", "font.size": 9}):
        fig, ax = plt.subplots(figsize=(14, 1.6 + 0.36 * len(labels)), dpi=dpi)
        ax.set_xlim(0, end)
        ax.set_ylim(len(labels) - 0.5, -1.0)
        tab = plt.get_cmap("tab10")
        _draw_host(ax, placed, simulated)
        labels[1] = _draw_links(ax, placed, row, tab) or labels[1]
        _draw_tiles(ax, placed, first, plt.get_cmap("tab20"))
        _draw_positions(ax, placed, tokens)
        for y in (0.5, first - 0.5):
            ax.axhline(y, color="0.5", linewidth=0.6)
        ax.set_yticks(range(len(labels)), labels, fontsize=8)
        for t, tick in enumerate(ax.get_yticklabels()[first:]):
            tick.set_color(tab(t % tab.N))          # the colour of the tile's link transfers
        ax.set_xlabel(xlabel or "cycles from the host's arming of the first run (after the first load)")
        top = ax.secondary_xaxis("top", functions=(lambda c: c / clock_mhz, lambda us: us * clock_mhz))
        top.set_xlabel(f"\u00b5s at {clock_mhz:g} MHz", fontsize=8)
        ax.grid(axis="x", alpha=0.25)
        _legend(ax, sources, simulated, tab if len(row) <= MAX_LINK_ROWS else None, plt.get_cmap("tab20"),
                sorted({p["layer"] for p in placed}), any("tile_experts" in p for p in placed))
        shown = sorted({p["position"] for p in placed})
        head = title or f"{len(placed)} tray runs of token positions {shown[0]}..{shown[-1]} on one time axis"
        lines = [head] + ([first_load] if first_load else [])
        ax.set_title("\n".join(textwrap.fill(x, 170) for x in lines), loc="left", fontsize=9)
        return save_figure(plt, fig, path)
