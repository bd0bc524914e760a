"""The token loop on chip (``lpu decode --on-chip``, ``docs/afd.md``): a
:class:`~firmware_gen.golden.token_loop.LoopModel` generates tokens greedily on one tile
(``compiler/token_loop.py``); the host writes the prompt's tokens once, with the first load, and
reads the ids.  A model with attention generates all its tokens in one run (its positions are
compiled in); one without runs ``k`` tokens a run, the host writing nothing between runs: it
starts the tile and reads the ids.

Every run is checked on the golden model and, with a simulator, on the RTL tile (all runs jobs
of one testbench session, the later ones ``resident``: the driver writes only what differs from
what the tile holds, which is nothing): the ids against the pure-integer reference
(``golden.token_loop.generate``), every MEM write (cycle, row; with its value against the golden
model's run) and the cycle count against the compiler's promise, the ids read back, the bytes
the host wrote per run.  The float model the loop model is quantised from gives the accuracy:
teacher-forced top-1 agreement (``golden.token_loop.agreement``).
"""

from __future__ import annotations

from dataclasses import replace

from lpu_arch.config import DECODER_FIELDS, PRESET_CLOCK_MHZ, TileConfig

from firmware_gen.compiler import CompileError
from firmware_gen.compiler.token_loop import ID_MEM, TokenLoop
from firmware_gen.golden import archmodel
from firmware_gen.golden.archmodel import vector_index
from firmware_gen.golden.token_loop import LoopModel, agreement, generate, synthetic_float, quantise
from firmware_gen.program import Program
from firmware_gen.scoreboard import (Reference, compare, golden_observed, golden_reference, ids_reference, promise,
                                    token_ids)
from sim.harness.runner import default_timeout, job
from sim.harness.scoreboard import read_back, tile_observed
from sim.report import Report

ON_CHIP_TILE = DECODER_FIELDS      # ARGMAX and SETB, which the loop needs, and MAX: the attention step's tile
ON_CHIP_MODEL = dict(vocab=64, H=32, I=64, layers=2, heads=1, seed=0)    # lpu decode --on-chip's default model


def on_chip_config(base: TileConfig | None = None) -> TileConfig:
    """The default tile (or ``base``) with the fields the loop needs."""
    return (base or TileConfig()).with_overrides(list(ON_CHIP_TILE))


