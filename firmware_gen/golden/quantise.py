"""Integer arithmetic and int8 quantisation of the FFN golden model, and the checks every
numerics module applies to its arguments (``docs/numerics.md``, "Integer primitives": the
hardware's requantisation rounds ties toward +infinity, the compiler's own rounding half
away from zero; a matmul outside int32 is an error, a bias add wraps like the adder).
"""

from __future__ import annotations

import math

import numpy as np

from lpu_arch.errors import LpuError
from lpu_arch.vxm import MULT_MAX, SHIFT_MAX

INT8_MIN, INT8_MAX = -128, 127
INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1


class NumericsError(LpuError, ValueError):
    """A value or parameter is out of range; the message names it and the limit."""


# ---- argument checks ----------------------------------------------------------------------
def check_ints(a, name, lo, hi, what, dtype=np.int64):
    """``a`` as a ``dtype`` array, checking it holds integers in ``lo..hi`` (an int64
    result is always a copy; a narrower one only where the type changes)."""
    a = np.asarray(a)
    if a.dtype.kind not in "iu":
        raise NumericsError(f"{name} must hold integers, got dtype {a.dtype}")
    info = np.iinfo(a.dtype)
    if a.size and (info.min < lo or info.max > hi):       # (a type within the range needs no scan)
        amin, amax = a.min(), a.max()
        if amin < lo or amax > hi:
            raise NumericsError(f"{name} must hold {what} in {lo}..{hi}; found {int(amin if amin < lo else amax)}")
    return a.astype(dtype, copy=dtype is not np.int64)


def check_int8(a, name, dtype=np.int64):
    return check_ints(a, name, INT8_MIN, INT8_MAX, "int8 values", dtype)


def check_int32(a, name):
    return check_ints(a, name, INT32_MIN, INT32_MAX, "int32 values")


def check_positive(v, name):
    """``v`` as a float, checked to be finite and > 0."""
    v = float(v)
    if not (math.isfinite(v) and v > 0):
        raise NumericsError(f"{name} must be a finite number > 0, got {v!r}")
    return v


def check_finite(a, name, matrix=False):
    """``a`` as a float64 array, checked to be finite (and a 2-D matrix with ``matrix``)."""
    a = np.asarray(a, dtype=np.float64)
    if not np.all(np.isfinite(a)):
        raise NumericsError(f"{name} must be finite")
    if matrix and a.ndim != 2:
        raise NumericsError(f"{name} must be a 2-D matrix, got shape {a.shape}")
    return a


def round_half_away_from_zero(x):
    """Round float64 values to the nearest integer, ties away from zero (exact, no ``x + 0.5``)."""
    x = np.asarray(x, dtype=np.float64)
    a = np.abs(x)
    f = np.floor(a)
    return np.copysign(f + (a - f >= 0.5), x)


def sat8(x):
    return np.clip(x, INT8_MIN, INT8_MAX).astype(np.int8)


# ---- hardware primitives -----------------------------------------------------------------
def requantise(acc, multiplier, shift):
    """Scale int32 accumulators to int8, exactly as the hardware requant unit does:
    ``sat8((acc * multiplier + (1 << (shift - 1))) >> shift)`` (no rounding term when
    ``shift == 0``), ties toward +inf.  ``multiplier`` (1..32767) and ``shift`` (0..46) may be
    arrays broadcasting against ``acc`` (per-channel requantisation)."""
    acc = check_int32(acc, "acc")
    m = check_ints(multiplier, "multiplier", 1, MULT_MAX, "integers")
    s = check_ints(shift, "shift", 0, SHIFT_MAX, "integers")
    half = np.where(s > 0, np.left_shift(np.int64(1), np.maximum(s - 1, 0)), 0)
    return sat8((acc * m + half) >> s)


def quantise_scale(real_scale):
    """Fixed-point form ``(multiplier, shift)`` of a positive real scale.

    The shift is the largest in 0..46 for which ``multiplier = round_half_away(real_scale *
    2**shift)`` is at most 32767, so the multiplier keeps 15 significant bits when it can.
    Raises :class:`NumericsError` for a scale not finite and > 0, above 32767 (after
    rounding) or below 2**-47.
    """
    r = check_positive(real_scale, "real_scale")
    if r >= MULT_MAX + 0.5:
        raise NumericsError(f"real_scale {r!r} is too large: the largest representable scale is "
                            f"{MULT_MAX} (multiplier 1..{MULT_MAX}, shift 0..{SHIFT_MAX})")
    shift = next(s for s in range(SHIFT_MAX, -1, -1)
                 if round_half_away_from_zero(math.ldexp(r, s)) <= MULT_MAX)
    m = int(round_half_away_from_zero(math.ldexp(r, shift)))
    if m < 1:
        raise NumericsError(f"real_scale {r!r} is too small: the smallest representable scale is "
                            f"2**-{SHIFT_MAX + 1} (multiplier 1, shift {SHIFT_MAX})")
    return m, shift


