"""The token loop on chip on the golden model: ARGMAX and SETB as the golden model states them,
the loop compiler (``compiler/token_loop.py``) against the pure-integer reference
(``golden/token_loop.py``), with and without attention, the quantised model against its float
one, and the compiler's refusals."""

import dataclasses

import numpy as np
import pytest

from firmware_gen.check import check_program
from firmware_gen.compiler import CompileError
from firmware_gen.compiler.token_loop import ID_MEM, TOKEN_REG, TokenLoop
from firmware_gen.golden import archmodel
from firmware_gen.golden.archmodel import ModelError, index_vector, vector_index
from firmware_gen.golden.token_loop import (Caches, LoopModelError, agreement, generate, logits_int, next_token,
                                            step_int, synthetic, synthetic_float, quantise)
from firmware_gen.program import Program, ProgramError
from firmware_gen.scoreboard import compare, golden_observed, promise
from lpu_arch import TileConfig
from lpu_arch.config import DECODER_FIELDS
from lpu_arch.isa import EAST, WEST, ArgmaxFlag, Instr, MMFlag

from sim.flows.token_loop import ON_CHIP_MODEL, LoopRuns, on_chip_config, run_token_loop, weight_read_bound

from tests.helpers import with_layer_norms

CFG = on_chip_config()
MLP = dict(ON_CHIP_MODEL, heads=0)
MODEL = synthetic(**MLP)                 # without attention
ATTN = synthetic(**ON_CHIP_MODEL)        # with (one head)


# ---- SETB and ARGMAX on the golden model ------------------------------------------------------
SETB_BASES = [0, 0, 1 << 31]             # register 2 off at the start


def setb_program(cfg):
    """MEM_W1 reads a row holding 9 west to SXM_W, which SETBs register 2 from it on cycle 2;
    MEM_W0 READs row 3 through register 2 on cycles 2 and 3, MEM_E0 writes both into rows 40
    and 41.  Expected (``SETB_LATENCY`` = 1): row 40 zeros (the register still off: a skip),
    row 41 = row 12 (the offset 9); the register on at 9 after the run."""
    mem = {"MEM_W0": (np.arange(cfg.mem_depth)[:, None] % 256) * np.ones((1, cfg.lanes), np.int64),   # row r holds r
           "MEM_W1": [index_vector(9, cfg.lanes)]}
    pe = cfg.position("MEM_E0") - cfg.position("MEM_W0")
    queues = {"MEM_W1": [Instr.read(1, WEST, 0)],
              "SXM_W": [Instr.nop(2), Instr.setb(1, WEST, reg=2)],
              "MEM_W0": [Instr.nop(2), Instr.read(2, EAST, 3, base=2), Instr.read(3, EAST, 3, base=2)],
              "MEM_E0": [Instr.nop(3 + pe), Instr.write(2, EAST, 40), Instr.write(3, EAST, 41)]}
    return Program(cfg, queues, mem)


def test_setb_takes_effect_on_the_next_cycle():
    """A SETB on cycle t: a READ through its register on t sees it as the host left it (off: the
    READ skips and drives zeros), one on t + 1 reads at the new offset, the register on."""
    cfg = TileConfig.tiny().with_overrides(["sxm_setb=1"])
    r = archmodel.run(setb_program(cfg), bases=SETB_BASES)
    got = {(e.addr, e.data[0]) for e in r.events}
    assert got == {(40, 0), (41, 12)}, got
    assert r.bases[2] == (9, True)


def test_argmax_keeps_the_lowest_index_and_needs_first():
    step = archmodel.argmax_step
    first = Instr.argmax(0, EAST, index=0, flags=ArgmaxFlag.FIRST)
    more = Instr.argmax(0, EAST, index=16)
    best = step(None, [3, 7, 7, -1], first)
    assert best == (7, 1)                                     # a tie inside a vector: the lower lane
    assert step(best, [7, 0, 0, 0], more) == (7, 1)           # equal, later: kept
    assert step(best, [0, 0, 8, 0], more) == (8, 18)
    assert step(best, [0, 0, 0, 0], first.with_addr(32)) == (0, 32)   # FIRST: replaced whatever it is
    assert vector_index(index_vector(70000, 16)) == 70000
    cfg = TileConfig.tiny().with_overrides(["sxm_argmax=1"])
    prog = Program(cfg, {"SXM_W": [Instr.argmax(0, EAST, index=0, out=0)]})
    with pytest.raises(ModelError, match="ARGMAX without FIRST"):
        archmodel.run(prog)


