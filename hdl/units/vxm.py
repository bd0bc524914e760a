"""VXM slice: the vector unit at the centre of the tile.

Implements ``VOP`` of ``lpu_arch/isa.py`` (``docs/isa.md``, "Compute slices"): per
lane, bias add and requantisation of int32 A, optional activation table, optional gate
(requantised int32 B, int8 x int8 product, requantised again), driven as int8 on one
stream east and/or west ``TileConfig.vxm_latency`` (3 or 4) cycles after issue.

Pipeline of ``VOP`` issued on cycle t, with ``vxm_latency`` 4 (the FPGA presets)::

    t     read the parameter entry param + offset (asynchronous read port); va = A (+ B with ADD) +
          bias_a, vb = B + bias_b (int32 wrap-around adds), A from streams s..s+3 in
          direction dir, B from the same streams in the other direction
    t+1   pa = va * m_a, pb = vb * m_b (the multipliers' output registers)
    t+2   a = round(pa, s_a), b = round(pb, s_b) (the rounding shift and saturation of
          requantise); address the activation table: {the lane's table, a's byte}
    t+3   a = table[a] (TABLE); ab = a * b (int8 x int8)
    t+4   a = requantise(ab, m_c, s_c) (GATE); drive a (zeros for a skip or a parameter
          fault)

With ``vxm_latency`` 3 the products and their rounding are one stage (t+1), and the
table and the gate follow on t+2 and t+3.

On an FP8 tile (``TileConfig.mxm_dtype``) A and B arrive in ``acc_planes`` planes and the
adds are 48 bits wide (a bias field shifted left by ``fp8.BIAS_SHIFT``); every
requantisation is ``hdl.units.fp8.round_to_code`` of ``v * m`` (one rounding to the nearest
E4M3 code), the tables map codes to codes and the gate's product is the exact E4M3
product (``hdl.units.fp8.product``); the result is a code.

With ``vxm_latency`` 4 each stage after the first holds a product, a rounding shift, a
block RAM read and one 8 x 8 product, or (the gate's, 16 x 15) one whole requantisation:
the stages are balanced for the FPGA's clock (``docs/fpga.md``).

A VOP's parameter entry is ``param + offset`` of its base register (``docs/isa.md``,
"Base registers"); a skip or a ``param_fault`` drives a zero vector on the same streams and
cycle: the registers choose values, never timing.  Lane ``l``'s TABLE step looks up the
table its entry names (modulo ``vxm_tables``).  Parameters and tables power up as
``lpu_arch.vxm.reset_words`` (identity parameters and tables).
"""

from amaranth import Array, Cat, Module, Mux, Signal, signed, unsigned
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from lpu_arch.hostmap import load_row_bits
from lpu_arch import fp8
from lpu_arch.isa import EAST, Op, VopFlag
from lpu_arch.vxm import PARAM_WORDS, SHIFT_BITS, TABLE_SIZE, reset_words

from hdl.units.fp8 import product as fp8_product, round_to_code
from hdl.units.layouts import (base_index, flag_bit, host_signature, index_bits, operand, relocated_slice_members,
                               slice_members, tap_bundle, vxm_lane_layout)

# ---- arithmetic helpers -----------------------------------------------------------------
def requantise(m, v, mult, shift, name, fp=False):
    """``sat8((v * mult + (shift ? 1 << (shift-1) : 0)) >> shift)``, arithmetic shift; with
    ``fp``, the E4M3 code nearest to ``v * mult / 2^shift`` (:func:`hdl.units.fp8.round_to_code`).

    ``v`` signed (up to 32 bits, or an exact E4M3 product with ``fp``), ``mult`` unsigned(15),
    ``shift`` unsigned(6)."""
    prod = Signal(signed(len(v) + len(mult) + 1), name=f"{name}_prod")   # 48 bits for an int32 v
    m.d.comb += prod.eq(v * mult)
    return (round_to_code if fp else round_shift)(m, prod, shift, name)


