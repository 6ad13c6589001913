"""May this LLMDeployment be served from this LLMEngine, and how? One pure decision, before rendering.

:func:`plan_serving` settles everything the serving children need, in the order of the
controller's conditions, and stops at the first refusal (nothing is rendered for a refused
deployment: an incompatible engine is never rolled out):

1. compatibility gate — image and GPU product/SM
   (:func:`~trtllm_operator.decide.compatibility.engine_incompatibilities`);
2. partial-artifact gate — no compiled engine and no opt-in
   (:func:`~trtllm_operator.decide.compatibility.partial_artifact_refusal`);
3. the serving parameters (:func:`~trtllm_operator.decide.serving_params.serving_params`);
4. the client API — ``api: openai``/``both`` only where Triton's OpenAI frontend can serve the
   engine (:func:`openai_frontend_refusal`);
5. placement — Deployment, LeaderWorkerSet, or blocked
   (:func:`~trtllm_operator.decide.compatibility.decide_placement`);
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


def openai_frontend_refusal(params: ServingParams) -> tuple[str, str] | None:
    """Why Triton's OpenAI frontend (triton-inference-server/server r26.03 ``python/openai``, the
    26.03 images' release branch) cannot serve this deployment, or ``None``.

    - pytorch backend: the frontend sends the inflight_batcher_llm ensemble's inputs (``stream``,
      ``max_tokens``, ``return_num_input_tokens``, …: ``openai_frontend/engine/utils/triton.py``
      ``_create_trtllm_generate_request``), the LLM-API model declares ``streaming``,
      ``sampling_param_max_tokens``, … (engine_builder ``templates/llmapi/tensorrt_llm.pbtxt``), and
      Triton refuses undeclared inputs;
    - more than one GPU per replica: the operator runs such a replica as one ``tritonserver`` rank per
      GPU under ``mpirun`` (leader mode); the frontend runs Triton in its own Python process, and its
      README lists TensorRT-LLM leader mode as "Not currently supported" (only orchestrator mode).
    """
    api = params.server.api
    if api == "triton":
        return None
    if params.backend != "tensorrt":
        return (
            OPENAI_UNSUPPORTED,
            f"spec.server.api {api}: Triton's OpenAI frontend cannot serve the {params.backend} backend's "
            "LLM-API model (it sends the ensemble's inputs stream/max_tokens, the model declares "
            "streaming/sampling_param_max_tokens); set api: triton, or serve a tensorrt-backend engine",
        )
    if params.world_size > 1:
        return (
            OPENAI_UNSUPPORTED,
            f"spec.server.api {api}: Triton's OpenAI frontend serves one Triton process, but this engine "
            f"needs {params.world_size} ranks (tensor {params.tensor_parallelism} × pipeline "
            f"{params.pipeline_parallelism}) under mpirun (leader mode, unsupported by the frontend); set "
            "api: triton, or serve an engine with tensor and pipeline parallelism 1",
        )
    return None


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
    refusal = openai_frontend_refusal(params)
    if refusal is not None:
        return ServingRefusal(params=params, blocked=refusal)
    placement = decide_placement(params.world_size, gpus_per_node, lws_installed=lws_installed)
    if placement.blocked:
        return ServingRefusal(params=params, blocked=("LeaderWorkerSetRequired", placement.blocked))
    try:
        files = model_repository_files(params)
    except ValueError as exc:
        return ServingRefusal(params=params, blocked=("InvalidServerSettings", f"spec.server: {exc}"))
    return ServingPlan(params, placement, files)
