"""cocotb testbench: the jobs of ``LPU_JOBS`` on one tile (``lpu_tile``, or ``lpu_uart_tile``
behind the UART bridge), loaded over the host bus or (``"load": "port"``) the load port.
Per job the observations go to ``LPU_RESULTS``: cycles, status, busy counters, the trace
of every MEM write, the rows read back (``read_back``, ``read_back_rows``), optionally the
VXM and base register words, wall times and the bytes loaded.  The callers compare them,
so that the same observations can also be compared across simulators."""

from __future__ import annotations

import time

import cocotb

from lpu_arch.config import TileConfig

from sim.tb.driver import TileDriver, UartTileDriver, read_spec, write_results


@cocotb.test()
async def run_jobs(dut):
    spec = read_spec()
    cfg = TileConfig.from_dict(spec["config"])
    if spec.get("uart_divisor"):
        drv = UartTileDriver(dut, cfg, spec["uart_divisor"])
    else:
        drv = TileDriver(dut, cfg, load_port=spec.get("load") == "port")
    await drv.reset()
    results = []
    for job in spec["jobs"]:
        before, t0 = drv.loaded_bytes, time.perf_counter()
        await drv.load_job(job)
        load = {"load_path": "port" if drv.load_port else "bus", "loaded_bytes": drv.loaded_bytes - before,
                "wall_load_s": time.perf_counter() - t0}
        dut._log.info("job %s: loaded, running", job.get("name", ""))    # progress: loading done
        cycles, wall = await drv.run(job.get("timeout_cycles", 1_000_000))
        status = await drv.read_status()
        events = await drv.read_trace() if cfg.trace_depth else []
        readback, rows_read = {}, {}
        for name, rows in job.get("read_back", {}).items():
            rows_read[name] = [int(r) for r in rows]
            readback[name] = await drv.read_vectors(name, rows_read[name])
        extra = {}
        if job.get("read_vxm"):
            extra["vxm_words"] = await drv.read_vxm()
        if job.get("read_bases"):
            extra["base_words"] = await drv.read_bases()
        results.append({"name": job.get("name", ""), "cycles": cycles, "wall_run_s": wall, **load,
                        **status, "events": events, "read_back": readback, "read_back_rows": rows_read, **extra})
        dut._log.info("job %s: %d cycles, %d events", job.get("name", ""), cycles, len(events))
    write_results(results)
