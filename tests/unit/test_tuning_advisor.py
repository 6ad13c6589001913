"""The KV-cache / batch advisor: each rule at and around its thresholds, the AddReplicas vs
RaiseKVCacheFraction choice, hysteresis, stability under noise, and the status round trip."""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable

import pytest

from trtllm_operator.decide.tuning import (
    AdvisorConfig,
    CurrentSettings,
    Recommendation,
    Sample,
    advise,
    recommendation_from_status,
    recommendation_to_status,
)

NOW = 1_800_000_000.0
CFG = AdvisorConfig()  # 30 min window, 0.80 / 0.75 high, 0.50 / 0.55 low
SETTINGS = CurrentSettings(
    kv_cache_free_gpu_mem_fraction=0.9, replicas=2, max_batch_size=64, max_num_tokens=8192
)


def series(
    kv: Callable[[int], float], *, n: int = 60, queue: float | None = 0.0, end: float = NOW
) -> list[Sample]:
    """n samples evenly over the 30-min window ending at ``end`` (every 30 s)."""
    step = CFG.window_seconds / (n - 1)
    return [Sample(end - CFG.window_seconds + i * step, kv(i), queue, 2) for i in range(n)]


def types(recs: list[Recommendation]) -> list[str]:
    return [r.type for r in recs]


def changes(rec: Recommendation) -> dict[str, tuple[float | None, float]]:
    return {c.field: (c.current, c.recommended) for c in rec.changes}


# --------------------------------------------------------------------------------- thresholds
@pytest.mark.parametrize(
    ("level", "expected"),
    [
        (0.79, []),
        (0.80, []),  # "above 80 %" is strict
        (0.81, ["KVCacheHigh", "RaiseKVCacheFraction"]),
        (0.97, ["KVCacheHigh", "RaiseKVCacheFraction"]),
        (0.60, []),
        (0.50, []),  # "below 50 %" is strict
        (0.49, ["KVCacheLow"]),
        (0.05, ["KVCacheLow"]),
    ],
)
def test_levels(level: float, expected: list[str]) -> None:
    assert types(advise(series(lambda _: level), SETTINGS, now=NOW)) == expected


@pytest.mark.parametrize(("share_high", "raised"), [(0.75, False), (0.78, False), (0.80, True), (0.9, True)])
def test_sustained_means_80_percent_of_the_window(share_high: float, raised: bool) -> None:
    n = 100
    k = round(share_high * n)
    recs = advise(series(lambda i: 0.9 if i < k else 0.7, n=n), SETTINGS, now=NOW)
    assert ("KVCacheHigh" in types(recs)) is raised


@pytest.mark.parametrize(("share_low", "raised"), [(0.79, False), (0.80, True)])
def test_low_sustained(share_low: float, raised: bool) -> None:
    n = 100
    k = round(share_low * n)
    recs = advise(series(lambda i: 0.3 if i < k else 0.6, n=n), SETTINGS, now=NOW)
    assert ("KVCacheLow" in types(recs)) is raised


def test_high_amounts() -> None:
    recs = advise(series(lambda _: 0.91), SETTINGS, now=NOW)
    high = recs[0]
    got = changes(high)
    # ratio 0.91 / 0.70 = 1.3: maxNumTokens 8192 → 10752 (× 1.3 rounded up to 256), maxBatchSize 64 → 48
    assert got["LLMEngine spec.build.maxNumTokens"] == (8192, 10752)
    assert got["LLMEngine spec.build.maxBatchSize"] == (64, 48)
    assert high.evidence.kv_p50 == pytest.approx(0.91)
    assert high.evidence.fraction_above_high == 1.0
    assert high.evidence.samples == 60
    assert "raise maxNumTokens or lower maxBatchSize" in high.message


def test_high_without_known_limits_says_so() -> None:
    cur = CurrentSettings(kv_cache_free_gpu_mem_fraction=0.9, replicas=1)
    high = advise(series(lambda _: 0.9), cur, now=NOW)[0]
    assert high.changes == ()
    assert "no amounts" in high.message


