"""SXM slice: structured data movement across lanes.

Implements ``SHIFT``, ``PERM``, ``DIST``, ``TRI`` and ``TRO`` of ``lpu_arch/isa.py``, and
``MAX`` on a tile built with ``TileConfig.sxm_max`` (lane mappings in
``firmware_gen.golden.archmodel.sxm_apply``; ``docs/isa.md``).  Every output lane is one
``lanes``-way multiplexer whose select is computed from the instruction: a shift amount, a
map byte from a second stream, or a broadcast/replicate pattern.  ``MAX`` sends the second
stream (``with``) through the same multiplexers with ``SHIFT``'s rotation towards lane 0 by
``k``, and keeps per lane the signed larger of that and the first stream's lane.  The result is registered and driven
``SXM_LATENCY`` (1) cycle after issue.

With ``TileConfig.sxm_argmax``, ``ARGMAX`` reads an accumulator vector (``acc_planes`` byte
planes), finds its largest lane in a tree of comparisons (the lower lane wins a tie) and keeps
the running maximum and its index in two registers; its result is that index in lanes 0..3.
With ``TileConfig.sxm_setb``, ``SETB`` hands the tile a base register write (``setb``: lanes
0..3 of its stream, shifted), which the tile's base file takes at the clock edge.
"""

from amaranth import Array, Cat, Const, Module, Mux, Signal, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import Out

from lpu_arch.isa import BASE_OFFSET_BITS, EAST, INDEX_BYTES, OPERANDS, SXM_LATENCY, ArgmaxFlag, Op, SxmFlag

from hdl.units.layouts import flag_bit, index_bits, operand, setb_signature, slice_members

assert SXM_LATENCY == 1, "the SXM below registers its result once"
assert (OPERANDS[Op.MAX]["with"], OPERANDS[Op.MAX]["k"], OPERANDS[Op.MAX]["out"]) == \
    (OPERANDS[Op.PERM]["map"], OPERANDS[Op.SHIFT]["k"], OPERANDS[Op.SHIFT]["out"]), \
    "MAX's operands share PERM's map and SHIFT's k and out below"


