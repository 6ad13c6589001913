"""The autoscaling signals, read from a Triton ``/metrics`` page (Prometheus text format).

Per pod, from the families of the TensorRT-LLM backend and Triton core (reference
``tensorrt-llm.md`` §5, source: tensorrtllm_backend ``custom_metrics_reporter.cc`` and Triton's
``docs/user_guide/metrics.md``), for one model (default ``tensorrt_llm``, the model that runs the
engine in ``inflight_batcher_llm``):

* **queue depth** — ``nv_trt_llm_request_metrics{request_type="waiting"}`` (requests queued in the
  TensorRT-LLM executor, backend 0.18+); when absent (older backend, or the LLM-API/PyTorch model
  that does not export ``nv_trt_llm_*``) ``nv_inference_pending_request_count`` (Triton's own queue
  of requests not yet handed to the model).
* **KV-cache utilization** — ``nv_trt_llm_kv_cache_block_metrics``: ``used`` / ``max`` blocks; when
  either is absent or ``max`` is 0, the ``fraction`` series (0.18+, the backend's own used/max).
* **inflight-batch utilization** — ``(active + queue depth) / max`` of
  ``nv_trt_llm_request_metrics{request_type="active"|"max"}`` (``max``: the most requests the
  executor runs at once, max_batch_size): the fraction of the batcher's slots the pod's requests
  would fill. Counting the waiting requests keeps it proportional to demand past saturation (above
  1 when requests wait), as Knative's concurrency counts queued requests. Missing when ``active`` or
  ``max`` is absent or ``max`` is 0 (the LLM-API model exports neither).

Series of the same model with several ``version`` labels are summed (blocks and requests add up).
A value that is absent stays ``None`` — the policy treats it as *missing*, never as 0.

Parsing uses prometheus-client's own text parser
(:func:`prometheus_client.parser.text_string_to_metric_families`); a page it cannot parse raises
:class:`MetricsParseError`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from prometheus_client.parser import text_string_to_metric_families

from trtllm_operator.api.signals import BATCH_UTILIZATION, KV_CACHE_UTILIZATION, QUEUE_DEPTH_PER_REPLICA

__all__ = [
    "DEFAULT_MODEL",
    "KV_CACHE_BLOCKS",
    "PENDING_REQUESTS",
    "REQUEST_METRICS",
    "MetricsParseError",
    "TritonSignals",
    "signals_from_samples",
    "signals_from_text",
]

#: Triton model whose metrics are read: the TensorRT-LLM model of ``inflight_batcher_llm``.
DEFAULT_MODEL = "tensorrt_llm"
REQUEST_METRICS = "nv_trt_llm_request_metrics"
KV_CACHE_BLOCKS = "nv_trt_llm_kv_cache_block_metrics"
PENDING_REQUESTS = "nv_inference_pending_request_count"


class MetricsParseError(ValueError):
    """The page is not valid Prometheus text format."""


@dataclass(frozen=True)
class TritonSignals:
    """The signals of one pod. ``queue_depth``: requests; ``kv_cache_utilization``: fraction 0–1;
    ``batch_utilization``: (active + waiting) / max requests, ≥ 0 (above 1 when requests wait).

    ``queue_source`` / ``kv_source`` name the series used (for status messages and debugging):
    ``"waiting"`` or ``"pending"``; ``"used/max"`` or ``"fraction"``; ``None`` when missing.
    """

    queue_depth: float | None
    kv_cache_utilization: float | None
    queue_source: str | None = None
    kv_source: str | None = None
    batch_utilization: float | None = None

    def values(self) -> dict[str, float | None]:
        """The value of every registry signal (:data:`trtllm_operator.api.signals.SIGNALS`), by name;
        a unit test checks that this covers the registry."""
        return {
            QUEUE_DEPTH_PER_REPLICA: self.queue_depth,
            KV_CACHE_UTILIZATION: self.kv_cache_utilization,
            BATCH_UTILIZATION: self.batch_utilization,
        }


#: (sample name, labels, value) — the shape both the text parser and a Prometheus query produce.
Sample = tuple[str, Mapping[str, str], float]


def _sum(samples: Iterable[Sample], name: str, model: str, **labels: str) -> float | None:
    total: float | None = None
    for sample_name, sample_labels, value in samples:
        if sample_name != name or sample_labels.get("model") != model:
            continue
        if any(sample_labels.get(k) != v for k, v in labels.items()):
            continue
        if math.isnan(value):  # Triton never exports NaN; treat it as absent
            continue
        total = value if total is None else total + value
    return total


def signals_from_samples(samples: Iterable[Sample], model: str = DEFAULT_MODEL) -> TritonSignals:
    """Pick the signals out of parsed samples (see the module docstring for the rules)."""
    samples = list(samples)
    queue = _sum(samples, REQUEST_METRICS, model, request_type="waiting")
    queue_source = "waiting" if queue is not None else None
    if queue is None:
        queue = _sum(samples, PENDING_REQUESTS, model)
        queue_source = "pending" if queue is not None else None
    used = _sum(samples, KV_CACHE_BLOCKS, model, kv_cache_block_type="used")
    max_blocks = _sum(samples, KV_CACHE_BLOCKS, model, kv_cache_block_type="max")
    kv: float | None
    kv_source: str | None
    if used is not None and max_blocks:
        kv, kv_source = used / max_blocks, "used/max"
    else:
        kv = _sum(samples, KV_CACHE_BLOCKS, model, kv_cache_block_type="fraction")
        kv_source = "fraction" if kv is not None else None
    if kv is not None:
        kv = min(max(kv, 0.0), 1.0)
    if queue is not None:
        queue = max(queue, 0.0)
    active = _sum(samples, REQUEST_METRICS, model, request_type="active")
    max_active = _sum(samples, REQUEST_METRICS, model, request_type="max")
    batch: float | None = None
    if active is not None and max_active:
        batch = max(active + (queue or 0.0), 0.0) / max_active
    return TritonSignals(queue, kv, queue_source, kv_source, batch)


def signals_from_text(text: str, model: str = DEFAULT_MODEL) -> TritonSignals:
    """Signals of one ``/metrics`` page. Raises :class:`MetricsParseError` on malformed text."""
    try:
        samples = [
            (s.name, s.labels, float(s.value))
            for family in text_string_to_metric_families(text)
            for s in family.samples
        ]
    except (ValueError, TypeError, IndexError, KeyError) as exc:
        raise MetricsParseError(f"not Prometheus text format: {exc}") from exc
    return signals_from_samples(samples, model)
