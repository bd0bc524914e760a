"""The scheduler against the architectural model (no HDL): predictions and clear errors."""

import numpy as np
import pytest

from lpu_arch import TileConfig
from lpu_arch.isa import EAST, WEST, Instr

from firmware_gen.golden import archmodel
from firmware_gen.compiler.schedule import Scheduler, ScheduleError
from firmware_gen.scoreboard import compare, golden_observed, promise

from tests.helpers import random_schedule


@pytest.mark.parametrize("preset, n", [("tiny", 12), ("default", 250)])
@pytest.mark.parametrize("seed", range(3))
def test_predictions_match_architectural_model(preset, n, seed):
    cfg = TileConfig.preset(preset)
    s = random_schedule(cfg, n, seed)
    gold = archmodel.run(s.program())
    problems = compare(golden_observed(gold), promise(s.predicted_writes(), s.predicted_cycles()))
    assert not problems, "\n".join(problems)
    for name in cfg.mem_names:       # copy semantics (in program order) == final memory
        assert (s._value[name] == gold.memory[name]).all()


def test_write_cycle_is_distance_plus_latency():
    cfg = TileConfig.default()
    s = Scheduler(cfg)
    x = s.copy("MEM_W3", 0, "MEM_E3", 0)
    assert x.write_cycle == x.read_cycle + 1 + (cfg.position("MEM_E3") - cfg.position("MEM_W3"))
    y = s.copy("MEM_E3", 5, "MEM_W3", 5)
    assert y.dir == 1 and y.write_cycle == y.read_cycle + 1 + y.distance


def test_dependency_orders_transfers():
    cfg = TileConfig.tiny()
    s = Scheduler(cfg)
    s.load("MEM_W1", 0, np.full((1, cfg.lanes), 7))
    a = s.copy("MEM_W1", 0, "MEM_E1", 3)
    b = s.copy("MEM_E1", 3, "MEM_W0", 9)      # must read after a's write
    assert b.read_cycle > a.write_cycle
    gold = archmodel.run(s.program())
    assert gold.memory["MEM_W0"][9].tolist() == [7] * cfg.lanes


def test_two_writes_one_stream_one_position_one_cycle():
    cfg = TileConfig.default()
    s = Scheduler(cfg)
    s.copy("MEM_W3", 0, "MEM_E3", 0, stream=2, cycle=0)
    # MEM_W0 sits on the path; a READ there on cycle 3 would drive E2 where the first value passes.
    with pytest.raises(ScheduleError, match=r"stream E2 at VXM on cycle 5 already carries a value of transfer #0"):
        s.copy("MEM_W0", 1, "MEM_E2", 1, stream=2, cycle=3)
    # Unpinned, the scheduler picks another stream or cycle.
    x = s.copy("MEM_W0", 1, "MEM_E2", 1)
    assert (x.stream, x.read_cycle) != (2, 3)


def test_issue_slot_conflict_is_named():
    s = Scheduler(TileConfig.tiny())
    s.copy("MEM_W1", 0, "MEM_E1", 0, count=4, cycle=0)
    with pytest.raises(ScheduleError, match=r"MEM_W1 already issues an instruction on cycle 2"):
        s.copy("MEM_W1", 8, "MEM_W0", 8, cycle=2)


@pytest.mark.parametrize("args, words", [
    (("MEM_W1", 62, "MEM_E1", 0, 4), r"source MEM_W1\[62:66\] is outside the slice: .* 0..63"),
    (("MEM_W1", 0, "MEM_E1", 63, 2), r"destination MEM_E1\[63:65\] is outside"),
    (("MEM_W1", 0, "VXM", 0, 1), "'VXM' is not a MEM slice"),
    (("MEM_W1", 0, "MEM_W1", 4, 1), "copy within one slice"),
])
def test_bad_copies(args, words):
    with pytest.raises(ScheduleError, match=words):
        Scheduler(TileConfig.tiny()).copy(*args)


def test_pinned_stream_out_of_range():
    with pytest.raises(ScheduleError, match="stream 9 does not exist; the tile has 4"):
        Scheduler(TileConfig.tiny()).copy("MEM_W1", 0, "MEM_E1", 0, stream=9)


def test_runs_reserve_exactly_as_single_reads():
    """``take_run``/``run_free`` (a weight window's READs in one pass) decide and record
    exactly what ``take_slot``/``take_drives``/``drives_free`` do one READ at a time."""
    from firmware_gen.compiler.reserve import Reservations, ReservationError
    cfg = TileConfig.default()
    rng = np.random.default_rng(1)
    one, run = Reservations(cfg), Reservations(cfg)
    mems, mxm = cfg.mem_names, cfg.position("MXM_W")
    for k in range(300):
        m = mems[rng.integers(len(mems))]
        ins = Instr.read(int(rng.integers(cfg.streams)), EAST if cfg.position(m) < mxm else WEST, 0)
        cycles = sorted(set(rng.integers(0, 60, size=rng.integers(1, 4)).tolist()))
        free = all(one.slot_free(m, c) and one.drives_free(m, c, ins, mxm) for c in cycles)
        assert run.run_free(m, cycles, ins, mxm) == free
        if free:
            for c in cycles:
                one.take_slot(m, c, f"r{k}")
                one.take_drives(m, c, ins, mxm, f"r{k}")
            run.take_run(m, cycles, ins, mxm, f"r{k}")
        else:
            with pytest.raises(ReservationError, match=rf"\br{k}\b"):
                run.take_run(m, cycles, ins, mxm, f"r{k}")
            run = Reservations(cfg)          # (a failed take leaves a partial run: start again from one's state)
            run.slots = {n: dict(s) for n, s in one.slots.items()}
            run._occ = {key: list(v) for key, v in one._occ.items()}
            run.last_issue, run.last_drive = one.last_issue, one.last_drive
    assert run.slots == one.slots and run._occ == one._occ
    assert (run.last_issue, run.last_drive) == (one.last_issue, one.last_drive)
