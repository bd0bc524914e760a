"""The integer model of the token loop on chip (``docs/afd.md``, "The token loop on chip"):
what ``compiler/token_loop.py`` compiles and the tile computes, bit for bit.

A :class:`LoopModel` is a pre-norm decoder: a stack of layers between an embedding and an LM
head, all int8 weights (``lanes``-multiple sizes), each layer an optional attention part and an
MLP, each behind an RMSNorm (``golden/norm.py``) and with a residual:

* ``x = E[id]``, the embedding row of the token;
* attention (:class:`AttnPart`): ``n = rmsnorm(x)``; per head ``h``: ``q = requantise(Wq n)`` (and
  ``k``, ``v``) at the head's scales, the new ``k`` and ``v`` appended to the layer's cache,
  ``y_h`` = ``golden.attention.head_int`` over the cache; ``x = requantise(c x + Wo y)``: the
  residual is an MXM product with the diagonal block ``c I``, summed with ``Wo y`` in the
  accumulator;
* MLP: ``n = rmsnorm(x)``, ``h = relu(requantise(W1 n))`` (the VXM's ``TABLE`` step with a ReLU
  table), ``x = requantise(c x + W2 h)``;
* ``logits = Wh rmsnorm(x)``, exact int32; the next token is their argmax, the lowest id on a tie
  (the SXM's ``ARGMAX``).

A BERT run as a decoder (``host/bert_loop.py``) sets the optional fields: position rows summed
with the embedding and a LayerNorm (``golden/layer_norm.py``), biases, per-lane requantisations
and residual weights, GELU tables by lane, and LayerNorms after the residual sums (``post``,
post-norm) instead of RMSNorms before, with position 0's own (``first``).  A norm before a part
may be either kind (:class:`~firmware_gen.golden.layer_norm.LayerNormSpec` or ``NormSpec``).  The
compiler emits all of it (``compiler/loop_bert.py``, ``compiler/loop_norms.py``).

:func:`step_int` runs one position (the caches in a :class:`Caches`), :func:`generate` the greedy
loop after a prompt (the pure-integer reference).  :class:`FloatModel` is the float model a
:class:`LoopModel` is quantised from (:func:`quantise`, post-training, static scales calibrated
once on a fixed token sequence); :func:`synthetic` draws one from a seed.  Without attention a
token's successor depends on that token only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from firmware_gen.golden.attention import BLOCK, MAX_CONTEXT, HeadSpec, head_float, head_int
from firmware_gen.golden.layer_norm import LayerNormSpec, layernorm_int
from firmware_gen.golden.norm import NormSpec, rmsnorm_float, rmsnorm_int
from firmware_gen.golden.quantise import quantise_scale, range_scale, requantise
from lpu_arch.errors import LpuError

RELU = np.maximum(np.arange(256).astype(np.uint8).astype(np.int8), 0)   # the ReLU table, indexed by a byte
HEAD_DIM = 2 * BLOCK            # an attention head's dimension: the attention step's (2 x 16 lanes)
CALIBRATION_SEED, CALIBRATION_TOKENS = 4242, 48


class LoopModelError(LpuError, ValueError):
    """A loop model that cannot be built or run (the message names the limit)."""


@dataclass
class AttnPart:
    Wq: np.ndarray          # (heads * D, H) int8
    Wk: np.ndarray
    Wv: np.ndarray
    rq: dict                # "q", "k", "v" -> per head (multiplier, shift) into the head's scales
    specs: list             # golden.attention.HeadSpec per head
    Wo: np.ndarray          # (H, heads * D) int8
    c: int                  # the residual's weight beside Wo y (1..127)
    rq_o: tuple             # (multiplier, shift) of the new x
    norm: NormSpec | LayerNormSpec | None = None     # the norm before it
    bias: dict | None = None         # "q", "k", "v" -> int32 (heads * D,) in the products' units (BERT)
    bo: np.ndarray | None = None     # int32 (H,) beside c x + Wo y (BERT)
    post: LayerNormSpec | None = None    # the LayerNorm after the residual (post-norm: BERT)
    first: tuple | None = None       # position 0's (rq_o, post) (BERT: its sums are far larger)

    @property
    def heads(self) -> int:
        return len(self.specs)


@dataclass
class LoopLayer:
    W1: np.ndarray          # (I, H) int8
    W2: np.ndarray          # (H, I) int8
    c: int                  # the residual's weight: c x joins W2 h in the accumulator (1..127)
    rq1: tuple              # (multiplier, shift) of h
    rq2: tuple              # (multiplier, shift) of the new x
    attn: AttnPart | None = None
    norm: NormSpec | LayerNormSpec | None = None     # the norm before the MLP
    b1: np.ndarray | None = None     # int32 (I,) in W1 n's units (BERT)
    b2: np.ndarray | None = None     # int32 (H,) beside c x + W2 h (BERT)
    table: np.ndarray = field(default_factory=lambda: RELU)    # the activation (int8, by byte), or (T, 256) tables
    table_lane: np.ndarray | None = None     # (I,): with T tables, the one each lane looks up
    post: LayerNormSpec | None = None    # the LayerNorm after the residual (post-norm: BERT)
    first: tuple | None = None       # position 0's (rq2, post) (BERT: its sums are far larger)


def _at(part, position: int, rq, post):
    """``(rq, post)``, or position 0's own ones where ``part`` has them."""
    return part.first if position == 0 and part.first is not None else (rq, post)


