"""Scoreboard: compare what the hardware did with the golden model and the compiler.

Three independent sources must agree on every MEM write (cycle, slice, address, value):
the hardware trace, the architectural model running the same binary images, and the
scheduler's prediction (when the program came from the scheduler).  The trace is
recorded from the write port's inputs, not from the SRAM, so the scoreboard also checks
what the SRAM holds after the run: every row the job read back over the host bus
(``job(read_back=...)``) against the golden model's final memory and, for an FFN
(``manifest=``), y at the manifest's output locations against the integer FFN, bit-exact.
The busy counters (data-instruction issues per slice) are checked against the golden
model and, when given, the compiler's prediction.
"""

from __future__ import annotations

import numpy as np

from firmware_gen.golden.archmodel import RunResult
from lpu_arch.hostmap import Status

from sim.harness.runner import observed_events

LIMIT = 5          # differences listed per check


def _fmt(ev):
    c, s, a, d = ev
    return f"cycle {c} {s}[{a}] = {list(d)}"


def diff_events(expected: list[tuple], observed: list[tuple], what: str) -> list[str]:
    """Human-readable differences between two event lists (empty when equal)."""
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


# ---- the NaN operand flag -------------------------------------------------------------------
def check_nan_operand(observed: dict, golden: RunResult) -> list[str]:
    """``Status.NAN_OPERAND`` (an FP8 MM multiplied a NaN code) in the hardware's STATUS
    against the golden model's prediction (``RunResult.nan_operand``): raised when not
    predicted, or missing when predicted, is a problem."""
    hw = bool(observed["status"] & Status.NAN_OPERAND)
    if hw == (golden.nan_operand is not None):
        return []
    if hw:
        return ["NAN_OPERAND set in STATUS, but the golden model predicts no MM with a NaN operand"]
    t, mxm = golden.nan_operand
    return [f"NAN_OPERAND missing from STATUS: the golden model predicts it ({mxm}'s MM on cycle {t} "
            "multiplied a NaN code)"]


# ---- busy counters ------------------------------------------------------------------------
def check_busy(observed: dict, expected: dict, what: str) -> list[str]:
    """The hardware's busy counters (``observed["busy"]``: data-instruction issues per
    slice, ``Csr.BUSY_BASE``) against ``expected`` (every slice it names)."""
    hw = observed["busy"]
    return [f"busy cycles of {name}: {what} {n}, hardware {hw.get(name)}"
            for name, n in expected.items() if hw.get(name) != n]


# ---- what the SRAM holds after the run ------------------------------------------------------
def output_rows(manifest) -> dict[str, list[int]]:
    """The MEM rows that hold y (``Manifest.outputs``), per slice: what an FFN job reads
    back after the run (``job(prog, read_back=output_rows(manifest))``), and no more."""
    rows: dict[str, set] = {}
    for s, a in manifest.outputs.values():
        rows.setdefault(s, set()).add(int(a))
    return {s: sorted(r) for s, r in sorted(rows.items())}


def read_back(observed: dict) -> dict[tuple, tuple]:
    """``(slice, row) -> lanes`` of every row the testbench read back after the run."""
    rows = observed.get("read_back_rows", {})
    out = {}
    for name, vecs in observed.get("read_back", {}).items():
        if name not in rows or len(rows[name]) != len(vecs):
            raise ValueError(f"read-back of {name} without its row numbers (sim/tb/tile.py records them)")
        for r, v in zip(rows[name], vecs):
            out[(name, int(r))] = tuple(int(b) for b in v)
    return out


def traced_memory(cfg, observed: dict) -> dict:
    """A tile's MEM contents as its traced writes left them (zeros elsewhere)."""
    mem = {n: np.zeros((cfg.mem_depth, cfg.lanes), np.uint8) for n in cfg.mem_names}
    for _, s, a, d in observed_events(observed):
        mem[s][a] = d
    return mem


