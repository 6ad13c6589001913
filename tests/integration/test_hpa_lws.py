"""``mode: hpa`` on a multi-node LLMDeployment: the operator's HPA, scaled by kube-controller-manager's
HPA controller on the Pods metrics prometheus-adapter serves, with the real LeaderWorkerSet controller
turning each replica into a group of two pods (leader + worker,
:func:`support.manifests.a_multi_node_engine`). test_hpa_controller.py runs the same chain on one-node
replicas (a Deployment), test_keda_lws.py runs ``mode: keda`` on groups; what is real and what stands
in is the same as there (LWS v0.9.0 built here / v0.10.0 rendered for, prometheus-operator v0.85.0,
Prometheus 3.16, prometheus-adapter v0.12.0, kubernetes v1.34.4; tests/support/lws.py, monitoring.py).

What must hold, each from its upstream source:

- **What the HPA scales.** The rendered HPA's ``scaleTargetRef`` is the LLMDeployment (its ``/scale``:
  ``spec.replicas``, ``status.replicas``, ``status.selector``), not the LeaderWorkerSet, whose
  ``spec.replicas`` the operator writes from the LLMDeployment's. That ``/scale`` must mean what LWS's
  own means: replicas = groups, selector = one pod per group, the leader (kubernetes-sigs/lws v0.9.0
  ``api/leaderworkerset/v1/leaderworkerset_types.go``:
  ``+kubebuilder:subresource:scale:specpath=.spec.replicas,statuspath=.status.replicas,
  selectorpath=.status.hpaPodSelector``, "Here we only select the leader pods";
  ``pkg/controllers/leaderworkerset_controller.go`` ``updateStatus``: ``status.replicas`` is "the number
  of leaders", ``hpaPodSelector`` is ``name=<lws>,worker-index=0`` "select leaders"). The test compares
  the two ``/scale`` subresources read from the API server: the same ``status.replicas``, the same pods
  selected.
- **Which pods the HPA reads.** For a ``Pods`` metric the HPA controller asks the custom-metrics API for
  the pods ``scale.status.selector`` selects, lists the same pods, and wants ``ceil(mean / target ×
  n)`` replicas, n = the selected pods with a value and the mean over those; a selected pod without a
  value is "missing" and, on a scale-up, counts as 0 — and when that brings the ratio back within the
  tolerance the HPA keeps the current count (kubernetes v1.34.4 ``pkg/controller/podautoscaler/
  horizontal.go`` ``computeReplicasForMetrics``: ``scale.Status.Selector``;
  ``replica_calculator.go`` ``GetMetricReplicas`` → ``calcPlainMetricReplicas``, ``groupPods``;
  ``metrics/utilization.go`` ``GetMetricUsageRatio``). The workers serve no metrics (only the leader
  runs Triton's ports; the chart's PodMonitor keeps only pods with a ``metrics`` port, see
  test_keda_lws.py), so a selector that took in the workers would make n count pods, and at one group
  under twice the target the mean with the worker's 0 is the target itself: no scale-up. Hence the
  1 → 2 step below fails unless the selector selects leaders only. The emulator serves Triton's metrics
  on **every** Running pod of the deployment, workers included, so any scrape, rule or adapter query
  that took in workers would show here.
- **What the adapter serves.** prometheus-adapter answers ``pods/*/<metric>?labelSelector=…`` with one
  item per selected pod that has a series of the recording rule, skipping the others
  (prometheus-adapter v0.12.0 ``pkg/custom-provider/provider.go`` ``GetMetricBySelector`` →
  ``metricsFor``): per group its leader, with the leader's own utilization.
- **The scale path.** LLMDeployment ``spec.replicas`` → LeaderWorkerSet ``spec.replicas`` (the
  operator) → LWS creates or removes the group's leader ``<lws>-<group>`` and with it the worker
  StatefulSet the leader owns (test_keda_lws.py).

Expected values come from the emulator's load model (:func:`support.monitoring.adapter_values`) and LWS's
pod names, never from the operator's PromQL or status code. Two groups of two 8-GPU pods need four
8-GPU nodes; the local control plane has two, so the test adds two (kwok runs them) and removes them.
"""

from __future__ import annotations

