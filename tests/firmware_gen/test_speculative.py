"""Speculative decoding's loop (firmware_gen/host/speculative.py): the output is exactly the
target's plain decoding whatever the draft proposes; the statistics count the rounds."""

import math

import numpy as np
import pytest

from firmware_gen.host.decoder import IntFfn, KvCache, calibrate, float_ffn, generate, step, synthetic
from firmware_gen.host.speculative import (TimingModel, choose, expected_tokens, greedy, layer_skip, speculate,
                                           statistics, timing, truncate, weight_bytes)

SYN = dict(vocab=64, H=8, I=16, layers=2, heads=2, seed=0)


@pytest.mark.parametrize("k", [1, 2, 4, 8])
@pytest.mark.parametrize("no_repeat", [0, 4])
def test_output_is_the_targets_plain_decoding(k, no_repeat):
    """int8 draft, a one-layer layer-skip draft and a draft of other random weights (which
    the target rejects often): every run gives the target's plain decoding token for token;
    with no_repeat 0 that is decoder.generate's greedy output."""
    target = synthetic(**SYN)
    plain = greedy(target, [1, 2, 3], 12, float_ffn(target), no_repeat)
    if not no_repeat:
        assert plain == generate(target, [1, 2, 3], 12, float_ffn(target))
    draft = calibrate(synthetic(**SYN))
    other = calibrate(synthetic(**dict(SYN, seed=9)))
    for d in (draft, layer_skip(draft, 1), other):
        run = speculate(d, IntFfn(d), target, [1, 2, 3], 12, k, no_repeat=no_repeat)
        assert run["tokens"] == plain
        s = statistics(run)
        assert s["proposed"] == k * s["rounds"] and s["accepted"] <= s["compared"] <= s["proposed"]
        assert s["committed"] == s["accepted"] + s["rounds"] >= 12
        # per round the draft feeds the last committed token (and, after a round that accepted
        # all k, the last proposal too) and each proposal but the last
        assert run["draft_steps"] == k * s["rounds"] + sum(r["accepted"] == k for r in run["rounds"][:-1])



def test_a_rejecting_draft_still_gives_the_target():
    target = synthetic(**SYN)
    other = calibrate(synthetic(**dict(SYN, seed=9)))
    run = speculate(other, IntFfn(other), target, [1, 2, 3], 16, 4)
    s = statistics(run)
    assert s["acceptance"] < 0.5 and run["tokens"] == greedy(target, [1, 2, 3], 16, float_ffn(target))


def test_choose_and_truncate():
    logits = np.array([0.0, 3.0, 2.0, 1.0])
    assert choose(logits, [3]) == 1 and choose(logits, [1, 3], 2) == 2 and choose(logits, [1, 3], 1) == 1
    with pytest.raises(ValueError, match="bans the whole vocabulary"):
        choose(logits, [0, 1, 2, 3], 4)
    m = synthetic(**SYN)
    cache = KvCache(2)
    for t in range(5):
        step(m, t, cache, float_ffn(m))
    truncate(cache, 3)
    assert [len(x) for x in cache.k + cache.v] == [3] * 4


def test_expected_tokens_and_timing():
    assert expected_tokens(1.0, 4) == 5 and expected_tokens(0.0, 4) == 1
    assert math.isclose(expected_tokens(0.5, 2), 1.75)
    run = {"tokens": [0] * 9, "rounds": [{"proposed": 2, "accepted": 2, "compared": 2, "committed": 3}] * 3,
           "draft_steps": 9, "k": 2}
    t = timing(run, 900, 8_000_000, TimingModel(8000.0, 2.0, 900.0))
    assert math.isclose(t["target_pass_us"], 1.0) and math.isclose(t["draft_us_per_token"], 1.0)
    assert math.isclose(t["total_us"], 3 * 3.0 + 9 * 1.0) and math.isclose(t["plain_tokens_per_s"], 1e6)
    for bad in (0, -1.0, math.inf, math.nan):
        with pytest.raises(ValueError, match="positive finite"):
            TimingModel(hbm_gbs=bad)
    m = synthetic(**SYN)
    assert weight_bytes(m) == 4 * (64 * 8 + 8 + 2 * (4 * 64 + 2 * 8 + 3 * 128))
