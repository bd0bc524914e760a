"""The attention flow (``lpu attention``): one decode step of attention compiled for each
context length asked (``firmware_gen/compiler/attention.py``) and run on the golden model,
each head's output checked bit for bit against ``golden.attention.head_int``, every MEM
write against its predicted cycle and the program against the static checker; the cycles
against context length beside the SRAM-read bound of the step's K and V^T rows."""

from __future__ import annotations

import numpy as np

from lpu_arch.config import TileConfig

from firmware_gen.check import check_program
from firmware_gen.compiler.attention import STRIPE, AttentionStep
from firmware_gen.golden import archmodel
from firmware_gen.golden.attention import BLOCK, HeadSpec, head_int
from firmware_gen.scoreboard import compare, golden_observed, promise
from sim.report import Report

ATTENTION_TILE = ("sxm_max=1",)        # the field the step needs (MAX: the maximum of the scores)


def attention_config(base: TileConfig | None = None) -> TileConfig:
    """The default tile (or ``base``) with the fields the step needs."""
    return (base or TileConfig()).with_overrides(list(ATTENTION_TILE))


def read_bound(cfg: TileConfig, heads: int, nb: int) -> int:
    """Cycles to read the step's K and V^T rows (per head, 2 dimension blocks of ``16 nb``
    rows each) from every MEM slice at one row a cycle: the SRAM-read bound."""
    return -(-heads * 2 * 2 * BLOCK * nb // len(cfg.mem_names))


def _inputs(heads, L, seed):
    rng = np.random.default_rng(seed)
    D = 2 * BLOCK
    q, k, v = (rng.integers(-127, 128, (heads, D)) for _ in range(3))
    K, V = (rng.integers(-127, 128, (heads, L - 1, D)) for _ in range(2))
    return q, k, v, K, V


def run_length(cfg, specs, steps, L, seed) -> dict:
    """One step of context ``L``: its figures and problems (a row of the report)."""
    nb = -(-L // BLOCK)
    step = steps.get(nb) or steps.setdefault(nb, AttentionStep(cfg, specs, nb))
    q, k, v, K, V = _inputs(len(specs), L, seed + L)
    prog = step.program(q, k, v, K, V)
    res = archmodel.run(prog, bases=step.bases(L))
    problems = [f"L={L}: {p}" for p in check_program(prog)]
    ys = [head_int(s, q[h], np.vstack([K[h], k[h]]), np.vstack([V[h], v[h]])).y for h, s in enumerate(specs)]
    for (h, b), row in step.y_row.items():
        got = res.memory["MEM_E0"][row].astype(np.int8)
        if not np.array_equal(got, ys[h][BLOCK * b:BLOCK * (b + 1)]):
            problems.append(f"L={L}: head {h} block {b}: y differs from head_int")
    writes, cycles = step.manifest(L, ys)
    problems += [f"L={L}: {p}" for p in compare(golden_observed(res), promise(writes, cycles),
                                                skip=("write values", "busy"))]
    return {"L": L, "nb": nb, "cycles": res.cycles, "predicted": cycles, "bound": read_bound(cfg, len(specs), nb),
            "writes": len(writes), "ok": not problems, "problems": problems}


def run_attention(cfg: TileConfig, heads: int, lengths, seed: int = 0, out=None) -> Report:
    """Compile and run a step of ``heads`` random heads (calibrated on random float q, k, v)
    for each context length of ``lengths`` on the golden model."""
    rng = np.random.default_rng(seed)
    specs = [HeadSpec.calibrate(*rng.normal(size=(3, 64, 2 * BLOCK))) for _ in range(heads)]
    steps, rows, problems = {}, [], []
    for L in lengths:
        row = run_length(cfg, specs, steps, L, seed)
        problems += row.pop("problems")
        rows.append(row)
        if out is not None:
            print(f"{row['L']:>4} {row['nb']:>3} {row['cycles']:>7} {row['bound']:>6} "
                  f"{row['cycles'] / row['bound']:>7.2f}  {'ok' if row['ok'] else 'FAIL'}", file=out)
    per_nb = {}
    for r in rows:
        per_nb.setdefault(r["nb"], set()).add(r["cycles"])
    uneven = {nb: sorted(c) for nb, c in per_nb.items() if len(c) > 1}
    if uneven:
        problems.append(f"cycles differ within a block: {uneven}")
    data = {"passed": not problems, "heads": heads, "stripe": STRIPE,
            "cycles_per_nb": {str(nb): min(c) for nb, c in sorted(per_nb.items())},
            "problems": problems, "lengths": rows}
    return Report.of("attention", data, rows_key="lengths")
