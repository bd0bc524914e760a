"""A mixture-of-experts layer on one tile or a tray: experts resident in SRAM, routing in
base registers, one schedule for every routing (``docs/moe.md``, *On the tray*).

Tile ``t`` of ``N`` holds routed experts ``t*E/N .. (t+1)*E/N - 1``, loaded once; the
shared expert (at most one) runs tensor-parallel over the tray as a dense FFN does
(``tray.py``).  Each tile reserves ``capacity`` expert *slots* per token
(``moe_slots.ExpertSlot``) whose weight READs and VOPs name base registers; before a run
the host loads them from the routing (the offsets of the slot's expert, or *off*: READs and
VOPs skip in the same cycles).  So the program, its cycle count and the cycle of every
write are the same for every routing within capacity; only the values differ, and
:meth:`MoeTray.predict` gives them from ``moe.moe_int``.  A token that sends more than
``capacity`` experts to one tile runs in several *rounds* (:func:`rounds`), each exactly
the scheduled cycles.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from lpu_arch.config import TileConfig
from lpu_arch.hostmap import base_word
from lpu_arch.timing import token_floor
from lpu_arch.topology import RUN_TILE_COUNTS

from firmware_gen.compiler import CompileError
from firmware_gen.compiler.blocks import gather_blocks, pad, padded_spec
from firmware_gen.compiler.ffn import FfnPlan
from firmware_gen.compiler.moe_layout import MoeError, lay_out_experts, load_expert_weights
from firmware_gen.compiler.moe_slots import ExpertSlot
from firmware_gen.golden.moe import MoeSpec
from firmware_gen.golden.numerics import NumericsError, ffn_int
from firmware_gen.program import Program
from firmware_gen.scoreboard import Problem, Reference, compare, golden_observed, promise
from firmware_gen.compiler.schedule import PredictedWrite
from firmware_gen.compiler.tile_state import TileState
from firmware_gen.compiler.tray import TrayPlan, plan_tray, tray_config, tray_links, tray_parts


MAPPINGS = ("ep", "tp", "tps")
TP = ("tp", "tps")          # the mappings that split every expert over the tray


@dataclass
class MoeManifest:
    """What the MoE compiler promises for every routing within capacity."""
    mapping: str
    tiles: int
    capacity: int
    tokens: int
    H: int
    I: int
    layouts: list                  # Layout per tile
    slots: dict                    # (tile, token, j) -> {(0, block): (slice, addr, cycle)}
    registers: dict                # (token, j) -> (w_reg, v_reg), the same on every tile
    cycles: list                   # predicted cycle count per tile (SAC)
    weight_vectors: dict           # "routed" (one expert), "shared" (the shared expert): padded vectors
    needed_bound: int = 0          # SRAM-read cycles per token of the weights it needs (its top_k experts and
                                   # the shared one), every MEM slice of the tray busy
    batch_bound: int = 0           # the same for the batch's weights (each token's experts, the shared expert
                                   # once), per token
    floor: int = 0                 # the batch's least latency on the tray, whatever the mapping
                                   # (timing.token_floor of its gate/up weights: each token's experts, the shared one once)

    @property
    def limit(self) -> float:
        """Cycles per token no mapping can beat: the larger of the batch bound and the floor
        (per token)."""
        return max(self.batch_bound, self.floor / self.tokens)

    @property
    def cycles_max(self) -> int:
        return max(self.cycles)

    def summary(self) -> dict:
        return {"mapping": self.mapping, "tiles": self.tiles, "capacity": self.capacity, "tokens": self.tokens,
                "H": self.H, "I": self.I, "cycles": self.cycles_max, "per_tile_cycles": self.cycles,
                "cycles_per_token": round(self.cycles_max / self.tokens, 2),
                "needed_bound_per_token": self.needed_bound, "batch_bound_per_token": self.batch_bound,
                "ratio_to_needed_bound": round(self.cycles_max / self.tokens / max(self.needed_bound, 1), 4),
                "floor": self.floor, "limit_per_token": round(self.limit, 2),
                "ratio_to_limit": round(self.cycles_max / self.tokens / max(self.limit, 1), 4),
                "experts_per_tile": [len(l.experts) for l in self.layouts]}


def check_routing(indices, E: int, top_k: int, tokens: int | None = None) -> np.ndarray:
    """``indices`` as a ``(tokens, top_k)`` routing of experts ``0..E-1`` (``tokens``: as
    many rows as given), each token's experts distinct; a :class:`MoeError` otherwise."""
    idx = np.asarray(indices, np.int64)
    tokens = len(np.atleast_2d(idx)) if tokens is None else tokens
    if idx.size != tokens * top_k:
        raise MoeError(f"a routing names top-{top_k} experts for each of {tokens} token(s), {tokens * top_k} "
                       f"indices; got {idx.size}")
    idx = idx.reshape(tokens, top_k)
    bad = idx[(idx < 0) | (idx >= E)]
    if bad.size:
        raise MoeError(f"expert {int(bad[0])} does not exist: the layer has experts 0..{E - 1}")
    for b, row in enumerate(idx.tolist()):
        if len(set(row)) < top_k:
            raise MoeError(f"token {b}'s experts {','.join(map(str, row))} repeat one: a token's top-{top_k} "
                           "experts are distinct")
    return idx


