"""`make bench`'s speculative-decoding rows (``docs/speculative.md``), on the golden model:
all-MiniLM-L6-v2 run as a decoder (when its package is installed), the float target and
three drafts (int8 FFNs, FP8 FFNs, the first ``MINILM_SKIP`` layers in int8), over
``TOKENS`` tokens after the fixed text's first 8, greedy without the last
``MINILM_NO_REPEAT`` tokens, for each ``K``: the acceptance, the tokens per verification
beside the analytic expectation, the draft's cycles per token (the tray compiler) and the
effective tokens/s under the default timing model against the target alone.  Every run's
tokens are checked against the target's plain decoding."""

from __future__ import annotations

from firmware_gen.host.decoder import float_ffn
from firmware_gen.host.speculative import TimingModel, greedy, weight_bytes
from firmware_gen.host.weights import find_packaged_model

from sim.flows.speculate import (MINILM_NO_REPEAT, MINILM_SKIP, figures, minilm, minilm_draft, minilm_prompt,
                                 minilm_run, tray_cycles)
from sim.table import Table, right

K, TOKENS = (2, 4, 8), 64
DRAFTS = (("int8", "int8", None), ("FP8", "fp8", None), (f"layer-skip ({MINILM_SKIP} of 6 layers, int8)", "int8",
                                                        MINILM_SKIP))


def speculate_rows(ks=K, tokens: int = TOKENS, drafts=DRAFTS, model: TimingModel | None = None) -> list[dict]:
    """A row per draft and k (none without the package)."""
    path = find_packaged_model()
    if path is None:
        return []
    model = model or TimingModel()
    target, vocab = minilm(path)
    ffn, prompt = float_ffn(target), minilm_prompt(vocab)
    plain = greedy(target, prompt, tokens, ffn, MINILM_NO_REPEAT)
    tbytes = weight_bytes(target)
    rows = []
    for name, dtype, skip in drafts:
        draft = minilm_draft(target, vocab, dtype, skip)
        cycles = None
        for k in ks:
            r = minilm_run(target, vocab, draft, k, tokens, MINILM_NO_REPEAT, prompt, plain, ffn)
            if cycles is None:         # the compiler's cycles, each layer checked once on the tray's golden model
                cycles = tray_cycles(draft.specs, dtype, inputs=r["first_inputs"])
            r["problems"] += cycles["problems"]
            f = figures(r["run"], cycles, tbytes, model)
            rows.append({"draft": name, "dtype": dtype, "skip": skip, "k": k, "tokens": tokens,
                         "no_repeat": MINILM_NO_REPEAT, "exact": not r["problems"], "problems": r["problems"][:3],
                         **{key: f[key] for key in ("rounds", "proposed", "accepted", "compared", "committed",
                                                     "acceptance", "acceptance_compared", "tokens_per_verification",
                                                     "expected_tokens", "expected_tokens_compared", "draft_steps",
                                                     "all_accepted_rounds", "target_weight_bytes", "timing")},
                         "draft_cycles_per_token": cycles["cycles_per_token"],
                         "draft_wall_cycles_per_token": cycles["wall_cycles_per_token"]})
    return rows


TABLE = Table("draft", right("k"), right("acceptance"), right("per compared"), right("tokens / verification"),
              right("expected (a)"), right("expected (compared)"), right("draft wall cycles / token"),
              right("tokens/s"), right("target alone"), right("speed-up"), "same as target")


def markdown(rows: list[dict]) -> list[str]:
    if not rows:
        return []
    t = rows[0]["timing"]
    lines = ["", f"Speculative decoding (golden model; docs/speculative.md): all-MiniLM-L6-v2 as a decoder, the float "
             f"target and quantised drafts, {rows[0]['tokens']} tokens after the fixed text's first 8, greedy without "
             f"the last {rows[0]['no_repeat']} tokens. Acceptance: accepted / proposed draft tokens; per compared: "
             "accepted / the proposals the target judged; expected: (1 - a^(k+1)) / (1 - a) at each. Draft cycles: "
             "the tray compiler (8 default tiles). tokens/s: the timing model, a verification pass "
             f"{t['target_pass_us']:.2f} us ({rows[0]['target_weight_bytes']:,} bytes at {t['hbm_gbs']:g} GB/s) + "
             f"{t['transfer_us']:g} us transfer, the draft's wall cycles at {t['clock_mhz']:g} MHz; target alone: one "
             "pass per token (assumptions, not measurements):", ""]
    return lines + TABLE.markdown([r["draft"], r["k"], f"{r['acceptance']:.3f}", f"{r['acceptance_compared']:.3f}",
                                   f"{r['tokens_per_verification']:.2f}", f"{r['expected_tokens']:.2f}",
                                   f"{r['expected_tokens_compared']:.2f}", f"{r['draft_wall_cycles_per_token']:,}",
                                   f"{r['timing']['tokens_per_s']:,.0f}", f"{r['timing']['plain_tokens_per_s']:,.0f}",
                                   f"{r['timing']['speedup']:.2f}x", "yes" if r["exact"] else "NO"] for r in rows)
