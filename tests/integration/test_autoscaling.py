"""The built-in autoscaler end to end: real control plane, kwok GPU nodes, Triton metrics emulators.

The whole operator runs in-process; the LLMDeployment controller creates the serving pods (kwok
makes them Running/Ready with loopback IPs from the cluster's pod CIDR), and an emulator fleet
(:mod:`trtllm_operator.emulator`) follows those pods and serves Triton's ``/metrics`` on each pod's
IP, on a free port that stands in for Triton's 8002 (the operator's ``METRICS_PORT`` is patched to
it) — the operator scrapes them exactly as it would scrape Triton. The tests change the
load on the emulators and watch ``spec.replicas``, ``status.autoscaling`` and the conditions.
Windows are seconds long so a scenario runs in under a minute. ``test_same_flow_through_a_real_prometheus``
does the same through the product's monitoring chain (tests/support/monitoring.py
``running_chart_monitoring``): the chart's PodMonitor and PrometheusRule, reconciled by the real
prometheus-operator into the configuration a Go-built Prometheus 3.16 runs, which discovers the pods
through the API server (kubernetes_sd), scrapes the emulators on Triton's port 8002 and evaluates the
chart's recording rules.
"""

from __future__ import annotations

import json
import re
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, watch
from localcluster.nodes import NodeSpec, create_nodes, wait_nodes_ready
from support.api import SELECTOR, Api, wait_serving
from support.cluster import WRITE_VERBS, LocalCluster
from support.manifests import H100, an_autoscaled_deployment
from support.monitoring import (
    TRITON_METRICS_PORT,
    require_triton_metrics_port_free,
    running_chart_monitoring,
)
from support.operator import running_operator
from support.ports import bound_socket, free_port
from support.prometheus import promql
from support.wait import wait_for

from trtllm_operator.api import GROUP, VERSION
from trtllm_operator.api.deployment import AutoscalingSpec
from trtllm_operator.decide.serving_params import OwnerRef
from trtllm_operator.emulator import Control, Fleet, ServingProfile
from trtllm_operator.handlers import autoscaler as autoscaler_handlers
from trtllm_operator.metrics import operator_metrics as om
from trtllm_operator.metrics.prometheus import ACTIVE_REQUEST_UTILIZATION_RECORD, KV_CACHE_RECORD
from trtllm_operator.render.keda import desired_scaled_object

pytestmark = pytest.mark.cached_engine("llama")


@pytest.fixture
def metrics_port(monkeypatch: pytest.MonkeyPatch) -> int:
    """A free port in place of Triton's 8002, for the emulators and the in-process operator alike.

    Pod IPs are loopback addresses: with a fixed port the emulators could collide with another
    session's pods, a demo, or any wildcard listener on the machine. The operator must know the port
    before any pod exists and the emulators bind it per pod as pods appear, so it cannot be port 0:
    support.ports.free_port's residual race applies (a lost race fails the bind loudly).
    """
    port = free_port()
    monkeypatch.setattr(autoscaler_handlers, "METRICS_PORT", port)
    return port


@pytest.fixture
def fleet(api: Api, metrics_port: int) -> Iterator[Fleet]:
    """Emulated Triton metrics on every Running pod of the namespace (its IP, ``metrics_port``), idle."""
    with (
        Fleet(port=metrics_port, control=Control(fixed={"requests": 0, "kvCacheUtilization": 0.2})) as f,
        api.follow_pods(f),
    ):
        yield f


def decisions(api: Api, name: str) -> list[dict[str, Any]]:
    return list(api.autoscaling(name).get("lastDecisions") or [])


def column(header: str, row: str, name: str) -> str:
    """One cell of ``kubectl get`` table output (columns start where their header starts)."""
    start = header.index(name)
    following = [header.index(h, start + 1) for h in header[start:].split()[1:]]
    return row[start : following[0] if following else None].strip()


def scale_step(api: Api, name: str, *, up: bool, timeout: float = 15) -> dict[str, Any]:
    """The latest recorded scale-up (or scale-down) decision; waits for it, since the status write
    follows the scale patch by a moment."""

    def find() -> dict[str, Any] | None:
        for d in reversed(decisions(api, name)):
            if (d["toReplicas"] > d["fromReplicas"]) if up else (d["toReplicas"] < d["fromReplicas"]):
                return d
        return None

    try:
        step: dict[str, Any] = wait_for(
            find, timeout=timeout, desc=f"a recorded scale-{'up' if up else 'down'}"
        )
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{explain(api, name)}") from exc
    return step


def explain(api: Api, name: str) -> str:
    """Decisions and Events of ``name``, for assertion messages."""
    events = api.core.list_namespaced_event(api.ns).items
    lines = [json.dumps(d) for d in decisions(api, name)]
    lines += [f"{e.last_timestamp or e.event_time} {e.reason}: {e.message}" for e in events]
    return "\n".join(lines)


def evaluations() -> float:
    """Built-in autoscaler evaluations of the in-process operator so far
    (``trtllm_operator_autoscaler_decisions_total``, every reason)."""
    return sum(
        sample.value
        for metric in om.AUTOSCALER_DECISIONS.collect()
        for sample in metric.samples
        if sample.name.endswith("_total")
    )


