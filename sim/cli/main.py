"""The ``lpu`` command line: compile an FFN, simulate it on the RTL, picture its schedule,
benchmark the simulators, synthesise the tile.

    lpu compile [FFN options] [--out DIR] [--json]
    lpu sim     [DIR | FFN options] [--sim verilator|icarus] [--waves] [--json] | --copy
    lpu show    [DIR | FFN options] [--chart FILE.svg|.png] [--window A:B] [--asm] [--json]
    lpu tray    [--tiles 2|4|8] [FFN options] [--chart FILE] [--no-run | --sim SIM] [--json]
    lpu moe     [--experts E --top-k K --shared S --capacity C] [--tiles N] [--routing R] [--no-run] [--json]
    lpu decode  [--model synthetic] [--tokens N] [--prompt 1,2,3] [--layers L] [--experts E] [--sim SIM | --no-run] [--json]
    lpu c2c     [--sim SIM] [--ppm A B] [--latency L] [--plot FILE] [--inject T:L:MASK:AFTER:N] [--json] | --figures DIR
    lpu bench   [--config default|tiny] [--dtype int8|fp8] [--sims verilator,icarus] [--sweep] [--quick]
                [--out DIR] [--json]
    lpu synth   [--board ulx3s-85f] [--config default|tiny] [--out DIR] [--seed N] [--json]

``lpu SUBCOMMAND --help`` documents each.  A bad argument or an impossible request (an
FFN that does not fit, a missing file) is one line on stderr naming the problem and exit
status 2; ``lpu sim``, ``lpu tray`` and ``lpu c2c`` exit 0 when every check passes and 1
when one fails.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import sys
from pathlib import Path

from lpu_arch.config import DTYPES, TileConfig
from lpu_arch.errors import LpuError
from lpu_arch.topology import RUN_TILE_COUNTS

EXIT_OK, EXIT_FAIL, EXIT_USAGE = 0, 1, 2
PRESETS = ("default", "tiny")
DEFAULT_SHAPE = {"default": (128, 512), "tiny": (8, 16), "board": (32, 64)}   # (H, I) when not given

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


class CliError(LpuError):
    """A user error: printed as one line, exit status 2."""


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors (no usage dump) that point at --help."""

    def error(self, message):
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


class _Formatter(argparse.RawDescriptionHelpFormatter):
    def __init__(self, prog):
        super().__init__(prog, max_help_position=30, width=100)


def _int_at_least(lo: int, what: str):
    """An argparse type: an integer (any base prefix) of at least ``lo``."""
    def parse(text: str) -> int:
        try:
            v = int(text, 0)
        except ValueError:
            v = None
        if v is None or v < lo:
            raise argparse.ArgumentTypeError(f"must be a {what} integer, got {text!r}")
        return v
    return parse


_positive = _int_at_least(1, "positive")
_nonneg = _int_at_least(0, "non-negative")


def _token_ids(text: str) -> list[int]:
    """An argparse type: comma-separated non-negative token ids (at least one)."""
    try:
        ids = [int(t) for t in text.split(",")]
    except ValueError:
        ids = []
    if not ids or min(ids) < 0:
        raise argparse.ArgumentTypeError(f"expected comma-separated token ids (integers >= 0), got {text!r}")
    return ids


def _tiles(text: str) -> int:
    from lpu_arch.topology import TILE_COUNTS
    try:
        v = int(text, 0)
    except ValueError:
        v = None
    if v not in TILE_COUNTS:
        raise argparse.ArgumentTypeError(f"a tray has {', '.join(map(str, TILE_COUNTS[:-1]))} or {TILE_COUNTS[-1]} "
                                         f"tiles (all-to-all links), got {text!r}")
    return v


def _picture(text: str) -> Path:
    from firmware_gen.chart import FORMATS
    path = Path(text)
    if path.suffix.lower() not in FORMATS:
        raise argparse.ArgumentTypeError(f"cannot write a picture as {path.suffix or 'a file without extension'!r} "
                                         f"({path.name}); use a name ending in {' or '.join(FORMATS)}")
    return path


def _window(text: str) -> tuple[int, int]:
    a, sep, b = text.partition(":")
    try:
        lo, hi = int(a) if a else 0, int(b) if b else 1 << 62
    except ValueError:
        lo = hi = None
    if not sep or lo is None or lo < 0 or hi < lo:
        raise argparse.ArgumentTypeError(f"expected FIRST:LAST cycles like 100:400 (either may be empty), got {text!r}")
    return lo, hi


# ---- the FFN to work on ---------------------------------------------------------------------
CONFIG_HELP = ("the tile: a preset (default, tiny) or a TOML or JSON file of TileConfig fields,\n"
               "those it leaves out as in the default tile (default: {})")


def _weights_options(g):
    g.add_argument("--weights", type=Path, default=None, metavar="FILE",
                   help="float weights (.safetensors or .npz) instead of random ones\n"
                        "(names and format: lpu compile --help)")
    g.add_argument("--layer", type=_nonneg, default=None, metavar="N",
                   help="with --weights: the layer whose FFN to take (needed when the file has several)")
    g.add_argument("--map", default=None, metavar="ROLE=NAME,...",
                   help="with --weights: tensor names for W1 W2 W3 b1 b2 x, {layer} for the layer\n"
                        "(e.g. W1=blk.{layer}.ffn_gate.weight,W2=...; default: Hugging Face names)")


def _print_fit(args, example, base, tiles: int) -> int:
    """--fit: the smallest depths that hold the FFN on ``tiles`` tiles of ``base``, as TOML."""
    from firmware_gen.compiler.fit import FIELDS, fit_ffn
    cfg, need = fit_ffn(example.spec, example.x_int8, base, tiles)
    if args.json:
        _print_json({"config": cfg.to_dict(), "needs": need, "tiles": tiles})
        return EXIT_OK
    s = example.spec
    where = "one tile" if tiles == 1 else f"each of {tiles} tiles"
    head = (f"lpu --fit: the smallest power-of-two depths on which {where} holds a {s.kind} FFN\n"
            f"H={s.H}, I={s.I}, batch {example.x_int8.reshape(-1, s.H).shape[0]}; the other fields as given.\n"
            "needs: " + ", ".join(f"{k} {need[k]}" for k in FIELDS if k in need) + "\n"
            "use it:  --config FILE.toml")
    print(cfg.to_toml(head), end="")
    return EXIT_OK


def _config_options(g, default, shown):
    """--config and --set (lpu compile --help lists the fields; unknown fields and values
    out of range are one-line errors)."""
    g.add_argument("--config", type=_config_arg, default=default, metavar="PRESET|FILE",
                   help=CONFIG_HELP.format(shown))
    g.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE",
                   help="override one field of the tile, repeatable (e.g. --set mem_depth=16384)")
    g.add_argument("--dtype", choices=DTYPES, default=None, dest="mxm_dtype",
                   help="the MXM's number format: int8, or fp8 (E4M3, exact accumulation; the FFN is\n"
                        "quantised to E4M3): the same as --set mxm_dtype=... (default: the tile's, int8)")


def _rtl_run_options(p: argparse.ArgumentParser, json_more: str = ""):
    """--sim, --quiet and --json (its help ending in ``json_more``) of every subcommand that runs the RTL."""
    from sim.harness.runner import SIMULATORS
    p.add_argument("--sim", choices=SIMULATORS, default="verilator", help="simulator (default: verilator)")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress lines")
    p.add_argument("--json", action="store_true", help=f"print the result as JSON on stdout{json_more}")


def _ffn_options(p: argparse.ArgumentParser):
    from firmware_gen.golden.tables import ACTIVATIONS
    g = p.add_argument_group("FFN to compile (when no program directory is given)")
    g.add_argument("--kind", choices=("swiglu", "classic"), default=None,
                   help="FFN kind (default: swiglu; with --weights, W3 decides)")
    g.add_argument("--H", type=_positive, default=None, metavar="N",
                   help="model width H (default: 128 on the default tile, 8 on tiny)")
    g.add_argument("--I", type=_positive, default=None, metavar="N",
                   help="intermediate width I (default: 512 on the default tile, 16 on tiny)")
    g.add_argument("--batch", type=_positive, default=None, metavar="B", help="batch columns, 1 = decode (default: 1)")
    g.add_argument("--activation", choices=tuple(ACTIVATIONS), default=None,
                   help="activation (default: silu for swiglu, gelu for classic)")
    g.add_argument("--seed", type=_nonneg, default=None, help="seed of the random weights and input (default: 1)")
    _weights_options(g)
    _config_options(g, None, "default")
    g.add_argument("--out", type=Path, default=None, metavar="DIR",
                   help="where to write program.json and manifest.json (default: build/lpu/<name>)")


