"""Junk bits: every bit of an instruction word that its opcode does not use must be 0.

What is tested
--------------
* ``lpu_arch.isa.USED_FIELDS`` (the bits each opcode uses, per field) against the
  issue's list: READ/WRITE use no ``count``/``delay``, NOP only ``count``, REPEAT no
  ``stream``/``dir``, HALT nothing; for the compute instructions the table is OPERANDS'
  operand bits (plus stream/dir and the known flags).
* Pure Python: for every opcode and every bit outside ``USED_FIELDS`` (a whole unused
  field, the bits above a named operand's width, an unknown flag), a legal word of that
  opcode with that one bit set fails ``Instr.decode`` with an IsaError naming the opcode,
  the field and the bit; ``Program.from_images`` (the loader) names the word too.  Legal
  words (all operands 0 and every used bit set) round-trip through decode/encode and the
  text form, and every program the compilers emit uses no junk bit.
* Amaranth simulator: a word with a junk bit loaded through a queue's host port (raw
  64-bit words: ``Instr.encode`` would refuse them) raises ``illegal`` and halts the
  queue exactly as an opcode the slice does not execute does (``tests/hdl/test_units.py``,
  ``test_queue_illegal_opcode_halts``): in ``[K, NOP 2, bad, K, HALT]`` the bad word is
  reached on cycle 3, nothing but K issues, and ``illegal`` and ``halted`` are 1 from
  cycle 4 on.  The same program with the legal word (every used bit set) issues on the
  cycles the ISA's timing rules give and raises nothing.
"""

import dataclasses
import re

import pytest
from amaranth.sim import Simulator

from firmware_gen.compiler.ffn import compile_ffn
from firmware_gen.compiler.ffn_example import example_ffn
from firmware_gen.program import Program
from hdl.units.icu import InstructionQueue
from lpu_arch import TileConfig
from lpu_arch.isa import (BASE_BITS, EAST, FIELD, FIELDS, FLAGS, NO_STREAM_OPS, OPERANDS, SLICE_OPS,
                          USED_FIELDS, WEST, Instr, IsaError, MMFlag, Op, VopFlag, field_mask, used_word_mask)

CFG = TileConfig.tiny()
WORD_MASK = (1 << 64) - 1
JUNK_FIELDS = [name for name, *_ in FIELDS if name != "op"]


# ---- words -----------------------------------------------------------------------------
def base_word(op: Op) -> int:
    """A legal word of ``op`` with as few bits set as its rules allow."""
    if op == Op.NOP:
        return Instr.nop(1).encode()
    if op == Op.REPEAT:
        return Instr.repeat(1, 1, 0).encode()
    if op == Op.LW:
        return Instr.lw(0, EAST, n=1).encode()
    return int(op)


def full_word(op: Op) -> int:
    """A legal word of ``op`` with every bit it uses set (VOP: not ADD with GATE)."""
    word = used_word_mask(op) & ~field_mask("op") | int(op)
    if op == Op.VOP:
        word &= ~(int(VopFlag.ADD) << FIELD["aux"][0])
    return word


def junk_bits(op: Op):
    """``(field, bit within the field)`` of every bit ``op`` does not use."""
    for name in JUNK_FIELDS:
        used = USED_FIELDS[op].get(name, 0)
        for b in range(FIELD[name][1]):
            if not used >> b & 1:
                yield name, b


def junk_word(op: Op, name: str, b: int, base=None) -> int:
    return (base_word(op) if base is None else base) | 1 << (FIELD[name][0] + b)


# ---- the table -------------------------------------------------------------------------
def test_used_fields_table():
    """The fields the issue lists as unused are unused; compute ops follow OPERANDS."""
    assert set(USED_FIELDS) == set(Op)
    full = {name: field_mask(name) for name in JUNK_FIELDS}
    assert USED_FIELDS[Op.HALT] == {}
    assert USED_FIELDS[Op.NOP] == {"count": full["count"]}
    assert USED_FIELDS[Op.REPEAT] == {"addr": full["addr"], "count": full["count"], "delay": full["delay"]}
    for op in (Op.READ, Op.WRITE):       # the base register operand is delay[0:BASE_BITS]
        assert USED_FIELDS[op] == {"dir": 1, "stream": full["stream"], "addr": full["addr"],
                                   "delay": (1 << BASE_BITS) - 1}
    for op, spec in OPERANDS.items():
        want = {} if op in NO_STREAM_OPS else {"dir": 1, "stream": full["stream"]}
        for field, lsb, width in spec.values():
            want[field] = want.get(field, 0) | ((1 << width) - 1) << lsb
        if op in FLAGS:
            want["aux"] = int(sum(FLAGS[op]))
        assert USED_FIELDS[op] == want, op.name
    assert USED_FIELDS[Op.MM]["count"] == 0x7F          # MM's out is count[0:7], a stream index
    for op in Op:
        mask = used_word_mask(op)
        assert mask & field_mask("op") == field_mask("op") and mask <= WORD_MASK