def quantise_scales(real_scales):
    """:func:`quantise_scale` of each of ``real_scales`` (per lane): ``(multipliers, shifts)``, int64
    arrays."""
    ms = [quantise_scale(float(r)) for r in np.atleast_1d(real_scales)]
    return np.array([m for m, _ in ms], np.int64), np.array([s for _, s in ms], np.int64)


def add_int32(a, b):
    """Two's-complement int32 addition that wraps like the hardware adder (bias add).

    The compiler keeps biases small, so the wrap never happens for a compiled FFN; it is
    modelled so that the golden model and the hardware agree even if it does.
    """
    return add_wrap(check_int32(a, "a"), check_int32(b, "b"), 32)


def add_wrap(a, b, bits):
    """Two's-complement addition wrapping at ``bits`` (the accumulator's width)."""
    s = np.asarray(a, np.int64) + np.asarray(b, np.int64)
    return ((s + (1 << (bits - 1))) & ((1 << bits) - 1)) - (1 << (bits - 1))


def matmul_int32(w_int8, x_int8, name="W x"):
    """Exact int8 matrix product ``x @ w.T`` (``w`` is N x K, ``x`` is (K,) or (B, K)).

    Returns int64 values that fit int32; raises :class:`NumericsError` naming ``name`` if
    any accumulator leaves int32 (the MXM accumulator is 32 bits).
    """
    x, w = check_int8(x_int8, "x", np.int8), check_int8(w_int8, "weights", np.int8)
    # |product| <= 2^14, so int32 sums are exact below 2^17 terms; a longer one sums in int64.
    wide = np.int32 if x.shape[-1] < 1 << 17 else np.int64
    acc = np.einsum("...k,nk->...n", x, w, dtype=wide).astype(np.int64)
    if acc.size and (acc.min() < INT32_MIN or acc.max() > INT32_MAX):
        bad = acc.min() if acc.min() < INT32_MIN else acc.max()
        raise NumericsError(f"int32 overflow in {name}: an accumulator reaches {int(bad)}, "
                            f"outside {INT32_MIN}..{INT32_MAX}")
    return acc


def elementwise_multiply(a_int8, b_int8, multiplier, shift):
    """Lane-wise int8 x int8 product (exact, int16 range) requantised to int8."""
    return requantise(check_int8(a_int8, "a") * check_int8(b_int8, "b"), multiplier, shift)


# ---- quantisation (compiler side) ---------------------------------------------------------
def range_scale(a, qmax=INT8_MAX):
    """Symmetric scale max|a| / qmax (127; E4M3's 448), or 1.0 for an all-zero array."""
    amax = float(np.max(np.abs(a))) if np.size(a) else 0.0
    return amax / qmax if amax > 0 else 1.0


def range_scale_rows(y, qmax=INT8_MAX):
    """Per column of ``y`` ((B, H) or (H,)): max|y[:, r]| / qmax, 1.0 for an all-zero column."""
    amax = np.max(np.abs(np.atleast_2d(y)), axis=0)
    return np.where(amax > 0, amax / qmax, 1.0)


def quantise_weights(w_float, per_row=True):
    """Symmetric int8 weights: ``w ~= w_int8 * scales[:, None]``.

    ``scale = max|row| / 127`` per row (or ``max|w| / 127`` for the whole tensor, repeated
    for every row); an all-zero row (tensor) gets scale 1.0.  Rounding is half away from
    zero, so values lie in -127..127.  Returns ``(w_int8, scales)`` with ``scales`` a
    float64 array of one entry per row.
    """
    w = check_finite(w_float, "w_float", matrix=True)
    scales = np.array([range_scale(row) for row in w]) if per_row else np.full(w.shape[0], range_scale(w))
    return sat8(round_half_away_from_zero(w / scales[:, None])), scales


def quantise_activations(x_float, scale=None):
    """Symmetric per-tensor int8 activations: ``x ~= x_int8 * scale``.

    ``scale`` defaults to ``max|x| / 127`` (1.0 if ``x`` is all zero).  Rounding is half
    away from zero and the result saturates to -127..127.  Returns ``(x_int8, scale)``.
    """
    x = check_finite(x_float, "x_float")
    scale = range_scale(x) if scale is None else check_positive(scale, "scale")
    q = np.clip(round_half_away_from_zero(x / scale), -INT8_MAX, INT8_MAX)
    return q.astype(np.int8), scale
