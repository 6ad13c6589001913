"""The autoscaler's writes, decided without I/O (``trtllm_operator.decide.autoscaler``, issue #27
item 5): conditions and reasons for a tick, an invalid spec and the external modes."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
from typing import Any

import pytest

from trtllm_operator.api.deployment import AutoscalingSpec
from trtllm_operator.decide.autoscaler import (
    KEDA_NOT_INSTALLED,
    ExternalPlan,
    Remembered,
    admission_refusal,
    decide_external,
    decide_invalid,
    decide_tick,
    external_conflict,
    external_failed,
    external_refused,
    external_rendered,
    failure_is_new,
    other_scaler,
    refused_message,
    retire_builtin,
    state_for_tick,
    undelegated,
)
from trtllm_operator.decide.autoscaling import (
    AutoscalerState,
    PodSignals,
    PodState,
    Policy,
    RateLimit,
    Reason,
    Recommendation,
    ScaleEvent,
    ScalingRules,
    Snapshot,
    decide,
    resume,
    same_memory,
)
from trtllm_operator.decide.capacity import CapacityParams
from trtllm_operator.decide.conditions import merge_conditions

NOW = 1_800_000_000.0
FAST = {
    "min_replicas": 1,
    "max_replicas": 4,
    "active_request_utilization": 0.2,
    "kv_cache_utilization": None,
    "scale_up": ScalingRules(0, (RateLimit("Percent", 1000, 1),)),
    "scale_down": ScalingRules(0, (RateLimit("Percent", 100, 1),)),
}


def tick(current: int, active: float | None, *pods: PodSignals, **policy: Any) -> Any:
    """``current`` Ready pods, each at active / max = ``active`` (target 0.2)."""
    ready = tuple(
        PodSignals(f"p{i}", PodState.READY, {"activeRequestUtilization": active}) for i in range(current)
    )
    return decide(Snapshot(current, ready + pods), AutoscalerState(), Policy(**{**FAST, **policy}), NOW)


def outcome(decision: Any, **kw: Any) -> Any:
    args: dict[str, Any] = {
        "source_error": None,
        "autoscaling_status": {},
        "conditions": None,
        "scale_time": "2027-01-15T08:00:00Z",
        "generation": 7,
        "max_decisions": 10,
    }
    args.update(kw)
    return decide_tick(decision, **args)


def by_type(conditions: list[dict[str, Any]]) -> dict[str, tuple[str, str]]:
    assert all(c["observedGeneration"] == 7 for c in conditions), conditions
    return {c["type"]: (c["status"], c["reason"]) for c in conditions}


def test_scale_up_patches_posts_and_records() -> None:
    out = outcome(tick(2, 0.6, max_replicas=8))
    assert out.scale_to == 6
    assert out.scale_event is not None and out.scale_event.reason == "ScaledUp"
    assert out.scale_event.message.startswith("2 → 6: AboveTarget: activeRequestUtilization above target")
    assert by_type(out.conditions) == {
        "ScalingActive": ("True", "ValidMetricFound"),
        "ScalingLimited": ("False", "DesiredWithinRange"),
    }
    assert out.status["activeRequestUtilization"] == 0.6 and out.status["desiredReplicas"] == 6
    assert out.status["activeRequestUtilizationPercent"] == 60
    assert out.status["kvCacheUtilization"] is None and out.status["kvCacheUtilizationPercent"] is None
    assert out.status["lastScaleTime"] == "2027-01-15T08:00:00Z"
    assert [d["toReplicas"] for d in out.status["lastDecisions"]] == [6]
    assert json.loads(out.status["policyState"])["scaleEvents"] == [[NOW, 4]]
    assert out.warnings == []


def test_hold_keeps_the_last_scale_time_and_patches_nothing() -> None:
    out = outcome(tick(2, 0.2), autoscaling_status={"lastScaleTime": "2027-01-01T00:00:00Z"})
    assert (out.scale_to, out.scale_event) == (None, None)
    assert out.status["lastScaleTime"] == "2027-01-01T00:00:00Z"


def test_missing_metrics_and_a_failed_source() -> None:
    missing = outcome(tick(2, None))
    assert by_type(missing.conditions)["ScalingActive"] == ("False", "MissingMetrics")
    failed = outcome(tick(2, None), source_error="query http://prom failed: refused")
    active = failed.conditions[0]
    assert (active["status"], active["reason"], active["message"]) == (
        "False",
        "FailedGetMetrics",
        "query http://prom failed: refused",
    )


def test_zero_replicas_report_scaling_disabled_as_hpa_does() -> None:
    """Fresh-user trial 34 F2: at spec.replicas 0 the decision was ScalingDisabled but ScalingActive
    stayed True/ValidMetricFound with no pod to read. Kubernetes' HPA sets ScalingActive=False
    ScalingDisabled "scaling is disabled since the replica count of the target is zero"
    (pkg/controller/podautoscaler/horizontal.go reconcileAutoscaler)."""
    paused = decide(Snapshot(0, ()), AutoscalerState(), Policy(**FAST), NOW)
    assert paused.reason == Reason.SCALING_DISABLED
    out = outcome(paused)
    assert out.scale_to is None
    active = out.conditions[0]
    assert (active["type"], active["status"], active["reason"]) == (
        "ScalingActive",
        "False",
        "ScalingDisabled",
    )
    assert active["message"].startswith("scaling is disabled since the replica count of the target is zero")
    # A failed source at 0 replicas changes nothing: there is nothing to read anyway.
    failed = outcome(paused, source_error="query http://prom failed: refused")
    assert by_type(failed.conditions)["ScalingActive"] == ("False", "ScalingDisabled")


def test_pods_without_data_among_pods_with_data_keep_scaling_active() -> None:
    # 1 of 2 Ready pods has no data: filled in at target (HPA's rule), the hold is MissingMetrics but
    # the signal is read, so ScalingActive stays True.
    pods = (
        PodSignals("p0", PodState.READY, {"activeRequestUtilization": 0.05}),
        PodSignals("p1", PodState.READY, {"activeRequestUtilization": None}),
    )
    d = decide(Snapshot(2, pods), AutoscalerState(), Policy(**FAST), NOW)
    assert d.reason == Reason.MISSING_METRICS, d.message
    assert by_type(outcome(d).conditions)["ScalingActive"] == ("True", "ValidMetricFound")


def test_a_limit_sets_scaling_limited_with_its_reason() -> None:
    out = outcome(tick(4, 1.0))
    assert by_type(out.conditions)["ScalingLimited"] == ("True", str(Reason.TOO_MANY_REPLICAS))
    assert out.warnings == []  # a configured limit is no Warning


@pytest.mark.parametrize(
    ("before", "warns"),
    [
        (None, True),
        ({"type": "ScalingLimited", "status": "True", "reason": "InsufficientGPU"}, False),
        ({"type": "ScalingLimited", "status": "True", "reason": "ScaleUpLimit"}, True),
        ({"type": "ScalingLimited", "status": "False", "reason": "InsufficientGPU"}, True),
    ],
)
def test_insufficient_gpu_warns_once_when_it_starts(before: dict[str, str] | None, warns: bool) -> None:
    decision = tick(2, 0.6, PodSignals("u", PodState.UNSCHEDULABLE))
    assert decision.limited == Reason.INSUFFICIENT_GPU
    out = outcome(decision, conditions=[before] if before else [])
    assert by_type(out.conditions)["ScalingLimited"] == ("True", "InsufficientGPU")
    assert [(w.reason, w.type) for w in out.warnings] == ([("InsufficientGPU", "Warning")] if warns else [])


def test_invalid_spec_condition_carries_the_message() -> None:
    (active,) = decide_invalid("spec.autoscaling.maxReplicas is required: set it", 3)
    assert (active["type"], active["status"], active["reason"], active["observedGeneration"]) == (
        "ScalingActive",
        "False",
        "InvalidSpec",
        3,
    )
    assert active["message"] == "spec.autoscaling.maxReplicas is required: set it"


@pytest.mark.parametrize(
    ("doc", "plan"),
    [
        ({"enabled": True, "mode": "hpa"}, ExternalPlan("hpa", ("keda",))),
        ({"enabled": True, "mode": "keda"}, ExternalPlan("keda", ("hpa",))),
        ({"enabled": True, "mode": "builtin"}, ExternalPlan(None, ("hpa", "keda"))),
        ({"enabled": False, "mode": "hpa"}, ExternalPlan(None, ("hpa", "keda"))),
    ],
)
def test_external_plan(doc: dict[str, Any], plan: ExternalPlan) -> None:
    spec = AutoscalingSpec.model_validate(
        {**doc, "maxReplicas": 4, "targets": {"activeRequestUtilization": 0.7}}
    )
    assert decide_external(spec) == plan


def test_external_conditions() -> None:
    (rendered,) = external_rendered("keda", "llama", 2)
    assert (rendered["status"], rendered["reason"], rendered["message"]) == (
        "True",
        "KEDARendered",
        "scaling delegated to the keda object llama",
    )
    conditions, warning = external_failed("KEDANotInstalled", KEDA_NOT_INSTALLED, 2)
    assert (conditions[0]["status"], conditions[0]["reason"]) == ("False", "KEDANotInstalled")
    assert (warning.reason, warning.type, warning.message) == (
        "KEDANotInstalled",
        "Warning",
        KEDA_NOT_INSTALLED,
    )


def test_a_manual_scale_changed_back_posts_a_warning_and_notes_it_in_the_decision() -> None:
    # kubectl scale set 4 while maxReplicas is 2 and the autoscaler's last decision was 2: the tick
    # brings it back to 2, says who owns spec.replicas and how to change it (issue #25 item 5).
    d = tick(4, 0.2, max_replicas=2)
    assert (d.from_replicas, d.to_replicas) == (4, 2)
    out = outcome(d, autoscaling_status={"desiredReplicas": 2})
    assert out.scale_to == 2
    [warning] = out.warnings
    assert (warning.reason, warning.type) == ("ManualScaleReverted", "Warning")
    assert "spec.replicas was set to 4 outside the autoscaler" in warning.message
    assert "spec.autoscaling.enabled: false" in warning.message and "maxReplicas" in warning.message
    assert out.status["lastDecisions"][-1]["message"].startswith("spec.replicas was set to 4")


def test_the_autoscalers_own_scale_is_no_manual_scale() -> None:
    out = outcome(tick(2, 0.6, max_replicas=8), autoscaling_status={"desiredReplicas": 2})
    assert out.scale_to == 6 and out.warnings == []
    first = outcome(tick(4, 0.2, max_replicas=2))  # no previous decision: nothing to compare with
    assert first.scale_to == 2 and first.warnings == []


# --- writes once per change (issue #20) ---------------------------------------------------------
#: Targets as the integration tests' deployments have them; windows longer than the 15 s interval.
QUIET = Policy(
    min_replicas=1,
    max_replicas=4,
    active_request_utilization=0.5,
    kv_cache_utilization=0.8,
    scale_up=ScalingRules(60, (RateLimit("Pods", 4, 15),)),
    scale_down=ScalingRules(120, (RateLimit("Pods", 4, 15),)),
)
INTERVAL = 15.0  # spec.autoscaling.metrics.scrapeIntervalSeconds' default


def serving(replicas: int, active: float, kv: float) -> Snapshot:
    values = {"activeRequestUtilization": active, "kvCacheUtilization": kv}
    return Snapshot(replicas, tuple(PodSignals(f"p{i}", PodState.READY, values) for i in range(replicas)))


class Object:
    """An LLMDeployment's ``status.autoscaling`` and conditions as the API server keeps them, and the
    writes each tick decides: the fields whose value it changes (what a merge patch of
    ``outcome.status`` would change; the status writer skips a patch that changes nothing)."""

    def __init__(self) -> None:
        self.autoscaling: dict[str, Any] = {}
        self.conditions: list[dict[str, Any]] = []

    def write(self, out: Any, now: float) -> list[str]:
        changed = sorted(k for k, v in out.status.items() if self.autoscaling.get(k) != v)
        merged = merge_conditions(self.conditions, out.conditions, dt.datetime.fromtimestamp(now, dt.UTC))
        if merged != self.conditions:
            changed.append("conditions")
        self.autoscaling = {k: v for k, v in {**self.autoscaling, **out.status}.items() if v is not None}
        self.conditions = merged
        return changed


#: Windows at and below the interval: scale up at once, down after two quiet evaluations.
BRISK = Policy(
    min_replicas=1,
    max_replicas=4,
    active_request_utilization=0.5,
    kv_cache_utilization=0.8,
    scale_up=ScalingRules(0, (RateLimit("Pods", 1, 15),)),
    scale_down=ScalingRules(30, (RateLimit("Pods", 1, 15),)),
)


def evaluate(obj: Object, snapshot: Snapshot, state: AutoscalerState, now: float) -> tuple[Any, list[str]]:
    d = decide(snapshot, state, QUIET, now)
    out = outcome(d, autoscaling_status=obj.autoscaling, conditions=obj.conditions)
    return d, obj.write(out, now)


def test_an_idle_settled_deployment_decides_no_write_per_evaluation() -> None:
    """Issue #20: 1 replica at 0 % KV and no request, evaluated every 15 s. The first evaluation
    writes status; every later one leaves every field as it is (before the fix ``policyState``
    gained a timestamped recommendation at each, a status write per evaluation)."""
    obj, state, writes = Object(), AutoscalerState(), []
    for i in range(8):
        d, changed = evaluate(obj, serving(1, 0.0, 0.0), state, NOW + i * INTERVAL)
        assert (d.to_replicas, d.reason) == (1, Reason.TOO_FEW_REPLICAS), d.message
        writes.append(changed)
        state = d.state
    assert "policyState" in writes[0] and "kvCacheUtilizationPercent" in writes[0], writes
    assert writes[1:] == [[]] * 7, writes


def test_a_new_recommendation_or_a_scale_is_written_once() -> None:
    obj, state = Object(), AutoscalerState()
    changes = []
    for i, (replicas, active) in enumerate([(1, 0.0), (1, 0.0), (1, 0.9), (1, 0.9), (1, 0.9)]):
        d, changed = evaluate(obj, serving(replicas, active, 0.0), state, NOW + i * INTERVAL)
        changes.append("policyState" in changed)
        state = d.state
    # the load arrives at the third evaluation: a new count (2), held by the 60 s scale-up window
    assert changes == [True, False, True, False, False], changes
    assert d.reason == Reason.SCALE_UP_STABILIZED, d.message


@pytest.mark.parametrize("policy", [QUIET, BRISK], ids=["windows-above-interval", "windows-at-or-below"])
def test_the_persisted_state_carries_every_decision_across_restarts(policy: Policy) -> None:
    """The operator writes ``policyState`` only when ``same_memory`` says so; a restart at any
    evaluation carries the persisted copy over with ``resume``. A restart between two evaluations
    (no downtime) changes no decision: the replica counts are those of an operator that never
    restarts, tick for tick (load up, the scale-up window, the scale-ups, load gone, the scale-down
    window, the scale-downs, a blip, idle)."""
    load = [0.0] * 6 + [0.9] * 12 + [0.0] * 20 + [0.3] * 4 + [0.0] * 14
    for restart_every in (None, 1, 2, 3, 7):
        obj, replicas, counts = Object(), 1, []
        remembered: Remembered | None = None
        for i, active in enumerate(load):
            now = NOW + i * INTERVAL
            if restart_every is not None and i % restart_every == 0:
                remembered = None  # the process restarted: nothing in memory
            state, problem = state_for_tick(remembered, obj.autoscaling.get("policyState"), now, INTERVAL)
            assert problem is None
            d = decide(serving(replicas, active, 0.0), state, policy, now)
            out = outcome(d, autoscaling_status=obj.autoscaling, conditions=obj.conditions)
            obj.write(out, now)
            remembered = Remembered(obj.autoscaling.get("policyState"), d.state)
            replicas = d.to_replicas
            counts.append(replicas)
        if restart_every is None:
            never = counts
            assert max(counts) == 4 and counts[-1] == 1, counts  # the scenario scales both ways
        else:
            assert counts == never, (restart_every, counts, never)


def test_a_restart_after_a_quiet_spell_waits_the_scale_up_window_again() -> None:
    # Idle for an hour, persisted an hour ago; the restarted operator sees load at once: the last
    # recommendation (1) is taken to have held until the evaluation before, so the 60 s window holds
    # the scale-up as an operator that never restarted would (HPA seeds a new HPA the same way).
    persisted = AutoscalerState((Recommendation(NOW - 3600, 1),))
    later = NOW + 3600
    d = decide(serving(1, 0.9, 0.0), resume(persisted, later - INTERVAL), QUIET, later)
    assert (d.to_replicas, d.reason) == (1, Reason.SCALE_UP_STABILIZED), d.message
    d = decide(serving(1, 0.9, 0.0), persisted, QUIET, later)  # without resume: scaled at once
    assert d.to_replicas == 2


@pytest.mark.parametrize(
    ("persisted", "state", "same"),
    [
        # a run of equal recommendations: only its last time counts, the persisted one runs to now
        ([(NOW - 30, 1)], [(NOW - 30, 1), (NOW - 15, 1), (NOW, 1)], True),
        ([(NOW - 30, 1)], [(NOW - 30, 1), (NOW, 2)], False),  # a new count
        # a closed run must end where it ended: 2 until NOW - 15, not NOW - 30
        ([(NOW - 30, 2), (NOW - 15, 1)], [(NOW - 30, 2), (NOW - 15, 1), (NOW, 1)], True),
        ([(NOW - 45, 2), (NOW - 30, 1)], [(NOW - 45, 2), (NOW - 30, 2), (NOW - 15, 1), (NOW, 1)], False),
        # entries past the horizon (NOW - 120) are read by nothing: they cost no write
        ([(NOW - 200, 3), (NOW - 100, 1)], [(NOW - 100, 1), (NOW, 1)], True),
        ([], [(NOW, 1)], False),  # nothing persisted yet
    ],
)
def test_same_memory(persisted: list[tuple[float, int]], state: list[tuple[float, int]], same: bool) -> None:
    def of(recs: list[tuple[float, int]]) -> AutoscalerState:
        return AutoscalerState(tuple(Recommendation(t, n) for t, n in recs))

    assert same_memory(of(persisted), of(state), now=NOW, horizon=NOW - 120) is same


def test_same_memory_counts_scale_events() -> None:
    recs = (Recommendation(NOW, 2),)
    before = AutoscalerState(recs)
    assert not same_memory(before, AutoscalerState(recs, (ScaleEvent(NOW, 1),)), now=NOW, horizon=NOW - 120)
    old = AutoscalerState(recs, (ScaleEvent(NOW - 130, 1),))  # past the horizon: read by nothing
    assert same_memory(old, before, now=NOW, horizon=NOW - 120)


#: QUIET with the capacity recommendation on (a prior of 8 requests/s per replica, smoothing 60 s).
CAPACITY = dataclasses.replace(QUIET, capacity=CapacityParams(prior_rps=8.0, smoothing_s=60.0))


def counted(per_pod: list[tuple[float, float]], max_active: float = 64.0) -> Snapshot:
    """Ready pods with the counters the capacity recommendation reads: ``(completed, active)`` each."""
    return Snapshot(
        len(per_pod),
        tuple(
            PodSignals(
                f"p{i}",
                PodState.READY,
                {"activeRequestUtilization": active / max_active, "kvCacheUtilization": 0.1},
                {"completed": completed, "active": active, "max": max_active},
            )
            for i, (completed, active) in enumerate(per_pod)
        ),
    )


def test_an_idle_deployment_with_the_capacity_recommendation_decides_no_write_per_evaluation() -> None:
    """The capacity memory keeps each pod's sample time and the rate's time; an idle pod's counters
    do not move, so only those times would (before: a ``policyState`` write at every evaluation)."""
    obj, state, writes = Object(), AutoscalerState(), []
    for i in range(8):
        d = decide(counted([(500.0, 0.0)]), state, CAPACITY, NOW + i * INTERVAL)
        writes.append(
            obj.write(outcome(d, autoscaling_status=obj.autoscaling, conditions=obj.conditions), NOW)
        )
        state = d.state
    assert "capacity" in d.desired_by_signal, d.message
    # the first evaluation has one sample (no rate yet), the second the first rate (0/s); then nothing
    assert "policyState" in writes[0] and "policyState" in writes[1], writes
    assert writes[2:] == [[]] * 6, writes


def test_the_capacity_memory_carries_every_decision_across_restarts() -> None:
    """As test_the_persisted_state_carries_every_decision_across_restarts, with the capacity
    recommendation deciding: a rise to 3 replicas' worth of arrivals and back, idle stretches whose
    capacity memory is not rewritten among them. A restart between two evaluations makes the same
    decisions."""
    rates = [0.0] * 4 + [6.0] * 4 + [18.0] * 12 + [4.0] * 20 + [0.0] * 12
    for restart_every in (None, 1, 2, 3, 7):
        obj, replicas, counts = Object(), 1, []
        completed = [0.0] * 4
        remembered: Remembered | None = None
        for i, rate in enumerate(rates):
            now = NOW + i * INTERVAL
            if restart_every is not None and i % restart_every == 0:
                remembered = None
            share = rate / replicas
            completed = [c + min(share, 8.0) * INTERVAL for c in completed]
            snapshot = counted([(completed[p], min(64.0, share * 4)) for p in range(replicas)])
            state, problem = state_for_tick(remembered, obj.autoscaling.get("policyState"), now, INTERVAL)
            assert problem is None
            d = decide(snapshot, state, CAPACITY, now)
            obj.write(outcome(d, autoscaling_status=obj.autoscaling, conditions=obj.conditions), now)
            remembered = Remembered(obj.autoscaling.get("policyState"), d.state)
            replicas = d.to_replicas
            counts.append(replicas)
        if restart_every is None:
            never = counts
            assert max(counts) >= 3 and counts[-1] < max(counts), counts
        else:
            assert counts == never, (restart_every, counts, never)


def test_state_for_tick_uses_memory_only_while_the_persisted_copy_is_its_own() -> None:
    mine = AutoscalerState((Recommendation(NOW - 15, 1), Recommendation(NOW - 5, 1)))
    remembered = Remembered('{"recommendations":[[1,1]]}', mine)
    assert state_for_tick(remembered, '{"recommendations":[[1,1]]}', NOW, INTERVAL) == (mine, None)
    # another string (cleared by a mode switch, written elsewhere) or nothing remembered: carried over
    # until the evaluation before this one
    other = '{"recommendations":[[1799999900,3]]}'
    resumed = AutoscalerState((Recommendation(NOW - 100, 3), Recommendation(NOW - INTERVAL, 3)))
    assert state_for_tick(remembered, other, NOW, INTERVAL) == (resumed, None)
    assert state_for_tick(None, other, NOW, INTERVAL) == (resumed, None)
    assert state_for_tick(None, None, NOW, INTERVAL) == (AutoscalerState(), None)
    state, problem = state_for_tick(None, "{not json", NOW, INTERVAL)
    assert state == AutoscalerState() and problem is not None and "policyState unreadable" in problem


def test_an_unreadable_policy_state_is_written_over() -> None:
    d = decide(serving(1, 0.0, 0.0), AutoscalerState(), QUIET, NOW)
    out = outcome(d, autoscaling_status={"policyState": "{not json"})
    assert json.loads(out.status["policyState"]) == d.state.to_dict()


# --- leaving mode builtin -----------------------------------------------------------------------
BUILTIN_LEFT = {
    "autoscaling": {"kvCacheUtilizationPercent": 20, "desiredReplicas": 1, "policyState": "{}"},
    "conditions": [
        {"type": "Ready", "status": "True", "reason": "Serving", "message": ""},
        {"type": "ScalingActive", "status": "True", "reason": "ValidMetricFound", "message": "m"},
        {"type": "ScalingLimited", "status": "True", "reason": "TooFewReplicas", "message": "m"},
    ],
}


def autoscaling(**doc: Any) -> AutoscalingSpec:
    return AutoscalingSpec.model_validate({"maxReplicas": 4, "targets": {"kvCacheUtilization": 0.8}, **doc})


@pytest.mark.parametrize(
    ("doc", "expected"),
    [
        (
            {"enabled": True, "mode": "hpa"},
            {"ScalingLimited": ("Unknown", "ScalingDelegated", "HorizontalPodAutoscaler chat decides")},
        ),
        (
            {"enabled": True, "mode": "keda"},
            {"ScalingLimited": ("Unknown", "ScalingDelegated", "KEDA's, for the ScaledObject")},
        ),
        (
            {"enabled": False, "mode": "builtin"},
            {
                "ScalingLimited": ("False", "AutoscalingDisabled", "spec.autoscaling.enabled is false"),
                "ScalingActive": ("False", "AutoscalingDisabled", "spec.replicas is the count"),
            },
        ),
        (
            {"enabled": False, "mode": "hpa"},
            {
                "ScalingLimited": ("False", "AutoscalingDisabled", ""),
                "ScalingActive": ("False", "AutoscalingDisabled", ""),
            },
        ),
    ],
)
def test_leaving_mode_builtin_clears_its_status_and_says_who_decides(
    doc: dict[str, Any], expected: dict[str, tuple[str, str, str]]
) -> None:
    """Issue #20 item 2: the built-in's status.autoscaling (printer columns, lastDecisions, policy
    state) would stay frozen after a switch to hpa / keda or autoscaling off, and its
    ScalingLimited / ScalingActive with them."""
    conditions, patch = retire_builtin(autoscaling(**doc), BUILTIN_LEFT, hpa="chat", generation=8)
    assert patch == {"autoscaling": None}
    got = {c["type"]: c for c in conditions}
    assert set(got) == set(expected)  # in hpa / keda, ScalingActive is the rendered child's
    for type_, (status, reason, text) in expected.items():
        c = got[type_]
        assert (c["status"], c["reason"], c["observedGeneration"]) == (status, reason, 8), c
        assert text in c["message"], c["message"]


def test_retire_builtin_touches_nothing_in_builtin_mode_nor_what_the_builtin_never_wrote() -> None:
    on = autoscaling(enabled=True, mode="builtin")
    assert retire_builtin(on, BUILTIN_LEFT, hpa="chat", generation=8) == ([], {})
    never = {"conditions": [{"type": "Ready", "status": "True", "reason": "Serving", "message": ""}]}
    assert retire_builtin(autoscaling(enabled=True, mode="hpa"), never, hpa="chat", generation=8) == ([], {})
    assert retire_builtin(autoscaling(enabled=False), {}, hpa="chat", generation=8) == ([], {})


def test_retire_builtin_is_done_once() -> None:
    spec = autoscaling(enabled=False)
    conditions, _ = retire_builtin(spec, BUILTIN_LEFT, hpa="chat", generation=8)
    after = {"conditions": merge_conditions(BUILTIN_LEFT["conditions"], conditions, dt.datetime.now(dt.UTC))}
    assert retire_builtin(spec, after, hpa="chat", generation=8) == ([], {})


def test_a_foreign_hpa_of_the_same_name_is_reported_and_nothing_claims_to_delegate() -> None:
    """Fresh-user trial 35 F1: a user's own HPA named like the LLMDeployment, then mode hpa: the
    operator leaves it alone (not its object), but the status said ScalingActive=True HPARendered
    and ScalingLimited "the operator's HorizontalPodAutoscaler decides", and the Warning came twice."""
    conditions, warning = external_conflict("HorizontalPodAutoscaler", "chat", 8)
    (active,) = conditions
    assert (active["type"], active["status"], active["reason"]) == (
        "ScalingActive",
        "False",
        "HorizontalPodAutoscalerConflict",
    )
    assert "HorizontalPodAutoscaler chat exists but is not owned by this LLMDeployment" in active["message"]
    assert (warning.reason, warning.type) == ("HorizontalPodAutoscalerConflict", "Warning")
    # the ScalingLimited that retire_builtin would write, and the one already written, both corrected
    retired, _ = retire_builtin(autoscaling(enabled=True, mode="hpa"), BUILTIN_LEFT, hpa="chat", generation=8)
    for status, pending in ((BUILTIN_LEFT, retired), ({"conditions": retired}, [])):
        (limited,) = [c for c in undelegated(pending, status, active) if c["type"] == "ScalingLimited"]
        assert (limited["status"], limited["reason"]) == ("Unknown", "HorizontalPodAutoscalerConflict")
        assert limited["message"].startswith("no autoscaler decides the replica count: ")
    # nothing delegated: nothing to correct
    assert undelegated([], BUILTIN_LEFT, active) == []
    # the Warning once per change
    assert failure_is_new(BUILTIN_LEFT, active)
    assert not failure_is_new({"conditions": [dict(active, lastTransitionTime="t")]}, active)


def test_an_admission_webhooks_refusal_is_reported_with_its_words() -> None:
    """Where KEDA's admission webhooks run (its Helm chart's default), the ScaledObject of an
    LLMDeployment that a user's own HPA already scales is refused with HTTP 403 (kedacore/keda v2.20.2
    apis/keda/v1alpha1/scaledobject_webhook.go verifyHpas; seen through tests/integration/
    test_keda_webhooks.py). The handler raised it into kopf: retried forever, nothing on the object."""
    keda = (
        "admission webhook \"vscaledobject.kb.io\" denied the request: the workload 'chat' of type "
        "'llm.trtllm-operator.dev/v1alpha1.LLMDeployment' is already managed by the hpa 'users-hpa'"
    )
    assert admission_refusal(403, keda) == keda
    # not a webhook's: RBAC's Forbidden, a missing kind, a conflict stay errors
    assert admission_refusal(403, 'scaledobjects.keda.sh is forbidden: User "x" cannot create') is None
    assert admission_refusal(404, "the server could not find the requested resource") is None
    assert admission_refusal(409, "Operation cannot be fulfilled") is None
    message = refused_message("ScaledObject", "chat", keda, 30.0)
    assert message == (
        "the API server refused ScaledObject chat, so nothing the operator rendered scales this deployment: "
        f"{keda} (tried again every 30 s)"
    )
    conditions, warning = external_failed("AdmissionRefused", message, 3)
    assert [(c["type"], c["status"], c["reason"]) for c in conditions] == [
        ("ScalingActive", "False", "AdmissionRefused")
    ]
    assert (warning.reason, warning.type, warning.message) == ("AdmissionRefused", "Warning", message)


#: KEDA's webhook names the workload by its scaleTargetRef: group/version.kind (gvkr_types.go GVKString).
KEDA_TARGET = "the workload 'chat' of type 'llm.trtllm-operator.dev/v1alpha1.LLMDeployment'"
KEDA_DENIED = 'admission webhook "vscaledobject.kb.io" denied the request: '

#: KEDA's refusals of a ScaledObject whose target another autoscaler targets (kedacore/keda v2.20.2
#: apis/keda/v1alpha1/scaledobject_webhook.go: verifyHpas' two ``fmt.Errorf`` texts, verifyScaledObjects'
#: first), with the other object's kind and name.
KEDA_OTHER_SCALER_REFUSALS = (
    (
        KEDA_DENIED + KEDA_TARGET + " is already managed by the hpa 'users-hpa'",
        "HorizontalPodAutoscaler",
        "users-hpa",
        "that HPA and KEDA's HPA for chat",
    ),
    (
        KEDA_DENIED + "the existing hpa 'users-hpa' for workload 'chat' of type "
        "'llm.trtllm-operator.dev/v1alpha1.LLMDeployment' must be specified by name in advanced settings to "
        "enable ownership transfer",
        "HorizontalPodAutoscaler",
        "users-hpa",
        "that HPA and KEDA's HPA for chat",
    ),
    (
        KEDA_DENIED + KEDA_TARGET + " is already managed by the ScaledObject 'users-so'",
        "ScaledObject",
        "users-so",
        "the HPA KEDA keeps for each",
    ),
)


@pytest.mark.parametrize(("keda", "other_kind", "other", "stopped"), KEDA_OTHER_SCALER_REFUSALS)
def test_a_change_refused_because_another_autoscaler_targets_the_deployment_scales_nothing(
    keda: str, other_kind: str, other: str, stopped: str
) -> None:
    """Fresh-user trial 38 F9a, then issue #23: KEDA's ``ValidateUpdate`` runs the same
    ``validateWorkload`` checks as ``ValidateCreate``, so once another HPA (or ScaledObject) targets the
    LLMDeployment, the patch of the ScaledObject the operator owns is refused. That ScaledObject stays
    as last applied, but two HPAs then select the same pods and Kubernetes' HPA controller stops both
    (kubernetes v1.34.4 pkg/controller/podautoscaler/horizontal.go validateAndParseSelector:
    ``ScalingActive=False`` ``AmbiguousSelector``). Before: ``True``, "the ScaledObject as last applied
    still scales this deployment", and ScalingLimited kept naming KEDA's HPA as the one that decides."""
    conditions, warning = external_refused("ScaledObject", "chat", keda, 30.0, 4, standing=True)
    (active,) = conditions
    assert (active["type"], active["status"], active["reason"], active["observedGeneration"]) == (
        "ScalingActive",
        "False",
        "AdmissionRefused",
        4,
    )
    targets = "also targets it (and is not paused)" if other_kind == "ScaledObject" else "also targets it"
    assert active["message"] == (
        "the API server refused the change to ScaledObject chat, which stays as last applied, but nothing "
        f"the operator rendered scales this deployment while {other_kind} {other} {targets}: Kubernetes' "
        f"HPA controller stops {stopped} (AmbiguousSelector: pods controlled by multiple HPAs); delete "
        f"{other_kind} {other}: {keda} (tried again every 30 s)"
    )
    assert "still scales" not in active["message"]
    assert (warning.reason, warning.type, warning.message) == (
        "AdmissionRefused",
        "Warning",
        active["message"],
    )
    # no HPA of the operator's decides: ScalingLimited says so instead of naming KEDA's HPA
    retired, _ = retire_builtin(
        autoscaling(enabled=True, mode="keda"), BUILTIN_LEFT, hpa="chat-keda", generation=4
    )
    (limited,) = [c for c in undelegated(retired, BUILTIN_LEFT, active) if c["type"] == "ScalingLimited"]
    assert (limited["status"], limited["reason"]) == ("Unknown", "AdmissionRefused")
    assert limited["message"] == f"no autoscaler decides the replica count: {active['message']}"
    # a refused create: nothing of the operator's scales, worded as before
    created, _ = external_refused("ScaledObject", "chat", keda, 30.0, 4, standing=False)
    assert (created[0]["status"], created[0]["reason"]) == ("False", "AdmissionRefused")
    assert created[0]["message"] == refused_message("ScaledObject", "chat", keda, 30.0)
    assert created[0]["message"] == (
        "the API server refused ScaledObject chat, so nothing the operator rendered scales this "
        f"deployment: {keda} (tried again every 30 s)"
    )