@dataclass
class LoopModel:
    embed: np.ndarray       # (V, H) int8
    layers: list            # LoopLayer
    head: np.ndarray        # (V, H) int8
    norm: NormSpec | LayerNormSpec | None = None     # the final norm
    positions: np.ndarray | None = None     # (P, H) int8: position p's row joins the embedding (BERT)
    embed_mix: tuple | None = None          # (c_e, c_p, (multiplier, shift)): x = requant(c_e E[id] + c_p P[p])
    embed_norm: LayerNormSpec | None = None     # the LayerNorm of that sum

    @property
    def H(self) -> int:
        return self.embed.shape[1]

    @property
    def I(self) -> int:
        return self.layers[0].W1.shape[0] if self.layers else 0

    @property
    def vocab(self) -> int:
        return self.embed.shape[0]

    @property
    def heads(self) -> int:
        return self.layers[0].attn.heads if self.layers and self.layers[0].attn else 0

    def norms(self) -> list:
        """Every norm, in the order the compiler allocates them: before each layer's parts, the
        final one, after each residual sum (and position 0's), the embedding's."""
        out = [n for l in self.layers for n in ((l.attn.norm if l.attn else None), l.norm) if n is not None]
        out += [self.norm] if self.norm is not None else []
        for l in self.layers:
            for part in (l.attn, l):
                if part is not None and part.post is not None:
                    out += [part.post] + ([part.first[1]] if part.first is not None else [])
        return out + ([self.embed_norm] if self.embed_norm is not None else [])

    def weight_bytes(self) -> int:
        n = self.embed.size + self.head.size
        for l in self.layers:
            n += l.W1.size + l.W2.size
            if l.attn:
                n += l.attn.Wq.size + l.attn.Wk.size + l.attn.Wv.size + l.attn.Wo.size
        return int(n)


@dataclass
class Caches:
    """Every layer's K and V rows of every head so far (int8 (D,) each)."""
    K: dict = field(default_factory=dict)     # (layer, head) -> [rows]
    V: dict = field(default_factory=dict)

    def positions(self) -> int:
        return len(next(iter(self.K.values()), []))


def _mm(W, x):
    return W.astype(np.int64) @ np.asarray(x, np.int64)


def _normed(spec: NormSpec | LayerNormSpec | None, x) -> np.ndarray:
    if spec is None:
        return np.asarray(x, np.int64)
    return (layernorm_int if isinstance(spec, LayerNormSpec) else rmsnorm_int)(spec, x).y


def _biased(acc, b):
    return acc if b is None else acc + np.asarray(b, np.int64)


