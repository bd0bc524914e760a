"""The scheduling core: the reservation table (who uses which issue slot and which stream,
on which cycle) and the queue builder that lowers timed instructions to a queue.

The hardware has no arbiter, so the compiler must never let two instructions issue from
one queue on one cycle, nor two live values meet on one stream at one position (a value is
keyed by its *diagonal* and occupies a span of positions, ``lpu_arch.timing``).  Every
placement goes through this table; a clash is a :class:`ReservationError` naming both.
"""

from __future__ import annotations

from lpu_arch import c2c
from lpu_arch.effects import effects, effects_key
from lpu_arch.isa import COUNT_MAX, DELAY_MAX, EAST, STRIDE_MAX, STRIDE_MIN, Instr, Op
from lpu_arch.timing import diagonal, done_cycles, span


class ReservationError(ValueError):
    """Two users of one issue slot or one stream position on one cycle."""


class Reservations:
    def __init__(self, cfg):
        self.cfg = cfg
        self.slots: dict[str, dict[int, str]] = {n: {} for n in cfg.queue_names}
        self._occ: dict[tuple, list[tuple[int, int, str]]] = {}
        self._effects: dict[tuple, object] = {}
        self._runs: dict[tuple, list] = {}            # _run_drives by instruction shape and reader
        self.last_drive = -1
        self.last_issue = -1          # the latest issue slot taken (done_cycles)

    # ---- issue slots -------------------------------------------------------------------
    def slot_free(self, slice_name: str, cycle: int) -> bool:
        return cycle >= 0 and cycle not in self.slots[slice_name]

    def take_slot(self, slice_name: str, cycle: int, who: str) -> None:
        if cycle < 0:
            raise ReservationError(f"{who}: {slice_name} cannot issue on cycle {cycle} (before the start)")
        other = self.slots[slice_name].get(cycle)
        if other is not None:
            raise ReservationError(f"{slice_name} issues twice on cycle {cycle}: {other} and {who}")
        self.slots[slice_name][cycle] = who
        self.last_issue = max(self.last_issue, cycle)

    # ---- streams -----------------------------------------------------------------------
    def clash_at(self, dir: int, stream: int, p_from: int, p_to: int, drive_cycle: int):
        """``(who, position, cycle)`` of the first user already on the way of a value driven
        at ``p_from`` towards ``p_to``, or None."""
        lo, hi = span(p_from, p_to)
        diag = diagonal(dir, p_from, drive_cycle)
        for olo, ohi, who in self._occ.get((dir, stream, diag), ()):
            if olo <= hi and lo <= ohi:
                pos = max(lo, olo) if dir == EAST else min(hi, ohi)
                return who, pos, diag + pos if dir == EAST else diag - pos
        return None

    def stream_free(self, dir, stream, p_from, p_to, drive_cycle) -> bool:
        return self.clash_at(dir, stream, p_from, p_to, drive_cycle) is None

    def free_stream(self, dir, p_from, p_to, drive_cycle, streams=None, slots=()) -> int | None:
        """The first of ``streams`` (default: every stream, lowest first) free from ``p_from``
        to ``p_to`` for a value driven on ``drive_cycle``, or None (also when an issue slot
        ``(slice, cycle)`` of ``slots`` is taken: the instructions that drive and take it)."""
        if not all(self.slot_free(*s) for s in slots):
            return None
        candidates = range(self.cfg.streams) if streams is None else streams
        return next((st for st in candidates if self.stream_free(dir, st, p_from, p_to, drive_cycle)), None)

    def take_stream(self, dir, stream, p_from, p_to, drive_cycle, who) -> None:
        if (p_to > p_from) != (dir == EAST) or p_to == p_from:
            raise ReservationError(f"{who}: a value driven at position {p_from} on a "
                                   f"{'east' if dir == EAST else 'west'}-flowing stream never reaches {p_to}")
        clash = self.clash_at(dir, stream, p_from, p_to, drive_cycle)
        if clash is not None:
            raise ReservationError(f"stream {'EW'[dir]}{stream} carries two values on the way from "
                                   f"{self.cfg.slice_names[p_from]} to {self.cfg.slice_names[p_to]} "
                                   f"(driven on cycle {drive_cycle}): {clash[0]} and {who}")
        lo, hi = span(p_from, p_to)
        self._occ.setdefault((dir, stream, diagonal(dir, p_from, drive_cycle)), []).append((lo, hi, who))
        self.last_drive = max(self.last_drive, drive_cycle)

    def release_after(self, slice_name: str, cycle: int) -> None:
        """Free ``slice_name``'s issue slots after ``cycle`` (deskews past the last work)."""
        self.slots[slice_name] = {c: w for c, w in self.slots[slice_name].items() if c <= cycle}
        self.last_issue = max((c for s in self.slots.values() for c in s), default=-1)

    # ---- an instruction's stream drives (lpu_arch.effects) ---------------------------------
    def _drives(self, slice_name, cycle, ins, to):
        p = self.cfg.position(slice_name)
        key = effects_key(ins, slice_name)          # (one lookup per instruction shape)
        eff = self._effects.get(key)
        if eff is None:
            eff = self._effects[key] = effects(ins, slice_name, self.cfg.lanes, self.cfg.acc_planes, self.cfg.vxm_latency)
        for a in eff.drives:
            yield a.dir, a.stream, p, to[a.dir] if isinstance(to, dict) else to, cycle + a.offset

    def drives_free(self, slice_name: str, cycle: int, ins: Instr, to) -> bool:
        """Is every stream ``ins`` drives (issued by ``slice_name`` on ``cycle``, as its
        effects say) free up to its reader at position ``to`` (or ``to[direction]``)?"""
        return all(self.stream_free(*d) for d in self._drives(slice_name, cycle, ins, to))

    def take_drives(self, slice_name: str, cycle: int, ins: Instr, to, who: str) -> None:
        """Reserve every stream ``ins`` drives up to its reader (see :meth:`drives_free`)."""
        for d in self._drives(slice_name, cycle, ins, to):
            self.take_stream(*d, who)

    # ---- runs: one instruction shape issued by one slice on many cycles --------------------
    def _run_drives(self, slice_name, ins, to):
        """Each stream ``ins`` drives: ``(dir, stream, p_from, p_to, offset, diagonal - issue
        cycle, lo, hi)`` (see :meth:`_drives`; ``lo..hi``: the positions it occupies)."""
        key = (effects_key(ins, slice_name), tuple(sorted(to.items())) if isinstance(to, dict) else to)
        runs = self._runs.get(key)
        if runs is None:
            runs = self._runs[key] = [(d, s, p, t, off, diagonal(d, p, off), *span(p, t))
                                      for d, s, p, t, off in self._drives(slice_name, 0, ins, to)]
        return runs

    def run_free(self, slice_name: str, cycles, ins: Instr, to) -> bool:
        """:meth:`slot_free` and :meth:`drives_free` of ``ins`` (any address) on each of
        ``cycles``, in one pass (a weight window's READs)."""
        slots, occ = self.slots[slice_name], self._occ
        drives = self._run_drives(slice_name, ins, to)
        for c in cycles:
            if c < 0 or c in slots:
                return False
            for d, s, _, _, _, k, lo, hi in drives:
                for olo, ohi, _ in occ.get((d, s, c + k), ()):
                    if olo <= hi and lo <= ohi:
                        return False
        return True

    def take_run(self, slice_name: str, cycles, ins: Instr, to, who: str) -> None:
        """:meth:`take_slot` and :meth:`take_drives` of ``ins`` (any address) on each of
        ``cycles``: the same reservations and errors, in one pass."""
        slots, occ = self.slots[slice_name], self._occ
        drives = self._run_drives(slice_name, ins, to)
        for d, s, p, t, off, *_ in drives:
            if cycles and ((t > p) != (d == EAST) or t == p):
                self.take_stream(d, s, p, t, cycles[0] + off, who)       # (raises: it never gets there)
        for c in cycles:
            if c < 0 or c in slots:
                self.take_slot(slice_name, c, who)                    # (raises, naming both users)
            for d, s, p, t, off, k, lo, hi in drives:
                if any(olo <= hi and lo <= ohi for olo, ohi, _ in occ.get((d, s, c + k), ())):
                    self.take_stream(d, s, p, t, c + off, who)        # (raises, naming both users)
            slots[c] = who
            for d, s, p, t, off, k, lo, hi in drives:
                occ.setdefault((d, s, c + k), []).append((lo, hi, who))
        if cycles:
            last = max(cycles)
            self.last_issue = max(self.last_issue, last)
            self.last_drive = max([self.last_drive] + [last + off for *_, off, _, _, _ in drives])

    # ---- totals ------------------------------------------------------------------------
    def done_cycles(self) -> int:
        """The tile's cycle counter at done (``lpu_arch.timing.done_cycles``)."""
        return done_cycles(self.last_issue + 1, self.last_drive)

    def busy(self) -> dict[str, int]:
        return {n: len(s) for n, s in self.slots.items()}


