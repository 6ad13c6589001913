"""Triton's ``/metrics`` page for one emulated replica: the real families, names, labels and HELP.

Families, label sets and HELP strings are those of Triton ≥ 25.x with the TensorRT-LLM C++ backend.
The core and ``nv_trt_llm_*`` families and their values come from the one upstream-faithful
exposition the simulator uses too (:mod:`trtllm_operator.metrics.exposition`: ``active`` capped at
``max``, ``waiting = active − scheduled``, the executor's queue not exported, pending 0), applied to
:class:`~.model.ReplicaState` by :func:`internals`, token-length histograms included; this module adds
the disaggregated-serving, per-GPU and CPU families (reference ``tensorrt-llm.md`` §5.1–5.3).

The families are prometheus-client :class:`~prometheus_client.Metric` objects (a collector a
``CollectorRegistry`` accepts). The page is written by :func:`render`, not by
``prometheus_client.generate_latest``: prometheus-client names a counter family ``<name>_total``
in its ``# HELP``/``# TYPE`` lines (OpenMetrics style), while Triton (prometheus-cpp) writes the bare
name — and the emulator must look exactly like Triton to the parsers that read it.
"""

from __future__ import annotations

import bisect
import math
import time
from collections.abc import Iterator, Mapping
from typing import Any

from prometheus_client import Metric

from trtllm_operator.emulator.model import Control, ReplicaState
from trtllm_operator.metrics.exposition import (
    PIPELINE_MODELS,
    TOKEN_LENGTH_BUCKETS,
    TRTLLM_MODEL,
    ReplicaInternals,
    TokenHistogram,
    exposition,
)

__all__ = ["PIPELINE_MODELS", "TritonCollector", "families", "internals", "render"]

MODEL = TRTLLM_MODEL
GPU_MEMORY_BYTES = 85_520_809_984  # H100 80GB HBM3 as Triton reports it
HOST_MEMORY_BYTES = 2_199_023_255_552


def _metric(name: str, doc: str, typ: str) -> Metric:
    return Metric(name, doc, typ)


def _gauge_group(name: str, doc: str, label: str, values: Mapping[str, float]) -> Metric:
    m = _metric(name, doc, "gauge")
    for key, value in values.items():
        m.add_sample(name, {"model": MODEL, label: key, "version": "1"}, value)
    return m


def internals(state: ReplicaState, control: Control, now: float | None = None) -> ReplicaInternals:
    """The replica's internal state as :func:`~trtllm_operator.metrics.exposition.exposition` reads it.

    The load model's queue plus its running sequences are the requests the executor holds; the
    running sequences are this iteration's batch (``scheduled``); ``max`` is ``max_batch_size``.
    ``control.fixed`` pins ``requests`` and/or ``scheduled`` (the batcher schedules what fits,
    ``min(requests, max_active)``, unless pinned; never more than ``max_batch_size`` or ``requests``)
    and ``kvCacheUtilization``.
    """
    p = state.profile
    fixed = control.fixed
    requests = round(fixed.get("requests", state.waiting + state.active))
    if "scheduled" in fixed:
        scheduled = round(fixed["scheduled"])
    elif "requests" in fixed:
        scheduled = min(requests, p.max_active)
    else:
        scheduled = round(state.active)
    scheduled = min(scheduled, requests, p.max_batch_size)
    if "kvCacheUtilization" in fixed:
        used = round(fixed["kvCacheUtilization"] * p.kv_blocks)
    else:
        used = state.kv_used_blocks
    context = min(scheduled, round(state.admitted_last_step))
    completed = round(state.completed)
    # Every request of the load model has the profile's lengths.
    input_tokens, output_tokens = TokenHistogram(), TokenHistogram()
    for histogram, tokens in ((input_tokens, p.input_tokens), (output_tokens, p.output_tokens)):
        histogram.counts[bisect.bisect_left(TOKEN_LENGTH_BUCKETS, tokens)] = completed
        histogram.sum_tokens = float(completed * tokens)
    return ReplicaInternals(
        requests=requests,
        scheduled=scheduled,
        context=context,
        context_tokens=context * p.input_tokens,
        max_active=p.max_batch_size,
        kv_used_blocks=used,
        kv_max_blocks=p.kv_blocks,
        tokens_per_block=p.tokens_per_block,
        completed=completed,
        failed=round(state.rejected),
        latency_s_total=state.completed * p.request_seconds + state.queue_seconds,
        iteration=state.iterations,
        timestamp_us=int((time.time() if now is None else now) * 1_000_000),
        input_tokens=input_tokens,
        output_tokens=output_tokens,
    )


