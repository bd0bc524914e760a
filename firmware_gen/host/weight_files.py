"""Weight files: the formats an FFN's or MoE layer's float weights are read from
(``docs/numerics.md``, "Weights from files"), behind one interface (``names``, ``read``).

:func:`open_weights` tells them apart by content: :class:`SafetensorsFile` (a Hugging Face
checkpoint), :class:`ShardedFile` (a sharded one: ``model.safetensors.index.json`` and its
shards) or :class:`NpzFile` (``numpy.savez``).  Every problem raises :class:`WeightsError`
with a one-line message naming the file and tensor.

A reader of our own, not the ``safetensors`` package's numpy interface: that reads F32,
F16 and (with ``ml_dtypes`` imported) BF16 alike, bit for bit
(``tests/firmware_gen/test_weights_reference.py``), but not F8_E4M3 (version 0.8.0 looks
for ``numpy.float8_e4m3fn``, which numpy does not have), the dtype of DeepSeek-V3/R1's
checkpoints.  ``F8_E4M3`` matrices are read here with their ``<name>_scale_inv`` block
scales and returned dequantised exactly (``docs/numerics.md``, "FP8 checkpoints").  The
reader reads only the tensors asked for and, as the reference implementation does, rejects
a header that is not JSON, sizes that disagree with shape and dtype and tensors that
overlap or leave bytes between, before or after them, naming the tensors.
"""

from __future__ import annotations

import json
import struct
import zipfile
from pathlib import Path

import numpy as np

from lpu_arch import fp8
from lpu_arch.errors import LpuError

from firmware_gen.golden.fp8_quantise import FP8_BLOCK, dequantise_fp8_blocks

# safetensors dtypes: bytes per element (all that the format defines), and those read here.
ITEMSIZE = {"BOOL": 1, "U8": 1, "I8": 1, "F8_E5M2": 1, "F8_E4M3": 1, "F8_E8M0": 1, "I16": 2, "U16": 2,
            "F16": 2, "BF16": 2, "I32": 4, "U32": 4, "F32": 4, "I64": 8, "U64": 8, "F64": 8, "C64": 8}
FLOATS = {"F16": "<f2", "BF16": "<u2", "F32": "<f4", "F64": "<f8"}
SCALE_SUFFIX = "_scale_inv"   # an F8_E4M3 weight's block scales (DeepSeek-V3/R1's checkpoints)
MAX_HEADER = 100_000_000   # the reference implementation's limit (and a sharded checkpoint's index's here)
SINGLE_NAME, INDEX_NAME = "model.safetensors", "model.safetensors.index.json"   # Hugging Face's names


class WeightsError(LpuError, ValueError):
    """A weights file is unusable for an FFN; the one-line message names the file and tensor."""


def tensor_label(name, role):
    """A tensor's name in a message, with the role it plays when that is not its name."""
    return name if name == role else f"{name} ({role})"


def shape_text(shape):
    """A shape as ``IxH`` (``scalar`` for ``()``)."""
    return "x".join(str(d) for d in shape) if len(shape) else "scalar"


def first_index(mask):
    return tuple(int(i) for i in np.argwhere(mask)[0])


