"""Triton's ``/metrics`` page for one emulated replica: the real families, names, labels and HELP.

Families, label sets and HELP strings are those of Triton ≥ 25.x with the TensorRT-LLM C++ backend
(reference ``tensorrt-llm.md`` §5.1–5.3: tensorrtllm_backend ``custom_metrics_reporter.cc`` and
Triton ``docs/user_guide/metrics.md``): per-model core families for the four models of
``inflight_batcher_llm``, the ``nv_trt_llm_*`` families for ``tensorrt_llm``, the token-length
histograms, per-GPU and CPU families. Values come from :class:`~.model.ReplicaState`.

The families are prometheus-client :class:`~prometheus_client.Metric` objects (a collector a
``CollectorRegistry`` accepts). The page is written by :func:`render`, not by
``prometheus_client.generate_latest``: prometheus-client names a counter family ``<name>_total``
in its ``# HELP``/``# TYPE`` lines (OpenMetrics style), while Triton (prometheus-cpp) writes the bare
name — and the emulator must look exactly like Triton to the parsers that read it.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator, Mapping
from typing import Any

from prometheus_client import Metric

from trtllm_operator.emulator.model import Control, ReplicaState

__all__ = ["TritonCollector", "families", "render"]

MODEL = "tensorrt_llm"
PIPELINE_MODELS = ("ensemble", "preprocessing", "tensorrt_llm", "postprocessing")
TOKEN_BUCKETS = (10, 50, 100, 500, 1000)
GPU_MEMORY_BYTES = 85_520_809_984  # H100 80GB HBM3 as Triton reports it
HOST_MEMORY_BYTES = 2_199_023_255_552


def _metric(name: str, doc: str, typ: str) -> Metric:
    return Metric(name, doc, typ)


def _gauge_group(name: str, doc: str, label: str, values: Mapping[str, float]) -> Metric:
    m = _metric(name, doc, "gauge")
    for key, value in values.items():
        m.add_sample(name, {"model": MODEL, label: key, "version": "1"}, value)
    return m


def families(state: ReplicaState, control: Control, gpu_uuid: str, now: float | None = None) -> list[Metric]:
    """The metric families of one replica, in Triton's order; ``control.omit`` families left out."""
    p = state.profile
    fixed = control.fixed
    waiting = round(fixed.get("waiting", state.waiting))
    active = round(fixed.get("active", state.active))
    pending = round(fixed.get("pending", waiting))
    if "kvCacheUtilization" in fixed:
        used = round(fixed["kvCacheUtilization"] * p.kv_blocks)
    else:
        used = state.kv_used_blocks
    completed = round(state.completed)
    context = min(active, round(state.admitted_last_step))
    input_tokens = completed * p.input_tokens
    output_tokens = completed * p.output_tokens
    timestamp_us = int((time.time() if now is None else now) * 1_000_000)
    out: list[Metric] = []

    m = _metric(
        "nv_inference_request_success", "Number of successful inference requests, all batch sizes", "counter"
    )
    for model in PIPELINE_MODELS:
        m.add_sample(m.name, {"model": model, "version": "1"}, completed)
    out.append(m)
    m = _metric(
        "nv_inference_request_failure", "Number of failed inference requests, all batch sizes", "counter"
    )
    for reason, value in (("REJECTED", round(state.rejected)), ("CANCELED", 0), ("BACKEND", 0), ("OTHER", 0)):
        m.add_sample(m.name, {"model": MODEL, "reason": reason, "version": "1"}, value)
    out.append(m)
    counters = (
        (
            "nv_inference_count",
            "Number of inferences performed (does not include cached requests)",
            completed,
        ),
        (
            "nv_inference_exec_count",
            "Number of model executions performed (does not include cached requests)",
            completed,
        ),
        (
            "nv_inference_request_duration_us",
            "Cumulative inference request duration in microseconds (includes cached requests)",
            round((state.completed * p.request_seconds + state.queue_seconds) * 1e6),
        ),
        (
            "nv_inference_queue_duration_us",
            "Cumulative inference queuing duration in microseconds (includes cached requests)",
            round(state.queue_seconds * 1e6),
        ),
        (
            "nv_inference_compute_input_duration_us",
            "Cumulative compute input duration in microseconds (does not include cached requests)",
            completed * 60,
        ),
        (
            "nv_inference_compute_infer_duration_us",
            "Cumulative compute inference duration in microseconds (does not include cached requests)",
            round(state.completed * p.request_seconds * 1e6),
        ),
        (
            "nv_inference_compute_output_duration_us",
            "Cumulative inference compute output duration in microseconds (does not include cached requests)",
            completed * 20,
        ),
    )
    for name, doc, value in counters:
        m = _metric(name, doc, "counter")
        m.add_sample(name, {"model": MODEL, "version": "1"}, value)
        out.append(m)
    m = _metric(
        "nv_inference_pending_request_count",
        "Instantaneous number of pending requests awaiting execution per-model.",
        "gauge",
    )
    m.add_sample(m.name, {"model": MODEL, "version": "1"}, pending)
    out.append(m)
    out.append(
        _gauge_group(
            "nv_trt_llm_request_metrics",
            "TRT LLM request metrics",
            "request_type",
            {
                "waiting": waiting,
                "context": context,
                "scheduled": active,
                "max": p.max_batch_size,
                "active": active,
            },
        )
    )
    out.append(
        _gauge_group(
            "nv_trt_llm_runtime_memory_metrics",
            "TRT LLM runtime memory metrics",
            "memory_type",
            {"pinned": 4_194_304, "gpu": 1_610_236, "cpu": 0},
        )
    )
    out.append(
        _gauge_group(
            "nv_trt_llm_kv_cache_block_metrics",
            "TRT LLM KV cache block metrics",
            "kv_cache_block_type",
            {
                "fraction": used / p.kv_blocks,
                "reused": 0,
                "tokens_per": p.tokens_per_block,
                "used": used,
                "free": p.kv_blocks - used,
                "max": p.kv_blocks,
            },
        )
    )
    out.append(
        _gauge_group(
            "nv_trt_llm_inflight_batcher_metrics",
            "TRT LLM inflight_batcher-specific metrics",
            "inflight_batcher_specific_metric",
            {
                "paused_requests": 0,
                "micro_batch_id": 0,
                "generation_requests": active - context,
                "total_context_tokens": context * p.input_tokens,
            },
        )
    )
    out.append(
        _gauge_group(
            "nv_trt_llm_general_metrics",
            "General TRT LLM metrics",
            "general_type",
            {"iteration_counter": state.iterations, "timestamp": timestamp_us},
        )
    )
    m = _metric(
        "nv_trt_llm_disaggregated_serving_metrics", "TRT LLM disaggregated serving metrics", "counter"
    )
    for key in ("kv_cache_transfer_ms", "request_count"):
        m.add_sample(m.name, {"disaggregated_serving_type": key, "model": MODEL, "version": "1"}, 0)
    out.append(m)
    for name, kind, tokens in (
        ("nv_llm_input_token_len", "total_input_tokens", p.input_tokens),
        ("nv_llm_output_token_len", "total_output_tokens", p.output_tokens),
    ):
        m = _metric(name, "TRT LLM response metrics", "histogram")
        labels = {"model": MODEL, "response_metric_type": kind, "version": "1"}
        m.add_sample(name + "_count", labels, completed)
        m.add_sample(name + "_sum", labels, input_tokens if kind == "total_input_tokens" else output_tokens)
        for le in TOKEN_BUCKETS:
            m.add_sample(name + "_bucket", {**labels, "le": str(le)}, completed if tokens <= le else 0)
        m.add_sample(name + "_bucket", {**labels, "le": "+Inf"}, completed)
        out.append(m)
    busy = 0.93 if active else 0.0
    gpu = {"gpu_uuid": gpu_uuid}
    gpu_families: tuple[tuple[str, str, float], ...] = (
        ("nv_gpu_utilization", "GPU utilization rate [0.0 - 1.0)", busy),
        ("nv_gpu_memory_total_bytes", "GPU total memory, in bytes", GPU_MEMORY_BYTES),
        ("nv_gpu_memory_used_bytes", "GPU used memory, in bytes", round(GPU_MEMORY_BYTES * 0.937)),
        ("nv_gpu_power_usage", "GPU power usage in watts", 512.3 if active else 71.4),
    )
    for name, doc, reading in gpu_families:
        m = _metric(name, doc, "gauge")
        m.add_sample(name, gpu, reading)
        out.append(m)
    m = _metric("nv_cpu_utilization", "CPU utilization rate [0.0 - 1.0]", "gauge")
    m.add_sample(m.name, {}, 0.11 if active else 0.01)
    out.append(m)
    return [f for f in out if f.name not in control.omit]


