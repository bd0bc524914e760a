"""`make sim`: build the tile, move data across it on a simulator, show predicted vs observed.

    python -m sim.demo [--sim verilator|icarus] [--config default|tiny] [--waves] [--seed N]
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

from firmware_gen import ConfigError, TileConfig, archmodel
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


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m sim.demo", description=__doc__.splitlines()[0])
    ap.add_argument("--sim", choices=SIMULATORS, default="verilator", help="simulator (default: verilator)")
    ap.add_argument("--config", choices=TileConfig.PRESETS[:2], default="default",
                    help="tile configuration preset (default: default)")
    ap.add_argument("--waves", action="store_true", help="dump waveforms (FST on Verilator, FST/VCD on Icarus)")
    ap.add_argument("--seed", type=int, default=1, help="seed for the data moved (default: 1)")
    args = ap.parse_args(argv)
    try:
        cfg = TileConfig.preset(args.config)
        print(f"tile: {cfg.lanes} lanes, {cfg.streams} streams per direction, "
              f"{cfg.mem_slices}+{cfg.mem_slices} MEM slices x {cfg.mem_depth} vectors")
        print("slices (west -> east): " + " | ".join(cfg.slice_names))
        s = demo_schedule(cfg, args.seed)
        prog = s.program()
        gold = archmodel.run(prog)
        t0 = time.perf_counter()
        print(f"building the tile for {args.sim} ...", flush=True)
        tile = TileSim(cfg, args.sim, waves=args.waves)
        print(f"  built in {time.perf_counter() - t0:.1f} s ({tile.build_dir})")
        res = tile.run([job(prog)], name="demo")[0]
    except (ConfigError, SimSetupError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2

    obs = {(sl, a): (c, d) for c, sl, a, d in observed_events(res)}
    print(f"\n{'transfer':<44} {'stream':>6} {'write cycles predicted':>24} {'observed':>12}  values")
    ok_all = True
    for x in s.transfers:
        pred = [w for w in s.predicted_writes() if w.transfer == x.index]
        got = [obs.get((w.slice, w.addr)) for w in pred]
        ok = all(g is not None and g[0] == w.cycle and tuple(g[1]) == w.data for g, w in zip(got, pred))
        ok_all &= ok
        seen = [g[0] for g in got if g]
        span = lambda cs: f"{min(cs)}..{max(cs)}" if cs else "-"
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
    if args.waves:
        print(f"waveforms in {tile.build_dir}")
    return 0 if verdict else 1


if __name__ == "__main__":
    sys.exit(main())
