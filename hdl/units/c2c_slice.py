"""The C2C slices: the tile core's side of the links (``docs/c2c.md`` "Hardware")."""

from amaranth import Array, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from lpu_arch.isa import C2C_LATENCY, EAST, Op

from hdl.link.deskew import SLACK_BITS
from hdl.units.layouts import drive_masks, operand, slice_members


class C2cSlice(wiring.Component):
    """A C2C slice (``C2C_W``: the even links, ``C2C_E``: the odd ones), part of the tile core.

    Executes ``SEND``, ``SENDM``, ``RECV``, ``DESKEW`` and ``RUNTIME_DESKEW``.  The
    strobes it raises go to units that are *not* stalled (the links, the deskew unit),
    so the tile qualifies them with "not stalled"; on a stalled cycle the issue port
    still shows the instruction that will issue when the stall ends.

    Parameters
    ----------
    links : list of int
        The links this slice serves; a SEND or RECV naming another link does nothing.

    Members
    -------
    issue, tap, drive, driving
        Every slice's (``layouts.slice_members``): a RECV's vector is driven ``C2C_LATENCY``
        (1) cycle after its issue.
    send : Out(len(links))
        SEND to ``links[i]`` (or SENDM with its bit set) this cycle; ``send_data`` is the
        stream value at this position.
    recv : Out(len(links))
        RECV from ``links[i]`` this cycle (pop the oldest vector of its receive buffer).
    recv_data : In(vector_bits).array(len(links))
        The links' popped vectors (held from the cycle after ``recv``).
    deskew, runtime : Out(1), slack : Out(16)
        DESKEW / RUNTIME_DESKEW issued this cycle, with RUNTIME_DESKEW's slack.
    """

    def __init__(self, cfg, links):
        self.cfg, self.links = cfg, list(links)
        n = max(len(self.links), 1)
        super().__init__({
            **slice_members(cfg),
            "send": Out(n), "send_data": Out(cfg.vector_bits),
            "recv": Out(n), "recv_data": In(cfg.vector_bits).array(n),
            "deskew": Out(1), "runtime": Out(1), "slack": Out(SLACK_BITS),
        })

    def elaborate(self, platform):
        assert C2C_LATENCY == 1, "the C2C slice drives a received vector one cycle after RECV"
        m = Module()
        ins, valid = self.issue.instr, self.issue.valid
        link, mask = operand(ins, Op.SEND, "link"), operand(ins, Op.SENDM, "links")
        m.d.comb += [
            self.send_data.eq(Mux(ins.dir == EAST, Array(self.tap.east)[ins.stream], Array(self.tap.west)[ins.stream])),
            self.deskew.eq(valid & (ins.op == Op.DESKEW)),
            self.runtime.eq(valid & (ins.op == Op.RUNTIME_DESKEW)),
            self.slack.eq(operand(ins, Op.RUNTIME_DESKEW, "slack")),
        ]
        # RECV: remember where to drive; the vector comes from the link (held there).
        d_valid, d_dir, d_stream = Signal(), Signal(), Signal.like(ins.stream)
        d_sel = Signal(range(max(len(self.links), 2)))
        is_recv = valid & (ins.op == Op.RECV)
        m.d.sync += [d_valid.eq(0), d_dir.eq(ins.dir), d_stream.eq(ins.stream)]
        for i, l in enumerate(self.links):
            hit = link == l
            multi = (ins.op == Op.SENDM) & mask[l] if l < len(mask) else 0
            m.d.comb += [self.send[i].eq(valid & (((ins.op == Op.SEND) & hit) | multi)),
                         self.recv[i].eq(is_recv & hit)]
            with m.If(is_recv & hit):
                m.d.sync += [d_valid.eq(1), d_sel.eq(i)]
        data = Array(self.recv_data)[d_sel] if self.links else 0
        drive_masks(m, self.drive, d_valid, d_dir, d_stream)
        m.d.comb += [self.drive.east.data[0].eq(data), self.drive.west.data[0].eq(data)]
        m.d.comb += self.driving.eq(d_valid)
        return m
