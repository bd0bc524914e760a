"""Two tiles on clocks a few hundred ppm apart, exchanging vectors over a C2C link, on RTL:
``lpu c2c`` (``make sim-c2c``).  ``--plot FILE`` draws the run; ``--figures DIR`` writes
the pictures of ``docs/c2c.md`` (:func:`figures`)."""

from __future__ import annotations

import dataclasses
import functools
import itertools
import math
import sys
import time

import numpy as np

from lpu_arch import c2c

from firmware_gen.golden import archmodel
from firmware_gen.chart import pyplot, save_figure
from lpu_arch.config import ConfigError, TileConfig
from lpu_arch.hostmap import LINK_FAULTS, link_fault_names
from lpu_arch.isa import Instr, Op
from firmware_gen.program import Program
from firmware_gen.compiler.schedule import ScheduleError
from firmware_gen.compiler.system import SystemScheduler

from firmware_gen.scoreboard import Problem, compare, golden_reference, promise

from sim.harness.clocks import phase_seed
from sim.harness.runner import SystemSim, period_fs, system_run
from sim.harness.scoreboard import tile_observed
from sim.report import Report


BEYOND_SPEC_PPM = 100_000   # the largest clock offset a run takes (TileConfig.max_ppm's own limit)


def c2c_config() -> TileConfig:
    """The tiny tile with one link (two tiles), deep enough queues for long programs."""
    return dataclasses.replace(TileConfig.tiny_tray(), links=1)


