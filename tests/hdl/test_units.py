"""Unit timing of the slices and the instruction queue, in Amaranth's own simulator.

What is tested
--------------
* :class:`hdl.units.icu.InstructionQueue`: a program is loaded through the queue's host port
  (two 32-bit words per instruction, ``Instr.encode()``), started, and the cycle, opcode,
  stream, direction and address of every issue are recorded.  They must equal the issue
  schedule computed by :func:`isa_schedule`, a small function that applies the timing
  rules exactly as ``docs/isa.md`` ("Timing rules") states them: a data instruction
  occupies 1 cycle, ``NOP n`` n cycles, and the k-th repetition of
  ``REPEAT n, d, stride`` (k = 1..n) issues at ``s + k*d - 1``, ``s`` being the REPEAT's
  first cycle, with the address of the last issued data instruction advanced by
  ``k*stride``.  Covered: NOP gaps, REPEAT with d = 1 and d > 1, positive, negative,
  zero and extreme strides, REPEAT after NOP and after REPEAT, HALT, and an opcode that
  is illegal for the queue's slice kind (``illegal`` rises, the queue halts).
* One latency test per slice kind.  The testbench drives the slice's ``issue`` port
  directly for one cycle and counts the cycles until the slice's ``drive`` mask shows the
  result, with a different stream value on every cycle so that the value driven also
  tells which cycle was sampled.  The measured cycle must equal the constant of
  ``lpu_arch.isa`` (``READ_LATENCY``, ``WRITE_LATENCY``, ``SXM_LATENCY``,
  ``TileConfig.vxm_latency``, ``MXM_LATENCY``, ``C2C_LATENCY``).

Every expected cycle and value comes from the ISA's stated rules (and the value
semantics of ``docs/isa.md``), never from the RTL, so a wrong entry in the ISA's table or
an RTL that disagrees with it fails a test.  Everything runs on ``TileConfig.tiny()``.
"""

import dataclasses

import numpy as np
import pytest
from amaranth.sim import Simulator

from hdl.units.icu import InstructionQueue
from hdl.units.layouts import drive_value
from hdl.units.mem_slice import MemSlice
from hdl.units.mxm import MXM
from hdl.units.vxm import VXM
from lpu_arch import TileConfig, isa
from lpu_arch.isa import ADDR_BITS, EAST, INT32_PLANES, STRIDE_MAX, STRIDE_MIN, WEST, Instr, MMFlag, Op, SxmFlag, VopFlag

# hdl.units.sxm is imported inside the SXM test: it asserts SXM_LATENCY == 1 at import, and a
# module-level import would turn a wrong table entry into a collection error of every
# test here instead of a failure of the SXM test.

CFG = TileConfig.tiny()
L, S = CFG.lanes, CFG.streams
ADDR_MASK = (1 << ADDR_BITS) - 1
DIR_NAME = {EAST: "east", WEST: "west"}


# ---- helpers ---------------------------------------------------------------------------
def simulate(dut, bench):
    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()


def vec(lanes) -> int:
    """A vector (lane 0 in the low byte) from ``lanes`` int8/uint8 values."""
    return sum((int(v) & 0xFF) << (8 * i) for i, v in enumerate(lanes))


def lanes_of(v: int) -> list[int]:
    return [(v >> (8 * i)) & 0xFF for i in range(L)]


def s8(b: int) -> int:
    return b - 256 if b & 0x80 else b


def sat8(v: int) -> int:
    return max(-128, min(127, v))


def tag(j: int, salt: int = 0) -> list[int]:
    """Distinct lane bytes for cycle offset ``j`` (relative to the issue cycle)."""
    return [(0x40 + 0x10 * j + 3 * salt + i) & 0xFF for i in range(L)]


# ---- instruction queue -----------------------------------------------------------------
def isa_schedule(program):
    """Issues ``[(cycle, op, stream, dir, addr)]`` of ``program`` by the ISA's timing rules,
    cycle 0 being the first instruction's issue cycle, and the cycle on which HALT is
    reached (None without one)."""
    t, last, issues = 0, None, []
    for ins in program:
        if ins.op == Op.HALT:
            return issues, t
        if ins.op == Op.NOP:
            t += ins.count                               # NOP n occupies n cycles
        elif ins.op == Op.REPEAT:
            n, d, stride = ins.count, ins.delay, ins.addr
            for k in range(1, n + 1):                    # k-th repetition at s + k*d - 1
                issues.append((t + k * d - 1, last.op, last.stream, last.dir, (last.addr + k * stride) & ADDR_MASK))
            last = dataclasses.replace(last, addr=(last.addr + n * stride) & ADDR_MASK)
            t += n * d
        else:
            issues.append((t, ins.op, ins.stream, ins.dir, ins.addr))
            last = ins
            t += 1                                       # a data instruction: 1 cycle
    return issues, None


def words_of(program) -> list[int]:
    """Host words of ``program`` (Instr or raw 64-bit ints): low half, then high half."""
    words = []
    for ins in program:
        w = ins if isinstance(ins, int) else ins.encode()
        words += [w & 0xFFFFFFFF, w >> 32]
    return words


async def host_write(ctx, port, words, base=0):
    """Write ``words`` to word addresses ``base``.. of a slice's host port (tile stopped)."""
    ctx.set(port.sel, 1)
    ctx.set(port.we, 1)
    for a, w in enumerate(words, base):
        ctx.set(port.addr, a)
        ctx.set(port.wdata, w)
        await ctx.tick()
    ctx.set(port.sel, 0)
    ctx.set(port.we, 0)


def run_queue(kind, program, cycles, restart=False, cfg=CFG):
    """Load ``program`` into a ``kind`` queue, start it as the tile does (start pulse with
    run low, the priming cycle, run high from the cycle after) and watch it for ``cycles``
    cycles; cycle 0 is the first running cycle.  ``restart``: then pulse start again and watch
    ``cycles`` more (a second trace).  Returns one trace per run:
    ``{"issues": [(cycle, op, stream, dir, addr)], "halted": [..], "illegal": [..]}``."""
    icu = InstructionQueue(cfg, kind)
    traces = []

    async def watch(ctx):
        tr = {"issues": [], "halted": [], "illegal": []}
        for c in range(cycles):
            if ctx.get(icu.issue.valid):
                tr["issues"].append((c, Op(ctx.get(icu.issue.instr.op)), ctx.get(icu.issue.instr.stream),
                                     ctx.get(icu.issue.instr.dir), ctx.get(icu.issue.instr.addr)))
            tr["halted"].append(ctx.get(icu.halted))
            tr["illegal"].append(ctx.get(icu.illegal))
            await ctx.tick()
        traces.append(tr)

    async def start(ctx):
        ctx.set(icu.run, 0)
        ctx.set(icu.start, 1)
        await ctx.tick()
        ctx.set(icu.start, 0)
        await ctx.tick()                    # the queue's priming cycle (run still low)
        ctx.set(icu.run, 1)

    async def bench(ctx):
        await host_write(ctx, icu.host, words_of(program))
        await start(ctx)
        await watch(ctx)
        if restart:
            await start(ctx)
            await watch(ctx)

    simulate(icu, bench)
    return traces


def fmt(issues):
    return ", ".join(f"c{c}:{Op(op).name} {DIR_NAME[d][0].upper()}{s} @{a}" for c, op, s, d, a in issues) or "none"


def check_schedule(kind, program, trace, expected, halt_at):
    text = "; ".join(str(i) if isinstance(i, Instr) else hex(i) for i in program)
    assert trace["issues"] == expected, (
        f"{kind} queue, program [{text}]:\n  expected issues (ISA rule) {fmt(expected)}\n"
        f"  measured issues            {fmt(trace['issues'])}")
    if halt_at is not None:
        # ICU: ``halted`` is set the cycle after HALT is decoded.
        first = trace["halted"].index(1) if 1 in trace["halted"] else None
        assert first == halt_at + 1 and all(trace["halted"][halt_at + 1:]), (
            f"{kind} queue, program [{text}]: HALT reached on cycle {halt_at}, so halted expected from "
            f"cycle {halt_at + 1} on; measured first halted cycle {first}")
    assert not any(trace["illegal"]), f"{kind} queue, program [{text}]: illegal raised on a legal program"