def writes_to(events: list[dict[str, Any]], namespace: str, name: str) -> list[str]:
    """The write requests on LLMDeployment ``name`` (any subresource) among audit ``events``."""
    return [
        f"{e['verb']} {e['objectRef'].get('subresource', '')} by {e.get('userAgent', '')!r}"
        for e in events
        if e["verb"] in WRITE_VERBS
        and e["objectRef"].get("resource") == "llmdeployments"
        and e["objectRef"].get("namespace") == namespace
        and e["objectRef"].get("name") == name
    ]


def first_time(api: Api, name: str, predicate: Any, timeout: float, desc: str) -> float:
    """Poll spec.replicas; the monotonic time when ``predicate(replicas)`` first held."""
    wait_for(lambda: predicate(api.replicas(name)), timeout=timeout, interval=0.1, desc=desc)
    return time.monotonic()


#: The emulators' load model of the arrival-rate tests: 4 sequences of 0.5 s each per replica (a 0.1 s
#: prefill, then 64 tokens at 160 tokens/s) → 8 requests/s per replica; KV 0.5 when saturated.
QUEUEING = ServingProfile(
    max_batch_size=4,
    kv_blocks=40,
    input_tokens=256,
    output_tokens=64,
    decode_tokens_per_second=160.0,
    prefill_seconds=0.1,
)


def a_fast_stepping_deployment(name: str) -> dict[str, Any]:
    """An autoscaled deployment ``name`` of engine llama, 1 to 3 replicas, that steps fast: up to 4
    replicas a 1 s period, stabilization windows 2 s up and 6 s down."""
    return an_autoscaled_deployment(
        name,
        "llama",
        max_replicas=3,
        up={"stabilizationWindowSeconds": 2, "maxReplicasPerStep": 4, "periodSeconds": 1},
        down={"stabilizationWindowSeconds": 6, "maxReplicasPerStep": 4, "periodSeconds": 1},
    )


# ------------------------------------------------------------------------------ tests
def test_load_up_scales_out_within_the_window_and_back_in_after_the_scale_down_window(
    cluster: LocalCluster, api: Api, fleet: Fleet
) -> None:
    up_window, down_window = 3, 10
    api.create(
        an_autoscaled_deployment(
            "chat",
            "llama",
            max_replicas=3,
            up={"stabilizationWindowSeconds": up_window, "maxReplicasPerStep": 4, "periodSeconds": 1},
            down={"stabilizationWindowSeconds": down_window, "maxReplicasPerStep": 4, "periodSeconds": 1},
        ),
    )
    with running_operator(cluster, [api.ns]):
        wait_serving(api, fleet, "chat", 1)
        assert api.autoscaling("chat")["activeRequestUtilization"] == 0
        assert api.autoscaling("chat")["kvCacheUtilizationPercent"] == 20
        active = wait_for(lambda: api.condition("chat", "ScalingActive"), desc="ScalingActive")
        assert active["status"] == "True", active

        # Load rises: 80 requests per replica, max 64 (the emulator's max_batch_size): active is capped
        # at max (TensorRT-LLM executorImpl.cpp), so active / max = 1 against a target of 0.5.
        t_up = api.set_load(fleet, requests=80, kvCacheUtilization=0.5)
        t_scaled = first_time(api, "chat", lambda r: r > 1, timeout=up_window + 20, desc="scale-up")
        # Not before the scale-up window has passed. No upper bound on wall time (issue 23 item 5: a busy
        # machine delays the scale-up by its own delays); that the policy scales at the first evaluation
        # after the window is the policy's, proven on an injected clock by test_autoscaling_policy.py's
        # WINDOWS cases. Below, the hold before the step names the spec's window.
        assert t_scaled - t_up >= up_window - 1.5, t_scaled - t_up
        first_time(api, "chat", lambda r: r == 3, timeout=30, desc="scale to maxReplicas")
        wait_serving(api, fleet, "chat", 3)
        scale_step(api, "chat", up=True)
        log = decisions(api, "chat")
        step = next(d for d in log if d["fromReplicas"] == 1 and d["toReplicas"] > 1)
        # The hold just before the step was the scale-up window of the spec (3 s), not the default's 15 s:
        # what the old wall-clock bound (up_window + 10 s) caught, read from the operator's own record.
        held = log[log.index(step) - 1] if log.index(step) > 0 else None
        assert held is not None and held["reason"] == "ScaleUpStabilized", log
        assert f"lowest recommendation in the last {up_window}s is 1 " in held["message"], held
        assert step["reason"] in ("AboveTarget", "TooManyReplicas"), step
        assert step["signals"]["activeRequestUtilization"] == 1.0, step
        assert "activeRequestUtilization" in step["message"]
        assert api.autoscaling("chat")["lastScaleTime"]
        # The signals feed the printer columns.
        header, row = cluster.kubectl("get", "llmdeployments", "chat", "-n", api.ns).stdout.splitlines()[:2]
        assert (column(header, row, "ACTIVE%"), column(header, row, "KV%")) == ("100", "50"), (header, row)

        # Load falls: replicas hold for the scale-down window, then go back to minReplicas.
        t_down = api.set_load(fleet, requests=0, kvCacheUtilization=0.1)
        wait_for(
            lambda: "ScaleDownStabilized" in [d["reason"] for d in decisions(api, "chat")],
            timeout=20,
            desc="ScaleDownStabilized decision",
        )
        assert api.replicas("chat") == 3
        t_in = first_time(api, "chat", lambda r: r < 3, timeout=down_window + 30, desc="scale-down")
        assert t_in - t_down >= down_window - 1.5, t_in - t_down
        first_time(api, "chat", lambda r: r == 1, timeout=30, desc="back to minReplicas")
        down = scale_step(api, "chat", up=False)
        log = decisions(api, "chat")
        assert down["reason"] in ("BelowTarget", "TooFewReplicas"), down
        assert down["signals"]["activeRequestUtilization"] == 0, down
        assert len(log) <= 10
        limited = api.condition("chat", "ScalingLimited")
        assert limited is not None and limited["reason"] in ("DesiredWithinRange", "TooFewReplicas"), limited


