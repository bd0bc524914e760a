"""A small decoder-only transformer for the decode loop (``docs/afd.md``).

The host side is numpy float32 (embedding, norms, causal attention with a KV cache,
residual adds, the LM head).  Each layer's FFN is a callable ``ffn(layer, x) -> y``:
:func:`float_ffn` in float64, or :class:`IntFfn`, which quantises x at the layer's static
``x_scale``, runs the integer FFN (``numerics.ffn_int``, or the tray:
``sim/flows/decode.py``) and dequantises with ``out_scale``.  :func:`synthetic` draws a model
from a seed; :func:`calibrate` sets every layer's scales once on a fixed calibration text,
so no parameter changes per token.  :func:`from_bert` runs a trained BERT encoder
(all-MiniLM-L6-v2) as a decoder: its tokens mean nothing, but its hidden states are a real
network's, outlier channels included, for measuring what quantised FFNs do to its outputs.
"""

from __future__ import annotations

import json
import math
import re
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from firmware_gen.golden.moe import MoeLayer, MoeSpec, Router, combine, moe_float, moe_int, quantise_input, route
from firmware_gen.golden.numerics import FfnSpec, activation_quantiser, dequantise, ffn_float, ffn_int
from firmware_gen.host.weights import Expert, load_ffn, open_weights

CALIBRATION_SEED, CALIBRATION_TOKENS = 12345, 48
SMOOTH_ALPHA = 0.5      # calibrate(method="fit"): SmoothQuant's migration strength


@dataclass
class Layer:
    ln1: np.ndarray
    wq: np.ndarray
    wk: np.ndarray
    wv: np.ndarray
    wo: np.ndarray
    ln2: np.ndarray
    W1: np.ndarray | None   # gate_proj (I, H) (classic: the first matrix); None for a MoE layer
    W3: np.ndarray | None   # up_proj (I, H); None for a classic FFN or a MoE layer
    W2: np.ndarray | None   # down_proj (H, I); None for a MoE layer
    kind: str = "swiglu"    # or "classic" (W2 act(W1 x + b1) + b2), or "moe" (``moe``)
    b1: np.ndarray | None = None
    b2: np.ndarray | None = None
    activation: str = "silu"
    bq: np.ndarray | None = None       # attention biases (BERT), else none
    bk: np.ndarray | None = None
    bv: np.ndarray | None = None
    bo: np.ndarray | None = None
    ln1_b: np.ndarray | None = None    # with a bias the norms are LayerNorms, else RMSNorms
    ln2_b: np.ndarray | None = None
    moe: MoeLayer | None = None        # kind "moe": the routed and shared experts and the router


@dataclass
class Decoder:
    """Weights (float32) of a decoder with ``heads`` attention heads.  ``post_norm``:
    BERT's order (``x = norm1(x + attention(x))``, ``x = norm2(x + ffn(x))``, the FFN's
    input the first norm's output, no final norm) instead of the pre-norm one."""
    embed: np.ndarray                       # (V, H)
    layers: list
    norm: np.ndarray | None                 # final RMSNorm (H,); None with post_norm
    head: np.ndarray                        # LM head (V, H)
    heads: int
    specs: list = field(default_factory=list)   # FfnSpec (MoeSpec for a MoE layer) per layer, after calibrate()
    smooth: list = field(default_factory=list)  # per layer: the FFN input's smoothing (H,) or None
    post_norm: bool = False
    positions: np.ndarray | None = None     # learned position embeddings (P, H) and
    embed_norm: tuple | None = None         # the embeddings' LayerNorm (weight, bias)

    @property
    def H(self) -> int:
        return self.embed.shape[1]

    @property
    def vocab(self) -> int:
        return self.embed.shape[0]


