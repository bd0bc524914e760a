"""``lpu plan``: what real models' FFNs need on LP30-scale hardware, planned by
``firmware_gen.host.plan`` (``docs/plan.md``) and printed here as a table, a bar chart
across the models or JSON."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import numpy as np

from lpu_arch.config import PRESET_CLOCK_MHZ

from firmware_gen.host import models as builtin_models
from firmware_gen.host import plan as fw_plan
from firmware_gen.host.model_arch import requested
from sim.cli.common import EXIT_OK, CliError, print_json
from sim.cli.options import add_subcommand, json_option, nonneg_real, positive_real
from sim.table import Column, Table, right

DESCRIPTION = """\
What a model's FFN side needs on LP30-scale hardware: the FFN and MoE parameters (dense
layers, routed and shared experts, routers, MTP layers), their bytes in a weight format,
the share of all parameters that is FFN, the LP30 chips, trays and racks that hold the FFN
weights in SRAM, and the per-token decode time of the FFN side.

Every number says where it comes from: parameter counts are arithmetic on the model's
config.json; the FFN time is one expert (or dense layer share) compiled on a tile preset
and run on the golden model (cycles equal to the compiler's, output bit-exact), times the
layers, plus the C2C hops of the placement (analytic); bf16, int4 and mxfp4 times are
analytic (the tile has an int8 datapath only)."""

EPILOG = f"""\
{textwrap.fill("Placement rule: " + fw_plan.PLACEMENT_RULE, 92)}

{textwrap.fill("Hops: " + fw_plan.HOP_RULE, 92)}

LP30 public figures used: {fw_plan.LP30_SRAM_BYTES / 1e6:g} MB SRAM and 150 TB/s SRAM bandwidth per chip,
{fw_plan.CHIPS_PER_TRAY} chips per tray, {fw_plan.TRAYS_PER_RACK} trays per rack, 640 TB/s scale-up bandwidth per rack.

Examples:
  lpu plan --model deepseek-r1 --dtype fp8
  lpu plan --model all --json > plan.json
  lpu plan --hf-config path/to/config.json --dtype bf16 --no-golden"""

CHART_FORMATS = (".svg", ".png")


def add_parser(sub) -> None:
    p = add_subcommand(sub, "plan", run, help="what real models' FFNs need on LP30-scale hardware",
                       description=DESCRIPTION, epilog=EPILOG)
    src = p.add_mutually_exclusive_group()
    src.add_argument("--model", metavar="NAME", help=f"a built-in model: {', '.join(builtin_models.MODELS)}, or all "
                                                     "(default: all)")
    src.add_argument("--hf-config", metavar="PATH",
                     help="a Hugging Face config.json (or a model directory holding one) instead of a built-in model")
    p.add_argument("--dtype", default="fp8", metavar="|".join(fw_plan.DTYPES),
                   help="weight format: bytes per weight and how the time is obtained (default: fp8)")
    p.add_argument("--config", default=fw_plan.DEFAULT_CONFIG, metavar="PRESET|FILE",
                   help=f"tile the experts are compiled on: a TileConfig preset or a .toml/.json file "
                        f"(default: {fw_plan.DEFAULT_CONFIG})")
    p.add_argument("--clock-mhz", type=positive_real, default=None,
                   help=f"tile clock for times (default: the preset's, lpu_arch.config.PRESET_CLOCK_MHZ: lp30 "
                        f"{PRESET_CLOCK_MHZ['lp30']:g}, where its SRAM reads 150 TB/s; {fw_plan.CLOCK_MHZ:g}, "
                        "TSP v1's, for the other presets and for a file)")
    p.add_argument("--hop-ns", type=nonneg_real, default=None,
                   help="latency of one C2C hop in ns (default: the link budget of lpu_arch/c2c.py at the clock)")
    p.add_argument("--no-golden", action="store_true",
                   help="do not run the compiled experts on the golden model (times then 'compiled (cycles "
                        "predicted by the compiler)')")
    json_option(p, "the plan", " (a list for --model all)")
    p.add_argument("--chart", metavar="PATH", help="draw a bar chart across the models (.svg or .png)")


def progress(msg: str) -> None:
    """A progress line of the plan (each shape compiled and run) on stderr."""
    print(f"lpu plan: {msg}", file=sys.stderr, flush=True)


def run(args) -> int:
    clock_mhz = fw_plan.check_request(args.dtype, args.config, args.clock_mhz, args.hop_ns)
    if args.chart and Path(args.chart).suffix.lower() not in CHART_FORMATS:
        raise CliError(f"cannot write a chart as {Path(args.chart).suffix or 'a file without extension'!r}; "
                       "use a name ending in .svg or .png")
    todo = requested(args.model, args.hf_config)
    plans = fw_plan.plan_models(todo, args.dtype, args.config, clock_mhz, args.hop_ns, golden=not args.no_golden,
                                progress=None if args.json else progress)
    if args.chart:
        chart(plans, Path(args.chart))
    if args.json:
        print_json(plans[0] if len(plans) == 1 else plans)
    else:
        print(table(plans))
        if args.chart:
            print(f"chart: {args.chart}")
    return EXIT_OK


def billions(n) -> str:
    """A parameter count in billions (or millions below a billion)."""
    return f"{n / 1e9:,.1f}B" if n >= 1e9 else f"{n / 1e6:,.1f}M"


PLANS = Table(Column("model", 16), right("FFN params", 11), right("total", 10), right("FFN %", 6),
              right("FFN GB", 8), right("chips", 6), right("trays", 6), right("racks", 5),
              right("FFN us/token", 12), right("at 150 TB/s", 11))


def table(plans: list) -> str:
    """The human-readable table: a line per model (:data:`PLANS`), then what each figure rests on."""
    head = PLANS.head()
    lines = [head, "-" * len(head)]
    for p in plans:
        t = p["time"]
        lines.append(PLANS.line(p["title"], billions(p["params"]["ffn"]), billions(p["params"]["total"]),
                                f"{100 * p['params']['ffn_share']:.1f}%", f"{p['bytes']['ffn'] / 1e9:.1f}",
                                p["placement"]["chips"], p["placement"]["trays"], p["placement"]["racks"],
                                f"{t['per_token_us']:.1f}", f"{t['lp30_sram_bw_bound_us']:.2f}"))
    p0 = plans[0]
    lines += ["", f"dtype {p0['dtype']}: {p0['dtype_note']}",
              f"tile preset {p0['config']} at {p0['clock_mhz']:g} MHz; chips of {fw_plan.LP30_SRAM_BYTES / 1e6:g} MB "
              f"SRAM, {fw_plan.CHIPS_PER_TRAY} per tray, {fw_plan.CHIPS_PER_RACK} per rack (LP30 public figures)"]
    for p in plans:
        t = p["time"]
        units = "; ".join(f"{u['unit']} H={u['H']} I={u['I']}: {u['cycles_int8']} cycles ({u['source']})"
                          for u in t["units"])
        lines.append(f"{p['title']}: per-token FFN time {t['per_token_us']:.1f} us = {t['compute_us']:.1f} compute "
                     f"+ {t['hops_us']:.2f} for {t['hops']['per_token']} hops of {t['hops']['per_hop_ns']:.1f} ns; "
                     f"{t['source']}. {units}"
                     + (f"; MTP adds {t['mtp_extra_us']:.1f} us per draft token" if t["mtp_extra_us"] else ""))
        lines += [f"  note: {n}" for n in p["notes"]]
    lines.append("counts: parameter arithmetic on the config; chips, trays, racks: the placement rule (--help); "
                 "'at 150 TB/s': analytic bound at LP30's public SRAM bandwidth")
    return "\n".join(lines)


def chart(plans: list, path: Path) -> Path:
    """A bar chart across models (``path``, .svg or .png): the chips that hold the FFN
    weights, and the per-token FFN time (compiled on the preset, and the bound at LP30's
    SRAM bandwidth)."""
    from firmware_gen.chart import pyplot, save_figure
    plt = pyplot()
    x = np.arange(len(plans))
    with plt.rc_context({"svg.fonttype": "none", "font.size": 9, "path.simplify": True}):
        fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 4.2))
        chips_axes(a1, plans, x)
        time_axes(a2, plans, x)
        for a in (a1, a2):
            a.set_xticks(x, [p["title"] for p in plans], rotation=30, ha="right")
            a.spines[["top", "right"]].set_visible(False)
        fig.tight_layout()
        return save_figure(plt, fig, path)


def chips_axes(ax, plans: list, x) -> None:
    """The chart's left half: the chips (and racks) that hold each model's FFN weights."""
    chips = [p["placement"]["chips"] for p in plans]
    ax.bar(x, chips, color="#4c72b0")
    for i, p in enumerate(plans):
        ax.text(i, chips[i], f"{chips[i]}\n{p['placement']['racks']} rack{'s' * (p['placement']['racks'] > 1)}",
                ha="center", va="bottom", fontsize=7)
    for r in range(1, max(p["placement"]["racks"] for p in plans)):
        ax.axhline(r * fw_plan.CHIPS_PER_RACK, color="#999", lw=0.6, ls=":")
    ax.set_ylabel(f"LP30 chips ({fw_plan.LP30_SRAM_BYTES / 1e6:g} MB SRAM each)")
    ax.set_title(f"chips holding the FFN weights ({plans[0]['dtype']})", loc="left")
    ax.set_ylim(0, max(chips) * 1.2)


def time_axes(ax, plans: list, x) -> None:
    """The chart's right half: each model's per-token FFN time, compiled (or analytic) and
    the bound at LP30's SRAM bandwidth, on a log scale."""
    p0, w = plans[0], 0.38
    comp = [p["time"]["per_token_us"] for p in plans]
    bound = [p["time"]["lp30_sram_bw_bound_us"] for p in plans]
    lab = "compiled" if p0["dtype"] in fw_plan.COMPILED_DTYPES else "analytic"
    ax.bar(x - w / 2, comp, w, color="#dd8452", label=f"{lab} on {p0['config']} at {p0['clock_mhz']:g} MHz + C2C hops")
    ax.bar(x + w / 2, bound, w, color="#55a868", label="analytic: LP30 150 TB/s SRAM bound")
    for i in range(len(plans)):
        ax.text(i - w / 2, comp[i], f"{comp[i]:.0f}", ha="center", va="bottom", fontsize=6.5)
        ax.text(i + w / 2, bound[i], f"{bound[i]:.0f}", ha="center", va="bottom", fontsize=6.5)
    ax.set_yscale("log")
    ax.set_ylim(min(bound) / 2, max(comp) * 4)
    ax.set_ylabel("FFN time per decoded token (us, log scale)")
    ax.set_title("per-token decode time of the FFN side", loc="left")
    ax.legend(fontsize=7, loc="upper left")
