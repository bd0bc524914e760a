"""cocotb testbench: several tiles in their own clock domains (``hdl/top/system.py``).

Per run of ``LPU_JOBS`` (``runner.system_run``), :func:`one_run`:

1. restarts every tile's clock at its own period (ppm) and phase, in femtoseconds, and
   resets every tile;
2. loads every tile's job over its own host bus or load port, concurrently;
3. waits until every child's HAC is locked, reads tile 0's HAC and arms every tile to
   start at ``c2c.armed_start_hac`` of it (the start sets every deskew offset, so the first
   ``RUNTIME_DESKEW`` releases every tile on one HAC cycle); a lead too short to arm every
   tile in time is an error;
4. while the tiles run, samples every few cycles each child's HAC error against the root,
   its SAC skew and every buffer level, and optionally XORs fault masks into flits;
5. waits for every done and reads each tile's trace, cycles, busy counters, status and C2C
   registers (as ``sim/tb/tile.py``, so ``scoreboard.check_run`` applies per tile).

:class:`SteadyTray` runs one run after another on a tray that never stops (no clock restart,
reset or relock after its first run; docs/tray.md, "The steady state").  An armed tile that
ran before shows the last run's done until its start: the host waits for the start first.

A run not done within its timeout has ``timed_out`` set (no trace) and the batch goes on;
a tile halted by a deskew stall beyond its bound is frozen, so its trace is not read.

**HAC error**: at sampling instant ``T`` a tile's continuous HAC is ``hac_i + f_i``, ``f_i``
the elapsed fraction of its current period (the edges are known exactly); a child's
error is ``(hac_c + f_c) - (hac_0 + f_0)``, the registers' integer difference reported too."""

from __future__ import annotations

import random
import time

import cocotb
import numpy as np
from cocotb.triggers import ClockCycles, FallingEdge, First, ReadOnly, RisingEdge, Timer
from cocotb.simtime import get_sim_time

from lpu_arch.c2c import armed_start_hac
from lpu_arch import hostmap
from lpu_arch.config import TileConfig
from lpu_arch.hostmap import Csr, HacStatus, Status, fault_names, link_fault_names

from sim.tb.driver import Ports, TileDriver, read_spec, signed32, write_results

FS_PRECISION = -15


async def _all(coros):
    """Run coroutines concurrently; return their results in order."""
    tasks = [cocotb.start_soon(c) for c in coros]
    return [await t for t in tasks]


def clear_injections(dut, cfg, tiles: int) -> None:
    """Zero every tile's fault injection ports (a cancelled injection may have left its mask on)."""
    for i in range(tiles):
        for k in range(cfg.links):
            getattr(dut, f"t{i}_l{k}_inject").value = 0


def tile_drivers(dut, cfg, tiles: int, load_port: bool = False) -> list[TileDriver]:
    """A driver per tile of the system (10 ns nominal, in femtoseconds), injection ports cleared."""
    clear_injections(dut, cfg, tiles)
    return [TileDriver(Ports(dut, f"t{i}_"), cfg, period=10_000_000, unit="fs", load_port=load_port)
            for i in range(tiles)]


def _levels(packed: int, cfg) -> list[int]:
    """Every link's buffer level from a ``t<i>_rx_level``/``elastic_level`` port's value."""
    return [packed >> (cfg.level_bits * link) & ((1 << cfg.level_bits) - 1) for link in range(cfg.links)]