#: Refusals of a change that do not say another autoscaler targets the deployment: a
#: ValidatingAdmissionPolicy's denial and a webhook not reachable (kube-apiserver v1.34.4's words, as in
#: UPSTREAM_REFUSALS below), and KEDA's clash of HPA names (verifyScaledObjects' second text: the other
#: ScaledObject may target another workload).
OTHER_REFUSALS = (
    "scaledobjects.keda.sh \"chat\" is forbidden: ValidatingAdmissionPolicy 'keda-limits' with binding "
    "'keda-limits' denied request: failed expression: object.spec.maxReplicaCount <= 2",
    'Internal error occurred: failed calling webhook "vscaledobject.kb.io": failed to call webhook: Post '
    '"https://keda-admission-webhooks.keda.svc:443/validate-keda-sh-v1alpha1-scaledobject?timeout=10s": EOF',
    KEDA_DENIED + "the HPA 'chat-keda' is already managed by the ScaledObject 'users-so'",
)


@pytest.mark.parametrize("refusal", OTHER_REFUSALS)
def test_another_refused_change_says_only_that_the_child_stays_as_last_applied(refusal: str) -> None:
    """A refused change whose cause does not stop the child's HPA (as far as the operator can tell)
    keeps ``ScalingActive=True`` and ``ScalingDelegated`` (whose message names KEDA's HPA, whose own
    conditions say whether it scales), and claims no more than what stays applied. Before: "the
    ScaledObject as last applied still scales this deployment" for every refused change."""
    conditions, warning = external_refused("ScaledObject", "chat", refusal, 30.0, 4, standing=True)
    (active,) = conditions
    assert (active["status"], active["reason"]) == ("True", "AdmissionRefused")
    assert active["message"] == (
        "the API server refused the change to ScaledObject chat, which stays as last applied: "
        f"{refusal} (tried again every 30 s)"
    )
    assert (warning.reason, warning.type, warning.message) == (
        "AdmissionRefused",
        "Warning",
        active["message"],
    )
    retired, _ = retire_builtin(
        autoscaling(enabled=True, mode="keda"), BUILTIN_LEFT, hpa="chat-keda", generation=4
    )
    assert undelegated(retired, BUILTIN_LEFT, active) == retired
    assert undelegated([], {"conditions": retired}, active) == []


