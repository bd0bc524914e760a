"""``lpu decode``: a small decoder generating tokens greedily, every layer's FFN on one tile
(or on a tray), on the RTL or the golden model; the figures per token position come from
the decode flow (``sim/flows/decode.py``), this module prints them."""

from __future__ import annotations

from pathlib import Path

from lpu_arch.config import TileConfig
from lpu_arch.topology import RUN_TILE_COUNTS

from sim.cli.common import EXIT_FAIL, EXIT_OK, CliError, print_json, testbench_failed
from sim.cli.options import (add_subcommand, config_options, force_option, int_at_least, nonneg, picture, positive,
                             positive_real, rtl_run_options, token_ids)
from sim.flows.decode import DECODE_TILE, TRAY_MOE_TILE
from sim.flows.token_loop import ON_CHIP_TILE
from sim.table import Column, Table, right

# --tokens at most: 128 tokens take about 4 s on the golden model with every layer resident and
# about 45 s on a tray of it (--experts 4 --tiles 4), minutes on the RTL (progress on stderr).
MAX_TOKENS = 128
CHART_POSITIONS = 3         # token positions --chart draws of a tray's loop (each its layers' runs)

DESCRIPTION = """\
Generate tokens greedily with a small decoder (sim/flows/decode.py, docs/afd.md): the host
(numpy) does embeddings, norms, attention with a KV cache, residuals and the LM head;
every layer's FFN runs in int8 on one tile that holds all layers (weights, parameters,
tables and programs loaded once; per layer only x goes in, y comes out, and the host
selects the layer with Csr.ENTRY).  Unless --no-run, the tile is the RTL (--sim),
driven by the host code inside the testbench; the golden model runs the same loop.
Checks: the same tokens, every layer's y bit-exact against the integer FFN, every
layer's cycles and writes as the compiler predicted, identical for every token,
the weights loaded once.
Exit status 0 = PASS, 1 = FAIL, 2 = bad arguments or a model that does not fit."""

EPILOG = """\
The tray time is the tile's cycles at --clock-mhz (900 MHz: TSP v1's clock); the GPU
estimate is the KV cache's bytes read per token at --hbm-gbs, an assumption, not a
measurement.

examples:
  lpu decode --tokens 8 --sim verilator
  lpu decode --no-run --layers 2 --tokens 32 --json
  lpu decode --no-run --experts 4 --tiles 4 --tokens 8
  lpu decode --experts 4 --tiles 4 --prompt 1,2 --tokens 1 --chart steady.svg
  lpu decode --on-chip --tokens 16 --prompt 1,2 --sim verilator
  lpu decode --on-chip --heads 0 --tokens 16 --per-call 4 --no-run"""


