"""The architectural model: the golden model for values *and* timing.

It executes the same binary images as the hardware, cycle by cycle: each instruction
queue issues exactly as the ICU does (``isa.py`` gives the rules), MEM slices read and
write their SRAM, and the east/west stream registers advance one position per cycle.
The result is the trace of every MEM write (cycle, slice, address, value), the final
memories and the cycle count at which the tile reports done.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .isa import EAST, READ_LATENCY, Instr, Op
from .program import Program


class ModelError(RuntimeError):
    """The program did something the hardware would flag as a fault."""


@dataclass(frozen=True)
class WriteEvent:
    """One MEM write: the observable event every test checks."""
    cycle: int
    slice: str
    addr: int
    data: tuple  # lanes bytes

    def as_tuple(self):
        return (self.cycle, self.slice, self.addr, self.data)


@dataclass
class RunResult:
    cycles: int                          # value of the cycle counter at done
    events: list = field(default_factory=list)
    memory: dict = field(default_factory=dict)
    busy: dict = field(default_factory=dict)   # issue cycles per slice (data instructions)


def expand(instrs: list[Instr]) -> tuple[list[tuple[int, Instr]], int]:
    """Issue times of one queue: ``([(cycle, concrete instruction), ...], halt_cycle)``.

    REPEAT is unrolled into the concrete instructions it re-issues."""
    c, out, last = 0, [], None
    for ins in instrs:
        if ins.op in (Op.READ, Op.WRITE):
            out.append((c, ins))
            last = ins
            c += 1
        elif ins.op == Op.NOP:
            c += ins.count
        elif ins.op == Op.REPEAT:
            if last is None:
                raise ModelError("REPEAT with nothing to repeat")
            for k in range(1, ins.count + 1):
                last = Instr(last.op, last.stream, last.dir, last.addr + ins.addr)
                out.append((c + k * ins.delay - 1, last))
            c += ins.count * ins.delay
    return out, c


def run(program: Program) -> RunResult:
    cfg = program.config
    program.validate()
    P, S, L = cfg.positions, cfg.streams, cfg.lanes
    mem = {n: program.memory[n].copy() for n in cfg.mem_names}

    issues: dict[int, list[tuple[int, Instr]]] = {}   # cycle -> [(position, instr)]
    halt_at, busy = [], {}
    for name, q in program.queues.items():
        timeline, h = expand(q)
        halt_at.append(h)
        busy[name] = len(timeline)
        p = cfg.position(name)
        for c, ins in timeline:
            issues.setdefault(c, []).append((p, ins))
    names = cfg.slice_names

    # east[p] / west[p]: the value visible at position p in the current cycle.
    east = np.zeros((P, S, L), np.uint8)
    west = np.zeros((P, S, L), np.uint8)
    drives: dict[int, list] = {}          # cycle -> [(position, dir, stream, data)]
    events = []
    last_activity = max(halt_at)
    horizon = max([max(halt_at)] + list(issues)) + READ_LATENCY + 1
    for t in range(horizon + 1):
        now = sorted(issues.get(t, []), key=lambda x: x[0])
        # READs sample memory before this cycle's WRITEs commit (non-transparent SRAM).
        for p, ins in now:
            if ins.op == Op.READ:
                data = mem[names[p]][ins.addr].copy()
                drives.setdefault(t + READ_LATENCY, []).append((p, ins.dir, ins.stream, data))
                last_activity = max(last_activity, t + READ_LATENCY)
        for p, ins in now:
            if ins.op == Op.WRITE:
                src = east if ins.dir == EAST else west
                data = src[p, ins.stream].copy()
                mem[names[p]][ins.addr] = data
                events.append(WriteEvent(t, names[p], ins.addr, tuple(int(x) for x in data)))
        # Advance the stream registers; a drive replaces the passing value.
        seen = set()
        ne, nw = np.zeros_like(east), np.zeros_like(west)
        ne[1:] = east[:-1]
        nw[:-1] = west[1:]
        for p, d, s, data in drives.pop(t, []):
            if (p, d, s) in seen:
                raise ModelError(f"two writes to stream {'EW'[d]}{s} at {names[p]} on cycle {t}")
            seen.add((p, d, s))
            if d == EAST and p + 1 < P:
                ne[p + 1, s] = data
            elif d != EAST and p > 0:
                nw[p - 1, s] = data
        east, west = ne, nw
    done_cycle = max(max(halt_at), last_activity) + 1
    return RunResult(cycles=done_cycle + 1, events=events, memory=mem, busy=busy)
