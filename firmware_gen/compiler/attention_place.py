"""A dedicated placer for the attention step (``attention.AttentionStep``): groups of
instructions at fixed offsets from one another, each group at its earliest free cycle
through the tile's reservation table (``reserve.Reservations``, held by a
``tile_state.TileState``), weight blocks striped over a hemisphere's four MEM slices and
loaded four rows a cycle, and the x slots and accumulator rows each value waits on.
"""

from __future__ import annotations

from lpu_arch.isa import DELAY_MAX, EAST, MXM_LATENCY, WEST, Instr, MMFlag, Op

from firmware_gen.compiler import CompileError
from firmware_gen.compiler.tile_state import SIDES, TileState

HORIZON = 1 << 14           # cycles a group may search before the placement gives up (a bug, named)
IN_DIR = {"MXM_W": WEST, "MXM_E": EAST}        # the streams an MXM reads (from its hemisphere's MEMs)
LOADER = {"MXM_W": "MXL_W", "MXM_E": "MXL_E"}
LOADS = {v: k for k, v in LOADER.items()}       # a loader -> the MXM whose x slots it fills
HEMI = {"MXM_W": "W", "MXM_E": "E"}


class Stripe(list):
    """A weight block's per-slice first rows on slices ``first`` .. ``first + len - 1`` of a
    hemisphere (a plain list: slices 0 ..)."""

    def __init__(self, addrs, first: int = 0):
        super().__init__(addrs)
        self.first = first


class Item:
    """One instruction of a group: ``slice`` issues ``ins`` ``off`` cycles after the group's
    cycle; ``to``: the position (or ``{direction: position}``) its drives reach."""
    __slots__ = ("slice", "off", "ins", "to")

    def __init__(self, slice_name, off, ins, to=None):
        self.slice, self.off, self.ins, self.to = slice_name, off, ins, to


