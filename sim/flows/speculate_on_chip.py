"""Speculative decoding with the token loop on chip as the draft (``lpu speculate --model
on-chip``, ``docs/speculative.md``): the draft is the quantised decoder of
``firmware_gen/golden/token_loop.py`` run whole on one tile (``compiler/token_loop.py``), the
target its float model on the host, standing for the GPU.

Each round the tile runs one program (compiled for the round's first position; the layout is the
same every round, so the tile's SRAM, its KV caches included, carries from round to round): it
feeds the committed tokens the draft has not seen (the prompt in the first round, then one or
two) and proposes ``k`` tokens, the host writing only those tokens and reading only the ``k``
ids.  The target verifies the last committed token and the ``k`` proposals; the longest prefix
equal to its own choices is accepted, then its own choice.  A rejected proposal's cache rows
are simply written again by the next round (its positions are compiled in, and the attention
step's mask hides the positions beyond the context).

Every round is checked on the golden model: the ids against the pure-integer model's proposals
(``golden.token_loop.step_int`` on caches cut back as the tile's are), every write and the
cycle count against the compiler's promise; the tokens against the target's plain greedy
decoding.
"""

from __future__ import annotations

import numpy as np

from lpu_arch.config import TileConfig

from firmware_gen.compiler.token_loop import ID_MEM, TokenLoop
from firmware_gen.golden import archmodel
from firmware_gen.golden.archmodel import vector_index
from firmware_gen.golden.token_loop import Caches, FloatModel, LoopModel, quantise, step_int, synthetic_float
from firmware_gen.host.speculative import TimingModel, expected_tokens
from firmware_gen.scoreboard import compare, golden_observed, promise
from sim.report import Report


def float_greedy(fm: FloatModel, prompt, n: int) -> list[int]:
    """The target's plain decoding: ``n`` greedy tokens after ``prompt``."""
    caches, logits = {}, None
    for t in prompt:
        logits = fm.step(int(t), caches)
    out = []
    for _ in range(n):
        out.append(int(np.argmax(logits)))
        if len(out) < n:
            logits = fm.step(out[-1], caches)
    return out


def _cut(caches, positions: int) -> None:
    """Keep the first ``positions`` positions of every layer's and head's cache: a float model's
    (``{(layer, head): (keys, values)}``) or the integer model's (:class:`Caches`)."""
    lists = [*caches.K.values(), *caches.V.values()] if isinstance(caches, Caches) else \
        [rows for kv in caches.values() for rows in kv]
    for rows in lists:
        del rows[positions:]


class OnChipDraft:
    """The draft: ``model`` on a tile of ``cfg`` (the golden model), its SRAM carried from round
    to round; each round's program compiled once per (first position, fed tokens)."""

    def __init__(self, cfg: TileConfig, model: LoopModel, k: int):
        self.cfg, self.model, self.k = cfg, model, k
        self.loops, self.memory = {}, None
        self.positions = 0                  # positions whose K and V the tile's caches hold
        self.ref = Caches()                 # the integer model's caches, cut back as the tile's
        self.cycles, self.problems = [], []

    def propose(self, feed: list[int]) -> list[int]:
        """Feed ``feed`` from position :attr:`positions` on, then propose ``k`` tokens."""
        key = (self.positions, len(feed))
        loop = self.loops.get(key) or self.loops.setdefault(
            key, TokenLoop(self.cfg, self.model, self.k, prompt_len=len(feed), start=self.positions))
        r = archmodel.run(loop.program(feed, self.memory))
        self.memory = r.memory
        ids = [vector_index(r.memory[ID_MEM][row]) for row in loop.id_rows]
        want, logits = [], None                   # the integer model on the same caches
        for t in feed:
            logits = step_int(self.model, t, self.ref)
        for i in range(self.k):
            want.append(int(np.argmax(logits)))
            if i < self.k - 1:
                logits = step_int(self.model, want[-1], self.ref)
        where = f"round {len(self.cycles)} (positions from {self.positions})"
        if ids != want:
            self.problems.append(f"{where}: the tile proposed {ids}, the integer model {want}")
        self.problems += [p.at(where) for p in compare(golden_observed(r), promise(*loop.manifest()),
                                                       skip=("write values",))]
        self.cycles.append(r.cycles)
        self.positions += len(feed) + self.k - 1
        return ids

    def cut(self, positions: int) -> None:
        self.positions = min(self.positions, positions)
        _cut(self.ref, self.positions)


