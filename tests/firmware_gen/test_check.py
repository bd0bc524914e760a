"""The static program checker (firmware_gen/check.py): hand-written programs with lost
values, undriven reads, double drives, bad operands, MXM faults and mismatched links are
reported with the slices, stream, position and cycle; every program the compilers write
is clean; and the checker's diagonal walk agrees with a cycle-by-cycle model of the stream
registers, which itself agrees with the golden model."""

import dataclasses
from collections import defaultdict

import numpy as np
import pytest

from lpu_arch.topology import TILE_COUNTS
from lpu_arch import TileConfig, c2c
from lpu_arch.effects import Access, Effects, effects
from lpu_arch.isa import C2C_LATENCY, EAST, READ_LATENCY, WEST, Instr, MMFlag, Op, SxmFlag, VopFlag
from lpu_arch.topology import Topology

from firmware_gen import check

from firmware_gen.golden import archmodel
from firmware_gen.check import (DOUBLE, LINK_EARLY, LINK_OVERFLOW, LINK_OVERRUN, LINK_UNMATCHED, MXM_STATE,
                                PROGRAM, REPLACED, UNDEFINED, UNDRIVEN, CheckError, Problem, check_program, check_system,
                                require_clean)
from firmware_gen.compiler.ffn import StoreH, compile_ffn
from firmware_gen.compiler.ffn_example import example_ffn
from firmware_gen.program import Program, ProgramError
from firmware_gen.compiler.tray import compile_ffn_tray

from tests.helpers import LOST_VALUE_ASM, random_schedule, sxm_cases, sxm_program

TINY = TileConfig.tiny()


def rules(problems):
    return [p.rule for p in problems]


def loaded(prog):
    """``prog`` with a memory image (bytes 1) from the first row each READ names on, so
    that only the rule a test is about can fail (SRAM powers up random: rule undefined-read)."""
    for name in prog.config.mem_names:
        for ins in prog.queues.get(name, []):
            if ins.op == Op.READ:
                prog.memory[name][ins.addr:] = 1        # (the rows a REPEAT reads too)
    return prog


# ---- the issue's example and its neighbours ----------------------------------------------
ISSUE = LOST_VALUE_ASM


def test_the_issue_example_reports_the_value_replaced_before_any_read():
    prog = loaded(Program.assemble(TINY, ISSUE))
    pos = TINY.position
    # By hand (isa.py): MEM_W1's READ issues on cycle 0 and drives E0 at MEM_W1 on cycle
    # 0 + READ_LATENCY; east-flowing, it is at MEM_W0 (one position east) one cycle later.
    # MEM_W0's READ issues on cycle 1 and drives E0 at MEM_W0 on 1 + READ_LATENCY: the same
    # position on the same cycle, so MEM_W1's value is replaced there, unread.
    t_w1 = 0 + READ_LATENCY
    at_w0 = t_w1 + (pos("MEM_W0") - pos("MEM_W1"))
    assert at_w0 == 1 + READ_LATENCY
    problems = check_program(prog)
    assert len(problems) == 1, problems
    (p,) = problems
    assert (p.rule, p.slices, p.stream, p.position, p.cycle) == (REPLACED, ("MEM_W1", "MEM_W0"), "E0",
                                                                 pos("MEM_W0"), at_w0)
    assert "MEM_W1 'READ E0, 0' (issued on cycle 0)" in p.message
    assert "replaced by MEM_W0 'READ E0, 0' (issued on cycle 1)" in p.message
    assert f"at MEM_W0 (position {pos('MEM_W0')}) on cycle {at_w0}" in p.message
    # The golden model runs it without a complaint: MEM_E0 gets MEM_W0's vector.
    prog.memory["MEM_W1"][0] = 1
    prog.memory["MEM_W0"][0] = 2
    assert archmodel.run(prog).memory["MEM_E0"][5].tolist() == [2] * TINY.lanes


def test_replacing_a_value_after_its_last_reader_is_legal():
    # MEM_W1's value is sampled by MEM_W0, then MEM_E0 drives the same diagonal further
    # east: a stream reused after its value's last reader, as the compiler does.
    prog = loaded(Program.assemble(TINY, """
    [MEM_W1]
        READ E0, 0        # E0 at MEM_W1 on 1, at MEM_W0 on 2, at VXM on 3, at MEM_E0 on 4
    [MEM_W0]
        NOP 2
        WRITE E0, 7       # the last (only) reader: MEM_W0 on cycle 2
    [MEM_E0]
        NOP 3
        READ E0, 3        # drives E0 at MEM_E0 on 4: replaces the value after its reader
    [MEM_E1]
        NOP 5
        WRITE E0, 8       # reads MEM_E0's value
    """))
    assert check_program(prog) == []
    prog.memory["MEM_W1"][0] = 1
    prog.memory["MEM_E0"][3] = 2
    mem = archmodel.run(prog).memory
    assert mem["MEM_W0"][7].tolist() == [1] * TINY.lanes and mem["MEM_E1"][8].tolist() == [2] * TINY.lanes
    # Without MEM_W0's WRITE the same overwrite loses the value.
    prog.queues["MEM_W0"] = []
    (p,) = check_program(prog)
    assert (p.rule, p.slices, p.position, p.cycle) == (REPLACED, ("MEM_W1", "MEM_E0"), TINY.position("MEM_E0"), 4)


