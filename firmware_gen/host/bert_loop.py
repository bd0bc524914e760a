"""A BERT run as a decoder (``decoder.from_bert``: all-MiniLM-L6-v2) as the token loop's integer
model (``golden/token_loop.py``): every weight int8, every activation int8 at a static scale, each
step one the tile has (``docs/afd.md``, "A trained model in int8").

Post-norm, BERT's order, with the pieces the synthetic loop model does not have:

* ``x = LN(requant(c_e E[id] + c_p P[p]))``: the word and position rows (token type 0 folded in)
  summed in the accumulator, then a LayerNorm (``NormSpec.calibrate_layer``: the RMSNorm's steps
  on the centred vector, the bias in the last requantisation);
* per layer: ``q, k, v = requant(W n + b)`` per head (weights per row, biases int32 in the
  products' units), the heads (``golden.attention.head_int``), ``x = LN1(requant(c x + Wo y +
  bo))``, ``h = GELU[requant(W1 x + b1)]`` (the VXM's table), ``x = LN2(requant(c x + W2 h + b2))``;
* ``logits = E x`` (the LM head is the word embedding, tied): int32, their argmax the next token.

:func:`quantise_bert` calibrates the scales once on a fixed text with the float model
(:func:`float_step`, the same arithmetic as ``decoder.step`` with float FFNs, recording every
activation); :func:`agreement` is the teacher-forced top-1 agreement of the two over a text.
"""

from __future__ import annotations

import numpy as np

from firmware_gen.golden.attention import MAX_CONTEXT, HeadSpec, head_float
from firmware_gen.golden.layer_norm import LayerNormSpec, output_scale
from firmware_gen.golden.quantise import quantise_scales, quantise_weights, range_scale_rows, round_half_away_from_zero
from firmware_gen.golden.tables import activation_function, activation_table
from firmware_gen.golden.token_loop import HEAD_DIM, AttnPart, Caches, LoopLayer, LoopModel, LoopModelError, step_int
from firmware_gen.host.decoder import CALIBRATION_TEXT, Decoder, layer_norm, wordpiece


ACTIVATION_TABLES = 8   # the FFN activation's tables per layer (classes of lanes by range)
SUM_HEADROOM = 1.25     # a residual sum's scale per lane: this times the calibration's largest |value| / 127
FIRST_HEADROOM = 2.0    # position 0's: this times its one calibration sample's, at least the later positions'


def float_step(model: Decoder, token: int, cache: dict, trace: dict | None = None) -> np.ndarray:
    """The float64 logits after ``token`` at the next position of ``cache`` ((layer, head) ->
    (keys, values)); ``trace`` collects every activation the integer model quantises."""
    if not (model.post_norm and model.positions is not None and model.H == model.heads * HEAD_DIM):
        raise LoopModelError(f"a post-norm BERT with learned positions and heads of {HEAD_DIM} is needed")
    rec = (lambda k, v: trace.setdefault(k, []).append(np.array(v, np.float64))) if trace is not None else (lambda k, v: None)
    pos = len(next(iter(cache.values()), ([],))[0])
    rec("pos", pos)
    z = model.embed[int(token)].astype(np.float64) + model.positions[pos]
    rec("e", z)
    x = layer_norm(z, *model.embed_norm).astype(np.float64)
    for l, ly in enumerate(model.layers):
        rec((l, "x"), x)
        ys = []
        for h in range(model.heads):
            rows = slice(h * HEAD_DIM, (h + 1) * HEAD_DIM)
            q, k, v = (w[rows].astype(np.float64) @ x + b[rows] for w, b in ((ly.wq, ly.bq), (ly.wk, ly.bk), (ly.wv, ly.bv)))
            cache.setdefault((l, h), ([], []))[0].append(k)
            cache[l, h][1].append(v)
            for n, a in (("q", q), ("k", k), ("v", v)):
                rec((l, n, h), a)
            ys.append(head_float(q, np.array(cache[l, h][0]), np.array(cache[l, h][1])))
        z = x + ly.wo.astype(np.float64) @ np.concatenate(ys) + ly.bo
        rec((l, "z1"), z)
        x = layer_norm(z, ly.ln1, ly.ln1_b).astype(np.float64)
        rec((l, "x1"), x)
        pre = ly.W1.astype(np.float64) @ x + ly.b1
        rec((l, "pre"), pre)
        hid = activation_function(ly.activation)(pre)
        rec((l, "h"), hid)
        z = x + ly.W2.astype(np.float64) @ hid + ly.b2
        rec((l, "z2"), z)
        x = layer_norm(z, ly.ln2, ly.ln2_b).astype(np.float64)
    return model.head.astype(np.float64) @ x


