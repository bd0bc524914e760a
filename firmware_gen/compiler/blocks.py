"""An FFN as the tile holds it: every shape padded to whole ``lanes x lanes`` blocks
(``docs/compiler.md``, *Padding*), and vectors as the bytes of MEM rows.
"""

from __future__ import annotations

import numpy as np

from firmware_gen.golden.numerics import FfnSpec


def pad(a, shape, dtype=np.int64) -> np.ndarray:
    """``a`` in the top left corner of zeros of ``shape`` (``dtype``)."""
    out = np.zeros(shape, dtype)
    out[tuple(slice(0, s) for s in np.shape(a))] = a
    return out


def _per_row(rq, n, pad_to):
    m, s = (np.broadcast_to(np.asarray(v, np.int64), (n,)) for v in rq)
    return pad(m, (pad_to,)) + np.r_[np.zeros(n, np.int64), np.ones(pad_to - n, np.int64)], pad(s, (pad_to,))


def padded_spec(spec: FfnSpec, lanes: int) -> FfnSpec:
    """The FFN the hardware computes: H and I rounded up to whole blocks, zero weights,
    zero biases and identity requantisation (multiplier 1, shift 0) in the padding."""
    Hp, Ip = -(-spec.H // lanes) * lanes, -(-spec.I // lanes) * lanes
    kw = dict(kind=spec.kind, dtype=spec.dtype, W1=pad(spec.W1, (Ip, Hp), spec.W1.dtype),
              W2=pad(spec.W2, (Hp, Ip), spec.W2.dtype), table=spec.table,
              rq1=_per_row(spec.rq1, spec.I, Ip), rq2=_per_row(spec.rq2, spec.H, Hp),
              x_scale=spec.x_scale, out_scale=spec.out_scale if np.ndim(spec.out_scale) == 0
              else np.r_[spec.out_scale, np.ones(Hp - spec.H)])       # (padding rows: 1.0)
    if spec.kind == "swiglu":
        kw.update(W3=pad(spec.W3, (Ip, Hp), spec.W3.dtype), rq3=_per_row(spec.rq3, spec.I, Ip), rq_mul=spec.rq_mul)
    else:
        kw.update(b1=pad(spec.b1, (Ip,)), b2=pad(spec.b2, (Hp,)))
    return FfnSpec(**kw)


def x_image(x_rows: list, x_int8, lanes: int, H: int) -> dict:
    """``{slice: {row: vector}}``: the MEM rows of int8 input ``x`` ((H,) or (B, H)) at a
    plan's ``x_rows`` ((slice, addr, block, column) of every copy of x), to write before a
    run of a program compiled for another x (the schedule does not depend on x's values)."""
    x = np.atleast_2d(np.asarray(x_int8, np.int64))
    out = {}
    for m, a, k, b in x_rows:
        v = pad(x[b, k * lanes:min((k + 1) * lanes, H)], (lanes,))
        out.setdefault(m, {})[a] = [int(u) & 0xFF for u in v]
    return out


def with_x(memory: dict, x_rows: list, x_int8, lanes: int, H: int) -> dict:
    """A copy of ``memory`` (``{slice: rows}``) with ``x`` written at ``x_rows`` (:func:`x_image`)."""
    mem = {m: a.copy() for m, a in memory.items()}
    for m, rows in x_image(x_rows, x_int8, lanes, H).items():
        for a, v in rows.items():
            mem[m][a] = v
    return mem


def vector_bytes(a, j: int, lanes: int) -> tuple:
    """Block ``j`` (lanes ``j*lanes`` on) of integer vector ``a`` as bytes, a predicted write's data."""
    return tuple(int(v) & 0xFF for v in a[j * lanes:(j + 1) * lanes])


def gather_blocks(out: np.ndarray, outputs: dict, memory: dict, lanes: int) -> np.ndarray:
    """``out`` (uint8) with each block ``outputs[(b, j)] = (slice, addr, ...)`` of ``memory`` in row b."""
    for (b, j), (m, addr, *_) in outputs.items():
        out[b, j * lanes:(j + 1) * lanes] = np.asarray(memory[m][addr], np.uint8)
    return out
