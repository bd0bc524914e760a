"""`make bench`'s decode-loop rows (``docs/afd.md``), on the golden model.

Per model: each layer's cycles (checked against the golden model at every position), the
tile's cycles per token, the bytes crossing per token each way, the tokens/s the tile side
allows at ``CLOCK_MHZ`` and whether ``sim.flows.decode.check`` passed (the MoE decoder and
all-MiniLM-L6-v2 as a decoder run every FFN on a tray).  Then the teacher-forced accuracy
of int8 and FP8 FFNs against float, on the synthetic decoders and, when its package is
installed, all-MiniLM-L6-v2 (its FFNs in a synthetic decoder, and the whole model run as a
decoder by ``decoder.from_bert``), with one output scale per FFN and per channel."""

from __future__ import annotations

import numpy as np

from firmware_gen.host.decoder import (CALIBRATION_TEXT, EVAL_TEXT, calibrate, from_bert, synthetic, teacher_forced,
                                  with_packaged_ffns, wordpiece)
from firmware_gen.host.plan import CLOCK_MHZ      # TSP v1's clock (design brief): an assumption for the tile's time
from firmware_gen.host.weights import find_packaged_model
from lpu_arch import TileConfig
from lpu_arch.hostmap import START_CYCLES

from sim.flows.decode import DECODE_TILE
from sim.flows.decode import (MOE_SYNTHETIC, STEADY_MOE, STEADY_SETS, STEADY_TILES, check, decode_setup, moe_decoder, per_position, run_dense_tray_any,
                              run_golden, run_moe_tray_any)
from sim.table import Table, right

DECODE_MODELS = (          # (name, tile, --set, synthetic's arguments, tokens)
    ("synthetic tiny", "tiny", DECODE_TILE, dict(vocab=64, H=8, I=16, layers=2, heads=2, seed=0), 16),
    ("synthetic H=64 I=256", "default", ("vxm_param_depth=128",),
     dict(vocab=256, H=64, I=256, layers=4, heads=4, seed=0), 16),
)


def decode_rows(moe_tokens: int | None = None, trained: bool = True) -> list[dict]:
    rows = []
    for name, preset, sets, model, tokens in DECODE_MODELS:
        cfg = TileConfig.preset(preset).with_overrides(list(sets))
        setup = decode_setup(cfg.to_dict(), model, (1, 2, 3), tokens)
        g = run_golden(setup)
        rm, L = setup.resident, len(setup.resident.layers)
        per_pos = per_position(g["runs"], L)
        wall = per_pos[0] + L * START_CYCLES
        x_bytes = sum(sum(len(v) for r in ly.x_image(np.zeros(model["H"])).values() for v in r.values())
                      for ly in rm.layers)
        y_bytes = sum(len(ly.manifest.outputs) * cfg.lanes for ly in rm.layers)
        rows.append({"model": name, "config": preset, "config_sets": list(sets), "layers": L,
                     "layer_cycles": [ly.manifest.cycles for ly in rm.layers], "cycles_per_token": per_pos[0],
                     "wall_cycles_per_token": wall,
                     "identical_every_token": len(set(per_pos)) == 1, "positions": len(per_pos),
                     "bytes_to_tile_per_token": x_bytes, "bytes_from_tile_per_token": y_bytes,
                     "tokens_per_second_at_clock": round(CLOCK_MHZ * 1e6 / wall), "clock_mhz": CLOCK_MHZ,
                     "weights_loaded_once_bytes": rm.loaded_bytes()["weights"],
                     "host_seconds": round(g["host_s"], 4), "exact": not check(setup, g, g),
                     "batched": batched(setup.model.specs, cfg)})
    rows.append(moe_row(MOE_TOKENS if moe_tokens is None else moe_tokens))
    rows.append(moe_row(MOE_TOKENS if moe_tokens is None else moe_tokens, STEADY_MOE, STEADY_SETS))
    path = find_packaged_model() if trained else None
    if path is not None:
        rows.append(bert_tray_row(path))
    return rows


BERT_TRAY_TILES, BERT_TRAY_PROMPT, BERT_TRAY_TOKENS = 8, 4, 2


def bert_tray_row(path) -> dict:
    """all-MiniLM-L6-v2 as a decoder, per-channel int8 FFNs (1.18 MB of weights: more
    than one default tile) on ``BERT_TRAY_TILES`` default tiles (``decode.run_dense_tray``)."""
    model, vocab = from_bert(path)
    m = calibrate(model, wordpiece(CALIBRATION_TEXT, vocab), out_scale_per_row=True)
    g = run_dense_tray_any(m, wordpiece(EVAL_TEXT, vocab)[:BERT_TRAY_PROMPT], BERT_TRAY_TOKENS,
                           TileConfig.default(), BERT_TRAY_TILES)
    return _tray_row("all-MiniLM-L6-v2 as a decoder, int8 FFNs (per channel), every FFN on a tray"
                     + (" (resident)" if g["resident"] else " (loads per run: the layers do not fit together)"),
                     g, len(m.layers), BERT_TRAY_TILES, sorted({r["cycles"] for r in g["runs"]}),
                     not_resident=g["not_resident"])


