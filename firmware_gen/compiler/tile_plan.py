"""One plan's placement on a tile (``docs/compiler.md``, *Dataflow*): the tile's geometry,
and weight blocks loaded into the MXMs from their hemispheres' MEM slices with the MMs
that use them, each at its earliest free cycle through the tile's reservation table
(:class:`~firmware_gen.compiler.tile_state.TileState`).  The FFN plan
(``ffn.FfnPlan``) places its dataflow with it.
"""

from __future__ import annotations

import dataclasses
import functools

import numpy as np

from lpu_arch.config import TileConfig
from lpu_arch.isa import DELAY_MAX, EAST, MXM_LATENCY, WEST, Instr, MMFlag, Op
from lpu_arch.timing import lw_cycles, read_lead

from firmware_gen.compiler import CompileError
from firmware_gen.compiler.tile_state import TileState


def weight_streams(cfg: TileConfig) -> int:
    """Weight rows an MXM loads per cycle (LW's n): one per MEM slice of its hemisphere, on
    streams 0..n-1, leaving stream n for x and h."""
    return min(cfg.mem_slices, cfg.streams - 1)


@functools.lru_cache(maxsize=None)
def read_probe(stream: int, dir: int) -> Instr:
    """A READ on ``stream`` towards ``dir``: what a weight window's freedom is checked and
    reserved with (its drives do not depend on the address)."""
    return Instr.read(stream, dir, 0)


def _slot(slot, side):
    return slot[side] if isinstance(slot, dict) else slot


