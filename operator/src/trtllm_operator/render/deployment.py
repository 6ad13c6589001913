"""The Triton pod template and the ``apps/v1`` Deployment for replicas that fit one node.

One pod per replica, ``tensor × pipeline`` GPUs per pod, one ``tritonserver`` rank per GPU under MPI
(see :mod:`trtllm_operator.render.launch`). Placement, probes and rollout follow
docs/design.md §5:

- node affinity on ``nvidia.com/gpu.product`` = the engine's target product — an engine only loads
  on the GPU architecture (and, by NVIDIA's safe rule, the SKU) it was built for
  (docs/reference/tensorrt-llm.md §3.3);
- the artifact PVC is mounted read-only at ``sub_path = <storage root>/<engineKey>``; a serving pod
  can never damage an artifact other deployments share;
- ``automountServiceAccountToken: false``: Triton never talks to the API server;
- readiness ``/v2/health/ready``, liveness ``/v2/health/live`` (KServe v2 on the HTTP port, reference
  §4.5), and a startup probe sized from the artifact (:func:`startup_budget_seconds`); with Triton's
  OpenAI frontend (``api: openai``/``both``) ``/health/ready`` on its port for startup and readiness
  and a TCP check of that port for liveness (the frontend has no liveness route);
- the pod template carries the engine key (full, annotation; short, label) and a hash of every
  rendered file, so any change of engine or server settings rolls the pods;
- ``strategy``: ``maxSurge: 0`` / ``maxUnavailable: 1`` unless ``spec.rollout`` says otherwise —
  a surge pod would need GPUs that a full cluster does not have, and would sit Pending forever;
- hardened (:func:`pod_security_context`): a one-node pod meets the ``restricted`` Pod Security
  Standard (non-root as Triton's ``triton-server`` user, no privilege escalation, no capabilities,
  ``RuntimeDefault`` seccomp); a LeaderWorkerSet pod runs the image's user (root), because its
  workers run ``sshd`` for the leader's ``mpirun``, and meets ``baseline`` (docs/security.md);
- Triton's admin APIs behind a per-deployment header value (``TRITON_ADMIN_KEY`` from the Secret
  ``<name>-credentials``, :mod:`trtllm_operator.render.credentials`);
- offline: ``HF_HUB_OFFLINE=1`` — the tokenizer and every file a serving pod loads come from the
  artifact; nothing is fetched from the Hub at serving time.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping
from typing import Any

from trtllm_operator.api.wire import (
    ANNOTATION_CONFIG_HASH,
    ANNOTATION_ENGINE_KEY,
    ENGINE_TYPE_LABEL,
    ENGINE_TYPE_TRITON_TRTLLM,
    FETCH_CONTAINER,
    FRONTEND_TRTLLM_SERVE,
    GPU_PRODUCT_LABEL,
    GPU_RESOURCE,
    LABEL_ENGINE_KEY,
    LABEL_FRONTEND,
    SERVER_CONTAINER,
)
from trtllm_operator.decide.serving_params import ARTIFACT_MOUNT, ServingParams
from trtllm_operator.render.credentials import admin_key_env
from trtllm_operator.render.launch import WORKER_WAIT_SECONDS
from trtllm_operator.render.model_repository import volume_items
from trtllm_operator.render.serving import (
    CONFIG_MOUNT,
    LAUNCH_SCRIPT,
    MODEL_REPOSITORY,
    TRTLLM_SERVE_HEALTH_PATH,
    child_name,
    common_labels,
    content_hash,
    metadata,
    selector_labels,
    serving_ports,
    uses_openai_frontend,
    uses_trtllm_serve,
)

#: The serving user of NVIDIA's Triton images (the ``-trtllm-python-py3`` ones included): their
#: Dockerfile creates ``triton-server`` with uid and gid 1000, "a user that can be used to run
#: triton as non-root", and gives it the server's files (triton-inference-server/server
#: ``build.py``, ``create_dockerfile_linux``: ``ENV TRITON_SERVER_USER=triton-server`` … ``[ `id -u
#: $TRITON_SERVER_USER` -eq 1000 ]``). The images' default user stays root.
TRITON_SERVER_UID = 1000
#: HOME of the serving processes: the ``triton-server`` user has no home directory in the image
#: (``useradd`` without ``-m``), and Python libraries (transformers, torch) write caches below HOME.
SERVING_HOME = "/tmp"

#: Startup probe period (seconds).
STARTUP_PERIOD_SECONDS = 10
#: Fixed part of the startup budget (seconds): image already pulled, MPI and Triton start, Python
#: backend stubs, KV-cache allocation (a cudaMalloc of tens of GiB) and CUDA-graph warm-up. Triton
#: opens its HTTP port only after the models loaded, so all of it falls inside the startup probe.
STARTUP_BASE_SECONDS = 300
#: Read throughput assumed for the artifact volume (bytes/s): 100 MiB/s, the order of a network
#: volume's baseline (e.g. EBS gp3 125 MiB/s, a busy NFS share less). Ranks read their own rank
#: files in parallel, so each reads about artifact size / world size.
STARTUP_READ_BYTES_PER_SECOND = 100 * 2**20
#: Budget when the artifact size is unknown (seconds).
STARTUP_UNKNOWN_SIZE_SECONDS = 1800


def startup_budget_seconds(artifact_bytes: int | None, world_size: int) -> int:
    """Seconds the startup probe tolerates before the kubelet restarts the container.

    ``STARTUP_BASE_SECONDS + artifact_bytes / STARTUP_READ_BYTES_PER_SECOND`` (every pod first reads
    the whole artifact once to verify it against its manifest, ``verify-artifact.py``)
    ``+ (artifact_bytes / world_size) / STARTUP_READ_BYTES_PER_SECOND`` (the ranks load their
    files in parallel), or :data:`STARTUP_UNKNOWN_SIZE_SECONDS` without a size. Example:
    Llama-3.1-70B FP8 (~70 GB) at TP 2 → 300 + 668 + 334 = 1302 s. Restarting too early is the
    costly error (the load starts over), so the budget is generous; liveness takes over once the
    server answered.
    """
    if artifact_bytes is None or artifact_bytes <= 0:
        return STARTUP_UNKNOWN_SIZE_SECONDS
    per_rank = artifact_bytes / max(world_size, 1)
    verify = math.ceil(artifact_bytes / STARTUP_READ_BYTES_PER_SECOND)
    return STARTUP_BASE_SECONDS + verify + math.ceil(per_rank / STARTUP_READ_BYTES_PER_SECOND)


def probes(params: ServingParams) -> dict[str, dict[str, Any]]:
    """Startup, readiness and liveness probes of a serving container.

    A multi-node replica's leader first waits up to
    :data:`~trtllm_operator.render.launch.WORKER_WAIT_SECONDS` for its workers: its startup budget
    includes that wait.
    """
    budget = startup_budget_seconds(params.artifact_bytes, params.world_size)
    if params.multi_node:
        budget += WORKER_WAIT_SECONDS
    if uses_trtllm_serve(params):
        return trtllm_serve_probes(math.ceil(budget / STARTUP_PERIOD_SECONDS))
    if uses_openai_frontend(params.server.api):
        return openai_probes(math.ceil(budget / STARTUP_PERIOD_SECONDS))
    return {
        "startupProbe": {
            "httpGet": {"path": "/v2/health/live", "port": "http"},
            "periodSeconds": STARTUP_PERIOD_SECONDS,
            "timeoutSeconds": 5,
            "failureThreshold": math.ceil(budget / STARTUP_PERIOD_SECONDS),
        },
        "readinessProbe": {
            "httpGet": {"path": "/v2/health/ready", "port": "http"},
            "periodSeconds": 10,
            "timeoutSeconds": 5,
            "failureThreshold": 3,
        },
        "livenessProbe": {
            "httpGet": {"path": "/v2/health/live", "port": "http"},
            "periodSeconds": 15,
            "timeoutSeconds": 5,
            "failureThreshold": 4,
        },
    }


def openai_probes(startup_failures: int) -> dict[str, dict[str, Any]]:
    """Probes of Triton's OpenAI frontend (triton-inference-server/server r26.03 ``python/openai``).

    Its routes: ``GET /health/ready`` (200 when ``server.ready()``, else 400;
    ``frontend/fastapi/routers/observability.py``), no liveness route. ``main.py`` starts Triton with
    ``wait_until_ready=True`` and opens the port after that (``openai_frontend.start()`` last), so
    the startup probe covers the model load; liveness is a TCP check of the port (uvicorn serving).
    In ``api: both`` the KServe frontends start before the OpenAI port opens, so the OpenAI port's
    readiness covers both.
    """
    ready = {"httpGet": {"path": "/health/ready", "port": "openai"}, "timeoutSeconds": 5}
    return {
        "startupProbe": {
            **ready,
            "periodSeconds": STARTUP_PERIOD_SECONDS,
            "failureThreshold": startup_failures,
        },
        "readinessProbe": {**ready, "periodSeconds": 10, "failureThreshold": 3},
        "livenessProbe": {
            "tcpSocket": {"port": "openai"},
            "periodSeconds": 15,
            "timeoutSeconds": 5,
            "failureThreshold": 4,
        },
    }


def trtllm_serve_probes(startup_failures: int) -> dict[str, dict[str, Any]]:
    """Probes of ``trtllm-serve`` (the pytorch backend's ``api: openai``).

    ``GET /health`` (:data:`~trtllm_operator.render.serving.TRTLLM_SERVE_HEALTH_PATH`): 200, or 503
    when the executor reports itself unhealthy (``openai_server.py`` ``health``: ``_check_health()``).
    ``serve.py`` builds the ``LLM`` (model load, KV-cache allocation) before it starts the HTTP server
    (``launch_server``: ``llm = PyTorchLLM(**llm_args)``, then ``asyncio.run(server(host, port))``),
    so the startup probe covers the load; readiness and liveness read the same route.
    """
    health = {"httpGet": {"path": TRTLLM_SERVE_HEALTH_PATH, "port": "openai"}, "timeoutSeconds": 5}
    return {
        "startupProbe": {
            **health,
            "periodSeconds": STARTUP_PERIOD_SECONDS,
            "failureThreshold": startup_failures,
        },
        "readinessProbe": {**health, "periodSeconds": 10, "failureThreshold": 3},
        "livenessProbe": {**health, "periodSeconds": 15, "failureThreshold": 4},
    }


def gpus_per_pod(params: ServingParams) -> int:
    """GPUs one pod requests: the whole replica on one node, one node's share on several."""
    return params.world_size if not params.multi_node else params.gpus_per_node


def container_resources(params: ServingParams) -> dict[str, dict[str, str]]:
    """GPUs as request and limit; memory and ephemeral storage as both; CPU as a request only
    (a CPU limit throttles tokenization and NCCL progress threads)."""
    requests: dict[str, str] = {}
    limits: dict[str, str] = {}
    if params.cpu:
        requests["cpu"] = params.cpu
    for key, value in (("memory", params.memory), ("ephemeral-storage", params.ephemeral_storage)):
        if value:
            requests[key] = limits[key] = value
    gpus = str(gpus_per_pod(params))
    requests[GPU_RESOURCE] = gpus
    limits[GPU_RESOURCE] = gpus
    return {"requests": requests, "limits": limits}


def affinity(params: ServingParams) -> dict[str, Any]:
    """The user's ``spec.scheduling.affinity`` with the engine's GPU product required.

    Node-selector terms are ORed by Kubernetes, so the product requirement is added to every
    required term the user gave (or becomes the only term).
    """
    products = sorted({params.gpu_product, *params.gpu_product_aliases})
    product = {"key": GPU_PRODUCT_LABEL, "operator": "In", "values": products}
    result = copy.deepcopy(dict(params.affinity))
    node = result.setdefault("nodeAffinity", {})
    required = node.setdefault("requiredDuringSchedulingIgnoredDuringExecution", {})
    terms = required.get("nodeSelectorTerms") or [{}]
    for term in terms:
        term["matchExpressions"] = [*term.get("matchExpressions", []), product]
    required["nodeSelectorTerms"] = terms
    return result


#: Init container script (serving image, which carries engine-builder's boto3): download every
#: object under the artifact prefix into /artifact, ``manifest.json`` last — the builder uploads it
#: last, so its presence means the artifact is complete. Files already complete are kept (a restart
#: of the pod on the same node resumes).
FETCH_SCRIPT = """\
import os, sys
import boto3
from botocore.config import Config
bucket, prefix, dest = sys.argv[1], sys.argv[2].rstrip("/") + "/", sys.argv[3]
config = Config(retries={"max_attempts": 5, "mode": "standard"}, s3={"addressing_style": "path"})
s3 = boto3.client("s3", config=config)
objs = [o for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
        for o in page.get("Contents", []) if not o["Key"].endswith("/")]
if not any(o["Key"] == prefix + "manifest.json" for o in objs):
    sys.exit(f"s3://{bucket}/{prefix}manifest.json not found: the artifact is incomplete or missing")
objs.sort(key=lambda o: o["Key"].endswith("/manifest.json"))
for o in objs:
    target = os.path.join(dest, o["Key"][len(prefix):])
    if os.path.isfile(target) and os.path.getsize(target) == o["Size"]:
        continue
    os.makedirs(os.path.dirname(target), exist_ok=True)
    s3.download_file(bucket, o["Key"], target + ".part")
    os.replace(target + ".part", target)
    print(f"downloaded {o['Key']} ({o['Size']} bytes)", flush=True)
"""


def artifact_volume(params: ServingParams) -> dict[str, Any]:
    """The PVC (read-only) or, for S3 storage, a node-local emptyDir sized from the artifact."""
    if params.artifact_s3 is None:
        return {
            "name": "artifact",
            "persistentVolumeClaim": {"claimName": params.artifact_claim, "readOnly": True},
        }
    empty: dict[str, Any] = {}
    if params.artifact_bytes:
        empty["sizeLimit"] = str(math.ceil(params.artifact_bytes * 1.1 / 2**30)) + "Gi"
    return {"name": "artifact", "emptyDir": empty}


def fetch_container(params: ServingParams) -> dict[str, Any]:
    """Init container downloading an S3 artifact (``params.artifact_s3``) into the artifact volume."""
    s3 = params.artifact_s3
    assert s3 is not None
    env: list[dict[str, Any]] = []
    if s3.endpoint:
        env.append({"name": "AWS_ENDPOINT_URL", "value": s3.endpoint})
    if s3.secret:
        env += [
            {"name": k, "valueFrom": {"secretKeyRef": {"name": s3.secret, "key": k}}}
            for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")
        ]
    return {
        "name": FETCH_CONTAINER,
        "image": params.image,
        "command": ["python3", "-c", FETCH_SCRIPT, s3.bucket, s3.prefix, ARTIFACT_MOUNT],
        "env": env,
        "volumeMounts": [{"name": "artifact", "mountPath": ARTIFACT_MOUNT}],
        "terminationMessagePolicy": "FallbackToLogsOnError",
    }


def pod_security_context(params: ServingParams) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(pod securityContext, container securityContext)`` of a serving pod.

    Every pod: ``seccompProfile: RuntimeDefault`` and ``allowPrivilegeEscalation: false``. A one-node
    pod also runs as :data:`TRITON_SERVER_UID` (``runAsNonRoot``) with every capability dropped —
    the ``restricted`` Pod Security Standard (Kubernetes docs, "Pod Security Standards",
    v1.34). A multi-node (LeaderWorkerSet) pod keeps the image's user and default capabilities:
    its workers run ``sshd`` (host keys, privilege separation, ``/run/sshd``) for the leader's
    ``mpirun``, which needs root — the ``baseline`` standard.
    """
    pod: dict[str, Any] = {"seccompProfile": {"type": "RuntimeDefault"}}
    container: dict[str, Any] = {"allowPrivilegeEscalation": False}
    if not params.multi_node:
        pod.update({"runAsNonRoot": True, "runAsUser": TRITON_SERVER_UID, "runAsGroup": TRITON_SERVER_UID})
        container["capabilities"] = {"drop": ["ALL"]}
    return pod, container


def pod_labels(params: ServingParams) -> dict[str, str]:
    """User pod labels, then ours (ours win: the selector and the engine-key count depend on them; the
    API refuses a ``spec.podLabels`` key of ours, ``reserved_label_keys_rule``).

    With ``spec.routing.inferencePool`` the pods also carry the endpoint picker's engine-type label
    (:data:`~trtllm_operator.api.wire.ENGINE_TYPE_LABEL` = ``triton-tensorrt-llm``): the picker reads
    Triton's TensorRT-LLM metric names for them instead of its default, vLLM's — unless
    ``spec.podLabels`` sets that key, whose value is kept (fresh-user trial 49 W8: it was silently
    overwritten). The value names one of the picker's engine configurations, which whoever deploys the
    picker may extend with their own names and metric specs (gateway-api-inference-extension v1.5.0
    ``pkg/epp/framework/plugins/datalayer/extractor/metrics/factories.go`` ``engineConfigParams.Name``
    "the engine type identifier", ``EngineConfigs`` "Built-in configs (vLLM, SGLang, trtllm-serve,
    triton-tensorrt-llm) are automatically appended if not explicitly defined"; ``extractor.go``
    ``getEngineTypeFromEndpoint`` reads the pod's label as it is): only the user knows that
    configuration. ``trtllm-serve`` pods carry :data:`~trtllm_operator.api.wire.LABEL_FRONTEND`
    (their metrics path differs)."""
    labels = {**params.pod_labels, **common_labels(params), LABEL_ENGINE_KEY: params.short_key}
    if params.inference_pool is not None:
        labels.setdefault(ENGINE_TYPE_LABEL, ENGINE_TYPE_TRITON_TRTLLM)
    if uses_trtllm_serve(params):
        labels[LABEL_FRONTEND] = FRONTEND_TRTLLM_SERVE
    return labels


def pod_template(
    params: ServingParams,
    configmap: Mapping[str, Any],
    *,
    command: list[str] | None = None,
    extra_env: list[dict[str, Any]] | None = None,
    extra_labels: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The Triton pod template; ``configmap`` is the rendered model-repository ConfigMap.

    ``command`` overrides the main process and leaves the probes out (a LeaderWorkerSet worker runs
    ``worker.sh``, not Triton's HTTP server).
    """
    config_hash = content_hash(
        {
            "engineKey": params.engine_key,
            "configMap": configmap["metadata"]["name"],
            "data": configmap["data"],
        }
    )
    pod_security, container_security = pod_security_context(params)
    container: dict[str, Any] = {
        "name": SERVER_CONTAINER,
        "image": params.image,
        "command": command or ["/bin/bash", f"{CONFIG_MOUNT}/{LAUNCH_SCRIPT}"],
        "ports": [
            {"name": name, "containerPort": port, "protocol": "TCP"} for name, port in serving_ports(params)
        ],
        "resources": container_resources(params),
        "volumeMounts": [
            {
                "name": "artifact",
                "mountPath": ARTIFACT_MOUNT,
                "subPath": params.artifact_sub_path,
                "readOnly": True,
            },
            {"name": "config", "mountPath": CONFIG_MOUNT, "readOnly": True},
            {"name": "model-repository", "mountPath": MODEL_REPOSITORY},
            {"name": "shm", "mountPath": "/dev/shm"},
        ],
        "env": [
            {"name": "ENGINE_KEY", "value": params.engine_key},
            {"name": "HF_HUB_OFFLINE", "value": "1"},
            {"name": "HOME", "value": SERVING_HOME},
            admin_key_env(params),
            *(extra_env or []),
        ],
        "securityContext": container_security,
        "terminationMessagePolicy": "FallbackToLogsOnError",
    }
    if params.artifact_s3 is not None:  # an emptyDir filled by the init container: no subPath
        container["volumeMounts"][0].pop("subPath")
    if command is None:
        container.update(probes(params))
    spec: dict[str, Any] = {
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "securityContext": pod_security,
        "terminationGracePeriodSeconds": 60,
        "affinity": affinity(params),
        "containers": [container],
        "volumes": [
            artifact_volume(params),
            {
                "name": "config",
                "configMap": {"name": configmap["metadata"]["name"], "items": volume_items(configmap)},
            },
            {"name": "model-repository", "emptyDir": {}},
            {"name": "shm", "emptyDir": {"medium": "Memory", "sizeLimit": params.server.shared_memory}},
        ],
    }
    if params.artifact_s3 is not None:
        spec["initContainers"] = [{**fetch_container(params), "securityContext": dict(container_security)}]
    if params.node_selector:
        spec["nodeSelector"] = dict(params.node_selector)
    if params.tolerations:
        spec["tolerations"] = [dict(t) for t in params.tolerations]
    if params.priority_class_name:
        spec["priorityClassName"] = params.priority_class_name
    if params.runtime_class_name:
        spec["runtimeClassName"] = params.runtime_class_name
    if params.image_pull_secrets:
        spec["imagePullSecrets"] = [{"name": n} for n in params.image_pull_secrets]
    annotations = {
        **params.pod_annotations,
        ANNOTATION_ENGINE_KEY: params.engine_key,
        ANNOTATION_CONFIG_HASH: config_hash,
    }
    return {
        "metadata": {"labels": {**pod_labels(params), **(extra_labels or {})}, "annotations": annotations},
        "spec": spec,
    }


def desired_deployment(params: ServingParams, configmap: Mapping[str, Any]) -> dict[str, Any]:
    """``apps/v1`` Deployment ``<name>``: ``params.replicas`` pods of ``world_size`` GPUs each.

    Errors: ``ValueError`` when one replica needs more GPUs than a node has (render a
    LeaderWorkerSet instead, :mod:`trtllm_operator.render.leaderworkerset`).
    """
    if params.multi_node:
        raise ValueError(
            f"one replica needs {params.world_size} GPUs (tensor {params.tensor_parallelism} × pipeline "
            f"{params.pipeline_parallelism}) but a {params.gpu_product} node has {params.gpus_per_node}: "
            "render a LeaderWorkerSet"
        )
    meta = metadata(params, child_name(params.name))
    meta["annotations"] = {ANNOTATION_ENGINE_KEY: params.engine_key}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": meta,
        "spec": {
            "replicas": params.replicas,
            "selector": {"matchLabels": selector_labels(params)},
            "strategy": {
                "type": "RollingUpdate",
                "rollingUpdate": {
                    "maxSurge": params.rollout.max_surge,
                    "maxUnavailable": params.rollout.max_unavailable,
                },
            },
            "progressDeadlineSeconds": params.rollout.progress_deadline_seconds,
            "revisionHistoryLimit": 3,
            "template": pod_template(params, configmap),
        },
    }
