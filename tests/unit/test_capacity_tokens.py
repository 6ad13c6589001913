"""Token weighting of the capacity recommendation (trtllm_operator.decide.capacity, issue 19).

A request costs ``prompt + r × output`` tokens; λ and κ are counted in requests of the prior's
lengths. The token counts are the backend's ``nv_llm_{input,output}_token_len`` histograms (``_sum``,
``_count``), observed at completion. Expected numbers are worked out by hand in each test.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from trtllm_operator.api.deployment import AutoscalingSpec
from trtllm_operator.decide import autoscaling as asc
from trtllm_operator.decide import capacity as cap
from trtllm_operator.simulate import perf, policies
from trtllm_operator.simulate.fleet import replica_setup
from trtllm_operator.simulate.traces import Request

MAX = 100.0
PERIOD = 15.0
#: κ's prior: 10 requests/s of 1,000 prompt and 200 output tokens, a generated token worth 2 prompt
#: tokens: a request of the prior's lengths costs 1,000 + 2 × 200 = 1,400 tokens.
WEIGHTED = cap.CapacityParams(
    target=0.8, prior_rps=10.0, output_token_weight=2.0, prior_tokens=(1000.0, 200.0)
)


def run(
    rate: float,
    prompt: float,
    output: float,
    params: cap.CapacityParams,
    *,
    ticks: int = 3,
    pods: int = 2,
    histograms: bool = True,
    state: cap.CapacityState | None = None,
    start: float = 1000.0,
    counts: list[float] | None = None,
) -> cap.CapacityEstimate:
    """``ticks`` evaluations, each of ``pods`` pods finishing ``rate`` requests/s of ``prompt`` and
    ``output`` tokens at a constant 20 active (so arrivals = completions); the pages carry the token
    histograms unless ``histograms`` is false."""
    state = state or cap.CapacityState()
    done = counts if counts is not None else [0.0] * pods
    est = None
    for k in range(ticks):
        page = [
            cap.PodCounters(
                f"p{i}",
                d,
                20.0,
                MAX,
                d * prompt if histograms else None,
                d * output if histograms else None,
                d if histograms else None,
            )
            for i, d in enumerate(done)
        ]
        est = cap.estimate(page, state, params, start + k * PERIOD)
        state = est.state
        done[:] = [d + rate * PERIOD for d in done]
    assert est is not None
    return est


def test_long_prompts_are_sized_for_what_they_cost() -> None:
    """32 requests/s over two pods. At the prior's lengths: 32 / (10 × 0.8) = 4 replicas. With 3,000-token
    prompts (200 output) a request costs 3,000 + 2 × 200 = 3,400 tokens, 3,400 / 1,400 = 17/7 of the
    prior's: 32 × 17/7 = 77.714 requests of the prior's lengths per second, / 8 = 9.714 → 10."""
    assert run(16.0, 1000.0, 200.0, WEIGHTED).desired == 4
    est = run(16.0, 3000.0, 200.0, WEIGHTED)
    assert est.cost_tokens == pytest.approx(3400.0)
    assert est.cost_ratio == pytest.approx(17 / 7)
    assert est.requests_rps == pytest.approx(32.0)
    assert est.arrival_rps == pytest.approx(32.0 * 17 / 7)
    assert est.desired == 10
    # Shorter requests than the profile need fewer replicas: 500 + 2 × 100 = 700 tokens, half → 2.
    assert run(16.0, 500.0, 100.0, WEIGHTED).desired == 2
    # Without the token weighting, or on pages without the histograms (a backend before v0.16.0),
    # every request counts as one of the prior's: 4 replicas, as before.
    plain = cap.CapacityParams(target=0.8, prior_rps=10.0)
    assert run(16.0, 3000.0, 200.0, plain).desired == 4
    assert run(16.0, 3000.0, 200.0, WEIGHTED, histograms=False).desired == 4


def test_the_message_shows_the_weighting() -> None:
    """Every number the weighted count comes from: requests/s, the factor, the mean cost and the prior's."""
    text = run(16.0, 3000.0, 200.0, WEIGHTED).summary(0.8)
    assert "token-weighted: 32 requests/s × 2.43" in text
    assert "mean cost 3400 tokens (finished since the last evaluation)" in text
    assert "over 1400 for promptTokens / outputTokens" in text
    assert text.endswith("→ 10")


