"""Integer numerics of the FFN: rounding ties, saturation, tables, quantisers, the golden FFN.

Every expected value is worked out by hand in the comments or comes from an independent
float reference, never from running the code under test.
"""

import dataclasses
import math
import zlib

import numpy as np
import pytest

from firmware_gen.golden.numerics import FfnSpec, NumericsError, error_report, ffn_float, ffn_int
from firmware_gen.golden.quantise import (add_int32, elementwise_multiply, matmul_int32, quantise_activations,
                                          quantise_scale, quantise_weights, requantise)
from firmware_gen.golden.tables import activation_table, apply_table, check_table


def rq(acc, m, s):
    return requantise(np.array(acc, dtype=np.int64), m, s).tolist()


# ---- requantise --------------------------------------------------------------------------
def test_requantise_ties_round_toward_plus_infinity():
    # /2: 1.5 -> 2, 2.5 -> 3, -1.5 -> -1, -2.5 -> -2, 0.5 -> 1, -0.5 -> 0
    assert rq([3, 5, -3, -5, 1, -1], 1, 1) == [2, 3, -1, -2, 1, 0]
    # /4: 1.75 -> 2, -1.75 -> -2, -1.25 -> -1, 1.25 -> 1, -0.75 -> -1
    assert rq([7, -7, -5, 5, -3], 1, 2) == [2, -2, -1, 1, -1]
    # 100 * 3 / 4 = 75 exactly; 101 * 3 / 4 = 75.75 -> 76; -101 * 3 / 4 = -75.75 -> -76
    assert rq([100, 101, -101], 3, 2) == [75, 76, -76]


def test_requantise_saturation_edges():
    # /2: 253 -> 126.5 -> 127, 254 -> 127, 255 -> 127.5 -> 128 -> saturates to 127
    assert rq([253, 254, 255, 256], 1, 1) == [127, 127, 127, 127]
    # 252 / 2 = 126; 127.5 is the first value that rounds to +128
    assert rq([252], 1, 1) == [126]
    # /2: -255 -> -127.5 -> -127, -256 -> -128, -257 -> -128.5 -> -128 (in range),
    # -258 -> -129 -> saturates to -128, -259 -> -129.5 -> -129 -> -128
    assert rq([-255, -256, -257, -258, -259], 1, 1) == [-127, -128, -128, -128, -128]
    # shift 0: no rounding, plain saturation at +128 and -129
    assert rq([127, 128, -128, -129, 0], 1, 0) == [127, 127, -128, -128, 0]
    assert rq([-128, 127, 5, -64, 64], 2, 0) == [-128, 127, 10, -128, 127]


def test_requantise_extremes():
    # largest |p|: 2**31 * 32767 must not overflow anything
    assert rq([2**31 - 1, -2**31], 32767, 0) == [127, -128]
    # -2**31 * 32767 / 2**46 = -32767 / 32768 ~ -0.99997 -> -1;  +(2**31 - 1) ... -> +1
    assert rq([-2**31, 2**31 - 1], 32767, 46) == [-1, 1]
    # -32767 / 2**46 is tiny -> 0 (floor(-tiny + 0.5) = 0)
    assert rq([-1, 1], 32767, 46) == [0, 0]


def test_requantise_per_channel():
    acc = np.array([[10, 10, 10], [-10, -10, -10]])
    # column 0: 10*1>>0 = 10; column 1: 10*3/2 = 15; column 2: 10*5/8 = 6.25 -> 6
    out = requantise(acc, np.array([1, 3, 5]), np.array([0, 1, 3]))
    assert out.dtype == np.int8
    assert out.tolist() == [[10, 15, 6], [-10, -15, -6]]


@pytest.mark.parametrize("acc, m, s, words", [
    (0, 0, 0, r"multiplier must hold integers in 1\.\.32767; found 0"),
    (0, 32768, 0, r"multiplier must hold integers in 1\.\.32767; found 32768"),
    (0, 1, -1, r"shift must hold integers in 0\.\.46; found -1"),
    (0, 1, 47, r"shift must hold integers in 0\.\.46; found 47"),
    (0, 1.5, 0, "multiplier must hold integers, got dtype float64"),
    (2**31, 1, 0, r"acc must hold int32 values in -2147483648\.\.2147483647; found 2147483648"),
    (-2**31 - 1, 1, 0, "acc must hold int32 values.*found -2147483649"),
])
def test_requantise_bad_parameters(acc, m, s, words):
    with pytest.raises(NumericsError, match=words):
        requantise(np.array([acc], dtype=np.int64), m, s)