class SafetensorsFile:
    """The header of a ``.safetensors`` file, checked; :meth:`read` reads one float tensor."""

    format = "safetensors"

    def __init__(self, path):
        self.path = Path(path)
        size = self.path.stat().st_size
        with open(self.path, "rb") as f:
            head = f.read(8)
            if len(head) < 8:
                raise WeightsError(f"{self.path.name} is truncated or not a .safetensors file: {size} bytes, "
                                   "less than the 8-byte header length")
            (n,) = struct.unpack("<Q", head)
            if n > size - 8:
                raise WeightsError(f"{self.path.name} is truncated or not a .safetensors file: its header "
                                   f"length field says {n} bytes but {size - 8} follow")
            if n > MAX_HEADER:
                raise WeightsError(f"{self.path.name} is not a .safetensors file: its header length field says "
                                   f"{n} bytes (the format allows {MAX_HEADER})")
            raw = f.read(n)
        try:
            header = json.loads(raw)
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise WeightsError(f"{self.path.name}: the .safetensors header is not valid JSON ({e})") from None
        if not isinstance(header, dict):
            raise WeightsError(f"{self.path.name}: the .safetensors header is not a JSON object")
        self.data_start, data_size = 8 + n, size - 8 - n
        header.pop("__metadata__", None)          # free-form strings, not a tensor
        self.tensors = {}
        for name, t in header.items():
            try:
                dtype, shape, (begin, end) = t["dtype"], t["shape"], t["data_offsets"]
                ok = isinstance(dtype, str) and isinstance(shape, list) and \
                    all(isinstance(v, int) and v >= 0 for v in (begin, end, *shape)) and begin <= end
            except (TypeError, KeyError, ValueError):
                ok = False
            if not ok:
                raise WeightsError(f"{self.path.name}: header entry {name!r} is not "
                                   "{dtype, shape, data_offsets: [begin, end]}")
            if dtype in ITEMSIZE and end - begin != ITEMSIZE[dtype] * int(np.prod(shape)):
                raise WeightsError(f"{self.path.name} is corrupt: tensor {name} ({dtype}, shape {shape_text(shape)}) "
                                   f"needs {ITEMSIZE[dtype] * int(np.prod(shape))} bytes but its data_offsets "
                                   f"{begin}..{end} hold {end - begin}")
            if end > data_size:
                raise WeightsError(f"{self.path.name} is truncated: tensor {name} ends at data byte {end} but "
                                   f"the file holds {data_size} bytes of data")
            self.tensors[name] = (dtype, tuple(shape), begin, end)
        self._check_layout(data_size)
        self.scaled = {}          # F8_E4M3 tensors read so far -> their scale tensors

    def _check_layout(self, data_size):
        """The reference implementation's rule: the tensors, in the order of their
        ``data_offsets``, cover the data exactly, each beginning where the one before ends
        (the first at 0, the last ending at the end of the file); no overlap, no gap."""
        fname, at, before = self.path.name, 0, None
        for begin, end, name in sorted((t[2], t[3], n) for n, t in self.tensors.items()):
            if begin < at:
                raise WeightsError(f"{fname} is corrupt: tensors {before} and {name} overlap (data_offsets "
                                   f"{self._span(before)} and {begin}..{end}); each tensor has bytes of its own")
            if begin > at:
                where = f"after tensor {before} ({self._span(before)})" if before else "before the first tensor"
                raise WeightsError(f"{fname} is corrupt: data bytes {at}..{begin} {where} belong to no tensor "
                                   f"(tensor {name} begins at {begin}); the tensors must be contiguous")
            at, before = end, name
        if at != data_size:
            last = f"the last tensor, {before}, ends at data byte {at}" if before else "the header names no tensor"
            raise WeightsError(f"{fname} is corrupt: {last} but the file holds {data_size} bytes of data "
                               f"({data_size - at} bytes beyond what the header describes)")

    def _span(self, name):
        return "{2}..{3}".format(*self.tensors[name])

    @property
    def names(self):
        return list(self.tensors)

    def header(self, name):
        """``(dtype, shape)`` of tensor ``name``, None if the file has none of that name."""
        return self.tensors[name][:2] if name in self.tensors else None

    def raw(self, name, dtype):
        """Tensor ``name``'s data as numpy ``dtype`` values, in its shape."""
        _, shape, begin, _ = self.tensors[name]
        return np.fromfile(self.path, dtype, int(np.prod(shape)), offset=self.data_start + begin).reshape(shape)

    def read(self, name, role):
        return read_tensor(self, name, role)