def _example_from_args(args, default=None, dtype: str = "int8"):
    """The FFN the options describe (quantised as ``dtype``, not compiled): --weights or a
    random one (:func:`_shape`, ``default`` its H and I when not given)."""
    from firmware_gen.compiler.ffn import example_ffn
    if _weights_given(args):
        from sim.harness.compiled import example_from_weights
        return example_from_weights(args.weights, kind=args.kind, activation=args.activation, layer=args.layer,
                                    mapping=args.map, dtype=dtype)[0]
    return example_ffn(**_shape(args, default), activation=args.activation, dtype=dtype)


def _shape(args, default=None) -> dict:
    """kind, H, I, batch and seed of the random FFN the options describe (H and I not given:
    ``default``, else the preset's ``DEFAULT_SHAPE``)."""
    H, I = default or DEFAULT_SHAPE.get(args.config, DEFAULT_SHAPE["default"])
    return dict(kind=args.kind or "swiglu", H=args.H or H, I=args.I or I, batch=args.batch or 1,
                seed=1 if args.seed is None else args.seed)


def _weights_given(args) -> bool:
    """Whether --weights is given; then no shape option may be, and without it neither
    --layer nor --map may be."""
    if args.weights is None:
        if args.layer is not None or args.map is not None:
            raise CliError("--layer and --map select tensors of a --weights file; give --weights FILE")
        return False
    shape_opts = [f"--{k}" for k in ("H", "I", "batch", "seed") if getattr(args, k) is not None]
    if shape_opts:
        raise CliError(f"{', '.join(shape_opts)} cannot be used with --weights (the arrays give the shape)")
    return True


def _compile_from_args(args):
    from sim.harness.compiled import from_example, from_weights
    cfg = TileConfig.load(args.config or "default", args.set)
    preset = config_name(args.config, args.set)       # names the output directory
    if _weights_given(args):
        return from_weights(args.weights, cfg, kind=args.kind, activation=args.activation, preset=preset,
                            layer=args.layer, mapping=args.map)
    return from_example(cfg, **_shape(args), activation=args.activation, preset=preset)


FFN_OPTIONS = ("kind", "H", "I", "batch", "activation", "seed", "weights", "layer", "map", "out")   # of _ffn_options


def _given(args, names) -> list[str]:
    """The options among ``names`` (argparse dests whose default is None) the command line gave."""
    return [f"--{k}" for k in names if getattr(args, k) is not None]


def _load_or_compile(args):
    """``(CompiledFfn or None, Program, directory)`` from ``args.program`` or the FFN options
    (then compiled and saved to ``--out``).  A bare program JSON (any ``Program.to_json``),
    or a directory of one without a manifest, gives no CompiledFfn."""
    from sim.harness.compiled import MANIFEST_FILE, PROGRAM_FILE, CompiledFfn, load_program
    if args.program is None:
        c = _compile_from_args(args)
        out = args.out or Path("build") / "lpu" / c.name
        c.save(out)
        print(f"compiled {c.name} -> {out}/", file=args.human)
        return c, c.program, out
    given = _given(args, FFN_OPTIONS)
    if given:
        raise CliError(f"give either a compiled program directory ({args.program}) or FFN options "
                       f"({', '.join(given)}), not both")
    path = Path(args.program)
    if path.is_file() and path.name not in (PROGRAM_FILE, MANIFEST_FILE):
        c, prog, d = None, load_program(path), path.parent
    else:
        d = path.parent if path.name in (PROGRAM_FILE, MANIFEST_FILE) else path
        bare = (d / PROGRAM_FILE).exists() and not (d / MANIFEST_FILE).exists()
        c = None if bare else CompiledFfn.load(d)
        prog = load_program(d / PROGRAM_FILE) if bare else c.program
    if args.config is not None or args.set:
        if TileConfig.load(args.config or "default", args.set) != prog.config:
            given = " ".join([f"--config {args.config or 'default'}"] + [f"--set {x}" for x in args.set])
            raise CliError(f"{given} does not match the tile {path} was compiled for")
    return c, prog, d


# ---- subcommands -----------------------------------------------------------------------------
def cmd_compile(args) -> int:
    from sim.harness.compiled import summary_rows
    if args.fit:
        if args.out is not None:
            raise CliError("--fit prints a configuration and compiles nothing: leave out --out")
        base = TileConfig.load(args.config or "default", args.set)
        return _print_fit(args, _example_from_args(args, dtype=base.mxm_dtype), base, 1)
    c = _compile_from_args(args)
    out = args.out or Path("build") / "lpu" / c.name
    files = c.save(out)
    if args.json:
        _print_json({"name": c.name, "dir": str(out), "files": files, "source": c.source,
                     **c.manifest.summary()})
        return EXIT_OK
    print(f"compiled {c.name} -> {out}/")
    rows = summary_rows(c)
    width = max(len(label) for label, _ in rows)
    for label, text in rows:
        print(f"  {label:<{width}}  {text}")
    print(f"next: lpu sim {out}   |   lpu show {out} --chart {Path(out) / 'schedule.svg'}")
    return EXIT_OK


def _testbench_failed(e: RuntimeError, args, setup_errors: tuple = (), **fields) -> int:
    """A run whose testbench itself failed (timeout, crash): FAIL with its message (and
    JSON with ``fields``); a setup problem (``SimSetupError`` or ``setup_errors``) is
    re-raised for the caller's one-line error."""
    from sim.harness.runner import SimSetupError
    if isinstance(e, (SimSetupError, *setup_errors)):
        raise e
    print(f"FAIL: {e}", file=args.human)
    if args.json:
        _print_json({**fields, "passed": False, "simulator": args.sim, "error": str(e)}, indent=None)
    return EXIT_FAIL


def _run_on_rtl(args, run, expected: list | None = None, setup_errors: tuple = (), to_json=None, **fields) -> int:
    """``run(progress)``, a testbench run with progress lines on stderr unless ``--quiet``
    (``expected``: each job's predicted cycles), and its exit status: the report's verdict,
    the report (``to_json`` of it) printed as JSON with ``--json``; a testbench that failed
    is :func:`_testbench_failed` with ``fields``."""
    from sim.harness.progress import ProgressPrinter
    progress = None if args.quiet else ProgressPrinter(args.sim, stream=sys.stderr, expected=expected)
    try:
        report = run(progress)
    except RuntimeError as e:
        return _testbench_failed(e, args, setup_errors, **fields)
    if args.json:
        _print_json(report if to_json is None else to_json(report))
    return EXIT_OK if report["passed"] else EXIT_FAIL


def _checked(prog, args) -> None:
    """The static program checker (``firmware_gen.check``) before the host loads ``prog``:
    a problem is one error naming it (and how many more), unless ``--unchecked``."""
    from firmware_gen.check import check_program
    problems = check_program(prog)
    if problems and not args.unchecked:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise CliError(f"the program fails the static check: {problems[0]}{more}; --unchecked runs it anyway")
    for p in problems:
        print(f"warning: {p}", file=args.human)


def cmd_sim(args) -> int:
    from firmware_gen.golden import archmodel

    from sim.flows.ffn import run_ffn_on_rtl, run_program_on_rtl
    from sim.harness.waves import WavesError
    if args.copy:
        ignored = (["DIR"] * (args.program is not None) + _given(args, [k for k in FFN_OPTIONS if k != "seed"])
                   + ["--unchecked"] * args.unchecked + ["--json"] * args.json)
        if ignored:
            raise CliError(f"--copy runs its own program and prints a table: leave out {', '.join(ignored)}")
        from sim.flows.ffn import run_copy
        return run_copy(TileConfig.load(args.config or "default", args.set), args.sim, _shape(args)["seed"],
                        args.waves)
    c, prog, d = _load_or_compile(args)
    _checked(prog, args)

    def run(progress):
        rtl, what = (run_program_on_rtl, prog) if c is None else (run_ffn_on_rtl, c)
        return rtl(what, args.sim, args.waves, waves_dir=d / "waves" if args.waves else None, progress=progress,
                   out=args.human, checked=not args.unchecked)

    return _run_on_rtl(args, run, [c.manifest.cycles if c else archmodel.run(prog).cycles], (WavesError,),
                       lambda report: {**report, "program_dir": str(d)}, program_dir=str(d))


def cmd_asm(args) -> int:
    from firmware_gen.program import Program
    src = Path(args.file)
    if not src.is_file():
        raise CliError(f"{src} is not a file of assembly text")
    prog = Program.assemble(TileConfig.load(args.config, args.set), src.read_text())
    out = Path(args.out or Path("build") / "lpu" / src.stem)
    out.mkdir(parents=True, exist_ok=True)
    (out / "program.json").write_text(prog.to_json())
    from firmware_gen.check import check_program
    problems = check_program(prog)
    print(f"assembled {src} -> {out}/program.json ({sum(len(q) for q in prog.queues.values())} instructions, "
          f"{args.config} tile); static check: {'clean' if not problems else f'{len(problems)} problem(s)'}",
          file=args.human)
    for p in problems:
        print(f"  {p}", file=args.human)
    if args.json:
        _print_json({"program": str(out / "program.json"), "problems": [str(p) for p in problems]})
    return EXIT_OK