# ---- assembler / disassembler / loader -------------------------------------------------
@pytest.mark.parametrize("op", list(Op), ids=lambda o: o.name)
def test_every_junk_bit_is_rejected_by_decode(op):
    """Each bit outside USED_FIELDS, set alone in a legal word (and in a word with every
    used bit set), fails decode with a message naming the opcode, the field and the bit."""
    n = 0
    for name, b in junk_bits(op):
        for base in (base_word(op), full_word(op)):
            word = junk_word(op, name, b, base)
            with pytest.raises(IsaError) as e:
                Instr.decode(word)
            msg = str(e.value)
            assert re.search(rf"\b{op.name}\b", msg) and re.search(rf"\b{name}\b", msg) \
                and re.search(rf"\b{1 << b:#x}\b", msg), (
                f"{op.name} word {word:#018x} (junk bit {b} of {name}): message {msg!r}")
        n += 1
    assert n == 64 - bin(used_word_mask(op)).count("1")


@pytest.mark.parametrize("op", list(Op), ids=lambda o: o.name)
def test_legal_words_round_trip(op):
    for word in (base_word(op), full_word(op)):
        ins = Instr.decode(word)
        assert ins.encode() == word, f"{op.name}: {word:#018x} -> {ins} -> {ins.encode():#018x}"
        assert Instr.parse(str(ins)) == ins


@pytest.mark.parametrize("make, words", [
    (lambda: Instr(Op.READ, stream=1, addr=5, count=3), "READ uses no bits 0x3 of field count (they must be 0)"),
    (lambda: Instr(Op.WRITE, addr=5, aux=0x80), "WRITE takes no flags"),
    (lambda: Instr(Op.NOP, count=2, stream=4), "NOP uses no bits 0x4 of field stream"),
    (lambda: Instr(Op.NOP, count=2, dir=1), "NOP uses no bits 0x1 of field dir"),
    (lambda: Instr(Op.NOP, count=2, addr=1 << 19), "NOP uses no bits 0x80000 of field addr"),
    (lambda: Instr(Op.NOP, count=2, delay=1), "NOP uses no bits 0x1 of field delay"),
    (lambda: Instr(Op.REPEAT, count=2, delay=1, addr=-1, stream=1), "REPEAT uses no bits 0x1 of field stream"),
    (lambda: Instr(Op.REPEAT, count=2, delay=1, dir=1), "REPEAT uses no bits 0x1 of field dir"),
    (lambda: Instr(Op.HALT, count=1), "HALT uses no bits 0x1 of field count"),
    (lambda: Instr(Op.HALT, addr=2), "HALT uses no bits 0x2 of field addr"),
    (lambda: Instr(Op.MM, count=0x80), "MM uses no bits 0x80 of field count"),
    (lambda: Instr(Op.MM, aux=0x8), "MM flags 0x8 set unknown bits 0x8 of field aux"),
    (lambda: Instr(Op.DESKEW, dir=1), "DESKEW uses no bits 0x1 of field dir"),
])
def test_messages(make, words):
    """The checks behind the constructors and the parser (``checked``) name the field."""
    with pytest.raises(IsaError, match=words.replace("(", r"\(").replace(")", r"\)")):
        make().checked()


