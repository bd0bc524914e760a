"""An MoE expert slot (``docs/moe.md``, *Slots*): one routed expert's SwiGLU FFN placed
like any other (``ffn.FfnPlan``) on its tile's state, beside the shared expert and the
other slots, but reading its weights at the tile's template rows relocated by one base
register and naming its parameter entries through another, so that the host picks the
expert (or none) per run without changing a cycle.
"""

from __future__ import annotations

import numpy as np

from lpu_arch.isa import Instr

from firmware_gen.compiler.ffn import FfnPlan
from firmware_gen.compiler.moe_layout import Template
from firmware_gen.compiler.tile_plan import read_probe
from firmware_gen.compiler.tile_state import TileState


class ExpertSlot(FfnPlan):
    """One expert slot: a batch-1 SwiGLU FFN of a routed expert's shape (or, with
    ``i_blocks``/``j_blocks``/``h_route``, one tile's share of it, as :class:`FfnPlan`)
    placed on the tile's ``state`` (shared with the host plan there and the other slots).
    It reads x block k of ``token`` (of ``tokens``) from x slot ``k * tokens + token`` (where
    the host plan placed it) and puts its h from x slot ``h0`` on; its weights are at the
    ``template`` rows (``moe_layout.lay_out_experts``) and its parameter entries from
    ``pbase`` (local expert 0's), relocated by base registers ``w_reg`` (READ) and ``v_reg``
    (VOP)."""

    def __init__(self, cfg, spec, state: TileState, *, token, tokens, h0, template: Template, pbase, w_reg, v_reg,
                 i_blocks=None, j_blocks=None, h_route=None):
        super().__init__(cfg, spec, np.zeros(spec.H, np.int64), i_blocks, j_blocks, h_route, state=state)
        self.token, self.tokens, self.h0, self.w_reg, self.v_reg = token, tokens, h0, w_reg, v_reg
        self.template, self.p_next = template, pbase
        self.ramp = False        # every expert's weights sit at the same rows: no ramp blocks
        self.partial_rows = False   # (every slot reads whole template blocks)

    def x_slot(self, k, b):
        return k * self.tokens + self.token

    def h_slot(self, i, b):
        return self.h0 + i

    def new_param(self, **fields):
        self.p_next += 1             # the values are each expert's (moe_layout.expert_params)
        return self.p_next - 1

    def take_window(self, side, t_s, ident, block, who, n, rows):
        """The READs of weight block ``ident`` at its template rows, relocated by ``w_reg``
        (the values are each expert's, loaded by ``moe_layout.load_expert_weights``)."""
        d, state = self.in_dir(side), self.state
        for j, m, cycles in self.window_runs(side, t_s, n, rows):
            state.res.take_run(m, cycles, read_probe(j, d), self.pos(side), who)   # (drives: any base)
            for c, r in enumerate(cycles):
                row = self.template.row((ident, c * self.n + j, m), m)
                state.emit(m, r, Instr.read(j, d, row, base=self.w_reg))
