"""The ``lpu`` command line: the entry point and its parser (``lpu SUBCOMMAND --help``
documents each subcommand; README.md lists them).

Each subcommand is a module of this package with ``add_parser(sub)`` and ``run(args)``,
which prints the flow's ``sim.report.Report`` as text or, with ``--json``, as JSON on
stdout.  A bad argument or an impossible request is one line on stderr and exit status
2; a run exits 0 when every check passes and 1 when one fails."""

from __future__ import annotations

import importlib
import os
import sys

from lpu_arch.errors import LpuError, error_line

from sim.cli.common import EXIT_USAGE
from sim.cli.options import Formatter, Parser

# Each the name of its module in this package, in the order --help lists them.
SUBCOMMANDS = ("compile", "sim", "asm", "show", "tray", "moe", "plan", "decode", "speculate", "attention", "c2c", "bench", "synth")


def build_parser() -> Parser:
    """The ``lpu`` parser, every subcommand's included."""
    ap = Parser(prog="lpu", formatter_class=Formatter,
                description="Compile FFNs for the LPU tile, run them on its RTL, picture their schedules.",
                epilog="Start with:  lpu show --config tiny --H 8 --I 16 --chart schedule.svg\n"
                       "Each subcommand has its own --help.")
    ap.add_argument("--version", action="version", version=f"lpu {_version()}")
    sub = ap.add_subparsers(dest="command", metavar="SUBCOMMAND", required=True)
    for name in SUBCOMMANDS:
        importlib.import_module(f"sim.cli.{name}").add_parser(sub)
    return ap


def _version() -> str:
    try:
        from importlib.metadata import version
        return version("lpu-tile")
    except Exception:
        return "0+unknown"


EXIT_BROKEN_PIPE = 141      # 128 + SIGPIPE, what a shell reports for a tool its pipe's reader left


def quiet_stdout() -> None:
    """Point stdout at the null device, so that Python's flush at exit finds no closed pipe
    (the recipe of the Python documentation, signal module, "Note on SIGPIPE")."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (AttributeError, OSError, ValueError):   # a stdout without a file descriptor (captured)
        pass


def main(argv=None) -> int:
    os.environ.setdefault("PYTHONHASHSEED", "0")
    ap = build_parser()
    args = ap.parse_args(argv)
    if getattr(args, "mxm_dtype", None):      # --dtype (of a tile's options) is --set mxm_dtype=...
        args.set = [*args.set, f"mxm_dtype={args.mxm_dtype}"]
    args.human = sys.stderr if args.json else sys.stdout     # the readable report; stdout is JSON's with --json
    try:
        code = args.func(args)
        sys.stdout.flush()               # a closed pipe shows here, not at exit
        return code
    except BrokenPipeError:              # stdout's reader left (lpu ... | head): quietly, as a Unix tool
        quiet_stdout()
        return EXIT_BROKEN_PIPE
    except (LpuError, OSError) as e:
        print(error_line(e, f"lpu {args.command}"), file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print(f"lpu {args.command}: interrupted", file=sys.stderr)
        return 130

