"""Chip-to-chip link hardware: transmitter, elastic receiver, HAC and deskew.

``docs/c2c.md`` describes the mechanism; the flit format, the error code and the timing
budget are in ``lpu_arch/c2c.py``.  Every unit here runs on its tile's clock
("sync") and is *not* stalled by DESKEW (the tile core is): the HAC keeps counting and
flits keep flowing while the program waits.

* :class:`LinkTx` sends a vector as ``flits_per_vector`` DATA flits on consecutive cycles
  starting the cycle after SEND, and control flits (SYNC, PROBE, ECHO) when idle.
* :class:`LinkRx` takes the flits across the clocks (:class:`ElasticBuffer`), corrects or
  flags errors (:class:`FlitDecoder`), reassembles vectors (:class:`VectorAssembler`) into
  the receive buffer that RECV pops (:class:`ReceiveBuffer`) and keeps sticky status.
* :class:`HacUnit` keeps the HAC: the root's free-runs and is sent to its children every
  ``sync_interval`` cycles; a child measures its parent link's latency at start-up
  (PROBE/ECHO) and then sets its HAC to every received SYNC value plus that latency.
* :class:`DeskewUnit` stalls the tile core for DESKEW (until an epoch boundary) and
  RUNTIME_DESKEW (until the HAC reaches the program's time plus slack).
"""

from amaranth import Array, Cat, Const, Elaboratable, Module, Mux, Signal, signed
from amaranth.hdl import ResetInserter
from amaranth.lib import data, stream, wiring
from amaranth.lib.cdc import FFSynchronizer
from amaranth.lib.fifo import AsyncFIFO, FIFOInterface
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from lpu_arch.c2c import (HAC_ERROR_MAX, KIND_BITS, EccStatus, Kind, deskew_stall_max, flit_bits, flit_data_bits,
                          flit_fields, runtime_deskew_stall_extra)
from lpu_arch.hostmap import LINK_COUNT_BITS
from lpu_arch.isa import C2C_LATENCY, EAST, OPERANDS, Op

from hdl.link.ecc import EccDecoder, EccEncoder
from hdl.units.layouts import drive_masks, drive_signature, issue_signature, operand, tap_signature

SLACK_BITS = OPERANDS[Op.RUNTIME_DESKEW]["slack"][2]


def flit_field(v, cfg, name):
    """Field ``name`` of flit ``v`` (``lpu_arch.c2c.flit_fields``)."""
    lsb, w = flit_fields(cfg)[name]
    return v[lsb:lsb + w]