R, W_ = Instr.read, Instr.write
QUEUE_PROGRAMS = {
    "back_to_back": [R(0, EAST, 1), R(1, WEST, 2), W_(2, EAST, 3)],
    "nop_gaps": [R(0, EAST, 5), Instr.nop(1), R(0, EAST, 6), Instr.nop(3), R(1, EAST, 7),
                 Instr.nop(2), Instr.nop(2), W_(3, WEST, 8), Instr.nop(70), R(0, EAST, 9)],
    "nop_first": [Instr.nop(4), R(2, EAST, 11)],
    "repeat_d1_pos": [R(1, EAST, 10), Instr.repeat(4, 1, +1), R(0, EAST, 0)],
    "repeat_d1_pos_big_stride": [R(1, EAST, 10), Instr.repeat(3, 1, +7)],
    "repeat_d3_pos": [R(2, WEST, 10), Instr.repeat(3, 3, +2), R(0, EAST, 1)],
    "repeat_d1_neg": [W_(3, EAST, 40), Instr.repeat(5, 1, -3), R(0, EAST, 2)],
    "repeat_d4_neg": [R(0, WEST, 900), Instr.repeat(3, 4, -100), W_(1, EAST, 5)],
    "repeat_zero_stride": [R(0, EAST, 9), Instr.repeat(3, 2, 0)],
    "repeat_long_delay": [R(0, EAST, 3), Instr.repeat(2, 200, +1), R(1, EAST, 4)],
    "repeat_after_nop": [R(1, EAST, 7), Instr.nop(3), Instr.repeat(3, 2, +5), Instr.nop(1), R(2, EAST, 2)],
    "repeat_after_nop_d1": [W_(0, WEST, 30), Instr.nop(1), Instr.repeat(2, 1, -2)],
    "repeat_after_repeat": [R(0, EAST, 3), Instr.repeat(2, 1, +1), Instr.repeat(2, 2, +10), Instr.repeat(1, 3, -4)],
    "repeat_last_data_not_first": [R(0, EAST, 1), W_(1, WEST, 50), Instr.repeat(2, 2, -1)],
    "stride_extremes": [R(0, EAST, 5), Instr.repeat(1, 1, STRIDE_MAX), R(0, EAST, ADDR_MASK),
                        Instr.repeat(1, 2, STRIDE_MIN)],
    "halt_mid_program": [R(1, EAST, 1), Instr.nop(2), Instr.halt(), R(2, EAST, 2), Instr.repeat(2, 1, +1)],
    "halt_after_repeat": [R(1, EAST, 1), Instr.repeat(2, 3, +1), Instr.halt(), R(2, EAST, 2)],
    "halt_first": [Instr.halt(), R(0, EAST, 1)],
}


@pytest.mark.parametrize("name", QUEUE_PROGRAMS)
def test_queue_issue_timing(name):
    """MEM queue: every issue's cycle and address as the ISA's NOP/REPEAT rules say."""
    program = QUEUE_PROGRAMS[name]
    if program[-1].op != Op.HALT:
        program = program + [Instr.halt()]
    expected, halt_at = isa_schedule(program)
    assert expected or program[0].op == Op.HALT, "the test program issues nothing"
    (trace,) = run_queue("MEM", program, halt_at + 8)
    check_schedule("MEM", program, trace, expected, halt_at)


# A data instruction of each slice kind; REPEAT advances its whole addr field.
KIND_OPS = {
    "MEM": Instr.read(2, WEST, 12),
    "VXM": Instr.vop(0, EAST, param=3, out=1, flags=VopFlag.OUT_E),
    "SXM": Instr.compute(Op.SHIFT, 1, WEST, flags=SxmFlag.OUT_E, k=1, out=2),
    "MXM": Instr.mm(0, WEST, acc=1, slot=2, out=0, flags=MMFlag.EMIT),   # stride 1025: acc and slot
    "C2C": Instr.compute(Op.RECV, 3, EAST, link=0),
}
KIND_STRIDE = {"MEM": -2, "VXM": 1, "SXM": 1, "MXM": 1025, "C2C": 1}


@pytest.mark.parametrize("kind", KIND_OPS)
def test_queue_issue_timing_every_kind(kind):
    """Each slice kind's queue issues its own data instruction by the same rules."""
    op = KIND_OPS[kind]
    program = [op, Instr.nop(2), Instr.repeat(3, 2, KIND_STRIDE[kind]), Instr.repeat(2, 1, -KIND_STRIDE[kind]),
               op, Instr.halt()]
    expected, halt_at = isa_schedule(program)
    (trace,) = run_queue(kind, program, halt_at + 6)
    check_schedule(kind, program, trace, expected, halt_at)


# For each kind: a data opcode of another kind, and an opcode the ISA does not define.
FOREIGN = {"MEM": Instr.vop(0, EAST, param=0, out=0), "VXM": Instr.read(0, EAST, 1),
           "SXM": Instr.mm(0, EAST, acc=0), "MXM": Instr.compute(Op.SHIFT, 0, EAST, k=0),
           "C2C": Instr.write(0, EAST, 1)}
UNDEFINED_OP = 63                        # the 6-bit op field's largest value; not in Op


@pytest.mark.parametrize("kind", KIND_OPS)
@pytest.mark.parametrize("bad", ["foreign", "undefined"])
def test_queue_illegal_opcode_halts(kind, bad):
    """An opcode not legal for the slice kind raises ``illegal`` and halts the queue (the
    cycle after it is decoded); ``illegal`` is sticky until the next start."""
    word = FOREIGN[kind].encode() if bad == "foreign" else UNDEFINED_OP
    assert (word & 0x3F) not in {int(o) for o in isa.SLICE_OPS[kind]}
    op = KIND_OPS[kind]
    program = [op, Instr.nop(2), word, op, Instr.halt()]
    _, decoded_at = isa_schedule(program[:2] + [Instr.halt()])   # the cycle the bad word is reached
    assert decoded_at == 3
    first, second = run_queue(kind, program, 12, restart=True)
    what = f"{kind} queue, {bad} opcode {word & 0x3F} decoded on cycle {decoded_at}"
    assert first["issues"] == [(0, op.op, op.stream, op.dir, op.addr)], (
        f"{what}: expected only instruction 0 to issue (cycle 0), measured {fmt(first['issues'])}")
    for name in ("illegal", "halted"):
        flag = first[name]
        assert flag == [0] * (decoded_at + 1) + [1] * (len(flag) - decoded_at - 1), (
            f"{what}: expected {name} from cycle {decoded_at + 1} on, measured {flag}")
    assert second["illegal"][0] == 0 and second["halted"][0] == 0, (
        f"{what}: a new start must clear illegal and halted (cycle 0 of the rerun: "
        f"illegal={second['illegal'][0]}, halted={second['halted'][0]})")
    assert second["issues"][:1] == [(0, op.op, op.stream, op.dir, op.addr)], (
        f"{what}: after the restart instruction 0 must issue on cycle 0, measured {fmt(second['issues'])}")
    assert second["illegal"][decoded_at + 1] == 1, f"{what}: the rerun must hit the illegal opcode again"


# ---- slice latencies -------------------------------------------------------------------
async def issue_and_watch(ctx, dut, instr, each_cycle=None, before=2, after=6, port="issue"):
    """Issue ``instr`` for one cycle (cycle 0) on the issue port ``port`` (an MXM's loader
    instructions: ``ld_issue``) and watch ``dut.drive`` from cycle ``-before`` to ``after``.
    ``each_cycle(ctx, j)`` runs on every cycle after the issue port is set, to present that
    cycle's stream values.  Returns ``[(cycle, direction, mask, [value of each stream])]``
    of the cycles with a drive."""
    seen, issue = [], getattr(dut, port)
    for j in range(-before, after + 1):
        ctx.set(issue.valid, int(j == 0))
        ctx.set(issue.instr.as_value(), instr.encode() if j == 0 else 0)
        if each_cycle is not None:
            each_cycle(ctx, j)
        for d, port in ((EAST, dut.drive.east), (WEST, dut.drive.west)):
            mask = ctx.get(port.mask)
            if mask:
                seen.append((j, d, mask, [ctx.get(drive_value(port, s)) for s in range(S)]))
        await ctx.tick()
    ctx.set(issue.valid, 0)              # (when after = 0 the issue cycle was the last one)
    return seen


