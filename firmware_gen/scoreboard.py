"""The scoreboard: what a run did against what was promised of it, part by part.

A run is *observed* (:class:`Observed`: the testbench's trace and registers, read by
``sim/harness/scoreboard.py``, or the golden model's run, :func:`golden_observed`) and checked
against *references* (:class:`Reference`): the compiler's promise (:func:`promise`), the golden
model (:func:`golden_reference`), the outputs' integer reference (``numerics.ffn_int``,
``moe.moe_int``) and an armed tray run's predicted wall cycles.

:func:`compare` is the one check.  Each *part* (:data:`PARTS`) compares one kind of
observation with every reference that speaks of it, where both have its data; a caller that
wants a weaker check names the parts it skips (``skip=``).  A new check is a new part: a
field on :class:`Observed` and :class:`Reference`, a function, a line in ``_CHECKS``.  It
lives in ``firmware_gen`` because the compiler's own code uses it
(``MoeTray.round_problems``) and ``firmware_gen`` does not import ``sim``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from lpu_arch import c2c
from lpu_arch.hostmap import LINK_FAULTS, Status, link_fault_names

LIMIT = 5          # differences listed per part and reference

# Every part a caller can skip, in the order compare() reports them.  "write values": the
# writes compared on (cycle, slice, row) only.
PARTS = ("faults", "writes", "write values", "cycles", "busy", "nan operand", "read-back", "outputs", "wall")


class Problem(str):
    """One way a run differs from what was promised: its text (what ``str()`` gives and a
    report prints), ``part``, the part of the check that found it (:data:`PARTS`), and
    ``reference``, the source of the reference it differs from ("" for the observation
    alone, e.g. a fault flag).  A ``str``, so that every report keeps storing, joining,
    printing and writing (JSON) its problems as text."""

    part: str
    reference: str

    def __new__(cls, part: str, text: str, reference: str = ""):
        self = super().__new__(cls, text)
        self.part, self.reference = part, reference
        return self

    def __reduce__(self):
        return Problem, (self.part, str(self), self.reference)

    def __repr__(self) -> str:
        return f"Problem({self.part!r}, {str(self)!r})"

    def at(self, where: str) -> Problem:
        """The same problem, located: ``"{where}: {text}"`` (a tile, a run, a round)."""
        return Problem(self.part, f"{where}: {self}", self.reference)


@dataclass
class Observed:
    """What one run did, part by part; None: not observed.  ``source`` names the observer in
    problems: ``"hardware"``, or ``"golden model"`` where its run stands in for the tile."""
    source: str = "hardware"
    writes: list | None = None         # every MEM write, (cycle, slice, row, bytes), in trace order
    cycles: int | None = None          # the cycle count at done (SAC)
    busy: dict | None = None           # data-instruction issues per slice (Csr.BUSY_BASE)
    status: int | None = None          # the STATUS word (hostmap.Status)
    illegal: int | None = None         # the fault masks (per queue, per slice), where read
    addr_fault: int | None = None
    read_back: dict | None = None      # {(slice, row): lanes} read back over the host bus after the run
    outputs: dict | None = None        # vectors by name ("y[0, 0:8]"); a value None: not observable
    where: dict = field(default_factory=dict)      # where the run left each output ("MEM_W0[12]")
    outputs_as: str = "y"              # what problems call the outputs
    held: str = ""                     # what a problem says holds an output (default "{source} holds")
    unseen: str = "{n} outputs not observed, e.g. {where}"     # {n} places, {where} the first few
    wall: int | None = None            # armed tray run: HAC cycles from the host's HAC read to the last done
    deskew: list | None = None         # every tile's deskew offset at done (HAC)


@dataclass
class Reference:
    """What one reference says a run does, part by part; None: it says nothing of that part.
    ``source`` names it in problems (``"compiler"``, ``"golden model"``, ``"integer FFN"``,
    ``"moe_int"``, ``"c2c.wall_cycles"``); other fields as in :class:`Observed`."""
    source: str
    writes: list | None = None         # objects with as_tuple() (PredictedWrite, WriteEvent) or tuples
    cycles: int | None = None
    busy: dict | None = None           # a slice it does not name is not promised
    nan_operand: tuple | bool | None = None    # (cycle, MXM) of the first MM on a NaN code; False: none
    memory: dict | None = None         # the final MEM, {slice: (rows, lanes)}: what every row read back holds
    outputs: dict | None = None
    differ: str = ""                   # a problem's words when outputs differ ("{outputs_as} vs {source}")
    wall: int | None = None            # predicted wall cycles (c2c.wall_cycles), within c2c.HAC_ERROR_MAX
    deskew: list | None = None         # per tile (START_HAC, RUNTIME_DESKEW slack): their sum % hac_wrap
    hac_wrap: int = 1 << 32            # the HAC's modulus (2 ** HAC_BITS)


def compare(observed: Observed, *references: Reference, skip=()) -> list[Problem]:
    """Every way ``observed`` differs from ``references`` (empty: as promised), part by part
    in the order of :data:`PARTS`, each problem naming its part and reference.  ``skip``:
    parts not to check (a name not in :data:`PARTS` is an error, not a silent no-op)."""
    skip = frozenset(skip)
    unknown = sorted(skip - set(PARTS))
    if unknown:
        raise ValueError(f"no part of the scoreboard is named {', '.join(map(repr, unknown))}; "
                         f"the parts are {', '.join(PARTS)}")
    out = []
    for part, check in _CHECKS:
        if part not in skip:
            out += check(observed, references, skip)
    return out


# ---- the observation and the references from the golden model and the compiler ---------------
def golden_observed(result, **more) -> Observed:
    """The golden model's run (``archmodel.RunResult``) standing in for the tile: its
    writes, cycles and busy counters; ``more``: other fields (``outputs=...``)."""
    return Observed("golden model", writes=[e.as_tuple() for e in result.events], cycles=result.cycles,
                    busy=dict(result.busy), **more)


def golden_reference(result) -> Reference:
    """The golden model's run (``archmodel.RunResult``) as a reference: its writes, cycles,
    busy counters, NaN-operand prediction and final memory."""
    return Reference("golden model", writes=result.events, cycles=result.cycles, busy=result.busy,
                     nan_operand=result.nan_operand or False, memory=result.memory)


def promise(writes=None, cycles: int | None = None, busy: dict | None = None) -> Reference:
    """The compiler's (or a scheduler's) promise: every MEM write, the cycle count, the busy
    counters (any of them None: not promised)."""
    return Reference("compiler", writes=writes, cycles=cycles, busy=busy)


def manifest_promise(manifest) -> Reference:
    """A manifest's promise (``compile_ffn``'s, a tray tile's): its writes, cycles and busy
    counters."""
    return promise(manifest.writes, manifest.cycles, manifest.busy)


def row_vectors(name: str, a) -> dict:
    """Output vectors by name from an array: ``{name[b]: a[b]}`` for each row of ``a`` (2-D)."""
    return {f"{name}[{b}]": row for b, row in enumerate(np.atleast_2d(np.asarray(a)))}


def ffn_reference(y, differ: str = "") -> Reference:
    """The integer FFN's y (``numerics.ffn_int``: (batch, H)) as the reference of a run's
    outputs, by rows (:func:`row_vectors`)."""
    return Reference("integer FFN", outputs=row_vectors("y", y), differ=differ)


def token_ids(ids) -> dict:
    """Token ids as outputs by name (``"id[0]"``, one value each; an id None: not observed)."""
    return {f"id[{k}]": None if t is None else [int(t)] for k, t in enumerate(ids)}


def ids_reference(ids, source: str = "integer reference") -> Reference:
    """The ids a token loop's run must generate (:func:`token_ids`), by ``source``."""
    return Reference(source, outputs=token_ids(ids), differ=f"the ids are not the {source}'s")


