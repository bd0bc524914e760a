"""The tile in RTL simulation, on every simulator: values and cycles of every MEM write
against the golden model and the compiler's prediction, rows read back from the SRAM
against the golden model's final memory, and the sticky fault flags."""

import numpy as np
import pytest

from lpu_arch import TileConfig

from firmware_gen.golden import archmodel
from firmware_gen.compiler.ffn import compile_ffn
from firmware_gen.compiler.ffn_example import example_ffn
from firmware_gen.golden.numerics import ffn_int
from lpu_arch.hostmap import Status
from lpu_arch.isa import Instr, Op
from firmware_gen.program import Program
from firmware_gen.compiler.schedule import Scheduler
from sim.harness.runner import job, observed_events
from sim.harness.scoreboard import check_run, diff_runs, output_rows

from tests.helpers import SIMS, get_sim, random_schedule

pytestmark = pytest.mark.sim


def run_and_check(cfg, simulator, sched=None, program=None, read_back=None):
    program = program or sched.program()
    gold = archmodel.run(program)
    res = get_sim(cfg, simulator).run([job(program, read_back=read_back)])[0]
    problems = check_run(res, gold,
                         sched.predicted_writes() if sched else None,
                         sched.predicted_cycles() if sched else None)
    assert not problems, "\n".join(problems)
    return res, gold


def test_copy_between_every_pair_of_mem_slices(simulator):
    cfg = TileConfig.default()
    rng = np.random.default_rng(7)
    s = Scheduler(cfg)
    for name in cfg.mem_names:
        s.load(name, 0, rng.integers(0, 256, (64, cfg.lanes)))
    pairs = [(a, b) for a in cfg.mem_names for b in cfg.mem_names if a != b]
    for i, (a, b) in enumerate(pairs):
        s.copy(a, i % 64, b, 64 + i, count=1)
    east = sum(x.dir == 0 for x in s.transfers)
    assert east == len(pairs) // 2          # both directions, every pair
    res, _ = run_and_check(cfg, simulator, s)
    assert len(res["events"]) == len(pairs)


def test_repeat_stride_sweeps(simulator):
    """REPEAT with positive and negative strides and delays > 1, checked against the ISA's
    timing rules written out by hand (and against the golden model)."""
    cfg = TileConfig.default()
    dist = cfg.position("MEM_E2") - cfg.position("MEM_W0")
    first_write = 1 + dist                     # READ at 0, READ_LATENCY 1, then the distance
    text = f"""
    [MEM_W0]
        READ E1, 40
        REPEAT 10, 3, -2        # reads 40, 38, ..., 20 on cycles 0, 3, ..., 30
    [MEM_E2]
        NOP {first_write}
        WRITE E1, 100
        REPEAT 10, 3, +5        # writes 100, 105, ..., 150
    [MEM_E3]
        READ W4, 7
        REPEAT 20, 1, +1        # a back-to-back sweep west, 7..27
    [MEM_W3]
        NOP {1 + cfg.position('MEM_E3') - cfg.position('MEM_W3')}
        WRITE W4, 200
        REPEAT 20, 1, +1
    """
    prog = Program.assemble(cfg, text)
    rng = np.random.default_rng(3)
    for name in ("MEM_W0", "MEM_E3"):
        prog.set_memory(name, rng.integers(0, 256, (cfg.mem_depth, cfg.lanes)))
    res, _ = run_and_check(cfg, simulator, program=prog)
    ev = {(s, a): (c, d) for c, s, a, d in observed_events(res)}
    for k in range(11):
        c, d = ev[("MEM_E2", 100 + 5 * k)]
        assert c == first_write + 3 * k
        assert list(d) == prog.memory["MEM_W0"][40 - 2 * k].tolist()
    w_first = 1 + cfg.position("MEM_E3") - cfg.position("MEM_W3")
    for k in range(21):
        c, d = ev[("MEM_W3", 200 + k)]
        assert c == w_first + k
        assert list(d) == prog.memory["MEM_E3"][7 + k].tolist()


@pytest.mark.parametrize("seed", [11, 12])
def test_random_transfers_match_model(simulator, seed):
    cfg = TileConfig.default()
    s = random_schedule(cfg, 220, seed)
    assert len(s.transfers) >= 200
    rows = {n: list(range(0, cfg.mem_depth, 17)) for n in cfg.mem_names[:2]}
    res, gold = run_and_check(cfg, simulator, s, read_back=rows)   # the scoreboard compares them
    assert {n: len(v) for n, v in res["read_back"].items()} == {n: len(r) for n, r in rows.items()}


def test_tiny_configuration(simulator):
    cfg = TileConfig.tiny()
    run_and_check(cfg, simulator, random_schedule(cfg, 12, 5))


def test_illegal_opcode_and_address_fault_are_flagged(simulator):
    """A faulty program, then a clean one, in one simulator session (no reset between the
    jobs): after the first, ILLEGAL_OP and ADDR_FAULT are set with the slices that raised
    them; the next start clears them (they are sticky until then), and the clean program,
    a small FFN that runs the VXM and MEM_E1 again, is exact in every check."""
    cfg = TileConfig.tiny()
    halt = Instr.halt().encode()
    bad_read = Instr(Op.READ, stream=0, addr=cfg.mem_depth + 3).encode()   # beyond depth
    images = {n: [halt] for n in cfg.slice_names}
    images["VXM"] = [Instr.nop(2).encode(), 45, halt]          # unknown opcode 45
    images["SXM_E"] = [Instr(Op.READ).encode(), halt]           # READ is not an SXM instruction
    images["MEM_E1"] = [bad_read, halt]
    ex = example_ffn("swiglu", 4, 4, 1, seed=3)
    prog, man = compile_ffn(ex.spec, ex.x_int8, cfg)
    assert man.busy["VXM"] and man.busy["MEM_E1"]      # the clean job uses the faulted slices
    faulty, clean = get_sim(cfg, simulator).run([{"name": "faults", "images": images},
                                                 job(prog, name="clean", read_back=output_rows(man))],
                                                name="sticky")
    assert faulty["status"] & Status.DONE
    assert faulty["status"] & Status.ILLEGAL_OP and faulty["status"] & Status.ADDR_FAULT
    assert faulty["illegal"] == (1 << cfg.position("VXM")) | (1 << cfg.position("SXM_E"))
    assert faulty["addr_fault"] == 1 << cfg.mem_names.index("MEM_E1")
    # Sticky until the next start: the clean job's start cleared them, and it ran exactly.
    assert clean["status"] & Status.DONE
    assert not clean["status"] & (Status.ILLEGAL_OP | Status.ADDR_FAULT), hex(clean["status"])
    assert not clean["illegal"] and not clean["addr_fault"], (hex(clean["illegal"]), hex(clean["addr_fault"]))
    problems = check_run(clean, archmodel.run(prog), manifest=man, y=ffn_int(ex.spec, ex.x_int8))
    assert not problems, "\n".join(problems)


@pytest.mark.skipif(len(SIMS) < 2, reason="needs both simulators")
def test_simulators_agree_cycle_for_cycle():
    cfg = TileConfig.default()
    prog = random_schedule(cfg, 200, 99).program()
    runs = [get_sim(cfg, sim).run([job(prog)])[0] for sim in SIMS]
    problems = diff_runs(runs[0], runs[1], tuple(SIMS))
    assert not problems, "\n".join(problems)
