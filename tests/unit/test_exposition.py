"""The one upstream-faithful exposition (metrics/exposition.py) and the simulator replicas that export it.

Expected values come from the upstream relations, not from the code under test:

* tensorrtllm_backend v0.19.0 ``inflight_batcher_llm/src/model_instance_state.cc`` ``WaitForStats()``:
  ``waiting = numActiveRequests − numScheduledRequests``; KV ``fraction = used / max``;
* TensorRT-LLM ``cpp/tensorrt_llm/executor/executorImpl.cpp``: the executor fetches new requests only
  while ``numActiveRequests < mMaxNumActiveRequests`` (``maxNewRequests = max − active``), so
  ``active ≤ max``; ``mMaxNumActiveRequests = getMaxNumSequences()`` = max batch size × pp
  (``batch_manager/trtGptModel.h``); its queue (``numQueuedRequests``) has no Triton family;
* Triton core ``src/metric_model_reporter.h``: first-response buckets 100/500/2000/5000 ms, only with
  ``histogram_latencies``.
"""

from __future__ import annotations

import dataclasses
import random

import pytest
from hypothesis import given
from hypothesis import strategies as st
from prometheus_client import Metric

from trtllm_operator.emulator.exposition import render
from trtllm_operator.metrics.exposition import (
    FIRST_RESPONSE_BUCKETS_MS,
    FirstResponseHistogram,
    ReplicaInternals,
    exposition,
    samples,
)
from trtllm_operator.metrics.signals import signals_from_samples, signals_from_text
from trtllm_operator.simulate import policies
from trtllm_operator.simulate.engine import Observation, PodView, ReplicaSpec, Simulation
from trtllm_operator.simulate.perf import IterationModel
from trtllm_operator.simulate.traces import Request, synthetic_poisson

MODEL = IterationModel(fixed_s=0.01, per_token_s=0.001, per_kv_token_s=1e-5)


def gauge(page: list[tuple[str, object, float]], name: str, **labels: str) -> float:
    hits = [
        v
        for n, lab, v in page
        if n == name and all(lab.get(k) == want for k, want in labels.items())  # type: ignore[attr-defined]
    ]
    assert len(hits) == 1, (name, labels, hits)
    return hits[0]


def request_metric(page: list[tuple[str, object, float]], kind: str) -> float:
    return gauge(page, "nv_trt_llm_request_metrics", model="tensorrt_llm", request_type=kind)


def kv_metric(page: list[tuple[str, object, float]], kind: str) -> float:
    return gauge(page, "nv_trt_llm_kv_cache_block_metrics", model="tensorrt_llm", kv_cache_block_type=kind)


@st.composite
def internals(draw: st.DrawFn) -> ReplicaInternals:
    max_active = draw(st.integers(1, 512))
    requests = draw(st.integers(0, 2000))
    scheduled = draw(st.integers(0, min(requests, max_active)))
    max_blocks = draw(st.integers(0, 10_000))
    return ReplicaInternals(
        requests=requests,
        scheduled=scheduled,
        context=draw(st.integers(0, scheduled)),
        max_active=max_active,
        kv_used_blocks=draw(st.integers(0, max_blocks)),
        kv_max_blocks=max_blocks,
        tokens_per_block=32,
    )


@given(internals())
def test_request_and_kv_relations_hold_for_every_state(s: ReplicaInternals) -> None:
    page = samples(exposition(s))
    active, waiting = request_metric(page, "active"), request_metric(page, "waiting")
    scheduled, max_ = request_metric(page, "scheduled"), request_metric(page, "max")
    assert max_ == s.max_active
    assert active <= max_  # the executor fetches only while active < max
    assert active == min(s.requests, s.max_active)
    assert waiting == active - scheduled  # WaitForStats: numActiveRequests − numScheduledRequests
    assert 0 <= waiting <= max_ - scheduled
    used, free, mx = kv_metric(page, "used"), kv_metric(page, "free"), kv_metric(page, "max")
    assert used + free == mx
    assert kv_metric(page, "fraction") == (used / mx if mx else 0.0)
    assert gauge(page, "nv_inference_pending_request_count", model="tensorrt_llm") == 0


def test_the_executor_queue_leaves_no_trace_on_the_page() -> None:
    """Two replicas that differ only in requests the executor has not fetched (beyond max) export
    the same page: ``numQueuedRequests`` is not exported by any backend version."""
    base = ReplicaInternals(
        requests=64, scheduled=64, max_active=64, kv_used_blocks=500, kv_max_blocks=1000, tokens_per_block=32
    )
    backlog = dataclasses.replace(base, requests=64 + 700)
    assert backlog.queued == 700 and base.queued == 0
    assert samples(exposition(backlog)) == samples(exposition(base))
    assert request_metric(samples(exposition(backlog)), "waiting") == 0  # waiting is not a backlog


