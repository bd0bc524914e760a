"""The MoE layer on the RTL: 4 and 8 tiny tiles all-to-all (expert parallelism; and tensor
parallelism, tp and tps, on 4; tps also for a batch of 2 tokens, whose shared expert's h
leaves the accumulators by flushes, ``moe_tray.MoeTray.flushed``), every tile on its own clock
(random ppm and phase), on each simulator.  For routings within capacity (spread evenly,
tiles at capacity, a random one, the router's own) every tile's cycle count is the same
for every routing and equal to the compiler's prediction, every write as predicted, the
busy counters as predicted (the unused slots' READs skip), every expert's output bit-exact
against ``moe.moe_int``; a routing beyond capacity runs in rounds of the same program and
cycles; the traces are identical on Verilator and Icarus (``make test`` runs the 4-tile
layers on Icarus alone, ``make test-long`` on both and the 8-tile layer).

The builds are those of ``test_c2c_sim.test_all_to_all_tiles`` (same tile, same wire
latencies), so these runs add no build."""

import dataclasses
import random

import pytest

from sim.flows.c2c import c2c_config
from sim.harness.scoreboard import diff_runs

from tests.helpers import ONE_SIM, SIMS

pytestmark = pytest.mark.sim

# (mapping, tiles[, tokens]) -> the layer: (E, top_k, shared, H, I, tokens, capacity)
# tps: one intermediate block per tile and two output blocks per expert, so that its order differs from tp's.
LAYERS = {("ep", 4): (8, 2, 1, 8, 8, 2, 1), ("ep", 8): (24, 4, 1, 8, 8, 1, 2), ("tp", 4): (4, 2, 1, 8, 8, 1, None),
          ("tps", 4): (3, 2, 1, 8, 16, 1, None), ("tps", 4, 2): (3, 2, 1, 8, 16, 2, None)}


# make test runs the 4-tile layers on ONE_SIM; make test-long runs them on every simulator
# and compares (with the 8-tile layer): only these tests use the 4-tile system's build.
CASES = [pytest.param(key, ONE_SIM, id=f"{'-'.join(map(str, key))}-{'+'.join(ONE_SIM)}")
         for key in LAYERS if key[1] == 4] + \
    [pytest.param(key, SIMS, marks=pytest.mark.long, id=f"{'-'.join(map(str, key))}-{'+'.join(SIMS)}")
     for key in LAYERS if key[1] == 8 or len(SIMS) > 1]


@pytest.mark.parametrize("key, sims", CASES)
def test_moe_routings_on_the_rtl(key, sims):
    from lpu_arch.topology import Topology
    from sim.flows.moe import compile_moe_example, run_moe_on_rtl

    mapping, tiles = key[:2]
    cfg = dataclasses.replace(c2c_config(), links=tiles - 1)
    rng = random.Random(f"all-to-all-{tiles}")          # the wire latencies of test_all_to_all_tiles' build
    lat = {p: rng.randint(cfg.link_latency_min, cfg.link_latency_max) for p in Topology(tiles).pairs}
    clocks = random.Random(f"moe-{tiles}")
    ppm = [clocks.uniform(-cfg.max_ppm, cfg.max_ppm) for _ in range(tiles)]
    E, k, S, H, I, T, c = LAYERS[key]
    routings = {"ep": ("spread", "packed", "random", "router", "over"), "tp": ("random", "router"),
                "tps": ("spread", "packed", "random", "router")}[mapping]
    cm = compile_moe_example(E=E, top_k=k, shared=S, H=H, I=I, tokens=T, tiles=tiles, capacity=c, seed=tiles,
                             cfg=cfg, routings=routings, mapping=mapping)
    assert cm.mt.flushed == (mapping == "tps" and T > 1)
    if mapping == "ep":
        assert len(cm.rounds("over")) == 2               # beyond capacity: two rounds
        assert all(len(cm.rounds(n)) == 1 for n in ("spread", "packed", "random"))
    predicted = cm.mt.manifest().cycles
    seen = {}
    for sim in sims:
        report = run_moe_on_rtl(cm, sim, latency=lat, ppm=ppm)
        bad = [f"{r['routing']} round {r['round']}: {(r['problems'] or ['outputs'])[0]}"
               for r in report.rows if not r["passed"]]
        assert not bad, f"{sim}: " + "; ".join(bad)
        assert all(r["cycles"] == predicted for r in report.rows), sim
        seen[sim] = report
    if len(seen) == 2:
        a, b = seen.values()
        problems = [f"{r['routing']}/{r['round']} tile {t}: {p}" for r, ra, rb in zip(a.rows, a.observed, b.observed)
                    for t, (oa, ob) in enumerate(zip(ra, rb))
                    for p in diff_runs(oa, ob, tuple(seen))]
        assert not problems, "the simulators disagree:\n" + "\n".join(problems)
