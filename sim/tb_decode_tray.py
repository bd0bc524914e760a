"""cocotb testbench of the decode loop with every FFN on a tray of tiles (``hdl/system.py``,
each tile on its own clock): the host's side of the model runs here and awaits the tray
for every layer's FFN (``sim.decode.run_dense_tray_rtl``).

The spec (``LPU_JOBS``) names the tile, the tiles, the model (``synthetic``'s arguments),
the prompt, the tokens and the tiles' clocks.  The testbench rebuilds the same calibrated
model and compiles every layer for the tray once (``tray.compile_tray_layer``); per FFN
it runs the layer's programs with the token's x written into every tile's x rows as one
armed system run (``tb_system.one_run``: load, HAC lock, arm, run, observe), gathers y
from the tiles' traced writes and sends it back to the model.  Each run reloads the tray:
the layers are not resident beside each other.  The observations and the generated
tokens go to ``LPU_RESULTS``.
"""

from __future__ import annotations

import json
import os

import cocotb
import numpy as np

from firmware_gen.decoder import calibrate, dequantise_out, generate_gen, quantise_in, synthetic
from firmware_gen.tray import compile_tray_layer, tray_output
from lpu_arch import TileConfig

from .driver import Ports, TileDriver
from .runner import observed_events, system_run
from .tb_system import one_run


@cocotb.test()
async def decode_tray(dut):
    with open(os.environ["LPU_JOBS"]) as f:
        spec = json.load(f)
    a = spec["decode"]
    base, tiles = TileConfig.from_dict(a["config"]), a["tiles"]
    model = calibrate(synthetic(**a["model"]))
    layers = [compile_tray_layer(s, base, tiles) for s in model.specs]
    cfg = layers[0].programs[0].config
    drivers = [TileDriver(Ports(dut, f"t{i}_"), cfg, period=10_000_000, unit="fs") for i in range(tiles)]
    for i in range(tiles):
        for k in range(cfg.links):
            getattr(dut, f"t{i}_l{k}_inject").value = 0
    runs = []
    gen = generate_gen(model, a["prompt"], a["tokens"])
    try:
        req = next(gen)
        while True:
            l, x = req
            xq = quantise_in(model, l, x)
            n = len(runs)
            run = system_run(layers[l].programs_for(xq), a["ppm"], name=f"run{n}-layer{l}", seed=a["seed"] + n)
            res = await one_run(dut, cfg, drivers, run)
            memories = []
            for obs in res["tiles"]:
                mem = {m: np.zeros((cfg.mem_depth, cfg.lanes), np.uint8) for m in cfg.mem_names}
                for _, s, addr, d in observed_events(obs):
                    mem[s][addr] = d
                memories.append(mem)
            y = tray_output(layers[l].manifest, memories, cfg.lanes, model.specs[l].H)[0]
            res.pop("window", None)
            runs.append({"layer": l, "x": xq.tolist(), "y": y.tolist(), "result": res})
            req = gen.send(dequantise_out(model, l, y))
    except StopIteration as e:
        tokens = e.value
    with open(os.environ["LPU_RESULTS"], "w") as f:
        json.dump({"results": [{"tokens": tokens, "runs": runs}]}, f)
