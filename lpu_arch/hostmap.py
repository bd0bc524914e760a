"""The host interface's address map, shared by the HDL decoder, the cocotb driver and
the UART bridge.

The host bus is word-addressed with 32-bit data.  Address bits ``[28:32]`` pick a
region, bits ``[20:28]`` a slice (queue index for IMEM, ``TileConfig.queue_names``; MEM
index for DMEM and TRACE), bits ``[0:20]`` a word inside it.  IMEM, DMEM, VXM_PARAM and
VXM_TABLE writes are honoured only while the tile is stopped.

Beside the bus, a tile has a *vector load port* (``LOAD_REGIONS``) for bulk loading, a
whole vector per lane per cycle, the width a loader at the chip's edge has.
"""

from __future__ import annotations

import dataclasses
import enum
import struct
import zlib

from lpu_arch import isa
from lpu_arch.config import ConfigError, TileConfig
from lpu_arch.vxm import PARAM_WORDS as VXM_PARAM_WORDS

HOST_READ_LATENCY = 2   # host bus: read data this many cycles after re
HOST_ADDR_BITS = 32     # host bus address width (data: TileConfig.HOST_WORD)
LINK_COUNT_BITS = 16    # LinkReg.CORRECTED/UNCORRECTED and HAC_LATENCY/HAC_ERROR widths (saturating counters)
REGION_SHIFT, SLICE_SHIFT = 28, 20
WORD_MASK = (1 << SLICE_SHIFT) - 1


class Region(enum.IntEnum):
    CSR = 0
    IMEM = 1
    DMEM = 2
    TRACE = 3
    VXM_PARAM = 4   # word (entry * lanes + lane) * VXM_PARAM_WORDS + k, see lpu_arch/vxm.py
    VXM_TABLE = 5   # word t * 256 + i = entry i of activation table t (low byte)


class Csr(enum.IntEnum):
    """Control and status registers (word index inside the CSR region).

    The registers from ``START_HAC`` to ``DESKEW_STATUS`` and the ``LINK_BASE`` block
    exist only in tiles with C2C links (``cfg.links > 0``, ``docs/c2c.md``); they read as
    0 in a tile without.

    The configuration block (``CONFIG_VERSION`` .. ``CONFIG_BASE + CONFIG_MAX_FIELDS - 1``,
    constants: :func:`config_csrs`) reports the tile's whole :class:`TileConfig`, so that a
    host checks a tile with three reads (:data:`CONFIG_HEADER`) and reads the fields only to
    say what differs (:func:`config_mismatch`).  ``CONFIG0``/``CONFIG1`` are an older,
    partial summary of six fields, kept for existing readers."""
    CTRL = 0        # write: see Ctrl
    STATUS = 1      # read: see Status
    SAC = 2         # read: the program's cycle counter, SAC (deskew stalls do not advance it; frozen at done)
    CONFIG0 = 3     # read: lanes | streams << 16
    CONFIG1 = 4     # read: mem_slices | log2(mem_depth) << 8 | log2(iq_depth) << 16 | log2(trace_depth+1) << 24
    START_HAC = 5   # read/write: the HAC value of cycle 0 for a start armed with Ctrl.START_AT_HAC
    HAC = 6         # read: the tile's hardware-aligned counter now
    HAC_STATUS = 7  # read: see HacStatus
    HAC_LATENCY = 8  # read: measured one-way latency of the HAC parent link, in this tile's cycles
    HAC_ERROR = 9   # read: the HAC error the last SYNC corrected (own - parent's), signed 32-bit
    DESKEW_OFFSET = 10   # read: HAC - SAC since the last DESKEW/RUNTIME_DESKEW released the core
    DESKEW_STALLED = 11  # read: cycles the core was stalled by deskews since the start
    DESKEW_STATUS = 12   # read: see DeskewStatus
    ENTRY = 13      # read/write: the instruction every queue starts at (written while stopped; kept across runs)
    ILLEGAL_BASE = 0x10     # read: word k, bit b = queue 32k+b (TileConfig.queue_names) decoded an illegal opcode
    ADDR_FAULT_BASE = 0x18  # read: word k, bit b = MEM slice 32k+b addressed beyond its depth
    CONFIG_VERSION = 0x20   # read: CONFIG_FORMAT_VERSION, the layout of this block (0: a tile without the block)
    CONFIG_FIELDS = 0x21    # read: number of TileConfig fields the tile was built with
    CONFIG_HASH = 0x22      # read: config_hash(cfg), CRC-32 of the field names and values
    CONFIG_BASE = 0x40      # read: CONFIG_BASE + k = field k of TileConfig (config_words), 0 beyond CONFIG_FIELDS
    BUSY_BASE = 0x100       # read: BUSY_BASE + q = cycles queue q issued a data instruction that did not skip
    TRACE_COUNT_BASE = 0x200  # read: TRACE_COUNT_BASE + i = events recorded by MEM slice i
    LINK_BASE = 0x300       # read: LINK_BASE + LINK_WORDS * l + LinkReg: link l's receiver and transmitter
    BASE_REG_BASE = 0x380   # read/write: BASE_REG_BASE + r = base register r (base_word; r = 0 reads 0,
                            # ignores writes); written only while the tile is stopped


