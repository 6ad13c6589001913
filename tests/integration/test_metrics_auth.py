"""The operator's /metrics answers only authenticated, authorized clients, decided by the real API
server (TokenReview + SubjectAccessReview, trtllm_operator.kube.metrics_auth; the pattern of
controller-runtime's pkg/metrics/filters WithAuthenticationAndAuthorization)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from support.cluster import LocalCluster
from support.metrics_auth import MetricsTokens, delete_metrics_reader, get_metrics, metrics_tokens
from support.ports import free_port

from trtllm_operator.kube.metrics_auth import MetricsAuthorizer, serve_metrics
from trtllm_operator.kube.metrics_tls import ServingCertificate
from trtllm_operator.metrics.operator_metrics import REGISTRY


@pytest.fixture
def tokens(cluster: LocalCluster, namespace: str) -> Iterator[MetricsTokens]:
    yield metrics_tokens(cluster, namespace)
    delete_metrics_reader(cluster, namespace)


def get(port: int, path: str = "/metrics", token: str | None = None) -> tuple[int, str]:
    return get_metrics(port, path, token)


def test_metrics_need_a_token_the_api_server_authorizes(cluster: LocalCluster, tokens: MetricsTokens) -> None:
    port = free_port()
    server = serve_metrics(
        port, "127.0.0.1", REGISTRY, MetricsAuthorizer(cluster.api), ServingCertificate(None)
    )
    try:
        assert get(port)[0] == 401  # no token
        assert get(port, token="not-a-token")[0] == 401  # the API server does not authenticate it
        status, body = get(port, token=tokens.stranger)  # authenticated, no metrics-reader binding
        assert (status, body.strip()) == (403, f"Authorization denied for user {tokens.stranger_user}")
        status, body = get(port, token=tokens.reader)
        assert status == 200 and "# TYPE trtllm_operator_reconciles_total counter" in body
        # the grant is for the non-resource URL /metrics only
        status, body = get(port, "/debug", token=tokens.reader)
        assert (status, body.strip()) == (403, f"Authorization denied for user {tokens.reader_user}")
        # decisions are cached (controller-runtime's TTLs), so a second scrape still answers
        assert get(port, token=tokens.reader)[0] == 200
        assert get(port, token=tokens.stranger)[0] == 403
    finally:
        server.shutdown()
