"""Numerics of a mixture-of-experts layer: routing, the integer golden model of the experts
and the host's combine (``docs/moe.md``: the layer, the gatings, ties).

``(idx, gate) = route(x)`` (host side, float64), ``y = sum_j gate_j FFN_idx_j(x) + sum_s
FFN_s(x)``.  Routing and combining happen on the host; the tray runs, per token, the
``top_k`` selected routed experts and every shared expert on the token's int8 ``x``, each
an ordinary :class:`~firmware_gen.golden.numerics.FfnSpec`.  All experts of a layer share
one static input scale (``MoeSpec.x_scale``), so a token is quantised once; each expert
has its own ``out_scale``.  The gates never reach the tray: :func:`moe_int` (what the tray
must reproduce bit for bit) takes the selected indices only, :func:`combine` applies the
gates in float64.  Ties go to the lowest index; the selected experts are listed in
descending order of selection score, the order of :attr:`MoeStages.routed` too.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from firmware_gen.golden.numerics import (FfnShape, FfnSpec, NumericsError, activation_quantiser, dequantise, error_report,
                       ffn_float, ffn_int)
from firmware_gen.golden.quantise import range_scale
from firmware_gen.golden.tables import activation_function
from firmware_gen.host.weights import Expert, MoeWeights

GATINGS = ("sigmoid-grouped", "softmax")
NORM_EPS = 1e-20           # DeepSeek's denominator epsilon (HF MoEGate), sigmoid-grouped only
GROUP_TOP = 2              # a group's score sums this many of its best biased scores (DeepSeek-V3)


class MoeError(NumericsError):
    """A MoE layer, its routing or its stages are inconsistent; the message names the part."""


def _count(v, name, lo, hi=None):
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < lo or (hi is not None and v > hi):
        raise MoeError(f"{name} must be an integer in {lo}..{hi if hi is not None else 'inf'}, got {v!r}")
    return int(v)


def _matrix(a, name, shape=None):
    a = np.asarray(a, dtype=np.float64)
    if shape is not None and a.shape != shape:
        want = "x".join(map(str, shape)) if len(shape) > 1 else f"({shape[0]},)"
        raise MoeError(f"{name} has shape {a.shape}; it must be {want}")
    if not np.all(np.isfinite(a)):
        raise MoeError(f"{name} must be finite")
    return a


def sigmoid(x):
    """``1 / (1 + e^-x)`` in float64 without overflow and with full relative precision."""
    x = np.asarray(x, dtype=np.float64)
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e))


def softmax(x):
    e = np.exp(x - np.max(x, axis=-1, keepdims=True))
    return e / np.sum(e, axis=-1, keepdims=True)


def _top(scores, k):
    """Indices of the ``k`` largest entries of each row, largest first, ties to the lowest index."""
    return np.argsort(-scores, axis=-1, kind="stable")[..., :k]


# ---- the router ------------------------------------------------------------------------------
@dataclass
class Router:
    """The float router of a MoE layer and its gating (``docs/moe.md``, *Gatings*)."""

    weight: np.ndarray                  # (E, H), model.layers.N.mlp.gate.weight
    top_k: int                          # experts selected per token (num_experts_per_tok), 1..E
    gating: str = "sigmoid-grouped"     # DeepSeek-V3; or 'softmax' (Qwen3-MoE)
    bias: np.ndarray | None = None      # (E,) e_score_correction_bias ('sigmoid-grouped' only)
    n_group: int = 1                    # groups of experts, and how many are kept per token
    topk_group: int = 1                 # (1 and 1: no group limit; 'softmax' needs 1, 1)
    routed_scaling_factor: float = 1.0  # multiplies every gate (DeepSeek-V3: 2.5)
    norm_topk_prob: bool = True         # renormalise the selected weights to sum 1 (before the scaling)

    def __post_init__(self):
        if self.gating not in GATINGS:
            raise MoeError(f"gating must be one of {', '.join(GATINGS)}, got {self.gating!r}")
        if np.ndim(self.weight) != 2 or 0 in np.shape(self.weight):
            raise MoeError(f"router weight has shape {np.shape(self.weight)}; it must be a non-empty E x H matrix")
        self.weight = _matrix(self.weight, "router weight")
        E = self.E
        self.top_k = _count(self.top_k, "top_k", 1, E)
        self.n_group = _count(self.n_group, "n_group", 1, E)
        self.topk_group = _count(self.topk_group, "topk_group", 1, self.n_group)
        if E % self.n_group:
            raise MoeError(f"n_group = {self.n_group} does not divide the {E} experts into equal groups")
        if self.topk_group * (E // self.n_group) < self.top_k:
            raise MoeError(f"topk_group = {self.topk_group} groups of {E // self.n_group} experts hold fewer than "
                           f"top_k = {self.top_k} experts")
        if self.gating == "softmax" and (self.bias is not None or self.n_group != 1):
            raise MoeError("gating 'softmax' (Qwen3-MoE) has no router bias and no groups; "
                           "use 'sigmoid-grouped' for a biased or group-limited router")
        if self.bias is not None:
            self.bias = _matrix(self.bias, "router bias", (E,))
        f = float(self.routed_scaling_factor)
        if not (math.isfinite(f) and f > 0):
            raise MoeError(f"routed_scaling_factor must be a finite number > 0, got {self.routed_scaling_factor!r}")
        self.routed_scaling_factor = f
        if not isinstance(self.norm_topk_prob, (bool, np.bool_)):
            raise MoeError(f"norm_topk_prob must be True or False, got {self.norm_topk_prob!r}")
        self.norm_topk_prob = bool(self.norm_topk_prob)

    @property
    def E(self):
        return self.weight.shape[0]

    @property
    def H(self):
        return self.weight.shape[1]

    def scores(self, x):
        """``(s, c)``: the gate scores (sigmoid or softmax of ``W_r x``) and the selection
        scores (``s + bias``; ``s`` itself without a bias), float64 (T, E).  The logits are
        one matrix-vector product per token, so that a token's routing does not depend on
        the other tokens of the batch (a BLAS matrix product may round a row differently
        with the batch size)."""
        logits = np.array([self.weight @ t for t in _tokens(x, self.H, "x")])
        s = sigmoid(logits) if self.gating == "sigmoid-grouped" else softmax(logits)
        return s, s if self.bias is None else s + self.bias


def _rows(x, H, name, dtype=None):
    """``x`` (T, H) or (H,) as a (T, H) array, its width checked against the layer's ``H``."""
    x = np.asarray(x, dtype=dtype)
    if x.ndim not in (1, 2) or x.shape[-1] != H:
        raise MoeError(f"{name} has shape {x.shape} but the layer has H = {H}: it must be ({H},) or (T, {H})")
    return np.atleast_2d(x)


