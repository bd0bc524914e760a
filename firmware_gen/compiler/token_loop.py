"""The token loop on chip: ``k`` greedy tokens of a :class:`~firmware_gen.golden.token_loop.LoopModel`
in one run of one tile, the host writing only the prompt's token and reading only the ids
(``docs/afd.md``, "The token loop on chip").

Every token is unrolled into the instruction queues (no loop construct: the queues are deep
enough for the ``k`` a call asks, and :class:`TokenLoop` names ``iq_depth`` when they are not),
and every step of it is placed in static time through the tile's reservation table
(``attention_place.Placer``), on ``MXM_W`` and the west MEM slices:

1. ``SETB`` at ``SXM_W`` sets base register :data:`TOKEN_REG` to the token id read back from a
   MEM row; the embedding's blocks are read at ``row + id`` through it and ``LX``-ed into x slots.
2. Each layer: ``W1`` blocks (striped over the four west MEM slices, four rows a cycle), the MMs,
   a flush of each accumulator row to the VXM (``TABLE``: ReLU) and its h back into an x slot;
   then ``c I`` (the residual) and the ``W2`` blocks into the output rows, flushed to the new x.
3. The LM head's blocks; each block's logits leave the MXM as int32 planes (an ``MM ACC EMIT``
   of the zero slot) straight into ``ARGMAX`` at ``SXM_W``; the last one drives the id east to
   ``MEM_W3``, which writes it in the token's row; that row is read back to ``SXM_W`` for the
   next token's ``SETB``.

The last token's id is written a second time, into the start row the first ``SETB`` reads, so
a next call of the same program continues the sequence: the host writes the prompt's token
once.  Weight blocks do not depend on the token: the placer loads them as early as the MXM
allows, ahead of the ``SETB`` they wait for.
"""

from __future__ import annotations

import numpy as np

from lpu_arch.config import TileConfig
from lpu_arch.isa import EAST, MXM_LATENCY, SETB_LATENCY, SXM_LATENCY, WEST, ArgmaxFlag, Instr, MMFlag, VopFlag

from firmware_gen.compiler import CompileError
from firmware_gen.compiler.attention_place import Item, Placer
from firmware_gen.compiler.reserve import lower
from firmware_gen.compiler.schedule import PredictedWrite
from firmware_gen.compiler.tile_state import TileState
from firmware_gen.golden.archmodel import index_vector
from firmware_gen.golden.token_loop import RELU, LoopModel
from firmware_gen.program import Program

SIDE = "MXM_W"
STRIPE = 4                         # MEM slices a weight block is striped over (LW n)
TOKEN_REG = 1                      # the base register SETB sets to the token id
RELU_TABLE = 1
LX_STREAM, H_STREAM, ID_STREAM = 4, 5, 6       # west-flowing: x copies, h and x from the VXM, the id read back
EMIT_STREAM, INDEX_STREAM = 0, 6                # east-flowing: the logits' planes, ARGMAX's index
ID_MEM = "MEM_W3"                  # the slice beside SXM_W: the ids' rows
START_MEM = "MEM_W2"               # the start row: the prompt's token, then each call's last id
NEEDS = {"sxm_argmax": "the next token is the argmax of the logits (SXM ARGMAX)",
         "sxm_setb": "the next token's embedding is read at its id (SXM SETB)"}


