"""The autoscaling signal registry (``trtllm_operator.api.signals``, issue #27 item 3).

Every consumer iterates the registry: a scratch signal added to it (as a new signal would be: one
entry, plus its page formula and PromQL) shows up in the targets and status models, the CEL rules, the
built-in policy and its status fields, the recording rules, the HPA and KEDA renders (or is refused
for a mode the entry refuses, by the renderer and by admission), and the docs table. The docs tables
of docs/autoscaling.md are checked against the registry.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from trtllm_operator.api import signals as registry
from trtllm_operator.api.deployment import (
    AutoscalingSpec,
    AutoscalingStatus,
    AutoscalingTargets,
    autoscaling_status_model,
    mode_refusal_rules,
    target_required_rule,
    targets_model,
)
from trtllm_operator.api.signals import (
    ACTIVE_REQUEST_UTILIZATION,
    KV_CACHE_UTILIZATION,
    RETIRED,
    SIGNALS,
    Signal,
)
from trtllm_operator.commands._schema import _cel_errors
from trtllm_operator.decide import autoscaling as asc
from trtllm_operator.decide.serving_params import OwnerRef
from trtllm_operator.metrics import prometheus
from trtllm_operator.metrics.signals import signals_from_text
from trtllm_operator.render.hpa import desired_hpa
from trtllm_operator.render.keda import desired_scaled_object

REPO = Path(__file__).resolve().parents[2]
OWNER = OwnerRef("llama", "0b6a4f3e-0000-4000-8000-000000000001")
ALL_TARGETS = {ACTIVE_REQUEST_UTILIZATION: 0.7, KV_CACHE_UTILIZATION: 0.8}

SCRATCH = Signal(
    name="scratchSignal",
    title="scratch signal",
    fraction=False,
    example=2.0,
    recommended=2.0,
    policy_default=None,
    target_description="Target scratch units per replica.",
    status_description="Scratch units per ready replica.",
    status_digits=2,
    status_percent=True,
    series="trtllm_scratch_signal",
    record_op="sum",
    refused_modes={"keda": "no scratch query in KEDA"},
)
WITH_SCRATCH = (*SIGNALS, SCRATCH)


def autoscaling(mode: str = "builtin", **targets: float) -> AutoscalingSpec:
    doc: dict[str, Any] = {
        "enabled": True,
        "mode": mode,
        "minReplicas": 1,
        "maxReplicas": 8,
        "targets": targets,
        "metrics": {"source": "prometheus", "prometheusURL": "http://prom:9090"},
    }
    return AutoscalingSpec.model_validate(doc)


@pytest.fixture
def scratch(monkeypatch: pytest.MonkeyPatch) -> Signal:
    """The registry with :data:`SCRATCH` appended, and its PromQL (the one formula a new signal
    brings besides its page formula)."""
    monkeypatch.setattr(registry, "SIGNALS", WITH_SCRATCH)
    monkeypatch.setitem(
        prometheus.EXPRESSIONS, SCRATCH.name, lambda matchers, model: f"scratch_total{{{matchers}}}"
    )
    return SCRATCH


def with_scratch_targets(spec: AutoscalingSpec, **targets: float) -> AutoscalingSpec:
    """``spec`` with ``targets`` of the scratch registry's targets model (as the API would parse)."""
    model = targets_model(WITH_SCRATCH)
    return spec.model_copy(update={"targets": model.model_validate(targets)})


# --- every signal renders in every mode ---------------------------------------------------------


def test_hpa_renders_every_builtin_signal() -> None:
    hpa = desired_hpa("llama", "ns", OWNER, autoscaling("hpa", **ALL_TARGETS))
    metrics = {m["pods"]["metric"]["name"]: m["pods"]["target"] for m in hpa["spec"]["metrics"]}
    assert metrics == {
        "trtllm_active_request_utilization": {"type": "AverageValue", "averageValue": "700m"},
        "trtllm_kv_cache_utilization": {"type": "AverageValue", "averageValue": "800m"},
    }
    alone = desired_hpa("llama", "ns", OWNER, autoscaling("hpa", activeRequestUtilization=0.5))
    assert [m["pods"]["metric"]["name"] for m in alone["spec"]["metrics"]] == [
        "trtllm_active_request_utilization"
    ]


def test_keda_renders_every_builtin_signal() -> None:
    obj = desired_scaled_object("llama", "ns", OWNER, autoscaling("keda", **ALL_TARGETS))
    triggers = {t["name"]: t["metadata"] for t in obj["spec"]["triggers"]}
    assert list(triggers) == ["active-request-utilization", "kv-cache-utilization"]
    active = triggers["active-request-utilization"]
    assert active["threshold"] == "0.7"
    # A literal, not the operator's own expression builder: the series and labels are the TensorRT-LLM
    # backend's (custom_metrics_reporter.cc, tensorrtllm_backend v0.19.0: nv_trt_llm_request_metrics,
    # request_type "active" / "max", model "tensorrt_llm"; docs/reference/tensorrt-llm.md §5), the pods
    # those of the LLMDeployment "llama" (its Deployment's ReplicaSet pods and its LWS groups).
    pods = 'namespace="ns", pod=~"llama-[a-z0-9]+-[a-z0-9]{5}|llama-lws-[0-9]+"'
    series = 'nv_trt_llm_request_metrics{model="tensorrt_llm", request_type="%s", ' + pods + "}"
    assert active["query"] == (
        f"sum(sum by (namespace, pod) ({series % 'active'}) / sum by (namespace, pod) ({series % 'max'} > 0))"
    )


