"""FP8 (E4M3) arithmetic and quantisation of the FFN golden model; ``lpu_arch/fp8.py``
defines the format and ``docs/numerics.md`` ("FP8 tiles", "FP8 checkpoints") the rules.

The MXM's products and their sums are exact (units of ``2^-18``); the VXM rounds once,
to nearest even, back to E4M3 (:func:`requantise_fp8`).  Weights are quantised per row
(:func:`quantise_weights_fp8`) or, as DeepSeek's FP8 checkpoints store them, per
``FP8_BLOCK`` x ``FP8_BLOCK`` tile (:func:`quantise_weights_fp8_blocks`,
:func:`dequantise_fp8_blocks`).
"""

from __future__ import annotations

import numpy as np

from lpu_arch import fp8
from lpu_arch.vxm import MULT_MAX, SHIFT_MAX

from firmware_gen.golden.quantise import (NumericsError, check_finite, check_int32, check_ints, check_positive,
                                          quantise_scale, range_scale, range_scale_rows)

FP8_ACC_LIMIT = 1 << (fp8.ADDER_BITS - 1)      # the VXM adds in fp8.ADDER_BITS (48) bits


def check_codes(a, name):
    """``a`` as E4M3 codes (uint8): integers 0..255."""
    return check_ints(a, name, 0, 255, "E4M3 codes (bytes)", np.uint8)


def matmul_fp8(w_codes, x_codes):
    """Exact E4M3 matrix product ``x @ w.T`` in units of ``2^-18`` (int64): every product
    is exact and so is their sum, in any order (``lpu_arch.fp8``); NaN operands count 0."""
    return fp8.to_fixed(check_codes(x_codes, "x")) @ fp8.to_fixed(check_codes(w_codes, "weights")).T


def fp8_bias(b):
    """An int32 bias field as the FP8 accumulator sees it: ``b << fp8.BIAS_SHIFT``."""
    return np.left_shift(check_int32(b, "bias"), fp8.BIAS_SHIFT)


def requantise_fp8(acc, multiplier, shift):
    """The VXM's FP8 requantiser: the E4M3 code nearest to ``acc * multiplier / 2**shift``
    units of ``2^-9`` (:func:`lpu_arch.fp8.round_to_code`: one rounding, to nearest even,
    saturating at +-448).  ``acc`` is an accumulator (up to 48 signed bits), ``multiplier``
    1..32767 and ``shift`` 0..46 as in ``quantise.requantise``, broadcasting the same way."""
    acc = check_ints(acc, "acc", -FP8_ACC_LIMIT, FP8_ACC_LIMIT - 1, f"{fp8.ADDER_BITS}-bit accumulators")
    m = check_ints(multiplier, "multiplier", 1, MULT_MAX, "integers")
    s = check_ints(shift, "shift", 0, SHIFT_MAX, "integers")
    return fp8.round_to_code(acc * m, s)


def gate_fp8(a_codes, b_codes, multiplier, shift):
    """Lane-wise exact E4M3 product (units of ``2^-18``) rounded back to E4M3."""
    return requantise_fp8(fp8.product(check_codes(a_codes, "a"), check_codes(b_codes, "b")), multiplier, shift)


def quantise_scale_fp8(real_scale):
    """``(multiplier, shift)`` for an FP8 requantisation whose input's unit is worth
    ``real_scale`` output units: the requantiser's result is in units of ``2^-9`` and its
    input (a sum of E4M3 products) in units of ``2^-18``, so this is
    ``quantise_scale(real_scale * 2**-9)``."""
    return quantise_scale(check_positive(real_scale, "real_scale") * 2.0 ** -fp8.UNIT_FRAC)


def to_codes(x):
    """``fp8.from_float`` with a zero result as +0 (the sums that consume it have one zero)."""
    codes = fp8.from_float(x)
    return np.where(codes == 0x80, 0, codes).astype(np.uint8)


def quantise_weights_fp8(w_float, per_row=True):
    """E4M3 weights ``w ~= value(codes) * scales[:, None]``, ``scale = max|row| / 448`` per
    row (or for the whole tensor).  Returns ``(codes, scales)``."""
    w = check_finite(w_float, "w_float", matrix=True)
    scales = range_scale_rows(w.T, fp8.MAX) if per_row else np.full(w.shape[0], range_scale(w, fp8.MAX))
    return to_codes(w / scales[:, None]), scales


# DeepSeek-V3/R1's FP8 checkpoints: one weight scale per FP8_BLOCK x FP8_BLOCK tile, stored
# as ``<weight>_scale_inv`` (the factor that dequantises: ``w = value(code) * scale``).
FP8_BLOCK = 128


def _blocks(shape, block):
    return tuple(-(-d // block) for d in shape)


def quantise_weights_fp8_blocks(w_float, block=FP8_BLOCK):
    """E4M3 weights with one scale per ``block x block`` tile, as DeepSeek's FP8 checkpoints
    store them: ``scale = max|tile| / 448`` (1.0 for an all-zero tile), ``codes =
    E4M3(w / scale)``.  Returns ``(codes, scales)``, ``scales`` of shape
    ``(ceil(rows / block), ceil(cols / block))``."""
    w = check_finite(w_float, "w_float", matrix=True)
    R, C = _blocks(w.shape, block)
    scales = np.array([[range_scale(w[i * block:(i + 1) * block, j * block:(j + 1) * block], fp8.MAX)
                        for j in range(C)] for i in range(R)]).reshape(R, C)
    return to_codes(w / expand_blocks(scales, w.shape, block)), scales


def expand_blocks(scales, shape, block=FP8_BLOCK):
    """Per-tile ``scales`` (``ceil(rows/block) x ceil(cols/block)``) as one per element of ``shape``."""
    s = np.asarray(scales, np.float64)
    if s.shape != _blocks(shape, block):
        raise NumericsError(f"block scales have shape {s.shape}; a {shape[0]}x{shape[1]} matrix in "
                            f"{block}x{block} blocks has {_blocks(shape, block)}")
    return np.repeat(np.repeat(s, block, axis=0), block, axis=1)[:shape[0], :shape[1]]


def dequantise_fp8_blocks(codes, scales, block=FP8_BLOCK):
    """The real weights of block-scaled E4M3 ``codes``: ``value(code) * scale`` of its tile,
    exact in float64 (a 4-bit significand times a float32 scale).  NaN codes give NaN."""
    c = check_codes(codes, "codes")
    if c.ndim != 2:
        raise NumericsError(f"block-scaled codes must be a 2-D matrix, got shape {c.shape}")
    return fp8.to_float(c) * expand_blocks(scales, c.shape, block)


def quantise_activations_fp8(x_float, scale=None):
    """Per-tensor E4M3 activations ``x ~= value(codes) * scale`` (``scale`` defaults to
    ``max|x| / 448``).  Returns ``(codes, scale)``."""
    x = check_finite(x_float, "x_float")
    scale = range_scale(x, fp8.MAX) if scale is None else check_positive(scale, "scale")
    return to_codes(x / scale), scale