def expert_outputs(routed: dict, shared=None) -> dict:
    """A MoE layer's outputs by name: ``routed`` ``{(token, expert): y}``
    (``MoeTray.outputs``), ``shared`` the shared expert's y per token (None without one)."""
    out = {f"token {b}, expert {int(e)}": y for (b, e), y in sorted(routed.items())}
    if shared is not None:
        out.update({f"token {b}, shared expert": y for b, y in enumerate(shared)})
    return out


def stage_outputs(stages, pairs=None) -> dict:
    """:func:`expert_outputs` of ``moe.MoeStages`` (or any object with its ``indices``,
    ``routed`` and ``shared``); ``pairs``: only these ``(token, expert)`` (one round's)."""
    routed = {(b, int(e)): stages.routed[b][j] for b, row in enumerate(np.asarray(stages.indices))
              for j, e in enumerate(row) if pairs is None or (b, int(e)) in pairs}
    shared = [s[0] for s in stages.shared] if len(stages.shared) and len(stages.shared[0]) else None
    return expert_outputs(routed, shared)


def moe_reference(stages, pairs=None) -> Reference:
    """``moe.moe_int``'s stages as the reference of a MoE run's outputs (:func:`stage_outputs`)."""
    return Reference("moe_int", outputs=stage_outputs(stages, pairs), differ="the experts' outputs are not moe_int's")


