"""The FFN's numerics: the bit-exact golden model the MXM and VXM reproduce
(``docs/numerics.md``), on the integer arithmetic of :mod:`firmware_gen.golden.quantise`,
the FP8 arithmetic of :mod:`firmware_gen.golden.fp8_quantise` and the activation tables of
:mod:`firmware_gen.golden.tables`.

Two FFN kinds (``H`` model width, ``I`` intermediate width, ``x`` of shape ``(H,)``)::

    swiglu   y = W2 (act(W1 x) * (W3 x))          act is normally SiLU
    classic  y = W2 act(W1 x + b1) + b2

:class:`FfnSpec` is a quantised FFN (:meth:`FfnSpec.from_float` calibrates one from a
float FFN, optionally with a fitted table), :func:`ffn_int` its bit-exact evaluation,
:func:`ffn_float` the float64 reference and :func:`error_report` compares the two.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import numpy as np

from lpu_arch import fp8
from lpu_arch.config import DTYPES
from lpu_arch.vxm import MULT_MAX, SHIFT_MAX

from firmware_gen.golden.fp8_quantise import (FP8_ACC_LIMIT, check_codes, fp8_bias, gate_fp8, matmul_fp8,
                                              quantise_activations_fp8, quantise_scale_fp8, quantise_weights_fp8,
                                              requantise_fp8)
from firmware_gen.golden.quantise import (INT8_MAX, INT32_MAX, NumericsError, add_int32, check_finite, check_int8,
                                          check_int32, check_ints, check_positive, elementwise_multiply,
                                          matmul_int32, quantise_activations, quantise_scale, quantise_weights,
                                          range_scale, range_scale_rows, requantise, round_half_away_from_zero)
from firmware_gen.golden.tables import (FittedTable, activation_function, activation_table, activation_table_fp8,
                                        apply_table, apply_table_fp8, check_table)

KINDS = ("swiglu", "classic")


def _shape(a):
    return "x".join(str(n) for n in np.shape(a))


# ---- the number formats ---------------------------------------------------------------------
def activation_quantiser(dtype):
    """The input quantiser of a number format: :func:`quantise_activations` (int8) or
    :func:`quantise_activations_fp8`."""
    return quantise_activations_fp8 if dtype == "fp8" else quantise_activations


def dequantise(q, scale, dtype="int8"):
    """Real values of int8 values or E4M3 codes ``q`` at ``scale`` (a number or per last axis)."""
    v = fp8.to_float(np.asarray(q).astype(np.uint8)) if dtype == "fp8" else np.asarray(q, np.float64)
    return v * scale


# ---- the FFN ---------------------------------------------------------------------------------
def _out_scale(v, H):
    """``out_scale`` checked: one finite number > 0, or one per output row (H of them)."""
    if np.ndim(v) == 0:
        return check_positive(v, "out_scale")
    a = np.asarray(v, dtype=np.float64)
    if a.shape != (H,):
        raise NumericsError(f"out_scale has shape {a.shape}: it must be one number or one per output row ({H},)")
    if not np.all(np.isfinite(a) & (a > 0)):
        raise NumericsError("every out_scale must be a finite number > 0")
    return a


def _check_shapes(kind, W1, W2, W3, b1, b2):
    """Check the FFN's shapes; returns ``(I, H)``.  Biases may be None for 'classic'."""
    if kind not in KINDS:
        raise NumericsError(f"kind must be 'swiglu' or 'classic', got {kind!r}")
    if np.ndim(W1) != 2:
        raise NumericsError(f"W1 must be a 2-D I x H matrix, got shape {np.shape(W1)}")
    I, H = np.shape(W1)
    if not I or not H:
        raise NumericsError(f"W1 is {I}x{H}: an FFN needs H >= 1 and I >= 1")
    if np.shape(W2) != (H, I):
        raise NumericsError(f"W1 is {I}x{H} but W2 is {_shape(W2)}: W2 must be H x I = {H}x{I}")
    if kind == "swiglu":
        if W3 is None:
            raise NumericsError("kind 'swiglu' needs W3 (I x H)")
        if np.shape(W3) != (I, H):
            raise NumericsError(f"W1 is {I}x{H} but W3 is {_shape(W3)}: W3 must be I x H = {I}x{H}")
        if b1 is not None or b2 is not None:
            raise NumericsError("biases are only used by kind 'classic'; pass b1=None, b2=None")
        return I, H
    if W3 is not None:
        raise NumericsError("W3 is only used by kind 'swiglu'; pass W3=None for 'classic'")
    for b, name, n, dim in ((b1, "b1", I, "I"), (b2, "b2", H, "H")):
        if b is not None and np.shape(b) != (n,):
            raise NumericsError(f"{name} has shape {np.shape(b)} but W1 is {I}x{H}: "
                                f"{name} must have {dim} = {n} entries")
    return I, H


