"""The stream register fabric (design brief section 1, "Streams, not buses")."""

from amaranth import Elaboratable, Module

from hdl.units.layouts import drive_value


class StreamStage(Elaboratable):
    """The stream registers loaded at one slice position (``timing.diagonal``: a value
    driven at ``p`` on cycle ``t`` is visible at ``p + d`` east or ``p - d`` west on ``t + d``).

    For every stream ``s``, ``east_out[s]`` (visible at ``p + 1`` next cycle; None at the
    east edge) takes the slice's value where its ``drive.east.mask`` bit ``s`` is set, else
    ``tap.east[s]``, the value passing ``p``; ``west_out`` alike.  A drive replaces the
    passing value with no arbiter (the compiler guarantees one writer per stream, position
    and cycle); the edges feed zeros.  The stage drives the signals it is given and reads
    the slice's drive signals themselves: the tile's streams exist once in the netlist.
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