def test_setb_of_register_0_and_missing_fields_are_refused():
    with pytest.raises(ProgramError, match="SETB writes base register 0"):
        Program(TileConfig.tiny().with_overrides(["sxm_setb=1"]), {"SXM_W": [Instr.setb(0, EAST, reg=0)]}).validate()
    with pytest.raises(ProgramError, match="ARGMAX needs sxm_argmax = 1"):
        Program(TileConfig.tiny(), {"SXM_E": [Instr.argmax(0, EAST, index=0, flags=ArgmaxFlag.FIRST)]}).validate()


# ---- the loop -----------------------------------------------------------------------------------
@pytest.mark.parametrize("model", ["mlp", "attention"])
def test_tokens_equal_the_integer_reference_at_the_predicted_cycles(model):
    m, tokens, prompt = (MODEL, 16, [1]) if model == "mlp" else (ATTN, 6, [1, 2, 3])
    loop = TokenLoop(CFG, m, tokens, prompt_len=len(prompt))
    prog = loop.program(prompt)
    assert check_program(prog) == []
    r = archmodel.run(prog)
    ids = [vector_index(r.memory[ID_MEM][row]) for row in loop.id_rows]
    want = generate(m, prompt, tokens)
    assert ids == want and len(set(want)) > tokens // 2       # a walk, not a fixed point
    assert compare(golden_observed(r), promise(*loop.manifest()), skip=("write values",)) == []
    per = loop.token_cycles()
    if model == "mlp":
        assert len(set(per[1:])) == 1 and per[0] >= per[1]    # every token after the first alike
        assert loop.attention_cycles() == [0] * tokens
    else:                                   # the attention steps: a part of every token's cycles
        assert all(0 < a < c for a, c in zip(loop.attention_cycles()[1:], per[1:]))
    assert weight_read_bound(CFG, m) <= min(per)


def test_attention_makes_the_context_matter():
    """With attention the tokens depend on the prompt before its last token; without, not."""
    assert generate(ATTN, [1, 2, 3], 8) != generate(ATTN, [9, 3], 8)
    assert generate(MODEL, [1, 2, 3], 8) == generate(MODEL, [9, 3], 8)


def test_the_quantised_model_agrees_with_its_float_one():
    fm = synthetic_float(**ON_CHIP_MODEL)
    assert agreement(fm, quantise(fm), positions=64) >= 0.9


def test_the_context_is_bounded_by_the_cache():
    caches = Caches()
    for t in range(64):
        step_int(ATTN, t % ATTN.vocab, caches)
    with pytest.raises(LoopModelError, match="the context is full"):
        step_int(ATTN, 0, caches)
    with pytest.raises(CompileError, match="need 65 positions; the attention step's cache holds 64"):
        TokenLoop(CFG, ATTN, 60, prompt_len=6)


def test_the_integer_reference_is_the_argmax_of_its_logits():
    for t in range(MODEL.vocab):
        lg = logits_int(MODEL, t)
        assert next_token(MODEL, t) == int(np.flatnonzero(lg == lg.max())[0])


def test_runs_continue_where_the_last_one_stopped():
    """Without attention, 4 runs of 4 tokens: the same 16 ids as one run of 16, every run at the
    same cycles; with attention one run generates them all."""
    runs = LoopRuns(CFG, MODEL, [5, 1], 16, 4)
    assert sum(runs.ids, []) == generate(MODEL, [1], 16)
    assert runs.golden_problems() == []
    assert len({r.cycles for r in runs.golden}) == 1
    assert runs.golden[-1].bases[TOKEN_REG][0] == runs.ids[-1][-2]    # the register holds the last input
    with pytest.raises(CompileError, match="generates its 16 tokens in one run"):
        LoopRuns(CFG, ATTN, [1], 16, 4)


