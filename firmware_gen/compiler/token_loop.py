"""The token loop on chip: greedy tokens of a :class:`~firmware_gen.golden.token_loop.LoopModel`
in one run of one tile, the host writing only the prompt's tokens and reading only the ids
(``docs/afd.md``, "The token loop on chip").

Every position is unrolled into the instruction queues (no loop construct: the queues hold the
positions a run asks, and :class:`TokenLoop` names ``iq_depth`` when they do not), and every
step of it is placed in static time through the tile's reservation table
(``attention_place.Placer``, one for the whole run), on both MXMs: each matrix's output blocks
alternate between ``MXM_W`` and ``MXM_E`` (:func:`side_of`), each block's weights striped over its
MXM's four MEM slices and loaded four rows a cycle, and every vector the blocks read is kept in
both MXMs' x slots:

1. ``SETB`` at ``SXM_W`` sets base register :data:`TOKEN_REG` to the token id read back from a
   MEM row (a prompt row the host wrote, or the id the last position found); the embedding's
   blocks are read at ``row + id`` through it and ``LX``-ed into both MXMs' x slots.
2. Each RMSNorm (``golden/norm.py``, :meth:`TokenLoop._norm`): x through the identity block on
   each MXM, the squares by a ``GATE`` VOP, their sum on a block of ``q_weight``, per octave and
   block a ``GATE`` and ``TABLE`` VOP (the reciprocal square root), the octaves summed on
   ``MXM_E``'s identity block and requantised into both MXMs.
3. Each layer with attention: the normalised x's q, k and v blocks of every head, each
   accumulator row flushed to the VXM and requantised into ``MEM_W0`` / ``MEM_E0`` rows; the
   attention step (``compiler/attention.py``, ``AttentionStep`` with the context length fixed:
   the layer's caches, constants and parameters shared by all its positions); then ``c I`` (the
   residual) and the ``Wo`` blocks of the heads' outputs into the new x.
4. Each layer's MLP: the normalised x's ``W1`` blocks, a flush of each row to the VXM (``TABLE``:
   ReLU) and its h back into x slots; ``c I`` and the ``W2`` blocks into the new x.
5. After the last prompt position and every generated one, the final norm and the LM head's
   blocks; each block's logits leave its MXM as int32 planes (an ``MM ACC EMIT`` of the zero
   slot) straight into ``ARGMAX`` at ``SXM_W``; the last one drives the id east to ``MEM_W3``,
   which writes it in the token's row; that row is read back to ``SXM_W`` for the next
   position's ``SETB``.

A position starts when everything of the one before is placed (its x slots and rows are then
free).  Without attention a token's successor depends on that token only, so a run of ``k``
tokens writes its last id a second time, into the start row its first ``SETB`` reads: the next
run of the same program continues the sequence.  With attention the positions are compiled in
(the cache row each writes, the mask of its last block), so a run generates all its tokens.
"""

from __future__ import annotations

import functools

import numpy as np

from lpu_arch.config import TileConfig
from lpu_arch.isa import EAST, MXM_LATENCY, SETB_LATENCY, SXM_LATENCY, WEST, ArgmaxFlag, Instr, MMFlag, VopFlag

from firmware_gen.compiler import CompileError
from firmware_gen.compiler.attention import AttentionStep
from firmware_gen.compiler.attention_place import Item, Placer, Stripe
from firmware_gen.compiler.reserve import lower
from firmware_gen.compiler.schedule import PredictedWrite
from firmware_gen.compiler.tile_state import TileState
from firmware_gen.golden.archmodel import index_vector
from firmware_gen.golden.attention import BLOCK, MAX_CONTEXT
from firmware_gen.compiler.loop_bert import TABLE_BASE, LoopBert
from firmware_gen.compiler.loop_norms import H_STREAM, LN_TABLES, RSQRT_TABLE, SIDES, LoopNorms, side_of
from firmware_gen.golden import layer_norm
from firmware_gen.golden.layer_norm import LayerNormSpec
from firmware_gen.golden.norm import rsqrt_table
from firmware_gen.golden.token_loop import HEAD_DIM, LoopModel
from firmware_gen.program import Program

