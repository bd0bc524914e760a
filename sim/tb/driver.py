"""cocotb driver for the tile's host interface: load, run, read back.

All accesses are driven and sampled on the falling clock edge, so values set here are
stable at the rising edge that samples them, and registered outputs are settled when read.
"""

from __future__ import annotations

import json
import os
import time

from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, FallingEdge, First, RisingEdge, Timer

from hdl.top.simtop import INPUT_LATENCY
from lpu_arch import hostmap
from lpu_arch.hostlink import ACK, read_cmd, write_cmd
from lpu_arch.hostmap import (LINK_WORDS, Csr, Ctrl, DeskewStatus, HacStatus, LinkFlag, LinkReg, Region,
                              Status)
from lpu_arch.isa import INSTR_BITS
from lpu_arch.vxm import PARAM_WORDS as VXM_PARAM_WORDS, param_words, reset_words, table_words


def read_spec() -> dict:
    """A testbench's spec: the JSON file ``LPU_JOBS`` names (written by ``sim.harness.runner.run_testbench``)."""
    with open(os.environ["LPU_JOBS"]) as f:
        return json.load(f)


def write_results(results: list, **extra) -> None:
    """A testbench's observations, ``{"results": results, **extra}``, into ``LPU_RESULTS``."""
    with open(os.environ["LPU_RESULTS"], "w") as f:
        json.dump({"results": results, **extra}, f)


class Ports:
    """Ports named with a prefix: ``Ports(dut, "t1_").clk`` is ``dut.t1_clk`` (one tile
    of a system, ``hdl/top/system.py``), ``Ports(dut, "host__").addr`` is ``dut.host__addr``
    (the host bus), so a :class:`TileDriver` drives any tile of a system."""

    def __init__(self, dut, prefix: str):
        self._dut, self._prefix = dut, prefix
        self._log = dut._log

    def __getattr__(self, name):
        return getattr(self._dut, self._prefix + name)


class ConfigMismatch(RuntimeError):
    """The tile was built from another configuration than the driver's (the program's);
    ``problems`` lists every difference (``hostmap.config_mismatch``)."""

    def __init__(self, problems):
        self.problems = list(problems)
        super().__init__("the tile's configuration does not match the program's: " + "; ".join(self.problems))


