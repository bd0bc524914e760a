"""What several test modules share: the simulators to run on and one build per
(configuration, simulator) per test process, the programs more than one module runs
(random MEM-to-MEM schedules, the SXM lane-movement cases), and compiled FFNs run on the
golden model and checked by the scoreboard.  Test modules import from
here, never from one another (nor from ``conftest.py``)."""

from __future__ import annotations

import os

import numpy as np
import pytest

from lpu_arch import TileConfig
from lpu_arch.isa import EAST, SXM_LATENCY, WEST, Instr, Op, SxmFlag

from firmware_gen.golden import archmodel
from firmware_gen.golden.numerics import ffn_int
from firmware_gen.program import Program
from firmware_gen.compiler.ffn_manifest import output_matrix
from firmware_gen.compiler.reserve import lower
from firmware_gen.compiler.schedule import Scheduler
from firmware_gen.compiler.tray import tray_output
from firmware_gen.scoreboard import Observed, compare, ffn_reference, golden_observed, manifest_promise, row_vectors
from lpu_arch.topology import Topology

SIMS = [s for s in os.environ.get("LPU_SIMS", "verilator,icarus").split(",") if s]

# The one simulator for RTL tests of a top level or preset whose building blocks the suite
# checks on both simulators elsewhere (the UART bridge's top, the board preset): Icarus,
# which builds a design in seconds where Verilator takes half a minute or more.  Both
# simulators still agree cycle for cycle on the same HDL in the tests that run on each.
ONE_SIM = ["icarus"] if "icarus" in SIMS else SIMS[:1]
# The one simulator for long runs (hundreds of thousands of cycles) of a design that other
# tests run on both simulators: Verilator, which runs them tens of times faster.
FAST_SIM = ["verilator"] if "verilator" in SIMS else SIMS[:1]


def each_sim() -> list:
    """``simulator`` parameters for a test whose build no other test uses: ONE_SIM in
    ``make test``, the other simulators marked ``long`` (``make test-long``), so that every
    simulator still runs it in CI without a Verilator build in the fast suite."""
    return [s if s in ONE_SIM else pytest.param(s, marks=pytest.mark.long) for s in SIMS]


_built = {}


# A tile long enough for ramp blocks (the first weight blocks load from the slices nearest
# the MXM, LW n below 6), in the center layout (TileConfig.mxm_layout): 8 lanes, 6+6 MEM slices.
RAMP_TILE = ("tiny", ["lanes=8", "streams=7", "mem_slices=6", "mem_depth=128", "mxm_layout=center",
                      "mxm_partial_lw=1"])


def get_sim(cfg: TileConfig, sim: str):
    """One build per (configuration, simulator) per test process."""
    from sim.harness.runner import TileSim
    key = (cfg, sim)
    if key not in _built:
        _built[key] = TileSim(cfg, sim)
    return _built[key]


# ---- compiled FFNs on the golden model ------------------------------------------------------
def ffn_on_golden_model(prog, man, ex):
    """Run a compiled FFN (``compile_ffn``'s program and manifest of the example ``ex``) on
    the golden model: ``(run, y, problems)``, the problems every way the run differs from
    the manifest's promise (every write, the cycles, the busy counters) and y from the
    integer FFN (``scoreboard.compare``)."""
    gold = archmodel.run(prog)
    y = output_matrix(man, gold.memory, prog.config.lanes, ex.spec.H)
    problems = compare(golden_observed(gold, outputs=row_vectors("y", y)), manifest_promise(man),
                       ffn_reference(ffn_int(ex.spec, ex.x_int8)))
    return gold, y, problems


def tray_on_golden_model(progs, man, ex):
    """Run a tray FFN (``compile_ffn_tray``'s programs and manifest of the example ``ex``) on
    the multi-tile golden model: ``(runs, y, problems)``, the problems every tile's run
    differs from its share of the manifest (writes, cycles, busy counters) and y, gathered
    from every tile, from the integer FFN (``scoreboard.compare``)."""
    res = archmodel.run_system(progs, Topology(len(progs)).peer, man.min_distance)
    y = tray_output(man, [r.memory for r in res], progs[0].config.lanes, ex.spec.H)
    problems = [p.at(f"tile {t}") for t, (r, m) in enumerate(zip(res, man.tile))
                for p in compare(golden_observed(r), manifest_promise(m))]
    problems += compare(Observed("golden model", outputs=row_vectors("y", y)), ffn_reference(ffn_int(ex.spec, ex.x_int8)))
    return res, y, problems


