"""The hardware-aligned counter and its alignment protocol (``docs/c2c.md`` "The HAC")."""

from amaranth import Module, Signal, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from lpu_arch.c2c import HAC_ERROR_MAX, KIND_BITS, Kind
from lpu_arch.hostmap import LINK_COUNT_BITS


class HacUnit(wiring.Component):
    """The tile's HAC: the root's free-runs and goes to its children every ``sync_interval``
    cycles; a child measures its parent link's latency at start-up (PROBE/ECHO), then sets
    its HAC to every SYNC value received plus that latency.

    Parameters
    ----------
    parent : int or None
        The link to the HAC parent (None: this tile is the root).
    children : list of int
        Links to HAC children (SYNC goes out on these).

    Members
    -------
    hac : Out(HAC_BITS)
    locked : Out(1)
        Root: always.  Child: the link latency is measured and a SYNC has been applied.
    lock_lost : Out(1)
        Sticky: a SYNC found the HAC off by more than ``HAC_ERROR_MAX`` after lock.
    latency : Out(LINK_COUNT_BITS)
        Measured one-way latency of the parent link (child), in this tile's cycles.
    error : Out(signed(LINK_COUNT_BITS))
        The HAC error the last SYNC corrected (own HAC minus parent's, before correcting).
    tx_req/tx_kind/tx_payload (Out) and tx_ack (In), per link: control flit requests.
    rx_sync/rx_probe/rx_echo (In), rx_value (In), per link: received control flits.
    """

    def __init__(self, cfg, parent, children):
        self.cfg, self.parent, self.children = cfg, parent, list(children)
        n = cfg.links
        super().__init__({
            "hac": Out(cfg.HAC_BITS), "locked": Out(1), "lock_lost": Out(1),
            "latency": Out(LINK_COUNT_BITS), "error": Out(signed(LINK_COUNT_BITS)), "clear": In(1),
            "tx_req": Out(n), "tx_kind": Out(KIND_BITS).array(n), "tx_payload": Out(cfg.link_width).array(n),
            "tx_ack": In(n),
            "rx_sync": In(n), "rx_probe": In(n), "rx_echo": In(n), "rx_value": In(cfg.link_width).array(n),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self.cfg
        hac_next = Signal(cfg.HAC_BITS)
        m.d.comb += hac_next.eq(self.hac + 1)
        m.d.sync += self.hac.eq(hac_next)
        if self.parent is None:
            m.d.comb += self.locked.eq(1)

        sync_due = Signal()
        m.d.comb += sync_due.eq(self.hac[:(cfg.sync_interval - 1).bit_length()] == 0
                                if cfg.sync_interval & (cfg.sync_interval - 1) == 0
                                else (self.hac % cfg.sync_interval) == 0)
        for link in range(cfg.links):
            # Pending flags; one request at a time, ECHO first (its timing is part of the latency probe).
            requests = {kind: Signal(name=f"{kind.name.lower()}_pending_{link}")
                        for kind in (Kind.ECHO, Kind.PROBE, Kind.SYNC)}
            echo_value = Signal(cfg.link_width, name=f"echo_{link}")
            with m.If(self.rx_probe[link]):
                m.d.sync += [requests[Kind.ECHO].eq(1), echo_value.eq(self.rx_value[link])]
            if link in self.children:
                with m.If(sync_due):
                    m.d.sync += requests[Kind.SYNC].eq(1)
            for i, (kind, pending) in enumerate(requests.items()):
                with (m.Elif if i else m.If)(pending):
                    m.d.comb += [self.tx_req[link].eq(1), self.tx_kind[link].eq(kind)]
                    if kind == Kind.ECHO:
                        m.d.comb += self.tx_payload[link].eq(echo_value)
                    with m.If(self.tx_ack[link]):      # taken: the request is done
                        m.d.sync += pending.eq(0)

            if link == self.parent:
                measured = Signal(name="latency_measured")
                # Probe every 64 cycles until the echo comes back.
                with m.If(~measured & (self.hac[:6] == 0)):
                    m.d.sync += requests[Kind.PROBE].eq(1)
                with m.If(self.rx_echo[link] & ~measured):
                    rtt = Signal(cfg.HAC_BITS, name="rtt")
                    m.d.comb += rtt.eq(self.hac - self.rx_value[link])
                    m.d.sync += [measured.eq(1), self.latency.eq((rtt - cfg.ECHO_TURNAROUND) >> 1)]
                with m.If(self.rx_sync[link] & measured):
                    expect = Signal(cfg.HAC_BITS, name="hac_expected")
                    err = Signal(signed(cfg.HAC_BITS), name="hac_error")
                    m.d.comb += [expect.eq(self.rx_value[link] + self.latency), err.eq(self.hac - expect)]
                    m.d.sync += [self.hac.eq(expect + 1), self.error.eq(err), self.locked.eq(1)]
                    with m.If(self.locked & ((err > HAC_ERROR_MAX) | (err < -HAC_ERROR_MAX))):
                        m.d.sync += self.lock_lost.eq(1)
        with m.If(self.clear):
            m.d.sync += self.lock_lost.eq(0)
        return m
