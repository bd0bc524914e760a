"""The scoreboard's one check (``firmware_gen.scoreboard.compare``) without a simulator: a
kept promise passes, and a broken one (a write a cycle late, an output byte flipped, a
busy counter off by one, a fault flag, a wall cycle count beyond the HAC's error) is
reported by the part that found it, against the reference it breaks."""

import dataclasses
import json
import pickle

import pytest

from lpu_arch import TileConfig, c2c
from lpu_arch.hostmap import Status

from firmware_gen.golden import archmodel
from firmware_gen.compiler.ffn import compile_ffn
from firmware_gen.compiler.ffn_example import example_ffn
from firmware_gen.compiler.ffn_manifest import output_matrix
from firmware_gen.golden.numerics import ffn_int
from firmware_gen.scoreboard import (PARTS, Observed, Problem, Reference, compare, ffn_reference, golden_observed,
                                     golden_reference, manifest_promise, promise, row_vectors)


@pytest.fixture(scope="module")
def ffn():
    """A small FFN compiled for the tiny tile and run on the golden model: ``(manifest,
    observation with y, y's integer reference, golden model run)``."""
    cfg = TileConfig.tiny()
    ex = example_ffn("swiglu", 6, 10, 2, seed=3)
    prog, man = compile_ffn(ex.spec, ex.x_int8, cfg)
    gold = archmodel.run(prog)
    y = output_matrix(man, gold.memory, cfg.lanes, ex.spec.H)
    return man, golden_observed(gold, outputs=row_vectors("y", y)), ffn_int(ex.spec, ex.x_int8), gold


def test_a_kept_promise_has_no_problem(ffn):
    man, seen, y, gold = ffn
    assert compare(seen, manifest_promise(man), ffn_reference(y)) == []
    assert compare(seen, golden_reference(gold)) == []


def test_each_broken_promise_is_named_by_its_part(ffn):
    """One write a cycle late, one output byte flipped, one busy counter off by one: each is
    reported, by its part and against the reference it breaks, in the order of PARTS."""
    man, seen, y, _ = ffn
    w = man.writes[0]
    late = [dataclasses.replace(w, cycle=w.cycle + 1), *man.writes[1:]]
    busy = {**man.busy, "VXM": man.busy["VXM"] + 1}
    flipped = y.copy()
    flipped[1, 2] ^= 1
    problems = compare(seen, promise(late, man.cycles, busy), ffn_reference(flipped))
    assert {(p.part, p.reference) for p in problems} == {("writes", "compiler"), ("busy", "compiler"),
                                                         ("outputs", "integer FFN")}
    assert [p.part for p in problems] == sorted((p.part for p in problems), key=PARTS.index)
    text = "\n".join(problems)
    assert "golden model trace vs compiler prediction: " in text
    assert f"first difference at event 0: expected cycle {w.cycle + 1} {w.slice}[{w.addr}]" in text
    assert f"busy cycles of VXM: predicted {man.busy['VXM'] + 1}, golden model {man.busy['VXM']}" in text
    assert "y vs integer FFN: 1 of 2 output vectors differ" in text and "  y[1]: golden model holds" in text
    cycles = compare(seen, promise(cycles=man.cycles - 1))
    assert [(p.part, str(p)) for p in cycles] == [
        ("cycles", f"cycle count: compiler predicted {man.cycles - 1}, golden model {man.cycles}")]


def test_skipping_write_values_keeps_the_places_and_cycles(ffn):
    """A promise of the writes' places only (a layer compiled for x = 0) skips "write values":
    other values pass, another cycle does not; a part that does not exist is an error."""
    man, seen, _, _ = ffn
    zeros = [dataclasses.replace(w, data=(0,) * len(w.data)) for w in man.writes]
    assert compare(seen, promise(zeros), skip=("write values",)) == []
    assert [p.part for p in compare(seen, promise(zeros))][:1] == ["writes"]
    late = [dataclasses.replace(w, cycle=w.cycle + 1) for w in zeros]
    assert compare(seen, promise(late), skip=("write values",))
    with pytest.raises(ValueError, match="no part of the scoreboard is named 'write value'"):
        compare(seen, promise(zeros), skip=("write value",))