class ShardedFile:
    """A sharded checkpoint: its index (``model.safetensors.index.json``, a JSON object whose
    ``weight_map`` names the shard of every tensor, a ``.safetensors`` file beside the index)
    and the shards, each opened and checked when a tensor of it is first read.  The same
    interface as :class:`SafetensorsFile`; messages name the index, the shard and the tensor."""

    format = "safetensors (sharded)"

    def __init__(self, path, index):
        self.path = Path(path)
        wm = index["weight_map"]
        if not isinstance(wm, dict) or not all(isinstance(v, str) and v for v in wm.values()):
            raise WeightsError(f"{self.path.name}: its \"weight_map\" must be an object of tensor name: shard file "
                               "name")
        bad = sorted({v for v in wm.values() if Path(v).name != v or v in (".", "..")})
        if bad:
            raise WeightsError(f"{self.path.name} names shard {bad[0]!r}: a shard is a file beside the index, "
                               "named without a directory")
        self.weight_map, self.shards, self.scaled = wm, {}, {}

    @property
    def names(self):
        return list(self.weight_map)

    def shard(self, name):
        """The opened shard that holds tensor ``name`` (which the map names)."""
        shard = self.weight_map[name]
        if shard not in self.shards:
            p = self.path.parent / shard
            if not p.is_file():
                n = sum(v == shard for v in self.weight_map.values())
                raise WeightsError(f"{self.path.name} maps tensor {name} to shard {shard}, which is not beside it "
                                   f"({n} tensor{'s' * (n > 1)} of the index are in that shard)")
            self.shards[shard] = SafetensorsFile(p)
        f = self.shards[shard]
        if name not in f.tensors:
            raise WeightsError(f"{self.path.name} maps tensor {name} to shard {shard}, which has no tensor {name}")
        return f

    def header(self, name):
        return self.shard(name).header(name) if name in self.weight_map else None

    def raw(self, name, dtype):
        return self.shard(name).raw(name, dtype)

    def read(self, name, role):
        return read_tensor(self, name, role)


def read_tensor(f, name, role):
    """Tensor ``name`` of a :class:`SafetensorsFile` or :class:`ShardedFile` as float values:
    F16, F32 and F64 as stored, BF16 as float32 (exact), F8_E4M3 dequantised with its block
    scales (:func:`read_fp8`)."""
    dtype, shape = f.header(name)
    if dtype == "F8_E4M3":
        return read_fp8(f, name, role, shape)
    if dtype not in FLOATS:
        raise WeightsError(f"tensor {tensor_label(name, role)} in {f.path.name} has dtype {dtype}; "
                           f"this reader takes {', '.join(FLOATS)} and F8_E4M3 (with its {SCALE_SUFFIX})")
    a = f.raw(name, FLOATS[dtype])
    if dtype == "BF16":      # bfloat16 is the upper 16 bits of a float32: exact
        a = (a.astype(np.uint32) << 16).view(np.float32)
    return a


