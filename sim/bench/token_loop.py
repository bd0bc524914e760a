"""`make bench`'s token-loop rows (``docs/afd.md``, "The token loop on chip"), on the golden model.

Two rows, each :data:`TOKENS` tokens after the prompt :data:`PROMPT` on the default tile with
``lpu_arch.config.DECODER_FIELDS`` (``run_token_loop``, what ``lpu decode --on-chip --no-run``
runs): the default decoder (``sim.flows.token_loop.ON_CHIP_MODEL``: attention, one head) in one
run, and the same without attention, :data:`PER_CALL` tokens a run.  Every run's ids against the
pure-integer reference, its writes and cycles against the compiler's promise.  A row: the mean
cycles per token (a run's later tokens) and of a run's first token (with attention: the prompt's
positions too), the cycles per run, the weight-read bound
(``sim.flows.token_loop.weight_read_bound``) and the ratio to it, the deepest queue's
instructions against ``iq_depth``, the float model's teacher-forced top-1 agreement, and whether
every check passed."""

from __future__ import annotations

from lpu_arch.config import DECODER_FIELDS

from sim.table import Table, right

TOKENS, PER_CALL, PROMPT = 16, 4, (1, 2)


def models() -> list[tuple[dict, int]]:
    """(the synthetic model's arguments, tokens a run) of each row."""
    from sim.flows.token_loop import ON_CHIP_MODEL
    return [(ON_CHIP_MODEL, TOKENS), (dict(ON_CHIP_MODEL, heads=0), PER_CALL)]


def token_loop_rows(cfg=None) -> list[dict]:
    """A row per model of :func:`models` on the golden model of ``cfg`` (default: the default
    tile) with the loop's fields."""
    from sim.flows.token_loop import on_chip_config, run_token_loop
    return [_row(run_token_loop(on_chip_config(cfg), m, PROMPT, TOKENS, per_call), m) for m, per_call in models()]


def _row(rep, m) -> dict:
    f = rep.figures
    heads = f"{m['heads']} head" if m["heads"] else "no attention"
    return {"model": f"vocab {m['vocab']}, H = {m['H']}, I = {m['I']}, {m['layers']} layers, {heads}, seed {m['seed']}",
            "tokens": f["tokens"], "per_call": f["per_call"], "runs": f["runs"],
            "cycles_per_token": f["cycles_per_token"], "first_token_cycles": f["first_token_cycles"],
            "cycles_per_run": f["cycles_per_run"], "weight_read_bound": f["weight_read_bound"],
            "ratio_to_bound": f["ratio_to_bound"], "iq_needed": f["iq_needed"], "iq_depth": f["iq_depth"],
            "weight_bytes": f["weight_bytes"], "top1_agreement_with_float": f["top1_agreement_with_float"],
            "passed": rep.passed}


TABLE = Table("model", right("tokens"), right("a run"), right("cycles per token"), right("first of a run"),
              right("cycles per run"), right("weight-read bound"), right("cycles / bound"),
              right("deepest queue"), "passed")


def markdown_token_loop(rs: list[dict]) -> list[str]:
    if not rs:
        return []
    lines = ["", f"The token loop on chip: a synthetic pre-norm decoder (embedding, layers of RMSNorm and "
             f"attention and RMSNorm and MLP with residuals, a final RMSNorm, LM head, argmax) with and without "
             f"attention, {TOKENS} tokens after the prompt "
             f"{list(PROMPT)} on the default tile with {', '.join(DECODER_FIELDS)} (golden model; the ids against "
             "the pure-integer reference, every write and the cycles as the compiler promised; positions unrolled "
             "in the queues, the deepest against iq_depth; cycles per token: the mean of a run's later tokens; the "
             "bound: every weight and norm-constant row read once, one row a cycle from each MEM slice):", ""]
    return lines + TABLE.markdown([r["model"], r["tokens"], r["per_call"], r["cycles_per_token"],
                                   r["first_token_cycles"], r["cycles_per_run"], r["weight_read_bound"],
                                   f"{r['ratio_to_bound']:.2f}", f"{r['iq_needed']} of {r['iq_depth']}",
                                   "yes" if r["passed"] else "NO"] for r in rs)
