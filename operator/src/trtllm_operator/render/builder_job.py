"""The builder Job, its build-spec ConfigMap and the operator-created artifact PVC, as manifests.

Pure: inputs are the LLMEngine (metadata only), the prepared build
(:class:`~trtllm_operator.decide.engine_spec.PreparedEngine`) and the operator settings; no client, no
clock. The handler creates what these return and never patches a running builder Job (a Job's
pod template is immutable; a spec change that matters changes the engine key, hence the name).

Choices, and why:

* **Name** from the engine key and storage (``build-<key[:16]>-<storage[:6]>``): a retry, a
  restarted operator or a second LLMEngine with the same key finds the same Job (AlreadyExists).
* **GPUs**: :func:`~trtllm_operator.api.engine.builder_gpus` — ``spec.gpu.resources.gpus``, else
  the replica's world size (tensor × pipeline, at least ``build.workers``): calibration loads the
  model over the GPUs the engine will use.
  **Host memory**: ``spec.gpu.resources.memory``, else derived from the plan — quantization holds
  the unquantized (16-bit) checkpoint in host memory: ``params × 2 B × 1.25 + 8 GiB``.
* **Node affinity** on ``nvidia.com/gpu.product``: an engine only runs on the GPU it was built
  for (reference tensorrt-llm.md §3.3).
* **podFailurePolicy**: ``FailJob`` on the builder's deterministic exit codes (bad spec, out of
  memory, unsupported architecture: a retry cannot help) — the builder's and the model check's —,
  ``Ignore`` on ``DisruptionTarget``
  (preemption, node drain: not counted against ``backoffLimit``). Requires ``restartPolicy: Never``.
* **Secrets**: the Hugging Face token / S3 credentials come in through ``secretKeyRef``; the
  operator never reads them. No service-account token is mounted. ``HF_ENDPOINT`` is the operator's
  ``hf_endpoint`` setting when set (the Hub the plan check read config.json from).
* ``terminationMessagePolicy: FallbackToLogsOnError``: the builder writes its JSON report to
  ``/dev/termination-log``; if it dies first, the log tail becomes the message.
* ``/dev/shm`` is a memory-backed emptyDir (NCCL, PyTorch) sized by the operator setting.
* **Hardened** (:func:`builder_security`): ``RuntimeDefault`` seccomp and no privilege escalation on
  every container; the delivery init container runs as the operator image's non-root user with no
  capabilities. The builder runs as the image's user — root in NVIDIA's Triton images — because it
  writes the artifact volume, whose ownership Kubernetes manages only for some volume types; with
  ``builder_run_as_non_root`` it runs as the images' ``triton-server`` user (uid/gid 1000, fsGroup
  1000, no capabilities, ``HOME=/tmp``): the ``restricted`` Pod Security Standard.
* **Builder delivery** (setting ``builder_delivery``, on by default): the images users name are stock
  NVIDIA images (``nvcr.io/nvidia/tritonserver:<yy.mm>-trtllm-python-py3``) without engine-builder.
  An init container of ``builder_delivery_image`` (the operator image) copies the builder bundle
  onto an emptyDir; the builder container runs ``python3 -m engine_builder`` — the image's own
  interpreter, torch and TensorRT-LLM — with the bundle on ``PYTHONPATH``
  (:func:`engine_builder.contract.bundle_commands`; docs/engine-builder.md "Running on a stock
  image"). Off: the builder image runs its own ``engine-builder`` command.
* **Model check** (a ``pvc://`` model, with builder delivery): the operator cannot read the model's
  ``config.json`` before the build, so it could not plan; an init container of the delivery image
  runs ``engine-builder check`` on the mounted claim first (the plan stage's checks: heads divisible by
  tensor parallelism, fit). A refusal fails the Job within seconds of the pod starting, with the plan
  stage's report, before the TensorRT-LLM image is pulled (kubelet starts init containers one by one
  and pulls a container's image when it starts it: kubernetes@v1.34.4
  ``pkg/kubelet/kuberuntime/kuberuntime_container.go`` ``startContainer``, "Step 1: pull the image").
  The pod still waits for a node with the GPUs free (it requests them for the builder).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

import yaml

from engine_builder.contract import BUNDLE_MOUNT, bundle_commands, bundle_env
from trtllm_operator.api import API_VERSION, ENGINE_KIND
from trtllm_operator.api.engine import LLMEngineSpec, builder_gpus
from trtllm_operator.api.owners import owner_reference
from trtllm_operator.api.wire import (
    ANNOTATION_ENGINE_KEY,
    ARTIFACT_DATA_KEY,
    BUILD_SPEC_DATA_KEY,
    BUILDER_CONTAINER,
    CHECK_CONTAINER,
    COMPONENT_ARTIFACT,
    COMPONENT_BUILDER,
    COMPONENT_STORAGE,
    DELIVERY_CONTAINER,
    GPU_PRODUCT_LABEL,
    GPU_RESOURCE,
    LABEL_COMPONENT,
    LABEL_ENGINE,
    LABEL_ENGINE_KEY,
    LABEL_MANAGED_BY,
    LABEL_NAME,
    LABEL_STORAGE_ID,
    MANAGED_BY,
)
from trtllm_operator.decide.engine_failure import deterministic_exit_codes
from trtllm_operator.decide.engine_spec import PreparedEngine, gpu_products
from trtllm_operator.decide.storage import cache_entry_name
from trtllm_operator.settings import Settings

SPEC_MOUNT = "/etc/engine-builder"
#: The emptyDir the init container that delivers engine-builder (DELIVERY_CONTAINER) fills.
DELIVERY_VOLUME = "engine-builder"
#: The bundle is ~41 MiB (hack/build-builder-bundle.sh); the limit leaves room for a larger one.
DELIVERY_VOLUME_LIMIT = "512Mi"
GIB = 2**30
#: Host-memory headroom over the 16-bit checkpoint for tokenizer, calibration data, framework.
HOST_MEMORY_FIXED_BYTES = 8 * GIB
HOST_MEMORY_FACTOR = 1.25


def engine_owner(engine: Mapping[str, Any], *, controller: bool = True) -> dict[str, Any]:
    """ownerReference to an LLMEngine (``controller`` for the one that created the child)."""
    meta = engine["metadata"]
    return owner_reference(API_VERSION, ENGINE_KIND, meta["name"], meta["uid"], controller=controller)


def builder_identity(prepared: PreparedEngine) -> dict[str, str]:
    """The labels that say "the operator's builder for this key and storage" — the same on a Job
    whichever LLMEngine of the key created it. A Job or build-spec ConfigMap under the builder's
    name without them is not trusted (:func:`~trtllm_operator.decide.ownership.marker_conflict`)."""
    return {
        LABEL_MANAGED_BY: MANAGED_BY,
        LABEL_COMPONENT: COMPONENT_BUILDER,
        LABEL_ENGINE_KEY: prepared.key[:63],
        LABEL_STORAGE_ID: prepared.storage.storage_id,
    }


def builder_labels(prepared: PreparedEngine) -> dict[str, str]:
    """Labels on the Job, its pods and the build-spec ConfigMap."""
    return {
        LABEL_NAME: "trtllm-engine-builder",
        **builder_identity(prepared),
        LABEL_ENGINE: prepared.name[:63],
    }


def storage_labels(prepared: PreparedEngine) -> dict[str, str]:
    """Labels of the operator-created artifact PVC (also its identity: a PVC under that name without
    them was not created by the operator for this LLMEngine and is not trusted)."""
    return {
        LABEL_MANAGED_BY: MANAGED_BY,
        LABEL_COMPONENT: COMPONENT_STORAGE,
        LABEL_ENGINE: prepared.name[:63],
        LABEL_STORAGE_ID: prepared.storage.storage_id,
    }


def cache_entry_labels(key: str, storage_id: str) -> dict[str, str]:
    """Labels of an engine cache entry (with the full key in the annotation of the same name, they
    are what a cache entry must carry to be trusted)."""
    return {
        LABEL_MANAGED_BY: MANAGED_BY,
        LABEL_COMPONENT: COMPONENT_ARTIFACT,
        LABEL_ENGINE_KEY: key[:63],
        LABEL_STORAGE_ID: storage_id,
    }


def builder_memory(prepared: PreparedEngine) -> str | None:
    """Host memory request/limit: the spec's value, else from the plan (Gi, rounded up), else None."""
    if prepared.spec.gpu.resources.memory:
        return prepared.spec.gpu.resources.memory
    if prepared.plan is None:
        return None
    need = prepared.plan.params_total * 2 * HOST_MEMORY_FACTOR + HOST_MEMORY_FIXED_BYTES
    return f"{math.ceil(need / GIB)}Gi"


