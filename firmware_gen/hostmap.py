"""The host interface's address map, shared by the HDL decoder, the cocotb driver and
the (future) UART bridge.

The host bus is word-addressed with 32-bit data.  Address bits ``[28:32]`` pick a
region, bits ``[20:28]`` a slice (position for IMEM, MEM index for DMEM and TRACE),
bits ``[0:20]`` a word inside it.  Reads return data two cycles after ``re``
(``READ_LATENCY``).  IMEM and DMEM accesses are honoured only while the tile is stopped.
"""

from __future__ import annotations

import enum

from .config import ConfigError, TileConfig

READ_LATENCY = 2
REGION_SHIFT, SLICE_SHIFT = 28, 20
WORD_MASK = (1 << SLICE_SHIFT) - 1


class Region(enum.IntEnum):
    CSR = 0
    IMEM = 1
    DMEM = 2
    TRACE = 3
    VXM_PARAM = 4   # word (entry * lanes + lane) * VXM_PARAM_WORDS + k, see vxm_param_words
    VXM_TABLE = 5   # word i = activation table entry i (low byte)


class Csr(enum.IntEnum):
    """Control and status registers (word index inside the CSR region)."""
    CTRL = 0        # write: bit 0 = start
    STATUS = 1      # read: see Status
    CYCLES = 2      # read: cycle counter (frozen at done)
    CONFIG0 = 3     # read: lanes | streams << 16
    CONFIG1 = 4     # read: mem_slices | log2(mem_depth) << 8 | log2(iq_depth) << 16 | log2(trace_depth+1) << 24
    ILLEGAL_BASE = 0x10     # read: word k, bit b = queue at position 32k+b decoded an illegal opcode
    ADDR_FAULT_BASE = 0x18  # read: word k, bit b = MEM slice 32k+b addressed beyond its depth
    BUSY_BASE = 0x100       # read: BUSY_BASE + p = cycles slice p issued a data instruction
    TRACE_COUNT_BASE = 0x200  # read: TRACE_COUNT_BASE + i = events recorded by MEM slice i


class Status(enum.IntFlag):
    RUNNING = 1
    DONE = 2
    ILLEGAL_OP = 4       # sticky until start: some queue decoded an illegal opcode
    ADDR_FAULT = 8       # sticky until start: some MEM access beyond its depth
    TRACE_OVERFLOW = 16  # sticky until start: a trace buffer filled up (events lost)


# VXM parameter entry, per lane (one VOP's operands; ranges in firmware_gen/numerics.py):
VXM_FIELDS = ("bias_a", "bias_b", "m_a", "s_a", "m_b", "s_b", "m_c", "s_c")
VXM_PARAM_WORDS = 5   # w0 bias_a, w1 bias_b, w2 m_a | s_a << 16, w3 m_b | s_b << 16, w4 m_c | s_c << 16


def vxm_param_words(lane: dict) -> list[int]:
    """The 5 host words of one lane of one VXM parameter entry (``lane[field]`` ints)."""
    return [lane["bias_a"] & 0xFFFFFFFF, lane["bias_b"] & 0xFFFFFFFF,
            lane["m_a"] | lane["s_a"] << 16, lane["m_b"] | lane["s_b"] << 16,
            lane["m_c"] | lane["s_c"] << 16]


def check_fits(cfg: TileConfig) -> None:
    """The address map limits the configuration; say which limit is broken."""
    if cfg.positions > 256:
        raise ConfigError(f"the host map addresses up to 256 slice positions; this tile has {cfg.positions}")
    if cfg.mem_depth * cfg.words_per_vector > WORD_MASK + 1:
        raise ConfigError(f"a MEM slice of {cfg.mem_depth} x {cfg.lanes} bytes exceeds the host "
                          f"map's {WORD_MASK + 1} words per slice")
    if cfg.vxm_param_depth * cfg.lanes * VXM_PARAM_WORDS > WORD_MASK + 1:
        raise ConfigError(f"the VXM parameter memory ({cfg.vxm_param_depth} entries x {cfg.lanes} lanes x "
                          f"{VXM_PARAM_WORDS} words) exceeds the host map's {WORD_MASK + 1} words")


def addr(region: Region, slice_index: int = 0, word: int = 0) -> int:
    return (int(region) << REGION_SHIFT) | (slice_index << SLICE_SHIFT) | word


def csr(reg: int) -> int:
    return addr(Region.CSR, 0, int(reg))


def trace_words(cfg: TileConfig) -> int:
    """32-bit words per trace entry: cycle, address, then the vector."""
    return 2 + cfg.words_per_vector


def log2(n: int) -> int:
    return (n - 1).bit_length() if n > 1 else 0
