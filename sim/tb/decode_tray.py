"""cocotb testbench of the decode loop with every FFN on a tray (``sim.flows.decode.run_tray_rtl``):
the host's side runs here and awaits the tray for each FFN, on a tray that never stops
(``sim.tb.system.SteadyTray``): the first run restarts the clocks, resets and loads every
tile through the load port and waits for HAC lock; every later run keeps them and writes
only x's rows, the base registers and the entry (and, for a layer not resident beside the
others, its weights and instructions, counted apart), reads STATUS before arming, and reads
y back over the bus.  Every layer, dense or MoE, is resident on the tray when the model fits
(``resident_tray.compile_resident_tray``: one entry point per layer), else each layer's programs
replace the last's (a MoE layer's placed per token).  A MoE layer is routed here as ``IntFfn``
does and run round by round with each round's base registers, its experts' outputs combined
with the gates.  ``moe_tables``: how the model's MoE layers were quantised (the flow's choice,
``decode.moe_decoder``).  ``inject_between``: ``[{"before_run", "tile", "link", "mask"}]``
flits flipped while the tray is idle, before run ``before_run`` is armed."""

from __future__ import annotations

import cocotb
import numpy as np
from cocotb.triggers import ClockCycles

from firmware_gen.compiler import CompileError
from firmware_gen.compiler.blocks import x_image
from firmware_gen.host.decoder import calibrate, dequantise_out, generate_gen, quantise_in, synthetic
from firmware_gen.golden.moe import MoeSpec, combine, quantise_input, route
from firmware_gen.compiler.resident_tray import compile_resident_tray
from firmware_gen.compiler.tray import compile_tray_layer, tray_config, tray_output
from lpu_arch import TileConfig

from sim.flows.decode import compile_moe_run, moe_stages
from sim.tb.driver import read_spec, write_results
from sim.harness.clocks import phase_seed
from sim.harness.runner import system_run
from sim.harness.scoreboard import traced_memory
from sim.tb.system import SteadyTray, inject_idle, tile_drivers, want


def _rows(outputs) -> dict:
    """``{slice: rows}`` of a manifest's or plan's outputs (``{block: (slice, addr, ...)}``)."""
    out = {}
    for m, a, *_ in outputs.values():
        out.setdefault(m, set()).add(int(a))
    return {m: sorted(rs) for m, rs in out.items()}


def _merge(*parts) -> dict:
    out = {}
    for p in parts:
        for m, rs in p.items():
            out[m] = sorted(set(out.get(m, [])) | set(rs))
    return out


