"""The bench's history: every `make bench` run's figures, keyed by commit, and a picture of them.

    python -m sim.bench.history [draw] [--file FILE] [--out SVG] [--config NAME] [--last N]
    python -m sim.bench.history add-bench BENCH_JSON [--commit REV] [--dirty] [--config NAME]
    python -m sim.bench.history add-synth [REPORT_JSON] [--commit REV] [--dirty]
    python -m sim.bench.history show [--file FILE]

``bench/history.jsonl`` holds one JSON object per line, appended, never rewritten: a bench
run (``"kind": "bench"``, :func:`bench_entry`) or a synthesis report (``"kind": "synth"``,
:func:`synth_entry`).  Every entry names the commit it measured, when it ran and whether
the tree had uncommitted changes (``dirty``, ``dirty_files``; the history file and
``bench/results/`` do not count).

``draw`` (the default) pictures one configuration's entries over commits, oldest left: one
x position per commit (``*`` and hollow markers: a dirty tree), a line through each
commit's latest run and each figure's target dashed, so that a regression shows as a step."""

from __future__ import annotations

import argparse
import datetime
import json
import math
import subprocess
import sys
from pathlib import Path

from lpu_arch.errors import LpuError, error_line

from sim.table import Column, Table

ROOT = Path(__file__).resolve().parents[2]
HISTORY = ROOT / "bench" / "history.jsonl"
PICTURE = ROOT / "bench" / "results" / "history.svg"
SCHEMA = "lpu-history/1"
KINDS = ("bench", "synth")
REQUIRED = ("schema", "kind", "commit", "date", "dirty")
# Paths whose changes do not make a tree dirty: the history itself and the bench's outputs.
NOT_DIRTY = ("bench/history.jsonl", "bench/results/")
# The commit whose build the simulator speed targets compare against (issue 20).
BASELINE = "f83d8c0"


class HistoryError(LpuError, ValueError):
    """The history file cannot be read or an entry cannot be made; the message says where and why."""


# ---- what was measured ---------------------------------------------------------------------------
def _git(args: list[str], root: Path, strip: bool = True) -> str:
    out = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, check=True).stdout
    return out.strip() if strip else out


def git_state(root: Path = ROOT, commit: str | None = None, dirty: bool | None = None) -> dict:
    """The commit an entry measures: ``commit`` (default HEAD) with its short hash,
    subject and date, and ``dirty`` (for HEAD from ``git status``, else as given).  Without
    git or a repository: commit ``"unknown"`` and ``dirty`` None."""
    try:
        full = _git(["rev-parse", "--verify", f"{commit or 'HEAD'}^{{commit}}"], root)
        short, subject, date = _git(["log", "-1", "--format=%h%n%s%n%cI", full], root).split("\n", 2)
    except (OSError, subprocess.CalledProcessError) as e:
        if commit is not None:
            raise HistoryError(f"{commit!r} is not a commit of the repository at {root}") from e
        return {"commit": "unknown", "short": "unknown", "subject": "", "commit_date": None,
                "dirty": dirty, "dirty_files": []}
    files = []
    if commit is None and dirty is None:
        fields = iter(_git(["status", "--porcelain", "-z", "--untracked-files=all"], root, strip=False).split("\0"))
        for f in fields:
            if f[:1] in ("R", "C"):
                next(fields, None)          # a rename's or copy's source path
            if f[3:] and not f[3:].startswith(NOT_DIRTY):
                files.append(f[3:])
        dirty = bool(files)
    return {"commit": full, "short": short, "subject": subject[:120], "commit_date": date,
            "dirty": bool(dirty), "dirty_files": files[:20]}


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0).isoformat()


def _preset_name(config: dict, ignore=("trace_depth",)) -> str | None:
    """The preset whose fields ``config`` holds (fields one side lacks, and ``ignore``,
    left out: an older bench's configuration has fewer), or None."""
    from lpu_arch import TileConfig
    for name in TileConfig.PRESETS:
        ref = TileConfig.preset(name).to_dict()
        common = [k for k in ref if k in config and k not in ignore]
        if common and all(ref[k] == config[k] for k in common):
            return name
    return None


