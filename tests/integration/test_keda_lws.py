"""``mode: keda`` on a multi-node LLMDeployment: KEDA's real operator and metrics API server,
kube-controller-manager's HPA controller, the chart's PodMonitor through prometheus-operator into a
real Prometheus, and the real LeaderWorkerSet controller — together, as a cluster running both runs
them. test_keda_controller.py runs the same chain on one-node replicas (a Deployment),
test_lws_controller.py runs LWS without an autoscaler; here one replica is a LeaderWorkerSet group of
two pods (leader + worker, :func:`support.manifests.a_multi_node_engine`) and KEDA's HPA scales the
groups.

What must hold, each from its upstream source (what runs is the same as in those two tests: KEDA
v2.20.2, prometheus-operator v0.85.0, Prometheus 3.16, kubernetes v1.34.4, LWS v0.9.0 built here /
v0.10.0 rendered for, tests/support/keda.py, monitoring.py, lws.py):

- **Who serves the metrics.** On a multi-node replica only the leader runs Triton's ports: the
  leader's ``mpirun`` starts rank 0 serving HTTP/gRPC/metrics, ranks ≥ 1 (on the workers) load only
  ``tensorrt_llm`` and never open a port (render/launch.py ``rank_commands``, render/serving.py
  ``tritonserver_args``); the worker template declares only port ``ssh``
  (render/leaderworkerset.py ``worker_template``). The chart's PodMonitor selects both (same labels)
  but each endpoint keeps only targets whose container port has the endpoint's name
  (prometheus-operator v0.85.0 ``pkg/prometheus/promcfg.go`` ``generatePodMonitorConfig``: ``keep``
  on ``__meta_kubernetes_pod_container_port_name``), so Prometheus scrapes the leaders
  ``<lws>-<group>`` only. This test makes that check able to fail: the emulator serves Triton's
  metrics on **every** Running pod of the deployment, workers included, so a scrape or a trigger
  query that took in workers would double the sums.
- **What the triggers sum.** ``sum(<active-request utilization>)`` over the pods named like the
  deployment's replica pods — for a LeaderWorkerSet the leaders ``<name>-lws-<group>``
  (render/keda.py ``pod_name_regex``); one sample, which KEDA's Prometheus scaler serves as the
  External metric (kedacore/keda v2.20.2 ``pkg/scalers/prometheus_scaler.go``).
- **What the HPA divides by.** ``AverageValue``: the HPA controller wants ceil(sum / target)
  replicas and reports ``ceil(sum / statusReplicas)`` (milli-units) as the metric's current
  ``averageValue``, where ``statusReplicas`` is the scale subresource's ``status.replicas``
  (kubernetes v1.34.4 ``pkg/controller/podautoscaler/horizontal.go``: ``statusReplicas :=
  scale.Status.Replicas``; ``replica_calculator.go`` ``GetExternalPerPodMetricReplicas``), i.e. the
  LLMDeployment's ``status.replicas`` (the CRD's ``statusReplicasPath``). For a LeaderWorkerSet that
  must be the number of groups — what LWS itself reports as its ``status.replicas``, "the number of
  leaders" (kubernetes-sigs/lws v0.9.0 ``pkg/controllers/leaderworkerset_controller.go``
  ``updateStatus``: the leader StatefulSet's ``status.replicas``) — not the pods: counting pods would
  halve every current value.
- **The scale path.** LLMDeployment ``spec.replicas`` → LeaderWorkerSet ``spec.replicas`` (the
  operator) → the leader StatefulSet ``<lws>`` (one leader pod ``<lws>-<group>`` per group) → one
  worker StatefulSet ``<lws>-<group>`` per leader, owned by that leader pod (LWS
  ``pkg/controllers/pod_controller.go`` ``constructWorkerStatefulSetApplyConfiguration``,
  ``setControllerReferenceWithStatefulSet``), so a removed group's workers go with its leader.

The expected values come from the emulator's load model (``support.monitoring.active_per_pod``:
min(requests, max_batch_size) / max_batch_size per serving pod) and LWS's names, never from the
operator's PromQL or status code. The local control plane has two 8-GPU H100 nodes; two groups of two
8-GPU pods need four, so the test adds two (kwok runs them) and removes them at the end.
"""

