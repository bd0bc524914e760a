"""Size a tile to an FFN: the smallest power-of-two depths that hold it (``lpu compile --fit``,
``lpu tray --fit``).

The FFN is compiled once on a roomy copy of the configuration (every depth below at its
architectural maximum; lanes, streams, MEM slices and the link fields as given), and what
that schedule uses is read off it: MEM rows, x slots, accumulator rows and VXM parameter
entries from the plan (:meth:`FfnPlan.capacity_needs`), instructions per queue from the
lowered program, trace events per MEM slice from the predicted writes.  The schedule does
not depend on these depths, so the fitted configuration compiles to the same program; the
fit compiles it again to make sure.
"""

from __future__ import annotations

import dataclasses
from collections import Counter

from lpu_arch import isa
from lpu_arch.config import TileConfig

from firmware_gen.compiler.ffn import FfnPlan, compile_ffn
from firmware_gen.compiler.tray import compile_ffn_tray, plan_tray, tray_config

FIELDS = ("mem_depth", "iq_depth", "trace_depth", "mxm_acc_depth", "mxm_xbuf_depth", "vxm_param_depth")


def _roomy(cfg: TileConfig) -> TileConfig:
    big = 1 << isa.MM_ACC_BITS
    return dataclasses.replace(cfg, mem_depth=TileConfig.MAX_MEM_DEPTH, iq_depth=1 << 16, mxm_acc_depth=big,
                               mxm_xbuf_depth=big, vxm_param_depth=4096,
                               trace_depth=1 << 16 if cfg.trace_depth else 0)


def _pow2(n: int) -> int:
    return max(2, 1 << (max(n, 1) - 1).bit_length())


def needs(plans: list[FfnPlan], programs: list) -> dict:
    """The most any of ``plans`` (one per tile, with its lowered program) needs of each
    field in FIELDS."""
    out = Counter()
    for plan, prog in zip(plans, programs):
        got = {**plan.capacity_needs(), "iq_depth": max(len(q) + 1 for q in prog.queues.values())}
        if plan.cfg.trace_depth:
            per_slice = Counter(m for m, _, _ in [*plan.outputs.values(), *plan.h_stored.values()])
            got["trace_depth"] = max(per_slice.values(), default=1)
        for k, v in got.items():
            out[k] = max(out[k], v)
    return dict(out)


def fitted(cfg: TileConfig, need: dict) -> TileConfig:
    """``cfg`` with each field of ``need`` at the smallest power of two that holds it."""
    return dataclasses.replace(cfg, **{k: _pow2(v) for k, v in need.items()})


def fit_ffn(spec, x, cfg: TileConfig, tiles: int = 1) -> tuple[TileConfig, dict]:
    """The smallest-depth configuration (other fields as ``cfg``) on which the FFN compiles
    for one tile or a tray of ``tiles``, and what it needs of each field.  Raises
    :class:`CompileError` when it does not fit even at the largest depths (then it needs
    more tiles, lanes or MEM slices)."""
    roomy = _roomy(cfg if tiles == 1 else tray_config(cfg, tiles))
    if tiles == 1:
        plans = [FfnPlan(roomy, spec, x).compile()]
        programs = [plans[0].program()]
    else:
        tray = plan_tray(roomy, spec, x, tiles)
        programs = tray.programs()            # the deskews past each tile's work come off
        plans = tray.plans
    need = needs(plans, programs)
    out = fitted(roomy, need)
    cycles = max(p.state.res.done_cycles() for p in plans)
    got = compile_ffn(spec, x, out)[1].cycles if tiles == 1 else compile_ffn_tray(spec, x, out, tiles)[1].cycles
    if got != cycles:
        raise RuntimeError(f"internal error: the fitted tile compiles to {got} cycles, the roomy one to {cycles}")
    return out, need


RESIDENT_FIELDS = ("mem_depth", "iq_depth", "vxm_param_depth", "vxm_tables")


def fit_resident_tray(specs: list, cfg: TileConfig, tiles: int) -> tuple[TileConfig, dict]:
    """The smallest depths (``RESIDENT_FIELDS``; the other fields as ``cfg``) on which every
    layer of ``specs`` (dense or MoE) is resident on a tray of ``tiles`` tiles
    (``resident_tray.compile_resident_tray``): what the layers take on the fullest tile,
    rows, parameter entries, activation tables and instructions per queue, each at the next
    power of two.  Raises :class:`CompileError` when they do not fit even at the largest
    depths (then they need more tiles)."""
    from firmware_gen.compiler.resident_tray import compile_resident_tray
    roomy = dataclasses.replace(cfg, mem_depth=TileConfig.MAX_MEM_DEPTH, iq_depth=1 << 16, vxm_param_depth=4096,
                                vxm_tables=256)
    rt = compile_resident_tray(specs, roomy, tiles)
    need = {"mem_depth": max(max(r.values()) for r in rt.rows), "vxm_param_depth": max(rt.params),
            "vxm_tables": max(rt.tables),
            "iq_depth": max(len(w) for img in rt.images for w in img.values()) + 1}
    out = dataclasses.replace(cfg, **{k: _pow2(v) for k, v in need.items()})
    got = compile_resident_tray(specs, out, tiles)
    if [ly.manifest.cycles for ly in got.layers] != [ly.manifest.cycles for ly in rt.layers]:
        raise RuntimeError("internal error: the fitted tray compiles to other cycles than the roomy one")
    return out, need