def add_parser(sub) -> None:
    p = add_subcommand(sub, "decode", run, help="a small decoder generating token by token, FFNs on the tile",
                       description=DESCRIPTION, epilog=EPILOG)
    g = p.add_argument_group("model and tile")
    g.add_argument("--model", default="synthetic", help="the model: synthetic (default; seeded random weights)")
    g.add_argument("--tokens", type=int_at_least(1, "positive", MAX_TOKENS, " (a run's time grows with the tokens)"),
                   default=8, metavar="N", help=f"tokens to generate, at most {MAX_TOKENS} (default: 8)")
    g.add_argument("--prompt", type=token_ids, default=[1, 2, 3], metavar="IDS",
                   help="prompt token ids, comma-separated (default: 1,2,3)")
    g.add_argument("--layers", type=positive, default=2, help="layers (default: 2)")
    g.add_argument("--H", type=positive, default=None, metavar="N", help="model width (default: 8; --on-chip: 32)")
    g.add_argument("--I", type=positive, default=None, metavar="N", help="FFN width (default: 16; --on-chip: 64)")
    g.add_argument("--heads", type=nonneg, default=None,
                   help="attention heads (default: 2; --on-chip: 1, of dimension 32, or 0: no attention)")
    g.add_argument("--vocab", type=positive, default=64, help="vocabulary (default: 64)")
    g.add_argument("--seed", type=nonneg, default=0, help="seed of the synthetic model (default: 0)")
    g.add_argument("--experts", type=nonneg, default=0, metavar="E",
                   help="make every FFN a MoE layer of E routed experts (softmax router), each layer run on a\n"
                        "tray of --tiles tiles (the RTL, or the golden model with --no-run; default: 0, dense)")
    g.add_argument("--top-k", type=positive, default=2, metavar="K",
                   help="experts per token with --experts (default: 2)")
    g.add_argument("--shared", type=nonneg, default=1, metavar="S", help="shared experts, 0 or 1 (default: 1)")
    g.add_argument("--tiles", type=int, choices=RUN_TILE_COUNTS, default=None,
                   help="tiles: with --experts, of the MoE tray (default: 4); a dense model on 2, 4 or 8\n"
                        "runs every FFN on a tray, of the RTL or with --no-run the golden model (default:\n"
                        "1, every layer resident on one tile)")
    g.add_argument("--out-scale-per-channel", action="store_true",
                   help="give each FFN output channel its own int8 scale (folded into its row's\n"
                        "requantisation; the host dequantises with a vector) instead of one per FFN")
    g.add_argument("--clock-mhz", type=positive_real, default=900.0, help="tile clock for the tray time (default: 900)")
    g.add_argument("--clock-seed", type=nonneg, default=None,
                   help="with --tiles N on the RTL: seed of every tile's clock (ppm within the specification,\n"
                        "phase) and of the wire latencies, as lpu tray's (default: 1)")
    g.add_argument("--hbm-gbs", type=positive_real, default=8000.0,
                   help="assumed GPU HBM bandwidth for the attention estimate (default: 8000 GB/s)")
    config_options(g, None, "tiny, with " + ", ".join(DECODE_TILE) + "; with --experts or --tiles the tiny\n"
                   "tile itself, with " + ", ".join(TRAY_MOE_TILE) + " for --experts (every MoE layer resident);\n"
                   "--on-chip: default")
    p.add_argument("--chart", type=picture, default=None, metavar="FILE",
                   help="draw the loop's timeline on the host and the tray, batch 1 and two micro-batches\n"
                        "in flight, with the tokens/s of each, to FILE (.svg or .png); with --tiles or\n"
                        f"--experts, the tray's runs of the first {CHART_POSITIONS} token positions on one time axis: the\n"
                        "host's bus segments, every link transfer, every tile's busy span")
    p.add_argument("--chart-host", choices=("measured", "gpu"), default=None,
                   help="the host's times in the one-tile loop's chart: this run's numpy times (measured) or the\n"
                        "KV cache's bytes at --hbm-gbs (gpu, an estimate) (default: measured; a tray's chart\n"
                        "draws the host's bus cycles as the RTL measured them)")
    p.add_argument("--no-run", action="store_true", help="the golden model only (no simulator)")
    o = p.add_argument_group("the token loop on chip")
    o.add_argument("--on-chip", action="store_true",
                   help="close the token loop on the tile (docs/afd.md, \"The token loop on chip\"): a synthetic\n"
                        "loop model of residual MLP layers (no attention yet), the embedding read at the token id\n"
                        "(SETB), the LM head's argmax on chip (ARGMAX), on the default tile with\n"
                        f"{', '.join(ON_CHIP_TILE)}; the host writes the prompt's last token once")
    o.add_argument("--per-call", type=positive, default=None, metavar="K",
                   help="with --on-chip: tokens per run of the tile, unrolled in its queues (default: --tokens)")
    o.add_argument("--out", type=Path, default=None, metavar="DIR",
                   help="with --on-chip: write the (first) run's program as DIR (program.json, and\n"
                        "token_loop.json: the prompt, the ids, the compiler's cycles): lpu show DIR draws it")
    force_option(o)
    p.add_argument("--fit", action="store_true",
                   help="with --tiles or --experts: print the smallest tray tile (power-of-two depths, as TOML for\n"
                        "--config) on which every layer of the model is resident, and run nothing")
    rtl_run_options(p)


