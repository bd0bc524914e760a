"""``lpu synth``: the tile synthesised for an ECP5 board (``hdl.flows.synth``), its
resources and Fmax reported."""

from __future__ import annotations

import sys
from pathlib import Path

from lpu_arch.config import TileConfig

from hdl.flows import synth
from sim.cli.common import EXIT_FAIL, EXIT_OK, config_name, print_json
from sim.cli.options import add_subcommand, config_options, json_option, nonneg, positive

DESCRIPTION = """\
Synthesise the tile behind its UART host bridge for an ECP5 board with the
YoWASP Yosys/nextpnr (hdl.flows.synth) and report LUTs, flip-flops, block RAMs,
DSPs, Fmax and logic per unit.  Yosys runs first; when its mapped cells
exceed the device, the flow stops there and names each resource over the
limit (exit status 1) instead of placing.  When the design has more
multipliers than the device has DSPs, the MXMs' 8x8 products are built
from logic."""

EPILOG = """\
example:
  lpu synth --config tiny --board ulx3s-85f"""


def add_parser(sub) -> None:
    p = add_subcommand(sub, "synth", run, help="ECP5 bitstream and resource/Fmax report", description=DESCRIPTION,
                       epilog=EPILOG)
    p.add_argument("--board", choices=tuple(synth.BOARDS), default="ulx3s-85f", help="board (default: ulx3s-85f)")
    config_options(p, "default", "default")
    p.add_argument("--baud", type=positive, default=115200, help="UART baud rate (default: 115200)")
    p.add_argument("--out", type=Path, default=None, metavar="DIR",
                   help="build directory (default: build/synth-<board>-<config>)")
    p.add_argument("--seed", type=nonneg, default=None,
                   help=f"nextpnr's placement seed (default: {synth.NEXTPNR_SEED}"
                        + "".join(f"; {k}: {n}" for k, n in synth.NEXTPNR_SEEDS.items()) + ")")
    json_option(p, "the report")


def run(args) -> int:
    name = config_name(args.config, args.set)
    out = args.out or synth.ROOT / "build" / f"synth-{args.board}-{name}"
    print(f"synthesising the {name} tile for {args.board} in {out} ...", file=args.human, flush=True)
    report = synth.synthesise(TileConfig.load(args.config, args.set), args.board, Path(out), args.baud,
                              seed=args.seed)
    if args.json:
        print_json(report)
    else:
        print(synth.markdown(report))
        print(f"reports{' and bitstream' if report['placed'] else ''} in {out}")
    problem = synth.misfit(report)
    if problem:
        print(f"lpu synth: {problem}", file=sys.stderr)
    return EXIT_OK if report["fits"] else EXIT_FAIL
