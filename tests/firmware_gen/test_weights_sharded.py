"""firmware_gen.host.weight_files: sharded checkpoints (``model.safetensors.index.json`` and
its shards), written by the test writer (``tests/safetensors_files.py``), not by the
reader under test."""

import json

import ml_dtypes
import numpy as np
import pytest

from firmware_gen.host.weights import WeightsError, load_ffn, open_weights
from sim.cli import main as cli

from tests.safetensors_files import H, I, llama_tensors, write_safetensors, write_sharded

INDEX = "model.safetensors.index.json"
SHARD = "model-{:05d}-of-00003.safetensors"


@pytest.fixture
def tensors():
    return llama_tensors(np.random.default_rng(11))


def test_a_sharded_checkpoint_reads_as_its_single_file(tmp_path, tensors):
    (tmp_path / "one").mkdir()
    one = write_safetensors(tmp_path / "one" / "model.safetensors", tensors)
    index = write_sharded(tmp_path / "sharded", tensors, shards=3)
    # the layer's tensors are in different shards
    wm = json.loads(index.read_text())["weight_map"]
    assert len({wm[f"model.layers.1.mlp.{p}_proj.weight"] for p in ("gate", "up", "down")}) > 1
    a = load_ffn(one, layer=1)
    for path in (index, index.parent):              # the index, or the directory that holds it
        b = load_ffn(path, layer=1)
        for k in ("W1", "W2", "W3", "x"):
            assert np.array_equal(getattr(a, k), getattr(b, k)), k
        assert b.source == a.source | {"file": str(index), "format": "safetensors (sharded)"}
    f = open_weights(index)
    assert sorted(f.names) == sorted(tensors)
    assert all(np.array_equal(f.read(n, n), a) for n, (_, a) in tensors.items())
    # a directory with both: model.safetensors first, as Hugging Face's from_pretrained
    write_safetensors(index.parent / "model.safetensors", tensors)
    assert load_ffn(index.parent, layer=1).source["file"] == str(index.parent / "model.safetensors")


def test_cli_compiles_a_sharded_checkpoint_as_its_single_file(tmp_path, capsys, tensors):
    one = write_safetensors(tmp_path / "one.safetensors", tensors)
    index = write_sharded(tmp_path / "sharded", tensors, shards=3)
    for path, out in ((one, "o1"), (index, "o2")):
        code = cli.main(["compile", "--weights", str(path), "--layer", "0", "--config", "tiny",
                         "--out", str(tmp_path / out)])
        assert code == 0, capsys.readouterr().err
    files = sorted(p.name for p in (tmp_path / "o1").iterdir())
    assert files == sorted(p.name for p in (tmp_path / "o2").iterdir())
    for name in files:
        if not name.endswith(".json"):              # the program and its data; the manifests name the file
            assert (tmp_path / "o1" / name).read_bytes() == (tmp_path / "o2" / name).read_bytes(), name


def test_fp8_scales_in_another_shard(tmp_path):
    rng = np.random.default_rng(3)
    codes = rng.normal(scale=50, size=(I, H)).astype(ml_dtypes.float8_e4m3fn)
    scale = np.array([[0.125]], np.float32)
    t = {"W1": ("F8_E4M3", codes.view(np.uint8)), "W2": ("F32", rng.normal(size=(H, I))),
         "W1_scale_inv": ("F32", scale)}
    f = open_weights(write_sharded(tmp_path, t, shards=3))
    assert np.array_equal(f.read("W1", "W1"), codes.astype(np.float64) * 0.125)
    assert f.scaled == {"W1": "W1_scale_inv"}


def _drop(t, name):
    return {k: v for k, v in t.items() if k != name}


BAD = [   # (write the checkpoint in folder d from tensors t, words in the message)
    (lambda d, t: write_sharded(d, t, 3, _drop(json.loads(write_sharded(d, t, 3).read_text())["weight_map"],
                                                "model.layers.1.mlp.up_proj.weight")),
     [f"{INDEX} has no tensor model.layers.1.mlp.up_proj.weight (W3 of layer 1)"]),
    (lambda d, t: (write_sharded(d, t, 3), (d / SHARD.format(2)).unlink()),
     [f"{INDEX} maps tensor model.layers.1.", f"to shard {SHARD.format(2)}, which is not beside it",
      "tensors of the index are in that shard"]),
    (lambda d, t: write_sharded(d, t, 3, dict.fromkeys(t, SHARD.format(1))),
     [f"{INDEX} maps tensor model.layers.1.", f"to shard {SHARD.format(1)}, which has no tensor model.layers.1."]),
    (lambda d, t: write_sharded(d, t, 3, dict.fromkeys(t, "../" + SHARD.format(1))),
     [f"{INDEX} names shard '../{SHARD.format(1)}'", "a file beside the index"]),
    (lambda d, t: write_sharded(d, t, 3, ["not", "a", "map"]), [f"{INDEX}: its \"weight_map\" must be an object"]),
    (lambda d, t: (write_sharded(d, t, 3), (d / INDEX).write_text('{"metadata": {}}')),
     [f"{INDEX} is not a sharded checkpoint's index: it has no \"weight_map\""]),
    (lambda d, t: (write_sharded(d, t, 3), (d / INDEX).write_text('{"weight_map": {')),
     [f"{INDEX} is not valid JSON"]),
    (lambda d, t: (write_sharded(d, t, 3), (d / INDEX).unlink()),
     ["is a directory without model.safetensors or model.safetensors.index.json"]),
    (lambda d, t: (write_sharded(d, t, 3), (d / SHARD.format(3)).write_bytes((d / SHARD.format(3)).read_bytes()
                                                                                 + bytes(4))),
     [f"{SHARD.format(3)} is corrupt: the last tensor", "4 bytes beyond"]),
]


@pytest.mark.parametrize("make, words", BAD)
def test_bad_sharded_checkpoints_are_named(tmp_path, tensors, make, words):
    make(tmp_path, tensors)
    with pytest.raises(WeightsError) as e:
        load_ffn(tmp_path, layer=1)
    msg = str(e.value)
    assert "\n" not in msg and all(w in msg for w in words), msg