class LoopRuns:
    """``tokens`` tokens after ``prompt``, ``per_call`` a run: compiled once, every run on the
    golden model, checked against the integer reference and the compiler.  ``repeat`` (a model
    with attention): the run ``repeat`` times, the same program on the tile as the last run left it,
    each generating the same tokens at the same cycles."""

    def __init__(self, cfg: TileConfig, model: LoopModel, prompt, tokens: int, per_call: int, repeat: int = 1):
        if tokens % per_call:
            raise CompileError(f"--tokens ({tokens}) must be a multiple of the tokens per run ({per_call})")
        if model.heads and per_call != tokens:
            raise CompileError(f"a model with attention generates its {tokens} tokens in one run (its positions are "
                               f"compiled in): the tokens per run must be {tokens}, got {per_call}")
        if not prompt or not all(0 <= int(t) < model.vocab for t in prompt):
            raise CompileError(f"the prompt's tokens must be in 0..{model.vocab - 1} (the vocabulary), got {list(prompt)}")
        if repeat != 1 and not model.heads:
            raise CompileError("repeating a run is for a model with attention (one without continues the sequence "
                               "from run to run: --per-call)")
        self.cfg, self.model, self.prompt = cfg, model, [int(t) for t in prompt]
        self.tokens, self.per_call, self.repeat = tokens, per_call, repeat
        self.calls = tokens // per_call * repeat
        self.loop = TokenLoop(cfg, model, per_call, prompt_len=len(self.prompt))
        self.reference = generate(model, self.prompt, tokens)
        self.programs, self.golden, self.ids = [], [], []
        prog, bases = self.loop.program(self.prompt), None
        for c in range(self.calls):
            r = archmodel.run(prog, bases=bases)
            self.programs.append(prog)
            self.golden.append(r)
            self.ids.append([vector_index(r.memory[ID_MEM][row]) for row in self.loop.id_rows])
            # The next run starts from what this one left: the SRAM and the base registers.
            prog = Program(cfg, prog.queues, {n: m.copy() for n, m in r.memory.items()}, vxm_params=prog.vxm_params,
                           table=prog.table, defined={n: set(range(cfg.mem_depth)) for n in cfg.mem_names})
            bases = r.base_words()

    def expected(self, c: int) -> list[int]:
        """The ids run ``c`` must generate (a repeated run: all of them again)."""
        c %= self.tokens // self.per_call
        return self.reference[c * self.per_call:(c + 1) * self.per_call]

    def promise(self) -> Reference:
        """The compiler's: every WRITE (cycle, slice, row) and the cycle count, the same every run."""
        return promise(*self.loop.manifest())

    def golden_problems(self) -> list[str]:
        problems = []
        for c, (r, ids) in enumerate(zip(self.golden, self.ids)):
            seen = golden_observed(r, outputs=token_ids(ids), outputs_as="ids")
            problems += [p.at(f"run {c}") for p in compare(seen, self.promise(), ids_reference(self.expected(c)),
                                                           skip=("write values",))]
        return problems

    def jobs(self) -> list[dict]:
        """The testbench's jobs: the first loads everything (the prompt's token in the start
        row); each later one is resident: the same program, nothing written."""
        rows = {ID_MEM: list(self.loop.id_rows)}                # what the host reads: the ids
        full = job(self.programs[0], name="run 0", read_back=rows)      # (checked by firmware_gen.check)
        memory = {n: {r: row for r, row in enumerate(m) if any(row)} for n, m in full.pop("memory").items()}
        first = {**full, "resident": True, "memory_rows": memory}        # the queues' words recorded as held
        later = [{"resident": True, "name": f"run {c}", "images": full["images"], "read_back": rows,
                  "bases": full["bases"], "timeout_cycles": default_timeout(self.programs[0])}
                 for c in range(1, self.calls)]
        return [first, *later]

    def rtl_problems(self, c: int, res: dict) -> tuple[list[str], list[int]]:
        """Run ``c``'s observation against the golden model's run and the compiler's promise;
        the ids the host read back."""
        held = read_back(res)
        ids = [vector_index(held[(ID_MEM, row)]) if (ID_MEM, row) in held else None for row in self.loop.id_rows]
        seen = replace(tile_observed(res), outputs=token_ids(ids), outputs_as="the ids read back")
        problems = compare(seen, golden_reference(self.golden[c]))
        problems += compare(seen, self.promise(), ids_reference(self.expected(c)),
                            skip=("write values", "read-back", "faults"))
        if c and res.get("loaded_bytes"):
            problems.append(f"the host wrote {res['loaded_bytes']} bytes before run {c}; it should write none")
        return [p.at(f"run {c}") if hasattr(p, "at") else f"run {c}: {p}" for p in problems], ids


