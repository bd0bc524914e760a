"""UART host bridge: the tile's host bus (``lpu_arch/hostmap.py``) over a serial line,
speaking the byte protocol of ``lpu_arch/hostlink.py``; and ``UartTile``, the tile
behind that bridge, which is what the FPGA build and the bridge test use."""

from amaranth import Cat, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from lpu_arch.hostlink import ACK, CMD_READ, CMD_WRITE
from lpu_arch.hostmap import HOST_ADDR_BITS

from .tile import Tile
from .uart import UartRx, UartTx


class UartTile(wiring.Component):
    """A tile driven over UART.

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
        with m.FSM():
            with m.State("CMD"):
                with m.If(urx.data.valid & ((byte == CMD_WRITE) | (byte == CMD_READ))):
                    m.d.sync += [cmd.eq(byte), count.eq(0)]
                    m.next = "ARGS"
            with m.State("ARGS"):
                with m.If(urx.data.valid):
                    # Shift in little-endian: address bytes first, then data bytes.
                    m.d.sync += [Cat(addr, data).eq(Cat(addr[8:], data[0:8], data[8:], byte)),
                                 count.eq(count + 1)]
                    with m.If((count == 3) & (cmd == CMD_READ)):
                        m.next = "FIX_READ"
                    with m.If(count == 7):
                        m.next = "WRITE"
            with m.State("FIX_READ"):
                # Four bytes were shifted through addr:data; the address sits in data.
                m.d.sync += addr.eq(data)
                m.next = "READ"
            with m.State("WRITE"):
                m.d.comb += [tile.host.addr.eq(addr), tile.host.wdata.eq(data), tile.host.we.eq(1)]
                m.d.sync += data.eq(ACK)
                m.d.sync += count.eq(1)
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
        m.d.comb += self.fault.eq(tile.fault)
        return m
