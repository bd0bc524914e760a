"""cocotb testbench of the simulator-speed measurement (``sim/bench/speed.py``): load one
job once, then run its program ``runs`` times, each to done; per run the tile's cycle
count and the wall time of the run alone (loading is not timed).

It is also copied into the reference checkout that the speed is compared against, so it
uses only what that checkout's ``TileDriver`` has too (``reset``, ``load_memory``,
``load_vxm``, ``load_program``, ``run``), or ``load_job`` where there is one.
"""

import json
import os

import cocotb

from sim.tb.driver import TileDriver

try:
    from lpu_arch.config import TileConfig
except ImportError:                       # a checkout from before lpu_arch
    from firmware_gen import TileConfig


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
