"""The vector load port (``hostmap.LOAD_REGIONS``).

* Each slice's load lane in Amaranth's simulator (MEM slice, instruction queue, VXM): what
  the port writes reads back over the slice's host port at the bus addresses of
  ``hostmap``; a load-port write wins over a host write on the same cycle; a row beyond the
  depth and a write while the tile runs are ignored.
* The tile on every simulator: the same jobs loaded through the port and over the host
  bus give the same observations (trace, cycles, busy counters, every row read back, the
  VXM's parameter and table words), each checked against the golden model.
"""

import dataclasses

import numpy as np
import pytest
from amaranth.sim import Simulator

from hdl.units.icu import InstructionQueue
from hdl.units.mem_slice import MemSlice
from hdl.units.vxm import VXM

from lpu_arch import TileConfig
from lpu_arch.vxm import param_words, table_words

from firmware_gen.golden import archmodel
from firmware_gen.compiler.ffn import compile_ffn
from firmware_gen.compiler.ffn_example import example_ffn
from firmware_gen.golden.numerics import ffn_int
from sim.harness.runner import job
from sim.harness.scoreboard import check_run, diff_runs, output_rows

from tests.helpers import get_sim, random_schedule

CFG = TileConfig.tiny()


def simulate(dut, bench):
    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()


async def host_read(ctx, port, addr, latency=1):
    ctx.set(port.sel, 1)
    ctx.set(port.re, 1)
    ctx.set(port.addr, addr)
    await ctx.tick()
    ctx.set(port.re, 0)
    for _ in range(latency - 1):
        await ctx.tick()
    value = ctx.get(port.rdata)
    ctx.set(port.sel, 0)
    return value


async def load(ctx, dut, row, data, we=1):
    ctx.set(dut.load_we, we)
    ctx.set(dut.load_row, row)
    ctx.set(dut.load_data, data)
    await ctx.tick()
    ctx.set(dut.load_we, 0)


def test_mem_slice_load_lane():
    cfg = dataclasses.replace(CFG, iq_depth=2 * CFG.mem_depth)   # the port's row reaches beyond mem_depth
    dut, rng = MemSlice(cfg), np.random.default_rng(0)
    wpv, depth = cfg.words_per_vector, cfg.mem_depth
    vectors = {r: int.from_bytes(rng.integers(0, 256, cfg.lanes, dtype=np.uint8).tobytes(), "little")
               for r in (0, 1, depth - 1)}

    async def bench(ctx):
        for r, v in vectors.items():
            await load(ctx, dut, r, v)
        # the same cycle: a host write of word 0 of row 5 and a load of row 5: the load wins
        ctx.set(dut.host.sel, 1)
        ctx.set(dut.host.we, 1)
        ctx.set(dut.host.addr, 5 * wpv)
        ctx.set(dut.host.wdata, 0xDEADBEEF)
        await load(ctx, dut, 5, 0x1234)
        ctx.set(dut.host.we, 0)
        ctx.set(dut.host.sel, 0)
        await load(ctx, dut, depth, (1 << cfg.vector_bits) - 1)     # beyond the depth: ignored
        ctx.set(dut.run, 1)
        await load(ctx, dut, 1, 0)                                     # while running: ignored
        ctx.set(dut.run, 0)
        for r, v in {**vectors, 5: 0x1234}.items():
            got = [await host_read(ctx, dut.host, r * wpv + w) for w in range(wpv)]
            assert got == [(v >> (32 * w)) & 0xFFFFFFFF for w in range(wpv)], f"row {r}"
    simulate(dut, bench)


def test_instruction_queue_load_lane():
    cfg = dataclasses.replace(CFG, mem_depth=2 * CFG.iq_depth)   # the port's row reaches beyond iq_depth
    dut = InstructionQueue(cfg, "MEM")
    words = {0: 0x0123456789ABCDEF, 7: 0xFEDCBA9876543210, cfg.iq_depth - 1: 0x5A5A5A5AA5A5A5A5}

    async def bench(ctx):
        for r, w in words.items():
            await load(ctx, dut, r, w)
        await load(ctx, dut, cfg.iq_depth, (1 << 64) - 1)             # beyond the depth: ignored
        ctx.set(dut.run, 1)
        await load(ctx, dut, 7, 0)                                     # while running: ignored
        ctx.set(dut.run, 0)
        for r, w in words.items():
            assert [await host_read(ctx, dut.host, 2 * r + k) for k in (0, 1)] == [w & 0xFFFFFFFF, w >> 32]
    simulate(dut, bench)


def test_vxm_load_lanes():
    from lpu_arch.vxm import IDENTITY, PARAM_WORDS, lane_words
    dut, rng = VXM(CFG), np.random.default_rng(1)
    entry = 3
    lanes = {l: [int(v) for v in rng.integers(0, 1 << 15, len(IDENTITY))] for l in (0, CFG.lanes - 1)}
    data = sum(sum(w << (32 * k) for k, w in enumerate(lane_words(v))) << (32 * PARAM_WORDS * l)
               for l, v in lanes.items())
    we = sum(1 << l for l in lanes)

    async def bench(ctx):
        await load(ctx, dut, entry, data, we)
        await load(ctx, dut, CFG.vxm_param_depth, (1 << len(dut.load_data)) - 1, (1 << CFG.lanes) - 1)
        for l in range(CFG.lanes):
            want = lane_words(lanes.get(l, IDENTITY))
            base = (entry * CFG.lanes + l) * PARAM_WORDS
            got = [await host_read(ctx, dut.host_param, base + k, latency=1) for k in range(PARAM_WORDS)]
            assert got == want, f"lane {l}"
    simulate(dut, bench)


@pytest.mark.sim
def test_load_port_matches_host_bus(simulator):
    cfg = TileConfig.tiny()
    sched = random_schedule(cfg, 12, seed=3)          # every row of every MEM slice nonzero
    prog = sched.program()
    ex = example_ffn("swiglu", 8, 8, 1, seed=5)
    ffn, man = compile_ffn(ex.spec, ex.x_int8, cfg)
    every_row = {n: list(range(cfg.mem_depth)) for n in cfg.mem_names}
    # The FFN after the sweep: the port must clear the rows the sweep left nonzero.
    jobs = [job(prog, name="sweep", read_back=every_row),
            job(ffn, name="ffn", read_back={**every_row, **output_rows(man)}, read_vxm=True)]
    runs = {load: get_sim(cfg, simulator).run(jobs, name=f"load-{load}", load=load) for load in ("port", "bus")}
    for load, (r_sweep, r_ffn) in runs.items():
        assert r_sweep["load_path"] == r_ffn["load_path"] == load
        problems = check_run(r_sweep, archmodel.run(prog), sched.predicted_writes(), sched.predicted_cycles())
        problems += check_run(r_ffn, archmodel.run(ffn), manifest=man, y=ffn_int(ex.spec, ex.x_int8))
        assert not problems, f"loaded over the {load}:\n" + "\n".join(problems)
        assert r_ffn["vxm_words"] == [param_words(ffn.vxm_params.tolist()), table_words(ffn.table.tolist())]
    for a, b in zip(runs["port"], runs["bus"]):
        assert not diff_runs(a, b, ("port", "bus")), "\n".join(diff_runs(a, b, ("port", "bus")))
        # The same bytes, but the port writes a VXM lane entry whole where the bus writes
        # only the words that differ.
        assert a["loaded_bytes"] >= b["loaded_bytes"] > 0