def test_loader_names_the_word():
    """``Program.from_images`` (the loader and disassembler path) rejects a junk bit in a
    data word and in the terminating HALT, naming the slice and the word."""
    read = Instr.read(0, EAST, 1).encode()
    halt = Instr.halt().encode()
    with pytest.raises(IsaError, match=r"READ uses no bits 0x1 of field count .* at MEM_E0 word 1"):
        Program.from_images(CFG, {"MEM_E0": [Instr.nop(2).encode(), read | 1 << FIELD["count"][0], halt]})
    with pytest.raises(IsaError, match=r"HALT uses no bits 0x10 of field stream .* at MEM_E0 word 1"):
        Program.from_images(CFG, {"MEM_E0": [read, halt | 0x10 << 7]})
    assert Program.from_images(CFG, {"MEM_E0": [read, halt]}).queues["MEM_E0"] == [Instr.read(0, EAST, 1)]


def _compiled_programs():
    from firmware_gen.compiler.tray import compile_ffn_tray
    from sim.flows.c2c import c2c_config

    from tests.helpers import random_schedule, sxm_cases, sxm_program
    for kind, H, I, batch in (("swiglu", 6, 10, 2), ("classic", 5, 7, 1)):
        ex = example_ffn(kind, H, I, batch, seed=3)
        yield f"ffn-{kind}", compile_ffn(ex.spec, ex.x_int8, CFG)[0]
    ex = example_ffn("swiglu", 8, 16, 1, seed=2)
    for t, p in enumerate(compile_ffn_tray(ex.spec, ex.x_int8, c2c_config(), 2)[0]):
        yield f"tray-tile{t}", p
    yield "mem-schedule", random_schedule(CFG, 6, seed=1).program()
    yield "sxm", sxm_program(CFG, sxm_cases(CFG))[0]


def test_compiled_programs_use_no_junk_bits():
    """Every word the compilers and schedulers emit fits its opcode's mask and reloads."""
    seen = set()
    for what, prog in _compiled_programs():
        images = prog.images()
        for name, words in images.items():
            for i, w in enumerate(words):
                op = Op(w & field_mask("op"))
                seen.add(op)
                assert w & ~used_word_mask(op) == 0, f"{what} {name} word {i}: {Instr.decode(w)} {w:#018x}"
        assert Program.from_images(prog.config, images).images() == images, what
    assert {Op.READ, Op.WRITE, Op.LW, Op.MM, Op.VOP, Op.NOP, Op.REPEAT, Op.HALT, Op.SENDM, Op.RECV} <= seen


# ---- hardware --------------------------------------------------------------------------
# One data instruction per slice kind, issued first in every program (cycle 0).
KIND_FIRST = {
    "MEM": Instr.read(1, WEST, 7),
    "VXM": Instr.vop(0, EAST, param=3, out=1, flags=VopFlag.OUT_E),
    "SXM": Instr.compute(Op.TRI, 2, EAST, row=1),
    "MXM": Instr.mm(0, WEST, acc=1, flags=MMFlag.XBUF),
    "MXL": Instr.lx(0, WEST, slot=2),
    "C2C": Instr.compute(Op.RECV, 3, EAST, link=0),
}
BAD_AT = 3          # [K, NOP 2, word, ...]: K on cycle 0, NOP on 1..2, the word on 3
CYCLES = 10


def hw_junk_bits(op):
    """The lowest and the highest junk bit of every field (one simulation run each)."""
    out = []
    for name in JUNK_FIELDS:
        bits = [b for f, b in junk_bits(op) if f == name]
        out += sorted({(name, bits[0]), (name, bits[-1])}) if bits else []
    return out


def expected_issues(program):
    """Issues ``[(cycle, op, stream, dir, addr)]`` by the ISA's timing rules (one cycle per
    data instruction, NOP n n cycles, REPEAT repetition k at s + k*d - 1) up to HALT."""
    t, last, issues = 0, None, []
    for ins in program:
        if ins.op == Op.HALT:
            break
        if ins.op == Op.NOP:
            t += ins.count
        elif ins.op == Op.REPEAT:
            for k in range(1, ins.count + 1):
                addr = (last.addr + k * ins.addr) & field_mask("addr")
                issues.append((t + k * ins.delay - 1, last.op, last.stream, last.dir, addr))
            last = dataclasses.replace(last, addr=(last.addr + ins.count * ins.addr) & field_mask("addr"))
            t += ins.count * ins.delay
        else:
            issues.append((t, ins.op, ins.stream, ins.dir, ins.addr))
            last, t = ins, t + 1
    return issues, t


