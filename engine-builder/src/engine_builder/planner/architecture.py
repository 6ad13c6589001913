"""Model architecture read from a Hugging Face ``config.json``, and its parameter counts.

The planner needs the shapes of every weight tensor, grouped by what quantization does to them
(quantized linear layers vs. embeddings, ``lm_head``, norms, MoE routers and biases that stay in the
checkpoint dtype) and by how tensor and pipeline parallelism split them. :class:`Architecture` holds
the handful of numbers those shapes derive from; :meth:`Architecture.tensor_groups` lists the groups
for one (TP rank, PP rank).

Supported ``model_type`` values (:data:`SUPPORTED_MODEL_TYPES`): Llama 2/3 (``llama``), Mistral
(``mistral``), Mixtral (``mixtral``), Qwen2/2.5 (``qwen2``), Qwen1.5/2 MoE (``qwen2_moe``), Qwen3
(``qwen3``, ``qwen3_moe``), Gemma 2 (``gemma2``), Phi-3 (``phi3``) and DeepSeek-V2/V3 with multi-head
latent attention (``deepseek_v2``, ``deepseek_v3``); the tensorrt backend builds all but
``deepseek_v3`` (:data:`TENSORRT_MODEL_TYPES`).

How TensorRT-LLM shards each tensor (the rules :meth:`Architecture.tensor_groups` follows):

* q/o projections and the MLP (gate, up, down) split by TP (column/row-parallel linears).
* k/v projections hold ``ceil(num_kv_heads / tp)`` heads per rank: when ``tp > num_kv_heads`` the KV
  heads are replicated (reference §7.1, ``num_kv_heads_per_layer = (num_kv_heads + tp - 1) // tp``).
* MoE experts: TensorRT-LLM maps ``tp = moe_tp × moe_ep``; each rank holds ``num_experts / moe_ep``
  experts with ``moe_intermediate_size / moe_tp`` columns, i.e. ``1 / tp`` of all expert weights
  whatever the EP split. The router is replicated.
* ``lm_head`` is vocab-parallel (``ceil(vocab / tp)`` rows per rank, TensorRT-LLM pads the vocab to a
  multiple of TP). The input embedding is replicated on every TP rank: ``convert_checkpoint.py``'s
  ``--use_parallel_embedding`` defaults to off (reference §2.1), so this is the conservative case.
* Norms are replicated. Pipeline parallelism puts the embedding on the first PP rank and the final
  norm + ``lm_head`` on the last; layers are split like ``numpy.array_split`` (the first
  ``num_layers % pp`` ranks get one more layer), as TensorRT-LLM's ``Mapping.pp_layers`` does.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from engine_builder.planner.errors import PlanInputError

#: ``model_type`` → family. The family selects the layer recipe in :meth:`Architecture.tensor_groups`.
SUPPORTED_MODEL_TYPES: dict[str, str] = {
    "llama": "llama",
    "mistral": "llama",
    "mixtral": "mixtral",
    "qwen2": "qwen2",
    "qwen2_moe": "qwen2_moe",
    "qwen3": "qwen3",
    "qwen3_moe": "qwen3_moe",
    "gemma2": "gemma2",
    "phi3": "phi3",
    "deepseek_v2": "deepseek",
    "deepseek_v3": "deepseek",
}

#: The ``model_type`` values of :data:`SUPPORTED_MODEL_TYPES` that the tensorrt backend (the
#: ``trtllm-build`` engine flow) can build: those whose Hugging Face class is a key of TensorRT-LLM's
#: ``MODEL_MAP`` (NVIDIA/TensorRT-LLM ``tensorrt_llm/models/__init__.py``; both stored versions,
#: commit 02267d3 and a later one that adds ``Qwen3MoeForCausalLM``, have ``DeepseekV2ForCausalLM``
#: and no ``DeepseekV3ForCausalLM``). The others run only on the pytorch backend (fresh-user trial 48
#: V1: DeepSeek-V3 on tensorrt failed only in the builder's convert, after the download).
TENSORRT_MODEL_TYPES: frozenset[str] = frozenset(SUPPORTED_MODEL_TYPES) - {"deepseek_v3"}

#: ``architectures[0]`` → ``model_type``, for configs that lack ``model_type``.
_ARCHITECTURE_CLASSES: dict[str, str] = {
    "LlamaForCausalLM": "llama",
    "MistralForCausalLM": "mistral",
    "MixtralForCausalLM": "mixtral",
    "Qwen2ForCausalLM": "qwen2",
    "Qwen2MoeForCausalLM": "qwen2_moe",
    "Qwen3ForCausalLM": "qwen3",
    "Qwen3MoeForCausalLM": "qwen3_moe",
    "Gemma2ForCausalLM": "gemma2",
    "Phi3ForCausalLM": "phi3",
    "DeepseekV2ForCausalLM": "deepseek_v2",
    "DeepseekV3ForCausalLM": "deepseek_v3",
}


def backend_model_error(model_type: str, backend: str) -> PlanInputError | None:
    """The refusal of ``model_type`` on ``backend`` (``spec.backend``), or None when it can be built
    there (:data:`TENSORRT_MODEL_TYPES`)."""
    if backend != "tensorrt" or model_type in TENSORRT_MODEL_TYPES:
        return None
    hf_class = next((c for c, t in _ARCHITECTURE_CLASSES.items() if t == model_type), model_type)
    return PlanInputError(
        "spec.backend",
        f"backend tensorrt cannot build {model_type} ({hf_class}): TensorRT-LLM's engine flow "
        "(trtllm-build) has no such model (tensorrt_llm/models/__init__.py MODEL_MAP); it runs only "
        "on the PyTorch backend. Set backend: pytorch",
    )


#: Hugging Face's own default for ``tie_word_embeddings`` per model type when the key is absent.
_TIED_DEFAULT: dict[str, bool] = {"gemma2": True}

#: What quantization does to a tensor group: ``linear`` weights are quantized, the others stay in
#: the checkpoint dtype (embeddings, ``lm_head``, norms, MoE router, biases).
TensorKind = Literal["linear", "embedding", "lm_head", "norm", "router", "bias"]

TORCH_DTYPE_BYTES: dict[str, int] = {"float16": 2, "bfloat16": 2, "float32": 4}


@dataclass(frozen=True)
class MoE:
    """Mixture-of-experts shape.

    ``num_experts`` routed experts of width ``moe_intermediate_size``, ``experts_per_token`` active per
    token; ``num_shared_experts`` always-on experts of width ``shared_intermediate_size`` (DeepSeek:
    ``n_shared_experts × moe_intermediate_size``; Qwen2-MoE: ``shared_expert_intermediate_size`` plus a
    one-output ``shared_expert_gate``); ``dense_layers``: indices of layers with a plain MLP of width
    ``intermediate_size`` (DeepSeek ``first_k_dense_replace``, Qwen ``mlp_only_layers`` /
    ``decoder_sparse_step``); ``router_bias``: DeepSeek-V3's ``e_score_correction_bias``.
    """

    num_experts: int
    experts_per_token: int
    moe_intermediate_size: int
    num_shared_experts: int = 0
    shared_intermediate_size: int = 0
    shared_expert_gate: bool = False
    dense_layers: tuple[int, ...] = ()
    router_bias: bool = False


@dataclass(frozen=True)
class MLA:
    """DeepSeek multi-head latent attention dims (``config.json`` names).

    The KV cache stores one compressed latent of ``kv_lora_rank + qk_rope_head_dim`` elements per
    token and layer instead of K and V per head.
    """

    kv_lora_rank: int
    qk_rope_head_dim: int
    qk_nope_head_dim: int
    v_head_dim: int
    q_lora_rank: int | None


@dataclass(frozen=True)
class TensorGroup:
    """``count`` parameters of one kind on one (TP, PP) rank; ``name`` is descriptive only."""

    name: str
    kind: TensorKind
    count: int


@dataclass(frozen=True)
class Architecture:
    """The shapes the planner needs, read from ``config.json`` by :meth:`from_hf_config`."""

    model_type: str
    family: str
    num_layers: int
    hidden_size: int
    num_attention_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int
    vocab_size: int
    tied_embeddings: bool
    max_position_embeddings: int
    torch_dtype: str
    attention_bias: bool = False
    mlp_bias: bool = False
    qk_norm: bool = False
    norms_per_layer: int = 2
    moe: MoE | None = None
    mla: MLA | None = None
    extra: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)

    # ----------------------------------------------------------------------------------- parsing
    @classmethod
    def from_hf_config(cls, config: Mapping[str, Any]) -> Architecture:
        """Read a Hugging Face ``config.json`` (already parsed to a dict).

        Raises :class:`PlanInputError` naming the ``config.json`` key when a required key is missing
        or not a positive integer, or naming ``model_type`` when the architecture is not supported
        (the message lists the supported ones).
        """
        if not isinstance(config, Mapping):
            raise PlanInputError("config.json", "expected a JSON object (the model's config.json)")
        model_type = config.get("model_type")
        if not model_type:
            archs = config.get("architectures") or []
            if isinstance(archs, list) and archs and archs[0] in _ARCHITECTURE_CLASSES:
                model_type = _ARCHITECTURE_CLASSES[archs[0]]
        if not isinstance(model_type, str) or model_type not in SUPPORTED_MODEL_TYPES:
            raise PlanInputError(
                "model_type",
                f"unsupported architecture {model_type!r} (architectures={config.get('architectures')!r}); "
                f"supported model_type values: {', '.join(sorted(SUPPORTED_MODEL_TYPES))}. Use a "
                "supported model or add its shape to the planner.",
            )
        family = SUPPORTED_MODEL_TYPES[model_type]
        num_layers = _pos_int(config, "num_hidden_layers")
        hidden = _pos_int(config, "hidden_size")
        heads = _pos_int(config, "num_attention_heads")
        kv_heads = _pos_int(config, "num_key_value_heads", default=heads)
        if heads % kv_heads:
            raise PlanInputError(
                "num_key_value_heads",
                f"{kv_heads} does not divide num_attention_heads {heads}; grouped-query attention needs "
                "the attention heads to be a multiple of the KV heads. Check config.json.",
            )
        head_dim_value = config.get("head_dim")
        if head_dim_value is None:
            if hidden % heads:
                raise PlanInputError(
                    "head_dim",
                    f"missing, and hidden_size {hidden} is not divisible by num_attention_heads {heads}; "
                    "add head_dim to config.json",
                )
            head_dim = hidden // heads
        else:
            head_dim = _pos_int(config, "head_dim")
        vocab = _pos_int(config, "vocab_size")
        max_pos = _pos_int(config, "max_position_embeddings")
        dtype = config.get("torch_dtype") or config.get("dtype") or "bfloat16"
        if dtype not in TORCH_DTYPE_BYTES:
            raise PlanInputError(
                "torch_dtype",
                f"unsupported checkpoint dtype {dtype!r}; expected one of {sorted(TORCH_DTYPE_BYTES)}",
            )
        tied = config.get("tie_word_embeddings")
        tied_embeddings = bool(tied) if tied is not None else _TIED_DEFAULT.get(model_type, False)

        moe: MoE | None = None
        mla: MLA | None = None
        intermediate = 0
        attention_bias = bool(config.get("attention_bias", False))
        mlp_bias = bool(config.get("mlp_bias", False))
        qk_norm = False
        norms_per_layer = 2

        if family in ("llama", "qwen2", "qwen3", "gemma2", "phi3"):
            intermediate = _pos_int(config, "intermediate_size")
        if family in {"qwen2", "qwen2_moe"}:
            attention_bias = True  # Qwen2 hard-codes bias=True on q/k/v (modeling_qwen2.py).
        if family in ("qwen3", "qwen3_moe"):
            qk_norm = True  # q_norm / k_norm over head_dim (modeling_qwen3.py).
        if family == "gemma2":
            norms_per_layer = 4  # input, post_attention, pre_feedforward, post_feedforward.
        if family == "mixtral":
            intermediate = _pos_int(config, "intermediate_size")
            moe = MoE(
                num_experts=_pos_int(config, "num_local_experts"),
                experts_per_token=_pos_int(config, "num_experts_per_tok"),
                moe_intermediate_size=intermediate,
            )
        if family in ("qwen2_moe", "qwen3_moe"):
            intermediate = _opt_int(config, "intermediate_size", 0)
            step = _opt_int(config, "decoder_sparse_step", 1)
            mlp_only = _int_list(config, "mlp_only_layers")
            dense = tuple(
                i for i in range(num_layers) if i in mlp_only or not (step > 0 and (i + 1) % step == 0)
            )
            shared = _opt_int(config, "shared_expert_intermediate_size", 0)
            moe = MoE(
                num_experts=_pos_int(config, "num_experts"),
                experts_per_token=_pos_int(config, "num_experts_per_tok"),
                moe_intermediate_size=_pos_int(config, "moe_intermediate_size"),
                num_shared_experts=1 if shared else 0,
                shared_intermediate_size=shared,
                shared_expert_gate=bool(shared),
                dense_layers=dense,
            )
            if dense and intermediate <= 0:
                raise PlanInputError("intermediate_size", "needed for the dense (mlp_only) layers")
        if family == "deepseek":
            intermediate = _pos_int(config, "intermediate_size")
            first_dense = _opt_int(config, "first_k_dense_replace", 0)
            freq = _opt_int(config, "moe_layer_freq", 1)
            n_shared = _opt_int(config, "n_shared_experts", 0)
            moe_inter = _pos_int(config, "moe_intermediate_size")
            moe = MoE(
                num_experts=_pos_int(config, "n_routed_experts"),
                experts_per_token=_pos_int(config, "num_experts_per_tok"),
                moe_intermediate_size=moe_inter,
                num_shared_experts=n_shared,
                shared_intermediate_size=n_shared * moe_inter,
                dense_layers=tuple(i for i in range(num_layers) if i < first_dense or i % freq != 0),
                router_bias=config.get("topk_method") == "noaux_tc",
            )
            q_lora = _opt_int(config, "q_lora_rank", 0)
            mla = MLA(
                kv_lora_rank=_pos_int(config, "kv_lora_rank"),
                qk_rope_head_dim=_pos_int(config, "qk_rope_head_dim"),
                qk_nope_head_dim=_pos_int(config, "qk_nope_head_dim"),
                v_head_dim=_pos_int(config, "v_head_dim"),
                q_lora_rank=q_lora or None,
            )
            head_dim = mla.qk_nope_head_dim + mla.qk_rope_head_dim
        return cls(
            model_type=model_type,
            family=family,
            num_layers=num_layers,
            hidden_size=hidden,
            num_attention_heads=heads,
            num_kv_heads=kv_heads,
            head_dim=head_dim,
            intermediate_size=intermediate,
            vocab_size=vocab,
            tied_embeddings=tied_embeddings,
            max_position_embeddings=max_pos,
            torch_dtype=dtype,
            attention_bias=attention_bias,
            mlp_bias=mlp_bias,
            qk_norm=qk_norm,
            norms_per_layer=norms_per_layer,
            moe=moe,
            mla=mla,
            extra=dict(config),
        )

    # ------------------------------------------------------------------------------ layer split
    def pp_layer_counts(self, pp: int) -> list[int]:
        """Layers per pipeline rank, first ranks take the remainder (``numpy.array_split``)."""
        base, rem = divmod(self.num_layers, pp)
        return [base + (1 if r < rem else 0) for r in range(pp)]

    def pp_layer_ranges(self, pp: int) -> list[range]:
        out: list[range] = []
        start = 0
        for n in self.pp_layer_counts(pp):
            out.append(range(start, start + n))
            start += n
        return out

    def is_moe_layer(self, layer: int) -> bool:
        return self.moe is not None and layer not in self.moe.dense_layers

    # ---------------------------------------------------------------------------- tensor groups
    def layer_groups(self, layer: int, tp: int = 1) -> list[TensorGroup]:
        """Weights of decoder layer ``layer`` on one TP rank (``tp=1``: the whole layer)."""
        h = self.hidden_size
        hd = self.head_dim
        q_heads = _cdiv(self.num_attention_heads, tp)
        kv_heads = _cdiv(self.num_kv_heads, tp)
        g: list[TensorGroup] = [TensorGroup("norms", "norm", self.norms_per_layer * h)]
        if self.mla is not None:
            m = self.mla
            heads = q_heads
            if m.q_lora_rank:
                g.append(TensorGroup("attn.q_a_proj", "linear", h * m.q_lora_rank))
                g.append(TensorGroup("attn.q_a_layernorm", "norm", m.q_lora_rank))
                g.append(TensorGroup("attn.q_b_proj", "linear", m.q_lora_rank * heads * hd))
            else:
                g.append(TensorGroup("attn.q_proj", "linear", h * heads * hd))
            g.append(
                TensorGroup("attn.kv_a_proj_with_mqa", "linear", h * (m.kv_lora_rank + m.qk_rope_head_dim))
            )
            g.append(TensorGroup("attn.kv_a_layernorm", "norm", m.kv_lora_rank))
            g.append(
                TensorGroup(
                    "attn.kv_b_proj", "linear", m.kv_lora_rank * heads * (m.qk_nope_head_dim + m.v_head_dim)
                )
            )
            g.append(TensorGroup("attn.o_proj", "linear", heads * m.v_head_dim * h))
        else:
            g.append(TensorGroup("attn.q_proj", "linear", h * q_heads * hd))
            g.append(TensorGroup("attn.k_proj+v_proj", "linear", 2 * h * kv_heads * hd))
            g.append(TensorGroup("attn.o_proj", "linear", q_heads * hd * h))
            if self.attention_bias:
                g.append(TensorGroup("attn.qkv_bias", "bias", (q_heads + 2 * kv_heads) * hd))
            if self.qk_norm:
                g.append(TensorGroup("attn.q_norm+k_norm", "norm", 2 * hd))
        moe = self.moe
        if moe is not None and self.is_moe_layer(layer):
            per_rank_experts = _cdiv(moe.num_experts * 3 * h * moe.moe_intermediate_size, tp)
            g.append(TensorGroup("moe.experts", "linear", per_rank_experts))
            g.append(TensorGroup("moe.router", "router", h * moe.num_experts))
            if moe.router_bias:
                g.append(TensorGroup("moe.router_bias", "router", moe.num_experts))
            if moe.shared_intermediate_size:
                g.append(
                    TensorGroup(
                        "moe.shared_experts", "linear", 3 * h * _cdiv(moe.shared_intermediate_size, tp)
                    )
                )
            if moe.shared_expert_gate:
                g.append(TensorGroup("moe.shared_expert_gate", "router", h))
        else:
            inter = _cdiv(self.intermediate_size, tp)
            g.append(TensorGroup("mlp.gate+up+down", "linear", 3 * h * inter))
            if self.mlp_bias:
                g.append(TensorGroup("mlp.bias", "bias", 2 * inter + h))
        return g

    def tensor_groups(self, tp: int = 1, pp: int = 1, pp_rank: int = 0) -> list[TensorGroup]:
        """All weights held by one GPU at (any TP rank, ``pp_rank``) for the given TP × PP split."""
        if pp_rank < 0 or pp_rank >= pp:
            raise ValueError(f"pp_rank {pp_rank} outside 0..{pp - 1}")
        h = self.hidden_size
        groups: list[TensorGroup] = []
        if pp_rank == 0:
            groups.append(TensorGroup("embed_tokens", "embedding", self.vocab_size * h))
        for layer in self.pp_layer_ranges(pp)[pp_rank]:
            groups.extend(self.layer_groups(layer, tp))
        if pp_rank == pp - 1:
            groups.append(TensorGroup("final_norm", "norm", h))
            if not (self.tied_embeddings and pp == 1):
                # Tied and pp == 1: lm_head reuses embed_tokens. With pp > 1 the last rank holds a copy.
                groups.append(TensorGroup("lm_head", "lm_head", _cdiv(self.vocab_size, tp) * h))
        return groups

    # ---------------------------------------------------------------------------- counts
    def params_total(self) -> int:
        """Parameters of the model (tied embeddings counted once; DeepSeek MTP layers excluded)."""
        return sum(g.count for g in self.tensor_groups(1, 1, 0))

    def params_active_per_token(self) -> int:
        """Parameters a token passes through (MoE: only ``experts_per_token`` experts); = total for dense."""
        if self.moe is None:
            return self.params_total()
        moe = self.moe
        inactive = (
            (moe.num_experts - moe.experts_per_token) * 3 * self.hidden_size * moe.moe_intermediate_size
        )
        moe_layers = sum(1 for i in range(self.num_layers) if self.is_moe_layer(i))
        return self.params_total() - moe_layers * inactive

    def params_per_rank(self, tp: int = 1, pp: int = 1, pp_rank: int = 0) -> int:
        """Parameters one GPU holds at ``pp_rank`` with TP ``tp`` (replicated tensors counted in full)."""
        return sum(g.count for g in self.tensor_groups(tp, pp, pp_rank))

    def max_params_per_rank(self, tp: int = 1, pp: int = 1) -> int:
        """The largest :meth:`params_per_rank` over the PP ranks (what the fullest GPU holds)."""
        return max(self.params_per_rank(tp, pp, r) for r in range(pp))

    @property
    def is_moe(self) -> bool:
        return self.moe is not None


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


#: Upper bounds of the ``config.json`` integers the planner reads. Far above every released model
#: (Llama-3.1-405B: 126 layers, hidden 16384; DeepSeek-V3: 256 routed experts, vocabulary 129,280;
#: Llama 4 Scout: 10,485,760 positions; the fixtures in tests/fixtures/model-configs stay well below),
#: and low enough that a plan takes milliseconds: the planner loops per layer, so a config claiming
#: 1e18 layers is refused here, not iterated (a config.json comes from a model repository, i.e. from
#: whoever publishes the model). Every other integer is bounded by :data:`DEFAULT_CONFIG_LIMIT`.
CONFIG_LIMITS: dict[str, int] = {
    "num_hidden_layers": 1024,
    "num_attention_heads": 8192,
    "num_key_value_heads": 8192,
    "num_local_experts": 4096,
    "num_experts": 4096,
    "n_routed_experts": 4096,
    "num_experts_per_tok": 4096,
    "n_shared_experts": 4096,
    "first_k_dense_replace": 1024,
    "moe_layer_freq": 1024,
    "decoder_sparse_step": 1024,
}
#: Bound of any other integer (sizes, vocabulary, positions): 2**31 − 1.
DEFAULT_CONFIG_LIMIT = 2**31 - 1


def _integral(value: Any) -> bool:
    """An int, or a float with an integral finite value (``json`` reads ``Infinity`` and ``NaN``)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    return isinstance(value, int) or (math.isfinite(value) and value == int(value))


