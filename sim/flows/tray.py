"""One FFN split across a tray of tiles, each on its own clock, on the RTL: ``lpu tray``
(``make sim-tray``).  Every tile gets a random clock offset within ``max_ppm`` and a
random phase, every link a random wire latency in the declared range; every tile's
writes and cycles are checked against the compiler and the multi-tile golden model."""

from __future__ import annotations

import functools
import hashlib
import json
import sys
import time
from dataclasses import dataclass

import numpy as np

from lpu_arch import ConfigError, TileConfig

from firmware_gen.golden import archmodel
from firmware_gen.compiler import CompileError
from firmware_gen.compiler.ffn import compile_ffn
from firmware_gen.compiler.ffn_example import example_ffn
from lpu_arch.hostmap import link_fault_names
from firmware_gen.golden.numerics import ffn_int
from lpu_arch.topology import Topology
from firmware_gen.compiler.tray import TrayManifest, compile_ffn_tray, tray_config, tray_output

from firmware_gen.scoreboard import Observed, compare, ffn_reference, golden_reference, manifest_promise, row_vectors

from sim.harness.clocks import TrayClocks
from sim.harness.runner import SystemSim, system_run
from sim.harness.scoreboard import check_wall, tile_observed, traced_memory
from sim.report import Report

PRESETS = ("tiny", "default")


@dataclass
class CompiledTray(TrayClocks):
    """An FFN compiled for a tray, with what a run on the RTL needs."""
    kind: str
    H: int
    I: int
    batch: int
    tiles: int
    preset: str
    seed: int
    base: TileConfig          # the tile as configured
    cfg: TileConfig           # with the tray's links
    topo: Topology
    spec: object              # numerics.FfnSpec
    x: np.ndarray             # int8 input, (batch, H)
    programs: list
    manifest: TrayManifest
    single: int | None        # predicted cycles of the same FFN on one tile (None: it does not fit)
    clock_seed: int = 1       # the wire latencies and every clock draw (ppm, phase) come from it

    @property
    def y_int8(self) -> np.ndarray:
        """The reference output: the integer FFN (``numerics.ffn_int``)."""
        return ffn_int(self.spec, self.x)

    def describe(self) -> list[str]:
        """Two lines: the tray, and the FFN with its traffic."""
        cfg, man = self.cfg, self.manifest
        return [f"tray: {self.tiles} {self.preset} tiles of {cfg.lanes} lanes, all-to-all ({len(self.topo.pairs)} "
                f"link{'s' if len(self.topo.pairs) > 1 else ''}), spec +-{cfg.max_ppm} ppm, wire latency {cfg.link_latency_min}..{cfg.link_latency_max} cycles",
                f"FFN: {self.kind}, H={self.H}, I={self.I}, "
                f"{'decode' if self.batch == 1 else f'batch {self.batch}'}; {man.transfers} h vectors over links, "
                f"SEND-to-RECV distance {man.min_distance} cycles"]

    def summary(self) -> dict:
        """The compilation as JSON-able data."""
        man = self.manifest
        return {"tiles": self.tiles, "kind": self.kind, "H": self.H, "I": self.I, "batch": self.batch,
                "config": self.preset, "seed": self.seed, "clock_seed": self.clock_seed,
                "links": len(self.topo.pairs),
                "predicted_cycles": man.cycles, "per_tile_predicted_cycles": [m.cycles for m in man.tile],
                "transfers": man.transfers, "min_distance": man.min_distance, "c2c_share": round(man.c2c_share, 4),
                "single_tile_cycles": self.single,
                "speedup": round(self.single / man.cycles, 3) if self.single else None}


def tray_tile_config(preset: str) -> TileConfig:
    """The tile preset a tray uses (the tiny tile with 512-instruction queues, deep enough
    for the tray's programs)."""
    if preset not in PRESETS:
        raise ConfigError(f"unknown tile preset {preset!r} for a tray; choose one of {', '.join(PRESETS)}")
    return TileConfig.tiny_tray() if preset == "tiny" else TileConfig.preset(preset)


TRAY_H, TRAY_I = 16, 32     # the default FFN: larger than one tiny tile's SRAM, fits a tray of 2, 4 or 8