# ---- quantise_scale --------------------------------------------------------------------------
def test_quantise_scale_exact_cases():
    assert quantise_scale(0.5) == (16384, 15)       # 0.5 * 2**16 = 32768 is one too many
    assert quantise_scale(1.0) == (16384, 14)
    assert quantise_scale(32767.0) == (32767, 0)
    assert quantise_scale(32767.4) == (32767, 0)
    assert quantise_scale(2.0**-47) == (1, 46)      # 0.5 at shift 46 rounds away to 1
    assert quantise_scale(0.75) == (24576, 15)      # 0.75 * 2**15


@pytest.mark.parametrize("r", [1e-9, 1e-6, 0.0123, 0.1, 0.333, 0.9999, 1.7, 3.7, 1000.0, 20000.0])
def test_quantise_scale_round_trip(r):
    m, s = quantise_scale(r)
    assert 16384 <= m <= 32767 and 0 <= s <= 46  # 15 significant bits when the range allows
    assert abs(m / 2**s - r) <= r * 2.0**-15      # half an LSB of a multiplier >= 2**14
    # applied through requantise: matches round(acc * r) to within one
    for acc in (-100000, -777, 3, 5000, 123456):
        expect = min(127, max(-128, round(acc * r)))
        assert abs(int(requantise(acc, m, s)) - expect) <= 1


@pytest.mark.parametrize("r, words", [
    (0.0, r"real_scale must be a finite number > 0, got 0\.0"),
    (-1.0, "real_scale must be a finite number > 0"),
    (float("nan"), "real_scale must be a finite number > 0"),
    (float("inf"), "real_scale must be a finite number > 0"),
    (32767.5, "too large: the largest representable scale is 32767"),
    (1e300, "too large"),
    (2.0**-48, r"too small: the smallest representable scale is 2\*\*-47"),
])
def test_quantise_scale_errors(r, words):
    with pytest.raises(NumericsError, match=words):
        quantise_scale(r)


# ---- int32 add, matmul, elementwise multiply ------------------------------------------------------
def test_add_int32_wraps():
    assert add_int32(np.array([2**31 - 1, -2**31, 5, 2**31 - 1]),
                     np.array([1, -1, -7, 2**31 - 1])).tolist() == [-2**31, 2**31 - 1, -2, -2]
    with pytest.raises(NumericsError, match="b must hold int32 values"):
        add_int32(0, 2**31)


def test_matmul_int32_exact_and_overflow():
    w = np.array([[1, -2, 3], [-128, -128, -128]], dtype=np.int8)
    x = np.array([[4, 5, 6], [-128, 0, 127]], dtype=np.int8)
    # rows: [4 - 10 + 18, -128*15], [-128 + 381, 16384 - 16256]
    assert matmul_int32(w, x).tolist() == [[12, -1920], [253, 128]]
    # 131073 * (-128)(-128) = 2147500032 > 2**31 - 1
    n = 131073
    with pytest.raises(NumericsError, match="int32 overflow in W1 x: an accumulator reaches 2147500032"):
        matmul_int32(np.full((1, n), -128, np.int8), np.full(n, -128, np.int8), "W1 x")
    # one fewer term: 131072 * 16384 = 2**31, still one too many; 131071 terms fit
    assert matmul_int32(np.full((1, n - 2), -128, np.int8), np.full(n - 2, -128, np.int8))[0] == (n - 2) * 16384
    with pytest.raises(NumericsError, match="int32 overflow.*2147483648"):
        matmul_int32(np.full((1, n - 1), -128, np.int8), np.full(n - 1, -128, np.int8))


def test_elementwise_multiply_edges():
    a = np.array([-128, -128, -128, 127, 3, -3])
    b = np.array([-128, -128, 127, 127, 5, 5])
    # products 16384, 16384, -16256, 16129, 15, -15
    assert elementwise_multiply(a, b, 1, 0).tolist() == [127, 127, -128, 127, 15, -15]
    # /128: 128 -> 127 (sat), 128, -127.0, 126.0078 -> 126, 0.117 -> 0, -0.117 -> 0
    assert elementwise_multiply(a, b, 1, 7).tolist() == [127, 127, -127, 126, 0, 0]
    # /256: 64, 64, -63.5 -> -63 (tie toward +inf), 63.0039 -> 63
    assert elementwise_multiply(a[:4], b[:4], 1, 8).tolist() == [64, 64, -63, 63]
    with pytest.raises(NumericsError, match=r"a must hold int8 values in -128\.\.127; found 128"):
        elementwise_multiply(np.array([128]), np.array([1]), 1, 0)


