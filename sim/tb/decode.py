"""cocotb testbench of the decode loop (``sim/flows/decode.py``): the host's side of the
model runs here and awaits the tile for every FFN.  It rebuilds the setup from
``decode_setup``'s arguments; per FFN it writes x's rows and (on a change of layer)
``Csr.ENTRY``, runs the tile and reads STATUS, cycles, trace and y; the first run also loads
every layer's weights, parameters and programs, which then stay."""

from __future__ import annotations

import cocotb
import numpy as np

from firmware_gen.host.decoder import dequantise_out, generate_gen, quantise_in

from sim.flows.decode import decode_setup, first_memory
from sim.tb.driver import TileDriver, read_spec, write_results


async def drive_tile(dut, setup, gen):
    """Answer every FFN request ``(layer, x)`` of the host's generator ``gen`` (the
    decoder's loop, or another loop over the same model's FFNs) with the tile; returns
    ``(the generator's value, runs, bytes loaded per run)``."""
    rm, model, cfg = setup.resident, setup.model, setup.cfg
    drv = TileDriver(dut, cfg)
    await drv.reset()
    runs, loaded = [], []
    try:
        req = next(gen)
        while True:
            l, x = req
            xq = quantise_in(model, l, x)
            job = rm.job(l, xq)
            if not runs:
                job["memory_rows"] = first_memory(rm, job["memory_rows"])
            before = drv.loaded_bytes
            await drv.load_job(job)
            loaded.append(drv.loaded_bytes - before)
            cycles, _ = await drv.run(job["timeout_cycles"])
            status = await drv.read_status()
            events = await drv.read_trace()
            mem = {n: np.zeros((cfg.mem_depth, cfg.lanes), np.uint8) for n in cfg.mem_names}
            for name, rows in job["read_back"].items():
                for r, v in zip(rows, await drv.read_vectors(name, rows)):
                    mem[name][r] = v
            y = rm.layers[l].y_from(mem)[0]
            runs.append({"layer": l, "x": xq.tolist(), "y": y.tolist(), "cycles": cycles, "status": status["status"],
                         "busy": status["busy"], "events": [[c, s, a_, list(d)] for c, s, a_, d in events]})
            dut._log.info("job layer %d: %d cycles, %d events", l, cycles, len(events))   # progress: a run done
            req = gen.send(dequantise_out(model, l, y))
    except StopIteration as e:
        return e.value, runs, loaded


@cocotb.test()
async def decode(dut):
    spec = read_spec()
    a = spec["decode"]
    setup = decode_setup(a["config"], a["model"], a["prompt"], a["tokens"], a.get("out_scale_per_row", False))
    tokens, runs, loaded = await drive_tile(dut, setup, generate_gen(setup.model, setup.prompt, setup.tokens))
    write_results([{"tokens": tokens, "runs": runs, "loaded": loaded}])
