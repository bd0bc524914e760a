"""A BERT run as a decoder on chip, teacher-forced, one run a position (``sim/flows/bert_on_chip.py``):
on the golden model, a small BERT on a tile of 8 + 8 MEM slices (its weight blocks striped over
the groups of four in turn), every run continuing from the SRAM the last one left."""

import numpy as np
import pytest

from firmware_gen.host.bert_loop import quantise_bert
from lpu_arch import TileConfig
from lpu_arch.config import ConfigError, DECODER_FIELDS

from sim.flows.bert_on_chip import MINILM_TILE, minilm_config, run_bert_on_chip

from tests.firmware_gen.test_bert_loop import small_bert


def test_a_small_bert_teacher_forced_on_chip():
    rng = np.random.default_rng(5)
    model = small_bert(H=64, I=128, vocab=48)
    loop = quantise_bert(model, [list(rng.integers(0, 48, 24)) for _ in range(8)])
    cfg = TileConfig().with_overrides(list(DECODER_FIELDS) + ["mem_slices=8", "vxm_param_depth=1024", "vxm_tables=32",
                                                              "mxm_xbuf_depth=1024"])
    tokens = [int(t) for t in rng.integers(0, 48, 5)]
    rep = run_bert_on_chip(model, loop, tokens, cfg)
    assert rep.passed, rep.problems
    assert [r["id"] for r in rep.rows] == [r["integer"] for r in rep.rows]
    assert rep.figures["positions"] == len(tokens)
    # the blocks are striped over both groups of four slices of each hemisphere
    from firmware_gen.compiler.token_loop import TokenLoop
    tl = TokenLoop(cfg, loop, 1, prompt_len=1)
    used = {n for n, rows in tl.state.loaded.items() if rows}
    assert {"MEM_W0", "MEM_W4", "MEM_E0", "MEM_E4"} <= used


def test_the_minilm_tile_fits_the_host_map():
    cfg = minilm_config()
    assert cfg.mem_slices == 8 and cfg.mem_depth == 1 << 18
    with pytest.raises(ConfigError, match="host map"):
        from lpu_arch.hostmap import check_fits
        check_fits(cfg.with_overrides(["mem_depth=524288"]))
    with pytest.raises(ConfigError, match="iq_depth"):
        TileConfig().with_overrides(["iq_depth=1048576"])
    assert "iq_depth=131072" in MINILM_TILE
