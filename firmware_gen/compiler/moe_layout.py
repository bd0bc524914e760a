"""Where each tile of an MoE layer keeps its experts (``docs/moe.md``, *Slots*): the
template rows every slot reads its weights through, each local expert's rows, VXM
parameter entries and activation table, placed on the tile's
:class:`~firmware_gen.compiler.tile_state.TileState` after what it already holds.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from lpu_arch.config import TileConfig
from lpu_arch.isa import BASE_OFFSET_BITS
from lpu_arch.vxm import VXM_FIELDS

from firmware_gen.golden.moe import MoeSpec
from firmware_gen.compiler import CompileError
from firmware_gen.compiler.blocks import padded_spec
from firmware_gen.compiler.ffn import FfnPlan
from firmware_gen.compiler.tile_state import SIDES, TileState


class MoeError(CompileError):
    """The MoE layer does not fit, or a routing cannot run; the message names the limit."""


class Template:
    """Where one tile's slots read their weights: every weight row a slot plan loads, by key
    ``(block, row, slice)`` with ``block`` ``("W1", i, k)``, ``("W3", i, k)``, ``("W2", j,
    i)`` or ``("Z", j, i)`` (a zero block; ``FfnPlan``'s block names), gets a row of
    ``slice`` relative to ``wbase``, the same for every slot and every expert (an expert's
    rows are ``stride`` further per local index).  ``bound[m]`` rows per slice are reserved
    before any slot is placed."""

    def __init__(self, wbase: dict, bound: dict):
        self.wbase, self.bound = dict(wbase), dict(bound)
        self.rel, self.used = {}, {m: 0 for m in bound}

    @property
    def stride(self) -> int:
        """Rows per weight slice between one local expert's rows and the next's."""
        return max(self.bound.values())

    def row(self, key, m) -> int:
        """The row of slice ``m`` that weight row ``key`` ``(block, row, slice)`` of local
        expert 0 is at (the first use of a key takes the next free template row)."""
        if key not in self.rel:
            assert self.used[m] < self.bound[m], "the template's bound was computed from the same blocks"
            self.rel[key] = self.used[m]
            self.used[m] += 1
        return self.wbase[m] + self.rel[key]


def template_bound(plan: FfnPlan) -> dict:
    """Rows per weight slice a slot of ``plan``'s shape may need: each block it loads is
    ``chunks`` rows in every weight slice of the MXM's hemisphere; W1 goes west and W3
    east, the output blocks' halves west and east, and an odd output block over any h block
    on either side (plus a zero block)."""
    js, KH, KI = plan.j_blocks, plan.KH, plan.KI
    half, odd = len(js) // 2, len(js) % 2
    per_side = len(plan.i_blocks) * KH + half * KI + odd * (KI + 1)
    return {plan.mem(side, q): per_side * plan.chunks for side in SIDES for q in range(plan.n)}


class _ParamsOnly(FfnPlan):
    """An FFN plan that places nothing: its parameter entries, in the order a slot of the
    same blocks allocates them (``expert_params``)."""

    def place_blocks(self, *args, **kw):
        pass


def expert_params(cfg, spec, i_blocks, j_blocks) -> np.ndarray:
    """The VXM parameter entries of one expert's share (``i_blocks``, ``j_blocks``) in the
    order its slot names them."""
    p = _ParamsOnly(cfg, spec, np.zeros(spec.H, np.int64), i_blocks, j_blocks).compile(place_x=False)
    return p.state.params[:p.state.n_params].copy()


def block_row(p, ident, row: int, lanes: int) -> np.ndarray:
    """Row ``row`` of weight block ``ident`` (``Template``) of the padded spec ``p``, as bytes."""
    kind, a, b = ident
    if kind == "Z":
        return np.zeros(lanes, np.uint8)
    w = {"W1": p.W1, "W3": p.W3, "W2": p.W2}[kind]
    return np.asarray(w[a * lanes + row, b * lanes:(b + 1) * lanes], np.int64).astype(np.uint8)


@dataclass
class Layout:
    """Where one tile keeps its experts (``experts``, global indices in local order):
    weight rows from ``wbase[m]`` in steps of ``stride``, parameter entries from ``pbase``
    in steps of ``P``, tables from 1 (table 0 is the shared expert's)."""
    experts: list
    wbase: dict
    stride: int
    pbase: int
    P: int


def lay_out_experts(cfg: TileConfig, spec: MoeSpec, state: TileState, where: str, experts: list, x,
                    i_blocks: list, variants: list, y_rows: int, later: int) -> tuple[Layout, Template, dict]:
    """Lay out one tile's ``experts`` after what its ``state`` holds: the template rows of
    slots of the intermediate blocks ``i_blocks`` and any of the output blocks ``variants``
    (each a tuple of blocks), each expert's rows and parameter entries (naming its table,
    1 + its local index, which it sets), and the rows and entries taken.  ``y_rows``: rows
    the slots' outputs will take; ``later``: parameter entries placed after the slots (the
    shared expert's W2); ``where``: the tile, for errors.  Returns the :class:`Layout`, the
    :class:`Template` and each variant's first entry within an expert's ``P``."""
    shapes = [FfnPlan(cfg, spec.experts[0], x, i_blocks, list(jb)) for jb in variants]
    bounds = [template_bound(sh) for sh in shapes]
    shared_h = (len(bounds) - 1) * len(i_blocks) * shapes[0].KH * shapes[0].chunks   # W1/W3: the same in each
    tpl = Template(state.next_free, {m: sum(bd[m] for bd in bounds) - shared_h for m in bounds[0]})
    offs, P = {}, 0
    for jb in variants:
        offs[jb], P = P, P + len(i_blocks) + len(jb)
    n_local, stride = len(experts), tpl.stride
    worst = max(tpl.wbase[m] + n_local * stride for m in tpl.bound)
    if worst + y_rows > cfg.mem_depth or (n_local * stride) >> BASE_OFFSET_BITS:
        raise MoeError(f"{where}: {n_local} experts of up to {stride} rows per weight slice from row "
                       f"{min(tpl.wbase[m] for m in tpl.bound)}, and {y_rows} rows of slot outputs, need "
                       f"{worst + y_rows} rows; a MEM slice holds mem_depth = {cfg.mem_depth}")
    pbase = state.n_params
    if pbase + n_local * P + later > cfg.vxm_param_depth:
        raise MoeError(f"{where}: {n_local} experts of {P} VXM parameter entries from entry {pbase} "
                       f"and {later} more of the shared expert need {pbase + n_local * P + later}; the VXM "
                       f"has vxm_param_depth = {cfg.vxm_param_depth}")
    for le, e in enumerate(experts):
        for jb in variants:
            block = expert_params(cfg, spec.experts[e], i_blocks, list(jb))
            block[:, :, VXM_FIELDS.index("table")] = 1 + le
            at = pbase + le * P + offs[jb]
            state.params[at: at + len(block)] = block
        state.set_table(1 + le, spec.experts[e].table)
    state.n_params = pbase + n_local * P
    for m in tpl.bound:
        state.next_free[m] = tpl.wbase[m] + n_local * stride
    return Layout(experts, tpl.wbase, stride, pbase, P), tpl, offs


def load_expert_weights(state: TileState, spec: MoeSpec, layout: Layout, template: Template, lanes: int) -> None:
    """Every expert of ``layout`` into the tile's memory image at its template rows (once
    every slot is placed: the template then holds every row a slot reads)."""
    for le, e in enumerate(layout.experts):
        p = padded_spec(spec.experts[e], lanes)
        for (ident, row, m), rel in template.rel.items():
            state.load(m, template.wbase[m] + le * layout.stride + rel, block_row(p, ident, row, lanes))