def _plain(entry) -> bool:
    return len(entry) < 3 or entry[2] is None


def _same_but_addr(a: Instr, b: Instr) -> bool:
    return (a.op, a.stream, a.dir, a.count, a.delay, a.aux) == (b.op, b.stream, b.dir, b.count, b.delay, b.aux)


def lower(entries, merge: bool = True) -> list[Instr]:
    """Timed instructions of one queue -> its instruction list, gaps as NOPs.

    An entry is ``(cycle, instr)`` or ``(cycle, instr, repeat)``: ``repeat`` (an
    ``Instr.repeat`` or None) follows ``instr`` in the queue.  With ``merge``, runs of plain
    entries that differ only in address by a constant stride at a constant spacing become
    one REPEAT.  An entry on a cycle the queue is still busy raises ReservationError."""
    entries = sorted(entries, key=lambda e: e[0])
    q, now, i = [], 0, 0
    while i < len(entries):
        c0, ins, *rep = entries[i]
        if c0 < now:
            raise ReservationError(f"{ins} on cycle {c0}: the queue is busy until cycle {now}")
        gap = c0 - now
        while gap > 0:
            q.append(Instr.nop(min(gap, COUNT_MAX)))
            gap -= min(gap, COUNT_MAX)
        q.append(ins)
        now, j = c0 + 1, i + 1
        if rep and rep[0] is not None:
            q.append(rep[0])
            now += rep[0].duration()
        elif merge and j < len(entries) and _plain(entries[j]):
            c1, nxt = entries[j][:2]
            d, stride = c1 - c0, nxt.addr - ins.addr
            if 1 <= d <= DELAY_MAX and STRIDE_MIN <= stride <= STRIDE_MAX and _same_but_addr(ins, nxt):
                n = 0
                while (j + n < len(entries) and n < COUNT_MAX and _plain(entries[j + n])
                       and _same_but_addr(ins, entries[j + n][1])
                       and entries[j + n][0] == c0 + (n + 1) * d
                       and entries[j + n][1].addr == ins.addr + (n + 1) * stride):
                    n += 1
                q.append(Instr.repeat(n, d, stride))
                now = c0 + 1 + n * d
                j += n
        i = j
    return q


