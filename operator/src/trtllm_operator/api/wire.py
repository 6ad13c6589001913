"""Wire names: every API group, version, kind, plural, label, annotation and data key the operator
writes to or matches in the cluster, in one place.

The operator's objects are found again by these strings (label selectors, ownerReferences, kopf
handler registrations, ``kubectl get -l …`` in the docs), so a name defined twice is a name that
will one day differ. As LeaderWorkerSet keeps its label keys in its API package
(kubernetes-sigs/lws ``api/leaderworkerset/v1/leaderworkerset_types.go``), every module reads them
from here: ``api/`` (the CRDs), ``decide/``, ``render/``, ``kube/``, ``handlers/``, ``commands/``.

Names another project owns are listed here too, each with the upstream source that defines it, so
that the operator's own code never spells them again.

Pure constants: no imports from the rest of the package (importable from every layer).
"""

from __future__ import annotations

# ------------------------------------------------------------------------------ our API
GROUP = "llm.trtllm-operator.dev"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"
#: ``kubectl get llm`` lists both kinds.
CATEGORY = "llm"

ENGINE_KIND = "LLMEngine"
ENGINE_PLURAL = "llmengines"
ENGINE_SINGULAR = "llmengine"
ENGINE_SHORT_NAMES = ("llme",)

DEPLOYMENT_KIND = "LLMDeployment"
DEPLOYMENT_PLURAL = "llmdeployments"
DEPLOYMENT_SINGULAR = "llmdeployment"
DEPLOYMENT_SHORT_NAMES = ("llmd",)

#: The operator's name: ``app.kubernetes.io/part-of`` of the CRDs, the Events' reporting component
#: and the default ``fieldManager`` of every write.
OPERATOR = "trtllm-operator"
#: ``app.kubernetes.io/managed-by`` of every object the operator creates.
MANAGED_BY = OPERATOR

# ------------------------------------------------------------------------------ our labels
#: The engine key: the full 64 hex digits on builder Jobs and cache entries (``key[:63]`` as a label
#: value), the first :data:`SHORT_KEY_LEN` on serving pods. Also an annotation (full key).
LABEL_ENGINE_KEY = f"{GROUP}/engine-key"
#: The artifact storage's 16-hex-digit id (builder Jobs, cache entries, artifact PVCs).
LABEL_STORAGE_ID = f"{GROUP}/storage-id"
#: The LLMEngine a builder Job, benchmark Job or artifact PVC belongs to.
LABEL_ENGINE = f"{GROUP}/engine"
#: The LLMDeployment a serving child or pod belongs to (the workload selector, ``status.selector``).
LABEL_DEPLOYMENT = f"{GROUP}/deployment"

#: Serving pods whose main process is not Triton carry it: ``trtllm-serve`` (:data:`FRONTEND_TRTLLM_SERVE`,
#: the pytorch backend's ``api: openai``), whose Prometheus text is at ``/prometheus/metrics``, not
#: ``/metrics`` (the chart's serving PodMonitor keeps and drops targets on it).
LABEL_FRONTEND = f"{GROUP}/frontend"
FRONTEND_TRTLLM_SERVE = "trtllm-serve"

#: Serving pods carry the first 16 hex digits of their engine key: label values are limited to 63
#: characters, and 64 bits are plenty to tell one deployment's rollouts apart.
SHORT_KEY_LEN = 16

# Kubernetes' recommended labels
# (https://kubernetes.io/docs/concepts/overview/working-with-objects/common-labels/).
LABEL_NAME = "app.kubernetes.io/name"
LABEL_INSTANCE = "app.kubernetes.io/instance"
LABEL_COMPONENT = "app.kubernetes.io/component"
LABEL_PART_OF = "app.kubernetes.io/part-of"
LABEL_MANAGED_BY = "app.kubernetes.io/managed-by"

#: ``app.kubernetes.io/component`` values.
COMPONENT_BUILDER = "engine-builder"
COMPONENT_ARTIFACT = "engine-artifact"
COMPONENT_STORAGE = "engine-storage"
COMPONENT_BENCHMARK = "engine-benchmark"
COMPONENT_SERVER = "server"
COMPONENT_MODEL_REPOSITORY = "model-repository"