def test_the_check_sees_a_late_write():
    loop = TokenLoop(CFG, MODEL, 4)
    r = archmodel.run(loop.program(1))
    writes, cycles = loop.manifest()
    late = [dataclasses.replace(w, cycle=w.cycle + 1) if i == 2 else w for i, w in enumerate(writes)]
    problems = compare(golden_observed(r), promise(late, cycles), skip=("write values",))
    assert problems and {p.part for p in problems} == {"writes"}


def test_report_figures():
    rep = run_token_loop(CFG, MLP, prompt=[1], tokens=8, per_call=4)
    assert rep.passed, rep.problems
    f = rep.figures
    assert f["ids"] == generate(MODEL, [1], 8) and f["runs"] == 2
    assert f["cycles_per_token"] == TokenLoop(CFG, MODEL, 4).token_cycles()[1]
    assert f["ratio_to_bound"] == round(f["cycles_per_token"] / f["weight_read_bound"], 3)


@pytest.mark.parametrize("change, match", [
    ({"cfg": TileConfig()}, "the token loop needs sxm_argmax = 1"),
    ({"cfg": CFG.with_overrides(["iq_depth=128"]), "tokens": 16}, "need .* instructions in one queue; the queues "
                                                                  "hold iq_depth = 128"),
    ({"model": ATTN, "tokens": 16, "prompt_len": 3, "cfg": CFG.with_overrides(["iq_depth=2048"])},
     r"18 positions unrolled need \d+ instructions in one queue; the queues hold iq_depth = 2048 .*--set iq_depth=8192"),
    ({"model": synthetic(vocab=2048, H=32, I=32, layers=1)}, "a vocabulary of 2048 tokens does not fit"),
    ({"model": synthetic(vocab=64, H=24, I=32, layers=1)}, r"H \(24\) and I \(32\) must be multiples of the 16 lanes"),
    ({"cfg": TileConfig().with_overrides(["sxm_argmax=1", "sxm_setb=1"]), "model": ATTN},
     "the token loop needs sxm_max = 1"),
    ({"cfg": CFG.with_overrides(["trace_depth=256"]), "model": ATTN, "tokens": 16, "prompt_len": 2},
     r"writes \d+ rows of MEM_E0; its event trace holds trace_depth = 256 \(--set trace_depth=512\)"),
])
def test_refusals_name_the_limit(change, match):
    args = {"cfg": CFG, "model": MODEL, "tokens": 4, "prompt_len": 1, **change}
    with pytest.raises(CompileError, match=match):
        TokenLoop(args["cfg"], args["model"], args["tokens"], args["prompt_len"])


def test_decoder_fields_are_the_on_chip_tile():
    assert all(getattr(CFG, f.split("=")[0]) == int(f.split("=")[1]) for f in DECODER_FIELDS)


def test_stale_cache_rows_are_masked():
    """A run whose caches hold any int8 rows (an earlier run's later positions, a speculative
    round's rejected ones; here random, and rows of 127 and -128) generates the integer
    reference's tokens: the last block's reserved rows are masked whatever they score."""
    prompt, tokens = [1, 2, 3], 6
    loop = TokenLoop(CFG, ATTN, tokens, prompt_len=len(prompt))
    want = generate(ATTN, prompt, tokens)
    clean = archmodel.run(loop.program(prompt))
    what = {(c, s, a): w for c, s, a, w in loop.writes}

    def values(run):            # every write but the V^T columns (a reserved position's is stale, times e = 0)
        vt = lambda w: w[0] == "attention" and w[3][0] == "vt"
        return [(e.cycle, e.slice, e.addr, e.data) for e in run.events if not vt(what[e.cycle, e.slice, e.addr])]
    rng = np.random.default_rng(3)
    for fill in ("random", 127, -128):
        mem = {n: m.copy() for n, m in loop.state.memory.items()}
        for step in loop.steps.values():
            for cache, hemi in ((step.K, "W"), (step.V, "E"), (step.VT, "E")):
                for addrs in cache.values():
                    for s, a in enumerate(addrs):
                        rows = mem[f"MEM_{hemi}{s}"][a:a + 16]
                        rows[:] = (rng.integers(-128, 128, rows.shape) if fill == "random" else fill) & 0xFF
        r = archmodel.run(loop.program(prompt, mem))
        assert [vector_index(r.memory[ID_MEM][row]) for row in loop.id_rows] == want, fill
        assert values(r) == values(clean), fill          # the scores' maxima, y, x: as with zero rows


