"""Byte protocol of the UART host bridge (``hdl/top/host_bridge.py``).

It carries the host bus of ``hostmap.py`` over a serial line, 8N1, so the same
loads, start, status and read-backs that the simulation performs can be done from a PC:

* write:  ``'W'`` addr[4] data[4]  ->  ``'K'`` once the write is done
* read:   ``'R'`` addr[4]          ->  data[4]
* status: ``'S'``                  ->  status[4], then the bridge's error record is cleared

Addresses, data and the status word are 32-bit little-endian.  The bridge answers each
command only after its last byte, and takes no byte while it executes a command or
sends its answer: the host sends a command, waits for the whole answer, then sends the
next.

The status word (``'S'``) describes the serial line since the previous ``'S'`` (or
reset), and reading it clears it; it is the bridge's own, independent of the tile's
host map: byte 0 the :class:`LinkStatus` flags, bytes 1 to 3 the numbers of framing
errors, timeouts and ignored command bytes (saturating at :data:`STATUS_COUNT_MAX`).

Exactly what the bridge does with each byte:

* Waiting for a command byte: ``'W'``, ``'R'`` and ``'S'`` start their command; any other
  byte is discarded and counted as ignored.
* Inside a command (after its command byte, before its last byte): every byte is the
  next argument byte.  If no byte arrives for :data:`TIMEOUT_BYTES` byte times
  (``TIMEOUT_BYTES * 10`` bit times from the middle of the stop bit of the last byte
  received, :func:`timeout_cycles` clock cycles), the partial command is discarded
  unexecuted, a timeout counted, and the bridge waits for a command byte again.  An idle
  gap between two bytes of a command shorter than ``TIMEOUT_BYTES - 1`` byte times is
  therefore harmless; a host that sends a command's bytes back to back (as
  ``sim/tb/driver.py`` and a single ``write()`` to a USB serial adapter do) never trips it.
* A byte with a bad stop bit is dropped, as a UART must, and counted as a framing
  error.  If the bridge was waiting for a command byte or inside a command, it then
  discards the partial command (unexecuted, not counted as a timeout) and every byte
  after it until the line has been quiet for :data:`TIMEOUT_BYTES` byte times (those
  bytes are not counted; further framing errors are); the following bytes of a
  corrupted command are therefore not taken for commands.
* A byte that arrives while the bridge executes a command or sends its answer is
  discarded and flagged ``BUSY`` (not counted).

Recovery: a host that gets no (or a short) answer waits at least :data:`TIMEOUT_BYTES`
byte times after its last byte, discards whatever it received, and sends the command
again; ``'S'`` then says what happened (whether a write whose ``'K'`` was lost took
effect can be read back).
"""

import enum

CMD_WRITE = ord("W")
CMD_READ = ord("R")
CMD_STATUS = ord("S")
ACK = ord("K")

# The bridge returns to waiting for a command byte when a command has been incomplete
# and the line quiet for this many byte times (10 bit times each, counted from the
# stop bit of the last byte received): TIMEOUT_BYTES * 10 * divisor clock cycles.  16
# byte times are 1.4 ms at 115200 baud: a command split over USB frames (1 ms apart,
# 11.5 byte times at that rate) still arrives whole, while a host recovers quickly.
TIMEOUT_BYTES = 16

STATUS_COUNT_MAX = 255   # the status word's counts saturate here (one byte each)


class LinkStatus(enum.IntFlag):
    """Byte 0 of the ``'S'`` answer: what happened on the line since the last ``'S'``."""
    FRAMING = 1   # a byte had a bad stop bit (it was dropped); byte 1 counts them
    TIMEOUT = 2   # a partial command was discarded by the inter-byte timeout; byte 2 counts them
    IGNORED = 4   # a byte other than W, R, S arrived where a command byte was expected; byte 3 counts them
    BUSY = 8      # a byte arrived while the bridge executed a command or sent an answer (discarded)


def timeout_cycles(divisor: int) -> int:
    """Clock cycles of line silence after which the bridge discards a partial command."""
    return TIMEOUT_BYTES * 10 * divisor


def write_cmd(addr: int, data: int) -> bytes:
    return bytes([CMD_WRITE]) + addr.to_bytes(4, "little") + (data & 0xFFFFFFFF).to_bytes(4, "little")


def read_cmd(addr: int) -> bytes:
    return bytes([CMD_READ]) + addr.to_bytes(4, "little")


def status_cmd() -> bytes:
    return bytes([CMD_STATUS])


def decode_status(reply: bytes) -> dict:
    """The four bytes answered to ``'S'``: ``{"flags": LinkStatus, "framing": n,
    "timeouts": n, "ignored": n}``."""
    if len(reply) != 4:
        raise ValueError(f"a status answer is 4 bytes, got {len(reply)}")
    return {"flags": LinkStatus(reply[0] & 0xF), "framing": reply[1], "timeouts": reply[2],
            "ignored": reply[3]}
