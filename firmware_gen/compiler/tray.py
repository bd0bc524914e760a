"""An FFN split across a tray of tiles (2, 4 or 8, all-to-all; ``docs/tray.md`` says how
and why).

Tensor-parallel over the intermediate dimension for ``W1``/``W3`` and over the output
dimension for ``W2``, with an all-gather of ``h``: each tile computes its h blocks, sends
each to every other tile (``SEND``; the receiver's ``RECV`` hands it to an SXM that drives
it into both MXMs' x slots), then its output blocks of ``y = W2 h`` over all h blocks, its
own first.  h is exchanged as int8 after its requantisation and each output block is
accumulated on one MXM over all of I, so the output is bit-identical to
``numerics.ffn_int``.  Everything is in SAC time; every tile's program starts with
``DESKEW`` and has a ``RUNTIME_DESKEW`` every ``c2c.deskew_interval`` cycles.
"""

from __future__ import annotations

import dataclasses
import itertools
from dataclasses import dataclass

import numpy as np

from lpu_arch import c2c
from lpu_arch.config import TileConfig
from lpu_arch.isa import C2C_LATENCY, EAST, SXM_LATENCY, WEST, Instr, Op, SxmFlag
from lpu_arch.topology import Topology

from firmware_gen.compiler import CompileError
from firmware_gen.compiler.blocks import with_x
from firmware_gen.compiler.ffn import FfnPlan, HRoute
from firmware_gen.compiler.ffn_manifest import output_matrix
from firmware_gen.golden.numerics import FfnSpec, NumericsError
from firmware_gen.program import Program
from firmware_gen.compiler.reserve import take_deskew
from firmware_gen.compiler.system import LinkBook
from firmware_gen.compiler.tile_plan import weight_streams
from firmware_gen.compiler.tile_state import SIDES, TOWARDS, TileState


@dataclass
class TrayManifest:
    tiles: int
    tile: list                 # Manifest per tile
    transfers: int             # vectors sent over links
    link_busy_cycles: int      # sum over links of cycles carrying flits
    min_distance: int
    link_bound: int = 0        # cycles the busiest link needs for its h vectors (flits_per_vector each)

    @property
    def bounds(self) -> dict:
        """Every tile's bounds at their most (ffn_manifest.BOUNDS) and the link bound."""
        out = {k: max(m.bounds[k] for m in self.tile) for k in self.tile[0].bounds}
        return {**out, "link": self.link_bound}

    @property
    def cycles(self) -> int:
        """SAC cycles until the last tile is done (deskew stalls not counted)."""
        return max(m.cycles for m in self.tile)

    @property
    def c2c_share(self) -> float:
        """Share of link capacity used: busy link-cycles / (links x cycles)."""
        links = self.tiles * (self.tiles - 1)
        return self.link_busy_cycles / (links * self.cycles)

    def summary(self) -> dict:
        return {"tiles": self.tiles, "cycles": self.cycles, "transfers": self.transfers,
                "c2c_share": round(self.c2c_share, 4), "min_distance": self.min_distance,
                "per_tile_cycles": [m.cycles for m in self.tile], "bounds": self.bounds,
                "tightest_bound": max(self.bounds, key=self.bounds.get)}


def tray_config(cfg: TileConfig, tiles: int) -> TileConfig:
    """``cfg`` with the links an all-to-all tray of ``tiles`` needs."""
    Topology(tiles)
    return cfg if cfg.links >= tiles - 1 else dataclasses.replace(cfg, links=tiles - 1)


def _split(n: int, parts: int) -> list[list[int]]:
    """0..n-1 in ``parts`` contiguous runs, the first ones one longer."""
    return [run.tolist() for run in np.array_split(np.arange(n), parts)]


def tray_parts(probe: FfnPlan, tiles: int, rotate: int = 0) -> tuple[list, list]:
    """Each tile's intermediate and output blocks of ``probe``'s FFN: contiguous runs,
    the output blocks' runs moved ``rotate`` tiles on (so that FFNs after one another
    give their W2 work to different tiles when there are fewer output blocks than tiles)."""
    part_j = _split(probe.KH, tiles)
    return _split(probe.KI, tiles), [part_j[(t - rotate) % tiles] for t in range(tiles)]


@dataclass
class TrayLinks:
    """The links of a tray, shared by every placement on its tiles (:func:`tray_links`)."""
    topo: Topology
    D: int                     # SEND-to-RECV distance (c2c.min_distance)
    book: LinkBook             # every link's sends and receives so far
    spare: list                # the streams for h traffic, in order of preference