def check_drive(what, seen, latency, const_name, direction, mask):
    """Exactly one drive: on cycle ``latency`` in ``direction`` with ``mask``; returns its values."""
    got = [(j, DIR_NAME[d], m) for j, d, m, _ in seen]
    assert got == [(latency, DIR_NAME[direction], mask)], (
        f"{what} issued on cycle 0: expected one drive on cycle {latency} (isa.{const_name} = {latency}), "
        f"{DIR_NAME[direction]} mask {mask:#b}; measured (cycle, direction, mask) {got}")
    return seen[0][3]


def check_out_drives(what, instr, seen, latency, const_name):
    """One drive of stream ``out`` per OUT_E/OUT_W flag of ``instr`` (an SXM or VXM result),
    each on cycle ``latency``."""
    flags = instr.aux
    kind = SxmFlag if instr.op != Op.VOP else VopFlag
    dirs = [d for d, f in ((EAST, kind.OUT_E), (WEST, kind.OUT_W)) if flags & f]
    got = [(j, DIR_NAME[d], m) for j, d, m, _ in seen]
    expect = [(latency, DIR_NAME[d], 1 << instr.operand("out")) for d in dirs]
    assert got == expect, (
        f"{what} {instr} issued on cycle 0: expected drive(s) (cycle, direction, mask) {expect} "
        f"(isa.{const_name} = {latency}); measured {got}")


def set_taps(ctx, dut, d, vectors):
    """Stream values visible at the slice this cycle: ``vectors[s]`` on stream s of
    direction ``d``; the other direction zero."""
    for s in range(S):
        ctx.set((dut.tap.east if d == EAST else dut.tap.west)[s], vectors.get(s, 0))
        ctx.set((dut.tap.west if d == EAST else dut.tap.east)[s], 0)


@pytest.mark.parametrize("direction", [EAST, WEST], ids=DIR_NAME.get)
@pytest.mark.parametrize("stream", [0, S - 1], ids=lambda s: f"s{s}")
def test_mem_read_latency(direction, stream):
    """READ s, a drives vector a onto stream s on issue + READ_LATENCY."""
    mem = MemSlice(CFG)
    addr = 5
    stored = {a: vec(tag(a, salt=7)) for a in (addr - 1, addr, addr + 1)}
    out = {}

    async def bench(ctx):
        for a, v in stored.items():                     # host writes while stopped
            await host_write(ctx, mem.host, [(v >> (32 * w)) & 0xFFFFFFFF for w in range(CFG.words_per_vector)],
                             base=a * CFG.words_per_vector)
        ctx.set(mem.run, 1)
        out["seen"] = await issue_and_watch(ctx, mem, Instr.read(stream, direction, addr))

    simulate(mem, bench)
    what = f"MEM READ {DIR_NAME[direction]}{stream}, {addr}"
    values = check_drive(what, out["seen"], isa.READ_LATENCY, "READ_LATENCY", direction, 1 << stream)
    assert values[stream] == stored[addr], (
        f"{what}: drove {values[stream]:#x} on cycle {isa.READ_LATENCY}, expected the stored vector {stored[addr]:#x}")


@pytest.mark.parametrize("direction", [EAST, WEST], ids=DIR_NAME.get)
def test_mem_write_samples_on_issue_cycle(direction):
    """WRITE s, a stores the value on stream s on issue + WRITE_LATENCY (a different value
    is on the stream every cycle; the host read-back says which one was stored), and a
    READ issued on the next cycle sees it."""
    mem = MemSlice(CFG)
    addr, stream = 9, 2
    out = {"events": []}

    def taps(ctx, j):
        set_taps(ctx, mem, direction, {stream: vec(tag(j))})

    def taps_and_events(ctx, j):
        taps(ctx, j)
        if ctx.get(mem.write_event):
            out["events"].append((j, ctx.get(mem.write_addr), ctx.get(mem.write_data)))

    async def bench(ctx):
        ctx.set(mem.run, 1)
        await issue_and_watch(ctx, mem, Instr.write(stream, direction, addr), taps_and_events, after=3)
        ctx.set(mem.run, 0)
        ctx.set(mem.host.sel, 1)
        ctx.set(mem.host.re, 1)
        words = []
        for w in range(CFG.words_per_vector):
            ctx.set(mem.host.addr, addr * CFG.words_per_vector + w)
            await ctx.tick()
            words.append(ctx.get(mem.host.rdata))
        ctx.set(mem.host.sel, 0)
        ctx.set(mem.host.re, 0)
        out["stored"] = sum(v << (32 * w) for w, v in enumerate(words))
        # A READ on the cycle after a WRITE sees the new value.
        ctx.set(mem.run, 1)
        await issue_and_watch(ctx, mem, Instr.write(stream, direction, addr + 1), taps, before=0, after=0)
        out["read"] = await issue_and_watch(ctx, mem, Instr.read(0, EAST, addr + 1), before=0)

    simulate(mem, bench)
    what = f"MEM WRITE {DIR_NAME[direction]}{stream}, {addr}"
    sampled = [j for j in range(-2, 4) if vec(tag(j)) == out["stored"]]
    assert sampled == [isa.WRITE_LATENCY], (
        f"{what} issued on cycle 0: expected the stream value of cycle {isa.WRITE_LATENCY} "
        f"(isa.WRITE_LATENCY = {isa.WRITE_LATENCY}) stored; host read-back {out['stored']:#x} is the value of "
        f"cycle(s) {sampled}")
    assert out["events"] == [(isa.WRITE_LATENCY, addr, vec(tag(isa.WRITE_LATENCY)))], (
        f"{what}: expected one write event on cycle {isa.WRITE_LATENCY} with the stream value of that cycle, "
        f"measured {out['events']}")
    values = check_drive(f"MEM READ E0, {addr + 1} (the cycle after WRITE)", out["read"], isa.READ_LATENCY,
                         "READ_LATENCY", EAST, 1)
    assert values[0] == vec(tag(0)), (
        f"MEM READ E0, {addr + 1} on the cycle after a WRITE of it: drove {values[0]:#x}, expected the written "
        f"{vec(tag(0)):#x}")


def sxm_cases():
    """(instruction, expected output lanes from the input lanes x and map m)."""
    out = SxmFlag.OUT_E
    return {
        "SHIFT_rot_up": (Instr.compute(Op.SHIFT, 0, WEST, flags=SxmFlag.ROT | out, k=1, out=2),
                         lambda x, m: [x[(i - 1) % L] for i in range(L)]),
        "SHIFT_down_west": (Instr.compute(Op.SHIFT, 0, EAST, flags=SxmFlag.DOWN | SxmFlag.OUT_W, k=1, out=1),
                            lambda x, m: x[1:] + [0]),
        "PERM": (Instr.compute(Op.PERM, 0, WEST, flags=out, map=1, out=3),
                 lambda x, m: [x[k] if k < L else 0 for k in m]),
        "DIST": (Instr.compute(Op.DIST, 0, WEST, flags=out | SxmFlag.OUT_W, k=2, g=2, out=0),
                 lambda x, m: (x[2:4] * L)[:L]),
    }


SXM_MAP = [3, 0, L + 1, 1]