def embed_int(model: LoopModel, token: int, position: int) -> np.ndarray:
    """The first layer's int8 input: the embedding row, or with positions (BERT) the LayerNorm of
    ``requant(c_e E[id] + c_p P[position])``."""
    e = model.embed[int(token)].astype(np.int64)
    if model.positions is None:
        return e
    if position >= len(model.positions):
        raise LoopModelError(f"position {position}: the model has {len(model.positions)} position rows")
    c_e, c_p, rq = model.embed_mix
    return _normed(model.embed_norm, requantise(c_e * e + c_p * model.positions[position].astype(np.int64), *rq))


def attention_int(a: AttnPart, l: int, x, caches: Caches) -> np.ndarray:
    """One layer's attention part on int8 ``x`` at the next position: the new int8 x."""
    D, ys, n = HEAD_DIM, [], _normed(a.norm, x)
    rq_o, post = _at(a, len(caches.K.get((l, 0), [])), a.rq_o, a.post)
    for h, spec in enumerate(a.specs):
        rows = slice(h * D, (h + 1) * D)
        q, k, v = (requantise(_biased(_mm(W[rows], n), None if a.bias is None else a.bias[n_][rows]),
                              *a.rq[n_][h]).astype(np.int64)
                   for n_, W in (("q", a.Wq), ("k", a.Wk), ("v", a.Wv)))
        caches.K.setdefault((l, h), []).append(k)
        caches.V.setdefault((l, h), []).append(v)
        ys.append(head_int(spec, q, np.array(caches.K[l, h]), np.array(caches.V[l, h])).y.astype(np.int64))
    z = requantise(_biased(a.c * np.asarray(x, np.int64) + _mm(a.Wo, np.concatenate(ys)), a.bo), *rq_o)
    return _normed(post, z)


def mlp_int(layer: LoopLayer, x, position: int = 1) -> np.ndarray:
    """One layer's MLP on int8 ``x`` at ``position``: the new int8 x."""
    x, (rq2, post) = np.asarray(x, np.int64), _at(layer, position, layer.rq2, layer.post)
    pre = requantise(_biased(_mm(layer.W1, _normed(layer.norm, x)), layer.b1), *layer.rq1).astype(np.int64)
    h = (layer.table[pre & 0xFF] if layer.table_lane is None else layer.table[layer.table_lane, pre & 0xFF]).astype(np.int64)
    return _normed(post, requantise(_biased(layer.c * x + _mm(layer.W2, h), layer.b2), *rq2))


def layer_int(layer: LoopLayer, x, l: int = 0, caches: Caches | None = None, position: int = 1) -> np.ndarray:
    if layer.attn is not None:
        x = attention_int(layer.attn, l, x, caches)
    return mlp_int(layer, x, position)


def step_int(model: LoopModel, token: int, caches: Caches | None = None) -> np.ndarray:
    """The int32 logits after token ``token`` at the next position (``caches`` grow by it)."""
    caches = Caches() if caches is None else caches
    if model.heads and caches.positions() >= MAX_CONTEXT:
        raise LoopModelError(f"the context is full: the attention step's cache holds {MAX_CONTEXT} positions")
    position = caches.positions()
    x = embed_int(model, token, position)
    for l, layer in enumerate(model.layers):
        x = layer_int(layer, x, l, caches, position)
    return _mm(model.head, _normed(model.norm, x))


def logits_int(model: LoopModel, token: int) -> np.ndarray:
    """The int32 logits after token ``token`` as the first position."""
    return step_int(model, token)


def next_token(model: LoopModel, token: int) -> int:
    """The argmax of the logits after ``token`` as the first position, the lowest id on a tie."""
    return int(np.argmax(logits_int(model, token)))


def generate(model: LoopModel, prompt, tokens: int) -> list[int]:
    """The pure-integer reference: ``tokens`` greedy tokens after ``prompt`` (every prompt token
    fills the caches; without attention only the last one matters)."""
    caches, prompt = Caches(), [int(t) for t in prompt]
    if not model.heads:
        prompt = prompt[-1:]
    for t in prompt[:-1]:
        step_int(model, t, caches)
    out, t = [], prompt[-1]
    for _ in range(tokens):
        t = int(np.argmax(step_int(model, t, caches)))
        out.append(t)
    return out


