"""Every Kubernetes Event ``reason`` the operator posts, in one catalogue (docs/observability.md).

Events are notifications (``kubectl describe``, ``kubectl get events``); the status is the
contract. Reasons are stable CamelCase strings: alerting rules and runbooks may match on them.

Where reasons come from:

* literal reasons the handlers post are the constants below (:data:`ARTIFACT_RECORDED` …);
* LLMEngine phase/reason changes: the ``R_*`` constants of :mod:`trtllm_operator.decide.engine`
  and the build failure classes (:mod:`engine_builder.report` plus the operator's own in
  :mod:`trtllm_operator.decide.engine_failure`);
* LLMDeployment condition transitions (``Ready``, ``Progressing``, ``EngineIncompatible``): the
  condition reasons of :mod:`trtllm_operator.decide.deployment_status`;
* the autoscaler: scale steps, ``InsufficientGPU`` and the hpa/keda child objects;
* kopf itself: ``Logging`` (warnings and errors of kopf's per-object logger, e.g. a handler that
  raised).

:data:`REASONS` lists each reason once with the kind it is posted on, its type and when; the
unit test ``tests/unit/test_observability_events.py`` checks it against the reasons used in code
and against the table in docs/observability.md (:func:`reasons_table` renders that table).
Pure module (no Kubernetes access).
"""

from __future__ import annotations

from dataclasses import dataclass

from trtllm_operator.api.wire import DEPLOYMENT_KIND, ENGINE_KIND
from trtllm_operator.decide.autoscaler import MANUAL_SCALE_REVERTED
from trtllm_operator.decide.deployment_status import (
    REPLICAS_FAILING,
    REPLICAS_UNSCHEDULABLE,
    WORKLOAD_SCALE_REVERTED,
)
from trtllm_operator.decide.engine import (
    R_ARTIFACT_REUSED,
    R_BUILD_REPLACED,
    R_BUILD_RUNNING,
    R_BUILD_STARTED,
    R_BUILD_SUCCEEDED,
    R_BUILD_UNSCHEDULABLE,
    R_BUILDER_POD_FAILING,
    R_DOES_NOT_FIT,
    R_INVALID_SPEC,
    R_PLAN_WARNINGS,
    R_PVC_EXPANSION_REFUSED,
    R_PVC_EXPANSION_REQUESTED,
    R_QUEUED,
)
from trtllm_operator.decide.engine_failure import (
    REASON_ARTIFACT_MISSING,
    REASON_ARTIFACT_UNVERIFIED,
    REASON_UNKNOWN,
)
from trtllm_operator.decide.engine_jobs import R_BUILD_STOPPED
from trtllm_operator.decide.ownership import R_CHILD_CONFLICT
from trtllm_operator.decide.policy import R_ENDPOINT_NOT_ALLOWED, R_IMAGE_NOT_ALLOWED, R_SECRET_NOT_ALLOWED

# Literal reasons posted by the handlers.
ARTIFACT_RECORDED = "ArtifactRecorded"
ROLLED_BACK = "RolledBack"
SCALED_UP = "ScaledUp"
SCALED_DOWN = "ScaledDown"
BENCHMARK_STARTED = "BenchmarkStarted"
BENCHMARK_SUCCEEDED = "BenchmarkSucceeded"
BENCHMARK_FAILED = "BenchmarkFailed"
TUNING_RECOMMENDATION = "TuningRecommendation"
#: kopf posts warnings/errors of its per-object logger with this reason (settings.posting.level).
KOPF_LOGGING = "Logging"

ENGINE = ENGINE_KIND
DEPLOYMENT = DEPLOYMENT_KIND


@dataclass(frozen=True)
class EventReason:
    """One Event reason: the ``kind`` it is posted on, its ``type`` (Normal, Warning, or both
    written ``Normal/Warning``), the ``controller`` that posts it and ``when``."""

    reason: str
    kind: str
    type: str
    controller: str
    when: str