@pytest.mark.parametrize("case", sxm_cases())
def test_sxm_latency(case):
    """SHIFT/PERM/DIST sample their input on the issue cycle and drive the result on
    issue + SXM_LATENCY."""
    from hdl.units.sxm import SXM       # (see the note on imports at the top)

    instr, want = sxm_cases()[case]
    assert instr.stream != 1, "stream 1 carries PERM's map"
    sxm = SXM(CFG)
    out = {}

    def taps(ctx, j):
        set_taps(ctx, sxm, instr.dir, {instr.stream: vec(tag(j)), 1: vec(SXM_MAP)})

    async def bench(ctx):
        out["seen"] = await issue_and_watch(ctx, sxm, instr, taps)

    simulate(sxm, bench)
    o = instr.operand("out")
    check_out_drives("SXM", instr, out["seen"], isa.SXM_LATENCY, "SXM_LATENCY")
    x = tag(0)                                           # the input of the issue cycle
    expected = vec(want(x, SXM_MAP))
    for _, _, _, values in out["seen"]:
        assert values[o] == expected, (
            f"SXM {instr}: drove {lanes_of(values[o])} on cycle {isa.SXM_LATENCY}, expected {lanes_of(expected)} "
            f"(the result of the input sampled on the issue cycle, {x})")


def test_sxm_tro_latency():
    """TRO drives a column of the rows TRI stored, on issue + SXM_LATENCY."""
    from hdl.units.sxm import SXM

    sxm = SXM(CFG)
    rows = [tag(r, salt=r) for r in range(L)]
    col, o = 2, 1
    instr = Instr.compute(Op.TRO, 0, WEST, flags=SxmFlag.OUT_W, col=col, out=o)
    out = {}

    async def bench(ctx):
        for r in range(L):
            set_taps(ctx, sxm, WEST, {0: vec(rows[r])})
            await issue_and_watch(ctx, sxm, Instr.compute(Op.TRI, 0, WEST, row=r), before=0, after=0)
        set_taps(ctx, sxm, WEST, {})
        out["seen"] = await issue_and_watch(ctx, sxm, instr)

    simulate(sxm, bench)
    values = check_drive(f"SXM {instr}", out["seen"], isa.SXM_LATENCY, "SXM_LATENCY", WEST, 1 << o)
    expected = [rows[r][col] for r in range(L)]
    assert lanes_of(values[o]) == expected, (
        f"SXM {instr}: drove {lanes_of(values[o])}, expected column {col} of the TRI rows, {expected}")


# ---- SXM MAX (TileConfig.sxm_max) ---------------------------------------------------------
CFG_MAX = CFG.with_overrides(["sxm_max=1"])


def max_cases():
    """(MAX instruction, x, w): every rotation k, with = the stream of x and another, both
    output directions; random signed lanes, and the extremes -128, 127, -1, 0 against
    their neighbours."""
    rng = np.random.default_rng(46)
    extremes = [0x80, 0x7F, 0xFF, 0x00]
    cases = []
    for k in range(L):
        for with_, d, flags in ((1, WEST, SxmFlag.OUT_E), (0, EAST, SxmFlag.OUT_W),
                                (3, EAST, SxmFlag.OUT_E | SxmFlag.OUT_W)):
            x, w = ([int(v) for v in rng.integers(0, 256, L)] for _ in range(2))
            if k == 1 and with_ == 1:
                x, w = extremes, extremes[1:] + extremes[:1]
            cases.append((Instr.max(0, d, k=k, with_=with_, out=2, flags=flags), x, x if with_ == 0 else w))
    return cases


def test_sxm_max_matches_the_golden_model():
    """MAX samples x (its stream) and w (its ``with`` stream) on the issue cycle and drives,
    on issue + SXM_LATENCY, the lane-wise signed maximum of x and w rotated by k
    (``archmodel.sxm_apply``), on a tile with ``sxm_max``; the other SXM instructions still
    behave (one SHIFT and one PERM between the MAX cases)."""
    from hdl.units.sxm import SXM
    from firmware_gen.golden.archmodel import sxm_apply

    sxm = SXM(CFG_MAX)
    cases = max_cases()
    others = [(Instr.compute(Op.SHIFT, 0, WEST, flags=SxmFlag.ROT | SxmFlag.OUT_E, k=1, out=2), tag(0), None),
              (Instr.compute(Op.PERM, 0, WEST, flags=SxmFlag.OUT_E, map=1, out=3), tag(1), SXM_MAP)]
    cases = cases[:3] + others + cases[3:]
    seen = []

    async def bench(ctx):
        for instr, x, w in cases:
            streams = {instr.stream: vec(x)}
            if w is not None and instr.op != Op.SHIFT:
                streams[instr.operand("with" if instr.op == Op.MAX else "map")] = vec(w)

            def taps(ctx, j, streams=streams, d=instr.dir):
                set_taps(ctx, sxm, d, streams if j == 0 else {s: vec(tag(j)) for s in range(S)})
            seen.append(await issue_and_watch(ctx, sxm, instr, taps, before=0, after=2))

    simulate(sxm, bench)
    for (instr, x, w), got in zip(cases, seen):
        check_out_drives("SXM", instr, got, isa.SXM_LATENCY, "SXM_LATENCY")
        want = vec(sxm_apply(instr, np.array(x, np.uint8), None if w is None else np.array(w, np.uint8)))
        for _, _, _, values in got:
            assert values[instr.operand("out")] == want, (
                f"SXM {instr} on x {[s8(v) for v in x]}, w {None if w is None else [s8(v) for v in w]}: drove "
                f"{[s8(v) for v in lanes_of(values[instr.operand('out')])]}, the golden model "
                f"{[s8(v) for v in lanes_of(want)]}")


@pytest.mark.parametrize("sxm_max", [0, 1])
def test_sxm_queue_executes_max_only_with_sxm_max(sxm_max):
    """An SXM queue issues MAX where ``sxm_max`` is 1; where it is 0 MAX is an illegal
    opcode (``isa.slice_ops``): ``illegal`` rises and the queue halts, as for any opcode its
    slice does not execute."""
    cfg = CFG.with_overrides([f"sxm_max={sxm_max}"])
    first = KIND_OPS["SXM"]
    mx = Instr.max(1, EAST, k=3, with_=2, out=0, flags=SxmFlag.OUT_E)
    (tr,) = run_queue("SXM", [first, Instr.nop(2), mx.encode(), first, Instr.halt()], 12, cfg=cfg)
    if sxm_max:
        assert tr["issues"] == [(0, first.op, 1, WEST, 1), (3, Op.MAX, 1, EAST, 3), (4, first.op, 1, WEST, 1)], (
            f"sxm_max = 1: MAX must issue on cycle 3 between the SHIFTs, measured {fmt(tr['issues'])}")
        assert not any(tr["illegal"]), f"sxm_max = 1: MAX is legal, measured illegal {tr['illegal']}"
    else:
        assert tr["issues"] == [(0, first.op, 1, WEST, 1)], (
            f"sxm_max = 0: nothing may issue after the MAX word, measured {fmt(tr['issues'])}")
        assert tr["illegal"] == [0] * 4 + [1] * 8, f"sxm_max = 0: expected illegal from cycle 4 on, measured {tr['illegal']}"


def vxm_a(j: int) -> list[int]:
    """int32 A lanes on cycle offset ``j``: in int8 range, and one lane beyond (saturates)."""
    return [5 * j - 20, 7 - 3 * j, 100 + j, (-1000 if j % 2 == 0 else 1000) * (j + 3)]


@pytest.mark.parametrize("latency", isa.VXM_LATENCIES)
@pytest.mark.parametrize("in_dir, flags", [(WEST, VopFlag.OUT_E), (EAST, VopFlag.OUT_W),
                                           (EAST, VopFlag.OUT_E | VopFlag.OUT_W)],
                         ids=["inW-outE", "inE-outW", "inE-outEW"])