def _pick(row: dict, keys) -> dict:
    return {k: row[k] for k in keys if k in row}


def bench_entry(result: dict, git: dict | None = None, config: str | None = None, targets: dict | None = None,
                date: str | None = None) -> dict:
    """The history entry of one bench run: ``result`` is a ``bench.json`` (an older
    bench's too: what it lacks is left out); ``config`` default: the preset it matches."""
    if not isinstance(result, dict) or "ffn" not in result or "config" not in result:
        raise HistoryError("not a bench result: expected the JSON object sim.bench.suite writes (with 'config' and 'ffn')")
    git = git_state() if git is None else git
    sims = list(dict.fromkeys(r["simulator"] for r in result["ffn"]))
    first = sims[0] if sims else None
    ffn = [{**_pick(r, ("ffn", "kind", "H", "I", "batch", "cycles", "predicted", "sram_bound", "mac_bound",
                        "ratio_to_sram_bound", "mxm_utilisation", "meets_target")),
            "exact": all(o["exact"] for o in result["ffn"] if o["ffn"] == r["ffn"])}
           for r in result["ffn"] if r["simulator"] == first]
    speed = {r["simulator"]: _pick(r, ("cycles", "run_seconds", "cycles_per_second"))
             for r in result.get("speed", []) if r.get("program") == "ffn suite"}
    return {"schema": SCHEMA, "kind": "bench", **git, "date": date or _now(),
            "config": config or _preset_name(result["config"]) or "custom",
            "host": result.get("host"), "simulators": sims,
            "ffn": ffn,
            "tray": [_pick(r, ("tiles", "ffn", "cycles", "speedup", "c2c_share", "link_vectors", "exact"))
                     for r in result.get("tray", [])],
            "moe": [_pick(r, ("mapping", "tokens", "routing", "rounds", "cycles_per_token",
                              "needed_bound_per_token", "ratio_to_needed_bound", "batch_bound_per_token",
                              "ratio_to_batch_bound", "floor_per_token", "ratio_to_limit",
                              "weight_bytes_read_per_token", "exact"))
                    for r in result.get("moe", [])],
            "speed": speed,
            "speed_vs_reference": {r["simulator"]: {"reference": r["reference"], "ours": r["ours"]["cycles_per_second"],
                                                    "theirs": r.get("theirs", {}).get("cycles_per_second"),
                                                    "speedup": r.get("speedup")}
                                   for r in result.get("speed_vs_reference", [])},
            "verilator_over_icarus": result.get("verilator_over_icarus"),
            "build_seconds": {r["config"]: r["build_seconds"] for r in result.get("build", [])},
            "builds_used": result.get("builds_used", {}),
            "loading": {f"{r['simulator']}/{r['path']}": r.get("bytes_per_second") for r in result.get("loading", [])},
            "model": [_pick(r, ("simulator", "ffn", "cycles", "predicted", "ratio_to_sram_bound", "exact", "cosine",
                                "build_seconds")) for r in result.get("model", [])],
            "attention": [_pick(r, ("context", "heads", "cycles", "predicted", "read_bound", "ratio_to_read_bound",
                                    "exact")) for r in result.get("attention", [])],
            "token_loop": [_pick(r, ("model", "tokens", "per_call", "cycles_per_token", "first_token_cycles",
                                     "weight_read_bound", "ratio_to_bound", "iq_needed", "top1_agreement_with_float",
                                     "passed")) for r in result.get("token_loop", [])],
            "bert_loop": [_pick(r, ("model", "positions", "agree", "top1_agreement", "logit_cosine_mean",
                                    "logit_cosine_min")) for r in result.get("bert_loop", [])],
            "targets": targets or {}}