class TilePlan:
    """What every plan on a tile places with: positions, the loader queues, the weight
    slices of each MXM's hemisphere, and :meth:`place_blocks` (weight blocks into the
    MXMs and their MMs).  ``state`` is shared with the other plans placed on the tile;
    ``blocks_left``: MXM -> the weight blocks this plan will load into it, counted down as
    they load (``FfnPlan._reads_ahead`` looks ahead with it)."""

    def __init__(self, cfg: TileConfig, state: TileState, blocks_left: dict):
        self.cfg, self.state = cfg, state
        self.n = weight_streams(cfg)              # weight rows per cycle of a full LW, on streams 0..n-1
        self.chunks = lw_cycles(cfg.lanes, self.n)    # cycles of a full block's load (the last may be partial)
        self.lx_stream = self.n                   # the stream x and h travel on
        self._feeds = {}                          # (side, n) -> [(MEM slice, READ lead)] by stream (_feed)
        self.ramp = True                          # early blocks may load from the nearest slices (_ramp_n)
        self._leads = {}                          # side -> its weight slices' READ leads, ascending
        self.blocks_left = dict(blocks_left)
        self.mm_count = 0                         # MMs this plan has issued
        self.narrow = 0                           # blocks still to load from all weight slices but the farthest
        self.zero_slot = None                     # an x slot holding zeros in both MXMs (place_flush), if any

    # ---- geometry ----------------------------------------------------------------------
    def pos(self, name):
        return self.cfg.position(name)

    def ldr(self, side):
        return self.cfg.loader(side)

    def in_dir(self, side):
        """Direction of the streams flowing into the MXM on ``side`` from its hemisphere's
        MEM slices (towards the edge in the edge layout, towards the VXM in the center one)."""
        return WEST if self.pos(side) < self.pos(self.mem(side, 0)) else EAST

    def mem(self, side, j):
        """Weight slice ``j`` of the hemisphere of MXM ``side``."""
        return f"MEM_{side[-1]}{j}"          # MXM_W's hemisphere is MEM_W*, MXM_E's MEM_E*

    # ---- weight blocks and their MMs ------------------------------------------------------
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
        return all(self.state.res.run_free(m, cycles, read_probe(j, d), to)
                   for j, m, cycles in self.window_runs(side, t_s, n, rows))

    def window_runs(self, side, t_s, n, rows):
        """The READs that feed ``side``'s LW of a block starting on ``t_s`` with ``n`` rows
        per cycle of its first ``rows`` rows, by stream: (stream j, its MEM slice
        (:meth:`_feed`), the cycles of its READs); the c-th READ is chunk c, row ``c*n + j``
        (the last chunk is partial when n does not divide the rows)."""
        return [(j, m, [t_s + c - lead for c in range(len(range(j, rows, n)))])
                for j, (m, lead) in enumerate(self._feed(side, n)) if j < rows]

    def take_window(self, side, t_s, ident, block, who, n, rows):
        """Place the READs of weight block ``ident`` (its values ``block``) for ``side``'s
        LW of a block starting on ``t_s`` (:meth:`window_runs`): its rows stored at newly
        allocated rows of each weight slice."""
        d, to = self.in_dir(side), self.pos(side)
        state = self.state
        rows = (np.asarray(block, np.int64) & 0xFF)[:rows]
        for j, m, cycles in self.window_runs(side, t_s, n, len(rows)):
            read = read_probe(j, d)
            state.res.take_run(m, cycles, read, to, who)
            addr = state.alloc(m, len(cycles))
            state.load(m, addr, rows[j::n])                            # row c*n + j at addr + c
            for c, r in enumerate(cycles):
                state.emit(m, r, read.with_addr(addr + c))      # a checked READ; alloc keeps addr < mem_depth

    def _narrow_n(self, side, t_s):
        """Rows per cycle of a *narrow* block (:attr:`narrow`): every weight slice but the
        farthest, which stays free for other READs (x's); 0 before the farthest of those
        can feed it."""
        leads = sorted(lead for _, lead in self._feed(side, self.n - 1))
        return self.n - 1 if t_s >= leads[-1] else 0

    def place_blocks(self, sides, blocks, idents, mms, on_emit, label, rows, prepare=None):
        """Load ``blocks[i]`` (named ``idents[i]``) into ``sides[i]`` (lockstep when two;
        their first ``rows`` rows: ``FfnPlan.block_rows``) and issue its MMs; ``prepare()``,
        if given, places what the MMs need once the load is placed (x, :meth:`FfnPlan.place_x`).

        ``mms`` is a list of (slot, acc, flags) for every MXM alike; ``on_emit(t_vop, b)``
        places what follows the EMIT of MM number b from its VOP on cycle t_vop (whose VXM
        issue slot is free) and returns False if it cannot on that cycle."""
        # The fewest load cycles (all n streams): no start this early swaps in before the
        # previous block's last MM; a block with fewer streams swaps in later still.
        state, res = self.state, self.state.res
        ch = lw_cycles(rows, self.n)
        t_s = max(max(state.load_end[s], state.last_mm[s] + 1 - ch) for s in sides)
        while True:
            n = min((self._narrow_n if self.narrow and self.n > 1 else
                     lambda s, t: self._ramp_n(s, t, rows))(s, t_s) for s in sides)
            if n and all(self._window_ok(s, t_s, n, rows) for s in sides):
                lw_slot = max(t_s - DELAY_MAX, *(state.loader_free[s] for s in sides))
                while lw_slot <= t_s and not all(res.slot_free(self.ldr(s), lw_slot) for s in sides):
                    lw_slot += 1
                if lw_slot <= t_s:
                    break
            t_s += 1
        swap = t_s + lw_cycles(rows, n)
        for s, blk, ident in zip(sides, blocks, idents):
            who = f"{label} on {s}"
            self.take_window(s, t_s, ident, blk, who, n, rows)
            res.take_slot(self.ldr(s), lw_slot, who + " LW")
            state.emit(self.ldr(s), lw_slot, Instr.lw(0, self.in_dir(s), n, t_s - lw_slot,
                                                      rows=0 if rows == self.cfg.lanes else rows))
            state.loader_free[s], state.load_end[s] = t_s, swap
            self.blocks_left[s] -= 1
        self.narrow = max(0, self.narrow - 1)
        if prepare is not None:
            prepare()
        # MMs: from the swap on (the loader issues the next block's LW beside them).
        t = swap
        self.mm_cycles = []                       # each MM's cycle, in the order of mms
        for b, (slot, acc, flags) in enumerate(mms):
            ins = {s: Instr.mm(0, self.in_dir(s), acc=acc, slot=_slot(slot, s), flags=flags) for s in sides}
            # Beyond every reservation so far (and the latencies after it) nothing changes:
            # an MM that does not fit by then never will (a placement bug, named, not a hang).
            horizon = res.done_cycles() + 2 * self.cfg.positions + DELAY_MAX + 64
            while True:
                ok = all(res.slot_free(s, t) and state.slot_ready[s].get(_slot(slot, s), 1 << 62) <= t for s in sides)
                if ok and flags & MMFlag.EMIT:        # its accumulator planes to the VXM, and what follows
                    t_v = self.vop_cycle(sides[0], t)
                    ok = (all(res.drives_free(s, t, ins[s], self.cfg.vxm_position) for s in sides)
                          and res.slot_free("VXM", t_v) and on_emit(t_v, b, dry=True))
                if ok:
                    break
                t += 1
                if t > max(horizon, swap):
                    ready = {s: state.slot_ready[s].get(_slot(slot, s)) for s in sides}
                    raise CompileError(f"{label}: MM {b} finds no cycle up to {t} where it and what follows fit "
                                       f"(x slots ready on {ready}; an EMIT needs streams 0..{self.cfg.acc_planes - 1} "
                                       "to the VXM and a free VXM cycle): this schedule cannot place it")
            for s in sides:
                who = f"{label} MM {b} on {s}"
                res.take_slot(s, t, who)
                state.emit(s, t, ins[s])
                if flags & MMFlag.EMIT:
                    res.take_drives(s, t, ins[s], self.cfg.vxm_position, who)
                state.last_mm[s] = t
                self.mm_count += 1
            self.mm_cycles.append(t)
            if flags & MMFlag.EMIT:
                on_emit(self.vop_cycle(sides[0], t), b, dry=False)
            t += 1

    def place_flush(self, sides, acc, on_emit, label, t, b=0, in_place=False):
        """An ``MM ACC EMIT`` of x slot :attr:`zero_slot` (zeros) into accumulator row ``acc``
        of each MXM of ``sides`` (together), on the first cycle from ``t`` on where it and
        what follows fit (``on_emit(t_vop, b, dry)``, as :meth:`place_blocks`): the row's sum
        goes to the VXM unchanged, whichever weight block is active then.  So a block's
        MMs may leave their sums in the accumulators and these send them on later, when
        the VXM, the links or a MEM slice are free.  ``in_place``: the row's last MMs are
        on ``t - 1``; if what follows fits after them, they EMIT instead (no flush)."""
        state, res = self.state, self.state.res
        if in_place and self._emit_in_place(sides, acc, on_emit, t - 1, b):
            return t - 1
        slot = self.zero_slot
        flags = MMFlag.XBUF | MMFlag.ACC | MMFlag.EMIT
        ins = {s: Instr.mm(0, self.in_dir(s), acc=acc, slot=slot, flags=flags) for s in sides}
        assert all(slot in state.slot_ready[s] for s in sides), "place_flush needs the zeros in an x slot first"
        t = max(t, *(state.slot_ready[s][slot] for s in sides))
        horizon = max(t, res.done_cycles()) + 2 * self.cfg.positions + DELAY_MAX + 64
        while True:
            if all(res.slot_free(s, t) for s in sides):
                t_v = self.vop_cycle(sides[0], t)
                if (all(res.drives_free(s, t, ins[s], self.cfg.vxm_position) for s in sides)
                        and res.slot_free("VXM", t_v) and on_emit(t_v, b, dry=True)):
                    break
            t += 1
            if t > horizon:
                raise CompileError(f"{label}: its sum finds no cycle up to {t} to leave the accumulators: "
                                   "this schedule cannot place it")
        for s in sides:
            who = f"{label} flush {b} on {s}"
            res.take_slot(s, t, who)
            state.emit(s, t, ins[s])
            res.take_drives(s, t, ins[s], self.cfg.vxm_position, who)
            self.mm_count += 1
        on_emit(self.vop_cycle(sides[0], t), b, dry=False)
        return t

    def _emit_in_place(self, sides, acc, on_emit, t, b) -> bool:
        """Turn the MMs into row ``acc`` on cycle ``t`` (one per MXM of ``sides``) into EMITs, if
        their drives to the VXM, the VOP's cycle and ``on_emit`` fit; False (nothing changed)
        otherwise."""
        state, res = self.state, self.state.res
        at = {}
        for s in sides:
            i = next((n for n in range(len(state.timed[s]) - 1, -1, -1) if state.timed[s][n][0] == t), None)
            if i is None or state.timed[s][i][1].op != Op.MM or state.timed[s][i][1].operand("acc") != acc:
                return False
            at[s] = (i, dataclasses.replace(state.timed[s][i][1], aux=state.timed[s][i][1].aux | MMFlag.EMIT))
        t_v = self.vop_cycle(sides[0], t)
        if not (all(res.drives_free(s, t, ins, self.cfg.vxm_position) for s, (_, ins) in at.items())
                and res.slot_free("VXM", t_v) and on_emit(t_v, b, dry=True)):
            return False
        for s, (i, ins) in at.items():
            state.timed[s][i] = (t, ins)
            res.take_drives(s, t, ins, self.cfg.vxm_position, f"MM on {s} cycle {t} EMIT")
        on_emit(t_v, b, dry=False)
        return True

    def vop_cycle(self, side, t_mm):
        """The cycle the VXM's VOP takes the result of an EMITting MM on ``side`` on ``t_mm``."""
        return t_mm + MXM_LATENCY + abs(self.cfg.vxm_position - self.pos(side))

