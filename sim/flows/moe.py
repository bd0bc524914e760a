"""An MoE layer on a tray (or one tile) on the RTL under several routings (``lpu moe``):
one program, the base registers loaded per routing, checked against the compiler and the
golden model, every expert's output bit-exact against ``moe.moe_int``."""

from __future__ import annotations

import functools
import sys
import time
from dataclasses import dataclass, field

from firmware_gen.golden import archmodel
from firmware_gen.golden.moe import MoeExample, example_moe, moe_int, route
from firmware_gen.compiler.moe_tray import MoeTray, check_routing, compile_moe, forced_routing
from firmware_gen.scoreboard import Observed, compare, expert_outputs, golden_reference, moe_reference
from lpu_arch import TileConfig
from lpu_arch.topology import Topology

from sim.harness.clocks import TrayClocks
from sim.harness.runner import SystemSim, TileSim, job, system_run
from sim.harness.scoreboard import tile_observed, traced_memory
from sim.report import Report


@dataclass
class CompiledMoe(TrayClocks):
    """An MoE layer compiled for ``tiles`` tiles with the routings to run it under."""
    example: MoeExample
    mt: MoeTray
    routings: dict                # name -> (T, top_k) expert indices
    clock_seed: int = 1
    programs: list = field(default_factory=list)

    @property
    def cfg(self) -> TileConfig:
        return self.mt.cfg

    @property
    def tiles(self) -> int:
        return self.mt.tiles

    def rounds(self, name: str) -> list[dict]:
        return self.mt.rounds(self.routings[name])

    def describe(self) -> list[str]:
        spec, man = self.example.spec, self.mt.manifest()
        held = (f"{spec.E // self.tiles} experts resident per tile (ep)" if self.mt.mapping == "ep" else
                f"1/{self.tiles} of every expert on every tile ({self.mt.mapping})")
        return [f"MoE: {spec.E} routed SwiGLU experts of H={spec.H}, I={spec.I}, top-{spec.top_k}, "
                f"{len(spec.shared)} shared; {len(self.example.x_int8)} token(s)",
                f"tray: {self.tiles} tile(s), {held}, capacity "
                f"{self.mt.capacity} slot(s) per tile and token; {man.cycles_max:,} cycles predicted for every "
                f"routing within capacity ({man.cycles_max / man.tokens:.1f} per token; SRAM-read bound of the "
                f"weights a token needs: {man.needed_bound}, of the batch's: {man.batch_bound} per token; floor: "
                f"{man.floor} for the batch; {man.cycles_max / man.tokens / man.limit:.2f}x the larger per token)"]


def compile_moe_example(E=8, top_k=2, shared=1, H=8, I=8, tokens=1, tiles=4, capacity=None, seed=0,
                        cfg: TileConfig | None = None, routings=("router", "spread", "packed", "random"),
                        forced=None, clock_seed=1, example: MoeExample | None = None,
                        mapping: str = "auto") -> CompiledMoe:
    """Compile a seeded random MoE layer or ``example``; the routings are the router's
    own (``router``) and ``moe_tray.forced_routing``'s shapes; ``forced``: explicit indices."""
    ex = example or example_moe(E=E, top_k=top_k, shared=shared, H=H, I=I, batch=tokens, seed=seed,
                                dtype=(cfg or TileConfig.tiny()).mxm_dtype)
    spec = ex.spec
    mt = compile_moe(spec, ex.x_int8, cfg, tiles=tiles, capacity=capacity, mapping=mapping)
    T = len(ex.x_int8)
    out = {name: route(spec.router, ex.x)[0] if name == "router"
           else forced_routing(name, spec.E, spec.top_k, T, tiles, mt.capacity, seed=seed) for name in routings}
    if forced is not None:
        out["forced"] = check_routing(forced, spec.E, spec.top_k, T)
    return CompiledMoe(ex, mt, out, clock_seed, mt.programs())


