"""The floor of a token's latency on a tray (``timing.token_floor``, ``docs/moe.md``, *The
floor*) against hand arithmetic on the stated positions and latencies of the configuration,
and against compiled MoE layers (no mapping beats it)."""

import dataclasses

import pytest

from lpu_arch import TileConfig, c2c
from lpu_arch.isa import C2C_LATENCY, MXM_LATENCY, READ_LATENCY
from lpu_arch.timing import last_arrival, token_floor


def tray(cfg, tiles):
    return dataclasses.replace(cfg, links=tiles - 1)


def test_the_default_trays_floor_by_hand():
    # The default tile on a tray of 8: MXM_W 0, SXM_W 1, C2C_W 2, MEM_W3..MEM_W0 3..6, VXM 7
    # (and the mirror image east); min_distance 35 (1 + 4 flits + 16 wire + 8 + 6 skew).
    cfg = tray(TileConfig.default(), 8)
    assert [cfg.position(n) for n in ("MXM_W", "C2C_W", "MEM_W3", "MEM_W0", "VXM", "MEM_E0")] == [0, 2, 3, 6, 7, 8]
    assert (READ_LATENCY, MXM_LATENCY, cfg.vxm_latency, C2C_LATENCY, c2c.min_distance(cfg)) == (1, 3, 3, 1, 35)
    # The bench's layer: 5 experts (top-4 and the shared one) of H=64, I=128 on 16 lanes:
    # W1 and W3 are 2 x 4 x 8 blocks of 16 rows each, 5120 vectors, 320 per MXM of the tray.
    f = token_floor(cfg, 8, 5 * 2 * 4 * 8 * 16)
    # The west slices' READs reach MXM_W after 1 + 3..6 = 4..7 cycles; reading one a cycle from 0
    # they have delivered (A - 3) + (A - 4) + (A - 5) + (A - 6) = 4A - 18 vectors by cycle A: 320 at A = 85.
    assert f["gate_up"] == 85
    # MM on 86, its result at the VXM (7 away) on 86 + 3 + 7 = 96, the VOP's h there on 99
    assert f["h"] == 99
    # to C2C_W (5 away): SENDM on 104; RECV on 104 + 35 = 139; driven on 140, at MXM_W (2 away) on 142
    assert f["h_in"] == 142
    # W2's MM on 143, the VOP on 143 + 3 + 7 = 153, y on 156, WRITE into MEM_W0 or MEM_E0 (1 away) on 157
    assert f["write"] == 157
    # the queues halt on 158, the tile is done on 159 and counts it: 160
    assert f["floor"] == 160


def test_the_tiny_trays_floor_by_hand():
    # The tiny tray tile on 4 tiles: MXM_W 0, C2C_W 2, MEM_W1 3, MEM_W0 4, VXM 5; vxm_latency 4;
    # one flit per vector, so min_distance = 1 + 1 + 16 + 8 + 6 = 32.
    cfg = tray(TileConfig.tiny_tray(), 4)
    assert [cfg.position(n) for n in ("MXM_W", "C2C_W", "MEM_W1", "MEM_W0", "VXM")] == [0, 2, 3, 4, 5]
    assert (cfg.vxm_latency, c2c.min_distance(cfg)) == (4, 32)
    # 3 experts of H=8, I=8 on 4 lanes: 3 x 2 x 2 x 2 blocks of 4 rows, 96 vectors, 12 per MXM;
    # leads 4 and 5: (A - 3) + (A - 4) >= 12 at A = 10.
    f = token_floor(cfg, 4, 3 * 2 * 2 * 2 * 4)
    assert f["gate_up"] == 10
    assert f["h"] == 10 + 1 + 3 + 5 + 4                     # 23
    assert f["h_in"] == 23 + 3 + 32 + 1 + 2                 # 61
    assert f["write"] == 61 + 1 + 3 + 5 + 4 + 1             # 75
    assert f["floor"] == 78


def test_one_tile_turns_h_round_on_the_tile():
    # One default tile has no C2C slices: MXM_W 0, SXM_W 1, MEM_W3..MEM_W0 2..5, VXM 6.
    cfg = TileConfig.default()
    assert [cfg.position(n) for n in ("MXM_W", "MEM_W3", "MEM_W0", "VXM")] == [0, 2, 5, 6]
    f = token_floor(cfg, 1, 1024)                           # 512 rows per MXM, leads 3..6: 4A - 14 >= 512 at A = 132
    assert f["gate_up"] == 132
    assert f["h"] == 132 + 1 + 3 + 6 + 3
    assert f["h_in"] == f["h"] + 6                          # the VXM's h straight back to MXM_W, no link
    assert f["floor"] == f["h_in"] + 1 + 3 + 6 + 3 + 1 + 3


def test_last_arrival():
    assert last_arrival([4, 5, 6, 7], 320) == 85
    assert last_arrival([1], 1) == 1
    assert last_arrival([2, 2], 4) == 3


@pytest.mark.parametrize("mapping, tiles, E, k", [("ep", 4, 8, 2), ("tp", 4, 4, 2), ("ep", 1, 3, 2)])
def test_no_compiled_layer_beats_the_floor(mapping, tiles, E, k):
    from firmware_gen.compiler.moe_tray import compile_moe
    from firmware_gen.golden.moe import example_moe
    ex = example_moe(E=E, top_k=k, shared=1, H=8, I=8, batch=1, seed=tiles)
    man = compile_moe(ex.spec, ex.x_int8, TileConfig.tiny_tray(), tiles=tiles, mapping=mapping).manifest()
    assert man.floor == token_floor(man_cfg(tiles), tiles, (k + 1) * 2 * 2 * 2 * 4)["floor"]
    assert man.cycles_max >= max(man.floor, man.needed_bound)


def man_cfg(tiles):
    return tray(TileConfig.tiny_tray(), tiles) if tiles > 1 else TileConfig.tiny_tray()