def test_a_read_where_nothing_is_driven_is_reported():
    pos = TINY.position
    prog = loaded(Program.assemble(TINY, """
    [MEM_W1]
        READ E1, 0        # east-flowing from MEM_W1: nothing upstream of it on E1
    [MEM_E0]
        NOP 3
        WRITE W2, 0       # nothing drives W2 anywhere
    [SXM_W]
        NOP 2
        TRI E1, row=0     # west of MEM_W1: upstream of the only driver of E1
    """))
    problems = check_program(prog)
    assert rules(problems) == [UNDRIVEN, UNDRIVEN], problems
    tri, write = problems
    assert (tri.slices, tri.stream, tri.position, tri.cycle) == (("SXM_W",), "E1", pos("SXM_W"), 2)
    assert (write.slices, write.stream, write.position, write.cycle) == (("MEM_E0",), "W2", pos("MEM_E0"), 3)
    assert "MEM_E0 'WRITE W2, 0' (issued on cycle 3)" in write.message and "no value is live" in write.message


def test_max_reads_its_with_stream():
    """MAX samples its ``with`` stream as PERM its map: undriven there, it is reported."""
    cfg = TINY.with_overrides(["sxm_max=1"])
    pos = cfg.position
    # MEM_W1's READ (cycle 1) drives W0 at MEM_W1 on cycle 2, at SXM_W one position west on
    # cycle 3; MEM_W0's READ (cycle 0) drives W1 at MEM_W0 on cycle 1, at SXM_W on cycle 3.
    # MAX issues on cycle 3 and drives E2 on cycle 4, which MEM_E0 writes 4 positions east.
    assert pos("MEM_W1") - pos("SXM_W") == 1 and pos("MEM_W0") - pos("SXM_W") == 2
    t_w = 3 + 1 + pos("MEM_E0") - pos("SXM_W")
    text = f"""
    [MEM_W1]
        NOP 1
        READ W0, 0
    [MEM_W0]
        READ W1, 0
    [SXM_W]
        NOP 3
        MAX W0, k=1, with={{with_}}, out=2, flags=OUT_E
    [MEM_E0]
        NOP {t_w}
        WRITE E2, 0
    """
    assert check_program(loaded(Program.assemble(cfg, text.format(with_=1)))) == []
    assert check_program(loaded(Program.assemble(cfg, text.format(with_=0)))) == []    # (W1 runs off the edge)
    (p,) = check_program(loaded(Program.assemble(cfg, text.format(with_=3))))
    assert (p.rule, p.slices, p.stream, p.position, p.cycle) == (UNDRIVEN, ("SXM_W",), "W3", pos("SXM_W"), 3)
    assert "'MAX W0, k=1, with=3, out=2, flags=OUT_E'" in p.message


def test_a_read_on_the_drive_cycle_at_the_drivers_own_position_sees_the_passing_value():
    # MEM_W0's READ drives E0 at MEM_W0 on cycle 1; a WRITE there on cycle 1 samples the
    # passing value, which nothing drove.
    prog = loaded(Program(TINY, {"MEM_W0": [Instr.read(0, EAST, 0), Instr.write(0, EAST, 1)]}))
    (p,) = check_program(prog)
    assert (p.rule, p.slices, p.cycle) == (UNDRIVEN, ("MEM_W0",), 1)


