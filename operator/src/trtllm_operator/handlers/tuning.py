"""Tuning: benchmark Jobs for Ready LLMEngines and the KV-cache / batch advisor on LLMDeployments.

Thin shell around :mod:`trtllm_operator.render.benchmark_job` (the Job),
:mod:`trtllm_operator.tuning.report` (the results) and :mod:`trtllm_operator.decide.tuning`
(knee, advisor). Neither part ever writes ``spec``.

**Benchmark** (LLMEngine with ``spec.benchmark``): when the engine is Ready and
``status.benchmark`` does not describe the Job for the current engine key and benchmark spec, the
Job is created (AlreadyExists is fine: the name is deterministic) and ``status.benchmark.phase`` is
Running; when the Job ends, the pod's termination message (the sweep summary) is parsed and the
runs, per-workload knees and the recommended ``maxBatchSize`` are written to ``status.benchmark``
(phase Succeeded; Failed with the reason when the Job failed or the message is not a summary).
Triggered by LLMEngine events, benchmark Job events and a timer.

**Advisor** (LLMDeployment with ``spec.tuning.enabled``): every ``spec.tuning.intervalSeconds``
(timer tick :data:`ADVISOR_TICK_SECONDS`) it samples KV-cache utilization and queue depth — scraping
the ready serving pods' ``/metrics`` with the autoscaler's collector
(:func:`trtllm_operator.metrics.scrape.scrape_pods`), falling back to the autoscaler's last snapshot
in ``status.autoscaling`` — appends the sample to ``status.tuning.history`` (bounded to the window),
runs :func:`~trtllm_operator.decide.tuning.advise` with the previous recommendations (hysteresis) and
writes ``status.recommendations``. A change of recommendations posts an Event.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import math
import time
from collections.abc import Mapping
from typing import Any

import kopf
from kubernetes.client.exceptions import ApiException
from pydantic import ValidationError

from trtllm_operator.api.deployment import LLMDeploymentSpec
from trtllm_operator.api.engine import LLMEngineSpec
from trtllm_operator.api.owners import owner_names
from trtllm_operator.api.wire import (
    COMPONENT_BENCHMARK,
    DEPLOYMENT_PLURAL,
    ENGINE_PLURAL,
    GROUP,
    JOB_NAME_LABEL,
    LABEL_COMPONENT,
    LABEL_DEPLOYMENT,
    LABEL_MANAGED_BY,
    MANAGED_BY,
    VERSION,
)
from trtllm_operator.decide.autoscaling import PodState
from trtllm_operator.decide.compatibility import gpu_product_aliases
from trtllm_operator.decide.conditions import rfc3339
from trtllm_operator.decide.ownership import control_conflict
from trtllm_operator.decide.serving_params import ServingInputError
from trtllm_operator.decide.tuning import (
    AdvisorConfig,
    CurrentSettings,
    Recommendation,
    Sample,
    advise,
    recommendation_from_status,
    recommendation_to_status,
)
from trtllm_operator.handlers.plumbing import OBJECT_LOCKS
from trtllm_operator.kube import (
    JOB,
    LLM_DEPLOYMENT,
    LLM_ENGINE,
    POD,
    Kube,
    default_kube,
    patch_status,
    post_event,
)
from trtllm_operator.metrics.scrape import scrape_triton
from trtllm_operator.render.benchmark_job import BENCH_CONTAINER, benchmark_job_name, desired_benchmark_job
from trtllm_operator.render.serving import child_name, metrics_port
from trtllm_operator.settings import current
from trtllm_operator.tuning.report import ReportError, overall_recommendation, parse_results, summarize

log = logging.getLogger(__name__)

BENCHMARK_RESYNC_SECONDS = 15.0
ADVISOR_TICK_SECONDS = 2.0
#: History rows kept beyond the window (a little slack for clock jitter).
HISTORY_SLACK_SECONDS = 120.0
HISTORY_MAX_ROWS = 2000


def _kube() -> Kube:
    return default_kube(current().field_manager)


# ------------------------------------------------------------------------------------ benchmark
def _job_finished(job: Mapping[str, Any]) -> str | None:
    for cond in (job.get("status") or {}).get("conditions") or []:
        if cond.get("status") == "True" and cond.get("type") in ("Complete", "Failed"):
            return str(cond["type"])
    return None


def _termination_message(kube: Kube, namespace: str, job_name: str) -> str | None:
    pods = kube.list(POD, namespace, label_selector=f"{JOB_NAME_LABEL}={job_name}")
    for pod in sorted(pods, key=lambda p: p["metadata"].get("creationTimestamp") or "", reverse=True):
        for cs in (pod.get("status") or {}).get("containerStatuses") or []:
            if cs.get("name") != BENCH_CONTAINER:
                continue
            message = ((cs.get("state") or {}).get("terminated") or {}).get("message")
            if message:
                return str(message)
    return None


def _lat(value: Any) -> dict[str, float | None] | None:
    if value is None:
        return None
    return {"p50": value.p50, "p90": value.p90, "p99": value.p99}


def benchmark_results_status(message: str, sweep: str) -> dict[str, Any]:
    """``status.benchmark`` fields from a termination message (the sweep summary).

    Raises :class:`~trtllm_operator.tuning.report.ReportError` when the message is not one.
    """
    try:
        doc = json.loads(message)
    except ValueError as exc:
        raise ReportError(f"the termination message is not JSON: {message[-300:]!r}") from exc
    results = parse_results(doc)
    curves = summarize(results, sweep)
    runs = [
        {
            "inputTokens": r.input_tokens,
            "outputTokens": r.output_tokens,
            "concurrency": r.concurrency,
            "maxBatchSize": r.max_batch_size,
            "outputTokensPerSecond": r.output_tokens_per_s if r.error is None else None,
            "outputTokensPerSecondPerGPU": r.output_tokens_per_s_per_gpu,
            "requestsPerSecond": r.requests_per_s if r.error is None else None,
            "ttftMs": _lat(r.ttft_ms),
            "tpotMs": _lat(r.tpot_ms),
            "error": r.error,
        }
        for r in results
    ]
    recommended = overall_recommendation(curves)
    versions = {r.tensorrt_llm_version for r in results if r.tensorrt_llm_version}
    return {
        "runs": [{k: v for k, v in run.items() if v is not None} for run in runs],
        "curves": [
            {
                "inputTokens": c.input_tokens,
                "outputTokens": c.output_tokens,
                "knee": c.knee.x if c.knee else None,
                "kneeOutputTokensPerSecond": c.knee.throughput if c.knee else None,
                "recommendedMaxBatchSize": c.recommended_max_batch_size,
                "message": c.message,
            }
            for c in curves
        ],
        "recommendedMaxBatchSize": recommended,
        "tensorrtLLMVersion": sorted(versions)[0] if versions else None,
        "message": (
            f"recommended maxBatchSize {recommended} (knee + 25 %); advice only, spec is not changed"
            if recommended
            else "no knee found: " + "; ".join(c.message for c in curves)
        ),
    }


def _write_benchmark(kube: Kube, namespace: str, name: str, fields: Mapping[str, Any]) -> None:
    def mutate(obj: dict[str, Any]) -> dict[str, Any]:
        return {"benchmark": dict(fields)}

    patch_status(kube, LLM_ENGINE, namespace, name, mutate)


def reconcile_benchmark(namespace: str, name: str, *, kube: Kube | None = None) -> str | None:
    """One pass of the benchmark controller for an LLMEngine; returns the phase written (or None)."""
    kube = kube or _kube()
    with OBJECT_LOCKS.hold("benchmark", namespace, name):
        engine = kube.get(LLM_ENGINE, namespace, name)
        if engine is None:
            return None
        status = engine.get("status") or {}
        try:
            spec = LLMEngineSpec.model_validate(engine.get("spec") or {})
        except ValidationError:
            return None  # the engine controller reports a malformed spec
        bench = spec.benchmark
        key = status.get("engineKey")
        if bench is None or status.get("phase") != "Ready" or not key:
            return None
        job_name = benchmark_job_name(str(key), bench)
        current_status = status.get("benchmark") or {}
        if current_status.get("jobName") == job_name and current_status.get("phase") in (
            "Succeeded",
            "Failed",
        ):
            return None
        base = {"engineKey": key, "jobName": job_name, "mode": bench.mode, "sweep": bench.sweep}
        job = kube.get(JOB, namespace, job_name)
        if job is None:
            product = spec.gpu.product
            try:
                manifest = desired_benchmark_job(engine, current(), [product, *gpu_product_aliases(product)])
            except (ServingInputError, ValueError) as exc:
                _write_benchmark(kube, namespace, name, {**base, "phase": "Failed", "message": str(exc)})
                return "Failed"
            job, created = kube.create_or_get(JOB, namespace, manifest)
            if created:
                post_event(kube, engine, "BenchmarkStarted", f"trtllm-bench Job {job_name} started")
        conflict = control_conflict(job, "Job", engine["metadata"]["uid"])
        if conflict is not None:  # someone else's Job under the benchmark's name: never read it
            refused = conflict.message(LLM_ENGINE.kind)
            _write_benchmark(kube, namespace, name, {**base, "phase": "Failed", "message": refused})
            return "Failed"
        finished = _job_finished(job)
        if finished is None:
            if current_status.get("jobName") != job_name or current_status.get("phase") != "Running":
                cleared = {"runs": None, "curves": None, "recommendedMaxBatchSize": None, "message": None}
                _write_benchmark(kube, namespace, name, {**base, **cleared, "phase": "Running"})
            return "Running"
        message = _termination_message(kube, namespace, job_name)
        done = {**base, "completionTime": rfc3339(dt.datetime.now(dt.UTC))}
        try:
            if message is None:
                raise ReportError("the benchmark pod left no termination message")
            results = benchmark_results_status(message, bench.sweep)
        except ReportError as exc:
            why = "the benchmark Job failed" if finished == "Failed" else "the benchmark Job completed"
            _write_benchmark(kube, namespace, name, {**done, "phase": "Failed", "message": f"{why}: {exc}"})
            post_event(kube, engine, "BenchmarkFailed", f"{why}: {exc}", type_="Warning")
            return "Failed"
        _write_benchmark(kube, namespace, name, {**done, **results, "phase": "Succeeded"})
        post_event(kube, engine, "BenchmarkSucceeded", str(results["message"]))
        return "Succeeded"


def _safe_benchmark(namespace: str | None, name: str | None) -> None:
    if not namespace or not name:
        return
    try:
        reconcile_benchmark(namespace, name)
    except ApiException as exc:
        log.warning(
            "benchmark of %s/%s: %s (retrying on the next event or timer)", namespace, name, exc.reason
        )


def _has_benchmark(spec: Mapping[str, Any], **_: Any) -> bool:
    return bool(spec.get("benchmark"))


@kopf.on.event(GROUP, VERSION, ENGINE_PLURAL, when=_has_benchmark)
def benchmark_engine_event(*, namespace: str | None, name: str | None, **_: Any) -> None:
    """An LLMEngine with ``spec.benchmark`` changed (e.g. became Ready)."""
    _safe_benchmark(namespace, name)


@kopf.timer(
    GROUP,
    VERSION,
    ENGINE_PLURAL,
    when=_has_benchmark,
    interval=BENCHMARK_RESYNC_SECONDS,
    initial_delay=BENCHMARK_RESYNC_SECONDS,
)
def benchmark_resync(*, namespace: str | None, name: str | None, **_: Any) -> None:
    """Drift: a Job deleted behind the operator's back, a missed event."""
    _safe_benchmark(namespace, name)