# ---- activation tables ---------------------------------------------------------------------------
def silu_ref(x):
    return x / (1.0 + math.exp(-x)) if x > -700 else 0.0


def gelu_erf(x):
    return 0.5 * x * (1.0 + math.erf(x / math.sqrt(2.0)))


def gelu_tanh(x):
    return 0.5 * x * (1.0 + math.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)))


def int8_of_byte(i):
    return i if i < 128 else i - 256


@pytest.mark.parametrize("name, ref", [("silu", silu_ref), ("gelu", gelu_tanh), ("gelu", gelu_erf),
                                       ("relu", lambda x: max(x, 0.0)), ("identity", lambda x: x)])
@pytest.mark.parametrize("in_scale, out_scale", [(0.05, 0.05), (0.1, 0.03), (0.02, 0.1), (1.0, 0.5)])
def test_activation_tables_within_one_lsb(name, ref, in_scale, out_scale):
    t = activation_table(name, in_scale, out_scale)
    assert t.dtype == np.int8 and t.shape == (256,)
    for i in range(256):
        want = min(127.0, max(-128.0, ref(int8_of_byte(i) * in_scale) / out_scale))
        assert abs(int(t[i]) - want) <= 1.0, (name, i)


def test_relu_and_identity_tables_exact():
    relu = activation_table("relu", 0.02, 0.02)
    assert [int(relu[i]) for i in range(256)] == [max(0, int8_of_byte(i)) for i in range(256)]
    ident = activation_table("identity", 0.25, 0.25)
    assert [int(v) for v in ident] == [int8_of_byte(i) for i in range(256)]
    # x / 2 rounded half away from zero: 1 -> 1, -1 -> -1, 3 -> 2, -3 -> -2, 2 -> 1
    half = activation_table("identity", 1.0, 2.0)
    assert [int(half[i & 0xFF]) for i in (1, -1, 3, -3, 2, 127, -128)] == [1, -1, 2, -2, 1, 64, -64]
    # x * 2 saturates: 63 -> 126, 64 -> 127, -64 -> -128, -65 -> -128, 127 -> 127
    double = activation_table("identity", 1.0, 0.5)
    assert [int(double[i & 0xFF]) for i in (63, 64, -64, -65, 127)] == [126, 127, -128, -128, 127]
    relu2 = activation_table("relu", 1.0, 0.5)
    assert [int(relu2[i & 0xFF]) for i in (-128, -1, 0, 1, 63, 64)] == [0, 0, 0, 2, 126, 127]


def test_activation_table_errors():
    with pytest.raises(NumericsError, match="unknown activation 'tanh'; choose one of silu, gelu"):
        activation_table("tanh", 0.1, 0.1)
    with pytest.raises(NumericsError, match="in_scale must be a finite number > 0, got 0.0"):
        activation_table("silu", 0.0, 0.1)
    with pytest.raises(NumericsError, match="out_scale must be a finite number > 0"):
        activation_table("silu", 0.1, -1)


def test_apply_and_check_table():
    t = np.arange(256) - 128                          # entry i holds i - 128
    x = np.array([[-1, 0], [-128, 127]], dtype=np.int8)
    # -1 is byte 255 -> 127; 0 -> -128; -128 is byte 128 -> 0; 127 -> -1
    out = apply_table(t, x)
    assert out.dtype == np.int8 and out.tolist() == [[127, -128], [0, -1]]
    with pytest.raises(NumericsError, match="activation table has 255 entries; it must have 256"):
        check_table(np.zeros(255, dtype=np.int8))
    with pytest.raises(NumericsError, match="activation table has 257 entries; it must have 256"):
        apply_table(np.zeros(257, dtype=np.int8), x)
    with pytest.raises(NumericsError, match=r"activation table must hold int8 values in -128\.\.127; found 200"):
        check_table(np.full(256, 200))
    with pytest.raises(NumericsError, match="activation table must hold integers"):
        check_table(np.zeros(256))
    with pytest.raises(NumericsError, match="x must hold int8 values.*found -129"):
        apply_table(t, np.array([-129]))


