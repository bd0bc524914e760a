"""RMSNorm in the tile's integer arithmetic: the golden reference the token loop's norm must
reproduce bit for bit (``docs/numerics.md``, "RMSNorm").

The input is an int8 vector ``x`` (``H`` lanes; on the tile a multiple of its 16) at scale ``s_x``; the float
norm is ``y = x s_x / sqrt(mean((x s_x)^2)) * g`` (``eps`` left out: it matters only for a
vector near zero, and the int8 one of zero gives zero).  Every step is an operation the tile has:

1. ``sq = requant(x * x, 1, sq_shift)`` per lane: a ``VOP`` with ``GATE`` whose A and B are both
   ``x`` (an ``MM`` of x with the identity block on each MXM); the squares in units of
   ``2**sq_shift``, int8.
2. ``Q = q_weight * sum(sq)`` over the vector, exact int32, in every lane: ``MM``s of each block
   of ``sq`` with a block of ``q_weight`` (a power of two up to 64, so that the smallest vectors'
   ``Q`` still reaches an octave), accumulated.
3. By octaves of ``Q``, as attention's step 6 divides by ``E``: for ``i`` in ``octaves``,
   ``c_i = requant(Q - 191 * 2**i - 2**(i-1), 1, i) = floor(Q / 2**i) - 191``,
   ``a_i = RSQRT[c_i]`` (non-zero only for ``floor(Q / 2**i)`` in 64..127: exactly one octave),
   ``y_i = requant(a_i * x, m[i], s[i])`` with a multiplier per lane: ``g``, ``sqrt(H)``, the
   scales and ``2**(-i/2)`` folded in.  One ``VOP`` with ``GATE`` and ``TABLE`` per octave and
   block (A = ``Q``, B = ``x``), entry *octave i*, the ``RSQRT`` table.
4. ``y = requant(sum_i y_i, 1, 0)``: ``MM``s of each ``y_i`` with the identity block,
   accumulated, and an identity ``VOP``: int8 at the output scale ``s_y``.

:class:`NormSpec` holds the parameters (:meth:`NormSpec.calibrate` from float calibration
inputs), :func:`rmsnorm_int` runs it, :func:`rmsnorm_float` is the float reference.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from lpu_arch.vxm import TABLE_SIZE

from firmware_gen.golden.quantise import (NumericsError, quantise_scale, range_scale, requantise,
                                          round_half_away_from_zero, sat8)

MANTISSA_OFFSET = 191           # c_i = floor(Q / 2**i) - 191: the octave's 64..127 are codes -127..-64
RSQRT_NUM = 127 * math.sqrt(64.5)     # RSQRT[c] = RSQRT_NUM / sqrt(mantissa + 1/2): 127 at mantissa 64
OUT_HEADROOM = 1.25             # output scale: this times the largest |output| of the calibration over 127


@lru_cache(maxsize=None)
def rsqrt_table():
    """Step 3's table: code ``c`` in -127..-64 (mantissa ``c + 191`` in 64..127) gives
    ``round(RSQRT_NUM / sqrt(mantissa + 1/2))`` (127..90); every other code gives 0."""
    c = np.arange(TABLE_SIZE).astype(np.int8).astype(np.int64)
    mant = c + MANTISSA_OFFSET
    own = (mant >= 64) & (mant <= 127)
    t = sat8(np.where(own, round_half_away_from_zero(RSQRT_NUM / np.sqrt(np.maximum(mant, 0) + 0.5)), 0))
    t.flags.writeable = False
    return t


def octave_codes(Q, i):
    """Step 3's code of octave ``i``: ``floor(Q / 2**i) - 191``, saturated."""
    return requantise(np.asarray(Q) - MANTISSA_OFFSET * (1 << i) - ((1 << i) >> 1), 1, i)


