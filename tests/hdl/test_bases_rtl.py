"""Base registers and several activation tables in the RTL (``docs/isa.md``, "Base
registers"; ``lpu_arch/vxm.py``).

What is tested
--------------
* Fast (no HDL simulator): the host side's checks of a job's base register words
  (``sim.harness.runner.base_words``, ``job``, ``system_run``); the driver writing only the base
  registers and table words that changed (a fake bus); the instruction queue's legal-word
  masks (a base operand ``>= base_regs`` is illegal, every other bit as ``isa``'s table
  says); and, in Amaranth's simulator, the tile's base register CSRs (power-up 0, register
  0 constant, written only while stopped, kept across a start) and the VXM's parameter
  fault and busy counter seen over the host bus.
* RTL on every simulator (``LPU_SIMS``), one simulation per simulator for all jobs: tiny
  hand-placed programs run with several settings of their base registers.  Per program,
  every setting takes the same number of cycles, equal to the golden model's
  (``archmodel.run(program, bases=...)``), and the trace of MEM writes, the busy counters
  and the rows read back are the golden model's, bit for bit.  The programs: a READ
  relocated, skipped (a zero vector on its stream, one busy cycle fewer) and relocated
  beyond the depth (``ADDR_FAULT``); a WRITE relocated and skipped (no store, no event);
  VOPs with a relocated parameter entry whose lanes name different activation tables,
  skipped (zero vectors) and relocated beyond ``vxm_param_depth`` (``PARAM_FAULT``, zero
  vectors, cleared by the next start); base operands ``>= base_regs`` on READ, WRITE and
  VOP words (``ILLEGAL_OP``: those queues halt as at a HALT).  The golden model rejects the
  fault settings, so they are compared with the register off (the same zero values) and
  with it on (the same busy counts).
"""

import dataclasses

import numpy as np
import pytest
from amaranth.sim import Simulator

from firmware_gen.golden import archmodel
from firmware_gen.program import Program
from firmware_gen.compiler.reserve import lower
from lpu_arch import TileConfig, hostmap, isa
from lpu_arch.hostmap import Csr, Region, Status, base_word
from lpu_arch.isa import EAST, MXM_LATENCY, READ_LATENCY, WEST, Instr, MMFlag, Op, VopFlag
from lpu_arch.vxm import VXM_FIELDS
from sim.harness.runner import base_words, job, observed_events, system_run
from sim.harness.scoreboard import check_run

from tests.helpers import SIMS, get_sim

CFG = TileConfig.tiny()
F = {f: i for i, f in enumerate(VXM_FIELDS)}
OFF = base_word(0, on=False)


def bases(**regs):
    """Host words of every base register: ``r<k>=word`` for the ones given, else 0."""
    words = [0] * CFG.base_regs
    for name, w in regs.items():
        words[int(name[1:])] = w
    return words


# ---- fast: the host side's checks -----------------------------------------------------------
def test_base_words_checked():
    assert base_words(CFG) == [0] * CFG.base_regs
    good = bases(r1=base_word(5), r2=OFF, r15=base_word((1 << isa.BASE_OFFSET_BITS) - 1))
    assert base_words(CFG, good) == good
    assert base_words(CFG, np.array(good, np.int64)) == good
    for bad, words in [([0] * (CFG.base_regs - 1), "has 15 words; the tile has 16 base registers"),
                       (bases(r3=1 << 20), "base register 3: word 0x100000 is not a base register word"),
                       (bases(r3=-1), "base register 3: word -0x1 is not a base register word"),
                       (bases(r0=base_word(1)), "base register 0 is the constant"),
                       (bases(r2=1.5), "base register 2: the word must be an integer"),
                       (7, "bases must be a list of 16")]:
        with pytest.raises(ValueError, match=words.replace("(", r"\(")):
            base_words(CFG, bad)
    prog = Program.assemble(CFG, "[MEM_W0]\nREAD E0, 1, base=2\n")
    assert job(prog, checked=False)["bases"] == [0] * CFG.base_regs
    assert job(prog, checked=False, bases=good)["bases"] == good
    with pytest.raises(ValueError, match="has 2 words"):
        job(prog, checked=False, bases=[0, 0])
    run = system_run([prog, prog], [0, 0], checked=False, bases=[good, None])
    assert [j["bases"] for j in run["jobs"]] == [good, [0] * CFG.base_regs]
    with pytest.raises(ValueError, match="one list of base register words per tile"):
        system_run([prog, prog], [0, 0], checked=False, bases=[good])


