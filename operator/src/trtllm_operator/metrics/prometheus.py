"""Signal source ``prometheus``: the same signals, per pod, from a Prometheus server.

The PromQL, per pod (series carry the ``namespace`` and ``pod`` target labels, as kube-prometheus
PodMonitors and the usual ``kubernetes_sd_configs`` relabelling give them)::

    # queue depth: the executor's waiting queue, else Triton's pending count
    sum by (namespace, pod) (nv_trt_llm_request_metrics{model="tensorrt_llm", request_type="waiting"})
      or sum by (namespace, pod) (nv_inference_pending_request_count{model="tensorrt_llm"})

    # KV-cache utilization: used / max blocks, else the backend's own fraction
    # (KV = nv_trt_llm_kv_cache_block_metrics, M = model="tensorrt_llm")
    sum by (namespace, pod) (KV{M, kv_cache_block_type="used"})
      / sum by (namespace, pod) (KV{M, kv_cache_block_type="max"} > 0)
      or sum by (namespace, pod) (KV{M, kv_cache_block_type="fraction"})

``or`` keeps the left side and adds right-side series only for pods the left side lacks: the
fallback is per pod, as in :mod:`.signals`. The built-in autoscaler runs them as instant queries
restricted to the LLMDeployment's namespace and keeps the pods it knows are Ready. Staleness is
Prometheus's own: when a scrape fails or a target disappears, Prometheus marks its series stale and
the instant query no longer returns them, so that pod's signal is *missing* (the policy holds
replicas rather than scale down on it). Values are as old as the scrape interval.

The same expressions, unrestricted, are the recording rules the chart ships for prometheus-adapter
(:func:`recording_rules`; ``charts/trtllm-operator/files/prometheus-rules.yaml``), which the
rendered HPA and KEDA objects consume.
"""

from __future__ import annotations

import json
import logging
import math
import urllib.parse
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from trtllm_operator.api import signals as registry
from trtllm_operator.api.signals import BATCH_UTILIZATION, KV_CACHE_UTILIZATION, QUEUE_DEPTH_PER_REPLICA
from trtllm_operator.decide.autoscaling import PodSignals, PodState
from trtllm_operator.metrics.http import bounded_get
from trtllm_operator.metrics.scrape import pod_state
from trtllm_operator.metrics.signals import DEFAULT_MODEL, KV_CACHE_BLOCKS, PENDING_REQUESTS, REQUEST_METRICS

__all__ = [
    "BATCH_UTILIZATION_RECORD",
    "EXPRESSIONS",
    "KV_CACHE_RECORD",
    "QUEUE_DEPTH_RECORD",
    "PrometheusError",
    "batch_utilization_expr",
    "expression",
    "instant_query",
    "kv_cache_expr",
    "prometheus_pods",
    "queue_depth_expr",
    "recording_rules",
]

log = logging.getLogger(__name__)


def _record(name: str) -> str:
    return next(s.record for s in registry.SIGNALS if s.name == name)


#: Recording-rule names (Prometheus ``level:metric:operations`` convention; the registry's
#: :attr:`~trtllm_operator.api.signals.Signal.record`).
QUEUE_DEPTH_RECORD = _record(QUEUE_DEPTH_PER_REPLICA)
KV_CACHE_RECORD = _record(KV_CACHE_UTILIZATION)
BATCH_UTILIZATION_RECORD = _record(BATCH_UTILIZATION)
RULE_GROUP = "trtllm-operator.autoscaling"

Get = Callable[[str, float], str]


class PrometheusError(RuntimeError):
    """Prometheus could not be queried (unreachable, HTTP error, or an error answer)."""


def _selector(model: str, matchers: str, **labels: str) -> str:
    parts = [f'model="{model}"'] + [f'{k}="{v}"' for k, v in labels.items()]
    if matchers:
        parts.append(matchers)
    return "{" + ", ".join(parts) + "}"


def queue_depth_expr(matchers: str = "", model: str = DEFAULT_MODEL) -> str:
    """PromQL: waiting requests per (namespace, pod).

    ``matchers``: extra label matchers, e.g. ``namespace="a"``.
    """
    waiting = _selector(model, matchers, request_type="waiting")
    pending = _selector(model, matchers)
    return (
        f"sum by (namespace, pod) ({REQUEST_METRICS}{waiting})"
        f" or sum by (namespace, pod) ({PENDING_REQUESTS}{pending})"
    )


def kv_cache_expr(matchers: str = "", model: str = DEFAULT_MODEL) -> str:
    """PromQL: KV-cache utilization (0–1) per (namespace, pod)."""
    used = _selector(model, matchers, kv_cache_block_type="used")
    max_ = _selector(model, matchers, kv_cache_block_type="max")
    fraction = _selector(model, matchers, kv_cache_block_type="fraction")
    return (
        f"sum by (namespace, pod) ({KV_CACHE_BLOCKS}{used})"
        f" / sum by (namespace, pod) ({KV_CACHE_BLOCKS}{max_} > 0)"
        f" or sum by (namespace, pod) ({KV_CACHE_BLOCKS}{fraction})"
    )


