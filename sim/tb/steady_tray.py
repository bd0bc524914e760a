"""cocotb testbench of a tray that never stops, run after run (``sim.flows.steady.run_steady_tray``):
one dense tray FFN (``tray.compile_tray_layer``) loaded once through the load port
(``sim.tb.system.SteadyTray``), then one run per input x of the spec, back to back: the
host reads every tile's STATUS before arming (a fault raised between runs is reported with
the next run), writes x's rows, arms, waits for done, observes every tile and reads y back.
No reset, clock restart or relock after the first run.

``inject_between``: ``[{"before_run", "tile", "link", "mask"}]`` flits flipped while the
tray is idle, before run ``before_run`` is armed (the next valid flit: a SYNC on a link of
the root); ``inject_during``: ``[{"run", "tile", "link", "mask", "after_cycles"}]`` one flit
flipped during run ``run``, the first valid one ``after_cycles`` after the tile starts.

A sampler (``sim.tb.system.Sampler``) measures the HAC error during every run, and a second
one over the whole session from the first run's end (the host's time between runs too).
A progress line every ``progress_every`` runs and a summary at the end go to the log."""

from __future__ import annotations

import time

import cocotb
from cocotb.triggers import ClockCycles

from firmware_gen.compiler.blocks import x_image
from firmware_gen.compiler.system import wall_cycles
from firmware_gen.compiler.tray import compile_tray_layer, tray_config
from lpu_arch import TileConfig

from sim.flows.steady import reported_faults, steady_ffn
from sim.harness.runner import system_run
from sim.tb.driver import read_spec, write_results
from sim.tb.system import Sampler, SteadyTray, inject_idle, tile_drivers, want

# What a run's observation keeps of each tile (``sim.tb.system.observe``): no read-back rows
# (y's rows are returned apart), the C2C registers whole.
TILE_KEYS = ("cycles", "status", "busy", "illegal", "addr_fault", "events", "c2c", "done", "trace_read")


def _compact(res: dict, n: int, wall_s: float) -> dict:
    """A run's result as the flow checks it (``SteadyTray.run``'s, without the sampler's series)."""
    loaded = dict(res["loaded"])
    return {"n": n, "name": res["name"], "timed_out": res["timed_out"],
            "start_hac": res["start_hac"], "hac_read": res["hac_read"], "hac_armed": res["hac_armed"],
            "t_start_fs": res["t_start_fs"], "t_done_fs": res["t_done_fs"],
            "hac_error": res["hac_error"], "hac_error_int": res["hac_error_int"], "sac_skew": res["sac_skew"],
            "samples": res["samples"], "injected": res["injected"], "loaded": loaded,
            "y_bytes": res["y_bytes"], "y_cycles": res["y_cycles"], "resets": res["resets"],
            "clock_starts": res["clock_starts"], "wall_s": round(wall_s, 4), "wall_run_s": round(res["wall_run_s"], 4),
            "tiles": [{k: t[k] for k in TILE_KEYS} for t in res["tiles"]]}