def test_faults_come_first_and_nan_operand_as_predicted():
    """A hardware observation: the link's fault flags first (the cause), then a lost trace
    and a parameter fault; NAN_OPERAND against the golden model's prediction."""
    status = Status.DONE | Status.LINK_UNDERFLOW | Status.TRACE_OVERFLOW | Status.PARAM_FAULT
    problems = compare(Observed(status=status, illegal=0, addr_fault=0, writes=[], cycles=5),
                       promise([(1, "MEM_W0", 0, (1, 2))], 5))
    assert [p.part for p in problems] == ["faults"] * 3 + ["writes"] * 2        # the count, the write missing
    assert problems[0] == "C2C fault flags in STATUS: LINK_UNDERFLOW"
    assert problems[1].startswith("the hardware trace overflowed") and problems[2].startswith("PARAM_FAULT")
    nan = Observed(status=Status.DONE | Status.NAN_OPERAND)
    assert compare(nan, Reference("golden model", nan_operand=(7, "MXM_W"))) == []
    assert compare(nan, Reference("golden model", nan_operand=False)) == [
        "NAN_OPERAND set in STATUS, but the golden model predicts no MM with a NaN operand"]
    assert [p.part for p in compare(Observed(status=Status.DONE), Reference("golden model", nan_operand=(7, "MXM_W")))] \
        == ["nan operand"]


def test_outputs_not_observed_and_the_wall_cycles():
    """Outputs the run did not let be observed are one problem in the observation's words;
    a wall cycle count or a deskew offset beyond HAC_ERROR_MAX is a ``wall`` problem."""
    seen = Observed(outputs={"y[0, 0:4]": None}, where={"y[0, 0:4]": "MEM_E0[3]"}, unseen="y missing: {n} at {where}")
    assert compare(seen, Reference("integer FFN", outputs={"y[0, 0:4]": [1, 2, 3, 4]})) == ["y missing: 1 at MEM_E0[3]"]
    wall = Reference("c2c.wall_cycles", wall=1000, deskew=[(90, 10), (90, 20)])
    assert compare(Observed(wall=1000 + c2c.HAC_ERROR_MAX, deskew=[100, 110]), wall) == []
    problems = compare(Observed(wall=1001 + c2c.HAC_ERROR_MAX, deskew=[100, 120]), wall)
    assert [(p.part, p.reference) for p in problems] == [("wall", "c2c.wall_cycles")] * 2
    assert problems[0].startswith("tile 1: deskew offset 120 at done, predicted START_HAC 90 + 20 cycles")


def test_a_problem_is_its_text():
    """``str()`` is the text the reports print; JSON writes it as a string; it pickles with
    its part; ``at`` locates it without losing the part."""
    p = Problem("busy", "busy cycles of VXM: predicted 3, hardware 4", "compiler")
    assert str(p) == p == "busy cycles of VXM: predicted 3, hardware 4"
    assert json.loads(json.dumps({"problems": [p]})) == {"problems": [str(p)]}
    q = pickle.loads(pickle.dumps(p.at("tile 1")))
    assert (q, q.part, q.reference) == ("tile 1: busy cycles of VXM: predicted 3, hardware 4", "busy", "compiler")


def test_token_ids_are_outputs_of_the_one_check():
    """A token loop's ids go through the scoreboard's outputs part: a wrong id and an unread one
    are each reported, under that part, by the reference's name."""
    from firmware_gen.scoreboard import Observed, compare, ids_reference, token_ids
    ref = ids_reference([5, 9, 2])
    assert compare(Observed(outputs=token_ids([5, 9, 2])), ref) == []
    bad = compare(Observed(outputs=token_ids([5, 7, 2]), outputs_as="ids"), ref)
    assert bad and all(p.part == "outputs" for p in bad)
    assert "the ids are not the integer reference's: 1 of 3" in str(bad[0]) and "id[1]" in str(bad[1])
    unseen = compare(Observed(outputs=token_ids([5, None, 2])), ref)
    assert len(unseen) == 1 and "1 outputs not observed" in str(unseen[0])