def run(args) -> int:
    if args.on_chip:
        from sim.cli import on_chip
        return on_chip.run(args)
    for name in ("per_call", "out"):
        if getattr(args, name) is not None:
            raise CliError(f"--{name.replace('_', '-')} is an option of --on-chip: give --on-chip")
    if args.heads == 0:
        raise CliError("--heads 0 (no attention) is a model of --on-chip; the host's loop has 1 or more heads")
    args.H, args.I, args.heads = args.H or 8, args.I or 16, args.heads or 2
    args.config = args.config or "tiny"
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
    if args.fit and not tray:
        raise CliError("--fit sizes a tray's tile: give --tiles 2|4|8 or --experts (one tile: lpu compile --fit)")
    if tray and args.chart_host is not None:
        raise CliError("--chart-host chooses the host's times of the one-tile loop's chart; a tray's chart (--tiles, "
                       "--experts) draws the host's bus cycles as the RTL measured them: leave it out")
    if tray:                     # every layer resident on the tray (tiny: with TRAY_MOE_TILE's depth for experts)
        args.tiles = args.tiles or 4
        if args.fit:
            return print_tray_fit(args, TileConfig.load(args.config, args.set), model)
        args.clock_seed = 1 if args.clock_seed is None else args.clock_seed
        grown = TRAY_MOE_TILE if args.experts and args.config == "tiny" else ()
        return run_tray(args, TileConfig.load(args.config, (*grown, *args.set)), model)
    return run_resident(args, base, model)


def run_resident(args, base: TileConfig, model: dict) -> int:
    """Every layer resident on one tile: the loop on the golden model, then (unless
    --no-run) on the RTL, checked; per position its cycles, bytes and the GPU estimate."""
    from sim.flows.decode import decode_setup, run_golden, run_rtl
    from sim.flows.decode_report import loop_report
    from sim.harness.progress import ProgressPrinter
    setup = decode_setup(base.to_dict(), model, args.prompt, args.tokens, args.out_scale_per_channel)
    rm = setup.resident
    print(f"model: synthetic decoder, {args.layers} layers, H={args.H}, I={args.I}, {args.heads} heads, vocab "
          f"{args.vocab} (seed {args.seed}); FFN scales calibrated once on the fixed calibration text"
          + (", one output scale per channel" if args.out_scale_per_channel else ""), file=args.human)
    print(f"tile: every layer resident ({rm.loaded_bytes()['weights']:,} bytes of weights, "
          f"{rm.loaded_bytes()['instructions']:,} of instructions, loaded once); per layer "
          + ", ".join(f"{ly.manifest.cycles} cycles" for ly in rm.layers) + " (compiler)", file=args.human)
    golden = run_golden(setup)
    runs = golden
    if not args.no_run:
        try:
            expected = [r["cycles"] for r in golden["runs"]]
            runs = run_rtl(setup, args.sim, None if args.quiet else ProgressPrinter(args.sim, expected=expected),
                           len(expected))
        except RuntimeError as e:
            return testbench_failed(e, args, ran=True)
    report = loop_report(setup, runs, golden, args.clock_mhz, args.hbm_gbs)
    table = Table(right("pos", 4), right("token", 6), right("tray cycles", 11), right("tray us", 8),
                  right("x/y bytes", 10), right("KV bytes", 9), right("GPU est. ns", 11),
                  Column(f"({report.figures['engine']}; tray time at {args.clock_mhz:g} MHz, GPU: KV bytes at "
                         f"{args.hbm_gbs:g} GB/s)", gap=3))           # a note: the rows stop before it
    print("\n" + table.head(), file=args.human)
    for row in report.rows:
        print(table.line(row["position"], row["input_token"], row["tray_cycles"], f"{row['tray_us']:.3f}",
                         f"{row['bytes_to_tray']:>4}/{row['bytes_from_tray']:<5}", row["kv_bytes"],
                         f"{row['gpu_est_ns']:.3f}"), file=args.human)
    chart = {} if args.chart is None else draw(args, setup, golden)
    print(f"\ngenerated: {report.figures['tokens']}", file=args.human)
    print(f"tray cycles identical for every token: {'yes' if report.figures['identical_every_token'] else 'NO'}; "
          f"host time {report.figures['host_seconds'] * 1e3:.1f} ms in all (golden-model run, numpy)", file=args.human)
    return verdict(args, report, chart)


