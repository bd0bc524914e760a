"""Timing rules of the stream fabric and the tile, stated once (``docs/isa.md``, "Timing").

The golden model, every scheduler and the schedule pictures compute arrival times,
stream occupancy and the done cycle with these functions; the instruction latencies they
add are in ``isa.py``.
"""

from __future__ import annotations

from lpu_arch.isa import EAST, READ_LATENCY


def diagonal(dir: int, pos: int, cycle: int) -> int:
    """A value driven at ``pos`` on ``cycle`` is visible at ``pos ± d`` on ``cycle + d``:
    it keeps ``cycle - pos`` (east-flowing) or ``cycle + pos`` (west-flowing) constant."""
    return cycle - pos if dir == EAST else cycle + pos


def read_lead(cfg, src: str, dst: str) -> int:
    """Cycles from a READ issued by slice ``src`` to its vector at slice ``dst``: the read
    latency and the distance (a WRITE there samples it on ``read cycle + read_lead``)."""
    return READ_LATENCY + abs(cfg.position(dst) - cfg.position(src))


def span(p_from: int, p_to: int) -> tuple[int, int]:
    """Positions (inclusive) a value driven at ``p_from`` occupies on its way to ``p_to``:
    not the driver's own position (it keeps whatever passes it), up to the reader's."""
    return (p_from + 1, p_to) if p_to > p_from else (p_to, p_from - 1)


def lw_cycles(lanes: int, n: int) -> int:
    """Cycles an ``LW`` of ``n`` rows per cycle loads a block of ``lanes`` rows in: its load
    starts on ``issue + delay`` and the block is active ``lw_cycles`` later (the last group
    of rows is partial when ``n`` does not divide the lanes)."""
    return -(-lanes // n)


def done_cycles(last_halt: int, last_drive: int = -1) -> int:
    """The tile's cycle counter at done.  Every queue halts on the cycle after its last
    instruction (``last_halt``: the latest of those cycles), the tile is done on the cycle
    after the last halt or the last stream drive, and the counter has then counted that
    cycle too."""
    return max(last_halt, last_drive) + 1 + 1
