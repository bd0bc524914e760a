"""The clocks of a multi-tile run on the RTL, every one drawn from one ``clock_seed``.

A tray, an MoE layer, the decode loop's tray and the C2C demo all run several tiles,
each on its own oscillator (design brief, section 1: plesiochronous links).  What the
seed decides, and how, is stated here once:

- :func:`wire_latencies`: each link pair's wire latency, uniform in the configuration's
  declared range (a build parameter: one per simulator build);
- :func:`clock_draw`: draw ``k``'s clock offset of every tile, uniform within
  ``cfg.max_ppm``;
- :func:`phase_seed`: the seed of run ``k``'s clock phases (``runner.system_run`` draws
  each tile's first rising edge from it).
"""

from __future__ import annotations

import random

from lpu_arch import TileConfig
from lpu_arch.topology import Topology

RUNS_PER_SEED = 1000      # phase seeds: clock_seed * RUNS_PER_SEED + run


def wire_latencies(cfg: TileConfig, tiles: int, clock_seed: int) -> dict:
    """Wire latency per link pair of a tray of ``tiles``, random in ``cfg``'s declared range
    from ``clock_seed`` (a build parameter: one per simulator build)."""
    rng = random.Random(clock_seed)
    return {p: rng.randint(cfg.link_latency_min, cfg.link_latency_max) for p in Topology(tiles).pairs}


def clock_draw(cfg: TileConfig, tiles: int, clock_seed: int, draw: int = 0) -> list:
    """Clock draw ``draw``: every tile's ppm, random within ``cfg``'s specification, from
    ``clock_seed``."""
    rng = random.Random(f"{clock_seed}/{draw}")
    return [rng.uniform(-cfg.max_ppm, cfg.max_ppm) for _ in range(tiles)]


def phase_seed(clock_seed: int, run: int = 0) -> int:
    """The seed of the clock phases of run ``run`` (0, 1, ... in one simulator invocation)
    of a multi-tile run from ``clock_seed``.  Any number of runs may draw from one seed; the
    first ``RUNS_PER_SEED`` of a seed share no phase seed with another clock seed's."""
    return clock_seed * RUNS_PER_SEED + run


class TrayClocks:
    """The wire latencies and clock draws of a run on the RTL, all from ``clock_seed`` (of
    a tray compiled for ``tiles`` tiles of ``cfg``)."""

    def latencies(self) -> dict:
        return wire_latencies(self.cfg, self.tiles, self.clock_seed)

    def clocks(self, draw: int = 0) -> list:
        return clock_draw(self.cfg, self.tiles, self.clock_seed, draw)

    def phase_seed(self, run: int = 0) -> int:
        return phase_seed(self.clock_seed, run)
