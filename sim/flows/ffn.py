"""Run a compiled FFN or any program on the RTL tile, checked: ``lpu sim`` (``make sim``);
:func:`run_copy` is ``lpu sim --copy``."""

from __future__ import annotations

import functools
import sys
import time

import numpy as np

from lpu_arch import TileConfig

from firmware_gen.golden import archmodel
from firmware_gen.compiler.ffn_manifest import output_matrix
from firmware_gen.compiler.schedule import Scheduler

from firmware_gen.scoreboard import Observed, compare, promise

from sim.harness.runner import BUILD, SimSetupError, TileSim, job, observed_events
from sim.harness.scoreboard import check_run, output_rows, read_back
from sim.harness.waves import build_failure_hint, save_waves
from sim.report import Report
from sim.table import Column, Table


# lpu sim's summary: a figure (right-aligned) and what it means, per line.
SUMMARY = Table(Column("", 22), Column("", 8, ">", gap=0), Column("", gap=3))


def demo_schedule(cfg: TileConfig, seed: int) -> Scheduler:
    """Sweeps across the whole tile in both directions, then a relay through the middle."""
    rng = np.random.default_rng(seed)
    s = Scheduler(cfg)
    west, east = cfg.mem_names[0], cfg.mem_names[-1]          # the outermost MEM slices
    inner_w, inner_e = cfg.mem_names[cfg.mem_slices - 1], cfg.mem_names[cfg.mem_slices]
    n = min(8, cfg.mem_depth // 4)
    s.load(west, 0, rng.integers(0, 256, (n, cfg.lanes)))
    s.load(east, 0, rng.integers(0, 256, (n, cfg.lanes)))
    s.copy(west, 0, east, n, count=n)          # eastward sweep across the whole tile
    s.copy(east, 0, west, n, count=n)          # westward sweep at the same time, other direction
    s.copy(east, n, inner_w, 0, count=n)       # relay: depends on the first sweep's writes
    s.copy(inner_w, 0, inner_e, 2 * n, count=n)
    return s


def build_tile(cfg, sim: str, waves: bool = False, out=None) -> TileSim:
    """Build (or reuse) the tile for ``sim``, saying so on ``out``."""
    out = out or sys.stdout
    t0 = time.perf_counter()
    print(f"building the tile for {sim} ...", file=out, flush=True)
    try:
        tile = TileSim(cfg, sim, waves=waves)
    except SimSetupError:
        raise
    except Exception as e:    # the simulator's build failed: say why if the log tells
        d = BUILD / f"{sim}-tile-{cfg.key()}{'-waves' if waves else ''}"
        hint = build_failure_hint(sim, d)
        raise SimSetupError(hint or f"the {sim} build failed ({e}); see {d / 'build.log'}") from None
    print(f"  built in {time.perf_counter() - t0:.1f} s ({tile.build_dir})", file=out, flush=True)
    return tile


def _save_waves(tile, cfg, dest, say) -> dict:
    """After a run with waves: the waveform (moved to ``dest`` if given) and its GTKWave view."""
    dump, view = save_waves(tile, cfg, dest)
    say(f"waveform: {dump}\nGTKWave view (signals grouped by slice): gtkwave {view}")
    return {"dump": str(dump), "gtkw": str(view)}


def run_ffn_on_rtl(c, sim: str = "verilator", waves: bool = False, waves_dir=None, progress=None,
                   out=None, checked: bool = True) -> Report:
    """Run a compiled FFN (``CompiledFfn``) on the RTL tile and check it
    (``scoreboard.check_run``) against the golden model and the manifest: every output write,
    the cycle count, the busy counters, and y read back from the SRAM against the integer
    FFN, bit-exact; the error against the float FFN is reported.  Prints the summary on
    ``out`` and returns the ``ffn`` :class:`Report`.  ``waves``: the waveform (moved to
    ``waves_dir``) and a GTKWave view."""
    say = functools.partial(print, file=out or sys.stdout, flush=True)
    cfg, prog, man = c.config, c.program, c.manifest
    say(f"FFN: {man.kind} ({c.source.get('activation', '?')}), H={man.H}, I={man.I}, batch={man.batch} "
        f"(padded to {man.padded[0]}x{man.padded[1]}), {man.weight_vectors * cfg.lanes} weight bytes")
    gold = archmodel.run(prog)
    tile = build_tile(cfg, sim, waves, out)
    res = tile.run([job(prog, name=c.name or "ffn", read_back=output_rows(man), checked=checked)], name="ffn",
                   progress=progress)[0]
    problems = check_run(res, gold, manifest=man, y=c.y_int8)
    # y as the SRAM holds it after the run (read back over the host bus), not as traced.
    held = read_back(res)
    mem = {n: {a: v for (s, a), v in held.items() if s == n} for n in cfg.mem_names}
    y_hw = output_matrix(man, mem, cfg.lanes, man.H)
    exact = None if c.y_int8 is None else not [p for p in problems if p.part == "outputs"]
    err = c.error_vs_float(y_hw)
    writes_ok = not [p for p in problems if p.part == "writes" and p.reference == "compiler"]
    cyc = res["cycles"]
    eff, util = man.bound / cyc, man.mm_count / (2 * cyc)
    busy = [n for n in cfg.queue_names if man.busy.get(n)]        # the slices the program keeps busy
    verdict = bool(exact is not False and writes_ok and not problems)
    report = {
        "passed": verdict, "simulator": sim, "name": c.name, "kind": man.kind, "H": man.H, "I": man.I,
        "batch": man.batch, "cycles": cyc, "predicted_cycles": man.cycles, "golden_model_cycles": gold.cycles,
        "sram_bound": man.sram_bound, "mac_bound": man.mac_bound, "bounds": man.bounds, "efficiency": round(eff, 4),
        "ratio_to_sram_bound": round(cyc / man.sram_bound, 4), "mxm_utilisation": round(util, 4),
        "busy": {n: {"hardware": res["busy"].get(n), "predicted": man.busy[n]} for n in busy},
        "output_writes": len(res["events"]), "writes_as_predicted": writes_ok, "bit_exact": exact,
        "error_vs_float": err, "problems": problems, "run_seconds": round(res["wall_run_s"], 3),
        "cycles_per_second": round(cyc / res["wall_run_s"], 1) if res["wall_run_s"] > 0 else None,
        "build_dir": str(tile.build_dir),
    }
    rows = [
        ("cycles taken", cyc, f"compiler predicted {man.cycles}, golden model {gold.cycles}"),
        ("SRAM-read bound", man.sram_bound,
         f"every weight vector read once, all {2 * cfg.mem_slices} MEM slices every cycle"),
        ("MAC bound", man.mac_bound, f"{man.mm_count} MMs on 2 MXMs"),
        ("efficiency", f"{eff:.3f}", f"tightest bound ({man.tightest} {man.bound}) / cycles; "
                                     f"{cyc / man.sram_bound:.3f}x the SRAM-read bound"),
        ("MXM utilisation", f"{util:.3f}", ""),
        ("output writes", len(res['events']), f"predicted == observed: {'yes' if writes_ok else 'NO'}"),
        (f"bit-exact vs {'FP8' if cfg.mxm_dtype == 'fp8' else 'int'} FFN",
         {True: "PASS", False: "FAIL", None: "-"}[exact],
         "y read back from the SRAM after the run" if exact is not None
         else "no reference output in this program directory"),
    ]
    if err is not None:
        rows.append(("error vs float", f"{err['cosine']:.4f}",
                     f"cosine; max abs error {err['max_abs_error']:.4f} "
                     + (f"(E4M3 1.0 = {c.out_scale:.4f})" if cfg.mxm_dtype == "fp8" else f"(output LSB {c.out_scale:.4f})")))
    rows.append(("simulation", f"{res['wall_run_s']:.2f}s",
                 f"{report['cycles_per_second'] or 0:,.0f} tile-cycles/s on {sim} (run only, after loading)"))
    say("")
    for label, value, note in rows:
        say(SUMMARY.line(label, value, note).rstrip())
    say("busy cycles (hardware / predicted): " + ", ".join(f"{n} {res['busy'][n]}/{man.busy[n]}" for n in busy))
    for p in problems:
        say("  " + p)
    say(f"\n{'PASS' if verdict else 'FAIL'}: FFN on {sim}, {cyc} cycles, every output "
        f"{'bit-exact and at its predicted cycle' if verdict else 'checked (see above)'}")
    if waves:
        report["waves"] = _save_waves(tile, cfg, waves_dir, say)
    return Report.of("ffn", report)


def run_program_on_rtl(prog, sim: str = "verilator", waves: bool = False, waves_dir=None, progress=None,
                       out=None, checked: bool = True) -> Report:
    """Run any program (e.g. from ``lpu asm``) on the RTL tile against the golden model
    alone: writes, cycles, busy counters, the final SRAM of every slice it writes and the
    fault flags; returns the ``program`` :class:`Report`."""
    say = functools.partial(print, file=out or sys.stdout, flush=True)
    cfg = prog.config
    gold = archmodel.run(prog)
    written = sorted({e.slice for e in gold.events})
    rows = {n: sorted({e.addr for e in gold.events if e.slice == n}) for n in written}
    tile = build_tile(cfg, sim, waves, out)
    res = tile.run([job(prog, name="program", read_back=rows, checked=checked)], name="program",
                   progress=progress)[0]
    problems = check_run(res, gold)
    verdict = not problems
    say(f"\ncycles {res['cycles']} (golden model {gold.cycles}), {len(res['events'])} MEM writes "
        f"(golden model {len(gold.events)}), {sum(len(r) for r in rows.values())} rows read back")
    for p in problems:
        say("  " + p)
    say(f"\n{'PASS' if verdict else 'FAIL'}: program on {sim}, {res['cycles']} cycles, "
        f"{'every write and cycle as the golden model' if verdict else 'checked (see above)'}")
    report = {"passed": verdict, "simulator": sim, "cycles": res["cycles"], "golden_model_cycles": gold.cycles,
              "writes": len(res["events"]), "problems": problems, "build_dir": str(tile.build_dir)}
    if waves:
        report["waves"] = _save_waves(tile, cfg, waves_dir, say)
    return Report.of("program", report)


def run_copy(cfg, sim: str = "verilator", seed: int = 1, waves: bool = False) -> Report:
    """``lpu sim --copy``: :func:`demo_schedule` on the RTL, every write against the
    prediction; returns the ``copy`` :class:`Report`."""
    s = demo_schedule(cfg, seed)
    prog = s.program()
    gold = archmodel.run(prog)
    tile = build_tile(cfg, sim, waves)
    res = tile.run([job(prog)], name="demo")[0]
    obs = {(sl, a): (c, d) for c, sl, a, d in observed_events(res)}
    span = lambda cs: f"{min(cs)}..{max(cs)}" if cs else "-"  # noqa: E731
    print(f"\n{'transfer':<44} {'stream':>6} {'write cycles predicted':>24} {'observed':>12}  values")
    ok_all = True
    for x in s.transfers:
        pred = [w for w in s.predicted_writes() if w.transfer == x.index]
        got = [obs.get((w.slice, w.addr)) for w in pred]
        # The transfer's writes as last traced at its rows (a row not written: missing).
        ok = not compare(Observed(writes=[(g[0], w.slice, w.addr, g[1]) for g, w in zip(got, pred) if g is not None]),
                         promise(pred))
        ok_all &= ok
        seen = [g[0] for g in got if g]
        label = f"{x.src}[{x.src_addr}:{x.src_addr + x.count}] -> {x.dst}[{x.dst_addr}:{x.dst_addr + x.count}]"
        print(f"{label:<44} {x.stream_name:>6} {span([w.cycle for w in pred]):>24} {span(seen):>12}  "
              f"{'match' if ok else 'MISMATCH'}")
    problems = check_run(res, gold, s.predicted_writes(), s.predicted_cycles())
    print(f"\ncycles: predicted {s.predicted_cycles()}, golden model {gold.cycles}, hardware {res['cycles']}")
    print("busy cycles per MEM slice (hardware / golden): "
          + ", ".join(f"{n} {res['busy'][n]}/{gold.busy[n]}" for n in cfg.mem_names))
    for p in problems:
        print("  " + p)
    verdict = ok_all and not problems
    print(f"\n{'PASS' if verdict else 'FAIL'}: {len(res['events'])} MEM writes on {sim}, every value "
          f"and cycle {'as predicted' if verdict else 'checked (see above)'}")
    if waves:
        _save_waves(tile, cfg, None, print)
    return Report("copy", bool(verdict), problems, {"simulator": sim, "cycles": res["cycles"],
                                                    "predicted_cycles": s.predicted_cycles(),
                                                    "golden_model_cycles": gold.cycles, "writes": len(res["events"])})

