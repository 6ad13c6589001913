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

import yaml

from engine_builder.planner import draft_kv_tokens
from engine_builder.triton import (
    SPECULATIVE_DECODING_MODES,
    LLMAPIModelParams,
    TritonModelParams,
    llmapi_model_yaml,
    render_llmapi_model,
    render_trtllm_repository,
)
from trtllm_operator.decide.serving_params import (
    ARTIFACT_CHECKPOINT_DIR,
    ARTIFACT_DRAFT_ENGINE_DIR,
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
    An engine with a draft model (``draft_tokens_external``) is served as upstream's draft-target
    deployment: ``tensorrt_llm_bls`` naming the draft model, which loads the artifact's draft engine
    with its KV cache bounded as the planner counted it (``engine_builder.planner.draft_kv_tokens``).
    Lookahead decoding sets ``decoding_mode: lookahead`` and the executor's (W, N, G), which the
    backend reads from ``lookahead_window_size`` / ``lookahead_ngram_size`` /
    ``lookahead_verification_set_size`` (tensorrtllm_backend v0.19.0 docs/model_config.md).
    """
    server = params.server
    draft = params.speculative_mode == "draft_tokens_external"
    la = params.lookahead
    draft_tokens = (
        draft_kv_tokens(params.max_batch_size, params.max_seq_len) if draft and params.max_seq_len else None
    )
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
        # Triton's OpenAI frontend sends the echo input only for /v1/completions with ``echo``
        # (r26.03 engine/utils/triton.py: ``getattr(request, "echo", None)``); a chat completion
        # would otherwise return the templated prompt before the reply (seen on this project's CPU
        # Triton, docs/triton-cpu.md). So with the frontend the backend's default excludes it.
        exclude_input_in_output=server.api != "triton",
        include_bls=draft,
        draft_engine_dir=ARTIFACT_DRAFT_ENGINE_DIR if draft else None,
        draft_max_tokens_in_paged_kv_cache=draft_tokens,
        decoding_mode=SPECULATIVE_DECODING_MODES.get(params.speculative_mode),
        lookahead_window_size=la[0] if la else None,
        lookahead_ngram_size=la[1] if la else None,
        lookahead_verification_set_size=la[2] if la else None,
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


#: Inputs Triton's OpenAI frontend puts on every generation request for a TensorRT-LLM model
#: (triton-inference-server/server r26.03, the 26.03 images' release branch:
#: ``python/openai/openai_frontend/engine/utils/triton.py`` ``_create_trtllm_generate_request``:
#: ``inputs["return_num_input_tokens"] = np.bool_([[True]])``, the same for ``…output_tokens``).
#: Triton refuses a request carrying an input its model does not declare (triton-inference-server/core
#: r26.03 ``src/model.cc`` ``Model::GetInput``: "unexpected inference input"), so the ensemble declares
#: them and passes them to ``tensorrt_llm`` (as upstream's ensemble does: NVIDIA/TensorRT-LLM
#: ``triton_backend/all_models/inflight_batcher_llm/ensemble/config.pbtxt``); an ensemble input no
#: step consumes is refused at load ("ensemble input … is not used", core r26.03
#: ``src/model_config_utils.cc`` ``ValidateEnsembleSchedulingConfig``). The TensorRT-LLM backend reads
#: every request input into a name → tensor map and looks up the names it knows
#: (``triton_backend/inflight_batcher_llm/src/utils.h`` ``readInputsTensors``), so a backend that
#: does not produce token counts ignores them; the frontend then answers without ``usage``.
OPENAI_FRONTEND_INPUTS = ("return_num_input_tokens", "return_num_output_tokens")
#: The Triton model the OpenAI frontend's clients call by default: the text-in/text-out ensemble.
DEFAULT_SERVED_MODEL = "ensemble"

_BOOL = "data_type: TYPE_BOOL dims: [ 1 ]"
_ENSEMBLE_INPUT_ANCHOR = f'  {{ name: "return_perf_metrics" {_BOOL} optional: true }},\n'
_ENSEMBLE_MAP_ANCHOR = '      input_map { key: "return_perf_metrics" value: "return_perf_metrics" }\n'
_TRTLLM_INPUT_ANCHOR = (
    f'  {{ name: "return_perf_metrics" {_BOOL} reshape: {{ shape: [ ] }} optional: true }},\n'
)


def _insert_after(text: str, anchor: str, lines: str, path: str) -> str:
    if text.count(anchor) != 1:
        raise ValueError(f"{path}: expected one line {anchor.strip()!r} to extend for the OpenAI frontend")
    return text.replace(anchor, anchor + lines, 1)


def openai_frontend_repository(files: Mapping[str, str], served_model_name: str | None) -> dict[str, str]:
    """The TensorRT-engine repository ``files`` made servable by Triton's OpenAI frontend.

    1. The ensemble and ``tensorrt_llm`` declare :data:`OPENAI_FRONTEND_INPUTS` (optional BOOL), the
       ensemble maps them into its ``tensorrt_llm`` step.
    2. The ensemble is renamed ``served_model_name`` (default :data:`DEFAULT_SERVED_MODEL`): the
       frontend lists and addresses every Triton model by its Triton name (r26.03
       ``engine/triton_engine.py`` ``_get_model_metadata``, ``models``: ``Model(id=name)``), and a
       model's directory and its config's ``name`` must be the same.

    Errors: ``ValueError`` when a file does not have the expected shape (the renderer changed).
    """
    out = dict(files)
    ens_path, trt_path = "ensemble/config.pbtxt", "tensorrt_llm/config.pbtxt"
    ensemble = out.pop(ens_path)
    ens_inputs = "".join(f'  {{ name: "{n}" {_BOOL} optional: true }},\n' for n in OPENAI_FRONTEND_INPUTS)
    ens_maps = "".join(f'      input_map {{ key: "{n}" value: "{n}" }}\n' for n in OPENAI_FRONTEND_INPUTS)
    trt_inputs = "".join(
        f'  {{ name: "{n}" {_BOOL} reshape: {{ shape: [ ] }} optional: true }},\n'
        for n in OPENAI_FRONTEND_INPUTS
    )
    ensemble = _insert_after(ensemble, _ENSEMBLE_INPUT_ANCHOR, ens_inputs, ens_path)
    ensemble = _insert_after(ensemble, _ENSEMBLE_MAP_ANCHOR, ens_maps, ens_path)
    out[trt_path] = _insert_after(out[trt_path], _TRTLLM_INPUT_ANCHOR, trt_inputs, trt_path)
    name = served_model_name or DEFAULT_SERVED_MODEL
    name_line = f'name: "{DEFAULT_SERVED_MODEL}"\n'
    if ensemble.count(name_line) != 1:
        raise ValueError(f"{ens_path}: expected one line {name_line.strip()!r} to rename")
    out[f"{name}/config.pbtxt"] = ensemble.replace(name_line, f'name: "{name}"\n', 1)
    marker = out.pop(f"{DEFAULT_SERVED_MODEL}/1/.gitkeep", None)
    if marker is not None:
        out[f"{name}/1/.gitkeep"] = marker
    return dict(sorted(out.items()))


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


#: The ``--extra_llm_api_options`` YAML of ``trtllm-serve`` (the pytorch backend's ``api: openai``,
#: :func:`trtllm_operator.render.serving.trtllm_serve_args`): a file of the ConfigMap, mounted at
#: ``<config mount>/model-repository/<path>`` like every repository file.
TRTLLM_SERVE_OPTIONS = "trtllm-serve/extra-llm-api-options.yaml"
#: ``model.yaml`` keys ``trtllm-serve`` gets as flags (or not at all: ``triton_config`` is Triton's).
_TRTLLM_SERVE_FLAG_KEYS = frozenset(
    {
        "model",
        "backend",
        "tokenizer",
        "tensor_parallel_size",
        "pipeline_parallel_size",
        "moe_expert_parallel_size",
        "max_batch_size",
        "max_num_tokens",
        "max_seq_len",
        "triton_config",
    }
)


def trtllm_serve_options(params: ServingParams) -> dict[str, object]:
    """The ``LLM()`` arguments ``trtllm-serve`` reads from ``--extra_llm_api_options``.

    The same mapping as the LLM-API model's ``model.yaml`` (:func:`llmapi_model_params`, so both
    frontends of the pytorch backend run the same ``LLM``), less what ``trtllm-serve`` takes as
    flags, plus ``return_perf_metrics: true``, which mounts its Prometheus endpoint
    (``openai_server.py`` ``register_routes``: ``if self.llm.args.return_perf_metrics:
    self.mount_metrics()``; ``TorchLlmArgs.return_perf_metrics``, default false).

    ``scheduler_config`` only for ``batchSchedulerPolicy: max_utilization``: ``serve.py``
    ``get_llm_args`` already builds ``SchedulerConfig(capacity_scheduler_policy=GUARANTEED_NO_EVICT,
    dynamic_batch_config=…)``, which a YAML ``scheduler_config`` would replace whole.
    ``kv_cache_config`` keeps ``free_gpu_memory_fraction`` although ``--kv_cache_free_gpu_memory_fraction``
    carries it too: ``serve.py`` builds a ``KvCacheConfig`` from the flag and then
    ``update_llm_args_with_extra_dict`` replaces the whole ``kv_cache_config`` with the YAML's.
    Iteration stats (``enable_iter_perf_stats``, the JSON ``/metrics``) stay off: nothing here reads
    them, and every read of that endpoint drains them.
    """
    doc = llmapi_model_yaml(llmapi_model_params(params))
    options = {k: v for k, v in doc.items() if k not in _TRTLLM_SERVE_FLAG_KEYS}
    if params.server.batch_scheduler_policy == "guaranteed_no_evict":
        # trtllm-serve's own scheduler_config has this policy (and its dynamic batch tuning, which a
        # YAML scheduler_config would replace): only another policy is passed
        del options["scheduler_config"]
    options["return_perf_metrics"] = True
    return options


def trtllm_serve_files(params: ServingParams) -> dict[str, str]:
    """The ConfigMap files of a ``trtllm-serve`` pod: only :data:`TRTLLM_SERVE_OPTIONS` (no Triton
    model repository)."""
    header = "# Rendered by trtllm-operator: trtllm-serve --extra_llm_api_options (LLM() arguments).\n"
    return {TRTLLM_SERVE_OPTIONS: header + yaml.safe_dump(trtllm_serve_options(params), sort_keys=False)}


def model_repository_files(params: ServingParams) -> dict[str, str]:
    """:func:`repository_files` checked by :func:`check_filled`: the files a deployment is served
    with (for the pytorch backend's ``api: openai``, :func:`trtllm_serve_files`). Errors:
    ``ValueError`` naming the file or the out-of-range setting (``pydantic.ValidationError`` is one)."""
    if params.backend == "pytorch" and params.server.api == "openai":
        return trtllm_serve_files(params)
    files = repository_files(params)
    if params.server.api != "triton":
        if params.backend != "tensorrt":
            raise ValueError(f"api {params.server.api} serves the tensorrt backend only (docs/serving.md)")
        files = openai_frontend_repository(files, params.server.served_model_name)
    check_filled(files)
    return files
