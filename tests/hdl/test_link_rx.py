"""The link's receiver, stage by stage and composed, in Amaranth's simulator.

``LinkRx`` is four stages connected by streams without back-pressure (``hdl/link/``):
the elastic buffer (the clock crossing: written on the sender's clock, a flit comes out
after the third receiver edge following the one that wrote it), the decoder (SECDED; a
single flipped bit is corrected and counted, two are flagged sticky; control flits leave
as one-cycle pulses, 1 cycle later), the vector assembler (``flits_per_vector`` DATA
flits, low bits first, make a vector on the cycle of the last) and the receive buffer
(``rx_depth`` vectors that RECV pops, with its level, the most since the start, and
sticky underflow and overflow).  Every expected value is computed here: flits from
``lpu_arch.c2c.ecc_encode`` and ``flit_fields``, vectors from numpy lanes.
"""

import dataclasses
import random

import numpy as np
import pytest
from amaranth import ClockDomain, Module
from amaranth.sim import Simulator

from hdl.link.assembler import VectorAssembler
from hdl.link.elastic import ElasticBuffer
from hdl.link.flit_decoder import FlitDecoder
from hdl.link.receive_buffer import ReceiveBuffer
from hdl.link.rx import LinkRx
from lpu_arch import TileConfig
from lpu_arch.c2c import KIND_BITS, Kind, ecc_encode, flit_bits, flit_data_bits, flit_fields

CFG = dataclasses.replace(TileConfig.tiny(), links=1, link_width=8)    # 4 flits per vector
CFG1 = dataclasses.replace(TileConfig.tiny(), links=1)                 # 1 flit per vector
PERIOD = 10e-9      # the receiver's clock; its edges are at 5 ns + k * PERIOD


def body(cfg, kind: int, payload: int) -> int:
    """A flit without its valid bit: kind, payload and SECDED check, as flit_fields says."""
    f, base = flit_fields(cfg), flit_fields(cfg)["kind"][0]
    return ((kind << f["kind"][0] | payload << f["payload"][0]
             | ecc_encode(kind | payload << KIND_BITS, flit_data_bits(cfg)) << f["check"][0]) >> base)


def flit(cfg, kind: int, payload: int) -> int:
    """A whole valid flit (valid bit at 0)."""
    return 1 | body(cfg, kind, payload) << flit_fields(cfg)["kind"][0]


def body_bits(cfg) -> int:
    return flit_bits(cfg) - flit_fields(cfg)["kind"][0]