IN_DIR = {"MXM_W": WEST, "MXM_E": EAST}        # the streams an MXM reads (from its hemisphere's MEMs)
OUT_DIR = {"MXM_W": EAST, "MXM_E": WEST}       # the way its EMIT flows (towards the VXM)
STRIPE = 4                         # MEM slices a weight block is striped over (LW n)
TOKEN_REG = 1                      # the base register SETB sets to the token id
LAYER_SLOTS = ("x", "mid", "n1", "n2", "z1", "z2", "h", "ya")     # slot keys with a layer index
HEAD_ROWS = 64                     # accumulator rows the LM head's blocks take in turn
SLOT_BASE, ACC_BASE = 400, 64      # the loop's x slots and accumulator rows: past the attention step's
LX_STREAM, ID_STREAM = 4, 6       # west-flowing: x copies, the id read back (H_STREAM: loop_norms)
EMIT_STREAM, INDEX_STREAM = 0, 6                # east-flowing: the logits' planes, ARGMAX's index
ID_MEM = "MEM_W3"                  # the slice beside SXM_W: the ids' rows
START_MEM = "MEM_W2"               # the prompt's rows (the start row: its last), then each run's last id
NEEDS = {"sxm_argmax": "the next token is the argmax of the logits (SXM ARGMAX)",
         "sxm_setb": "the next token's embedding is read at its id (SXM SETB)"}
ATTN_NEEDS = {"sxm_max": "the attention step's maximum score (SXM MAX)"}
QKV = ("q", "k", "v")