def _codes(trace, scale):
    return np.clip(round_half_away_from_zero(np.array(trace) / scale), -127, 127).astype(np.int64)


def _bias(b, unit):
    return round_half_away_from_zero(np.asarray(b, np.float64) / unit).astype(np.int64)


def _residual(W, in_scale, x_scale):
    """The residual's per-lane weights ``c`` (the diagonal block's) and ``W`` in the accumulator's
    units, one per lane (``in_scale``: per column the scale of what ``W`` multiplies; ``x_scale``:
    per lane the residual's): each lane's unit as small as keeps its ``c`` and ``W``'s row within
    int8."""
    Ws, x_scale = np.asarray(W, np.float64) * in_scale, np.broadcast_to(np.asarray(x_scale, np.float64), (len(W),))
    unit = np.maximum(np.abs(Ws).max(axis=1), x_scale) / 127
    c = np.clip(round_half_away_from_zero(x_scale / unit), 1, 127).astype(np.int64)
    return c, np.clip(round_half_away_from_zero(Ws / unit[:, None]), -127, 127).astype(np.int8), unit


def _folded(W, x_scale):
    """``W`` times the per-lane scales of what it multiplies, int8 per row: ``(codes, scales)``,
    ``codes @ x_int * scales`` = ``W x``."""
    return quantise_weights(np.asarray(W, np.float64) * np.asarray(x_scale, np.float64)[None, :])


def _post(z, first_rows, unit, g, b, per_lane=True):
    """A residual sum's requantisation and LayerNorm, ``((rq, norm), (rq, norm) of position 0)``:
    the sum's scale from positions 1.. (position 0's sums are far larger: BERT's first token),
    position 0's own; one output scale for both (it is folded into the next weights)."""
    z, at0 = np.array(z), np.asarray(first_rows)
    later = SUM_HEADROOM * range_scale_rows(z[~at0])
    first = np.maximum(later, FIRST_HEADROOM * range_scale_rows(z[at0]))     # (few samples: a wide margin)
    so = output_scale(z, g, b, per_lane=per_lane)       # one output scale for both: position 0's outputs too
    norm = LayerNormSpec.calibrate(_codes(z[~at0], later), later, g, b, per_lane=per_lane, out_scale=so)
    norm0 = LayerNormSpec.calibrate(_codes(z[at0], first), first, g, b, per_lane=per_lane, out_scale=norm.out_scale,
                                    margin=FIRST_HEADROOM ** 2)
    return (quantise_scales(unit / later), norm), (quantise_scales(unit / first), norm0)


def _activation(name, pre, h, tables: int = ACTIVATION_TABLES):
    """The activation's tables by classes of lanes: a lane's class from its pre-activations' range
    (class ``c``: ``2**(-c/2)`` of the widest), each class a table from its input scale to its
    own output scale (the class's largest |output|).  ``(tables (T, 256), class per lane,
    per lane input scale, per lane output scale)``."""
    r = SUM_HEADROOM * np.abs(pre).max(axis=0)
    top = float(r.max())
    lane = np.clip(np.floor(2 * np.log2(top / np.maximum(r, 1e-30))), 0, tables - 1).astype(np.int64)
    s_in = top * 2.0 ** (-lane / 2) / 127
    out = []
    s_out = np.empty(len(r))
    for c in range(tables):
        own = lane == c
        s_c = SUM_HEADROOM * float(np.abs(h[:, own]).max()) / 127 if own.any() else 1.0
        s_out[own] = max(s_c, 1e-9)
        out.append(activation_table(name, top * 2.0 ** (-c / 2) / 127, max(s_c, 1e-9)))
    return np.array(out, np.int8), lane, s_in, s_out


def _mix(s_e, s_p, s_z):
    """``c_e``, ``c_p`` (the larger 127) and the requantisation of ``c_e E + c_p P`` to ``s_z`` (per lane)."""
    unit = max(s_e, s_p) / 127
    c_e, c_p = (int(np.clip(round(s / unit), 1, 127)) for s in (s_e, s_p))
    return c_e, c_p, quantise_scales(unit / s_z)


