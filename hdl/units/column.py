"""One fabric position as a unit: its instruction queue, its slice (with a MEM slice, the
event trace) and the stream registers loaded there.

The tile builds every position with :func:`build_position`, inline in its own module (the
simulated tile).  :class:`Column` is the same position as a component of its own, which
``hdl/flows/size.py`` converts once per distinct position and instantiates at every position of
that kind: a full-scale tile has 88 identical MEM columns, and one netlist of all of them
(15 million stream register bits) is more than Amaranth can build on a workstation.
"""

from typing import NamedTuple

from amaranth import Const, Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from hdl.link.deskew import SLACK_BITS
from hdl.units.c2c_slice import C2cSlice
from hdl.units.fabric import StreamStage
from hdl.units.icu import InstructionQueue
from hdl.units.layouts import base_file_layout, host_signature, setb_signature, stream_vectors, tap_signature
from hdl.units.mem_slice import MemSlice
from hdl.units.mxm import MXM
from hdl.units.sxm import SXM
from hdl.units.trace import EventTrace
from hdl.units.vxm import VXM


class Taps(NamedTuple):
    """The stream values visible at one position: ``east[s]``, ``west[s]``."""
    east: list
    west: list


def served_links(cfg, p: int) -> list[int]:
    """The links served by the C2C slice at position ``p``."""
    name = cfg.slice_names[p]
    return [lk for lk in range(cfg.links) if cfg.link_slice(lk) == name]


def column_signature(cfg, p: int, streams: bool = True) -> wiring.Signature:
    """Ports of position ``p`` (from the position's side): its queue's and its slice's
    (``prestart`` starts the queues one cycle before ``start``; ``valid``: a data
    instruction issues and does not skip, a busy cycle; ``ld_*``: an MXM's loader queue).
    With ``streams``: ``tap`` and the stream registers loaded here, ``east_out`` (visible at
    ``p + 1`` on the next cycle; not at the east edge) and ``west_out`` (at ``p - 1``)."""
    kind = cfg.kind(cfg.slice_names[p])
    host = host_signature(cfg)
    members = {"prestart": In(1), "start": In(1), "entry": In(cfg.iq_addr_bits), "run": In(1), "icu_host": In(host),
               "halted": Out(1), "illegal": Out(1), "valid": Out(1), "driving": Out(1)}
    if kind == "MEM":
        members.update({"bases": In(base_file_layout(cfg)), "host": In(host), "addr_fault": Out(1)})
        if cfg.trace_depth:
            members.update({"cycle": In(cfg.CYCLE_BITS), "trace_host": In(host),
                            "trace_count": Out(range(cfg.trace_depth + 1)), "trace_overflow": Out(1)})
    elif kind == "MXM":
        members.update({"ld_icu_host": In(host), "ld_halted": Out(1), "ld_illegal": Out(1), "ld_valid": Out(1),
                        "nan": Out(1)})
    elif kind == "VXM":
        members.update({"bases": In(base_file_layout(cfg)), "host_param": In(host), "host_table": In(host),
                        "param_fault": Out(1)})
    elif kind == "SXM" and cfg.sxm_setb:
        members["setb"] = Out(setb_signature())
    elif kind == "C2C":
        n = max(len(served_links(cfg, p)), 1)
        members.update({"send": Out(n), "send_data": Out(cfg.vector_bits), "recv": Out(n),
                        "recv_data": In(cfg.vector_bits).array(n),
                        "deskew": Out(1), "runtime": Out(1), "slack": Out(SLACK_BITS)})
    if streams:
        members["tap"] = In(tap_signature(cfg))
        if p + 1 < cfg.positions:
            members["east_out"] = stream_vectors(cfg, cfg.streams)
        if p > 0:
            members["west_out"] = stream_vectors(cfg, cfg.streams)
    return wiring.Signature(members)


def edge_taps(cfg) -> list:
    """What the edges feed: zeros."""
    return [Const(0, cfg.vector_bits)] * cfg.streams


