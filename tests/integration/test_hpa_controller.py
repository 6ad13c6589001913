"""``mode: hpa`` end to end through the real controllers: the operator's HPA, scaled by Kubernetes' HPA
controller on custom metrics that prometheus-adapter serves from a Prometheus configured by
prometheus-operator from the chart's PodMonitor and PrometheusRule.

What is real (each built from its Go module at a pinned version, hack/build-controllers.sh):

- the chart's ``PodMonitor`` (templates/servingpodmonitor.yaml) and ``PrometheusRule``
  (templates/prometheusrule.yaml, files/prometheus-rules.yaml), rendered by ``helm template``;
- prometheus-operator, which turns them and a ``Prometheus`` object into its generated configuration
  (Secret ``prometheus-<name>``, the scrape job with kubernetes_sd pod discovery and the
  PodMonitor's relabelling) and rule ConfigMaps;
- Prometheus 3.16 running exactly that configuration: it discovers the kwok pods through the API
  server (``spec.apiserverConfig``: this cluster's address, a token file and its CA file, the
  operator's way to point kubernetes_sd at an API server from outside), scrapes them and evaluates the
  recording rules;
- prometheus-adapter with the rules ``trtllm_operator.api.signals.adapter_rules`` generates (what
  docs/autoscaling.md tells users to install), as the aggregated API ``custom.metrics.k8s.io/v1beta2``
  behind kube-apiserver's front proxy;
- kube-controller-manager's HPA controller (the control plane's binary, a second instance that runs
  only that controller, every second), which reads the metrics through the aggregator and writes the
  LLMDeployment's ``/scale``; the operator (in-process) turns ``spec.replicas`` into pods.

What stands in: the kubelet. kwok runs no containers, so this test plays the kubelet of the
Prometheus pod (it runs the Prometheus binary with the generated configuration, ``$(SHARD)`` and the
like substituted from the StatefulSet's config-reloader environment as that sidecar does, the rule
ConfigMaps written where the pod mounts them) and of the Triton pods (the project's Triton metrics emulator,
docs/autoscaling.md "Triton metrics emulator", bound to each Running pod's IP on port 8002, the
``metrics`` port the operator renders, which is where Prometheus's pod discovery points).

The expected gauges come from the emulator's load model (``ServingProfile`` and the pinned
``Control``), not from the code under test: active-request utilization = min(requests,
max_batch_size) / max_batch_size, KV-cache utilization = round(k · kv_blocks) / kv_blocks.
"""

from __future__ import annotations

import time
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client
from kubernetes.utils import parse_quantity
from support.api import SELECTOR, Api
from support.cluster import LocalCluster
from support.manifests import an_autoscaled_deployment
from support.monitoring import (
    TRITON_METRICS_PORT,
    adapter_values,
    custom_metric,
    hpa_pods_averages,
    require_triton_metrics_port_free,
    running_adapter,
    running_chart_monitoring,
    running_hpa_controller,
    triton_load,
)
from support.operator import running_operator
from support.prometheus import promql
from support.wait import wait_for

from trtllm_operator.api import GROUP, VERSION
from trtllm_operator.api import signals as registry
from trtllm_operator.emulator import Control, Fleet
from trtllm_operator.emulator.model import ServingProfile

pytestmark = [pytest.mark.slow, pytest.mark.cached_engine("llama")]

PROMETHEUS = "hpa"
PROFILE = ServingProfile()


