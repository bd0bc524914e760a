import os

import pytest

from lpu_arch import TileConfig

SIMS = [s for s in os.environ.get("LPU_SIMS", "verilator,icarus").split(",") if s]

_built = {}


def get_sim(cfg: TileConfig, sim: str):
    """One build per (configuration, simulator) per test process."""
    from sim.runner import TileSim
    key = (cfg, sim)
    if key not in _built:
        _built[key] = TileSim(cfg, sim)
    return _built[key]


@pytest.fixture(params=SIMS)
def simulator(request):
    return request.param


def pytest_configure(config):
    config.addinivalue_line("markers", "sim: runs an HDL simulator")
    config.addinivalue_line("markers", "synth: runs the ECP5 FPGA flow")
