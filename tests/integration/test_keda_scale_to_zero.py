"""Audit A6 from upstream behaviour: the KEDA triggers the operator renders vanish with the last
serving pod, so a ScaledObject at ``minReplicaCount: 0`` could never wake (why admission refuses
``minReplicas: 0``, :data:`trtllm_operator.api.deployment.SCALE_TO_ZERO_REFUSAL`).

The series come from the product's own monitoring chain, as in test_keda_controller.py: the chart's
PodMonitor, reconciled by the real prometheus-operator into the configuration a Go-built Prometheus
3.16 runs (tests/support/monitoring.py ``running_chart_monitoring``), which discovers the serving pods
the operator renders through the API server (kubernetes_sd, role pod) and scrapes their ``metrics``
port. What stands in is the kubelet: kwok runs no containers, so the project's Triton metrics emulator
serves on each Running pod's IP, port 8002 (``api.follow_pods``), as in test_hpa_controller.py.

The rendered triggers' queries return one sample while the LLMDeployment's pod serves and an empty
result once ``spec.replicas: 0`` has removed it (the pod leaves Prometheus's pod discovery and its
series go stale). What KEDA does with that empty result is kedacore/keda v2.20.2
``pkg/scalers/prometheus_scaler.go``: ``ExecutePromQuery`` returns 0 when ``len(result.Data.Result) ==
0`` and ``ignoreNullValues`` is true (the default; the rendered triggers do not set it), and
``GetMetricsAndActivity`` reports the trigger active only for ``value > activationThreshold`` (default
0; not rendered either); then ``pkg/scaling/executor/scale_scaledobjects.go`` ``RequestScale`` scales a
target at 0 up only while a trigger is active. KEDA itself is not run here (test_keda_controller.py
runs it); the triggers are rendered by :func:`trtllm_operator.render.keda.desired_scaled_object`.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support.api import Api
from support.cluster import LocalCluster
from support.manifests import a_deployment
from support.monitoring import (
    TRITON_METRICS_PORT,
    require_triton_metrics_port_free,
    running_chart_monitoring,
    triton_load,
)
from support.operator import running_operator
from support.prometheus import promql, scrape_targets
from support.wait import wait_for

from trtllm_operator.api.deployment import AutoscalingSpec
from trtllm_operator.decide.serving_params import OwnerRef
from trtllm_operator.emulator import Fleet
from trtllm_operator.render.keda import desired_scaled_object

pytestmark = [pytest.mark.slow, pytest.mark.cached_engine("llama")]

NAME = "chat"
PROMETHEUS = "scale-to-zero"


def test_the_rendered_triggers_return_nothing_once_the_last_serving_pod_is_gone(
    cluster: LocalCluster, api: Api, tmp_path: Path
) -> None:
    ns = api.ns
    require_triton_metrics_port_free()
    with (
        running_chart_monitoring(cluster, ns, PROMETHEUS, tmp_path) as url,
        # 48 of max 64 (the emulator's max_batch_size) active, KV cache half full
        Fleet(port=TRITON_METRICS_PORT, control=triton_load(48, 0.5)) as fleet,
        api.follow_pods(fleet),
        running_operator(cluster, [ns]),
    ):
        api.create(a_deployment(NAME, "llama", replicas=1))
        uid = api.deployment(NAME)["metadata"]["uid"]
        auto = AutoscalingSpec.model_validate(
            {
                "enabled": True,
                "mode": "keda",
                "minReplicas": 1,
                "maxReplicas": 4,
                "targets": {"activeRequestUtilization": 0.7, "kvCacheUtilization": 0.8},
                "metrics": {"source": "prometheus", "prometheusURL": url},
            }
        )
        triggers = desired_scaled_object(NAME, ns, OwnerRef(NAME, uid), auto)["spec"]["triggers"]
        assert [t["name"] for t in triggers] == ["active-request-utilization", "kv-cache-utilization"]
        # neither knob that could change KEDA's reading of an empty result is rendered
        for trigger in triggers:
            assert not {"ignoreNullValues", "activationThreshold"} & set(trigger["metadata"])
        queries = {t["name"]: t["metadata"]["query"] for t in triggers}

        def one_sample_each() -> dict[str, float] | None:
            values = {}
            for name, query in queries.items():
                result = promql(url, query)
                if len(result) != 1:
                    return None
                values[name] = float(result[0]["value"][1])
            return values

        # A wait, not a bound: pod Running, Prometheus's pod discovery and a scrape in a row.
        serving = wait_for(
            one_sample_each, timeout=180, interval=0.5, desc="one sample per trigger while the pod serves"
        )
        # The one target is the operator's pod, discovered through the chart's PodMonitor's job.
        (pod,) = api.pods(NAME)
        (target,) = scrape_targets(url)["activeTargets"]
        assert target["scrapePool"].startswith(f"podMonitor/{ns}/"), target
        assert (target["labels"]["namespace"], target["labels"]["pod"]) == (ns, pod.metadata.name), target
        assert target["scrapeUrl"] == f"http://{pod.status.pod_ip}:{TRITON_METRICS_PORT}/metrics", target
        assert serving["active-request-utilization"] == 0.75
        assert serving["kv-cache-utilization"] == pytest.approx(0.5, abs=0.01)

        # The last serving pod goes: the operator scales its Deployment to 0, the pod leaves
        # Prometheus's pod discovery and its emulator stops (the follower sees it gone).
        api.patch("llmdeployments", NAME, {"spec": {"replicas": 0}})
        wait_for(lambda: api.pods(NAME) == [], timeout=60, desc="the last serving pod deleted")

        def all_empty() -> bool:
            return all(promql(url, q) == [] for q in queries.values())

        # An empty result: what ExecutePromQuery turns into 0 (ignoreNullValues default true), which is
        # not above activationThreshold 0, so RequestScale never scales the target up from zero.
        wait_for(all_empty, timeout=60, desc="every trigger's query empty once no serving pod exists")