def synthetic(vocab: int = 64, H: int = 8, I: int = 16, layers: int = 2, heads: int = 2, seed: int = 0,
              experts: int = 0, top_k: int = 2, shared: int = 1) -> Decoder:
    """A random decoder: weights N(0, 1/fan-in), norms 1, embeddings N(0, 1), an LM head
    of its own (a tied head mostly repeats the input token in a random model).  With
    ``experts`` > 0 every layer's FFN is a MoE layer instead: ``experts`` routed SwiGLU
    experts of intermediate size ``I``, ``shared`` shared ones, a softmax router (Qwen3-MoE's
    gating) choosing ``top_k`` per token, all drawn from the same seed."""
    if H % heads:
        raise ValueError(f"H = {H} must be a multiple of heads = {heads}")
    if experts and not 1 <= top_k <= experts:
        raise ValueError(f"top_k = {top_k} must be in 1..experts = {experts}")
    rng = np.random.default_rng(seed)

    def w(o, i):
        return (rng.normal(size=(o, i)) / math.sqrt(i)).astype(np.float32)

    def layer():
        attn = (np.ones(H, np.float32), w(H, H), w(H, H), w(H, H), w(H, H), np.ones(H, np.float32))
        if not experts:
            return Layer(*attn, w(I, H), w(I, H), w(H, I))
        routed = [Expert(w(I, H), w(I, H), w(H, I)) for _ in range(experts)]
        common = [Expert(w(I, H), w(I, H), w(H, I)) for _ in range(shared)]
        return Layer(*attn, None, None, None, kind="moe",
                     moe=MoeLayer(routed, common, Router(w(experts, H), top_k, "softmax")))

    ls = [layer() for _ in range(layers)]
    return Decoder(rng.normal(size=(vocab, H)).astype(np.float32), ls, np.ones(H, np.float32), w(vocab, H), heads)


def rms_norm(x, g, eps=1e-6):
    x = np.asarray(x, np.float32)
    return (x / np.sqrt(np.mean(x * x) + eps) * g).astype(np.float32)


def layer_norm(x, g, b, eps=1e-12):
    x = np.asarray(x, np.float32)
    d = x - x.mean()
    return (d / np.sqrt(np.mean(d * d) + eps) * g + b).astype(np.float32)


def _norm(x, g, b):
    return rms_norm(x, g) if b is None else layer_norm(x, g, b)


class KvCache:
    """Per layer, the keys and values of every position so far."""

    def __init__(self, layers: int):
        self.k = [[] for _ in range(layers)]
        self.v = [[] for _ in range(layers)]

    def nbytes(self) -> int:
        """Bytes of the cache (float32 keys and values): what attention reads per token."""
        return sum(4 * a.size for ks in (self.k, self.v) for layer in ks for a in layer)


def attention(model: Decoder, l: int, x, cache: KvCache):
    """Causal attention of one new position over the cache (appending its key and value)."""
    ly, Hh = model.layers[l], model.heads
    d = model.H // Hh
    q, k, v = (w @ x + (0 if b is None else b) for w, b in ((ly.wq, ly.bq), (ly.wk, ly.bk), (ly.wv, ly.bv)))
    cache.k[l].append(k.astype(np.float32))
    cache.v[l].append(v.astype(np.float32))
    K, V = np.stack(cache.k[l]), np.stack(cache.v[l])          # (T, H)
    out = np.zeros(model.H, np.float32)
    for h in range(Hh):
        sl = slice(h * d, (h + 1) * d)
        s = K[:, sl] @ q[sl] / math.sqrt(d)
        p = np.exp(s - s.max())
        out[sl] = (p / p.sum()) @ V[:, sl]
    return (ly.wo @ out + (0 if ly.bo is None else ly.bo)).astype(np.float32)


def _rows(f, x, *args):
    return np.stack([f(r, *args) for r in x])


def _causal_attention(q, k, v, heads: int):
    """Every position's attention over the positions up to it, per head (float32)."""
    T, H = q.shape
    d = H // heads
    out = np.zeros((T, H), np.float32)
    future = np.triu(np.ones((T, T), bool), 1)
    for h in range(heads):
        sl = slice(h * d, (h + 1) * d)
        s = np.where(future, -np.inf, q[:, sl] @ k[:, sl].T / math.sqrt(d))
        p = np.exp(s - s.max(axis=1, keepdims=True))
        out[:, sl] = (p / p.sum(axis=1, keepdims=True)) @ v[:, sl]
    return out


