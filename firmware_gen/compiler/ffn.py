"""The FFN compiler: from a quantised FFN to per-slice programs, memory images and a
manifest that predicts the cycle of every output write (``docs/compiler.md`` explains the
dataflow and its timing).

Shapes are padded to whole ``lanes x lanes`` blocks with zero weights.  Each MXM streams
its weight blocks from its own hemisphere's MEM slices, the next block loading while the
current one computes; x is copied once into both MXMs' x slots; SwiGLU runs ``W1`` and
``W3`` in lockstep on the two MXMs, so one ``VOP`` makes ``h``, which goes straight to
both MXMs' x slots for ``W2``.  Every issue slot and stream position goes through the
tile's reservation table; operations are placed greedily in program order at the earliest
free cycle, so each write's predicted cycle is made by addition from the ISA's latencies.
"""

from __future__ import annotations

import numpy as np

from lpu_arch.config import TileConfig
from lpu_arch.timing import read_lead
from lpu_arch.isa import EAST, WEST, Instr, MMFlag, VopFlag
from firmware_gen import gc_paused
from firmware_gen.golden.numerics import FfnSpec, NumericsError, ffn_hidden, ffn_int
from firmware_gen.program import Program
from firmware_gen.compiler import CompileError
from firmware_gen.compiler.blocks import pad, padded_spec, vector_bytes
from firmware_gen.compiler.ffn_manifest import Manifest, ffn_bounds
from firmware_gen.compiler.reserve import DESKEW_SLICE, last_work, lower, strip_deskews
from firmware_gen.compiler.schedule import PredictedWrite
from firmware_gen.compiler.tile_plan import TilePlan
from firmware_gen.compiler.tile_state import SIDES, TOWARDS, TileState


class HRoute:
    """Where each h vector goes besides both local MXMs' x slots (a routing strategy of
    :class:`FfnPlan`).  The plan asks ``fits`` before it places the VOP that makes h
    block ``i`` of column ``b`` on cycle ``t_vop`` (the VOP drives h both ways, so it
    passes every slice between the VXM and the MXMs), then ``take`` to place it.  This
    base class routes h to the MXMs only (one tile)."""

    def fits(self, plan: "FfnPlan", t_vop: int, i: int, b: int) -> bool:
        return True

    def take(self, plan: "FfnPlan", t_vop: int, i: int, b: int) -> None:
        pass


class StoreH(HRoute):
    """Also WRITE every h vector into a MEM slice as it passes (``plan.h_stored``; the
    plan's manifest predicts those writes too): h becomes observable in the SRAM."""

    def fits(self, plan, t_vop, i, b):
        return plan.h_store_slot(t_vop) is not None

    def take(self, plan, t_vop, i, b):
        m, t_w, d = plan.h_store_slot(t_vop)
        plan.state.res.take_slot(m, t_w, f"h block {i} col {b} WRITE")
        addr = plan.state.alloc(m, 1)
        plan.state.emit(m, t_w, Instr.write(plan.lx_stream, d, addr))
        plan.h_stored[(i, b)] = (m, addr, t_w)


