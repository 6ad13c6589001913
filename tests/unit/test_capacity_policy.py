"""The capacity recommendation (trtllm_operator.decide.capacity) and its place in the policy."""

from __future__ import annotations

import dataclasses
import json
import math
import random
import re
from pathlib import Path

import pytest
import yaml

from trtllm_operator.api.deployment import AutoscalingSpec
from trtllm_operator.decide import autoscaling as asc
from trtllm_operator.decide import capacity as cap
from trtllm_operator.metrics.exposition import ReplicaInternals, exposition, samples
from trtllm_operator.metrics.signals import signals_from_samples
from trtllm_operator.simulate import perf, policies
from trtllm_operator.simulate.engine import Observation, PodView
from trtllm_operator.simulate.fleet import replica_setup
from trtllm_operator.simulate.traces import Request

MAX = 100.0


def pods(completed: list[float], active: list[float]) -> list[cap.PodCounters]:
    return [
        cap.PodCounters(f"p{i}", c, a, MAX) for i, (c, a) in enumerate(zip(completed, active, strict=True))
    ]


def run(
    rates: list[float],
    active: list[float],
    params: cap.CapacityParams,
    ticks: int = 3,
    state: cap.CapacityState | None = None,
    period: float = 15.0,
) -> cap.CapacityEstimate:
    """``ticks`` evaluations with each pod completing ``rates[i]`` requests/s at a constant ``active``."""
    state = state or cap.CapacityState()
    done = [0.0] * len(rates)
    est = None
    for k in range(ticks):
        est = cap.estimate(pods(done, active), state, params, 1000.0 + k * period)
        state = est.state
        done = [d + r * period for d, r in zip(done, rates, strict=True)]
    assert est is not None
    return est


def test_no_rate_before_two_samples() -> None:
    est = cap.estimate(pods([5.0], [10.0]), cap.CapacityState(), cap.CapacityParams(prior_rps=10.0), 0.0)
    assert est.arrival_rps is None and est.desired is None
    assert "no request rate yet" in est.summary(0.8)


def test_rises_with_arrival_rate() -> None:
    params = cap.CapacityParams(target=0.8, prior_rps=10.0)
    desired = [run([r, r], [20.0, 20.0], params).desired for r in (2.0, 8.0, 16.0, 32.0)]
    assert desired == sorted(desired) and desired[0] < desired[-1]
    # λ = 2 × 16 = 32/s over 10/s × 0.8 per replica → 4 replicas.
    assert run([16.0, 16.0], [20.0, 20.0], params).desired == 4


def test_arrivals_count_requests_still_active() -> None:
    """Admitted = completed + growth of active (Little's-law bookkeeping)."""
    params = cap.CapacityParams(prior_rps=10.0)
    state = cap.estimate(pods([0.0], [10.0]), cap.CapacityState(), params, 0.0).state
    est = cap.estimate(pods([30.0], [40.0]), state, params, 10.0)
    assert est.arrival_rps == pytest.approx((30.0 + 30.0) / 10.0)


def test_holds_at_steady_state() -> None:
    """Constant load: the same recommendation every tick, and the policy keeps the count."""
    params = cap.CapacityParams(target=0.8, prior_rps=10.0)
    policy = asc.Policy(1, 10, active_request_utilization=0.8, kv_cache_utilization=None, capacity=params)
    state = asc.AutoscalerState()
    replicas = 3
    done = 0.0
    seen = []
    for k in range(40):
        snapshot = asc.Snapshot(
            replicas,
            tuple(
                asc.PodSignals(
                    f"p{i}",
                    values={asc.ACTIVE_REQUEST_UTILIZATION: 0.3},
                    counters={"completed": done, "active": 30.0, "max": MAX},
                )
                for i in range(replicas)
            ),
        )
        d = asc.decide(snapshot, state, policy, 1000.0 + 15 * k)
        state = d.state
        seen.append(d.desired_by_signal.get(asc.CAPACITY))
        assert d.to_replicas == replicas, d.message
        done += 7.0 * 15  # 3 pods × 7/s = 21/s over 10/s × 0.8 → 3 replicas
    assert set(seen[1:]) == {3}