def compile_tray(kind: str = "swiglu", H: int = TRAY_H, I: int = TRAY_I, tiles: int = 8, preset: str = "tiny",
                 seed: int = 1, batch: int = 1, clock_seed: int = 1, *, base: TileConfig | None = None,
                 example=None) -> CompiledTray:
    """Compile a random FFN (from ``seed``) or ``example`` (its ``spec`` and ``x_int8``,
    which then decide the shape) for ``tiles`` tiles of ``base`` (default: the preset's,
    named ``preset``); also the one-tile prediction for the speed-up, when it fits."""
    base = base or tray_tile_config(preset)
    cfg = tray_config(base, tiles)
    topo = Topology(tiles)
    ex = example or example_ffn(kind, H, I, batch, seed=seed, dtype=base.mxm_dtype)
    x = np.atleast_2d(np.asarray(ex.x_int8))
    if example is not None:
        kind, H, I, batch = ex.spec.kind, ex.spec.H, ex.spec.I, len(x)
    programs, man = compile_ffn_tray(ex.spec, ex.x_int8, cfg, tiles)
    try:
        single = compile_ffn(ex.spec, ex.x_int8, base)[1].cycles
    except CompileError:
        single = None
    return CompiledTray(kind, H, I, batch, tiles, preset, seed, base, cfg, topo, ex.spec, x, programs, man, single,
                        clock_seed)


def run_tray_on_rtl(ct: CompiledTray, sim: str = "verilator", progress=None, out=None, repeat: int = 1) -> Report:
    """Run a compiled tray on the RTL, every tile on its own clock (``CompiledTray.clocks``),
    and check per tile writes, cycles, busy counters and no link fault (:func:`check_tile`),
    y gathered from the traced writes (the system testbench reads no SRAM back) bit-exact,
    and the wall cycles (``scoreboard.check_wall``).  ``repeat``: that many clock draws in
    one build, every tile's cycles and trace identical in each.  Prints the table on ``out``
    and returns the ``tray`` :class:`Report`, a row per tile."""
    say = functools.partial(print, file=out or sys.stdout, flush=True)
    cfg, man, tiles = ct.cfg, ct.manifest, ct.tiles
    gold = archmodel.run_system(ct.programs, ct.topo.peer, man.min_distance)
    lat, ppm = ct.latencies(), ct.clocks()
    for line in ct.describe():
        say(line)
    t0 = time.perf_counter()
    say(f"building the tray for {sim} ...")
    tray = SystemSim(cfg, tiles, lat, sim)
    say(f"  built in {time.perf_counter() - t0:.1f} s ({tray.build_dir})")
    draws = [ct.clocks(k) for k in range(repeat)]
    runs = tray.run([system_run(ct.programs, p, name=f"tray{k}", seed=ct.phase_seed(k))
                     for k, p in enumerate(draws)], name="demo-tray", progress=progress)
    res = runs[0]
    rows = tile_table(ct, res, gold, ppm, say)
    y = tray_output(man, [traced_memory(cfg, o) for o in res["tiles"]], cfg.lanes, ct.H)
    exact = not compare(Observed(outputs=row_vectors("y", y), outputs_as="y gathered from the traced writes",
                                 held="trace holds"), ffn_reference(ct.y_int8.reshape(y.shape)))
    cycles = max(o["cycles"] for o in res["tiles"])
    lo, hi = res["hac_error"]
    say(f"\ncycles (SAC, last tile): {cycles}"
        + (f"; one tile: {ct.single} ({ct.single / man.cycles:.2f}x)" if ct.single else ""))
    lead = (res["start_hac"] - res["hac_read"]) % (1 << 32)
    stalls = max(o["c2c"]["stalled_cycles"] for o in res["tiles"])
    wall, wall_predicted, wall_problems = check_wall(ct.programs, res)
    wall_ok = not wall_problems
    say(f"wall cycles (HAC) from the host's HAC read to done: {wall} = start {lead} (the arming lead) + "
        f"{cycles} program + {wall - lead - cycles} deskew slack (each tile stalled at most {stalls} of its own "
        f"cycles); predicted {wall_predicted} (c2c.wall_cycles): {'as predicted' if wall_ok else 'NOT as predicted'}")
    for p in wall_problems:
        say(f"  {p}")
    say(f"HAC error over the run: {lo:+.2f} .. {hi:+.2f} cycles")
    say(f"bit-exact vs integer FFN: {'PASS' if exact else 'FAIL'}")
    verdict = all(r["passed"] for r in rows) and exact and wall_ok
    repeats = repeat_table(ct, draws, runs, gold, say) if repeat > 1 else []
    if repeat > 1:
        same = len({r["digest"] for r in repeats}) == 1
        say(f"{repeat} clock draws: every tile's cycles and trace {'identical' if same else 'DIFFER'}")
        verdict = verdict and same and all(r["passed"] for r in repeats)
    say(f"\n{'PASS' if verdict else 'FAIL'}: FFN on {tiles} tiles ({sim}), every tile's writes and "
        f"cycles {'as predicted' if verdict else 'checked (see above)'}")
    data = {"passed": verdict, "simulator": sim, **ct.summary(), "cycles": cycles,
            "latency": {f"{a}-{b}": v for (a, b), v in sorted(lat.items())},
            "wall_cycles": wall, "wall_cycles_predicted": wall_predicted, "start_cycles": lead,
            "deskew_stall_cycles": stalls,
            "arming_cycles": (res["hac_armed"] - res["hac_read"]) % (1 << 32),
            "hac_error": [round(lo, 3), round(hi, 3)],
            "sac_skew": [round(v, 3) for v in res["sac_skew"]] if res.get("sac_skew") else None,
            "tile": rows, "bit_exact": exact, "y": y.tolist(), "repeats": repeats,
            "run_seconds": round(res["wall_run_s"], 3),
            "build_dir": str(tray.build_dir)}
    return Report.of("tray", data, rows_key="tile", problems=tray_problems(data, wall_problems))