# ---- the parts ---------------------------------------------------------------------------------
# How a problem names the compiler in each part: the words the reports have always used.
_COMPILER_WORDS = {"writes": "compiler prediction", "cycles": "compiler predicted", "busy": "predicted"}


def _name(ref: Reference, part: str) -> str:
    return _COMPILER_WORDS[part] if ref.source == "compiler" else ref.source


def as_write(w) -> tuple:
    """A MEM write as ``(cycle, slice, row, bytes)`` of ints, from a tuple or an object with
    ``as_tuple()``."""
    c, s, a, d = w.as_tuple() if hasattr(w, "as_tuple") else w
    return int(c), s, int(a), tuple(int(v) for v in d)


def _fmt(w) -> str:
    return f"cycle {w[0]} {w[1]}[{w[2]}]" + (f" = {list(w[3])}" if len(w) > 3 else "")


def diff_events(expected: list[tuple], observed: list[tuple], what: str) -> list[str]:
    """Readable differences between two lists of MEM writes (empty when equal): the counts,
    the first difference in order, then the writes missing and the unexpected ones.  The
    one comparison of write lists: the ``writes`` part and ``diff_runs`` go through it."""
    if expected == observed:
        return []
    out = [f"{what}: {len(expected)} expected events, {len(observed)} observed"]
    for i, (e, o) in enumerate(zip(expected, observed)):
        if e != o:
            out.append(f"  first difference at event {i}: expected {_fmt(e)}, observed {_fmt(o)}")
            break
    exp_set, obs_set = set(expected), set(observed)
    out += [f"  missing: {_fmt(e)}" for e in sorted(exp_set - obs_set)[:LIMIT]]
    return out + [f"  unexpected: {_fmt(o)}" for o in sorted(obs_set - exp_set)[:LIMIT]]


def _faults(obs: Observed, refs, skip) -> list[Problem]:
    """The fault flags in STATUS: the link's first (the cause: the mismatches that follow
    come from it), a trace that lost events, an illegal opcode or address, a relocated
    parameter entry beyond the VXM's."""
    s = obs.status
    if s is None:
        return []
    out = []
    if s & LINK_FAULTS:
        out.append(f"C2C fault flags in STATUS: {', '.join(link_fault_names(s))}")
    if s & Status.TRACE_OVERFLOW:
        out.append(f"the {obs.source} trace overflowed: events were lost (raise trace_depth)")
    if obs.illegal or obs.addr_fault:
        out.append(f"fault flags set: illegal={obs.illegal:#x} addr_fault={obs.addr_fault:#x}")
    elif obs.illegal is None and s & (Status.ILLEGAL_OP | Status.ADDR_FAULT):     # the masks were not read
        out.append("fault flags set in STATUS: " + ", ".join(f.name for f in (Status.ILLEGAL_OP, Status.ADDR_FAULT)
                                                             if s & f))
    if s & Status.PARAM_FAULT:
        out.append("PARAM_FAULT: a VOP's relocated parameter entry was beyond vxm_param_depth")
    return [Problem("faults", t) for t in out]


def _writes(obs: Observed, refs, skip) -> list[Problem]:
    """Every MEM write (cycle, slice, row, value; without the value when "write values" is
    skipped), in order, against each reference's."""
    if obs.writes is None:
        return []
    keep = 3 if "write values" in skip else 4
    seen = [as_write(w)[:keep] for w in obs.writes]
    out = []
    for ref in refs:
        if ref.writes is not None:
            want = [as_write(w)[:keep] for w in ref.writes]
            out += [Problem("writes", t, ref.source)
                    for t in diff_events(want, seen, f"{obs.source} trace vs {_name(ref, 'writes')}")]
    return out


def _cycles(obs: Observed, refs, skip) -> list[Problem]:
    """The cycle count at done against each reference's."""
    return [Problem("cycles", f"cycle count: {_name(ref, 'cycles')} {ref.cycles}, {obs.source} {obs.cycles}",
                    ref.source)
            for ref in refs if obs.cycles is not None and ref.cycles is not None and obs.cycles != ref.cycles]


def _busy(obs: Observed, refs, skip) -> list[Problem]:
    """Every busy counter a reference names against the observed one: a reference promises
    the slices it names (the golden model names every slice; a test may name only the ones it
    counted)."""
    if obs.busy is None:
        return []
    return [Problem("busy", f"busy cycles of {n}: {_name(ref, 'busy')} {want}, {obs.source} {obs.busy.get(n)}",
                    ref.source)
            for ref in refs if ref.busy is not None
            for n, want in ref.busy.items() if obs.busy.get(n) != want]