class TileDriver:
    """Drives one ``lpu_tile`` through its host bus.

    ``period``/``unit`` set the clock; ``phase`` delays its first edge (tiles of a system get
    unrelated phases).  The first load of every job checks the tile's configuration CSRs
    against ``cfg`` (:meth:`check_config`).  ``load_port``: MEM images, programs and VXM
    parameters go through the vector load port (a row into every slice per cycle) instead of
    the bus; ``loaded_bytes`` counts the bytes loaded by either path."""

    def __init__(self, dut, cfg, *, period=10.0, unit: str = "ns", phase=0, load_port: bool = False):
        self.dut, self.cfg = dut, cfg
        self.period, self.unit, self.phase = period, unit, phase
        self.clock = None
        self.clock_t0 = None      # simulation time (in ``unit``) of the clock's first rising edge
        # What the VXM's parameter and table memories hold (they power up as a fresh
        # Program's and are not cleared by a start), so load_vxm writes only changes.
        self.vxm_words = reset_words(cfg)
        # What the base registers hold (host words; reset clears them, a start does not).
        self.base_words = [0] * cfg.base_regs
        self.config_checked = False   # check_config passed since the last reset or run
        self.load_port = load_port
        self.loaded_bytes = 0
        # Rows of each MEM slice that may differ from zero (load_job rewrites them).
        self.dirty = {name: set() for name in cfg.mem_names}
        self.entry = 0            # what Csr.ENTRY holds (reset clears it, a start does not)
        self.imem_words = {}      # position -> instruction words the queue holds (resident jobs)
        # What the host did to the tile: bytes read over the bus, resets and clock (re)starts
        # (a tray that never stops, sim/tb/system.py, has one of each, before its first load).
        self.read_bytes = 0
        self.resets = 0
        self.clock_starts = 0

    async def start_clock(self):
        """Start (or restart, after ``stop_clock``) the clock: ``phase`` from now, 50:50,
        driven by the simulator (not by a Python coroutine)."""
        from cocotb.simtime import get_sim_time
        if self.phase:
            await Timer(self.phase, unit=self.unit)
        self.clock_t0 = int(get_sim_time(self.unit)) if self.unit == "fs" else get_sim_time(self.unit)
        self.clock_starts += 1
        self.clock = Clock(self.dut.clk, self.period, unit=self.unit, impl="gpi",
                           period_high=self.period // 2)
        self.clock.start()

    def stop_clock(self):
        if self.clock is not None:
            self.clock.stop()
            self.clock = None

    async def reset(self, cycles: int = 3):
        dut = self.dut
        if self.unit == "ns" and not self.phase:
            Clock(dut.clk, self.period, unit="ns").start()
        elif self.clock is None:
            await self.start_clock()
        dut.rst.value = 1
        self.resets += 1
        self._idle()
        self.config_checked = False
        self.base_words = [0] * self.cfg.base_regs
        self.entry, self.imem_words = 0, {}
        await ClockCycles(dut.clk, cycles)
        await FallingEdge(dut.clk)
        dut.rst.value = 0

    def _idle(self):
        bus = Ports(self.dut, "host__")
        for name in ("we", "re", "addr", "wdata"):
            getattr(bus, name).value = 0
        try:            # the load port idles even when the bus loads (an undriven input is X on Icarus)
            load = Ports(self.dut, "load__")
            load.mask.value = 0
            load.region.value = 0
        except AttributeError:
            if self.load_port:
                raise

    async def write_words(self, items):
        """Write ``[(address, value), ...]``, one per cycle."""
        clk, bus = self.dut.clk, Ports(self.dut, "host__")
        for a, v in items:
            await FallingEdge(clk)
            bus.addr.value = a
            bus.wdata.value = v & 0xFFFFFFFF
            bus.we.value = 1
        await FallingEdge(clk)
        bus.we.value = 0

    async def write_rows(self, region: Region, rows, lane_bytes: int):
        """Write ``[(row, {lane: value}), ...]`` through the vector load port, one row (into
        every lane given) per cycle; ``lane_bytes``: what one lane carries, for
        ``loaded_bytes``."""
        clk, ld = self.dut.clk, Ports(self.dut, "load__")
        data = [getattr(ld, f"data__{k}") for k in range(hostmap.load_lanes(self.cfg))]
        row_h, mask_h = ld.row, ld.mask
        ld.region.value = int(region)
        n = 0
        for row, lanes in rows:
            await FallingEdge(clk)
            row_h.value = row
            mask = 0
            for k, v in lanes.items():
                data[k].value = v
                mask |= 1 << k
            mask_h.value = mask
            n += len(lanes)
        await FallingEdge(clk)
        mask_h.value = 0
        self.loaded_bytes += lane_bytes * n

    async def read_words(self, addrs):
        """Read a list of addresses, pipelined one per cycle; returns their values."""
        clk, bus, out, addrs = self.dut.clk, Ports(self.dut, "host__"), [], list(addrs)
        i = 0
        while len(out) < len(addrs):
            await FallingEdge(clk)
            if int(bus.rvalid.value):
                value = bus.rdata.value
                if not value.is_resolvable:      # X or Z: the design drove no defined value
                    a = addrs[len(out)]
                    raise AssertionError(f"the host read an undefined value ({value}) at 0x{a:08x}: "
                                         f"{hostmap.Region(a >> hostmap.REGION_SHIFT).name} slice "
                                         f"{(a >> hostmap.SLICE_SHIFT) & 0xFF} word {a & hostmap.WORD_MASK}")
                out.append(int(value))
            if i < len(addrs):
                bus.addr.value = addrs[i]
                bus.re.value = 1
                i += 1
            else:
                bus.re.value = 0
        bus.re.value = 0
        self.read_bytes += 4 * len(addrs)
        return out

    async def wait_done(self, timeout_cycles: int):
        dut = self.dut
        if not int(dut.done.value) or int(dut.running.value):
            # A Timer, not ClockCycles: counting edges would call into Python every cycle.
            await First(RisingEdge(dut.done), Timer(timeout_cycles * self.period, unit=self.unit))

    async def read_csr(self, reg):
        return (await self.read_words([hostmap.csr(reg)]))[0]

    # ---- configuration check --------------------------------------------------------
    async def check_config(self):
        """Raise :class:`ConfigMismatch` unless the tile was built from ``self.cfg``:
        three reads when they agree, the field words too to name every difference."""
        cfg = self.cfg
        header = await self.read_words([hostmap.csr(r) for r in hostmap.CONFIG_HEADER])
        if header != hostmap.config_header(cfg):
            words = []
            if header[0] == hostmap.CONFIG_FORMAT_VERSION:
                n = min(header[1], hostmap.CONFIG_MAX_FIELDS)
                words = await self.read_words([hostmap.csr(Csr.CONFIG_BASE + k) for k in range(n)])
            raise ConfigMismatch(hostmap.config_mismatch(cfg, words, header)
                                 or [f"configuration header: tile has {header}, program needs "
                                     f"{hostmap.config_header(cfg)}"])
        self.config_checked = True

    async def _ensure_config(self):
        if not self.config_checked:
            await self.check_config()

    # ---- loading -------------------------------------------------------------------
    async def load_job(self, job: dict):
        """Load a job (``runner.job``): every MEM row the image or an earlier job may have
        left nonzero (``dirty``), then VXM words, base registers and programs where they differ."""
        if job.get("resident"):
            await self.load_resident(job)
            return
        self.imem_words = {}      # an ordinary job rewrites its queues: a later resident job loads them again
        if self.entry:
            await self.write_words([(hostmap.csr(Csr.ENTRY), 0)])
            self.entry = 0
        memory, cfg = job.get("memory", {}), self.cfg
        writes = {}
        for name in cfg.mem_names:
            image = memory.get(name, [])
            nonzero = {r for r, row in enumerate(image) if any(row)}
            zero = [0] * cfg.lanes
            writes[name] = {r: (image[r] if r < len(image) else zero) for r in sorted(nonzero | self.dirty[name])}
            self.dirty[name] = nonzero
        await self.load_memory(writes)
        if "vxm_params" in job or "table" in job:
            await self.load_vxm(job.get("vxm_params"), job.get("table"))
        await self.load_bases(job.get("bases"))
        await self.load_program(job["images"])

    async def load_resident(self, job: dict):
        """A job on a tile whose programs and weights stay resident (the decode loop): write
        only ``memory_rows`` and the VXM, base register and instruction words that differ from
        what the tile holds, and ``entry`` (``Csr.ENTRY``) when it changes."""
        await self.load_memory({n: {int(r): v for r, v in rows.items()} for n, rows in job.get("memory_rows", {}).items()})
        if "vxm_params" in job or "table" in job:
            await self.load_vxm(job.get("vxm_params"), job.get("table"))
        await self.load_bases(job.get("bases"))
        images = {}
        for name, words in job.get("images", {}).items():
            p = self.cfg.queue_index(name)
            held = self.imem_words.setdefault(p, {})
            images[name] = {i: w for i, w in enumerate(words) if held.get(i) != w}
            held.update(images[name])
        await self.load_program_words(images)
        entry = int(job.get("entry", 0))
        if entry != self.entry:
            await self.write_words([(hostmap.csr(Csr.ENTRY), entry)])
            self.entry = entry
            self.loaded_bytes += 4

    async def load_program_words(self, images: dict):
        """``images[name] = {index: 64-bit word}``: only those instructions, over the bus."""
        await self._ensure_config()
        items = []
        for name, words in images.items():
            p = self.cfg.queue_index(name)
            for i, w in words.items():
                items.append((hostmap.addr(Region.IMEM, p, 2 * i), w & 0xFFFFFFFF))
                items.append((hostmap.addr(Region.IMEM, p, 2 * i + 1), w >> 32))
        await self.write_words(items)
        self.loaded_bytes += 4 * len(items)

    async def load_bases(self, words=None, force: bool = False):
        """Write base registers 1.. (``words``, one host word each; None: all 0), only those
        that differ unless ``force``; the number written."""
        await self._ensure_config()
        n = self.cfg.base_regs
        words = [0] * n if words is None else [int(w) for w in words]
        if len(words) != n:
            raise ValueError(f"{len(words)} base register words; the tile has {n} registers")
        items = [(hostmap.csr(Csr.BASE_REG_BASE + r), words[r]) for r in range(1, n)
                 if force or words[r] != self.base_words[r]]
        await self.write_words(items)
        self.base_words[1:] = words[1:]
        self.loaded_bytes += 4 * len(items)
        return len(items)

    async def read_bases(self):
        """Every base register's host word, as the tile reads it back (register 0: 0)."""
        return await self.read_words([hostmap.csr(Csr.BASE_REG_BASE + r) for r in range(self.cfg.base_regs)])

    async def load_program(self, images: dict):
        await self._ensure_config()
        if not self.load_port:
            await self.load_program_words({name: dict(enumerate(words)) for name, words in images.items()})
            return
        rows = {}
        for name, words in images.items():
            p = self.cfg.queue_index(name)
            for i, w in enumerate(words):
                rows.setdefault(i, {})[p] = w
        await self.write_rows(Region.IMEM, sorted(rows.items()), INSTR_BITS // 8)

    async def load_memory(self, memory: dict):
        """``memory[name] = {row: vector}`` (only the given rows are written)."""
        await self._ensure_config()
        cfg = self.cfg
        vectors = [(cfg.mem_names.index(name), int(row), _lane_bytes(vec))
                   for name, rows in memory.items() for row, vec in rows.items()]
        if self.load_port:
            rows = {}
            for i, row, data in vectors:
                rows.setdefault(row, {})[i] = int.from_bytes(data, "little")
            await self.write_rows(Region.DMEM, sorted(rows.items()), cfg.lanes)
            return
        wpv = cfg.words_per_vector
        items = [(hostmap.addr(Region.DMEM, i, row * wpv + w), int.from_bytes(data[4 * w:4 * w + 4], "little"))
                 for i, row, data in vectors for w in range(wpv)]
        await self.write_words(items)
        self.loaded_bytes += 4 * len(items)

    async def load_vxm(self, params=None, table=None, force: bool = False):
        """Write the VXM parameters (like ``Program.vxm_params``) and activation tables (like
        ``Program.table``, or one table), fewer entries or tables leaving the rest; only words
        that differ unless ``force`` (the load port writes whole lane entries).  Returns the bus
        words and port lanes written."""
        await self._ensure_config()
        items, n_port = [], 0
        if params is not None and self.load_port:
            held, lanes, pw = self.vxm_words[0], self.cfg.lanes, VXM_PARAM_WORDS
            words, rows = param_words(params), []
            for e in range(len(words) // (lanes * pw)):
                entry = {}
                for lane in range(lanes):
                    at = (e * lanes + lane) * pw
                    new = words[at:at + pw]
                    if force or held[at:at + pw] != new:
                        entry[lane] = _join_words(new)
                        held[at:at + pw] = new
                if entry:
                    rows.append((e, entry))
            await self.write_rows(Region.VXM_PARAM, rows, 4 * pw)
            n_port = sum(len(r) for _, r in rows)
            params = None
        for region, k, words in ((Region.VXM_PARAM, 0, None if params is None else param_words(params)),
                                 (Region.VXM_TABLE, 1, None if table is None else table_words(table))):
            if words is None:
                continue
            held = self.vxm_words[k]
            for i, w in enumerate(words):
                if force or held[i] != w:
                    items.append((hostmap.addr(region, 0, i), w))
                    held[i] = w
        await self.write_words(items)
        self.loaded_bytes += 4 * len(items)
        return len(items) + n_port

    async def read_vxm(self):
        """Read back the whole VXM parameter memory and every table: ``(param words, table
        words)`` (entry ``i`` of table ``t`` is table word ``t * 256 + i``)."""
        return tuple([await self.read_words([hostmap.addr(region, 0, i) for i in range(len(held))])
                      for region, held in zip((Region.VXM_PARAM, Region.VXM_TABLE), self.vxm_words)])

    # ---- running -------------------------------------------------------------------
    async def run(self, timeout_cycles: int):
        """Start, wait for done; returns (cycle counter, wall seconds of the run)."""
        dut = self.dut
        t0 = time.perf_counter()
        self.config_checked = False   # the next job's first load checks again
        await self.write_words([(hostmap.csr(Csr.CTRL), 1)])
        for _ in range(INPUT_LATENCY):                 # the write reaches the tile (hdl/top/simtop.py)
            await FallingEdge(dut.clk)
        await self.wait_done(timeout_cycles)
        wall = time.perf_counter() - t0
        if not int(dut.done.value):
            raise TimeoutError(f"tile not done after {timeout_cycles} cycles")
        return await self.read_csr(Csr.SAC), wall

    # ---- reading back ----------------------------------------------------------------
    async def read_vectors(self, name: str, rows):
        wpv = self.cfg.words_per_vector
        i = self.cfg.mem_names.index(name)
        words = await self.read_words([hostmap.addr(Region.DMEM, i, r * wpv + w)
                                       for r in rows for w in range(wpv)])
        return [_words_to_bytes(words[k * wpv:(k + 1) * wpv]) for k in range(len(rows))]

    async def read_trace(self):
        """Every MEM write the hardware recorded: ``[(cycle, slice, addr, bytes), ...]``; the
        rows written count as ``dirty`` for the next ``load_job``."""
        cfg, tw, f = self.cfg, hostmap.trace_words(self.cfg), hostmap.trace_fields(self.cfg)
        events = []
        counts = await self.read_words([hostmap.csr(Csr.TRACE_COUNT_BASE + i)
                                        for i in range(len(cfg.mem_names))])
        for i, (name, n) in enumerate(zip(cfg.mem_names, counts)):
            words = await self.read_words([hostmap.addr(Region.TRACE, i, e * tw + k)
                                           for e in range(n) for k in range(tw)])
            for e in range(n):
                w = words[e * tw:(e + 1) * tw]
                events.append((w[f["cycle"][0]], name, w[f["addr"][0]], _words_to_bytes(w[f["data"][0]:])))
                self.dirty[name].add(w[f["addr"][0]])
        events.sort(key=lambda ev: (ev[0], cfg.position(ev[1])))
        return events

    async def arm_start_at(self, start_hac: int):
        """Arm the tile to start so that its cycle 0 is the cycle its HAC equals ``start_hac``
        (``hostmap.Ctrl.START_AT_HAC``, C2C tiles)."""
        await self.write_words([(hostmap.csr(Csr.START_HAC), start_hac & 0xFFFFFFFF),
                                (hostmap.csr(Csr.CTRL), int(Ctrl.START_AT_HAC))])

    async def read_c2c(self):
        """The C2C registers: HAC state, deskew state and every link's receiver/transmitter."""
        cfg = self.cfg
        regs = [Csr.HAC, Csr.HAC_STATUS, Csr.HAC_LATENCY, Csr.HAC_ERROR, Csr.DESKEW_OFFSET,
                Csr.DESKEW_STALLED, Csr.DESKEW_STATUS]
        link_regs = [Csr.LINK_BASE + LINK_WORDS * lk + r for lk in range(cfg.links) for r in LinkReg]
        vals = await self.read_words([hostmap.csr(r) for r in regs + link_regs])
        hs, ds = vals[1], vals[6]
        out = {"hac": vals[0], "locked": bool(hs & HacStatus.LOCKED), "lock_lost": bool(hs & HacStatus.LOCK_LOST),
               "latency": vals[2], "hac_error": signed32(vals[3]), "deskew_offset": vals[4],
               "stalled_cycles": vals[5], "deskew_status": ds, "late": bool(ds & DeskewStatus.LATE),
               "stall_timeout": bool(ds & DeskewStatus.STALL_TIMEOUT), "links": []}
        n = len(LinkReg)
        for lk in range(cfg.links):
            v = dict(zip((r.name.lower() for r in LinkReg), vals[len(regs) + n * lk: len(regs) + n * (lk + 1)]))
            flags = v.pop("flags")
            v.update({f.name.lower(): bool(flags & f) for f in LinkFlag})
            out["links"].append(v)
        return out

    async def read_status(self):
        cfg = self.cfg
        nill = (cfg.queues + 31) // 32             # 32-bit words of the ILLEGAL mask
        nadf = (2 * cfg.mem_slices + 31) // 32     # 32-bit words of the ADDR_FAULT mask
        regs = [Csr.STATUS, Csr.SAC]
        regs += [Csr.ILLEGAL_BASE + k for k in range(nill)]
        regs += [Csr.ADDR_FAULT_BASE + k for k in range(nadf)]
        regs += [Csr.BUSY_BASE + q for q in range(cfg.queues)]
        vals = await self.read_words([hostmap.csr(r) for r in regs])
        return {"status": vals[0], "cycles": vals[1], "illegal": _join_words(vals[2:2 + nill]),
                "addr_fault": _join_words(vals[2 + nill:2 + nill + nadf]),
                "busy": dict(zip(cfg.queue_names, vals[2 + nill + nadf:]))}


def _lane_bytes(vec) -> bytes:
    """A vector's lanes as bytes (lane 0 first); a lane outside 0..255 wraps (int8 images)."""
    if isinstance(vec, list):       # the testbenches' rows (from JSON): the fast case
        try:
            return bytes(vec)
        except ValueError:
            pass
    return bytes(int(b) & 0xFF for b in vec)


def _join_words(words) -> int:
    """32-bit words as one integer, word 0 least significant."""
    return sum(w << (32 * k) for k, w in enumerate(words))


def signed32(v: int) -> int:
    """The low 32 bits of ``v`` as a two's-complement integer."""
    v &= 0xFFFFFFFF
    return v - (1 << 32) if v >> 31 else v


def _words_to_bytes(words):
    return [(w >> (8 * b)) & 0xFF for w in words for b in range(4)]


class UartTileDriver(TileDriver):
    """The same driver over the UART host bridge (``hdl/top/host_bridge.py``): only the
    transport differs; everything above ``write_words``/``read_words`` is shared."""

    def __init__(self, dut, cfg, divisor: int):
        from sim.tb.uart_model import UartSink, UartSource
        super().__init__(dut, cfg)
        bit_ns = divisor * self.period
        self.source = UartSource(dut.rx, bit_ns)
        self.sink = UartSink(dut.tx, bit_ns)

    def _idle(self):
        self.dut.rx.value = 1

    async def write_words(self, items):
        for a, v in items:
            await self.source.send(write_cmd(a, v))
            ack = await self.sink.recv(1)
            if ack[0] != ACK:
                raise RuntimeError(f"bridge answered {ack!r} to a write, expected {bytes([ACK])!r}")

    async def read_words(self, addrs):
        out = []
        for a in addrs:
            await self.source.send(read_cmd(a))
            out.append(int.from_bytes(await self.sink.recv(4), "little"))
        return out

    async def wait_done(self, timeout_cycles: int):
        # Over UART the host polls STATUS, as a real host would.
        for _ in range(max(1, timeout_cycles // 100)):
            if await self.read_csr(Csr.STATUS) & Status.DONE:
                return

async def run_job(dut, drv, cfg, job: dict) -> dict:
    """Load ``job`` (``runner.job``, or a resident one), run it and observe it: the result a
    caller compares (cycles, status, busy counters, trace, rows read back, bytes loaded)."""
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
    dut._log.info("job %s: %d cycles, %d events", job.get("name", ""), cycles, len(events))
    return {"name": job.get("name", ""), "cycles": cycles, "wall_run_s": wall, **load,
            **status, "events": events, "read_back": readback, "read_back_rows": rows_read, **extra}