def test_vxm_latency(in_dir, flags, latency):
    """VOP (identity parameters, no table, no gate) takes int32 A from streams s..s+3 on
    the issue cycle and drives sat8(A) on stream out on issue + the tile's
    ``vxm_latency``, for each value it may take (``isa.VXM_LATENCIES``)."""
    cfg = dataclasses.replace(CFG, vxm_latency=latency)
    vxm = VXM(cfg)
    o = 2
    instr = Instr.vop(0, in_dir, param=0, out=o, flags=flags)
    out = {}

    def taps(ctx, j):
        a = [v & 0xFFFFFFFF for v in vxm_a(j)]
        set_taps(ctx, vxm, in_dir, {b: vec([(v >> (8 * b)) & 0xFF for v in a]) for b in range(INT32_PLANES)})

    async def bench(ctx):
        ctx.set(vxm.run, 1)
        out["seen"] = await issue_and_watch(ctx, vxm, instr, taps)

    simulate(vxm, bench)
    check_out_drives("VXM", instr, out["seen"], cfg.vxm_latency, "vxm_latency")
    expected = [sat8(v) for v in vxm_a(0)]
    for _, _, _, values in out["seen"]:
        assert [s8(b) for b in lanes_of(values[o])] == expected, (
            f"VXM {instr}: drove {[s8(b) for b in lanes_of(values[o])]}, expected sat8 of the A sampled on the "
            f"issue cycle, {expected}")


@pytest.mark.parametrize("v_bits", [32, 16], ids=["int32", "gate-int16"])
def test_vxm_requantise_matches_the_golden_model(v_bits):
    """The VXM's requantiser (``hdl.units.vxm.requantise``: shift first, round after, an 8-bit
    add) against ``firmware_gen.golden.quantise.requantise`` on the edges (the extreme values,
    multipliers 1 and 32767, every shift 0..46, products that round onto +-127/-128)
    and on random operands: every output equal."""
    from amaranth import Module, signed
    from amaranth.lib import wiring
    from amaranth.lib.wiring import In, Out

    from firmware_gen.golden.quantise import requantise as golden
    from hdl.units.vxm import requantise as hdl_requantise
    from lpu_arch.vxm import MULT_MAX, SHIFT_BITS, SHIFT_MAX

    class Unit(wiring.Component):
        v: In(signed(v_bits))
        mult: In(15)
        shift: In(SHIFT_BITS)
        out: Out(signed(8))

        def elaborate(self, platform):
            m = Module()
            m.d.comb += self.out.eq(hdl_requantise(m, self.v, self.mult, self.shift, "rq"))
            return m

    import numpy as np
    rng = np.random.default_rng(v_bits)
    lo, hi = -(1 << (v_bits - 1)), (1 << (v_bits - 1)) - 1
    edge_v = [lo, lo + 1, -129, -128, -127, -1, 0, 1, 126, 127, 128, hi - 1, hi]
    cases = [(v, mu, sh) for v in edge_v for mu in (1, 2, 3, MULT_MAX) for sh in range(SHIFT_MAX + 1)]
    # Products just around the rounding points of +127.5 and -128.5 after the shift.
    for sh in range(1, 16):
        for target in (127, -128, -129, 126):
            for d in (-1, 0, 1):
                p = (2 * target + 1) << (sh - 1)
                cases += [(p + d, 1, sh)] if lo <= p + d <= hi else []
    cases += [(int(v), int(mu), int(sh)) for v, mu, sh in zip(rng.integers(lo, hi, 2000, endpoint=True),
                                                               rng.integers(1, MULT_MAX, 2000, endpoint=True),
                                                               rng.integers(0, SHIFT_MAX, 2000, endpoint=True))]
    unit, got = Unit(), []

    async def bench(ctx):
        for v, mu, sh in cases:
            ctx.set(unit.v, v)
            ctx.set(unit.mult, mu)
            ctx.set(unit.shift, sh)
            got.append(ctx.get(unit.out))

    sim = Simulator(unit)                     # combinational: no clock
    sim.add_testbench(bench)
    sim.run()
    want = [int(golden(v, mu, sh)) for v, mu, sh in cases]
    bad = [(c, g, w) for c, g, w in zip(cases, got, want) if g != w]
    assert not bad, f"{len(bad)} of {len(cases)} differ, e.g. (v, mult, shift) -> hdl, golden: {bad[:5]}"


def mxm_bench(mxm, cfg, sched, end, watch):
    """A testbench of an MXM_W alone: a start, then cycles 0..end-1.  ``sched`` lists
    (cycle, port name or None, instruction, {stream: lanes}): on its cycle each named port
    (``issue``, ``ld_issue``) issues its instruction, the others nothing, and the
    west-flowing streams (all of ``cfg``'s) carry the lanes given; ``watch(ctx, cycle)``
    samples the outputs before each clock edge."""
    async def bench(ctx):
        ctx.set(mxm.start, 1)
        await ctx.tick()
        ctx.set(mxm.start, 0)
        for j in range(end):
            now = [e for e in sched if e[0] == j]
            for port in (mxm.issue, mxm.ld_issue):
                ins = [i for _, w, i, _ in now if w and getattr(mxm, w) is port]
                ctx.set(port.valid, int(bool(ins)))
                ctx.set(port.instr.as_value(), ins[0].encode() if ins else 0)
            taps = {s: vec(v) for *_, t in now for s, v in t.items()}
            for s in range(cfg.streams):                # (set_taps knows CFG's streams only)
                ctx.set(mxm.tap.west[s], taps.get(s, 0))
            watch(ctx, j)
            await ctx.tick()
    return bench


MXM_W = [[1, 2, 0, -1], [0, 1, 0, 0], [-3, 0, 2, 1], [1, 1, 1, 1]]


@pytest.mark.parametrize("side", ["W", "E"])
def test_mxm_latency(side):
    """After LW, MM with EMIT takes x from its stream on the issue cycle and drives the
    int32 W.x as 4 byte planes on streams out..out+3 on issue + MXM_LATENCY."""
    assert len(MXM_W) == L
    mxm = MXM(CFG, side)
    d_in = WEST if side == "W" else EAST             # the streams flowing towards it
    d_out = EAST if side == "W" else WEST
    xs = 1
    instr = Instr.mm(xs, d_in, acc=3, out=0, flags=MMFlag.EMIT)
    out = {}

    async def bench(ctx):
        ctx.set(mxm.start, 1)
        await ctx.tick()
        ctx.set(mxm.start, 0)
        # LW s=0, n=L, delay 0: row r from stream r on the LW's issue cycle; the block is
        # active from issue + 0 + L/L = issue + 1.
        set_taps(ctx, mxm, d_in, {r: vec(MXM_W[r]) for r in range(L)})
        await issue_and_watch(ctx, mxm, Instr.lw(0, d_in, n=L, delay=0), before=0, after=0, port="ld_issue")
        set_taps(ctx, mxm, d_in, {})
        await ctx.tick()
        out["seen"] = await issue_and_watch(
            ctx, mxm, instr, lambda ctx, j: set_taps(ctx, mxm, d_in, {xs: vec(tag(j, salt=30))}))

    simulate(mxm, bench)
    what = f"MXM_{side} {instr}"
    values = check_drive(what, out["seen"], isa.MXM_LATENCY, "MXM_LATENCY", d_out, (1 << INT32_PLANES) - 1)
    x = [s8(b) for b in tag(0, salt=30)]                  # x of the issue cycle (lanes < 0 too)
    p = [sum(w * v for w, v in zip(row, x)) & 0xFFFFFFFF for row in MXM_W]
    expected = [vec([(pr >> (8 * b)) & 0xFF for pr in p]) for b in range(INT32_PLANES)]
    assert values[:INT32_PLANES] == expected, (
        f"{what}: drove planes {[hex(v) for v in values[:INT32_PLANES]]}, expected W.x of the x sampled on the "
        f"issue cycle, {[hex(v) for v in expected]}")