class FfnPlan(TilePlan):
    """The placement of one FFN (or one tile's share of it) on one tile (a :class:`TilePlan`).

    ``compile()`` places x (:meth:`place_x`), the W1/W3 phase that makes h
    (:meth:`phase1`) and the W2 phase that makes y (:meth:`phase2`), each operation
    greedily at its earliest free cycle through the tile's reservation table
    (:attr:`state`); a tray compiler calls the three steps itself (and orders
    ``phase2``'s h blocks by arrival).  :meth:`program` lowers the placement;
    :attr:`outputs` and :attr:`h_stored` say where y and h went, and on which cycle.

    Each weight block the plan loads has a name, the same in every plan of the FFN's
    shape: ``("W1", i, k)`` and ``("W3", i, k)`` (intermediate block i over input block
    k), ``("W2", j, i)`` (output block j over h block i) and ``("Z", j, i)`` (zeros: the
    east half of an odd output block without a second h block).  :meth:`take_window`
    places each block's READs; an MoE slot places them at its experts' rows by name
    (``moe_slots.ExpertSlot``).

    ``x`` is ``(H,)`` or ``(batch, H)`` int8; ``i_blocks``, ``j_blocks``: the intermediate and
    output blocks this tile computes (default: all); ``h_route``: an :class:`HRoute` (default:
    nowhere); ``state``: the :class:`~firmware_gen.compiler.tile_state.TileState` this plan
    places onto, shared with the other plans there (default: a tile of its own, whose
    activation table 0 is this FFN's).
    """
    v_reg = 0              # the VOPs' base register: the constant 0 (an MoE slot's own, moe_slots.ExpertSlot)
    acc_base = 0           # the first accumulator row this plan uses (of capacity_needs()["mxm_acc_depth"])
    acc_y = None           # the first of y's (W2's) rows: default acc_base + batch, after h's
    x_late = False         # x placed block by block as the first intermediate block's MMs need it (place_x)
    defer_h = False        # h leaves the accumulators by TilePlan.place_flush MMs, not the last W1/W3 block's
    defer_y = False        # y the same, once everything on the tile is placed (pending)

    def __init__(self, cfg: TileConfig, spec: FfnSpec, x, i_blocks=None, j_blocks=None, h_route=None,
                 state: TileState | None = None):
        self.cfg, self.spec = cfg, spec
        L = cfg.lanes
        if spec.dtype != cfg.mxm_dtype:
            raise CompileError(f"the FFN is quantised to {spec.dtype} but the tile's MXM computes {cfg.mxm_dtype} "
                               f"(TileConfig.mxm_dtype; FfnSpec.from_float(..., dtype={cfg.mxm_dtype!r}))")
        if spec.dtype == "fp8" and max(spec.H, spec.I) > cfg.fp8_max_terms:
            raise CompileError(f"the FFN's dot products have up to {max(spec.H, spec.I)} terms; the tile's FP8 "
                               f"accumulators ({cfg.acc_bits} bits) are exact for fp8_max_terms = {cfg.fp8_max_terms}")
        x = np.asarray(x)
        if x.ndim not in (1, 2) or x.shape[-1] != spec.H:
            raise CompileError(f"x has shape {np.shape(x)}; the FFN has H = {spec.H}, so x must be "
                               f"({spec.H},) or (batch, {spec.H})")
        x = x.reshape(-1, spec.H)
        if x.shape[0] < 1:
            raise CompileError("the batch is empty")
        self.B = B = x.shape[0]
        self.p = padded_spec(spec, L)
        self.Hp, self.Ip = self.p.H, self.p.I
        self.KH, self.KI = self.Hp // L, self.Ip // L
        self.mats = 3 if spec.kind == "swiglu" else 2      # weight matrices: W1, W2 and (SwiGLU) W3
        self.x = pad(x, (B, self.Hp))
        self.i_blocks = list(range(self.KI)) if i_blocks is None else list(i_blocks)
        self.j_blocks = list(range(self.KH)) if j_blocks is None else list(j_blocks)
        self.h_route = h_route or HRoute()
        # A W1/W3 block past the FFN's I loads only its real rows (block_rows): the rest
        # keep stale weights, so h's padding lanes hold junk that W2's zero columns cancel.
        # Only where h is not observable (kept on the tile, not stored or sent) and on an
        # int8 tile (an FP8 MXM would flag a stale NaN code) whose MXM has the row limit
        # (TileConfig.mxm_partial_lw).
        self.partial_rows = type(self.h_route) is HRoute and cfg.mxm_dtype == "int8" and bool(cfg.mxm_partial_lw)
        self.h_stored = {}                        # (i, b) -> (slice, addr, write cycle)
        self.x_rows = []                          # (slice, addr, block, column) of every copy of x
        if state is None:
            state = TileState(cfg)
            state.set_table(0, self.p.table)
        super().__init__(cfg, state, dict(zip(SIDES, self._jobs_per_side())))
        self.outputs = {}
        self.pending = []                         # defer_y: place_flush's arguments for each y, placed last
        self._check_capacity()

    # ---- capacity -----------------------------------------------------------------------
    def _jobs_per_side(self):
        KH, KI, KIl, KHl = self.KH, self.KI, len(self.i_blocks), len(self.j_blocks)
        w2 = [KHl // 2 * KI + KHl % 2 * (KI + 1) // 2] * 2
        if self.spec.kind == "swiglu":
            return [KIl * KH + w2[0], KIl * KH + w2[1]]
        return [(KIl + 1) // 2 * KH + w2[0], KIl // 2 * KH + w2[1]]

    def capacity_needs(self) -> dict:
        """What this plan needs of the tile's sizes, by configuration field: MEM rows per
        weight slice, x slots and accumulator rows per MXM, VXM parameter entries."""
        B = self.B
        return {"mem_depth": max(self._jobs_per_side()) * self.chunks + B * self.KH + B * len(self.j_blocks)
                + B * len(self.i_blocks),
                "mxm_xbuf_depth": B * (self.KH + self.KI),
                "mxm_acc_depth": B * (1 + len(self.j_blocks) // 2 + len(self.j_blocks) % 2),
                "vxm_param_depth": len(self.i_blocks) + len(self.j_blocks)}

    def _check_capacity(self):
        cfg, B, L = self.cfg, self.B, self.cfg.lanes
        need = self.capacity_needs()
        rows_needed = need["mem_depth"]
        if rows_needed > cfg.mem_depth:
            raise CompileError(
                f"the FFN does not fit the tile's SRAM: its {self.mats} weight matrices ({self.Hp}x{self.Ip} "
                f"after padding to {L}-lane blocks), x and y need {rows_needed} rows in each of the {self.n} "
                f"weight slices per hemisphere ({2 * self.n * rows_needed * L} bytes in all); a MEM slice holds "
                f"{cfg.mem_depth} rows ({2 * self.n * cfg.mem_depth * L} bytes in those slices)")
        if need["mxm_xbuf_depth"] > cfg.mxm_xbuf_depth:
            raise CompileError(f"x and h need {need['mxm_xbuf_depth']} x slots per MXM (batch {B} x "
                               f"({self.KH} + {self.KI}) blocks); an MXM has {cfg.mxm_xbuf_depth}")
        if need["mxm_acc_depth"] > cfg.mxm_acc_depth:
            raise CompileError(f"the schedule needs {need['mxm_acc_depth']} accumulator rows per MXM (batch {B} x "
                               f"{need['mxm_acc_depth'] // B}); an MXM has {cfg.mxm_acc_depth}")
        if need["vxm_param_depth"] > cfg.vxm_param_depth:
            raise CompileError(f"the VXM needs {need['vxm_param_depth']} parameter entries (one per output block); "
                               f"it has {cfg.vxm_param_depth}")

    # ---- placement ----------------------------------------------------------------------
    def place_x(self):
        """Copy x into both MXMs' x slots: slot ``k*B + b`` holds block k of column b.
        Block k is stored in the hemisphere's weight slice ``k % n``, so that reading x
        holds back no slice's first weight rows for more than a few cycles.  With
        :attr:`x_late` (and intermediate blocks to make), nothing yet: :meth:`phase1` places
        each block of x once the load of the first weight block that needs it is placed
        (:meth:`_place_x_block`)."""
        if self.x_late and self.i_blocks:
            return
        for side in SIDES:
            for k in range(self.KH):
                src = self.mem(side, k % self.n)
                for b in range(self.B):
                    self._copy_x(side, src, k, b)

    def _copy_x(self, side, src, k, b):
        """Block k of x's column b from a new row of MEM slice ``src`` (a list: the one whose
        copy arrives first, the earlier ones on a tie) into ``side``'s x slot ``x_slot(k, b)``:
        the first READ cycle whose LX finds the loader free."""
        if isinstance(src, list):
            probe = Instr.read(self.lx_stream, self.in_dir(side), 0)
            src = min(src, key=lambda m: self._copy_cycle(side, m, probe) + read_lead(self.cfg, m, side))
        slot, addr = self.x_slot(k, b), self.state.alloc(src, 1)
        self.state.load(src, addr, self.x[b, k * self.cfg.lanes:(k + 1) * self.cfg.lanes] & 0xFF)
        self.x_rows.append((src, addr, k, b))
        self._copy_row(side, src, addr, slot, f"x[{b}] block {k} -> {side} slot {slot}")

    def _copy_row(self, side, src, addr, slot, who):
        """READ row ``addr`` of MEM slice ``src`` and LX it into ``side``'s x slot ``slot``, on
        the first cycle both are free."""
        d = self.in_dir(side)
        lead = read_lead(self.cfg, src, side)      # the READ's cycles to the MXM: its LX's
        read = Instr.read(self.lx_stream, d, addr)
        t = self._copy_cycle(side, src, read)
        self.state.res.take_slot(src, t, who)
        self.state.res.take_slot(self.ldr(side), t + lead, who)
        self.state.res.take_drives(src, t, read, self.pos(side), who)
        self.state.emit(src, t, read)
        self.state.emit(self.ldr(side), t + lead, Instr.lx(self.lx_stream, d, slot))
        self.state.slot_ready[side][slot] = t + lead + 1

    def _copy_cycle(self, side, src, read) -> int:
        """The first cycle ``read`` (from MEM slice ``src``) and its LX into ``side`` are free."""
        lead = read_lead(self.cfg, src, side)
        t = 0
        while not (self.state.res.slot_free(src, t)
                   and self.state.res.slot_free(self.ldr(side), t + lead)
                   and self.state.res.drives_free(src, t, read, self.pos(side))):
            t += 1
        return t

    def _place_x_block(self, k):
        """:attr:`x_late`: block k of every column of x into both MXMs, from the weight slice
        farthest from each (the one a narrow block leaves free, ``TilePlan.narrow``)."""
        for side in SIDES:
            mems = sorted((self.mem(side, j) for j in range(self.n)), key=lambda m: -read_lead(self.cfg, m, side))
            for b in range(self.B):
                self._copy_x(side, mems, k, b)

    def place_zero_slot(self, slot):
        """A zero row in each hemisphere's weight slice nearest its MXM, copied into x slot
        ``slot`` of both MXMs: :attr:`zero_slot`, what ``TilePlan.place_flush`` multiplies."""
        for side in SIDES:
            src = min((self.mem(side, j) for j in range(self.n)), key=lambda m: read_lead(self.cfg, m, side))
            addr = self.state.alloc(src, 1)
            self.state.load(src, addr, np.zeros(self.cfg.lanes, np.uint8))
            self._copy_row(side, src, addr, slot, f"zeros -> {side} slot {slot}")
        self.zero_slot = slot

    def new_param(self, **fields) -> int:
        """A VXM parameter entry of ``fields`` for one of this plan's VOPs (the tile's next
        free one, :meth:`TileState.new_param`)."""
        return self.state.new_param(**fields)

    # ---- what follows an EMIT ----------------------------------------------------------
    def h_to_mxms(self, t_vop, slot, dry, who):
        """VOP result (h) driven both ways on the x stream into both MXMs' slot ``slot``."""
        v, s = self.cfg.vxm_position, self.lx_stream
        arrive = {side: t_vop + self.cfg.vxm_latency + abs(v - self.pos(side)) for side in SIDES}
        vop = Instr.vop(0, EAST, 0, s, VopFlag.OUT_E | VopFlag.OUT_W)
        to = {d: self.pos(side) for side, d in TOWARDS.items()}
        ok = (all(self.state.res.slot_free(self.ldr(side), arrive[side]) for side in SIDES)
              and self.state.res.drives_free("VXM", t_vop, vop, to))
        if dry or not ok:
            return ok
        self.state.res.take_drives("VXM", t_vop, vop, to, who)
        for side in SIDES:
            self.state.res.take_slot(self.ldr(side), arrive[side], who + f" LX {side}")
            self.state.emit(self.ldr(side), arrive[side], Instr.lx(s, TOWARDS[side], slot))
            self.state.slot_ready[side][slot] = arrive[side] + 1
        return True

    def _mems_near_vxm(self, t_vop, hemis):
        """MEM slices nearest the VXM first, with the cycle a VOP result of ``t_vop``
        passes them: (flag, slice, cycle, dir) for the hemispheres ``hemis`` in order."""
        v = self.cfg.vxm_position
        for k in range(self.cfg.mem_slices):
            for hemi in hemis:
                d, flag = (EAST, VopFlag.OUT_E) if hemi == "E" else (WEST, VopFlag.OUT_W)
                m = f"MEM_{hemi}{k}"
                if self.state.next_free[m] < self.cfg.mem_depth:
                    yield flag, m, t_vop + self.cfg.vxm_latency + abs(v - self.pos(m)), d

    def h_store_slot(self, t_vop):
        """A MEM slice on h's way to the MXMs with a free slot when h passes: (slice, cycle, dir)."""
        return next(((m, t_w, d) for _, m, t_w, d in self._mems_near_vxm(t_vop, "WE")
                     if self.state.res.slot_free(m, t_w)), None)

    def _reads_ahead(self, m, t_w):
        """Will MEM slice ``m`` still be reading weights on cycle ``t_w``, for the blocks its
        MXM has yet to load (placed later, ``chunks`` cycles each from ``load_end`` on, as
        if without stalls)?  A write there would push one of those reads, and its block,
        back."""
        side = "MXM_" + m[4]
        start = self.state.load_end[side] - read_lead(self.cfg, m, side)
        return start <= t_w < start + self.blocks_left[side] * self.chunks     # (none left: never)

    def y_to_mem(self, t_vop, dry, who):
        """VOP result (y) to the nearest MEM slice with a free write slot, preferring one
        whose weight reads are over (:meth:`_reads_ahead`); returns (flags, slice, cycle,
        dir) or None."""
        # A stable sort: nearest first among the slices done reading, then among the others.
        for flag, m, t_w, d in sorted(self._mems_near_vxm(t_vop, "EW"), key=lambda c: self._reads_ahead(c[1], c[2])):
            vop = Instr.vop(0, EAST, 0, self.lx_stream, flag)
            if self.state.res.slot_free(m, t_w) and self.state.res.drives_free("VXM", t_vop, vop, self.pos(m)):
                if not dry:
                    self.state.res.take_slot(m, t_w, who + " WRITE")
                    self.state.res.take_drives("VXM", t_vop, vop, self.pos(m), who)
                return flag, m, t_w, d
        return None

    def place_vop(self, t_vop, side, param, flags, who):
        """The VOP on ``t_vop`` that takes ``side``'s accumulator planes, with parameter entry
        ``param`` (relocated by :attr:`v_reg`) and ``flags``."""
        dir_a = EAST if side == "MXM_W" else WEST
        self.state.res.take_slot("VXM", t_vop, who)
        vop = Instr.vop(0, dir_a, param=param, out=self.lx_stream, flags=flags, base=self.v_reg)
        self.state.emit("VXM", t_vop, vop)

    # ---- the FFN ------------------------------------------------------------------------
    def compile(self, place_x=True):
        if place_x:
            self.place_x()
        self.phase1()
        self.phase2(list(range(self.KI)))
        return self

    def blk(self, w, i, k):
        L = self.cfg.lanes
        return w[i * L:(i + 1) * L, k * L:(k + 1) * L]

    def rows(self, a, i):
        return a[i * self.cfg.lanes:(i + 1) * self.cfg.lanes]

    def x_slot(self, k, b):
        return k * self.B + b

    def h_slot(self, i, b):
        return self.B * self.KH + i * self.B + b

    def block_rows(self, i):
        """Rows to load of the W1/W3 blocks of intermediate block ``i``: all lanes, or the
        FFN's real rows of a last block that I does not fill (:attr:`partial_rows`)."""
        real = self.spec.I - i * self.cfg.lanes
        return real if self.partial_rows and real < self.cfg.lanes else self.cfg.lanes

    def phase1(self):
        """W1 (and W3) for this tile's intermediate blocks: h into both MXMs' x slots."""
        p, blk, rows = self.p, self.blk, self.rows
        m1, s1 = p.rq1
        for n, i in enumerate(self.i_blocks):
            if p.kind == "swiglu":          # W1 on MXM_W and W3 on MXM_E in lockstep; the VOP gates
                m3, s3 = p.rq3
                mc, sc = (np.broadcast_to(np.asarray(v, np.int64), (1,))[0] for v in p.rq_mul)
                e = self.new_param(m_a=rows(m1, i), s_a=rows(s1, i), m_b=rows(m3, i), s_b=rows(s3, i),
                                   m_c=mc, s_c=sc)
                sides, ws, vflags = SIDES, (p.W1, p.W3), VopFlag.TABLE | VopFlag.GATE
            else:                           # W1's blocks alternate between the MXMs
                e = self.new_param(bias_a=rows(p.b1, i), m_a=rows(m1, i), s_a=rows(s1, i))
                sides, ws, vflags = (SIDES[n % 2],), (p.W1,), VopFlag.TABLE
            for k in range(self.KH):
                self._phase1_block(sides, tuple(blk(w, i, k) for w in ws), i, k, e, vflags)

    def phase2(self, i_order):
        """W2 for this tile's output blocks, accumulating over the h blocks in ``i_order``.
        An even number of output blocks splits between the MXMs (first half west); an odd
        one out runs on both MXMs at once, each over half of the h blocks, and the VXM adds
        the two partial sums (``VOP ADD``)."""
        p, blk, rows = self.p, self.blk, self.rows
        m2, s2 = p.rq2
        js = self.j_blocks
        half = len(js) // 2
        params = {j: self.new_param(bias_a=rows(p.b2, j) if p.kind == "classic" else 0,
                                    m_a=rows(m2, j), s_a=rows(s2, j)) for j in js}
        odd = js[-1] if len(js) % 2 else None
        zero = np.zeros((self.cfg.lanes, self.cfg.lanes), np.int64)
        for n, i in enumerate(i_order):
            last = n == len(i_order) - 1
            for jl in range(half):
                for side, j in (("MXM_W", js[jl]), ("MXM_E", js[half + jl])):
                    self._phase2_block((side,), (blk(p.W2, j, i),), (i, i), j, jl, params[j],
                                       first=n == 0, last=last)
            if odd is not None and (n % 2 == 1 or last):
                ia = i_order[n - n % 2]      # the pair i_order[n-1], i; or the last one alone (east: zeros)
                wb = blk(p.W2, odd, i) if i != ia else zero
                self._phase2_block(SIDES, (blk(p.W2, odd, ia), wb), (ia, i), odd, half, params[odd],
                                   first=n < 2, last=last)

    def _phase1_block(self, sides, blocks, i, k, e, vflags):
        B, KH = self.B, self.KH
        emit = k == KH - 1 and not self.defer_h
        flags = MMFlag.XBUF | (MMFlag.ACC if k else 0) | (MMFlag.EMIT if emit else 0)
        mms = [(self.x_slot(k, b), self.acc_base + b, flags) for b in range(B)]

        def on_emit(t_v, b, dry):
            who = f"h block {i} col {b}"
            if not (self.h_to_mxms(t_v, self.h_slot(i, b), True, who) and self.h_route.fits(self, t_v, i, b)):
                return False
            if not dry:
                self.h_route.take(self, t_v, i, b)
                self.h_to_mxms(t_v, self.h_slot(i, b), False, who)
                self.place_vop(t_v, sides[0], e, vflags | VopFlag.OUT_E | VopFlag.OUT_W, who)
            return True

        idents = (("W1", i, k), ("W3", i, k))[:len(sides)]
        prepare = (lambda: self._place_x_block(k)) if self.x_late and i == self.i_blocks[0] else None
        label = f"W1/W3 block ({i},{k})"
        self.place_blocks(sides, blocks, idents, mms, on_emit, label, self.block_rows(i), prepare)
        if k == KH - 1 and not emit:
            for b in range(B):
                self.place_flush(sides, self.acc_base + b, on_emit, label, max(self.state.last_mm[s] for s in sides) + 1,
                                 b)

    def _phase2_block(self, sides, blocks, iis, j, jl, e, first, last):
        """One W2 block on one MXM, or two (one per MXM, h blocks ``iis``) whose partial
        sums the VXM adds."""
        B = self.B
        emit = last and not self.defer_y
        flags = MMFlag.XBUF | (0 if first else MMFlag.ACC) | (MMFlag.EMIT if emit else 0)
        slots = {s: i for s, i in zip(sides, iis)}
        acc = [(self.acc_base + B if self.acc_y is None else self.acc_y) + jl * B + b for b in range(B)]
        mms = [({s: self.h_slot(i, b) for s, i in slots.items()}, acc[b], flags) for b in range(B)]
        vflag = VopFlag.ADD if len(sides) == 2 else 0

        def on_emit(t_v, b, dry):
            who = f"y block {j} col {b}"
            got = self.y_to_mem(t_v, dry, who)
            if got is None:
                return False
            if not dry:
                flag, m, t_w, d = got
                self.place_vop(t_v, sides[0], e, flag | vflag, who)
                addr = self.state.alloc(m, 1)
                self.state.emit(m, t_w, Instr.write(self.lx_stream, d, addr))
                self.outputs[(b, j)] = (m, addr, t_w)
            return True

        # (two MXMs over one h block: the east one's block is zeros, phase2)
        idents = (("W2", j, iis[0]),) if len(sides) == 1 else \
            (("W2", j, iis[0]), ("W2", j, iis[1]) if iis[1] != iis[0] else ("Z", j, iis[0]))
        label = f"W2 block ({j},{'+'.join(map(str, iis))})"
        self.place_blocks(sides, blocks, idents, mms, on_emit, label, self.cfg.lanes)
        if last and not emit:
            self.pending += [(sides, acc[b], on_emit, label, t + 1, b) for b, t in enumerate(self.mm_cycles)]

    # ---- lowering ------------------------------------------------------------------------
    def program(self) -> Program:
        """Lower the tile's placement (its :attr:`state`: every plan placed there, on a tray's
        tile without the RUNTIME_DESKEWs past its last work), with the tile's memory images,
        parameter entries and activation tables."""
        state = self.state
        if self.cfg.links:
            last = last_work(state.timed)
            state.timed = strip_deskews(state.timed, last)
            state.res.release_after(DESKEW_SLICE, last)
        queues = {name: lower(entries) for name, entries in state.timed.items()}
        prog = Program(self.cfg, queues, state.memory, vxm_params=state.params, table=state.tables,
                       defined=state.loaded)
        for name, q in prog.queues.items():
            if len(q) + 1 > self.cfg.iq_depth:
                raise CompileError(f"the schedule needs {len(q) + 1} instructions in {name}'s queue; "
                                   f"it holds {self.cfg.iq_depth} (use a larger iq_depth or a smaller FFN)")
        return prog.validate()

    def y_writes(self, y) -> list:
        """The PredictedWrite of each output block of y (batch, Hp) this plan writes."""
        return [PredictedWrite(t_w, m, a, vector_bytes(y[b], j, self.cfg.lanes), j)
                for (b, j), (m, a, t_w) in self.outputs.items()]

    def manifest(self, prog: Program, tiles: int = 1) -> Manifest:
        """What this plan promises: every MEM write it makes (y, and h when stored) with
        its cycle and value from the integer FFN, the totals, and the bounds of this tile's
        share (``1/tiles`` of the weights and MACs)."""
        cfg, L = self.cfg, self.cfg.lanes
        writes = self.y_writes(ffn_int(self.p, self.x))
        if self.h_stored:
            h = ffn_hidden(self.p, self.x)
            writes += [PredictedWrite(t_w, m, a, vector_bytes(h[b], i, L), -1 - i)
                       for (i, b), (m, a, t_w) in self.h_stored.items()]
        writes.sort(key=lambda w: (w.cycle, cfg.position(w.slice)))
        wv = self.mats * self.Hp * self.Ip // L
        bounds = ffn_bounds(cfg, self.n, self.mats, self.spec.H, self.spec.I, self.KH, self.KI, self.B, tiles,
                            partial=self.partial_rows and self.i_blocks == list(range(self.KI)))
        return Manifest(kind=self.spec.kind, H=self.spec.H, I=self.spec.I, batch=self.B, padded=(self.Hp, self.Ip),
                        cycles=self.state.res.done_cycles(), writes=writes,
                        outputs={k: v[:2] for k, v in self.outputs.items()}, busy=self.state.res.busy(),
                        mm_count=self.mm_count, weight_vectors=wv // tiles,
                        sram_bound=bounds["sram"], mac_bound=bounds["mac"],
                        instructions={n: len(q) + 1 for n, q in prog.queues.items() if q}, bounds=bounds,
                        sram_padded=-(-wv // (2 * cfg.mem_slices * tiles)),
                        dtype=cfg.mxm_dtype)


def compile_ffn(spec: FfnSpec, x, cfg: TileConfig | None = None,
                h_route: HRoute | None = None) -> tuple[Program, Manifest]:
    """Compile a quantised FFN applied to int8 input ``x`` ((H,) or (batch, H)).

    Returns the program (queues, memory images, VXM parameters and table) and the
    :class:`Manifest` with the predicted cycle and value of every output write.
    ``h_route``: see :class:`FfnPlan` (``StoreH()`` also writes h to the SRAM)."""
    cfg = cfg or TileConfig.default()
    if not isinstance(spec, FfnSpec):
        raise CompileError(f"spec must be a numerics.FfnSpec, got {type(spec).__name__}")
    try:
        with gc_paused():
            plan = FfnPlan(cfg, spec, np.asarray(x), h_route=h_route).compile()
            prog = plan.program()
            return prog, plan.manifest(prog)
    except NumericsError as e:
        raise CompileError(str(e)) from None
