"""All-zero weights or input: every product and sum stays at its initial 0 for the whole run.
Both simulators must run such an FFN as any other (bit-exact, at the predicted cycles): on
Icarus an adder tree whose inputs never change was once left at X
(``sim.harness.icarus.comb_at_time_zero``)."""

import json

import numpy as np
import pytest

from sim.cli import main as cli

from tests.helpers import SIMS

H, I = 8, 16           # the tiny tile's default FFN


def weights(tmp_path, zero: str):
    rng = np.random.default_rng(3)
    w = {"W1": rng.standard_normal((I, H)), "W3": rng.standard_normal((I, H)),
         "W2": rng.standard_normal((H, I)), "x": rng.standard_normal(H)}
    for name in ("W1", "W2", "W3") if zero == "weights" else ("x",):
        w[name] = np.zeros_like(w[name])
    path = tmp_path / f"{zero}.npz"
    np.savez(path, **{k: v.astype(np.float32) for k, v in w.items()})
    return path


@pytest.mark.sim
@pytest.mark.parametrize("simulator", SIMS)
@pytest.mark.parametrize("zero", ["weights", "x"])
def test_an_all_zero_ffn_runs_on_every_simulator(tmp_path, capsys, simulator, zero):
    code = cli.main(["sim", "--config", "tiny", "--weights", str(weights(tmp_path, zero)),
                     "--sim", simulator, "-q", "--json"])
    out, err = capsys.readouterr()
    r = json.loads(out)
    assert code == 0 and r["passed"] and not r["problems"], (r, err)
    assert r["cycles"] == r["golden_model_cycles"]
