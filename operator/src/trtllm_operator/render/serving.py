"""What every serving child is rendered from: :class:`ServingParams`, names, labels, the launch script.

An ``LLMDeployment`` and the ``LLMEngine`` it serves are flattened, by the handler, into one frozen
:class:`ServingParams`. Every ``desired_*`` renderer in this package is a pure function of it (no
client, no clock): the same parameters always give the same manifests, byte for byte, so the
handler can compare and patch, and ``trtllm-operator render`` can show a GitOps reviewer exactly
what the operator will create.

Names are deterministic — every child is called after its ``LLMDeployment``, so a retry or a
restarted operator finds the child it created instead of making a second one; the model-repository
ConfigMap also carries a hash of its contents (it is immutable, so a pod that restarts mid-rollout
still reads the files its ReplicaSet was rendered with).

The launch script is rendered here rather than taken from TensorRT-LLM's
``scripts/launch_triton_server.py`` because that script starts ``mpirun`` with ``subprocess.Popen``
and returns without waiting (docs/reference/tensorrt-llm.md §4.4, tensorrtllm_backend#580): as a container's
main process
the container would exit at once. We build the same ``mpirun`` line (one ``tritonserver`` rank per
GPU, rank 0 serving every model, ranks ≥ 1 loading only ``tensorrt_llm``, docs/reference/tensorrt-llm.md §4.4)
and keep
it in the foreground under a small watchdog.
"""

from __future__ import annotations

import hashlib
import json
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from trtllm_operator.api.deployment import LLMDeploymentSpec
from trtllm_operator.api.engine import LLMEngineSpec
from trtllm_operator.decide.engine import StorageLocation

GROUP = "llm.trtllm-operator.dev"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"

#: Label on every child and pod: which LLMDeployment it belongs to (the workload selector).
LABEL_DEPLOYMENT = f"{GROUP}/deployment"
#: Pod label: the first :data:`SHORT_KEY_LEN` hex digits of the engine key the pod serves.
LABEL_ENGINE_KEY = f"{GROUP}/engine-key"
#: Label on the model-repository ConfigMaps (so old ones can be found and pruned).
LABEL_COMPONENT = "app.kubernetes.io/component"
#: Pod-template annotation: the full engine key.
ANNOTATION_ENGINE_KEY = f"{GROUP}/engine-key"
#: Pod-template annotation: sha256 of everything rendered into the pod's files and command.
ANNOTATION_CONFIG_HASH = f"{GROUP}/config-hash"
#: Node label GPU Feature Discovery sets; the engine's target product is matched against it.
GPU_PRODUCT_LABEL = "nvidia.com/gpu.product"
GPU_RESOURCE = "nvidia.com/gpu"

#: Label values are limited to 63 characters; a 64-hex engine key is one too long. 16 hex digits
#: (64 bits) are plenty to tell the keys of one deployment's rollouts apart.
SHORT_KEY_LEN = 16

HTTP_PORT = 8000
GRPC_PORT = 8001
METRICS_PORT = 8002

#: Where things are mounted inside the Triton container.
ARTIFACT_MOUNT = "/artifact"
CONFIG_MOUNT = "/etc/trtllm-operator"
MODEL_REPOSITORY = "/model-repository"
LAUNCH_SCRIPT = "launch.sh"

#: Inside an artifact (engine-builder's package stage): the Triton model repository pieces.
ARTIFACT_MODEL_REPOSITORY = f"{ARTIFACT_MOUNT}/triton"
#: Inside an artifact: the engine (tensorrt backend: config.json + rank<N>.engine), the unified
#: checkpoint (pytorch backend) and the Hugging Face tokenizer.
ARTIFACT_ENGINE_DIR = f"{ARTIFACT_MOUNT}/engine"
ARTIFACT_CHECKPOINT_DIR = f"{ARTIFACT_MOUNT}/checkpoint"
ARTIFACT_TOKENIZER_DIR = f"{ARTIFACT_MOUNT}/tokenizer"
#: Fallback when an artifact carries no repository: the templates the Triton TRT-LLM image ships
#: (BE@v0.19.0 README: ``/app/all_models/inflight_batcher_llm``; LLM-API model under ``llmapi``).
IMAGE_TEMPLATES = {
    "tensorrt": "/app/all_models/inflight_batcher_llm",
    "pytorch": "/app/all_models/llmapi",
}

