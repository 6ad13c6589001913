"""``mode: keda`` end to end through KEDA's real operator: the ScaledObject the operator renders, KEDA's
operator turning it into an HPA, KEDA's metrics API server serving that HPA's External metrics from
KEDA's Prometheus scaler, and Kubernetes' HPA controller scaling the LLMDeployment's ``/scale``.

What is real (each built from its Go module at a pinned version, hack/build-controllers.sh):

- KEDA v2.20.2 — the release whose ScaledObject CRD the operator renders for
  (tests/fixtures/upstream/keda-v2.20.2) — operator (``cmd/operator``) and metrics API server
  (``cmd/adapter``), with its CRDs and its own certificate management (tests/support/keda.py);
- the Prometheus its triggers query: the chart's PodMonitor reconciled by prometheus-operator into the
  configuration a Go-built Prometheus 3.16 runs (tests/support/monitoring.py
  ``running_chart_monitoring``, the chain of test_hpa_controller.py); the triggers' PromQL reads the
  raw Triton metrics, no recording rule;
- kube-controller-manager's HPA controller (every second), which reads ``external.metrics.k8s.io``
  through the aggregator and writes the LLMDeployment's ``/scale``; the operator (in-process) turns
  ``spec.replicas`` into pods.

What stands in: the kubelet (kwok runs no containers): of the Prometheus pod (as in
test_hpa_controller.py), of KEDA's pods (processes on this host, the certificate Secret copied where
the pod mounts it) and of the Triton pods (the project's Triton metrics emulator on each Running pod's
IP, port 8002).

What KEDA does with the rendered object, from kedacore/keda v2.20.2:

- ``controllers/keda/hpa.go``: the HPA is named ``advanced.horizontalPodAutoscalerConfig.name``, owned
  by the ScaledObject, targets ``scaleTargetRef``, has ``minReplicaCount``/``maxReplicaCount`` and
  ``advanced.horizontalPodAutoscalerConfig.behavior``; each trigger becomes an ``External`` metric
  selected by label ``scaledobject.keda.sh/name`` = the ScaledObject;
- ``pkg/scalers/prometheus_scaler.go`` ``GetMetricSpecForScaling``: the metric is named
  ``s<trigger index>-prometheus`` (``scaler.go`` ``GenerateMetricNameWithIndex``), its target the
  trigger's ``threshold`` (``GetMetricTargetMili``) of type ``metricType`` (``AverageValue``); its value
  the query's single sample (``ExecutePromQuery``) in milli-units (``GenerateMetricInMili``);
- ``apis/keda/v1alpha1/condition_types.go``: conditions ``Ready`` (reason ``ScaledObjectReady``) and
  ``Active`` (a trigger's value above ``activationThreshold``, default 0).

The expected values come from the emulator's load model (``ServingProfile``, the pinned ``Control``),
not from the code under test: each pod's active-request utilization = min(requests, max_batch_size) /
max_batch_size; a trigger's query sums it over the deployment's pods; with ``AverageValue`` the HPA
controller wants ceil(sum / threshold) replicas (kubernetes v1.34.4
``pkg/controller/podautoscaler/replica_calculator.go`` ``GetExternalPerPodMetricReplicas``).
"""

from __future__ import annotations

import math
import time
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from support.api import Api, find_condition
from support.cluster import LocalCluster
from support.keda import KEDA_GROUP, KEDA_VERSION, external_metric, hpa_external_averages, milli, running_keda
from support.manifests import a_keda_deployment
from support.monitoring import (
    TRITON_METRICS_PORT,
    active_per_pod,
    require_triton_metrics_port_free,
    running_chart_monitoring,
    running_hpa_controller,
    triton_load,
)
from support.operator import running_operator
from support.wait import wait_for

from trtllm_operator.api import GROUP, VERSION
from trtllm_operator.emulator import Fleet
from trtllm_operator.emulator.model import ServingProfile

pytestmark = [pytest.mark.slow, pytest.mark.cached_engine("llama")]

PROMETHEUS = "keda"
PROFILE = ServingProfile()
NAME = "chat"
#: the two triggers, in the order the operator renders them (trigger index → KEDA's metric name)
ACTIVE, KV = "s0-prometheus", "s1-prometheus"
ACTIVE_TARGET = 0.5