def synth_entry(report: dict, git: dict | None = None, date: str | None = None) -> dict:
    """The history entry of a ``make synth`` report (``hdl/flows/synth.py``'s ``report.json``)."""
    if not isinstance(report, dict) or "utilization" not in report or "device" not in report:
        raise HistoryError("not a synthesis report: expected hdl.flows.synth's report.json (with 'device' and "
                           "'utilization')")
    git = git_state() if git is None else git
    util = report["utilization"]
    used = lambda k: util[k]["used"] if k in util else None     # noqa: E731
    fmax = report.get("fmax_mhz") or {}
    return {"schema": SCHEMA, "kind": "synth", **git, "date": date or _now(),
            "config": _preset_name(report.get("config", {})) or "custom",
            "board": report.get("board"), "device": report["device"], "placed": report.get("placed"),
            "fits": report.get("fits"), "luts": used("LUT4"),
            "luts_available": util.get("LUT4", {}).get("available"), "flip_flops": used("flip-flops"),
            "block_rams": used("block RAMs (DP16KD)"), "dsps": used("DSPs (MULT18X18D)"),
            "fmax_mhz": fmax, "fmax_min_mhz": min(fmax.values()) if fmax else None,
            "board_clock_mhz": report.get("board_clock_mhz"), "flow_seconds": report.get("flow_seconds")}


# ---- the file ------------------------------------------------------------------------------------
def append(entry: dict, path: Path = HISTORY) -> Path:
    """Append ``entry`` as one line to ``path`` (created with its directory if missing)."""
    _check(entry, f"{path}: the entry to append")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    line = json.dumps(entry, separators=(",", ":"), sort_keys=False)
    # A file whose last line lacks its newline (cut short) still gets this entry on a line of its own.
    sep = ""
    if path.exists() and path.stat().st_size:
        with open(path, "rb") as f:
            f.seek(-1, 2)
            sep = "" if f.read(1) == b"\n" else "\n"
    with open(path, "a") as f:
        f.write(sep + line + "\n")
    return path


def _check(entry, where: str) -> None:
    if not isinstance(entry, dict):
        raise HistoryError(f"{where}: not a JSON object but {type(entry).__name__}")
    missing = [k for k in REQUIRED if k not in entry]
    if missing:
        raise HistoryError(f"{where}: missing {', '.join(missing)} (every entry has {', '.join(REQUIRED)})")
    if entry["schema"] != SCHEMA:
        raise HistoryError(f"{where}: schema {entry['schema']!r}, this reader knows {SCHEMA!r}")
    if entry["kind"] not in KINDS:
        raise HistoryError(f"{where}: kind {entry['kind']!r}, expected one of {', '.join(KINDS)}")


def read(path: Path = HISTORY) -> list[dict]:
    """Every entry of ``path``, oldest first (a missing file is an empty history); a bad
    line is a :class:`HistoryError` naming the file, the line and what is wrong."""
    path = Path(path)
    if not path.exists():
        return []
    out = []
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
        except json.JSONDecodeError as e:
            raise HistoryError(f"{path}:{n}: not JSON ({e.msg} at column {e.colno}); every line is one "
                               "JSON object") from None
        _check(entry, f"{path}:{n}")
        out.append(entry)
    return out


# ---- the picture ---------------------------------------------------------------------------------
def _when(iso: str) -> datetime.datetime:
    """An ISO date as an aware datetime (naive ones taken as UTC), for ordering."""
    try:
        t = datetime.datetime.fromisoformat(iso)
    except (TypeError, ValueError):
        return datetime.datetime.min.replace(tzinfo=datetime.timezone.utc)
    return t if t.tzinfo else t.replace(tzinfo=datetime.timezone.utc)


def _label(e: dict) -> str:
    return e.get("short", e["commit"][:7]) + ("*" if e.get("dirty") else "")


