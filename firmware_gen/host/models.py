"""Built-in architecture descriptions of public models, as the fields of their config.json.

Each entry holds only the fields :func:`firmware_gen.host.model_arch.parse_config` reads, transcribed
from the model's public configuration, and for every group of values the source it was
read from (``SOURCES``).  The same parser reads a user's Hugging Face ``config.json``
(``lpu plan --hf-config``), so a built-in entry written out as JSON and read back gives the
same plan.

Models whose values could not be found in a public source are left out, never guessed.

``PUBLISHED`` is each model's published total parameter count and where it is stated: the
tests check the parameter arithmetic against it.
"""

from __future__ import annotations

# ---- DeepSeek-V3 / DeepSeek-R1 ----------------------------------------------------------
# DeepSeek-R1 is trained from DeepSeek-V3-Base and has its architecture (DeepSeek-R1
# README: "DeepSeek-R1-Zero & DeepSeek-R1 are trained based on DeepSeek-V3-Base. For more
# details regarding the model architecture, please refer to DeepSeek-V3").
_DEEPSEEK_V3 = {
    "model_type": "deepseek_v3",
    # github.com/deepseek-ai/DeepSeek-V3 inference/configs/config_671B.json (commit 9b4e978):
    # dim 7168, inter_dim 18432, moe_inter_dim 2048, n_layers 61, n_dense_layers 3,
    # n_heads 128, n_routed_experts 256, n_shared_experts 1, n_activated_experts 8,
    # q_lora_rank 1536, kv_lora_rank 512, qk_nope_head_dim 128, qk_rope_head_dim 64,
    # v_head_dim 128, vocab_size 129280.  The same values under their config.json names in
    # the Hugging Face config of DeepSeek-V3 (deepseek_v3 model type), e.g. as quoted in
    # huggingface.co/amd/DeepSeek-R1-0528-MXFP4 (commit 41aaaea, config.json).
    "hidden_size": 7168,
    "intermediate_size": 18432,
    "moe_intermediate_size": 2048,
    "num_hidden_layers": 61,
    "first_k_dense_replace": 3,
    "moe_layer_freq": 1,
    "num_attention_heads": 128,
    "n_routed_experts": 256,
    "n_shared_experts": 1,
    "num_experts_per_tok": 8,
    "q_lora_rank": 1536,
    "kv_lora_rank": 512,
    "qk_nope_head_dim": 128,
    "qk_rope_head_dim": 64,
    "v_head_dim": 128,
    "vocab_size": 129280,
    # The router's load-balancing bias (256 entries): inference/model.py, class Gate
    # (``self.bias ... if self.dim == 7168``); config.json "topk_method": "noaux_tc".
    "topk_method": "noaux_tc",
    # One multi-token-prediction module: README_WEIGHTS.md ("num_nextn_predict_layers ...
    # In this model, the value is set to 1"; its layer is "identical to the Main Model
    # hidden layers", plus enorm, hnorm and eh_proj; embedding and output head shared).
    "num_nextn_predict_layers": 1,
    # Separate embedding and output head: inference/model.py (ParallelEmbedding ``embed``
    # and ColumnParallelLinear ``head``); README_WEIGHTS.md lists both.
    "tie_word_embeddings": False,
}

# ---- Kimi K2 -----------------------------------------------------------------------------
_KIMI_K2 = {
    "model_type": "kimi_k2",
    # github.com/MoonshotAI/Kimi-K2 README.md "Model Summary" (commit c6157be): 61 layers
    # (dense layer included), 1 dense layer, attention hidden dimension 7168, MoE hidden
    # dimension per expert 2048, 64 attention heads, 384 experts, 8 selected per token,
    # 1 shared expert, vocabulary 160K, MLA attention, SwiGLU.
    "hidden_size": 7168,
    "num_hidden_layers": 61,
    "first_k_dense_replace": 1,
    "moe_layer_freq": 1,
    "moe_intermediate_size": 2048,
    "num_attention_heads": 64,
    "n_routed_experts": 384,
    "num_experts_per_tok": 8,
    "n_shared_experts": 1,
    # Kimi-K2 "reuses the DeepSeekV3CausalLM architecture" (docs/deploy_guidance.md of the
    # same repository).  The config.json values of moonshotai/Kimi-K2-Instruct for the
    # dense FFN, the MLA ranks and the vocabulary: intermediate_size 18432, q_lora_rank
    # 1536, kv_lora_rank 512, qk_nope_head_dim 128, qk_rope_head_dim 64, v_head_dim 128,
    # vocab_size 163840, num_nextn_predict_layers 0, tie_word_embeddings false, topk_method
    # noaux_tc, as transcribed field by field in blog.csdn.net/hbkybkzw/article/details/
    # 149370789 ("kimi-k2模型配置参数"); the dense FFN size 18432, the shared expert of 2048
    # and the untied embeddings also in NVIDIA Megatron-Bridge's KimiK2Provider
    # (docs.nvidia.com/nemo/megatron-bridge/latest/apidocs/bridge/bridge.models.kimi.
    # kimi_provider.html: ffn_hidden_size 18432, moe_shared_expert_intermediate_size 2048,
    # share_embeddings_and_output_weights False).
    "intermediate_size": 18432,
    "q_lora_rank": 1536,
    "kv_lora_rank": 512,
    "qk_nope_head_dim": 128,
    "qk_rope_head_dim": 64,
    "v_head_dim": 128,
    "vocab_size": 163840,
    "num_nextn_predict_layers": 0,
    "tie_word_embeddings": False,
    "topk_method": "noaux_tc",
}

