"""The Service in front of a deployment's Triton pods: HTTP 8000, gRPC 8001, metrics 8002.

Ports are Triton's defaults (docs/reference/tensorrt-llm.md §4.5); the metrics port is named ``metrics`` so a
ServiceMonitor or the autoscaler's pod scrape can select it by name. Only Ready pods are endpoints,
so a pod still loading its engine receives no traffic.
"""

from __future__ import annotations

from typing import Any

from trtllm_operator.decide.serving_params import ServingParams
from trtllm_operator.render.leaderworkerset import replica_selector
from trtllm_operator.render.serving import (
    GRPC_PORT,
    HTTP_PORT,
    METRICS_PORT,
    child_name,
    metadata,
)


def desired_service(params: ServingParams) -> dict[str, Any]:
    """``v1`` Service ``<name>`` of ``params.service_type`` selecting the deployment's pods.

    For a LeaderWorkerSet the selector adds the leader-pod label (workers serve no HTTP). The name
    stays ``<name>`` for both shapes; the LeaderWorkerSet is named ``<name>-lws`` so that this
    Service never takes the name of LWS's headless Service
    (:mod:`trtllm_operator.render.leaderworkerset`).
    """
    meta = metadata(params, child_name(params.name))
    meta["labels"] = {**params.service_labels, **meta["labels"]}
    if params.service_annotations:
        meta["annotations"] = dict(params.service_annotations)
    selector = replica_selector(params)
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": meta,
        "spec": {
            "type": params.service_type,
            "selector": selector,
            "ports": [
                {"name": "http", "port": HTTP_PORT, "targetPort": "http", "protocol": "TCP"},
                {"name": "grpc", "port": GRPC_PORT, "targetPort": "grpc", "protocol": "TCP"},
                {"name": "metrics", "port": METRICS_PORT, "targetPort": "metrics", "protocol": "TCP"},
            ],
        },
    }


def endpoint(params: ServingParams) -> str:
    """``status.endpoint``: the in-cluster HTTP base URL of the Service."""
    return f"http://{child_name(params.name)}.{params.namespace}.svc:{HTTP_PORT}"