def test_kedas_words_on_an_hpa_of_the_operators_are_not_kedas() -> None:
    """KEDA v2.20.2 registers no webhook for HPAs (config/webhooks/validation_webhooks.yaml): the same
    words on a refused HPA (a policy echoing them, say) are not read as KEDA's."""
    keda = KEDA_OTHER_SCALER_REFUSALS[0][0]
    assert other_scaler("ScaledObject", keda) == ("HorizontalPodAutoscaler", "users-hpa")
    assert other_scaler("HorizontalPodAutoscaler", keda) is None
    conditions, _ = external_refused("HorizontalPodAutoscaler", "chat", keda, 30.0, 4, standing=True)
    assert conditions[0]["status"] == "True"
    # the words must be the whole webhook denial, not a part of another message
    assert other_scaler("ScaledObject", keda + " (and more)") is None


#: Refusals by admission other than a webhook's denial, as kube-apiserver v1.34.4 words them, and
#: real ones: kubernetes v1.34.4 test/integration/apiserver/cel/validatingadmissionpolicy_test.go
#: (the ``err`` of its first two cases; their ``failureReason`` Invalid → 422 and Forbidden → 403,
#: staging/src/k8s.io/apiserver/pkg/admission/plugin/policy/validating/policy_decision.go
#: ``reasonToCode``), k8s.io/apiserver v0.34.4 pkg/admission/plugin/webhook/errors/statuserror_test.go
#: (``deniedBy + " without explanation"``, 400), and kedacore/keda issue #5185 (KEDA's webhook
#: unreachable under ``failurePolicy: Fail``, "reason: InternalError", i.e. 500).
UPSTREAM_REFUSALS = (
    (
        422,
        "namespaces \"test-foobar\" is forbidden: ValidatingAdmissionPolicy 'validate-namespace-suffix' with "
        "binding 'validate-namespace-suffix-binding' denied request: failed expression: "
        "object.metadata.name.endsWith('k8s')",
    ),
    (
        403,
        'namespaces "forbidden-test-foobar" is forbidden: ValidatingAdmissionPolicy '
        "'validate-namespace-suffix' with binding 'validate-namespace-suffix-binding' denied request: "
        "failed expression: object.metadata.name.endsWith('k8s')",
    ),
    (400, 'admission webhook "foo" denied the request without explanation'),
    (
        500,
        'Internal error occurred: failed calling webhook "vscaledobject.kb.io": failed to call webhook: Post '
        '"https://keda-admission-webhooks.keda.svc:443/validate-keda-sh-v1alpha1-scaledobject'
        '?timeout=10s": EOF',
    ),
)