def _series(benches: list[dict], xs: list[int], fn) -> dict:
    """{series name: [(x, value, dirty)]} from ``fn(entry) -> {name: value}`` (None skipped)."""
    out: dict = {}
    for e, x in zip(benches, xs):
        for name, v in (fn(e) or {}).items():
            if v is not None:
                out.setdefault(name, []).append((x, v, bool(e.get("dirty"))))
    return out


def _decades(series: dict) -> float:
    vals = [v for pts in series.values() for _, v, _ in pts if v > 0]
    return math.log10(max(vals) / min(vals)) if vals else 0.0


def _plot(ax, series: dict, colours, log: bool = False):
    """Every run as a marker (hollow on a dirty tree), a line through each x's latest value."""
    for i, (name, pts) in enumerate(series.items()):
        c = colours(i % colours.N)
        last = {x: v for x, v, _ in pts}
        line_x = sorted(last)
        ax.plot(line_x, [last[x] for x in line_x], color=c, linewidth=1.2, label=name)
        for filled in (True, False):
            sel = [(x, v) for x, v, d in pts if d != filled]
            if sel:
                ax.scatter([p[0] for p in sel], [p[1] for p in sel], s=22, zorder=3, linewidths=1.0,
                           facecolors=c if filled else "white", edgecolors=c)
    if log and any(v > 0 for pts in series.values() for _, v, _ in pts):
        from matplotlib.ticker import FuncFormatter
        ax.set_yscale("log")
        plain = FuncFormatter(lambda v, _: f"{v:,.0f}" if v >= 10 else f"{v:g}")
        ax.yaxis.set_major_formatter(plain)
        ax.yaxis.set_minor_formatter(plain if _decades(series) < 1.5 else FuncFormatter(lambda v, _: ""))
    if series:
        ax.legend(loc="upper left", bbox_to_anchor=(1.005, 1.0), fontsize=7, frameon=False)
    else:
        ax.text(0.5, 0.5, "no figures in these runs", transform=ax.transAxes, ha="center", va="center",
                color="0.5")
    ax.grid(alpha=0.3)


def draw(entries: list[dict], path: Path = PICTURE, config: str = "default", last: int | None = None) -> Path:
    """Picture the bench runs of ``config`` and every synthesis report over commits to
    ``path`` (.svg or .png), the latest ``last`` commits; a HistoryError if there is nothing."""
    from firmware_gen.chart import pyplot, save_figure

    path = Path(path)
    if path.suffix.lower() not in (".svg", ".png"):
        raise HistoryError(f"cannot draw the history as {path.suffix or 'a file without extension'!r}; "
                           "use a name ending in .svg or .png")
    benches = [e for e in entries if e["kind"] == "bench" and e.get("config") == config]
    synths = [e for e in entries if e["kind"] == "synth"]
    if not benches and not synths:
        have = sorted({e.get("config") for e in entries if e["kind"] == "bench"} - {None})
        raise HistoryError(f"no bench runs of the {config!r} configuration to draw"
                           + (f" (the history has {', '.join(have)})" if have else " (the history is empty)"))
    keys = _commits(benches + synths, last)
    pos = {k: i for i, k in enumerate(keys)}
    benches = [e for e in benches if _at(e) in pos]
    synths = [e for e in synths if _at(e) in pos]
    label = {pos[_at(e)]: _label(e) for e in benches + synths}
    panels = _panels(benches, [pos[_at(e)] for e in benches], synths, [pos[_at(e)] for e in synths])
    plt = pyplot()
    with plt.rc_context({"svg.fonttype": "none", "font.size": 9, "path.simplify": True}):
        height = 2.1 * len(panels) + 0.8
        fig, axes = plt.subplots(len(panels), 1, sharex=True, figsize=(max(9, 3 + 0.45 * len(keys)), height))
        colours = plt.get_cmap("tab10")
        for ax, (title, series, log, target) in zip(axes, panels):
            _plot(ax, series, colours, log)
            if target is not None and series:
                ax.axhline(target, color="0.3", linestyle="--", linewidth=0.9)
                ax.text(1.0, target, f" target {target:g}", transform=ax.get_yaxis_transform(), fontsize=7,
                        va="center", ha="left", color="0.3")
            ax.set_title(title, loc="left", fontsize=9)
        axes[-1].set_xticks(range(len(keys)), [label.get(i, "") for i in range(len(keys))], rotation=45,
                            ha="right", fontsize=7)
        axes[-1].set_xlim(-0.5, max(len(keys) - 0.5, 0.5))
        axes[-1].set_xlabel("commit, oldest first (* and hollow markers: a run on a tree with uncommitted changes)")
        n_runs = len(benches)
        fig.suptitle(f"make bench history, {config} tile: {n_runs} run{'s' * (n_runs != 1)} over "
                     f"{len(keys)} commit{'s' * (len(keys) != 1)}"
                     + (f", {len(synths)} synthesis report{'s' * (len(synths) != 1)}" if synths else ""),
                     x=0.01, ha="left", fontsize=10)
        fig.tight_layout(rect=(0, 0, 1, 1 - 0.3 / height))
        return save_figure(plt, fig, path)


