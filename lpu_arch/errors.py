"""The one base class of every user error: bad input or an impossible request.

Each package raises its own subclass (``ConfigError``, ``CompileError``, ``WeightsError``,
...), whose message is one line naming the problem and the limit.  The ``lpu`` command
catches :class:`LpuError` once and prints it as ``lpu SUBCOMMAND: error: MESSAGE`` with
exit status 2; anything else that escapes is a bug and keeps its traceback.  The
subclasses keep the built-in base they had (``ValueError`` or ``RuntimeError``), so code
that catches those still does.
"""


class LpuError(Exception):
    """A user error: its message is one line that names the problem and the limit."""
