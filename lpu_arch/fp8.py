"""FP8 E4M3 (OCP 8-bit floating point, ``float8_e4m3fn``): the number format, its exact
fixed-point products and the accumulator width an exact sum needs, stated once.

A code is ``s eeee mmm`` (sign, 4 exponent bits with bias 7, 3 mantissa bits):

* ``e == 0``: subnormal, ``(-1)^s * m * 2^-9`` (``m == 0``: zero; ``0x80`` is -0);
* ``0 < e``: normal, ``(-1)^s * (8 + m) * 2^(e - 10)``, up to ``0x7E`` = 448;
* ``0x7F`` and ``0xFF`` are NaN; E4M3 has no infinities.

Every finite value is an integer number of units of ``2^-9``, so a product of two is
exact in ``PRODUCT_BITS`` and a sum of ``n`` products in ``acc_bits(n)``, whatever the
order of the additions (``docs/numerics.md``, "FP8").  In the hardware -0 is 0 and a NaN
operand contributes 0 and raises ``hostmap.Status.NAN_OPERAND``.
"""

from __future__ import annotations

import numpy as np

EXP_BITS, MAN_BITS, BIAS = 4, 3, 7
NAN_CODES = (0x7F, 0xFF)
MAX_CODE = 0x7E                       # +448, the largest finite value
MAX = 448.0
UNIT_FRAC = 9                         # a value is an integer number of 2^-9
MAG_BITS = 18                         # |value| / 2^-9 < 2^18
PRODUCT_FRAC = 2 * UNIT_FRAC          # a product is an integer number of 2^-18
PRODUCT_BITS = 2 * MAG_BITS + 1       # signed (37); |a*b| / 2^-18 <= (448 * 2^9)^2 < 2^36


def fields(code):
    """(sign, exponent, mantissa) of a code (ints or an integer array)."""
    code = np.asarray(code, dtype=np.int64)
    return code >> 7 & 1, code >> MAN_BITS & ((1 << EXP_BITS) - 1), code & ((1 << MAN_BITS) - 1)


def significand_and_shift(code):
    """A code's magnitude as ``significand << shift`` in units of ``2^-9``: a 4-bit
    significand (``m`` for a subnormal, ``8 + m`` for a normal) and a shift of ``e - 1``
    (0 for a subnormal).  The hardware's multiplier works on these."""
    _, e, m = fields(code)
    return np.where(e == 0, m, 8 + m), np.where(e == 0, 0, e - 1)


def is_nan(code):
    code = np.asarray(code, dtype=np.int64)
    return (code & 0x7F) == 0x7F


def _fixed(code) -> np.ndarray:
    s, _, _ = fields(code)
    sig, sh = significand_and_shift(code)
    mag = np.where(is_nan(code), 0, sig << sh)
    return np.where(s == 1, -mag, mag).astype(np.int64)


_FIXED = _fixed(np.arange(256))          # every code's value, looked up by to_fixed


def to_fixed(code) -> np.ndarray:
    """Each code's (a byte's) value in units of ``2^-9`` (int64); NaN and -0 give 0."""
    return _FIXED[np.asarray(code, dtype=np.int64) & 0xFF]


def to_float(code) -> np.ndarray:
    """Each code's value as float64 (NaN for the NaN codes, -0.0 for 0x80)."""
    s, _, _ = fields(code)
    v = to_fixed(code).astype(np.float64) * 2.0 ** -UNIT_FRAC
    v = np.where((s == 1) & (v == 0), -0.0, v)
    return np.where(is_nan(code), np.nan, v)


def product(a, b) -> np.ndarray:
    """The exact products of codes ``a`` and ``b`` in units of ``2^-18`` (int64), 0 where
    either is NaN: what one MXM multiplier computes."""
    return to_fixed(a) * to_fixed(b)


def acc_bits(max_terms: int) -> int:
    """Signed bits that hold any sum of up to ``max_terms`` products exactly."""
    if max_terms < 1:
        raise ValueError(f"an accumulation has at least one term, got {max_terms}")
    return PRODUCT_BITS + (max_terms - 1).bit_length()


