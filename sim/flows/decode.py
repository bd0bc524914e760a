"""The decode loop (``lpu decode``, ``docs/afd.md``): a small decoder generates tokens
greedily, attention on the host (``firmware_gen/host/decoder.py``), every layer's FFN on
one tile that holds every layer (``firmware_gen/compiler/resident.py``) or on a tray.

``run_golden`` runs the loop on the golden model, ``run_rtl`` on the RTL (``sim/tb/decode.py``:
the host runs inside the testbench); ``check`` compares a run with the golden one and the
compiler; ``sim/flows/decode_report.py`` makes ``lpu decode``'s reports of them."""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from firmware_gen.golden import archmodel
from firmware_gen.host.decoder import Decoder, IntFfn, calibrate, generate, synthetic, teacher_forced
from firmware_gen.compiler import CompileError
from firmware_gen.golden.moe import MoeSpec, MoeStages, moe_int
from firmware_gen.compiler.moe_tray import compile_moe
from firmware_gen.golden.numerics import FfnSpec, ffn_int
from firmware_gen.compiler.resident import ResidentModel, compile_resident, run_layer
from firmware_gen.compiler.system import wall_cycles
from firmware_gen.scoreboard import (Observed, compare, ffn_reference, golden_observed, golden_reference,
                                     manifest_promise, moe_reference, promise, row_vectors, stage_outputs)
import firmware_gen.compiler.tray
from firmware_gen.compiler.resident_tray import compile_resident_tray
from firmware_gen.compiler.tray import compile_tray_layer, tray_config
from firmware_gen.steady_chart import run_timeline
from lpu_arch import TileConfig
from lpu_arch.topology import Topology

from sim.harness.clocks import clock_draw, wire_latencies
from sim.harness.runner import SYSTEM_TIMESCALE, TIMESCALE, SystemSim, TileSim, run_testbench
from sim.harness.scoreboard import check_wall, hac_frame, tile_observed

SYNTHETIC = dict(vocab=64, H=8, I=16, layers=2, heads=2, seed=0)   # the tiny test model
# The tiny tile, deep enough for every layer of a 2-layer model resident (lpu decode's tile).
DECODE_TILE = ("mem_depth=256", f"iq_depth={TileConfig.TRAY_IQ_DEPTH}", "vxm_param_depth=32")
# The tiny tile deep enough for the default MoE decoder (lpu decode --experts 4 --tiles 4, 2 layers)
# with every layer resident on the tray: 72 of its rows per MEM slice.
TRAY_MOE_TILE = ("mem_depth=128",)
NOT_FFN_INT = "y is not the integer FFN's"      # a loop's problem when an FFN's y differs from ffn_int's


@dataclass
class DecodeSetup:
    """A calibrated model, its layers placed on one tile, and the generation to run."""
    args: dict                 # what rebuilds it (decode_setup's arguments)
    model: Decoder
    resident: ResidentModel
    prompt: list
    tokens: int

    @property
    def cfg(self) -> TileConfig:
        return self.resident.config


def decode_setup(config: dict, model: dict | None = None, prompt=(1, 2, 3), tokens: int = 8,
                 out_scale_per_row: bool = False) -> DecodeSetup:
    """``config``: the tile (``TileConfig.to_dict()``); ``model``: ``synthetic``'s arguments
    (default: :data:`SYNTHETIC`).  Deterministic: the testbench rebuilds the same setup from
    the same arguments."""
    margs = dict(SYNTHETIC, **(model or {}))
    cfg = TileConfig.from_dict(config)
    m = calibrate(synthetic(**margs), out_scale_per_row=out_scale_per_row, dtype=cfg.mxm_dtype)
    rm = compile_resident(m.specs, cfg)
    args = {"config": cfg.to_dict(), "model": margs, "prompt": [int(t) for t in prompt], "tokens": int(tokens),
            "out_scale_per_row": bool(out_scale_per_row)}
    return DecodeSetup(args, m, rm, list(args["prompt"]), args["tokens"])


