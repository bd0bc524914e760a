"""`make bench`: simulator speed on one program, measured in one run.

    python -m sim.bench [--config default|tiny] [--sims verilator,icarus] [--out DIR]

Runs the same long data-movement program on each simulator, times only the run (start to
done, after loading), and reports tile-cycles per second and the Verilator/Icarus ratio,
as JSON and as a Markdown table.  Every run is also checked against the golden model, so
a fast wrong simulator does not count.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import platform
import sys
from pathlib import Path

import numpy as np

from firmware_gen import TileConfig, archmodel
from firmware_gen.schedule import Scheduler

from .runner import ROOT, SIMULATORS, SimSetupError, TileSim, job
from .scoreboard import check_run


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


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m sim.bench", description=__doc__.splitlines()[0])
    ap.add_argument("--config", choices=TileConfig.PRESETS[:2], default="default")
    ap.add_argument("--sims", default=",".join(SIMULATORS), help="comma-separated simulators")
    ap.add_argument("--passes", type=int, default=24, help="sweep passes (program length)")
    ap.add_argument("--out", default=str(ROOT / "bench" / "results"), help="output directory")
    args = ap.parse_args(argv)
    base = TileConfig.preset(args.config)
    # Deeper queues and trace buffers than the preset, so one long program fits and every
    # write is recorded; the fabric and the MEM slices are the preset's.
    writes_per_slice = args.passes * base.mem_depth
    cfg = dataclasses.replace(base, iq_depth=max(base.iq_depth, 1 << (8 * args.passes).bit_length()),
                              trace_depth=1 << (writes_per_slice - 1).bit_length())
    sims = [x for x in args.sims.split(",") if x]
    s = sweep_schedule(cfg, args.passes)
    prog = s.program()
    gold = archmodel.run(prog)
    print(f"program: {len(s.transfers)} sweeps, {len(gold.events)} MEM writes, {gold.cycles} cycles")
    rows = []
    for sim in sims:
        try:
            tile = TileSim(cfg, sim, waves=False)
        except SimSetupError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        print(f"running on {sim} ...", flush=True)
        res = tile.run([job(prog, timeout_cycles=10 * gold.cycles)], name="bench")[0]
        problems = check_run(res, gold, s.predicted_writes(), s.predicted_cycles())
        rows.append({"simulator": sim, "cycles": res["cycles"], "run_seconds": round(res["wall_run_s"], 4),
                     "cycles_per_second": round(res["cycles"] / res["wall_run_s"], 1),
                     "matches_golden_and_prediction": not problems})
    result = {"config": cfg.to_dict(), "program": {"sweeps": len(s.transfers), "writes": len(gold.events),
                                                   "cycles": gold.cycles},
              "host": platform.platform(), "simulators": rows}
    by = {r["simulator"]: r for r in rows}
    if "verilator" in by and "icarus" in by:
        result["verilator_over_icarus"] = round(by["verilator"]["cycles_per_second"]
                                                / by["icarus"]["cycles_per_second"], 2)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "bench.json").write_text(json.dumps(result, indent=2) + "\n")
    lines = ["| simulator | cycles | run s | tile-cycles/s | bit- and cycle-exact |",
             "|---|---:|---:|---:|---|"]
    lines += [f"| {r['simulator']} | {r['cycles']} | {r['run_seconds']} | {r['cycles_per_second']:,.0f} | "
              f"{'yes' if r['matches_golden_and_prediction'] else 'NO'} |" for r in rows]
    if "verilator_over_icarus" in result:
        lines.append(f"\nVerilator / Icarus speed ratio (same program, same run): "
                     f"**{result['verilator_over_icarus']}x**")
    (out / "bench.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    print(f"\nwritten: {out / 'bench.json'}, {out / 'bench.md'}")
    return 0 if all(r["matches_golden_and_prediction"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
