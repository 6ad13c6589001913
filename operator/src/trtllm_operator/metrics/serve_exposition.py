"""What a real ``trtllm-serve`` replica exports at ``/prometheus/metrics``: its families, from its requests.

``trtllm-serve`` is TensorRT-LLM's own OpenAI server, the pytorch backend's ``api: openai``
(:func:`trtllm_operator.render.serving.trtllm_serve_args`); the 26.03 images carry TensorRT-LLM 1.2.0.
This module is the one home of its Prometheus names, labels, HELP texts and bucket boundaries, of the
rules that say when a request is observed, and of the reading of such a page back
(:func:`read_serve_page`). The simulator's replicas (:mod:`trtllm_operator.simulate.engine`, with
:attr:`~trtllm_operator.simulate.engine.ReplicaSpec.frontend` ``trtllm-serve``) export exactly this, and
none of the Triton families of :mod:`trtllm_operator.metrics.exposition`: the server has no Triton core.

Upstream, NVIDIA/TensorRT-LLM (the stored index holds no copy at the v1.2.0 tag; the versions read are
named by the index's ``find_string`` ids, as reference ``tensorrt-llm.md`` §6 names its sources):

* ``tensorrt_llm/metrics/collector.py`` ``MetricsCollector`` of the 1.1/1.2 line (id 1069656223, the
  version with ``log_metrics_dict``): a counter ``request_success_total`` (labels the collector's plus
  ``finished_reason``) and four histograms ``e2e_request_latency_seconds``,
  ``time_to_first_token_seconds``, ``time_per_output_token_seconds``, ``request_queue_time_seconds``
  with the HELP texts and buckets below, **without a prefix**. The ``trtllm_`` prefix came with the
  refactor that renamed ``log_metrics_dict`` to ``log_request_metrics_dict`` (PR #11243, 2026-02), which
  ai-dynamo/dynamo PR #6469 dates to 1.3.0rc5; every stored version with the prefix has that rename
  (id 46484645625; main at commit 050f80def8df236e326949c8bd9dee10fd896a83, same buckets). A 1.1.0 page
  quoted in vllm-project/aibrix issue #2004 (2026-03) is unprefixed. So the 1.2 spelling is taken
  unprefixed, and :func:`read_serve_page` accepts both (:data:`PREFIX_1_3`), as the reference
  ``triton-metrics-semantics.md`` says to.
* ``tensorrt_llm/serve/openai_server.py`` (ids 456200087, 36409600292): with the LLM argument
  ``return_perf_metrics`` it builds ``MetricsCollector({"model_name": "undefined", "engine_type":
  "undefined"})`` (:data:`LABELS`: hard-coded, fixed only in 1.3 by PR #12545) and mounts
  ``/prometheus/metrics`` on a prometheus-client **multiprocess** registry (``mount_metrics``); and
  ``_extract_metrics`` calls ``log_metrics_dict(res.metrics_dict)`` once per request, when it has
  finished.
* ``tensorrt_llm/executor/result.py`` (id 1063746606): ``_handle_sequence`` calls ``record_stats`` only
  on the final response, with ``finish_reason`` ``stop`` (end id or stop words), ``length``,
  ``timeout`` or ``cancelled``; ``_process_req_perf_metrics`` computes from the request's timing
  metrics ``TTFT = first_token − arrival``, ``E2E = last_token − arrival``, ``REQUEST_QUEUE_TIME =
  first_scheduled − arrival`` and, for more than one output token and ``n == 1``, ``TPOT = (last_token
  − first_token) / (output_tokens − 1)``, and keeps only values > 0. ``log_metrics_dict`` then counts
  the request under its ``finished_reason`` and observes each value it has (a truthy one) in its
  histogram.
* ``first_scheduled`` is set once, when the PyTorch executor first gives the request a sequence slot,
  in the iteration that first schedules it (``_torch/pyexecutor/seq_slot_manager.py``
  ``prepare_resources``: ``llm_req.set_first_scheduled_time()``, ids 989176358 and 2713922021; C++
  ``LlmRequest::setFirstScheduledTime`` keeps the first value, id 50462803). ``arrival`` is the
  request's ``arrival_time`` handed to the executor (``executor_request.py_arrival_time``,
  ``_torch/pyexecutor/llm_request.py`` ``executor_request_to_llm_request``, id 570138565; without it
  the C++ ``LlmRequest`` stamps its own construction). Where the LLM API sets that ``arrival_time`` in
  1.2 was not found in the index: the simulator takes the request's arrival at the pod, so the queue
  time includes the wait for a free slot.

What follows for a page (:class:`ServeMetrics`):

* everything is observed **at completion**: a request's TTFT reaches the page when the request
  finishes, not at its first token (unlike Triton's first-response histogram);
* ``request_success_total`` counts every finished request by ``finished_reason`` ("success" is
  upstream's word, ``cancelled`` and ``timeout`` included), so the TTFT, E2E and queue-time
  histograms' ``_count`` equals the counter's sum over ``finished_reason`` for requests that produced
  a token, and TPOT's counts only those with more than one output token;
* no gauge at all — nothing of the requests in flight or queued, no KV cache (those arrive with 1.3,
  PR #12545): a scraper sees a replica only through finished requests;
* the multiprocess registry serves no ``_created`` samples, and a family appears only once its first
  request finished (its first labelled child exists);
* counters are cumulative since the process started (a new pod starts from nothing).

Modelling choice: the simulator can schedule a request at the instant it arrives (its replica model
has no dispatch latency), where a real server's two clock reads differ by microseconds and the queue
time is observed; a simulated wait of exactly 0 is therefore observed as 0, not dropped (upstream's
"> 0" keeps the other three values as they are).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter, Histogram, Metric, generate_latest

from trtllm_operator.metrics.exposition import Family

__all__ = [
    "E2E_REQUEST_LATENCY",
    "FINISHED_REASON",
    "HISTOGRAMS",
    "LABELS",
    "PREFIX_1_3",
    "REQUEST_LATENCY_BUCKETS_S",
    "REQUEST_QUEUE_TIME",
    "REQUEST_SUCCESS",
    "TIME_PER_OUTPUT_TOKEN",
    "TIME_PER_OUTPUT_TOKEN_BUCKETS_S",
    "TIME_TO_FIRST_TOKEN",
    "TIME_TO_FIRST_TOKEN_BUCKETS_S",
    "FinishedRequest",
    "HistogramReading",
    "HistogramSpec",
    "ServeMetrics",
    "ServePage",
    "read_serve_page",
    "render_serve_page",
]

#: The collector's labels as trtllm-serve 1.2 sets them (``openai_server.py``: hard-coded).
LABELS: Mapping[str, str] = {"model_name": "undefined", "engine_type": "undefined"}
#: The counter's extra label (``MetricsCollector.labelname_finish_reason``).
FINISHED_REASON = "finished_reason"
#: The prefix TensorRT-LLM 1.3 puts before every name (``MetricsCollector.metric_prefix``).
PREFIX_1_3 = "trtllm_"

#: The counter, as registered (prometheus-client names its family without ``_total``).
REQUEST_SUCCESS = "request_success_total"
REQUEST_SUCCESS_HELP = "Count of successfully processed requests."
E2E_REQUEST_LATENCY = "e2e_request_latency_seconds"
TIME_TO_FIRST_TOKEN = "time_to_first_token_seconds"
TIME_PER_OUTPUT_TOKEN = "time_per_output_token_seconds"
REQUEST_QUEUE_TIME = "request_queue_time_seconds"

#: ``e2e_request_latency_seconds`` and ``request_queue_time_seconds`` buckets (upper bounds, seconds).
REQUEST_LATENCY_BUCKETS_S: tuple[float, ...] = (
    0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0,
    40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0,
)  # fmt: skip
#: ``time_to_first_token_seconds`` buckets (seconds).
TIME_TO_FIRST_TOKEN_BUCKETS_S: tuple[float, ...] = (
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5,
    0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0,
)  # fmt: skip
#: ``time_per_output_token_seconds`` buckets (seconds).
TIME_PER_OUTPUT_TOKEN_BUCKETS_S: tuple[float, ...] = (
    0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75,
    1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0,
)  # fmt: skip


@dataclass(frozen=True)
class HistogramSpec:
    """One histogram of the collector: name (1.2 spelling), HELP text, bucket upper bounds (s)."""

    name: str
    documentation: str
    buckets: tuple[float, ...]


#: The four histograms, in the collector's registration order.
HISTOGRAMS: tuple[HistogramSpec, ...] = (
    HistogramSpec(
        E2E_REQUEST_LATENCY, "Histogram of end to end request latency in seconds.", REQUEST_LATENCY_BUCKETS_S
    ),
    HistogramSpec(
        TIME_TO_FIRST_TOKEN, "Histogram of time to first token in seconds.", TIME_TO_FIRST_TOKEN_BUCKETS_S
    ),
    HistogramSpec(
        TIME_PER_OUTPUT_TOKEN,
        "Histogram of time per output token in seconds.",
        TIME_PER_OUTPUT_TOKEN_BUCKETS_S,
    ),
    HistogramSpec(
        REQUEST_QUEUE_TIME, "Histogram of time spent in WAITING phase for request.", REQUEST_LATENCY_BUCKETS_S
    ),
)


@dataclass(frozen=True)
class FinishedRequest:
    """One finished request's timing metrics (seconds on one clock) and outcome.

    ``arrival_s``: handed to the executor; ``first_scheduled_s``: the start of the iteration that first
    scheduled it; ``first_token_s`` / ``last_token_s``: when its first / last output token was produced;
    ``output_tokens``: tokens generated; ``finished_reason``: ``stop``, ``length``, ``timeout`` or
    ``cancelled``; ``n``: sequences asked for (TPOT only for 1).
    """

    arrival_s: float
    first_scheduled_s: float
    first_token_s: float
    last_token_s: float
    output_tokens: int
    finished_reason: str
    n: int = 1

    def observations(self) -> dict[str, float]:
        """The histogram values upstream records for it, by histogram name (``_process_req_perf_metrics``
        and ``log_metrics_dict``): TTFT, E2E and TPOT only when > 0, the queue time when ≥ 0 (module
        docstring, modelling choice)."""
        out = {
            TIME_TO_FIRST_TOKEN: self.first_token_s - self.arrival_s,
            E2E_REQUEST_LATENCY: self.last_token_s - self.arrival_s,
        }
        if self.output_tokens > 1 and self.n == 1:
            out[TIME_PER_OUTPUT_TOKEN] = (self.last_token_s - self.first_token_s) / (self.output_tokens - 1)
        kept = {name: value for name, value in out.items() if value > 0}
        queue = self.first_scheduled_s - self.arrival_s
        if queue >= 0:
            kept[REQUEST_QUEUE_TIME] = queue
        return kept


class ServeMetrics:
    """The ``MetricsCollector`` of one trtllm-serve replica: prometheus-client's own ``Counter`` and
    ``Histogram`` (what upstream registers), in a registry of the replica's own, fed by
    :meth:`finish`; :meth:`families` is its ``/prometheus/metrics`` page at that instant."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self._success = Counter(
            REQUEST_SUCCESS,
            REQUEST_SUCCESS_HELP,
            labelnames=[*LABELS, FINISHED_REASON],
            registry=self.registry,
        )
        self._histograms = {
            spec.name: Histogram(
                spec.name,
                spec.documentation,
                labelnames=list(LABELS),
                buckets=spec.buckets,
                registry=self.registry,
            )
            for spec in HISTOGRAMS
        }
        self._page: tuple[Family, ...] | None = ()  # the page until the next finish (None: stale)

    def finish(self, request: FinishedRequest) -> None:
        """Record one finished request, as ``log_metrics_dict`` does when trtllm-serve sees it finish."""
        self._success.labels(**LABELS, **{FINISHED_REASON: request.finished_reason}).inc()
        for name, value in request.observations().items():
            self._histograms[name].labels(**LABELS).observe(value)
        self._page = None

    def families(self) -> tuple[Family, ...]:
        """The page's families as the multiprocess registry serves them: no ``_created`` sample, no
        family before its first observation."""
        if self._page is not None:
            return self._page
        out = []
        for metric in self.registry.collect():
            kept = tuple(
                (s.name, dict(s.labels), float(s.value))
                for s in metric.samples
                if not s.name.endswith("_created")
            )
            if kept:
                out.append(Family(metric.name, metric.documentation, metric.type, kept))
        self._page = tuple(out)
        return self._page


