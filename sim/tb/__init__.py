"""Code that runs inside cocotb: the testbenches, the host driver and the UART line model."""
