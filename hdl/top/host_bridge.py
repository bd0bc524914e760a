"""UART host bridge: the tile's host bus (``lpu_arch/hostmap.py``) over a serial line,
speaking the byte protocol of ``lpu_arch/hostlink.py``; and ``UartTile``, the tile
behind that bridge, which is what the FPGA build and the bridge test use."""

from amaranth import C, Cat, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from lpu_arch.hostlink import ACK, CMD_READ, CMD_STATUS, CMD_WRITE, STATUS_COUNT_MAX, LinkStatus, timeout_cycles
from lpu_arch.hostmap import HOST_ADDR_BITS

from hdl.top.tile import Tile
from hdl.top.uart import UartRx, UartTx


class UartTile(wiring.Component):
    """A tile driven over UART.

    The command FSM of the byte protocol (``lpu_arch/hostlink.py``, which states what it
    does with every byte): ``CMD`` waits for a command byte, ``ARGS`` takes the
    arguments, ``DRAIN`` discards bytes after a framing error until the line is quiet;
    ``WRITE``/``READ``/``WAIT`` use the tile's host bus and ``SEND`` sends the answer.  A
    timer counts the line's silence since the last byte received (or framing error) in
    ``ARGS`` and ``DRAIN``: after ``hostlink.timeout_cycles(divisor)`` cycles the FSM
    returns to ``CMD``.  The status answered to ``'S'`` (flags and three saturating
    counts) is kept here, outside the tile and its host map.

    Members
    -------
    rx : In(1), tx : Out(1)
        8N1 serial line, ``divisor`` clock cycles per bit.
    done : Out(1), running : Out(1), fault : Out(1)
        For LEDs: run state and any sticky fault flag.
    """

    def __init__(self, cfg, divisor: int):
        self.cfg, self.divisor = cfg, divisor
        super().__init__({"rx": In(1, init=1), "tx": Out(1, init=1),
                          "done": Out(1), "running": Out(1), "fault": Out(1)})

    def elaborate(self, platform):
        m = Module()
        m.submodules.tile = tile = Tile(self.cfg)
        m.submodules.uart_rx = urx = UartRx(self.divisor)
        m.submodules.uart_tx = utx = UartTx(self.divisor)
        m.d.comb += [urx.rx.eq(self.rx), self.tx.eq(utx.tx),
                     self.done.eq(tile.done), self.running.eq(tile.running)]

        cmd = Signal(8)
        addr = Signal(HOST_ADDR_BITS)
        data = Signal(self.cfg.HOST_WORD)
        count = Signal(range(9))
        m.d.comb += urx.data.ready.eq(1)
        byte = urx.data.payload
        got = urx.data.valid             # a byte arrived (a one-cycle pulse: ready is always 1)
        bad = urx.frame_error            # a byte with a bad stop bit arrived (and was dropped)

        # Line silence in ARGS and DRAIN: reloaded by every byte and framing error.
        quiet_max = timeout_cycles(self.divisor) - 1
        quiet = Signal(range(quiet_max + 1))
        expired = Signal()
        m.d.comb += expired.eq(quiet == 0)

        # The status word of 'S' (hostlink.LinkStatus, then three saturating counts).
        flags = Signal(len(LinkStatus))
        n_framing, n_timeout, n_ignored = (Signal(range(STATUS_COUNT_MAX + 1), name=f"n_{n}")
                                           for n in ("framing", "timeout", "ignored"))

        def note(flag, counter=None):
            """Raise ``flag`` in the status record and count it in ``counter`` (saturating)."""
            m.d.sync += flags[flag.bit_length() - 1].eq(1)
            if counter is not None:
                with m.If(counter != STATUS_COUNT_MAX):
                    m.d.sync += counter.eq(counter + 1)

        with m.If(bad):
            note(LinkStatus.FRAMING, n_framing)

        with m.FSM() as fsm:
            with m.State("CMD"):
                with m.If(bad):
                    m.d.sync += quiet.eq(quiet_max)
                    m.next = "DRAIN"
                with m.Elif(got & ((byte == CMD_WRITE) | (byte == CMD_READ))):
                    m.d.sync += [cmd.eq(byte), count.eq(0), quiet.eq(quiet_max)]
                    m.next = "ARGS"
                with m.Elif(got & (byte == CMD_STATUS)):
                    # Answer the record and clear it (no framing error can arrive this cycle).
                    m.d.sync += [data.eq(Cat(flags, C(0, 8 - len(flags)), n_framing, n_timeout, n_ignored)),
                                 count.eq(4), flags.eq(0), n_framing.eq(0), n_timeout.eq(0), n_ignored.eq(0)]
                    m.next = "SEND"
                with m.Elif(got):
                    note(LinkStatus.IGNORED, n_ignored)
            with m.State("ARGS"):
                with m.If(bad):
                    m.d.sync += quiet.eq(quiet_max)
                    m.next = "DRAIN"
                with m.Elif(got):
                    # Shift in little-endian: address bytes first, then data bytes.
                    m.d.sync += [Cat(addr, data).eq(Cat(addr[8:], data[0:8], data[8:], byte)),
                                 count.eq(count + 1), quiet.eq(quiet_max)]
                    with m.If((count == 3) & (cmd == CMD_READ)):
                        m.next = "FIX_READ"
                    with m.If(count == 7):
                        m.next = "WRITE"
                with m.Elif(expired):   # the command stayed incomplete: discard it
                    note(LinkStatus.TIMEOUT, n_timeout)
                    m.next = "CMD"
                with m.Else():
                    m.d.sync += quiet.eq(quiet - 1)
            with m.State("DRAIN"):
                # After a framing error: discard bytes until the line has been quiet.
                with m.If(got | bad):
                    m.d.sync += quiet.eq(quiet_max)
                with m.Elif(expired):
                    m.next = "CMD"
                with m.Else():
                    m.d.sync += quiet.eq(quiet - 1)
            with m.State("FIX_READ"):
                # Four bytes were shifted through addr:data; the address sits in data.
                m.d.sync += addr.eq(data)
                m.next = "READ"
            with m.State("WRITE"):
                m.d.comb += [tile.host.addr.eq(addr), tile.host.wdata.eq(data), tile.host.we.eq(1)]
                m.d.sync += [data.eq(ACK), count.eq(1)]
                m.next = "SEND"
            with m.State("READ"):
                m.d.comb += [tile.host.addr.eq(addr), tile.host.re.eq(1)]
                m.next = "WAIT"
            with m.State("WAIT"):
                with m.If(tile.host.rvalid):
                    m.d.sync += [data.eq(tile.host.rdata), count.eq(4)]
                    m.next = "SEND"
            with m.State("SEND"):
                m.d.comb += [utx.data.payload.eq(data[0:8]), utx.data.valid.eq(1)]
                with m.If(utx.data.ready):
                    m.d.sync += [data.eq(data >> 8), count.eq(count - 1)]
                    with m.If(count == 1):
                        m.next = "CMD"
        # A byte while a command executes or its answer is sent is discarded.
        with m.If(got & ~fsm.ongoing("CMD") & ~fsm.ongoing("ARGS") & ~fsm.ongoing("DRAIN")):
            note(LinkStatus.BUSY)
        m.d.comb += self.fault.eq(tile.fault)
        return m
