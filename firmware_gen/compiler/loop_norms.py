"""The token loop's norms (``compiler/token_loop.py``): RMSNorm (``golden/norm.py``) and LayerNorm
(``golden/layer_norm.py``) on the tile, bit for bit.  :class:`LoopNorms` is mixed into
``TokenLoop``: its methods place through the loop's placer (``self.pl``) and use its slots
(``self.slot``), accumulator rows (``self.acc``), constant blocks (``self.eye``, ``self.ones``,
``self.ln``) and parameter entries (``self.pn``); ``docs/numerics.md`` ("RMSNorm", "LayerNorm")
states the steps."""

from __future__ import annotations

import numpy as np

from lpu_arch.isa import EAST, WEST, Instr, MMFlag, VopFlag

from firmware_gen.compiler.attention_place import Item
from firmware_gen.golden import layer_norm
from firmware_gen.golden.layer_norm import LayerNormSpec
from firmware_gen.golden.norm import MANTISSA_OFFSET

SIDES = ("MXM_W", "MXM_E")
RELU_TABLE = 3                      # the token loop's ReLU (the attention step's exp and reciprocal are 1 and 2)
RSQRT_TABLE = 4                     # the RMSNorm's
LN_TABLES = {"hi": 5, "lo": 6}      # a LayerNorm's reciprocal square root, HI and LO (golden/layer_norm.py)
H_STREAM = 5                        # west-flowing: h and x from the VXM (the loop's other streams: token_loop)


def side_of(i: int) -> str:
    """The MXM that computes output block ``i`` of a matrix: the even ones ``MXM_W``, the odd ones
    ``MXM_E``, each from its own hemisphere's MEM slices."""
    return SIDES[i % 2]


