"""The top the testbenches simulate: a design with every input port registered once.

Verilator evaluates the logic that depends combinationally on a top-level input on every
call of its model, that is on every clock edge the testbench drives, whether or not the
input changed.  Behind the tile's host bus and vector load port lies most of the tile
(address decoders, memory write ports, and what Verilator's scheduler puts in the same
region), so that evaluation was about half the model's time.  With a flip-flop on every
input port (the clock and reset excepted) nothing but those flip-flops reads an input:
the default tile runs about three times as many cycles per second on Verilator, with the
same Verilog below the registers.  Icarus, event-driven, gains nothing and pays for
clocking the registers every cycle (about a fifth of its speed, mostly the load port's
2,560 bits), so its builds have none (``sim/harness/runner.py``); the driver's wait after a CTRL
write is harmless there.

The design under the registers is unchanged, and so is every cycle count a program
measures (the tile's own cycle counter).  What changes is the testbench's view of the
bus: a write takes effect ``INPUT_LATENCY`` cycles later, and read data come
``INPUT_LATENCY`` cycles later than ``hostmap.HOST_READ_LATENCY`` (the driver waits for
``rvalid``, ``sim/tb/driver.py``).  The synthesised tile (``hdl/flows/synth.py``) has no such
registers: on the board the UART bridge drives the host bus.
"""

from amaranth import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In

INPUT_LATENCY = 1      # cycles between the testbench setting an input and the design seeing it


class InputRegisters(wiring.Component):
    """``design`` (a ``wiring.Component``) with the same ports, each input registered in
    the ``sync`` domain and each output passed through."""

    def __init__(self, design: wiring.Component):
        self._design = design
        super().__init__(dict(design.signature.members))

    def elaborate(self, platform):
        m = Module()
        m.submodules.core = core = self._design          # (instance name: sim/harness/waves.py CORE)
        for path, member, port in self.signature.flatten(self):
            inner = core
            for step in path:
                inner = inner[step] if isinstance(step, int) else getattr(inner, step)
            if member.flow == In:
                m.d.sync += inner.eq(port)
            else:
                m.d.comb += port.eq(inner)
        return m
