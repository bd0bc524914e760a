"""``lpu show``: a program's schedule drawn (issue rows and stream occupancy)."""

from __future__ import annotations

from pathlib import Path

from sim.cli.common import EXIT_OK, CliError, load_or_compile, print_json
from sim.cli.options import add_subcommand, ffn_options, json_option, window

DESCRIPTION = """\
Draw a compiled program's schedule (SVG or PNG by the file name):
  issue: one row per slice, west to east, a bar per issued data
         instruction coloured by opcode, on the cycle it issues;
  east- and west-flowing stream occupancy: at each position and cycle,
         how many streams carry a live value (one a slice downstream
         still reads: from the position after its driver to its last reader).
DIR may also be any program JSON (Program.to_json), e.g. a scheduler's copies, or a
directory written by lpu attention --out (an attention step, titled with its context)."""

EPILOG = """\
examples:
  lpu show build/lpu/swiglu-H128-I512-b1-s1
  lpu show --kind classic --H 64 --I 128 --chart classic.png
  lpu show /tmp/ffn --window 0:200 --chart start.svg"""


def add_parser(sub) -> None:
    p = add_subcommand(sub, "show", run, help="draw the schedule of a program", description=DESCRIPTION,
                       epilog=EPILOG)
    p.add_argument("program", nargs="?", type=Path, metavar="DIR",
                   help="a directory written by lpu compile, or a program .json (else compile from the FFN options)")
    ffn_options(p)
    p.add_argument("--chart", type=Path, default=None, metavar="FILE",
                   help="picture to write, .svg or .png (default: DIR/schedule.svg)")
    p.add_argument("--window", type=window, default=None, metavar="FIRST:LAST",
                   help="only these cycles, e.g. 0:300 (default: the whole program)")
    p.add_argument("--asm", action="store_true", help="also print the program's disassembly")
    json_option(p, "what was written")


def run(args) -> int:
    import time

    from firmware_gen.chart import FORMATS, schedule_chart
    if args.chart is not None and args.chart.suffix.lower() not in FORMATS:    # before any work
        raise CliError(f"cannot write a chart as {args.chart.suffix or 'a file without extension'!r} "
                       f"({args.chart.name}); use a name ending in {' or '.join(FORMATS)}")
    c, prog, d = load_or_compile(args)
    bare = args.program is not None and Path(args.program).is_file() and c is None     # a program .json
    chart = args.chart or (Path(args.program).with_suffix(".svg") if bare else d / "schedule.svg")
    title = None
    if c is not None:
        m, cfg = c.manifest, c.config
        title = (f"{m.kind} FFN ({c.source.get('activation', '?')}) H={m.H} I={m.I} batch {m.batch} on the "
                 f"{cfg.lanes}-lane tile: {m.cycles:,} cycles predicted, SRAM-read bound {m.sram_bound:,}, "
                 f"MAC bound {m.mac_bound:,}, efficiency {m.efficiency:.3f}")
    from sim.flows.attention import STEP_FILE
    step = d / STEP_FILE                 # lpu attention --out: the step's context and promise
    if c is None and not bare and step.exists():
        import json
        a = json.loads(step.read_text())
        title = (f"attention step, {a['heads']} heads, context {a['L']} ({a['nb']} blocks of 16) on the "
                 f"{prog.config.lanes}-lane tile: {a['predicted_cycles']:,} cycles predicted, K and V^T read bound "
                 f"{a['sram_read_bound']:,}")
    t0 = time.perf_counter()
    path = schedule_chart(prog, chart, title=title, window=args.window)
    secs = time.perf_counter() - t0
    if args.asm:
        print(prog.disassemble(), end="", file=args.human)
    if args.json:
        print_json({"chart": str(path), "bytes": path.stat().st_size, "program_dir": str(d),
                    "seconds": round(secs, 2)})
    else:
        print(f"chart: {path} ({path.stat().st_size:,} bytes, {secs:.1f} s)")
    return EXIT_OK