@kopf.on.event(
    JOB.group,
    JOB.version,
    JOB.plural,
    labels={LABEL_COMPONENT: COMPONENT_BENCHMARK, LABEL_MANAGED_BY: MANAGED_BY},
)
def benchmark_job_event(*, body: kopf.Body, namespace: str | None, **_: Any) -> None:
    """A benchmark Job changed: reconcile its LLMEngine."""
    for owner in owner_names(body, LLM_ENGINE.kind):
        _safe_benchmark(namespace, owner)


# -------------------------------------------------------------------------------------- advisor
def advisor_config(tuning: Any) -> AdvisorConfig:
    """:class:`AdvisorConfig` from ``spec.tuning`` (clear thresholds 5 points inside, never crossing)."""
    mid = (tuning.low_threshold + tuning.high_threshold) / 2
    return AdvisorConfig(
        window_seconds=float(tuning.window_seconds),
        high=tuning.high_threshold,
        high_clear=max(tuning.high_threshold - 0.05, mid),
        low=tuning.low_threshold,
        low_clear=min(tuning.low_threshold + 0.05, mid),
    )


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def sample_deployment(kube: Kube, deployment: Mapping[str, Any], now: float) -> Sample:
    """One sample: mean KV utilization and queue depth over the ready serving pods (scraped), else
    the autoscaler's last snapshot in ``status.autoscaling``."""
    meta = deployment["metadata"]
    status = deployment.get("status") or {}
    selector = status.get("selector") or f"{LABEL_DEPLOYMENT}={child_name(meta['name'])}"
    pods = kube.list(POD, meta["namespace"], label_selector=selector)
    api = str(((deployment.get("spec") or {}).get("server") or {}).get("api") or "triton")
    pages = [
        s
        for state, s in scrape_triton(pods, port=metrics_port(api))
        if state == PodState.READY and s.kv_cache_utilization is not None
    ]
    if pages:
        kv = _mean([float(s.kv_cache_utilization or 0.0) for s in pages])
        # The backend's ``waiting`` gauge (active − scheduled: admitted, not scheduled — KV pressure).
        queue = _mean([float(s.waiting) for s in pages if s.waiting is not None])
        return Sample(now, kv, queue, len(pages))
    auto = status.get("autoscaling") or {}
    kv_snap = auto.get("kvCacheUtilization")
    return Sample(
        now,
        float(kv_snap) if isinstance(kv_snap, int | float) else None,
        None,  # the autoscaler's status carries no waiting count
        status.get("readyReplicas"),
    )


