"""A tray that never stops, run after run, on the RTL (docs/tray.md, "The steady state"):
one dense tray FFN loaded once, then one run per input, back to back, every tile's clock
running and its HAC locked throughout (``sim/tb/steady_tray.py``, ``sim.tb.system.SteadyTray``
with every tile's host bus worked at once).

:func:`run_steady_tray` runs a session and :func:`check_session` checks every run against
the compiler and the golden model: every tile's writes (the golden model of the run's
programs), cycles and busy counters (and the compiler's), y bit-exact (``numerics.ffn_int``,
as read back over the bus and as the traced writes left it), the wall cycles
(``c2c.wall_cycles`` of the compiled cycles: exactly on the root's HAC, within
``c2c.HAC_ERROR_MAX`` on every other tile's), the HAC locked and within
``c2c.HAC_ERROR_MAX`` of the root's, the host's writes only x's rows, and every fault flag
and link error count exactly as the injected flits predict (:func:`expected_reports`)."""

from __future__ import annotations

import random
import time

import numpy as np

from firmware_gen.compiler.ffn_example import example_ffn
from firmware_gen.compiler.system import deskew_slacks, wall_cycles
from firmware_gen.compiler.tray import compile_tray_layer, tray_config, tray_output
from firmware_gen.golden import archmodel
from firmware_gen.golden.numerics import activation_quantiser, ffn_int
from firmware_gen.scoreboard import compare, golden_reference, promise
from lpu_arch import TileConfig, c2c
from lpu_arch.hostmap import FAULTS, Status, fault_names
from lpu_arch.topology import Topology

from sim.harness.runner import SYSTEM_TIMESCALE, SystemSim, run_testbench
from sim.harness.scoreboard import check_wall, tile_observed, traced_memory

# The FFN of every run: small enough for a thousand runs, larger than one tiny tile's SRAM
# (the 8-tile tray FFN of tests/sim/test_c2c_sim.py), every tile multicasting h to every other.
STEADY_FFN = {"kind": "swiglu", "H": 32, "I": 64, "seed": 8}
UNCORRECTABLE = [Status.LINK_UNCORRECTABLE.name]


def steady_ffn(ffn: dict):
    """The example FFN (``ffn_example.example_ffn``) a session runs."""
    return example_ffn(ffn["kind"], ffn["H"], ffn["I"], 1, seed=ffn["seed"])


def steady_inputs(spec, runs: int, seed: int) -> np.ndarray:
    """``runs`` inputs (runs, H) int8: Gaussian, quantised at the FFN's input scale."""
    rng = np.random.default_rng(seed)
    return activation_quantiser(spec.dtype)(rng.normal(size=(runs, spec.H)), spec.x_scale)[0]


def extreme_ppm(cfg: TileConfig, tiles: int, seed) -> list[float]:
    """Every tile's clock within ``max_ppm``: the root (tile 0) at ``+max_ppm``, tile 1 at
    ``-max_ppm`` (the widest pair the specification allows, and the slowest child: its HAC
    falls furthest behind between SYNCs), the others uniform from ``seed``."""
    rng = random.Random(seed)
    m = cfg.max_ppm
    return [m, -m] + [rng.uniform(-m, m) for _ in range(tiles - 2)]


def _flips(mask: int) -> int:
    return bin(mask).count("1")


def expected_reports(tiles: int, inject_between=(), inject_during=()) -> tuple[dict, dict]:
    """What the injections predict: ``(faults, counts)``.  ``faults``: run -> sorted
    ``[(tile, "between" | "run", names)]``: a double flip is an uncorrectable flit on the
    receiving tile (its peer on that link), reported by the STATUS read before arming run
    ``before_run`` (flipped between runs) or by run ``run``'s own observation (flipped
    during it); a single flip is corrected, not a fault.  ``counts``: run -> ``{(tile,
    link): (corrected, uncorrected)}`` of the flits flipped during a run, every other
    link's counts 0 (a start clears them, so a flip between runs is not counted)."""
    topo = Topology(tiles)
    faults, counts = {}, {}
    for x in inject_between:
        if _flips(x["mask"]) == 2:
            receiver = topo.peer(x["tile"], x["link"])[0]
            faults.setdefault(x["before_run"], []).append((receiver, "between", UNCORRECTABLE))
    for x in inject_during:
        peer = topo.peer(x["tile"], x["link"])
        k = _flips(x["mask"])
        c = counts.setdefault(x["run"], {})
        old = c.get(peer, (0, 0))
        c[peer] = (old[0] + (k == 1), old[1] + (k == 2))
        if k == 2:
            faults.setdefault(x["run"], []).append((peer[0], "run", UNCORRECTABLE))
    for n, f in faults.items():
        faults[n] = sorted(set((t, w, tuple(names)) for t, w, names in f))
    return faults, counts