# ---- deskew policy (tiles with links, docs/c2c.md) ----------------------------------------
DESKEW_SLICE = "C2C_W"      # the queue that carries a tile's DESKEW and RUNTIME_DESKEWs
DESKEW_OPS = frozenset({Op.DESKEW, Op.RUNTIME_DESKEW})


def take_deskew(cfg, res: Reservations, timed: dict, cycle: int) -> None:
    """Reserve and emit the RUNTIME_DESKEW of SAC ``cycle`` (on multiples of
    ``c2c.deskew_interval``, the same cycles on every tile).  The one at 0 (program start,
    slack ``c2c.START_SLACK``) aligns every tile to the ``START_HAC`` it was armed with."""
    slack = c2c.START_SLACK if cycle == 0 else c2c.deskew_slack(cfg)
    ins = Instr.compute(Op.RUNTIME_DESKEW, 0, EAST, slack=slack)
    res.take_slot(DESKEW_SLICE, cycle, ins.op.name)
    timed[DESKEW_SLICE].append((cycle, ins))


def last_work(timed: dict) -> int:
    """The last cycle of a tile's timed instructions, deskews excluded (0 if none)."""
    return max((c for entries in timed.values() for c, i, *_ in entries if i.op not in DESKEW_OPS), default=0)


def strip_deskews(timed: dict, last: int) -> dict:
    """``timed`` without the RUNTIME_DESKEWs after ``last``: a deskew with no work after it
    would only hold the tile back."""
    return {n: [e for e in entries if not (e[1].op == Op.RUNTIME_DESKEW and e[0] > last)]
            for n, entries in timed.items()}
