"""Speculative decoding with the decode loop as the draft engine (``lpu speculate``,
``docs/speculative.md``): the draft's FFNs on the tile or tray (quantised), the draft's
attention and the float target on the host (``firmware_gen/host/speculative.py``).

Two pairs:

* the synthetic pair (``lpu decode``'s synthetic decoder): the draft its calibrated int8
  (or FP8) model with every layer resident on one tile, run on the golden model
  (``run_synthetic_golden``, through ``decode.golden_tile`` as ``decode.run_golden``) or
  on the RTL (``run_synthetic_rtl``: the decode loop's testbench answering the draft's
  requests, ``sim/tb/speculate.py``), checked as the decode loop is (``decode.check``);
  the target its float model;
* all-MiniLM-L6-v2 run as a decoder (``decoder.from_bert``, the package the bench reads):
  the draft its int8 (one output scale per channel, calibrate's 'fit') or FP8 FFNs, or its
  first ``m`` layers and the head (int8), the FFNs by ``numerics.ffn_int`` (the integer
  arithmetic the tray's golden model and RTL are checked against, ``decode.run_dense_tray``)
  and the draft's cycles from the tray compiler (every FFN on 8 default tiles); the target
  the float model.

Every run's output is compared token for token with the target's plain decoding."""

from __future__ import annotations

import copy

import numpy as np

from firmware_gen.compiler.system import wall_cycles
from firmware_gen.compiler.tray import compile_tray_layer
from firmware_gen.golden import archmodel
from firmware_gen.golden.numerics import ffn_int
from firmware_gen.host.decoder import (CALIBRATION_TEXT, EVAL_TEXT, IntFfn, calibrate, drive, float_ffn, from_bert,
                                       synthetic, wordpiece)
from firmware_gen.host.speculative import (TimingModel, greedy, layer_skip, speculate_gen, statistics, timing,
                                           weight_bytes)
from lpu_arch import TileConfig
from lpu_arch.hostmap import START_CYCLES
from lpu_arch.topology import Topology

from sim.flows.decode import DecodeSetup, check, decode_setup, golden_tile, tray_layer_problems
from sim.harness.runner import TIMESCALE, TileSim, run_testbench

MINILM_TILES = 8             # the tray of default tiles the MiniLM draft's FFNs are compiled for
MINILM_PROMPT = 8            # the prompt: the first tokens of decoder.EVAL_TEXT
MINILM_NO_REPEAT = 16        # the measurements' choice rule: greedy among tokens not in the last 16
MINILM_SKIP = 3              # the layer-skip draft's layers (of 6)


# ---- the synthetic pair ------------------------------------------------------------------------
def synthetic_args(config: dict, model: dict, prompt, tokens: int, k: int, no_repeat: int = 0,
                   skip: int | None = None) -> dict:
    """What rebuilds a synthetic run (the testbench gets it as JSON)."""
    return {"config": config, "model": model, "prompt": [int(t) for t in prompt], "tokens": int(tokens), "k": int(k),
            "no_repeat": int(no_repeat), "skip": skip}


def synthetic_setup(a: dict) -> DecodeSetup:
    """The draft's tile: the decode loop's setup (every layer resident, calibrated in the tile's dtype)."""
    return decode_setup(a["config"], a["model"], a["prompt"], a["tokens"])


def synthetic_target(a: dict):
    return synthetic(**a["model"])


def synthetic_draft(setup: DecodeSetup, a: dict):
    return setup.model if not a["skip"] else layer_skip(setup.model, a["skip"])


def spec_gen(setup: DecodeSetup, a: dict):
    """The speculative loop of the synthetic pair as a generator of the draft's FFN requests."""
    target = synthetic_target(a)
    return speculate_gen(synthetic_draft(setup, a), target, setup.prompt, a["tokens"], a["k"], float_ffn(target),
                         a["no_repeat"])


def run_synthetic_golden(setup: DecodeSetup, a: dict) -> dict:
    """The synthetic pair with the golden model as the draft's tile (its SRAM kept from run
    to run): the speculative run and, per draft FFN run, what ``decode.run_golden`` records."""
    tile, runs = golden_tile(setup.resident)
    run = drive(spec_gen(setup, a), IntFfn(setup.model, tile))
    return {**run, "runs": runs, "engine": "golden model"}