# ---- Qwen3-235B-A22B ----------------------------------------------------------------------
_QWEN3_235B = {
    "model_type": "qwen3_moe",
    # Qwen3 Technical Report, Table 2 (Qwen3_Technical_Report.pdf in github.com/QwenLM/Qwen3,
    # commit 7a2f61f): Qwen3-235B-A22B, 94 layers, 64 / 4 heads (Q / KV), 128 experts,
    # 8 activated; section 2: no shared experts, QK-Norm, no QKV bias.
    "num_hidden_layers": 94,
    "num_attention_heads": 64,
    "num_key_value_heads": 4,
    "num_experts": 128,
    "num_experts_per_tok": 8,
    # github.com/AI-Hypercomputer/maxtext src/MaxText/configs/models/qwen3-235b-a22b.yml
    # (commit 1e3dfac): base_emb_dim 4096, base_moe_mlp_dim 1536, head_dim 128,
    # vocab_size 151936, use_qk_norm True (every layer MoE: no dense layer list).
    "hidden_size": 4096,
    "moe_intermediate_size": 1536,
    "head_dim": 128,
    "vocab_size": 151936,
    "decoder_sparse_step": 1,
    "mlp_only_layers": [],
    # Untied embeddings: Ascend MindSpeed-RL configs/model/qwen3_235b_a22b.yaml
    # (gitcode.com/Ascend/MindSpeed-RL: untie_embeddings_and_output_weights true,
    # ffn_hidden_size 12288, padded_vocab_size 151936, disable_bias_linear true).
    "intermediate_size": 12288,
    "tie_word_embeddings": False,
    "attention_bias": False,
}

# ---- GPT-OSS-120B -------------------------------------------------------------------------
_GPT_OSS_120B = {
    "model_type": "gpt_oss",
    # github.com/openai/gpt-oss gpt_oss/torch/model.py (commit 7b58334), ModelConfig, whose
    # defaults are gpt-oss-120b's original/config.json (the same values in
    # huggingface.co/witflag/AlphaMind original/config.json, "Duplicate from
    # openai/gpt-oss-120b"): num_hidden_layers 36, num_experts 128, experts_per_token 4,
    # vocab_size 201088, hidden_size 2880, intermediate_size 2880, head_dim 64,
    # num_attention_heads 64, num_key_value_heads 8.  Hugging Face names: num_local_experts,
    # num_experts_per_tok.
    "num_hidden_layers": 36,
    "num_local_experts": 128,
    "num_experts_per_tok": 4,
    "vocab_size": 201088,
    "hidden_size": 2880,
    "intermediate_size": 2880,
    "head_dim": 64,
    "num_attention_heads": 64,
    "num_key_value_heads": 8,
    # The same model.py: qkv and out are torch.nn.Linear with their default bias, the
    # router (gate) too; mlp1_bias and mlp2_bias per expert; one attention sink per head;
    # a separate unembedding.
    "attention_bias": True,
    "tie_word_embeddings": False,
}

