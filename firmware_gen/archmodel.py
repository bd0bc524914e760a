"""The architectural model: the golden model for values *and* timing.

It executes the same binary images as the hardware, cycle by cycle: each instruction
queue issues exactly as the ICU does (``isa.py`` gives the rules), MEM slices read and
write their SRAM, the MXMs load weights, multiply and accumulate, the VXM runs its
requantise/table/gate chain (``numerics.py`` arithmetic), the SXMs move lanes
(:func:`sxm_apply`), and the east/west stream
registers advance one position per cycle.
The result is the trace of every MEM write (cycle, slice, address, value), the final
memories and the cycle count at which the tile reports done.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import numpy as np

from .hostmap import VXM_FIELDS
from .isa import (DATA_OPS, EAST, INT32_PLANES, MXM_LATENCY, READ_LATENCY, SXM_LATENCY, VXM_LATENCY, WEST,
                  Instr, MMFlag, Op, SxmFlag, VopFlag)
from .numerics import add_int32, requantise
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
    mm_count: dict = field(default_factory=dict)  # MM instructions per MXM


def expand(instrs: list[Instr]) -> tuple[list[tuple[int, Instr]], int]:
    """Issue times of one queue: ``([(cycle, concrete instruction), ...], halt_cycle)``.

    REPEAT is unrolled into the concrete instructions it re-issues."""
    c, out, last = 0, [], None
    for ins in instrs:
        if ins.op in DATA_OPS:
            out.append((c, ins))
            last = ins
            c += 1
        elif ins.op == Op.NOP:
            c += ins.count
        elif ins.op == Op.REPEAT:
            if last is None:
                raise ModelError("REPEAT with nothing to repeat")
            for k in range(1, ins.count + 1):
                last = dataclasses.replace(last, addr=last.addr + ins.addr)
                out.append((c + k * ins.delay - 1, last))
            c += ins.count * ins.delay
    return out, c


# ---- int32 <-> byte planes ------------------------------------------------------------------
def to_planes(v) -> np.ndarray:
    """int32 lanes -> ``(INT32_PLANES, lanes)`` uint8, plane b = bits 8b..8b+7."""
    u = np.asarray(v, np.int64) & 0xFFFFFFFF
    return np.stack([(u >> (8 * b)) & 0xFF for b in range(INT32_PLANES)]).astype(np.uint8)


def from_planes(planes) -> np.ndarray:
    """``(INT32_PLANES, lanes)`` uint8 -> int32 lanes (as int64)."""
    u = sum(np.asarray(planes[b], np.int64) << (8 * b) for b in range(INT32_PLANES))
    return np.where(u >= 1 << 31, u - (1 << 32), u)


def _wrap32(v):
    return ((np.asarray(v, np.int64) + (1 << 31)) & 0xFFFFFFFF) - (1 << 31)


def _s8(v):
    return np.asarray(v, np.uint8).astype(np.int8).astype(np.int64)


class _Mxm:
    """Architectural state of one MXM (see docs/isa.md, "Compute slices")."""

    def __init__(self, cfg, name):
        L = cfg.lanes
        self.name, self.L = name, L
        self.weights = [np.zeros((L, L), np.int64), np.zeros((L, L), np.int64)]
        self.active = 0
        self.loader = None                      # (first cycle, n, stream, dir)
        self.acc = np.zeros((cfg.mxm_acc_depth, L), np.int64)
        self.acc_ok = np.zeros(cfg.mxm_acc_depth, bool)
        self.xbuf = np.zeros((cfg.mxm_xbuf_depth, L), np.int64)
        self.x_ok = np.zeros(cfg.mxm_xbuf_depth, bool)
        self.out_dir = EAST if name == "MXM_W" else WEST
        self.mm_count = 0

    def load_step(self, t, tap):
        """Sample this cycle's rows of an LW in progress; swap in the block after the last."""
        if self.loader is None:
            return
        first, n, s, d = self.loader
        if t < first:
            return
        k = t - first
        shadow = self.weights[1 - self.active]
        for j in range(n):
            shadow[k * n + j] = _s8(tap(d, s + j))
        if (k + 1) * n == self.L:
            self.active ^= 1
            self.loader = None


