"""hdl/top/simtop.py (the testbenches' top: every input port registered) and the reference
checkout of sim/bench/speed.py, in Amaranth's simulator and without RTL builds."""

import pytest
from amaranth import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out
from amaranth.sim import Simulator

from hdl.top.simtop import INPUT_LATENCY, InputRegisters


class _Adder(wiring.Component):
    """A combinational design with a nested input port and an output inside it."""

    def __init__(self):
        super().__init__({"bus": In(wiring.Signature({"a": Out(8), "b": Out(8), "sum": In(9)})),
                          "flag": In(1), "seen": Out(1)})

    def elaborate(self, platform):
        m = Module()
        m.d.comb += [self.bus.sum.eq(self.bus.a + self.bus.b), self.seen.eq(self.flag)]
        return m


def test_inputs_arrive_input_latency_cycles_later_and_outputs_pass_through():
    top = InputRegisters(_Adder())
    assert top.signature.members == top._design.signature.members
    seen = []

    inputs = [(1, 2), (200, 100), (7, 0), (0, 0), (0, 0)]

    async def bench(ctx):
        for k, (a, b) in enumerate(inputs):
            ctx.set(top.bus.a, a)
            ctx.set(top.bus.b, b)
            ctx.set(top.flag, k == 1)
            seen.append((ctx.get(top.bus.sum), ctx.get(top.seen)))    # before this cycle's edge
            await ctx.tick()

    sim = Simulator(top)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    # in cycle k the design sees what the testbench set in cycle k - INPUT_LATENCY
    expected = [(0, 0)] * INPUT_LATENCY + [(a + b, int(k == 1)) for k, (a, b) in enumerate(inputs)]
    assert INPUT_LATENCY >= 1 and seen == expected[:len(inputs)]


def test_a_missing_reference_commit_is_named(monkeypatch, tmp_path):
    from sim.bench import speed as bench_speed
    monkeypatch.setattr(bench_speed, "BUILD", tmp_path)
    with pytest.raises(bench_speed.SpeedError, match="0000000 is not in this repository's history"):
        bench_speed.reference_tree("0000000")
