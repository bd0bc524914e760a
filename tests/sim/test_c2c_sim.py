"""Tiles in their own clock domains over C2C links, on both simulators (``docs/c2c.md``).

Every run checks each tile's hardware trace and cycle count against the golden model
(``archmodel.run_system``, lockstep SAC time) and the scheduler's prediction, whatever
the clocks: ppm offsets, random phases, a random wire latency within the declared range.
"""

import random

import pytest

from lpu_arch import c2c

from firmware_gen.golden import archmodel
from lpu_arch.hostmap import LINK_FAULTS, Status
from sim.flows.c2c import c2c_config, check_tiles, exchange, without_runtime_deskews
from sim.harness.runner import observed_events, system_run
from sim.harness.scoreboard import check_wall, diff_runs

from tests.helpers import FAST_SIM, ONE_SIM, SIMS

pytestmark = pytest.mark.sim

CFG = c2c_config()
_systems = {}


def latency(simulator: str) -> int:
    """A random wire latency within the declared range, fixed per simulator (it is part of
    the build); the two simulators get different ones."""
    return random.Random(f"c2c-latency-{simulator}").randint(CFG.link_latency_min, CFG.link_latency_max)


def system(simulator: str):
    from sim.harness.runner import SystemSim
    if simulator not in _systems:
        _systems[simulator] = SystemSim(CFG, 2, latency(simulator), simulator)
    return _systems[simulator]


def drift_ppms(seed: str):
    rng = random.Random(seed)
    m = CFG.max_ppm
    pairs = [(0, 0), (100, -100), (-100, 100), (500, -500), (-500, 500), (m, -m), (-m, m)]
    pairs.append((rng.uniform(-m, m), rng.uniform(-m, m)))
    return pairs


def short_exchange():
    """Four vectors each way, spread over three RUNTIME_DESKEW intervals."""
    return exchange(CFG, 2, per_link=4, spread=700, seed=5)


def traces(result):
    return [observed_events(t) for t in result["tiles"]]


def assert_clean(result, sched, gold):
    problems = check_tiles(result, sched, gold)
    where = f"run {result['name']} (ppm {result['ppm']}, phase {result['phase_fs']} fs)"
    assert not any(problems), where + ":\n" + "\n".join(f"tile {t}: {p}" for t, ps in enumerate(problems)
                                                        for p in ps)
    for t, obs in enumerate(result["tiles"]):
        for lk, link in enumerate(obs["c2c"]["links"]):
            assert not (link["overflow"] or link["underflow"] or link["uncorrectable"] or link["tx_overrun"]), \
                f"{where}: tile {t} link {lk}: {link}"
            assert link["corrected"] == 0 and link["max_level"] <= CFG.rx_depth
        assert obs["c2c"]["locked"] and not obs["c2c"]["lock_lost"] and not obs["c2c"]["late"]
    lo, hi = result["hac_error"]
    assert -c2c.HAC_ERROR_MAX <= lo <= hi <= c2c.HAC_ERROR_MAX, f"{where}: HAC error {lo:.3f}..{hi:.3f}"
    assert_wall(sched.programs(), result)


def assert_wall(programs, result):
    """The run's wall cycles (HAC) as ``c2c.wall_cycles`` predicts (``scoreboard.check_wall``)."""
    wall, predicted, problems = check_wall(programs, result)      # (within HAC_ERROR_MAX)
    assert not problems, f"run {result['name']}: wall cycles {wall}, predicted {predicted}: {problems}"


