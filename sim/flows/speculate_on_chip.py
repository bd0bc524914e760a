"""Speculative decoding with the token loop on chip as the draft (``lpu speculate --model
on-chip``, ``docs/speculative.md``): the draft is the quantised decoder of
``firmware_gen/golden/token_loop.py`` run whole on one tile (``compiler/token_loop.py``): the
golden model, and with a simulator the RTL tile as well (``sim/tb/speculate_on_chip.py``, the
target and the compiler in the testbench between rounds); the target is its float model on the
host, standing for the GPU.

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
cycle count against the compiler's promise; on the RTL every round against the golden model's
run of it and the compiler; the tokens against the target's plain greedy decoding.
"""

from __future__ import annotations

import numpy as np

from lpu_arch.config import TileConfig

from firmware_gen.compiler.token_loop import ID_MEM, START_MEM, TokenLoop
from firmware_gen.golden import archmodel
from firmware_gen.golden.archmodel import index_vector, vector_index
from firmware_gen.golden.token_loop import Caches, FloatModel, LoopModel, quantise, step_int, synthetic_float
from firmware_gen.host.speculative import TimingModel, expected_tokens
from firmware_gen.scoreboard import compare, golden_observed, golden_reference, ids_reference, promise, token_ids
from sim.harness.runner import TIMESCALE, TileSim, default_timeout, job, run_testbench
from sim.harness.scoreboard import tile_observed
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


def rounds_gen(fm: FloatModel, prompt, n: int, k: int):
    """Speculative decoding's rounds as a generator: yields ``(start, feed)`` (the draft's first
    position this round and the committed tokens it has not seen) and takes the ``k`` proposed ids
    back (``send``); the target (``fm``, float) verifies them.  Returns ``{"tokens", "rounds"}``.
    The golden model's draft (:class:`OnChipDraft`) and the RTL testbench's
    (``sim/tb/speculate_on_chip.py``) answer the same requests."""
    prompt = [int(t) for t in prompt]
    tc, seq, rounds, positions = {}, list(prompt), [], 0
    for t in prompt[:-1]:
        fm.step(t, tc)
    while len(seq) - len(prompt) < n:
        feed = seq[positions:]
        proposed = list((yield positions, feed))
        positions += len(feed) + k - 1
        base = len(seq) - 1
        scores = [fm.step(t, tc) for t in (seq[-1], *proposed)]
        accepted = 0
        while accepted < k and int(np.argmax(scores[accepted])) == proposed[accepted]:
            accepted += 1
        own = int(np.argmax(scores[accepted]))
        seq += proposed[:accepted] + [own]
        _cut(tc, base + 1 + accepted)
        positions = min(positions, base + 1 + accepted)     # the draft's caches cut back as the target's
        rounds.append({"round": len(rounds), "proposed": proposed, "accepted": accepted, "committed": accepted + 1})
    return {"tokens": seq[len(prompt):len(prompt) + n], "rounds": rounds}


def drive(gen, propose) -> dict:
    """Run :func:`rounds_gen` with ``propose(start, feed) -> ids``."""
    request = next(gen)
    while True:
        try:
            request = gen.send(propose(*request))
        except StopIteration as done:
            return done.value


def round_job(loop: TokenLoop, feed, first: bool) -> dict:
    """The testbench's job of a round: the first loads everything (the program, the weights, the
    parameters and tables, the fed tokens); a later one is resident: the round's program (the
    driver writes the words that differ) and the fed tokens' rows, the caches as the tile holds
    them."""
    prog = loop.program(feed)
    rows = {ID_MEM: list(loop.id_rows)}
    if first:
        full = job(prog, name="round 0", read_back=rows)
        memory = {n: {r: row for r, row in enumerate(m) if any(row)} for n, m in full.pop("memory").items()}
        return {**full, "resident": True, "memory_rows": memory}
    fed = {START_MEM: {int(r): [int(b) for b in index_vector(t, loop.cfg.lanes)] for r, t in zip(loop.prompt_rows, feed)}}
    return {"resident": True, "name": f"round from position {loop.start}", "images": prog.images(),
            "memory_rows": fed, "read_back": rows, "timeout_cycles": default_timeout(prog)}


