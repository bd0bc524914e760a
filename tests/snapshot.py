#!/usr/bin/env python3
"""Behaviour snapshot of the LPU tile project, for proving a refactor behaviour-preserving.

    python tests/snapshot.py OUTDIR [--full] [--parts 1,3]      (from the repository's root)

Imports the project from the current directory (put first on ``sys.path``; every project
module loaded is checked to come from there) and writes into OUTDIR (new or empty) a tree
of text files: compiled programs (``Program.to_json``, the disassembly and a digest of
every queue image, MEM image, VXM parameters and tables), manifests (every dataclass field
and ``summary()``), golden-model runs, the bench's rows (timings removed), generated
Verilog and RTLIL digests; and ``INDEX.txt``, the sha256 and size of every file.
``diff -r OUT_BEFORE OUT_AFTER`` then shows any change of behaviour.  Nothing in OUTDIR
depends on absolute paths, timings or the machine (progress and seconds go to stderr).

Parts (``--parts`` picks some; ``--full`` adds the slow extras marked "full"):
  1 ffn_suite  sim.bench.ffns.compile_suite on default, tiny, board and default with mxm_dtype=fp8
  2 trays      `lpu tray --no-run --tiles 2|4|8`, the bench's tray rows (tray_rows, tray_big_row)
  3 moe        the bench's MoE rows (ep, tp x1, tp x4 on 8 default tiles) and `lpu moe --no-run` runs
  4 decode     `lpu decode --no-run` (+ its tray forms the tests run), the bench's decode rows
  5 lp30       the bench's lp30 rows (sim.bench.lp30.lp30_rows); full: `lpu plan --model M --dtype fp8`
  6 verilog    tile, UART top and system Verilog exactly as sim.harness.runner converts it for each simulator
  7 rtlil      hdl.flows.size.elaborate of full_scale, RTLIL sha256 per module; full: lp30 too
  8 on_chip    the bench's attention cycle rows and token loop rows, every golden-model run of their programs

A change that must keep behaviour (a refactor) runs this script on the tree before and
after it and compares the two directories; the script of each revision runs on its own
tree.  The project's module paths appear only in the PROJECT MODULES block below and as
fully dotted names (``sim.flows.tray.compile_tray``) in the code, so that a regex over
dotted names can rewrite them when modules move.
"""

import os
import sys

if os.environ.get("PYTHONHASHSEED") != "0":        # Amaranth's output depends on it (set/dict order)
    os.environ["PYTHONHASHSEED"] = "0"
    os.execv(sys.executable, [sys.executable, *sys.argv])

sys.dont_write_bytecode = True          # leave no __pycache__ in the snapshotted tree
REPO = os.getcwd()
sys.path.insert(0, REPO)                 # the repo being snapshotted, before the venv's editable install

import argparse
import collections
import contextlib
import dataclasses
import enum
import hashlib
import io
import json
import pathlib
import random
import time

import numpy as np

import amaranth
import amaranth.back.verilog

# ============================ PROJECT MODULES (the only import lines naming them) ============================
import lpu_arch.config
import lpu_arch.isa
import lpu_arch.topology
import firmware_gen.golden.archmodel
import firmware_gen.chart
import firmware_gen.compiler.ffn
import firmware_gen.compiler.ffn_manifest
import firmware_gen.host.decoder
import firmware_gen.compiler.fit
import firmware_gen.host.models
import firmware_gen.golden.moe
import firmware_gen.compiler.moe_tray
import firmware_gen.golden.numerics
import firmware_gen.host.plan
import firmware_gen.program
import firmware_gen.compiler.resident
import firmware_gen.compiler.resident_tray
import firmware_gen.compiler.tray
import hdl.top.host_bridge
import hdl.flows.size
import hdl.top.system
import hdl.top.tile
import sim.bench.attention
import sim.bench.ffns
import sim.bench.token_loop
import sim.bench.suite
import sim.bench.decode
import sim.bench.lp30
import sim.cli.common
import sim.cli.main
import sim.flows.decode
import sim.flows.c2c
import sim.flows.moe
import sim.flows.tray
import sim.harness.clocks
import sim.harness.icarus
import sim.harness.runner
# ============================ END OF PROJECT MODULES ==========================================================

PROJECT_PACKAGES = ("lpu_arch", "firmware_gen", "hdl", "sim")

# Keys of the project's result dicts that are wall-clock measurements, not behaviour.
TIMING_KEYS = {"host_s", "host_segments_s", "host_seconds", "compile_seconds", "golden_seconds", "wall_s",
               "run_seconds", "elaboration_seconds", "peak_memory_mb", "yosys_peak_memory_mb", "seconds",
               "netlist_s", "rtlil_s", "yosys_s", "yosys_mb", "verilog_seconds", "compile_and_check_s"}

ARRAY_INLINE = 1024                  # numpy arrays up to this many values are written out, larger ones hashed
FULL_TEXT_LIMIT = 5_000_000          # bytes: larger program texts are stored as digests only


# ---- where the project comes from ---------------------------------------------------------------------------
def foreign_modules() -> list[str]:
    """Loaded project modules that do not come from REPO (e.g. through the venv's editable install)."""
    root = os.path.realpath(REPO) + os.sep
    bad = []
    for name, mod in list(sys.modules.items()):
        if name.split(".")[0] in PROJECT_PACKAGES and mod is not None:
            f = getattr(mod, "__file__", None)
            paths = [f] if f else list(getattr(mod, "__path__", []))
            if not paths or not all(os.path.realpath(p).startswith(root) for p in paths):
                bad.append(f"{name} ({paths})")
    return sorted(bad)


