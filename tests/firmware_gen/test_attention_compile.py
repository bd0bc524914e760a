"""The attention compiler (firmware_gen/compiler/attention.py) on the golden model: every
head's y bit-exact against golden.attention.head_int, every write at its predicted cycle,
the static checker clean, one cycle count per block of 16 positions."""

import numpy as np
import pytest

from lpu_arch.config import TileConfig
from firmware_gen.check import check_program
from firmware_gen.compiler import CompileError
from firmware_gen.compiler.attention import AttentionStep
from firmware_gen.golden import archmodel
from firmware_gen.golden.attention import BLOCK, HeadSpec, head_int
from firmware_gen.scoreboard import compare, golden_observed, promise

CFG = TileConfig().with_overrides(["sxm_max=1"])
H, D = 2, 2 * BLOCK


def _specs(seed=0):
    rng = np.random.default_rng(seed)
    return [HeadSpec.calibrate(*rng.normal(size=(3, 64, D))) for _ in range(H)]


SPECS = _specs()
STEPS = {}


def _step(nb):
    if nb not in STEPS:
        STEPS[nb] = AttentionStep(CFG, SPECS, nb)
    return STEPS[nb]


def _run(L, seed):
    """One step of context L with random int8 q, k, v and history: (step, y per head, result)."""
    rng = np.random.default_rng(seed)
    q, k, v = (rng.integers(-127, 128, (H, D)) for _ in range(3))
    K, V = (rng.integers(-127, 128, (H, L - 1, D)) for _ in range(2))
    step = _step(-(-L // BLOCK))
    prog = step.program(q, k, v, K, V)
    y = [head_int(SPECS[h], q[h], np.vstack([K[h], k[h]]), np.vstack([V[h], v[h]])).y for h in range(H)]
    return step, prog, y, archmodel.run(prog, bases=step.bases(L))


def _outputs(step, res):
    return {(h, b): res.memory["MEM_E0"][step.y_row[h, b]].astype(np.int8) for h in range(H) for b in range(2)}


@pytest.mark.parametrize("L", [1, 15, 16, 17, 64])
def test_step_is_bit_exact_and_on_time(L):
    step, prog, y, res = _run(L, seed=L)
    for (h, b), got in _outputs(step, res).items():
        assert np.array_equal(got, y[h][BLOCK * b:BLOCK * (b + 1)]), (h, b)
    writes, cycles = step.manifest(L, y)
    assert compare(golden_observed(res), promise(writes, cycles), skip=("write values", "busy")) == []
    y_writes = [w for w in writes if w.data]
    assert len(y_writes) == 2 * H
    seen = {(e.cycle, e.slice, e.addr): e.data for e in res.events}
    assert all(seen[(w.cycle, w.slice, w.addr)] == w.data for w in y_writes)
    assert check_program(prog) == []


def test_every_context_length():
    """1..64: bit-exact, as promised, and one cycle count per block (growing with the blocks)."""
    cycles = {}
    for L in range(1, 65):
        step, _, y, res = _run(L, seed=100 + L)
        for (h, b), got in _outputs(step, res).items():
            assert np.array_equal(got, y[h][BLOCK * b:BLOCK * (b + 1)]), (L, h, b)
        writes, predicted = step.manifest(L, y)
        assert compare(golden_observed(res), promise(writes, predicted), skip=("write values", "busy")) == [], L
        cycles.setdefault(step.nb, set()).add(res.cycles)
    assert all(len(c) == 1 for c in cycles.values()), cycles
    per_nb = [cycles[nb].pop() for nb in sorted(cycles)]
    assert per_nb == sorted(per_nb) and len(set(per_nb)) == 4


def test_limits_are_compile_errors():
    with pytest.raises(CompileError, match="sxm_max = 1"):
        AttentionStep(TileConfig(), SPECS, 1)
    with pytest.raises(CompileError, match="cache holds 64 positions"):
        AttentionStep(CFG, SPECS, 5)
    with pytest.raises(CompileError, match="compiled for 1"):
        _step(1).bases(17)
    with pytest.raises(CompileError, match="vxm_param_depth"):
        AttentionStep(CFG, SPECS * 4, 1)


def test_a_tile_of_more_slices_keeps_the_step_exact():
    """8 + 8 MEM slices (a tile fitted for a larger model): the caches stay on the first four of
    each hemisphere and the maxima's scratch row moves to the slice beside ``SXM_W``."""
    global CFG
    saved, CFG = CFG, CFG.with_overrides(["mem_slices=8"])
    try:
        STEPS.clear()
        step, prog, y, res = _run(17, seed=3)
        assert step.scratch_mem == "MEM_W7"
        for (h, b), got in _outputs(step, res).items():
            assert np.array_equal(got, y[h][BLOCK * b:BLOCK * (b + 1)]), (h, b)
        assert compare(golden_observed(res), promise(*step.manifest(17, y)), skip=("write values", "busy")) == []
    finally:
        CFG = saved
        STEPS.clear()
