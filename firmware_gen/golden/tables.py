"""Activation tables: 256 entries indexed by the input byte, as the VXM looks them up
(``docs/numerics.md``, "Activation tables").

Tables for int8 (:func:`activation_table`), FP8 (:func:`activation_table_fp8`) and fitted
int8 ones with zero points on input and output (:class:`FittedTable`).  GELU is the tanh
approximation ``0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x**3)))``;
SiLU is ``x * sigmoid(x)``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from lpu_arch import fp8
from lpu_arch.vxm import TABLE_SIZE

from firmware_gen.golden.fp8_quantise import check_codes, to_codes
from firmware_gen.golden.quantise import (INT8_MAX, INT8_MIN, NumericsError, check_int8, check_positive,
                                          round_half_away_from_zero, sat8)

_TABLE_X = np.arange(TABLE_SIZE).astype(np.int8).astype(np.float64)   # table entry i: byte i read as int8


ACTIVATIONS = {
    "silu": lambda x: x * (0.5 * (1.0 + np.tanh(0.5 * x))),     # overflow-free form of x / (1 + e^-x)
    "gelu": lambda x: 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3))),
    "relu": lambda x: np.maximum(x, 0.0),
    "identity": lambda x: x,
}
"""Float64 activation functions by name (GELU is the tanh approximation)."""


def activation_function(name):
    """The float64 function of activation ``name`` (``ACTIVATIONS``)."""
    if name not in ACTIVATIONS:
        raise NumericsError(f"unknown activation {name!r}; choose one of {', '.join(ACTIVATIONS)}")
    return ACTIVATIONS[name]


def activation_table(name, in_scale, out_scale):
    """256-entry int8 lookup table for activation ``name``, indexed by the input byte: entry
    ``i`` is ``sat8(round_half_away(f(v * in_scale) / out_scale))``, ``v = i if i < 128 else
    i - 256``."""
    f = activation_function(name)
    in_scale, out_scale = check_positive(in_scale, "in_scale"), check_positive(out_scale, "out_scale")
    return sat8(round_half_away_from_zero(f(_TABLE_X * in_scale) / out_scale))


def check_table(table, dtype="int8"):
    """Validate an activation table (256 integers in -128..127; E4M3 codes, bytes, with
    ``dtype='fp8'``); returns it as int8 (uint8 codes)."""
    t = np.asarray(table)
    if t.ndim != 1 or t.size != TABLE_SIZE:
        raise NumericsError(f"activation table has {t.size} entries; it must have {TABLE_SIZE}")
    return check_codes(t, "activation table") if dtype == "fp8" else check_int8(t, "activation table").astype(np.int8)


def apply_table(table, x_int8):
    """Look up every int8 value of ``x_int8`` in ``table`` (indexed by the unsigned byte)."""
    return check_table(table)[check_int8(x_int8, "x") & 0xFF]


def activation_table_fp8(name, in_scale, out_scale):
    """256-entry E4M3 table: entry ``c`` is the code nearest to ``f(value(c) * in_scale) /
    out_scale`` (``fp8.from_float``: ties to even, saturating); a zero result is ``+0`` and
    the NaN codes map to NaN."""
    f = activation_function(name)
    in_scale, out_scale = check_positive(in_scale, "in_scale"), check_positive(out_scale, "out_scale")
    with np.errstate(invalid="ignore"):
        return to_codes(f(fp8.to_float(np.arange(TABLE_SIZE)) * in_scale) / out_scale)


def apply_table_fp8(table, codes):
    return check_codes(table, "activation table")[check_codes(codes, "x")]


@dataclass
class FittedTable:
    """An int8 activation table with zero points: the input code ``c`` stands for
    ``h = (c - z) * delta``, the entry ``e`` for ``(e + k) * g_scale``."""
    table: np.ndarray
    delta: float
    z: int
    g_scale: float
    k: int

    @classmethod
    def fit(cls, activation, top, bottom):
        """The table for ``h`` in ``[-bottom, top]`` (256 codes), its outputs spanning their
        own range ``[min(f, 0), max(f, 0)]`` in 256 codes."""
        f = activation_function(activation)
        delta = (top + bottom) / (TABLE_SIZE - 1)
        z = int(np.clip(round_half_away_from_zero(INT8_MIN + bottom / delta), INT8_MIN, INT8_MAX))
        gv = f((_TABLE_X - z) * delta)
        lo, hi = min(float(gv.min()), 0.0), max(float(gv.max()), 0.0)
        g_scale = (hi - lo) / (TABLE_SIZE - 1) if hi > lo else 1.0
        k = int(round_half_away_from_zero(lo / g_scale)) - INT8_MIN
        return cls(sat8(round_half_away_from_zero(gv / g_scale) - k), delta, z, g_scale, k)

    def emulate(self, h, stretch):
        """What the tile computes from ``h`` (float) for channels stretched by ``stretch``:
        the code ``round(h / (stretch delta)) + z`` saturated, looked up, in real units."""
        c = np.clip(round_half_away_from_zero(h / (stretch * self.delta)) + self.z, INT8_MIN, INT8_MAX)
        return (self.table[c.astype(np.int64) & 0xFF] + float(self.k)) * (self.g_scale * stretch)
