"""The LayerNorm in the tile's integer arithmetic (``firmware_gen/golden/layer_norm.py``)."""

import math

import numpy as np
import pytest

from firmware_gen.golden.layer_norm import (MANTISSA_OFFSET, RSQRT_NUM, LayerNormSpec, centre, layernorm_float,
                                            layernorm_int, rsqrt_tables)
from firmware_gen.golden.quantise import NumericsError, range_scale_rows


def residual_sums(T=48, H=64, seed=0):
    """Rows like a BERT residual sum: most lanes near 1, three lanes 10 to 40 times wider, a
    mean that moves from row to row."""
    rng = np.random.default_rng(seed)
    z = rng.normal(size=(T, H))
    z[:, [3, 17, 40]] *= [10.0, 25.0, 40.0]
    return z + rng.normal(0, 0.3, size=(T, 1))


def calibrated(z, g=None, b=None, seed=1):
    rng = np.random.default_rng(seed)
    H = z.shape[1]
    g = rng.uniform(0.5, 1.5, H) * np.where(np.arange(H) % 7 == 0, -1, 1) if g is None else g
    b = rng.normal(0, 0.2, H) if b is None else b
    s = 1.25 * range_scale_rows(z)
    codes = np.clip(np.round(z / s), -127, 127).astype(np.int64)
    return LayerNormSpec.calibrate(codes, s, g, b), codes, s, g, b


def cosine(a, b):
    return float(np.dot(a, b) / (np.linalg.norm(a) * np.linalg.norm(b)))


def lane_spread(T=48, H=64, seed=0):
    """Rows whose lanes' widths span 4x, with a moving mean."""
    rng = np.random.default_rng(seed)
    return rng.normal(size=(T, H)) * rng.uniform(0.5, 2, H) + rng.normal(0, 0.3, size=(T, 1))


@pytest.mark.parametrize("seed", [0, 1])
def test_layer_norm_is_within_codes_of_float(seed):
    """Lanes within 4x of each other, negative gains among them: every output within 2.5 codes
    of the float LayerNorm of the same int8 input."""
    spec, codes, s, g, b = calibrated(lane_spread(seed=seed), seed=seed + 1)
    for row in codes:
        y, ref = layernorm_int(spec, row).y, layernorm_float(row * s, g, b) / np.asarray(spec.out_scale)
        assert np.max(np.abs(y - ref)) <= 2.5, np.max(np.abs(y - ref))


def test_layer_norm_follows_float_with_wide_lanes():
    """Three lanes 10 to 40 times wider than the rest (a BERT residual sum's): cosine with the
    float LayerNorm at least 0.996 on every row.  Two costs: a wide lane's square rounds in its own
    coarse unit (the scale of a row with a small variance is a few per cent off), and ``n`` has one
    scale for every lane (the octaves' entries are shared by the blocks), set by the rows where a
    wide lane is large with the variance it makes: a narrow lane's ``n`` spans a quarter of int8
    here (all-MiniLM-L6-v2's: a half to two thirds, its cosine with float unchanged)."""
    spec, codes, s, g, b = calibrated(residual_sums())
    worst = min(cosine(layernorm_int(spec, row).y * np.asarray(spec.out_scale), layernorm_float(row * s, g, b))
                for row in codes)
    assert worst >= 0.996, worst


def test_rows_outside_the_calibration_still_normalise():
    """Fresh rows half to three quarters as large as the calibration's find their octave: within
    5 codes of float (a row below half the calibration's smallest has none; a larger one may
    saturate a lane's square: ``SQ_HEADROOM``)."""
    spec, codes, s, g, b = calibrated(lane_spread(seed=2))
    fresh = lane_spread(T=8, seed=3)
    for scale in (0.5, 0.75):
        rows = np.clip(np.round(fresh * scale / s), -127, 127).astype(np.int64)
        for row in rows:
            ref = layernorm_float(row * s, g, b) / np.asarray(spec.out_scale)
            # (a lane beyond the calibration's range saturates, as it must: the others are compared)
            inside = (np.abs(ref) <= 127) & (np.abs(ref - np.asarray(spec.bias)) <= 127)
            assert inside.mean() > 0.9
            assert np.max(np.abs(layernorm_int(spec, row).y - ref)[inside]) <= 5


def test_centring_removes_the_mean():
    spec, codes, s, g, b = calibrated(residual_sums(seed=4))
    for row in codes[:8]:
        d = centre(spec, row) * spec.d_scale * np.asarray(spec.signs)
        exact = row * s - np.mean(row * s)
        assert np.max(np.abs(d - exact)) <= 1.5 * np.max(s), "d must be z - mean(z) within a code of the widest lane"


def test_negative_gain_lanes_flip_their_sign_not_their_multiplier():
    spec, *_ = calibrated(residual_sums())
    assert -1 in spec.signs and 1 in spec.signs
    assert all(m >= 1 for m in spec.n_rq[0]) and all(m >= 1 for m, _ in spec.y_rq)


def test_the_reciprocal_square_root_tables():
    hi, lo = rsqrt_tables()
    codes = np.arange(256).astype(np.int8).astype(np.int64)
    own = (codes + MANTISSA_OFFSET >= 128) & (codes + MANTISSA_OFFSET <= 255)
    mant = codes[own] + MANTISSA_OFFSET
    exact = RSQRT_NUM / np.sqrt(mant + 0.5)
    assert np.max(np.abs(hi[own] + lo[own] / 128 - exact)) <= 0.5 / 128 + 1e-9
    assert hi[own].max() == 127 and not hi[~own].any() and not lo[~own].any()


def test_one_octave_contributes():
    spec, codes, *_ = calibrated(residual_sums())
    for row in codes[:16]:
        st = layernorm_int(spec, row)
        assert sum(a != 0 for _, a, _ in st.codes.values()) == 1, st.codes
        i = next(i for i, (_, a, _) in st.codes.items() if a)
        assert 128 <= st.Q >> i <= 255
        assert st.Q == spec.q_reps * int((np.asarray(spec.sq_w) * st.sq).sum())


def test_bad_shapes_are_refused():
    spec, *_ = calibrated(residual_sums())
    with pytest.raises(NumericsError, match=r"z must be \(64,\)"):
        layernorm_int(spec, np.zeros(32, np.int64))
    with pytest.raises(NumericsError, match="T x H"):
        LayerNormSpec.calibrate(np.zeros(64), 1.0, np.ones(64), np.zeros(64))
