"""Render the Triton model-repository configuration files from typed parameters (pure).

Two layouts, one per serving backend:

* :func:`render_trtllm_repository` — the TensorRT engine path served by Triton's ``tensorrtllm``
  C++ backend: ``preprocessing`` → ``tensorrt_llm`` → ``postprocessing`` chained by ``ensemble``,
  optionally ``tensorrt_llm_bls`` (docs/reference/tensorrt-llm.md §4.1).
* :func:`render_llmapi_model` — the PyTorch backend served by the LLM-API Python model
  (``tensorrt_llm/config.pbtxt`` + ``tensorrt_llm/1/model.yaml``, docs/reference/tensorrt-llm.md §3.5).

Why not ``fill_template.py``: upstream fills ``${var}`` placeholders with a script whose key set
must match the template version exactly and which leaves unknown placeholders as literal ``${x}``
(in non-string protobuf positions that breaks parsing, docs/reference/tensorrt-llm.md §4.2). Here every value
is a
typed, validated field of :class:`TritonModelParams` with the reference's default; the
``parameters { … }`` blocks are generated from those fields, and a render that would leave any
``${`` raises :class:`TemplateError`. A parameter whose field is ``None`` ("let the backend
decide", e.g. ``max_tokens_in_paged_kv_cache`` unset = only the memory fraction bounds the pool) is
omitted from the C++ model's file, which the backend treats exactly like an unfilled placeholder:
it logs a warning and uses its default (docs/reference/tensorrt-llm.md §4.2, ``model_instance_state.cc``). The
Python
models (pre/post-processing, BLS) read some keys unconditionally, so they always get every key.

The templates (package data under ``templates/``) were written for this project from the tensor
interface of TensorRT-LLM's ``triton_backend/all_models`` (inflight_batcher_llm and llmapi,
tensorrtllm_backend v0.19 parameter key set — docs/reference/tensorrt-llm.md §4.3). The ``1/model.py`` files
of the
Python models are *not* rendered: they belong to the serving image (``/app/all_models/...``) and
must match its TensorRT-LLM version; the builder's package stage copies them from the image when it
runs there.

Both renderers return ``dict[str, str]``: repository-relative path (``"tensorrt_llm/config.pbtxt"``)
→ file content, including empty ``1/`` version-directory markers Triton needs. They take no
clock, no randomness and do no I/O except reading the bundled templates.
"""

from __future__ import annotations

import functools
import string
from collections.abc import Iterable
from importlib import resources
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, model_validator

#: The upstream model-repository generation these templates follow.
TEMPLATE_SET = "tensorrtllm_backend v0.19.0 parameter keys (TensorRT-LLM 0.19 - 1.2 triton_backend)"

BatchingStrategy = Literal["inflight_fused_batching", "inflight_batching", "V1"]
BatchSchedulerPolicy = Literal["guaranteed_no_evict", "max_utilization"]
TritonDataType = Literal["TYPE_FP16", "TYPE_BF16", "TYPE_FP32"]
DecodingMode = Literal[
    "top_k", "top_p", "top_k_top_p", "beam_search", "medusa", "redrafter", "lookahead", "eagle"
]

#: ``build.speculative_decoding.mode`` → the ``tensorrt_llm`` model's ``decoding_mode`` (the Triton
#: backend's spelling, tensorrtllm_backend v0.19.0 docs/model_config.md ``decoding_mode``); other
#: modes leave it unset (the backend picks top_k_top_p / beam_search; draft_tokens_external needs none).
SPECULATIVE_DECODING_MODES: dict[str, DecodingMode] = {
    "medusa": "medusa",
    "eagle": "eagle",
    "lookahead_decoding": "lookahead",
}

#: The draft model's Triton name, as upstream's draft-target deployment names it
#: (NVIDIA/TensorRT-LLM ``examples/draft_target_model/README.md``, 1.2: ``DRAFT_MODEL_NAME=
#: "tensorrt_llm_draft"``, a copy of ``tensorrt_llm/config.pbtxt`` with ``name: "tensorrt_llm_draft"``
#: and ``engine_dir`` the draft engine; the BLS gets ``tensorrt_llm_draft_model_name``).
DRAFT_MODEL_NAME = "tensorrt_llm_draft"