START_CYCLES = 2   # a Ctrl.START write on cycle w: the program's cycle 0 is cycle w + START_CYCLES


class Ctrl(enum.IntFlag):
    """Bits of a ``CTRL`` write (ignored while the tile runs)."""
    START = 1          # start now: cycle 0 is START_CYCLES cycles after the write
    START_AT_HAC = 2   # arm: start so that cycle 0 is the cycle the HAC equals START_HAC, and set the
                       # deskew offset to START_HAC (SAC cycle s runs at HAC START_HAC + s) (C2C tiles)


class LinkReg(enum.IntEnum):
    """Per-link registers, word ``Csr.LINK_BASE + LINK_WORDS * link + LinkReg``."""
    LEVEL = 0          # vectors in the receive buffer now
    MAX_LEVEL = 1      # most vectors in the receive buffer since the start
    FLAGS = 2          # see LinkFlag (sticky until the next start)
    CORRECTED = 3      # flits with a corrected single-bit error since the start (saturates at 0xFFFF)
    UNCORRECTED = 4    # flits with an uncorrectable error since the start (saturates at 0xFFFF)
    ELASTIC_LEVEL = 5  # flits in the elastic (clock-crossing) buffer now


LINK_WORDS = 8

CONFIG_FORMAT_VERSION = 1  # what Csr.CONFIG_VERSION reads: the layout of the configuration block
CONFIG_MAX_FIELDS = 0x40   # words reserved from Csr.CONFIG_BASE (0x40..0x7F)
CONFIG_HEADER = (Csr.CONFIG_VERSION, Csr.CONFIG_FIELDS, Csr.CONFIG_HASH)  # what a host reads first


class LinkFlag(enum.IntFlag):
    OVERFLOW = 1        # a flit found the elastic buffer full, or a vector the receive buffer full
    UNDERFLOW = 2       # a RECV found the receive buffer empty
    UNCORRECTABLE = 4   # a flit had an uncorrectable (double-bit) error
    TX_OVERRUN = 8      # a SEND came while the previous vector was still being sent


class HacStatus(enum.IntFlag):
    LOCKED = 1      # root: always; child: latency measured and a SYNC applied
    LOCK_LOST = 2   # sticky until start: a SYNC found the HAC off by more than c2c.HAC_ERROR_MAX


class DeskewStatus(enum.IntFlag):
    LATE = 1        # sticky until start: a RUNTIME_DESKEW released more than HAC_ERROR_MAX after its target
    WAITING = 2     # the core is waiting in a DESKEW or RUNTIME_DESKEW
    STALL_TIMEOUT = 4  # sticky until start: a deskew stalled the core longer than the specification
                       # allows (c2c.deskew_stall_max / runtime_deskew_stall_max); the tile halted