def test_scale_down_only_when_the_remaining_replicas_stay_under_the_saturation_target() -> None:
    """The capacity estimate says 1 replica, but active-request utilization says fewer would saturate:
    the policy does not go below what keeps active / max under its target (WVA's safety check)."""
    params = cap.CapacityParams(target=0.8, prior_rps=100.0)  # a (wrong) prior far too high
    no_window = dataclasses.replace(asc.DEFAULT_SCALE_DOWN, stabilization_window_seconds=0)
    fast_down = dataclasses.replace(no_window, policies=(asc.RateLimit("Percent", 100, 15),))
    policy = asc.Policy(
        1,
        10,
        active_request_utilization=0.8,
        kv_cache_utilization=None,
        capacity=params,
        scale_down=fast_down,
    )

    def tick(state: asc.AutoscalerState, now: float, done: float, util: float) -> asc.Decision:
        snapshot = asc.Snapshot(
            4,
            tuple(
                asc.PodSignals(
                    f"p{i}",
                    values={asc.ACTIVE_REQUEST_UTILIZATION: util},
                    counters={"completed": done, "active": util * MAX, "max": MAX},
                )
                for i in range(4)
            ),
        )
        return asc.decide(snapshot, state, policy, now)

    first = tick(asc.AutoscalerState(), 1000.0, 0.0, 0.6)
    busy = tick(first.state, 1015.0, 75.0, 0.6)  # 4 × 5/s = 20/s: capacity alone says 1
    assert busy.desired_by_signal[asc.CAPACITY] == 1
    assert busy.to_replicas == 3  # ceil(0.6 × 4 / 0.8): not 1
    assert "capacity: arrivals 20/s" in busy.message
    quiet = tick(first.state, 1015.0, 75.0, 0.1)
    assert quiet.to_replicas == 1  # both agree: safe to go down to 1


def test_online_correction_converges_from_a_wrong_prior() -> None:
    """Saturated pods complete at the true capacity: the estimate moves there from a prior off by 2×
    in either direction."""
    true = 12.0
    for prior in (6.0, 24.0):
        params = cap.CapacityParams(prior_rps=prior, correction=0.5)
        est = run([true, true], [MAX, MAX], params, ticks=12)
        assert est.capacity_rps == pytest.approx(true, rel=0.01)
        assert est.saturated == 2


def test_saturation_raises_the_recommendation() -> None:
    """A saturated pod hides its backlog: the share of saturated pods scales λ up."""
    params = cap.CapacityParams(target=1.0, prior_rps=10.0, correction=1.0)
    unsaturated = run([9.0, 9.0], [50.0, 50.0], params)
    saturated = run([10.0, 10.0], [MAX, MAX], params)
    assert unsaturated.desired == 2
    assert saturated.desired == 4  # λ 20/s doubled, over κ 10/s


def test_learned_capacity_without_a_prior() -> None:
    """No prior: each pod's throughput extrapolated to a full batch, until saturation corrects it."""
    est = run([5.0], [25.0], cap.CapacityParams(prior_rps=None))
    assert est.capacity_rps == pytest.approx(20.0)
    corrected = run([8.0], [MAX], cap.CapacityParams(prior_rps=None, correction=1.0), state=est.state)
    assert corrected.capacity_rps == pytest.approx(8.0)


def test_a_pod_without_a_previous_sample_counts_at_the_measured_pods_mean_share() -> None:
    # Two pods measured at 10 requests/s each; two more just became Ready (first sample): their
    # traffic is not in the sum, and with random routing each takes the mean share.
    params = cap.CapacityParams(prior_rps=10.0)
    state = cap.estimate(pods([0.0, 0.0], [20.0, 20.0]), cap.CapacityState(), params, 0.0).state
    est = cap.estimate(pods([150.0, 150.0, 40.0, 40.0], [20.0] * 4), state, params, 15.0)
    assert est.measured == 2
    assert est.arrival_rps == pytest.approx(40.0)


def test_the_message_gives_every_number_the_count_is_computed_from() -> None:
    """Fresh-user trial 37 F3: the saturated pods' boost and the scaling to pods without a previous
    sample were applied but not shown, so the count could not be checked from the message."""
    params = cap.CapacityParams(prior_rps=10.0)
    state = cap.estimate(pods([0.0] * 3, [20.0, 20.0, 100.0]), cap.CapacityState(), params, 0.0).state
    est = cap.estimate(pods([150.0, 150.0, 150.0, 40.0], [20.0, 20.0, 100.0, 20.0]), state, params, 15.0)
    text = est.summary(params.target)
    assert "over 4 pods (3 measured at both samples, scaled to all)" in text, text
    assert "1 saturated (rate × 1.33: their backlog is not exported)" in text, text
    # 30 requests/s measured × 4/3 pods = 40, × (1 + 1/3) over 10 × 0.8 = 6.7 → 7
    assert est.arrival_rps == pytest.approx(40.0)
    assert "arrivals 40/s" in text and "capacity 10/s" in text, text
    assert est.desired == 7 and text.endswith("→ 7"), text