# ---- MiniMax-M2 ---------------------------------------------------------------------------
_MINIMAX_M2 = {
    "model_type": "minimax_m2",
    # The MiniMax-M2 architecture's configuration defaults, configuration_minimax_m2.py as
    # published with huggingface.co/ModelCloud/MiniMax-M2-GPTQMODEL-W4A16: vocab_size
    # 200064, hidden_size 3072, intermediate_size 1536 (the expert's), num_hidden_layers 62,
    # num_attention_heads 48, num_key_value_heads 8, head_dim 128, num_local_experts 256,
    # num_experts_per_tok 8, use_qk_norm True, qk_norm_type "per_layer", use_routing_bias
    # True.  The official config.json (huggingface.co/MiniMaxAI/MiniMax-M2, commit 35c5c79):
    # head_dim 128, tie_word_embeddings false, use_mtp true, use_qk_norm true,
    # use_routing_bias true, vocab_size 200064; shared_intermediate_size 0 and
    # num_mtp_modules 3 with mtp_transformer_layers 1 as in the MiniMax-M2.1 config.json
    # (huggingface.co/MiniMaxAI/MiniMax-M2.1 commit 968e628), the same architecture.
    "vocab_size": 200064,
    "hidden_size": 3072,
    "intermediate_size": 1536,
    "num_hidden_layers": 62,
    "num_attention_heads": 48,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "num_local_experts": 256,
    "num_experts_per_tok": 8,
    "shared_intermediate_size": 0,
    "use_qk_norm": True,
    "qk_norm_type": "per_layer",
    "use_routing_bias": True,
    "use_mtp": True,
    "num_mtp_modules": 3,
    "mtp_transformer_layers": 1,
    "tie_word_embeddings": False,
}

# ---- GLM-4.5 ------------------------------------------------------------------------------
_GLM_45 = {
    "model_type": "glm4_moe",
    # NVIDIA Megatron-Bridge, GLM 4.5 (docs.nvidia.com/nemo/megatron-bridge/latest/models/
    # llm/glm45.html), zai-org/GLM-4.5: 92 layers (first 3 dense, 89 MoE), hidden 5120,
    # FFN 12288, 96 attention heads, 8 query groups, 160 experts, top-8, MoE FFN 1536,
    # shared expert 1536, QK LayerNorm, vocabulary 151552, MTP with 1 layer.
    "num_hidden_layers": 92,
    "first_k_dense_replace": 3,
    "hidden_size": 5120,
    "intermediate_size": 12288,
    "num_attention_heads": 96,
    "num_key_value_heads": 8,
    "n_routed_experts": 160,
    "num_experts_per_tok": 8,
    "moe_intermediate_size": 1536,
    "n_shared_experts": 1,
    "use_qk_norm": True,
    "vocab_size": 151552,
    "num_nextn_predict_layers": 1,
    # config.json of the same architecture (355B-A32B like GLM-4.5, github.com/zai-org/
    # GLM-4.5 README model table), huggingface.co/zai-org/GLM-4.7 (refs/pr/49,
    # config.json): head_dim 128, attention_bias true, tie_word_embeddings false,
    # moe_layer_freq absent (every layer past the first 3 is MoE), noaux_tc-style
    # routing with a bias ("Router sigmoid scoring with expert bias", Megatron-Bridge).
    "head_dim": 128,
    "attention_bias": True,
    "tie_word_embeddings": False,
    "topk_method": "noaux_tc",
}

# ---- Llama-3-70B (dense) ------------------------------------------------------------------
_LLAMA3_70B = {
    "model_type": "llama",
    # github.com/meta-llama/llama-models models/sku_list.py (commit 364ed4e), Llama 3 70b
    # (huggingface_repo meta-llama/Llama-3-70B): dim 8192, n_layers 80, n_heads 64,
    # n_kv_heads 8, vocab_size 128256 (LLAMA3_VOCAB_SIZE), ffn_dim_multiplier 1.3,
    # multiple_of 4096.  FFN size from models/llama3/model.py FeedForward:
    # 4096 * ceil(int(1.3 * int(2 * 4 * 8192 / 3)) / 4096) = 28672 (config.json
    # intermediate_size).  No biases; w1/w2/w3 SwiGLU; separate output layer.
    "hidden_size": 8192,
    "num_hidden_layers": 80,
    "num_attention_heads": 64,
    "num_key_value_heads": 8,
    "vocab_size": 128256,
    "intermediate_size": 28672,
    "attention_bias": False,
    "tie_word_embeddings": False,
}