# ------------------------------------------------------------------------------ our annotations
#: The full engine key (pod templates, builder and benchmark Jobs, cache entries).
ANNOTATION_ENGINE_KEY = f"{GROUP}/engine-key"
#: Pod template: sha256 of everything rendered into the pod's files and command.
ANNOTATION_CONFIG_HASH = f"{GROUP}/config-hash"
#: A child: sha256 of the manifest the operator rendered for it (patched only when it changes).
ANNOTATION_RENDERED_HASH = f"{GROUP}/rendered-hash"
#: Workload: the ``spec.replicas`` the operator last wrote to it, set in the same request as that
#: count and never hashed (an older workload without it gets it with its next scale, not by a write
#: of its own). A live count that differs from it was written by someone else: a write through the
#: ``/scale`` subresource (``kubectl scale``, an HPA) changes ``spec.replicas`` and nothing of
#: ``metadata.annotations`` (kubernetes ``pkg/registry/apps/deployment/storage/storage.go``
#: ``scaleUpdatedObjectInfo.UpdatedObject``: "move replicas/resourceVersion fields to object").
ANNOTATION_REPLICAS_WRITTEN = f"{GROUP}/replicas-written"
#: Workload: the engine key whose rollout failed and was rolled back, why, and the rendered hash
#: of the failed rendering (held back until it changes).
ANNOTATION_ROLLED_BACK_FROM = f"{GROUP}/rolled-back-from"
ANNOTATION_ROLLBACK_REASON = f"{GROUP}/rollback-reason"
ANNOTATION_ROLLED_BACK_HASH = f"{GROUP}/rolled-back-hash"
#: LLMDeployment, set by the user: engine runtime images the server image can load (comma-separated).
ANNOTATION_COMPATIBLE_IMAGES = f"{GROUP}/compatible-runtime-images"
#: LLMDeployment, set by the user: ``"true"`` rolls out a partial artifact (simulated clusters, tests).
ANNOTATION_ALLOW_PARTIAL_ARTIFACT = f"{GROUP}/allow-partial-artifact"
#: Prefix of kopf's own bookkeeping annotations (progress and diff-base storage).
KOPF_ANNOTATION_PREFIX = "kopf.trtllm-operator.dev"
#: The annotations of its own object each kind's status decision reads (kind → keys): its status
#: write is refused when one of them changed since the copy it decided on (kube/status.py
#: ``status_guard``). LLMDeployment: decide/compatibility.py (compatible images) and decide/serving.py
#: (partial artifact); an LLMEngine's decision reads none.
STATUS_INPUT_ANNOTATIONS: dict[str, tuple[str, ...]] = {
    DEPLOYMENT_KIND: (ANNOTATION_COMPATIBLE_IMAGES, ANNOTATION_ALLOW_PARTIAL_ARTIFACT),
    ENGINE_KIND: (),
}

#: Secret, set by whoever controls it: ``"true"`` lets LLMEngines and LLMDeployments of its namespace
#: reference it (``credentialsSecretRef``). The operator reads only Secret metadata to check it.
LABEL_SECRET_USABLE = f"{GROUP}/usable-by-llm-resources"
SECRET_USABLE_VALUE = "true"

# ------------------------------------------------------------------------------ our container names
#: Containers of the pods the operator renders (log tailing, exit-code rules, AppArmor annotations).
BUILDER_CONTAINER = "builder"
BENCHMARK_CONTAINER = "trtllm-bench"
SERVER_CONTAINER = "triton"
#: Init container of serving pods that downloads an S3 artifact.
FETCH_CONTAINER = "fetch-artifact"
#: Init container of builder pods that delivers engine-builder (render.builder_job).
DELIVERY_CONTAINER = "deliver-engine-builder"
#: Init container of builder pods of a ``pvc://`` model: ``engine-builder check`` (render.builder_job).
CHECK_CONTAINER = "check-model"

# ------------------------------------------------------------------------------ our data keys
#: Cache index ConfigMap: the artifact record (JSON).
ARTIFACT_DATA_KEY = "artifact.json"
#: Build-spec ConfigMap: the build spec (YAML) the builder reads.
BUILD_SPEC_DATA_KEY = "build.yaml"

# ------------------------------------------------------------------------------ names others own
#: Extended resource of NVIDIA's device plugin (NVIDIA/k8s-device-plugin, ``resourceName``).
GPU_RESOURCE = "nvidia.com/gpu"
#: Node label of GPU Feature Discovery (NVIDIA/gpu-feature-discovery, ``nvidia.com/gpu.product``).
GPU_PRODUCT_LABEL = "nvidia.com/gpu.product"
#: Pod label the Job controller sets (kubernetes ``staging/src/k8s.io/api/batch/v1/types.go``
#: ``JobNameLabel``, Kubernetes ≥ 1.27).
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"
#: Annotation the Deployment controller sets on ReplicaSets (kubernetes
#: ``pkg/controller/deployment/util/deployment_util.go`` ``RevisionAnnotation``).
DEPLOYMENT_REVISION_ANNOTATION = "deployment.kubernetes.io/revision"
#: Pod annotations Kubernetes interprets (k8s.io/api@v0.34.4 ``core/v1/annotation_key_constants.go``;
#: validated on pod templates by ``ValidatePodSpecificAnnotations``, kubernetes@v1.34.4
#: ``pkg/apis/core/validation/validation.go``).
MIRROR_POD_ANNOTATION = "kubernetes.io/config.mirror"
TOLERATIONS_ANNOTATION = "scheduler.alpha.kubernetes.io/tolerations"
POD_DELETION_COST_ANNOTATION = "controller.kubernetes.io/pod-deletion-cost"
SECCOMP_POD_ANNOTATION = "seccomp.security.alpha.kubernetes.io/pod"
SECCOMP_CONTAINER_ANNOTATION_PREFIX = "container.seccomp.security.alpha.kubernetes.io/"
APPARMOR_CONTAINER_ANNOTATION_PREFIX = "container.apparmor.security.beta.kubernetes.io/"
#: Label the Deployment controller adds to ReplicaSets and pod templates (kubernetes
#: ``staging/src/k8s.io/api/apps/v1/types.go`` ``DefaultDeploymentUniqueLabelKey``).
POD_TEMPLATE_HASH_LABEL = "pod-template-hash"

