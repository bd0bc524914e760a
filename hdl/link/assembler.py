"""DATA flits to vectors, the third stage of the receive chain (``docs/c2c.md`` "Hardware")."""

from amaranth import Cat, Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out


class VectorAssembler(wiring.Component):
    """DATA flits to vectors: flit ``f`` of a vector carries its bits ``f*W..f*W+W-1``.

    Members
    -------
    i_stream : In(stream.Signature(link_width, always_ready=True))
        DATA flit payloads, at most one per cycle (gaps allowed).
    o_stream : Out(stream.Signature(vector_bits, always_ready=True))
        A whole vector on the cycle its ``flits_per_vector``-th flit is on ``i_stream``
        (0 cycles: the last flit goes straight through).
    clear : In(1)
        Drops a partly assembled vector (tile start): the next flit is a vector's first.
    """

    def __init__(self, cfg):
        self.cfg = cfg
        super().__init__({
            "i_stream": In(stream.Signature(cfg.link_width, always_ready=True)),
            "o_stream": Out(stream.Signature(cfg.vector_bits, always_ready=True)),
            "clear": In(1),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self.cfg
        W, F = cfg.link_width, cfg.flits_per_vector
        acc = Signal(cfg.vector_bits)
        got = Signal(range(max(F, 2)))
        whole = self.o_stream.payload
        m.d.comb += whole.eq(Cat(acc[W:], self.i_stream.payload) if F > 1 else self.i_stream.payload)
        with m.If(self.i_stream.valid):
            with m.If(got == F - 1):
                m.d.sync += got.eq(0)
                m.d.comb += self.o_stream.valid.eq(1)
            with m.Else():
                m.d.sync += got.eq(got + 1)
            m.d.sync += acc.eq(whole)
        with m.If(self.clear):
            m.d.sync += got.eq(0)
        return m
