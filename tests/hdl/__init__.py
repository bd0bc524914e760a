"""Tests of the hardware: units in Amaranth's simulator, formal proofs, the tile and its tops on the RTL simulators, the tool flows."""