def first_memory(rm: ResidentModel, rows: dict) -> dict:
    """The first run's MEM rows: every weight row, then the layer's x."""
    out = rm.first_job_memory()
    for m, r in rows.items():
        out.setdefault(m, {}).update(r)
    return out


def golden_tile(rm: ResidentModel):
    """``(tile, runs)``: ``tile(layer, xq)`` runs one FFN on the golden model, its SRAM kept
    from run to run, and appends to ``runs`` its layer, x, y, cycles, MEM writes and busy
    counters."""
    runs, mem = [], None

    def tile(l, xq):
        nonlocal mem
        res, y = run_layer(rm, l, xq, mem)
        mem = res.memory
        runs.append({"layer": l, "x": xq.tolist(), "y": y[0].tolist(), "cycles": res.cycles,
                     "events": [e.as_tuple() for e in res.events], "busy": res.busy})
        return y[0]
    return tile, runs


def run_golden(setup: DecodeSetup) -> dict:
    """The loop with the golden model as the tile: per FFN run its layer, x, y, cycles and
    MEM writes; the new tokens; the host's wall seconds."""
    model, timing = setup.model, {}
    tile, runs = golden_tile(setup.resident)
    tokens = generate(model, setup.prompt, setup.tokens, IntFfn(model, tile), timing)
    return {"tokens": tokens, "runs": runs, "host_s": timing.get("host_s", 0.0),
            "host_segments_s": timing.get("segments", []), "engine": "golden model"}


def run_rtl(setup: DecodeSetup, sim: str = "verilator", progress=None, runs: int = 0) -> dict:
    """The loop on the RTL tile in one simulator invocation; ``progress`` as for
    ``TileSim.run``, with ``runs`` FFN runs as its jobs."""
    tile = TileSim(setup.cfg, sim)
    t0 = time.perf_counter()
    out, _ = run_testbench(tile, "sim.tb.decode", {"config": setup.cfg.to_dict(), "decode": setup.args}, "decode", TIMESCALE,
                  progress, runs)
    res = out[0]
    res["engine"], res["sim"], res["wall_s"] = "RTL", sim, time.perf_counter() - t0
    return res


def check(setup: DecodeSetup, run: dict, golden: dict | None = None) -> list[str]:
    """Every mismatch of a loop's run against the golden loop and the compiler (empty = PASS)."""
    problems = []
    golden = golden or run_golden(setup)
    rm, model = setup.resident, setup.model
    if run["tokens"] != golden["tokens"]:
        problems.append(f"tokens {run['tokens']}, golden model {golden['tokens']}")
    if len(run["runs"]) != len(golden["runs"]):
        problems.append(f"{len(run['runs'])} FFN runs, golden model {len(golden['runs'])}")
    source = "golden model" if run.get("engine") == "golden model" else "hardware"
    for n, (r, g) in enumerate(zip(run["runs"], golden["runs"])):
        l = g["layer"]
        ly = rm.layers[l]
        where = f"run {n} (position {n // len(rm.layers)}, layer {l})"
        if r["x"] != g["x"]:
            problems.append(f"{where}: x differs from the golden loop's")
        # The testbench reads y back from the layer's rows (not every row: no read-back part)
        # and STATUS but not the fault masks.
        seen = Observed(source, writes=r["events"], cycles=r["cycles"], status=r.get("status"),
                        outputs=row_vectors("y", r["y"]))
        reference = ffn_reference(ffn_int(ly.spec, np.asarray(r["x"], np.int64)[None]), NOT_FFN_INT)
        problems += [p.at(where) for p in compare(seen, promise(ly.predict(r["x"]), ly.manifest.cycles), reference)]
    problems += _varying((g["layer"], r["cycles"]) for r, g in zip(run["runs"], golden["runs"]))
    if "loaded" in run:
        once, *later = run["loaded"]
        x_bytes = max((sum(len(v) for rows in ly.x_image(np.zeros(model.H)).values() for v in rows.values())
                       for ly in rm.layers), default=0)
        worst = max(later, default=0)
        if worst > x_bytes + 8:          # x's rows and, on a change of layer, the entry word
            problems.append(f"a later run loaded {worst} bytes: more than the layer's input ({x_bytes} bytes) "
                            "and the entry (the weights must load once)")
        if once < rm.loaded_bytes()["weights"]:
            problems.append(f"the first run loaded {once} bytes, less than the weights' {rm.loaded_bytes()['weights']}")
    return problems