def test_a_page_without_the_samples_says_which_are_missing() -> None:
    """Trial 37 F7: a pod whose page lacks the counters (not a tensorrt_llm model) left the message at
    'no request rate yet (needs two samples…)' for ever, as if waiting would help."""
    none = [cap.PodCounters("p0", None, None, None)]
    state = cap.CapacityState()
    for t in (0.0, 15.0, 30.0):
        est = cap.estimate(none, state, cap.CapacityParams(prior_rps=10.0), t)
        state = est.state
    text = est.summary(0.8)
    assert "no Ready pod's page has the samples it reads" in text and "nv_inference_request_success" in text


def test_an_edited_prior_starts_the_correction_again() -> None:
    """Fresh-user trial 37 F1 (High): κ learned from a prior stayed when the user edited
    spec.autoscaling.capacity.requestsPerSecond, so the edit was accepted and ignored. κ now belongs to
    the prior it started from; a new prior (through the status JSON, as the operator carries it)
    starts it again."""
    old = cap.CapacityParams(prior_rps=9.4)
    state = cap.CapacityState()
    for k in range(3):  # one pod saturated at 9 requests/s: κ corrected towards 9
        state = cap.estimate(pods([9.0 * 15 * k], [100.0]), state, old, 15.0 * k).state
    assert state.capacity_rps is not None and state.capacity_rps < 9.4
    carried = cap.CapacityState.from_dict(json.loads(json.dumps(state.to_dict())))
    assert carried.prior_rps == 9.4
    new = cap.CapacityParams(prior_rps=40.0)
    est = cap.estimate(pods([9.0 * 45], [100.0]), carried, new, 45.0)
    assert est.capacity_rps == pytest.approx(40.0 + new.correction * (9.0 - 40.0))
    assert est.state.prior_rps == 40.0
    # unset: learned from the pods again (the extrapolated rate), not the old κ
    learned = cap.estimate(pods([9.0 * 60], [50.0]), est.state, cap.CapacityParams(), 60.0)
    assert learned.capacity_rps == pytest.approx(9.0)  # 9/s over max(active/max now 0.5, before 1)
    # unchanged prior: κ carries on
    same = cap.estimate(pods([9.0 * 60], [100.0]), carried, old, 60.0)
    assert same.capacity_rps is not None and same.capacity_rps < carried.capacity_rps + 1e-9


def test_a_restarted_pod_is_only_remembered() -> None:
    params = cap.CapacityParams(prior_rps=10.0)
    state = cap.estimate(pods([500.0], [10.0]), cap.CapacityState(), params, 0.0).state
    est = cap.estimate(pods([3.0], [10.0]), state, params, 15.0)  # counter went down: a new pod
    assert est.measured == 0 and est.arrival_rps is None
    assert est.state.pods[0].completed == 3.0


def test_state_round_trips_through_the_status_json() -> None:
    est = run([4.0, 6.0], [30.0, 40.0], cap.CapacityParams(prior_rps=10.0))
    state = asc.AutoscalerState((asc.Recommendation(1.0, 2),), (), est.state)
    text = json.dumps(state.to_dict())
    back = asc.AutoscalerState.from_dict(json.loads(text))
    assert back.capacity is not None and back.capacity.capacity_rps == pytest.approx(
        est.state.capacity_rps or 0
    )
    assert [p.name for p in back.capacity.pods] == ["p0", "p1"]
    # Without the capacity recommendation the JSON stays as before.
    assert "capacity" not in asc.AutoscalerState().to_dict()
    with pytest.raises(ValueError, match="capacity state is malformed"):
        asc.AutoscalerState.from_dict({"capacity": {"pods": [["p", "x", 1]]}})


def ramp(rates: list[float], params: cap.CapacityParams, period: float = 15.0) -> list[cap.CapacityEstimate]:
    """One pod, below saturation (active constant), completing ``rates[k]`` requests/s in tick k."""
    state, done, out = cap.CapacityState(), 0.0, []
    for k, rate in enumerate([0.0, *rates]):
        done += rate * period
        est = cap.estimate(pods([done], [20.0]), state, params, 1000.0 + k * period)
        state = est.state
        out.append(est)
    return out[1:]


