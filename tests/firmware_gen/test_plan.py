"""lpu plan (firmware_gen/host/plan.py and model_arch.py; sim/cli/plan.py): parameter
arithmetic against hand counts, the built-in models against their published totals, the
placement rule, the CLI's errors and the --hf-config round trip.  No simulator; the compiler runs only on small shapes, the big
experts are timed by a stand-in (the real runs are in docs/plan.md)."""

import json

import pytest

from firmware_gen.host import model_arch, models, plan
from lpu_arch.config import TileConfig
from sim.cli import main as cli

# A small MoE model in DeepSeek-V3's config.json form: MLA attention, 1 dense layer first,
# 3 MoE layers of 4 routed + 1 shared experts, a routing bias, 1 MTP layer.
SMALL_MOE = {
    "model_type": "deepseek_v3", "hidden_size": 16, "num_hidden_layers": 4, "vocab_size": 100,
    "tie_word_embeddings": False, "first_k_dense_replace": 1, "moe_layer_freq": 1,
    "intermediate_size": 48, "moe_intermediate_size": 8, "n_routed_experts": 4, "n_shared_experts": 1,
    "num_experts_per_tok": 2, "topk_method": "noaux_tc", "num_nextn_predict_layers": 1,
    "num_attention_heads": 2, "q_lora_rank": 6, "kv_lora_rank": 4, "qk_nope_head_dim": 2,
    "qk_rope_head_dim": 2, "v_head_dim": 3,
}

# A small dense model (Qwen2 form: q/k/v biases), tied embeddings, GQA 4 heads / 2 KV heads.
SMALL_DENSE = {
    "model_type": "qwen2", "hidden_size": 32, "num_hidden_layers": 2, "vocab_size": 50,
    "tie_word_embeddings": True, "intermediate_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2,
}


def test_small_moe_counted_by_hand():
    arch = model_arch.parse_config(SMALL_MOE, "small")
    assert (arch.dense_layers, arch.moe_layers, arch.mtp_layers) == (1, 3, 1)
    c = plan.count_params(arch)
    # attention per layer: q 16*6 + 6 (norm) + 6*2*(2+2) = 150; kv 16*(4+2) + 4 (norm) + 4*2*(2+3) = 140;
    # o 2*3*16 = 96: 386
    att = 150 + 140 + 96
    assert c["attention"] == 4 * att == 1544
    assert c["embedding"] == c["lm_head"] == 100 * 16 == 1600
    assert c["norms"] == 4 * 2 * 16 + 16 == 144
    assert c["dense_ffn"] == 1 * 3 * 16 * 48 == 2304
    assert c["routed_experts"] == 3 * 4 * 3 * 16 * 8 == 4608
    assert c["shared_experts"] == 3 * 1 * 3 * 16 * 8 == 1152
    assert c["routers"] == 3 * (4 * 16 + 4) == 204             # weights and the routing bias
    # MTP layer: a MoE layer's FFN (1536 + 384 + 68) and the rest: attention, 2 norms, enorm,
    # hnorm, the head's norm, eh_proj 2*16*16
    assert c["mtp_ffn"] == 1536 + 384 + 68 == 1988
    assert c["mtp_other"] == att + 2 * 16 + 3 * 16 + 2 * 16 * 16 == 978
    assert c["total"] == 1600 + 1600 + 1544 + 144 + 2304 + 4608 + 1152 + 204 + 1988 + 978 == 16122
    assert c["main"] == 16122 - 1988 - 978
    assert c["ffn"] == 2304 + 4608 + 1152 + 204 + 1988 == 10256
    assert c["ffn_share"] == pytest.approx(10256 / 16122)


def test_small_dense_counted_by_hand():
    arch = model_arch.parse_config(SMALL_DENSE, "dense")
    assert (arch.dense_layers, arch.moe_layers, arch.experts) == (2, 0, 0)
    c = plan.count_params(arch)
    # head_dim 32/4 = 8: q 32*32, k and v 32*2*8 each, o 32*32, q/k/v biases (4 + 2*2)*8
    assert c["attention"] == 2 * (1024 + 512 + 512 + 1024 + 64) == 6272
    assert c["lm_head"] == 0 and c["embedding"] == 50 * 32
    assert c["dense_ffn"] == 2 * 3 * 32 * 64 == 12288
    assert c["total"] == 1600 + 6272 + (2 * 2 * 32 + 32) + 12288 == 20320
    assert c["ffn_share"] == pytest.approx(12288 / 20320)


