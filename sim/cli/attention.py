"""``lpu attention``: one decode step of attention on a tile, compiled for each context length
and run on the golden model (``sim/flows/attention.py``)."""

from __future__ import annotations

from lpu_arch.config import TileConfig

from sim.cli.common import EXIT_FAIL, EXIT_OK, CliError, print_json
from sim.cli.options import add_subcommand, int_at_least, nonneg

MAX_HEADS = 6          # 9 VXM parameter entries per head and one shared: 55 of the default tile's 64

DESCRIPTION = """\
One decode step of causal attention (docs/numerics.md, "Attention") for H heads of dimension
32 on the default tile with sxm_max=1 (the SXM's MAX finds the largest score): the compiler
(firmware_gen/compiler/attention.py) places the KV cache, the new k and v, the scores, the
maximum, the exp table, the sums and the normalisation by octaves; the program depends on the
number of 16-position blocks only, the length within the block is in base registers.  Each
context length runs on the golden model: every head's output checked bit for bit against
golden/attention.py's head_int, every MEM write at its predicted cycle, the static checker
clean.  Prints per length the cycles and the SRAM-read bound (the step's K and V^T rows, one
row a cycle from each of the 8 MEM slices).
Exit status 0 = PASS, 1 = FAIL, 2 = bad arguments."""

EPILOG = """\
examples:
  lpu attention
  lpu attention --heads 4 --lengths 1,16,17,64 --json"""


def lengths(text: str) -> list[int]:
    out = []
    for part in text.split(","):
        lo, _, hi = part.partition("..")
        try:
            a, b = int(lo), int(hi or lo)
        except ValueError:
            raise CliError(f"--lengths takes lengths and ranges, e.g. 1,16..20,64; got {text!r}") from None
        if not 1 <= a <= b <= 64:
            raise CliError(f"context lengths must be in 1..64 (the cache holds 64 positions); got {part!r}")
        out += range(a, b + 1)
    return out


def add_parser(sub) -> None:
    p = add_subcommand(sub, "attention", run, help="one decode step of attention on the tile (golden model)",
                       description=DESCRIPTION, epilog=EPILOG)
    p.add_argument("--heads", type=int_at_least(1, "positive", MAX_HEADS, " (the VXM's 64 parameter entries)"),
                   default=2, help="heads (default: 2)")
    p.add_argument("--lengths", default="1,15,16,17,32,33,48,49,64", metavar="LIST",
                   help="context lengths, e.g. 1..64 (default: 1,15,16,17,32,33,48,49,64)")
    p.add_argument("--seed", type=nonneg, default=0, help="seed of the heads and the data (default: 0)")
    p.add_argument("--json", action="store_true", help="the report as JSON on stdout")


def run(args) -> int:
    from sim.flows.attention import attention_config, run_attention
    Ls = lengths(args.lengths)
    print(f"{'L':>4} {'nb':>3} {'cycles':>7} {'bound':>6} {'x bound':>7}", file=args.human)
    rep = run_attention(attention_config(TileConfig()), args.heads, Ls, args.seed, out=args.human)
    for p in rep.problems:
        print(p, file=args.human)
    print("PASS" if rep.passed else "FAIL", file=args.human)
    if args.json:
        print_json(rep.to_json())
    return EXIT_OK if rep.passed else EXIT_FAIL