#: Evaluations in the quiet window of the idle test (``scrapeIntervalSeconds: 1``: about 1 s each).
QUIET_EVALUATIONS = 6


def test_an_idle_deployment_writes_nothing_per_evaluation(
    cluster: LocalCluster, api: Api, fleet: Fleet
) -> None:
    """Issue #20: 1 replica, no request, 0 % KV cache, settled: several evaluations of the built-in
    autoscaler in a row make no write to the LLMDeployment (status, scale or otherwise), as the API
    server's audit log records every write request. Before the fix every evaluation wrote
    ``status.autoscaling.policyState`` (a new timestamped recommendation): a write per evaluation."""
    api.set_load(fleet, requests=0, kvCacheUtilization=0.0)
    api.create(
        an_autoscaled_deployment(
            "idle",
            "llama",
            max_replicas=3,
            up={"stabilizationWindowSeconds": 3},
            down={"stabilizationWindowSeconds": 10},
        ),
    )
    created = cluster.audit_mark()
    with running_operator(cluster, [api.ns]):
        wait_serving(api, fleet, "idle", 1)

        def settled() -> bool:
            active = api.condition("idle", "ScalingActive") or {}
            log = decisions(api, "idle")
            return (
                api.status("idle").get("phase") == "Ready"
                and active.get("reason") == "ValidMetricFound"
                and bool(log)
                and log[-1]["reason"] == "TooFewReplicas"
                and api.autoscaling("idle").get("kvCacheUtilizationPercent") == 0
            )

        wait_for(settled, timeout=60, desc="an idle, settled deployment")
        mark, start = cluster.audit_mark(), evaluations()
        wait_for(
            lambda: evaluations() - start >= QUIET_EVALUATIONS,
            timeout=60,
            desc=f"{QUIET_EVALUATIONS} evaluations",
        )
        since_created, quiet = cluster.audit_events(created), cluster.audit_events(mark)
    assert any(w.startswith("patch status") for w in writes_to(since_created, api.ns, "idle")), (
        "the audit log must show the operator's first status writes"  # the log works
    )
    assert writes_to(quiet, api.ns, "idle") == [], explain(api, "idle")
    assert api.replicas("idle") == 1


def test_arrival_rate_on_the_load_model_drives_scale_out_and_in(
    cluster: LocalCluster, api: Api, fleet: Fleet
) -> None:
    """Requests/s instead of pinned gauges: the emulators' fluid queue model makes the signals."""
    fleet.profile = QUEUEING
    fleet.set_control(Control(arrival_rate=0.0))
    api.create(a_fast_stepping_deployment("model"))
    with running_operator(cluster, [api.ns]):
        wait_serving(api, fleet, "model", 1)
        fleet.set_control(Control(arrival_rate=20.0))  # 2.5× one replica's capacity: the queue grows
        first_time(api, "model", lambda r: r == 3, timeout=60, desc="scale-out on a growing queue")
        scale_step(api, "model", up=True)
        step = next(d for d in decisions(api, "model") if d["fromReplicas"] == 1 and d["toReplicas"] > 1)
        assert step["signals"]["activeRequestUtilization"] > 0.5, step
        fleet.set_control(Control(arrival_rate=0.0))
        first_time(api, "model", lambda r: r == 1, timeout=60, desc="scale-in once the queue drained")
        down = scale_step(api, "model", up=False)
        assert down["signals"]["activeRequestUtilization"] < 0.5, down


def test_active_request_utilization_alone_drives_scale_out_and_in(
    cluster: LocalCluster, api: Api, fleet: Fleet
) -> None:
    """targets.activeRequestUtilization only: active / max from the emulators' load model (active
    capped at max, the rest queued in the executor where no series shows it)."""
    fleet.profile = QUEUEING
    fleet.set_control(Control(arrival_rate=0.0))
    manifest = a_fast_stepping_deployment("batch")
    manifest["spec"]["autoscaling"]["targets"] = {"activeRequestUtilization": 0.5}
    api.create(manifest)
    with running_operator(cluster, [api.ns]):
        wait_serving(api, fleet, "batch", 1)
        fleet.set_control(Control(arrival_rate=20.0))  # 2.5× one replica's capacity
        first_time(api, "batch", lambda r: r == 3, timeout=60, desc="scale-out on saturation")
        step = scale_step(api, "batch", up=True)
        assert step["signals"]["activeRequestUtilization"] > 0.5, step
        assert "activeRequestUtilization" in step["message"], step
        assert set(step["signals"]) == {"activeRequestUtilization"}, step
        fleet.set_control(Control(arrival_rate=0.0))
        first_time(api, "batch", lambda r: r == 1, timeout=60, desc="scale-in once the batches drained")
        down = scale_step(api, "batch", up=False)
        assert down["signals"]["activeRequestUtilization"] < 0.5, down