def _varying(per_run, where: str = "") -> list[str]:
    """``(layer, cycles)`` of a loop's runs: every layer whose cycles differ between tokens."""
    per_layer = {}
    for l, cycles in per_run:
        per_layer.setdefault(l, set()).add(cycles)
    return [f"layer {l}: cycle counts differ between tokens{where}: {sorted(cs)}" for l, cs in per_layer.items()
            if len(cs) != 1]


# ---- dense layers larger than one tile, on a tray (golden model) ------------------------------
def _tray_loop(model: Decoder, prompt, tokens: int, ffn, runs: list, problems: list, golden: str, **report) -> dict:
    """A tray loop's report: tokens generated with ``ffn`` (which fills ``runs`` and
    ``problems``) against the integer golden model's (named ``golden``), and every layer's
    cycles the same for every token."""
    timing = {}
    new = generate(model, prompt, tokens, ffn, timing)
    ref = generate(model, prompt, tokens, IntFfn(model), {})
    problems += [] if new == ref else [f"tokens {new}, with {golden} {ref}"]
    problems += _varying((r["layer"], (r["cycles"], r["wall_cycles"])) for r in runs)
    return {"tokens": new, "runs": runs, "problems": problems, "host_s": timing.get("host_s", 0.0),
            "engine": "golden model", **report}


def tray_layer_problems(man, res, spec, xq, lanes: int, where: str) -> tuple[np.ndarray, list]:
    """A dense tray layer's golden run on ``xq`` (``archmodel.run_system``'s results) against
    its manifest ``man``: every tile's write places, cycles and busy counters (the layer was
    compiled once, for x = 0: the places and cycles of its writes hold for every token, their
    values do not), and y against ``numerics.ffn_int``; ``(y, problems)``, located at ``where``."""
    problems = []
    for t, (r, m) in enumerate(zip(res, man.tile)):
        problems.extend(p.at(f"{where}, tile {t}") for p in
                        compare(golden_observed(r), manifest_promise(m), skip=("write values",)))
    # Through the module, so that a test can replace tray_output (tests/sim/test_decode.py).
    y = firmware_gen.compiler.tray.tray_output(man, [r.memory for r in res], lanes, spec.H)[0]
    problems.extend(p.at(where) for p in compare(
        Observed("golden model", outputs=row_vectors("y", y)),
        ffn_reference(ffn_int(spec, np.asarray(xq, np.int64)[None]), NOT_FFN_INT)))
    return y, problems


def run_dense_tray(model: Decoder, prompt, tokens: int, cfg: TileConfig | None = None, tiles: int = 8,
                   resident: bool = True) -> dict:
    """The loop of a calibrated dense decoder, every FFN on ``tiles`` tiles by the system
    golden model.  ``resident``: every layer placed on the tray at once
    (``resident_tray.compile_resident_tray``: weights loaded once, each run writes only x; a
    ``CompileError`` when it does not fit), else each run loads its layer.  Every run's tile
    cycles and write places are checked against the compiler, y against ``numerics.ffn_int``."""
    cfg = cfg or TileConfig.default()
    for l, spec in enumerate(model.specs):
        if not isinstance(spec, FfnSpec):
            raise ValueError(f"layer {l} is not a dense FFN: run_dense_tray runs dense decoders only")
    memories, loaded = None, None
    if resident:
        rt = compile_resident_tray(model.specs, cfg, tiles)
        layers, loaded = rt.layers, rt.weight_bytes()
        memories = [{m: a.copy() for m, a in mem.items()} for mem in rt.memory]
    else:
        layers = []
        for l, spec in enumerate(model.specs):
            try:
                layers.append(compile_tray_layer(spec, cfg, tiles))
            except CompileError as e:
                raise CompileError(f"layer {l}: {e}") from None
    peer = Topology(tiles).peer
    runs, problems = [], []

    def tray(l, xq):
        nonlocal memories
        tl, spec = layers[l], model.specs[l]
        progs, man = tl.programs_for(xq, memories), tl.manifest
        res = archmodel.run_system(progs, peer, man.min_distance)
        if resident:
            memories = [r.memory for r in res]
        y, found = tray_layer_problems(man, res, spec, xq, progs[0].config.lanes,
                                       f"position {len(runs) // len(layers)}, layer {l}")
        problems.extend(found)
        runs.append({"layer": l, "cycles": max(r.cycles for r in res),
                     "wall_cycles": wall_cycles(progs, [r.cycles for r in res]), "bytes_in": tl.x_bytes(),
                     "timeline": [run_timeline(progs, [r.cycles for r in res])],
                     "bytes_out": sum(len(m.outputs) for m in man.tile) * progs[0].config.lanes})
        return y

    return _tray_loop(model, prompt, tokens, IntFfn(model, run=tray), runs, problems, "ffn_int", tiles=tiles,
                      resident=resident, loaded_once_bytes=loaded)