def cmd_show(args) -> int:
    import time

    from firmware_gen.chart import FORMATS, schedule_chart
    if args.chart is not None and args.chart.suffix.lower() not in FORMATS:    # before any work
        raise CliError(f"cannot write a chart as {args.chart.suffix or 'a file without extension'!r} "
                       f"({args.chart.name}); use a name ending in {' or '.join(FORMATS)}")
    c, prog, d = _load_or_compile(args)
    bare = args.program is not None and Path(args.program).is_file() and c is None     # a program .json
    chart = args.chart or (Path(args.program).with_suffix(".svg") if bare else d / "schedule.svg")
    title = None
    if c is not None:
        m, cfg = c.manifest, c.config
        title = (f"{m.kind} FFN ({c.source.get('activation', '?')}) H={m.H} I={m.I} batch {m.batch} on the "
                 f"{cfg.lanes}-lane tile: {m.cycles:,} cycles predicted, SRAM-read bound {m.sram_bound:,}, "
                 f"MAC bound {m.mac_bound:,}, efficiency {m.efficiency:.3f}")
    t0 = time.perf_counter()
    path = schedule_chart(prog, chart, title=title, window=args.window)
    secs = time.perf_counter() - t0
    if args.asm:
        print(prog.disassemble(), end="", file=args.human)
    if args.json:
        _print_json({"chart": str(path), "bytes": path.stat().st_size, "program_dir": str(d),
                     "seconds": round(secs, 2)})
    else:
        print(f"chart: {path} ({path.stat().st_size:,} bytes, {secs:.1f} s)")
    return EXIT_OK


def cmd_tray(args) -> int:
    import time
    from collections import Counter

    from firmware_gen.chart import tray_chart, tray_transfers

    from sim.flows.tray import TRAY_H, TRAY_I, compile_tray, run_tray_on_rtl, tray_tile_config
    if args.window is not None and args.chart is None:
        raise CliError("--window limits the picture: give --chart FILE with it")
    base = tray_tile_config(args.config) if args.config in PRESETS else TileConfig.load(args.config)
    base = base.with_overrides(args.set)
    shape = _shape(args, (TRAY_H, TRAY_I))
    example = (_example_from_args(args, (TRAY_H, TRAY_I), base.mxm_dtype)      # else compile_tray draws it
               if _weights_given(args) or args.fit or args.activation else None)
    if args.fit:
        return _print_fit(args, example, base, args.tiles)
    ct = compile_tray(tiles=args.tiles, preset=config_name(args.config, args.set), clock_seed=args.clock_seed,
                      base=base, example=example, **shape)
    man = ct.manifest
    chart = {}
    if args.chart is not None:
        title = (f"{ct.kind} FFN H={ct.H} I={ct.I}{'' if ct.batch == 1 else f' batch {ct.batch}'} on {ct.tiles} "
                 f"{ct.preset} tiles: {man.cycles:,} SAC cycles predicted"
                 + (f" (one tile: {ct.single:,})" if ct.single else "")
                 + f", {man.transfers} h vectors over C2C links, SEND to RECV >= {man.min_distance} cycles")
        t0 = time.perf_counter()
        path = tray_chart(ct.programs, args.chart, man, title=title, window=args.window)
        chart = {"chart": str(path), "bytes": path.stat().st_size, "seconds": round(time.perf_counter() - t0, 2)}
        print(f"chart: {chart['chart']} ({chart['bytes']:,} bytes, {chart['seconds']:.1f} s)", file=args.human)
    if args.no_run:
        for line in ct.describe():
            print(line, file=args.human)
        moves = tray_transfers(ct.programs, ct.topo.peer)
        sent, got = Counter(x.src for x in moves), Counter(x.dst for x in moves)
        print(f"\n{'tile':>4} {'predicted cycles':>16} {'output writes':>13} {'vectors sent':>12} {'received':>8}",
              file=args.human)
        for t, m in enumerate(man.tile):
            print(f"{t:>4} {m.cycles:>16} {len(m.writes):>13} {sent[t]:>12} {got[t]:>8}", file=args.human)
        print(f"\ncycles (SAC, last tile): {man.cycles}"
              + (f"; one tile: {ct.single} ({ct.single / man.cycles:.2f}x)" if ct.single else "")
              + f"; link capacity used: {man.c2c_share:.1%}", file=args.human)
        if args.json:
            _print_json({"ran": False, **ct.summary(), "per_tile": [
                {"tile": t, "predicted_cycles": m.cycles, "output_writes": len(m.writes), "vectors_sent": sent[t],
                 "vectors_received": got[t]} for t, m in enumerate(man.tile)], **chart})
        return EXIT_OK
    return _run_on_rtl(args, lambda progress: run_tray_on_rtl(ct, args.sim, progress=progress, out=args.human,
                                                              repeat=args.repeat),
                       [man.cycles] * args.repeat, to_json=lambda report: {"ran": True, **report, **chart},
                       ran=True, **ct.summary())


def _routing_arg(text: str):
    """A named routing (moe_tray.ROUTINGS, or 'router') or explicit expert indices:
    tokens separated by ';', a token's experts by ','."""
    from firmware_gen.compiler.moe_tray import ROUTINGS
    if text in (*ROUTINGS, "router"):
        return text
    try:
        return [[int(e) for e in tok.split(",")] for tok in text.split(";")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"a routing is one of router, {', '.join(ROUTINGS)} or expert indices "
                                         f"like 0,5;2,7 (tokens by ';', experts by ','), got {text!r}") from None


def cmd_moe(args) -> int:
    import types

    import numpy as np

    from firmware_gen.chart import tray_chart
    from firmware_gen.golden.moe import MoeExample, MoeLayer, MoeSpec, quantise_input

    from sim.flows.moe import compile_moe_example, run_moe_on_rtl
    from sim.flows.tray import tray_tile_config
    base = tray_tile_config(args.config) if args.config in PRESETS else TileConfig.load(args.config)
    base = base.with_overrides(args.set)
    example = None
    if args.weights is not None:
        from firmware_gen.host.weights import load_moe
        w = load_moe(args.weights, args.layer, config=args.model_config, batch=args.batch)
        layer = MoeLayer.from_weights(w, **({"top_k": args.top_k} if args.top_k else {}))
        x = np.asarray(w.x, float)[: args.batch]
        spec = MoeSpec.from_float(layer, x_calibration=np.asarray(w.x, float), dtype=base.mxm_dtype)
        example = MoeExample(spec, layer, x, quantise_input(spec, x))
    elif args.layer is not None or args.model_config is not None:
        raise CliError("--layer and --model-config choose what to read from --weights FILE: give --weights too")
    routings = ("router", "spread", "packed", "random") if args.routing is None else (
        (args.routing,) if isinstance(args.routing, str) else ())
    cm = compile_moe_example(E=args.experts, top_k=args.top_k or 2, shared=args.shared, H=args.H, I=args.I,
                             tokens=args.batch, tiles=args.tiles, capacity=args.capacity,
                             seed=args.seed, cfg=base, routings=routings,
                             forced=args.routing if isinstance(args.routing, list) else None,
                             clock_seed=args.clock_seed, example=example, mapping=args.mapping)
    mt, man = cm.mt, cm.mt.manifest()
    for line in cm.describe():
        print(line, file=args.human)
    chart = {}
    if args.chart is not None:
        name = next(iter(cm.routings))
        asg = cm.rounds(name)[0]
        spans = [(t, *span, f"token {b}: expert {e}" if mt.mapping == "ep" else f"t{b} e{e}")
                 for (t, b, j), e in sorted(asg.items()) if (span := mt.slot_span(t, b, j)) is not None]
        done = types.SimpleNamespace(tile=[types.SimpleNamespace(cycles=c) for c in man.cycles])
        title = (f"MoE: {cm.example.spec.E} experts H={cm.example.spec.H} I={cm.example.spec.I} top-"
                 f"{cm.example.spec.top_k} on {cm.tiles} tiles, routing '{name}': {man.cycles_max:,} SAC cycles "
                 "for every routing within capacity")
        path = tray_chart(cm.programs, args.chart, done, title=title, window=args.window, spans=spans)
        chart = {"chart": str(path), "bytes": path.stat().st_size}
        print(f"chart: {path} ({chart['bytes']:,} bytes)", file=args.human)
    routing_rows = {name: cm.rounds(name) for name in cm.routings}
    if args.no_run:
        print(f"\n{'routing':<10} {'rounds':>6}  experts per token", file=args.human)
        for name, rs in routing_rows.items():
            print(f"{name:<10} {len(rs):>6}  " + "; ".join(",".join(map(str, row)) for row in cm.routings[name]),
                  file=args.human)
        if args.json:
            _print_json({"ran": False, **man.summary(),
                         "routings": {n: np.asarray(v).tolist() for n, v in cm.routings.items()},
                         "rounds": {n: len(r) for n, r in routing_rows.items()}, **chart})
        return EXIT_OK

    def to_json(report):            # without the raw observations
        runs = [{k: v for k, v in r.items() if k != "observed"} for r in report["runs"]]
        return {"ran": True, **report, "runs": runs, **chart}

    return _run_on_rtl(args, lambda progress: run_moe_on_rtl(cm, args.sim, progress=progress, out=args.human),
                       [man.cycles_max] * sum(len(r) for r in routing_rows.values()), to_json=to_json, ran=True,
                       **man.summary())