def render_serve_page(families: Iterable[Family]) -> str:
    """The text trtllm-serve answers (prometheus-client's ``generate_latest``, format 0.0.4)."""

    class _Page:
        def collect(self) -> Iterable[Metric]:
            for family in families:
                metric = Metric(family.name, family.documentation, family.type)
                for name, labels, value in family.samples:
                    metric.add_sample(name, dict(labels), value)
                yield metric

    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Page())  # a Collector: anything with collect()
    return generate_latest(registry).decode()


@dataclass(frozen=True)
class HistogramReading:
    """One histogram as read from a page: ``count``, ``sum`` (seconds) and the cumulative ``buckets``
    ``(upper bound, count)``, ``+Inf`` last as ``inf``."""

    count: float
    sum: float
    buckets: tuple[tuple[float, float], ...]


@dataclass(frozen=True)
class ServePage:
    """What a trtllm-serve page says: ``finished`` (``request_success_total`` summed over its label
    sets; ``None`` when the family is absent, before the first request finished), by reason, and the
    histograms present, by their 1.2 name."""

    finished: float | None
    by_reason: Mapping[str, float]
    histograms: Mapping[str, HistogramReading]


def _unprefixed(name: str) -> str:
    return name[len(PREFIX_1_3) :] if name.startswith(PREFIX_1_3) else name