@pytest.mark.parametrize(("status", "message"), UPSTREAM_REFUSALS)
def test_a_policys_denial_and_an_unreachable_webhook_are_refusals_too(status: int, message: str) -> None:
    """Fresh-user trial 38 F9b: only ``admission webhook …`` was recognised, so a
    ValidatingAdmissionPolicy's denial or a webhook call failing closed went to kopf's endless retry
    with nothing on the object."""
    assert admission_refusal(status, message) == message


def test_errors_that_are_not_admissions_refusals_stay_errors() -> None:
    """RBAC's Forbidden (k8s.io/apiserver v0.34.4 pkg/endpoints/handlers/responsewriters/errors.go
    ``forbiddenMessage`` in apimachinery's ``NewForbidden``), a whole request timing out (the title of
    kedacore/keda issue #6850), another 500, and the refusals' words with a status they never come with."""
    rbac = (
        'scaledobjects.keda.sh "chat" is forbidden: User "system:serviceaccount:ops:trtllm-operator" cannot '
        'update resource "scaledobjects" in API group "keda.sh" in the namespace "ns"'
    )
    assert admission_refusal(403, rbac) is None
    assert (
        admission_refusal(
            504, "Timeout: request did not complete within requested timeout - context deadline exceeded"
        )
        is None
    )
    assert admission_refusal(500, "Internal error occurred: etcdserver: request timed out") is None
    # a webhook's denial is at least 400 (ToStatusErr), a policy's 401/403/413/422, a call failure 500
    never = {422: 500, 403: 500, 400: 399, 500: 403}
    for status, message in UPSTREAM_REFUSALS:
        assert admission_refusal(never[status], message) is None


