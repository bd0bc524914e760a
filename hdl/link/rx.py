"""The link's receiver: the receive chain composed (``docs/c2c.md`` "Hardware", LinkRx)."""

from amaranth import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from lpu_arch.c2c import flit_bits
from lpu_arch.hostmap import LINK_COUNT_BITS

from hdl.link.assembler import VectorAssembler
from hdl.link.elastic import ElasticBuffer
from hdl.link.flit_decoder import FlitDecoder
from hdl.link.receive_buffer import ReceiveBuffer


class LinkRx(wiring.Component):
    """Receive side of one link: elastic buffer, error correction, vector assembly.

    ``flit`` is in the sender's clock domain ``w_domain``; everything else in "sync".  A
    composition of four stages connected by streams that never stall (``always_ready``):
    :class:`ElasticBuffer` (a flit comes out after the third receiver edge following the
    sender edge that writes it) -> :class:`FlitDecoder` (1 cycle; control flits leave here
    as pulses) -> :class:`VectorAssembler` (0 cycles) -> :class:`ReceiveBuffer` (a vector
    counts in ``level`` 1 cycle after its last flit leaves the decoder, RECV can pop it 1
    cycle after that).

    Members
    -------
    The stages' members under their names (``elastic_level``: the :class:`ElasticBuffer`'s
    ``level``).
    overflow : Out(1)
        Sticky: a flit found the elastic buffer full or a vector the receive buffer full.
    clear : In(1)
        Tile start: clears every stage (the receive buffer, the flags and counters).
    """

    def __init__(self, cfg, w_domain: str):
        self.cfg, self.w_domain = cfg, w_domain
        super().__init__({
            "flit": In(flit_bits(cfg)),
            "recv": In(1), "recv_data": Out(cfg.vector_bits),
            "sync_valid": Out(1), "probe_valid": Out(1), "echo_valid": Out(1),
            "ctrl_value": Out(cfg.link_width),
            "level": Out(range(cfg.rx_depth + 1)), "max_level": Out(range(cfg.rx_depth + 1)),
            "elastic_level": Out(range(cfg.ELASTIC_DEPTH + 1)),
            "overflow": Out(1), "underflow": Out(1), "uncorrectable": Out(1),
            "corrected": Out(LINK_COUNT_BITS), "uncorrected": Out(LINK_COUNT_BITS),
            "clear": In(1),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self.cfg
        m.submodules.elastic = el = ElasticBuffer(cfg, self.w_domain)
        m.submodules.decoder = dec = FlitDecoder(cfg)
        m.submodules.assembler = asm = VectorAssembler(cfg)
        m.submodules.buffer = buf = ReceiveBuffer(cfg)
        wiring.connect(m, el.o_stream, dec.i_stream)
        wiring.connect(m, dec.o_stream, asm.i_stream)
        wiring.connect(m, asm.o_stream, buf.i_stream)
        m.d.comb += [
            el.flit.eq(self.flit), self.elastic_level.eq(el.level),
            self.sync_valid.eq(dec.sync_valid), self.probe_valid.eq(dec.probe_valid),
            self.echo_valid.eq(dec.echo_valid), self.ctrl_value.eq(dec.ctrl_value),
            self.corrected.eq(dec.corrected), self.uncorrected.eq(dec.uncorrected),
            self.uncorrectable.eq(dec.uncorrectable),
            buf.recv.eq(self.recv), self.recv_data.eq(buf.recv_data),
            self.level.eq(buf.level), self.max_level.eq(buf.max_level),
            self.overflow.eq(el.overflow | buf.overflow), self.underflow.eq(buf.underflow),
        ]
        for stage in (el, dec, asm, buf):
            m.d.comb += stage.clear.eq(self.clear)
        return m