# ---- the float model and its quantisation ---------------------------------------------------------
@dataclass
class FloatModel:
    """Float64 weights of a loop model: ``layers`` of dicts ``W1`` (I, H), ``W2`` (H, I), ``g2``
    (the MLP's RMSNorm gain, (H,)) and, with attention, ``Wq``, ``Wk``, ``Wv`` (heads D, H), ``Wo``
    (H, heads D) and ``g1``; ``norm``: the final RMSNorm's gain."""
    embed: np.ndarray
    layers: list
    head: np.ndarray
    heads: int = 0
    norm: np.ndarray | None = None

    def step(self, token: int, caches: dict, trace: dict | None = None) -> np.ndarray:
        """The float logits after ``token`` at the next position; ``trace`` collects each
        layer's activations (for calibration)."""
        x, D = self.embed[int(token)].astype(np.float64), HEAD_DIM
        rec = (lambda k, v: trace.setdefault(k, []).append(np.array(v))) if trace is not None else (lambda k, v: None)
        for l, w in enumerate(self.layers):
            rec((l, "x"), x)
            if self.heads:
                ys, n = [], rmsnorm_float(x, w["g1"])
                rec((l, "n1"), n)
                for h in range(self.heads):
                    rows = slice(h * D, (h + 1) * D)
                    q, k, v = w["Wq"][rows] @ n, w["Wk"][rows] @ n, w["Wv"][rows] @ n
                    caches.setdefault((l, h), ([], []))[0].append(k)
                    caches[l, h][1].append(v)
                    for name, a in (("q", q), ("k", k), ("v", v)):
                        rec((l, name, h), a)
                    ys.append(head_float(q, np.array(caches[l, h][0]), np.array(caches[l, h][1])))
                    rec((l, "y", h), ys[-1])
                x = x + w["Wo"] @ np.concatenate(ys)
                rec((l, "mid"), x)
            n = rmsnorm_float(x, w["g2"])
            rec((l, "n2"), n)
            hid = np.maximum(w["W1"] @ n, 0)
            rec((l, "h"), hid)
            x = x + w["W2"] @ hid
        rec(("out",), x)
        n = rmsnorm_float(x, self.norm)
        rec(("nf",), n)
        return self.head @ n


def _residual(W, in_scale, x_scale):
    """The residual's weight ``c`` and ``W`` quantised into the accumulator's unit ``x_scale / c``:
    ``c`` as large as keeps ``W``'s codes within int8 (``in_scale``: per column block, the scale of
    what ``W`` multiplies)."""
    in_scale = np.asarray(in_scale, np.float64)
    c = int(np.clip(math.floor(127 * x_scale / max(float(np.max(np.abs(W) * in_scale)), 1e-30)), 1, 127))
    unit = x_scale / c
    return c, np.clip(np.round(W * in_scale / unit), -127, 127).astype(np.int8), unit


def _int8(W):
    s = range_scale(W)
    return np.clip(np.round(W / s), -127, 127).astype(np.int8), s