def _tray_row(model: str, g: dict, L: int, tiles: int, layer_cycles: list, **extra) -> dict:
    """The row of a decoder of ``L`` layers whose every FFN ran on a tray of ``tiles`` default
    tiles (``g``: ``decode.run_moe_tray``'s or ``decode.run_dense_tray``'s result); ``extra``
    keys follow the model's name."""
    per_pos, wall = per_position(g["runs"], L), per_position(g["runs"], L, "wall_cycles")
    first = g["runs"][:L]
    return {"model": model, **extra, "config": f"{tiles} x default", "config_sets": [], "layers": L,
            "layer_cycles": layer_cycles, "cycles_per_token": per_pos[0], "wall_cycles_per_token": wall[0],
            "identical_every_token": len(set(per_pos)) == 1 and len(set(wall)) == 1, "positions": len(per_pos),
            "bytes_to_tile_per_token": sum(r["bytes_in"] for r in first),
            "bytes_from_tile_per_token": sum(r["bytes_out"] for r in first),
            "tokens_per_second_at_clock": round(CLOCK_MHZ * 1e6 / wall[0]), "clock_mhz": CLOCK_MHZ,
            "tiles": tiles, "host_seconds": round(g["host_s"], 4), "exact": not g["problems"],
            "problems": g["problems"][:5]}


MOE_TOKENS, MOE_TILES = 8, STEADY_TILES
BATCH = 4                  # sequences per FFN run for the batched throughput figure


def batched(specs: list, cfg: TileConfig, batch: int = BATCH, seed: int = 5) -> dict:
    """Every layer resident with ``batch`` columns (one run per layer serves ``batch``
    sequences), each run once on the golden model and checked; tokens/s at ``CLOCK_MHZ``
    from the wall cycles (cycles + ``START_CYCLES`` per layer)."""
    from firmware_gen.compiler import CompileError
    from firmware_gen.golden.numerics import ffn_int
    from firmware_gen.compiler.resident import compile_resident, run_layer
    from firmware_gen.scoreboard import compare, ffn_reference, golden_observed, promise, row_vectors
    try:
        rm = compile_resident(specs, cfg, batch=batch)
    except CompileError as e:
        return {"batch": batch, "fits": False, "why": str(e)}
    rng, exact, mem = np.random.default_rng(seed), True, None
    for l, ly in enumerate(rm.layers):
        x = rng.integers(-128, 128, (batch, ly.spec.H))
        res, y = run_layer(rm, l, x, mem)
        mem = res.memory
        exact &= not compare(golden_observed(res, outputs=row_vectors("y", y)), promise(cycles=ly.manifest.cycles),
                             ffn_reference(ffn_int(ly.spec, x)))
    wall = sum(ly.manifest.cycles + START_CYCLES for ly in rm.layers)
    return {"batch": batch, "fits": True, "layer_cycles": [ly.manifest.cycles for ly in rm.layers],
            "wall_cycles_per_step": wall, "tokens_per_second_at_clock": round(batch * CLOCK_MHZ * 1e6 / wall),
            "exact": bool(exact)}


def moe_name(a: dict = MOE_SYNTHETIC) -> str:
    return (f"synthetic MoE {a['layers']} layers H={a['H']} I={a['I']}, {a['experts']} experts top-{a['top_k']} + "
            f"{a['shared']} shared")


def moe_row(tokens: int = 8, model: dict = MOE_SYNTHETIC, sets=()) -> dict:
    """A MoE decoder (default ``MOE_SYNTHETIC``: 8 routed experts, top-2, one shared, per
    layer) with every MoE layer on ``MOE_TILES`` default tiles (``sets`` applied), by the
    system golden model: every layer resident when the model fits (``decode.run_moe_tray_any``,
    activation tables as ``decode.moe_decoder`` chooses), else each layer loaded per run."""
    cfg = TileConfig.default().with_overrides(list(sets))
    m, tables, rt = moe_decoder(model, cfg, MOE_TILES)
    g = run_moe_tray_any(m, (1, 2, 3), tokens, cfg, MOE_TILES, rt=rt)
    L = len(m.layers)
    layer_cycles = [sorted({r["cycles"] for r in g["runs"] if r["layer"] == l}) for l in range(L)]
    how = (f"every layer resident, {g['loaded_once_bytes']:,} B loaded once, a table per {tables['chosen']}"
           if g["resident"] else "weights load per run")
    row = _tray_row(f"{moe_name(model)}, on a tray ({how})", g, L, MOE_TILES,
                    [c[0] if len(c) == 1 else c for c in layer_cycles], moe_tables=tables)
    return {**row, "config_sets": list(sets), "resident": g["resident"], "holds": g.get("holds")}


