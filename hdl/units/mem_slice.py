"""MEM slice: flat SRAM on the streams, physically addressed, no cache; a READ's or
WRITE's address is relocated by its base register (``docs/isa.md``, "Base registers")."""

from amaranth import Array, Cat, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from lpu_arch.hostmap import load_row_bits
from lpu_arch.isa import ADDR_BITS, EAST, Op

from hdl.units.layouts import base_index, drive_masks, host_signature, relocated_slice_members, slice_members


class MemSlice(wiring.Component):
    """One MEM slice: ``mem_depth`` vectors of ``lanes`` bytes.

    ``READ s, a`` issued on cycle t drives vector ``a`` onto stream ``s`` on cycle t+1
    (``isa.READ_LATENCY``).  ``WRITE s, a`` issued on cycle t stores the value visible on
    stream ``s`` at this position on cycle t.  The SRAM is read-before-write: a READ and
    a WRITE of one address on one cycle read the old value.

    The address is ``a + offset`` of the instruction's base register (``bases``; 21 bits,
    so beyond ``mem_depth`` is a fault as for an unrelocated address).  When the register
    is off the instruction *skips*: a READ leaves the SRAM alone and drives a zero vector
    on the same cycle and stream, a WRITE stores nothing and is no event; neither can fault.

    Members
    -------
    issue, tap, drive, driving
        Every slice's (``layouts.slice_members``): a READ drives one stream a cycle at most.
    start, run, bases, skip
        A relocated slice's (``layouts.relocated_slice_members``): ``start`` clears
        ``addr_fault``; a READ or WRITE skips.
    write_event : Out(1), write_addr : Out(ADDR_BITS), write_data : Out(vector_bits)
        A WRITE that does not skip is executing this cycle (for the event trace), at the
        relocated address.
    addr_fault : Out(1)
        Sticky until ``start``: an instruction addressed (relocated) beyond ``mem_depth``.
    host : In(host_signature)
        Word ``row * words_per_vector + w`` is 32-bit word ``w`` (lanes ``4w..4w+3``,
        lane ``4w`` in the low byte) of vector ``row``.  Only while the tile is stopped.
    load_we : In(1), load_row : In(load_row_bits), load_data : In(vector_bits)
        The vector load port's lane for this slice (``hostmap.LOAD_REGIONS``).
    """

    def __init__(self, cfg):
        self.cfg = cfg
        super().__init__({
            **slice_members(cfg),
            **relocated_slice_members(cfg),
            "write_event": Out(1),
            "write_addr": Out(ADDR_BITS),
            "write_data": Out(cfg.vector_bits),
            "addr_fault": Out(1),
            "host": In(host_signature(cfg)),
            "load_we": In(1),
            "load_row": In(load_row_bits(cfg)),
            "load_data": In(cfg.vector_bits),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self.cfg
        wpv = cfg.words_per_vector
        m.submodules.sram = sram = Memory(shape=cfg.vector_bits, depth=cfg.mem_depth, init=[])
        rd = sram.read_port()
        wr = sram.write_port(granularity=cfg.HOST_WORD)

        ins = self.issue.instr
        base = self.bases[base_index(cfg, ins)]
        addr = Signal(ADDR_BITS + 1)              # the relocated address
        m.d.comb += addr.eq(ins.addr + base.offset)
        # A READ or WRITE naming an off register skips; one naming an on register accesses.
        is_read = self.issue.valid & (ins.op == Op.READ)
        is_write = self.issue.valid & (ins.op == Op.WRITE)
        m.d.comb += self.skip.eq((is_read | is_write) & base.off)
        reads, writes = is_read & ~base.off, is_write & ~base.off
        in_range = (addr >> cfg.mem_addr_bits) == 0
        with m.If(self.start):
            m.d.sync += self.addr_fault.eq(0)
        with m.Elif((reads | writes) & ~in_range):
            m.d.sync += self.addr_fault.eq(1)

        h_row = Signal(cfg.mem_addr_bits)
        h_word = Signal(range(max(wpv, 2)))
        m.d.comb += [h_row.eq(self.host.addr // wpv), h_word.eq(self.host.addr % wpv)]

        # The stream a WRITE stores, one signal for both of its uses.
        passing = Signal(cfg.vector_bits)
        m.d.comb += passing.eq(Mux(ins.dir == EAST, Cat(*self.tap.east).word_select(ins.stream, cfg.vector_bits),
                                   Cat(*self.tap.west).word_select(ins.stream, cfg.vector_bits)))
        with m.If(self.run):
            m.d.comb += [
                rd.addr.eq(addr),
                rd.en.eq(reads),            # the SRAM output changes only when it is used
                wr.addr.eq(addr),
                wr.data.eq(passing),
                wr.en.eq(Mux(writes & in_range, (1 << wpv) - 1, 0)),
            ]
        with m.Else():
            m.d.comb += [
                rd.addr.eq(h_row),
                rd.en.eq(self.host.sel & self.host.re),
            ]
            with m.If(self.load_we):
                m.d.comb += [
                    wr.addr.eq(self.load_row),
                    wr.data.eq(self.load_data),
                    wr.en.eq(Mux((self.load_row >> cfg.mem_addr_bits) == 0, (1 << wpv) - 1, 0)),
                ]
            with m.Else():
                m.d.comb += [
                    wr.addr.eq(h_row),
                    wr.data.eq(self.host.wdata.replicate(wpv)),
                    wr.en.eq(Mux(self.host.sel & self.host.we, 1 << h_word, 0)),
                ]
        m.d.comb += [
            self.write_event.eq(writes),
            self.write_addr.eq(addr),
            self.write_data.eq(passing),
        ]

        # READ: drive the SRAM output (a skip: zeros) onto the stream on the next cycle.
        drv_dir, drv_stream, drv_zero = Signal(1), Signal.like(ins.stream), Signal()
        m.d.sync += [self.driving.eq(is_read & (base.off | in_range)), drv_dir.eq(ins.dir),
                     drv_stream.eq(ins.stream), drv_zero.eq(base.off)]
        drive_masks(m, self.drive, self.driving, drv_dir, drv_stream)
        value = Signal(cfg.vector_bits)
        m.d.comb += value.eq(Mux(drv_zero, 0, rd.data))
        m.d.comb += [self.drive.east.data[0].eq(value), self.drive.west.data[0].eq(value)]

        h_word_q = Signal.like(h_word)
        m.d.sync += h_word_q.eq(h_word)
        words = [rd.data[32 * w: 32 * (w + 1)] for w in range(wpv)]
        m.d.comb += self.host.rdata.eq(words[0] if wpv == 1 else Array(words)[h_word_q])
        return m

