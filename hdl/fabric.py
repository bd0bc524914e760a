"""The stream register fabric (design brief section 1, "Streams, not buses")."""

from amaranth import Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .layouts import drive_signature, stream_bundle, tap_signature


class StreamFabric(wiring.Component):
    """East- and west-flowing stream registers across all slice positions.

    A value driven at position ``p`` on cycle ``t`` is visible at ``p + d`` (east) or
    ``p - d`` (west) on cycle ``t + d``.  A drive replaces the passing value; there is
    no arbiter (the compiler guarantees one writer per stream, position and cycle).
    A slice may drive any set of streams in both directions on one cycle.
    Values leaving either edge are dropped; the edges feed zeros.

    Members
    -------
    taps : ``Out(tap_signature).array(positions)``
        ``taps[p].east[s]`` / ``taps[p].west[s]``: the value visible at position ``p``.
    drives : ``In(drive_signature).array(positions)``
        ``drives[p].east`` / ``drives[p].west``: the writes of the slice at position ``p``
        this cycle; stream ``s`` takes ``data[s]`` where ``mask`` bit ``s`` is set.
    """

    def __init__(self, cfg):
        self.cfg = cfg
        super().__init__({
            "taps": Out(tap_signature(cfg)).array(cfg.positions),
            "drives": In(drive_signature(cfg)).array(cfg.positions),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self.cfg
        P = cfg.positions
        # Register r_east[p] holds the value visible at p+1; r_west[p] the value at p-1.
        east = [Signal(stream_bundle(cfg), name=f"east_{p}") for p in range(P)]
        west = [Signal(stream_bundle(cfg), name=f"west_{p}") for p in range(P)]
        for p in range(P):
            if p > 0:
                m.d.comb += self.taps[p].east.eq(east[p - 1])
            if p < P - 1:
                m.d.comb += self.taps[p].west.eq(west[p + 1])
            drv = self.drives[p]
            for s in range(cfg.streams):
                m.d.sync += [
                    east[p][s].eq(Mux(drv.east.mask[s], drv.east.data[s], self.taps[p].east[s])),
                    west[p][s].eq(Mux(drv.west.mask[s], drv.west.data[s], self.taps[p].west[s])),
                ]
        return m