class Status(enum.IntFlag):
    RUNNING = 1
    DONE = 2
    ILLEGAL_OP = 4       # sticky until start: some queue decoded an illegal opcode
    ADDR_FAULT = 8       # sticky until start: some MEM access beyond its depth
    TRACE_OVERFLOW = 16  # sticky until start: a trace buffer filled up (events lost)
    # C2C tiles only (sticky until start; the per-link and HAC/deskew registers say which):
    LINK_OVERFLOW = 32        # some link's elastic or receive buffer overflowed
    LINK_UNDERFLOW = 64       # some RECV found its receive buffer empty
    LINK_UNCORRECTABLE = 128  # some link received a flit with an uncorrectable error
    LINK_TX_OVERRUN = 256     # some SEND came while its link was still sending
    DESKEW_LATE = 512         # a RUNTIME_DESKEW released late: this tile fell behind the HAC
    HAC_LOCK_LOST = 1024      # the HAC drifted further from its parent than HAC_ERROR_MAX
    ARMED = 2048              # not a fault: a start at START_HAC is pending
    HAC_LOCKED = 4096         # not a fault: HacStatus.LOCKED
    DESKEW_TIMEOUT = 8192     # DeskewStatus.STALL_TIMEOUT: a deskew stall exceeded its bound; the tile
                              # halted (DONE with the core frozen where it stalled)
    PARAM_FAULT = 16384       # sticky until start: a VOP's relocated parameter entry was beyond
                              # vxm_param_depth (that VOP drove a zero vector)
    NAN_OPERAND = 32768       # sticky until start: an MM on an FP8 tile multiplied a NaN code
                              # (0x7F/0xFF) of x or of the active weight block; those products
                              # counted 0.  Not a fault (not in Tile.fault): a condition of the
                              # data, which the golden model predicts (RunResult.nan_operand)


def base_word(offset: int = 0, on: bool = True) -> int:
    """The host word of a base register: ``offset`` (0..2**BASE_OFFSET_BITS - 1) in the low
    bits, bit ``BASE_OFF_BIT`` set when the register is off."""
    if not 0 <= int(offset) < 1 << isa.BASE_OFFSET_BITS:
        raise ValueError(f"a base register's offset must be in 0..{(1 << isa.BASE_OFFSET_BITS) - 1}, got {offset}")
    return int(offset) | (0 if on else 1 << isa.BASE_OFF_BIT)


def base_fields(word: int) -> tuple[int, bool]:
    """``(offset, on)`` of a base register's host word (the inverse of :func:`base_word`)."""
    return int(word) & ((1 << isa.BASE_OFFSET_BITS) - 1), not (int(word) >> isa.BASE_OFF_BIT) & 1


LINK_FAULTS = (Status.LINK_OVERFLOW | Status.LINK_UNDERFLOW | Status.LINK_UNCORRECTABLE
               | Status.LINK_TX_OVERRUN | Status.DESKEW_LATE | Status.HAC_LOCK_LOST | Status.DESKEW_TIMEOUT)


# Every sticky STATUS flag that is a fault (a start clears them; NAN_OPERAND is not one).
FAULTS = Status.ILLEGAL_OP | Status.ADDR_FAULT | Status.TRACE_OVERFLOW | Status.PARAM_FAULT | LINK_FAULTS


def fault_names(status: int, flags: Status = FAULTS) -> list[str]:
    """The names of the fault flags (``FAULTS``, or ``flags``) set in a STATUS word."""
    return [f.name for f in Status if f & flags & status]


def link_fault_names(status: int) -> list[str]:
    """The names of the link fault flags (``LINK_FAULTS``) set in a STATUS word."""
    return fault_names(status, LINK_FAULTS)


def check_fits(cfg: TileConfig) -> None:
    """The address map limits the configuration; say which limit is broken."""
    if cfg.queues > 256:
        raise ConfigError(f"the host map addresses up to 256 instruction queues; this tile has {cfg.queues} "
                          f"({cfg.positions} positions and {len(cfg.LOADERS)} MXM loaders)")
    if cfg.mem_depth * cfg.words_per_vector > WORD_MASK + 1:
        raise ConfigError(f"a MEM slice of {cfg.mem_depth} x {cfg.lanes} bytes exceeds the host "
                          f"map's {WORD_MASK + 1} words per slice")
    if 2 * cfg.iq_depth > WORD_MASK + 1:
        raise ConfigError(f"an instruction queue of {cfg.iq_depth} exceeds the host map's {WORD_MASK + 1} words "
                          f"per slice (two an instruction)")
    if cfg.vxm_param_depth * cfg.lanes * VXM_PARAM_WORDS > WORD_MASK + 1:
        raise ConfigError(f"the VXM parameter memory ({cfg.vxm_param_depth} entries x {cfg.lanes} lanes x "
                          f"{VXM_PARAM_WORDS} words) exceeds the host map's {WORD_MASK + 1} words")


