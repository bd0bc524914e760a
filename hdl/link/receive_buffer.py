"""The vectors RECV pops, the last stage of the receive chain (``docs/c2c.md`` "Hardware";
``docs/assurance.md`` says what is proved of it)."""

from amaranth import Elaboratable, Module, Mux, Signal
from amaranth.hdl import ResetInserter
from amaranth.lib import stream, wiring
from amaranth.lib.fifo import FIFOInterface
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out


class VectorFifo(Elaboratable, FIFOInterface):
    """A synchronous FIFO of ``depth`` (2 or more) entries that takes a write whenever it
    holds fewer than ``depth``: ``w_rdy`` is ``level < depth`` on every cycle.

    The interface and read timing of ``amaranth.lib.fifo.SyncFIFOBuffered``: a memory of
    ``depth - 1`` entries with a synchronous read port (the inner FIFO) feeding an output
    register (``r_data``, valid with ``r_rdy``).  An entry written on cycle t counts in
    ``level`` from t+1 and is on ``r_data`` from t+2 (from the cycle after the ``r_en``
    that pops the one before it, if later); ``r_en`` with ``r_rdy`` pops it.

    The difference is ``w_rdy``.  ``SyncFIFOBuffered``'s is the inner FIFO's (not full),
    and the inner FIFO cannot take a write on the cycle it hands its oldest entry to an
    empty output register.  At depth 2 (an inner FIFO of one entry) that cycle is the one
    after a write into the empty FIFO, so a second write then is refused with one entry
    held.  Here the inner FIFO takes that write: the memory is read before it is written
    on the same edge, so the slot read is free for it.  (At depth 3 or more the inner
    FIFO is never full while the output register is empty, so the two take the same
    writes.)
    """

    def __init__(self, *, width: int, depth: int):
        assert depth >= 2
        super().__init__(width=width, depth=depth)
        self.level = Signal(range(depth + 1))

    def elaborate(self, platform):
        m = Module()
        inner_depth = self.depth - 1
        inner_level = Signal(range(inner_depth + 1))
        # The oldest inner entry moves to the output register (empty, or popped now).
        advance = (inner_level != 0) & (~self.r_rdy | self.r_en)
        do_write = self.w_rdy & self.w_en
        m.d.comb += [
            self.level.eq(inner_level + self.r_rdy),
            self.w_rdy.eq(self.level != self.depth),
            self.w_level.eq(self.level), self.r_level.eq(self.level),
        ]

        def incr(v):
            return Mux(v == inner_depth - 1, 0, v + 1)

        m.submodules.storage = storage = Memory(shape=self.width, depth=inner_depth, init=[])
        w_port, r_port = storage.write_port(), storage.read_port(domain="sync")
        produce, consume = Signal(range(inner_depth)), Signal(range(inner_depth))
        m.d.comb += [w_port.addr.eq(produce), w_port.data.eq(self.w_data), w_port.en.eq(do_write),
                     r_port.addr.eq(consume), r_port.en.eq(advance), self.r_data.eq(r_port.data)]
        with m.If(do_write):
            m.d.sync += produce.eq(incr(produce))
        with m.If(advance):
            m.d.sync += consume.eq(incr(consume))
        with m.If(do_write & ~advance):
            m.d.sync += inner_level.eq(inner_level + 1)
        with m.If(advance & ~do_write):
            m.d.sync += inner_level.eq(inner_level - 1)
        with m.If(advance):
            m.d.sync += self.r_rdy.eq(1)
        with m.Elif(self.r_en):
            m.d.sync += self.r_rdy.eq(0)
        return m


class ReceiveBuffer(wiring.Component):
    """The receive buffer: ``rx_depth`` vectors (:class:`VectorFifo`) that RECV pops.

    Members
    -------
    i_stream : In(stream.Signature(vector_bits, always_ready=True))
        Vectors to keep, on any cycles (back to back too).  Never refused: one that finds
        the buffer full (``rx_depth`` held, a vector RECV'd on this cycle still counting) is
        lost and flagged.
    recv : In(1)
        RECV this cycle (qualified by the core not being stalled): pop the oldest vector.
    recv_data : Out(vector_bits)
        The popped vector, from the cycle after ``recv`` until the next ``recv`` (0 after an
        underflow).  Holding it lets a core stalled right after RECV drive it later.
    level : Out(range(rx_depth + 1)), max_level : Out(range(rx_depth + 1))
        Vectors in the buffer now (a pushed vector counts from the next cycle; ``recv`` can
        pop it from the cycle after that), and the most since the last ``clear`` (one cycle
        behind ``level``).
    overflow, underflow : Out(1)
        Sticky: a vector found the buffer full; a RECV found it empty.
    clear : In(1)
        Tile start: empties the buffer and clears the flags and ``max_level``.
    """

    def __init__(self, cfg):
        self.cfg = cfg
        super().__init__({
            "i_stream": In(stream.Signature(cfg.vector_bits, always_ready=True)),
            "recv": In(1), "recv_data": Out(cfg.vector_bits),
            "level": Out(range(cfg.rx_depth + 1)), "max_level": Out(range(cfg.rx_depth + 1)),
            "overflow": Out(1), "underflow": Out(1), "clear": In(1),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self.cfg
        m.submodules.fifo = fifo = ResetInserter(self.clear)(VectorFifo(width=cfg.vector_bits,
                                                                        depth=cfg.rx_depth))
        push = self.i_stream.valid
        m.d.comb += [fifo.w_en.eq(push), fifo.w_data.eq(self.i_stream.payload), self.level.eq(fifo.level)]

        # RECV: pop and register (C2C_LATENCY = 1); held until the next RECV.
        m.d.comb += fifo.r_en.eq(self.recv)
        with m.If(self.recv):
            m.d.sync += self.recv_data.eq(Mux(fifo.r_rdy, fifo.r_data, 0))

        with m.If(self.clear):
            m.d.sync += [self.overflow.eq(0), self.underflow.eq(0), self.max_level.eq(0)]
        with m.Else():
            with m.If(push & ~fifo.w_rdy):
                m.d.sync += self.overflow.eq(1)
            with m.If(self.recv & ~fifo.r_rdy):
                m.d.sync += self.underflow.eq(1)
            with m.If(fifo.level > self.max_level):
                m.d.sync += self.max_level.eq(fifo.level)
        return m