class Sampler:
    """Samples HAC errors and buffer levels at one simulation instant every ``every`` root
    cycles (plus a random fraction, so that the instants do not lock to an edge)."""

    def __init__(self, dut, cfg, drivers, every: int, record: int, seed: int):
        self.dut, self.cfg, self.drivers = dut, cfg, drivers
        self.n = len(drivers)
        self.every, self.record = every, record
        self.rng = random.Random(seed)
        self.stop = False
        self.err = []            # fractional HAC errors of every child
        self.err_int = []
        self.rx = [[[None, None] for _ in range(cfg.links)] for _ in range(self.n)]
        self.elastic = [[[None, None] for _ in range(cfg.links)] for _ in range(self.n)]
        self.series = []
        self.samples = 0
        self.skew = []           # SAC(child) - SAC(root) while both run unstalled
        self._ports = {name: [getattr(dut, f"t{i}_{name}") for i in range(self.n)]
                       for name in ("hac", "rx_level", "elastic_level", "stall", "sac", "running")}

    @staticmethod
    def _minmax(mm, v):
        mm[0] = v if mm[0] is None else min(mm[0], v)
        mm[1] = v if mm[1] is None else max(mm[1], v)

    async def loop(self):
        p0 = self.drivers[0].period
        while not self.stop:
            await Timer(self.every * p0 + self.rng.randrange(p0), unit="fs")
            await ReadOnly()
            if self.stop:
                break
            self.sample()

    def sample(self):
        t = int(get_sim_time("fs"))
        hac, stall, sac, running = ([int(s.value) for s in self._ports[name]]
                                    for name in ("hac", "stall", "sac", "running"))
        frac = [((t - d.clock_t0) % d.period) / d.period for d in self.drivers]
        e_int = [signed32(hac[i] - hac[0]) for i in range(1, self.n)]
        errs = [e + frac[i] - frac[0] for i, e in enumerate(e_int, 1)]
        self.err_int += e_int
        self.err += errs
        rx, el = ([_levels(int(s.value), self.cfg) for s in self._ports[name]]
                  for name in ("rx_level", "elastic_level"))
        for i in range(self.n):
            for k in range(self.cfg.links):
                self._minmax(self.rx[i][k], rx[i][k])
                self._minmax(self.elastic[i][k], el[i][k])
        skews = []
        if all(running) and not any(stall):
            skews = [sac[i] + frac[i] - sac[0] - frac[0] for i in range(1, self.n)]
            self.skew += skews
        self.samples += 1
        if len(self.series) < self.record:
            self.series.append({"t_fs": t, "hac": hac, "sac": sac, "err": errs, "skew": skews, "rx": rx,
                                "elastic": el, "stall": stall, "running": running})

    def summary(self) -> dict:
        return {"samples": self.samples,
                "hac_error": [min(self.err, default=0.0), max(self.err, default=0.0)],
                "hac_error_int": [min(self.err_int, default=0), max(self.err_int, default=0)],
                "sac_skew": [min(self.skew, default=0.0), max(self.skew, default=0.0)],
                "rx_level": self.rx, "elastic_level": self.elastic, "series": self.series}


class Recorder:
    """Every tile's state on each of its own rising edges (read after the edge, so each
    record is the state during the cycle that edge starts) while tile ``tile``'s SAC is
    in ``sac_from..sac_to``: for timing diagrams and latency measurements."""

    def __init__(self, dut, cfg, drivers, tile: int, sac_from: int, sac_to: int):
        self.dut, self.cfg, self.drivers = dut, cfg, drivers
        self.tile, self.sac_from, self.sac_to = tile, sac_from, sac_to
        self.records = [[] for _ in drivers]
        self.on = self.off = False

    async def loop(self):
        d = self.drivers[self.tile]
        sac, running = getattr(self.dut, f"t{self.tile}_sac"), d.dut.running
        # Coarse wait (no Python per cycle) until shortly before the window.
        while not (int(running.value) and int(sac.value) >= self.sac_from - 40):
            await Timer(16 * d.period, unit="fs")
        await _all(self._tile(i) for i in range(len(self.drivers)))

    async def _tile(self, i):
        dut, links = self.dut, range(self.cfg.links)
        clk = self.drivers[i].dut.clk
        p = {name: getattr(dut, f"t{i}_{name}") for name in ("sac", "hac", "stall", "running", "rx_level",
                                                            "elastic_level")}
        tx = [(getattr(dut, f"t{i}_l{k}_tx_valid"), getattr(dut, f"t{i}_l{k}_tx_kind")) for k in links]
        ref = getattr(dut, f"t{self.tile}_sac")
        while not self.off:
            await RisingEdge(clk)
            await ReadOnly()
            r = int(ref.value)
            if i == self.tile:
                self.on = self.on or r >= self.sac_from
                if r > self.sac_to or not int(p["running"].value):
                    self.off = True
            if not self.on:
                continue
            self.records[i].append({
                "t_fs": int(get_sim_time("fs")), "sac": int(p["sac"].value), "hac": int(p["hac"].value),
                "stall": int(p["stall"].value), "running": int(p["running"].value),
                "tx": [int(k.value) if int(v.value) else -1 for v, k in tx],
                "rx": _levels(int(p["rx_level"].value), self.cfg),
                "elastic": _levels(int(p["elastic_level"].value), self.cfg)})


