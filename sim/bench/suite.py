"""`make bench`: FFN cycles against the configuration's bounds, and simulator speed, in one run.

    python -m sim.bench [--config default|tiny] [--dtype int8|fp8] [--sims verilator,icarus] [--out DIR]
                        [--sweep] [--no-bus-load] [--build-configs tiny,default] [--no-model]

Runs a suite of FFNs (decode shapes up to the largest that fits, classic and SwiGLU, one
batched) on each simulator: per FFN the cycles against the SRAM-read and MAC bounds, the
MXM utilisation and whether every output was bit-exact at its predicted cycle; per
simulator tile-cycles/s, the Verilator/Icarus ratio and the loading throughput over the
load port and the host bus; the Verilator build time per ``--build-configs`` preset; the
golden-model figures (tray, MoE, attention, the token loop on chip, decode loop, number
formats, LP30) and, unless ``--no-model``, a BERT-small FFN on Verilator
(``sim/bench/model.py``).  Targets: decode within 1.15x of the SRAM-read bound where that
bound is at least 1,000 cycles; batched MXM utilisation at least 90 %.  ``--dtype fp8``
runs the suite, tray and MoE layer in E4M3 (history kept apart as ``<config>-fp8``).  JSON
and a Markdown table go to ``--out``."""

from __future__ import annotations

import argparse
import dataclasses
import json
import platform
import sys
from pathlib import Path

import numpy as np

from lpu_arch import TileConfig
from lpu_arch.errors import LpuError, error_line

from firmware_gen.golden import archmodel
from firmware_gen.compiler import CompileError
from firmware_gen.compiler.ffn import compile_ffn
from firmware_gen.compiler.ffn_example import example_ffn
from firmware_gen.golden.numerics import ffn_int
from firmware_gen.compiler.schedule import Scheduler
from firmware_gen.scoreboard import (Observed, compare, expert_outputs, ffn_reference, golden_observed, manifest_promise,
                                     moe_reference, row_vectors)

from sim.bench import speed as bench_speed

from sim.bench import history
from sim.bench.args import add_arguments
from sim.bench.attention import cycle_rows as attention_cycle_rows
from sim.bench.bert_loop import bench_rows as bert_loop_rows
from sim.bench.bert_loop import markdown_bench as markdown_bert_loop
from sim.bench.attention import markdown_cycles as markdown_attention
from sim.bench.decode import accuracy_rows, decode_rows
from sim.bench.ffns import compile_suite, ffn_suite
from sim.bench.fp8 import fp8_rows, rtl_rows
from sim.bench.fp8 import markdown as markdown_fp8
from sim.bench.fp8 import markdown_rtl as markdown_fp8_rtl
from sim.bench.lp30 import lp30_rows, markdown_lp30, markdown_plan, plan_rows
from sim.bench.decode import markdown as markdown_decode
from sim.bench.speculate import markdown as markdown_speculate
from sim.bench.speculate import speculate_rows
from sim.bench.token_loop import PER_CALL as LOOP_PER_CALL
from sim.bench.token_loop import TOKENS as LOOP_TOKENS
from sim.bench.token_loop import markdown_token_loop, token_loop_rows
from sim.bench.model import markdown as markdown_model
from sim.bench.model import model_rows
from sim.harness.progress import ProgressPrinter
from sim.harness.runner import SIMULATORS, SimSetupError, TileSim, job, measure_build
from sim.harness.scoreboard import check_run, output_rows
from sim.table import Table, right

DECODE_TARGET, UTIL_TARGET, TARGET_MIN_BOUND = 1.15, 0.90, 1000


LOAD_NAMES = {"port": "vector load port", "bus": "host bus (32-bit word per cycle)"}


def load_row(sim: str, path: str, results) -> dict:
    """Loading throughput of one invocation: every job's loaded bytes over its load time."""
    nbytes = sum(r["loaded_bytes"] for r in results)
    secs = sum(r["wall_load_s"] for r in results)
    return {"simulator": sim, "path": path, "bytes": nbytes, "load_seconds": round(secs, 3),
            "bytes_per_second": round(nbytes / secs) if secs else None}