def causal_qkv(model: Decoder, tokens) -> list:
    """Per layer, the float ``(q, k, v)`` (each T x H) of every position when ``tokens`` are read
    one position at a time with float FFNs (what :func:`step` with :func:`float_ffn` computes:
    position t's attention sees positions 0..t), all positions at once."""
    tokens = [int(t) for t in tokens]
    x = model.embed[tokens].astype(np.float32)
    if model.positions is not None:
        if len(tokens) > len(model.positions):
            raise ValueError(f"{len(tokens)} positions: the model has {len(model.positions)} position embeddings")
        x = _rows(layer_norm, x + model.positions[:len(tokens)], *model.embed_norm)
    ffn, out = float_ffn(model), []
    for l, ly in enumerate(model.layers):
        h = x if model.post_norm else _rows(rms_norm, x, ly.ln1)
        q, k, v = (h @ w.T + (0 if b is None else b) for w, b in ((ly.wq, ly.bq), (ly.wk, ly.bk), (ly.wv, ly.bv)))
        out.append((q.astype(np.float32), k.astype(np.float32), v.astype(np.float32)))
        a = _causal_attention(q, k, v, model.heads) @ ly.wo.T + (0 if ly.bo is None else ly.bo)
        x = _rows(_norm, x + a, ly.ln1, ly.ln1_b) if model.post_norm else x + a
        y = np.stack([ffn(l, r) for r in (x if model.post_norm else _rows(rms_norm, x, ly.ln2))])
        x = (x + y).astype(np.float32)
        if model.post_norm:
            x = _rows(_norm, x, ly.ln2, ly.ln2_b)
    return out


def float_ffn(model: Decoder):
    """The float64 FFN of each layer (the reference)."""
    wide = [tuple(None if a is None else np.asarray(a, np.float64) for a in (ly.W1, ly.W2, ly.W3, ly.b1, ly.b2))
            for ly in model.layers]          # converted once, not on every call

    def f(l, x):
        ly = model.layers[l]
        if ly.kind == "moe":
            return moe_float(ly.moe, np.asarray(x, np.float64)[None])[0]
        return ffn_float(ly.kind, *wide[l], np.asarray(x, np.float64)[None], ly.activation)[0]
    return f


class IntFfn:
    """The int8 FFN of each layer: x quantised at the layer's static scale, ``run(l,
    x_int8) -> y_int8`` (default: ``numerics.ffn_int``), y dequantised.  A MoE layer is
    routed on the host (``moe.route`` of the float x), x quantised at the layer's one
    input scale, ``run_moe(l, x_int8, indices) -> moe.MoeStages`` (default:
    ``moe.moe_int``) gives every selected and shared expert's int8 output, and the host
    sums them with the gates (``moe.combine``)."""

    def __init__(self, model: Decoder, run=None, run_moe=None):
        if not model.specs:
            raise ValueError("the model is not calibrated: call calibrate(model) first")
        self.model = model
        self.run = run or (lambda l, xq: ffn_int(model.specs[l], xq[None])[0])
        self.run_moe = run_moe or (lambda l, xq, idx: moe_int(model.specs[l], xq, idx))

    def __call__(self, l, x):
        spec = self.model.specs[l]
        if isinstance(spec, MoeSpec):
            indices, gates = route(spec, np.asarray(x, np.float64)[None])
            return combine(spec, self.run_moe(l, quantise_input(spec, x), indices), gates)[0]
        return dequantise_out(self.model, l, self.run(l, quantise_in(self.model, l, x)))


def step_gen(model: Decoder, token: int, cache: KvCache, timing: dict | None = None):
    """One position through every layer, as a generator: it yields ``(layer, x)`` for each
    FFN and takes the FFN's output back (``send``), so that a synchronous caller
    (:func:`drive`) and the RTL's testbench (``sim/tb/decode.py``, which awaits the tray)
    run the same host code.  Returns the logits.  ``timing["host_s"]`` accumulates the
    host's wall seconds (everything but the FFNs), ``timing["segments"]`` gets this
    position's host seconds before each FFN and after the last."""
    t0, segments = time.perf_counter(), []
    if not 0 <= token < len(model.embed):      # (a negative id would index from the end)
        raise ValueError(f"token id {token} is outside the vocabulary (0..{len(model.embed) - 1})")
    x = model.embed[token].copy()
    if model.positions is not None:
        pos = len(cache.k[0])
        if pos >= len(model.positions):
            raise ValueError(f"position {pos} is beyond the model's {len(model.positions)} position embeddings")
        x = layer_norm(x + model.positions[pos], *model.embed_norm)
    for l, ly in enumerate(model.layers):
        if model.post_norm:
            x = f_in = _norm(x + attention(model, l, x, cache), ly.ln1, ly.ln1_b)
        else:
            x = x + attention(model, l, rms_norm(x, ly.ln1), cache)
            f_in = rms_norm(x, ly.ln2)
        segments.append(time.perf_counter() - t0)
        y = yield l, f_in
        t0 = time.perf_counter()
        x = (x + np.asarray(y, np.float32)).astype(np.float32)
        if model.post_norm:
            x = _norm(x, ly.ln2, ly.ln2_b)
    logits = model.head @ (x if model.norm is None else rms_norm(x, model.norm))
    segments.append(time.perf_counter() - t0)
    if timing is not None:
        timing["host_s"] = timing.get("host_s", 0.0) + sum(segments)
        timing.setdefault("segments", []).append(segments)
    return logits


