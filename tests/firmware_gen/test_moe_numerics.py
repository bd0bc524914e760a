"""firmware_gen.golden.moe: routing, the integer golden model of the experts, the combine, the loader
(numpy only, no RTL).

Routing cases are built so the expected selection and gates are worked out by hand: the
router is the identity (H = E), so a token's logits are its x, chosen as logit(s) for the
scores s wanted."""

import json

import numpy as np
import pytest

from firmware_gen.golden import numerics as nm
from firmware_gen.golden.quantise import quantise_activations
from firmware_gen.golden.moe import (
    Expert, MoeError, MoeLayer, MoeSpec, Router, combine, example_moe, moe_error_report, moe_float, moe_int,
    moe_run, quantise_input, route,
)
from firmware_gen.host.weights import WeightsError, load_moe

from tests.safetensors_files import write_safetensors, write_sharded

S = np.array([0.60, 0.55, 0.10, 0.20, 0.50, 0.52, 0.95, 0.01])
"""Scores of one token over 8 experts in 4 groups of 2: group sums 1.15, 0.30, 1.02, 0.96."""


def logit(p):
    p = np.asarray(p, dtype=np.float64)
    return np.log(p / (1 - p))


def grouped(bias=None, top_k=2, n_group=4, topk_group=2, **kw):
    return Router(np.eye(8), top_k, "sigmoid-grouped", bias=bias, n_group=n_group, topk_group=topk_group,
                  routed_scaling_factor=kw.pop("routed_scaling_factor", 2.5), **kw)


def test_grouped_routing_excludes_the_best_expert_of_a_losing_group():
    # groups 0 {0,1} (1.15) and 2 {4,5} (1.02) win; expert 6 (0.95, the best) is in group 3 (0.96)
    idx, gates = route(grouped(), logit(S))
    assert idx.tolist() == [[0, 1]]
    np.testing.assert_allclose(gates, [[0.60 / 1.15 * 2.5, 0.55 / 1.15 * 2.5]], rtol=1e-12)
    idx, _ = route(grouped(n_group=1, topk_group=1), logit(S))      # without the group limit
    assert idx.tolist() == [[6, 0]]


def test_bias_changes_the_selection_not_the_gates():
    bias = np.zeros(8)
    bias[5] = 0.1                      # c5 = 0.62 > c0 = 0.60 > c1 = 0.55; groups 0 and 2 still win
    idx, gates = route(grouped(bias), logit(S))
    assert idx.tolist() == [[5, 0]]
    np.testing.assert_allclose(gates, [[0.52 / 1.12 * 2.5, 0.60 / 1.12 * 2.5]], rtol=1e-12)   # unbiased s
    bias = np.zeros(8)
    bias[7] = 0.2                      # group 3 becomes 0.95 + 0.21 = 1.16 and beats group 2
    idx, gates = route(grouped(bias), logit(S))
    assert idx.tolist() == [[6, 0]]
    np.testing.assert_allclose(gates, [[0.95 / 1.55 * 2.5, 0.60 / 1.55 * 2.5]], rtol=1e-12)


def test_grouped_without_normalisation_and_with_top_k_1():
    _, gates = route(grouped(norm_topk_prob=False), logit(S))
    np.testing.assert_allclose(gates, [[0.60 * 2.5, 0.55 * 2.5]], rtol=1e-12)
    idx, gates = route(grouped(top_k=1, routed_scaling_factor=1.0), logit(S))   # HF: no normalisation for k = 1
    assert idx.tolist() == [[0]]
    np.testing.assert_allclose(gates, [[0.60]], rtol=1e-12)


def test_ties_go_to_the_lowest_index():
    idx, gates = route(grouped(), np.zeros((2, 8)))          # every score 0.5: groups 0, 1 then experts 0, 1
    assert idx.tolist() == [[0, 1], [0, 1]]
    np.testing.assert_allclose(gates, 1.25)
    assert route(Router(np.eye(4), 2, "softmax"), np.log([0.1, 0.3, 0.3, 0.3]))[0].tolist() == [[1, 2]]