@pytest.mark.parametrize("dtype", ["fp8", "int8"])
def test_mxm_nan_flag(dtype):
    """``MXM.nan`` (``Status.NAN_OPERAND``): on an FP8 tile high on issue + 2 of exactly the
    MMs that multiply a NaN code (0x7F, 0xFF) of x (from its stream or from an x slot) or
    of the active weight block, low on every other cycle (a NaN in the shadow block does
    not count); on an int8 tile the same instructions (0x7F is 127 there) never raise it.
    The expected cycles come from the golden model's ``has_nan`` of the same operands."""
    from firmware_gen.golden.archmodel import has_nan
    cfg = CFG.with_overrides(["streams=6", f"mxm_dtype={dtype}"])
    mxm = MXM(cfg, "W")
    d = WEST                                           # MXM_W reads the west-flowing streams
    one = 0x38 if dtype == "fp8" else 1                # E4M3 1.0, int8 1
    finite = [[one] * L for _ in range(L)]
    w_nan = [row[:] for row in finite]
    w_nan[L - 1][1] = 0xFF                             # one NaN code in the last row
    x_ok, x_7f, x_ff = [one, 2, 3, 4], [one, 2, 0x7F, 4], [0xFF, 2, 3, one]
    xs = 4                                             # x's stream (LW uses streams 0..L-1)
    # (cycle, port, instruction, {stream: lanes}) and what the MM multiplies: (x, block)
    LW, MM, LX = "ld_issue", "issue", "ld_issue"
    sched = [
        (0, LW, Instr.lw(0, d, n=L, delay=0), {r: finite[r] for r in range(L)}, None),
        (1, MM, Instr.mm(xs, d, acc=0), {xs: x_ok}, (x_ok, finite)),
        (2, MM, Instr.mm(xs, d, acc=1), {xs: x_7f}, (x_7f, finite)),
        (3, MM, Instr.mm(xs, d, acc=2), {xs: x_ok}, (x_ok, finite)),
        (4, MM, Instr.mm(xs, d, acc=3), {xs: x_ff}, (x_ff, finite)),
        (5, LX, Instr.lx(xs, d, slot=1), {xs: x_ff}, None),
        (6, LX, Instr.lx(xs, d, slot=2), {xs: x_ok}, None),
        (7, MM, Instr.mm(0, d, acc=0, slot=1, flags=MMFlag.XBUF), {}, (x_ff, finite)),
        (8, MM, Instr.mm(0, d, acc=1, slot=2, flags=MMFlag.XBUF), {}, (x_ok, finite)),
        (9, LW, Instr.lw(0, d, n=L, delay=0), {r: w_nan[r] for r in range(L)}, None),   # into the shadow
        (9, MM, Instr.mm(xs, d, acc=2), {xs: x_ok}, (x_ok, finite)),                    # the old block
        (10, MM, Instr.mm(xs, d, acc=3), {xs: x_ok}, (x_ok, w_nan)),                    # the new block
        (12, MM, Instr.mm(xs, d, acc=0), {xs: x_7f}, (x_7f, w_nan)),
    ]
    assert all(w in (LW, LX) for _, w, i, _, _ in sched if i.op != Op.MM)
    end = 16
    expected = [0] * end
    for c, _, _, _, operands in sched:
        if operands is not None:
            x, block = operands
            expected[c + 2] = int(has_nan(x, dtype) or any(has_nan(row, dtype) for row in block))
    seen = []

    simulate(mxm, mxm_bench(mxm, cfg, [e[:4] for e in sched], end, lambda ctx, j: seen.append(ctx.get(mxm.nan))))
    if dtype == "int8":
        assert not any(expected)
    assert sum(expected) == (5 if dtype == "fp8" else 0)
    bad = [(j, e, g) for j, (e, g) in enumerate(zip(expected, seen)) if e != g]
    assert not bad, (f"MXM_W ({dtype}) nan: (cycle, expected, measured) {bad}; "
                     f"measured per cycle {seen}, expected {expected}")


def test_mxm_partial_lw_keeps_the_other_rows():
    """``LW rows=R`` loads rows 0..R-1 of the shadow block (n per cycle) and swaps it in
    after ceil(R/n) cycles; rows R.. keep what that buffer held.  The MMs' products are
    checked against the golden model's MXM (``archmodel._Mxm``) fed the same streams."""
    from firmware_gen.golden.archmodel import _Mxm
    cfg = CFG.with_overrides(["streams=6", "mxm_partial_lw=1"])    # (tiny loads whole blocks only)
    mxm, d = MXM(cfg, "W"), WEST
    blocks = {k: [tag(10 * n + r, salt=7) for r in range(L)] for n, k in enumerate("ACBD")}
    xs = L                                             # x's stream, above the weight streams
    x = tag(1, salt=3)
    # (cycle, port, instruction, {stream: lanes}); LW streams carry block rows in order
    sched = [(0, "ld_issue", Instr.lw(0, d, n=L), {r: blocks["A"][r] for r in range(L)}),
             (1, "ld_issue", Instr.lw(0, d, n=L), {r: blocks["C"][r] for r in range(L)}),
             (2, "ld_issue", Instr.lw(0, d, n=2, rows=2), {0: blocks["B"][0], 1: blocks["B"][1]}),
             (3, "issue", Instr.mm(xs, d, acc=0, out=0, flags=MMFlag.EMIT), {xs: x}),
             (4, "ld_issue", Instr.lw(0, d, n=1, rows=3), {0: blocks["D"][0]}),
             (5, None, None, {0: blocks["D"][1]}),
             (6, None, None, {0: blocks["D"][2]}),
             (6, "issue", Instr.mm(xs, d, acc=1, out=0, flags=MMFlag.EMIT), {xs: x}),
             (7, "issue", Instr.mm(xs, d, acc=2, out=0, flags=MMFlag.EMIT), {xs: x})]
    end = 7 + isa.MXM_LATENCY + 2
    # The golden model's loader on the same stream values gives the active block of each MM.
    gold, want = _Mxm(cfg, "MXM_W"), {}
    for j in range(end):
        now = [e for e in sched if e[0] == j]
        taps = {s: v for *_, t in now for s, v in t.items()}
        for _, port, ins, _ in now:
            if port == "issue":
                w = gold.weights[gold.active]
                p = [sum(int(a) * s8(b) for a, b in zip(row, x)) & 0xFFFFFFFF for row in w]
                want[j + isa.MXM_LATENCY] = [vec([(pr >> (8 * b)) & 0xFF for pr in p]) for b in range(INT32_PLANES)]
        for _, port, ins, _ in now:
            if port == "ld_issue":
                gold.issue_lw(j, ins, f"cycle {j}")
        gold.load_step(j, lambda dd, s, n: np.array([[b & 0xFF for b in taps.get(k, [0] * L)]
                                                     for k in range(s, s + n)], np.uint8))
    seen = {}

    def watch(ctx, j):
        if ctx.get(mxm.drive.east.mask):
            seen[j] = [ctx.get(drive_value(mxm.drive.east, s)) for s in range(INT32_PLANES)]

    simulate(mxm, mxm_bench(mxm, cfg, sched, end, watch))
    assert len(want) == 3 and sorted(seen) == sorted(want), f"EMIT drives on cycles {sorted(seen)}, expected {sorted(want)}"
    bad = {j: (seen[j], want[j]) for j in want if seen[j] != want[j]}
    assert not bad, f"MM products (cycle: measured, golden model) differ: {bad}"
    # The golden model's view is the ISA's: the second MM saw rows B0 B1 A2 A3, the third D0 D1 D2 C3.
    assert [list(r) for r in gold.weights[gold.active]] == [[s8(b) for b in row] for row in
                                                           blocks["D"][:3] + blocks["C"][3:]]


@pytest.mark.parametrize("direction", [EAST, WEST], ids=DIR_NAME.get)
def test_c2c_recv_latency(direction):
    """RECV pops the link's receive buffer on its issue cycle and drives the popped vector
    on issue + C2C_LATENCY.  ``C2cSlice`` stands alone: its ``recv_data`` is an input, so
    the testbench plays the link's receiver as ``LinkRx`` documents it (the popped vector
    from the cycle after ``recv``, held until the next one)."""
    from hdl.units.c2c_slice import C2cSlice

    cfg = dataclasses.replace(CFG, links=1)
    c2c = C2cSlice(cfg, links=[0])
    old, new = vec(tag(1, salt=11)), vec(tag(2, salt=5))
    stream = 2
    instr = Instr.compute(Op.RECV, stream, direction, link=0)
    out = {"pops": []}
    state = {"pending": False}

    def link(ctx, j):
        if state["pending"]:
            ctx.set(c2c.recv_data[0], new)
        state["pending"] = bool(ctx.get(c2c.recv[0]))
        if state["pending"]:
            out["pops"].append(j)

    async def bench(ctx):
        ctx.set(c2c.recv_data[0], old)
        out["seen"] = await issue_and_watch(ctx, c2c, instr, link)

    simulate(c2c, bench)
    what = f"C2C {instr}"
    assert out["pops"] == [0], f"{what}: expected the link popped on the issue cycle 0, measured on {out['pops']}"
    values = check_drive(what, out["seen"], isa.C2C_LATENCY, "C2C_LATENCY", direction, 1 << stream)
    assert values[stream] == new, (
        f"{what}: drove {values[stream]:#x} on cycle {isa.C2C_LATENCY}, expected the popped vector {new:#x}")