class SXM(wiring.Component):
    """One SXM.

    Members
    -------
    issue, tap, drive, driving
        Every slice's (``layouts.slice_members``): the result goes out on stream ``out``,
        east and/or west.
    setb
        With ``sxm_setb``: a ``SETB``'s base register write (``layouts.setb_signature``).
    """

    def __init__(self, cfg):
        self.cfg = cfg
        members = slice_members(cfg)
        if cfg.sxm_setb:
            members["setb"] = Out(setb_signature())
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        cfg = self.cfg
        L, S = cfg.lanes, cfg.streams
        ins = self.issue.instr
        op = Signal.like(ins.op)
        m.d.comb += op.eq(Mux(self.issue.valid, ins.op, 0))

        def stream(index):
            v = Signal(cfg.vector_bits)
            m.d.comb += v.eq(Mux(ins.dir == EAST, Array(self.tap.east)[index], Array(self.tap.west)[index]))
            return v

        x = stream(ins.stream)
        idx_map = stream(operand(ins, Op.PERM, "map"))     # also MAX's w (its with stream)
        src_vec = x
        if cfg.sxm_max:                         # MAX selects lanes of w, the others of x
            src_vec = Signal(cfg.vector_bits)
            m.d.comb += src_vec.eq(Mux(op == Op.MAX, idx_map, x))
        lanes = Array(src_vec[8 * i: 8 * i + 8] for i in range(L))

        k = operand(ins, Op.SHIFT, "k")        # also DIST's k, TRI's row and TRO's col
        g_mask = Signal(len(operand(ins, Op.DIST, "g")))
        m.d.comb += g_mask.eq(ins.delay - 1)
        down, rot = ins.aux[flag_bit(SxmFlag.DOWN)], ins.aux[flag_bit(SxmFlag.ROT)]
        shifts = [Op.SHIFT]
        if cfg.sxm_max:                         # MAX takes w[(i + k) mod L]: SHIFT's ROT|DOWN select
            shifts.append(Op.MAX)
            down, rot = down | (op == Op.MAX), rot | (op == Op.MAX)

        # Transpose buffer: rows written by TRI, columns read by TRO (before this cycle's TRI).
        buf = [Signal(cfg.vector_bits, name=f"tbuf_{r}") for r in range(L)]
        col = ins.addr[:index_bits(L)]         # TRI's row, TRO's column
        with m.If(op == Op.TRI):
            m.d.sync += Array(buf)[col].eq(x)

        y = Signal(cfg.vector_bits)
        for i in range(L):
            src = Signal(signed(12), name=f"src_{i}")
            ok = Signal(name=f"ok_{i}")
            with m.Switch(op):
                with m.Case(*shifts):
                    raw = Signal(signed(12), name=f"raw_{i}")
                    m.d.comb += raw.eq(Mux(down, i + k, i - k))
                    with m.If(rot):
                        m.d.comb += [src.eq(Mux(raw < 0, raw + L, Mux(raw >= L, raw - L, raw))), ok.eq(1)]
                    with m.Else():
                        m.d.comb += [src.eq(raw), ok.eq((raw >= 0) & (raw < L))]
                with m.Case(Op.PERM):
                    byte = idx_map[8 * i: 8 * i + 8]
                    m.d.comb += [src.eq(byte), ok.eq(byte < L)]
                with m.Case(Op.DIST):
                    m.d.comb += [src.eq(k + (Const(i, 8) & g_mask)), ok.eq(1)]
            lane = Signal(8, name=f"y_{i}")
            with m.If(op == Op.TRO):
                rows = Array(buf[i][8 * c: 8 * c + 8] for c in range(L))
                m.d.comb += lane.eq(rows[col])
            with m.Elif(ok):
                m.d.comb += lane.eq(lanes[src[:index_bits(L)]])
            if cfg.sxm_max:                     # MAX: the signed larger of x[i] and that lane
                xi = x[8 * i: 8 * i + 8]
                larger = (op == Op.MAX) & (xi.as_signed() > lane.as_signed())
                m.d.comb += y[8 * i: 8 * i + 8].eq(Mux(larger, xi, lane))
            else:
                m.d.comb += y[8 * i: 8 * i + 8].eq(lane)

        # Register and drive on the next cycle.
        produces = (op == Op.SHIFT) | (op == Op.PERM) | (op == Op.DIST) | (op == Op.TRO)
        if cfg.sxm_max:
            produces |= op == Op.MAX
        if cfg.sxm_argmax:
            produces |= op == Op.ARGMAX
            y = self._argmax(m, op, ins, stream, y)
        if cfg.sxm_setb:
            value = Signal(8 * INDEX_BYTES)
            m.d.comb += [value.eq(x[:8 * INDEX_BYTES]), self.setb.we.eq(op == Op.SETB),
                         self.setb.reg.eq(operand(ins, Op.SETB, "reg")),
                         self.setb.offset.eq((value << operand(ins, Op.SETB, "shift"))[:BASE_OFFSET_BITS])]
        q_y, q_e, q_w = Signal.like(y), Signal(), Signal()
        q_out = Signal(range(max(S, 2)))
        m.d.sync += [
            q_y.eq(y), q_out.eq(operand(ins, Op.SHIFT, "out")),
            q_e.eq(produces & ins.aux[flag_bit(SxmFlag.OUT_E)]),
            q_w.eq(produces & ins.aux[flag_bit(SxmFlag.OUT_W)]),
        ]
        one_hot = Signal(S)
        m.d.comb += one_hot.eq(Const(1, S) << q_out)
        for port, on in ((self.drive.east, q_e), (self.drive.west, q_w)):
            m.d.comb += [port.mask.eq(Mux(on, one_hot, 0)), port.data[0].eq(q_y)]
        m.d.comb += self.driving.eq(q_e | q_w)
        return m

    def _argmax(self, m, op, ins, stream, y):
        """``ARGMAX``: the running maximum and index, updated on its issue; the value the SXM
        drives: ``y``, or with ``ARGMAX`` the running index after this vector in lanes 0..3."""
        cfg = self.cfg
        L, P, bits = cfg.lanes, cfg.acc_planes, cfg.acc_bits
        assert OPERANDS[Op.ARGMAX]["out"] == OPERANDS[Op.SHIFT]["out"], "ARGMAX drives SHIFT's out"
        planes = [stream(ins.stream + b) for b in range(P)]
        level = []
        for i in range(L):             # lane i's value: byte b from plane b
            v = Signal(signed(bits), name=f"arg_v{i}")
            m.d.comb += v.eq(Cat(*(planes[b][8 * i: 8 * i + 8] for b in range(P)))[:bits])
            level.append((v, Const(i, index_bits(L))))
        while len(level) > 1:          # pairs of neighbours: the right one only when strictly larger
            nxt = []
            for k in range(0, len(level) - 1, 2):
                (va, ia), (vb, ib) = level[k], level[k + 1]
                v, i = Signal(signed(bits)), Signal(index_bits(L))
                m.d.comb += [v.eq(Mux(vb > va, vb, va)), i.eq(Mux(vb > va, ib, ia))]
                nxt.append((v, i))
            if len(level) % 2:
                nxt.append(level[-1])
            level = nxt
        vmax, lane = level[0]
        best, best_index = Signal(signed(bits)), Signal(8 * INDEX_BYTES)
        take = ins.aux[flag_bit(ArgmaxFlag.FIRST)] | (vmax > best)
        index = Signal(8 * INDEX_BYTES)
        m.d.comb += index.eq(Mux(take, operand(ins, Op.ARGMAX, "index") + lane, best_index))
        with m.If((op == Op.ARGMAX) & take):
            m.d.sync += [best.eq(vmax), best_index.eq(index)]
        out = Signal.like(y)
        m.d.comb += out.eq(Mux(op == Op.ARGMAX, index, y))
        return out
