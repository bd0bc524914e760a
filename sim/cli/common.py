"""What the ``lpu`` subcommands share when they run: exit statuses, the user error
(:class:`CliError`, one line and exit status 2), JSON output, the FFN or program the
options describe, and a testbench run's verdict."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

from lpu_arch.config import TileConfig
from lpu_arch.errors import LpuError

EXIT_OK, EXIT_FAIL, EXIT_USAGE = 0, 1, 2
PRESETS = ("default", "tiny")
DEFAULT_SHAPE = {"default": (128, 512), "tiny": (8, 16), "board": (32, 64)}   # (H, I) when not given
# The dests of options.ffn_options: none may be given with a program directory.
FFN_OPTIONS = ("kind", "H", "I", "batch", "activation", "seed", "weights", "layer", "map", "out")


class CliError(LpuError):
    """A user error: printed as one line, exit status 2."""


def finite_json(v):
    """``v`` with every NaN or infinite float replaced by None (strict JSON has neither)."""
    if isinstance(v, float):
        return v if math.isfinite(v) else None
    if isinstance(v, dict):
        return {k: finite_json(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [finite_json(x) for x in v]
    return v


def print_json(obj, indent=1) -> None:
    """``obj`` as strict JSON on stdout."""
    print(json.dumps(finite_json(obj), indent=indent, allow_nan=False))


def config_name(value: str | None, sets=()) -> str:
    """What names a configuration in output directories: the preset or the file's stem,
    and a digest of the overrides when there are any."""
    import hashlib
    name = value or "default"
    name = name if name in PRESETS else Path(name).stem
    return name + (f"+{hashlib.sha1(' '.join(sets).encode()).hexdigest()[:6]}" if sets else "")


# ---- the FFN to work on ---------------------------------------------------------------------
def given(args, names) -> list[str]:
    """The options among ``names`` (argparse dests whose default is None) the command line gave."""
    return [f"--{k}" for k in names if getattr(args, k) is not None]


def shape(args, default=None) -> dict:
    """kind, H, I, batch and seed of the random FFN the options describe (H and I not given:
    ``default``, else the preset's ``DEFAULT_SHAPE``)."""
    H, I = default or DEFAULT_SHAPE.get(args.config, DEFAULT_SHAPE["default"])
    return dict(kind=args.kind or "swiglu", H=args.H or H, I=args.I or I, batch=args.batch or 1,
                seed=1 if args.seed is None else args.seed)


def weights_given(args) -> bool:
    """Whether --weights is given; then no shape option may be, and without it neither
    --layer nor --map may be."""
    if args.weights is None:
        if args.layer is not None or args.map is not None:
            raise CliError("--layer and --map select tensors of a --weights file; give --weights FILE")
        return False
    shape_opts = given(args, ("H", "I", "batch", "seed"))
    if shape_opts:
        raise CliError(f"{', '.join(shape_opts)} cannot be used with --weights (the arrays give the shape)")
    return True


def example_from_args(args, default=None, dtype: str = "int8"):
    """The FFN the options describe (quantised as ``dtype``, not compiled): --weights or a
    random one (:func:`shape`, ``default`` its H and I when not given)."""
    from firmware_gen.compiler.ffn_example import example_ffn
    if weights_given(args):
        from sim.harness.compiled import example_from_weights
        return example_from_weights(args.weights, kind=args.kind, activation=args.activation, layer=args.layer,
                                    mapping=args.map, dtype=dtype)[0]
    return example_ffn(**shape(args, default), activation=args.activation, dtype=dtype)


def compile_from_args(args):
    """The FFN the options describe, compiled for the tile they describe (a ``CompiledFfn``)."""
    from sim.harness.compiled import from_example, from_weights
    cfg = TileConfig.load(args.config or "default", args.set)
    preset = config_name(args.config, args.set)       # names the output directory
    if weights_given(args):
        return from_weights(args.weights, cfg, kind=args.kind, activation=args.activation, preset=preset,
                            layer=args.layer, mapping=args.map)
    return from_example(cfg, **shape(args), activation=args.activation, preset=preset)


def output_dir(args, name: str) -> tuple[Path, bool]:
    """The program directory to write (``--out``, else ``build/lpu/NAME``) and whether it
    may replace another program there: with ``--force``, or always in ``build/lpu``,
    whose directories are named by what they hold."""
    if args.force and args.out is None:
        raise CliError("--force replaces the directory given by --out: give --out DIR")
    return (Path("build") / "lpu" / name, True) if args.out is None else (args.out, args.force)


def load_or_compile(args):
    """``(CompiledFfn or None, Program, directory)`` from ``args.program`` or the FFN
    options (compiled and saved to ``--out``).  A bare program JSON gives no CompiledFfn."""
    from sim.harness.compiled import MANIFEST_FILE, PROGRAM_FILE, CompiledFfn, load_program
    if args.program is None:
        c = compile_from_args(args)
        out, replace = output_dir(args, c.name)
        c.save(out, replace)
        print(f"compiled {c.name} -> {out}/", file=args.human)
        return c, c.program, out
    ffn_given = given(args, FFN_OPTIONS)
    if ffn_given:
        raise CliError(f"give either a compiled program directory ({args.program}) or FFN options "
                       f"({', '.join(ffn_given)}), not both")
    path = Path(args.program)
    if path.is_file() and path.name not in (PROGRAM_FILE, MANIFEST_FILE):
        c, prog, d = None, load_program(path), path.parent
    else:
        d = path.parent if path.name in (PROGRAM_FILE, MANIFEST_FILE) else path
        bare = (d / PROGRAM_FILE).exists() and not (d / MANIFEST_FILE).exists()
        c = None if bare else CompiledFfn.load(d)
        prog = load_program(d / PROGRAM_FILE) if bare else c.program
    if args.config is not None or args.set:
        # --set alone applies to the directory's tile; --config names a whole tile
        asked = TileConfig.load(args.config, args.set) if args.config is not None else prog.config.with_overrides(args.set)
        if asked != prog.config:
            tile = " ".join([f"--config {args.config}"] * (args.config is not None) + [f"--set {x}" for x in args.set])
            have, want = prog.config.to_dict(), asked.to_dict()
            diff = [f"{k} {have.get(k)!r} (asked: {want.get(k)!r})" for k in sorted(set(have) | set(want))
                    if have.get(k) != want.get(k)]
            raise CliError(f"{tile} does not match the tile {path} was compiled for: its {', '.join(diff[:3])}"
                           + (f" and {len(diff) - 3} more fields" if len(diff) > 3 else ""))
    return c, prog, d


def print_fit(args, example, base, tiles: int) -> int:
    """--fit: the smallest depths that hold the FFN on ``tiles`` tiles of ``base``, as TOML."""
    from firmware_gen.compiler.fit import FIELDS, fit_ffn
    cfg, need = fit_ffn(example.spec, example.x_int8, base, tiles)
    if args.json:
        print_json({"config": cfg.to_dict(), "needs": need, "tiles": tiles})
        return EXIT_OK
    s = example.spec
    where = "one tile" if tiles == 1 else f"each of {tiles} tiles"
    head = (f"lpu --fit: the smallest power-of-two depths on which {where} holds a {s.kind} FFN\n"
            f"H={s.H}, I={s.I}, batch {example.x_int8.reshape(-1, s.H).shape[0]}; the other fields as given.\n"
            "needs: " + ", ".join(f"{k} {need[k]}" for k in FIELDS if k in need) + "\n"
            "use it:  --config FILE.toml")
    print(cfg.to_toml(head), end="")
    return EXIT_OK


def tray_base(args) -> TileConfig:
    """The tile of every tile of a tray: a preset as a tray's (``tray_tile_config``) or a
    file, with --set."""
    from sim.flows.tray import tray_tile_config
    base = tray_tile_config(args.config) if args.config in PRESETS else TileConfig.load(args.config)
    return base.with_overrides(args.set)


# ---- runs on the RTL ------------------------------------------------------------------------
def testbench_failed(e: RuntimeError, args, setup_errors: tuple = (), **fields) -> int:
    """A run whose testbench failed (timeout, crash): FAIL with its message; a setup
    problem (``SimSetupError`` or ``setup_errors``) is re-raised for the one-line error."""
    from sim.harness.runner import SimSetupError
    if isinstance(e, (SimSetupError, *setup_errors)):
        raise e
    print(f"FAIL: {e}", file=args.human)
    if args.json:
        print_json({**fields, "passed": False, "simulator": args.sim, "error": str(e)}, indent=None)
    return EXIT_FAIL


def run_on_rtl(args, run, expected: list | None = None, setup_errors: tuple = (), to_json=None, **fields) -> int:
    """``run(progress)``, a flow's testbench run returning its ``Report``, with progress on
    stderr unless ``--quiet``; the exit status is the report's verdict, and ``--json`` prints
    ``to_json(report)`` (default ``Report.to_json``).  A failed testbench: :func:`testbench_failed`."""
    from sim.harness.progress import ProgressPrinter
    progress = None if args.quiet else ProgressPrinter(args.sim, stream=sys.stderr, expected=expected)
    try:
        report = run(progress)
    except RuntimeError as e:
        return testbench_failed(e, args, setup_errors, **fields)
    if args.json:
        print_json(report.to_json() if to_json is None else to_json(report))
    return EXIT_OK if report.passed else EXIT_FAIL
