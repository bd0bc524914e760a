"""SECDED encoder and decoder of a flit: combinational, with the parity masks and bit
positions of ``lpu_arch.c2c``, so that the hardware and the golden model use one code."""

from amaranth import Cat, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from lpu_arch.c2c import EccStatus, ecc_bits, hamming_positions, parity_bits, parity_masks


def _xor_masked(data, mask: int):
    bits = [data[j] for j in range(len(data)) if mask >> j & 1]
    return Cat(*bits).xor() if bits else 0


class EccEncoder(wiring.Component):
    """``check`` = Hamming parity of ``data`` (bits ``0..r-1``) and the overall parity (bit r)."""

    def __init__(self, k: int):
        self.k = k
        super().__init__({"data": In(k), "check": Out(ecc_bits(k))})

    def elaborate(self, platform):
        m = Module()
        r = parity_bits(self.k)
        par = Cat(*(_xor_masked(self.data, mk) for mk in parity_masks(self.k)))
        m.d.comb += [self.check[:r].eq(par), self.check[r].eq(self.data.xor() ^ par.xor())]
        return m


class EccDecoder(wiring.Component):
    """Corrects one flipped bit of ``data`` or ``check``; flags two.

    ``status``: ``EccStatus`` (OK, CORRECTED, UNCORRECTABLE); ``out`` is the corrected data."""

    def __init__(self, k: int):
        self.k = k
        super().__init__({"data": In(k), "check": In(ecc_bits(k)), "out": Out(k), "status": Out(2)})

    def elaborate(self, platform):
        m = Module()
        k, r = self.k, parity_bits(self.k)
        par, overall = self.check[:r], self.check[r]
        syndrome = Signal(r)
        m.d.comb += syndrome.eq(Cat(*(_xor_masked(self.data, mk) for mk in parity_masks(k))) ^ par)
        odd = Signal()
        m.d.comb += odd.eq(self.data.xor() ^ par.xor() ^ overall)
        pos = hamming_positions(k)
        flip = Cat(*(odd & (syndrome == p) for p in pos))
        m.d.comb += self.out.eq(self.data ^ flip)
        is_pow2_or_zero = (syndrome & (syndrome - 1)) == 0
        in_code = Cat(*(syndrome == p for p in pos)).any() | is_pow2_or_zero
        with m.If((syndrome == 0) & ~odd):
            m.d.comb += self.status.eq(EccStatus.OK)
        with m.Elif(odd & in_code):
            m.d.comb += self.status.eq(EccStatus.CORRECTED)
        with m.Else():
            m.d.comb += self.status.eq(EccStatus.UNCORRECTABLE)
        return m