def run_dense_tray_any(model: Decoder, prompt, tokens: int, cfg: TileConfig | None = None, tiles: int = 8) -> dict:
    """Resident when the model fits the tray, else not; ``not_resident`` says why."""
    try:
        return {**run_dense_tray(model, prompt, tokens, cfg, tiles, resident=True), "not_resident": None}
    except CompileError as e:
        return {**run_dense_tray(model, prompt, tokens, cfg, tiles, resident=False), "not_resident": str(e)}


def moe_decoder(model_args: dict, cfg: TileConfig, tiles: int, positions: int = 32) -> tuple[Decoder, dict, object]:
    """The synthetic MoE decoder ``model_args`` calibrated for a tray of ``tiles`` tiles of
    ``cfg``, with the compiler's choice of activation tables: one per expert
    (``MoeSpec.from_float(tables="expert")``) when every layer then fits the tray resident,
    else one per layer (``"layer"``) when that fits (each tile holds one table per layer
    then), else per expert (the layers then run one at a time).  Returns the model,
    ``{"chosen", "why", "accuracy"}`` (the accuracy against float of what was tried:
    ``teacher_forced`` over ``positions`` tokens, top-1 agreement and the lowest layer's mean
    FFN cosine) and the model's ``ResidentTray`` (None: it is not resident), for
    :func:`run_moe_tray_any`'s ``rt``."""
    def accuracy(m):
        r = teacher_forced(m, np.random.default_rng(7).integers(0, m.vocab, positions))
        return {"top1_agreement": r["top1_agreement"], "ffn_cosine_min": float(min(r["layer_cosine_mean"]))}
    per_expert = calibrate(synthetic(**model_args))
    tried = {"expert": accuracy(per_expert)}
    try:
        rt = compile_resident_tray(per_expert.specs, cfg, tiles)
        return per_expert, {"chosen": "expert", "why": "every layer fits the tray with a table per expert",
                            "accuracy": tried}, rt
    except CompileError as e:
        if "activation tables" not in str(e):
            return per_expert, {"chosen": "expert", "why": f"not resident: {e}", "accuracy": tried}, None
        why = str(e)
    per_layer = calibrate(synthetic(**model_args), moe_tables="layer")
    tried["layer"] = accuracy(per_layer)
    try:
        rt = compile_resident_tray(per_layer.specs, cfg, tiles)
    except CompileError as e:
        return per_expert, {"chosen": "expert", "why": f"not resident, even with a table per layer: {e}",
                            "accuracy": tried}, None
    return per_layer, {"chosen": "layer", "why": f"with a table per expert, {why}", "accuracy": tried}, rt