def accuracy_rows(positions: int = 64, trained: bool = True) -> list[dict]:
    """Teacher-forced accuracy of the decode loop's synthetic decoders and, with ``trained``
    and the package installed, of the models with all-MiniLM-L6-v2's trained weights."""
    def forced(m):                   # over a seeded random text
        return teacher_forced(m, np.random.default_rng(7).integers(0, m.vocab, positions))

    out = [{"model": name, "weights": "random", **forced(calibrate(synthetic(**kw)))}
           for name, kw in [(m[0], m[3]) for m in DECODE_MODELS] + [(moe_name(), MOE_SYNTHETIC)]]
    path = find_packaged_model() if trained else None
    if path is not None:
        for per_row, scales in ((False, "one output scale per FFN"), (True, "one output scale per channel")):
            r = forced(calibrate(with_packaged_ffns(synthetic(vocab=512, H=384, I=1536, layers=6, heads=6, seed=0),
                                                    path), out_scale_per_row=per_row))
            out.append({"model": f"synthetic attention + all-MiniLM-L6-v2 FFNs ({scales})", "weights": str(path.name),
                        "out_scale_per_row": per_row, **r})
        out += bert_rows(path, positions)
    return out


def bert_rows(path, positions: int = 64, formats=(("int8", False), ("int8", True), ("fp8", False), ("fp8", True))):
    """all-MiniLM-L6-v2 as a decoder, its FFNs quantised per ``formats`` ((dtype, per
    channel)), teacher-forced over the first ``positions`` tokens of ``EVAL_TEXT``."""
    model, vocab = from_bert(path)
    text, cal = wordpiece(EVAL_TEXT, vocab)[:positions], wordpiece(CALIBRATION_TEXT, vocab)
    out = []
    for dtype, per_row in formats:
        r = teacher_forced(calibrate(model, cal, out_scale_per_row=per_row, dtype=dtype), text)
        out.append({"model": f"all-MiniLM-L6-v2 as a decoder, {dtype} FFNs (one output scale per "
                             f"{'channel' if per_row else 'FFN'})", "weights": str(path.name), "dtype": dtype,
                    "out_scale_per_row": per_row, "calibration_tokens": len(cal),
                    "calibration": "fit" if dtype == "int8" else "max", **r})
    return out


LOOPS = Table("model", "tile", right("layers"), "cycles per layer", right("cycles per token"),
              right("wall per token"), "same every token", right("bytes in / out per token"), right("tokens/s"),
              "checks")
BATCHED = Table("model", "cycles per layer", right("wall per step"), right("tokens/s (all sequences)"),
                right("vs batch 1"), "checks")
ACCURACY = Table("model", right("top-1 agreement"), "FFN cosine per layer (mean)", right("min"))


def markdown(rows: list[dict], acc: list[dict]) -> list[str]:
    """bench.md's section of :func:`decode_rows`' ``rows`` (and their batched runs) and
    :func:`accuracy_rows`' ``acc``."""
    trays = "the MoE model's layers" + (" and all-MiniLM-L6-v2's FFNs" if any("MiniLM" in r["model"] for r in rows) else "")
    lines = ["", "Decode loop (golden model; the synthetic dense models' layers resident on one tile, "
             f"{trays} each on a tray of tiles. Cycles per layer and per token: program cycles (SAC); wall: from each run's "
             "start (the CTRL write on one tile, 2 cycles before cycle 0; the host's HAC read on a tray, whose "
             "armed runs add the 32-cycle arming lead and the deskews' slack, c2c.wall_cycles) to done; tokens/s: "
             f"the wall cycles at {CLOCK_MHZ:g} MHz, arithmetic, the tile side alone):", ""]
    lines += LOOPS.markdown([r["model"], " ".join([r["config"], *r["config_sets"]]), r["layers"],
                             ", ".join(map(str, r["layer_cycles"])), r["cycles_per_token"], r["wall_cycles_per_token"],
                             "yes" if r["identical_every_token"] else "NO",
                             f"{r['bytes_to_tile_per_token']} / {r['bytes_from_tile_per_token']}",
                             f"{r['tokens_per_second_at_clock']:,}", "pass" if r["exact"] else "FAIL"] for r in rows)
    bat = [(r, r["batched"]) for r in rows if r.get("batched", {}).get("fits")]
    if bat:
        lines += ["", f"The same models with {bat[0][1]['batch']} sequences per FFN run (every layer resident with "
                  f"{bat[0][1]['batch']} batch columns; each layer run once on the golden model, y bit-exact and cycles "
                  "as predicted):", ""]
        lines += BATCHED.markdown([r["model"], ", ".join(map(str, b["layer_cycles"])), b["wall_cycles_per_step"],
                                   f"{b['tokens_per_second_at_clock']:,}",
                                   f"{b['tokens_per_second_at_clock'] / r['tokens_per_second_at_clock']:.2f}x",
                                   "pass" if b["exact"] else "FAIL"] for r, b in bat)
    lines += ["", "Teacher forcing over 64 positions, int8 (or FP8) FFNs against float (the rest float in both):", ""]
    return lines + ACCURACY.markdown([a["model"], f"{a['top1_agreement']:.1%}",
                                      ", ".join(f"{c:.4f}" for c in a["layer_cosine_mean"]),
                                      f"{min(a['layer_cosine_min']):.3f}"] for a in acc)