def read_serve_page(samples: Iterable[tuple[str, Mapping[str, str], float]]) -> ServePage:
    """Read parsed samples ``(name, labels, value)`` of a trtllm-serve page (either spelling: 1.2
    unprefixed, 1.3 ``trtllm_``). Series of one histogram with several label sets are added up."""
    finished: float | None = None
    by_reason: dict[str, float] = {}
    counts: dict[str, float] = {}
    sums: dict[str, float] = {}
    buckets: dict[str, dict[float, float]] = {}
    names = {spec.name for spec in HISTOGRAMS}
    for raw, labels, value in samples:
        name = _unprefixed(raw)
        if name == REQUEST_SUCCESS:
            finished = (finished or 0.0) + value
            reason = labels.get(FINISHED_REASON, "")
            by_reason[reason] = by_reason.get(reason, 0.0) + value
            continue
        base, _, suffix = name.rpartition("_")
        if base not in names:
            continue
        if suffix == "count":
            counts[base] = counts.get(base, 0.0) + value
        elif suffix == "sum":
            sums[base] = sums.get(base, 0.0) + value
        elif suffix == "bucket":
            le = float(labels["le"])  # "+Inf" reads as inf
            per = buckets.setdefault(base, {})
            per[le] = per.get(le, 0.0) + value
    histograms = {
        name: HistogramReading(
            counts.get(name, 0.0), sums.get(name, 0.0), tuple(sorted(buckets.get(name, {}).items()))
        )
        for name in names
        if name in counts or name in buckets
    }
    return ServePage(finished, by_reason, histograms)
