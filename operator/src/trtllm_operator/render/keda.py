"""``mode: keda``: a KEDA ScaledObject with Prometheus triggers on the LLMDeployment's scale subresource.

For teams that run KEDA (it also allows ``minReplicas: 0``). KEDA creates and owns an HPA from this
object; the trigger queries return the deployment's *total* and ``metricType: AverageValue`` makes
the HPA divide by the replica count, so each target keeps its per-replica meaning. One trigger per
enabled target, in registry order (:mod:`trtllm_operator.api.signals`), named by the signal's
:attr:`~trtllm_operator.api.signals.Signal.keda_trigger` (``active-request-utilization``,
``kv-cache-utilization``): ``sum(<the signal's PromQL>)`` over the deployment's pods, threshold = the
target. A signal the registry refuses for ``mode: keda`` is an error naming the field (admission
refuses it first).

The PromQL is :mod:`trtllm_operator.metrics.prometheus`'s (no recording rules needed), restricted to
the namespace and to pod names of the deployment's workload (``<name>-<hash>-<suffix>`` for a
Deployment, ``<name>-<index>`` for a LeaderWorkerSet leader). ``serverAddress`` is
``metrics.prometheusURL``, ``pollingInterval`` ``metrics.scrapeIntervalSeconds``; ``behavior`` goes
to ``advanced.horizontalPodAutoscalerConfig.behavior``.

Field names follow KEDA's API types (kedacore/keda ``apis/keda/v1alpha1/scaledobject_types.go``:
``ScaledObjectSpec``, ``AdvancedConfig``, ``HorizontalPodAutoscalerConfig``, ``ScaleTarget``;
``scaletriggers_types.go``: ``ScaleTriggers``) and its Prometheus scaler (``serverAddress``,
``query``, ``threshold``, ``activationThreshold``, all strings).
"""

from __future__ import annotations

from typing import Any

from trtllm_operator.api.deployment import AutoscalingSpec
from trtllm_operator.api.wire import (
    KEDA_API_VERSION,
)
from trtllm_operator.decide.serving_params import OwnerRef
from trtllm_operator.metrics.prometheus import expression
from trtllm_operator.render.hpa import autoscaler_metadata, behavior, enabled_signals, scale_target_ref
from trtllm_operator.render.leaderworkerset import leaderworkerset_name
from trtllm_operator.render.serving import child_name

__all__ = ["desired_scaled_object", "keda_hpa_name", "pod_name_regex"]


def keda_hpa_name(name: str) -> str:
    """The HorizontalPodAutoscaler KEDA creates for LLMDeployment ``name``'s ScaledObject: the
    ScaledObject's ``advanced.horizontalPodAutoscalerConfig.name``, ``<name>-keda``."""
    return child_name(name, "keda")


def pod_name_regex(name: str) -> str:
    """PromQL regex for the serving pods' names (PromQL anchors regexes at both ends): the
    Deployment's pods ``<name>-<replicaset hash>-<5>`` and a LeaderWorkerSet's leaders
    ``<name>-lws-<group>`` (:func:`~trtllm_operator.render.leaderworkerset.leaderworkerset_name`;
    its workers ``<name>-lws-<group>-<index>`` export no metrics)."""
    workload = child_name(name)
    return f"{workload}-[a-z0-9]+-[a-z0-9]{{5}}|{leaderworkerset_name(name)}-[0-9]+"


def _number(value: float) -> str:
    return f"{value:g}"


def desired_scaled_object(
    name: str, namespace: str, owner: OwnerRef, spec: AutoscalingSpec
) -> dict[str, Any]:
    """``keda.sh/v1alpha1`` ScaledObject ``<name>`` for an LLMDeployment in ``mode: keda``.

    Raises ``ValueError`` naming the field when ``maxReplicas``, ``metrics.prometheusURL`` or every
    target is unset, or a target is set that mode keda cannot render.
    """
    if spec.max_replicas is None:
        raise ValueError("spec.autoscaling.maxReplicas is required for mode keda: set it")
    url = spec.metrics.prometheus_url
    if not url:
        raise ValueError(
            "spec.autoscaling.metrics.prometheusURL is required for mode keda (KEDA queries Prometheus)"
        )
    matchers = f'namespace="{namespace}", pod=~"{pod_name_regex(name)}"'
    triggers = [
        _trigger(s.keda_trigger, url, f"sum({expression(s.name, matchers)})", target)
        for s, target in enabled_signals(spec, "keda")
    ]
    return {
        "apiVersion": KEDA_API_VERSION,
        "kind": "ScaledObject",
        "metadata": autoscaler_metadata(name, namespace, owner),
        "spec": {
            "scaleTargetRef": scale_target_ref(name),
            "pollingInterval": spec.metrics.scrape_interval_seconds,
            "minReplicaCount": spec.min_replicas,
            "maxReplicaCount": spec.max_replicas,
            "advanced": {
                "horizontalPodAutoscalerConfig": {
                    "name": keda_hpa_name(name),
                    "behavior": behavior(spec, tolerance=False),
                }
            },
            "triggers": triggers,
        },
    }


def _trigger(trigger_name: str, url: str, query: str, threshold: float) -> dict[str, Any]:
    return {
        "type": "prometheus",
        "name": trigger_name,
        "metricType": "AverageValue",
        "metadata": {"serverAddress": url, "query": query, "threshold": _number(threshold)},
    }
