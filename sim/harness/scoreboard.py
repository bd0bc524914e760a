"""The scoreboard's hardware side: a testbench's observation (``sim/tb/tile.py``,
``sim/tb/system.py``) as ``firmware_gen.scoreboard.Observed``, and the checks of a tile run
and of an armed tray run (the comparison itself is ``firmware_gen.scoreboard.compare``).

Three sources must agree on every MEM write (cycle, slice, address, value): the hardware
trace, the golden model on the same binary images, and the compiler's prediction.  The
trace is taken from the write port's inputs, not the SRAM, so the rows read back after
the run are checked too (and an FFN's y at the manifest's locations, bit-exact)."""

from __future__ import annotations

import numpy as np

from firmware_gen.golden.archmodel import RunResult
from firmware_gen.scoreboard import Observed, Problem, Reference, compare, diff_events, golden_reference, promise

from sim.harness.runner import observed_events


def tile_observed(result: dict) -> Observed:
    """A testbench's observation of one tile's run: its trace, cycles, busy counters,
    STATUS, fault masks and the rows it read back."""
    return Observed("hardware", writes=observed_events(result), cycles=result["cycles"], busy=result["busy"],
                    status=result["status"], illegal=result.get("illegal"), addr_fault=result.get("addr_fault"),
                    read_back=read_back(result))


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


def ffn_outputs(result: dict, manifest, y, lanes: int) -> tuple[dict, dict, dict]:
    """An FFN's y blocks as read back after the run and as ``y`` (int8 values or E4M3
    codes): ``(observed, reference, where)`` by name ``y[b, lo:hi]``; a row not read back is None."""
    got = read_back(result)
    y = np.asarray(y)
    signed = y.dtype.kind == "i"            # int8 values shown as such, codes as bytes
    y = y.astype(np.int64).reshape(manifest.batch, manifest.H) & 0xFF
    y = np.where(signed & (y > 127), y - 256, y)
    seen, want, where = {}, {}, {}
    for (b, j), (s, a) in sorted(manifest.outputs.items()):
        lo, hi = j * lanes, min((j + 1) * lanes, manifest.H)
        if lo >= hi:
            continue
        name = f"y[{b}, {lo}:{hi}]"
        row = got.get((s, int(a)))
        seen[name] = None if row is None else \
            np.asarray(row[:hi - lo], np.uint8).astype(np.int8 if signed else np.uint8).astype(np.int64)
        want[name], where[name] = y[b, lo:hi], f"{s}[{a}]"
    return seen, want, where


# ---- a tile's run ---------------------------------------------------------------------------
def check_run(observed: dict, golden: RunResult, predicted_writes=None, predicted_cycles=None, *,
              predicted_busy=None, manifest=None, y=None) -> list[Problem]:
    """Every mismatch of a hardware run against its references (empty = PASS): no fault
    flag, no trace overflow; trace, cycles, busy counters, NaN flag and read-back rows as the
    golden model's; the compiler's ``predicted_*``.  ``manifest`` supplies the predictions not
    given, and y read back at ``manifest.outputs`` (the job must request
    ``output_rows(manifest)``) is compared with ``y`` (default: the golden model's), bit-exact."""
    seen, refs = tile_observed(observed), [golden_reference(golden)]
    if manifest is not None:
        predicted_writes = manifest.writes if predicted_writes is None else predicted_writes
        predicted_cycles = manifest.cycles if predicted_cycles is None else predicted_cycles
        predicted_busy = manifest.busy if predicted_busy is None else predicted_busy
    refs.append(promise(predicted_writes, predicted_cycles, predicted_busy))
    if manifest is not None:
        lanes = next(iter(golden.memory.values())).shape[1]
        source = "integer FFN"
        if y is None:
            from firmware_gen.compiler.ffn_manifest import output_matrix
            y, source = output_matrix(manifest, golden.memory, lanes, manifest.H), "golden model"
        seen.outputs, want, seen.where = ffn_outputs(observed, manifest, y, lanes)
        seen.outputs_as, seen.held = "y read back from the SRAM", "SRAM holds"
        seen.unseen = ("y was not read back from the SRAM: {n} output rows missing, e.g. {where} "
                       "(run the job with read_back=scoreboard.output_rows(manifest))")
        refs.append(Reference(source, outputs=want))
    return compare(seen, *refs)


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


def check_wall(programs, result: dict) -> tuple[int, int, list[Problem]]:
    """An armed multi-tile run's wall cycles (HAC, from the host's HAC read to the last
    done): ``(measured, predicted, problems)``.  Each tile's last deskew offset must be its
    ``START_HAC`` plus its RUNTIME_DESKEW slacks (within ``HAC_ERROR_MAX``); SAC cycle ``s``
    then ran at HAC ``offset + s``, and ``c2c.wall_cycles`` predicts the wall cycles."""
    from firmware_gen.compiler.system import deskew_slacks, wall_cycles
    wrap = 1 << programs[0].config.HAC_BITS
    lead, since_read = hac_frame(programs, result)
    offsets = [obs["c2c"]["deskew_offset"] for obs in result["tiles"]]
    measured = max(got + obs["cycles"] for got, obs in zip(since_read, result["tiles"]))
    predicted = wall_cycles(programs, [o["cycles"] for o in result["tiles"]], lead)
    problems = compare(Observed(wall=measured, deskew=offsets),
                       Reference("c2c.wall_cycles", wall=predicted, hac_wrap=wrap,
                                 deskew=[(result["start_hac"], deskew_slacks(prog)) for prog in programs]))
    return measured, predicted, problems


def hac_frame(programs, result: dict) -> tuple[int, list[int]]:
    """An armed multi-tile run's ``START_HAC`` and every tile's last deskew offset (SAC
    cycle ``s`` ran at HAC ``offset + s``), in HAC cycles from the host's HAC read."""
    wrap, read = 1 << programs[0].config.HAC_BITS, result["hac_read"]
    return (result["start_hac"] - read) % wrap, [(obs["c2c"]["deskew_offset"] - read) % wrap for obs in result["tiles"]]
