"""The top the testbenches simulate: a design with every input port registered once.

Verilator evaluates the logic that depends combinationally on a top-level input on every
clock edge the testbench drives, changed or not; behind the host bus and the load port
lies most of the tile, so that was about half the model's time.  With a flip-flop on
every input (clock and reset excepted) the default tile runs about three times as many
cycles per second.  Icarus, event-driven, gains nothing and would pay about a fifth of
its speed, so its builds have none (``sim/harness/runner.py``); neither has the
synthesised tile (``hdl/flows/synth.py``).

The design under the registers and every cycle count a program measures are unchanged;
the testbench sees a write take effect, and read data come, ``INPUT_LATENCY`` cycles
later (the driver waits for ``rvalid``, ``sim/tb/driver.py``).
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
