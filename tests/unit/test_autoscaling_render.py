"""mode hpa / mode keda renderers and the spec → policy mapping."""

from __future__ import annotations

import copy
import re
from typing import Any

import jsonschema
import kubernetes_validate
import pytest

from trtllm_operator.api.deployment import AutoscalingSpec
from trtllm_operator.decide.autoscaling import (
    DEFAULT_SCALE_DOWN,
    DEFAULT_SCALE_UP,
    Policy,
    RateLimit,
    ScalingRules,
    policy_from_spec,
    quantity,
    refuse_scale_to_zero,
)
from trtllm_operator.decide.serving_params import OwnerRef
from trtllm_operator.render.hpa import desired_hpa
from trtllm_operator.render.keda import desired_scaled_object, pod_name_regex

K8S_VERSION = "1.34.0"
OWNER = OwnerRef("llama", "0b6a4f3e-0000-4000-8000-000000000001")
SCALE_TARGET = {"apiVersion": "llm.trtllm-operator.dev/v1alpha1", "kind": "LLMDeployment", "name": "llama"}


def spec(**kw: Any) -> AutoscalingSpec:
    doc: dict[str, Any] = {
        "enabled": True,
        "minReplicas": 1,
        "maxReplicas": 8,
        "targets": {"activeRequestUtilization": 0.7, "kvCacheUtilization": 0.8},
    }
    doc.update(kw)
    return AutoscalingSpec.model_validate(doc)


# --- spec → policy ------------------------------------------------------------------------------


def test_policy_defaults_from_a_minimal_spec() -> None:
    assert policy_from_spec(spec()) == Policy(
        min_replicas=1,
        max_replicas=8,
        active_request_utilization=0.7,
        kv_cache_utilization=0.8,
        tolerance=0.1,
        scale_up=DEFAULT_SCALE_UP,
        scale_down=DEFAULT_SCALE_DOWN,
    )


def test_active_request_utilization_target_from_the_spec() -> None:
    policy = policy_from_spec(spec(targets={"activeRequestUtilization": 0.5}))
    assert policy.targets() == {"activeRequestUtilization": 0.5}


@pytest.mark.parametrize("value", [0, 1.5])
def test_active_request_utilization_target_out_of_range_is_rejected(value: float) -> None:
    # active / max never exceeds 1 upstream (the executor fetches only while active < max)
    with pytest.raises(ValueError, match="activeRequestUtilization"):
        spec(targets={"activeRequestUtilization": value})


@pytest.mark.parametrize(
    ("behavior", "up", "down"),
    [
        (
            {"scaleUp": {"stabilizationWindowSeconds": 0}},
            ScalingRules(0, DEFAULT_SCALE_UP.policies),
            DEFAULT_SCALE_DOWN,
        ),
        (
            {"scaleUp": {"maxReplicasPerStep": 2, "periodSeconds": 30}},
            ScalingRules(15, (RateLimit("Pods", 2, 30),)),
            DEFAULT_SCALE_DOWN,
        ),
        (
            {"scaleDown": {"stabilizationWindowSeconds": 5, "maxReplicasPerStep": 1, "percent": 50}},
            DEFAULT_SCALE_UP,
            ScalingRules(5, (RateLimit("Pods", 1, 60), RateLimit("Percent", 50, 60))),
        ),
    ],
    ids=["window only", "pods per 30 s", "both limits, larger wins"],
)
def test_behavior_mapping(behavior: dict[str, Any], up: ScalingRules, down: ScalingRules) -> None:
    policy = policy_from_spec(spec(behavior=behavior))
    assert (policy.scale_up, policy.scale_down) == (up, down)


@pytest.mark.parametrize(
    ("kw", "field"),
    [
        ({"maxReplicas": None}, "maxReplicas"),
        ({"minReplicas": 0, "mode": "keda"}, "minReplicas"),
        ({"targets": {}}, "targets"),
    ],
)
def test_policy_from_invalid_spec_names_the_field(kw: dict[str, Any], field: str) -> None:
    with pytest.raises(ValueError, match=field):
        policy_from_spec(spec(**kw))


@pytest.mark.parametrize("mode", ["builtin", "hpa", "keda"])
def test_scale_to_zero_is_refused_in_every_mode(mode: str) -> None:
    """Audit A6. Every trigger the operator renders is a query over the serving pods' own Triton
    series, so with no pod left the query result is empty. kedacore/keda v2.20.2
    pkg/scalers/prometheus_scaler.go ExecutePromQuery returns 0 for an empty result (ignoreNullValues
    defaults to true), GetMetricsAndActivity reports the trigger active only when the value exceeds
    activationThreshold (default 0), and pkg/scaling/executor/scale_scaledobjects.go RequestScale
    scales up from 0 only while a trigger is active: a ScaledObject at minReplicaCount 0 would stay
    at 0. The old rule let mode keda through (``self.minReplicas >= 1 || self.mode == 'keda'``)."""
    auto = keda_spec(minReplicas=0) if mode == "keda" else spec(minReplicas=0, mode=mode)
    with pytest.raises(ValueError) as err:
        refuse_scale_to_zero(auto)
    text = str(err.value)
    # field, value, why (no trigger that exists without serving pods) and the fix
    assert text.startswith("spec.autoscaling.minReplicas: minReplicas 0 (scale to zero)")
    assert "no trigger that exists without serving pods" in text
    assert text.endswith("set minReplicas: 1 or more")
    refuse_scale_to_zero(keda_spec(minReplicas=1))  # 1 is fine