def test_driver_writes_only_changed_registers_and_table_words():
    """``TileDriver.load_bases`` writes registers 1.. that differ from what the tile holds
    (a job without bases: back to 0); ``load_vxm`` writes the changed words of a
    ``(vxm_tables, 256)`` table at ``t * 256 + i``."""
    import asyncio
    from lpu_arch.vxm import identity_tables
    from sim.tb.driver import TileDriver
    drv = TileDriver(None, CFG)
    drv.config_checked = True
    writes = []

    async def write_words(items):
        writes.append(list(items))
    drv.write_words = write_words
    reg = lambda r: hostmap.csr(Csr.BASE_REG_BASE + r)       # noqa: E731
    asyncio.run(drv.load_bases(bases(r0=0, r1=base_word(5), r3=OFF)))
    asyncio.run(drv.load_bases(bases(r1=base_word(5), r3=OFF)))
    asyncio.run(drv.load_bases(None))
    assert writes == [[(reg(1), base_word(5)), (reg(3), OFF)], [], [(reg(1), 0), (reg(3), 0)]]
    with pytest.raises(ValueError, match="15 base register words; the tile has 16"):
        asyncio.run(drv.load_bases([0] * 15))
    writes.clear()
    tables = identity_tables(CFG)
    tables[2, 7] = -3
    asyncio.run(drv.load_vxm(table=tables.tolist()))
    asyncio.run(drv.load_vxm(table=identity_tables(CFG).tolist()))
    assert writes == [[(hostmap.addr(Region.VXM_TABLE, 0, 2 * 256 + 7), 0xFD)],
                      [(hostmap.addr(Region.VXM_TABLE, 0, 2 * 256 + 7), 7)]]
    assert len(drv.vxm_words[1]) == CFG.vxm_tables * 256


def test_queue_mask_refuses_missing_base_registers():
    """Only the base operand's bits naming a register ``>= base_regs`` leave the mask."""
    from hdl.units.icu import legal_word_mask
    delay = isa.FIELD["delay"][0]
    for base_regs in (2, 16, 256):
        cfg = dataclasses.replace(CFG, base_regs=base_regs)
        for op in isa.Op:
            want = isa.used_word_mask(op)
            if op in isa.BASE_OPS:
                want &= ~((0xFF & ~(base_regs - 1)) << delay)
            if op == isa.Op.LW and not cfg.mxm_partial_lw:          # (LW's rows: none)
                want &= ~(((1 << 14) - 1) << isa.FIELD["addr"][0])
            assert legal_word_mask(cfg, op) == want, (op.name, base_regs)
    # rows=3 is a legal LW where the MXM has the row limit, an illegal word where it has not
    lw = Instr.lw(0, EAST, n=1, rows=3).encode()
    for partial in (0, 1):
        cfg = dataclasses.replace(CFG, mxm_partial_lw=partial)
        assert bool(lw & ~legal_word_mask(cfg, isa.Op.LW)) == (not partial), partial
    word = Instr.read(0, EAST, 1, base=CFG.base_regs).encode()
    assert word & ~legal_word_mask(CFG, Op.READ) == CFG.base_regs << delay


# ---- fast: the tile's CSRs in Amaranth's simulator -------------------------------------------
class Bus:
    """The tile's host bus from an Amaranth testbench: one access per cycle."""

    def __init__(self, ctx, dut):
        self.ctx, self.dut = ctx, dut

    async def write(self, addr, value):
        ctx, h = self.ctx, self.dut.host
        ctx.set(h.addr, addr)
        ctx.set(h.wdata, value)
        ctx.set(h.we, 1)
        await ctx.tick()
        ctx.set(h.we, 0)

    async def read(self, addrs):
        ctx, h, out = self.ctx, self.dut.host, []
        for a in list(addrs) + [None] * hostmap.HOST_READ_LATENCY:
            ctx.set(h.re, a is not None)
            if a is not None:
                ctx.set(h.addr, a)
            await ctx.tick()
            if ctx.get(h.rvalid):
                out.append(ctx.get(h.rdata))
        return out

    async def regs(self):
        return await self.read([hostmap.csr(Csr.BASE_REG_BASE + r) for r in range(CFG.base_regs)])


