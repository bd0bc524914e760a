"""cocotb testbench of speculative decoding with the synthetic pair (``sim/flows/speculate.py``):
the draft's every FFN on the tile (the decode loop's resident tile, ``sim/tb/decode.py``),
the draft's attention and the float target on the host, here."""

from __future__ import annotations

import cocotb

from sim.flows.speculate import spec_gen, synthetic_setup
from sim.tb.decode import drive_tile
from sim.tb.driver import read_spec, write_results


@cocotb.test()
async def speculate(dut):
    a = read_spec()["speculate"]
    setup = synthetic_setup(a)
    run, runs, loaded = await drive_tile(dut, setup, spec_gen(setup, a))
    write_results([{**run, "runs": runs, "loaded": loaded}])