def check_origin() -> None:
    bad = foreign_modules()
    if bad:
        sys.exit("snapshot: project modules loaded from outside " + REPO + ":\n  " + "\n  ".join(bad))


# ---- plain data ---------------------------------------------------------------------------------------------
def sha256(data) -> str:
    return hashlib.sha256(data if isinstance(data, bytes) else data.encode()).hexdigest()


def array_digest(a: np.ndarray) -> dict:
    a = np.ascontiguousarray(a)
    return {"dtype": str(a.dtype), "shape": list(a.shape), "sha256": sha256(a.tobytes())}


def plain(x):
    """``x`` as JSON data, deterministic: dataclasses by field, dicts with non-string keys by
    the key's JSON text, sets sorted, numpy arrays as lists (or dtype, shape and sha256 when
    larger than ARRAY_INLINE), programs as their digest, instructions as assembly text."""
    if x is None or isinstance(x, (bool, str)):
        return x
    if isinstance(x, np.generic):
        return plain(x.item())
    if isinstance(x, enum.Enum):
        return x.value if isinstance(x.value, (int, str)) and not isinstance(x.value, bool) else str(x)
    if isinstance(x, int):
        return int(x)
    if isinstance(x, float):
        return float(x)
    if isinstance(x, np.ndarray):
        return plain(x.tolist()) if x.size <= ARRAY_INLINE else {"array": array_digest(x)}
    if isinstance(x, firmware_gen.program.Program):
        return program_digest(x)
    if isinstance(x, lpu_arch.isa.Instr):
        return str(x)
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        return {f.name: plain(getattr(x, f.name)) for f in dataclasses.fields(x)}
    if isinstance(x, dict):
        return {k if isinstance(k, str) else json.dumps(plain(k), separators=(",", ":")): plain(v)
                for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [plain(v) for v in x]
    if isinstance(x, (set, frozenset)):
        return sorted((plain(v) for v in x), key=lambda v: json.dumps(v, sort_keys=True))
    raise TypeError(f"snapshot: no plain form for {type(x).__name__}")


def untimed(x):
    """``x`` (plain data) without the keys in TIMING_KEYS, at any depth."""
    if isinstance(x, dict):
        return {k: untimed(v) for k, v in x.items() if k not in TIMING_KEYS}
    if isinstance(x, list):
        return [untimed(v) for v in x]
    return x


def dumps(x, indent: int = 0) -> str:
    """JSON text of plain data: one key or one container element per line, lists of scalars on one line."""
    if isinstance(x, dict) and x:
        pad = " " * (indent + 1)
        return "{\n" + ",\n".join(f"{pad}{json.dumps(k)}: {dumps(v, indent + 1)}" for k, v in x.items()) \
            + "\n" + " " * indent + "}"
    if isinstance(x, list) and x and any(isinstance(v, (dict, list)) for v in x):
        if all(isinstance(v, list) and not any(isinstance(w, (dict, list)) for w in v) for v in x) \
                and sum(len(v) for v in x) <= 64:
            return json.dumps(x)
        pad = " " * (indent + 1)
        return "[\n" + ",\n".join(pad + dumps(v, indent + 1) for v in x) + "\n" + " " * indent + "]"
    return json.dumps(x)


def program_digest(prog) -> dict:
    """A program by parts: its tile, a sha256 of every queue's binary image (``Program.images``,
    which validates it) and of every MEM image, the VXM parameters and tables; ``sha256``: of all that."""
    imgs = prog.images()
    d = {"config": prog.config.to_dict(), "config_key": prog.config.key(),
         "instructions": sum(len(w) - 1 for w in imgs.values()),
         "queues": {n: {"words": len(w), "sha256": sha256(json.dumps(w))} for n, w in imgs.items() if len(w) > 1},
         "memory": {n: {"rows_used": int(np.flatnonzero(m.any(axis=1))[-1]) + 1, **array_digest(m)}
                    for n, m in prog.memory.items() if m.any()},
         "vxm_params": array_digest(prog.vxm_params), "table": array_digest(prog.table)}
    d["sha256"] = sha256(json.dumps(d, sort_keys=True))
    return d


def manifest_plain(man) -> dict:
    """Every field of a manifest and its ``summary()``."""
    out = plain(man)
    if callable(getattr(man, "summary", None)):
        out["summary()"] = plain(man.summary())
    return out


def run_plain(res) -> dict:
    """A golden-model ``RunResult``: cycles, every MEM write, busy counters, links; final MEM as digests."""
    return {"cycles": res.cycles, "events": [plain(e.as_tuple()) for e in res.events], "busy": plain(res.busy),
            "mm_count": plain(res.mm_count), "sent": plain(res.sent), "nan_operand": plain(res.nan_operand),
            "memory": {n: array_digest(m) for n, m in res.memory.items()}}


# ---- output -------------------------------------------------------------------------------------------------
class Out:
    def __init__(self, root: pathlib.Path):
        self.root = root

    def text(self, rel: str, text: str) -> None:
        p = self.root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        with open(p, "w", encoding="utf-8", newline="\n") as f:
            f.write(text if text.endswith("\n") or not text else text + "\n")

    def json(self, rel: str, obj) -> None:
        self.text(rel, dumps(untimed(plain(obj))) + "\n")

    def program(self, rel: str, prog, full_text: bool = True) -> None:
        """``rel.digest.json`` always; ``rel.program.json`` (``Program.to_json``) and ``rel.asm``
        (``Program.disassemble``) when ``full_text``, each when under FULL_TEXT_LIMIT bytes."""
        d = program_digest(prog)
        used = sum(m["rows_used"] for m in d["memory"].values()) * prog.config.lanes
        estimate = 4 * used + 22 * d["instructions"] + 3 * prog.vxm_params.size
        if full_text and estimate <= FULL_TEXT_LIMIT:
            text = prog.to_json()
            if len(text) <= FULL_TEXT_LIMIT:
                self.text(rel + ".program.json", text)
                d["to_json_sha256"] = sha256(text)
        if full_text and 30 * d["instructions"] <= FULL_TEXT_LIMIT:
            self.text(rel + ".asm", prog.disassemble())
        self.json(rel + ".digest.json", d)

    def programs(self, rel: str, progs, full_text: bool = True) -> None:
        for t, p in enumerate(progs):
            self.program(f"{rel}/tile{t}", p, full_text)

    def stdout(self, rel: str, buf: io.StringIO) -> None:
        if buf.getvalue():
            self.text(rel, buf.getvalue())

    def index(self) -> int:
        files = sorted(p for p in self.root.rglob("*") if p.is_file() and p.name != "INDEX.txt")
        lines = [f"{sha256(p.read_bytes())}  {p.stat().st_size:>10}  {p.relative_to(self.root).as_posix()}"
                 for p in files]
        self.text("INDEX.txt", "\n".join(lines) + "\n")
        return len(files) + 1


@contextlib.contextmanager
def captured():
    """The project's prints (progress, skipped FFNs) into a buffer, kept as a file."""
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        yield buf


@contextlib.contextmanager
def recording(*functions):
    """Record the outermost calls of ``functions`` (project functions) while the block runs:
    each is replaced wherever a project module binds it, so that a bench function's own
    calls are seen.  Yields the list of ``(name, result, None)`` or ``(name, None, error)``."""
    calls, depth, patched = [], [0], []
    for orig in functions:
        def wrapper(*a, _orig=orig, **k):
            depth[0] += 1
            try:
                result = _orig(*a, **k)
            except Exception as e:
                depth[0] -= 1
                if depth[0] == 0:
                    calls.append((_orig.__name__, None, f"{type(e).__name__}: {e}"))
                raise
            depth[0] -= 1
            if depth[0] == 0:
                calls.append((_orig.__name__, result, None))
            return result
        for name, mod in list(sys.modules.items()):
            if name.split(".")[0] in PROJECT_PACKAGES and mod is not None:
                for attr, value in list(vars(mod).items()):
                    if value is orig:
                        setattr(mod, attr, wrapper)
                        patched.append((mod, attr, orig))
    try:
        yield calls
    finally:
        for mod, attr, orig in patched:
            setattr(mod, attr, orig)


def need_calls(calls, name: str, at_least: int = 1) -> list:
    got = [c for c in calls if c[0] == name]
    if len(got) < at_least:
        raise RuntimeError(f"snapshot: expected {at_least}+ call(s) of {name}, recorded {len(got)}: "
                           "did the bench stop calling it?")
    return got


def save_calls(out: Out, rel: str, calls) -> None:
    """Every recorded call's result (or error), in call order: programs, manifests, golden runs."""
    listing = []
    for i, (name, result, error) in enumerate(calls):
        base = f"{rel}/{i:02d}-{name}"
        listing.append({"call": i, "function": name, "error": error})
        if error is not None:
            continue
        if name in ("compile_ffn",):                       # (Program, Manifest)
            prog, man = result
            out.program(base, prog)
            out.json(base + ".manifest.json", manifest_plain(man))
        elif name in ("compile_ffn_tray",):                # ([Program], TrayManifest)
            progs, man = result
            out.programs(base, progs)
            out.json(base + "/manifest.json", manifest_plain(man))
        elif name == "run":                                # RunResult
            out.json(base + ".golden.json", run_plain(result))
        elif name == "run_system":                         # [RunResult]
            out.json(base + ".golden.json", [run_plain(r) for r in result])
        elif name == "fit_ffn":                            # (TileConfig, needs)
            out.json(base + ".json", {"config": result[0], "needs": result[1]})
        else:
            out.json(base + ".json", result)
    out.json(f"{rel}/calls.json", listing)


# ==== part 1: the bench's FFN suite ===========================================================================
FFN_SUITE_RUNS = (("default", "int8"), ("tiny", "int8"), ("board", "int8"), ("default", "fp8"))


def part_ffn_suite(out: Out, full: bool) -> None:
    for preset, dtype in FFN_SUITE_RUNS:
        # `lpu bench --config PRESET --dtype DTYPE` (sim.bench.suite.run: the tile with mxm_dtype=DTYPE;
        # sim.bench.suite.run_ffns: compile_suite, each FFN run on the golden model and against ffn_int)
        cfg = lpu_arch.config.TileConfig.preset(preset).with_overrides([f"mxm_dtype={dtype}"])
        d = f"1_ffn_suite/{preset}-{dtype}"
        out.json(f"{d}/config.json", {"config": cfg.to_dict(), "key": cfg.key(),
                                      "ffn_suite": sim.bench.ffns.ffn_suite(cfg)})
        with captured() as buf:
            suite = sim.bench.ffns.compile_suite(cfg)
        out.stdout(f"{d}/stdout.txt", buf)            # the FFNs that do not fit, with the limit named
        for (kind, H, I, B), ex, prog, man in suite:
            name = f"{d}/{kind}-H{H}-I{I}-b{B}"
            out.program(name, prog)
            out.json(name + ".manifest.json", manifest_plain(man))
            gold = firmware_gen.golden.archmodel.run(prog)
            out.json(name + ".golden.json", {
                "as_predicted": firmware_gen.golden.archmodel.as_predicted(gold, man.cycles, man.writes),
                "ffn_int": firmware_gen.golden.numerics.ffn_int(ex.spec, ex.x_int8),
                "output_matrix": firmware_gen.compiler.ffn_manifest.output_matrix(man, gold.memory, cfg.lanes, H),
                "example": ex, "run": run_plain(gold)})


# ==== part 2: trays ==========================================================================================
def part_trays(out: Out, full: bool) -> None:
    # `lpu tray --no-run --tiles N` with its defaults (sim.cli.main.cmd_tray: --config tiny through
    # tray_tile_config, FFN swiglu TRAY_H x TRAY_I, --seed 1, --clock-seed 1, no --set)
    base = sim.flows.tray.tray_tile_config("tiny").with_overrides([])
    for tiles in (2, 4, 8):
        ct = sim.flows.tray.compile_tray(tiles=tiles, preset=sim.cli.common.config_name("tiny", []), clock_seed=1,
                                        base=base, example=None, kind="swiglu", H=sim.flows.tray.TRAY_H,
                                        I=sim.flows.tray.TRAY_I, batch=1, seed=1)
        d = f"2_trays/lpu-tray-no-run-{tiles}tiles"
        moves = firmware_gen.chart.tray_transfers(ct.programs, ct.topo.peer)
        sent = collections.Counter(x.src for x in moves)
        got = collections.Counter(x.dst for x in moves)
        out.json(f"{d}/tray.json", {
            "describe": ct.describe(), "summary": ct.summary(), "base": ct.base, "cfg": ct.cfg,
            "per_tile": [{"tile": t, "predicted_cycles": m.cycles, "output_writes": len(m.writes),
                          "vectors_sent": sent[t], "vectors_received": got[t]} for t, m in enumerate(ct.manifest.tile)],
            "transfers": moves, "wire_latencies": ct.latencies(), "clock_draws": [ct.clocks(k) for k in range(3)],
            "x": ct.x, "y_int8": ct.y_int8, "spec": ct.spec})
        out.json(f"{d}/manifest.json", manifest_plain(ct.manifest))
        out.programs(d, ct.programs)
        # what run_tray_on_rtl checks the RTL against: the multi-tile golden model
        gold = firmware_gen.golden.archmodel.run_system(ct.programs, ct.topo.peer, ct.manifest.min_distance)
        out.json(f"{d}/golden.json", {
            "tiles": [run_plain(r) for r in gold],
            "as_predicted": [firmware_gen.golden.archmodel.as_predicted(r, m.cycles, m.writes)
                             for r, m in zip(gold, ct.manifest.tile)],
            "tray_output": firmware_gen.compiler.tray.tray_output(ct.manifest, [r.memory for r in gold], ct.cfg.lanes, ct.H)})

    # `lpu bench` (sim.bench.suite.run): tray_rows(cfg) on every bench tile, tray_big_row(cfg) on the default one
    for preset, dtype in (("default", "int8"), ("default", "fp8"), ("tiny", "int8")):
        cfg = lpu_arch.config.TileConfig.preset(preset).with_overrides([f"mxm_dtype={dtype}"])
        d = f"2_trays/bench-{preset}-{dtype}"
        with recording(firmware_gen.compiler.ffn.compile_ffn, firmware_gen.compiler.tray.compile_ffn_tray,
                       firmware_gen.golden.archmodel.run_system) as calls, captured() as buf:
            rows = sim.bench.suite.tray_rows(cfg)
        need_calls(calls, "compile_ffn_tray", 3)
        out.json(f"{d}/tray_rows.json", rows)
        out.stdout(f"{d}/tray_rows.stdout.txt", buf)
        save_calls(out, f"{d}/tray_rows", calls)
        if preset == "default":
            with recording(firmware_gen.compiler.fit.fit_ffn, firmware_gen.compiler.ffn.compile_ffn,
                           firmware_gen.compiler.tray.compile_ffn_tray, firmware_gen.golden.archmodel.run,
                           firmware_gen.golden.archmodel.run_system) as calls, captured() as buf:
                row = sim.bench.suite.tray_big_row(cfg)
            need_calls(calls, "fit_ffn")
            need_calls(calls, "compile_ffn_tray")
            out.json(f"{d}/tray_big_row.json", row)
            out.stdout(f"{d}/tray_big_row.stdout.txt", buf)
            save_calls(out, f"{d}/tray_big_row", calls)


# ==== part 3: MoE ============================================================================================
def save_moe(out: Out, d: str, cm, golden: bool) -> None:
    """A ``CompiledMoe``: its layer, manifest, programs and per routing every round's base
    registers, predicted writes and busy counters; with ``golden`` each round on the
    multi-tile golden model with what ``run_moe_on_rtl`` checks (problems, outputs, moe_int)."""
    mt = cm.mt
    man = mt.manifest()
    out.json(f"{d}/layer.json", {
        "describe": cm.describe(), "cfg": cm.cfg, "tiles": cm.tiles, "mapping": mt.mapping,
        "capacity": mt.capacity, "clock_seed": cm.clock_seed, "wire_latencies": cm.latencies(),
        "clock_draws": [cm.clocks(k) for k in range(2)], "example": cm.example,
        "routings": cm.routings, "rounds": {n: len(cm.rounds(n)) for n in cm.routings}})
    out.json(f"{d}/manifest.json", manifest_plain(man))
    out.programs(d, cm.programs)
    peer = lpu_arch.topology.Topology(cm.tiles).peer
    for name in cm.routings:
        stages = firmware_gen.golden.moe.moe_int(cm.example.spec, cm.example.x_int8, cm.routings[name]) if golden else None
        for k, asg in enumerate(cm.rounds(name)):
            r = {"assignment": asg, "bases": mt.bases(asg), "predicted_busy": mt.predicted_busy(asg),
                 "predicted_writes": mt.predict(asg),
                 "slot_spans": {key: mt.slot_span(*key) for key in sorted(asg)}}
            if golden:
                res = (firmware_gen.golden.archmodel.run_system(cm.programs, peer, bases=mt.bases(asg)) if cm.tiles > 1
                       else [firmware_gen.golden.archmodel.run(cm.programs[0], bases=mt.bases(asg)[0])])
                routed, shared = mt.outputs(asg, [x.memory for x in res])
                r["golden"] = {"problems": mt.round_problems(asg, res), "routed": routed, "shared": shared,
                               "tiles": [run_plain(x) for x in res]}
                r["moe_int"] = stages
            out.json(f"{d}/routing-{name}-round{k}.json", r)


CLI_MOE = (   # `lpu moe --no-run ...` (sim.cli.main.cmd_moe): (name, --set, --mapping, --capacity, --routing)
    ("defaults", (), "ep", None, None),
    ("tp-tables16-mem256-param32", ("vxm_tables=16", "mem_depth=256", "vxm_param_depth=32"), "tp", None, None),
    ("capacity1-over", (), "ep", 1, "over"),      # tests/test_cli.py: a routing beyond capacity, two rounds
)


def part_moe(out: Out, full: bool) -> None:
    # `lpu bench` (sim.bench.suite.moe_rows on the default tile, int8 and --dtype fp8): MOE_LAYER on 8 tiles,
    # for each of MOE_RUNS (ep; tp with MOE_TP_SETS at 1 and 4 tokens), every routing on the golden model
    for dtype in ("int8", "fp8"):
        cfg = lpu_arch.config.TileConfig.preset("default").with_overrides([f"mxm_dtype={dtype}"])
        d = f"3_moe/bench-default-{dtype}"
        with recording(sim.flows.moe.compile_moe_example, firmware_gen.golden.archmodel.run_system) as calls, \
                captured() as buf:
            rows = sim.bench.suite.moe_rows(cfg)
        out.json(f"{d}/moe_rows.json", rows)
        out.stdout(f"{d}/stdout.txt", buf)
        runs = [c for c in calls if c[0] == "compile_moe_example"]
        if len(runs) != len(sim.bench.suite.MOE_RUNS):
            raise RuntimeError(f"snapshot: moe_rows compiled {len(runs)} layers, MOE_RUNS has {len(sim.bench.suite.MOE_RUNS)}")
        for (mapping, tokens, sets), (_, cm, error) in zip(sim.bench.suite.MOE_RUNS, runs):
            rd = f"{d}/{mapping}-{tokens}tokens"
            out.json(f"{rd}/run.json", {"mapping": mapping, "tokens": tokens, "config_sets": sets, "error": error})
            if cm is not None:
                save_moe(out, rd, cm, golden=False)
        out.json(f"{d}/golden_runs.json", [{"call": i, "tiles": [run_plain(r) for r in res]}
                                           for i, (name, res, _) in enumerate(calls) if name == "run_system"])
    # `lpu moe --no-run` (sim.cli.main.cmd_moe's defaults: --config tiny via tray_tile_config, 8 experts top-2,
    # 1 shared, H=I=8, 4 tiles, 1 token, seed 0, clock-seed 1; routings router, spread, packed, random)
    for name, sets, mapping, capacity, routing in CLI_MOE:
        base = sim.flows.tray.tray_tile_config("tiny").with_overrides(list(sets))
        routings = ("router", "spread", "packed", "random") if routing is None else (routing,)
        cm = sim.flows.moe.compile_moe_example(E=8, top_k=2, shared=1, H=8, I=8, tokens=1, tiles=4,
                                              capacity=capacity, seed=0, cfg=base, routings=routings, forced=None,
                                              clock_seed=1, example=None, mapping=mapping)
        save_moe(out, f"3_moe/lpu-moe-no-run-{name}", cm, golden=True)


# ==== part 4: decode =========================================================================================
def save_resident(out: Out, d: str, rm) -> None:
    """A ``ResidentModel``: every layer's program (in full), manifest and placement; the combined images."""
    out.json(f"{d}/resident.json", {
        "config": rm.config, "images": rm.images, "memory": rm.memory, "vxm_params": rm.vxm_params,
        "table": rm.table, "loaded_bytes": rm.loaded_bytes(),
        "layers": [{k: v for k, v in plain(ly).items() if k not in ("program", "manifest")} for ly in rm.layers]})
    for ly in rm.layers:
        out.program(f"{d}/layer{ly.index}", ly.program)
        out.json(f"{d}/layer{ly.index}.manifest.json", manifest_plain(ly.manifest))


DECODE_MODEL = {"vocab": 64, "H": 8, "I": 16, "layers": 2, "heads": 2, "seed": 0}     # `lpu decode`'s defaults


def part_decode(out: Out, full: bool) -> None:
    # `lpu decode --no-run` (sim.cli.main.cmd_decode's defaults: --config tiny with DECODE_TILE, the synthetic
    # model, prompt 1,2,3, 8 tokens): every layer resident on one tile, the loop on the golden model
    base = lpu_arch.config.TileConfig.load("tiny", (*sim.flows.decode.DECODE_TILE,))
    setup = sim.flows.decode.decode_setup(base.to_dict(), DECODE_MODEL, [1, 2, 3], 8, False)
    golden = sim.flows.decode.run_golden(setup)
    d = "4_decode/lpu-decode-no-run"
    save_resident(out, d, setup.resident)
    out.json(f"{d}/golden.json", {"setup_args": setup.args, "tokens": golden["tokens"], "runs": golden["runs"],
                                  "engine": golden["engine"], "problems": sim.flows.decode.check(setup, golden, golden)})

    # `lpu decode --no-run --experts 4 --tiles 4` and `--tiles 2` (tests/test_decode.py, 2 tokens):
    # sim.cli.main._decode_tray with TileConfig.load("tiny"): run_moe_tray / run_dense_tray_any
    tray_base = lpu_arch.config.TileConfig.load("tiny", [])
    for name, extra, tiles, loop in (
            ("experts4-tiles4", {"experts": 4, "top_k": 2, "shared": 1}, 4, sim.flows.decode.run_moe_tray),
            ("tiles2", {}, 2, sim.flows.decode.run_dense_tray_any)):
        model = firmware_gen.host.decoder.calibrate(firmware_gen.host.decoder.synthetic(**DECODE_MODEL, **extra))
        with recording(firmware_gen.compiler.moe_tray.compile_moe, firmware_gen.compiler.resident_tray.compile_resident_tray,
                       firmware_gen.compiler.tray.compile_tray_layer) as calls:
            g = loop(model, [1, 2, 3], 2, tray_base, tiles)
        out.json(f"4_decode/lpu-decode-no-run-{name}/loop.json", g)
        save_compiled_trays(out, f"4_decode/lpu-decode-no-run-{name}", calls)

    # `lpu bench` (sim.bench.decode.decode_rows, accuracy_rows; trained=False: the packaged model
    # is not installed): DECODE_MODELS resident on one tile, batched, and the MoE decoder on 8 tiles
    with recording(firmware_gen.compiler.resident.compile_resident, sim.flows.decode.run_golden,
                   firmware_gen.compiler.moe_tray.compile_moe) as calls, captured() as buf:
        rows = sim.bench.decode.decode_rows(trained=False)
    need_calls(calls, "compile_resident", 2 * len(sim.bench.decode.DECODE_MODELS))
    d = "4_decode/bench"
    out.json(f"{d}/decode_rows.json", rows)
    out.stdout(f"{d}/stdout.txt", buf)
    listing = []
    for i, (name, result, error) in enumerate(calls):
        listing.append({"call": i, "function": name, "error": error})
        if name == "compile_resident" and error is None:
            save_resident(out, f"{d}/{i:02d}-compile_resident", result)
        elif name == "run_golden":
            out.json(f"{d}/{i:02d}-run_golden.json", {k: v for k, v in result.items() if k in ("tokens", "runs")})
    out.json(f"{d}/calls.json", listing)
    save_compiled_trays(out, f"{d}/moe", [c for c in calls if c[0] == "compile_moe"])
    out.json(f"{d}/accuracy_rows.json", sim.bench.decode.accuracy_rows(trained=False))


def save_compiled_trays(out: Out, d: str, calls) -> None:
    """compile_moe (MoeTray), compile_resident_tray (ResidentTray) and compile_tray_layer (TrayLayer)
    results: manifests and every tile's program digest, per call."""
    listing = []
    for i, (name, result, error) in enumerate(calls):
        entry = {"call": i, "function": name, "error": error}
        if error is None and name == "compile_moe":
            entry.update(manifest=manifest_plain(result.manifest()), programs=result.programs())
        elif error is None:
            entry["result"] = result
        listing.append(entry)
    out.json(f"{d}/compiled.json", listing)


# ==== part 5: lp30 ===========================================================================================
def part_lp30(out: Out, full: bool) -> None:
    # `lpu bench` (sim.bench.lp30.lp30_rows): WORKLOADS compiled on the lp30 preset, run on the golden model
    with recording(firmware_gen.compiler.ffn.compile_ffn, firmware_gen.golden.archmodel.run) as calls, captured() as buf:
        rows = sim.bench.lp30.lp30_rows()
    compiled = need_calls(calls, "compile_ffn", len(sim.bench.lp30.WORKLOADS))
    runs = need_calls(calls, "run", len(sim.bench.lp30.WORKLOADS))
    d = "5_lp30"
    out.json(f"{d}/lp30_rows.json", rows)
    out.stdout(f"{d}/stdout.txt", buf)
    for (name, H, I, _), (_, (prog, man), _), (_, gold, _) in zip(sim.bench.lp30.WORKLOADS, compiled, runs):
        w = f"{d}/swiglu-H{H}-I{I}"
        out.program(w, prog)              # the digest and the disassembly: its JSON is far over FULL_TEXT_LIMIT
        out.json(w + ".manifest.json", manifest_plain(man))
        out.json(w + ".golden.json", run_plain(gold))
    if full:
        # `lpu plan --model M --dtype fp8 --json` for every built-in model (sim.bench.lp30.plan_rows runs
        # it as a subprocess for its time; here in-process through firmware_gen.host.plan.run)
        for model in firmware_gen.host.models.MODELS:
            with captured() as buf:
                rc = sim.cli.main.main(["plan", "--model", model, "--dtype", "fp8", "--json"])
            try:
                plan = json.loads(buf.getvalue())
            except ValueError:
                plan = buf.getvalue()
            out.json(f"{d}/plan/{model}.json", {"exit_status": rc, "plan": plan})    # (timings removed)


# ==== part 6: Verilog ========================================================================================
def converted(design, toplevel: str, simulator: str) -> str:
    """The Verilog sim.harness.runner._build converts ``design()`` to for ``simulator``: sim.harness.icarus.convert
    for Icarus, Amaranth's Verilog (emit_src=False, strip_internal_attrs=True) for Verilator, then for both
    sim.harness.icarus.loop_constant_inits."""
    if simulator == "icarus":
        text = sim.harness.icarus.convert(design(), toplevel)
    else:
        text = amaranth.back.verilog.convert(design(), name=toplevel, emit_src=False, strip_internal_attrs=True)
    return sim.harness.icarus.loop_constant_inits(text)


def system_builds(full: bool) -> list[tuple]:
    """``(name, cfg, tiles, latency, simulator)`` of the system builds the tests make, one latency
    per distinct (configuration, tiles); ``full`` adds the 8-tile system, the 4-tile one for
    Verilator and the other latencies of the 2-tile c2c system."""
    c2c = sim.flows.c2c.c2c_config()
    builds = []
    # tests/test_c2c_sim.py, system(simulator): SystemSim(c2c_config(), 2, latency(simulator), simulator)
    for simulator in ("verilator", "icarus"):
        lat = random.Random(f"c2c-latency-{simulator}").randint(c2c.link_latency_min, c2c.link_latency_max)
        builds.append(("c2c-2tiles", c2c, 2, lat, simulator))
    # tests/test_c2c_sim.py::test_all_to_all_tiles and tests/test_moe_sim.py (the same builds): 4 tiles on
    # ONE_SIM (Icarus) in `make test`, on both in `make test-long`; 8 tiles on both, `make test-long` only
    for tiles in (4, 8):
        cfg = dataclasses.replace(c2c, links=tiles - 1)
        rng = random.Random(f"all-to-all-{tiles}")
        lat = {p: rng.randint(cfg.link_latency_min, cfg.link_latency_max)
               for p in lpu_arch.topology.Topology(tiles).pairs}
        for simulator in (("icarus", "verilator") if tiles == 4 else ("verilator", "icarus")):
            if tiles == 4 and simulator == "icarus" or full:
                builds.append((f"c2c-{tiles}tiles", cfg, tiles, lat, simulator))
    # tests/test_decode.py::test_lpu_decode_on_a_tray_of_rtl_tiles: `lpu decode --tiles 2` and
    # `--experts 4 --tiles 4`, --clock-seed 3, on ONE_SIM (the decode module's run_tray_rtl builds
    # SystemSim(tray_config(tiny, N), N, wire_latencies(tcfg, N, 3)))
    tiny = lpu_arch.config.TileConfig.tiny()
    for tiles in (2, 4):
        tcfg = firmware_gen.compiler.tray.tray_config(tiny, tiles)
        builds.append((f"decode-tray-{tiles}tiles", tcfg, tiles, sim.harness.clocks.wire_latencies(tcfg, tiles, 3),
                       "icarus"))
    if full:     # the same configuration as c2c-2tiles (c2c_config() == the tray's tiny tile with 1 link)
        builds += [("c2c-2tiles-latmin", c2c, 2, c2c.link_latency_min, "icarus"),    # tests/test_deskew.py
                   ("c2c-2tiles-latmax", c2c, 2, c2c.link_latency_max, "icarus"),    # `lpu c2c --sim icarus`
                   # `lpu tray --tiles 2 --sim icarus` (tests/test_cli.py): wire latencies from --clock-seed 1
                   ("tray-2tiles-clockseed1", c2c, 2, sim.harness.clocks.wire_latencies(c2c, 2, 1), "icarus")]
    return builds


def part_verilog(out: Out, full: bool) -> None:
    d = "6_verilog"
    # tiles as TileSim builds them (sim.harness.runner.simulated_design: Verilator's behind InputRegisters)
    for preset in ("default", "tiny", "board"):
        cfg = lpu_arch.config.TileConfig.preset(preset)
        for simulator in ("verilator", "icarus"):
            design, registered = sim.harness.runner.simulated_design(lambda cfg=cfg: hdl.top.tile.Tile(cfg), simulator)
            top = sim.harness.runner.TOPS["tile"]
            out.text(f"{d}/tile-{preset}.{simulator}.v", converted(design, top, simulator))
            out.json(f"{d}/tile-{preset}.{simulator}.json", {"config": cfg, "key": cfg.key(), "toplevel": top,
                                                             "input_registers": registered})
    # the UART top as TileSim(cfg, sim, top="uart") builds it (tests/test_host_bridge.py,
    # tests/test_compute_sim.py::test_vop_over_uart: the tiny tile)
    cfg = lpu_arch.config.TileConfig.tiny()
    for simulator in ("verilator", "icarus"):
        design, registered = sim.harness.runner.simulated_design(
            lambda: hdl.top.host_bridge.UartTile(cfg, sim.harness.runner.UART_SIM_DIVISOR), simulator)
        top = sim.harness.runner.TOPS["uart"]
        out.text(f"{d}/uart-tiny.{simulator}.v", converted(design, top, simulator))
        out.json(f"{d}/uart-tiny.{simulator}.json", {"config": cfg, "toplevel": top, "input_registers": registered,
                                                     "divisor": sim.harness.runner.UART_SIM_DIVISOR})
    # systems as SystemSim builds them (hdl.top.system.System with link_latencies, no input registers)
    for name, cfg, tiles, latency, simulator in system_builds(full):
        t0 = time.perf_counter()
        lat = hdl.top.system.link_latencies(cfg, tiles, latency)
        top = sim.harness.runner.SYSTEM_TOPLEVEL
        out.text(f"{d}/system-{name}.{simulator}.v",
                 converted(lambda: hdl.top.system.System(cfg, tiles, lat), top, simulator))
        out.json(f"{d}/system-{name}.{simulator}.json", {"config": cfg, "key": cfg.key(), "tiles": tiles,
                                                         "latency": lat, "toplevel": top})
        say(f"    system {name} ({simulator}): {time.perf_counter() - t0:.1f} s")


# ==== part 7: RTLIL of the large presets =====================================================================
def part_rtlil(out: Out, full: bool) -> None:
    """hdl.flows.size.elaborate (``python -m hdl.flows.size --config P``) with Yosys replaced by a sha256 of
    each module's RTLIL (hdl.flows.size._rtlil: rtlil.convert_fragment of the module's netlist, memory
    initialisation as one constant): per module, in elaboration order, and of them all."""
    for preset in ("full_scale",) + (("lp30",) if full else ()):
        t0 = time.perf_counter()
        modules = []

        def digest_only(il: str):
            h = sha256(il)
            modules.append({"rtlil_bytes": len(il), "rtlil_sha256": h})
            return f"/* RTLIL {len(il)} bytes, sha256 {h} */\n", 0

        saved = hdl.flows.size._yosys
        hdl.flows.size._yosys = digest_only
        try:
            report = hdl.flows.size.elaborate(lpu_arch.config.TileConfig.preset(preset), want_verilog=True)
        finally:
            hdl.flows.size._yosys = saved
        names = list(report["modules"])
        for name, m in zip(names, modules):
            m["module"] = name
            m["instances"] = report["modules"][name]["instances"]
        d = f"7_rtlil/{preset}"
        out.json(f"{d}.json", {"rtlil_sha256": sha256("".join(m["rtlil_sha256"] for m in modules)),
                               "modules": modules, "report": {k: v for k, v in report.items()
                                                              if k not in ("verilog", "modules")}})
        out.text(f"{d}.size.v", report["verilog"])     # the module digests and the top hdl.flows.size writes
        say(f"    {preset}: {time.perf_counter() - t0:.1f} s")


# ==== part 8: on chip (attention, the token loop) =============================================================
def part_on_chip(out: Out, full: bool) -> None:
    # `lpu bench`'s attention cycle rows (sim.bench.attention.cycle_rows) and token loop rows
    # (sim.bench.token_loop.token_loop_rows): every golden-model run of their programs
    with recording(firmware_gen.golden.archmodel.run) as calls, captured() as buf:
        attention = sim.bench.attention.cycle_rows()
        loop = sim.bench.token_loop.token_loop_rows()
    d = "8_on_chip"
    out.json(f"{d}/attention_rows.json", attention)
    out.json(f"{d}/token_loop_rows.json", loop)
    out.stdout(f"{d}/stdout.txt", buf)
    save_calls(out, f"{d}/runs", need_calls(calls, "run", len(attention) + len(loop)))


# ==== main ===================================================================================================
PARTS = {1: ("ffn_suite", part_ffn_suite), 2: ("trays", part_trays), 3: ("moe", part_moe),
         4: ("decode", part_decode), 5: ("lp30", part_lp30), 6: ("verilog", part_verilog),
         7: ("rtlil", part_rtlil), 8: ("on_chip", part_on_chip)}


def say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("outdir", type=pathlib.Path)
    ap.add_argument("--full", action="store_true", help="add the slow extras (8-tile systems, lp30 RTLIL, lpu plan)")
    ap.add_argument("--parts", default=",".join(map(str, PARTS)), help="comma-separated part numbers (default: all)")
    args = ap.parse_args()
    parts = [int(p) for p in args.parts.split(",") if p]
    if any(p not in PARTS for p in parts):
        ap.error(f"--parts: choose from {', '.join(map(str, PARTS))}")
    if args.outdir.exists() and any(args.outdir.iterdir()):
        ap.error(f"{args.outdir} exists and is not empty")
    args.outdir.mkdir(parents=True, exist_ok=True)

    check_origin()
    say(f"snapshot of {REPO}: firmware_gen from {os.path.dirname(firmware_gen.__file__)}, "
        f"hdl from {os.path.dirname(hdl.__file__)}, sim from {os.path.dirname(sim.__file__)}")
    assert os.path.realpath(firmware_gen.__file__).startswith(os.path.realpath(REPO) + os.sep)
    out = Out(args.outdir)
    out.json("SNAPSHOT.json", {"parts": [f"{p} {PARTS[p][0]}" for p in parts], "full": args.full,
                               "python": sys.version.split()[0], "amaranth": amaranth.__version__,
                               "numpy": np.__version__})
    total = time.perf_counter()
    for p in parts:
        name, fn = PARTS[p]
        t0, c0 = time.perf_counter(), time.process_time()
        say(f"[part {p} {name}] ...")
        fn(out, args.full)
        check_origin()                     # (functions import some project modules lazily)
        say(f"[part {p} {name}] {time.perf_counter() - t0:.1f} s (cpu {time.process_time() - c0:.1f} s)")
    n = out.index()
    size = sum(f.stat().st_size for f in args.outdir.rglob("*") if f.is_file())
    say(f"snapshot: {n} files, {size / 1e6:.1f} MB in {args.outdir}; {time.perf_counter() - total:.1f} s "
        f"(cpu {time.process_time():.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
