"""A LeaderWorkerSet (``leaderworkerset.x-k8s.io/v1``) for replicas that span several nodes.

When ``tensor × pipeline`` exceeds the GPUs of one node of the engine's product, one replica is a
group of ``ceil(world size / GPUs per node)`` pods: the leader (LWS worker index 0) runs ``mpirun``
over every pod of its group and serves HTTP/gRPC/metrics; the workers only host MPI ranks. This is
the shape of Triton's multi-node tutorial (``tutorials/Deployment/Kubernetes/
TensorRT-LLM_Multi-Node_Distributed_Models``, docs/reference/tensorrt-llm.md §4.4): Open MPI reaches the
workers over
SSH, so **the serving image must provide ``sshd`` and a shared SSH key** (see docs/serving.md);
workers run ``/usr/sbin/sshd -D`` as their main process.

Host list: LWS names the leader ``<lws>-<group>`` and workers ``<lws>-<group>-<index>`` under the
headless Service ``<lws>``, and gives every pod ``LWS_LEADER_ADDRESS`` and ``LWS_GROUP_SIZE``; the
leader's script derives the workers' addresses from them. Each host offers ``gpus_per_node`` slots.

``restartPolicy: RecreateGroupOnPodRestart``: an MPI job cannot survive the loss of one rank, so a
restarted pod recreates its whole group. Rollout uses the same GPU-safe ``maxSurge: 0`` default.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from trtllm_operator.api.wire import ANNOTATION_ENGINE_KEY, LWS_API_VERSION
from trtllm_operator.decide.serving_params import ServingParams
from trtllm_operator.render.deployment import pod_template
from trtllm_operator.render.serving import child_name, metadata


def desired_leaderworkerset(params: ServingParams, configmap: Mapping[str, Any]) -> dict[str, Any]:
    """LeaderWorkerSet ``<name>``: ``params.replicas`` groups of ``nodes_per_replica`` pods.

    ``configmap`` must be rendered for a multi-node replica (its ``launch.sh`` contains the
    host-list expression). Errors: ``ValueError`` when the replica fits one node (use a Deployment).
    """
    if not params.multi_node:
        raise ValueError(
            f"one replica needs {params.world_size} GPUs and fits a {params.gpus_per_node}-GPU node: "
            "render a Deployment"
        )
    leader = pod_template(params, configmap)
    worker = pod_template(params, configmap, command=["/usr/sbin/sshd", "-D", "-e"])
    meta = metadata(params, child_name(params.name))
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
                "workerTemplate": worker,
            },
        },
    }
