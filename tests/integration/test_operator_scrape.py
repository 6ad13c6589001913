"""The operator's per-LLMDeployment series through a real Prometheus, scraped as the chart's
ServiceMonitor asks, and the dashboard's autoscaler panels on them (audit B12).

The operator's autoscaler gauges carry the LLMDeployment's ``namespace`` label; the target the
Prometheus Operator makes from the chart's ServiceMonitor carries the operator's own ``namespace``
(``__meta_kubernetes_namespace`` → ``namespace``, prometheus-operator v0.85.0
``pkg/prometheus/promcfg.go``). Prometheus resolves the clash by ``honor_labels``: true keeps the
scraped label; false renames it to ``exported_namespace`` (Prometheus docs, ``scrape_config``
``honor_labels``). Here a real Prometheus (Debian's ``prometheus``, ``hack/ci-deps.sh``) scrapes the
operator's real registry with the target labels and ``honor_labels`` the chart's ServiceMonitor
gives, and the dashboard's own queries are evaluated with ``$namespace`` set to the LLMDeployment's.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import start_http_server
from support.monitoring import CHART, chart_service_monitor
from support.prometheus import promql, running_prometheus
from support.wait import wait_for

from trtllm_operator.metrics.operator_metrics import (
    AUTOSCALER_CURRENT_REPLICAS,
    AUTOSCALER_DESIRED_REPLICAS,
    REGISTRY,
)

DASHBOARD = CHART / "files" / "grafana-dashboard.json"
OPERATOR_NAMESPACE = "trtllm-system"
DEPLOYMENT_NAMESPACE = "team-a"


def scrape_config(monitor: dict[str, Any], target: str) -> dict[str, Any]:
    """The scrape job prometheus-operator generates for the monitor's first endpoint, with the
    target labels it attaches (``namespace``, ``service``, ``endpoint``, ``job``) given statically
    in place of Kubernetes service discovery (Debian's Prometheus has none)."""
    (endpoint,) = monitor["spec"]["endpoints"]
    name, ns = monitor["metadata"]["name"], monitor["metadata"]["namespace"]
    return {
        "job_name": f"serviceMonitor/{ns}/{name}/0",
        "honor_labels": bool(endpoint.get("honorLabels", False)),
        "static_configs": [
            {
                "targets": [target],
                "labels": {"namespace": ns, "service": name, "endpoint": endpoint["port"], "job": name},
            }
        ],
    }


@pytest.fixture
def operator_exporter() -> Iterator[int]:
    """The operator's registry served on 127.0.0.1 with one autoscaled LLMDeployment's gauges."""
    server, thread = start_http_server(0, addr="127.0.0.1", registry=REGISTRY)  # the kernel picks the port
    port = int(server.server_port)
    AUTOSCALER_DESIRED_REPLICAS.labels(namespace=DEPLOYMENT_NAMESPACE, name="llama-b12").set(3)
    AUTOSCALER_CURRENT_REPLICAS.labels(namespace=DEPLOYMENT_NAMESPACE, name="llama-b12").set(2)
    try:
        yield port
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
    tmp_path: Path, operator_exporter: int, honor: str
) -> None:
    monitor = chart_service_monitor(OPERATOR_NAMESPACE, tmp_path)
    job = scrape_config(monitor, f"127.0.0.1:{operator_exporter}")
    if honor == "false":  # what the chart shipped before: the clash renames the label
        job["honor_labels"] = False
    else:
        assert job["honor_labels"] is True
    with running_prometheus({"global": {"scrape_interval": "1s"}, "scrape_configs": [job]}, tmp_path) as url:
        wait_for(
            lambda: promql(url, 'trtllm_operator_autoscaler_desired_replicas{name="llama-b12"}'),
            timeout=60,
            desc="the operator's gauge scraped",
        )
        (series,) = promql(url, 'trtllm_operator_autoscaler_desired_replicas{name="llama-b12"}')
        panels = [q.replace("$namespace", DEPLOYMENT_NAMESPACE) for q in autoscaler_panel_queries()]
        found = [promql(url, q) for q in panels]
        if honor == "chart":
            assert series["metric"]["namespace"] == DEPLOYMENT_NAMESPACE
            assert [[r["value"][1] for r in rows] for rows in found] == [["3"], ["2"]]
        else:
            assert series["metric"]["namespace"] == OPERATOR_NAMESPACE
            assert series["metric"]["exported_namespace"] == DEPLOYMENT_NAMESPACE
            assert found == [[], []]  # the dashboard's namespace filter misses the deployment