from __future__ import annotations

import math
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from localcluster import add_gpu_nodes, delete_nodes, wait_nodes_ready
from support.api import Api, find_condition
from support.cluster import LocalCluster
from support.keda import KEDA_GROUP, KEDA_VERSION, external_metric, hpa_external_averages, milli, running_keda
from support.lws import group_pods, groups_serving, leaderworkerset, running_lws
from support.manifests import a_keda_deployment, a_multi_node_engine
from support.monitoring import (
    TRITON_METRICS_PORT,
    active_per_pod,
    podmonitor_scraped,
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

pytestmark = pytest.mark.slow

PROMETHEUS = "kedalws"
PROFILE = ServingProfile()
NAME = "chat"
ENGINE = "big"
#: the operator's LeaderWorkerSet (render.leaderworkerset: <deployment>-lws); LWS names its pods
#: <lws>-<group> (leaders) and <lws>-<group>-<worker index> (workers)
LWS_NAME = f"{NAME}-lws"
#: KEDA's metric name of the first trigger (active-request utilization; test_keda_controller.py)
ACTIVE = "s0-prometheus"
ACTIVE_TARGET = 0.5


def test_keda_scales_a_multi_node_llmdeployment_by_leaderworkerset_groups(
    cluster: LocalCluster, api: Api, tmp_path: Path
) -> None:
    ns = api.ns
    require_triton_metrics_port_free()
    hpa_api = client.AutoscalingV2Api(cluster.api)
    custom = client.CustomObjectsApi(cluster.api)
    idle = triton_load(16, 0.2)  # 16/64 = 0.25 active per serving pod: below the 0.5 target
    busy = triton_load(64, 0.5)  # 64/64 = 1.0 per serving pod: twice the target
    nodes = add_gpu_nodes(cluster.api, 2, prefix=f"kl-{ns}")
    try:
        wait_nodes_ready(cluster.api, nodes)
        with (
            running_lws(cluster),
            api.artifact_pvc(),
            running_chart_monitoring(cluster, ns, PROMETHEUS, tmp_path) as prom,
            Fleet(PROFILE, port=TRITON_METRICS_PORT, control=idle) as fleet,
            api.follow_pods(fleet),
            running_keda(cluster, ns),
        ):
            engine = a_multi_node_engine(ENGINE)
            api.cache_artifact(engine)
            api.create(engine)
            body = a_keda_deployment(
                NAME, ENGINE, prometheus_url=prom, active_target=ACTIVE_TARGET, down_window=6
            )
            with running_operator(cluster, [ns]), running_hpa_controller(cluster):
                api.create(body)

                def lws() -> dict[str, Any]:
                    return leaderworkerset(api, LWS_NAME)

                def serving(groups: int) -> bool:
                    return groups_serving(api, fleet, NAME, LWS_NAME, groups)

                wait_for(
                    lambda: serving(1), 120, interval=0.5, desc="one group Ready, leader and worker emulated"
                )
                # status.replicas (the /scale's statusReplicasPath) counts groups, as LWS's own does
                assert api.status(NAME)["replicas"] == lws()["status"]["replicas"] == 1

                def scrape(groups: int) -> set[str] | None:
                    return podmonitor_scraped(prom, ns, group_pods(LWS_NAME, groups))

                # the leader only: the worker has no "metrics" port, so no target
                scraped = wait_for(lambda: scrape(1), 60, interval=0.5, desc="every pod discovered")
                assert scraped == {f"{LWS_NAME}-0"}, scraped

                def scaled_object_ready() -> dict[str, Any] | None:
                    so: dict[str, Any] = custom.get_namespaced_custom_object(
                        KEDA_GROUP, KEDA_VERSION, ns, "scaledobjects", NAME
                    )
                    ready = find_condition(so, "Ready")
                    return so if ready and ready["status"] == "True" else None

                so = wait_for(
                    scaled_object_ready, 90, interval=0.5, desc="KEDA reports the ScaledObject Ready"
                )
                hpa_name = so["status"]["hpaName"]
                assert so["status"]["scaleTargetKind"] == f"{GROUP}/{VERSION}.LLMDeployment", so["status"]

                def served(value: float) -> bool:
                    """KEDA's metrics API server answers the HPA's question with ``value``."""
                    items = external_metric(cluster, ns, ACTIVE, NAME)
                    return len(items) == 1 and milli(items[0]["value"]) == Decimal(str(value))

                def hpa_sees(value: float) -> Any:
                    h = hpa_api.read_namespaced_horizontal_pod_autoscaler(hpa_name, ns)
                    return h if hpa_external_averages(h).get(ACTIVE) == Decimal(str(value)) else None

                one = active_per_pod(idle, PROFILE)
                # the sum over the one leader (the worker's emulated 0.25 not in it) …
                wait_for(lambda: served(one), 90, interval=0.5, desc="s0 served: the leader's 0.25")
                # … divided by status.replicas = 1 group (2 if pods were counted: 0.125)
                h = wait_for(lambda: hpa_sees(one / 1), 60, interval=0.5, desc="HPA's current value 0.25")
                assert h.status.desired_replicas == 1 and api.replicas(NAME) == 1

                fleet.set_control(busy)
                assert math.ceil(active_per_pod(busy, PROFILE) / ACTIVE_TARGET) == 2
                wait_for(
                    lambda: api.replicas(NAME) == 2, 90, interval=0.5, desc="KEDA's HPA scales chat to 2"
                )
                # the scale path: the LeaderWorkerSet gets 2 replicas, LWS creates the second group
                wait_for(lambda: lws()["spec"]["replicas"] == 2, 30, interval=0.3, desc="LWS spec.replicas 2")
                wait_for(
                    lambda: serving(2), 120, interval=0.5, desc="two groups Ready, all four pods emulated"
                )
                assert api.status(NAME)["replicas"] == lws()["status"]["replicas"] == 2
                scraped = wait_for(lambda: scrape(2), 60, interval=0.5, desc="all four pods discovered")
                assert scraped == {f"{LWS_NAME}-0", f"{LWS_NAME}-1"}, scraped  # both leaders, no worker
                two = 2 * active_per_pod(busy, PROFILE)  # 2.0: both leaders, not the workers (4.0)
                wait_for(lambda: served(two), 60, interval=0.5, desc="s0 sums both leaders: 2.0")
                # 2.0 / 2 groups = 1.0 (0.5 if status.replicas counted the 4 pods)
                h = wait_for(lambda: hpa_sees(two / 2), 60, interval=0.5, desc="HPA's current value 1.0")
                assert h.status.current_replicas == 2 and h.status.desired_replicas == 2

                fleet.set_control(idle)
                # ceil(2 × 0.25 / 0.5) = 1 group, after the 6 s scale-down window
                assert math.ceil(2 * active_per_pod(idle, PROFILE) / ACTIVE_TARGET) == 1
                wait_for(
                    lambda: api.replicas(NAME) == 1, 90, interval=0.5, desc="KEDA's HPA scales chat to 1"
                )
                wait_for(lambda: lws()["spec"]["replicas"] == 1, 30, interval=0.3, desc="LWS spec.replicas 1")
                # LWS removes the second group: its leader, and with it the worker StatefulSet it owns
                wait_for(lambda: serving(1), 120, interval=0.5, desc="back to one group: chat-lws-0, -0-1")
                assert api.status(NAME)["replicas"] == lws()["status"]["replicas"] == 1
                wait_for(lambda: hpa_sees(one / 1), 60, interval=0.5, desc="HPA's current value 0.25 again")
                scale = custom.get_namespaced_custom_object_scale(GROUP, VERSION, ns, "llmdeployments", NAME)
                assert (scale["spec"]["replicas"], scale["status"]["replicas"]) == (1, 1)
    finally:
        delete_nodes(cluster.api, nodes)
