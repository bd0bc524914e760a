"""The architectural model: the golden model for values *and* timing.

It executes the same binary images as the hardware, cycle by cycle: each instruction
queue issues exactly as the ICU does (``isa.py`` gives the rules), MEM slices read and
write their SRAM, the MXMs load weights, multiply and accumulate, the VXM runs its
requantise/table/gate chain (``quantise.py`` and ``fp8_quantise.py`` arithmetic), the SXMs move lanes
(:func:`sxm_apply`), and the east/west stream
registers advance one position per cycle.
The result is the trace of every MEM write (cycle, slice, address, value), the final
memories and the cycle count at which the tile reports done, and on an FP8 tile the first
MM that multiplied a NaN code (``Status.NAN_OPERAND``, which the hardware then reports).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from lpu_arch import c2c, fp8
from lpu_arch.effects import SXM_OUT_OPS, effects
from lpu_arch.hostmap import base_fields, base_word
from lpu_arch.isa import (BASE_OFFSET_BITS, BASE_OPS, DATA_OPS, EAST, INDEX_BYTES, INT32_PLANES, READ_LATENCY, ArgmaxFlag,
                          Instr, MMFlag, Op, SxmFlag, VopFlag)
from lpu_arch.timing import done_cycles, lw_cycles
from lpu_arch.vxm import VXM_FIELDS

from firmware_gen import gc_paused
from firmware_gen.golden.fp8_quantise import fp8_bias, gate_fp8, requantise_fp8
from firmware_gen.golden.quantise import add_int32, add_wrap, requantise
from firmware_gen.program import Program
from lpu_arch.errors import LpuError
from firmware_gen.scoreboard import compare, golden_observed, promise


class ModelError(LpuError, RuntimeError):
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
    busy: dict = field(default_factory=dict)   # issue cycles per queue (data instructions that did not skip)
    mm_count: dict = field(default_factory=dict)  # MM instructions per MXM
    sent: list = field(default_factory=list)       # LinkVector per SEND, in order
    # FP8: (cycle, MXM) of the first MM that multiplied a NaN code of x or of its active weight
    # block (those products count 0), or None: the hardware's STATUS then has NAN_OPERAND.
    nan_operand: tuple | None = None
    bases: list = field(default_factory=list)      # every base register's (offset, on) at done (SETB's included)

    def base_words(self) -> list[int]:
        """The base registers at done as host words: the ``bases`` a next run starts from."""
        return [base_word(off, on) for off, on in self.bases]


def _issues(instrs: list[Instr]) -> tuple[list[tuple[int, Instr, int]], int]:
    """Issue times of one queue as ``([(cycle, instruction, address), ...], halt_cycle)``:
    a REPEAT's re-issues are its instruction with another address (not built here)."""
    c, out, last, addr = 0, [], None, 0
    for ins in instrs:
        if ins.op in DATA_OPS:
            out.append((c, ins, ins.addr))
            last, addr = ins, ins.addr
            c += 1
        elif ins.op == Op.NOP:
            c += ins.count
        elif ins.op == Op.REPEAT:
            if last is None:
                raise ModelError("REPEAT with nothing to repeat")
            out += [(c + k * ins.delay - 1, last, addr + k * ins.addr) for k in range(1, ins.count + 1)]
            addr += ins.count * ins.addr
            c += ins.count * ins.delay
    return out, c


def expand(instrs: list[Instr]) -> tuple[list[tuple[int, Instr]], int]:
    """Issue times of one queue: ``([(cycle, concrete instruction), ...], halt_cycle)``.

    REPEAT is unrolled into the concrete instructions it re-issues."""
    out, c = _issues(instrs)
    return [(t, ins if a == ins.addr else ins.with_addr(a)) for t, ins, a in out], c