def exchange(cfg: TileConfig, tiles: int = 2, per_link: int = 4, spread: int = 0, seed: int = 0,
             first: int = 1) -> SystemScheduler:
    """Vectors both ways on every link: ``per_link`` vectors from every tile to every other,
    random MEM slices and data.  With ``spread``, the k-th vector of each link is sent at
    or soon after SAC cycle ``first + k * spread`` (else as early as the links allow)."""
    rng = np.random.default_rng(seed)
    s = SystemScheduler(cfg, tiles)
    mems = cfg.mem_names
    rows = min(16, cfg.mem_depth // 4)
    for t in range(tiles):
        for name in mems:
            s.load(t, name, 0, rng.integers(0, 256, (rows, cfg.lanes)))
    next_row = {(t, n): cfg.mem_depth // 2 for t in range(tiles) for n in mems}
    for k in range(per_link):
        for src, dst in itertools.permutations(range(tiles), 2):
            sm, dm = mems[rng.integers(len(mems))], mems[rng.integers(len(mems))]
            sa = int(rng.integers(rows))
            da = next_row[dst, dm]
            if da >= cfg.mem_depth:
                raise ScheduleError(f"tile {dst} {dm} has no free row left for vector {k}")
            next_row[dst, dm] += 1
            if not spread:
                s.send(src, sm, sa, dst, dm, da)
                continue
            for c in range(first + k * spread, first + k * spread + 200):
                try:
                    s.send(src, sm, sa, dst, dm, da, send_cycle=c)
                    break
                except ScheduleError:
                    continue
            else:
                raise ScheduleError(f"no SEND slot for vector {k} from tile {src} to tile {dst}")
    return s


def without_runtime_deskews(programs: list[Program]) -> list[Program]:
    """The same programs with every RUNTIME_DESKEW replaced by a one-cycle NOP (same SAC
    timing, no re-alignment): outside the specification on drifting clocks."""
    return [Program(p.config, {n: [Instr.nop(1) if i.op == Op.RUNTIME_DESKEW else i for i in instrs]
                               for n, instrs in p.queues.items()}, p.memory, p.vxm_params, p.table, p.defined)
            for p in programs]


def check_tiles(result: dict, sched: SystemScheduler, gold) -> list[list[Problem]]:
    """Per tile, every mismatch against the golden model and the scheduler's prediction,
    any C2C fault flag first (``scoreboard.compare``)."""
    return [compare(tile_observed(obs), golden_reference(gold[t]), promise(sched.predicted_writes(t), sched.predicted_cycles(t)))
            for t, obs in enumerate(result["tiles"])]


def fault_names(status: int) -> str:
    """The link fault flags set in a STATUS word, by name."""
    return ", ".join(link_fault_names(status))


def plot_run(result: dict, path, title: str = "") -> None:
    """Picture of a recorded run (``system_run(record=...)``): per tile its activity
    (running, stalled in a deskew), the child's HAC error, how far the child's program
    (SAC) is ahead of the root's, and the receive buffers."""
    plt = pyplot()
    series = result["series"]
    if not series:
        raise ValueError("the run recorded no samples (system_run(record=N))")
    t0 = result["t_start_fs"]
    x = np.array([(s["t_fs"] - t0) / 1e6 for s in series])          # ns since the start write
    n = len(series[0]["hac"])
    fig, axes = plt.subplots(4, 1, figsize=(10, 8.5), sharex=True,
                             gridspec_kw={"height_ratios": [1.2, 1.5, 1.5, 1.3]})
    ax = axes[0]
    for i in range(n):
        run = np.array([s["running"][i] for s in series], bool)
        stall = np.array([s["stall"][i] for s in series], bool)
        y = n - 1 - i
        ax.fill_between(x, y + 0.1, y + 0.9, where=run & ~stall, step="post", color="tab:green",
                        label="running (SAC advances)" if i == 0 else None, linewidth=0)
        ax.fill_between(x, y + 0.1, y + 0.9, where=stall, step="post", color="tab:orange",
                        label="stalled by DESKEW / RUNTIME_DESKEW" if i == 0 else None, linewidth=0)
    ax.set_yticks([n - 1 - i + 0.5 for i in range(n)])
    ax.set_yticklabels([f"tile {i} ({result['ppm'][i]:+g} ppm)" for i in range(n)])
    ax.legend(loc="upper right", fontsize=8, ncol=2)
    ax.set_title(title or "Two tiles on their own clocks, one logical (SAC) time", fontsize=10)
    ax = axes[1]
    for c in range(1, n):
        ax.plot(x, [s["err"][c - 1] for s in series], ".", markersize=2, label=f"tile {c} - tile 0")
    ax.axhline(c2c.HAC_ERROR_MAX, color="red", linewidth=0.8, linestyle="--", label="HAC_ERROR_MAX")
    ax.axhline(-c2c.HAC_ERROR_MAX, color="red", linewidth=0.8, linestyle="--")
    ax.set_ylabel("HAC error\n(cycles)")
    ax.legend(loc="upper right", fontsize=8)
    ax = axes[2]
    for c in range(1, n):
        pts = [(xv, s["skew"][c - 1]) for xv, s in zip(x, series) if s["skew"]]
        ax.plot([p[0] for p in pts], [p[1] for p in pts], ".", markersize=2, label=f"SAC tile {c} - SAC tile 0")
    ax.set_ylabel("program skew\n(cycles)")
    ax.legend(loc="upper right", fontsize=8)
    ax = axes[3]
    for i in range(n):
        for k in range(len(series[0]["rx"][i])):
            ax.step(x, [s["rx"][i][k] + 0.04 * i for s in series], where="post",
                    label=f"tile {i} link {k} receive buffer")
    ax.set_ylabel("vectors\nwaiting")
    ax.set_xlabel("time since the host armed the start (ns)")
    ax.legend(loc="upper right", fontsize=8)
    fig.tight_layout()
    save_figure(plt, fig, path, compact=False, dpi=110)


def plot_window(result: dict, path, sched: SystemScheduler | None = None, title: str = "") -> None:
    """Cycle-by-cycle timing diagram of a run's recorded window (``system_run(window=...)``):
    per tile its SAC (stalled cycles shaded), HAC, the flits it puts on its link and its
    elastic and receive buffer levels, on one time axis."""
    plt = pyplot()
    from matplotlib.patches import Rectangle

    recs = result["window"]
    if not recs or not recs[0]:
        raise ValueError("the run recorded no window (system_run(window=...))")
    t0 = min(r[0]["t_fs"] for r in recs if r)
    n = len(recs)
    lanes = ["SAC", "HAC", "flit out", "elastic buffer", "receive buffer"]
    height = len(lanes) + 1
    fig, ax = plt.subplots(figsize=(13, 1.0 + 0.42 * height * n))

    def cell(x, per, y, text, face, edge="gray", **font):
        ax.add_patch(Rectangle((x, y + 0.12), per, 0.76, facecolor=face, edgecolor=edge, linewidth=0.4))
        ax.text(x + per / 2, y + 0.5, text, ha="center", va="center", **font)
    ends = []
    for i, rr in enumerate(recs):
        per = result["period_fs"][i] / 1e6
        base = (n - 1 - i) * height
        xs = [(r["t_fs"] - t0) / 1e6 for r in rr]
        for r, x in zip(rr, xs):
            ends.append(x + per)
            y = base + len(lanes) - 1          # the SAC lane, then the HAC's and the flits'
            cell(x, per, y, f"{r['sac'] % 100:02d}", "tab:orange" if r["stall"] else "#dff0d8", fontsize=5.5)
            cell(x, per, y - 1, f"{r['hac'] % 100:02d}", "#e8e8f8", fontsize=5.5)
            if r["tx"][0] >= 0:
                name = c2c.Kind(r["tx"][0]).name
                cell(x, per, y - 2, name[0], {"DATA": "tab:blue", "SYNC": "gray"}.get(name, "tab:purple"), "black",
                     fontsize=6, color="white")
        for k, (key, top) in enumerate((("elastic", 4), ("rx", 4))):
            y = base + 1 - k
            vs = [y + 0.12 + 0.76 * min(r[key][0], top) / top for r in rr]
            ax.step(xs, vs, where="post", color="tab:red" if key == "rx" else "tab:brown", linewidth=1.2)
            for r, xv in zip(rr, xs):
                if r[key][0]:
                    ax.text(xv + per / 2, y + 0.6, str(r[key][0]), fontsize=5.5, ha="center")
        for k, lane in enumerate(lanes):
            ax.text(-0.01, base + len(lanes) - 1 - k + 0.5, f"tile {i} {lane}", ha="right", va="center",
                    fontsize=8, transform=ax.get_yaxis_transform())
        ax.axhline(base - 0.5 + 0.5, color="black", linewidth=0.5)
    if sched is not None:
        # Mark the transfers' SEND and RECV cycles on the SAC lanes.
        for x in sched.transfers:
            for tile, cyc, what in ((x.src, x.send, "SEND"), (x.dst, x.recv, "RECV")):
                hit = [r for r in recs[tile] if r["sac"] == cyc and not r["stall"]]
                if hit:
                    xv = (hit[0]["t_fs"] - t0) / 1e6
                    yv = (n - 1 - tile) * height + len(lanes) - 0.05
                    ax.annotate(what, (xv + result["period_fs"][tile] / 2e6, yv), fontsize=7, ha="center",
                                va="bottom", color="tab:blue")
    ax.set_xlim(0, max(ends))
    ax.set_ylim(-0.5, n * height - 0.6)
    ax.set_yticks([])
    ax.set_xlabel("time (ns); SAC and HAC shown modulo 100; orange: core stalled by RUNTIME_DESKEW")
    ax.set_title(title, fontsize=10)
    for side in ("top", "right", "left"):
        ax.spines[side].set_visible(False)
    fig.tight_layout()
    save_figure(plt, fig, path, compact=False, dpi=120)


def figures(outdir, sim: str = "verilator") -> None:
    """The pictures of ``docs/c2c.md``, from real runs: a timing diagram of a transfer across
    a RUNTIME_DESKEW, and a whole run's HAC error and buffer levels."""
    from pathlib import Path

    cfg = c2c_config()
    out = Path(outdir)
    out.mkdir(parents=True, exist_ok=True)
    system = SystemSim(cfg, 2, cfg.link_latency_max, sim)
    m = cfg.max_ppm
    one = exchange(cfg, 2, per_link=2, spread=1000, seed=3, first=10)
    iv = c2c.deskew_interval(cfg)
    res = system.run([system_run(one.programs(), (m, -m), name="window", seed=4,
                                 window={"tile": 0, "sac_from": iv - 18, "sac_to": iv + 24})])[0]
    assert not any(check_tiles(res, one, archmodel.run_system(one.programs(), one.topo.peer)))
    plot_window(res, out / "c2c-timing.png", one,
                f"A vector each way (SEND on SAC {iv - 14}, RECV on SAC {iv + 18}) across the RUNTIME_DESKEW on "
                f"SAC {iv}: tile 0 at +{m} ppm, tile 1 at -{m} ppm, wire latency {cfg.link_latency_max}")
    long = exchange(cfg, 2, per_link=12, spread=700, seed=1)
    res = system.run([system_run(long.programs(), (m, -m), name="drift", seed=5, sample_every=2,
                                 record=200_000)])[0]
    plot_run(res, out / "c2c-drift.png", f"Tile 0 at +{m} ppm, tile 1 at -{m} ppm: HAC error, program skew and "
                                          f"receive buffers over a whole run ({len(long.transfers)} vectors)")


INJECT_FORMAT = "TILE:LINK:MASK:AFTER:COUNT"


def parse_inject(text: str) -> dict:
    """``TILE:LINK:MASK:AFTER:COUNT`` (``--inject``): XOR ``MASK`` (bit 0: the flit's
    valid bit) into ``COUNT`` valid flits leaving ``TILE`` on ``LINK``, from ``AFTER`` sender
    cycles after the start; a ``ConfigError`` names a malformed spec."""
    cfg = c2c_config()
    parts = text.split(":")
    try:
        if len(parts) != 5:
            raise ValueError
        tile, link, mask, after, count = (int(p.strip(), 0) for p in parts)
    except ValueError:
        raise ConfigError(f"--inject {text!r}: expected {INJECT_FORMAT}, five integers like 1:0:0x38:500:1") from None
    fb = c2c.flit_bits(cfg)
    for bad, why in ((not 0 <= tile < 2, f"tile {tile} does not exist (tiles 0 and 1)"),
                     (not 0 <= link < cfg.links, f"link {link} does not exist (links 0..{cfg.links - 1})"),
                     (not 0 < mask < 1 << fb,
                      f"the mask must set some of the flit's {fb} bits (1..{(1 << fb) - 1:#x})"),
                     (after < 0 or count < 1, "AFTER must be 0 or more cycles and COUNT at least 1 flit")):
        if bad:
            raise ConfigError(f"--inject {text!r}: {why}")
    return {"tile": tile, "link": link, "mask": mask, "after_cycles": after, "count": count}


def run_c2c(sim: str = "verilator", ppm=(350.0, -620.0), latency: int | None = None, vectors: int = 12,
            spread: int = 700, seed: int = 1, plot=None, beyond_spec: bool = False, out=None,
            progress=None, inject=None) -> Report:
    """Two tiny tiles exchanging ``vectors`` each way (``spread`` SAC cycles apart) on clocks
    ``ppm`` from nominal over a wire of ``latency`` cycles (default: the declared maximum).
    Prints the table on ``out`` and returns the ``c2c`` :class:`Report`: passed when every
    write is as predicted and as the golden model's, no link fault and the HAC error within
    ``HAC_ERROR_MAX``.  A clock beyond ``max_ppm`` (unless ``beyond_spec``) or a latency
    outside the declared range is a ``ConfigError``; ``inject`` as :func:`parse_inject`."""
    cfg = c2c_config()
    if latency is None:
        latency = cfg.link_latency_max
    check_c2c_run(cfg, ppm, latency, vectors, spread, beyond_spec)
    sched = exchange(cfg, 2, vectors, spread, seed)
    programs = sched.programs()
    gold = archmodel.run_system(programs, sched.topo.peer)
    print(f"two tiny tiles, one link of latency {latency}; {len(sched.transfers)} vectors; "
          f"SEND-to-RECV distance {c2c.min_distance(cfg)}, RUNTIME_DESKEW every {c2c.deskew_interval(cfg)} "
          f"cycles (slack {c2c.deskew_slack(cfg)})", file=sys.stderr)
    t = time.perf_counter()
    system = SystemSim(cfg, 2, latency, sim)
    print(f"built on {sim} in {time.perf_counter() - t:.1f} s", file=sys.stderr)
    inject = list(inject or [])
    run = system_run(programs, list(ppm), name="demo", seed=phase_seed(seed), sample_every=4, record=100_000 if plot else 0,
                     inject=inject)
    res = system.run([run], progress=progress)[0]
    problems = check_tiles(res, sched, gold)
    say = functools.partial(print, file=out or sys.stdout, flush=True)
    tiles = tile_table(res, sched, problems, say)
    skew_budget = c2c.HAC_ERROR_MAX + c2c.drift(cfg, c2c.deskew_interval(cfg)) + 1
    say(f"\nHAC error (child - root, at one simulation instant, {res['samples']} samples): "
        f"{res['hac_error'][0]:+.3f}..{res['hac_error'][1]:+.3f} cycles "
        f"(budget +-{c2c.HAC_ERROR_MAX}); measured link latency {res['tiles'][1]['c2c']['latency']} cycles")
    say(f"program skew (SAC child - SAC root while both run): {res['sac_skew'][0]:+.2f}..{res['sac_skew'][1]:+.2f}"
        f" cycles (budget in the SEND-to-RECV distance: {skew_budget})")
    injections = [{**x, "requested": x["count"], "hit": hit} for x, hit in zip(inject, res["injected"])]
    for x in injections:
        say(f"injected {x['mask']:#x} into tile {x['tile']} link {x['link']} from cycle {x['after_cycles']}: "
            f"{x['hit']} of {x['requested']} flit(s) requested hit")
    if res.get("timed_out"):
        say("timed out: not every tile is done; " + "; ".join(
            f"tile {i} STATUS {o['status']:#x}{' (' + fault_names(o['status']) + ')' if o['status'] & LINK_FAULTS else ''}"
            for i, o in enumerate(res["tiles"])))
    if plot:
        plot_run(res, plot, f"Tiles at {ppm[0]:+g} and {ppm[1]:+g} ppm, link latency {latency}, "
                            f"{len(sched.transfers)} vectors")
        say(f"picture of the run: {plot}")
    skew_ok = max(abs(v) for v in res["sac_skew"]) <= skew_budget
    if not skew_ok:
        say(f"warning: the program skew {res['sac_skew'][0]:+.2f}..{res['sac_skew'][1]:+.2f} exceeds its budget "
            f"of {skew_budget} cycles: a vector can arrive after the RECV scheduled for it")
    reasons = fail_reasons(res, problems, skew_ok, skew_budget)
    if not reasons:
        say(f"\nPASS: both tiles on {sim} wrote every vector at its predicted SAC cycle, "
            "identical to the golden model, no link fault")
    else:
        say(f"\nFAIL: {'; '.join(reasons)}")
    data = {"passed": not reasons, "simulator": sim, "ppm": list(ppm), "latency": latency,
            "measured_latency": res["tiles"][1]["c2c"]["latency"], "vectors": len(sched.transfers),
            "min_distance": c2c.min_distance(cfg), "deskew_interval": c2c.deskew_interval(cfg),
            "hac_error": [round(v, 3) for v in res["hac_error"]], "hac_error_max": c2c.HAC_ERROR_MAX,
            "sac_skew": [round(v, 3) for v in res["sac_skew"]], "skew_budget": skew_budget,
            "samples": res["samples"], "tiles": tiles, "plot": str(plot) if plot else None,
            "skew_within_budget": skew_ok, "reasons": reasons,
            "timed_out": bool(res.get("timed_out")), "injections": injections,
            "status": [o["status"] for o in res["tiles"]],
            "build_dir": str(system.build_dir)}
    return Report.of("c2c", data, rows_key="tiles", problems=reasons)


def check_c2c_run(cfg: TileConfig, ppm, latency: int, vectors: int, spread: int, beyond_spec: bool) -> None:
    """A ``ConfigError`` naming the limit when :func:`run_c2c`'s clocks, latency or vectors
    cannot be run: a clock offset beyond ``max_ppm`` (without ``beyond_spec``) or beyond
    what can be simulated, a latency outside the declared range, no vector."""
    odd = [p for p in ppm if not math.isfinite(p) or abs(p) > BEYOND_SPEC_PPM]
    if odd:
        raise ConfigError(f"a clock offset of {odd[0]} ppm cannot be simulated: offsets must be finite and "
                          f"within +-{BEYOND_SPEC_PPM} ppm, even with --beyond-spec")
    bad = [p for p in ppm if abs(p) > cfg.max_ppm]
    if bad and not beyond_spec:
        raise ConfigError(f"a clock offset of {bad[0]:+g} ppm is beyond the configuration's tolerance of "
                          f"+-{cfg.max_ppm} ppm (--beyond-spec runs it anyway and shows the faults it raises)")
    if not cfg.link_latency_min <= latency <= cfg.link_latency_max:
        raise ConfigError(f"link latency {latency} is outside the declared range "
                          f"{cfg.link_latency_min}..{cfg.link_latency_max}")
    if vectors < 1 or spread < 0:
        raise ConfigError(f"need at least one vector each way and a spread of 0 or more cycles "
                          f"(got {vectors} vectors, spread {spread})")


def tile_table(res: dict, sched: SystemScheduler, problems: list, say) -> list[dict]:
    """Print :func:`run_c2c`'s table, a line per tile (and its first problems), and return
    its rows (the report's ``tiles``)."""
    say()
    say(f"{'tile':>4} {'ppm':>7} {'period fs':>10} {'cycles':>7} {'writes':>6}  "
        f"{'HAC error':>15} {'rx buffer':>9} {'elastic':>7} {'stalled':>7}  predicted == observed")
    tiles = []
    for i, obs in enumerate(res["tiles"]):
        err = "(root)" if i == 0 else f"{res['hac_error'][0]:+.2f}..{res['hac_error'][1]:+.2f}"
        rx, el = res["rx_level"][i][0], res["elastic_level"][i][0]
        say(f"{i:>4} {res['ppm'][i]:>+7g} {period_fs(res['ppm'][i]):>10} {obs['cycles']:>7} "
            f"{len(obs['events']):>6}  {err:>15} {f'{rx[0]}..{rx[1]}':>9} {f'{el[0]}..{el[1]}':>7} "
            f"{obs['c2c']['stalled_cycles']:>7}  {'yes' if not problems[i] else 'NO'}")
        for p in problems[i][:8]:
            say(f"      {p}")
        tiles.append({"tile": i, "ppm": res["ppm"][i], "period_fs": period_fs(res["ppm"][i]), "cycles": obs["cycles"],
                      "predicted_cycles": sched.predicted_cycles(i), "writes": len(obs["events"]),
                      "rx_level": list(rx), "elastic_level": list(el), "stalled_cycles": obs["c2c"]["stalled_cycles"],
                      "as_predicted": not problems[i], "problems": problems[i]})
    return tiles


def fail_reasons(res: dict, problems: list, skew_ok: bool, skew_budget: int) -> list[str]:
    """Why a :func:`run_c2c` run fails (empty: it passes): a timeout, link faults, a HAC
    error or program skew beyond budget, and each tile's first problem (unless a link
    fault, named already, caused it)."""
    within = max(abs(v) for v in res["hac_error"]) <= c2c.HAC_ERROR_MAX
    reasons = ["timed out (not every tile is done)"] if res.get("timed_out") else []
    reasons += [f"tile {i}: {fault_names(o['status'])}" for i, o in enumerate(res["tiles"]) if o["status"] & LINK_FAULTS]
    reasons += [] if within else [f"HAC error beyond +-{c2c.HAC_ERROR_MAX}"]
    reasons += [] if skew_ok else [f"program skew beyond {skew_budget}"]
    return reasons + [f"tile {i}: {p[0]}" for i, p in enumerate(problems)
                      if p and not res["tiles"][i]["status"] & LINK_FAULTS]
