"""What ``lpu plan`` needs of a model's architecture (:class:`Arch`), read from the fields of
a Hugging Face ``config.json``: a user's (``lpu plan --hf-config``) or a built-in description
(:mod:`firmware_gen.host.models`), which the same reader takes (``docs/plan.md``, "Models
and sources").  A field missing or of the wrong kind is a :class:`ModelConfigError` naming it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from lpu_arch.errors import LpuError

from firmware_gen.host import models as builtin_models


class ModelConfigError(LpuError, ValueError):
    """A model that cannot be read: the message names the file or model and the field (one line)."""


@dataclass(frozen=True)
class Attention:
    """A model's attention, as its parameter count needs it (``plan.attention_params``)."""
    kind: str                 # 'mla' or 'gqa'
    heads: int
    kv_heads: int = 0
    head_dim: int = 0
    q_lora_rank: int = 0
    kv_lora_rank: int = 0
    qk_nope_head_dim: int = 0
    qk_rope_head_dim: int = 0
    v_head_dim: int = 0
    qkv_bias: bool = False
    o_bias: bool = False
    qk_norm: str = "none"     # 'none', 'per_head' (head_dim each for q and k) or 'per_layer'
    sinks: bool = False


@dataclass(frozen=True)
class Arch:
    """What the plan needs of a model, read from its config.json (:func:`parse_config`)."""
    name: str
    hidden: int
    layers: int
    vocab: int
    tie_embeddings: bool
    dense_layers: int                 # layers with a dense FFN
    moe_layers: int                   # layers with a MoE FFN
    dense_intermediate: int           # I of the dense FFN (0: none)
    experts: int                      # routed experts per MoE layer
    top_k: int
    expert_intermediate: int
    shared_experts: int               # shared experts per MoE layer
    shared_intermediate: int
    router_bias: bool
    expert_bias: bool
    mtp_layers: int                   # DeepSeek-style MTP layers counted
    attention: Attention
    notes: tuple = ()

    @property
    def moe(self) -> bool:
        return self.moe_layers > 0


def _get(cfg: dict, name: str, *keys, default=None):
    """The first of the integer fields ``keys`` that ``cfg`` holds, else ``default`` (None:
    the field is required)."""
    for k in keys:
        if k in cfg and cfg[k] is not None:
            v = cfg[k]
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                raise ModelConfigError(f"{name}: config field {k!r} must be a number, got {v!r}")
            if v != int(v) or v < 0:
                raise ModelConfigError(f"{name}: config field {k!r} must be a non-negative integer, got {v!r}")
            return int(v)
    if default is None:
        raise ModelConfigError(f"{name}: config.json has no {' or '.join(repr(k) for k in keys)}")
    return default


