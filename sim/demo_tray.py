"""`make sim-tray`: one FFN split across a tray of tiles, each on its own clock, on the RTL.

    python -m sim.demo_tray [--tiles 2|4|8] [--kind swiglu|classic] [--H 32] [--I 64]
                            [--sim verilator|icarus] [--config tiny|default] [--seed N]

Compiles the FFN for the tray (``firmware_gen/tray.py``), gives every tile a random clock
offset within the specification (``max_ppm``), a random phase and every link a random wire
latency within the declared range, runs all tiles, and checks every tile's MEM writes
(its share of y, bit-exact) and cycle count against the compiler's prediction and the
multi-tile golden model.
"""

from __future__ import annotations

import argparse
import dataclasses
import random
import sys
import time

import numpy as np

from firmware_gen import ConfigError, TileConfig, archmodel
from firmware_gen.compile_ffn import CompileError, compile_ffn, example_ffn
from firmware_gen.hostmap import LINK_FAULTS
from firmware_gen.numerics import NumericsError, ffn_int
from firmware_gen.system import TILE_COUNTS, Topology
from firmware_gen.tray import compile_ffn_tray, tray_config, tray_output

from .runner import SIMULATORS, SimSetupError, SystemSim, observed_events, system_run
from .scoreboard import check_run


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m sim.demo_tray", description=__doc__.splitlines()[0])
    ap.add_argument("--tiles", type=int, choices=TILE_COUNTS, default=8, help="tiles in the tray (default: 8)")
    ap.add_argument("--kind", choices=("swiglu", "classic"), default="swiglu", help="FFN kind (default: swiglu)")
    ap.add_argument("--H", type=int, default=32, help="model width H (default: 32)")
    ap.add_argument("--I", type=int, default=64, help="intermediate width I (default: 64)")
    ap.add_argument("--sim", choices=SIMULATORS, default="verilator", help="simulator (default: verilator)")
    ap.add_argument("--config", choices=("tiny", "default"), default="tiny",
                    help="tile preset (default: tiny, so that eight tiles build in minutes)")
    ap.add_argument("--seed", type=int, default=1, help="seed for weights, clocks and latencies (default: 1)")
    args = ap.parse_args(argv)
    try:
        base = dataclasses.replace(TileConfig.preset(args.config), iq_depth=512) \
            if args.config == "tiny" else TileConfig.preset(args.config)
        cfg = tray_config(base, args.tiles)
        topo = Topology(args.tiles)
        ex = example_ffn(args.kind, args.H, args.I, 1, seed=args.seed)
        programs, man = compile_ffn_tray(ex.spec, ex.x_int8, cfg, args.tiles)
        try:
            _, one = compile_ffn(ex.spec, ex.x_int8, base)
            single = one.cycles
        except CompileError:
            single = None
        gold = archmodel.run_system(programs, topo.peer, man.min_distance)
        rng = random.Random(args.seed)
        lat = {p: rng.randint(cfg.link_latency_min, cfg.link_latency_max) for p in topo.pairs}
        ppm = [rng.uniform(-cfg.max_ppm, cfg.max_ppm) for _ in range(args.tiles)]
        print(f"tray: {args.tiles} tiles of {cfg.lanes} lanes, all-to-all ({len(topo.pairs)} links), "
              f"spec +-{cfg.max_ppm} ppm, wire latency {cfg.link_latency_min}..{cfg.link_latency_max} cycles")
        print(f"FFN: {args.kind}, H={args.H}, I={args.I}, decode; {man.transfers} h vectors over links, "
              f"SEND-to-RECV distance {man.min_distance} cycles")
        t0 = time.perf_counter()
        print(f"building the tray for {args.sim} ...", flush=True)
        tray = SystemSim(cfg, args.tiles, lat, args.sim)
        print(f"  built in {time.perf_counter() - t0:.1f} s")
        res = tray.run([system_run(programs, ppm, name="tray", seed=args.seed)], name="demo-tray")[0]
    except (ConfigError, CompileError, NumericsError, SimSetupError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2

    print(f"\n{'tile':>4} {'ppm':>9} {'cycles':>7} {'predicted':>9} {'writes':>6}  predicted == observed")
    ok = True
    memories = []
    for t, obs in enumerate(res["tiles"]):
        problems = check_run(obs, gold[t], man.tile[t].writes, man.tile[t].cycles)
        if obs["status"] & LINK_FAULTS:
            problems.append(f"link fault flags {obs['status']:#x}")
        ok &= not problems
        mem = {n: np.zeros((cfg.mem_depth, cfg.lanes), np.uint8) for n in cfg.mem_names}
        for _, s, a, d in observed_events(obs):
            mem[s][a] = d
        memories.append(mem)
        print(f"{t:>4} {ppm[t]:>+9.1f} {obs['cycles']:>7} {man.tile[t].cycles:>9} {len(obs['events']):>6}  "
              f"{'yes' if not problems else 'NO: ' + problems[0]}")
    y = tray_output(man, memories, cfg.lanes, args.H)
    exact = bool(np.array_equal(y, ffn_int(ex.spec, ex.x_int8)))
    lo, hi = res["hac_error"]
    print(f"\ncycles (SAC, last tile): {max(o['cycles'] for o in res['tiles'])}"
          + (f"; one tile: {single} ({single / man.cycles:.2f}x)" if single else ""))
    print(f"HAC error over the run: {lo:+.2f} .. {hi:+.2f} cycles")
    print(f"bit-exact vs integer FFN: {'PASS' if exact else 'FAIL'}")
    verdict = ok and exact
    print(f"\n{'PASS' if verdict else 'FAIL'}: FFN on {args.tiles} tiles ({args.sim}), every tile's writes and "
          f"cycles {'as predicted' if verdict else 'checked (see above)'}")
    return 0 if verdict else 1


if __name__ == "__main__":
    sys.exit(main())