Backend = Literal["tensorrt", "pytorch"]


@dataclass(frozen=True)
class OwnerRef:
    """The LLMDeployment that owns every child (garbage collection, ``kubectl tree``)."""

    name: str
    uid: str
    api_version: str = API_VERSION
    kind: str = "LLMDeployment"

    def manifest(self) -> dict[str, Any]:
        return {
            "apiVersion": self.api_version,
            "kind": self.kind,
            "name": self.name,
            "uid": self.uid,
            "controller": True,
            "blockOwnerDeletion": True,
        }


@dataclass(frozen=True)
class ServerSettings:
    """Triton / TensorRT-LLM runtime knobs from ``LLMDeployment.spec.server`` (docs/reference/tensorrt-llm.md
    §4.3)."""

    kv_cache_free_gpu_mem_fraction: float = 0.9
    enable_kv_cache_reuse: bool = True
    batching_strategy: str = "inflight_fused_batching"
    batch_scheduler_policy: str = "guaranteed_no_evict"
    max_queue_delay_microseconds: int = 0
    max_queue_size: int = 0
    decoupled: bool = False
    instance_count: int = 1
    max_tokens_in_paged_kv_cache: int | None = None
    enable_chunked_context: bool = False
    shared_memory: str = "2Gi"


@dataclass(frozen=True)
class Rollout:
    """``spec.rollout``: GPU-safe defaults — never more GPUs than the replicas own (``maxSurge: 0``)."""

    max_surge: int | str = 0
    max_unavailable: int | str = 1
    progress_deadline_seconds: int = 1800
    auto_rollback: bool = False


@dataclass(frozen=True)
class S3Artifact:
    """An artifact in S3: ``s3://<bucket>/<prefix>`` (the prefix ends in the engine key).

    Serving pods download it into a node-local emptyDir in an init container (the serving image
    carries engine-builder and thus boto3). ``secret`` names a Secret with keys
    ``AWS_ACCESS_KEY_ID`` / ``AWS_SECRET_ACCESS_KEY``; ``None`` = pod identity.
    """

    bucket: str
    prefix: str
    endpoint: str | None = None
    secret: str | None = None

    @property
    def uri(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}"


@dataclass(frozen=True)
class ServingParams:
    """Everything the serving children are rendered from.

    Fields (units in the name or stated): ``replicas`` is ``spec.replicas`` (the scale subresource,
    the single writer for replica counts); ``gpus_per_node`` is the ``nvidia.com/gpu`` capacity of one
    node of ``gpu_product`` (decides Deployment vs LeaderWorkerSet); ``artifact_claim`` /
    ``artifact_sub_path`` locate ``<storage root>/<engineKey>`` on a PVC; ``artifact_bytes`` is the
    artifact size (sizes the startup probe), ``None`` if unknown.
    """

    name: str
    namespace: str
    owner: OwnerRef
    engine_name: str
    engine_key: str
    backend: Backend
    image: str
    gpu_product: str
    artifact_claim: str
    artifact_sub_path: str
    #: Set for S3 storage (then ``artifact_claim``/``artifact_sub_path`` are empty).
    artifact_s3: S3Artifact | None = None
    replicas: int = 1
    tensor_parallelism: int = 1
    pipeline_parallelism: int = 1
    expert_parallelism: int = 1
    gpus_per_node: int = 8
    artifact_bytes: int | None = None
    max_batch_size: int = 64
    max_beam_width: int = 1
    max_num_tokens: int | None = None
    max_seq_len: int | None = None
    kv_cache_dtype: str = "auto"
    server: ServerSettings = ServerSettings()
    rollout: Rollout = Rollout()
    cpu: str | None = None
    memory: str | None = None
    ephemeral_storage: str | None = None
    node_selector: Mapping[str, str] = field(default_factory=dict)
    tolerations: tuple[Mapping[str, Any], ...] = ()
    affinity: Mapping[str, Any] = field(default_factory=dict)
    #: Other spellings of ``gpu_product`` a node label may carry (the catalog's canonical name when
    #: the engine names an alias such as ``H100``).
    gpu_product_aliases: tuple[str, ...] = ()
    priority_class_name: str | None = None
    runtime_class_name: str | None = None
    image_pull_secrets: tuple[str, ...] = ()
    pod_labels: Mapping[str, str] = field(default_factory=dict)
    pod_annotations: Mapping[str, str] = field(default_factory=dict)
    service_type: str = "ClusterIP"
    service_annotations: Mapping[str, str] = field(default_factory=dict)
    service_labels: Mapping[str, str] = field(default_factory=dict)

    @property
    def world_size(self) -> int:
        """MPI ranks (= GPUs) of one replica: tensor × pipeline parallelism (docs/reference/tensorrt-llm.md
        §4.4)."""
        return self.tensor_parallelism * self.pipeline_parallelism

    @property
    def short_key(self) -> str:
        return short_key(self.engine_key)

    @property
    def nodes_per_replica(self) -> int:
        """Nodes one replica spans: ceil(world size / GPUs per node)."""
        return -(-self.world_size // self.gpus_per_node)

    @property
    def multi_node(self) -> bool:
        return self.world_size > self.gpus_per_node


def short_key(engine_key: str) -> str:
    """The pod-label form of an engine key (first :data:`SHORT_KEY_LEN` hex digits)."""
    return engine_key[:SHORT_KEY_LEN]


_NAME_OK = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


def child_name(name: str, suffix: str = "", limit: int = 63) -> str:
    """``<name>[-<suffix>]`` as a DNS-1035 label of at most ``limit`` characters.

    Over-long names keep a readable prefix and end in 8 hex digits of the full name's sha256, so two
    long names never collide on the same truncated prefix.
    """
    full = f"{name}-{suffix}" if suffix else name
    if len(full) <= limit and _NAME_OK.match(full):
        return full
    digest = hashlib.sha256(full.encode()).hexdigest()[:8]
    prefix = re.sub(r"[^a-z0-9-]", "-", full.lower())[: limit - 9].strip("-")
    return f"{prefix}-{digest}"


def selector_labels(params: ServingParams) -> dict[str, str]:
    """The workload selector (also ``status.selector`` for the scale subresource)."""
    return {LABEL_DEPLOYMENT: child_name(params.name)}


def selector_string(params: ServingParams) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(selector_labels(params).items()))


