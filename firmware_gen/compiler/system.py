"""Several tiles in one schedule: topology, and MEM-to-MEM transfers across C2C links.

Every time here is SAC time (the program's cycle count, which the deskew stalls do not
advance), so one schedule holds for every tile whatever its clock.  A transfer of one
vector from tile A to tile B is::

    A: READ (MEM) -> stream -> SEND on SAC s        (the link carries it for F cycles)
    B: RECV on SAC v >= s + c2c.min_distance(cfg) -> stream -> WRITE (MEM)

The links' rules are :class:`LinkBook`'s; every tile's program has a ``RUNTIME_DESKEW``
every ``c2c.deskew_interval`` cycles from SAC 0, the same cycles on every tile
(``reserve.take_deskew``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from lpu_arch import c2c
from lpu_arch.config import ConfigError, TileConfig
from lpu_arch.timing import done_cycles
from lpu_arch.topology import Topology
from lpu_arch.isa import C2C_LATENCY, EAST, READ_LATENCY, WEST, Instr, Op
from firmware_gen.golden.archmodel import expand
from firmware_gen.program import Program
from firmware_gen.compiler.reserve import DESKEW_SLICE, Reservations, last_work, lower, strip_deskews, take_deskew
from firmware_gen.compiler.schedule import PredictedWrite, ScheduleError

def deskew_slacks(program: Program) -> int:
    """Slack cycles of every RUNTIME_DESKEW a tile's program issues: the wall cycles (HAC)
    its deskews stall a tile that keeps to its HAC (``c2c.wall_cycles``)."""
    issued, _ = expand(program.queues.get(DESKEW_SLICE, []))
    return sum(ins.count for _, ins in issued if ins.op == Op.RUNTIME_DESKEW)


def wall_cycles(programs: list[Program], cycles: list[int], lead: int = c2c.START_LEAD) -> int:
    """Predicted wall cycles (HAC) of an armed run of ``programs`` from the host's HAC read
    to the last tile's done, each tile's SAC ``cycles`` given (``c2c.wall_cycles``)."""
    return max(c2c.wall_cycles(p.config, c, deskew_slacks(p), lead) for p, c in zip(programs, cycles))


class LinkBook:
    """Per-link bookkeeping shared by every multi-tile scheduler: one vector per
    ``flits_per_vector`` cycles per link (bandwidth), receive order equal to send order,
    at most ``rx_depth`` vectors between SEND and RECV (receive-buffer depth)."""

    def __init__(self, cfg: TileConfig, tiles: int):
        self.cfg, self.F = cfg, cfg.flits_per_vector
        self.busy = [[set() for _ in range(cfg.links)] for _ in range(tiles)]       # sender side
        self.last_send = [[-1] * cfg.links for _ in range(tiles)]
        self.last_recv = [[-1] * cfg.links for _ in range(tiles)]                   # receiver side
        self.in_flight = [[[] for _ in range(cfg.links)] for _ in range(tiles)]    # (send, recv)

    def first_send(self, tile, link) -> int:
        return max(1, self.last_send[tile][link] + self.F)

    def send_free(self, tile, link, s) -> bool:
        return (s >= self.first_send(tile, link)
                and not any(c in self.busy[tile][link] for c in range(s, s + self.F)))

    def first_recv(self, tile, link, s, distance) -> int:
        return max(s + distance, self.last_recv[tile][link] + 1)

    def depth_ok(self, tile, link, s, v) -> bool:
        spans = self.in_flight[tile][link] + [(s, v)]
        return all(sum(a <= c <= b for a, b in spans) <= self.cfg.rx_depth for c in range(s, v + 1))

    def take_send(self, src, link, s) -> None:
        self.busy[src][link].update(range(s, s + self.F))
        self.last_send[src][link] = s

    def take_recv(self, dst, rlink, s, v) -> None:
        """The RECV on ``v`` of the vector sent on ``s`` (its SEND already taken)."""
        self.last_recv[dst][rlink] = v
        self.in_flight[dst][rlink].append((s, v))


@dataclass(frozen=True)
class LinkTransfer:
    src: int
    dst: int
    link: int          # on the sender
    send: int          # SAC cycle of SEND
    recv: int          # SAC cycle of RECV
    write: int         # SAC cycle of the WRITE on the receiver


class SystemScheduler:
    """Transfers between MEM slices of different tiles (and their programs)."""

    def __init__(self, cfg: TileConfig, tiles: int = 2):
        self.topo = Topology(tiles)
        if cfg.links < self.topo.links_per_tile:
            raise ConfigError(f"{tiles} tiles all-to-all need {self.topo.links_per_tile} links per tile; "
                              f"the configuration has links={cfg.links}")
        self.cfg = cfg
        self.D = c2c.min_distance(cfg)
        self.F = cfg.flits_per_vector
        self.interval = c2c.deskew_interval(cfg)
        self.res = [Reservations(cfg) for _ in range(tiles)]
        self.timed = [{n: [] for n in cfg.queue_names} for _ in range(tiles)]
        self.memory = [{n: np.zeros((cfg.mem_depth, cfg.lanes), np.uint8) for n in cfg.mem_names}
                       for _ in range(tiles)]
        self.value = [{n: m.copy() for n, m in mem.items()} for mem in self.memory]
        self.loaded = [{n: set() for n in cfg.mem_names} for _ in range(tiles)]    # rows load() gave
        self.book = LinkBook(cfg, tiles)
        self.transfers: list[LinkTransfer] = []
        self.predicted: list[list[PredictedWrite]] = [[] for _ in range(tiles)]
        self.horizon = -self.interval
        self._extend_deskews(0)

    # ---- deskews -------------------------------------------------------------------------
    def _extend_deskews(self, upto: int):
        """RUNTIME_DESKEW every interval from 0 up to ``upto`` (reserved before anything else
        uses the slot)."""
        while self.horizon <= upto:
            self.horizon += self.interval
            for t in range(self.topo.tiles):
                take_deskew(self.cfg, self.res[t], self.timed[t], self.horizon)

    # ---- inputs --------------------------------------------------------------------------
    def load(self, tile: int, name: str, addr: int, vectors) -> None:
        v = np.atleast_2d(np.asarray(vectors, np.int64)) & 0xFF
        if name not in self.cfg.mem_names or addr < 0 or addr + len(v) > self.cfg.mem_depth:
            raise ScheduleError(f"cannot load {len(v)} vector(s) into {name}[{addr}] of tile {tile}")
        self.memory[tile][name][addr:addr + len(v)] = v
        self.value[tile][name][addr:addr + len(v)] = v
        self.loaded[tile][name].update(range(addr, addr + len(v)))

    # ---- placement -----------------------------------------------------------------------
    def send(self, src: int, src_mem: str, src_addr: int, dst: int, dst_mem: str, dst_addr: int,
             count: int = 1, *, send_cycle: int | None = None, recv_cycle: int | None = None):
        """Move ``count`` vectors; ``send_cycle``/``recv_cycle`` pin the first vector's SEND
        and RECV (a pinned schedule the link cannot carry is a ScheduleError)."""
        return [self._one(src, src_mem, src_addr + k, dst, dst_mem, dst_addr + k,
                          None if send_cycle is None else send_cycle + k * self.F,
                          None if recv_cycle is None else recv_cycle + k * self.F) for k in range(count)]

    def _one(self, src, sm, sa, dst, dm, da, pin_send, pin_recv):
        cfg, pos = self.cfg, self.cfg.position
        link = self.topo.link_to(src, dst)
        _, rlink = self.topo.peer(src, link)
        cs, cr = cfg.link_slice(link), cfg.link_slice(rlink)
        rs, rr = self.res[src], self.res[dst]
        d_in = WEST if pos(cs) < pos(sm) else EAST            # MEM -> C2C slice on the sender
        d_out = EAST if pos(dm) > pos(cr) else WEST           # C2C slice -> MEM on the receiver
        dist_in, dist_out = abs(pos(sm) - pos(cs)), abs(pos(dm) - pos(cr))
        if pin_send is not None and pin_recv is not None and pin_recv < pin_send + self.D:
            raise ScheduleError(f"tile {dst} would RECV on cycle {pin_recv} a vector tile {src} SENDs on cycle "
                                f"{pin_send}: it cannot arrive before cycle {pin_send + self.D} "
                                f"(serialisation {self.F} + link latency up to {cfg.link_latency_max} + "
                                f"receive pipeline + skew)")

        def send_ok(s):
            r = s - READ_LATENCY - dist_in
            if not self.book.send_free(src, link, s):
                return None
            st = rs.free_stream(d_in, pos(sm), pos(cs), r + READ_LATENCY, slots=((sm, r), (cs, s)))
            return None if st is None else (r, st)

        def recv_ok(v):
            w = v + C2C_LATENCY + dist_out
            st = rr.free_stream(d_out, pos(cr), pos(dm), v + C2C_LATENCY, slots=((cr, v), (dm, w)))
            return None if st is None or v <= self.book.last_recv[dst][rlink] else (w, st)

        s = pin_send if pin_send is not None else self.book.first_send(src, link)
        while True:
            self._extend_deskews(s + self.D + 64)
            got = send_ok(s)
            if got is None:
                if pin_send is not None:
                    raise ScheduleError(f"tile {src} cannot SEND on link {link} on cycle {pin_send}: the link or "
                                        f"the slices are busy (one vector per {self.F} cycles per link)")
                s += 1
                continue
            # The earliest RECV for this SEND; a full receive buffer delays the SEND instead.
            v = pin_recv if pin_recv is not None else self.book.first_recv(dst, rlink, s, self.D)
            while True:
                self._extend_deskews(v + 64)
                rgot = recv_ok(v)
                if rgot is not None or pin_recv is not None:
                    break
                v += 1
            if rgot is None:
                raise ScheduleError(f"tile {dst} cannot RECV on link {rlink} on cycle {pin_recv}: the slices "
                                    "are busy or the receive order would differ from the send order")
            if not self.book.depth_ok(dst, rlink, s, v):
                if pin_send is not None or pin_recv is not None:
                    raise ScheduleError(f"link {link} from tile {src} to tile {dst}: the receive buffer would hold "
                                        f"more than its {cfg.rx_depth} vectors between SEND on cycle {s} and "
                                        f"RECV on cycle {v}")
                s += 1
                continue
            break
        (r, st_in), (w, st_out) = got, rgot
        who = f"tile {src} {sm}[{sa}] -> tile {dst} {dm}[{da}]"
        read, recv = Instr.read(st_in, d_in, sa), Instr.compute(Op.RECV, st_out, d_out, link=rlink)
        send, write = Instr.compute(Op.SEND, st_in, d_in, link=link), Instr.write(st_out, d_out, da)
        for tile, name, c, ins in ((src, sm, r, read), (src, cs, s, send), (dst, cr, v, recv), (dst, dm, w, write)):
            self.res[tile].take_slot(name, c, who)
            self.timed[tile][name].append((c, ins))
        rs.take_drives(sm, r, read, pos(cs), who)
        rr.take_drives(cr, v, recv, pos(dm), who)
        self.book.take_send(src, link, s)
        self.book.take_recv(dst, rlink, s, v)
        vec = self.value[src][sm][sa].copy()
        self.value[dst][dm][da] = vec
        self.predicted[dst].append(PredictedWrite(w, dm, da, tuple(int(x) for x in vec), len(self.transfers)))
        x = LinkTransfer(src, dst, link, s, v, w)
        self.transfers.append(x)
        return x

    # ---- outputs -------------------------------------------------------------------------
    def _timed(self, tile):
        """Tile's timed instructions, without the RUNTIME_DESKEWs after any tile's last work."""
        return strip_deskews(self.timed[tile], max(last_work(tm) for tm in self.timed))

    def programs(self) -> list[Program]:
        return [Program(self.cfg, {n: lower(e) for n, e in self._timed(t).items()}, self.memory[t],
                        defined=self.loaded[t]).validate()
                for t in range(self.topo.tiles)]

    def predicted_writes(self, tile: int) -> list[PredictedWrite]:
        return sorted(self.predicted[tile], key=lambda w: (w.cycle, self.cfg.position(w.slice)))

    def predicted_cycles(self, tile: int) -> int:
        """Cycle counter at done (same rule as the single tile; deskews drop beyond the end)."""
        issues = [c for e in self._timed(tile).values() for c, _ in e]
        return done_cycles(max(issues) + 1, self.res[tile].last_drive)
