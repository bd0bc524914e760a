"""The UART host bridge: a program loaded, run and read back entirely over the serial
line, checked against the golden model and the compiler's prediction."""

import numpy as np
import pytest

from lpu_arch import TileConfig

from firmware_gen.golden import archmodel
from firmware_gen.compiler.schedule import Scheduler
from sim.harness.runner import TileSim, job
from sim.harness.scoreboard import check_run

from tests.helpers import ONE_SIM

pytestmark = pytest.mark.sim


@pytest.mark.parametrize("simulator", ONE_SIM)
def test_program_over_uart(simulator):
    cfg = TileConfig.tiny()
    rng = np.random.default_rng(4)
    s = Scheduler(cfg)
    s.load("MEM_W1", 0, rng.integers(0, 256, (4, cfg.lanes)))
    s.copy("MEM_W1", 0, "MEM_E1", 8, count=4)
    s.copy("MEM_E1", 8, "MEM_W0", 2, count=2)
    prog = s.program()
    gold = archmodel.run(prog)
    res = TileSim(cfg, simulator, top="uart").run([job(prog, read_back={"MEM_W0": [2, 3]})])[0]
    problems = check_run(res, gold, s.predicted_writes(), s.predicted_cycles())
    assert not problems, "\n".join(problems)
    assert res["read_back"]["MEM_W0"] == [list(gold.memory["MEM_W0"][r]) for r in (2, 3)]