def test_lw_rows_count_as_reads_and_are_reported_once_per_instruction():
    # LW on MXL_W (MXM_W's loader; n=4, 4 lanes) samples west-flowing W0..W3, one row each, on its issue
    # cycle.  Only W0 is driven: by MEM_W1's READ on cycle 0, at MXM_W on
    # READ_LATENCY + (position(MEM_W1) - position(MXM_W)).
    pos = TINY.position
    t_lw = READ_LATENCY + pos("MEM_W1") - pos("MXM_W")
    prog = loaded(Program(TINY, {"MEM_W1": [Instr.read(0, WEST, 0)],
                                 "MXL_W": [Instr.nop(t_lw), Instr.lw(0, WEST, n=4)]}))
    (p,) = check_program(prog)
    assert (p.rule, p.slices, p.stream, p.position, p.cycle) == (UNDRIVEN, ("MXM_W",), "W1", pos("MXM_W"), t_lw)
    assert "reads streams W1, W2, W3 (3 rows)" in p.message
    # n=1: row r samples W0 on cycle t_lw + r; only row 0 finds a value.
    prog = loaded(Program(TINY, {"MEM_W1": [Instr.read(0, WEST, 0)],
                                 "MXL_W": [Instr.nop(t_lw), Instr.lw(0, WEST, n=1)]}))
    (p,) = check_program(prog)
    assert (p.rule, p.stream, p.cycle) == (UNDRIVEN, "W0", t_lw + 1)
    assert f"reads stream W0 (3 rows) at MXM_W (position 0) on cycles {t_lw + 1}..{t_lw + 3}" in p.message
    # A READ per row on consecutive cycles feeds every row: clean.
    prog.queues["MEM_W1"] = [Instr.read(0, WEST, 0), Instr.repeat(TINY.lanes - 1, 1, +1)]
    assert check_program(loaded(prog)) == []


def test_two_drives_of_one_stream_position_and_cycle(monkeypatch):
    # No opcode of today's ISA can do it (one issue per slice per cycle, one latency per
    # slice kind); an effects table where READ also drives its stream one cycle later can.
    def doubled(ins, name, *args):
        e = effects(ins, name, *args)
        if ins.op == Op.READ:
            return Effects(e.reads, e.drives + (Access(ins.dir, ins.stream, READ_LATENCY + 1),))
        return e
    monkeypatch.setattr(check, "effects", doubled)
    prog = Program(TINY, {"MEM_W1": [Instr.read(0, EAST, 0), Instr.read(0, EAST, 1)],
                          "MEM_E0": [Instr.nop(5), Instr.write(0, EAST, 0)]})
    problems = [p for p in check_program(prog) if p.rule == DOUBLE]
    (p,) = problems
    assert (p.slices, p.stream, p.position, p.cycle) == (("MEM_W1",), "E0", TINY.position("MEM_W1"), 2)
    assert "both drive stream E0" in p.message


def test_validate_failures_become_problems_for_every_queue():
    cfg = TINY
    too_long = [Instr.nop(1)] * cfg.iq_depth           # + HALT: one more than the queue holds
    prog = loaded(Program(cfg, {
        "MEM_W1": [Instr.read(0, EAST, cfg.mem_depth - 3), Instr.repeat(3, 1, +1)],   # repetition 3 is out
        "MEM_W0": too_long,
        "VXM": [Instr.read(0, EAST, 0)],                                                # not a VXM opcode
        "MEM_E1": [Instr.repeat(2, 1, +1), Instr.read(0, EAST, 0)],                    # nothing to repeat
    }))
    problems = [p for p in check_program(prog) if p.rule == PROGRAM]
    assert [p.slices for p in problems] == [("MEM_W1",), ("MEM_W0",), ("VXM",), ("MEM_E1",)]
    assert [p.position for p in problems] == [cfg.position(n) for n in ("MEM_W1", "MEM_W0", "VXM", "MEM_E1")]
    assert "repetition 3" in problems[0].message and f"beyond MEM_W1's depth of {cfg.mem_depth}" in problems[0].message
    assert f"needs {cfg.iq_depth + 1} instructions" in problems[1].message
    assert "READ is not an instruction of a VXM slice" in problems[2].message
    assert "REPEAT with no earlier data instruction" in problems[3].message
    with pytest.raises(CheckError, match=r"static check \(4 problem\(s\)\): \[program\]"):
        require_clean(prog)


