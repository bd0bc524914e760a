"""The golden model: integer numerics (FFN, MoE) and the architectural model that runs programs cycle by cycle."""
