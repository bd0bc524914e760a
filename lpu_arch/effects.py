"""What each data instruction reads from and drives onto the streams, and when.

The one statement of every opcode's stream effects (``docs/isa.md``): the golden model
drives its results, the schedule pictures draw occupancy and the program checker follows
values with it.  Offsets are cycles after the issue cycle; every access is at the
issuing slice's position.
"""

from __future__ import annotations

from typing import NamedTuple

from lpu_arch.isa import (C2C_LATENCY, EAST, INT32_PLANES, MXM_LATENCY, READ_LATENCY, SXM_LATENCY, VXM_LATENCY,
                  WEST, ArgmaxFlag, Instr, MMFlag, Op, SxmFlag, VopFlag)

SXM_OUT_OPS = frozenset({Op.SHIFT, Op.PERM, Op.DIST, Op.TRO, Op.MAX, Op.ARGMAX})
SAMPLE_OPS = frozenset({Op.WRITE, Op.LX, Op.TRI, Op.SHIFT, Op.DIST, Op.SETB, Op.SEND, Op.SENDM})


class Access(NamedTuple):
    dir: int        # EAST or WEST
    stream: int
    offset: int     # cycles after issue


class Effects(NamedTuple):
    reads: tuple    # Access: the stream value sampled at the slice's position
    drives: tuple   # Access: the stream the slice drives (replacing the passing value)


def mxm_out_dir(slice_name: str) -> int:
    """An MXM emits towards the VXM: MXM_W east-flowing, MXM_E west-flowing (in either
    layout, ``TileConfig.mxm_layout``, MXM_W is west of the VXM)."""
    return EAST if slice_name == "MXM_W" else WEST


def _outs(ins: Instr, flags, latency: int) -> list[Access]:
    return [Access(d, ins.operand("out"), latency)
            for flag, d in ((flags.OUT_E, EAST), (flags.OUT_W, WEST)) if ins.aux & flag]


def effects_key(ins: Instr, slice_name: str) -> tuple:
    """What :func:`effects` depends on, for a cache: the instruction without its address
    field (a READ's or WRITE's address, an MM's rows, a VOP's parameter entry), except an
    ``LW``'s, which holds its ``rows``."""
    return (slice_name, ins.op, ins.dir, ins.stream, ins.count, ins.delay, ins.aux,
            ins.addr if ins.op == Op.LW else 0)


def effects(ins: Instr, slice_name: str, lanes: int, planes: int = INT32_PLANES,
            vxm_latency: int = VXM_LATENCY) -> Effects:
    """The stream reads and drives of data instruction ``ins`` issued by ``slice_name``
    on a tile of ``lanes`` lanes (``LW`` samples one stream per weight row) whose
    accumulators travel in ``planes`` byte planes (``TileConfig.acc_planes``: an MM's
    EMIT drives, and a VOP's A and B read, that many consecutive streams) and whose VOP
    results are driven ``vxm_latency`` cycles after issue (``TileConfig.vxm_latency``)."""
    op, d, s = ins.op, ins.dir, ins.stream
    reads, drives = [], []
    if op == Op.READ:
        drives.append(Access(d, s, READ_LATENCY))
    elif op == Op.RECV:
        drives.append(Access(d, s, C2C_LATENCY))
    elif op in SAMPLE_OPS:
        reads.append(Access(d, s, 0))
    if op == Op.PERM:
        reads += [Access(d, s, 0), Access(d, ins.operand("map"), 0)]
    elif op == Op.MAX:              # x and w, one read where they are the same stream
        reads += [Access(d, w, 0) for w in dict.fromkeys((s, ins.operand("with")))]
    elif op == Op.LW:
        n, delay = ins.operand("n"), ins.operand("delay")
        reads += [Access(d, s + r % n, delay + r // n) for r in range(ins.lw_rows(lanes))]
    elif op == Op.MM:
        if not ins.aux & MMFlag.XBUF:
            reads.append(Access(d, s, 0))
        if ins.aux & MMFlag.EMIT:
            drives += [Access(mxm_out_dir(slice_name), ins.operand("out") + b, MXM_LATENCY)
                       for b in range(planes)]
    elif op == Op.ARGMAX:           # an accumulator vector, as an MM's EMIT drives it
        reads += [Access(d, s + b, 0) for b in range(planes)]
    elif op == Op.VOP:
        reads += [Access(d, s + b, 0) for b in range(planes)]
        if ins.aux & (VopFlag.GATE | VopFlag.ADD):
            reads += [Access(1 - d, s + b, 0) for b in range(planes)]
        drives += _outs(ins, VopFlag, vxm_latency)
    if op in SXM_OUT_OPS:
        drives += _outs(ins, ArgmaxFlag if op == Op.ARGMAX else SxmFlag, SXM_LATENCY)
    return Effects(tuple(reads), tuple(drives))
