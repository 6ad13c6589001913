"""What the autoscaler writes: conditions, ``status.autoscaling``, Events and external children, decided
from what one reconcile observed. Pure (no I/O); :mod:`trtllm_operator.handlers.autoscaler` observes,
calls these, acts and writes, as the engine controller does with :mod:`trtllm_operator.decide.engine`.

Built-in mode, one tick:

* :func:`decide_invalid` — ``spec.autoscaling`` cannot drive the policy: ``ScalingActive=False``
  ``InvalidSpec`` with the policy's message (field, value, fix);
* :func:`decide_tick` — from the policy's :class:`~trtllm_operator.decide.autoscaling.Decision`
  (and whether reading the signals failed): the ``spec.replicas`` to patch, the ``ScaledUp`` /
  ``ScaledDown`` Event, the ``status.autoscaling`` fields (``policyState`` only when a restart would
  otherwise read the policy's memory differently: an idle tick changes no field and costs no
  write), ``ScalingActive`` (``ValidMetricFound``,
  ``MissingMetrics``, ``FailedGetMetrics``) and ``ScalingLimited`` (the limit's reason, else
  ``DesiredWithinRange``), the Warning when ``InsufficientGPU`` starts, and the Warning
  ``ManualScaleReverted`` (also noted in the ``lastDecisions`` entry) when it changes a
  ``spec.replicas`` someone else set. The condition types are
  autoscaling/v2's HPA conditions, ``ValidMetricFound`` and ``DesiredWithinRange`` the reasons
  Kubernetes' HPA controller uses (``pkg/controller/podautoscaler/horizontal.go``);
* :func:`state_for_tick` — the policy state to decide with: the one the operator remembers
  (:class:`Remembered`) while ``policyState`` is still what it left, else the persisted one carried
  over (:func:`load_state`, :func:`~trtllm_operator.decide.autoscaling.resume`).

Why the state is kept in memory and written only on change: Kubernetes' HPA controller keeps its
recommendations in memory (``a.recommendations``, keyed by HPA) and writes an HPA's status only when
it differs from the last (kubernetes v1.34.4 ``pkg/controller/podautoscaler/horizontal.go``
``updateStatusIfNeeded``). Writing ``policyState`` at every evaluation cost an idle deployment a
write per ``scrapeIntervalSeconds`` (issue #20) for a field only a restart reads; losing it at a
restart, as HPA does, would let a restarted operator scale down before its window. The middle way
writes it when what a later decision reads changes
(:func:`~trtllm_operator.decide.autoscaling.same_memory`) — docs/autoscaling.md, "Writes".

Modes hpa / keda:

* :func:`decide_external` — which child kind to render and which to remove for ``spec.autoscaling``;
* :func:`external_rendered` / :func:`external_failed` / :func:`external_refused` — the condition (and
  Warning) after rendering;
* :func:`retire_builtin` — what the built-in autoscaler left in status once the mode is no longer
  builtin or autoscaling is off: ``status.autoscaling`` removed, ``ScalingLimited`` (and, when off,
  ``ScalingActive``) moved to ``ScalingDelegated`` / ``AutoscalingDisabled``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from trtllm_operator.api.deployment import AutoscalingSpec
from trtllm_operator.api.wire import CUSTOM_METRICS_API_SERVICES
from trtllm_operator.decide.autoscaling import (
    AutoscalerState,
    Decision,
    Reason,
    record_decision,
    resume,
    same_memory,
    signal_status,
)
from trtllm_operator.decide.conditions import condition, find

__all__ = [
    "AUTOSCALING_DISABLED",
    "CUSTOM_METRICS_API_MISSING",
    "CUSTOM_METRICS_API_UNAVAILABLE",
    "KEDA_NOT_INSTALLED",
    "MANUAL_SCALE_REVERTED",
    "SCALING_DELEGATED",
    "SCALING_DISABLED",
    "ExternalPlan",
    "Remembered",
    "TickOutcome",
    "admission_refusal",
    "custom_metrics_problem",
    "decide_external",
    "decide_invalid",
    "decide_tick",
    "external_failed",
    "external_refused",
    "external_rendered",
    "load_state",
    "other_scaler",
    "refused_message",
    "retire_builtin",
    "state_for_tick",
]

Condition = dict[str, Any]

#: ``ScalingActive=False`` message when ``mode: keda`` finds no ScaledObject kind.
KEDA_NOT_INSTALLED = (
    "mode keda needs KEDA (the keda.sh/v1alpha1 ScaledObject kind): install KEDA or use mode builtin"
)


@dataclass(frozen=True)
class Event:
    """An Event to post on the LLMDeployment."""

    reason: str
    message: str
    type: Literal["Normal", "Warning"] = "Normal"


@dataclass(frozen=True)
class TickOutcome:
    """What one built-in tick does after the policy decided.

    ``scale_to``: the ``spec.replicas`` to patch through ``/scale`` (``None``: no change);
    ``events``: to post once the patch succeeded (``scale_event``) and after the status write
    (``warnings``); ``status``: ``status.autoscaling`` fields; ``conditions``: ``ScalingActive`` and
    ``ScalingLimited``.
    """

    scale_to: int | None
    scale_event: Event | None
    status: dict[str, Any]
    conditions: list[Condition]
    warnings: list[Event] = field(default_factory=list)


def decide_invalid(message: str, generation: int | None) -> list[Condition]:
    """The conditions of a ``spec.autoscaling`` the built-in policy cannot run (``message`` names the
    field, the value and the fix)."""
    return [condition("ScalingActive", False, "InvalidSpec", message, observed_generation=generation)]


def _scale_event(decision: Decision) -> Event | None:
    if not decision.scaled:
        return None
    verb = "ScaledUp" if decision.to_replicas > decision.from_replicas else "ScaledDown"
    return Event(
        verb, f"{decision.from_replicas} → {decision.to_replicas}: {decision.reason}: {decision.message}"
    )


#: Event reason (Warning) when the built-in autoscaler changes a ``spec.replicas`` someone else set.
MANUAL_SCALE_REVERTED = "ManualScaleReverted"


def _manual_scale(decision: Decision, autoscaling_status: Mapping[str, Any]) -> str | None:
    """Why a replica count set outside the autoscaler is being changed back, or None.

    ``status.autoscaling.desiredReplicas`` is what the autoscaler's previous evaluation set; a
    ``spec.replicas`` different from it was written by someone else (``kubectl scale``, an apply).
    It is "reverted" when this evaluation changes it (outside min/max at once; otherwise as the
    policy decides).
    """
    last = autoscaling_status.get("desiredReplicas")
    if last is None or not decision.scaled or int(last) == decision.from_replicas:
        return None
    return (
        f"spec.replicas was set to {decision.from_replicas} outside the autoscaler (its last decision: "
        f"{last}); spec.autoscaling is enabled (mode builtin), so the built-in autoscaler owns "
        f"spec.replicas and set it to {decision.to_replicas} ({decision.reason}). To choose the count "
        "yourself set spec.autoscaling.enabled: false, then kubectl scale; to move the autoscaler's "
        "range change spec.autoscaling.minReplicas / maxReplicas"
    )


#: ``ScalingActive=False`` reason while ``spec.replicas`` is 0: Kubernetes' HPA's, with its words
#: (kubernetes/kubernetes ``pkg/controller/podautoscaler/horizontal.go`` ``reconcileAutoscaler``:
#: ``scale.Spec.Replicas == 0 && minReplicas != 0`` → ``setCondition(hpa, ScalingActive,
#: ConditionFalse, "ScalingDisabled", "scaling is disabled since the replica count of the target is
#: zero")``).
SCALING_DISABLED = "ScalingDisabled"


def _active(decision: Decision, source_error: str | None, generation: int | None) -> Condition:
    if decision.reason == Reason.SCALING_DISABLED:
        # Nothing is read at 0 replicas (no pod), so no signal is valid: not ValidMetricFound.
        return condition(
            "ScalingActive",
            False,
            SCALING_DISABLED,
            "scaling is disabled since the replica count of the target is zero (spec.replicas 0); "
            "setting it to 1 or more (kubectl scale llmdeployment) resumes autoscaling",
            observed_generation=generation,
        )
    if source_error is not None:
        return condition(
            "ScalingActive", False, "FailedGetMetrics", source_error, observed_generation=generation
        )
    # Missing metrics stop scaling only when a signal has no data from any Ready pod; pods without
    # data among pods with data are filled in (HPA's rule) and the signals are still read.
    if decision.reason == Reason.MISSING_METRICS and any(v is None for v in decision.signals.values()):
        return condition(
            "ScalingActive", False, "MissingMetrics", decision.message, observed_generation=generation
        )
    return condition(
        "ScalingActive",
        True,
        "ValidMetricFound",
        "signals read from ready pods",
        observed_generation=generation,
    )


def _limited(decision: Decision, generation: int | None) -> Condition:
    if decision.limited is not None:
        return condition(
            "ScalingLimited", True, str(decision.limited), decision.message, observed_generation=generation
        )
    return condition(
        "ScalingLimited",
        False,
        "DesiredWithinRange",
        "the desired count is within the acceptable range",
        observed_generation=generation,
    )


def load_state(policy_state: str | None) -> tuple[AutoscalerState, str | None]:
    """The :class:`~trtllm_operator.decide.autoscaling.AutoscalerState` in
    ``status.autoscaling.policyState`` (JSON, ``AutoscalerState.to_dict``), and why it could not be
    read (then an empty state: the policy starts afresh, seeded with the current count), else
    ``None``."""
    if not policy_state:
        return AutoscalerState(), None
    try:
        return AutoscalerState.from_dict(json.loads(policy_state)), None
    except ValueError as exc:  # json.JSONDecodeError is a ValueError
        return AutoscalerState(), f"status.autoscaling.policyState unreadable ({exc}): starting afresh"


@dataclass(frozen=True)
class Remembered:
    """What the operator keeps in memory of one LLMDeployment between built-in evaluations: the
    ``state`` its last evaluation left, and the ``status.autoscaling.policyState`` it left persisted
    (``policy_state``, the exact string; ``None``: none)."""

    policy_state: str | None
    state: AutoscalerState


def state_for_tick(
    remembered: Remembered | None, policy_state: str | None, now: float, interval: float
) -> tuple[AutoscalerState, str | None]:
    """The state to decide with at ``now`` (epoch seconds), and why the persisted one was unreadable
    (else ``None``). ``interval``: seconds between evaluations (``metrics.scrapeIntervalSeconds``).

    The remembered state while ``status.autoscaling.policyState`` is still the string this operator
    left there; otherwise (a restart, nothing remembered; or the field changed behind it: cleared by
    a mode switch, written by another process) the persisted state carried over with
    :func:`~trtllm_operator.decide.autoscaling.resume` until the evaluation before this one.
    """
    if remembered is not None and remembered.policy_state == policy_state:
        return remembered.state, None
    persisted, problem = load_state(policy_state)
    return resume(persisted, now - interval), problem


def decide_tick(
    decision: Decision,
    *,
    source_error: str | None,
    autoscaling_status: Mapping[str, Any],
    conditions: Sequence[Mapping[str, Any]] | None,
    scale_time: str,
    generation: int | None,
    max_decisions: int,
) -> TickOutcome:
    """The writes of one built-in tick.

    ``source_error``: why the signal source failed (Prometheus unreachable or not allowed), else
    ``None``; ``autoscaling_status`` / ``conditions``: the object's current ``status.autoscaling`` and
    ``status.conditions``; ``scale_time``: RFC 3339 time of this tick (``lastScaleTime`` when it
    scales); ``max_decisions``: entries kept in ``lastDecisions``.

    ``status`` holds ``policyState`` only when the one in ``autoscaling_status`` no longer carries
    ``decision.state`` (:func:`~trtllm_operator.decide.autoscaling.same_memory`: a new
    recommendation count, a scale event), so an evaluation that changes nothing a later decision
    reads leaves every field as it is and costs no write — as Kubernetes' HPA controller, which keeps
    its recommendations in memory and skips a status write equal to the last (kubernetes v1.34.4
    ``pkg/controller/podautoscaler/horizontal.go`` ``updateStatusIfNeeded``).
    """
    status: dict[str, Any] = {
        **signal_status(decision.signals),
        "desiredReplicas": decision.to_replicas,
        "lastScaleTime": scale_time if decision.scaled else autoscaling_status.get("lastScaleTime"),
    }
    persisted, problem = load_state(autoscaling_status.get("policyState"))
    if problem is not None or not same_memory(
        persisted, decision.state, now=decision.time, horizon=decision.horizon
    ):
        status["policyState"] = json.dumps(decision.state.to_dict(), separators=(",", ":"))
    manual = _manual_scale(decision, autoscaling_status)
    recorded = decision if manual is None else replace(decision, message=f"{manual}: {decision.message}")
    decisions = record_decision(list(autoscaling_status.get("lastDecisions") or []), recorded, max_decisions)
    if decisions is not None:
        status["lastDecisions"] = decisions
    limited = _limited(decision, generation)
    # Rate and min/max limits are the policy working as configured (status shows them); no free GPU
    # is something to act on: one Warning when it starts.
    warnings = []
    before = find(conditions, "ScalingLimited")
    if decision.limited == Reason.INSUFFICIENT_GPU and (
        before is None or before.get("reason") != limited["reason"] or before.get("status") != "True"
    ):
        warnings.append(Event(str(decision.limited), decision.message, "Warning"))
    if manual is not None:
        warnings.append(Event(MANUAL_SCALE_REVERTED, manual, "Warning"))
    return TickOutcome(
        scale_to=decision.to_replicas if decision.scaled else None,
        scale_event=_scale_event(decision),
        status=status,
        conditions=[_active(decision, source_error, generation), limited],
        warnings=warnings,
    )


# --- modes hpa / keda ---------------------------------------------------------------------------

ExternalKind = Literal["hpa", "keda"]


@dataclass(frozen=True)
class ExternalPlan:
    """``render``: the external mode to render a child for (``None``: none); ``remove``: the external
    modes whose child (owned by this LLMDeployment) must go."""

    render: ExternalKind | None
    remove: tuple[ExternalKind, ...]


def decide_external(spec: AutoscalingSpec) -> ExternalPlan:
    """Which HPA / ScaledObject ``spec.autoscaling`` asks for: the one of its mode when enabled in
    ``hpa`` or ``keda``, and every other one removed (mode changed, or autoscaling turned off)."""
    mode = spec.mode if spec.enabled else None
    render: ExternalKind | None = mode if mode in ("hpa", "keda") else None
    kinds: tuple[ExternalKind, ...] = ("hpa", "keda")
    return ExternalPlan(render=render, remove=tuple(k for k in kinds if k != render))


def external_rendered(mode: ExternalKind, child: str, generation: int | None) -> list[Condition]:
    """``ScalingActive=True`` ``HPARendered`` / ``KEDARendered`` once the child is applied."""
    return [
        condition(
            "ScalingActive",
            True,
            f"{mode.upper()}Rendered",
            f"scaling delegated to the {mode} object {child}",
            observed_generation=generation,
        )
    ]


#: ``ScalingActive`` reasons in mode hpa when nothing serves the HPA's Pods metrics.
CUSTOM_METRICS_API_MISSING = "CustomMetricsAPIMissing"
CUSTOM_METRICS_API_UNAVAILABLE = "CustomMetricsAPIUnavailable"
_ADAPTER_FIX = (
    'install prometheus-adapter with the rule config of docs/autoscaling.md "mode: hpa" (its Helm chart\'s '
    "rules.custom), or use mode builtin"
)


def custom_metrics_problem(hpa: str, services: Mapping[str, Mapping[str, Any]]) -> tuple[str, str] | None:
    """Why mode hpa's HorizontalPodAutoscaler ``hpa`` cannot read its Pods metrics, as ``(reason,
    message)``, or None when an APIService of the custom metrics API is Available.

    ``services``: the APIServices of :data:`~trtllm_operator.api.wire.CUSTOM_METRICS_API_SERVICES`
    that exist, name → their ``Available`` condition (``{}`` without one). kube-controller-manager's
    HPA asks ``custom.metrics.k8s.io`` for every ``Pods`` metric (kubernetes v1.34.4
    ``pkg/controller/podautoscaler/metrics/client.go`` ``customMetricsClient.GetRawMetric``) and finds
    the group by discovery (k8s.io/metrics v0.34.4 ``pkg/client/custom_metrics/discovery.go``: "no
    custom metrics API (custom.metrics.k8s.io) registered"); a registered APIService that is not
    Available answers 503 (k8s.io/kube-aggregator v0.34.4 ``pkg/apiserver/handler_proxy.go``). Either
    way the HPA sets its own ``ScalingActive=False`` (``FailedGetPodsMetric``) and keeps the count, so
    the LLMDeployment's ``ScalingActive`` must not say ``True`` (fresh-user trial 46 T3)."""
    names = " or ".join(CUSTOM_METRICS_API_SERVICES)
    if not services:
        return CUSTOM_METRICS_API_MISSING, (
            f"HorizontalPodAutoscaler {hpa} reads its Pods metrics from the custom metrics API, and no "
            f"APIService registers it ({names}): {_ADAPTER_FIX}; the HPA stays applied and scales once "
            "that API serves its metrics"
        )
    if any(c.get("status") == "True" for c in services.values()):
        return None
    states = "; ".join(
        f"APIService {name} is not Available"
        + (f" ({c.get('reason')}: {c.get('message')})" if c.get("reason") or c.get("message") else "")
        for name, c in sorted(services.items())
    )
    return CUSTOM_METRICS_API_UNAVAILABLE, (
        f"HorizontalPodAutoscaler {hpa} reads its Pods metrics from the custom metrics API, and {states}: "
        "check the adapter that serves it (kubectl describe apiservice), or "
        + _ADAPTER_FIX
        + "; the HPA stays applied and scales once that API serves its metrics"
    )


def external_failed(reason: str, message: str, generation: int | None) -> tuple[list[Condition], Event]:
    """``ScalingActive=False`` with ``reason`` (``InvalidSpec``, ``KEDANotInstalled``,
    ``CustomMetricsAPIMissing`` / ``CustomMetricsAPIUnavailable``, ``AdmissionRefused``) and a Warning."""
    return (
        [condition("ScalingActive", False, reason, message, observed_generation=generation)],
        Event(reason, message, "Warning"),
    )


#: How kube-apiserver words a refusal by admission (kubernetes v1.34.4, the version hack/build-testbin.sh
#: builds; ``staging/src/k8s.io/apiserver`` = k8s.io/apiserver v0.34.4), each with the HTTP statuses it
#: comes with. A Go ``%q`` name is matched as a quoted string with escapes.
_QUOTED = r'"(?:[^"\\]|\\.)*"'
_ADMISSION_REFUSALS: tuple[tuple[re.Pattern[str], Callable[[int], bool]], ...] = (
    # A validating or mutating webhook's refusal: pkg/admission/plugin/webhook/errors/statuserror.go
    # ``ToStatusErr``: ``admission webhook "<name>" denied the request: <message>`` (or ``… denied the
    # request without explanation``), the webhook's HTTP status, at least 400.
    (re.compile(rf"admission webhook {_QUOTED} denied the request"), lambda status: status >= 400),
    # A ValidatingAdmissionPolicy's denial (a binding with validationActions Deny, or an expression
    # error under failurePolicy Fail): pkg/admission/plugin/policy/validating/dispatcher.go ``Dispatch``:
    # ``ValidatingAdmissionPolicy '<policy>' with binding '<binding>' denied request: <message>`` (no
    # binding: ``ValidatingAdmissionPolicy '<policy>' denied request: …``) in pkg/admission/errors.go
    # ``NewForbidden`` → k8s.io/apimachinery v0.34.4 pkg/api/errors/errors.go ``NewForbidden``:
    # ``<resource>.<group> "<name>" is forbidden: …``; the status from the policy's reason
    # (policy_decision.go ``reasonToCode``: Forbidden 403, Unauthorized 401, RequestEntityTooLarge 413,
    # else Invalid 422).
    (
        re.compile(
            rf"\S+ (?:{_QUOTED} )?is forbidden: ValidatingAdmissionPolicy '[^']*'"
            r"(?: with binding '[^']*')? denied request: "
        ),
        lambda status: status in (401, 403, 413, 422),
    ),
    # A webhook the API server could not call (unreachable, timed out, a bad answer) under
    # failurePolicy Fail: pkg/admission/plugin/webhook/validating/dispatcher.go (and mutating/) fail
    # closed with ``apierrors.NewInternalError(ErrCallingWebhook)``: HTTP 500,
    # ``Internal error occurred: failed calling webhook "<name>": <reason>`` (pkg/util/webhook/error.go;
    # ``…; no further details available`` without a reason). Under failurePolicy Ignore the request
    # goes through. Reported as a refusal, not raised: nothing else would say on the object that a
    # webhook blocks its HPA / ScaledObject, and the resync tries again as for a denial.
    (
        re.compile(rf"Internal error occurred: failed calling webhook {_QUOTED}[:;] "),
        lambda status: status == 500,
    ),
)


def admission_refusal(status: int, message: str) -> str | None:
    """``message`` when an API error (``status``, the Status body's ``message``) is a refusal by
    admission, else None: an admission webhook's denial, a ValidatingAdmissionPolicy's denial, or a
    webhook the API server could not call under ``failurePolicy: Fail`` (the forms in
    :data:`_ADMISSION_REFUSALS`, with their sources). KEDA's webhooks (kedacore/keda v2.20.2
    apis/keda/v1alpha1/scaledobject_webhook.go) refuse with 403 (controller-runtime v0.23.3
    pkg/webhook/admission/response.go ``Denied``: ``http.StatusForbidden``), e.g. "the workload
    '<name>' of type '<group/version.kind>' is already managed by the hpa '<hpa>'".

    Not recognised, so raised as before (kopf retries): RBAC's Forbidden, a timeout of the whole
    request (``Timeout: request did not complete …``), and a MutatingAdmissionPolicy's denial (beta and
    off by default in v1.34)."""
    for pattern, status_fits in _ADMISSION_REFUSALS:
        if status_fits(status) and pattern.match(message):
            return message
    return None


#: KEDA's refusals of a ScaledObject whose target another autoscaler already targets, each with the
#: kind of that other object (kedacore/keda v2.20.2 apis/keda/v1alpha1/scaledobject_webhook.go, the
#: ``fmt.Errorf`` texts; the workload is the ScaledObject's own target), as kube-apiserver relays a
#: webhook's denial (:data:`_ADMISSION_REFUSALS`). The other object's name is the group ``name``.
_KEDA_DENIED = rf"admission webhook {_QUOTED} denied the request: "
_KEDA_OTHER_SCALER: tuple[tuple[str, re.Pattern[str]], ...] = (
    # verifyHpas: an HPA on the same target that the ScaledObject does not own (an ownerReference of
    # kind ScaledObject and its name; the HPA annotation validations.keda.sh/hpa-ownership "false"
    # skips it).
    (
        "HorizontalPodAutoscaler",
        re.compile(
            _KEDA_DENIED
            + r"the workload '[^']*' of type '[^']*' is already managed by the hpa '(?P<name>[^']*)'"
        ),
    ),
    # verifyHpas again, under the annotation scaledobject.keda.sh/transfer-hpa-ownership "true" without
    # that HPA's name in advanced.horizontalPodAutoscalerConfig.name: nothing is transferred.
    (
        "HorizontalPodAutoscaler",
        re.compile(
            _KEDA_DENIED + r"the existing hpa '(?P<name>[^']*)' for workload '[^']*' of type '[^']*' must be "
            r"specified by name in advanced settings to enable ownership transfer"
        ),
    ),
    # verifyScaledObjects: another ScaledObject of the namespace on the same target.
    (
        "ScaledObject",
        re.compile(
            _KEDA_DENIED
            + r"the workload '[^']*' of type '[^']*' is already managed by the ScaledObject '(?P<name>[^']*)'"
        ),
    ),
)


def other_scaler(kind: str, refusal: str) -> tuple[str, str] | None:
    """``(kind, name)`` of the other HorizontalPodAutoscaler or ScaledObject that KEDA's webhook says
    already targets the workload, when ``refusal`` of a ScaledObject (``kind``) is one of
    :data:`_KEDA_OTHER_SCALER`; else None (any other refusal, or a child of another kind: KEDA v2.20.2
    registers no webhook for HPAs, config/webhooks/validation_webhooks.yaml).

    Not among them: verifyScaledObjects' "the HPA '<hpa>' is already managed by the ScaledObject
    '<other>'", a clash of HPA names whose other ScaledObject may target another workload."""
    if kind != "ScaledObject":
        return None
    for other_kind, pattern in _KEDA_OTHER_SCALER:
        found = pattern.fullmatch(refusal)
        if found is not None:
            return other_kind, found["name"]
    return None


def refused_message(
    kind: str, child: str, refusal: str, retry_seconds: float, *, standing: bool = False
) -> str:
    """``AdmissionRefused`` message: what was refused, what stays applied and whether anything the
    operator rendered scales, the refusal's words, and how often the operator tries again
    (``retry_seconds``). ``standing``: the refused request was the change of an existing ``kind``
    ``child`` this LLMDeployment owns (KEDA's ``ValidateUpdate`` runs the same ``validateWorkload``
    checks as ``ValidateCreate``: kedacore/keda v2.20.2 apis/keda/v1alpha1/scaledobject_webhook.go),
    which stays as last applied.

    Whether that one still scales is said only where the operator knows it. When KEDA refused the change
    because another HPA or ScaledObject already targets the deployment (:func:`other_scaler`), two HPAs
    select the same pods (the other HPA, or the other ScaledObject's: KEDA keeps one for every
    ScaledObject that is not paused, v2.20.2 controllers/keda/scaledobject_controller.go ``handlePause``
    deletes it), and Kubernetes' HPA controller stops both: kubernetes v1.34.4
    pkg/controller/podautoscaler/horizontal.go ``validateAndParseSelector`` — "pods by selector … are
    controlled by multiple HPAs: …", a Warning ``AmbiguousSelector`` and ``ScalingActive=False``
    ``AmbiguousSelector`` on each, no replica count computed, as soon as the selector selects a pod
    (``minReplicas`` is at least 1: ``SCALE_TO_ZERO_REFUSAL``) — so the message says nothing the operator
    rendered scales while the other object exists, and names it. Any other refused change (a policy's
    denial, a webhook not reachable) says only that the child stays as last applied: whether its HPA
    scales, that HPA's own conditions say."""
    retry = f"(tried again every {retry_seconds:g} s)"
    if not standing:
        return (
            f"the API server refused {kind} {child}, so nothing the operator rendered scales this "
            f"deployment: {refusal} {retry}"
        )
    other = other_scaler(kind, refusal)
    if other is None:
        return (
            f"the API server refused the change to {kind} {child}, which stays as last applied: "
            f"{refusal} {retry}"
        )
    other_kind, other_name = other
    if other_kind == "HorizontalPodAutoscaler":
        targets, stopped = "also targets it", f"that HPA and KEDA's HPA for {child}"
    else:
        targets, stopped = "also targets it (and is not paused)", "the HPA KEDA keeps for each"
    return (
        f"the API server refused the change to {kind} {child}, which stays as last applied, but nothing "
        f"the operator rendered scales this deployment while {other_kind} {other_name} {targets}: "
        f"Kubernetes' HPA controller stops {stopped} (AmbiguousSelector: pods controlled by multiple "
        f"HPAs); delete {other_kind} {other_name}: {refusal} {retry}"
    )


def external_refused(
    kind: str, child: str, refusal: str, retry_seconds: float, generation: int | None, *, standing: bool
) -> tuple[list[Condition], Event]:
    """The ``ScalingActive`` condition and Warning, reason ``AdmissionRefused``, when admission refused
    the HPA / ScaledObject (:func:`refused_message`). A refused create leaves nothing the operator
    rendered: ``False``. A refused change of the ``standing`` child leaves it as last applied (KEDA's
    admission checks run only in its webhook, not in its controller: v2.20.2 calls ``verifyHpas`` from
    ``validateWorkload`` alone): ``True``, so :func:`undelegated` leaves ``ScalingDelegated`` naming the
    HPA whose own conditions say whether it scales — unless KEDA refused it because another HPA or
    ScaledObject already targets the deployment (:func:`other_scaler`): then Kubernetes' HPA controller
    stops the child's HPA too (``AmbiguousSelector``), so ``False``, as for a refused create."""
    message = refused_message(kind, child, refusal, retry_seconds, standing=standing)
    if not standing or other_scaler(kind, refusal) is not None:
        return external_failed("AdmissionRefused", message, generation)
    return (
        [condition("ScalingActive", True, "AdmissionRefused", message, observed_generation=generation)],
        Event("AdmissionRefused", message, "Warning"),
    )


#: ``ScalingActive`` reason (and Warning) per external child kind whose name is taken by an object
#: this LLMDeployment does not own (:func:`external_conflict`).
CONFLICT_REASONS = {
    "HorizontalPodAutoscaler": "HorizontalPodAutoscalerConflict",
    "ScaledObject": "ScaledObjectConflict",
}


def external_conflict(kind: str, child: str, generation: int | None) -> tuple[list[Condition], Event]:
    """``ScalingActive=False`` ``<kind>Conflict`` and its Warning: the HPA / ScaledObject ``child``
    exists but another owner's (the operator never writes an object it does not control,
    :func:`~trtllm_operator.decide.ownership.control_conflict`), so nothing the operator rendered
    scales this LLMDeployment."""
    return external_failed(
        CONFLICT_REASONS[kind],
        f"{kind} {child} exists but is not owned by this LLMDeployment, so the operator's {kind} is not "
        f"applied and nothing it rendered scales this deployment: delete or rename that {kind}",
        generation,
    )


def undelegated(retired: list[Condition], status: Mapping[str, Any], failure: Condition) -> list[Condition]:
    """:func:`retire_builtin`'s conditions once the external mode's child could not be applied
    (``failure``: the ``ScalingActive=False`` condition of :func:`external_failed`). A
    ``ScalingLimited`` :data:`SCALING_DELEGATED` — about to be written (in ``retired``) or already in
    ``status`` — would name an HPA that does not decide, so it reads ``Unknown`` with the failure's
    reason and message instead. A ``failure`` that is ``True`` (:func:`external_refused` of a refused
    change: the child as last applied stands, and its HPA's conditions say whether it scales) changes
    nothing: ``retired`` as it is."""
    if failure.get("status") == "True":
        return retired

    def delegated(c: Mapping[str, Any]) -> bool:
        return c.get("type") == "ScalingLimited" and c.get("reason") == SCALING_DELEGATED

    kept = [c for c in retired if not delegated(c)]
    if len(kept) == len(retired) and not any(delegated(c) for c in status.get("conditions") or []):
        return kept
    return [
        *kept,
        condition(
            "ScalingLimited",
            "Unknown",
            str(failure["reason"]),
            f"no autoscaler decides the replica count: {failure['message']}",
            observed_generation=failure.get("observedGeneration"),
        ),
    ]


def failure_is_new(status: Mapping[str, Any], failure: Condition) -> bool:
    """Whether ``failure`` (``ScalingActive=False``) differs from the ``ScalingActive`` condition in
    ``status``: its Warning is posted once per change, not on every resync of the external mode."""
    existing = next((c for c in status.get("conditions") or [] if c.get("type") == "ScalingActive"), None)
    return existing is None or any(existing.get(k) != failure.get(k) for k in ("status", "reason", "message"))


# --- leaving mode builtin -----------------------------------------------------------------------

#: Reason of ``ScalingActive`` / ``ScalingLimited`` once ``spec.autoscaling.enabled`` is false.
AUTOSCALING_DISABLED = "AutoscalingDisabled"
#: Reason of ``ScalingLimited`` in modes hpa / keda: the HPA's own conditions say it.
SCALING_DELEGATED = "ScalingDelegated"


def _changed(existing: Mapping[str, Any] | None, new: Condition) -> bool:
    return existing is None or any(existing.get(k) != v for k, v in new.items())


def retire_builtin(
    spec: AutoscalingSpec,
    status: Mapping[str, Any],
    *,
    hpa: str,
    generation: int | None,
) -> tuple[list[Condition], dict[str, Any]]:
    """What the built-in autoscaler left in ``status`` that is stale once ``spec`` is no longer
    ``mode: builtin`` with autoscaling enabled: the conditions to set and a ``status`` merge patch
    (both empty when nothing is left, or in mode builtin).

    * ``status.autoscaling`` (the built-in's signals for the printer columns, ``desiredReplicas``,
      ``lastDecisions``, ``policyState``) is removed: nothing updates it any more, and a switch back
      to builtin starts afresh (seeded with the current count, as a new HPA is).
    * ``ScalingLimited``, where the built-in left one: in modes hpa / keda ``Unknown``
      :data:`SCALING_DELEGATED`, the message naming the HorizontalPodAutoscaler ``hpa`` that decides
      now (the one the operator renders, or KEDA's for its ScaledObject), whose own
      ``ScalingLimited`` / ``AbleToScale`` conditions say what holds it back; with autoscaling off
      ``False`` :data:`AUTOSCALING_DISABLED`.
    * ``ScalingActive``, where one is left, with autoscaling off: ``False`` :data:`AUTOSCALING_DISABLED`
      (in modes hpa / keda :func:`external_rendered` / :func:`external_failed` set it).

    Conditions are only updated, never added: an LLMDeployment that was never autoscaled gets none.
    Only what differs from ``status`` is returned.
    """
    mode = spec.mode if spec.enabled else None
    if mode == "builtin":
        return [], {}
    patch: dict[str, Any] = {"autoscaling": None} if status.get("autoscaling") is not None else {}
    existing = status.get("conditions")
    wanted: list[Condition] = []
    if mode in ("hpa", "keda"):
        owner = "the operator's" if mode == "hpa" else "KEDA's, for the ScaledObject the operator renders,"
        wanted.append(
            condition(
                "ScalingLimited",
                "Unknown",
                SCALING_DELEGATED,
                f"mode {mode}: {owner} HorizontalPodAutoscaler {hpa} decides the replica count; its own "
                f"conditions say whether a limit holds it back: kubectl describe hpa {hpa}",
                observed_generation=generation,
            )
        )
    else:
        off = (
            "spec.autoscaling.enabled is false: nothing scales this deployment; spec.replicas is the "
            "count (kubectl scale)"
        )
        wanted.append(
            condition("ScalingLimited", False, AUTOSCALING_DISABLED, off, observed_generation=generation)
        )
        wanted.append(
            condition("ScalingActive", False, AUTOSCALING_DISABLED, off, observed_generation=generation)
        )
    conditions = [
        c for c in wanted if (before := find(existing, c["type"])) is not None and _changed(before, c)
    ]
    return conditions, patch