async def inject(dut, drv: TileDriver, tile: int, link: int, mask: int, after_cycles: int, count: int, log,
                 hit: list):
    """XOR ``mask`` into ``count`` valid flits leaving ``tile`` on ``link`` (each one
    exactly: set on the falling edge before the rising edge that takes the flit into the
    wire, cleared on the next falling edge).  ``hit`` gets the time of every flit hit, as
    it is hit: the run may end (and cancel this) before ``count`` flits were sent."""
    port = getattr(dut, f"t{tile}_l{link}_inject")
    valid = getattr(dut, f"t{tile}_l{link}_tx_valid")
    clk = drv.dut.clk
    if not int(drv.dut.running.value):
        await RisingEdge(drv.dut.running)
    await ClockCycles(clk, after_cycles)
    while len(hit) < count:       # cancelled at the run's end: one_run clears the ports of the next
        await FallingEdge(clk)
        if int(valid.value):
            port.value = mask
            hit.append(int(get_sim_time("fs")))
            await FallingEdge(clk)
            port.value = 0
    log.info("injected %#x into %d flit(s) of tile %d link %d", mask, len(hit), tile, link)


async def inject_idle(dut, drv: TileDriver, tile: int, link: int, mask: int) -> int:
    """XOR ``mask`` into the next valid flit leaving ``tile`` on ``link``, running or not
    (between runs: a SYNC or a latency probe); the time it was hit, in femtoseconds."""
    port = getattr(dut, f"t{tile}_l{link}_inject")
    valid = getattr(dut, f"t{tile}_l{link}_tx_valid")
    clk = drv.dut.clk
    while True:
        await FallingEdge(clk)
        if int(valid.value):
            port.value = mask
            t = int(get_sim_time("fs"))
            await FallingEdge(clk)
            port.value = 0
            return t


async def observe(cfg, drv: TileDriver, job: dict, done: bool) -> dict:
    """A tile's observation after a run: STATUS, cycles, busy counters, the trace and the
    C2C registers.  A tile not done (still running, or never started: its HAC did not
    lock), or halted by a deskew stall beyond its bound, has its core (and its memories'
    read ports) frozen: its trace is not read, and every row of its MEM slices counts as
    written for the next run's load."""
    status = await drv.read_status()
    trace_read = done and not status["status"] & Status.DESKEW_TIMEOUT
    events = await drv.read_trace() if cfg.trace_depth and trace_read else []
    if not trace_read:
        for name in cfg.mem_names:
            drv.dirty[name] = set(range(cfg.mem_depth))
    return {"name": job.get("name", ""), "cycles": status["cycles"], **status, "events": events, "read_back": {},
            "c2c": await drv.read_c2c(), "done": done, "trace_read": trace_read,
            "fault_names": link_fault_names(status["status"])}


async def restart(dut, cfg, drivers, run) -> dict:
    """Restart every tile's clock at the run's period and phase, clear the injection ports
    and reset every tile; how every result begins (the clocks as started)."""
    for i, d in enumerate(drivers):
        d.stop_clock()
        d.period, d.phase = run["period_fs"][i], run["phase_fs"][i]
    await _all(d.start_clock() for d in drivers)
    head = {**{k: run[k] for k in ("name", "ppm", "period_fs", "phase_fs")},
            "clock_t0_fs": [d.clock_t0 for d in drivers]}
    clear_injections(dut, cfg, len(drivers))
    await _all(d.reset(4) for d in drivers)
    return head