def test_mxm_faults_of_the_golden_model_are_found_statically():
    cfg = TINY
    mxm = [Instr.mm(0, WEST, acc=1, flags=MMFlag.ACC | MMFlag.XBUF),     # neither row 1 nor slot 0 written
           Instr.nop(1),
           Instr.mm(0, WEST, acc=1, slot=0, flags=MMFlag.XBUF),
           Instr.mm(0, WEST, acc=1, slot=0, flags=MMFlag.XBUF | MMFlag.ACC)]
    loader = [Instr.nop(1),
              Instr.lx(0, WEST, slot=0),                                  # cycle 1: slot 0 from here on
              Instr.nop(2),
              Instr.lw(0, WEST, n=4, delay=2),                           # cycle 4: its load starts on 6
              Instr.lw(0, WEST, n=4)]                                     # cycle 5: the first still waits
    prog = Program(cfg, {"MXM_W": mxm, "MXL_W": loader})
    got = [(p.cycle, p.slices, p.message) for p in check_program(prog) if p.rule == MXM_STATE]
    assert [(c, s) for c, s, _ in got] == [(0, ("MXM_W",)), (5, ("MXL_W",))]
    assert "reads x slot 0 before any LX wrote it" in got[0][2]
    assert ("issues while MXL_W 'LW W0, n=4, delay=2' (issued on cycle 4) still waits to start its load "
            "(on cycle 6)") in got[1][2]
    with pytest.raises(archmodel.ModelError, match="LW while another LW waits"):
        archmodel.run(Program(cfg, {"MXL_W": loader[3:]}))
    # A second LW may wait while a load is in progress, but its load may not start before
    # the first one's last row: n = 1 loads rows on cycles 0..3.
    overlap = [Instr.lw(0, WEST, n=1), Instr.nop(1), Instr.lw(0, WEST, n=4)]
    (p,) = [p for p in check_program(Program(cfg, {"MXL_W": overlap})) if p.rule == MXM_STATE]
    assert (p.cycle, "starts a weight load on cycle 2 while MXL_W 'LW W0, n=1, delay=0' (issued on cycle 0) "
                     "still loads (until cycle 3)") == (2, p.message[p.message.index("starts"):])
    with pytest.raises(archmodel.ModelError, match="would start on cycle 2, while the previous LW still loads"):
        archmodel.run(Program(cfg, {"MXL_W": overlap}))
    overlap[1] = Instr.nop(3)                       # issued on cycle 4: loads once the first swapped
    assert [p for p in check_program(Program(cfg, {"MXL_W": overlap})) if p.rule == MXM_STATE] == []
    mxm[0] = Instr.mm(0, WEST, acc=1, slot=1, flags=MMFlag.ACC)
    prog = Program(cfg, {"MXM_W": mxm[:1]})
    (p,) = [p for p in check_program(prog) if p.rule == MXM_STATE]
    assert "accumulates into row 1 before any MM without ACC wrote it" in p.message
    with pytest.raises(archmodel.ModelError, match="accumulated into before"):
        archmodel.run(prog)


# ---- MEM rows nothing defined (SRAM powers up random) -------------------------------------------
def copy_program(src_row, dst_row, write_at=4):
    """MEM_W1 READs ``src_row`` on cycle 0 (E0, at MEM_E0 on cycle 4); MEM_E0 WRITEs it to
    ``dst_row`` on cycle 4, then READs ``dst_row`` on cycle 6 (west-flowing: MEM_E0's
    value is at MEM_W1 on 6 + READ_LATENCY + 3, where MEM_W1 WRITEs it to row 9)."""
    pos = TINY.position
    t_back = 6 + READ_LATENCY + pos("MEM_E0") - pos("MEM_W1")
    return Program(TINY, {"MEM_W1": [Instr.read(0, EAST, src_row), Instr.nop(t_back - 1), Instr.write(0, WEST, 9)],
                          "MEM_E0": [Instr.nop(4), Instr.write(0, EAST, dst_row), Instr.nop(1),
                                     Instr.read(0, WEST, dst_row)]})


def test_a_read_of_a_row_nothing_defined_is_reported():
    # No image anywhere: MEM_W1's READ of row 3 on cycle 0 reads whatever the SRAM holds;
    # MEM_E0's READ of row 7 on cycle 6 follows its WRITE of row 7 (cycle 4): defined.
    prog = copy_program(3, 7)
    assert rules(check_program(prog)) == [UNDEFINED]
    (p,) = check_program(prog)
    assert (p.slices, p.position, p.cycle) == (("MEM_W1",), TINY.position("MEM_W1"), 0)
    assert p.message.startswith("MEM_W1 'READ E0, 3' (issued on cycle 0) reads MEM_W1 row 3, which nothing defined")
    with pytest.raises(CheckError, match=r"\[undefined-read\] MEM_W1 'READ E0, 3'"):
        require_clean(prog)
    # An image of MEM_W1 defines its rows (its zero rows as zero: a loader writes them).
    prog.memory["MEM_W1"][0] = 1
    assert check_program(prog) == []
    # The golden model runs it: MEM_W1's row 3 (zero in the image) goes round to row 9.
    mem = archmodel.run(prog).memory
    assert mem["MEM_W1"][9].tolist() == [0] * TINY.lanes and mem["MEM_E0"][7].tolist() == [0] * TINY.lanes


def test_a_write_counts_only_once_it_has_landed():
    # MEM_E0 READs row 7 on cycle 6 and WRITEs it on cycle 7, after: row 7 is undefined for
    # the READ (one queue issues one instruction a cycle; within one the READ reads first).
    prog = copy_program(3, 8)
    prog.memory["MEM_W1"][3] = 5
    prog.queues["MEM_E0"] = [Instr.nop(4), Instr.write(0, EAST, 8), Instr.nop(1), Instr.read(0, WEST, 7),
                             Instr.write(0, EAST, 7)]
    got = [p for p in check_program(prog) if p.rule == UNDEFINED]
    assert [(p.slices, p.cycle) for p in got] == [(("MEM_E0",), 6)], got
    assert "reads MEM_E0 row 7" in got[0].message
    assert "the first WRITE of it lands on cycle 7, not before the READ" in got[0].message
    # Written on cycle 4 instead (row 7 where row 8 was): clean.
    prog.queues["MEM_E0"][1] = Instr.write(0, EAST, 7)
    assert [p for p in check_program(prog) if p.rule == UNDEFINED] == []