def test_the_loops_masks_saturate_for_any_stale_row():
    """The loop's heads are calibrated with ``stale_rows``: ``mask_mms`` MMs of the mask make a
    reserved position code to -128 whatever int8 key it holds (the largest ``K q``: 32 x 128 x 128)."""
    for layer in ATTN.layers:
        for spec in layer.attn.specs:
            assert spec.mask_saturates(spec.mask_mms, spec.D * 128 * 128)


def test_a_repeated_run_generates_the_same_tokens_at_the_same_cycles():
    """With attention, the same program run again on the SRAM the last run left (its caches full
    of the positions it wrote): the same ids, every write at the same cycle; without attention a
    repeat is refused (its runs continue the sequence)."""
    runs = LoopRuns(CFG, ATTN, [1, 2, 3], 4, 4, repeat=3)
    assert runs.ids == [generate(ATTN, [1, 2, 3], 4)] * 3 and runs.golden_problems() == []
    first = [(e.cycle, e.slice, e.addr) for e in runs.golden[0].events]
    assert all([(e.cycle, e.slice, e.addr) for e in r.events] == first for r in runs.golden[1:])
    with pytest.raises(CompileError, match="repeating a run is for a model with attention"):
        LoopRuns(CFG, MODEL, [1], 4, 4, repeat=2)


# ---- LayerNorm on chip ----------------------------------------------------------------------------
@pytest.mark.parametrize("model", ["mlp", "attention"])
def test_layer_norms_on_chip_equal_the_integer_reference(model):
    """Every norm a LayerNorm: the tokens and every write at its predicted cycle, on the golden model."""
    m, tokens, prompt = (MODEL, 8, [1]) if model == "mlp" else (ATTN, 4, [1, 2])
    m = with_layer_norms(m)
    cfg = CFG.with_overrides(["vxm_param_depth=256"])
    loop = TokenLoop(cfg, m, tokens, prompt_len=len(prompt))
    prog = loop.program(prompt)
    assert check_program(prog) == []
    r = archmodel.run(prog)
    ids = [vector_index(r.memory[ID_MEM][row]) for row in loop.id_rows]
    want = generate(m, prompt, tokens)
    assert ids == want and len(set(want)) > 1
    assert want != generate(MODEL if model == "mlp" else ATTN, prompt, tokens)     # the LayerNorms count
    assert len(loop.ln) == len(loop.norms()) == 2 * len(m.layers) + 1 - (model == "mlp") * len(m.layers)
    assert compare(golden_observed(r), promise(*loop.manifest()), skip=("write values",)) == []


def test_a_model_past_the_dedicated_rows_and_slots_reuses_them():
    """A vocabulary of more than ``HEAD_ROWS`` blocks of logits (their accumulator rows taken in
    turn) and more layers than their own x slots fit (``shared_slots``: a layer's vectors in the
    slots of the layer before the one before, h and y in every layer's): the ids of the integer
    reference and every write as predicted, so no slot or row is written before what read it."""
    from firmware_gen.compiler.token_loop import HEAD_ROWS
    m = synthetic(vocab=16 * HEAD_ROWS + 80, H=32, I=64, layers=5, heads=1, seed=2)
    cfg = CFG.with_overrides(["mem_depth=4096", "mxm_acc_depth=256", "vxm_param_depth=256"])
    prompt, tokens = [4, 9], 3
    loop = TokenLoop(cfg, m, tokens, prompt_len=len(prompt))
    assert loop.shared_slots and loop.KV > HEAD_ROWS
    r = archmodel.run(loop.program(prompt))
    assert [vector_index(r.memory[ID_MEM][row]) for row in loop.id_rows] == generate(m, prompt, tokens)
    assert compare(golden_observed(r), promise(*loop.manifest()), skip=("write values",)) == []


def test_a_model_of_two_heads_quantises():
    """The float model's trace names each head's q, k and v without overwriting the normalised
    vector the next head reads (it did: a second head found a string there)."""
    fm = synthetic_float(vocab=32, H=64, I=64, layers=1, heads=2, seed=1)
    m = quantise(fm)
    assert m.heads == 2 and agreement(fm, m, positions=16) >= 0.5