def run_steady_tray(cfg: TileConfig, tiles: int, latency: dict, ppm: list, runs: int, sim: str = "verilator",
                    ffn: dict | None = None, x_seed: int = 1, phase_seed: int = 1, inject_between=(),
                    inject_during=(), progress_every: int = 100, system: SystemSim | None = None) -> dict:
    """Run ``runs`` back-to-back runs of ``ffn`` (default :data:`STEADY_FFN`) on a tray of
    ``tiles`` tiles built with wire ``latency`` ({(i, j): cycles}) and clocks at ``ppm``, one
    input per run (:func:`steady_inputs` of ``x_seed``), and check every run (the module's
    checks).  Returns the session's figures and ``problems`` (empty: every run as predicted)."""
    ffn = dict(STEADY_FFN if ffn is None else ffn)
    ex = steady_ffn(ffn)
    layer = compile_tray_layer(ex.spec, cfg, tiles)
    tcfg = tray_config(cfg, tiles)
    system = system or SystemSim(tcfg, tiles, latency, sim)
    xs = steady_inputs(ex.spec, runs, x_seed)
    spec = {"config": tcfg.to_dict(), "tiles": tiles,
            "steady": {"config": cfg.to_dict(), "ffn": ffn, "ppm": list(ppm), "phase_seed": phase_seed,
                       "x": xs.tolist(), "inject_between": list(inject_between), "inject_during": list(inject_during),
                       "progress_every": progress_every}}
    out, _ = run_testbench(system, "sim.tb.steady_tray", spec, "steady-tray", SYSTEM_TIMESCALE)
    t0 = time.perf_counter()
    report = check_session(layer, xs, out[0], inject_between, inject_during)
    report.update(check_seconds=round(time.perf_counter() - t0, 1), ffn=ffn, tiles=tiles, ppm=list(ppm), wire_latencies=[[*p, latency[p]] for p in sorted(latency)],
                  build_seconds=system.build_info.get("seconds"), build_fresh=system.build_info.get("fresh"))
    return report


def reported_faults(run: dict) -> list:
    """``[(tile, "between" | "run", names)]``, sorted: the fault flags a run of a
    ``SteadyTray`` reports, from the STATUS read before arming it (flags raised since the last
    observation: between the runs) and from its own observation."""
    out = [(t, "between", tuple(p["between"])) for t, p in enumerate(run["loaded"].get("pre_arm", [])) if p["between"]]
    out += [(t, "run", tuple(fault_names(o["status"]))) for t, o in enumerate(run["tiles"]) if o["status"] & FAULTS]
    return sorted(out)


def _memories(cfg, y_rows: dict) -> dict:
    """A tile's MEM with only the rows read back (``{slice: {row: lanes}}``, y's) filled in."""
    mem = {n: np.zeros((cfg.mem_depth, cfg.lanes), np.uint8) for n in cfg.mem_names}
    for m, rows in y_rows.items():
        for r, v in rows.items():
            mem[m][int(r)] = v
    return mem


def _span(values) -> list:
    values = list(values)
    return [min(values, default=0), max(values, default=0)]


def _check_tiles(where, r, gold, man, allowed, counts) -> tuple[list, list]:
    """A run's tiles: every observation against the golden model and the compiler's promise
    (cycles and busy counters; but the parts ``allowed`` to differ), the HAC locked, each
    link's error counters as ``counts`` ({(tile, link): (corrected, uncorrectable)}) predict;
    ``(problems, the tiles' HAC_ERROR registers)``."""
    bad, hac_reg = [], []
    for t, obs in enumerate(r["tiles"]):
        bad += [p.at(f"{where}, tile {t}") for p in
                compare(tile_observed(obs), golden_reference(gold[t]),
                        promise(cycles=man.tile[t].cycles, busy=man.tile[t].busy), skip=("faults",))
                if p.part not in allowed]
        c = obs["c2c"]
        if not c["locked"] or c["lock_lost"]:
            bad.append(f"{where}, tile {t}: the HAC lock was lost")
        hac_reg.append(c["hac_error"])
        for k, link in enumerate(c["links"]):
            got, want = (link["corrected"], link["uncorrected"]), counts.get((t, k), (0, 0))
            if got != want:
                bad.append(f"{where}, tile {t} link {k}: {got[0]} flit(s) corrected and {got[1]} "
                           f"uncorrectable, the injected flits predict {want[0]} and {want[1]}")
    return bad, hac_reg


