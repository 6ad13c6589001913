"""The Service in front of a deployment's Triton pods: HTTP 8000, gRPC 8001, metrics 8002
(``api: triton``); the OpenAI frontend's 9000 (``api: openai``); 9000, 8000 and 8001 (``api: both``).

Ports are Triton's defaults (docs/reference/tensorrt-llm.md §4.5); the metrics port is named ``metrics`` so a
ServiceMonitor or the autoscaler's pod scrape can select it by name. Only Ready pods are endpoints,
so a pod still loading its engine receives no traffic.
"""

from __future__ import annotations

from typing import Any

from trtllm_operator.decide.serving_params import ServingParams
from trtllm_operator.render.leaderworkerset import replica_selector
from trtllm_operator.render.serving import (
    HTTP_PORT,
    OPENAI_PORT,
    child_name,
    metadata,
    serving_ports,
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
                for name, port in serving_ports(params)
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