def _rq(real, qscale=quantise_scale):
    """``(multipliers, shifts)`` of ``qscale`` for each real scale of ``real`` (one, or one per row)."""
    pairs = [qscale(r) for r in np.atleast_1d(real)]
    return np.array([p[0] for p in pairs]), np.array([p[1] for p in pairs])


def _check_rq(rq, name, n):
    if rq is None or len(rq) != 2:
        raise NumericsError(f"{name} must be a (multiplier, shift) pair")
    m = check_ints(rq[0], f"{name} multiplier", 1, MULT_MAX, "integers")
    s = check_ints(rq[1], f"{name} shift", 0, SHIFT_MAX, "integers")
    for a in (m, s):
        if a.ndim > 1 or a.size not in (1, n):
            raise NumericsError(f"{name} parameters must be scalars or have {n} entries, got shape {a.shape}")
    return m, s


class FfnShape:
    """``H`` and ``I`` of an FFN from its ``W1`` (I x H)."""

    @property
    def H(self):
        return self.W1.shape[1]

    @property
    def I(self):
        return self.W1.shape[0]


@dataclass
class FfnSpec(FfnShape):
    """A quantised FFN: int8 weights, int32 biases, requant parameters and the table.

    ``b1``, ``b2`` are in the accumulator's units (scale ``x_scale * w_scale[row]``); each
    ``rq*`` is ``(multiplier, shift)``, scalars or one per row; ``table`` is applied to the
    rq1 output.  With ``dtype='fp8'`` (``TileConfig.mxm_dtype``) the weights, the input,
    ``h``, the output and the table's entries are E4M3 codes (uint8), the scales are the real
    values of E4M3's 1.0, the requantisations round to E4M3 (:func:`requantise_fp8`) and a
    bias field is added at ``fp8.BIAS_SHIFT`` (``docs/numerics.md``, "FP8").
    """

    kind: str                          # 'swiglu' or 'classic'
    W1: np.ndarray                     # I x H
    W2: np.ndarray                     # H x I
    table: np.ndarray                  # 256 int8 entries
    rq1: tuple                         # W1 x (+ b1) -> int8
    rq2: tuple                         # W2 . (+ b2) -> int8 output
    W3: np.ndarray | None = None       # I x H, 'swiglu' only
    b1: np.ndarray | None = None       # int32 (I,), 'classic' only
    b2: np.ndarray | None = None       # int32 (H,), 'classic' only
    rq3: tuple | None = None           # W3 x -> int8, 'swiglu' only
    rq_mul: tuple | None = None        # the gate product, 'swiglu' only
    x_scale: float = 1.0               # real value of one LSB of the int8 input
    out_scale: float | np.ndarray = 1.0    # of the int8 output: one, or per output row
    dtype: str = "int8"                # 'int8' or 'fp8'

    def __post_init__(self):
        I, H = _check_shapes(self.kind, self.W1, self.W2, self.W3, self.b1, self.b2)
        if self.dtype not in DTYPES:
            raise NumericsError(f"dtype must be one of {', '.join(DTYPES)}, got {self.dtype!r}")
        weights = check_codes if self.dtype == "fp8" else partial(check_int8, dtype=np.int8)
        self.table = check_table(self.table, self.dtype)
        self.W1, self.W2 = weights(self.W1, "W1"), weights(self.W2, "W2")
        self.rq1, self.rq2 = _check_rq(self.rq1, "rq1", I), _check_rq(self.rq2, "rq2", H)
        if self.kind == "swiglu":
            self.W3 = weights(self.W3, "W3")
            self.rq3, self.rq_mul = _check_rq(self.rq3, "rq3", I), _check_rq(self.rq_mul, "rq_mul", 1)
        else:
            if self.b1 is None or self.b2 is None:
                raise NumericsError("kind 'classic' needs int32 biases b1 and b2")
            self.b1, self.b2 = check_int32(self.b1, "b1").astype(np.int32), check_int32(self.b2, "b2").astype(np.int32)
        self.x_scale, self.out_scale = check_positive(self.x_scale, "x_scale"), _out_scale(self.out_scale, H)

    @classmethod
    def from_float(cls, kind, W1, W2, W3=None, b1=None, b2=None, *, x_calibration, activation="silu",
                   x_scale=None, out_scale_per_row=False, dtype="int8", fit_table=False, table_scales=None):
        """Quantise a float FFN, calibrating every int8 stage on ``x_calibration`` ((B, H) or
        (H,)) as ``docs/numerics.md``, "Building a spec", states: per-row weight scales, the
        per-tensor scale ``max|v| / 127`` of every other int8 tensor over the batch, each
        stage's ``(multiplier, shift)`` the :func:`quantise_scale` of its real ratio.

        ``x_scale``: the input's scale instead of its calibrated one (the experts of a MoE
        layer share one).  ``out_scale_per_row``: one output scale per row of W2 (the
        hardware's ``rq2`` is per row already), so one outlier channel no longer coarsens the
        others.  ``dtype='fp8'``: scales ``max|v| / 448`` and everything rounded to E4M3.
        ``fit_table`` (int8 'classic' only): the intermediate fitted to the activation
        (:func:`_fit_classic`); the integer arithmetic is the same.  ``table_scales``: the
        activation table's input and output scales ``(h1_scale, g_scale)`` instead of the
        calibrated ones, so that FFNs given the same pair share one table (the experts of a
        resident MoE layer, ``MoeSpec.from_float(tables="layer")``).
        """
        xs = np.shape(x_calibration)
        if np.ndim(W1) == 2 and xs and np.shape(W1)[1] != xs[-1] == np.shape(W1)[0]:
            raise NumericsError(f"W1 is {np.shape(W1)[0]}x{np.shape(W1)[1]} but x has H = {xs[-1]} entries: "
                                f"W1 must be I x H = {np.shape(W1)[1]}x{xs[-1]} (it looks transposed)")
        _check_shapes(kind, W1, W2, W3, b1, b2)
        if dtype not in DTYPES:
            raise NumericsError(f"dtype must be one of {', '.join(DTYPES)}, got {dtype!r}")
        if fit_table and (kind != "classic" or dtype != "int8"):
            raise NumericsError(f"fit_table is for int8 'classic' FFNs (their biases carry the table's zero points); "
                                f"got kind {kind!r}, dtype {dtype!r}")
        try:
            with np.errstate(over="raise", invalid="raise"):
                return cls._from_float(kind, W1, W2, W3, b1, b2, x_calibration, activation, x_scale,
                                       out_scale_per_row, dtype, fit_table, table_scales)
        except FloatingPointError as e:
            raise NumericsError(f"the float FFN does not fit float64 ({e}: the weights or x are too large to "
                                f"calibrate; scale them down)") from None

    @classmethod
    def _from_float(cls, kind, W1, W2, W3, b1, b2, x_calibration, activation, x_scale=None, out_scale_per_row=False,
                    dtype="int8", fit_table=False, table_scales=None):
        W1, W2 = check_finite(W1, "W1"), check_finite(W2, "W2")
        I, H = W1.shape
        x = check_finite(x_calibration, "x_calibration")
        if x.shape[-1:] != (H,) or x.ndim > 2:
            raise NumericsError(f"x_calibration has shape {x.shape} but W1 is {I}x{H}: it must be (B, {H}) or ({H},)")
        f = activation_function(activation)
        if dtype == "fp8":
            qmax, qweights, qscale = fp8.MAX, quantise_weights_fp8, quantise_scale_fp8
            make_table, bias_unit = activation_table_fp8, 2.0 ** (fp8.BIAS_SHIFT - fp8.PRODUCT_FRAC)
        else:
            qmax, qweights, qscale = INT8_MAX, quantise_weights, quantise_scale
            make_table, bias_unit = activation_table, 1.0
        scale_of = partial(range_scale, qmax=qmax)
        out_range = partial(range_scale_rows, qmax=qmax) if out_scale_per_row else scale_of
        x_scale = scale_of(x) if x_scale is None else check_positive(x_scale, "x_scale")
        w1q, w1s = qweights(W1)
        w2q, w2s = qweights(W2)
        rq = partial(_rq, qscale=qscale)

        def qbias(b, scale, name):
            q = round_half_away_from_zero(check_finite(b, name) / (scale * bias_unit))
            if np.any(np.abs(q) > INT32_MAX):
                raise NumericsError(f"{name} does not fit int32 at its accumulator scale: "
                                    f"{int(np.max(np.abs(q)))} > {INT32_MAX}")
            return q.astype(np.int32)

        b1 = np.zeros(I) if kind == "classic" and b1 is None else b1
        b2 = np.zeros(H) if kind == "classic" and b2 is None else b2
        if fit_table:
            return _fit_classic(cls, x, W1, W2, check_finite(b1, "b1"), check_finite(b2, "b2"), activation, x_scale,
                                out_scale_per_row, qbias, w1q, w1s)
        h1 = x @ W1.T + (0.0 if b1 is None else b1)
        g = f(h1)
        h1_scale, g_scale = (scale_of(h1), scale_of(g)) if table_scales is None else \
            (check_positive(table_scales[0], "h1_scale"), check_positive(table_scales[1], "g_scale"))
        common = dict(kind=kind, W1=w1q, table=make_table(activation, h1_scale, g_scale), x_scale=x_scale,
                      dtype=dtype, rq1=rq(x_scale * w1s / h1_scale))
        if kind == "swiglu":
            W3 = check_finite(W3, "W3")
            w3q, w3s = qweights(W3)
            h3 = x @ W3.T
            h3_scale = scale_of(h3)
            z = g * h3
            z_scale = scale_of(z)
            y = z @ W2.T
            out_scale = out_range(y)
            return cls(W2=w2q, W3=w3q, rq3=rq(x_scale * w3s / h3_scale),
                       rq_mul=rq(g_scale * h3_scale / z_scale),
                       rq2=rq(z_scale * w2s / out_scale), out_scale=out_scale, **common)
        y = g @ W2.T + b2
        out_scale = out_range(y)
        return cls(W2=w2q, b1=qbias(b1, x_scale * w1s, "b1"), b2=qbias(b2, g_scale * w2s, "b2"),
                   rq2=rq(g_scale * w2s / out_scale), out_scale=out_scale, **common)