def test_tile_base_csrs_and_param_fault():
    """Base register CSRs: 0 after reset; register 0 reads 0 and ignores writes; register r
    reads back its offset and off bit (the word's other bits are dropped); a write while
    the tile runs is ignored; a start keeps them.  A VOP relocated beyond
    ``vxm_param_depth`` sets ``Status.PARAM_FAULT`` and ``fault`` (counted as a busy
    cycle), a start clears it; a skipped VOP is no busy cycle."""
    from hdl.top.tile import Tile
    dut = Tile(CFG)
    vxm = CFG.position("VXM")
    P = CFG.vxm_param_depth
    vop = Instr.vop(0, EAST, param=P - 1, out=0, flags=VopFlag.OUT_E, base=1).encode()
    # A queue that runs long enough for a host write while it runs: NOP 40, VOP, HALT.
    words = [w for ins in (Instr.nop(40).encode(), vop, Instr.halt().encode()) for w in (ins & 0xFFFFFFFF, ins >> 32)]
    out = {}

    async def bench(ctx):
        bus = Bus(ctx, dut)
        out["reset"] = await bus.regs()
        for i, w in enumerate(words):
            await bus.write(hostmap.addr(Region.IMEM, vxm, i), w)
        await bus.write(hostmap.csr(Csr.BASE_REG_BASE), base_word(9))
        await bus.write(hostmap.csr(Csr.BASE_REG_BASE + 1), base_word(1) | 0x7FF00000)     # junk bits dropped
        await bus.write(hostmap.csr(Csr.BASE_REG_BASE + CFG.base_regs - 1), base_word(12345, on=False))
        out["written"] = await bus.regs()
        runs = []
        for reg1 in (None, OFF, base_word(0)):           # offset 1 (fault), off (skip), offset 0
            if reg1 is not None:
                await bus.write(hostmap.csr(Csr.BASE_REG_BASE + 1), reg1)
            await bus.write(hostmap.csr(Csr.CTRL), 1)
            await ctx.tick().repeat(5)
            await bus.write(hostmap.csr(Csr.BASE_REG_BASE + 2), base_word(77))   # running: ignored
            while not ctx.get(dut.done):
                await ctx.tick()
            status, busy = await bus.read([hostmap.csr(Csr.STATUS), hostmap.csr(Csr.BUSY_BASE + vxm)])
            runs.append((status, busy, ctx.get(dut.fault), (await bus.regs())[:3]))
        out["runs"] = runs

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    n = CFG.base_regs
    assert out["reset"] == [0] * n, f"base registers after reset: {out['reset']}"
    want = [0, base_word(1)] + [0] * (n - 3) + [base_word(12345, on=False)]
    assert out["written"] == want, f"base registers read back {out['written']}, expected {want}"
    (st0, busy0, f0, r0), (st1, busy1, f1, r1), (st2, busy2, f2, r2) = out["runs"]
    assert st0 & Status.PARAM_FAULT and f0 and busy0 == 1, (
        f"VOP param={P - 1}, base=1 (offset 1: entry {P}) must set PARAM_FAULT and fault: STATUS {st0:#x}, "
        f"fault {f0}, busy {busy0}")
    assert not st1 & Status.PARAM_FAULT and not f1 and busy1 == 0, (
        f"with register 1 off the VOP skips: STATUS {st1:#x} (PARAM_FAULT cleared by the start), busy {busy1}")
    assert not st2 & Status.PARAM_FAULT and not f2 and busy2 == 1, f"offset 0: STATUS {st2:#x}, busy {busy2}"
    assert [r0, r1, r2] == [[0, base_word(1), 0], [0, OFF, 0], [0, 0, 0]], (
        f"registers after each run (a write while running must be ignored): {[r0, r1, r2]}")


# ---- RTL: hand-placed programs ------------------------------------------------------------------
class Plan:
    """Instructions at absolute issue cycles (``lower`` fills the gaps with NOPs)."""

    def __init__(self, cfg):
        self.cfg, self.items = cfg, {}
        self.memory = {n: np.zeros((cfg.mem_depth, cfg.lanes), np.uint8) for n in cfg.mem_names}
        self.params = Program(cfg).vxm_params.copy()
        self.table = None

    def at(self, name, cycle, ins, repeat=None):
        self.items.setdefault(name, []).append((cycle, ins, repeat))

    def dist(self, a, b):
        return abs(self.cfg.position(a) - self.cfg.position(b))

    def program(self):
        prog = Program(self.cfg, {n: lower(e, merge=False) for n, e in self.items.items()}, self.memory, self.params)
        if self.table is not None:
            prog.set_table(self.table)
        return prog


