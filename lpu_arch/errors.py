"""The one base class of every user error: bad input or an impossible request, and the one
line a command prints for it.

Each package raises its own subclass (``ConfigError``, ``CompileError``, ``WeightsError``,
...), whose message is one line naming the problem and the limit.  The ``lpu`` command
catches :class:`LpuError` once and prints it as ``lpu SUBCOMMAND: error: MESSAGE`` with
exit status 2; anything else that escapes is a bug and keeps its traceback.  The
subclasses keep the built-in base they had (``ValueError`` or ``RuntimeError``), so code
that catches those still does.  Every command line (``lpu``, ``python -m sim.bench``,
``python -m sim.bench.history``, ``python -m hdl.flows.size``) words its error lines with
:func:`error_line`.
"""


class LpuError(Exception):
    """A user error: its message is one line that names the problem and the limit."""


def error_line(problem, prog: str | None = None, whole: bool = False) -> str:
    """The line a command prints on standard error for a user error: ``PROG: error:
    PROBLEM``, or ``error: PROBLEM`` without ``prog`` (e.g. ``lpu compile``).

    An ``OSError`` is worded ``STRERROR: FILENAME``; any other exception is its message's
    first line with each run of white space one space, or with ``whole`` its whole message
    (those that end in a tool's log, Yosys's or a speed run's); text is taken as it is.
    """
    if isinstance(problem, OSError):
        text = f"{problem.strerror or problem}: {problem.filename or ''}".rstrip(": ")
    elif isinstance(problem, Exception) and not whole:
        text = " ".join(str(problem).split("\n")[0].split())
    else:
        text = str(problem)
    return f"{prog}: error: {text}" if prog else f"error: {text}"