class _RtlTrayCheck:
    """``run_tray_rtl``'s checks of the RTL's runs, in order, against the system golden model
    of the same programs and the compiler; ``problems`` collects what they find, ``timed``
    each round's tiles, links and host bus cycles in time (``lpu decode --chart``)."""

    def __init__(self, tiles: int, lanes: int, problems: list):
        self.peer, self.lanes, self.problems = Topology(tiles).peer, lanes, problems
        self.n_run, self.timed = 0, []

    def round(self, where, progs, res, gold, promised, x_bytes) -> tuple:
        """One armed run: every tile's observation against ``gold`` and ``promised``, the HAC
        lock, the wall cycles, y read back against the traced writes, the bytes the host
        wrote; ``(cycles, wall, predicted wall, bytes sent, y bytes, host bus cycles)``."""
        problems = self.problems
        for t, obs in enumerate(res["tiles"]):
            problems.extend(p.at(f"{where}, tile {t}") for p in compare(tile_observed(obs), golden_reference(gold[t]),
                                                                        promised[t]))
            if not obs["c2c"]["locked"] or obs["c2c"]["lock_lost"]:
                problems.append(f"{where}, tile {t}: the HAC lock was lost")
        wall, predicted, wall_problems = check_wall(progs, res)
        problems.extend(p.at(where) for p in wall_problems)
        if not res["traced_outputs_equal"]:
            problems.append(f"{where}: y read back differs from the traced writes'")
        loaded = res["loaded"]
        sent = {"x": 0, "routing": 0, "entry": 0, "reloaded": 0, "first_load": loaded["bytes"].get("first_load", 0)}
        if not loaded["first"]:
            for t, pre in enumerate(loaded["pre_arm"]):
                if pre["between"]:
                    problems.append(f"{where}, tile {t}: fault between runs {self.n_run - 1} and {self.n_run} (STATUS "
                                    f"read before arming): {', '.join(pre['between'])}")
                if not pre["hac_locked"]:
                    problems.append(f"{where}, tile {t}: HAC not locked before arming")
            b = loaded["bytes"]
            sent.update(x=b["x"], routing=b["routing"], entry=b["entry"],
                        reloaded=b["weights"] + b["instructions"] + b["vxm"])
            if b["x"] != x_bytes:
                problems.append(f"{where}: {b['x']} bytes of x written, the compiler's x rows hold {x_bytes}")
        self.n_run += 1
        self.timed.append({**run_timeline(progs, [o["cycles"] for o in res["tiles"]], *hac_frame(progs, res)),
                           "host": [loaded.get("host_cycles", 0), res["y_cycles"]]})
        return max(o["cycles"] for o in res["tiles"]), wall, predicted, sent, res["y_bytes"], \
            loaded.get("host_cycles", 0) + res["y_cycles"]

    def moe_run(self, where, r, lspec, layer, cfg) -> tuple:
        """A MoE layer's run, round by round (``layer``: the resident layer, None: placed for
        the token), and every expert's output against ``moe_int``: the rounds' sums."""
        tiles = len(r["results"][0]["tiles"])
        if layer is not None:            # resident: the layer's programs with this token's x
            idx, xq = np.atleast_2d(r["indices"]), np.atleast_2d(r["x"])
            mt, progs = layer.for_input(xq), layer.programs_for(xq)
        else:
            mt, idx, xq = compile_moe_run(lspec, r["x"], r["indices"], cfg, tiles)
            progs = mt.programs()
        x_bytes = sum(len(h.x_rows) for h in mt.hosts) * self.lanes
        sums = [self.round(f"{where}, round {k}", progs, res,
                           archmodel.run_system(progs, self.peer, bases=mt.bases(asg)), mt.promised(asg), x_bytes)
                for k, (asg, res) in enumerate(zip(mt.rounds(idx), r["results"]))]
        seen = stage_outputs(MoeStages(xq, idx, np.asarray([r["routed"]]), np.asarray([r["shared"]])))
        self.problems.extend(p.at(where) for p in compare(Observed(outputs=seen), moe_reference(moe_int(lspec, xq, idx))))
        cycles, wall, predicted = (sum(v[i] for v in sums) for i in range(3))
        sent = {k: sum(v[3][k] for v in sums) for k in sums[0][3]}
        return cycles, wall, predicted, sent, sum(v[4] for v in sums), sum(v[5] for v in sums)

    def dense_run(self, where, r, spec, layer) -> tuple:
        """A dense layer's run: the layer is compiled once, its writes promised for x = 0, so
        the golden model of this token's programs checks the writes, the compiler's promise
        the cycles and busy counters; y against ``ffn_int``."""
        progs, man = layer.programs_for(r["x"]), layer.manifest
        got = self.round(where, progs, r["result"], archmodel.run_system(progs, self.peer, man.min_distance),
                         [promise(cycles=m.cycles, busy=m.busy) for m in man.tile], layer.x_bytes())
        self.problems.extend(p.at(where) for p in compare(
            Observed(outputs=row_vectors("y", r["y"])),
            ffn_reference(ffn_int(spec, np.asarray(r["x"], np.int64)[None]), NOT_FFN_INT)))
        return got


