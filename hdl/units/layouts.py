"""Hardware layouts derived from the ISA and the configuration (never restated by hand)."""

from amaranth import Mux, Signal, signed, unsigned
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from lpu_arch import hostmap, isa, vxm
from lpu_arch.hostmap import HOST_ADDR_BITS, SLICE_SHIFT as SLICE_WORD_BITS


def instr_layout() -> data.StructLayout:
    """The 64-bit instruction word of ``lpu_arch.isa``, as an Amaranth struct."""
    fields, pos = {}, 0
    for name, lsb, width, _ in isa.FIELDS:
        assert lsb == pos, "ISA fields must be contiguous"
        fields[name] = unsigned(width)
        pos += width
    assert pos == isa.INSTR_BITS
    return data.StructLayout(fields)


def flag_bit(flag) -> int:
    """Bit index of a one-bit flag in the ``aux`` field (``isa.FLAGS``)."""
    return int(flag).bit_length() - 1


def index_bits(depth: int) -> int:
    """Bits of an index into ``depth`` entries (at least 1)."""
    return max((depth - 1).bit_length(), 1)


def field_shape(name: str):
    """The shape of instruction field ``name`` (``isa.FIELDS``)."""
    return unsigned(isa.FIELD[name][1])


def operand(ins, op, name: str):
    """Named operand ``name`` of ``op`` in the decoded instruction ``ins`` (``isa.OPERANDS``)."""
    field, lsb, width = isa.OPERANDS[op][name]
    return getattr(ins, field)[lsb:lsb + width]


def base_reg_layout() -> data.StructLayout:
    """One base register as the slices see it: ``offset`` and ``off`` (its READ, WRITE and
    VOP skip); all zero, offset 0 and on, is the power-up value (``hostmap.base_word``)."""
    return data.StructLayout({"offset": unsigned(isa.BASE_OFFSET_BITS), "off": unsigned(1)})


def base_file_layout(cfg) -> data.ArrayLayout:
    """The tile's ``base_regs`` base registers side by side, register ``r`` at index ``r``
    (register 0, the constant, reads all zero)."""
    return data.ArrayLayout(base_reg_layout(), cfg.base_regs)


def base_index(cfg, ins):
    """The base register a decoded READ, WRITE or VOP names (``Instr.base``), as an index
    into ``base_file_layout``: the queue lets no larger one issue (``hdl/units/icu.py``)."""
    return ins.delay[:index_bits(cfg.base_regs)]


def vxm_lane_layout() -> data.FlexibleLayout:
    """One lane of a VXM parameter entry as the host writes it (``lpu_arch.vxm.PARAM_FIELDS``):
    ``PARAM_WORDS`` 32-bit words, each field at its word and bit."""
    return data.FlexibleLayout(32 * vxm.PARAM_WORDS, {
        name: data.Field(signed(width) if sign else unsigned(width), 32 * word + lsb)
        for name, (word, lsb, width, sign, *_) in vxm.PARAM_FIELDS.items()})


def trace_layout(cfg) -> data.FlexibleLayout:
    """One event-trace entry as the host reads it (``lpu_arch.hostmap.trace_fields``)."""
    return data.FlexibleLayout(cfg.HOST_WORD * hostmap.trace_words(cfg), {
        name: data.Field(unsigned(bits), cfg.HOST_WORD * word)
        for name, (word, bits) in hostmap.trace_fields(cfg).items()})


def issue_signature() -> wiring.Signature:
    """What an instruction queue hands its slice on the issue cycle (from a register)."""
    return wiring.Signature({"valid": Out(1), "instr": Out(instr_layout())})


def stream_vectors(cfg, count: int):
    """``count`` vectors, each its own signal (a member ``Out(vector_bits).array(count)``).

    One signal per stream, never one signal for all of them: at full scale a direction's
    streams are 32 x 2560 = 81920 bits, more than an Amaranth netlist cell can hold
    (65535), and per-stream signals keep every mux and register one vector wide."""
    return Out(cfg.vector_bits).array(count)


def tap_signature(cfg) -> wiring.Signature:
    """The values visible at one fabric position this cycle (fabric -> slice):
    ``east[s]`` / ``west[s]`` is stream ``s`` of that direction."""
    return wiring.Signature({"east": stream_vectors(cfg, cfg.streams), "west": stream_vectors(cfg, cfg.streams)})


