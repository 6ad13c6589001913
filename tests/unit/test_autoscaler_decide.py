"""The autoscaler's writes, decided without I/O (``trtllm_operator.decide.autoscaler``, issue #27
item 5): conditions and reasons for a tick, an invalid spec and the external modes."""

from __future__ import annotations

import json
from typing import Any

import pytest

from trtllm_operator.api.deployment import AutoscalingSpec
from trtllm_operator.decide.autoscaler import (
    KEDA_NOT_INSTALLED,
    ExternalPlan,
    decide_external,
    decide_invalid,
    decide_tick,
    external_failed,
    external_rendered,
)
from trtllm_operator.decide.autoscaling import (
    AutoscalerState,
    PodSignals,
    PodState,
    Policy,
    RateLimit,
    Reason,
    ScalingRules,
    Snapshot,
    decide,
)

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
