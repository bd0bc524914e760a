"""Property-based tests (hypothesis): the numerics against exact references, and the
compiler on random shapes, batches and tile configurations.

Every property runs a fixed, bounded set of examples (``derandomize=True``), so the file is
deterministic and fast.  A compiled program must pass the static checker and reproduce,
on the golden model, the integer FFN and the manifest's predicted writes and cycles; a
rejected one must be rejected with a ``CompileError``, ``ConfigError`` or
``NumericsError`` that says why, never any other exception.
"""

import dataclasses
import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from firmware_gen.golden import numerics, quantise, tables
from firmware_gen.check import check_program, check_system
from firmware_gen.compiler import CompileError
from firmware_gen.compiler.ffn import compile_ffn
from firmware_gen.compiler.ffn_example import example_ffn
from firmware_gen.golden.numerics import NumericsError
from firmware_gen.compiler.tray import compile_ffn_tray
from lpu_arch import ConfigError, TileConfig
from lpu_arch.topology import Topology
from lpu_arch.vxm import MULT_MAX, SHIFT_MAX

from tests.helpers import ffn_on_golden_model, tray_on_golden_model

FAST = settings(derandomize=True, max_examples=60, deadline=None, database=None)
SLOW = settings(derandomize=True, max_examples=12, deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])

int32s = st.integers(-(1 << 31), (1 << 31) - 1)


# ---- numerics --------------------------------------------------------------------------------
def exact_requantise(acc, m, s):
    """round(acc * m / 2**s), ties toward +inf, saturated to int8: in rationals."""
    q = Fraction(acc * m, 1 << s)
    r = math.floor(q + Fraction(1, 2))
    return max(-128, min(127, r))


@FAST
@given(acc=int32s, m=st.integers(1, MULT_MAX), s=st.integers(0, SHIFT_MAX))
def test_requantise_is_the_exact_rational_rounding(acc, m, s):
    assert int(quantise.requantise(acc, m, s)) == exact_requantise(acc, m, s)


@FAST
@given(acc=st.lists(int32s, min_size=1, max_size=8), m=st.integers(1, MULT_MAX), s=st.integers(0, SHIFT_MAX))
def test_requantise_vectors_match_scalars(acc, m, s):
    out = quantise.requantise(np.array(acc, np.int64), m, s)
    assert out.dtype == np.int8
    assert [int(v) for v in out] == [exact_requantise(a, m, s) for a in acc]


@FAST
@given(m=st.integers(-5, MULT_MAX + 5), s=st.integers(-3, SHIFT_MAX + 3))
def test_requantise_rejects_out_of_range_parameters_with_a_message(m, s):
    if 1 <= m <= MULT_MAX and 0 <= s <= SHIFT_MAX:
        quantise.requantise(0, m, s)
    else:
        with pytest.raises(NumericsError, match=r"\S"):
            quantise.requantise(0, m, s)


@FAST
@given(r=st.floats(min_value=2.0 ** -40, max_value=MULT_MAX, allow_nan=False))
def test_quantise_scale_round_trips(r):
    m, s = quantise.quantise_scale(r)
    assert 1 <= m <= MULT_MAX and 0 <= s <= SHIFT_MAX
    # The multiplier is the nearest integer to r * 2**s, and keeps 15 bits when it can.
    assert abs(m - r * 2.0 ** s) <= 0.5 + 1e-9 * m
    if s < SHIFT_MAX:
        assert round(r * 2.0 ** (s + 1)) > MULT_MAX
    assert abs(m / 2.0 ** s - r) <= r * 2.0 ** -13 or s == SHIFT_MAX


@FAST
@given(r=st.one_of(st.floats(max_value=0.0), st.floats(min_value=MULT_MAX + 0.5), st.just(math.nan),
                   st.just(math.inf)))
def test_quantise_scale_rejects_unrepresentable_scales(r):
    with pytest.raises(NumericsError, match=r"\S"):
        quantise.quantise_scale(r)


@FAST
@given(name=st.sampled_from(sorted(tables.ACTIVATIONS)),
       in_scale=st.floats(1e-3, 1.0), out_scale=st.floats(1e-3, 1.0))
def test_activation_table_is_the_rounded_function(name, in_scale, out_scale):
    t = tables.activation_table(name, in_scale, out_scale)
    f = tables.ACTIVATIONS[name]
    assert t.dtype == np.int8 and t.shape == (256,)
    for i in (0, 1, 64, 127, 128, 200, 255):
        v = i if i < 128 else i - 256
        want = f(np.float64(v * in_scale)) / out_scale
        assert abs(int(t[i]) - float(np.clip(want, -128, 127))) <= 0.5 + 1e-9
    x = np.arange(-128, 128, dtype=np.int8)
    assert np.array_equal(tables.apply_table(t, x), t[x.astype(np.uint8)])


@FAST
@given(x=st.lists(st.floats(-1e6, 1e6, allow_nan=False), min_size=1, max_size=16))
def test_quantise_activations_round_trip_within_half_a_step(x):
    x = np.array(x)
    q, scale = quantise.quantise_activations(x)
    assert q.dtype == np.int8 and q.min() >= -127
    assert np.all(np.abs(q * scale - x) <= scale / 2 * (1 + 1e-9))