@pytest.mark.parametrize(
    ("value", "text"), [(4, "4"), (0.8, "800m"), (2.5, "2500m"), (0.125, "125m"), (10.0, "10")]
)
def test_quantity(value: float, text: str) -> None:
    assert quantity(value) == text


# --- HPA ----------------------------------------------------------------------------------------


def test_hpa_validates_and_targets_the_scale_subresource() -> None:
    hpa = desired_hpa("llama", "ns", OWNER, spec())
    assert kubernetes_validate.validate(hpa, K8S_VERSION, strict=True)
    assert hpa["spec"]["scaleTargetRef"] == SCALE_TARGET
    assert hpa["metadata"]["ownerReferences"][0]["uid"] == OWNER.uid
    assert hpa["spec"]["metrics"] == [
        {
            "type": "Pods",
            "pods": {
                "metric": {"name": "trtllm_active_request_utilization"},
                "target": {"type": "AverageValue", "averageValue": "700m"},
            },
        },
        {
            "type": "Pods",
            "pods": {
                "metric": {"name": "trtllm_kv_cache_utilization"},
                "target": {"type": "AverageValue", "averageValue": "800m"},
            },
        },
    ]
    assert hpa["spec"]["behavior"]["scaleDown"] == {
        "stabilizationWindowSeconds": 300,
        "selectPolicy": "Max",
        "policies": [
            {"type": "Pods", "value": 1, "periodSeconds": 60},
            {"type": "Percent", "value": 10, "periodSeconds": 60},
        ],
        "tolerance": "100m",
    }
    assert (hpa["spec"]["minReplicas"], hpa["spec"]["maxReplicas"]) == (1, 8)


def test_hpa_with_one_signal() -> None:
    hpa = desired_hpa("llama", "ns", OWNER, spec(targets={"kvCacheUtilization": 0.75}))
    assert [m["pods"]["metric"]["name"] for m in hpa["spec"]["metrics"]] == ["trtllm_kv_cache_utilization"]
    assert kubernetes_validate.validate(hpa, K8S_VERSION, strict=True)


def test_schema_check_catches_a_broken_hpa() -> None:
    hpa = desired_hpa("llama", "ns", OWNER, spec())
    hpa["spec"]["metrics"][0]["pods"]["target"]["averageValue"] = {"not": "a quantity"}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(hpa, K8S_VERSION, strict=True)


@pytest.mark.parametrize(
    ("kw", "field"), [({"maxReplicas": None}, "maxReplicas"), ({"targets": {}}, "targets")]
)
def test_hpa_errors_name_the_field(kw: dict[str, Any], field: str) -> None:
    with pytest.raises(ValueError, match=field):
        desired_hpa("llama", "ns", OWNER, spec(**kw))


# --- KEDA ---------------------------------------------------------------------------------------

_INT32 = {"type": "integer", "minimum": -(2**31), "maximum": 2**31 - 1}

#: A structural schema of ``keda.sh/v1alpha1`` ScaledObject, from KEDA's Go API types
#: (kedacore/keda ``apis/keda/v1alpha1/scaledobject_types.go``: ScaledObject, ScaledObjectSpec,
#: AdvancedConfig, HorizontalPodAutoscalerConfig, ScalingModifiers, ScaleTarget, Fallback;
#: ``scaletriggers_types.go``: ScaleTriggers, AuthenticationRef). ``required`` = fields without
#: ``omitempty``; unknown fields rejected. ``behavior`` is autoscaling/v2's, checked separately with
#: the Kubernetes schema.
KEDA_SCALED_OBJECT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["apiVersion", "kind", "metadata", "spec"],
    "additionalProperties": False,
    "properties": {
        "apiVersion": {"const": "keda.sh/v1alpha1"},
        "kind": {"const": "ScaledObject"},
        "metadata": {"type": "object", "required": ["name", "namespace"]},
        "spec": {
            "type": "object",
            "required": ["scaleTargetRef", "triggers"],
            "additionalProperties": False,
            "properties": {
                "scaleTargetRef": {
                    "type": "object",
                    "required": ["name"],
                    "additionalProperties": False,
                    "properties": {
                        "name": {"type": "string"},
                        "apiVersion": {"type": "string"},
                        "kind": {"type": "string"},
                        "envSourceContainerName": {"type": "string"},
                    },
                },
                "pollingInterval": _INT32,
                "initialCooldownPeriod": _INT32,
                "cooldownPeriod": _INT32,
                "idleReplicaCount": _INT32,
                "minReplicaCount": _INT32,
                "maxReplicaCount": _INT32,
                "advanced": {
                    "type": "object",
                    "additionalProperties": False,
                    "properties": {
                        "horizontalPodAutoscalerConfig": {
                            "type": "object",
                            "additionalProperties": False,
                            "properties": {"behavior": {"type": "object"}, "name": {"type": "string"}},
                        },
                        "restoreToOriginalReplicaCount": {"type": "boolean"},
                        "scalingModifiers": {"type": "object"},
                    },
                },
                "triggers": {
                    "type": "array",
                    "minItems": 1,
                    "items": {
                        "type": "object",
                        "required": ["type", "metadata"],
                        "additionalProperties": False,
                        "properties": {
                            "type": {"type": "string"},
                            "name": {"type": "string"},
                            "useCachedMetrics": {"type": "boolean"},
                            "metadata": {"type": "object", "additionalProperties": {"type": "string"}},
                            "authenticationRef": {"type": "object", "required": ["name"]},
                            "metricType": {"enum": ["AverageValue", "Value", "Utilization"]},
                        },
                    },
                },
                "fallback": {"type": "object", "required": ["failureThreshold", "replicas"]},
            },
        },
    },
}