def test_keda_scales_an_llmdeployment_through_its_hpa(
    cluster: LocalCluster, api: Api, tmp_path: Path
) -> None:
    t0 = time.monotonic()
    ns = api.ns
    require_triton_metrics_port_free()
    hpa_api = client.AutoscalingV2Api(cluster.api)
    custom = client.CustomObjectsApi(cluster.api)
    down_window = 6
    idle = triton_load(16, 0.2)  # 16/64 = 0.25 active per pod: below the 0.5 target
    busy = triton_load(64, 0.5)  # 64/64 = 1.0 active per pod: twice the target

    with (
        running_chart_monitoring(cluster, ns, PROMETHEUS, tmp_path) as prom,
        Fleet(PROFILE, port=TRITON_METRICS_PORT, control=idle) as fleet,
        api.follow_pods(fleet),
        running_keda(cluster, ns),
    ):
        print(f"[keda] Prometheus and KEDA running in {time.monotonic() - t0:.1f} s")
        body = a_keda_deployment(
            NAME, "llama", prometheus_url=prom, active_target=ACTIVE_TARGET, down_window=down_window
        )
        with running_operator(cluster, [ns]), running_hpa_controller(cluster):
            api.create(body)

            def scaled_object() -> dict[str, Any] | None:
                """The ScaledObject once KEDA reports it Ready."""
                so: dict[str, Any] = custom.get_namespaced_custom_object(
                    KEDA_GROUP, KEDA_VERSION, ns, "scaledobjects", NAME
                )
                ready = find_condition(so, "Ready")
                return so if ready and ready["status"] == "True" else None

            so = wait_for(scaled_object, 90, interval=0.5, desc="KEDA reports the ScaledObject Ready")
            ready = find_condition(so, "Ready")
            assert ready is not None and ready["reason"] == "ScaledObjectReady", so["status"]
            status = so["status"]
            assert status["externalMetricNames"] == [ACTIVE, KV], status
            # apis/keda/v1alpha1/gvkr_types.go GVKString: <group>/<version>.<kind>
            assert status["scaleTargetKind"] == f"{GROUP}/{VERSION}.LLMDeployment", status
            hpa_name = so["spec"]["advanced"]["horizontalPodAutoscalerConfig"]["name"]
            assert status["hpaName"] == hpa_name, status

            # The HPA KEDA created from it
            hpa = hpa_api.read_namespaced_horizontal_pod_autoscaler(hpa_name, ns)
            (owner,) = hpa.metadata.owner_references
            assert (owner.kind, owner.name, owner.controller) == ("ScaledObject", NAME, True)
            ref = hpa.spec.scale_target_ref
            assert (ref.api_version, ref.kind, ref.name) == (
                f"{GROUP}/{VERSION}",
                "LLMDeployment",
                NAME,
            )
            assert (hpa.spec.min_replicas, hpa.spec.max_replicas) == (1, 2)
            assert hpa.spec.behavior.scale_down.stabilization_window_seconds == down_window
            specs = {m.external.metric.name: m.external for m in hpa.spec.metrics}
            assert sorted(specs) == [ACTIVE, KV]
            for m in specs.values():
                assert m.metric.selector.match_labels == {"scaledobject.keda.sh/name": NAME}
                assert m.target.type == "AverageValue"
            assert milli(specs[ACTIVE].target.average_value) == Decimal(str(ACTIVE_TARGET))
            assert milli(specs[KV].target.average_value) == Decimal("0.8")

            # KEDA's metrics API server answers what the HPA controller asks: the sum over
            # the one pod, from KEDA's Prometheus scaler querying Prometheus
            def served(metric: str, value: float) -> bool:
                items = external_metric(cluster, ns, metric, NAME)
                return len(items) == 1 and milli(items[0]["value"]) == Decimal(str(value))

            wait_for(
                lambda: served(ACTIVE, active_per_pod(idle, PROFILE)),
                90,
                interval=0.5,
                desc="s0 served (idle)",
            )

            def active_condition() -> dict[str, Any] | None:
                got = scaled_object()
                return find_condition(got, "Active") if got else None

            active = wait_for(
                lambda: (c := active_condition()) and c["status"] == "True" and c,
                60,
                desc="KEDA reports the ScaledObject Active (a trigger above activationThreshold 0)",
            )
            assert active["status"] == "True"

            def hpa_sees(value: float) -> Any:
                h = hpa_api.read_namespaced_horizontal_pod_autoscaler(hpa_name, ns)
                return h if hpa_external_averages(h).get(ACTIVE) == Decimal(str(value)) else None

            # AverageValue: the HPA shows the sum divided by the current replicas
            h = wait_for(
                lambda: hpa_sees(active_per_pod(idle, PROFILE)), 60, interval=0.5, desc="HPA observes idle"
            )
            assert h.status.desired_replicas == 1 and api.replicas(NAME) == 1

            fleet.set_control(busy)
            # ceil(1.0 / 0.5) = 2 replicas
            assert math.ceil(active_per_pod(busy, PROFILE) / ACTIVE_TARGET) == 2
            wait_for(
                lambda: api.replicas(NAME) == 2,
                90,
                interval=0.5,
                desc="KEDA's HPA scales chat up to 2",
            )
            wait_for(
                lambda: api.status(NAME).get("readyReplicas") == 2,
                60,
                desc="the operator rolls out the second replica",
            )
            # both pods scraped: the trigger's sum covers both
            wait_for(
                lambda: served(ACTIVE, 2 * active_per_pod(busy, PROFILE)),
                60,
                interval=0.5,
                desc="s0 sums both pods",
            )

            fleet.set_control(idle)
            dropped = time.monotonic()
            # ceil(2 × 0.25 / 0.5) = 1, after the scale-down stabilization window
            wait_for(
                lambda: api.replicas(NAME) == 1,
                90,
                interval=0.5,
                desc="KEDA's HPA scales chat down to 1",
            )
            assert time.monotonic() - dropped >= down_window, "scaled down inside the stabilization window"
            scale = custom.get_namespaced_custom_object_scale(GROUP, VERSION, ns, "llmdeployments", NAME)
            assert scale["spec"]["replicas"] == 1
    print(f"[keda] done in {time.monotonic() - t0:.1f} s")