@cocotb.test()
async def decode_tray(dut):
    spec = read_spec()
    a = spec["decode"]
    base, tiles = TileConfig.from_dict(a["config"]), a["tiles"]
    model = calibrate(synthetic(**a["model"]), moe_tables=a.get("moe_tables", "expert"))
    try:
        rt = compile_resident_tray(model.specs, base, tiles)
    except CompileError:
        rt = None
    layers = (rt.layers if rt is not None else
              [None if isinstance(s, MoeSpec) else compile_tray_layer(s, base, tiles) for s in model.specs])
    cfg = tray_config(base, tiles)
    drivers = tile_drivers(dut, cfg, tiles, load_port=True)
    tray = SteadyTray(dut, cfg, drivers)
    inject = {x["before_run"]: x for x in a.get("inject_between", [])}
    runs, n_run = [], 0

    async def run_on_tray(progs, wants, name):
        nonlocal n_run
        x = inject.get(n_run)
        if x is not None:
            hit = await inject_idle(dut, drivers[x["tile"]], x["tile"], x["link"], x["mask"])
            await ClockCycles(drivers[0].dut.clk, 64)      # the flit crosses the wire
            dut._log.info("flipped %#x in a flit of tile %d link %d at %d fs, between runs", x["mask"], x["tile"],
                          x["link"], hit)
        run = system_run(progs, a["ppm"], name=name, seed=phase_seed(a["clock_seed"], n_run))
        n_run += 1
        res = await tray.run(run, wants)
        mems = res.pop("y_memory")
        return res, mems

    gen = generate_gen(model, a["prompt"], a["tokens"])
    try:
        req = next(gen)
        while True:
            l, x = req
            lspec, n = model.specs[l], len(runs)
            if isinstance(lspec, MoeSpec):
                indices, gates = route(lspec, np.asarray(x, np.float64)[None])
                xq = quantise_input(lspec, x)
                if rt is not None:        # every layer resident: x, the routing and the entry per run
                    ly = rt.layers[l]
                    idx, xq2 = np.atleast_2d(indices), np.atleast_2d(xq)
                    mt, progs = ly.for_input(xq2), ly.programs_for(xq2)
                else:
                    mt, idx, xq2 = compile_moe_run(lspec, xq, indices, base, tiles)
                    progs = mt.programs()
                rounds, results = [], []
                for k, asg in enumerate(mt.rounds(idx)):
                    wants = _moe_wants(mt, progs, asg, bool(lspec.shared), rt, l, first=not runs)
                    res, mems = await run_on_tray(progs, wants, f"run{n}-layer{l}-round{k}")
                    rounds.append((asg, mems))
                    res["traced_outputs_equal"] = _same_outputs(mt.outputs(asg, mems),
                                                                mt.outputs(asg, [traced_memory(cfg, o) for o in res["tiles"]]))
                    results.append(res)
                stages = moe_stages(mt, lspec, xq2, idx, rounds)
                runs.append({"layer": l, "x": xq2[0].tolist(), "indices": idx[0].tolist(), "results": results,
                             "routed": stages.routed[0].tolist(), "shared": stages.shared[0].tolist()})
                req = gen.send(combine(lspec, stages, gates)[0])
                continue
            xq = quantise_in(model, l, x)
            ly = layers[l]
            progs = ly.programs_for(xq)
            wants = [want(p, x=x_image(ly.x_rows[t], xq, cfg.lanes, lspec.H),
                          y_rows=_rows(ly.manifest.tile[t].outputs), **_resident(rt, t, l, first=not runs))
                     for t, p in enumerate(progs)]
            res, mems = await run_on_tray(progs, wants, f"run{n}-layer{l}")
            y = tray_output(ly.manifest, mems, cfg.lanes, lspec.H)[0]
            traced = tray_output(ly.manifest, [traced_memory(cfg, o) for o in res["tiles"]], cfg.lanes, lspec.H)[0]
            res["traced_outputs_equal"] = bool((y == traced).all())
            runs.append({"layer": l, "x": xq.tolist(), "y": y.tolist(), "result": res})
            req = gen.send(dequantise_out(model, l, y))
    except StopIteration as e:
        tokens = e.value
    write_results([{"tokens": tokens, "runs": runs, "resident": rt is not None,
                    "first_load_bytes": sum(d.first_bytes for d in drivers),
                    "resets": [d.resets for d in drivers], "clock_starts": [d.clock_starts for d in drivers]}])


def _resident(rt, t: int, l: int, first: bool) -> dict:
    """``want``'s arguments for tile ``t`` of a run of layer ``l`` when every layer is resident
    (``rt``; None: not): every layer's images, the MEM images on the first run (then what the
    tile holds), the layer's entry."""
    return {} if rt is None else {"images": rt.images[t], "memory": rt.memory[t] if first else False,
                                  "entry": rt.entries[l]}


def _moe_wants(mt, progs, asg, shared: bool, rt, l: int, first: bool) -> list:
    """Every tile's want for one round ``asg`` of a MoE layer: its x rows, its base registers,
    the rows of y (its slots' outputs and its share of the shared expert's) to read back."""
    wants = []
    for t, (p, b) in enumerate(zip(progs, mt.bases(asg))):
        xs = {m: {r: p.memory[m][r] for m2, r, *_ in mt.hosts[t].x_rows if m2 == m}
              for m in {m2 for m2, *_ in mt.hosts[t].x_rows}}
        y_rows = _merge(_rows(mt.hosts[t].outputs) if shared else {},
                        *(_rows(mt.slot_plans[key].outputs) for key in asg if key[0] == t))
        wants.append(want(p, bases=b, x=xs, y_rows=y_rows, **_resident(rt, t, l, first)))
    return wants


def _same_outputs(a, b) -> bool:
    """Two ``MoeTray.outputs`` equal (the y read back and the traced writes' y)."""
    (ra, sa), (rb, sb) = a, b
    return (ra.keys() == rb.keys() and all((ra[k] == rb[k]).all() for k in ra)
            and (sa is None) == (sb is None) and (sa is None or bool((sa == sb).all())))