def batch_utilization_expr(matchers: str = "", model: str = DEFAULT_MODEL) -> str:
    """PromQL: inflight-batch utilization, (active + waiting) / max requests, per (namespace, pod).

    The waiting term is the queue-depth expression (``waiting``, else Triton's pending count), or 0
    when a pod exports neither; pods without ``active`` or with ``max`` 0 have no value.
    """
    active = _selector(model, matchers, request_type="active")
    max_ = _selector(model, matchers, request_type="max")
    return (
        f"(sum by (namespace, pod) ({REQUEST_METRICS}{active})"
        f" + (({queue_depth_expr(matchers, model)})"
        f" or 0 * sum by (namespace, pod) ({REQUEST_METRICS}{active})))"
        f" / sum by (namespace, pod) ({REQUEST_METRICS}{max_} > 0)"
    )


#: The per-(namespace, pod) PromQL of every registry signal, by signal name (``matchers``, ``model``);
#: a unit test checks that this covers the registry.
EXPRESSIONS: dict[str, Callable[[str, str], str]] = {
    QUEUE_DEPTH_PER_REPLICA: queue_depth_expr,
    KV_CACHE_UTILIZATION: kv_cache_expr,
    BATCH_UTILIZATION: batch_utilization_expr,
}


def expression(signal: str, matchers: str = "", model: str = DEFAULT_MODEL) -> str:
    """The PromQL of registry signal ``signal``, per (namespace, pod)."""
    try:
        return EXPRESSIONS[signal](matchers, model)
    except KeyError:
        raise ValueError(f"signal {signal!r} has no PromQL: add it to EXPRESSIONS") from None


def recording_rules(model: str = DEFAULT_MODEL) -> dict[str, Any]:
    """The Prometheus rule file (``groups:``) the chart ships, as a dict: one record per registry
    signal."""
    return {
        "groups": [
            {
                "name": RULE_GROUP,
                "rules": [
                    {"record": s.record, "expr": expression(s.name, model=model)} for s in registry.SIGNALS
                ],
            }
        ]
    }


def http_get(url: str, timeout: float) -> str:
    """GET ``url``, bounded in size and time, no redirects
    (:func:`~trtllm_operator.metrics.http.bounded_get`); raises ``OSError`` on network or HTTP errors."""
    return bounded_get(url, timeout).decode()


def instant_query(
    base_url: str, promql: str, *, timeout: float = 5.0, get: Get = http_get
) -> list[tuple[dict[str, str], float]]:
    """Run an instant query (``GET <base_url>/api/v1/query``); returns (labels, value) per series.

    Raises :class:`PrometheusError` when Prometheus is unreachable or answers with an error.
    """
    url = base_url.rstrip("/") + "/api/v1/query?" + urllib.parse.urlencode({"query": promql})
    try:
        doc = json.loads(get(url, timeout))
    except (OSError, ValueError) as exc:
        raise PrometheusError(f"query {base_url} failed: {exc}") from exc
    if doc.get("status") != "success":
        raise PrometheusError(f"Prometheus at {base_url}: {doc.get('errorType')}: {doc.get('error')}")
    data = doc.get("data") or {}
    if data.get("resultType") != "vector":
        raise PrometheusError(f"expected an instant vector, got {data.get('resultType')!r}")
    out = []
    for series in data.get("result") or []:
        try:
            value = float(series["value"][1])
        except (KeyError, IndexError, TypeError, ValueError):
            continue
        if not math.isnan(value):
            out.append((dict(series.get("metric") or {}), value))
    return out


def _by_pod(series: Sequence[tuple[Mapping[str, str], float]]) -> dict[str, float]:
    return {labels["pod"]: value for labels, value in series if "pod" in labels}


def prometheus_pods(
    base_url: str,
    namespace: str,
    pods: Sequence[Mapping[str, Any]],
    *,
    model: str = DEFAULT_MODEL,
    timeout: float = 5.0,
    get: Get = http_get,
) -> tuple[PodSignals, ...]:
    """The policy's view of ``pods`` with signals from Prometheus (one instant query per signal).

    Raises :class:`PrometheusError` when Prometheus cannot be queried.
    """
    matchers = f'namespace="{namespace}"'
    by_signal = {
        s.name: _by_pod(
            instant_query(base_url, expression(s.name, matchers, model), timeout=timeout, get=get)
        )
        for s in registry.SIGNALS
    }
    out = []
    for pod in pods:
        name = str((pod.get("metadata") or {}).get("name", ""))
        state = pod_state(pod)
        ready = state == PodState.READY
        values = {s.name: s.clamp(by_signal[s.name].get(name)) if ready else None for s in registry.SIGNALS}
        out.append(PodSignals(name=name, state=state, values=values))
    return tuple(out)
