"""``lpu tray``: an FFN compiled for a tray of 2, 4 or 8 tiles, its timeline drawn, run on
the RTL with every tile on its own clock; ``--fit``, the smallest tile for each share."""

from __future__ import annotations

from sim.cli.common import (EXIT_OK, CliError, config_name, example_from_args, print_fit, print_json, run_on_rtl,
                            shape, tray_base, weights_given)
from sim.cli.options import (add_subcommand, config_options, ffn_shape_options, nonneg, positive, rtl_run_options,
                             tiles, timeline_options, weights_options)
from sim.flows.tray import TRAY_H, TRAY_I
from sim.table import Table, right

DESCRIPTION = """\
Compile an FFN (random weights from --seed) for a tray of tiles linked all-to-all
(firmware_gen/compiler/tray.py: each tile computes 1/N of h, multicasts it over the C2C
links, computes 1/N of y over all of h).  --chart draws the tray's timeline:
one band per tile, SAC cycles across, a row per slice kind (MEM, MXM, VXM,
SXM, C2C) with a bar per issued instruction coloured by opcode, and every C2C
transfer as an arrow from its SEND/SENDM to its RECV.  Unless --no-run, it
then runs on the RTL with every tile on its own clock (random ppm within the
specification, random phases and wire latencies, all from --clock-seed) and checks
per tile every MEM write's cycle and value and the cycle count against the
compiler and the multi-tile golden model, no link fault, and y bit-exact
against the integer FFN.
Exit status 0 = PASS, 1 = FAIL, 2 = bad arguments or an FFN that does not fit."""

EPILOG = """\
Every cycle is SAC time (the program's cycle count, which deskew stalls do not
advance; docs/c2c.md).  Progress goes to stderr; the default tile preset is tiny
so that 8 tiles build in minutes on Verilator (in seconds on Icarus for 2).

examples:
  lpu tray --no-run --config default --H 128 --I 512 --chart tray.svg
  lpu tray --tiles 2 --H 8 --I 16 --sim icarus --json > tray.json
  lpu tray --tiles 2 --sim icarus --repeat 4    (4 clock draws: identical cycles, traces)
  lpu tray --tiles 4 --kind classic --chart tray.png"""


def add_parser(sub) -> None:
    p = add_subcommand(sub, "tray", run, help="an FFN on a tray of 2, 4 or 8 tiles: picture, RTL run",
                       description=DESCRIPTION, epilog=EPILOG)
    g = p.add_argument_group("tray and FFN")
    g.add_argument("--tiles", type=tiles, default=8, metavar="N",
                   help="tiles in the tray: 2, 4 or 8 (default: 8)")
    ffn_shape_options(g, "FFN kind (default: swiglu; with --weights, the file decides)",
                      f"model width H (default: {TRAY_H}, which fits a tray of 2, 4 or 8 tiny tiles)",
                      f"intermediate width I (default: {TRAY_I})", seed_first=True)
    weights_options(g)
    g.add_argument("--fit", action="store_true",
                   help="print the smallest tile (power-of-two depths, the rest as --config) on which\n"
                        "every tile of the tray holds its share, as a TOML file for --config; no run")
    g.add_argument("--clock-seed", type=nonneg, default=1,
                   help="seed of every tile's clock (ppm, phase) and of the wire latencies (default: 1)")
    g.add_argument("--repeat", type=positive, default=1, metavar="N",
                   help="run the same programs under N clock draws (one build) and print one line per\n"
                        "draw: every tile's ppm and cycles and a digest of all traces (default: 1)")
    config_options(g, "tiny", "tiny")
    timeline_options(p, "draw the tray's timeline to FILE, .svg or .png",
                     "with --chart: only these SAC cycles (default: the whole program)",
                     "compile (and draw) only; print each tile's prediction")
    rtl_run_options(p, " (per tile: ppm, cycles observed, predicted and\n"
                       "by the golden model, writes as predicted, link faults; bit_exact, y; the tables go\n"
                       "to stderr)")


def run(args) -> int:
    from sim.flows.tray import compile_tray, run_tray_on_rtl
    if args.window is not None and args.chart is None:
        raise CliError("--window limits the picture: give --chart FILE with it")
    base = tray_base(args)
    example = (example_from_args(args, (TRAY_H, TRAY_I), base.mxm_dtype)      # else compile_tray draws it
               if weights_given(args) or args.fit or args.activation else None)
    if args.fit:
        return print_fit(args, example, base, args.tiles)
    ct = compile_tray(tiles=args.tiles, preset=config_name(args.config, args.set), clock_seed=args.clock_seed,
                      base=base, example=example, **shape(args, (TRAY_H, TRAY_I)))
    man = ct.manifest
    chart = {} if args.chart is None else draw(ct, args)
    if args.no_run:
        return print_prediction(ct, args, chart)
    return run_on_rtl(args, lambda progress: run_tray_on_rtl(ct, args.sim, progress=progress, out=args.human,
                                                             repeat=args.repeat),
                      [man.cycles] * args.repeat, to_json=lambda report: {"ran": True, **report.to_json(), **chart},
                      ran=True, **ct.summary())


def draw(ct, args) -> dict:
    """--chart: the tray's timeline; what was written (for --json)."""
    import time

    from firmware_gen.chart import tray_chart
    man = ct.manifest
    title = (f"{ct.kind} FFN H={ct.H} I={ct.I}{'' if ct.batch == 1 else f' batch {ct.batch}'} on {ct.tiles} "
             f"{ct.preset} tiles: {man.cycles:,} SAC cycles predicted"
             + (f" (one tile: {ct.single:,})" if ct.single else "")
             + f", {man.transfers} h vectors over C2C links, SEND to RECV >= {man.min_distance} cycles")
    t0 = time.perf_counter()
    path = tray_chart(ct.programs, args.chart, man, title=title, window=args.window)
    chart = {"chart": str(path), "bytes": path.stat().st_size, "seconds": round(time.perf_counter() - t0, 2)}
    print(f"chart: {chart['chart']} ({chart['bytes']:,} bytes, {chart['seconds']:.1f} s)", file=args.human)
    return chart


def print_prediction(ct, args, chart: dict) -> int:
    """--no-run: the tray as compiled, each tile's predicted cycles, writes and vectors."""
    from collections import Counter

    from firmware_gen.chart import tray_transfers
    man = ct.manifest
    for line in ct.describe():
        print(line, file=args.human)
    moves = tray_transfers(ct.programs, ct.topo.peer)
    sent, got = Counter(x.src for x in moves), Counter(x.dst for x in moves)
    table = Table(right("tile", 4), right("predicted cycles", 16), right("output writes", 13),
                  right("vectors sent", 12), right("received", 8))
    rows = [[t, m.cycles, len(m.writes), sent[t], got[t]] for t, m in enumerate(man.tile)]
    print("", *table.text(rows), sep="\n", file=args.human)
    print(f"\ncycles (SAC, last tile): {man.cycles}"
          + (f"; one tile: {ct.single} ({ct.single / man.cycles:.2f}x)" if ct.single else "")
          + f"; link capacity used: {man.c2c_share:.1%}", file=args.human)
    if args.json:
        print_json({"ran": False, **ct.summary(), "per_tile": [
            {"tile": t, "predicted_cycles": m.cycles, "output_writes": len(m.writes), "vectors_sent": sent[t],
             "vectors_received": got[t]} for t, m in enumerate(man.tile)], **chart})
    return EXIT_OK