# ---- the vector load port ----------------------------------------------------------------
# One write per cycle of ``row`` into every lane whose ``mask`` bit is set, in ``region``:
#   DMEM       lane i = MEM slice i, row = vector (bits 8l..8l+7: lane l's byte); as the
#              words ``row * words_per_vector + w`` of Region.DMEM
#   IMEM       lane q = queue q (TileConfig.queue_names), row = instruction (its 64-bit word); as
#              the words ``2 * row`` and ``2 * row + 1`` of Region.IMEM
#   VXM_PARAM  lane l = VXM lane l, row = parameter entry (bits 32k..32k+31: host word k of
#              ``vxm.lane_words``); as the words ``(row * lanes + l) * VXM_PARAM_WORDS + k``
# Data lanes are ``load_lane_bits`` wide (a region uses the low bits).  Honoured only while
# the tile is stopped; a row beyond the slice's depth is ignored; a load-port write takes
# precedence over a bus write to the same slice on the same cycle.  Reads go over the bus.
LOAD_REGIONS = (Region.IMEM, Region.DMEM, Region.VXM_PARAM)
LOAD_REGION_BITS = HOST_ADDR_BITS - REGION_SHIFT


def load_lanes(cfg: TileConfig) -> int:
    """Lanes of the vector load port: one per instruction queue (IMEM; MEM slices are the
    first lanes for DMEM) or per VXM lane, whichever is more."""
    return max(cfg.queues, cfg.lanes)


def load_lane_bits(cfg: TileConfig) -> int:
    """Bits of one load-port lane: a vector, an instruction or a VXM lane entry."""
    return max(cfg.vector_bits, isa.INSTR_BITS, cfg.HOST_WORD * VXM_PARAM_WORDS)


def load_row_bits(cfg: TileConfig) -> int:
    """Bits of the load port's row: enough for the deepest of MEM, IMEM and VXM_PARAM."""
    return max(log2(cfg.mem_depth), log2(cfg.iq_depth), log2(cfg.vxm_param_depth), 1)


def addr(region: Region, slice_index: int = 0, word: int = 0) -> int:
    return (int(region) << REGION_SHIFT) | (slice_index << SLICE_SHIFT) | word


def csr(reg: int) -> int:
    return addr(Region.CSR, 0, int(reg))


def trace_fields(cfg: TileConfig) -> dict[str, tuple[int, int]]:
    """(first host word, bits) of each field of a trace entry: the write's cycle (SAC), its
    address, then the vector (``Region.TRACE`` word ``entry * trace_words + k``)."""
    return {"cycle": (0, cfg.CYCLE_BITS), "addr": (1, isa.ADDR_BITS), "data": (2, cfg.vector_bits)}


