"""Speculative decoding (``docs/speculative.md``): a draft decoder proposes ``k`` tokens,
the target scores them in one verification pass and keeps the longest prefix its own
choice agrees with, plus its own next token, so the output is exactly the target's.

The draft is the decode loop's model (``decoder.py``): its FFNs quantised (int8 or FP8)
and run by whoever answers the generator's requests (:func:`speculate_gen` yields
``(layer, x)`` for every draft FFN, as ``decoder.generate_gen`` does, so the RTL's
testbench can await the tile for each); its attention, norms and head on the host.  The
target is a float decoder on the host, standing for the GPU; its FFN is a callable
(default ``decoder.float_ffn``).

The choice of a token from logits is greedy (argmax), or greedy among the tokens not in
the last ``no_repeat`` tokens of the sequence (a deterministic rule of the logits and the
prefix; the draft and the target apply the same one, so the output is still exactly the
target's own decoding with that rule).

:func:`statistics` gives a run's figures, :func:`timing` the effective tokens/s under a
stated model of the target's verification time."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from firmware_gen.host.decoder import Decoder, KvCache, drive, float_ffn, step, step_gen


def choose(logits, seq, no_repeat: int = 0) -> int:
    """The token chosen from ``logits`` after the sequence ``seq``: the argmax (the first
    of equal ones), or with ``no_repeat`` > 0 the argmax among the tokens not in
    ``seq[-no_repeat:]``."""
    logits = np.asarray(logits)
    if no_repeat <= 0:
        return int(np.argmax(logits))
    banned = np.unique(np.asarray(list(seq)[-no_repeat:], np.int64))
    if len(banned) >= len(logits):
        raise ValueError(f"no_repeat = {no_repeat} bans the whole vocabulary ({len(logits)} tokens)")
    masked = logits.astype(np.float64, copy=True)
    masked[banned] = -np.inf
    return int(np.argmax(masked))


def truncate(cache: KvCache, positions: int) -> None:
    """Keep the first ``positions`` positions of every layer's keys and values."""
    for ks in (cache.k, cache.v):
        for l in range(len(ks)):
            del ks[l][positions:]


def layer_skip(model: Decoder, m: int) -> Decoder:
    """The layer-skip draft: ``model``'s first ``m`` layers, then its final norm (if any)
    and LM head (with the calibrated FFNs of those layers, if calibrated)."""
    if not 1 <= m <= len(model.layers):
        raise ValueError(f"a layer-skip draft keeps 1..{len(model.layers)} layers, got {m}")
    return replace(model, layers=model.layers[:m], specs=model.specs[:m], smooth=model.smooth[:m])


def greedy(model: Decoder, prompt, n: int, ffn, no_repeat: int = 0) -> list[int]:
    """Plain decoding of ``model`` with ``ffn``: the prompt one position at a time, then
    ``n`` tokens chosen by :func:`choose` (with ``no_repeat`` = 0, ``decoder.generate``'s)."""
    cache, seq = KvCache(len(model.layers)), [int(t) for t in prompt]
    logits = None
    for t in seq:
        logits = step(model, t, cache, ffn)
    new = []
    for _ in range(n):
        new.append(choose(logits, seq + new, no_repeat))
        if len(new) < n:
            logits = step(model, new[-1], cache, ffn)
    return new


def verify(model: Decoder, tokens, cache: KvCache, ffn) -> list:
    """The target's verification pass: the logits after each of ``tokens`` (the last
    committed token and the draft's proposals), appending their keys and values to
    ``cache``.  Causal, so each position's logits are those plain decoding computes there;
    the positions are computed in order with plain decoding's arithmetic (bit-identical
    logits), the timing model (:func:`timing`) charges them one pass."""
    return [step(model, int(t), cache, ffn) for t in tokens]


def speculate_gen(draft: Decoder, target: Decoder, prompt, n: int, k: int, target_ffn=None,
                  no_repeat: int = 0):
    """Speculative decoding as a generator: yields ``(layer, x)`` for every FFN of the
    draft and takes its output back (``send``); returns :func:`speculate`'s result.

    The prompt but its last token is prefilled into both models' caches (not counted).
    Each round: the draft feeds the committed tokens it has not seen (one, or two after a
    round that accepted all ``k``) and proposes ``k`` tokens, each from its own logits;
    the target verifies the last committed token and the ``k`` proposals in one pass
    (``k + 1`` logits); the longest prefix of proposals equal to the target's choices is
    accepted, then the target's own choice after it; both caches are cut back to the
    committed tokens.  Stops after ``n`` new tokens (the last round's extra ones dropped)."""
    if k < 1:
        raise ValueError(f"k (tokens proposed per round) must be at least 1, got {k}")
    prompt = [int(t) for t in prompt]
    if not prompt:
        raise ValueError("the prompt needs at least one token")
    target_ffn = target_ffn or float_ffn(target)
    tc, dc = KvCache(len(target.layers)), KvCache(len(draft.layers))
    for t in prompt[:-1]:
        step(target, t, tc, target_ffn)
        yield from step_gen(draft, t, dc)
    seq, rounds, draft_steps = list(prompt), [], 0
    while len(seq) - len(prompt) < n:
        # the draft catches up with the committed tokens, then proposes k
        logits = None
        for t in seq[len(dc.k[0]):]:
            logits = yield from step_gen(draft, t, dc)
            draft_steps += 1
        proposed = []
        for i in range(k):
            proposed.append(choose(logits, seq + proposed, no_repeat))
            if i < k - 1:
                logits = yield from step_gen(draft, proposed[-1], dc)
                draft_steps += 1
        # the target scores the last committed token and the k proposals
        base = len(seq) - 1
        scores = verify(target, [seq[-1], *proposed], tc, target_ffn)
        accepted = 0
        while accepted < k and choose(scores[accepted], seq + proposed[:accepted], no_repeat) == proposed[accepted]:
            accepted += 1
        own = choose(scores[accepted], seq + proposed[:accepted], no_repeat)
        seq += proposed[:accepted] + [own]
        truncate(tc, base + 1 + accepted)
        truncate(dc, min(len(dc.k[0]), base + 1 + accepted))
        rounds.append({"proposed": k, "accepted": accepted, "compared": min(accepted + 1, k),
                       "committed": accepted + 1})
    return {"tokens": seq[len(prompt):len(prompt) + n], "rounds": rounds, "draft_steps": draft_steps,
            "prefill": len(prompt) - 1, "k": k, "no_repeat": no_repeat}


