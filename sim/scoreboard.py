"""Scoreboard: compare what the hardware did with the golden model and the compiler.

Three independent sources must agree on every MEM write (cycle, slice, address, value):
the hardware trace, the architectural model running the same binary images, and the
scheduler's prediction (when the program came from the scheduler).
"""

from __future__ import annotations

from firmware_gen.archmodel import RunResult
from lpu_arch.hostmap import Status


def _fmt(ev):
    c, s, a, d = ev
    return f"cycle {c} {s}[{a}] = {list(d)}"


def diff_events(expected: list[tuple], observed: list[tuple], what: str, limit: int = 5) -> list[str]:
    """Human-readable differences between two event lists (empty when equal)."""
    if expected == observed:
        return []
    out = [f"{what}: {len(expected)} expected events, {len(observed)} observed"]
    for i, (e, o) in enumerate(zip(expected, observed)):
        if e != o:
            out.append(f"  first difference at event {i}: expected {_fmt(e)}, observed {_fmt(o)}")
            break
    exp_set, obs_set = set(expected), set(observed)
    for e in sorted(exp_set - obs_set)[:limit]:
        out.append(f"  missing: {_fmt(e)}")
    for o in sorted(obs_set - exp_set)[:limit]:
        out.append(f"  unexpected: {_fmt(o)}")
    return out


def check_run(observed: dict, golden: RunResult, predicted_writes=None, predicted_cycles=None) -> list[str]:
    """All mismatches between a hardware run and its references (empty list = PASS)."""
    from .runner import observed_events

    problems = []
    hw = observed_events(observed)
    gold = [e.as_tuple() for e in golden.events]
    problems += diff_events(gold, hw, "hardware trace vs golden model")
    if observed["cycles"] != golden.cycles:
        problems.append(f"cycle count: golden model {golden.cycles}, hardware {observed['cycles']}")
    if observed["status"] & Status.TRACE_OVERFLOW:
        problems.append("the hardware trace overflowed: events were lost (raise trace_depth)")
    if observed["illegal"] or observed["addr_fault"]:
        problems.append(f"fault flags set: illegal={observed['illegal']:#x} addr_fault={observed['addr_fault']:#x}")
    for name, n in golden.busy.items():
        if observed["busy"].get(name) != n:
            problems.append(f"busy cycles of {name}: golden model {n}, hardware {observed['busy'].get(name)}")
    if predicted_writes is not None:
        pred = [(w.cycle, w.slice, w.addr, w.data) for w in predicted_writes]
        problems += diff_events(pred, hw, "hardware trace vs compiler prediction")
    if predicted_cycles is not None and observed["cycles"] != predicted_cycles:
        problems.append(f"cycle count: compiler predicted {predicted_cycles}, hardware {observed['cycles']}")
    return problems