def draw(args, setup, golden: dict) -> dict:
    """--chart: the loop's timeline, batch 1 and two micro-batches; what was written and
    the tokens/s of each (for --json)."""
    from firmware_gen.chart import loop_chart

    from sim.flows.decode_report import host_times_us
    L = len(setup.resident.layers)
    tray_us = [ly.manifest.cycles / args.clock_mhz for ly in setup.resident.layers]
    source = args.chart_host or "measured"
    host_us = host_times_us(setup, golden, source, args.hbm_gbs)
    if source == "measured":
        what = "host: this run's numpy time per step (median over positions)"
    else:
        what = (f"host: the KV cache of one layer at position {len(setup.prompt) + setup.tokens - 1} read at "
                f"{args.hbm_gbs:g} GB/s (an estimate)")
    path, rates = loop_chart(host_us, tray_us, args.chart, tokens=2,
                             title=f"decode loop, {L} layers: tray {sum(tray_us):.3f} us per token at "
                                   f"{args.clock_mhz:g} MHz; {what}")
    print(f"chart: {path} (batch 1: {rates[1]:,.0f} tokens/s; two micro-batches: {rates[2]:,.0f} tokens/s)",
          file=args.human)
    return {"chart": str(path), "tokens_per_s_batch1": round(rates[1]), "tokens_per_s_two_microbatches":
            round(rates[2])}


def verdict(args, report, chart: dict) -> int:
    """A loop's ``report`` (``sim.report.Report``) ends: the first problems and PASS or
    FAIL, the report with ``chart`` (:func:`draw`'s) as JSON with ``--json``, and the exit
    status."""
    for p in report.problems[:10]:
        print(f"  {p}", file=args.human)
    print("PASS" if report.passed else "FAIL", file=args.human)
    if args.json:
        print_json({**report.to_json(), **chart})
    return EXIT_OK if report.passed else EXIT_FAIL


def run_tray(args, base: TileConfig, model: dict) -> int:
    """``lpu decode --experts E`` (every FFN a MoE layer) or ``--tiles N`` (a dense model):
    each FFN run on a tray of ``--tiles`` tiles by the system golden model
    (``decode.run_moe_tray``, ``decode.run_dense_tray``) or on the RTL."""
    from firmware_gen.compiler import CompileError
    from firmware_gen.host.decoder import calibrate, synthetic

    from sim.flows.decode import moe_decoder, run_dense_tray_any, run_moe_tray_any, run_tray_rtl
    from sim.harness.progress import ProgressPrinter
    engine = "golden model" if args.no_run else f"RTL on {args.sim}, every tile on its own clock"
    if args.experts:
        model = moe_model(args, model, engine)
        what = "the MoE layer does not fit"
    else:
        if args.out_scale_per_channel:
            raise CliError("--out-scale-per-channel: not with --tiles (a tray's layers use one output scale per FFN)")
        print(f"model: synthetic decoder, {args.layers} layers, H={args.H}, I={args.I}, {args.heads} heads, vocab "
              f"{args.vocab} (seed {args.seed}); every FFN on {args.tiles} {args.config} tiles ({engine})",
              file=args.human)
        what = "an FFN does not fit"
    try:
        if args.no_run:
            if args.experts:
                m, tables, rt = moe_decoder(model, base, args.tiles)
                g = run_moe_tray_any(m, args.prompt, args.tokens, base, args.tiles, rt=rt)
            else:
                tables, g = None, run_dense_tray_any(calibrate(synthetic(**model)), args.prompt, args.tokens, base,
                                                     args.tiles)
            g["moe_tables"] = tables
        else:
            g = run_tray_rtl(model, args.prompt, args.tokens, base, args.tiles, args.sim, args.clock_seed,
                             progress=None if args.quiet else ProgressPrinter(args.sim))
    except CompileError as e:
        raise CliError(f"{what} the tray: {e}") from None
    except RuntimeError as e:
        return testbench_failed(e, args, ran=True)
    print_tray_setup(args, g)
    return print_tray_loop(args, g, {} if args.chart is None else draw_tray(args, g))