def _tokens(x, H, name):
    return _matrix(_rows(x, H, name, np.float64), name)


def route(router, x_float):
    """Select the experts of each token and their gate weights (host side, float64).

    ``router`` is a :class:`Router` or anything with one as ``.router`` (:class:`MoeSpec`,
    :class:`MoeLayer`); ``x_float`` is (T, H) or (H,) (one token).  Returns ``(indices,
    gates)``: int64 and float64 arrays of shape (T, top_k), each row's experts distinct, in
    descending order of selection score, ties to the lowest expert index.
    """
    r = getattr(router, "router", router)
    s, c = r.scores(x_float)
    T, E = s.shape
    if r.n_group > 1:
        groups = c.reshape(T, r.n_group, E // r.n_group)
        group_score = np.sum(-np.sort(-groups, axis=-1)[..., :GROUP_TOP], axis=-1)
        keep = np.zeros((T, r.n_group), dtype=bool)
        np.put_along_axis(keep, _top(group_score, r.topk_group), True, axis=-1)
        c = np.where(np.repeat(keep, E // r.n_group, axis=-1), c, -np.inf)
    indices = _top(c, r.top_k)
    gates = np.take_along_axis(s, indices, axis=-1)
    if r.gating == "softmax" and r.norm_topk_prob:                  # Qwen3MoeSparseMoeBlock
        gates = gates / np.sum(gates, axis=-1, keepdims=True)
    elif r.norm_topk_prob and r.top_k > 1:                           # DeepSeek MoEGate
        gates = gates / (np.sum(gates, axis=-1, keepdims=True) + NORM_EPS)
    return indices.astype(np.int64), gates * r.routed_scaling_factor


# ---- the float layer and its reference --------------------------------------------------------
def _experts(experts, what):
    out = []
    for i, e in enumerate(experts):
        if not (isinstance(e, (tuple, list)) and len(e) == 3):
            raise MoeError(f"{what} {i} must be an Expert(W1, W3, W2) (gate, up, down), got {type(e).__name__}")
        out.append(Expert(*(np.asarray(a, dtype=np.float64) for a in e)))
    return out


@dataclass
class MoeLayer:
    """A float MoE layer: routed ``experts`` and ``shared`` ones, each an
    :class:`~firmware_gen.host.weights.Expert` ``(W1, W3, W2)`` (gate, up, down), and the
    :class:`Router`.  The shapes are checked when it is quantised (:meth:`MoeSpec.from_float`)
    or run (:func:`moe_float`)."""

    experts: list
    shared: list
    router: Router

    def __post_init__(self):
        self.experts, self.shared = _experts(self.experts, "expert"), _experts(self.shared, "shared expert")
        if len(self.experts) != self.router.E:
            raise MoeError(f"the router has {self.router.E} rows but the layer has {len(self.experts)} routed experts")

    @classmethod
    def from_weights(cls, w: MoeWeights, **router):
        """The layer of :func:`~firmware_gen.host.weights.load_moe`'s result.  Router keywords
        come from ``router``, else ``w.gating`` (the config), else the defaults, with
        ``gating`` 'sigmoid-grouped' when the file has a router bias and 'softmax' otherwise;
        ``top_k`` has no default."""
        kw = {"gating": "sigmoid-grouped" if w.router_bias is not None else "softmax"} | w.gating | router
        if "top_k" not in kw:
            raise MoeError("top_k (experts per token) is not known: pass top_k= or the checkpoint's config.json")
        return cls(w.experts, w.shared, Router(w.router, bias=w.router_bias, **kw))


def moe_float(layer: MoeLayer, x_float):
    """The float64 reference of the whole layer: float routing (:func:`route`) and float
    experts (``numerics.ffn_float``, SiLU); ``x_float`` (T, H) or (H,), returns (T, H)."""
    x = _tokens(x_float, layer.router.H, "x_float")
    indices, gates = route(layer.router, x)
    y = np.zeros_like(x)
    for e in np.unique(indices):
        t, j = np.nonzero(indices == e)
        W1, W3, W2 = layer.experts[e]
        y[t] += gates[t, j][:, None] * ffn_float("swiglu", W1, W2, W3, None, None, x[t])
    for W1, W3, W2 in layer.shared:
        y += ffn_float("swiglu", W1, W2, W3, None, None, x)
    return y


# ---- the quantised layer --------------------------------------------------------------------
@dataclass
class MoeSpec(FfnShape):
    """A quantised MoE layer: the routed experts (one :class:`FfnSpec` each, indexed like the
    router's rows), the shared experts, the float :class:`Router` (host side) and the one
    input scale ``x_scale`` of every expert (default: the experts').

    Every expert is a SwiGLU of the same ``H``.  The routed experts also share one ``I``:
    which of them runs is data, and the tray's schedule reserves the same slot for any of
    them (brief section 5: the routing may change only the addresses read).  Shared experts
    run for every token, so each may have its own ``I`` (DeepSeek fuses its
    ``n_shared_experts`` into one FFN of ``n_shared_experts * moe_intermediate_size``).
    """

    experts: list
    shared: list
    router: Router
    x_scale: float | None = None

    def __post_init__(self):
        self.experts, self.shared = list(self.experts), list(self.shared)
        if not self.experts:
            raise MoeError("a MoE layer needs at least one routed expert")
        every = [("expert", i, s) for i, s in enumerate(self.experts)] + \
                [("shared expert", i, s) for i, s in enumerate(self.shared)]
        for what, i, s in every:
            if not isinstance(s, FfnSpec) or s.kind != "swiglu":
                raise MoeError(f"{what} {i} must be a SwiGLU FfnSpec, got "
                               f"{getattr(s, 'kind', type(s).__name__)!r}")
        if len(self.experts) != self.router.E:
            raise MoeError(f"the router has {self.router.E} rows but the layer has {len(self.experts)} routed experts")
        H, I = self.H, self.I
        if self.router.H != H:
            raise MoeError(f"the router is {self.router.E}x{self.router.H} but the experts have H = {H}")
        for what, i, s in every:
            if s.H != H:
                raise MoeError(f"{what} {i} has H = {s.H} but expert 0 has H = {H}: every expert takes the same x")
        for i, s in enumerate(self.experts):
            if s.I != I:
                raise MoeError(f"expert {i} has I = {s.I} but expert 0 has I = {I}: the routed experts must all "
                               f"be the same size (the tray reserves one slot for any of them)")
        for what, i, s in every:
            if s.dtype != self.experts[0].dtype:
                raise MoeError(f"{what} {i} is quantised to {s.dtype} but expert 0 to {self.experts[0].dtype}: "
                               "a layer runs on tiles of one number format")
        self.x_scale = self.experts[0].x_scale if self.x_scale is None else float(self.x_scale)
        for what, i, s in every:
            if s.x_scale != self.x_scale:
                raise MoeError(f"{what} {i} has x_scale {s.x_scale!r} but the layer's is {self.x_scale!r}: all "
                               "experts share one input scale (one int8 x per token)")

    @property
    def E(self):
        return len(self.experts)

    @property
    def dtype(self):
        """The number format of every expert (``FfnSpec.dtype``)."""
        return self.experts[0].dtype

    @property
    def W1(self):
        """Routed expert 0's ``W1``, whose ``I x H`` every routed expert has (``H``, ``I``)."""
        return self.experts[0].W1

    @property
    def top_k(self):
        return self.router.top_k

    @classmethod
    def from_float(cls, layer: MoeLayer, *, x_calibration, calibrate="batch", dtype="int8", tables="expert"):
        """Quantise every expert of ``layer`` with ``FfnSpec.from_float`` (SiLU), all with
        the layer's input scale ``max|x| / 127`` over ``x_calibration`` ((B, H) or (H,))
        (``dtype='fp8'``: to E4M3, the input scale ``max|x| / 448``).

        ``calibrate`` chooses the batch that sets each routed expert's other scales:
        ``'batch'`` the whole calibration batch (every token, routed to the expert or not:
        the conservative choice); ``'routed'`` the tokens :func:`route` sends to the expert,
        the whole batch for an expert that gets none.  Shared experts see every token.

        ``tables``: ``'expert'`` gives each expert the activation table of its own calibrated
        ranges; ``'layer'`` gives every expert of the layer, shared ones included, one table:
        its input and output ranges the largest of the experts' (``FfnSpec.from_float``'s
        ``table_scales``), so a tile holding many experts of many layers needs one table per
        layer (``resident_tray``).
        """
        if calibrate not in ("batch", "routed"):
            raise MoeError(f"calibrate must be 'batch' or 'routed', got {calibrate!r}")
        if tables not in ("expert", "layer"):
            raise MoeError(f"tables must be 'expert' or 'layer', got {tables!r}")
        x = _tokens(x_calibration, layer.router.H, "x_calibration")
        _, x_scale = activation_quantiser(dtype)(x)
        rows = [x] * len(layer.experts)
        if calibrate == "routed":
            indices, _ = route(layer.router, x)
            rows = [x[np.any(indices == e, axis=-1)] for e in range(len(layer.experts))]
            rows = [r if len(r) else x for r in rows]

        scales = None
        if tables == "layer":
            silu = activation_function("silu")
            h1 = [np.asarray(xc, np.float64) @ np.asarray(e.W1, np.float64).T
                  for e, xc in zip([*layer.experts, *layer.shared], [*rows, *[x] * len(layer.shared)])]
            qmax = 448.0 if dtype == "fp8" else 127.0
            scales = (max(range_scale(h, qmax) for h in h1), max(range_scale(silu(h), qmax) for h in h1))

        def spec(e, xc):
            return FfnSpec.from_float("swiglu", e.W1, e.W2, e.W3, x_calibration=xc, x_scale=x_scale, dtype=dtype,
                                      table_scales=scales)

        return cls([spec(e, r) for e, r in zip(layer.experts, rows)], [spec(e, x) for e in layer.shared],
                   layer.router, x_scale)


def quantise_input(spec: MoeSpec, x_float):
    """The int8 ``x`` the tray receives: ``quantise_activations`` at the layer's ``x_scale``
    (half away from zero, -127..127), or E4M3 codes for an FP8 layer; (T, H) for (T, H) or
    (H,) input."""
    return activation_quantiser(spec.dtype)(_tokens(x_float, spec.H, "x_float"), spec.x_scale)[0]


@dataclass
class MoeStages:
    """The integer golden model's stages for T tokens."""

    x: np.ndarray            # int8 (T, H): the input every expert of a token receives
    indices: np.ndarray      # int64 (T, top_k): the routed experts of each token (from the host)
    routed: np.ndarray       # int8 (T, top_k, H): routed[t, j] = ffn_int(experts[indices[t, j]], x[t])
    shared: np.ndarray       # int8 (T, S, H): shared[t, s] = ffn_int(shared[s], x[t])


def moe_int(spec: MoeSpec, x_int8, indices) -> MoeStages:
    """Every int8 output the tray must produce bit for bit: each selected routed expert and
    each shared expert (``numerics.ffn_int`` of its spec) on the token's int8 ``x``.

    ``x_int8`` is (T, H) or (H,); ``indices`` (T, top_k) or (top_k,) distinct experts per
    token in 0..E-1 (the first output of :func:`route`); no gate enters here.
    """
    x = _rows(x_int8, spec.H, "x_int8")
    idx = np.atleast_2d(np.asarray(indices))
    T = x.shape[0]
    if idx.dtype.kind not in "iu" or idx.shape != (T, spec.top_k):
        raise MoeError(f"indices must be integers of shape ({T}, {spec.top_k}) (T tokens x top_k), "
                       f"got {idx.dtype} {idx.shape}")
    if idx.size and (idx.min() < 0 or idx.max() >= spec.E):
        raise MoeError(f"indices must name experts 0..{spec.E - 1}; found {int(idx.min() if idx.min() < 0 else idx.max())}")
    dup = np.any(np.diff(np.sort(idx, axis=-1)) == 0, axis=-1)      # indices are 0..E-1: no overflow
    if dup.any():
        t = int(np.argmax(dup))
        raise MoeError(f"token {t} selects an expert twice ({idx[t].tolist()}); a token's experts are distinct")
    byte = np.uint8 if spec.dtype == "fp8" else np.int8          # int8 values or E4M3 codes
    routed = np.zeros((T, spec.top_k, spec.H), dtype=byte)
    for e in np.unique(idx):
        t, j = np.nonzero(idx == e)
        routed[t, j] = ffn_int(spec.experts[e], x[t])          # rows are independent: one batch per expert
    shared = np.zeros((T, len(spec.shared), spec.H), dtype=byte)
    for s, sp in enumerate(spec.shared):
        shared[:, s] = ffn_int(sp, x)
    return MoeStages(x.astype(byte), idx.astype(np.int64), routed, shared)


def combine(spec: MoeSpec, stages: MoeStages, gates):
    """The host's sum, float64 (T, H): ``y = sum_j gates[:, j] * out_scale[indices[:, j]] *
    routed[:, j] + sum_s out_scale_s * shared[:, s]``, added in that order (slot 0 first,
    then the shared experts in order) so that the result is reproducible bit for bit."""
    g = _matrix(gates, "gates", stages.indices.shape)
    out_scale = np.array([s.out_scale for s in spec.experts])
    y = np.zeros(stages.x.shape, dtype=np.float64)
    for j in range(stages.indices.shape[1]):
        y += (g[:, j] * out_scale[stages.indices[:, j]])[:, None] * dequantise(stages.routed[:, j], 1.0, spec.dtype)
    for s, sp in enumerate(spec.shared):
        y += sp.out_scale * dequantise(stages.shared[:, s], 1.0, spec.dtype)
    return y


def moe_run(spec: MoeSpec, x_float):
    """The quantised layer end to end on float tokens: route, quantise, :func:`moe_int`,
    :func:`combine`.  Returns ``(y, stages, gates)``."""
    indices, gates = route(spec, x_float)
    stages = moe_int(spec, quantise_input(spec, x_float), indices)
    return combine(spec, stages, gates), stages, gates


def moe_error_report(spec: MoeSpec, layer: MoeLayer, x_float):
    """``numerics.error_report`` of the quantised layer (:func:`moe_run`) against
    :func:`moe_float`: ``{"cosine", "max_abs_error"}``."""
    return error_report(moe_run(spec, x_float)[0], 1.0, moe_float(layer, x_float))


# ---- a random layer for tests and benches -----------------------------------------------------
@dataclass
class MoeExample:
    """A seeded layer: its quantised ``spec``, the float ``layer``, the tokens ``x`` (float,
    also the calibration batch) and ``x_int8`` (``quantise_input(spec, x)``)."""
    spec: MoeSpec
    layer: MoeLayer
    x: np.ndarray
    x_int8: np.ndarray


def example_moe(E: int = 8, top_k: int = 2, shared: int = 1, H: int = 64, I: int = 32, batch: int = 4,
                seed: int = 0, gating: str = "sigmoid-grouped", n_group: int | None = None,
                topk_group: int | None = None, routed_scaling_factor: float | None = None,
                dtype: str = "int8") -> MoeExample:
    """Gaussian experts (std 1/sqrt(fan-in), like ``compile_ffn.example_ffn``), a Gaussian
    router (std 1/sqrt(H): logits of unit variance), tokens N(0, 1) and, for
    'sigmoid-grouped', a bias of std 0.1; DeepSeek-like defaults there: 4 groups (if they
    divide E and hold top_k experts in 2 groups, else 1), 2 kept, scaling 2.5.  ``dtype``:
    the experts' number format (``MoeSpec.from_float``)."""
    for name, v in (("E", E), ("top_k", top_k), ("H", H), ("I", I), ("batch", batch)):
        _count(v, name, 1)
    _count(shared, "shared", 0)
    rng = np.random.default_rng(seed)

    def expert():
        return Expert(rng.normal(size=(I, H)) / math.sqrt(H), rng.normal(size=(I, H)) / math.sqrt(H),
                      rng.normal(size=(H, I)) / math.sqrt(I))

    routed, common = [expert() for _ in range(E)], [expert() for _ in range(shared)]
    weight = rng.normal(size=(E, H)) / math.sqrt(H)
    if gating == "sigmoid-grouped":
        if n_group is None:
            n_group = 4 if E % 4 == 0 and 2 * (E // 4) >= top_k else 1
        topk_group = topk_group if topk_group is not None else min(2, n_group)
        kw = dict(bias=rng.normal(size=E) * 0.1, n_group=n_group, topk_group=topk_group,
                  routed_scaling_factor=2.5 if routed_scaling_factor is None else routed_scaling_factor)
    else:
        kw = dict(n_group=n_group or 1, topk_group=topk_group or 1,
                  routed_scaling_factor=routed_scaling_factor or 1.0)
    layer = MoeLayer(routed, common, Router(weight, top_k, gating, **kw))
    x = rng.normal(size=(batch, H))
    spec = MoeSpec.from_float(layer, x_calibration=x, dtype=dtype)
    return MoeExample(spec, layer, x, quantise_input(spec, x))