# ---- quantisers ----------------------------------------------------------------------------------
def test_quantise_weights():
    w = np.array([[127.0, -63.5, 0.5, -0.5],         # scale 1: ties go away from zero
                  [0.0, 0.0, 0.0, 0.0],              # zero row: scale 1.0
                  [-254.0, 3.0, -5.0, 1.0]])         # scale 2: 1.5 -> 2, -2.5 -> -3, 0.5 -> 1
    q, s = quantise_weights(w)
    assert q.dtype == np.int8 and s.dtype == np.float64
    assert s.tolist() == [1.0, 1.0, 2.0]
    assert q.tolist() == [[127, -64, 1, -1], [0, 0, 0, 0], [-127, 2, -3, 1]]
    q, s = quantise_weights(w, per_row=False)         # one scale, 254 / 127 = 2
    assert s.tolist() == [2.0, 2.0, 2.0]
    assert q.tolist() == [[64, -32, 0, 0], [0, 0, 0, 0], [-127, 2, -3, 1]]
    with pytest.raises(NumericsError, match=r"w_float must be a 2-D matrix, got shape \(4,\)"):
        quantise_weights(w[0])
    with pytest.raises(NumericsError, match="w_float must be finite"):
        quantise_weights(np.array([[1.0, np.nan]]))


def test_quantise_activations():
    q, s = quantise_activations(np.array([254.0, -127.0, 1.0, -3.0]))
    assert s == 2.0 and q.tolist() == [127, -64, 1, -2]
    q, s = quantise_activations(np.array([254.0, -127.0, 1.0, -300.0]), scale=1.0)
    assert s == 1.0 and q.tolist() == [127, -127, 1, -127]   # symmetric saturation
    q, s = quantise_activations(np.zeros(3))
    assert s == 1.0 and q.tolist() == [0, 0, 0]
    with pytest.raises(NumericsError, match="scale must be a finite number > 0, got -0.5"):
        quantise_activations(np.ones(2), scale=-0.5)


# ---- the FFN -------------------------------------------------------------------------------------
def random_ffn(rng, kind, H, I):
    W1 = rng.normal(size=(I, H)) / math.sqrt(H)
    W3 = rng.normal(size=(I, H)) / math.sqrt(H) if kind == "swiglu" else None
    W2 = rng.normal(size=(H, I)) / math.sqrt(I)
    b1 = rng.normal(size=I) * 0.1 if kind == "classic" else None
    b2 = rng.normal(size=H) * 0.1 if kind == "classic" else None
    return W1, W2, W3, b1, b2


@pytest.mark.parametrize("kind, activation", [("swiglu", "silu"), ("swiglu", "gelu"),
                                              ("classic", "gelu"), ("classic", "relu"),
                                              ("classic", "silu")])
@pytest.mark.parametrize("H, I", [(16, 48), (32, 24), (24, 96), (48, 40)])
@pytest.mark.parametrize("batch", [1, 4])
def test_ffn_int_matches_float(kind, activation, H, I, batch):
    rng = np.random.default_rng(zlib.crc32(repr((kind, activation, H, I, batch)).encode()))
    W1, W2, W3, b1, b2 = random_ffn(rng, kind, H, I)
    spec = FfnSpec.from_float(kind, W1, W2, W3, b1, b2, x_calibration=rng.normal(size=(256, H)),
                              activation=activation)
    x = rng.normal(size=(batch, H))
    xq, _ = quantise_activations(x, spec.x_scale)
    y = ffn_int(spec, xq if batch > 1 else xq[0])
    assert y.dtype == np.int8 and y.shape == ((batch, H) if batch > 1 else (H,))
    ref = ffn_float(kind, W1, W2, W3, b1, b2, x, activation)
    rep = error_report(y, spec.out_scale, ref if batch > 1 else ref[0])
    assert rep["cosine"] > 0.98, rep


def test_ffn_int_batch_rows_independent():
    rng = np.random.default_rng(7)
    W1, W2, W3, b1, b2 = random_ffn(rng, "swiglu", 16, 32)
    spec = FfnSpec.from_float("swiglu", W1, W2, W3, x_calibration=rng.normal(size=(64, 16)))
    xq = rng.integers(-127, 128, size=(4, 16)).astype(np.int8)
    y = ffn_int(spec, xq)
    for b in range(4):
        assert np.array_equal(ffn_int(spec, xq[b]), y[b])