DECODE_TILE = ("mem_depth=256", f"iq_depth={TileConfig.TRAY_IQ_DEPTH}", "vxm_param_depth=32")   # the tiny tile, deep enough for 2 layers


def cmd_decode(args) -> int:
    import numpy as np

    from sim.flows.decode import check, decode_setup, run_golden, run_rtl
    from sim.harness.progress import ProgressPrinter
    if args.model != "synthetic":
        raise CliError(f"--model {args.model}: only 'synthetic' is built in (no registry package ships a small "
                       "trained decoder; all-MiniLM-L6-v2 run as a decoder, too large for one tile, is measured on "
                       "the golden model by make bench: docs/afd.md)")
    if args.H % args.heads:
        raise CliError(f"--H {args.H} must be a multiple of --heads {args.heads} (each head takes H / heads of the "
                       "model's width)")
    if max(args.prompt) >= args.vocab:
        raise CliError(f"--prompt: token id {max(args.prompt)} is outside the vocabulary (0..{args.vocab - 1}, "
                       f"--vocab {args.vocab})")
    base = TileConfig.load(args.config, (*(DECODE_TILE if args.config == "tiny" else ()), *args.set))
    model = {"vocab": args.vocab, "H": args.H, "I": args.I, "layers": args.layers, "heads": args.heads,
             "seed": args.seed}
    tray = args.experts or (args.tiles or 1) > 1
    if args.clock_seed is not None and (args.no_run or not tray):
        raise CliError("--clock-seed draws the clocks of a tray on the RTL: give --tiles 2|4|8 (or --experts) "
                       "and leave out --no-run")
    if tray:                     # one layer on the tray at a time: the preset's depths do
        args.tiles = args.tiles or 4
        args.clock_seed = 1 if args.clock_seed is None else args.clock_seed
        return _decode_tray(args, TileConfig.load(args.config, args.set), model)
    setup = decode_setup(base.to_dict(), model, args.prompt, args.tokens, args.out_scale_per_channel)
    rm = setup.resident
    print(f"model: synthetic decoder, {args.layers} layers, H={args.H}, I={args.I}, {args.heads} heads, vocab "
          f"{args.vocab} (seed {args.seed}); FFN scales calibrated once on the fixed calibration text"
          + (", one output scale per channel" if args.out_scale_per_channel else ""), file=args.human)
    print(f"tile: every layer resident ({rm.loaded_bytes()['weights']:,} bytes of weights, "
          f"{rm.loaded_bytes()['instructions']:,} of instructions, loaded once); per layer "
          + ", ".join(f"{ly.manifest.cycles} cycles" for ly in rm.layers) + " (compiler)", file=args.human)
    golden = run_golden(setup)
    runs, engine = golden, "golden model"
    if not args.no_run:
        try:
            expected = [r["cycles"] for r in golden["runs"]]
            runs = run_rtl(setup, args.sim, None if args.quiet else ProgressPrinter(args.sim, expected=expected),
                           len(expected))
        except RuntimeError as e:
            return _testbench_failed(e, args, ran=True)
        engine = f"RTL ({args.sim})"
    problems = check(setup, runs, golden)
    L, P = len(rm.layers), len(setup.prompt)
    rows = []
    x_bytes = sum(len(v) for ly in rm.layers for r in ly.x_image(np.zeros(args.H)).values() for v in r.values())
    y_bytes = sum(len(ly.manifest.outputs) * base.lanes for ly in rm.layers)
    kv = [2 * 4 * args.H * L * (pos + 1) for pos in range(P + args.tokens)]  # read per token: float32 K, V, all layers
    per_pos = [runs["runs"][i * L:(i + 1) * L] for i in range(P + args.tokens)]
    tokens = list(setup.prompt) + list(runs["tokens"])
    print(f"\n{'pos':>4} {'token':>6} {'tray cycles':>11} {'tray us':>8} {'x/y bytes':>10} {'KV bytes':>9} "
          f"{'GPU est. ns':>11}   ({engine}; tray time at {args.clock_mhz:g} MHz, GPU: KV bytes at "
          f"{args.hbm_gbs:g} GB/s)", file=args.human)
    for pos, rs in enumerate(per_pos):
        cyc = sum(r["cycles"] for r in rs)
        nxt = tokens[pos + 1] if pos + 1 < len(tokens) else None
        row = {"position": pos, "input_token": tokens[pos], "next_token": nxt, "tray_cycles": cyc,
               "tray_us": cyc / args.clock_mhz, "bytes_to_tray": x_bytes, "bytes_from_tray": y_bytes,
               "kv_bytes": kv[pos], "gpu_est_ns": kv[pos] / args.hbm_gbs}
        rows.append(row)
        print(f"{pos:>4} {tokens[pos]:>6} {cyc:>11} {row['tray_us']:>8.3f} {x_bytes:>4}/{y_bytes:<5} "
              f"{kv[pos]:>9} {row['gpu_est_ns']:>11.3f}", file=args.human)
    same = len({r["tray_cycles"] for r in rows}) == 1
    chart = {}
    if args.chart is not None:
        from firmware_gen.chart import loop_chart
        tray_us = [ly.manifest.cycles / args.clock_mhz for ly in rm.layers]
        if args.chart_host == "measured":
            host_us = list(np.median(np.array(golden["host_segments_s"]), axis=0) * 1e6)
            what = "host: this run's numpy time per step (median over positions)"
        else:
            per_layer = kv[-1] / L / (args.hbm_gbs * 1e3)       # us to read one layer's cache at the last position
            host_us = [per_layer] * L + [0.0]
            what = (f"host: the KV cache of one layer at position {len(kv) - 1} read at {args.hbm_gbs:g} GB/s "
                    "(an estimate)")
        path, rates = loop_chart(host_us, tray_us, args.chart, tokens=2,
                                 title=f"decode loop, {L} layers: tray {sum(tray_us):.3f} us per token at "
                                       f"{args.clock_mhz:g} MHz; {what}")
        chart = {"chart": str(path), "tokens_per_s_batch1": round(rates[1]), "tokens_per_s_two_microbatches":
                 round(rates[2])}
        print(f"chart: {path} (batch 1: {rates[1]:,.0f} tokens/s; two micro-batches: {rates[2]:,.0f} tokens/s)",
              file=args.human)
    print(f"\ngenerated: {runs['tokens']}", file=args.human)
    print(f"tray cycles identical for every token: {'yes' if same else 'NO'}; host time "
          f"{golden['host_s'] * 1e3:.1f} ms in all (golden-model run, numpy)", file=args.human)
    for p in problems[:10]:
        print(f"  {p}", file=args.human)
    ok = not problems and same
    print("PASS" if ok else "FAIL", file=args.human)
    if args.json:
        _print_json({"ran": not args.no_run, "engine": engine, "tokens": runs["tokens"], "positions": rows,
                     "layer_cycles": [ly.manifest.cycles for ly in rm.layers], "loaded_once": rm.loaded_bytes(),
                     "loaded_per_run": runs.get("loaded"), "problems": problems, "passed": ok, **chart})
    return EXIT_OK if ok else EXIT_FAIL