def test_capacity_drives_scale_out_beyond_what_saturation_asks_and_back_in(
    cluster: LocalCluster, api: Api, fleet: Fleet
) -> None:
    """spec.autoscaling.capacity through the real API server and the operator: arrivals from the
    emulators' success counters and active requests, over a prior of 8 requests/s per replica at
    target 0.5, ask for 3 replicas at 10 requests/s (10 / (8 × 0.5) = 2.5), where saturation alone
    (target 0.95) settles at 2 (5 requests/s each: active / max 0.625). The first pod is saturated
    when the load starts, so the first step sizes for arrivals × (1 + saturated share) — the backlog
    no series shows — and may overshoot to 4 before the 6 s scale-down window brings it to 3."""
    fleet.profile = QUEUEING  # 8 requests/s per replica when saturated
    fleet.set_control(Control(arrival_rate=0.0))
    manifest = a_fast_stepping_deployment("cap")
    manifest["spec"]["autoscaling"]["maxReplicas"] = 4
    manifest["spec"]["autoscaling"]["targets"] = {"activeRequestUtilization": 0.95}
    manifest["spec"]["autoscaling"]["capacity"] = {
        "requestsPerSecond": 8,
        "target": 0.5,
        "smoothingSeconds": 0,
    }
    api.create(manifest)
    with running_operator(cluster, [api.ns]):
        wait_serving(api, fleet, "cap", 1)
        fleet.set_control(Control(arrival_rate=10.0))
        try:
            first_time(api, "cap", lambda r: r >= 3, timeout=60, desc="scale-out to what the arrivals need")
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n{explain(api, 'cap')}") from exc
        # The first scale-up to 3 or more (the status write follows the scale patch by a moment).
        # Saturation alone (target 0.95) asks for 2, so the capacity estimate drove it: its "→ N" is
        # 3 or more. The latest decision to 3 is not that step when the first one overshot to 4 and
        # came back through 3 (CI: "scale-down to 2 stabilized … 3", capacity "→ 2" at that tick).
        step = wait_for(
            lambda: next(
                (
                    d
                    for d in decisions(api, "cap")
                    if d["toReplicas"] >= 3 and d["toReplicas"] > d["fromReplicas"]
                ),
                None,
            ),
            timeout=15,
            desc="the recorded scale-out to 3 or more",
        )
        asked = re.search(r"capacity: arrivals[^;]*→ (\d+)", step["message"])
        assert asked is not None and int(asked.group(1)) >= 3, step
        try:
            first_time(api, "cap", lambda r: r == 3, timeout=60, desc="settled at 3 after any overshoot")
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n{explain(api, 'cap')}") from exc
        # held there past the 6 s scale-down window, where saturation alone would go to 2
        seen = set()
        for _ in range(20):
            seen.add(api.replicas("cap"))
            time.sleep(0.5)
        assert seen == {3}, f"{seen}\n{explain(api, 'cap')}"
        # the capacity memory is persisted for a restart (status.autoscaling.policyState, key capacity)
        state = json.loads(api.autoscaling("cap")["policyState"])
        assert state["capacity"]["capacityRps"] > 0, state
        fleet.set_control(Control(arrival_rate=0.0))
        first_time(api, "cap", lambda r: r == 1, timeout=60, desc="scale-in once the arrivals stop")


def test_no_free_gpu_reports_scaling_limited_instead_of_piling_up_pending_pods(
    cluster: LocalCluster, api: Api, fleet: Fleet
) -> None:
    """A pool of 2 GPUs: the third replica cannot be scheduled, the autoscaler stops there."""
    pool = NodeSpec(f"gpu-pool-{api.ns}", gpu_product=H100, gpus=2, extra_labels={"trtllm-test/pool": api.ns})
    create_nodes(api.core, [pool])
    try:
        wait_nodes_ready(api.core, [pool.name])
        api.create(
            an_autoscaled_deployment(
                "tight",
                "llama",
                max_replicas=6,
                up={"stabilizationWindowSeconds": 0, "maxReplicasPerStep": 1, "periodSeconds": 1},
                down={"stabilizationWindowSeconds": 3, "maxReplicasPerStep": 6, "periodSeconds": 1},
                scheduling={"nodeSelector": {"trtllm-test/pool": api.ns}},
            ),
        )
        with running_operator(cluster, [api.ns]):
            wait_serving(api, fleet, "tight", 1)
            api.set_load(fleet, requests=80, kvCacheUtilization=0.9)
            limited = api.wait_condition(
                "tight",
                "ScalingLimited",
                reason="InsufficientGPU",
                timeout=60,
                desc="ScalingLimited InsufficientGPU",
            )
            assert limited["status"] == "True", limited
            assert "cannot be scheduled" in limited["message"]
            # Under the same load it stays there: no more replicas, never more than one Pending pod.
            deadline = time.monotonic() + 6
            while time.monotonic() < deadline:
                assert api.replicas("tight") == 3
                assert api.unschedulable("tight") <= 1
                time.sleep(0.3)
            assert api.unschedulable("tight") == 1
            log = decisions(api, "tight")
            assert any(d["reason"] == "InsufficientGPU" and d["toReplicas"] == 3 for d in log), log

            # Load falls: scale-down still works, the Pending pod goes first.
            api.set_load(fleet, requests=0, kvCacheUtilization=0.1)
            first_time(api, "tight", lambda r: r == 1, timeout=40, desc="scale-down with a Pending pod")
            wait_for(lambda: api.unschedulable("tight") == 0, timeout=30, desc="Pending pod removed")
            cleared = api.wait_condition(
                "tight", "ScalingLimited", status="False", timeout=20, desc="ScalingLimited cleared"
            )
            assert cleared["reason"] in ("DesiredWithinRange", "TooFewReplicas")
    finally:
        api.core.delete_node(pool.name)


