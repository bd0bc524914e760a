"""Per-slice instruction queue (ICU): in-order issue, no interlocks.

Implements the timing rules of ``docs/isa.md``: one data instruction per cycle, ``NOP n``
waits n cycles, ``REPEAT n, d, stride`` re-issues the last data instruction n times every
d cycles with its address advanced by ``stride``.

Illegal words: an opcode the slice kind does not execute (``isa.slice_ops``: ``MAX`` at an
SXM only where ``TileConfig.sxm_max`` is 1), or a legal opcode with a bit set
that it does not use (``isa.USED_FIELDS``: a field it has no use for, the bits above a
named operand's width, an unknown flag, a base register beyond ``base_regs``), raises the
sticky ``illegal`` and halts the queue instead of issuing.  The check is one constant mask
per legal opcode (:func:`legal_word_mask`), generated from the ISA table.
"""

from amaranth import Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from lpu_arch.hostmap import load_row_bits
from lpu_arch.isa import BASE_BITS, BASE_OPS, DATA_OPS, FIELD, INSTR_BITS, Op, operand_word_mask, slice_ops, used_word_mask

from hdl.units.layouts import field_shape, host_signature, instr_layout, issue_signature


def legal_word_mask(cfg, op: Op) -> int:
    """The bits a word of opcode ``op`` may set in a tile of ``cfg``: ``isa.used_word_mask``,
    and for the base operand (``isa.BASE_OPS``, in ``delay``) only the bits of registers
    ``0..base_regs-1``; for ``LW``'s ``rows`` operand, none on a tile without the row limit
    (``TileConfig.mxm_partial_lw`` 0)."""
    mask = used_word_mask(op)
    if op in BASE_OPS:
        beyond = ((1 << BASE_BITS) - 1) & ~(cfg.base_regs - 1)
        mask &= ~(beyond << FIELD["delay"][0])
    if op == Op.LW and not cfg.mxm_partial_lw:
        mask &= ~operand_word_mask(op, "rows")
    return mask


