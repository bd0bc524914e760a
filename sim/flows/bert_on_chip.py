"""all-MiniLM-L6-v2 on chip, on the golden model: its integer model (``host/bert_loop.py``)
compiled by the token loop's compiler (``compiler/token_loop.py``) for a tile fitted to hold it
(:data:`MINILM_TILE`), teacher-forced over a text: run ``p`` computes position ``p`` of the text
(the host writes that position's token, nothing else), from the SRAM and base registers run
``p - 1`` left (the caches of every layer), and the id it writes is its argmax.  Checked per run:
the id equals the integer reference's argmax, every WRITE at the cycle the compiler predicted
(``scoreboard.compare``).  Figures: each position's cycles, the on-chip ids' agreement with the
float model's top-1, and compile and run times (this machine's, for scale only).

``python -m sim.bench.bert_loop --on-chip [--positions N]`` renders it."""

from __future__ import annotations

import time

import numpy as np

from firmware_gen.compiler.token_loop import ID_MEM, TokenLoop
from firmware_gen.golden import archmodel
from firmware_gen.golden.archmodel import vector_index
from firmware_gen.golden.token_loop import Caches, LoopModel, step_int
from firmware_gen.host.bert_loop import float_step
from firmware_gen.host.decoder import Decoder
from firmware_gen.scoreboard import compare, golden_observed, ids_reference, promise, token_ids
from lpu_arch import TileConfig
from lpu_arch.config import DECODER_FIELDS
from lpu_arch.hostmap import check_fits

from sim.report import Report

# The default tile with the decoder's fields, sized for all-MiniLM-L6-v2 (22 MB of int8 weights,
# the tied embedding stored twice: as rows for the lookup and as the LM head's blocks):
# 8 + 8 MEM slices of 2**18 rows (the host map's limit at 16 lanes); a position takes up to 69,948
# instructions in a MEM slice's queue, 4,396 parameter entries, 55 tables, 451 x slots (up to
# slot 851) and accumulator rows up to 418.
MINILM_TILE = (*DECODER_FIELDS, "mem_slices=8", "mem_depth=262144", "iq_depth=131072", "trace_depth=2048",
               "vxm_param_depth=8192", "vxm_tables=64", "mxm_acc_depth=1024", "mxm_xbuf_depth=1024")


def minilm_config() -> TileConfig:
    cfg = TileConfig().with_overrides(list(MINILM_TILE))
    check_fits(cfg)
    return cfg


def run_bert_on_chip(model: Decoder, loop: LoopModel, tokens, cfg: TileConfig | None = None,
                     progress=None) -> Report:
    """Positions ``0 .. len(tokens) - 1`` of ``tokens``, one run each (see the module); ``model``:
    the float model ``loop`` was quantised from.  ``progress(p, row)`` after each position."""
    cfg = cfg or minilm_config()
    caches, fcache, memory, bases = Caches(), {}, None, None
    rows, problems = [], []
    for p, t in enumerate(int(t) for t in tokens):
        t0 = time.perf_counter()
        tl = TokenLoop(cfg, loop, 1, prompt_len=1, start=p)
        t1 = time.perf_counter()
        r = archmodel.run(tl.program([t], memory=memory), bases=bases)
        t2 = time.perf_counter()
        memory, bases = r.memory, r.base_words()
        ids = [vector_index(r.memory[ID_MEM][row]) for row in tl.id_rows]
        want = int(np.argmax(step_int(loop, t, caches)))
        top = int(np.argmax(float_step(model, t, fcache)))
        seen = golden_observed(r, outputs=token_ids(ids), outputs_as="ids")
        problems += [q.at(f"position {p}") for q in compare(seen, promise(*tl.manifest()), ids_reference([want]),
                                                             skip=("write values",))]
        row = {"position": p, "token": t, "id": ids[0], "integer": want, "float": top, "cycles": tl.cycles,
               "compile_s": round(t1 - t0, 1), "run_s": round(t2 - t1, 1)}
        rows.append(row)
        if progress:
            progress(p, row)
    agree = sum(r["id"] == r["float"] for r in rows)
    data = {"passed": not problems, "positions": len(rows), "agree": agree,
            "top1_agreement": round(agree / max(len(rows), 1), 4),
            "cycles_min": min(r["cycles"] for r in rows), "cycles_max": max(r["cycles"] for r in rows),
            "problems": problems, "positions_run": rows}
    return Report.of("bert-on-chip", data, rows_key="positions_run")
