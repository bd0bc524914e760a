"""The UART host bridge's byte protocol and its recovery from line errors, in Amaranth's
simulator (fast: no cocotb, no Verilog build).

What is tested
--------------
``hdl.top.host_bridge.UartTile`` of ``TileConfig.tiny()`` at 4 clock cycles per bit.  The
testbench bit-banges 8N1 frames onto ``rx`` (a chosen byte may get a stop bit driven
low) and a background testbench decodes ``tx`` in the middle of each bit, checking every
start and stop bit.  The expected bytes are those of the protocol as written in
``lpu_arch/hostlink.py`` (its docstring and ``LinkStatus``), spelled out here as literals
('W' addr[4] data[4] -> 'K'; 'R' addr[4] -> data[4]; 'S' -> flags, framing errors,
timeouts, ignored command bytes; flags FRAMING 1, TIMEOUT 2, IGNORED 4, BUSY 8; the timeout
after ``TIMEOUT_BYTES`` byte times of silence inside a command), not from the RTL.

* A write then a read-back of DMEM words in two MEM slices; a clean line's status is 0.
* A byte dropped mid-command (a write, then a read, short of one byte): no answer, and
  after a silence longer than the timeout a full command works and 'S' reports two
  timeouts.  A gap inside a command shorter than the timeout is not one.
* A bad stop bit on the command byte of a write whose first address byte is 'S', and one
  on an address byte of a read: the bridge answers nothing to either (the rest of each
  corrupted command is discarded, not taken for commands), a following command works,
  'S' reports the framing error with its count and no timeout.
* 'S' clears the record: ignored command bytes and a byte sent during an answer are
  reported once, then a second 'S' reads 0; the counts saturate at 255.
* A low glitch shorter than half a bit on an idle line is no byte at all.
"""

from amaranth.sim import Simulator

from lpu_arch import TileConfig, hostlink
from lpu_arch.hostmap import Region, addr

from hdl.top.host_bridge import UartTile

DIV = 4                              # clock cycles per bit
BYTE = 10 * DIV                      # one 8N1 frame
TIMEOUT = hostlink.TIMEOUT_BYTES * BYTE
ANSWER_WITHIN = 8 * BYTE             # an answer (at most 4 bytes) starts and ends within this

FRAMING, TIMED_OUT, IGNORED, BUSY = 1, 2, 4, 8


def le32(v):
    return (v & 0xFFFFFFFF).to_bytes(4, "little")


def w_cmd(a, v):
    return b"W" + le32(a) + le32(v)


def r_cmd(a):
    return b"R" + le32(a)


