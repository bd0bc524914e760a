"""The FFN compiler: from a quantised FFN to per-slice programs, memory images and a
manifest that predicts the cycle of every output write.

Dataflow (``docs/compiler.md`` explains it with the timing):

* Shapes are padded to whole ``lanes x lanes`` blocks with zero weights (and identity
  requantisation); padded output lanes are 0 and are written like the others.
* Each MXM streams its weight blocks from its own hemisphere's MEM slices: ``LW`` takes
  ``n`` rows per cycle, row ``r`` of a block from MEM slice ``r % n`` of the hemisphere
  on stream ``r % n``.  A block is ``lanes/n`` cycles of SRAM reads; the next block loads
  into the shadow buffer while the current one computes.
* The input x is copied once into both MXMs' x slots (``LX``); MMs read x slots only.
* SwiGLU: ``W1`` runs on ``MXM_W`` and ``W3`` on ``MXM_E`` in lockstep, so both
  accumulators of one output block reach the VXM on one cycle and one ``VOP``
  (``TABLE|GATE``) makes ``h``.  Classic: ``W1``'s output blocks alternate between the
  MXMs and ``VOP TABLE`` adds ``b1``.  ``h`` goes straight from the VXM to both MXMs' x
  slots.  ``W2``'s output blocks are split between the MXMs (first half west), swept in
  h-block order so that they start as soon as ``h``'s first block exists; a last ``VOP``
  (bias ``b2``) requantises ``y``, which a ``WRITE`` stores in a MEM slice.
* Every issue slot and stream position goes through :class:`Reservations`; operations are
  placed greedily in program order at the earliest cycle that is free.  The predicted
  cycle of each write is this placement, made by addition from the ISA's latencies.
"""

from __future__ import annotations

import bisect
import functools
import math
from dataclasses import dataclass, field

import numpy as np

from lpu_arch.config import TileConfig
from lpu_arch.timing import lw_cycles, read_lead
from lpu_arch.vxm import VXM_FIELDS
from lpu_arch.isa import DELAY_MAX, EAST, MXM_LATENCY, READ_LATENCY, WEST, Instr, MMFlag, VopFlag
from lpu_arch.errors import LpuError
from firmware_gen import gc_paused
from firmware_gen.golden.numerics import FfnSpec, NumericsError, ffn_hidden, ffn_int
from firmware_gen.program import Program
from firmware_gen.compiler.reserve import DESKEW_SLICE, Reservations, last_work, lower, strip_deskews
from firmware_gen.compiler.schedule import PredictedWrite


class CompileError(LpuError, ValueError):
    """The FFN does not fit this tile; the message names what is needed and the limit."""


SIDES = ("MXM_W", "MXM_E")
TOWARDS = {"MXM_W": WEST, "MXM_E": EAST}      # the direction to each MXM from between them (VXM, SXMs)


@dataclass
class Manifest:
    """What the compiler promises: every output write and the totals, plus the bounds."""
    kind: str
    H: int
    I: int
    batch: int
    padded: tuple                     # (Hp, Ip)
    cycles: int                       # predicted cycle counter at done
    writes: list                      # PredictedWrite, (cycle, position) order
    outputs: dict                     # (b, block) -> (slice, addr) of y's vector
    busy: dict                        # predicted data-instruction issues per slice
    mm_count: int
    weight_vectors: int
    sram_bound: int                   # cycles to read every weight vector once, all MEM slices busy
    mac_bound: int                    # cycles for every MM with both MXMs busy
    instructions: dict = field(default_factory=dict)
    bounds: dict = field(default_factory=dict)    # every limit by name (BOUNDS), cycles
    sram_padded: int = 0                          # reading every padded block once (a reference, not a bound
                                                  # when the program skips rows: FfnPlan.block_rows)
    dtype: str = "int8"                           # the tile's number format: y is int8, or E4M3 codes

    @property
    def bound(self) -> int:
        return max(self.bounds.values(), default=max(self.sram_bound, self.mac_bound))

    @property
    def tightest(self) -> str:
        """The name of the bound that limits this FFN most (BOUNDS)."""
        return max(self.bounds, key=self.bounds.get) if self.bounds else "sram"

    @property
    def efficiency(self) -> float:
        """bound / cycles (1.0 = the configuration's limit)."""
        return self.bound / self.cycles

    @property
    def mxm_utilisation(self) -> float:
        return self.mm_count / (2 * self.cycles)

    def summary(self) -> dict:
        return {"kind": self.kind, "dtype": self.dtype, "H": self.H, "I": self.I, "batch": self.batch,
                "padded_H": self.padded[0], "padded_I": self.padded[1], "cycles": self.cycles,
                "sram_bound": self.sram_bound, "sram_padded": self.sram_padded, "mac_bound": self.mac_bound,
                "efficiency": round(self.efficiency, 4), "bounds": self.bounds, "tightest_bound": self.tightest,
                "ratio_to_sram_bound": round(self.cycles / self.sram_bound, 4),
                "mxm_utilisation": round(self.mxm_utilisation, 4), "mm_count": self.mm_count,
                "weight_vectors": self.weight_vectors, "output_writes": len(self.writes),
                "instructions": self.instructions, "busy": self.busy}


