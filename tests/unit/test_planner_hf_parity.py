"""Parameter counts agree with Hugging Face transformers' own models, family by family.

Each case builds a small random-shape config of a supported family, instantiates the transformers
model on the ``meta`` device (no memory, no weights) and compares ``sum(p.numel())`` with
:meth:`Architecture.params_total`. This checks the planner's per-family layer recipes (biases,
q/k norms, Gemma's four norms, shared experts, MLA projections) against the reference
implementation rather than against our own arithmetic.
"""

from __future__ import annotations

from typing import Any

import pytest

from engine_builder.planner import Architecture

pytestmark = pytest.mark.slow  # imports torch + transformers (~10 s)
transformers = pytest.importorskip("transformers")
torch = pytest.importorskip("torch")

BASE: dict[str, Any] = {
    "hidden_size": 64,
    "intermediate_size": 96,
    "num_hidden_layers": 3,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "vocab_size": 128,
    "max_position_embeddings": 256,
    "torch_dtype": "bfloat16",
}

CASES: dict[str, dict[str, Any]] = {
    "llama": {"model_type": "llama", "tie_word_embeddings": False},
    "llama_tied": {"model_type": "llama", "tie_word_embeddings": True},
    "mistral": {"model_type": "mistral", "head_dim": 16},
    "qwen2": {"model_type": "qwen2"},
    "qwen3": {"model_type": "qwen3", "head_dim": 32},
    "gemma2": {"model_type": "gemma2", "head_dim": 32},
    "phi3": {"model_type": "phi3", "pad_token_id": 0},
    "mixtral": {"model_type": "mixtral", "num_local_experts": 4, "num_experts_per_tok": 2},
    "qwen2_moe": {
        "model_type": "qwen2_moe",
        "num_experts": 4,
        "num_experts_per_tok": 2,
        "moe_intermediate_size": 32,
        "shared_expert_intermediate_size": 48,
        "decoder_sparse_step": 2,
        "mlp_only_layers": [0],
    },
    "qwen3_moe": {
        "model_type": "qwen3_moe",
        "num_experts": 4,
        "num_experts_per_tok": 2,
        "moe_intermediate_size": 32,
        "head_dim": 16,
    },
    "deepseek_v3": {
        "model_type": "deepseek_v3",
        "num_key_value_heads": 4,
        "n_routed_experts": 4,
        "num_experts_per_tok": 2,
        "n_shared_experts": 1,
        "moe_intermediate_size": 32,
        "first_k_dense_replace": 1,
        "kv_lora_rank": 32,
        "q_lora_rank": 48,
        "qk_rope_head_dim": 8,
        "qk_nope_head_dim": 16,
        "v_head_dim": 16,
        "n_group": 1,
        "topk_group": 1,
        "topk_method": "noaux_tc",
    },
}


@pytest.mark.parametrize("name", list(CASES))
def test_params_total_matches_transformers(name: str) -> None:
    config = {**BASE, **CASES[name]}
    hf_config = transformers.AutoConfig.for_model(**config)
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(hf_config)
    expected = sum(p.numel() for p in model.parameters())
    # DeepSeek-V3's e_score_correction_bias is a buffer in transformers but a stored checkpoint
    # tensor (model.layers.N.mlp.gate.e_score_correction_bias) that the engine loads: count it.
    expected += sum(b.numel() for n, b in model.named_buffers() if n.endswith("e_score_correction_bias"))
    assert Architecture.from_hf_config(config).params_total() == expected