def test_invalid_internal_states_are_refused() -> None:
    ok = {"requests": 10, "max_active": 8, "kv_used_blocks": 1, "kv_max_blocks": 2, "tokens_per_block": 32}
    with pytest.raises(ValueError, match="scheduled 9"):
        ReplicaInternals(scheduled=9, **ok)  # more than max
    with pytest.raises(ValueError, match="kv_used_blocks 3"):
        ReplicaInternals(scheduled=1, **{**ok, "kv_used_blocks": 3})


def test_first_response_histogram_only_with_histogram_latencies() -> None:
    h = FirstResponseHistogram()
    for ms in (50, 100, 101, 700, 1999, 2500, 9000):
        h.observe(ms)
    s = ReplicaInternals(
        requests=0, scheduled=0, max_active=8, kv_used_blocks=0, kv_max_blocks=8, tokens_per_block=32,
        first_response=h,
    )  # fmt: skip
    names = {n for n, _, _ in samples(exposition(s))}
    assert not any(n.startswith("nv_inference_first_response_histogram_ms") for n in names)
    page = samples(exposition(dataclasses.replace(s, histogram_latencies=True)))
    buckets = {
        lab["le"]: v  # type: ignore[index]
        for n, lab, v in page
        if n == "nv_inference_first_response_histogram_ms_bucket" and lab["model"] == "ensemble"  # type: ignore[index]
    }
    # le is inclusive (Prometheus); bounds 100/500/2000/5000 ms (Triton core defaults)
    assert [f"{b:g}" for b in FIRST_RESPONSE_BUCKETS_MS] == ["100", "500", "2000", "5000"]
    assert buckets == {"100": 2, "500": 3, "2000": 5, "5000": 6, "+Inf": 7}
    assert gauge(page, "nv_inference_first_response_histogram_ms_sum", model="ensemble") == sum(
        (50, 100, 101, 700, 1999, 2500, 9000)
    )
    # before server PR #8580 only decoupled models report it
    page = samples(exposition(dataclasses.replace(s, histogram_latencies=True, decoupled=False)))
    assert not any(n.startswith("nv_inference_first_response") for n, _, _ in page)


def test_rendered_page_reads_back_as_the_samples() -> None:
    """The text page and the parsed samples give the operator the same signals."""
    s = ReplicaInternals(
        requests=90, scheduled=40, context=3, max_active=64, kv_used_blocks=700, kv_max_blocks=1000,
        tokens_per_block=32, completed=12,
    )  # fmt: skip
    metrics = []
    for f in exposition(s):
        m = Metric(f.name, f.documentation, f.type)
        for name, labels, value in f.samples:
            m.add_sample(name, dict(labels), value)
        metrics.append(m)
    from_text, from_samples = signals_from_text(render(metrics)), signals_from_samples(samples(exposition(s)))
    assert from_text == from_samples
    # The capacity recommendation's counters too (the text parser names the counter ``..._total``).
    assert from_text.counters() == from_samples.counters()
    assert from_text.counters() == {
        "completed": 12.0,
        "active": 64.0,
        "max": 64.0,
        "prompt_tokens": 0.0,
        "output_tokens": 0.0,
        "finished": 0.0,
    }


def spec(**kw: int) -> ReplicaSpec:
    args = {"gpus": 1, "max_kv_tokens": 60_000, "max_batch_size": 16, "max_num_tokens": 4096}
    args.update(kw)
    return ReplicaSpec(model=MODEL, **args)  # type: ignore[arg-type]


class Recorder:
    """A static policy that keeps every observation it is given."""

    name = "recorder"
    sync_period_s = 2.0
    metrics_lag_s = 0.0
    cold_start_s: float | None = None

    def __init__(self) -> None:
        self.seen: list[Observation] = []

    def decide(self, obs: Observation) -> int:
        self.seen.append(obs)
        return 1


def test_simulated_replicas_export_the_upstream_relations_and_monotonic_counters() -> None:
    """A saturated simulated replica: active stays ≤ max while requests pile up unseen; counters
    (success, count, first responses) never decrease between scrapes."""
    reqs = synthetic_poisson(40.0, 60.0, seed=3, input_tokens=400, output_tokens=200)
    rec = Recorder()
    sim = Simulation(reqs, spec(), rec, initial_replicas=1)
    sim.run()
    pages = [v.metrics for obs in rec.seen for v in obs.pods if v.metrics is not None]
    assert len(pages) > 20
    last: dict[str, float] = {}
    saturated = 0
    for exported in pages:
        page = list(exported)
        active, max_ = request_metric(page, "active"), request_metric(page, "max")
        scheduled, waiting = request_metric(page, "scheduled"), request_metric(page, "waiting")
        assert max_ == 16 and active <= max_ and waiting == active - scheduled <= max_ - scheduled
        assert kv_metric(page, "used") + kv_metric(page, "free") == kv_metric(page, "max")
        saturated += active == max_
        for name, model in (
            ("nv_inference_request_success", "ensemble"),
            ("nv_inference_count", "ensemble"),
            ("nv_inference_first_response_histogram_ms_count", "ensemble"),
        ):
            value = gauge(page, name, model=model)
            assert value >= last.get(name, 0.0), name
            last[name] = value
    assert saturated > 0  # 40 req/s against a 16-sequence replica saturates it
    assert last["nv_inference_request_success"] > 0


