"""The deskew stall bound (``docs/c2c.md``, "Bounded stalls").

In Amaranth's simulator, the deskew unit on its own: a DESKEW or RUNTIME_DESKEW stall of
exactly its bound (``c2c.deskew_stall_max`` / ``c2c.runtime_deskew_stall_max``) is legal,
one stalled cycle more raises the sticky ``timeout``, after which the unit stalls the core
whatever the HAC does, until the start (``clear``) drops the stall on its own cycle.

On the RTL (Icarus): a child whose clock runs far beyond ``max_ppm`` falls out of HAC
lock and stalls its first RUNTIME_DESKEW beyond the bound; it halts at once (done, with
``Status.DESKEW_TIMEOUT``) instead of hanging the testbench, and a run whose tiles never
finish is reported with each tile's STATUS (``timed_out``) without losing the other runs
of the batch.  An injection asking for more flits than are sent reports the flits hit.
"""

import dataclasses

import pytest
from amaranth.sim import Simulator

from lpu_arch import TileConfig, c2c
from lpu_arch.hostmap import LINK_FAULTS, Status
from hdl.link.deskew import DeskewUnit

CFG = dataclasses.replace(TileConfig.tiny(), links=1)


def run_bench(bench):
    dut = DeskewUnit(CFG)
    sim = Simulator(dut)
    sim.add_clock(1e-6)

    async def tb(ctx):
        await bench(ctx, dut)

    sim.add_testbench(tb)
    sim.run()


async def issue(ctx, dut, hac, sac, runtime, slack=0):
    """Clear, then issue a DESKEW (``runtime`` False) or RUNTIME_DESKEW on HAC ``hac``."""
    ctx.set(dut.clear, 1)
    await ctx.tick()
    ctx.set(dut.clear, 0)
    ctx.set(dut.hac, hac)
    ctx.set(dut.sac, sac)
    ctx.set(dut.runtime if runtime else dut.deskew, 1)
    ctx.set(dut.slack, slack)
    await ctx.tick()
    ctx.set(dut.runtime, 0)
    ctx.set(dut.deskew, 0)


async def stall_length(ctx, dut, hac, step=1, limit=5000):
    """Cycles stalled from now, the HAC advancing ``step`` a cycle; (cycles, timeout seen
    during the stall or on the release)."""
    n = 0
    while n < limit:
        hac += step
        ctx.set(dut.hac, hac)
        if not ctx.get(dut.stall):
            return n, bool(ctx.get(dut.timeout))
        n += 1
        await ctx.tick()
    return n, bool(ctx.get(dut.timeout))


@pytest.mark.parametrize("extra", [0, 1])
def test_runtime_deskew_bound(extra):
    """A RUNTIME_DESKEW stall of exactly its bound releases (no fault); one cycle more sets
    ``timeout`` on the tick after that cycle, and the core stays stalled although the HAC
    passed the target, until ``clear``."""
    slack = c2c.deskew_slack(CFG)
    bound = c2c.runtime_deskew_stall_max(CFG, slack)
    sac = 5000
    # offset is 0 after clear: target = sac + 1 + slack; the HAC is hac0 + 1 on the first waiting cycle.
    hac0 = sac + slack - bound - extra

    async def bench(ctx, dut):
        await issue(ctx, dut, hac0, sac, runtime=True, slack=slack)
        if not extra:
            n, timeout = await stall_length(ctx, dut, hac0)
            assert (n, timeout) == (bound, False)
            await ctx.tick()
            assert not ctx.get(dut.timeout) and not ctx.get(dut.waiting) and not ctx.get(dut.late)
            return
        hac = hac0
        for k in range(bound + 1):               # the stalled cycles up to one beyond the bound
            hac += 1
            ctx.set(dut.hac, hac)
            assert ctx.get(dut.stall) and not ctx.get(dut.timeout), k
            await ctx.tick()
        assert ctx.get(dut.timeout)
        for _ in range(50):                      # the HAC is past the target: still stalled
            hac += 1
            ctx.set(dut.hac, hac)
            assert ctx.get(dut.stall) and ctx.get(dut.waiting)
            await ctx.tick()
        assert ctx.get(dut.stalled_cycles) == bound + 1     # frozen once the unit timed out
        ctx.set(dut.clear, 1)
        assert not ctx.get(dut.stall)            # the start's own cycle is not stalled
        await ctx.tick()
        ctx.set(dut.clear, 0)
        assert not ctx.get(dut.timeout) and not ctx.get(dut.stall) and not ctx.get(dut.waiting)

    run_bench(bench)


