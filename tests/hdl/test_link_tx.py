"""The link's transmitter and receiver on their own, in Amaranth's simulator.  Transmitter: a vector leaves as
``flits_per_vector`` DATA flits, low bits first, each with its SECDED check; a control
flit waits for the data; a SEND while a vector is still leaving sets the sticky TX
overrun flag (a scheduled program never does it: ``firmware_gen/compiler/system.py`` keeps SENDs
on a link ``flits_per_vector`` cycles apart), which only the tile's start clears.
Receiver: flits faster than its clock overflow the elastic buffer, flagged sticky."""

import dataclasses
import random

from amaranth.sim import Simulator

from lpu_arch import TileConfig
from lpu_arch.c2c import KIND_BITS, Kind, ecc_encode, flit_data_bits
from hdl.link.tx import LinkTx
from lpu_arch.c2c import flit_fields

CFG = dataclasses.replace(TileConfig.tiny(), links=1, link_width=8)   # 4 flits per vector


def fields(flit: int) -> dict:
    return {name: (flit >> lo) & ((1 << n) - 1) for name, (lo, n) in flit_fields(CFG).items()}


def test_vector_flits_control_and_overrun():
    F, W = CFG.flits_per_vector, CFG.link_width
    assert F == 4
    tx = LinkTx(CFG)
    rng = random.Random(3)
    vectors = [rng.getrandbits(CFG.vector_bits) for _ in range(2)]
    seen = []

    async def bench(ctx):
        def flit():
            return fields(ctx.get(tx.flit))

        # One vector, and a control flit requested at the same time: the data goes first.
        ctx.set(tx.send_data, vectors[0])
        ctx.set(tx.send, 1)
        ctx.set(tx.ctrl_req, 1)
        ctx.set(tx.ctrl_kind, Kind.ECHO)
        ctx.set(tx.ctrl_payload, 0x5A)
        await ctx.tick()
        ctx.set(tx.send, 0)
        for _ in range(F + 1):
            seen.append(flit())
            acked = ctx.get(tx.ctrl_ack)
            await ctx.tick()
            if acked:
                ctx.set(tx.ctrl_req, 0)
        seen.append(flit())
        assert not ctx.get(tx.overrun)
        # A second SEND two cycles after the first: the first is still leaving.
        ctx.set(tx.send_data, vectors[1])
        ctx.set(tx.send, 1)
        await ctx.tick()
        ctx.set(tx.send, 0)
        await ctx.tick()
        ctx.set(tx.send_data, vectors[0])
        ctx.set(tx.send, 1)
        await ctx.tick()
        ctx.set(tx.send, 0)
        for _ in range(2 * F):
            await ctx.tick()
        assert ctx.get(tx.overrun), "a SEND during a vector must set the sticky overrun flag"
        ctx.set(tx.clear, 1)
        await ctx.tick()
        ctx.set(tx.clear, 0)
        await ctx.tick()
        assert not ctx.get(tx.overrun)

    sim = Simulator(tx)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()

    data = [f for f in seen if f["valid"] and f["kind"] == Kind.DATA]
    assert [f["payload"] for f in data] == [(vectors[0] >> (W * i)) & ((1 << W) - 1) for i in range(F)]
    ctrl = [i for i, f in enumerate(seen) if f["valid"] and f["kind"] == Kind.ECHO]
    assert len(ctrl) == 1 and ctrl[0] > max(i for i, f in enumerate(seen) if f in data)
    assert seen[ctrl[0]]["payload"] == 0x5A
    k = flit_data_bits(CFG)
    for f in data + [seen[ctrl[0]]]:
        assert f["check"] == ecc_encode(f["kind"] | f["payload"] << KIND_BITS, k)


def _flit(kind: int, payload: int) -> int:
    f = flit_fields(CFG)
    data = kind | payload << KIND_BITS
    return (1 | kind << f["kind"][0] | payload << f["payload"][0]
            | ecc_encode(data, flit_data_bits(CFG)) << f["check"][0])


def _elastic_run(tx_period: float, flits: int) -> dict:
    """A receiver whose sender's clock has ``tx_period`` (the receiver's is 10 ns) and
    sends a SYNC flit on each of its first ``flits`` cycles; the receiver's view after."""
    from amaranth import ClockDomain, Module

    from hdl.link.rx import LinkRx
    top = Module()
    top.domains.tx = ClockDomain("tx")
    top.submodules.rx = rx = LinkRx(CFG, "tx")
    out = {"syncs": 0}

    async def sender(ctx):
        for i in range(flits):
            ctx.set(rx.flit, _flit(Kind.SYNC, i & 0xFF))
            await ctx.tick("tx")
        ctx.set(rx.flit, 0)

    async def receiver(ctx):
        for _ in range(flits * 2 + 40):
            await ctx.tick()
            out["syncs"] += ctx.get(rx.sync_valid)
        out["overflow"] = ctx.get(rx.overflow)

    sim = Simulator(top)
    sim.add_clock(10e-9)
    sim.add_clock(tx_period, domain="tx")
    sim.add_testbench(sender)
    sim.add_testbench(receiver)
    sim.run()
    return out


def test_elastic_buffer_overflow_is_flagged():
    """Flits arriving faster than the receiver's clock takes them overflow the elastic
    buffer: the sticky overflow flag rises and flits are lost.  At equal clocks nothing is
    lost and the flag stays low."""
    n = 100
    same = _elastic_run(10e-9, n)
    assert not same["overflow"] and same["syncs"] == n, same
    fast = _elastic_run(5e-9, n)          # the sender twice as fast: far beyond any max_ppm
    assert fast["overflow"], fast
    assert fast["syncs"] < n, fast            # flits were dropped, and the flag says so
