"""Every child of an LLMDeployment, rendered from a settled plan — one pure entry point.

Used by the controller (which then creates/patches the result) and by ``trtllm-operator render``
(which prints it for GitOps review), so both always agree. The decision comes first and is not
made here: :func:`~trtllm_operator.decide.serving.plan_serving` runs the compatibility gate, the
partial-artifact gate, the serving parameters, placement and the Triton configuration files, and
either refuses or returns a :class:`~trtllm_operator.decide.serving.ServingPlan`;
:func:`render_plan` only turns that plan into manifests.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from trtllm_operator.decide.compatibility import Incompatibility
from trtllm_operator.decide.serving import ServingPlan, ServingRefusal, plan_serving
from trtllm_operator.decide.serving_params import ServingParams
from trtllm_operator.render.deployment import desired_deployment
from trtllm_operator.render.inferencepool import desired_inference_pool
from trtllm_operator.render.leaderworkerset import desired_leaderworkerset
from trtllm_operator.render.model_repository import desired_model_repository
from trtllm_operator.render.network_policy import ServingNetwork, desired_network_policy
from trtllm_operator.render.pdb import desired_pdb
from trtllm_operator.render.service import desired_service


@dataclass
class Children:
    """Rendered children (``configmap``, ``workload``, ``service``, ``pdb``, and the optional
    ``inference_pool``) or why not.

    ``incompatibilities`` non-empty → ``EngineIncompatible``; ``blocked`` = ``(reason, message)``
    for a replica that cannot be placed or rendered. ``params`` is set whenever they were settled.
    """

    params: ServingParams | None = None
    configmap: dict[str, Any] | None = None
    workload: dict[str, Any] | None = None
    service: dict[str, Any] | None = None
    pdb: dict[str, Any] | None = None
    inference_pool: dict[str, Any] | None = None
    network_policy: dict[str, Any] | None = None
    incompatibilities: list[Incompatibility] = field(default_factory=list)
    blocked: tuple[str, str] | None = None

    def manifests(self) -> list[dict[str, Any]]:
        found = (
            self.configmap,
            self.workload,
            self.service,
            self.pdb,
            self.inference_pool,
            self.network_policy,
        )
        return [m for m in found if m is not None]


def render_plan(plan: ServingPlan, network: ServingNetwork | None = None) -> Children:
    """The manifests of a settled plan: the model-repository ConfigMap, the workload its placement
    names (Deployment or LeaderWorkerSet), the Service, the PodDisruptionBudget, with
    ``spec.routing.inferencePool`` the InferencePool, and with ``network`` (the operator's settings;
    None: ``TRTLLM_OPERATOR_SERVING_NETWORK_POLICY=false``) the NetworkPolicy."""
    params = plan.params
    configmap = desired_model_repository(params, plan.files)
    if plan.placement.kind == "LeaderWorkerSet":
        workload = desired_leaderworkerset(params, configmap)
    else:
        workload = desired_deployment(params, configmap)
    return Children(
        params=params,
        configmap=configmap,
        workload=workload,
        service=desired_service(params),
        pdb=desired_pdb(params),
        inference_pool=desired_inference_pool(params),
        network_policy=None if network is None else desired_network_policy(params, network),
    )


def desired_children(
    deployment: Mapping[str, Any], engine: Mapping[str, Any], *, gpus_per_node: int, lws_installed: bool
) -> Children:
    """Decide (:func:`~trtllm_operator.decide.serving.plan_serving`), then render
    (:func:`render_plan`) everything for a Ready engine: raw API objects in, manifests out."""
    plan = plan_serving(deployment, engine, gpus_per_node=gpus_per_node, lws_installed=lws_installed)
    if isinstance(plan, ServingRefusal):
        return Children(
            params=plan.params, incompatibilities=list(plan.incompatibilities), blocked=plan.blocked
        )
    return render_plan(plan)