class Line:
    """Both ends of the serial line, seen from the host."""

    def __init__(self, dut):
        self.dut = dut
        self.received = []           # bytes decoded from tx

    async def send(self, ctx, data, bad_stop=()):
        """8N1 frames back to back; the bytes at the indices in ``bad_stop`` get their stop
        bit driven low (the line then returns high, as the next start bit or idle)."""
        for i, b in enumerate(data):
            for bit in [0] + [(b >> k) & 1 for k in range(8)] + [0 if i in bad_stop else 1]:
                ctx.set(self.dut.rx, bit)
                await ctx.tick().repeat(DIV)
        ctx.set(self.dut.rx, 1)

    async def monitor(self, ctx):
        while True:
            await ctx.tick()
            if ctx.get(self.dut.tx):
                continue
            await ctx.tick().repeat(DIV // 2)
            assert ctx.get(self.dut.tx) == 0, "tx: a low glitch, not a start bit"
            byte = 0
            for k in range(8):
                await ctx.tick().repeat(DIV)
                byte |= ctx.get(self.dut.tx) << k
            await ctx.tick().repeat(DIV)
            assert ctx.get(self.dut.tx) == 1, f"tx: byte {byte:#04x} with a bad stop bit"
            self.received.append(byte)

    async def recv(self, ctx, n, within=ANSWER_WITHIN):
        for _ in range(within):
            if len(self.received) >= n:
                break
            await ctx.tick()
        got, self.received = bytes(self.received[:n]), self.received[n:]
        assert len(got) == n, f"expected {n} bytes within {within} cycles, got {got!r}"
        return got

    async def silent(self, ctx, cycles):
        """Nothing arrives on tx for ``cycles`` cycles (and nothing is pending)."""
        await ctx.tick().repeat(cycles)
        assert not self.received, f"unexpected answer {bytes(self.received)!r}"

    # ---- the commands, as the protocol states them ----------------------------------------
    async def write(self, ctx, a, v):
        await self.send(ctx, w_cmd(a, v))
        assert await self.recv(ctx, 1) == b"K"
        assert not self.received

    async def read(self, ctx, a):
        await self.send(ctx, r_cmd(a))
        v = int.from_bytes(await self.recv(ctx, 4), "little")
        assert not self.received
        return v

    async def status(self, ctx):
        await self.send(ctx, b"S")
        s = await self.recv(ctx, 4)
        assert not self.received
        return {"flags": s[0], "framing": s[1], "timeouts": s[2], "ignored": s[3]}


CLEAN = {"flags": 0, "framing": 0, "timeouts": 0, "ignored": 0}


def run(body):
    dut = UartTile(TileConfig.tiny(), divisor=DIV)
    sim = Simulator(dut)
    sim.add_clock(1e-8)
    line = Line(dut)
    sim.add_testbench(line.monitor, background=True)

    async def testbench(ctx):
        await ctx.tick().repeat(4)
        await body(ctx, line)

    sim.add_testbench(testbench)
    sim.run()


def dmem(mem, word):
    return addr(Region.DMEM, mem, word)


# ---- pure Python: the module's constants are the documented protocol ----------------------
def test_protocol_bytes():
    assert (hostlink.CMD_WRITE, hostlink.CMD_READ, hostlink.CMD_STATUS, hostlink.ACK) == tuple(b"WRSK")
    assert hostlink.write_cmd(0x20000003, 0xDEADBEEF) == b"W\x03\x00\x00\x20\xef\xbe\xad\xde"
    assert hostlink.read_cmd(0x20100007) == b"R\x07\x00\x10\x20"
    assert hostlink.status_cmd() == b"S"
    assert [int(f) for f in hostlink.LinkStatus] == [FRAMING, TIMED_OUT, IGNORED, BUSY]
    assert hostlink.decode_status(bytes([TIMED_OUT | FRAMING, 1, 2, 3])) == \
        {"flags": hostlink.LinkStatus.FRAMING | hostlink.LinkStatus.TIMEOUT,
         "framing": 1, "timeouts": 2, "ignored": 3}
    # Whole byte times, more than a back-to-back command's 10 bit times between bytes.
    assert hostlink.TIMEOUT_BYTES >= 2
    assert hostlink.timeout_cycles(217) == hostlink.TIMEOUT_BYTES * 10 * 217
    assert hostlink.STATUS_COUNT_MAX == 255


# ---- RTL ----------------------------------------------------------------------------------
def test_write_read_round_trip():
    async def body(ctx, line):
        await line.write(ctx, dmem(0, 3), 0xDEADBEEF)
        await line.write(ctx, dmem(1, 3), 0x01234567)
        assert await line.read(ctx, dmem(0, 3)) == 0xDEADBEEF
        assert await line.read(ctx, dmem(1, 3)) == 0x01234567
        assert await line.status(ctx) == CLEAN
    run(body)


def test_dropped_byte_times_out_and_recovers():
    async def body(ctx, line):
        # 'W' and 3 of its 4 address bytes, then silence: no answer, the command is discarded.
        await line.send(ctx, w_cmd(dmem(0, 5), 0x11111111)[:4])
        await line.silent(ctx, TIMEOUT + 2 * BYTE)
        await line.write(ctx, dmem(0, 5), 0xCAFEF00D)
        assert await line.read(ctx, dmem(0, 5)) == 0xCAFEF00D
        # A read short of its last address byte.
        await line.send(ctx, r_cmd(dmem(0, 5))[:4])
        await line.silent(ctx, TIMEOUT + 2 * BYTE)
        assert await line.read(ctx, dmem(0, 5)) == 0xCAFEF00D
        assert await line.status(ctx) == {"flags": TIMED_OUT, "framing": 0, "timeouts": 2, "ignored": 0}
        assert await line.status(ctx) == CLEAN
    run(body)


def test_gap_shorter_than_timeout_is_not_one():
    async def body(ctx, line):
        # The next byte ends TIMEOUT_BYTES - 1 byte times after the last: inside the bound.
        cmd = w_cmd(dmem(1, 2), 0x5A5AA5A5)
        await line.send(ctx, cmd[:5])
        await line.silent(ctx, TIMEOUT - 2 * BYTE)
        await line.send(ctx, cmd[5:])
        assert await line.recv(ctx, 1) == b"K"
        assert await line.read(ctx, dmem(1, 2)) == 0x5A5AA5A5
        assert await line.status(ctx) == CLEAN
    run(body)


def test_bad_stop_bit_sets_framing_flag():
    async def body(ctx, line):
        # A write whose command byte has a bad stop bit, and whose first address byte is
        # 'S': the rest of the command must not be taken for commands (no status answer).
        await line.write(ctx, dmem(0, 0x53), 0x0BADF00D)
        await line.send(ctx, w_cmd(dmem(0, 0x53), 0x12345678), bad_stop={0})
        await line.silent(ctx, TIMEOUT + 2 * BYTE)
        assert await line.read(ctx, dmem(0, 0x53)) == 0x0BADF00D       # not written
        await line.write(ctx, dmem(0, 0x53), 0x12345678)
        assert await line.read(ctx, dmem(0, 0x53)) == 0x12345678
        assert await line.status(ctx) == {"flags": FRAMING, "framing": 1, "timeouts": 0, "ignored": 0}
        # A read with a bad stop bit on its second address byte: no answer, then it works.
        await line.send(ctx, r_cmd(dmem(0, 0x53)), bad_stop={2})
        await line.silent(ctx, TIMEOUT + 2 * BYTE)
        assert await line.read(ctx, dmem(0, 0x53)) == 0x12345678
        assert await line.status(ctx) == {"flags": FRAMING, "framing": 1, "timeouts": 0, "ignored": 0}
        assert await line.status(ctx) == CLEAN
    run(body)


def test_status_reports_once_and_clears():
    async def body(ctx, line):
        await line.send(ctx, b"x\x00K")                 # not commands: ignored, counted
        await line.write(ctx, dmem(1, 1), 7)
        # A byte sent while the bridge answers a read is discarded and flagged.
        await line.send(ctx, r_cmd(dmem(1, 1)) + b"R")
        assert await line.recv(ctx, 4) == le32(7)
        await line.silent(ctx, 2 * BYTE)
        assert await line.status(ctx) == {"flags": IGNORED | BUSY, "framing": 0, "timeouts": 0, "ignored": 3}
        assert await line.status(ctx) == CLEAN
        assert await line.read(ctx, dmem(1, 1)) == 7
    run(body)


def test_counts_saturate():
    async def body(ctx, line):
        await line.send(ctx, b"\xff" * 260)
        assert await line.status(ctx) == {"flags": IGNORED, "framing": 0, "timeouts": 0, "ignored": 255}
        assert await line.status(ctx) == CLEAN
    run(body)


def test_short_low_glitch_is_not_a_byte():
    async def body(ctx, line):
        # Low for less than half a bit: no start bit, so no byte (not even an ignored 0xFF).
        ctx.set(line.dut.rx, 0)
        await ctx.tick().repeat(DIV // 2 - 1)
        ctx.set(line.dut.rx, 1)
        await line.silent(ctx, 2 * BYTE)
        assert await line.status(ctx) == CLEAN
    run(body)