def check_read_back(observed: dict, golden: RunResult) -> list[str]:
    """Every row read back over the host bus after the run against the golden model's
    final memory (all lanes)."""
    rows = read_back(observed)
    gold = {(s, a): tuple(int(b) for b in golden.memory[s][a]) for s, a in rows}
    bad = [(s, a, v, gold[s, a]) for (s, a), v in sorted(rows.items()) if v != gold[s, a]]
    if not bad:
        return []
    out = [f"SRAM read back after the run vs golden model: {len(bad)} of {len(rows)} rows differ"]
    out += [f"  {s}[{a}] holds {list(v)}, golden model {list(g)}" for s, a, v, g in bad[:LIMIT]]
    return out


def check_outputs(observed: dict, manifest, y, lanes: int, what: str = "integer FFN") -> list[str]:
    """y read back from the SRAM at the manifest's output locations against ``y``
    ((batch, H): int8 values, or an FP8 tile's E4M3 codes), byte for byte.  Output rows that
    were not read back are a problem."""
    got = read_back(observed)
    missing = sorted({loc for loc in manifest.outputs.values() if (loc[0], int(loc[1])) not in got})
    if missing:
        return [f"y was not read back from the SRAM: {len(missing)} output rows missing, e.g. "
                + ", ".join(f"{s}[{a}]" for s, a in missing[:LIMIT])
                + " (run the job with read_back=scoreboard.output_rows(manifest))"]
    y = np.asarray(y)
    signed = y.dtype.kind == "i"            # int8 values shown as such, codes as bytes
    y = y.astype(np.int64).reshape(manifest.batch, manifest.H) & 0xFF
    y = np.where(signed & (y > 127), y - 256, y)
    out = []
    for (b, j), (s, a) in sorted(manifest.outputs.items()):
        lo, hi = j * lanes, min((j + 1) * lanes, manifest.H)
        if lo >= hi:
            continue
        hw = np.asarray(got[(s, int(a))][:hi - lo], np.uint8).astype(np.int8 if signed else np.uint8).astype(np.int64)
        if not np.array_equal(hw, y[b, lo:hi]):
            out.append(f"  y[{b}, {lo}:{hi}] in {s}[{a}]: SRAM holds {hw.tolist()}, {what} {y[b, lo:hi].tolist()}")
    if not out:
        return []
    return [f"y read back from the SRAM vs {what}: {len(out)} of {len(manifest.outputs)} output vectors "
            "differ"] + out[:LIMIT]


# ---- everything ---------------------------------------------------------------------------
def check_run(observed: dict, golden: RunResult, predicted_writes=None, predicted_cycles=None, *,
              predicted_busy=None, manifest=None, y=None) -> list[str]:
    """All mismatches between a hardware run and its references (empty list = PASS).

    Always: the hardware trace, cycle count and busy counters against the golden model,
    no trace overflow, no fault flag, ``Status.NAN_OPERAND`` exactly as the golden model
    predicts, and every row read back after the run against the golden model's final
    memory.  ``predicted_writes``/``predicted_cycles``/
    ``predicted_busy``: the compiler's or scheduler's prediction.  ``manifest`` (an FFN's
    ``compile_ffn.Manifest``) supplies those three when not given, and y is read back
    from the SRAM at ``manifest.outputs`` (the job must request ``output_rows(manifest)``)
    and compared with ``y`` (the integer FFN, ``numerics.ffn_int``; default: the golden
    model's final memory at the same locations), bit-exact."""
    if manifest is not None:
        predicted_writes = manifest.writes if predicted_writes is None else predicted_writes
        predicted_cycles = manifest.cycles if predicted_cycles is None else predicted_cycles
        predicted_busy = manifest.busy if predicted_busy is None else predicted_busy
    hw = observed_events(observed)
    problems = diff_events([e.as_tuple() for e in golden.events], hw, "hardware trace vs golden model")
    if observed["cycles"] != golden.cycles:
        problems.append(f"cycle count: golden model {golden.cycles}, hardware {observed['cycles']}")
    if observed["status"] & Status.TRACE_OVERFLOW:
        problems.append("the hardware trace overflowed: events were lost (raise trace_depth)")
    if observed["illegal"] or observed["addr_fault"]:
        problems.append(f"fault flags set: illegal={observed['illegal']:#x} addr_fault={observed['addr_fault']:#x}")
    if observed["status"] & Status.PARAM_FAULT:
        problems.append("PARAM_FAULT: a VOP's relocated parameter entry was beyond vxm_param_depth")
    problems += check_nan_operand(observed, golden)
    problems += check_busy(observed, golden.busy, "golden model")
    if predicted_busy is not None:
        problems += check_busy(observed, predicted_busy, "predicted")
    if predicted_writes is not None:
        pred = [(w.cycle, w.slice, w.addr, w.data) for w in predicted_writes]
        problems += diff_events(pred, hw, "hardware trace vs compiler prediction")
    if predicted_cycles is not None and observed["cycles"] != predicted_cycles:
        problems.append(f"cycle count: compiler predicted {predicted_cycles}, hardware {observed['cycles']}")
    problems += check_read_back(observed, golden)
    if manifest is not None:
        lanes = next(iter(golden.memory.values())).shape[1]
        if y is None:
            from firmware_gen.compiler.ffn_manifest import output_matrix
            y, what = output_matrix(manifest, golden.memory, lanes, manifest.H), "golden model"
        else:
            what = "integer FFN"
        problems += check_outputs(observed, manifest, y, lanes, what)
    return problems