def test_the_simulated_policy_reads_only_the_exposition() -> None:
    """What the policy gets per pod is the exported page; the hidden executor queue changes nothing
    the policy sees, and every value it gets is the operator's own parse of that page."""
    reqs = synthetic_poisson(40.0, 40.0, seed=4, input_tokens=400, output_tokens=200)
    rec = Recorder()
    Simulation(reqs, spec(), rec, initial_replicas=1).run()
    for obs in rec.seen:
        for view in obs.pods:
            assert view.metrics is None or all(
                isinstance(n, str) and isinstance(v, float) for n, _, v in view.metrics
            )
            names = {n for n, _, _ in view.metrics or ()}
            assert not any("queued" in n for n in names)
        snap = policies.snapshot_of(obs)
        for view, pod in zip(obs.pods, snap.pods, strict=True):
            expected = signals_from_samples(view.metrics).values() if view.metrics is not None else {}
            assert dict(pod.values) == dict(expected)
            counters = signals_from_samples(view.metrics).counters() if view.metrics is not None else {}
            assert dict(pod.counters) == counters
    # A backlog beyond max: same pages, so the same snapshot and the same decision.
    a = ReplicaInternals(
        requests=16, scheduled=16, max_active=16, kv_used_blocks=10, kv_max_blocks=100, tokens_per_block=32
    )
    b = dataclasses.replace(a, requests=16 + random.Random(1).randrange(1, 10_000))
    obs_a = Observation(30.0, 30.0, 1, (PodView(0, "Ready", tuple(samples(exposition(a)))),))
    obs_b = Observation(30.0, 30.0, 1, (PodView(0, "Ready", tuple(samples(exposition(b)))),))
    assert policies.snapshot_of(obs_a) == policies.snapshot_of(obs_b)
    pa, pb = policies.builtin(1, 8), policies.builtin(1, 8)
    assert pa.decide(obs_a) == pb.decide(obs_b)


def test_request_counts_add_up_in_the_simulation() -> None:
    reqs = [Request(0.1 * i, 100, 20) for i in range(50)]
    rec = Recorder()
    Simulation(reqs, spec(), rec, initial_replicas=1).run()
    page = next(v.metrics for obs in reversed(rec.seen) for v in obs.pods if v.metrics is not None)
    assert page is not None
    assert gauge(list(page), "nv_inference_request_success", model="ensemble") <= 50


def token_histogram(page: list[tuple[str, object, float]], name: str, kind: str) -> dict[str, float]:
    """``_count``, ``_sum`` and each ``le`` bucket of one token-length histogram of ``tensorrt_llm``."""
    out = {
        suffix: gauge(page, f"{name}_{suffix}", model="tensorrt_llm", response_metric_type=kind)
        for suffix in ("count", "sum")
    }
    for le in ("10", "50", "100", "500", "1000", "+Inf"):
        out[le] = gauge(page, f"{name}_bucket", model="tensorrt_llm", response_metric_type=kind, le=le)
    return out


def test_simulated_replicas_export_the_backends_token_length_histograms() -> None:
    """tensorrtllm_backend ≥ v0.16.0 (v0.19.0 ``custom_metrics_reporter.cc`` ``InitializeReporter``,
    ``model_instance_state.cc`` ``reportCustomMetrics``): ``nv_llm_input_token_len`` and
    ``nv_llm_output_token_len``, buckets 10/50/100/500/1000, label
    ``response_metric_type="total_input_tokens"`` / ``"total_output_tokens"``, one observation per
    request when its last response is sent. Here: known lengths, so the last page's sums are the
    finished requests' prompt and output tokens, and each request lands in its bucket."""
    reqs = [Request(0.05 * i, 40 if i % 2 else 700, 8 if i % 2 else 60) for i in range(40)]
    rec = Recorder()
    Simulation(reqs, spec(), rec, initial_replicas=1).run()
    pages = [list(v.metrics) for obs in rec.seen for v in obs.pods if v.metrics is not None]
    last_count = 0.0
    for page in pages:
        prompt = token_histogram(page, "nv_llm_input_token_len", "total_input_tokens")
        output = token_histogram(page, "nv_llm_output_token_len", "total_output_tokens")
        done = gauge(page, "nv_inference_request_success", model="tensorrt_llm")
        # Observed at completion: each histogram counts exactly the finished requests.
        assert prompt["count"] == output["count"] == prompt["+Inf"] == done >= last_count
        last_count = done
        # Half the finished requests have 40-token prompts (≤ 50), half 700 (≤ 1000); the odd
        # ones arrive second, so at most one more long than short has finished.
        assert prompt["10"] == 0 and prompt["50"] == prompt["100"] == prompt["500"]
        assert prompt["1000"] == prompt["+Inf"]
        short = prompt["50"]
        assert prompt["sum"] == short * 40 + (done - short) * 700
        assert output["sum"] == short * 8 + (done - short) * 60
    assert 0 < short < last_count  # both lengths were observed by the last scrape