# ---- fitted tables (FfnSpec.from_float(fit_table=True)): calibration only ---------------------
FIT_HEADROOM = 1.25     # a channel whose calibrated max|h1| passes 1 / FIT_HEADROOM of the range is stretched
FIT_OUT_HEADROOM = 1.5  # per-row output scales: max|y[:, r]| over the calibration batch times this, over 127
FIT_RANGES = 2.0 ** (-np.arange(10) / 3)      # the table's positive input range: max(h1) times one of these
FIT_NEGATIVE = 2.0 ** (-np.arange(6) / 2)     # its negative range: -min(h1) times one of these


def _fit_classic(cls, x, W1, W2, b1, b2, activation, x_scale, out_scale_per_row, qbias, w1q, w1s):
    """An int8 classic FFN whose intermediate fits the activation (``fit_table``;
    ``docs/numerics.md``, "Fitted tables"): the table's input codes span ``[-L, R]`` and its
    outputs ``[min f, max f]``, the zero points carried by ``b1`` and ``b2`` (exactly); a
    channel beyond ``R / FIT_HEADROOM`` is stretched (its ``rq1`` divided, its column of W2
    multiplied, before W2 is quantised); ``(R, L)`` minimises, on the grid ``FIT_RANGES`` x
    ``FIT_NEGATIVE``, the error put into y over the calibration batch (each position's
    squared error over its ``|y|^2``, after the bias correction that takes the mean error
    out of ``b2``); per-row output scales get ``FIT_OUT_HEADROOM``.
    """
    h1 = np.atleast_2d(x @ W1.T + b1)
    g = activation_function(activation)(h1)
    y = g @ W2.T + b2
    norms = np.sum(y * y, axis=1)
    weight = 1.0 / np.maximum(norms, max(float(norms.max()), 1e-30) * 1e-12)
    top, bottom, peak = max(float(h1.max()), 1e-6), max(float(-h1.min()), 1e-6), h1.max(axis=0)
    best = None
    for R in top * FIT_RANGES:
        stretch = np.maximum(1.0, FIT_HEADROOM * peak / R)
        for L in bottom * FIT_NEGATIVE:
            t = FittedTable.fit(activation, R, L)
            e = (t.emulate(h1, stretch) - g) @ W2.T
            e -= e.mean(axis=0)
            cost = float(np.mean(np.sum(e * e, axis=1) * weight))
            if best is None or cost < best[0]:
                best = (cost, t, stretch)
    _, t, a = best
    w2q, w2s = quantise_weights(W2 * a)
    out_scale = range_scale_rows(y) * FIT_OUT_HEADROOM if out_scale_per_row else range_scale(y)
    acc2 = t.g_scale * w2s
    b2q = qbias(b2, acc2, "b2").astype(np.int64) + t.k * w2q.astype(np.int64).sum(axis=1)
    spec = cls(kind="classic", W1=w1q, W2=w2q, table=t.table, x_scale=x_scale, out_scale=out_scale,
               b1=qbias(b1 + t.z * a * t.delta, x_scale * w1s, "b1"), b2=check_int32(b2q, "b2"),
               rq1=_rq(x_scale * w1s / (a * t.delta)), rq2=_rq(acc2 / out_scale))
    xq, _ = quantise_activations(x, x_scale)
    err = np.mean(np.atleast_2d(dequantise(ffn_int(spec, xq), out_scale)) - y, axis=0)
    spec.b2 = check_int32(b2q - round_half_away_from_zero(err / acc2).astype(np.int64), "b2").astype(np.int32)
    return spec