def _at(e: dict) -> tuple:
    """The picture's x position an entry goes to: its commit, and whether the tree was dirty."""
    return e["commit"], bool(e.get("dirty"))


def _commits(entries: list[dict], last: int | None) -> list[tuple]:
    """The x positions (:func:`_at`) of ``entries``, the latest ``last``: commits in the
    order they were made (an older commit's run imported later goes where its commit is), a
    dirty tree after its commit."""
    first: dict = {}
    for e in sorted(entries, key=lambda e: _when(e["date"])):
        first.setdefault(_at(e), e)
    keys = sorted(first, key=lambda k: (_when(first[k].get("commit_date") or first[k]["date"]), k[1],
                                        _when(first[k]["date"])))
    return keys if last is None else keys[-last:]


def _panels(benches: list[dict], bx: list[int], synths: list[dict], sx: list[int]) -> list[tuple]:
    """The picture's panels, ``(title, series, log scale, target)`` each: the bench
    runs' figures (targets from the latest that states them) and the synthesis reports'."""
    targets = next((e["targets"] for e in reversed(benches) if e.get("targets")), {})
    # Decode FFNs with a target (SRAM-read bound >= 1,000 cycles) apart: their ratios sit near
    # 1, where a few per cent show; the small and the batched ones are several times their bound.
    targeted = lambda r: r.get("batch") == 1 and r.get("meets_target") is not None      # noqa: E731
    ffn, ffn_rest = (_series(benches, bx, lambda e, want=want: {r["ffn"]: r.get("ratio_to_sram_bound")
                                                                for r in e.get("ffn", []) if targeted(r) == want})
                     for want in (True, False))
    tray = _series(benches, bx, lambda e: {f"{r['tiles']} tiles": r.get("speedup") for r in e.get("tray", [])
                                           if r.get("tiles", 1) > 1})
    # The ratio to the limit (the larger of the batch bound and the floor) where a run states it;
    # older runs, to the bound of the weights a token needs.
    moe = _series(benches, bx, lambda e: {f"{r['mapping']} {r['tokens']} tok {r['routing']}":
                                          r.get("ratio_to_limit", r.get("ratio_to_needed_bound"))
                                          for r in e.get("moe", [])})
    speed = _series(benches, bx, lambda e: {s: v.get("cycles_per_second") for s, v in e.get("speed", {}).items()})
    ratio = _series(benches, bx, lambda e: {"Verilator / Icarus": e.get("verilator_over_icarus")})
    build = _series(benches, bx, lambda e: {**{f"{c} tile, from scratch": s for c, s in
                                               e.get("build_seconds", {}).items()},
                                            **{f"{s} build used": (b or {}).get("seconds") for s, b in
                                               e.get("builds_used", {}).items() if (b or {}).get("fresh")}})
    panels = [("decode FFNs: cycles / SRAM-read bound (hardware cycles, first simulator)", ffn, False,
               targets.get("decode")),
              ("the other FFNs of the suite (fixed latency dominates; batched): cycles / SRAM-read bound",
               ffn_rest, True, None),
              ("tray speed-up over one tile (SAC cycles)", tray, False, targets.get("tray")),
              ("MoE cycles per token / max(batch bound, floor) (older runs: / the bound of the weights a token "
               "needs)", moe, False, targets.get("moe")),
              ("tile-cycles/s (FFN suite, run time only)", speed, True, None),
              ("Verilator / Icarus speed ratio", ratio, False, None),
              ("Verilator build seconds", build, False, None)]
    if synths:
        panels += [("synthesis: LUT4s used", _series(synths, sx, lambda e: {
                        f"{e.get('config')} on {e.get('device')}": e.get("luts")}), False, None),
                   ("synthesis: Fmax (MHz, slowest clock)", _series(synths, sx, lambda e: {
                        f"{e.get('config')} on {e.get('device')}": e.get("fmax_min_mhz")}), False, None)]
    return panels


