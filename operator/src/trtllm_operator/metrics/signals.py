"""The autoscaling signals, read from a Triton ``/metrics`` page (Prometheus text format).

Per pod, from the families of the TensorRT-LLM C++ backend (tensorrtllm_backend v0.19.0, commit
c1e19638, ``inflight_batcher_llm/src/model_instance_state.cc`` ``WaitForStats()`` and
``custom_metrics_reporter.cc``; reference ``triton-metrics-semantics.md``), for one model (default
``tensorrt_llm``, the model that runs the engine in ``inflight_batcher_llm``):

* **active-request utilization** — ``active / max`` of ``nv_trt_llm_request_metrics``: ``active`` is
  the executor's ``numActiveRequests``, ``max`` its ``maxNumActiveRequests`` (max batch size ×
  pipeline parallelism, TensorRT-LLM ``batch_manager/trtGptModel.h``). The executor fetches requests
  from its queue only while ``active < max`` (``executorImpl.cpp``), so the value is at most 1, and at
  1 the replica is saturated: further requests wait in the executor's queue, which no backend
  version exports. Missing when ``active`` or ``max`` is absent or ``max`` is 0 (the LLM-API/PyTorch
  model exports neither).
* **KV-cache utilization** — ``nv_trt_llm_kv_cache_block_metrics``: ``used`` / ``max`` blocks; when
  either is absent or ``max`` is 0, the ``fraction`` series (0.18+, the backend's own used/max).

The capacity recommendation's raw values (:meth:`TritonSignals.counters`) come from Triton core's
``nv_inference_request_success``, the request gauges above and, for its token weighting, the backend's
token-length histograms ``nv_llm_input_token_len`` / ``nv_llm_output_token_len`` (``_sum``: the prompt
/ output tokens of the requests finished so far; ``_count``: those requests; observed once per request,
at completion; tensorrtllm_backend ≥ v0.16.0 — :mod:`trtllm_operator.metrics.exposition`).

Not signals, on purpose (upstream audit B1–B3): ``waiting`` (= active − scheduled: admitted but not
in this iteration's batch, mostly KV pressure; never a backlog) and ``nv_inference_pending_request_count``
(0 for ``tensorrt_llm``: ``execute`` returns right after ``enqueueRequests``). ``waiting`` is still
parsed into :attr:`TritonSignals.waiting` for the tuning advisor, which reads it as what it is.

Series of the same model with several ``version`` labels are summed (blocks and requests add up).
A value that is absent stays ``None`` — the policy treats it as *missing*, never as 0.

Parsing uses prometheus-client's own text parser
(:func:`prometheus_client.parser.text_string_to_metric_families`); a page it cannot parse raises
:class:`MetricsParseError`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from prometheus_client.parser import text_string_to_metric_families

from trtllm_operator.api.signals import ACTIVE_REQUEST_UTILIZATION, KV_CACHE_UTILIZATION
from trtllm_operator.metrics.exposition import INPUT_TOKENS, OUTPUT_TOKENS

__all__ = [
    "DEFAULT_MODEL",
    "KV_CACHE_BLOCKS",
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
#: Triton core's per-model counter of successful requests (core ``src/metric_model_reporter.cc``).
REQUEST_SUCCESS = "nv_inference_request_success"


class MetricsParseError(ValueError):
    """The page is not valid Prometheus text format."""


@dataclass(frozen=True)
class TritonSignals:
    """The signals of one pod. ``active_request_utilization``: active / max requests, 0–1;
    ``kv_cache_utilization``: fraction 0–1; ``kv_source``: the series used (``"used/max"`` or
    ``"fraction"``; ``None`` when missing). ``waiting``: the ``waiting`` gauge (active − scheduled),
    not a registry signal (see the module docstring)."""

    active_request_utilization: float | None = None
    kv_cache_utilization: float | None = None
    kv_source: str | None = None
    waiting: float | None = None
    # The raw values behind the capacity recommendation; compared through :meth:`counters`.
    completed: float | None = field(default=None, compare=False)
    active: float | None = field(default=None, compare=False)
    max_active: float | None = field(default=None, compare=False)
    prompt_tokens: float | None = field(default=None, compare=False)
    output_tokens: float | None = field(default=None, compare=False)
    finished: float | None = field(default=None, compare=False)

    def counters(self) -> dict[str, float | None]:
        """The raw values the capacity recommendation reads (:mod:`trtllm_operator.decide.capacity`):
        ``completed`` (``nv_inference_request_success``), ``active`` / ``max``
        (``nv_trt_llm_request_metrics``), ``prompt_tokens`` / ``output_tokens`` / ``finished``
        (``nv_llm_input_token_len_sum``, ``nv_llm_output_token_len_sum``,
        ``nv_llm_input_token_len_count``)."""
        return {
            "completed": self.completed,
            "active": self.active,
            "max": self.max_active,
            "prompt_tokens": self.prompt_tokens,
            "output_tokens": self.output_tokens,
            "finished": self.finished,
        }

    def values(self) -> dict[str, float | None]:
        """The value of every registry signal (:data:`trtllm_operator.api.signals.SIGNALS`), by name;
        a unit test checks that this covers the registry."""
        return {
            ACTIVE_REQUEST_UTILIZATION: self.active_request_utilization,
            KV_CACHE_UTILIZATION: self.kv_cache_utilization,
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
    active = _sum(samples, REQUEST_METRICS, model, request_type="active")
    max_active = _sum(samples, REQUEST_METRICS, model, request_type="max")
    utilization: float | None = None
    if active is not None and max_active:
        utilization = min(max(active / max_active, 0.0), 1.0)
    waiting = _sum(samples, REQUEST_METRICS, model, request_type="waiting")
    completed = _sum(samples, REQUEST_SUCCESS, model)
    if completed is None:  # prometheus-client's parser names a counter's sample ``<family>_total``
        completed = _sum(samples, f"{REQUEST_SUCCESS}_total", model)
    (prompt_family, prompt_kind), (output_family, output_kind) = INPUT_TOKENS, OUTPUT_TOKENS
    prompt_tokens = _sum(samples, f"{prompt_family}_sum", model, response_metric_type=prompt_kind)
    finished = _sum(samples, f"{prompt_family}_count", model, response_metric_type=prompt_kind)
    output_tokens = _sum(samples, f"{output_family}_sum", model, response_metric_type=output_kind)
    return TritonSignals(
        utilization,
        kv,
        kv_source,
        None if waiting is None else max(waiting, 0.0),
        completed=completed,
        active=active,
        max_active=max_active,
        prompt_tokens=prompt_tokens,
        output_tokens=output_tokens,
        finished=finished,
    )


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
