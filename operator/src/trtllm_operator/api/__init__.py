"""The ``llm.trtllm-operator.dev/v1alpha1`` API: typed models of ``LLMEngine`` and ``LLMDeployment``.

The group, version, kinds and plurals (re-exported here) live with every other wire name in
:mod:`trtllm_operator.api.wire`.

These pydantic models are the single source of truth: the CRDs in ``crds/`` are generated from them
(:mod:`trtllm_operator.api.crd`, ``trtllm-operator crds``). Parse a raw object from the API server
with ``LLMEngineSpec.model_validate(body["spec"])``; build a status patch with
``status.model_dump(by_alias=True, exclude_none=True, mode="json")``.
"""

from __future__ import annotations

from trtllm_operator.api.common import Condition, ConditionStatus, SecretKeyRef, Toleration
from trtllm_operator.api.deployment import (
    AutoscalingSpec,
    AutoscalingStatus,
    LLMDeploymentSpec,
    LLMDeploymentStatus,
    ScalingDecision,
    ServerSpec,
)
from trtllm_operator.api.engine import (
    AWQ_FORMATS,
    ArtifactStatus,
    BuildStatus,
    EngineBuildSpec,
    LLMEngineSpec,
    LLMEngineStatus,
    ModelSpec,
    PlanStatus,
    QuantizationSpec,
    StorageSpec,
)
from trtllm_operator.api.wire import (
    API_VERSION,
    CATEGORY,
    DEPLOYMENT_KIND,
    DEPLOYMENT_PLURAL,
    DEPLOYMENT_SHORT_NAMES,
    DEPLOYMENT_SINGULAR,
    ENGINE_KIND,
    ENGINE_PLURAL,
    ENGINE_SHORT_NAMES,
    ENGINE_SINGULAR,
    GROUP,
    VERSION,
)

# Condition types. Both kinds: Ready, Progressing, Degraded.
CONDITION_READY = "Ready"
CONDITION_PROGRESSING = "Progressing"
CONDITION_DEGRADED = "Degraded"
#: LLMEngine: the capacity plan fits the target GPU.
CONDITION_PLANNED = "Planned"
#: LLMEngine (``spec.storage.createPVC``): the operator-created claim requests ``createPVC.size``
#: (written once a growth was asked for; False with the API server's refusal).
CONDITION_STORAGE_EXPANDED = "StorageExpanded"
#: LLMDeployment: the runtime image or GPU does not match the engine's manifest.
CONDITION_ENGINE_INCOMPATIBLE = "EngineIncompatible"
#: LLMDeployment: desired replicas cannot all be scheduled (e.g. not enough GPUs) or hit maxReplicas.
CONDITION_SCALING_LIMITED = "ScalingLimited"
#: LLMDeployment: the InferencePool of ``spec.routing.inferencePool`` is applied (docs/serving.md).
CONDITION_ROUTED = "Routed"
#: LLMDeployment: whether requests may stream (``spec.server.decoupled``; docs/serving.md).
CONDITION_STREAMING = "Streaming"

__all__ = [
    "API_VERSION",
    "AWQ_FORMATS",
    "CATEGORY",
    "CONDITION_DEGRADED",
    "CONDITION_ENGINE_INCOMPATIBLE",
    "CONDITION_PLANNED",
    "CONDITION_PROGRESSING",
    "CONDITION_READY",
    "CONDITION_ROUTED",
    "CONDITION_SCALING_LIMITED",
    "CONDITION_STORAGE_EXPANDED",
    "CONDITION_STREAMING",
    "DEPLOYMENT_KIND",
    "DEPLOYMENT_PLURAL",
    "DEPLOYMENT_SHORT_NAMES",
    "DEPLOYMENT_SINGULAR",
    "ENGINE_KIND",
    "ENGINE_PLURAL",
    "ENGINE_SHORT_NAMES",
    "ENGINE_SINGULAR",
    "GROUP",
    "VERSION",
    "ArtifactStatus",
    "AutoscalingSpec",
    "AutoscalingStatus",
    "BuildStatus",
    "Condition",
    "ConditionStatus",
    "EngineBuildSpec",
    "LLMDeploymentSpec",
    "LLMDeploymentStatus",
    "LLMEngineSpec",
    "LLMEngineStatus",
    "ModelSpec",
    "PlanStatus",
    "QuantizationSpec",
    "ScalingDecision",
    "SecretKeyRef",
    "ServerSpec",
    "StorageSpec",
    "Toleration",
]