# ---- base registers (docs/isa.md, "Base registers") -------------------------------------
def base_file(regs) -> int:
    """The slices' ``bases`` input: ``{register: (offset, on)}``, the others offset 0, on."""
    width = isa.BASE_OFFSET_BITS + 1          # hdl.units.layouts.base_reg_layout: offset, then off
    return sum((off | (0 if on else 1) << isa.BASE_OFFSET_BITS) << (width * r) for r, (off, on) in regs.items())


def test_mem_base_relocates_skips_and_faults():
    """READ and WRITE at ``a + offset``; with the register off a READ drives a zero vector
    on issue + READ_LATENCY (same stream) and a WRITE stores nothing and is no event;
    ``skip`` marks both on the issue cycle; a relocated address beyond ``mem_depth`` sets
    ``addr_fault`` and the READ drives nothing; an off register never faults."""
    mem = MemSlice(CFG)
    D = CFG.mem_depth
    stored = {a: vec(tag(a, salt=3)) for a in (5, 8)}
    out = {"events": [], "skips": []}
    wpv = CFG.words_per_vector

    def watch(ctx, j):
        set_taps(ctx, mem, EAST, {2: vec(tag(j, salt=9))})
        if ctx.get(mem.write_event):
            out["events"].append((j, ctx.get(mem.write_addr)))
        if ctx.get(mem.skip):
            out["skips"].append(j)

    async def read_row(ctx, row):
        ctx.set(mem.run, 0)
        ctx.set(mem.host.sel, 1)
        ctx.set(mem.host.re, 1)
        words = []
        for w in range(wpv):
            ctx.set(mem.host.addr, row * wpv + w)
            await ctx.tick()
            words.append(ctx.get(mem.host.rdata))
        ctx.set(mem.host.sel, 0)
        ctx.set(mem.host.re, 0)
        ctx.set(mem.run, 1)
        return sum(v << (32 * w) for w, v in enumerate(words))

    async def bench(ctx):
        for a, v in stored.items():
            await host_write(ctx, mem.host, [(v >> (32 * w)) & 0xFFFFFFFF for w in range(wpv)], base=a * wpv)
        ctx.set(mem.bases.as_value(), base_file({1: (3, True), 2: (D - 1, False), 3: (D - 2, True)}))
        ctx.set(mem.run, 1)
        for key, ins in (("reloc", Instr.read(1, EAST, 5, base=1)), ("skip", Instr.read(1, WEST, 5, base=2)),
                         ("off_far", Instr.read(1, EAST, D - 1, base=2)), ("plain", Instr.read(1, EAST, 8))):
            out["skips"].clear()
            out[key] = (await issue_and_watch(ctx, mem, ins, watch), list(out["skips"]), ctx.get(mem.addr_fault))
        out["events"].clear()
        out["skips"].clear()
        await issue_and_watch(ctx, mem, Instr.write(2, EAST, 9, base=1), watch, after=1)
        out["w_reloc"] = (list(out["events"]), list(out["skips"]), await read_row(ctx, 12))
        out["events"].clear()
        out["skips"].clear()
        await issue_and_watch(ctx, mem, Instr.write(2, EAST, 20, base=2), watch, after=1)
        out["w_skip"] = (list(out["events"]), list(out["skips"]), await read_row(ctx, (20 + D - 1) % D),
                         await read_row(ctx, 20), ctx.get(mem.addr_fault))
        out["fault"] = (await issue_and_watch(ctx, mem, Instr.read(0, EAST, 2, base=3)), ctx.get(mem.addr_fault))

    simulate(mem, bench)
    seen, skips, fault = out["reloc"]
    values = check_drive("READ E1, 5, base=1 (offset 3)", seen, isa.READ_LATENCY, "READ_LATENCY", EAST, 1 << 1)
    assert values[1] == stored[8] and skips == [] and not fault, (
        f"READ E1, 5, base=1 (offset 3) must drive row 8 ({stored[8]:#x}), drove {values[1]:#x}; skips {skips}")
    seen, skips, fault = out["skip"]
    values = check_drive("READ W1, 5, base=2 (off)", seen, isa.READ_LATENCY, "READ_LATENCY", WEST, 1 << 1)
    assert values[1] == 0 and skips == [0] and not fault, (
        f"READ W1, 5 with its register off must drive zeros and skip on its issue cycle; drove {values[1]:#x}, "
        f"skip on cycles {skips}")
    seen, skips, fault = out["off_far"]
    check_drive("READ E1, D-1, base=2 (off, offset D-1)", seen, isa.READ_LATENCY, "READ_LATENCY", EAST, 1 << 1)
    assert skips == [0] and not fault, "an off register must not fault, whatever its offset"
    seen, skips, fault = out["plain"]
    values = check_drive("READ E1, 8", seen, isa.READ_LATENCY, "READ_LATENCY", EAST, 1 << 1)
    assert values[1] == stored[8] and skips == [] and not fault, "base 0 reads the unrelocated address"
    events, skips, row = out["w_reloc"]
    assert events == [(isa.WRITE_LATENCY, 12)] and skips == [] and row == vec(tag(0, salt=9)), (
        f"WRITE E2, 9, base=1 (offset 3) must store row 12 on its issue cycle: events {events}, row {row:#x}")
    events, skips, row, row_plain, fault = out["w_skip"]
    assert events == [] and skips == [0] and row == 0 and row_plain == 0 and not fault, (
        f"WRITE with its register off must store nothing and be no event: events {events}, skip on {skips}")
    seen, fault = out["fault"]
    assert seen == [] and fault, (
        f"READ E0, 2, base=3 (offset {D - 2}: row {D}, beyond the depth) must drive nothing and set addr_fault; "
        f"drove {[(j, d, m) for j, d, m, _ in seen]}, addr_fault {fault}")