def _decode_tray(args, base, model) -> int:
    """``lpu decode --experts E`` (every FFN a MoE layer) or ``--tiles N`` (a dense model):
    each FFN run on a tray of ``--tiles`` tiles by the system golden model
    (``decode.run_moe_tray``, ``decode.run_dense_tray``)."""
    from firmware_gen.compiler.ffn import CompileError
    from firmware_gen.host.decoder import calibrate, synthetic

    from sim.flows.decode import run_dense_tray_any, run_moe_tray, run_tray_rtl
    from sim.harness.progress import ProgressPrinter
    engine = "golden model" if args.no_run else f"RTL on {args.sim}, every tile on its own clock"
    if args.experts:
        if args.experts % args.tiles:
            raise CliError(f"--experts {args.experts} must be a multiple of --tiles {args.tiles} (each tile holds the "
                           "same number of experts)")
        if not 1 <= args.top_k <= args.experts:
            raise CliError(f"--top-k {args.top_k} must be in 1..--experts ({args.experts})")
        if args.shared > 1:
            raise CliError(f"--shared {args.shared}: a tray runs at most one shared expert (fuse them into one FFN)")
        model = dict(model, experts=args.experts, top_k=args.top_k, shared=args.shared)
        print(f"model: synthetic MoE decoder, {args.layers} layers, H={args.H}, {args.experts} experts of I={args.I}, "
              f"top-{args.top_k}, {args.shared} shared, {args.heads} heads, vocab {args.vocab} (seed {args.seed}); "
              f"every MoE layer on {args.tiles} {args.config} tiles ({engine}; each run loads its layer)",
              file=args.human)
        golden, what = run_moe_tray, "the MoE layer does not fit"
    else:
        if args.out_scale_per_channel:
            raise CliError("--out-scale-per-channel: not with --tiles (a tray's layers use one output scale per FFN)")
        print(f"model: synthetic decoder, {args.layers} layers, H={args.H}, I={args.I}, {args.heads} heads, vocab "
              f"{args.vocab} (seed {args.seed}); every FFN on {args.tiles} {args.config} tiles ({engine})",
              file=args.human)
        golden, what = run_dense_tray_any, "an FFN does not fit"
    try:
        g = (golden(calibrate(synthetic(**model)), args.prompt, args.tokens, base, args.tiles) if args.no_run
             else run_tray_rtl(model, args.prompt, args.tokens, base, args.tiles, args.sim, args.clock_seed,
                               progress=None if args.quiet else ProgressPrinter(args.sim)))
    except CompileError as e:
        raise CliError(f"{what} the tray: {e}") from None
    except RuntimeError as e:
        return _testbench_failed(e, args, ran=True)
    if g["engine"] == "RTL":
        print(f"clocks (--clock-seed {args.clock_seed}): tile ppm " + ", ".join(f"{p:+.1f}" for p in g["ppm"])
              + "; wire latencies " + ", ".join(f"{a}-{b} {n}" for a, b, n in g["wire_latencies"]) + " cycles",
              file=args.human)
    if not args.experts and g["resident"]:
        print(f"tray: every layer resident ({g['loaded_once_bytes']:,} bytes of MEM images loaded once); per "
              "run only x crosses", file=args.human)
    elif not args.experts:
        print("tray: each run loads its layer ("
              + (f"the layers are not resident: {g['not_resident']}" if g.get("not_resident")
                 else "the RTL testbench reloads every run") + ")", file=args.human)
    return _decode_tray_report(args, g)


def _decode_tray_report(args, g: dict) -> int:
    """Per position the tray's program and wall cycles (and each MoE layer's experts)."""
    from sim.flows.decode import per_position
    L = args.layers
    rows = []
    print(f"\n{'pos':>4} {'token':>6} {'tray cycles':>11} {'wall':>6} {'wall us':>8}  "
          f"{'experts per layer   ' if args.experts else ''}(SAC cycles; wall: HAC cycles from each run's "
          f"HAC read to done, at {args.clock_mhz:g} MHz)", file=args.human)
    tokens = list(args.prompt) + list(g["tokens"])
    rtl = g["engine"] == "RTL"          # the RTL's measured cycles, else the golden model's
    cycles = per_position(g["runs"], L, "rtl_cycles" if rtl else "cycles")
    walls = per_position(g["runs"], L, "rtl_wall_cycles" if rtl else "wall_cycles")
    for pos, (cyc, wall) in enumerate(zip(cycles, walls)):
        rs = g["runs"][pos * L:(pos + 1) * L]
        rows.append({"position": pos, "input_token": tokens[pos], "tray_cycles": cyc, "wall_cycles": wall,
                     "tray_us": wall / args.clock_mhz,
                     **({"experts": [r["experts"] for r in rs]} if args.experts else {}),
                     "bytes_to_tray": sum(r["bytes_in"] for r in rs),
                     "bytes_from_tray": sum(r["bytes_out"] for r in rs)})
        print(f"{pos:>4} {tokens[pos]:>6} {cyc:>11} {wall:>6} {wall / args.clock_mhz:>8.3f}  "
              + "  ".join(",".join(map(str, r.get("experts", []))) for r in rs), file=args.human)
    same = len({(r["tray_cycles"], r["wall_cycles"]) for r in rows}) == 1
    print(f"\ngenerated: {g['tokens']}", file=args.human)
    print(f"tray cycles identical for every token: {'yes' if same else 'NO'}", file=args.human)
    for p in g["problems"][:10]:
        print(f"  {p}", file=args.human)
    ok = not g["problems"] and same
    print("PASS" if ok else "FAIL", file=args.human)
    if args.json:
        _print_json({"ran": g["engine"] == "RTL", "engine": f"{g['engine']} (tray)", "tiles": args.tiles,
                     "tokens": g["tokens"], **{k: g[k] for k in ("clock_seed", "ppm", "wire_latencies") if k in g},
                     "positions": rows, "problems": g["problems"], "passed": ok})
    return EXIT_OK if ok else EXIT_FAIL


def cmd_c2c(args) -> int:
    from sim.flows.c2c import figures, parse_inject, run_c2c
    if args.figures:
        if args.json:
            raise CliError("--figures writes pictures and no report: leave out --json")
        figures(args.figures, args.sim)
        print(f"wrote {args.figures / 'c2c-timing.png'} and {args.figures / 'c2c-drift.png'}", file=args.human)
        return EXIT_OK
    inject = [parse_inject(x) for x in args.inject]       # a malformed spec: ConfigError, one line
    return _run_on_rtl(args, lambda progress: run_c2c(args.sim, tuple(args.ppm), args.latency, args.vectors,
                                                      args.spread, args.seed, args.plot, args.beyond_spec,
                                                      out=args.human, progress=progress, inject=inject))


def cmd_bench(args) -> int:
    from sim.bench import suite as bench
    if not args.json:
        return bench.run(args)
    with contextlib.redirect_stdout(sys.stderr):
        code = bench.run(args)
    if (args.out / "bench.json").exists() and code != EXIT_USAGE:
        print((args.out / "bench.json").read_text(), end="")
    return code


def cmd_synth(args) -> int:
    from hdl.flows import synth
    name = config_name(args.config, args.set)
    out = args.out or synth.ROOT / "build" / f"synth-{args.board}-{name}"
    print(f"synthesising the {name} tile for {args.board} in {out} ...", file=args.human, flush=True)
    report = synth.synthesise(TileConfig.load(args.config, args.set), args.board, Path(out), args.baud,
                              seed=args.seed)
    if args.json:
        _print_json(report)
    else:
        print(synth.markdown(report))
        print(f"reports{' and bitstream' if report['placed'] else ''} in {out}")
    problem = synth.misfit(report)
    if problem:
        print(f"lpu synth: {problem}", file=sys.stderr)
    return EXIT_OK if report["fits"] else EXIT_FAIL


# ---- the parser ------------------------------------------------------------------------------
def _config_arg(value: str) -> str:
    """--config: a preset name, or a TOML or JSON file of TileConfig fields (checked when parsed)."""
    try:
        TileConfig.load(value)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    return value


def config_name(value: str | None, sets=()) -> str:
    """What names a configuration in output directories: the preset or the file's stem,
    and a digest of the overrides when there are any."""
    import hashlib
    name = value or "default"
    name = name if name in PRESETS else Path(name).stem
    return name + (f"+{hashlib.sha1(' '.join(sets).encode()).hexdigest()[:6]}" if sets else "")