def print_tray_fit(args, base: TileConfig, model: dict) -> int:
    """--fit: the smallest depths of ``base`` on which every layer is resident on the tray
    (a MoE model with one activation table per layer, the fewest tables), as TOML."""
    from firmware_gen.compiler import CompileError
    from firmware_gen.compiler.fit import RESIDENT_FIELDS, fit_resident_tray
    from firmware_gen.host.decoder import calibrate, synthetic
    if args.experts:
        model = moe_model(args, model, "", say=False)
    m = calibrate(synthetic(**model), moe_tables="layer")
    try:
        cfg, need = fit_resident_tray(m.specs, base, args.tiles)
    except CompileError as e:
        raise CliError(f"the model does not fit {args.tiles} tiles even at the largest depths: {e}") from None
    if args.json:
        print_json({"config": cfg.to_dict(), "needs": need, "tiles": args.tiles})
        return EXIT_OK
    head = (f"lpu decode --fit: the smallest power-of-two depths on which each of {args.tiles} tiles holds its share "
            f"of every layer\n({args.layers} layers" + (f", {args.experts} experts each, one activation table per "
                                                         "layer" if args.experts else "") + "); the other fields as given.\n"
            "needs: " + ", ".join(f"{k} {need[k]}" for k in RESIDENT_FIELDS) + "\nuse it:  --config FILE.toml")
    print(cfg.to_toml(head), end="")
    return EXIT_OK


def moe_model(args, model: dict, engine: str, say: bool = True) -> dict:
    """``model`` with --experts, --top-k and --shared, checked against the tray, and (``say``) said."""
    if args.experts % args.tiles:
        raise CliError(f"--experts {args.experts} must be a multiple of --tiles {args.tiles} (each tile holds the "
                       "same number of experts)")
    if not 1 <= args.top_k <= args.experts:
        raise CliError(f"--top-k {args.top_k} must be in 1..--experts ({args.experts})")
    if args.shared > 1:
        raise CliError(f"--shared {args.shared}: a tray runs at most one shared expert (fuse them into one FFN)")
    if say:
        print(f"model: synthetic MoE decoder, {args.layers} layers, H={args.H}, {args.experts} experts of I={args.I}, "
              f"top-{args.top_k}, {args.shared} shared, {args.heads} heads, vocab {args.vocab} (seed {args.seed}); "
              f"every MoE layer on {args.tiles} {args.config} tiles ({engine})", file=args.human)
    return dict(model, experts=args.experts, top_k=args.top_k, shared=args.shared)