def test_softmax_routing():
    p = np.array([0.1, 0.4, 0.2, 0.3])
    idx, gates = route(Router(np.eye(4), 2, "softmax"), np.log(p))
    assert idx.tolist() == [[1, 3]]
    np.testing.assert_allclose(gates, [[0.4 / 0.7, 0.3 / 0.7]], rtol=1e-12)
    _, gates = route(Router(np.eye(4), 2, "softmax", norm_topk_prob=False), np.log(p))
    np.testing.assert_allclose(gates, [[0.4, 0.3]], rtol=1e-12)


def test_routing_shapes_and_determinism():
    ex = example_moe(E=16, top_k=4, batch=32, seed=5)
    idx, gates = route(ex.spec, ex.x)
    assert idx.shape == gates.shape == (32, 4) and idx.dtype == np.int64
    assert all(len(set(row)) == 4 for row in idx.tolist())
    np.testing.assert_allclose(gates.sum(-1), 2.5)
    i2, g2 = route(ex.layer, ex.x)
    assert np.array_equal(idx, i2) and np.array_equal(gates, g2)
    i1, g1 = route(ex.spec, ex.x[3])                          # one token as (H,)
    assert np.array_equal(i1, idx[3:4]) and np.array_equal(g1, gates[3:4])


@pytest.mark.parametrize("gating", ["sigmoid-grouped", "softmax"])
def test_moe_int_is_ffn_int_of_each_selected_expert(gating):
    ex = example_moe(E=8, top_k=2, shared=2, H=32, I=16, batch=6, seed=1, gating=gating)
    idx, gates = route(ex.spec, ex.x)
    st = moe_int(ex.spec, ex.x_int8, idx)
    assert st.routed.shape == (6, 2, 32) and st.shared.shape == (6, 2, 32) and st.routed.dtype == np.int8
    for t in range(6):
        for j, e in enumerate(idx[t]):
            assert np.array_equal(st.routed[t, j], nm.ffn_int(ex.spec.experts[e], ex.x_int8[t]))
        for s, sp in enumerate(ex.spec.shared):
            assert np.array_equal(st.shared[t, s], nm.ffn_int(sp, ex.x_int8[t]))
    y = combine(ex.spec, st, gates)
    want = np.zeros((6, 32))
    for t in range(6):
        for j, e in enumerate(idx[t]):
            want[t] += gates[t, j] * ex.spec.experts[e].out_scale * st.routed[t, j]
        for s, sp in enumerate(ex.spec.shared):
            want[t] += sp.out_scale * st.shared[t, s]
    np.testing.assert_allclose(y, want, rtol=1e-13, atol=1e-13)
    y2, st2, g2 = moe_run(ex.spec, ex.x)
    assert np.array_equal(y, y2) and np.array_equal(st2.routed, st.routed)


@pytest.mark.parametrize("gating", ["sigmoid-grouped", "softmax"])
def test_int_path_close_to_the_float_layer(gating):
    ex = example_moe(E=16, top_k=4, shared=1, H=64, I=32, batch=32, seed=2, gating=gating)
    assert moe_error_report(ex.spec, ex.layer, ex.x)["cosine"] > 0.99
    held_out = np.random.default_rng(7).normal(size=(16, 64))
    assert moe_error_report(ex.spec, ex.layer, held_out)["cosine"] > 0.99


def test_moe_float_by_hand():
    ex = example_moe(E=4, top_k=2, shared=1, H=16, I=8, batch=3, seed=4, gating="softmax")
    idx, gates = route(ex.layer, ex.x)
    ffn = lambda e, x: nm.ffn_float("swiglu", e.W1, e.W2, e.W3, None, None, x)
    want = np.array([sum(g * ffn(ex.layer.experts[e], x) for e, g in zip(i, gs)) + ffn(ex.layer.shared[0], x)
                     for x, i, gs in zip(ex.x, idx, gates)])
    np.testing.assert_allclose(moe_float(ex.layer, ex.x), want, rtol=1e-12)


def test_experts_share_the_layer_x_scale():
    ex = example_moe(E=4, top_k=1, shared=1, H=16, I=8, batch=5, seed=6)
    _, x_scale = quantise_activations(ex.x)
    assert ex.spec.x_scale == x_scale
    assert all(s.x_scale == x_scale for s in ex.spec.experts + ex.spec.shared)
    assert np.array_equal(ex.x_int8, quantise_activations(ex.x, x_scale)[0])
    for spec, e in zip(ex.spec.experts, ex.layer.experts):   # 'batch': each expert as from_float on the batch
        ref = nm.FfnSpec.from_float("swiglu", e.W1, e.W2, e.W3, x_calibration=ex.x)
        assert all(np.array_equal(getattr(spec, k), getattr(ref, k)) for k in ("W1", "W2", "W3", "table"))
        assert spec.out_scale == ref.out_scale and np.array_equal(spec.rq2[0], ref.rq2[0])


