"""The discrete-event replica/fleet model: hand-computed timings and invariants."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from trtllm_operator.simulate import policies
from trtllm_operator.simulate.engine import Observation, ReplicaSpec, Simulation, _Replica
from trtllm_operator.simulate.perf import IterationModel
from trtllm_operator.simulate.report import summarize
from trtllm_operator.simulate.traces import Request, read_azure_csv, time_scale

AZURE = Path(__file__).resolve().parents[1] / "fixtures" / "traces" / "azure-llm-2023-conv-head800.csv"

#: 10 ms per iteration + 1 ms per scheduled token + 10 µs per cached token attended.
MODEL = IterationModel(fixed_s=0.01, per_token_s=0.001, per_kv_token_s=1e-5)


def a_replica(**kw: int) -> ReplicaSpec:
    args = {"gpus": 1, "max_kv_tokens": 100_000, "max_batch_size": 256, "max_num_tokens": 8192}
    args.update(kw)
    return ReplicaSpec(model=MODEL, **args)  # type: ignore[arg-type]


@dataclass
class Scripted:
    """A policy returning a fixed sequence of desired counts, one per tick (then the last one)."""

    counts: Sequence[int]
    name: str = "scripted"
    sync_period_s: float = 10.0
    metrics_lag_s: float = 0.0
    cold_start_s: float | None = None
    ticks: int = 0

    def decide(self, obs: Observation) -> int:
        self.ticks += 1
        return self.counts[min(self.ticks - 1, len(self.counts) - 1)]


def run(reqs: list[Request], spec: ReplicaSpec, replicas: int = 1, **kw: object) -> Simulation:
    sim = Simulation(reqs, spec, policies.StaticPolicy(replicas), initial_replicas=replicas, **kw)  # type: ignore[arg-type]
    sim.result = sim.run()  # type: ignore[attr-defined]
    return sim


def test_single_request_timing_is_the_iteration_model() -> None:
    sim = run([Request(0.0, 100, 5)], a_replica())
    # Context iteration: 100 tokens → 10 ms + 100 ms; it emits the first token.
    assert sim.first_token[0] == pytest.approx(0.11)
    # Four decode iterations of 1 token each, attending 101, 102, 103, 104 cached tokens.
    assert sim.done[0] == pytest.approx(0.11 + 4 * 0.011 + 1e-5 * (101 + 102 + 103 + 104))


def test_guaranteed_no_evict_waits_for_the_full_reservation() -> None:
    reqs = [Request(0.0, 500, 100), Request(0.0, 500, 100)]
    sim = run(reqs, a_replica(max_kv_tokens=1000))  # 600 + 600 > 1000: B must wait for A to finish
    assert sim.first_token[0] == pytest.approx(0.51)
    assert sim.first_token[1] == pytest.approx(sim.done[0] + 0.51)
    both = run(reqs, a_replica(max_kv_tokens=1200))  # both reservations fit: one context iteration
    assert both.first_token[0] == both.first_token[1] == pytest.approx(1.01)


def test_max_batch_size_bounds_the_batch() -> None:
    reqs = [Request(0.0, 10, 3)] * 3
    sim = run(reqs, a_replica(max_batch_size=2))
    assert sim.first_token[0] == sim.first_token[1] == pytest.approx(0.03)
    assert sim.first_token[2] > max(sim.done[0], sim.done[1]) - 1e-12


def test_max_num_tokens_budget_counts_decoding_sequences() -> None:
    reqs = [Request(0.0, 600, 10), Request(0.0, 600, 10)]
    sim = run(reqs, a_replica(max_num_tokens=1000))
    assert sim.first_token[0] == pytest.approx(0.61)
    # Next iteration: 600 prompt tokens + 1 decoding token, attending A's 601 cached tokens.
    assert sim.first_token[1] == pytest.approx(0.61 + 0.01 + 0.601 + 601e-5)


def test_unschedulable_requests_are_counted_dropped() -> None:
    reqs = [Request(0.0, 9000, 10), Request(0.0, 100, 50_000), Request(0.0, 10, 10)]
    sim = run(reqs, a_replica(max_kv_tokens=20_000))
    summary = summarize(sim.result, slo_ttft_ms=1000)  # type: ignore[attr-defined]
    assert summary["dropped"] == 2 and summary["requests"] == 3
    assert summary["slo_attainment"] == pytest.approx(1 / 3)
    assert math.isnan(sim.first_token[0]) and not math.isnan(sim.done[2])


def test_cold_start_delays_the_first_replica() -> None:
    sim = Simulation([Request(0.0, 10, 2)], a_replica(), Scripted([1]), initial_replicas=0, cold_start_s=30.0)
    sim.run()
    # The first tick (10 s) creates the replica; it serves 30 s later.
    assert sim.first_token[0] == pytest.approx(40.0 + 0.02)


def test_pods_beyond_max_gpus_stay_pending_and_cost_nothing() -> None:
    reqs = [Request(float(t), 10, 2) for t in range(100)]
    sim = Simulation(reqs, a_replica(gpus=2), Scripted([3]), initial_replicas=1, max_gpus=4, cold_start_s=5.0)
    result = sim.run()
    # At most 2 replicas × 2 GPUs ever hold GPUs; the third pod stays Pending.
    assert result.gpu_seconds <= 4 * result.end_s + 1e-9
    assert result.gpu_seconds > 2 * result.end_s  # the second replica did start


def test_scale_down_drains_running_sequences_before_releasing_gpus() -> None:
    reqs = [Request(0.0, 10, 5000), Request(0.0, 10, 5000)]
    sim = Simulation(reqs, a_replica(), Scripted([1]), initial_replicas=2, routing="least-outstanding")
    result = sim.run()
    assert all(not math.isnan(d) for d in result.done_s)  # both finished although one replica left
    # Both replicas held their GPU until their sequence finished (they run in lock-step).
    assert result.gpu_seconds == pytest.approx(2 * result.end_s, rel=1e-6)


class Checked(Simulation):
    """A simulation that asserts the replica invariants after every scheduling step."""

    def _check(self, r: _Replica) -> None:
        spec = self.spec
        assert 0 <= r.kv_reserved <= spec.max_kv_tokens
        assert 0 <= r.ctx_tokens <= r.kv_reserved
        assert len(r.heap) <= spec.max_batch_size
        assert self.waiting >= 0 and self.gpu_seconds >= 0

    def _start_iteration(self, r: _Replica, now: float) -> None:
        super()._start_iteration(r, now)
        self._check(r)

    def _end_iteration(self, r: _Replica, now: float) -> None:
        super()._end_iteration(r, now)
        self._check(r)


@pytest.mark.parametrize(
    "policy", ["builtin", "hpa-queue-compute", "kv-only", "wva-saturation", "static:2", "oracle"]
)
@pytest.mark.parametrize("routing", ["random", "least-outstanding"])
def test_every_request_finishes_or_is_dropped_and_capacity_holds(policy: str, routing: str) -> None:
    reqs = time_scale(read_azure_csv(AZURE), 20.0)
    spec = a_replica(max_kv_tokens=60_000, max_batch_size=64, max_num_tokens=4096)
    pol = policies.parse_policy(policy, reqs, spec)
    sim = Checked(reqs, spec, pol, initial_replicas=2, cold_start_s=10.0, routing=routing, seed=3)
    result = sim.run()
    served = sum(1 for d in result.done_s if not math.isnan(d))
    assert served + result.dropped == len(reqs)
    for req, first, done in zip(reqs, result.first_token_s, result.done_s, strict=True):
        if not math.isnan(done):
            assert req.arrival_s < first <= done
    assert not sim.replicas  # everything released at the end


def test_identical_results_for_a_fixed_seed() -> None:
    reqs = time_scale(read_azure_csv(AZURE), 20.0)
    spec = a_replica(max_kv_tokens=60_000, max_batch_size=64, max_num_tokens=4096)

    def once(seed: int) -> tuple[dict[str, object], list[float]]:
        sim = Simulation(reqs, spec, policies.builtin(), initial_replicas=2, cold_start_s=10.0, seed=seed)
        result = sim.run()
        return summarize(result, 1000), result.first_token_s

    first, again, other = once(5), once(5), once(6)
    assert first == again
    assert first[1] != other[1]  # the seed drives the random routing


def test_reservation_uses_the_clients_max_tokens() -> None:
    reqs = [Request(0.0, 100, 10), Request(0.0, 100, 10)]
    tight = run(reqs, a_replica(max_kv_tokens=1000))
    assert tight.first_token[0] == tight.first_token[1]  # 110 + 110 tokens fit together
    loose = run(reqs, a_replica(max_kv_tokens=1000, reserve_output_tokens=800))
    # Each reserves 100 + 800 tokens: the second waits for the first to finish.
    assert loose.first_token[1] == pytest.approx(loose.done[0] + 0.01 + 0.1)
    # Alone in its batch: context iteration 0.01 + 0.1 s, then 9 decode steps of 11 ms + KV reads.
    assert loose.done[0] == pytest.approx(0.11 + 9 * 0.011 + 1e-5 * sum(range(101, 110)))


def test_a_simulation_refuses_requests_beyond_the_span_a_trace_may_have() -> None:
    """Fresh-user trial 43 F1: 10^12 simulated seconds did not end; the engine's cost grows with the
    simulated time. The command refuses such a trace first (traces.span_error); the engine guards too."""
    from trtllm_operator.simulate.traces import MAX_TRACE_SPAN_S  # noqa: PLC0415

    spec = a_replica()
    Simulation([Request(float(MAX_TRACE_SPAN_S), 10, 10)], spec, policies.StaticPolicy(1))
    with pytest.raises(ValueError, match="later than the 86400 s a simulated trace may span"):
        Simulation([Request(MAX_TRACE_SPAN_S + 0.5, 10, 10)], spec, policies.StaticPolicy(1))
