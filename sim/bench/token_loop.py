"""`make bench`'s token-loop rows (``docs/afd.md``, "The token loop on chip"), on the golden model.

The default loop model (``sim.flows.token_loop.ON_CHIP_MODEL``) generates :data:`TOKENS` tokens
on the default tile with ``lpu_arch.config.DECODER_FIELDS``, :data:`PER_CALL` tokens a run of
the tile (``run_token_loop``, what ``lpu decode --on-chip --no-run`` runs): every run's ids
against the pure-integer reference and its id writes and cycles against the compiler's
promise.  The row: the cycles per token (a run's later tokens) and of a run's first token,
the cycles per run, the weight-read bound (``sim.flows.token_loop.weight_read_bound``) and the
ratio to it, the deepest queue's instructions against ``iq_depth``, and whether every check
passed."""

from __future__ import annotations

from lpu_arch.config import DECODER_FIELDS

from sim.table import Table, right

TOKENS, PER_CALL = 16, 4


def token_loop_rows(cfg=None) -> list[dict]:
    """One row: :data:`TOKENS` tokens of the default loop model, :data:`PER_CALL` a run, on the
    golden model of ``cfg`` (default: the default tile) with the loop's fields."""
    from sim.flows.token_loop import ON_CHIP_MODEL, on_chip_config, run_token_loop
    rep = run_token_loop(on_chip_config(cfg), tokens=TOKENS, per_call=PER_CALL)
    f = rep.figures
    m = ON_CHIP_MODEL
    return [{"model": f"vocab {m['vocab']}, H = {m['H']}, I = {m['I']}, {m['layers']} layers, seed {m['seed']}",
             "tokens": f["tokens"], "per_call": f["per_call"], "runs": f["runs"],
             "cycles_per_token": f["cycles_per_token"], "first_token_cycles": f["first_token_cycles"],
             "cycles_per_run": f["cycles_per_run"], "weight_read_bound": f["weight_read_bound"],
             "ratio_to_bound": f["ratio_to_bound"], "iq_needed": f["iq_needed"], "iq_depth": f["iq_depth"],
             "weight_bytes": f["weight_bytes"], "passed": rep.passed}]


TABLE = Table("model", right("tokens"), right("a run"), right("cycles per token"), right("first of a run"),
              right("cycles per run"), right("weight-read bound"), right("cycles / bound"),
              right("deepest queue"), "passed")


def markdown_token_loop(rs: list[dict]) -> list[str]:
    if not rs:
        return []
    lines = ["", f"The token loop on chip: the default loop model (residual MLP layers, embedding, LM head, "
             f"argmax; no attention) on the default tile with {', '.join(DECODER_FIELDS)} (golden model; the "
             "ids against the pure-integer reference, every id write and the cycles as the compiler promised; "
             "tokens unrolled in the queues, the deepest against iq_depth; the bound: every weight row read "
             "once, one row a cycle from each MEM slice):", ""]
    return lines + TABLE.markdown([r["model"], r["tokens"], r["per_call"], r["cycles_per_token"],
                                   r["first_token_cycles"], r["cycles_per_run"], r["weight_read_bound"],
                                   f"{r['ratio_to_bound']:.2f}", f"{r['iq_needed']} of {r['iq_depth']}",
                                   "yes" if r["passed"] else "NO"] for r in rs)
