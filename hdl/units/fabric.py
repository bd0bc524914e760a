"""The stream register fabric (design brief section 1, "Streams, not buses")."""

from amaranth import Elaboratable, Module

from hdl.units.layouts import drive_value


class StreamStage(Elaboratable):
    """The stream registers loaded at one slice position.

    East- and west-flowing stream registers run across all slice positions.  A value
    driven at position ``p`` on cycle ``t`` is visible at ``p + d`` (east) or ``p - d``
    (west) on cycle ``t + d``.  A drive replaces the passing value; there is no arbiter
    (the compiler guarantees one writer per stream, position and cycle).  A slice may
    drive any set of streams in both directions on one cycle.  Values leaving either edge
    are dropped; the edges feed zeros.

    Position ``p``'s stage loads, for every stream ``s``, ``east_out[s]`` (the value visible
    at ``p + 1`` on the next cycle) with the slice's value where its east ``mask`` bit
    ``s`` is set, else with ``tap.east[s]`` (the value passing ``p``); ``west_out`` alike.
    At the east edge there is no ``east_out`` (None), at the west edge no ``west_out``.

    The stage drives the signals it is given and reads the slice's drive signals
    themselves: the tile's streams exist once in the netlist.

    Parameters
    ----------
    tap : ``.east``, ``.west``: lists of ``streams`` values
        The values visible at this position.
    drive : ``layouts.drive_signature`` interface
        The slice's writes this cycle.
    east_out, west_out : list of ``streams`` signals, or None
    """

    def __init__(self, cfg, tap, drive, east_out, west_out):
        self.cfg, self.tap, self.drive = cfg, tap, drive
        self.east_out, self.west_out = east_out, west_out

    def elaborate(self, platform):
        m = Module()
        for regs, passing, port in ((self.east_out, self.tap.east, self.drive.east),
                                    (self.west_out, self.tap.west, self.drive.west)):
            if regs is None:
                continue
            for s in range(self.cfg.streams):
                m.d.sync += regs[s].eq(passing[s])
                with m.If(port.mask[s]):
                    m.d.sync += regs[s].eq(drive_value(port, s))
        return m
