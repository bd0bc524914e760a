"""MXM slice: weight-stationary matrix-vector unit: int8 with int32 accumulators, or (an
FP8 tile, ``TileConfig.mxm_dtype``) E4M3 with exact fixed-point accumulators of
``TileConfig.acc_bits`` (``hdl/units/fp8.py``).

Implements ``LW``, ``MM`` and ``LX`` of ``lpu_arch/isa.py`` (``docs/isa.md``,
"Compute slices").  One class serves both hemispheres: ``MXM_W`` (west of the VXM in
either layout) drives east, ``MXM_E`` west, towards the VXM; both read the streams their
instructions' ``dir`` names.  ``MM`` comes from the MXM's own queue, ``LW`` and ``LX``
from its loader queue (``MXL_W``/``MXL_E``), so the two issue in the same cycle.

Pipeline of ``MM`` issued on cycle t::

    t     sample x from the stream (or address the x slot) and remember which weight
          block is active on this cycle
    t+1   the products W[r][c] * x[c] with that block, each into a register (the
          multipliers' own output registers); address acc[A]
    t+2   p = the sum of row r's products; new = p or acc[A] + p; write acc[A]; ``nan``
          (FP8: a NaN operand among the products, from the rows' registers)
    t+3   with EMIT, drive new as acc_planes byte planes on streams out.. (MXM_LATENCY;
          4 for int32)

The accumulator read port is transparent for its write port, so an MM on t+1 into the
row written on t+2 reads the new value (back-to-back accumulation).  The register between
the multipliers and the sum keeps the x slot's block RAM, the multipliers and the
accumulation out of one combinational path (``docs/fpga.md``).
"""

from amaranth import Array, Cat, Const, Elaboratable, Module, Mux, Signal, signed, unsigned
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from lpu_arch import fp8
from lpu_arch.isa import EAST, MM_ACC_BITS, WEST, MMFlag, Op

