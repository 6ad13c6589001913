"""What a real Triton + TensorRT-LLM (C++ ``tensorrtllm`` backend) replica exports, from its internal state.

One pure function, :func:`exposition`, maps the internal state of one replica
(:class:`ReplicaInternals`: the requests its executor holds, the ones scheduled in this iteration,
KV-cache blocks, completion counters, first-response observations) to the metric families and label
sets the real server puts on its ``/metrics`` page. The simulator's replicas
(:mod:`trtllm_operator.simulate.engine`) and the emulator's ``/metrics`` endpoints
(:mod:`trtllm_operator.emulator.exposition`) both go through it, so neither can export a quantity the
real server does not. The operator reads these pages with :mod:`trtllm_operator.metrics.signals`.

Upstream relations, each from the source named (reference ``triton-metrics-semantics.md``):

* ``nv_trt_llm_request_metrics`` (tensorrtllm_backend v0.19.0, commit c1e19638,
  ``inflight_batcher_llm/src/model_instance_state.cc`` ``WaitForStats()`` and
  ``src/custom_metrics_reporter/custom_metrics_reporter.cc``; the same code lives in TensorRT-LLM
  ``triton_backend/``):

  - ``max`` = the executor's ``maxNumActiveRequests`` = ``getMaxNumSequences()`` = max batch size ×
    pipeline-parallel size (TensorRT-LLM ``cpp/tensorrt_llm/batch_manager/trtGptModel.h``,
    ``mMaxNumSequences = mMaxBatchSize * worldConfig.getPipelineParallelism()``; executor
    ``executorImpl.cpp``: ``mMaxNumActiveRequests = mModel->getMaxNumSequences()``);
  - ``active`` = ``numActiveRequests``: the requests the executor has fetched from its queue, at most
    ``max`` (it fetches only while fewer than ``max`` are active);
  - ``scheduled`` = ``numScheduledRequests`` (this iteration's batch), ``context`` =
    ``numContextRequests``;
  - ``waiting`` = ``numActiveRequests − numScheduledRequests`` (backend ≥ v0.18.0, commit 15cb989b):
    admitted but not in this iteration's batch — never more than ``max − scheduled``;
  - the executor's queue of requests not yet fetched (``numQueuedRequests`` in its iteration stats) is
    **not exported** by any version of the backend: :attr:`ReplicaInternals.requests` beyond ``max``
    leave no trace on the page.

* ``nv_trt_llm_kv_cache_block_metrics`` (same files): ``max``, ``free``, ``used``, ``tokens_per``,
  ``reused`` and ``fraction`` = used / max (0 when max is 0); here used + free = max.

* ``nv_trt_llm_inflight_batcher_metrics`` (``paused_requests``, ``total_context_tokens``,
  ``generation_requests``, ``micro_batch_id``) and ``nv_trt_llm_general_metrics``
  (``iteration_counter``, ``timestamp``) (same files).

* ``nv_llm_input_token_len`` / ``nv_llm_output_token_len`` (label
  ``response_metric_type="total_input_tokens"`` / ``"total_output_tokens"``): histograms with buckets
  10, 50, 100, 500, 1000 tokens, each request observed **once, at completion** — the backend's
  ``reportCustomMetrics(inputTokensSize, outputTokensSize)`` runs when the last response of a request
  has been sent, with the prompt length the executor was given (``getInputTokenIds().size()``) and the
  tokens generated (tensorrtllm_backend v0.19.0, commit c1e19638,
  ``inflight_batcher_llm/src/custom_metrics_reporter/custom_metrics_reporter.cc`` ``InitializeReporter``
  and ``inflight_batcher_llm/src/model_instance_state.cc`` ``reportCustomMetrics``; absent from
  v0.15.0, present from v0.16.0 on (added on main by commit 91c07d3, "Update TensorRT-LLM backend
  (#652)", 2024-11-26); the same code lives in TensorRT-LLM ``triton_backend/``). Their
  ``_sum`` is the only exported count of tokens: the prompt and output tokens of the requests
  finished so far. No ``nv_trt_llm_`` prefix. Here a request rejected before it runs (``failed``) is
  not observed.

* Triton core (triton-inference-server/core ``src/metrics.cc``, ``src/metric_model_reporter.{h,cc}``):
  per model ``nv_inference_request_success``, ``nv_inference_request_failure{reason}``,
  ``nv_inference_count``, ``nv_inference_exec_count``, the cumulative ``*_duration_us`` counters and
  the gauge ``nv_inference_pending_request_count``. For ``tensorrt_llm`` the backend's ``execute``
  returns right after ``enqueueRequests``, so the pending count stays 0 and the time a request spends
  in the executor counts as compute (``compute_infer``), not queue time: the queue duration counters
  do not grow with the executor's backlog (Triton's own sub-millisecond dispatch is not modelled: 0).
  ``nv_inference_first_response_histogram_ms`` (buckets 100, 500, 2000, 5000 ms,
  ``metric_model_reporter.h``) exists only with ``--metrics-config histogram_latencies=true`` and, in
  Triton before server PR #8580 (2025-12), only for decoupled models.

Counters are cumulative since the replica started (a new pod starts from 0), as Triton's are.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

__all__ = [
    "FIRST_RESPONSE_BUCKETS_MS",
    "INPUT_TOKENS",
    "OUTPUT_TOKENS",
    "PIPELINE_MODELS",
    "TOKEN_LENGTH_BUCKETS",
    "TRTLLM_MODEL",
    "Family",
    "FirstResponseHistogram",
    "ReplicaInternals",
    "TokenHistogram",
    "exposition",
    "samples",
]

#: The model that runs the engine in ``inflight_batcher_llm`` (the one ``nv_trt_llm_*`` is about).
TRTLLM_MODEL = "tensorrt_llm"
#: The models of ``inflight_batcher_llm`` that serve a request, client-facing one first.
PIPELINE_MODELS = ("ensemble", "preprocessing", TRTLLM_MODEL, "postprocessing")
#: Triton core's default buckets of ``nv_inference_first_response_histogram_ms``
#: (core ``src/metric_model_reporter.h``: ``{kFirstResponseHistogram, {100, 500, 2000, 5000}}``).
FIRST_RESPONSE_BUCKETS_MS: tuple[float, ...] = (100.0, 500.0, 2000.0, 5000.0)
#: Buckets of the backend's token-length histograms (``custom_metrics_reporter.cc``:
#: ``std::vector<double> buckets = {10.0, 50.0, 100.0, 500.0, 1000.0}``), in tokens.
TOKEN_LENGTH_BUCKETS: tuple[float, ...] = (10.0, 50.0, 100.0, 500.0, 1000.0)
#: The prompt-length histogram and its one label value (``input_metric_type_labels_``).
INPUT_TOKENS = ("nv_llm_input_token_len", "total_input_tokens")
#: The output-length histogram and its one label value (``response_metric_type_labels_``).
OUTPUT_TOKENS = ("nv_llm_output_token_len", "total_output_tokens")
#: Models that report a first-response histogram: the client-facing ensemble and the decoupled
#: ``tensorrt_llm`` (the Python pre/post-processing models answer once).
_FIRST_RESPONSE_MODELS = ("ensemble", TRTLLM_MODEL)


@dataclass
class FirstResponseHistogram:
    """Cumulative first-response (TTFT) observations of one replica, in Triton's buckets."""

    counts: list[int] = field(default_factory=lambda: [0] * (len(FIRST_RESPONSE_BUCKETS_MS) + 1))
    sum_ms: float = 0.0

    def observe(self, ms: float) -> None:
        """Record one first response ``ms`` milliseconds after its request arrived."""
        self.counts[bisect.bisect_left(FIRST_RESPONSE_BUCKETS_MS, ms)] += 1
        self.sum_ms += ms

    @property
    def count(self) -> int:
        """Observations so far."""
        return sum(self.counts)

    def cumulative(self) -> list[int]:
        """Counts per ``le`` bound (each bucket counts everything at or below it), ``+Inf`` last."""
        return list(itertools.accumulate(self.counts))


