"""Chip-to-chip link: flit format, error code and the timing rules the compiler uses.

One place for the numbers the link hardware (``hdl/link/``), the golden model and the
compiler share.  ``docs/c2c.md`` explains the mechanism.

Flit (one per link per sender cycle)::

    valid | kind (2 bits) | payload (link_width bits) | check (SECDED, ecc_bits)

``kind``: DATA (a piece of a vector, flit ``f`` carries bits ``f*W..f*W+W-1``), SYNC (the
parent's HAC), PROBE (the child's HAC, echoed back), ECHO.  The check bits are a
Hamming code over ``kind + payload`` plus an overall parity bit: every single-bit error is
corrected, every double-bit error detected.
"""

from __future__ import annotations

import enum
import math

from lpu_arch.config import TileConfig


class Kind(enum.IntEnum):
    DATA = 0
    SYNC = 1
    PROBE = 2
    ECHO = 3


KIND_BITS = 2


# ---- SECDED Hamming code ----------------------------------------------------------------------
def hamming_positions(k: int) -> list[int]:
    """Codeword position (1-based, powers of two are parity) of each of ``k`` data bits:
    the positions of a ``k + parity_bits(k)``-bit codeword that are not powers of two."""
    return [p for p in range(1, k + parity_bits(k) + 1) if p & (p - 1)]


def parity_bits(k: int) -> int:
    """Hamming parity bits for ``k`` data bits (the overall parity bit not included)."""
    r = 0
    while (1 << r) < k + r + 1:
        r += 1
    return r


def ecc_bits(k: int) -> int:
    return parity_bits(k) + 1


def parity_masks(k: int) -> list[int]:
    """Mask of the data bits each Hamming parity bit covers (parity i = XOR of data & mask)."""
    pos = hamming_positions(k)
    return [sum(1 << j for j, p in enumerate(pos) if p >> i & 1) for i in range(parity_bits(k))]


def ecc_encode(data: int, k: int) -> int:
    """Check bits of ``data`` (k bits): Hamming parity bits, then the overall parity bit
    (of data and Hamming parity) in the top bit."""
    r = parity_bits(k)
    par = sum(((data & m).bit_count() & 1) << i for i, m in enumerate(parity_masks(k)))
    overall = (data.bit_count() + par.bit_count()) & 1
    return par | overall << r


class EccStatus(enum.IntEnum):
    OK = 0
    CORRECTED = 1
    UNCORRECTABLE = 2


def ecc_decode(data: int, check: int, k: int) -> tuple[int, EccStatus]:
    """Correct a single flipped bit anywhere in ``data`` or ``check``; detect two."""
    r = parity_bits(k)
    par, overall = check & ((1 << r) - 1), check >> r & 1
    syndrome = par ^ (ecc_encode(data, k) & ((1 << r) - 1))
    odd = (data.bit_count() + par.bit_count() + overall) & 1
    if not syndrome and not odd:
        return data, EccStatus.OK
    if not odd:
        return data, EccStatus.UNCORRECTABLE          # two bits flipped
    if syndrome == 0 or syndrome & (syndrome - 1) == 0:
        return data, EccStatus.CORRECTED              # the overall or a Hamming parity bit
    pos = hamming_positions(k)
    if syndrome in pos:
        return data ^ (1 << pos.index(syndrome)), EccStatus.CORRECTED
    return data, EccStatus.UNCORRECTABLE              # syndrome outside the codeword


def flit_data_bits(cfg: TileConfig) -> int:
    """Bits the check covers: kind + payload."""
    return KIND_BITS + cfg.link_width


def flit_fields(cfg: TileConfig) -> dict[str, tuple[int, int]]:
    """(lsb, width) of valid, kind, payload and check inside a flit, low bits first."""
    W = cfg.link_width
    return {"valid": (0, 1), "kind": (1, KIND_BITS), "payload": (1 + KIND_BITS, W),
            "check": (1 + KIND_BITS + W, ecc_bits(flit_data_bits(cfg)))}


def flit_bits(cfg: TileConfig) -> int:
    """valid + kind + payload + check bits."""
    return 1 + flit_data_bits(cfg) + ecc_bits(flit_data_bits(cfg))


# ---- timing -----------------------------------------------------------------------------------
TX_START = 1       # SEND issued on SAC t: its first flit leaves the sender on t + TX_START
RX_PIPE_MAX = 8    # receiver cycles from a flit entering the elastic buffer to its vector being
                   # ready for RECV: clock-domain crossing (at most 4) + decode + assembly (4).
                   # Measured on the RTL (hdl/link/rx.py, docs/c2c.md): 5 to 6 cycles by phase.
HAC_ERROR_MAX = 2  # |HAC(child) - HAC(parent)| at any instant, in cycles (probe rounding + crossing).
                   # Measured on the RTL at one instant, with each clock's phase: -1.13..+0.12.


def drift(cfg: TileConfig, cycles: int) -> int:
    """Worst-case cycles two tiles drift apart over ``cycles``: each may be ``max_ppm``
    away from the root, in opposite directions."""
    return math.ceil(2 * cfg.max_ppm * 1e-6 * cycles)