# ------------------------------------------------------------------------------ Prometheus
@pytest.fixture
def prometheus(cluster: LocalCluster, api: Api, tmp_path: Path) -> Iterator[str]:
    """The chart's PodMonitor and PrometheusRule, reconciled by the real prometheus-operator into the
    configuration a Go-built Prometheus runs (support.monitoring.running_chart_monitoring); yields its
    base URL. Prometheus discovers the namespace's pods through the API server (kubernetes_sd)."""
    with running_chart_monitoring(cluster, api.ns, "autoscaling", tmp_path) as url:
        yield url


@pytest.fixture
def triton_fleet(api: Api) -> Iterator[Fleet]:
    """Emulated Triton metrics on every Running pod of the namespace, idle, on Triton's own metrics port
    (the ``metrics`` container port the operator renders, which the chart's PodMonitor scrapes) — not
    :func:`metrics_port`: here the operator reads Prometheus, not the pods."""
    require_triton_metrics_port_free()
    with (
        Fleet(
            port=TRITON_METRICS_PORT, control=Control(fixed={"requests": 0, "kvCacheUtilization": 0.2})
        ) as f,
        api.follow_pods(f),
    ):
        yield f


def test_same_flow_through_a_real_prometheus(
    cluster: LocalCluster, api: Api, prometheus: str, triton_fleet: Fleet
) -> None:
    fleet = triton_fleet
    down_window = 8
    api.create(
        an_autoscaled_deployment(
            "prom",
            "llama",
            max_replicas=3,
            up={"stabilizationWindowSeconds": 2, "maxReplicasPerStep": 4, "periodSeconds": 1},
            down={"stabilizationWindowSeconds": down_window, "maxReplicasPerStep": 4, "periodSeconds": 1},
            metrics={"source": "prometheus", "prometheusURL": prometheus, "scrapeIntervalSeconds": 1},
        ),
    )
    with running_operator(cluster, [api.ns], allowed_prometheus_urls=(prometheus,)):
        wait_serving(api, fleet, "prom", 1)
        # 48 of max 64 requests active per replica: 0.75 against a target of 0.5
        api.set_load(fleet, requests=48, kvCacheUtilization=0.5)
        first_time(api, "prom", lambda r: r == 3, timeout=60, desc="scale-up through Prometheus")
        scale_step(api, "prom", up=True)
        step = next(d for d in decisions(api, "prom") if d["fromReplicas"] == 1 and d["toReplicas"] > 1)
        assert step["signals"]["activeRequestUtilization"] == 0.75, step
        active = api.condition("prom", "ScalingActive")
        assert active is not None and active["status"] == "True", active

        # The chart's recording rules and the mode-keda query evaluate on the same series.
        wait_serving(api, fleet, "prom", 3)

        def recorded() -> list[dict[str, Any]] | None:
            rows = promql(prometheus, f'{ACTIVE_REQUEST_UTILIZATION_RECORD}{{namespace="{api.ns}"}}')
            return rows if len(rows) == 3 and all(float(r["value"][1]) == 0.75 for r in rows) else None

        rows = wait_for(recorded, timeout=30, desc="recording rule over 3 pods")
        assert {r["metric"]["pod"] for r in rows} == {p.metadata.name for p in api.pods("prom")}
        kv = promql(prometheus, f'{KV_CACHE_RECORD}{{namespace="{api.ns}"}}')
        assert len(kv) == 3 and all(abs(float(r["value"][1]) - 0.5) < 0.01 for r in kv), kv
        # active-request utilization = active / max, per pod, from the raw series Prometheus holds
        raw = {
            kind: {
                r["metric"]["pod"]: float(r["value"][1])
                for r in promql(
                    prometheus,
                    f'nv_trt_llm_request_metrics{{request_type="{kind}", namespace="{api.ns}"}}',
                )
            }
            for kind in ("active", "max")
        }
        for r in rows:
            pod = r["metric"]["pod"]
            want = raw["active"][pod] / raw["max"][pod]
            assert abs(float(r["value"][1]) - want) < 1e-6, (r, raw)
        uid = api.deployment("prom")["metadata"]["uid"]
        keda = desired_scaled_object(
            "prom",
            api.ns,
            OwnerRef("prom", uid),
            api_autoscaling_spec(api.deployment("prom")),
        )
        total = promql(prometheus, keda["spec"]["triggers"][0]["metadata"]["query"])
        assert len(total) == 1 and float(total[0]["value"][1]) == 3 * 0.75, total

        api.set_load(fleet, requests=0, kvCacheUtilization=0.1)
        t_down = time.monotonic()
        t_in = first_time(api, "prom", lambda r: r < 3, timeout=down_window + 40, desc="scale-down")
        assert t_in - t_down >= down_window - 1.5, t_in - t_down
        first_time(api, "prom", lambda r: r == 1, timeout=30, desc="back to minReplicas")