def test_routed_calibration_uses_the_routed_tokens_and_the_layer_scale():
    ex = example_moe(E=4, top_k=1, shared=0, H=16, I=8, batch=6, seed=3)
    spec = MoeSpec.from_float(ex.layer, x_calibration=ex.x, calibrate="routed")
    idx, _ = route(ex.layer, ex.x)
    for e, (sp, w) in enumerate(zip(spec.experts, ex.layer.experts)):
        rows = ex.x[idx[:, 0] == e]
        ref = nm.FfnSpec.from_float("swiglu", w.W1, w.W2, w.W3, x_calibration=rows if len(rows) else ex.x,
                                    x_scale=spec.x_scale)
        assert sp.out_scale == ref.out_scale and sp.x_scale == spec.x_scale
        assert np.array_equal(sp.rq1[0], ref.rq1[0]) and np.array_equal(sp.table, ref.table)


def test_from_float_x_scale_argument():
    rng = np.random.default_rng(0)
    W1, W3 = rng.normal(size=(8, 4)), rng.normal(size=(8, 4))
    W2, x = rng.normal(size=(4, 8)), rng.normal(size=(3, 4))
    a = nm.FfnSpec.from_float("swiglu", W1, W2, W3, x_calibration=x)
    b = nm.FfnSpec.from_float("swiglu", W1, W2, W3, x_calibration=x, x_scale=a.x_scale)
    assert b.x_scale == a.x_scale and np.array_equal(b.rq1[0], a.rq1[0]) and np.array_equal(b.rq1[1], a.rq1[1])
    c = nm.FfnSpec.from_float("swiglu", W1, W2, W3, x_calibration=x, x_scale=2 * a.x_scale)
    assert c.x_scale == 2 * a.x_scale and c.out_scale == a.out_scale
    with pytest.raises(nm.NumericsError, match="x_scale must be a finite number > 0"):
        nm.FfnSpec.from_float("swiglu", W1, W2, W3, x_calibration=x, x_scale=0.0)


@pytest.mark.parametrize("kw, words", [
    (dict(top_k=0), "top_k must be an integer in 1..8"),
    (dict(top_k=9), "top_k must be an integer in 1..8"),
    (dict(n_group=3), "n_group = 3 does not divide the 8 experts"),
    (dict(n_group=4, topk_group=1, top_k=3), "topk_group = 1 groups of 2 experts hold fewer than top_k = 3"),
    (dict(topk_group=5, n_group=4), "topk_group must be an integer in 1..4"),
    (dict(gating="softmax", bias=np.zeros(8)), "'softmax' .* has no router bias"),
    (dict(gating="softmax", n_group=2), "has no router bias and no groups"),
    (dict(gating="topk"), "gating must be one of sigmoid-grouped, softmax"),
    (dict(bias=np.zeros(7)), r"router bias has shape \(7,\); it must be \(8,\)"),
    (dict(routed_scaling_factor=0), "routed_scaling_factor must be a finite number > 0"),
    (dict(weight=np.full((8, 8), np.nan)), "router weight must be finite"),
    (dict(weight=np.zeros(8)), "router weight has shape .*E x H"),
])
def test_router_errors(kw, words):
    args = dict(weight=np.eye(8), top_k=2) | kw
    with pytest.raises(MoeError, match=words):
        Router(**args)