def run_token_loop(cfg: TileConfig, model: dict | None = None, prompt=(1, 2, 3), tokens: int = 16,
                   per_call: int | None = None, sim: str | None = None, clock_mhz: float | None = None,
                   progress=None, build_out=None, repeat: int = 1) -> Report:
    """Generate ``tokens`` tokens after ``prompt`` with the synthetic model ``model`` (arguments of
    ``golden.token_loop.synthetic_float``; default :data:`ON_CHIP_MODEL`) on a tile of ``cfg``
    (``on_chip_config``), ``per_call`` per run (default: all); golden model, and with ``sim`` the
    RTL tile; ``repeat``: a model with attention's run that many times (the same tokens at the same
    cycles each time).  The report's rows: one per token of every run (run, id, cycles since the
    previous token's id, time at the clock)."""
    fm = synthetic_float(**(model or ON_CHIP_MODEL))
    model = quantise(fm)
    runs = LoopRuns(cfg, model, prompt, tokens, per_call or tokens, repeat)
    per_call = runs.per_call
    problems = runs.golden_problems()
    results, tile = [None] * runs.calls, None
    if sim is not None:
        from sim.flows.ffn import build_tile
        tile = build_tile(cfg, sim, out=build_out)
        results = tile.run(runs.jobs(), name="token loop", progress=progress)
    rtl_ids, loaded = [], []
    for c, res in enumerate(results):
        if res is None:
            continue
        p, ids = runs.rtl_problems(c, res)
        problems += p
        rtl_ids += ids
        loaded.append(int(res.get("loaded_bytes", 0)))
    mhz = clock_mhz or PRESET_CLOCK_MHZ["default"]
    per_token = runs.loop.token_cycles()
    rows = []
    for c in range(runs.calls):
        for k in range(per_call):
            n = c * per_call + k
            rows.append({"token": n, "run": c, "id": runs.ids[c][k], **({"rtl_id": rtl_ids[n]} if rtl_ids else {}),
                         "cycles": per_token[k], "us": round(per_token[k] / mhz, 4)})
    steady = per_token[1:] or per_token       # (the first token of a run also waits for the prompt)
    mean = round(sum(steady) / len(steady), 2)
    bound = weight_read_bound(cfg, model)
    att = runs.loop.attention_cycles()
    data = {"passed": not problems, "simulator": sim or "golden model", "tokens": tokens, "per_call": per_call,
            "runs": runs.calls, "repeat": repeat, "prompt": runs.prompt, "ids": runs.reference, "heads": model.heads,
            "layers": len(model.layers), "top1_agreement_with_float": agreement(fm, model),
            "cycles_per_run": runs.loop.cycles, "cycles_per_token": mean, "cycles_per_token_range": [min(steady), max(steady)],
            "first_token_cycles": per_token[0], "clock_mhz": mhz, "us_per_token": round(mean / mhz, 4),
            "weight_read_bound": bound, "ratio_to_bound": round(mean / bound, 3),
            "attention_cycles_per_token": round(sum(att[1:] or att) / len(att[1:] or att), 2),
            "host_round_trips_per_token_with_attention_on_host": 2 * sum(l.attn is not None for l in model.layers),
            "iq_needed": runs.loop.iq_needed(), "iq_depth": cfg.iq_depth, "weight_bytes": model.weight_bytes(),
            "host_bytes_after_first_load": loaded[1:] if loaded else None,
            "first_load_bytes": loaded[0] if loaded else None, "problems": problems, "positions": rows}
    if tile is not None:
        data["build_dir"] = str(tile.build_dir)
    return Report.of("token-loop", data, rows_key="positions")


def weight_read_bound(cfg: TileConfig, model: LoopModel) -> int:
    """Cycles to read a token's weight and constant rows (every layer's W1, W2, Wq, Wk, Wv, Wo and
    residual blocks, each RMSNorm's three constant blocks: the identity on each MXM and the block
    of ``q_weight``; the LM head) from all ``2 mem_slices`` MEM slices at one row a cycle each:
    arithmetic on the configuration, the bound a schedule on both MXMs could approach.  Not
    counted: the embedding's few rows, and the attention step's reads of its caches and constants."""
    from firmware_gen.golden.norm import NormSpec
    if model.positions is not None or any(not isinstance(n, NormSpec) for n in model.norms()):
        raise CompileError("the weight-read bound is stated for a model of RMSNorms (the synthetic loop's); "
                           "this one has LayerNorms or position rows")
    L = cfg.lanes
    KH, KI, KV, KA = model.H // L, model.I // L, -(-model.vocab // L), model.heads * 32 // L
    norms = sum((l.norm is not None) + (l.attn is not None and l.attn.norm is not None) for l in model.layers)
    norms += model.norm is not None
    blocks = len(model.layers) * (2 * KH * KI + 1 + (4 * KH * KA + 1 if model.heads else 0)) + KV * KH + 3 * norms
    return -(-blocks * L // len(cfg.mem_names))


LOOP_FILE = "token_loop.json"


def save_loop(cfg: TileConfig, model: dict, prompt, tokens: int, dest, replace: bool = False) -> dict:
    """Write the first run of ``tokens`` tokens after ``prompt`` (the synthetic ``model``) as a
    program directory ``dest`` (``program.json``, what ``lpu show`` draws, and
    ``token_loop.json``: the prompt, the ids, the compiler's cycles); returns the files written."""
    import json

    from sim.harness.compiled import PROGRAM_FILE, write_program_dir
    m = quantise(synthetic_float(**model))
    loop = TokenLoop(cfg, m, tokens, prompt_len=len(prompt))
    info = {"model": model, "prompt": [int(t) for t in prompt], "ids": generate(m, prompt, tokens),
            "predicted_cycles": loop.cycles, "token_cycles": loop.token_cycles(), "id_rows": loop.id_rows}
    write_program_dir(dest, {PROGRAM_FILE: loop.program(prompt).to_json(),
                             LOOP_FILE: json.dumps(info, indent=1) + "\n"}, replace)
    return {"program": str(dest / PROGRAM_FILE), "loop": str(dest / LOOP_FILE)}