def _stage(spec, W, v, bias, rq, name, fp8_name=None):
    """``requantise(W v (+ bias), *rq)`` in the spec's number format (``name``, or ``fp8_name``
    on an FP8 spec, names the sum in errors)."""
    if spec.dtype == "fp8":
        acc = matmul_fp8(W, v) + (0 if bias is None else fp8_bias(bias))
        if acc.size and np.abs(acc).max() >= FP8_ACC_LIMIT:
            raise NumericsError(f"{fp8_name or name} leaves the VXM's {fp8.ADDER_BITS}-bit adder: "
                                f"{int(np.abs(acc).max())} >= 2^{fp8.ADDER_BITS - 1}")
        return requantise_fp8(acc, *rq)
    acc = matmul_int32(W, v, name)
    return requantise(acc if bias is None else add_int32(acc, bias), *rq)


def ffn_hidden(spec: FfnSpec, x_int8):
    """The int8 intermediate ``h`` that ``W2`` multiplies (shape (I,) or (B, I)), in the
    order of ``docs/numerics.md``, "Order of operations"; for an FP8 spec the same steps in
    E4M3 (:func:`matmul_fp8`, :func:`requantise_fp8`, :func:`gate_fp8`) on codes."""
    fp = spec.dtype == "fp8"
    name = "x" if fp else "x_int8"
    x = check_codes(x_int8, name) if fp else check_int8(x_int8, name)
    if x.ndim not in (1, 2) or x.shape[-1] != spec.H:
        raise NumericsError(f"{name} has shape {x.shape} but the FFN has H = {spec.H}: "
                            f"it must be ({spec.H},) or (B, {spec.H})")
    table = apply_table_fp8 if fp else apply_table
    if spec.kind == "swiglu":
        g = table(spec.table, _stage(spec, spec.W1, x, None, spec.rq1, "W1 x"))
        u = _stage(spec, spec.W3, x, None, spec.rq3, "W3 x")
        return (gate_fp8 if fp else elementwise_multiply)(g, u, *spec.rq_mul)
    return table(spec.table, _stage(spec, spec.W1, x, spec.b1, spec.rq1, "W1 x", "W1 x + b1"))