def run_moe_on_rtl(cm: CompiledMoe, sim: str = "verilator", progress=None, out=None, latency=None,
                   ppm=None) -> Report:
    """Every round of every routing of ``cm`` on the RTL in one invocation, checked; a
    table on ``out`` and the ``moe`` :class:`Report` (``observed``: every round's raw
    observations, for comparing simulators).  ``latency``/``ppm`` default from ``clock_seed``."""
    say = functools.partial(print, file=out or sys.stdout, flush=True)
    mt, tiles = cm.mt, cm.tiles
    man = mt.manifest()
    work = [(name, r, asg) for name in cm.routings for r, asg in enumerate(cm.rounds(name))]
    t0 = time.perf_counter()
    if tiles > 1:
        say(f"building {tiles} tiles for {sim} ...")
        system = SystemSim(cm.cfg, tiles, latency if latency is not None else cm.latencies(), sim)
        ppm = ppm if ppm is not None else cm.clocks()
        runs = system.run([system_run(cm.programs, ppm, name=f"{name}/round{r}", seed=cm.phase_seed(k),
                                      bases=mt.bases(asg)) for k, (name, r, asg) in enumerate(work)],
                          name="moe", progress=progress)
        observed_tiles = [run["tiles"] for run in runs]
    else:
        say(f"building the tile for {sim} ...")
        tile = TileSim(cm.cfg, sim)
        res = tile.run([job(cm.programs[0], name=f"{name}/round{r}", bases=mt.bases(asg)[0])
                        for name, r, asg in work], name="moe", progress=progress)
        observed_tiles = [[o] for o in res]
    say(f"  ran in {time.perf_counter() - t0:.1f} s")
    say(f"\n{'routing':<10} {'round':>5} {'slots on':>8} {'cycles per tile':<40} writes, cycles, busy as predicted; "
        "outputs bit-exact")
    report = [check_round(cm, name, r, asg, obs_tiles) for (name, r, asg), obs_tiles in zip(work, observed_tiles)]
    for row in report:
        say(f"{row['routing']:<10} {row['round']:>5} {row['slots_on']:>8} {' '.join(map(str, row['cycles'])):<40} "
            f"{'yes' if row['passed'] else 'NO: ' + row['problems'][0]}")
    passed = all(row["passed"] for row in report)
    same = len({tuple(r["cycles"]) for r in report}) == 1
    say(f"\nevery routing and round in the same cycles: {'yes' if same else 'NO'}; "
        f"{'PASS' if passed and same else 'FAIL'}")
    runs = [{k: v for k, v in r.items() if k != "observed"} for r in report]
    problems = [f"{r['routing']} round {r['round']}: {p}" for r in runs for p in r["problems"]]
    return Report.of("moe", {"passed": bool(passed and same), "sim": sim, "runs": runs, "manifest": man.summary()},
                     rows_key="runs", observed=[r["observed"] for r in report],
                     problems=problems + ([] if same else ["the routings and rounds differ in cycles"]))


def check_round(cm: CompiledMoe, name: str, r: int, asg: dict, obs_tiles: list) -> dict:
    """Round ``r`` (assignment ``asg``) of routing ``name`` as every tile observed it:
    writes, cycles and busy counters against the golden model and ``MoeTray.promised``, every
    expert's output (from the traced writes) against ``moe.moe_int``; the report's row."""
    mt, tiles = cm.mt, cm.tiles
    bases = mt.bases(asg)
    gold = (archmodel.run_system(cm.programs, Topology(tiles).peer, bases=bases) if tiles > 1
            else [archmodel.run(cm.programs[0], bases=bases[0])])
    problems = [p.at(f"tile {t}") for t, (obs, g, promised) in enumerate(zip(obs_tiles, gold, mt.promised(asg)))
                for p in compare(tile_observed(obs), golden_reference(g), promised)]
    routed, shared = mt.outputs(asg, [traced_memory(cm.cfg, o) for o in obs_tiles])
    stages = moe_int(cm.example.spec, cm.example.x_int8, cm.routings[name])
    problems += compare(Observed(outputs=expert_outputs(routed, shared), held="trace holds"),
                        moe_reference(stages, {(b, e) for (_, b, _), e in asg.items()}))
    return {"routing": name, "round": r, "slots_on": len(asg),
            "experts": {f"{t}/{b}/{j}": e for (t, b, j), e in sorted(asg.items())},
            "cycles": [o["cycles"] for o in obs_tiles], "predicted_cycles": mt.manifest().cycles,
            "bit_exact": not [p for p in problems if p.part == "outputs"], "problems": problems,
            "passed": not problems, "observed": obs_tiles}
