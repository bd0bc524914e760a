"""The ``lpu`` command line: compile an FFN, simulate it on the RTL, picture its schedule,
benchmark the simulators, synthesise the tile.

    lpu compile [FFN options] [--out DIR] [--json]
    lpu sim     [DIR | FFN options] [--sim verilator|icarus] [--waves] [--json] | --copy
    lpu show    [DIR | FFN options] [--chart FILE.svg|.png] [--window A:B] [--asm] [--json]
    lpu tray    [--tiles 2|4|8] [FFN options] [--chart FILE] [--no-run | --sim SIM] [--json]
    lpu moe     [--experts E --top-k K --shared S --capacity C] [--tiles N] [--routing R] [--no-run] [--json]
    lpu decode  [--model synthetic] [--tokens N] [--prompt 1,2,3] [--layers L] [--experts E] [--sim SIM | --no-run] [--json]
    lpu c2c     [--sim SIM] [--ppm A B] [--latency L] [--plot FILE] [--inject T:L:MASK:AFTER:N] [--json] | --figures DIR
    lpu bench   [--config default|tiny] [--dtype int8|fp8] [--sims verilator,icarus] [--sweep] [--quick]
                [--out DIR] [--json]
    lpu synth   [--board ulx3s-85f] [--config default|tiny] [--out DIR] [--seed N] [--json]
    lpu plan    [--model NAME|all | --hf-config FILE] [--dtype fp8|bf16|int8|int4|mxfp4] [--json] [--chart FILE]

``lpu SUBCOMMAND --help`` documents each.  Each subcommand is a module of this package
(``sim/cli/compile.py``, ...) with ``add_parser(sub)``, which declares its options, and
``run(args)``, which runs what they ask for and prints the result (a run's: the flow's
``sim.report.Report``, ``sim/flows/``, as text or its ``to_json`` with ``--json``); the
options and helpers several share are in ``options.py`` (parsing) and ``common.py``
(running).  A bad argument or an impossible request (an FFN that does not fit, a missing
file) is one line on stderr naming the problem and exit status 2; ``lpu sim``, ``lpu tray``
and ``lpu c2c`` exit 0 when every check passes and 1 when one fails.
"""

from __future__ import annotations

import importlib
import os
import sys

from lpu_arch.errors import LpuError, error_line

from sim.cli.common import EXIT_USAGE
from sim.cli.options import Formatter, Parser

# Each the name of its module in this package, in the order --help lists them.
SUBCOMMANDS = ("compile", "sim", "asm", "show", "tray", "moe", "plan", "decode", "c2c", "bench", "synth")


def build_parser() -> Parser:
    """The ``lpu`` parser: every subcommand's (``SUBCOMMANDS``), each setting ``func``."""
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


def main(argv=None) -> int:
    os.environ.setdefault("PYTHONHASHSEED", "0")
    ap = build_parser()
    args = ap.parse_args(argv)
    if getattr(args, "mxm_dtype", None):      # --dtype (of a tile's options) is --set mxm_dtype=...
        args.set = [*args.set, f"mxm_dtype={args.mxm_dtype}"]
    args.human = sys.stderr if args.json else sys.stdout     # the readable report; stdout is JSON's with --json
    try:
        return args.func(args)
    except (LpuError, OSError) as e:
        print(error_line(e, f"lpu {args.command}"), file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print(f"lpu {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