def test_declared_rows_count_as_defined_and_survive_json():
    # Rows defined before the run without an image: a resident model's rows an earlier run
    # wrote, a block zero-filled on purpose.  Declared, they are clean; JSON keeps them.
    prog = copy_program(3, 7)
    prog.declare_defined("MEM_W1", [3])
    assert check_program(prog) == []
    back = Program.from_json(prog.to_json())
    assert back.defined["MEM_W1"] == {3} and check_program(back) == []
    # A slice with an image needs no declaration: the key is left out.
    prog.memory["MEM_W1"][0] = 1
    assert '"defined"' not in prog.to_json()
    with pytest.raises(ProgramError, match="row 64 of MEM_W1 does not exist"):
        prog.declare_defined("MEM_W1", [TINY.mem_depth])
    with pytest.raises(ProgramError, match="'VXM' is not a MEM slice"):
        prog.declare_defined("VXM", [0])


def test_a_read_through_a_base_register_is_not_judged():
    # Its row is the host's base word plus the address: unknown to a static check.
    prog = copy_program(3, 7)
    prog.queues["MEM_W1"][0] = Instr.read(0, EAST, 3, base=1)
    assert [p for p in check_program(prog) if p.rule == UNDEFINED] == []


def test_compiled_programs_declare_their_zero_weight_slices():
    # A classic 16x16 FFN on the default tile: MEM_E1..E3 hold only zero (padding) weight
    # rows, which it READs; the compiler declares every row it loads, and the declaration
    # survives the program's JSON (lpu compile, then lpu sim DIR).
    ex = example_ffn("classic", 16, 16, 1, seed=16 * 31 + 16)
    prog, _ = compile_ffn(ex.spec, ex.x_int8, TileConfig.default())
    empty = [n for n in prog.config.mem_names if not prog.memory[n].any() and prog.defined[n]]
    assert empty, "the case needs a slice whose image is all zero"
    assert check_program(prog) == [] and check_program(Program.from_json(prog.to_json())) == []
    prog.defined = {n: set() for n in prog.config.mem_names}
    assert {p.slices[0] for p in check_program(prog) if p.rule == UNDEFINED} == set(empty)


def test_resident_layers_are_clean():
    from firmware_gen.compiler.resident import compile_resident
    from sim.flows.decode import DECODE_TILE
    cfg = TileConfig.load("tiny", list(DECODE_TILE))
    specs = [example_ffn(k, 8, 16, seed=s).spec for s, k in enumerate(("swiglu", "classic"))]
    rm = compile_resident(specs, cfg)
    for ly in rm.layers:
        assert check_program(ly.program) == []


# ---- C2C ------------------------------------------------------------------------------------
LINKED = dataclasses.replace(TINY, links=1, link_width=8, rx_depth=2)    # 4 flits per vector
# MEM_W1's READ on cycle 0 reaches C2C_W (one position west) on READ_LATENCY + 1: the SEND.
T_SEND = READ_LATENCY + LINKED.position("MEM_W1") - LINKED.position("C2C_W")


def link_pair(cfg, n, gap, recv_at=None):
    """Tile 0 sends ``n`` vectors MEM_W1 -> C2C_W -> link 0, the k-th on T_SEND + k*gap;
    tile 1 RECVs them (the first on ``recv_at``, default the earliest allowed) every
    ``gap`` cycles, and MEM_W1 writes them."""
    pos = cfg.position
    dist = pos("MEM_W1") - pos("C2C_W")
    recv_at = T_SEND + c2c.min_distance(cfg) if recv_at is None else recv_at
    rep = [Instr.repeat(n - 1, gap, +1)] if n > 1 else []
    rep0 = [Instr.repeat(n - 1, gap, 0)] if n > 1 else []
    t0 = loaded(Program(cfg, {"MEM_W1": [Instr.read(0, WEST, 0)] + rep,
                              "C2C_W": [Instr.nop(T_SEND), Instr.compute(Op.SEND, 0, WEST, link=0)] + rep0}))
    t1 = Program(cfg, {"C2C_W": [Instr.nop(recv_at), Instr.compute(Op.RECV, 0, EAST, link=0)] + rep0,
                       "MEM_W1": [Instr.nop(recv_at + C2C_LATENCY + dist), Instr.write(0, EAST, 0)] + rep})
    return [t0, t1]


