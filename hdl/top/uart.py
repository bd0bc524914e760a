"""8N1 UART transmitter and receiver on ``amaranth.lib.stream`` byte streams.

Outside the deterministic datapath (it only feeds the host bridge), so valid/ready
handshakes are fine here.  Amaranth 0.5 ships no UART; these are small and sim-tested
through the bridge tests (``tests/hdl/test_host_bridge.py`` over cocotb,
``tests/hdl/test_uart_bridge.py`` in Amaranth's simulator, framing errors included).
"""

from amaranth import Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out


class UartTx(wiring.Component):
    """Members: ``data`` (In stream of bytes), ``tx`` (Out(1), idles high).
    ``divisor`` clock cycles per bit."""

    def __init__(self, divisor: int):
        if divisor < 2:
            raise ValueError(f"UART divisor must be at least 2 clock cycles per bit, got {divisor}")
        self.divisor = divisor
        super().__init__({"data": In(stream.Signature(8)), "tx": Out(1, init=1)})

    def elaborate(self, platform):
        m = Module()
        shreg = Signal(10)           # stop bit, 8 data bits (LSB first), start bit
        bits = Signal(range(11))
        timer = Signal(range(self.divisor))
        m.d.comb += self.data.ready.eq((bits == 0) & (timer == 0))
        with m.If(timer != 0):
            m.d.sync += timer.eq(timer - 1)
        with m.Elif(bits != 0):       # next bit; the stop bit is then held a full bit time
            m.d.sync += [self.tx.eq(shreg[0]), shreg.eq(shreg >> 1), bits.eq(bits - 1),
                         timer.eq(self.divisor - 1)]
        with m.Elif(self.data.valid):
            m.d.sync += [shreg.eq((1 << 9) | (self.data.payload << 1)), bits.eq(10)]
        return m


class UartRx(wiring.Component):
    """Members: ``rx`` (In(1)), ``data`` (Out stream of bytes; a byte not taken before the
    next one arrives is lost and ``overrun`` is set, sticky), ``frame_error`` (Out(1): a
    one-cycle pulse, in place of ``data.valid``, for a byte whose stop bit sampled low;
    that byte is dropped).

    A falling edge starts a byte only if the line is still low half a bit time later (the
    middle of the start bit); a shorter low glitch is ignored.  Bits are sampled in their
    middle: data bit ``i`` ``1.5 + i`` bit times after the falling edge, the stop bit 9.5."""

    def __init__(self, divisor: int):
        if divisor < 4:
            raise ValueError(f"UART divisor must be at least 4 clock cycles per bit, got {divisor}")
        self.divisor = divisor
        super().__init__({"rx": In(1, init=1), "data": Out(stream.Signature(8)), "overrun": Out(1),
                          "frame_error": Out(1)})

    def elaborate(self, platform):
        m = Module()
        # Two flip-flops against metastability: the line is asynchronous to our clock.
        sync_rx = Signal(2, init=0b11)
        m.d.sync += sync_rx.eq((sync_rx << 1) | self.rx)
        line = sync_rx[1]
        half = self.divisor // 2
        timer = Signal(range(self.divisor))
        bits = Signal(range(10))
        shreg = Signal(8)
        with m.If(self.data.valid & self.data.ready):
            m.d.sync += self.data.valid.eq(0)
        m.d.sync += self.frame_error.eq(0)
        with m.FSM():
            with m.State("IDLE"):
                with m.If(~line):   # a falling edge: check the start bit in its middle
                    m.d.sync += timer.eq(half - 1)
                    m.next = "START"
            with m.State("START"):
                with m.If(timer == 0):
                    with m.If(~line):   # a start bit: the first data bit is one bit time on
                        m.d.sync += [timer.eq(self.divisor - 1), bits.eq(8)]
                        m.next = "DATA"
                    with m.Else():      # a glitch
                        m.next = "IDLE"
                with m.Else():
                    m.d.sync += timer.eq(timer - 1)
            with m.State("DATA"):
                with m.If(timer == 0):
                    m.d.sync += [shreg.eq((line << 7) | (shreg >> 1)), bits.eq(bits - 1),
                                 timer.eq(self.divisor - 1)]
                    with m.If(bits == 1):
                        m.next = "STOP"
                with m.Else():
                    m.d.sync += timer.eq(timer - 1)
            with m.State("STOP"):
                with m.If(timer == 0):
                    with m.If(line):   # a valid stop bit
                        m.d.sync += [self.data.payload.eq(shreg), self.data.valid.eq(1)]
                        with m.If(self.data.valid & ~self.data.ready):
                            m.d.sync += self.overrun.eq(1)
                    with m.Else():     # framing error: the byte is dropped
                        m.d.sync += self.frame_error.eq(1)
                    m.next = "IDLE"
                with m.Else():
                    m.d.sync += timer.eq(timer - 1)
        return m