def run_synthetic_rtl(setup: DecodeSetup, a: dict, sim: str = "verilator", progress=None, runs: int = 0) -> dict:
    """The synthetic pair with the RTL tile as the draft's, one simulator invocation."""
    tile = TileSim(setup.cfg, sim)
    out, _ = run_testbench(tile, "sim.tb.speculate", {"config": setup.cfg.to_dict(), "speculate": a}, "speculate",
                           TIMESCALE, progress, runs)
    return {**out[0], "engine": "RTL", "sim": sim}


def synthetic_cycles(setup: DecodeSetup, layers: int) -> dict:
    """The draft's cycles per token from the compiler: its layers' program cycles, and the
    wall cycles (each run started by a CTRL write ``START_CYCLES`` before its cycle 0)."""
    c = [ly.manifest.cycles for ly in setup.resident.layers[:layers]]
    return {"layer_cycles": c, "cycles_per_token": sum(c), "wall_cycles_per_token": sum(c) + layers * START_CYCLES,
            "source": "compiler (resident layers on one tile), checked against every run"}


def synthetic_run(config: dict, model: dict, prompt, tokens: int, k: int, no_repeat: int = 0,
                  skip: int | None = None, sim: str | None = None, progress=None) -> dict:
    """The synthetic pair: the speculative run (golden model, and with ``sim`` the RTL) checked
    against the golden loop and the compiler (``decode.check``: every draft FFN's x, y, cycles
    and writes) and its tokens against the target's plain decoding."""
    a = synthetic_args(config, model, prompt, tokens, k, no_repeat, skip)
    setup = synthetic_setup(a)
    golden = run_synthetic_golden(setup, a)
    run = golden if sim is None else run_synthetic_rtl(setup, a, sim, progress, len(golden["runs"]))
    problems = check(setup, run, golden)
    target = synthetic_target(a)
    plain = greedy(target, setup.prompt, tokens, float_ffn(target), no_repeat)
    if run["tokens"] != plain:
        problems.insert(0, f"tokens {run['tokens']}, the target's plain decoding {plain}")
    layers = skip or len(setup.resident.layers)
    cycles = synthetic_cycles(setup, layers)
    per_pos = sorted({sum(r["cycles"] for r in run["runs"][p * layers:(p + 1) * layers])
                      for p in range(len(run["runs"]) // layers)})
    return {"run": run, "plain": plain, "problems": problems, "draft_cycles": {**cycles, "measured_per_token": per_pos},
            "target_bytes": weight_bytes(target), "setup": setup}


# ---- all-MiniLM-L6-v2 --------------------------------------------------------------------------
def minilm(path):
    """all-MiniLM-L6-v2 as a decoder (the float target), its vocabulary and the texts."""
    model, vocab = from_bert(path)
    return model, vocab


def minilm_draft(model, vocab, dtype: str = "int8", skip: int | None = None):
    """The draft: ``model``'s FFNs quantised to ``dtype`` ('int8': one output scale per
    channel, calibrate's 'fit'; 'fp8': one scale per FFN), with ``skip`` its first
    ``skip`` layers only (the layer-skip draft)."""
    cal = wordpiece(CALIBRATION_TEXT, vocab)
    m = calibrate(copy.copy(model), cal, out_scale_per_row=dtype == "int8", dtype=dtype)
    return layer_skip(m, skip) if skip else m


def tray_cycles(specs, dtype: str, tiles: int = MINILM_TILES, cfg: TileConfig | None = None, inputs=None) -> dict:
    """The draft's cycles per token from the tray compiler: each FFN compiled for ``tiles``
    tiles (``tray.compile_tray_layer``), its program cycles and armed wall cycles
    (``system.wall_cycles``: the arming lead and the deskews' slack).  With ``inputs`` (each
    layer's first input of a run, ``minilm_run``'s ``first_inputs``) each layer also runs
    once on the tray's golden model (``archmodel.run_system``): its wall cycles against the
    compiler's, every tile's write places, cycles and busy counters and y as
    ``decode.tray_layer_problems`` checks them (``problems``)."""
    cfg = (cfg or TileConfig.default()).with_overrides([f"mxm_dtype={dtype}"])
    cyc, wall, golden, problems = [], [], [], []
    for l, spec in enumerate(specs):
        tl = compile_tray_layer(spec, cfg, tiles)
        per_tile = [m.cycles for m in tl.manifest.tile]
        cyc.append(max(per_tile))
        wall.append(wall_cycles(tl.programs, per_tile))
        if inputs is None:
            continue
        progs = tl.programs_for(inputs[l])
        res = archmodel.run_system(progs, Topology(tiles).peer, tl.manifest.min_distance)
        c, w = max(r.cycles for r in res), wall_cycles(progs, [r.cycles for r in res])
        golden.append(c)
        if w != wall[-1]:
            problems.append(f"layer {l}: {w} wall cycles on the tray's golden model, the compiler {wall[-1]}")
        problems += tray_layer_problems(tl.manifest, res, spec, inputs[l], cfg.lanes, f"layer {l}")[1]
    out = {"layer_cycles": cyc, "cycles_per_token": sum(cyc), "wall_cycles_per_token": sum(wall),
           "source": f"compiler (every FFN on a tray of {tiles} tiles, {dtype})"}
    if inputs is not None:
        out.update(source=out["source"] + ", each layer run once on the tray's golden model",
                   measured_per_token=[sum(golden)], problems=problems)
    return out


def minilm_prompt(vocab, n: int = MINILM_PROMPT) -> list[int]:
    return wordpiece(EVAL_TEXT, vocab)[:n]


def minilm_run(model, vocab, draft_model, k: int, tokens: int, no_repeat: int = MINILM_NO_REPEAT,
               prompt=None, plain: list | None = None, target_ffn=None) -> dict:
    """One speculative run of a MiniLM pair (the draft's FFNs by ``numerics.ffn_int``),
    its tokens against the target's plain decoding (``plain``, computed when not given)."""
    prompt = minilm_prompt(vocab) if prompt is None else prompt
    target_ffn = target_ffn or float_ffn(model)
    plain = greedy(model, prompt, tokens, target_ffn, no_repeat) if plain is None else plain
    first = {}                      # each layer's first draft input, for tray_check

    def int_ffn(l, xq):
        first.setdefault(l, np.asarray(xq).copy())
        return ffn_int(draft_model.specs[l], np.asarray(xq)[None])[0]

    run = drive(speculate_gen(draft_model, model, prompt, tokens, k, target_ffn, no_repeat),
                IntFfn(draft_model, run=int_ffn))
    problems = [] if run["tokens"] == plain else [f"tokens {run['tokens']}, the target's plain decoding {plain}"]
    return {"run": run, "plain": plain, "problems": problems, "first_inputs": [first[l] for l in sorted(first)]}


# ---- figures -----------------------------------------------------------------------------------
def figures(run: dict, draft_cycles: dict, target_bytes: int, model: TimingModel) -> dict:
    """A run's statistics and its timing under ``model``, each figure with its source."""
    return {**statistics(run), "draft_steps": run["draft_steps"], "draft_cycles_per_token": draft_cycles,
            "target_weight_bytes": target_bytes,
            "timing": {**timing(run, draft_cycles["wall_cycles_per_token"], target_bytes, model),
                       "hbm_gbs": model.hbm_gbs, "transfer_us": model.transfer_us, "clock_mhz": model.clock_mhz}}


SOURCES = {
    "acceptance": "accepted draft tokens / proposed draft tokens (k per round), counted in the run",
    "acceptance_compared": "accepted / compared (the proposals the target judged, up to its first rejection), "
                           "counted in the run",
    "tokens_per_verification": "committed tokens per verification pass, counted in the run",
    "expected_tokens": "(1 - a^(k+1)) / (1 - a) at a = acceptance (and at acceptance_compared)",
    "draft_cycles_per_token": "the draft's wall cycles per token (see its source)",
    "tokens_per_s": "the timing model: rounds x (target bytes / HBM bandwidth + transfer) + draft positions x "
                    "draft wall cycles / clock; plain: tokens x target bytes / HBM bandwidth",
}
