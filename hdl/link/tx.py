"""The link's transmitter (``docs/c2c.md`` "Hardware", LinkTx; "Flit format")."""

from amaranth import Cat, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from lpu_arch.c2c import KIND_BITS, Kind, flit_bits, flit_data_bits

from hdl.link.ecc import EccEncoder


class LinkTx(wiring.Component):
    """Transmit side of one link (sender's clock): a vector as ``flits_per_vector`` DATA
    flits on consecutive cycles from the cycle after SEND, control flits when idle, each
    with its SECDED check (``hdl.link.ecc``).

    Members
    -------
    send : In(1), send_data : In(vector_bits)
        SEND this cycle (already qualified by the core not being stalled).
    ctrl_req : In(1), ctrl_kind : In(2), ctrl_payload : In(link_width), ctrl_ack : Out(1)
        A control flit; taken (``ctrl_ack``) on a cycle without DATA.  SYNC and PROBE
        carry ``hac + 1`` (the HAC on the cycle the flit is in the output register)
        instead of ``ctrl_payload``.
    hac : In(HAC_BITS)
    flit : Out(flit_bits)
        The output register (the wire starts here).
    overrun : Out(1)
        Sticky: a SEND arrived while the previous vector was still being sent.
    clear : In(1)
        Clears ``overrun`` (tile start).
    """

    def __init__(self, cfg):
        self.cfg = cfg
        super().__init__({
            "send": In(1), "send_data": In(cfg.vector_bits),
            "ctrl_req": In(1), "ctrl_kind": In(KIND_BITS), "ctrl_payload": In(cfg.link_width),
            "ctrl_ack": Out(1), "hac": In(cfg.HAC_BITS),
            "flit": Out(flit_bits(cfg)), "overrun": Out(1), "clear": In(1),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self.cfg
        W, F = cfg.link_width, cfg.flits_per_vector
        m.submodules.enc = enc = EccEncoder(flit_data_bits(cfg))
        shift = Signal(cfg.vector_bits)
        left = Signal(range(F + 1))
        valid, kind, payload = Signal(), Signal(KIND_BITS), Signal(W)

        with m.If(self.send):
            with m.If(left != 0):
                m.d.sync += self.overrun.eq(1)
            # The first flit goes out now; the rest on the following cycles.
            m.d.comb += [valid.eq(1), kind.eq(Kind.DATA), payload.eq(self.send_data[:W])]
            m.d.sync += [shift.eq(self.send_data >> W), left.eq(F - 1)]
        with m.Elif(left != 0):
            m.d.comb += [valid.eq(1), kind.eq(Kind.DATA), payload.eq(shift[:W])]
            m.d.sync += [shift.eq(shift >> W), left.eq(left - 1)]
        with m.Elif(self.ctrl_req):
            timed = (self.ctrl_kind == Kind.SYNC) | (self.ctrl_kind == Kind.PROBE)
            m.d.comb += [valid.eq(1), kind.eq(self.ctrl_kind), self.ctrl_ack.eq(1),
                         payload.eq(Mux(timed, self.hac + 1, self.ctrl_payload))]
        with m.If(self.clear):
            m.d.sync += self.overrun.eq(0)
        m.d.comb += enc.data.eq(Cat(kind, payload))
        m.d.sync += self.flit.eq(Mux(valid, Cat(valid, kind, payload, enc.check), 0))
        return m