def tray_problems(data: dict, wall_problems: list) -> list:
    """A tray run's problems from its JSON: every tile's, the wall cycles', y's and the
    clock draws'."""
    out = [f"tile {r['tile']}: {p}" for r in data["tile"] for p in r["problems"]]
    out += [str(p) for p in wall_problems]
    out += [] if data["bit_exact"] else ["y is not the integer FFN's"]
    out += [f"clock draw {r['draw']}: not as predicted" for r in data["repeats"] if not r["passed"]]
    return out + (["the clock draws' traces differ"] if len({r["digest"] for r in data["repeats"]}) > 1 else [])


def check_tile(obs: dict, gold, m) -> list:
    """One tile of a tray against the golden model and its share of the manifest."""
    return compare(tile_observed(obs), golden_reference(gold), manifest_promise(m))


def tile_table(ct: CompiledTray, res: dict, gold: list, ppm: list, say) -> list[dict]:
    """Print the run's table, a line per tile, and return its rows (the report's ``tile``)."""
    say(f"\n{'tile':>4} {'ppm':>9} {'cycles':>7} {'predicted':>9} {'writes':>6}  {'link faults':<12} "
        "writes and cycles as predicted")
    rows = []
    for t, (obs, m) in enumerate(zip(res["tiles"], ct.manifest.tile)):
        problems = check_tile(obs, gold[t], m)
        faults = link_fault_names(obs["status"])
        writes_ok = not [p for p in problems if p.part == "writes" and p.reference == "compiler"]
        rows.append({"tile": t, "ppm": round(ppm[t], 3), "cycles": obs["cycles"],
                     "predicted_cycles": m.cycles, "golden_model_cycles": gold[t].cycles,
                     "writes": len(obs["events"]), "predicted_writes": len(m.writes),
                     "writes_as_predicted": writes_ok, "link_faults": faults, "problems": problems,
                     "passed": writes_ok and not problems and not faults})
        say(f"{t:>4} {ppm[t]:>+9.1f} {obs['cycles']:>7} {m.cycles:>9} {len(obs['events']):>6}  "
            f"{', '.join(faults) or 'none':<12} "
            f"{'yes' if rows[-1]['passed'] else 'NO: ' + (problems or ['link faults'])[0]}")
    return rows


def repeat_table(ct: CompiledTray, draws: list, runs: list, gold: list, say) -> list[dict]:
    """Print a line per clock draw (ppm, every tile's cycles, a digest of the traces) and
    return them as rows, each checked."""
    tiles = ct.tiles
    say(f"\n{'draw':>4}  {'ppm per tile':<{9 * tiles}}  {'cycles per tile':<{5 * tiles}}  trace digest")
    repeats = []
    for k, (p, r) in enumerate(zip(draws, runs)):
        cyc = [o["cycles"] for o in r["tiles"]]
        trace = json.dumps([[o["cycles"], o["events"]] for o in r["tiles"]])
        digest = hashlib.sha1(trace.encode()).hexdigest()[:12]
        ok = not any(check_tile(o, gold[t], m) for t, (o, m) in enumerate(zip(r["tiles"], ct.manifest.tile)))
        repeats.append({"draw": k, "ppm": [round(v, 3) for v in p], "cycles": cyc, "digest": digest,
                        "passed": ok})
        say(f"{k:>4}  {' '.join(f'{v:+8.1f}' for v in p):<{9 * tiles}}  "
            f"{' '.join(f'{c:>4}' for c in cyc):<{5 * tiles}}  {digest}{'' if ok else '  NOT as predicted'}")
    return repeats