def print_tray_setup(args, g: dict) -> None:
    """The tray's clocks (on the RTL) and whether its layers stay resident."""
    if g["engine"] == "RTL":
        print(f"clocks (--clock-seed {args.clock_seed}): tile ppm " + ", ".join(f"{p:+.1f}" for p in g["ppm"])
              + "; wire latencies " + ", ".join(f"{a}-{b} {n}" for a, b, n in g["wire_latencies"]) + " cycles",
              file=args.human)
    tables = g.get("moe_tables")
    if tables:
        acc = "; ".join(f"one per {k}: top-1 {a['top1_agreement']:.3f}, lowest layer FFN cosine {a['ffn_cosine_min']:.4f}"
                        for k, a in tables["accuracy"].items())
        print(f"activation tables: one per {tables['chosen']} ({tables['why']}); against float, {acc}",
              file=args.human)
    if g["resident"]:
        holds = g.get("holds")
        print(f"tray: every layer resident ({g['loaded_once_bytes']:,} bytes of MEM images loaded once"
              + (f"; per tile at most {holds['rows']} of {holds['mem_depth']} rows, {holds['params']} of "
                 f"{holds['vxm_param_depth']} VXM parameter entries, {holds['tables']} of {holds['vxm_tables']} "
                 "activation tables" if holds else "")
              + "); per run only x" + (", the routing (base registers) and the entry cross" if args.experts else
                                       " and the entry cross"), file=args.human)
    else:
        print(f"tray: each run loads its layer (the layers are not resident: {g['not_resident']})", file=args.human)


def print_tray_loop(args, g: dict, chart: dict | None = None) -> int:
    """The report of the tray loop ``g``: per position the tray's program and wall cycles
    (and each MoE layer's experts), the verdict (with ``chart``, :func:`draw_tray`'s)."""
    from sim.flows.decode_report import HOST_TIME, tray_loop_report
    report = tray_loop_report(g, args.prompt, args.layers, args.clock_mhz, bool(args.experts))
    table = Table(right("pos", 4), right("token", 6), right("tray cycles", 11), right("wall", 6),
                  right("wall us", 8),
                  Column(f"{'experts per layer   ' if args.experts else ''}(SAC cycles; wall: HAC cycles from each "
                         f"run's HAC read to done, at {args.clock_mhz:g} MHz)", gap=2))
    print("\n" + table.head(), file=args.human)
    for row in report.rows:
        experts = row.get("experts", [()] * args.layers)        # a dense layer: an empty column each
        print(table.line(row["position"], row["input_token"], row["tray_cycles"], row["wall_cycles"],
                         f"{row['tray_us']:.3f}", "  ".join(",".join(map(str, e)) for e in experts)), file=args.human)
    if g["engine"] == "RTL":
        print(f"\n{'pos':>4} {'to tray':>8} {'x':>6} {'routing':>8} {'entry':>6} {'reloaded':>9} {'from tray (y)':>14} "
              f"{'host bus cycles':>16}   (bytes after the first load; the first load: "
              f"{g['first_load_bytes']:,} bytes through the load port)", file=args.human)
        for row in report.rows:
            print(f"{row['position']:>4} {row['bytes_to_tray']:>8} {row['bytes_x']:>6} {row['bytes_routing']:>8} "
                  f"{row['bytes_entry']:>6} {row['bytes_reloaded']:>9} {row['bytes_from_tray']:>14} "
                  f"{row['host_bus_cycles']:>16}", file=args.human)
        print(f"one clock start and one reset per tile, before the first load (clock starts {g['clock_starts']}, "
              f"resets {g['resets']}); the HAC locked once; STATUS read before arming every run; {HOST_TIME}",
              file=args.human)
    elif g.get("resident") and "bytes" in g["runs"][0]:      # the golden loop: the compiler's counts per position
        per = {k: sum(r["bytes"][k] for r in g["runs"][:args.layers]) for k in g["runs"][0]["bytes"]}
        print(f"per position after the first load ({g['loaded_once_bytes']:,} bytes): "
              + ", ".join(f"{k} {v:,} B" for k, v in per.items()) + f" to the tray, y "
              f"{sum(r['bytes_out'] for r in g['runs'][:args.layers]):,} B back (the compiler's counts)", file=args.human)
    print(f"\ngenerated: {report.figures['tokens']}", file=args.human)
    print(f"tray cycles identical for every token: {'yes' if report.figures['identical_every_token'] else 'NO'}",
          file=args.human)
    return verdict(args, report, chart or {})