MODELS = {
    "deepseek-r1": ("DeepSeek-R1", _DEEPSEEK_V3),
    "deepseek-v3": ("DeepSeek-V3", _DEEPSEEK_V3),
    "kimi-k2": ("Kimi K2", _KIMI_K2),
    "qwen3-235b-a22b": ("Qwen3-235B-A22B", _QWEN3_235B),
    "gpt-oss-120b": ("GPT-OSS-120B", _GPT_OSS_120B),
    "minimax-m2": ("MiniMax-M2", _MINIMAX_M2),
    "glm-4.5": ("GLM-4.5", _GLM_45),
    "llama-3-70b": ("Llama-3-70B", _LLAMA3_70B),
}

_DEEPSEEK_V3_SOURCE = ("github.com/deepseek-ai/DeepSeek-V3 inference/configs/config_671B.json, "
                       "inference/model.py, README_WEIGHTS.md (commit 9b4e978)")
SOURCES = {
    "deepseek-r1": [_DEEPSEEK_V3_SOURCE, "github.com/deepseek-ai/DeepSeek-R1 README.md (commit 0cf7856): R1 is "
                    "trained from DeepSeek-V3-Base, architecture as DeepSeek-V3, 671B total"],
    "deepseek-v3": [_DEEPSEEK_V3_SOURCE],
    "kimi-k2": ["github.com/MoonshotAI/Kimi-K2 README.md Model Summary, docs/deploy_guidance.md (commit c6157be)",
                "moonshotai/Kimi-K2-Instruct config.json as transcribed in blog.csdn.net/hbkybkzw/article/details/"
                "149370789",
                "docs.nvidia.com/nemo/megatron-bridge/latest/apidocs/bridge/bridge.models.kimi.kimi_provider.html"],
    "qwen3-235b-a22b": ["Qwen3 Technical Report Table 2 (github.com/QwenLM/Qwen3 Qwen3_Technical_Report.pdf, "
                        "commit 7a2f61f)",
                        "github.com/AI-Hypercomputer/maxtext src/MaxText/configs/models/qwen3-235b-a22b.yml "
                        "(commit 1e3dfac)",
                        "gitcode.com/Ascend/MindSpeed-RL configs/model/qwen3_235b_a22b.yaml"],
    "gpt-oss-120b": ["github.com/openai/gpt-oss gpt_oss/torch/model.py ModelConfig and modules, README.md "
                     "(commit 7b58334)",
                     "huggingface.co/witflag/AlphaMind original/config.json (duplicate of openai/gpt-oss-120b)"],
    "minimax-m2": ["huggingface.co/MiniMaxAI/MiniMax-M2 config.json (commit 35c5c79)",
                   "configuration_minimax_m2.py of huggingface.co/ModelCloud/MiniMax-M2-GPTQMODEL-W4A16",
                   "huggingface.co/MiniMaxAI/MiniMax-M2.1 config.json (commit 968e628): MTP fields",
                   "github.com/MiniMax-AI/MiniMax-M2 README.md (commit 2e575ef): 230B total, 10B active"],
    "glm-4.5": ["docs.nvidia.com/nemo/megatron-bridge/latest/models/llm/glm45.html (zai-org/GLM-4.5)",
                "huggingface.co/zai-org/GLM-4.7 config.json (refs/pr/49), same 355B-A32B architecture",
                "github.com/zai-org/GLM-4.5 README.md (commit 170f20b): 355B total, 32B active"],
    "llama-3-70b": ["github.com/meta-llama/llama-models models/sku_list.py (commit 364ed4e), "
                    "models/llama3/model.py"],
}

# Published total parameter counts (billions) and where they are stated.
PUBLISHED = {
    "deepseek-r1": (671.0, "main model without the MTP module: DeepSeek-R1 README and DeepSeek-V3 "
                           "README_WEIGHTS.md (671B; the MTP module 11.5B more)"),
    "deepseek-v3": (671.0, "main model without the MTP module: README_WEIGHTS.md"),
    "kimi-k2": (1000.0, "Kimi-K2 README.md: 1T total parameters"),
    "qwen3-235b-a22b": (235.0, "the model's name and the Qwen3 Technical Report"),
    "gpt-oss-120b": (117.0, "gpt-oss README.md: 117B parameters"),
    "minimax-m2": (230.0, "MiniMax-M2 README.md: 230 billion total parameters"),
    "glm-4.5": (355.0, "GLM-4.5 README.md: 355 billion total parameters"),
    "llama-3-70b": (70.0, "Llama 3 MODEL_CARD.md: 70B"),
}