def test_low_amounts() -> None:
    recs = advise(series(lambda _: 0.3), SETTINGS, now=NOW)
    got = changes(recs[0])
    # p90 0.3 at fraction 0.9 → 0.9 × 0.3 / 0.7 = 0.386 → 0.35; maxBatchSize 64 × 1.25 = 80
    assert got["spec.server.kvCacheFreeGpuMemFraction"] == (0.9, 0.35)
    assert got["LLMEngine spec.build.maxBatchSize"] == (64, 80)


def test_low_fraction_floor() -> None:
    got = changes(advise(series(lambda _: 0.02), SETTINGS, now=NOW)[0])
    assert got["spec.server.kvCacheFreeGpuMemFraction"] == (0.9, CFG.min_kv_fraction)


# --------------------------------------------------------------- add replicas vs KV fraction
@pytest.mark.parametrize(
    ("queue", "fraction", "expected", "field", "amount"),
    [
        (0.0, 0.90, "RaiseKVCacheFraction", "spec.server.kvCacheFreeGpuMemFraction", 0.95),
        (0.99, 0.90, "RaiseKVCacheFraction", "spec.server.kvCacheFreeGpuMemFraction", 0.95),
        (1.0, 0.90, "AddReplicas", "spec.replicas", 3),
        (5.0, 0.90, "AddReplicas", "spec.replicas", 3),
        (0.0, 0.95, "AddReplicas", "spec.replicas", 3),  # no KV headroom left
        (0.0, 0.93, "RaiseKVCacheFraction", "spec.server.kvCacheFreeGpuMemFraction", 0.95),
    ],
)
def test_capacity_choice(queue: float, fraction: float, expected: str, field: str, amount: float) -> None:
    cur = CurrentSettings(kv_cache_free_gpu_mem_fraction=fraction, replicas=2, max_batch_size=64)
    recs = advise(series(lambda _: 0.9, queue=queue), cur, now=NOW)
    assert types(recs) == ["KVCacheHigh", expected]
    assert changes(recs[1])[field][1] == amount


def test_add_replicas_with_autoscaling_raises_max_replicas() -> None:
    cur = CurrentSettings(0.9, replicas=4, autoscaling_enabled=True, max_replicas=4)
    recs = advise(series(lambda _: 0.95, queue=3.0), cur, now=NOW)
    assert changes(recs[1]) == {"spec.autoscaling.maxReplicas": (4, 6)}  # ceil(4 × 0.95 / 0.7)
    assert recs[1].alternatives == ("RaiseKVCacheFraction",)


def test_capacity_choice_is_sticky() -> None:
    prev = advise(series(lambda _: 0.9, queue=1.2), SETTINGS, now=NOW)
    assert types(prev) == ["KVCacheHigh", "AddReplicas"]
    # the queue falls to 0.6 per replica: still AddReplicas (switches only below 0.5)
    later = advise(series(lambda _: 0.9, queue=0.6, end=NOW + 60), SETTINGS, prev, now=NOW + 60)
    assert types(later) == ["KVCacheHigh", "AddReplicas"]
    later = advise(series(lambda _: 0.9, queue=0.4, end=NOW + 120), SETTINGS, later, now=NOW + 120)
    assert types(later) == ["KVCacheHigh", "RaiseKVCacheFraction"]
    # and back only above 1.5
    later = advise(series(lambda _: 0.9, queue=1.4, end=NOW + 180), SETTINGS, later, now=NOW + 180)
    assert types(later) == ["KVCacheHigh", "RaiseKVCacheFraction"]


# ------------------------------------------------------------------------------- hysteresis
@pytest.mark.parametrize(("level", "kept"), [(0.79, True), (0.76, True), (0.74, False), (0.6, False)])
def test_high_clears_only_below_the_clear_threshold(level: float, kept: bool) -> None:
    prev = advise(series(lambda _: 0.9), SETTINGS, now=NOW)
    recs = advise(series(lambda _: level, end=NOW + 1800), SETTINGS, prev, now=NOW + 1800)
    assert ("KVCacheHigh" in types(recs)) is kept