class Placer:
    """Groups, weight loads and MMs on one tile (``state``)."""

    def __init__(self, state: TileState):
        self.state, self.cfg, self.res = state, state.cfg, state.res
        self.floor = 0                        # no group or load is placed before this cycle (a step's start)
        self.acc_ready = {}                   # (side, row) -> first cycle its sum may be read (flushed)
        self.slot_ready = {s: {} for s in SIDES}
        self.acc_read = {}                    # (side, row) -> the last cycle an EMIT reads its sum
        self.slot_read = {}                   # (side, slot) -> the last cycle an MM reads it
        self.swap = {s: 0 for s in SIDES}     # the cycle the active block swapped in

    def pos(self, name):
        return self.cfg.position(name)

    def fits(self, items, t):
        res = self.res
        return all(res.slot_free(i.slice, t + i.off) and self._after_reads(i, t + i.off)
                   and (i.to is None or res.drives_free(i.slice, t + i.off, i.ins, i.to)) for i in items)

    def _after_reads(self, item, t) -> bool:
        """Whether ``item`` at cycle ``t`` overwrites nothing a read placed before it still needs: an
        ``LX`` comes after the last ``MM`` of its slot, an ``MM`` without ``ACC`` after the last
        ``EMIT`` of its row (a slot or row is reused once read)."""
        ins = item.ins
        if ins.op == Op.LX:
            return t > self.slot_read.get((LOADS[item.slice], ins.operand("slot")), -1)
        if ins.op == Op.MM and not ins.aux & MMFlag.ACC:
            return t > self.acc_read.get((item.slice, ins.operand("acc")), -1)
        return True

    def _reads(self, item, t):
        ins = item.ins
        if ins.op == Op.MM:
            key = (item.slice, ins.operand("slot"))
            self.slot_read[key] = max(self.slot_read.get(key, -1), t)
            if ins.aux & MMFlag.EMIT:
                key = (item.slice, ins.operand("acc"))
                self.acc_read[key] = max(self.acc_read.get(key, -1), t)

    def place(self, items, t0, who):
        """The earliest cycle ``t >= t0`` on which every item of the group is free; taken and
        emitted there."""
        t0 = max(t0, self.floor, -min(i.off for i in items))
        t = t0
        while not self.fits(items, t):
            t += 1
            if t > t0 + HORIZON:
                raise CompileError(f"{who}: no cycle from {t0} to {t} fits it: this schedule cannot place it")
        for i in items:
            self._reads(i, t + i.off)
            self.res.take_slot(i.slice, t + i.off, who)
            if i.to is not None:
                self.res.take_drives(i.slice, t + i.off, i.ins, i.to, who)
            self.state.emit(i.slice, t + i.off, i.ins)
        return t

    # ---- vectors into x slots ------------------------------------------------------------
    def lx(self, side, mem, addr, slot, t0, who, stream=4):
        """READ row ``addr`` of ``mem`` onto ``stream`` towards ``side`` and ``LX`` it into x slot
        ``slot`` on arrival."""
        d, pm, px = IN_DIR[side], self.pos(mem), self.pos(side)
        lead = 1 + abs(pm - px)
        t = self.place([Item(mem, 0, Instr.read(stream, d, addr), px),
                        Item(LOADER[side], lead, Instr.lx(stream, d, slot))], t0, who)
        self.slot_ready[side][slot] = t + lead + 1
        return t + lead

    # ---- weight blocks ------------------------------------------------------------------
    def load(self, side, addrs, t0, who, base=0, stride=1):
        """``LW`` a block striped over the hemisphere's slices (row ``r`` at slice ``r % 4``,
        address ``addrs[r % 4] + stride * (r // 4)``, through base register ``base``) into ``side``,
        four rows a cycle from streams 0..3; its MMs may issue from the returned swap cycle."""
        d, px, n, first = IN_DIR[side], self.pos(side), len(addrs), getattr(addrs, "first", 0)
        mems = [f"MEM_{HEMI[side]}{first + j}" for j in range(n)]
        leads = [1 + abs(self.pos(m) - px) for m in mems]
        rows = self.cfg.lanes // n
        t_s = max(t0, self.floor, self.swap[side], self.state.last_mm[side] + 1 - rows, max(leads),
                  self.state.loader_free[side])
        ldr, start = LOADER[side], t_s
        reads = [Item(m, c - leads[j], Instr.read(j, d, addrs[j] + stride * c, base), px)
                 for j, m in enumerate(mems) for c in range(rows)]
        while True:
            if self.fits(reads, t_s):
                lw = next((c for c in range(max(self.state.loader_free[side], t_s - DELAY_MAX), t_s + 1)
                           if self.res.slot_free(ldr, c)), None)
                if lw is not None:
                    break
            t_s += 1
            if t_s > start + HORIZON:
                raise CompileError(f"{who}: no cycle from {start} to {t_s} fits its load: this schedule cannot place it")
        self.place(reads, t_s, who)
        self.res.take_slot(ldr, lw, who + " LW")
        self.state.emit(ldr, lw, Instr.lw(0, d, n, t_s - lw))
        self.state.loader_free[side] = t_s
        self.swap[side] = t_s + rows
        return t_s + rows

    def mm(self, side, slot, acc, flags, t0, who):
        """An ``MM`` of x slot ``slot`` into accumulator row ``acc`` on the active block (no EMIT)."""
        t = max(t0, self.swap[side], self.slot_ready[side][slot], self.acc_ready.get((side, acc), 0))
        t = self.place([Item(side, 0, Instr.mm(0, IN_DIR[side], acc=acc, slot=slot, flags=flags | MMFlag.XBUF))],
                       t, who)
        self.state.last_mm[side] = max(self.state.last_mm[side], t)
        self.acc_ready[(side, acc)] = t + 1
        return t

    def flush(self, side, acc, zero_slot):
        """The item of an ``MM ACC EMIT`` of the zero slot: row ``acc``'s sum driven to the VXM
        (``MXM_LATENCY`` later), whichever block is active."""
        ins = Instr.mm(0, IN_DIR[side], acc=acc, slot=zero_slot, flags=MMFlag.XBUF | MMFlag.ACC | MMFlag.EMIT)
        return Item(side, 0, ins, self.cfg.vxm_position)

    def emit_lag(self, side):
        """Cycles from an EMITting MM on ``side`` to the VOP that takes its sum."""
        return MXM_LATENCY + abs(self.cfg.vxm_position - self.pos(side))