def api_autoscaling_spec(obj: dict[str, Any]) -> AutoscalingSpec:
    doc = dict(obj["spec"]["autoscaling"])
    doc["mode"] = "keda"
    return AutoscalingSpec.model_validate(doc)


# ------------------------------------------------------------------------------ hpa / keda modes
def test_mode_hpa_renders_an_hpa_on_the_scale_subresource_and_mode_switches_clean_up(
    cluster: LocalCluster, api: Api
) -> None:
    body = an_autoscaled_deployment(
        "ext",
        "llama",
        max_replicas=4,
        up={"stabilizationWindowSeconds": 0},
        down={"stabilizationWindowSeconds": 60},
    )
    body["spec"]["autoscaling"]["mode"] = "hpa"
    # Every signal the built-in policy has is rendered (issue #27).
    api.create(body)
    hpa_api = client.AutoscalingV2Api(cluster.api)

    def hpa() -> Any:
        try:
            return hpa_api.read_namespaced_horizontal_pod_autoscaler("ext", api.ns)
        except client.ApiException as exc:
            if exc.status == 404:
                return None
            raise

    with running_operator(cluster, [api.ns]):
        found = wait_for(hpa, timeout=60, desc="HPA created")
        ref = found.spec.scale_target_ref
        assert (ref.api_version, ref.kind, ref.name) == (f"{GROUP}/{VERSION}", "LLMDeployment", "ext")
        assert [m.pods.metric.name for m in found.spec.metrics] == [
            "trtllm_active_request_utilization",
            "trtllm_kv_cache_utilization",
        ]
        assert found.spec.metrics[0].pods.target.average_value == "500m"
        assert found.metadata.owner_references[0].kind == "LLMDeployment"
        # What the HPA controller reads (the local control plane does not run it): the /scale
        # subresource of the target, with the pod selector for its Pods metrics.
        scale = wait_for(
            lambda: (
                (
                    sc := api.custom.get_namespaced_custom_object_scale(
                        GROUP, VERSION, api.ns, "llmdeployments", "ext"
                    )
                )
                and sc.get("status", {}).get("selector")
                and sc
            ),
            timeout=60,
            desc="scale subresource with a selector",
        )
        assert scale["spec"]["replicas"] == 1
        assert scale["status"]["selector"] == SELECTOR.format("ext")
        # No custom metrics API here (no prometheus-adapter: no APIService v1beta2/v1beta1
        # .custom.metrics.k8s.io): the HPA stands, but ScalingActive says it cannot read its metrics
        # (fresh-user trial 46 T3; with the adapter: tests/integration/test_hpa_controller.py).
        active = api.wait_condition(
            "ext",
            "ScalingActive",
            reason="CustomMetricsAPIMissing",
            timeout=30,
            desc="CustomMetricsAPIMissing",
        )
        assert active["status"] == "False" and "v1beta1.custom.metrics.k8s.io" in active["message"], active
        assert "install prometheus-adapter" in active["message"], active

        # mode keda without KEDA installed: the HPA goes, the condition says what is missing.
        api.custom.patch_namespaced_custom_object(
            GROUP,
            VERSION,
            api.ns,
            "llmdeployments",
            "ext",
            {
                "spec": {
                    "autoscaling": {
                        "mode": "keda",
                        "metrics": {
                            "source": "prometheus",
                            "prometheusURL": "http://prometheus.invalid:9090",
                        },
                    }
                }
            },
        )
        wait_for(lambda: hpa() is None, timeout=30, desc="HPA removed")
        missing = api.wait_condition(
            "ext", "ScalingActive", reason="KEDANotInstalled", timeout=30, desc="KEDANotInstalled"
        )
        assert missing["status"] == "False" and "install KEDA" in missing["message"]

        # Back to hpa, then autoscaling off: the HPA comes and goes again.
        api.custom.patch_namespaced_custom_object(
            GROUP, VERSION, api.ns, "llmdeployments", "ext", {"spec": {"autoscaling": {"mode": "hpa"}}}
        )
        wait_for(hpa, timeout=30, desc="HPA re-created")
        api.custom.patch_namespaced_custom_object(
            GROUP, VERSION, api.ns, "llmdeployments", "ext", {"spec": {"autoscaling": {"enabled": False}}}
        )
        wait_for(lambda: hpa() is None, timeout=30, desc="HPA removed when autoscaling is off")
        # Each deletion says so, as each creation does (fresh-user trial 34: the create had an Event,
        # the delete none). The HPA is deleted before the Event is posted: wait for it.
        deleted = wait_for(
            lambda: (
                msgs
                if len(msgs := [e.message for e in api.events("ext", "HorizontalPodAutoscalerDeleted")]) == 2
                else None
            ),
            timeout=30,
            desc="two HorizontalPodAutoscalerDeleted Events",
        )
        assert sorted(deleted) == [
            "deleted HorizontalPodAutoscaler ext: spec.autoscaling.enabled is false",
            "deleted HorizontalPodAutoscaler ext: spec.autoscaling.mode is keda",
        ], deleted