def read_fp8(f, name, role, shape):
    """An F8_E4M3 matrix as DeepSeek-V3/R1 store one: its codes and, in ``<name>_scale_inv``,
    one scale per ``FP8_BLOCK x FP8_BLOCK`` block (F32, BF16, F16, F64 or F8_E8M0, the
    power of two ``2^(b - 127)``); returned dequantised exactly, as float64."""
    label, fname = tensor_label(name, role), f.path.name
    if len(shape) != 2:
        raise WeightsError(f"tensor {label} in {fname} is F8_E4M3 of shape {shape_text(shape)}: block-scaled FP8 "
                           "weights are 2-D matrices")
    codes = f.raw(name, np.uint8)
    sname = name + SCALE_SUFFIX
    if f.header(sname) is None:
        raise WeightsError(f"tensor {label} in {fname} is F8_E4M3 but the file has no {sname}: FP8 weights are "
                           f"read with their scales, one per {FP8_BLOCK}x{FP8_BLOCK} block (DeepSeek's layout)")
    sdtype, sshape = f.header(sname)
    slabel = f"tensor {sname} (the scales of {name}) in {fname}"
    want = tuple(-(-d // FP8_BLOCK) for d in shape)
    if sshape != want:
        raise WeightsError(f"{slabel} is {shape_text(sshape)}: a {shape_text(shape)} F8_E4M3 matrix has one scale "
                           f"per {FP8_BLOCK}x{FP8_BLOCK} block, {shape_text(want)}")
    if sdtype == "F8_E8M0":
        b = f.raw(sname, np.uint8)
        scales = np.where(b == 0xFF, np.nan, np.ldexp(1.0, b.astype(np.int64) - 127))
    elif sdtype in FLOATS:
        scales = np.asarray(f.read(sname, f"scales of {role}"), np.float64)
    else:
        raise WeightsError(f"{slabel} has dtype {sdtype}; block scales are {', '.join(FLOATS)} or "
                           "F8_E8M0")
    bad = ~(np.isfinite(scales) & (scales > 0))
    if bad.any():
        raise WeightsError(f"{slabel} has {int(bad.sum())} scales that are not finite numbers > 0 "
                           f"(the first at block {first_index(bad)})")
    nan = fp8.is_nan(codes)
    if nan.any():
        raise WeightsError(f"tensor {label} in {fname} has {int(nan.sum())} NaN codes (0x7F or 0xFF; the "
                           f"first at index {first_index(nan)})")
    f.scaled[name] = sname
    return dequantise_fp8_blocks(codes, scales)


class NpzFile:
    """A ``numpy.savez`` archive with the same interface as :class:`SafetensorsFile`."""

    format = "npz"

    def __init__(self, path):
        self.path = Path(path)
        try:
            with np.load(self.path, allow_pickle=False) as z:
                self.arrays = {k: np.asarray(z[k]) for k in z.files}
        except Exception as e:   # truncated zip, pickled objects, ...
            raise WeightsError(f"cannot read {self.path.name} as a .npz of arrays ({type(e).__name__}: {e})") from None
        self.scaled = {}

    @property
    def names(self):
        return list(self.arrays)

    def read(self, name, role):
        a = self.arrays[name]
        if not np.issubdtype(a.dtype, np.number) or np.iscomplexobj(a):
            raise WeightsError(f"array {tensor_label(name, role)} in {self.path.name} has dtype {a.dtype}; "
                               "it must be real numbers")
        return a


def open_weights(path):
    """A :class:`SafetensorsFile`, :class:`ShardedFile` or :class:`NpzFile` for ``path`` (told
    apart by content); for a directory, its ``model.safetensors``, else its
    ``model.safetensors.index.json`` (the order in which Hugging Face's ``from_pretrained``
    looks for them)."""
    path = Path(path)
    if path.is_dir():
        inside = [path / n for n in (SINGLE_NAME, INDEX_NAME) if (path / n).is_file()]
        if not inside:
            raise WeightsError(f"weights file {path} is a directory without {SINGLE_NAME} or {INDEX_NAME}; give the "
                               ".npz or .safetensors file in it")
        path = inside[0]
    if not path.is_file():
        raise WeightsError(f"weights file {path} does not exist")
    if zipfile.is_zipfile(path):
        return NpzFile(path)
    if path.suffix == ".npz":
        raise WeightsError(f"{path} is not a .npz file (numpy.savez writes one)")
    index = _index(path)
    if index is not None:
        return ShardedFile(path, index)
    try:
        return SafetensorsFile(path)
    except WeightsError as e:
        if path.suffix == ".safetensors":
            raise
        raise WeightsError(f"{path.name} is neither a .npz (zip), a .safetensors file nor a sharded checkpoint's "
                           f"index (JSON with a \"weight_map\"); read as .safetensors: {e}") from None


def _index(path):
    """The JSON object in ``path`` if it is a sharded checkpoint's index (it has a
    ``weight_map``), else None (a ``.index.json`` without one is an error)."""
    if path.stat().st_size > MAX_HEADER:
        return None
    raw = path.read_bytes()
    try:
        index = json.loads(raw) if raw.lstrip()[:1] == b"{" else None
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        if path.name.endswith(".index.json"):
            raise WeightsError(f"{path.name} is not valid JSON ({e})") from None
        return None
    if isinstance(index, dict) and "weight_map" in index:
        return index
    if path.name.endswith(".index.json"):
        raise WeightsError(f"{path.name} is not a sharded checkpoint's index: it has no \"weight_map\" (tensor "
                           "name: shard file name)")
    return None
