"""The compiler: the reservation table every scheduler places through, the FFN, tray, MoE-tray and resident compilers, the multi-tile scheduler and tile fitting."""

from lpu_arch.errors import LpuError


class CompileError(LpuError, ValueError):
    """The FFN does not fit this tile; the message names what is needed and the limit."""
