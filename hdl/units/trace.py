"""Hardware event trace: records every MEM write (cycle, address, value) in an SRAM.

Tests read it back through the host interface instead of watching signals from Python
every cycle, so a run costs simulator time only.
"""

from amaranth import Array, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from lpu_arch.hostmap import trace_words
from lpu_arch.isa import ADDR_BITS

from hdl.units.layouts import host_signature, trace_layout


class EventTrace(wiring.Component):
    """``trace_depth`` entries of ``[cycle, address, vector]``, filled in event order.

    Members
    -------
    start : In(1)        clears the count and the overflow flag.
    event : In(1), cycle : In(CYCLE_BITS), addr : In(ADDR_BITS), data : In(vector_bits)
        One event to record this cycle.
    count : Out(16+1)    events recorded since start.
    overflow : Out(1)    sticky until start: an event arrived with the buffer full.
    host : In(host_signature)
        Word ``entry * trace_words + k``: k = 0 cycle, 1 address, 2.. the vector's words.
    """

    def __init__(self, cfg):
        self.cfg = cfg
        super().__init__({
            "start": In(1),
            "event": In(1),
            "cycle": In(cfg.CYCLE_BITS),
            "addr": In(ADDR_BITS),
            "data": In(cfg.vector_bits),
            "count": Out(range(cfg.trace_depth + 1)),
            "overflow": Out(1),
            "host": In(host_signature(cfg)),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self.cfg
        tw = trace_words(cfg)
        m.submodules.buf = buf = Memory(shape=trace_layout(cfg), depth=cfg.trace_depth, init=[])
        rd = buf.read_port()
        wr = buf.write_port()
        full = self.count == cfg.trace_depth
        m.d.comb += [
            wr.addr.eq(self.count),
            wr.data.cycle.eq(self.cycle), wr.data.addr.eq(self.addr), wr.data.data.eq(self.data),
            wr.en.eq(self.event & ~full),
        ]
        with m.If(self.start):
            m.d.sync += [self.count.eq(0), self.overflow.eq(0)]
        with m.Elif(self.event):
            with m.If(full):
                m.d.sync += self.overflow.eq(1)
            with m.Else():
                m.d.sync += self.count.eq(self.count + 1)

        entry, word = Signal(range(cfg.trace_depth)), Signal(range(max(tw, 2)))
        m.d.comb += [entry.eq(self.host.addr // tw), word.eq(self.host.addr % tw), rd.addr.eq(entry)]
        word_q = Signal.like(word)
        m.d.sync += word_q.eq(word)
        raw = rd.data.as_value()
        W = cfg.HOST_WORD
        m.d.comb += self.host.rdata.eq(Array(raw[W * k: W * (k + 1)] for k in range(tw))[word_q])
        return m