@cocotb.test()
async def steady_tray(dut):
    spec = read_spec()
    s = spec["steady"]
    base, tiles = TileConfig.from_dict(s["config"]), spec["tiles"]
    layer = compile_tray_layer(steady_ffn(s["ffn"]).spec, base, tiles)
    cfg = tray_config(base, tiles)
    H, lanes = layer.spec.H, cfg.lanes
    drivers = tile_drivers(dut, cfg, tiles, load_port=True)
    tray = SteadyTray(dut, cfg, drivers, together=True)      # every tile's bus at once
    between = {x["before_run"]: x for x in s.get("inject_between", [])}
    during = {}
    for x in s.get("inject_during", []):
        during.setdefault(x["run"], []).append({k: x[k] for k in ("tile", "link", "mask", "after_cycles")})
    y_rows = []
    for man in layer.manifest.tile:
        rows = {}
        for m, a, *_ in man.outputs.values():
            rows.setdefault(m, set()).add(int(a))
        y_rows.append({m: sorted(r) for m, r in rows.items()})
    xs = s["x"]
    log, every = dut._log, s.get("progress_every", 100)
    first = system_run(layer.programs_for(xs[0]), s["ppm"], name="run0", seed=s["phase_seed"],
                       sample_every=s.get("sample_every", 16))
    held = [want(p, memory=False, y_rows=y_rows[t]) for t, p in enumerate(layer.programs)]
    session, sampling = None, None
    results, t0 = [], time.perf_counter()
    worst, faults_seen, walls = 0.0, 0, set()
    predicted = wall_cycles(layer.programs, [m.cycles for m in layer.manifest.tile])
    doubles = sum(bin(x["mask"]).count("1") == 2 for x in (*between.values(), *s.get("inject_during", [])))
    wrap = 1 << cfg.HAC_BITS
    for n, x in enumerate(xs):
        if n in between:
            b = between[n]
            hit = await inject_idle(dut, drivers[b["tile"]], b["tile"], b["link"], b["mask"])
            await ClockCycles(drivers[0].dut.clk, 64)      # the flit crosses the wire
            log.info("flipped %#x in a flit of tile %d link %d at %d fs, before run %d", b["mask"], b["tile"],
                     b["link"], hit, n)
        if n == 0:
            progs = layer.programs_for(x)
            wants = [want(p, x=x_image(layer.x_rows[t], x, lanes, H), y_rows=y_rows[t]) for t, p in enumerate(progs)]
            run = first
        else:       # what the tile holds, but x's rows
            wants = [{**w, "x": x_image(layer.x_rows[t], x, lanes, H)} for t, w in enumerate(held)]
            run = {**first, "name": f"run{n}", "inject": during.get(n, [])}
        t_run = time.perf_counter()
        res = await tray.run(run, wants)
        y = [{m: {r: mem[m][r][:lanes].tolist() for r in rows} for m, rows in y_rows[t].items()}
             for t, mem in enumerate(res.pop("y_memory"))]
        out = _compact(res, n, time.perf_counter() - t_run)
        out["y_rows"] = y
        results.append(out)
        worst = max(worst, -res["hac_error"][0], res["hac_error"][1])
        faults_seen += len(reported_faults(res))
        root = res["tiles"][0]
        walls.add((root["c2c"]["deskew_offset"] - res["hac_read"]) % wrap + root["cycles"])
        if n == 0:     # from here on the clocks, HAC and lock never stop: sample the whole session
            session = Sampler(dut, cfg, drivers, s.get("session_sample_every", 64), 0, s["phase_seed"] + 7)
            sampling = cocotb.start_soon(session.loop())
        if (n + 1) % every == 0 or n + 1 == len(xs):
            log.info("steady tray: %d of %d runs, wall cycles %s on the root's HAC (c2c.wall_cycles %d), largest "
                     "|HAC error| %.3f cycles (runs), %.3f (session), %d fault(s) reported, %.0f s", n + 1, len(xs),
                     sorted(walls), predicted, worst, max((abs(e) for e in session.err), default=0.0), faults_seen,
                     time.perf_counter() - t0)
    session.stop = True
    await sampling
    summ = session.summary()
    summ.pop("series")
    injected = len(between) + sum(len(v) for v in during.values())
    log.info("steady tray summary: %d runs on %d tiles, ppm %s; wall cycles %s on the root's HAC (c2c.wall_cycles "
             "%d); largest |HAC error| %.3f cycles during runs, %.3f over the session (%d samples); %d flit flip(s) "
             "injected, %d fault report(s), %d expected (one per double flip); %.0f s", len(xs), tiles,
             [round(p, 1) for p in s["ppm"]], sorted(walls), predicted, worst,
             max(-summ["hac_error"][0], summ["hac_error"][1]), summ["samples"], injected, faults_seen, doubles,
             time.perf_counter() - t0)
    write_results([{"runs": results, "session": summ, "first_load_bytes": sum(d.first_bytes for d in drivers),
                    "seconds": round(time.perf_counter() - t0, 1)}])
