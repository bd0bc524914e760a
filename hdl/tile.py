"""The tile: slices in the mirrored order of the design brief on one stream fabric, an
instruction queue per slice, the host interface, the cycle counter and done."""

from amaranth import Array, Cat, Const, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from firmware_gen import hostmap
from firmware_gen.hostmap import Csr, Region, Status

from .fabric import StreamFabric
from .icu import InstructionQueue
from .mem_slice import MemSlice
from .mxm import MXM
from .sxm import SXM
from .trace import EventTrace
from .vxm import VXM


class Tile(wiring.Component):
    """A scaled-down LP30 tile.

    The host bus is word-addressed with 32-bit data; ``firmware_gen/hostmap.py`` gives the
    map.  Writing bit 0 of ``CTRL`` starts every instruction queue at instruction 0 on the
    same cycle (cycle 0 is the cycle after the write); the tile stops and raises ``done``
    on the first cycle on which every queue has halted and no slice is still driving.

    Members
    -------
    addr : In(32), wdata : In(32), we : In(1), re : In(1)
        Host access, one per cycle.
    rdata : Out(32), rvalid : Out(1)
        Read data, ``hostmap.READ_LATENCY`` (2) cycles after ``re``.
    running : Out(1), done : Out(1)
        Run state; ``done`` stays high until the next start.
    fault : Out(1)
        Any sticky fault flag (illegal opcode, address fault) is set.
    """

    def __init__(self, cfg):
        hostmap.check_fits(cfg)
        self.cfg = cfg
        super().__init__({
            "addr": In(32), "wdata": In(32), "we": In(1), "re": In(1),
            "rdata": Out(32), "rvalid": Out(1),
            "running": Out(1), "done": Out(1), "fault": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self.cfg
        m.submodules.fabric = fabric = StreamFabric(cfg)

        region = self.addr[hostmap.REGION_SHIFT:32]
        sel_slice = self.addr[hostmap.SLICE_SHIFT:hostmap.REGION_SHIFT]
        word = self.addr[0:hostmap.SLICE_SHIFT]

        start = Signal()
        cycle = Signal(cfg.CYCLE_BITS)
        m.d.comb += start.eq(self.we & ~self.running & (region == Region.CSR)
                             & (word == Csr.CTRL) & self.wdata[0])

        def host_port(port, reg, index):
            m.d.comb += [port.sel.eq((region == reg) & (sel_slice == index)),
                         port.addr.eq(word), port.wdata.eq(self.wdata),
                         port.we.eq(self.we), port.re.eq(self.re)]

        queues, mems, traces, computes = [], [], [], []
        vxm = None
        for p, name in enumerate(cfg.slice_names):
            kind = cfg.kind(name)
            icu = InstructionQueue(cfg, kind)
            m.submodules[f"icu_{name}"] = icu
            m.d.comb += [icu.start.eq(start), icu.run.eq(self.running)]
            host_port(icu.host, Region.IMEM, p)
            queues.append(icu)
            if kind == "MEM":
                i = len(mems)
                mem = MemSlice(cfg)
                m.submodules[f"slice_{name}"] = mem
                m.d.comb += [mem.start.eq(start), mem.run.eq(self.running)]
                wiring.connect(m, icu.issue, mem.issue)
                wiring.connect(m, fabric.taps[p], mem.tap)
                wiring.connect(m, fabric.drives[p], mem.drive)
                host_port(mem.host, Region.DMEM, i)
                mems.append(mem)
                if cfg.trace_depth:
                    tr = EventTrace(cfg)
                    m.submodules[f"trace_{name}"] = tr
                    m.d.comb += [tr.start.eq(start), tr.event.eq(mem.write_event & self.running),
                                 tr.cycle.eq(cycle), tr.addr.eq(mem.write_addr), tr.data.eq(mem.write_data)]
                    host_port(tr.host, Region.TRACE, i)
                    traces.append(tr)
            elif kind == "MXM":
                mxm = MXM(cfg, side=name[-1])
                m.submodules[f"slice_{name}"] = mxm
                m.d.comb += mxm.start.eq(start)
                wiring.connect(m, icu.issue, mxm.issue)
                wiring.connect(m, fabric.taps[p], mxm.tap)
                wiring.connect(m, fabric.drives[p], mxm.drive)
                computes.append(mxm)
            elif kind == "VXM":
                vxm = VXM(cfg)
                m.submodules[f"slice_{name}"] = vxm
                m.d.comb += vxm.run.eq(self.running)
                wiring.connect(m, icu.issue, vxm.issue)
                wiring.connect(m, fabric.taps[p], vxm.tap)
                wiring.connect(m, fabric.drives[p], vxm.drive)
                host_port(vxm.host_param, Region.VXM_PARAM, 0)
                host_port(vxm.host_table, Region.VXM_TABLE, 0)
                computes.append(vxm)
            elif kind == "SXM":
                sxm = SXM(cfg)
                m.submodules[f"slice_{name}"] = sxm
                wiring.connect(m, icu.issue, sxm.issue)
                wiring.connect(m, fabric.taps[p], sxm.tap)
                wiring.connect(m, fabric.drives[p], sxm.drive)
                computes.append(sxm)

        # ---- run control and counters ------------------------------------------------
        all_halted = Cat(q.halted for q in queues).all()
        # A slice is busy on every cycle it drives a stream (READ, EMIT, VOP results).
        any_busy = Cat(*(x.busy for x in mems + computes)).any()
        busy_count = [Signal(cfg.CYCLE_BITS, name=f"busy_{n}") for n in cfg.slice_names]
        with m.If(start):
            m.d.sync += [self.running.eq(1), self.done.eq(0), cycle.eq(0)]
            m.d.sync += [b.eq(0) for b in busy_count]
        with m.Elif(self.running):
            m.d.sync += cycle.eq(cycle + 1)
            for q, b in zip(queues, busy_count):
                with m.If(q.issue.valid):
                    m.d.sync += b.eq(b + 1)
            with m.If(all_halted & ~any_busy):
                m.d.sync += [self.running.eq(0), self.done.eq(1)]

        # ---- host reads: registered select, then registered data (latency 2) ----------
        illegal = Cat(q.illegal for q in queues)
        addr_fault = Cat(mem.addr_fault for mem in mems)
        overflow = Cat(Const(0, 1), *(t.overflow for t in traces)).any()
        m.d.comb += self.fault.eq(illegal.any() | addr_fault.any())
        status = Signal(32)
        m.d.comb += status.eq(self.running * Status.RUNNING | self.done * Status.DONE
                              | illegal.any() * Status.ILLEGAL_OP | addr_fault.any() * Status.ADDR_FAULT
                              | overflow * Status.TRACE_OVERFLOW)

        r_region, r_slice, r_word, r_re = (Signal.like(region), Signal.like(sel_slice),
                                           Signal.like(word), Signal())
        m.d.sync += [r_region.eq(region), r_slice.eq(sel_slice), r_word.eq(word), r_re.eq(self.re)]
        csr_val = Signal(32)
        with m.Switch(r_word):
            with m.Case(Csr.STATUS):
                m.d.comb += csr_val.eq(status)
            with m.Case(Csr.CYCLES):
                m.d.comb += csr_val.eq(cycle)
            with m.Case(Csr.CONFIG0):
                m.d.comb += csr_val.eq(cfg.lanes | cfg.streams << 16)
            with m.Case(Csr.CONFIG1):
                m.d.comb += csr_val.eq(cfg.mem_slices | hostmap.log2(cfg.mem_depth) << 8
                                       | hostmap.log2(cfg.iq_depth) << 16
                                       | hostmap.log2(cfg.trace_depth + 1) << 24)
            for k in range(0, len(illegal), 32):
                with m.Case(Csr.ILLEGAL_BASE + k // 32):
                    m.d.comb += csr_val.eq(illegal[k:k + 32])
            for k in range(0, len(addr_fault), 32):
                with m.Case(Csr.ADDR_FAULT_BASE + k // 32):
                    m.d.comb += csr_val.eq(addr_fault[k:k + 32])
            for p, b in enumerate(busy_count):
                with m.Case(Csr.BUSY_BASE + p):
                    m.d.comb += csr_val.eq(b)
            for i, t in enumerate(traces):
                with m.Case(Csr.TRACE_COUNT_BASE + i):
                    m.d.comb += csr_val.eq(t.count)

        def pick(ports):
            return Array(p.host.rdata for p in ports)[r_slice] if ports else 0

        with m.Switch(r_region):
            with m.Case(Region.CSR):
                m.d.sync += self.rdata.eq(csr_val)
            with m.Case(Region.IMEM):
                m.d.sync += self.rdata.eq(pick(queues))
            with m.Case(Region.DMEM):
                m.d.sync += self.rdata.eq(pick(mems))
            with m.Case(Region.TRACE):
                m.d.sync += self.rdata.eq(pick(traces))
            with m.Case(Region.VXM_PARAM):
                m.d.sync += self.rdata.eq(vxm.host_param.rdata)
            with m.Case(Region.VXM_TABLE):
                m.d.sync += self.rdata.eq(vxm.host_table.rdata)
        m.d.sync += self.rvalid.eq(r_re)
        return m

