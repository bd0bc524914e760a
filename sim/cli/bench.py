"""``lpu bench``: the FFN benchmark suite (``sim.bench.suite``), its options those of
``make bench`` (``sim.bench.args``) and ``--json``."""

from __future__ import annotations

import contextlib
import sys

from sim.bench.args import add_arguments
from sim.cli.common import EXIT_USAGE
from sim.cli.options import add_subcommand

DESCRIPTION = """\
Run the FFN benchmark suite (sim.bench.suite) on each simulator: per FFN the
hardware's cycles against the SRAM-read and MAC bounds and the targets,
per simulator tile-cycles per second.  Writes bench.json and bench.md.
Exit status 0 when every run is exact and every target met, else 1."""

EPILOG = """\
example:
  lpu bench --config tiny --sims verilator --out /tmp/bench --json"""


def add_parser(sub) -> None:
    p = add_subcommand(sub, "bench", run, help="FFN suite: cycles vs bounds, simulator speed",
                       description=DESCRIPTION, epilog=EPILOG)
    add_arguments(p)
    p.add_argument("--json", action="store_true", help="print bench.json on stdout (the tables go to stderr)")


def run(args) -> int:
    from sim.bench import suite as bench
    if not args.json:
        return bench.run(args)
    with contextlib.redirect_stdout(sys.stderr):
        code = bench.run(args)
    if (args.out / "bench.json").exists() and code != EXIT_USAGE:
        print((args.out / "bench.json").read_text(), end="")
    return code
