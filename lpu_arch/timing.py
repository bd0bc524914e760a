"""Timing rules of the stream fabric and the tile, stated once (``docs/isa.md``, "Timing").

The golden model, every scheduler and the schedule pictures compute arrival times,
stream occupancy and the done cycle with these functions; the instruction latencies they
add are in ``isa.py``.
"""

from __future__ import annotations

import bisect

from lpu_arch import c2c
from lpu_arch.isa import C2C_LATENCY, EAST, MXM_LATENCY, READ_LATENCY


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


def last_arrival(leads, rows: int) -> int:
    """The earliest cycle by which ``rows`` vectors can have reached an MXM from MEM slices
    whose READs arrive there ``leads`` cycles after issue, each slice reading one vector a
    cycle from cycle 0: the least A with sum(max(0, A - lead + 1)) >= rows."""
    reached = lambda a: sum(max(0, a - x + 1) for x in leads)      # vectors arrived by cycle a
    return bisect.bisect_left(range(max(leads) + rows), rows, key=reached)


def token_floor(cfg, tiles: int, gate_up_vectors: int) -> dict:
    """A token's least possible latency on ``tiles`` tiles of ``cfg`` (``docs/moe.md``, *The
    floor*), whatever the mapping: its ``gate_up_vectors`` (the W1 and W3 weight vectors
    it needs, every expert's) read at the tray's full SRAM bandwidth, then the shortest
    tail of the dataflow.  Returns each step's cycle and ``floor``, the cycle counter at done:

    * ``gate_up``: the last of them at its MXM (:func:`last_arrival`: each MXM of the tray
      takes an equal share, every weight slice of its hemisphere reading one a cycle from
      cycle 0);
    * ``h``: the block swaps in on the next cycle, its ``MM`` emits, the VXM makes h
      (``MXM_LATENCY``, the distance, ``vxm_latency``);
    * ``h_in``: h crosses one link (on a tray: from the VXM to a C2C slice, ``SENDM``,
      ``c2c.min_distance`` at the configuration's longest wire, ``RECV``, ``C2C_LATENCY``
      and the distance to an MXM; on one tile straight back to an MXM), ``LX`` on that cycle;
    * ``write``: the last down-projection block's ``MM`` on the next cycle (its weights
      loaded while h travelled), the VXM's y (as for h) and the nearest MEM slice's ``WRITE``;
    * ``floor``: :func:`done_cycles` after that write."""
    pos, v = cfg.position, cfg.vxm_position
    mxms = ("MXM_W", "MXM_E")
    arrive = min(last_arrival(sorted(read_lead(cfg, m, side) for m in cfg.mem_names if m[4] == side[-1]),
                              -(-gate_up_vectors // (2 * tiles))) for side in mxms)
    d_vxm = min(abs(pos(side) - v) for side in mxms)
    h = arrive + 1 + MXM_LATENCY + d_vxm + cfg.vxm_latency
    if tiles > 1:
        c2cs = ("C2C_W", "C2C_E")
        send = h + min(abs(v - pos(cs)) for cs in c2cs)
        h_in = send + c2c.min_distance(cfg) + C2C_LATENCY + min(abs(pos(cs) - pos(side)) for cs in c2cs for side in mxms)
    else:
        h_in = h + d_vxm
    write = h_in + 1 + MXM_LATENCY + d_vxm + cfg.vxm_latency + min(abs(v - pos(m)) for m in cfg.mem_names)
    return {"gate_up": arrive, "h": h, "h_in": h_in, "write": write, "floor": done_cycles(write + 1)}