def _escape(value: str) -> str:
    """Label-value escaping of the text format: backslash, double quote, line feed."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _labels(labels: Mapping[str, str]) -> str:
    if not labels:
        return ""
    # Triton sorts label names, with a histogram's ``le`` last.
    ordered = sorted(labels.items(), key=lambda kv: (kv[0] == "le", kv[0]))
    return "{" + ",".join(f'{k}="{_escape(v)}"' for k, v in ordered) + "}"


def _value(value: float) -> str:
    """Triton (prometheus-cpp) style: integers without a decimal point, ``+Inf``/``NaN`` spelled out."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if float(value).is_integer() and abs(value) < 2**53:
        return str(int(value))
    return repr(float(value))


def render(metrics: list[Metric]) -> str:
    """Prometheus text format 0.0.4, with bare family names in ``# HELP``/``# TYPE`` (as Triton)."""
    lines: list[str] = []
    for m in metrics:
        lines.append(f"# HELP {m.name} {m.documentation}")
        lines.append(f"# TYPE {m.name} {m.type}")
        lines.extend(f"{s.name}{_labels(s.labels)} {_value(s.value)}" for s in m.samples)
    return "\n".join(lines) + "\n"


class TritonCollector:
    """A prometheus-client collector for one replica (``registry.register(TritonCollector(...))``)."""

    def __init__(self, state: ReplicaState, control: Control, gpu_uuid: str) -> None:
        self.state = state
        self.control = control
        self.gpu_uuid = gpu_uuid

    def collect(self) -> Iterator[Metric]:
        yield from families(self.state, self.control, self.gpu_uuid)

    def describe(self) -> list[Any]:
        return []