def generate_gen(model: Decoder, prompt, n: int, timing: dict | None = None, cache: KvCache | None = None):
    """Greedy decoding as a generator (see :func:`step_gen`): the prompt one position at a
    time, then ``n`` new tokens; returns the new tokens."""
    cache = cache or KvCache(len(model.layers))
    out = [int(t) for t in prompt]
    logits = None
    for t in out:
        logits = yield from step_gen(model, t, cache, timing)
    new = []
    for _ in range(n):
        new.append(int(np.argmax(logits)))
        logits = yield from step_gen(model, new[-1], cache, timing)
    return new


def drive(gen, ffn):
    """Run a :func:`step_gen`/:func:`generate_gen` generator with ``ffn(layer, x) -> y``."""
    try:
        req = next(gen)
        while True:
            req = gen.send(ffn(*req))
    except StopIteration as e:
        return e.value


def step(model: Decoder, token: int, cache: KvCache, ffn, timing: dict | None = None):
    """One position through every layer with ``ffn``; returns the logits."""
    return drive(step_gen(model, token, cache, timing), ffn)


def generate(model: Decoder, prompt, n: int, ffn, timing: dict | None = None) -> list[int]:
    """Greedy decoding with ``ffn``: the prompt one position at a time, then ``n`` tokens."""
    return drive(generate_gen(model, prompt, n, timing), ffn)


def quantise_in(model: Decoder, l: int, x) -> np.ndarray:
    """Layer ``l``'s FFN input at its static scale: int8, or E4M3 codes for an FP8 spec;
    divided first by the layer's smoothing, if it has one (``calibrate``)."""
    spec, x = model.specs[l], np.asarray(x, np.float64)
    s = model.smooth[l] if model.smooth else None
    return activation_quantiser(spec.dtype)((x if s is None else x / s)[None], spec.x_scale)[0][0]


def dequantise_out(model: Decoder, l: int, y_int8) -> np.ndarray:
    spec = model.specs[l]
    return dequantise(np.asarray(y_int8), spec.out_scale, spec.dtype)


def calibration_tokens(vocab: int) -> np.ndarray:
    """The fixed calibration text: ``CALIBRATION_TOKENS`` ids from ``CALIBRATION_SEED``."""
    return np.random.default_rng(CALIBRATION_SEED).integers(0, vocab, CALIBRATION_TOKENS)


def smoothing(x, W1, alpha: float = SMOOTH_ALPHA) -> np.ndarray:
    """SmoothQuant's per-input-channel factors ``s = max|x_k|^alpha / max|W1[:, k]|^(1 -
    alpha)`` (geometric mean 1; 1 for a channel that is all zero): the host divides the
    FFN's input by ``s`` before quantising it and W1's columns are multiplied by ``s``, so
    the int8 input's few outlier channels (a LayerNorm output's) move into the weights,
    which are quantised per row."""
    xm, wm = np.max(np.abs(np.atleast_2d(x)), axis=0), np.max(np.abs(W1), axis=0)
    ok = (xm > 0) & (wm > 0)
    s = np.ones(len(xm))
    s[ok] = xm[ok] ** alpha / wm[ok] ** (1.0 - alpha)
    return s / np.exp(np.mean(np.log(s)))


