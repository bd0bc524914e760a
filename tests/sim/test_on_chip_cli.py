"""lpu decode --on-chip on the golden model: its report, its lines, and the options it refuses
(each a one-line error naming the problem, exit status 2)."""

import json

import pytest

from firmware_gen.golden.token_loop import generate, synthetic
from sim.cli.main import main
from sim.flows.token_loop import ON_CHIP_MODEL


def test_on_chip_golden_json(capsys):
    assert main(["decode", "--on-chip", "--no-run", "--tokens", "8", "--prompt", "3,1", "--json"]) == 0
    out = capsys.readouterr()
    rep = json.loads(out.out)
    assert rep["passed"] and rep["ids"] == generate(synthetic(**ON_CHIP_MODEL), [3, 1], 8)
    assert rep["heads"] == 1 and rep["runs"] == 1 and len(rep["positions"]) == 8
    assert rep["top1_agreement_with_float"] >= 0.9
    assert "per token:" in out.err and "PASS" in out.err


def test_on_chip_without_attention_runs_per_call(capsys):
    assert main(["decode", "--on-chip", "--no-run", "--heads", "0", "--tokens", "8", "--per-call", "4", "--prompt",
                 "3,1", "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["passed"] and rep["ids"] == generate(synthetic(**dict(ON_CHIP_MODEL, heads=0)), [1], 8)
    assert rep["runs"] == 2 and rep["per_call"] == 4


def test_on_chip_lines(capsys):
    assert main(["decode", "--on-chip", "--no-run", "--tokens", "4", "--layers", "1", "--vocab", "32"]) == 0
    text = capsys.readouterr().out
    assert "1 attention head(s)" in text and "weight-read bound" in text and "iq_depth" in text


@pytest.mark.parametrize("argv, says", [
    (["--experts", "4"], "--experts does not apply to --on-chip"),
    (["--tokens", "6", "--per-call", "4"], "--tokens 6 must be a multiple of --per-call 4"),
    (["--tokens", "8", "--per-call", "4"], "a decoder with attention generates its tokens in one run"),
    (["--heads", "1", "--H", "64"], "H (64) must be heads x 32"),
    (["--tokens", "64"], "need 66 positions; the attention step's cache holds 64"),
    (["--heads", "0", "--H", "24"], "must be multiples of the 16 lanes"),
    (["--set", "iq_depth=1024", "--tokens", "16"], "iq_depth = 1024"),
    (["--set", "sxm_setb=0"], "the token loop needs sxm_setb = 1"),
    (["--prompt", "70"], "outside the vocabulary"),
])
def test_on_chip_refusals(capsys, argv, says):
    assert main(["decode", "--on-chip", "--no-run", *argv]) == 2
    err = capsys.readouterr().err
    assert says in err and "Traceback" not in err


def test_per_call_and_no_heads_need_on_chip(capsys):
    assert main(["decode", "--no-run", "--per-call", "4"]) == 2
    assert "give --on-chip" in capsys.readouterr().err
    assert main(["decode", "--no-run", "--heads", "0"]) == 2
    assert "--heads 0 (no attention) is a model of --on-chip" in capsys.readouterr().err


def test_out_writes_a_program_lpu_show_draws(tmp_path, capsys):
    d = tmp_path / "loop"
    assert main(["decode", "--on-chip", "--no-run", "--tokens", "2", "--out", str(d)]) == 0
    loop = json.loads((d / "token_loop.json").read_text())
    assert loop["ids"] == generate(synthetic(**ON_CHIP_MODEL), [1, 2, 3], 2) and loop["prompt"] == [1, 2, 3]
    capsys.readouterr()
    assert main(["show", str(d), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["bytes"] > 0
    assert main(["decode", "--on-chip", "--no-run", "--tokens", "4", "--out", str(d)]) == 2      # another program
    assert "--force" in capsys.readouterr().err
    assert main(["decode", "--no-run", "--out", str(d)]) == 2
    assert "--out is an option of --on-chip" in capsys.readouterr().err
