"""ServiceAccount tokens for the operator's authenticated /metrics (trtllm_operator.kube.metrics_auth).

:func:`metrics_tokens` makes two ServiceAccounts in a namespace and returns a token of each: one bound
to a ClusterRole with the rule the chart's ``<namespace>-<fullname>-metrics-reader`` grants
(``nonResourceURLs: ["/metrics"], verbs: ["get"]``, charts/trtllm-operator/templates/rbac.yaml), one
bound to nothing. Tokens come from the API server's TokenRequest (``kubectl create token``).
:func:`get_metrics` reads the endpoint the way the chart's ServiceMonitor does (HTTPS without
verification, the operator's default self-signed certificate; a bearer token).
"""

from __future__ import annotations

import ssl
import urllib.error
import urllib.request
from dataclasses import dataclass

from kubernetes import client

from support.cluster import LocalCluster

#: The rule of the chart's metrics-reader ClusterRole (tests/unit/test_chart.py checks they agree).
METRICS_READER_RULE = {"nonResourceURLs": ["/metrics"], "verbs": ["get"]}


def get_metrics(
    port: int, path: str = "/metrics", token: str | None = None, context: ssl.SSLContext | None = None
) -> tuple[int, str]:
    """``(status, body)`` of ``GET https://127.0.0.1:<port><path>``; ``context`` verifies the server
    (default: none, as the chart's ServiceMonitor ``tlsConfig.insecureSkipVerify``)."""
    if context is None:
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    request = urllib.request.Request(f"https://127.0.0.1:{port}{path}")
    if token is not None:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=30, context=context) as resp:
            return int(resp.status), resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


@dataclass(frozen=True)
class MetricsTokens:
    reader: str  # may get /metrics
    stranger: str  # authenticated, not authorized
    reader_user: str
    stranger_user: str


def metrics_tokens(cluster: LocalCluster, namespace: str) -> MetricsTokens:
    """Tokens of ServiceAccounts ``metrics-reader`` (authorized) and ``stranger`` in ``namespace``;
    the ClusterRole and its binding are named after the namespace (deleted with
    :func:`delete_metrics_reader`)."""
    core = client.CoreV1Api(cluster.api)
    rbac = client.RbacAuthorizationV1Api(cluster.api)
    for sa in ("metrics-reader", "stranger"):
        core.create_namespaced_service_account(namespace, {"metadata": {"name": sa}})
    name = f"{namespace}-metrics-reader"
    rbac.create_cluster_role({"metadata": {"name": name}, "rules": [METRICS_READER_RULE]})
    rbac.create_cluster_role_binding(
        {
            "metadata": {"name": name},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
            "subjects": [{"kind": "ServiceAccount", "name": "metrics-reader", "namespace": namespace}],
        }
    )

    def token(sa: str) -> str:
        return cluster.kubectl("create", "token", sa, "-n", namespace, "--duration", "10m").stdout.strip()

    return MetricsTokens(
        reader=token("metrics-reader"),
        stranger=token("stranger"),
        reader_user=f"system:serviceaccount:{namespace}:metrics-reader",
        stranger_user=f"system:serviceaccount:{namespace}:stranger",
    )


def delete_metrics_reader(cluster: LocalCluster, namespace: str) -> None:
    rbac = client.RbacAuthorizationV1Api(cluster.api)
    name = f"{namespace}-metrics-reader"
    for delete in (rbac.delete_cluster_role_binding, rbac.delete_cluster_role):
        try:
            delete(name)
        except client.ApiException as exc:
            if exc.status != 404:
                raise