def sxm_apply(ins: Instr, x, aux_vec=None, buf=None) -> np.ndarray:
    """The lane mapping of one SXM instruction (uint8 vectors in, uint8 vector out).

    * ``SHIFT k``: ``y[i] = x[i - k]`` (``DOWN``: ``x[i + k]``), 0 where that lane does not
      exist, or the lane taken modulo ``lanes`` with ``ROT``.
    * ``PERM map=m``: ``y[i] = x[idx[i]]`` where ``idx`` is the vector on stream ``m`` (same
      direction, same cycle), read as unsigned bytes; an index >= lanes gives 0.
    * ``DIST k, g``: ``y[i] = x[k + i % g]``: g = 1 broadcasts lane k, a larger g (a power of
      two dividing lanes, k + g <= lanes) replicates lanes k..k+g-1 across the vector.
    * ``TRO col``: ``y[i] = buf[i][col]``, column ``col`` of the rows stored by ``TRI``.
    """
    x = np.asarray(x, np.uint8)
    L = len(x)
    i = np.arange(L)
    if ins.op == Op.SHIFT:
        k = ins.operand("k")
        src = i + k if ins.aux & SxmFlag.DOWN else i - k
        if ins.aux & SxmFlag.ROT:
            return x[src % L]
        return np.where((src >= 0) & (src < L), x[np.clip(src, 0, L - 1)], 0).astype(np.uint8)
    if ins.op == Op.PERM:
        idx = np.asarray(aux_vec, np.int64)
        return np.where(idx < L, x[np.minimum(idx, L - 1)], 0).astype(np.uint8)
    if ins.op == Op.DIST:
        return x[ins.operand("k") + i % ins.operand("g")]
    if ins.op == Op.TRO:
        return np.asarray(buf, np.uint8)[:, ins.operand("col")].copy()
    raise ValueError(f"{ins.op.name} is not an SXM mapping")


