"""cocotb testbench of the simulator-speed measurement (``sim/bench/speed.py``): load one
job once, run it ``runs`` times; per run the cycles and the wall time (loading not timed).
It is copied into the reference checkout too, so it uses only the ``TileDriver`` methods
that checkout has."""

import json
import os

import cocotb

try:                                      # the reference checkout's own driver first (sim.tb may resolve
    from sim.driver import TileDriver     # to this checkout's through its editable install)
except ImportError:
    from sim.tb.driver import TileDriver
try:                                      # likewise
    from firmware_gen import TileConfig   # a checkout from before lpu_arch
except ImportError:
    from lpu_arch.config import TileConfig


@cocotb.test()
async def run_repeated(dut):
    with open(os.environ["LPU_JOBS"]) as f:
        spec = json.load(f)
    cfg = TileConfig.from_dict(spec["config"])
    job = spec["job"]
    drv = TileDriver(dut, cfg)
    await drv.reset()
    if hasattr(drv, "load_job"):
        await drv.load_job(job)
    else:
        image = job.get("memory", {})
        await drv.load_memory({name: {r: row for r, row in enumerate(image.get(name, [])) if any(row)}
                               for name in cfg.mem_names})
        if "vxm_params" in job or "table" in job:
            await drv.load_vxm(job.get("vxm_params"), job.get("table"))
        await drv.load_program(job["images"])
    runs = []
    for k in range(spec["runs"]):
        cycles, wall = await drv.run(spec["timeout_cycles"])
        runs.append({"cycles": cycles, "wall_run_s": wall})
        dut._log.info("run %d/%d: %d cycles", k + 1, spec["runs"], cycles)
    with open(os.environ["LPU_RESULTS"], "w") as f:
        json.dump({"results": runs}, f)