def test_ffn_int_hand_computed():
    # H = I = 1, classic, identity table: y = ((x*w1 + b1) >> 1) * w2 + b2, then * 1 (shift 0)
    spec = FfnSpec("classic", W1=np.array([[3]]), W2=np.array([[2]]),
                   table=activation_table("identity", 1.0, 1.0),
                   rq1=(1, 1), rq2=(1, 0), b1=np.array([1]), b2=np.array([-5]))
    # x = 5: 15 + 1 = 16 -> 8 -> 8 -> 16 - 5 = 11
    # x = -4: -12 + 1 = -11 -> -5.5 -> -5 (tie toward +inf) -> -10 - 5 = -15
    # x = 127: 382 -> 191 -> 127 -> 254 - 5 = 249 -> saturates to 127
    assert ffn_int(spec, np.array([[5], [-4], [127]])).tolist() == [[11], [-15], [127]]


def test_shape_errors():
    rng = np.random.default_rng(1)
    W1, W3, cal = rng.normal(size=(64, 32)), rng.normal(size=(64, 32)), rng.normal(size=(8, 32))
    with pytest.raises(NumericsError, match="W1 is 64x32 but W2 is 32x48: W2 must be H x I = 32x64"):
        FfnSpec.from_float("swiglu", W1, rng.normal(size=(32, 48)), W3, x_calibration=cal)
    W2 = rng.normal(size=(32, 64))
    with pytest.raises(NumericsError, match="W1 is 64x32 but W3 is 64x31: W3 must be I x H = 64x32"):
        FfnSpec.from_float("swiglu", W1, W2, W3[:, :31], x_calibration=cal)
    with pytest.raises(NumericsError, match="kind 'swiglu' needs W3"):
        FfnSpec.from_float("swiglu", W1, W2, x_calibration=cal)
    with pytest.raises(NumericsError, match="W3 is only used by kind 'swiglu'"):
        FfnSpec.from_float("classic", W1, W2, W3, x_calibration=cal)
    with pytest.raises(NumericsError, match="biases are only used by kind 'classic'"):
        FfnSpec.from_float("swiglu", W1, W2, W3, b1=np.zeros(64), x_calibration=cal)
    with pytest.raises(NumericsError, match=r"b1 has shape \(63,\) but W1 is 64x32: b1 must have I = 64 entries"):
        FfnSpec.from_float("classic", W1, W2, b1=np.zeros(63), x_calibration=cal)
    with pytest.raises(NumericsError, match=r"b2 has shape \(64,\) but W1 is 64x32: b2 must have H = 32 entries"):
        FfnSpec.from_float("classic", W1, W2, b2=np.zeros(64), x_calibration=cal)
    with pytest.raises(NumericsError, match=r"x_calibration has shape \(8, 31\) but W1 is 64x32"):
        FfnSpec.from_float("classic", W1, W2, x_calibration=cal[:, :31])
    with pytest.raises(NumericsError, match="kind must be 'swiglu' or 'classic', got 'moe'"):
        FfnSpec.from_float("moe", W1, W2, x_calibration=cal)
    with pytest.raises(NumericsError, match="unknown activation 'elu'"):
        FfnSpec.from_float("classic", W1, W2, x_calibration=cal, activation="elu")
    with pytest.raises(NumericsError, match="W1 is 64x32 but W2 is 64x32: W2 must be H x I = 32x64"):
        ffn_float("classic", W1, W1, None, None, None, cal, "relu")
    spec = FfnSpec.from_float("classic", W1, W2, x_calibration=cal, activation="relu")
    with pytest.raises(NumericsError, match=r"x_int8 has shape \(2, 31\) but the FFN has H = 32"):
        ffn_int(spec, np.zeros((2, 31), dtype=np.int8))
    with pytest.raises(NumericsError, match="x_int8 must hold int8 values.*found 300"):
        ffn_int(spec, np.full(32, 300))


