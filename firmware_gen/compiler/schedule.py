"""The data-movement scheduler: copies between MEM slices, placed on streams and cycles.

``Scheduler.copy(src, a, dst, b, count)`` moves ``count`` consecutive vectors from MEM
slice ``src`` (from address ``a``) to ``dst`` (from ``b``) as one ``READ`` and one ``WRITE``,
each with a ``REPEAT``.  It picks the stream and the issue cycle, keeps one live value per
stream, position and cycle, honours memory dependencies in program order, and predicts
every write's cycle by addition: read cycle + ``READ_LATENCY`` + the distance.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from lpu_arch.config import TileConfig
from lpu_arch.isa import COUNT_MAX, EAST, READ_LATENCY, WEST, Instr
from lpu_arch.timing import read_lead
from firmware_gen.program import Program
from lpu_arch.errors import LpuError
from firmware_gen.compiler.reserve import Reservations, lower


class ScheduleError(LpuError, ValueError):
    """The requested schedule is impossible; the message names the conflict or the limit."""


@dataclass(frozen=True)
class Copy:
    """One placed MEM-to-MEM copy of ``count`` vectors (``Scheduler.copy``)."""
    index: int
    src: str
    src_addr: int
    dst: str
    dst_addr: int
    count: int
    stream: int
    dir: int
    read_cycle: int
    distance: int

    @property
    def write_cycle(self) -> int:
        return self.read_cycle + READ_LATENCY + self.distance    # (timing.read_lead)

    @property
    def stream_name(self) -> str:
        return f"{'EW'[self.dir]}{self.stream}"

    def __str__(self):
        return (f"#{self.index} {self.src}[{self.src_addr}:{self.src_addr + self.count}] -> "
                f"{self.dst}[{self.dst_addr}:{self.dst_addr + self.count}] on {self.stream_name}, "
                f"read @{self.read_cycle}, write @{self.write_cycle}")


@dataclass(frozen=True)
class PredictedWrite:
    cycle: int
    slice: str
    addr: int
    data: tuple
    transfer: int

    def as_tuple(self):
        """``(cycle, slice, addr, data)``, as ``archmodel.WriteEvent.as_tuple`` of the write."""
        return (self.cycle, self.slice, self.addr, self.data)


class Scheduler:
    """Builds one tile program from a sequence of copies (program order = dependency order)."""

    def __init__(self, cfg: TileConfig):
        self.cfg = cfg
        self.transfers: list[Copy] = []
        self.initial = {n: np.zeros((cfg.mem_depth, cfg.lanes), np.uint8) for n in cfg.mem_names}
        self._value = {n: m.copy() for n, m in self.initial.items()}  # transfer-level semantics
        self.loaded = {n: set() for n in cfg.mem_names}          # rows load() gave (Program.defined)
        self._predicted: list[PredictedWrite] = []
        self.res = Reservations(cfg)       # issue slots and stream positions, by transfer index
        self._last_write: dict[tuple[str, int], int] = {}
        self._last_read: dict[tuple[str, int], int] = {}

    # ---- inputs ----------------------------------------------------------------------
    def _check_mem(self, name: str, addr: int, count: int, what: str):
        cfg = self.cfg
        if name not in cfg.mem_names:
            raise ScheduleError(f"{what} {name!r} is not a MEM slice; MEM slices are {', '.join(cfg.mem_names)}")
        if addr < 0 or addr + count > cfg.mem_depth:
            raise ScheduleError(f"{what} {name}[{addr}:{addr + count}] is outside the slice: a MEM slice "
                                f"holds addresses 0..{cfg.mem_depth - 1}")

    def load(self, name: str, addr: int, vectors) -> None:
        """Initial contents: ``vectors`` (rows x lanes) at ``name[addr:]`` before cycle 0."""
        v = np.asarray(vectors)
        if v.ndim == 1:
            v = v[None, :]
        if v.ndim != 2 or v.shape[1] != self.cfg.lanes:
            raise ScheduleError(f"vectors must have {self.cfg.lanes} lanes, got shape {v.shape}")
        self._check_mem(name, addr, len(v), "load into")
        if self.transfers:
            raise ScheduleError("load() initial memory before scheduling any copy")
        self.initial[name][addr:addr + len(v)] = v.astype(np.int64) & 0xFF
        self._value[name][addr:addr + len(v)] = self.initial[name][addr:addr + len(v)]
        self.loaded[name].update(range(addr, addr + len(v)))

    # ---- scheduling ------------------------------------------------------------------
    def _route(self, src: str, dst: str) -> tuple[int, int]:
        ps, pd = self.cfg.position(src), self.cfg.position(dst)
        if ps == pd:
            raise ScheduleError(f"copy within one slice ({src}) is not a stream transfer: a slice "
                                "cannot read its own write (copy through another slice instead)")
        return (EAST if pd > ps else WEST), abs(pd - ps)

    def _stream_conflict(self, dir, stream, p_src, dist, t, count):
        p_dst = p_src + dist if dir == EAST else p_src - dist
        for k in range(count):
            if clash := self.res.clash_at(dir, stream, p_src, p_dst, t + k + READ_LATENCY):
                other, pos, cyc = clash
                return (f"stream {'EW'[dir]}{stream} at {self.cfg.slice_names[pos]} on cycle {cyc} "
                        f"already carries a value of transfer #{other} ({self.transfers[other]})")
        return None

    def _slot_conflict(self, name, t, count):
        used = self.res.slots[name]
        return next((f"{name} already issues an instruction on cycle {c} (transfer #{used[c]})"
                     for c in range(t, t + count) if c in used), None)

    def _earliest(self, src, a, dst, b, count, lead) -> int:
        """The first READ cycle at which vector k (0..count-1), read from ``src[a+k]`` at the
        READ cycle + k and written to ``dst[b+k]`` at the READ cycle + k + ``lead``, comes
        after the last write of its source row and after the last read and write of its
        destination row by earlier transfers (RAW, WAR, WAW)."""
        return max(0, *(max(self._last_write.get((src, a + k), -1) + 1 - k,          # RAW on the source
                            self._last_read.get((dst, b + k), -1) - (k + lead),      # WAR on the destination
                            self._last_write.get((dst, b + k), -1) + 1 - (k + lead)) # WAW on the destination
                        for k in range(count)))

    def copy(self, src: str, src_addr: int, dst: str, dst_addr: int, count: int = 1, *,
             stream: int | None = None, cycle: int | None = None) -> Copy:
        """Schedule a copy of ``count`` vectors; returns the placed :class:`Copy`.

        ``stream`` and ``cycle`` (the READ issue cycle) pin the choice; a pinned choice
        that conflicts raises :class:`ScheduleError` naming the conflict."""
        cfg = self.cfg
        if not 1 <= count <= COUNT_MAX + 1:
            raise ScheduleError(f"count must be in 1..{COUNT_MAX + 1} (one READ plus a REPEAT), got {count}")
        self._check_mem(src, src_addr, count, "source")
        self._check_mem(dst, dst_addr, count, "destination")
        if stream is not None and not 0 <= stream < cfg.streams:
            raise ScheduleError(f"stream {stream} does not exist; the tile has {cfg.streams} per direction")
        dir, dist = self._route(src, dst)
        p_src = cfg.position(src)
        lead = read_lead(cfg, src, dst)          # READ issue to WRITE at dst
        earliest = self._earliest(src, src_addr, dst, dst_addr, count, lead)
        streams = [stream] if stream is not None else list(range(cfg.streams))

        def problem(t, s):
            if t < earliest:
                return (f"cycle {t} is too early: a memory dependency on an earlier transfer "
                        f"needs the READ at cycle {earliest} or later")
            return (self._slot_conflict(src, t, count)
                    or self._slot_conflict(dst, t + lead, count)
                    or self._stream_conflict(dir, s, p_src, dist, t, count))

        if cycle is not None:
            msgs = [problem(cycle, s) for s in streams]
            if all(msgs):
                raise ScheduleError(f"cannot copy {src}[{src_addr}] -> {dst}[{dst_addr}] with the READ "
                                    f"on cycle {cycle}: {msgs[0]}")
            t, s = cycle, streams[msgs.index(None)]
        else:
            t = earliest
            while (s := next((s for s in streams if problem(t, s) is None), None)) is None:
                t += 1
        xfer = Copy(len(self.transfers), src, src_addr, dst, dst_addr, count, s, dir, t, dist)
        self._commit(xfer)
        return xfer

    def _commit(self, x: Copy) -> None:
        self.transfers.append(x)
        p_dst = self.cfg.position(x.dst)
        for k in range(x.count):
            self.res.take_slot(x.src, x.read_cycle + k, x.index)
            self.res.take_slot(x.dst, x.write_cycle + k, x.index)
            self.res.take_drives(x.src, x.read_cycle + k, Instr.read(x.stream, x.dir, x.src_addr + k), p_dst, x.index)
            self._last_read[(x.src, x.src_addr + k)] = max(self._last_read.get((x.src, x.src_addr + k), -1),
                                                          x.read_cycle + k)
            self._last_write[(x.dst, x.dst_addr + k)] = x.write_cycle + k
        block = self._value[x.src][x.src_addr:x.src_addr + x.count].copy()
        self._value[x.dst][x.dst_addr:x.dst_addr + x.count] = block
        self._predicted += [PredictedWrite(x.write_cycle + k, x.dst, x.dst_addr + k, tuple(int(v) for v in block[k]),
                                           x.index) for k in range(x.count)]

    # ---- outputs ---------------------------------------------------------------------
    def predicted_writes(self) -> list[PredictedWrite]:
        """Every MEM write, in (cycle, position) order, with the value the copy semantics give."""
        return sorted(self._predicted, key=lambda w: (w.cycle, self.cfg.position(w.slice)))

    def predicted_cycles(self) -> int:
        return self.res.done_cycles()          # (Reservations.done_cycles)

    def program(self) -> Program:
        """Lower the placed transfers to one instruction queue per slice, gaps as NOPs."""
        timed: dict[str, list] = {n: [] for n in self.cfg.mem_names}
        for x in self.transfers:
            rep = Instr.repeat(x.count - 1, 1, +1) if x.count > 1 else None
            timed[x.src].append((x.read_cycle, Instr.read(x.stream, x.dir, x.src_addr), rep))
            timed[x.dst].append((x.write_cycle, Instr.write(x.stream, x.dir, x.dst_addr), rep))
        queues = {name: lower(entries, merge=False) for name, entries in timed.items()}
        return Program(self.cfg, queues, self.initial, defined=self.loaded).validate()
