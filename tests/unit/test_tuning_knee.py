"""Knee detection and the recommended maxBatchSize on recorded curves (flat, steep, noisy, real)."""

from __future__ import annotations

import math
import random
import re

import pytest

from trtllm_operator.decide.tuning import (
    HEADROOM_FACTOR,
    KNEE_GAIN_FRACTION,
    CurvePoint,
    find_knee,
    recommended_max_batch_size,
)
from trtllm_operator.simulate.fleet import calibration_config, replica_setup
from trtllm_operator.simulate.perf import steady_state_throughput

#: Oracle Cloud Generative AI, "Meta Llama 3.3 (70B)" benchmark, random-length scenario: concurrency
#: vs token-level throughput (tokens/s), https://docs.oracle.com/en-us/iaas/Content/generative-ai/
#: benchmark-meta-llama-3-3-70b-instruct.htm (a published measured curve; it falls at 256).
ORACLE_70B = [
    (1, 58.02),
    (2, 114.84),
    (4, 224.06),
    (8, 425.30),
    (16, 775.13),
    (32, 1296.53),
    (64, 1914.20),
    (128, 2314.73),
    (256, 1976.65),
]


def _curve(pairs: list[tuple[float, float]]) -> list[CurvePoint]:
    return [CurvePoint(x, y) for x, y in pairs]


def _model_curve(xs: list[int]) -> list[tuple[float, float]]:
    """Llama 3.1 8B FP8 on one H100, 128/128, from the simulator's iteration model (fitted to
    NVIDIA's published throughput tables)."""
    setup = replica_setup(
        calibration_config("meta-llama__Llama-3.1-8B-Instruct"),
        "H100",
        quantization="fp8",
        kv_cache_dtype="fp8",
        max_batch_size=2048,
        max_num_tokens=8192,
        kv_cache_free_gpu_mem_fraction=0.95,
    )
    m, kv = setup.spec.model, setup.spec.max_kv_tokens
    return [(x, steady_state_throughput(m, 128, 128, kv, max_batch_size=x)) for x in xs]


def test_published_curve_knee_before_the_drop() -> None:
    knee = find_knee(_curve(ORACLE_70B))
    assert knee is not None
    # 64 → 128 still adds 21 %; after 128 nothing is better (256 is lower).
    assert knee.x == 128
    assert knee.peak_x == 128
    assert knee.gain_after == 0.0
    assert recommended_max_batch_size(knee.x) == 160


def test_model_curve_knee() -> None:
    pairs = _model_curve([1, 8, 32, 64, 128, 256, 512, 1024, 2048])
    knee = find_knee(_curve(pairs))
    assert knee is not None
    after = [y for x, y in pairs if x > knee.x]
    y_knee = dict(pairs)[knee.x]
    assert max(after) < y_knee * (1 + KNEE_GAIN_FRACTION)
    # and the point before the knee did not qualify
    before = [x for x, _ in pairs if x < knee.x][-1]
    assert max(y for x, y in pairs if x > before) >= dict(pairs)[before] * (1 + KNEE_GAIN_FRACTION)


def test_flat_curve_knee_is_the_first_point() -> None:
    # beyond saturation (model curve at 1024–4096 sequences): < 10 % gain from the first point on
    pairs = _model_curve([1024, 1536, 2048])
    knee = find_knee(_curve(pairs))
    assert knee is not None and knee.x == 1024


def test_steep_curve_has_no_knee() -> None:
    # the first half of the published curve still doubles per step
    assert find_knee(_curve(ORACLE_70B[:6])) is None


@pytest.mark.parametrize("seed", range(20))
def test_noisy_curve_knee_moves_at_most_one_step(seed: int) -> None:
    rng = random.Random(seed)
    xs = [1, 8, 32, 64, 128, 256, 512, 1024, 2048]
    clean = find_knee(_curve(_model_curve(xs)))
    assert clean is not None
    noisy = [(x, y * (1 + rng.uniform(-0.03, 0.03))) for x, y in _model_curve(xs)]
    knee = find_knee(_curve(noisy))
    assert knee is not None
    assert abs(xs.index(int(knee.x)) - xs.index(int(clean.x))) <= 1


def test_a_dip_does_not_end_the_curve_early() -> None:
    # 64 measured low by noise; the curve keeps rising afterwards
    pairs = [(16, 700.0), (32, 1300.0), (64, 1250.0), (128, 2300.0), (256, 2350.0)]
    knee = find_knee(_curve(pairs))
    assert knee is not None and knee.x == 128


def test_repeated_runs_are_averaged() -> None:
    pairs = [(8, 100.0), (8, 120.0), (16, 200.0), (32, 205.0)]
    knee = find_knee(_curve(pairs))
    assert knee is not None and knee.x == 16


@pytest.mark.parametrize(("gain", "expected"), [(0.099, None), (0.101, 16), (0.5, 16), (0.99, 16)])
def test_gain_threshold_boundary(gain: float, expected: float | None) -> None:
    # 8 → 16 adds 100 %, 16 → 32 adds exactly 10 %; the last point alone is never a knee
    pairs = [(8, 500.0), (16, 1000.0), (32, 1100.0)]
    knee = find_knee(_curve(pairs), gain)
    assert (knee.x if knee else None) == expected


@pytest.mark.parametrize(
    ("knee", "expected"),
    [(1, 2), (8, 10), (16, 20), (100, 125), (128, 160), (512, 640)],
)
def test_recommended_max_batch_size(knee: int, expected: int) -> None:
    assert recommended_max_batch_size(knee) == expected == math.ceil(knee * HEADROOM_FACTOR)


@pytest.mark.parametrize(
    ("points", "fragment"),
    [
        ([CurvePoint(0, 10.0), CurvePoint(2, 20.0)], "x (batch size / concurrency) must be a positive"),
        ([CurvePoint(1, -1.0), CurvePoint(2, 20.0)], "throughput must be a non-negative"),
        ([CurvePoint(1, math.nan), CurvePoint(2, 20.0)], "throughput must be a non-negative"),
    ],
)
def test_bad_points_are_named(points: list[CurvePoint], fragment: str) -> None:
    with pytest.raises(ValueError, match=re.escape(fragment)):
        find_knee(points)


def test_bad_parameters() -> None:
    with pytest.raises(ValueError, match="gain_fraction"):
        find_knee([CurvePoint(1, 1.0), CurvePoint(2, 2.0)], 0)
    with pytest.raises(ValueError, match="factor must be >= 1"):
        recommended_max_batch_size(8, 0.9)
    assert find_knee([CurvePoint(4, 1.0)]) is None