def ffn_int(spec: FfnSpec, x_int8):
    """The bit-exact integer FFN on int8 input ``x_int8`` of shape (H,) or (B, H):
    ``requantise(W2 h (+ b2), *rq2)`` with ``h = ffn_hidden(spec, x)``; int8, the shape of x
    (E4M3 codes for an FP8 spec)."""
    return _stage(spec, spec.W2, ffn_hidden(spec, x_int8), spec.b2, spec.rq2, "W2 h")


def ffn_float(kind, W1, W2, W3, b1, b2, x, activation="silu"):
    """Float64 reference FFN (classic biases that are None mean zero); x is (H,) or (B, H)."""
    _check_shapes(kind, W1, W2, W3, b1, b2)
    f, x = activation_function(activation), np.asarray(x, dtype=np.float64)
    W1, W2 = np.asarray(W1, dtype=np.float64), np.asarray(W2, dtype=np.float64)
    if kind == "swiglu":
        return (f(x @ W1.T) * (x @ np.asarray(W3, dtype=np.float64).T)) @ W2.T
    b1 = 0.0 if b1 is None else np.asarray(b1, dtype=np.float64)
    b2 = 0.0 if b2 is None else np.asarray(b2, dtype=np.float64)
    return f(x @ W1.T + b1) @ W2.T + b2


