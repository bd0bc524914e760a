"""``lpu attention``: one decode step of attention on a tile, compiled for each context length
and run on the RTL tile and the golden model, or (``--no-run``) the golden model alone
(``sim/flows/attention.py``)."""

from __future__ import annotations

from pathlib import Path

from lpu_arch.config import TileConfig

from sim.cli.common import EXIT_FAIL, EXIT_OK, CliError, print_json, run_on_rtl
from sim.cli.options import add_subcommand, force_option, int_at_least, nonneg, rtl_run_options

MAX_HEADS = 6          # 9 VXM parameter entries per head and one shared: 55 of the default tile's 64

DESCRIPTION = """\
One decode step of causal attention (docs/numerics.md, "Attention") for H heads of dimension
32 on the default tile with sxm_max=1 (the SXM's MAX finds the largest score; also
sxm_argmax=1 and sxm_setb=1: one build with lpu decode --on-chip's tile): the compiler
(firmware_gen/compiler/attention.py) places the KV cache, the new k and v, the scores, the
maximum, the exp table, the sums and the normalisation by octaves; the program depends on the
number of 16-position blocks only, the length within the block is in base registers.  Every
context length runs on the golden model and, as one job of a single testbench run, on the
RTL tile (--sim; --no-run: the golden model alone): every head's output checked bit for bit
against golden/attention.py's head_int, every MEM write (cycle, row, value) and the cycle
count as the golden model's and at the compiler's predicted cycles, the rows written read
back after the run, the static checker clean.  Prints per length the cycles predicted, on
the golden model and on the RTL, and the SRAM-read bound (the step's K and V^T rows, one row
a cycle from each of the 8 MEM slices).  --out DIR writes the last length's program
(program.json, and attention.json with its base registers and promise): lpu show DIR draws it.
Exit status 0 = PASS, 1 = FAIL, 2 = bad arguments."""

EPILOG = """\
examples:
  lpu attention --lengths 1,16,17,64
  lpu attention --sim icarus --heads 4 --json
  lpu attention --no-run --lengths 1..64
  lpu attention --no-run --lengths 64 --out /tmp/attention-64   # then: lpu show /tmp/attention-64"""


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
    p = add_subcommand(sub, "attention", run, help="one decode step of attention on the tile (RTL or golden model)",
                       description=DESCRIPTION, epilog=EPILOG)
    p.add_argument("--heads", type=int_at_least(1, "positive", MAX_HEADS, " (the VXM's 64 parameter entries)"),
                   default=2, help="heads (default: 2)")
    p.add_argument("--lengths", default="1,15,16,17,32,33,48,49,64", metavar="LIST",
                   help="context lengths, e.g. 1..64 (default: 1,15,16,17,32,33,48,49,64)")
    p.add_argument("--seed", type=nonneg, default=0, help="seed of the heads and the data (default: 0)")
    p.add_argument("--no-run", action="store_true", help="the golden model only, no RTL")
    p.add_argument("--out", type=Path, default=None, metavar="DIR",
                   help="write the last length's program as DIR (program.json, attention.json) for lpu show")
    force_option(p)
    rtl_run_options(p)


def run(args) -> int:
    from sim.flows.attention import attention_config, run_attention, save_step
    Ls = lengths(args.lengths)
    if args.force and args.out is None:
        raise CliError("--force replaces the directory given by --out: give --out DIR")
    cfg = attention_config(TileConfig())
    if args.out is not None:
        save_step(cfg, args.heads, Ls[-1], args.seed, args.out, args.force)
        print(f"step of context {Ls[-1]} -> {args.out}/ (lpu show {args.out})", file=args.human)
    sim = None if args.no_run else args.sim

    def go(progress):
        rep = run_attention(cfg, args.heads, Ls, args.seed, out=args.human, sim=sim, progress=progress,
                            build_out=args.human)
        for p in rep.problems:
            print(p, file=args.human)
        where = "the golden model" if sim is None else f"{sim} and the golden model"
        print(f"{'PASS' if rep.passed else 'FAIL'}: {len(Ls)} steps on {where}"
              + (f", {rep.figures['run_seconds']:.1f} s of simulation" if sim else ""), file=args.human)
        return rep
    if sim is None:
        rep = go(None)
        if args.json:
            print_json(rep.to_json())
        return EXIT_OK if rep.passed else EXIT_FAIL
    return run_on_rtl(args, go, expected=None)
