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


# pytest-timeout's limit per test (seconds): pyproject.toml's default (20 minutes) for make
# test, whose slowest tests (a Verilator build of the default tile and its runs) take a few;
# more for the long flows: an 8-tile system on both simulators takes several minutes, the
# tiny tile's place-and-route 17 to 44 (docs/fpga.md).  A test's own timeout mark wins.
MARK_TIMEOUTS = {"synth": 80 * 60, "long": 40 * 60}


def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.get_closest_marker("timeout") is None:
            limits = [t for mark, t in MARK_TIMEOUTS.items() if item.get_closest_marker(mark)]
            if limits:
                item.add_marker(pytest.mark.timeout(max(limits)))