#: The dtype of the logits every engine of this project is built with (``trtllm-build
#: --logits_dtype``) and the Triton type its repository declares for ``context_logits`` /
#: ``generation_logits``: one pair, so the two cannot disagree (audit B9). Without the flag the engine
#: takes the checkpoint's ``logits_dtype`` (TensorRT-LLM ``tensorrt_llm/commands/build.py``
#: ``build_model``: ``if logits_dtype is not None: model_config.logits_dtype = logits_dtype``), which
#: ModelOpt 0.47 exports as ``float16`` for bf16 models (``modelopt/torch/export/tensorrt_llm_utils.py``
#: ``convert_to_tensorrt_llm_config``), while tensorrtllm_backend fills ``logits_datatype`` with
#: ``TYPE_FP32`` (v0.19.0 README.md ``LOGITS_DATATYPE=TYPE_FP32``, ``all_models/inflight_batcher_llm/
#: tensorrt_llm/config.pbtxt`` ``data_type: ${logits_datatype}``). float32 is also the checkpoint
#: format's own default (TensorRT-LLM ``docs/source/architecture/checkpoint.md``: ``logits_dtype``
#: 'float32').
ENGINE_LOGITS_DTYPE: Literal["float32"] = "float32"
ENGINE_LOGITS_TRITON_TYPE: Literal["TYPE_FP32"] = "TYPE_FP32"

#: Fixed by the tensorrtllm backend image layout (docs/reference/tensorrt-llm.md §4.3).
EXECUTOR_WORKER_PATH = "/opt/tritonserver/backends/tensorrtllm/trtllmExecutorWorker"


class TemplateError(ValueError):
    """A rendered file would still contain a ``${…}`` placeholder, or a template is malformed."""