def _split(v) -> list:
    """Integer vectors of entries within -127..127 summing to ``v`` (as few as its largest entry
    needs): a weight past int8 as several ``MM``s of the same input."""
    v = np.asarray(v, np.int64)
    n = max(1, -(-int(np.abs(v).max(initial=0)) // 127))
    q, r = np.divmod(np.abs(v), n)
    return [np.sign(v) * (q + (j < r)) for j in range(n)]


class LoopNorms:
    """The norms' constants, entries and placement (mixed into ``TokenLoop``)."""

    def _gate(self, acc_w, acc_e, entry, table: bool, into: str, slot, who):
        """A ``VOP`` with ``GATE`` (and ``TABLE``) of ``MXM_W``'s row ``acc_w`` (A) and ``MXM_E``'s row
        ``acc_e`` (B), its result into x slot ``slot`` of MXM ``into``."""
        pl, cfg = self.pl, self.cfg
        lag, at = pl.emit_lag("MXM_W"), pl.pos(into)
        d, loader, out = (WEST, "MXL_W", VopFlag.OUT_W) if into == "MXM_W" else (EAST, "MXL_E", VopFlag.OUT_E)
        to = lag + cfg.vxm_latency + abs(at - cfg.vxm_position)
        flags = VopFlag.GATE | (VopFlag.TABLE if table else 0) | out
        items = [pl.flush("MXM_W", acc_w, self.ZERO), pl.flush("MXM_E", acc_e, self.ZERO),
                 Item("VXM", lag, Instr.vop(0, EAST, entry, H_STREAM, flags), {d: at}),
                 Item(loader, to, Instr.lx(H_STREAM, d, slot))]
        t = pl.place(items, max(pl.acc_ready[("MXM_W", acc_w)], pl.acc_ready[("MXM_E", acc_e)]), who)
        pl.slot_ready[into][slot] = t + to + 1

    def _norm_params(self, spec) -> dict:
        """A norm's entries: the squares', and per octave and block the octave's (its lanes' multipliers)."""
        st, L = self.state, self.cfg.lanes
        out = {"sq": st.new_param(m_c=1, s_c=spec.sq_shift)}
        for i, (mult, shift) in zip(spec.octaves, spec.y_rq):
            for k in range(self.KH):
                lanes = slice(k * L, (k + 1) * L)
                out[i, k] = st.new_param(bias_a=-MANTISSA_OFFSET * (1 << i) - ((1 << i) >> 1), m_a=1, s_a=i,
                                         table=RSQRT_TABLE, m_c=np.asarray(mult[lanes]), s_c=np.asarray(shift[lanes]))
        return out


    def _norm(self, spec, src, dst, who):
        """RMSNorm ``spec`` (``golden/norm.py``) of the vector in x slots ``slot(*src, k)`` of both
        MXMs into their slots ``slot(*dst, k)``: x through the identity on both MXMs, the
        squares by ``GATE`` into ``MXM_W``, their sum on a block of ``q_weight``, per octave and
        block a ``GATE`` and ``TABLE`` VOP into ``MXM_E``, summed on its identity block and
        requantised into both MXMs' ``dst``."""
        if isinstance(spec, LayerNormSpec):
            return self._layer_norm(spec, src, dst, who)
        pl, KH, prm = self.pl, self.KH, self.pn[id(spec)]
        for side, h in (("MXM_W", "W"), ("MXM_E", "E")):
            pl.load(side, self.eye[h], 0, f"{who}: identity block of {side}")
            for k in range(KH):
                pl.mm(side, self.slot(*src, k), self.acc("nw" if h == "W" else "ne", k), 0, 0, f"{who}: x[{k}]")
        for k in range(KH):                 # the squares, into MXM_W
            self._gate(self.acc("nw", k), self.acc("ne", k), prm["sq"], False, "MXM_W", self.slot("sq", k),
                       f"{who}: squares [{k}]")
        pl.load("MXM_W", self.ones[spec.q_weight], 0, f"{who}: the block of {spec.q_weight}")
        for k in range(KH):
            pl.mm("MXM_W", self.slot("sq", k), self.acc("q", 0), MMFlag.ACC if k else 0, 0, f"{who}: Q")
        for k in range(KH):                 # per octave, into MXM_E
            for i in spec.octaves:
                self._gate(self.acc("q", 0), self.acc("ne", k), prm[i, k], True, "MXM_E", self.slot("ny", k, i),
                           f"{who}: octave {i} [{k}]")
        pl.load("MXM_E", self.eye["E"], 0, f"{who}: identity block of MXM_E")
        for k in range(KH):                 # the octaves' sum, requantised into both MXMs
            for n, i in enumerate(spec.octaves):
                pl.mm("MXM_E", self.slot("ny", k, i), self.acc("ny", k), MMFlag.ACC if n else 0, 0, f"{who}: y[{k}]")
            self._to_slot("MXM_E", self.acc("ny", k), self.p_ident, self.slot(*dst, k), 0, f"{who}: out [{k}]")

    # ---- LayerNorm (golden/layer_norm.py) ------------------------------------------------------
    def _ln_blocks(self, spec) -> dict:
        """A LayerNorm's constant blocks: per block ``k`` of the input the sum's (rows all ``w``; split
        where a weight passes 127), on ``MXM_W``; per hemisphere the diagonal ``127 sign`` and the
        mean's ``-e sign`` (split); the squares' weights (rows all ``2**k``, split), on ``MXM_W``."""
        L, K = self.cfg.lanes, self.KH
        w, e, sg, sqw = (np.asarray(v, np.int64) for v in (spec.w, spec.e, spec.signs, spec.sq_w))
        lanes = [slice(k * L, (k + 1) * L) for k in range(K)]
        return {"sum": [[self._block(np.tile(p, (L, 1))) for p in _split(w[s])] for s in lanes],
                "sq": [[self._block(np.tile(p, (L, 1))) for p in _split(sqw[s])] for s in lanes],
                "z": {h: [self._block(np.diag(127 * sg[s]), h) for s in lanes] for h in "WE"},
                "mu": {h: [[self._block(np.diag(p), h) for p in _split(-e[s] * sg[s])] for s in lanes]
                       for h in "WE"}}

    def _ln_params(self, spec) -> dict:
        """A LayerNorm's entries: the mean's; per block the squares' (d requantised on both sides, the
        lanes' units), n's and the output's (the bias); per octave HI's and LO's, one for every block
        (n carries each lane's factor)."""
        st, L = self.state, self.cfg.lanes
        dm, ds = spec.d_rq
        out = {"mu": st.new_param(m_a=spec.mu_rq[0], s_a=spec.mu_rq[1])}
        for k in range(self.KH):
            ln = slice(k * L, (k + 1) * L)
            out["sq", k] = st.new_param(m_a=dm, s_a=ds, m_b=dm, s_b=ds, m_c=np.asarray(spec.sq_rq[0][ln]),
                                        s_c=np.asarray(spec.sq_rq[1][ln]))
            out["n", k] = st.new_param(m_a=np.asarray(spec.n_rq[0][ln]), s_a=np.asarray(spec.n_rq[1][ln]))
            out["out", k] = st.new_param(bias_a=np.asarray(spec.bias[ln]))
        for i, hi, lo in zip(spec.octaves, spec.y_rq, spec.lo_rq):
            for part, (mult, shift) in (("hi", hi), ("lo", lo)):
                out[i, part] = st.new_param(bias_a=-layer_norm.MANTISSA_OFFSET * (1 << i) - ((1 << i) >> 1), m_a=1,
                                            s_a=i, table=LN_TABLES[part], m_c=mult, s_c=shift)
        return out

    def _layer_norm(self, spec, src, dst, who):
        """LayerNorm ``spec`` of the vector in x slots ``slot(*src, k)`` of both MXMs into their slots
        ``slot(*dst, k)``: the lanes' weighted sum on ``MXM_W`` and the mean by a VOP into both MXMs;
        on each MXM ``sign (127 z - e mu)`` per block (d before its requantisation, which the VOPs
        reading it apply); the squares by ``GATE`` into ``MXM_W``, their weighted sum (``q_reps``
        rounds); n per block by a VOP back into ``MXM_E``; block by block, per octave a ``GATE`` and
        ``TABLE`` VOP of HI and one of LO (an entry per octave) into ``MXM_E`` (the slots of one
        block, reused by the next), summed on its identity block and requantised with the bias into
        ``dst``."""
        pl, KH, prm, B = self.pl, self.KH, self.pn[id(spec)], self.ln[id(spec)]
        n = 0
        for k in range(KH):                 # S = sum_k w_k z_k, in every lane
            for blk in B["sum"][k]:
                pl.load("MXM_W", blk, 0, f"{who}: the sum's block [{k}]")
                pl.mm("MXM_W", self.slot(*src, k), self.acc("mu", 0), MMFlag.ACC if n else 0, 0, f"{who}: S")
                n += 1
        self._to_slot("MXM_W", self.acc("mu", 0), prm["mu"], self.slot("mu"), 0, f"{who}: the mean")
        for side, h in (("MXM_W", "W"), ("MXM_E", "E")):       # sign (127 z - e mu) on both MXMs
            acc = "nw" if h == "W" else "ne"
            for k in range(KH):
                pl.load(side, B["z"][h][k], 0, f"{who}: 127 sign [{k}] of {side}")
                pl.mm(side, self.slot(*src, k), self.acc(acc, k), 0, 0, f"{who}: 127 z[{k}]")
                for blk in B["mu"][h][k]:
                    pl.load(side, blk, 0, f"{who}: -e sign [{k}] of {side}")
                    pl.mm(side, self.slot("mu"), self.acc(acc, k), MMFlag.ACC, 0, f"{who}: - e mu [{k}]")
        for k in range(KH):                 # the squares, into MXM_W
            self._gate(self.acc("nw", k), self.acc("ne", k), prm["sq", k], False, "MXM_W", self.slot("sq", k),
                       f"{who}: squares [{k}]")
        for k in range(KH):                 # n, each lane's factor in it, back into MXM_E
            self._to_slot("MXM_E", self.acc("ne", k), prm["n", k], self.slot("lnn", k), 0, f"{who}: n [{k}]")
        pl.load("MXM_E", self.eye["E"], 0, f"{who}: identity block of MXM_E")
        for k in range(KH):
            pl.mm("MXM_E", self.slot("lnn", k), self.acc("nn", k), 0, 0, f"{who}: n [{k}]")
        n = 0
        for _ in range(spec.q_reps):        # Q = r sum(w sq)
            for k in range(KH):
                for blk in B["sq"][k]:
                    pl.load("MXM_W", blk, 0, f"{who}: the squares' weights [{k}]")
                    pl.mm("MXM_W", self.slot("sq", k), self.acc("q", 0), MMFlag.ACC if n else 0, 0, f"{who}: Q")
                    n += 1
        pl.load("MXM_E", self.eye["E"], 0, f"{who}: identity block of MXM_E")
        for k in range(KH):                 # per octave, HI and LO, into MXM_E; their sum and the bias
            parts = [(i, part) for i in spec.octaves for part in ("hi", "lo")]
            for i, part in parts:
                self._gate(self.acc("q", 0), self.acc("nn", k), prm[i, part], True, "MXM_E",
                           self.slot("lny", i, part), f"{who}: octave {i} {part} [{k}]")
            for j, (i, part) in enumerate(parts):
                pl.mm("MXM_E", self.slot("lny", i, part), self.acc("ny", k), MMFlag.ACC if j else 0, 0,
                      f"{who}: y[{k}]")
            self._to_slot("MXM_E", self.acc("ny", k), prm["out", k], self.slot(*dst, k), 0, f"{who}: out [{k}]")