import math
import time
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client
from localcluster import add_gpu_nodes, delete_nodes, wait_nodes_ready
from support.api import SELECTOR, Api
from support.cluster import LocalCluster
from support.keda import milli
from support.lws import LWS, group_pods, groups_serving, leaderworkerset, running_lws, selected
from support.manifests import a_multi_node_engine, an_autoscaled_deployment
from support.monitoring import (
    TRITON_METRICS_PORT,
    active_per_pod,
    adapter_values,
    custom_metric,
    hpa_pods_averages,
    podmonitor_scraped,
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

pytestmark = pytest.mark.slow

PROMETHEUS = "hpalws"
PROFILE = ServingProfile()
NAME = "chat"
ENGINE = "big"
#: the operator's LeaderWorkerSet (render.leaderworkerset: <deployment>-lws); LWS names its leaders
#: <lws>-<group> and their workers <lws>-<group>-<worker index>
LWS_NAME = f"{NAME}-lws"
#: the HPA metric of the active-request target (docs/autoscaling.md's signal table)
ACTIVE = "trtllm_active_request_utilization"
ACTIVE_TARGET = 0.5  # an_autoscaled_deployment's targets.activeRequestUtilization


def leaders(groups: int) -> set[str]:
    return {f"{LWS_NAME}-{g}" for g in range(groups)}


def test_hpa_scales_a_multi_node_llmdeployment_by_leaderworkerset_groups(
    cluster: LocalCluster, api: Api, tmp_path: Path
) -> None:
    t0 = time.monotonic()
    ns = api.ns
    require_triton_metrics_port_free()
    hpa_api = client.AutoscalingV2Api(cluster.api)
    idle = triton_load(16, 0.2)  # 16/64 = 0.25 active per serving pod: below the 0.5 target
    busy = triton_load(64, 0.5)  # 64/64 = 1.0 per serving pod: twice the target
    nodes = add_gpu_nodes(cluster.api, 2, prefix=f"hl-{ns}")
    try:
        wait_nodes_ready(cluster.api, nodes)
        with (
            running_lws(cluster),
            api.artifact_pvc(),
            running_chart_monitoring(cluster, ns, PROMETHEUS, tmp_path) as prom,
            Fleet(PROFILE, port=TRITON_METRICS_PORT, control=idle) as fleet,
            api.follow_pods(fleet),
        ):
            engine = a_multi_node_engine(ENGINE)
            api.cache_artifact(engine)
            api.create(engine)
            body = an_autoscaled_deployment(
                NAME,
                ENGINE,
                max_replicas=2,
                up={"stabilizationWindowSeconds": 0, "maxReplicasPerStep": 4, "periodSeconds": 1},
                down={"stabilizationWindowSeconds": 6, "maxReplicasPerStep": 1, "periodSeconds": 1},
            )
            body["spec"]["autoscaling"]["mode"] = "hpa"
            with running_operator(cluster, [ns]):
                api.create(body)
                hpa = wait_for(
                    lambda: hpa_api.read_namespaced_horizontal_pod_autoscaler(NAME, ns),
                    60,
                    desc="HPA rendered",
                )
                # the HPA scales the LLMDeployment, whose controller scales the LeaderWorkerSet
                target = hpa.spec.scale_target_ref
                assert (target.api_version, target.kind, target.name) == (
                    f"{GROUP}/{VERSION}",
                    "LLMDeployment",
                    NAME,
                ), target
                assert [(m.type, m.pods.metric.name) for m in hpa.spec.metrics] == [
                    ("Pods", ACTIVE),
                    ("Pods", "trtllm_kv_cache_utilization"),
                ], hpa.spec.metrics

                def serving(groups: int) -> bool:
                    return groups_serving(api, fleet, NAME, LWS_NAME, groups)

                def same_scale_as_lws(groups: int) -> str:
                    """The LLMDeployment's ``/scale`` and its LeaderWorkerSet's agree: ``groups``
                    replicas, the selectors select the same pods, the groups' leaders. Returns the
                    LLMDeployment's selector (what the HPA controller reads)."""
                    ours = api.custom.get_namespaced_custom_object_scale(
                        GROUP, VERSION, ns, "llmdeployments", NAME
                    )
                    lws = api.custom.get_namespaced_custom_object_scale(*LWS[:2], ns, LWS[2], LWS_NAME)
                    assert ours["status"]["replicas"] == lws["status"]["replicas"] == groups, (ours, lws)
                    mine, theirs = ours["status"]["selector"], lws["status"]["selector"]
                    assert selected(api, mine) == selected(api, theirs) == leaders(groups), (mine, theirs)
                    return str(mine)

                wait_for(
                    lambda: serving(1), 120, interval=0.5, desc="one group Ready, leader and worker emulated"
                )
                selector = same_scale_as_lws(1)

                # Prometheus discovers both pods and scrapes the leader only, so the recording rule
                # has the leader's series and no worker's
                scraped = wait_for(
                    lambda: podmonitor_scraped(prom, ns, group_pods(LWS_NAME, 1)),
                    60,
                    interval=0.5,
                    desc="both pods discovered",
                )
                assert scraped == leaders(1), scraped
                record = f'namespace_pod:trtllm_active_request_utilization:ratio{{namespace="{ns}"}}'
                # a wait, not a bound: a scrape and a rule evaluation in a row (test_hpa_controller.py)
                series = wait_for(lambda: promql(prom, record), 240, interval=0.5, desc="the rule evaluated")
                assert {s["metric"]["pod"] for s in series} == leaders(1), series

                rules = yaml.safe_load(registry.adapter_rules())["rules"]["custom"]
                with running_adapter(cluster, ns, prom, rules), running_hpa_controller(cluster):

                    def served(selector: str, metric: str) -> dict[str, Decimal]:
                        """What the adapter answers the HPA's question: pod name → value."""
                        items = custom_metric(cluster, ns, metric, selector)
                        return {i["describedObject"]["name"]: milli(i["value"]) for i in items}

                    def serves(load: Control, groups: int) -> bool:
                        """Both metrics, for the scale's selector and for every pod of the deployment
                        (workers included): the ``groups`` leaders' values under ``load``, nothing else."""
                        return all(
                            served(s, metric) == dict.fromkeys(leaders(groups), value)
                            for metric, value in adapter_values(load, PROFILE).items()
                            for s in (selector, SELECTOR.format(NAME))
                        )

                    def hpa_sees(load: Control, groups: int) -> Any:
                        """The HPA's status from a sync that found ``groups`` replicas (the scale's
                        ``status.replicas``) and, as the current averages, one leader's values under
                        ``load`` (all leaders carry the same load)."""
                        h = hpa_api.read_namespaced_horizontal_pod_autoscaler(NAME, ns)
                        averages = hpa_pods_averages(h)
                        return (
                            h
                            if h.status.current_replicas == groups
                            and averages == adapter_values(load, PROFILE)
                            else None
                        )

                    wait_for(lambda: serves(idle, 1), 60, interval=0.5, desc="the adapter serves the leader")
                    print(f"[hpa-lws] chain up, one group served, in {time.monotonic() - t0:.1f} s")
                    t1 = time.monotonic()
                    h = wait_for(lambda: hpa_sees(idle, 1), 60, interval=0.5, desc="HPA observes 0.25")
                    assert h.status.desired_replicas == 1 and api.replicas(NAME) == 1, h.status

                    fleet.set_control(busy)
                    # one leader at 1.0 = twice the target → ceil(2.0 × 1 leader) = 2 groups (with the
                    # worker counted as a missing pod: (1.0 + 0) / 2 = the target, no scale-up)
                    assert math.ceil(active_per_pod(busy, PROFILE) / ACTIVE_TARGET * 1) == 2
                    wait_for(lambda: api.replicas(NAME) == 2, 90, interval=0.5, desc="HPA scales chat to 2")
                    wait_for(
                        lambda: leaderworkerset(api, LWS_NAME)["spec"]["replicas"] == 2,
                        30,
                        interval=0.3,
                        desc="LWS spec.replicas 2",
                    )
                    # LWS creates the second group: leader chat-lws-1 and worker chat-lws-1-1
                    wait_for(
                        lambda: serving(2), 120, interval=0.5, desc="two groups Ready, all four pods emulated"
                    )
                    selector = same_scale_as_lws(2)
                    scraped = wait_for(
                        lambda: podmonitor_scraped(prom, ns, group_pods(LWS_NAME, 2)),
                        60,
                        interval=0.5,
                        desc="all four pods discovered",
                    )
                    assert scraped == leaders(2), scraped
                    wait_for(
                        lambda: serves(busy, 2), 60, interval=0.5, desc="the adapter serves both leaders"
                    )
                    # the mean over the two leaders, 1.0; ceil(2.0 × 2) = 4, held at maxReplicas 2
                    h = wait_for(
                        lambda: hpa_sees(busy, 2), 60, interval=0.5, desc="HPA observes 1.0 on 2 leaders"
                    )
                    assert h.status.desired_replicas == 2, h.status

                    fleet.set_control(idle)
                    # 0.25 on two leaders: ceil(0.5 × 2) = 1 group, after the 6 s scale-down window
                    assert math.ceil(active_per_pod(idle, PROFILE) / ACTIVE_TARGET * 2) == 1
                    wait_for(lambda: api.replicas(NAME) == 1, 90, interval=0.5, desc="HPA scales chat to 1")
                    wait_for(
                        lambda: leaderworkerset(api, LWS_NAME)["spec"]["replicas"] == 1,
                        30,
                        interval=0.3,
                        desc="LWS spec.replicas 1",
                    )
                    # LWS removes the second group: its leader, and with it the worker StatefulSet
                    wait_for(
                        lambda: serving(1), 120, interval=0.5, desc="back to one group: chat-lws-0, -0-1"
                    )
                    selector = same_scale_as_lws(1)
                    wait_for(lambda: serves(idle, 1), 60, interval=0.5, desc="the adapter serves one leader")
                    h = wait_for(lambda: hpa_sees(idle, 1), 60, interval=0.5, desc="HPA observes 0.25 again")
                    assert h.status.desired_replicas == 1, h.status
                    print(f"[hpa-lws] 1 → 2 → 1 groups in {time.monotonic() - t1:.1f} s")
    finally:
        delete_nodes(cluster.api, nodes)
