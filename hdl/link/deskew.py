"""The deskew unit (``docs/c2c.md`` "SAC time: start, DESKEW, RUNTIME_DESKEW")."""

from amaranth import Const, Module, Signal, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from lpu_arch.c2c import HAC_ERROR_MAX, deskew_stall_max, runtime_deskew_stall_extra
from lpu_arch.isa import OPERANDS, Op

SLACK_BITS = OPERANDS[Op.RUNTIME_DESKEW]["slack"][2]


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
