"""Schedule generator (compiler), assembler and golden models for the LPU tile."""