def error_report(y_int8, out_scale, y_float, dtype="int8"):
    """Compare the dequantised result ``y_int8 * out_scale`` (a number, or one per
    output row: the last axis; E4M3 codes' values with ``dtype='fp8'``) with ``y_float``.

    Returns ``{"cosine": cosine similarity over all elements, "max_abs_error": float}``;
    the cosine is 1.0 when both are all zero and 0.0 when exactly one is.
    """
    y_int8 = np.asarray(y_int8)
    yq = dequantise(y_int8, _out_scale(out_scale, y_int8.shape[-1] if y_int8.ndim else 1), dtype).ravel()
    yf = np.asarray(y_float, dtype=np.float64).ravel()
    if yq.shape != yf.shape:
        raise NumericsError(f"y_int8 has {yq.size} elements but y_float has {yf.size}")
    with np.errstate(over="ignore"):
        max_err = float(np.max(np.abs(yq - yf), initial=0.0))
    big = max(float(np.max(np.abs(yq), initial=0.0)), float(np.max(np.abs(yf), initial=0.0)), 1.0)
    yq, yf = yq / big, yf / big               # the cosine is scale-free; this keeps the norms finite
    nq, nf = np.linalg.norm(yq), np.linalg.norm(yf)
    cos = 1.0 if nq == nf == 0 else (0.0 if nq == 0 or nf == 0 else float(yq @ yf / (nq * nf)))
    return {"cosine": cos, "max_abs_error": max_err}
