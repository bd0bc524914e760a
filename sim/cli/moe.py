"""``lpu moe``: a mixture-of-experts layer compiled for a tray, its routings listed and
drawn, run on the RTL."""

from __future__ import annotations

import argparse
from pathlib import Path

from sim.cli.common import EXIT_OK, CliError, print_json, run_on_rtl, tray_base
from sim.cli.options import (add_subcommand, config_options, nonneg, positive, rtl_run_options, tiles,
                             timeline_options)
from sim.table import Column, Table, right

DESCRIPTION = """\
Compile a mixture-of-experts layer (random SwiGLU experts and router from --seed,
or --weights) for a tray (firmware_gen/compiler/moe_tray.py, docs/moe.md): every tile holds
E/N experts and reserves --capacity expert slots per token (ep), or a share of every
expert (tp, tps; --mapping); the shared expert runs tensor-parallel over the tray.  One program serves every routing: the host loads
base registers with each slot's expert (or off), so only the selected experts'
weights are read, in the same cycles.  Unless --no-run, it runs the routings on the
RTL (the router's own, spread, packed, random; or --routing) and checks per tile
every write, the cycle count and the busy counters against the compiler and the
golden model, and every expert's output bit-exact against moe.moe_int.  A routing
beyond capacity runs in rounds of the same program.
Exit status 0 = PASS, 1 = FAIL, 2 = bad arguments or a layer that does not fit."""

EPILOG = """\
examples:
  lpu moe --no-run --chart moe.svg
  lpu moe --tiles 4 --experts 8 --top-k 2 --sim icarus
  lpu moe --routing over --capacity 1 --tiles 4 --experts 8   (two rounds)
  lpu moe --no-run --config default --experts 32 --H 64 --I 128 --top-k 4 --json"""

DEFAULT_ROUTINGS = ("router", "spread", "packed", "random")      # without --routing


def routing_arg(text: str):
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


def add_parser(sub) -> None:
    p = add_subcommand(sub, "moe", run, help="a mixture-of-experts layer on a tray: routings, RTL run",
                       description=DESCRIPTION, epilog=EPILOG)
    g = p.add_argument_group("layer and tray")
    g.add_argument("--experts", type=positive, default=8, metavar="E", help="routed experts (default: 8)")
    g.add_argument("--top-k", type=positive, default=None, metavar="K", help="experts per token (default: 2)")
    g.add_argument("--shared", type=nonneg, default=1, metavar="S",
                   help="shared experts, 0 or 1 (default: 1)")
    g.add_argument("--mapping", choices=("auto", "ep", "tp", "tps"), default="auto",
                   help="ep: each tile holds E/N whole experts and reserves --capacity slots per token;\n"
                        "tp: every tile holds 1/N of every expert and runs its share of each selected\n"
                        "one (capacity K, never exceeded; h all-gathered over the links);\n"
                        "tps: tp with each tile's last h block one of its own experts' and h sent only\n"
                        "to the tiles that need it (nearest the floor at batch 1);\n"
                        "auto: tps on a tray whose tiles hold a share of every expert, unless --capacity\n"
                        "is given; else ep (default: auto)")
    g.add_argument("--capacity", type=positive, default=None, metavar="C",
                   help="ep: expert slots per tile and token (default: ceil(K/N) + 1 on a tray, K on one tile)")
    g.add_argument("--H", type=positive, default=8, metavar="N", help="model width H (default: 8)")
    g.add_argument("--I", type=positive, default=8, metavar="N", help="each expert's intermediate width (default: 8)")
    g.add_argument("--tiles", type=lambda v: 1 if v == "1" else tiles(v), default=4, metavar="N",
                   help="tiles: 1, 2, 4 or 8 (default: 4)")
    g.add_argument("--batch", type=positive, default=1, metavar="T", help="tokens in the run (default: 1)")
    g.add_argument("--seed", type=nonneg, default=0, help="seed of the random layer and tokens (default: 0)")
    g.add_argument("--routing", type=routing_arg, default=None, metavar="R",
                   help="run only this routing: router, spread, packed, random, over, or indices like\n"
                        "0,5;2,7 (default: router, spread, packed and random)")
    g.add_argument("--weights", type=Path, default=None, metavar="FILE",
                   help="real expert weights: .safetensors (or a sharded checkpoint's index) or .npz in the\n"
                        "DeepSeek/Qwen MoE layout "
                        "(model.layers.N.mlp.experts.E.{gate,up,down}_proj.weight, docs/moe.md)")
    g.add_argument("--layer", type=nonneg, default=None, metavar="N", help="with --weights: the layer to read")
    g.add_argument("--model-config", type=Path, default=None, metavar="FILE",
                   help="with --weights: the checkpoint's config.json (top-k, groups, scaling)")
    g.add_argument("--clock-seed", type=nonneg, default=1, help="seed of the clocks and wire latencies (default: 1)")
    config_options(g, "tiny", "tiny")
    timeline_options(p, "draw the tray's timeline, each slot framed with the expert it runs, to FILE",
                     "with --chart: these cycles only", "compile (and draw) only")
    rtl_run_options(p)


