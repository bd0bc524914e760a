"""``make bench``'s token-loop row (``sim/bench/token_loop.py``): its figures are the compiler's
prediction (``TokenLoop.token_cycles``, ``cycles``, ``iq_needed``) and the weight-read bound
counted here from the model's shapes; the row's check gates the bench's verdict; its table."""

import functools

import pytest

from firmware_gen.compiler.token_loop import TokenLoop
from firmware_gen.golden.token_loop import synthetic

from sim.bench import suite
from sim.bench.token_loop import PROMPT, TOKENS, markdown_token_loop, models, token_loop_rows
from sim.flows.token_loop import on_chip_config, weight_read_bound


def padded_blocks(W, lanes):
    """``lanes x lanes`` blocks of ``W``, its rows padded to a whole block."""
    return -(-W.shape[0] // lanes) * (W.shape[1] // lanes)


@functools.cache
def rows() -> tuple:
    """The bench's rows, computed once for the tests below."""
    return tuple(token_loop_rows())


@pytest.mark.long          # (make bench computes the same rows; the compiler's predictions are tested in make test)
def test_rows_are_the_compilers_prediction():
    rows_ = rows()
    assert len(rows_) == len(models()) == 2
    cfg = on_chip_config()
    for row, (args, per_call) in zip(rows_, models()):
        model = synthetic(**args)
        loop = TokenLoop(cfg, model, per_call, prompt_len=len(PROMPT))
        later = loop.token_cycles()[1:]
        assert row["passed"]                 # ids = the integer reference's, writes and cycles as promised
        assert (row["tokens"], row["per_call"], row["runs"]) == (TOKENS, per_call, TOKENS // per_call)
        assert row["first_token_cycles"] == loop.token_cycles()[0]
        assert row["cycles_per_token"] == round(sum(later) / len(later), 2)
        assert row["cycles_per_run"] == loop.cycles >= sum(loop.token_cycles())
        assert row["iq_needed"] == loop.iq_needed() <= row["iq_depth"] == cfg.iq_depth
        # The bound: every weight row (W1, W2, Wq, Wk, Wv, Wo, the residuals' blocks, each norm's
        # three constant blocks, the LM head) read once, one row a cycle from each MEM slice.
        L = cfg.lanes
        blocks = padded_blocks(model.head, L) + 3 * (model.norm is not None)
        for l in model.layers:
            blocks += padded_blocks(l.W1, L) + padded_blocks(l.W2, L) + 1 + 3 * (l.norm is not None)
            if l.attn:
                blocks += sum(padded_blocks(getattr(l.attn, f"W{n}"), L) for n in "qkvo") + 1
                blocks += 3 * (l.attn.norm is not None)
        bound = -(-blocks * L // len(cfg.mem_names))
        assert row["weight_read_bound"] == weight_read_bound(cfg, model) == bound
        assert row["ratio_to_bound"] == round(row["cycles_per_token"] / bound, 3)
        assert row["cycles_per_token"] > bound
    check_gates_the_bench_and_has_a_table()       # (one test: the rows are computed once, in one process)


def check_gates_the_bench_and_has_a_table():
    row = rows()[0]
    result = {"ffn": [], "speed": [], "loading": [], "speed_vs_reference": [], "token_loop": [row]}
    assert suite.passed(result)
    assert not suite.passed({**result, "token_loop": [{**row, "passed": False}]})
    lines = markdown_token_loop([row])
    assert "The token loop on chip" in lines[1]
    cells = [c.strip() for c in lines[-1].strip("|").split("|")]
    assert cells[3:8] == [str(row[k]) for k in ("cycles_per_token", "first_token_cycles", "cycles_per_run",
                                                 "weight_read_bound")] + [f"{row['ratio_to_bound']:.2f}"]
    assert cells[-1] == "yes"
    assert markdown_token_loop([]) == []