async def wait_lock(drv: TileDriver, limit: int = 50_000) -> bool:
    """Poll a tile's ``HAC_STATUS`` every 50 cycles until its HAC is locked (False: not
    within ``limit`` cycles)."""
    for _ in range(limit // 50):
        if await drv.read_csr(Csr.HAC_STATUS) & HacStatus.LOCKED:
            return True
        await ClockCycles(drv.dut.clk, 50)
    return False


async def arm_and_run(cfg, drivers, run) -> dict:
    """Read tile 0's HAC, arm every tile to start at ``START_HAC`` (``armed_start_hac``) and
    wait for every tile's done (or the timeout); the start's HAC cycles and times.  A start
    lead too short to arm every tile in time is an error."""
    hac0 = await drivers[0].read_csr(Csr.HAC)
    start_hac = armed_start_hac(cfg, hac0, run["start_lead"])
    await _all(d.arm_start_at(start_hac) for d in drivers)
    armed_by = await drivers[0].read_csr(Csr.HAC)
    left = (start_hac - armed_by) % (1 << 32)
    if not 4 <= left <= (start_hac - hac0) % (1 << 32):     # (a tile starts 2 cycles after its arm lands)
        raise RuntimeError(f"arming every tile took until HAC {armed_by}, past START_HAC {start_hac}: the start lead "
                           f"of {run['start_lead']} cycles is too short")
    t0 = time.perf_counter()
    t_start = int(get_sim_time("fs"))
    await _all(_start_then_done(d, run["start_lead"] + 2 * cfg.epoch, run["timeout_cycles"]) for d in drivers)
    return {"start_hac": start_hac, "hac_read": hac0, "hac_armed": armed_by, "t_start_fs": t_start,
            "wall_run_s": time.perf_counter() - t0}


async def _start_then_done(d: TileDriver, lead: int, timeout: int) -> None:
    """Wait for an armed tile's start, then for its done: a tile that ran before still
    shows the last run's done until its start (within ``lead`` cycles) drops it."""
    if int(d.dut.done.value):
        await First(FallingEdge(d.dut.done), Timer(lead * d.period, unit="fs"))
    await d.wait_done(timeout + lead)


def watch(dut, cfg, drivers, run, log):
    """Start the run's watchers: the sampler, the window's recorder (if any) and every fault
    injection; ``(sampler, its task, recorder, its task, hits per injection, injection tasks)``."""
    sampler = Sampler(dut, cfg, drivers, run["sample_every"], run["record"], run["seed"] + 1)
    sampling = cocotb.start_soon(sampler.loop())
    recorder = recording = None
    if run.get("window"):
        w = run["window"]
        recorder = Recorder(dut, cfg, drivers, w["tile"], w["sac_from"], w["sac_to"])
        recording = cocotb.start_soon(recorder.loop())
    hits = [[] for _ in run["inject"]]
    injections = [cocotb.start_soon(inject(dut, drivers[x["tile"]], x["tile"], x["link"], x["mask"],
                                           x.get("after_cycles", 0), x.get("count", 1), log, h))
                  for x, h in zip(run["inject"], hits)]
    return sampler, sampling, recorder, recording, hits, injections


async def one_run(dut, cfg, drivers, run) -> dict:
    """One run of the spec (the module's steps 1 to 5): restart, load, lock, arm, run, observe."""
    log = dut._log
    head = await restart(dut, cfg, drivers, run)
    await _all(d.load_job(job) for d, job in zip(drivers, run["jobs"]))
    locked = await _all(wait_lock(d) for d in drivers)
    if not all(locked):            # reported like a timeout: the batch goes on
        not_locked = [i for i, ok in enumerate(locked) if not ok]
        log.warning("run %s: HAC not locked on tile(s) %s", run["name"], not_locked)
        tiles = [await observe(cfg, drv, run["jobs"][i], False) for i, drv in enumerate(drivers)]
        return {**head, "tiles": tiles, "timed_out": True, "hac_not_locked": not_locked,
                "injected": [0] * len(run["inject"]), "inject_requested": [x.get("count", 1) for x in run["inject"]],
                "wall_run_s": 0.0, "window": None, **Sampler(dut, cfg, drivers, run["sample_every"], 0, 0).summary()}
    return await run_loaded(dut, cfg, drivers, run, head)


async def _each(coros, together: bool) -> list:
    """Await coroutines one after another, or (``together``) concurrently; their results in order."""
    if together:
        return await _all(coros)
    return [await c for c in coros]


async def run_loaded(dut, cfg, drivers, run, head: dict, together: bool = False) -> dict:
    """Steps 3 to 5 of a run on tiles loaded and locked: arm, run (watched), observe (every
    tile's host bus one after another, or ``together``: all at once)."""
    log = dut._log
    requested = [x.get("count", 1) for x in run["inject"]]     # the flits each injection asks for
    t_lock = int(get_sim_time("fs"))
    sampler, sampling, recorder, recording, hits, injections = watch(dut, cfg, drivers, run, log)
    log.info("job %s: loaded, running", run["name"])     # progress (sim/harness/progress.py): loaded and locked
    started = await arm_and_run(cfg, drivers, run)
    sampler.stop = True
    await sampling
    if recorder is not None:
        recorder.off = True
        if not recording.done():
            recording.cancel()
    done = [bool(int(d.dut.done.value)) for d in drivers]
    timed_out = not all(done)
    t_done = int(get_sim_time("fs"))
    for inj in injections:
        if not inj.done():
            inj.cancel()
    tiles = await _each([observe(cfg, drv, run["jobs"][i], done[i]) for i, drv in enumerate(drivers)], together)
    if timed_out:
        log.warning("run %s: timed out, not every tile is done: %s", run["name"],
                    "; ".join(f"tile {i} STATUS {t['status']:#x} SAC {t['cycles']}"
                              f"{' (' + ', '.join(t['fault_names']) + ')' if t['fault_names'] else ''}"
                              for i, t in enumerate(tiles)))
    summ = sampler.summary()
    log.info("job %s: %d cycles, %d events", run["name"], max(t["cycles"] for t in tiles),
             sum(len(t["events"]) for t in tiles))       # progress: the last tile's cycles, every tile's writes
    log.info("run %s: ppm %s, cycles %s, HAC error %.3f..%.3f, %.1f s", run["name"], run["ppm"],
             [t["cycles"] for t in tiles], summ["hac_error"][0], summ["hac_error"][1], started["wall_run_s"])
    return {**head, "start_hac": started["start_hac"], "hac_read": started["hac_read"],
            "hac_armed": started["hac_armed"], "t_lock_fs": t_lock, "t_start_fs": started["t_start_fs"],
            "t_done_fs": t_done, "wall_run_s": started["wall_run_s"], "tiles": tiles,
            "timed_out": timed_out, "injected": [len(h) for h in hits], "inject_requested": requested,
            "window": recorder.records if recorder is not None else None, **summ}


# ---- a tray that never stops (docs/tray.md, "The steady state") ---------------------------------
# The host reads STATUS before arming every run, so a fault (hostmap.FAULTS) raised between two
# runs is reported before the start clears it.

class SteadyTray:
    """The host of a tray that never stops: the first run restarts the clocks, resets every
    tile, loads it whole through the load port and waits for HAC lock (as :func:`one_run`);
    every later run keeps the clocks, the HAC and its lock and writes only what differs from
    what the tile holds: x's rows, the base registers (the routing) and ``Csr.ENTRY``, and
    (when a run's programs are not resident beside the earlier ones) the rows, instructions
    and VXM words of the new programs, each counted by kind.  Before arming a run the host
    reads every tile's STATUS: a fault flag set since the last run's observation (a fault
    between runs, which the start would clear) is reported with the run.

    The host works the tiles' buses one after another, or with ``together`` all at once (every
    tile has a bus of its own): the pre-arm reads, the writes, the observation and y's reads.

    A *want* per tile (:func:`want`) says what the tile is to hold for the run."""

    KINDS = ("x", "routing", "entry", "weights", "instructions", "vxm")

    def __init__(self, dut, cfg, drivers, together: bool = False):
        self.dut, self.cfg, self.drivers = dut, cfg, drivers
        self.together = together
        self.held = None          # per tile: {slice: array} as the host last wrote it
        self.observed = [0] * len(drivers)   # STATUS at the last run's observation
        self.head = None

    async def load(self, wants: list) -> dict:
        """Write every tile's want (the first: everything, through the load port); the bytes
        written by kind (``KINDS``), the bus cycles it took (tile 0's) and the pre-arm check."""
        cfg, drivers = self.cfg, self.drivers
        t0 = int(get_sim_time("fs"))
        if self.held is None:
            for d, w in zip(drivers, wants):
                before = d.loaded_bytes
                await d.load_job({"images": w["images"], "vxm_params": w["vxm_params"], "table": w["table"],
                                  "bases": w["bases"], "memory": _with_rows(w["memory"], w["x"])})
                d.imem_words = {cfg.queue_index(n): dict(enumerate(words)) for n, words in w["images"].items()}
                if w["entry"]:
                    await d.write_words([(hostmap.csr(Csr.ENTRY), w["entry"])])
                    d.entry = w["entry"]
                    d.loaded_bytes += 4
                d.first_bytes = d.loaded_bytes - before
            self.held = [{n: a.copy() for n, a in w["memory"].items()} for w in wants]
            for held, w in zip(self.held, wants):
                for name, rows in w["x"].items():
                    for r, v in rows.items():
                        held[name][r] = v
            return {"first": True, "bytes": {"first_load": sum(d.first_bytes for d in drivers)}}
        sent = {k: 0 for k in self.KINDS}
        await _each([self._write(t, d, w, sent) for t, (d, w) in enumerate(zip(drivers, wants))], self.together)
        p0 = drivers[0].period
        return {"first": False, "bytes": sent, "host_cycles": (int(get_sim_time("fs")) - t0) // p0}

    async def _write(self, t: int, d: TileDriver, w: dict, sent: dict) -> None:
        """Write what differs of tile ``t``'s want ``w``, counting the bytes by kind in ``sent``."""
        cfg = self.cfg
        held = self.held[t]
        xs = {n: dict(rows) for n, rows in w["x"].items()}
        other = {}
        for name, image in (w["memory"] or {}).items():
            old = held.setdefault(name, np.zeros_like(image))
            for r in np.flatnonzero((image != old).any(axis=1)).tolist():
                if r not in xs.get(name, {}):
                    other.setdefault(name, {})[r] = image[r].tolist()
            held[name] = image.copy()
        for name, rows in xs.items():
            for r, v in rows.items():
                held[name][r] = v
        images = {}
        for name, words in w["images"].items():
            held_words = d.imem_words.setdefault(cfg.queue_index(name), {})
            images[name] = {i: v for i, v in enumerate(words) if held_words.get(i) != v}
            held_words.update(images[name])
        entry = [(hostmap.csr(Csr.ENTRY), w["entry"])] if w["entry"] != d.entry else []
        for kind, write in (("x", lambda: d.load_memory(xs)), ("weights", lambda: d.load_memory(other)),
                            ("vxm", lambda: d.load_vxm(w["vxm_params"], w["table"])),
                            ("instructions", lambda: d.load_program_words(images)),
                            ("routing", lambda: d.load_bases(w["bases"])),
                            ("entry", lambda: d.write_words(entry))):
            before = d.loaded_bytes
            await write()
            sent[kind] += d.loaded_bytes - before
        sent["entry"] += 4 * len(entry)
        d.entry = w["entry"]

    async def run(self, run: dict, wants: list) -> dict:
        """One run: the first restarts, resets, loads and locks; the others load what differs;
        then arm, run, observe (:func:`run_loaded`); ``y_rows`` per tile ({slice: rows}) are
        read back over the bus and counted as ``y_bytes``."""
        dut, cfg, drivers = self.dut, self.cfg, self.drivers
        if self.head is None:
            self.head = await restart(dut, cfg, drivers, run)
            loaded = await self.load(wants)
            locked = await _all(wait_lock(d) for d in drivers)
            if not all(locked):
                raise RuntimeError(f"HAC not locked on tile(s) {[i for i, ok in enumerate(locked) if not ok]} "
                                   "after the first load")
        else:
            t0 = int(get_sim_time("fs"))
            # The pre-arm check: STATUS; a fault flag the last observation did not see is new.
            statuses = await _each([d.read_csr(Csr.STATUS) for d in drivers], self.together)
            pre = [{"status": status, "between": fault_names(status & ~self.observed[t]),
                    "hac_locked": bool(status & Status.HAC_LOCKED)} for t, status in enumerate(statuses)]
            loaded = await self.load(wants)
            loaded["pre_arm"] = pre
            loaded["host_cycles"] = (int(get_sim_time("fs")) - t0) // drivers[0].period
        read0 = sum(d.read_bytes for d in drivers)
        res = await run_loaded(dut, cfg, drivers, run, {**self.head, "name": run["name"]}, self.together)
        verify_read = sum(d.read_bytes for d in drivers) - read0 - 4    # but the HAC read that arms the start
        self.observed = [o["status"] for o in res["tiles"]]
        t0 = int(get_sim_time("fs"))
        y = await _each([self._read_y(d, w) for d, w in zip(drivers, wants)], self.together)
        y_bytes = sum(len(rows) for w in wants for rows in w.get("y_rows", {}).values()) * cfg.lanes
        res.pop("window", None)
        res.update({"loaded": loaded, "y_bytes": y_bytes, "y_memory": y, "verify_read_bytes": verify_read,
                    "y_cycles": (int(get_sim_time("fs")) - t0) // drivers[0].period,
                    "resets": [d.resets for d in drivers], "clock_starts": [d.clock_starts for d in drivers],
                    "read_bytes": [d.read_bytes for d in drivers]})
        return res


    async def _read_y(self, d: TileDriver, w: dict) -> dict:
        """A tile's MEM with the rows of its want's ``y_rows`` read back over the bus (zeros elsewhere)."""
        cfg = self.cfg
        mem = {n: np.zeros((cfg.mem_depth, cfg.lanes), np.uint8) for n in cfg.mem_names}
        for name, rows in w.get("y_rows", {}).items():
            rows = sorted(rows)
            for r, v in zip(rows, await d.read_vectors(name, rows)):
                mem[name][r] = v
        return mem


def _with_rows(memory: dict, rows: dict) -> dict:
    """``memory`` ({slice: array}) as lists, with ``rows`` ({slice: {row: vector}}) written."""
    out = {n: a.tolist() for n, a in memory.items()}
    for name, rs in rows.items():
        for r, v in rs.items():
            out[name][r] = list(v)
    return out


def want(program, bases=None, entry: int = 0, images=None, memory=None, x=None, y_rows=None) -> dict:
    """What a tile of a :class:`SteadyTray` is to hold for a run of ``program``: its images
    (or ``images``: every resident program's), its MEM image (``memory``: another image, or
    ``False``: what the tile holds), x's rows ``x`` ({slice: {row: vector}}, written every
    run), its VXM words, ``bases`` (host words; None: all 0), ``entry``, and the rows of y
    the host reads back (``{slice: rows}``)."""
    from sim.harness.runner import base_words
    mem = program.memory if memory is None else memory
    return {"images": images if images is not None else program.images(),
            "memory": None if mem is False else {n: np.asarray(a, np.uint8) for n, a in mem.items()},
            "x": {n: {int(r): [int(b) & 0xFF for b in v] for r, v in rows.items()} for n, rows in (x or {}).items()},
            "vxm_params": program.vxm_params.tolist(), "table": program.table.tolist(),
            "bases": base_words(program.config, bases), "entry": int(entry), "y_rows": y_rows or {}}


@cocotb.test()
async def run_system(dut):
    spec = read_spec()
    precision = cocotb.simulator.get_precision()
    if precision != FS_PRECISION:
        raise RuntimeError(f"the simulator's time precision is 1e{precision} s, not femtoseconds: the "
                           "timescale did not take effect and ppm-level clock periods would be rounded")
    cfg = TileConfig.from_dict(spec["config"])
    drivers = tile_drivers(dut, cfg, spec["tiles"], spec.get("load") == "port")
    results = [await one_run(dut, cfg, drivers, run) for run in spec["runs"]]
    write_results(results, precision=precision)
