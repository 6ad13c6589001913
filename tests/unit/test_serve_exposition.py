"""trtllm-serve's ``/prometheus/metrics`` page, as simulated replicas served by it export it (issue 19).

Expected values come from upstream (NVIDIA/TensorRT-LLM, 1.1/1.2 line; the module docstring of
metrics/serve_exposition.py names the stored versions), written out here rather than taken from the code
under test:

* ``tensorrt_llm/metrics/collector.py``: a counter ``request_success_total`` labelled ``model_name``,
  ``engine_type``, ``finished_reason``; histograms ``e2e_request_latency_seconds``,
  ``time_to_first_token_seconds``, ``time_per_output_token_seconds``, ``request_queue_time_seconds``,
  labelled ``model_name``, ``engine_type``, with the bucket lists below;
* ``tensorrt_llm/serve/openai_server.py``: labels ``model_name="undefined"``, ``engine_type="undefined"``;
  metrics logged once per request, when it has finished (``_extract_metrics``);
* ``tensorrt_llm/executor/result.py`` ``_process_req_perf_metrics``: TTFT = first token − arrival,
  E2E = last token − arrival, queue = first scheduled − arrival, TPOT = (last − first token) /
  (output tokens − 1) for more than one output token.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from trtllm_operator.commands.simulate import _server_spec, replica_frontend
from trtllm_operator.metrics.exposition import Family
from trtllm_operator.metrics.serve_exposition import (
    FinishedRequest,
    ServeMetrics,
    read_serve_page,
    render_serve_page,
)
from trtllm_operator.metrics.signals import signals_from_samples
from trtllm_operator.simulate.engine import Observation, ReplicaSpec, Simulation
from trtllm_operator.simulate.perf import IterationModel
from trtllm_operator.simulate.traces import Request, synthetic_poisson

#: Upstream's buckets (collector.py), written out.
LATENCY = [0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0,
           240.0, 480.0, 960.0, 1920.0, 7680.0]  # fmt: skip
TTFT = [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
        20.0, 40.0, 80.0, 160.0, 640.0, 2560.0]  # fmt: skip
TPOT = [0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0,
        40.0, 80.0]  # fmt: skip
UPSTREAM_BUCKETS = {
    "e2e_request_latency_seconds": LATENCY,
    "time_to_first_token_seconds": TTFT,
    "time_per_output_token_seconds": TPOT,
    "request_queue_time_seconds": LATENCY,
}
HISTOGRAM_NAMES = set(UPSTREAM_BUCKETS)
LABELS = {"model_name": "undefined", "engine_type": "undefined"}

Page = Sequence[tuple[str, Mapping[str, str], float]]


class Recorder:
    """A static policy that keeps every observation it is given."""

    name = "recorder"
    sync_period_s = 0.5
    metrics_lag_s = 0.0
    cold_start_s: float | None = None

    def __init__(self) -> None:
        self.seen: list[Observation] = []

    def decide(self, obs: Observation) -> int:
        self.seen.append(obs)
        return 1


def serve_spec(**kw: object) -> ReplicaSpec:
    args: dict[str, object] = {
        "gpus": 1,
        "max_kv_tokens": 60_000,
        "max_batch_size": 16,
        "max_num_tokens": 4096,
        "model": IterationModel(fixed_s=0.01, per_token_s=0.001, per_kv_token_s=1e-5),
        "frontend": "trtllm-serve",
    }
    args.update(kw)
    return ReplicaSpec(**args)  # type: ignore[arg-type]


def pages_of(rec: Recorder) -> list[tuple[float, Page]]:
    """(sample time, page) of every Ready pod's scrape the policy saw."""
    return [(obs.sample_time_s, v.metrics) for obs in rec.seen for v in obs.pods if v.metrics is not None]


def parsed(page: Page) -> set[str]:
    """The families of a simulated page (flattened samples, as a parser returns them), served as
    trtllm-serve serves text and read back with prometheus-client's own parser; the samples must
    come back unchanged."""
    by: dict[str, list[tuple[str, Mapping[str, str], float]]] = {}
    for name, labels, value in page:
        family = "request_success" if name == "request_success_total" else name.rpartition("_")[0]
        by.setdefault(family, []).append((name, labels, value))
    families = [
        Family(name, "-", "counter" if name == "request_success" else "histogram", tuple(samples))
        for name, samples in by.items()
    ]
    back = list(text_string_to_metric_families(render_serve_page(families)))
    assert sorted((s.name, sorted(s.labels.items()), s.value) for f in back for s in f.samples) == sorted(
        (name, sorted(labels.items()), value) for name, labels, value in page
    )
    return {f.name for f in back}


