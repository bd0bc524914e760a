"""What the ``lpu`` subcommands share when they parse: the parser, its help layout, the
argparse types (a bad value is ``lpu SUBCOMMAND: error: argument --OPT: MESSAGE (see
lpu SUBCOMMAND --help)``, exit status 2) and the option groups several take."""

from __future__ import annotations

import argparse
import math
import re
from pathlib import Path

from lpu_arch.config import DTYPES, TileConfig
from lpu_arch.errors import error_line

from firmware_gen.golden.tables import ACTIVATIONS
from sim.cli.common import EXIT_USAGE
from sim.harness.runner import SIMULATORS


class Parser(argparse.ArgumentParser):
    """argparse with one-line errors (no usage dump) that point at --help, and every
    argument that starts with a minus and a digit (-1e6, -1,2, -.5) or is -inf or -nan
    taken as a value, not an option (argparse's own rule takes -1 and -0.5 only; no
    option of lpu starts with a digit)."""

    def __init__(self, *args, **kw):
        super().__init__(*args, **kw)
        self._negative_number_matcher = re.compile(r"^-(\.?\d|inf|nan)", re.IGNORECASE)

    def error(self, message):
        self.exit(EXIT_USAGE, error_line(message, self.prog) + f" (see {self.prog} --help)\n")


class Formatter(argparse.RawDescriptionHelpFormatter):
    """The help layout of every subcommand: 100 columns, the option names in 30."""

    def __init__(self, prog):
        super().__init__(prog, max_help_position=30, width=100)


def add_subcommand(sub, name: str, func, **kw) -> argparse.ArgumentParser:
    """The parser of subcommand ``name``, which ``func(args)`` runs."""
    p = sub.add_parser(name, formatter_class=Formatter, **kw)
    p.set_defaults(func=func)
    return p


# ---- types ----------------------------------------------------------------------------------
def as_int(text: str) -> int | None:
    """``text`` as an integer (any base prefix: 0x10, 0b101), or None."""
    try:
        return int(text, 0)
    except ValueError:
        return None


def int_at_least(lo: int, what: str, hi: int | None = None, why: str = ""):
    """An argparse type: an integer (any base prefix) of at least ``lo`` (and at most
    ``hi``, ``why`` saying where that limit comes from)."""
    def parse(text: str) -> int:
        v = as_int(text)
        if v is None or v < lo:
            raise argparse.ArgumentTypeError(f"must be a {what} integer, got {text!r}")
        if hi is not None and v > hi:
            raise argparse.ArgumentTypeError(f"must be at most {hi}{why}, got {text!r}")
        return v
    return parse


positive = int_at_least(1, "positive")
nonneg = int_at_least(0, "non-negative")


def real(lo: float = -math.inf, hi: float = math.inf, *, above: bool = False, what: str = "",
         message: str | None = None):
    """An argparse type: a finite number (never NaN or infinite) of at least ``lo`` (more
    than ``lo`` with ``above``) and at most ``hi``; ``what`` words the range in the error
    (default: the bounds), ``message`` (``{text}`` the argument) replaces it."""
    if not what:
        what = " ".join(filter(None, (f"{'above' if above else 'at least'} {lo:g}" * math.isfinite(lo),
                                      f"at most {hi:g}" * math.isfinite(hi))))

    def parse(text: str) -> float:
        try:
            v = float(text)
        except ValueError:
            v = math.nan
        if not (math.isfinite(v) and (v > lo if above else v >= lo) and v <= hi):
            raise argparse.ArgumentTypeError(message.format(text=text) if message else
                                             f"must be a finite number{' ' + what if what else ''}, got {text!r}")
        return v
    return parse


positive_real = real(0, above=True, what="above 0")
nonneg_real = real(0, what="of at least 0")


def token_ids(text: str) -> list[int]:
    """An argparse type: comma-separated non-negative token ids (at least one)."""
    try:
        ids = [int(t) for t in text.split(",")]
    except ValueError:
        ids = []
    if not ids or min(ids) < 0:
        raise argparse.ArgumentTypeError(f"expected comma-separated token ids (integers >= 0), got {text!r}")
    return ids


def tiles(text: str) -> int:
    """An argparse type: the tiles of a tray (``lpu_arch.topology.TILE_COUNTS``)."""
    from lpu_arch.topology import TILE_COUNTS
    v = as_int(text)
    if v not in TILE_COUNTS:
        raise argparse.ArgumentTypeError(f"a tray has {', '.join(map(str, TILE_COUNTS[:-1]))} or {TILE_COUNTS[-1]} "
                                         f"tiles (all-to-all links), got {text!r}")
    return v


def picture(text: str) -> Path:
    """An argparse type: a picture's file, its suffix one of ``firmware_gen.chart.FORMATS``."""
    from firmware_gen.chart import FORMATS
    path = Path(text)
    if path.suffix.lower() not in FORMATS:
        raise argparse.ArgumentTypeError(f"cannot write a picture as {path.suffix or 'a file without extension'!r} "
                                         f"({path.name}); use a name ending in {' or '.join(FORMATS)}")
    return path


