"""The token loop on chip: greedy tokens of a :class:`~firmware_gen.golden.token_loop.LoopModel`
in one run of one tile, the host writing only the prompt's tokens and reading only the ids
(``docs/afd.md``, "The token loop on chip").

Every position is unrolled into the instruction queues (no loop construct: the queues hold the
positions a run asks, and :class:`TokenLoop` names ``iq_depth`` when they do not), and every
step of it is placed in static time through the tile's reservation table
(``attention_place.Placer``, one for the whole run):

1. ``SETB`` at ``SXM_W`` sets base register :data:`TOKEN_REG` to the token id read back from a
   MEM row (a prompt row the host wrote, or the id the last position found); the embedding's
   blocks are read at ``row + id`` through it and ``LX``-ed into ``MXM_W``'s x slots.
2. Each layer with attention: the q, k and v blocks of every head (``MXM_W``: weight blocks
   striped over the four west MEM slices, four rows a cycle; a flush of each accumulator row to
   the VXM, requantised into ``MEM_W0`` / ``MEM_E0`` rows), then the attention step
   (``compiler/attention.py``, ``AttentionStep`` with the context length fixed: the layer's
   caches, constants and parameters shared by all its positions), then ``c I`` (the residual) and
   the ``Wo`` blocks of the heads' outputs into the new x.
3. Each layer's MLP: ``W1`` blocks, a flush of each row to the VXM (``TABLE``: ReLU) and its h back
   into an x slot; ``c I`` and the ``W2`` blocks into the new x.
4. After the last prompt position and every generated one, the LM head's blocks; each block's
   logits leave the MXM as int32 planes (an ``MM ACC EMIT`` of the zero slot) straight into
   ``ARGMAX`` at ``SXM_W``; the last one drives the id east to ``MEM_W3``, which writes it in the
   token's row; that row is read back to ``SXM_W`` for the next position's ``SETB``.

A position starts when everything of the one before is placed (its x slots and rows are then
free).  Without attention a token's successor depends on that token only, so a run of ``k``
tokens writes its last id a second time, into the start row its first ``SETB`` reads: the next
run of the same program continues the sequence.  With attention the positions are compiled in
(the cache row each writes, the mask of its last block), so a run generates all its tokens.
"""

from __future__ import annotations

import numpy as np

from lpu_arch.config import TileConfig
from lpu_arch.isa import EAST, MXM_LATENCY, SETB_LATENCY, SXM_LATENCY, WEST, ArgmaxFlag, Instr, MMFlag, VopFlag

from firmware_gen.compiler import CompileError
from firmware_gen.compiler.attention import AttentionStep
from firmware_gen.compiler.attention_place import Item, Placer
from firmware_gen.compiler.reserve import lower
from firmware_gen.compiler.schedule import PredictedWrite
from firmware_gen.compiler.tile_state import TileState
from firmware_gen.golden.archmodel import index_vector
from firmware_gen.golden.attention import BLOCK, MAX_CONTEXT
from firmware_gen.golden.token_loop import HEAD_DIM, RELU, LoopModel
from firmware_gen.program import Program

SIDE = "MXM_W"
STRIPE = 4                         # MEM slices a weight block is striped over (LW n)
TOKEN_REG = 1                      # the base register SETB sets to the token id
RELU_TABLE = 3                     # (the attention step's exp and reciprocal tables are 1 and 2)
SLOT_BASE, ACC_BASE = 400, 64      # the loop's x slots and accumulator rows: past the attention step's
LX_STREAM, H_STREAM, ID_STREAM = 4, 5, 6       # west-flowing: x copies, h and x from the VXM, the id read back
EMIT_STREAM, INDEX_STREAM = 0, 6                # east-flowing: the logits' planes, ARGMAX's index
ID_MEM = "MEM_W3"                  # the slice beside SXM_W: the ids' rows
START_MEM = "MEM_W2"               # the prompt's rows (the start row: its last), then each run's last id
NEEDS = {"sxm_argmax": "the next token is the argmax of the logits (SXM ARGMAX)",
         "sxm_setb": "the next token's embedding is read at its id (SXM SETB)"}