def test_a_tick_without_finished_requests_keeps_the_last_cost() -> None:
    """The histograms move only at completion: a tick in which no request finished keeps the cost last
    measured (here 3,400 tokens), not the prior's."""
    first = run(16.0, 3000.0, 200.0, WEIGHTED, ticks=2, counts=[0.0, 0.0])
    counts = [16.0 * PERIOD] * 2  # what the last page showed
    # Nothing finishes, but 30 more requests become active on each pod: 60 arrivals in 15 s.
    page = [cap.PodCounters(f"p{i}", c, 50.0, MAX, c * 3000.0, c * 200.0, c) for i, c in enumerate(counts)]
    est = cap.estimate(page, first.state, WEIGHTED, 1000.0 + 2 * PERIOD)
    assert not est.cost_measured and est.cost_tokens == pytest.approx(3400.0)
    assert est.requests_rps == pytest.approx(4.0)
    assert est.arrival_rps == pytest.approx(4.0 * 17 / 7)
    assert "(last measured)" in est.summary(0.8)
    # Before any request finished: nothing measured, factor 1, and the message says so (trial 51 Y2).
    fresh = run(0.0, 3000.0, 200.0, WEIGHTED, ticks=2)
    assert fresh.cost_tokens is None and fresh.cost_ratio == 1.0
    assert "no request's token lengths measured yet" in fresh.summary(0.8)


def test_pages_without_the_token_histograms_say_that_nothing_was_measured() -> None:
    """Fresh-user trial 51 Y2: on pages without nv_llm_input_token_len / nv_llm_output_token_len (the
    demo's Triton 2.51, a backend before v0.16.0) the message said "their mean cost 74 tokens (last
    measured) over 74": the prior's own cost, never measured. It now says nothing was measured, and the
    memory keeps no cost."""
    est = run(16.0, 3000.0, 200.0, WEIGHTED, histograms=False, ticks=3)
    text = est.summary(0.8)
    assert "no request's token lengths measured yet" in text and "last measured" not in text, text
    assert est.cost_tokens is None and est.state.cost_tokens is None and est.cost_ratio == 1.0


def test_saturated_pods_correct_kappa_in_requests_of_the_priors_lengths() -> None:
    """Two saturated pods (active = max) finishing 3 requests/s each of a cost 17/7 of the prior's:
    their measurement of κ is 3 × 17/7 = 7.286 requests of the prior's lengths per second, and κ moves
    by the correction 0.5 of the gap from 10 at each tick after the first: 8.643, then 7.964."""
    params = cap.CapacityParams(
        target=0.8, prior_rps=10.0, output_token_weight=2.0, prior_tokens=(1000.0, 200.0), correction=0.5
    )
    state = cap.CapacityState()
    done = 0.0
    kappas = []
    for k in range(3):
        page = [cap.PodCounters(f"p{i}", done, MAX, MAX, done * 3000.0, done * 200.0, done) for i in range(2)]
        est = cap.estimate(page, state, params, 1000.0 + k * PERIOD)
        state, done = est.state, done + 3.0 * PERIOD
        kappas.append(est.capacity_rps)
    measured = 3.0 * 17 / 7
    assert kappas[1] == pytest.approx(10.0 + 0.5 * (measured - 10.0))
    assert kappas[2] == pytest.approx(kappas[1] + 0.5 * (measured - kappas[1]))