# ---- a summary -----------------------------------------------------------------------------------
def baseline_speed(entries: list[dict], config: str = "default", commit: str = BASELINE) -> dict:
    """Tile-cycles/s per simulator of the best bench run of ``commit`` (a prefix)."""
    best: dict = {}
    for e in entries:
        if e["kind"] == "bench" and e.get("config") == config and e["commit"].startswith(commit):
            for sim, v in e.get("speed", {}).items():
                if v.get("cycles_per_second"):
                    best[sim] = max(best.get(sim, 0), v["cycles_per_second"])
    return best


# ``show``'s lines (no header): the date, commit, kind and config, then the headline figures.
ENTRIES = Table(Column("date"), Column("commit", 9, gap=2), Column("kind", 5), Column("config", 8), Column("figures"))


def table(entries: list[dict]) -> str:
    """One line per entry: date, commit, kind, config and its headline figures."""
    lines = []
    for e in entries:
        if e["kind"] == "bench":
            speed = ", ".join(f"{s} {v.get('cycles_per_second', 0):,.0f}" for s, v in e.get("speed", {}).items())
            tray = next((r["speedup"] for r in e.get("tray", []) if r.get("tiles") == 8), None)
            exact = all(r.get("exact", True) for r in e.get("ffn", []) + e.get("tray", []) + e.get("moe", []))
            figures = (f"tile-cycles/s: {speed or '-'}; 8-tile speed-up: {'-' if tray is None else f'{tray:.2f}x'}; "
                       f"exact: {'yes' if exact else 'NO'}")
        else:
            fmax = e.get("fmax_min_mhz")
            figures = (f"{e.get('device')}: {e.get('luts')} LUT4, Fmax {'-' if fmax is None else f'{fmax:.1f} MHz'}, "
                       f"fits: {'yes' if e.get('fits') else 'no'}")
        lines.append(ENTRIES.line(e["date"][:19], _label(e), e["kind"], e.get("config", ""), figures))
    return "\n".join(lines)


def speed_lines(entries: list[dict], current: dict, config: str = "default", commit: str = BASELINE) -> list[str]:
    """Lines comparing ``current`` ({simulator: tile-cycles/s}) with the baseline commit's runs."""
    base = baseline_speed(entries, config, commit)
    return [f"{sim}: {v:,.0f} tile-cycles/s, {v / base[sim]:.2f}x the {commit} build's {base[sim]:,.0f} "
            f"(best of its runs in the history)" for sim, v in current.items() if base.get(sim)]


# ---- command line --------------------------------------------------------------------------------
def _latest_synth_report() -> Path | None:
    found = sorted((ROOT / "build").glob("synth-*/report.json"), key=lambda p: p.stat().st_mtime)
    return found[-1] if found else None


