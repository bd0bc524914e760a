"""``lpu decode --on-chip``: the token loop closed on the tile (``sim/flows/token_loop.py``): a
synthetic decoder (attention with ``--heads``, or none: ``--heads 0``), the host writing the
prompt once and reading the ids; without attention ``--per-call`` tokens a run."""

from __future__ import annotations

from lpu_arch.config import TileConfig

from sim.cli.common import CliError, run_on_rtl
from sim.flows.token_loop import ON_CHIP_MODEL, ON_CHIP_TILE
from sim.table import Table, right

# lpu decode's options that the on-chip loop has no use for: name -> (value when not given, why).
NOT_ON_CHIP = {"experts": (0, "the on-chip loop's layers are dense"), "tiles": (None, "the loop runs on one tile"),
               "out_scale_per_channel": (False, "its requantisers are per layer"),
               "chart": (None, "no picture of the on-chip loop yet"), "chart_host": (None, "no host in its loop"),
               "fit": (False, "lpu compile --fit sizes one tile"), "clock_seed": (None, "one tile, one clock")}


def check_options(args) -> None:
    for name, (unset, why) in NOT_ON_CHIP.items():
        if getattr(args, name) != unset:
            raise CliError(f"--{name.replace('_', '-')} does not apply to --on-chip: {why}")
    if args.model != "synthetic":
        raise CliError(f"--model {args.model}: the on-chip loop runs its synthetic loop model only")
    if args.per_call is not None and args.tokens % args.per_call:
        raise CliError(f"--tokens {args.tokens} must be a multiple of --per-call {args.per_call}")
    if args.force and args.out is None:
        raise CliError("--force replaces the directory given by --out: give --out DIR")
    if args.per_call not in (None, args.tokens) and args.heads != 0:
        raise CliError("--per-call: a decoder with attention generates its tokens in one run (its positions are "
                       "compiled in); give --heads 0 for runs of --per-call tokens")


def run(args) -> int:
    """The loop on the golden model and (unless --no-run) the RTL tile; a line per token."""
    from firmware_gen.compiler import CompileError
    from firmware_gen.golden.token_loop import LoopModelError

    from sim.flows.token_loop import run_token_loop
    check_options(args)
    heads = ON_CHIP_MODEL["heads"] if args.heads is None else args.heads
    H, I = args.H or 32 * max(heads, 1), args.I or ON_CHIP_MODEL["I"]
    per_call = args.per_call or args.tokens
    cfg = TileConfig.load(args.config or "default", (*ON_CHIP_TILE, *args.set))
    if max(args.prompt) >= args.vocab:
        raise CliError(f"--prompt: token id {max(args.prompt)} is outside the vocabulary (0..{args.vocab - 1})")
    model = dict(vocab=args.vocab, H=H, I=I, layers=args.layers, heads=heads, seed=args.seed)
    what = f"{heads} attention head(s) of dimension 32" if heads else "no attention: a token's successor depends on it only"
    print(f"model: synthetic decoder, {args.layers} layers, H={H}, I={I}, vocab {args.vocab} (seed {args.seed}), "
          f"{what}; an RMSNorm before each attention part, MLP and the LM head; quantised once from its float "
          f"model", file=args.human)
    print(f"tile: {args.config or 'default'} with {', '.join(ON_CHIP_TILE)}; {per_call} tokens a run, "
          f"{args.tokens // per_call} run(s); the host writes the prompt once, reads the ids", file=args.human)
    if args.out is not None:
        from sim.flows.token_loop import save_loop
        try:
            save_loop(cfg, model, args.prompt, per_call, args.out, args.force)
        except CompileError as e:
            raise CliError(f"the loop does not fit the tile: {e}") from None
        print(f"the run's program -> {args.out}/ (lpu show {args.out})", file=args.human)
    sim = None if args.no_run else args.sim

    def go(progress):
        try:
            return run_token_loop(cfg, model, args.prompt, args.tokens, per_call, sim=sim, clock_mhz=args.clock_mhz,
                                  progress=progress, build_out=args.human)
        except CompileError as e:
            raise CliError(f"the loop does not fit the tile: {e}") from None
        except LoopModelError as e:
            raise CliError(f"the model: {e}") from None

    if sim is None:
        rep = go(None)
    else:
        rep = None

        def keep(progress):
            nonlocal rep
            rep = go(progress)
            return rep
        status = run_on_rtl(args, keep)
        if rep is None:
            return status
    print_report(args, rep)
    if sim is None and args.json:
        from sim.cli.common import print_json
        print_json(rep.to_json())
    return 0 if rep.passed else 1


def print_report(args, rep) -> None:
    f = rep.figures
    table = Table(right("token", 6), right("run", 4), right("id", 6), right("cycles", 7), right("us", 8))
    print("\n" + table.head(), file=args.human)
    for r in rep.rows:
        print(table.line(r["token"], r["run"], r["id"], r["cycles"], f"{r['us']:.4f}"), file=args.human)
    print(f"\ngenerated: {f['ids']} ({f['simulator']}; the pure-integer reference's: "
          f"{'same' if rep.passed else 'see the problems'})", file=args.human)
    print(f"accuracy: teacher-forced top-1 agreement with the float model {f['top1_agreement_with_float']:.3f} "
          f"(48 random-token positions)", file=args.human)
    lo, hi = f["cycles_per_token_range"]
    print(f"per token: {f['cycles_per_token']:g} cycles on average, {lo}..{hi} ({f['us_per_token']:.4f} us at "
          f"{f['clock_mhz']:g} MHz; the first token of a run {f['first_token_cycles']}); the weight-read bound {f['weight_read_bound']} cycles "
          f"(arithmetic: every weight row once, one row a cycle from each MEM slice): x{f['ratio_to_bound']:.2f}",
          file=args.human)
    print(f"queues: {f['iq_needed']} of iq_depth {f['iq_depth']} instructions in the deepest (tokens unrolled)",
          file=args.human)
    trips = f["host_round_trips_per_token_with_attention_on_host"]
    if trips:
        print(f"beside attention on the host (lpu decode's loop): of a token's {f['cycles_per_token']:g} cycles the "
              f"attention steps span {f['attention_cycles_per_token']:g} (q, k, v written to y written, compiler); with "
              f"attention on the host the tile would instead stop {trips} times a token (after q, k, v and after y in "
              f"each layer), each stop a host round trip over the bus (docs/afd.md: about 615 bus cycles between a "
              f"tray's runs, measured) plus the host's attention", file=args.human)
    if f.get("host_bytes_after_first_load") is not None:
        print(f"host: first load {f['first_load_bytes']:,} bytes (program, weights, the prompt's token); before each "
              f"later run {f['host_bytes_after_first_load']} bytes", file=args.human)
    for p in rep.problems[:10]:
        print(f"  {p}", file=args.human)
    print("PASS" if rep.passed else "FAIL", file=args.human)
