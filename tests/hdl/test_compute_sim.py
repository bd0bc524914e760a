"""The MXM and VXM in RTL simulation, on every simulator: hand-placed programs checked
against the golden model (values and cycles of every MEM write, cycle count, busy
counters) and against numpy/numerics written out independently in each test."""

import dataclasses
from collections import defaultdict

import numpy as np
import pytest

from lpu_arch import TileConfig

from firmware_gen.golden import archmodel
from lpu_arch.vxm import VXM_FIELDS
from lpu_arch.isa import EAST, INT32_PLANES, MXM_LATENCY, READ_LATENCY, WEST, Instr, MMFlag, Op, VopFlag
from firmware_gen.golden.quantise import requantise
from firmware_gen.program import Program
from firmware_gen.compiler.reserve import lower
from lpu_arch.vxm import param_words, reset_words, table_words
from sim.harness.runner import job, observed_events
from sim.harness.scoreboard import check_run

from tests.helpers import ONE_SIM, get_sim

pytestmark = pytest.mark.sim

ACC, EMIT, XBUF = MMFlag.ACC, MMFlag.EMIT, MMFlag.XBUF
TABLE, GATE, OUT_E, OUT_W, ADD = VopFlag.TABLE, VopFlag.GATE, VopFlag.OUT_E, VopFlag.OUT_W, VopFlag.ADD
F = {f: i for i, f in enumerate(VXM_FIELDS)}


class Plan:
    """Instructions placed at absolute issue cycles (NOPs fill the gaps), MEM images,
    VXM parameters and table; ``program()`` assembles them."""

    def __init__(self, cfg):
        self.cfg = cfg
        self.items = defaultdict(list)
        self.memory = {n: np.zeros((cfg.mem_depth, cfg.lanes), np.uint8) for n in cfg.mem_names}
        self.params = Program(cfg).vxm_params.copy()
        self.table = None

    def dist(self, a, b):
        return abs(self.cfg.position(a) - self.cfg.position(b))

    def dir(self, src, dst):
        return EAST if self.cfg.position(dst) > self.cfg.position(src) else WEST

    def at(self, name, cycle, ins, count=1, stride=1, every=1):
        """``ins`` at ``cycle``; with ``count`` > 1, repeated every ``every`` cycles with
        its address advanced by ``stride`` (by a REPEAT when ``every`` is 1, else as
        separate instructions, so that the queue can issue others in between)."""
        assert cycle >= 0, (name, cycle, str(ins))
        if count > 1 and every > 1:
            for k in range(count):
                self.at(name, cycle + k * every, dataclasses.replace(ins, addr=ins.addr + k * stride))
            return
        self.items[name].append((cycle, ins, count, stride, every))

    def store(self, name, row, vecs):
        vecs = np.asarray(vecs, np.int64).reshape(-1, self.cfg.lanes)
        self.memory[name][row:row + len(vecs)] = vecs & 0xFF

    def send(self, src, row, dst, cycle, stream, count=1, every=1):
        """READ ``src[row..]`` so that the vectors are visible at ``dst`` on ``cycle``, then
        every ``every`` cycles."""
        read = cycle - READ_LATENCY - self.dist(src, dst)
        self.at(src, read, Instr.read(stream, self.dir(src, dst), row), count, 1, every)

    def catch(self, src, drive_cycle, dst, stream, row, count=1, every=1):
        """WRITE at ``dst`` the value(s) ``src`` drives on ``drive_cycle`` (then every ``every``)."""
        self.at(dst, drive_cycle + self.dist(src, dst), Instr.write(stream, self.dir(src, dst), row),
                count, 1, every)

    def program(self) -> Program:
        queues = {name: lower([(cycle, ins, Instr.repeat(count - 1, every, stride) if count > 1 else None)
                               for cycle, ins, count, stride, every in items], merge=False)
                  for name, items in self.items.items()}
        prog = Program(self.cfg, queues, self.memory, self.params)
        if self.table is not None:
            prog.set_table(self.table)
        return prog


# ---- MXM helpers -------------------------------------------------------------------------
def in_dir(mxm):
    return WEST if mxm == "MXM_W" else EAST