def _bounded(key: str, value: int) -> int:
    limit = CONFIG_LIMITS.get(key, DEFAULT_CONFIG_LIMIT)
    if value > limit:
        raise PlanInputError(
            key,
            f"{value} is larger than the planner accepts ({limit}); is this the model's real config.json?",
        )
    return value


def _pos_int(config: Mapping[str, Any], key: str, default: int | None = None) -> int:
    value = config.get(key)
    if value is None:
        if default is not None:
            return default
        raise PlanInputError(
            key,
            "missing from config.json; add it (a positive integer) or use the model's original config.json",
        )
    if not _integral(value) or value <= 0:
        raise PlanInputError(key, f"must be a positive integer, got {value!r}")
    return _bounded(key, int(value))


def _opt_int(config: Mapping[str, Any], key: str, default: int) -> int:
    """An optional non-negative integer key; absent or null → ``default``."""
    value = config.get(key)
    if value is None:
        return default
    if not _integral(value) or value < 0:
        raise PlanInputError(key, f"must be a non-negative integer, got {value!r}")
    return _bounded(key, int(value))


def _int_list(config: Mapping[str, Any], key: str) -> set[int]:
    value = config.get(key) or []
    if not isinstance(value, list) or len(value) > CONFIG_LIMITS["num_hidden_layers"]:
        raise PlanInputError(
            key, f"must be a list of at most {CONFIG_LIMITS['num_hidden_layers']} layer indices"
        )
    if not all(isinstance(i, int) and not isinstance(i, bool) for i in value):
        raise PlanInputError(key, f"must be a list of layer indices, got {value!r}")
    return set(value)


def ceil_div(a: int, b: int) -> int:
    """``ceil(a / b)`` for positive integers, exact."""
    return _cdiv(a, b)


__all__ = [
    "MLA",
    "SUPPORTED_MODEL_TYPES",
    "Architecture",
    "MoE",
    "TensorGroup",
    "TensorKind",
    "ceil_div",
]