def test_spec_and_stage_errors():
    ex = example_moe(E=4, top_k=2, shared=1, H=16, I=8, batch=3, seed=0)
    sp = ex.spec
    wide = example_moe(E=4, top_k=2, shared=1, H=16, I=12, batch=3, seed=1).spec
    with pytest.raises(MoeError, match="expert 1 has I = 12 but expert 0 has I = 8"):
        MoeSpec([sp.experts[0], wide.experts[1]] + sp.experts[2:], sp.shared, sp.router)
    other = example_moe(E=4, top_k=2, shared=1, H=16, I=8, batch=3, seed=1).spec
    assert other.x_scale != sp.x_scale
    with pytest.raises(MoeError, match="expert 2 has x_scale .* share one input scale"):
        MoeSpec(sp.experts[:2] + [other.experts[2]] + sp.experts[3:], sp.shared, sp.router)
    with pytest.raises(MoeError, match="shared expert 0 has x_scale"):
        MoeSpec(sp.experts, other.shared, sp.router)
    e = Expert(*(np.ones(s) for s in ((12, 16), (12, 16), (16, 12))))      # a shared expert may have its own I
    shared = nm.FfnSpec.from_float("swiglu", e.W1, e.W2, e.W3, x_calibration=ex.x, x_scale=sp.x_scale)
    assert MoeSpec(sp.experts, [shared], sp.router).shared[0].I == 12
    with pytest.raises(MoeError, match="the router has 4 rows but the layer has 3 routed experts"):
        MoeSpec(sp.experts[:3], sp.shared, sp.router)
    with pytest.raises(MoeError, match="expert 0 must be a SwiGLU FfnSpec"):
        MoeSpec([ex.layer.experts[0]] + sp.experts[1:], sp.shared, sp.router)
    idx, _ = route(sp, ex.x)
    with pytest.raises(MoeError, match="selects an expert twice"):
        moe_int(sp, ex.x_int8, np.array([[1, 1]] * 3))
    with pytest.raises(MoeError, match="indices must name experts 0..3; found 4"):
        moe_int(sp, ex.x_int8, np.array([[0, 4]] * 3))
    with pytest.raises(MoeError, match=r"indices must be integers of shape \(3, 2\)"):
        moe_int(sp, ex.x_int8, idx[:, :1])
    with pytest.raises(MoeError, match="x_int8 has shape .* H = 16"):
        moe_int(sp, ex.x_int8[:, :8], idx)
    with pytest.raises(nm.NumericsError, match="x_int8 must hold int8 values"):
        moe_int(sp, ex.x_int8.astype(np.int64) * 300, idx)
    with pytest.raises(MoeError, match=r"gates has shape \(3, 1\); it must be 3x2"):
        combine(sp, moe_int(sp, ex.x_int8, idx), np.ones((3, 1)))
    with pytest.raises(MoeError, match="calibrate must be 'batch' or 'routed'"):
        MoeSpec.from_float(ex.layer, x_calibration=ex.x, calibrate="all")
    with pytest.raises(MoeError, match=r"x_float has shape \(3, 8\) but the layer has H = 16"):
        quantise_input(sp, ex.x[:, :8])


# ---- the loader ----------------------------------------------------------------------------------
E, H, I, IS = 4, 8, 6, 10          # IS: the shared expert's I (DeepSeek's fused shared experts differ)


def moe_tensors(rng, deepseek=True, prefix=""):
    """Layer 0 dense, layer 1 MoE (DeepSeek: with bias and a shared expert; Qwen3: neither)."""
    f = lambda *s: ("F32", rng.normal(size=s).astype(np.float32))
    t = {f"{prefix}model.layers.0.mlp.{p}_proj.weight": f(*(H, I) if p == "down" else (I, H))
         for p in ("gate", "up", "down")}
    p = f"{prefix}model.layers.1."
    for e in range(E):
        t |= {p + f"mlp.experts.{e}.gate_proj.weight": f(I, H), p + f"mlp.experts.{e}.up_proj.weight": f(I, H),
              p + f"mlp.experts.{e}.down_proj.weight": f(H, I)}
    t |= {p + "mlp.gate.weight": f(E, H), p + "post_attention_layernorm.weight": f(H)}
    if deepseek:
        t |= {p + "mlp.gate.e_score_correction_bias": f(E), p + "mlp.shared_experts.gate_proj.weight": f(IS, H),
              p + "mlp.shared_experts.up_proj.weight": f(IS, H), p + "mlp.shared_experts.down_proj.weight": f(H, IS)}
    return t


DEEPSEEK_CONFIG = {"n_routed_experts": E, "n_shared_experts": 1, "num_experts_per_tok": 2, "n_group": 2,
                   "topk_group": 1, "routed_scaling_factor": 2.5, "norm_topk_prob": True, "scoring_func": "sigmoid",
                   "topk_method": "noaux_tc"}


