"""The operator's own Prometheus metrics (prometheus-client), served on the metrics port.

Names follow the Prometheus naming conventions (https://prometheus.io/docs/practices/naming/):
``trtllm_operator_`` prefix, base units in the name (``_seconds``), ``_total`` for counters. Label
values are bounded sets (kinds, results, reasons, stages, verbs, HTTP codes) except the autoscaler
gauges, which carry ``namespace``/``name`` of each autoscaled LLMDeployment (one series per object,
removed when the object is deleted).

All metrics live in :data:`REGISTRY`, not the process-global default registry, so tests can read
them without interference and the dashboard test can list every name the operator exports
(:func:`metric_names`).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

REGISTRY = CollectorRegistry(auto_describe=True)

#: Reconcile durations: most reconciles are a few API calls (tens of ms); builds are not timed here.
_RECONCILE_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
#: Build stages range from seconds (plan) to hours (calibration and compile of a 70B model).
_STAGE_BUCKETS = (1.0, 5.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1200.0, 1800.0, 3600.0, 7200.0, 14400.0)

RECONCILES = Counter(
    "trtllm_operator_reconciles",
    "Reconciles by kind (LLMEngine, LLMDeployment) and result (success, error, invalid).",
    ["kind", "result"],
    registry=REGISTRY,
)
RECONCILE_DURATION = Histogram(
    "trtllm_operator_reconcile_duration_seconds",
    "Wall-clock duration of one reconcile, in seconds.",
    ["kind"],
    buckets=_RECONCILE_BUCKETS,
    registry=REGISTRY,
)
BUILDS = Gauge(
    "trtllm_operator_builds",
    "Builds the operator currently tracks, by state (active = builder Job running, queued = waiting for "
    "the concurrent-build limit).",
    ["state"],
    registry=REGISTRY,
)
BUILDS_FINISHED = Counter(
    "trtllm_operator_builds_finished",
    "Finished builds by result (succeeded, failed) and reason (the builder's failure class, or Succeeded).",
    ["result", "reason"],
    registry=REGISTRY,
)
BUILD_STAGE_DURATION = Histogram(
    "trtllm_operator_build_stage_duration_seconds",
    "Duration of each builder stage (fetch, inspect, plan, quantize, convert, compile, package, report) as "
    "reported by the builder, in seconds.",
    ["stage"],
    buckets=_STAGE_BUCKETS,
    registry=REGISTRY,
)
ENGINE_CACHE_LOOKUPS = Counter(
    "trtllm_operator_engine_cache_lookups",
    "Engine-cache lookups by result: hit (an artifact with the engine key was reused, no build) or miss "
    "(no artifact: a builder Job was started).",
    ["result"],
    registry=REGISTRY,
)
AUTOSCALER_DESIRED_REPLICAS = Gauge(
    "trtllm_operator_autoscaler_desired_replicas",
    "Replicas the built-in autoscaler wants for an LLMDeployment.",
    ["namespace", "name"],
    registry=REGISTRY,
)
AUTOSCALER_CURRENT_REPLICAS = Gauge(
    "trtllm_operator_autoscaler_current_replicas",
    "spec.replicas of an LLMDeployment when the built-in autoscaler last evaluated (not its pods).",
    ["namespace", "name"],
    registry=REGISTRY,
)
AUTOSCALER_DECISIONS = Counter(
    "trtllm_operator_autoscaler_decisions",
    "Autoscaler decisions by reason (the stable reason strings of docs/autoscaling.md).",
    ["reason"],
    registry=REGISTRY,
)
HANDLER_QUEUE = Histogram(
    "trtllm_operator_handler_queue_seconds",
    "Time a synchronous kopf handler waited for a free worker thread before it ran, in seconds.",
    buckets=_RECONCILE_BUCKETS,
    registry=REGISTRY,
)
API_ERRORS = Counter(
    "trtllm_operator_api_errors",
    "Kubernetes API errors by verb (get, list, create, patch, delete, log) and HTTP status code.",
    ["verb", "code"],
    registry=REGISTRY,
)
STATUS_WRITE_REFUSALS = Counter(
    "trtllm_operator_status_write_refusals",
    "Guarded status writes (JSON patches whose test operations check what the decision read) the API "
    "server refused with 422 because a test failed: the object changed since the copy the write was "
    "decided on. By kind; each is followed by a fresh read and a new decision.",
    ["kind"],
    registry=REGISTRY,
)
STATUS_WRITE_FALLBACKS = Counter(
    "trtllm_operator_status_write_fallbacks",
    "Status writes that fell back to a merge patch conditional on resourceVersion after every guarded "
    "attempt was refused, by kind (once per write).",
    ["kind"],
    registry=REGISTRY,
)
RESUMES = Counter(
    "trtllm_operator_resumes",
    "Objects kopf resumed at an operator start, by kind and result: settled (the caches show it "
    "converged and this release's stamp, not reconciled) or reconciled.",
    ["kind", "result"],
    registry=REGISTRY,
)
RESYNCS = Counter(
    "trtllm_operator_resyncs",
    "Reconciles started by the drift resync loops (every object once per period), by kind.",
    ["kind"],
    registry=REGISTRY,
)


def observe_resume(kind: str, *, reconciled: bool) -> None:
    """Count one object of ``kind`` resumed by kopf at start (``trtllm_operator_resumes_total``)."""
    RESUMES.labels(kind=kind, result="reconciled" if reconciled else "settled").inc()


@contextmanager
def observe_reconcile(kind: str) -> Iterator[None]:
    """Count one reconcile of ``kind`` in ``trtllm_operator_reconciles_total`` and time it.

    The result label is ``success`` when the block returns and ``error`` when it raises (the
    exception propagates). Controllers that know a finer result (``invalid``) count themselves.
    """
    started = time.monotonic()
    result = "error"
    try:
        yield
        result = "success"
    finally:
        RECONCILES.labels(kind=kind, result=result).inc()
        RECONCILE_DURATION.labels(kind=kind).observe(time.monotonic() - started)


def metric_names() -> set[str]:
    """Every sample name the operator can export (with ``_total``, ``_bucket``, … suffixes)."""
    names: set[str] = set()
    for family in REGISTRY.collect():
        names.add(family.name)
        for suffix in ("_total", "_created", "_bucket", "_count", "_sum"):
            names.add(family.name + suffix)
    return names
