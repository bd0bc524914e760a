"""The tray's topology: which link of which tile goes where (design brief, section 1)."""

from __future__ import annotations

from lpu_arch.config import ConfigError

TILE_COUNTS = (2, 4, 8)      # a tray's sizes (all-to-all)
RUN_TILE_COUNTS = (1, *TILE_COUNTS)    # one tile or a tray: where an FFN or MoE layer can run


class Topology:
    """All-to-all: tile ``i``'s link ``k`` goes to tile ``k`` if ``k < i`` else ``k + 1``."""

    def __init__(self, tiles: int):
        if tiles not in TILE_COUNTS:
            raise ConfigError(f"a system of {tiles} tiles is not supported; the all-to-all topology "
                              f"takes {', '.join(map(str, TILE_COUNTS))} tiles")
        self.tiles = tiles

    @property
    def links_per_tile(self) -> int:
        return self.tiles - 1

    def link_to(self, i: int, j: int) -> int:
        if i == j or not (0 <= i < self.tiles and 0 <= j < self.tiles):
            raise ConfigError(f"no link from tile {i} to tile {j} in a system of {self.tiles} tiles")
        return j if j < i else j - 1

    def peer(self, i: int, link: int) -> tuple[int, int]:
        j = link if link < i else link + 1
        return j, self.link_to(j, i)

    def parent(self, i: int):
        """HAC tree: tile 0 is the root and every other tile its child (one hop)."""
        return None if i == 0 else self.link_to(i, 0)

    @property
    def pairs(self) -> list[tuple[int, int]]:
        return [(i, j) for i in range(self.tiles) for j in range(i + 1, self.tiles)]