def _history(status: Mapping[str, Any]) -> list[Sample]:
    rows = ((status.get("tuning") or {}).get("history")) or []
    out = []
    for row in rows:
        if not isinstance(row, list) or len(row) < 4:
            continue
        t, kv, q, r = (float(x) for x in row[:4])
        out.append(Sample(t, kv if kv >= 0 else None, q if q >= 0 else None, int(r) if r >= 0 else None))
    return out


def _row(s: Sample) -> list[float]:
    def v(x: float | None) -> float:
        return -1.0 if x is None or not math.isfinite(x) else round(float(x), 4)

    return [round(s.time, 3), v(s.kv_cache_utilization), v(s.queue_depth_per_replica), v(s.replicas)]


def _engine_limits(kube: Kube, namespace: str, engine_name: str) -> tuple[int | None, int | None]:
    engine = kube.get(LLM_ENGINE, namespace, engine_name) or {}
    build = ((engine.get("spec") or {}).get("build")) or {}
    rec = (((engine.get("status") or {}).get("plan") or {}).get("recommended")) or {}
    return (
        build.get("maxBatchSize") or rec.get("maxBatchSize"),
        build.get("maxNumTokens") or rec.get("maxNumTokens"),
    )


def reconcile_advisor(
    namespace: str, name: str, *, kube: Kube | None = None, now: float | None = None
) -> bool:
    """One advisor step for an LLMDeployment; returns whether it evaluated (False: disabled or not
    due yet)."""
    kube = kube or _kube()
    now = time.time() if now is None else now
    with OBJECT_LOCKS.hold("advisor", namespace, name):
        obj = kube.get(LLM_DEPLOYMENT, namespace, name)
        if obj is None:
            return False
        try:
            spec = LLMDeploymentSpec.model_validate(obj.get("spec") or {})
        except ValidationError:
            return False
        tuning = spec.tuning
        status = obj.get("status") or {}
        last = (status.get("tuning") or {}).get("lastEvaluationUnix")
        if not tuning.enabled or (
            isinstance(last, int | float) and now - last < tuning.interval_seconds - 0.05
        ):
            return False
        cfg = advisor_config(tuning)
        sample = sample_deployment(kube, obj, now)
        keep_from = now - cfg.window_seconds - HISTORY_SLACK_SECONDS
        history = [s for s in _history(status) if s.time >= keep_from] + [sample]
        history = history[-HISTORY_MAX_ROWS:]
        max_bs, max_tokens = _engine_limits(kube, namespace, spec.engine_ref.name)
        settings = CurrentSettings(
            kv_cache_free_gpu_mem_fraction=spec.server.kv_cache_free_gpu_mem_fraction,
            replicas=spec.replicas,
            max_batch_size=max_bs,
            max_num_tokens=max_tokens,
            autoscaling_enabled=spec.autoscaling.enabled,
            max_replicas=spec.autoscaling.max_replicas,
        )
        previous = [
            r
            for r in (recommendation_from_status(i) for i in status.get("recommendations") or [])
            if r is not None
        ]
        recs = advise(history, settings, previous, now=now, config=cfg)
        in_window = [
            s for s in history if s.time >= now - cfg.window_seconds and s.kv_cache_utilization is not None
        ]
        message = (
            None
            if recs or len(in_window) >= cfg.min_samples
            else f"collecting: {len(in_window)} KV-cache samples in the window, {cfg.min_samples} needed"
        )
        if sample.kv_cache_utilization is None:
            message = "no KV-cache utilization signal from the serving pods or status.autoscaling"
        new_items = [recommendation_to_status(r) for r in recs]

        def mutate(fresh: dict[str, Any]) -> dict[str, Any]:
            return {
                "recommendations": new_items,
                "tuning": {
                    "history": [_row(s) for s in history],
                    "lastEvaluationUnix": now,
                    "message": message,
                },
            }

        patch_status(kube, LLM_DEPLOYMENT, namespace, name, mutate)
        before = sorted(r.type for r in previous)
        after = sorted(r.type for r in recs)
        if before != after:
            text = "; ".join(r.message for r in recs) or "no tuning recommendation any more"
            post_event(kube, obj, "TuningRecommendation", text[:1000])
        return True


def _tuning_enabled(spec: Mapping[str, Any], **_: Any) -> bool:
    return bool((spec.get("tuning") or {}).get("enabled"))


@kopf.timer(GROUP, VERSION, DEPLOYMENT_PLURAL, when=_tuning_enabled, interval=ADVISOR_TICK_SECONDS)
def advisor_tick(*, namespace: str | None, name: str | None, **_: Any) -> None:
    """Sample and evaluate when ``spec.tuning.intervalSeconds`` has passed."""
    if not namespace or not name:
        return
    try:
        reconcile_advisor(namespace, name)
    except ApiException as exc:
        log.warning("tuning advisor for %s/%s: %s", namespace, name, exc.reason)


__all__ = [
    "Recommendation",
    "advisor_config",
    "benchmark_results_status",
    "reconcile_advisor",
    "reconcile_benchmark",
    "sample_deployment",
]