def test_load_deepseek_fp8_experts(tmp_path):
    """DeepSeek's experts as its checkpoints store them: F8_E4M3 with a weight_scale_inv per
    128x128 block (here one block each); load_moe returns them dequantised exactly and an
    FP8 MoE layer is built from them without an int8 step."""
    import ml_dtypes
    rng = np.random.default_rng(5)
    t = moe_tensors(rng)
    want = {}
    for name in [n for n in t if ".experts." in n or ".shared_experts." in n]:
        codes = (rng.normal(scale=50, size=t[name][1].shape)).astype(ml_dtypes.float8_e4m3fn).view(np.uint8)
        codes[(codes & 0x7F) == 0x7F] = 0
        scale = np.array([[rng.uniform(1e-3, 1e-2)]], np.float32)
        t[name], t[name + "_scale_inv"] = ("F8_E4M3", codes), ("F32", scale)
        want[name] = codes.view(ml_dtypes.float8_e4m3fn).astype(np.float64) * np.float64(scale[0, 0])
    w = load_moe(write_safetensors(tmp_path / "ds8.safetensors", t), 1, config=DEEPSEEK_CONFIG)
    p = "model.layers.1.mlp."
    for e, ex in enumerate(w.experts):
        for k, proj in (("W1", "gate"), ("W3", "up"), ("W2", "down")):
            assert np.array_equal(getattr(ex, k), want[p + f"experts.{e}.{proj}_proj.weight"])
    assert np.array_equal(w.shared[0].W2, want[p + "shared_experts.down_proj.weight"])
    spec = MoeSpec.from_float(MoeLayer.from_weights(w), x_calibration=w.x, dtype="fp8")
    assert spec.dtype == "fp8"


def test_load_deepseek_layer_round_trip(tmp_path):
    t = moe_tensors(np.random.default_rng(0))
    path = write_safetensors(tmp_path / "ds.safetensors", t)
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps(DEEPSEEK_CONFIG))
    w = load_moe(path, 1, config=cfg, batch=8)
    p = "model.layers.1.mlp."
    assert w.E == E and w.H == H and len(w.shared) == 1 and w.x.shape == (8, H)
    for e, ex in enumerate(w.experts):
        for k, proj in (("W1", "gate"), ("W3", "up"), ("W2", "down")):
            assert np.array_equal(getattr(ex, k), t[p + f"experts.{e}.{proj}_proj.weight"][1])
    assert np.array_equal(w.shared[0].W1, t[p + "shared_experts.gate_proj.weight"][1])
    assert np.array_equal(w.router, t[p + "gate.weight"][1])
    assert np.array_equal(w.router_bias, t[p + "gate.e_score_correction_bias"][1])
    assert w.gating == {"gating": "sigmoid-grouped", "top_k": 2, "n_group": 2, "topk_group": 1,
                        "routed_scaling_factor": 2.5, "norm_topk_prob": True}
    assert "post_attention_layernorm" in w.source["calibration"]
    layer = MoeLayer.from_weights(w)
    assert layer.router.n_group == 2 and layer.router.top_k == 2
    spec = MoeSpec.from_float(layer, x_calibration=w.x)
    assert spec.shared[0].I == IS and spec.I == I
    y, st, _ = moe_run(spec, w.x)
    assert y.shape == (8, H) and st.routed.shape == (8, 2, H)


def test_load_qwen_layer(tmp_path):
    t = moe_tensors(np.random.default_rng(1), deepseek=False, prefix="language_model.")
    w = load_moe(write_safetensors(tmp_path / "qwen.safetensors", t))
    assert w.source["layer"] == 1 and w.router_bias is None and w.shared == [] and w.gating == {}
    layer = MoeLayer.from_weights(w, top_k=2)
    assert layer.router.gating == "softmax"
    assert MoeLayer.from_weights(w, top_k=3, norm_topk_prob=False).router.norm_topk_prob is False
    with pytest.raises(MoeError, match="top_k .* is not known"):
        MoeLayer.from_weights(w)
    w = load_moe(tmp_path / "qwen.safetensors", config={"num_experts": E, "num_experts_per_tok": 2,
                                                         "norm_topk_prob": True, "model_type": "qwen3_moe"})
    assert w.gating == {"gating": "softmax", "top_k": 2, "norm_topk_prob": True}


