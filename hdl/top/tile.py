"""The tile: every fabric position (``hdl/units/column.py``), the host interface, run control."""

from amaranth import Array, Cat, Const, Module, Mux, Signal
from amaranth.hdl import EnableInserter
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from lpu_arch import hostmap
from lpu_arch.hostmap import Csr, Ctrl, DeskewStatus, HacStatus, LinkFlag, LinkReg, Region, Status
from lpu_arch.isa import BASE_OFF_BIT, BASE_OFFSET_BITS, INSTR_BITS

from hdl.link.deskew import DeskewUnit
from hdl.link.hac import HacUnit
from hdl.link.rx import LinkRx
from hdl.link.tx import LinkTx
from hdl.units.column import Taps, build_position, column_signature, edge_taps, served_links
from hdl.units.layouts import base_reg_layout, host_bus_signature


def load_port_signature(cfg) -> wiring.Signature:
    """The tile's vector load port (``hostmap.LOAD_REGIONS``), from the host's side:
    ``region`` (``Region.DMEM``, ``IMEM`` or ``VXM_PARAM``; any other writes nothing),
    ``row``, ``mask`` (bit ``k``: lane ``k`` writes) and ``data[k]``, one lane each
    (``hostmap.load_lanes`` of ``hostmap.load_lane_bits`` bits).  A tile has it as
    ``In(...)`` (member ``load``: Verilog ports ``load__region``, ``load__data__0`` ...)."""
    n = hostmap.load_lanes(cfg)
    return wiring.Signature({"region": Out(hostmap.LOAD_REGION_BITS), "row": Out(hostmap.load_row_bits(cfg)),
                             "mask": Out(n), "data": Out(hostmap.load_lane_bits(cfg)).array(n)})