def _builder_metadata(engine: Mapping[str, Any], prepared: PreparedEngine, **extra: Any) -> dict[str, Any]:
    """Metadata of the builder Job and its build-spec ConfigMap: named like the Job, labelled
    :func:`builder_labels`, owned by the LLMEngine (``extra``: more metadata fields)."""
    return {
        "name": prepared.job_name,
        "namespace": engine["metadata"]["namespace"],
        "labels": builder_labels(prepared),
        **extra,
        "ownerReferences": [engine_owner(engine)],
    }


def desired_build_spec_configmap(engine: Mapping[str, Any], prepared: PreparedEngine) -> dict[str, Any]:
    """The ConfigMap holding the build spec (YAML), named like the Job, owned by the LLMEngine."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": _builder_metadata(engine, prepared),
        "data": {
            BUILD_SPEC_DATA_KEY: yaml.safe_dump(
                prepared.build_spec.model_dump(mode="json"), sort_keys=True, default_flow_style=False
            )
        },
    }


def desired_artifact_pvc(
    engine: Mapping[str, Any], prepared: PreparedEngine, settings: Settings
) -> dict[str, Any]:
    """The operator-created artifact PVC (``storage.createPVC``). NOT owned by the LLMEngine —
    deleting the LLMEngine must not delete artifacts — unless ``reclaimPolicy: Delete``."""
    st = prepared.storage
    spec: dict[str, Any] = {
        "accessModes": [st.create_access_mode],
        "resources": {"requests": {"storage": st.create_size}},
    }
    storage_class = st.create_storage_class or settings.pvc_storage_class
    if storage_class:
        spec["storageClassName"] = storage_class
    meta: dict[str, Any] = {
        "name": st.claim_name,
        "namespace": engine["metadata"]["namespace"],
        "labels": storage_labels(prepared),
    }
    if prepared.deletes_with_engine:
        meta["ownerReferences"] = [engine_owner(engine)]
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": meta, "spec": spec}


def _env(prepared: PreparedEngine, settings: Settings) -> list[dict[str, Any]]:
    env: list[dict[str, Any]] = [
        {"name": "ENGINE_KEY", "value": prepared.key},
        {"name": "HF_HUB_DISABLE_TELEMETRY", "value": "1"},
    ]
    if settings.hf_endpoint:
        # The Hub the plan check fetches config.json from is the one the builder downloads from
        # (model, draft model, calibration dataset): huggingface_hub 2.4.0 reads HF_ENDPOINT
        # (huggingface_hub/constants.py: ENDPOINT = os.getenv("HF_ENDPOINT", ...).rstrip("/")).
        env.append({"name": "HF_ENDPOINT", "value": settings.hf_endpoint})
    ref = prepared.spec.model.credentials_secret_ref
    source = prepared.spec.model.source
    if ref is not None and source.startswith("hf://"):
        env.append(
            {
                "name": prepared.build_spec.model.token_env,
                "valueFrom": {"secretKeyRef": {"name": ref.name, "key": ref.key}},
            }
        )
    secrets: list[str] = []
    if ref is not None and source.startswith("s3://"):
        secrets.append(ref.name)
    draft = prepared.spec.build.speculative_decoding.draft_model
    draft_source = prepared.build_spec.build.speculative_decoding.draft_model
    if draft is not None and draft_source is not None and draft.credentials_secret_ref is not None:
        draft_ref = draft.credentials_secret_ref
        if draft.source.startswith("hf://"):
            env.append(
                {
                    "name": draft_source.token_env,
                    "valueFrom": {"secretKeyRef": {"name": draft_ref.name, "key": draft_ref.key}},
                }
            )
        elif draft.source.startswith("s3://"):
            secrets.insert(0, draft_ref.name)
    if prepared.storage.kind == "s3" and prepared.storage.s3_secret:
        secrets.append(prepared.storage.s3_secret)
    if prepared.storage.endpoint:
        env.append({"name": "AWS_ENDPOINT_URL", "value": prepared.storage.endpoint})
    # One set of AWS variables: the storage's Secret wins (it is where the artifact is written).
    if secrets:
        name = secrets[-1]
        for var in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
            env.append({"name": var, "valueFrom": {"secretKeyRef": {"name": name, "key": var}}})
    return env


#: The operator image's user (operator/Dockerfile ``USER 65532:65532``): the delivery init container.
OPERATOR_IMAGE_UID = 65532
#: The Triton images' non-root ``triton-server`` user (uid = gid = 1000; triton-inference-server/server
#: ``build.py`` ``create_dockerfile_linux``), as :data:`trtllm_operator.render.deployment.TRITON_SERVER_UID`.
TRITON_SERVER_UID = 1000
#: HOME of a non-root builder: ``triton-server`` has no home directory in the image; Hugging Face and
#: PyTorch write caches below HOME.
NON_ROOT_HOME = "/tmp"


def builder_security(settings: Settings) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """``(pod, builder container, delivery container)`` securityContexts (see the module docstring).

    Default (``builder_run_as_non_root`` false): the ``baseline`` Pod Security Standard — the
    image's root user with its default capabilities, ``allowPrivilegeEscalation: false``,
    ``RuntimeDefault`` seccomp. Non-root: the ``restricted`` standard (Kubernetes docs, "Pod
    Security Standards", v1.34)."""
    pod: dict[str, Any] = {"seccompProfile": {"type": "RuntimeDefault"}}
    builder: dict[str, Any] = {"allowPrivilegeEscalation": False}
    if settings.builder_run_as_non_root:
        pod.update(
            {
                "runAsNonRoot": True,
                "runAsUser": TRITON_SERVER_UID,
                "runAsGroup": TRITON_SERVER_UID,
                "fsGroup": TRITON_SERVER_UID,
                "fsGroupChangePolicy": "OnRootMismatch",
            }
        )
        builder["capabilities"] = {"drop": ["ALL"]}
    delivery = {
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
        "runAsNonRoot": True,
        "runAsUser": OPERATOR_IMAGE_UID,
        "runAsGroup": OPERATOR_IMAGE_UID,
    }
    return pod, builder, delivery


def engine_job_pod_spec(
    spec: LLMEngineSpec,
    products: Sequence[str],
    containers: list[dict[str, Any]],
    volumes: list[dict[str, Any]],
) -> dict[str, Any]:
    """The pod spec of a Job that runs on a GPU of the engine's product (the builder Job, the
    benchmark Job): ``restartPolicy: Never``, no service-account token, no service links, node
    affinity on ``nvidia.com/gpu.product`` In ``products``, and the engine's ``spec.gpu``
    ``nodeSelector``, ``tolerations``, ``runtimeClassName`` and ``spec.runtime.imagePullSecrets``."""
    gpu = spec.gpu
    product = {"key": GPU_PRODUCT_LABEL, "operator": "In", "values": sorted(set(products))}
    pod_spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": [product]}]
                }
            }
        },
        "containers": containers,
        "volumes": volumes,
    }
    if gpu.node_selector:
        pod_spec["nodeSelector"] = dict(gpu.node_selector)
    if gpu.tolerations:
        pod_spec["tolerations"] = [t.model_dump(by_alias=True, exclude_none=True) for t in gpu.tolerations]
    if gpu.runtime_class_name:
        pod_spec["runtimeClassName"] = gpu.runtime_class_name
    if spec.runtime.image_pull_secrets:
        pod_spec["imagePullSecrets"] = [{"name": n} for n in spec.runtime.image_pull_secrets]
    return pod_spec


