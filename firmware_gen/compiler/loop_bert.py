"""What a BERT adds to the token loop on the tile (``host/bert_loop.py`` makes all-MiniLM-L6-v2 such a
model; ``golden/token_loop.py`` states each piece): per-lane requantisations and biases (a
parameter entry per block), residual diagonals per lane, the activation's tables by lane, the
position rows summed with the embedding before a LayerNorm, and position 0's own
requantisations and LayerNorms.  :class:`LoopBert` is mixed into ``TokenLoop`` as
:class:`~firmware_gen.compiler.loop_norms.LoopNorms` is: its methods use the loop's state
(``self.state``), placer (``self.pl``), slots and accumulator rows.  A synthetic model's entries
and blocks come out as before: one entry for all blocks, one residual block per hemisphere."""

from __future__ import annotations

import numpy as np

from lpu_arch.isa import MMFlag

from firmware_gen.compiler.loop_norms import RELU_TABLE, side_of

TABLE_BASE = 7                      # a model's activation tables by lane: from here (the loop's are 1..6)
POSITION_MEM = "MEM_E{}"            # block k's position rows: MEM_E(k % 4) (the embedding's are in MEM_W)


class LoopBert:
    """Entries, blocks and placement of a BERT's pieces (mixed into ``TokenLoop``)."""

    def entries(self, rq, bias=None, blocks: int = 1, **per_lane) -> list:
        """Parameter entries of ``blocks`` blocks requantised by ``rq`` ((multiplier, shift), each one
        value or per lane), with ``bias`` (per lane, or None) and ``per_lane`` fields (arrays over the
        blocks' lanes, or one value): one entry for every block when nothing differs by lane."""
        st, L = self.state, self.cfg.lanes
        if bias is None and np.ndim(rq[0]) == 0 and all(np.ndim(v) == 0 for v in per_lane.values()):
            return [st.new_param(m_a=rq[0], s_a=rq[1], **per_lane)] * blocks
        n = blocks * L

        def lanes(v, k):
            return np.broadcast_to(np.asarray(v, np.int64), (n,))[k * L:(k + 1) * L]
        return [st.new_param(m_a=lanes(rq[0], k), s_a=lanes(rq[1], k),
                             **({} if bias is None else {"bias_a": lanes(bias, k)}),
                             **{f: lanes(v, k) for f, v in per_lane.items()}) for k in range(blocks)]

    def diagonal(self, c) -> dict:
        """The residual's ``c I`` blocks: one per hemisphere for one ``c`` (keys ``"W"``, ``"E"``), one
        per block (keys ``k``, on the hemisphere of the MXM that computes it) for ``c`` per lane."""
        L = self.cfg.lanes
        if np.ndim(c) == 0:
            return {h: self._block(int(c) * np.eye(L, dtype=np.int64), h) for h in "WE"}
        c = np.asarray(c, np.int64)
        return {k: self._block(np.diag(c[k * L:(k + 1) * L]), "WE"[k % 2]) for k in range(self.KH)}

    def activation_entries(self, l: int, layer) -> list:
        """Layer ``l``'s ``h`` entries: its tables set (one, or a table per class of lanes)."""
        if layer.table_lane is None:
            self.state.set_table(RELU_TABLE, layer.table)
            return self.entries(layer.rq1, layer.b1, self.KI, table=RELU_TABLE)
        base = TABLE_BASE + l * len(layer.table)
        for t, table in enumerate(layer.table):
            self.state.set_table(base + t, table)
        return self.entries(layer.rq1, layer.b1, self.KI, table=base + np.asarray(layer.table_lane))

    def position_layout(self):
        """The position rows (block k's in ``POSITION_MEM``, row ``p`` for position ``p``), the
        embedding's mix blocks and entries; nothing without positions."""
        m, L, st = self.model, self.cfg.lanes, self.state
        self.positions = {}
        if m.positions is None:
            return
        for k in range(self.KH):
            mem = POSITION_MEM.format(k % 4)
            a = st.alloc(mem, len(m.positions))
            st.load(mem, a, m.positions[:, k * L:(k + 1) * L].astype(np.int64) & 0xFF)
            self.positions[k] = (mem, a)
        c_e, c_p, _ = m.embed_mix
        eye = np.eye(L, dtype=np.int64)
        self.mix = {n: {h: self._block(c * eye, h) for h in "WE"} for n, c in (("e", c_e), ("p", c_p))}

    def position_rows(self, pos: int, t0: int):
        """Position ``pos``'s rows into both MXMs' ``("p", k)`` slots (static addresses)."""
        for k, (mem, a) in self.positions.items():
            for side in ("MXM_W", "MXM_E"):
                self.pl.lx(side, mem, a + pos, self.slot("p", k), t0, f"position {pos}: position row {k} -> {side}")

    def embedding_sum(self, pos: int):
        """``x = LN(requant(c_e E[id] + c_p P[pos]))`` from the ``("e", k)`` and ``("p", k)`` slots."""
        pl, who = self.pl, f"position {pos}: embedding"
        for k in range(self.KH):
            side, acc = side_of(k), self.acc("y", k)
            pl.load(side, self.mix["e"][side[-1]], 0, f"{who} c_e block")
            pl.mm(side, self.slot("e", k), acc, 0, 0, f"{who} c_e E[{k}]")
            pl.load(side, self.mix["p"][side[-1]], 0, f"{who} c_p block")
            pl.mm(side, self.slot("p", k), acc, MMFlag.ACC, 0, f"{who} c_p P[{k}]")
            self._to_slot(side, acc, self.p_embed[k], self.slot("z0", k), 0, f"{who} [{k}]")
        self._norm(self.model.embed_norm, ("z0",), ("x", 0), f"{who} norm")

    def after_residual(self, part, pos: int, entries, z, dst) -> tuple:
        """Where ``part``'s residual sum goes and with which of ``entries`` (its own, position 0's):
        ``dst`` directly, or (post-norm) ``z``, which its LayerNorm reads (position 0: its own
        requantisation and LayerNorm).  Returns ``(the sum's slots, entries, norm or None)``."""
        if part.post is None:
            return dst, entries[0], None
        first = pos == 0 and part.first is not None
        return z, entries[1] if first else entries[0], part.first[1] if first else part.post