def test_placement_rule_by_hand():
    arch = model_arch.parse_config(SMALL_MOE, "small")
    # chips of 1000 bytes, 1 byte per weight: an expert (3*16*8 = 384 bytes) twice per chip;
    # 4 MoE layers (3 + MTP) x 5 experts = 20 units -> max(5, 20/2) = 10 chips; the dense layer
    # (2304 bytes) split over 3 chips
    pl = plan.place(arch, 1.0, chip_bytes=1000)
    assert (pl["experts_per_chip"], pl["expert_chips"], pl["dense_split"], pl["dense_chips"]) == (2, 10, 3, 3)
    assert (pl["chips"], pl["trays"], pl["racks"]) == (13, 2, 1)
    assert pl["capacity_bound_chips"] == -(-(2304 + 20 * 384) // 1000)
    # every layer's 5 experts on 5 different chips
    U, C = 5, 10
    for layer in range(4):
        assert len({(layer * U + j) % C for j in range(U)}) == U
    # the dense layer on chips 0..2 (one tray); each MoE layer's chips: 3..12 spans two trays
    assert pl["hops_dense"] == [1] and pl["hops_moe"][0] == 1
    assert plan._span([3, 4, 5]) == 1 and plan._span([7, 8]) == 2 and plan._span([7, 7]) == 0
    assert plan._span([0, 9]) == 2 and plan._span([0, 300]) == 3


class FakeTimer(plan.Timer):
    """Times every shape at 1000 cycles without compiling (the built-in experts take seconds)."""

    def time(self, H, I):
        return plan.Timed(H, I, 1, I, 1000, 1000, "sram", "compiled (cycles predicted by the compiler)")


FIELDS = ("model", "title", "dtype", "config", "clock_mhz", "sources", "params", "ffn", "bytes", "placement",
          "time", "notes")


@pytest.mark.parametrize("name", list(models.MODELS))
def test_builtin_models_plausible(name):
    arch, title, sources, published = model_arch.builtin(name)
    cfg = TileConfig.preset(plan.DEFAULT_CONFIG)
    p = plan.plan(arch, "fp8", cfg, plan.DEFAULT_CONFIG, FakeTimer(cfg), title=title, sources=sources,
                  published=published)
    json.dumps(p, allow_nan=False)
    assert all(k in p for k in FIELDS) and p["sources"] and p["config"] == plan.DEFAULT_CONFIG
    c = p["params"]
    # the main model (published totals exclude the MTP module) within a few % of the published total
    tol = 0.03
    assert c["main"] / 1e9 == pytest.approx(published, rel=tol), (name, c["main"] / 1e9, published)
    assert 0.5 < c["ffn_share"] < 1
    assert p["bytes"]["ffn"] == c["ffn"]                      # fp8: 1 byte per weight
    pl = p["placement"]
    assert pl["chips"] >= pl["capacity_bound_chips"] >= p["bytes"]["placed"] / plan.LP30_SRAM_BYTES
    assert pl["trays"] == -(-pl["chips"] // 8) and pl["racks"] == -(-pl["chips"] // 256)
    assert p["time"]["per_token_us"] > p["time"]["compute_us"] > 0
    if arch.moe:
        assert pl["expert_chips"] >= arch.experts + arch.shared_experts


def test_deepseek_v3_values():
    arch, *_ = model_arch.builtin("deepseek-v3")
    c = plan.count_params(arch)
    assert (arch.dense_layers, arch.moe_layers, arch.experts, arch.shared_experts, arch.top_k) == (3, 58, 256, 1, 8)
    # README_WEIGHTS.md: 671B main model, MTP module 11.5B unique parameters
    assert c["main"] / 1e9 == pytest.approx(671, rel=0.005)
    assert (c["mtp_ffn"] + c["mtp_other"]) / 1e9 == pytest.approx(11.5, rel=0.02)
    assert plan.expert_params(arch, 2048) == 3 * 7168 * 2048


def test_dtypes_scale_bytes_and_say_analytic():
    arch, *_ = model_arch.builtin("gpt-oss-120b")
    cfg = TileConfig.preset(plan.DEFAULT_CONFIG)
    t = FakeTimer(cfg)
    p8, p16, p4 = (plan.plan(arch, d, cfg, plan.DEFAULT_CONFIG, t) for d in ("fp8", "bf16", "mxfp4"))
    assert p16["bytes"]["ffn"] == 2 * p8["bytes"]["ffn"]
    assert p4["bytes"]["ffn"] == pytest.approx(p8["bytes"]["ffn"] * 4.25 / 8)
    assert p16["placement"]["chips"] > p8["placement"]["chips"] > p4["placement"]["chips"]
    assert p8["time"]["source"].startswith("compiled")
    assert p16["time"]["source"].startswith("analytic") and p4["time"]["source"].startswith("analytic")
    assert p16["time"]["compute_us"] == pytest.approx(2 * p8["time"]["compute_us"])


# ---- the command line ------------------------------------------------------------------------
def _lpu_plan(argv) -> int:
    """``lpu plan ARGV``'s exit status (argparse's own exits included)."""
    try:
        return cli.main(["plan", *argv])
    except SystemExit as e:
        return int(e.code or 0)


def _err(capsys):
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    return err[0]


@pytest.mark.parametrize("argv, needle", [
    (["--model", "gpt-5"], "unknown model 'gpt-5'"),
    (["--model", "deepseek-r1", "--dtype", "fp6"], "unknown dtype 'fp6'"),
    (["--model", "deepseek-r1", "--config", "huge"], "huge"),
    (["--model", "deepseek-r1", "--chart", "x.pdf"], ".pdf"),
    (["--model", "deepseek-r1", "--clock-mhz", "0"], "--clock-mhz"),
    (["--model", "deepseek-r1", "--clock-mhz", "fast"], "--clock-mhz"),
    (["--hf-config", "/nonexistent/config.json"], "no such file"),
])
def test_cli_errors(argv, needle, capsys):
    assert _lpu_plan(argv) == 2
    assert needle in _err(capsys)


def test_cli_config_missing_field(tmp_path, capsys):
    cfg = dict(SMALL_MOE)
    del cfg["hidden_size"]
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    assert _lpu_plan(["--hf-config", str(path)]) == 2
    assert "no 'hidden_size'" in _err(capsys)
    cfg = dict(SMALL_MOE, num_experts_per_tok=9)
    path.write_text(json.dumps(cfg))
    assert _lpu_plan(["--hf-config", str(path)]) == 2
    assert "num_experts_per_tok" in _err(capsys)
    # DeepSeek's and Qwen-MoE's intermediate_size is the dense FFN's: not a stand-in for the experts'
    cfg = {k: v for k, v in SMALL_MOE.items() if k not in ("moe_intermediate_size", "n_routed_experts")}
    cfg["first_k_dense_replace"] = 0                 # every layer MoE: intermediate_size sizes nothing else
    for key in ("n_routed_experts", "num_experts"):
        path.write_text(json.dumps(cfg | {key: 4}))
        assert _lpu_plan(["--hf-config", str(path)]) == 2
        assert f"config.json has '{key}' but no 'moe_intermediate_size'" in _err(capsys)
    # Mixtral's num_local_experts are sized by intermediate_size
    assert model_arch.parse_config(cfg | {"num_local_experts": 4}).expert_intermediate == 48
    path.write_text("{not json")
    assert _lpu_plan(["--hf-config", str(path)]) == 2
    assert "is not JSON" in _err(capsys)


def test_cli_hidden_size_beyond_the_tile(tmp_path, capsys):
    """A hidden size no tile compiles is one line naming the limit, not an attempt to
    allocate its weights (1e9 x 320 bytes for lp30's narrowest piece)."""
    path = tmp_path / "config.json"
    path.write_text(json.dumps(dict(SMALL_DENSE, hidden_size=10**9)))
    assert _lpu_plan(["--hf-config", str(path), "--no-golden"]) == 2
    assert _err(capsys).endswith("hidden size 1,000,000,000 is more than this tile compiles: an H x I SwiGLU needs "
                                 "ceil(H / 320) + 1 x slots per MXM and VXM parameter entries, the tile has 1024 and "
                                 "512: H can be at most 163,520")


def test_the_largest_hidden_size_compiles():
    """The limit is the compiler's: on the default tile H = 16 x (64 - 1) = 1008 compiles
    (and runs on the golden model), 1009 is refused."""
    timer = plan.Timer(TileConfig.preset("default"))
    cfg = timer.cfg
    assert timer.max_hidden() == cfg.lanes * (min(cfg.mxm_xbuf_depth, cfg.vxm_param_depth) - 1) == 1008
    assert timer.time(1008, cfg.lanes).golden == "cycles and output match"
    with pytest.raises(plan.PlanError, match="hidden size 1,009 is more than this tile compiles"):
        timer.time(1009, cfg.lanes)


def test_hf_config_directory(tmp_path, capsys):
    """A directory stands for its config.json (as from_pretrained reads a model directory)."""
    model = tmp_path / "small-moe"
    model.mkdir()
    assert _lpu_plan(["--hf-config", str(model)]) == 2
    assert f"{model} is a directory without a config.json" in _err(capsys)
    (model / "config.json").write_text(json.dumps(SMALL_MOE))
    arch, name = model_arch.load_hf_config(model)
    assert name == "small-moe" and arch == model_arch.parse_config(SMALL_MOE, "small-moe")


@pytest.mark.parametrize("name", list(models.MODELS))
def test_hf_config_round_trip(name, tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(models.MODELS[name][1]))
    arch, _ = model_arch.load_hf_config(path)
    ref, *_ = model_arch.builtin(name)
    assert plan.count_params(arch) == plan.count_params(ref)
    assert {k: v for k, v in vars(arch).items() if k != "name"} == {k: v for k, v in vars(ref).items() if k != "name"}


def test_cli_hf_config_compiles_and_checks(tmp_path, capsys):
    """The whole path on a small model: compiled on the default tile, checked on the golden model."""
    cfg = dict(SMALL_MOE, hidden_size=32, intermediate_size=40, moe_intermediate_size=24)
    path = tmp_path / "tiny-moe.json"
    path.write_text(json.dumps(cfg))
    chart = tmp_path / "plan.svg"
    assert _lpu_plan(["--hf-config", str(path), "--config", "default", "--json", "--chart", str(chart)]) == 0
    p = json.loads(capsys.readouterr().out)
    assert p["model"] == "tiny-moe" and p["config"] == "default"
    assert p["time"]["source"] == "compiled and golden-model-checked; C2C hops analytic"
    assert {u["unit"] for u in p["time"]["units"]} == {"dense", "routed expert"}
    assert all(u["golden_model"] == "cycles and output match" for u in p["time"]["units"])
    assert p["params"]["total"] == plan.count_params(model_arch.parse_config(cfg))["total"]
    assert chart.read_text().lstrip().startswith("<?xml") and "<svg" in chart.read_text()


def test_cli_table_and_no_golden(tmp_path, capsys):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(dict(SMALL_DENSE, hidden_size=32, intermediate_size=48)))
    assert _lpu_plan(["--hf-config", str(path), "--config", "default", "--no-golden", "--dtype", "bf16"]) == 0
    out = capsys.readouterr().out
    assert "compiled (cycles predicted by the compiler)" in out and "analytic" in out and "tile preset default" in out


def test_help_explains(capsys):
    assert _lpu_plan(["--help"]) == 0
    out = capsys.readouterr().out
    for word in ("Placement rule", "Hops", "500 MB", "golden model", "analytic", plan.DEFAULT_CONFIG):
        assert word in out


@pytest.mark.long          # (compiles DeepSeek's dense layer and expert on lp30: tens of seconds)
def test_deepseek_r1_real_run(capsys):
    assert _lpu_plan(["--model", "deepseek-r1", "--dtype", "fp8", "--json"]) == 0
    p = json.loads(capsys.readouterr().out)
    assert p["time"]["source"].startswith("compiled and golden-model-checked")
