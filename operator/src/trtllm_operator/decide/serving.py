"""May this LLMDeployment be served from this LLMEngine, and how? One pure decision, before rendering.

:func:`plan_serving` settles everything the serving children need, in the order of the
controller's conditions, and stops at the first refusal (nothing is rendered for a refused
deployment: an incompatible engine is never rolled out):

1. compatibility gate — image and GPU product/SM
   (:func:`~trtllm_operator.decide.compatibility.engine_incompatibilities`);
2. partial-artifact gate — no compiled engine and no opt-in
   (:func:`~trtllm_operator.decide.compatibility.partial_artifact_refusal`);
3. the serving parameters (:func:`~trtllm_operator.decide.serving_params.serving_params`);
4. the client API — ``api: openai``/``both`` only where its frontend can serve the engine: Triton's
   OpenAI frontend (tensorrt backend) or ``trtllm-serve`` (pytorch backend, ``api: openai``)
   (:func:`openai_frontend_refusal`);
5. placement — Deployment, LeaderWorkerSet, or blocked
   (:func:`~trtllm_operator.decide.compatibility.decide_placement`); a LeaderWorkerSet takes a
   ``maxSurge`` of at most 100% (:func:`lws_max_surge_refusal`);
6. the Triton configuration files from the server settings
   (:func:`~trtllm_operator.decide.triton_config.model_repository_files`).

The result, a :class:`ServingPlan`, is what ``render/`` turns into manifests
(:func:`trtllm_operator.render.children.render_plan`); a :class:`ServingRefusal` becomes the
``EngineIncompatible`` condition or a blocked ``Ready=False`` with the reason and the fix.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from trtllm_operator.decide.compatibility import (
    Incompatibility,
    Placement,
    decide_placement,
    engine_incompatibilities,
    gpu_product_aliases,
    partial_artifact_refusal,
)
from trtllm_operator.decide.serving_params import ServingInputError, ServingParams, serving_params
from trtllm_operator.decide.triton_config import model_repository_files


@dataclass(frozen=True)
class ServingPlan:
    """A deployment settled for rendering: its parameters, where a replica runs, and the Triton
    configuration files (``{repository-relative path: text}``)."""

    params: ServingParams
    placement: Placement
    files: Mapping[str, str]


@dataclass(frozen=True)
class ServingRefusal:
    """Why nothing is rendered: ``incompatibilities`` (→ ``EngineIncompatible``) or ``blocked`` =
    ``(reason, message)``. ``params`` is set when the refusal came after they were settled."""

    incompatibilities: Sequence[Incompatibility] = field(default_factory=tuple)
    blocked: tuple[str, str] | None = None
    params: ServingParams | None = None


#: ``ServingRefusal.blocked`` reason for an ``api`` the engine cannot be served with.
OPENAI_UNSUPPORTED = "OpenAIFrontendUnsupported"


def openai_frontend_refusal(params: ServingParams, *, autoscaling: bool = False) -> tuple[str, str] | None:
    """Why the deployment's OpenAI API cannot be served as specified, or ``None``.

    tensorrt backend — Triton's OpenAI frontend (triton-inference-server/server r26.03
    ``python/openai``, the 26.03 images' release branch):

    - more than one GPU per replica: the operator runs such a replica as one ``tritonserver`` rank per
      GPU under ``mpirun`` (leader mode); the frontend runs Triton in its own Python process, and its
      README lists TensorRT-LLM leader mode as "Not currently supported" (only orchestrator mode).

    pytorch backend — ``trtllm-serve`` (:func:`trtllm_pytorch_refusal`). Triton's frontend cannot
    serve its LLM-API model: the frontend sends the inflight_batcher_llm ensemble's inputs
    (``stream``, ``max_tokens``, ``return_num_input_tokens``, …: ``openai_frontend/engine/utils/triton.py``
    ``_create_trtllm_generate_request``), the model declares ``streaming``,
    ``sampling_param_max_tokens``, … (engine_builder ``templates/llmapi/tensorrt_llm.pbtxt``), and
    Triton refuses undeclared inputs.
    """
    api = params.server.api
    if api == "triton":
        return None
    if params.backend != "tensorrt":
        return trtllm_serve_refusal(params, autoscaling=autoscaling)
    if params.world_size > 1:
        return (
            OPENAI_UNSUPPORTED,
            f"spec.server.api {api}: Triton's OpenAI frontend serves one Triton process, but this engine "
            f"needs {params.world_size} ranks (tensor {params.tensor_parallelism} × pipeline "
            f"{params.pipeline_parallelism}) under mpirun (leader mode, unsupported by the frontend); set "
            "api: triton, or serve an engine with tensor and pipeline parallelism 1",
        )
    return None


#: ``spec.server`` settings of Triton that ``trtllm-serve`` has no counterpart for, with their
#: defaults: a deployment setting one is refused rather than served without it.
TRITON_ONLY_SETTINGS: tuple[tuple[str, str, object], ...] = (
    ("batchingStrategy", "batching_strategy", "inflight_fused_batching"),
    ("maxQueueDelayMicroseconds", "max_queue_delay_microseconds", 0),
    ("maxQueueSize", "max_queue_size", 0),
    ("openai.defaultMaxTokens", "default_max_tokens", None),
)


def trtllm_serve_refusal(params: ServingParams, *, autoscaling: bool) -> tuple[str, str] | None:
    """Why ``trtllm-serve`` (TensorRT-LLM's OpenAI server, the pytorch backend's ``api: openai``,
    :func:`trtllm_operator.render.serving.trtllm_serve_args`) cannot serve this deployment, or ``None``.

    - ``api: both``: trtllm-serve serves the OpenAI routes only (``openai_server.py``
      ``register_routes``), no KServe v2;
    - a replica over several nodes: trtllm-serve starts the ranks of one node itself; across nodes it
      needs ``trtllm-llmapi-launch`` under ``mpirun``, which the operator does not render for it;
    - ``decoupled: false``: trtllm-serve streams every request that asks (``stream: true``); it has no
      non-streaming mode, so the ``Streaming`` condition can only be true;
    - a Triton setting it has no counterpart for (:data:`TRITON_ONLY_SETTINGS`);
    - ``spec.routing.inferencePool``: the endpoint picker scrapes ``/metrics`` on the target port,
      which trtllm-serve serves as JSON iteration stats (drained by every read), without the queue
      and KV-cache families the picker reads;
    - ``spec.autoscaling.enabled``: trtllm-serve 1.2 exports neither signal the autoscaler scales on
      (its Prometheus families are request counters and latency histograms: ``request_success_total``,
      ``e2e_request_latency_seconds``, ``time_to_first_token_seconds``,
      ``time_per_output_token_seconds``, ``request_queue_time_seconds``; docs/serving.md).
    """
    api = params.server.api
    fix = "or set api: triton (the LLM-API model in Triton, KServe v2)"
    if api == "both":
        return (
            OPENAI_UNSUPPORTED,
            "spec.server.api both: the pytorch backend's OpenAI API is trtllm-serve (TensorRT-LLM's OpenAI "
            "server), which has no KServe v2 frontend; set api: openai (OpenAI only) " + fix,
        )
    if params.multi_node:
        return (
            OPENAI_UNSUPPORTED,
            f"spec.server.api openai: a replica of {params.world_size} GPUs spans "
            f"{params.nodes_per_replica} nodes of {params.gpus_per_node}; trtllm-serve is rendered for one "
            "node (it starts that node's ranks itself), not under mpirun across nodes; serve an engine "
            "that fits one node, " + fix,
        )
    if not params.server.decoupled:
        return (
            OPENAI_UNSUPPORTED,
            "spec.server.decoupled is false, but trtllm-serve (the pytorch backend's api: openai) streams "
            "every request that asks (stream: true) and has no non-streaming mode; set "
            "spec.server.decoupled: true, " + fix,
        )
    for field_name, attr, default in TRITON_ONLY_SETTINGS:
        value = getattr(params.server, attr)
        if value != default:
            return (
                OPENAI_UNSUPPORTED,
                f"spec.server.{field_name} is {value}, a Triton setting trtllm-serve (the pytorch backend's "
                f"api: openai) has no counterpart for; remove it, " + fix,
            )
    if params.inference_pool is not None:
        return (
            OPENAI_UNSUPPORTED,
            "spec.routing.inferencePool: the endpoint picker scrapes /metrics on the pool's target port, "
            "which trtllm-serve serves as JSON iteration stats without the queue and KV-cache families "
            "the picker reads; disable routing.inferencePool, or serve a tensorrt-backend engine",
        )
    if autoscaling:
        return (
            OPENAI_UNSUPPORTED,
            "spec.autoscaling.enabled: trtllm-serve (the pytorch backend's api: openai) exports neither "
            "autoscaling signal (activeRequestUtilization, kvCacheUtilization): its Prometheus families "
            "are request counters and latency histograms; disable autoscaling, " + fix,
        )
    return None


def lws_max_surge_refusal(params: ServingParams, placement: Placement) -> str | None:
    """Why ``spec.rollout.maxSurge`` cannot go to this replica's LeaderWorkerSet, or None. The API
    admits a percentage above 100% because a Deployment does (kubernetes@v1.34.4
    ``pkg/apis/apps/validation/validation.go`` ``ValidateRollingUpdateDeployment`` caps only
    ``maxUnavailable``), but LeaderWorkerSet's webhook refuses it (sigs.k8s.io/lws@v0.9.0
    ``pkg/webhooks/leaderworkerset_webhook.go``: ``isNotMoreThan100Percent`` on ``maxSurge`` as on
    ``maxUnavailable``): refused here, naming the field, instead of a create the API server rejects."""
    surge = params.rollout.max_surge
    if placement.kind != "LeaderWorkerSet" or not isinstance(surge, str) or int(surge.rstrip("%")) <= 100:
        return None
    return (
        f"spec.rollout.maxSurge {surge}: a replica of {params.world_size} GPUs spans "
        f"{placement.nodes_per_replica} nodes and is served as a LeaderWorkerSet, which takes a maxSurge of "
        "at most 100% (its webhook refuses more; a Deployment would take it); set maxSurge to 100% or less"
    )


def plan_serving(
    deployment: Mapping[str, Any], engine: Mapping[str, Any], *, gpus_per_node: int, lws_installed: bool
) -> ServingPlan | ServingRefusal:
    """Decide how the Ready ``engine`` is served for ``deployment`` (raw API objects); see the
    module docstring for the order of checks. Never raises for bad input."""
    problems = engine_incompatibilities(deployment, engine)
    if problems:
        return ServingRefusal(incompatibilities=problems)
    refusal = partial_artifact_refusal(
        str((engine.get("metadata") or {}).get("name") or ""),
        (engine.get("status") or {}).get("artifact"),
        (deployment.get("metadata") or {}).get("annotations"),
    )
    if refusal is not None:
        return ServingRefusal(blocked=refusal)
    try:
        product = ((engine.get("spec") or {}).get("gpu") or {}).get("product", "")
        params = serving_params(
            deployment, engine, gpus_per_node=gpus_per_node, gpu_product_aliases=gpu_product_aliases(product)
        )
    except ServingInputError as exc:
        return ServingRefusal(blocked=(exc.reason, str(exc)))
    except ValidationError as exc:  # the API server validated the schema; this is a version skew
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"])
        return ServingRefusal(blocked=("InvalidSpec", f"spec.{where}: {err['msg']}"))
    autoscaling = bool(((deployment.get("spec") or {}).get("autoscaling") or {}).get("enabled"))
    refusal = openai_frontend_refusal(params, autoscaling=autoscaling)
    if refusal is not None:
        return ServingRefusal(params=params, blocked=refusal)
    placement = decide_placement(params.world_size, gpus_per_node, lws_installed=lws_installed)
    if placement.blocked:
        return ServingRefusal(params=params, blocked=("LeaderWorkerSetRequired", placement.blocked))
    surge = lws_max_surge_refusal(params, placement)
    if surge is not None:
        return ServingRefusal(params=params, blocked=("InvalidSpec", surge))
    try:
        files = model_repository_files(params)
    except ValueError as exc:
        return ServingRefusal(params=params, blocked=("InvalidServerSettings", f"spec.server: {exc}"))
    return ServingPlan(params, placement, files)