def calibrate(model: Decoder, tokens=None, out_scale_per_row: bool = False, dtype: str = "int8",
              method: str = "fit", moe_tables: str = "expert") -> Decoder:
    """Quantise every layer's FFN (``FfnSpec.from_float``) with its scales calibrated on the
    float model's FFN inputs over ``tokens`` (default: the calibration text).
    ``out_scale_per_row``: one output scale per channel (``docs/afd.md``: it helps a trained
    FFN's outlier channels; on random weights it clips more often than it helps, so it is
    off by default).  ``dtype='fp8'``: for an FP8 tile.

    ``method='fit'`` (the default) quantises an int8 'classic' FFN (BERT's GELU ones) with
    its input smoothed (:func:`smoothing`, the factors in ``model.smooth``, applied by
    :func:`quantise_in`) and its activation table fitted (``FfnSpec.from_float(...,
    fit_table=True)``); ``'max'`` as before: every range ``max|v|``, no smoothing.  SwiGLU
    and FP8 FFNs are quantised the same way by both.  ``moe_tables``: a MoE layer's activation
    tables, one per expert or one per layer (``MoeSpec.from_float``'s ``tables``).  Returns the model with ``specs``
    (and ``smooth``) set."""
    if method not in ("fit", "max"):
        raise ValueError(f"method must be 'fit' or 'max', got {method!r}")
    tokens = calibration_tokens(model.vocab) if tokens is None else tokens
    seen = [[] for _ in model.layers]
    ref = float_ffn(model)

    def record(l, x):
        seen[l].append(np.asarray(x, np.float64))
        return ref(l, x)

    cache = KvCache(len(model.layers))
    for t in tokens:
        step(model, int(t), cache, record)
    specs, smooth = [], []
    for ly, xs in zip(model.layers, seen):
        if ly.kind == "moe":            # the experts share one input scale (MoeSpec.from_float)
            specs.append(MoeSpec.from_float(ly.moe, x_calibration=np.stack(xs), dtype=dtype, tables=moe_tables))
            smooth.append(None)
            continue
        x, W1, fit = np.stack(xs), ly.W1, method == "fit" and ly.kind == "classic" and dtype == "int8"
        s = smoothing(x, W1) if fit else None
        if fit:
            x, W1 = x / s, np.asarray(W1, np.float64) * s
        specs.append(FfnSpec.from_float(ly.kind, W1, ly.W2, ly.W3, ly.b1, ly.b2, x_calibration=x,
                                        activation=ly.activation, out_scale_per_row=out_scale_per_row, dtype=dtype,
                                        fit_table=fit))
        smooth.append(s)
    model.specs, model.smooth = specs, smooth
    return model


def with_packaged_ffns(model: Decoder, path, layers=None) -> Decoder:
    """``model`` with its FFNs replaced by a packaged model's trained ones (``weights.load_ffn``
    of each of ``layers``, default 0..len-1; e.g. all-MiniLM-L6-v2's classic GELU FFNs): a
    synthetic decoder with real FFN weights, when no registry package ships a small trained
    decoder.  Its width must match the file's H.  Calibrate it afterwards."""
    layers = list(range(len(model.layers))) if layers is None else list(layers)
    new = []
    for ly, n in zip(model.layers, layers):
        w = load_ffn(path, n)
        if w.H != model.H:
            raise ValueError(f"layer {n} of {path} has H = {w.H}; the decoder has H = {model.H}")
        new.append(replace(ly, **_ffn_fields(w)))
    return replace(model, layers=new, specs=[], smooth=[])


def _ffn_fields(w) -> dict:
    """The :class:`Layer` fields of a loaded FFN (``weights.load_ffn``), its arrays float32."""
    return {k: None if getattr(w, k) is None else getattr(w, k).astype(np.float32)
            for k in ("W1", "W2", "W3", "b1", "b2")} | {"kind": w.kind, "activation": w.activation}


# Fixed texts for a model with a vocabulary (from_bert): what teacher forcing reads, and
# what calibrates the static scales (a different text).
EVAL_TEXT = ("The quick brown fox jumps over the lazy dog. A language model reads one token at a time and "
             "predicts the next one; the attention side keeps a cache of keys and values, and the feed-forward "
             "side is the same for every position. Deterministic hardware runs each layer in a fixed number of "
             "cycles, so the time of every token is known before it is computed.")
CALIBRATION_TEXT = ("Calibration text: the weather today is mild, with clouds in the morning and sun in the "
                    "afternoon. Numbers like 12 and 345 appear, names such as Alice and Bob, and punctuation, too! "
                    "Is it enough to see the range of every layer's activations? We hope so.")