def test_a_clean_link_transfer_and_its_golden_model_run():
    F = LINKED.flits_per_vector
    progs = link_pair(LINKED, 2, gap=F)
    assert check_system(progs, Topology(2).peer) == []
    archmodel.run_system(progs, Topology(2).peer)


def test_link_mismatches_are_named():
    peer = Topology(2).peer
    F = LINKED.flits_per_vector
    progs = link_pair(LINKED, 2, gap=F)
    progs[1].queues["C2C_W"] = progs[1].queues["C2C_W"][:2]                # one RECV, two SENDs
    problems = check_system(progs, peer)
    unmatched = [p for p in problems if p.rule == LINK_UNMATCHED]
    assert [(p.tile, p.slices, p.cycle) for p in unmatched] == [(0, ("C2C_W",), T_SEND + F)]
    assert "no RECV on tile 1 link 0 takes (2 sent, 1 received there)" in unmatched[0].message
    # ... and tile 1's second WRITE now samples a stream nothing drives.
    assert [(p.tile, p.rule) for p in problems if p.rule != LINK_UNMATCHED] == [(1, UNDRIVEN)]

    progs = link_pair(LINKED, 1, gap=F)
    progs[0].queues = {n: [] for n in progs[0].queues}                   # a RECV with no SEND
    problems = [p for p in check_system(progs, peer) if p.rule == LINK_UNMATCHED]
    assert [(p.tile, p.slices) for p in problems] == [(1, ("C2C_W",))]
    assert "a vector nothing sends (no tile sends on the link that leads here)" in problems[0].message


def test_link_timing_overrun_and_overflow():
    peer = Topology(2).peer
    D, F = c2c.min_distance(LINKED), LINKED.flits_per_vector
    early = link_pair(LINKED, 1, gap=F, recv_at=T_SEND + D - 1)
    (p,) = check_system(early, peer)
    assert (p.rule, p.tile, p.slices, p.cycle) == (LINK_EARLY, 1, ("C2C_W", "C2C_W"), T_SEND + D - 1)
    assert f"cannot arrive before cycle {T_SEND + D}" in p.message
    with pytest.raises(archmodel.ModelError, match="cannot arrive before"):
        archmodel.run_system(early, peer)

    overrun = link_pair(LINKED, 2, gap=F - 1)                # the second SEND while 4 flits go out
    (p,) = check_system(overrun, peer)
    assert (p.rule, p.tile, p.cycle) == (LINK_OVERRUN, 0, T_SEND + F - 1)

    full = link_pair(LINKED, 3, gap=F)                       # rx_depth 2; the third SEND before any RECV
    assert T_SEND + D > T_SEND + 2 * F
    (p,) = check_system(full, peer)
    assert (p.rule, p.tile, p.cycle) == (LINK_OVERFLOW, 1, T_SEND + 2 * F)
    assert "may hold 3 vectors" in p.message and "receive buffer's 2" in p.message


# ---- the checker's walk against a cycle-by-cycle model ---------------------------------------
def reference(program):
    """Stream registers simulated cycle by cycle, a value id per drive (hdl/units/fabric.py: each
    position's register takes the drive or the passing value, the edges feed nothing).
    Returns the replaced-before-read / undriven-read / double-drive findings, grouped per
    instruction instance as the checker reports them, and what each read saw."""
    cfg = program.config
    P = cfg.positions
    drv, rd = defaultdict(list), defaultdict(list)
    inst = []
    for name in cfg.slice_names:
        p = cfg.position(name)
        for t, ins in archmodel.expand(program.queues.get(name, []))[0]:
            i = len(inst)
            inst.append((name, t))
            e = effects(ins, name, cfg.lanes, cfg.acc_planes, cfg.vxm_latency)
            for a in e.drives:
                drv[t + a.offset].append((p, a.dir, a.stream, i))
            for a in e.reads:
                rd[t + a.offset].append((p, a.dir, a.stream, i))
    T = max(list(drv) + list(rd) + [0]) + P + 2
    vis = {EAST: [[None] * cfg.streams for _ in range(P)], WEST: [[None] * cfg.streams for _ in range(P)]}
    read_ids, found, saw = set(), defaultdict(list), {}
    for t in range(T):
        for p, d, s, i in rd.get(t, ()):
            v = vis[d][p][s]
            saw[(i, d, s, t)] = v
            if v is None:
                found[(UNDRIVEN, (inst[i][0],), i)].append((t, p, f"{'EW'[d]}{s}"))
            else:
                read_ids.add(v)
        here = defaultdict(list)
        for p, d, s, i in drv.get(t, ()):
            here[(p, d, s)].append(i)
        nxt = {EAST: [[None] * cfg.streams] + [row[:] for row in vis[EAST][:-1]],
               WEST: [row[:] for row in vis[WEST][1:]] + [[None] * cfg.streams]}
        for (p, d, s), ids in here.items():
            q = p + 1 if d == EAST else p - 1
            if not 0 <= q < P:
                continue
            for other in ids[1:]:
                found[(DOUBLE, (inst[ids[0]][0],), ids[0], other)].append((t, p, f"{'EW'[d]}{s}"))
            old = vis[d][p][s]
            if old is not None and old not in read_ids:
                found[(REPLACED, (inst[old[3]][0], inst[ids[0]][0]), old[3], ids[0])].append((t, p, f"{'EW'[d]}{s}"))
            nxt[d][q][s] = (p, t, s, ids[0])
        vis = nxt
    out = set()
    for k, v in found.items():
        t, p, stream = min(v)
        out.add((k[0], k[1], stream, t, p))
    return out, saw