#: Triton core's pinned-memory and CPU families, after the per-model ones (the real 2.51 server's
#: page, tests/fixtures/triton_metrics_cpu_standin_partial.txt): name, HELP, value.
_PINNED_FAMILIES = (
    ("nv_pinned_memory_pool_total_bytes", "Pinned memory pool total memory size, in bytes", 268_435_456),
    ("nv_pinned_memory_pool_used_bytes", "Pinned memory pool used memory size, in bytes", 0),
)
_CPU_MEMORY_FAMILIES = (
    ("nv_cpu_memory_total_bytes", "CPU total memory (RAM), in bytes", HOST_MEMORY_BYTES),
    ("nv_cpu_memory_used_bytes", "CPU used memory (RAM), in bytes", HOST_MEMORY_BYTES // 8),
)


def _gauges(rows: tuple[tuple[str, str, float], ...]) -> list[Metric]:
    out = []
    for name, doc, value in rows:
        m = _metric(name, doc, "gauge")
        m.add_sample(name, {}, value)
        out.append(m)
    return out


def _host_families(gpu_uuid: str, *, busy: bool) -> list[Metric]:
    """Triton core's server-wide families, between the per-model and the backend's families: pinned
    memory, then per GPU, then CPU — the order of Triton core's own metrics test page
    (triton-inference-server/core ``src/metrics.cc``; pinned total 268,435,456 = the default
    ``--pinned-memory-pool-byte-size``) and of the real 2.51 server's page on this machine (which has
    no GPU, so no GPU families)."""
    out = _gauges(_PINNED_FAMILIES)
    gpu_families: tuple[tuple[str, str, float], ...] = (
        ("nv_gpu_utilization", "GPU utilization rate [0.0 - 1.0)", 0.93 if busy else 0.0),
        ("nv_gpu_memory_total_bytes", "GPU total memory, in bytes", GPU_MEMORY_BYTES),
        ("nv_gpu_memory_used_bytes", "GPU used memory, in bytes", round(GPU_MEMORY_BYTES * 0.937)),
        ("nv_gpu_power_usage", "GPU power usage in watts", 512.3 if busy else 71.4),
    )
    for name, doc, reading in gpu_families:
        m = _metric(name, doc, "gauge")
        m.add_sample(name, {"gpu_uuid": gpu_uuid}, reading)
        out.append(m)
    out += _gauges((("nv_cpu_utilization", "CPU utilization rate [0.0 - 1.0]", 0.11 if busy else 0.01),))
    return out + _gauges(_CPU_MEMORY_FAMILIES)


def families(state: ReplicaState, control: Control, gpu_uuid: str, now: float | None = None) -> list[Metric]:
    """The metric families of one replica, in Triton's order; ``control.omit`` families left out.

    The Triton core and ``nv_trt_llm_*`` families are the shared upstream-faithful exposition
    (:func:`trtllm_operator.metrics.exposition.exposition`) of :func:`internals`, token-length
    histograms included; the emulator adds the disaggregated-serving, GPU and CPU families.
    """
    s = internals(state, control, now)
    active = s.active
    out: list[Metric] = []
    for family in exposition(s):
        if family.name == "nv_trt_llm_inflight_batcher_metrics":
            # The reporter registers the disaggregated-serving group before the model-type one
            # (custom_metrics_reporter.cc InitializeReporter).
            m = _metric(
                "nv_trt_llm_disaggregated_serving_metrics", "TRT LLM disaggregated serving metrics", "counter"
            )
            for key in ("kv_cache_transfer_ms", "request_count"):
                m.add_sample(m.name, {"disaggregated_serving_type": key, "model": MODEL, "version": "1"}, 0)
            out.append(m)
        m = _metric(family.name, family.documentation, family.type)
        for name, labels, value in family.samples:
            m.add_sample(name, dict(labels), value)
        out.append(m)
        if family.name == "nv_inference_pending_request_count":
            out += _host_families(gpu_uuid, busy=bool(active))
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
