"""The bench's FFN suite: decode shapes from small to the largest that fits a tile, classic
and SwiGLU, and a batched one, each a seeded example in the tile's number format
(``make bench``'s FFN rows, its FP8 rows on the RTL)."""

from __future__ import annotations

from lpu_arch import TileConfig

from firmware_gen.compiler import CompileError
from firmware_gen.compiler.ffn import compile_ffn
from firmware_gen.compiler.ffn_example import example_ffn


def ffn_suite(cfg: TileConfig) -> list[tuple]:
    """(kind, H, I, batch) scaled to the tile: decode shapes up to the largest that fits
    and one batch of ``lanes`` columns."""
    L = cfg.lanes
    return [("swiglu", L, L, 1), ("swiglu", 2 * L, 4 * L, 1), ("swiglu", 4 * L, 8 * L, 1),
            ("swiglu", 8 * L, 16 * L, 1), ("classic", 8 * L, 32 * L, 1), ("swiglu", 8 * L, 32 * L, 1),
            ("swiglu", 8 * L, 16 * L, L)]


def compile_suite(cfg: TileConfig, verbose: bool = True) -> list[tuple]:
    """``((kind, H, I, batch), example, program, manifest)`` of every FFN of the suite that
    compiles for ``cfg`` (seeded examples in its number format); with ``verbose`` the others
    are said to be skipped."""
    out = []
    for kind, H, I, B in ffn_suite(cfg):
        try:
            ex = example_ffn(kind, H, I, B, seed=1, dtype=cfg.mxm_dtype)
            out.append(((kind, H, I, B), ex, *compile_ffn(ex.spec, ex.x_int8, cfg)))
        except CompileError as e:
            if verbose:
                print(f"skipped {kind} {H}x{I} b{B}: {e}")
    return out
