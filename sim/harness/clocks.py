"""The clocks of a multi-tile run on the RTL (tray, MoE layer, decode tray, C2C demo), all
drawn from one ``clock_seed``: wire latencies (a build parameter), every draw's ppm per
tile, and every run's phase seed (``runner.system_run`` draws the first edges from it)."""

from __future__ import annotations

import random

from lpu_arch import TileConfig
from lpu_arch.topology import Topology

RUNS_PER_SEED = 1000      # phase seeds: clock_seed * RUNS_PER_SEED + run


def wire_latencies(cfg: TileConfig, tiles: int, clock_seed: int) -> dict:
    """Wire latency per link pair, uniform in ``cfg``'s declared range."""
    rng = random.Random(clock_seed)
    return {p: rng.randint(cfg.link_latency_min, cfg.link_latency_max) for p in Topology(tiles).pairs}


def clock_draw(cfg: TileConfig, tiles: int, clock_seed: int, draw: int = 0) -> list:
    """Clock draw ``draw``: every tile's ppm, uniform within ``cfg.max_ppm``."""
    rng = random.Random(f"{clock_seed}/{draw}")
    return [rng.uniform(-cfg.max_ppm, cfg.max_ppm) for _ in range(tiles)]


def phase_seed(clock_seed: int, run: int = 0) -> int:
    """The seed of the clock phases of run ``run`` of a clock seed; the first
    ``RUNS_PER_SEED`` runs share no phase seed with another clock seed's."""
    return clock_seed * RUNS_PER_SEED + run


class TrayClocks:
    """Latencies and clock draws of a tray (``cfg``, ``tiles``) from its ``clock_seed``."""

    def latencies(self) -> dict:
        return wire_latencies(self.cfg, self.tiles, self.clock_seed)

    def clocks(self, draw: int = 0) -> list:
        return clock_draw(self.cfg, self.tiles, self.clock_seed, draw)

    def phase_seed(self, run: int = 0) -> int:
        return phase_seed(self.clock_seed, run)