def quantise(fm: FloatModel, seed: int = CALIBRATION_SEED, tokens: int = CALIBRATION_TOKENS) -> LoopModel:
    """The integer model of ``fm``: static per-tensor scales from one float run over a fixed random
    sequence of ``tokens`` tokens (each head's ``HeadSpec.calibrate`` on its q, k, v there)."""
    rng = np.random.default_rng(seed)
    trace, caches = {}, {}
    for t in rng.integers(0, fm.embed.shape[0], tokens):
        fm.step(int(t), caches, trace)
    sc = {k: range_scale(np.array(v)) for k, v in trace.items()}
    embed = np.clip(np.round(fm.embed / sc[0, "x"]), -127, 127).astype(np.int8)

    def norm(key, g):           # the RMSNorm of the residual at trace[key], calibrated on it quantised
        return NormSpec.calibrate(np.clip(np.round(np.array(trace[key]) / sc[key]), -127, 127), sc[key], g)
    layers = []
    for l, w in enumerate(fm.layers):
        sx = sc[l, "x"]
        attn = None
        if fm.heads:
            n1 = norm((l, "x"), w["g1"])
            # (stale_rows: a run finds the cache rows of an earlier run's later positions, or a
            # speculative round's rejected ones, in its last block: the mask must hide any of them)
            specs = [HeadSpec.calibrate(*(np.array(trace[l, n, h]) for n in "qkv"), stale_rows=True)
                     for h in range(fm.heads)]
            ints, rq = {}, {}
            for n in "qkv":
                ints[n], sw = _int8(w[f"W{n}"])
                scale = {"q": "q_scale", "k": "k_scale", "v": "v_scale"}[n]
                rq[n] = [quantise_scale(n1.out_scale * sw / getattr(s, scale)) for s in specs]
            col_scale = np.repeat([s.out_scale for s in specs], HEAD_DIM)
            c, Wo, unit = _residual(w["Wo"], col_scale[None, :], sx)
            sx = sc[l, "mid"]
            attn = AttnPart(ints["q"], ints["k"], ints["v"], rq, specs, Wo, c, quantise_scale(unit / sx), n1)
        n2 = norm((l, "mid") if fm.heads else (l, "x"), w["g2"])
        W1, sw1 = _int8(w["W1"])
        sh = sc[l, "h"]
        c2, W2, unit2 = _residual(w["W2"], sh, sx)
        nxt = sc[l + 1, "x"] if l + 1 < len(fm.layers) else sc["out",]
        layers.append(LoopLayer(W1, W2, c2, quantise_scale(n2.out_scale * sw1 / sh), quantise_scale(unit2 / nxt),
                                attn, n2))
    head, _ = _int8(fm.head)
    return LoopModel(embed, layers, head, norm(("out",), fm.norm))


def synthetic_float(vocab: int = 64, H: int = 32, I: int = 64, layers: int = 2, heads: int = 0,
                    seed: int = 0) -> FloatModel:
    """A random float model whose LM head maps each token's embedding to a random successor's
    (plus noise), so that greedy generation walks long cycles instead of settling on one token;
    the layers' updates are small beside the residual, attention mixing in the context."""
    if heads and heads * HEAD_DIM != H:
        raise LoopModelError(f"H ({H}) must be heads x {HEAD_DIM} (the attention step's head dimension): "
                             f"{heads} head(s) need H = {heads * HEAD_DIM}")
    rng = np.random.default_rng(seed)
    embed = rng.normal(size=(vocab, H))
    succ = rng.permutation(vocab)
    head = np.empty_like(embed)
    head[succ] = embed + 0.5 * rng.normal(size=embed.shape)
    g = lambda rows, cols, gain: gain * rng.normal(size=(rows, cols)) / math.sqrt(cols)
    gain = lambda: rng.uniform(0.8, 1.2, H)          # the RMSNorms' gains
    ws = []
    for _ in range(layers):
        w = {"W1": g(I, H, 1.0), "W2": g(H, I, 0.4), "g2": gain()}
        if heads:
            w.update(Wq=g(H, H, 2.0), Wk=g(H, H, 2.0), Wv=g(H, H, 1.0), Wo=g(H, H, 1.0), g1=gain())
        ws.append(w)
    return FloatModel(embed, ws, head, heads, gain())


def synthetic(vocab: int = 64, H: int = 32, I: int = 64, layers: int = 2, heads: int = 0, seed: int = 0) -> LoopModel:
    """:func:`synthetic_float` quantised (:func:`quantise`)."""
    return quantise(synthetic_float(vocab, H, I, layers, heads, seed))


def agreement(fm: FloatModel, model: LoopModel, positions: int = 48, seed: int = 7) -> float:
    """Teacher-forced top-1 agreement of the integer model with the float one: both fed the same
    random ``positions`` tokens, the fraction of positions whose argmax is the same."""
    rng = np.random.default_rng(seed)
    tokens = rng.integers(0, model.vocab, positions)
    fc, ic, same = {}, Caches(), 0
    for t in tokens:
        same += int(np.argmax(fm.step(int(t), fc)) == np.argmax(step_int(model, int(t), ic)))
    return same / positions