def _load_json(path: Path, what: str):
    try:
        return json.loads(Path(path).read_text())
    except OSError as e:
        raise HistoryError(f"cannot read the {what} {path}: {e.strerror}") from None
    except json.JSONDecodeError as e:
        raise HistoryError(f"{path}: not JSON ({e.msg} at line {e.lineno}); expected the {what}") from None


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    commands = ("draw", "add-bench", "add-synth", "show")
    if not argv or (argv[0] not in commands and argv[0] not in ("-h", "--help")):
        argv.insert(0, "draw")
    ap = argparse.ArgumentParser(prog="python -m sim.bench.history", description=__doc__.splitlines()[0],
                                 epilog="without a command: draw.  Each command has its own --help.")
    sub = ap.add_subparsers(dest="command", metavar="{draw,add-bench,add-synth,show}")

    def common(p, measured=False):
        p.add_argument("--file", type=Path, default=HISTORY, help="the history (default: bench/history.jsonl)")
        if measured:                # an entry to append: which commit it measured
            p.add_argument("--commit", default=None, help="the commit it measured (default: this checkout's HEAD "
                                                          "and its dirty state)")
            p.add_argument("--dirty", action="store_true", help="with --commit: the tree it ran on had changes")

    p = sub.add_parser("draw", help="picture the history over commits (the default)",
                       description="Picture one configuration's bench runs (and every synthesis report) over "
                                   "commits, oldest left: FFN cycles against the SRAM-read bound, tray speed-ups, "
                                   "MoE cycles per token against their bound, tile-cycles/s per simulator, the "
                                   "Verilator/Icarus ratio, build seconds, LUTs and Fmax.")
    common(p)
    p.add_argument("--out", type=Path, default=PICTURE, help="picture, .svg or .png (default: bench/results/history.svg)")
    p.add_argument("--config", default="default", help="the bench runs of this preset (default: default)")
    p.add_argument("--last", type=int, default=None, metavar="N", help="only the latest N commits")
    p = sub.add_parser("add-bench", help="append a bench.json (e.g. from another checkout) to the history",
                       description="Append the figures of a bench.json written by python -m sim.bench (of this "
                                   "or an older commit's bench) as one bench entry.")
    common(p, measured=True)
    p.add_argument("bench_json", type=Path, help="the bench.json")
    p.add_argument("--config", default=None, help="the preset it ran (default: recognised from its configuration)")
    p = sub.add_parser("add-synth", help="append a make synth report to the history",
                       description="Append LUTs, flip-flops, block RAMs, DSPs and Fmax of a report.json written "
                                   "by lpu synth (make synth) as one synth entry.")
    common(p, measured=True)
    p.add_argument("report", type=Path, nargs="?", default=None,
                   help="the report.json (default: the newest build/synth-*/report.json)")
    p = sub.add_parser("show", help="one line per entry", description="Print one line per entry of the history.")
    common(p)
    args = ap.parse_args(argv)
    try:
        if args.command == "draw":
            out = draw(read(args.file), args.out, args.config, args.last)
            print(f"drawn: {out}")
        elif args.command in ("add-bench", "add-synth"):
            git = git_state(commit=args.commit, dirty=args.dirty if args.commit else None)
            if args.command == "add-bench":
                entry = bench_entry(_load_json(args.bench_json, "bench result"), git, args.config)
            else:
                report = args.report or _latest_synth_report()
                if report is None:
                    raise HistoryError("no synthesis report: run make synth first (it writes "
                                       "build/synth-<board>-<config>/report.json) or name the report")
                entry = synth_entry(_load_json(report, "synthesis report"), git)
            append(entry, args.file)
            print(f"appended to {args.file}: {table([entry])}")
        else:
            print(table(read(args.file)) or "(empty)")
    except HistoryError as e:
        print(error_line(e), file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