def test_smoothing_follows_a_step_gradually() -> None:
    rates = [10.0] * 8 + [30.0] * 12
    raw = ramp(rates, cap.CapacityParams(prior_rps=10.0))
    smooth = ramp(rates, cap.CapacityParams(prior_rps=10.0, smoothing_s=30.0))
    assert [e.level_rps for e in raw] == pytest.approx(rates)  # no smoothing: the tick's rate
    after_step = [e.level_rps or 0.0 for e in smooth[8:]]
    assert 10.0 < after_step[0] < 30.0  # one tick after the step: part of the way
    assert after_step[-1] == pytest.approx(30.0, rel=0.05)  # settles on the new rate
    assert all(e.arrival_rps == pytest.approx(r) for e, r in zip(smooth, rates, strict=True))
    assert "smoothed" in smooth[8].summary(0.8)  # no forecast: the level is what is sized for


def test_no_scale_down_while_the_measured_rate_needs_the_ready_replicas() -> None:
    # Four pods serve 10 requests/s each (κ 10); the rate dips for a while and comes back. With 60 s
    # smoothing the level lags the return: sized for the level alone the count would fall below
    # four while the measured rate already needs all four again.
    params = cap.CapacityParams(target=1.0, prior_rps=10.0, smoothing_s=60.0)
    per_pod = [10.0] * 6 + [5.0] * 6 + [10.0] * 4
    state, done, out = cap.CapacityState(), [0.0] * 4, []
    for k, rate in enumerate([0.0, *per_pod]):
        done = [d + rate * 15.0 for d in done]
        est = cap.estimate(pods(done, [20.0] * 4), state, params, 1000.0 + k * 15.0)
        state = est.state
        out.append(est)
    back = out[13]  # the first tick after the rate came back
    assert back.arrival_rps == pytest.approx(40.0)
    assert (back.level_rps or 0.0) < 30.0  # the level lags the return: sized for it alone, 3
    assert back.desired == 4 and back.held
    assert "held at 4: this tick's rate needs them" in back.summary(1.0)
    dip = out[11]  # at the end of the dip both agree on fewer replicas: a scale-down is allowed
    assert dip.desired is not None and dip.desired < 4 and not dip.held
    # A spike is still filtered on the way up: never more than the Ready pods from the floor.
    spike = ramp([10.0] * 8 + [40.0], params)[-1]
    assert spike.desired is not None and spike.desired < 4


def test_a_pod_just_ready_without_data_counts_in_the_floor() -> None:
    # Issue 19 diagnosis (benchmark Azure ×10, t = 150 s with a 60 s scale-down window): four pods
    # serve 10 requests/s each, dip to 5, and come back; a fifth pod became Ready just before the tick,
    # so its page (taken while it was starting) has no samples. The measured rate needs four replicas
    # and five are Ready: the floor must not fall to the four pods with data and let the lagging level
    # scale one of the serving pods away in the middle of the rise.
    params = cap.CapacityParams(target=1.0, prior_rps=10.0, smoothing_s=60.0)
    per_pod = [10.0] * 6 + [5.0] * 6 + [11.0]
    state, done = cap.CapacityState(), [0.0] * 4
    est = None
    for k, rate in enumerate([0.0, *per_pod]):
        done = [d + rate * 15.0 for d in done]
        ready = pods(done, [20.0] * 4)
        if k == len(per_pod):  # the last tick: a fifth Ready pod without samples yet
            ready.append(cap.PodCounters("new", None, None, None))
        est = cap.estimate(ready, state, params, 1000.0 + k * 15.0)
        state = est.state
    assert est is not None and est.arrival_rps == pytest.approx(44.0)
    assert est.sized_replicas is not None and est.sized_replicas < 4  # the level lags the return
    assert est.desired == 5 and est.held  # ceil(44 / 10) = 5 of the 5 Ready pods
    assert "min(5 Ready pods, ceil(" in est.summary(1.0)