@FAST
@given(w=st.lists(st.lists(st.floats(-100, 100, allow_nan=False), min_size=3, max_size=3), min_size=1, max_size=5),
       per_row=st.booleans())
def test_quantise_weights_round_trip_within_half_a_step(w, per_row):
    w = np.array(w)
    q, scales = quantise.quantise_weights(w, per_row=per_row)
    assert q.dtype == np.int8 and q.min() >= -127 and scales.shape == (w.shape[0],)
    assert np.all(np.abs(q * scales[:, None] - w) <= scales[:, None] / 2 * (1 + 1e-9))


# ---- the compiler ----------------------------------------------------------------------------
ALLOWED = (CompileError, ConfigError, NumericsError)


def check_one_tile(cfg, ex):
    prog, man = compile_ffn(ex.spec, ex.x_int8, cfg)
    assert check_program(prog) == []
    problems = ffn_on_golden_model(prog, man, ex)[2]
    assert not problems, "\n".join(problems)


def check_tray(cfg, ex, tiles):
    progs, man = compile_ffn_tray(ex.spec, ex.x_int8, cfg, tiles)
    assert check_system(progs, Topology(tiles).peer, man.min_distance) == []
    problems = tray_on_golden_model(progs, man, ex)[2]
    assert not problems, "\n".join(problems)


def compiles_or_says_why(fn, *args):
    try:
        fn(*args)
    except ALLOWED as e:
        assert str(e).strip(), f"{type(e).__name__} without a message"
        return e
    return None


small_configs = st.builds(
    lambda lanes, streams, mem_slices, mem_depth, iq_depth, acc, xbuf, params, rx_depth:
        dataclasses.replace(TileConfig.tiny(), lanes=lanes, streams=streams, mem_slices=mem_slices,
                            mem_depth=mem_depth, iq_depth=iq_depth, mxm_acc_depth=acc,
                            mxm_xbuf_depth=xbuf, vxm_param_depth=params, rx_depth=rx_depth),
    lanes=st.sampled_from([4, 8, 12]), streams=st.integers(4, 8), mem_slices=st.integers(1, 3),
    mem_depth=st.sampled_from([32, 64, 128]), iq_depth=st.sampled_from([64, 256, 1024]),
    acc=st.sampled_from([8, 16, 32]), xbuf=st.sampled_from([16, 64]), params=st.sampled_from([8, 16, 32]),
    rx_depth=st.sampled_from([2, 4, 8]))


@SLOW
@given(cfg=small_configs, kind=st.sampled_from(numerics.KINDS), H=st.integers(1, 20), I=st.integers(1, 24),
       batch=st.integers(1, 4), seed=st.integers(0, 1000))
def test_random_ffns_on_random_tiles_compile_exactly_or_say_why(cfg, kind, H, I, batch, seed):
    ex = example_ffn(kind, H, I, batch, seed=seed)
    compiles_or_says_why(check_one_tile, cfg, ex)


@SLOW
@given(kind=st.sampled_from(numerics.KINDS), H=st.integers(1, 16), I=st.integers(1, 24), batch=st.integers(1, 3),
       tiles=st.sampled_from([2, 4]), rx_depth=st.sampled_from([2, 4, 8]), seed=st.integers(0, 1000))
def test_random_ffns_on_trays_compile_exactly_or_say_why(kind, H, I, batch, tiles, rx_depth, seed):
    cfg = dataclasses.replace(TileConfig.tiny(), rx_depth=rx_depth)
    compiles_or_says_why(check_tray, cfg, example_ffn(kind, H, I, batch, seed=seed), tiles)


@FAST
@given(fields=st.fixed_dictionaries({}, optional={
    "lanes": st.integers(-4, 40), "streams": st.integers(-1, 40), "mem_slices": st.integers(-1, 130),
    "mem_depth": st.integers(-1, 5000), "iq_depth": st.integers(-1, 5000), "links": st.integers(-1, 9),
    "link_width": st.integers(0, 80), "rx_depth": st.integers(0, 300), "epoch": st.integers(0, 5000),
    "sync_interval": st.integers(0, 2000)}))
def test_random_configurations_build_or_raise_config_error(fields):
    try:
        cfg = TileConfig(**fields)
    except ConfigError as e:
        assert str(e).strip()
        return
    assert cfg.vector_bits % cfg.link_width == 0 and cfg.flits_per_vector >= 1


@FAST
@given(H=st.integers(-2, 3), I=st.integers(-2, 3), batch=st.integers(-2, 3), kind=st.sampled_from(["swiglu", "classic", "moe"]))
def test_example_ffn_rejects_bad_arguments_with_a_message(H, I, batch, kind):
    e = compiles_or_says_why(example_ffn, kind, H, I, batch)
    if kind == "moe" or min(H, I, batch) < 1:
        assert isinstance(e, CompileError)