@dataclass
class TokenHistogram:
    """Cumulative token-length observations of one replica (one per finished request), in the
    backend's buckets :data:`TOKEN_LENGTH_BUCKETS`."""

    counts: list[int] = field(default_factory=lambda: [0] * (len(TOKEN_LENGTH_BUCKETS) + 1))
    sum_tokens: float = 0.0

    def observe(self, tokens: float) -> None:
        """Record one finished request's ``tokens``."""
        self.counts[bisect.bisect_left(TOKEN_LENGTH_BUCKETS, tokens)] += 1
        self.sum_tokens += tokens

    @property
    def count(self) -> int:
        """Observations so far."""
        return sum(self.counts)

    def cumulative(self) -> list[int]:
        """Counts per ``le`` bound (each bucket counts everything at or below it), ``+Inf`` last."""
        return list(itertools.accumulate(self.counts))

    def copy(self) -> TokenHistogram:
        """An independent snapshot (a page is a snapshot; the replica keeps counting)."""
        return TokenHistogram(list(self.counts), self.sum_tokens)


@dataclass(frozen=True)
class ReplicaInternals:
    """The internal state of one replica at one scrape — including what the server does not export.

    ``requests``: requests the executor holds (its queue of not-yet-fetched requests plus the active
    ones); ``scheduled``: those in this iteration's batch; ``context``: of those, in their context
    phase; ``max_active``: ``maxNumActiveRequests`` (max batch size × pipeline parallelism).
    ``kv_used_blocks`` / ``kv_max_blocks`` / ``tokens_per_block``: the paged KV cache.
    ``completed`` / ``failed``: requests finished successfully / rejected; ``latency_s_total``: their
    summed request durations (arrival at the pod to last response). ``first_response``: TTFT
    observations; exported only when ``histogram_latencies`` (and ``decoupled``, see the module
    docstring). ``input_tokens`` / ``output_tokens``: the prompt and output lengths of the finished
    requests (``None``: none finished yet; the histograms are exported all the same, empty). Raises
    ``ValueError`` when the state breaks an invariant the real executor keeps.
    """

    requests: int
    scheduled: int
    max_active: int
    kv_used_blocks: int
    kv_max_blocks: int
    tokens_per_block: int
    context: int = 0
    context_tokens: int = 0
    completed: int = 0
    failed: int = 0
    latency_s_total: float = 0.0
    iteration: int = 0
    timestamp_us: int = 0
    first_response: FirstResponseHistogram | None = None
    histogram_latencies: bool = False
    decoupled: bool = True
    input_tokens: TokenHistogram | None = None
    output_tokens: TokenHistogram | None = None

    def __post_init__(self) -> None:
        if self.max_active <= 0:
            raise ValueError(f"max_active {self.max_active}: must be > 0 (max batch size × pp)")
        if not 0 <= self.scheduled <= min(self.requests, self.max_active):
            raise ValueError(
                f"scheduled {self.scheduled}: must be in [0, min(requests {self.requests}, "
                f"max_active {self.max_active})]"
            )
        if not 0 <= self.context <= self.scheduled:
            raise ValueError(f"context {self.context}: must be in [0, scheduled {self.scheduled}]")
        if not 0 <= self.kv_used_blocks <= self.kv_max_blocks:
            raise ValueError(f"kv_used_blocks {self.kv_used_blocks}: must be in [0, {self.kv_max_blocks}]")

    @property
    def active(self) -> int:
        """``numActiveRequests``: the executor fetches requests only while fewer than max are active."""
        return min(self.requests, self.max_active)

    @property
    def queued(self) -> int:
        """``numQueuedRequests``: the executor's own queue — hidden, no family carries it."""
        return self.requests - self.active