def run_queue(kind, programs, cycles):
    """For each program (64-bit words): stop, load it through the host port, start as the
    tile does (the queues' start pulse with run low, the priming cycle, then run high) and
    watch ``cycles`` cycles from the first running cycle.  One simulation for all of them."""
    icu = InstructionQueue(CFG, kind)
    traces = []

    async def bench(ctx):
        for words in programs:
            ctx.set(icu.run, 0)
            ctx.set(icu.host.sel, 1)
            ctx.set(icu.host.we, 1)
            for a, w in enumerate(h for word in words for h in (word & 0xFFFFFFFF, word >> 32)):
                ctx.set(icu.host.addr, a)
                ctx.set(icu.host.wdata, w)
                await ctx.tick()
            ctx.set(icu.host.sel, 0)
            ctx.set(icu.host.we, 0)
            ctx.set(icu.start, 1)
            await ctx.tick()
            ctx.set(icu.start, 0)
            await ctx.tick()                    # the queue's priming cycle (run still low)
            ctx.set(icu.run, 1)
            tr = {"issues": [], "halted": [], "illegal": []}
            for c in range(cycles):
                if ctx.get(icu.issue.valid):
                    i = icu.issue.instr
                    tr["issues"].append((c, Op(ctx.get(i.op)), ctx.get(i.stream), ctx.get(i.dir), ctx.get(i.addr)))
                tr["halted"].append(ctx.get(icu.halted))
                tr["illegal"].append(ctx.get(icu.illegal))
                await ctx.tick()
            traces.append(tr)

    sim = Simulator(icu)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    return traces


def legal_hw_word(op):
    """A legal word of ``op`` with every bit it uses set, short enough to watch (a base
    operand names the tile's last register: one beyond ``base_regs`` is illegal)."""
    from hdl.units.icu import legal_word_mask
    if op == Op.NOP:
        return Instr.nop(3).encode()
    if op == Op.REPEAT:
        return Instr.repeat(2, 3, -1).encode()     # stride -1: every addr bit set
    return full_word(op) & legal_word_mask(CFG, op)


@pytest.mark.parametrize("kind", list(SLICE_OPS))
def test_queue_flags_junk_bits_illegal(kind):
    """For every opcode legal at the slice kind, each field's lowest and highest junk bit
    raises ``illegal`` and halts the queue on cycle BAD_AT + 1 (the illegal-opcode rule);
    the word does not issue.  The legal word (every used bit set) issues as the ISA says."""
    first = KIND_FIRST[kind]
    k, nop, halt = first.encode(), Instr.nop(2).encode(), Instr.halt().encode()
    cases, programs = [], []
    for op in sorted(SLICE_OPS[kind]):
        for name, b in hw_junk_bits(op):
            word = junk_word(op, name, b, legal_hw_word(op))
            cases.append((op, name, b, word))
            programs.append([k, nop, word, k, halt])
    legal = sorted(SLICE_OPS[kind])
    programs += [[k, nop, legal_hw_word(op), k, halt] for op in legal]
    cycles = max(CYCLES, max(expected_issues([Instr.decode(w) for w in p])[1] + 4 for p in programs[len(cases):]))
    traces = run_queue(kind, programs, cycles)

    for (op, name, b, word), tr in zip(cases, traces):
        what = f"{kind} queue, {op.name} word {word:#018x} (junk bit {b} of {name}) reached on cycle {BAD_AT}"
        assert tr["issues"] == [(0, first.op, first.stream, first.dir, first.addr)], (
            f"{what}: only instruction 0 may issue; measured {tr['issues']}")
        for flag in ("illegal", "halted"):
            want = [0] * (BAD_AT + 1) + [1] * (cycles - BAD_AT - 1)
            assert tr[flag] == want, f"{what}: expected {flag} from cycle {BAD_AT + 1} on, measured {tr[flag]}"

    for op, tr in zip(legal, traces[len(cases):]):
        program = [Instr.decode(w) for w in (k, nop, legal_hw_word(op), k, halt)]
        issues, halt_at = expected_issues(program)
        what = f"{kind} queue, legal program [{'; '.join(map(str, program))}]"
        assert tr["issues"] == issues, f"{what}: expected issues {issues}, measured {tr['issues']}"
        assert not any(tr["illegal"]), f"{what}: illegal raised on a legal word"
        assert tr["halted"].index(1) == halt_at + 1, f"{what}: HALT reached on cycle {halt_at}"
        assert all(tr["halted"][halt_at + 1:])