def round_shift(m, prod, shift, name):
    """``sat8((prod + (shift ? 1 << (shift-1) : 0)) >> shift)`` of a signed product
    (``|prod| < 2**47``), arithmetic shift: the second half of :func:`requantise`.

    Shift first, round after: with ``q = prod >> shift`` and ``r`` the last bit shifted
    out (bit ``shift - 1`` of ``prod``, 0 for no shift), ``(prod + half) >> shift`` is
    exactly ``q + r``.  Saturation then needs only whether ``q``'s bits above its low 7
    are all zeros or all ones, and the add is 8 bits wide: no carry chain across the
    whole product before the shift."""
    w = len(prod) + 1
    twice = Signal(signed(w + 1), name=f"{name}_x2")    # prod * 2, so the shift keeps bit shift-1
    t = Signal(signed(w + 1), name=f"{name}_shr")       # (prod * 2) >> shift
    q = Signal(signed(w), name=f"{name}_q")             # prod >> shift
    r = Signal(name=f"{name}_r")
    hi = Signal(w - 7, name=f"{name}_hi")
    low = Signal(8, name=f"{name}_low")                  # q's low byte + r, when it fits
    out = Signal(signed(8), name=name)
    m.d.comb += [
        twice.eq(prod << 1),
        t.eq(twice >> shift),
        q.eq(t >> 1),
        r.eq(t[0]),
        hi.eq(q[7:]),
        low.eq(q[:8] + r),
    ]
    with m.If(hi.all()):                                 # -128 <= q < 0: q + r fits
        m.d.comb += out.eq(low)
    with m.Elif(~hi.any()):                              # 0 <= q <= 127
        m.d.comb += out.eq(Mux(q[:7].all() & r, 127, low))
    with m.Else():
        m.d.comb += out.eq(Mux(q[-1], -128, 127))
    return out