# ---- accumulators <-> byte planes ---------------------------------------------------------
def to_planes(v, planes=INT32_PLANES) -> np.ndarray:
    """Accumulator lanes (int32, or ``8 * planes`` bits) -> ``(planes, lanes)`` uint8,
    plane b = bits 8b..8b+7."""
    u = np.asarray(v, np.int64)
    return np.stack([(u >> (8 * b)) & 0xFF for b in range(planes)]).astype(np.uint8)


def from_planes(planes, bits=32) -> np.ndarray:
    """``(planes, lanes)`` uint8 -> signed ``bits``-bit accumulator lanes (as int64); the
    planes beyond ``bits`` are ignored."""
    u = sum(np.asarray(planes[b], np.int64) << (8 * b) for b in range(len(planes))) & ((1 << bits) - 1)
    return np.where(u >= 1 << (bits - 1), u - (1 << bits), u)


def operand_values(v, dtype):
    """The MXM's operands from stream bytes: int8 values, or E4M3 values in units of 2^-9."""
    v = np.asarray(v, np.uint8)
    return fp8.to_fixed(v) if dtype == "fp8" else v.astype(np.int8).astype(np.int64)


def has_nan(v, dtype) -> bool:
    """Are some of these stream bytes NaN codes as MXM operands (FP8 only; int8 has none)?"""
    return dtype == "fp8" and bool(fp8.is_nan(np.asarray(v, np.uint8)).any())


class _At:
    """Where an instruction issues, for error messages: text only when one is raised."""
    __slots__ = ("tile", "queue", "t", "ins")

    def __init__(self, tile, queue, t, ins):
        self.tile, self.queue, self.t, self.ins = tile, queue, t, ins

    def __str__(self):
        return f"{f'tile {self.tile} ' if self.tile else ''}{self.queue} on cycle {self.t} ({self.ins})"


class _Mxm:
    """Architectural state of one MXM (see docs/isa.md, "Compute slices")."""

    def __init__(self, cfg, name):
        L = cfg.lanes
        self.name, self.L, self.dtype, self.partial = name, L, cfg.mxm_dtype, cfg.mxm_partial_lw
        self.weights = [np.zeros((L, L), np.int64), np.zeros((L, L), np.int64)]
        self.active = 0
        self.loader = None                      # the load in progress: (first cycle, n, stream, dir, rows)
        self.waiting = None                     # an LW issued whose load has not started
        self.acc = np.zeros((cfg.mxm_acc_depth, L), np.int64)
        self.acc_ok = np.zeros(cfg.mxm_acc_depth, bool)
        self.xbuf = np.zeros((cfg.mxm_xbuf_depth, L), np.int64)
        self.x_ok = np.zeros(cfg.mxm_xbuf_depth, bool)
        # FP8: which weight rows hold a NaN code (per block) and which x slots do (the values
        # above count a NaN as 0; the hardware raises Status.NAN_OPERAND when an MM uses one).
        self.w_nan = [np.zeros(L, bool), np.zeros(L, bool)]
        self.x_nan = np.zeros(cfg.mxm_xbuf_depth, bool)
        self.mm_count = 0

    def issue_lw(self, t, ins, where):
        """An LW issued on cycle t: its load starts on ``t + delay``.  One LW may wait while
        a load is in progress; its load must start after that load's last row."""
        self._start_waiting(t)
        first = t + ins.operand("delay")
        if self.waiting is not None:
            raise ModelError(f"{where}: LW while another LW waits to start its load (on cycle {self.waiting[0]})")
        if ins.operand("rows") and not self.partial:
            raise ModelError(f"{where}: LW rows = {ins.operand('rows')}, but this tile's MXM loads whole blocks "
                             f"only (mxm_partial_lw = 0)")
        if self.loader is not None:
            end = self.loader[0] + lw_cycles(self.loader[4], self.loader[1])      # the cycle after its last row
            if first < end:
                raise ModelError(f"{where}: its load would start on cycle {first}, while the previous LW "
                                 f"still loads (until cycle {end - 1})")
        self.waiting = (first, ins.operand("n"), ins.stream, ins.dir, ins.lw_rows(self.L))

    def _start_waiting(self, t):
        if self.waiting is not None and self.waiting[0] == t:
            self.loader, self.waiting = self.waiting, None

    def load_step(self, t, tap):
        """Start a waiting LW whose cycle has come; sample this cycle's rows of the load in
        progress (``tap(d, s, n)``: streams s..s+n-1 at the MXM); swap in the block after
        the last."""
        self._start_waiting(t)
        if self.loader is None:
            return
        first, n, s, d, R = self.loader
        k = t - first
        shadow, shadow_nan = self.weights[1 - self.active], self.w_nan[1 - self.active]
        rows = tap(d, s, min(n, R - k * n))          # the last group may be partial; rows R.. stay
        shadow[k * n:k * n + len(rows)] = operand_values(rows, self.dtype)
        shadow_nan[k * n:k * n + len(rows)] = fp8.is_nan(rows).any(axis=1) if self.dtype == "fp8" else False
        if (k + 1) * n >= R:
            self.active ^= 1
            self.loader = None