def parse_config(cfg: dict, name: str = "config") -> Arch:
    """An :class:`Arch` from the fields of a Hugging Face ``config.json`` (a multimodal
    config's ``text_config`` is read).  Reads DeepSeek-V3/Kimi-K2 (MLA, ``n_routed_experts``,
    ``first_k_dense_replace``), Qwen2/3-MoE (``num_experts``, ``decoder_sparse_step``,
    ``mlp_only_layers``), GPT-OSS, MiniMax-M2 and Mixtral (``num_local_experts``, the
    expert's size in ``intermediate_size``), GLM-4.5 and dense Llama/Qwen-style models; a
    missing required field is a :class:`ModelConfigError` naming it, among them
    ``moe_intermediate_size`` beside ``n_routed_experts`` or ``num_experts``
    (:data:`SIZED_EXPERTS`)."""
    if not isinstance(cfg, dict):
        raise ModelConfigError(f"{name}: a config.json must be a JSON object, got {type(cfg).__name__}")
    if isinstance(cfg.get("text_config"), dict):
        cfg = {**cfg["text_config"], "model_type": cfg["text_config"].get("model_type", cfg.get("model_type"))}
    mt = str(cfg.get("model_type") or "")
    get = partial(_get, cfg, name)
    notes = []
    H = get("hidden_size", "dim")
    L = get("num_hidden_layers", "n_layers")
    V = get("vocab_size")
    if min(H, L, V) < 1:
        raise ModelConfigError(f"{name}: hidden_size, num_hidden_layers and vocab_size must be positive")
    tie = bool(cfg.get("tie_word_embeddings", False))
    if "tie_word_embeddings" not in cfg:
        notes.append("tie_word_embeddings absent: embeddings taken as untied")
    E = get("n_routed_experts", "num_experts", "num_local_experts", default=0)
    heads = get("num_attention_heads", "n_heads")
    if heads < 1:
        raise ModelConfigError(f"{name}: num_attention_heads must be positive")
    top_k, Ie, S, Is, Id = _ffn_sizes(cfg, get, name, E)
    n_moe = _moe_layers(cfg, get, E, L)
    n_dense = L - n_moe
    if n_dense and not Id:
        raise ModelConfigError(f"{name}: {n_dense} layers have a dense FFN but config.json has no 'intermediate_size' "
                        "for it")
    if E and Ie < 1:
        raise ModelConfigError(f"{name}: the expert's intermediate size must be positive")
    if not n_dense:
        Id = 0
    mtp = get("num_nextn_predict_layers", default=0)
    if cfg.get("num_mtp_modules"):
        notes.append(f"config has {cfg['num_mtp_modules']} MTP modules (num_mtp_modules) whose structure it "
                     "does not state: not counted")
    router_bias = bool(E) and (cfg.get("topk_method") == "noaux_tc" or bool(cfg.get("use_routing_bias"))
                               or mt == "gpt_oss")
    return Arch(name=name, hidden=H, layers=L, vocab=V, tie_embeddings=tie, dense_layers=n_dense,
                moe_layers=n_moe, dense_intermediate=Id, experts=E, top_k=top_k, expert_intermediate=Ie,
                shared_experts=S, shared_intermediate=Is, router_bias=router_bias, expert_bias=mt == "gpt_oss",
                mtp_layers=mtp, attention=_attention(cfg, get, H, heads, mt), notes=tuple(notes))


def _ffn_sizes(cfg: dict, get, name: str, E: int) -> tuple[int, int, int, int, int]:
    """``(top_k, expert I, shared experts, shared I, dense I)`` of a config with ``E``
    routed experts (0: a dense model) (:func:`parse_config`)."""
    top_k = Ie = S = Is = 0
    if not E:
        return top_k, Ie, S, Is, get("intermediate_size")
    top_k = get("num_experts_per_tok", "experts_per_token", "num_experts_per_token")
    if not 1 <= top_k <= E:
        raise ModelConfigError(f"{name}: num_experts_per_tok must be in 1..{E} (the routed experts), got {top_k}")
    if "moe_intermediate_size" in cfg:
        Ie = get("moe_intermediate_size")
        Id = get("intermediate_size", default=0)
    elif cfg.get("num_local_experts") is not None:
        Ie = get("intermediate_size")  # Mixtral, GPT-OSS, MiniMax: the expert's size
        Id = 0
    else:
        key = next(k for k in SIZED_EXPERTS if cfg.get(k) is not None)
        raise ModelConfigError(f"{name}: config.json has {key!r} but no 'moe_intermediate_size', the routed "
                               f"experts' intermediate size; with {key!r} (DeepSeek, GLM-4.5, Qwen-MoE) "
                               "'intermediate_size' is the dense FFN's, not the experts'")
    if "n_shared_experts" in cfg or "num_shared_experts" in cfg:
        S = get("n_shared_experts", "num_shared_experts", default=0)
        Is = Ie
    elif cfg.get("shared_expert_intermediate_size"):
        S, Is = 1, get("shared_expert_intermediate_size")
    elif cfg.get("shared_intermediate_size"):
        S, Is = 1, get("shared_intermediate_size")
    return top_k, Ie, S, Is, Id


SIZED_EXPERTS = ("n_routed_experts", "num_experts")
"""Expert counts of the families whose experts are sized by ``moe_intermediate_size`` alone
(their ``intermediate_size`` is the dense FFN's); ``num_local_experts`` (Mixtral, GPT-OSS,
MiniMax) sizes them by ``intermediate_size``."""


