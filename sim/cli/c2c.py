"""``lpu c2c``: two tiles on drifting clocks exchanging vectors over a C2C link on the RTL,
with fault injection; ``--figures``, the pictures of docs/c2c.md."""

from __future__ import annotations

from pathlib import Path

from sim.cli.common import EXIT_OK, CliError, run_on_rtl
from sim.cli.options import add_subcommand, nonneg, picture, positive, real, rtl_run_options

DESCRIPTION = """\
Two tiny tiles on their own clocks exchange vectors both ways over a C2C link
(sim/flows/c2c.py), spread over several RUNTIME_DESKEW intervals, on the RTL.
Prints per tile its ppm, cycles, the HAC error range, receive and elastic
buffer fill, deskew stall cycles and whether every MEM write came at its
predicted SAC cycle with the golden model's value.  --plot draws the run:
activity (running / stalled by a deskew), HAC error, program skew and the
receive buffers over time.
Exit status 0 = PASS, 1 = FAIL, 2 = bad arguments."""

EPILOG = """\
examples:
  lpu c2c --ppm 1000 -1000 --plot drift.png
  lpu c2c --sim icarus --vectors 4 --spread 300 --json
  lpu c2c --ppm 5000 -5000 --beyond-spec    (out of specification: faults flagged)
  lpu c2c --inject 0:0:0x10:500:3    (3 single-bit flips, corrected and counted)
  lpu c2c --inject 0:0:0x90800000:0:40    (3-bit errors in the root's flits,
      miscorrected: the child loses HAC lock; a deskew stall beyond its bound
      halts it with DESKEW_TIMEOUT)"""


def add_parser(sub) -> None:
    from sim.flows.c2c import BEYOND_SPEC_PPM, c2c_config
    cfg = c2c_config()
    ppm = real(-BEYOND_SPEC_PPM, BEYOND_SPEC_PPM,
               message=f"a clock offset of {{text}} ppm cannot be simulated: offsets must be finite and within "
                       f"+-{BEYOND_SPEC_PPM} ppm, even with --beyond-spec")
    p = add_subcommand(sub, "c2c", run, help="two tiles on drifting clocks over a C2C link (RTL)",
                       description=DESCRIPTION, epilog=EPILOG)
    p.add_argument("--ppm", type=ppm, nargs=2, default=(350.0, -620.0), metavar=("TILE0", "TILE1"),
                   help=f"clock offsets from nominal (10 ns) in ppm (default: +350 -620; the tile\n"
                        f"specification allows +-{cfg.max_ppm})")
    p.add_argument("--latency", type=positive, default=None, metavar="CYCLES",
                   help=f"wire latency in sender cycles, {cfg.link_latency_min}..{cfg.link_latency_max} "
                        f"(default: the declared maximum, {cfg.link_latency_max})")
    p.add_argument("--vectors", type=positive, default=12, help="vectors each way (default: 12)")
    p.add_argument("--spread", type=nonneg, default=700, metavar="CYCLES",
                   help="SAC cycles between a link's vectors (default: 700)")
    p.add_argument("--seed", type=nonneg, default=1, help="seed of the data and clock phases (default: 1)")
    p.add_argument("--plot", type=picture, default=None, metavar="FILE",
                   help="picture of the run over time, .svg or .png")
    p.add_argument("--beyond-spec", action="store_true",
                   help="allow clocks beyond the specification (to see the faults flagged)")
    p.add_argument("--inject", action="append", default=[], metavar="TILE:LINK:MASK:AFTER:COUNT",
                   help="fault injection, repeatable: XOR MASK (an integer, 0x.. for hex; flit bit 0 is\n"
                        "the valid bit, then 2 kind bits, the payload, the SECDED check bits) into COUNT\n"
                        "valid flits that TILE (0 or 1) sends on LINK, from AFTER of its cycles after the\n"
                        "start.  The report shows per injection the flits requested and the flits hit\n"
                        "(fewer when the link sends fewer)")
    p.add_argument("--figures", type=Path, default=None, metavar="DIR",
                   help="instead: write the pictures of docs/c2c.md into DIR, from two fixed runs")
    rtl_run_options(p, " (the table goes to stderr)")


def run(args) -> int:
    from sim.flows.c2c import figures, parse_inject, run_c2c
    if args.figures:
        if args.json:
            raise CliError("--figures writes pictures and no report: leave out --json")
        figures(args.figures, args.sim)
        print(f"wrote {args.figures / 'c2c-timing.png'} and {args.figures / 'c2c-drift.png'}", file=args.human)
        return EXIT_OK
    inject = [parse_inject(x) for x in args.inject]       # a malformed spec: ConfigError, one line
    return run_on_rtl(args, lambda progress: run_c2c(args.sim, tuple(args.ppm), args.latency, args.vectors,
                                                     args.spread, args.seed, args.plot, args.beyond_spec,
                                                     out=args.human, progress=progress, inject=inject))