def test_two_tiles_in_lockstep_under_drift(simulator):
    """0, +-100, +-500, +-max_ppm and a random pair, random phases: every tile's trace is
    the golden model's and the scheduler's, identical across runs, no fault."""
    sched = short_exchange()
    programs = sched.programs()
    gold = archmodel.run_system(programs, sched.topo.peer)
    seeds = random.Random(f"c2c-phase-{simulator}")
    runs = [system_run(programs, ppm, name=f"drift{i}", seed=seeds.randrange(1 << 16))
            for i, ppm in enumerate(drift_ppms(f"c2c-ppm-{simulator}"))]
    results = system(simulator).run(runs, name="drift")
    first = traces(results[0])
    assert len(first[0]) == len(first[1]) == 4
    for r in results:
        assert_clean(r, sched, gold)
        assert traces(r) == first
    lat = results[0]["tiles"][1]["c2c"]["latency"]
    print(f"\n{simulator}: wire latency {latency(simulator)}, measured {lat}; HAC error "
          f"{min(r['hac_error'][0] for r in results):+.3f}..{max(r['hac_error'][1] for r in results):+.3f}; "
          f"program skew {min(r['sac_skew'][0] for r in results):+.2f}..{max(r['sac_skew'][1] for r in results):+.2f}; "
          f"rx level max {max(r['rx_level'][t][0][1] for r in results for t in range(2))}; "
          f"cycles {[t['cycles'] for t in results[0]['tiles']]}; "
          f"wall {sum(r['wall_run_s'] for r in results):.1f} s for {len(results)} runs")


@pytest.mark.skipif(len(SIMS) < 2, reason="needs both simulators")
def test_simulators_agree():
    """The same program at the extreme drift on both simulators (each with its own wire
    latency and clock phases): identical traces, cycles and busy counts."""
    sched = short_exchange()
    programs = sched.programs()
    m = CFG.max_ppm
    out = [system(sim).run([system_run(programs, (m, -m), name="agree", seed=3)])[0] for sim in SIMS]
    for t, (a, b) in enumerate(zip(out[0]["tiles"], out[1]["tiles"])):
        problems = diff_runs(a, b, tuple(SIMS))
        assert not problems, f"tile {t}:\n" + "\n".join(problems)


@pytest.mark.parametrize("simulator", FAST_SIM)
def test_long_run_hac_error_and_buffers(simulator):
    """> 100,000 cycles at +max_ppm against -max_ppm, vectors spread over the whole run so
    that every RUNTIME_DESKEW matters: HAC error within HAC_ERROR_MAX, buffers never over-
    or underflow, trace as predicted."""
    sched = exchange(CFG, 2, per_link=24, spread=4400, seed=11)
    assert sched.predicted_cycles(0) > 100_000
    programs = sched.programs()
    gold = archmodel.run_system(programs, sched.topo.peer)
    m = CFG.max_ppm
    res = system(simulator).run([system_run(programs, (m, -m), name="long", seed=21, sample_every=32)],
                                name="long")[0]
    assert_clean(res, sched, gold)
    assert res["samples"] > 3000
    stalls = [t["c2c"]["stalled_cycles"] for t in res["tiles"]]
    print(f"\n{simulator}: {res['tiles'][0]['cycles']} cycles, HAC error {res['hac_error'][0]:+.3f}.."
          f"{res['hac_error'][1]:+.3f} ({res['samples']} samples), program skew {res['sac_skew'][0]:+.2f}.."
          f"{res['sac_skew'][1]:+.2f}, rx level {res['rx_level']}, "
          f"elastic {res['elastic_level']}, stalled {stalls}, wall {res['wall_run_s']:.1f} s")


@pytest.mark.parametrize("simulator", FAST_SIM)
def test_outside_the_specification_is_flagged(simulator):
    """Clocks 5x beyond max_ppm, or a program without its RUNTIME_DESKEWs, raise a sticky
    fault the host reads (late / underflow / overflow / lock lost); a clean run in the same
    simulator session afterwards (the system testbench resets the tiles between runs)
    raises none and is exact."""
    sched = short_exchange()
    programs = sched.programs()
    gold = archmodel.run_system(programs, sched.topo.peer)
    far = 5 * CFG.max_ppm
    drifting = exchange(CFG, 2, per_link=8, spread=3000, seed=7)
    bare = without_runtime_deskews(drifting.programs())
    m = CFG.max_ppm
    # Drift beyond what one HAC update interval absorbs: more than HAC_ERROR_MAX cycles
    # between two SYNCs.
    lost = round(1e6 * 1.5 * c2c.HAC_ERROR_MAX / CFG.sync_interval / 2)
    res = system(simulator).run([
        system_run(programs, (far, -far), name="beyond-ppm", seed=1),
        system_run(bare, (m, -m), name="no-runtime-deskew", seed=2),
        system_run(programs, (lost, -lost), name="lock-lost", seed=3),
        system_run(programs, (m, -m), name="clean-after-faults", seed=4),
    ], name="faults")
    *res, clean = res
    for r in res:
        flags = [Status(t["status"] & LINK_FAULTS) for t in r["tiles"]]
        assert any(flags), f"run {r['name']}: no fault flag set, STATUS {[hex(t['status']) for t in r['tiles']]}"
        print(f"\n{simulator} {r['name']}: {flags}")
    assert res[0]["tiles"][1]["c2c"]["late"]          # the slow child falls behind its HAC
    assert not res[0]["tiles"][1]["c2c"]["lock_lost"]  # 5x max_ppm still within one interval
    child = res[2]["tiles"][1]["c2c"]
    assert child["lock_lost"] and child["locked"], child
    assert res[2]["tiles"][1]["status"] & Status.HAC_LOCK_LOST
    assert_clean(clean, sched, gold)
    assert not any(t["status"] & LINK_FAULTS for t in clean["tiles"]), [hex(t["status"]) for t in clean["tiles"]]