def diff_runs(a: dict, b: dict, what: tuple = ("first", "second")) -> list[str]:
    """Differences between two observations of the same program (e.g. on two simulators):
    cycles, STATUS, fault flags, busy counters, trace and read-back rows."""
    out = [f"{key}: {what[0]} {a.get(key)}, {what[1]} {b.get(key)}"
           for key in ("cycles", "status", "illegal", "addr_fault") if a.get(key) != b.get(key)]
    out += [f"busy cycles of {name}: {what[0]} {a['busy'].get(name)}, {what[1]} {b['busy'].get(name)}"
            for name in sorted(set(a["busy"]) | set(b["busy"])) if a["busy"].get(name) != b["busy"].get(name)]
    out += diff_events(observed_events(a), observed_events(b), f"trace: {what[0]} vs {what[1]}")
    ra, rb = read_back(a), read_back(b)
    return out + [f"read back {loc[0]}[{loc[1]}]: {what[0]} {ra.get(loc)}, {what[1]} {rb.get(loc)}"
                  for loc in sorted(set(ra) | set(rb)) if ra.get(loc) != rb.get(loc)]


def check_wall(programs, result: dict) -> tuple[int, int, list[str]]:
    """An armed multi-tile run's wall cycles (HAC, from the host's HAC read to the last
    tile's done): ``(measured, predicted, problems)``.

    Every tile's last deskew offset must be its ``START_HAC`` plus the slack of every
    RUNTIME_DESKEW its program issued (``firmware_gen.compiler.system.deskew_slacks``), within
    ``HAC_ERROR_MAX`` (a SYNC moving the HAC across a release target): SAC cycle ``s`` then
    ran at HAC ``offset + s``, so the tile's done lies at HAC ``offset + cycles``, and the
    prediction is ``c2c.wall_cycles`` (arming lead + slacks + SAC cycles)."""
    from lpu_arch import c2c
    from firmware_gen.compiler.system import deskew_slacks, wall_cycles
    wrap = 1 << programs[0].config.HAC_BITS
    lead = (result["start_hac"] - result["hac_read"]) % wrap
    measured, problems = [], []
    for t, (prog, obs) in enumerate(zip(programs, result["tiles"])):
        want = (result["start_hac"] + deskew_slacks(prog)) % wrap
        got = obs["c2c"]["deskew_offset"]
        off = (got - want + wrap // 2) % wrap - wrap // 2
        if abs(off) > c2c.HAC_ERROR_MAX:
            problems.append(f"tile {t}: deskew offset {got} at done, predicted START_HAC {result['start_hac']} "
                            f"+ {deskew_slacks(prog)} cycles of RUNTIME_DESKEW slack = {want} ({off:+d})")
        measured.append((got - result["hac_read"]) % wrap + obs["cycles"])
    predicted = wall_cycles(programs, [o["cycles"] for o in result["tiles"]], lead)
    return max(measured), predicted, problems
