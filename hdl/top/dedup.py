"""One Verilog module for many identical units.

Amaranth builds every submodule anew, even a thousand identical ones; the full-scale
MXM has 320 identical output lanes of 320 multipliers each.  A unit placed with
:func:`place` is an ordinary submodule (the simulated tile), or, while
:func:`separate_modules` is active (``hdl/flows/size.py``), an instance of one module built
once per distinct unit.

A unit for :func:`place` is an ``Elaboratable`` whose ports are signals of its parent
given to its constructor, and which has

``module_name`` : str
    The module's name (one per distinct unit: its parameters are in it).
``ports()`` : dict
    ``{port name: (value, "i" or "o")}``, the values of this placement.
``standalone()`` : a new unit of the same parameters with signals of its own (to be built
    as a module by itself).
"""

import contextlib
import contextvars

from amaranth import ClockSignal, Instance, ResetSignal

_active = contextvars.ContextVar("lpu_separate_modules", default=None)


class Modules:
    """The distinct units placed while :func:`separate_modules` is active: ``units`` maps a
    module name to a standalone unit, in the order they were first placed."""

    def __init__(self):
        self.units = {}

    def instance(self, unit):
        name = unit.module_name
        unit._MustUse__used = True           # built as its module, not as a submodule
        if name not in self.units:
            self.units[name] = unit.standalone()
        conns = {f"{d}_{port}": value for port, (value, d) in unit.ports().items()}
        return Instance(name, i_clk=ClockSignal("sync"), i_rst=ResetSignal("sync"), **conns)


@contextlib.contextmanager
def separate_modules():
    """While active, :func:`place` makes instances; yields the :class:`Modules` record."""
    modules = Modules()
    token = _active.set(modules)
    try:
        yield modules
    finally:
        _active.reset(token)


def place(m, name: str, unit):
    """Add ``unit`` to module ``m`` as submodule ``name`` (an instance of its own module
    while :func:`separate_modules` is active)."""
    modules = _active.get()
    m.submodules[name] = unit if modules is None else modules.instance(unit)
