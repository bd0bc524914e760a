"""cocotb testbench: the jobs of ``LPU_JOBS`` on one tile (``lpu_tile``, or ``lpu_uart_tile``
behind the UART bridge), loaded over the host bus or (``"load": "port"``) the load port.
Per job the observations go to ``LPU_RESULTS``: cycles, status, busy counters, the trace
of every MEM write, the rows read back (``read_back``, ``read_back_rows``), optionally the
VXM and base register words, wall times and the bytes loaded.  The callers compare them,
so that the same observations can also be compared across simulators."""

from __future__ import annotations

import cocotb

from lpu_arch.config import TileConfig

from sim.tb.driver import TileDriver, UartTileDriver, read_spec, run_job, write_results


@cocotb.test()
async def run_jobs(dut):
    spec = read_spec()
    cfg = TileConfig.from_dict(spec["config"])
    if spec.get("uart_divisor"):
        drv = UartTileDriver(dut, cfg, spec["uart_divisor"])
    else:
        drv = TileDriver(dut, cfg, load_port=spec.get("load") == "port")
    await drv.reset()
    results = [await run_job(dut, drv, cfg, job) for job in spec["jobs"]]
    write_results(results)