# --- retired targets: refused with what replaced them ---------------------------------------------


@pytest.mark.parametrize("retired", RETIRED, ids=[r.name for r in RETIRED])
def test_retired_targets_are_refused_by_admission_and_by_the_operator(
    retired: registry.RetiredSignal,
) -> None:
    schema = AutoscalingTargets.model_json_schema()
    rules = {"x-kubernetes-validations": schema["x-kubernetes-validations"]}
    errors = _cel_errors({retired.name: 4.0, ACTIVE_REQUEST_UTILIZATION: 0.7}, rules)
    assert errors == [f"{retired.name}: {retired.message}"]
    assert f"set targets.{ACTIVE_REQUEST_UTILIZATION} instead" in retired.message
    # An object stored before the rule: every mode refuses it, naming the field and the fix.
    for mode in ("builtin", *registry.EXTERNAL_MODES):
        spec = autoscaling(mode, **{retired.name: 4.0, ACTIVE_REQUEST_UTILIZATION: 0.7})
        with pytest.raises(ValueError, match=f"spec.autoscaling.targets.{retired.name} was removed"):
            if mode == "builtin":
                asc.policy_from_spec(spec)
            else:
                asc.refuse_retired_targets(spec)


@pytest.mark.parametrize("mode", ["builtin", *registry.EXTERNAL_MODES])
def test_every_mode_renders_every_signal_or_admission_refuses_it(mode: str) -> None:
    """The acceptance rule on the real registry: each signal a mode cannot render has a CEL rule."""
    refused = {r["fieldPath"] for r in mode_refusal_rules(SIGNALS) if f"'{mode}'" in r["rule"]}
    for s in SIGNALS:
        assert s.rendered_in(mode) or f".targets.{s.name}" in refused, (s.name, mode)


# --- the measurement tables cover the registry ------------------------------------------------


def test_page_formula_and_promql_cover_the_registry() -> None:
    assert set(signals_from_text("").values()) == set(registry.names())
    assert set(prometheus.EXPRESSIONS) == set(registry.names())
    rules = prometheus.recording_rules()["groups"][0]["rules"]
    assert [r["record"] for r in rules] == [s.record for s in SIGNALS]


def test_names_and_derived_wire_names() -> None:
    assert registry.names() == (ACTIVE_REQUEST_UTILIZATION, KV_CACHE_UTILIZATION)
    assert registry.names() == asc.SIGNALS
    active = SIGNALS[0]
    assert (active.attr, active.record, active.adapter_metric, active.keda_trigger) == (
        "active_request_utilization",
        "namespace_pod:trtllm_active_request_utilization:ratio",
        "trtllm_active_request_utilization",
        "active-request-utilization",
    )
    # active / max is at most 1 upstream (the executor fetches only while active < max)
    assert SIGNALS[0].clamp(1.7) == 1.0 and SIGNALS[0].clamp(-1.0) == 0.0 and SIGNALS[1].clamp(None) is None


# --- a scratch signal reaches every consumer --------------------------------------------------


def test_scratch_signal_is_a_target_and_a_status_field() -> None:
    targets = targets_model(WITH_SCRATCH)
    assert targets.model_validate({"scratchSignal": 3}).scratch_signal == 3.0  # type: ignore[attr-defined]
    with pytest.raises(ValueError, match="scratchSignal"):
        targets.model_validate({"scratchSignal": 0})
    status = autoscaling_status_model(WITH_SCRATCH)
    doc = {"scratchSignal": 2.5, "scratchSignalPercent": 250, "desiredReplicas": 2}
    assert status.model_validate(doc).model_dump(by_alias=True, exclude_none=True) == doc
    # The live models carry exactly the registry's signals.
    assert set(AutoscalingTargets.model_fields) == {s.attr for s in SIGNALS} | {r.attr for r in RETIRED}
    signal_fields = {
        f for f in AutoscalingStatus.model_fields if f.split("_percent")[0] in {s.attr for s in SIGNALS}
    }
    assert signal_fields == {s.attr for s in SIGNALS} | {
        "kv_cache_utilization_percent",
        "active_request_utilization_percent",
    }