def s8(v):
    return np.asarray(np.asarray(v, np.int64) & 0xFF, np.uint8).astype(np.int8).astype(np.int64)


def read_program(rng):
    """MEM_W1 READs row 2 (base 1) east; MEM_E1 WRITEs it at row 10 (base 0); and an
    unrelocated READ/WRITE pair west (MEM_E0 row 7 to MEM_W0 row 11)."""
    pl = Plan(CFG)
    pl.memory["MEM_W1"][:] = rng.integers(0, 256, (CFG.mem_depth, CFG.lanes))
    pl.memory["MEM_E0"][7] = rng.integers(0, 256, CFG.lanes)
    pl.at("MEM_W1", 0, Instr.read(0, EAST, 2, base=1))
    pl.at("MEM_E1", READ_LATENCY + pl.dist("MEM_W1", "MEM_E1"), Instr.write(0, EAST, 10))
    pl.at("MEM_E0", 0, Instr.read(1, WEST, 7))
    pl.at("MEM_W0", READ_LATENCY + pl.dist("MEM_E0", "MEM_W0"), Instr.write(1, WEST, 11))
    return pl.program()


def write_program(rng):
    """MEM_W1 READs rows 3..5 east; MEM_E1 WRITEs them at rows 10..12 with base 2."""
    pl = Plan(CFG)
    pl.memory["MEM_W1"][3:6] = rng.integers(0, 256, (3, CFG.lanes))
    pl.at("MEM_W1", 0, Instr.read(0, EAST, 3), Instr.repeat(2, 1, +1))
    pl.at("MEM_E1", READ_LATENCY + pl.dist("MEM_W1", "MEM_E1"), Instr.write(0, EAST, 10, base=2),
          Instr.repeat(2, 1, +1))
    return pl.program()


def vop_program(rng, n=3):
    """MXM_W (identity weights) emits x as int32 planes on E0..E3; the VXM runs ``n`` VOPs
    (parameter entry 1, base 3, TABLE) and MEM_E0 stores them at rows 20..  Entry 1 is the
    identity with table 0; entry 9 has biases and lane l names table (l + 1) % tables; the
    last entry biases and the last table; every table is random."""
    L, pl = CFG.lanes, Plan(CFG)
    eye = np.eye(L, dtype=np.int64)
    pl.at("MXL_W", 0, Instr.lw(0, WEST, n=2, delay=7))          # row r from W(r % 2) on 7 + r // 2
    for src, first, stream in (("MEM_W0", 0, 0), ("MEM_E0", 1, 1)):
        pl.memory[src][60:62] = eye[first::2] & 0xFF
        pl.at(src, 7 - READ_LATENCY - pl.dist(src, "MXM_W"), Instr.read(stream, WEST, 60), Instr.repeat(1, 1, +1))
    xs = rng.integers(-128, 128, (n, L))
    pl.memory["MEM_W1"][0:n] = xs & 0xFF
    t_mm = 12
    pl.at("MEM_W1", t_mm - READ_LATENCY - pl.dist("MEM_W1", "MXM_W"), Instr.read(0, WEST, 0),
          Instr.repeat(n - 1, 1, +1))
    pl.at("MXM_W", t_mm, Instr.mm(0, WEST, acc=0, out=0, flags=MMFlag.EMIT), Instr.repeat(n - 1, 1, 0))
    t_vop = t_mm + MXM_LATENCY + pl.dist("MXM_W", "VXM")
    pl.at("VXM", t_vop, Instr.vop(0, EAST, param=1, out=2, flags=VopFlag.TABLE | VopFlag.OUT_E, base=3),
          Instr.repeat(n - 1, 1, 0))
    pl.at("MEM_E0", t_vop + CFG.vxm_latency + pl.dist("VXM", "MEM_E0"), Instr.write(2, EAST, 20),
          Instr.repeat(n - 1, 1, +1))
    pl.params[9, :, F["bias_a"]] = rng.integers(-40, 40, L)
    pl.params[9, :, F["table"]] = (np.arange(L) + 1) % CFG.vxm_tables
    pl.params[CFG.vxm_param_depth - 1, :, F["bias_a"]] = rng.integers(-40, 40, L)     # the last entry
    pl.params[CFG.vxm_param_depth - 1, :, F["table"]] = CFG.vxm_tables - 1
    pl.table = rng.integers(-128, 128, (CFG.vxm_tables, 256))
    return pl.program(), xs


