"""LayerNorm in the tile's integer arithmetic (BERT's, after each residual sum): the golden
reference a post-norm model's norms must reproduce bit for bit (``docs/numerics.md``,
"LayerNorm").

The input is an int8 vector ``z`` (``H`` lanes) with a scale per lane ``s_z`` (a residual sum's
lanes span 100x: one scale would leave most lanes a few codes); the float norm is
``y = (z - mean(z)) / sqrt(mean((z - mean(z))^2)) * g + b`` (``eps`` left out).  The RMSNorm's
steps (``golden/norm.py``) run on the centred vector, every scale per lane:

0. The mean.  ``S = sum_k w_k z_k``, ``w = round(s_z / v)`` (``v`` = the median ``s_z`` / 64, so
   a typical lane's weight is 64, or the widest ``s_z`` / ``MEAN_WEIGHT_MAX`` where lanes differ
   more: one ``MM`` per block, a typical lane's weight then a few): ``MM``s of every block of ``z``
   with blocks whose rows are all ``w``'s; the sum in every lane, exact int32.  ``mu = requant(S,
   mu_rq)``, the mean at its own fine scale ``s_mu`` (the mean is small beside the lanes), int8 in
   every lane (a ``VOP``).  ``d = requant(sign (127 z - e mu), d_rq)``: ``MM``s of ``z`` with the
   diagonal block ``127 sign`` and of ``mu`` with diagonal blocks summing to ``-e sign``, ``e =
   round(127 s_mu / s_z)`` per lane; ``d`` at ``D_HEADROOM`` times ``z``'s scale (``d_scale``: a
   lane at its limit less a mean of the other sign must not saturate).  ``sign`` is -1 where
   the gain is negative, so every later multiplier is positive.  ``n = requant(sign (127 z - e
   mu), n_rq)`` from the same sum: step 3's numerator with each lane's factor (gain, ``d``'s and
   the output's scales) in it, at one scale for every lane (``N_HEADROOM``).
1. ``sq = requant(d * d, sq_rq)`` per lane (a ``VOP`` with ``GATE``): each lane's square in its
   own unit ``U 2**k`` (``U``: a typical lane's largest square is ``127 / SQ_HEADROOM`` of it, or
   the widest lane's over ``SQ_WEIGHT_MAX`` where lanes differ more; ``k >= 0`` the least that keeps
   the lane's largest square, times ``SQ_HEADROOM``, within 127; a square beyond the calibration's
   saturates), so every lane's square keeps its precision (one unit for all would round most
   lanes' squares to 0 or 1 beside a few 40 times wider; all-MiniLM-L6-v2's widest would need
   weights up to ``2**14``, 129 ``MM``s a block, without the cap).
2. ``Q = r sum(w sq)``, ``w = 2**k``: exact, in units of ``U / r``, in every lane (``r`` rounds of
   ``MM``s with blocks whose rows are all ``w``'s, as many as a block's largest ``w`` needs at 127
   an entry; ``r``, a power of two up to 8, lifts the smallest calibration ``Q`` to 128).
3. By octaves of ``Q``, as the RMSNorm's but with a 7-bit mantissa and a 14-bit reciprocal square
   root (a LayerNorm's output is more sensitive to its scale: a residual stream's outliers cancel in
   the next projections): ``c_i = floor(Q / 2**i) - 255`` (``requant(Q - 255 * 2**i - 2**(i-1), 1,
   i)``; the mantissa 128..255 in codes -127..0, exactly one octave's), ``y_i = requant(HI[c_i] n,
   y_rq[i]) + requant(LO[c_i] n, lo_rq[i])``: two ``VOP``s with ``GATE`` and ``TABLE`` per octave
   and block, ``HI + LO / 128`` = ``RSQRT_NUM / sqrt(mantissa + 1/2)``; ``y_rq[i]`` is one for
   every lane, so one entry per octave serves every block.
4. ``y = requant(sum_i y_i + bias, 1, 0)``: the bias in output units (the identity ``VOP``'s
   ``bias_a``).

:meth:`LayerNormSpec.calibrate` sets the parameters from calibration inputs,
:func:`layernorm_int` runs them, :func:`layernorm_float` is the float reference.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from lpu_arch.vxm import SHIFT_MAX, TABLE_SIZE

from firmware_gen.golden.norm import OUT_HEADROOM, NormStages
from firmware_gen.golden.quantise import (NumericsError, quantise_scale, quantise_scales, range_scale,
                                          range_scale_rows, requantise, round_half_away_from_zero, sat8)

MEAN_HEADROOM = 1.25            # s_mu: this times the calibration's largest |mean| over 127
MEAN_WEIGHT_MAX = 127           # the mean's largest lane weight: one MM per block
SQ_WEIGHT_MAX = 128             # the squares' largest weight 2**k: at most two MMs per block
D_HEADROOM = 1.25               # d's scale over z's
N_HEADROOM = 1.25               # n's: this times the calibration's largest |n| is 127
SQ_HEADROOM = 1.0               # a lane's square unit: this times its largest calibration square is 127 (more costs precision)
MANTISSA_OFFSET = 255           # c_i = floor(Q / 2**i) - 255: the octave's 128..255 are codes -127..0
RSQRT_NUM = 127 * math.sqrt(128.5)      # HI + LO / 128 = RSQRT_NUM / sqrt(mantissa + 1/2): 127 at 128


def _rq(real):
    """Per lane ``(multipliers, shifts)`` of positive real scales (one below 2**-46: the smallest)."""
    m, s = quantise_scales(np.maximum(np.atleast_1d(np.asarray(real, np.float64)), 2.0 ** -SHIFT_MAX))
    return tuple(int(v) for v in m), tuple(int(v) for v in s)


def _v(t):
    return np.asarray(t, np.int64)


@dataclass(frozen=True)
class LayerNormSpec:
    """One LayerNorm's parameters (the module's steps 0..4)."""
    H: int
    z_scale: tuple          # per lane
    out_scale: float | tuple    # one, or per lane
    w: tuple                # step 0: the sum's weights per lane
    mu_rq: tuple            # step 0: (multiplier, shift) of the mean
    e: tuple                # step 0: the mean's weight per lane
    signs: tuple            # step 0: -1 where the gain is negative
    d_rq: tuple             # step 0: (multiplier, shift) of d
    n_rq: tuple             # step 0: (multipliers, shifts) per lane of n, the numerator of step 3
    sq_rq: tuple            # step 1: (multipliers, shifts) per lane
    sq_w: tuple             # step 2: the squares' weights per lane (powers of two, 1 for most)
    q_reps: int             # step 2: rounds of the sum's MMs
    octaves: tuple          # step 3
    y_rq: tuple             # step 3: per octave (multiplier, shift) of HI n, one for every lane
    lo_rq: tuple            # step 3: the same of LO n (128 times finer)
    bias: tuple             # step 4: int32 per lane

    @property
    def d_scale(self) -> np.ndarray:
        m, s = self.d_rq
        return np.asarray(self.z_scale) * 2.0 ** s / (127 * m)

    @classmethod
    def calibrate(cls, z_int, z_scale, g, b, out_headroom: float = OUT_HEADROOM, per_lane: bool = True,
                  out_scale=None, margin: float = 1.0) -> LayerNormSpec:
        """From int8 calibration inputs ``z_int`` (T, H) at ``z_scale`` (per lane or one), gain ``g``
        and bias ``b``: the mean's scale from its largest value; ``U`` from the largest square; the
        octaves covering half the smallest to twice the largest ``Q``; the output scale (per lane
        with ``per_lane``) from the float norm's outputs, or ``out_scale``.  ``margin`` widens the
        mean's and the squares' ranges and the octaves by that factor (few calibration inputs)."""
        z = _v(z_int)
        if z.ndim != 2 or not z.size:
            raise NumericsError(f"z must be T x H, got {z.shape}")
        H = z.shape[1]
        sz = np.broadcast_to(np.asarray(z_scale, np.float64), (H,)).copy()
        g, b = np.asarray(g, np.float64), np.asarray(b, np.float64)
        unit = max(float(np.median(sz)) / 64, float(sz.max()) / MEAN_WEIGHT_MAX)
        w = round_half_away_from_zero(sz / unit).astype(np.int64)
        s_mu = max(margin * MEAN_HEADROOM * float(np.abs(z @ w).max()) * unit / H, 1e-9) / 127
        mu_rq = quantise_scale(unit / (H * s_mu))
        e = round_half_away_from_zero(127 * s_mu / sz).astype(np.int64)
        signs = np.where(g < 0, -1, 1)
        d_rq = quantise_scale(1 / (127 * D_HEADROOM))
        proto = cls(H, tuple(sz), 1.0, tuple(w), mu_rq, tuple(e), tuple(int(v) for v in signs), d_rq,
                    ((1,) * H, (0,) * H), ((1,) * H, (0,) * H), (1,) * H, 1, (), (), (), (0,) * H)
        d = np.array([centre(proto, row) for row in z])
        sd = proto.d_scale
        M = margin * np.maximum(((d * sd) ** 2).max(axis=0), 1e-30)     # each lane's largest square
        U = max(float(np.median(M)), float(M.max()) / SQ_WEIGHT_MAX) * SQ_HEADROOM / 127
        k = np.maximum(np.ceil(np.log2(M * SQ_HEADROOM / (127 * U))), 0).astype(np.int64)
        sq_rq, sq_w = _rq(sd * sd / (U * 2.0 ** k)), tuple(int(v) for v in 1 << k)
        Q = np.array([(_v(sq_w) * requantise(row * row, _v(sq_rq[0]), _v(sq_rq[1]))).sum() for row in d], np.int64)
        span = 2 * margin
        q_min = float(Q[Q > 0].min()) / span if (Q > 0).any() else 128.0
        q_reps = 1 << int(np.clip(math.ceil(math.log2(128 / q_min)), 0, 3))
        Q = Q * q_reps
        lo = max(int(Q[Q > 0].min() / span), 128) if (Q > 0).any() else 128
        hi = max(int(Q.max() * span), 256)
        octaves = tuple(range(int(math.floor(math.log2(lo / 128))), int(math.floor(math.log2(hi / 128))) + 1))
        so = np.asarray(output_scale(z * sz, g, b, out_headroom, per_lane) if out_scale is None else out_scale,
                        np.float64)
        # 1/sigma = sqrt(H / (Q U / r)), sqrt(Q) ~ sqrt(2**i) RSQRT_NUM / a_i.  y - b = F d G_i per
        # lane: F (the lane's gain, d's and the output's scales) goes into n, so that each octave's
        # G_i is one for every lane (an entry per octave, not per octave and block)
        F = np.broadcast_to(np.abs(g) * sd / so, (H,))
        phi = N_HEADROOM * max(float((np.abs(d) * F).max()), 1e-30) / 127
        n_rq = _rq(F / (phi * 127 * D_HEADROOM))
        real = [phi * math.sqrt(H * q_reps) / (math.sqrt(U * 2.0 ** i) * RSQRT_NUM) for i in octaves]
        y_rq, lo_rq = tuple(zip(*_rq(real))), tuple(zip(*_rq(np.array(real) / 128)))
        bias = round_half_away_from_zero(b / so).astype(np.int64)
        so = tuple(float(v) for v in np.broadcast_to(so, (H,))) if per_lane else float(so)
        return cls(H, tuple(sz), so, tuple(w), mu_rq, tuple(e), proto.signs, d_rq, n_rq, sq_rq, sq_w, q_reps, octaves,
                   y_rq, lo_rq,
                   tuple(int(v) for v in bias))


@lru_cache(maxsize=None)
def rsqrt_tables():
    """Step 3's tables HI and LO: code ``c`` in -127..0 (mantissa ``c + 255`` in 128..255) gives
    ``HI + LO / 128`` = ``RSQRT_NUM / sqrt(mantissa + 1/2)`` (HI 127..90, LO -64..64); every other
    code 0 in both."""
    c = np.arange(TABLE_SIZE).astype(np.int8).astype(np.int64)
    mant = c + MANTISSA_OFFSET
    own = (mant >= 128) & (mant <= 255)
    exact = np.where(own, RSQRT_NUM / np.sqrt(np.maximum(mant, 0) + 0.5), 0)
    hi = sat8(round_half_away_from_zero(exact))
    lo = sat8(round_half_away_from_zero((exact - hi) * 128))
    for t in (hi, lo):
        t.flags.writeable = False
    return hi, lo


def centred(spec: LayerNormSpec, z) -> np.ndarray:
    """Step 0 before a requantisation: ``sign (127 z - e mu)`` (int32, exact) of int8 ``z`` (H,)."""
    z = _v(z)
    mu = int(requantise(int(z @ _v(spec.w)), *spec.mu_rq))
    return _v(spec.signs) * (127 * z - _v(spec.e) * mu)


def centre(spec: LayerNormSpec, z) -> np.ndarray:
    """Step 0: the centred int8 ``d`` of int8 ``z`` (H,)."""
    return requantise(centred(spec, z), *spec.d_rq).astype(np.int64)


def layernorm_int(spec: LayerNormSpec, z) -> NormStages:
    """The int8 LayerNorm of int8 ``z`` (H,): every stage, ``stages.y`` at ``spec.out_scale``."""
    z = _v(z)
    if z.shape != (spec.H,):
        raise NumericsError(f"z must be ({spec.H},), got {z.shape}")
    acc = centred(spec, z)
    d, n = (requantise(acc, *rq).astype(np.int64) for rq in (spec.d_rq, (_v(spec.n_rq[0]), _v(spec.n_rq[1]))))
    sq = requantise(d * d, _v(spec.sq_rq[0]), _v(spec.sq_rq[1])).astype(np.int64)
    Q = spec.q_reps * int((_v(spec.sq_w) * sq).sum())
    (hi, lo), total, codes = rsqrt_tables(), _v(spec.bias).copy(), {}
    for i, (m, s), (m_lo, s_lo) in zip(spec.octaves, spec.y_rq, spec.lo_rq):
        c = int(requantise(Q - MANTISSA_OFFSET * (1 << i) - ((1 << i) >> 1), 1, i))
        a, b = int(hi[c & 0xFF]), int(lo[c & 0xFF])
        codes[i] = (c, a, b)
        total += requantise(a * n, m, s).astype(np.int64) + requantise(b * n, m_lo, s_lo).astype(np.int64)
    return NormStages(sq, Q, codes, requantise(total, 1, 0).astype(np.int64))


def output_scale(z, g, b, headroom: float = OUT_HEADROOM, per_lane: bool = True):
    """A LayerNorm's output scale for float inputs ``z`` (T, H): ``headroom`` times the largest
    |output| over 127, per lane or one; the normalised part without the bias counts too (step 3's
    ``y_i`` saturate before step 4 adds the bias)."""
    out = layernorm_float(z, g, b)
    both = np.concatenate([out, out - b])
    return headroom * (range_scale_rows(both) if per_lane else range_scale(both))


def layernorm_float(z, g, b):
    """Float LayerNorm of the rows of ``z`` (no eps)."""
    z = np.asarray(z, np.float64)
    d = z - z.mean(axis=-1, keepdims=True)
    return d / np.sqrt(np.mean(d * d, axis=-1, keepdims=True) + 1e-30) * g + b
