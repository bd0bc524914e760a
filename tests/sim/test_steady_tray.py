"""A tray that never stops, 1,100 runs long, on Verilator (docs/tray.md, "The steady state";
``sim.flows.steady``, ``sim/tb/steady_tray.py``): 8 tiny tiles all-to-all, each on its own
clock within +-``max_ppm`` (the root at +max_ppm, tile 1 at -max_ppm), every link its own
wire latency; one tray FFN loaded once, then one run per input back to back with no reset,
clock restart or relock.  Every run is checked against the golden model and the compiler
(every tile's writes, cycles and busy counters, y bit-exact, the wall cycles
``c2c.wall_cycles`` predicts, the HAC within ``c2c.HAC_ERROR_MAX``).  The first 1,000 runs
are clean; flits flipped into the last 100 (between runs and during them) are each
reported for the run they hit and no other.

The build is ``test_c2c_sim.test_all_to_all_tiles``'s 8-tile one (same tile, same wire
latencies), so this test adds no build."""

import dataclasses
import random

import pytest

from lpu_arch import c2c
from lpu_arch.hostmap import Status
from lpu_arch.topology import Topology
from sim.flows.c2c import c2c_config
from sim.flows.steady import STEADY_FFN, expected_reports, extreme_ppm, run_steady_tray

from tests.helpers import FAST_SIM

pytestmark = [pytest.mark.sim, pytest.mark.long]

TILES = 8
CLEAN = 1000            # clean runs, back to back
FAULTY = 100            # then runs with flits flipped into a few of them
TWO = (1 << 3) | (1 << 4)      # two payload bits (flit_fields: valid, 2 kind bits, then the payload)
KIND = (1 << 1) | (1 << 2)     # both kind bits (a SYNC then decodes as a PROBE)
# Between runs only the root's links carry flits (a SYNC to each child every sync_interval).
INJECT_BETWEEN = [
    {"before_run": CLEAN + 10, "tile": 0, "link": 2, "mask": TWO},        # uncorrectable, tile 3
    {"before_run": CLEAN + 25, "tile": 0, "link": 6, "mask": 1 << 5},     # corrected: not a fault
    {"before_run": CLEAN + 41, "tile": 0, "link": 0, "mask": KIND},       # uncorrectable, tile 1 (-max_ppm)
    {"before_run": CLEAN + 85, "tile": 0, "link": 3, "mask": TWO},        # uncorrectable, tile 4
]
INJECT_DURING = [
    {"run": CLEAN + 40, "tile": 3, "link": 5, "mask": TWO, "after_cycles": 20},     # a DATA flit to tile 6
    {"run": CLEAN + 55, "tile": 6, "link": 1, "mask": 1 << 9, "after_cycles": 20},  # corrected, tile 1
    {"run": CLEAN + 70, "tile": 0, "link": 4, "mask": TWO, "after_cycles": 40},     # root to tile 5
]


@pytest.fixture(scope="module")
def steady():
    cfg = dataclasses.replace(c2c_config(), links=TILES - 1)
    rng = random.Random(f"all-to-all-{TILES}")      # the wire latencies of test_all_to_all_tiles' build
    lat = {p: rng.randint(cfg.link_latency_min, cfg.link_latency_max) for p in Topology(TILES).pairs}
    ppm = extreme_ppm(cfg, TILES, f"steady-{TILES}")
    report = run_steady_tray(cfg, TILES, lat, ppm, CLEAN + FAULTY, FAST_SIM[0], x_seed=TILES, phase_seed=TILES,
                             inject_between=INJECT_BETWEEN, inject_during=INJECT_DURING)
    print(f"\nsteady tray: {report['runs']} runs of SwiGLU {STEADY_FFN['H']}x{STEADY_FFN['I']} on {TILES} tiles, "
          f"ppm {[round(p, 1) for p in ppm]}, wire latencies {min(lat.values())}..{max(lat.values())}; "
          f"wall cycles {report['root_wall_cycles']} on the root's HAC, {report['wall_off']} runs by their "
          f"offset on the last tile's own HAC (c2c.wall_cycles {report['predicted_wall']}), "
          f"HAC error {report['hac_error_runs']} during runs, {report['hac_error_session']} over the session "
          f"(budget +-{report['budget']}); faults reported in runs {sorted(report['faults'])}, "
          f"expected {sorted(report['faults_expected'])}; {report['seconds']} s simulated, "
          f"{report['check_seconds']} s checked")
    return {**report, "cfg": cfg, "lat": lat}


def test_a_thousand_clean_runs(steady):
    """Runs 0 to 999: every tile's clock within +-max_ppm (both extremes present), every
    wire latency within the configuration's range; every run's writes, cycles, busy
    counters and y as predicted, no fault raised, the HAC locked and within
    ``c2c.HAC_ERROR_MAX`` of the root's throughout (sampled during every run and over the
    whole session, and the last SYNC's correction of every child after every run).  The
    wall cycles on the root's HAC (the one the host reads) are exactly ``c2c.wall_cycles``
    of the compiled cycles in every run; counted on each tile's own HAC (``check_wall``),
    a child whose HAC a SYNC moved during the run ends up to the HAC error later."""
    cfg, r = steady["cfg"], steady
    m = cfg.max_ppm
    assert max(r["ppm"]) == m and min(r["ppm"]) == -m and all(-m <= p <= m for p in r["ppm"])
    assert all(cfg.link_latency_min <= v <= cfg.link_latency_max for v in steady["lat"].values())
    clean = r["per_run"][:CLEAN]
    assert len(clean) == CLEAN
    bad = [p for run in clean for p in run["problems"]]
    assert not bad, "\n".join(map(str, bad[:20]))
    assert all(run["faults"] == [] and run["y_exact"] for run in clean)
    budget, wall = c2c.HAC_ERROR_MAX, r["predicted_wall"]
    assert {run["root_wall"] for run in clean} == {wall}
    assert all(wall <= run["wall"] <= wall + budget for run in clean)
    assert {run["cycles"] for run in clean} == set(r["compiled_cycles"])
    assert max(abs(e) for run in clean for e in run["hac_error"]) <= budget
    assert max(abs(e) for e in r["hac_error_session"]) <= budget and r["session_samples"] > CLEAN
    assert max(abs(e) for e in r["hac_error_register"]) <= budget
    assert not [p for p in r["problems"] if not p.startswith("run ")], r["problems"]


def test_flipped_bits_reported_for_the_run_they_hit(steady):
    """Runs 1000 to 1099: a double flip between runs is reported by the STATUS read before
    arming the next run, on the receiving tile; a double flip during a run by that run's
    own STATUS (LINK_UNCORRECTABLE on the receiving tile, the flit counted uncorrectable on
    its link); a single flip is corrected and counted, not a fault; every other run (the one
    right after a fault included) clean: no fault, y bit-exact, as predicted."""
    r = steady
    want, _ = expected_reports(TILES, INJECT_BETWEEN, INJECT_DURING)
    assert len(want) == 5            # four uncorrectable flits reported, the corrected ones not
    assert r["faults"] == want, (r["faults"], want)
    assert all(len(f) == 1 and f[0][2] == (Status.LINK_UNCORRECTABLE.name,) for f in want.values())
    faulty = r["per_run"][CLEAN:]
    assert len(faulty) == FAULTY
    bad = [p for run in faulty for p in run["problems"]]
    assert not bad, "\n".join(map(str, bad[:20]))
    corrupt = set(r["corrupt_runs"])
    assert all(run["y_exact"] for run in faulty if run["n"] not in corrupt)
    assert {run["root_wall"] for run in faulty} == {r["predicted_wall"]}
