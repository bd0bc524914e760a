"""Schedule generator (compiler), assembler, ISA and golden models for the LPU tile."""

from .config import ConfigError, TileConfig

__all__ = ["TileConfig", "ConfigError"]
