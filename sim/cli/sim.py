"""``lpu sim``: an FFN (compiled here, or a program directory) run on the RTL and checked
against the compiler and the golden model; ``--copy``, the data-movement demo."""

from __future__ import annotations

from pathlib import Path

from lpu_arch.config import TileConfig

from sim.cli.common import EXIT_FAIL, EXIT_OK, FFN_OPTIONS, CliError, given, load_or_compile, run_on_rtl, shape
from sim.cli.options import add_subcommand, ffn_options, rtl_run_options

DESCRIPTION = """\
Run an FFN on the RTL tile (compiling it first unless DIR is given) and check
every output write's cycle and value against the compiler's prediction and
the golden model, the cycle count and busy counters, the output bit-exact
against the integer FFN; report the error against the float FFN.
Exit status 0 = PASS, 1 = FAIL, 2 = bad arguments or setup."""

EPILOG = """\
Progress (jobs done, cycles, rate, a heartbeat on long runs) goes to stderr.
--waves writes DIR/waves/<sim>.fst and a GTKWave view DIR/waves/<sim>.gtkw
(signals grouped by slice): open it with  gtkwave DIR/waves/<sim>.gtkw
(Verilator's FST needs lz4 headers: sudo apt-get install liblz4-dev).

examples:
  lpu sim --config tiny --H 8 --I 16
  lpu compile --out /tmp/ffn && lpu sim /tmp/ffn --sim icarus --waves
  lpu sim /tmp/ffn --json > result.json"""


def add_parser(sub) -> None:
    p = add_subcommand(sub, "sim", run, help="run a compiled FFN on the RTL and check it",
                       description=DESCRIPTION, epilog=EPILOG)
    p.add_argument("program", nargs="?", type=Path, metavar="DIR",
                   help="a directory written by lpu compile (else compile from the FFN options)")
    ffn_options(p)
    p.add_argument("--waves", action="store_true", help="record waveforms and write a GTKWave view")
    p.add_argument("--unchecked", action="store_true",
                   help="run a program that fails the static check anyway (its problems are printed)")
    p.add_argument("--copy", action="store_true",
                   help="instead of an FFN: the MEM-to-MEM data-movement demo (sweeps across the tile)")
    rtl_run_options(p, " (the table goes to stderr)")


def checked(prog, args) -> None:
    """The static program checker (``firmware_gen.check``) before the host loads ``prog``:
    a problem is one error naming it (and how many more), unless ``--unchecked``."""
    from firmware_gen.check import check_program
    problems = check_program(prog)
    if problems and not args.unchecked:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise CliError(f"the program fails the static check: {problems[0]}{more}; --unchecked runs it anyway")
    for p in problems:
        print(f"warning: {p}", file=args.human)


def run(args) -> int:
    from firmware_gen.golden import archmodel

    from sim.flows.ffn import run_ffn_on_rtl, run_program_on_rtl
    from sim.harness.waves import WavesError
    if args.copy:
        ignored = (["DIR"] * (args.program is not None) + given(args, [k for k in FFN_OPTIONS if k != "seed"])
                   + ["--unchecked"] * args.unchecked + ["--json"] * args.json)
        if ignored:
            raise CliError(f"--copy runs its own program and prints a table: leave out {', '.join(ignored)}")
        from sim.flows.ffn import run_copy
        report = run_copy(TileConfig.load(args.config or "default", args.set), args.sim, shape(args)["seed"],
                          args.waves)
        return EXIT_OK if report.passed else EXIT_FAIL
    c, prog, d = load_or_compile(args)
    checked(prog, args)

    def run_tile(progress):
        rtl, what = (run_program_on_rtl, prog) if c is None else (run_ffn_on_rtl, c)
        return rtl(what, args.sim, args.waves, waves_dir=d / "waves" if args.waves else None, progress=progress,
                   out=args.human, checked=not args.unchecked)

    return run_on_rtl(args, run_tile, [c.manifest.cycles if c else archmodel.run(prog).cycles], (WavesError,),
                      lambda report: {**report.to_json(), "program_dir": str(d)}, program_dir=str(d))