def test_a_finished_request_is_recorded_as_upstream_records_it_and_the_page_parses() -> None:
    """One request (arrival 0, scheduled 0.7 s, first token 1.1 s, last token 3.1 s, 11 tokens): the
    page trtllm-serve serves parses with prometheus-client's parser into exactly the five families,
    with upstream's names, types, HELP, labels and buckets, and each value in its bucket."""
    m = ServeMetrics()
    assert m.families() == ()  # nothing before the first finished request (multiprocess registry)
    m.finish(FinishedRequest(0.0, 0.7, 1.1, 3.1, output_tokens=11, finished_reason="length"))
    text = render_serve_page(m.families())
    families = {f.name: f for f in text_string_to_metric_families(text)}
    assert set(families) == {"request_success", *HISTOGRAM_NAMES}
    assert "_created" not in text and "nv_" not in text and "trtllm_" not in text
    success = families["request_success"]
    assert success.type == "counter" and success.documentation == "Count of successfully processed requests."
    assert [(s.name, s.labels, s.value) for s in success.samples] == [
        ("request_success_total", {**LABELS, "finished_reason": "length"}, 1.0)
    ]
    expected = {  # value → the first bucket at or above it (le is inclusive)
        "request_queue_time_seconds": (0.7, "0.8"),
        "time_to_first_token_seconds": (1.1, "2.5"),
        "e2e_request_latency_seconds": (3.1, "5.0"),
        "time_per_output_token_seconds": (0.2, "0.2"),  # (3.1 - 1.1) / (11 - 1)
    }
    for name, (value, first_le) in expected.items():
        f = families[name]
        assert f.type == "histogram"
        buckets = [s for s in f.samples if s.name == f"{name}_bucket"]
        assert [s.labels["le"] for s in buckets] == [repr(b) for b in UPSTREAM_BUCKETS[name]] + ["+Inf"]
        assert all(dict(s.labels, le="x") == {**LABELS, "le": "x"} for s in buckets)
        les = [math.inf if s.labels["le"] == "+Inf" else float(s.labels["le"]) for s in buckets]
        assert [s.value for s in buckets] == [1.0 if le >= float(first_le) else 0.0 for le in les], name
        (total,) = [s.value for s in f.samples if s.name == f"{name}_sum"]
        (count,) = [s.value for s in f.samples if s.name == f"{name}_count"]
        assert total == pytest.approx(value) and count == 1.0


def test_tpot_needs_more_than_one_token_and_values_that_are_not_positive_are_not_observed() -> None:
    """``_process_req_perf_metrics``: TPOT only for more than one output token; a value ≤ 0 is
    dropped (a TTFT of 0 here); the counter counts the request all the same."""
    m = ServeMetrics()
    m.finish(FinishedRequest(5.0, 5.0, 5.0, 5.4, output_tokens=1, finished_reason="stop"))
    page = read_serve_page(s for f in m.families() for s in f.samples)
    assert page.finished == 1.0 and page.by_reason == {"stop": 1.0}
    assert page.histograms["e2e_request_latency_seconds"].count == 1.0
    assert "time_to_first_token_seconds" not in page.histograms  # 0 s: not observed
    assert "time_per_output_token_seconds" not in page.histograms  # one token
    # The simulator schedules at the instant of arrival (no dispatch latency): a queue time of 0 is
    # observed, as a real server's microseconds are.
    assert page.histograms["request_queue_time_seconds"].count == 1.0


def test_the_1_3_spelling_reads_the_same() -> None:
    """TensorRT-LLM 1.3 prefixes every name with ``trtllm_``; the reader takes both spellings."""
    m = ServeMetrics()
    m.finish(FinishedRequest(0.0, 0.1, 0.2, 1.0, output_tokens=5, finished_reason="stop"))
    plain = [s for f in m.families() for s in f.samples]
    prefixed = [("trtllm_" + name, labels, value) for name, labels, value in plain]
    assert read_serve_page(prefixed) == read_serve_page(plain)
    assert read_serve_page(plain).histograms["time_to_first_token_seconds"].count == 1.0


def test_observations_follow_the_simulated_timings_and_land_at_completion() -> None:
    """A replica of one sequence, iterations of exactly 0.13 s: A and B arrive at 0 (B waits for A),
    C at 3 s. A: scheduled 0, first token 0.13, done 0.65 (5 tokens); B: scheduled 0.65 (queue 0.65 s,
    bucket le=0.8), first token 0.78 (TTFT bucket le=1.0), done 1.30 (E2E bucket le=1.5). The scrape at
    1 s, after B's first token but before B finished, counts only A in every family: trtllm-serve
    observes a request when it finishes, TTFT included."""
    model = IterationModel(fixed_s=0.13, per_token_s=0.0, per_kv_token_s=0.0)
    reqs = [Request(0.0, 10, 5), Request(0.0, 10, 5), Request(3.0, 10, 5)]
    rec = Recorder()
    Simulation(reqs, serve_spec(model=model, max_batch_size=1), rec, initial_replicas=1).run()
    by_time = {t: read_serve_page(page) for t, page in pages_of(rec)}
    at_1 = by_time[1.0]
    assert at_1.finished == 1.0
    assert {name: h.count for name, h in at_1.histograms.items()} == dict.fromkeys(HISTOGRAM_NAMES, 1.0)
    at_2 = by_time[2.0]
    assert at_2.finished == 2.0
    queue = dict(at_2.histograms["request_queue_time_seconds"].buckets)
    assert (queue[0.3], queue[0.5], queue[0.8]) == (1.0, 1.0, 2.0)  # A waited 0, B 0.65 s
    assert at_2.histograms["request_queue_time_seconds"].sum == pytest.approx(0.65)
    ttft = dict(at_2.histograms["time_to_first_token_seconds"].buckets)
    assert (ttft[0.1], ttft[0.25], ttft[0.75], ttft[1.0]) == (0.0, 1.0, 1.0, 2.0)  # 0.13 s and 0.78 s
    e2e = dict(at_2.histograms["e2e_request_latency_seconds"].buckets)
    assert (e2e[0.5], e2e[0.8], e2e[1.0], e2e[1.5]) == (0.0, 1.0, 1.0, 2.0)  # 0.65 s and 1.30 s
    tpot = dict(at_2.histograms["time_per_output_token_seconds"].buckets)
    assert (tpot[0.1], tpot[0.15]) == (0.0, 2.0)  # (0.65 - 0.13) / 4 = 0.13 s, for both
    assert at_2.histograms["time_per_output_token_seconds"].sum == pytest.approx(0.26)
    assert at_2.by_reason == {"length": 2.0}  # each generated its max_tokens (= its output length)


