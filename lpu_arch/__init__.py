"""The architecture of the LPU tile, stated once: configuration, ISA (with each opcode's
effects and the timing rules), host map, chip-to-chip flit format and tray topology.

``hdl/``, ``firmware_gen/`` and ``sim/`` all import it; it imports none of them.
"""

from lpu_arch.config import ConfigError, TileConfig

__all__ = ["TileConfig", "ConfigError"]