from hdl.units.arith import balanced_sum
from hdl.top.dedup import place
from hdl.units.fp8 import product
from hdl.units.layouts import drive_signature, flag_bit, index_bits, issue_signature, operand, tap_bundle, tap_signature


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
    issue, ld_issue, tap, drive, driving
        As ``layouts.slice_members``: ``issue`` from the MXM's queue (MM), ``ld_issue`` from
        its loader (LW, LX); ``drive`` is ``EMIT``'s ``acc_planes`` planes (``side``'s way).
    nan : Out(1)
        An FP8 tile's ``MM`` issued on cycle t multiplied a NaN code (``fp8.NAN_CODES``) of
        x or of the active weight block: high on t+2 (with the sums), from the rows'
        registers; those products counted 0 (``Status.NAN_OPERAND``).  Always 0 on an
        int8 tile.

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
            "ld_issue": In(issue_signature()),
            "tap": In(tap_signature(cfg)),
            "drive": Out(drive_signature(cfg, per_stream=True)),
            "driving": Out(1),
            "nan": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self.cfg
        L, S = cfg.lanes, cfg.streams
        VB = cfg.vector_bits
        ins, ld = self.issue.instr, self.ld_issue.instr
        is_mm = self.issue.valid & (ins.op == Op.MM)
        is_lw = self.ld_issue.valid & (ld.op == Op.LW)
        is_lx = self.ld_issue.valid & (ld.op == Op.LX)

        # Every expression used more than once is a signal: Amaranth builds an expression
        # anew at each use (at full scale a weight row's mux used by 320 products would be
        # 320 copies of a 2560-bit mux).
        mm_streams = tap_bundle(m, cfg, self.tap, ins.dir == EAST, is_mm, "mm_stream")
        x_stream = Signal(VB)
        m.d.comb += x_stream.eq(Array(mm_streams)[ins.stream])
        lx_streams = tap_bundle(m, cfg, self.tap, ld.dir == EAST, is_lx, "lx_stream")
        lx_stream = Signal(VB)
        m.d.comb += lx_stream.eq(Array(lx_streams)[ld.stream])

        # ---- weights: two blocks of L rows (row r = output lane r, in MxmRow r) --------
        act = Signal()                     # index of the active block

        # ---- LW loader ------------------------------------------------------------------
        # The load in progress (cur_*: rows cur_base.. next, one group of n per cycle) and one
        # waiting LW (pend_*: its load starts when pend_wait reaches 0), so that the next
        # block's LW issues while this block loads.  An LW with delay 0, or a waiting one
        # whose delay has run out, starts on this cycle (c_*: the state seen this cycle).
        delay_bits = len(operand(ld, Op.LW, "delay"))
        # (*_n: rows per cycle; *_r, with cfg.mxm_partial_lw: rows the LW loads,
        # isa.Instr.lw_rows: 0 or beyond L is L; without, every LW loads all L rows)
        partial = bool(cfg.mxm_partial_lw)
        cur_active, cur_base, cur_n = Signal(), Signal(range(L + 1)), Signal(range(L + 1))
        cur_s, cur_dir = Signal.like(ld.stream), Signal()
        pend_valid, pend_wait, pend_n = Signal(), Signal(delay_bits), Signal(range(L + 1))
        pend_s, pend_dir = Signal.like(ld.stream), Signal()
        c_active, c_base, c_n = Signal(), Signal(range(L + 1)), Signal(range(L + 1))
        c_s, c_dir = Signal.like(ld.stream), Signal()
        lw_n = operand(ld, Op.LW, "n")
        lw_rows = Mux(lw_n > L, L, lw_n)
        if partial:
            cur_r, pend_r, c_r = Signal(range(L + 1)), Signal(range(L + 1)), Signal(range(L + 1))
            lw_r_op = operand(ld, Op.LW, "rows")
            lw_r = Mux((lw_r_op == 0) | (lw_r_op > L), L, lw_r_op)
        else:
            cur_r = pend_r = c_r = lw_r = None
        rows_eq = lambda dst, src: [dst.eq(src)] if partial else []     # (the row limit's share of a case)
        lw_now, lw_later, ripe = Signal(), Signal(), Signal()
        m.d.comb += [lw_now.eq(is_lw & (ld.delay == 0) & (lw_n != 0)),
                     lw_later.eq(is_lw & (ld.delay != 0) & (lw_n != 0)),
                     ripe.eq(pend_valid & (pend_wait == 0))]
        with m.If(lw_now):
            m.d.comb += [c_active.eq(1), c_base.eq(0), c_n.eq(lw_rows), c_s.eq(ld.stream), c_dir.eq(ld.dir),
                         *rows_eq(c_r, lw_r)]
        with m.Elif(ripe):
            m.d.comb += [c_active.eq(1), c_base.eq(0), c_n.eq(pend_n), c_s.eq(pend_s), c_dir.eq(pend_dir),
                         *rows_eq(c_r, pend_r)]
        with m.Else():
            m.d.comb += [c_active.eq(cur_active), c_base.eq(cur_base), c_n.eq(cur_n), c_s.eq(cur_s),
                         c_dir.eq(cur_dir), *rows_eq(c_r, cur_r)]
        load_now = c_active
        next_base = Signal(range(2 * L + 1))
        m.d.comb += next_base.eq(c_base + c_n)
        last_group = next_base >= (c_r if partial else L)
        m.d.sync += [cur_n.eq(c_n), cur_s.eq(c_s), cur_dir.eq(c_dir), *rows_eq(cur_r, c_r)]
        ld_streams = tap_bundle(m, cfg, self.tap, c_dir == EAST, load_now, "ld_stream")
        # Row r loads stream (c_s + r - c_base) mod 2**sb (a stream beyond S: zeros).  One
        # rotation of the streams by (c_s - c_base) mod 2**sb serves every row: row r takes
        # rotated[r mod 2**sb] (a log-depth rotator instead of one S-way mux per row).
        sb = index_bits(S)
        offset = Signal(sb)
        m.d.comb += offset.eq(c_s - c_base)
        rotated = ld_streams + [Const(0, VB)] * ((1 << sb) - S)
        for k in range(sb):
            step = 1 << k
            stage = [Signal(VB, name=f"ld_rot{k}_{j}") for j in range(1 << sb)]
            m.d.comb += [v.eq(Mux(offset[k], rotated[(j + step) % (1 << sb)], rotated[j]))
                         for j, v in enumerate(stage)]
            rotated = stage
        with m.If(self.start):             # (the rows clear their weights)
            m.d.sync += [cur_active.eq(0), pend_valid.eq(0), act.eq(0)]
        with m.Else():
            with m.If(lw_later):
                m.d.sync += [pend_valid.eq(1), pend_wait.eq(ld.delay - 1), pend_n.eq(lw_rows),
                             pend_s.eq(ld.stream), pend_dir.eq(ld.dir), *rows_eq(pend_r, lw_r)]
            with m.Elif(ripe):
                m.d.sync += pend_valid.eq(0)
            with m.Elif(pend_valid):
                m.d.sync += pend_wait.eq(pend_wait - 1)
            with m.If(c_active):
                # Rows c_base .. c_base+n-1 from streams s .. s+n-1 into the shadow block;
                # after the last group the loaded block is active from the next cycle on.
                m.d.sync += [cur_active.eq(~last_group), cur_base.eq(next_base)]
                with m.If(last_group):
                    m.d.sync += act.eq(~act)

        # ---- x slots (LX writes on its issue cycle; MM reads the old value) -------------
        AB, P = cfg.acc_bits, cfg.acc_planes
        m.submodules.xbuf = xbuf = Memory(shape=unsigned(VB), depth=cfg.mxm_xbuf_depth, init=[])
        m.submodules.acc = acc = Memory(shape=unsigned(AB * L), depth=cfg.mxm_acc_depth, init=[])
        xw = xbuf.write_port()
        xr = xbuf.read_port(domain="sync")
        aw = acc.write_port()
        ar = acc.read_port(domain="sync", transparent_for=(aw,))
        xb, ab = index_bits(cfg.mxm_xbuf_depth), index_bits(cfg.mxm_acc_depth)
        mm_acc = ins.addr[0:MM_ACC_BITS]
        mm_slot = ins.addr[MM_ACC_BITS:]
        # ---- MM stage 1 (t+1): the products --------------------------------------------
        q_mm, q_flags, q_acc, q_out, q_act = Signal(), Signal(8), Signal(ab), Signal.like(ins.stream), Signal()
        q_x = Signal(VB)
        # Operands are registered only when an MM issues: between MMs the product array
        # sees no changes (event-driven simulators then skip it).
        m.d.sync += q_mm.eq(is_mm)
        with m.If(is_mm):
            m.d.sync += [q_flags.eq(ins.aux), q_acc.eq(mm_acc[:ab]), q_out.eq(operand(ins, Op.MM, "out")),
                         q_act.eq(act), q_x.eq(x_stream)]
        x = Signal(VB)
        m.d.comb += x.eq(Mux(q_flags[flag_bit(MMFlag.XBUF)], xr.data, q_x))
        m.d.comb += [
            xw.addr.eq(ld.addr[:xb]), xw.data.eq(lx_stream), xw.en.eq(is_lx),
            xr.addr.eq(mm_slot[:xb]), xr.en.eq(is_mm),
            ar.addr.eq(q_acc), ar.en.eq(q_mm),
        ]

        # ---- MM stage 2 (t+2): the sums and the accumulation -----------------------------
        s_mm, s_flags, s_acc, s_out = Signal(), Signal(8), Signal(ab), Signal.like(ins.stream)
        m.d.sync += s_mm.eq(q_mm)
        with m.If(q_mm):
            m.d.sync += [s_flags.eq(q_flags), s_acc.eq(q_acc), s_out.eq(q_out)]
        new, nans = [], []
        for r in range(L):
            # Rows c_base .. c_base+n-1 load on a load cycle (not on a start).
            load = Signal(name=f"load_{r}")
            in_group = load_now & (c_base <= r) & (r < next_base)
            m.d.comb += load.eq(in_group & (r < c_r) if partial else in_group)
            p, nan = Signal(signed(AB), name=f"p_{r}"), Signal(name=f"nan_{r}")
            place(m, f"row{r}", MxmRow(cfg, start=self.start, load=load, act=act, src=rotated[r % (1 << sb)],
                                       q_mm=q_mm, q_act=q_act, x=x, p=p, nan=nan))
            nans.append(nan)
            old = ar.data[AB * r: AB * r + AB].as_signed()
            nr = Signal(signed(AB), name=f"new_{r}")
            m.d.comb += nr.eq(Mux(s_flags[flag_bit(MMFlag.ACC)], old + p, p))
            new.append(nr)
        new_vec = Cat(*new)
        m.d.comb += [aw.addr.eq(s_acc), aw.data.eq(new_vec), aw.en.eq(s_mm)]
        m.d.comb += self.nan.eq(Cat(*nans).any())        # the rows' registers, ORed (t+2)

        # ---- MM stage 3 (t+3): EMIT's planes --------------------------------------------
        e_valid, e_out, e_val = Signal(), Signal.like(ins.stream), Signal(AB * L)
        m.d.sync += e_valid.eq(s_mm & s_flags[flag_bit(MMFlag.EMIT)])
        with m.If(s_mm):
            m.d.sync += [e_out.eq(s_out), e_val.eq(new_vec)]
        lanes_ext = [Cat(e_val[AB * r: AB * r + AB], e_val[AB * r + AB - 1].replicate(8 * P - AB))
                     for r in range(L)]       # each accumulator sign-extended to whole planes
        planes = [Cat(*(lanes_ext[r][8 * b: 8 * b + 8] for r in range(L))) for b in range(P)]
        port = self.drive.east if self.out_dir == EAST else self.drive.west
        for s in range(S):
            k = Signal(range(S), name=f"plane_of_{s}")     # s - out, valid when < P
            m.d.comb += k.eq(s - e_out)
            m.d.comb += port.mask[s].eq(e_valid & (e_out <= s) & (k < P))
            m.d.comb += port.data[s].eq(Array(planes)[k[:(P - 1).bit_length()]])
        m.d.comb += self.driving.eq(e_valid)
        return m