#: The builder's failure classes (report/exit code) and the operator's own, with what they mean.
BUILD_FAILURES: dict[str, str] = {
    "BadSpec": "the build spec is invalid for this model (the builder's plan stage)",
    "DownloadFailed": "fetching the model failed (network, storage)",
    "UnsupportedArchitecture": "the model architecture is not supported by the backend",
    "DoesNotFit": "weights + activations + KV cache exceed GPU memory",
    "GPUOutOfMemory": "CUDA out of memory during calibration or compile",
    "HostOutOfMemory": "the builder ran out of host memory (or its container was OOMKilled)",
    "ToolchainMissing": "the image lacks TensorRT-LLM / trtllm-build",
    "CompileFailed": "trtllm-build failed",
    "Timeout": "the builder or the Job's activeDeadlineSeconds ran out",
    "AuthFailed": "the model source refused the credentials",
    "ModelNotFound": "the model (or revision) does not exist",
    "InsufficientDisk": "not enough space in the work directory or artifact storage",
    "RequiresGPU": "a stage needs a GPU and the pod has none",
    "QuantizationFailed": "ModelOpt quantization/calibration failed",
    "ConversionFailed": "checkpoint conversion failed",
    "InternalError": "a bug in the builder (report attached)",
    REASON_UNKNOWN: "the Job failed and neither report nor exit code says why",
    REASON_ARTIFACT_MISSING: "the builder exited 0 but left no report naming a verified manifest; "
    "nothing recorded",
    REASON_ARTIFACT_UNVERIFIED: "the builder exited 0 but its report does not check out (engine key, "
    "artifact URI, manifest digest); nothing recorded",
}

_ENGINE_REASONS: tuple[EventReason, ...] = (
    EventReason(
        R_INVALID_SPEC,
        ENGINE,
        "Warning",
        "engine",
        "the spec is invalid; the message names the field and the fix",
    ),
    EventReason(
        R_DOES_NOT_FIT,
        ENGINE,
        "Warning",
        "engine",
        "the capacity plan does not fit the GPUs (before any build)",
    ),
    EventReason(
        R_PLAN_WARNINGS,
        ENGINE,
        "Warning",
        "engine",
        "the capacity plan fits but the planner warns (maxSeqLen above the model's context, maxBatchSize "
        "above the sequences the KV cache holds, maxNumTokens below the longest prompt): posted when "
        "the warnings change; they stay in status.plan.warnings",
    ),
    EventReason(
        "KVCacheTooSmall",
        DEPLOYMENT,
        "Warning",
        "deployment",
        "spec.server.kvCacheFreeGpuMemFraction or maxTokensInPagedKvCache leaves a KV cache smaller than "
        "one sequence of the engine's maxSeqLen (message: the tokens, and the smallest value that holds one)",
    ),
    EventReason(
        R_CHILD_CONFLICT,
        ENGINE,
        "Warning",
        "engine",
        "an object under the engine's names (Job, build spec, cache entry, PVC) is not the operator's: "
        "not modified, adopted or trusted",
    ),
    *(
        EventReason(reason, ENGINE, "Warning", "engine", what)
        for reason, what in (
            (R_SECRET_NOT_ALLOWED, "a referenced Secret is missing or lacks the opt-in label"),
            (R_IMAGE_NOT_ALLOWED, "spec.runtime.image is outside the admin's allowed registries"),
            (R_ENDPOINT_NOT_ALLOWED, "spec.storage.s3.endpoint is not an allowed S3 endpoint"),
        )
    ),
    EventReason(
        R_QUEUED, ENGINE, "Normal", "engine", "the concurrent-build limit is reached; the LLMEngine waits"
    ),
    EventReason(
        R_BUILD_STARTED, ENGINE, "Normal", "engine", "the builder Job was created (or its pod is starting)"
    ),
    EventReason(R_BUILD_RUNNING, ENGINE, "Normal", "engine", "the builder pod runs"),
    EventReason(R_BUILD_UNSCHEDULABLE, ENGINE, "Warning", "engine", "the builder pod cannot be scheduled"),
    EventReason(
        R_BUILDER_POD_FAILING,
        ENGINE,
        "Warning",
        "engine",
        "a builder pod container waits on what will not clear by itself (ErrImagePull, ImagePullBackOff, "
        "InvalidImageName, CreateContainerConfigError, CreateContainerError, CrashLoopBackOff): the "
        "kubelet's message and the field to fix",
    ),
    EventReason(
        R_BUILD_REPLACED,
        ENGINE,
        "Normal",
        "engine",
        "spec.gpu.resources changed while the builder pod was never scheduled: the Job is replaced",
    ),
    EventReason(
        R_BUILD_STOPPED,
        ENGINE,
        "Normal",
        "engine",
        "a running builder Job of the LLMEngine's previous engine key (an engine-defining edit, or the "
        "spec turned invalid) was deleted: no other LLMEngine wants that key in that storage; the message "
        "names the Job",
    ),
    EventReason(
        R_BUILD_SUCCEEDED, ENGINE, "Normal", "engine", "the builder Job completed; the LLMEngine is Ready"
    ),
    EventReason(R_ARTIFACT_REUSED, ENGINE, "Normal", "engine", "Ready from the engine cache, no build"),
    EventReason(
        ARTIFACT_RECORDED,
        ENGINE,
        "Normal",
        "engine",
        "the engine-cache index entry of a finished build was written",
    ),
    EventReason(
        R_PVC_EXPANSION_REQUESTED,
        ENGINE,
        "Normal",
        "engine",
        "spec.storage.createPVC.size was raised: the operator-created PVC's storage request was grown",
    ),
    EventReason(
        R_PVC_EXPANSION_REFUSED,
        ENGINE,
        "Warning",
        "engine",
        "the API server refused to grow the operator-created PVC (no StorageClass with "
        "allowVolumeExpansion: true, or the claim is not bound): the message and the fix",
    ),
    *(
        EventReason(reason, ENGINE, "Warning", "engine", f"the build failed: {what}")
        for reason, what in BUILD_FAILURES.items()
        if reason not in (R_DOES_NOT_FIT,)
    ),
    EventReason(
        BENCHMARK_STARTED, ENGINE, "Normal", "tuning", "the trtllm-bench Job of spec.benchmark was created"
    ),
    EventReason(
        BENCHMARK_SUCCEEDED,
        ENGINE,
        "Normal",
        "tuning",
        "the benchmark finished; status.benchmark has the curves",
    ),
    EventReason(BENCHMARK_FAILED, ENGINE, "Warning", "tuning", "the benchmark Job failed or left no summary"),
)