def test_wire_bit_flips(simulator):
    """Single-bit flips injected on the wire are corrected and counted (the trace is still
    exact); double flips are flagged uncorrectable; a clean run after them in the same
    session is exact and flags nothing."""
    sched = short_exchange()
    programs = sched.programs()
    gold = archmodel.run_system(programs, sched.topo.peer)
    fb = c2c.flit_bits(CFG)
    rng = random.Random(f"flips-{simulator}")
    single = [{"tile": t, "link": 0, "mask": 1 << rng.randrange(1, fb), "after_cycles": 1000 * (1 - t),
               "count": 3} for t in range(2)]
    i, j = rng.sample(range(1, fb), 2)
    double = [{"tile": 1, "link": 0, "mask": (1 << i) | (1 << j), "after_cycles": 0, "count": 2}]
    res = system(simulator).run([
        system_run(programs, (300, -200), name="single-flips", seed=4, inject=single),
        system_run(programs, (-300, 200), name="double-flips", seed=5, inject=double),
        system_run(programs, (200, -300), name="clean-after-flips", seed=6),
    ], name="flips")
    one, two, clean = res
    assert one["injected"] == [3, 3]
    problems = check_tiles(one, sched, gold)
    assert not any(problems), problems
    for t in range(2):
        link = one["tiles"][1 - t]["c2c"]["links"][0]       # tile t's flips arrive at the other tile
        assert link["corrected"] == 3 and link["uncorrected"] == 0 and not link["uncorrectable"], link
    assert two["injected"] == [2]
    link = two["tiles"][0]["c2c"]["links"][0]
    assert link["uncorrectable"] and link["uncorrected"] == 2, link
    assert two["tiles"][0]["status"] & Status.LINK_UNCORRECTABLE
    assert_clean(clean, sched, gold)
    assert not any(t["status"] & LINK_FAULTS for t in clean["tiles"]), [hex(t["status"]) for t in clean["tiles"]]


@pytest.mark.parametrize("kind, H, I, batch", [("swiglu", 8, 16, 1), ("classic", 12, 20, 2), ("classic", 12, 40, 2)])
def test_tray_ffn_on_two_tiles(simulator, kind, H, I, batch):
    """The tray compiler's FFN (``firmware_gen/compiler/tray.py``: SENDM multicast of h, RECV into
    the SXM, W2 over all h blocks) on two tiles at +-max_ppm: every MEM write (y bit-exact)
    and cycle count as the compiler predicted and the golden model computes.  In the
    12x40 case the sender's h is paced so that no receive buffer holds more than
    ``rx_depth`` vectors."""
    from firmware_gen.compiler.ffn_example import example_ffn
    from lpu_arch.topology import Topology
    from firmware_gen.compiler.tray import compile_ffn_tray
    from sim.harness.scoreboard import check_run

    ex = example_ffn(kind, H, I, batch, seed=2)
    programs, man = compile_ffn_tray(ex.spec, ex.x_int8, CFG, 2)
    assert programs[0].config == CFG
    assert any(i.op.name == "SENDM" for i in programs[0].queues["C2C_W"])
    gold = archmodel.run_system(programs, Topology(2).peer, man.min_distance)
    m = CFG.max_ppm
    res = system(simulator).run([system_run(programs, (-m, m), name=f"tray-{kind}", seed=9)], name="tray")[0]
    for t, obs in enumerate(res["tiles"]):
        problems = check_run(obs, gold[t], man.tile[t].writes, man.tile[t].cycles,
                             predicted_busy=man.tile[t].busy)
        assert not problems, f"tile {t}:\n" + "\n".join(problems)
        assert not obs["status"] & LINK_FAULTS
    assert_wall(programs, res)


