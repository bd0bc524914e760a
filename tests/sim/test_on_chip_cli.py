"""lpu decode --on-chip on the golden model: its report, its lines, and the options it refuses
(each a one-line error naming the problem, exit status 2)."""

import json

import pytest

from firmware_gen.golden.token_loop import generate, synthetic
from sim.cli.main import main
from sim.flows.token_loop import ON_CHIP_MODEL


def test_on_chip_golden_json(capsys):
    assert main(["decode", "--on-chip", "--no-run", "--tokens", "8", "--per-call", "4", "--prompt", "3,1",
                 "--json"]) == 0
    out = capsys.readouterr()
    rep = json.loads(out.out)
    assert rep["passed"] and rep["ids"] == generate(synthetic(**ON_CHIP_MODEL), [1], 8)
    assert rep["runs"] == 2 and rep["per_call"] == 4 and len(rep["positions"]) == 8
    assert "per token:" in out.err and "PASS" in out.err


def test_on_chip_lines(capsys):
    assert main(["decode", "--on-chip", "--no-run", "--tokens", "4", "--layers", "1", "--vocab", "32"]) == 0
    text = capsys.readouterr().out
    assert "no attention" in text and "weight-read bound" in text and "iq_depth" in text


@pytest.mark.parametrize("argv, says", [
    (["--experts", "4"], "--experts does not apply to --on-chip"),
    (["--heads", "2"], "--heads does not apply to --on-chip: the on-chip loop's model has no attention"),
    (["--tokens", "6", "--per-call", "4"], "--tokens 6 must be a multiple of --per-call 4"),
    (["--H", "24"], "must be multiples of the 16 lanes"),
    (["--set", "iq_depth=64", "--tokens", "16"], "iq_depth = 64"),
    (["--set", "sxm_setb=0"], "the token loop needs sxm_setb = 1"),
    (["--prompt", "70"], "outside the vocabulary"),
])
def test_on_chip_refusals(capsys, argv, says):
    assert main(["decode", "--on-chip", "--no-run", *argv]) == 2
    err = capsys.readouterr().err
    assert says in err and "Traceback" not in err


def test_per_call_needs_on_chip(capsys):
    assert main(["decode", "--no-run", "--per-call", "4"]) == 2
    assert "give --on-chip" in capsys.readouterr().err
