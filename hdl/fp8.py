"""FP8 E4M3 arithmetic units (``lpu_arch/fp8.py`` defines the format and the exact
fixed-point results these must produce).

``Fp8Mul`` multiplies two codes exactly: each operand is a 4-bit significand and a shift
(``e - 1``, 0 for a subnormal), so the product is one 4x4-bit multiply shifted left by the
sum of the shifts (0..28), signed: an integer number of ``2^-18`` in ``PRODUCT_BITS``
bits.  A NaN operand makes the product 0 and raises ``nan``.

``Fp8Dot`` is a row of them summed by a balanced adder tree in ``acc_bits(lanes)`` bits:
the exact dot product of two vectors of codes, independent of the order of the sum.
"""

from amaranth import Cat, Module, Mux, Signal, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from lpu_arch import fp8

from .arith import balanced_sum


def _operand(m, code, name):
    """(sign, significand, shift, is NaN) of an 8-bit code."""
    M, E = fp8.MAN_BITS, fp8.EXP_BITS
    e, man = code[M:M + E], code[:M]
    sig, sh = Signal(M + 1, name=f"{name}_sig"), Signal(E, name=f"{name}_sh")
    m.d.comb += [sig.eq(Mux(e == 0, man, man | 1 << M)), sh.eq(Mux(e == 0, 0, e - 1))]
    return code[M + E], sig, sh, code[:M + E].all()


class Fp8Mul(wiring.Component):
    """``p = a * b`` exactly, in units of ``2^-18`` (``fp8.PRODUCT_BITS`` signed); 0 and
    ``nan`` high when either code is NaN.  Combinational."""

    a: In(8)
    b: In(8)
    p: Out(signed(fp8.PRODUCT_BITS))
    nan: Out(1)

    def elaborate(self, platform):
        m = Module()
        sa, ga, ha, na = _operand(m, self.a, "a")
        sb, gb, hb, nb = _operand(m, self.b, "b")
        mag = Signal(fp8.PRODUCT_BITS - 1)
        m.d.comb += [mag.eq((ga * gb) << (ha + hb)), self.nan.eq(na | nb)]
        with m.If(~self.nan):
            m.d.comb += self.p.eq(Mux(sa ^ sb, -mag, mag))
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