def test_load_a_sharded_layer(tmp_path):
    """A sharded checkpoint (the index, experts spread over 4 shards) loads as its single file."""
    t = moe_tensors(np.random.default_rng(4))
    a = load_moe(write_safetensors(tmp_path / "one.safetensors", t), 1)
    b = load_moe(write_sharded(tmp_path / "sharded", t, shards=4), 1)
    for ea, eb in zip(a.experts + a.shared, b.experts + b.shared, strict=True):
        assert all(np.array_equal(p, q) for p, q in zip(ea, eb))
    assert np.array_equal(a.router, b.router) and np.array_equal(a.router_bias, b.router_bias)
    assert np.array_equal(a.x, b.x) and b.source["format"] == "safetensors (sharded)"


def _without(t, name):
    return {k: v for k, v in t.items() if k != name}


def _with(t, name, a):
    return t | {name: ("F32", a)}


P = "model.layers.1.mlp."


@pytest.mark.parametrize("edit, layer, config, words", [
    (lambda t: _without(t, P + "experts.2.up_proj.weight"), 1, None,
     r"has no tensor model.layers.1.mlp.experts.2.up_proj.weight \(W3 \(up_proj\) of expert 2, layer 1\); similar"),
    (lambda t: _without(t, P + "gate.weight"), 1, None, r"no tensor model.layers.1.mlp.gate.weight \(router of layer 1\)"),
    (lambda t: _without(t, P + "shared_experts.down_proj.weight"), 1, None, "shared_experts.down_proj.weight .*shared expert"),
    (lambda t: _with(t, P + "gate.weight", np.zeros((E, H + 1))), 1, None, "router.* is 4x9 .* must be E x H = 4x8"),
    (lambda t: _with(t, P + "gate.e_score_correction_bias", np.zeros(E + 1)), 1, None, r"must be \(E,\) = \(4,\)"),
    (lambda t: _with(t, P + "experts.3.down_proj.weight", np.zeros((H, I + 1))), 1, None,
     "experts.3.down_proj.weight .* is 8x7 but W1 and W3 give I x H = 6x8: W2 must be H x I = 8x6"),
    (lambda t: _with(t, P + "experts.1.gate_proj.weight", np.zeros((H, I))), 1, None,
     r"experts.1.gate_proj.weight .* is 8x6 but W3 and W2 give I x H = 6x8: W1 must be I x H = 6x8 \(it looks "
     "transposed\\)"),
    (lambda t: _with(t, P + "gate.weight", np.full((E, H), np.nan)), 1, None, "router of layer 1.* 32 NaN or infinite"),
    (lambda t: t, 0, None, "layer 0 of .* is a dense FFN .*its MoE layers are 1"),
    (lambda t: t, 7, None, "layer 7 of .* is not in the file: its MoE layers are 1"),
    (lambda t: t, "1", None, "layer must be an integer, got '1'"),
    (lambda t: {k: v for k, v in t.items() if ".experts." not in k}, None, None, "has no MoE layer this loader knows"),
    (lambda t: t, 1, DEEPSEEK_CONFIG | {"n_routed_experts": 8}, "config has 8 routed experts but layer 1 .* has 4"),
    (lambda t: t, 1, DEEPSEEK_CONFIG | {"n_shared_experts": 0}, "config has 0 shared experts .* has a shared_experts"),
    (lambda t: t, 1, {"scoring_func": "softmax", "topk_method": "group_limited_greedy"}, "is not a gating modelled"),
    (lambda t: _with(t, P + "shared_expert.gate_proj.weight", np.zeros((I, H))), 1, None, "gated shared expert"),
])
def test_loader_errors(tmp_path, edit, layer, config, words):
    t = edit(moe_tensors(np.random.default_rng(2)))
    path = write_safetensors(tmp_path / "m.safetensors", t)
    with pytest.raises(WeightsError, match=words):
        load_moe(path, layer, config=config)


def test_loader_layer_choice(tmp_path):
    t = moe_tensors(np.random.default_rng(3))
    t |= {k.replace("layers.1.", "layers.2."): v for k, v in t.items() if "layers.1." in k}
    path = write_safetensors(tmp_path / "two.safetensors", t)
    with pytest.raises(WeightsError, match="has MoE layers 1..2: choose one"):
        load_moe(path)
    assert load_moe(path, 2).source["layer"] == 2