def keda_spec(**kw: Any) -> AutoscalingSpec:
    base: dict[str, Any] = {
        "mode": "keda",
        "metrics": {"source": "prometheus", "prometheusURL": "http://prom:9090"},
    }
    base.update(kw)
    return spec(**base)


def check_scaled_object(obj: dict[str, Any]) -> None:
    jsonschema.validate(obj, KEDA_SCALED_OBJECT_SCHEMA)
    # The embedded behavior is autoscaling/v2 HorizontalPodAutoscalerBehavior: check it in an HPA.
    hpa = desired_hpa("llama", "ns", OWNER, spec())
    hpa["spec"]["behavior"] = obj["spec"]["advanced"]["horizontalPodAutoscalerConfig"]["behavior"]
    kubernetes_validate.validate(hpa, K8S_VERSION, strict=True)
    for trigger in obj["spec"]["triggers"]:
        assert {"serverAddress", "query", "threshold"} <= set(trigger["metadata"]), trigger


def test_scaled_object_validates_and_targets_the_scale_subresource() -> None:
    obj = desired_scaled_object("llama", "ns", OWNER, keda_spec(minReplicas=2))
    check_scaled_object(obj)
    assert obj["spec"]["scaleTargetRef"] == SCALE_TARGET
    assert (
        obj["spec"]["minReplicaCount"],
        obj["spec"]["maxReplicaCount"],
        obj["spec"]["pollingInterval"],
    ) == (2, 8, 15)
    queue, kv = obj["spec"]["triggers"]
    assert (queue["name"], queue["metricType"], queue["metadata"]["threshold"]) == (
        "active-request-utilization",
        "AverageValue",
        "0.7",
    )
    assert (kv["name"], kv["metadata"]["threshold"]) == ("kv-cache-utilization", "0.8")
    assert queue["metadata"]["serverAddress"] == "http://prom:9090"
    assert queue["metadata"]["query"].startswith("sum(sum by (namespace, pod) (nv_trt_llm_request_metrics{")
    assert 'namespace="ns", pod=~"llama-[a-z0-9]+-[a-z0-9]{5}|llama-lws-[0-9]+"' in queue["metadata"]["query"]


def test_structural_check_catches_a_broken_scaled_object() -> None:
    obj = desired_scaled_object("llama", "ns", OWNER, keda_spec())
    broken = copy.deepcopy(obj)
    broken["spec"]["triggers"][0]["metadata"]["threshold"] = 4
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(broken, KEDA_SCALED_OBJECT_SCHEMA)
    broken = copy.deepcopy(obj)
    broken["spec"]["scaleTargetRef"]["replicas"] = 3
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(broken, KEDA_SCALED_OBJECT_SCHEMA)


def test_scaled_object_needs_a_prometheus_url() -> None:
    with pytest.raises(ValueError, match="prometheusURL"):
        desired_scaled_object("llama", "ns", OWNER, spec(mode="keda"))


@pytest.mark.parametrize(
    ("pod", "matches"),
    [
        ("llama-7d9c6b5f4-x2k9p", True),
        ("llama-lws-0", True),  # a LeaderWorkerSet group's leader (render.leaderworkerset)
        ("llama-lws-0-1", False),  # its worker: no metrics
        ("llama-0", False),
        ("llama-fast-7d9c6b5f4-x2k9p", False),
        ("llama", False),
        ("other-7d9c6b5f4-x2k9p", False),
    ],
)
def test_pod_name_regex(pod: str, matches: bool) -> None:
    assert bool(re.fullmatch(pod_name_regex("llama"), pod)) == matches
