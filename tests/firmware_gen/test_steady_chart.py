"""The steady-state picture of a tray's decode loop (lpu decode --tiles N --chart): runs laid
end to end with only the host's bus segments between them, each tile's span and link
transfer where the golden model's timing puts them."""

import numpy as np
import pytest

from firmware_gen.chart import ChartError, tray_transfers
from firmware_gen.compiler.ffn_example import example_ffn
from firmware_gen.compiler.system import deskew_slacks, wall_cycles
from firmware_gen.compiler.tray import compile_tray_layer
from firmware_gen.golden import archmodel
from firmware_gen.steady_chart import place_runs, run_timeline, steady_chart
from lpu_arch import TileConfig, c2c
from lpu_arch.topology import Topology

SOURCES = {"host": "RTL measurement (host bus)", "tiles": "RTL measurement (START_HAC, done)",
           "links": "compiler (SEND, RECV)"}


def synthetic_runs(positions=4, layers=2, host=(40, 12)):
    """Two tiles, ``layers`` runs a position: tile 1 done 10 cycles after tile 0, one
    transfer each way; MoE-like experts per tile."""
    runs = []
    for p in range(positions):
        for l in range(layers):
            runs.append({"position": p, "layer": l, "tiles": [[32, 100], [32, 110 + l]],
                         "links": [[0, 1, 50, 70], [1, 0, 52, 75]], "tile_experts": [[2 * l], []],
                         **({"host": list(host)} if host else {})})
    return runs


def test_runs_follow_one_another_with_only_the_host_between():
    runs = synthetic_runs()
    placed = place_runs(runs, positions=3)
    assert len(placed) == 3 * 2                        # the first three positions only
    now = 0
    for p, r in zip(placed, runs):
        assert p["host_before"] == (now, now + 40) and p["start"] == now + 40
        assert p["spans"] == [(p["start"] + a, p["start"] + b) for a, b in r["tiles"]]
        assert p["end"] == p["start"] + max(b for _, b in r["tiles"])
        assert p["host_after"] == (p["end"], p["end"] + 12)
        assert p["transfers"][0] == (0, 1, p["start"] + 50, p["start"] + 70)
        now = p["host_after"][1]
    golden = place_runs(synthetic_runs(host=None), positions=2)     # host time not simulated: back to back
    assert [p["start"] for p in golden] == [0, 110, 221, 331]


def test_the_picture_says_what_it_shows_and_where_it_came_from(tmp_path):
    a = steady_chart(synthetic_runs(), tmp_path / "a.svg", sources=SOURCES, tokens=[5, 6, 7, 8],
                     title="four positions", first_load="before cycle 0: the first load")
    svg = a.read_text()
    for text in ("four positions", "before cycle 0: the first load", "RTL measurement (host bus)",
                 "compiler (SEND, RECV)", "host", "link 0\u20131", "tile 1", "position 2, token 7", "L1 e2",
                 "L0 \u2013", "\u00b5s at 900 MHz", "host bus: y read"):
        assert text in svg, text
    assert "position 3" not in svg                      # three positions by default
    assert steady_chart(synthetic_runs(), tmp_path / "b.svg", sources=SOURCES, tokens=[5, 6, 7, 8],
                        title="four positions", first_load="before cycle 0: the first load").read_bytes() == \
        a.read_bytes()
    golden = steady_chart(synthetic_runs(host=None), tmp_path / "g.png", sources=SOURCES, positions=1)
    assert golden.stat().st_size > 0
    with pytest.raises(ChartError, match="no tray runs"):
        steady_chart([], tmp_path / "c.svg", sources=SOURCES)
    with pytest.raises(ChartError, match="1 to 8"):
        steady_chart(synthetic_runs(), tmp_path / "c.svg", sources=SOURCES, positions=9)
    with pytest.raises(ChartError, match=".svg or .png"):
        steady_chart(synthetic_runs(), tmp_path / "c.pdf", sources=SOURCES)


def test_a_tray_runs_timeline_is_the_golden_models():
    """A dense layer on 2 tiles run by the system golden model: each tile starts at the
    arming lead and is done at the wall cycles c2c predicts for it; every transfer of the
    programs is there, received after it is sent; measured offsets equal to the model's
    give the same timeline."""
    ex = example_ffn("swiglu", 8, 16, 1, seed=2)
    layer = compile_tray_layer(ex.spec, TileConfig.tiny(), 2)
    progs = layer.programs_for(ex.x_int8)
    res = archmodel.run_system(progs, Topology(2).peer, layer.manifest.min_distance)
    cycles = [r.cycles for r in res]
    tl = run_timeline(progs, cycles)
    assert [a for a, _ in tl["tiles"]] == [c2c.START_LEAD] * 2
    assert [d for _, d in tl["tiles"]] == [wall_cycles([p], [c]) for p, c in zip(progs, cycles)]
    assert max(d for _, d in tl["tiles"]) == wall_cycles(progs, cycles)
    assert len(tl["links"]) == len(tray_transfers(progs)) > 0
    assert all(send < recv for _, _, send, recv in tl["links"])
    offsets = [c2c.START_LEAD + deskew_slacks(p) for p in progs]
    assert run_timeline(progs, cycles, c2c.START_LEAD, offsets) == tl