# ---- MEM-to-MEM ----------------------------------------------------------------------------
def random_schedule(cfg, n, seed, max_count=5):
    """Every MEM slice filled with random bytes, then ``n`` random copies of 1..``max_count``
    vectors between random pairs of slices (the scheduler places them)."""
    rng = np.random.default_rng(seed)
    s = Scheduler(cfg)
    for name in cfg.mem_names:
        s.load(name, 0, rng.integers(0, 256, (cfg.mem_depth, cfg.lanes)))
    for _ in range(n):
        a, b = rng.choice(cfg.mem_names, 2, replace=False)
        cnt = int(rng.integers(1, max_count + 1))
        s.copy(str(a), int(rng.integers(0, cfg.mem_depth - cnt + 1)),
               str(b), int(rng.integers(0, cfg.mem_depth - cnt + 1)), cnt)
    return s


# ---- SXM lane movement ----------------------------------------------------------------------
SXM_OUT = SxmFlag.OUT_E


def numpy_ref(kind, x, k=0, idx=None, g=1):
    """What an SXM instruction makes of ``x``, written with numpy."""
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
    if kind == "max":               # idx: w; lane i: the signed larger of x[i] and w[(i + k) mod L]
        return np.maximum(x.astype(np.int8), np.roll(idx, -k).astype(np.int8)).astype(np.uint8)
    raise ValueError(kind)


def sxm_program(cfg, cases):
    """cases: [(Instr for SXM_W, x vector or None, map vector or None, expected or None)].
    x streams from MEM_W1, the map from MEM_W0, results are written into MEM_E0.
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
    """Shifts and rotations by 0, 1, lanes/2 and lanes-1, permutations (one with an index
    beyond the lanes), distributions of every group size, a transpose in and out; on a tile
    with ``sxm_max``, MAX with every rotation of the map stream and of x itself (``with``
    the stream of x), once on the extreme int8 values."""
    rng = np.random.default_rng(seed)
    L = cfg.lanes
    OUT = SXM_OUT
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
    if cfg.sxm_max:
        extremes = np.array([0x80, 0x7F, 0xFF, 0x00] * (L // 4), np.uint8)   # -128, 127, -1, 0
        for k in range(L):
            x, w = vec(), vec()
            if k == 1:
                x, w = extremes, np.roll(extremes, 1)
            cases.append((Instr.max(0, WEST, k=k, with_=1, out=2, flags=OUT), x, w, numpy_ref("max", x, k, w)))
            cases.append((Instr.max(0, WEST, k=k, with_=0, out=2, flags=OUT), x, None, numpy_ref("max", x, k, x)))
    return cases


# The robustness issue's example (tiny tile): MEM_W1's vector is replaced on E0 by MEM_W0's
# before anything reads it, and MEM_E0 writes MEM_W0's vector.
LOST_VALUE_ASM = """
[MEM_W1]
    READ E0, 0
[MEM_W0]
    NOP 1
    READ E0, 0
[MEM_E0]
    NOP 4
    WRITE E0, 5
"""


def with_layer_norms(model, tokens=24, seed=3):
    """``model`` with every RMSNorm a LayerNorm (``golden/layer_norm.py``) of random gains (some
    negative) and biases, each calibrated on the int8 inputs its RMSNorm saw over ``tokens`` random
    tokens, its output at the RMSNorm's scale."""
    import dataclasses

    import firmware_gen.golden.token_loop as tl
    from firmware_gen.golden.layer_norm import LayerNormSpec
    seen, orig = {}, tl._normed

    def record(spec, x):
        if spec is not None:
            seen.setdefault(id(spec), []).append(np.asarray(x, np.int64))
        return orig(spec, x)
    rng = np.random.default_rng(seed)
    tl._normed = record
    try:
        caches = tl.Caches()
        for t in rng.integers(0, model.vocab, tokens):
            tl.step_int(model, int(t), caches)
    finally:
        tl._normed = orig

    def ln(spec):
        g = rng.uniform(0.6, 1.4, spec.H) * np.where(rng.random(spec.H) < 0.2, -1, 1)
        return LayerNormSpec.calibrate(np.array(seen[id(spec)]), spec.x_scale, g, rng.normal(0, 0.3, spec.H),
                                       per_lane=False, out_scale=spec.out_scale)
    layers = [dataclasses.replace(l, norm=ln(l.norm), attn=l.attn and dataclasses.replace(l.attn, norm=ln(l.attn.norm)))
              for l in model.layers]
    return dataclasses.replace(model, layers=layers, norm=ln(model.norm))