class OnChipDraft:
    """The draft: ``model`` on a tile of ``cfg`` (the golden model), its SRAM carried from round
    to round; each round's program compiled once per (first position, fed tokens).  Every round
    is checked (:attr:`problems`): the ids against the integer model's proposals on caches cut
    back as the tile's, every write and the cycle count against the compiler."""

    def __init__(self, cfg: TileConfig, model: LoopModel, k: int):
        self.cfg, self.model, self.k = cfg, model, k
        self.loops, self.memory = {}, None
        self.ref = Caches()                 # the integer model's caches, cut back as the tile's
        self.rounds, self.problems = [], []  # per round: (start, feed, loop, golden result, ids)

    def loop(self, start: int, feed_len: int) -> TokenLoop:
        key = (start, feed_len)
        return self.loops.get(key) or self.loops.setdefault(
            key, TokenLoop(self.cfg, self.model, self.k, prompt_len=feed_len, start=start))

    def propose(self, start: int, feed: list[int]) -> list[int]:
        """Feed ``feed`` from position ``start`` on, then propose ``k`` tokens."""
        loop = self.loop(start, len(feed))
        r = archmodel.run(loop.program(feed, self.memory))
        self.memory = r.memory
        ids = [vector_index(r.memory[ID_MEM][row]) for row in loop.id_rows]
        _cut(self.ref, start)
        want, logits = [], None                   # the integer model on the same caches
        for t in feed:
            logits = step_int(self.model, t, self.ref)
        for i in range(self.k):
            want.append(int(np.argmax(logits)))
            if i < self.k - 1:
                logits = step_int(self.model, want[-1], self.ref)
        where = f"round {len(self.rounds)} (positions from {start})"
        seen = golden_observed(r, outputs=token_ids(ids), outputs_as="the tile's proposals")
        self.problems += [p.at(where) for p in compare(seen, promise(*loop.manifest()),
                                                       ids_reference(want, "integer model"), skip=("write values",))]
        self.rounds.append((start, list(feed), loop, r, ids))
        return ids


def target_bytes(fm: FloatModel) -> int:
    """The bytes of the target's weights one verification pass reads, float32 as the host holds
    them (the embedding lookup's one row a position not counted)."""
    return 4 * int(fm.head.size + sum(w.size for layer in fm.layers for w in layer.values()))


def run_rtl(cfg: TileConfig, model: dict, prompt, n: int, k: int, sim: str, progress=None) -> dict:
    """The rounds with the RTL tile as the draft, one testbench session
    (``sim/tb/speculate_on_chip.py``: the target and the compiler run in it, between rounds)."""
    tile = TileSim(cfg, sim)
    out, _ = run_testbench(tile, "sim.tb.speculate_on_chip",
                           {"config": cfg.to_dict(), "speculate": {"model": model, "prompt": list(prompt), "n": n,
                                                                   "k": k}},
                           "speculate_on_chip", TIMESCALE, progress, 0)
    return out[0]