def test_a_saturated_serve_replica_exports_only_its_five_families_cumulative_and_monotonic() -> None:
    """40 req/s against a 16-sequence replica: requests back up unseen. Every page parses with
    prometheus-client's parser into the five families and no other (no Triton family, no gauge of the
    backlog); each histogram's buckets are cumulative, ``+Inf`` = ``_count``; TTFT, E2E and queue
    ``_count`` equal ``request_success_total`` summed over ``finished_reason``, TPOT's the requests
    with more than one token (all here); every counter only grows between scrapes."""
    reqs = synthetic_poisson(40.0, 10.0, seed=3, input_tokens=400, output_tokens=200)
    rec = Recorder()
    sim = Simulation(reqs, serve_spec(), rec, initial_replicas=1)
    sim.run()
    pages = pages_of(rec)
    assert len(pages) > 20
    last: dict[str, float] = {}
    for i, (_, page) in enumerate(pages):
        if not page:  # before the first request finished the page holds no family at all
            assert last == {}
            continue
        if i % 10 == 0:  # the text round trip is the slow part: one page in ten
            assert parsed(page) == {"request_success", *HISTOGRAM_NAMES}
        assert not any(name.startswith("nv_") for name, _, _ in page)
        triton = signals_from_samples(page)  # the operator's Triton reading finds nothing here
        assert set(triton.values().values()) == {None} and set(triton.counters().values()) == {None}
        reading = read_serve_page(page)
        assert reading.finished is not None
        for name, h in reading.histograms.items():
            values = [c for _, c in h.buckets]
            assert values == sorted(values), name  # cumulative
            assert h.buckets[-1] == (math.inf, h.count)
            assert h.count == reading.finished, name  # every request here has > 1 token
            for key, value in (("count", h.count), ("sum", h.sum)):
                assert value >= last.get(f"{name}_{key}", 0.0)
                last[f"{name}_{key}"] = value
        assert reading.finished >= last.get("finished", 0.0)
        last["finished"] = reading.finished
    assert last["finished"] > 0
    # The backlog was there, and the queue-time histogram shows it as it drains.
    assert sim.max_queue > 16
    assert last["request_queue_time_seconds_sum"] > 0


def test_triton_replicas_export_as_before() -> None:
    """The default frontend is Triton: same families as before, none of trtllm-serve's."""
    reqs = [Request(0.1 * i, 100, 20) for i in range(30)]
    rec = Recorder()
    Simulation(reqs, serve_spec(frontend="triton"), rec, initial_replicas=1).run()
    names = {name for _, page in pages_of(rec) for name, _, _ in page}
    assert "nv_trt_llm_request_metrics" in names
    assert not names & {"request_success_total"} and not any(
        n.startswith(tuple(HISTOGRAM_NAMES)) for n in names
    )
    with pytest.raises(ValueError, match="frontend must be one of triton, trtllm-serve"):
        serve_spec(frontend="vllm")


def test_simulate_deployment_serves_a_pytorch_openai_deployment_with_trtllm_serve() -> None:
    """``simulate --deployment``: the replica's frontend is the one the operator renders — trtllm-serve
    for a pytorch engine behind ``api: openai`` (examples/qwen2.5-7b-pytorch-openai.yaml), Triton for
    ``api: triton`` or without the engine in the input."""
    example = Path(__file__).resolve().parents[2] / "examples" / "qwen2.5-7b-pytorch-openai.yaml"
    docs = [d for d in yaml.safe_load_all(example.read_text()) if d]
    engine = next(d for d in docs if d["kind"] == "LLMEngine")
    dep = next(d for d in docs if d["kind"] == "LLMDeployment")
    assert engine["spec"]["backend"] == "pytorch" and dep["spec"]["server"]["api"] == "openai"
    assert replica_frontend(engine, _server_spec(dep)) == "trtllm-serve"
    assert replica_frontend(None, _server_spec(dep)) == "triton"
    triton = _server_spec(dep).model_copy(update={"api": "triton"})
    assert replica_frontend(engine, triton) == "triton"
