"""The Triton model repository's configuration files for one deployment: server settings → Triton's
parameters → file texts. Pure.

The files themselves come from :mod:`engine_builder.triton` (one renderer for the builder's package
stage and for the operator; docs/reference/tensorrt-llm.md §4.3 for the parameters): this module
maps the deployment's server settings onto that renderer's parameters (:func:`triton_model_params`,
:func:`llmapi_model_params`), renders them (:func:`repository_files`) and refuses a file with an
unfilled ``${…}`` (:func:`check_filled`) — a bad setting is found here, before anything is rendered
into a ConfigMap (:mod:`trtllm_operator.render.model_repository` packs the files).
"""

from __future__ import annotations

from collections.abc import Mapping

from engine_builder.triton import (
    LLMAPIModelParams,
    TritonModelParams,
    render_llmapi_model,
    render_trtllm_repository,
)
from trtllm_operator.decide.serving_params import (
    ARTIFACT_CHECKPOINT_DIR,
    ARTIFACT_ENGINE_DIR,
    ARTIFACT_TOKENIZER_DIR,
    ServingParams,
)

#: API ``batchingStrategy`` → Triton ``gpt_model_type`` spelling.
_BATCHING = {
    "inflight_fused_batching": "inflight_fused_batching",
    "inflight_batching": "inflight_batching",
    "v1": "V1",
    "V1": "V1",
}


def triton_model_params(params: ServingParams) -> TritonModelParams:
    """The tensorrt-backend repository parameters from the deployment's server settings.

    ``triton_max_batch_size`` follows the engine's ``max_batch_size`` (docs/reference/tensorrt-llm.md §4.3: it
    does not
    bound the runtime batch, the engine does, but a smaller Triton value would); pre/postprocessing
    instances follow ``spec.server.instanceCount``; ``num_nodes`` is the nodes one replica spans.
    """
    server = params.server
    return TritonModelParams(
        engine_dir=ARTIFACT_ENGINE_DIR,
        tokenizer_dir=ARTIFACT_TOKENIZER_DIR,
        triton_max_batch_size=params.max_batch_size,
        decoupled=server.decoupled,
        max_queue_delay_microseconds=server.max_queue_delay_microseconds,
        max_queue_size=server.max_queue_size,
        preprocessing_instance_count=server.instance_count,
        postprocessing_instance_count=server.instance_count,
        batching_strategy=_BATCHING[server.batching_strategy],
        batch_scheduler_policy=server.batch_scheduler_policy,
        max_beam_width=params.max_beam_width,
        kv_cache_free_gpu_mem_fraction=server.kv_cache_free_gpu_mem_fraction,
        max_tokens_in_paged_kv_cache=server.max_tokens_in_paged_kv_cache,
        enable_kv_cache_reuse=server.enable_kv_cache_reuse,
        enable_chunked_context=server.enable_chunked_context,
        num_nodes=params.nodes_per_replica,
    )


def llm_api_parallelism(tensor: int, pipeline: int, expert: int) -> tuple[int, int, int | None]:
    """``(tensor_parallel_size, pipeline_parallel_size, moe_expert_parallel_size)`` for the LLM API.

    The one mapping from the engine's ``spec.parallelism`` to what the PyTorch backend is started
    with, shared by the serving pods' ``model.yaml`` and the benchmark Job's ``trtllm-bench
    --tp/--pp/--ep`` so that a benchmark measures the configuration that is served. Expert
    parallelism 1 is passed as ``None`` (unset: TensorRT-LLM's own default mapping, like
    ``trtllm-bench``'s ``--ep`` default and ``LLM(moe_expert_parallel_size=None)``).
    """
    return tensor, pipeline, (expert if expert > 1 else None)


def llmapi_model_params(params: ServingParams) -> LLMAPIModelParams:
    """The pytorch-backend (LLM-API model) parameters: checkpoint, parallelism, limits, KV cache.

    ``spec.server.decoupled`` becomes ``triton_config.decoupled`` in ``model.yaml`` and
    ``model_transaction_policy`` in ``config.pbtxt`` (see :class:`engine_builder.triton.LLMAPIModelParams`).
    Errors: ``ValueError`` for ``spec.server.instanceCount`` > 1 — the LLM-API model has no
    pre/postprocessing models to multiply, and more instances of it would each build a full
    ``LLM()`` on the same GPUs (TensorRT-LLM ``triton_backend/all_models/llmapi/tensorrt_llm/1/model.py``
    ``initialize()``): out of GPU memory, or refused by versions that require ``gpu_device_ids``.
    """
    server = params.server
    if server.instance_count != 1:
        raise ValueError(
            f"instanceCount {server.instance_count} is not supported by the pytorch backend: its LLM-API "
            "model builds one full LLM() per instance on the same GPUs (TensorRT-LLM triton_backend "
            "llmapi model.py). Set spec.server.instanceCount to 1 and scale with spec.replicas"
        )
    tensor, pipeline, expert = llm_api_parallelism(
        params.tensor_parallelism, params.pipeline_parallelism, params.expert_parallelism
    )
    return LLMAPIModelParams(
        model=ARTIFACT_CHECKPOINT_DIR,
        tokenizer_dir=ARTIFACT_TOKENIZER_DIR,
        tensor_parallel_size=tensor,
        pipeline_parallel_size=pipeline,
        moe_expert_parallel_size=expert,
        max_batch_size=params.max_batch_size,
        max_num_tokens=params.max_num_tokens,
        max_seq_len=params.max_seq_len,
        kv_cache_free_gpu_mem_fraction=server.kv_cache_free_gpu_mem_fraction,
        max_tokens_in_paged_kv_cache=server.max_tokens_in_paged_kv_cache,
        enable_kv_cache_reuse=server.enable_kv_cache_reuse,
        kv_cache_dtype="fp8" if params.kv_cache_dtype == "fp8" else "auto",
        enable_chunked_context=server.enable_chunked_context,
        batch_scheduler_policy=server.batch_scheduler_policy,
        decoupled=server.decoupled,
    )


def repository_files(params: ServingParams) -> dict[str, str]:
    """``{repository-relative path: text}`` of the config files (engine_builder.triton renders them).

    Errors: ``engine_builder.triton.TemplateError`` (a ``ValueError``) if a placeholder would be
    left; ``pydantic.ValidationError`` naming the parameter for an out-of-range setting.
    """
    if params.backend == "pytorch":
        return render_llmapi_model(llmapi_model_params(params))
    return render_trtllm_repository(triton_model_params(params))


def check_filled(files: Mapping[str, str]) -> None:
    """Raise ``ValueError`` naming the file when a ``${…}`` template parameter is left unfilled.

    Triton fails to parse such a file (``Expected integer, got: $``, docs/reference/tensorrt-llm.md §4.2) only
    when the
    pod starts; the operator refuses it before anything is rolled.
    """
    for path, text in sorted(files.items()):
        if "${" in text:
            line = next(ln for ln in text.splitlines() if "${" in ln)
            raise ValueError(f"{path}: unfilled template parameter in line {line.strip()!r}")


def model_repository_files(params: ServingParams) -> dict[str, str]:
    """:func:`repository_files` checked by :func:`check_filled`: the files a deployment is served
    with. Errors: ``ValueError`` naming the file or the out-of-range setting
    (``pydantic.ValidationError`` is one)."""
    files = repository_files(params)
    check_filled(files)
    return files
