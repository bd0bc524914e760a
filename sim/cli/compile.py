"""``lpu compile``: an FFN (random or from a weights file) compiled to a program directory;
``--fit``, the smallest tile that holds it."""

from __future__ import annotations

from pathlib import Path

from lpu_arch.config import TileConfig

from sim.cli.common import (EXIT_OK, CliError, compile_from_args, example_from_args, output_dir, print_fit,
                            print_json)
from sim.cli.options import add_subcommand, ffn_options, json_option
from sim.table import Column, Table

NPZ_HELP = """\
weights file (--weights FILE): float tensors (float16, bfloat16, float32), by name
  .safetensors with Hugging Face names (--layer N picks the layer):
    model.layers.N.mlp.{gate,up,down}_proj.weight             SwiGLU: W1, W3, W2
    [prefix.]encoder.layer.N.{intermediate,output}.dense.{weight,bias}  classic: W1,b1, W2,b2
  or the plain names, in .safetensors or .npz:
    W1 (I, H), W2 (H, I), W3 (I, H; present = SwiGLU), b1 (I,), b2 (H,) (classic, optional)
  x (H,) or (B, H), optional: the input, which also calibrates the int8 scales; without
  it, 4 seeded N(0,1) rows shaped by the file's layer norm before the FFN
  --map W1=NAME,W2=NAME,... for other names ({layer} stands for N)
Quantised with per-row weight scales and per-tensor activation scales (docs/numerics.md,
"Weights from files").  Example:
  python -c "import numpy as r; g=r.random.default_rng(0); r.savez('ffn.npz', \\
    W1=g.normal(size=(96,32)), W3=g.normal(size=(96,32)), W2=g.normal(size=(32,96)), x=g.normal(size=32))"
"""

DESCRIPTION = """\
Compile an FFN (random weights from --seed, or --weights FILE.npz) for the tile.
Writes DIR/program.json (the program: queues, MEM images, VXM parameters)
and DIR/manifest.json (the compiler's summary and every predicted output
write, with the reference output), and prints shape, predicted cycles,
bounds and efficiency."""

EPILOG = NPZ_HELP + """
examples:
  lpu compile --kind classic --H 64 --I 256
  lpu compile --config tiny --H 8 --I 16 --batch 2 --out /tmp/ffn
  lpu compile --weights ffn.npz --json"""


def add_parser(sub) -> None:
    p = add_subcommand(sub, "compile", run, help="compile an FFN to a program directory",
                       description=DESCRIPTION, epilog=EPILOG)
    ffn_options(p)
    p.add_argument("--fit", action="store_true",
                   help="print the smallest tile (power-of-two depths, the rest as --config) that holds\n"
                        "the FFN, as a TOML file for --config; compiles nothing else")
    json_option(p, "the summary")


def run(args) -> int:
    from sim.harness.compiled import summary_rows
    if args.fit:
        if args.out is not None:
            raise CliError("--fit prints a configuration and compiles nothing: leave out --out")
        output_dir(args, "")                       # --force without --out
        base = TileConfig.load(args.config or "default", args.set)
        return print_fit(args, example_from_args(args, dtype=base.mxm_dtype), base, 1)
    c = compile_from_args(args)
    out, replace = output_dir(args, c.name)
    files = c.save(out, replace)
    if args.json:
        print_json({"name": c.name, "dir": str(out), "files": files, "source": c.source,
                    **c.manifest.summary()})
        return EXIT_OK
    print(f"compiled {c.name} -> {out}/")
    rows = summary_rows(c)
    summary = Table(Column("", max(len(label) for label, _ in rows), gap=2), Column("", gap=2))
    print(*summary.text(rows, head=False), sep="\n")
    print(f"next: lpu sim {out}   |   lpu show {out} --chart {Path(out) / 'schedule.svg'}")
    return EXIT_OK
