"""The link's SECDED code: the Python code (golden) on every single and double flip, and
the Amaranth encoder/decoder against it in Amaranth's simulator."""

import random

import pytest
from amaranth.sim import Simulator

from lpu_arch.c2c import EccStatus, ecc_bits, ecc_decode, ecc_encode
from hdl.link.ecc import EccDecoder, EccEncoder


@pytest.mark.parametrize("k", [10, 34])
def test_every_single_flip_corrected_every_double_detected(k):
    rng = random.Random(k)
    n = k + ecc_bits(k)
    for _ in range(20):
        d = rng.getrandbits(k)
        c = ecc_encode(d, k)
        assert ecc_decode(d, c, k) == (d, EccStatus.OK)
        word = d | c << k
        for i in range(n):
            w = word ^ (1 << i)
            assert ecc_decode(w & ((1 << k) - 1), w >> k, k) == (d, EccStatus.CORRECTED)
            for j in range(i + 1, n):
                w2 = w ^ (1 << j)
                assert ecc_decode(w2 & ((1 << k) - 1), w2 >> k, k)[1] == EccStatus.UNCORRECTABLE


def test_hardware_matches_the_code():
    k = 34
    n = k + ecc_bits(k)
    enc, dec = EccEncoder(k), EccDecoder(k)
    rng = random.Random(1)

    async def bench(ctx):
        for _ in range(60):
            d = rng.getrandbits(k)
            ctx.set(enc.data, d)
            c = ctx.get(enc.check)
            assert c == ecc_encode(d, k)
            word = d | c << k
            for flips in ([], [rng.randrange(n)], rng.sample(range(n), 2)):
                w = word
                for f in flips:
                    w ^= 1 << f
                ctx.set(dec.data, w & ((1 << k) - 1))
                ctx.set(dec.check, w >> k)
                want = ecc_decode(w & ((1 << k) - 1), w >> k, k)
                assert (ctx.get(dec.out), ctx.get(dec.status)) == (want[0], int(want[1])), flips

    from amaranth import Module
    top = Module()
    top.submodules.enc, top.submodules.dec = enc, dec
    sim = Simulator(top)
    sim.add_testbench(bench)
    sim.run()