def load_weights(plan, mxm, cycle, w, n, stream, delay, sources, row):
    """LW on ``cycle``: row r of ``w`` from stream ``stream + r % n`` on ``cycle + delay + r // n``,
    sent by ``sources[r % n]`` from its rows ``row..``.  Returns the first cycle the block is active."""
    L = plan.cfg.lanes
    plan.at(plan.cfg.loader(mxm), cycle, Instr.lw(stream, in_dir(mxm), n=n, delay=delay))
    for j in range(n):
        plan.store(sources[j], row, np.asarray(w)[j::n])
        plan.send(sources[j], row, mxm, cycle + delay, stream + j, count=L // n)
    return cycle + delay + L // n


def emit_catchers(plan, mxm):
    """Four MEM slices, nearest first, to WRITE EMIT's planes."""
    names = sorted(plan.cfg.mem_names, key=lambda n: plan.dist(mxm, n))
    return names[:INT32_PLANES]


def catch_emit(plan, mxm, mm_cycle, out, row, slices, count=1, every=1):
    for b, s in enumerate(slices):
        plan.catch(mxm, mm_cycle + MXM_LATENCY, s, out + b, row, count, every)


def written(res):
    """``(slice, addr) -> bytes`` of every MEM write the hardware recorded (each once)."""
    got = {}
    for _, s, a, d in observed_events(res):
        assert (s, a) not in got, f"{s}[{a}] written twice; the test assumes one write per address"
        got[(s, a)] = np.asarray(d, np.int64)
    return got


def int32_at(got, slices, row):
    planes = [got[(s, row)] for s in slices]
    return archmodel.from_planes(planes)


def s8(v):
    return np.asarray(np.asarray(v, np.int64) & 0xFF, np.uint8).astype(np.int8).astype(np.int64)


def run_checked(cfg, simulator, progs, busy=None, **kw):
    """Run programs as the jobs of one simulation; each must match the golden model
    (``scoreboard.check_run``) and, where ``busy[i]`` is given, program i's busy counters
    must be the test's own counts (``{slice: data instructions}``)."""
    golds = [archmodel.run(p) for p in progs]
    busy = busy or [None] * len(progs)
    results = get_sim(cfg, simulator).run([job(p, name=f"job{i}", **kw) for i, p in enumerate(progs)])
    for i, (res, gold) in enumerate(zip(results, golds)):
        problems = check_run(res, gold, predicted_busy=busy[i])
        assert not problems, f"job {i}:\n" + "\n".join(problems)
    return results, golds


# ---- MXM tests ----------------------------------------------------------------------------
def test_lw_mm_acc_emit(simulator):
    """LW with n = 1 (delay 5) on MXM_W and n = max (4, all rows in one cycle, delay 9)
    on MXM_E; MM overwrite, ACC, EMIT; an MM without EMIT then one with ACC|EMIT."""
    cfg = TileConfig.tiny()
    L = cfg.lanes
    rng = np.random.default_rng(1)
    pl = Plan(cfg)
    ww = rng.integers(-128, 128, (L, L))
    we = rng.integers(-128, 128, (L, L))
    xs = rng.integers(-128, 128, (6, L))
    xs[0] = [127, -128, -128, 127]
    ww[0] = [-128, -128, 127, 127]                       # extreme products in lane 0
    # MXM_W: rows on W1 from MEM_W1 on cycles 5..8, active from 9.
    on_w = load_weights(pl, "MXM_W", 0, ww, 1, 1, 5, ["MEM_W1"], 0)
    # MXM_E: all 4 rows on E0..E3 on cycle 31 from all four MEM slices, active from 32.
    on_e = load_weights(pl, "MXM_E", 1, we, 4, 0, 30, ["MEM_W1", "MEM_W0", "MEM_E0", "MEM_E1"], 8)
    assert (on_w, on_e) == (9, 32)
    exp = {}
    # MXM_W: acc0 = W x0 (EMIT), acc1 = W x1 (no EMIT), acc1 += W x2 (EMIT), acc0 += W x3 (EMIT)
    cw = emit_catchers(pl, "MXM_W")
    pl.store("MEM_W0", 20, xs[:4])
    pl.send("MEM_W0", 20, "MXM_W", 12, 2, count=4)       # x0..x3 on W2, cycles 12..15
    pl.at("MXM_W", 12, Instr.mm(2, WEST, acc=0, out=0, flags=EMIT))
    pl.at("MXM_W", 13, Instr.mm(2, WEST, acc=1, out=0, flags=0))
    pl.at("MXM_W", 14, Instr.mm(2, WEST, acc=1, out=0, flags=ACC | EMIT))
    pl.at("MXM_W", 15, Instr.mm(2, WEST, acc=0, out=0, flags=ACC | EMIT))
    catch_emit(pl, "MXM_W", 12, 0, 30, cw)
    catch_emit(pl, "MXM_W", 14, 0, 31, cw, count=2)      # rows 31, 32 on consecutive cycles
    p = ww @ xs[:4].T
    exp[(tuple(cw), 30)] = p[:, 0]
    exp[(tuple(cw), 31)] = p[:, 1] + p[:, 2]
    exp[(tuple(cw), 32)] = p[:, 0] + p[:, 3]
    # MXM_E: x4 from MEM_E1 (east-flowing), acc 15 (the last row), out = 0.
    ce = emit_catchers(pl, "MXM_E")
    pl.store("MEM_W1", 40, xs[4:6])
    pl.send("MEM_W1", 40, "MXM_E", 35, 3, count=2)       # x4, x5 on E3, cycles 35, 36
    pl.at("MXM_E", 35, Instr.mm(3, EAST, acc=15, out=0, flags=EMIT))
    pl.at("MXM_E", 36, Instr.mm(3, EAST, acc=15, out=0, flags=ACC | EMIT))
    catch_emit(pl, "MXM_E", 35, 0, 50, ce, count=2)
    q = we @ xs[4:6].T
    exp[(tuple(ce), 50)] = q[:, 0]
    exp[(tuple(ce), 51)] = q[:, 0] + q[:, 1]
    (res,), _ = run_checked(cfg, simulator, [pl.program()])
    got = written(res)
    for (slices, row), want in exp.items():
        assert np.array_equal(int32_at(got, slices, row), want), (slices, row)


def test_back_to_back_accumulation_and_xbuf(simulator):
    """Eight MMs on consecutive cycles into one accumulator row (each reads the row the
    previous one writes), from x slots filled by LX; LX then MM of the same slot on the
    next cycle; an overwrite in between restarts the sum; REPEAT steps the slot field."""
    cfg = TileConfig.tiny()
    L = cfg.lanes
    rng = np.random.default_rng(2)
    pl = Plan(cfg)
    w = rng.integers(-128, 128, (L, L))
    load_weights(pl, "MXM_W", 0, w, 2, 0, 4, ["MEM_W1", "MEM_W0"], 0)      # active from 6
    xs = rng.integers(-128, 128, (10, L))
    xs[0] = xs[1] = [-128] * L
    pl.store("MEM_E0", 10, xs)
    # LX slots 40..49 on cycles 10..19 (REPEAT stride 1 steps the slot operand).
    pl.send("MEM_E0", 10, "MXM_W", 10, 3, count=10)
    pl.at("MXL_W", 10, Instr.lx(3, WEST, slot=40), count=10)
    # Cycle 20: acc 7 = W x[slot 40]; 21..27 ACC from slots 41..47, EMIT every one.
    first = Instr.mm(0, WEST, acc=7, slot=40, out=0, flags=XBUF | EMIT)
    pl.at("MXM_W", 20, first)
    pl.at("MXM_W", 21, Instr.mm(0, WEST, acc=7, slot=41, out=0, flags=XBUF | ACC | EMIT), count=7, stride=1024)
    cw = emit_catchers(pl, "MXM_W")
    catch_emit(pl, "MXM_W", 20, 0, 30, cw, count=8)
    # Cycle 28: overwrite row 7 from slot 48, 29: ACC from slot 49.
    pl.at("MXM_W", 28, Instr.mm(0, WEST, acc=7, slot=48, out=0, flags=XBUF | EMIT))
    pl.at("MXM_W", 29, Instr.mm(0, WEST, acc=7, slot=49, out=0, flags=XBUF | ACC | EMIT))
    catch_emit(pl, "MXM_W", 28, 0, 38, cw, count=2)
    # LX on 40 then MM XBUF of slot 60 on 41, written by an LX on cycle 40.
    pl.store("MEM_W1", 20, rng.integers(-128, 128, (1, L)))
    pl.send("MEM_W1", 20, "MXM_W", 40, 1)
    pl.at("MXL_W", 40, Instr.lx(1, WEST, slot=60))
    pl.at("MXM_W", 41, Instr.mm(0, WEST, acc=3, slot=60, out=0, flags=XBUF | EMIT))
    catch_emit(pl, "MXM_W", 41, 0, 45, cw)
    (res,), _ = run_checked(cfg, simulator, [pl.program()])
    got = written(res)
    p = w @ xs.T
    run_sum = np.cumsum(p[:, :8], axis=1)
    for k in range(8):
        assert np.array_equal(int32_at(got, cw, 30 + k), run_sum[:, k]), k
    assert np.array_equal(int32_at(got, cw, 38), p[:, 8])
    assert np.array_equal(int32_at(got, cw, 39), p[:, 8] + p[:, 9])
    assert np.array_equal(int32_at(got, cw, 45), w @ s8(pl.memory["MEM_W1"][20]))


def test_weight_swap_timing_and_start_clears(simulator):
    """MMs on every cycle around a shadow-buffer swap: an MM issued on the LW's last row
    cycle (issue + delay + lanes/n - 1) uses the old block, one cycle later the new one;
    a second LW swaps back to a third block.  A start clears both buffers: the next job's
    MM, without an LW, multiplies by zeros."""
    cfg = TileConfig.tiny()
    L = cfg.lanes
    rng = np.random.default_rng(3)
    pl = Plan(cfg)
    blocks = [rng.integers(-128, 128, (L, L)) for _ in range(3)]
    a0 = load_weights(pl, "MXM_W", 0, blocks[0], 4, 0, 7, ["MEM_W1", "MEM_W0", "MEM_E0", "MEM_E1"], 0)
    a1 = load_weights(pl, "MXM_W", a0, blocks[1], 1, 0, 2, ["MEM_W1"], 8)     # rows on a0+2..a0+5
    x = rng.integers(-128, 128, (1, L))
    pl.store("MEM_E0", 20, x)
    # x on W3 every cycle from a1-4 to a1+2 (the same vector, READ repeated with stride 0).
    lo, hi = a1 - 4, a1 + 2
    pl.at("MEM_E0", lo - 1 - pl.dist("MEM_E0", "MXM_W"), Instr.read(3, WEST, 20), count=hi - lo + 1, stride=0)
    pl.at("MXM_W", lo, Instr.mm(3, WEST, acc=0, out=0, flags=EMIT), count=hi - lo + 1, stride=1)
    cw = emit_catchers(pl, "MXM_W")
    catch_emit(pl, "MXM_W", lo, 0, 30, cw, count=hi - lo + 1)
    # A third block, n = 2: swaps back to the first buffer.
    a2 = load_weights(pl, "MXM_W", hi + 1, blocks[2], 2, 2, 3, ["MEM_E0", "MEM_E1"], 16)
    pl.send("MEM_E0", 20, "MXM_W", a2 + 10, 3)
    pl.at("MXM_W", a2 + 10, Instr.mm(3, WEST, acc=9, out=0, flags=EMIT))
    catch_emit(pl, "MXM_W", a2 + 10, 0, 40, cw)
    # Second job: no LW; the MM sees cleared weights.
    pl2 = Plan(cfg)
    pl2.store("MEM_E0", 20, x)
    pl2.send("MEM_E0", 20, "MXM_W", 10, 3)
    pl2.at("MXM_W", 10, Instr.mm(3, WEST, acc=0, out=0, flags=EMIT))
    catch_emit(pl2, "MXM_W", 10, 0, 30, cw)
    (res, res2), _ = run_checked(cfg, simulator, [pl.program(), pl2.program()])
    got = written(res)
    for k, t in enumerate(range(lo, hi + 1)):
        blk = blocks[0] if t < a1 else blocks[1]
        assert np.array_equal(int32_at(got, cw, 30 + k), blk @ x[0]), (t, a1)
    assert np.array_equal(int32_at(got, cw, 40), blocks[2] @ x[0])
    assert np.array_equal(int32_at(written(res2), cw, 30), np.zeros(L))


# ---- VXM helpers --------------------------------------------------------------------------
def vop_reference(A, B, prm, table, flags):
    """The VXM chain per lane, written out with quantise.requantise (prm: (lanes, 8))."""
    def f(name):
        return prm[:, F[name]]
    A = np.asarray(A, np.int64) + (np.asarray(B, np.int64) if flags & ADD else 0)
    wrap = ((A + f("bias_a") + (1 << 31)) & 0xFFFFFFFF) - (1 << 31)
    a = requantise(wrap, f("m_a"), f("s_a")).astype(np.int64)
    if flags & TABLE:                   # each lane's table, named by its entry
        tables = np.atleast_2d(np.asarray(table, np.int64))
        a = tables[prm[:, F["table"]] % len(tables), a & 0xFF]
    if flags & GATE:
        wb = ((np.asarray(B, np.int64) + f("bias_b") + (1 << 31)) & 0xFFFFFFFF) - (1 << 31)
        b = requantise(wb, f("m_b"), f("s_b")).astype(np.int64)
        a = requantise(a * b, f("m_c"), f("s_c")).astype(np.int64)
    return a


def scaled_params(rng, lanes, mag_a, mag_b):
    """One parameter entry (lanes, 8) that maps inputs of about ``mag`` to int8 without
    saturating everything: multipliers over the whole range, shifts to match."""
    prm = np.zeros((lanes, len(VXM_FIELDS)), np.int64)
    for name, mag in (("a", mag_a), ("b", mag_b), ("c", 16384)):
        m = rng.integers(1, 32768, lanes)
        s = np.clip(np.round(np.log2(np.maximum(mag * m, 1) / 100.0)).astype(np.int64), 0, 46)
        prm[:, F[f"m_{name}"]], prm[:, F[f"s_{name}"]] = m, s
    prm[:, F["bias_a"]] = rng.integers(-mag_a // 4, mag_a // 4 + 1, lanes)
    prm[:, F["bias_b"]] = rng.integers(-mag_b // 4, mag_b // 4 + 1, lanes)
    return prm


# Every combination of TABLE, GATE and the outputs, then ADD (which excludes GATE) with TABLE.
ALL_FLAGS = ([t | g | o for o in (OUT_E, OUT_W, OUT_E | OUT_W, 0) for t in (0, TABLE) for g in (0, GATE)]
             + [ADD | t | o for o in (OUT_E, OUT_W, OUT_E | OUT_W) for t in (0, TABLE)])


def test_vop_every_flag_combination_after_mm(simulator):
    """The FFN's dataflow: MXM_W emits A east and MXM_E emits B west on the same cycle, the
    VXM runs one VOP per cycle with every combination of TABLE, GATE, OUT_E and OUT_W, and
    ADD (A + B) with TABLE and the outputs (22 VOPs over 16 parameter entries, a random
    table), MEM_E0/MEM_W0 store the results."""
    cfg = TileConfig.tiny()
    L = cfg.lanes
    rng = np.random.default_rng(4)
    pl = Plan(cfg)
    ww, we = rng.integers(-128, 128, (L, L)), rng.integers(-128, 128, (L, L))
    load_weights(pl, "MXM_W", 0, ww, 2, 0, 4, ["MEM_W1", "MEM_W0"], 0)       # active from 6
    load_weights(pl, "MXM_E", 0, we, 2, 0, 4, ["MEM_E1", "MEM_E0"], 0)       # active from 6
    n = len(ALL_FLAGS)
    xs, ys = rng.integers(-128, 128, (n, L)), rng.integers(-128, 128, (n, L))
    pl.store("MEM_W1", 8, xs)
    pl.store("MEM_E1", 8, ys)
    t_mm = 10
    pl.send("MEM_W1", 8, "MXM_W", t_mm, 1, count=n)
    pl.send("MEM_E1", 8, "MXM_E", t_mm, 2, count=n)
    pl.at("MXM_W", t_mm, Instr.mm(1, WEST, acc=0, out=0, flags=EMIT), count=n, stride=0)
    pl.at("MXM_E", t_mm, Instr.mm(2, EAST, acc=0, out=0, flags=EMIT), count=n, stride=0)
    t_vop = t_mm + MXM_LATENCY + pl.dist("MXM_W", "VXM")
    assert t_vop == t_mm + MXM_LATENCY + pl.dist("MXM_E", "VXM")
    for k in range(cfg.vxm_param_depth):
        pl.params[k] = scaled_params(rng, L, 40000, 40000)
    pl.table = rng.integers(-128, 128, 256)
    for k, flags in enumerate(ALL_FLAGS):
        out = k % cfg.streams
        pl.at("VXM", t_vop + k, Instr.vop(0, EAST, param=k % cfg.vxm_param_depth, out=out, flags=flags))
        if flags & OUT_E:
            pl.catch("VXM", t_vop + k + cfg.vxm_latency, "MEM_E0", out, 32 + k)
        if flags & OUT_W:
            pl.catch("VXM", t_vop + k + cfg.vxm_latency, "MEM_W0", out, 32 + k)
    prog = pl.program()
    # One VOP per flag combination; both MXMs EMIT on every cycle, so the planes a VOP
    # without GATE/ADD does not read are lost unread (the static checker's
    # replaced-before-read): this test provokes that on purpose.
    (res,), _ = run_checked(cfg, simulator, [prog], busy=[{"VXM": n}], checked=False)
    got = written(res)
    A, B = ww @ xs.T, we @ ys.T
    for k, flags in enumerate(ALL_FLAGS):
        want = vop_reference(A[:, k], B[:, k], prog.vxm_params[k % cfg.vxm_param_depth], prog.table, flags)
        for flag, where in ((OUT_E, "MEM_E0"), (OUT_W, "MEM_W0")):
            if flags & flag:
                assert np.array_equal(s8(got[(where, 32 + k)]), want), (k, flags)
            else:
                assert (where, 32 + k) not in got


def test_table_sweep(simulator):
    """All 256 table entries: A = x (identity weights), requantise with m = 1, s = 0 keeps
    x, the table maps every byte; 64 back-to-back VOPs (REPEAT) on the tiny tile.  A
    second job with the default (identity) table on the same build checks that the
    testbench restores it."""
    cfg = TileConfig.tiny()
    L = cfg.lanes
    n = 256 // L
    rng = np.random.default_rng(5)
    pl = Plan(cfg)
    load_weights(pl, "MXM_W", 0, np.eye(L, dtype=np.int64), 2, 0, 7, ["MEM_W0", "MEM_E0"], 60)  # from 9
    vals = rng.permutation(256)                       # every byte once
    xs = s8(vals).reshape(n, L)
    pl.store("MEM_W1", 0, xs)
    pl.send("MEM_W1", 0, "MXM_W", 12, 0, count=n)
    pl.at("MXM_W", 12, Instr.mm(0, WEST, acc=0, out=0, flags=EMIT), count=n, stride=0)
    t_vop = 12 + MXM_LATENCY + pl.dist("MXM_W", "VXM")
    pl.at("VXM", t_vop, Instr.vop(0, EAST, param=3, out=2, flags=TABLE | OUT_E), count=n, stride=0)
    pl.catch("VXM", t_vop + cfg.vxm_latency, "MEM_E0", 2, 0, count=n)
    table = rng.integers(-128, 128, 256)
    table[0], table[255], table[128], table[127] = -128, 127, 0, -1
    pl.table = table
    prog = pl.program()
    pl.table = None
    prog_identity = pl.program()
    (res, res_id), _ = run_checked(cfg, simulator, [prog, prog_identity])
    got, got_id = written(res), written(res_id)
    for k in range(n):
        assert np.array_equal(s8(got[("MEM_E0", k)]), table[xs[k] & 0xFF]), k
        assert np.array_equal(s8(got_id[("MEM_E0", k)]), xs[k]), k


EDGE_A = [(1 << 31) - 1, -(1 << 31), 0, -1, 1, (1 << 30), -(1 << 30) - 1, 127, -128, 12345678, -87654321]
EDGE_PARAMS = [  # (bias, m, s)
    (0, 1, 0), (0, 32767, 0), (0, 1, 46), (0, 32767, 46), (0, 32767, 1), (0, 1, 1), (0, 32767, 45),
    ((1 << 31) - 1, 1, 0), (-(1 << 31), 1, 0), ((1 << 31) - 1, 32767, 46), (-(1 << 31), 32767, 46),
    (1, 1, 24), (-1, 32767, 38), (255, 3, 2), (-256, 5, 3), (1 << 24, 32767, 40),
]


def test_vop_saturation_edges_default(simulator):
    """Default tile: int32 A and B straight from MEM (one byte plane per MEM slice, four
    on each side), operands at the edges: A and biases at +-2**31 (the add wraps),
    multipliers 1 and 32767, shifts 0, 1 and 46; every flag combination.  (A VOP every few
    cycles: the MEM slices next to the VXM send planes and store results.)  A second
    job: LW with n = 8 (the maximum: 8 MEM slices, 2 cycles), MM ACC/EMIT on 16 lanes."""
    cfg = TileConfig.default()
    L = cfg.lanes
    rng = np.random.default_rng(6)
    pl = Plan(cfg)
    west = [f"MEM_W{i}" for i in range(4)]           # nearest the VXM first
    east = [f"MEM_E{i}" for i in range(4)]
    nv = 48
    A = rng.integers(-(1 << 31), 1 << 31, (nv, L))
    B = rng.integers(-(1 << 31), 1 << 31, (nv, L))
    edges = np.array(EDGE_A)
    A[: nv // 2] = rng.choice(edges, (nv // 2, L))
    B[nv // 4: 3 * nv // 4] = rng.choice(edges, (nv // 2, L))
    A[0], B[0] = (1 << 31) - 1, -(1 << 31)
    pa = archmodel.to_planes(A.reshape(-1)).reshape(INT32_PLANES, nv, L)
    pb = archmodel.to_planes(B.reshape(-1)).reshape(INT32_PLANES, nv, L)
    t0, s_in = 20, 2                                   # A on E2..E5, B on W2..W5
    # MEM_E0 and MEM_W0 read a plane for VOP k on T_k - d - READ_LATENCY and store the
    # result of VOP j on T_j + vxm_latency + d: VOPs every `every` cycles, where no two
    # VOPs are that difference apart (one queue issues one instruction per cycle).
    d = pl.dist("VXM", "MEM_E0")
    assert d == pl.dist("VXM", "MEM_W0")
    every = next(p for p in range(2, 8) if (2 * d + READ_LATENCY + cfg.vxm_latency) % p)
    for b in range(INT32_PLANES):
        pl.store(west[b], 100, pa[b])
        pl.send(west[b], 100, "VXM", t0, s_in + b, count=nv, every=every)
        pl.store(east[b], 100, pb[b])
        pl.send(east[b], 100, "VXM", t0, s_in + b, count=nv, every=every)
    # Parameter entries: lane l of entry e takes edge sets (e + l + offset) for A, B and C.
    for e in range(cfg.vxm_param_depth):
        for l in range(L):
            for key, off in (("a", 0), ("b", 5), ("c", 11)):
                bias, mult, shift = EDGE_PARAMS[(e + l + off) % len(EDGE_PARAMS)]
                if key != "c":
                    pl.params[e, l, F[f"bias_{key}"]] = bias
                pl.params[e, l, F[f"m_{key}"]] = mult
                pl.params[e, l, F[f"s_{key}"]] = shift
    pl.table = rng.integers(-128, 128, 256)
    flags_of = [ALL_FLAGS[k % len(ALL_FLAGS)] | (OUT_E if k % 3 == 0 else 0) for k in range(nv)]
    entry_of = [(5 * k) % cfg.vxm_param_depth for k in range(nv)]
    for k in range(nv):
        t, out, fl = t0 + every * k, 6 + k % 2, flags_of[k]
        pl.at("VXM", t, Instr.vop(s_in, EAST, param=entry_of[k], out=out, flags=fl))
        if fl & OUT_E:
            pl.catch("VXM", t + cfg.vxm_latency, "MEM_E0", out, 200 + k)
        if fl & OUT_W:
            pl.catch("VXM", t + cfg.vxm_latency, "MEM_W0", out, 200 + k)
    prog = pl.program()

    # Second job: MXM_W loads with n = 8 from all eight MEM slices, then MM, ACC, EMIT.
    pm = Plan(cfg)
    w = rng.integers(-128, 128, (L, L))
    w[0] = -128
    srcs = sorted(cfg.mem_names, key=lambda n: pm.dist("MXM_W", n))
    on = load_weights(pm, "MXM_W", 0, w, 8, 0, 12, srcs, 300)
    xs = rng.integers(-128, 128, (3, L))
    xs[0] = -128
    pm.store("MEM_E3", 320, xs)
    pm.send("MEM_E3", 320, "MXM_W", on, 7, count=3)
    pm.at("MXM_W", on, Instr.mm(7, WEST, acc=100, out=4, flags=EMIT))
    pm.at("MXM_W", on + 1, Instr.mm(7, WEST, acc=100, out=4, flags=ACC | EMIT), count=2, stride=0)
    cw = emit_catchers(pm, "MXM_W")
    catch_emit(pm, "MXM_W", on, 4, 400, cw, count=3)

    (res, res_mm), _ = run_checked(cfg, simulator, [prog, pm.program()])
    got = written(res)
    for k in range(nv):
        want = vop_reference(A[k], B[k], prog.vxm_params[entry_of[k]], prog.table, flags_of[k])
        for flag, where in ((OUT_E, "MEM_E0"), (OUT_W, "MEM_W0")):
            if flags_of[k] & flag:
                assert np.array_equal(s8(got[(where, 200 + k)]), want), (k, flags_of[k])
    sums = np.cumsum(w @ xs.T, axis=1)
    got = written(res_mm)
    for k in range(3):
        assert np.array_equal(int32_at(got, cw, 400 + k), sums[:, k]), k


def test_vxm_memories_read_back(simulator):
    """Host writes of the parameter memory and table (only the changed words), read back
    over the host bus; then a job with the defaults restores the power-up contents."""
    cfg = TileConfig.tiny()
    rng = np.random.default_rng(7)
    prog = Program(cfg)
    prm = prog.vxm_params.copy()
    prm[:, :, F["bias_a"]] = rng.integers(-(1 << 31), 1 << 31, prm.shape[:2])
    prm[:, :, F["bias_b"]] = rng.integers(-(1 << 31), 1 << 31, prm.shape[:2])
    for f in ("m_a", "m_b", "m_c"):
        prm[:, :, F[f]] = rng.integers(1, 32768, prm.shape[:2])
    for f in ("s_a", "s_b", "s_c"):
        prm[:, :, F[f]] = rng.integers(0, 47, prm.shape[:2])
    prog.set_vxm_params(prm)
    prog.set_table(rng.integers(-128, 128, 256))
    res, _ = run_checked(cfg, simulator, [prog, Program(cfg)], read_vxm=True)
    assert res[0]["vxm_words"] == [param_words(prog.vxm_params), table_words(prog.table)]
    assert res[1]["vxm_words"] == list(reset_words(cfg))


@pytest.mark.parametrize("simulator", ONE_SIM)
def test_vop_over_uart(simulator):
    """The VXM's parameters and table loaded over the UART host bridge (the shared driver):
    VOPs on empty streams (A = B = 0) show the biases, multipliers, shifts and table."""
    from sim.harness.runner import TileSim
    cfg = TileConfig.tiny()
    L = cfg.lanes
    rng = np.random.default_rng(8)
    pl = Plan(cfg)
    prm = pl.params
    prm[5, :, F["bias_a"]] = rng.integers(-4000, 4000, L)
    prm[5, :, F["bias_b"]] = [-(1 << 31), (1 << 31) - 1, 300, -300]
    prm[5, :, F["m_a"]], prm[5, :, F["s_a"]] = rng.integers(1, 32768, L), [12, 13, 14, 15]
    prm[5, :, F["m_b"]], prm[5, :, F["s_b"]] = [1, 32767, 3, 5], [24, 40, 2, 3]
    prm[5, :, F["m_c"]], prm[5, :, F["s_c"]] = [32767, 1, 77, 5000], [16, 0, 7, 13]
    pl.table = np.arange(256).astype(np.uint8).astype(np.int8).astype(np.int64)
    a = requantise(prm[5, :, F["bias_a"]], prm[5, :, F["m_a"]], prm[5, :, F["s_a"]]).astype(np.int64)
    pl.table[a & 0xFF] = rng.integers(-128, 128, L)
    pl.at("VXM", 3, Instr.vop(0, EAST, param=5, out=1, flags=TABLE | GATE | OUT_E))
    pl.at("VXM", 4, Instr.vop(0, WEST, param=5, out=3, flags=OUT_W | OUT_E))
    pl.catch("VXM", 3 + cfg.vxm_latency, "MEM_E0", 1, 7)
    pl.catch("VXM", 4 + cfg.vxm_latency, "MEM_W0", 3, 8)
    pl.catch("VXM", 4 + cfg.vxm_latency, "MEM_E1", 3, 9)
    prog = pl.program()
    gold = archmodel.run(prog)
    # The VOPs read streams nothing drives (they carry 0): only the parameters and the table
    # shape the results, on purpose; the static checker would call that an undriven read.
    res = TileSim(cfg, simulator, top="uart").run([job(prog, checked=False)])[0]
    problems = check_run(res, gold)
    assert not problems, "\n".join(problems)
    got = written(res)
    zero = np.zeros(L, np.int64)
    assert np.array_equal(s8(got[("MEM_E0", 7)]), vop_reference(zero, zero, prog.vxm_params[5], prog.table, TABLE | GATE))
    assert np.array_equal(s8(got[("MEM_W0", 8)]), a)
    assert np.array_equal(s8(got[("MEM_E1", 9)]), a)


# ---- unit level (Amaranth's simulator, no HDL simulator needed) ---------------------------
def test_requantise_unit_matches_numerics():
    """The VXM's requantise circuit against quantise.requantise on edge and random operands."""
    from amaranth import Elaboratable, Module, Signal, signed
    from amaranth.sim import Simulator

    from hdl.units.vxm import requantise as hw_requantise

    class Dut(Elaboratable):
        def __init__(self):
            self.v, self.m, self.s = Signal(signed(32)), Signal(15), Signal(6)
            self.out = None

        def elaborate(self, platform):
            mod = Module()
            self.out = hw_requantise(mod, self.v, self.m, self.s, "rq")
            return mod

    rng = np.random.default_rng(9)
    edge_v = [(1 << 31) - 1, -(1 << 31), 0, 1, -1, 127, 128, -128, -129, 1 << 30, -(1 << 30)]
    cases = [(v, m, s) for v in edge_v for m in (1, 2, 32767) for s in (0, 1, 2, 24, 45, 46)]
    cases += list(zip(rng.integers(-(1 << 31), 1 << 31, 1500), rng.integers(1, 32768, 1500),
                      rng.integers(0, 47, 1500)))
    v, m, s = (np.array(c, np.int64) for c in zip(*cases))
    want = requantise(v, m, s)
    dut = Dut()
    mod = Module()
    mod.submodules.dut = dut
    got = []

    async def bench(ctx):
        for a, b, c in cases:
            ctx.set(dut.v, int(a))
            ctx.set(dut.m, int(b))
            ctx.set(dut.s, int(c))
            got.append(ctx.get(dut.out))

    sim = Simulator(mod)
    sim.add_testbench(bench)
    sim.run()
    bad = [(cases[i], int(want[i]), got[i]) for i in range(len(cases)) if got[i] != want[i]]
    assert not bad, bad[:5]


def test_start_cancels_weight_load_unit():
    """MXM alone: an LW still waiting for its rows when a start arrives is cancelled, and
    the start clears the active block; an LW after the start loads normally."""
    from amaranth.sim import Simulator

    from hdl.units.mxm import MXM

    cfg = TileConfig.tiny()
    L = cfg.lanes
    dut = MXM(cfg, "W")
    lw = Instr.lw(0, WEST, n=L, delay=4)
    mm = Instr.mm(1, WEST, acc=0, out=0, flags=EMIT)
    w = np.arange(L * L).reshape(L, L) % 7 - 3
    x = np.array([1, -2, 3, -4])
    seen = []

    def vec(v):
        return int.from_bytes(bytes(int(b) & 0xFF for b in v), "little")

    async def issue(ctx, ins):
        port = dut.ld_issue if ins.op == Op.LW else dut.issue      # LW: from the loader queue
        ctx.set(port.valid, 1)
        ctx.set(port.instr.as_value(), ins.encode())
        await ctx.tick()
        ctx.set(port.valid, 0)

    async def emitted(ctx):
        """MM now, then the int32 lanes EMIT drives MXM_LATENCY cycles later."""
        await issue(ctx, mm)
        await ctx.tick().repeat(MXM_LATENCY - 1)
        planes = [ctx.get(dut.drive.east.data[b]) for b in range(INT32_PLANES)]
        assert ctx.get(dut.drive.east.mask) == 0b1111
        return archmodel.from_planes([[(p >> (8 * l)) & 0xFF for l in range(L)] for p in planes])

    async def bench(ctx):
        for r in range(L):                              # rows on streams 0..3, x on stream 1
            ctx.set(dut.tap.west[r], vec(w[r]))
        await issue(ctx, lw)                            # rows would be sampled 4 cycles later
        await ctx.tick()
        ctx.set(dut.start, 1)
        await ctx.tick()
        ctx.set(dut.start, 0)
        await ctx.tick().repeat(6)
        ctx.set(dut.tap.west[1], vec(x))
        seen.append(await emitted(ctx))                 # cancelled: the cleared block
        for r in range(L):
            ctx.set(dut.tap.west[r], vec(w[r]))
        await issue(ctx, lw)
        await ctx.tick().repeat(5)
        ctx.set(dut.tap.west[1], vec(x))
        seen.append(await emitted(ctx))

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    assert np.array_equal(seen[0], np.zeros(L))
    assert np.array_equal(seen[1], w @ x)
