"""Reservation table: who uses which issue slot and which stream, on which cycle.

The hardware has no arbiter, so the compiler must never let two instructions issue from
one queue on one cycle, nor two live values meet on one stream at one position.  Every
placement goes through this table; a clash is a :class:`ReservationError` naming both
users.

A value driven onto a stream at position ``p`` on cycle ``t`` keeps ``t - p``
(east-flowing) or ``t + p`` (west-flowing) constant as it moves: its *diagonal*.  It
occupies the positions from ``p`` (exclusive: the driver's own position keeps whatever
passes it) to its reader (inclusive).
"""

from __future__ import annotations

from lpu_arch.isa import EAST


class ReservationError(ValueError):
    """Two users of one issue slot or one stream position on one cycle."""


class Reservations:
    def __init__(self, cfg):
        self.cfg = cfg
        self.slots: dict[str, dict[int, str]] = {n: {} for n in cfg.slice_names}
        self._occ: dict[tuple, list[tuple[int, int, str]]] = {}
        self.last_drive = -1

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

    def first_free_slot(self, slice_name: str, cycle: int) -> int:
        cycle = max(cycle, 0)
        while cycle in self.slots[slice_name]:
            cycle += 1
        return cycle

    # ---- streams -----------------------------------------------------------------------
    @staticmethod
    def _diag(dir: int, pos: int, cycle: int) -> int:
        return cycle - pos if dir == EAST else cycle + pos

    @staticmethod
    def _span(p_from: int, p_to: int) -> tuple[int, int]:
        return (p_from + 1, p_to) if p_to > p_from else (p_to, p_from - 1)

    def stream_clash(self, dir: int, stream: int, p_from: int, p_to: int, drive_cycle: int):
        """The user already on the way of a value driven at ``p_from`` towards ``p_to``, or None."""
        lo, hi = self._span(p_from, p_to)
        for olo, ohi, who in self._occ.get((dir, stream, self._diag(dir, p_from, drive_cycle)), ()):
            if olo <= hi and lo <= ohi:
                return who
        return None

    def stream_free(self, dir, stream, p_from, p_to, drive_cycle) -> bool:
        return self.stream_clash(dir, stream, p_from, p_to, drive_cycle) is None

    def free_stream(self, dir, p_from, p_to, drive_cycle, streams=None) -> int | None:
        """The first of ``streams`` (default: every stream, lowest first) free from ``p_from``
        to ``p_to`` for a value driven on ``drive_cycle``, or None."""
        candidates = range(self.cfg.streams) if streams is None else streams
        return next((st for st in candidates if self.stream_free(dir, st, p_from, p_to, drive_cycle)), None)

    def take_stream(self, dir, stream, p_from, p_to, drive_cycle, who) -> None:
        if (p_to > p_from) != (dir == EAST) or p_to == p_from:
            raise ReservationError(f"{who}: a value driven at position {p_from} on a "
                                   f"{'east' if dir == EAST else 'west'}-flowing stream never reaches {p_to}")
        other = self.stream_clash(dir, stream, p_from, p_to, drive_cycle)
        if other is not None:
            raise ReservationError(f"stream {'EW'[dir]}{stream} carries two values on the way from "
                                   f"{self.cfg.slice_names[p_from]} to {self.cfg.slice_names[p_to]} "
                                   f"(driven on cycle {drive_cycle}): {other} and {who}")
        lo, hi = self._span(p_from, p_to)
        self._occ.setdefault((dir, stream, self._diag(dir, p_from, drive_cycle)), []).append((lo, hi, who))
        self.last_drive = max(self.last_drive, drive_cycle)

    # ---- totals ------------------------------------------------------------------------
    def done_cycles(self) -> int:
        """The tile's cycle counter at done (``archmodel`` rule): every queue halts on the
        cycle after its last instruction, done follows the last halt or drive by a cycle."""
        last_issue = max((c for s in self.slots.values() for c in s), default=-1)
        return max(last_issue + 1, self.last_drive) + 1 + 1

    def busy(self) -> dict[str, int]:
        return {n: len(s) for n, s in self.slots.items()}