ATTN_NEEDS = {"sxm_max": "the attention step's maximum score (SXM MAX)"}
QKV = ("q", "k", "v")


class TokenLoop:
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
        self._check()
        self.state = TileState(cfg)
        self.pl = Placer(self.state)
        self.steps = {}                 # layer -> its first AttentionStep (the caches the others share)
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
        if cfg.mem_slices != STRIPE or cfg.streams < 7 or cfg.mxm_dtype != "int8" or cfg.links or L != BLOCK:
            raise CompileError(f"the token loop is laid out for {BLOCK} lanes, {STRIPE} MEM slices per hemisphere, "
                               f"7 streams, an int8 MXM and a single tile: the tile has {L}, {cfg.mem_slices}, "
                               f"{cfg.streams}, {cfg.mxm_dtype}, {cfg.links} link(s)")
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
        if SLOT_BASE + self.slots_needed() > cfg.mxm_xbuf_depth:
            raise CompileError(f"the loop needs x slots {SLOT_BASE}..{SLOT_BASE + self.slots_needed() - 1}; an MXM "
                               f"has mxm_xbuf_depth = {cfg.mxm_xbuf_depth}")
        rows = self.acc("v", -(-m.vocab // L))
        if rows > cfg.mxm_acc_depth:
            raise CompileError(f"the loop needs accumulator rows up to {rows - 1} (the LM head's {-(-m.vocab // L)} "
                               f"blocks); an MXM has mxm_acc_depth = {cfg.mxm_acc_depth}")

    def stages(self) -> int:
        """The x vectors of a position: the embedding, after each attention part, after each layer."""
        return 1 + sum(2 if l.attn else 1 for l in self.model.layers)

    def slots_needed(self) -> int:
        m, L = self.model, self.cfg.lanes
        return 1 + self.stages() * (m.H // L) + len(m.layers) * (m.I // L + m.heads * HEAD_DIM // L)

    # ---- layout ------------------------------------------------------------------------------
    def _block(self, block):
        """A 16-row weight block striped over the west slices: its per-slice first rows."""
        rows = self.cfg.lanes // STRIPE
        a = [self.state.alloc(f"MEM_W{s}", rows) for s in range(STRIPE)]
        b = np.asarray(block, np.int64)
        for s in range(STRIPE):
            self.state.load(f"MEM_W{s}", a[s], b[s::STRIPE] & 0xFF)
        return a

    def _blocks(self, W):
        """Every lanes x lanes block of ``W`` (zero-padded), by (row block, column block)."""
        L = self.cfg.lanes
        r, c = -(-W.shape[0] // L), W.shape[1] // L
        P = np.zeros((r * L, c * L), np.int64)
        P[:W.shape[0]] = W
        return {(i, k): self._block(P[i * L:(i + 1) * L, k * L:(k + 1) * L]) for i in range(r) for k in range(c)}

    def _layout(self):
        m, L, st = self.model, self.cfg.lanes, self.state
        eye = np.eye(L, dtype=np.int64)
        self.W1 = [self._blocks(l.W1) for l in m.layers]
        self.W2 = [self._blocks(l.W2) for l in m.layers]
        self.C = [self._block(l.c * eye) for l in m.layers]
        self.A = [{n: self._blocks(getattr(l.attn, f"W{n}")) for n in ("q", "k", "v", "o")} if l.attn else None
                  for l in m.layers]
        self.CA = [self._block(l.attn.c * eye) if l.attn else None for l in m.layers]
        self.Wh = self._blocks(m.head)
        self.embed = {}             # embedding block k: (slice, first row); token t's at row + t
        for k in range(self.KH):
            mem = f"MEM_W{k % STRIPE}"
            a = st.alloc(mem, m.vocab)
            st.load(mem, a, m.embed[:, k * L:(k + 1) * L].astype(np.int64) & 0xFF)
            self.embed[k] = (mem, a)
        self.zero_row = st.alloc("MEM_W0", 1)
        st.load("MEM_W0", self.zero_row, np.zeros(L, np.uint8))
        rows = [st.alloc(START_MEM, 1) for _ in range(MAX_CONTEXT if m.heads else 1)]
        self.prompt_rows = rows[:self.prompt_len]
        self.start_row = self.prompt_rows[-1]
        self.id_rows = [st.alloc(ID_MEM, 1) for _ in range(self.tokens)]
        for mem, rows in ((START_MEM, self.prompt_rows), (ID_MEM, self.id_rows)):
            for r in rows:
                st.load(mem, r, np.zeros(L, np.uint8))

    def _params(self):
        st = self.state
        st.set_table(RELU_TABLE, RELU)
        self.p1 = [st.new_param(m_a=l.rq1[0], s_a=l.rq1[1], table=RELU_TABLE) for l in self.model.layers]
        self.p2 = [st.new_param(m_a=l.rq2[0], s_a=l.rq2[1]) for l in self.model.layers]
        self.pa = [{(n, h): st.new_param(m_a=l.attn.rq[n][h][0], s_a=l.attn.rq[n][h][1])
                    for n in QKV for h in range(l.attn.heads)} if l.attn else None for l in self.model.layers]
        self.po = [st.new_param(m_a=l.attn.rq_o[0], s_a=l.attn.rq_o[1]) if l.attn else None for l in self.model.layers]

    # ---- slots and accumulator rows ----------------------------------------------------------
    ZERO = 0

    def stage_index(self, l: int, mid: bool = False) -> int:
        """The x stage layer ``l`` reads (``mid``: its MLP, after its attention part); ``l`` = the
        number of layers: the LM head's."""
        s = 0
        for i, layer in enumerate(self.model.layers[:l]):
            s += 2 if layer.attn else 1
        return s + (1 if mid and self.model.layers[l].attn else 0)

    def x_slot(self, stage, k):
        return SLOT_BASE + 1 + stage * self.KH + k

    def h_slot(self, l, i):
        return SLOT_BASE + 1 + self.stages() * self.KH + l * (self.KI + self.KA) + i

    def y_slot(self, l, j):
        """Block j of the heads' outputs of layer ``l`` (what ``Wo`` multiplies)."""
        return self.h_slot(l, self.KI + j)

    def acc(self, what, i):
        """Accumulator rows (past ``ACC_BASE``): h's (``"h"``), the new x's (``"y"``), q, k and
        v's (``"p"``), the logits' (``"v"``)."""
        return ACC_BASE + {"h": 0, "y": self.KI, "p": self.KI + self.KH, "v": self.KI + self.KH + 3 * self.KA}[what] + i

    # ---- placement ---------------------------------------------------------------------------
    def _start(self):
        """The zero slot, and the first SETB from the first prompt row."""
        pl = self.pl
        pl.lx(SIDE, "MEM_W0", self.zero_row, self.ZERO, 0, "zeros -> MXM_W slot 0")
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
        for k in range(self.KH):            # the embedding through the token register
            mem, a = self.embed[k]
            lead = 1 + pl.pos(mem) - pl.pos(SIDE)
            t = pl.place([Item(mem, 0, Instr.read(LX_STREAM, WEST, a, TOKEN_REG), pl.pos(SIDE)),
                          Item("MXL_W", lead, Instr.lx(LX_STREAM, WEST, self.x_slot(0, k)))],
                         t_reg, f"position {pos}: embedding block {k}")
            pl.slot_ready[SIDE][self.x_slot(0, k)] = t + lead + 1
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
            pl.load(SIDE, blocks[key], 0, f"{who} block {key}")
            pl.mm(SIDE, slot, acc, MMFlag.ACC if j else 0, 0, who)

    def _vop(self, acc, param, flags, out_dir, sink, who):
        """Flush row ``acc`` to the VXM and ``VOP`` it with entry ``param``, the int8 result driven
        ``out_dir``; ``sink(lag_to_drive)`` gives the items that take it.  Returns the group's cycle."""
        pl, cfg = self.pl, self.cfg
        lag = pl.emit_lag(SIDE)
        drive = lag + cfg.vxm_latency
        flag = VopFlag.OUT_W if out_dir == WEST else VopFlag.OUT_E
        items, to = sink(drive)
        items = [pl.flush(SIDE, acc, self.ZERO),
                 Item("VXM", lag, Instr.vop(EMIT_STREAM, EAST, param, H_STREAM, flags | flag), {out_dir: to}), *items]
        return pl.place(items, pl.acc_ready[(SIDE, acc)], who), drive

    def _to_slot(self, acc, param, slot, flags, who):
        """Row ``acc`` through the VXM into x slot ``slot`` as it passes ``MXM_W``."""
        pl, cfg = self.pl, self.cfg
        px = pl.pos(SIDE)
        off = {}

        def sink(drive):
            off["lx"] = drive + cfg.vxm_position - px
            return [Item("MXL_W", off["lx"], Instr.lx(H_STREAM, WEST, slot))], px
        t, _ = self._vop(acc, param, flags, WEST, sink, who)
        pl.slot_ready[SIDE][slot] = t + off["lx"] + 1

    def _to_row(self, acc, param, mem, row, who, what):
        """Row ``acc`` through the VXM into row ``row`` of ``mem`` (``MEM_W0`` or ``MEM_E0``, beside
        the VXM); the WRITE recorded.  Returns the WRITE's cycle."""
        pl = self.pl
        d = WEST if pl.pos(mem) < self.cfg.vxm_position else EAST
        off = {}

        def sink(drive):
            off["w"] = drive + abs(pl.pos(mem) - self.cfg.vxm_position)
            return [Item(mem, off["w"], Instr.write(H_STREAM, d, row))], pl.pos(mem)
        t, _ = self._vop(acc, param, 0, d, sink, who)
        self.writes.append((t + off["w"], mem, row, what))
        return t + off["w"]

    def _attention(self, pos, l):
        """Layer ``l``'s attention part at position ``pos``: q, k, v into the step's rows, the step,
        the heads' outputs back into x slots, ``c x + Wo y`` into the layer's mid x."""
        pl, layer, A = self.pl, self.model.layers[l], self.A[l]
        x_in, x_mid = self.stage_index(l), self.stage_index(l, mid=True)
        first = self.steps.get(l)           # the layer's caches, constants and rows: allocated by its first step
        ready, heads, pending = 0, layer.attn.heads, []
        for n_i, n in enumerate(QKV):
            for h in range(heads):
                for b in range(2):
                    j = 2 * h + b
                    acc = self.acc("p", n_i * self.KA + j)
                    self._mm_chain(A[n], [((j, k), self.x_slot(x_in, k)) for k in range(self.KH)], acc,
                                   f"position {pos}: layer {l} {n} block {j}")
                    pending.append((n, h, b, acc))
        step = AttentionStep(self.cfg, layer.attn.specs, -(-(pos + 1) // BLOCK), state=self.state, placer=pl,
                             L=pos + 1, t_start=0, shared=first, defer=True)
        if first is None:
            self.steps[l] = step
        for n, h, b, acc in pending:       # q, k, v into the step's rows (q, v west of the VXM, k east)
            mem, row = (("MEM_E0", step.k_row[h, b]) if n == "k" else
                        ("MEM_W0", (step.q_row if n == "q" else step.v_row)[h, b]))
            ready = max(ready, self._to_row(acc, self.pa[l][n, h], mem, row, f"position {pos}: layer {l} {n}[{h}, {b}]",
                                            ("qkv", pos, l, n, h, b)) + 1)
        step.place(ready)
        self.writes += [(c, m, a, ("attention", pos, l, w)) for c, m, a, w in step.writes]
        for (h, b), row in step.y_row.items():          # the heads' outputs into x slots
            j = 2 * h + b
            pl.lx(SIDE, "MEM_E0", row, self.y_slot(l, j), step.y_cycle[h, b] + 1,
                  f"position {pos}: layer {l} y[{h}, {b}] -> slot")
        pl.load(SIDE, self.CA[l], 0, f"position {pos}: layer {l} attention residual block")
        for k in range(self.KH):
            pl.mm(SIDE, self.x_slot(x_in, k), self.acc("y", k), 0, 0, f"position {pos}: layer {l} residual {k}")
        for k in range(self.KH):
            for j in range(self.KA):
                pl.load(SIDE, A["o"][k, j], 0, f"position {pos}: layer {l} Wo block {k, j}")
                pl.mm(SIDE, self.y_slot(l, j), self.acc("y", k), MMFlag.ACC, 0, f"position {pos}: layer {l} o[{k}]")
            self._to_slot(self.acc("y", k), self.po[l], self.x_slot(x_mid, k), 0, f"position {pos}: layer {l} x[{k}]")

    def _mlp(self, pos, l):
        KH, KI = self.KH, self.KI
        x_in, x_out = self.stage_index(l, mid=True), self.stage_index(l + 1) if l + 1 < len(self.model.layers) \
            else self.stages() - 1
        who = f"position {pos}: layer {l}"
        for i in range(KI):
            self._mm_chain(self.W1[l], [((i, k), self.x_slot(x_in, k)) for k in range(KH)], self.acc("h", i),
                           f"{who} W1 row block {i}")
            self._to_slot(self.acc("h", i), self.p1[l], self.h_slot(l, i), VopFlag.TABLE, f"{who} h[{i}]")
        self.pl.load(SIDE, self.C[l], 0, f"{who} residual block")
        for j in range(KH):
            self.pl.mm(SIDE, self.x_slot(x_in, j), self.acc("y", j), 0, 0, f"{who} residual {j}")
        for j in range(KH):
            for i in range(KI):
                self.pl.load(SIDE, self.W2[l][j, i], 0, f"{who} W2 block {j, i}")
                self.pl.mm(SIDE, self.h_slot(l, i), self.acc("y", j), MMFlag.ACC, 0, f"{who} y[{j}]")
            self._to_slot(self.acc("y", j), self.p2[l], self.x_slot(x_out, j), 0, f"{who} x[{j}]")

    def _head(self, n):
        """The LM head's blocks, their ARGMAX, the id written; returns the WRITE's cycle."""
        pl, L, last = self.pl, self.cfg.lanes, self.stages() - 1
        px, ps, pm = pl.pos(SIDE), pl.pos("SXM_W"), pl.pos(ID_MEM)
        at_sxm = MXM_LATENCY + ps - px
        w_off = at_sxm + SXM_LATENCY + pm - ps
        t_arg = -1
        continues = n == self.tokens - 1 and not self.model.heads
        for v in range(self.KV):
            self._mm_chain(self.Wh, [((v, k), self.x_slot(last, k)) for k in range(self.KH)], self.acc("v", v),
                           f"token {n}: LM head block {v}")
            flags = (ArgmaxFlag.FIRST if v == 0 else 0) | (ArgmaxFlag.OUT_E if v == self.KV - 1 else 0)
            flush = Item(SIDE, 0, Instr.mm(0, WEST, acc=self.acc("v", v), slot=self.ZERO, out=EMIT_STREAM,
                                           flags=MMFlag.XBUF | MMFlag.ACC | MMFlag.EMIT), {EAST: ps})
            arg = Item("SXM_W", at_sxm, Instr.argmax(EMIT_STREAM, EAST, index=v * L, out=INDEX_STREAM, flags=flags),
                       {EAST: pm} if flags & ArgmaxFlag.OUT_E else None)
            items = [flush, arg]
            if v == self.KV - 1:
                items.append(Item(ID_MEM, w_off, Instr.write(INDEX_STREAM, EAST, self.id_rows[n])))
                if continues:              # the last id also into the start row: the next run continues from it
                    arg.to = {EAST: pl.pos(START_MEM)}
                    items.append(Item(START_MEM, w_off + pl.pos(START_MEM) - pm,
                                      Instr.write(INDEX_STREAM, EAST, self.start_row)))
            t0 = max(pl.acc_ready[(SIDE, self.acc("v", v))], t_arg + 1 - at_sxm)
            t = pl.place(items, t0, f"token {n}: logits block {v} -> ARGMAX")
            t_arg = t + at_sxm
        t_w = t_arg - at_sxm + w_off
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
                               f"one queue; the queues hold iq_depth = {self.cfg.iq_depth} (fewer tokens per run, or "
                               f"--set iq_depth={1 << (need - 1).bit_length()})")
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

    def token_cycles(self) -> list[int]:
        """Cycles from one token's id WRITE to the next's (the first: from cycle 0)."""
        c = self.id_write_cycles()
        return [c[0]] + [b - a for a, b in zip(c, c[1:])]