def speculate(draft: Decoder, draft_ffn, target: Decoder, prompt, n: int, k: int, target_ffn=None,
              no_repeat: int = 0) -> dict:
    """:func:`speculate_gen` with ``draft_ffn(layer, x) -> y``: ``{"tokens", "rounds"
    (per round: proposed, accepted, compared, committed), "draft_steps" (draft positions
    after the prefill), "prefill", "k", "no_repeat"}``."""
    return drive(speculate_gen(draft, target, prompt, n, k, target_ffn, no_repeat), draft_ffn)


def expected_tokens(a: float, k: int) -> float:
    """Tokens per verification for independent acceptances at rate ``a`` each:
    ``(1 - a^(k+1)) / (1 - a)`` (``k + 1`` at ``a`` = 1)."""
    return float(k + 1) if a >= 1.0 else (1.0 - a ** (k + 1)) / (1.0 - a)


def statistics(run: dict) -> dict:
    """A run's figures, each from its rounds:

    * ``acceptance``: accepted draft tokens / proposed draft tokens (``k`` per round);
    * ``acceptance_compared``: accepted / compared, the proposals the target judged (up to
      and including the first it rejects): the per-position acceptance probability of the
      independent model, the rate the analytic formula assumes;
    * ``tokens_per_verification``: committed tokens (accepted + the target's own) per round;
    * ``expected_tokens``, ``expected_tokens_compared``: :func:`expected_tokens` at each rate."""
    r, k = run["rounds"], run["k"]
    proposed, accepted = sum(x["proposed"] for x in r), sum(x["accepted"] for x in r)
    compared, committed = sum(x["compared"] for x in r), sum(x["committed"] for x in r)
    a, ac = accepted / proposed, accepted / compared
    return {"k": k, "rounds": len(r), "proposed": proposed, "accepted": accepted, "compared": compared,
            "committed": committed, "acceptance": a, "acceptance_compared": ac,
            "tokens_per_verification": committed / len(r), "expected_tokens": expected_tokens(a, k),
            "expected_tokens_compared": expected_tokens(ac, k),
            "all_accepted_rounds": sum(x["accepted"] == k for x in r)}


def weight_bytes(model: Decoder) -> int:
    """The bytes of the weights one pass of ``model`` reads, as the host holds them
    (float32): every layer's arrays, the final norm and the LM head (the embedding lookup
    reads one row per position and is not counted; all-MiniLM-L6-v2's head is its word
    embeddings)."""
    def size(v) -> int:           # arrays, in lists and dataclasses too (a MoE layer's experts)
        if isinstance(v, np.ndarray):
            return v.nbytes
        if isinstance(v, (list, tuple)):
            return sum(map(size, v))
        return sum(map(size, vars(v).values())) if hasattr(v, "__dataclass_fields__") else 0
    return int(size(model.head) + size(model.norm) + size(model.layers))


@dataclass(frozen=True)
class TimingModel:
    """The stated model of one round's time: each draft position takes the draft's wall
    cycles per token at ``clock_mhz`` (the tile's side alone: the draft's attention and
    head on the host are not counted); each verification pass reads the target's weight
    bytes at ``hbm_gbs`` GB/s and adds ``transfer_us`` (the proposals to the GPU and the
    verdict back).  Plain decoding by the target alone: one pass per token, the same
    weight bytes at the same bandwidth, no transfer."""
    hbm_gbs: float = 8000.0
    transfer_us: float = 2.0
    clock_mhz: float = 900.0

    def __post_init__(self):
        for name in ("hbm_gbs", "transfer_us", "clock_mhz"):
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0):
                raise ValueError(f"{name} must be a positive finite number, got {v!r}")

    def pass_us(self, target_bytes: int) -> float:
        return target_bytes / (self.hbm_gbs * 1e3)


def timing(run: dict, draft_cycles_per_token: int, target_bytes: int, model: TimingModel) -> dict:
    """Effective tokens/s of ``run`` (:func:`speculate`'s) under ``model``: the rounds'
    verification passes plus the draft's positions, against plain decoding of the same
    tokens by the target alone (the prefill excluded from both)."""
    n, rounds = len(run["tokens"]), len(run["rounds"])
    pass_us = model.pass_us(target_bytes)
    draft_us = draft_cycles_per_token / model.clock_mhz
    total = rounds * (pass_us + model.transfer_us) + run["draft_steps"] * draft_us
    plain = n * pass_us
    return {"target_pass_us": pass_us, "draft_us_per_token": draft_us, "verify_us": rounds * (pass_us + model.transfer_us),
            "draft_us": run["draft_steps"] * draft_us, "total_us": total, "tokens_per_s": n / total * 1e6,
            "plain_tokens_per_s": n / plain * 1e6, "speedup": plain / total}