def test_scratch_signal_in_the_admission_rules() -> None:
    required = target_required_rule(WITH_SCRATCH)
    assert "has(self.targets.scratchSignal)" in required["rule"]
    assert "targets.scratchSignal when autoscaling is enabled" in required["message"]
    schema = {"x-kubernetes-validations": mode_refusal_rules(WITH_SCRATCH)}
    keda = {"enabled": True, "mode": "keda", "targets": {"scratchSignal": 2.5}}
    assert _cel_errors(keda, schema) == [
        "targets.scratchSignal: targets.scratchSignal 2.5 cannot drive mode keda (no scratch query in "
        "KEDA); unset targets.scratchSignal or use mode builtin"
    ]
    assert _cel_errors({**keda, "mode": "hpa"}, schema) == []
    assert _cel_errors({**keda, "enabled": False}, schema) == []
    assert _cel_errors({**keda, "targets": {ACTIVE_REQUEST_UTILIZATION: 0.7}}, schema) == []


def test_scratch_signal_drives_the_builtin_policy_and_its_status(scratch: Signal) -> None:
    policy = asc.Policy(
        min_replicas=1,
        max_replicas=10,
        active_request_utilization=None,
        kv_cache_utilization=None,
        scratch_signal=2.0,
        scale_up=asc.ScalingRules(0, (asc.RateLimit("Percent", 1000, 1),)),
    )
    assert policy.targets() == {"scratchSignal": 2.0} and policy.scratch_signal == 2.0
    pods = tuple(asc.PodSignals(f"p{i}", asc.PodState.READY, {"scratchSignal": 6.0}) for i in range(2))
    decision = asc.decide(asc.Snapshot(2, pods), asc.AutoscalerState(), policy, 1_800_000_000.0)
    assert (decision.to_replicas, decision.desired_by_signal) == (6, {"scratchSignal": 6})
    assert "scratchSignal above target" in decision.message
    status = asc.signal_status(decision.signals)
    assert (status["scratchSignal"], status["scratchSignalPercent"]) == (6.0, 600)
    assert set(status) >= {s.name for s in WITH_SCRATCH}
    spec = with_scratch_targets(autoscaling(), scratchSignal=2.0)
    assert asc.policy_from_spec(spec).targets() == {"scratchSignal": 2.0}


def test_scratch_signal_in_recording_rules_and_prometheus_source(scratch: Signal) -> None:
    rules = prometheus.recording_rules()["groups"][0]["rules"]
    assert rules[-1] == {"record": "namespace_pod:trtllm_scratch_signal:sum", "expr": "scratch_total{}"}
    queries: list[str] = []

    def get(url: str, timeout: float) -> str:
        queries.append(url)
        result = [{"metric": {"namespace": "ns", "pod": "a"}, "value": [0, "3"]}]
        return json.dumps({"status": "success", "data": {"resultType": "vector", "result": result}})

    pod = {
        "metadata": {"name": "a"},
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]},
    }
    (out,) = prometheus.prometheus_pods("http://prom", "ns", [pod], get=get)
    assert len(queries) == len(WITH_SCRATCH) and "scratch_total" in queries[-1]
    assert out.value("scratchSignal") == 3.0


def test_scratch_signal_renders_in_hpa_and_is_refused_in_keda(scratch: Signal) -> None:
    hpa = desired_hpa("llama", "ns", OWNER, with_scratch_targets(autoscaling("hpa"), scratchSignal=2.5))
    assert hpa["spec"]["metrics"] == [
        {
            "type": "Pods",
            "pods": {
                "metric": {"name": "trtllm_scratch_signal"},
                "target": {"type": "AverageValue", "averageValue": "2500m"},
            },
        }
    ]
    spec = with_scratch_targets(autoscaling("keda"), activeRequestUtilization=0.7, scratchSignal=2.5)
    with pytest.raises(
        ValueError, match=r"targets\.scratchSignal 2\.5 cannot drive mode keda .*use mode builtin"
    ):
        desired_scaled_object("llama", "ns", OWNER, spec)
    table = registry.docs_table()
    assert "| `scratchSignal` | scratch signal | > 0 | 2 | builtin, hpa |" in table
    assert "— (refused)" in table
    assert 'as: "trtllm_scratch_signal"' in registry.adapter_rules()


# --- the docs -----------------------------------------------------------------------------------


def _between(text: str, begin: str, end: str) -> str:
    start = text.index(begin)
    return text[text.index("\n", start) + 1 : text.index(end)]


def test_docs_tables_equal_the_registry() -> None:
    """docs/autoscaling.md's signal table and prometheus-adapter rules are the registry's (paste
    ``registry.docs_table()`` / ``registry.adapter_rules()`` between the markers when this fails)."""
    doc = (REPO / "docs/autoscaling.md").read_text()
    assert (
        _between(doc, "<!-- BEGIN SIGNAL REGISTRY", "<!-- END SIGNAL REGISTRY -->") == registry.docs_table()
    )
    adapter = _between(doc, "<!-- BEGIN ADAPTER RULES", "<!-- END ADAPTER RULES -->")
    assert adapter == f"```yaml\n{registry.adapter_rules()}```\n"