def deskew_interval(cfg: TileConfig, budget: int = 4) -> int:
    """SAC cycles between RUNTIME_DESKEWs so that tiles drift at most ``budget`` cycles
    apart in between (a power of two, at most 65536)."""
    if cfg.max_ppm == 0:
        return 1 << 16
    n = budget / (2 * cfg.max_ppm * 1e-6)
    return min(1 << 16, 1 << max(6, int(math.floor(math.log2(n)))))


def deskew_slack(cfg: TileConfig) -> int:
    """RUNTIME_DESKEW's slack: the most a tile can fall behind the root between two
    deskews, plus the HAC error, so that no tile arrives late."""
    return math.ceil(cfg.max_ppm * 1e-6 * deskew_interval(cfg)) + HAC_ERROR_MAX + 1


def min_distance(cfg: TileConfig) -> int:
    """Fewest SAC cycles from a SEND to the RECV of the same vector on the other tile:
    serialisation + the longest declared wire + the receive pipeline + skew (HAC error,
    drift between deskews, one cycle of phase)."""
    skew = HAC_ERROR_MAX + drift(cfg, deskew_interval(cfg)) + 1
    return TX_START + cfg.flits_per_vector + cfg.link_latency_max + RX_PIPE_MAX + skew


# ---- an armed start: the host's lead and the program's first RUNTIME_DESKEW -----------------
START_LEAD = 32          # cycles the host allows itself to arm every tile after reading a HAC (it takes 6)
START_SLACK = HAC_ERROR_MAX   # slack of a program's first RUNTIME_DESKEW (SAC 0): a tile whose
                              # HAC a SYNC moved past START_HAC starts up to this late and catches up


def armed_start_hac(cfg: TileConfig, hac_now: int, lead: int = START_LEAD) -> int:
    """The ``START_HAC`` a host arms every tile with, having read ``hac_now``: ``lead``
    cycles later.  Every tile's cycle 0 is then that HAC of its own (its HAC within
    ``HAC_ERROR_MAX`` of the root's), the start sets the deskew unit's offset to it, and the
    program's first instruction, a ``RUNTIME_DESKEW`` of slack ``START_SLACK``, releases
    every tile on the same HAC cycle ``START_SLACK`` cycles later.  (A program that starts
    with ``DESKEW`` instead waits for the next epoch boundary, up to ``epoch`` cycles.)"""
    return (hac_now + lead) % (1 << cfg.HAC_BITS)


def wall_cycles(cfg: TileConfig, cycles: int, slacks: int, lead: int = START_LEAD) -> int:
    """Wall cycles (HAC) of an armed run from the host's HAC read to done, when every tile
    keeps to its HAC: the arming ``lead``, the program's ``cycles`` (SAC) and the slack of
    every RUNTIME_DESKEW it issues (``slacks``, the first one's included).  A tile whose
    clock drifts ends within the skew of :func:`min_distance` of it: the HAC error, the
    drift since the last RUNTIME_DESKEW and one cycle of phase."""
    return lead + cycles + slacks


# ---- the deskew stall bound: a stall beyond it is a fault that halts the tile -----------------
DESKEW_STALL_MARGIN = 16   # cycles of margin on top of the worst case the specification allows
                           # (clock phase, rounding, a SYNC landing during the wait)


def deskew_stall_max(cfg: TileConfig) -> int:
    """Most cycles a ``DESKEW`` may stall the core: it waits for the next HAC epoch boundary
    (1 to ``epoch`` cycles), a SYNC during the wait may move the HAC back by up to
    ``HAC_ERROR_MAX``, plus ``DESKEW_STALL_MARGIN``.  A longer stall raises
    ``DeskewStatus.STALL_TIMEOUT`` and halts the tile (``hdl/link/deskew.py`` ``DeskewUnit``)."""
    return cfg.epoch + HAC_ERROR_MAX + DESKEW_STALL_MARGIN


def runtime_deskew_stall_extra(cfg: TileConfig) -> int:
    """``runtime_deskew_stall_max(cfg, slack) - slack``, the part that the hardware adds to
    the instruction's slack: the one cycle of the target (``offset + sac + 1 + slack``), the
    HAC error at the previous release and at this one (``2 * HAC_ERROR_MAX``), the most the
    tile's program can run ahead of the HAC between two RUNTIME_DESKEWs
    ``deskew_interval`` apart (``drift``, both clocks ``max_ppm`` away in opposite
    directions), plus ``DESKEW_STALL_MARGIN``."""
    return 1 + 2 * HAC_ERROR_MAX + drift(cfg, deskew_interval(cfg)) + DESKEW_STALL_MARGIN


def runtime_deskew_stall_max(cfg: TileConfig, slack: int) -> int:
    """Most cycles a ``RUNTIME_DESKEW slack`` may stall the core within the specification
    (clocks within ``max_ppm``, RUNTIME_DESKEWs at most ``deskew_interval`` SAC cycles
    apart, the HAC locked): ``slack + runtime_deskew_stall_extra(cfg)``.  A longer stall
    raises ``DeskewStatus.STALL_TIMEOUT`` and halts the tile."""
    return slack + runtime_deskew_stall_extra(cfg)