def common_labels(params: ServingParams) -> dict[str, str]:
    return {
        "app.kubernetes.io/name": "triton",
        "app.kubernetes.io/instance": child_name(params.name),
        "app.kubernetes.io/managed-by": "trtllm-operator",
        LABEL_COMPONENT: "server",
        **selector_labels(params),
    }


def metadata(params: ServingParams, name: str, labels: Mapping[str, str] | None = None) -> dict[str, Any]:
    return {
        "name": name,
        "namespace": params.namespace,
        "labels": dict(labels if labels is not None else common_labels(params)),
        "ownerReferences": [params.owner.manifest()],
    }


def content_hash(data: Any) -> str:
    """sha256 hex of the canonical JSON of ``data`` (sorted keys, no whitespace)."""
    blob = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(blob.encode()).hexdigest()


def tritonserver_args(params: ServingParams, *, leader: bool, rank: int) -> list[str]:
    """One ``tritonserver`` rank's arguments, as TensorRT-LLM's launch script builds them (§4.4).

    Rank 0 serves every model and the three ports; ranks ≥ 1 load only ``tensorrt_llm`` in explicit
    model-control mode and never return from model initialisation, so the shared ports never clash.
    Each rank gets its own Python-backend shared-memory prefix.
    """
    args = [
        "tritonserver",
        f"--model-repository={MODEL_REPOSITORY}",
        f"--http-port={HTTP_PORT}",
        f"--grpc-port={GRPC_PORT}",
        f"--metrics-port={METRICS_PORT}",
        "--disable-auto-complete-config",
        f"--backend-config=python,shm-region-prefix-name=prefix{rank}_",
    ]
    if not leader:
        args[5:5] = ["--model-control-mode=explicit", "--load-model=tensorrt_llm"]
    return args


def mpirun_command(params: ServingParams, hosts: str | None = None) -> list[str]:
    """The ``mpirun -n 1 tritonserver … : -n 1 tritonserver …`` line for a tensorrt-backend replica.

    ``world_size`` app contexts, rank 0 the leader. ``hosts`` (``host:slots,…``) is given for a
    multi-node replica; on one node Open MPI places every rank locally.
    """
    cmd = ["mpirun", "--allow-run-as-root", "--tag-output"]
    if hosts:
        cmd += ["--host", hosts]
    for rank in range(params.world_size):
        if rank:
            cmd.append(":")
        cmd += ["-n", "1", *tritonserver_args(params, leader=rank == 0, rank=rank)]
    return cmd