class TokenLoop(LoopNorms, LoopBert):
    """``tokens`` greedy tokens of ``model`` after a prompt of ``prompt_len`` tokens on a tile of
    ``cfg``: placed at construction.  :meth:`program` is the tile program with the prompt,
    :attr:`id_rows` the rows of ``ID_MEM`` the ids land in, :meth:`manifest` the writes and cycle
    count it promises.  A model without attention uses the prompt's last token only
    (``prompt_len`` is then 1).  ``start``: the first position (the caches hold the ones before,
    as an earlier run left them: a speculative draft's next round); the layout is the same for
    every ``start`` and ``prompt_len`` (``MAX_CONTEXT`` prompt rows), so that runs of different
    ones share the tile's SRAM."""

    def __init__(self, cfg: TileConfig, model: LoopModel, tokens: int, prompt_len: int = 1, start: int = 0):
        self.cfg, self.model, self.tokens = cfg, model, int(tokens)
        self.prompt_len = int(prompt_len) if model.heads else 1
        self.start = int(start) if model.heads else 0
        L = cfg.lanes
        self.KH, self.KI, self.KV = model.H // L, model.I // L, -(-model.vocab // L)
        self.KA = model.heads * HEAD_DIM // L          # q (k, v) blocks of a layer
        # (per layer while they fit in half the slots past SLOT_BASE; all-MiniLM-L6-v2's do not)
        self.shared_slots = (len(model.layers) * (4 * self.KH + self.KI + self.KA)
                             > (cfg.mxm_xbuf_depth - SLOT_BASE) // 2)
        self._check()
        self.state = TileState(cfg)
        self.pl = Placer(self.state)
        self.steps = {}                 # layer -> its first AttentionStep (the caches the others share)
        self.slots = {}                 # slot() keys -> x slots
        self.group = {}                 # hemisphere -> the group of four slices the last block took
        self.attention_spans = {}       # (position, layer) -> (its q, k, v written, its y written): the step's cycles
        self._layout()
        self._params()
        self.writes = []                # (cycle, slice, row, what) of every WRITE the run makes
        t = self._start()
        for i in range(self.prompt_len + self.tokens - 1):
            t = self._position(i, t)
        self.cycles = self.state.res.done_cycles()
        self.program_template = self._lower()

    # ---- checks ------------------------------------------------------------------------------
    def _check(self):
        cfg, m, L = self.cfg, self.model, self.cfg.lanes
        needs = {**NEEDS, **(ATTN_NEEDS if m.heads else {})}
        for f, why in needs.items():
            if not getattr(cfg, f):
                raise CompileError(f"the token loop needs {f} = 1 (--set {f}=1): {why}")
        if cfg.mem_slices % STRIPE or cfg.streams < 7 or cfg.mxm_dtype != "int8" or cfg.links or L != BLOCK:
            raise CompileError(f"the token loop is laid out for {BLOCK} lanes, a multiple of {STRIPE} MEM slices per "
                               f"hemisphere, 7 streams, an int8 MXM and a single tile: the tile has {L}, "
                               f"{cfg.mem_slices}, {cfg.streams}, {cfg.mxm_dtype}, {cfg.links} link(s)")
        tables = TABLE_BASE + sum(len(l.table) for l in m.layers if l.table_lane is not None)
        if any(l.table_lane is not None for l in m.layers) and tables > cfg.vxm_tables:
            raise CompileError(f"the activation's tables by lane need {tables} VXM tables; the tile has vxm_tables = "
                               f"{cfg.vxm_tables} (--set vxm_tables={1 << (tables - 1).bit_length()})")
        if m.positions is not None and self.start + self.prompt_len + self.tokens - 1 > len(m.positions):
            raise CompileError(f"the run reaches position {self.start + self.prompt_len + self.tokens - 2}; the model "
                               f"has {len(m.positions)} position rows")
        if m.H % L or m.I % L or not m.layers:
            raise CompileError(f"H ({m.H}) and I ({m.I}) must be multiples of the {L} lanes, with at least one layer")
        if self.tokens < 1 or self.prompt_len < 1:
            raise CompileError(f"a run needs a prompt token and at least one token, got {self.prompt_len} and "
                               f"{self.tokens}")
        if m.heads and self.start + self.prompt_len + self.tokens - 1 > MAX_CONTEXT:
            raise CompileError(f"a prompt of {self.prompt_len} and {self.tokens} tokens from position {self.start} "
                               f"need {self.start + self.prompt_len + self.tokens - 1} positions; the attention step's "
                               f"cache holds {MAX_CONTEXT}")
        if m.vocab > cfg.mem_depth // 2:
            raise CompileError(f"a vocabulary of {m.vocab} tokens does not fit: each embedding block takes one row "
                               f"per token of a MEM slice of {cfg.mem_depth} rows")
        rows = self.acc("nn", self.KH) if any(isinstance(n, LayerNormSpec) for n in m.norms()) else self.acc("mu", 1)
        if rows > cfg.mxm_acc_depth:
            raise CompileError(f"the loop needs accumulator rows up to {rows - 1}; an MXM has mxm_acc_depth = "
                               f"{cfg.mxm_acc_depth}")

    # ---- layout ------------------------------------------------------------------------------
    def _block(self, block, hemi="W"):
        """A 16-row weight block striped over four of a hemisphere's slices (the next group of four
        in turn, where the tile has more): its per-slice first rows."""
        rows, groups = self.cfg.lanes // STRIPE, self.cfg.mem_slices // STRIPE
        g = self.group[hemi] = (self.group.get(hemi, -1) + 1) % groups
        mems = [f"MEM_{hemi}{g * STRIPE + s}" for s in range(STRIPE)]
        a = [self.state.alloc(m, rows) for m in mems]
        b = np.asarray(block, np.int64)
        for s, m in enumerate(mems):
            self.state.load(m, a[s], b[s::STRIPE] & 0xFF)
        return Stripe(a, g * STRIPE)

    def _blocks(self, W):
        """Every lanes x lanes block of ``W`` (zero-padded), by (row block, column block): the
        block in the hemisphere of the MXM that computes its row block (:func:`side_of`)."""
        L = self.cfg.lanes
        r, c = -(-W.shape[0] // L), W.shape[1] // L
        P = np.zeros((r * L, c * L), np.int64)
        P[:W.shape[0]] = W
        return {(i, k): self._block(P[i * L:(i + 1) * L, k * L:(k + 1) * L], side_of(i)[-1])
                for i in range(r) for k in range(c)}

    def _layout(self):
        m, cfg, st = self.model, self.cfg, self.state
        L = cfg.lanes
        eye = np.eye(L, dtype=np.int64)
        self.W1 = [self._blocks(l.W1) for l in m.layers]
        self.W2 = [self._blocks(l.W2) for l in m.layers]
        self.C = [self.diagonal(l.c) for l in m.layers]
        self.A = [{n: self._blocks(getattr(l.attn, f"W{n}")) for n in ("q", "k", "v", "o")} if l.attn else None
                  for l in m.layers]
        self.CA = [self.diagonal(l.attn.c) if l.attn else None for l in m.layers]
        self.Wh = self._blocks(m.head)
        self.eye = {h: self._block(eye, h) for h in "WE"}           # the identity block by hemisphere (norms)
        self.ones = {w: self._block(np.full((L, L), w)) for w in sorted({n.q_weight for n in self.norms()
                                                                          if not isinstance(n, LayerNormSpec)})}
        self.ln = {id(n): self._ln_blocks(n) for n in self.norms() if isinstance(n, LayerNormSpec)}
        self.embed = {}             # embedding block k: (slice, first row); token t's at row + t
        slices = [f"MEM_{h}{s}" for s in range(cfg.mem_slices) for h in "WE"] if cfg.mem_slices > STRIPE else \
            [f"MEM_W{s}" for s in range(STRIPE)]        # (a larger tile: over both hemispheres)
        for k in range(self.KH):
            mem = slices[k % len(slices)]
            a = st.alloc(mem, m.vocab)
            st.load(mem, a, m.embed[:, k * L:(k + 1) * L].astype(np.int64) & 0xFF)
            self.embed[k] = (mem, a)
        self.position_layout()
        self.zero_row = {h: st.alloc(f"MEM_{h}0", 1) for h in "WE"}
        for h, r in self.zero_row.items():
            st.load(f"MEM_{h}0", r, np.zeros(L, np.uint8))
        rows = [st.alloc(START_MEM, 1) for _ in range(MAX_CONTEXT if m.heads else 1)]
        self.prompt_rows = rows[:self.prompt_len]
        self.start_row = self.prompt_rows[-1]
        self.id_rows = [st.alloc(ID_MEM, 1) for _ in range(self.tokens)]
        for mem, rows in ((START_MEM, self.prompt_rows), (ID_MEM, self.id_rows)):
            for r in rows:
                st.load(mem, r, np.zeros(L, np.uint8))

    def _params(self):
        st = self.state
        m, KH, D = self.model, self.KH, HEAD_DIM
        self.p1 = [self.activation_entries(i, l) for i, l in enumerate(m.layers)]
        self.p2 = [(self.entries(l.rq2, l.b2, KH), l.first and self.entries(l.first[0], l.b2, KH)) for l in m.layers]
        self.pa = [{(n, h): self.entries(l.attn.rq[n][h], None if l.attn.bias is None else
                                         l.attn.bias[n][h * D:(h + 1) * D], D // self.cfg.lanes)
                    for n in QKV for h in range(l.attn.heads)} if l.attn else None for l in m.layers]
        self.po = [(self.entries(l.attn.rq_o, l.attn.bo, KH),
                    l.attn.first and self.entries(l.attn.first[0], l.attn.bo, KH)) if l.attn else None
                   for l in m.layers]
        self.p_embed = self.entries(m.embed_mix[2], None, KH) if m.positions is not None else None
        st.set_table(RSQRT_TABLE, rsqrt_table())
        self.p_ident = st.new_param()
        if self.ln:
            st.set_table(LN_TABLES["hi"], layer_norm.rsqrt_tables()[0])
            st.set_table(LN_TABLES["lo"], layer_norm.rsqrt_tables()[1])
        self.pn = {id(n): (self._ln_params(n) if isinstance(n, LayerNormSpec) else self._norm_params(n))
                   for n in self.norms()}

    def norms(self) -> list:
        """Every norm of the model (``LoopModel.norms``: RMSNorms or LayerNorms)."""
        return self.model.norms()

    # ---- slots and accumulator rows ----------------------------------------------------------
    ZERO = 0

    def slot(self, *key) -> int:
        """The x slot of ``key`` (the same number on both MXMs): ``("x", l, k)`` block k of layer l's
        input (``l`` = the number of layers: the final norm's), ``("mid", l, k)`` after its attention
        part, ``("n1" | "n2", l, k)`` their norms, ``("nf", k)`` the final norm's, ``("h", l, i)``,
        ``("ya", l, j)`` the heads' outputs, the norms' ``("sq", k)`` and ``("ny", k, i)``.  A model
        whose layers' slots would not fit (``shared_slots``) shares them: a layer's vectors take the
        slots of the layer before the one before (``l`` mod 2), h and the heads' outputs those of
        every layer; a slot is written again only once what read it is placed (``Placer``)."""
        if self.shared_slots and len(key) > 1 and key[0] in LAYER_SLOTS:
            key = (key[0], *key[2:]) if key[0] in ("h", "ya") else (key[0], key[1] % 2, *key[2:])
        s = self.slots.get(key)
        if s is None:
            s = self.slots[key] = SLOT_BASE + 1 + len(self.slots)
            if s >= self.cfg.mxm_xbuf_depth:
                raise CompileError(f"the loop needs x slots {SLOT_BASE}..{s}; an MXM has mxm_xbuf_depth = "
                                   f"{self.cfg.mxm_xbuf_depth}")
        return s

    def resid(self, l: int, mid: bool = False) -> str:
        """The residual vector layer ``l``'s MLP (``mid``) or attention part reads."""
        return "mid" if mid and self.model.layers[l].attn else "x"

    def acc(self, what, i):
        """Accumulator rows (past ``ACC_BASE``): h's (``"h"``), the new x's (``"y"``), q, k and
        v's (``"p"``), the logits' (``"v"``: ``HEAD_ROWS`` rows in turn, each reused once the
        argmax has read it); a norm's x on ``MXM_W`` and ``MXM_E`` (``"nw"``, ``"ne"``), its sum
        of squares (``"q"``), its output on ``MXM_E`` (``"ny"``) and a LayerNorm's sum of the
        lanes (``"mu"``, on ``MXM_W``) and its ``n`` (``"nn"``, on ``MXM_E``)."""
        if what == "v":
            i %= min(self.KV, HEAD_ROWS)
        return self._acc_first[what] + i

    @functools.cached_property
    def _acc_first(self) -> dict:
        """The first accumulator row of each of :meth:`acc`'s names, in turn by their sizes."""
        KH, out, row = self.KH, {}, ACC_BASE
        for name, n in (("h", self.KI), ("y", KH), ("p", 3 * self.KA), ("v", min(self.KV, HEAD_ROWS)), ("nw", KH),
                        ("ne", KH), ("q", 1), ("ny", KH), ("mu", 1), ("nn", KH)):
            out[name], row = row, row + n
        return out

    # ---- placement ---------------------------------------------------------------------------
    def _start(self):
        """The zero slot of both MXMs, and the first SETB from the first prompt row."""
        pl = self.pl
        for side, h in (("MXM_W", "W"), ("MXM_E", "E")):
            pl.lx(side, f"MEM_{h}0", self.zero_row[h], self.ZERO, 0, f"zeros -> {side} slot 0")
        return self._setb(START_MEM, self.prompt_rows[0], 0, "position 0")

    def _setb(self, mem, row, t0, who):
        """READ ``row`` of ``mem`` west to ``SXM_W`` and ``SETB`` the token register from it:
        the first cycle a READ may use the register."""
        pl = self.pl
        lag = 1 + pl.pos(mem) - pl.pos("SXM_W")
        t = pl.place([Item(mem, 0, Instr.read(ID_STREAM, WEST, row), pl.pos("SXM_W")),
                      Item("SXM_W", lag, Instr.setb(ID_STREAM, WEST, TOKEN_REG))], t0, f"SETB for {who}")
        return t + lag + SETB_LATENCY

    def _position(self, i, t_reg):
        """The run's position ``i`` (``start + i``): the embedding, every layer, and from the last
        prompt position on the LM head and ARGMAX; the SETB of the next position (after
        everything here is placed)."""
        pl, pos = self.pl, self.start + i
        for k in range(self.KH):            # the embedding through the token register, into both MXMs
            mem, a = self.embed[k]
            slot = self.slot("e", k) if self.positions else self.slot("x", 0, k)
            for side, d, ldr in (("MXM_W", WEST, "MXL_W"), ("MXM_E", EAST, "MXL_E")):
                lead = 1 + abs(pl.pos(mem) - pl.pos(side))
                t = pl.place([Item(mem, 0, Instr.read(LX_STREAM, d, a, TOKEN_REG), pl.pos(side)),
                              Item(ldr, lead, Instr.lx(LX_STREAM, d, slot))], t_reg,
                             f"position {pos}: embedding block {k} -> {side}")
                pl.slot_ready[side][slot] = t + lead + 1
        if self.positions:                  # BERT: the position's rows, the sum, its LayerNorm
            self.position_rows(pos, t_reg)
            self.embedding_sum(pos)
        for l, layer in enumerate(self.model.layers):
            if layer.attn:
                self._attention(pos, l)
            self._mlp(pos, l)
        done = self.state.res.last_issue + 1
        if i + 1 < self.prompt_len:         # prefill: the next prompt token
            return self._setb(START_MEM, self.prompt_rows[i + 1], done, f"position {pos + 1}")
        n = i + 1 - self.prompt_len          # the token this position generates
        t_w = self._head(n)
        if n == self.tokens - 1:
            return t_w + 2
        return self._setb(ID_MEM, self.id_rows[n], max(t_w + 1, self.state.res.last_issue + 1), f"position {pos + 1}")

    def _mm_chain(self, blocks, pairs, acc, who):
        """Load each ``(block, slot)`` of ``pairs`` and MM it into row ``acc`` (the first without ACC)."""
        pl = self.pl
        for j, (key, slot) in enumerate(pairs):
            side = side_of(key[0])
            pl.load(side, blocks[key], 0, f"{who} block {key}")
            pl.mm(side, slot, acc, MMFlag.ACC if j else 0, 0, who)

    def _vop(self, side, acc, param, flags, sink, who):
        """Flush row ``acc`` of MXM ``side`` to the VXM and ``VOP`` it with entry ``param``;
        ``sink(drive)`` gives the items that take the int8 result (driven ``drive`` cycles after the
        group) and ``{direction: position}`` of their farthest.  Returns the group's cycle."""
        pl, cfg = self.pl, self.cfg
        lag = pl.emit_lag(side)
        drive = lag + cfg.vxm_latency
        items, to = sink(drive)
        for d in to:
            flags |= VopFlag.OUT_W if d == WEST else VopFlag.OUT_E
        items = [pl.flush(side, acc, self.ZERO),
                 Item("VXM", lag, Instr.vop(EMIT_STREAM, OUT_DIR[side], param, H_STREAM, flags), to), *items]
        return pl.place(items, pl.acc_ready[(side, acc)], who)

    def _to_slot(self, side, acc, param, slot, flags, who):
        """Row ``acc`` of MXM ``side`` through the VXM into x slot ``slot`` of both MXMs (each
        computes half the blocks of what reads it) as it passes."""
        pl, cfg = self.pl, self.cfg
        sides = (("MXM_W", "MXL_W", WEST), ("MXM_E", "MXL_E", EAST))
        off = {}

        def sink(drive):
            items, to = [], {}
            for side, ldr, d in sides:
                off[side] = drive + abs(cfg.vxm_position - pl.pos(side))
                items.append(Item(ldr, off[side], Instr.lx(H_STREAM, d, slot)))
                to[d] = pl.pos(side)
            return items, to
        t = self._vop(side, acc, param, flags, sink, who)
        for s_, _, _ in sides:
            pl.slot_ready[s_][slot] = t + off[s_] + 1

    def _to_row(self, side, acc, param, mem, row, who, what):
        """Row ``acc`` of MXM ``side`` through the VXM into row ``row`` of ``mem`` (``MEM_W0`` or
        ``MEM_E0``, beside the VXM); the WRITE recorded.  Returns the WRITE's cycle."""
        pl = self.pl
        d = WEST if pl.pos(mem) < self.cfg.vxm_position else EAST
        off = {}

        def sink(drive):
            off["w"] = drive + abs(pl.pos(mem) - self.cfg.vxm_position)
            return [Item(mem, off["w"], Instr.write(H_STREAM, d, row))], {d: pl.pos(mem)}
        t = self._vop(side, acc, param, 0, sink, who)
        self.writes.append((t + off["w"], mem, row, what))
        return t + off["w"]

    def _attention(self, pos, l):
        """Layer ``l``'s attention part at position ``pos``: q, k, v into the step's rows, the step,
        the heads' outputs back into x slots, ``c x + Wo y`` into the layer's mid x."""
        pl, layer, A = self.pl, self.model.layers[l], self.A[l]
        src = ("x", l)
        if layer.attn.norm is not None:
            self._norm(layer.attn.norm, src, ("n1", l), f"position {pos}: layer {l} norm 1")
            src = ("n1", l)
        first = self.steps.get(l)           # the layer's caches, constants and rows: allocated by its first step
        ready, heads, pending = 0, layer.attn.heads, []
        for n_i, n in enumerate(QKV):
            for h in range(heads):
                for b in range(2):
                    j = 2 * h + b
                    acc = self.acc("p", n_i * self.KA + j)
                    self._mm_chain(A[n], [((j, k), self.slot(*src, k)) for k in range(self.KH)], acc,
                                   f"position {pos}: layer {l} {n} block {j}")
                    pending.append((n, h, b, acc))
        step = AttentionStep(self.cfg, layer.attn.specs, -(-(pos + 1) // BLOCK), state=self.state, placer=pl,
                             L=pos + 1, t_start=0, shared=first, defer=True)
        if first is None:
            self.steps[l] = step
        for n, h, b, acc in pending:       # q, k, v into the step's rows (q, v west of the VXM, k east)
            mem, row = (("MEM_E0", step.k_row[h, b]) if n == "k" else
                        ("MEM_W0", (step.q_row if n == "q" else step.v_row)[h, b]))
            ready = max(ready, self._to_row(side_of(2 * h + b), acc, self.pa[l][n, h][b], mem, row,
                                            f"position {pos}: layer {l} {n}[{h}, {b}]", ("qkv", pos, l, n, h, b)) + 1)
        step.place(ready)
        self.attention_spans[pos, l] = (ready, max(step.y_cycle.values()) + 1)
        self.writes += [(c, m, a, ("attention", pos, l, w)) for c, m, a, w in step.writes]
        for (h, b), row in step.y_row.items():          # the heads' outputs into both MXMs' x slots
            j = 2 * h + b
            for side in SIDES:
                pl.lx(side, "MEM_E0", row, self.slot("ya", l, j), step.y_cycle[h, b] + 1,
                      f"position {pos}: layer {l} y[{h}, {b}] -> {side}")
        dst, entries, post = self.after_residual(layer.attn, pos, self.po[l], ("z1", l), ("mid", l))
        self._residual_sum(("x", l), [("ya", l, j) for j in range(self.KA)], A["o"], self.CA[l], entries,
                           dst, f"position {pos}: layer {l} attention")
        if post is not None:
            self._norm(post, dst, ("mid", l), f"position {pos}: layer {l} norm 1 (after)")

    def _residual_sum(self, x, ins, blocks, C, param, dst, who):
        """``dst = requant(c x + W ins)`` block by block, each on its MXM (:func:`side_of`): the
        residual's ``c I`` block, then ``W``'s blocks over the input vectors ``ins``."""
        pl = self.pl
        for k in range(self.KH):
            side, acc = side_of(k), self.acc("y", k)
            pl.load(side, C[k] if k in C else C[side[-1]], 0, f"{who} residual block")
            pl.mm(side, self.slot(*x, k), acc, 0, 0, f"{who} residual {k}")
            for j, key in enumerate(ins):
                pl.load(side, blocks[k, j], 0, f"{who} block {k, j}")
                pl.mm(side, self.slot(*key), acc, MMFlag.ACC, 0, f"{who} x[{k}]")
            self._to_slot(side, acc, param[k], self.slot(*dst, k), 0, f"{who} x[{k}]")

    def _mlp(self, pos, l):
        KH, KI, layer = self.KH, self.KI, self.model.layers[l]
        x_in = (self.resid(l, mid=True), l)
        who = f"position {pos}: layer {l}"
        src = x_in
        if layer.norm is not None:
            self._norm(layer.norm, x_in, ("n2", l), f"{who} norm 2")
            src = ("n2", l)
        for i in range(KI):
            self._mm_chain(self.W1[l], [((i, k), self.slot(*src, k)) for k in range(KH)], self.acc("h", i),
                           f"{who} W1 row block {i}")
            self._to_slot(side_of(i), self.acc("h", i), self.p1[l][i], self.slot("h", l, i), VopFlag.TABLE,
                          f"{who} h[{i}]")
        dst, entries, post = self.after_residual(layer, pos, self.p2[l], ("z2", l), ("x", l + 1))
        self._residual_sum(x_in, [("h", l, i) for i in range(KI)], self.W2[l], self.C[l], entries, dst, f"{who} MLP")
        if post is not None:
            self._norm(post, dst, ("x", l + 1), f"{who} norm 2 (after)")

    def _head(self, n):
        """The LM head's blocks, their ARGMAX, the id written; returns the WRITE's cycle."""
        pl, L, last = self.pl, self.cfg.lanes, ("x", len(self.model.layers))
        if self.model.norm is not None:
            self._norm(self.model.norm, last, ("nf",), f"token {n}: the final norm")
            last = ("nf",)
        ps, pm = pl.pos("SXM_W"), pl.pos(ID_MEM)
        after = SXM_LATENCY + pm - ps          # ARGMAX's issue to the id's WRITE at ID_MEM
        t_arg = -1
        continues = n == self.tokens - 1 and not self.model.heads
        for v in range(self.KV):
            side = side_of(v)
            at_sxm = MXM_LATENCY + abs(ps - pl.pos(side))    # the block's logits reach ARGMAX at SXM_W
            self._mm_chain(self.Wh, [((v, k), self.slot(*last, k)) for k in range(self.KH)], self.acc("v", v),
                           f"token {n}: LM head block {v}")
            flags = (ArgmaxFlag.FIRST if v == 0 else 0) | (ArgmaxFlag.OUT_E if v == self.KV - 1 else 0)
            flush = Item(side, 0, Instr.mm(0, IN_DIR[side], acc=self.acc("v", v), slot=self.ZERO, out=EMIT_STREAM,
                                           flags=MMFlag.XBUF | MMFlag.ACC | MMFlag.EMIT), {OUT_DIR[side]: ps})
            arg = Item("SXM_W", at_sxm, Instr.argmax(EMIT_STREAM, OUT_DIR[side], index=v * L, out=INDEX_STREAM,
                                                     flags=flags),
                       {EAST: pm} if flags & ArgmaxFlag.OUT_E else None)
            items = [flush, arg]
            if v == self.KV - 1:
                items.append(Item(ID_MEM, at_sxm + after, Instr.write(INDEX_STREAM, EAST, self.id_rows[n])))
                if continues:              # the last id also into the start row: the next run continues from it
                    arg.to = {EAST: pl.pos(START_MEM)}
                    items.append(Item(START_MEM, at_sxm + after + pl.pos(START_MEM) - pm,
                                      Instr.write(INDEX_STREAM, EAST, self.start_row)))
            t0 = max(pl.acc_ready[(side, self.acc("v", v))], t_arg + 1 - at_sxm)
            t = pl.place(items, t0, f"token {n}: logits block {v} -> ARGMAX")
            t_arg = t + at_sxm
        t_w = t_arg + after
        self.writes.append((t_w, ID_MEM, self.id_rows[n], ("id", n)))
        if continues:
            self.writes.append((t_w + 1, START_MEM, self.start_row, ("id", n)))
        return t_w

    # ---- the program -------------------------------------------------------------------------
    def _lower(self):
        queues = {name: lower(entries) for name, entries in self.state.timed.items()}
        need = max(len(q) + 1 for q in queues.values())
        if need > self.cfg.iq_depth:
            raise CompileError(f"{self.prompt_len + self.tokens - 1} positions unrolled need {need} instructions in "
                               f"one queue; the queues hold iq_depth = {self.cfg.iq_depth} (fewer positions: fewer tokens "
                               f"per run or a shorter prompt; or --set iq_depth={1 << (need - 1).bit_length()})")
        per_slice = {}
        for c, m, a, w in self.writes:
            per_slice[m] = per_slice.get(m, 0) + 1
        worst = max(per_slice.items(), key=lambda kv: kv[1])
        if self.cfg.trace_depth and worst[1] > self.cfg.trace_depth:
            raise CompileError(f"the run writes {worst[1]} rows of {worst[0]}; its event trace holds trace_depth = "
                               f"{self.cfg.trace_depth} (--set trace_depth={1 << (worst[1] - 1).bit_length()})")
        return queues

    def iq_needed(self) -> int:
        """The deepest queue's instructions (HALT included)."""
        return max(len(q) + 1 for q in self.program_template.values())

    def program(self, prompt, memory: dict | None = None) -> Program:
        """The tile program with the prompt's tokens in their rows (the only data the host writes;
        a model without attention: the last token); ``memory``: the SRAM an earlier run left
        (default: the loaded image, caches zero)."""
        prompt = [int(t) for t in ([prompt] if np.isscalar(prompt) else prompt)][-self.prompt_len:]
        if len(prompt) != self.prompt_len:
            raise CompileError(f"the run was compiled for a prompt of {self.prompt_len} tokens, got {len(prompt)}")
        bad = [t for t in prompt if not 0 <= t < self.model.vocab]
        if bad:
            raise CompileError(f"token {bad[0]} is not in the vocabulary of {self.model.vocab}")
        mem = {n: m.copy() for n, m in (memory or self.state.memory).items()}
        for row, t in zip(self.prompt_rows, prompt):
            mem[START_MEM][row] = index_vector(t, self.cfg.lanes)
        defined = self.state.loaded if memory is None else {n: set(range(self.cfg.mem_depth)) for n in mem}
        return Program(self.cfg, dict(self.program_template), mem, vxm_params=self.state.params,
                       table=self.state.tables, defined=defined).validate()

    def manifest(self):
        """Every WRITE of the run (cycle, slice, row; the values are the golden model's), in cycle
        order, and the cycle count."""
        order = {n: i for i, n in enumerate(self.cfg.slice_names)}
        ws = sorted(self.writes, key=lambda w: (w[0], order[w[1]]))
        return [PredictedWrite(c, m, a, (), 0) for c, m, a, _ in ws], self.cycles

    def id_write_cycles(self) -> list[int]:
        return sorted(c for c, m, a, w in self.writes if w[0] == "id" and m == ID_MEM)

    def attention_cycles(self) -> list[int]:
        """Per generated token, the cycles its position's attention steps span (q, k and v written
        to y written), summed over the layers: what the host would do with attention off the tile."""
        out = []
        for n in range(self.tokens):
            pos = self.start + self.prompt_len - 1 + n
            out.append(sum(b - a for (p, _), (a, b) in self.attention_spans.items() if p == pos))
        return out

    def token_cycles(self) -> list[int]:
        """Cycles from one token's id WRITE to the next's (the first: from cycle 0)."""
        c = self.id_write_cycles()
        return [c[0]] + [b - a for a, b in zip(c, c[1:])]
