"""The capacity plan: does the model fit, with how many tokens of KV cache, for how many sequences.

Memory of one GPU (the fullest rank of a TP × PP replica) is split as TensorRT-LLM does
(reference §7.2)::

    memory_bytes (driver total)
      − weight_bytes_per_gpu            parameters on this rank × bytes per parameter (formats.py)
      − activation_bytes_per_gpu        execution-context memory, estimated from max_num_tokens
      − runtime_reserve_bytes_per_gpu   CUDA context, runtime/decoder buffers, logits, NCCL
      = free_bytes_per_gpu
    kv_cache_bytes_per_gpu = kv_cache_free_gpu_mem_fraction × free_bytes_per_gpu
    max_kv_tokens = kv_cache_bytes_per_gpu // kv_bytes_per_token_per_gpu, rounded down to whole blocks

KV bytes per token per GPU (reference §7.1, TensorRT-LLM's ``calculateCacheSizePerToken``)::

    2 (K and V) × layers on the rank × ceil(num_kv_heads / tp) × head_dim × bytes(kv dtype)

For multi-head latent attention (DeepSeek-V2/V3) the cache holds one compressed latent per token
and layer — ``kv_lora_rank + qk_rope_head_dim`` elements, no separate K and V (TensorRT-LLM's
``kv_factor = 1`` for MLA) — and it is *replicated* on every TP rank: the latent is shared by all
heads, so splitting heads across ranks cannot split it (each rank up-projects the same latent into
its own heads).

The activation estimate (no closed formula is published, reference §7.3): TensorRT reuses
activation memory across layers, so the peak is one layer's live tensors for ``max_num_tokens``
packed tokens, in the engine dtype (2 bytes)::

    activation = max_num_tokens × 2 B × (2·hidden + (q_heads + 2·kv_heads)·head_dim / tp + 3·I / tp)
                 [+ max_num_tokens × experts_per_token × hidden × 2 B for MoE token permutation]

``I`` is the MLP width a token passes through (MoE: ``experts_per_token × moe_intermediate_size``
plus the shared experts). For Llama-3-8B at 8192 tokens this gives 0.88 GiB; the TensorRT-LLM memory
guide's example log shows 1.1 GiB of execution-context memory for a 7-8B engine. Treat it as ±50 %:
it ignores attention workspace (context FMHA keeps it linear), plugin workspaces and allocator
rounding. The runtime reserve is 1.5 GiB fixed — measured on one H200 (driver 580.159.04, CUDA 13,
PyTorch 2.11, 2026-11-29): CUDA reports 615 MiB less total memory than nvidia-smi (143,156 vs 143,771
MiB), creating the CUDA context takes another 527 MiB and the first cuBLAS GEMM ~70 MB more, 1.18 GiB
in all; TensorRT-LLM's runtime and decoder buffers add ~0.2 GB (memory guide log lines), rounded up
— plus FP32 logits for ``max_batch_size × max_beam_width`` sequences over the full
vocabulary, plus 512 MiB of NCCL buffers when the replica has more than one GPU. Measure the real
value with ``trtllm-build --monitor_memory`` or the ``execution context memory`` log line and
lower ``kv_cache_free_gpu_mem_fraction`` if it is larger.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from fractions import Fraction
from typing import TYPE_CHECKING, Any, NamedTuple

from engine_builder.planner.architecture import Architecture, backend_model_error, ceil_div
from engine_builder.planner.catalog import DEFAULT_CATALOG, GPUSpec, lookup
from engine_builder.planner.errors import PlanInputError, PlanIssue
from engine_builder.planner.formats import (
    DEFAULT_AWQ_BLOCK_SIZE,
    ENGINE_DTYPE_BYTES,
    KV_CACHE_DTYPES,
    MIN_SM,
    PYTORCH_KV_REFUSAL,
    QUANT_FORMATS,
    SM100_RANGE,
    TENSORRT_EP_REFUSAL,
    bytes_per_param,
    format_info,
    format_refusal,
    formats_without_backend,
    kv_cache_dtype_choices,
    kv_dtype_bytes,
    kv_dtypes_without_backend,
    kv_info,
    paged_context_fmha_kept,
    paged_context_fmha_refusal,
)

if TYPE_CHECKING:
    from engine_builder.spec import BuildSpec

GIB = 1024**3
MIB = 1024**2

#: TensorRT-LLM ``trtllm-build`` defaults (reference §9.3): max_num_tokens 8192, max_batch_size 2048,
#: max_seq_len = max_position_embeddings.
TRTLLM_DEFAULT_MAX_NUM_TOKENS = 8192
TRTLLM_DEFAULT_MAX_BATCH_SIZE = 2048
#: Assumed typical request length (prompt + output) when the user gives none; set it from your traffic.
DEFAULT_TYPICAL_REQUEST_TOKENS = 2048
#: Sequences of the default ``max_seq_len`` the KV pool must hold at once (:func:`default_max_seq_len`).
DEFAULT_CONCURRENT_SEQUENCES = 16
#: Names the rule that fills unset build limits (``max_seq_len`` by :func:`default_max_seq_len`,
#: ``max_batch_size`` by the typical-request search in :func:`plan`, ``max_num_tokens`` = 8192). It is
#: part of the engine key whenever a limit is left to the planner
#: (:meth:`engine_builder.spec.BuildSpec.key_inputs`), so changing the rule changes those keys
#: instead of reusing an engine built under the old one. v1 (unnamed) was TensorRT-LLM's default
#: ``max_seq_len = max_position_embeddings``.
DERIVED_LIMITS_RULE = (
    f"planner-defaults/v2:seq-len-pow2-min{DEFAULT_TYPICAL_REQUEST_TOKENS}-kv{DEFAULT_CONCURRENT_SEQUENCES}"
)
#: The rule's name in the keys of engines whose maxInputLen is set and maxSeqLen left to the planner: the
#: derived maxSeqLen is above maxInputLen since fresh-user trial 50 X2 (:func:`default_max_seq_len`);
#: before, it could be below (trtllm-build then clips maxInputLen), so those engines are not reused.
#: Other keys keep :data:`DERIVED_LIMITS_RULE`. Fresh-user trial 51 Y4 changed its outcome (the shortest
#: length above maxInputLen that fits, not the longest, when none keeps 16 sequences) under the same
#: name: the name came in after stop 43's landing (main 39deda5 does not have it, no release does), so
#: no released engine was built under the first version of it.
DERIVED_LIMITS_RULE_ABOVE_INPUT_LEN = f"{DERIVED_LIMITS_RULE}+seq-len-above-input-len"
#: The rule in words (``plan`` output, ``status.plan`` and docs/planner.md say it).
MAX_SEQ_LEN_RULE = (
    "maxSeqLen unset: the largest of the model's context and the powers of two below it (down to "
    f"{DEFAULT_TYPICAL_REQUEST_TOKENS}) whose {DEFAULT_CONCURRENT_SEQUENCES} full sequences fit in the KV "
    "cache, else the largest that fits once; set spec.build.maxSeqLen for another length, e.g. the "
    "model's full context"
)
#: The rule in words when ``spec.build.maxInputLen`` is set (:func:`default_max_seq_len`; fresh-user trial
#: 51 Y4: the rule printed did not say that maxInputLen had decided).
MAX_SEQ_LEN_RULE_ABOVE_INPUT_LEN = (
    "maxSeqLen unset and maxInputLen set: of the model's context and the powers of two below it, those "
    f"above maxInputLen (and at least {DEFAULT_TYPICAL_REQUEST_TOKENS}); the largest whose "
    f"{DEFAULT_CONCURRENT_SEQUENCES} full sequences fit in the KV cache, else the shortest that fits once, "
    "else maxInputLen + 1; set spec.build.maxSeqLen for another length, e.g. the model's full context"
)
#: Fixed runtime reserve per GPU: driver-hidden memory, CUDA context, cuBLAS workspace, runtime and
#: decoder buffers (measured 1.18 GiB on an H200 before TensorRT-LLM's buffers; module docstring).
RUNTIME_FIXED_BYTES = 3 * GIB // 2
#: NCCL buffers per GPU when the replica spans more than one GPU (estimate).
NCCL_RESERVE_BYTES = 512 * MIB
#: Valid AWQ block sizes (``--awq_block_size``).
AWQ_BLOCK_SIZES = (64, 128)


class BuildLimit(NamedTuple):
    """Inclusive bounds of one ``spec.build`` limit (tokens; sequences for ``maxBatchSize``, beams for
    ``maxBeamWidth``)."""

    field: str
    low: int
    high: int


#: The bounds of spec.build's limits: their one home. The LLMEngine CRD schema takes its ``minimum`` /
#: ``maximum`` from here (``trtllm_operator.api.engine.BuildSpec``'s ``ge`` / ``le``), and
#: :class:`PlanRequest` checks them, so ``trtllm-operator plan`` and ``simulate`` take exactly what the
#: API takes (fresh-user trial 38 F3). ``maxSeqLen`` ≥ 2: one prompt token and one output token.
BUILD_LIMITS: dict[str, BuildLimit] = {
    "max_seq_len": BuildLimit("spec.build.maxSeqLen", 2, 4_194_304),
    "max_batch_size": BuildLimit("spec.build.maxBatchSize", 1, 8192),
    "max_num_tokens": BuildLimit("spec.build.maxNumTokens", 1, 1_048_576),
    "max_input_len": BuildLimit("spec.build.maxInputLen", 1, 4_194_304),
    "max_beam_width": BuildLimit("spec.build.maxBeamWidth", 1, 64),
}
#: The bounds of spec.parallelism: their one home, as :data:`BUILD_LIMITS` is for spec.build. The
#: LLMEngine CRD takes each field's ``minimum`` / ``maximum`` and its rule "tensor × pipeline ≤
#: :data:`MAX_GPUS_PER_REPLICA`" from here (``trtllm_operator.api.engine.ParallelismSpec``), and
#: :class:`PlanRequest` checks them, so ``plan --multi-node`` and ``simulate`` refuse what the API
#: refuses (fresh-user trial 40 F3: ``plan --tp 8 --pp 16 --multi-node`` answered "fits" for 128 GPUs).
PARALLELISM_LIMITS: dict[str, BuildLimit] = {
    "tp": BuildLimit("spec.parallelism.tensor", 1, 64),
    "pp": BuildLimit("spec.parallelism.pipeline", 1, 64),
    "ep": BuildLimit("spec.parallelism.expert", 1, 64),
}
#: The most GPUs one replica may have (tensor × pipeline), multi-node or not: the LLMEngine CRD's
#: rule on spec.parallelism (reported at spec.parallelism.tensor).
MAX_GPUS_PER_REPLICA = 64
MAX_SEQ_LEN_LIMIT = BUILD_LIMITS["max_seq_len"].high
MAX_NUM_TOKENS_LIMIT = BUILD_LIMITS["max_num_tokens"].high
#: Largest KV block size accepted (``--tokens_per_block``; TensorRT-LLM uses 32 by default, 64/128 in
#: older releases). Values must be powers of two.
MAX_TOKENS_PER_BLOCK = 1024


def rotary_factor(arch: Architecture, backend: str = "tensorrt") -> float:
    """The RoPE scaling factor TensorRT-LLM applies to ``max_position_embeddings`` on ``backend``.

    Mirrors ``_init_max_seq_len`` in TensorRT-LLM's ``builder.py``: ``rope_scaling.factor``, except 1
    for the ``su``/``longrope``/``llama3`` types (their ``max_position_embeddings`` is already the
    extended length) and when ``config.json`` has no ``rope_scaling``. The PyTorch backend counts
    ``yarn`` as 1 too (NVIDIA/TensorRT-LLM ``tensorrt_llm/_torch/pyexecutor/model_engine.py``
    ``_infer_max_seq_len_from_config``, stored commit 1a0dc5f7, and ``_torch/models/modeling_utils.py``
    ``infer_max_seq_len``: ``if rope_type not in ("su", "longrope", "llama3", "yarn")``), as
    transformers reads such a config: with ``original_max_position_embeddings`` in the YaRN dict,
    ``max_position_embeddings`` is the extended length and the factor is their ratio
    (huggingface/transformers ``src/transformers/modeling_rope_utils.py`` ``_compute_yarn_parameters``,
    "DeekSeek-V3 (and potentially other models) modify `max_position_embeddings`"). DeepSeek-V3
    (163,840 = 4,096 × 40) was counted as 163,840 × 40 (fresh-user trial 50 X4); it runs only on the
    PyTorch backend.

    Reads both ``config.json`` formats: the old ``rope_scaling`` dict and transformers 5's
    ``rope_parameters`` (same keys — ``rope_type``, ``factor``, ``original_max_position_embeddings`` —
    plus ``rope_theta``; ``rope_type: default`` has no factor). transformers 5 writes only
    ``rope_parameters`` and reads ``config.rope_scaling`` as an alias of it (huggingface/transformers
    5.24.0, ``src/transformers/configuration_utils.py``, property ``rope_scaling``), so a converter
    built on it sees the same factor (fresh-user trial 48 V4: a YaRN ×4 Qwen config written the new
    way got maxSeqLen 32,768 instead of 131,072).

    A model with several attention layer types may nest one such dict per type (``{"full_attention":
    {...}, "sliding_attention": {...}}``; transformers 5.24.0 ``src/transformers/modeling_rope_utils.py``
    ``RotaryEmbeddingConfigMixin.nested_rope_parameter_keys`` and ``standardize_rope_params`` "Case 2:
    different RoPE for each layer"). The context is the full-attention layers': Gemma 3's config puts an
    old-style ``rope_scaling`` into ``rope_parameters["full_attention"]`` and gives the sliding layers
    the default RoPE (``models/gemma3/configuration_gemma3.py`` ``convert_rope_params_to_dict``). So the
    ``full_attention`` entry's factor is read, else the largest entry's (fresh-user trial 49 W5).
    """
    for key in ("rope_scaling", "rope_parameters"):
        scaling = arch.extra.get(key)
        if isinstance(scaling, Mapping):
            break
    else:
        return 1.0
    nested = {k: v for k, v in scaling.items() if isinstance(v, Mapping)}
    if not nested:
        return _rope_entry_factor(scaling, key, backend)
    if isinstance(nested.get("full_attention"), Mapping):
        return _rope_entry_factor(nested["full_attention"], f"{key}.full_attention", backend)
    return max(_rope_entry_factor(v, f"{key}.{k}", backend) for k, v in nested.items())


#: RoPE types whose ``max_position_embeddings`` is already the extended length, per backend
#: (:func:`rotary_factor`): trtllm-build's ``_init_max_seq_len`` and the PyTorch backend's
#: ``_infer_max_seq_len_from_config``.
UNSCALED_ROPE_TYPES: dict[str, tuple[str, ...]] = {
    "tensorrt": ("su", "longrope", "llama3"),
    "pytorch": ("su", "longrope", "llama3", "yarn"),
}


def _rope_entry_factor(scaling: Mapping[str, Any], where: str, backend: str) -> float:
    """The factor of one RoPE dict (:func:`rotary_factor`); ``where``: its path, for the error."""
    kind = scaling.get("type", scaling.get("rope_type"))
    if kind in UNSCALED_ROPE_TYPES.get(backend, UNSCALED_ROPE_TYPES["tensorrt"]):
        return 1.0
    factor = scaling.get("factor", 1.0)
    if not isinstance(factor, (int, float)) or isinstance(factor, bool) or not factor > 0:
        return 1.0
    if not math.isfinite(factor) or factor > MAX_ROPE_FACTOR:
        raise PlanInputError(
            f"{where}.factor", f"{factor!r} is larger than the planner accepts ({MAX_ROPE_FACTOR})"
        )
    return float(factor)


#: Largest RoPE scaling factor accepted from ``config.json`` (published models use at most 64).
MAX_ROPE_FACTOR = 1024.0


#: ``kv_cache_free_gpu_mem_fraction`` when none is given: TensorRT-LLM's and Triton's default
#: (reference §7.2: "KV cache will by default allocate 90% of the remaining free GPU memory").
DEFAULT_KV_CACHE_FREE_GPU_MEM_FRACTION = 0.9

#: KV block size the planner assumes (``--tokens_per_block``; reference §7.2, TensorRT-LLM's default 32).
DEFAULT_TOKENS_PER_BLOCK = 32


@dataclass(frozen=True)
class PlanRequest:
    """What the user asks for. API paths are given for each field (used in errors).

    ``quantization`` (spec.quantization.format): none|fp8|int8_sq|int4_awq|w4a8_awq|nvfp4|mxfp8.
    ``kv_cache_dtype`` (spec.quantization.kvCacheDtype): auto|fp8|int8.
    ``tp``/``pp``/``ep`` (spec.parallelism.tensor/pipeline/expert).
    ``max_seq_len``/``max_batch_size``/``max_num_tokens`` (spec.build.*): None = TensorRT-LLM default
    for the memory estimate and a recommendation in the plan.
    ``kv_cache_free_gpu_mem_fraction`` (spec.server.kvCacheFreeGpuMemFraction), default 0.9.
    ``typical_request_tokens``: prompt + output tokens of a typical request (default
    min(2048, max_seq_len)). ``multi_node``: allow TP × PP beyond one node's ``gpus_per_node``.
    ``tokens_per_block``: KV block size in tokens (TensorRT-LLM default 32; reference §7.2).
    ``backend`` (spec.backend) and ``paged_context_fmha`` (spec.build.pagedContextFMHA): only to offer
    KV-cache dtypes the API's rules accept next to them (:func:`~engine_builder.planner.formats.
    kv_cache_dtype_choices`) when the GPU refuses the requested one.
    """

    quantization: str = "none"
    kv_cache_dtype: str = "auto"
    tp: int = 1
    pp: int = 1
    ep: int = 1
    max_seq_len: int | None = None
    max_batch_size: int | None = None
    max_num_tokens: int | None = None
    kv_cache_free_gpu_mem_fraction: float = DEFAULT_KV_CACHE_FREE_GPU_MEM_FRACTION
    typical_request_tokens: int | None = None
    multi_node: bool = False
    gpus_per_node: int = 8
    awq_block_size: int = DEFAULT_AWQ_BLOCK_SIZE
    tokens_per_block: int = DEFAULT_TOKENS_PER_BLOCK
    max_beam_width: int = 1
    max_input_len: int | None = None
    backend: str = "tensorrt"
    paged_context_fmha: bool = True

    def __post_init__(self) -> None:
        if self.quantization not in QUANT_FORMATS:
            raise PlanInputError(
                "spec.quantization.format",
                f"unknown format {self.quantization!r}; use one of {', '.join(QUANT_FORMATS)}",
            )
        if self.kv_cache_dtype not in KV_CACHE_DTYPES:
            raise PlanInputError(
                "spec.quantization.kvCacheDtype",
                f"unknown KV cache dtype {self.kv_cache_dtype!r}; use one of {', '.join(KV_CACHE_DTYPES)}",
            )
        for name, path in (
            ("tp", "spec.parallelism.tensor"),
            ("pp", "spec.parallelism.pipeline"),
            ("ep", "spec.parallelism.expert"),
            ("gpus_per_node", "gpusPerNode"),
            ("tokens_per_block", "tokensPerBlock"),
            ("awq_block_size", "spec.quantization.awqBlockSize"),
        ):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise PlanInputError(path, f"must be an integer ≥ 1, got {value!r}")
        for name, (path, _, high) in PARALLELISM_LIMITS.items():
            value = getattr(self, name)
            if value > high:
                raise PlanInputError(
                    path, f"{value} is above the API's limit of {high}; use a value ≤ {high}"
                )
        if self.tp * self.pp > MAX_GPUS_PER_REPLICA:
            raise PlanInputError(  # reported where the CRD's rule reports it
                PARALLELISM_LIMITS["tp"].field,
                f"tensor × pipeline = {self.tp} × {self.pp} = {self.tp * self.pp} GPUs per replica is above "
                f"the API's limit of {MAX_GPUS_PER_REPLICA}, on one node or several; lower tensor or "
                f"pipeline parallelism so that their product is at most {MAX_GPUS_PER_REPLICA}",
            )
        value = self.typical_request_tokens
        if value is not None and (not isinstance(value, int) or value < 1):
            raise PlanInputError("typicalRequestTokens", f"must be an integer ≥ 1 or unset, got {value!r}")
        for name, (path, low, high) in BUILD_LIMITS.items():
            value = getattr(self, name)
            if value is None:
                continue
            if not isinstance(value, int) or value < low:
                why = " (one prompt token and one output token)" if name == "max_seq_len" else ""
                raise PlanInputError(path, f"must be an integer ≥ {low}{why} or unset, got {value!r}")
            if value > high:
                raise PlanInputError(
                    path, f"{value} is above the API's limit of {high}; use a value ≤ {high}"
                )
        block = self.tokens_per_block
        if block & (block - 1) or block > MAX_TOKENS_PER_BLOCK:
            raise PlanInputError(
                "tokensPerBlock",
                f"must be a power of two ≤ {MAX_TOKENS_PER_BLOCK} (TensorRT-LLM's paged KV cache), got "
                f"{block}; the default is 32",
            )
        f = self.kv_cache_free_gpu_mem_fraction
        if not (0.0 < f <= 1.0):
            raise PlanInputError(
                "spec.server.kvCacheFreeGpuMemFraction", f"must be in (0, 1], got {f!r}; the default is 0.9"
            )

    @property
    def world_size(self) -> int:
        """GPUs per replica: tp × pp (expert parallelism reuses the TP ranks)."""
        return self.tp * self.pp


@dataclass(frozen=True)
class Plan:
    """The result. Bytes are integers; all memory figures are per GPU (the fullest PP rank).

    ``reasons``: why it does not fit or is invalid (each a :class:`PlanIssue` with field and fix); empty
    when ``fits``. ``recommended``: ``max_batch_size``, ``max_num_tokens``, ``max_seq_len``, and when it
    does not fit ``tensor_parallelism`` / ``gpu_product`` (the smallest that would fit, or None when none
    does; ``max_batch_size`` and ``max_seq_len`` are then the request's, None when unset: each alternative
    derives its own). ``max_concurrent_sequences``: sequences of ``max_seq_len`` tokens the KV pool holds
    at once; ``max_concurrent_sequences_at_typical_request``: the same at ``typical_request_tokens``.
    ``warnings``: valid-but-worth-knowing findings (e.g. ``max_batch_size`` larger than the sequences the
    KV cache holds at ``max_seq_len``); they do not change ``fits``.
    """

    model_type: str
    gpu_product: str
    quantization: str
    kv_cache_dtype: str
    tp: int
    pp: int
    ep: int
    params_total: int
    params_per_gpu: int
    weight_bytes_per_gpu: int
    activation_bytes_per_gpu: int
    runtime_reserve_bytes_per_gpu: int
    gpu_memory_bytes: int
    free_bytes_per_gpu: int
    kv_cache_free_gpu_mem_fraction: float
    kv_bytes_per_token_per_gpu: int
    kv_cache_bytes_per_gpu: int
    max_kv_tokens: int
    tokens_per_block: int
    max_seq_len: int
    max_batch_size: int
    max_num_tokens: int
    typical_request_tokens: int
    max_concurrent_sequences: int
    max_concurrent_sequences_at_typical_request: int
    fits: bool
    max_seq_len_source: str = "spec"
    reasons: tuple[PlanIssue, ...] = ()
    recommended: Mapping[str, Any] = field(default_factory=dict)
    warnings: tuple[PlanIssue, ...] = ()
    #: The draft engine of ``draft_tokens_external`` on the same GPUs (None without one).
    draft: DraftLoad | None = None
    #: The request's ``spec.build.maxInputLen`` (None when unset): it decides a derived maxSeqLen.
    max_input_len: int | None = None

    @property
    def max_seq_len_rule(self) -> str | None:
        """The rule that derived ``max_seq_len`` in words (``plan``'s ``max_seq_len_rule``,
        ``status.plan.maxSeqLenRule``); None when the spec set it."""
        if self.max_seq_len_source != "derived":
            return None
        return MAX_SEQ_LEN_RULE if self.max_input_len is None else MAX_SEQ_LEN_RULE_ABOVE_INPUT_LEN

    def to_json_dict(self) -> dict[str, Any]:
        """Stable JSON: snake_case keys, bytes as ints, ``reasons`` as ``{field, message, fix}`` objects."""
        return {
            "model_type": self.model_type,
            "gpu_product": self.gpu_product,
            "quantization": self.quantization,
            "kv_cache_dtype": self.kv_cache_dtype,
            "tp": self.tp,
            "pp": self.pp,
            "ep": self.ep,
            "params_total": self.params_total,
            "params_per_gpu": self.params_per_gpu,
            "weight_bytes_per_gpu": self.weight_bytes_per_gpu,
            "activation_bytes_per_gpu": self.activation_bytes_per_gpu,
            "runtime_reserve_bytes_per_gpu": self.runtime_reserve_bytes_per_gpu,
            "gpu_memory_bytes": self.gpu_memory_bytes,
            "free_bytes_per_gpu": self.free_bytes_per_gpu,
            "kv_cache_free_gpu_mem_fraction": self.kv_cache_free_gpu_mem_fraction,
            "kv_bytes_per_token_per_gpu": self.kv_bytes_per_token_per_gpu,
            "kv_cache_bytes_per_gpu": self.kv_cache_bytes_per_gpu,
            "max_kv_tokens": self.max_kv_tokens,
            "tokens_per_block": self.tokens_per_block,
            "max_seq_len": self.max_seq_len,
            "max_batch_size": self.max_batch_size,
            "max_num_tokens": self.max_num_tokens,
            "typical_request_tokens": self.typical_request_tokens,
            "max_concurrent_sequences": self.max_concurrent_sequences,
            "max_concurrent_sequences_at_typical_request": self.max_concurrent_sequences_at_typical_request,
            "max_seq_len_source": self.max_seq_len_source,
            "max_seq_len_rule": self.max_seq_len_rule,
            "fits": self.fits,
            "reasons": [r.to_json_dict() for r in self.reasons],
            "recommended": dict(self.recommended),
            "warnings": [w.to_json_dict() for w in self.warnings],
            **({"draft": self.draft.to_json_dict()} if self.draft is not None else {}),
        }


@dataclass(frozen=True)
class DraftLoad:
    """What the draft engine of ``draft_tokens_external`` takes on each GPU of the replica (it runs
    on the same ranks as the target, in the same Triton server, NVIDIA/TensorRT-LLM
    ``examples/draft_target_model/README.md``): its weights, activations, logits buffer and a KV
    cache of ``max_kv_tokens`` (:func:`draft_kv_tokens`), all subtracted before the target's KV pool
    is sized."""

    params_total: int
    weight_bytes_per_gpu: int
    activation_bytes_per_gpu: int
    logits_bytes_per_gpu: int
    kv_bytes_per_token_per_gpu: int
    max_kv_tokens: int

    @property
    def kv_cache_bytes_per_gpu(self) -> int:
        return self.max_kv_tokens * self.kv_bytes_per_token_per_gpu

    @property
    def total_bytes_per_gpu(self) -> int:
        return (
            self.weight_bytes_per_gpu
            + self.activation_bytes_per_gpu
            + self.logits_bytes_per_gpu
            + self.kv_cache_bytes_per_gpu
        )

    def to_json_dict(self) -> dict[str, Any]:
        return {
            "params_total": self.params_total,
            "weight_bytes_per_gpu": self.weight_bytes_per_gpu,
            "activation_bytes_per_gpu": self.activation_bytes_per_gpu,
            "logits_bytes_per_gpu": self.logits_bytes_per_gpu,
            "kv_bytes_per_token_per_gpu": self.kv_bytes_per_token_per_gpu,
            "max_kv_tokens": self.max_kv_tokens,
            "kv_cache_bytes_per_gpu": self.kv_cache_bytes_per_gpu,
        }


def draft_kv_tokens(max_batch_size: int, max_seq_len: int, tokens_per_block: int = 32) -> int:
    """KV-cache tokens the draft engine is given (its ``max_tokens_in_paged_kv_cache``): every
    sequence the engines can batch at full length, ``max_batch_size × max_seq_len`` rounded up to
    whole blocks — the draft only ever holds the sequences the target is decoding, so more is never
    used, and bounding it keeps the draft from taking its fraction of free memory from the target."""
    return _round_blocks(max_batch_size * max_seq_len, tokens_per_block)


def draft_load(
    draft: Architecture, request: PlanRequest, max_batch_size: int, max_seq_len: int, max_num_tokens: int
) -> DraftLoad:
    """The draft engine's memory per GPU: quantized like the target, same TP/PP and limits."""
    return DraftLoad(
        params_total=draft.params_total(),
        weight_bytes_per_gpu=weight_bytes_per_gpu(draft, request),
        activation_bytes_per_gpu=activation_bytes_per_gpu(draft, request, max_num_tokens),
        logits_bytes_per_gpu=max_batch_size * draft.vocab_size * 4,
        kv_bytes_per_token_per_gpu=kv_bytes_per_token_per_gpu(draft, request),
        max_kv_tokens=draft_kv_tokens(max_batch_size, max_seq_len, request.tokens_per_block),
    )


# ---------------------------------------------------------------------------------------- pieces
def weight_bytes_per_gpu(arch: Architecture, request: PlanRequest) -> int:
    """Bytes of weights on the fullest GPU: Σ tensor groups × bytes per parameter, rounded up."""
    best = 0
    for rank in range(request.pp):
        total = Fraction(0)
        for g in arch.tensor_groups(request.tp, request.pp, rank):
            total += g.count * bytes_per_param(g.kind, request.quantization, request.awq_block_size)
        best = max(best, ceil_div(total.numerator, total.denominator))
    return best


def kv_bytes_per_token_per_gpu(arch: Architecture, request: PlanRequest) -> int:
    """KV cache bytes one token takes on the fullest GPU (see module docstring; MLA explained there)."""
    layers = max(arch.pp_layer_counts(request.pp))
    dtype = kv_dtype_bytes(request.kv_cache_dtype)
    if arch.mla is not None:
        return layers * (arch.mla.kv_lora_rank + arch.mla.qk_rope_head_dim) * dtype
    return 2 * layers * ceil_div(arch.num_kv_heads, request.tp) * arch.head_dim * dtype


def activation_bytes_per_gpu(arch: Architecture, request: PlanRequest, max_num_tokens: int) -> int:
    """Estimated execution-context (activation) memory; formula and uncertainty in the module docstring."""
    tp = request.tp
    h = arch.hidden_size
    qkv = (ceil_div(arch.num_attention_heads, tp) + 2 * ceil_div(arch.num_kv_heads, tp)) * arch.head_dim
    inter = ceil_div(arch.intermediate_size, tp) if arch.intermediate_size else 0
    permute = 0
    if arch.moe is not None:
        moe = arch.moe
        moe_width = ceil_div(
            moe.experts_per_token * moe.moe_intermediate_size + moe.shared_intermediate_size, tp
        )
        inter = max(inter if moe.dense_layers else 0, moe_width)
        permute = moe.experts_per_token * h
    per_token = 2 * h + qkv + 3 * inter + permute
    return max_num_tokens * ENGINE_DTYPE_BYTES * per_token


def runtime_reserve_bytes_per_gpu(arch: Architecture, request: PlanRequest, max_batch_size: int) -> int:
    """Driver/CUDA context/runtime buffers (1.5 GiB), FP32 logits of every sequence, NCCL when world > 1."""
    logits = max_batch_size * request.max_beam_width * arch.vocab_size * 4
    nccl = NCCL_RESERVE_BYTES if request.world_size > 1 else 0
    return RUNTIME_FIXED_BYTES + logits + nccl


def _round_blocks(tokens: int, block: int) -> int:
    return ceil_div(tokens, block) * block


def kv_pool_tokens(
    free_bytes_per_gpu: int, fraction: float, kv_bytes_per_token_per_gpu: int, tokens_per_block: int
) -> int:
    """Tokens the paged KV pool holds per GPU: ``fraction`` (``kv_cache_free_gpu_mem_fraction``) of
    the free bytes, divided by the KV bytes of one token, in whole blocks of ``tokens_per_block``
    (reference §7.2: "90% of the remaining free GPU memory"; ``num_blocks = tokens /
    tokens_per_block``). 0 when nothing is free. The one home of this formula: the plan, and the
    LLMDeployment's check of its own ``spec.server.kvCacheFreeGpuMemFraction`` against the engine."""
    pool = int(free_bytes_per_gpu * fraction) if free_bytes_per_gpu > 0 else 0
    return (pool // kv_bytes_per_token_per_gpu) // tokens_per_block * tokens_per_block


#: What TensorRT-LLM does with a KV pool smaller than one sequence of maxSeqLen: it starts, and cuts the
#: attention window, maxSeqLen and maxInputLen to what the pool holds (NVIDIA/TensorRT-LLM
#: ``cpp/tensorrt_llm/batch_manager/trtGptModelInflightBatching.cpp``
#: ``clampWindowSizesToFitAtLeastOneSequence``, stored commits 00825c4e and b35ac1b6: "maxAttentionWindowVec
#: too large to fit at least one sequence in kvCache", then "maxSequenceLen is reduced to
#: maxAttentionWindow" and "maxInputLen is reduced to"; it throws only with
#: ``ExecutorConfig.failFastOnAttentionWindowTooLarge``, default false; an early stored copy of the
#: pytorch backend's ``tensorrt_llm/_torch/pyexecutor/resource_manager.py`` clamps alike). The
#: start-up refusal quoted in docs/reference/tensorrt-llm.md §7.2 (tensorrtllm_backend#168) is the
#: 2023 KVCacheManager check, which this clamp now always satisfies.
CLAMPED_AT_START = (
    "TensorRT-LLM starts anyway and cuts maxSeqLen and maxInputLen to what the pool holds, so requests "
    "the engine was built for are rejected"
)


#: What :data:`CLAMPED_AT_START` becomes for beam width > 1 on the tensorrt backend (fresh-user trial
#: 47 U5). The operator's rule stays ``maxSeqLen × beam width`` (:func:`one_sequence_kv_tokens`): the
#: worst case, a short prompt whose beams each run to maxSeqLen. TensorRT-LLM's start-up clamp counts
#: the cheapest sequence instead: ``clampWindowSizesToFitAtLeastOneSequence`` (NVIDIA/TensorRT-LLM
#: ``cpp/tensorrt_llm/batch_manager/trtGptModelInflightBatching.cpp``, stored commit b35ac1b6) calls
#: ``KVCacheManager::calculateMaxBlockRequirements`` with promptLength = maxInputLen and outputLength =
#: maxSeqLen − maxInputLen ("This makes it the best case scenario … More validation is needed on a
#: per-request basis"), which is ``numContextBlocks + numOutputBlocks * beamWidth``
#: (``kvCacheManager.cpp``). So a pool between the two starts uncut, and it is the longer beam
#: searches the engine was built for that do not fit. The pytorch backend divides the pool by the beam
#: width (``resource_manager.py`` ``get_max_atten_window_upper_bound``), so there
#: :data:`CLAMPED_AT_START` holds as it is.
BEAMS_WORST_CASE = (
    "the operator counts the worst case, a beam search whose beams each run to maxSeqLen; TensorRT-LLM's "
    "start-up check counts only a maxInputLen prompt plus its output × beam width and cuts maxSeqLen and "
    "maxInputLen to the pool below that, so either way requests the engine was built for do not fit"
)


def why_one_sequence(backend: str, max_beam_width: int) -> str:
    """Why a KV pool below :func:`one_sequence_kv_tokens` is refused, in the backend's terms:
    :data:`CLAMPED_AT_START`, or :data:`BEAMS_WORST_CASE` for beam search on the tensorrt backend."""
    return BEAMS_WORST_CASE if max_beam_width > 1 and backend != "pytorch" else CLAMPED_AT_START


#: The planner's warning that a deployment's chunked context answers (:func:`moot_with_chunked_context`).
_UNLESS_CHUNKED = "unless chunked context is enabled"


def moot_with_chunked_context(issue: PlanIssue) -> bool:
    """Whether ``issue`` is the warning "maxNumTokens is below the longest prompt: longer prompts are
    rejected unless chunked context is enabled", which a deployment with
    ``spec.server.enableChunkedContext: true`` answers (its prompts are prefilled in chunks). The
    engine's warning stands (status.plan.warnings: an engine knows no deployment); ``render`` and
    ``simulate`` leave it out for such a deployment (fresh-user trials 37b F2, 44 F6)."""
    return issue.field == "spec.build.maxNumTokens" and _UNLESS_CHUNKED in issue.message


def one_sequence_kv_tokens(max_seq_len: int, tokens_per_block: int, max_beam_width: int = 1) -> int:
    """KV tokens TensorRT-LLM needs to run one sequence of ``max_seq_len`` to completion:
    ``beam_width × tokensPerBlock × maxBlocksPerSeq`` (reference §7.2: "maxTokensInPagedKvCache (1664)
    must be large enough to process at least 1 sequence to completion (i.e. must be larger than
    beam_width (1) * tokensPerBlock (128) * maxBlocksPerSeq (20))", triton-inference-server/
    tensorrtllm_backend#168, a 2023 check). A smaller pool is not refused at start any more: it cuts
    maxSeqLen (:data:`CLAMPED_AT_START`)."""
    return max_beam_width * _round_blocks(max_seq_len, tokens_per_block)


def max_tokens_pool_blocks(max_tokens: int, tokens_per_block: int, backend: str = "tensorrt") -> int:
    """KV blocks of ``tokens_per_block`` in a primary pool bounded to ``max_tokens`` tokens
    (``spec.server.maxTokensInPagedKvCache``, TensorRT-LLM's ``KvCacheConfig.max_tokens``), rounded as
    the backend rounds it. tensorrt (the C++ executor) rounds **up**: NVIDIA/TensorRT-LLM
    ``cpp/tensorrt_llm/batch_manager/kvCacheManager.cpp`` ``BaseKVCacheManager::calculateMaxNumBlocks``,
    ``calculatePrimaryBlocks``: ``maxTokens = std::min(maxTokensFromConfig, maxTokens)`` then
    ``blocksInPrimaryPool = tc::ceilDiv(maxTokens, tokensPerBlock)`` (stored commits b35ac1b6 and
    002ba6a7). pytorch rounds **down** at the version docs/reference/tensorrt-llm.md quotes:
    ``tensorrt_llm/_torch/pyexecutor/resource_manager.py`` ``KVCacheManager.calculate_max_num_blocks``:
    ``blocks_in_primary_pool = int(max_tokens // tokens_per_block)`` (TL@001541ba; earlier stored copies
    had ``math.ceil(max_tokens / tokens_per_block)``, so the floor is the stricter of the two)."""
    if backend == "pytorch":
        return max_tokens // tokens_per_block
    return ceil_div(max_tokens, tokens_per_block)


def model_context(arch: Architecture, backend: str = "tensorrt") -> int:
    """The model's full context on ``backend``: ``max_position_embeddings`` × :func:`rotary_factor`
    (rounded up) — the ``max_seq_len`` TensorRT-LLM's ``_init_max_seq_len`` (tensorrt) or
    ``_infer_max_seq_len_from_config`` (pytorch) uses when none is given."""
    return math.ceil(arch.max_position_embeddings * rotary_factor(arch, backend))


def default_max_seq_len(
    context: int,
    max_kv_tokens: int,
    tokens_per_block: int,
    sequences: int = DEFAULT_CONCURRENT_SEQUENCES,
    *,
    max_input_len: int | None = None,
) -> int:
    """The ``max_seq_len`` the planner uses when ``spec.build.maxSeqLen`` is unset (docs/planner.md).

    The largest candidate length of at least ``min(context, 2048)`` (:data:`DEFAULT_TYPICAL_REQUEST_TOKENS`)
    whose ``sequences`` full sequences (rounded up to KV blocks) fit in ``max_kv_tokens``; candidates
    are ``context`` itself and every power of two below it, down to ``tokens_per_block``. When no
    such length keeps ``sequences``, the largest candidate that fits once (a model that barely fits
    gets a usable length rather than a tiny one); when nothing fits, ``context`` (the plan then fails
    with "less than one sequence"). The full context is used only when it passes the same test or the
    user sets it.

    ``max_input_len`` (``spec.build.maxInputLen``, below ``context``): only lengths above it are
    candidates, and when none of them keeps ``sequences``, the *shortest* of at least
    ``min(context, 2048)`` that fits once (the most sequences; below that floor, the largest that fits
    once, as without it); when none of them fits once, ``max_input_len + 1`` (the prompt and one output
    token) if it fits, else that length all the same (the plan then fails naming maxInputLen). trtllm-build
    would clip a longer maxInputLen to maxSeqLen with only a warning (NVIDIA/TensorRT-LLM
    ``tensorrt_llm/builder.py`` ``_init_max_seq_len``, "clipping it to max_seq_len", stored commit
    008b2b8d): prompts the user asked for would be refused (fresh-user trial 50 X2).
    """
    shortest_length = 1 if max_input_len is None else max_input_len + 1
    candidates = [context]
    length = 1 << max(context - 1, 1).bit_length()
    while length >= 2 * tokens_per_block:
        length //= 2
        if length < context:
            candidates.append(length)
    candidates = [c for c in candidates if c >= shortest_length]
    floor = min(context, DEFAULT_TYPICAL_REQUEST_TOKENS)
    for candidate in candidates:
        if candidate >= floor and sequences * _round_blocks(candidate, tokens_per_block) <= max_kv_tokens:
            return candidate
    once = [c for c in candidates if _round_blocks(c, tokens_per_block) <= max_kv_tokens]
    if max_input_len is not None:
        # The shortest above maxInputLen (and the floor) that fits: the most sequences. Candidates
        # above maxInputLen rarely keep 16, so the longest that fits once was usually the model's full
        # context (fresh-user trial 51 Y4: 131,072 holding 3 sequences where 32,768 holds 13).
        usable = [c for c in once if c >= floor]
        if usable:
            return min(usable)
    if once:
        return max(once)
    return context if max_input_len is None else shortest_length


# ---------------------------------------------------------------------------------------- rules
def supported_kv_cache_dtypes(gpu: GPUSpec, backend: str) -> list[str]:
    """KV-cache dtypes ``gpu`` supports and ``backend`` accepts (the rules of :func:`validate`): FP8
    needs the catalog's ``fp8``; INT8 is refused on SM 100–119 and by the pytorch backend (its
    ``backends``; the LLMEngine API's rule, formats.PYTORCH_KV_REFUSAL)."""
    out = []
    for name in KV_CACHE_DTYPES:
        info = kv_info(name)
        if backend not in info.backends:
            continue
        if gpu.sm < info.min_sm or (name == "fp8" and not gpu.fp8):
            continue
        if info.sm100_unsupported and gpu.sm in SM100_RANGE:
            continue
        out.append(name)
    return out


def supported_quant_formats(gpu: GPUSpec, backend: str) -> list[str]:
    """Quantization formats (other than ``none``) ``gpu`` supports and ``backend`` can build (the rules
    of :func:`validate`; the backend's through
    :func:`~engine_builder.planner.formats.formats_without_backend`, the table the LLMEngine API's rule
    is built from), so that a fix offering them never meets another refusal (fresh-user trial 49 W4:
    int8_sq offered on the pytorch backend)."""
    cannot = formats_without_backend(backend)
    return [
        f
        for f in QUANT_FORMATS
        if f != "none"
        and f not in cannot
        and MIN_SM[f] <= gpu.sm
        and not (format_info(f).sm100_unsupported and gpu.sm in SM100_RANGE)
    ]


def format_sm_issue(fmt: str, gpu: GPUSpec, backend: str) -> PlanIssue | None:
    """The quantization-vs-SM rule of :func:`validate`: ``fmt`` needs ``MIN_SM[fmt]`` (compute
    capability × 10, :mod:`~engine_builder.planner.formats`); None when ``gpu`` meets it. The fix
    offers the formats ``gpu`` runs that ``backend`` (``spec.backend``) can build.

    The one home of this rule and its words: ``plan`` and the operator's ``InvalidSpec`` condition
    (``trtllm_operator.decide.engine_spec``) both say this issue.
    """
    if gpu.sm >= MIN_SM[fmt]:
        return None
    ok = [f for f in QUANT_FORMATS if gpu.sm >= MIN_SM[f] and f not in formats_without_backend(backend)]
    return PlanIssue(
        "spec.quantization.format",
        f"{fmt} needs SM {MIN_SM[fmt]}+ but {gpu.product} is SM {gpu.sm} ({gpu.architecture}).",
        f"use one of {', '.join(ok)} on this GPU, or target a GPU with SM {MIN_SM[fmt]}+.",
    )


def _batch_warning(
    max_batch_size: int | None, max_kv_tokens: int, max_seq_len: int, *, typical: int, block: int, kv_fix: str
) -> PlanIssue | None:
    """The warning when an explicit ``max_batch_size`` exceeds the sequences of ``max_seq_len`` that
    ``max_kv_tokens`` (the pool, tokens) holds in blocks of ``block``; ``kv_fix``: the smaller-KV-dtype
    hint with its ", " (or empty)."""
    concurrent = max_kv_tokens // _round_blocks(max_seq_len, block)
    if max_batch_size is None or max_batch_size <= concurrent:
        return None
    concurrent_typical = max_kv_tokens // _round_blocks(typical, block)
    return PlanIssue(
        "spec.build.maxBatchSize",
        f"maxBatchSize {max_batch_size} exceeds the {concurrent} "
        f"{'sequence' if concurrent == 1 else 'sequences'} of maxSeqLen "
        f"{max_seq_len} tokens the KV cache holds per replica ({concurrent_typical} at "
        f"{typical} tokens); TensorRT-LLM schedules only what the KV cache holds, the rest waits.",
        f"accept it for shorter typical requests, or {kv_fix}use more tensor parallelism or a lower "
        "maxSeqLen.",
        kind="capacity",
    )


def bounded_warnings(
    p: Plan,
    gpu: GPUSpec,
    max_batch_size: int | None,
    max_kv_tokens: int,
    *,
    backend: str,
    paged_context_fmha: bool = True,
) -> tuple[PlanIssue, ...]:
    """``p.warnings`` for a pool bounded to ``max_kv_tokens`` (a deployment's
    ``spec.server.maxTokensInPagedKvCache`` below the plan's pool; TensorRT-LLM takes the smaller,
    reference §7.2): the maxBatchSize warning counted in that pool, not the plan's (fresh-user trial 45
    A14: 61 sequences said of a pool bounded to one). ``max_batch_size``: the request's (None when
    unset: then no such warning, as in :func:`plan`); ``gpu`` and ``backend``: the plan's (its
    request's ``spec.backend``); ``paged_context_fmha``: its ``spec.build.pagedContextFMHA``."""
    hint = _smaller_kv_cache(gpu, p.kv_cache_dtype, backend, p.quantization, paged_context_fmha)
    again = _batch_warning(
        max_batch_size,
        min(max_kv_tokens, p.max_kv_tokens),
        p.max_seq_len,
        typical=p.typical_request_tokens,
        block=p.tokens_per_block,
        kv_fix=f"{hint}, " if hint else "",
    )
    kept = tuple(w for w in p.warnings if w.field != "spec.build.maxBatchSize")
    return (*kept, again) if again is not None and p.fits else kept


def _smaller_kv_cache(
    gpu: GPUSpec, current: str, backend: str, fmt: str, paged_context_fmha: bool = True
) -> str:
    """``use an FP8 KV cache`` (or INT8) when ``gpu`` supports, and ``backend`` accepts, a smaller KV
    dtype than ``current``; empty when there is none — a suggestion names only what the target GPU
    can run and the backend can serve (fresh-user trial 49, beside W4: INT8 was offered on pytorch).
    On the tensorrt backend with ``paged_context_fmha`` (``build.pagedContextFMHA``, default true) a
    dtype with which ``trtllm-build`` turns paged context FMHA off next to ``fmt``
    (:func:`~engine_builder.planner.formats.paged_context_fmha_kept`; the API refuses it) is offered
    only with ``build.pagedContextFMHA: false`` and its cost (fresh-user trial 51 Y6: "use an FP8 KV
    cache or an INT8 KV cache" for format none, both refused at the default)."""
    now = kv_dtype_bytes(current)
    smaller = [k for k in supported_kv_cache_dtypes(gpu, backend) if kv_dtype_bytes(k) < now]
    kept = set(kv_cache_dtype_choices(fmt, gpu.sm, backend, paged_context_fmha))
    plain = [k for k in smaller if k in kept]
    paged_off = [k for k in smaller if k not in kept]
    if not smaller:
        return ""
    options = " or ".join(f"an {k.upper()} KV cache" for k in plain)
    if paged_off:
        names = " or ".join(k.upper() for k in paged_off)
        options += (", or an " if plain else "an ") + f"{names} {'one' if plain else 'KV cache'}"
        return (
            f"use {options} (spec.quantization.kvCacheDtype) with build.pagedContextFMHA: false (no "
            "KV-cache reuse or chunked context then)"
        )
    return f"use {options} (spec.quantization.kvCacheDtype)"


def _divisors(n: int, limit: int) -> list[int]:
    return [d for d in range(1, min(n, limit) + 1) if n % d == 0]


def _valid_tensor_parallelism(arch: Architecture, limit: int) -> list[int]:
    """Tensor parallelism sizes ≤ ``limit`` that pass both head rules of :func:`validate`: they
    divide the attention heads and (without MLA) divide the KV heads or are a multiple of them — so a
    fix offered for one rule never fails the other."""
    kv = arch.num_kv_heads
    return [
        d
        for d in _divisors(arch.num_attention_heads, limit)
        if arch.mla is not None or kv % d == 0 or d % kv == 0
    ]


def validate(arch: Architecture, request: PlanRequest, gpu: GPUSpec) -> list[PlanIssue]:
    """Rules that need the model and the GPU catalog; an empty list means the request is valid.

    FP8 (and w4a8_awq, FP8 KV cache) needs SM 89+, NVFP4/MXFP8 SM 100+; TP divides the attention
    heads, and either divides the KV heads or is a multiple of them (TensorRT-LLM then replicates KV
    heads); PP ≤ layers; EP divides the experts and the TP size (TensorRT-LLM maps
    tp = moe_tp × moe_ep); TP × PP ≤ ``gpus_per_node`` unless ``multi_node``.
    """
    issues: list[PlanIssue] = []
    fmt = request.quantization
    # The API's rule on spec.quantization.format × spec.backend (LLMEngine CEL, built from the same
    # formats_without_backend): plan answered "fits" for mxfp8 on the tensorrt backend (trial 48 V5).
    if fmt in formats_without_backend(request.backend):
        what, fix = format_refusal(request.backend, fmt)
        issues.append(PlanIssue("spec.quantization.format", f"{what}.", f"{fix}."))
    # The API's rule on spec.quantization.kvCacheDtype × spec.backend, in its words (trial 49 W3).
    if request.backend == "pytorch" and request.kv_cache_dtype in kv_dtypes_without_backend("pytorch"):
        what, fix = PYTORCH_KV_REFUSAL
        issues.append(PlanIssue("spec.quantization.kvCacheDtype", f"{what}.", f"{fix}."))
    # The API's rules on spec.quantization.kvCacheDtype × format × build.pagedContextFMHA, in its words
    # (trial 51 Y6); formats that run only on Blackwell are left to the INT8-KV-on-Blackwell rule, as
    # the API's rule leaves them to QuantizationSpec's.
    if (
        request.backend == "tensorrt"
        and request.paged_context_fmha
        and not paged_context_fmha_kept(fmt, request.kv_cache_dtype)
        and not (request.kv_cache_dtype == "int8" and MIN_SM[fmt] >= min(SM100_RANGE))
    ):
        what, fix = paged_context_fmha_refusal(request.kv_cache_dtype, fmt)
        field = (
            "spec.quantization.kvCacheDtype"
            if request.kv_cache_dtype == "int8"
            else "spec.quantization.format"
        )
        issues.append(PlanIssue(field, f"{what}.", f"{fix}."))
    too_old = format_sm_issue(fmt, gpu, request.backend)
    if too_old is not None:
        issues.append(too_old)
    input_len = _input_len_issue(arch, request)
    if input_len is not None:
        issues.append(input_len)
    # The fixes offered are the KV-cache dtypes valid for this format, backend, pagedContextFMHA and
    # GPU: an INT8 KV cache, say, only where build.pagedContextFMHA is off (the API refuses it
    # otherwise), so that following the advice never meets another refusal.
    kv_choices = " or ".join(kv_cache_dtype_choices(fmt, gpu.sm, request.backend, request.paged_context_fmha))
    if request.kv_cache_dtype == "fp8" and not gpu.fp8:
        issues.append(
            PlanIssue(
                "spec.quantization.kvCacheDtype",
                f"an FP8 KV cache needs SM 89+ but {gpu.product} is SM {gpu.sm}.",
                f"use kvCacheDtype {kv_choices} on this GPU.",
            )
        )
    if format_info(fmt).awq and request.awq_block_size not in AWQ_BLOCK_SIZES:
        issues.append(
            PlanIssue(
                "spec.quantization.awqBlockSize",
                f"AWQ block size {request.awq_block_size} is not supported.",
                f"use one of {AWQ_BLOCK_SIZES} (default 128).",
            )
        )
    if gpu.sm in SM100_RANGE:
        if format_info(fmt).sm100_unsupported:
            issues.append(
                PlanIssue(
                    "spec.quantization.format",
                    f"{fmt} is not supported on {gpu.product} (SM {gpu.sm}): TensorRT-LLM's builder "
                    "raises 'INT8/INT4 quantization is not supported on SM>=100' (INT4 weight-only) or "
                    "'SmoothQuant is not supported on SM>=100' for SM 100–119.",
                    "use one of "
                    + ", ".join(supported_quant_formats(gpu, request.backend))
                    + " on this GPU.",
                )
            )
        if kv_info(request.kv_cache_dtype).sm100_unsupported:
            issues.append(
                PlanIssue(
                    "spec.quantization.kvCacheDtype",
                    f"an INT8 KV cache is not supported on {gpu.product} (SM {gpu.sm}).",
                    f"use kvCacheDtype {kv_choices} on this GPU.",
                )
            )
    if request.max_num_tokens is not None and request.max_num_tokens < request.tokens_per_block:
        issues.append(
            PlanIssue(
                "spec.build.maxNumTokens",
                f"maxNumTokens {request.max_num_tokens} is below one KV block of {request.tokens_per_block} "
                "tokens; TensorRT-LLM raises it to tokensPerBlock and then needs chunked context.",
                f"use maxNumTokens ≥ {request.tokens_per_block} (TensorRT-LLM default 8192).",
            )
        )
    tp, pp, ep = request.tp, request.pp, request.ep
    limit = request.gpus_per_node if not request.multi_node else max(tp, 64)
    heads = arch.num_attention_heads
    if heads % tp:
        issues.append(
            PlanIssue(
                "spec.parallelism.tensor",
                f"tensor parallelism {tp} does not divide the {heads} attention heads.",
                f"use a tensor parallelism that divides {heads}"
                + (f" and fits the {arch.num_kv_heads} KV heads" if arch.mla is None else "")
                + f": {_valid_tensor_parallelism(arch, limit)}.",
            )
        )
    kv = arch.num_kv_heads
    if arch.mla is None and kv % tp and tp % kv:
        issues.append(
            PlanIssue(
                "spec.parallelism.tensor",
                f"tensor parallelism {tp} neither divides the {kv} KV heads nor is a multiple of them "
                "(TensorRT-LLM can only replicate KV heads evenly).",
                f"use a tensor parallelism that divides {kv} or is a multiple of it: "
                f"{_valid_tensor_parallelism(arch, limit)}.",
            )
        )
    if pp > arch.num_layers:
        issues.append(
            PlanIssue(
                "spec.parallelism.pipeline",
                f"pipeline parallelism {pp} exceeds the model's {arch.num_layers} layers.",
                f"use pipeline parallelism ≤ {arch.num_layers}.",
            )
        )
    if ep > 1:
        if arch.moe is None:
            issues.append(
                PlanIssue(
                    "spec.parallelism.expert",
                    f"expert parallelism {ep} needs a mixture-of-experts model; {arch.model_type} is dense.",
                    "set expert parallelism to 1.",
                )
            )
        else:
            if request.backend == "tensorrt":
                # The API's rule on spec.parallelism.expert × spec.backend, in its words (trial 50 X5);
                # on a dense model the rule above is the whole story.
                what, fix = TENSORRT_EP_REFUSAL
                issues.append(PlanIssue("spec.parallelism.expert", f"{what % (ep, tp)}.", f"{fix % ep}."))
            n = arch.moe.num_experts
            if n % ep:
                issues.append(
                    PlanIssue(
                        "spec.parallelism.expert",
                        f"expert parallelism {ep} does not divide the {n} experts.",
                        f"use an expert parallelism that divides {n} and {tp}: "
                        f"{[d for d in _divisors(n, tp) if tp % d == 0]}.",
                    )
                )
            if tp % ep:
                issues.append(
                    PlanIssue(
                        "spec.parallelism.expert",
                        f"expert parallelism {ep} does not divide tensor parallelism {tp} (TensorRT-LLM "
                        "splits the TP ranks into moe_tp × moe_ep).",
                        f"use an expert parallelism that divides {tp}.",
                    )
                )
    if _beyond_one_node(request):
        issues.append(
            PlanIssue(
                ONE_NODE_FIELD,
                f"tensor × pipeline = {tp * pp} GPUs exceeds the {request.gpus_per_node} "
                f"{'GPU' if request.gpus_per_node == 1 else 'GPUs'} of one node.",
                _one_node_fix(request, None, searched=False),
            )
        )
    return issues


def _input_len_issue(arch: Architecture, request: PlanRequest) -> PlanIssue | None:
    """maxInputLen must be below maxSeqLen: maxSeqLen counts the prompt and the generated tokens, and
    trtllm-build clips a longer max_input_len to max_seq_len with only a warning (NVIDIA/TensorRT-LLM
    ``tensorrt_llm/builder.py`` ``_init_max_seq_len``, stored commit 008b2b8d; the LLMEngine CRD's rule
    on spec.build, ``trtllm_operator.api.engine.EngineBuildSpec``, when both are set). maxSeqLen unset:
    the planner derives at most the model's context (capped at the API's limit), so a maxInputLen at or
    above that is refused here; below it, :func:`default_max_seq_len` derives a length above it
    (fresh-user trial 50 X2)."""
    prompt = request.max_input_len
    if prompt is None:
        return None
    if request.max_seq_len is not None:
        if prompt < request.max_seq_len:
            return None
        return PlanIssue(
            "spec.build.maxInputLen",
            f"maxInputLen {prompt} must be less than maxSeqLen {request.max_seq_len} (maxSeqLen counts "
            "prompt plus generated tokens; trtllm-build would silently clip maxInputLen).",
            "raise maxSeqLen or lower maxInputLen.",
        )
    context = model_context(arch, request.backend)
    longest = min(context, MAX_SEQ_LEN_LIMIT)
    if prompt < longest:
        return None
    what = (
        f"the model's context ({context} tokens)"
        if longest == context
        else f"the API's limit on spec.build.maxSeqLen ({MAX_SEQ_LEN_LIMIT})"
    )
    return PlanIssue(
        "spec.build.maxInputLen",
        f"maxInputLen {prompt} leaves no output token within the longest maxSeqLen the planner derives "
        f"while spec.build.maxSeqLen is unset, {what}.",
        f"lower maxInputLen below {longest}, or set spec.build.maxSeqLen above {prompt}"
        + (" (beyond the model's context; accuracy may suffer)." if longest == context else "."),
    )


#: The field of the one-node rule (:func:`validate`): tensor × pipeline ≤ GPUs of one node.
ONE_NODE_FIELD = "spec.parallelism"
_MULTI_NODE_FIX = "set spec.parallelism.multiNode: true to serve one replica across nodes (LeaderWorkerSet)"


def _beyond_one_node(request: PlanRequest) -> bool:
    return not request.multi_node and request.tp * request.pp > request.gpus_per_node


def _one_node_alternative(
    arch: Architecture,
    request: PlanRequest,
    gpu: GPUSpec,
    draft: Architecture | None,
    check_budget: Callable[[], None],
) -> PlanRequest | None:
    """The smallest layout of one node that plans and fits for a request refused only by the one-node
    rule: fewest GPUs (tensor × pipeline ≤ ``gpus_per_node``), the request's own pipeline parallelism
    first at equal size, then the smaller tensor; tensor sizes that pass the head rules
    (:func:`_valid_tensor_parallelism`), pipeline ≤ the layers, expert parallelism kept where it divides
    the tensor size (else 1, as :func:`plan`'s search). None when no layout of one node fits."""
    node = request.gpus_per_node
    layouts = sorted(
        (
            (t, p)
            for p in range(1, min(node, arch.num_layers) + 1)
            for t in _valid_tensor_parallelism(arch, node // p)
        ),
        key=lambda tp_pp: (tp_pp[0] * tp_pp[1], tp_pp[1] != request.pp, tp_pp[1]),
    )
    for t, p in layouts:
        candidate = replace(request, tp=t, pp=p, ep=request.ep if t % request.ep == 0 else 1)
        check_budget()
        if _compute(arch, candidate, gpu, draft).fits:
            return candidate
    return None


def _gpus(n: int) -> str:
    return f"{n} GPU" if n == 1 else f"{n} GPUs"


def _one_node_fix(request: PlanRequest, fitting: PlanRequest | None, *, searched: bool = True) -> str:
    """The one-node rule's fix: the smallest fitting layout of one node when :func:`plan` found one
    (docs/api.md ``spec.parallelism.multiNode``: the operator "names the smallest fitting
    alternative"), that none fits when it searched, else (other rules failed too, so no layout was
    planned) the bound alone."""
    node = request.gpus_per_node
    if fitting is not None:
        layout = f"tensor {fitting.tp} × pipeline {fitting.pp}"
        if fitting.ep != request.ep:
            layout += f" (expert {fitting.ep})"
        return (
            f"lower tensor/pipeline parallelism to {layout} = {_gpus(fitting.tp * fitting.pp)}, the smallest "
            f"layout that fits this model on one {node}-GPU node, or {_MULTI_NODE_FIX}."
        )
    if searched:
        return (
            f"no layout of at most {node} GPUs (one node) fits this model in memory: {_MULTI_NODE_FIX}, "
            "or use a GPU with more memory."
        )
    return f"lower tensor/pipeline parallelism to at most {node} GPUs per replica, or {_MULTI_NODE_FIX}."


# ---------------------------------------------------------------------------------------- plan
def _compute(
    arch: Architecture, request: PlanRequest, gpu: GPUSpec, draft: Architecture | None = None
) -> Plan:
    """One plan, without the 'what would fit' search. An unset ``max_seq_len`` is derived by
    :func:`default_max_seq_len` from the KV pool the plan at the model's full context leaves.
    ``draft``: the draft model of ``draft_tokens_external``, whose :class:`DraftLoad` is taken off
    the free memory first."""
    if request.max_seq_len is not None:
        return _compute_at(arch, request, gpu, request.max_seq_len, "spec", draft=draft)
    context = model_context(arch, request.backend)
    # The longest candidate is the API's limit when the model's context is above it (DeepSeek-V3's
    # config on tensorrt: 163,840 × RoPE factor 40 = 6,553,600), so that a derived maxSeqLen, and
    # recommended.max_seq_len with it, is one the LLMEngine CRD takes (fresh-user trial 41). The
    # outcome changes only where the context is above the limit and the KV cache held 16 sequences of
    # that context (over 67 M tokens) or the plan did not fit at all (nothing is built):
    # DERIVED_LIMITS_RULE, in engine keys, is kept.
    longest = min(context, MAX_SEQ_LEN_LIMIT)
    at_context = _compute_at(arch, request, gpu, longest, "context", draft=draft)
    # A maxInputLen at or above the longest length is refused by validate() (_input_len_issue).
    prompt = request.max_input_len if (request.max_input_len or longest) < longest else None
    derived = default_max_seq_len(
        longest, at_context.max_kv_tokens, request.tokens_per_block, max_input_len=prompt
    )
    if derived == longest:
        result = replace(at_context, max_seq_len_source="derived")
    else:
        result = _compute_at(arch, request, gpu, derived, "derived", draft=draft)
    if longest < context and result.max_seq_len == longest:
        # A plan that does not fit recommends no maxSeqLen (each alternative derives its own).
        clamped_what = (
            "the derived and recommended maxSeqLen are" if result.fits else "the derived maxSeqLen is"
        )
        clamped = PlanIssue(
            "spec.build.maxSeqLen",
            f"maxSeqLen was derived as {longest}, the API's limit (spec.build.maxSeqLen ≤ "
            f"{MAX_SEQ_LEN_LIMIT}): the model's context, max_position_embeddings "
            f"{arch.max_position_embeddings} × RoPE scaling {rotary_factor(arch, request.backend):g} = "
            f"{context}, is "
            f"above it, so {clamped_what} clamped to the limit and longer requests would be refused.",
            f"keep it, or set maxSeqLen (at most {MAX_SEQ_LEN_LIMIT}) for a shorter length.",
            kind="capacity",
        )
        result = replace(result, warnings=(*result.warnings, clamped))
    return result


#: Where a fix for a plan that does not fit points at the alternatives: :func:`plan` replaces it by
#: what its search found (:func:`_alternatives_note`); a plan not searched keeps this.
SEE_ALTERNATIVES = "(see recommended: tensor_parallelism and gpu_product)"


def _alternatives_note(request: PlanRequest, limit: int, best_tp: int | None, best_gpu: str | None) -> str:
    """The fix's pointer to ``recommended``, true to what the search found: which of
    ``tensor_parallelism`` and ``gpu_product`` exist, and, when no tensor parallelism within one node
    fits, that more GPUs than one node's need multi-node (plan --multi-node,
    spec.parallelism.multiNode). One parenthesis without another inside (simulate strips it)."""
    found = []
    if best_tp is not None:
        found.append(f"tensor_parallelism {best_tp}")
    if best_gpu is not None:
        found.append(f"gpu_product {best_gpu}")
    parts = [f"{' and '.join(found)} {'each fits' if len(found) > 1 else 'fits'} on its own"] if found else []
    if best_tp is None:
        most = limit // request.pp
        first = 1  # plan() tries the powers of two above the request's
        while first <= request.tp:
            first *= 2
        if first <= most:
            on = "" if request.multi_node else f" on one node of {request.gpus_per_node} GPUs"
            parts.append(f"no tensor parallelism from {first} to {most} fits{on}")
        else:
            full = (
                f"the {limit} GPUs a replica may have" if request.multi_node else f"one node's {limit} GPUs"
            )
            parts.append(
                f"tensor {request.tp} × pipeline {request.pp} leaves no larger tensor parallelism in {full}"
            )
        if not request.multi_node:
            parts.append("more GPUs than one node's need spec.parallelism.multiNode: true, plan --multi-node")
    if best_gpu is None:
        parts.append("no larger GPU of the catalog fits")
    return f"(see recommended: {'; '.join(parts)})"


def _unsearched(reasons: tuple[PlanIssue, ...]) -> tuple[PlanIssue, ...]:
    """``reasons`` of a plan whose alternatives were not searched (it is invalid first): no pointer to
    a ``recommended`` tensor_parallelism or gpu_product it does not hold."""
    return tuple(replace(r, fix=r.fix.replace(f" {SEE_ALTERNATIVES}", "")) for r in reasons)


def _compute_at(
    arch: Architecture,
    request: PlanRequest,
    gpu: GPUSpec,
    max_seq_len: int,
    source: str,
    *,
    draft: Architecture | None = None,
) -> Plan:
    """One plan at a given ``max_seq_len`` (``source``: ``spec`` or ``derived``)."""
    issues = validate(arch, request, gpu)
    max_num_tokens = request.max_num_tokens or TRTLLM_DEFAULT_MAX_NUM_TOKENS
    typical = request.typical_request_tokens or min(DEFAULT_TYPICAL_REQUEST_TOKENS, max_seq_len)
    block = request.tokens_per_block

    weights = weight_bytes_per_gpu(arch, request)
    activation = activation_bytes_per_gpu(arch, request, max_num_tokens)
    kv_per_token = kv_bytes_per_token_per_gpu(arch, request)
    fraction = request.kv_cache_free_gpu_mem_fraction

    def draft_for(batch: int) -> DraftLoad | None:
        return None if draft is None else draft_load(draft, request, batch, max_seq_len, max_num_tokens)

    def kv_for(batch: int) -> tuple[int, int, int, int]:
        reserve = runtime_reserve_bytes_per_gpu(arch, request, batch)
        load = draft_for(batch)
        free = gpu.memory_bytes - weights - activation - reserve - (load.total_bytes_per_gpu if load else 0)
        pool = int(free * fraction) if free > 0 else 0
        return reserve, free, pool, kv_pool_tokens(free, fraction, kv_per_token, block)

    def concurrency(batch: int) -> int:
        return kv_for(batch)[3] // _round_blocks(typical, block)

    if request.max_batch_size is not None:
        batch = request.max_batch_size
    else:
        # The largest batch (≤ TensorRT-LLM's default 2048) whose sequences of the typical length all
        # fit in the KV pool that remains after that batch's own logits buffer. Fewer sequences free
        # logits memory for KV, so a few fixed-point steps settle it.
        batch = TRTLLM_DEFAULT_MAX_BATCH_SIZE
        for _ in range(8):
            nxt = max(1, min(TRTLLM_DEFAULT_MAX_BATCH_SIZE, concurrency(batch)))
            if nxt == batch:
                break
            batch = nxt
        while batch > 1 and concurrency(batch) < batch:
            batch -= 1
    recommended_batch = batch
    reserve, free, pool, max_kv_tokens = kv_for(batch)
    concurrent_typical = max_kv_tokens // _round_blocks(typical, block)
    concurrent = max_kv_tokens // _round_blocks(max_seq_len, block)

    reasons: list[PlanIssue] = list(issues)
    kv_hint = _smaller_kv_cache(
        gpu, request.kv_cache_dtype, request.backend, request.quantization, request.paged_context_fmha
    )
    kv_fix = f"{kv_hint}, " if kv_hint else ""
    gib = GIB
    load = draft_for(batch)
    if free <= 0:
        with_draft = (
            f" + draft engine {load.total_bytes_per_gpu / gib:.1f} GiB (weights, activations, KV cache "
            f"of {load.max_kv_tokens} tokens)"
            if load
            else ""
        )
        reasons.append(
            PlanIssue(
                "spec.parallelism.tensor",
                f"weights {weights / gib:.1f} GiB + activations {activation / gib:.1f} GiB + runtime "
                f"{reserve / gib:.1f} GiB{with_draft} per GPU exceed the {gpu.memory_bytes / gib:.1f} GiB "
                f"of {gpu.product}.",
                "raise tensor (or pipeline) parallelism, quantize further (this GPU supports "
                f"{', '.join(supported_quant_formats(gpu, request.backend)) or 'no quantized format'}), "
                f"or use a GPU with more memory {SEE_ALTERNATIVES}.",
                kind="capacity",
            )
        )
    elif max_kv_tokens < one_sequence_kv_tokens(max_seq_len, block, request.max_beam_width):
        beams = f" × beam width {request.max_beam_width}" if request.max_beam_width > 1 else ""
        low_fraction = (
            f"raise kvCacheFreeGpuMemFraction (now {fraction:g}; the default is 0.9), "
            if fraction < DEFAULT_KV_CACHE_FREE_GPU_MEM_FRACTION
            else ""
        )
        prompt = request.max_input_len
        if source == "derived" and prompt is not None and max_seq_len == prompt + 1:
            # maxSeqLen is the planner's (default_max_seq_len): the user's field is maxInputLen (trial 50 X2)
            reasons.append(
                PlanIssue(
                    "spec.build.maxInputLen",
                    f"maxInputLen {prompt} needs a maxSeqLen of at least {max_seq_len} (the prompt and one "
                    f"output token; spec.build.maxSeqLen is unset, so the planner derives it), but the KV "
                    f"cache holds {max_kv_tokens} tokens per GPU, less than one such sequence{beams}; "
                    f"{why_one_sequence(request.backend, request.max_beam_width)}.",
                    f"{low_fraction}lower maxInputLen to below "
                    f"{max_kv_tokens // request.max_beam_width}, {kv_fix}or raise tensor parallelism "
                    f"{SEE_ALTERNATIVES}.",
                    kind="capacity",
                )
            )
        else:
            reasons.append(
                PlanIssue(
                    "spec.build.maxSeqLen",
                    f"the KV cache holds {max_kv_tokens} tokens per GPU, less than one sequence of maxSeqLen "
                    f"{max_seq_len}{beams}; {why_one_sequence(request.backend, request.max_beam_width)}.",
                    f"{low_fraction}lower maxSeqLen to at most {max_kv_tokens // request.max_beam_width}, "
                    f"{kv_fix}or raise tensor parallelism {SEE_ALTERNATIVES}.",
                    kind="capacity",
                )
            )
    fits = not reasons
    warnings: list[PlanIssue] = []
    too_large = _batch_warning(
        request.max_batch_size, max_kv_tokens, max_seq_len, typical=typical, block=block, kv_fix=kv_fix
    )
    if fits and too_large is not None:
        warnings.append(too_large)
    model_limit = model_context(arch, request.backend)
    floor = min(model_limit, DEFAULT_TYPICAL_REQUEST_TOKENS)
    if fits and source == "derived" and max_seq_len < floor:
        # The derivation settled on a length shorter than any request it is meant for: the pool is
        # the problem, not maxSeqLen (a fresh-user trial's kvCacheFreeGpuMemFraction 0.0001).
        low_fraction = (
            f"raise kvCacheFreeGpuMemFraction (now {fraction:g}; the default is "
            f"{DEFAULT_KV_CACHE_FREE_GPU_MEM_FRACTION:g}), "
            if fraction < DEFAULT_KV_CACHE_FREE_GPU_MEM_FRACTION
            else ""
        )
        warnings.append(
            PlanIssue(
                "spec.build.maxSeqLen",
                f"maxSeqLen was derived as {max_seq_len} tokens, below {floor}: the KV cache holds only "
                f"{max_kv_tokens} tokens per GPU (kvCacheFreeGpuMemFraction {fraction:g}); longer "
                "requests are refused.",
                f"{low_fraction}{kv_fix}raise tensor parallelism, or set maxSeqLen to see what it needs.",
                kind="capacity",
            )
        )
    if max_seq_len > model_limit:
        warnings.append(
            PlanIssue(
                "spec.build.maxSeqLen",
                f"maxSeqLen {max_seq_len} exceeds the model's max_position_embeddings "
                f"{arch.max_position_embeddings} × RoPE scaling {rotary_factor(arch, request.backend):g} = "
                f"{model_limit}; "
                + (
                    'the PyTorch backend lowers maxSeqLen to it ("larger than what the model can support").'
                    if request.backend == "pytorch"
                    else "trtllm-build builds it but warns that accuracy may be affected."
                ),
                f"use maxSeqLen ≤ {model_limit}.",
            )
        )
    # The longest prompt is maxInputLen when set (validate() and the planner's derivation keep it below
    # maxSeqLen), else maxSeqLen: never a value the user did not write under another name (trial 50 X2).
    longest_prompt = request.max_input_len or max_seq_len
    if request.max_num_tokens is not None and max_num_tokens < longest_prompt:
        what = "maxInputLen" if request.max_input_len else "maxSeqLen"
        warnings.append(
            PlanIssue(
                "spec.build.maxNumTokens",
                f"maxNumTokens {max_num_tokens} is below {what} {longest_prompt}: prompts longer than "
                f"{max_num_tokens} tokens are rejected {_UNLESS_CHUNKED}.",
                "enable chunked context (spec.server.enableChunkedContext) or raise maxNumTokens.",
            )
        )
    recommended: dict[str, Any] = {
        # Nothing to recommend for a plan that does not fit: the user's value (or None) stays.
        "max_batch_size": recommended_batch if fits else request.max_batch_size,
        "max_num_tokens": max_num_tokens,
        # Nor a length: unset, the derivation falls back to the model's context when nothing fits, which
        # no alternative (tensor_parallelism, gpu_product) is found to fit either: each derives its own
        # (fresh-user trial 44 F1). An explicit maxSeqLen is the one the alternatives were planned at.
        "max_seq_len": max_seq_len if fits else request.max_seq_len,
    }
    return Plan(
        model_type=arch.model_type,
        gpu_product=gpu.product,
        quantization=request.quantization,
        kv_cache_dtype=request.kv_cache_dtype,
        tp=request.tp,
        pp=request.pp,
        ep=request.ep,
        params_total=arch.params_total(),
        params_per_gpu=arch.max_params_per_rank(request.tp, request.pp),
        weight_bytes_per_gpu=weights,
        activation_bytes_per_gpu=activation,
        runtime_reserve_bytes_per_gpu=reserve,
        gpu_memory_bytes=gpu.memory_bytes,
        free_bytes_per_gpu=free,
        kv_cache_free_gpu_mem_fraction=fraction,
        kv_bytes_per_token_per_gpu=kv_per_token,
        kv_cache_bytes_per_gpu=pool,
        max_kv_tokens=max_kv_tokens,
        tokens_per_block=block,
        max_seq_len=max_seq_len,
        max_batch_size=batch,
        max_num_tokens=max_num_tokens,
        typical_request_tokens=typical,
        max_concurrent_sequences=concurrent,
        max_concurrent_sequences_at_typical_request=concurrent_typical,
        max_seq_len_source=source,
        fits=fits,
        reasons=tuple(reasons),
        recommended=recommended,
        warnings=tuple(warnings),
        draft=load,
        max_input_len=request.max_input_len,
    )


def plan(
    arch: Architecture,
    request: PlanRequest,
    gpu: GPUSpec,
    catalog: Mapping[str, GPUSpec] | None = None,
    *,
    budget_seconds: float | None = None,
    draft: Architecture | None = None,
) -> Plan:
    """Plan ``request`` for ``arch`` on ``gpu`` (with the draft engine ``draft`` on the same GPUs).

    When it does not fit for memory reasons, ``recommended`` also names the smallest tensor
    parallelism (powers of two up to ``gpus_per_node``, same PP, passing :func:`validate`) and the
    smallest GPU from ``catalog`` (default: the built-in one) that would fit with the same request
    (``None`` when nothing does). Pure: no I/O.

    ``budget_seconds``: a time budget (the operator plans inside a reconcile). Each candidate is
    bounded by the config limits (:data:`~engine_builder.planner.architecture.CONFIG_LIMITS`); the
    search stops with :class:`PlanInputError` (field ``plan``) once the budget is spent. The budget
    is the planning thread's CPU time (``time.thread_time``), not the wall clock: an operator
    short of CPU (other threads holding the GIL, a loaded node) waits without spending it, so the
    same spec never turns invalid because the machine was busy — a Ready engine re-planned under
    load was failed by the wall-clock budget. Reads the clock only when a budget is given.
    """
    deadline = None if budget_seconds is None else time.thread_time() + budget_seconds

    def check_budget() -> None:
        if deadline is not None and time.thread_time() > deadline:
            raise PlanInputError(
                "plan",
                f"planning took longer than its {budget_seconds:g} s budget; check the model's config.json",
            )

    result = _compute(arch, request, gpu, draft)
    check_budget()
    if _beyond_one_node(request) and [r.field for r in result.reasons if r.kind == "invalid"] == [
        ONE_NODE_FIELD
    ]:
        fitting = _one_node_alternative(arch, request, gpu, draft, check_budget)
        fixed = tuple(
            replace(r, fix=_one_node_fix(request, fitting)) if r.field == ONE_NODE_FIELD else r
            for r in result.reasons
        )
        return replace(result, reasons=_unsearched(fixed))
    if result.fits or any(r.kind == "invalid" for r in result.reasons):
        return replace(result, reasons=_unsearched(result.reasons))
    limit = request.gpus_per_node if not request.multi_node else 64
    best_tp: int | None = None
    tp = 1
    while tp * request.pp <= limit:
        if tp > request.tp:
            candidate = replace(request, tp=tp, ep=request.ep if tp % request.ep == 0 else 1)
            check_budget()
            if _compute(arch, candidate, gpu, draft).fits:
                best_tp = tp
                break
        tp *= 2
    best_gpu: str | None = None
    options = dict(DEFAULT_CATALOG) if catalog is None else {**DEFAULT_CATALOG, **catalog}
    for spec in sorted(options.values(), key=lambda g: (g.memory_bytes, g.product)):
        if spec.memory_bytes <= gpu.memory_bytes or spec.product == gpu.product:
            continue
        check_budget()
        if _compute(arch, request, spec, draft).fits:
            best_gpu = spec.product
            break
    recommended = {**result.recommended, "tensor_parallelism": best_tp, "gpu_product": best_gpu}
    note = _alternatives_note(request, limit, best_tp, best_gpu)
    reasons = tuple(replace(r, fix=r.fix.replace(SEE_ALTERNATIVES, note)) for r in result.reasons)
    return replace(result, recommended=recommended, reasons=reasons)


def plan_from_build_spec(
    spec: BuildSpec,
    hf_config: Mapping[str, Any],
    catalog: Mapping[str, GPUSpec] | None = None,
    kv_cache_free_gpu_mem_fraction: float = DEFAULT_KV_CACHE_FREE_GPU_MEM_FRACTION,
    *,
    budget_seconds: float | None = None,
    gpus_per_node: int | None = None,
    draft_hf_config: Mapping[str, Any] | None = None,
) -> Plan:
    """Plan for a builder :class:`~engine_builder.spec.BuildSpec` and the model's ``config.json``
    (``draft_hf_config``: the draft model's, counted on the same GPUs for ``draft_tokens_external``).

    ``catalog``: extra GPU entries (from :func:`~engine_builder.planner.catalog.load_catalog_extension`)
    over the built-in catalog. ``gpus_per_node``: GPUs of one node of the target product (the
    operator reads it from the cluster's nodes); None: the catalog entry's ``gpus_per_node``. Raises
    :class:`PlanInputError` for an unreadable config, an unknown GPU, or a model ``spec.backend``
    cannot build (:func:`~engine_builder.planner.architecture.backend_model_error`).
    """
    arch = Architecture.from_hf_config(hf_config)
    unbuildable = backend_model_error(arch.model_type, spec.backend)
    if unbuildable is not None:
        raise unbuildable
    gpu = lookup(spec.target.gpu_product, catalog)
    q = spec.quantization
    request = PlanRequest(
        quantization=q.format,
        kv_cache_dtype=q.kv_cache_dtype,
        tp=spec.parallelism.tensor,
        pp=spec.parallelism.pipeline,
        ep=spec.parallelism.expert,
        max_seq_len=spec.build.max_seq_len,
        max_batch_size=spec.build.max_batch_size,
        max_num_tokens=spec.build.max_num_tokens,
        kv_cache_free_gpu_mem_fraction=kv_cache_free_gpu_mem_fraction,
        awq_block_size=q.awq_block_size or DEFAULT_AWQ_BLOCK_SIZE,
        max_beam_width=spec.build.max_beam_width,
        max_input_len=spec.build.max_input_len,
        multi_node=spec.parallelism.multi_node,
        gpus_per_node=gpus_per_node if gpus_per_node is not None else gpu.gpus_per_node,
        backend=spec.backend,
        paged_context_fmha=spec.build.paged_context_fmha,
    )
    draft = None if draft_hf_config is None else Architecture.from_hf_config(draft_hf_config)
    return plan(arch, request, gpu, catalog, budget_seconds=budget_seconds, draft=draft)