def test_spec_validation():
    t = activation_table("relu", 1.0, 1.0)
    one = np.array([[1]])
    with pytest.raises(NumericsError, match="kind 'classic' needs int32 biases b1 and b2"):
        FfnSpec("classic", W1=one, W2=one, table=t, rq1=(1, 0), rq2=(1, 0))
    with pytest.raises(NumericsError, match=r"W1 must hold int8 values in -128\.\.127; found 200"):
        FfnSpec("classic", W1=one * 200, W2=one, table=t, rq1=(1, 0), rq2=(1, 0), b1=[0], b2=[0])
    with pytest.raises(NumericsError, match=r"rq2 shift must hold integers in 0\.\.46; found 50"):
        FfnSpec("classic", W1=one, W2=one, table=t, rq1=(1, 0), rq2=(1, 50), b1=[0], b2=[0])
    with pytest.raises(NumericsError, match="rq1 parameters must be scalars or have 1 entries"):
        FfnSpec("classic", W1=one, W2=one, table=t, rq1=([1, 1], 0), rq2=(1, 0), b1=[0], b2=[0])
    with pytest.raises(NumericsError, match="activation table has 10 entries"):
        FfnSpec("classic", W1=one, W2=one, table=t[:10], rq1=(1, 0), rq2=(1, 0), b1=[0], b2=[0])


def test_error_report():
    rep = error_report(np.array([2, -4]), 0.5, np.array([1.0, -2.5]))
    # dequantised [1, -2]; errors [0, 0.5]; cos = (1 + 5) / (sqrt(5) * sqrt(7.25))
    assert rep["max_abs_error"] == pytest.approx(0.5)
    assert rep["cosine"] == pytest.approx(6 / math.sqrt(5 * 7.25))
    assert error_report(np.zeros(3), 1.0, np.zeros(3))["cosine"] == 1.0
    with pytest.raises(NumericsError, match="y_int8 has 2 elements but y_float has 3"):
        error_report(np.zeros(2), 1.0, np.zeros(3))


def test_requantise_matches_exact_rational_rounding():
    # Independent reference: floor(acc * m / 2**s + 1/2) in exact rationals, then saturate.
    from fractions import Fraction
    rng = np.random.default_rng(3)
    acc = np.concatenate([rng.integers(-2**31, 2**31, size=300), rng.integers(-3000, 3000, size=300)])
    m = np.concatenate([rng.integers(1, 32768, size=300), rng.integers(1, 40, size=300)])
    s = np.concatenate([rng.integers(0, 47, size=300), rng.integers(0, 12, size=300)])
    got = requantise(acc, m, s)
    for a, mm, ss, g in zip(acc.tolist(), m.tolist(), s.tolist(), got.tolist()):
        want = math.floor(Fraction(a * mm, 2**ss) + Fraction(1, 2))
        assert g == min(127, max(-128, want)), (a, mm, ss)


def test_per_row_output_scales():
    """``out_scale_per_row``: one output scale per row of W2 (its largest |y| over the
    calibration batch / 127), folded into rq2; a channel 60x larger than the rest no longer
    costs the others their resolution.  Bad per-row scales are named."""
    rng = np.random.default_rng(3)
    W1, W2, W3, b1, b2 = random_ffn(rng, "classic", 16, 32)
    W2[5] *= 60.0                                   # one outlier output channel
    cal = rng.normal(size=(64, 16))
    tensor = FfnSpec.from_float("classic", W1, W2, W3, b1, b2, x_calibration=cal, activation="gelu")
    rows = FfnSpec.from_float("classic", W1, W2, W3, b1, b2, x_calibration=cal, activation="gelu",
                              out_scale_per_row=True)
    assert np.ndim(tensor.out_scale) == 0 and rows.out_scale.shape == (16,)
    ref = ffn_float("classic", W1, W2, W3, b1, b2, cal, "gelu")
    assert np.allclose(rows.out_scale, np.abs(ref).max(0) / 127)
    xq, _ = quantise_activations(cal, rows.x_scale)
    others = [r for r in range(16) if r != 5]
    err = {name: error_report(ffn_int(s, xq)[:, others], np.broadcast_to(s.out_scale, (16,))[others],
                              ref[:, others])["cosine"] for name, s in (("tensor", tensor), ("rows", rows))}
    assert err["rows"] > 0.99 > err["tensor"], err
    with pytest.raises(NumericsError, match=r"out_scale has shape \(3,\): it must be one number or one per output row \(16,\)"):
        dataclasses.replace(rows, out_scale=np.ones(3))
    with pytest.raises(NumericsError, match="every out_scale must be a finite number > 0"):
        dataclasses.replace(rows, out_scale=np.r_[np.ones(15), 0.0])