def test_vxm_base_relocates_skips_faults_and_selects_tables():
    """VOP reads parameter entry ``param + offset``; lane l's TABLE step looks up the table
    the entry's ``table`` field names; with the register off, or the entry beyond
    ``vxm_param_depth`` (``param_fault``, sticky until start), the VOP drives a zero
    vector on the same stream and cycle; ``skip`` marks only the off case."""
    from lpu_arch.vxm import IDENTITY, PARAM_FIELDS, PARAM_WORDS, lane_words

    vxm = VXM(CFG)
    P, T = CFG.vxm_param_depth, CFG.vxm_tables
    assert T >= 4, "the test gives every lane its own table"
    fields = list(PARAM_FIELDS)
    bias = {1: 0, 5: 7}                      # entry -> bias_a of every lane
    tables = {t: [(i + 17 * t) & 0xFF for i in range(256)] for t in range(T)}    # table 0: the identity

    def lane(entry, l):
        v = list(IDENTITY)
        v[fields.index("bias_a")] = bias[entry]
        v[fields.index("table")] = l % T if entry == 5 else 0
        return lane_words(v)

    o = 1
    ins = {"on": Instr.vop(0, EAST, param=1, out=o, flags=VopFlag.TABLE | VopFlag.OUT_E, base=1),
           "off": Instr.vop(0, EAST, param=1, out=o, flags=VopFlag.TABLE | VopFlag.OUT_E, base=2),
           "beyond": Instr.vop(0, EAST, param=P - 4 + 1, out=o, flags=VopFlag.TABLE | VopFlag.OUT_E, base=1)}
    out = {}

    def taps(ctx, j):
        a = [v & 0xFFFFFFFF for v in vxm_a(j)]
        set_taps(ctx, vxm, EAST, {b: vec([(v >> (8 * b)) & 0xFF for v in a]) for b in range(INT32_PLANES)})

    async def bench(ctx):
        for e in bias:
            words = [w for l in range(L) for w in lane(e, l)]
            await host_write(ctx, vxm.host_param, words, base=e * L * PARAM_WORDS)
        await host_write(ctx, vxm.host_table, [w for t in range(T) for w in tables[t]])
        ctx.set(vxm.bases.as_value(), base_file({1: (4, True), 2: (0, False)}))
        ctx.set(vxm.run, 1)
        for key, instr in ins.items():
            skips = []

            def watch(ctx, j):
                taps(ctx, j)
                if ctx.get(vxm.skip):
                    skips.append(j)
            out[key] = (await issue_and_watch(ctx, vxm, instr, watch), skips, ctx.get(vxm.param_fault))
        ctx.set(vxm.start, 1)
        await ctx.tick()
        ctx.set(vxm.start, 0)
        out["cleared"] = ctx.get(vxm.param_fault)

    simulate(vxm, bench)
    a0 = [sat8(v + 7) for v in vxm_a(0)]                    # entry 1 + 4 = 5: bias 7
    want = [s8(tables[l % T][a & 0xFF]) for l, a in enumerate(a0)]
    seen, skips, fault = out["on"]
    check_out_drives("VXM", ins["on"], seen, CFG.vxm_latency, "vxm_latency")
    got = [s8(b) for b in lanes_of(seen[0][3][o])]
    assert got == want and skips == [] and not fault, (
        f"VOP param=1, base=1 (offset 4: entry 5, bias 7, lane l's table l) drove {got}, expected {want}")
    for key in ("off", "beyond"):
        seen, skips, fault = out[key]
        check_out_drives("VXM", ins[key], seen, CFG.vxm_latency, "vxm_latency")
        assert seen[0][3][o] == 0, f"VOP ({key}) must drive a zero vector, drove {lanes_of(seen[0][3][o])}"
        assert skips == ([0] if key == "off" else []), f"VOP ({key}): skip on cycles {skips}"
        assert fault == (key == "beyond"), f"VOP ({key}): param_fault {fault}"
    assert not out["cleared"], "a start must clear param_fault"


@pytest.mark.parametrize("d", [1, 4, 5, 20, 40, 80, 160, 1600])
def test_divmod_const_is_exact(d):
    """hdl.units.vxm.divmod_const (the host's VXM parameter address split): x // d and x % d for
    every 12-bit x, in Amaranth's simulator."""
    from amaranth import Module, Signal
    from amaranth.sim import Simulator

    from hdl.units.vxm import divmod_const
    m = Module()
    x = Signal(12)
    q, r = divmod_const(m, x, d, "t")
    sim = Simulator(m)
    bad = []

    async def bench(ctx):
        for v in range(1 << 12):
            ctx.set(x, v)
            if (ctx.get(q), ctx.get(r)) != divmod(v, d):
                bad.append((v, ctx.get(q), ctx.get(r)))

    sim.add_testbench(bench)
    sim.run()
    assert not bad, bad[:5]


@pytest.mark.parametrize("flags", [0, VopFlag.TABLE, VopFlag.TABLE | VopFlag.GATE, VopFlag.ADD, VopFlag.GATE],
                         ids=["plain", "table", "table-gate", "add", "gate"])
def test_fp8_vxm_matches_the_golden_model(flags):
    """An FP8 tile's VXM (6 planes, 48-bit adds, E4M3 rounding, code tables, exact gate)
    against the golden model's functions on random accumulators (up to 47 bits and the
    wrap of the bias add), random per-lane parameters and a random table: the driven codes
    equal ``requantise_fp8`` / ``apply_table_fp8`` / ``gate_fp8`` of the same inputs."""
    import numpy as np

    from firmware_gen.golden.fp8_quantise import fp8_bias, gate_fp8, requantise_fp8
    from firmware_gen.golden.quantise import add_wrap
    from lpu_arch.vxm import IDENTITY, MULT_MAX, PARAM_FIELDS, PARAM_WORDS, lane_words
    cfg = TileConfig.tiny().with_overrides(["streams=6", "mxm_dtype=fp8"])
    P, AB = cfg.acc_planes, cfg.acc_bits
    vxm = VXM(cfg)
    rng = np.random.default_rng(int(flags) + 1)
    fields = list(PARAM_FIELDS)
    runs = []
    for k in range(6):
        lanes = []
        for _ in range(L):
            v = list(IDENTITY)
            for name, lo, hi in (("bias_a", -(1 << 31), (1 << 31) - 1), ("bias_b", -(1 << 20), 1 << 20),
                                 ("m_a", 1, MULT_MAX), ("m_b", 1, MULT_MAX), ("m_c", 1, MULT_MAX),
                                 ("s_a", 10, 46), ("s_b", 10, 46), ("s_c", 0, 30)):
                v[fields.index(name)] = int(rng.integers(lo, hi, endpoint=True))
            lanes.append(v)
        scale = [1 << 46, 1 << 30, 1 << 12][k % 3]           # big, middling and small accumulators
        A = [int(a) for a in rng.integers(-scale, scale, L)]
        B = [int(b) for b in rng.integers(-scale, scale, L)]
        runs.append((lanes, A, B))
    table = [int(c) for c in rng.integers(0, 256, 256)]
    o = 5
    instr = Instr.vop(0, EAST, param=1, out=o, flags=flags | VopFlag.OUT_E)
    got = []

    async def bench(ctx):
        await host_write(ctx, vxm.host_table, table)
        ctx.set(vxm.run, 0)
        for lanes, A, B in runs:
            ctx.set(vxm.run, 0)
            await host_write(ctx, vxm.host_param, [w for v in lanes for w in lane_words(v)], base=1 * L * PARAM_WORDS)
            ctx.set(vxm.run, 1)

            def taps(ctx, j, A=A, B=B):           # A east-flowing, B west-flowing, on the issue cycle
                for port, vals in ((vxm.tap.east, A), (vxm.tap.west, B)):
                    u = [v & ((1 << 8 * P) - 1) for v in vals]
                    for st in range(cfg.streams):
                        ctx.set(port[st], vec([(v >> (8 * st)) & 0xFF for v in u]) if j == 0 and st < P else 0)
            seen = []
            for j in range(-1, cfg.vxm_latency + 3):
                ctx.set(vxm.issue.valid, int(j == 0))
                ctx.set(vxm.issue.instr.as_value(), instr.encode() if j == 0 else 0)
                taps(ctx, j)
                if ctx.get(vxm.drive.east.mask):
                    seen.append((j, ctx.get(vxm.drive.east.mask), ctx.get(drive_value(vxm.drive.east, o))))
                await ctx.tick()
            ctx.set(vxm.issue.valid, 0)
            assert [(j, m) for j, m, _ in seen] == [(cfg.vxm_latency, 1 << o)], seen
            got.append(lanes_of(seen[0][2]))

    simulate(vxm, bench)
    for (lanes, A, B), g in zip(runs, got):
        f = {n: np.array([v[fields.index(n)] for v in lanes]) for n in fields}
        A, B = np.array(A), np.array(B)
        if flags & VopFlag.ADD:
            A = add_wrap(A, B, 48)
        a = requantise_fp8(add_wrap(A, fp8_bias(f["bias_a"]), 48), f["m_a"], f["s_a"])
        if flags & VopFlag.TABLE:
            a = np.array(table, np.uint8)[a]
        if flags & VopFlag.GATE:
            b = requantise_fp8(add_wrap(B, fp8_bias(f["bias_b"]), 48), f["m_b"], f["s_b"])
            a = gate_fp8(a, b, f["m_c"], f["s_c"])
        assert g == [int(c) for c in a], (flags, g, list(a))
    assert AB == 48
