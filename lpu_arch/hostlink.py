"""Byte protocol of the UART host bridge (``hdl/host_bridge.py``).

It carries the host bus of ``hostmap.py`` over a serial line, 8N1, so the same
loads, start, status and read-backs that the simulation performs can be done from a PC:

* write: ``'W'`` addr[4] data[4]  ->  ``'K'`` once the write is done
* read:  ``'R'`` addr[4]          ->  data[4]

Addresses and data are 32-bit little-endian.  Any other command byte is ignored.
"""

CMD_WRITE = ord("W")
CMD_READ = ord("R")
ACK = ord("K")


def write_cmd(addr: int, data: int) -> bytes:
    return bytes([CMD_WRITE]) + addr.to_bytes(4, "little") + (data & 0xFFFFFFFF).to_bytes(4, "little")


def read_cmd(addr: int) -> bytes:
    return bytes([CMD_READ]) + addr.to_bytes(4, "little")