def rtl_problems(draft: OnChipDraft, run: dict, rtl: dict) -> list[str]:
    """The RTL's rounds against the golden model's: the same requests, each round's observation
    as the golden model's run (every write with its value, the cycles, the busy counters, the ids
    read back) and the compiler's promise, the same tokens."""
    problems = []
    if rtl["tokens"] != run["tokens"]:
        problems.append(f"the RTL's tokens {rtl['tokens']} are not the golden model's {run['tokens']}")
    if len(rtl["rounds"]) != len(draft.rounds):
        problems.append(f"the RTL ran {len(rtl['rounds'])} rounds, the golden model {len(draft.rounds)}")
    for i, (res, (start, feed, loop, gold, ids)) in enumerate(zip(rtl["rounds"], draft.rounds)):
        where = f"RTL round {i} (positions from {start})"
        if (res["start"], res["feed"]) != (start, feed):
            problems.append(f"{where}: requested {res['start'], res['feed']}, the golden model {start, feed}")
            continue
        seen = tile_observed(res)
        problems += [p.at(where) for p in compare(seen, golden_reference(gold))]
        problems += [p.at(where) for p in compare(seen, promise(*loop.manifest()),
                                                  skip=("write values", "read-back", "faults"))]
    return problems


def speculate_on_chip(cfg: TileConfig, model: dict, prompt, n: int, k: int, tm: TimingModel | None = None,
                      sim: str | None = None, progress=None) -> Report:
    """``n`` tokens after ``prompt`` by speculative decoding, the draft ``model`` (arguments of
    ``synthetic_float``) on chip (the golden model, and with ``sim`` the RTL tile as well), the
    target its float model; the effective tokens/s under the
    timing model ``tm`` (``host.speculative.TimingModel``: each round the draft's cycles at its
    clock, then one verification pass).  Rows: one per round."""
    tm = tm or TimingModel()
    fm = synthetic_float(**model)
    draft = OnChipDraft(cfg, quantise(fm), k)
    prompt = [int(t) for t in prompt]
    run = drive(rounds_gen(fm, prompt, n, k), draft.propose)
    cycles = [r.cycles for _, _, _, r, _ in draft.rounds]
    rounds = [{**row, "start": start, "draft_cycles": c}
              for row, (start, *_), c in zip(run["rounds"], draft.rounds, cycles)]
    problems = list(draft.problems)
    engine = "golden model"
    if sim is not None:
        rtl = run_rtl(cfg, model, prompt, n, k, sim, progress)
        problems += rtl_problems(draft, run, rtl)
        for row, res in zip(rounds, rtl["rounds"]):
            row.update(rtl_cycles=res["cycles"], loaded_bytes=res["loaded_bytes"])
        engine = f"RTL ({sim})"
    tokens = run["tokens"]
    plain = float_greedy(fm, prompt, n)
    if tokens != plain:
        problems.append(f"the tokens {tokens} are not the target's plain decoding {plain}")
    proposed = k * len(rounds)
    accepted = sum(r["accepted"] for r in rounds)
    compared = sum(min(r["accepted"] + 1, k) for r in rounds)
    draft_us = sum(cycles) / tm.clock_mhz
    pass_us = tm.pass_us(target_bytes(fm))
    total_us = draft_us + len(rounds) * (pass_us + tm.transfer_us)
    timing = {"target_pass_us": round(pass_us, 4), "draft_us": round(draft_us, 4), "total_us": round(total_us, 4),
              "tokens_per_s": round(n / total_us * 1e6), "plain_tokens_per_s": round(1e6 / pass_us),
              "speedup": round(n * pass_us / total_us, 3)}
    data = {"passed": not problems, "draft": f"on chip ({engine})", "k": k, "tokens": tokens, "plain": plain,
            "rounds": len(rounds), "acceptance": round(accepted / proposed, 4),
            "acceptance_compared": round(accepted / compared, 4),
            "tokens_per_verification": round(sum(r["committed"] for r in rounds) / len(rounds), 3),
            "expected_tokens_compared": round(expected_tokens(accepted / compared, k), 3),
            "draft_cycles_per_round": round(sum(cycles) / len(cycles), 1),
            "draft_us_per_round": round(sum(cycles) / len(cycles) / tm.clock_mhz, 4),
            "programs_compiled": len(draft.loops), "target_weight_bytes": target_bytes(fm), "timing": timing,
            "problems": problems, "round_rows": rounds}
    return Report.of("speculate-on-chip", data, rows_key="round_rows")
