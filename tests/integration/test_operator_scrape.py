"""The operator's per-LLMDeployment series through a real Prometheus, scraped as the chart's
ServiceMonitor asks, and the dashboard's autoscaler panels on them (audit B12).

The operator's autoscaler gauges carry the LLMDeployment's ``namespace`` label; the target the
Prometheus Operator makes from the chart's ServiceMonitor carries the operator's own ``namespace``
(``__meta_kubernetes_namespace`` → ``namespace``, prometheus-operator v0.85.0
``pkg/prometheus/promcfg.go``). Prometheus resolves the clash by ``honor_labels``: true keeps the
scraped label; false renames it to ``exported_namespace`` (Prometheus docs, ``scrape_config``
``honor_labels``).

The scrape job is the product's: the chart's metrics Service and ServiceMonitor (``helm template``),
reconciled by the real prometheus-operator into the configuration a Go-built Prometheus 3.16 runs
(tests/support/monitoring.py ``running_service_monitoring``), which discovers the Service's endpoint
through the API server (kubernetes_sd, role endpointslice) and scrapes the operator's real registry.
The dashboard's own queries are then evaluated with ``$namespace`` set to the LLMDeployment's.

What stands in, and why:

- the operator's pod: the operator's registry is served by this test process, on a non-loopback
  address of this host (:func:`support.host_service.host_address`) — the chain is about the scrape
  job and its labels, not about the operator's Deployment;
- the EndpointSlice controller: the local control plane does not run it (kwok pod IPs are loopback
  addresses, which the API server refuses in EndpointSlices, hack/localcluster/controlplane.py), so the
  test writes the chart Service's EndpointSlice at that address
  (:func:`support.monitoring.endpoint_slice`), port named ``metrics`` as the Service's;
- the chart is rendered with ``metrics.secure=false`` and ``metrics.auth=false``: the test's exporter
  is plain HTTP without a TokenReview, so the ServiceMonitor's endpoint has neither ``scheme: https``
  nor ``bearerTokenFile`` (the chart's defaults, not exercised here).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client import start_http_server
from support.cluster import LocalCluster
from support.host_service import host_address
from support.monitoring import CHART, chart_operator_metrics, running_service_monitoring
from support.prometheus import promql, scrape_targets
from support.wait import wait_for

from trtllm_operator.metrics.operator_metrics import (
    AUTOSCALER_CURRENT_REPLICAS,
    AUTOSCALER_DESIRED_REPLICAS,
    REGISTRY,
)

pytestmark = pytest.mark.slow

DASHBOARD = CHART / "files" / "grafana-dashboard.json"
#: the namespace label of the LLMDeployment's series; the operator (its Service) is in the test's own
DEPLOYMENT_NAMESPACE = "team-a"
PROMETHEUS = "operator"


@pytest.fixture
def operator_exporter() -> Iterator[tuple[str, int]]:
    """The operator's registry served on this host's non-loopback address with one autoscaled
    LLMDeployment's gauges; yields (address, port)."""
    host = host_address()
    server, thread = start_http_server(0, addr=host, registry=REGISTRY)  # the kernel picks the port
    port = int(server.server_port)
    AUTOSCALER_DESIRED_REPLICAS.labels(namespace=DEPLOYMENT_NAMESPACE, name="llama-b12").set(3)
    AUTOSCALER_CURRENT_REPLICAS.labels(namespace=DEPLOYMENT_NAMESPACE, name="llama-b12").set(2)
    try:
        yield host, port
    finally:
        for gauge in (AUTOSCALER_DESIRED_REPLICAS, AUTOSCALER_CURRENT_REPLICAS):
            gauge.remove(DEPLOYMENT_NAMESPACE, "llama-b12")
        server.shutdown()
        thread.join(5)


def autoscaler_panel_queries() -> list[str]:
    doc = json.loads(DASHBOARD.read_text())
    (panel,) = (p for p in doc["panels"] if p.get("title") == "Autoscaler: desired vs current replicas")
    return [t["expr"] for t in panel["targets"]]


@pytest.mark.parametrize("honor", ["chart", "false"])
def test_dashboard_autoscaler_panels_see_the_deployments_namespace(
    cluster: LocalCluster, namespace: str, tmp_path: Path, operator_exporter: tuple[str, int], honor: str
) -> None:
    host, port = operator_exporter
    service, monitor = chart_operator_metrics(
        namespace, {"prometheus": PROMETHEUS}, tmp_path, ["metrics.secure=false", "metrics.auth=false"]
    )
    (endpoint,) = monitor["spec"]["endpoints"]
    assert endpoint["port"] == "metrics" and "scheme" not in endpoint and "bearerTokenFile" not in endpoint
    if honor == "false":  # what the chart shipped before: the clash renames the label
        endpoint["honorLabels"] = False
    else:
        assert endpoint["honorLabels"] is True
    with running_service_monitoring(
        cluster, namespace, PROMETHEUS, tmp_path, service=service, monitor=monitor, host=host, port=port
    ) as url:
        wait_for(
            lambda: promql(url, 'trtllm_operator_autoscaler_desired_replicas{name="llama-b12"}'),
            timeout=120,
            interval=0.5,
            desc="the operator's gauge scraped",
        )
        # The one target is the chart Service's endpoint, through the ServiceMonitor's job.
        (target,) = scrape_targets(url)["activeTargets"]
        assert target["scrapePool"] == f"serviceMonitor/{namespace}/{monitor['metadata']['name']}/0", target
        assert target["scrapeUrl"] == f"http://{host}:{port}/metrics", target
        labels = target["labels"]
        assert (labels["namespace"], labels["service"], labels["endpoint"]) == (
            namespace,
            service["metadata"]["name"],
            "metrics",
        ), labels
        (series,) = promql(url, 'trtllm_operator_autoscaler_desired_replicas{name="llama-b12"}')
        panels = [q.replace("$namespace", DEPLOYMENT_NAMESPACE) for q in autoscaler_panel_queries()]
        found = [promql(url, q) for q in panels]
        if honor == "chart":
            assert series["metric"]["namespace"] == DEPLOYMENT_NAMESPACE
            assert [[r["value"][1] for r in rows] for rows in found] == [["3"], ["2"]]
        else:
            assert series["metric"]["namespace"] == namespace
            assert series["metric"]["exported_namespace"] == DEPLOYMENT_NAMESPACE
            assert found == [[], []]  # the dashboard's namespace filter misses the deployment
