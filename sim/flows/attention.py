"""The attention flow (``lpu attention``): one decode step of attention compiled for each
context length asked (``firmware_gen/compiler/attention.py``) and run on the golden model,
each head's output checked bit for bit against ``golden.attention.head_int``, every MEM
write against its predicted cycle and the program against the static checker; the cycles
against context length beside the SRAM-read bound of the step's K and V^T rows.

With a simulator (:func:`run_attention` ``sim=``) every step also runs on the RTL tile, all
lengths as jobs of one testbench invocation, each with its base registers, and the
observation is checked by ``scoreboard.compare``: against the golden model's run of the same
program (every write with its value, the cycles, the busy counters, the rows written read
back after the run), the compiler's promise (every write at its predicted cycle, the cycle
count) and y read back from ``MEM_E0`` against ``head_int``, bit for bit."""

from __future__ import annotations

import numpy as np

from lpu_arch.config import DECODER_FIELDS, TileConfig
from lpu_arch.hostmap import base_word

from firmware_gen.check import check_program
from firmware_gen.compiler.attention import STRIPE, AttentionStep
from firmware_gen.golden import archmodel
from firmware_gen.golden.attention import BLOCK, HeadSpec, head_int
from firmware_gen.scoreboard import Reference, compare, golden_observed, golden_reference, promise
from sim.harness.runner import job
from sim.harness.scoreboard import read_back, tile_observed
from sim.report import Report

ATTENTION_TILE = DECODER_FIELDS        # MAX (the maximum of the scores), and the token loop's opcodes: one build


def attention_config(base: TileConfig | None = None) -> TileConfig:
    """The default tile (or ``base``) with the fields the step needs (and the token loop's:
    ``DECODER_FIELDS``)."""
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