@dataclass(frozen=True)
class Family:
    """One metric family: name, HELP text, type and its samples ``(sample name, labels, value)``."""

    name: str
    documentation: str
    type: str
    samples: tuple[tuple[str, Mapping[str, str], float], ...]


def _group(name: str, doc: str, label: str, values: Mapping[str, float]) -> Family:
    return Family(
        name,
        doc,
        "gauge",
        tuple(
            (name, {"model": TRTLLM_MODEL, label: key, "version": "1"}, float(v)) for key, v in values.items()
        ),
    )


def _per_model(name: str, doc: str, typ: str, values: Mapping[str, float]) -> Family:
    return Family(
        name, doc, typ, tuple((name, {"model": m, "version": "1"}, float(v)) for m, v in values.items())
    )


def exposition(s: ReplicaInternals) -> list[Family]:
    """The Triton core and ``tensorrtllm`` backend families of one replica, in the server's order."""
    active = s.active
    completed = float(s.completed)
    latency_us = round(s.latency_s_total * 1e6)
    everywhere = dict.fromkeys(PIPELINE_MODELS, completed)

    def engine_only(engine: float, ensemble: float | None = None) -> dict[str, float]:
        """Every model of the pipeline (Triton core reports each loaded model, as a real server's
        page shows: tests/fixtures/triton_metrics_cpu_standin*.txt); the durations of the Python
        pre/post-processing models are not modelled (0)."""
        values = dict.fromkeys(PIPELINE_MODELS, 0.0)
        values[TRTLLM_MODEL] = engine
        if ensemble is not None:
            values["ensemble"] = ensemble
        return values

    out = [
        _per_model(
            "nv_inference_request_success",
            "Number of successful inference requests, all batch sizes",
            "counter",
            everywhere,
        ),
        Family(
            "nv_inference_request_failure",
            "Number of failed inference requests, all batch sizes",
            "counter",
            tuple(
                (
                    "nv_inference_request_failure",
                    {"model": model, "reason": reason, "version": "1"},
                    float(s.failed if (model, reason) == (TRTLLM_MODEL, "REJECTED") else 0),
                )
                for model in PIPELINE_MODELS
                for reason in ("REJECTED", "CANCELED", "BACKEND", "OTHER")
            ),
        ),
        _per_model(
            "nv_inference_count",
            "Number of inferences performed (does not include cached requests)",
            "counter",
            everywhere,
        ),
        _per_model(
            "nv_inference_exec_count",
            "Number of model executions performed (does not include cached requests)",
            "counter",
            everywhere,
        ),
        _per_model(
            "nv_inference_request_duration_us",
            "Cumulative inference request duration in microseconds (includes cached requests)",
            "counter",
            engine_only(latency_us, ensemble=latency_us),
        ),
        # Time in the executor's queue is compute for Triton core (execute returns at enqueue).
        _per_model(
            "nv_inference_queue_duration_us",
            "Cumulative inference queuing duration in microseconds (includes cached requests)",
            "counter",
            engine_only(0),
        ),
        _per_model(
            "nv_inference_compute_input_duration_us",
            "Cumulative compute input duration in microseconds (does not include cached requests)",
            "counter",
            engine_only(0),
        ),
        _per_model(
            "nv_inference_compute_infer_duration_us",
            "Cumulative compute inference duration in microseconds (does not include cached requests)",
            "counter",
            engine_only(latency_us),
        ),
        _per_model(
            "nv_inference_compute_output_duration_us",
            "Cumulative inference compute output duration in microseconds (does not include cached requests)",
            "counter",
            engine_only(0),
        ),
        _per_model(
            "nv_inference_pending_request_count",
            "Instantaneous number of pending requests awaiting execution per-model.",
            "gauge",
            engine_only(0),
        ),
    ]
    if s.histogram_latencies and s.decoupled and s.first_response is not None:
        h = s.first_response
        cumulative = h.cumulative()
        hist: list[tuple[str, Mapping[str, str], float]] = []
        for model in _FIRST_RESPONSE_MODELS:
            labels = {"model": model, "version": "1"}
            hist.append(("nv_inference_first_response_histogram_ms_count", labels, float(h.count)))
            hist.append(("nv_inference_first_response_histogram_ms_sum", labels, h.sum_ms))
            bounds = [f"{b:g}" for b in FIRST_RESPONSE_BUCKETS_MS] + ["+Inf"]
            for le, c in zip(bounds, cumulative, strict=True):
                bucket = {**labels, "le": le}
                hist.append(("nv_inference_first_response_histogram_ms_bucket", bucket, float(c)))
        out.append(
            Family(
                "nv_inference_first_response_histogram_ms",
                "Duration from request to first response in milliseconds",
                "histogram",
                tuple(hist),
            )
        )
    out += [
        _group(
            "nv_trt_llm_request_metrics",
            "TRT LLM request metrics",
            "request_type",
            {
                "waiting": active - s.scheduled,
                "context": s.context,
                "scheduled": s.scheduled,
                "max": s.max_active,
                "active": active,
            },
        ),
        _group(
            "nv_trt_llm_runtime_memory_metrics",
            "TRT LLM runtime memory metrics",
            "memory_type",
            {"pinned": 4_194_304, "gpu": 1_610_236, "cpu": 0},
        ),
        _group(
            "nv_trt_llm_kv_cache_block_metrics",
            "TRT LLM KV cache block metrics",
            "kv_cache_block_type",
            {
                "fraction": s.kv_used_blocks / s.kv_max_blocks if s.kv_max_blocks > 0 else 0.0,
                "reused": 0,
                "tokens_per": s.tokens_per_block,
                "used": s.kv_used_blocks,
                "free": s.kv_max_blocks - s.kv_used_blocks,
                "max": s.kv_max_blocks,
            },
        ),
        _group(
            "nv_trt_llm_inflight_batcher_metrics",
            "TRT LLM inflight_batcher-specific metrics",
            "inflight_batcher_specific_metric",
            {
                "paused_requests": 0,
                "micro_batch_id": 0,
                "generation_requests": s.scheduled - s.context,
                "total_context_tokens": s.context_tokens,
            },
        ),
        _group(
            "nv_trt_llm_general_metrics",
            "General TRT LLM metrics",
            "general_type",
            {"iteration_counter": s.iteration, "timestamp": s.timestamp_us},
        ),
        # The reporter creates the output histogram before the input one (InitializeReporter).
        _token_histogram(OUTPUT_TOKENS, s.output_tokens),
        _token_histogram(INPUT_TOKENS, s.input_tokens),
    ]
    return out


def _token_histogram(which: tuple[str, str], h: TokenHistogram | None) -> Family:
    """``nv_llm_{input,output}_token_len`` of the ``tensorrt_llm`` model (the module docstring)."""
    name, kind = which
    h = h if h is not None else TokenHistogram()
    labels = {"model": TRTLLM_MODEL, "response_metric_type": kind, "version": "1"}
    rows: list[tuple[str, Mapping[str, str], float]] = [
        (f"{name}_count", labels, float(h.count)),
        (f"{name}_sum", labels, float(h.sum_tokens)),
    ]
    bounds = [f"{b:g}" for b in TOKEN_LENGTH_BUCKETS] + ["+Inf"]
    for le, c in zip(bounds, h.cumulative(), strict=True):
        rows.append((f"{name}_bucket", {**labels, "le": le}, float(c)))
    return Family(name, "TRT LLM response metrics", "histogram", tuple(rows))


def samples(families: Iterable[Family]) -> list[tuple[str, Mapping[str, str], float]]:
    """Every sample of ``families``, flattened: what a text parser gives back for the page."""
    return [sample for f in families for sample in f.samples]
