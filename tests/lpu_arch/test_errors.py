"""``lpu_arch.errors.error_line``: the one wording of a command's error line (``lpu``,
``python -m sim.bench``, ``python -m sim.bench.history``, ``python -m hdl.flows.size``)."""

from lpu_arch.config import ConfigError
from lpu_arch.errors import LpuError, error_line


def test_an_error_is_its_first_line_with_single_spaces():
    e = LpuError("the FFN  does not fit\n  a second line")
    assert error_line(e, "lpu compile") == "lpu compile: error: the FFN does not fit"
    assert error_line(ConfigError("lanes must be a multiple of 4")) == "error: lanes must be a multiple of 4"


def test_whole_keeps_a_tools_log():
    e = LpuError("Yosys failed to write Verilog:\nERROR: line 3")
    assert error_line(e, whole=True) == "error: Yosys failed to write Verilog:\nERROR: line 3"


def test_an_os_error_names_the_file():
    e = FileNotFoundError(2, "No such file or directory", "x/program.json")
    assert error_line(e, "lpu sim") == "lpu sim: error: No such file or directory: x/program.json"
    assert error_line(PermissionError(13, "Permission denied"), "lpu sim") == "lpu sim: error: Permission denied"


def test_text_is_taken_as_it_is():
    assert error_line("argument --H: got '1,  x'", "lpu compile") == "lpu compile: error: argument --H: got '1,  x'"
