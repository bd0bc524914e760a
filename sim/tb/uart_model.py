"""A UART line model for cocotb: 8N1 source and sink with bit timing from Timers."""

from __future__ import annotations

import cocotb
from cocotb.queue import Queue
from cocotb.triggers import FallingEdge, Timer


class UartSource:
    """Drives ``signal`` (idle high) with bytes, ``bit_ns`` nanoseconds per bit."""

    def __init__(self, signal, bit_ns: float):
        self.signal, self.bit_ns = signal, bit_ns
        signal.value = 1

    async def send(self, data: bytes):
        for byte in data:
            for bit in [0] + [(byte >> i) & 1 for i in range(8)] + [1]:
                self.signal.value = bit
                await Timer(self.bit_ns, unit="ns")


class UartSink:
    """Receives bytes from ``signal`` into a queue; ``recv(n)`` awaits n bytes."""

    def __init__(self, signal, bit_ns: float):
        self.signal, self.bit_ns = signal, bit_ns
        self.queue: Queue[int] = Queue()
        self.framing_errors = 0
        cocotb.start_soon(self._run())

    async def _run(self):
        while True:
            await FallingEdge(self.signal)
            await Timer(self.bit_ns * 1.5, unit="ns")
            byte = 0
            for i in range(8):
                byte |= int(self.signal.value) << i
                await Timer(self.bit_ns, unit="ns")
            if not int(self.signal.value):
                self.framing_errors += 1
            self.queue.put_nowait(byte)
            await Timer(self.bit_ns * 0.25, unit="ns")   # leave the stop bit's middle

    async def recv(self, n: int) -> bytes:
        return bytes([await self.queue.get() for _ in range(n)])