def wordpiece(text: str, vocab) -> list[int]:
    """BERT's uncased WordPiece: lower case, words and punctuation apart, each word split
    greedily into the longest pieces in ``vocab`` (a list of pieces; continuations start
    with ``##``); a word with no split is ``[UNK]``."""
    index = {w: i for i, w in enumerate(vocab)}
    out = []
    for word in re.findall(r"\w+|[^\w\s]", text.lower()):
        pieces, s = [], 0
        while s < len(word):
            e = len(word)
            while e > s and ("##" * (s > 0) + word[s:e]) not in index:
                e -= 1
            if e == s:
                pieces = [index["[UNK]"]]
                break
            pieces.append(index["##" * (s > 0) + word[s:e]])
            s = e
        out += pieces
    return out


def from_bert(path, heads: int | None = None) -> tuple[Decoder, list]:
    """A BERT checkpoint (``.safetensors``, Hugging Face names without or with a ``bert.``
    prefix, e.g. all-MiniLM-L6-v2's) run as a decoder, with its vocabulary (``vocab.txt``
    beside the file): every weight its own (embeddings with positions and their LayerNorm,
    attention with biases, each block's two LayerNorms after the residual add, the GELU
    FFNs), attention causal over the KV cache, the LM head tied to the word embeddings.
    ``heads`` defaults to ``num_attention_heads`` of the ``config.json`` beside the file."""
    path = Path(path)
    f = open_weights(path)
    prefix = "bert." if "bert.embeddings.word_embeddings.weight" in f.names else ""

    def t(name):
        return np.asarray(f.read(prefix + name, name), np.float32)

    if heads is None:
        heads = int(json.loads((f.path.parent / "config.json").read_text())["num_attention_heads"])
    n = 1 + max(int(m.group(1)) for m in map(re.compile(re.escape(prefix) + r"encoder\.layer\.(\d+)\.").match,
                                              f.names) if m)
    layers = []
    for l in range(n):
        a, w = f"encoder.layer.{l}.attention.", load_ffn(path, l)
        layers.append(Layer(ln1=t(a + "output.LayerNorm.weight"), ln1_b=t(a + "output.LayerNorm.bias"),
                            wq=t(a + "self.query.weight"), bq=t(a + "self.query.bias"),
                            wk=t(a + "self.key.weight"), bk=t(a + "self.key.bias"),
                            wv=t(a + "self.value.weight"), bv=t(a + "self.value.bias"),
                            wo=t(a + "output.dense.weight"), bo=t(a + "output.dense.bias"),
                            ln2=t(f"encoder.layer.{l}.output.LayerNorm.weight"),
                            ln2_b=t(f"encoder.layer.{l}.output.LayerNorm.bias"), **_ffn_fields(w)))
    words = t("embeddings.word_embeddings.weight")
    # token type 0 for every position: folded into the position embeddings
    positions = t("embeddings.position_embeddings.weight") + t("embeddings.token_type_embeddings.weight")[0]
    model = Decoder(words, layers, None, words, heads, post_norm=True, positions=positions,
                    embed_norm=(t("embeddings.LayerNorm.weight"), t("embeddings.LayerNorm.bias")))
    vocab = (path.parent / "vocab.txt").read_text(encoding="utf-8").splitlines()
    return model, vocab


def teacher_forced(model: Decoder, tokens) -> dict:
    """The int8-FFN model against the float one over ``tokens`` with teacher forcing (both
    read the same tokens): the share of positions whose top-1 next token agrees, and per
    layer the cosine of the int8 FFN's output against the float FFN on the same input."""
    ref = float_ffn(model)
    cos = [[] for _ in model.layers]

    def both(l, x):
        yi = IntFfn(model)(l, x)
        yf = ref(l, x)
        cos[l].append(float(np.dot(yi, yf) / (np.linalg.norm(yi) * np.linalg.norm(yf) + 1e-30)))
        return yi

    cf, ci = KvCache(len(model.layers)), KvCache(len(model.layers))
    agree = []
    for t in tokens:
        lf = step(model, int(t), cf, ref)
        li = step(model, int(t), ci, both)
        agree.append(int(np.argmax(lf)) == int(np.argmax(li)))
    return {"positions": len(agree), "top1_agreement": float(np.mean(agree)),
            "layer_cosine_min": [float(min(c)) for c in cos], "layer_cosine_mean": [float(np.mean(c)) for c in cos]}