def tray_links(cfg: TileConfig, states: list[TileState]) -> TrayLinks:
    """The links of a tray whose tile t places onto ``states[t]``: its topology, SEND-to-RECV
    distance, link bookings and the streams for h traffic (those the weights, 0..n-1, and
    x/h, n, do not use first).  Every tile's deskews are reserved here, before anything
    else; those past the tile's work go at the end (:meth:`FfnPlan.program`)."""
    n = weight_streams(cfg)
    for state in states:
        for c in range(0, 1 << 16, c2c.deskew_interval(cfg)):
            take_deskew(cfg, state.res, state.timed, c)
    return TrayLinks(Topology(len(states)), c2c.min_distance(cfg), LinkBook(cfg, len(states)),
                     list(range(n + 1, cfg.streams)) + [n] + list(range(n)))


class MulticastH(HRoute):
    """Tray routing of h (the all-gather): as the VXM drives h towards both MXMs it passes
    both C2C slices, and each multicasts it (``SENDM``) on its links to the other tiles,
    whose plans receive it into their MXMs' x slots."""

    def __init__(self, tray: "TrayPlan", tile: int):
        self.tray, self.tile = tray, tile

    def fits(self, plan, t_vop, i, b):
        return self.tray._multicast_h(self.tile, t_vop, i, b, dry=True)

    def take(self, plan, t_vop, i, b):
        self.tray._multicast_h(self.tile, t_vop, i, b, dry=False)


class _Overflow(Exception):
    """A deferred RECV would overflow its receive buffer: compile again, receiving at once."""


