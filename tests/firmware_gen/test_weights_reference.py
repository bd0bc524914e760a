"""firmware_gen.host.weight_files against the reference implementation, the ``safetensors``
package (numpy interface, BF16 through ``ml_dtypes``): the same values from files either
wrote, the same files rejected, and the one dtype the package's numpy interface cannot read."""

import json
import struct

import ml_dtypes
import numpy as np
import pytest

from firmware_gen.host.weight_files import WeightsError, open_weights

from tests.safetensors_files import write_safetensors

safetensors = pytest.importorskip("safetensors")
from safetensors import SafetensorError, safe_open  # noqa: E402
from safetensors.numpy import save_file  # noqa: E402

NUMPY = {"F32": np.float32, "F16": np.float16, "BF16": ml_dtypes.bfloat16}
BITS = {"F32": np.uint32, "F16": np.uint16, "BF16": np.uint16}


def values(dtype, shape, seed):
    """Random values of ``dtype`` with its special ones among them: +-0, +-inf, NaN, the
    smallest subnormal and the largest finite value."""
    a = np.random.default_rng(seed).normal(scale=3, size=shape).astype(NUMPY[dtype])
    info = ml_dtypes.finfo(NUMPY[dtype])
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, float(info.smallest_subnormal), float(info.max)])
    a.flat[:len(special)] = special.astype(NUMPY[dtype])
    return a


def same_bits(a, b, dtype):
    return a.shape == b.shape and np.array_equal(np.asarray(a, NUMPY[dtype]).view(BITS[dtype]),
                                                 np.asarray(b, NUMPY[dtype]).view(BITS[dtype]))


@pytest.mark.parametrize("dtype", ["F32", "F16", "BF16"])
def test_files_written_by_the_package_read_the_same(tmp_path, dtype):
    t = {"W1": values(dtype, (12, 8), 1), "b": values(dtype, (7,), 2), "x": values(dtype, (2, 3, 4), 3)}
    path = tmp_path / "ref.safetensors"
    save_file(t, path, metadata={"format": "np"})
    f = open_weights(path)
    assert sorted(f.names) == sorted(t)
    for name, a in t.items():
        got = f.read(name, name)
        assert got.dtype == (np.float32 if dtype == "BF16" else NUMPY[dtype]), name
        assert same_bits(got, a, dtype), name


@pytest.mark.parametrize("dtype", ["F32", "F16", "BF16"])
def test_the_package_reads_the_test_writer_s_files_as_the_reader_does(tmp_path, dtype):
    t = {"W1": values(dtype, (12, 8), 4), "W2": values(dtype, (8, 12), 5)}
    path = write_safetensors(tmp_path / "w.safetensors",
                             {k: (dtype, a.astype(np.float32)) for k, a in t.items()})
    f = open_weights(path)
    with safe_open(path, framework="np") as ref:
        assert sorted(ref.keys()) == sorted(f.names)
        for name in t:
            assert same_bits(f.read(name, name), ref.get_tensor(name), dtype), name


def _raw(path, header, data_bytes):
    h = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(h)) + h + bytes(data_bytes))
    return path


def _t(begin, n=4):
    return {"dtype": "F32", "shape": [n], "data_offsets": [begin, begin + 4 * n]}


LAYOUTS = {   # name: (header, data bytes, accepted by the reference implementation)
    "in order": ({"a": _t(0), "b": _t(16)}, 32, True),
    "offsets not in the header's order": ({"b": _t(16), "a": _t(0)}, 32, True),
    "empty tensor on another's first byte": ({"e": _t(0, 0), "a": _t(0)}, 16, True),
    "overlap": ({"a": _t(0), "b": _t(0)}, 16, False),
    "partial overlap": ({"a": _t(0), "b": _t(8)}, 24, False),
    "gap": ({"a": _t(0), "b": _t(20)}, 36, False),
    "first tensor not at 0": ({"a": _t(4)}, 20, False),
    "bytes after the last tensor": ({"a": _t(0)}, 20, False),
    "truncated": ({"a": _t(0), "b": _t(16)}, 24, False),
    "size not shape x dtype": ({"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 12]}}, 12, False),
}


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_the_same_layouts_are_rejected(tmp_path, layout):
    header, n, accepted = LAYOUTS[layout]
    path = _raw(tmp_path / "w.safetensors", header, n)
    try:
        with safe_open(path, framework="np") as ref:
            ref_names = sorted(ref.keys())
    except SafetensorError:
        ref_names = None
    assert (ref_names is not None) == accepted          # the premise: what the reference does
    if accepted:
        assert sorted(open_weights(path).names) == ref_names
    else:
        with pytest.raises(WeightsError, match="corrupt|truncated"):
            open_weights(path)


def test_f8_e4m3_is_read_here_not_by_the_package(tmp_path):
    """The package writes F8_E4M3 from ml_dtypes' float8_e4m3fn, but its numpy interface does
    not read it (it looks for ``numpy.float8_e4m3fn``); the reader here does, with the block
    scales DeepSeek's checkpoints carry, equal to ml_dtypes' decoding times the scale."""
    codes = values("F32", (12, 8), 6).astype(ml_dtypes.float8_e4m3fn)
    codes[~np.isfinite(codes.astype(np.float32))] = 1.0          # E4M3 NaN codes are an error here
    path = tmp_path / "fp8.safetensors"
    save_file({"W1": codes, "W1_scale_inv": np.array([[0.25]], np.float32)}, path)
    with safe_open(path, framework="np") as ref:
        with pytest.raises(AttributeError, match="float8_e4m3fn"):
            ref.get_tensor("W1")
    got = open_weights(path).read("W1", "W1")
    assert np.array_equal(got, codes.astype(np.float64) * 0.25)
