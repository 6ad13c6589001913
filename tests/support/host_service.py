"""A process on this host published as a Kubernetes Service, for the API server to reach.

The local control plane runs no kubelet and no kube-proxy: a webhook server or an aggregated API
server started by a test is a process on this host. kube-apiserver runs with
``--enable-aggregator-routing=true`` (hack/localcluster/controlplane.py), so it reaches a Service
named by a webhook or an APIService at the address of the Service's EndpointSlice (kubernetes
v1.34.4 ``cmd/kube-apiserver/app/server.go`` ``buildServiceResolver`` → k8s.io/apiserver
``pkg/util/proxy`` ``ResolveEndpoint``, which matches the slice port by the Service port's name), not
at the ClusterIP that nothing routes here. So the Service has no selector and the test writes its
EndpointSlice itself, at this host's first non-loopback IPv4 address (the API server refuses
loopback addresses in EndpointSlices): :func:`host_address`.

Used by tests/support/lws.py (the LeaderWorkerSet manager's admission webhooks),
tests/support/monitoring.py (prometheus-adapter's ``custom.metrics.k8s.io``), and tests/support/keda.py
(KEDA's ``external.metrics.k8s.io``).
"""

from __future__ import annotations

import subprocess
from typing import Any

#: ``endpointslice.kubernetes.io/managed-by`` of the slices the tests write (not the
#: EndpointSlice controller's ``endpointslice-controller.k8s.io``, so it leaves them alone).
MANAGED_BY = "tests.trtllm-operator.dev"


class HostAddressError(RuntimeError):
    """This host has no global-scope IPv4 address to publish."""


def host_address() -> str:
    """This host's first global-scope IPv4 address (``ip -o -4 addr show scope global``)."""
    out = subprocess.run(
        ["ip", "-o", "-4", "addr", "show", "scope", "global"], capture_output=True, text=True, check=True
    ).stdout
    for line in out.splitlines():
        fields = line.split()
        if "inet" in fields:
            return fields[fields.index("inet") + 1].split("/")[0]
    raise HostAddressError(
        "no global IPv4 address on this host: the API server reaches a webhook or an aggregated API "
        "only at a non-loopback EndpointSlice address"
    )


def host_service(name: str, namespace: str, *, port: int, host: str, host_port: int) -> list[dict[str, Any]]:
    """Service ``name`` (port ``port``, no selector) and its EndpointSlice ``<name>-host`` pointing at
    ``host``:``host_port``, where a process on this host listens."""
    return [
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": name, "namespace": namespace},
            # no selector: the endpoint is a process on this host, the slice below
            "spec": {"ports": [{"port": port, "protocol": "TCP", "targetPort": host_port}]},
        },
        # ResolveEndpoint matches the slice port by the Service port's name ("" here)
        host_endpoint_slice(name, namespace, port_name="", host=host, host_port=host_port),
    ]


def host_endpoint_slice(
    service: str, namespace: str, *, port_name: str, host: str, host_port: int
) -> dict[str, Any]:
    """The EndpointSlice ``<service>-host`` of Service ``service``: its port ``port_name`` served at
    ``host``:``host_port`` by a process on this host, labelled ``kubernetes.io/service-name`` and marked
    as not the EndpointSlice controller's (the local control plane runs none; kwok pod IPs are
    loopback addresses, which the API server refuses in EndpointSlices)."""
    return {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": f"{service}-host",
            "namespace": namespace,
            "labels": {
                "kubernetes.io/service-name": service,
                "endpointslice.kubernetes.io/managed-by": MANAGED_BY,
            },
        },
        "addressType": "IPv4",
        "ports": [{"name": port_name, "port": host_port, "protocol": "TCP"}],
        "endpoints": [{"addresses": [host], "conditions": {"ready": True}}],
    }
