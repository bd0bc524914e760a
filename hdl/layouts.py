"""Hardware layouts derived from the ISA and the configuration (never restated by hand)."""

from amaranth import unsigned
from amaranth.lib import data, wiring
from amaranth.lib.wiring import Out

from firmware_gen import isa


def instr_layout() -> data.StructLayout:
    """The 64-bit instruction word of ``firmware_gen.isa``, as an Amaranth struct."""
    fields, pos = {}, 0
    for name, lsb, width, _ in isa.FIELDS:
        assert lsb == pos, "ISA fields must be contiguous"
        fields[name] = unsigned(width)
        pos += width
    assert pos == isa.INSTR_BITS
    return data.StructLayout(fields)


def issue_signature() -> wiring.Signature:
    """What an instruction queue hands its slice on the issue cycle (combinational)."""
    lay = instr_layout()
    return wiring.Signature({"valid": Out(1), "instr": Out(lay)})


def stream_bundle(cfg) -> data.ArrayLayout:
    """All the streams of one direction at one position: ``streams`` vectors."""
    return data.ArrayLayout(unsigned(cfg.vector_bits), cfg.streams)


def tap_signature(cfg) -> wiring.Signature:
    """The values visible at one fabric position this cycle (fabric -> slice)."""
    return wiring.Signature({"east": Out(stream_bundle(cfg)), "west": Out(stream_bundle(cfg))})


def drive_port_signature(cfg) -> wiring.Signature:
    """One direction of a slice's stream writes this cycle: ``mask`` bit ``s`` set means
    stream ``s`` takes ``data[s]``, replacing the passing value."""
    return wiring.Signature({"mask": Out(cfg.streams), "data": Out(stream_bundle(cfg))})


def drive_signature(cfg) -> wiring.Signature:
    """One slice's stream writes this cycle (slice -> fabric), per direction: a slice may
    drive several streams on one cycle (MM's four planes, VOP both ways)."""
    return wiring.Signature({"east": Out(drive_port_signature(cfg)), "west": Out(drive_port_signature(cfg))})


def host_signature(cfg) -> wiring.Signature:
    """Host port of a slice: word-addressed 32-bit accesses decoded by the tile.

    ``sel`` is high when the access targets this slice; ``rdata`` is valid on the cycle
    after a read (``re``)."""
    return wiring.Signature({
        "sel": Out(1),
        "addr": Out(20),
        "wdata": Out(cfg.HOST_WORD),
        "we": Out(1),
        "re": Out(1),
        "rdata": wiring.In(cfg.HOST_WORD),
    })