def illegal_program():
    """Queues whose words name base registers the tile lacks once ``patch_illegal`` has
    set them: MEM_W1's READ (base 16), MEM_E1's WRITE (base 31), the VXM's VOP (base 255);
    the golden model runs the program with those queues stopped there (a HALT)."""
    pl = Plan(CFG)
    pl.memory["MEM_E1"][4] = np.arange(1, CFG.lanes + 1)
    pl.at("MEM_W1", 2, Instr.read(0, EAST, 2, base=1))
    pl.at("MEM_E1", 0, Instr.read(3, WEST, 4))
    pl.at("MEM_E1", 6, Instr.write(0, EAST, 10, base=1))
    pl.at("MEM_W0", READ_LATENCY + 6 - 3, Instr.write(3, WEST, 9))
    pl.at("VXM", 4, Instr.vop(0, EAST, param=0, out=1, flags=VopFlag.OUT_W, base=1))
    prog = pl.program()
    bad = {"MEM_W1": CFG.base_regs, "MEM_E1": 31, "VXM": 255}
    stopped = {n: [i for i in q if not (i.op in isa.BASE_OPS and i.base)] if n in bad else q
               for n, q in prog.queues.items()}
    return prog, Program(CFG, stopped, prog.memory, prog.vxm_params, prog.table), bad


def patch_illegal(jb, prog, bad):
    """Set the base operand of each queue's base-register word in the job's images."""
    mask = ((1 << isa.BASE_BITS) - 1) << isa.FIELD["delay"][0]
    for name, base in bad.items():
        k = next(i for i, ins in enumerate(prog.queues[name]) if ins.op in isa.BASE_OPS and ins.base)
        w = jb["images"][name][k]
        jb["images"][name][k] = (w & ~mask) | base << isa.FIELD["delay"][0]
    return jb


def cases():
    """``[(name, program, [(setting, bases, expect)], read_back)]``; ``expect`` is None (the
    golden model of that setting) or ``{"like": setting, "busy_like": setting, "status":
    STATUS bits, "addr_fault"/"illegal": masks, "golden": program}``."""
    rng = np.random.default_rng(11)
    D, P = CFG.mem_depth, CFG.vxm_param_depth
    vprog, _ = vop_program(rng)
    iprog, istopped, ibad = illegal_program()
    pos = CFG.position
    illegal = sum(1 << pos(n) for n in ibad)
    return [
        ("read", read_program(rng), [
            ("offset0", bases(r1=base_word(0)), None),
            ("offset5", bases(r1=base_word(5)), None),
            ("offset61", bases(r1=base_word(D - 3)), None),
            ("off", bases(r1=OFF), None),
            ("beyond", bases(r1=base_word(D - 2)),          # row 64: ADDR_FAULT, the READ drives nothing
             {"like": "off", "busy_like": "offset0", "status": Status.ADDR_FAULT,
              "addr_fault": 1 << CFG.mem_names.index("MEM_W1")}),
        ], {"MEM_E1": [10], "MEM_W0": [11]}),
        ("write", write_program(rng), [
            ("offset0", bases(r2=base_word(0)), None),
            ("offset40", bases(r2=base_word(40)), None),
            ("off", bases(r2=OFF, r1=base_word(3)), None),
        ], {"MEM_E1": [10, 11, 12, 50, 51, 52]}),
        ("vop", vprog, [
            ("entry1", bases(r3=base_word(0)), None),
            ("entry9", bases(r3=base_word(8)), None),
            ("off", bases(r3=OFF), None),
            ("entry15", bases(r3=base_word(P - 2)), None),
            ("beyond", bases(r3=base_word(P - 1)),          # entry P: PARAM_FAULT, zero vectors
             {"like": "off", "busy_like": "entry1", "status": Status.PARAM_FAULT}),
            ("after", bases(r3=base_word(8)), None),         # the start cleared PARAM_FAULT
        ], {"MEM_E0": [20, 21, 22]}),
        ("illegal", iprog, [
            ("on", bases(r1=base_word(3)), {"golden": istopped, "status": Status.ILLEGAL_OP, "illegal": illegal}),
            ("off", bases(r1=OFF), {"golden": istopped, "status": Status.ILLEGAL_OP, "illegal": illegal}),
        ], {"MEM_E1": [10], "MEM_W0": [9]}),
    ], (iprog, ibad)


FAULTS = Status.ILLEGAL_OP | Status.ADDR_FAULT | Status.PARAM_FAULT | Status.TRACE_OVERFLOW