def test_the_weighted_memory_round_trips_and_the_plain_one_is_unchanged() -> None:
    """With token weighting each pod's memory carries its three token counts and the state the last
    cost; without it the JSON is what earlier releases wrote and read (4 values a pod, no cost)."""
    est = run(16.0, 3000.0, 200.0, WEIGHTED)
    doc = json.loads(json.dumps(est.state.to_dict()))
    assert doc["costTokens"] == pytest.approx(3400.0) and all(len(p) == 7 for p in doc["pods"])
    assert cap.CapacityState.from_dict(doc).to_dict() == doc
    assert cap.CapacityState.from_dict(doc).pods == est.state.pods
    plain = run(16.0, 3000.0, 200.0, cap.CapacityParams(target=0.8, prior_rps=10.0)).state.to_dict()
    assert "costTokens" not in plain and all(len(p) == 4 for p in plain["pods"])
    with pytest.raises(ValueError, match="4 or 7 values"):
        cap.CapacityState.from_dict({"pods": [["p0", 1.0, 3.0, 2.0, 5.0]]})


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"output_token_weight": 2.0}, "needs both"),
        ({"prior_tokens": (1000.0, 200.0)}, "needs both"),
        ({"output_token_weight": -1.0, "prior_tokens": (1000.0, 200.0)}, "output token weight -1.0"),
        ({"output_token_weight": 2.0, "prior_tokens": (0.0, 0.0)}, r"prior tokens \(0.0, 0.0\)"),
        ({"output_token_weight": 2.0, "prior_tokens": (-5.0, 10.0)}, "prior tokens"),
    ],
)
def test_bad_token_parameters_are_refused(kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        cap.CapacityParams(**kwargs)  # type: ignore[arg-type]


BENCHMARK_REPLICA = (
    Path(__file__).parents[1] / "fixtures/model-configs/meta-llama__Llama-3.1-70B-Instruct.json"
)


def test_the_output_token_weight_is_the_performance_models() -> None:
    """The weight is the ratio of the performance model's replica time per request, ∂(1/κ)/∂output over
    ∂(1/κ)/∂prompt; on the benchmark's replica (Llama-3.1-70B FP8, TP 2, H100) about 2 at the Azure
    trace's mean lengths. With it a saturated replica's weighted tokens/s, κ × (prompt + r × output),
    varies by less than 30 % across these lengths where κ in requests/s varies 5-fold — why the
    weighted request is the unit."""
    spec = replica_setup(BENCHMARK_REPLICA, "H100", quantization="fp8", kv_cache_dtype="fp8", tp=2).spec
    limits = {
        "max_kv_tokens": spec.max_kv_tokens,
        "max_batch_size": spec.max_batch_size,
        "max_num_tokens": spec.max_num_tokens,
    }
    r = perf.output_token_weight(spec.model, 1155, 211, **limits)
    assert 1.5 < r < 2.5

    def seconds(i: int, o: int) -> float:
        return 1.0 / perf.saturated_request_rate(spec.model, i, o, **limits)

    by_prompt = (seconds(1271, 211) - seconds(1039, 211)) / (1271 - 1039)
    by_output = (seconds(1155, 232) - seconds(1155, 190)) / (232 - 190)
    assert r == pytest.approx(by_output / by_prompt)
    shapes = [(500, 200), (1000, 100), (1000, 200), (1000, 400), (4000, 200), (6000, 200), (6000, 400)]
    kappa = [perf.saturated_request_rate(spec.model, i, o, **limits) for i, o in shapes]
    weighted = [k * (i + r * o) for k, (i, o) in zip(kappa, shapes, strict=True)]
    assert max(kappa) / min(kappa) > 5
    assert max(weighted) / min(weighted) < 1.3
    with pytest.raises(ValueError, match="osl 0"):
        perf.output_token_weight(spec.model, 1000, 0, **limits)
    # The simulator's profile: the weight at the accepted requests' mean lengths, and those lengths.
    reqs = [Request(0.0, 1000, 200), Request(1.0, 3000, 400)]  # means 2000 / 300
    weight, lengths = policies.profiled_tokens(reqs, spec)
    assert lengths == (2000.0, 300.0)
    assert weight == perf.output_token_weight(spec.model, 2000, 300, **limits)
    assert math.isfinite(weight) and weight > 0


def test_spec_autoscaling_capacity_turns_the_weighting_on_with_all_three_fields() -> None:
    """``promptTokens`` / ``outputTokens`` / ``outputTokenWeight`` are the weighting's parameters; the
    API server refuses a partial set (CEL; tests/fixtures/invalid/deployment-autoscaling-capacity-
    tokens-partial.yaml), and without them the recommendation counts requests as before."""

    def params(capacity: dict[str, object]) -> cap.CapacityParams | None:
        spec = AutoscalingSpec.model_validate(
            {
                "enabled": True,
                "maxReplicas": 8,
                "targets": {"activeRequestUtilization": 0.8},
                "capacity": capacity,
            }
        )
        return asc.policy_from_spec(spec).capacity

    on = params(
        {"requestsPerSecond": 9.4, "promptTokens": 1155, "outputTokens": 211, "outputTokenWeight": 2.1}
    )
    assert on is not None
    assert (on.prior_rps, on.output_token_weight, on.prior_tokens) == (9.4, 2.1, (1155.0, 211.0))
    assert on.reference_cost == pytest.approx(1155 + 2.1 * 211)
    off = params({"requestsPerSecond": 9.4})
    assert off is not None and off.output_token_weight is None and off.prior_tokens is None