def test_a_foreign_hpa_of_the_same_name_is_left_alone_and_reported(cluster: LocalCluster, api: Api) -> None:
    """Fresh-user trial 35 F1: a user's own HPA named like the LLMDeployment, then mode hpa. The
    operator leaves it alone (not its object), and the status said ``ScalingActive=True
    HPARendered``, "scaling delegated", while nothing it rendered scaled anything."""
    hpa_api = client.AutoscalingV2Api(cluster.api)
    target = client.V2CrossVersionObjectReference(api_version="apps/v1", kind="Deployment", name="taken")
    cpu = client.V2MetricTarget(type="Utilization", average_utilization=50)
    foreign = client.V2HorizontalPodAutoscaler(
        metadata=client.V1ObjectMeta(name="taken"),
        spec=client.V2HorizontalPodAutoscalerSpec(
            scale_target_ref=target,
            min_replicas=1,
            max_replicas=2,
            metrics=[
                client.V2MetricSpec(
                    type="Resource", resource=client.V2ResourceMetricSource(name="cpu", target=cpu)
                )
            ],
        ),
    )
    hpa_api.create_namespaced_horizontal_pod_autoscaler(api.ns, foreign)
    body = an_autoscaled_deployment("taken", "llama", max_replicas=3, up={}, down={})
    body["spec"]["autoscaling"]["mode"] = "hpa"
    api.create(body)
    with running_operator(cluster, [api.ns]):
        active = api.wait_condition(
            "taken", "ScalingActive", reason="HorizontalPodAutoscalerConflict", timeout=60
        )
        assert active["status"] == "False", active
        assert (
            "HorizontalPodAutoscaler taken exists but is not owned by this LLMDeployment" in active["message"]
        )
        warnings = wait_for(
            lambda: api.events("taken", "HorizontalPodAutoscalerConflict"),
            timeout=30,
            desc="HorizontalPodAutoscalerConflict Event",
        )
        assert warnings[0].type == "Warning"
        live = hpa_api.read_namespaced_horizontal_pod_autoscaler("taken", api.ns)
        assert not live.metadata.owner_references and live.spec.max_replicas == 2  # left as the user wrote it


def test_leaving_mode_builtin_clears_its_status_and_says_who_decides(
    cluster: LocalCluster, api: Api, fleet: Fleet
) -> None:
    """Issue #20 item 2: after a switch from builtin to hpa, the built-in autoscaler's
    ``status.autoscaling`` (the KV% / ACTIVE% printer columns, lastDecisions, the policy state) is
    removed and ``ScalingLimited`` says the HPA decides now and where to look; with autoscaling
    then turned off, ``ScalingActive`` / ``ScalingLimited`` say so. Before, both stayed as the last
    built-in evaluation left them."""
    api.create(
        an_autoscaled_deployment(
            "moved", "llama", max_replicas=3, up={"stabilizationWindowSeconds": 0}, down={}
        ),
    )
    hpa_api = client.AutoscalingV2Api(cluster.api)
    with running_operator(cluster, [api.ns]):
        wait_serving(api, fleet, "moved", 1)
        wait_for(lambda: api.condition("moved", "ScalingLimited"), timeout=30, desc="ScalingLimited")
        api.patch("llmdeployments", "moved", {"spec": {"autoscaling": {"mode": "hpa"}}})
        wait_for(
            lambda: hpa_api.read_namespaced_horizontal_pod_autoscaler("moved", api.ns),
            timeout=30,
            desc="the HPA",
        )
        # This control plane serves no custom metrics API (no prometheus-adapter), so the HPA cannot
        # read its metrics and does not decide either (fresh-user trial 46 T3): both conditions say
        # so. With the API, ScalingLimited is ScalingDelegated naming the HPA ("kubectl describe hpa
        # moved": tests/unit/test_autoscaler_decide.py, retire_builtin).
        limited = api.wait_condition(
            "moved",
            "ScalingLimited",
            reason="CustomMetricsAPIMissing",
            timeout=30,
            desc="ScalingLimited CustomMetricsAPIMissing",
        )
        assert limited["status"] == "Unknown", limited
        assert "no autoscaler decides the replica count" in limited["message"], limited
        assert "HorizontalPodAutoscaler moved" in limited["message"], limited
        assert "autoscaling" not in api.status("moved"), api.status("moved")
        active = api.condition("moved", "ScalingActive")
        assert active is not None and active["reason"] == "CustomMetricsAPIMissing", active
        header, row = cluster.kubectl("get", "llmdeployments", "moved", "-n", api.ns).stdout.splitlines()[:2]
        assert (column(header, row, "ACTIVE%"), column(header, row, "KV%")) == ("", ""), (header, row)

        api.patch("llmdeployments", "moved", {"spec": {"autoscaling": {"enabled": False}}})
        active = api.wait_condition(
            "moved",
            "ScalingActive",
            reason="AutoscalingDisabled",
            timeout=30,
            desc="ScalingActive AutoscalingDisabled",
        )
        assert active["status"] == "False" and "spec.autoscaling.enabled is false" in active["message"]
        limited = api.condition("moved", "ScalingLimited")
        assert limited is not None and (limited["status"], limited["reason"]) == (
            "False",
            "AutoscalingDisabled",
        ), limited


def test_unreachable_prometheus_holds_replicas_and_says_why(cluster: LocalCluster, api: Api) -> None:
    """No data is not zero load: nothing scales down, ScalingActive=False names the failure."""
    with bound_socket() as closed:  # held, never listening: connections to its port are refused
        _unreachable_prometheus(cluster, api, closed)