class TokenLoop:
    """``tokens`` steps of ``model`` on a tile of ``cfg``: placed at construction.
    :meth:`program` is the tile program with the start token, :attr:`id_rows` the rows of
    ``ID_MEM`` the ids land in, :meth:`manifest` the writes and cycle count it promises."""

    def __init__(self, cfg: TileConfig, model: LoopModel, tokens: int):
        self.cfg, self.model, self.tokens = cfg, model, int(tokens)
        self._check()
        L = cfg.lanes
        self.KH, self.KI, self.KV = model.H // L, model.I // L, -(-model.vocab // L)
        self.state = TileState(cfg)
        self.pl = Placer(self.state)
        self._layout()
        self._params()
        self.id_writes = []             # (cycle, row, token index) of every id WRITE
        self.setb_cycles = []           # the cycle of each token's SETB
        t = self._start()
        for n in range(self.tokens):
            t = self._token(n, t)
        self.cycles = self.state.res.done_cycles()
        self.program_template = self._lower()

    # ---- checks ------------------------------------------------------------------------------
    def _check(self):
        cfg, m, L = self.cfg, self.model, self.cfg.lanes
        for f, why in NEEDS.items():
            if not getattr(cfg, f):
                raise CompileError(f"the token loop needs {f} = 1 (--set {f}=1): {why}")
        if cfg.mem_slices != STRIPE or cfg.streams < 7 or cfg.mxm_dtype != "int8" or cfg.links:
            raise CompileError(f"the token loop is laid out for {STRIPE} MEM slices per hemisphere, 7 streams, an "
                               f"int8 MXM and a single tile: the tile has {cfg.mem_slices}, {cfg.streams}, "
                               f"{cfg.mxm_dtype}, {cfg.links} link(s)")
        if m.H % L or m.I % L or not m.layers:
            raise CompileError(f"H ({m.H}) and I ({m.I}) must be multiples of the {L} lanes, with at least one layer")
        if not 1 <= self.tokens:
            raise CompileError(f"tokens must be at least 1, got {self.tokens}")
        if m.vocab > cfg.mem_depth // 2:
            raise CompileError(f"a vocabulary of {m.vocab} tokens does not fit: each embedding block takes one row "
                               f"per token of a MEM slice of {cfg.mem_depth} rows")
        slots = self.slots_needed()
        if slots > cfg.mxm_xbuf_depth:
            raise CompileError(f"the loop needs {slots} x slots; an MXM has mxm_xbuf_depth = {cfg.mxm_xbuf_depth}")
        if -(-m.vocab // L) + self.model.H // L > cfg.mxm_acc_depth:
            raise CompileError(f"the LM head needs {-(-m.vocab // L)} accumulator rows; an MXM has "
                               f"mxm_acc_depth = {cfg.mxm_acc_depth}")

    def slots_needed(self) -> int:
        m, L = self.model, self.cfg.lanes
        return 1 + (len(m.layers) + 1) * (m.H // L) + len(m.layers) * (m.I // L)

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
        self.W1 = [self._blocks(l.W1) for l in m.layers]
        self.W2 = [self._blocks(l.W2) for l in m.layers]
        self.C = [self._block(l.c * np.eye(L, dtype=np.int64)) for l in m.layers]
        self.Wh = self._blocks(m.head)
        self.embed = {}             # embedding block k: (slice, first row); token t's at row + t
        for k in range(self.KH):
            mem = f"MEM_W{k % STRIPE}"
            a = st.alloc(mem, m.vocab)
            st.load(mem, a, m.embed[:, k * L:(k + 1) * L].astype(np.int64) & 0xFF)
            self.embed[k] = (mem, a)
        self.zero_row = st.alloc("MEM_W0", 1)
        st.load("MEM_W0", self.zero_row, np.zeros(L, np.uint8))
        self.start_row = st.alloc(START_MEM, 1)
        self.id_rows = [st.alloc(ID_MEM, 1) for _ in range(self.tokens)]
        for r in self.id_rows:
            st.load(ID_MEM, r, np.zeros(L, np.uint8))

    def _params(self):
        st = self.state
        st.set_table(RELU_TABLE, RELU)
        self.p1 = [st.new_param(m_a=l.rq1[0], s_a=l.rq1[1], table=RELU_TABLE) for l in self.model.layers]
        self.p2 = [st.new_param(m_a=l.rq2[0], s_a=l.rq2[1]) for l in self.model.layers]

    # ---- slots and accumulator rows ----------------------------------------------------------
    ZERO = 0

    def x_slot(self, l, k):
        """Block k of the x layer ``l`` reads (l = layers: the LM head's)."""
        return 1 + l * self.KH + k

    def h_slot(self, l, i):
        return 1 + (len(self.model.layers) + 1) * self.KH + l * self.KI + i

    def acc(self, what, i):
        """Accumulator rows: h's (``"h"``), the new x's (``"y"``), the logits' (``"v"``)."""
        return {"h": 0, "y": self.KI, "v": self.KI + self.KH}[what] + i

    # ---- placement ---------------------------------------------------------------------------
    def _start(self):
        """The zero slot, and the first SETB from the start row."""
        pl = self.pl
        pl.lx(SIDE, "MEM_W0", self.zero_row, self.ZERO, 0, "zeros -> MXM_W slot 0")
        return self._setb(START_MEM, self.start_row, 0, "the start token")

    def _setb(self, mem, row, t0, who):
        """READ ``row`` of ``mem`` west to ``SXM_W`` and ``SETB`` the token register from it:
        the first cycle a READ may use the register."""
        pl = self.pl
        lag = 1 + pl.pos(mem) - pl.pos("SXM_W")
        t = pl.place([Item(mem, 0, Instr.read(ID_STREAM, WEST, row), pl.pos("SXM_W")),
                      Item("SXM_W", lag, Instr.setb(ID_STREAM, WEST, TOKEN_REG))], t0, f"SETB for {who}")
        self.setb_cycles.append(t + lag)
        return t + lag + SETB_LATENCY

    def _token(self, n, t_reg):
        pl = self.pl
        for k in range(self.KH):            # the embedding through the token register
            mem, a = self.embed[k]
            lead = 1 + pl.pos(mem) - pl.pos(SIDE)
            t = pl.place([Item(mem, 0, Instr.read(LX_STREAM, WEST, a, TOKEN_REG), pl.pos(SIDE)),
                          Item("MXL_W", lead, Instr.lx(LX_STREAM, WEST, self.x_slot(0, k)))],
                         t_reg, f"token {n}: embedding block {k}")
            pl.slot_ready[SIDE][self.x_slot(0, k)] = t + lead + 1
        for l in range(len(self.model.layers)):
            self._layer(n, l)
        return self._head(n)

    def _mm_chain(self, n, blocks, pairs, acc, who):
        """Load each ``(block, slot)`` of ``pairs`` and MM it into row ``acc`` (the first without ACC)."""
        pl = self.pl
        for j, (key, slot) in enumerate(pairs):
            pl.load(SIDE, blocks[key] if key is not None else blocks, 0, f"token {n}: {who} block {key}")
            pl.mm(SIDE, slot, acc, MMFlag.ACC if j else 0, 0, f"token {n}: {who}")

    def _to_slot(self, n, acc, param, slot, flags, who):
        """Flush row ``acc`` to the VXM, ``VOP`` it with entry ``param`` and LX the int8 result
        into x slot ``slot`` as it passes ``MXM_W``."""
        pl, cfg = self.pl, self.cfg
        lag, px = pl.emit_lag(SIDE), pl.pos(SIDE)
        lx_off = lag + cfg.vxm_latency + cfg.vxm_position - px
        items = [pl.flush(SIDE, acc, self.ZERO),
                 Item("VXM", lag, Instr.vop(EMIT_STREAM, EAST, param, H_STREAM, flags | VopFlag.OUT_W), {WEST: px}),
                 Item("MXL_W", lx_off, Instr.lx(H_STREAM, WEST, slot))]
        t = pl.place(items, pl.acc_ready[(SIDE, acc)], f"token {n}: {who}")
        pl.slot_ready[SIDE][slot] = t + lx_off + 1

    def _layer(self, n, l):
        KH, KI = self.KH, self.KI
        for i in range(KI):
            self._mm_chain(n, self.W1[l], [((i, k), self.x_slot(l, k)) for k in range(KH)], self.acc("h", i),
                           f"layer {l} W1 row block {i}")
            self._to_slot(n, self.acc("h", i), self.p1[l], self.h_slot(l, i), VopFlag.TABLE, f"layer {l} h[{i}]")
        self.pl.load(SIDE, self.C[l], 0, f"token {n}: layer {l} residual block")
        for j in range(KH):
            self.pl.mm(SIDE, self.x_slot(l, j), self.acc("y", j), 0, 0, f"token {n}: layer {l} residual {j}")
        for j in range(KH):
            for i in range(KI):
                self.pl.load(SIDE, self.W2[l][j, i], 0, f"token {n}: layer {l} W2 block {j, i}")
                self.pl.mm(SIDE, self.h_slot(l, i), self.acc("y", j), MMFlag.ACC, 0, f"token {n}: layer {l} y[{j}]")
            self._to_slot(n, self.acc("y", j), self.p2[l], self.x_slot(l + 1, j), 0, f"layer {l} x[{j}]")

    def _head(self, n):
        """The LM head's blocks, their ARGMAX, the id written and read back for the next SETB."""
        pl, L, last = self.pl, self.cfg.lanes, len(self.model.layers)
        px, ps, pm = pl.pos(SIDE), pl.pos("SXM_W"), pl.pos(ID_MEM)
        at_sxm = MXM_LATENCY + ps - px
        t_arg = -1
        for v in range(self.KV):
            self._mm_chain(n, self.Wh, [((v, k), self.x_slot(last, k)) for k in range(self.KH)], self.acc("v", v),
                           f"LM head block {v}")
            flags = (ArgmaxFlag.FIRST if v == 0 else 0) | (ArgmaxFlag.OUT_E if v == self.KV - 1 else 0)
            flush = Item(SIDE, 0, Instr.mm(0, WEST, acc=self.acc("v", v), slot=self.ZERO, out=EMIT_STREAM,
                                           flags=MMFlag.XBUF | MMFlag.ACC | MMFlag.EMIT), {EAST: ps})
            arg = Item("SXM_W", at_sxm, Instr.argmax(EMIT_STREAM, EAST, index=v * L, out=INDEX_STREAM, flags=flags),
                       {EAST: pm} if flags & ArgmaxFlag.OUT_E else None)
            items = [flush, arg]
            w_off = at_sxm + SXM_LATENCY + pm - ps
            if v == self.KV - 1:
                items.append(Item(ID_MEM, w_off, Instr.write(INDEX_STREAM, EAST, self.id_rows[n])))
                if n == self.tokens - 1:   # the last id also into the start row: the next call continues from it
                    arg.to = {EAST: pl.pos(START_MEM)}
                    items.append(Item(START_MEM, w_off + pl.pos(START_MEM) - pm,
                                      Instr.write(INDEX_STREAM, EAST, self.start_row)))
            t0 = max(pl.acc_ready[(SIDE, self.acc("v", v))], t_arg + 1 - at_sxm)
            t = pl.place(items, t0, f"token {n}: logits block {v} -> ARGMAX")
            t_arg = t + at_sxm
        t_w = t_arg - at_sxm + w_off
        self.id_writes.append((t_w, ID_MEM, self.id_rows[n], n))
        if n == self.tokens - 1:           # (the start row's WRITE, one position on, is in the last group)
            self.id_writes.append((t_w + 1, START_MEM, self.start_row, n))
            return t_w + 2
        return self._setb(ID_MEM, self.id_rows[n], t_w + 1, f"token {n + 1}")

    # ---- the program -------------------------------------------------------------------------
    def _lower(self):
        need = max(len(lower(e)) + 1 for e in self.state.timed.values())
        if need > self.cfg.iq_depth:
            raise CompileError(f"{self.tokens} tokens unrolled need {need} instructions in one queue; the queues hold "
                               f"iq_depth = {self.cfg.iq_depth} (fewer tokens per call, or a deeper queue)")
        return {name: lower(entries) for name, entries in self.state.timed.items()}

    def iq_needed(self) -> int:
        """The deepest queue's instructions (HALT included)."""
        return max(len(q) + 1 for q in self.program_template.values())

    def program(self, start_token: int) -> Program:
        """The tile program with ``start_token`` in the start row (the only data the host writes)."""
        if not 0 <= int(start_token) < self.model.vocab:
            raise CompileError(f"token {start_token} is not in the vocabulary of {self.model.vocab}")
        mem = {n: m.copy() for n, m in self.state.memory.items()}
        mem[START_MEM][self.start_row] = index_vector(start_token, self.cfg.lanes)
        return Program(self.cfg, dict(self.program_template), mem, vxm_params=self.state.params,
                       table=self.state.tables, defined=self.state.loaded).validate()

    def manifest(self, ids=None):
        """Every id WRITE (cycle, ``ID_MEM``, row; with ``ids``, the ids expected) in cycle
        order, and the cycle count."""
        out = [PredictedWrite(c, mem, r, tuple(int(b) for b in index_vector(ids[n], self.cfg.lanes))
                              if ids is not None else (), 0) for c, mem, r, n in sorted(self.id_writes)]
        return out, self.cycles

    def token_cycles(self) -> list[int]:
        """Cycles from one token's id WRITE to the next's (the first: from cycle 0)."""
        c = [w for w, mem, r, n in self.id_writes if mem == ID_MEM]
        return [c[0]] + [b - a for a, b in zip(c, c[1:])]