def quantise_bert(model: Decoder, sequences) -> LoopModel:
    """The integer loop model of ``model``: static per-tensor activation scales from one float
    run over ``tokens`` (the calibration text), weights per row (tied embedding and head per
    tensor), each head's ``HeadSpec.calibrate`` on its q, k, v there."""
    trace = {}
    for seq in sequences:
        cache = {}
        for t in seq:
            float_step(model, int(t), cache, trace)
    at0 = np.array(trace["pos"]) == 0
    embed, s_e = quantise_weights(model.embed, per_row=False)
    pos, s_p = quantise_weights(model.positions, per_row=False)
    s_z = SUM_HEADROOM * range_scale_rows(np.array(trace["e"]))
    e_norm = LayerNormSpec.calibrate(_codes(trace["e"], s_z), s_z, *model.embed_norm)
    layers, s_x = [], np.asarray(e_norm.out_scale)
    for l, ly in enumerate(model.layers):
        specs = [HeadSpec.calibrate(*(np.array(trace[l, n, h]) for n in "qkv"), stale_rows=True)
                 for h in range(model.heads)]
        ints, rq, bias = {}, {}, {}
        for n in "qkv":
            ints[n], sw = _folded(getattr(ly, f"w{n}"), s_x)
            bias[n] = _bias(getattr(ly, f"b{n}"), sw)
            rq[n] = [quantise_scales(sw[h * HEAD_DIM:(h + 1) * HEAD_DIM] / getattr(s, f"{n}_scale"))
                     for h, s in enumerate(specs)]
        col = np.repeat([s.out_scale for s in specs], HEAD_DIM)
        c, Wo, unit = _residual(ly.wo.astype(np.float64), col[None, :], s_x)
        (rq_o, post1), first = _post(trace[l, "z1"], at0, unit, ly.ln1, ly.ln1_b)
        attn = AttnPart(ints["q"], ints["k"], ints["v"], rq, specs, Wo, c, rq_o,
                        bias=bias, bo=_bias(ly.bo, unit), post=post1, first=first)
        s_x = np.asarray(post1.out_scale)
        W1, sw1 = _folded(ly.W1, s_x)
        tables, lane, s_pre, s_h = _activation(ly.activation, np.array(trace[l, "pre"]), np.array(trace[l, "h"]))
        c2, W2, unit2 = _residual(ly.W2.astype(np.float64), s_h, s_x)
        # (the last one per tensor: the LM head is the embedding, one scale for every lane)
        (rq2, post2), first = _post(trace[l, "z2"], at0, unit2, ly.ln2, ly.ln2_b, per_lane=l + 1 < len(model.layers))
        layers.append(LoopLayer(W1, W2, c2, quantise_scales(sw1 / s_pre), rq2, attn,
                                b1=_bias(ly.b1, sw1), b2=_bias(ly.b2, unit2),
                                table=tables, table_lane=lane, post=post2, first=first))
        s_x = np.asarray(post2.out_scale)
    return LoopModel(embed, layers, embed, None, positions=pos, embed_mix=_mix(float(s_e[0]), float(s_p[0]), s_z),
                     embed_norm=e_norm)


# More calibration text than ``decoder.CALIBRATION_TEXT`` (a lane's range from 61 positions
# is often exceeded by the next text's): each a sequence of its own, from position 0.
CALIBRATION_TEXTS = (CALIBRATION_TEXT,
                     "A train left the station at noon and crossed the river before the storm. The driver, "
                     "who had worked on the line for thirty years, knew every bridge and signal; still, the "
                     "rain made him slow down, and the passengers watched the fields turn grey.",
                     "Prices rose again in March: bread, milk and fuel cost more than a year ago, while wages "
                     "stayed flat. Economists disagree about the cause. Some blame energy, others demand, and a "
                     "few say the data are simply noisy!")


def calibration_tokens(vocab) -> list[list[int]]:
    """The calibration sequences' WordPiece ids (``CALIBRATION_TEXTS``, each cut to the attention
    step's ``MAX_CONTEXT`` positions)."""
    return [wordpiece(t, vocab)[:MAX_CONTEXT] for t in CALIBRATION_TEXTS]


def agreement(model: Decoder, loop: LoopModel, tokens) -> dict:
    """Teacher-forced top-1 agreement over ``tokens``: the float model and the integer one read
    the same tokens; the share of positions whose argmax is the same, the ids of both, the
    cosine of the int32 logits with float's (mean and least), and per position float's margin
    (its top logit over its second)."""
    cache, caches, fl, it, cos, margin = {}, Caches(), [], [], [], []
    for t in tokens:
        f, i = float_step(model, int(t), cache), step_int(loop, int(t), caches).astype(np.float64)
        fl.append(int(np.argmax(f)))
        it.append(int(np.argmax(i)))
        cos.append(float(np.dot(f, i) / (np.linalg.norm(f) * np.linalg.norm(i) + 1e-30)))
        top = np.sort(f)[-2:]
        margin.append(float(top[1] - top[0]))
    same = sum(a == b for a, b in zip(fl, it))
    return {"positions": len(fl), "agree": same, "top1_agreement": same / max(len(fl), 1), "float": fl, "int": it,
            "logit_cosine_mean": float(np.mean(cos)), "logit_cosine_min": float(min(cos)), "float_margin": margin}
