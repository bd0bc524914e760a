"""Weights files for the tests, written by a writer of the safetensors format's own few lines
(8-byte header length, JSON header, raw little-endian data), independent of the reader under
test (``firmware_gen/host/weights.py``); and layers of a Llama- and a BERT-shaped model in it."""

import json
import struct

import numpy as np

H, I = 8, 12          # a SwiGLU of this size with the default batch of 4 fits the tiny tile
DTYPES = {"F32": "<f4", "F16": "<f2", "F64": "<f8", "I32": "<i4", "F8_E4M3": "u1", "F8_E8M0": "u1"}


def write_safetensors(path, tensors, metadata=None):
    """``tensors``: name -> (safetensors dtype, array); BF16 arrays are float32 values whose
    low 16 bits are zero (bf16-representable), stored as their upper 16 bits; F8 arrays are
    their bytes (uint8)."""
    header, blobs, at = {}, [], 0
    for name, (dtype, a) in tensors.items():
        a = np.asarray(a)
        if dtype == "BF16":
            bits = np.asarray(a, np.float32).view(np.uint32)
            assert not np.any(bits & 0xFFFF), "not bf16-representable"
            raw = (bits >> 16).astype("<u2").tobytes()
        else:
            raw = a.astype(DTYPES[dtype]).tobytes()
        header[name] = {"dtype": dtype, "shape": list(a.shape), "data_offsets": [at, at + len(raw)]}
        blobs.append(raw)
        at += len(raw)
    if metadata:
        header["__metadata__"] = metadata
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    path.write_bytes(struct.pack("<Q", len(h)) + h + b"".join(blobs))
    return path


def bf16(a):
    """float32 values rounded (toward zero) to bfloat16-representable ones."""
    return (np.asarray(a, np.float32).view(np.uint32) & 0xFFFF0000).view(np.float32)


def llama_tensors(rng, layers=2, dtype="BF16"):
    conv = bf16 if dtype == "BF16" else (lambda a: np.asarray(a, np.float32))
    t = {"model.embed_tokens.weight": (dtype, conv(rng.normal(size=(32, H))))}
    for n in range(layers):
        p = f"model.layers.{n}."
        t |= {p + "mlp.gate_proj.weight": (dtype, conv(rng.normal(size=(I, H)) / np.sqrt(H))),
              p + "mlp.up_proj.weight": (dtype, conv(rng.normal(size=(I, H)) / np.sqrt(H))),
              p + "mlp.down_proj.weight": (dtype, conv(rng.normal(size=(H, I)) / np.sqrt(I))),
              p + "post_attention_layernorm.weight": (dtype, conv(1 + 0.1 * rng.normal(size=H))),
              p + "self_attn.q_proj.weight": (dtype, conv(rng.normal(size=(H, H))))}
    return t


def bert_tensors(rng, prefix="bert.", layers=3):
    t = {}
    for n in range(layers):
        p = f"{prefix}encoder.layer.{n}."
        t |= {p + "intermediate.dense.weight": ("F32", rng.normal(size=(I, H)) / np.sqrt(H)),
              p + "intermediate.dense.bias": ("F32", 0.1 * rng.normal(size=I)),
              p + "output.dense.weight": ("F32", rng.normal(size=(H, I)) / np.sqrt(I)),
              p + "output.dense.bias": ("F16", 0.1 * rng.normal(size=H)),
              p + "attention.output.LayerNorm.weight": ("F32", 1 + 0.1 * rng.normal(size=H)),
              p + "attention.output.LayerNorm.bias": ("F32", 0.1 * rng.normal(size=H))}
    return t


def write_sharded(folder, tensors, shards=2, weight_map=None):
    """A sharded checkpoint as Hugging Face writes one: ``model-0000K-of-0000N.safetensors``
    files of ``tensors`` split in order into ``shards`` near-equal runs, and
    ``model.safetensors.index.json`` with its ``weight_map`` (``weight_map`` replaces it, to
    write a wrong one).  Returns the index's path."""
    folder.mkdir(parents=True, exist_ok=True)
    names, wm = list(tensors), {}
    for k, run in enumerate(np.array_split(np.arange(len(names)), shards)):
        shard = f"model-{k + 1:05d}-of-{shards:05d}.safetensors"
        write_safetensors(folder / shard, {names[i]: tensors[names[i]] for i in run})
        wm |= {names[i]: shard for i in run}
    index = folder / "model.safetensors.index.json"
    index.write_text(json.dumps({"metadata": {"total_size": 0}, "weight_map": wm if weight_map is None
                                 else weight_map}, indent=2))
    return index