def test_hpa_scales_an_llmdeployment_on_adapter_metrics(
    cluster: LocalCluster, api: Api, tmp_path: Path
) -> None:
    t0 = time.monotonic()
    ns = api.ns
    require_triton_metrics_port_free()

    down_window = 6
    body = an_autoscaled_deployment(
        "chat",
        "llama",
        max_replicas=2,
        up={"stabilizationWindowSeconds": 0, "maxReplicasPerStep": 4, "periodSeconds": 1},
        down={"stabilizationWindowSeconds": down_window, "maxReplicasPerStep": 1, "periodSeconds": 1},
    )
    body["spec"]["autoscaling"]["mode"] = "hpa"
    hpa_api = client.AutoscalingV2Api(cluster.api)
    custom = client.CustomObjectsApi(cluster.api)
    idle = triton_load(16, 0.2)  # 16/64 = 0.25 active, 0.2 KV: below both targets (0.5, 0.8)

    with (
        running_chart_monitoring(cluster, ns, PROMETHEUS, tmp_path) as prom,
        Fleet(PROFILE, port=TRITON_METRICS_PORT, control=idle) as fleet,
        api.follow_pods(fleet),
    ):
        print(f"[hpa] monitoring configured in {time.monotonic() - t0:.1f} s")
        with running_operator(cluster, [ns]):
            api.create(body)
            hpa = wait_for(
                lambda: hpa_api.read_namespaced_horizontal_pod_autoscaler("chat", ns),
                60,
                desc="HPA rendered",
            )
            # The recording rule per pod, from Prometheus's own scrape of the pod's emulator. A
            # wait, not a bound: pod Running, Prometheus's pod discovery, a scrape and a rule
            # evaluation in a row; 90 s ran out once with the machine at a load of 20 (a
            # 1,000 + 1,000 scale benchmark beside the tier).
            wait_for(
                lambda: promql(
                    prom, f'namespace_pod:trtllm_active_request_utilization:ratio{{namespace="{ns}"}}'
                ),
                240,
                interval=0.5,
                desc="the recording rule evaluated on the scraped pod",
            )
            # adapter_rules() is the prometheus-adapter chart's `rules.custom` value; the chart's
            # ConfigMap puts that list under the config file's `rules:` (prometheus-community/
            # helm-charts charts/prometheus-adapter/templates/configmap.yaml).
            rules = yaml.safe_load(registry.adapter_rules())["rules"]["custom"]
            with running_adapter(cluster, ns, prom, rules), running_hpa_controller(cluster):
                selector = SELECTOR.format("chat")
                for metric, value in adapter_values(idle, PROFILE).items():
                    items = wait_for(
                        lambda m=metric: custom_metric(cluster, ns, m, selector),
                        60,
                        desc=f"{metric} served",
                    )
                    assert [Decimal(str(parse_quantity(i["value"]))) for i in items] == [value], items

                def hpa_sees(load: Control) -> Any:
                    h = hpa_api.read_namespaced_horizontal_pod_autoscaler("chat", ns)
                    return h if hpa_pods_averages(h) == adapter_values(load, PROFILE) else None

                hpa = wait_for(lambda: hpa_sees(idle), 60, interval=0.5, desc="HPA observes idle load")
                assert hpa.status.desired_replicas == 1 and api.replicas("chat") == 1

                busy = triton_load(64, 0.5)  # 64/64 = 1.0 active: twice the 0.5 target → 2 replicas
                fleet.set_control(busy)
                wait_for(lambda: hpa_sees(busy), 60, interval=0.5, desc="HPA observes the load")
                wait_for(lambda: api.replicas("chat") == 2, 60, interval=0.5, desc="HPA scales chat up to 2")
                wait_for(
                    lambda: api.status("chat").get("readyReplicas") == 2,
                    60,
                    desc="the operator rolls out the second replica",
                )

                fleet.set_control(idle)
                dropped = time.monotonic()
                # Within the scale-down stabilization window the HPA sees the low load and keeps 2.
                held = wait_for(lambda: hpa_sees(idle), 60, interval=0.3, desc="HPA observes the drop")
                if time.monotonic() - dropped < down_window - 1:
                    assert held.status.desired_replicas == 2 and api.replicas("chat") == 2, held.status
                wait_for(
                    lambda: api.replicas("chat") == 1, 60, interval=0.5, desc="HPA scales chat down to 1"
                )
                down = hpa_api.read_namespaced_horizontal_pod_autoscaler("chat", ns)
                assert down.status.last_scale_time is not None
                assert time.monotonic() - dropped >= down_window, (
                    "scaled down inside the stabilization window"
                )
                scale = custom.get_namespaced_custom_object_scale(
                    GROUP, VERSION, ns, "llmdeployments", "chat"
                )
                assert scale["spec"]["replicas"] == 1
    print(f"[hpa] done in {time.monotonic() - t0:.1f} s")