def divmod_const(m, x, d: int, name: str):
    """``(x // d, x % d)`` of an unsigned value by a constant, by reciprocal multiplication
    (exact for every value of ``x``; no divider in the netlist).  The remainder's ``q * d``
    is a sum of shifted copies of ``q``, one per set bit of ``d`` (a multiplier there would
    put a second DSP in series with the first, docs/fpga.md)."""
    a = (d & -d).bit_length() - 1           # d = odd << a
    odd = d >> a
    y = x >> a
    q = Signal(len(x), name=f"{name}_q")
    if odd == 1:
        m.d.comb += q.eq(y)
    else:
        k = len(y) + odd.bit_length()       # y * (M*odd - 2**k) < 2**k for every y
        mult = -(-(1 << k) // odd)
        m.d.comb += q.eq((y * mult) >> k)
    r = Signal(range(d), name=f"{name}_r")
    qd = sum(q.as_unsigned() << i for i in range(d.bit_length()) if d >> i & 1)
    m.d.comb += r.eq(x - qd)
    return q, r


class VXM(wiring.Component):
    """The VXM.

    Members
    -------
    start, run, bases, skip
        A relocated slice's (``layouts.relocated_slice_members``): ``start`` clears
        ``param_fault``; a VOP skips.
    param_fault : Out(1)
        Sticky until ``start``: a VOP's relocated parameter entry was beyond
        ``vxm_param_depth`` (``Status.PARAM_FAULT``).
    issue, tap, drive, driving
        Every slice's (``layouts.slice_members``): the int8 result goes out on stream
        ``out``, east and/or west.
    host_param : In(host_signature)
        ``Region.VXM_PARAM``: word ``(entry * lanes + lane) * VXM_PARAM_WORDS + k``
        (``lpu_arch/vxm.py``); reads return the word as written.
    host_table : In(host_signature)
        ``Region.VXM_TABLE``: word ``t * 256 + i`` (``t < vxm_tables``) is entry ``i`` of
        table ``t`` in the low byte.
    load_we : In(lanes), load_row : In(load_row_bits), load_data : In(lanes * 32 * PARAM_WORDS)
        The vector load port's lanes (``hostmap.LOAD_REGIONS``): lane ``l``
        stores its ``PARAM_WORDS`` host words as lane ``l`` of entry ``load_row``.
    """

    def __init__(self, cfg):
        self.cfg = cfg
        super().__init__({
            **relocated_slice_members(cfg),
            "param_fault": Out(1),
            **slice_members(cfg),
            "host_param": In(host_signature(cfg)),
            "host_table": In(host_signature(cfg)),
            "load_we": In(cfg.lanes),
            "load_row": In(load_row_bits(cfg)),
            "load_data": In(cfg.lanes * 32 * PARAM_WORDS),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self.cfg
        L, S = cfg.lanes, cfg.streams
        W = PARAM_WORDS
        ins = self.issue.instr
        is_vop = self.issue.valid & (ins.op == Op.VOP)
        base = self.bases[base_index(cfg, ins)]
        entry = Signal(len(operand(ins, Op.VOP, "param")) + 1)      # the relocated entry
        m.d.comb += entry.eq(operand(ins, Op.VOP, "param") + base.offset)
        pbits = index_bits(cfg.vxm_param_depth)
        fault = Signal()
        m.d.comb += [self.skip.eq(is_vop & base.off), fault.eq(is_vop & ~base.off & (entry >> pbits).any())]
        with m.If(self.start):
            m.d.sync += self.param_fault.eq(0)
        with m.Elif(fault):
            m.d.sync += self.param_fault.eq(1)

        # ---- parameter memory: one row per entry, lanes x 5 host words ------------------
        p_init, t_init = reset_words(cfg)
        row_words = L * W
        rows = [sum(w << (32 * k) for k, w in enumerate(p_init[e * row_words:(e + 1) * row_words]))
                for e in range(cfg.vxm_param_depth)]
        m.submodules.params = params = Memory(shape=unsigned(32 * row_words), depth=cfg.vxm_param_depth,
                                              init=rows)
        pw = params.write_port(granularity=32)
        pr = params.read_port(domain="comb")      # the entry is needed on the issue cycle
        # A host access's word address is split into (entry, word) on its cycle and used
        # on the next: the split (a multiplication by a reciprocal) and the memory read
        # are then in different cycles.  Reads still answer one cycle after re, as every
        # host port does; a write lands one cycle after its we.
        hp = self.host_param
        d_entry, d_sub = divmod_const(m, hp.addr, row_words, "h_param")
        h_entry, h_sub = Signal.like(d_entry), Signal.like(d_sub)
        h_ok, h_wdata = Signal(), Signal.like(hp.wdata)
        m.d.sync += [h_entry.eq(d_entry), h_sub.eq(d_sub), h_wdata.eq(hp.wdata),
                     h_ok.eq(hp.sel & hp.we & ~self.run & (d_entry < cfg.vxm_param_depth))]
        m.d.comb += pr.addr.eq(Mux(self.run, entry[:pbits], h_entry[:pbits]))
        load_ok = ~self.run & (self.load_row < cfg.vxm_param_depth)
        with m.If(self.load_we.any()):
            m.d.comb += [
                pw.addr.eq(self.load_row[:pbits]),
                pw.data.eq(self.load_data),
                pw.en.eq(Cat((self.load_we[k // W] & load_ok) for k in range(row_words))),
            ]
        with m.Else():
            m.d.comb += [
                pw.addr.eq(h_entry[:pbits]),
                pw.data.eq(Mux(h_ok, h_wdata, 0).replicate(row_words)),   # quiet unless written
                pw.en.eq(Cat(h_ok & (h_sub == k) for k in range(row_words))),
            ]
        m.d.comb += hp.rdata.eq(Array(pr.data[32 * k: 32 * k + 32] for k in range(row_words))[h_sub])

        # ---- activation tables: one copy per lane (lane 0's read port also serves the host)
        # Every copy is written alike.  One write and one read port per copy is what a block
        # RAM holds (two ports): with two read ports and the write, a copy could only be
        # distributed RAM, whose address decode then shared stage 1 with the requantiser
        # (docs/fpga.md).  A copy holds all vxm_tables tables, entry i of table t at t * 256 + i.
        ht = self.host_table
        tbits = (cfg.vxm_tables - 1).bit_length()
        tdepth = cfg.vxm_tables * TABLE_SIZE
        tr = []
        for c in range(L):
            m.submodules[f"table{c}"] = table = Memory(shape=unsigned(8), depth=tdepth, init=t_init)
            tw = table.write_port()
            m.d.comb += [
                tw.addr.eq(ht.addr[:8 + tbits]),
                tw.data.eq(ht.wdata[:8]),
                tw.en.eq(ht.sel & ht.we & ~self.run & (ht.addr < tdepth)),
            ]
            tr.append(table.read_port(domain="sync"))
        m.d.comb += ht.rdata.eq(tr[0].data)

        # ---- stage 0 (t): A, B, parameter entry; the int32 adds --------------------------
        # The streams of one direction on a VOP's issue cycle, else zeros (layouts.tap_bundle).
        a_streams = Array(tap_bundle(m, cfg, self.tap, ins.dir == EAST, is_vop, "a_stream"))
        b_streams = Array(tap_bundle(m, cfg, self.tap, ins.dir != EAST, is_vop, "b_stream"))

        fp = cfg.mxm_dtype == "fp8"
        P, AB = cfg.acc_planes, cfg.acc_bits
        VB = cfg.MAX_ACC_BITS if fp else 32          # the adders' width: int32, or 48 bits for FP8

        def acc_lanes(streams, name):
            # Each plane a signal: every lane uses it (an expression would be built anew per lane).
            planes = [Signal(cfg.vector_bits, name=f"{name}_plane{b}") for b in range(P)]
            m.d.comb += [p.eq(streams[ins.stream + b]) for b, p in enumerate(planes)]
            return [Cat(*(planes[b][8 * l: 8 * l + 8] for b in range(P)))[:AB].as_signed() for l in range(L)]

        a_in, b_in = acc_lanes(a_streams, "a"), acc_lanes(b_streams, "b")
        add_b = ins.aux[flag_bit(VopFlag.ADD)]
        # Registers are loaded only when a VOP issues (stage 1's only after one), so between
        # VOPs the arithmetic sees no changes (event-driven simulators skip it).
        def follow(vop, flags, out, zero):
            """A stage's VOP strobe (every cycle), flags, output stream and zero flag (the VOP
            skips or faulted: its result is a zero vector), loaded only after a VOP."""
            n_vop, n_flags, n_out, n_zero = Signal(), Signal(len(flags)), Signal.like(ins.stream), Signal()
            m.d.sync += n_vop.eq(vop)
            with m.If(vop):
                m.d.sync += [n_flags.eq(flags), n_out.eq(out), n_zero.eq(zero)]
            return n_vop, n_flags, n_out, n_zero

        q_vop, q_flags, q_out, q_zero = follow(is_vop, ins.aux, operand(ins, Op.VOP, "out"), base.off | fault)
        lane_q = []
        lane_layout = vxm_lane_layout()
        for l in range(L):
            f = lane_layout(pr.data[32 * W * l: 32 * W * (l + 1)])
            va, vb = Signal(signed(VB), name=f"va_{l}"), Signal(signed(VB), name=f"vb_{l}")
            names = ("m_a", "s_a", "m_b", "s_b", "m_c", "s_c", "table")
            fields = [f[n] for n in names[:-1]] + [f["table"][:tbits]]    # the table modulo vxm_tables
            regs = [Signal(len(v), name=f"{n.replace('_', '')}_{l}") for n, v in zip(names, fields)]
            if fp:      # 48-bit wrap-around adds; a bias field counts 2^BIAS_SHIFT accumulator units
                bias_a, bias_b = (f[n].as_signed() << fp8.BIAS_SHIFT for n in ("bias_a", "bias_b"))
            else:       # int32 wrap-around: 32-bit adds
                bias_a, bias_b = f["bias_a"].as_unsigned(), f["bias_b"].as_unsigned()
            with m.If(is_vop):
                m.d.sync += [va.eq(a_in[l] + Mux(add_b, b_in[l], 0) + bias_a),
                             vb.eq(b_in[l] + bias_b)]
                m.d.sync += [r.eq(f) for r, f in zip(regs, fields)]
            lane_q.append((va, vb, *regs))

        # ---- stage 1 (t+1, vxm_latency 4 only): the products v * m of A and B --------------
        fifth = cfg.vxm_latency == 4
        q_stage = (q_vop, q_flags, q_out, q_zero)
        p_vop, p_flags, p_out, p_zero = follow(*q_stage) if fifth else q_stage
        lane_p = []
        for l, (va, vb, ma, sa, mb, sb, mc, sc, tsel) in enumerate(lane_q):
            pa = Signal(signed(len(va) + len(ma) + 1), name=f"pa_{l}")
            pb = Signal(signed(len(vb) + len(mb) + 1), name=f"pb_{l}")
            if fifth:
                regs = [Signal.like(x, name=f"p{x.name}") for x in (sa, sb, mc, sc, tsel)]
                with m.If(q_vop):
                    m.d.sync += [pa.eq(va * ma), pb.eq(vb * mb)] + [r.eq(x) for r, x in zip(regs, (sa, sb, mc, sc, tsel))]
            else:
                regs = [sa, sb, mc, sc, tsel]
                m.d.comb += [pa.eq(va * ma), pb.eq(vb * mb)]
            lane_p.append((pa, pb, *regs))

        # ---- stage 2 (t+2; t+1 with vxm_latency 3): round A and B, table address ----------
        r_vop, r_flags, r_out, r_zero = follow(p_vop, p_flags, p_out, p_zero)
        rounded = round_to_code if fp else round_shift

        byte = unsigned(8) if fp else signed(8)
        r_a, r_b, r_mc, r_sc = [], [], [], []
        for l, (pa, pb, sa, sb, mc, sc, tsel) in enumerate(lane_p):
            ra = rounded(m, pa, sa, f"ra_{l}")
            rb = rounded(m, pb, sb, f"rb_{l}")
            taddr = Cat(ra.as_unsigned(), tsel)              # {table, byte}
            if l == 0:
                m.d.comb += [tr[l].addr.eq(Mux(self.run, taddr, ht.addr[:8 + tbits])),
                             tr[l].en.eq(p_vop | (~self.run & ht.sel & ht.re))]
            else:
                m.d.comb += [tr[l].addr.eq(taddr), tr[l].en.eq(p_vop)]
            qa, qb = Signal(byte, name=f"qa_{l}"), Signal(byte, name=f"qb_{l}")
            qm, qs = Signal.like(mc, name=f"qmc_{l}"), Signal(SHIFT_BITS, name=f"qsc_{l}")
            with m.If(p_vop):
                m.d.sync += [qa.eq(ra), qb.eq(rb), qm.eq(mc), qs.eq(sc)]
            r_a.append(qa), r_b.append(qb), r_mc.append(qm), r_sc.append(qs)

        # ---- stage 3 (t+3; t+2 with vxm_latency 3): table, a * b ------------------------------------------------
        g_vop, g_flags, g_out, g_zero = follow(r_vop, r_flags, r_out, r_zero)
        g_a, g_ab, g_mc, g_sc = [], [], [], []
        for l in range(L):
            a = Signal(byte, name=f"ta_{l}")
            m.d.comb += a.eq(Mux(r_flags[flag_bit(VopFlag.TABLE)], tr[l].data if fp else tr[l].data.as_signed(),
                                 r_a[l]))
            ga, ab = Signal(byte, name=f"ga_{l}"), Signal(signed(fp8.PRODUCT_BITS if fp else 16), name=f"ab_{l}")
            gm, gs = Signal.like(r_mc[l], name=f"gmc_{l}"), Signal(SHIFT_BITS, name=f"gsc_{l}")
            prod = fp8_product(m, a, r_b[l], f"gate_{l}")[0] if fp else a * r_b[l]
            with m.If(r_vop):
                m.d.sync += [ga.eq(a), ab.eq(prod), gm.eq(r_mc[l]), gs.eq(r_sc[l])]
            g_a.append(ga), g_ab.append(ab), g_mc.append(gm), g_sc.append(gs)

        # ---- stage 4 (t+4; t+3 with vxm_latency 3): the gate's requantisation, drive -----------------------------
        res = []
        for l in range(L):
            g = requantise(m, g_ab[l], g_mc[l], g_sc[l], f"rc_{l}", fp)
            res.append(Mux(g_flags[flag_bit(VopFlag.GATE)], g, g_a[l]))
        result = Mux(g_zero, 0, Cat(*res))
        out_e = g_vop & g_flags[flag_bit(VopFlag.OUT_E)]
        out_w = g_vop & g_flags[flag_bit(VopFlag.OUT_W)]
        for s in range(S):
            m.d.comb += [
                self.drive.east.mask[s].eq(out_e & (g_out == s)),
                self.drive.west.mask[s].eq(out_w & (g_out == s)),
            ]
        m.d.comb += [self.drive.east.data[0].eq(result), self.drive.west.data[0].eq(result)]
        m.d.comb += self.driving.eq(out_e | out_w)
        return m
