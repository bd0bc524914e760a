"""SXM lane movement (shift, rotate, permute, distribute, transpose) and, on a tile built
with ``sxm_max``, the lane-wise maximum, against numpy, on the golden model and on the RTL
of both simulators.

Every case streams x from MEM_W1 and a map from MEM_W0 into SXM_W, one instruction per
cycle, and writes each result into MEM_E0, where the trace observes it; the expected
vectors come from numpy (np.roll, fancy indexing, .T), not from the model.  The cases
and the program that runs them are in ``tests/helpers.py`` (``test_size.py`` runs them too)."""

import numpy as np
import pytest

from lpu_arch import TileConfig

from firmware_gen.golden import archmodel
from lpu_arch.isa import IsaError
from firmware_gen.program import Program, ProgramError
from firmware_gen.scoreboard import Reference, compare, golden_observed

from tests.helpers import get_sim, sxm_cases, sxm_program

# The tiny tile with the SXM's optional opcodes (MAX, ARGMAX, SETB): one build for the RTL tests below.
TINY_SXM = TileConfig.tiny().with_overrides(["sxm_max=1", "sxm_argmax=1", "sxm_setb=1"])


@pytest.mark.parametrize("preset, sets", [("tiny", []), ("default", []), ("tiny", ["sxm_max=1"]),
                                          ("default", ["sxm_max=1"])])
def test_sxm_on_the_golden_model(preset, sets):
    cfg = TileConfig.load(preset, sets)
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


# The maximum of a vector in every lane of the tiny tile (4 lanes) by two MAX rotations, one at
# each SXM: MEM_W1's READ (cycle 0) drives W0, at SXM_W (one position west) on cycle 2; SXM_W's
# MAX k=2 drives E1 on cycle 3, at SXM_E (6 positions east) on cycle 9; SXM_E's MAX k=1 drives
# W2 on cycle 10, which MEM_E1 (one position west) writes on cycle 11.
MAX_REDUCTION = """
[MEM_W1]
    READ W0, 0
[SXM_W]
    NOP 2
    MAX W0, k=2, with=0, out=1, flags=OUT_E
[SXM_E]
    NOP 9
    MAX E1, k=1, with=1, out=2, flags=OUT_W
[MEM_E1]
    NOP 11
    WRITE W2, 5
"""


def max_reduction(cfg):
    """The program above with x in MEM_W1's row 0, and its write by numpy: x's maximum in every lane."""
    assert cfg.lanes == 4 and cfg.position("MEM_W1") - cfg.position("SXM_W") == 1
    assert cfg.position("SXM_E") - cfg.position("SXM_W") == 6 and cfg.position("SXM_E") - cfg.position("MEM_E1") == 1
    x = np.array([-7, 100, -128, 99], np.int8)
    prog = Program.assemble(cfg, MAX_REDUCTION)
    prog.set_memory("MEM_W1", x.view(np.uint8)[None])
    return prog, [(11, "MEM_E1", 5, (100,) * 4)]


def test_max_needs_sxm_max_on_the_golden_model():
    with pytest.raises(ProgramError, match=r"SXM_W\[1\] 'MAX W0, k=2.*MAX needs sxm_max = 1"):
        archmodel.run(Program(TileConfig.tiny(), Program.assemble(TileConfig.tiny().with_overrides(
            ["sxm_max=1"]), MAX_REDUCTION).queues))


def test_max_reduction_on_the_golden_model():
    prog, expected = max_reduction(TileConfig.tiny().with_overrides(["sxm_max=1"]))
    problems = compare(golden_observed(archmodel.run(prog)), Reference("numpy", writes=expected))
    assert not problems, "\n".join(problems)


@pytest.mark.sim
@pytest.mark.long
def test_sxm_max_on_rtl(simulator):
    """The SXM cases with MAX and the rotation reduction on the tiny tile built with
    ``sxm_max``: bit- and cycle-exact against the golden model and numpy.  In make test-long:
    make test runs MAX on both simulators in the attention steps (tests/sim/test_attention_sim.py)
    and the unit in Amaranth's simulator (tests/hdl/test_units.py)."""
    from sim.harness.runner import job
    from sim.harness.scoreboard import check_run, tile_observed

    cfg = TINY_SXM
    progs = [sxm_program(cfg, sxm_cases(cfg, seed=5)), max_reduction(cfg)]
    results = get_sim(cfg, simulator).run([job(p) for p, _ in progs])
    for (prog, expected), res in zip(progs, results):
        problems = check_run(res, archmodel.run(prog)) + compare(tile_observed(res), Reference("numpy", writes=expected))
        assert not problems, "\n".join(problems)


@pytest.mark.sim
@pytest.mark.long
def test_setb_on_rtl(simulator):
    """SETB on the tiny tile built with the SXM's optional opcodes (``TINY_SXM``): a READ on SETB's cycle through its
    register skips (the register as the host left it, off), one a cycle later reads at the new
    offset; the register reads back on at that offset.  Bit- and cycle-exact against the golden
    model (``tests/firmware_gen/test_token_loop.py``'s program).  make test runs SETB and ARGMAX
    on both simulators in the token loop (tests/sim/test_token_loop_sim.py)."""
    from lpu_arch.hostmap import base_word
    from sim.harness.runner import job
    from sim.harness.scoreboard import check_run
    from tests.firmware_gen.test_token_loop import SETB_BASES, setb_program

    cfg = TINY_SXM
    prog = setb_program(cfg)
    gold = archmodel.run(prog, bases=SETB_BASES)
    words = SETB_BASES + [0] * (cfg.base_regs - len(SETB_BASES))
    (res,) = get_sim(cfg, simulator).run([job(prog, bases=words, read_bases=True)])
    assert not check_run(res, gold)
    assert res["base_words"][2] == base_word(9, True) == base_word(*gold.bases[2])