def example_from_weights(args, base):
    """--weights: the MoE layer of the file (a ``MoeExample``), else None."""
    import numpy as np

    from firmware_gen.golden.moe import MoeExample, MoeLayer, MoeSpec, quantise_input
    from firmware_gen.host.weights import load_moe
    if args.weights is None:
        if args.layer is not None or args.model_config is not None:
            raise CliError("--layer and --model-config choose what to read from --weights FILE: give --weights too")
        return None
    w = load_moe(args.weights, args.layer, config=args.model_config, batch=args.batch)
    layer = MoeLayer.from_weights(w, **({"top_k": args.top_k} if args.top_k else {}))
    x = np.asarray(w.x, float)[: args.batch]
    spec = MoeSpec.from_float(layer, x_calibration=np.asarray(w.x, float), dtype=base.mxm_dtype)
    return MoeExample(spec, layer, x, quantise_input(spec, x))


def run(args) -> int:
    from sim.flows.moe import compile_moe_example, run_moe_on_rtl
    base = tray_base(args)
    example = example_from_weights(args, base)
    routings = DEFAULT_ROUTINGS if args.routing is None else (
        (args.routing,) if isinstance(args.routing, str) else ())
    cm = compile_moe_example(E=args.experts, top_k=args.top_k or 2, shared=args.shared, H=args.H, I=args.I,
                             tokens=args.batch, tiles=args.tiles, capacity=args.capacity,
                             seed=args.seed, cfg=base, routings=routings,
                             forced=args.routing if isinstance(args.routing, list) else None,
                             clock_seed=args.clock_seed, example=example, mapping=args.mapping)
    man = cm.mt.manifest()
    for line in cm.describe():
        print(line, file=args.human)
    chart = {} if args.chart is None else draw(cm, man, args)
    routing_rows = {name: cm.rounds(name) for name in cm.routings}
    if args.no_run:
        return print_routings(cm, man, routing_rows, args, chart)
    return run_on_rtl(args, lambda progress: run_moe_on_rtl(cm, args.sim, progress=progress, out=args.human),
                      [man.cycles_max] * sum(len(r) for r in routing_rows.values()),
                      to_json=lambda report: {"ran": True, **report.to_json(), **chart}, ran=True, **man.summary())


def draw(cm, man, args) -> dict:
    """--chart: the tray's timeline under the first routing, each slot framed with its
    expert (``man``: the layer's manifest); what was written (for --json)."""
    import types

    from firmware_gen.chart import tray_chart
    mt = cm.mt
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
    return chart


def print_routings(cm, man, routing_rows: dict, args, chart: dict) -> int:
    """--no-run: each routing's rounds and experts per token."""
    import numpy as np
    table = Table(Column("routing", 10), right("rounds", 6), Column("experts per token", gap=2))
    rows = [[name, len(rs), "; ".join(",".join(map(str, row)) for row in cm.routings[name])]
            for name, rs in routing_rows.items()]
    print("", *table.text(rows), sep="\n", file=args.human)
    if args.json:
        print_json({"ran": False, **man.summary(),
                    "routings": {n: np.asarray(v).tolist() for n, v in cm.routings.items()},
                    "rounds": {n: len(r) for n, r in routing_rows.items()}, **chart})
    return EXIT_OK
