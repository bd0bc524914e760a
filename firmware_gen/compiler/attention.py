"""The attention compiler: one decode step of ``H`` heads of dimension ``D = 2 x lanes`` on one
tile, bit-exact against ``golden.attention.head_int`` (``docs/compiler.md``, "Attention").

The program depends on the number of reserved position blocks ``nb = ceil(L / 16)`` only;
the context length within the block is in base registers (:meth:`AttentionStep.bases`):

* registers 1..4: the new position's cache row, on for the MEM slice ``(L - 1) % 4`` that
  holds it (offset ``(L - 1) // 4``), off for the other three, whose WRITEs skip;
* register 5: the offset ``16 - (L - 16 (nb - 1))`` of the mask block in its constant rows.

Layout (per head ``h`` and dimension block ``b``), blocks striped over a hemisphere's four
MEM slices (row ``r`` in slice ``r % 4``, so an ``LW`` takes four rows a cycle):

* west (``MXM_W``, scores and ``E``): the K cache, position ``j`` at slice ``j % 4``, row
  ``K[h, b] + j // 4`` (all ``MAX_CONTEXT`` positions reserved, zero-filled); the mask rows
  (slice ``s`` holds ``c[s + m]``, ``c`` = 16 zeros then 16 rows of 127, so the block's row
  ``r`` is ``c[r + offset]``), the ones block, the inputs ``q`` and the new ``v``, the
  constant vectors 0, -128, 127, the scratch row of the maximum.
* east (``MXM_E``, ``-2**k zmax``, ``U`` and the octave sums): the V cache as K, its
  transpose ``V^T`` (block ``p`` row ``d`` at slice ``d % 4``, row ``VT[h, b] + 4 p + d // 4``),
  ``neg_max_block`` per head, the identity block, the new ``k``, the constants 0 and 127,
  the outputs ``y``.

Each step writes the new ``k`` and ``v`` into the caches, re-transposes the V block that
holds the new position (``READ`` + ``TRI``, ``TRO`` + ``WRITE`` at ``SXM_E``), then per head
runs the steps of ``golden/attention.py``: scores on ``MXM_W``, the coarse VOP, the maximum
by ``MAX`` at ``SXM_W`` (each partial maximum bounced through a scratch row of the slice beside it),
the fine VOP with ``ADD`` and ``EXP`` (``e'`` to both MXMs), ``E`` and ``U``, the octave VOPs
with ``GATE`` and ``RECIP``, their sum on the identity block and a last VOP that writes ``y``.
"""

from __future__ import annotations

import numpy as np

from lpu_arch.config import TileConfig
from lpu_arch.hostmap import base_word
from lpu_arch.isa import EAST, WEST, Instr, MMFlag, Op, SxmFlag, VopFlag

from firmware_gen.compiler import CompileError
from firmware_gen.compiler.attention_place import Item, Placer
from firmware_gen.compiler.reserve import lower
from firmware_gen.compiler.schedule import PredictedWrite
from firmware_gen.compiler.tile_state import TileState
from firmware_gen.golden.attention import BLOCK, MAX_CONTEXT, exp_table, neg_max_block, recip_table
from firmware_gen.program import Program

EXP_TABLE, RECIP_TABLE = 1, 2          # activation tables (table 0 stays the identity)
CACHE_REGS = (1, 2, 3, 4)              # base register of the cache WRITE into slice s (on in one)
MASK_REG = 5                           # base register holding the mask block's offset
NEEDS = {"sxm_max": (1, "the maximum of the coarse scores is SXM MAX")}
STRIPE = 4                             # MEM slices a block is striped over (LW n)
X_STREAM, OUT_STREAM, SXM_STREAM = 4, 5, 6


LAYOUT = ("K", "V", "VT", "mask", "ones", "ident", "negmax", "const", "scratch", "q_row", "v_row", "k_row",
          "y_row", "p_ident", "p")        # what the steps of one layer share (AttentionStep(..., shared=))


