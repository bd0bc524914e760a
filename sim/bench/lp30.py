"""`make bench`'s rows for the ``lp30`` preset (docs/lp30.md): DeepSeek-V3's routed expert
(SwiGLU H=7168, I=2048) and its dense layer (H=7168, I=18432, filling the chip's SRAM) at
decode batch 1, compiled and run on the golden model, against the compiler's bounds.

Targets: the expert within 1.10x of max(SRAM-read bound, latency floor); the dense layer
within 1.10x of its SRAM-read bound, padded blocks included (``sram_padded``); and
``lpu plan --model M --dtype fp8 --json`` under a minute per built-in model (:func:`plan_rows`)."""

from __future__ import annotations

import json
import subprocess
import sys
import time

from firmware_gen.golden import archmodel
from firmware_gen.compiler.ffn import compile_ffn
from firmware_gen.compiler.ffn_manifest import output_matrix
from firmware_gen.golden.numerics import ffn_int
from firmware_gen.host.models import MODELS
from firmware_gen.host.plan import synthetic_swiglu
from firmware_gen.scoreboard import compare, ffn_reference, golden_observed, manifest_promise, row_vectors
from lpu_arch.config import PRESET_CLOCK_MHZ, TileConfig

from sim.table import Table, right

TARGET = 1.10
PLAN_SECONDS = 60           # lpu plan, per model
WORKLOADS = (("routed expert (DeepSeek-V3)", 7168, 2048, ("sram_padded", "latency")),
             ("dense layer (DeepSeek-V3), fills the chip", 7168, 18432, ("sram_padded",)))
ROWS = Table("workload", "H x I", right("cycles"), right("us"), right("SRAM bound (rows read)"),
             right("every padded block read"), "tightest bound", right("cycles / tightest"), "target",
             right("cycles / target bound"), "met", "exact")
PLANS = Table("model", right("seconds"), "met", right("FFN us/token"), "source")


def lp30_rows() -> list[dict]:
    cfg = TileConfig.preset("lp30")
    mhz = PRESET_CLOCK_MHZ["lp30"]
    rows = []
    for name, H, I, against in WORKLOADS:
        print(f"lp30: compiling the {name}, SwiGLU H={H}, I={I} ...")
        spec, x = synthetic_swiglu(H, I)
        t0 = time.time()
        prog, man = compile_ffn(spec, x, cfg)
        t1 = time.time()
        gold = archmodel.run(prog)
        t2 = time.time()
        y = output_matrix(man, gold.memory, cfg.lanes, H)
        exact = not compare(golden_observed(gold, outputs=row_vectors("y", y)), manifest_promise(man),
                            ffn_reference(ffn_int(spec, x.reshape(1, -1))))
        target_bound = max({**man.bounds, "sram_padded": man.sram_padded}[k] for k in against)
        rows.append({"workload": name, "H": H, "I": I, "weight_bytes": 3 * H * I, "cycles": man.cycles,
                     "bounds": man.bounds, "tightest": man.tightest,
                     "ratio_to_tightest": round(man.cycles / man.bound, 3),
                     "ratio_to_sram": round(man.cycles / man.bounds["sram"], 3),
                     "sram_padded": man.sram_padded, "ratio_to_sram_padded": round(man.cycles / man.sram_padded, 3),
                     "target": f"<= {TARGET}x max({', '.join(against)})", "target_bound": target_bound,
                     "ratio_to_target_bound": round(man.cycles / target_bound, 3),
                     "meets_target": man.cycles <= TARGET * target_bound, "clock_mhz": mhz,
                     "microseconds": round(man.cycles / mhz, 3), "exact": bool(exact),
                     "compile_seconds": round(t1 - t0, 1), "golden_seconds": round(t2 - t1, 1)})
    return rows


def markdown_lp30(rows: list[dict]) -> list[str]:
    """bench.md's section of :func:`lp30_rows` (none without rows)."""
    if not rows:
        return []
    lines = ["", f"The lp30 preset (docs/lp30.md) at {rows[0]['clock_mhz']:g} MHz, decode batch 1 (cycles predicted "
             "by the compiler and checked on the golden model: every write, the cycle count and y):", ""]
    return lines + ROWS.markdown([r["workload"], f"{r['H']}x{r['I']}", f"{r['cycles']:,}", r["microseconds"],
                                  f"{r['bounds']['sram']:,}",
                                  f"{r['sram_padded']:,} ({r['ratio_to_sram_padded']:.3f}x)",
                                  f"{r['tightest']} {r['bounds'][r['tightest']]:,}", f"{r['ratio_to_tightest']:.3f}",
                                  r["target"], f"{r['ratio_to_target_bound']:.3f}",
                                  "yes" if r["meets_target"] else "NO", "yes" if r["exact"] else "NO"] for r in rows)


def plan_rows() -> list[dict]:
    """Wall seconds of ``lpu plan --model M --dtype fp8 --json`` for every built-in model."""
    rows = []
    for name in MODELS:
        print(f"lp30: lpu plan --model {name} --dtype fp8 --json ...")
        t0 = time.time()
        run = subprocess.run([sys.executable, "-m", "sim.cli.main", "plan", "--model", name, "--dtype", "fp8", "--json"],
                             capture_output=True, text=True)
        seconds = round(time.time() - t0, 1)
        ok = run.returncode == 0
        plan = json.loads(run.stdout) if ok else {}
        rows.append({"model": name, "seconds": seconds, "target_seconds": PLAN_SECONDS,
                     "meets_target": ok and seconds < PLAN_SECONDS, "ok": ok,
                     "us_per_token": round(plan["time"]["per_token_us"], 2) if ok else None,
                     "source": plan.get("time", {}).get("source") if ok else run.stderr.strip()[-300:]})
    return rows


def markdown_plan(rows: list[dict]) -> list[str]:
    """bench.md's section of :func:`plan_rows` (none without rows)."""
    if not rows:
        return []
    lines = ["", f"`lpu plan --model M --dtype fp8 --json`, wall seconds per model in its own process "
             f"(target: under {PLAN_SECONDS} s each):", ""]
    return lines + PLANS.markdown([r["model"], r["seconds"], "yes" if r["meets_target"] else "NO", r["us_per_token"],
                                   r["source"]] for r in rows)