def build_position(m, cfg, p: int, ports, tap, east_out, west_out, suffix: str = ""):
    """Add position ``p``'s queue (``icu<suffix>``; an MXM's loader queue ``icu_ld<suffix>``),
    slice (``slice<suffix>``), event trace (``trace<suffix>``) and stream registers
    (``fabric<suffix>``) to module ``m``.

    ``ports`` has the members of ``column_signature(cfg, p, streams=False)`` (the side of
    the position); ``tap`` the values visible here; ``east_out`` / ``west_out`` the
    registers loaded here (None at an edge).  The slice reads ``tap`` and the registers
    read the slice's drive signals themselves (no copies of the streams)."""
    name = cfg.slice_names[p]
    kind = cfg.kind(name)
    m.submodules[f"icu{suffix}"] = icu = InstructionQueue(cfg, kind)
    m.d.comb += [icu.start.eq(ports.prestart), icu.entry.eq(ports.entry), icu.run.eq(ports.run),
                 ports.halted.eq(icu.halted),
                 ports.illegal.eq(icu.illegal)]
    wiring.connect(m, wiring.flipped(ports.icu_host), icu.host)
    if kind == "MEM":
        sl = MemSlice(cfg)
        m.d.comb += [sl.start.eq(ports.start), sl.run.eq(ports.run), sl.bases.eq(ports.bases),
                     ports.addr_fault.eq(sl.addr_fault)]
        wiring.connect(m, wiring.flipped(ports.host), sl.host)
        if cfg.trace_depth:
            m.submodules[f"trace{suffix}"] = tr = EventTrace(cfg)
            m.d.comb += [tr.start.eq(ports.start), tr.event.eq(sl.write_event & ports.run),
                         tr.cycle.eq(ports.cycle), tr.addr.eq(sl.write_addr), tr.data.eq(sl.write_data),
                         ports.trace_count.eq(tr.count), ports.trace_overflow.eq(tr.overflow)]
            wiring.connect(m, wiring.flipped(ports.trace_host), tr.host)
    elif kind == "MXM":
        sl = MXM(cfg, side=name[-1])
        m.d.comb += [sl.start.eq(ports.start), ports.nan.eq(sl.nan)]
        m.submodules[f"icu_ld{suffix}"] = ld = InstructionQueue(cfg, "MXL")
        m.d.comb += [ld.start.eq(ports.prestart), ld.entry.eq(ports.entry), ld.run.eq(ports.run),
                     ports.ld_halted.eq(ld.halted), ports.ld_illegal.eq(ld.illegal),
                     ports.ld_valid.eq(ld.issue.valid)]
        wiring.connect(m, wiring.flipped(ports.ld_icu_host), ld.host)
        wiring.connect(m, ld.issue, sl.ld_issue)
    elif kind == "VXM":
        sl = VXM(cfg)
        m.d.comb += [sl.start.eq(ports.start), sl.run.eq(ports.run), sl.bases.eq(ports.bases),
                     ports.param_fault.eq(sl.param_fault)]
        wiring.connect(m, wiring.flipped(ports.host_param), sl.host_param)
        wiring.connect(m, wiring.flipped(ports.host_table), sl.host_table)
    elif kind == "SXM":
        sl = SXM(cfg)
        if cfg.sxm_setb:
            wiring.connect(m, sl.setb, wiring.flipped(ports.setb))
    elif kind == "C2C":
        sl = C2cSlice(cfg, served_links(cfg, p))
        m.d.comb += [ports.send.eq(sl.send), ports.send_data.eq(sl.send_data), ports.recv.eq(sl.recv),
                     ports.deskew.eq(sl.deskew), ports.runtime.eq(sl.runtime), ports.slack.eq(sl.slack)]
        m.d.comb += [sl.recv_data[i].eq(ports.recv_data[i]) for i in range(len(sl.recv_data))]
    else:
        raise ValueError(f"unknown slice kind {kind!r} at position {p}")
    m.submodules[f"slice{suffix}"] = sl
    wiring.connect(m, icu.issue, sl.issue)
    # A busy cycle: a data instruction issues and (MEM, VXM: its base register is on) does not skip.
    m.d.comb += ports.valid.eq(icu.issue.valid & ~sl.skip if kind in ("MEM", "VXM") else icu.issue.valid)
    sl.tap = tap
    m.d.comb += ports.driving.eq(sl.driving)
    m.submodules[f"fabric{suffix}"] = StreamStage(cfg, tap, sl.drive, east_out, west_out)
    return sl


class Column(wiring.Component):
    """Position ``p`` of a tile as a component (members: ``column_signature(cfg, p)``)."""

    def __init__(self, cfg, p: int):
        self.cfg, self.p = cfg, p
        super().__init__(column_signature(cfg, p))

    def elaborate(self, platform):
        m = Module()
        build_position(m, self.cfg, self.p, self, self.tap,
                       getattr(self, "east_out", None), getattr(self, "west_out", None))
        return m