#: LeaderWorkerSet (kubernetes-sigs/lws ``api/leaderworkerset/v1/leaderworkerset_types.go``).
LWS_GROUP = "leaderworkerset.x-k8s.io"
LWS_VERSION = "v1"
LWS_PLURAL = "leaderworkersets"
LWS_KIND = "LeaderWorkerSet"
LWS_API_VERSION = f"{LWS_GROUP}/{LWS_VERSION}"
LWS_CRD_NAME = f"{LWS_PLURAL}.{LWS_GROUP}"
#: Pod label: the pod's index in its group; ``"0"`` is the leader (``WorkerIndexLabelKey``).
LWS_WORKER_INDEX_LABEL = "leaderworkerset.sigs.k8s.io/worker-index"

#: KEDA's ScaledObject (kedacore/keda ``apis/keda/v1alpha1/scaledobject_types.go``).
KEDA_GROUP = "keda.sh"
KEDA_VERSION = "v1alpha1"
SCALED_OBJECT_PLURAL = "scaledobjects"
KEDA_API_VERSION = f"{KEDA_GROUP}/{KEDA_VERSION}"
#: A CRD is named ``<plural>.<group>`` (apiextensions.k8s.io/v1 CustomResourceDefinition ``metadata.name``).
SCALED_OBJECT_CRD_NAME = f"{SCALED_OBJECT_PLURAL}.{KEDA_GROUP}"
SCALED_OBJECT_KIND = "ScaledObject"

#: The custom metrics API that mode hpa's HorizontalPodAutoscaler reads its Pods metrics from, as
#: kube-controller-manager's HPA client finds it: discovery of the group, in the versions it knows
#: (k8s.io/metrics v0.34.4 ``pkg/client/custom_metrics/discovery.go`` ``fetchVersions``, "no custom
#: metrics API (custom.metrics.k8s.io) registered"; ``converter.go`` ``MetricVersions``: v1beta2, then
#: v1beta1). An aggregated API is registered by an APIService named ``<version>.<group>``
#: (k8s.io/kube-aggregator v0.34.4 ``pkg/apis/apiregistration/validation/validation.go``); the
#: prometheus-adapter registers them.
CUSTOM_METRICS_GROUP = "custom.metrics.k8s.io"
CUSTOM_METRICS_API_SERVICES = tuple(f"{v}.{CUSTOM_METRICS_GROUP}" for v in ("v1beta2", "v1beta1"))

#: The Gateway API Inference Extension's InferencePool (kubernetes-sigs/gateway-api-inference-extension
#: v1.6.0 ``config/crd/bases/inference.networking.k8s.io_inferencepools.yaml``: group
#: ``inference.networking.k8s.io``, version ``v1``, served and stored).
INFERENCE_GROUP = "inference.networking.k8s.io"
INFERENCE_VERSION = "v1"
INFERENCE_POOL_PLURAL = "inferencepools"
INFERENCE_POOL_KIND = "InferencePool"
INFERENCE_POOL_API_VERSION = f"{INFERENCE_GROUP}/{INFERENCE_VERSION}"
#: Pod label the endpoint picker reads to choose a model server's metric names, and the value of
#: Triton with the TensorRT-LLM backend (v1.5.0, the last release shipping the EPP in that repository:
#: ``pkg/epp/framework/plugins/datalayer/extractor/metrics/mapping_registry.go``
#: ``DefaultEngineTypeLabelKey``; ``factories.go`` ``defaultEngineConfigs`` "triton-tensorrt-llm":
#: queue ``nv_trt_llm_request_metrics{request_type=waiting}``, running ``…{request_type=scheduled}``,
#: KV ``nv_trt_llm_kv_cache_block_metrics{kv_cache_block_type=fraction}``).
ENGINE_TYPE_LABEL = "inference.networking.k8s.io/engine-type"
ENGINE_TYPE_TRITON_TRTLLM = "triton-tensorrt-llm"