@dataclass(frozen=True)
class NormSpec:
    """One RMSNorm's parameters: the input and output scales, the squares' shift, the octaves of
    ``Q`` and per octave the per-lane requantisation ``(multipliers, shift)`` of step 3."""
    H: int
    x_scale: float
    out_scale: float
    sq_shift: int
    q_weight: int           # the block's entries: Q = q_weight * sum(sq)
    octaves: tuple
    y_rq: tuple             # per octave (in ``octaves``' order): (multipliers (H,), shifts (H,)), per lane

    @classmethod
    def calibrate(cls, x_int, x_scale: float, g, out_headroom: float = OUT_HEADROOM) -> NormSpec:
        """From the int8 inputs ``x_int`` (T, H) of a calibration run at ``x_scale`` and the gain
        ``g`` (H,): the squares' shift from the largest square; the octaves covering the ``Q`` of
        half the smallest to twice the largest sum of squares; the output scale from the float
        norm's largest output."""
        x = np.asarray(x_int, np.int64)
        if x.ndim != 2 or not x.size:
            raise NumericsError(f"x must be T x H, got {x.shape}")
        H, g = x.shape[1], np.asarray(g, np.float64)
        sq_shift = max(0, math.ceil(math.log2(max(int((x * x).max()), 1) / 127)))
        Q = requantise(x * x, 1, sq_shift).astype(np.int64).sum(axis=1)
        q_min = int(Q[Q > 0].min()) if (Q > 0).any() else 1
        q_weight = 1 << int(np.clip(math.ceil(math.log2(256 / q_min)), 0, 6))    # half the smallest Q >= 128
        Q = Q * q_weight
        lo, hi = max(int(Q[Q > 0].min()) // 2, 64) if (Q > 0).any() else 64, max(int(Q.max()) * 2, 128)
        octaves = tuple(range(int(math.floor(math.log2(lo / 64))), int(math.floor(math.log2(hi / 64))) + 1))
        so = out_headroom * range_scale(rmsnorm_float(x * x_scale, g))
        # y_i = a_i x m_i: 1/sqrt(mean((x s_x)^2)) = sqrt(H) / (s_x sqrt(Q 2**sq_shift)),
        # sqrt(Q) ~ sqrt(2**i) RSQRT_NUM / a_i: m_i = g sqrt(H) / (sqrt(2**(sq_shift + i)) RSQRT_NUM so)
        if (g <= 0).any():
            raise NumericsError("the RMSNorm's gains must be positive (a lane's requantisation multiplier is)")
        y_rq = []
        for i in octaves:
            real = g * math.sqrt(H * q_weight) / (math.sqrt(2.0 ** (sq_shift + i)) * RSQRT_NUM * so)
            ms = [quantise_scale(r) for r in real]
            y_rq.append((tuple(m for m, _ in ms), tuple(sh for _, sh in ms)))
        return cls(H, float(x_scale), float(so), sq_shift, q_weight, octaves, tuple(y_rq))


def rmsnorm_float(x, g):
    """Float RMSNorm of the rows of ``x`` (no eps)."""
    x = np.asarray(x, np.float64)
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + 1e-30) * np.asarray(g, np.float64)


@dataclass
class NormStages:
    sq: np.ndarray
    Q: int
    codes: dict                 # octave i -> (c_i, a_i)
    y: np.ndarray


def rmsnorm_int(spec: NormSpec, x) -> NormStages:
    """The int8 RMSNorm of int8 ``x`` (H,): every stage, ``stages.y`` at ``spec.out_scale``."""
    x = np.asarray(x, np.int64)
    if x.shape != (spec.H,):
        raise NumericsError(f"x must be ({spec.H},), got {x.shape}")
    sq = requantise(x * x, 1, spec.sq_shift).astype(np.int64)
    Q = spec.q_weight * int(sq.sum())
    table, total, codes = rsqrt_table(), np.zeros(spec.H, np.int64), {}
    for i, (mult, shift) in zip(spec.octaves, spec.y_rq):
        c = int(octave_codes(Q, i))
        a = int(table[c & 0xFF])
        codes[i] = (c, a)
        total += requantise(a * x, np.asarray(mult, np.int64), np.asarray(shift, np.int64)).astype(np.int64)
    return NormStages(sq, Q, codes, requantise(total, 1, 0).astype(np.int64))
