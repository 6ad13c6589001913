"""A LeaderWorkerSet (``leaderworkerset.x-k8s.io/v1``) for replicas that span several nodes.

When ``tensor × pipeline`` exceeds the GPUs of one node of the engine's product, one replica is a
group of ``ceil(world size / GPUs per node)`` pods: the leader (LWS worker index 0) runs ``mpirun``
over every pod of its group and serves HTTP/gRPC/metrics; the workers host the other ranks. What
each pod runs is :mod:`trtllm_operator.render.launch` (``launch.sh`` on the leader, ``worker.sh`` on
the workers, ``rank-env.sh`` in front of every rank); Open MPI reaches the workers over SSH, so
**the serving image must provide ``sshd``** (``/usr/sbin/sshd``); the key the leader logs in with
is the deployment's own (Secret ``<name>-credentials``, :mod:`trtllm_operator.render.credentials`).

**Names.** The LeaderWorkerSet is ``<name>-lws`` (:func:`leaderworkerset_name`), not ``<name>``:
LWS names the pods' subdomain after itself and creates a headless Service of that name only if no
Service of that name exists (kubernetes-sigs/lws v0.10.0 ``pkg/controllers/
leaderworkerset_controller.go`` ``reconcileHeadlessServices`` → ``pkg/utils/controller/
controller_utils.go`` ``CreateHeadlessServiceIfNotExists``; the validating webhook requires the
name to be a DNS-1035 label "since the lws name is used as the name for headless service"). The
client Service keeps ``<name>`` (``status.endpoint`` does not change with the replica's shape), so
the pods' DNS names ``<name>-lws-<group>-<index>.<name>-lws.<namespace>`` resolve through LWS's own
headless Service (``publishNotReadyAddresses: true``, so before the pods are Ready). The name is at
most :data:`LWS_NAME_LIMIT` characters so that the worker StatefulSets ``<lws>-<group>`` and their
pods' ``controller-revision-hash`` labels (``<statefulset>-<hash>``) stay within 63.

``restartPolicy: RecreateGroupOnPodRestart``: an MPI job cannot survive the loss of one rank, so a
restarted pod recreates its whole group. Rollout uses the same GPU-safe ``maxSurge: 0`` default.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from trtllm_operator.api.wire import ANNOTATION_ENGINE_KEY, LWS_API_VERSION, LWS_WORKER_INDEX_LABEL
from trtllm_operator.decide.serving_params import ServingParams
from trtllm_operator.render.credentials import ssh_key_volume
from trtllm_operator.render.deployment import pod_template
from trtllm_operator.render.launch import POD_ENV_DIR, SSH_KEY_DIR, SSH_PORT, WORKER_SCRIPT
from trtllm_operator.render.serving import CONFIG_MOUNT, child_name, metadata, selector_labels

#: Suffix of the LeaderWorkerSet's name (see the module docstring).
LWS_SUFFIX = "lws"
#: 63 − len("-<group>-") − 10 (the StatefulSet revision hash) with room for 4-digit group indexes.
LWS_NAME_LIMIT = 47
#: The pods' emptyDir for their saved environment (:data:`trtllm_operator.render.launch.POD_ENV_DIR`).
POD_ENV_VOLUME = "pod-env"


def leaderworkerset_name(name: str) -> str:
    """``<name>-lws``: the LeaderWorkerSet of LLMDeployment ``name`` (a DNS-1035 label ≤ 47)."""
    return child_name(name, LWS_SUFFIX, limit=LWS_NAME_LIMIT)


def workload_names(name: str) -> tuple[tuple[str, str], ...]:
    """``(kind, name)`` of every workload LLMDeployment ``name`` may own: the Deployment ``<name>``,
    the LeaderWorkerSet ``<name>-lws``, and the LeaderWorkerSet ``<name>`` that operator versions
    before the headless-Service fix created (it never started: found again only to be removed)."""
    return (
        ("Deployment", child_name(name)),
        ("LeaderWorkerSet", leaderworkerset_name(name)),
        ("LeaderWorkerSet", child_name(name)),
    )


def replica_selector_string(params: ServingParams) -> str:
    """:func:`replica_selector` as a label-selector string: ``status.selector`` (scale subresource)."""
    return ",".join(f"{k}={v}" for k, v in sorted(replica_selector(params).items()))


def replica_selector(params: ServingParams) -> dict[str, str]:
    """Labels selecting one pod per replica: every pod of a Deployment; a group's leader only.

    As LWS's own HPA selector (``status.hpaPodSelector``): ``leaderworkerset.sigs.k8s.io/name=<lws>,
    leaderworkerset.sigs.k8s.io/worker-index=0`` ("select leaders", kubernetes-sigs/lws v0.10.0
    ``leaderworkerset_controller.go`` ``updateStatus``): workers serve no HTTP and export no metrics,
    so an HPA or the autoscaler that counted them would see missing pods.
    """
    labels = selector_labels(params)
    if params.multi_node:
        labels[LWS_WORKER_INDEX_LABEL] = "0"
    return labels


def _with_pod_env(template: dict[str, Any], params: ServingParams, *, leader: bool) -> dict[str, Any]:
    """``template`` plus the emptyDir where the pod saves its environment for its ranks, and the
    deployment's SSH key (the leader's private key, the workers' ``authorized_keys``) from the
    Secret ``<name>-credentials`` (:func:`~trtllm_operator.render.credentials.ssh_key_volume`)."""
    spec = template["spec"]
    key = ssh_key_volume(params, leader=leader)
    spec["volumes"] += [{"name": POD_ENV_VOLUME, "emptyDir": {"medium": "Memory", "sizeLimit": "1Mi"}}, key]
    spec["containers"][0]["volumeMounts"] += [
        {"name": POD_ENV_VOLUME, "mountPath": POD_ENV_DIR},
        {"name": key["name"], "mountPath": SSH_KEY_DIR, "readOnly": True},
    ]
    return template


def worker_template(params: ServingParams, configmap: Mapping[str, Any]) -> dict[str, Any]:
    """The workers' pod template: ``worker.sh`` (model repository, then ``sshd``), the SSH port,
    ready once ``sshd`` accepts connections (it starts after the model repository is assembled)."""
    template = _with_pod_env(
        pod_template(params, configmap, command=["/bin/bash", f"{CONFIG_MOUNT}/{WORKER_SCRIPT}"]),
        params,
        leader=False,
    )
    container = template["spec"]["containers"][0]
    container["ports"] = [{"name": "ssh", "containerPort": SSH_PORT, "protocol": "TCP"}]
    container["readinessProbe"] = {"tcpSocket": {"port": "ssh"}, "periodSeconds": 10, "timeoutSeconds": 5}
    return template


def desired_leaderworkerset(params: ServingParams, configmap: Mapping[str, Any]) -> dict[str, Any]:
    """LeaderWorkerSet ``<name>-lws``: ``params.replicas`` groups of ``nodes_per_replica`` pods.

    ``configmap`` must be rendered for a multi-node replica (``launch.sh`` is the leader's script,
    ``worker.sh`` and ``rank-env.sh`` are present). Errors: ``ValueError`` when the replica fits one
    node (use a Deployment).
    """
    if not params.multi_node:
        raise ValueError(
            f"one replica needs {params.world_size} GPUs and fits a {params.gpus_per_node}-GPU node: "
            "render a Deployment"
        )
    if WORKER_SCRIPT not in configmap["data"]:
        raise ValueError(
            f"the model-repository ConfigMap has no {WORKER_SCRIPT}: render it for a multi-node replica"
        )
    leader = _with_pod_env(pod_template(params, configmap), params, leader=True)
    meta = metadata(params, leaderworkerset_name(params.name))
    meta["annotations"] = {ANNOTATION_ENGINE_KEY: params.engine_key}
    return {
        "apiVersion": LWS_API_VERSION,
        "kind": "LeaderWorkerSet",
        "metadata": meta,
        "spec": {
            "replicas": params.replicas,
            "startupPolicy": "LeaderCreated",
            "rolloutStrategy": {
                "type": "RollingUpdate",
                "rollingUpdateConfiguration": {
                    "maxSurge": params.rollout.max_surge,
                    "maxUnavailable": params.rollout.max_unavailable,
                },
            },
            "leaderWorkerTemplate": {
                "size": params.nodes_per_replica,
                "restartPolicy": "RecreateGroupOnPodRestart",
                "leaderTemplate": leader,
                "workerTemplate": worker_template(params, configmap),
            },
        },
    }