class InstructionQueue(wiring.Component):
    """Instruction memory plus issue logic for one slice.

    Parameters
    ----------
    cfg : TileConfig
    kind : str
        Slice kind ("MEM", "VXM", "SXM", "MXM"): decides which opcodes are legal (with
        ``cfg``: ``isa.slice_ops``).

    Members
    -------
    start : In(1)
        One-cycle pulse: restart at instruction ``entry``.  The queue decodes one cycle
        ahead of the slice it feeds and issues from a register: the cycle after ``start``
        is its priming cycle (it decodes instruction ``entry`` while ``run`` is still low),
        and instruction ``entry`` issues on the cycle after that, the tile's cycle 0 (the
        tile raises ``run`` then: ``hdl/top/tile.py`` pulses the queues' start one cycle before
        its own).
    entry : In(iq_addr_bits)
        Where a start begins (the tile's ``Csr.ENTRY``: several programs held in one queue,
        one after the other, each started where it begins).
    run : In(1)
        High while the tile runs.
    issue : Out(issue_signature)
        The instruction issued this cycle, from a register.
    halted : Out(1)
        Set the cycle after HALT (or an illegal word) would have issued.
    illegal : Out(1)
        Sticky until the next ``start`` (cleared on the priming cycle), set the cycle after
        an illegal word (module docstring) would have issued; the queue halts.
    host : In(host_signature)
        Host access to the queue's memory: word ``2*i`` is the low half of instruction
        ``i``, ``2*i+1`` the high half.  Reads have one cycle of latency.
    load_we : In(1), load_row : In(load_row_bits), load_data : In(INSTR_BITS)
        The vector load port's lane for this queue (``hostmap.LOAD_REGIONS``).
    """

    def __init__(self, cfg, kind):
        self.cfg, self.kind = cfg, kind
        super().__init__({
            "start": In(1),
            "entry": In(cfg.iq_addr_bits),
            "run": In(1),
            "issue": Out(issue_signature()),
            "halted": Out(1),
            "illegal": Out(1),
            "host": In(host_signature(cfg)),
            "load_we": In(1),
            "load_row": In(load_row_bits(cfg)),
            "load_data": In(INSTR_BITS),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self.cfg
        lay = instr_layout()
        m.submodules.imem = imem = Memory(shape=lay.size, depth=cfg.iq_depth, init=[])
        rd = imem.read_port()
        wr = imem.write_port(granularity=cfg.HOST_WORD)

        pc = Signal(cfg.iq_addr_bits)
        pc_next = Signal(cfg.iq_addr_bits)
        wait = Signal(field_shape("count"))   # remaining NOP cycles
        in_rep = Signal()                     # inside a REPEAT
        rep_left = Signal(field_shape("count"))
        rep_timer = Signal(field_shape("delay"))
        rep_delay = Signal(field_shape("delay"))
        rep_stride = Signal(field_shape("addr"))
        last = Signal(lay)            # last issued data instruction (REPEAT's operand)
        head = lay(rd.data)           # instruction at pc (memory output is mem[pc])
        # The decode runs one cycle ahead of the issue: ``issue``, ``halted`` and
        # ``illegal`` are registers loaded from what the decode finds (``nxt``, ``halt``,
        # ``bad``), so the instruction memory's output reaches no slice combinationally.
        prime = Signal()              # the cycle after start: decode while run is still low
        active = Signal()
        nxt = issue_signature().create(path=("nxt",))
        halt, bad = Signal(), Signal()
        m.d.sync += [prime.eq(self.start), self.issue.valid.eq(nxt.valid), self.issue.instr.eq(nxt.instr),
                     self.halted.eq(halt), self.illegal.eq(bad)]
        m.d.comb += active.eq(self.run | prime)

        # Host access: only meaningful while the tile is stopped.
        word = self.host.addr[0]
        m.d.comb += rd.addr.eq(Mux(active | self.start, pc_next, self.host.addr[1:]))
        load_ok = (self.load_row >> cfg.iq_addr_bits) == 0
        with m.If(self.load_we):
            m.d.comb += [
                wr.addr.eq(self.load_row),
                wr.data.eq(self.load_data),
                wr.en.eq(Mux(load_ok & ~active, 0b11, 0)),
            ]
        with m.Else():
            m.d.comb += [
                wr.addr.eq(self.host.addr[1:]),
                wr.data.eq(self.host.wdata.replicate(2)),
                wr.en.eq(Mux(self.host.sel & self.host.we & ~active, Mux(word, 0b10, 0b01), 0)),
            ]
        word_q = Signal()
        m.d.sync += word_q.eq(word)
        m.d.comb += self.host.rdata.eq(Mux(word_q, rd.data[32:64], rd.data[0:32]))

        legal = slice_ops(self.kind, cfg)      # (an optional opcode only where the tile has it)
        # junk: the word at pc is a legal opcode with a bit set that the opcode does not use
        # (isa.USED_FIELDS) or a base register the tile does not have; one constant mask
        # compare per legal opcode.  An opcode that is not legal here falls to the Default
        # case below instead.
        junk = Signal()
        with m.Switch(head.op):
            for op in sorted(legal):
                unused = ~legal_word_mask(cfg, op) & ((1 << INSTR_BITS) - 1)
                with m.Case(op):
                    m.d.comb += junk.eq((head.as_value() & unused).any())
        m.d.comb += pc_next.eq(pc)
        m.d.sync += pc.eq(pc_next)

        # REPEAT bookkeeping shared by its first (decode) cycle and the later ones.
        rep_active = Signal()
        cur_left, cur_timer, cur_delay, cur_stride = (Signal(len(rep_left)), Signal(len(rep_timer)),
                                                      Signal(len(rep_delay)), Signal(len(rep_stride)))

        with m.If(self.start):
            m.d.comb += pc_next.eq(self.entry)
            m.d.sync += [halt.eq(0), bad.eq(0), wait.eq(0), in_rep.eq(0), last.eq(0)]
        with m.Elif(active & ~halt):
            with m.If(wait != 0):
                m.d.sync += wait.eq(wait - 1)
            with m.Elif(in_rep):
                m.d.comb += [rep_active.eq(1), cur_left.eq(rep_left), cur_timer.eq(rep_timer),
                             cur_delay.eq(rep_delay), cur_stride.eq(rep_stride)]
            with m.Elif(junk):
                m.d.sync += [halt.eq(1), bad.eq(1)]
            with m.Else():
                with m.Switch(head.op):
                    with m.Case(Op.HALT):
                        m.d.sync += halt.eq(1)
                    with m.Case(Op.NOP):
                        m.d.comb += pc_next.eq(pc + 1)
                        m.d.sync += wait.eq(head.count - 1)
                    with m.Case(Op.REPEAT):
                        m.d.comb += [pc_next.eq(pc + 1), rep_active.eq(1),
                                     cur_left.eq(head.count), cur_timer.eq(head.delay - 1),
                                     cur_delay.eq(head.delay), cur_stride.eq(head.addr)]
                    for op in sorted(DATA_OPS & legal):
                        with m.Case(op):
                            m.d.comb += [pc_next.eq(pc + 1), nxt.valid.eq(1),
                                         nxt.instr.eq(head)]
                            m.d.sync += last.eq(head)
                    with m.Default():
                        m.d.sync += [halt.eq(1), bad.eq(1)]

        with m.If(rep_active):
            m.d.sync += [rep_delay.eq(cur_delay), rep_stride.eq(cur_stride)]
            with m.If(cur_timer == 0):
                repeated = Signal(lay)
                m.d.comb += [repeated.eq(last), repeated.addr.eq(last.addr + cur_stride),
                             nxt.valid.eq(1), nxt.instr.eq(repeated)]
                m.d.sync += [last.eq(repeated), rep_timer.eq(cur_delay - 1),
                             rep_left.eq(cur_left - 1), in_rep.eq(cur_left != 1)]
            with m.Else():
                m.d.sync += [rep_timer.eq(cur_timer - 1), rep_left.eq(cur_left), in_rep.eq(1)]
        return m