class _Params(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class TritonModelParams(_Params):
    """Everything the TensorRT-engine model repository needs (docs/reference/tensorrt-llm.md §4.3).

    Field names are the upstream template variables. Defaults are the backend's own defaults
    (docs/reference/tensorrt-llm.md §4.3 table); ``None`` means "not set: the backend's default applies" and
    the
    parameter is left out of ``tensorrt_llm/config.pbtxt``.

    Raises ``pydantic.ValidationError`` naming the field for out-of-range values.
    """

    # Paths inside the serving pod.
    engine_dir: str = Field(min_length=1, description="Directory holding config.json + rank*.engine.")
    tokenizer_dir: str = Field(min_length=1, description="Hugging Face tokenizer directory.")
    encoder_engine_dir: str | None = Field(default=None, description="Encoder engine (enc-dec only).")

    # Triton scheduling (shared by the models).
    triton_max_batch_size: int = Field(
        default=64,
        ge=1,
        description="Triton's max_batch_size / preferred_batch_size. Does not bound the TensorRT-LLM "
        "runtime batch (the engine's max_batch_size does); set it to the engine's max_batch_size.",
    )
    decoupled: bool = Field(default=False, description="Decoupled transaction policy; true for streaming.")
    max_queue_delay_microseconds: int = Field(default=0, ge=0, description="Dynamic batcher delay (µs).")
    max_queue_size: int = Field(
        default=0, ge=0, description="Requests queued before Triton rejects (0 = unbounded)."
    )
    triton_backend: Literal["tensorrtllm", "python"] = "tensorrtllm"
    logits_datatype: TritonDataType = Field(
        default=ENGINE_LOGITS_TRITON_TYPE,
        description="Triton type of context/generation logits; must match the engine's logits dtype "
        f"(this project's engines: {ENGINE_LOGITS_DTYPE}, ENGINE_LOGITS_DTYPE).",
    )
    encoder_input_features_data_type: TritonDataType = "TYPE_FP16"

    # Instance counts.
    tensorrt_llm_instance_count: int = Field(default=1, ge=1)
    preprocessing_instance_count: int = Field(default=1, ge=1)
    postprocessing_instance_count: int = Field(default=1, ge=1)
    bls_instance_count: int | None = Field(
        default=None,
        ge=1,
        description="Instances of tensorrt_llm_bls; None = triton_max_batch_size. Upstream: 'When using "
        "the BLS model instead of the ensemble, you should set the number of model instances to the "
        "maximum batch size supported by the TRT engine to allow concurrent request execution' "
        "(TensorRT-LLM triton_backend docs model_config.md, tensorrt_llm_bls mandatory parameters): one "
        "instance runs one request at a time, so a single instance serialises every request.",
    )
    include_bls: bool = Field(default=False, description="Also render tensorrt_llm_bls.")

    # tensorrt_llm model parameters.
    batching_strategy: BatchingStrategy = "inflight_fused_batching"
    batch_scheduler_policy: BatchSchedulerPolicy = "guaranteed_no_evict"
    max_beam_width: int = Field(default=1, ge=1)
    kv_cache_free_gpu_mem_fraction: float = Field(
        default=0.9, gt=0.0, le=1.0, description="Fraction of free GPU memory for the paged KV cache."
    )
    max_tokens_in_paged_kv_cache: int | None = Field(
        default=None, ge=1, description="Upper bound on KV-cache tokens; min(this, fraction-derived)."
    )
    max_attention_window_size: tuple[int, ...] | None = Field(
        default=None, description="Per-layer attention windows (tokens); None = max_seq_len."
    )
    sink_token_length: int | None = Field(default=None, ge=0)
    cross_kv_cache_fraction: float | None = Field(default=None, gt=0.0, lt=1.0)
    kv_cache_host_memory_bytes: int = Field(default=0, ge=0, description="Host offload pool (bytes).")
    kv_cache_onboard_blocks: bool = True
    enable_kv_cache_reuse: bool = Field(
        default=True, description="Prefix reuse; needs an engine built with paged context FMHA."
    )
    enable_chunked_context: bool = Field(
        default=False, description="Chunked prefill; without it prompts > max_num_tokens are rejected."
    )
    exclude_input_in_output: bool = False
    normalize_log_probs: bool = True
    cancellation_check_period_ms: int = Field(default=100, ge=1)
    stats_check_period_ms: int = Field(default=100, ge=1, description="Metrics refresh period (ms).")
    iter_stats_max_iterations: int | None = Field(default=None, ge=0)
    request_stats_max_iterations: int | None = Field(default=None, ge=0)
    gpu_device_ids: tuple[tuple[int, ...], ...] | None = Field(
        default=None, description="Per instance, the GPU ids it uses; None = all visible."
    )
    participant_ids: tuple[int, ...] | None = None
    num_nodes: int = Field(default=1, ge=1)
    decoding_mode: DecodingMode | None = Field(
        default=None, description="None: top_k_top_p for beam width 1, else beam_search."
    )
    lora_cache_optimal_adapter_size: int = Field(default=8, ge=1)
    lora_cache_max_adapter_size: int = Field(default=64, ge=1)
    lora_cache_gpu_memory_fraction: float = Field(default=0.05, gt=0.0, lt=1.0)
    lora_cache_host_memory_bytes: int = Field(default=1 << 30, ge=0)
    lora_prefetch_dir: str | None = None
    lookahead_window_size: int | None = Field(default=None, ge=1)
    lookahead_ngram_size: int | None = Field(default=None, ge=1)
    lookahead_verification_set_size: int | None = Field(default=None, ge=1)
    medusa_choices: str | None = None
    eagle_choices: str | None = None
    gpu_weights_percent: float = Field(default=1.0, gt=0.0, le=1.0)
    enable_context_fmha_fp32_acc: bool = False
    multi_block_mode: bool = True
    cuda_graph_mode: bool = False
    cuda_graph_cache_size: int = Field(default=0, ge=0)
    speculative_decoding_fast_logits: bool = False
    guided_decoding_backend: Literal["xgrammar"] | None = None
    xgrammar_tokenizer_info_path: str | None = None

    # preprocessing / postprocessing / BLS.
    add_special_tokens: bool = True
    skip_special_tokens: bool = True
    multimodal_model_path: str | None = None
    max_num_images: int | None = Field(default=None, ge=1)
    accumulate_tokens: bool = False
    tensorrt_llm_model_name: str = "tensorrt_llm"
    tensorrt_llm_draft_model_name: str | None = None
    multimodal_encoders_name: str | None = None

    # The draft engine of draft-target speculative decoding (draft_tokens_external).
    draft_engine_dir: str | None = Field(
        default=None,
        description="The draft engine's directory: also render the draft model "
        f"({DRAFT_MODEL_NAME!r}) and name it in the BLS; needs include_bls.",
    )
    draft_max_tokens_in_paged_kv_cache: int | None = Field(
        default=None, ge=1, description="The draft model's KV-cache bound (planner.draft_kv_tokens)."
    )

    @model_validator(mode="after")
    def _check(self) -> TritonModelParams:
        if self.guided_decoding_backend and not self.xgrammar_tokenizer_info_path:
            raise ValueError(
                "guided_decoding_backend is set but xgrammar_tokenizer_info_path is empty: "
                "set both (docs/reference/tensorrt-llm.md §4.3) or neither"
            )
        if self.tensorrt_llm_draft_model_name and not self.include_bls:
            raise ValueError("tensorrt_llm_draft_model_name needs include_bls=True (only the BLS uses it)")
        if self.draft_engine_dir and not self.include_bls:
            raise ValueError(
                "draft_engine_dir needs include_bls=True: only the tensorrt_llm_bls model runs the "
                "draft/target loop"
            )
        return self


class LLMAPIModelParams(_Params):
    """The LLM-API (PyTorch backend) Triton model: ``config.pbtxt`` + ``1/model.yaml``.

    ``model.yaml`` keys are ``tensorrt_llm.LLM()`` arguments (docs/reference/tensorrt-llm.md §3.5): ``model``,
    ``backend``, parallel sizes, ``kv_cache_config`` (``free_gpu_memory_fraction``,
    ``enable_block_reuse``, ``max_tokens``, ``dtype``), ``scheduler_config``, limits, plus
    ``triton_config`` (``max_batch_size``: 0 — the model does not batch — and ``decoupled``).

    ``triton_config`` is also rendered into ``config.pbtxt`` (``max_batch_size``,
    ``model_transaction_policy { decoupled }``): upstream's ``model.py`` applies it only in
    ``auto_complete_config()`` (TensorRT-LLM ``triton_backend/all_models/llmapi/tensorrt_llm/1/model.py``),
    and the Python backend calls that only when auto-complete is on (triton-inference-server
    ``python_backend`` ``src/python_be.cc``, ``ModelState::Create``) — the serving pods run
    ``tritonserver --disable-auto-complete-config``. There is no instance count: ``model.py`` builds
    one full ``LLM()`` per Triton model instance on the pod's GPUs (``initialize()``; versions after
    1.2 refuse ``count > 1`` without ``gpu_device_ids``), so ``config.pbtxt`` always has one instance.
    """

    model: str = Field(min_length=1, description="Checkpoint directory (unified HF checkpoint) in the pod.")
    tokenizer_dir: str | None = Field(default=None, description="Tokenizer dir if not inside `model`.")
    tensor_parallel_size: int = Field(default=1, ge=1)
    pipeline_parallel_size: int = Field(default=1, ge=1)
    moe_expert_parallel_size: int | None = Field(default=None, ge=1)
    max_batch_size: int | None = Field(default=None, ge=1, description="Runtime batch limit (LLM arg).")
    max_num_tokens: int | None = Field(default=None, ge=1)
    max_seq_len: int | None = Field(default=None, ge=2)
    kv_cache_free_gpu_mem_fraction: float = Field(default=0.9, gt=0.0, le=1.0)
    max_tokens_in_paged_kv_cache: int | None = Field(default=None, ge=1)
    enable_kv_cache_reuse: bool = True
    kv_cache_dtype: Literal["auto", "fp8"] = "auto"
    enable_chunked_context: bool = False
    batch_scheduler_policy: BatchSchedulerPolicy = "guaranteed_no_evict"
    decoupled: bool = False
    triton_max_batch_size: int = Field(
        default=0, ge=0, description="triton_config.max_batch_size; 0 because the model does not batch."
    )


# --------------------------------------------------------------------------------------------------
# Rendering helpers.


@functools.cache
def _template(group: str, name: str) -> string.Template:
    """The package's template ``templates/<group>/<name>``, read once per process: the operator
    renders a deployment's files on every reconcile, and re-reading them from disk was 14 % of its
    busy samples in a 1,000 + 1,000 burst (py-spy, benchmarks/scale.py; issue #20)."""
    text = resources.files("engine_builder").joinpath("templates", group, name).read_text("utf-8")
    return string.Template(text)


def _pb_bool(value: bool) -> str:
    return "true" if value else "false"


def _pb_string(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _param_text(value: object) -> str:
    if isinstance(value, bool):
        return _pb_bool(value)
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, tuple):
        if value and isinstance(value[0], tuple):  # gpu_device_ids: instances ';'-separated
            return ";".join(",".join(str(v) for v in group) for group in value)
        return ",".join(str(v) for v in value)
    return str(value)


def _parameters(items: Iterable[tuple[str, object]]) -> str:
    """``parameters: { key: … value: { string_value: … } }`` blocks; ``None`` values are skipped."""
    blocks = []
    for key, value in items:
        if value is None:
            continue
        text = _pb_string(_param_text(value))
        blocks.append(f"parameters: {{ key: {_pb_string(key)} value: {{ string_value: {text} }} }}")
    return "\n".join(blocks)


def _substitute(template: string.Template, where: str, values: dict[str, object]) -> str:
    text_values = {k: (_pb_bool(v) if isinstance(v, bool) else str(v)) for k, v in values.items()}
    try:
        rendered = template.substitute(text_values)
    except KeyError as exc:
        raise TemplateError(f"{where}: template placeholder ${{{exc.args[0]}}} has no value") from exc
    except ValueError as exc:
        raise TemplateError(f"{where}: malformed template: {exc}") from exc
    check_no_placeholders({where: rendered})
    return rendered


def check_no_placeholders(files: dict[str, str]) -> None:
    """Raise :class:`TemplateError` naming the file and line if any content still holds ``${``."""
    for path, content in files.items():
        for lineno, line in enumerate(content.splitlines(), start=1):
            if "${" in line:
                raise TemplateError(f"{path}:{lineno}: unfilled placeholder left: {line.strip()!r}")


# --------------------------------------------------------------------------------------------------
# Public renderers.


def tensorrt_llm_parameters(p: TritonModelParams) -> list[tuple[str, object]]:
    """The ``tensorrt_llm`` model's (parameter key, value) pairs in template order (None = omit)."""
    return [
        ("max_beam_width", p.max_beam_width),
        ("FORCE_CPU_ONLY_INPUT_TENSORS", "no"),
        ("gpt_model_type", p.batching_strategy),
        ("gpt_model_path", p.engine_dir),
        ("encoder_model_path", p.encoder_engine_dir),
        ("max_tokens_in_paged_kv_cache", p.max_tokens_in_paged_kv_cache),
        ("max_attention_window_size", p.max_attention_window_size),
        ("sink_token_length", p.sink_token_length),
        ("batch_scheduler_policy", p.batch_scheduler_policy),
        ("kv_cache_free_gpu_mem_fraction", p.kv_cache_free_gpu_mem_fraction),
        ("cross_kv_cache_fraction", p.cross_kv_cache_fraction),
        ("kv_cache_host_memory_bytes", p.kv_cache_host_memory_bytes),
        ("kv_cache_onboard_blocks", p.kv_cache_onboard_blocks),
        ("exclude_input_in_output", p.exclude_input_in_output),
        ("cancellation_check_period_ms", p.cancellation_check_period_ms),
        ("stats_check_period_ms", p.stats_check_period_ms),
        ("iter_stats_max_iterations", p.iter_stats_max_iterations),
        ("request_stats_max_iterations", p.request_stats_max_iterations),
        ("enable_kv_cache_reuse", p.enable_kv_cache_reuse),
        ("normalize_log_probs", p.normalize_log_probs),
        ("enable_chunked_context", p.enable_chunked_context),
        ("gpu_device_ids", p.gpu_device_ids),
        ("participant_ids", p.participant_ids),
        ("num_nodes", p.num_nodes),
        ("lora_cache_optimal_adapter_size", p.lora_cache_optimal_adapter_size),
        ("lora_cache_max_adapter_size", p.lora_cache_max_adapter_size),
        ("lora_cache_gpu_memory_fraction", p.lora_cache_gpu_memory_fraction),
        ("lora_cache_host_memory_bytes", p.lora_cache_host_memory_bytes),
        ("lora_prefetch_dir", p.lora_prefetch_dir),
        ("decoding_mode", p.decoding_mode),
        ("executor_worker_path", EXECUTOR_WORKER_PATH),
        ("lookahead_window_size", p.lookahead_window_size),
        ("lookahead_ngram_size", p.lookahead_ngram_size),
        ("lookahead_verification_set_size", p.lookahead_verification_set_size),
        ("medusa_choices", p.medusa_choices),
        ("eagle_choices", p.eagle_choices),
        ("gpu_weights_percent", p.gpu_weights_percent),
        ("enable_context_fmha_fp32_acc", p.enable_context_fmha_fp32_acc),
        ("multi_block_mode", p.multi_block_mode),
        ("cuda_graph_mode", p.cuda_graph_mode),
        ("cuda_graph_cache_size", p.cuda_graph_cache_size),
        ("speculative_decoding_fast_logits", p.speculative_decoding_fast_logits),
        ("tokenizer_dir", p.tokenizer_dir if p.guided_decoding_backend else None),
        ("guided_decoding_backend", p.guided_decoding_backend),
        ("xgrammar_tokenizer_info_path", p.xgrammar_tokenizer_info_path),
    ]


def _shared_values(params: TritonModelParams) -> dict[str, object]:
    return {
        "triton_max_batch_size": params.triton_max_batch_size,
        "max_queue_delay_microseconds": params.max_queue_delay_microseconds,
        "max_queue_size": params.max_queue_size,
        "logits_datatype": params.logits_datatype,
        "decoupled_mode": params.decoupled,
    }


def _tensorrt_llm_config(params: TritonModelParams) -> str:
    return _substitute(
        _template("inflight_batcher_llm", "tensorrt_llm.pbtxt"),
        "tensorrt_llm/config.pbtxt",
        {
            **_shared_values(params),
            "triton_backend": params.triton_backend,
            "encoder_input_features_data_type": params.encoder_input_features_data_type,
            "tensorrt_llm_instance_count": params.tensorrt_llm_instance_count,
            "parameters": _parameters(tensorrt_llm_parameters(params)),
        },
    )


def render_trtllm_repository(params: TritonModelParams) -> dict[str, str]:
    """Render ``ensemble``, ``preprocessing``, ``tensorrt_llm``, ``postprocessing`` (and
    ``tensorrt_llm_bls`` when ``params.include_bls``, :data:`DRAFT_MODEL_NAME` when
    ``params.draft_engine_dir``) for the TensorRT engine path.

    Returns ``{relative path: content}``, e.g. ``"tensorrt_llm/config.pbtxt"``, plus empty
    ``<model>/1/.gitkeep`` markers. Raises :class:`TemplateError` if a placeholder would be left.
    """
    group = "inflight_batcher_llm"
    shared = _shared_values(params)
    files: dict[str, str] = {}
    files["tensorrt_llm/config.pbtxt"] = _tensorrt_llm_config(params)
    files["preprocessing/config.pbtxt"] = _substitute(
        _template(group, "preprocessing.pbtxt"),
        "preprocessing/config.pbtxt",
        {
            **shared,
            "preprocessing_instance_count": params.preprocessing_instance_count,
            "parameters": _parameters(
                [
                    ("tokenizer_dir", params.tokenizer_dir),
                    ("add_special_tokens", params.add_special_tokens),
                    # Read unconditionally by model.py; "" means "text-only model".
                    ("multimodal_model_path", params.multimodal_model_path or ""),
                    ("gpt_model_path", params.engine_dir),
                    ("max_num_images", params.max_num_images or ""),
                ]
            ),
        },
    )
    files["postprocessing/config.pbtxt"] = _substitute(
        _template(group, "postprocessing.pbtxt"),
        "postprocessing/config.pbtxt",
        {
            **shared,
            "postprocessing_instance_count": params.postprocessing_instance_count,
            "parameters": _parameters(
                [
                    ("tokenizer_dir", params.tokenizer_dir),
                    ("skip_special_tokens", params.skip_special_tokens),
                ]
            ),
        },
    )
    files["ensemble/config.pbtxt"] = _substitute(
        _template(group, "ensemble.pbtxt"), "ensemble/config.pbtxt", shared
    )
    if params.draft_engine_dir:
        files[f"{DRAFT_MODEL_NAME}/config.pbtxt"] = draft_model_config(params)
    if params.include_bls:
        files["tensorrt_llm_bls/config.pbtxt"] = _substitute(
            _template(group, "tensorrt_llm_bls.pbtxt"),
            "tensorrt_llm_bls/config.pbtxt",
            {
                **shared,
                "bls_instance_count": params.bls_instance_count or params.triton_max_batch_size,
                "parameters": _parameters(
                    [
                        ("accumulate_tokens", params.accumulate_tokens),
                        ("tensorrt_llm_model_name", params.tensorrt_llm_model_name),
                        (
                            "tensorrt_llm_draft_model_name",
                            params.tensorrt_llm_draft_model_name
                            or (DRAFT_MODEL_NAME if params.draft_engine_dir else ""),
                        ),
                        ("multimodal_encoders_name", params.multimodal_encoders_name or ""),
                    ]
                ),
            },
        )
    for model in sorted({path.split("/", 1)[0] for path in files}):
        files[f"{model}/1/.gitkeep"] = ""
    return dict(sorted(files.items()))


def draft_model_config(params: TritonModelParams) -> str:
    """The draft model's ``config.pbtxt``: the ``tensorrt_llm`` file rendered for the draft engine
    (its path, its KV-cache bound, block reuse on, none of the target's decoding mode) and named
    :data:`DRAFT_MODEL_NAME` — upstream copies ``tensorrt_llm`` to ``tensorrt_llm_draft``, renames it
    and fills it with the draft's ``engine_dir`` and ``enable_kv_cache_reuse:True``
    (NVIDIA/TensorRT-LLM ``examples/draft_target_model/README.md``)."""
    if params.draft_engine_dir is None:
        raise TemplateError("draft_model_config: draft_engine_dir is not set")
    draft = params.model_copy(
        update={
            "engine_dir": params.draft_engine_dir,
            "max_tokens_in_paged_kv_cache": params.draft_max_tokens_in_paged_kv_cache,
            "enable_kv_cache_reuse": True,
            "decoding_mode": None,
            "lookahead_window_size": None,
            "lookahead_ngram_size": None,
            "lookahead_verification_set_size": None,
        }
    )
    text = _tensorrt_llm_config(draft)
    name_line = 'name: "tensorrt_llm"\n'
    if text.count(name_line) != 1:
        raise TemplateError(f"tensorrt_llm/config.pbtxt: expected one line {name_line.strip()!r} to rename")
    return text.replace(name_line, f'name: "{DRAFT_MODEL_NAME}"\n', 1)


def llmapi_model_yaml(params: LLMAPIModelParams) -> dict[str, object]:
    """The ``model.yaml`` document (``LLM()`` arguments + ``triton_config``) as plain data."""
    kv_cache_config: dict[str, object] = {
        "free_gpu_memory_fraction": params.kv_cache_free_gpu_mem_fraction,
        "enable_block_reuse": params.enable_kv_cache_reuse,
    }
    if params.max_tokens_in_paged_kv_cache is not None:
        kv_cache_config["max_tokens"] = params.max_tokens_in_paged_kv_cache
    if params.kv_cache_dtype != "auto":
        kv_cache_config["dtype"] = params.kv_cache_dtype
    doc: dict[str, object] = {"model": params.model, "backend": "pytorch"}
    if params.tokenizer_dir:
        doc["tokenizer"] = params.tokenizer_dir
    doc["tensor_parallel_size"] = params.tensor_parallel_size
    doc["pipeline_parallel_size"] = params.pipeline_parallel_size
    if params.moe_expert_parallel_size is not None:
        doc["moe_expert_parallel_size"] = params.moe_expert_parallel_size
    for key in ("max_batch_size", "max_num_tokens", "max_seq_len"):
        value = getattr(params, key)
        if value is not None:
            doc[key] = value
    doc["kv_cache_config"] = kv_cache_config
    doc["enable_chunked_prefill"] = params.enable_chunked_context
    doc["scheduler_config"] = {"capacity_scheduler_policy": params.batch_scheduler_policy.upper()}
    doc["triton_config"] = {"max_batch_size": params.triton_max_batch_size, "decoupled": params.decoupled}
    return doc


def render_llmapi_model(params: LLMAPIModelParams) -> dict[str, str]:
    """Render ``tensorrt_llm/config.pbtxt`` and ``tensorrt_llm/1/model.yaml`` for the PyTorch backend.

    Raises :class:`TemplateError` if a placeholder would be left.
    """
    config = _substitute(
        _template("llmapi", "tensorrt_llm.pbtxt"),
        "tensorrt_llm/config.pbtxt",
        {"triton_max_batch_size": params.triton_max_batch_size, "decoupled_mode": params.decoupled},
    )
    header = "# Rendered by engine_builder.triton: tensorrt_llm.LLM() arguments + triton_config.\n"
    model_yaml = header + yaml.safe_dump(llmapi_model_yaml(params), sort_keys=False)
    files = {"tensorrt_llm/config.pbtxt": config, "tensorrt_llm/1/model.yaml": model_yaml}
    check_no_placeholders(files)
    return files
