"""SXM lane movement (shift, rotate, permute, distribute, transpose) against numpy, on
the golden model and on the RTL of both simulators.

Every case streams x from MEM_W1 and a map from MEM_W0 into SXM_W, one instruction per
cycle, and writes each result into MEM_E0, where the trace observes it; the expected
vectors come from numpy (np.roll, fancy indexing, .T), not from the model.  The cases
and the program that runs them are in ``tests/helpers.py`` (``test_size.py`` runs them too)."""

import pytest

from lpu_arch import TileConfig

from firmware_gen.golden import archmodel
from lpu_arch.isa import IsaError
from firmware_gen.program import Program, ProgramError
from firmware_gen.scoreboard import Reference, compare, golden_observed

from tests.helpers import get_sim, sxm_cases, sxm_program


@pytest.mark.parametrize("preset", ["tiny", "default"])
def test_sxm_on_the_golden_model(preset):
    cfg = TileConfig.preset(preset)
    prog, expected = sxm_program(cfg, sxm_cases(cfg))
    problems = compare(golden_observed(archmodel.run(prog)), Reference("numpy", writes=expected))
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("text, words", [
    ("SHIFT W0, k=4, out=2, flags=OUT_E", "SHIFT by 4 lanes; it must be below the 4 lanes"),
    ("DIST W0, k=0, g=3, out=2, flags=OUT_E", "DIST group g = 3 must be a power of two"),
    ("DIST W0, k=3, g=2, out=2, flags=OUT_E", "DIST takes lanes 3..4; the vector has 4"),
    ("TRO W0, col=4, out=0, flags=OUT_E", "TRO column 4 is beyond the 4 columns"),
    ("PERM W0, map=7, out=0, flags=OUT_E", "map stream 7 does not exist"),
    ("SHIFT W0, k=1, flags=GATE", "unknown SHIFT flag 'GATE'"),
])
def test_bad_sxm_instructions(text, words):
    with pytest.raises((ProgramError, IsaError), match=words):
        Program.assemble(TileConfig.tiny(), f"[SXM_W]\n{text}")


@pytest.mark.sim
def test_sxm_on_rtl(simulator):
    from sim.harness.runner import job
    from sim.harness.scoreboard import check_run, tile_observed

    cfg = TileConfig.tiny()
    prog, expected = sxm_program(cfg, sxm_cases(cfg, seed=3))
    gold = archmodel.run(prog)
    res = get_sim(cfg, simulator).run([job(prog)])[0]
    problems = check_run(res, gold) + compare(tile_observed(res), Reference("numpy", writes=expected))
    assert not problems, "\n".join(problems)