def server_command(params: ServingParams, hosts: str | None = None) -> list[str]:
    """The serving process: plain ``tritonserver`` for one rank, else the ``mpirun`` line.

    PyTorch backend: the LLM-API Python model starts its own tensor/pipeline-parallel workers from
    ``model.yaml`` (docs/reference/tensorrt-llm.md §3.5: launched with the default world size 1), so Triton
    runs as one
    process owning every GPU of the pod; on several nodes each rank runs under
    ``trtllm-llmapi-launch`` (the launch script's ``--trtllm_llmapi_launch``).
    """
    if params.backend == "pytorch":
        if not params.multi_node:
            return tritonserver_args(params, leader=True, rank=0)
        cmd = ["mpirun", "--allow-run-as-root", "--tag-output"]
        if hosts:
            cmd += ["--host", hosts]
        cmd += ["-n", str(params.world_size), "trtllm-llmapi-launch"]
        return cmd + tritonserver_args(params, leader=True, rank=0)
    if params.world_size == 1:
        return tritonserver_args(params, leader=True, rank=0)
    return mpirun_command(params, hosts)


def hosts_expression(params: ServingParams) -> str:
    """LeaderWorkerSet leader: a bash expression giving ``leader:N,worker-1:N,…`` for ``--host``."""
    slots = params.gpus_per_node
    return (
        '"$(lead=$LWS_LEADER_ADDRESS; first=${lead%%.*}; rest=${lead#*.}; h=$lead:' + str(slots) + "; "
        "for i in $(seq 1 $((LWS_GROUP_SIZE - 1))); do h=$h,$first-$i.$rest:" + str(slots) + "; done; "
        'echo $h)"'
    )


#: The Triton models the operator renders per backend (engine_builder.triton's layouts).
MODELS = {
    "tensorrt": ("ensemble", "postprocessing", "preprocessing", "tensorrt_llm"),
    "pytorch": ("tensorrt_llm",),
}


def launch_script(params: ServingParams, models: Sequence[str] | None = None) -> str:
    """The container's main process (``bash launch.sh``), as text.

    1. Assemble the model repository in an emptyDir, per rendered model (``models``, default
       :data:`MODELS` of the backend): its version directory ``1/`` (the Python models' ``model.py``,
       which must match the image's TensorRT-LLM) from the artifact's ``triton/`` pieces, else from
       the image's own ``all_models`` copy; then the operator's rendered config files on top. Only
       models the operator rendered are served — never an unfilled template of the image.
    2. World size 1: ``exec tritonserver`` — Triton is the main process.
    3. Otherwise run ``mpirun`` in the background and wait on it. SIGTERM is forwarded (Open MPI
       passes it to every rank). A watchdog ends the replica when fewer than ``world_size``
       ``tritonserver`` ranks are alive after all started: ``mpirun`` already aborts the job when a
       rank exits non-zero, but a rank that exits 0 would otherwise leave a half replica that rank 0
       keeps reporting as live. The script exits with ``mpirun``'s status, so the kubelet restarts it.

    A multi-node replica's leader gets its host list from :func:`hosts_expression`.
    """
    hosts_expr = hosts_expression(params) if params.multi_node else None
    templates = IMAGE_TEMPLATES[params.backend]
    lines = [
        "#!/bin/bash",
        "# Rendered by trtllm-operator; see docs/serving.md. Do not edit: the operator re-renders it.",
        "set -euo pipefail",
        f"repo={MODEL_REPOSITORY}",
        f"for m in {' '.join(sorted(models or MODELS[params.backend]))}; do",
        '  mkdir -p "$repo/$m/1"',
        f'  if [ -d "{ARTIFACT_MODEL_REPOSITORY}/$m/1" ]; then src="{ARTIFACT_MODEL_REPOSITORY}/$m/1";',
        f'  else src="{templates}/$m/1"; fi',
        '  if [ -d "$src" ]; then cp -rL "$src/." "$repo/$m/1/"; fi',
        "done",
        f'cp -rL "{CONFIG_MOUNT}/model-repository/." "$repo/"',
        'if grep -rl --include=config.pbtxt --include=model.yaml "\\${" "$repo"; then',
        '  echo "unfilled \\${...} template parameter in the model repository" >&2; exit 2; fi',
    ]
    hosts = "$HOSTS" if hosts_expr else None
    if hosts_expr:
        lines.append(f"HOSTS={hosts_expr}")
    cmd = server_command(params, hosts)
    rendered = " ".join(a if a in (":", "$HOSTS") else shlex.quote(a) for a in cmd).replace(
        " : ", " \\\n  : "
    )
    rendered = rendered.replace("$HOSTS", '"$HOSTS"')
    if cmd[0] == "tritonserver":
        lines.append(f"exec {rendered}")
        return "\n".join(lines) + "\n"
    # Ranks this pod runs (a multi-node leader sees only its own node's ranks).
    ranks = min(params.world_size, params.gpus_per_node) if params.backend == "tensorrt" else 1
    lines += [
        f"world_size={ranks}",
        f"{rendered} &",
        "mpi=$!",
        "trap 'kill -TERM $mpi 2>/dev/null || true' TERM INT",
        "seen=0",
        'while kill -0 "$mpi" 2>/dev/null; do',
        "  alive=$(pgrep -c -x tritonserver || true)",
        '  if [ "$alive" -ge "$world_size" ]; then seen=1; fi',
        '  if [ "$seen" = 1 ] && [ "$alive" -lt "$world_size" ]; then',
        '    echo "a tritonserver rank exited ($alive of $world_size alive): stopping the replica" >&2',
        '    kill -TERM "$mpi" 2>/dev/null || true',
        '    for _ in 1 2 3 4 5 6 7 8 9 10; do kill -0 "$mpi" 2>/dev/null || break; sleep 1; done',
        '    kill -KILL "$mpi" 2>/dev/null || true',
        '    wait "$mpi" || true; exit 1',
        "  fi",
        "  sleep 2 & wait $! || true",
        "done",
        'wait "$mpi"',
    ]
    return "\n".join(lines) + "\n"