def window(text: str) -> tuple[int, int]:
    """An argparse type: ``FIRST:LAST`` cycles, either may be empty."""
    a, sep, b = text.partition(":")
    try:
        lo, hi = int(a) if a else 0, int(b) if b else 1 << 62
    except ValueError:
        lo = hi = None
    if not sep or lo is None or lo < 0 or hi < lo:
        raise argparse.ArgumentTypeError(f"expected FIRST:LAST cycles like 100:400 (either may be empty), got {text!r}")
    return lo, hi


def config_arg(value: str) -> str:
    """--config: a preset name, or a TOML or JSON file of TileConfig fields (checked when parsed)."""
    try:
        TileConfig.load(value)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    return value


# ---- option groups --------------------------------------------------------------------------
CONFIG_HELP = ("the tile: a preset (default, tiny) or a TOML or JSON file of TileConfig fields,\n"
               "those it leaves out as in the default tile (default: {})")


def json_option(p, what: str = "the result", more: str = "") -> None:
    """--json: print ``what`` as JSON on stdout (``more`` ends the help)."""
    p.add_argument("--json", action="store_true", help=f"print {what} as JSON on stdout{more}")


def weights_options(g) -> None:
    """--weights, --layer and --map: an FFN read from a file."""
    g.add_argument("--weights", type=Path, default=None, metavar="FILE",
                   help="float weights (.safetensors, .npz, a sharded checkpoint's model.safetensors.index.json,\n"
                        "or a directory holding model.safetensors or that index) instead of random ones\n"
                        "(names and format: lpu compile --help)")
    g.add_argument("--layer", type=nonneg, default=None, metavar="N",
                   help="with --weights: the layer whose FFN to take (needed when the file has several)")
    g.add_argument("--map", default=None, metavar="ROLE=NAME,...",
                   help="with --weights: tensor names for W1 W2 W3 b1 b2 x, {layer} for the layer\n"
                        "(e.g. W1=blk.{layer}.ffn_gate.weight,W2=...; default: Hugging Face names)")


def config_options(g, default, shown) -> None:
    """--config and --set (lpu compile --help lists the fields; unknown fields and values
    out of range are one-line errors)."""
    g.add_argument("--config", type=config_arg, default=default, metavar="PRESET|FILE",
                   help=CONFIG_HELP.format(shown))
    g.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE",
                   help="override one field of the tile, repeatable (e.g. --set mem_depth=16384)")
    g.add_argument("--dtype", choices=DTYPES, default=None, dest="mxm_dtype",
                   help="the MXM's number format: int8, or fp8 (E4M3, exact accumulation; the FFN is\n"
                        "quantised to E4M3): the same as --set mxm_dtype=... (default: the tile's, int8)")


def rtl_run_options(p: argparse.ArgumentParser, json_more: str = "") -> None:
    """--sim, --quiet and --json (its help ending in ``json_more``) of every subcommand that runs the RTL."""
    p.add_argument("--sim", choices=SIMULATORS, default="verilator", help="simulator (default: verilator)")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress lines")
    json_option(p, more=json_more)


def timeline_options(p, chart_help: str, window_help: str, no_run_help: str) -> None:
    """--chart, --window and --no-run of the subcommands that compile for a tray (lpu tray, lpu moe)."""
    p.add_argument("--chart", type=picture, default=None, metavar="FILE", help=chart_help)
    p.add_argument("--window", type=window, default=None, metavar="FIRST:LAST", help=window_help)
    p.add_argument("--no-run", action="store_true", help=no_run_help)


def ffn_shape_options(g, kind_help: str, H_help: str, I_help: str, seed_first: bool = False) -> None:
    """--kind, --H, --I, --batch, --activation and --seed: a random FFN (``seed_first``:
    --seed before --activation, as ``lpu tray --help`` lists them)."""
    g.add_argument("--kind", choices=("swiglu", "classic"), default=None, help=kind_help)
    g.add_argument("--H", type=positive, default=None, metavar="N", help=H_help)
    g.add_argument("--I", type=positive, default=None, metavar="N", help=I_help)
    g.add_argument("--batch", type=positive, default=None, metavar="B", help="batch columns, 1 = decode (default: 1)")
    activation = ("--activation", dict(choices=tuple(ACTIVATIONS), default=None,
                                       help="activation (default: silu for swiglu, gelu for classic)"))
    seed = ("--seed", dict(type=nonneg, default=None, help="seed of the random weights and input (default: 1)"))
    for name, kw in (seed, activation) if seed_first else (activation, seed):
        g.add_argument(name, **kw)


def ffn_options(p: argparse.ArgumentParser) -> None:
    """The FFN to compile (``common.FFN_OPTIONS``) and its tile: lpu compile, sim and show."""
    g = p.add_argument_group("FFN to compile (when no program directory is given)")
    ffn_shape_options(g, "FFN kind (default: swiglu; with --weights, W3 decides)",
                      "model width H (default: 128 on the default tile, 8 on tiny)",
                      "intermediate width I (default: 512 on the default tile, 16 on tiny)")
    weights_options(g)
    config_options(g, None, "default")
    g.add_argument("--out", type=Path, default=None, metavar="DIR",
                   help="where to write program.json and manifest.json (default: build/lpu/<name>); a\n"
                        "directory holding another program is refused unless --force")
    force_option(g)


def force_option(g) -> None:
    """--force: replace a program directory given by --out."""
    g.add_argument("--force", action="store_true",
                   help="with --out: replace a directory holding another program, everything in it\n"
                        "(the directory is written whole, into a new one then renamed)")
