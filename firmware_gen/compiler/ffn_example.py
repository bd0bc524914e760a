"""Random FFNs for demos, tests and benches: float weights and inputs, their quantised
form and the float reference output (``example_ffn``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from firmware_gen.golden.numerics import (KINDS, FfnSpec, NumericsError, activation_quantiser, dequantise,
                                          error_report, ffn_float)
from firmware_gen.compiler import CompileError


@dataclass
class Example:
    """A random float FFN, its quantised form and int8 input, for demos, tests and benches."""
    spec: FfnSpec
    x_int8: np.ndarray
    y_float: np.ndarray
    activation: str

    def error_vs_float(self, y_int8) -> dict:
        return error_report(y_int8, self.spec.out_scale, self.y_float, self.spec.dtype)


EXAMPLE_MAX_VALUES = 1 << 27     # values in one array of a random example (1 GiB of float64)


def example_ffn(kind: str = "swiglu", H: int = 64, I: int = 128, batch: int = 1, seed: int = 0,
                activation: str | None = None, dtype: str = "int8") -> Example:
    """Gaussian weights (std 1/sqrt(fan-in)) and inputs, quantised by ``FfnSpec.from_float``
    with the input itself as the calibration batch (``dtype``: int8 or fp8; the input
    ``x_int8`` is then int8 values or E4M3 codes)."""
    if kind not in KINDS:
        raise CompileError(f"unknown FFN kind {kind!r}; choose one of {', '.join(KINDS)}")
    for name, v in (("H", H), ("I", I), ("batch", batch)):
        if not isinstance(v, (int, np.integer)) or v < 1:
            raise CompileError(f"{name} must be a positive integer, got {v!r}")
    largest = max(H * I, batch * H, batch * I)
    if largest > EXAMPLE_MAX_VALUES:
        raise CompileError(f"a random example of H={H}, I={I}, batch {batch} needs arrays of {largest:,} float "
                           f"values; the limit is {EXAMPLE_MAX_VALUES:,} per array (1 GiB of float64): give a "
                           "smaller shape, or your own weights (--weights FILE)")
    activation = activation or ("silu" if kind == "swiglu" else "gelu")
    rng = np.random.default_rng(seed)
    W1 = rng.normal(size=(I, H)) / math.sqrt(H)
    W2 = rng.normal(size=(H, I)) / math.sqrt(I)
    W3 = rng.normal(size=(I, H)) / math.sqrt(H) if kind == "swiglu" else None
    b1 = rng.normal(size=I) * 0.1 if kind == "classic" else None
    b2 = rng.normal(size=H) * 0.1 if kind == "classic" else None
    x = rng.normal(size=(batch, H))
    try:
        spec = FfnSpec.from_float(kind, W1, W2, W3, b1, b2, x_calibration=x, activation=activation, dtype=dtype)
    except NumericsError as e:
        raise CompileError(str(e)) from None
    xq, _ = activation_quantiser(dtype)(x, spec.x_scale)
    x_real = dequantise(xq, spec.x_scale, dtype)
    return Example(spec, xq, ffn_float(kind, W1, W2, W3, b1, b2, x_real, activation), activation)