class TrayPlan:
    """The placement of one FFN on a tray: each tile's share of it (:func:`tray_parts`), an
    :class:`FfnPlan` whose h leaves through :class:`MulticastH`, and the links they share.

    ``defer``: receive the h vectors after every tile's phase 1 (:meth:`receive`), or each as
    soon as it is sent (when deferring would overflow a receive buffer, :func:`plan_tray`).
    ``owners_only``: send h only to the tiles with output blocks (default: to every tile).
    ``states``: per tile, the state its plan places onto (default: fresh tiles).  ``links``:
    those of another placement whose tiles this one continues (an MoE slot beside the shared
    expert); then ``make_plan(t, i_blocks, j_blocks, h_route)`` builds tile t's plan with the
    blocks ``parts`` give it.  Members: ``plans`` (each tile's :class:`FfnPlan`), ``links``
    and ``transfers`` (the h vectors sent over links so far).
    """

    def __init__(self, cfg: TileConfig, spec: FfnSpec, x, tiles: int, defer: bool = True,
                 states: list | None = None, links: TrayLinks | None = None, make_plan=None, parts=None,
                 owners_only: bool = False):
        self.defer, self.deferred, self.transfers = defer, [], 0
        self.owners_only = owners_only
        if links is not None:
            self.cfg, self.links = cfg, links
            self.part_i, self.part_j = parts
            self.plans = [make_plan(t, self.part_i[t], self.part_j[t], MulticastH(self, t)) for t in range(tiles)]
            return
        self.cfg = cfg = tray_config(cfg, tiles)
        L = cfg.lanes
        Hp, Ip = -(-spec.H // L) * L, -(-spec.I // L) * L
        mats = 3 if spec.kind == "swiglu" else 2
        need, have = mats * Hp * Ip, tiles * cfg.mem_bytes
        if need > have:
            raise CompileError(f"the FFN is too large for a tray of {tiles} tiles: its weights need {need} bytes "
                               f"({mats} matrices of {Hp}x{Ip} after padding); the tray's SRAM holds "
                               f"{have} bytes ({tiles} x {cfg.mem_bytes})")
        self.part_i, self.part_j = tray_parts(FfnPlan(cfg, spec, x, i_blocks=[], j_blocks=[]), tiles)
        self.plans = []
        for t in range(tiles):
            try:
                self.plans.append(FfnPlan(cfg, spec, x, self.part_i[t], self.part_j[t], h_route=MulticastH(self, t),
                                          state=None if states is None else states[t]))
            except CompileError as e:
                raise CompileError(f"tile {t} of {tiles}: {e}") from None
        self.links = tray_links(cfg, [f.state for f in self.plans])

    def compile(self, before_phase2=None, after_phase1=None):
        """Place the FFN; ``before_phase2(self)``, if given, places more work on the tiles once
        every h vector is received and before the W2 phase (the MoE slots, ``moe_tray.py``);
        ``after_phase1(self)`` the same before the h vectors are received."""
        self.phase1(place_x=True)
        if after_phase1 is not None:
            after_phase1(self)
        self.receive()
        if before_phase2 is not None:
            before_phase2(self)
        self.phase2()
        return self

    def phase1(self, place_x: bool = True):
        """x into every tile (``place_x``), then every tile's h blocks, multicast as they are made."""
        if place_x:
            for f in self.plans:
                f.place_x()
        for f in self.plans:
            f.phase1()              # h leaves every tile through its MulticastH route

    def receive(self):
        """The deferred RECVs, in send order (each tile whose only output block runs on both
        MXMs takes each h vector into one of them)."""
        # A tile whose only output block runs on both MXMs, each over half of h, takes each
        # received h vector into one MXM only: the one next to the C2C slice it arrives at,
        # the earliest arrivals moved to the other where the halves would be unequal.
        single = [len(f.j_blocks) == 1 and f.B == 1 for f in self.plans]
        deferred = sorted(self.deferred, key=lambda d: d[3])
        side_of = [{} for _ in self.plans]
        for t, u, link, s, i, slot, who in deferred:
            if single[u]:
                side_of[u][i] = "MXM_W" if self.cfg.link_slice(self.links.topo.peer(t, link)[1]) == "C2C_W" else "MXM_E"
        for u, f in enumerate(self.plans):
            if not single[u]:
                continue
            sides = side_of[u]
            own = [i for i in range(f.KI) if i not in sides]
            n = {side: list(sides.values()).count(side) for side in SIDES}
            for i in list(sides):                                 # in arrival order
                heavy, light = sorted(SIDES, key=n.get, reverse=True)
                if n[heavy] - n[light] - len(own) <= 1:
                    break
                if sides[i] == heavy:
                    sides[i] = light
                    n[heavy], n[light] = n[heavy] - 1, n[light] + 1
            for i in own:                                         # the own blocks (in both MXMs) even them out
                sides[i] = "MXM_E" if n["MXM_E"] < n["MXM_W"] else "MXM_W"
                n[sides[i]] += 1
        for t, u, link, s, i, slot, who in deferred:
            plan = self._recv_plan(t, u, link, s, (side_of[u][i],) if single[u] else SIDES)
            if plan is None:
                raise _Overflow
            self._receive(t, u, link, s, plan, slot, who)
        self.single, self.side_of = single, side_of

    def phase2(self):
        """Every tile's output blocks over all of h, in arrival order."""
        single, side_of = self.single, self.side_of
        for t, f in enumerate(self.plans):
            if not f.j_blocks:
                continue
            ready = {side: {i: max(f.state.slot_ready[side].get(f.h_slot(i, b), 1 << 62) for b in range(f.B))
                            for i in range(f.KI)} for side in SIDES}
            if not single[t]:
                f.phase2(sorted(range(f.KI), key=lambda i: (max(ready[s][i] for s in SIDES), i)))
                continue
            lists = [sorted((i for i in range(f.KI) if side_of[t][i] == side), key=lambda i: (ready[side][i], i))
                     for side in SIDES]
            assert 0 <= len(lists[0]) - len(lists[1]) <= 1, lists
            f.phase2([i for pair in itertools.zip_longest(*lists) for i in pair if i is not None])

    def _multicast_h(self, t, t_v, i, b, dry) -> bool:
        """SENDM of h (driven by the VXM on ``t_v``) from tile t's C2C slices to every other tile."""
        cfg, pos, links, ft = self.cfg, self.cfg.position, self.links, self.plans[t]
        v, state = cfg.vxm_position, ft.state
        by_slice = {}
        for u in range(links.topo.tiles):
            if u != t and (self.part_j[u] or not self.owners_only):
                link = links.topo.link_to(t, u)
                by_slice.setdefault(cfg.link_slice(link), []).append((u, link))
        sends = {}
        for cs, peers in by_slice.items():
            s = t_v + cfg.vxm_latency + abs(v - pos(cs))
            if not (state.res.slot_free(cs, s) and all(links.book.send_free(t, link, s) for _, link in peers)):
                return False
            recvs = [None if self.defer else self._recv_plan(t, u, link, s) for u, link in peers]
            if not self.defer and None in recvs:       # a receive buffer would overflow: the producer waits
                return False
            sends[cs] = (s, peers, recvs)
        if dry:
            return True
        for cs, (s, peers, recvs) in sends.items():
            d = WEST if pos(cs) < v else EAST
            state.res.take_slot(cs, s, f"h block {i} col {b} SENDM")
            state.emit(cs, s, Instr.compute(Op.SENDM, ft.lx_stream, d, links=sum(1 << link for _, link in peers)))
            for (u, link), plan in zip(peers, recvs):
                args = (self.plans[u].h_slot(i, b), f"h block {i} col {b} tile {t} -> {u}")
                if self.defer:
                    links.book.take_send(t, link, s)
                    self.deferred.append((t, u, link, s, i) + args)
                else:
                    self._receive(t, u, link, s, plan, *args)
        return True

    def _recv_plan(self, t, u, link, s, sides=SIDES):
        """Where tile u receives the vector tile t sends on ``link`` on ``s``: the first cycle
        its C2C slice, SXM, streams and both MXMs are free; None when the vector would wait
        there while the receive buffer already holds ``rx_depth`` others (the buffer's
        capacity is a constraint on the send, never a reason to reject an FFN)."""
        links = self.links
        _, rlink = links.topo.peer(t, link)
        cr = self.cfg.link_slice(rlink)
        v = links.book.first_recv(u, rlink, s, links.D)
        while (got := self._recv_path(self.plans[u], cr, v, sides)) is None:
            v += 1
        return (rlink, cr, v) + got if links.book.depth_ok(u, rlink, s, v) else None

    def _receive(self, t, u, link, s, plan, slot, who):
        """RECV on tile u (on ``plan`` from :meth:`_recv_plan`) of the vector tile t sent on
        ``link`` on ``s``, into the x ``slot`` of the MXMs the plan names."""
        pos, fu = self.cfg.position, self.plans[u]
        state = fu.state
        rlink, cr, v, sx, d_rx, st_rx, st_out, arrive = plan
        recv = Instr.compute(Op.RECV, st_rx, d_rx, link=rlink)
        state.res.take_slot(cr, v, who)
        state.emit(cr, v, recv)
        if sx is None:                     # straight from the C2C slice to the one MXM
            (side,) = arrive
            state.res.take_drives(cr, v, recv, pos(side), who)
            ways = {side: d_rx}
            st_out = st_rx
        else:                              # through the SXM, which drives it both ways (to both MXMs)
            t_sx = v + C2C_LATENCY + 1
            ways = TOWARDS
            shift = Instr.compute(Op.SHIFT, st_rx, d_rx, k=0, out=st_out, flags=SxmFlag.OUT_W | SxmFlag.OUT_E)
            state.res.take_drives(cr, v, recv, pos(sx), who)
            state.res.take_slot(sx, t_sx, who)
            state.res.take_drives(sx, t_sx, shift, {d: pos(side) for side, d in ways.items()}, who)
            state.emit(sx, t_sx, shift)
        for side, d in ways.items():
            state.res.take_slot(fu.ldr(side), arrive[side], who + f" LX {side}")
            state.emit(fu.ldr(side), arrive[side], Instr.lx(st_out, d, slot))
            state.slot_ready[side][slot] = arrive[side] + 1
        if not self.defer:
            self.links.book.take_send(t, link, s)
        self.links.book.take_recv(u, rlink, s, v)
        self.transfers += 1

    def _recv_path(self, fu, cr, v, sides=SIDES):
        """``(sx, d_rx, st_rx, st_out, arrive)`` for a RECV on ``v`` into the MXMs ``sides``,
        or None when no stream or slot is free.  One MXM: the C2C slice drives the vector
        straight to it (``sx`` None, ``st_out`` None).  Both: it goes to the SXM next to the
        C2C slice (``sx``), whose ``SHIFT k=0`` drives it both ways on ``st_out``."""
        pos, res, spare = self.cfg.position, fu.state.res, self.links.spare
        t_drive = v + C2C_LATENCY
        if len(sides) == 1:
            (side,) = sides
            d = WEST if pos(side) < pos(cr) else EAST
            arrive = {side: t_drive + abs(pos(cr) - pos(side))}
            slots = [(cr, v), (fu.ldr(side), arrive[side])]         # the RECV's and the LX's
            st = res.free_stream(d, pos(cr), pos(side), t_drive, spare, slots)
            return None if st is None else (None, d, st, None, arrive)
        sx = "SXM_W" if cr == "C2C_W" else "SXM_E"
        d_rx = WEST if sx == "SXM_W" else EAST
        t_sx = t_drive + 1
        st_rx = res.free_stream(d_rx, pos(cr), pos(sx), t_drive, spare, [(cr, v), (sx, t_sx)])
        if st_rx is None:
            return None
        arrive = {side: t_sx + SXM_LATENCY + abs(pos(sx) - pos(side)) for side in sides}
        if not all(res.slot_free(fu.ldr(side), arrive[side]) for side in sides):
            return None
        for st in spare:
            if all(res.stream_free(d, st, pos(sx), pos(side), t_sx + SXM_LATENCY)
                   for side, d in TOWARDS.items()):
                return sx, d_rx, st_rx, st, arrive
        return None

    def programs(self) -> list[Program]:
        return [f.program() for f in self.plans]


def plan_tray(cfg: TileConfig, spec: FfnSpec, x, tiles: int, before_phase2=None, states=None,
              prepare=None, after_phase1=None) -> TrayPlan:
    """The tray's placed plans: receives deferred past every tile's phase 1, or, when a
    receive buffer would overflow that way, each vector received as soon as it can be.
    ``before_phase2(tray)``, ``after_phase1(tray)``: see :meth:`TrayPlan.compile`; ``states()``: each attempt's tile
    states (e.g. continuing where earlier layers end, :func:`compile_resident_tray`);
    ``prepare(tray)``: called on each attempt before anything is placed (e.g. to check that
    each tile's plan fits there)."""
    def attempt(defer):
        tr = TrayPlan(cfg, spec, x, tiles, defer=defer, states=None if states is None else states())
        if prepare is not None:
            prepare(tr)
        return tr.compile(before_phase2, after_phase1)
    try:
        return attempt(True)
    except _Overflow:
        return attempt(False)


def compile_ffn_tray(spec: FfnSpec, x, cfg: TileConfig | None = None, tiles: int = 8):
    """Compile an FFN for ``tiles`` tiles; returns (programs, TrayManifest), each tile's
    :class:`Manifest` predicting its share of y's writes and its cycles, in SAC time."""
    ly = _compile_tray(spec, x, cfg, tiles)[0]
    return ly.programs, ly.manifest


def _compile_tray(spec: FfnSpec, x, cfg: TileConfig | None, tiles: int, states=None, prepare=None):
    """The :class:`TrayLayer` of ``x`` and the placed :class:`TrayPlan` (``states``,
    ``prepare``: :func:`plan_tray`)."""
    cfg = cfg or TileConfig.default()
    try:
        tr = plan_tray(cfg, spec, x, tiles, states=states, prepare=prepare)
    except NumericsError as e:
        raise CompileError(str(e)) from None
    progs = tr.programs()
    mans = [f.manifest(p, tiles) for f, p in zip(tr.plans, progs)]
    busy = sum(len(b) for per_tile in tr.links.book.busy for b in per_tile)
    per_link = max(len(p.i_blocks) for p in tr.plans) * tr.plans[0].B  # each tile's h, to each other tile on its link
    man = TrayManifest(tiles, mans, tr.transfers, busy, tr.links.D, per_link * tr.cfg.flits_per_vector)
    return TrayLayer(spec, progs, man, [list(f.x_rows) for f in tr.plans]), tr


@dataclass
class TrayLayer:
    """A dense FFN compiled once for a tray and run on any input (the decode loop,
    ``sim.flows.decode.run_dense_tray``): the schedule does not depend on x's values, so a run
    writes x's rows on every tile (``x_rows[t]``) into the compiled programs' memories."""
    spec: FfnSpec
    programs: list                 # Program per tile, compiled for x = 0
    manifest: TrayManifest         # cycles and output locations (writes predicted for x = 0)
    x_rows: list                   # per tile: (slice, addr, block, column) of every copy of x

    def programs_for(self, x_int8, memories=None) -> list[Program]:
        """Every tile's program with ``x`` ((H,) or (B, H) int8) in its x rows, over
        ``memories`` (per tile; default: the compiled images)."""
        out = []
        for t, (p, rows) in enumerate(zip(self.programs, self.x_rows)):
            mem = p.memory if memories is None else memories[t]
            mem = with_x(mem, rows, x_int8, p.config.lanes, self.spec.H)
            out.append(Program(p.config, p.queues, mem, p.vxm_params, p.table, p.defined))
        return out

    def x_bytes(self) -> int:
        """Bytes the host writes per run: x's rows on every tile."""
        return sum(len(rows) for rows in self.x_rows) * self.programs[0].config.lanes


def compile_tray_layer(spec: FfnSpec, cfg: TileConfig | None = None, tiles: int = 8, batch: int = 1) -> TrayLayer:
    """Compile a dense FFN for ``tiles`` tiles once, for inputs of ``batch`` columns."""
    return _compile_tray(spec, np.zeros((batch, spec.H), np.int64), cfg, tiles)[0]


def tray_output(manifest: TrayManifest, memories: list, lanes: int, H: int) -> np.ndarray:
    """Gather y from every tile's final MEM contents (int8, or E4M3 codes on FP8 tiles): each
    tile's output blocks (``output_matrix``, 0 elsewhere), or-ed together."""
    return np.bitwise_or.reduce([output_matrix(m, mem, lanes, H) for m, mem in zip(manifest.tile, memories)])