def sxm_apply(ins: Instr, x, aux_vec=None, buf=None) -> np.ndarray:
    """The lane mapping of one SXM instruction (uint8 vectors in, uint8 vector out), as
    ``docs/isa.md``'s opcode table states it; ``aux_vec``: PERM's index vector (the map
    stream's) or MAX's w (the ``with`` stream's), ``buf``: the rows TRI stored (TRO's source)."""
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
    if ins.op == Op.MAX:          # signed int8 lanes: y[i] = max(x[i], w[(i + k) mod L])
        w = np.asarray(aux_vec, np.uint8)[(i + ins.operand("k")) % L]
        return np.maximum(x.view(np.int8), w.view(np.int8)).view(np.uint8)
    raise ValueError(f"{ins.op.name} is not an SXM mapping")


def argmax_step(best, values, ins: Instr) -> tuple[int, int]:
    """``ARGMAX``'s running ``(maximum, index)`` after accumulator vector ``values`` (signed
    lanes): its largest lane, the lowest on a tie, replaces ``best`` when ``FIRST`` is set,
    or the lane is strictly larger (``docs/isa.md``)."""
    values = np.asarray(values, np.int64)
    lane = int(np.argmax(values))
    if ins.aux & ArgmaxFlag.FIRST or values[lane] > best[0]:
        return int(values[lane]), ins.operand("index") + lane
    return best


def index_vector(index: int, lanes: int) -> np.ndarray:
    """The vector ``ARGMAX`` drives and ``SETB`` reads: ``index`` in lanes 0..3, little-endian."""
    v = np.zeros(lanes, np.uint8)
    v[:INDEX_BYTES] = [(int(index) >> (8 * b)) & 0xFF for b in range(INDEX_BYTES)]
    return v


def vector_index(v) -> int:
    """Lanes 0..3 of ``v`` as a little-endian uint32 (what ``SETB`` reads)."""
    return sum(int(b) << (8 * k) for k, b in enumerate(np.asarray(v, np.uint8)[:INDEX_BYTES]))


def setb_offset(ins: Instr, v) -> int:
    """The offset ``SETB`` writes: the low ``BASE_OFFSET_BITS`` bits of ``v``'s index shifted."""
    return (vector_index(v) << ins.operand("shift")) & ((1 << BASE_OFFSET_BITS) - 1)


@dataclass(frozen=True)
class LinkVector:
    """A vector on a C2C link: sent on SAC cycle ``sent`` by ``tile`` on its ``link``."""
    sent: int
    data: tuple
    tile: int = 0
    link: int = 0


def send_to_recv(cfg) -> int:
    """The SEND-to-RECV distance a RECV is checked against unless a caller gives one:
    ``c2c.min_distance`` on a tile with links."""
    return c2c.min_distance(cfg) if cfg.links else 0


