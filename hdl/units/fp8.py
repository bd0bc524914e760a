"""FP8 E4M3 arithmetic (``lpu_arch/fp8.py`` defines the format and the exact fixed-point
results): :func:`product` and :func:`round_to_code` add their logic to a module (the MXM's
products, the VXM's FP8 requantiser); ``Fp8Mul`` and ``Fp8Dot`` are components of them.

A product is exact: each operand is a 4-bit significand and a shift (``e - 1``, 0 for a
subnormal), so it is one 4x4-bit multiply shifted left by the sum of the shifts (0..28).
"""

from amaranth import Cat, Const, Module, Mux, Signal, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from lpu_arch import fp8

from hdl.units.arith import balanced_sum


def _operand(m, code, name):
    """(sign, significand, shift, is NaN) of an 8-bit code."""
    M, E = fp8.MAN_BITS, fp8.EXP_BITS
    e, man = code[M:M + E], code[:M]
    sig, sh = Signal(M + 1, name=f"{name}_sig"), Signal(E, name=f"{name}_sh")
    m.d.comb += [sig.eq(Mux(e == 0, man, man | 1 << M)), sh.eq(Mux(e == 0, 0, e - 1))]
    return code[M + E], sig, sh, code[:M + E].all()


def product(m, a, b, name):
    """``(p, nan)``: the exact product of codes ``a`` and ``b`` in units of ``2^-18``
    (``fp8.PRODUCT_BITS`` signed, 0 when either is NaN) and whether one is NaN."""
    sa, ga, ha, na = _operand(m, a, f"{name}_a")
    sb, gb, hb, nb = _operand(m, b, f"{name}_b")
    mag = Signal(fp8.PRODUCT_BITS - 1, name=f"{name}_mag")
    p, nan = Signal(signed(fp8.PRODUCT_BITS), name=name), Signal(name=f"{name}_nan")
    m.d.comb += [mag.eq((ga * gb) << (ha + hb)), nan.eq(na | nb)]
    m.d.comb += p.eq(Mux(nan, 0, Mux(sa ^ sb, -mag, mag)))
    return p, nan


def round_to_code(m, prod, shift, name):
    """The E4M3 code nearest to ``prod / 2^shift`` units of ``2^-9`` (``prod`` signed,
    ``|prod| < 2^62``; ``shift`` unsigned): ``lpu_arch.fp8.round_to_code``, whose
    docstring gives the steps.  Returns an 8-bit signal."""
    w = len(prod)
    sign = Signal(name=f"{name}_sign")
    mag = Signal(w, name=f"{name}_mag")
    m.d.comb += [sign.eq(prod[-1]), mag.eq(Mux(sign, -prod, prod))]
    lead = Signal(range(w), name=f"{name}_lead")       # position of mag's leading one (0 for 0)
    for i in range(w):
        with m.If(mag[i]):
            m.d.comb += lead.eq(i)
    big = Signal(name=f"{name}_big")                   # 4 significant bits need more than shift
    total = Signal(range(w + 64), name=f"{name}_t")
    m.d.comb += [big.eq(lead > shift + (fp8.MAN_BITS)), total.eq(Mux(big, lead - fp8.MAN_BITS, shift))]
    q = Signal(fp8.MAN_BITS + 2, name=f"{name}_q")
    rem, half = Signal(w, name=f"{name}_rem"), Signal(w, name=f"{name}_half")
    m.d.comb += [
        q.eq(mag >> total),
        rem.eq(mag & ((Const(1, w + 1) << total) - 1)),
        half.eq((Const(1, w + 1) << total) >> 1),
    ]
    up = Signal(name=f"{name}_up")
    m.d.comb += up.eq((total != 0) & ((rem > half) | ((rem == half) & q[0])))
    code7 = Signal(range(8 * (w + 64) + 32), name=f"{name}_c7")
    m.d.comb += code7.eq(((total - shift) << fp8.MAN_BITS) + q + up)
    low = Signal(7, name=f"{name}_low")
    m.d.comb += low.eq(Mux(code7 > fp8.MAX_CODE, fp8.MAX_CODE, code7))
    out = Signal(8, name=name)
    m.d.comb += out.eq(Cat(low, sign & (low != 0)))
    return out


class Fp8Mul(wiring.Component):
    """``p = a * b`` exactly, in units of ``2^-18`` (``fp8.PRODUCT_BITS`` signed); 0 and
    ``nan`` high when either code is NaN.  Combinational."""

    a: In(8)
    b: In(8)
    p: Out(signed(fp8.PRODUCT_BITS))
    nan: Out(1)

    def elaborate(self, platform):
        m = Module()
        p, nan = product(m, self.a, self.b, "prod")
        m.d.comb += [self.p.eq(p), self.nan.eq(nan)]
        return m


class Fp8Dot(wiring.Component):
    """``sum_i a[i] * b[i]`` over ``lanes`` pairs of codes, exact in ``fp8.acc_bits(lanes)``
    signed bits; ``nan`` when any operand is NaN (those products count as 0)."""

    def __init__(self, lanes: int):
        self.lanes = lanes
        self.bits = fp8.acc_bits(lanes)
        super().__init__({"a": In(8 * lanes), "b": In(8 * lanes), "sum": Out(signed(self.bits)), "nan": Out(1)})

    def elaborate(self, platform):
        m = Module()
        terms, nans = [], []
        for i in range(self.lanes):
            m.submodules[f"mul{i}"] = mul = Fp8Mul()
            m.d.comb += [mul.a.eq(self.a[8 * i:8 * i + 8]), mul.b.eq(self.b[8 * i:8 * i + 8])]
            terms.append(mul.p)
            nans.append(mul.nan)
        m.d.comb += [self.sum.eq(balanced_sum(terms)), self.nan.eq(Cat(*nans).any())]
        return m

