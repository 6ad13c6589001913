"""The Service in front of a deployment's Triton pods: HTTP 8000, gRPC 8001 (``api: triton``); the
OpenAI frontend's 9000 (``api: openai``); 9000, 8000 and 8001 (``api: both``).

Ports are Triton's defaults (docs/reference/tensorrt-llm.md §4.5). Client ports only
(:func:`~trtllm_operator.render.serving.client_ports`): the Service may be a NodePort or a
LoadBalancer, and Triton's metrics port 8002 is no client's business — the pods still declare it as
container port ``metrics``, where the autoscaler, the tuning advisor and the chart's PodMonitor
scrape each pod (issue 24 item 5). Only Ready pods are endpoints, so a pod still loading its engine
receives no traffic.
"""

from __future__ import annotations

from typing import Any

from trtllm_operator.decide.serving_params import ServingParams
from trtllm_operator.render.leaderworkerset import replica_selector
from trtllm_operator.render.serving import (
    HTTP_PORT,
    OPENAI_PORT,
    child_name,
    client_ports,
    metadata,
    uses_openai_frontend,
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
                {"name": name, "port": port, "targetPort": name, "protocol": "TCP"}
                for name, port in client_ports(params)
            ],
        },
    }


def endpoint(params: ServingParams) -> str:
    """``status.endpoint``: the in-cluster base URL of the Service — KServe v2's (``api: triton``) or the
    OpenAI base URL clients configure (``…:9000/v1``; ``api: openai``/``both``)."""
    host = f"http://{child_name(params.name)}.{params.namespace}.svc"
    if uses_openai_frontend(params.server.api):
        return f"{host}:{OPENAI_PORT}/v1"
    return f"{host}:{HTTP_PORT}"