class ServingInputError(ValueError):
    """The engine or deployment cannot be turned into serving parameters; ``reason`` is CamelCase."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


def artifact_location(engine: Mapping[str, Any]) -> tuple[str, str]:
    """``(claim name, sub path)`` of a Ready engine's artifact directory ``<root>/<engineKey>``.

    From ``status.artifact.uri`` (``pvc://<claim>/<path>``); without one, from ``spec.storage``
    (``pvc.claimName`` + ``subPath``, or the operator-created claim,
    :meth:`~trtllm_operator.decide.engine.StorageLocation.created_pvc_name`).
    Errors: :class:`ServingInputError` ``ArtifactUnsupported`` for S3 storage (this function locates
    PVC artifacts only; an S3 artifact is served through :func:`s3_artifact`, which an init container
    of the serving pod downloads into a node-local volume) or when no location can be derived.
    """
    status = engine.get("status") or {}
    key = status.get("engineKey") or ""
    uri = (status.get("artifact") or {}).get("uri") or ""
    if uri.startswith("pvc://"):
        claim, _, path = uri[len("pvc://") :].partition("/")
        if claim and path:
            return claim, path.strip("/")
    storage = (engine.get("spec") or {}).get("storage") or {}
    if uri.startswith("s3://") or storage.get("s3"):
        raise ServingInputError("ArtifactUnsupported", "the engine's artifact is in S3, not on a PVC")
    if storage.get("pvc"):
        sub = (storage["pvc"].get("subPath") or "").strip("/")
        return storage["pvc"]["claimName"], f"{sub}/{key}" if sub else key
    if storage.get("createPVC"):
        return StorageLocation.created_pvc_name(engine["metadata"]["name"]), key
    raise ServingInputError(
        "ArtifactUnsupported", "the engine reports no artifact location (status.artifact.uri)"
    )


def s3_artifact(engine: Mapping[str, Any]) -> S3Artifact | None:
    """The engine's artifact as an :class:`S3Artifact` when its storage is S3, else ``None``."""
    status = engine.get("status") or {}
    s3 = ((engine.get("spec") or {}).get("storage") or {}).get("s3")
    if not s3:
        return None
    uri = (status.get("artifact") or {}).get("uri") or ""
    if uri.startswith("s3://"):
        bucket, _, prefix = uri[len("s3://") :].partition("/")
    else:
        bucket = s3["bucket"]
        prefix = "/".join(
            p for p in (str(s3.get("prefix", "trtllm-engines")).strip("/"), status["engineKey"]) if p
        )
    secret = (s3.get("credentialsSecretRef") or {}).get("name")
    return S3Artifact(bucket, prefix.strip("/"), s3.get("endpoint"), secret)


def serving_params(
    deployment: Mapping[str, Any],
    engine: Mapping[str, Any],
    *,
    gpus_per_node: int,
    gpu_product_aliases: tuple[str, ...] = (),
) -> ServingParams:
    """Flatten an LLMDeployment and its Ready LLMEngine (raw API objects) into :class:`ServingParams`.

    The server image is ``spec.server.image`` or the engine's ``spec.runtime.image``; the engine's
    ``build.maxBatchSize`` (or the planner's recommendation in ``status.plan``) sizes Triton's
    batch. Errors: :class:`ServingInputError`; ``pydantic.ValidationError`` for a malformed spec.
    """
    dmeta, emeta = deployment["metadata"], engine["metadata"]
    dspec = LLMDeploymentSpec.model_validate(deployment.get("spec") or {})
    espec = LLMEngineSpec.model_validate(engine.get("spec") or {})
    estatus = engine.get("status") or {}
    s3 = s3_artifact(engine)
    claim, sub_path = ("", "") if s3 else artifact_location(engine)
    recommended = ((estatus.get("plan") or {}).get("recommended")) or {}
    server, sched, rollout = dspec.server, dspec.scheduling, dspec.rollout
    return ServingParams(
        name=dmeta["name"],
        namespace=dmeta["namespace"],
        owner=OwnerRef(dmeta["name"], dmeta.get("uid", "")),
        engine_name=emeta["name"],
        engine_key=estatus["engineKey"],
        backend=espec.backend,
        image=server.image or espec.runtime.image,
        gpu_product=espec.gpu.product,
        gpu_product_aliases=gpu_product_aliases,
        artifact_claim=claim,
        artifact_sub_path=sub_path,
        artifact_s3=s3,
        replicas=dspec.replicas,
        tensor_parallelism=espec.parallelism.tensor,
        pipeline_parallelism=espec.parallelism.pipeline,
        expert_parallelism=espec.parallelism.expert,
        gpus_per_node=gpus_per_node,
        artifact_bytes=(estatus.get("artifact") or {}).get("sizeBytes"),
        max_batch_size=espec.build.max_batch_size or recommended.get("maxBatchSize") or 64,
        max_beam_width=espec.build.max_beam_width,
        max_num_tokens=espec.build.max_num_tokens or recommended.get("maxNumTokens"),
        max_seq_len=espec.build.max_seq_len or recommended.get("maxSeqLen"),
        kv_cache_dtype=espec.quantization.kv_cache_dtype,
        server=ServerSettings(
            kv_cache_free_gpu_mem_fraction=server.kv_cache_free_gpu_mem_fraction,
            enable_kv_cache_reuse=server.enable_kv_cache_reuse,
            batching_strategy=server.batching_strategy,
            batch_scheduler_policy=server.batch_scheduler_policy,
            max_queue_delay_microseconds=server.max_queue_delay_microseconds,
            max_queue_size=server.max_queue_size,
            decoupled=server.decoupled,
            instance_count=server.instance_count,
            max_tokens_in_paged_kv_cache=server.max_tokens_in_paged_kv_cache,
            enable_chunked_context=server.enable_chunked_context,
            shared_memory=server.resources.shared_memory,
        ),
        rollout=Rollout(
            max_surge=rollout.max_surge,
            max_unavailable=rollout.max_unavailable,
            progress_deadline_seconds=rollout.progress_deadline_seconds,
            auto_rollback=rollout.auto_rollback,
        ),
        cpu=server.resources.cpu,
        memory=server.resources.memory,
        ephemeral_storage=server.resources.ephemeral_storage,
        node_selector=dict(sched.node_selector or {}),
        tolerations=tuple(t.model_dump(by_alias=True, exclude_none=True) for t in sched.tolerations or ()),
        affinity=dict(sched.affinity or {}),
        priority_class_name=sched.priority_class_name,
        runtime_class_name=sched.runtime_class_name,
        image_pull_secrets=tuple(espec.runtime.image_pull_secrets or ()),
        pod_labels=dict(dspec.pod_labels or {}),
        pod_annotations=dict(dspec.pod_annotations or {}),
        service_type=dspec.service.type,
        service_annotations=dict(dspec.service.annotations or {}),
        service_labels=dict(dspec.service.labels or {}),
    )
