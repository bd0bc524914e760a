import pytest

# The shared helpers live in tests/helpers.py; test modules import them from there.
from tests.helpers import SIMS


@pytest.fixture(params=SIMS)
def simulator(request):
    return request.param


def pytest_configure(config):
    config.addinivalue_line("markers", "sim: runs an HDL simulator")
    config.addinivalue_line("markers", "synth: runs the ECP5 FPGA flow")
    config.addinivalue_line("markers", "long: an RTL run of several minutes whose mechanism a smaller "
                                       "test in make test also covers (make test-long)")
