"""SXM lane movement (shift, rotate, permute, distribute, transpose) against numpy, on
the golden model and on the RTL of both simulators.

Every case streams x from MEM_W1 and a map from MEM_W0 into SXM_W, one instruction per
cycle, and writes each result into MEM_E0, where the trace observes it; the expected
vectors come from numpy (np.roll, fancy indexing, .T), not from the model."""

import numpy as np
import pytest

from lpu_arch import TileConfig

from firmware_gen import archmodel
from firmware_gen.reserve import lower
from lpu_arch.isa import EAST, SXM_LATENCY, WEST, Instr, IsaError, Op, SxmFlag
from firmware_gen.program import Program, ProgramError

OUT = SxmFlag.OUT_E


def numpy_ref(kind, x, k=0, idx=None, g=1):
    L = len(x)
    if kind == "rot_up":
        return np.roll(x, k)
    if kind == "rot_down":
        return np.roll(x, -k)
    if kind == "shift_up":
        return np.concatenate([np.zeros(k, np.uint8), x[:L - k]])
    if kind == "shift_down":
        return np.concatenate([x[k:], np.zeros(k, np.uint8)])
    if kind == "perm":
        return np.array([x[i] if i < L else 0 for i in idx], np.uint8)
    if kind == "dist":
        return np.tile(x[k:k + g], L // g)
    raise ValueError(kind)


def build(cfg, cases):
    """cases: [(Instr for SXM_W, x vector or None, map vector or None, expected or None)].
    Instruction i issues on cycle 4 + i; returns (program, expected writes)."""
    pos = cfg.position
    sx, xm, mm, om = "SXM_W", "MEM_W1", "MEM_W0", "MEM_E0"
    timed = {n: [] for n in cfg.slice_names}
    mem = {xm: np.zeros((cfg.mem_depth, cfg.lanes), np.uint8), mm: np.zeros((cfg.mem_depth, cfg.lanes), np.uint8)}
    expected, t0 = [], 4
    for i, (ins, x, idx, want) in enumerate(cases):
        t = t0 + i
        if x is not None:
            mem[xm][i] = x
            timed[xm].append((t - 1 - (pos(xm) - pos(sx)), Instr.read(0, WEST, i)))
        if idx is not None:
            mem[mm][i] = idx
            timed[mm].append((t - 1 - (pos(mm) - pos(sx)), Instr.read(1, WEST, i)))
        timed[sx].append((t, ins))
        if want is not None:
            tw = t + SXM_LATENCY + pos(om) - pos(sx)
            timed[om].append((tw, Instr.write(2, EAST, len(expected))))
            expected.append((tw, om, len(expected), tuple(int(v) for v in want)))
    prog = Program(cfg, {n: lower(e) for n, e in timed.items()}, mem)
    return prog, expected


def sxm_cases(cfg, seed=0):
    rng = np.random.default_rng(seed)
    L = cfg.lanes
    cases = []

    def vec():
        return rng.integers(0, 256, L).astype(np.uint8)

    for k in (0, 1, L // 2, L - 1):
        for kind, flags in (("rot_up", SxmFlag.ROT), ("rot_down", SxmFlag.ROT | SxmFlag.DOWN),
                            ("shift_up", 0), ("shift_down", SxmFlag.DOWN)):
            x = vec()
            cases.append((Instr.compute(Op.SHIFT, 0, WEST, flags=flags | OUT, k=k, out=2), x, None,
                          numpy_ref(kind, x, k)))
    for idx in (rng.permutation(L), rng.integers(0, L, L), np.array([L + 3] + list(range(L - 1)))):
        x = vec()
        cases.append((Instr.compute(Op.PERM, 0, WEST, flags=OUT, map=1, out=2), x, idx.astype(np.uint8),
                      numpy_ref("perm", x, idx=idx)))
    g = 1
    while g <= L:
        k = int(rng.integers(0, L - g + 1))
        x = vec()
        cases.append((Instr.compute(Op.DIST, 0, WEST, flags=OUT, k=k, g=g, out=2), x, None,
                      numpy_ref("dist", x, k=k, g=g)))
        g *= 2
    block = rng.integers(0, 256, (L, L)).astype(np.uint8)
    for r in range(L):
        cases.append((Instr.compute(Op.TRI, 0, WEST, row=r), block[r], None, None))
    for c in range(L):
        cases.append((Instr.compute(Op.TRO, 0, WEST, flags=OUT, col=c, out=2), None, None, block.T[c]))
    return cases


@pytest.mark.parametrize("preset", ["tiny", "default"])
def test_sxm_on_the_golden_model(preset):
    cfg = TileConfig.preset(preset)
    prog, expected = build(cfg, sxm_cases(cfg))
    gold = archmodel.run(prog)
    assert [e.as_tuple() for e in gold.events] == expected


@pytest.mark.parametrize("text, words", [
    ("SHIFT W0, k=4, out=2, flags=OUT_E", "SHIFT by 4 lanes; it must be below the 4 lanes"),
    ("DIST W0, k=0, g=3, out=2, flags=OUT_E", "DIST group g = 3 must be a power of two"),
    ("DIST W0, k=3, g=2, out=2, flags=OUT_E", "DIST takes lanes 3..4; the vector has 4"),
    ("TRO W0, col=4, out=0, flags=OUT_E", "TRO column 4 is beyond the 4 columns"),
    ("PERM W0, map=7, out=0, flags=OUT_E", "map stream 7 does not exist"),
    ("SHIFT W0, k=1, flags=GATE", "unknown SHIFT flag 'GATE'"),
])
def test_bad_sxm_instructions(text, words):
    with pytest.raises((ProgramError, IsaError), match=words):
        Program.assemble(TileConfig.tiny(), f"[SXM_W]\n{text}")


@pytest.mark.sim
def test_sxm_on_rtl(simulator):
    from sim.runner import job, observed_events
    from sim.scoreboard import check_run

    from .conftest import get_sim
    cfg = TileConfig.tiny()
    prog, expected = build(cfg, sxm_cases(cfg, seed=3))
    gold = archmodel.run(prog)
    res = get_sim(cfg, simulator).run([job(prog)])[0]
    problems = check_run(res, gold)
    assert not problems, "\n".join(problems)
    assert observed_events(res) == expected