def test_the_token_weighted_capacity_memory_costs_no_write_when_idle_and_survives_restarts() -> None:
    """With token weighting each pod's capacity memory carries its token counts too (7 values, not
    4): an idle deployment still writes no ``policyState`` per evaluation, and the memory read back
    decides as the one kept."""
    weighted = dataclasses.replace(
        CAPACITY,
        capacity=CapacityParams(
            prior_rps=8.0, smoothing_s=60.0, output_token_weight=2.0, prior_tokens=(1000.0, 200.0)
        ),
    )
    tokens = {"prompt_tokens": 500.0 * 3000.0, "output_tokens": 500.0 * 200.0, "finished": 500.0}
    pod = counted([(500.0, 0.0)]).pods[0]
    snapshot = Snapshot(1, (dataclasses.replace(pod, counters={**pod.counters, **tokens}),))
    obj, state, writes = Object(), AutoscalerState(), []
    for i in range(6):
        d = decide(snapshot, state, weighted, NOW + i * INTERVAL)
        writes.append(
            obj.write(outcome(d, autoscaling_status=obj.autoscaling, conditions=obj.conditions), NOW)
        )
        state = d.state
    assert writes[2:] == [[]] * 4, writes
    persisted = json.loads(obj.autoscaling["policyState"])
    assert len(persisted["capacity"]["pods"][0]) == 7
    back, kept = AutoscalerState.from_dict(persisted).capacity, state.capacity
    assert back is not None and kept is not None
    # the persisted copy is the one written at the second evaluation: the same values, an older time
    assert [dataclasses.replace(p, time=0.0) for p in back.pods] == [
        dataclasses.replace(p, time=0.0) for p in kept.pods
    ]
    # idle: no request finished between two evaluations, so no cost was measured (trial 51 Y2)
    assert back.cost_tokens is None and kept.cost_tokens is None