def trace_words(cfg: TileConfig) -> int:
    """32-bit words per trace entry."""
    return sum(-(-bits // cfg.HOST_WORD) for _, bits in trace_fields(cfg).values())


def log2(n: int) -> int:
    return (n - 1).bit_length() if n > 1 else 0


# ---- the configuration block: the tile's whole TileConfig, for the host to check --------------
def config_field_names(cfg: TileConfig | None = None) -> list[str]:
    """The fields of :class:`TileConfig` that ``cfg`` lists (:meth:`TileConfig.to_dict`: an
    optional field only where it differs from its ``OPTIONAL_FIELDS`` value; without ``cfg``,
    the fields every configuration lists), in declaration order: word ``k`` of the block is
    field ``k``."""
    return [f.name for f in dataclasses.fields(TileConfig)
            if f.name not in TileConfig.OPTIONAL_FIELDS or (cfg is not None and f.name in cfg.to_dict())]


def field_word(name: str, v) -> int:
    """A field's configuration word: its value, or for a text field (``TileConfig.TEXT_FIELDS``)
    the index of its value in the field's choices (``mxm_dtype``: ``config.DTYPES``,
    ``mxm_layout``: ``config.LAYOUTS``)."""
    choices = TileConfig.TEXT_FIELDS.get(name)
    return choices.index(v) if choices else v


def field_value(name: str, word: int):
    """The value of field ``name`` that configuration word ``word`` stands for."""
    choices = TileConfig.TEXT_FIELDS.get(name)
    return choices[word] if choices else word


def _field_text(name: str, word: int) -> str:
    choices = TileConfig.TEXT_FIELDS.get(name)
    if choices and not 0 <= word < len(choices):
        return f"{word} (no such {name})"
    return repr(field_value(name, word))


def config_words(cfg: TileConfig) -> list[int]:
    """Field ``k`` of ``cfg`` is word ``k`` (read at ``Csr.CONFIG_BASE + k``), one 32-bit word
    each (a text field: the index of its value, :func:`field_word`)."""
    names = config_field_names(cfg)
    if len(names) > CONFIG_MAX_FIELDS:
        raise ConfigError(f"TileConfig has {len(names)} fields; the host map reserves {CONFIG_MAX_FIELDS} "
                          f"configuration words")
    words = []
    for name in names:
        v = field_word(name, getattr(cfg, name))
        if not 0 <= v < 1 << 32:
            raise ConfigError(f"{name} = {v} does not fit a 32-bit configuration word")
        words.append(v)
    return words


def config_hash(cfg: TileConfig) -> int:
    """CRC-32 of the field names and the words of ``cfg``: equal hashes mean equal
    configurations from the same field list (a difference confined to one word is always
    detected; CRC-32 catches every burst of up to 32 bits)."""
    names = ",".join(config_field_names(cfg)).encode()
    words = config_words(cfg)
    return zlib.crc32(struct.pack(f"<{len(words)}I", *words), zlib.crc32(names))


def config_header(cfg: TileConfig) -> list[int]:
    """What the words of :data:`CONFIG_HEADER` read in a tile built from ``cfg``."""
    return [CONFIG_FORMAT_VERSION, len(config_field_names(cfg)), config_hash(cfg)]


def config_csrs(cfg: TileConfig) -> dict[int, int]:
    """``{CSR word: constant}`` for the whole configuration block of a tile built from ``cfg``
    (the words from ``CONFIG_BASE + CONFIG_FIELDS`` on are not listed: they read as 0)."""
    regs = dict(zip(CONFIG_HEADER, config_header(cfg)))
    regs.update({Csr.CONFIG_BASE + k: w for k, w in enumerate(config_words(cfg))})
    return regs


def config_mismatch(cfg: TileConfig, words, header=None) -> list[str]:
    """How a tile's configuration (``words``, read from ``CONFIG_BASE`` on, and optionally
    its ``header``, the words of :data:`CONFIG_HEADER`) differs from ``cfg``, the
    program's: one readable problem per line, such as
    ``"mem_depth: tile has 64, program needs 2048"``; empty if they agree."""
    problems = []
    names, want = config_field_names(cfg), config_words(cfg)
    required, declared = config_field_names(), [f.name for f in dataclasses.fields(TileConfig)]
    words = [int(w) for w in words]
    if header is not None:
        version, n, digest = (int(v) for v in header)
        if version == 0:
            return [f"the tile has no configuration block (CONFIG_VERSION reads 0; "
                    f"the host expects format {CONFIG_FORMAT_VERSION}): rebuild it"]
        if version != CONFIG_FORMAT_VERSION:
            return [f"configuration block format: tile has {version}, host expects {CONFIG_FORMAT_VERSION}"]
        if n != len(names) and min(n, len(names)) < len(required):
            problems.append(f"number of configuration fields: tile has {n}, program needs {len(names)} "
                            f"(the tile was built from a different TileConfig field list; the fields "
                            f"below are compared by position)")
        words = words[:n]
    for k, name in enumerate(names):
        if k >= len(words) and name in TileConfig.OPTIONAL_FIELDS:    # (a tile lists it only where set)
            problems.append(f"{name}: tile has {TileConfig.OPTIONAL_FIELDS[name]!r} (it does not list the field), "
                            f"program needs {_field_text(name, want[k])}")
        elif k >= len(words):
            problems.append(f"{name}: tile does not report it, program needs {_field_text(name, want[k])}")
        elif words[k] != want[k]:
            problems.append(f"{name}: tile has {_field_text(name, words[k])}, program needs {_field_text(name, want[k])}")
    for k in range(len(names), len(words)):
        if len(names) == len(required) and k < len(declared) and declared[k] in TileConfig.OPTIONAL_FIELDS:
            name = declared[k]
            problems.append(f"{name}: tile has {_field_text(name, words[k])}, program needs "
                            f"{TileConfig.OPTIONAL_FIELDS[name]!r} (it does not list the field)")
            continue
        problems.append(f"configuration word {k}: tile has {words[k]}, the program's TileConfig has no field {k}")
    if header is not None and not problems and digest != config_hash(cfg):
        problems.append(f"configuration hash: tile has {digest:#010x}, program needs {config_hash(cfg):#010x} "
                        f"(same values, but the field names or their order differ)")
    return problems