def test_deskew_bound():
    """A DESKEW on an epoch boundary stalls ``epoch - 1`` cycles (legal, even with a SYNC
    moving the HAC back by HAC_ERROR_MAX during the wait); a HAC that stops (a SYNC from a
    corrupted flit moving it far back) times out after ``deskew_stall_max + 1`` stalled
    cycles."""
    bound = c2c.deskew_stall_max(CFG)
    E = CFG.epoch

    async def bench(ctx, dut):
        await issue(ctx, dut, 7 * E, 0, runtime=False)
        assert await stall_length(ctx, dut, 7 * E) == (E - 1, False)
        await issue(ctx, dut, 7 * E, 0, runtime=False)
        n, _ = await stall_length(ctx, dut, 7 * E, limit=E // 2)
        ctx.set(dut.hac, 7 * E + E // 2 - c2c.HAC_ERROR_MAX)   # a SYNC steps the HAC back
        await ctx.tick()
        m, timeout = await stall_length(ctx, dut, 7 * E + E // 2 - c2c.HAC_ERROR_MAX)
        assert not timeout and n + 1 + m == E - 1 + c2c.HAC_ERROR_MAX + 1 <= bound
        await issue(ctx, dut, 9 * E + 3, 0, runtime=False)
        assert await stall_length(ctx, dut, 9 * E + 3, step=0, limit=bound) == (bound, False)
        assert ctx.get(dut.stall)                # one stalled cycle beyond the bound
        await ctx.tick()
        assert ctx.get(dut.timeout) and ctx.get(dut.stall)

    run_bench(bench)


def test_armed_start_sets_the_offset():
    """``load`` (an armed start) sets ``offset`` to ``START_HAC``: a RUNTIME_DESKEW issued
    on SAC 0 at that HAC stalls exactly its slack and releases with ``offset`` one slack
    later (SAC 1 runs at ``START_HAC + 1 + slack``), not late, whatever the offset was."""
    start_hac, slack = 123_456, c2c.START_SLACK

    async def bench(ctx, dut):
        for early in (0, 1):      # the tile's HAC on its cycle 0: START_HAC, or one past it
            ctx.set(dut.load, 1)
            ctx.set(dut.load_offset, start_hac)
            ctx.set(dut.clear, 1)
            await ctx.tick()
            ctx.set(dut.load, 0)
            ctx.set(dut.clear, 0)
            assert ctx.get(dut.offset) == start_hac
            ctx.set(dut.hac, start_hac + early)
            ctx.set(dut.sac, 0)
            ctx.set(dut.runtime, 1)
            ctx.set(dut.slack, slack)
            await ctx.tick()
            ctx.set(dut.runtime, 0)
            assert await stall_length(ctx, dut, start_hac + early) == (slack - early, False)
            await ctx.tick()
            assert ctx.get(dut.offset) == start_hac + slack and not ctx.get(dut.late)

    run_bench(bench)


def test_bound_values():
    """The bounds of the tiny and default configurations (docs/c2c.md)."""
    for cfg in (CFG, TileConfig()):
        assert c2c.deskew_stall_max(cfg) == cfg.epoch + c2c.HAC_ERROR_MAX + c2c.DESKEW_STALL_MARGIN
        assert (c2c.runtime_deskew_stall_max(cfg, c2c.deskew_slack(cfg))
                == c2c.deskew_slack(cfg) + 1 + 2 * c2c.HAC_ERROR_MAX
                + c2c.drift(cfg, c2c.deskew_interval(cfg)) + c2c.DESKEW_STALL_MARGIN)
    assert c2c.deskew_stall_max(CFG) == 1042 and c2c.runtime_deskew_stall_max(CFG, c2c.deskew_slack(CFG)) == 29
    assert Status.DESKEW_TIMEOUT & LINK_FAULTS


# ---- on the RTL --------------------------------------------------------------------------------
def _sync_miscorrection_mask(cfg) -> int:
    """A 3-bit error in high payload bits of a flit that SECDED miscorrects (and counts as
    corrected) into a SYNC still, its HAC value off by about 2**28 cycles."""
    k, lsb = c2c.flit_data_bits(cfg), c2c.flit_fields(cfg)["payload"][0]
    bits = (20, 25, 28)
    data = 12345 << c2c.KIND_BITS | c2c.Kind.SYNC
    e = sum(1 << (c2c.KIND_BITS + b) for b in bits)
    decoded, status = c2c.ecc_decode(data ^ e, c2c.ecc_encode(data, k), k)
    assert status == c2c.EccStatus.CORRECTED and decoded & 3 == c2c.Kind.SYNC and decoded >> 2 != 12345
    return sum(1 << (lsb + b) for b in bits)


@pytest.mark.sim
def test_stall_beyond_bound_halts_and_harness_survives_timeouts():
    """On Icarus, one batch:

    * a child far beyond ``max_ppm`` (fast: its program runs ahead of the HAC) loses HAC
      lock and stalls its first RUNTIME_DESKEW beyond the bound: it halts (done, with
      ``DESKEW_TIMEOUT`` and ``DeskewStatus.STALL_TIMEOUT``) long before the timeout;
    * 3-bit errors miscorrected into the root's SYNCs (the issue's case) move the child's
      HAC far ahead, then back: the child's next RUNTIME_DESKEW would stall for ~2**28
      cycles and halts instead;
    * a run given too short a timeout is reported ``timed_out`` with each tile's STATUS;
    * an injection asking for more flits than are sent reports the flits it hit;
    * a clean run afterwards is exact: the batch's results are all kept.
    """
    from firmware_gen.golden import archmodel
    from sim.flows.c2c import check_tiles, exchange
    from sim.harness.runner import SystemSim, system_run

    from tests.helpers import SIMS
    if "icarus" not in SIMS:
        pytest.skip("needs Icarus")
    cfg = dataclasses.replace(TileConfig.tiny_tray(), links=1)
    sched = exchange(cfg, 2, per_link=4, spread=1500, seed=5)
    programs = sched.programs()
    gold = archmodel.run_system(programs, sched.topo.peer)
    far = 30 * cfg.max_ppm
    timeout = 20_000
    requested = 100_000
    runs = [
        system_run(programs, (-far, far), name="beyond-bound", seed=1, timeout_cycles=timeout),
        system_run(programs, (100, -100), name="sync-miscorrected", seed=2, timeout_cycles=timeout,
                   inject=[{"tile": 0, "link": 0, "mask": _sync_miscorrection_mask(cfg), "after_cycles": 0,
                            "count": 40}]),
        system_run(programs, (200, -300), name="too-short", seed=3, timeout_cycles=300),
        system_run(programs, (-200, 300), name="inject-beyond-sent", seed=4,
                   inject=[{"tile": 0, "link": 0, "mask": 1 << 10, "after_cycles": 0, "count": requested}]),
        system_run(programs, (300, -200), name="clean", seed=5),
    ]
    res = SystemSim(cfg, 2, cfg.link_latency_min, "icarus").run(runs, name="deskew-bound")
    assert [r["name"] for r in res] == [r["name"] for r in runs]
    beyond, miscorrected, short, over, clean = res
    for r in (beyond, miscorrected):
        child = r["tiles"][1]
        where = f"run {r['name']}: {[hex(t['status']) for t in r['tiles']]} {child['c2c']}"
        assert not r["timed_out"], where
        assert child["status"] & Status.DESKEW_TIMEOUT and child["status"] & Status.DONE, where
        assert not child["status"] & Status.RUNNING, where
        assert child["c2c"]["stall_timeout"] and child["c2c"]["lock_lost"], where
        assert "DESKEW_TIMEOUT" in child["fault_names"] and not child["trace_read"]
        assert not r["tiles"][0]["status"] & Status.DESKEW_TIMEOUT, where   # the root is not stalled
        # Halted well before the testbench's timeout (the whole program is a few thousand cycles).
        assert r["t_done_fs"] - r["t_start_fs"] < timeout * 10_000_000 // 2, where
        print(f"\n{r['name']}: child SAC {child['cycles']}, stalled {child['c2c']['stalled_cycles']}, "
              f"{child['fault_names']}, done {(r['t_done_fs'] - r['t_start_fs']) / 1e6:.0f} ns after the start")
    assert miscorrected["injected"] == [40] and miscorrected["tiles"][1]["c2c"]["links"][0]["corrected"] >= 40
    assert short["timed_out"]
    assert all(t["status"] & Status.RUNNING and not t["done"] for t in short["tiles"]), \
        [hex(t["status"]) for t in short["tiles"]]
    assert over["inject_requested"] == [requested] and 0 < over["injected"][0] < requested
    assert over["tiles"][1]["c2c"]["links"][0]["corrected"] == over["injected"][0]
    for r in (over, clean):
        assert not r["timed_out"]
        assert not any(check_tiles(r, sched, gold)), (r["name"], check_tiles(r, sched, gold))
        assert not any(t["status"] & LINK_FAULTS for t in r["tiles"])