def run_ffns(cfg, sims, bus_load: bool = True) -> tuple[list, list, list, dict]:
    """Run the suite on each simulator, loaded through the load port and (``bus_load``)
    again over the host bus, both checked: (FFN rows, speed rows, loading rows, builds)."""
    compiled = [(p, m, archmodel.run(p), ffn_int(ex.spec, ex.x_int8)) for _, ex, p, m in compile_suite(cfg)]
    jobs = [job(p, name=f"{m.kind} {m.H}x{m.I} b{m.batch}", read_back=output_rows(m)) for p, m, _, _ in compiled]
    expected = [m.cycles for _, m, _, _ in compiled]
    shapes, speed, loading, builds = [], [], [], {}
    for sim in sims:
        tile = TileSim(cfg, sim, waves=False)
        builds[sim] = tile.build_info
        print(f"running {len(compiled)} FFNs on {sim} ...", flush=True)
        results = tile.run(jobs, name="bench-ffn", progress=ProgressPrinter(sim, expected=expected), load="port")
        loading.append(load_row(sim, "port", results))
        if bus_load:
            print(f"the same FFNs on {sim}, loaded over the host bus ...", flush=True)
            bus = tile.run(jobs, name="bench-ffn-bus", load="bus", progress=ProgressPrinter(sim, expected=expected))
            row = load_row(sim, "bus", bus)
            row["exact"] = all(not check_run(res, gold, manifest=man, y=y)
                               for (_, man, gold, y), res in zip(compiled, bus))
            loading.append(row)
        cycles = sum(r["cycles"] for r in results)
        secs = sum(r["wall_run_s"] for r in results)
        speed.append({"simulator": sim, "program": "ffn suite", "cycles": cycles, "run_seconds": round(secs, 4),
                      "cycles_per_second": round(cycles / secs, 1)})
        for (prog, man, gold, y), res in zip(compiled, results):
            ok = not check_run(res, gold, manifest=man, y=y)
            c = res["cycles"]
            row = {"simulator": sim, "ffn": res["name"], "kind": man.kind, "H": man.H, "I": man.I,
                   "batch": man.batch, "cycles": c, "predicted": man.cycles, "sram_bound": man.sram_bound,
                   "mac_bound": man.mac_bound, "ratio_to_sram_bound": round(c / man.sram_bound, 4),
                   "mxm_utilisation": round(man.mm_count / (2 * c), 4), "exact": ok}
            if man.batch == 1:
                row["target"] = (f"<= {DECODE_TARGET}x SRAM bound" if man.sram_bound >= TARGET_MIN_BOUND
                                 else "none (bound < 1000: fixed latency dominates)")
                row["meets_target"] = (c <= DECODE_TARGET * man.sram_bound
                                       if man.sram_bound >= TARGET_MIN_BOUND else None)
            else:
                row["target"] = f">= {UTIL_TARGET:.0%} MXM utilisation"
                row["meets_target"] = (row["mxm_utilisation"] >= UTIL_TARGET if man.batch >= cfg.lanes else None)
            shapes.append(row)
    return shapes, speed, loading, builds


def build_times(presets) -> list[dict]:
    """The Verilator build of each preset's tile, from scratch (``runner.measure_build``)."""
    rows = []
    for preset in presets:
        cfg = TileConfig.preset(preset)
        print(f"building the {preset} tile on verilator from scratch (for its build time) ...", flush=True)
        info = measure_build(cfg, "verilator")
        rows.append({"simulator": "verilator", "config": preset, "key": cfg.key(), "build_seconds": info["seconds"],
                     "verilog_seconds": info["verilog_seconds"]})
    return rows


def sweep_schedule(cfg: TileConfig, passes: int, seed: int = 0) -> Scheduler:
    """Whole-slice sweeps between every pair of MEM slices, many in flight at once."""
    rng = np.random.default_rng(seed)
    s = Scheduler(cfg)
    for name in cfg.mem_names:
        s.load(name, 0, rng.integers(0, 256, (cfg.mem_depth, cfg.lanes)))
    half = cfg.mem_depth // 2
    names = cfg.mem_names
    for p in range(passes):
        for i, a in enumerate(names):
            b = names[(i + 1 + p) % len(names)]
            if a != b:
                s.copy(a, (p % 2) * half, b, ((p + 1) % 2) * half, count=half)
    return s


