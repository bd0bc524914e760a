"""cocotb testbench of the decode loop with every FFN on a tray (``sim.flows.decode.run_tray_rtl``):
the host's side runs here and awaits the tray for each FFN.  A dense layer is compiled
once; per FFN the token's x goes into every tile's x rows and the tray runs as one armed
system run (``sim.tb.system.one_run``), y gathered from the traced writes.  A MoE layer is
routed here as ``IntFfn`` does, placed per token and run round by round with each round's
base registers, its experts' outputs combined with the gates.  Each run reloads the tray."""

from __future__ import annotations

import cocotb
import numpy as np

from firmware_gen.host.decoder import calibrate, dequantise_out, generate_gen, quantise_in, synthetic
from firmware_gen.golden.moe import MoeSpec, combine, quantise_input, route
from firmware_gen.compiler.tray import compile_tray_layer, tray_config, tray_output
from lpu_arch import TileConfig

from sim.flows.decode import compile_moe_run, moe_stages
from sim.tb.driver import read_spec, write_results
from sim.harness.clocks import phase_seed
from sim.harness.runner import system_run
from sim.harness.scoreboard import traced_memory
from sim.tb.system import one_run, tile_drivers


@cocotb.test()
async def decode_tray(dut):
    spec = read_spec()
    a = spec["decode"]
    base, tiles = TileConfig.from_dict(a["config"]), a["tiles"]
    model = calibrate(synthetic(**a["model"]))
    layers = [None if isinstance(s, MoeSpec) else compile_tray_layer(s, base, tiles) for s in model.specs]
    cfg = tray_config(base, tiles)
    drivers = tile_drivers(dut, cfg, tiles)
    runs = []
    gen = generate_gen(model, a["prompt"], a["tokens"])
    try:
        req = next(gen)
        while True:
            l, x = req
            spec, n = model.specs[l], len(runs)
            if isinstance(spec, MoeSpec):
                indices, gates = route(spec, np.asarray(x, np.float64)[None])
                xq = quantise_input(spec, x)
                mt, idx, xq2 = compile_moe_run(spec, xq, indices, base, tiles)
                progs, rounds, results = mt.programs(), [], []
                for k, asg in enumerate(mt.rounds(idx)):
                    run = system_run(progs, a["ppm"], name=f"run{n}-layer{l}-round{k}", seed=phase_seed(a["clock_seed"], n),
                                     bases=mt.bases(asg))
                    res = await one_run(dut, cfg, drivers, run)
                    res.pop("window", None)
                    rounds.append((asg, [traced_memory(cfg, o) for o in res["tiles"]]))
                    results.append(res)
                stages = moe_stages(mt, spec, xq2, idx, rounds)
                runs.append({"layer": l, "x": xq2[0].tolist(), "indices": idx[0].tolist(), "results": results,
                             "routed": stages.routed[0].tolist(), "shared": stages.shared[0].tolist()})
                req = gen.send(combine(spec, stages, gates)[0])
                continue
            xq = quantise_in(model, l, x)
            run = system_run(layers[l].programs_for(xq), a["ppm"], name=f"run{n}-layer{l}", seed=phase_seed(a["clock_seed"], n))
            res = await one_run(dut, cfg, drivers, run)
            memories = [traced_memory(cfg, o) for o in res["tiles"]]
            y = tray_output(layers[l].manifest, memories, cfg.lanes, spec.H)[0]
            res.pop("window", None)
            runs.append({"layer": l, "x": xq.tolist(), "y": y.tolist(), "result": res})
            req = gen.send(dequantise_out(model, l, y))
    except StopIteration as e:
        tokens = e.value
    write_results([{"tokens": tokens, "runs": runs}])