def rounds(indices, E: int, tiles: int, capacity: int, mapping: str = "ep") -> list[dict]:
    """Split a routing ``(T, top_k)`` into rounds: each round is ``{(tile, token, j):
    expert}``.  ``ep``: at most ``capacity`` of a token's experts per tile, to slots in
    selection order (one round when the routing is within capacity).  ``tp``: every tile
    runs its share of each of the token's experts in slot j = its selection position (one
    round always)."""
    idx = np.asarray(indices)
    if mapping in TP:
        return [{(t, b, j): int(e) for b, row in enumerate(idx) for j, e in enumerate(row)
                 for t in range(tiles)}]
    out = []
    for b, row in enumerate(idx):
        per_tile = {}
        for e in row:
            per_tile.setdefault(int(e) // (E // tiles), []).append(int(e))     # tile t holds experts t*E/N ..
        for t, es in per_tile.items():
            for n, e in enumerate(es):
                r, j = divmod(n, capacity)
                while len(out) <= r:
                    out.append({})
                out[r][(t, b, j)] = e
    return out or [{}]


class MoeTray:
    """Compile an MoE layer (``moe.MoeSpec``) applied to int8 tokens ``x`` (T, H) for
    ``tiles`` tiles (1: a single tile).  ``mapping="ep"``: tile t holds experts t*E/N ..,
    ``capacity`` slots per tile and token; ``"tp"``: every tile holds 1/N of every expert, a
    token's experts each run over the whole tray like a dense tray FFN (capacity ``top_k``);
    ``"tps"``: tp placed for a token's latency (:meth:`_phase1_order`, h sent only to the
    tiles that need it).
    ``hosts[t]`` owns tile t's state (the shared expert's share, or x alone); the tile's
    experts (``layouts[t]``, ``templates[t]``) and slots (``slot_plans[(t, token, j)]``)
    place onto it."""

    def __init__(self, spec: MoeSpec, x, cfg: TileConfig | None = None, tiles: int = 8, capacity: int | None = None,
                 mapping: str = "ep", states=None):
        cfg = cfg or TileConfig.default()
        self.states = states      # () -> a TileState per tile to place onto (None: fresh tiles)
        if not isinstance(spec, MoeSpec):
            raise MoeError(f"spec must be a moe.MoeSpec, got {type(spec).__name__}")
        x = np.atleast_2d(np.asarray(x, np.int64))
        if x.ndim != 2 or x.shape[1] != spec.H:
            raise MoeError(f"x has shape {np.shape(x)}; the layer has H = {spec.H}, so x must be (tokens, {spec.H})")
        if tiles not in RUN_TILE_COUNTS:
            raise MoeError(f"tiles must be {', '.join(map(str, RUN_TILE_COUNTS[:-1]))} or {RUN_TILE_COUNTS[-1]}, got {tiles}")
        if mapping not in MAPPINGS:
            raise MoeError(f"unknown mapping {mapping!r}; choose ep (experts per tile), tp (every expert over the tray), "
                           "tps (tp, each tile's last h block one it needs) or auto")
        if mapping in TP and tiles == 1:
            raise MoeError("the tp mapping splits every expert over a tray's links: it needs 2, 4 or 8 tiles "
                           "(one tile holds whole experts: ep)")
        if mapping == "ep" and spec.E % tiles:
            raise MoeError(f"{spec.E} routed experts do not divide evenly over {tiles} tiles")
        if len(spec.shared) > 1:
            raise MoeError(f"{len(spec.shared)} shared experts: fuse them into one FFN of their summed "
                           "intermediate size (as DeepSeek does); the tray runs at most one")
        k = spec.top_k
        if mapping in TP:
            if capacity not in (None, k):
                raise MoeError(f"the tp mapping runs every selected expert on every tile: its capacity is top_k = {k}, "
                               f"got {capacity}")
            c = k
        else:
            c = capacity if capacity is not None else -(-k // tiles) + (1 if tiles > 1 else 0)
            if not 1 <= c <= min(k, spec.E // tiles):
                raise MoeError(f"capacity must be in 1..{min(k, spec.E // tiles)} (top_k {k}, "
                               f"{spec.E // tiles} experts per tile), got {c}")
        self.mapping, self.capacity = mapping, c
        # tps for a batch on an int8 tile: x copied as the first weight blocks need it and every
        # sum that would make an MXM wait (the shared expert's h on the links) or a MEM slice
        # lose a read (y) leaves the accumulators later, by an MM of zeros (_prepare_hosts)
        self.flushed = mapping == "tps" and x.shape[0] > 1 and cfg.mxm_dtype == "int8"
        self.spec, self.x, self.tiles = spec, x, tiles
        self.T = T = x.shape[0]
        self.cfg = cfg = tray_config(cfg, tiles) if tiles > 1 else cfg
        self.n_local = n_local = spec.E if mapping in TP else spec.E // tiles
        regs = 1 + 2 * c * T
        if regs > cfg.base_regs:
            raise MoeError(f"{T} token(s) x {c} slot(s) need {regs} base registers (two per slot and the "
                           f"constant); the tile has base_regs = {cfg.base_regs}")
        if n_local + 1 > cfg.vxm_tables:
            raise MoeError(f"{n_local} experts per tile and the shared expert need {n_local + 1} activation tables "
                           f"per tile; the VXM has vxm_tables = {cfg.vxm_tables}")
        self.registers = {(b, j): (1 + 2 * (b * c + j), 2 + 2 * (b * c + j)) for b in range(T) for j in range(c)}
        try:
            self._plan()
        except NumericsError as e:
            raise MoeError(str(e)) from None

    # ---- placement -------------------------------------------------------------------------
    def _plan(self):
        spec, cfg, N = self.spec, self.cfg, self.tiles
        shared = spec.shared[0] if spec.shared else None
        self.probe = probe = FfnPlan(cfg, spec.experts[0], self.x[:1], i_blocks=[], j_blocks=[])
        self.KH, self.KI = probe.KH, probe.KI
        if shared is not None and N > 1:
            # The slots go on every tile once the shared expert's h is all received, before
            # its W2 (which waits for the other tiles' h; the slots fill that wait).
            self.KI_s = FfnPlan(cfg, shared, self.x[:1], i_blocks=[], j_blocks=[]).KI
            if self.mapping == "tps":     # the slots' h blocks before the shared expert's h is received
                plan_tray(cfg, shared, self.x, N, after_phase1=lambda tr: self._slots_on(tr.plans, tr.links, tr.defer,
                                                                                         receive=False),
                          before_phase2=lambda tr: [st.receive() for st in self.slot_trays], states=self.states,
                          prepare=self._prepare_hosts if self.flushed else None)
            else:
                plan_tray(cfg, shared, self.x, N, before_phase2=lambda tr: self._slots_on(tr.plans, tr.links, tr.defer),
                          states=self.states)
            self._finish()
            return
        self.KI_s, links = 0, None
        states = self.states() if self.states is not None else [None] * N
        if shared is not None:
            hosts = [FfnPlan(cfg, shared, self.x, state=states[0]).compile()]
            self.KI_s = hosts[0].KI
        else:                   # hosts of x alone (table 0 stays the identity: no shared expert)
            hosts = [FfnPlan(cfg, spec.experts[0], self.x, i_blocks=[], j_blocks=[], state=st or TileState(cfg))
                     for st in states]
            if N > 1:
                links = tray_links(cfg, [f.state for f in hosts])
            for f in hosts:
                f.place_x()
                if self.flushed:
                    f.place_zero_slot(self._zero_slot())
        self._slots_on(hosts, links)
        self._finish()

    def _zero_slot(self) -> int:
        """The x slot after x, the shared expert's h and every slot's h: zeros (:attr:`flushed`)."""
        return self.T * self.KH + self.T * self.KI_s + self.capacity * self.T * self.KI

    def _prepare_hosts(self, tray):
        """:attr:`flushed`: each tile's share of the shared expert copies x block by block as
        its first weight blocks need it (those load from every weight slice but the one x is
        read from), sends its h and writes its y through flushes (``TilePlan.place_flush``)
        of the zeros it copies first."""
        tray.owners_only = True       # (its h only to the tiles with its output blocks, as the slots')
        for f in tray.plans:
            f.x_late = f.defer_h = f.defer_y = True
            f.narrow = self.KH - 1
            f.place_zero_slot(self._zero_slot())

    def _slots_on(self, hosts, links=None, defer=False, receive=True):
        """Lay out every tile's experts and place the slots on the tiles of ``hosts`` (their
        states), sharing the tray's ``links`` (None: one tile).  ``tp``: each slot is a tray
        of its own continuing those tiles and links (receiving at once unless ``defer``);
        their phase 1 and receives go here, their phase 2 in :meth:`_finish`."""
        cfg, T, c = self.cfg, self.T, self.capacity
        self.hosts, self.slot_plans, self.layouts, self.templates, self.var_off = hosts, {}, [], [], []
        h0 = T * self.KH + T * self.KI_s
        need_x = h0 + c * T * self.KI + (1 if self.flushed else 0)
        if need_x > cfg.mxm_xbuf_depth:
            raise MoeError(f"x, the shared expert's h and {c * T} slot(s) of h need {need_x} x slots per MXM; "
                           f"an MXM has mxm_xbuf_depth = {cfg.mxm_xbuf_depth}")
        self.slot_parts = self._slot_parts()
        if self.flushed:        # after the shared expert's rows, one for every slot's h, then each slot's y rows
            self.acc0 = max(f.capacity_needs()["mxm_acc_depth"] for f in hosts)
            jb = max(len(parts[1][t]) for parts in self.slot_parts.values() for t in range(self.tiles))
            self.acc_span = jb // 2 + jb % 2
            need = self.acc0 + 1 + c * T * self.acc_span
            if need > cfg.mxm_acc_depth:
                raise MoeError(f"the shared expert and {c * T} slot(s) each keeping y in accumulators of their own "
                               f"need {need} rows per MXM; an MXM has mxm_acc_depth = {cfg.mxm_acc_depth}")
        for t, f in enumerate(hosts):
            self._lay_out(t, f)
        self._place_slots(links, defer, receive)

    def _slot_parts(self) -> dict:
        """Each slot's blocks per tile, ``{(token, j): (i_blocks per tile, j_blocks per tile)}``:
        ep, the whole expert; tp, a share, the output blocks rotated from slot to slot (and
        away from the shared expert's) so that every tile gets W2 work when an expert has
        fewer output blocks than the tray has tiles."""
        slots = [(b, j) for b in range(self.T) for j in range(self.capacity)]
        if self.mapping in TP:
            first = 1 if self.spec.shared else 0
            return {bj: tray_parts(self.probe, self.tiles, ((s + first) * self.KH) % self.tiles)
                    for s, bj in enumerate(slots)}
        full = (list(range(self.KI)), list(range(self.KH)))
        return {bj: ([full[0]] * self.tiles, [full[1]] * self.tiles) for bj in slots}

    def _phase1_order(self, t: int) -> list[int]:
        """``tps``: the order tile ``t`` makes its h blocks of the slots in (indices into
        :attr:`slot_trays`): slot order, but the last slot whose output blocks the tile
        holds some of moves to the end.  A tile's last h block, which reaches the other
        tiles a link crossing after everything else, is then one it needs itself without
        a link; and where successive slots' output blocks are on different tiles (the
        rotation, :meth:`_slot_parts`), the last h blocks of the tray go to the holders of
        two experts instead of one, so each MXM takes fewer of them after they arrive."""
        order = list(range(len(self.slot_trays)))
        owned = [n for n in order if self.slot_trays[n].part_j[t]]
        return [n for n in order if n != owned[-1]] + owned[-1:] if owned else order

    def _lay_out(self, t: int, host: FfnPlan) -> None:
        """Tile t's experts after what its host holds (``moe_layout.lay_out_experts``)."""
        spec, T, N, n_local = self.spec, self.T, self.tiles, self.n_local
        slots = list(self.slot_parts)
        ib = self.slot_parts[slots[0]][0][t]
        variants = list(dict.fromkeys(tuple(self.slot_parts[bj][1][t]) for bj in slots))
        experts = list(range(spec.E)) if self.mapping in TP else list(range(t * n_local, (t + 1) * n_local))
        y_rows = T * sum(len(self.slot_parts[bj][1][t]) for bj in slots[:self.capacity])
        later = len(host.j_blocks) if spec.shared and N > 1 else 0   # the shared W2's, placed after
        layout, tpl, offs = lay_out_experts(self.cfg, spec, host.state, f"tile {t}", experts, self.x[:1], ib, variants,
                                            y_rows, later)
        self.layouts.append(layout)
        self.templates.append(tpl)
        self.var_off.append(offs)

    def _slot(self, t, b, j, i_blocks=None, j_blocks=None, h_route=None) -> ExpertSlot:
        """Slot ``j`` of token ``b`` on tile ``t`` (a tp slot: its share ``i_blocks``,
        ``j_blocks`` and the slot tray's route for h)."""
        w_reg, v_reg = self.registers[(b, j)]
        jb = tuple(self.slot_parts[(b, j)][1][t])
        h0 = self.T * self.KH + self.T * self.KI_s + (b * self.capacity + j) * self.KI
        sp = ExpertSlot(self.cfg, self.spec.experts[0], self.hosts[t].state, token=b, tokens=self.T, h0=h0,
                        template=self.templates[t], pbase=self.layouts[t].pbase + self.var_off[t][jb],
                        w_reg=w_reg, v_reg=v_reg, i_blocks=i_blocks, j_blocks=j_blocks, h_route=h_route)
        if self.flushed:
            sp.acc_base, sp.acc_y = self.acc0, self.acc0 + 1 + (b * self.capacity + j) * self.acc_span
            sp.defer_y, sp.zero_slot = True, self._zero_slot()
        return sp

    def _place_slots(self, links, defer: bool, receive: bool = True) -> None:
        """Every slot on every tile: ep, each tile's alone; tp, a tray of the tiles' shares
        (its phase 1 and receives)."""
        self.slot_trays = []
        for b in range(self.T):
            for j in range(self.capacity):
                if self.mapping in TP:
                    st = TrayPlan(self.cfg, self.spec.experts[0], self.x[:1], self.tiles, defer=defer, links=links,
                                  parts=self.slot_parts[(b, j)], owners_only=self.mapping == "tps",
                                  make_plan=lambda t, ib, jb, route, b=b, j=j: self._slot(t, b, j, ib, jb, route))
                    if self.mapping == "tp":
                        st.phase1(place_x=False)
                    self.slot_trays.append(st)
                    for t, sp in enumerate(st.plans):
                        self.slot_plans[(t, b, j)] = sp
                else:
                    for t in range(self.tiles):
                        self.slot_plans[(t, b, j)] = self._slot(t, b, j).compile(place_x=False)
        if self.mapping == "tps":
            for t in range(self.tiles):
                for n in self._phase1_order(t):
                    self.slot_trays[n].plans[t].phase1()
        for (t, b, j), sp in self.slot_plans.items():      # the tray split as this layout assumed
            assert (sp.i_blocks, sp.j_blocks) == (self.slot_parts[(b, j)][0][t], self.slot_parts[(b, j)][1][t])
        for st in self.slot_trays if receive else ():
            st.receive()

    def _finish(self):
        """The tp slots' W2 phase; then every expert's weights at its template rows."""
        for st in self.slot_trays:
            st.phase2()
        if self.flushed:        # every y, each on the first cycle a MEM slice is free for it
            for t, f in enumerate(self.hosts):
                plans = [f] + [sp for (u, _, _), sp in self.slot_plans.items() if u == t]
                flushes = [(p, args) for p in plans for args in p.pending]
                for p, args in sorted(flushes, key=lambda pa: pa[1][4]):     # by the cycle after their MM
                    p.place_flush(*args, in_place=True)
                for p in plans:
                    p.pending = []
        for f, lay, tpl in zip(self.hosts, self.layouts, self.templates):
            load_expert_weights(f.state, self.spec, lay, tpl, self.cfg.lanes)

    @property
    def copy_reads(self) -> int:
        """READs per tile that copy x into both MXMs' x slots (and, :attr:`flushed`, the zeros):
        the tile's MEM reads besides the weights."""
        return 2 * self.KH * self.T + (2 if self.flushed else 0)

    # ---- lowering ----------------------------------------------------------------------------
    def programs(self) -> list[Program]:
        """Every tile's program (the host plan's: every plan on the tile placed onto its state)."""
        return [f.program() for f in self.hosts]

    def manifest(self) -> MoeManifest:
        spec, cfg, L = self.spec, self.cfg, self.cfg.lanes
        routed_v = 3 * self.KH * self.KI * L
        shared_v = 3 * self.KH * self.KI_s * L if spec.shared else 0
        slices = 2 * cfg.mem_slices * self.tiles
        bound = -(-(spec.top_k * routed_v + shared_v) // slices)
        batch = -(-(self.T * spec.top_k * routed_v + shared_v) // (slices * self.T))
        gate_up = 2 * self.KH * L * (self.T * spec.top_k * self.KI + self.KI_s)     # W1 and W3 vectors
        floor = token_floor(cfg, self.tiles, gate_up)["floor"]
        slots = {key: dict(sp.outputs) for key, sp in self.slot_plans.items()}
        return MoeManifest(self.mapping, self.tiles, self.capacity, self.T, spec.H, spec.I, self.layouts, slots,
                           dict(self.registers), [f.state.res.done_cycles() for f in self.hosts],
                           {"routed": routed_v, "shared": shared_v}, bound, batch, floor)

    def rounds(self, indices) -> list[dict]:
        """:func:`rounds` of ``indices`` under this layer's mapping and capacity."""
        return rounds(check_routing(indices, self.spec.E, self.spec.top_k), self.spec.E, self.tiles, self.capacity,
                      self.mapping)

    def slot_span(self, t: int, b: int, j: int) -> tuple[int, int] | None:
        """(first, last) cycle of slot ``j`` of token ``b`` on tile ``t``: its first weight
        READ to its last y WRITE (or its last VOP, for a tp share without output blocks);
        None when the slot has no work on that tile (a tp share of no blocks)."""
        sp = self.slot_plans[(t, b, j)]
        mine = [c for name in [*self.cfg.mem_names, "VXM"] for c, ins in sp.state.timed[name]
                if getattr(ins, "base", 0) in (sp.w_reg, sp.v_reg)]
        return (min(mine), max(mine + [c for _, _, c in sp.outputs.values()])) if mine else None

    # ---- a routing's run -------------------------------------------------------------------------
    def bases(self, assignment: dict) -> list[list[int]]:
        """Per tile, the base register words of one round ``{(tile, token, j): expert}``
        (:meth:`rounds`): the offsets of each slot's expert, off for an unused slot."""
        out = []
        for t, lay in enumerate(self.layouts):
            words = [0] * self.cfg.base_regs
            for (b, j), (w_reg, v_reg) in self.registers.items():
                e = assignment.get((t, b, j))
                if e is None:
                    words[w_reg] = words[v_reg] = base_word(0, on=False)
                    continue
                if e not in lay.experts:
                    raise MoeError(f"expert {e} does not live on tile {t} (it holds {lay.experts[0]}.."
                                   f"{lay.experts[-1]})")
                le = lay.experts.index(e)
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

        @functools.cache
        def y_of(e, b):
            p = padded_spec(self.spec.experts[e], L)
            return ffn_int(p, pad(self.x[b:b + 1], (1, p.H)))[0]

        for (t, b, j), sp in self.slot_plans.items():
            e = assignment.get((t, b, j))
            out[t] += sp.y_writes([np.zeros(sp.Hp, np.int64) if e is None else y_of(e, b)])
        if self.spec.shared:
            y = ffn_int(self.hosts[0].p, self.hosts[0].x)
            for t, f in enumerate(self.hosts):
                out[t] += f.y_writes(y)
        for w in out:
            w.sort(key=lambda p: (p.cycle, cfg.position(p.slice)))
        return out

    def promised(self, assignment: dict) -> list[Reference]:
        """Per tile, what the compiler promises of one round: every MEM write (:meth:`predict`),
        the cycle count and the busy counters (:meth:`predicted_busy`)."""
        return [promise(w, c, b) for w, c, b in
                zip(self.predict(assignment), self.manifest().cycles, self.predicted_busy(assignment))]

    def round_problems(self, assignment: dict, results: list) -> list[Problem]:
        """What one round's golden-model results (``archmodel.RunResult`` per tile) do not keep
        of :meth:`promised`, each located at its tile (``scoreboard.compare``).  Empty: all kept."""
        return [p.at(f"tile {t}") for t, (r, ref) in enumerate(zip(results, self.promised(assignment)))
                for p in compare(golden_observed(r), ref)]

    def predicted_busy(self, assignment: dict) -> list[dict]:
        """Per tile, the busy counters one round reads: every slice's issues, minus those of
        the slots left off (a skipped READ or VOP is not counted)."""
        out = [dict(f.state.res.busy()) for f in self.hosts]
        for (t, tok, j), sp in self.slot_plans.items():
            if (t, tok, j) not in assignment:
                for name in [*self.cfg.mem_names, "VXM"]:
                    if out[t].get(name):      # the slot's issues that name its base registers skip
                        reg = sp.v_reg if name == "VXM" else sp.w_reg
                        out[t][name] -= sum(1 for _, ins in sp.state.timed[name] if getattr(ins, "base", 0) == reg)
        return out

    def outputs(self, assignment: dict, memories: list) -> tuple[dict, np.ndarray]:
        """Read one round's results from the tiles' final MEM contents: ``{(token, expert):
        int8 (H,)}`` and the shared expert's int8 (T, H) (None without one); E4M3 codes
        (uint8) for an FP8 layer."""
        L, H = self.cfg.lanes, self.spec.H
        byte = np.uint8 if self.spec.dtype == "fp8" else np.int8
        routed = {}
        for (t, b, j), e in assignment.items():
            sp = self.slot_plans[(t, b, j)]          # (its blocks in row 0, its only token)
            gather_blocks(routed.setdefault((b, e), np.zeros((1, sp.Hp), np.uint8)), sp.outputs, memories[t], L)
        routed = {key: y[0, :H].astype(byte) for key, y in routed.items()}
        shared = None
        if self.spec.shared:
            out = np.zeros((self.T, self.hosts[0].Hp), np.uint8)
            for t, f in enumerate(self.hosts):
                gather_blocks(out, f.outputs, memories[t], L)
            shared = out[:, :H].astype(byte)
        return routed, shared


def compile_moe(spec: MoeSpec, x, cfg: TileConfig | None = None, tiles: int = 8, capacity: int | None = None,
                mapping: str = "auto"):
    """Compile an MoE layer for ``tiles`` tiles; returns the :class:`MoeTray` (its
    ``programs()``, ``manifest()``, ``rounds(routing)``, ``bases(round)``, ``predict(round)``).
    ``mapping="auto"``: :func:`choose_mapping`."""
    mt = choose_mapping(spec, x, cfg, tiles, capacity) if mapping == "auto" else \
        MoeTray(spec, x, cfg, tiles, capacity, mapping)
    mt.programs()
    return mt


def choose_mapping(spec: MoeSpec, x, cfg: TileConfig | None, tiles: int, capacity: int | None) -> MoeTray:
    """The mapping the compiler chooses (``docs/moe.md``, *Mappings*): ``tps`` on a tray when
    its tiles hold a share of every expert (activation tables, parameter entries, base
    registers, rows, x slots: it compiles) and no ``capacity`` is asked for; else ``ep``.
    A token's experts then run over the whole tray: no routing needs a second round, and
    a token's latency is nearest the floor."""
    if tiles > 1 and capacity is None:
        try:
            mt = MoeTray(spec, x, cfg, tiles, None, "tps")
            mt.programs()                 # (its queues fit the tile too)
            return mt
        except CompileError:
            pass
    return MoeTray(spec, x, cfg, tiles, capacity, "ep")


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
        if name in ("spread", "packed") and per == 0:     # fewer experts than tiles (tp): every tile holds each
            row = [(b + n) % E for n in range(top_k)]
        elif name == "spread":
            row = [((b + n) % tiles) * per + (n // tiles) % per for n in range(top_k)]
        elif name == "packed":
            row = [((b + n // capacity) % tiles) * per + n % capacity for n in range(top_k)]
        elif name == "random":
            for _ in range(1000):
                row = list(rng.choice(E, top_k, replace=False))
                # fewer experts than tiles (tp): every tile holds a share of each, no capacity
                if per == 0 or max(np.bincount([e // per for e in row], minlength=tiles)) <= capacity:
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