class TileModel:
    """One tile, advanced a cycle at a time (:meth:`step`), so that several tiles can run
    in lockstep SAC time (:func:`run_system`).  ``SEND`` appends a :class:`LinkVector` to
    ``self.sent``; ``RECV`` pops the oldest of ``self.rx[link]`` (filled by the system),
    checking ``recv cycle >= sent + min_distance``; deskews take one SAC cycle.  ``bases``:
    the base registers' host words, register r at index r (missing ones: offset 0, on)."""

    def __init__(self, program: Program, tile: int = 0, min_distance: int | None = None, bases=None):
        cfg = self.cfg = program.config
        program.validate()
        self.bases = base_registers(cfg, bases)
        # The registers a SETB writes while the tile runs: the READs, WRITEs and VOPs naming one
        # are relocated when they issue, not once here.
        self.dynamic = {ins.operand("reg") for q in program.queues.values() for ins in q if ins.op == Op.SETB}
        self.argmax = {n: None for n in ("SXM_W", "SXM_E")}     # ARGMAX's running (maximum, index)
        self.pending_bases = []                                 # this cycle's SETBs, applied after it
        P, S, L = cfg.positions, cfg.streams, cfg.lanes
        self.tile = tile
        mems = cfg.mem_names
        self._mem = np.stack([program.memory[n] for n in mems]) if mems else np.zeros((0, cfg.mem_depth, L), np.uint8)
        self.mem = {n: self._mem[i] for i, n in enumerate(mems)}       # views of one array
        self.mxms = {n: _Mxm(cfg, n) for n in ("MXM_W", "MXM_E")}
        self.sxm_buf = {n: np.zeros((L, L), np.uint8) for n in ("SXM_W", "SXM_E")}
        self.params = {f: program.vxm_params[:, :, i] for i, f in enumerate(VXM_FIELDS)}
        self.table = program.table.astype(np.int64)
        self.rx = {link: [] for link in range(cfg.links)}
        self.sent: list[LinkVector] = []
        self.min_distance = send_to_recv(cfg) if min_distance is None else min_distance
        self.issues: dict[int, list[tuple[int, Instr, str]]] = {}   # cycle -> [(position, instr, queue)]
        self.halt_at, self.busy = [], {}
        # The READs (most of a weight-streaming program's instructions) run as one array
        # operation per cycle: (cycle, MEM index, relocated address, position, dir, stream).
        reads, mem_index = [], {n: i for i, n in enumerate(mems)}
        for name, q in program.queues.items():
            timeline, h = _issues(q)
            self.halt_at.append(h)
            p = cfg.position(name)      # a loader queue issues at its MXM's position
            busy = 0
            for c, ins, a in timeline:
                dynamic = ins.op in BASE_OPS and ins.base in self.dynamic
                skip = self.skips(ins)
                busy += not skip and not dynamic         # (a dynamic one counts as it issues)
                if dynamic:
                    self.issues.setdefault(c, []).append((p, ins if a == ins.addr else ins.with_addr(a), name))
                    continue
                if ins.op == Op.READ and not skip and a + self.bases[ins.base][0] < cfg.mem_depth:
                    reads.append((c, mem_index[name], a + self.bases[ins.base][0], p, ins.dir, ins.stream))
                    continue            # (a READ beyond the MEM: the instruction path names the fault)
                self.issues.setdefault(c, []).append((p, ins if a == ins.addr else ins.with_addr(a), name))
            self.busy[name] = busy
        r = np.array(reads, np.int64).reshape(-1, 6)
        r = r[np.argsort(r[:, 0], kind="stable")]
        cycles, first = np.unique(r[:, 0], return_index=True)
        self._reads = dict(zip(cycles.tolist(), np.split(r[:, 1:], first[1:])))
        self._read_drives: dict[int, tuple] = {}   # cycle -> (positions, dirs, streams, data)
        self.names = cfg.slice_names
        self.latest = max([max(self.halt_at)] + list(self.issues) + list(self._reads))
        # east[p] / west[p]: the value visible at position p in the current cycle.
        self.east = np.zeros((P, S, L), np.uint8)
        self.west = np.zeros((P, S, L), np.uint8)
        self.drives: dict[int, list] = {}          # cycle -> [(position, dir, stream, data)]
        self.events: list[WriteEvent] = []
        self.last_drive = -1
        self.nan_operand = None                    # (cycle, MXM) of the first MM with a NaN operand
        self.t = 0

    def skips(self, ins: Instr) -> bool:
        """Does ``ins`` name a base register that is off (docs/isa.md, "Base registers")?"""
        return ins.op in BASE_OPS and not self.bases[ins.base][1]

    def _relocated(self, ins: Instr, value: int, limit: int, what: str, where: str) -> int:
        v = value + self.bases[ins.base][0]
        if v >= limit:
            raise ModelError(f"{where}: {what} {value} + base register {ins.base}'s offset "
                             f"{self.bases[ins.base][0]} = {v} is beyond the {limit}")
        return v

    def _drive(self, t, p, d, s, data):
        self.drives.setdefault(t, []).append((p, d, s, np.asarray(data, np.int64).astype(np.uint8)))
        self.last_drive = max(self.last_drive, t)

    def _tap(self, d, s, p, n=None):
        """The value of stream ``s`` (streams ``s..s+n-1`` when ``n`` is given) at position
        ``p`` this cycle.  The registers are stored by diagonal: the east value at position p
        on cycle t sits in row (p - t) mod positions, the west one in (p + t) mod positions,
        so that advancing a cycle moves no data (:meth:`_advance`)."""
        P = self.cfg.positions
        row = (self.east[(p - self.t) % P] if d == EAST else self.west[(p + self.t) % P])
        return row[s] if n is None else row[s:s + n]

    def busy_running(self) -> bool:
        """More cycles to simulate (instructions, values in flight, a weight load)."""
        return (self.t <= max(self.latest, self.last_drive)
                or any(m.loader or m.waiting for m in self.mxms.values()))

    def step(self) -> None:
        """Simulate cycle ``self.t``: the instructions issued on it, the weight loads in
        progress, then the stream registers' advance."""
        t = self.t
        now = sorted(self.issues.get(t, []), key=lambda x: x[0])
        # Reads of state happen before this cycle's writes commit (read-before-write): an
        # MM reads the x slot and the weights an LX or LW of the same cycle then changes.
        for p, ins, queue in now:
            self._execute(t, p, ins, queue)
        batch = self._reads.get(t)
        if batch is not None:           # this cycle's READs, before any WRITE of it commits
            mi, a, p, d, s = batch.T
            self._read_drives[t + READ_LATENCY] = (p, d, s, self._mem[mi, a])
            self.last_drive = max(self.last_drive, t + READ_LATENCY)
        for p, ins, queue in now:
            self._commit(t, p, ins, queue)
        for reg, offset in self.pending_bases:     # (two SETBs of one register on one cycle: SXM_E's, as in the HDL)
            self.bases[reg] = (offset, True)
        self.pending_bases.clear()
        for name, m in self.mxms.items():
            p = self.cfg.position(name)
            m.load_step(t, lambda d, s, n, p=p: self._tap(d, s, p, n))
        self._advance(t)
        self.t += 1

    def _execute(self, t: int, p: int, ins: Instr, queue: str) -> None:
        """The part of ``ins`` (issued at position ``p`` on cycle ``t``) that reads state:
        the value(s) it drives, scheduled by its effects (``lpu_arch.effects``)."""
        cfg, tap = self.cfg, self._tap
        name, where = self.names[p], _At(self.tile, queue, t, ins)
        out = None      # the value(s) this instruction drives (when, where: its effects)
        if ins.op in BASE_OPS and ins.base in self.dynamic and not self.skips(ins):
            self.busy[queue] += 1
        if self.skips(ins):
            out = np.zeros(cfg.lanes, np.uint8)     # a skipped READ or VOP drives zeros
        elif ins.op == Op.READ:
            out = self.mem[name][self._relocated(ins, ins.addr, cfg.mem_depth, "address", where)]
        elif ins.op == Op.MM:
            out = self._mm(t, p, ins, where)
        elif ins.op == Op.VOP:
            out = self._vop(ins, p, where)
        elif ins.op == Op.ARGMAX:
            if self.argmax[name] is None and not ins.aux & ArgmaxFlag.FIRST:
                raise ModelError(f"{where}: ARGMAX without FIRST before any search of this run started "
                                 "(the running maximum is undefined at a run's start)")
            values = from_planes([tap(ins.dir, ins.stream + b, p) for b in range(cfg.acc_planes)], cfg.acc_bits)
            self.argmax[name] = argmax_step(self.argmax[name], values, ins)
            out = index_vector(self.argmax[name][1], cfg.lanes)
        elif ins.op in SXM_OUT_OPS:
            x = tap(ins.dir, ins.stream, p)
            mp = (tap(ins.dir, ins.operand("map"), p) if ins.op == Op.PERM else
                  tap(ins.dir, ins.operand("with"), p) if ins.op == Op.MAX else None)
            out = sxm_apply(ins, x, mp, self.sxm_buf[name])
        elif ins.op == Op.RECV:
            out = self._recv(t, ins, where)
        for k, a in enumerate(effects(ins, name, cfg.lanes, cfg.acc_planes, cfg.vxm_latency).drives):
            self._drive(t + a.offset, p, a.dir, a.stream, out[k] if ins.op == Op.MM else out)

    def _mm(self, t: int, p: int, ins: Instr, where) -> np.ndarray:
        """An MM's result planes; the accumulator row it writes waits in ``pending_acc``
        until :meth:`_commit`."""
        cfg, name = self.cfg, self.names[p]
        m = self.mxms[name]
        if ins.aux & MMFlag.XBUF:
            slot = ins.operand("slot")
            if not m.x_ok[slot]:
                raise ModelError(f"{where}: x slot {slot} is read before any LX wrote it")
            x, x_nan = m.xbuf[slot].copy(), m.x_nan[slot]
        else:
            x = operand_values(self._tap(ins.dir, ins.stream, p), cfg.mxm_dtype)
            x_nan = has_nan(self._tap(ins.dir, ins.stream, p), cfg.mxm_dtype)
        if (x_nan or m.w_nan[m.active].any()) and self.nan_operand is None:
            self.nan_operand = (t, name)        # every row multiplies all of x
        a = ins.operand("acc")
        prod = m.weights[m.active] @ x
        if ins.aux & MMFlag.ACC:
            if not m.acc_ok[a]:
                raise ModelError(f"{where}: accumulator row {a} is accumulated into before "
                                 "any MM without ACC wrote it")
            prod = prod + m.acc[a]
        new = add_wrap(prod, 0, cfg.acc_bits)          # cfg.acc_bits: 32 on an int8 tile
        m.mm_count += 1
        m.pending_acc = (a, new)
        return to_planes(new, cfg.acc_planes)        # plane b on the b-th stream driven

    def _recv(self, t: int, ins: Instr, where) -> tuple:
        """The vector a RECV pops, checked to have had time to arrive."""
        link = ins.operand("link")
        if not self.rx[link]:
            raise ModelError(f"{where}: RECV with nothing sent on link {link} (receive buffer underflow)")
        v = self.rx[link].pop(0)
        if t < v.sent + self.min_distance:
            raise ModelError(f"{where}: the vector tile {v.tile} sent on cycle {v.sent} cannot arrive "
                             f"before cycle {v.sent + self.min_distance} (SEND-to-RECV distance "
                             f"{self.min_distance})")
        return v.data

    def _commit(self, t: int, p: int, ins: Instr, queue: str) -> None:
        """The part of ``ins`` that writes state, after every instruction of cycle ``t`` has
        read it: MEM writes, accumulator rows, the transpose buffer, x slots, weight loads
        started, vectors sent."""
        cfg, tap, name = self.cfg, self._tap, self.names[p]
        if ins.op == Op.WRITE and not self.skips(ins):
            data = tap(ins.dir, ins.stream, p).copy()
            a = self._relocated(ins, ins.addr, cfg.mem_depth, "address", f"{name} on cycle {t} ({ins})")
            self.mem[name][a] = data
            self.events.append(WriteEvent(t, name, a, tuple(int(x) for x in data)))
        elif ins.op == Op.MM:
            m = self.mxms[name]
            a, new = m.pending_acc
            m.acc[a], m.acc_ok[a] = new, True
        elif ins.op == Op.TRI:
            self.sxm_buf[name][ins.operand("row")] = tap(ins.dir, ins.stream, p)
        elif ins.op == Op.SETB:         # applied after the cycle (SETB_LATENCY): this cycle's issues use the old value
            self.pending_bases.append((ins.operand("reg"), setb_offset(ins, tap(ins.dir, ins.stream, p))))
        elif ins.op == Op.LX:
            m = self.mxms[name]
            slot = ins.operand("slot")
            m.xbuf[slot], m.x_ok[slot] = operand_values(tap(ins.dir, ins.stream, p), cfg.mxm_dtype), True
            m.x_nan[slot] = has_nan(tap(ins.dir, ins.stream, p), cfg.mxm_dtype)
        elif ins.op == Op.LW:
            self.mxms[name].issue_lw(t, ins, _At(self.tile, queue, t, ins))
        elif ins.op in (Op.SEND, Op.SENDM):
            data = tuple(int(x) for x in tap(ins.dir, ins.stream, p))
            self.sent += [LinkVector(t, data, self.tile, link) for link in ins.links()]

    def _advance(self, t: int) -> None:
        """Advance the stream registers from cycle ``t`` (in place: the edges feed zeros); a
        drive replaces the passing value."""
        cfg, names = self.cfg, self.names
        seen = set()
        ne, nw, P = self.east, self.west, cfg.positions
        ne[(P - 1 - t) % P] = 0         # leaves at the east edge; that row is position 0 next cycle
        nw[t % P] = 0                   # leaves at the west edge; that row is position P-1 next cycle
        for p, d, s, data in self.drives.pop(t, []):
            if (p, d, s) in seen:
                raise ModelError(f"two writes to stream {'EW'[d]}{s} at {names[p]} on cycle {t}")
            seen.add((p, d, s))
            if d == EAST and p + 1 < cfg.positions:
                ne[(p - t) % P, s] = data           # (position p + 1 on cycle t + 1)
            elif d != EAST and p > 0:
                nw[(p + t) % P, s] = data
        if t in self._read_drives:
            p, d, s, data = self._read_drives.pop(t)
            # (p, d, s) as one number, to find a stream written twice among these READs or
            # by an instruction above
            S = cfg.streams
            key = (p * 2 + d) * S + s
            taken = np.array([(q * 2 + e) * S + r for q, e, r in seen], np.int64)
            uniq, count = np.unique(key, return_counts=True)
            twice = np.r_[uniq[count > 1], key[np.isin(key, taken)]]
            if twice.size:
                i = int(np.flatnonzero(key == twice[0])[0])
                raise ModelError(f"two writes to stream {'EW'[d[i]]}{s[i]} at {names[p[i]]} on cycle {t}")
            east = d == EAST
            on = east & (p + 1 < cfg.positions)
            ne[(p[on] - t) % P, s[on]] = data[on]
            on = ~east & (p > 0)
            nw[(p[on] + t) % P, s[on]] = data[on]

    def _vop(self, ins, p, where=""):
        d, s, prm = ins.dir, ins.stream, self.params
        e = self._relocated(ins, ins.operand("param"), self.cfg.vxm_param_depth, "parameter entry", where)
        P, bits = self.cfg.acc_planes, self.cfg.acc_bits
        A = from_planes([self._tap(d, s + b, p) for b in range(P)], bits)
        B = from_planes([self._tap(1 - d, s + b, p) for b in range(P)], bits)    # the other direction
        fp = self.cfg.mxm_dtype == "fp8"         # 48-bit adds, E4M3 results (docs/numerics.md, "FP8")
        add = (lambda a, b: add_wrap(a, b, self.cfg.MAX_ACC_BITS)) if fp else add_int32

        def requant(v, k):
            """``v`` plus bias ``k`` (a or b), requantised with multiplier and shift ``k``."""
            b, m, sh = prm[f"bias_{k}"][e], prm[f"m_{k}"][e], prm[f"s_{k}"][e]
            return requantise_fp8(add(v, fp8_bias(b)), m, sh) if fp else requantise(add(v, b), m, sh)

        if ins.aux & VopFlag.ADD:
            A = add(A, B)
        val = np.asarray(requant(A, "a"), np.int64)
        if ins.aux & VopFlag.TABLE:
            val = self.table[prm["table"][e] % self.cfg.vxm_tables, val & 0xFF]
        if ins.aux & VopFlag.GATE:
            gb, m, sh = requant(B, "b"), prm["m_c"][e], prm["s_c"][e]
            val = gate_fp8(val & 0xFF, gb, m, sh) if fp else requantise(val * gb, m, sh)
        return np.asarray(val, np.int64) & 0xFF

    def result(self) -> RunResult:
        return RunResult(cycles=done_cycles(max(self.halt_at), self.last_drive), events=self.events, memory=self.mem, busy=self.busy,
                         mm_count={n: m.mm_count for n, m in self.mxms.items()}, sent=self.sent,
                         nan_operand=self.nan_operand, bases=list(self.bases))


