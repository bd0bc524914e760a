"""Hand-written programs from the command line: ``lpu asm`` assembles and checks them,
``lpu sim`` refuses a program the static checker rejects (``--unchecked`` runs it anyway)
and runs a program directory without a manifest against the golden model alone."""

import json

import pytest

from sim.cli import main as cli

from tests.helpers import LOST_VALUE_ASM, SIMS

LOST = LOST_VALUE_ASM      # the robustness issue's example
# The same copy without the second READ: clean.
CLEAN = """
[MEM_W1]
    READ E0, 0
[MEM_E0]
    NOP 4
    WRITE E0, 5   # READ on 0 drives on 1 at MEM_W1 (position 2), MEM_E0 (5) sees it on 4
"""


# The rows LOST and CLEAN READ: MEM_W1 and MEM_W0 row 0 (tiny: 4 lanes), as program.json's "memory".
MEMORY = {"MEM_W1": [[1, 2, 3, 4]], "MEM_W0": [[5, 6, 7, 8]]}


def asm(tmp_path, text, capsys, memory=MEMORY, out="p"):
    src = tmp_path / "prog.s"
    src.write_text(text)
    extra = []
    if memory is not None:
        (tmp_path / "mem.json").write_text(json.dumps(memory))
        extra = ["--memory", str(tmp_path / "mem.json")]
    code = cli.main(["asm", str(src), "--config", "tiny", "--out", str(tmp_path / out), "--json", *extra])
    return code, json.loads(capsys.readouterr().out), tmp_path / out


def test_asm_reports_the_lost_value(tmp_path, capsys):
    code, r, d = asm(tmp_path, LOST, capsys)
    assert code == 0 and (d / "program.json").exists()
    (p,) = r["problems"]
    # READ issued on 0 drives on 1 at MEM_W1 (position 2); MEM_W0 (position 3) drives the
    # same stream on the same diagonal on cycle 2: the first value is gone unread.
    assert "replaced-before-read" in p and "MEM_W1" in p and "MEM_W0" in p and "E0" in p, p
    assert "position 3" in p and "cycle 2" in p, p


def test_asm_reports_a_read_of_a_row_nothing_defined(tmp_path, capsys):
    # Without an image MEM_W1 holds nothing defined: its READ of row 0 on cycle 0 reads what
    # the SRAM powered up with.  MEM_E0 READs row 5 on cycle 3, before its WRITE of row 5
    # (cycle 4) lands: undefined too; its READ of row 5 on cycle 7 follows the WRITE: defined.
    text = """
[MEM_W1]
    READ E0, 0
[MEM_E0]
    NOP 3
    READ W1, 5
    WRITE E0, 5
    NOP 2
    READ W1, 5
"""
    code, r, d = asm(tmp_path, text, capsys, memory=None)
    assert code == 0
    undefined = [p for p in r["problems"] if "[undefined-read]" in p]
    assert len(undefined) == 2, r["problems"]
    assert "MEM_W1 'READ E0, 0' (issued on cycle 0) reads MEM_W1 row 0" in undefined[0], undefined
    assert "MEM_E0 'READ W1, 5' (issued on cycle 3) reads MEM_E0 row 5" in undefined[1], undefined
    assert "the first WRITE of it lands on cycle 4, not before the READ" in undefined[1], undefined
    # With MEM_W1's row 0 in an image only MEM_E0's early READ is left.
    code, r, d = asm(tmp_path, text, capsys, memory={"MEM_W1": [[1, 2, 3, 4]]}, out="p2")
    (p,) = [p for p in r["problems"] if "[undefined-read]" in p]
    assert "MEM_E0 row 5" in p and "cycle 3" in p, p


def test_asm_memory_errors_are_one_line(tmp_path, capsys):
    src = tmp_path / "prog.s"
    src.write_text(CLEAN)
    bad = tmp_path / "bad.json"
    for text, want in (('{"MEM_X": [[1, 2, 3, 4]]}', "not a MEM slice"), ('{"MEM_W1": [[1, 2, 3]]}', "row 0"),
                       ("[", "not JSON")):
        bad.write_text(text)
        assert cli.main(["asm", str(src), "--config", "tiny", "--memory", str(bad)]) == 2
        err = capsys.readouterr().err
        assert want in err and "Traceback" not in err and len(err.strip().splitlines()) == 1, err


def test_sim_refuses_an_unchecked_program(tmp_path, capsys):
    _, _, d = asm(tmp_path, LOST, capsys)
    code = cli.main(["sim", str(d), "--sim", "icarus"])
    err = capsys.readouterr().err
    assert code == 2 and "static check" in err and "MEM_W0" in err and "--unchecked" in err, err
    assert len(err.strip().splitlines()) == 1, err


def test_asm_errors_are_one_line(tmp_path, capsys):
    src = tmp_path / "bad.s"
    src.write_text("[MEM_W1]\n    READ E9, 0\n")
    assert cli.main(["asm", str(src), "--config", "tiny"]) == 2
    err = capsys.readouterr().err
    assert "stream" in err and "Traceback" not in err, err


@pytest.mark.sim
@pytest.mark.skipif("icarus" not in SIMS, reason="the tiny tile builds in seconds on Icarus")
@pytest.mark.parametrize("text, unchecked", [(CLEAN, False), (LOST, True)])
def test_sim_runs_a_program_against_the_golden_model(tmp_path, capsys, text, unchecked):
    _, _, d = asm(tmp_path, text, capsys)
    code = cli.main(["sim", str(d), "--sim", "icarus", "-q", "--json"] + (["--unchecked"] if unchecked else []))
    out, err = capsys.readouterr()
    r = json.loads(out)
    assert code == 0 and r["passed"] and not r["problems"], (r, err)
    assert r["cycles"] == r["golden_model_cycles"] and r["writes"] == 1
    assert ("warning: [replaced-before-read]" in err) == unchecked, err
