"""MXM slice: weight-stationary int8 matrix-vector unit with int32 accumulators.

Implements ``LW``, ``MM`` and ``LX`` of ``firmware_gen/isa.py`` (``docs/isa.md``,
"Compute slices").  One class serves both hemispheres: ``MXM_W`` (position 0) drives
east, ``MXM_E`` (the last position) drives west; both read the streams named by their
instructions' ``dir`` field (in practice the ones flowing towards them).

Pipeline of ``MM`` issued on cycle t::

    t     sample x from the stream (or address the x slot), address acc[A], and
          remember which weight block is active on this cycle
    t+1   p = W . x with that block; new = p or acc[A] + p; write acc[A]
    t+2   with EMIT, drive new as 4 byte planes on streams out..out+3 (MXM_LATENCY)

The accumulator read port is transparent for its write port, so an MM on t+1 into the
row written on t+1 reads the new value (back-to-back accumulation).
"""

from amaranth import Array, Cat, Module, Mux, Signal, signed, unsigned
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from firmware_gen.isa import EAST, INT32_PLANES, MM_ACC_BITS, WEST, MMFlag, Op

from .layouts import drive_signature, issue_signature, stream_bundle, tap_signature


def _bits(depth: int) -> int:
    return max((depth - 1).bit_length(), 1)


def _flag(flag) -> int:
    """Bit index of a one-bit flag in the ``aux`` field."""
    return int(flag).bit_length() - 1