class AttentionStep:
    """One decode step of ``len(specs)`` heads (``golden.attention.HeadSpec``, ``D = 2 x lanes``)
    whose context fills ``nb`` position blocks: placed at construction; :meth:`program` gives
    the tile program with one step's data, :meth:`bases` its base registers, :meth:`manifest`
    the writes and cycle count it promises.

    Within a larger program (the token loop, ``compiler/token_loop.py``): ``state`` and
    ``placer``, the tile's, shared with what else is placed there; ``L``, the context length,
    fixed at compile time (the cache row written and the mask block's rows are then plain
    addresses: no base register); ``t_start``, the first cycle the step may use (its q, k and v
    rows written); ``shared``, an earlier step of the same layer whose caches, constants, rows
    and parameter entries this one uses (else it allocates its own)."""

    def __init__(self, cfg: TileConfig, specs, nb: int, *, state: TileState | None = None,
                 placer: Placer | None = None, L: int | None = None, t_start: int = 0,
                 shared: "AttentionStep | None" = None, defer: bool = False):
        self.cfg, self.specs, self.nb, self.L = cfg, list(specs), int(nb), L
        self._check()
        if L is not None:
            self.check_length(L)
        self.H, self.KB = len(self.specs), 2
        self.state = state or TileState(cfg)
        self.pl = placer or Placer(self.state)
        self.writes = []                     # (cycle, slice, row, what): every WRITE that lands
        if shared is None:
            self._layout()
            self._params()
        else:
            self.__dict__.update({n: getattr(shared, n) for n in LAYOUT})
            self.tr_free = getattr(shared, "tr_free", 0)
        self.y_cycle = {}
        if not defer:
            self.place(t_start)

    def place(self, t_start: int = 0) -> None:
        """Place the step, nothing of it before cycle ``t_start``."""
        floor, self.pl.floor = self.pl.floor, max(self.pl.floor, t_start)
        t = self._prologue()
        for h in range(self.H):
            t = self._head(h, t)
        self.pl.floor = floor
        self.cycles = self.state.res.done_cycles()

    # ---- checks --------------------------------------------------------------------------
    def _check(self):
        cfg, L = self.cfg, self.cfg.lanes
        for f, (v, why) in NEEDS.items():
            if getattr(cfg, f) != v:
                raise CompileError(f"the attention step needs {f} = {v} (--set {f}={v}): {why}")
        if L != BLOCK or cfg.mem_slices % STRIPE or cfg.streams < 7 or cfg.mxm_dtype != "int8":
            raise CompileError(f"the attention step is laid out for {BLOCK} lanes, a multiple of {STRIPE} MEM slices "
                               f"per hemisphere (it uses the first {STRIPE}), 7 streams and an int8 MXM: the tile has "
                               f"{L}, {cfg.mem_slices}, {cfg.streams}, {cfg.mxm_dtype}")
        if not 1 <= self.nb <= MAX_CONTEXT // BLOCK:
            raise CompileError(f"a context of {self.nb} blocks of {BLOCK} positions does not fit: the cache holds "
                               f"{MAX_CONTEXT} positions ({MAX_CONTEXT // BLOCK} blocks)")
        if not self.specs or any(s.D != 2 * L for s in self.specs):
            raise CompileError(f"every head must have D = {2 * L} (2 x lanes): got "
                               f"{[s.D for s in self.specs] or 'no heads'}")
        need = 9 * len(self.specs) + 1
        if need > cfg.vxm_param_depth:
            raise CompileError(f"{len(self.specs)} heads need {need} VXM parameter entries (9 per head and one "
                               f"shared); the tile has vxm_param_depth = {cfg.vxm_param_depth}")

    # ---- layout ----------------------------------------------------------------------------
    def _stripe(self, hemi, rows):
        """Allocate ``rows`` rows striped over the four slices of ``hemi``: per slice its first row."""
        return [self.state.alloc(f"MEM_{hemi}{s}", rows) for s in range(STRIPE)]

    def _block(self, hemi, block):
        """A constant block striped over ``hemi``'s slices: its per-slice addresses."""
        a = self._stripe(hemi, BLOCK // STRIPE)
        for s in range(STRIPE):
            self.state.load(f"MEM_{hemi}{s}", a[s], np.asarray(block, np.int64)[s::STRIPE] & 0xFF)
        return a

    def _row(self, mem, vec=None):
        a = self.state.alloc(mem, 1)
        self.state.load(mem, a, np.zeros(BLOCK, np.uint8) if vec is None else np.asarray(vec, np.int64) & 0xFF)
        return a

    def _layout(self):
        H, KB, per = self.H, self.KB, MAX_CONTEXT // STRIPE
        zero = np.zeros((per, BLOCK), np.uint8)
        self.K, self.V, self.VT = {}, {}, {}
        for h in range(H):
            for b in range(KB):
                for name, hemi in ((self.K, "W"), (self.V, "E"), (self.VT, "E")):
                    name[h, b] = self._stripe(hemi, per)
                    for s in range(STRIPE):
                        self.state.load(f"MEM_{hemi}{s}", name[h, b][s], zero)
        c = np.repeat([0, 127], BLOCK)
        span = BLOCK + BLOCK - STRIPE              # offsets 0..15 and rows up to 12 + slice
        self.mask = self._stripe("W", span)
        for s in range(STRIPE):
            rows = np.tile(c[np.minimum(np.arange(span) + s, 2 * BLOCK - 1)][:, None], (1, BLOCK))
            self.state.load(f"MEM_W{s}", self.mask[s], rows)
        self.ones = self._block("W", np.ones((BLOCK, BLOCK), np.int64))
        self.ident = self._block("E", np.eye(BLOCK, dtype=np.int64))
        self.negmax = {h: self._block("E", neg_max_block(s.coarse_shift)[0]) for h, s in enumerate(self.specs)}
        self.const = {("W", v): self._row("MEM_W0", np.full(BLOCK, v)) for v in (0, -128, 127)}
        self.const.update({("E", v): self._row("MEM_E0", np.full(BLOCK, v)) for v in (0, 127)})
        self.scratch = {h: self._row(self.scratch_mem) for h in range(H)}
        self.q_row = {(h, b): self._row("MEM_W0") for h in range(H) for b in range(KB)}
        self.v_row = {(h, b): self._row("MEM_W0") for h in range(H) for b in range(KB)}
        self.k_row = {(h, b): self._row("MEM_E0") for h in range(H) for b in range(KB)}
        self.y_row = {(h, b): self._row("MEM_E0") for h in range(H) for b in range(KB)}

    def _params(self):
        st = self.state
        st.set_table(EXP_TABLE, exp_table())
        st.set_table(RECIP_TABLE, recip_table())
        self.p_ident = st.new_param()
        self.p = {}
        for h, s in enumerate(self.specs):
            self.p[h, "coarse"] = st.new_param(bias_a=s.coarse_bias, m_a=1, s_a=s.coarse_shift)
            self.p[h, "fine"] = st.new_param(bias_a=s.fine_bias, m_a=s.fine_rq[0], s_a=s.fine_rq[1], table=EXP_TABLE)
            for i in s.octaves:
                self.p[h, i] = st.new_param(bias_a=-191 * (1 << i) - ((1 << i) >> 1), m_a=1, s_a=i, table=RECIP_TABLE,
                                            m_b=s.b_rq[i][0], s_b=s.b_rq[i][1], m_c=s.c_rq[0], s_c=s.c_rq[1])

    # ---- slots and accumulator rows ---------------------------------------------------------
    ZERO, M128, C127 = 0, 1, 2

    def q_slot(self, h, b):
        return 3 + 2 * h + b

    def e_slot(self, h, p):
        return 64 + 8 * h + p

    def zmax_slot(self, h):
        return 3 + h

    def y_slot(self, h, b, i):
        return 256 + 16 * h + 8 * b + i

    # ---- the prologue: constants, q, the caches' new rows, the transposes -----------------
    def _prologue(self):
        pl, t = self.pl, 0
        for v, slot in ((0, self.ZERO), (-128, self.M128), (127, self.C127)):
            pl.lx("MXM_W", "MEM_W0", self.const["W", v], slot, 0, f"x slot {slot} of MXM_W ({v})")
        for v, slot in ((0, self.ZERO), (127, self.C127)):
            pl.lx("MXM_E", "MEM_E0", self.const["E", v], slot, 0, f"x slot {slot} of MXM_E ({v})")
        for (h, b), a in self.q_row.items():
            pl.lx("MXM_W", "MEM_W0", a, self.q_slot(h, b), 0, f"q of head {h} block {b}")
        ready = 0
        for (h, b), a in self.k_row.items():
            ready = max(ready, self._cache_write("E0", a, "W", self.K[h, b], WEST, f"new k of head {h} block {b}"))
        for (h, b), a in self.v_row.items():
            ready = max(ready, self._cache_write("W0", a, "E", self.V[h, b], EAST, f"new v of head {h} block {b}"))
        self.vt_ready, self.cache_ready = {}, ready
        for h in range(self.H):
            for b in range(self.KB):
                self.vt_ready[h, b] = self._transpose(h, b, ready)
        return t

    def _cache_write(self, src, addr, hemi, rows, d, who):
        """READ the new vector from ``MEM_{src}`` and WRITE it into the cache rows ``rows`` of
        each of ``hemi``'s slices through registers 1..4 (one on): the first cycle after."""
        mem = f"MEM_{src}"
        p0 = self.pl.pos(mem)
        if self.L is not None:              # a fixed context: the one slice and row the new position takes
            j = self.L - 1
            m = f"MEM_{hemi}{j % STRIPE}"
            items = [Item(mem, 0, Instr.read(X_STREAM, d, addr), self.pl.pos(m)),
                     Item(m, 1 + abs(self.pl.pos(m) - p0), Instr.write(X_STREAM, d, rows[j % STRIPE] + j // STRIPE))]
            t = self.pl.place(items, 0, who)
            self.writes.append((t + items[1].off, m, rows[j % STRIPE] + j // STRIPE, ("cache", hemi)))
            return t + items[1].off + 1
        far = max(self.pl.pos(f"MEM_{hemi}{s}") for s in range(STRIPE)) if d == EAST else \
            min(self.pl.pos(f"MEM_{hemi}{s}") for s in range(STRIPE))
        items = [Item(mem, 0, Instr.read(X_STREAM, d, addr), far)]
        for s in range(STRIPE):
            m = f"MEM_{hemi}{s}"
            items.append(Item(m, 1 + abs(self.pl.pos(m) - p0), Instr.write(X_STREAM, d, rows[s], CACHE_REGS[s])))
        t = self.pl.place(items, 0, who)
        self.cache_writes = getattr(self, "cache_writes", []) + [(t + i.off, i.slice, rows[s], s)
                                                                 for s, i in enumerate(items[1:])]
        return t + max(i.off for i in items) + 1

    def _transpose(self, h, b, t0):
        """``V^T`` of block ``nb - 1`` of head ``h``, dimension block ``b``: its 16 V rows through
        ``TRI`` at ``SXM_E``, its 16 columns by ``TRO`` into the V^T rows; returns the first cycle
        its LW may read them."""
        pl, p, sxm = self.pl, self.nb - 1, "SXM_E"
        ps = pl.pos(sxm)
        last = free = getattr(self, "tr_free", 0)
        for r in range(BLOCK):
            m = f"MEM_E{r % STRIPE}"
            lead = 1 + ps - pl.pos(m)
            t = pl.place([Item(m, 0, Instr.read(SXM_STREAM, EAST, self.V[h, b][r % STRIPE] + 4 * p + r // STRIPE), ps),
                          Item(sxm, lead, Instr.compute(Op.TRI, SXM_STREAM, EAST, row=r))], max(t0, free - lead),
                         f"V^T of head {h} block {b}: row {r}")
            last = max(last, t + lead)
        for d in range(BLOCK):
            m = f"MEM_E{d % STRIPE}"
            lag = 1 + ps - pl.pos(m)
            addr = self.VT[h, b][d % STRIPE] + 4 * p + d // STRIPE
            t = pl.place([Item(sxm, 0, Instr.compute(Op.TRO, SXM_STREAM, WEST, flags=SxmFlag.OUT_W, col=d,
                                                     out=SXM_STREAM),
                               pl.pos(m)),
                          Item(m, lag, Instr.write(SXM_STREAM, WEST, addr))], last + 1,
                         f"V^T of head {h} block {b}: column {d}")
            self.writes.append((t + lag, m, addr, ("vt", h, b, d)))
            last = t
        self.tr_free = last + 1
        return max(c for c, *_ in self.writes) + 1

    # ---- one head ------------------------------------------------------------------------
    def S(self, h, p):
        return 8 * h + p

    def _head(self, h, t):
        self._scores(h)
        self._coarse_max(h)
        self._neg_max(h)
        self._fine(h)
        self._sums(h)
        self._octaves(h)
        self._output(h)
        return t

    def _scores(self, h):
        """Step 1 on ``MXM_W``: ``S_p = K_p q`` (two dimension blocks), the last block's mask."""
        pl, spec = self.pl, self.specs[h]
        for p in range(self.nb):
            t0 = self.cache_ready if p == self.nb - 1 else 0
            for b in range(self.KB):
                pl.load("MXM_W", [a + 4 * p for a in self.K[h, b]], t0, f"K block {p}, {b} of head {h}")
                pl.mm("MXM_W", self.q_slot(h, b), self.S(h, p), MMFlag.ACC if b else 0, 0, f"S_{p} of head {h}")
        if self.L is None:
            pl.load("MXM_W", self.mask, 0, f"mask block of head {h}", base=MASK_REG, stride=STRIPE)
        else:                               # the offset MASK_REG would hold (bases), in the addresses
            off = BLOCK - (self.L - BLOCK * (self.nb - 1))
            pl.load("MXM_W", [a + off for a in self.mask], 0, f"mask block of head {h}", stride=STRIPE)
        for _ in range(spec.mask_mms):
            pl.mm("MXM_W", self.M128, self.S(h, self.nb - 1), MMFlag.ACC, 0, f"mask of head {h}")

    @property
    def scratch_mem(self) -> str:
        """The slice beside ``SXM_W`` (the last of the west hemisphere): the maxima's scratch rows."""
        return f"MEM_W{self.cfg.mem_slices - 1}"

    def _coarse_max(self, h):
        """Steps 2 and 3: the coarse VOP per block, ``MAX`` of the blocks at ``SXM_W``, then of
        the lanes (rotations by 8, 4, 2, 1); ``zmax`` into ``MXM_E``'s x slot."""
        pl, lag, sc, sx = self.pl, self.pl.emit_lag("MXM_W"), self.scratch_mem, "SXM_W"
        px, ps = pl.pos(sx), pl.pos(sc)
        at_sxm = lag + self.cfg.vxm_latency + self.cfg.vxm_position - px
        row, ready = self.scratch[h], 0
        for p in range(self.nb):
            items = [pl.flush("MXM_W", self.S(h, p), self.ZERO),
                     Item("VXM", lag, Instr.vop(0, EAST, self.p[h, "coarse"], OUT_STREAM, VopFlag.OUT_W), {WEST: px})]
            if p == 0:
                items.append(Item(sc, at_sxm - 1, Instr.write(OUT_STREAM, WEST, row)))
            else:
                items += [Item(sc, at_sxm - 2, Instr.read(SXM_STREAM, WEST, row), px),
                          Item(sx, at_sxm, Instr.max(OUT_STREAM, WEST, 0, SXM_STREAM, SXM_STREAM, SxmFlag.OUT_E), ps),
                          Item(sc, at_sxm + 2, Instr.write(SXM_STREAM, EAST, row))]
            t0 = max(pl.acc_ready[("MXM_W", self.S(h, p))], ready - (at_sxm - 2))
            t = pl.place(items, t0, f"coarse scores {p} of head {h}")
            ready = t + items[-1].off + 1
            self.writes.append((t + items[-1].off, sc, row, ("max", h, p)))
        for k in (8, 4, 2, 1):
            last = k == 1
            items = [Item(sc, 0, Instr.read(SXM_STREAM, WEST, row), px),
                     Item(sx, 2, Instr.max(SXM_STREAM, WEST, k, SXM_STREAM, SXM_STREAM, SxmFlag.OUT_E),
                          pl.pos("MXM_E") if last else ps)]
            lx_off = 3 + pl.pos("MXM_E") - px
            items.append(Item("MXL_E", lx_off, Instr.lx(SXM_STREAM, EAST, self.zmax_slot(h))) if last else
                         Item(sc, 4, Instr.write(SXM_STREAM, EAST, row)))
            t = pl.place(items, ready, f"maximum of head {h}, rotation {k}")
            if last:
                pl.slot_ready["MXM_E"][self.zmax_slot(h)] = t + lx_off + 1
            else:
                ready = t + 5
                self.writes.append((t + 4, sc, row, ("max", h, k)))

    def _neg_max(self, h):
        """Step 4's ``-2**k zmax`` in every lane of ``MXM_E``'s row ``neg``."""
        pl = self.pl
        mms = neg_max_block(self.specs[h].coarse_shift)[1]
        pl.load("MXM_E", self.negmax[h], 0, f"neg_max block of head {h}")
        for m in range(mms):
            pl.mm("MXM_E", self.zmax_slot(h), 8 * h, MMFlag.ACC if m else 0, 0, f"-2**k zmax of head {h}")

    def _fine(self, h):
        """Step 4: per block the fine VOP (``S_p`` + ``-2**k zmax``, ``EXP``), ``e'_p`` into both
        MXMs' x slots."""
        pl, lag = self.pl, self.pl.emit_lag("MXM_W")
        arrive = lag + self.cfg.vxm_latency + self.cfg.vxm_position
        flags = VopFlag.ADD | VopFlag.TABLE | VopFlag.OUT_E | VopFlag.OUT_W
        for p in range(self.nb):
            slot = self.e_slot(h, p)
            items = [pl.flush("MXM_W", self.S(h, p), self.ZERO), pl.flush("MXM_E", 8 * h, self.ZERO),
                     Item("VXM", lag, Instr.vop(0, EAST, self.p[h, "fine"], OUT_STREAM, flags),
                          {WEST: pl.pos("MXM_W"), EAST: pl.pos("MXM_E")}),
                     Item("MXL_W", arrive, Instr.lx(OUT_STREAM, WEST, slot)),
                     Item("MXL_E", arrive, Instr.lx(OUT_STREAM, EAST, slot))]
            t0 = max(pl.acc_ready[("MXM_W", self.S(h, p))], pl.acc_ready[("MXM_E", 8 * h)])
            t = pl.place(items, t0, f"fine scores {p} of head {h}")
            for side in ("MXM_W", "MXM_E"):
                pl.slot_ready[side][slot] = t + arrive + 1

    def _sums(self, h):
        """Step 5: ``E`` on ``MXM_W`` (ones block), ``U_b`` on ``MXM_E`` (the V^T blocks); each
        ``MM`` of ``e'_p`` beside one of the constant 127."""
        pl, E = self.pl, 8 * h + 4
        pl.load("MXM_W", self.ones, 0, f"ones block of head {h}")
        for p in range(self.nb):
            pl.mm("MXM_W", self.e_slot(h, p), E, MMFlag.ACC if p else 0, 0, f"E of head {h}")
            pl.mm("MXM_W", self.C127, E, MMFlag.ACC, 0, f"E of head {h}")
        for b in range(self.KB):
            for p in range(self.nb):
                t0 = self.vt_ready[h, b] if p == self.nb - 1 else 0
                pl.load("MXM_E", [a + 4 * p for a in self.VT[h, b]], t0, f"V^T block {p}, {b} of head {h}")
                pl.mm("MXM_E", self.e_slot(h, p), 8 * h + 1 + b, MMFlag.ACC if p else 0, 0, f"U_{b} of head {h}")
                pl.mm("MXM_E", self.C127, 8 * h + 1 + b, MMFlag.ACC, 0, f"U_{b} of head {h}")

    def _octaves(self, h):
        """Step 6: per dimension block and octave a VOP with ``GATE`` and ``RECIP`` (A = ``E``,
        B = ``U_b``), ``y_{b,i}`` into ``MXM_E``'s x slots."""
        pl, lag = self.pl, self.pl.emit_lag("MXM_W")
        arrive = lag + self.cfg.vxm_latency + pl.pos("MXM_E") - self.cfg.vxm_position
        for b in range(self.KB):
            for i in self.specs[h].octaves:
                slot = self.y_slot(h, b, i)
                items = [pl.flush("MXM_W", 8 * h + 4, self.ZERO), pl.flush("MXM_E", 8 * h + 1 + b, self.ZERO),
                         Item("VXM", lag, Instr.vop(0, EAST, self.p[h, i], OUT_STREAM,
                                                    VopFlag.GATE | VopFlag.TABLE | VopFlag.OUT_E),
                              {EAST: pl.pos("MXM_E")}),
                         Item("MXL_E", arrive, Instr.lx(OUT_STREAM, EAST, slot))]
                t0 = max(pl.acc_ready[("MXM_W", 8 * h + 4)], pl.acc_ready[("MXM_E", 8 * h + 1 + b)])
                t = pl.place(items, t0, f"octave {i} of block {b} of head {h}")
                pl.slot_ready["MXM_E"][slot] = t + arrive + 1

    def _output(self, h):
        """``y_b = sum_i y_{b,i}`` on the identity block, made int8 by the identity VOP and
        written into ``MEM_E0``."""
        pl, lag, mem = self.pl, self.pl.emit_lag("MXM_E"), "MEM_E0"
        pl.load("MXM_E", self.ident, 0, f"identity block of head {h}")
        at = lag + self.cfg.vxm_latency + pl.pos(mem) - self.cfg.vxm_position
        for b in range(self.KB):
            acc = 8 * h + 3 + b
            for n, i in enumerate(self.specs[h].octaves):
                pl.mm("MXM_E", self.y_slot(h, b, i), acc, MMFlag.ACC if n else 0, 0, f"y_{b} of head {h}")
            items = [pl.flush("MXM_E", acc, self.ZERO),
                     Item("VXM", lag, Instr.vop(0, WEST, self.p_ident, OUT_STREAM, VopFlag.OUT_E), {EAST: pl.pos(mem)}),
                     Item(mem, at, Instr.write(OUT_STREAM, EAST, self.y_row[h, b]))]
            t = pl.place(items, pl.acc_ready[("MXM_E", acc)], f"output {b} of head {h}")
            self.y_cycle[h, b] = t + at
            self.writes.append((t + at, mem, self.y_row[h, b], ("y", h, b)))

    # ---- the program, its registers and its promise ------------------------------------------
    def bases(self, L):
        """The base register words of a step whose context is ``L`` positions (the new one last)."""
        self.check_length(L)
        j = L - 1
        words = [base_word()] * (MASK_REG + 1)
        for s, r in enumerate(CACHE_REGS):
            words[r] = base_word(j // STRIPE, on=j % STRIPE == s)
        words[MASK_REG] = base_word(BLOCK - (L - BLOCK * (self.nb - 1)))
        return words

    def check_length(self, L):
        if not BLOCK * (self.nb - 1) < L <= BLOCK * self.nb:
            raise CompileError(f"a context of {L} positions needs {-(-L // BLOCK)} blocks; this step was compiled "
                               f"for {self.nb} ({BLOCK * (self.nb - 1) + 1}..{BLOCK * self.nb} positions)")

    def program(self, q, k, v, K, V) -> Program:
        """The tile program of one step: ``q``, ``k``, ``v`` (H, D) int8, the new position's;
        ``K``, ``V`` (H, L - 1, D): the cached history (its V^T blocks as earlier steps left them)."""
        q, k, v = (np.asarray(a, np.int64) for a in (q, k, v))
        K, V = np.asarray(K, np.int64), np.asarray(V, np.int64)
        L = K.shape[1] + 1
        self.check_length(L)
        D, H = 2 * BLOCK, self.H
        if q.shape != (H, D) or k.shape != q.shape or v.shape != q.shape or K.shape != (H, L - 1, D) or \
                V.shape != K.shape:
            raise CompileError(f"q, k, v must be ({H}, {D}) and K, V ({H}, L - 1, {D}): got {q.shape}, {k.shape}, "
                               f"{v.shape}, {K.shape}, {V.shape}")
        mem = {n: m.copy() for n, m in self.state.memory.items()}
        put = lambda name, a, vec: mem[name].__setitem__(a, np.asarray(vec, np.int64) & 0xFF)
        for h in range(H):
            for b in range(self.KB):
                cols = slice(BLOCK * b, BLOCK * (b + 1))
                put("MEM_W0", self.q_row[h, b], q[h, cols])
                put("MEM_W0", self.v_row[h, b], v[h, cols])
                put("MEM_E0", self.k_row[h, b], k[h, cols])
                for j in range(L - 1):
                    put(f"MEM_W{j % STRIPE}", self.K[h, b][j % STRIPE] + j // STRIPE, K[h, j, cols])
                    put(f"MEM_E{j % STRIPE}", self.V[h, b][j % STRIPE] + j // STRIPE, V[h, j, cols])
                for j in range(L - 1):                       # V^T: lane j % 16 of row d of block j // 16
                    for d in range(BLOCK):
                        a = self.VT[h, b][d % STRIPE] + 4 * (j // BLOCK) + d // STRIPE
                        mem[f"MEM_E{d % STRIPE}"][a, j % BLOCK] = V[h, j, BLOCK * b + d] & 0xFF
        queues = {name: lower(entries) for name, entries in self.state.timed.items()}
        prog = Program(self.cfg, queues, mem, vxm_params=self.state.params, table=self.state.tables,
                       defined=self.state.loaded)
        return prog.validate()

    def manifest(self, L, y=None):
        """Every MEM write the step makes (cycle, slice, row; ``y[h]`` (D,), when given, the
        outputs' values), in cycle order, and the cycle count: the same for every ``L`` of the
        ``nb`` blocks but the new position's cache row."""
        self.check_length(L)
        j = L - 1
        out = [(c, m, a + j // STRIPE, ()) for c, m, a, s in self.cache_writes if s == j % STRIPE]
        for c, m, a, what in self.writes:
            data = ()
            if what[0] == "y" and y is not None:
                data = tuple(int(x) & 0xFF for x in np.asarray(y[what[1]])[BLOCK * what[2]:BLOCK * (what[2] + 1)])
            out.append((c, m, a, data))
        order = {n: i for i, n in enumerate(self.cfg.slice_names)}
        out.sort(key=lambda w: (w[0], order[w[1]]))
        return [PredictedWrite(c, m, a, d, 0) for c, m, a, d in out], self.cycles

