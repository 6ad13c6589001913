"""What every serving child is rendered from: names, labels, ports, the launch script. Pure.

Every ``desired_*`` renderer in this package is a pure function of one settled
:class:`~trtllm_operator.decide.serving_params.ServingParams` (no client, no clock): the same
parameters always give the same manifests, byte for byte, so the handler can compare and patch,
and ``trtllm-operator render`` can show a GitOps reviewer exactly what the operator will create.
Whether and how a deployment is served is decided before (:mod:`trtllm_operator.decide.serving`).

Names are deterministic — every child is called after its ``LLMDeployment``, so a retry or a
restarted operator finds the child it created instead of making a second one; the model-repository
ConfigMap also carries a hash of its contents (it is immutable, so a pod that restarts mid-rollout
still reads the files its ReplicaSet was rendered with).

The launch script is rendered here rather than taken from TensorRT-LLM's
``scripts/launch_triton_server.py`` because that script starts ``mpirun`` with ``subprocess.Popen``
and returns without waiting (docs/reference/tensorrt-llm.md §4.4, tensorrtllm_backend#580): as a
container's main process the container would exit at once. We build the same ``mpirun`` line (one
``tritonserver`` rank per GPU, rank 0 serving every model, ranks ≥ 1 loading only
``tensorrt_llm``, docs/reference/tensorrt-llm.md §4.4) and keep it in the foreground under a small
watchdog.
"""

from __future__ import annotations

import hashlib
import json
import re
import shlex
from collections.abc import Mapping, Sequence
from typing import Any

from trtllm_operator.api.wire import (
    COMPONENT_SERVER,
    LABEL_COMPONENT,
    LABEL_DEPLOYMENT,
    LABEL_INSTANCE,
    LABEL_MANAGED_BY,
    LABEL_NAME,
    MANAGED_BY,
)
from trtllm_operator.decide.serving_params import ARTIFACT_MODEL_REPOSITORY, ServingParams

HTTP_PORT = 8000
GRPC_PORT = 8001
METRICS_PORT = 8002

#: Where the operator's files are mounted inside the Triton container (the artifact's mount is
#: :data:`trtllm_operator.decide.serving_params.ARTIFACT_MOUNT`).
CONFIG_MOUNT = "/etc/trtllm-operator"
MODEL_REPOSITORY = "/model-repository"
LAUNCH_SCRIPT = "launch.sh"
#: Fallback when an artifact carries no repository: the templates the Triton TRT-LLM image ships
#: (BE@v0.19.0 README: ``/app/all_models/inflight_batcher_llm``; LLM-API model under ``llmapi``).
IMAGE_TEMPLATES = {
    "tensorrt": "/app/all_models/inflight_batcher_llm",
    "pytorch": "/app/all_models/llmapi",
}


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
        LABEL_NAME: "triton",
        LABEL_INSTANCE: child_name(params.name),
        LABEL_MANAGED_BY: MANAGED_BY,
        LABEL_COMPONENT: COMPONENT_SERVER,
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
