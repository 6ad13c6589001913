"""Parse ``trtllm-bench`` reports (``--report_json``) and the benchmark Job's sweep summary.

**The report** is what ``trtllm-bench … throughput|latency --report_json FILE`` writes:
``json.dumps(ReportUtility.get_statistics_dict())`` (source: NVIDIA/TensorRT-LLM
``tensorrt_llm/bench/dataclasses/reporting.py`` at 0249976575050d2c624a5f285683c66de311a3b7, the
writer in ``tensorrt_llm/bench/benchmark/throughput.py`` at 000a01de66f0eab4ab05640711f0253f50f5209c).
Top-level sections and the keys read here:

* ``engine``: ``model``, ``version`` (TensorRT-LLM), ``backend`` (``TRT`` / ``Pytorch``), ``dtype``,
  ``quantization``, ``kv_cache_dtype``;
* ``world_info``: ``tp_size``, ``pp_size``, ``world_size``, ``max_batch_size``, ``max_num_tokens``
  (the *runtime* limits of the run), ``kv_cache_percentage`` (the free-memory fraction, 0–1);
* ``request_info``: ``num_requests``, ``avg_num_concurrent_requests``, ``avg_input_length``,
  ``avg_output_length`` (tokens);
* ``performance``: ``request_throughput_req_s``, ``system_output_throughput_tok_s`` (output
  tokens/s of the whole world), ``output_throughput_per_gpu_tok_s``, ``avg_request_latency_ms``,
  ``request_latency_percentiles_ms``;
* ``streaming_metrics`` (only with ``--streaming``): ``avg_ttft_ms``, ``avg_tpot_ms``,
  ``ttft_percentiles``, ``tpot_percentiles`` (milliseconds).

Percentile objects are ``PercentileStats`` dumps: ``p50, p90, p95, p99, minimum, maximum,
average`` (``p90`` appeared later: ``tensorrt_llm/bench/dataclasses/statistics.py`` at
77d7fe1eb2d89753ae33a0745d1083c133064f92 has it, 385626572df1… does not), converted to ms.

**The sweep summary** is what the benchmark Job writes to its termination message
(:mod:`trtllm_operator.tuning.bench_script`): ``{"format": "trtllm-operator/bench-sweep/v1",
"results": [{"inputTokens", "outputTokens", "concurrency", "maxBatchSize", "report": <report with
only the keys above>} | {…, "error": "…"}]}``. The same parser reads both.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trtllm_operator.decide.tuning import (
    HEADROOM_FACTOR,
    KNEE_GAIN_FRACTION,
    CurvePoint,
    Knee,
    find_knee,
    recommended_max_batch_size,
)

__all__ = [
    "SWEEP_FORMAT",
    "BenchResult",
    "CurveSummary",
    "Latency",
    "ReportError",
    "compact_report",
    "load_results",
    "parse_report",
    "parse_results",
    "summarize",
]

SWEEP_FORMAT = "trtllm-operator/bench-sweep/v1"

#: Keys of a report kept in the sweep summary (the termination message holds 4096 bytes).
COMPACT_KEYS: dict[str, tuple[str, ...]] = {
    "engine": ("version",),
    "world_info": ("world_size", "max_batch_size", "max_num_tokens"),
    "request_info": ("num_requests", "avg_input_length", "avg_output_length"),
    "performance": ("request_throughput_req_s", "system_output_throughput_tok_s", "avg_request_latency_ms"),
    "streaming_metrics": ("ttft_percentiles", "tpot_percentiles"),
}
#: Floats in the sweep summary keep this many significant digits.
SIGNIFICANT_DIGITS = 4
PERCENTILE_KEYS = ("p50", "p90", "p99")


class ReportError(ValueError):
    """The report is not what trtllm-bench writes; the message names the key."""


@dataclass(frozen=True)
class Latency:
    """Percentiles in milliseconds (p90 may be missing in older reports)."""

    p50: float
    p90: float | None
    p99: float


@dataclass(frozen=True)
class BenchResult:
    """One ``trtllm-bench`` run.

    Token counts are averages per request; throughputs per second; ``concurrency`` is the
    ``--concurrency`` limit of the run (None: unlimited); ``max_batch_size`` the runtime limit.
    ``error`` is set (and the numbers are 0) when the run failed.
    """

    input_tokens: int
    output_tokens: int
    concurrency: int | None
    max_batch_size: int | None
    max_num_tokens: int | None
    output_tokens_per_s: float
    requests_per_s: float
    output_tokens_per_s_per_gpu: float | None
    avg_request_latency_ms: float | None
    ttft_ms: Latency | None
    tpot_ms: Latency | None
    num_requests: int
    tensorrt_llm_version: str | None = None
    error: str | None = None

    def x(self, axis: str) -> float | None:
        """The sweep coordinate: ``concurrency`` or ``maxBatchSize``."""
        value = self.concurrency if axis == "concurrency" else self.max_batch_size
        return None if value is None else float(value)


def _section(report: Mapping[str, Any], name: str, required: bool = True) -> Mapping[str, Any]:
    value = report.get(name)
    if value is None:
        if required:
            raise ReportError(f"report has no '{name}' section (is this a trtllm-bench --report_json file?)")
        return {}
    if not isinstance(value, Mapping):
        raise ReportError(f"report '{name}' must be an object, got {type(value).__name__}")
    return value


def _num(section: Mapping[str, Any], path: str, key: str, *, required: bool = True) -> float | None:
    value = section.get(key)
    if value is None:
        if required:
            raise ReportError(f"report is missing '{path}.{key}'")
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ReportError(f"report '{path}.{key}' must be a finite number, got {value!r}")
    return float(value)


def _latency(section: Mapping[str, Any], path: str, key: str) -> Latency | None:
    value = section.get(key)
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise ReportError(f"report '{path}.{key}' must be an object of percentiles")
    where = f"{path}.{key}"
    p50 = _num(value, where, "p50")
    p99 = _num(value, where, "p99")
    assert p50 is not None and p99 is not None
    return Latency(p50=p50, p90=_num(value, where, "p90", required=False), p99=p99)


def _per_gpu(perf: Mapping[str, Any], world: Mapping[str, Any], total: float) -> float | None:
    """``output_throughput_per_gpu_tok_s``, else total / ``world_info.world_size`` when known."""
    per_gpu = _num(perf, "performance", "output_throughput_per_gpu_tok_s", required=False)
    if per_gpu is not None:
        return per_gpu
    world_size = _num(world, "world_info", "world_size", required=False)
    return total / world_size if world_size else None


def _int(value: float | None) -> int | None:
    return None if value is None else round(value)


def parse_report(
    report: Mapping[str, Any],
    *,
    concurrency: int | None = None,
    input_tokens: int | None = None,
    output_tokens: int | None = None,
) -> BenchResult:
    """A :class:`BenchResult` from one report dict. ``concurrency`` (not in the report) and the
    nominal ISL/OSL come from the caller when known; otherwise ISL/OSL are the report's rounded
    averages. Raises :class:`ReportError` naming the missing or malformed key."""
    if not isinstance(report, Mapping):
        raise ReportError(f"a report must be a JSON object, got {type(report).__name__}")
    perf = _section(report, "performance")
    req = _section(report, "request_info")
    world = _section(report, "world_info", required=False)
    engine = _section(report, "engine", required=False)
    streaming = _section(report, "streaming_metrics", required=False)
    out_tps = _num(perf, "performance", "system_output_throughput_tok_s")
    req_ps = _num(perf, "performance", "request_throughput_req_s")
    assert out_tps is not None and req_ps is not None
    avg_in = _num(req, "request_info", "avg_input_length")
    avg_out = _num(req, "request_info", "avg_output_length")
    assert avg_in is not None and avg_out is not None
    version = engine.get("version")
    return BenchResult(
        input_tokens=input_tokens if input_tokens is not None else round(avg_in),
        output_tokens=output_tokens if output_tokens is not None else round(avg_out),
        concurrency=concurrency if concurrency is not None and concurrency > 0 else None,
        max_batch_size=_int(_num(world, "world_info", "max_batch_size", required=False)),
        max_num_tokens=_int(_num(world, "world_info", "max_num_tokens", required=False)),
        output_tokens_per_s=out_tps,
        requests_per_s=req_ps,
        output_tokens_per_s_per_gpu=_per_gpu(perf, world, out_tps),
        avg_request_latency_ms=_num(perf, "performance", "avg_request_latency_ms", required=False),
        ttft_ms=_latency(streaming, "streaming_metrics", "ttft_percentiles"),
        tpot_ms=_latency(streaming, "streaming_metrics", "tpot_percentiles"),
        num_requests=int(_num(req, "request_info", "num_requests") or 0),
        tensorrt_llm_version=str(version) if version is not None else None,
    )


def _failed(item: Mapping[str, Any]) -> BenchResult:
    c = item.get("concurrency")
    return BenchResult(
        input_tokens=int(item.get("inputTokens") or 0),
        output_tokens=int(item.get("outputTokens") or 0),
        concurrency=int(c) if isinstance(c, int) and c > 0 else None,
        max_batch_size=item.get("maxBatchSize") if isinstance(item.get("maxBatchSize"), int) else None,
        max_num_tokens=None,
        output_tokens_per_s=0.0,
        requests_per_s=0.0,
        output_tokens_per_s_per_gpu=None,
        avg_request_latency_ms=None,
        ttft_ms=None,
        tpot_ms=None,
        num_requests=0,
        error=str(item["error"])[:500],
    )


def parse_results(doc: Any) -> list[BenchResult]:
    """Results from a parsed JSON document: a sweep summary or one bare report.

    In a sweep, a setting's ``maxBatchSize`` (when the sweep set one) overrides the report's
    ``world_info.max_batch_size``. Raises :class:`ReportError`.
    """
    if isinstance(doc, Mapping) and "results" in doc:
        fmt = doc.get("format")
        if fmt != SWEEP_FORMAT:
            raise ReportError(f"unknown sweep format {fmt!r}; expected {SWEEP_FORMAT!r}")
        items = doc["results"]
        if not isinstance(items, list):
            raise ReportError("sweep 'results' must be a list")
        out: list[BenchResult] = []
        for i, item in enumerate(items):
            if not isinstance(item, Mapping):
                raise ReportError(f"sweep results[{i}] must be an object")
            if item.get("error"):
                out.append(_failed(item))
                continue
            try:
                result = parse_report(
                    item.get("report") or {},
                    concurrency=item.get("concurrency"),
                    input_tokens=item.get("inputTokens"),
                    output_tokens=item.get("outputTokens"),
                )
            except ReportError as exc:
                raise ReportError(f"sweep results[{i}]: {exc}") from exc
            mbs = item.get("maxBatchSize")
            if isinstance(mbs, int) and mbs > 0:
                result = _with_batch(result, mbs)
            out.append(result)
        return out
    return [parse_report(doc)]


def _with_batch(result: BenchResult, mbs: int) -> BenchResult:
    from dataclasses import replace  # noqa: PLC0415 - local to this helper

    return replace(result, max_batch_size=mbs)


def load_results(path: str | Path) -> list[BenchResult]:
    """:func:`parse_results` of a JSON file. Raises :class:`ReportError` (also for bad JSON)."""
    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ReportError(f"{path}: cannot read a JSON report: {exc}") from exc
    try:
        return parse_results(doc)
    except ReportError as exc:
        raise ReportError(f"{path}: {exc}") from exc


def _round(value: Any) -> Any:
    if isinstance(value, float) and math.isfinite(value):
        return float(f"{value:.{SIGNIFICANT_DIGITS}g}")
    return value


def compact_report(report: Mapping[str, Any]) -> dict[str, Any]:
    """The subset of a report kept in the sweep summary (the keys in :data:`COMPACT_KEYS`).

    The benchmark Job's script does the same in the container (it cannot import this package);
    ``tests/unit/test_tuning_report.py`` checks that the two agree.
    """
    out: dict[str, Any] = {}
    for section, keys in COMPACT_KEYS.items():
        src = report.get(section)
        if not isinstance(src, Mapping):
            continue
        kept: dict[str, Any] = {}
        for key in keys:
            if key not in src:
                continue
            value = src[key]
            if isinstance(value, Mapping):
                value = {k: _round(value[k]) for k in PERCENTILE_KEYS if k in value}
            kept[key] = _round(value)
        out[section] = kept
    return out


@dataclass(frozen=True)
class CurveSummary:
    """The knee of one ISL/OSL curve and the maxBatchSize it recommends (None without a knee)."""

    input_tokens: int
    output_tokens: int
    axis: str
    points: tuple[CurvePoint, ...]
    knee: Knee | None
    recommended_max_batch_size: int | None
    message: str


def summarize(
    results: Iterable[BenchResult],
    axis: str | None = None,
    *,
    gain_fraction: float = KNEE_GAIN_FRACTION,
    factor: float = HEADROOM_FACTOR,
) -> list[CurveSummary]:
    """One :class:`CurveSummary` per (ISL, OSL), in first-seen order. ``axis``: ``concurrency`` or
    ``maxBatchSize``; by default ``concurrency`` when every successful run has one, else
    ``maxBatchSize``. Failed runs and runs without the axis value are left out."""
    ok = [r for r in results if r.error is None]
    if axis is None:
        axis = "concurrency" if ok and all(r.concurrency for r in ok) else "maxBatchSize"
    if axis not in ("concurrency", "maxBatchSize"):
        raise ValueError(f"axis must be concurrency or maxBatchSize, got {axis!r}")
    groups: dict[tuple[int, int], list[BenchResult]] = {}
    for r in ok:
        groups.setdefault((r.input_tokens, r.output_tokens), []).append(r)
    out: list[CurveSummary] = []
    for (isl, osl), runs in groups.items():
        pts = tuple(
            sorted(
                (CurvePoint(x, r.output_tokens_per_s) for r in runs if (x := r.x(axis)) is not None),
                key=lambda p: p.x,
            )
        )
        knee = find_knee(pts, gain_fraction) if pts else None
        rec = recommended_max_batch_size(knee.x, factor) if knee else None
        if knee is not None:
            msg = (
                f"knee at {axis} {knee.x:g} ({knee.throughput:.0f} output tok/s; more adds "
                f"{knee.gain_after:.1%} < {gain_fraction:.0%}); "
                f"maxBatchSize {rec} = ceil({knee.x:g} × {factor})"
            )
        elif len({p.x for p in pts}) < 2:
            msg = f"fewer than two {axis} values measured: no curve"
        else:
            msg = f"throughput still rises by ≥ {gain_fraction:.0%} at the last point: extend the sweep"
        out.append(CurveSummary(isl, osl, axis, pts, knee, rec, msg))
    return out


def overall_recommendation(curves: Sequence[CurveSummary]) -> int | None:
    """The largest per-workload recommendation (a batch limit that bottlenecks no measured workload)."""
    recs = [c.recommended_max_batch_size for c in curves if c.recommended_max_batch_size]
    return max(recs) if recs else None
