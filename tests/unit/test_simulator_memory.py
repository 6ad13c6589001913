"""A run keeps only the metric samples a policy can still read (trial 45 A18): its memory does not grow
with replicas × simulated seconds, and its results are those of a run that kept every sample."""

from __future__ import annotations

from typing import Any

import pytest

from trtllm_operator.simulate import policies
from trtllm_operator.simulate.engine import ReplicaSpec, Simulation
from trtllm_operator.simulate.perf import IterationModel
from trtllm_operator.simulate.report import summarize, timeline
from trtllm_operator.simulate.traces import Request, synthetic_poisson

MODEL = IterationModel(fixed_s=0.01, per_token_s=0.0005, per_kv_token_s=1e-6)
SPEC = ReplicaSpec(gpus=1, max_kv_tokens=40_000, max_batch_size=32, max_num_tokens=4096, model=MODEL)


class KeepEverySample(Simulation):
    """The run as it was before the fix: every sample of every Ready replica is kept."""

    def _forget_samples_before(self, i: int) -> None:
        pass


def _trace() -> list[Request]:
    calm = synthetic_poisson(2.0, 60.0, seed=1, input_tokens=500, output_tokens=100)
    busy = [
        Request(60.0 + r.arrival_s, r.input_tokens, r.output_tokens)
        for r in synthetic_poisson(30.0, 120.0, seed=2, input_tokens=500, output_tokens=100)
    ]
    quiet = [Request(180.0 + 5.0 * i, 500, 100) for i in range(60)]
    return calm + busy + quiet


def _outputs(cls: type[Simulation], policy_text: str) -> dict[str, Any]:
    reqs = _trace()
    pol = policies.parse_policy(policy_text, reqs, SPEC, min_replicas=1, max_replicas=16, cold_start_s=20.0)
    sim = cls(reqs, SPEC, pol, initial_replicas=2, cold_start_s=20.0, seed=3)
    result = sim.run()
    return {
        "report": summarize(result, 1000.0),
        "timeline": timeline(result, 1000.0, interval_s=10.0),
        "replicas": result.replica_history,
        "queue": result.queue_history,
        "decisions": list(getattr(pol, "decisions", [])),
        "first_token": result.first_token_s,
        "done": result.done_s,
    }


@pytest.mark.parametrize(
    "policy_text",
    [
        "builtin",
        "capacity",
        "capacity-learned",
        "kv-only",
        "hpa-queue-compute",
        "wva-saturation",
        "static:2",
        "oracle",
    ],
)
def test_forgetting_old_samples_changes_no_result(policy_text: str) -> None:
    kept = _outputs(KeepEverySample, policy_text)
    assert _outputs(Simulation, policy_text) == kept
    if policy_text not in {"static:2", "kv-only"}:  # the trace moves these, so their samples were read
        assert {t for _, t, _ in kept["replicas"]} != {2}


@pytest.mark.parametrize("policy_text", ["builtin", "static:4", "wva-saturation"])
def test_the_samples_kept_do_not_grow_with_simulated_time(policy_text: str) -> None:
    held = []
    for span in (2_000.0, 8_000.0):
        reqs = [Request(0.0, 100, 5), Request(span, 100, 5)]
        pol = policies.parse_policy(policy_text, reqs, SPEC, min_replicas=4, max_replicas=4)
        sim = Simulation(reqs, SPEC, pol, initial_replicas=4)
        sim.run()
        bound = (pol.sync_period_s + pol.metrics_lag_s) / sim.sample_period_s + 2
        assert len(sim.samples) == len(sim.samples_t) <= bound, (span, len(sim.samples))
        held.append(sum(len(s) for s in sim.samples))
    assert held[1] <= held[0] + 4  # one day or one hour: the same few samples, not one per second