def run_tray_rtl(model_args: dict, prompt, tokens: int, cfg: TileConfig, tiles: int = 2,
                 sim: str = "verilator", clock_seed: int = 1, progress=None, inject_between=None) -> dict:
    """The loop of ``synthetic(**model_args)`` (dense, or MoE with ``experts``), every FFN on
    ``tiles`` RTL tiles on their own clocks (from ``clock_seed``), the host in the testbench
    (``sim/tb/decode_tray.py``), one simulator invocation on a tray that never stops: one
    reset, clock start and HAC lock before the first load, then per run only x, the base
    registers and the entry written (a dense model's layers resident when they fit the tray,
    ``resident_tray.compile_resident_tray``), STATUS read before arming, y read back.  Each run (each
    MoE round) is checked against the golden loop and the system golden model of the same
    programs: every tile's writes, cycles, busy counters and faults, y (every expert's
    output) bit-exact, the wall cycles (``scoreboard.check_wall``), no fault between runs,
    the HAC locked throughout, x's bytes as compiled.  ``inject_between``: flits flipped
    while the tray is idle (``decode_tray``'s).  Returns the golden loop's report with the
    RTL's problems and, per run, its cycles, wall cycles and bytes to and from the tray."""
    moe = bool(model_args.get("experts"))
    model, tables, rt = moe_decoder(model_args, cfg, tiles) if moe else \
        (calibrate(synthetic(**model_args)), None, None)
    golden = (run_moe_tray_any(model, prompt, tokens, cfg, tiles, rt=rt) if moe else
              run_dense_tray_any(model, prompt, tokens, cfg, tiles))
    if golden["resident"]:          # the RTL's programs
        layers = (rt or compile_resident_tray(model.specs, cfg, tiles)).layers
    else:
        layers = [None if moe else compile_tray_layer(s, cfg, tiles) for s in model.specs]
    tcfg = tray_config(cfg, tiles)
    lat, ppm = wire_latencies(tcfg, tiles, clock_seed), clock_draw(tcfg, tiles, clock_seed)
    system = SystemSim(tcfg, tiles, lat, sim)
    spec = {"config": tcfg.to_dict(), "tiles": tiles,
            "decode": {"config": cfg.to_dict(), "tiles": tiles, "model": model_args, "prompt": [int(t) for t in prompt],
                       "tokens": int(tokens), "ppm": ppm, "clock_seed": clock_seed,
                       "moe_tables": tables["chosen"] if tables else "expert",
                       "inject_between": list(inject_between or [])}}
    out, _ = run_testbench(system, "sim.tb.decode_tray", spec, "decode-tray", SYSTEM_TIMESCALE, progress,
                  sum(r.get("rounds", 1) for r in golden["runs"]))
    rtl = out[0]
    problems = list(golden["problems"])
    if rtl["tokens"] != golden["tokens"]:
        problems.append(f"tokens {rtl['tokens']} on the RTL, golden loop {golden['tokens']}")
    if rtl["resets"] != [1] * tiles or rtl["clock_starts"] != [1] * tiles:
        problems.append(f"resets {rtl['resets']} and clock starts {rtl['clock_starts']} per tile: the tray stopped "
                        "after its first load")
    check = _RtlTrayCheck(tiles, tcfg.lanes, problems)
    per_run = []
    for n, (r, g) in enumerate(zip(rtl["runs"], golden["runs"])):
        l = r["layer"]
        where = f"run {n} (position {n // len(model.specs)}, layer {l})"
        if moe:
            if r["indices"] != g["experts"]:
                problems.append(f"{where}: experts {r['indices']} on the RTL, golden loop {g['experts']}")
            got = check.moe_run(where, r, model.specs[l], layers[l], cfg)
        else:
            got = check.dense_run(where, r, model.specs[l], layers[l])
        cycles, wall, predicted, sent, y_bytes, host_cycles = got
        g.update({"rtl_cycles": cycles, "rtl_wall_cycles": wall, "rtl_bytes_in": sent, "rtl_bytes_out": y_bytes,
                  "rtl_host_cycles": host_cycles})
        g["rtl_timeline"], check.timed = check.timed, []
        per_run.append((l, (cycles, predicted)))
    if len(rtl["runs"]) != len(golden["runs"]):
        problems.append(f"{len(rtl['runs'])} FFN runs on the RTL, golden loop {len(golden['runs'])}")
    problems += _varying(per_run, " on the RTL")
    return {**golden, "problems": problems, "engine": "RTL", "sim": sim, "rtl_tokens": rtl["tokens"], "moe_tables": tables,
            "clock_seed": clock_seed, "ppm": ppm, "wire_latencies": [[*p, lat[p]] for p in sorted(lat)],
            "first_load_bytes": rtl["first_load_bytes"], "resets": rtl["resets"], "clock_starts": rtl["clock_starts"]}


