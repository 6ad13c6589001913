"""``mode: hpa``: an autoscaling/v2 HorizontalPodAutoscaler on the LLMDeployment's scale subresource.

For teams that standardise on HPA. The HPA targets the LLMDeployment itself (``scaleTargetRef``
``llm.trtllm-operator.dev/v1alpha1`` ``LLMDeployment``), so it writes ``spec.replicas`` through the
``/scale`` subresource and selects pods with ``status.selector`` — the operator then renders the
workload from ``spec.replicas`` as always, one writer per field.

One ``Pods`` metric per enabled target, in registry order (:mod:`trtllm_operator.api.signals`),
served by prometheus-adapter from the chart's recording rules
(``charts/trtllm-operator/files/prometheus-rules.yaml``, :mod:`trtllm_operator.metrics.prometheus`):
the signal's :attr:`~trtllm_operator.api.signals.Signal.adapter_metric` (e.g.
``trtllm_active_request_utilization`` from record
``namespace_pod:trtllm_active_request_utilization:ratio``), target ``AverageValue`` = the target (a
fraction as milli-units, e.g. ``800m``). A signal the registry refuses for ``mode: hpa`` is an error
naming the field (admission refuses it first).

``behavior`` carries the same windows and rate limits as the built-in policy
(:func:`~trtllm_operator.decide.autoscaling.scaling_rules_from_spec`); ``tolerance`` goes into each
direction's ``tolerance`` field, which the API server keeps only with the ``HPAConfigurableTolerance``
feature gate (alpha in Kubernetes 1.33) — without it the cluster-wide 0.1 applies. What HPA does not
have: the built-in policy's refusal to scale up while pods are Unschedulable.
"""

from __future__ import annotations

from typing import Any

from trtllm_operator.api import signals as registry
from trtllm_operator.api.deployment import AutoscalingSpec, targets_of
from trtllm_operator.api.wire import (
    API_VERSION,
    DEPLOYMENT_KIND,
    LABEL_DEPLOYMENT,
    LABEL_INSTANCE,
    LABEL_MANAGED_BY,
    MANAGED_BY,
)
from trtllm_operator.decide.autoscaling import (
    DEFAULT_SCALE_DOWN,
    DEFAULT_SCALE_UP,
    quantity,
    rules_manifest,
    scaling_rules_from_spec,
)
from trtllm_operator.decide.serving_params import OwnerRef
from trtllm_operator.render.serving import child_name

__all__ = ["desired_hpa", "enabled_signals", "scale_target_ref"]


def enabled_signals(
    spec: AutoscalingSpec, mode: registry.ExternalMode
) -> list[tuple[registry.Signal, float]]:
    """The registry signals ``spec.autoscaling.targets`` sets, with their targets, in registry order.

    Raises ``ValueError`` naming the field, the value and the fix for a signal the registry does not
    render in ``mode``, and when no target is set.
    """
    targets = targets_of(spec.targets, registry.SIGNALS)
    out = []
    for s in registry.SIGNALS:
        value = targets.get(s.name)
        if value is None:
            continue
        if not s.rendered_in(mode):
            raise ValueError(
                f"spec.autoscaling.targets.{s.name} {value:g} cannot drive mode {mode} "
                f"({s.refused_modes.get(mode, 'not rendered')}); unset it or use mode builtin"
            )
        out.append((s, value))
    if not out:
        supported = [f"targets.{s.name}" for s in registry.SIGNALS if s.rendered_in(mode)]
        raise ValueError(
            f"spec.autoscaling.targets: set at least one of {', '.join(supported)} for mode {mode}"
        )
    return out


def scale_target_ref(name: str) -> dict[str, str]:
    """The LLMDeployment as a scale target (its ``/scale`` subresource)."""
    return {"apiVersion": API_VERSION, "kind": DEPLOYMENT_KIND, "name": name}


def autoscaler_metadata(name: str, namespace: str, owner: OwnerRef) -> dict[str, Any]:
    """Metadata of the HPA or ScaledObject of LLMDeployment ``name``: its child name, the labels
    that mark it the operator's (managed-by, instance, deployment) and the controller owner
    reference (the operator only modifies children it controls)."""
    child = child_name(name)
    return {
        "name": child,
        "namespace": namespace,
        "labels": {LABEL_MANAGED_BY: MANAGED_BY, LABEL_INSTANCE: child, LABEL_DEPLOYMENT: child},
        "ownerReferences": [owner.manifest()],
    }


def behavior(spec: AutoscalingSpec, *, tolerance: bool) -> dict[str, Any]:
    """``HorizontalPodAutoscalerBehavior`` from ``spec.autoscaling.behavior`` (and ``tolerance``)."""
    tol = spec.tolerance if tolerance else None
    return {
        "scaleUp": rules_manifest(scaling_rules_from_spec(spec.behavior.scale_up, DEFAULT_SCALE_UP), tol),
        "scaleDown": rules_manifest(
            scaling_rules_from_spec(spec.behavior.scale_down, DEFAULT_SCALE_DOWN), tol
        ),
    }


def desired_hpa(name: str, namespace: str, owner: OwnerRef, spec: AutoscalingSpec) -> dict[str, Any]:
    """``autoscaling/v2`` HorizontalPodAutoscaler ``<name>`` for an LLMDeployment in ``mode: hpa``.

    Raises ``ValueError`` naming the field when ``maxReplicas`` or every target is unset, or a target
    is set that mode hpa cannot render (:func:`enabled_signals`).
    """
    if spec.max_replicas is None:
        raise ValueError("spec.autoscaling.maxReplicas is required for mode hpa: set it")
    metrics = [_pods_metric(s.adapter_metric, target) for s, target in enabled_signals(spec, "hpa")]
    return {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": autoscaler_metadata(name, namespace, owner),
        "spec": {
            "scaleTargetRef": scale_target_ref(name),
            "minReplicas": max(spec.min_replicas, 1),
            "maxReplicas": spec.max_replicas,
            "metrics": metrics,
            "behavior": behavior(spec, tolerance=True),
        },
    }


def _pods_metric(metric: str, target: float) -> dict[str, Any]:
    return {
        "type": "Pods",
        "pods": {
            "metric": {"name": metric},
            "target": {"type": "AverageValue", "averageValue": quantity(target)},
        },
    }