def _check_wall(where, progs, r, predicted_wall: int) -> tuple[list, dict]:
    """The wall cycles in each tile's own HAC: its deskew offset (START_HAC plus its
    RUNTIME_DESKEW slacks; a child's within the HAC error of it, a SYNC having moved its HAC
    across a release target) less the root's HAC the host read, plus its cycles; the run's is
    the last tile's (``scoreboard.check_wall``: within ``c2c.HAC_ERROR_MAX`` of
    ``c2c.wall_cycles``), the root's exactly it.  ``(problems, figures)``."""
    wall, predicted, wall_problems = check_wall(progs, r)
    bad = [p.at(where) for p in wall_problems]
    wrap = 1 << progs[0].config.HAC_BITS
    lead = (r["start_hac"] - r["hac_read"]) % wrap
    if lead != c2c.START_LEAD or predicted != predicted_wall:
        bad.append(f"{where}: wall cycles predicted {predicted} from a lead of {lead}, c2c.wall_cycles of the "
                   f"compiled cycles {predicted_wall}")
    deskew = [(o["c2c"]["deskew_offset"] - r["start_hac"] - deskew_slacks(p) + wrap // 2) % wrap - wrap // 2
              for o, p in zip(r["tiles"], progs)]
    root = r["tiles"][0]
    root_wall = (root["c2c"]["deskew_offset"] - r["hac_read"]) % wrap + root["cycles"]
    if root_wall != predicted_wall:
        bad.append(f"{where}: {root_wall} wall cycles on the root's HAC, c2c.wall_cycles {predicted_wall}")
    return bad, {"wall": wall, "root_wall": root_wall, "deskew": deskew}


def _check_host(where, n: int, r, layer, tiles: int, asked: int) -> list:
    """What the host did around run ``n``: only x's rows written after the first, every HAC
    locked before arming, no reset or clock restart, the HAC error within its budget, the
    ``asked`` injections landed."""
    bad, loaded = [], r["loaded"]
    if n:
        b = loaded["bytes"]
        if b["x"] != layer.x_bytes() or any(b[k] for k in b if k != "x"):
            bad.append(f"{where}: the host wrote {b}, only x's {layer.x_bytes()} bytes expected")
        if not all(p["hac_locked"] for p in loaded["pre_arm"]):
            bad.append(f"{where}: a HAC not locked before arming")
    if r["resets"] != [1] * tiles or r["clock_starts"] != [1] * tiles:
        bad.append(f"{where}: resets {r['resets']} and clock starts {r['clock_starts']}: the tray stopped")
    if max(-r["hac_error"][0], r["hac_error"][1]) > c2c.HAC_ERROR_MAX:
        bad.append(f"{where}: HAC error {r['hac_error']} beyond the budget of +-{c2c.HAC_ERROR_MAX}")
    if r["injected"] != [1] * asked:
        bad.append(f"{where}: {r['injected']} flit(s) hit, {asked} injection(s) asked for")
    return bad


def _y_problems(where, layer, x, r, cfg) -> tuple[list, bool]:
    """y read back and y traced against ``ffn_int``: ``(problems, exact)``."""
    man, H = layer.manifest, layer.spec.H
    ref = ffn_int(layer.spec, np.asarray(x, np.int64)[None])[0]
    y_read = tray_output(man, [_memories(cfg, y) for y in r["y_rows"]], cfg.lanes, H)[0].astype(np.int8)
    y_traced = tray_output(man, [traced_memory(cfg, o) for o in r["tiles"]], cfg.lanes, H)[0].astype(np.int8)
    exact = bool((y_read == ref).all() and (y_traced == ref).all())
    return ([] if exact else [f"{where}: y {y_read.tolist()} read back ({y_traced.tolist()} traced), ffn_int "
                                   f"{ref.tolist()}"]), exact


def check_session(layer, xs, session: dict, inject_between=(), inject_during=()) -> dict:
    """Every run of a session (``sim/tb/steady_tray.py``'s results) against the compiler and
    the golden model (the module's checks): the session's figures, ``problems`` (every run's,
    each naming its run, and the session's) and ``per_run`` (each run's figures and problems).
    A run with a double flip injected during it may have wrong writes and y (a corrupt
    vector); its cycles, busy counters and wall cycles are still checked."""
    runs = session["runs"]
    progs0, man = layer.programs, layer.manifest
    cfg, tiles = progs0[0].config, len(progs0)
    peer = Topology(tiles).peer
    want_faults, want_counts = expected_reports(tiles, inject_between, inject_during)
    corrupt = {x["run"] for x in inject_during if _flips(x["mask"]) == 2}
    predicted_wall = wall_cycles(progs0, [m.cycles for m in man.tile])       # lead c2c.START_LEAD
    problems, per_run, seen_faults, hac_reg = [], [], {}, []
    if len(runs) != len(xs):
        problems.append(f"{len(runs)} runs observed, {len(xs)} inputs given")
    for n, (x, r) in enumerate(zip(xs, runs)):
        where = f"run {n}"
        if r["timed_out"]:
            per_run.append({"n": n, "timed_out": True, "problems": [f"{where}: timed out (not every tile done)"]})
            problems += per_run[-1]["problems"]
            continue
        progs = layer.programs_for(x)
        faults = reported_faults(r)
        if faults:
            seen_faults[n] = faults
        bad = [] if faults == want_faults.get(n, []) else \
            [f"{where}: faults reported {faults}, the injected flits predict {want_faults.get(n, [])}"]
        tile_bad, regs = _check_tiles(where, r, archmodel.run_system(progs, peer, man.min_distance), man,
                                      {"writes", "read-back"} if n in corrupt else set(), want_counts.get(n, {}))
        wall_bad, walls = _check_wall(where, progs, r, predicted_wall)
        y_bad, y_exact = _y_problems(where, layer, x, r, cfg)
        bad += tile_bad + wall_bad + (y_bad if n not in corrupt else [])
        bad += _check_host(where, n, r, layer, tiles, sum(1 for i in inject_during if i["run"] == n))
        hac_reg += regs
        per_run.append({"n": n, **walls, "cycles": max(o["cycles"] for o in r["tiles"]), "hac_error": r["hac_error"],
                        "faults": faults, "y_exact": y_exact, "sac_skew": r["sac_skew"] if r["samples"] else None,
                        "host_cycles": r["loaded"].get("host_cycles", 0) + r["y_cycles"], "seconds": r["wall_s"],
                        "problems": bad})
        problems += bad
    s = session["session"]
    if max(-s["hac_error"][0], s["hac_error"][1]) > c2c.HAC_ERROR_MAX:
        problems.append(f"session: HAC error {s['hac_error']} beyond the budget of +-{c2c.HAC_ERROR_MAX}")
    return _session_figures(session, per_run, problems, seen_faults, want_faults, corrupt, man, predicted_wall,
                            hac_reg, tiles)


def _session_figures(session, per_run, problems, seen_faults, want_faults, corrupt, man, predicted_wall, hac_reg,
                     tiles) -> dict:
    """:func:`check_session`'s report: the runs' figures gathered."""
    done = [p for p in per_run if not p.get("timed_out")]
    skew = [p["sac_skew"] for p in done if p["sac_skew"] is not None]
    s = session["session"]
    return {"runs": len(session["runs"]), "problems": problems, "per_run": per_run,
            "faults": seen_faults, "faults_expected": want_faults, "corrupt_runs": sorted(corrupt),
            "y_wrong": [p["n"] for p in done if not p["y_exact"]],
            "compiled_cycles": [m.cycles for m in man.tile], "predicted_wall": predicted_wall,
            "wall_cycles": _span(p["wall"] for p in done), "root_wall_cycles": _span(p["root_wall"] for p in done),
            "wall_off": {d: sum(1 for p in done if p["wall"] - predicted_wall == d)
                         for d in sorted({p["wall"] - predicted_wall for p in done})},
            "deskew_off": {t: sum(1 for p in done if p["deskew"][t]) for t in range(tiles)
                           if any(p["deskew"][t] for p in done)},
            "hac_error_runs": [min((p["hac_error"][0] for p in done), default=0.0),
                               max((p["hac_error"][1] for p in done), default=0.0)],
            "hac_error_session": s["hac_error"], "session_samples": s["samples"],
            "hac_error_register": _span(hac_reg),
            "sac_skew": [min((k[0] for k in skew), default=0.0), max((k[1] for k in skew), default=0.0)],
            "budget": c2c.HAC_ERROR_MAX, "host_cycles": _span(p["host_cycles"] for p in done[1:]),
            "first_load_bytes": session["first_load_bytes"], "seconds": session["seconds"]}