def as_set(problems):
    return {(p.rule, p.slices, p.stream, p.cycle, p.position) for p in problems
            if p.rule in (REPLACED, UNDRIVEN, DOUBLE)}


def random_program(cfg, rng, length=10):
    """Random queues on every slice: READs/WRITEs, SXM moves, VOPs, MMs with EMIT, NOPs and
    REPEATs, all legal operands; values collide, get lost and go unread often."""
    S = cfg.streams
    queues = {}
    for name in cfg.slice_names:
        kind = cfg.kind(name)
        q = []
        for _ in range(int(rng.integers(0, length))):
            d, s = int(rng.integers(2)), int(rng.integers(S))
            r = rng.random()
            if r < 0.3:
                q.append(Instr.nop(int(rng.integers(1, 4))))
                continue
            if kind == "MEM":
                ins = Instr(Op.READ if rng.random() < 0.5 else Op.WRITE, s, d, int(rng.integers(cfg.mem_depth // 2)))
            elif kind == "SXM":
                flags = int(rng.choice([SxmFlag.OUT_E, SxmFlag.OUT_W, SxmFlag.OUT_E | SxmFlag.OUT_W]))
                ins = (Instr.compute(Op.SHIFT, s, d, k=0, out=int(rng.integers(S)), flags=flags)
                       if rng.random() < 0.7 else Instr.compute(Op.TRI, s, d, row=0))
            elif kind == "VXM":
                flags = int(rng.choice([VopFlag.OUT_E, VopFlag.OUT_W, VopFlag.OUT_E | VopFlag.GATE]))
                ins = Instr.vop(0, d, param=0, out=int(rng.integers(S)), flags=flags)
            else:
                ins = Instr.mm(s, d, acc=0, out=0, flags=MMFlag.EMIT)
            q.append(ins)
            if rng.random() < 0.2 and ins.op != Op.NOP:
                q.append(Instr.repeat(int(rng.integers(1, 4)), int(rng.integers(1, 3)), 0))
        queues[name] = q
    return Program(cfg, queues)


@pytest.mark.parametrize("seed", range(40))
def test_checker_agrees_with_the_cycle_by_cycle_reference(seed):
    rng = np.random.default_rng(seed)
    prog = random_program(TINY, rng)
    want, _ = reference(prog)
    assert as_set(check_program(prog)) == want


@pytest.mark.parametrize("seed", range(10))
def test_the_reference_sees_what_the_golden_model_writes(seed):
    """MEM-only random programs (reads of rows nobody writes, each row unique): every
    WRITE stores the vector of the READ the reference says it saw, or 0 where it saw none."""
    rng = np.random.default_rng(100 + seed)
    cfg = TINY
    prog = random_program(cfg, rng, length=14)
    prog.queues = {n: ([i for i in q if i.op != Op.REPEAT] if cfg.kind(n) == "MEM" else [])
                   for n, q in prog.queues.items()}
    for k, name in enumerate(cfg.mem_names):
        prog.queues[name] = [dataclasses.replace(i, addr=i.addr + cfg.mem_depth // 2) if i.op == Op.WRITE else i
                             for i in prog.queues[name]]
        rows = np.arange(cfg.mem_depth // 2)
        prog.memory[name][: cfg.mem_depth // 2] = np.stack([np.full_like(rows, k + 1), rows + 1, rows, rows], 1)
    _, saw = reference(prog)
    gold = archmodel.run(prog)
    by_issue = {}
    idx = 0
    for name in cfg.slice_names:
        for t, ins in archmodel.expand(prog.queues.get(name, []))[0]:
            by_issue[(name, t)] = (idx, ins)
            idx += 1
    issues = {i: (name, t, ins) for (name, t), (i, ins) in by_issue.items()}
    assert gold.events
    blind = set()                      # WRITEs that saw no value
    for e in gold.events:
        i, ins = by_issue[(e.slice, e.cycle)]
        v = saw[(i, ins.dir, ins.stream, e.cycle)]
        if v is None:
            assert e.data == (0,) * cfg.lanes
            blind.add((e.slice, e.cycle))
        else:
            src_name, _, src = issues[v[3]]
            assert src.op == Op.READ
            assert e.data == tuple(int(x) for x in prog.memory[src_name][src.addr])
    # and the checker names exactly those WRITEs
    assert {(p.slices[0], p.cycle) for p in check_program(prog) if p.rule == UNDRIVEN} == blind


# ---- everything the compilers write is clean -------------------------------------------------
@pytest.mark.parametrize("kind", ["swiglu", "classic"])
@pytest.mark.parametrize("preset, H, I, batch", [
    ("tiny", 4, 4, 1), ("tiny", 5, 7, 1), ("tiny", 6, 10, 3), ("tiny", 8, 12, 4),
    ("default", 16, 16, 1), ("default", 17, 33, 1), ("default", 48, 80, 2), ("default", 32, 64, 16),
])
def test_compiled_ffns_are_clean(kind, preset, H, I, batch):
    cfg = TileConfig.preset(preset)
    ex = example_ffn(kind, H, I, batch, seed=H * 31 + I)
    for route in (None, StoreH()):
        prog, _ = compile_ffn(ex.spec, ex.x_int8, cfg, h_route=route)
        assert check_program(prog) == []


def test_the_default_tile_ffn_is_clean():
    cfg = TileConfig.default()
    ex = example_ffn("swiglu", 128, 512)
    prog, man = compile_ffn(ex.spec, ex.x_int8, cfg)
    assert man.cycles > 1000
    assert check_program(prog) == []


def test_scheduler_programs_are_clean():
    from sim.bench.suite import sweep_schedule
    for preset in ("tiny", "default"):
        cfg = TileConfig.preset(preset)
        for passes in (1, 2):
            assert check_program(sweep_schedule(cfg, passes).program()) == [], (preset, passes)
        for seed in range(2):
            assert check_program(random_schedule(cfg, 12 if preset == "tiny" else 120, seed).program()) == []
        prog, _ = sxm_program(cfg, sxm_cases(cfg))
        assert check_program(prog) == []
    # Rows loaded as zero into a slice with no other image are declared loaded: clean.
    from firmware_gen.compiler.schedule import Scheduler
    s = Scheduler(TINY)
    s.load("MEM_W1", 2, np.zeros((3, TINY.lanes), np.uint8))
    s.copy("MEM_W1", 2, "MEM_E0", 0, count=3)
    prog = s.program()
    assert not prog.memory["MEM_W1"].any() and prog.defined["MEM_W1"] == {2, 3, 4}
    assert check_program(prog) == []


@pytest.mark.parametrize("tiles", TILE_COUNTS)
def test_tray_programs_are_clean_and_a_dropped_recv_is_found(tiles):
    peer = Topology(tiles).peer
    for kind, H, I, B in [("swiglu", 8, 16, 1), ("classic", 12, 20, 2)]:
        ex = example_ffn(kind, H, I, B, seed=tiles)
        progs, man = compile_ffn_tray(ex.spec, ex.x_int8, TINY, tiles)
        assert check_system(progs, peer, man.min_distance) == []
    # Drop the last RECV of tile 1: its sender's vector is unmatched, the SHIFT after it
    # reads nothing.
    q = progs[1].queues
    name = next(n for n in ("C2C_W", "C2C_E") if any(i.op == Op.RECV for i in q.get(n, [])))
    k = max(j for j, i in enumerate(q[name]) if i.op == Op.RECV)
    q[name] = q[name][:k] + [Instr.nop(1)] + q[name][k + 1:]
    got = {(p.rule, p.tile) for p in check_system(progs, peer, man.min_distance)}
    assert any(r == LINK_UNMATCHED for r, _ in got) and (UNDRIVEN, 1) in got, got


@pytest.mark.parametrize("tiles, spread", [(2, 0), (2, 7), (4, 0)])
def test_system_scheduler_programs_are_clean(tiles, spread):
    from sim.flows.c2c import c2c_config, exchange
    cfg = dataclasses.replace(c2c_config(), links=tiles - 1)
    progs = exchange(cfg, tiles, per_link=4, spread=spread).programs()
    assert sum(i.op == Op.SEND for p in progs for q in p.queues.values() for i in q) > 0
    assert check_system(progs, Topology(tiles).peer) == []


def test_problem_reads_well():
    p = Problem(REPLACED, "lost", ("MEM_W1", "MEM_W0"), "E0", 3, 2)
    assert str(p) == "[replaced-before-read] lost"