def run_sweep(base, sims, passes):
    """The MEM-to-MEM data-movement program (a deep trace records every write)."""
    writes_per_slice = passes * base.mem_depth
    cfg = dataclasses.replace(base, iq_depth=max(base.iq_depth, 1 << (8 * passes).bit_length()),
                              trace_depth=1 << (writes_per_slice - 1).bit_length())
    s = sweep_schedule(cfg, passes)
    prog = s.program()
    gold = archmodel.run(prog)
    rows = []
    for sim in sims:
        print(f"running the sweep program on {sim} ...", flush=True)
        res = TileSim(cfg, sim, waves=False).run([job(prog, timeout_cycles=10 * gold.cycles)], name="bench",
                                                 progress=ProgressPrinter(sim, expected=[gold.cycles]))[0]
        rows.append({"simulator": sim, "program": f"sweep ({len(s.transfers)} copies)", "cycles": res["cycles"],
                     "run_seconds": round(res["wall_run_s"], 4),
                     "cycles_per_second": round(res["cycles"] / res["wall_run_s"], 1),
                     "exact": not check_run(res, gold, s.predicted_writes(), s.predicted_cycles())})
    return rows


TRAY_TARGET = 7.0


def _tray_checked(ex, cfg: TileConfig, tiles: int):
    """``ex`` compiled for ``tiles`` tiles and run on the multi-tile golden model:
    ``(TrayManifest, every tile's writes and cycles as predicted and y bit-exact)``."""
    from firmware_gen.compiler.tray import compile_ffn_tray, tray_output
    from lpu_arch.topology import Topology
    progs, man = compile_ffn_tray(ex.spec, ex.x_int8, cfg, tiles)
    res = archmodel.run_system(progs, Topology(tiles).peer, man.min_distance)
    y = tray_output(man, [r.memory for r in res], cfg.lanes, ex.spec.H)
    exact = not compare(Observed("golden model", outputs=row_vectors("y", y)), ffn_reference(ffn_int(ex.spec, ex.x_int8)))
    return man, exact and not any(compare(golden_observed(r), manifest_promise(m)) for r, m in zip(res, man.tile))


def tray_rows(cfg: TileConfig) -> list[dict]:
    """The largest decode FFN of the suite that fits one tile, on 1, 2, 4 and 8 tiles: SAC
    cycles as the compiler predicts them, checked on the multi-tile golden model."""
    decode = sorted((c for c in ffn_suite(cfg) if c[3] == 1), key=lambda c: (c[1] * c[2], c[0] == "swiglu"))
    for kind, H, I, B in reversed(decode):       # the largest that fits one tile (the tiny tile holds few)
        ex = example_ffn(kind, H, I, B, seed=1, dtype=cfg.mxm_dtype)
        try:
            _, one = compile_ffn(ex.spec, ex.x_int8, cfg)
            break
        except CompileError:
            continue
    else:
        return []
    rows = [{"tiles": 1, "ffn": f"{kind} {H}x{I} b{B}", "cycles": one.cycles, "speedup": 1.0,
             "c2c_share": 0.0, "exact": True}]
    for n in (2, 4, 8):
        man, exact = _tray_checked(ex, cfg, n)
        rows.append({"tiles": n, "ffn": f"{kind} {H}x{I} b{B}", "cycles": man.cycles,
                     "speedup": round(one.cycles / man.cycles, 3), "c2c_share": round(man.c2c_share, 4),
                     "link_vectors": man.transfers, "exact": exact})
    return rows


TRAY_BIG = ("swiglu", 256, 2048)     # larger than one default tile: 8 tiles against one fitted tile
TRAY_BIG_TARGET = 7.5


def tray_big_row(cfg: TileConfig, tiles: int = 8) -> dict:
    """``TRAY_BIG`` on ``tiles`` tiles against one tile fitted to hold it, both checked on
    the golden model."""
    from firmware_gen.compiler.fit import fit_ffn
    kind, H, I = TRAY_BIG
    ex = example_ffn(kind, H, I, 1, seed=1, dtype=cfg.mxm_dtype)
    fitted, _ = fit_ffn(ex.spec, ex.x_int8, cfg)
    prog, one = compile_ffn(ex.spec, ex.x_int8, fitted)
    man, tray_exact = _tray_checked(ex, cfg, tiles)
    exact = not compare(golden_observed(archmodel.run(prog)), manifest_promise(one)) and tray_exact
    return {"ffn": f"{kind} {H}x{I} b1", "tiles": tiles, "cycles": man.cycles, "one_tile_cycles": one.cycles,
            "one_tile_config": {k: getattr(fitted, k) for k in ("mem_depth", "iq_depth", "mxm_xbuf_depth",
                                                                "vxm_param_depth") if getattr(fitted, k) != getattr(cfg, k)},
            "speedup": round(one.cycles / man.cycles, 3), "meets_target": one.cycles / man.cycles >= TRAY_BIG_TARGET,
            "exact": exact}


