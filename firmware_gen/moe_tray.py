"""A mixture-of-experts layer on one tile or a tray: experts resident in SRAM, routing in
base registers, one schedule for every routing (``docs/moe.md``).

Mapping (expert parallelism):

* Tile ``t`` of ``N`` holds routed experts ``t*E/N .. (t+1)*E/N - 1`` (its *local*
  experts), loaded once: local expert ``e`` at rows ``W0 + e*stride`` of every weight
  slice, its VXM parameter entries at ``P0 + e*P`` and its activation table at
  ``1 + e`` (table 0 is the shared expert's).
* The shared expert (at most one; DeepSeek fuses its shared experts into one FFN) runs
  tensor-parallel over the tray exactly as a dense FFN does (``tray.py``: its h
  all-gathered over the links), or on the one tile.
* Each tile reserves ``capacity`` expert *slots* per token.  Slot ``j`` of token ``b`` is
  one SwiGLU FFN placed like any other (``compile_ffn.FfnPlan``), but its weight READs name
  base register ``w_reg(b, j)`` and its VOPs ``v_reg(b, j)``, and its addresses are those
  of local expert 0.  Before a run the host loads the registers from the routing: the
  offsets of the expert the slot runs, or *off* for an unused slot, whose READs and VOPs
  then skip (zero vectors, no SRAM read) in the same cycles.  The slot writes its y (zeros
  when unused) to rows the manifest names.

So the program, its cycle count and the cycle of every write are the same for every
routing within capacity; only the values differ, and :meth:`MoeTray.predict` gives them
from ``moe.moe_int``.  A token that sends more than ``capacity`` experts to one tile runs
in several *rounds* (:func:`rounds`): the same program again with the remaining experts'
registers, each round exactly the scheduled cycles.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from lpu_arch.config import TileConfig
from lpu_arch.hostmap import base_word
from lpu_arch.isa import BASE_OFFSET_BITS, Instr, READ_LATENCY
from lpu_arch.vxm import TABLE_SIZE, VXM_FIELDS

from .compile_ffn import SIDES, CompileError, FfnPlan, ffn_bounds, _read_probe
from .moe import MoeSpec, moe_int
from .numerics import NumericsError, ffn_int
from .program import Program
from .reserve import DESKEW_SLICE, last_work, strip_deskews, take_deskew
from .schedule import PredictedWrite


class ExpertSlot(FfnPlan):
    """One expert slot: a batch-1 SwiGLU FFN on the ``host`` plan's tile (its reservations,
    queues, memory and parameters), reading x from the host's x slots of ``token`` and its
    weights and parameters at template addresses relocated by base registers ``w_reg``
    (READ) and ``v_reg`` (VOP).

    With ``host=None`` the slot is a *layout*: placed on a tile of its own only to lay out
    one expert's weight rows (from row 0 of every weight slice) and parameter entries (from
    entry 0) in the order every slot reads them."""

    def __init__(self, cfg, spec, *, host=None, token=0, tokens=1, h0=0, wbase=None, pbase=0, w_reg=0, v_reg=0):
        super().__init__(cfg, spec, np.zeros(spec.H, np.int64))
        self.layout = host is None
        self.token, self.tokens, self.h0, self.w_reg, self.v_reg = token, tokens, h0, w_reg, v_reg
        if self.layout:
            self.params = Program(cfg).vxm_params.copy()
            for side in SIDES:
                for k in range(self.KH):
                    self.slot_ready[side][self.x_slot(k, 0)] = 0
        else:
            for name in ("res", "timed", "memory", "next_free", "slot_ready", "loader_free", "last_mm", "params"):
                setattr(self, name, getattr(host, name))
        self.w_next = dict(wbase or {m: 0 for m in cfg.mem_names})
        self.p_next = pbase

    def x_slot(self, k, b):
        return k * self.tokens + self.token

    def h_slot(self, i, b):
        return self.h0 + i

    def new_param(self, **fields):
        e = self.p_next
        self.p_next += 1
        if self.layout:
            for f, v in fields.items():
                self.params[e, :, VXM_FIELDS.index(f)] = v
        return e

    def _take_window(self, side, t_s, block, who):
        d = self.in_dir(side)
        for c, j, m, r in self._window(side, t_s):
            addr = self.w_next[m]
            self.w_next[m] += 1
            if self.layout:
                self.memory[m][addr] = np.asarray(block[c * self.n + j], np.int64) & 0xFF
            read = Instr.read(j, d, addr, base=self.w_reg)
            self.res.take_slot(m, r, who)
            self.res.take_drives(m, r, read, self.pos(side), who)
            self.emit(m, r, read)

    def place_vop(self, t_vop, dir_a, param, flags, who):
        self.res.take_slot("VXM", t_vop, who)
        self.emit("VXM", t_vop, Instr.vop(0, dir_a, param=param, out=self.lx_stream, flags=flags, base=self.v_reg))

    def compile(self):
        self.phase1()
        self.phase2(list(range(self.KI)))
        return self


@dataclass
class Layout:
    """Where one tile keeps its local experts: weight rows from ``wbase[m]`` in steps of
    ``stride``, parameter entries from ``pbase`` in steps of ``P``, tables from 1."""
    experts: list           # global indices of the local experts, in local order
    wbase: dict
    stride: int
    pbase: int
    P: int


@dataclass
class MoeManifest:
    """What the MoE compiler promises for every routing within capacity."""
    tiles: int
    capacity: int
    tokens: int
    H: int
    I: int
    layouts: list                  # Layout per tile
    slots: dict                    # (tile, token, j) -> {(0, block): (slice, addr, cycle)}
    registers: dict                # (token, j) -> (w_reg, v_reg), the same on every tile
    shared_outputs: list           # per tile: {(token, block): (slice, addr, cycle)} of the shared expert's y
    cycles: list                   # predicted cycle count per tile (SAC)
    busy_full: list                # per tile: predicted busy counts with every slot on
    slot_busy: dict                # per tile: {(token, j): {slice: issues}} of one slot (skipped when off)
    weight_vectors: dict           # "routed" (one expert), "shared" (whole shared expert): padded vectors
    needed_bound: int = 0          # SRAM-read bound per token of the weights it needs, spread evenly

    @property
    def cycles_max(self) -> int:
        return max(self.cycles)

    def summary(self) -> dict:
        return {"tiles": self.tiles, "capacity": self.capacity, "tokens": self.tokens, "H": self.H, "I": self.I,
                "cycles": self.cycles_max, "per_tile_cycles": self.cycles,
                "cycles_per_token": round(self.cycles_max / self.tokens, 2),
                "needed_bound_per_token": self.needed_bound,
                "ratio_to_needed_bound": round(self.cycles_max / self.tokens / max(self.needed_bound, 1), 4),
                "experts_per_tile": [len(l.experts) for l in self.layouts]}


class MoeError(CompileError):
    """The MoE layer does not fit, or a routing cannot run; the message names the limit."""


def home(spec_E: int, tiles: int, e: int) -> tuple[int, int]:
    """(tile, local index) of routed expert ``e``: tile t holds experts t*E/N .. (t+1)*E/N - 1."""
    per = spec_E // tiles
    return e // per, e % per


def rounds(indices, E: int, tiles: int, capacity: int) -> list[dict]:
    """Split a routing ``(T, top_k)`` into rounds of at most ``capacity`` experts per tile
    and token: each round is ``{(tile, token, j): expert}``; one round when the routing is
    within capacity.  Experts go to slots in selection order."""
    idx = np.asarray(indices)
    out = []
    for b, row in enumerate(idx):
        per_tile = {}
        for e in row:
            per_tile.setdefault(home(E, tiles, int(e))[0], []).append(int(e))
        for t, es in per_tile.items():
            for n, e in enumerate(es):
                r, j = divmod(n, capacity)
                while len(out) <= r:
                    out.append({})
                out[r][(t, b, j)] = e
    return out or [{}]


class MoeTray:
    """Compile an MoE layer (``moe.MoeSpec``) applied to int8 tokens ``x`` (T, H) for
    ``tiles`` tiles (1: a single tile) with ``capacity`` slots per tile and token."""

    def __init__(self, spec: MoeSpec, x, cfg: TileConfig | None = None, tiles: int = 8, capacity: int | None = None):
        from .tray import plan_tray, tray_config
        cfg = cfg or TileConfig.default()
        if not isinstance(spec, MoeSpec):
            raise MoeError(f"spec must be a moe.MoeSpec, got {type(spec).__name__}")
        x = np.atleast_2d(np.asarray(x, np.int64))
        if x.ndim != 2 or x.shape[1] != spec.H:
            raise MoeError(f"x has shape {np.shape(x)}; the layer has H = {spec.H}, so x must be (tokens, {spec.H})")
        if tiles not in (1, 2, 4, 8):
            raise MoeError(f"tiles must be 1, 2, 4 or 8, got {tiles}")
        if spec.E % tiles:
            raise MoeError(f"{spec.E} routed experts do not divide evenly over {tiles} tiles")
        if len(spec.shared) > 1:
            raise MoeError(f"{len(spec.shared)} shared experts: fuse them into one FFN of their summed "
                           "intermediate size (as DeepSeek does); the tray runs at most one")
        k = spec.top_k
        self.capacity = c = capacity if capacity is not None else -(-k // tiles) + (1 if tiles > 1 else 0)
        if not 1 <= c <= min(k, spec.E // tiles):
            raise MoeError(f"capacity must be in 1..{min(k, spec.E // tiles)} (top_k {k}, "
                           f"{spec.E // tiles} experts per tile), got {c}")
        self.spec, self.x, self.tiles = spec, x, tiles
        self.T = T = x.shape[0]
        self.cfg = cfg = tray_config(cfg, tiles) if tiles > 1 else cfg
        n_local = spec.E // tiles
        regs = 1 + 2 * c * T
        if regs > cfg.base_regs:
            raise MoeError(f"{T} token(s) x {c} slot(s) need {regs} base registers (two per slot and the "
                           f"constant); the tile has base_regs = {cfg.base_regs}")
        tables = n_local + 1
        if tables > cfg.vxm_tables:
            raise MoeError(f"{n_local} local experts and the shared expert need {tables} activation tables per "
                           f"tile; the VXM has vxm_tables = {cfg.vxm_tables}")
        try:
            self._plan(plan_tray)
        except NumericsError as e:
            raise MoeError(str(e)) from None

    # ---- placement -------------------------------------------------------------------------
    def _plan(self, plan_tray):
        spec, cfg, T, c, N = self.spec, self.cfg, self.T, self.capacity, self.tiles
        shared = spec.shared[0] if spec.shared else None
        self.tray = None
        if shared is not None and N > 1:
            # The slots go on every tile once the shared expert's h is all received, before
            # its W2 (which waits for the other tiles' h; the slots fill that wait).
            self.tray = plan_tray(cfg, shared, self.x, N, before_phase2=lambda tr: self._slots(tr.f))
            return
        if shared is not None:
            hosts = [FfnPlan(cfg, shared, self.x).compile()]
        else:
            hosts = []
            for t in range(N):
                f = FfnPlan(cfg, spec.experts[0], self.x, i_blocks=[], j_blocks=[])
                if N > 1:
                    from lpu_arch import c2c
                    for cyc in range(0, 1 << 16, c2c.deskew_interval(cfg)):
                        take_deskew(cfg, f.res, f.timed, cyc)
                f.place_x()
                hosts.append(f)
        self._slots(hosts)

    def _slots(self, hosts):
        """Lay out every tile's local experts and place its slots on ``hosts`` (a plan per tile)."""
        spec, cfg, T, c, N = self.spec, self.cfg, self.T, self.capacity, self.tiles
        shared = spec.shared[0] if spec.shared else None
        self.hosts = hosts
        # One expert's layout (the same for every routed expert: equal shapes).
        layouts = [ExpertSlot(cfg, spec.experts[e]).compile() for e in range(spec.E)]
        lay0 = layouts[0]
        stride = max(lay0.w_next.values())
        P = lay0.p_next
        KH, KI = lay0.KH, lay0.KI
        KI_s = self.hosts[0].KI if shared is not None else 0
        h0 = T * KH + T * KI_s
        need_x = h0 + c * T * KI
        if need_x > cfg.mxm_xbuf_depth:
            raise MoeError(f"x, the shared expert's h and {c * T} slot(s) of h need {need_x} x slots per MXM; "
                           f"an MXM has mxm_xbuf_depth = {cfg.mxm_xbuf_depth}")
        n_local = spec.E // N
        self.layouts, self.slot_plans = [], {}
        self.registers = {(b, j): (1 + 2 * (b * c + j), 2 + 2 * (b * c + j)) for b in range(T) for j in range(c)}
        for t, f in enumerate(self.hosts):
            wbase = dict(f.next_free)
            pbase = f.n_params
            rows = {m: wbase[m] + n_local * stride for m in cfg.mem_names}
            y_rows = c * T * KH
            worst = max(rows[m] for m in lay0.w_next)
            if worst + y_rows > cfg.mem_depth or (worst - 1) >> BASE_OFFSET_BITS:
                raise MoeError(f"tile {t}: {n_local} local experts of {stride} rows per weight slice from row "
                               f"{min(wbase[m] for m in lay0.w_next)}, and {y_rows} rows of slot outputs, need "
                               f"{worst + y_rows} rows; a MEM slice holds mem_depth = {cfg.mem_depth}")
            later = len(f.j_blocks) if shared is not None and N > 1 else 0   # the shared W2's, placed after
            if pbase + n_local * P + later > cfg.vxm_param_depth:
                raise MoeError(f"tile {t}: {n_local} local experts of {P} VXM parameter entries from entry {pbase} "
                               f"and {later} more of the shared expert need {pbase + n_local * P + later}; the VXM "
                               f"has vxm_param_depth = {cfg.vxm_param_depth}")
            f.n_params = pbase + n_local * P
            experts = list(range(t * n_local, (t + 1) * n_local))
            for le, e in enumerate(experts):
                lay = layouts[e]
                for m in lay0.w_next:
                    f.memory[m][wbase[m] + le * stride: wbase[m] + le * stride + lay.w_next[m]] = \
                        lay.memory[m][: lay.w_next[m]]
                block = lay.params[:P].copy()
                block[:, :, VXM_FIELDS.index("table")] = 1 + le
                f.params[pbase + le * P: pbase + (le + 1) * P] = block
            for m in cfg.mem_names:
                f.next_free[m] = rows[m] if m in lay0.w_next else f.next_free[m]
            self.layouts.append(Layout(experts, wbase, stride, pbase, P))
            for b in range(T):
                for j in range(c):
                    w_reg, v_reg = self.registers[(b, j)]
                    before = f.res.busy()
                    sp = ExpertSlot(cfg, spec.experts[experts[0]], host=f, token=b, tokens=T,
                                    h0=h0 + (b * c + j) * KI, wbase=wbase, pbase=pbase, w_reg=w_reg, v_reg=v_reg)
                    sp.compile()
                    after = f.res.busy()
                    self.slot_plans[(t, b, j)] = (sp, {n: after.get(n, 0) - before.get(n, 0) for n in after
                                                       if after.get(n, 0) != before.get(n, 0)})
        self.layout_specs = layouts

    # ---- lowering ----------------------------------------------------------------------------
    def programs(self) -> list[Program]:
        spec, cfg = self.spec, self.cfg
        tables = np.tile(np.arange(TABLE_SIZE).astype(np.uint8).astype(np.int8), (cfg.vxm_tables, 1))
        progs = []
        for t, f in enumerate(self.hosts):
            tab = tables.copy()
            if spec.shared:
                tab[0] = spec.shared[0].table
            for le, e in enumerate(self.layouts[t].experts):
                tab[1 + le] = spec.experts[e].table
            if self.tiles > 1:
                last = last_work(f.timed)
                f.timed = strip_deskews(f.timed, last)
                f.res.release_after(DESKEW_SLICE, last)
            progs.append(f.program(table=tab))
        self._progs = progs
        return progs

    def manifest(self) -> MoeManifest:
        spec, cfg, L = self.spec, self.cfg, self.cfg.lanes
        mats, lay0 = 3, self.layout_specs[0]
        n = lay0.n
        routed_v = mats * lay0.Hp * lay0.Ip // L
        shared_v = 0
        if spec.shared:
            sp = self.hosts[0].p
            shared_v = mats * sp.H * sp.I // L
        need = spec.top_k * routed_v + shared_v
        bound = -(-need // (2 * cfg.mem_slices * self.tiles))
        slots = {key: dict(sp.outputs) for key, (sp, _) in self.slot_plans.items()}
        shared_out = [dict(f.outputs) if spec.shared else {} for f in self.hosts]
        busy = [f.res.busy() for f in self.hosts]
        del n
        return MoeManifest(self.tiles, self.capacity, self.T, spec.H, spec.I, self.layouts, slots,
                           dict(self.registers), shared_out, [f.res.done_cycles() for f in self.hosts], busy,
                           {key: b for key, (_, b) in self.slot_plans.items()},
                           {"routed": routed_v, "shared": shared_v}, bound)

    def slot_span(self, t: int, b: int, j: int) -> tuple[int, int]:
        """(first, last) cycle of slot ``j`` of token ``b`` on tile ``t``: its first weight
        READ to its last y WRITE."""
        sp, _ = self.slot_plans[(t, b, j)]
        first = min(c for name in self.cfg.mem_names for c, ins in sp.timed[name]
                    if getattr(ins, "base", 0) == sp.w_reg)
        return first, max(c for _, _, c in sp.outputs.values())

    # ---- a routing's run -------------------------------------------------------------------------
    def bases(self, assignment: dict) -> list[list[int]]:
        """Per tile, the base register words of one round ``{(tile, token, j): expert}``
        (:func:`rounds`): the offsets of each slot's expert, off for an unused slot."""
        out = []
        for t, lay in enumerate(self.layouts):
            words = [0] * self.cfg.base_regs
            for (b, j), (w_reg, v_reg) in self.registers.items():
                e = assignment.get((t, b, j))
                if e is None:
                    words[w_reg] = words[v_reg] = base_word(0, on=False)
                    continue
                tt, le = home(self.spec.E, self.tiles, e)
                if tt != t:
                    raise MoeError(f"expert {e} lives on tile {tt}, not tile {t}")
                words[w_reg] = base_word(le * lay.stride)
                words[v_reg] = base_word(le * lay.P)
            out.append(words)
        return out

    def predict(self, assignment: dict) -> list[list[PredictedWrite]]:
        """Every MEM write of one round, per tile, with its cycle and value: each slot's y
        (``ffn_int`` of its expert, as ``moe.moe_int`` computes it; zeros when unused) and the
        shared expert's share of y."""
        cfg, L = self.cfg, self.cfg.lanes
        out = [[] for _ in range(self.tiles)]
        cache = {}

        def y_of(e, b):
            if (e, b) not in cache:
                lay = self.layout_specs[e]
                cache[(e, b)] = ffn_int(lay.p, _pad_row(self.x[b], lay.Hp))[0]
            return cache[(e, b)]

        for (t, b, j), (sp, _) in self.slot_plans.items():
            e = assignment.get((t, b, j))
            for (_, blk), (m, a, cyc) in sp.outputs.items():
                vec = (0,) * L if e is None else tuple(int(v) & 0xFF for v in y_of(e, b)[blk * L:(blk + 1) * L])
                out[t].append(PredictedWrite(cyc, m, a, vec, blk))
        if self.spec.shared:
            f0 = self.hosts[0]
            y = ffn_int(f0.p, f0.x)
            for t, f in enumerate(self.hosts):
                for (b, blk), (m, a, cyc) in f.outputs.items():
                    out[t].append(PredictedWrite(cyc, m, a, tuple(int(v) & 0xFF for v in y[b, blk * L:(blk + 1) * L]),
                                                 blk))
        for w in out:
            w.sort(key=lambda p: (p.cycle, cfg.position(p.slice)))
        return out

    def predicted_busy(self, assignment: dict) -> list[dict]:
        """Per tile, the busy counters one round reads: every slice's issues, minus those of
        the slots left off (a skipped READ or VOP is not counted)."""
        out = []
        for t, f in enumerate(self.hosts):
            b = dict(f.res.busy())
            for (tt, tok, j), (sp, _) in self.slot_plans.items():
                if tt == t and (t, tok, j) not in assignment:
                    for name in [*self.cfg.mem_names, "VXM"]:
                        if b.get(name):
                            b[name] -= _skippable(sp, name)
            out.append(b)
        return out

    def outputs(self, assignment: dict, memories: list) -> tuple[dict, np.ndarray]:
        """Read one round's results from the tiles' final MEM contents: ``{(token, expert):
        int8 (H,)}`` and the shared expert's int8 (T, H) (None without one)."""
        L, H = self.cfg.lanes, self.spec.H
        routed = {}
        for (t, b, j), e in assignment.items():
            sp, _ = self.slot_plans[(t, b, j)]
            y = np.zeros(sp.Hp, np.int64)
            for (_, blk), (m, a, _c) in sp.outputs.items():
                y[blk * L:(blk + 1) * L] = np.asarray(memories[t][m][a], np.uint8).astype(np.int8)
            routed[(b, e)] = y[:H].astype(np.int8)
        shared = None
        if self.spec.shared:
            out = np.zeros((self.T, self.hosts[0].Hp), np.int64)
            for t, f in enumerate(self.hosts):
                for (b, blk), (m, a) in ((k, v[:2]) for k, v in f.outputs.items()):
                    out[b, blk * L:(blk + 1) * L] = np.asarray(memories[t][m][a], np.uint8).astype(np.int8)
            shared = out[:, :H].astype(np.int8)
        return routed, shared


def _pad_row(x, n):
    out = np.zeros((1, n), np.int64)
    out[0, :len(x)] = x
    return out


def _skippable(sp: ExpertSlot, name: str) -> int:
    """Issues on ``name`` of slot plan ``sp`` that name its base registers (they skip when off)."""
    reg = sp.v_reg if name == "VXM" else sp.w_reg
    return sum(1 for _, ins in sp.timed[name] if getattr(ins, "base", 0) == reg)


def compile_moe(spec: MoeSpec, x, cfg: TileConfig | None = None, tiles: int = 8, capacity: int | None = None):
    """Compile an MoE layer for ``tiles`` tiles; returns the :class:`MoeTray` (its
    ``programs()``, ``manifest()``, ``bases(round)``, ``predict(round)``)."""
    mt = MoeTray(spec, x, cfg, tiles, capacity)
    mt.programs()
    return mt


ROUTINGS = ("spread", "packed", "random", "over")


def forced_routing(name: str, E: int, top_k: int, tokens: int, tiles: int, capacity: int, seed: int = 0):
    """A routing ``(tokens, top_k)`` of a named shape, for tests, benches and ``--routing``:

    * ``spread``: each token's experts on as many different tiles as possible (the
      first local expert of tiles ``b, b+1, ...``, then the second ones);
    * ``packed``: each tile it uses gets ``capacity`` of the token's experts (tiles
      ``b, b+1, ...`` filled in turn);
    * ``random``: ``top_k`` distinct experts drawn at random, retried until within capacity;
    * ``over``: every expert of the token on one tile, as many as the tile holds
      (beyond capacity when ``top_k > capacity``)."""
    per = E // tiles
    rng = np.random.default_rng(seed)
    rows = []
    for b in range(tokens):
        if name == "spread":
            row = [((b + n) % tiles) * per + (n // tiles) % per for n in range(top_k)]
        elif name == "packed":
            row = [((b + n // capacity) % tiles) * per + n % capacity for n in range(top_k)]
        elif name == "random":
            for _ in range(1000):
                row = list(rng.choice(E, top_k, replace=False))
                if max(np.bincount([e // per for e in row], minlength=tiles)) <= capacity:
                    break
        elif name == "over":
            t = b % tiles
            row = [t * per + n for n in range(min(top_k, per))]
            row += [e for e in range(E) if e not in row][: top_k - len(row)]
        else:
            raise MoeError(f"unknown routing {name!r}; choose one of {', '.join(ROUTINGS)} or give expert indices")
        if len(set(row)) != top_k:
            raise MoeError(f"routing {name!r} cannot place {top_k} distinct experts of {E} on {tiles} tiles")
        rows.append(row)
    return np.array(rows, np.int64)