def as_predicted(result: RunResult, cycles: int, writes) -> bool:
    """Did a run end on ``cycles`` with exactly the predicted ``writes`` (each with
    ``as_tuple()``: cycle, slice, address and value), in order?  The scoreboard's check
    (``scoreboard.compare``) of those two parts."""
    return not compare(golden_observed(result), promise(writes, cycles))


def base_registers(cfg, bases=None) -> list[tuple[int, bool]]:
    """``(offset, on)`` of every base register from their host words (register 0 is the
    constant: offset 0, on)."""
    words = list(bases or [])
    if len(words) > cfg.base_regs:
        raise ModelError(f"{len(words)} base register words; the tile has {cfg.base_regs} registers")
    regs = [base_fields(w) for w in words] + [(0, True)] * (cfg.base_regs - len(words))
    regs[0] = (0, True)
    return regs


def run(program: Program, bases=None) -> RunResult:
    """Run one tile to done (``bases``: see :class:`TileModel`)."""
    with gc_paused():
        tm = TileModel(program, bases=bases)
        while tm.busy_running():
            tm.step()
        return tm.result()


def run_system(programs: list[Program], peer, min_distance: int | None = None, bases=None) -> list[RunResult]:
    """Run several tiles in lockstep SAC time.  ``peer(tile, link) -> (tile', link')``: where
    a vector sent by ``tile`` on ``link`` is received.  Every vector must be received
    exactly once (a vector left in a receive buffer is an error).  ``bases``: None or one
    list of base register words per tile."""
    tiles = [TileModel(p, i, min_distance, None if bases is None else bases[i]) for i, p in enumerate(programs)]
    while any(t.busy_running() for t in tiles):
        for tm in tiles:
            n = len(tm.sent)
            tm.step()
            for v in tm.sent[n:]:
                dst, dlink = peer(tm.tile, v.link)
                tiles[dst].rx[dlink].append(v)
    for tm in tiles:
        for link, q in tm.rx.items():
            if q:
                raise ModelError(f"tile {tm.tile} link {link}: {len(q)} vector(s) sent and never received "
                                 f"(first sent by tile {q[0].tile} on cycle {q[0].sent})")
    return [tm.result() for tm in tiles]