class LinkTx(wiring.Component):
    """Transmit side of one link (sender's clock).

    Members
    -------
    send : In(1), send_data : In(vector_bits)
        SEND this cycle (already qualified by the core not being stalled).
    ctrl_req : In(1), ctrl_kind : In(2), ctrl_payload : In(link_width), ctrl_ack : Out(1)
        A control flit; taken (``ctrl_ack``) on a cycle without DATA.  SYNC and PROBE
        carry ``hac + 1`` (the HAC on the cycle the flit is in the output register)
        instead of ``ctrl_payload``.
    hac : In(HAC_BITS)
    flit : Out(flit_bits)
        The output register (the wire starts here).
    overrun : Out(1)
        Sticky: a SEND arrived while the previous vector was still being sent.
    clear : In(1)
        Clears ``overrun`` (tile start).
    """

    def __init__(self, cfg):
        self.cfg = cfg
        super().__init__({
            "send": In(1), "send_data": In(cfg.vector_bits),
            "ctrl_req": In(1), "ctrl_kind": In(KIND_BITS), "ctrl_payload": In(cfg.link_width),
            "ctrl_ack": Out(1), "hac": In(cfg.HAC_BITS),
            "flit": Out(flit_bits(cfg)), "overrun": Out(1), "clear": In(1),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self.cfg
        W, F = cfg.link_width, cfg.flits_per_vector
        m.submodules.enc = enc = EccEncoder(flit_data_bits(cfg))
        shift = Signal(cfg.vector_bits)
        left = Signal(range(F + 1))
        valid, kind, payload = Signal(), Signal(KIND_BITS), Signal(W)

        with m.If(self.send):
            with m.If(left != 0):
                m.d.sync += self.overrun.eq(1)
            # The first flit goes out now; the rest on the following cycles.
            m.d.comb += [valid.eq(1), kind.eq(Kind.DATA), payload.eq(self.send_data[:W])]
            m.d.sync += [shift.eq(self.send_data >> W), left.eq(F - 1)]
        with m.Elif(left != 0):
            m.d.comb += [valid.eq(1), kind.eq(Kind.DATA), payload.eq(shift[:W])]
            m.d.sync += [shift.eq(shift >> W), left.eq(left - 1)]
        with m.Elif(self.ctrl_req):
            timed = (self.ctrl_kind == Kind.SYNC) | (self.ctrl_kind == Kind.PROBE)
            m.d.comb += [valid.eq(1), kind.eq(self.ctrl_kind), self.ctrl_ack.eq(1),
                         payload.eq(Mux(timed, self.hac + 1, self.ctrl_payload))]
        with m.If(self.clear):
            m.d.sync += self.overrun.eq(0)
        m.d.comb += enc.data.eq(Cat(kind, payload))
        m.d.sync += self.flit.eq(Mux(valid, Cat(valid, kind, payload, enc.check), 0))
        return m


def flit_body_layout(cfg):
    """A flit without its valid bit (what the elastic buffer holds): kind, payload, check.

    Field offsets are ``lpu_arch.c2c.flit_fields`` less the valid bit below them."""
    f = flit_fields(cfg)
    base = f["kind"][0]
    assert f["valid"] == (0, base), "the valid bit is the flit's lowest"
    fields = sorted((lsb, name, w) for name, (lsb, w) in f.items() if name != "valid")
    layout = data.StructLayout({name: w for _, name, w in fields})
    assert all(layout[name].offset == lsb - base for lsb, name, _ in fields)
    assert layout.size == flit_bits(cfg) - base
    return layout


class ElasticBuffer(wiring.Component):
    """The link's clock crossing: flits written on the sender's clock, read on this one.

    An ``AsyncFIFO`` of ``ELASTIC_DEPTH`` flits (without the valid bit) written on the
    *sender's* clock ``w_domain`` (the clock that comes with the data, as in a
    source-synchronous link) and read on "sync", where every flit is popped as soon as it
    shows and registered.  Never stalls: a flit that finds the buffer full is lost and
    flagged.

    Parameters
    ----------
    w_domain : str
        The sender's clock domain.

    Members
    -------
    flit : In(flit_bits), in ``w_domain``
        The wire.  Every flit with its valid bit set is written by the next sender edge.
    o_stream : Out(stream.Signature(flit_body_layout, always_ready=True))
        The flits in order, at most one per cycle, from the output register: a flit is
        valid after the third receiver edge following the sender edge that writes it (two
        synchronise the write pointer, one pops it into the register), 2 to 3 receiver
        periods later by phase (in simulation; a real synchroniser may take an edge more).
    level : Out(range(ELASTIC_DEPTH + 1))
        Flits in the buffer now, as the read side sees it (combinational: the synchronised
        write pointer less the read pointer).
    overflow : Out(1)
        Sticky: a flit found the buffer full.  The sender's clock counts them in a Gray code
        (one bit changes per event, so it crosses safely), synchronised here (two edges);
        any change since the last look sets the flag on the next edge: the third receiver
        edge after the sender edge that dropped the flit.
    clear : In(1)
        Clears ``overflow``, except for an overflow that crosses on the same cycle (it
        stays flagged).
    """

    OVF_BITS = 4   # the Gray-coded count of dropped flits (only its changes matter)

    def __init__(self, cfg, w_domain: str):
        self.cfg, self.w_domain = cfg, w_domain
        super().__init__({
            "flit": In(flit_bits(cfg)),
            "o_stream": Out(stream.Signature(flit_body_layout(cfg), always_ready=True)),
            "level": Out(range(cfg.ELASTIC_DEPTH + 1)),
            "overflow": Out(1), "clear": In(1),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self.cfg
        base = flit_fields(cfg)["kind"][0]
        layout = flit_body_layout(cfg)
        m.submodules.fifo = fifo = AsyncFIFO(width=layout.size, depth=cfg.ELASTIC_DEPTH,
                                             r_domain="sync", w_domain=self.w_domain)
        valid = flit_field(self.flit, cfg, "valid")
        m.d.comb += [fifo.w_en.eq(valid), fifo.w_data.eq(self.flit[base:]), self.level.eq(fifo.r_level)]

        n = self.OVF_BITS
        w_ovf_bin, w_ovf_gray = Signal(n), Signal(n)
        with m.If(valid & ~fifo.w_rdy):
            m.d[self.w_domain] += [w_ovf_bin.eq(w_ovf_bin + 1),
                                   w_ovf_gray.eq((w_ovf_bin + 1) ^ ((w_ovf_bin + 1) >> 1))]
        ovf_gray, ovf_seen, ovf_new = Signal(n), Signal(n), Signal()
        m.submodules.ovf_sync = FFSynchronizer(w_ovf_gray, ovf_gray)
        m.d.comb += ovf_new.eq(ovf_gray != ovf_seen)
        m.d.sync += ovf_seen.eq(ovf_gray)
        with m.If(self.clear):
            m.d.sync += self.overflow.eq(ovf_new)
        with m.Elif(ovf_new):
            m.d.sync += self.overflow.eq(1)

        # Pop whatever shows and register it.
        m.d.comb += fifo.r_en.eq(1)
        m.d.sync += [self.o_stream.valid.eq(fifo.r_rdy), self.o_stream.payload.eq(fifo.r_data)]
        return m


class FlitDecoder(wiring.Component):
    """Error correction (SECDED, ``EccDecoder``) and the split into data and control.

    Members
    -------
    i_stream : In(stream.Signature(flit_body_layout, always_ready=True))
        Flits, at most one per cycle.
    o_stream : Out(stream.Signature(link_width, always_ready=True))
        The corrected payload of every DATA flit, 1 cycle after ``i_stream`` (registered).
        A DATA flit with an uncorrectable error still goes out (and is flagged).
    sync_valid / probe_valid / echo_valid : Out(1), ctrl_value : Out(link_width)
        A control flit, as a one-cycle pulse 1 cycle after ``i_stream``, with its corrected
        payload (``ctrl_value`` shows every flit's payload; it means something with a
        pulse).  A control flit with an uncorrectable error is dropped (a wrong HAC value
        would do more harm than a missing one).
    corrected : Out(LINK_COUNT_BITS), uncorrected : Out(LINK_COUNT_BITS)
        Flits corrected / found uncorrectable (saturating counters), counted 1 cycle after
        ``i_stream``.
    uncorrectable : Out(1)
        Sticky: a flit had an uncorrectable error (1 cycle after ``i_stream``).
    clear : In(1)
        Clears the counters and ``uncorrectable`` (a flit on the same cycle is not counted).
    """

    def __init__(self, cfg):
        self.cfg = cfg
        super().__init__({
            "i_stream": In(stream.Signature(flit_body_layout(cfg), always_ready=True)),
            "o_stream": Out(stream.Signature(cfg.link_width, always_ready=True)),
            "sync_valid": Out(1), "probe_valid": Out(1), "echo_valid": Out(1),
            "ctrl_value": Out(cfg.link_width),
            "corrected": Out(LINK_COUNT_BITS), "uncorrected": Out(LINK_COUNT_BITS),
            "uncorrectable": Out(1), "clear": In(1),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self.cfg
        flit = self.i_stream.payload
        m.submodules.ecc = ecc = EccDecoder(flit_data_bits(cfg))
        m.d.comb += [ecc.data.eq(Cat(flit.kind, flit.payload)), ecc.check.eq(flit.check)]
        valid, kind, payload, bad = Signal(), Signal(KIND_BITS), Signal(cfg.link_width), Signal()
        m.d.sync += [valid.eq(self.i_stream.valid), kind.eq(ecc.out[:KIND_BITS]),
                     payload.eq(ecc.out[KIND_BITS:]), bad.eq(ecc.status == EccStatus.UNCORRECTABLE)]

        top = (1 << LINK_COUNT_BITS) - 1
        with m.If(self.clear):
            m.d.sync += [self.corrected.eq(0), self.uncorrected.eq(0), self.uncorrectable.eq(0)]
        with m.Elif(self.i_stream.valid):
            with m.If((ecc.status == EccStatus.CORRECTED) & (self.corrected != top)):
                m.d.sync += self.corrected.eq(self.corrected + 1)
            with m.If(ecc.status == EccStatus.UNCORRECTABLE):
                m.d.sync += self.uncorrectable.eq(1)
                with m.If(self.uncorrected != top):
                    m.d.sync += self.uncorrected.eq(self.uncorrected + 1)

        ctrl_ok = valid & ~bad
        m.d.comb += [
            self.o_stream.valid.eq(valid & (kind == Kind.DATA)), self.o_stream.payload.eq(payload),
            self.ctrl_value.eq(payload),
            self.sync_valid.eq(ctrl_ok & (kind == Kind.SYNC)),
            self.probe_valid.eq(ctrl_ok & (kind == Kind.PROBE)),
            self.echo_valid.eq(ctrl_ok & (kind == Kind.ECHO)),
        ]
        return m


class VectorAssembler(wiring.Component):
    """DATA flits to vectors: flit ``f`` of a vector carries its bits ``f*W..f*W+W-1``.

    Members
    -------
    i_stream : In(stream.Signature(link_width, always_ready=True))
        DATA flit payloads, at most one per cycle (gaps allowed).
    o_stream : Out(stream.Signature(vector_bits, always_ready=True))
        A whole vector on the cycle its ``flits_per_vector``-th flit is on ``i_stream``
        (0 cycles: the last flit goes straight through).
    clear : In(1)
        Drops a partly assembled vector (tile start): the next flit is a vector's first.
    """

    def __init__(self, cfg):
        self.cfg = cfg
        super().__init__({
            "i_stream": In(stream.Signature(cfg.link_width, always_ready=True)),
            "o_stream": Out(stream.Signature(cfg.vector_bits, always_ready=True)),
            "clear": In(1),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self.cfg
        W, F = cfg.link_width, cfg.flits_per_vector
        acc = Signal(cfg.vector_bits)
        got = Signal(range(max(F, 2)))
        whole = self.o_stream.payload
        m.d.comb += whole.eq(Cat(acc[W:], self.i_stream.payload) if F > 1 else self.i_stream.payload)
        with m.If(self.i_stream.valid):
            with m.If(got == F - 1):
                m.d.sync += got.eq(0)
                m.d.comb += self.o_stream.valid.eq(1)
            with m.Else():
                m.d.sync += got.eq(got + 1)
            m.d.sync += acc.eq(whole)
        with m.If(self.clear):
            m.d.sync += got.eq(0)
        return m


class VectorFifo(Elaboratable, FIFOInterface):
    """A synchronous FIFO of ``depth`` (2 or more) entries that takes a write whenever it
    holds fewer than ``depth``: ``w_rdy`` is ``level < depth`` on every cycle.

    The interface and read timing of ``amaranth.lib.fifo.SyncFIFOBuffered``: a memory of
    ``depth - 1`` entries with a synchronous read port (the inner FIFO) feeding an output
    register (``r_data``, valid with ``r_rdy``).  An entry written on cycle t counts in
    ``level`` from t+1 and is on ``r_data`` from t+2 (from the cycle after the ``r_en``
    that pops the one before it, if later); ``r_en`` with ``r_rdy`` pops it.

    The difference is ``w_rdy``.  ``SyncFIFOBuffered``'s is the inner FIFO's (not full),
    and the inner FIFO cannot take a write on the cycle it hands its oldest entry to an
    empty output register.  At depth 2 (an inner FIFO of one entry) that cycle is the one
    after a write into the empty FIFO, so a second write then is refused with one entry
    held.  Here the inner FIFO takes that write: the memory is read before it is written
    on the same edge, so the slot read is free for it.  (At depth 3 or more the inner
    FIFO is never full while the output register is empty, so the two take the same
    writes.)
    """

    def __init__(self, *, width: int, depth: int):
        assert depth >= 2
        super().__init__(width=width, depth=depth)
        self.level = Signal(range(depth + 1))

    def elaborate(self, platform):
        m = Module()
        inner_depth = self.depth - 1
        inner_level = Signal(range(inner_depth + 1))
        # The oldest inner entry moves to the output register (empty, or popped now).
        advance = (inner_level != 0) & (~self.r_rdy | self.r_en)
        do_write = self.w_rdy & self.w_en
        m.d.comb += [
            self.level.eq(inner_level + self.r_rdy),
            self.w_rdy.eq(self.level != self.depth),
            self.w_level.eq(self.level), self.r_level.eq(self.level),
        ]

        def incr(v):
            return Mux(v == inner_depth - 1, 0, v + 1)

        m.submodules.storage = storage = Memory(shape=self.width, depth=inner_depth, init=[])
        w_port, r_port = storage.write_port(), storage.read_port(domain="sync")
        produce, consume = Signal(range(inner_depth)), Signal(range(inner_depth))
        m.d.comb += [w_port.addr.eq(produce), w_port.data.eq(self.w_data), w_port.en.eq(do_write),
                     r_port.addr.eq(consume), r_port.en.eq(advance), self.r_data.eq(r_port.data)]
        with m.If(do_write):
            m.d.sync += produce.eq(incr(produce))
        with m.If(advance):
            m.d.sync += consume.eq(incr(consume))
        with m.If(do_write & ~advance):
            m.d.sync += inner_level.eq(inner_level + 1)
        with m.If(advance & ~do_write):
            m.d.sync += inner_level.eq(inner_level - 1)
        with m.If(advance):
            m.d.sync += self.r_rdy.eq(1)
        with m.Elif(self.r_en):
            m.d.sync += self.r_rdy.eq(0)
        return m


class ReceiveBuffer(wiring.Component):
    """The receive buffer: ``rx_depth`` vectors (:class:`VectorFifo`) that RECV pops.

    Members
    -------
    i_stream : In(stream.Signature(vector_bits, always_ready=True))
        Vectors to keep, on any cycles (back to back too).  Never refused: one that finds
        the buffer full (``rx_depth`` held, a vector RECV'd on this cycle still counting) is
        lost and flagged.
    recv : In(1)
        RECV this cycle (qualified by the core not being stalled): pop the oldest vector.
    recv_data : Out(vector_bits)
        The popped vector, from the cycle after ``recv`` until the next ``recv`` (0 after an
        underflow).  Holding it lets a core stalled right after RECV drive it later.
    level : Out(range(rx_depth + 1)), max_level : Out(range(rx_depth + 1))
        Vectors in the buffer now (a pushed vector counts from the next cycle; ``recv`` can
        pop it from the cycle after that), and the most since the last ``clear`` (one cycle
        behind ``level``).
    overflow, underflow : Out(1)
        Sticky: a vector found the buffer full; a RECV found it empty.
    clear : In(1)
        Tile start: empties the buffer and clears the flags and ``max_level``.
    """

    def __init__(self, cfg):
        self.cfg = cfg
        super().__init__({
            "i_stream": In(stream.Signature(cfg.vector_bits, always_ready=True)),
            "recv": In(1), "recv_data": Out(cfg.vector_bits),
            "level": Out(range(cfg.rx_depth + 1)), "max_level": Out(range(cfg.rx_depth + 1)),
            "overflow": Out(1), "underflow": Out(1), "clear": In(1),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self.cfg
        m.submodules.fifo = fifo = ResetInserter(self.clear)(VectorFifo(width=cfg.vector_bits,
                                                                        depth=cfg.rx_depth))
        push = self.i_stream.valid
        m.d.comb += [fifo.w_en.eq(push), fifo.w_data.eq(self.i_stream.payload), self.level.eq(fifo.level)]

        # RECV: pop and register (C2C_LATENCY = 1); held until the next RECV.
        m.d.comb += fifo.r_en.eq(self.recv)
        with m.If(self.recv):
            m.d.sync += self.recv_data.eq(Mux(fifo.r_rdy, fifo.r_data, 0))

        with m.If(self.clear):
            m.d.sync += [self.overflow.eq(0), self.underflow.eq(0), self.max_level.eq(0)]
        with m.Else():
            with m.If(push & ~fifo.w_rdy):
                m.d.sync += self.overflow.eq(1)
            with m.If(self.recv & ~fifo.r_rdy):
                m.d.sync += self.underflow.eq(1)
            with m.If(fifo.level > self.max_level):
                m.d.sync += self.max_level.eq(fifo.level)
        return m


class LinkRx(wiring.Component):
    """Receive side of one link: elastic buffer, error correction, vector assembly.

    ``flit`` is in the sender's clock domain ``w_domain``; everything else in "sync".  A
    composition of four stages connected by streams that never stall (``always_ready``):
    :class:`ElasticBuffer` (a flit comes out after the third receiver edge following the
    sender edge that writes it) -> :class:`FlitDecoder` (1 cycle; control flits leave here
    as pulses) -> :class:`VectorAssembler` (0 cycles) -> :class:`ReceiveBuffer` (a vector
    counts in ``level`` 1 cycle after its last flit leaves the decoder, RECV can pop it 1
    cycle after that).

    Members
    -------
    The stages' members under their names: ``flit`` (in ``w_domain``) and
    ``elastic_level`` (the :class:`ElasticBuffer`'s ``level``); ``sync_valid``,
    ``probe_valid``, ``echo_valid``, ``ctrl_value``, ``corrected``, ``uncorrected`` and
    ``uncorrectable`` (:class:`FlitDecoder`); ``recv``, ``recv_data``, ``level``,
    ``max_level`` and ``underflow`` (:class:`ReceiveBuffer`).
    overflow : Out(1)
        Sticky: a flit found the elastic buffer full or a vector the receive buffer full.
    clear : In(1)
        Tile start: clears every stage (the receive buffer, the flags and counters).
    """

    def __init__(self, cfg, w_domain: str):
        self.cfg, self.w_domain = cfg, w_domain
        super().__init__({
            "flit": In(flit_bits(cfg)),
            "recv": In(1), "recv_data": Out(cfg.vector_bits),
            "sync_valid": Out(1), "probe_valid": Out(1), "echo_valid": Out(1),
            "ctrl_value": Out(cfg.link_width),
            "level": Out(range(cfg.rx_depth + 1)), "max_level": Out(range(cfg.rx_depth + 1)),
            "elastic_level": Out(range(cfg.ELASTIC_DEPTH + 1)),
            "overflow": Out(1), "underflow": Out(1), "uncorrectable": Out(1),
            "corrected": Out(LINK_COUNT_BITS), "uncorrected": Out(LINK_COUNT_BITS),
            "clear": In(1),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self.cfg
        m.submodules.elastic = el = ElasticBuffer(cfg, self.w_domain)
        m.submodules.decoder = dec = FlitDecoder(cfg)
        m.submodules.assembler = asm = VectorAssembler(cfg)
        m.submodules.buffer = buf = ReceiveBuffer(cfg)
        wiring.connect(m, el.o_stream, dec.i_stream)
        wiring.connect(m, dec.o_stream, asm.i_stream)
        wiring.connect(m, asm.o_stream, buf.i_stream)
        m.d.comb += [
            el.flit.eq(self.flit), self.elastic_level.eq(el.level),
            self.sync_valid.eq(dec.sync_valid), self.probe_valid.eq(dec.probe_valid),
            self.echo_valid.eq(dec.echo_valid), self.ctrl_value.eq(dec.ctrl_value),
            self.corrected.eq(dec.corrected), self.uncorrected.eq(dec.uncorrected),
            self.uncorrectable.eq(dec.uncorrectable),
            buf.recv.eq(self.recv), self.recv_data.eq(buf.recv_data),
            self.level.eq(buf.level), self.max_level.eq(buf.max_level),
            self.overflow.eq(el.overflow | buf.overflow), self.underflow.eq(buf.underflow),
        ]
        for stage in (el, dec, asm, buf):
            m.d.comb += stage.clear.eq(self.clear)
        return m


class HacUnit(wiring.Component):
    """The tile's hardware-aligned counter and its alignment protocol.

    Parameters
    ----------
    links : int
        Links of the tile.
    parent : int or None
        The link to the HAC parent (None: this tile is the root).
    children : list of int
        Links to HAC children (SYNC goes out on these).

    Members
    -------
    hac : Out(HAC_BITS)
    locked : Out(1)
        Root: always.  Child: the link latency is measured and a SYNC has been applied.
    lock_lost : Out(1)
        Sticky: a SYNC found the HAC off by more than ``HAC_ERROR_MAX`` after lock.
    latency : Out(LINK_COUNT_BITS)
        Measured one-way latency of the parent link (child), in this tile's cycles.
    error : Out(signed(LINK_COUNT_BITS))
        The HAC error the last SYNC corrected (own HAC minus parent's, before correcting).
    tx_req/tx_kind/tx_payload (Out) and tx_ack (In), per link: control flit requests.
    rx_sync/rx_probe/rx_echo (In), rx_value (In), per link: received control flits.
    """

    def __init__(self, cfg, parent, children):
        self.cfg, self.parent, self.children = cfg, parent, list(children)
        n = cfg.links
        super().__init__({
            "hac": Out(cfg.HAC_BITS), "locked": Out(1), "lock_lost": Out(1),
            "latency": Out(LINK_COUNT_BITS), "error": Out(signed(LINK_COUNT_BITS)), "clear": In(1),
            "tx_req": Out(n), "tx_kind": Out(KIND_BITS).array(n), "tx_payload": Out(cfg.link_width).array(n),
            "tx_ack": In(n),
            "rx_sync": In(n), "rx_probe": In(n), "rx_echo": In(n), "rx_value": In(cfg.link_width).array(n),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self.cfg
        hac_next = Signal(cfg.HAC_BITS)
        m.d.comb += hac_next.eq(self.hac + 1)
        m.d.sync += self.hac.eq(hac_next)
        if self.parent is None:
            m.d.comb += self.locked.eq(1)

        sync_due = Signal()
        m.d.comb += sync_due.eq(self.hac[:(cfg.sync_interval - 1).bit_length()] == 0
                                if cfg.sync_interval & (cfg.sync_interval - 1) == 0
                                else (self.hac % cfg.sync_interval) == 0)
        for link in range(cfg.links):
            # Pending flags; one request at a time, ECHO first (its timing is part of the latency probe).
            requests = {kind: Signal(name=f"{kind.name.lower()}_pending_{link}")
                        for kind in (Kind.ECHO, Kind.PROBE, Kind.SYNC)}
            echo_value = Signal(cfg.link_width, name=f"echo_{link}")
            with m.If(self.rx_probe[link]):
                m.d.sync += [requests[Kind.ECHO].eq(1), echo_value.eq(self.rx_value[link])]
            if link in self.children:
                with m.If(sync_due):
                    m.d.sync += requests[Kind.SYNC].eq(1)
            for i, (kind, pending) in enumerate(requests.items()):
                with (m.Elif if i else m.If)(pending):
                    m.d.comb += [self.tx_req[link].eq(1), self.tx_kind[link].eq(kind)]
                    if kind == Kind.ECHO:
                        m.d.comb += self.tx_payload[link].eq(echo_value)
                    with m.If(self.tx_ack[link]):      # taken: the request is done
                        m.d.sync += pending.eq(0)

            if link == self.parent:
                measured = Signal(name="latency_measured")
                # Probe every 64 cycles until the echo comes back.
                with m.If(~measured & (self.hac[:6] == 0)):
                    m.d.sync += requests[Kind.PROBE].eq(1)
                with m.If(self.rx_echo[link] & ~measured):
                    rtt = Signal(cfg.HAC_BITS, name="rtt")
                    m.d.comb += rtt.eq(self.hac - self.rx_value[link])
                    m.d.sync += [measured.eq(1), self.latency.eq((rtt - cfg.ECHO_TURNAROUND) >> 1)]
                with m.If(self.rx_sync[link] & measured):
                    expect = Signal(cfg.HAC_BITS, name="hac_expected")
                    err = Signal(signed(cfg.HAC_BITS), name="hac_error")
                    m.d.comb += [expect.eq(self.rx_value[link] + self.latency), err.eq(self.hac - expect)]
                    m.d.sync += [self.hac.eq(expect + 1), self.error.eq(err), self.locked.eq(1)]
                    with m.If(self.locked & ((err > HAC_ERROR_MAX) | (err < -HAC_ERROR_MAX))):
                        m.d.sync += self.lock_lost.eq(1)
        with m.If(self.clear):
            m.d.sync += self.lock_lost.eq(0)
        return m


class DeskewUnit(wiring.Component):
    """Stalls the tile core for DESKEW and RUNTIME_DESKEW (docs/c2c.md).

    ``stall`` is combinational: on a stalled cycle the core holds every register.  An
    instruction issued on cycle c (not stalled) starts waiting on c + 1.

    * DESKEW: wait until ``hac % epoch == 0`` (the first epoch boundary after the issue
      cycle: ``target = (hac_issue + epoch) & -epoch``).
    * RUNTIME_DESKEW slack: wait until ``hac == offset + sac + 1 + slack``, where ``sac``
      is the SAC of the issue cycle.
    Both release on the first cycle with ``hac - target >= 0`` (signed), so a HAC that a
    SYNC moves by a cycle across the target still releases there.  On release,
    ``offset = hac - (sac + 1)``: the next SAC cycle runs at that HAC.  ``load`` (the tile
    armed with ``START_HAC`` starting) sets ``offset = load_offset`` (that ``START_HAC``:
    SAC cycle 0 runs at it), so a program's first RUNTIME_DESKEW releases relative to the
    start every tile was armed with, without waiting for an epoch boundary.  A RUNTIME_DESKEW
    released more than ``HAC_ERROR_MAX`` cycles after its target sets the sticky ``late``.

    Every stall is bounded: a DESKEW may stall ``c2c.deskew_stall_max(cfg)`` cycles, a
    RUNTIME_DESKEW ``c2c.runtime_deskew_stall_max(cfg, slack)``.  On the stalled cycle
    beyond its bound the sticky ``timeout`` rises (visible the cycle after) and the unit
    then stalls the core until ``clear`` whatever the HAC does: the tile reports itself
    halted (``hdl/top/tile.py``).  ``clear`` (the start) drops ``stall`` on its own cycle, so
    the core sees the start pulse.
    """

    def __init__(self, cfg):
        self.cfg = cfg
        super().__init__({
            "hac": In(cfg.HAC_BITS), "sac": In(cfg.HAC_BITS),
            "deskew": In(1), "runtime": In(1), "slack": In(SLACK_BITS), "clear": In(1),
            "load": In(1), "load_offset": In(cfg.HAC_BITS),
            "stall": Out(1), "late": Out(1), "offset": Out(cfg.HAC_BITS), "waiting": Out(1),
            "stalled_cycles": Out(cfg.HAC_BITS), "timeout": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self.cfg
        mode_epoch = Signal()
        target, next_sac = Signal(cfg.HAC_BITS), Signal(cfg.HAC_BITS)
        behind = Signal(signed(cfg.HAC_BITS))
        longest = max(deskew_stall_max(cfg), (1 << SLACK_BITS) - 1 + runtime_deskew_stall_extra(cfg))
        limit, waited = Signal(range(longest + 1)), Signal(range(longest + 2))
        hold = Signal()
        m.d.comb += [behind.eq(self.hac - target), hold.eq(self.waiting & ((behind < 0) | self.timeout)),
                     self.stall.eq(hold & ~self.clear)]
        with m.If(self.stall & ~self.timeout):
            m.d.sync += [self.stalled_cycles.eq(self.stalled_cycles + 1), waited.eq(waited + 1)]
            with m.If(waited == limit):       # this stalled cycle is one beyond the bound
                m.d.sync += self.timeout.eq(1)
        with m.If(self.waiting & ~hold):
            m.d.sync += [self.waiting.eq(0), self.offset.eq(self.hac - next_sac)]
            with m.If(~mode_epoch & (behind > HAC_ERROR_MAX)):
                m.d.sync += self.late.eq(1)
        with m.If(self.deskew):
            m.d.sync += [self.waiting.eq(1), mode_epoch.eq(1), next_sac.eq(self.sac + 1),
                         target.eq((self.hac + cfg.epoch)[:cfg.HAC_BITS] & Const((1 << cfg.HAC_BITS) - cfg.epoch, cfg.HAC_BITS)),
                         waited.eq(0), limit.eq(deskew_stall_max(cfg))]
        with m.Elif(self.runtime):
            m.d.sync += [self.waiting.eq(1), mode_epoch.eq(0), next_sac.eq(self.sac + 1),
                         target.eq(self.offset + self.sac + 1 + self.slack),
                         waited.eq(0), limit.eq(self.slack + runtime_deskew_stall_extra(cfg))]
        with m.If(self.clear):
            m.d.sync += [self.late.eq(0), self.stalled_cycles.eq(0), self.waiting.eq(0), self.timeout.eq(0)]
        with m.If(self.load):
            m.d.sync += self.offset.eq(self.load_offset)
        return m


class C2cSlice(wiring.Component):
    """A C2C slice (``C2C_W``: the even links, ``C2C_E``: the odd ones), part of the tile core.

    Executes ``SEND``, ``SENDM``, ``RECV``, ``DESKEW`` and ``RUNTIME_DESKEW``
    (``lpu_arch/isa.py``).
    The strobes it raises go to units that are *not* stalled (the links, the deskew unit),
    so the tile qualifies them with "not stalled"; on a stalled cycle the issue port
    still shows the instruction that will issue when the stall ends.

    Parameters
    ----------
    links : list of int
        The links this slice serves; a SEND or RECV naming another link does nothing.

    Members
    -------
    issue : In(issue_signature), tap : In(tap_signature), drive : Out(drive_signature)
    send : Out(len(links))
        SEND to ``links[i]`` (or SENDM with its bit set) this cycle; ``send_data`` is the
        stream value at this position.
    recv : Out(len(links))
        RECV from ``links[i]`` this cycle (pop the oldest vector of its receive buffer).
    recv_data : In(vector_bits).array(len(links))
        The links' popped vectors (held from the cycle after ``recv``).
    deskew, runtime : Out(1), slack : Out(16)
        DESKEW / RUNTIME_DESKEW issued this cycle, with RUNTIME_DESKEW's slack.
    driving : Out(1)
        A RECV's vector is being driven this cycle (``C2C_LATENCY`` = 1 after issue).
    """

    def __init__(self, cfg, links):
        self.cfg, self.links = cfg, list(links)
        n = max(len(self.links), 1)
        super().__init__({
            "issue": In(issue_signature()), "tap": In(tap_signature(cfg)), "drive": Out(drive_signature(cfg)),
            "send": Out(n), "send_data": Out(cfg.vector_bits),
            "recv": Out(n), "recv_data": In(cfg.vector_bits).array(n),
            "deskew": Out(1), "runtime": Out(1), "slack": Out(SLACK_BITS),
            "driving": Out(1),
        })

    def elaborate(self, platform):
        assert C2C_LATENCY == 1, "the C2C slice drives a received vector one cycle after RECV"
        m = Module()
        ins, valid = self.issue.instr, self.issue.valid
        link, mask = operand(ins, Op.SEND, "link"), operand(ins, Op.SENDM, "links")
        m.d.comb += [
            self.send_data.eq(Mux(ins.dir == EAST, Array(self.tap.east)[ins.stream], Array(self.tap.west)[ins.stream])),
            self.deskew.eq(valid & (ins.op == Op.DESKEW)),
            self.runtime.eq(valid & (ins.op == Op.RUNTIME_DESKEW)),
            self.slack.eq(operand(ins, Op.RUNTIME_DESKEW, "slack")),
        ]
        # RECV: remember where to drive; the vector comes from the link (held there).
        d_valid, d_dir, d_stream = Signal(), Signal(), Signal.like(ins.stream)
        d_sel = Signal(range(max(len(self.links), 2)))
        is_recv = valid & (ins.op == Op.RECV)
        m.d.sync += [d_valid.eq(0), d_dir.eq(ins.dir), d_stream.eq(ins.stream)]
        for i, l in enumerate(self.links):
            hit = link == l
            multi = (ins.op == Op.SENDM) & mask[l] if l < len(mask) else 0
            m.d.comb += [self.send[i].eq(valid & (((ins.op == Op.SEND) & hit) | multi)),
                         self.recv[i].eq(is_recv & hit)]
            with m.If(is_recv & hit):
                m.d.sync += [d_valid.eq(1), d_sel.eq(i)]
        data = Array(self.recv_data)[d_sel] if self.links else 0
        drive_masks(m, self.drive, d_valid, d_dir, d_stream)
        m.d.comb += [self.drive.east.data[0].eq(data), self.drive.west.data[0].eq(data)]
        m.d.comb += self.driving.eq(d_valid)
        return m
