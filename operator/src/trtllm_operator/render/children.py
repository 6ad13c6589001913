"""Every child of an LLMDeployment, or the reason there are none — one pure entry point.

Used by the controller (which then creates/patches the result) and by ``trtllm-operator render``
(which prints it for GitOps review), so both always agree. The order of checks is the order of the
controller's conditions: compatibility gate (image, GPU product) → partial-artifact gate (no
compiled engine, no opt-in) → placement (Deployment, LeaderWorkerSet or blocked) → rendering
(server settings into Triton files). Nothing is rendered when an earlier check fails: an
incompatible engine is never rolled out.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from engine_builder.planner import PlanInputError, lookup
from trtllm_operator.decide.compatibility import (
    COMPATIBLE_IMAGES_ANNOTATION,
    Incompatibility,
    affinity_incompatibility,
    check_compatibility,
    decide_placement,
    parse_compatible_images,
    partial_artifact_refusal,
)
from trtllm_operator.render.deployment import desired_deployment
from trtllm_operator.render.leaderworkerset import desired_leaderworkerset
from trtllm_operator.render.model_repository import desired_model_repository
from trtllm_operator.render.pdb import desired_pdb
from trtllm_operator.render.service import desired_service
from trtllm_operator.render.serving import (
    GPU_PRODUCT_LABEL,
    ServingInputError,
    ServingParams,
    serving_params,
)


@dataclass
class Children:
    """Rendered children (``configmap``, ``workload``, ``service``, ``pdb``) or why not.

    ``incompatibilities`` non-empty → ``EngineIncompatible``; ``blocked`` = ``(reason, message)``
    for a replica that cannot be placed or rendered. ``params`` is set whenever rendering got that far.
    """

    params: ServingParams | None = None
    configmap: dict[str, Any] | None = None
    workload: dict[str, Any] | None = None
    service: dict[str, Any] | None = None
    pdb: dict[str, Any] | None = None
    incompatibilities: list[Incompatibility] = field(default_factory=list)
    blocked: tuple[str, str] | None = None

    def manifests(self) -> list[dict[str, Any]]:
        return [m for m in (self.configmap, self.workload, self.service, self.pdb) if m is not None]


def _catalog(product: str | None) -> tuple[str | None, int | None]:
    """``(canonical product, SM)`` from the GPU catalog; the product as given when unknown."""
    if not product:
        return None, None
    try:
        gpu = lookup(product)
    except PlanInputError:
        return product, None
    return gpu.product, gpu.sm


def gpu_product_aliases(product: str) -> tuple[str, ...]:
    """Node-label spellings of ``product`` besides itself (the catalog's canonical name)."""
    canonical, _ = _catalog(product)
    return (canonical,) if canonical and canonical != product else ()


def engine_incompatibilities(
    deployment: Mapping[str, Any], engine: Mapping[str, Any]
) -> list[Incompatibility]:
    """The compatibility gate for raw objects (image vs ``spec.runtime.image``, GPU product/SM).

    The deployment pins a product through ``spec.scheduling.nodeSelector["nvidia.com/gpu.product"]``
    (it must be one of the node-label values the pods require: the engine's product or its catalog
    alias) and can exclude it through its required node affinity; compatible images are declared with
    the annotation :data:`COMPATIBLE_IMAGES_ANNOTATION`.
    """
    dspec, espec = deployment.get("spec") or {}, engine.get("spec") or {}
    engine_image = (espec.get("runtime") or {}).get("image", "")
    server_image = (dspec.get("server") or {}).get("image") or engine_image
    engine_product = (espec.get("gpu") or {}).get("product", "")
    scheduling = dspec.get("scheduling") or {}
    dep_product = (scheduling.get("nodeSelector") or {}).get(GPU_PRODUCT_LABEL)
    annotations = (deployment.get("metadata") or {}).get("annotations") or {}
    engine_canonical, engine_sm = _catalog(engine_product)
    _, dep_sm = _catalog(dep_product)
    products = (engine_product, *gpu_product_aliases(engine_product))
    problems = check_compatibility(
        server_image=server_image,
        engine_runtime_image=engine_image,
        engine_gpu_product=engine_canonical or engine_product,
        deployment_gpu_product=dep_product,
        engine_sm=engine_sm,
        deployment_sm=dep_sm,
        compatible_images=parse_compatible_images(annotations.get(COMPATIBLE_IMAGES_ANNOTATION)),
        engine_gpu_products=products,
    )
    dead = affinity_incompatibility(scheduling.get("affinity"), products, GPU_PRODUCT_LABEL)
    return [*problems, dead] if dead else problems


def desired_children(
    deployment: Mapping[str, Any], engine: Mapping[str, Any], *, gpus_per_node: int, lws_installed: bool
) -> Children:
    """Render everything for a Ready engine (raw API objects in, manifests out)."""
    problems = engine_incompatibilities(deployment, engine)
    if problems:
        return Children(incompatibilities=problems)
    refusal = partial_artifact_refusal(
        str((engine.get("metadata") or {}).get("name") or ""),
        (engine.get("status") or {}).get("artifact"),
        (deployment.get("metadata") or {}).get("annotations"),
    )
    if refusal is not None:
        return Children(blocked=refusal)
    try:
        product = ((engine.get("spec") or {}).get("gpu") or {}).get("product", "")
        params = serving_params(
            deployment, engine, gpus_per_node=gpus_per_node, gpu_product_aliases=gpu_product_aliases(product)
        )
    except ServingInputError as exc:
        return Children(blocked=(exc.reason, str(exc)))
    except ValidationError as exc:  # the API server validated the schema; this is a version skew
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"])
        return Children(blocked=("InvalidSpec", f"spec.{where}: {err['msg']}"))
    placement = decide_placement(params.world_size, gpus_per_node, lws_installed=lws_installed)
    if placement.blocked:
        return Children(params=params, blocked=("LeaderWorkerSetRequired", placement.blocked))
    try:
        configmap = desired_model_repository(params)
    except ValueError as exc:
        return Children(params=params, blocked=("InvalidServerSettings", f"spec.server: {exc}"))
    if placement.kind == "LeaderWorkerSet":
        workload = desired_leaderworkerset(params, configmap)
    else:
        workload = desired_deployment(params, configmap)
    return Children(
        params=params,
        configmap=configmap,
        workload=workload,
        service=desired_service(params),
        pdb=desired_pdb(params),
    )