class Tile(wiring.Component):
    """A scaled-down LP30 tile: slices in the mirrored order of the design brief on one
    stream fabric, an instruction queue per slice (and a loader queue per MXM), the host
    interface, the cycle counter and done.

    ``lpu_arch/hostmap.py`` gives the host bus's map; a ``CTRL`` write starts every queue
    at once and the tile raises ``done`` when every queue has halted and no slice drives
    (``docs/isa.md``, "Timing rules").

    Members
    -------
    host : In(host_bus_signature), load : In(load_port_signature)
        The host bus and the vector load port (not in a tile built with ``separate_columns``).
    running : Out(1), done : Out(1)
        Run state; ``done`` stays high until the next start.
    fault : Out(1)
        Any sticky fault flag (illegal opcode, address fault, parameter fault; with links
        also the link, deskew and HAC faults of ``hostmap.LINK_FAULTS``) is set.  Not
        ``Status.NAN_OPERAND`` (an FP8 MM met a NaN code: a condition of the data, which the
        golden model predicts, not a hardware fault).

    The base registers (``Csr.BASE_REG_BASE + r``) are kept across runs (all 0, offset 0
    and on, after reset); every MEM slice and the VXM see them.

    With ``cfg.links > 0`` (``docs/c2c.md``) the tile also has the C2C slices, a transmitter
    and a receiver per link, the HAC unit and the deskew unit.  The *core* (everything in
    SAC time: queues, fabric, slices, counters, traces, run state) is stalled as a whole
    while the deskew unit stalls; the HAC, the links, the deskew unit and the host bus's
    read path keep running.

    flit_out : Out(flit_bits).array(links), flit_in : In(flit_bits).array(links)
        Each link's transmit register, and its incoming flits in clock domain ``rx<link>``
        (the sender's clock: rename it to the peer's domain with ``DomainRenamer``).
    hac : Out(HAC_BITS), stall : Out(1), sac : Out(CYCLE_BITS)
    rx_level / elastic_level : Out(level_bits).array(links)
        For observation: the HAC, the deskew stall, the cycle counter (SAC), the receive
        and elastic buffer levels.

    Parameters
    ----------
    hac_parent : int or None
        The link to this tile's HAC parent (None: the tile is the HAC root).
    hac_children : list of int
        Links to HAC children (default: every link of a root, none of a child).
    separate_columns : bool
        Build the tile without its positions: each position's ports are in
        ``column_ports[p]``, for a ``Column`` built separately (``hdl/flows/size.py``).
    """

    def __init__(self, cfg, hac_parent=None, hac_children=None, separate_columns=False):
        hostmap.check_fits(cfg)
        self.cfg = cfg
        if separate_columns and cfg.links:
            raise ValueError("a tile with C2C links is built with its columns (separate_columns=False)")
        self.separate_columns = separate_columns
        self.column_ports = [column_signature(cfg, p, streams=False).create(path=(name,))
                             for p, name in enumerate(cfg.slice_names)] if separate_columns else None
        members = {"host": In(host_bus_signature(cfg)), "running": Out(1), "done": Out(1), "fault": Out(1)}
        if not separate_columns:
            members["load"] = In(load_port_signature(cfg))
        if cfg.links:
            from lpu_arch.c2c import flit_bits
            if hac_children is None:
                hac_children = list(range(cfg.links)) if hac_parent is None else []
            self.hac_parent, self.hac_children = hac_parent, list(hac_children)
            members.update({
                "flit_out": Out(flit_bits(cfg)).array(cfg.links),
                "flit_in": In(flit_bits(cfg)).array(cfg.links),
                "hac": Out(cfg.HAC_BITS), "stall": Out(1), "sac": Out(cfg.CYCLE_BITS),
                "rx_level": Out(cfg.level_bits).array(cfg.links), "elastic_level": Out(cfg.level_bits).array(cfg.links),
            })
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        cfg = self.cfg
        linked = cfg.links > 0
        # The core (class docstring): without links the tile's own module, else a submodule.
        core = Module() if linked else m

        region = self.host.addr[hostmap.REGION_SHIFT:32]
        sel_slice = self.host.addr[hostmap.SLICE_SHIFT:hostmap.REGION_SHIFT]
        word = self.host.addr[0:hostmap.SLICE_SHIFT]

        # ``prestart`` starts the instruction queues, which decode one cycle ahead of the
        # slices (``hdl/units/icu.py``); ``start``, the cycle after it, starts everything else:
        # cycle 0 is the cycle after ``start``.
        prestart, start = Signal(), Signal()
        m.d.sync += start.eq(prestart)
        # The run state the core keeps.  With links, ``running``/``done`` are these unless a
        # deskew stall exceeded its bound (``_links``): the tile then reads as halted.
        run_q = Signal(name="core_running") if linked else self.running
        done_q = Signal(name="core_done") if linked else self.done
        sac = Signal(cfg.CYCLE_BITS)      # the program's cycle counter (SAC: stalls do not advance it)
        host_start = Signal()
        ctrl_write = self.host.we & ~self.running & ~start & (region == Region.CSR) & (word == Csr.CTRL)
        m.d.comb += host_start.eq(ctrl_write & self.host.wdata[0])
        if not linked:
            m.d.comb += prestart.eq(host_start)

        # ---- the base registers: CSRs, written while stopped; register 0 the constant 0 ----
        base_regs = [Signal(base_reg_layout(), name=f"base_reg_{r}") for r in range(1, cfg.base_regs)]
        base_file = Cat(Const(0, base_reg_layout().size), *base_regs)
        base_write = self.host.we & ~run_q & ~start & (region == Region.CSR)
        for r, reg in enumerate(base_regs, 1):
            with m.If(base_write & (word == Csr.BASE_REG_BASE + r)):
                m.d.sync += [reg.offset.eq(self.host.wdata[:BASE_OFFSET_BITS]),
                             reg.off.eq(self.host.wdata[BASE_OFF_BIT])]

        # ---- the entry point every queue starts at (several programs in one queue) ----
        entry = Signal(cfg.iq_addr_bits)
        with m.If(base_write & (word == Csr.ENTRY)):
            m.d.sync += entry.eq(self.host.wdata[:cfg.iq_addr_bits])

        def host_port(port, reg, index):
            core.d.comb += [port.sel.eq((region == reg) & (sel_slice == index)),
                            port.addr.eq(word), port.wdata.eq(self.host.wdata),
                            port.we.eq(self.host.we), port.re.eq(self.host.re)]

        # ---- the positions: queue, slice, event trace, stream registers (StreamStage) -----
        P, VB, S = cfg.positions, cfg.vector_bits, cfg.streams
        inline = not self.separate_columns
        east = [[Signal(VB, name=f"east_{p}_{s}") for s in range(S)] if inline and p + 1 < P else None
                for p in range(P)]
        west = [[Signal(VB, name=f"west_{p}_{s}") for s in range(S)] if inline and p > 0 else None
                for p in range(P)]
        cols, c2cs = [], {}
        load_mem = 0           # the next MEM slice's load lane
        for p, name in enumerate(cfg.slice_names):
            kind = cfg.kind(name)
            if self.separate_columns:
                col = self.column_ports[p]
            else:
                col = column_signature(cfg, p, streams=False).create(path=(f"col_{name}",))
                tap = Taps(east[p - 1] if p > 0 else edge_taps(cfg), west[p + 1] if p + 1 < P else edge_taps(cfg))
                sl = build_position(core, cfg, p, col, tap, east[p], west[p], suffix=f"_{name}")
                # The vector load port's lanes: queue p on lane p; MEM slice i on lane i; the
                # VXM's lane l on lane l (build_position names the queue icu_<name>).
                self._load_lane(core, core.submodules[f"icu_{name}"], Region.IMEM, p, INSTR_BITS)
                if kind == "MEM":
                    self._load_lane(core, sl, Region.DMEM, load_mem, cfg.vector_bits)
                    load_mem += 1
                elif kind == "VXM":
                    self._load_vxm(core, sl)
            core.d.comb += [col.prestart.eq(prestart), col.start.eq(start), col.entry.eq(entry), col.run.eq(run_q)]
            if kind in ("MEM", "VXM"):
                core.d.comb += col.bases.eq(base_file)
            if kind == "SXM" and cfg.sxm_setb:      # SETB: the register is on, at the offset, from the next cycle
                for r, reg in enumerate(base_regs, 1):  # (SXM_E's write, built last, wins a tie: the golden model's)
                    with m.If(col.setb.we & (col.setb.reg == r)):      # (the registers are the tile's, as the host's writes)
                        m.d.sync += [reg.offset.eq(col.setb.offset), reg.off.eq(0)]
            host_port(col.icu_host, Region.IMEM, p)
            cols.append(col)
            if kind == "VXM":
                host_port(col.host_param, Region.VXM_PARAM, 0)
                host_port(col.host_table, Region.VXM_TABLE, 0)
                vxm = col
            elif kind == "C2C":
                c2cs[name] = col
        # The queues in index order (cfg.queue_names): every position's, then the MXMs' loaders.
        by_name = dict(zip(cfg.slice_names, cols))
        queues = [(c.icu_host, c.halted, c.illegal, c.valid) for c in cols]
        for q, mxm in cfg.LOADERS.items():
            col = by_name[mxm]
            queues.append((col.ld_icu_host, col.ld_halted, col.ld_illegal, col.ld_valid))
            host_port(col.ld_icu_host, Region.IMEM, cfg.queue_index(q))
            if not self.separate_columns:
                self._load_lane(core, core.submodules[f"icu_ld_{mxm}"], Region.IMEM, cfg.queue_index(q), INSTR_BITS)
        mems = [col for col, name in zip(cols, cfg.slice_names) if cfg.kind(name) == "MEM"]
        for i, mem in enumerate(mems):
            host_port(mem.host, Region.DMEM, i)
            if cfg.trace_depth:
                core.d.comb += mem.cycle.eq(sac)
                host_port(mem.trace_host, Region.TRACE, i)
        traces = mems if cfg.trace_depth else []

        # ---- run control and counters ------------------------------------------------
        all_halted = Cat(halted for _, halted, _, _ in queues).all()
        # Done waits for every stream drive (READ, EMIT, VOP, SXM and RECV results).
        any_driving = Cat(*(c.driving for c in cols)).any()
        busy_count = [Signal(cfg.CYCLE_BITS, name=f"busy_{n}") for n in cfg.queue_names]
        with core.If(prestart):            # done falls with the write that starts the tile
            core.d.sync += done_q.eq(0)
        with core.If(start):
            core.d.sync += [run_q.eq(1), done_q.eq(0), sac.eq(0)]
            core.d.sync += [b.eq(0) for b in busy_count]
        with core.Elif(run_q):
            core.d.sync += sac.eq(sac + 1)
            for (_, _, _, valid), b in zip(queues, busy_count):
                with core.If(valid):
                    core.d.sync += b.eq(b + 1)
            with core.If(all_halted & ~any_driving):
                core.d.sync += [run_q.eq(0), done_q.eq(1)]

        # ---- host reads: registered select, then registered data (latency 2) ----------
        illegal = Cat(ill for _, _, ill, _ in queues)
        addr_fault = Cat(mem.addr_fault for mem in mems)
        overflow = Cat(Const(0, 1), *(t.trace_overflow for t in traces)).any()
        status = Signal(cfg.HOST_WORD)
        param_fault = vxm.param_fault
        # NAN_OPERAND (hostmap.Status): either MXM's nan, sticky until start; not in ``fault``.
        nan_operand = Signal()
        mxm_nan = Cat(*(c.nan for c, n in zip(cols, cfg.slice_names) if cfg.kind(n) == "MXM")).any()
        with core.If(start):
            core.d.sync += nan_operand.eq(0)
        with core.Elif(mxm_nan):
            core.d.sync += nan_operand.eq(1)
        status_bits = (self.running * Status.RUNNING | self.done * Status.DONE
                       | illegal.any() * Status.ILLEGAL_OP | addr_fault.any() * Status.ADDR_FAULT
                       | overflow * Status.TRACE_OVERFLOW | param_fault * Status.PARAM_FAULT
                       | nan_operand * Status.NAN_OPERAND)
        link_csrs = {}
        if linked:
            link_fault, link_status, link_csrs = self._links(m, core, prestart, start, host_start, ctrl_write, region,
                                                             word, sac, c2cs, run_q, done_q)
            status_bits = status_bits | link_status
            m.d.comb += self.fault.eq(illegal.any() | addr_fault.any() | param_fault | link_fault)
        else:
            m.d.comb += self.fault.eq(illegal.any() | addr_fault.any() | param_fault)
        m.d.comb += status.eq(status_bits)

        r_region, r_slice, r_word, r_re = (Signal.like(region), Signal.like(sel_slice),
                                           Signal.like(word), Signal())
        m.d.sync += [r_region.eq(region), r_slice.eq(sel_slice), r_word.eq(word), r_re.eq(self.host.re)]
        # Every CSR the host reads, {word: value}; the flags of queues and MEM slices 32 to a word.
        csrs = {Csr.STATUS: status, Csr.SAC: sac, Csr.CONFIG0: cfg.lanes | cfg.streams << 16,
                Csr.CONFIG1: (cfg.mem_slices | hostmap.log2(cfg.mem_depth) << 8
                              | hostmap.log2(cfg.iq_depth) << 16 | hostmap.log2(cfg.trace_depth + 1) << 24),
                **hostmap.config_csrs(cfg)}       # the whole TileConfig, constants
        csrs.update({Csr.ILLEGAL_BASE + k // 32: illegal[k:k + 32] for k in range(0, len(illegal), 32)})
        csrs.update({Csr.ADDR_FAULT_BASE + k // 32: addr_fault[k:k + 32] for k in range(0, len(addr_fault), 32)})
        csrs.update({Csr.BUSY_BASE + p: b for p, b in enumerate(busy_count)})
        csrs.update({Csr.TRACE_COUNT_BASE + i: t.trace_count for i, t in enumerate(traces)})
        csrs.update({**link_csrs, Csr.ENTRY: entry})
        csrs.update({Csr.BASE_REG_BASE + r: reg.offset | reg.off << BASE_OFF_BIT
                     for r, reg in enumerate(base_regs, 1)})
        csr_val = Signal(cfg.HOST_WORD)
        with m.Switch(r_word):
            for reg, val in csrs.items():
                with m.Case(reg):
                    m.d.comb += csr_val.eq(val)

        def pick(ports):
            return Array(p.rdata for p in ports)[r_slice] if ports else 0

        regions = {Region.CSR: csr_val, Region.IMEM: pick([host for host, _, _, _ in queues]),
                   Region.DMEM: pick([mem.host for mem in mems]), Region.TRACE: pick([t.trace_host for t in traces]),
                   Region.VXM_PARAM: vxm.host_param.rdata, Region.VXM_TABLE: vxm.host_table.rdata}
        with m.Switch(r_region):
            for reg, val in regions.items():
                with m.Case(reg):
                    m.d.sync += self.host.rdata.eq(val)
        m.d.sync += self.host.rvalid.eq(r_re)
        return m

    # ---- the vector load port ---------------------------------------------------------------
    def _load_lane(self, m, unit, region, lane, bits):
        """Lane ``lane`` of the load port writes ``unit`` (its ``load_*`` ports) in ``region``."""
        ld = self.load
        m.d.comb += [unit.load_we.eq((ld.region == region) & ld.mask[lane]),
                     unit.load_row.eq(ld.row), unit.load_data.eq(ld.data[lane][:bits])]

    def _load_vxm(self, m, vxm):
        """Lane ``l`` of the load port writes lane ``l`` of a VXM parameter entry."""
        from lpu_arch.vxm import PARAM_WORDS
        ld, L = self.load, self.cfg.lanes
        m.d.comb += [vxm.load_we.eq(Mux(ld.region == Region.VXM_PARAM, ld.mask[:L], 0)),
                     vxm.load_row.eq(ld.row),
                     vxm.load_data.eq(Cat(ld.data[l][:32 * PARAM_WORDS] for l in range(L)))]

    # ---- C2C: links, HAC, deskew, start at a HAC value ------------------------------------
    def _links(self, m, core, prestart, start, host_start, ctrl_write, region, word, sac, c2cs, run_q, done_q):
        """Build the units outside the core; return (any link fault, STATUS bits, {CSR word: value}).
        A deskew stall beyond its bound (``DeskewUnit``) makes the tile read as not running
        and done, with ``Status.DESKEW_TIMEOUT`` set, until the next start."""
        cfg = self.cfg
        m.submodules.hac = hac = HacUnit(cfg, self.hac_parent, self.hac_children)
        m.submodules.deskew = dsk = DeskewUnit(cfg)
        stall = dsk.stall
        m.submodules.core = EnableInserter(~stall)(core)
        m.d.comb += [self.running.eq(run_q & ~dsk.timeout), self.done.eq(done_q | dsk.timeout)]
        m.d.comb += [self.hac.eq(hac.hac), self.stall.eq(stall), self.sac.eq(sac)]
        start_hac, armed, armed_go = self._armed_start(m, hac, prestart, start, host_start, ctrl_write, region, word)
        links = [self._link(m, lk, hac, c2cs, stall, start) for lk in range(cfg.links)]
        m.d.comb += hac.clear.eq(start)

        cw, ce = c2cs["C2C_W"], c2cs["C2C_E"]
        m.d.comb += [
            dsk.hac.eq(hac.hac), dsk.sac.eq(sac), dsk.clear.eq(prestart | start),
            dsk.load.eq(armed_go), dsk.load_offset.eq(start_hac),
            dsk.deskew.eq((cw.deskew | ce.deskew) & ~stall),
            dsk.runtime.eq((cw.runtime | ce.runtime) & ~stall),
            dsk.slack.eq(Mux(cw.runtime, cw.slack, ce.slack)),
        ]
        fault, status = self._link_status(links, hac, dsk, armed)
        return fault, status, self._link_csrs(links, hac, dsk, start_hac)

    def _armed_start(self, m, hac, prestart, start, host_start, ctrl_write, region, word):
        """Drive ``prestart`` from the host's start or an armed one; return (``START_HAC``,
        armed, the armed start's prestart pulse).

        Start now (CTRL.START), or armed (CTRL.START_AT_HAC) so that cycle 0 is the cycle
        on which the HAC equals START_HAC: the start pulse comes the cycle before, the
        queues' prestart two cycles before.  A HAC that a SYNC moves past the value still
        starts (signed comparison)."""
        start_hac, armed = Signal(self.cfg.HAC_BITS), Signal()
        csr_write = self.host.we & (region == Region.CSR)
        with m.If(csr_write & (word == Csr.START_HAC)):
            m.d.sync += start_hac.eq(self.host.wdata)
        due, armed_go = Signal(self.cfg.HAC_BITS), Signal()
        m.d.comb += due.eq(hac.hac + 2 - start_hac)
        m.d.comb += [armed_go.eq(armed & ~self.running & ~start & ~due[-1]),
                     prestart.eq(host_start | armed_go)]
        with m.If(ctrl_write & (self.host.wdata & Ctrl.START_AT_HAC).any()):
            m.d.sync += armed.eq(1)
        with m.If(prestart):
            m.d.sync += armed.eq(0)
        return start_hac, armed, armed_go

    def _link(self, m, lk, hac, c2cs, stall, start):
        """Link ``lk``'s transmitter and receiver, wired to its C2C slice, the HAC unit and
        the tile's flit ports; return (tx, rx).  The slice's strobes count only on cycles
        the core is not stalled."""
        cfg = self.cfg
        m.submodules[f"tx{lk}"] = tx = LinkTx(cfg)
        m.submodules[f"rx{lk}"] = rx = LinkRx(cfg, w_domain=f"rx{lk}")
        sl = c2cs[cfg.link_slice(lk)]
        i = served_links(cfg, cfg.position(cfg.link_slice(lk))).index(lk)
        m.d.comb += [
            tx.send.eq(sl.send[i] & ~stall), tx.send_data.eq(sl.send_data), tx.hac.eq(hac.hac),
            tx.ctrl_req.eq(hac.tx_req[lk]), tx.ctrl_kind.eq(hac.tx_kind[lk]),
            tx.ctrl_payload.eq(hac.tx_payload[lk]), hac.tx_ack[lk].eq(tx.ctrl_ack),
            tx.clear.eq(start),
            self.flit_out[lk].eq(tx.flit),
            rx.flit.eq(self.flit_in[lk]),
            rx.recv.eq(sl.recv[i] & ~stall), sl.recv_data[i].eq(rx.recv_data), rx.clear.eq(start),
            hac.rx_sync[lk].eq(rx.sync_valid), hac.rx_probe[lk].eq(rx.probe_valid),
            hac.rx_echo[lk].eq(rx.echo_valid), hac.rx_value[lk].eq(rx.ctrl_value),
            self.rx_level[lk].eq(rx.level), self.elastic_level[lk].eq(rx.elastic_level),
        ]
        return tx, rx

    @staticmethod
    def _link_status(links, hac, dsk, armed):
        """(any link fault, the STATUS bits of the links, the HAC and the deskew unit)."""
        ovf = Cat(rx.overflow for _, rx in links).any()
        udf = Cat(rx.underflow for _, rx in links).any()
        unc = Cat(rx.uncorrectable for _, rx in links).any()
        ovr = Cat(tx.overrun for tx, _ in links).any()
        faults = Cat(ovf, udf, unc, ovr, dsk.late, hac.lock_lost, dsk.timeout)
        link_status = (ovf * Status.LINK_OVERFLOW | udf * Status.LINK_UNDERFLOW
                       | unc * Status.LINK_UNCORRECTABLE | ovr * Status.LINK_TX_OVERRUN
                       | dsk.late * Status.DESKEW_LATE | hac.lock_lost * Status.HAC_LOCK_LOST
                       | armed * Status.ARMED | hac.locked * Status.HAC_LOCKED
                       | dsk.timeout * Status.DESKEW_TIMEOUT)
        return faults.any(), link_status

    @staticmethod
    def _link_csrs(links, hac, dsk, start_hac):
        """{CSR word: value} of the start, the HAC, the deskew unit and every link."""
        csrs = {
            Csr.START_HAC: start_hac,
            Csr.HAC: hac.hac,
            Csr.HAC_STATUS: hac.locked * HacStatus.LOCKED | hac.lock_lost * HacStatus.LOCK_LOST,
            Csr.HAC_LATENCY: hac.latency,
            Csr.HAC_ERROR: hac.error.as_signed(),
            Csr.DESKEW_OFFSET: dsk.offset,
            Csr.DESKEW_STALLED: dsk.stalled_cycles,
            Csr.DESKEW_STATUS: (dsk.late * DeskewStatus.LATE | dsk.waiting * DeskewStatus.WAITING
                                | dsk.timeout * DeskewStatus.STALL_TIMEOUT),
        }
        for lk, (tx, rx) in enumerate(links):
            b = Csr.LINK_BASE + hostmap.LINK_WORDS * lk
            csrs[b + LinkReg.LEVEL] = rx.level
            csrs[b + LinkReg.MAX_LEVEL] = rx.max_level
            csrs[b + LinkReg.FLAGS] = (rx.overflow * LinkFlag.OVERFLOW | rx.underflow * LinkFlag.UNDERFLOW
                                       | rx.uncorrectable * LinkFlag.UNCORRECTABLE | tx.overrun * LinkFlag.TX_OVERRUN)
            csrs[b + LinkReg.CORRECTED] = rx.corrected
            csrs[b + LinkReg.UNCORRECTED] = rx.uncorrected
            csrs[b + LinkReg.ELASTIC_LEVEL] = rx.elastic_level
        return csrs