def desired_builder_job(
    engine: Mapping[str, Any], prepared: PreparedEngine, settings: Settings
) -> dict[str, Any]:
    """The builder Job for ``prepared`` (see the module docstring for every choice).

    ``engine`` needs ``metadata.name``, ``namespace`` and ``uid``. Returns a ``batch/v1`` Job.
    """
    spec = prepared.spec
    gpu_spec = spec.gpu
    st = prepared.storage
    labels = builder_labels(prepared)
    gpus = builder_gpus(spec)
    image = settings.builder_image or spec.runtime.image

    limits: dict[str, str] = {GPU_RESOURCE: str(gpus)}
    requests: dict[str, str] = {GPU_RESOURCE: str(gpus)}
    memory = builder_memory(prepared)
    if memory:
        limits["memory"] = requests["memory"] = memory
    if gpu_spec.resources.cpu:
        requests["cpu"] = gpu_spec.resources.cpu
    if gpu_spec.resources.ephemeral_storage:
        limits["ephemeral-storage"] = requests["ephemeral-storage"] = gpu_spec.resources.ephemeral_storage

    volumes: list[dict[str, Any]] = [
        {
            "name": "dshm",
            "emptyDir": {"medium": "Memory", "sizeLimit": f"{settings.builder_shm_bytes // 2**20}Mi"},
        },
        {"name": "build-spec", "configMap": {"name": prepared.job_name}},
    ]
    mounts: list[dict[str, Any]] = [
        {"name": "dshm", "mountPath": "/dev/shm"},
        {"name": "build-spec", "mountPath": SPEC_MOUNT, "readOnly": True},
    ]
    if st.kind == "pvc":
        volumes.append({"name": "artifacts", "persistentVolumeClaim": {"claimName": st.claim_name}})
        mount: dict[str, Any] = {"name": "artifacts", "mountPath": st.MOUNT_PATH}
        if st.sub_path:
            mount["subPath"] = st.sub_path
        mounts.append(mount)
        workdir = f"{st.MOUNT_PATH}/.work/{prepared.key}"
    else:
        volumes.append({"name": "work", "emptyDir": {}})
        mounts.append({"name": "work", "mountPath": "/work"})
        workdir = "/work"
    draft = spec.build.speculative_decoding.draft_model
    claims: list[str] = []
    for source in (spec.model.source, draft.source if draft is not None else ""):
        claim = source[len("pvc://") :].split("/", 1)[0] if source.startswith("pvc://") else ""
        if claim and claim not in claims:
            # The draft model's claim is mounted like the model's (pvc://<claim> → /models/<claim>).
            name = "model" if not claims else "draft-model"
            volumes.append({"name": name, "persistentVolumeClaim": {"claimName": claim, "readOnly": True}})
            mounts.append({"name": name, "mountPath": f"/models/{claim}", "readOnly": True})
            claims.append(claim)

    env = _env(prepared, settings)
    pod_security, builder_security_context, delivery_security = builder_security(settings)
    if settings.builder_run_as_non_root:
        env.append({"name": "HOME", "value": NON_ROOT_HOME})
    init_containers: list[dict[str, Any]] = []
    if settings.builder_delivery:
        init_command, entry = bundle_commands()
        volumes.append({"name": DELIVERY_VOLUME, "emptyDir": {"sizeLimit": DELIVERY_VOLUME_LIMIT}})
        mounts.append({"name": DELIVERY_VOLUME, "mountPath": BUNDLE_MOUNT, "readOnly": True})
        env.extend({"name": k, "value": v} for k, v in bundle_env().items())
        init_containers.append(
            {
                "name": DELIVERY_CONTAINER,
                "image": settings.builder_delivery_image,
                "imagePullPolicy": settings.image_pull_policy,
                "command": init_command,
                "resources": {
                    "requests": {"cpu": "100m", "memory": "64Mi"},
                    "limits": {"memory": "256Mi"},
                },
                "volumeMounts": [{"name": DELIVERY_VOLUME, "mountPath": BUNDLE_MOUNT}],
                "securityContext": delivery_security,
            }
        )
        if spec.model.source.startswith("pvc://"):
            # The operator cannot read a pvc:// model's config.json, so it could not plan: the model's
            # own checks (heads divisible by tensor parallelism, fit) run first, from the small
            # delivery image (which has engine-builder installed), before the TensorRT-LLM image is
            # pulled; a refusal fails the Job in seconds with the plan stage's report
            # (engine_builder.pipeline.check; decide.engine_failure.builder_terminated reads it).
            init_containers.append(
                {
                    "name": CHECK_CONTAINER,
                    "image": settings.builder_delivery_image,
                    "imagePullPolicy": settings.image_pull_policy,
                    "command": ["engine-builder", "check", "--spec", f"{SPEC_MOUNT}/{BUILD_SPEC_DATA_KEY}"],
                    "resources": {
                        "requests": {"cpu": "100m", "memory": "256Mi"},
                        "limits": {"memory": "1Gi"},
                    },
                    "volumeMounts": [m for m in mounts if m["name"] in ("build-spec", "model")],
                    "terminationMessagePath": "/dev/termination-log",
                    "terminationMessagePolicy": "FallbackToLogsOnError",
                    "securityContext": delivery_security,
                }
            )
    else:
        entry = ["engine-builder"]

    container = {
        "name": BUILDER_CONTAINER,
        "image": image,
        "imagePullPolicy": settings.image_pull_policy,
        "command": [*entry, "run", "--spec", f"{SPEC_MOUNT}/{BUILD_SPEC_DATA_KEY}", "--workdir", workdir],
        "env": env,
        "resources": {"limits": limits, "requests": requests},
        "volumeMounts": mounts,
        "terminationMessagePath": "/dev/termination-log",
        "terminationMessagePolicy": "FallbackToLogsOnError",
        "securityContext": builder_security_context,
    }
    pod_spec = engine_job_pod_spec(spec, gpu_products(gpu_spec.product, prepared.gpu), [container], volumes)
    pod_spec["securityContext"] = pod_security
    if init_containers:
        pod_spec["initContainers"] = init_containers
    if settings.builder_service_account:
        pod_spec["serviceAccountName"] = settings.builder_service_account

    pod_labels = {**(gpu_spec.pod_labels or {}), **labels}
    rules: list[dict[str, Any]] = []
    codes = deterministic_exit_codes()
    if codes:
        rules += [
            {"action": "FailJob", "onExitCodes": {"containerName": name, "operator": "In", "values": codes}}
            for name in (
                BUILDER_CONTAINER,
                *(c["name"] for c in init_containers if c["name"] == CHECK_CONTAINER),
            )
        ]
    rules.append({"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]})
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": _builder_metadata(engine, prepared, annotations={ANNOTATION_ENGINE_KEY: prepared.key}),
        "spec": {
            "backoffLimit": gpu_spec.backoff_limit,
            "activeDeadlineSeconds": gpu_spec.active_deadline_seconds,
            "podFailurePolicy": {"rules": rules},
            "template": {
                "metadata": {"labels": pod_labels, "annotations": dict(gpu_spec.pod_annotations or {})},
                "spec": pod_spec,
            },
        },
    }


def desired_cache_entry(
    namespace: str, record: Mapping[str, Any], *, owner: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The engine cache index entry: a ConfigMap recording one completed artifact.

    The operator cannot look inside PVCs or buckets, so "an artifact with this key exists in this
    storage" is recorded here when a build completes (or ``trtllm-operator cache import`` registers
    one built elsewhere). Deliberately NOT owned by any LLMEngine: artifacts outlive the objects
    that built them (reclaimPolicy Retain). ``record`` is
    :func:`~trtllm_operator.decide.engine_cache.artifact_record`'s output. ``owner``: an LLMEngine whose
    deletion removes the entry (only with reclaimPolicy Delete on an operator-created PVC).
    """
    key = str(record["engineKey"])
    storage_id = str(record["storageId"])
    meta: dict[str, Any] = {
        "name": cache_entry_name(key, storage_id),
        "namespace": namespace,
        "labels": cache_entry_labels(key, storage_id),
        "annotations": {ANNOTATION_ENGINE_KEY: key},
    }
    if owner is not None:
        meta["ownerReferences"] = [engine_owner(owner)]
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": meta,
        "data": {ARTIFACT_DATA_KEY: json.dumps(dict(record), sort_keys=True, indent=2)},
    }
