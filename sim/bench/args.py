"""The options of ``make bench`` (``python -m sim.bench``) and ``lpu bench``, defined once:
both parsers call :func:`add_arguments` (``lpu bench`` adds ``--json``)."""

from __future__ import annotations

import argparse
from pathlib import Path

from lpu_arch.config import DTYPES, TileConfig

from sim.bench.speed import REFERENCE
from sim.cli.options import positive
from sim.bench.history import HISTORY
from sim.harness.runner import ROOT, SIMULATORS

PRESETS = TileConfig.PRESETS[:2]          # the tiles the suite is scaled to


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--config", choices=PRESETS, default="default", help="tile preset (default: default)")
    ap.add_argument("--dtype", choices=DTYPES, default="int8",
                    help="the tile's MXM number format: with fp8 the FFN suite, tray and MoE rows run in E4M3 "
                         "(default: int8)")
    ap.add_argument("--sims", default=",".join(SIMULATORS), metavar="LIST",
                    help=f"comma-separated simulators (default: {','.join(SIMULATORS)})")
    ap.add_argument("--sweep", action="store_true", help="also run the MEM-to-MEM sweep program")
    ap.add_argument("--passes", type=positive, default=4, help="sweep passes with --sweep (default: 4)")
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results", metavar="DIR",
                    help="output directory (default: bench/results)")
    ap.add_argument("--no-bus-load", action="store_true",
                    help="do not run the suite a second time loaded over the host bus (no bus loading figure)")
    ap.add_argument("--build-configs", default=",".join(PRESETS), metavar="LIST",
                    help="comma-separated presets whose Verilator build is timed from scratch "
                         "(default: %(default)s; '': none)")
    ap.add_argument("--no-model", action="store_true",
                    help="skip the real-model FFNs (H=384, I=1536 on a tile fitted to them, Verilator: "
                         "a build of minutes; sim/bench/model.py)")
    ap.add_argument("--history", type=Path, default=HISTORY, metavar="FILE",
                    help="append this run's figures to this history, keyed by commit, and draw it to "
                         "OUT/history.svg (default: bench/history.jsonl; sim/bench/history.py)")
    ap.add_argument("--no-history", action="store_true", help="do not append to the history")
    ap.add_argument("--no-speed-reference", action="store_true",
                    help=f"do not measure tile-cycles/s against the build of commit {REFERENCE} "
                         "(sim/bench/speed.py: that build and its runs take minutes)")
    ap.add_argument("--quick", action="store_true",
                    help="the FFN suite, tray, MoE, attention, token-loop and decode figures only: implies "
                         "--no-bus-load, --build-configs '', --no-model and --no-speed-reference, and leaves out "
                         "the LP30 projections (compiling the full-size dense layer takes minutes) and the "
                         "accuracy on trained weights")