# What each bound counts (cycles no schedule of this FFN on this tile can beat).
BOUNDS = {
    "sram": "every weight vector the program reads read once (padded blocks, less the rows of partial W1/W3 "
            "blocks it does not load), all MEM slices every cycle",
    "sram_real": "the same for the FFN's real (unpadded) weight bytes",
    "weight_load": "every weight block loaded into an MXM (LW: ceil(rows/n) cycles on n streams), both MXMs",
    "mac": "every MM issued, both MXMs every cycle",
    "loader_issue": "every LW, and each x and h vector's LX into both MXMs, one per loader issue slot",
    "streams": "the weights crossing the busiest position (next to an MXM) on its streams",
    "latency": "the dataflow's fixed fill and drain: weights to an MXM, h and back, y to MEM",
    "sram_path": "every weight vector read from cycle 0 on, one per MEM slice per cycle, and carried to its MXM "
                 "(each slice its distance away): the last arrives no earlier than the slices could deliver them all; "
                 "then one MM and its result through the VXM to MEM",
}


def ffn_bounds(cfg: TileConfig, n: int, mats: int, H: int, I: int, KH: int, KI: int, B: int,
               tiles: int = 1, partial: bool = False) -> dict:
    """Every bound (BOUNDS) of ``mats`` H x I matrices (KH x KI blocks) at batch B on a
    tile with ``n`` weight streams per MXM, for one tile's 1/``tiles`` share: arithmetic
    on the configuration, not on a schedule.  ``partial``: the W1/W3 blocks past I load
    only I's rows (``FfnPlan.block_rows``)."""
    L, pos = cfg.lanes, cfg.position
    blocks = mats * KH * KI                        # weight blocks of L x L, L vectors each
    short = (mats - 1) * KH if partial and I % L else 0          # W1/W3 blocks of I % L rows
    vectors = blocks * L - short * (L - I % L)
    load = blocks * lw_cycles(L, n) - short * (lw_cycles(L, n) - lw_cycles(I % L or L, n))
    leads = sorted(read_lead(cfg, m, "MXM_W") for m in cfg.mem_names if m.startswith("MEM_W"))
    d_mem = leads[0] - READ_LATENCY
    d_vxm = abs(pos("MXM_W") - cfg.vxm_position)
    d_y = min(abs(cfg.vxm_position - pos(m)) for m in cfg.mem_names)      # the VXM's result to MEM
    out = MXM_LATENCY + d_vxm + cfg.vxm_latency    # MM issue to its VOP's result at the VXM
    return {"sram": -(-vectors // (2 * cfg.mem_slices * tiles)),
            "sram_real": -(-(-(-mats * H * I // L)) // (2 * cfg.mem_slices * tiles)),
            "weight_load": -(-load // (2 * tiles)),
            "mac": -(-blocks * B // (2 * tiles)),
            "loader_issue": -(-blocks // (2 * tiles)) + B * (KH + KI),
            "streams": -(-vectors // (2 * cfg.streams * tiles)),
            # first MM (a weight block read and loaded), h back to an MXM, y to MEM and done
            "latency": (READ_LATENCY + d_mem + lw_cycles(L, n)) + (out + d_vxm + 1) + (out + d_y + 2),
            # the busiest MXM's last weight row arrives on last_arrival at the earliest, the MM on
            # the next cycle (the swap), its chain's result to MEM and done
            "sram_path": last_arrival(leads, -(-vectors // (2 * tiles)) if short else -(-blocks // (2 * tiles)) * L)
            + 1 + (out + d_y + 2)}


def last_arrival(leads, rows: int) -> int:
    """The earliest cycle by which ``rows`` vectors can have reached an MXM from MEM slices
    whose READs arrive there ``leads`` cycles after issue, each slice reading one vector a
    cycle from cycle 0: the least A with sum(max(0, A - lead + 1)) >= rows."""
    reached = lambda a: sum(max(0, a - x + 1) for x in leads)      # vectors arrived by cycle a
    return bisect.bisect_left(range(max(leads) + rows), rows, key=reached)


def weight_streams(cfg: TileConfig) -> int:
    """Weight rows an MXM loads per cycle (LW's n): one per MEM slice of its hemisphere, on
    streams 0..n-1, leaving stream n for x and h."""
    return min(cfg.mem_slices, cfg.streams - 1)


@functools.lru_cache(maxsize=None)
def _read_probe(stream, dir):
    """A READ on ``stream``: what a weight window's freedom is checked with (its drives do
    not depend on the address)."""
    return Instr.read(stream, dir, 0)


def _slot(slot, side):
    """An MM's x slot: one for every MXM, or a per-MXM dict."""
    return slot[side] if isinstance(slot, dict) else slot


def _pad(a, shape, dtype=np.int64):
    out = np.zeros(shape, dtype)
    out[tuple(slice(0, s) for s in np.shape(a))] = a
    return out


def _per_row(rq, n, pad_to):
    m, s = (np.broadcast_to(np.asarray(v, np.int64), (n,)) for v in rq)
    return _pad(m, (pad_to,)) + np.r_[np.zeros(n, np.int64), np.ones(pad_to - n, np.int64)], _pad(s, (pad_to,))


def padded_spec(spec: FfnSpec, lanes: int) -> FfnSpec:
    """The FFN the hardware computes: H and I rounded up to whole blocks, zero weights,
    zero biases and identity requantisation (multiplier 1, shift 0) in the padding."""
    Hp, Ip = -(-spec.H // lanes) * lanes, -(-spec.I // lanes) * lanes
    kw = dict(kind=spec.kind, dtype=spec.dtype, W1=_pad(spec.W1, (Ip, Hp), spec.W1.dtype),
              W2=_pad(spec.W2, (Hp, Ip), spec.W2.dtype), table=spec.table,
              rq1=_per_row(spec.rq1, spec.I, Ip), rq2=_per_row(spec.rq2, spec.H, Hp),
              x_scale=spec.x_scale, out_scale=spec.out_scale if np.ndim(spec.out_scale) == 0
              else np.r_[spec.out_scale, np.ones(Hp - spec.H)])       # (padding rows: 1.0)
    if spec.kind == "swiglu":
        kw.update(W3=_pad(spec.W3, (Ip, Hp), spec.W3.dtype), rq3=_per_row(spec.rq3, spec.I, Ip), rq_mul=spec.rq_mul)
    else:
        kw.update(b1=_pad(spec.b1, (Ip,)), b2=_pad(spec.b2, (Hp,)))
    return FfnSpec(**kw)


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
        plan.res.take_slot(m, t_w, f"h block {i} col {b} WRITE")
        addr = plan.alloc(m, 1)
        plan.emit(m, t_w, Instr.write(plan.lx_stream, d, addr))
        plan.h_stored[(i, b)] = (m, addr, t_w)


def x_image(x_rows: list, x_int8, lanes: int, H: int) -> dict:
    """``{slice: {row: vector}}``: the MEM rows of int8 input ``x`` ((H,) or (B, H)) at a
    plan's ``x_rows`` ((slice, addr, block, column) of every copy of x), to write before a
    run of a program compiled for another x (the schedule does not depend on x's values)."""
    x = np.atleast_2d(np.asarray(x_int8, np.int64))
    out = {}
    for m, a, k, b in x_rows:
        v = _pad(x[b, k * lanes:min((k + 1) * lanes, H)], (lanes,))
        out.setdefault(m, {})[a] = [int(u) & 0xFF for u in v]
    return out


def vector_bytes(a, j: int, lanes: int) -> tuple:
    """Block ``j`` (lanes ``j*lanes`` on) of integer vector ``a`` as bytes, a predicted write's data."""
    return tuple(int(v) & 0xFF for v in a[j * lanes:(j + 1) * lanes])


class FfnPlan:
    """The placement of one FFN (or one tile's share of it) on one tile.

    ``compile()`` places x (:meth:`place_x`), the W1/W3 phase that makes h
    (:meth:`phase1`) and the W2 phase that makes y (:meth:`phase2`), each operation
    greedily at its earliest free cycle through :attr:`res`; a tray compiler calls the
    three steps itself (and orders ``phase2``'s h blocks by arrival).  :meth:`program`
    lowers the placement; :attr:`outputs` and :attr:`h_stored` say where y and h went,
    and on which cycle.

    Parameters
    ----------
    cfg, spec, x
        The tile, the quantised FFN and its int8 input, ``(H,)`` or ``(batch, H)``.
    i_blocks, j_blocks
        The intermediate and output blocks this tile computes (default: all).
    h_route
        An :class:`HRoute`: where h goes besides the local MXMs (default: nowhere).
    """
    v_reg = 0              # the VOPs' base register: the constant 0 (an MoE slot's own, moe_tray.ExpertSlot)

    def __init__(self, cfg: TileConfig, spec: FfnSpec, x, i_blocks=None, j_blocks=None, h_route=None):
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
        self.x = _pad(x, (B, self.Hp))
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
        # Rows per cycle: one per MEM slice of the hemisphere, one stream each, leaving
        # stream n for x/h (the last of a block's chunks is partial when n does not divide L).
        self.n = weight_streams(cfg)
        self.chunks = lw_cycles(L, self.n)
        self.lx_stream = self.n
        self.res = Reservations(cfg)
        self._feeds = {}                          # (side, n) -> [(MEM slice, READ lead)] by stream (_feed)
        self.ramp = True                          # early blocks may load from the nearest slices only (_ramp_n)
        self._leads = {}                          # side -> its weight slices' READ leads, ascending
        self.timed: dict[str, list[tuple[int, Instr]]] = {n: [] for n in cfg.queue_names}
        self.memory = {n: np.zeros((cfg.mem_depth, L), np.uint8) for n in cfg.mem_names}
        self.next_free = {n: 0 for n in cfg.mem_names}
        self.params = Program(cfg).vxm_params.copy()
        self.n_params = 0
        self.slot_ready = {s: {} for s in SIDES}
        self.loader_free = {s: 0 for s in SIDES}   # first cycle a new LW may issue (the last load started)
        self.load_end = {s: 0 for s in SIDES}      # first cycle a new load may start (the last one swapped)
        self.last_mm = {s: -1 for s in SIDES}
        self.blocks_left = dict(zip(SIDES, self._jobs_per_side()))   # weight blocks each MXM has yet to load
        self.mm_count = 0
        self.outputs = {}
        self._check_capacity()

    # ---- geometry ----------------------------------------------------------------------
    def pos(self, name):
        return self.cfg.position(name)

    def ldr(self, side):
        """The loader queue of MXM ``side`` (its LWs and LXs)."""
        return self.cfg.loader(side)

    def in_dir(self, side):
        """Direction of the streams flowing into the MXM on ``side`` from its hemisphere's
        MEM slices (towards the edge in the edge layout, towards the VXM in the center one)."""
        return WEST if self.pos(side) < self.pos(self.mem(side, 0)) else EAST

    def mem(self, side, j):
        return f"MEM_{side[-1]}{j}"          # MXM_W's hemisphere is MEM_W*, MXM_E's MEM_E*

    def emit(self, name, cycle, instr):
        self.timed[name].append((cycle, instr))

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
        holds back no slice's first weight rows for more than a few cycles."""
        for side in SIDES:
            for k in range(self.KH):
                src = self.mem(side, k % self.n)
                for b in range(self.B):
                    slot, addr = self.x_slot(k, b), self.alloc(src, 1)
                    self.memory[src][addr] = self.x[b, k * self.cfg.lanes:(k + 1) * self.cfg.lanes] & 0xFF
                    self.x_rows.append((src, addr, k, b))
                    d = self.in_dir(side)
                    lead = read_lead(self.cfg, src, side)      # the READ's cycles to the MXM: its LX's
                    read = Instr.read(self.lx_stream, d, addr)
                    t = 0
                    while not (self.res.slot_free(src, t)
                               and self.res.slot_free(self.ldr(side), t + lead)
                               and self.res.drives_free(src, t, read, self.pos(side))):
                        t += 1
                    who = f"x[{b}] block {k} -> {side} slot {slot}"
                    self.res.take_slot(src, t, who)
                    self.res.take_slot(self.ldr(side), t + lead, who)
                    self.res.take_drives(src, t, read, self.pos(side), who)
                    self.emit(src, t, read)
                    self.emit(self.ldr(side), t + lead, Instr.lx(self.lx_stream, d, slot))
                    self.slot_ready[side][slot] = t + lead + 1

    def alloc(self, name, rows):
        a = self.next_free[name]
        self.next_free[name] += rows
        if self.next_free[name] > self.cfg.mem_depth:
            # A single FFN's capacity is checked up front (_check_capacity); a layout that
            # shares the slices (MoE slots beside a tray's shared expert) ends here.
            raise CompileError(f"{name} needs {self.next_free[name]} rows for what is placed on it; a MEM slice "
                               f"holds mem_depth = {self.cfg.mem_depth} rows")
        return a

    def new_param(self, **fields):
        e = self.n_params
        self.n_params += 1
        for f, v in fields.items():
            self.params[e, :, VXM_FIELDS.index(f)] = v
        return e

    def _feed(self, side, n):
        """The MEM slice on each of the ``n`` weight streams of ``side`` and its READ's lead
        (latency + distance to the MXM): with every weight slice (``n`` = :attr:`n`),
        slice j on stream j; with fewer (a ramp block, :meth:`_ramp_n`), the ``n`` slices
        nearest the MXM, nearest on stream 0."""
        feed = self._feeds.get((side, n))
        if feed is None:
            lead = lambda m: read_lead(self.cfg, m, side)
            mems = [self.mem(side, j) for j in range(self.n)]
            if n < self.n:
                mems = sorted(mems, key=lead)[:n]
            feed = self._feeds[(side, n)] = [(m, lead(m)) for m in mems]
        return feed

    def _ramp_n(self, side, t_s, rows):
        """Rows per cycle for a block starting on ``t_s``: :attr:`n`, or early in the program,
        while the farther slices' READs would fall before cycle 0, the slices near enough
        (a *ramp*: the first blocks load from fewer, nearer slices over more cycles, so
        that the MXM starts before the farthest slice's first row could arrive).  0 when
        waiting for more slices swaps the block in earlier."""
        leads = self._leads.get(side)
        if leads is None:
            leads = self._leads[side] = sorted(lead for _, lead in self._feed(side, self.n))
        if not self.ramp or t_s >= leads[-1]:
            return self.n
        reach = lambda t: sum(1 for x in leads if x <= t)       # slices whose chunk-0 READ is on or after 0
        swap = lambda t: t + lw_cycles(rows, reach(t)) if reach(t) else 1 << 62
        return 0 if any(swap(t) < swap(t_s) for t in range(t_s + 1, leads[-1] + 1)) else reach(t_s)

    def _window_ok(self, side, t_s, n, rows):
        """Can the weight slices of ``side``'s hemisphere feed a block starting on ``t_s``
        with ``n`` rows per cycle (its first ``rows`` rows)?"""
        d, to = self.in_dir(side), self.pos(side)
        return all(self.res.run_free(m, cycles, _read_probe(j, d), to)
                   for j, m, cycles in self._window_runs(side, t_s, n, rows))

    def _window_runs(self, side, t_s, n, rows):
        """The READs that feed ``side``'s LW of a block starting on ``t_s`` with ``n`` rows
        per cycle of its first ``rows`` rows, by stream: (stream j, its MEM slice
        (:meth:`_feed`), the cycles of its READs); the c-th READ is chunk c, row ``c*n + j``
        (the last chunk is partial when n does not divide the rows)."""
        return [(j, m, [t_s + c - lead for c in range(len(range(j, rows, n)))])
                for j, (m, lead) in enumerate(self._feed(side, n)) if j < rows]

    def _take_window(self, side, t_s, block, who, n, rows):
        d, to = self.in_dir(side), self.pos(side)
        rows = (np.asarray(block, np.int64) & 0xFF)[:rows]
        for j, m, cycles in self._window_runs(side, t_s, n, len(rows)):
            read = _read_probe(j, d)
            self.res.take_run(m, cycles, read, to, who)
            addr = self.alloc(m, len(cycles))
            self.memory[m][addr:addr + len(cycles)] = rows[j::n]     # row c*n + j at addr + c
            for c, r in enumerate(cycles):
                self.emit(m, r, read.with_addr(addr + c))      # a checked READ; alloc keeps addr < mem_depth

    def place_blocks(self, sides, blocks, mms, on_emit, label, rows):
        """Load ``blocks[i]`` into ``sides[i]`` (lockstep when two; their first ``rows``
        rows: :meth:`block_rows`) and issue its MMs.

        ``mms`` is a list of (slot, acc, flags) for every MXM alike; ``on_emit(t_vop, b)``
        places what follows the EMIT of MM number b from its VOP on cycle t_vop (whose VXM
        issue slot is free) and returns False if it cannot on that cycle."""
        # The fewest load cycles (all n streams): no start this early swaps in before the
        # previous block's last MM; a block with fewer streams swaps in later still.
        ch = lw_cycles(rows, self.n)
        t_s = max(max(self.load_end[s], self.last_mm[s] + 1 - ch) for s in sides)
        while True:
            n = min(self._ramp_n(s, t_s, rows) for s in sides)
            if n and all(self._window_ok(s, t_s, n, rows) for s in sides):
                lw_slot = max(t_s - DELAY_MAX, *(self.loader_free[s] for s in sides))
                while lw_slot <= t_s and not all(self.res.slot_free(self.ldr(s), lw_slot) for s in sides):
                    lw_slot += 1
                if lw_slot <= t_s:
                    break
            t_s += 1
        swap = t_s + lw_cycles(rows, n)
        for s, blk in zip(sides, blocks):
            who = f"{label} on {s}"
            self._take_window(s, t_s, blk, who, n, rows)
            self.res.take_slot(self.ldr(s), lw_slot, who + " LW")
            self.emit(self.ldr(s), lw_slot, Instr.lw(0, self.in_dir(s), n, t_s - lw_slot,
                                                     rows=0 if rows == self.cfg.lanes else rows))
            self.loader_free[s], self.load_end[s] = t_s, swap
            self.blocks_left[s] -= 1
        # MMs: from the swap on (the loader issues the next block's LW beside them).
        t = swap
        for b, (slot, acc, flags) in enumerate(mms):
            ins = {s: Instr.mm(0, self.in_dir(s), acc=acc, slot=_slot(slot, s), flags=flags) for s in sides}
            # Beyond every reservation so far (and the latencies after it) nothing changes:
            # an MM that does not fit by then never will (a placement bug, named, not a hang).
            horizon = self.res.done_cycles() + 2 * self.cfg.positions + DELAY_MAX + 64
            while True:
                ok = all(self.res.slot_free(s, t) and self.slot_ready[s].get(_slot(slot, s), 1 << 62) <= t
                         for s in sides)
                if ok and flags & MMFlag.EMIT:        # its accumulator planes to the VXM, and what follows
                    t_v = self.vop_cycle(sides[0], t)
                    ok = (all(self.res.drives_free(s, t, ins[s], self.cfg.vxm_position) for s in sides)
                          and self.res.slot_free("VXM", t_v) and on_emit(t_v, b, dry=True))
                if ok:
                    break
                t += 1
                if t > max(horizon, swap):
                    ready = {s: self.slot_ready[s].get(_slot(slot, s)) for s in sides}
                    raise CompileError(f"{label}: MM {b} finds no cycle up to {t} where it and what follows fit "
                                       f"(x slots ready on {ready}; an EMIT needs streams 0..{self.cfg.acc_planes - 1} "
                                       "to the VXM and a free VXM cycle): this schedule cannot place it")
            for s in sides:
                who = f"{label} MM {b} on {s}"
                self.res.take_slot(s, t, who)
                self.emit(s, t, ins[s])
                if flags & MMFlag.EMIT:
                    self.res.take_drives(s, t, ins[s], self.cfg.vxm_position, who)
                self.last_mm[s] = t
                self.mm_count += 1
            if flags & MMFlag.EMIT:
                on_emit(self.vop_cycle(sides[0], t), b, dry=False)
            t += 1

    def vop_cycle(self, side, t_mm):
        return t_mm + MXM_LATENCY + abs(self.cfg.vxm_position - self.pos(side))

    # ---- what follows an EMIT ----------------------------------------------------------
    def h_to_mxms(self, t_vop, slot, dry, who):
        """VOP result (h) driven both ways on the x stream into both MXMs' slot ``slot``."""
        v, s = self.cfg.vxm_position, self.lx_stream
        arrive = {side: t_vop + self.cfg.vxm_latency + abs(v - self.pos(side)) for side in SIDES}
        vop = Instr.vop(0, EAST, 0, s, VopFlag.OUT_E | VopFlag.OUT_W)
        to = {d: self.pos(side) for side, d in TOWARDS.items()}
        ok = (all(self.res.slot_free(self.ldr(side), arrive[side]) for side in SIDES)
              and self.res.drives_free("VXM", t_vop, vop, to))
        if dry or not ok:
            return ok
        self.res.take_drives("VXM", t_vop, vop, to, who)
        for side in SIDES:
            self.res.take_slot(self.ldr(side), arrive[side], who + f" LX {side}")
            self.emit(self.ldr(side), arrive[side], Instr.lx(s, TOWARDS[side], slot))
            self.slot_ready[side][slot] = arrive[side] + 1
        return True

    def _mems_near_vxm(self, t_vop, hemis):
        """MEM slices nearest the VXM first, with the cycle a VOP result of ``t_vop``
        passes them: (flag, slice, cycle, dir) for the hemispheres ``hemis`` in order."""
        v = self.cfg.vxm_position
        for k in range(self.cfg.mem_slices):
            for hemi in hemis:
                d, flag = (EAST, VopFlag.OUT_E) if hemi == "E" else (WEST, VopFlag.OUT_W)
                m = f"MEM_{hemi}{k}"
                if self.next_free[m] < self.cfg.mem_depth:
                    yield flag, m, t_vop + self.cfg.vxm_latency + abs(v - self.pos(m)), d

    def h_store_slot(self, t_vop):
        """A MEM slice on h's way to the MXMs with a free slot when h passes: (slice, cycle, dir)."""
        return next(((m, t_w, d) for _, m, t_w, d in self._mems_near_vxm(t_vop, "WE")
                     if self.res.slot_free(m, t_w)), None)

    def _reads_ahead(self, m, t_w):
        """Will MEM slice ``m`` still be reading weights on cycle ``t_w``, for the blocks its
        MXM has yet to load (placed later, ``chunks`` cycles each from ``load_end`` on, as
        if without stalls)?  A write there would push one of those reads, and its block,
        back."""
        side = "MXM_" + m[4]
        start = self.load_end[side] - read_lead(self.cfg, m, side)
        return start <= t_w < start + self.blocks_left[side] * self.chunks     # (none left: never)

    def y_to_mem(self, t_vop, dry, who):
        """VOP result (y) to the nearest MEM slice with a free write slot, preferring one
        whose weight reads are over (:meth:`_reads_ahead`); returns (flags, slice, cycle,
        dir) or None."""
        # A stable sort: nearest first among the slices done reading, then among the others.
        for flag, m, t_w, d in sorted(self._mems_near_vxm(t_vop, "EW"), key=lambda c: self._reads_ahead(c[1], c[2])):
            vop = Instr.vop(0, EAST, 0, self.lx_stream, flag)
            if self.res.slot_free(m, t_w) and self.res.drives_free("VXM", t_vop, vop, self.pos(m)):
                if not dry:
                    self.res.take_slot(m, t_w, who + " WRITE")
                    self.res.take_drives("VXM", t_vop, vop, self.pos(m), who)
                return flag, m, t_w, d
        return None

    def place_vop(self, t_vop, side, param, flags, who):
        dir_a = EAST if side == "MXM_W" else WEST
        self.res.take_slot("VXM", t_vop, who)
        self.emit("VXM", t_vop, Instr.vop(0, dir_a, param=param, out=self.lx_stream, flags=flags, base=self.v_reg))

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
        flags = MMFlag.XBUF | (MMFlag.ACC if k else 0) | (MMFlag.EMIT if k == KH - 1 else 0)
        mms = [(self.x_slot(k, b), b, flags) for b in range(B)]

        def on_emit(t_v, b, dry):
            who = f"h block {i} col {b}"
            if not (self.h_to_mxms(t_v, self.h_slot(i, b), True, who) and self.h_route.fits(self, t_v, i, b)):
                return False
            if not dry:
                self.h_route.take(self, t_v, i, b)
                self.h_to_mxms(t_v, self.h_slot(i, b), False, who)
                self.place_vop(t_v, sides[0], e, vflags | VopFlag.OUT_E | VopFlag.OUT_W, who)
            return True

        self.place_blocks(sides, blocks, mms, on_emit, f"W1/W3 block ({i},{k})", self.block_rows(i))

    def _phase2_block(self, sides, blocks, iis, j, jl, e, first, last):
        """One W2 block on one MXM, or two (one per MXM, h blocks ``iis``) whose partial
        sums the VXM adds."""
        B = self.B
        flags = MMFlag.XBUF | (0 if first else MMFlag.ACC) | (MMFlag.EMIT if last else 0)
        slots = {s: i for s, i in zip(sides, iis)}
        mms = [({s: self.h_slot(i, b) for s, i in slots.items()}, B + jl * B + b, flags) for b in range(B)]
        vflag = VopFlag.ADD if len(sides) == 2 else 0

        def on_emit(t_v, b, dry):
            who = f"y block {j} col {b}"
            got = self.y_to_mem(t_v, dry, who)
            if got is None:
                return False
            if not dry:
                flag, m, t_w, d = got
                self.place_vop(t_v, sides[0], e, flag | vflag, who)
                addr = self.alloc(m, 1)
                self.emit(m, t_w, Instr.write(self.lx_stream, d, addr))
                self.outputs[(b, j)] = (m, addr, t_w)
            return True

        self.place_blocks(sides, blocks, mms, on_emit, f"W2 block ({j},{'+'.join(map(str, iis))})",
                          self.cfg.lanes)

    # ---- lowering ------------------------------------------------------------------------
    def program(self, table=None) -> Program:
        """Lower the placement (on a tray's tile, without the RUNTIME_DESKEWs past its last work);
        ``table``: the VXM's tables (default: this FFN's one table)."""
        if self.cfg.links:
            last = last_work(self.timed)
            self.timed = strip_deskews(self.timed, last)
            self.res.release_after(DESKEW_SLICE, last)
        queues = {name: lower(entries) for name, entries in self.timed.items()}
        prog = Program(self.cfg, queues, self.memory, vxm_params=self.params,
                       table=self.p.table if table is None else table)
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
                        cycles=self.res.done_cycles(), writes=writes,
                        outputs={k: v[:2] for k, v in self.outputs.items()}, busy=self.res.busy(),
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


def output_matrix(manifest: Manifest, memory: dict, lanes: int, H: int, dtype: str | None = None) -> np.ndarray:
    """Gather y (batch, H) from final MEM contents using the manifest's locations: int8,
    or E4M3 codes (uint8) on an FP8 tile (``dtype``, default the manifest's)."""
    dtype = dtype or manifest.dtype
    out = gather_blocks(np.zeros((manifest.batch, manifest.padded[0]), np.uint8), manifest.outputs, memory, lanes)
    return out[:, :H] if dtype == "fp8" else out[:, :H].astype(np.int8)


def gather_blocks(out: np.ndarray, outputs: dict, memory: dict, lanes: int) -> np.ndarray:
    """``out`` (uint8) with each block ``outputs[(b, j)] = (slice, addr, ...)`` of ``memory`` in row b."""
    for (b, j), (m, addr, *_) in outputs.items():
        out[b, j * lanes:(j + 1) * lanes] = np.asarray(memory[m][addr], np.uint8)
    return out


@dataclass
class Example:
    """A random float FFN, its quantised form and int8 input, for demos, tests and benches."""
    spec: FfnSpec
    x_int8: np.ndarray
    y_float: np.ndarray
    activation: str

    def error_vs_float(self, y_int8) -> dict:
        from firmware_gen.golden.numerics import error_report
        return error_report(y_int8, self.spec.out_scale, self.y_float, self.spec.dtype)


EXAMPLE_MAX_VALUES = 1 << 27     # values in one array of a random example (1 GiB of float64)


def example_ffn(kind: str = "swiglu", H: int = 64, I: int = 128, batch: int = 1, seed: int = 0,
                activation: str | None = None, dtype: str = "int8") -> Example:
    """Gaussian weights (std 1/sqrt(fan-in)) and inputs, quantised by ``FfnSpec.from_float``
    with the input itself as the calibration batch (``dtype``: int8 or fp8; the input
    ``x_int8`` is then int8 values or E4M3 codes)."""
    from firmware_gen.golden.numerics import KINDS, activation_quantiser, dequantise, ffn_float
    if kind not in KINDS:
        raise CompileError(f"unknown FFN kind {kind!r}; choose one of {', '.join(KINDS)}")
    for name, v in (("H", H), ("I", I), ("batch", batch)):
        if not isinstance(v, (int, np.integer)) or v < 1:
            raise CompileError(f"{name} must be a positive integer, got {v!r}")
    largest = max(H * I, batch * H, batch * I)
    if largest > EXAMPLE_MAX_VALUES:
        raise CompileError(f"a random example of H={H}, I={I}, batch {batch} needs arrays of {largest:,} float "
                           f"values; the limit is {EXAMPLE_MAX_VALUES:,} per array (1 GiB of float64): give a "
                           "smaller shape, or your own weights (--weights FILE)")
    activation = activation or ("silu" if kind == "swiglu" else "gelu")
    rng = np.random.default_rng(seed)
    W1 = rng.normal(size=(I, H)) / math.sqrt(H)
    W2 = rng.normal(size=(H, I)) / math.sqrt(I)
    W3 = rng.normal(size=(I, H)) / math.sqrt(H) if kind == "swiglu" else None
    b1 = rng.normal(size=I) * 0.1 if kind == "classic" else None
    b2 = rng.normal(size=H) * 0.1 if kind == "classic" else None
    x = rng.normal(size=(batch, H))
    try:
        spec = FfnSpec.from_float(kind, W1, W2, W3, b1, b2, x_calibration=x, activation=activation, dtype=dtype)
    except NumericsError as e:
        raise CompileError(str(e)) from None
    xq, _ = activation_quantiser(dtype)(x, spec.x_scale)
    x_real = dequantise(xq, spec.x_scale, dtype)
    return Example(spec, xq, ffn_float(kind, W1, W2, W3, b1, b2, x_real, activation), activation)