def _moe_layers(cfg: dict, get, E: int, L: int) -> int:
    """How many of the ``L`` layers have a MoE FFN (``first_k_dense_replace``,
    ``moe_layer_freq``, ``decoder_sparse_step``, ``mlp_only_layers``)."""
    first_k = get("first_k_dense_replace", default=0)
    freq = max(1, get("moe_layer_freq", default=1))
    step = max(1, get("decoder_sparse_step", default=1))
    mlp_only = set(cfg.get("mlp_only_layers") or [])
    return len([i for i in range(L) if E and i >= first_k and i % freq == 0 and (i + 1) % step == 0
                and i not in mlp_only])


def _attention(cfg: dict, get, H: int, heads: int, mt: str) -> Attention:
    """The attention of a config: MLA when it has a ``kv_lora_rank``, else GQA (with the
    biases, QK norms and sinks its ``model_type`` has)."""
    if cfg.get("kv_lora_rank"):
        return Attention("mla", heads, q_lora_rank=get("q_lora_rank", default=0),
                         kv_lora_rank=get("kv_lora_rank"),
                         qk_nope_head_dim=get("qk_nope_head_dim"),
                         qk_rope_head_dim=get("qk_rope_head_dim"),
                         v_head_dim=get("v_head_dim"))
    kv = get("num_key_value_heads", default=heads)
    hd = get("head_dim", default=0) or H // heads
    qkv_bias = bool(cfg.get("attention_bias")) or mt in ("qwen2", "qwen2_moe")
    o_bias = bool(cfg.get("attention_bias")) and mt in ("gpt_oss",)
    if mt in ("qwen3", "qwen3_moe"):
        qk = "per_head"
    elif cfg.get("use_qk_norm"):
        qk = "per_layer" if cfg.get("qk_norm_type") == "per_layer" else "per_head"
    else:
        qk = "none"
    return Attention("gqa", heads, kv_heads=kv, head_dim=hd, qkv_bias=qkv_bias, o_bias=o_bias, qk_norm=qk,
                     sinks=mt == "gpt_oss")


# ---- the models to plan ---------------------------------------------------------------------
def builtin(name: str):
    """(Arch, title, sources, published) of a built-in model."""
    key = name.lower()
    if key not in builtin_models.MODELS:
        raise ModelConfigError(f"unknown model {name!r}; choose one of {', '.join(builtin_models.MODELS)} or all "
                               "(or give --hf-config FILE)")
    title, cfg = builtin_models.MODELS[key]
    return parse_config(cfg, key), title, builtin_models.SOURCES[key], builtin_models.PUBLISHED[key][0]


def load_hf_config(path) -> tuple[Arch, str]:
    """The :class:`Arch` of the config.json at ``path`` (a directory: the ``config.json`` in
    it, as Hugging Face's ``from_pretrained`` reads a model directory) and the model's name
    (the file's stem, or for a ``config.json`` its directory's name)."""
    p = Path(path)
    if p.is_dir():
        if not (p / "config.json").is_file():
            raise ModelConfigError(f"{path} is a directory without a config.json; give the model's config.json")
        p = p / "config.json"
    elif not p.is_file():
        raise ModelConfigError(f"{path}: no such file")
    try:
        cfg = json.loads(p.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ModelConfigError(f"{path} is not JSON: {e}") from None
    name = p.stem if p.name != "config.json" else (p.resolve().parent.name or "config")
    return parse_config(cfg, name), name


def requested(model: str | None = None, hf_config=None) -> list[tuple]:
    """``(Arch, title, sources, published)`` of each model to plan: the config.json at
    ``hf_config``, else the built-in ``model`` (every one for None or 'all')."""
    if hf_config:
        arch, name = load_hf_config(hf_config)
        return [(arch, name, [f"{hf_config} (a user's config.json)"], None)]
    names = list(builtin_models.MODELS) if (model or "all").lower() == "all" else [model]
    return [builtin(n) for n in names]