def run(program: Program) -> RunResult:
    cfg = program.config
    program.validate()
    P, S, L = cfg.positions, cfg.streams, cfg.lanes
    mem = {n: program.memory[n].copy() for n in cfg.mem_names}
    mxms = {n: _Mxm(cfg, n) for n in ("MXM_W", "MXM_E")}
    sxm_buf = {n: np.zeros((L, L), np.uint8) for n in ("SXM_W", "SXM_E")}
    params = {f: program.vxm_params[:, :, i] for i, f in enumerate(VXM_FIELDS)}
    table = program.table.astype(np.int64)

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
    latest = max([max(halt_at)] + list(issues))

    # east[p] / west[p]: the value visible at position p in the current cycle.
    east = np.zeros((P, S, L), np.uint8)
    west = np.zeros((P, S, L), np.uint8)
    drives: dict[int, list] = {}          # cycle -> [(position, dir, stream, data)]
    events = []
    last_drive = -1

    def drive(t, p, d, s, data):
        nonlocal last_drive
        drives.setdefault(t, []).append((p, d, s, np.asarray(data, np.int64).astype(np.uint8)))
        last_drive = max(last_drive, t)

    t = 0
    while t <= max(latest, last_drive) or any(m.loader for m in mxms.values()):
        def tap(d, s, p=None):
            return (east if d == EAST else west)[p, s]

        now = sorted(issues.get(t, []), key=lambda x: x[0])
        # Reads of state happen before this cycle's writes commit (read-before-write).
        for p, ins in now:
            name, where = names[p], f"{names[p]} on cycle {t} ({ins})"
            if ins.op == Op.READ:
                drive(t + READ_LATENCY, p, ins.dir, ins.stream, mem[name][ins.addr])
            elif ins.op == Op.MM:
                m = mxms[name]
                if ins.aux & MMFlag.XBUF:
                    slot = ins.operand("slot")
                    if not m.x_ok[slot]:
                        raise ModelError(f"{where}: x slot {slot} is read before any LX wrote it")
                    x = m.xbuf[slot].copy()
                else:
                    x = _s8(tap(ins.dir, ins.stream, p))
                a = ins.operand("acc")
                prod = m.weights[m.active] @ x
                if ins.aux & MMFlag.ACC:
                    if not m.acc_ok[a]:
                        raise ModelError(f"{where}: accumulator row {a} is accumulated into before "
                                         "any MM without ACC wrote it")
                    prod = prod + m.acc[a]
                new = _wrap32(prod)
                m.mm_count += 1
                if ins.aux & MMFlag.EMIT:
                    planes = to_planes(new)
                    for b in range(INT32_PLANES):
                        drive(t + MXM_LATENCY, p, m.out_dir, ins.operand("out") + b, planes[b])
                m.pending_acc = (a, new)
            elif ins.op == Op.VOP:
                d, s = ins.dir, ins.stream
                e = ins.operand("param")
                A = from_planes([tap(d, s + b, p) for b in range(INT32_PLANES)])
                val = requantise(add_int32(A, params["bias_a"][e]), params["m_a"][e], params["s_a"][e])
                val = val.astype(np.int64)
                if ins.aux & VopFlag.TABLE:
                    val = table[val & 0xFF]
                if ins.aux & VopFlag.GATE:
                    B = from_planes([tap(1 - d, s + b, p) for b in range(INT32_PLANES)])
                    gb = requantise(add_int32(B, params["bias_b"][e]), params["m_b"][e], params["s_b"][e])
                    val = requantise(val * gb.astype(np.int64), params["m_c"][e], params["s_c"][e])
                out = np.asarray(val, np.int64) & 0xFF
                for flag, od in ((VopFlag.OUT_E, EAST), (VopFlag.OUT_W, WEST)):
                    if ins.aux & flag:
                        drive(t + VXM_LATENCY, p, od, ins.operand("out"), out)
            elif ins.op in (Op.SHIFT, Op.PERM, Op.DIST, Op.TRO):
                x = tap(ins.dir, ins.stream, p)
                m = tap(ins.dir, ins.operand("map"), p) if ins.op == Op.PERM else None
                out = sxm_apply(ins, x, m, sxm_buf[name])
                for flag, od in ((SxmFlag.OUT_E, EAST), (SxmFlag.OUT_W, WEST)):
                    if ins.aux & flag:
                        drive(t + SXM_LATENCY, p, od, ins.operand("out"), out)
        for p, ins in now:
            name = names[p]
            if ins.op == Op.WRITE:
                data = tap(ins.dir, ins.stream, p).copy()
                mem[name][ins.addr] = data
                events.append(WriteEvent(t, name, ins.addr, tuple(int(x) for x in data)))
            elif ins.op == Op.MM:
                m = mxms[name]
                a, new = m.pending_acc
                m.acc[a], m.acc_ok[a] = new, True
            elif ins.op == Op.TRI:
                sxm_buf[name][ins.operand("row")] = tap(ins.dir, ins.stream, p)
            elif ins.op == Op.LX:
                m = mxms[name]
                slot = ins.operand("slot")
                m.xbuf[slot], m.x_ok[slot] = _s8(tap(ins.dir, ins.stream, p)), True
            elif ins.op == Op.LW:
                m = mxms[name]
                if m.loader is not None:
                    raise ModelError(f"{name} on cycle {t} ({ins}): LW while the previous LW is still loading")
                m.loader = (t + ins.operand("delay"), ins.operand("n"), ins.stream, ins.dir)
        for name, m in mxms.items():
            p = cfg.position(name)
            m.load_step(t, lambda d, s, p=p: tap(d, s, p))
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
        t += 1
    done_cycle = max(max(halt_at), last_drive) + 1
    return RunResult(cycles=done_cycle + 1, events=events, memory=mem, busy=busy,
                     mm_count={n: m.mm_count for n, m in mxms.items()})