@pytest.mark.parametrize(("level", "kept"), [(0.51, True), (0.54, True), (0.56, False)])
def test_low_clears_only_above_the_clear_threshold(level: float, kept: bool) -> None:
    prev = advise(series(lambda _: 0.3), SETTINGS, now=NOW)
    recs = advise(series(lambda _: level, end=NOW + 1800), SETTINGS, prev, now=NOW + 1800)
    assert ("KVCacheLow" in types(recs)) is kept


def test_since_is_kept() -> None:
    prev = advise(series(lambda _: 0.9), SETTINGS, now=NOW)
    assert all(r.since == NOW for r in prev)
    later = advise(series(lambda _: 0.88, end=NOW + 300), SETTINGS, prev, now=NOW + 300)
    assert all(r.since == NOW for r in later)


@pytest.mark.parametrize(
    "samples",
    [
        [],
        series(lambda _: 0.95, n=9),  # fewer than min_samples
        [Sample(NOW - 600 + i * 10, 0.95) for i in range(61)],  # spans 10 of 30 min
        [Sample(NOW - 4000 + i * 30, 0.95) for i in range(60)],  # all older than the window
        [Sample(NOW - 1800 + i * 30, None) for i in range(61)],  # no KV signal
    ],
)
def test_too_little_evidence_changes_nothing(samples: list[Sample]) -> None:
    prev = advise(series(lambda _: 0.3), SETTINGS, now=NOW - 60)
    assert advise(samples, SETTINGS, prev, now=NOW) == prev
    assert advise(samples, SETTINGS, now=NOW) == []


# ------------------------------------------------------------------------- noise stability
def _run(
    level: float, noise: float, seed: int, hours: float = 6.0
) -> list[tuple[tuple[str, ...], tuple[object, ...]]]:
    """Evaluate every 30 s over ``hours`` of samples ``level ± noise`` (uniform); return the
    (types, amounts) after each evaluation."""
    rng = random.Random(seed)
    samples: list[Sample] = []
    recs: list[Recommendation] = []
    out = []
    t0 = NOW
    for i in range(int(hours * 120)):
        t = t0 + i * 30
        samples.append(Sample(t, min(1.0, max(0.0, level + rng.uniform(-noise, noise))), 0.0, 2))
        samples = [s for s in samples if s.time > t - CFG.window_seconds - 60]
        recs = advise(samples, SETTINGS, recs, now=t)
        out.append((tuple(types(recs)), tuple(tuple(r.changes) for r in recs)))
    return out


def _transitions(states: list[tuple[str, ...]]) -> int:
    return sum(1 for a, b in itertools.pairwise(states) if a != b)


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize(("level", "noise"), [(0.86, 0.08), (0.78, 0.06), (0.52, 0.06), (0.45, 0.08)])
def test_no_flip_flopping_under_noise(level: float, noise: float, seed: int) -> None:
    run = _run(level, noise, seed)
    kinds = [k for k, _ in run]
    amounts = [a for _, a in run]
    # at most one change of state (raised once, never cleared and raised again) …
    assert _transitions(kinds) <= 1
    # … and the amounts stay put once raised
    raised = [a for k, a in zip(kinds, amounts, strict=True) if k]
    assert _transitions(raised) <= 1


def test_noisy_high_load_is_recognised() -> None:
    kinds = [k for k, _ in _run(0.86, 0.08, seed=1)]
    assert kinds[-1] == ("KVCacheHigh", "RaiseKVCacheFraction")


def test_between_thresholds_nothing_is_raised() -> None:
    assert all(k == () for k, _ in _run(0.65, 0.1, seed=2))


# ------------------------------------------------------------------------------ round trip
def test_status_round_trip() -> None:
    recs = advise(series(lambda _: 0.9, queue=2.0), SETTINGS, now=NOW)
    for rec in recs:
        back = recommendation_from_status(recommendation_to_status(rec))
        assert back == rec
    assert recommendation_from_status({"changes": []}) is None


def test_bad_config() -> None:
    with pytest.raises(ValueError, match="thresholds must satisfy"):
        AdvisorConfig(high=0.5, low=0.6)