class MxmRow(Elaboratable):
    """Output lane ``r`` of an MXM: row ``r`` of both weight blocks, its products with x
    and their sum (an ``hdl.top.dedup`` unit: the ports are the MXM's signals).

    ``start`` clears both rows; else on ``load`` the shadow block's row (block 0 while
    ``act`` is 1, else block 1) takes ``src``.  On a cycle with ``q_mm`` the products of
    the active block's row (block ``q_act``) and ``x``, lane by lane as int8 (or exactly as
    E4M3, ``hdl.units.fp8.product``), go into registers; ``p`` is their sum on the next cycle.
    ``nan`` (FP8) is a register beside them: high on that next cycle when one of those
    products had a NaN operand (counted 0), else low; always 0 on an int8 tile.
    """

    def __init__(self, cfg, *, start, load, act, src, q_mm, q_act, x, p, nan):
        self.cfg = cfg
        self.start, self.load, self.act, self.src, self.q_mm, self.q_act, self.x, self.p, self.nan = (
            start, load, act, src, q_mm, q_act, x, p, nan)

    @property
    def module_name(self):
        return f"lpu_mxm_row_{self.cfg.lanes}" + ("_fp8" if self.cfg.mxm_dtype == "fp8" else "")

    def ports(self):
        return {"start": (self.start, "i"), "load": (self.load, "i"), "act": (self.act, "i"),
                "src": (self.src, "i"), "q_mm": (self.q_mm, "i"), "q_act": (self.q_act, "i"), "x": (self.x, "i"),
                "p": (self.p, "o"), "nan": (self.nan, "o")}

    def standalone(self):
        return MxmRow(self.cfg, **{n: Signal(v.shape(), name=n) for n, (v, _) in self.ports().items()})

    def elaborate(self, platform):
        m = Module()
        L, VB = self.cfg.lanes, self.cfg.vector_bits
        w0, w1 = Signal(VB, name="w0"), Signal(VB, name="w1")
        with m.If(self.start):
            m.d.sync += [w0.eq(0), w1.eq(0)]
        with m.Elif(self.load):
            with m.If(self.act):
                m.d.sync += w0.eq(self.src)
            with m.Else():
                m.d.sync += w1.eq(self.src)
        row = Signal(VB)                                # the active block's row
        m.d.comb += row.eq(Mux(self.q_act, w1, w0))
        # One register per product, loaded only on an MM's product cycle (so the sum sees
        # no changes between MMs).
        fp = self.cfg.mxm_dtype == "fp8"
        terms = [Signal(signed(fp8.PRODUCT_BITS if fp else 16), name=f"prod_{c}") for c in range(L)]
        nans = []
        for c, t in enumerate(terms):
            w, x = row[8 * c: 8 * c + 8], self.x[8 * c: 8 * c + 8]
            if fp:
                v, nan = product(m, w, x, f"fp8_{c}")
                nans.append(nan)
            else:
                v = w.as_signed() * x.as_signed()
            with m.If(self.q_mm):
                m.d.sync += t.eq(v)
        m.d.comb += self.p.eq(balanced_sum(terms))
        # The NaN flag: one register, set on this MM's product cycle only (a pulse beside p).
        if fp:
            m.d.sync += self.nan.eq(self.q_mm & Cat(*nans).any())
        else:
            m.d.comb += self.nan.eq(0)
        return m