@pytest.mark.parametrize("tiles", [4, pytest.param(8, marks=pytest.mark.long)])
def test_all_to_all_tiles(tiles):
    """4 and 8 tiles, all-to-all, every link its own latency and every tile its own clock
    (a random ppm within the specification and a random phase): the tray FFN (an FFN
    larger than one tile's SRAM, h multicast with SENDM on links of both C2C slices) and
    vectors between every pair, as the golden model and the schedulers predict.  8 tiles
    (``make test-long``) on each simulator, every tile's trace, cycle count and busy
    counters identical across them; 4 tiles on ``ONE_SIM`` (a 4-tile Verilator build
    takes over three minutes; the 2-tile tests run the same HDL on both)."""
    import dataclasses

    from firmware_gen.compiler import CompileError
    from firmware_gen.compiler.ffn import compile_ffn
    from firmware_gen.compiler.ffn_example import example_ffn
    from lpu_arch.topology import Topology
    from firmware_gen.compiler.tray import compile_ffn_tray
    from sim.harness.runner import SystemSim
    from sim.harness.scoreboard import check_run

    cfg = dataclasses.replace(CFG, links=tiles - 1)
    topo = Topology(tiles)
    rng = random.Random(f"all-to-all-{tiles}")
    lat = {p: rng.randint(cfg.link_latency_min, cfg.link_latency_max) for p in topo.pairs}
    ppm = [rng.uniform(-cfg.max_ppm, cfg.max_ppm) for _ in range(tiles)]
    H, I = {4: (16, 32), 8: (32, 64)}[tiles]
    ex = example_ffn("swiglu", H, I, 1, seed=tiles)
    with pytest.raises(CompileError, match="does not fit the tile's SRAM"):
        compile_ffn(ex.spec, ex.x_int8, dataclasses.replace(CFG, links=0))
    tray, man = compile_ffn_tray(ex.spec, ex.x_int8, cfg, tiles)
    tray_gold = archmodel.run_system(tray, topo.peer, man.min_distance)
    sched = exchange(cfg, tiles, per_link=2, spread=900, seed=tiles)
    seen = {}
    for sim in (SIMS if tiles == 8 else ONE_SIM):
        res = SystemSim(cfg, tiles, lat, sim).run([
            system_run(tray, ppm, name="tray", seed=1),
            system_run(sched.programs(), ppm[::-1], name="exchange", seed=2)], name=f"tiles{tiles}")
        for t, obs in enumerate(res[0]["tiles"]):
            problems = check_run(obs, tray_gold[t], man.tile[t].writes, man.tile[t].cycles,
                                 predicted_busy=man.tile[t].busy)
            assert not problems and not obs["status"] & LINK_FAULTS, f"{sim}: tray tile {t}: {problems}"
        assert_wall(tray, res[0])
        assert_clean(res[1], sched, archmodel.run_system(sched.programs(), topo.peer))
        for t in range(1, tiles):      # every child measured its own link's latency (docs/c2c.md)
            assert res[1]["tiles"][t]["c2c"]["latency"] - lat[(0, t)] in (4, 5)
        seen[sim] = res
    if len(seen) == 2:
        a, b = seen.values()
        problems = [f"{ra['name']} tile {t}: {p}" for ra, rb in zip(a, b)
                    for t, (oa, ob) in enumerate(zip(ra["tiles"], rb["tiles"])) for p in diff_runs(oa, ob, tuple(seen))]
        assert not problems, "the simulators disagree:\n" + "\n".join(problems)
