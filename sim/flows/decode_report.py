"""What ``lpu decode`` reports per token position (``sim/flows/decode.py``'s loops): the
tile's or tray's cycles and time, the bytes each way, the KV cache's bytes and the GPU
estimate, and the reports with their verdicts."""

from __future__ import annotations

import numpy as np

from sim.flows.decode import DecodeSetup, check, per_position
from sim.report import Report


# ---- what lpu decode reports per token position ---------------------------------------------
def kv_cache_bytes(H: int, layers: int, position: int) -> int:
    """The K and V float32 cache the host reads for the token at ``position``."""
    return 2 * 4 * H * layers * (position + 1)


def position_rows(setup: DecodeSetup, run: dict, clock_mhz: float, hbm_gbs: float) -> list[dict]:
    """Per token position of a loop's ``run``: tokens, the tile's cycles and time, the
    bytes to and from the tile, and the GPU estimate: the KV cache's bytes read at
    ``hbm_gbs`` GB/s (an assumed bandwidth, not a measurement)."""
    rm = setup.resident
    L, H = len(rm.layers), setup.model.H
    x_bytes = sum(len(v) for ly in rm.layers for r in ly.x_image(np.zeros(H)).values() for v in r.values())
    y_bytes = sum(len(ly.manifest.outputs) * setup.cfg.lanes for ly in rm.layers)
    tokens = list(setup.prompt) + list(run["tokens"])
    rows = []
    for pos in range(len(setup.prompt) + setup.tokens):
        cycles = sum(r["cycles"] for r in run["runs"][pos * L:(pos + 1) * L])
        kv = kv_cache_bytes(H, L, pos)
        rows.append({"position": pos, "input_token": tokens[pos],
                     "next_token": tokens[pos + 1] if pos + 1 < len(tokens) else None, "tray_cycles": cycles,
                     "tray_us": cycles / clock_mhz, "bytes_to_tray": x_bytes, "bytes_from_tray": y_bytes,
                     "kv_bytes": kv, "gpu_est_ns": kv / hbm_gbs})
    return rows


def host_times_us(setup: DecodeSetup, golden: dict, source: str, hbm_gbs: float) -> list[float]:
    """The host's time per step in us, one per layer and the LM head's: 'measured', the
    golden run's median numpy time; 'gpu', one layer's KV cache at the last position read at
    ``hbm_gbs`` GB/s (the head taken as free)."""
    if source == "measured":
        return list(np.median(np.array(golden["host_segments_s"]), axis=0) * 1e6)
    L = len(setup.resident.layers)
    last = kv_cache_bytes(setup.model.H, L, len(setup.prompt) + setup.tokens - 1)
    return [last / L / (hbm_gbs * 1e3)] * L + [0.0]


def tray_position_rows(report: dict, prompt, layers: int, clock_mhz: float, moe: bool) -> list[dict]:
    """Per token position of a tray loop's report: program and wall cycles summed over
    the layers, the wall time, each MoE layer's experts and the bytes to and from the tray."""
    tokens = list(prompt) + list(report["tokens"])
    rtl = report["engine"] == "RTL"
    cycles = per_position(report["runs"], layers, "rtl_cycles" if rtl else "cycles")
    walls = per_position(report["runs"], layers, "rtl_wall_cycles" if rtl else "wall_cycles")
    rows = []
    for pos, (cyc, wall) in enumerate(zip(cycles, walls)):
        rs = report["runs"][pos * layers:(pos + 1) * layers]
        row = {"position": pos, "input_token": tokens[pos], "tray_cycles": cyc, "wall_cycles": wall,
               "tray_us": wall / clock_mhz, **({"experts": [r["experts"] for r in rs]} if moe else {}),
               "bytes_to_tray": sum(r["bytes_in"] for r in rs),
               "bytes_from_tray": sum(r["bytes_out"] for r in rs)}
        if rtl:        # measured: what the host wrote after the first load, and the y it read
            sent = {k: sum(r["rtl_bytes_in"][k] for r in rs) for k in STEADY_BYTES}
            row.update({"bytes_to_tray": sum(sent[k] for k in ("x", "routing", "entry", "reloaded")),
                        "bytes_from_tray": sum(r["rtl_bytes_out"] for r in rs),
                        **{f"bytes_{k}": v for k, v in sent.items()},
                        "host_bus_cycles": sum(r["rtl_host_cycles"] for r in rs)})
        rows.append(row)
    return rows


# What a tray run's host wrote, by kind (run_tray_rtl): x's rows, the base registers (the
# routing), Csr.ENTRY, what a layer not resident beside the others reloads (its rows,
# instructions and VXM words), and the first load (the first run's, through the load port).
STEADY_BYTES = ("x", "routing", "entry", "reloaded", "first_load")
# Whether the host's time between runs is part of a token's wall cycles (lpu decode says so).
HOST_TIME = ("host time between runs is not part of the wall cycles: each run's wall cycles count from the "
             "host's HAC read that arms it to the last tile's done; the host's bus traffic between runs (y read, "
             "STATUS check, x, routing and entry written) is counted apart, its computation (attention, router) "
             "takes no simulated time")


# ---- lpu decode's reports ------------------------------------------------------------------
def loop_report(setup: DecodeSetup, run: dict, golden: dict, clock_mhz: float, hbm_gbs: float) -> Report:
    """The report of a resident loop: ``run`` checked against ``golden``, a row per
    position; passed when there is no problem and every token takes the same cycles."""
    problems = check(setup, run, golden)
    rows = position_rows(setup, run, clock_mhz, hbm_gbs)
    same = len({r["tray_cycles"] for r in rows}) == 1
    rtl, rm = run["engine"] == "RTL", setup.resident
    return Report.of("decode", {
        "ran": rtl, "engine": f"RTL ({run['sim']})" if rtl else run["engine"], "tokens": run["tokens"],
        "positions": rows, "layer_cycles": [ly.manifest.cycles for ly in rm.layers], "loaded_once": rm.loaded_bytes(),
        "loaded_per_run": run.get("loaded"), "problems": problems, "passed": not problems and same},
        rows_key="positions", figures={"identical_every_token": same, "host_seconds": golden["host_s"]})


def tray_loop_report(loop: dict, prompt, layers: int, clock_mhz: float, moe: bool) -> Report:
    """The report of a tray loop: passed when there is no problem and the program and
    wall cycles are the same for every token (``identical_every_token``)."""
    rows = tray_position_rows(loop, prompt, layers, clock_mhz, moe)
    same = len({(r["tray_cycles"], r["wall_cycles"]) for r in rows}) == 1
    rtl = loop["engine"] == "RTL"
    return Report.of("decode-tray", {
        "ran": rtl, "engine": f"{loop['engine']} (tray)", "tiles": loop["tiles"],
        "tokens": loop["tokens"], **{k: loop[k] for k in ("clock_seed", "ppm", "wire_latencies", "first_load_bytes",
                                                           "resets", "clock_starts") if k in loop},
        **({"host_time": HOST_TIME} if rtl else {}),
        "positions": rows, "problems": loop["problems"], "passed": not loop["problems"] and same},
        rows_key="positions", figures={"identical_every_token": same})
