"""Tuning decisions: the throughput knee, the recommended ``maxBatchSize``, and the KV-cache advisor.

Pure: numbers in, numbers out; no client, no clock (``now`` is an argument). See docs/tuning.md for
the method and its sources.

**Knee** (:func:`find_knee`). Points are (x, output tokens/s) of a sweep, x being the concurrency
or the runtime ``max_batch_size`` of each ``trtllm-bench`` run. The knee is the smallest x whose
throughput is within :data:`KNEE_GAIN_FRACTION` (10 %) of *everything measured after it*:
``max(throughput after x) < throughput(x) × 1.10`` — more batch beyond it buys less than 10 %
throughput (and costs latency). Comparing with the maximum of all later points, not only the next
one, keeps a noisy dip from ending the curve early. A curve still rising by ≥ 10 % at its last
point has no knee in the sweep (extend the sweep); a flat curve has its knee at the first point.
Repeated x values are averaged (repeated runs).

**Recommended maxBatchSize** = ``ceil(knee × 1.25)``: TensorRT-LLM's tuning workflow sets
``max_batch_size`` 20–30 % above the knee (issue 14's statement of the rule; NVIDIA's
"Tuning Max Batch Size and Max Num Tokens" guide only says to set it high enough not to bottleneck
throughput and to tune it at runtime) — :data:`HEADROOM_FACTOR` is the middle of that band.

**Advisor** (:func:`advise`) reads a KV-cache utilization history (fractions 0–1, averaged over the
ready replicas, one sample per scrape) and the queue depth per replica:

* *sustained high* — at least :attr:`AdvisorConfig.sustain_fraction` (80 %) of the samples of the
  window above ``high`` (0.80): ``KVCacheHigh`` — raise ``maxNumTokens`` or lower ``maxBatchSize``
  (the published rule), by the ratio that brings the median back to ``target_utilization``; plus
  one capacity action: ``AddReplicas`` when requests also queue (median queue depth per replica ≥
  ``queue_threshold``: demand exceeds what the fleet holds, a bigger KV pool on the same GPUs adds
  a few percent at most), else ``RaiseKVCacheFraction`` by 0.05 while the fraction is below
  ``max_kv_fraction`` (0.95), else ``AddReplicas``.
* *sustained low* — 80 % of the samples below ``low`` (0.50): ``KVCacheLow`` — shrink
  ``kvCacheFreeGpuMemFraction`` so that the window's p90 lands on the target, which frees memory
  for larger batches (``maxBatchSize`` × 1.25 when it is known).

**Hysteresis**, so that recommendations do not flip-flop: a recommendation is *raised* by the
sustained condition above and *cleared* only when fewer than ``clear_fraction`` (50 %) of the
samples are beyond a threshold 5 points inside the raising one (0.75 for high, 0.55 for low);
between the two the previous state stands. The AddReplicas/RaiseKVCacheFraction choice is sticky
too (the queue must fall below half / rise above 1.5 × the threshold to switch), amounts are
quantized and kept while the new value is within 10 % of the previous one, and a window with too
few samples changes nothing.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

__all__ = [
    "HEADROOM_FACTOR",
    "KNEE_GAIN_FRACTION",
    "AdvisorConfig",
    "Change",
    "CurrentSettings",
    "CurvePoint",
    "Evidence",
    "Knee",
    "Recommendation",
    "Sample",
    "advise",
    "find_knee",
    "recommendation_from_status",
    "recommendation_to_status",
    "recommended_max_batch_size",
]

#: Beyond the knee, all further batch adds less than this fraction of throughput.
KNEE_GAIN_FRACTION = 0.10
#: maxBatchSize = knee × this (20–30 % above the knee; the middle of the band).
HEADROOM_FACTOR = 1.25

KV_HIGH = "KVCacheHigh"
KV_LOW = "KVCacheLow"
ADD_REPLICAS = "AddReplicas"
RAISE_KV_FRACTION = "RaiseKVCacheFraction"

FIELD_MAX_BATCH_SIZE = "LLMEngine spec.build.maxBatchSize"
FIELD_MAX_NUM_TOKENS = "LLMEngine spec.build.maxNumTokens"
FIELD_KV_FRACTION = "spec.server.kvCacheFreeGpuMemFraction"
FIELD_REPLICAS = "spec.replicas"
FIELD_MAX_REPLICAS = "spec.autoscaling.maxReplicas"


# ------------------------------------------------------------------------------------------- knee
@dataclass(frozen=True)
class CurvePoint:
    """One sweep point: ``x`` (concurrency or max batch size, sequences) and output tokens/s."""

    x: float
    throughput: float


@dataclass(frozen=True)
class Knee:
    """The knee of a throughput curve.

    ``x`` / ``throughput``: the knee point; ``peak_x`` / ``peak_throughput``: the best point
    measured; ``gain_after``: relative gain of the best later point over the knee (< the gain
    fraction by definition; 0 when the knee is the last point of a flat tail).
    """

    x: float
    throughput: float
    peak_x: float
    peak_throughput: float
    gain_after: float


def _merge(points: Iterable[CurvePoint]) -> list[CurvePoint]:
    by_x: dict[float, list[float]] = {}
    for i, p in enumerate(points):
        if not math.isfinite(p.x) or p.x <= 0:
            raise ValueError(f"point {i}: x (batch size / concurrency) must be a positive number, got {p.x}")
        if not math.isfinite(p.throughput) or p.throughput < 0:
            raise ValueError(f"point {i}: throughput must be a non-negative number, got {p.throughput}")
        by_x.setdefault(p.x, []).append(p.throughput)
    return [CurvePoint(x, sum(v) / len(v)) for x, v in sorted(by_x.items())]


def find_knee(points: Iterable[CurvePoint], gain_fraction: float = KNEE_GAIN_FRACTION) -> Knee | None:
    """The knee of ``points`` (see the module docstring), or None when the curve is still rising
    at its last point or has fewer than two distinct x. Raises ValueError on a bad point or a
    ``gain_fraction`` outside (0, 1)."""
    if not 0 < gain_fraction < 1:
        raise ValueError(f"gain_fraction must be in (0, 1), got {gain_fraction}")
    curve = _merge(points)
    if len(curve) < 2:
        return None
    peak = max(curve, key=lambda p: p.throughput)
    for i, p in enumerate(curve[:-1]):
        best_after = max(q.throughput for q in curve[i + 1 :])
        if best_after < p.throughput * (1 + gain_fraction):
            gain = (best_after - p.throughput) / p.throughput if p.throughput > 0 else 0.0
            return Knee(p.x, p.throughput, peak.x, peak.throughput, max(gain, 0.0))
    return None


def recommended_max_batch_size(knee_x: float, factor: float = HEADROOM_FACTOR) -> int:
    """``ceil(knee_x × factor)`` sequences (at least 1). Raises ValueError for factor < 1."""
    if factor < 1:
        raise ValueError(f"factor must be >= 1 (headroom above the knee), got {factor}")
    return max(1, math.ceil(round(knee_x * factor, 6)))


# ---------------------------------------------------------------------------------------- advisor
@dataclass(frozen=True)
class Sample:
    """One observation: ``time`` (Unix seconds), KV-cache utilization (0–1, mean over ready
    replicas), waiting requests per ready replica (the backend's ``waiting`` gauge = active −
    scheduled: admitted but not in the iteration's batch, mostly a full KV cache; not the executor's
    queue, which Triton does not export — tensorrtllm_backend v0.19.0 ``model_instance_state.cc``
    ``WaitForStats()``), ready replicas. Missing values are None."""

    time: float
    kv_cache_utilization: float | None
    queue_depth_per_replica: float | None = None
    replicas: int | None = None


@dataclass(frozen=True)
class AdvisorConfig:
    """Thresholds (fractions 0–1 unless stated) and the window (seconds)."""

    window_seconds: float = 1800.0
    min_samples: int = 10
    #: The samples must span at least this share of the window.
    min_coverage: float = 0.8
    high: float = 0.80
    high_clear: float = 0.75
    low: float = 0.50
    low_clear: float = 0.55
    sustain_fraction: float = 0.8
    clear_fraction: float = 0.5
    #: Waiting requests per replica that count as "requests queue".
    queue_threshold: float = 1.0
    target_utilization: float = 0.70
    max_kv_fraction: float = 0.95
    min_kv_fraction: float = 0.30
    kv_fraction_step: float = 0.05
    #: A new amount replaces the previous one only when it differs by more than this (relative).
    amount_tolerance: float = 0.10

    def __post_init__(self) -> None:
        if not 0 < self.low < self.low_clear <= self.high_clear < self.high < 1:
            raise ValueError(
                "thresholds must satisfy 0 < low < lowClear <= highClear < high < 1, got "
                f"low={self.low} lowClear={self.low_clear} highClear={self.high_clear} high={self.high}"
            )
        if self.window_seconds <= 0 or self.min_samples < 1:
            raise ValueError("windowSeconds must be > 0 and minSamples >= 1")


@dataclass(frozen=True)
class CurrentSettings:
    """What the deployment runs now. Unknown engine limits are None."""

    kv_cache_free_gpu_mem_fraction: float
    replicas: int
    max_batch_size: int | None = None
    max_num_tokens: int | None = None
    autoscaling_enabled: bool = False
    max_replicas: int | None = None


@dataclass(frozen=True)
class Change:
    """One field to change: where (``field``), from ``current`` to ``recommended``."""

    field: str
    current: float | None
    recommended: float


@dataclass(frozen=True)
class Evidence:
    """What a recommendation rests on: window (s), samples, KV utilization percentiles, the share
    of samples above ``high`` / below ``low``, the median queue depth per replica."""

    window_seconds: float
    samples: int
    kv_p10: float
    kv_p50: float
    kv_p90: float
    fraction_above_high: float
    fraction_below_low: float
    queue_p50: float | None


@dataclass(frozen=True)
class Recommendation:
    """What to change and why. ``since``: Unix time it was first raised (kept across updates)."""

    type: str
    message: str
    changes: tuple[Change, ...]
    evidence: Evidence
    since: float = 0.0
    alternatives: tuple[str, ...] = field(default=())


def _percentile(sorted_values: Sequence[float], q: float) -> float:
    """Linear-interpolated percentile of sorted values, q in [0, 1]."""
    if len(sorted_values) == 1:
        return sorted_values[0]
    pos = q * (len(sorted_values) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def _window(samples: Iterable[Sample], now: float, cfg: AdvisorConfig) -> list[Sample] | None:
    start = now - cfg.window_seconds
    kept = [
        s
        for s in samples
        if start <= s.time <= now
        and s.kv_cache_utilization is not None
        and math.isfinite(s.kv_cache_utilization)
    ]
    if len(kept) < cfg.min_samples:
        return None
    span = max(s.time for s in kept) - min(s.time for s in kept)
    if span < cfg.min_coverage * cfg.window_seconds:
        return None
    return kept


def _evidence(window: Sequence[Sample], cfg: AdvisorConfig) -> Evidence:
    kv = sorted(float(s.kv_cache_utilization or 0.0) for s in window)
    queue = sorted(float(s.queue_depth_per_replica) for s in window if s.queue_depth_per_replica is not None)
    n = len(kv)
    return Evidence(
        window_seconds=cfg.window_seconds,
        samples=n,
        kv_p10=round(_percentile(kv, 0.10), 4),
        kv_p50=round(_percentile(kv, 0.50), 4),
        kv_p90=round(_percentile(kv, 0.90), 4),
        fraction_above_high=round(sum(1 for v in kv if v > cfg.high) / n, 4),
        fraction_below_low=round(sum(1 for v in kv if v < cfg.low) / n, 4),
        queue_p50=round(_percentile(queue, 0.5), 4) if queue else None,
    )


def _share(window: Sequence[Sample], pred: Any) -> float:
    return sum(1 for s in window if pred(float(s.kv_cache_utilization or 0.0))) / len(window)


def _round_batch(value: float) -> int:
    """Batch sizes: multiples of 8 from 8 up (CUDA-graph and kernel friendly), else at least 1."""
    return max(8, round(value / 8.0) * 8) if value >= 8 else max(1, round(value))


def _round_tokens(value: float) -> int:
    return max(256, math.ceil(value / 256.0) * 256)


def _sticky(raw: float, previous: float | None, tolerance: float, quantize: Any) -> float:
    """The previous amount while the unrounded new one is within ``tolerance`` of it, else the new
    one quantized (comparing before rounding keeps a value near a rounding edge from flipping)."""
    if previous is not None and previous != 0 and abs(raw - previous) / abs(previous) <= tolerance:
        return previous
    return float(quantize(raw))


def _previous_amount(prev: Recommendation | None, field_name: str) -> float | None:
    if prev is None:
        return None
    for c in prev.changes:
        if c.field == field_name:
            return c.recommended
    return None


def _kv_high(
    ev: Evidence, cur: CurrentSettings, prev: Recommendation | None, cfg: AdvisorConfig
) -> Recommendation:
    ratio = max(ev.kv_p50, cfg.high) / cfg.target_utilization
    changes: list[Change] = []
    if cur.max_num_tokens:
        new = int(
            _sticky(
                cur.max_num_tokens * ratio,
                _previous_amount(prev, FIELD_MAX_NUM_TOKENS),
                cfg.amount_tolerance,
                _round_tokens,
            )
        )
        changes.append(Change(FIELD_MAX_NUM_TOKENS, cur.max_num_tokens, new))
    if cur.max_batch_size:
        new_bs = int(
            _sticky(
                cur.max_batch_size / ratio,
                _previous_amount(prev, FIELD_MAX_BATCH_SIZE),
                cfg.amount_tolerance,
                lambda v: min(_round_batch(v), cur.max_batch_size or 1),
            )
        )
        changes.append(Change(FIELD_MAX_BATCH_SIZE, cur.max_batch_size, new_bs))
    message = (
        f"KV-cache utilization has been above {cfg.high:.0%} for {ev.fraction_above_high:.0%} of the last "
        f"{ev.window_seconds / 60:.0f} min (median {ev.kv_p50:.0%}): raise maxNumTokens or lower "
        "maxBatchSize (either one; both are engine build limits, so the change means a new engine build)"
    )
    if not changes:
        message += "; the engine's current limits are unknown, so no amounts are given"
    return Recommendation(KV_HIGH, message, tuple(changes), ev)


def _capacity(
    ev: Evidence, cur: CurrentSettings, previous: Mapping[str, Recommendation], cfg: AdvisorConfig
) -> Recommendation:
    queue = ev.queue_p50 or 0.0
    if ADD_REPLICAS in previous:
        queues = queue >= 0.5 * cfg.queue_threshold
    elif RAISE_KV_FRACTION in previous:
        queues = queue >= 1.5 * cfg.queue_threshold
    else:
        queues = queue >= cfg.queue_threshold
    headroom = cur.kv_cache_free_gpu_mem_fraction < cfg.max_kv_fraction - 1e-9
    ratio = max(ev.kv_p50, cfg.high) / cfg.target_utilization
    if queues or not headroom:
        prev = previous.get(ADD_REPLICAS)
        base = cur.replicas
        target_field = FIELD_REPLICAS
        if cur.autoscaling_enabled:
            base = cur.max_replicas or cur.replicas
            target_field = FIELD_MAX_REPLICAS
        want = int(
            _sticky(
                base * ratio,
                _previous_amount(prev, target_field),
                cfg.amount_tolerance,
                lambda v: max(base + 1, math.ceil(round(v, 6))),
            )
        )
        why = (
            f"requests queue (median {queue:.1f} waiting per replica)"
            if queues
            else f"the KV fraction is already {cur.kv_cache_free_gpu_mem_fraction:.2f}"
        )
        alternatives = (RAISE_KV_FRACTION,) if headroom else ()
        return Recommendation(
            ADD_REPLICAS,
            f"add replicas: the KV cache is full and {why}; a larger KV pool on the same GPUs would "
            "add a few percent at most",
            (Change(target_field, base, want),),
            ev,
            alternatives=alternatives,
        )
    prev = previous.get(RAISE_KV_FRACTION)
    new = round(min(cfg.max_kv_fraction, cur.kv_cache_free_gpu_mem_fraction + cfg.kv_fraction_step), 2)
    return Recommendation(
        RAISE_KV_FRACTION,
        f"raise the KV fraction: the KV cache is full but requests do not queue (median {queue:.1f} "
        f"waiting per replica), so more KV memory per replica is enough (max {cfg.max_kv_fraction})",
        (Change(FIELD_KV_FRACTION, cur.kv_cache_free_gpu_mem_fraction, new),),
        ev,
        alternatives=(ADD_REPLICAS,),
    )


def _kv_low(
    ev: Evidence, cur: CurrentSettings, prev: Recommendation | None, cfg: AdvisorConfig
) -> Recommendation:
    f = cur.kv_cache_free_gpu_mem_fraction
    step = cfg.kv_fraction_step
    raw = f * max(ev.kv_p90, 0.01) / cfg.target_utilization
    want = _sticky(
        raw,
        _previous_amount(prev, FIELD_KV_FRACTION),
        cfg.amount_tolerance,
        lambda v: round(min(max(cfg.min_kv_fraction, math.floor(v / step + 1e-9) * step), f), 2),
    )
    changes = [Change(FIELD_KV_FRACTION, f, want)]
    if cur.max_batch_size:
        bs = _round_batch(cur.max_batch_size * HEADROOM_FACTOR)
        changes.append(Change(FIELD_MAX_BATCH_SIZE, cur.max_batch_size, bs))
    return Recommendation(
        KV_LOW,
        f"KV-cache utilization has been below {cfg.low:.0%} for {ev.fraction_below_low:.0%} of the last "
        f"{ev.window_seconds / 60:.0f} min (p90 {ev.kv_p90:.0%}): shrink the KV allocation, which frees "
        "GPU memory for larger batches",
        tuple(changes),
        ev,
    )


def advise(
    samples: Iterable[Sample],
    current: CurrentSettings,
    previous: Sequence[Recommendation] = (),
    *,
    now: float,
    config: AdvisorConfig | None = None,
) -> list[Recommendation]:
    """Recommendations for the window ending at ``now`` (see the module docstring).

    ``previous``: the recommendations in status (for hysteresis and ``since``). With too few
    samples in the window, returns ``previous`` unchanged. Order: KVCacheHigh, the capacity
    action, KVCacheLow.
    """
    cfg = config or AdvisorConfig()
    window = _window(samples, now, cfg)
    if window is None:
        return list(previous)
    ev = _evidence(window, cfg)
    prev = {r.type: r for r in previous}
    high_active = KV_HIGH in prev
    if not high_active and _share(window, lambda v: v > cfg.high) >= cfg.sustain_fraction:
        high_active = True
    elif high_active and _share(window, lambda v: v > cfg.high_clear) < cfg.clear_fraction:
        high_active = False
    low_active = KV_LOW in prev
    if not low_active and _share(window, lambda v: v < cfg.low) >= cfg.sustain_fraction:
        low_active = True
    elif low_active and _share(window, lambda v: v < cfg.low_clear) < cfg.clear_fraction:
        low_active = False
    if high_active and low_active:  # cannot both hold for long; the newer evidence wins
        low_active = ev.kv_p50 < cfg.low
        high_active = not low_active
    out: list[Recommendation] = []
    if high_active:
        out.append(_kv_high(ev, current, prev.get(KV_HIGH), cfg))
        out.append(_capacity(ev, current, prev, cfg))
    if low_active:
        out.append(_kv_low(ev, current, prev.get(KV_LOW), cfg))
    return [replace(r, since=prev[r.type].since if r.type in prev else now) for r in out]


# ------------------------------------------------------------------------------ status round trip
def recommendation_to_status(rec: Recommendation) -> dict[str, Any]:
    """``status.recommendations[]`` item (camelCase, as in the CRD). ``since`` as Unix seconds."""
    ev = rec.evidence
    out: dict[str, Any] = {
        "type": rec.type,
        "message": rec.message,
        "changes": [
            {"field": c.field, "current": c.current, "recommended": c.recommended} for c in rec.changes
        ],
        "evidence": {
            "windowSeconds": ev.window_seconds,
            "samples": ev.samples,
            "kvCacheUtilizationP10": ev.kv_p10,
            "kvCacheUtilizationP50": ev.kv_p50,
            "kvCacheUtilizationP90": ev.kv_p90,
            "fractionAboveHigh": ev.fraction_above_high,
            "fractionBelowLow": ev.fraction_below_low,
            "waitingPerReplicaP50": ev.queue_p50,
        },
        "sinceUnix": rec.since,
    }
    if rec.alternatives:
        out["alternatives"] = list(rec.alternatives)
    return out


def recommendation_from_status(item: Mapping[str, Any]) -> Recommendation | None:
    """Inverse of :func:`recommendation_to_status`; None for an item it cannot read."""
    try:
        ev = item.get("evidence") or {}
        return Recommendation(
            type=str(item["type"]),
            message=str(item.get("message") or ""),
            changes=tuple(
                Change(
                    str(c["field"]),
                    None if c.get("current") is None else float(c["current"]),
                    float(c["recommended"]),
                )
                for c in item.get("changes") or []
            ),
            evidence=Evidence(
                window_seconds=float(ev.get("windowSeconds") or 0),
                samples=int(ev.get("samples") or 0),
                kv_p10=float(ev.get("kvCacheUtilizationP10") or 0),
                kv_p50=float(ev.get("kvCacheUtilizationP50") or 0),
                kv_p90=float(ev.get("kvCacheUtilizationP90") or 0),
                fraction_above_high=float(ev.get("fractionAboveHigh") or 0),
                fraction_below_low=float(ev.get("fractionBelowLow") or 0),
                queue_p50=None
                if ev.get("waitingPerReplicaP50") is None
                else float(ev["waitingPerReplicaP50"]),
            ),
            since=float(item.get("sinceUnix") or 0),
            alternatives=tuple(str(a) for a in item.get("alternatives") or ()),
        )
    except (KeyError, TypeError, ValueError):
        return None