_DEPLOYMENT_REASONS: tuple[EventReason, ...] = (
    EventReason(
        "EngineNotFound",
        DEPLOYMENT,
        "Warning",
        "deployment",
        "spec.engineRef names no LLMEngine in the namespace (phase Pending; Degraded while pods of the "
        "previous engine key still serve, the message naming it)",
    ),
    EventReason(
        "EngineNotReady", DEPLOYMENT, "Normal", "deployment", "waiting for the LLMEngine to become Ready"
    ),
    EventReason(
        WORKLOAD_SCALE_REVERTED,
        DEPLOYMENT,
        "Warning",
        "deployment",
        "the serving Deployment/LeaderWorkerSet was scaled directly and set back to spec.replicas "
        "(message: which field owns the count and how to change it)",
    ),
    EventReason(
        "EngineFailed",
        DEPLOYMENT,
        "Warning",
        "deployment",
        "the referenced LLMEngine is Failed (message: its name and Ready reason); phase Failed, or "
        "Degraded while pods of the previous engine key still serve (the message names it)",
    ),
    EventReason(
        "EngineIncompatible",
        DEPLOYMENT,
        "Warning",
        "deployment",
        "server image or GPU do not match the engine; nothing rolled out",
    ),
    EventReason(
        "ImageMismatch",
        DEPLOYMENT,
        "Warning",
        "deployment",
        "EngineIncompatible=True: spec.server.image differs from the engine's runtime",
    ),
    EventReason(
        "GPUMismatch",
        DEPLOYMENT,
        "Warning",
        "deployment",
        "EngineIncompatible=True: the GPU differs from the engine's target",
    ),
    EventReason(
        "Compatible",
        DEPLOYMENT,
        "Normal",
        "deployment",
        "EngineIncompatible=False: image and GPU match the engine",
    ),
    EventReason(
        "InvalidSpec",
        DEPLOYMENT,
        "Warning",
        "deployment, autoscaler",
        "a serving or autoscaling field is invalid (message: field and fix)",
    ),
    EventReason(
        "InvalidServerSettings",
        DEPLOYMENT,
        "Warning",
        "deployment",
        "spec.server cannot be rendered into Triton's configuration",
    ),
    EventReason(
        "ArtifactUnsupported",
        DEPLOYMENT,
        "Warning",
        "deployment",
        "the engine's artifact location cannot be mounted",
    ),
    EventReason(
        "PagedContextFMHARequired",
        DEPLOYMENT,
        "Warning",
        "deployment",
        "enableChunkedContext asked of an engine built without paged context FMHA",
    ),
    EventReason(
        R_CHILD_CONFLICT,
        DEPLOYMENT,
        "Warning",
        "deployment",
        "a workload, Service, PDB or ConfigMap under the deployment's name is not its own: nothing written",
    ),
    *(
        EventReason(reason, DEPLOYMENT, "Warning", "deployment", what)
        for reason, what in (
            (R_SECRET_NOT_ALLOWED, "the engine's S3 Secret is missing or lacks the opt-in label"),
            (R_IMAGE_NOT_ALLOWED, "spec.server.image is outside the admin's allowed registries"),
            (R_ENDPOINT_NOT_ALLOWED, "the engine's S3 endpoint is not an allowed endpoint"),
        )
    ),
    EventReason(
        "LeaderWorkerSetRequired",
        DEPLOYMENT,
        "Warning",
        "deployment",
        "a replica spans nodes and the LeaderWorkerSet CRD is missing",
    ),
    EventReason(
        "ReplicasStarting",
        DEPLOYMENT,
        "Normal",
        "deployment",
        "replicas are starting (first rollout or scale-up)",
    ),
    EventReason(
        REPLICAS_UNSCHEDULABLE,
        DEPLOYMENT,
        "Warning",
        "deployment",
        "serving pods cannot be scheduled (PodScheduled=False, Unschedulable): how many and the "
        "scheduler's message",
    ),
    EventReason(
        REPLICAS_FAILING,
        DEPLOYMENT,
        "Warning",
        "deployment",
        "serving pod containers cannot start (ErrImagePull, ImagePullBackOff, InvalidImageName, "
        "CreateContainerConfigError, CreateContainerError, CrashLoopBackOff): how many, the kubelet's "
        "message and the field to fix",
    ),
    EventReason(
        "Scaling",
        DEPLOYMENT,
        "Normal",
        "deployment",
        "the replica count changed while the same engine keeps serving (Ready stays True)",
    ),
    EventReason("EngineRollout", DEPLOYMENT, "Normal", "deployment", "a new engine key is rolling out"),
    EventReason("AllReplicasReady", DEPLOYMENT, "Normal", "deployment", "every desired replica is Ready"),
    EventReason("ScaledToZero", DEPLOYMENT, "Normal", "deployment", "spec.replicas is 0 and no replica runs"),
    EventReason(
        "RolloutComplete", DEPLOYMENT, "Normal", "deployment", "Progressing=False: the rollout finished"
    ),
    EventReason(
        "ProgressDeadlineExceeded",
        DEPLOYMENT,
        "Warning",
        "deployment",
        "no rollout progress within spec.rollout.progressDeadlineSeconds",
    ),
    EventReason(
        ROLLED_BACK,
        DEPLOYMENT,
        "Normal/Warning",
        "deployment",
        "a failed rollout was rolled back to the previous engine (Warning when posted by the rollback)",
    ),
    EventReason(
        SCALED_UP,
        DEPLOYMENT,
        "Normal",
        "autoscaler",
        "the built-in autoscaler raised spec.replicas (message: from → to, reason)",
    ),
    EventReason(
        SCALED_DOWN, DEPLOYMENT, "Normal", "autoscaler", "the built-in autoscaler lowered spec.replicas"
    ),
    EventReason(
        MANUAL_SCALE_REVERTED,
        DEPLOYMENT,
        "Warning",
        "autoscaler",
        "the built-in autoscaler changed a spec.replicas set outside it (kubectl scale): the message "
        "says that spec.autoscaling owns the count and how to change it",
    ),
    EventReason(
        "InsufficientGPU",
        DEPLOYMENT,
        "Warning",
        "autoscaler",
        "a scale-up is refused: pods cannot be scheduled (no free GPU)",
    ),
    EventReason(
        "HorizontalPodAutoscalerCreated", DEPLOYMENT, "Normal", "autoscaler", "mode hpa: the HPA was created"
    ),
    EventReason(
        "ScaledObjectCreated", DEPLOYMENT, "Normal", "autoscaler", "mode keda: the ScaledObject was created"
    ),
    EventReason(
        "HorizontalPodAutoscalerDeleted",
        DEPLOYMENT,
        "Normal",
        "autoscaler",
        "the HPA the operator rendered was deleted: mode no longer hpa, or autoscaling turned off",
    ),
    EventReason(
        "ScaledObjectDeleted",
        DEPLOYMENT,
        "Normal",
        "autoscaler",
        "the ScaledObject the operator rendered was deleted: mode no longer keda, or autoscaling turned off",
    ),
    EventReason(
        "HorizontalPodAutoscalerConflict",
        DEPLOYMENT,
        "Warning",
        "autoscaler",
        "an HPA of that name exists and is not owned by this LLMDeployment",
    ),
    EventReason(
        "ScaledObjectConflict",
        DEPLOYMENT,
        "Warning",
        "autoscaler",
        "a ScaledObject of that name exists and is not owned by this LLMDeployment",
    ),
    EventReason("KEDANotInstalled", DEPLOYMENT, "Warning", "autoscaler", "mode keda without the KEDA CRDs"),
    EventReason(
        "CustomMetricsAPIMissing",
        DEPLOYMENT,
        "Warning",
        "autoscaler",
        "mode hpa without an APIService of custom.metrics.k8s.io (no prometheus-adapter): the HPA cannot "
        "read its Pods metrics",
    ),
    EventReason(
        "CustomMetricsAPIUnavailable",
        DEPLOYMENT,
        "Warning",
        "autoscaler",
        "mode hpa with the custom.metrics.k8s.io APIService registered but not Available (its adapter is "
        "down or unreachable)",
    ),
    EventReason(
        "AdmissionRefused",
        DEPLOYMENT,
        "Warning",
        "autoscaler",
        "admission refused the HPA / ScaledObject (a webhook's denial, e.g. KEDA's; a "
        "ValidatingAdmissionPolicy's; a webhook not reachable under `failurePolicy: Fail`); the message has "
        "its words and says what stays applied: nothing (a refused creation) or the object as last applied "
        "(a refused change), and that nothing the operator rendered scales when KEDA refused because "
        "another HPA or ScaledObject targets the deployment (Kubernetes' HPA controller stops both HPAs: "
        "AmbiguousSelector); once per change of the condition",
    ),
    EventReason(
        TUNING_RECOMMENDATION, DEPLOYMENT, "Normal", "tuning", "the set of tuning recommendations changed"
    ),
)

REASONS: tuple[EventReason, ...] = (
    *_ENGINE_REASONS,
    *_DEPLOYMENT_REASONS,
    EventReason(
        KOPF_LOGGING,
        "any",
        "Warning/Error",
        "kopf",
        "a handler logged a warning or raised (kopf's own Event)",
    ),
)


def reasons() -> frozenset[str]:
    """Every documented reason string."""
    return frozenset(r.reason for r in REASONS)


def reasons_table() -> str:
    """The Markdown table of docs/observability.md (one row per reason and kind)."""
    rows = ["| reason | object | type | posted by | when |", "| --- | --- | --- | --- | --- |"]
    rows += [f"| `{r.reason}` | {r.kind} | {r.type} | {r.controller} | {r.when} |" for r in REASONS]
    return "\n".join(rows)