def _nan_operand(obs: Observed, refs, skip) -> list[Problem]:
    """``Status.NAN_OPERAND`` (an FP8 MM multiplied a NaN code) exactly as predicted: raised
    when no reference predicts it, or missing when one does, is a problem."""
    if obs.status is None:
        return []
    seen = bool(obs.status & Status.NAN_OPERAND)
    said = [r for r in refs if r.nan_operand is not None]
    ref = said[0] if said else None          # a NaN operand nothing predicts is not expected
    if seen == bool(ref and ref.nan_operand):
        return []
    if seen:
        why = f"the {ref.source} predicts no MM" if ref else "no reference predicts an MM"
        return [Problem("nan operand", f"NAN_OPERAND set in STATUS, but {why} with a NaN operand",
                        ref.source if ref else "")]
    t, mxm = ref.nan_operand
    return [Problem("nan operand", f"NAN_OPERAND missing from STATUS: the {ref.source} predicts it ({mxm}'s MM on "
                                   f"cycle {t} multiplied a NaN code)", ref.source)]


def _read_back(obs: Observed, refs, skip) -> list[Problem]:
    """Every row read back after the run (all lanes) against each reference's final memory."""
    out = []
    for ref in refs:
        if obs.read_back is None or ref.memory is None:
            continue
        gold = {(s, a): tuple(int(b) for b in ref.memory[s][a]) for s, a in obs.read_back}
        bad = [(s, a, v, gold[s, a]) for (s, a), v in sorted(obs.read_back.items()) if tuple(v) != gold[s, a]]
        if bad:
            out += [Problem("read-back", t, ref.source) for t in
                    [f"SRAM read back after the run vs {ref.source}: {len(bad)} of {len(obs.read_back)} rows differ"]
                    + [f"  {s}[{a}] holds {list(v)}, {ref.source} {list(g)}" for s, a, v, g in bad[:LIMIT]]]
    return out


def _outputs(obs: Observed, refs, skip) -> list[Problem]:
    """Every output vector a reference names against the run's, bit for bit (values and
    shape); outputs the run did not let be observed are one problem."""
    out = []
    for ref in refs:
        if obs.outputs is None or ref.outputs is None:
            continue
        missing = [n for n in ref.outputs if obs.outputs.get(n) is None]
        if missing:
            places = list(dict.fromkeys(obs.where.get(n, n) for n in missing))
            out.append(Problem("outputs", obs.unseen.format(n=len(places), where=", ".join(places[:LIMIT])),
                               ref.source))
            continue
        bad = [n for n, want in ref.outputs.items()
               if not np.array_equal(np.asarray(obs.outputs[n], np.int64), np.asarray(want, np.int64))]
        if not bad:
            continue
        held = obs.held or f"{obs.source} holds"
        head = f"{ref.differ or f'{obs.outputs_as} vs {ref.source}'}: {len(bad)} of {len(ref.outputs)} output vectors differ"
        lines = [f"  {n}{' in ' + obs.where[n] if n in obs.where else ''}: {held} "
                 f"{np.asarray(obs.outputs[n]).tolist()}, {ref.source} {np.asarray(ref.outputs[n]).tolist()}"
                 for n in bad[:LIMIT]]
        out += [Problem("outputs", t, ref.source) for t in [head, *lines]]
    return out


def _wall(obs: Observed, refs, skip) -> list[Problem]:
    """An armed tray run: every tile's last deskew offset at its predicted START_HAC plus the
    slack of every RUNTIME_DESKEW it issued, and the wall cycles as predicted, each within
    ``c2c.HAC_ERROR_MAX`` (a SYNC moving the HAC across a release target)."""
    out = []
    for ref in refs:
        wrap = ref.hac_wrap
        for t, (got, (start, slack)) in enumerate(zip(obs.deskew or [], ref.deskew or [])):
            want = (start + slack) % wrap
            off = (got - want + wrap // 2) % wrap - wrap // 2
            if abs(off) > c2c.HAC_ERROR_MAX:
                out.append(Problem("wall", f"tile {t}: deskew offset {got} at done, predicted START_HAC {start} + "
                                           f"{slack} cycles of RUNTIME_DESKEW slack = {want} ({off:+d})", ref.source))
        if obs.wall is not None and ref.wall is not None and abs(obs.wall - ref.wall) > c2c.HAC_ERROR_MAX:
            out.append(Problem("wall", f"{obs.wall} wall cycles, predicted {ref.wall}", ref.source))
    return out


_CHECKS = (("faults", _faults), ("writes", _writes), ("cycles", _cycles), ("busy", _busy),
           ("nan operand", _nan_operand), ("read-back", _read_back), ("outputs", _outputs), ("wall", _wall))
