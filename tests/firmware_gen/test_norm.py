"""RMSNorm in the tile's integer arithmetic (``golden/norm.py``): against float on calibrated
inputs, its stages as the module states them, and its refusals."""

import math

import numpy as np
import pytest

from firmware_gen.golden.norm import (MANTISSA_OFFSET, RSQRT_NUM, NormSpec, octave_codes, rmsnorm_float,
                                      rmsnorm_int, rsqrt_table)
from firmware_gen.golden.quantise import NumericsError, requantise


def calibrated(seed=0, H=32, spread=(0.3, 3.0)):
    rng = np.random.default_rng(seed)
    xf = rng.normal(size=(48, H)) * rng.uniform(*spread, size=(48, 1))
    sx = np.abs(xf).max() / 127
    xi = np.clip(np.round(xf / sx), -127, 127).astype(np.int64)
    g = rng.uniform(0.5, 1.5, H)
    return NormSpec.calibrate(xi, sx, g), xi, sx, g


@pytest.mark.parametrize("spread, norm_error", [((0.3, 3.0), 0.05), ((0.8, 1.25), 0.025)])
def test_close_to_float_on_its_calibration_inputs(spread, norm_error):
    """Vectors whose norms span 10x (the squares of the smallest lose bits to the static scale)
    and 1.6x: the direction within cosine 0.9995, the norm within 5 % and 2.5 %."""
    spec, xi, sx, g = calibrated(spread=spread)
    for x in xi:
        y = rmsnorm_int(spec, x).y * spec.out_scale
        f = rmsnorm_float(x * sx, g)
        assert y @ f / (np.linalg.norm(y) * np.linalg.norm(f)) > 0.9995
        assert abs(np.linalg.norm(y) / np.linalg.norm(f) - 1) < norm_error


def test_stages_are_the_modules_steps():
    spec, xi, _, _ = calibrated(1, H=64)
    st = rmsnorm_int(spec, xi[5])
    assert np.array_equal(st.sq, requantise(xi[5] * xi[5], 1, spec.sq_shift))
    assert st.Q == spec.q_weight * int(st.sq.sum())
    own = [i for i, (c, a) in st.codes.items() if a]
    assert len(own) == 1                      # exactly one octave's code is in the table's range
    i = own[0]
    assert 64 <= st.Q >> i <= 127 and st.codes[i][0] == (st.Q >> i) - MANTISSA_OFFSET == int(octave_codes(st.Q, i))


def test_rsqrt_table():
    t = rsqrt_table().astype(np.int64)
    codes = np.arange(-127, -63)
    assert t[codes & 0xFF].tolist() == [round(RSQRT_NUM / math.sqrt(c + MANTISSA_OFFSET + 0.5)) for c in codes]
    assert t[codes[0] & 0xFF] == 127 and not t[np.setdiff1d(np.arange(-128, 128), codes) & 0xFF].any()


def test_a_zero_vector_gives_zero_and_bad_input_is_refused():
    spec, _, _, _ = calibrated()
    assert not rmsnorm_int(spec, np.zeros(32, np.int64)).y.any()
    with pytest.raises(NumericsError, match=r"x must be \(32,\)"):
        rmsnorm_int(spec, np.zeros(16, np.int64))
    with pytest.raises(NumericsError, match="gains must be positive"):
        NormSpec.calibrate(np.ones((4, 16), np.int64), 0.1, -np.ones(16))