# ---- MoE layers on a tray (golden model) ------------------------------------------------------
MOE_SYNTHETIC = dict(vocab=256, H=64, I=64, layers=2, heads=4, seed=0, experts=8, top_k=2, shared=1)
# The LPX's steady state: a MoE decoder of 4 layers, 16 routed experts of H=64, I=128 (the MoE
# bench's expert shape), top-2, one shared, every layer resident on STEADY_TILES default tiles
# (1.68 MB of weights on the tray's 2 MiB).  Grown: vxm_param_depth 64 -> 128, because each tile
# holds 4 layers x (2 experts x 12 entries, one per 16-lane block of I and H, + 2 of its share of
# the shared expert) = 104 parameter entries.
STEADY_MOE = dict(vocab=256, H=64, I=128, layers=4, heads=4, seed=0, experts=16, top_k=2, shared=1)
STEADY_SETS, STEADY_TILES = ("vxm_param_depth=128",), 8


def per_position(runs: list[dict], layers: int, key: str = "cycles") -> list[int]:
    """``key`` of a loop's runs (one per position and layer, in order) summed per position."""
    return [sum(r[key] for r in runs[p * layers:(p + 1) * layers]) for p in range(len(runs) // layers)]


def compile_moe_run(spec, xq, indices, cfg: TileConfig, tiles: int, mapping: str = "ep"):
    """One token's MoE run: ``(MoeTray, indices (1, k), x (1, H))``, at a capacity that
    takes every routing in one round."""
    idx, xq = np.atleast_2d(indices), np.atleast_2d(xq)
    return compile_moe(spec, xq, cfg, tiles, capacity=min(spec.top_k, spec.E // tiles), mapping=mapping), idx, xq


def moe_stages(mt, spec, xq, idx, rounds):
    """The experts' outputs read from each round's final MEM contents (``rounds``:
    ``[(assignment, memories per tile)]``) as ``moe.MoeStages`` for the host's ``combine``."""
    ref = moe_int(spec, xq, idx)
    routed = np.zeros(ref.routed.shape, np.int64)
    shared = np.zeros(ref.shared.shape, np.int64)
    for asg, memories in rounds:
        out, sh = mt.outputs(asg, memories)
        for (b, e), y in out.items():
            routed[b, list(idx[b]).index(e)] = y
        if sh is not None:
            shared[:, 0] = sh
    return MoeStages(ref.x, ref.indices, routed.astype(ref.routed.dtype), shared.astype(ref.shared.dtype))


def run_moe_tray(model: Decoder, prompt, tokens: int, cfg: TileConfig | None = None, tiles: int = 8,
                 mapping: str = "ep", resident: bool = False, rt=None) -> dict:
    """The loop of a calibrated MoE decoder, every MoE layer on ``tiles`` tiles by the
    system golden model.  ``resident``: every layer placed on the tray at once
    (``resident_tray.compile_resident_tray``, a ``CompileError`` when it does not fit): the
    tray's memories carry over from run to run and a run writes only x, the routing (base
    registers) and the entry; else per token and layer ``compile_moe`` places the token
    and the layer's experts (each run loads its layer).  At capacity ``min(top_k, experts
    per tile)`` every routing takes one round, so a layer's cycles are the same for every
    token.  Each run is checked against the compiler and ``moe.moe_int``."""
    cfg = cfg or TileConfig.default()
    runs, problems = [], []
    if resident and rt is None:    # (rt: the model's ResidentTray compiled already, e.g. by moe_decoder)
        rt = compile_resident_tray(model.specs, cfg, tiles)
    rt = rt if resident else None
    memories = [{m: a.copy() for m, a in mem.items()} for mem in rt.memory] if rt else None

    def tray(l, xq, indices):
        nonlocal memories
        spec = model.specs[l]
        if not isinstance(spec, MoeSpec):
            raise ValueError(f"layer {l} is not a MoE layer: run_moe_tray runs MoE decoders only")
        if rt is not None:
            ly = rt.layers[l]
            idx, xq = np.atleast_2d(indices), np.atleast_2d(xq)
            mt = ly.for_input(xq)
            sent = {"x": ly.x_bytes(), "routing": 4 * tiles * len(mt.registers) * 2, "entry": 4 * tiles}
        else:
            mt, idx, xq = compile_moe_run(spec, xq, indices, cfg, tiles, mapping)
            progs = mt.programs()
            sent = {"x": int(spec.H * tiles), "routing": 0, "entry": 0}
        man = mt.manifest()
        where, cycles, wall, rounds = f"position {len(runs) // len(model.layers)}, layer {l}", [], 0, []
        timeline = []           # per round: its tiles and links in time (lpu decode --chart)
        for asg in mt.rounds(idx):
            if rt is not None:            # (a second round starts from the first's memories)
                progs = ly.programs_for(xq, memories)
            res = archmodel.run_system(progs, Topology(tiles).peer, bases=mt.bases(asg))
            problems.extend(p.at(where) for p in mt.round_problems(asg, res))
            rounds.append((asg, [r.memory for r in res]))
            cycles.append(max(r.cycles for r in res))
            wall += wall_cycles(progs, [r.cycles for r in res])
            timeline.append(run_timeline(progs, [r.cycles for r in res], assignment=asg))
            if memories is not None:
                memories = [r.memory for r in res]
        stages = moe_stages(mt, spec, xq, idx, rounds)
        problems.extend(p.at(where) for p in compare(Observed("golden model", outputs=stage_outputs(stages)),
                                                     moe_reference(moe_int(spec, xq, idx))))
        runs.append({"layer": l, "experts": [int(e) for e in idx[0]], "rounds": len(cycles), "cycles": sum(cycles),
                     "wall_cycles": wall, "per_tile_cycles": list(man.cycles), "bytes": sent, "timeline": timeline,
                     "bytes_in": sum(sent.values()),
                     "bytes_out": int(spec.H * (spec.top_k + len(spec.shared)))})
        return stages

    return _tray_loop(model, prompt, tokens, IntFfn(model, run_moe=tray), runs, problems, "moe_int", tiles=tiles,
                      mapping="ep" if rt else mapping, resident=rt is not None,
                      loaded_once_bytes=rt.weight_bytes() if rt else None,
                      holds=rt.summary() if rt else None)


def run_moe_tray_any(model: Decoder, prompt, tokens: int, cfg: TileConfig | None = None, tiles: int = 8,
                     rt=None) -> dict:
    """Every layer resident when the model fits the tray (:func:`run_moe_tray`; ``rt``: its
    ``ResidentTray`` compiled already), else each run loading its layer; ``not_resident``
    says why."""
    try:
        return {**run_moe_tray(model, prompt, tokens, cfg, tiles, resident=True, rt=rt), "not_resident": None}
    except CompileError as e:
        return {**run_moe_tray(model, prompt, tokens, cfg, tiles), "not_resident": str(e)}