def target_bytes(fm: FloatModel) -> int:
    """The bytes of the target's weights one verification pass reads, float32 as the host holds
    them (the embedding lookup's one row a position not counted)."""
    return 4 * int(fm.head.size + sum(w.size for layer in fm.layers for w in layer.values()))


def speculate_on_chip(cfg: TileConfig, model: dict, prompt, n: int, k: int, tm: TimingModel | None = None) -> Report:
    """``n`` tokens after ``prompt`` by speculative decoding, the draft ``model`` (arguments of
    ``synthetic_float``) on chip, the target its float model; the effective tokens/s under the
    timing model ``tm`` (``host.speculative.TimingModel``: each round the draft's cycles at its
    clock, then one verification pass).  Rows: one per round."""
    tm = tm or TimingModel()
    fm = synthetic_float(**model)
    draft = OnChipDraft(cfg, quantise(fm), k)
    prompt = [int(t) for t in prompt]
    tc, seq, rounds = {}, list(prompt), []
    for t in prompt[:-1]:
        fm.step(t, tc)
    while len(seq) - len(prompt) < n:
        proposed = draft.propose(seq[draft.positions:])
        base = len(seq) - 1
        scores = [fm.step(t, tc) for t in (seq[-1], *proposed)]
        accepted = 0
        while accepted < k and int(np.argmax(scores[accepted])) == proposed[accepted]:
            accepted += 1
        own = int(np.argmax(scores[accepted]))
        seq += proposed[:accepted] + [own]
        _cut(tc, base + 1 + accepted)
        draft.cut(base + 1 + accepted)
        rounds.append({"round": len(rounds), "proposed": proposed, "accepted": accepted, "committed": accepted + 1,
                       "draft_cycles": draft.cycles[-1]})
    tokens = seq[len(prompt):len(prompt) + n]
    plain = float_greedy(fm, prompt, n)
    problems = list(draft.problems)
    if tokens != plain:
        problems.append(f"the tokens {tokens} are not the target's plain decoding {plain}")
    proposed = k * len(rounds)
    accepted = sum(r["accepted"] for r in rounds)
    compared = sum(min(r["accepted"] + 1, k) for r in rounds)
    draft_us = sum(draft.cycles) / tm.clock_mhz
    pass_us = tm.pass_us(target_bytes(fm))
    total_us = draft_us + len(rounds) * (pass_us + tm.transfer_us)
    timing = {"target_pass_us": round(pass_us, 4), "draft_us": round(draft_us, 4), "total_us": round(total_us, 4),
              "tokens_per_s": round(n / total_us * 1e6), "plain_tokens_per_s": round(1e6 / pass_us),
              "speedup": round(n * pass_us / total_us, 3)}
    data = {"passed": not problems, "draft": "on chip (golden model)", "k": k, "tokens": tokens, "plain": plain,
            "rounds": len(rounds), "acceptance": round(accepted / proposed, 4),
            "acceptance_compared": round(accepted / compared, 4),
            "tokens_per_verification": round(sum(r["committed"] for r in rounds) / len(rounds), 3),
            "expected_tokens_compared": round(expected_tokens(accepted / compared, k), 3),
            "draft_cycles_per_round": round(sum(draft.cycles) / len(draft.cycles), 1),
            "draft_us_per_round": round(sum(draft.cycles) / len(draft.cycles) / tm.clock_mhz, 4),
            "programs_compiled": len(draft.loops), "target_weight_bytes": target_bytes(fm), "timing": timing,
            "problems": problems, "round_rows": rounds}
    return Report.of("speculate-on-chip", data, rows_key="round_rows")