def test_the_trend_tracks_a_ramp_and_the_forecast_sizes_for_it() -> None:
    rates = [10.0 + 2.0 * k for k in range(30)]  # +2 requests/s per 15 s tick
    params = cap.CapacityParams(target=1.0, prior_rps=10.0, smoothing_s=30.0, forecast_s=60.0)
    last = ramp(rates, params)[-1]
    assert last.state.trend_rps == pytest.approx(2.0 / 15.0, rel=0.1)
    assert last.forecast_rps == pytest.approx((last.level_rps or 0) + last.state.trend_rps * 60.0)
    without = ramp(rates, dataclasses.replace(params, forecast_s=0.0))[-1]
    assert last.desired is not None and without.desired is not None
    assert last.desired > without.desired  # 60 s of the rise ahead: more replicas, earlier
    assert "rising: forecast" in last.summary(1.0)


def test_a_falling_trend_never_lowers_the_count() -> None:
    rates = [70.0 - 2.0 * k for k in range(30)]
    params = cap.CapacityParams(target=1.0, prior_rps=10.0, smoothing_s=30.0, forecast_s=120.0)
    with_forecast = ramp(rates, params)
    without = ramp(rates, dataclasses.replace(params, forecast_s=0.0))
    assert with_forecast[-1].state.trend_rps < 0
    assert [e.desired for e in with_forecast] == [e.desired for e in without]
    assert all(e.forecast_rps == e.level_rps for e in with_forecast)


