"""``lpu asm``: a hand-written program assembled into a program directory and run through
the static checker."""

from __future__ import annotations

from pathlib import Path

from lpu_arch.config import TileConfig

from sim.cli.common import EXIT_OK, CliError, output_dir, print_json
from sim.cli.options import add_subcommand, config_options, force_option

DESCRIPTION = """\
Assemble text (``[SLICE]`` headers, one instruction per line, # comments;
docs/isa.md) into DIR/program.json for lpu sim and lpu show, and run the
static checker on it (firmware_gen/check.py: values lost on a stream,
reads of undriven streams, reads of MEM rows nothing defined, addresses,
queue sizes).  --memory gives the MEM images: a JSON object of slice ->
rows of lanes bytes, as program.json's "memory"; a MEM slice without one
holds nothing defined until a WRITE writes it."""

EPILOG = """\
A program directory without manifest.json runs against the golden model alone:
  lpu asm copy.s --config tiny --out /tmp/copy && lpu sim /tmp/copy --sim icarus"""


def add_parser(sub) -> None:
    p = add_subcommand(sub, "asm", run, help="assemble a hand-written program", description=DESCRIPTION,
                       epilog=EPILOG)
    p.add_argument("file", type=Path, metavar="FILE", help="assembly text")
    config_options(p, "tiny", "tiny")
    p.add_argument("--out", type=Path, default=None, metavar="DIR",
                   help="directory (default: build/lpu/<FILE stem>); a directory holding another program\n"
                        "is refused unless --force")
    force_option(p)
    p.add_argument("--memory", type=Path, default=None, metavar="FILE",
                   help='MEM images: JSON {"MEM_W0": [[byte, ...], ...], ...}, rows from 0 (as program.json\'s "memory")')
    p.add_argument("--json", action="store_true", help="print the program path and problems as JSON")


def run(args) -> int:
    from firmware_gen.check import check_program
    from firmware_gen.program import Program, memory_images
    from sim.harness.compiled import PROGRAM_FILE, write_program_dir
    src = Path(args.file)
    if not src.is_file():
        raise CliError(f"{src} is not a file of assembly text")
    out, replace = output_dir(args, src.stem)
    try:
        text = src.read_text()
    except UnicodeDecodeError as e:
        raise CliError(f"{src} is not a file of assembly text (byte {e.start} is not UTF-8 text)") from None
    prog = Program.assemble(TileConfig.load(args.config, args.set), text)
    if args.memory is not None:
        if not args.memory.is_file():
            raise CliError(f"--memory {args.memory} is not a file")
        for name, img in memory_images(args.memory.read_text(), prog.config).items():
            prog.set_memory(name, img)
    write_program_dir(out, {PROGRAM_FILE: prog.to_json()}, replace)
    problems = check_program(prog)
    print(f"assembled {src} -> {out}/program.json ({sum(len(q) for q in prog.queues.values())} instructions, "
          f"{args.config} tile); static check: {'clean' if not problems else f'{len(problems)} problem(s)'}",
          file=args.human)
    for p in problems:
        print(f"  {p}", file=args.human)
    if args.json:
        print_json({"program": str(out / "program.json"), "problems": [str(p) for p in problems]})
    return EXIT_OK
