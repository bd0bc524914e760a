"""cocotb testbenches, drivers and the runner wrapper for the LPU tile."""