MOE_LAYER = dict(E=32, top_k=4, shared=1, H=64, I=128)   # on 8 default tiles
MOE_TARGET = 1.10      # cycles per token against the larger of the batch bound and the floor (per token)
# The tp and tps mappings hold a share of all 32 experts per tile: a table and entries for each.
MOE_TP_SETS = ("vxm_tables=64", "vxm_param_depth=128", "base_regs=64")
# tps at decode batch 1: the smallest --set it needs (one token's 4 slots fit the default 16 base registers).
MOE_TPS1_SETS = ("vxm_tables=64", "vxm_param_depth=128")
MOE_RUNS = (("ep", 1, ()), ("tp", 1, MOE_TP_SETS), ("tps", 1, MOE_TPS1_SETS), ("tp", 4, MOE_TP_SETS),
            ("tps", 4, MOE_TP_SETS))   # mapping, tokens, --set


def moe_rows(cfg: TileConfig, tiles: int = 8) -> list[dict]:
    """The MoE layer ``MOE_LAYER`` on ``tiles`` tiles, one row per ``MOE_RUNS`` entry (ep with
    capacity 2; tp and tps at decode batch 1 and 4 tokens) and routing: SAC cycles per token
    as the compiler predicts them (checked on the multi-tile golden model under the routing's
    base registers) against the SRAM-read bound of the weights a token needs and of the
    batch's, and against the token's floor (``timing.token_floor``); and the weight bytes read
    per token (the golden model's MEM busy counters less x's reads and the output writes)
    against those of the selected and shared experts."""
    from firmware_gen.golden.moe import moe_int
    from lpu_arch.topology import Topology
    from sim.flows.moe import compile_moe_example
    rows = []
    for mapping, tokens, sets in MOE_RUNS:
        routings = ("random", "router") if mapping == "tp" else ("spread", "packed", "random", "router")
        try:
            cm = compile_moe_example(**MOE_LAYER, tokens=tokens, tiles=tiles, capacity=2 if mapping == "ep" else None,
                                     seed=1, cfg=cfg.with_overrides(sets), routings=routings, mapping=mapping)
        except CompileError as e:
            print(f"skipped the MoE layer ({mapping}): {e}")
            continue
        mt, spec, man = cm.mt, cm.example.spec, cm.mt.manifest()
        L, peer = mt.cfg.lanes, Topology(tiles).peer
        x_reads = mt.copy_reads                       # per tile: x (and the flushes' zeros) into both MXMs
        needed = (tokens * spec.top_k * man.weight_vectors["routed"] + man.weight_vectors["shared"]) * L
        for name in cm.routings:
            stages = moe_int(spec, cm.example.x_int8, cm.routings[name])
            rs = cm.rounds(name)
            cycles, read, exact = 0, 0, True
            for asg in rs:
                res = archmodel.run_system(cm.programs, peer, bases=mt.bases(asg))
                exact &= not mt.round_problems(asg, res)
                for r, pred in zip(res, mt.predict(asg)):
                    read += (sum(r.busy[m] for m in mt.cfg.mem_names) - x_reads - len(pred)) * L
                routed, shared = mt.outputs(asg, [r.memory for r in res])
                exact &= not compare(Observed("golden model", outputs=expert_outputs(routed, shared)),
                                     moe_reference(stages, {(b, e) for (_, b, _), e in asg.items()}))
                cycles += man.cycles_max
            rows.append({"mapping": mapping, "routing": name, "tiles": tiles, "tokens": tokens,
                         "capacity": mt.capacity, "config_sets": list(sets),
                         "layer": f"{spec.E} experts {spec.H}x{spec.I} top-{spec.top_k} + {len(spec.shared)} shared",
                         "rounds": len(rs), "cycles": cycles, "cycles_per_token": cycles / tokens,
                         "needed_bound_per_token": man.needed_bound,
                         "ratio_to_needed_bound": round(cycles / tokens / man.needed_bound, 3),
                         "batch_bound_per_token": man.batch_bound,
                         "ratio_to_batch_bound": round(cycles / tokens / man.batch_bound, 3),
                         "floor_per_token": round(man.floor / tokens, 2), "limit_per_token": round(man.limit, 2),
                         "ratio_to_limit": round(cycles / tokens / man.limit, 3),
                         "meets_target": cycles / tokens / man.limit <= MOE_TARGET,
                         "weight_bytes_read_per_token": read // tokens,
                         "needed_weight_bytes_per_token": needed // tokens, "exact": bool(exact)})
    return rows


def record_history(result: dict, git: dict, config: str, cfg: TileConfig, path: Path, picture: Path) -> None:
    """Append the run to the history ``path``, draw it to ``picture`` and print the speed
    against the baseline commit's runs; an unreadable history is reported on stderr."""
    entry = history.bench_entry(result, git, config, targets={
        "decode": DECODE_TARGET, "batched_utilisation": UTIL_TARGET, "tray": TRAY_TARGET, "moe": MOE_TARGET})
    entry["config_key"] = cfg.key()
    history.append(entry, path)
    try:
        entries = history.read(path)
        history.draw(entries, picture, config)
    except history.HistoryError as e:
        print(error_line(f"the history: {e}"), file=sys.stderr)
        return
    runs = sum(e["kind"] == "bench" and e.get("config") == config for e in entries)
    print(f"history: appended to {path} ({git['short']}{', dirty tree' if git['dirty'] else ''}; "
          f"{runs} {config} runs), drawn to {picture}")
    current = {s: v["cycles_per_second"] for s, v in entry["speed"].items()}
    for line in history.speed_lines(entries[:-1], current, config):
        print(f"history: {line}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m sim.bench", description=__doc__.splitlines()[0])
    add_arguments(ap)
    return run(ap.parse_args(argv))


class BenchError(LpuError, ValueError):
    """A bench request that cannot run; the message names it."""


def run(args) -> int:
    """The bench with :func:`sim.bench.args.add_arguments`'s options: ``bench.json`` and
    ``bench.md`` in ``--out``, the history appended; exit status 0 when every run is exact
    and every target met, 1 when not, 2 for a bad request or a simulator that cannot be set up."""
    try:
        cfg, sims, presets = request(args)
    except BenchError as e:
        print(error_line(str(e)), file=sys.stderr)         # as worded: a limit's message may run over lines
        return 2
    git = None if args.no_history else history.git_state()     # the tree as the run starts
    try:
        rtl, model_notes = rtl_figures(args, cfg, sims, presets)
    except (SimSetupError, bench_speed.SpeedError) as e:
        print(error_line(e, whole=True), file=sys.stderr)      # whole: a failed run's log follows its first line
        return 2
    result = bench_result(args, cfg, sims, rtl)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "bench.json").write_text(json.dumps(result, indent=2) + "\n")
    lines = markdown(result, cfg, args.config, sims, model_notes, args.quick)
    (out / "bench.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    print(f"\nwritten: {out / 'bench.json'}, {out / 'bench.md'}")
    if git is not None:
        record_history(result, git, args.config + ("-fp8" if cfg.mxm_dtype == "fp8" else ""), cfg, args.history,
                       out / "history.svg")
    return 0 if passed(result) else 1


def request(args) -> tuple[TileConfig, list[str], list[str]]:
    """The tile, simulators and build-timed presets ``args`` ask for (``--quick`` and
    ``--dtype fp8`` set the options they imply), or a :class:`BenchError`."""
    if args.passes < 1:
        raise BenchError(f"--passes must be at least 1, got {args.passes}")
    if args.quick:
        args.no_bus_load, args.build_configs, args.no_model, args.no_speed_reference = True, "", True, True
    try:
        cfg = TileConfig.preset(args.config).with_overrides([f"mxm_dtype={args.dtype}"])
    except ValueError as e:
        raise BenchError(f"--dtype {args.dtype} on the {args.config} tile: {e}") from None
    if args.dtype == "fp8":
        args.no_speed_reference = True          # the reference commit's build is an int8 tile
    sims = [x for x in args.sims.split(",") if x]
    presets = [x for x in args.build_configs.split(",") if x]
    for what, given, known in (("simulator", sims, SIMULATORS), ("preset", presets, TileConfig.PRESETS)):
        bad = [x for x in given if x not in known]
        if bad or (not given and what == "simulator"):
            raise BenchError(f"unknown {what}(s) {', '.join(bad) or '(none given)'}; choose from {', '.join(known)}")
    return cfg, sims, presets


def rtl_figures(args, cfg: TileConfig, sims: list[str], presets: list[str]) -> tuple[dict, list[str]]:
    """``(figures, notes)`` the simulators measure, by their ``bench.json`` names."""
    shapes, speed, loading, builds = run_ffns(cfg, sims, bus_load=not args.no_bus_load)
    if args.sweep:
        speed += run_sweep(cfg, sims, args.passes)
    build = build_times(presets)
    model, model_notes = ([], []) if args.no_model or "verilator" not in sims else model_rows(TileConfig.default())
    speed_ref = ([] if args.no_speed_reference or args.config != "default"   # (a default-tile workload)
                 else bench_speed.speed_rows(sims))
    return ({"ffn": shapes, "speed": speed, "loading": loading, "build": build, "builds_used": builds,
             "model": model, "speed_vs_reference": speed_ref}, model_notes)


def bench_result(args, cfg: TileConfig, sims: list[str], rtl: dict) -> dict:
    """What ``bench.json`` holds: ``rtl`` with the golden-model figures and the FP8 suite."""
    fp8, quick = cfg.mxm_dtype == "fp8", args.quick
    print("compiling the tray FFN for 1, 2, 4 and 8 tiles (golden-model checked) ...", flush=True)
    tray = tray_rows(cfg)
    tray_big = [tray_big_row(cfg)] if args.config == "default" else []
    print("compiling the MoE layer for 8 tiles (golden-model checked under each routing) ...", flush=True)
    moe = moe_rows(cfg) if args.config == "default" else []
    print("compiling attention steps of 1..4 position blocks (golden-model checked) ...", flush=True)
    attention = attention_cycle_rows() if args.config == "default" and not fp8 else []
    print(f"generating {LOOP_TOKENS} tokens with the token loop on chip, {LOOP_PER_CALL} a run (golden model) ...",
          flush=True)
    token_loop = token_loop_rows() if args.config == "default" and not fp8 else []
    print("running the decode loop on the golden model, and teacher-forced accuracy ...", flush=True)
    decode = decode_rows(moe_tokens=1 if quick else None, trained=not quick)
    accuracy = accuracy_rows(trained=not quick)
    if not quick:
        print("int8 against FP8 on trained FFN weights (golden model) ...", flush=True)
    if not quick:
        print("speculative decoding, all-MiniLM-L6-v2's quantised drafts against its float target ...", flush=True)
    speculate = [] if quick else speculate_rows()
    if not quick:
        print("all-MiniLM-L6-v2 as the token loop's integer model, against float ...", flush=True)
    bert_loop = [] if quick else bert_loop_rows()
    formats = [] if quick else fp8_rows()
    fp8_rtl = [] if fp8 or quick or args.config != "default" or "verilator" not in sims else rtl_rows(cfg)
    lp30 = [] if quick else lp30_rows()
    plans = [] if quick else plan_rows()
    result = {"config": cfg.to_dict(), "host": platform.platform(), "ffn": rtl["ffn"], "speed": rtl["speed"],
              "loading": rtl["loading"], "build": rtl["build"], "builds_used": rtl["builds_used"], "tray": tray,
              "tray_big": tray_big, "moe": moe, "attention": attention, "token_loop": token_loop,
              "decode": decode, "decode_accuracy": accuracy,
              "speculate": speculate, "bert_loop": bert_loop,
              "number_formats": formats, "fp8_rtl": fp8_rtl, "model": rtl["model"], "lp30": lp30, "plan": plans,
              "speed_vs_reference": rtl["speed_vs_reference"]}
    ffn_speed = {r["simulator"]: r["cycles_per_second"] for r in rtl["speed"] if r["program"] == "ffn suite"}
    if "verilator" in ffn_speed and "icarus" in ffn_speed:
        result["verilator_over_icarus"] = round(ffn_speed["verilator"] / ffn_speed["icarus"], 2)
    return result


def passed(result: dict) -> bool:
    """Every run exact (the token loop's: passed) and every FFN target met (or none set)."""
    checked = [result.get(k, []) for k in ("tray", "tray_big", "model", "moe", "attention", "decode", "lp30",
                                           "speculate")]
    ok = (all(r["exact"] for r in result["ffn"])
          and all(r.get("exact", True) for r in result["speed"] + result["loading"])
          and all(r["ours"]["as_predicted"] and r.get("theirs", {}).get("as_predicted", True)
                  for r in result["speed_vs_reference"])
          and all(r["exact"] and r.get("bus_exact", True) for rows in checked for r in rows))
    ok = ok and all(r["passed"] for r in result.get("token_loop", []))
    return ok and all(r["meets_target"] is not False for r in result["ffn"])


# ---- bench.md ----------------------------------------------------------------------------------
FFN_TABLE = Table("FFN", right("cycles"), right("predicted"), right("SRAM bound"),
                  right("cycles / SRAM bound"), right("MAC bound"), right("MXM util."), "target", "met",
                  "bit- and cycle-exact")
TRAY_TABLE = Table(right("tiles"), right("cycles"), right("speed-up"), right("link capacity used"),
                   right("vectors over links"), "exact")
MOE_TABLE = Table("mapping", right("tokens"), "routing", right("rounds"), right("cycles per token"),
                  right("bound"), right("cycles / bound"), right("batch bound"), right("cycles / batch bound"),
                  right("floor"), right("cycles / max(batch bound, floor)"), "met",
                  right("weight bytes read per token"), right("needed"), "exact")
SPEED_TABLE = Table("simulator", "program", right("cycles"), right("run s"), right("tile-cycles/s"))
LOAD_TABLE = Table("simulator", "path", right("bytes"), right("load s"), right("bytes/s"))
BUILD_TABLE = Table("configuration", "key", right("Verilog s"), right("build s"))


def markdown(result: dict, cfg: TileConfig, preset: str, sims: list[str], model_notes: list[str],
             quick: bool = False) -> list[str]:
    """``bench.md``'s lines: every table of ``result``; ``quick`` leaves out the number formats."""
    fmt = "FP8 E4M3, " if cfg.mxm_dtype == "fp8" else ""
    lines = markdown_ffn(result["ffn"], cfg, preset, sims, fmt)
    lines += markdown_tray(result["tray"], result["tray_big"], fmt)
    lines += markdown_moe(result["moe"], fmt)
    lines += markdown_attention(result.get("attention", []))
    lines += markdown_token_loop(result.get("token_loop", []))
    lines += markdown_decode(result["decode"], result["decode_accuracy"])
    lines += markdown_speculate(result.get("speculate", []))
    lines += markdown_bert_loop(result.get("bert_loop", []))
    lines += [] if quick else markdown_fp8(result["number_formats"])
    lines += markdown_fp8_rtl(result["fp8_rtl"])
    lines += markdown_lp30(result["lp30"])
    lines += markdown_plan(result["plan"])
    lines += markdown_speed(result, sims)
    lines += bench_speed.markdown(result["speed_vs_reference"])
    if result["build"]:
        lines += ["", "Verilator build of the tile, from scratch, per configuration:", ""]
        lines += BUILD_TABLE.markdown([r["config"], r["key"], r["verilog_seconds"], r["build_seconds"]]
                                      for r in result["build"])
    if result["model"]:
        lines += markdown_model(result["model"], model_notes)
    return lines


def markdown_ffn(shapes: list[dict], cfg: TileConfig, preset: str, sims: list[str], fmt: str) -> list[str]:
    """The FFN suite's table (cycles from the first of ``sims``) and the others' exact count."""
    first = sims[0]
    lines = [f"FFNs on the {preset} tile ({fmt}{cfg.lanes} lanes, {cfg.mem_slices}+{cfg.mem_slices} MEM slices), "
             f"hardware cycles from {first}:", ""]
    lines += FFN_TABLE.markdown([r["ffn"], r["cycles"], r["predicted"], r["sram_bound"],
                                 f"{r['ratio_to_sram_bound']:.3f}", r["mac_bound"], f"{r['mxm_utilisation']:.1%}",
                                 r["target"], {True: "yes", False: "NO", None: "-"}[r["meets_target"]],
                                 "yes" if r["exact"] else "NO"] for r in shapes if r["simulator"] == first)
    others = [r for r in shapes if r["simulator"] != first]
    if others:
        lines.append(f"\nOn {', '.join(sims[1:])}: {sum(r['exact'] for r in others)}/{len(others)} FFNs "
                     "bit- and cycle-exact.")
    return lines


def markdown_tray(tray: list[dict], tray_big: list[dict], fmt: str) -> list[str]:
    """The tray's table (1, 2, 4, 8 tiles) and the line of the FFN larger than one tile."""
    lines = []
    if tray:
        lines += ["", f"Tray: {tray[0]['ffn']} on 1, 2, 4, 8 tiles ({fmt}SAC cycles predicted by the compiler and "
                  "checked on the multi-tile golden model; target: 8 tiles >= "
                  f"{TRAY_TARGET}x one tile):", ""]
        lines += TRAY_TABLE.markdown([r["tiles"], r["cycles"], f"{r['speedup']:.2f}x", f"{r['c2c_share']:.1%}",
                                      r.get("link_vectors", 0), "yes" if r["exact"] else "NO"] for r in tray)
    for r in tray_big:
        lines += ["", f"Tray: {r['ffn']} on {r['tiles']} tiles against one tile sized to hold it "
                  f"({', '.join(f'{k}={v}' for k, v in r['one_tile_config'].items())}; both golden-model checked; "
                  f"target >= {TRAY_BIG_TARGET}x): {r['cycles']:,} against {r['one_tile_cycles']:,} cycles, "
                  f"**{r['speedup']:.2f}x** ({'met' if r['meets_target'] else 'NOT met'}; exact: "
                  f"{'yes' if r['exact'] else 'NO'})"]
    return lines


def markdown_moe(moe: list[dict], fmt: str) -> list[str]:
    """The MoE layer's table: a row per mapping, tokens and routing."""
    if not moe:
        return []
    lines = ["", f"MoE: {moe[0]['layer']} on {moe[0]['tiles']} tiles ({fmt}SAC cycles predicted by the compiler, "
             "checked on the multi-tile golden model under each routing's base registers; bound: the SRAM "
             "reads of the weights a token needs, spread over every MEM slice of the tray; floor: the batch's "
             "least latency on the tray (timing.token_floor), per token; target <= "
             f"{MOE_TARGET}x the larger of the batch bound and the floor; weight bytes from the golden model's busy counters; ep: capacity 2 per tile and "
             "token; --set: " + "; ".join(f"{m} x{n}: {', '.join(sets) or 'none'}" for m, n, sets in MOE_RUNS) + "):", ""]
    return lines + MOE_TABLE.markdown([r["mapping"], r["tokens"], r["routing"], r["rounds"],
                                       f"{r['cycles_per_token']:.0f}", r["needed_bound_per_token"],
                                       f"{r['ratio_to_needed_bound']:.2f}",
                                       r["batch_bound_per_token"], f"{r['ratio_to_batch_bound']:.2f}",
                                       f"{r['floor_per_token']:g}", f"{r['ratio_to_limit']:.2f}",
                                       "yes" if r["meets_target"] else "no",
                                       f"{r['weight_bytes_read_per_token']:,}",
                                       f"{r['needed_weight_bytes_per_token']:,}", "yes" if r["exact"] else "NO"]
                                      for r in moe)


def markdown_speed(result: dict, sims: list[str]) -> list[str]:
    """The simulators' tile-cycles/s and loading throughput."""
    lines = [""] + SPEED_TABLE.markdown([r["simulator"], r["program"], r["cycles"], r["run_seconds"],
                                         f"{r['cycles_per_second']:,.0f}"] for r in result["speed"])
    if "verilator_over_icarus" in result:
        lines.append(f"\nVerilator / Icarus speed ratio (same FFNs, same run): **{result['verilator_over_icarus']}x**")
    lines += ["", "Loading the same FFN jobs (MEM images, programs, VXM parameters and table; the port writes "
              "a VXM lane entry whole, so it carries a few more bytes):", ""]
    lines += LOAD_TABLE.markdown([r["simulator"], LOAD_NAMES[r["path"]], f"{r['bytes']:,}", r["load_seconds"],
                                  f"{r['bytes_per_second'] or 0:,}"] for r in result["loading"])
    for sim in sims:
        rates = {r["path"]: r["bytes_per_second"] for r in result["loading"] if r["simulator"] == sim}
        if rates.get("port") and rates.get("bus"):
            lines.append(f"\n{sim}: host bus {rates['bus']:,} B/s")
            lines.append(f"{sim}: load port {rates['port']:,} B/s ({rates['port'] / rates['bus']:.1f}x the host bus)")
    return lines

