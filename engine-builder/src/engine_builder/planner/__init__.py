"""Capacity planner: does a model fit on a GPU, with how many tokens of KV cache, for how many sequences.

Pure code (no I/O except :func:`load_hf_config` and :func:`cross_check_safetensors`), shared by the
builder's ``plan`` stage and the operator (``trtllm-operator plan``, LLMEngine status). Method and
sources: ``docs/planner.md``.

Typical use::

    arch = Architecture.from_hf_config(load_hf_config("config.json"))
    gpu = catalog.lookup("NVIDIA-H200")
    result = plan(arch, PlanRequest(quantization="fp8", tp=2), gpu)
    result.fits, result.max_kv_tokens, result.to_json_dict()
"""

from engine_builder.planner import catalog
from engine_builder.planner.architecture import (
    MLA,
    SUPPORTED_MODEL_TYPES,
    TENSORRT_MODEL_TYPES,
    Architecture,
    MoE,
    TensorGroup,
    backend_model_error,
)
from engine_builder.planner.catalog import DEFAULT_CATALOG, GPUSpec, load_catalog_extension, lookup
from engine_builder.planner.errors import PlanInputError, PlanIssue
from engine_builder.planner.formats import (
    KV_CACHE_DTYPES,
    QUANT_FORMATS,
    bytes_per_param,
    kv_dtype_bytes,
    quantized_bytes_per_param,
)
from engine_builder.planner.plan import (
    BUILD_LIMITS,
    CLAMPED_AT_START,
    DEFAULT_KV_CACHE_FREE_GPU_MEM_FRACTION,
    DEFAULT_TOKENS_PER_BLOCK,
    MAX_GPUS_PER_REPLICA,
    PARALLELISM_LIMITS,
    DraftLoad,
    Plan,
    PlanRequest,
    activation_bytes_per_gpu,
    bounded_warnings,
    draft_kv_tokens,
    format_sm_issue,
    kv_bytes_per_token_per_gpu,
    kv_pool_tokens,
    max_tokens_pool_blocks,
    moot_with_chunked_context,
    one_sequence_kv_tokens,
    plan,
    plan_from_build_spec,
    runtime_reserve_bytes_per_gpu,
    validate,
    weight_bytes_per_gpu,
    why_one_sequence,
)
from engine_builder.planner.weights import WeightsCheck, cross_check_safetensors, load_hf_config

__all__ = [
    "BUILD_LIMITS",
    "CLAMPED_AT_START",
    "DEFAULT_CATALOG",
    "DEFAULT_KV_CACHE_FREE_GPU_MEM_FRACTION",
    "DEFAULT_TOKENS_PER_BLOCK",
    "KV_CACHE_DTYPES",
    "MAX_GPUS_PER_REPLICA",
    "MLA",
    "PARALLELISM_LIMITS",
    "QUANT_FORMATS",
    "SUPPORTED_MODEL_TYPES",
    "TENSORRT_MODEL_TYPES",
    "Architecture",
    "DraftLoad",
    "GPUSpec",
    "MoE",
    "Plan",
    "PlanInputError",
    "PlanIssue",
    "PlanRequest",
    "TensorGroup",
    "WeightsCheck",
    "activation_bytes_per_gpu",
    "backend_model_error",
    "bounded_warnings",
    "bytes_per_param",
    "catalog",
    "cross_check_safetensors",
    "draft_kv_tokens",
    "format_sm_issue",
    "kv_bytes_per_token_per_gpu",
    "kv_dtype_bytes",
    "kv_pool_tokens",
    "load_catalog_extension",
    "load_hf_config",
    "lookup",
    "max_tokens_pool_blocks",
    "moot_with_chunked_context",
    "one_sequence_kv_tokens",
    "plan",
    "plan_from_build_spec",
    "quantized_bytes_per_param",
    "runtime_reserve_bytes_per_gpu",
    "validate",
    "weight_bytes_per_gpu",
    "why_one_sequence",
]