class MXM(wiring.Component):
    """One MXM.

    Parameters
    ----------
    cfg : TileConfig
    side : str
        ``"W"`` (``MXM_W``, drives east) or ``"E"`` (``MXM_E``, drives west).

    Members
    -------
    start : In(1)
        Clears both weight buffers, the active-block select and any load in progress.
    issue : In(issue_signature)
        From this slice's instruction queue.
    tap : In(tap_signature)
        Stream values visible at this position.
    drive : Out(drive_signature)
        ``EMIT``'s four planes, in the direction fixed by ``side``.
    busy : Out(1)
        An ``EMIT`` is being driven this cycle.

    Weight block rows, accumulator rows and x slots are indexed modulo their depths
    (programs that pass ``Program.validate`` never exceed them).
    """

    def __init__(self, cfg, side: str):
        if side not in ("W", "E"):
            raise ValueError(f"MXM side must be 'W' or 'E', got {side!r}")
        self.cfg, self.side = cfg, side
        self.out_dir = EAST if side == "W" else WEST
        super().__init__({
            "start": In(1),
            "issue": In(issue_signature()),
            "tap": In(tap_signature(cfg)),
            "drive": Out(drive_signature(cfg)),
            "busy": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self.cfg
        L, S = cfg.lanes, cfg.streams
        VB = cfg.vector_bits
        ins = self.issue.instr
        is_lw = self.issue.valid & (ins.op == Op.LW)
        is_mm = self.issue.valid & (ins.op == Op.MM)
        is_lx = self.issue.valid & (ins.op == Op.LX)

        def bundle(dir_sig, enable):
            """The streams of direction ``dir_sig`` at this position while ``enable`` (else
            zeros: the logic behind sees no changes between uses), as a list of vectors."""
            v = Signal(stream_bundle(cfg))
            with m.If(enable):
                m.d.comb += v.eq(Mux(dir_sig == EAST, self.tap.east.as_value(), self.tap.west.as_value()))
            return [v[s] for s in range(S)]

        ins_streams = bundle(ins.dir, is_mm | is_lx)
        x_stream = Array(ins_streams)[ins.stream]

        # ---- weights: two blocks of L rows (row r = output lane r), active select -------
        wbuf = [[Signal(VB, name=f"w{b}_r{r}") for r in range(L)] for b in range(2)]
        act = Signal()                     # index of the active block

        # ---- LW loader ------------------------------------------------------------------
        # Registered state, and the state seen this cycle (an LW issuing now overrides it).
        ld_active, ld_wait = Signal(), Signal(8)
        ld_base, ld_n = Signal(range(L + 1)), Signal(range(L + 1))
        ld_s, ld_dir = Signal.like(ins.stream), Signal()
        c_active, c_wait = Signal(), Signal(8)
        c_base, c_n = Signal(range(L + 1)), Signal(range(L + 1))
        c_s, c_dir = Signal.like(ins.stream), Signal()
        lw_n = ins.count[:16]
        with m.If(is_lw):
            m.d.comb += [c_active.eq(lw_n != 0), c_wait.eq(ins.delay), c_base.eq(0),
                         c_n.eq(Mux(lw_n > L, L, lw_n)), c_s.eq(ins.stream), c_dir.eq(ins.dir)]
        with m.Else():
            m.d.comb += [c_active.eq(ld_active), c_wait.eq(ld_wait), c_base.eq(ld_base),
                         c_n.eq(ld_n), c_s.eq(ld_s), c_dir.eq(ld_dir)]
        load_now = c_active & (c_wait == 0)
        next_base = c_base + c_n
        last_group = next_base >= L
        m.d.sync += [ld_n.eq(c_n), ld_s.eq(c_s), ld_dir.eq(c_dir)]
        ld_streams = bundle(c_dir, load_now)
        with m.If(self.start):
            m.d.sync += [ld_active.eq(0), act.eq(0)]
            m.d.sync += [w.eq(0) for blk in wbuf for w in blk]
        with m.Elif(c_active):
            with m.If(c_wait != 0):
                m.d.sync += [ld_active.eq(1), ld_wait.eq(c_wait - 1), ld_base.eq(c_base)]
            with m.Else():
                # Rows c_base .. c_base+n-1 from streams s .. s+n-1 into the shadow block;
                # after the last group the loaded block is active from the next cycle on.
                m.d.sync += [ld_active.eq(~last_group), ld_wait.eq(0), ld_base.eq(next_base)]
                with m.If(last_group):
                    m.d.sync += act.eq(~act)
                for r in range(L):
                    hit = (c_base <= r) & (r < next_base)
                    src = Array(ld_streams)[(c_s + r - c_base)[:_bits(S)]]
                    with m.If(hit):
                        with m.If(act):
                            m.d.sync += wbuf[0][r].eq(src)
                        with m.Else():
                            m.d.sync += wbuf[1][r].eq(src)

        # ---- x slots (LX writes on its issue cycle; MM reads the old value) -------------
        xbuf = Memory(shape=unsigned(VB), depth=cfg.mxm_xbuf_depth, init=[])
        acc = Memory(shape=unsigned(32 * L), depth=cfg.mxm_acc_depth, init=[])
        m.submodules.xbuf = xbuf
        m.submodules.acc = acc
        xw = xbuf.write_port()
        xr = xbuf.read_port(domain="sync")
        aw = acc.write_port()
        ar = acc.read_port(domain="sync", transparent_for=(aw,))
        xb, ab = _bits(cfg.mxm_xbuf_depth), _bits(cfg.mxm_acc_depth)
        mm_acc = ins.addr[0:MM_ACC_BITS]
        mm_slot = ins.addr[MM_ACC_BITS:]
        m.d.comb += [
            xw.addr.eq(ins.addr[:xb]), xw.data.eq(x_stream), xw.en.eq(is_lx),
            xr.addr.eq(mm_slot[:xb]), xr.en.eq(is_mm),
            ar.addr.eq(mm_acc[:ab]), ar.en.eq(is_mm),
        ]

        # ---- MM stage 1 (t+1) -----------------------------------------------------------
        q_mm, q_flags, q_acc, q_out, q_act = Signal(), Signal(8), Signal(ab), Signal.like(ins.stream), Signal()
        q_x = Signal(VB)
        # Operands are registered only when an MM issues: between MMs the product array
        # sees no changes (event-driven simulators then skip it).
        m.d.sync += q_mm.eq(is_mm)
        with m.If(is_mm):
            m.d.sync += [q_flags.eq(ins.aux), q_acc.eq(mm_acc[:ab]), q_out.eq(ins.count[:5]),
                         q_act.eq(act), q_x.eq(x_stream)]
        x = Signal(VB)
        m.d.comb += x.eq(Mux(q_flags[_flag(MMFlag.XBUF)], xr.data, q_x))
        xs = [x[8 * c: 8 * c + 8].as_signed() for c in range(L)]
        new = []
        for r in range(L):
            row = Mux(q_act, wbuf[1][r], wbuf[0][r])
            terms = [row[8 * c: 8 * c + 8].as_signed() * xs[c] for c in range(L)]
            while len(terms) > 1:                  # balanced adder tree
                terms = [terms[i] + terms[i + 1] if i + 1 < len(terms) else terms[i]
                         for i in range(0, len(terms), 2)]
            p = Signal(signed(32), name=f"p_{r}")
            old = ar.data[32 * r: 32 * r + 32].as_signed()
            m.d.comb += p.eq(terms[0])
            nr = Signal(signed(32), name=f"new_{r}")
            m.d.comb += nr.eq(Mux(q_flags[_flag(MMFlag.ACC)], old + p, p))
            new.append(nr)
        new_vec = Cat(*new)
        m.d.comb += [aw.addr.eq(q_acc), aw.data.eq(new_vec), aw.en.eq(q_mm)]

        # ---- MM stage 2 (t+2): EMIT's planes --------------------------------------------
        e_valid, e_out, e_val = Signal(), Signal.like(ins.stream), Signal(32 * L)
        m.d.sync += e_valid.eq(q_mm & q_flags[_flag(MMFlag.EMIT)])
        with m.If(q_mm):
            m.d.sync += [e_out.eq(q_out), e_val.eq(new_vec)]
        planes = [Cat(*(e_val[32 * r + 8 * b: 32 * r + 8 * b + 8] for r in range(L)))
                  for b in range(INT32_PLANES)]
        port = self.drive.east if self.out_dir == EAST else self.drive.west
        data = []
        for s in range(S):
            k = Signal(range(S), name=f"plane_of_{s}")     # s - out, valid when < 4
            m.d.comb += k.eq(s - e_out)
            m.d.comb += port.mask[s].eq(e_valid & (e_out <= s) & (k < INT32_PLANES))
            data.append(Array(planes)[k[:2]])
        m.d.comb += port.data.eq(Cat(*data))          # one assignment of the whole bundle
        m.d.comb += self.busy.eq(e_valid)
        return m
