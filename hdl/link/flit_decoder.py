"""Error correction and the split into data and control, the second stage of the receive
chain (``docs/c2c.md`` "Hardware"; "Flit format")."""

from amaranth import Cat, Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from lpu_arch.c2c import KIND_BITS, EccStatus, Kind, flit_data_bits
from lpu_arch.hostmap import LINK_COUNT_BITS

from hdl.link.ecc import EccDecoder
from hdl.link.flit import flit_body_layout


class FlitDecoder(wiring.Component):
    """Error correction (SECDED, ``EccDecoder``) and the split into data and control.

    Members
    -------
    i_stream : In(stream.Signature(flit_body_layout, always_ready=True))
        Flits, at most one per cycle.
    o_stream : Out(stream.Signature(link_width, always_ready=True))
        The corrected payload of every DATA flit, 1 cycle after ``i_stream`` (registered).
        A DATA flit with an uncorrectable error still goes out (and is flagged).
    sync_valid / probe_valid / echo_valid : Out(1), ctrl_value : Out(link_width)
        A control flit, as a one-cycle pulse 1 cycle after ``i_stream``, with its corrected
        payload (``ctrl_value`` shows every flit's payload; it means something with a
        pulse).  A control flit with an uncorrectable error is dropped (a wrong HAC value
        would do more harm than a missing one).
    corrected : Out(LINK_COUNT_BITS), uncorrected : Out(LINK_COUNT_BITS)
        Flits corrected / found uncorrectable (saturating counters), counted 1 cycle after
        ``i_stream``.
    uncorrectable : Out(1)
        Sticky: a flit had an uncorrectable error (1 cycle after ``i_stream``).
    clear : In(1)
        Clears the counters and ``uncorrectable`` (a flit on the same cycle is not counted).
    """

    def __init__(self, cfg):
        self.cfg = cfg
        super().__init__({
            "i_stream": In(stream.Signature(flit_body_layout(cfg), always_ready=True)),
            "o_stream": Out(stream.Signature(cfg.link_width, always_ready=True)),
            "sync_valid": Out(1), "probe_valid": Out(1), "echo_valid": Out(1),
            "ctrl_value": Out(cfg.link_width),
            "corrected": Out(LINK_COUNT_BITS), "uncorrected": Out(LINK_COUNT_BITS),
            "uncorrectable": Out(1), "clear": In(1),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self.cfg
        flit = self.i_stream.payload
        m.submodules.ecc = ecc = EccDecoder(flit_data_bits(cfg))
        m.d.comb += [ecc.data.eq(Cat(flit.kind, flit.payload)), ecc.check.eq(flit.check)]
        valid, kind, payload, bad = Signal(), Signal(KIND_BITS), Signal(cfg.link_width), Signal()
        m.d.sync += [valid.eq(self.i_stream.valid), kind.eq(ecc.out[:KIND_BITS]),
                     payload.eq(ecc.out[KIND_BITS:]), bad.eq(ecc.status == EccStatus.UNCORRECTABLE)]

        top = (1 << LINK_COUNT_BITS) - 1
        with m.If(self.clear):
            m.d.sync += [self.corrected.eq(0), self.uncorrected.eq(0), self.uncorrectable.eq(0)]
        with m.Elif(self.i_stream.valid):
            with m.If((ecc.status == EccStatus.CORRECTED) & (self.corrected != top)):
                m.d.sync += self.corrected.eq(self.corrected + 1)
            with m.If(ecc.status == EccStatus.UNCORRECTABLE):
                m.d.sync += self.uncorrectable.eq(1)
                with m.If(self.uncorrected != top):
                    m.d.sync += self.uncorrected.eq(self.uncorrected + 1)

        ctrl_ok = valid & ~bad
        m.d.comb += [
            self.o_stream.valid.eq(valid & (kind == Kind.DATA)), self.o_stream.payload.eq(payload),
            self.ctrl_value.eq(payload),
            self.sync_valid.eq(ctrl_ok & (kind == Kind.SYNC)),
            self.probe_valid.eq(ctrl_ok & (kind == Kind.PROBE)),
            self.echo_valid.eq(ctrl_ok & (kind == Kind.ECHO)),
        ]
        return m