def tray_chart_runs(g: dict, layers: int) -> list[dict]:
    """The armed runs (each MoE round) of the tray loop ``g`` as ``steady_chart`` draws
    them: the RTL's measured timelines (``rtl_timeline``) or the golden model's, with each
    run's position, layer and, for MoE, the experts each tile ran (the golden loop's: the
    RTL's routing is checked against it)."""
    rtl, out = g["engine"] == "RTL", []
    for n, r in enumerate(g["runs"]):
        for k, timeline in enumerate(r.get("rtl_timeline", []) if rtl else r["timeline"]):
            run = {**timeline, "position": n // layers, "layer": r["layer"]}
            if "experts" in r["timeline"][k]:
                run["tile_experts"] = r["timeline"][k]["experts"]
            out.append(run)
    return out


def draw_tray(args, g: dict) -> dict:
    """--chart with a tray: the runs of the first token positions on one time axis
    (``firmware_gen.steady_chart``), each row saying where its figures come from."""
    from firmware_gen.steady_chart import steady_chart
    rtl, moe = g["engine"] == "RTL", bool(args.experts)
    runs = tray_chart_runs(g, args.layers)
    shown = min(CHART_POSITIONS, len(g["runs"]) // args.layers)
    last = g["runs"][(shown - 1) * args.layers:shown * args.layers]         # the last position drawn
    wall = sum(r["rtl_wall_cycles" if rtl else "wall_cycles"] for r in last)
    host = sum(r["rtl_host_cycles"] for r in last) if rtl else 0
    per_run = "x, the routing and the entry" if moe else "x and the entry"
    if rtl:
        sources = {"host": f"RTL measurement ({args.sim}): the host's bus cycles (tile 0's clock); its computation "
                           "takes no simulated time",
                   "tiles": "RTL measurement: each tile's START_HAC and done, in HAC cycles from the host's HAC read",
                   "links": "compiler: the programs' SEND and RECV cycles, on each tile's measured start and deskew"}
        before = (f"before cycle 0: the first load ({g['first_load_bytes']:,} bytes through the load port), one reset "
                  f"and one clock start per tile (resets {g['resets']}), the HAC locked once")
    else:
        sources = {"host": "not simulated (golden model): the runs are drawn back to back",
                   "tiles": "golden model (the tray's system model): each tile's cycles, its start and deskew slack "
                            "as c2c.wall_cycles",
                   "links": "compiler: the programs' SEND and RECV cycles (as the golden model runs them)"}
        before = f"before cycle 0: every layer loaded once ({g['loaded_once_bytes'] or 0:,} bytes of MEM images)"
    after = (f"then never reset, reloaded or stopped: per run the host writes {per_run}" if g["resident"] else
             f"then each run loads its layer (not resident: {g['not_resident']})")
    title = (f"lpu decode{f' --experts {args.experts}' if moe else ''} --tiles {args.tiles}, {g['engine']}"
             f"{f' on {args.sim}' if rtl else ''}: positions 0..{shown - 1} of {len(g['runs']) // args.layers} "
             f"({args.layers} layers each); position {shown - 1}: runs {wall} wall cycles"
             + (f" + host bus {host} = {wall + host}" if rtl else "")
             + f" ({(wall + host) / args.clock_mhz:.3f} \u00b5s at {args.clock_mhz:g} MHz)")
    xlabel = ("cycles: the host's bus segments (tile 0's clock) and each run's HAC cycles, end to end (the testbench's "
              "checking reads between runs left out)" if rtl else None)
    path = steady_chart(runs, args.chart, sources=sources, clock_mhz=args.clock_mhz, positions=CHART_POSITIONS,
                        tokens=list(args.prompt) + list(g["tokens"]), title=title, first_load=f"{before}; {after}",
                        xlabel=xlabel)
    print(f"chart: {path} (token positions 0..{shown - 1} of the tray's loop on one time axis)", file=args.human)
    return {"chart": str(path)}