def planes(bits: int) -> int:
    """Byte planes (streams) a ``bits``-wide accumulator leaves the MXM in."""
    return -(-bits // 8)


_POSITIVE = to_float(np.arange(MAX_CODE + 1))       # codes 0 .. 0x7E, increasing


def from_float(x) -> np.ndarray:
    """The E4M3 codes (uint8) nearest to ``x``: round to nearest, ties to the even code;
    magnitudes beyond 448 saturate to +-448 (OCP's saturating conversion); NaN gives 0x7F;
    the sign of a zero is kept."""
    x = np.asarray(x, dtype=np.float64)
    mag = np.minimum(np.abs(x), MAX)
    hi = np.clip(np.searchsorted(_POSITIVE, np.nan_to_num(mag), side="left"), 0, MAX_CODE)
    lo = np.maximum(hi - 1, 0)
    d_lo, d_hi = mag - _POSITIVE[lo], _POSITIVE[hi] - mag
    pick = np.where(d_lo < d_hi, lo, np.where(d_hi < d_lo, hi, np.where(lo % 2 == 0, lo, hi)))
    code = np.where(np.signbit(x), pick | 0x80, pick)
    return np.where(np.isnan(x), NAN_CODES[0], code).astype(np.uint8)


def round_to_code(prod, shift) -> np.ndarray:
    """The E4M3 code (uint8) nearest to ``prod / 2^shift`` units of ``2^-9`` (the real value
    ``prod * 2^-(shift + 9)``): what the VXM's FP8 requantiser computes from the integer
    ``prod = v * multiplier`` (``|prod| < 2^62``), with one rounding.

    Round to nearest, ties to the even code; beyond 448 saturate to +-448; a result that
    rounds to zero is +0 (``0x00``, whatever the sign of ``prod``: the fixed-point sums that
    consume it have one zero).  The steps, as the hardware takes them: with ``p`` the
    position of ``|prod|``'s leading one, the total right shift is ``T = max(shift, p - 3)``
    (4 significant bits, or the subnormal grid when the value is below 16 units); ``q`` is
    ``|prod| >> T`` rounded to nearest even on the bits shifted out (0..16), and the code's
    low 7 bits are ``((T - shift) << 3) + q``: a carry out of the mantissa steps the exponent.
    """
    prod = np.asarray(prod, dtype=np.int64)
    shift = np.broadcast_to(np.asarray(shift, dtype=np.int64), prod.shape)
    mag = np.abs(prod)
    if mag.size and int(mag.max()) >= 1 << 62:
        raise ValueError(f"round_to_code: |prod| must be below 2^62, got {int(mag.max())}")
    p = np.where(mag > 0, np.floor(np.log2(np.maximum(mag, 1))).astype(np.int64), 0)
    # float log2 can be off by one right at a power of two: correct it exactly
    p = np.where((p > 0) & (mag < np.left_shift(1, p)), p - 1, p)
    p = np.where(mag >= np.left_shift(1, np.minimum(p + 1, 62)), p + 1, p)
    T = np.maximum(shift, p - 3)
    q = mag >> T
    rem = mag - (q << T)
    half = np.where(T > 0, np.left_shift(1, np.maximum(T - 1, 0)), 0)
    up = (T > 0) & ((rem > half) | ((rem == half) & (q & 1 == 1)))
    code = ((T - shift) << 3) + q + up
    code = np.where(q + up == 0, 0, np.minimum(code, MAX_CODE))
    return np.where((prod < 0) & (code != 0), code | 0x80, code).astype(np.uint8)


# The FP8 VXM's adders and its requantisers' input: 48 bits, so that a product with a
# 15-bit multiplier stays below 2^62 (round_to_code's limit).  TileConfig.MAX_ACC_BITS.
ADDER_BITS = 48

# An int32 bias field of the VXM is added to an FP8 accumulator shifted left by this many
# bits (in units of 2^-2 of a product's value): 32 bits then span a 48-bit accumulator.
BIAS_SHIFT = 16
