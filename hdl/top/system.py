"""Several tiles, each in its own clock domain, connected all-to-all by C2C links.

``docs/c2c.md`` describes the mechanism.  Tile ``i`` runs on clock domain ``t<i>`` (ports
``t<i>_clk`` and ``t<i>_rst``); its link ``k`` goes to tile ``j`` and arrives there as
link ``k'`` (``lpu_arch.topology.Topology.peer``).  Each direction of a link is a
*wire*: a delay line of ``latency`` registers in the sender's domain (a per-link
elaboration parameter within ``cfg.link_latency_min..max``, the same both ways), with an
XOR fault-injection input at its start.  Tile 0 is the HAC root; every other tile is its
child over its direct link.

Ports, in tile ``i``'s clock domain: the tile's own, prefixed ``t<i>_`` (``rx_level`` and
``elastic_level`` with the links' ``level_bits`` side by side, link 0 lowest), and per
link ``k``: ``t<i>_l<k>_inject`` (XORed into the flit entering the wire on every cycle it
is nonzero), ``t<i>_l<k>_tx_valid`` and ``t<i>_l<k>_tx_kind`` (that flit's valid bit and
kind, to time an injection or watch).
"""

from __future__ import annotations

from amaranth import Cat, ClockDomain, Module, Signal
from amaranth.hdl import DomainRenamer
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from lpu_arch.c2c import KIND_BITS, flit_bits
from lpu_arch.config import ConfigError
from lpu_arch.topology import Topology

from hdl.link.flit import flit_field
from hdl.units.layouts import host_bus_signature
from hdl.top.tile import Tile, load_port_signature


def link_latencies(cfg, tiles: int, latency) -> dict[tuple[int, int], int]:
    """``{(i, j): cycles}`` for every pair ``i < j`` from an int (every link) or a dict."""
    topo = Topology(tiles)
    if isinstance(latency, int):
        lat = {pair: latency for pair in topo.pairs}
    else:
        lat = {tuple(sorted(k)): int(v) for k, v in dict(latency).items()}
        missing = [p for p in topo.pairs if p not in lat]
        if missing:
            raise ConfigError(f"no link latency given for tile pair(s) {missing}")
    for pair, v in lat.items():
        if not cfg.link_latency_min <= v <= cfg.link_latency_max:
            raise ConfigError(f"link latency {v} between tiles {pair} is outside the declared range "
                              f"{cfg.link_latency_min}..{cfg.link_latency_max}")
    return lat


class System(wiring.Component):
    """``tiles`` tiles (2, 4 or 8), all-to-all.

    Parameters
    ----------
    cfg : TileConfig
        Every tile's configuration; ``cfg.links`` must be at least ``tiles - 1``.
    tiles : int
    latency : int or dict
        Wire latency in the sender's cycles: one value for every link, or
        ``{(i, j): cycles}`` per tile pair.
    """

    def __init__(self, cfg, tiles: int = 2, latency=None):
        self.topo = topo = Topology(tiles)
        if cfg.links < topo.links_per_tile:
            raise ConfigError(f"{tiles} tiles all-to-all need links >= {topo.links_per_tile}, "
                              f"the configuration has links={cfg.links}")
        self.cfg, self.tiles = cfg, tiles
        self.latency = link_latencies(cfg, tiles, cfg.link_latency_min if latency is None else latency)
        fb = flit_bits(cfg)
        members = {}
        for i in range(tiles):
            members.update({
                f"t{i}_clk": In(1), f"t{i}_rst": In(1),
                f"t{i}_host": In(host_bus_signature(cfg)), f"t{i}_load": In(load_port_signature(cfg)),
                f"t{i}_running": Out(1), f"t{i}_done": Out(1), f"t{i}_fault": Out(1),
                f"t{i}_hac": Out(cfg.HAC_BITS), f"t{i}_stall": Out(1), f"t{i}_sac": Out(cfg.HAC_BITS),
                f"t{i}_rx_level": Out(cfg.level_bits * cfg.links),
                f"t{i}_elastic_level": Out(cfg.level_bits * cfg.links),
            })
            for k in range(cfg.links):
                members[f"t{i}_l{k}_inject"] = In(fb)
                members[f"t{i}_l{k}_tx_valid"] = Out(1)
                members[f"t{i}_l{k}_tx_kind"] = Out(KIND_BITS)
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        cfg, topo = self.cfg, self.topo
        tiles = []
        for i in range(self.tiles):
            cd = ClockDomain(f"t{i}", local=True)
            m.domains += cd
            m.d.comb += [cd.clk.eq(getattr(self, f"t{i}_clk")), cd.rst.eq(getattr(self, f"t{i}_rst"))]
        for i in range(self.tiles):
            parent = topo.parent(i)
            children = [topo.link_to(0, j) for j in range(1, self.tiles)] if i == 0 else []
            rename = {"sync": f"t{i}"}
            for k in range(cfg.links):     # the peer's domain; an unconnected link: the tile's own (idle)
                rename[f"rx{k}"] = f"t{topo.peer(i, k)[0] if k < topo.links_per_tile else i}"
            tile = Tile(cfg, hac_parent=parent, hac_children=children)
            m.submodules[f"tile{i}"] = DomainRenamer(rename)(tile)
            tiles.append(tile)
            port = lambda name, i=i: getattr(self, f"t{i}_{name}")
            wiring.connect(m, wiring.flipped(port("host")), tile.host)
            wiring.connect(m, wiring.flipped(port("load")), tile.load)
            for name in ("running", "done", "fault", "hac", "stall", "sac"):
                m.d.comb += port(name).eq(getattr(tile, name))
            m.d.comb += [port("rx_level").eq(Cat(tile.rx_level[k] for k in range(cfg.links))),
                         port("elastic_level").eq(Cat(tile.elastic_level[k] for k in range(cfg.links)))]

        # Wires: tile i's link k -> tile j's link k', latency registers in tile i's domain.
        for i in range(self.tiles):
            for k in range(cfg.links):
                src = tiles[i].flit_out[k]
                inject = getattr(self, f"t{i}_l{k}_inject")
                m.d.comb += [getattr(self, f"t{i}_l{k}_tx_valid").eq(flit_field(src, cfg, "valid")),
                             getattr(self, f"t{i}_l{k}_tx_kind").eq(flit_field(src, cfg, "kind"))]
                if k >= topo.links_per_tile:
                    continue
                j, kk = topo.peer(i, k)
                lat = self.latency[tuple(sorted((i, j)))]
                stages = [Signal(len(src), name=f"wire_t{i}_l{k}_{s}") for s in range(lat)]
                m.d[f"t{i}"] += stages[0].eq(src ^ inject)
                for a, b in zip(stages, stages[1:]):
                    m.d[f"t{i}"] += b.eq(a)
                m.d.comb += tiles[j].flit_in[kk].eq(stages[-1])
        return m
