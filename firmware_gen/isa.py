"""The instruction set, defined once.

The assembler, the disassembler, the architectural (golden) model, the scheduler, the
HDL decoder and the testbench all import their opcodes, field positions and latencies
from here.  ``docs/isa.md`` documents the same table.

Every instruction is one 64-bit word::

    bits   field    meaning
    0-5    op       opcode (Op)
    6      dir      stream direction: 0 = east-flowing, 1 = west-flowing
    7-11   stream   stream index within the direction
    12-31  addr     MEM vector address (REPEAT: signed address stride)
    32-47  count    NOP: cycles; REPEAT: repetitions
    48-55  delay    REPEAT: cycles between repetitions
    56-63  aux      reserved, must be 0

Timing (all in cycles of the tile clock; "issue" is the cycle the instruction queue
hands the instruction to its slice):

* Each instruction occupies its queue for ``duration()`` cycles: 1 for a data
  instruction, ``n`` for ``NOP n``, ``n*d`` for ``REPEAT n, d``.  The next instruction
  issues on the cycle after.  There are no interlocks.
* ``REPEAT n, d, stride`` re-issues the last issued data instruction ``n`` times.
  The k-th repetition (k = 1..n) issues at ``s + k*d - 1`` where ``s`` is the
  first cycle of the REPEAT, with its address advanced by ``stride`` each time.
* ``READ s, a`` (MEM) reads vector ``a`` and drives it onto stream ``s`` at the
  slice's position on cycle ``issue + READ_LATENCY``.
* ``WRITE s, a`` (MEM) samples stream ``s`` at the slice's position on the issue
  cycle and stores it at ``a``; a READ issued on a later cycle sees it.
* A value driven at position ``p`` on cycle ``t`` is visible at ``p + d`` (east) or
  ``p - d`` (west) on cycle ``t + d``, for d >= 1.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass


class IsaError(ValueError):
    """An instruction or binary image is malformed; the message names the problem."""


class Op(enum.IntEnum):
    HALT = 0
    NOP = 1
    REPEAT = 2
    READ = 3
    WRITE = 4


# (name, lsb, width, signed) -- the one place field positions are written down.
FIELDS = (
    ("op", 0, 6, False),
    ("dir", 6, 1, False),
    ("stream", 7, 5, False),
    ("addr", 12, 20, False),
    ("count", 32, 16, False),
    ("delay", 48, 8, False),
    ("aux", 56, 8, False),
)
FIELD = {name: (lsb, width) for name, lsb, width, _ in FIELDS}
INSTR_BITS = 64
ADDR_BITS = FIELD["addr"][1]
COUNT_MAX = (1 << FIELD["count"][1]) - 1
DELAY_MAX = (1 << FIELD["delay"][1]) - 1
STRIDE_MIN, STRIDE_MAX = -(1 << (ADDR_BITS - 1)), (1 << (ADDR_BITS - 1)) - 1

EAST, WEST = 0, 1
DIR_NAMES = {EAST: "E", WEST: "W"}

READ_LATENCY = 1   # READ issue -> value driven onto the stream at the MEM slice
WRITE_LATENCY = 0  # WRITE issue -> stream sampled (the MEM write event's cycle)

CONTROL_OPS = frozenset({Op.HALT, Op.NOP, Op.REPEAT})
DATA_OPS = frozenset({Op.READ, Op.WRITE})
# Which slice kinds execute which opcodes.  Any other opcode at a slice is illegal:
# the hardware raises its sticky ILLEGAL_OP flag and halts that queue.
SLICE_OPS = {
    "MEM": CONTROL_OPS | {Op.READ, Op.WRITE},
    "VXM": CONTROL_OPS,
    "SXM": CONTROL_OPS,
    "MXM": CONTROL_OPS,
}


@dataclass(frozen=True)
class Instr:
    op: Op
    stream: int = 0
    dir: int = EAST
    addr: int = 0          # READ/WRITE address; REPEAT: signed stride
    count: int = 0         # NOP n / REPEAT n
    delay: int = 0         # REPEAT d

    # ---- constructors ------------------------------------------------------------
    @classmethod
    def read(cls, stream: int, dir: int, addr: int) -> "Instr":
        return cls(Op.READ, stream=stream, dir=dir, addr=addr).checked()

    @classmethod
    def write(cls, stream: int, dir: int, addr: int) -> "Instr":
        return cls(Op.WRITE, stream=stream, dir=dir, addr=addr).checked()

    @classmethod
    def nop(cls, n: int) -> "Instr":
        return cls(Op.NOP, count=n).checked()

    @classmethod
    def repeat(cls, n: int, d: int = 1, stride: int = 0) -> "Instr":
        return cls(Op.REPEAT, count=n, delay=d, addr=stride).checked()

    @classmethod
    def halt(cls) -> "Instr":
        return cls(Op.HALT)

    def checked(self) -> "Instr":
        if self.op == Op.NOP and not 1 <= self.count <= COUNT_MAX:
            raise IsaError(f"NOP count must be in 1..{COUNT_MAX}, got {self.count}")
        if self.op == Op.REPEAT:
            if not 1 <= self.count <= COUNT_MAX:
                raise IsaError(f"REPEAT count must be in 1..{COUNT_MAX}, got {self.count}")
            if not 1 <= self.delay <= DELAY_MAX:
                raise IsaError(f"REPEAT delay must be in 1..{DELAY_MAX}, got {self.delay}")
            if not STRIDE_MIN <= self.addr <= STRIDE_MAX:
                raise IsaError(f"REPEAT stride must be in {STRIDE_MIN}..{STRIDE_MAX}, got {self.addr}")
        if self.op in DATA_OPS:
            if not 0 <= self.stream < 32:
                raise IsaError(f"stream index must be in 0..31, got {self.stream}")
            if self.dir not in (EAST, WEST):
                raise IsaError(f"direction must be 0 (east) or 1 (west), got {self.dir}")
            if not 0 <= self.addr < (1 << ADDR_BITS):
                raise IsaError(f"address must be in 0..{(1 << ADDR_BITS) - 1}, got {self.addr}")
        return self

    # ---- timing ------------------------------------------------------------------
    def duration(self) -> int:
        """Cycles this instruction occupies its queue."""
        if self.op == Op.NOP:
            return self.count
        if self.op == Op.REPEAT:
            return self.count * self.delay
        return 1

    # ---- encoding ----------------------------------------------------------------
    def encode(self) -> int:
        self.checked()
        vals = {"op": int(self.op), "dir": self.dir, "stream": self.stream,
                "addr": self.addr & ((1 << ADDR_BITS) - 1), "count": self.count,
                "delay": self.delay, "aux": 0}
        word = 0
        for name, lsb, width, _ in FIELDS:
            word |= (vals[name] & ((1 << width) - 1)) << lsb
        return word

    @classmethod
    def decode(cls, word: int, where: str = "") -> "Instr":
        """Decode one 64-bit word; an unknown opcode or a malformed field raises IsaError."""
        f = {name: (int(word) >> lsb) & ((1 << width) - 1) for name, lsb, width, _ in FIELDS}
        at = f" at {where}" if where else ""
        if int(word) >> INSTR_BITS:
            raise IsaError(f"instruction word {int(word):#x}{at} is wider than {INSTR_BITS} bits")
        try:
            op = Op(f["op"])
        except ValueError:
            raise IsaError(f"unknown opcode {f['op']} in instruction word {int(word):#018x}{at}; "
                           f"known opcodes are {', '.join(f'{o.name}={o.value}' for o in Op)}") from None
        if f["aux"]:
            raise IsaError(f"reserved field aux is {f['aux']} (must be 0) in {int(word):#018x}{at}")
        addr = f["addr"]
        if op == Op.REPEAT and addr >> (ADDR_BITS - 1):
            addr -= 1 << ADDR_BITS
        try:
            return cls(op, stream=f["stream"], dir=f["dir"], addr=addr, count=f["count"],
                       delay=f["delay"]).checked()
        except IsaError as e:
            raise IsaError(f"{e}{at}") from None

    # ---- text form ---------------------------------------------------------------
    def __str__(self) -> str:
        if self.op in (Op.READ, Op.WRITE):
            return f"{self.op.name} {DIR_NAMES[self.dir]}{self.stream}, {self.addr}"
        if self.op == Op.NOP:
            return f"NOP {self.count}"
        if self.op == Op.REPEAT:
            return f"REPEAT {self.count}, {self.delay}, {self.addr:+d}"
        return self.op.name

    _TEXT = re.compile(r"^\s*(?P<op>[A-Za-z]+)\s*(?P<args>.*?)\s*$")

    @classmethod
    def parse(cls, text: str) -> "Instr":
        """Parse one line of assembly: ``READ E3, 12``, ``WRITE W0, 7``, ``NOP 4``,
        ``REPEAT 15, 1, +1``, ``HALT``."""
        m = cls._TEXT.match(text)
        if not m:
            raise IsaError(f"cannot parse instruction {text!r}")
        name, args = m["op"].upper(), [a.strip() for a in m["args"].split(",") if a.strip()]
        try:
            op = Op[name]
        except KeyError:
            raise IsaError(f"unknown mnemonic {m['op']!r} in {text!r}; known: "
                           f"{', '.join(o.name for o in Op)}") from None

        def num(s):
            try:
                return int(s, 0)
            except ValueError:
                raise IsaError(f"expected a number, got {s!r} in {text!r}") from None

        def nargs(k):
            if len(args) != k:
                raise IsaError(f"{name} takes {k} operand(s), got {len(args)} in {text!r}")

        if op in (Op.READ, Op.WRITE):
            nargs(2)
            sm = re.fullmatch(r"([EWew])(\d+)", args[0])
            if not sm:
                raise IsaError(f"expected a stream like E3 or W0, got {args[0]!r} in {text!r}")
            d = EAST if sm[1].upper() == "E" else WEST
            return cls(op, stream=int(sm[2]), dir=d, addr=num(args[1])).checked()
        if op == Op.NOP:
            nargs(1)
            return cls.nop(num(args[0]))
        if op == Op.REPEAT:
            if len(args) not in (2, 3):
                raise IsaError(f"REPEAT takes n, d[, stride], got {len(args)} operand(s) in {text!r}")
            return cls.repeat(num(args[0]), num(args[1]), num(args[2]) if len(args) == 3 else 0)
        nargs(0)
        return cls(op)