@pytest.fixture(scope="module")
def batch():
    """Every case's jobs on each simulator, one simulation each: ``{sim: {(case, setting): result}}``."""
    out = {}

    def get(sim):
        if sim not in out:
            table, (iprog, ibad) = cases()
            jobs, keys = [], []
            for name, prog, settings, read_back in table:
                for setting, words, _ in settings:
                    jb = job(prog, name=f"{name}/{setting}", read_back=read_back, bases=words,
                             checked=name != "illegal", read_bases=True)
                    jobs.append(patch_illegal(jb, iprog, ibad) if name == "illegal" else jb)
                    keys.append((name, setting))
            out[sim] = dict(zip(keys, get_sim(CFG, sim).run(jobs, name="bases")))
        return out[sim]
    return get


@pytest.mark.sim
@pytest.mark.parametrize("simulator", SIMS)
def test_base_registers_rtl(batch, simulator):
    results = batch(simulator)
    table, _ = cases()
    problems = []
    for name, prog, settings, _ in table:
        golds = {}
        for setting, words, expect in settings:
            if expect is None:
                golds[setting] = archmodel.run(prog, bases=words)
            elif "golden" in expect:
                golds[setting] = archmodel.run(expect["golden"], bases=words)
        cycles = {setting: results[name, setting]["cycles"] for setting, _, _ in settings}
        if len(set(cycles.values())) != 1:
            problems.append(f"{name}: the cycle count depends on the base registers: {cycles}")
        for setting, words, expect in settings:
            res, what = results[name, setting], f"{name}/{setting}"
            if res["base_words"] != words:
                problems.append(f"{what}: base registers read back {res['base_words']}, loaded {words}")
            expect = expect or {}
            gold = golds.get(setting) or golds[expect["like"]]
            if expect and "golden" not in expect:
                # The golden model rejects the setting: values as with the register off,
                # busy counts as with it on, cycles as every other setting's.
                gold = dataclasses.replace(gold, busy=golds[expect["busy_like"]].busy)
            clean = dict(res, illegal=0, addr_fault=0, status=res["status"] & ~Status.PARAM_FAULT)   # checked below
            problems += [f"{what}: {p}" for p in check_run(clean, gold)]
            if res["status"] & FAULTS != expect.get("status", 0):
                problems.append(f"{what}: STATUS fault bits {res['status'] & FAULTS:#x}, expected "
                                f"{int(expect.get('status', 0)):#x}")
            for key in ("illegal", "addr_fault"):
                if res[key] != expect.get(key, 0):
                    problems.append(f"{what}: {key} {res[key]:#x}, expected {expect.get(key, 0):#x}")
    assert not problems, "\n".join(problems)

    # What the settings did, stated from the programs (not from the golden model).
    ev = {k: {(s, a): d for _, s, a, d in observed_events(r)} for k, r in results.items()}
    mem_w1 = table[0][1].memory["MEM_W1"]
    assert ev["read", "offset5"]["MEM_E1", 10] == tuple(mem_w1[7])
    assert ev["read", "off"]["MEM_E1", 10] == (0,) * CFG.lanes
    busy = {k: r["busy"] for k, r in results.items()}
    assert busy["read", "off"]["MEM_W1"] == busy["read", "offset0"]["MEM_W1"] - 1 == 0
    assert busy["read", "beyond"]["MEM_W1"] == 1
    assert sorted(ev["write", "offset40"]) == [("MEM_E1", 50), ("MEM_E1", 51), ("MEM_E1", 52)]
    assert ev["write", "off"] == {} and busy["write", "off"]["MEM_E1"] == 0
    assert results["write", "off"]["read_back"]["MEM_E1"] == [[0] * CFG.lanes] * 6
    vprog = table[2][1]
    xs = s8(vprog.memory["MEM_W1"][:3])
    for k in range(3):
        a = np.clip(xs[k] + vprog.vxm_params[9, :, F["bias_a"]], -128, 127)
        want = [int(vprog.table[(l + 1) % CFG.vxm_tables, a[l] & 0xFF]) & 0xFF for l in range(CFG.lanes)]
        assert list(ev["vop", "entry9"]["MEM_E0", 20 + k]) == want, k
        assert ev["vop", "off"]["MEM_E0", 20 + k] == ev["vop", "beyond"]["MEM_E0", 20 + k] == (0,) * CFG.lanes
    assert busy["vop", "off"]["VXM"] == 0 and busy["vop", "beyond"]["VXM"] == busy["vop", "entry1"]["VXM"] == 3
