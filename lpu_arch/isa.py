"""The instruction set, defined once.

The assembler, the disassembler, the architectural (golden) model, the scheduler, the
HDL decoder and the testbench all import their opcodes, field positions and latencies
from here.  ``docs/isa.md`` documents the same tables: the 64-bit word's fields
(``FIELDS``), the compute instructions' operands (``OPERANDS``), the base registers that
relocate READ, WRITE and VOP or make them skip, and the timing rules (each instruction's
stream effects are ``effects.py``, the fabric's arrival and done cycles ``timing.py``).

``USED_FIELDS`` says which bits of which field each opcode uses; every other bit of the
word must be 0.  ``Instr.checked`` (hence the assembler, ``Instr.decode``, the
disassembler and the image loader) rejects a word with such a bit set, and the hardware
(``hdl/units/icu.py``) raises ILLEGAL_OP and halts that queue, as for an opcode the slice does
not execute.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass

from lpu_arch.errors import LpuError


class IsaError(LpuError, ValueError):
    """An instruction or binary image is malformed; the message names the problem."""


class Op(enum.IntEnum):
    HALT = 0
    NOP = 1
    REPEAT = 2
    READ = 3
    WRITE = 4
    LW = 5      # MXM: load the shadow weight block from n streams
    MM = 6      # MXM: matrix-vector product into an accumulator row
    LX = 7      # MXM: store a stream vector in an x slot
    VOP = 8     # VXM: bias, requantise, table, gate-multiply, requantise, in one pass
    SHIFT = 9   # SXM: shift or rotate across lanes
    PERM = 10   # SXM: permute lanes by a map vector from another stream
    DIST = 11   # SXM: distribute: broadcast one lane or replicate a group of lanes
    TRI = 12    # SXM: transpose in: store a row of the lanes x lanes transpose buffer
    TRO = 13    # SXM: transpose out: drive a column of the transpose buffer
    SEND = 14   # C2C: put a stream vector on a link
    RECV = 15   # C2C: put the next vector received on a link onto a stream
    DESKEW = 16           # C2C: stall the tile until the next HAC epoch boundary
    RUNTIME_DESKEW = 17   # C2C: stall until the HAC reaches the program's time plus slack
    SENDM = 18  # C2C: put a stream vector on several links at once (multicast)
    MAX = 19    # SXM: lane-wise signed maximum of a vector and a rotation of another (TileConfig.sxm_max)
    ARGMAX = 20  # SXM: the running argmax of int32 vectors, its index driven out (TileConfig.sxm_argmax)
    SETB = 21    # SXM: set a base register from a stream vector (TileConfig.sxm_setb)


# (name, lsb, width, signed) -- the one place field positions are written down.
FIELDS = (
    ("op", 0, 6, False),
    ("dir", 6, 1, False),
    ("stream", 7, 7, False),
    ("addr", 14, 20, False),
    ("count", 34, 14, False),
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
MXM_LATENCY = 3    # MM issue -> EMIT's accumulator value driven at the MXM
VXM_LATENCY = 3    # VOP issue -> result driven at the VXM (TileConfig.vxm_latency: 3, or 4 with a 5th stage)
VXM_LATENCIES = (3, 4)   # the values TileConfig.vxm_latency may take (hdl/units/vxm.py builds both)
SXM_LATENCY = 1    # SHIFT/PERM/DIST/TRO/MAX/ARGMAX issue -> result driven at the SXM
SETB_LATENCY = 1   # SETB issue -> the first cycle an issuing READ, WRITE or VOP uses the register's new value
INDEX_BYTES = 4    # ARGMAX drives its index, and SETB reads a value, as lanes 0..3 (a little-endian uint32)
C2C_LATENCY = 1    # RECV issue -> received vector driven at the C2C slice
INT32_PLANES = 4   # an int32 vector travels as 4 byte-plane streams, plane b on stream s+b

CONTROL_OPS = frozenset({Op.HALT, Op.NOP, Op.REPEAT})
DATA_OPS = frozenset({Op.READ, Op.WRITE, Op.LW, Op.MM, Op.LX, Op.VOP,
                      Op.SHIFT, Op.PERM, Op.DIST, Op.TRI, Op.TRO, Op.MAX, Op.ARGMAX, Op.SETB,
                      Op.SEND, Op.RECV, Op.DESKEW, Op.RUNTIME_DESKEW, Op.SENDM})
# Which queue kinds execute which opcodes on every tile (and ``OPTIONAL_OPS`` on the tiles
# built with them: ``slice_ops``).  Any other opcode in a queue is illegal:
# the hardware raises its sticky ILLEGAL_OP flag and halts that queue.  An MXM has two
# queues: its own issues MM, its loader (MXL) LW and LX, so loads never take an MM slot.
SLICE_OPS = {
    "MEM": CONTROL_OPS | {Op.READ, Op.WRITE},
    "VXM": CONTROL_OPS | {Op.VOP},
    "SXM": CONTROL_OPS | {Op.SHIFT, Op.PERM, Op.DIST, Op.TRI, Op.TRO},
    "C2C": CONTROL_OPS | {Op.SEND, Op.RECV, Op.DESKEW, Op.RUNTIME_DESKEW, Op.SENDM},
    "MXM": CONTROL_OPS | {Op.MM},
    "MXL": CONTROL_OPS | {Op.LW, Op.LX},
}
# Opcodes a slice kind executes only on a tile built with their TileConfig field set to 1
# (hardware that costs area): op -> (slice kind, field).  Where the field is 0 the opcode is
# illegal there like any other it does not execute (``slice_ops``).
OPTIONAL_OPS = {Op.MAX: ("SXM", "sxm_max"), Op.ARGMAX: ("SXM", "sxm_argmax"), Op.SETB: ("SXM", "sxm_setb")}


def slice_ops(kind: str, cfg) -> frozenset:
    """The opcodes a queue of ``kind`` executes on a tile of ``cfg`` (a ``TileConfig``):
    ``SLICE_OPS[kind]`` and the ``OPTIONAL_OPS`` of that kind whose field ``cfg`` sets."""
    return SLICE_OPS[kind] | {op for op, (k, field) in OPTIONAL_OPS.items() if k == kind and getattr(cfg, field)}


# Base registers (docs/isa.md, "Base registers"): READ, WRITE and VOP name one in ``delay``.
BASE_BITS = 8                       # the operand: registers 0..255 (TileConfig.base_regs exist)
BASE_OPS = frozenset({Op.READ, Op.WRITE, Op.VOP})
BASE_OFFSET_BITS = 20               # a register's offset (the width of an address)
BASE_OFF_BIT = 31                   # host word bit: the register is off (its instructions skip)

# Named operands of the compute instructions: name -> (field, lsb within the field, width).
# An operand naming a stream (``out``, ``map``) is as wide as the stream field.
STREAM_BITS = FIELD["stream"][1]
MM_ACC_BITS = MM_SLOT_BITS = 10
OPERANDS = {
    Op.LW: {"n": ("count", 0, 14), "delay": ("delay", 0, 8), "rows": ("addr", 0, 14)},
    Op.MM: {"acc": ("addr", 0, MM_ACC_BITS), "slot": ("addr", MM_ACC_BITS, MM_SLOT_BITS),
            "out": ("count", 0, STREAM_BITS)},
    Op.LX: {"slot": ("addr", 0, 20)},
    Op.VOP: {"param": ("addr", 0, 20), "out": ("count", 0, STREAM_BITS), "base": ("delay", 0, BASE_BITS)},
    Op.SHIFT: {"k": ("addr", 0, 10), "out": ("count", 0, STREAM_BITS)},
    Op.PERM: {"map": ("delay", 0, STREAM_BITS), "out": ("count", 0, STREAM_BITS)},
    Op.DIST: {"k": ("addr", 0, 10), "g": ("delay", 0, 8), "out": ("count", 0, STREAM_BITS)},
    Op.TRI: {"row": ("addr", 0, 10)},
    Op.TRO: {"col": ("addr", 0, 10), "out": ("count", 0, STREAM_BITS)},
    Op.MAX: {"k": ("addr", 0, 10), "with": ("delay", 0, STREAM_BITS), "out": ("count", 0, STREAM_BITS)},
    Op.ARGMAX: {"index": ("addr", 0, 20), "out": ("count", 0, STREAM_BITS)},
    Op.SETB: {"reg": ("delay", 0, BASE_BITS), "shift": ("count", 0, 4)},
    Op.SEND: {"link": ("addr", 0, 3)},
    Op.RECV: {"link": ("addr", 0, 3)},
    Op.DESKEW: {},
    Op.RUNTIME_DESKEW: {"slack": ("count", 0, 14)},
    Op.SENDM: {"links": ("addr", 0, 7)},
}
NO_STREAM_OPS = frozenset({Op.DESKEW, Op.RUNTIME_DESKEW})   # text form has no stream operand


class MMFlag(enum.IntFlag):
    ACC = 1     # accumulate into acc[acc] (else overwrite it)
    EMIT = 2    # drive the new acc[acc] on streams out..out+3 MXM_LATENCY cycles later
    XBUF = 4    # x comes from x slot ``slot`` (else from the stream)


class VopFlag(enum.IntFlag):
    TABLE = 1   # apply the activation table to requantise(A + bias_a)
    GATE = 2    # multiply by requantise(B + bias_b), requantise the product (m_c, s_c)
    OUT_E = 4   # drive the result east-flowing
    OUT_W = 8   # drive the result west-flowing (both may be set)
    ADD = 16    # A := A + B (int32, wrapping) before bias_a: sums two MXMs' partial results


class SxmFlag(enum.IntFlag):
    ROT = 1     # SHIFT: rotate (lanes leaving one end enter the other) instead of zero fill
    DOWN = 2    # SHIFT: towards lane 0 (else towards the last lane)
    OUT_E = 4   # drive the result east-flowing
    OUT_W = 8   # drive the result west-flowing (both may be set)


class ArgmaxFlag(enum.IntFlag):
    FIRST = 1   # start a new search: this vector's maximum replaces the running one whatever it is
    OUT_E = 4   # drive the running index (after this vector) east-flowing
    OUT_W = 8   # drive it west-flowing (both may be set)


FLAGS = {Op.MM: MMFlag, Op.VOP: VopFlag, Op.SHIFT: SxmFlag, Op.PERM: SxmFlag, Op.DIST: SxmFlag,
         Op.TRO: SxmFlag, Op.MAX: SxmFlag, Op.ARGMAX: ArgmaxFlag}


def field_mask(name: str) -> int:
    """All the bits of field ``name``, as a mask within the field."""
    return (1 << FIELD[name][1]) - 1


def _used_fields() -> dict:
    mem = {"addr": ("addr", 0, ADDR_BITS), "base": ("delay", 0, BASE_BITS)}   # READ's and WRITE's operands
    used = {Op.HALT: {}, Op.NOP: {"count": field_mask("count")},
            Op.REPEAT: {"addr": field_mask("addr"), "count": field_mask("count"), "delay": field_mask("delay")}}
    for op, spec in {Op.READ: mem, Op.WRITE: mem, **OPERANDS}.items():
        masks = {} if op in NO_STREAM_OPS else {"dir": field_mask("dir"), "stream": field_mask("stream")}
        for field, lsb, width in spec.values():
            masks[field] = masks.get(field, 0) | ((1 << width) - 1) << lsb
        if op in FLAGS:
            masks["aux"] = int(sum(FLAGS[op]))
        used[op] = masks
    assert set(used) == set(Op), "every opcode needs an entry in USED_FIELDS"
    return {op: {f: m[f] for f in FIELD if f in m} for op, m in used.items()}   # fields in FIELDS order


# The bits each opcode uses (module docstring), per field: op -> {field: mask within the
# field}; derived from OPERANDS and FLAGS for the compute instructions.
USED_FIELDS = _used_fields()


def used_word_mask(op: Op) -> int:
    """The bits of a 64-bit instruction word that ``op`` may set (its op field included)."""
    word = field_mask("op") << FIELD["op"][0]
    for field, mask in USED_FIELDS[op].items():
        word |= mask << FIELD[field][0]
    return word


def operand_word_mask(op: Op, name: str) -> int:
    """The bits of a 64-bit instruction word that operand ``name`` of ``op`` occupies."""
    field, lsb, width = OPERANDS[op][name]
    return ((1 << width) - 1) << (FIELD[field][0] + lsb)


# The operand ranges of NOP and REPEAT: (name in messages, field, lowest, highest).
_CONTROL_RANGES = {Op.NOP: (("count", "count", 1, COUNT_MAX),),
                   Op.REPEAT: (("count", "count", 1, COUNT_MAX), ("delay", "delay", 1, DELAY_MAX),
                               ("stride", "addr", STRIDE_MIN, STRIDE_MAX))}


def _base(r: int) -> int:
    if not 0 <= int(r) < 1 << BASE_BITS:
        raise IsaError(f"base register must be in 0..{(1 << BASE_BITS) - 1}, got {r}")
    return int(r)


@dataclass(frozen=True)
class Instr:
    op: Op
    stream: int = 0
    dir: int = EAST
    addr: int = 0          # READ/WRITE address; REPEAT: signed stride; else see OPERANDS
    count: int = 0         # NOP n / REPEAT n; else see OPERANDS
    delay: int = 0         # REPEAT d; else see OPERANDS
    aux: int = 0           # MM / VOP flags

    def with_addr(self, addr: int) -> "Instr":
        """This instruction with another address field (a REPEAT's repetition): the same as
        ``dataclasses.replace(self, addr=addr)``, without its per-field checks (the
        compiler's and the golden model's hot path)."""
        new = object.__new__(Instr)
        new.__dict__.update(self.__dict__, addr=addr)
        return new

    # ---- constructors ------------------------------------------------------------
    @classmethod
    def read(cls, stream: int, dir: int, addr: int, base: int = 0) -> "Instr":
        return cls(Op.READ, stream=stream, dir=dir, addr=addr, delay=_base(base)).checked()

    @classmethod
    def write(cls, stream: int, dir: int, addr: int, base: int = 0) -> "Instr":
        return cls(Op.WRITE, stream=stream, dir=dir, addr=addr, delay=_base(base)).checked()

    @classmethod
    def nop(cls, n: int) -> "Instr":
        return cls(Op.NOP, count=n).checked()

    @classmethod
    def repeat(cls, n: int, d: int = 1, stride: int = 0) -> "Instr":
        return cls(Op.REPEAT, count=n, delay=d, addr=stride).checked()

    @classmethod
    def halt(cls) -> "Instr":
        return cls(Op.HALT).checked()

    @classmethod
    def lw(cls, stream: int, dir: int, n: int, delay: int = 0, rows: int = 0) -> "Instr":
        return cls.compute(Op.LW, stream, dir, n=n, delay=delay, rows=rows)

    @classmethod
    def mm(cls, stream: int, dir: int, acc: int, slot: int = 0, out: int = 0, flags: int = 0) -> "Instr":
        return cls.compute(Op.MM, stream, dir, acc=acc, slot=slot, out=out, flags=flags)

    @classmethod
    def lx(cls, stream: int, dir: int, slot: int) -> "Instr":
        return cls.compute(Op.LX, stream, dir, slot=slot)

    @classmethod
    def vop(cls, stream: int, dir: int, param: int, out: int, flags: int = 0, base: int = 0) -> "Instr":
        return cls.compute(Op.VOP, stream, dir, param=param, out=out, base=base, flags=flags)

    @classmethod
    def max(cls, stream: int, dir: int, k: int, with_: int, out: int, flags: int = 0) -> "Instr":
        """``MAX``: lane ``i`` of the result is the signed maximum of lane ``i`` of stream
        ``stream`` and lane ``(i + k) mod lanes`` of stream ``with_`` (its operand ``with``)."""
        return cls.compute(Op.MAX, stream, dir, k=k, out=out, flags=flags, **{"with": with_})

    @classmethod
    def argmax(cls, stream: int, dir: int, index: int, out: int = 0, flags: int = 0) -> "Instr":
        """``ARGMAX``: the int32 vector on streams ``stream..stream+acc_planes-1`` (byte planes,
        as an MM's EMIT drives them) joins the running search: its largest lane (the lowest
        such lane on a tie) replaces the running maximum when ``FIRST`` is set or it is
        strictly larger, with index ``index`` + that lane.  With ``OUT_E``/``OUT_W`` the running
        index (this vector's decision included) is driven on stream ``out`` a cycle later, in
        lanes 0..3 (little-endian), the other lanes 0."""
        return cls.compute(Op.ARGMAX, stream, dir, index=index, out=out, flags=flags)

    @classmethod
    def setb(cls, stream: int, dir: int, reg: int, shift: int = 0) -> "Instr":
        """``SETB``: base register ``reg`` := on, offset the low ``BASE_OFFSET_BITS`` bits of
        ``v << shift``, where ``v`` is lanes 0..3 (little-endian uint32) of stream ``stream``:
        the READs, WRITEs and VOPs issued ``SETB_LATENCY`` cycles later and after use it.  Register 0
        stays the constant 0 (the hardware ignores such a SETB; ``Program.validate`` refuses it)."""
        return cls.compute(Op.SETB, stream, dir, reg=reg, shift=shift)

    @classmethod
    def compute(cls, op: Op, stream: int, dir: int, flags: int = 0, **operands) -> "Instr":
        """Build a compute instruction from its named operands (``OPERANDS[op]``)."""
        fields = {"addr": 0, "count": 0, "delay": 0}
        spec = OPERANDS[op]
        for name, value in operands.items():
            if name not in spec:
                raise IsaError(f"{op.name} has no operand {name!r}; its operands are {', '.join(spec)}")
            field, lsb, width = spec[name]
            if not 0 <= int(value) < (1 << width):
                raise IsaError(f"{op.name} operand {name} must be in 0..{(1 << width) - 1}, got {value}")
            fields[field] |= int(value) << lsb
        return cls(op, stream=stream, dir=dir, aux=int(flags), **fields).checked()

    @property
    def base(self) -> int:
        """The base register a READ, WRITE or VOP names (0 for every other opcode)."""
        return self.delay if self.op in BASE_OPS else 0

    def operand(self, name: str) -> int:
        field, lsb, width = OPERANDS[self.op][name]
        return (getattr(self, field) >> lsb) & ((1 << width) - 1)

    def links(self) -> list[int]:
        """The C2C links a SEND or RECV (its ``link``) or a SENDM (each bit of ``links``) names."""
        if self.op == Op.SENDM:
            return [k for k in range(OPERANDS[Op.SENDM]["links"][2]) if self.operand("links") >> k & 1]
        return [self.operand("link")]

    def checked(self) -> "Instr":
        for what, field, lo, hi in _CONTROL_RANGES.get(self.op, ()):
            if not lo <= getattr(self, field) <= hi:
                raise IsaError(f"{self.op.name} {what} must be in {lo}..{hi}, got {getattr(self, field)}")
        if self.op in DATA_OPS:
            if not 0 <= self.stream < 1 << STREAM_BITS:
                raise IsaError(f"stream index must be in 0..{(1 << STREAM_BITS) - 1}, got {self.stream}")
            if self.dir not in (EAST, WEST):
                raise IsaError(f"direction must be 0 (east) or 1 (west), got {self.dir}")
            if not 0 <= self.addr < (1 << ADDR_BITS):
                raise IsaError(f"address must be in 0..{(1 << ADDR_BITS) - 1}, got {self.addr}")
        used = USED_FIELDS[self.op]
        if self.op in FLAGS:
            if self.aux & ~used["aux"]:
                raise IsaError(f"{self.op.name} flags {self.aux:#x} set unknown bits {self.aux & ~used['aux']:#x} "
                               f"of field aux; known flags are {', '.join(f.name for f in FLAGS[self.op])}")
        elif self.aux:
            raise IsaError(f"{self.op.name} takes no flags (aux must be 0), got {self.aux:#x}")
        for fname, _, _, _ in FIELDS[1:]:
            value = getattr(self, fname)
            if self.op == Op.REPEAT and fname == "addr":
                value &= field_mask("addr")     # a signed stride (its range is checked above)
            junk = value & ~used.get(fname, 0)
            if junk:
                raise IsaError(f"{self.op.name} uses no bits {junk:#x} of field {fname} (they must be 0)")
        if self.op == Op.VOP and self.aux & VopFlag.ADD and self.aux & VopFlag.GATE:
            raise IsaError("VOP flags ADD and GATE both use B; set one of them")
        if self.op == Op.LW and self.operand("n") < 1:
            raise IsaError("LW needs n >= 1 rows per cycle")
        return self

    def lw_rows(self, lanes: int) -> int:
        """The weight rows this ``LW`` loads on a tile of ``lanes`` lanes: its ``rows``
        operand, 0 meaning all of them (at most ``lanes``)."""
        return min(self.operand("rows") or lanes, lanes)

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
        self.checked()      # (a REPEAT's negative stride: its two's complement in the addr field)
        return sum((getattr(self, name) & ((1 << width) - 1)) << lsb for name, lsb, width, _ in FIELDS)

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
        addr = f["addr"]
        if op == Op.REPEAT and addr >> (ADDR_BITS - 1):
            addr -= 1 << ADDR_BITS
        try:
            return cls(**{**f, "op": op, "addr": addr}).checked()
        except IsaError as e:
            raise IsaError(f"{e}{at}") from None

    # ---- text form ---------------------------------------------------------------
    def __str__(self) -> str:
        base = f", base={self.base}" if self.base else ""
        if self.op in (Op.READ, Op.WRITE):
            return f"{self.op.name} {DIR_NAMES[self.dir]}{self.stream}, {self.addr}{base}"
        if self.op in OPERANDS:
            parts = [] if self.op in NO_STREAM_OPS else [f"{DIR_NAMES[self.dir]}{self.stream}"]
            parts += [f"{n}={self.operand(n)}" for n in OPERANDS[self.op]
                      if n not in ("base", "rows") or self.operand(n)]    # (0: the default, not shown)
            if self.op in FLAGS:
                names = [f.name for f in FLAGS[self.op] if self.aux & f]
                parts.append("flags=" + ("|".join(names) if names else "0"))
            return (f"{self.op.name} " + ", ".join(parts)).rstrip()
        if self.op == Op.NOP:
            return f"NOP {self.count}"
        if self.op == Op.REPEAT:
            return f"REPEAT {self.count}, {self.delay}, {self.addr:+d}"
        return self.op.name

    _TEXT = re.compile(r"^\s*(?P<op>[A-Za-z_]+)\s*(?P<args>.*?)\s*$")

    @classmethod
    def parse(cls, text: str) -> "Instr":
        """Parse one line of assembly: ``READ E3, 12``, ``WRITE W0, 7``, ``NOP 4``,
        ``READ E3, 12, base=2``, ``REPEAT 15, 1, +1``, ``HALT``, and the compute
        instructions with named operands:
        ``LW W0, n=4, delay=0``, ``MM W4, acc=0, slot=3, out=0, flags=ACC|EMIT|XBUF``,
        ``LX W4, slot=3``, ``VOP E0, param=2, out=4, flags=TABLE|GATE|OUT_E``,
        ``MAX W0, k=8, with=0, out=2, flags=OUT_E``, ``ARGMAX E0, index=32, out=5, flags=FIRST|OUT_W``,
        ``SETB W5, reg=3, shift=0``."""
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

        def stream(arg):
            sm = re.fullmatch(r"([EWew])(\d+)", arg)
            if not sm:
                raise IsaError(f"expected a stream like E3 or W0, got {arg!r} in {text!r}")
            return int(sm[2]), (EAST if sm[1].upper() == "E" else WEST)

        if op in (Op.READ, Op.WRITE):
            if len(args) == 3:
                key, eq, val = args[2].partition("=")
                if key.strip().lower() != "base" or not eq:
                    raise IsaError(f"{name}'s third operand is base=R, got {args[2]!r} in {text!r}")
                args[2] = val.strip()
            else:
                nargs(2)
            s, d = stream(args[0])
            return cls(op, stream=s, dir=d, addr=num(args[1]),
                       delay=_base(num(args[2])) if len(args) == 3 else 0).checked()
        if op in OPERANDS:
            if op in NO_STREAM_OPS:
                s, d, named = 0, EAST, args
            elif not args:
                raise IsaError(f"{name} needs a stream operand in {text!r}")
            else:
                (s, d), named = stream(args[0]), args[1:]
            kw, flags = {}, 0
            for a in named:
                key, eq, val = a.partition("=")
                key = key.strip().lower()
                if not eq:
                    raise IsaError(f"expected name=value, got {a!r} in {text!r}")
                if key == "flags" and op in FLAGS:
                    for fname in (v.strip().upper() for v in val.split("|")):
                        if fname in ("", "0"):
                            continue
                        try:
                            flags |= FLAGS[op][fname]
                        except KeyError:
                            raise IsaError(f"unknown {name} flag {fname!r} in {text!r}; known: "
                                           f"{', '.join(f.name for f in FLAGS[op])}") from None
                else:
                    kw[key] = num(val.strip())
            return cls.compute(op, s, d, flags=flags, **kw)
        if op == Op.NOP:
            nargs(1)
            return cls.nop(num(args[0]))
        if op == Op.REPEAT:
            if len(args) not in (2, 3):
                raise IsaError(f"REPEAT takes n, d[, stride], got {len(args)} operand(s) in {text!r}")
            return cls.repeat(num(args[0]), num(args[1]), num(args[2]) if len(args) == 3 else 0)
        nargs(0)
        return cls(op).checked()
