"""lpu speculate --model on-chip: the token loop on the tile as the draft (golden model; the RTL
in make test-long), its float model as the target (``sim/flows/speculate_on_chip.py``)."""

import json

import pytest

from firmware_gen.golden.token_loop import synthetic_float

from sim.cli.main import main
from sim.flows.speculate_on_chip import float_greedy, speculate_on_chip
from sim.flows.token_loop import ON_CHIP_MODEL, on_chip_config

from tests.helpers import SIMS


@pytest.mark.parametrize("k", [pytest.param(1, marks=pytest.mark.long), 3])
def test_the_output_is_the_targets_plain_decoding(k):
    rep = speculate_on_chip(on_chip_config(), ON_CHIP_MODEL, [1, 2, 3], 10, k)
    f = rep.figures
    assert rep.passed, rep.problems                 # every round's ids = the integer model's, writes as promised
    assert f["tokens"] == float_greedy(synthetic_float(**ON_CHIP_MODEL), [1, 2, 3], 10) == f["plain"]
    assert sum(r["committed"] for r in rep.rows) >= 10 and len(rep.rows) == f["rounds"]
    assert all(0 <= r["accepted"] <= k and len(r["proposed"]) == k for r in rep.rows)
    assert f["acceptance"] == round(sum(r["accepted"] for r in rep.rows) / (k * f["rounds"]), 4)


def test_cli_on_chip(capsys):
    assert main(["speculate", "--no-run", "--model", "on-chip", "--k", "2", "--tokens", "6", "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["passed"] and rep["tokens"] == rep["plain"] and rep["k"] == 2


@pytest.mark.parametrize("argv, says", [
    (["--no-run", "--skip", "1"], "leave out --skip and --no-repeat"),
    (["--no-run", "--prompt", "64"], "outside the vocabulary"),
])
def test_cli_on_chip_refusals(capsys, argv, says):
    assert main(["speculate", "--model", "on-chip", *argv]) == 2
    err = capsys.readouterr().err
    assert says in err and "Traceback" not in err


@pytest.mark.sim
@pytest.mark.long
@pytest.mark.parametrize("simulator", SIMS)
def test_on_the_rtl(simulator):
    """Every round on the RTL tile (the target and the compiler in the testbench between rounds):
    the same requests, writes, cycles and ids as the golden model's run of the round, each round's
    cycles the compiler's, the tokens the target's plain decoding."""
    rep = speculate_on_chip(on_chip_config(), ON_CHIP_MODEL, [1, 2, 3], 8, 3, sim=simulator)
    assert rep.passed, rep.problems[:10]
    assert rep.figures["tokens"] == float_greedy(synthetic_float(**ON_CHIP_MODEL), [1, 2, 3], 8)
    assert all(r["rtl_cycles"] == r["draft_cycles"] for r in rep.rows)
    assert rep.rows[0]["loaded_bytes"] > max(r["loaded_bytes"] for r in rep.rows[1:]) > 0
