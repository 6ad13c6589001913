"""The NetworkPolicy ``<name>`` in front of a deployment's serving pods (issue 24 item 5). Pure.

Selects every pod of the deployment (leaders and workers) and admits ingress only as follows
(``networking.k8s.io/v1``; Kubernetes docs "Network Policies", v1.34):

1. **client ports** (:func:`~trtllm_operator.render.serving.client_ports`: 8000/8001, or 9000 with
   the OpenAI frontend) from the pods of the deployment's own namespace and of the namespaces the
   admin lists (``TRTLLM_OPERATOR_SERVING_CLIENT_NAMESPACES``: a gateway, an InferencePool's
   endpoint picker, clients elsewhere). A ``NodePort``/``LoadBalancer`` Service
   (``spec.service.type``) says the user exposes the model beyond the cluster: then the client ports
   admit every source (``from`` left out) — traffic through a node port or load balancer arrives from
   node or external addresses no pod or namespace selector matches;
2. **the metrics port** (8002; the OpenAI frontend's 9000) from the operator's namespace (its
   built-in autoscaler and tuning advisor scrape each pod) and the monitoring namespaces
   (``TRTLLM_OPERATOR_SERVING_MONITORING_NAMESPACES``, default ``monitoring``: Prometheus, the
   chart's PodMonitor);
3. **multi-node replicas**: every port from the pods of the same deployment — the leader's ``ssh``
   to the workers' ``sshd`` (22) and Open MPI's and NCCL's connections between ranks (ports chosen
   at run time), never from another deployment's pods.

Namespaces are matched by the ``kubernetes.io/metadata.name`` label the API server sets on every
namespace (v1.22+). Egress is not restricted (``policyTypes: [Ingress]``): an S3 artifact's fetch
and NCCL need it. A NetworkPolicy is enforced only by a network plugin that implements it (Calico,
Cilium, …); without one it is accepted and has no effect. Kubelet probes come from the node and are
admitted by the common plugins regardless of the policy.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from trtllm_operator.decide.serving_params import ServingParams
from trtllm_operator.render.serving import (
    child_name,
    client_ports,
    metadata,
    metrics_port,
    selector_labels,
)
from trtllm_operator.settings import Settings

#: The label the API server puts on every Namespace, its name (Kubernetes "Well-Known Labels").
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"
#: Service types that expose the client ports beyond the cluster.
EXTERNAL_SERVICE_TYPES = ("NodePort", "LoadBalancer")


@dataclass(frozen=True)
class ServingNetwork:
    """Who may reach serving pods besides their own namespace (the operator's settings)."""

    #: Namespace of the operator (its autoscaler scrapes the metrics port).
    operator_namespace: str
    #: Namespaces whose pods may use the client ports.
    client_namespaces: tuple[str, ...] = ()
    #: Namespaces whose pods may scrape the metrics port (Prometheus).
    monitoring_namespaces: tuple[str, ...] = ("monitoring",)


def _namespaces(names: Sequence[str]) -> dict[str, Any]:
    return {
        "namespaceSelector": {
            "matchExpressions": [
                {"key": NAMESPACE_NAME_LABEL, "operator": "In", "values": sorted(set(names))}
            ]
        }
    }


def _ports(numbers: Sequence[int]) -> list[dict[str, Any]]:
    return [{"protocol": "TCP", "port": p} for p in sorted(set(numbers))]


def desired_network_policy(params: ServingParams, network: ServingNetwork) -> dict[str, Any]:
    """``networking.k8s.io/v1`` NetworkPolicy ``<name>`` (see the module docstring)."""
    clients: dict[str, Any] = {"ports": _ports([p for _, p in client_ports(params)])}
    if params.service_type not in EXTERNAL_SERVICE_TYPES:
        peers: list[dict[str, Any]] = [{"podSelector": {}}]  # the deployment's own namespace
        others = [n for n in network.client_namespaces if n != params.namespace]
        if others:
            peers.append(_namespaces(others))
        clients["from"] = peers
    ingress = [
        clients,
        {
            "from": [_namespaces([network.operator_namespace, *network.monitoring_namespaces])],
            "ports": _ports([metrics_port(params.server.api)]),
        },
    ]
    if params.multi_node:
        ingress.append({"from": [{"podSelector": {"matchLabels": selector_labels(params)}}]})
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": metadata(params, child_name(params.name)),
        "spec": {
            "podSelector": {"matchLabels": selector_labels(params)},
            "policyTypes": ["Ingress"],
            "ingress": ingress,
        },
    }


def serving_network(settings: Settings) -> ServingNetwork | None:
    """The :class:`ServingNetwork` of the operator's settings; None when
    ``serving_network_policy`` is off (no NetworkPolicy is rendered)."""
    if not settings.serving_network_policy:
        return None
    return ServingNetwork(
        operator_namespace=settings.operator_namespace,
        client_namespaces=settings.serving_client_namespaces,
        monitoring_namespaces=settings.serving_monitoring_namespaces,
    )