def _finite_json(v):
    """``v`` with every NaN or infinite float replaced by None (strict JSON has neither)."""
    if isinstance(v, float):
        return v if math.isfinite(v) else None
    if isinstance(v, dict):
        return {k: _finite_json(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_finite_json(x) for x in v]
    return v


def _print_json(obj, indent=1):
    print(json.dumps(_finite_json(obj), indent=indent, allow_nan=False))


def _subcommand(sub, name: str, func, **kw) -> argparse.ArgumentParser:
    """The parser of subcommand ``name``, which ``func(args)`` runs."""
    p = sub.add_parser(name, formatter_class=_Formatter, **kw)
    p.set_defaults(func=func)
    return p


def build_parser() -> argparse.ArgumentParser:
    from hdl.flows.synth import BOARDS, NEXTPNR_SEED, NEXTPNR_SEEDS

    from sim.flows.c2c import c2c_config
    from firmware_gen.golden.tables import ACTIVATIONS

    from sim.flows.tray import TRAY_H, TRAY_I
    c2c_cfg = c2c_config()
    ap = _Parser(prog="lpu", formatter_class=_Formatter,
                 description="Compile FFNs for the LPU tile, run them on its RTL, picture their schedules.",
                 epilog="Start with:  lpu show --config tiny --H 8 --I 16 --chart schedule.svg\n"
                        "Each subcommand has its own --help.")
    ap.add_argument("--version", action="version", version=f"lpu {_version()}")
    sub = ap.add_subparsers(dest="command", metavar="SUBCOMMAND", required=True)

    p = _subcommand(sub, "compile", cmd_compile, help="compile an FFN to a program directory",
                    description="Compile an FFN (random weights from --seed, or --weights FILE.npz) for the tile.\n"
                                "Writes DIR/program.json (the program: queues, MEM images, VXM parameters)\n"
                                "and DIR/manifest.json (the compiler's summary and every predicted output\n"
                                "write, with the reference output), and prints shape, predicted cycles,\n"
                                "bounds and efficiency.",
                    epilog=NPZ_HELP + "\nexamples:\n  lpu compile --kind classic --H 64 --I 256\n"
                           "  lpu compile --config tiny --H 8 --I 16 --batch 2 --out /tmp/ffn\n"
                           "  lpu compile --weights ffn.npz --json")
    _ffn_options(p)
    p.add_argument("--fit", action="store_true",
                   help="print the smallest tile (power-of-two depths, the rest as --config) that holds\n"
                        "the FFN, as a TOML file for --config; compiles nothing else")
    p.add_argument("--json", action="store_true", help="print the summary as JSON on stdout")

    p = _subcommand(sub, "sim", cmd_sim, help="run a compiled FFN on the RTL and check it",
                    description="Run an FFN on the RTL tile (compiling it first unless DIR is given) and check\n"
                                "every output write's cycle and value against the compiler's prediction and\n"
                                "the golden model, the cycle count and busy counters, the output bit-exact\n"
                                "against the integer FFN; report the error against the float FFN.\n"
                                "Exit status 0 = PASS, 1 = FAIL, 2 = bad arguments or setup.",
                    epilog="Progress (jobs done, cycles, rate, a heartbeat on long runs) goes to stderr.\n"
                           "--waves writes DIR/waves/<sim>.fst and a GTKWave view DIR/waves/<sim>.gtkw\n"
                           "(signals grouped by slice): open it with  gtkwave DIR/waves/<sim>.gtkw\n"
                           "(Verilator's FST needs lz4 headers: sudo apt-get install liblz4-dev).\n\n"
                           "examples:\n  lpu sim --config tiny --H 8 --I 16\n  lpu compile --out /tmp/ffn && "
                           "lpu sim /tmp/ffn --sim icarus --waves\n  lpu sim /tmp/ffn --json > result.json")
    p.add_argument("program", nargs="?", type=Path, metavar="DIR",
                   help="a directory written by lpu compile (else compile from the FFN options)")
    _ffn_options(p)
    p.add_argument("--waves", action="store_true", help="record waveforms and write a GTKWave view")
    p.add_argument("--unchecked", action="store_true",
                   help="run a program that fails the static check anyway (its problems are printed)")
    p.add_argument("--copy", action="store_true",
                   help="instead of an FFN: the MEM-to-MEM data-movement demo (sweeps across the tile)")
    _rtl_run_options(p, " (the table goes to stderr)")

    p = _subcommand(sub, "asm", cmd_asm, help="assemble a hand-written program",
                    description="Assemble text (``[SLICE]`` headers, one instruction per line, # comments;\n"
                                "docs/isa.md) into DIR/program.json for lpu sim and lpu show, and run the\n"
                                "static checker on it (firmware_gen/check.py: values lost on a stream,\n"
                                "reads of undriven streams, addresses, queue sizes).",
                    epilog="A program directory without manifest.json runs against the golden model alone:\n"
                           "  lpu asm copy.s --config tiny --out /tmp/copy && lpu sim /tmp/copy --sim icarus")
    p.add_argument("file", type=Path, metavar="FILE", help="assembly text")
    _config_options(p, "tiny", "tiny")
    p.add_argument("--out", type=Path, default=None, metavar="DIR", help="directory (default: build/lpu/<FILE stem>)")
    p.add_argument("--json", action="store_true", help="print the program path and problems as JSON")

    p = _subcommand(sub, "show", cmd_show, help="draw the schedule of a program",
                    description="Draw a compiled program's schedule (SVG or PNG by the file name):\n"
                                "  issue: one row per slice, west to east, a bar per issued data\n"
                                "         instruction coloured by opcode, on the cycle it issues;\n"
                                "  east- and west-flowing stream occupancy: at each position and cycle,\n"
                                "         how many streams carry a live value (one a slice downstream\n"
                                "         still reads: from the position after its driver to its last reader).\n"
                                "DIR may also be any program JSON (Program.to_json), e.g. a scheduler's copies.",
                    epilog="examples:\n  lpu show build/lpu/swiglu-H128-I512-b1-s1\n"
                           "  lpu show --kind classic --H 64 --I 128 --chart classic.png\n"
                           "  lpu show /tmp/ffn --window 0:200 --chart start.svg")
    p.add_argument("program", nargs="?", type=Path, metavar="DIR",
                   help="a directory written by lpu compile, or a program .json (else compile from the FFN options)")
    _ffn_options(p)
    p.add_argument("--chart", type=Path, default=None, metavar="FILE",
                   help="picture to write, .svg or .png (default: DIR/schedule.svg)")
    p.add_argument("--window", type=_window, default=None, metavar="FIRST:LAST",
                   help="only these cycles, e.g. 0:300 (default: the whole program)")
    p.add_argument("--asm", action="store_true", help="also print the program's disassembly")
    p.add_argument("--json", action="store_true", help="print what was written as JSON on stdout")

    p = _subcommand(sub, "tray", cmd_tray, help="an FFN on a tray of 2, 4 or 8 tiles: picture, RTL run",
                    description="Compile an FFN (random weights from --seed) for a tray of tiles linked all-to-all\n"
                                "(firmware_gen/compiler/tray.py: each tile computes 1/N of h, multicasts it over the C2C\n"
                                "links, computes 1/N of y over all of h).  --chart draws the tray's timeline:\n"
                                "one band per tile, SAC cycles across, a row per slice kind (MEM, MXM, VXM,\n"
                                "SXM, C2C) with a bar per issued instruction coloured by opcode, and every C2C\n"
                                "transfer as an arrow from its SEND/SENDM to its RECV.  Unless --no-run, it\n"
                                "then runs on the RTL with every tile on its own clock (random ppm within the\n"
                                "specification, random phases and wire latencies, all from --clock-seed) and checks\n"
                                "per tile every MEM write's cycle and value and the cycle count against the\n"
                                "compiler and the multi-tile golden model, no link fault, and y bit-exact\n"
                                "against the integer FFN.\n"
                                "Exit status 0 = PASS, 1 = FAIL, 2 = bad arguments or an FFN that does not fit.",
                    epilog="Every cycle is SAC time (the program's cycle count, which deskew stalls do not\n"
                           "advance; docs/c2c.md).  Progress goes to stderr; the default tile preset is tiny\n"
                           "so that 8 tiles build in minutes on Verilator (in seconds on Icarus for 2).\n\n"
                           "examples:\n  lpu tray --no-run --config default --H 128 --I 512 --chart tray.svg\n"
                           "  lpu tray --tiles 2 --H 8 --I 16 --sim icarus --json > tray.json\n"
                           "  lpu tray --tiles 2 --sim icarus --repeat 4    (4 clock draws: identical cycles, traces)\n"
                           "  lpu tray --tiles 4 --kind classic --chart tray.png")
    g = p.add_argument_group("tray and FFN")
    g.add_argument("--tiles", type=_tiles, default=8, metavar="N", help="tiles in the tray: 2, 4 or 8 (default: 8)")
    g.add_argument("--kind", choices=("swiglu", "classic"), default=None,
                   help="FFN kind (default: swiglu; with --weights, the file decides)")
    g.add_argument("--H", type=_positive, default=None, metavar="N",
                   help=f"model width H (default: {TRAY_H}, which fits a tray of 2, 4 or 8 tiny tiles)")
    g.add_argument("--I", type=_positive, default=None, metavar="N", help=f"intermediate width I (default: {TRAY_I})")
    g.add_argument("--batch", type=_positive, default=None, metavar="B", help="batch columns, 1 = decode (default: 1)")
    g.add_argument("--seed", type=_nonneg, default=None, help="seed of the random weights and input (default: 1)")
    g.add_argument("--activation", choices=tuple(ACTIVATIONS), default=None,
                   help="activation (default: silu for swiglu, gelu for classic)")
    _weights_options(g)
    g.add_argument("--fit", action="store_true",
                   help="print the smallest tile (power-of-two depths, the rest as --config) on which\n"
                        "every tile of the tray holds its share, as a TOML file for --config; no run")
    g.add_argument("--clock-seed", type=_nonneg, default=1,
                   help="seed of every tile's clock (ppm, phase) and of the wire latencies (default: 1)")
    g.add_argument("--repeat", type=_positive, default=1, metavar="N",
                   help="run the same programs under N clock draws (one build) and print one line per\n"
                        "draw: every tile's ppm and cycles and a digest of all traces (default: 1)")
    _config_options(g, "tiny", "tiny")
    p.add_argument("--chart", type=_picture, default=None, metavar="FILE",
                   help="draw the tray's timeline to FILE, .svg or .png")
    p.add_argument("--window", type=_window, default=None, metavar="FIRST:LAST",
                   help="with --chart: only these SAC cycles (default: the whole program)")
    p.add_argument("--no-run", action="store_true", help="compile (and draw) only; print each tile's prediction")
    _rtl_run_options(p, " (per tile: ppm, cycles observed, predicted and\n"
                        "by the golden model, writes as predicted, link faults; bit_exact, y; the tables go\n"
                        "to stderr)")

    p = _subcommand(sub, "moe", cmd_moe, help="a mixture-of-experts layer on a tray: routings, RTL run",
                    description="Compile a mixture-of-experts layer (random SwiGLU experts and router from --seed,\n"
                                "or --weights) for a tray (firmware_gen/compiler/moe_tray.py, docs/moe.md): every tile holds\n"
                                "E/N experts and reserves --capacity expert slots per token; the shared expert runs\n"
                                "tensor-parallel over the tray.  One program serves every routing: the host loads\n"
                                "base registers with each slot's expert (or off), so only the selected experts'\n"
                                "weights are read, in the same cycles.  Unless --no-run, it runs the routings on the\n"
                                "RTL (the router's own, spread, packed, random; or --routing) and checks per tile\n"
                                "every write, the cycle count and the busy counters against the compiler and the\n"
                                "golden model, and every expert's output bit-exact against moe.moe_int.  A routing\n"
                                "beyond capacity runs in rounds of the same program.\n"
                                "Exit status 0 = PASS, 1 = FAIL, 2 = bad arguments or a layer that does not fit.",
                    epilog="examples:\n  lpu moe --no-run --chart moe.svg\n"
                           "  lpu moe --tiles 4 --experts 8 --top-k 2 --sim icarus\n"
                           "  lpu moe --routing over --capacity 1 --tiles 4 --experts 8   (two rounds)\n"
                           "  lpu moe --no-run --config default --experts 32 --H 64 --I 128 --top-k 4 --json")
    g = p.add_argument_group("layer and tray")
    g.add_argument("--experts", type=_positive, default=8, metavar="E", help="routed experts (default: 8)")
    g.add_argument("--top-k", type=_positive, default=None, metavar="K", help="experts per token (default: 2)")
    g.add_argument("--shared", type=_nonneg, default=1, metavar="S",
                   help="shared experts, 0 or 1 (default: 1)")
    g.add_argument("--mapping", choices=("ep", "tp"), default="ep",
                   help="ep: each tile holds E/N whole experts and reserves --capacity slots per token;\n"
                        "tp: every tile holds 1/N of every expert and runs its share of each selected\n"
                        "one (capacity K, never exceeded; h all-gathered over the links) (default: ep)")
    g.add_argument("--capacity", type=_positive, default=None, metavar="C",
                   help="ep: expert slots per tile and token (default: ceil(K/N) + 1 on a tray, K on one tile)")
    g.add_argument("--H", type=_positive, default=8, metavar="N", help="model width H (default: 8)")
    g.add_argument("--I", type=_positive, default=8, metavar="N", help="each expert's intermediate width (default: 8)")
    g.add_argument("--tiles", type=lambda v: 1 if v == "1" else _tiles(v), default=4, metavar="N",
                   help="tiles: 1, 2, 4 or 8 (default: 4)")
    g.add_argument("--batch", type=_positive, default=1, metavar="T", help="tokens in the run (default: 1)")
    g.add_argument("--seed", type=_nonneg, default=0, help="seed of the random layer and tokens (default: 0)")
    g.add_argument("--routing", type=_routing_arg, default=None, metavar="R",
                   help="run only this routing: router, spread, packed, random, over, or indices like\n"
                        "0,5;2,7 (default: router, spread, packed and random)")
    g.add_argument("--weights", type=Path, default=None, metavar="FILE",
                   help="real expert weights: .safetensors or .npz in the DeepSeek/Qwen MoE layout\n"
                        "(model.layers.N.mlp.experts.E.{gate,up,down}_proj.weight, docs/moe.md)")
    g.add_argument("--layer", type=_nonneg, default=None, metavar="N", help="with --weights: the layer to read")
    g.add_argument("--model-config", type=Path, default=None, metavar="FILE",
                   help="with --weights: the checkpoint's config.json (top-k, groups, scaling)")
    g.add_argument("--clock-seed", type=_nonneg, default=1, help="seed of the clocks and wire latencies (default: 1)")
    _config_options(g, "tiny", "tiny")
    p.add_argument("--chart", type=_picture, default=None, metavar="FILE",
                   help="draw the tray's timeline, each slot framed with the expert it runs, to FILE")
    p.add_argument("--window", type=_window, default=None, metavar="FIRST:LAST", help="with --chart: these cycles only")
    p.add_argument("--no-run", action="store_true", help="compile (and draw) only")
    _rtl_run_options(p)

    from firmware_gen.host import plan as fw_plan
    p = _subcommand(sub, "plan", fw_plan.run, help="what real models' FFNs need on LP30-scale hardware",
                    description=fw_plan.DESCRIPTION, epilog=fw_plan.EPILOG)
    fw_plan.add_arguments(p)

    p = _subcommand(sub, "decode", cmd_decode, help="a small decoder generating token by token, FFNs on the tile",
                    description="Generate tokens greedily with a small decoder (sim/flows/decode.py, docs/afd.md): the host\n"
                                "(numpy) does embeddings, norms, attention with a KV cache, residuals and the LM head;\n"
                                "every layer's FFN runs in int8 on one tile that holds all layers (weights, parameters,\n"
                                "tables and programs loaded once; per layer only x goes in, y comes out, and the host\n"
                                "selects the layer with Csr.ENTRY).  Unless --no-run, the tile is the RTL (--sim),\n"
                                "driven by the host code inside the testbench; the golden model runs the same loop.\n"
                                "Checks: the same tokens, every layer's y bit-exact against the integer FFN, every\n"
                                "layer's cycles and writes as the compiler predicted, identical for every token,\n"
                                "the weights loaded once.\n"
                                "Exit status 0 = PASS, 1 = FAIL, 2 = bad arguments or a model that does not fit.",
                    epilog="The tray time is the tile's cycles at --clock-mhz (900 MHz: TSP v1's clock); the GPU\n"
                           "estimate is the KV cache's bytes read per token at --hbm-gbs, an assumption, not a\n"
                           "measurement.\n\nexamples:\n  lpu decode --tokens 8 --sim verilator\n"
                           "  lpu decode --no-run --layers 2 --tokens 32 --json\n"
                           "  lpu decode --no-run --experts 4 --tiles 4 --tokens 8")
    g = p.add_argument_group("model and tile")
    g.add_argument("--model", default="synthetic", help="the model: synthetic (default; seeded random weights)")
    g.add_argument("--tokens", type=_positive, default=8, metavar="N", help="tokens to generate (default: 8)")
    g.add_argument("--prompt", type=_token_ids, default=[1, 2, 3], metavar="IDS",
                   help="prompt token ids, comma-separated (default: 1,2,3)")
    g.add_argument("--layers", type=_positive, default=2, help="layers (default: 2)")
    g.add_argument("--H", type=_positive, default=8, metavar="N", help="model width (default: 8)")
    g.add_argument("--I", type=_positive, default=16, metavar="N", help="FFN width (default: 16)")
    g.add_argument("--heads", type=_positive, default=2, help="attention heads (default: 2)")
    g.add_argument("--vocab", type=_positive, default=64, help="vocabulary (default: 64)")
    g.add_argument("--seed", type=_nonneg, default=0, help="seed of the synthetic model (default: 0)")
    g.add_argument("--experts", type=_nonneg, default=0, metavar="E",
                   help="make every FFN a MoE layer of E routed experts (softmax router), each layer run on a\n"
                        "tray of --tiles tiles (the RTL, or the golden model with --no-run; default: 0, dense)")
    g.add_argument("--top-k", type=_positive, default=2, metavar="K", help="experts per token with --experts (default: 2)")
    g.add_argument("--shared", type=_nonneg, default=1, metavar="S", help="shared experts, 0 or 1 (default: 1)")
    g.add_argument("--tiles", type=int, choices=RUN_TILE_COUNTS, default=None,
                   help="tiles: with --experts, of the MoE tray (default: 4); a dense model on 2, 4 or 8\n"
                        "runs every FFN on a tray, of the RTL or with --no-run the golden model (default:\n"
                        "1, every layer resident on one tile)")
    g.add_argument("--out-scale-per-channel", action="store_true",
                   help="give each FFN output channel its own int8 scale (folded into its row's\n"
                        "requantisation; the host dequantises with a vector) instead of one per FFN")
    g.add_argument("--clock-mhz", type=float, default=900.0, help="tile clock for the tray time (default: 900)")
    g.add_argument("--clock-seed", type=_nonneg, default=None,
                   help="with --tiles N on the RTL: seed of every tile's clock (ppm within the specification,\n"
                        "phase) and of the wire latencies, as lpu tray's (default: 1)")
    g.add_argument("--hbm-gbs", type=float, default=8000.0,
                   help="assumed GPU HBM bandwidth for the attention estimate (default: 8000 GB/s)")
    _config_options(g, "tiny", "tiny, with " + ", ".join(DECODE_TILE))
    p.add_argument("--chart", type=_picture, default=None, metavar="FILE",
                   help="draw the loop's timeline on the host and the tray, batch 1 and two micro-batches\n"
                        "in flight, with the tokens/s of each, to FILE (.svg or .png)")
    p.add_argument("--chart-host", choices=("measured", "gpu"), default="measured",
                   help="the host's times in the chart: this run's numpy times (measured) or the KV cache's\n"
                        "bytes at --hbm-gbs (gpu, an estimate) (default: measured)")
    p.add_argument("--no-run", action="store_true", help="the golden model only (no simulator)")
    _rtl_run_options(p)

    p = _subcommand(sub, "c2c", cmd_c2c, help="two tiles on drifting clocks over a C2C link (RTL)",
                    description="Two tiny tiles on their own clocks exchange vectors both ways over a C2C link\n"
                                "(sim/flows/c2c.py), spread over several RUNTIME_DESKEW intervals, on the RTL.\n"
                                "Prints per tile its ppm, cycles, the HAC error range, receive and elastic\n"
                                "buffer fill, deskew stall cycles and whether every MEM write came at its\n"
                                "predicted SAC cycle with the golden model's value.  --plot draws the run:\n"
                                "activity (running / stalled by a deskew), HAC error, program skew and the\n"
                                "receive buffers over time.\n"
                                "Exit status 0 = PASS, 1 = FAIL, 2 = bad arguments.",
                    epilog="examples:\n  lpu c2c --ppm 1000 -1000 --plot drift.png\n"
                           "  lpu c2c --sim icarus --vectors 4 --spread 300 --json\n"
                           "  lpu c2c --ppm 5000 -5000 --beyond-spec    (out of specification: faults flagged)\n"
                           "  lpu c2c --inject 0:0:0x10:500:3    (3 single-bit flips, corrected and counted)\n"
                           "  lpu c2c --inject 0:0:0x90800000:0:40    (3-bit errors in the root's flits,\n"
                           "      miscorrected: the child loses HAC lock; a deskew stall beyond its bound\n"
                           "      halts it with DESKEW_TIMEOUT)")
    p.add_argument("--ppm", type=float, nargs=2, default=(350.0, -620.0), metavar=("TILE0", "TILE1"),
                   help=f"clock offsets from nominal (10 ns) in ppm (default: +350 -620; the tile\n"
                        f"specification allows +-{c2c_cfg.max_ppm})")
    p.add_argument("--latency", type=_positive, default=None, metavar="CYCLES",
                   help=f"wire latency in sender cycles, {c2c_cfg.link_latency_min}..{c2c_cfg.link_latency_max} "
                        f"(default: the declared maximum, {c2c_cfg.link_latency_max})")
    p.add_argument("--vectors", type=_positive, default=12, help="vectors each way (default: 12)")
    p.add_argument("--spread", type=_nonneg, default=700, metavar="CYCLES",
                   help="SAC cycles between a link's vectors (default: 700)")
    p.add_argument("--seed", type=_nonneg, default=1, help="seed of the data and clock phases (default: 1)")
    p.add_argument("--plot", type=_picture, default=None, metavar="FILE",
                   help="picture of the run over time, .svg or .png")
    p.add_argument("--beyond-spec", action="store_true",
                   help="allow clocks beyond the specification (to see the faults flagged)")
    p.add_argument("--inject", action="append", default=[], metavar="TILE:LINK:MASK:AFTER:COUNT",
                   help="fault injection, repeatable: XOR MASK (an integer, 0x.. for hex; flit bit 0 is\n"
                        "the valid bit, then 2 kind bits, the payload, the SECDED check bits) into COUNT\n"
                        "valid flits that TILE (0 or 1) sends on LINK, from AFTER of its cycles after the\n"
                        "start.  The report shows per injection the flits requested and the flits hit\n"
                        "(fewer when the link sends fewer)")
    p.add_argument("--figures", type=Path, default=None, metavar="DIR",
                   help="instead: write the pictures of docs/c2c.md into DIR, from two fixed runs")
    _rtl_run_options(p, " (the table goes to stderr)")

    p = _subcommand(sub, "bench", cmd_bench, help="FFN suite: cycles vs bounds, simulator speed",
                    description="Run the FFN benchmark suite (sim.bench.suite) on each simulator: per FFN the\n"
                                "hardware's cycles against the SRAM-read and MAC bounds and the targets,\n"
                                "per simulator tile-cycles per second.  Writes bench.json and bench.md.\n"
                                "Exit status 0 when every run is exact and every target met, else 1.",
                    epilog="example:\n  lpu bench --config tiny --sims verilator --out /tmp/bench --json")
    from sim.bench.args import add_arguments
    add_arguments(p)
    p.add_argument("--json", action="store_true", help="print bench.json on stdout (the tables go to stderr)")

    p = _subcommand(sub, "synth", cmd_synth, help="ECP5 bitstream and resource/Fmax report",
                    description="Synthesise the tile behind its UART host bridge for an ECP5 board with the\n"
                                "YoWASP Yosys/nextpnr (hdl.flows.synth) and report LUTs, flip-flops, block RAMs,\n"
                                "DSPs, Fmax and logic per unit.  Yosys runs first; when its mapped cells\n"
                                "exceed the device, the flow stops there and names each resource over the\n"
                                "limit (exit status 1) instead of placing.  When the design has more\n"
                                "multipliers than the device has DSPs, the MXMs' 8x8 products are built\n"
                                "from logic.",
                    epilog="example:\n  lpu synth --config tiny --board ulx3s-85f")
    p.add_argument("--board", choices=tuple(BOARDS), default="ulx3s-85f", help="board (default: ulx3s-85f)")
    _config_options(p, "default", "default")
    p.add_argument("--baud", type=_positive, default=115200, help="UART baud rate (default: 115200)")
    p.add_argument("--out", type=Path, default=None, metavar="DIR",
                   help="build directory (default: build/synth-<board>-<config>)")
    p.add_argument("--seed", type=_nonneg, default=None,
                   help=f"nextpnr's placement seed (default: {NEXTPNR_SEED}"
                        + "".join(f"; {k}: {n}" for k, n in NEXTPNR_SEEDS.items()) + ")")
    p.add_argument("--json", action="store_true", help="print the report as JSON on stdout")
    return ap


def _version() -> str:
    try:
        from importlib.metadata import version
        return version("lpu-tile")
    except Exception:
        return "0+unknown"


def main(argv=None) -> int:
    os.environ.setdefault("PYTHONHASHSEED", "0")
    ap = build_parser()
    args = ap.parse_args(argv)
    if getattr(args, "mxm_dtype", None):      # --dtype (of a tile's options) is --set mxm_dtype=...
        args.set = [*args.set, f"mxm_dtype={args.mxm_dtype}"]
    args.human = sys.stderr if args.json else sys.stdout     # the readable report; stdout is JSON's with --json
    try:
        return args.func(args)
    except LpuError as e:
        msg = " ".join(str(e).split("\n")[0].split())
        print(f"lpu {args.command}: error: {msg}", file=sys.stderr)
        return EXIT_USAGE
    except OSError as e:
        print(f"lpu {args.command}: error: {e.strerror or e}: {e.filename or ''}".rstrip(": "), file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print(f"lpu {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
