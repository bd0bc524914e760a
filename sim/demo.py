"""`make sim`: compile an FFN, run it on the RTL tile, show predicted vs observed.

    python -m sim.demo [--kind swiglu|classic] [--H 128] [--I 512] [--batch 1]
                       [--sim verilator|icarus] [--config default|tiny] [--waves] [--seed N] [--copy]

``--copy`` runs the data-movement demo (MEM-to-MEM sweeps) instead of an FFN.
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

from firmware_gen import ConfigError, TileConfig, archmodel
from firmware_gen.compile_ffn import CompileError, compile_ffn, example_ffn, output_matrix
from firmware_gen.numerics import NumericsError, ffn_int
from firmware_gen.schedule import Scheduler

from .runner import SIMULATORS, SimSetupError, TileSim, job, observed_events
from .scoreboard import check_run


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


def _build(cfg, args):
    t0 = time.perf_counter()
    print(f"building the tile for {args.sim} ...", flush=True)
    tile = TileSim(cfg, args.sim, waves=args.waves)
    print(f"  built in {time.perf_counter() - t0:.1f} s ({tile.build_dir})")
    return tile


def run_ffn(cfg, args) -> int:
    ex = example_ffn(args.kind, args.H, args.I, args.batch, seed=args.seed)
    prog, man = compile_ffn(ex.spec, ex.x_int8, cfg)
    print(f"FFN: {args.kind} ({ex.activation}), H={args.H}, I={args.I}, batch={args.batch} "
          f"(padded to {man.padded[0]}x{man.padded[1]}), {man.weight_vectors * cfg.lanes} weight bytes")
    gold = archmodel.run(prog)
    tile = _build(cfg, args)
    res = tile.run([job(prog, name="ffn")], name="demo-ffn")[0]
    problems = check_run(res, gold, man.writes, man.cycles)
    problems += [f"busy {n}: predicted {v}, hardware {res['busy'].get(n)}"
                 for n, v in man.busy.items() if res["busy"].get(n) != v]
    # The hardware's output values, gathered from its trace, against the integer FFN.
    got = {(s, a): d for _, s, a, d in observed_events(res)}
    mem = {n: np.zeros((cfg.mem_depth, cfg.lanes), np.uint8) for n in cfg.mem_names}
    for (s, a), d in got.items():
        mem[s][a] = d
    y_hw = output_matrix(man, mem, cfg.lanes, args.H)
    exact = bool(np.array_equal(y_hw, ffn_int(ex.spec, ex.x_int8)))
    err = ex.error_vs_float(y_hw)
    print(f"\ncycles taken          {res['cycles']:>8}   (compiler predicted {man.cycles}, golden model {gold.cycles})")
    print(f"SRAM-read bound       {man.sram_bound:>8}   (every weight vector read once, all "
          f"{2 * cfg.mem_slices} MEM slices every cycle)")
    print(f"MAC bound             {man.mac_bound:>8}   ({man.mm_count} MMs on 2 MXMs)")
    print(f"efficiency            {man.bound / res['cycles']:>8.3f}   (bound / cycles; "
          f"{res['cycles'] / man.sram_bound:.3f}x the SRAM-read bound)")
    print(f"MXM utilisation       {man.mm_count / (2 * res['cycles']):>8.3f}")
    print("busy cycles (hardware / predicted): "
          + ", ".join(f"{n} {res['busy'][n]}/{man.busy[n]}" for n in cfg.slice_names if man.busy[n]))
    writes_ok = observed_events(res) == [(w.cycle, w.slice, w.addr, w.data) for w in man.writes]
    print(f"output writes         {len(res['events']):>8}   predicted == observed: {'yes' if writes_ok else 'NO'}")
    print(f"bit-exact vs integer FFN: {'PASS' if exact else 'FAIL'}")
    print(f"error vs float: cosine {err['cosine']:.4f}, max abs error {err['max_abs_error']:.4f} "
          f"(output LSB {ex.spec.out_scale:.4f})")
    for p in problems:
        print("  " + p)
    verdict = exact and writes_ok and not problems
    print(f"\n{'PASS' if verdict else 'FAIL'}: FFN on {args.sim}, {res['cycles']} cycles, every output "
          f"{'bit-exact and at its predicted cycle' if verdict else 'checked (see above)'}")
    if args.waves:
        print(f"waveforms in {tile.build_dir}")
    return 0 if verdict else 1


def run_copy(cfg, args) -> int:
    s = demo_schedule(cfg, args.seed)
    prog = s.program()
    gold = archmodel.run(prog)
    tile = _build(cfg, args)
    res = tile.run([job(prog)], name="demo")[0]
    obs = {(sl, a): (c, d) for c, sl, a, d in observed_events(res)}
    print(f"\n{'transfer':<44} {'stream':>6} {'write cycles predicted':>24} {'observed':>12}  values")
    ok_all = True
    for x in s.transfers:
        pred = [w for w in s.predicted_writes() if w.transfer == x.index]
        got = [obs.get((w.slice, w.addr)) for w in pred]
        ok = all(g is not None and g[0] == w.cycle and tuple(g[1]) == w.data for g, w in zip(got, pred))
        ok_all &= ok
        seen = [g[0] for g in got if g]
        span = lambda cs: f"{min(cs)}..{max(cs)}" if cs else "-"  # noqa: E731
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
    print(f"\n{'PASS' if verdict else 'FAIL'}: {len(res['events'])} MEM writes on {args.sim}, every value "
          f"and cycle {'as predicted' if verdict else 'checked (see above)'}")
    return 0 if verdict else 1


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m sim.demo", description=__doc__.splitlines()[0])
    ap.add_argument("--kind", choices=("swiglu", "classic"), default="swiglu", help="FFN kind (default: swiglu)")
    ap.add_argument("--H", type=int, default=128, help="model width H (default: 128)")
    ap.add_argument("--I", type=int, default=512, help="intermediate width I (default: 512)")
    ap.add_argument("--batch", type=int, default=1, help="batch size, 1 = decode (default: 1)")
    ap.add_argument("--sim", choices=SIMULATORS, default="verilator", help="simulator (default: verilator)")
    ap.add_argument("--config", choices=TileConfig.PRESETS[:2], default="default",
                    help="tile configuration preset (default: default)")
    ap.add_argument("--waves", action="store_true", help="dump waveforms (FST on Verilator, FST/VCD on Icarus)")
    ap.add_argument("--seed", type=int, default=1, help="seed for weights and inputs (default: 1)")
    ap.add_argument("--copy", action="store_true", help="run the MEM-to-MEM data-movement demo instead")
    args = ap.parse_args(argv)
    try:
        cfg = TileConfig.preset(args.config)
        print(f"tile: {cfg.lanes} lanes, {cfg.streams} streams per direction, "
              f"{cfg.mem_slices}+{cfg.mem_slices} MEM slices x {cfg.mem_depth} vectors, "
              f"2 MXMs of {cfg.lanes}x{cfg.lanes}")
        print("slices (west -> east): " + " | ".join(cfg.slice_names))
        return run_copy(cfg, args) if args.copy else run_ffn(cfg, args)
    except (ConfigError, SimSetupError, CompileError, NumericsError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
