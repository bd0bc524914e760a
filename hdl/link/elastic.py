"""The link's clock crossing, the first stage of the receive chain (``docs/c2c.md`` "Hardware")."""

from amaranth import Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.cdc import FFSynchronizer
from amaranth.lib.fifo import AsyncFIFO
from amaranth.lib.wiring import In, Out

from lpu_arch.c2c import flit_bits, flit_fields

from hdl.link.flit import flit_body_layout, flit_field


class ElasticBuffer(wiring.Component):
    """The link's clock crossing: an ``AsyncFIFO`` of ``ELASTIC_DEPTH`` flits (without the
    valid bit) written on the sender's clock ``w_domain`` (source-synchronous) and read on
    "sync", where every flit is popped as soon as it shows and registered.  Never stalls: a
    flit that finds the buffer full is lost and flagged.

    Members
    -------
    flit : In(flit_bits), in ``w_domain``
        The wire.  Every flit with its valid bit set is written by the next sender edge.
    o_stream : Out(stream.Signature(flit_body_layout, always_ready=True))
        The flits in order, at most one per cycle, from the output register: a flit is
        valid after the third receiver edge following the sender edge that writes it (two
        synchronise the write pointer, one pops it into the register), 2 to 3 receiver
        periods later by phase (in simulation; a real synchroniser may take an edge more).
    level : Out(range(ELASTIC_DEPTH + 1))
        Flits in the buffer now, as the read side sees it (combinational: the synchronised
        write pointer less the read pointer).
    overflow : Out(1)
        Sticky: a flit found the buffer full.  The sender's clock counts them in a Gray code
        (one bit changes per event, so it crosses safely), synchronised here (two edges);
        any change since the last look sets the flag on the next edge: the third receiver
        edge after the sender edge that dropped the flit.
    clear : In(1)
        Clears ``overflow``, except for an overflow that crosses on the same cycle (it
        stays flagged).
    """

    OVF_BITS = 4   # the Gray-coded count of dropped flits (only its changes matter)

    def __init__(self, cfg, w_domain: str):
        self.cfg, self.w_domain = cfg, w_domain
        super().__init__({
            "flit": In(flit_bits(cfg)),
            "o_stream": Out(stream.Signature(flit_body_layout(cfg), always_ready=True)),
            "level": Out(range(cfg.ELASTIC_DEPTH + 1)),
            "overflow": Out(1), "clear": In(1),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self.cfg
        base = flit_fields(cfg)["kind"][0]
        layout = flit_body_layout(cfg)
        m.submodules.fifo = fifo = AsyncFIFO(width=layout.size, depth=cfg.ELASTIC_DEPTH,
                                             r_domain="sync", w_domain=self.w_domain)
        valid = flit_field(self.flit, cfg, "valid")
        m.d.comb += [fifo.w_en.eq(valid), fifo.w_data.eq(self.flit[base:]), self.level.eq(fifo.r_level)]

        n = self.OVF_BITS
        w_ovf_bin, w_ovf_gray = Signal(n, name="w_ovf_bin"), Signal(n, name="w_ovf_gray")
        w_ovf_next = Signal(n, name="w_ovf_next")
        m.d.comb += w_ovf_next.eq(w_ovf_bin + 1)        # n bits: 15 + 1 wraps to 0 (and its code to 0)
        with m.If(valid & ~fifo.w_rdy):
            m.d[self.w_domain] += [w_ovf_bin.eq(w_ovf_next), w_ovf_gray.eq(w_ovf_next ^ (w_ovf_next >> 1))]
        ovf_gray, ovf_seen, ovf_new = Signal(n), Signal(n), Signal()
        m.submodules.ovf_sync = FFSynchronizer(w_ovf_gray, ovf_gray)
        m.d.comb += ovf_new.eq(ovf_gray != ovf_seen)
        m.d.sync += ovf_seen.eq(ovf_gray)
        with m.If(self.clear):
            m.d.sync += self.overflow.eq(ovf_new)
        with m.Elif(ovf_new):
            m.d.sync += self.overflow.eq(1)

        # Pop whatever shows and register it.
        m.d.comb += fifo.r_en.eq(1)
        m.d.sync += [self.o_stream.valid.eq(fifo.r_rdy), self.o_stream.payload.eq(fifo.r_data)]
        return m