def _unreachable_prometheus(cluster: LocalCluster, api: Api, closed: socket.socket) -> None:
    body = an_autoscaled_deployment(
        "blind",
        "llama",
        max_replicas=4,
        up={"stabilizationWindowSeconds": 0},
        down={"stabilizationWindowSeconds": 0, "maxReplicasPerStep": 4, "periodSeconds": 1},
        metrics={
            "source": "prometheus",
            "prometheusURL": f"http://127.0.0.1:{closed.getsockname()[1]}",
            "scrapeIntervalSeconds": 1,
        },
    )
    body["spec"]["replicas"] = 2
    api.create(body)
    url = body["spec"]["autoscaling"]["metrics"]["prometheusURL"]
    with running_operator(cluster, [api.ns], allowed_prometheus_urls=(url,)):
        active = api.wait_condition(
            "blind",
            "ScalingActive",
            reason="FailedGetMetrics",
            timeout=60,
            desc="ScalingActive FailedGetMetrics",
        )
        assert active["status"] == "False" and "127.0.0.1" in active["message"], active
        deadline = time.monotonic() + 4
        while time.monotonic() < deadline:
            assert api.replicas("blind") == 2
            time.sleep(0.3)
        log = decisions(api, "blind")
        assert log and log[-1]["reason"] == "MissingMetrics" and log[-1]["toReplicas"] == 2, log
        assert "activeRequestUtilization" not in api.autoscaling("blind")


def test_a_manual_scale_the_autoscaler_reverts_posts_why(
    cluster: LocalCluster, api: Api, fleet: Fleet
) -> None:
    """kubectl scale above maxReplicas while the built-in autoscaler runs: it brings spec.replicas
    back, posts a ManualScaleReverted Warning naming the field that owns the count and how to change
    it, and notes the same in lastDecisions (issue #25 item 5)."""
    api.create(
        an_autoscaled_deployment(
            "manual",
            "llama",
            max_replicas=2,
            up={"stabilizationWindowSeconds": 0},
            down={"stabilizationWindowSeconds": 0},
        ),
    )
    with running_operator(cluster, [api.ns]):
        wait_serving(api, fleet, "manual", 1)
        wait_for(lambda: api.autoscaling("manual").get("desiredReplicas") == 1, timeout=30, desc="a decision")
        before = api.apps.read_namespaced_deployment("manual", api.ns).metadata.resource_version
        # What `kubectl scale llmd manual --replicas 4` does: a patch of the scale subresource.
        api.custom.patch_namespaced_custom_object_scale(
            GROUP, VERSION, api.ns, "llmdeployments", "manual", {"spec": {"replicas": 4}}
        )

        def reverted() -> Any:
            return next(
                (
                    e
                    for e in api.core.list_namespaced_event(api.ns).items
                    if e.reason == "ManualScaleReverted" and e.involved_object.name == "manual"
                ),
                None,
            )

        event = wait_for(reverted, timeout=30, desc="a ManualScaleReverted Event")
        assert event.type == "Warning", event
        assert "spec.replicas was set to 4 outside the autoscaler" in event.message, event.message
        assert "spec.autoscaling.enabled: false" in event.message, event.message
        assert api.replicas("manual") == 2, explain(api, "manual")
        step = scale_step(api, "manual", up=False)
        assert (step["fromReplicas"], step["toReplicas"], step["reason"]) == (4, 2, "TooManyReplicas"), step
        assert step["message"].startswith("spec.replicas was set to 4 outside the autoscaler"), step
        # Fresh-user trial 34 F1: the Deployment ran 4 pods (above maxReplicas 2) until the
        # autoscaler's evaluation, and ~8 WorkloadScaleReverted Warnings blamed a direct scale of the
        # Deployment that nobody made. Every version of the Deployment since the scale (a watch from
        # a resourceVersion delivers each change after it, in order) stays within maxReplicas.
        wait_for(
            lambda: api.apps.read_namespaced_deployment("manual", api.ns).spec.replicas == 2,
            timeout=30,
            desc="the Deployment at 2",
        )
        seen = [
            event["object"].spec.replicas
            for event in watch.Watch().stream(
                api.apps.list_namespaced_deployment,
                api.ns,
                field_selector="metadata.name=manual",
                resource_version=before,
                timeout_seconds=3,
            )
        ]
        assert seen and max(seen) == 2, seen
        blamed = [e.message for e in api.events("manual", "WorkloadScaleReverted")]
        assert blamed == [], blamed

        # Scaled to 0 (trial 34 F2): the autoscaler pauses and says so as HPA does
        # (ScalingActive=False ScalingDisabled), and Ready stays True on the way to ScaledToZero.
        starting = api.event_reasons("manual").count("ReplicasStarting")
        api.custom.patch_namespaced_custom_object_scale(
            GROUP, VERSION, api.ns, "llmdeployments", "manual", {"spec": {"replicas": 0}}
        )
        paused = api.wait_condition(
            "manual",
            "ScalingActive",
            reason="ScalingDisabled",
            timeout=30,
            desc="ScalingActive ScalingDisabled",
        )
        assert paused["status"] == "False", paused
        wait_for(
            lambda: (api.condition("manual", "Ready") or {}).get("reason") == "ScaledToZero",
            timeout=60,
            desc="Ready ScaledToZero",
        )
        assert api.event_reasons("manual").count("ReplicasStarting") == starting, explain(api, "manual")
        assert api.replicas("manual") == 0