def random_vectors(cfg, n: int, seed: int):
    """``n`` random vectors of int8 lanes: (vector as an integer, its DATA flit payloads)."""
    W, F = cfg.link_width, cfg.flits_per_vector
    assert W % 8 == 0
    lanes = np.random.default_rng(seed).integers(-128, 128, (n, cfg.vector_bits // 8), dtype=np.int8)
    out = []
    for row in lanes.view(np.uint8):
        out.append((int.from_bytes(row.tobytes(), "little"),
                    [int.from_bytes(c.tobytes(), "little") for c in row.reshape(F, W // 8)]))
    return out


def run(dut, *benches, tx_period=None, tx_phase=None):
    """Simulate ``dut`` with the receiver's clock ("sync") and, if asked, the sender's ("tx")."""
    top = Module()
    if tx_period is not None:
        top.domains.tx = ClockDomain("tx")
    top.submodules.dut = dut
    sim = Simulator(top)
    sim.add_clock(PERIOD)
    if tx_period is not None:
        sim.add_clock(tx_period, phase=tx_phase, domain="tx")
    for b in benches:
        sim.add_testbench(b)
    sim.run()


# ---- vector assembler ------------------------------------------------------------------------

@pytest.mark.parametrize("cfg", [CFG, CFG1], ids=["4-flits", "1-flit"])
def test_assembler_builds_vectors(cfg):
    """``flits_per_vector`` flits (with gaps between them) make the vector, low bits first,
    on the cycle of the last flit; a clear drops a partial vector."""
    F = cfg.flits_per_vector
    asm = VectorAssembler(cfg)
    vecs = random_vectors(cfg, 5, seed=1)
    rng = random.Random(2)
    # (valid, payload, clear) per cycle and the cycles on which a vector must come out.
    plan, expect = [], {}
    for i, (v, flits) in enumerate(vecs):
        if i == 3 and F > 1:          # a partial vector, then a start
            plan += [(1, vecs[0][1][0], 0), (0, 0, 1)]
        for j, p in enumerate(flits):
            plan += [(0, rng.getrandbits(cfg.link_width), 0)] * rng.randrange(3)   # gaps carry junk
            if j == F - 1:
                expect[len(plan)] = v
            plan.append((1, p, 0))
    seen = {}

    async def bench(ctx):
        for c, (valid, payload, clear) in enumerate(plan):
            ctx.set(asm.i_stream.valid, valid)
            ctx.set(asm.i_stream.payload, payload)
            ctx.set(asm.clear, clear)
            if ctx.get(asm.o_stream.valid):
                seen[c] = ctx.get(asm.o_stream.payload)
            await ctx.tick()

    run(asm, bench)
    assert seen == expect


# ---- decoder ---------------------------------------------------------------------------------

def _decode(cfg, bodies):
    """Feed ``bodies`` (None: no flit, "clear": a clear) to a FlitDecoder, one per cycle;
    per cycle after the clock edge: its outputs.  On a cycle without a flit the payload is
    a damaged SYNC: without ``valid`` it must neither count nor pulse."""
    dec = FlitDecoder(cfg)
    trace = []
    idle = body(cfg, Kind.SYNC, 0x5A) ^ 0b1000

    async def bench(ctx):
        for b in list(bodies) + [None, None]:
            if b == "clear":
                ctx.set(dec.clear, 1)
                b = None
            ctx.set(dec.i_stream.valid, b is not None)
            ctx.set(dec.i_stream.payload.as_value(), idle if b is None else b)
            await ctx.tick()
            ctx.set(dec.clear, 0)
            trace.append({name: ctx.get(getattr(dec, name)) for name in
                          ("sync_valid", "probe_valid", "echo_valid", "ctrl_value",
                           "corrected", "uncorrected", "uncorrectable")}
                         | {"data": ctx.get(dec.o_stream.valid), "payload": ctx.get(dec.o_stream.payload)})

    run(dec, bench)
    return trace


def test_decoder_corrects_single_bit_errors():
    """Every single flipped bit of a flit (kind, payload or check) is corrected and counted;
    the corrected flit comes out 1 cycle later."""
    n = body_bits(CFG)
    rng = random.Random(5)
    payloads = [rng.getrandbits(CFG.link_width) for _ in range(n)]
    flits = [body(CFG, Kind.DATA, p) ^ (1 << b) for b, p in enumerate(payloads)]
    trace = _decode(CFG, flits)
    for c, p in enumerate(payloads):
        t = trace[c]                       # flit on cycle c, out after the edge ending c
        assert t["data"] and t["payload"] == p, (c, t)
        assert not (t["sync_valid"] or t["probe_valid"] or t["echo_valid"])
        assert t["corrected"] == c + 1 and t["uncorrected"] == 0 and not t["uncorrectable"]
    assert not trace[n]["data"]
    # A control flit with one flipped payload bit: its pulse carries the right value.
    t = _decode(CFG, [body(CFG, Kind.SYNC, 0x5A) ^ (1 << (KIND_BITS + 3))])
    assert t[0]["sync_valid"] and t[0]["ctrl_value"] == 0x5A and t[0]["corrected"] == 1


def test_decoder_flags_double_bit_errors():
    """Two flipped bits: counted and flagged, the flag sticky until a clear.  A DATA flit is
    still passed on (a vector keeps its place), a control flit is dropped."""
    k0 = KIND_BITS        # payload bit 0 within the body
    trace = _decode(CFG, [
        body(CFG, Kind.DATA, 0x33) ^ (0b101 << k0),     # cycle 0
        body(CFG, Kind.SYNC, 0x44) ^ (0b11 << k0),      # 1: dropped
        body(CFG, Kind.DATA, 0x55),                     # 2: clean
        None, "clear", body(CFG, Kind.PROBE, 0x66),     # 3, 4, 5
    ])
    assert trace[0]["data"] and trace[0]["uncorrectable"] and trace[0]["uncorrected"] == 1
    assert not trace[1]["sync_valid"] and trace[1]["uncorrected"] == 2
    assert trace[2]["data"] and trace[2]["payload"] == 0x55 and trace[2]["uncorrectable"]
    assert trace[3]["uncorrectable"] and trace[3]["uncorrected"] == 2 and trace[3]["corrected"] == 0
    assert not trace[4]["uncorrectable"] and trace[4]["uncorrected"] == 0
    assert trace[5]["probe_valid"] and trace[5]["ctrl_value"] == 0x66 and not trace[5]["uncorrectable"]


def test_decoder_control_flits_are_pulses():
    """SYNC, PROBE and ECHO leave as one-cycle pulses, 1 cycle after the flit, with their
    payload; only DATA flits go on to the assembler."""
    seq = [(Kind.DATA, 0x11), (Kind.SYNC, 0x22), (Kind.PROBE, 0x33), None, (Kind.ECHO, 0x44),
           (Kind.SYNC, 0x55), (Kind.SYNC, 0x66), None, (Kind.DATA, 0x77)]
    trace = _decode(CFG, [None if s is None else body(CFG, *s) for s in seq])
    pulse = {Kind.SYNC: "sync_valid", Kind.PROBE: "probe_valid", Kind.ECHO: "echo_valid"}
    for c, t in enumerate(trace):
        kind, payload = seq[c] if c < len(seq) and seq[c] is not None else (None, None)
        for k, name in pulse.items():
            assert t[name] == (kind == k), (c, name, t)
        assert t["data"] == (kind == Kind.DATA), (c, t)
        if kind is not None:
            assert (t["ctrl_value"] if kind != Kind.DATA else t["payload"]) == payload, (c, t)
        assert t["corrected"] == t["uncorrected"] == 0


# ---- receive buffer --------------------------------------------------------------------------
async def buffer_cycle(ctx, buf, push=None, recv=0, clear=0):
    """One cycle of a ``ReceiveBuffer``: a push of ``push`` (None: none), RECV and clear as
    given, then the inputs released; its outputs after the cycle."""
    ctx.set(buf.i_stream.valid, push is not None)
    ctx.set(buf.i_stream.payload, push or 0)
    ctx.set(buf.recv, recv)
    ctx.set(buf.clear, clear)
    await ctx.tick()
    ctx.set(buf.i_stream.valid, 0)
    ctx.set(buf.recv, 0)
    ctx.set(buf.clear, 0)
    return {n: ctx.get(getattr(buf, n)) for n in ("recv_data", "level", "max_level", "overflow", "underflow")}


def test_receive_buffer_level_underflow_overflow():
    """RECV on an empty buffer underflows (and gets 0); a pushed vector counts in the level
    the next cycle and can be popped the one after; ``rx_depth`` vectors fill the buffer,
    one more overflows and is lost; the popped vector is held until the next RECV; a clear
    empties the buffer and clears the flags and ``max_level``."""
    D = CFG.rx_depth
    buf = ReceiveBuffer(CFG)
    vecs = [v for v, _ in random_vectors(CFG, D + 2, seed=7)]
    log = {}

    async def bench(ctx):
        def cycle(push=None, recv=0, clear=0):
            return buffer_cycle(ctx, buf, push, recv, clear)

        # Empty: RECV underflows and gets 0; a clear clears it.
        s = await cycle(recv=1)
        assert s["underflow"] and s["recv_data"] == 0 and s["level"] == 0
        s = await cycle(clear=1)
        assert not s["underflow"]
        # One vector: level 1 on the next cycle, RECV there is too early, one later is not.
        s = await cycle(push=vecs[0])
        assert s["level"] == 1 and s["max_level"] == 0
        s = await cycle(recv=1)
        assert s["underflow"] and s["recv_data"] == 0, "the vector is not poppable yet"
        s = await cycle(clear=1)
        assert s["level"] == 0 and not s["underflow"], "a clear empties the buffer"
        s = await cycle(push=vecs[0])
        s = await cycle()
        s = await cycle(recv=1)
        assert s["recv_data"] == vecs[0] and not s["underflow"] and s["level"] == 0
        assert s["max_level"] == 1
        # Fill it, one vector too many.
        levels = []
        for v in vecs[1:D + 2]:
            levels.append((await cycle(push=v))["level"])
        assert levels == list(range(1, D + 1)) + [D]
        s = await cycle()
        assert s["overflow"] and s["level"] == D and s["max_level"] == D
        popped = []
        for _ in range(D):
            s = await cycle(recv=1)
            popped.append(s["recv_data"])
            for _ in range(2):                      # held while no RECV
                assert (await cycle())["recv_data"] == popped[-1]
        assert popped == vecs[1:D + 1], "in order, the one that found the buffer full is lost"
        assert s["level"] == 0 and s["max_level"] == D and s["overflow"] and not s["underflow"]
        log["end"] = await cycle(clear=1)

    run(buf, bench)
    assert log["end"] == {"recv_data": vecs[D], "level": 0, "max_level": 0, "overflow": 0, "underflow": 0}


@pytest.mark.parametrize("depth", [2, 4, 8])
def test_receive_buffer_holds_rx_depth_vectors_back_to_back(depth):
    """``rx_depth`` vectors pushed on consecutive cycles into an empty buffer are all held
    (level 1, 2, .. ``rx_depth``, no overflow) and RECV'd in order; one more overflows.
    Then random pushes (back to back or not) and RECVs, each push only while the vectors
    held plus it fit in ``rx_depth`` (a vector is held from the cycle after its push up to
    and including the cycle of its RECV), each RECV only for a vector pushed at least 2
    cycles before: ``level`` is the number held on every cycle, nothing is lost or flagged,
    and the buffer is full many times."""
    cfg = dataclasses.replace(CFG1, rx_depth=depth)
    buf = ReceiveBuffer(cfg)
    vecs = [v for v, _ in random_vectors(cfg, depth + 1 + 200, seed=depth)]
    fill, extra, rest = vecs[:depth], vecs[depth], vecs[depth + 1:]
    rng = random.Random(depth)
    obs = {"levels": [], "expect": [], "got": []}

    async def bench(ctx):
        def cycle(push=None, recv=0, clear=0):
            return buffer_cycle(ctx, buf, push, recv, clear)

        obs["fill"] = [await cycle(push=v) for v in fill]
        await cycle()
        obs["popped"] = [await cycle(recv=1) for _ in fill]
        for v in fill:                              # full again, then one too many
            await cycle(push=v)
        obs["full"] = await cycle(push=extra)
        await cycle(clear=1)
        held, todo, c = [], list(rest), 0           # held: (vector, cycle of its push)
        while todo or held:
            recv = bool(held) and held[0][1] <= c - 2 and rng.random() < 0.5
            push = todo.pop(0) if todo and len(held) < depth and rng.random() < 0.7 else None
            s = await cycle(push=push, recv=recv)
            if recv:
                obs["got"].append(s["recv_data"])
                obs["expect"].append(held.pop(0)[0])
            if push is not None:
                held.append((push, c))
            obs["levels"].append((s["level"], len(held)))
            obs.setdefault("flags", []).append(s["overflow"] | s["underflow"])
            c += 1

    run(buf, bench)
    assert [s["level"] for s in obs["fill"]] == list(range(1, depth + 1))
    assert not any(s["overflow"] or s["underflow"] for s in obs["fill"] + obs["popped"])
    assert [s["recv_data"] for s in obs["popped"]] == fill
    assert obs["popped"][-1]["level"] == 0
    assert obs["full"]["overflow"] and obs["full"]["level"] == depth, "capacity exactly rx_depth"
    assert obs["got"] == obs["expect"] == rest
    assert all(a == b for a, b in obs["levels"]), obs["levels"]
    assert not any(obs["flags"])
    assert sum(n == depth for n, _ in obs["levels"]) >= 10


def test_link_rx_two_deep_buffer_takes_back_to_back_vectors():
    """One flit a vector and ``rx_depth`` 2: two vectors sent on consecutive sender cycles
    into an empty receive buffer both arrive (level 1 then 2), RECV'd in order, no flag."""
    cfg = dataclasses.replace(CFG1, rx_depth=2)
    rx = LinkRx(cfg, "tx")
    vecs = [v for v, _ in random_vectors(cfg, 2, seed=5)]
    obs = {"levels": []}

    async def sender(ctx):
        for v in [None, None] + vecs:
            ctx.set(rx.flit, 0 if v is None else flit(cfg, Kind.DATA, v))
            await ctx.tick("tx")
        ctx.set(rx.flit, 0)

    async def receiver(ctx):
        for _ in range(12):
            await ctx.tick()
            obs["levels"].append(ctx.get(rx.level))
        popped = []
        for _ in range(2):
            ctx.set(rx.recv, 1)
            await ctx.tick()
            ctx.set(rx.recv, 0)
            popped.append(ctx.get(rx.recv_data))
        obs["popped"] = popped
        obs["flags"] = {n: ctx.get(getattr(rx, n)) for n in ("overflow", "underflow", "level", "max_level")}

    run(rx, sender, receiver, tx_period=PERIOD, tx_phase=6e-9)
    assert [n for i, n in enumerate(obs["levels"]) if n != (obs["levels"][i - 1] if i else 0)] == [1, 2]
    assert obs["popped"] == vecs
    assert obs["flags"] == {"overflow": 0, "underflow": 0, "level": 0, "max_level": 2}


# ---- elastic buffer --------------------------------------------------------------------------

def _elastic(tx_period: float, tx_phase: float, sends, rx_cycles: int, clear_at=None):
    """An ElasticBuffer written on a "tx" clock: ``sends`` is one flit body (or None) per
    sender cycle.  Returns the bodies out of it, in order, with the receiver tick after
    which each showed, the tx tick that wrote each flit, and the flags."""
    el = ElasticBuffer(CFG, "tx")
    out = {"got": [], "at": [], "wrote": [], "max_level": 0}

    async def sender(ctx):
        for n, b in enumerate(sends, start=1):
            ctx.set(el.flit, 0 if b is None else 1 | b << flit_fields(CFG)["kind"][0])
            if b is not None:
                out["wrote"].append(n)       # written by tx edge number n
            await ctx.tick("tx")
        ctx.set(el.flit, 0)

    async def receiver(ctx):
        for m in range(1, rx_cycles + 1):
            ctx.set(el.clear, m == clear_at)
            await ctx.tick()
            if ctx.get(el.o_stream.valid):
                out["got"].append(ctx.get(el.o_stream.payload.as_value()))
                out["at"].append(m)
            out["max_level"] = max(out["max_level"], ctx.get(el.level))
            if m == (clear_at or 0) - 1:
                out["overflow_before_clear"] = ctx.get(el.overflow)
        out["overflow"] = ctx.get(el.overflow)
        out["level"] = ctx.get(el.level)

    run(el, sender, receiver, tx_period=tx_period, tx_phase=tx_phase)
    return out


@pytest.mark.parametrize("tx_phase, third_edge", [(6e-9, 3), (4e-9, 2)], ids=["tx-after-rx", "tx-before-rx"])
def test_elastic_buffer_latency(tx_phase, third_edge):
    """Equal clocks, the sender's edges 1 ns after (or before) the receiver's: a flit comes
    out after the third receiver edge following the sender edge that wrote it (two
    synchronise the write pointer, one pops it into the output register).  Receiver edge m
    is at 5 ns + (m - 1) * 10 ns, sender edge n at phase + (n - 1) * 10 ns."""
    sends = [None] * 4 + [0x123, None, None, 0x0F0, 0x3AB]
    r = _elastic(PERIOD, tx_phase, sends, 20)
    assert r["got"] == [0x123, 0x0F0, 0x3AB]
    assert [a - w for a, w in zip(r["at"], r["wrote"])] == [third_edge] * 3


@pytest.mark.parametrize("tx_period, tx_phase", [
    (PERIOD, 0.3e-9), (PERIOD, 7.1e-9),                  # the same clock, two phases
    (PERIOD * 0.99, 2.5e-9), (PERIOD * 1.01, 8.8e-9),    # a sender 1 % faster / slower
], ids=["equal-a", "equal-b", "tx-1%-fast", "tx-1%-slow"])
def test_elastic_buffer_in_order_without_loss(tx_period, tx_phase):
    """A flit on every sender cycle (and a few gaps) comes out once, in order, without
    overflow, at equal and slightly different clock rates (a sender 1 % fast fills the
    buffer by 2 flits over 200)."""
    rng = random.Random(int(tx_period * 1e12) ^ int(tx_phase * 1e12))
    sends = [None if rng.random() < 0.05 else rng.getrandbits(body_bits(CFG)) for _ in range(200)]
    r = _elastic(tx_period, tx_phase, sends, 230)
    assert r["got"] == [b for b in sends if b is not None]
    assert not r["overflow"] and r["level"] == 0
    assert r["max_level"] <= 4


def test_elastic_buffer_overflow_when_writer_much_faster():
    """A sender at twice the receiver's rate fills the buffer: the sticky overflow rises,
    the flits that come out are an in-order subsequence of those sent (the others are lost),
    and a clear once the sender has stopped clears it."""
    sends = list(range(1, 101))
    r = _elastic(PERIOD / 2, 1e-9, sends, 90, clear_at=85)
    assert r["overflow_before_clear"] and not r["overflow"]
    it = iter(sends)
    assert all(g in it for g in r["got"]), "out of order"
    assert 40 <= len(r["got"]) < len(sends)
    assert r["max_level"] <= CFG.ELASTIC_DEPTH


# ---- the composed receiver -------------------------------------------------------------------

def test_link_rx_vectors_control_and_timing():
    """LinkRx end to end, equal clocks, the sender's edges 1 ns after the receiver's:
    vectors of DATA flits (one with a flipped bit) with SYNC and PROBE flits between them.
    A vector counts in ``level`` after the fifth receiver edge following the sender edge
    that wrote its last flit (3 elastic, 1 decode, 1 receive buffer), a control flit pulses
    after the fourth; RECV returns the vectors in order; a vector too many overflows."""
    F = CFG.flits_per_vector
    rx = LinkRx(CFG, "tx")
    vecs = random_vectors(CFG, CFG.rx_depth + 1, seed=11)
    sends, level_after, pulse_after = [None, None], {}, {}
    for i, (v, flits) in enumerate(vecs):
        for j, p in enumerate(flits):
            f = flit(CFG, Kind.DATA, p)
            if i == 1 and j == F - 1:
                f ^= 1 << flit_fields(CFG)["payload"][0] + 5
            sends.append(f)
        if i < CFG.rx_depth:                 # the last one finds the buffer full
            level_after[len(sends) + 5] = i + 1
        if i in (0, 2):
            kind = Kind.SYNC if i == 0 else Kind.PROBE
            sends.append(flit(CFG, kind, 0x40 + i))
            pulse_after[len(sends) + 4] = (kind, 0x40 + i)
        sends.append(None)
    obs = {"levels": {}, "pulses": {}}

    async def sender(ctx):
        for f in sends:
            ctx.set(rx.flit, f or 0)
            await ctx.tick("tx")
        ctx.set(rx.flit, 0)

    async def receiver(ctx):
        m = 0
        for m in range(1, len(sends) + 12):
            await ctx.tick()
            obs["levels"][m] = ctx.get(rx.level)
            for k, name in ((Kind.SYNC, "sync_valid"), (Kind.PROBE, "probe_valid"), (Kind.ECHO, "echo_valid")):
                if ctx.get(getattr(rx, name)):
                    obs["pulses"][m] = (k, ctx.get(rx.ctrl_value))
        obs["status"] = {n: ctx.get(getattr(rx, n)) for n in
                         ("max_level", "overflow", "underflow", "uncorrectable", "corrected", "uncorrected")}
        popped = []
        for _ in range(CFG.rx_depth):
            ctx.set(rx.recv, 1)
            await ctx.tick()
            ctx.set(rx.recv, 0)
            popped.append(ctx.get(rx.recv_data))
        obs["popped"] = popped
        obs["after"] = {n: ctx.get(getattr(rx, n)) for n in ("level", "underflow")}
        ctx.set(rx.clear, 1)
        await ctx.tick()
        obs["cleared"] = {n: ctx.get(getattr(rx, n)) for n in
                          ("max_level", "overflow", "corrected", "level")}

    run(rx, sender, receiver, tx_period=PERIOD, tx_phase=6e-9)
    changes = {m: n for m, n in obs["levels"].items() if n != obs["levels"].get(m - 1, 0)}
    assert changes == level_after
    assert obs["pulses"] == pulse_after
    assert obs["status"] == {"max_level": CFG.rx_depth, "overflow": 1, "underflow": 0,
                             "uncorrectable": 0, "corrected": 1, "uncorrected": 0}
    assert obs["popped"] == [v for v, _ in vecs[:CFG.rx_depth]]
    assert obs["after"] == {"level": 0, "underflow": 0}
    assert obs["cleared"] == {"max_level": 0, "overflow": 0, "corrected": 0, "level": 0}


def test_elastic_buffer_flags_every_lost_flit_after_a_clear():
    """With the receiver's clock held while the buffer is full, each flit sent is lost: one per
    round.  Three receiver edges later ``overflow`` is up, a clear takes it down, and the
    popped flits are replaced so that the next round loses exactly one again.  Twenty rounds
    take the sender's Gray-coded loss count through its wrap (16 losses): each loss must
    change the code, the 16th too."""
    el = ElasticBuffer(CFG, "tx")
    top, sync = Module(), ClockDomain("sync")
    top.domains.tx, top.domains.sync = ClockDomain("tx"), sync
    top.submodules.dut = el
    sim = Simulator(top)
    sim.add_clock(PERIOD, domain="tx")
    valid = 1 | 0x5 << flit_fields(CFG)["kind"][0]
    seen = []

    async def bench(ctx):
        async def send(n):
            for _ in range(n):
                ctx.set(el.flit, valid)
                await ctx.tick("tx")
            ctx.set(el.flit, 0)
            await ctx.tick("tx").repeat(4)            # the receiver's pointer crosses back

        async def receiver_edge():
            await ctx.delay(PERIOD / 2)
            ctx.set(sync.clk, 1)
            await ctx.delay(PERIOD / 2)
            ctx.set(sync.clk, 0)
            return ctx.get(el.o_stream.valid)

        await send(CFG.ELASTIC_DEPTH)                     # full, and nothing popped
        refill = 0
        for _ in range(20):
            await send(refill + 1)                         # refill, then one flit lost
            refill = sum([await receiver_edge() for _ in range(3)])
            flagged = ctx.get(el.overflow)
            ctx.set(el.clear, 1)
            refill += await receiver_edge()
            ctx.set(el.clear, 0)
            seen.append((flagged, ctx.get(el.overflow)))

    sim.add_testbench(bench)
    sim.run()
    assert seen == [(1, 0)] * 20, [k for k, s in enumerate(seen, 1) if s != (1, 0)]