class Case:
    """One step of context ``L`` compiled and run on the golden model: its program, base
    registers, golden run, head outputs (``head_int``) and promise."""

    def __init__(self, cfg, specs, steps, L, seed):
        self.L, self.nb = L, -(-L // BLOCK)
        self.step = step = steps.get(self.nb) or steps.setdefault(self.nb, AttentionStep(cfg, specs, self.nb))
        q, k, v, K, V = _inputs(len(specs), L, seed + L)
        self.prog = step.program(q, k, v, K, V)
        self.bases = step.bases(L)
        self.bases += [base_word()] * (cfg.base_regs - len(self.bases))       # every register a job sets
        self.gold = archmodel.run(self.prog, bases=self.bases)
        self.ys = [head_int(s, q[h], np.vstack([K[h], k[h]]), np.vstack([V[h], v[h]])).y for h, s in enumerate(specs)]
        self.writes, self.cycles = step.manifest(L, self.ys)
        self.bound = read_bound(cfg, len(specs), self.nb)

    def y_reference(self) -> Reference:
        """Every head's output blocks by name, from ``head_int``."""
        return Reference("head_int", outputs={f"y[{h}, {BLOCK * b}:{BLOCK * (b + 1)}]":
                                              self.ys[h][BLOCK * b:BLOCK * (b + 1)] for h, b in self.step.y_row})

    def y_where(self) -> dict:
        return {f"y[{h}, {BLOCK * b}:{BLOCK * (b + 1)}]": ("MEM_E0", row) for (h, b), row in self.step.y_row.items()}

    def golden_problems(self) -> list[str]:
        """The golden model's run against ``head_int``, the promise and the static checker."""
        problems = [f"L={self.L}: {p}" for p in check_program(self.prog)]
        for (h, b), row in self.step.y_row.items():
            got = self.gold.memory["MEM_E0"][row].astype(np.int8)
            if not np.array_equal(got, self.ys[h][BLOCK * b:BLOCK * (b + 1)]):
                problems.append(f"L={self.L}: head {h} block {b}: y differs from head_int")
        return problems + [f"L={self.L}: {p}" for p in compare(golden_observed(self.gold),
                                                               promise(self.writes, self.cycles),
                                                               skip=("write values", "busy"))]

    def job(self):
        """The testbench job: the program, its base registers, and every row it writes read back."""
        rows = {}
        for e in self.gold.events:
            rows.setdefault(e.slice, set()).add(int(e.addr))
        return job(self.prog, name=f"attention L={self.L}", bases=self.bases,
                   read_back={n: sorted(r) for n, r in sorted(rows.items())})

    def rtl_problems(self, res) -> list[str]:
        """A testbench observation against the golden model, y against ``head_int``, and the
        compiler's promise (every write at its cycle, the cycle count)."""
        seen = tile_observed(res)
        held = read_back(res)
        where = self.y_where()
        seen.outputs = {n: None if held.get(w) is None else np.asarray(held[w], np.uint8).astype(np.int8)
                        for n, w in where.items()}
        seen.where = {n: f"{s}[{a}]" for n, (s, a) in where.items()}
        seen.outputs_as, seen.held = "y read back from the SRAM", "SRAM holds"
        problems = compare(seen, golden_reference(self.gold), self.y_reference())
        problems += compare(seen, promise(self.writes, self.cycles),
                            skip=("faults", "write values", "nan operand", "read-back", "outputs"))
        return [p.at(f"L={self.L}") for p in problems]

    def row(self, problems) -> dict:
        return {"L": self.L, "nb": self.nb, "cycles": self.gold.cycles, "predicted": self.cycles,
                "bound": self.bound, "writes": len(self.writes), "ok": not problems}


def random_specs(heads: int, seed: int) -> list[HeadSpec]:
    """``heads`` heads calibrated on random float q, k, v."""
    rng = np.random.default_rng(seed)
    return [HeadSpec.calibrate(*rng.normal(size=(3, 64, 2 * BLOCK))) for _ in range(heads)]


def run_attention(cfg: TileConfig, heads: int, lengths, seed: int = 0, out=None, sim: str | None = None,
                  progress=None, build_out=None) -> Report:
    """Compile and run a step of ``heads`` random heads (calibrated on random float q, k, v)
    for each context length of ``lengths`` on the golden model and, with ``sim``, on the RTL
    tile (one testbench invocation, a job per length; ``progress`` as ``TileSim.run``'s,
    ``build_out`` where the build says so).  Rows: per length the golden model's cycles, the
    compiler's prediction, the bound and, with ``sim``, the RTL's cycles and run seconds;
    printed on ``out`` (under :func:`header`) when given."""
    specs = random_specs(heads, seed)
    steps, cases, problems = {}, [], []
    for L in lengths:
        c = Case(cfg, specs, steps, L, seed)
        cases.append((c, c.golden_problems()))
        problems += cases[-1][1]
    results = [None] * len(cases)
    tile = None
    if sim is not None:
        from sim.flows.ffn import build_tile
        tile = build_tile(cfg, sim, out=build_out)
        results = tile.run([c.job() for c, _ in cases], name="attention", progress=progress)
    rows = []
    if out is not None:
        print(header(sim), file=out)
    for (c, gp), res in zip(cases, results):
        rp = [] if res is None else c.rtl_problems(res)
        problems += rp
        row = c.row(gp + rp)
        if res is not None:
            row.update(rtl_cycles=res["cycles"], run_seconds=round(res["wall_run_s"], 3))
        rows.append(row)
        if out is not None:
            rtl = "" if res is None else f" {res['cycles']:>9}"
            print(f"{row['L']:>4} {row['nb']:>3} {row['predicted']:>9} {row['cycles']:>7}{rtl} {row['bound']:>6} "
                  f"{row['predicted'] / row['bound']:>7.2f}  {'ok' if row['ok'] else 'FAIL'}", file=out)
    per_nb = {}
    for r in rows:
        per_nb.setdefault(r["nb"], set()).update({r["cycles"], r.get("rtl_cycles", r["cycles"])})
    uneven = {nb: sorted(c) for nb, c in per_nb.items() if len(c) > 1}
    if uneven:
        problems.append(f"cycles differ within a block: {uneven}")
    data = {"passed": not problems, "heads": heads, "stripe": STRIPE, "simulator": sim or "golden model",
            "cycles_per_nb": {str(nb): min(c) for nb, c in sorted(per_nb.items())},
            "problems": problems, "lengths": rows}
    if tile is not None:
        data.update(build_dir=str(tile.build_dir),
                    run_seconds=round(sum(r["run_seconds"] for r in rows), 3))
    return Report.of("attention", data, rows_key="lengths")


def header(sim: str | None) -> str:
    """The column heads of the lines :func:`run_attention` prints."""
    rtl = "" if sim is None else f" {sim:>9}"
    return f"{'L':>4} {'nb':>3} {'predicted':>9} {'golden':>7}{rtl} {'bound':>6} {'x bound':>7}"


def save_step(cfg, heads: int, L: int, seed: int, dest, replace: bool = False) -> dict:
    """Write the step of context ``L`` as a program directory ``dest`` (``program.json``, the
    program ``lpu show`` draws, and ``attention.json``: its base registers, the length and
    the compiler's promise); returns the files written."""
    import json

    from sim.harness.compiled import PROGRAM_FILE, write_program_dir
    c = Case(cfg, random_specs(heads, seed), {}, L, seed)
    info = {"L": L, "nb": c.nb, "heads": heads, "seed": seed, "bases": c.bases, "predicted_cycles": c.cycles,
            "sram_read_bound": c.bound,
            "writes": [{"cycle": w.cycle, "slice": w.slice, "addr": w.addr} for w in c.writes]}
    write_program_dir(dest, {PROGRAM_FILE: c.prog.to_json(), STEP_FILE: json.dumps(info, indent=1) + "\n"}, replace)
    return {"program": str(dest / PROGRAM_FILE), "step": str(dest / STEP_FILE)}


STEP_FILE = "attention.json"