def test_trend_state_round_trips_and_older_documents_read_as_no_trend() -> None:
    est = ramp([10.0, 12.0, 14.0], cap.CapacityParams(prior_rps=10.0, smoothing_s=30.0))[-1]
    back = cap.CapacityState.from_dict(json.loads(json.dumps(est.state.to_dict())))
    assert back.trend_rps == pytest.approx(est.state.trend_rps, abs=1e-6)
    assert back.time == pytest.approx(est.state.time or 0)
    old = {"pods": [["p0", 1.0, 3.0, 2.0]], "capacityRps": 9.0, "arrivalRps": 4.0}  # before the trend
    assert cap.CapacityState.from_dict(old) == cap.CapacityState(
        (cap.PodMemory("p0", 1.0, 3.0, 2.0),), 9.0, 4.0, 0.0, None
    )


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"target": 0.0}, "capacity target 0.0"),
        ({"target": 1.5}, "capacity target 1.5"),
        ({"prior_rps": -1.0}, "capacity prior -1.0"),
        ({"prior_rps": float("inf")}, "capacity prior inf"),
        ({"saturated_at": 0.0}, "saturated_at 0.0"),
        ({"correction": 0.0}, "capacity correction 0.0"),
        ({"smoothing_s": -1.0}, "capacity smoothing -1.0 s"),
        ({"forecast_s": float("nan")}, "capacity forecast nan s"),
        # the forecast projects the smoothed trend; without smoothing it would do nothing (trial 37 F2)
        ({"forecast_s": 60.0, "smoothing_s": 0.0}, "capacity forecast 60 s with smoothing 0"),
    ],
)
def test_bad_parameters_are_refused(kwargs: dict[str, float], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        cap.CapacityParams(**kwargs)


def test_unknown_counter_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown counter"):
        asc.PodSignals("p", counters={"queued": 3.0})


def test_the_capacity_policy_reads_only_the_exposition() -> None:
    """Two replicas whose exported pages agree but whose hidden executor queues differ get the same
    decisions from the capacity policy, tick after tick (it reads nothing the page does not carry)."""
    base = ReplicaInternals(
        requests=16, scheduled=16, max_active=16, kv_used_blocks=10, kv_max_blocks=100, tokens_per_block=32
    )
    rng = random.Random(3)
    a_pol = policies.capacity(1, 8, 2.0)
    b_pol = policies.capacity(1, 8, 2.0)
    for k in range(6):
        a = dataclasses.replace(base, completed=10 * k)
        b = dataclasses.replace(a, requests=16 + rng.randrange(1, 10_000))
        t = 30.0 + 15 * k
        obs_a = Observation(t, t, 1, (PodView(0, "Ready", tuple(samples(exposition(a)))),))
        obs_b = Observation(t, t, 1, (PodView(0, "Ready", tuple(samples(exposition(b)))),))
        assert policies.snapshot_of(obs_a) == policies.snapshot_of(obs_b)
        assert a_pol.decide(obs_a) == b_pol.decide(obs_b)
    assert a_pol.state == b_pol.state
    assert a_pol.state.capacity is not None and a_pol.state.capacity.arrival_rps is not None
    counters = signals_from_samples(samples(exposition(a))).counters()
    # The internals hold no finished request's lengths: the token histograms are exported empty.
    assert counters == {
        "completed": 50.0,
        "active": 16.0,
        "max": 16.0,
        "prompt_tokens": 0.0,
        "output_tokens": 0.0,
        "finished": 0.0,
    }


def test_the_simulators_prior_is_the_performance_models_saturated_rate() -> None:
    """One formula for κ's prior: the simulator's profile is ``perf.saturated_request_rate`` at the
    requests' mean lengths, output tokens/s of a saturated replica over the mean output."""
    config = Path(__file__).parents[1] / "fixtures/model-configs/meta-llama__Llama-3.1-70B-Instruct.json"
    spec = replica_setup(config, "H100", quantization="fp8", kv_cache_dtype="fp8", tp=2).spec
    reqs = [Request(0.0, 1000, 200), Request(1.0, 3000, 400)]  # means 2000 / 300
    limits = {
        "max_kv_tokens": spec.max_kv_tokens,
        "max_batch_size": spec.max_batch_size,
        "max_num_tokens": spec.max_num_tokens,
    }
    rate = perf.saturated_request_rate(spec.model, 2000, 300, **limits)
    assert policies.profiled_capacity_rps(reqs, spec) == rate
    tput = perf.steady_state_throughput(spec.model, 2000, 300, **limits)
    assert rate == pytest.approx(tput / 300)
    assert perf.saturated_request_rate(spec.model, 2000, 100, **limits) > rate  # shorter answers: more/s
    with pytest.raises(ValueError, match="osl 0"):
        perf.saturated_request_rate(spec.model, 2000, 0, **limits)


# --- spec.autoscaling.capacity ------------------------------------------------------------------
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "capacity-autoscaled-deployment.yaml"


def _autoscaling(capacity: dict[str, float] | None = None) -> AutoscalingSpec:
    section: dict[str, object] = {
        "enabled": True,
        "maxReplicas": 8,
        "targets": {"activeRequestUtilization": 0.8},
    }
    if capacity is not None:
        section["capacity"] = capacity
    return AutoscalingSpec.model_validate(section)


def test_the_field_turns_the_recommendation_on_with_the_benchmarks_defaults() -> None:
    assert asc.policy_from_spec(_autoscaling()).capacity is None
    on = asc.policy_from_spec(_autoscaling({})).capacity
    assert on is not None
    assert on == cap.CapacityParams(
        target=policies.CAPACITY_TARGET,
        prior_rps=None,
        smoothing_s=policies.CAPACITY_SMOOTHING_S,
        forecast_s=policies.CAPACITY_FORECAST_S,
    )
    assert (on.target, on.smoothing_s, on.forecast_s) == (0.8, 60.0, 0.0)  # benchmarks/RESULTS.md's pick
    set_ = asc.policy_from_spec(
        _autoscaling({"requestsPerSecond": 9.4, "target": 0.7, "smoothingSeconds": 30, "forecastSeconds": 60})
    ).capacity
    assert set_ == cap.CapacityParams(target=0.7, prior_rps=9.4, smoothing_s=30.0, forecast_s=60.0)


def test_the_example_manifest_is_the_simulators_capacity_policy() -> None:
    """examples/capacity-autoscaled-deployment.yaml, read as ``simulate --deployment`` reads it, is
    exactly ``--policy capacity`` with its prior: what the benchmark reports is what the field does."""
    docs = [d for d in yaml.safe_load_all(EXAMPLE.read_text()) if d and d["kind"] == "LLMDeployment"]
    (manifest,) = docs
    from_manifest = policies.from_deployment(manifest).policy
    prior = manifest["spec"]["autoscaling"]["capacity"]["requestsPerSecond"]
    assert from_manifest == policies.capacity(1, 64, prior).policy


def test_turning_the_recommendation_off_drops_its_memory() -> None:
    """Trial 37 F1: removing spec.autoscaling.capacity and adding it back kept the old κ."""
    on = asc.Policy(min_replicas=1, max_replicas=8, capacity=cap.CapacityParams(prior_rps=9.4))
    snap = asc.Snapshot(
        1, (asc.PodSignals("p0", asc.PodState.READY, {}, {"completed": 0.0, "active": 1.0, "max": 4.0}),)
    )
    state = asc.decide(snap, asc.AutoscalerState(), on, 0.0).state
    assert state.capacity is not None
    off = dataclasses.replace(on, capacity=None)
    assert asc.decide(snap, state, off, 15.0).state.capacity is None


def _quotient_and_count(text: str) -> tuple[float, int]:
    """The last ``= Q → N`` of a capacity message (the quotient and the count it gives)."""
    found = re.findall(r"= ([0-9.]+)\)* → (\d+)", text)
    assert found, text
    q, n = found[-1]
    return float(q), int(n)


def test_every_count_checks_from_the_quotient_in_the_message() -> None:
    """Fresh-user trial 37b F5: "smoothed 54.4/s, … capacity 8.5/s per replica (target 0.8) → 9" at
    3 significant figures recomputes as 54.4 / (8.5 × 0.8) = 8.000 → 8; the exact level 54.433 gives
    8.005 → 9. The message now gives the quotient, with as many digits as its ceiling needs."""
    params = cap.CapacityParams(target=0.8, prior_rps=8.5)
    state = cap.estimate(pods([0.0], [20.0]), cap.CapacityState(), params, 0.0).state
    est = cap.estimate(pods([54.433 * 15.0], [20.0]), state, params, 15.0)  # 54.433/s on one pod
    text = est.summary(params.target)
    assert est.desired == 9, text
    q, n = _quotient_and_count(text)
    assert n == 9 and math.ceil(q) == 9, text
    assert "54.433 / (8.5 × 0.8) = 8.005 → 9" in text, text
    # A quotient a hair above an integer keeps the digits that show it.
    state = cap.estimate(pods([0.0], [20.0]), cap.CapacityState(), params, 0.0).state
    est = cap.estimate(pods([(8.0 * 6.8 + 1e-6) * 15.0], [20.0]), state, params, 15.0)
    q, n = _quotient_and_count(est.summary(params.target))
    assert n == 9 and math.ceil(q) == 9 and q > 8.0, est.summary(params.target)
    # Over many ticks of a noisy ramp, with saturated pods, smoothing, a forecast and held counts,
    # every count is the ceiling of the quotient printed next to it (at least 1).
    rng = random.Random(7)
    for smoothing, forecast in ((0.0, 0.0), (60.0, 0.0), (60.0, 60.0)):
        params = cap.CapacityParams(target=0.8, prior_rps=8.5, smoothing_s=smoothing, forecast_s=forecast)
        state, done = cap.CapacityState(), [0.0] * 4
        held = 0
        for k in range(80):
            rate = (12.0 if (k // 10) % 2 == 0 else 4.0) + rng.random()  # dips and returns
            done = [d + rate * 15.0 * rng.uniform(0.9, 1.1) for d in done]
            active = [MAX if rng.random() < 0.2 else 20.0 for _ in done]
            est = cap.estimate(pods(done, active), state, params, 15.0 * k)
            state = est.state
            if est.desired is None:
                continue
            held += est.held
            text = est.summary(params.target)
            q, n = _quotient_and_count(text)
            cap_at = est.ready if est.held else n  # held: at most the Ready pods
            assert f"min({cap_at} Ready pods" in text or not est.held, text
            assert n == est.desired and min(cap_at, max(1, math.ceil(q))) == n, text
        assert smoothing == 0.0 or held > 0  # the held branch was exercised


_TERM = re.compile(
    r"([0-9.e+-]+)(?: × \(1 \+ (\d+)/(\d+)\))? / \(([0-9.e+-]+) × ([0-9.e+-]+)\) = ([0-9.]+)\)* → (\d+)"
)


def test_every_count_recomputes_from_its_printed_operands() -> None:
    """Fresh-user trial 38 F8a: "54.4 / (8.5 × 0.8) = 8.0000003 → 9" for an arrival rate of
    54.400002/s: the operands at 6 figures give 54.4 / 6.8 = 8 exactly, hence 8. The operands now carry
    the figures their quotient needs, and the quotient is computed from them."""
    params = cap.CapacityParams(target=0.8, prior_rps=8.5)
    state = cap.estimate(pods([0.0], [20.0]), cap.CapacityState(), params, 0.0).state
    est = cap.estimate(pods([54.400002 * 15.0], [20.0]), state, params, 15.0)
    text = est.summary(params.target)
    assert est.desired == 9 and "54.400002 / (8.5 × 0.8) = 8.0000003 → 9" in text, text
    # On the noisy ramp of the test above, every "A [× (1 + s/m)] / (B × C) = Q → N" recomputes.
    rng = random.Random(11)
    checked = 0
    for smoothing in (0.0, 60.0):
        params = cap.CapacityParams(target=0.8, prior_rps=8.5, smoothing_s=smoothing)
        state, done = cap.CapacityState(), [0.0] * 4
        for k in range(60):
            rate = (12.0 if (k // 10) % 2 == 0 else 4.0) + rng.random()
            done = [d + rate * 15.0 * rng.uniform(0.9, 1.1) for d in done]
            active = [MAX if rng.random() < 0.2 else 20.0 for _ in done]
            est = cap.estimate(pods(done, active), state, params, 15.0 * k)
            state = est.state
            for a, s, m, b, c, q, n in _TERM.findall(est.summary(params.target)):
                boost = 1.0 + int(s) / int(m) if s else 1.0
                again = float(a) * boost / (float(b) * float(c))
                # the printed quotient's ceiling is the recomputed one (the count beside it is that
                # ceiling, at least 1, or with "held", at most the pods: the test above)
                assert math.ceil(round(again, 9)) == math.ceil(float(q)), (a, q, n)
                assert abs(again - float(q)) <= 0.5 * 10 ** -(len(q.partition(".")[2]) or 0) + 1e-9, (a, q)
                checked += 1
    assert checked > 50


def test_a_rate_limited_count_says_its_wanted_count_is_the_windows() -> None:
    """Fresh-user trial 38 F8b: "wanted 6, floored at 8 by the scale-down rate limit (… = 4.695 → 5)":
    the 6 is the scale-down stabilization window's highest recommendation, not this tick's 5."""
    policy = asc.Policy(
        min_replicas=1,
        max_replicas=16,
        active_request_utilization=0.5,
        kv_cache_utilization=None,
        scale_down=dataclasses.replace(asc.DEFAULT_SCALE_DOWN, stabilization_window_seconds=120),
    )
    recs = (asc.Recommendation(-30.0, 6), asc.Recommendation(-15.0, 4))
    state = asc.AutoscalerState(recommendations=recs)
    ready = tuple(
        asc.PodSignals(f"p{i}", asc.PodState.READY, {"activeRequestUtilization": 0.25}) for i in range(10)
    )
    result = asc.decide(asc.Snapshot(10, ready), state, policy, 0.0)
    assert result.to_replicas == 9 and result.recommendation == 5, result
    assert "wanted 6 (the highest recommendation in the scale-down window's last 120s; this tick's: 5)" in (
        result.message
    ), result.message


def test_a_rate_limited_scale_down_below_min_replicas_wants_min_replicas() -> None:
    """Fresh-user trial 46 T8: "wanted 0, floored at 2 by the scale-down rate limit" with
    minReplicas 1. HPA bounds a scale-down by max(minReplicas, the rate limit) in one step (kubernetes
    v1.34.4 pkg/controller/podautoscaler/horizontal.go convertDesiredReplicasWithBehaviorRate), so the
    count wanted is minReplicas; what the signals asked for is said beside it."""
    policy = asc.Policy(
        min_replicas=1,
        max_replicas=3,
        active_request_utilization=0.5,
        kv_cache_utilization=None,
        scale_down=dataclasses.replace(asc.DEFAULT_SCALE_DOWN, stabilization_window_seconds=0),
    )
    idle = tuple(
        asc.PodSignals(f"p{i}", asc.PodState.READY, {"activeRequestUtilization": 0.0}) for i in range(3)
    )
    result = asc.decide(asc.Snapshot(3, idle), asc.AutoscalerState(), policy, 0.0)
    assert (result.to_replicas, result.recommendation, result.reason) == (2, 0, asc.Reason.SCALE_DOWN_LIMIT)
    assert result.message.startswith(
        "wanted 1 (minReplicas; the signals ask for 0), floored at 2 by the scale-down rate limit ("
    ), result.message
    # at minReplicas' own floor the message names minReplicas as before
    lower = dataclasses.replace(policy, scale_down=asc.HPA_DEFAULT_SCALE_DOWN)
    lower = dataclasses.replace(
        lower, scale_down=dataclasses.replace(lower.scale_down, stabilization_window_seconds=0)
    )
    result = asc.decide(asc.Snapshot(3, idle), asc.AutoscalerState(), lower, 0.0)
    assert result.message.startswith("wanted 0, floored at 1 by minReplicas ("), result.message