def tap_bundle(m, cfg, tap, east, enable, name: str) -> list:
    """The streams of one direction at a slice's position (``tap.east`` where ``east`` is
    true, else ``tap.west``) while ``enable``, else zeros (the logic behind then sees no
    changes between uses): one signal ``<name>_<s>`` per stream, driven in module ``m``."""
    vs = [Signal(cfg.vector_bits, name=f"{name}_{s}") for s in range(cfg.streams)]
    with m.If(enable):
        m.d.comb += [v.eq(Mux(east, tap.east[s], tap.west[s])) for s, v in enumerate(vs)]
    return vs


def drive_port_signature(cfg, per_stream: bool = False) -> wiring.Signature:
    """One direction of a slice's stream writes this cycle: ``mask`` bit ``s`` set means
    stream ``s`` takes the slice's value, replacing the passing value.

    ``per_stream``: ``data[s]`` is stream ``s``'s value (the MXM's EMIT drives four
    different byte planes); otherwise ``data[0]`` is the one value that every stream in
    ``mask`` takes (a MEM slice, the VXM, an SXM or a C2C slice drives one vector)."""
    return wiring.Signature({"mask": Out(cfg.streams),
                             "data": stream_vectors(cfg, cfg.streams if per_stream else 1)})


def drive_value(port, s: int):
    """The value a drive port gives stream ``s`` (when its ``mask`` bit ``s`` is set)."""
    return port.data[s] if len(port.data) > 1 else port.data[0]


def drive_masks(m, drive, valid, dir, stream):
    """Set the masks of ``drive`` (a ``drive_signature`` interface) for a slice that drives
    one stream, ``stream`` in direction ``dir`` (``isa.EAST`` or ``WEST``), while ``valid``."""
    for s in range(len(drive.east.mask)):
        hit = valid & (stream == s)
        m.d.comb += [drive.east.mask[s].eq(hit & (dir == isa.EAST)),
                     drive.west.mask[s].eq(hit & (dir != isa.EAST))]


def drive_signature(cfg, per_stream: bool = False) -> wiring.Signature:
    """One slice's stream writes this cycle (slice -> fabric), per direction: a slice may
    drive several streams on one cycle (MM's four planes, VOP both ways)."""
    return wiring.Signature({"east": Out(drive_port_signature(cfg, per_stream)),
                             "west": Out(drive_port_signature(cfg, per_stream))})


def slice_members(cfg) -> dict:
    """The members every slice has (the slice's side): ``issue`` from its queue, ``tap``
    (the streams visible here), ``drive`` (its stream writes this cycle) and ``driving``
    (a result is being driven: the tile's ``done`` waits until none is)."""
    return {"issue": In(issue_signature()), "tap": In(tap_signature(cfg)),
            "drive": Out(drive_signature(cfg)), "driving": Out(1)}


def relocated_slice_members(cfg) -> dict:
    """The members besides ``slice_members`` of a slice whose instructions a base register
    relocates (MEM, VXM; ``docs/isa.md``, "Base registers"): ``start`` (clears its sticky
    fault), ``run`` (host accesses are honoured only while it is low), ``bases`` (the tile's
    base registers) and ``skip`` (the instruction issued skips, its register off: not a
    busy cycle)."""
    return {"start": In(1), "run": In(1), "bases": In(base_file_layout(cfg)), "skip": Out(1)}


def setb_signature() -> wiring.Signature:
    """An SXM's base register write (``SETB``, on a tile built with ``TileConfig.sxm_setb``),
    from the SXM's side: on a cycle with ``we`` the tile sets register ``reg`` to ``offset``
    and on at the clock edge (``isa.SETB_LATENCY``)."""
    return wiring.Signature({"we": Out(1), "reg": Out(isa.BASE_BITS), "offset": Out(isa.BASE_OFFSET_BITS)})


def host_bus_signature(cfg) -> wiring.Signature:
    """The tile's host bus (``lpu_arch.hostmap``), from the host's side: ``rdata`` and
    ``rvalid`` come ``HOST_READ_LATENCY`` cycles after ``re``.  A tile has it as ``In(...)``
    (member ``host``: Verilog ports ``host__addr`` ...)."""
    return wiring.Signature({"addr": Out(HOST_ADDR_BITS), "wdata": Out(cfg.HOST_WORD),
                             "we": Out(1), "re": Out(1),
                             "rdata": In(cfg.HOST_WORD), "rvalid": In(1)})


def host_signature(cfg) -> wiring.Signature:
    """Host port of a slice, decoded by the tile: ``sel`` when the access targets this
    slice; ``rdata`` valid on the cycle after ``re``."""
    return wiring.Signature({
        "sel": Out(1),
        "addr": Out(SLICE_WORD_BITS),
        "wdata": Out(cfg.HOST_WORD),
        "we": Out(1),
        "re": Out(1),
        "rdata": In(cfg.HOST_WORD),
    })
