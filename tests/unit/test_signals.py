"""Signals from Triton metrics pages and from Prometheus (trtllm_operator.metrics)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from trtllm_operator.api.signals import ACTIVE_REQUEST_UTILIZATION as ACTIVE
from trtllm_operator.api.signals import KV_CACHE_UTILIZATION as KV
from trtllm_operator.decide.autoscaling import PodState
from trtllm_operator.metrics.prometheus import (
    ACTIVE_REQUEST_UTILIZATION_RECORD,
    KV_CACHE_RECORD,
    PrometheusError,
    active_request_utilization_expr,
    instant_query,
    kv_cache_expr,
    prometheus_pods,
    recording_rules,
)
from trtllm_operator.metrics.scrape import pod_state, scrape_pods
from trtllm_operator.metrics.signals import MetricsParseError, TritonSignals, signals_from_text

REPO = Path(__file__).resolve().parents[2]

#: A real Triton 2.51 /metrics page with the CPU stand-in for the engine, captured under load by
#: tests/fidelity/test_triton_fidelity.py (TRTLLM_CAPTURE_METRICS; docs/triton-cpu.md): 6 requests
#: active and scheduled of max 16, waiting 0, KV blocks 24 used of 64 (tensorrt backend, TP1).
TRITON_SAMPLE = (REPO / "tests/fixtures/triton_metrics_cpu_standin_partial.txt").read_text()
#: The same server saturated, captured by `make demo` under its load: active 16 = max 16, scheduled 8,
#: waiting 8, KV blocks 32 used of 32.
TRITON_SATURATED = (REPO / "tests/fixtures/triton_metrics_cpu_standin.txt").read_text()


def without(text: str, *needles: str) -> str:
    return "\n".join(line for line in text.splitlines() if not any(n in line for n in needles)) + "\n"


# The captured page follows the upstream relation waiting = active − scheduled (6 − 6 = 0;
# tensorrtllm_backend v0.19.0 model_instance_state.cc WaitForStats()), max 16; KV 24 used of 64.
@pytest.mark.parametrize(
    ("page", "expected"),
    [
        (TRITON_SAMPLE, TritonSignals(6 / 16, 24 / 64, "used/max", 0.0)),
        # waiting is read but is no signal: without it the signals do not change
        (without(TRITON_SAMPLE, 'request_type="waiting"'), TritonSignals(6 / 16, 24 / 64, "used/max")),
        (
            without(TRITON_SAMPLE, "nv_trt_llm_request_metrics"),
            TritonSignals(None, 24 / 64, "used/max"),
        ),
        (
            without(TRITON_SAMPLE, 'kv_cache_block_type="used"'),
            TritonSignals(6 / 16, 0.375, "fraction", 0.0),
        ),
        (
            TRITON_SAMPLE.replace(
                'kv_cache_block_type="max",model="tensorrt_llm",version="1"} 64',
                'kv_cache_block_type="max",model="tensorrt_llm",version="1"} 0',
            ),
            TritonSignals(6 / 16, 0.375, "fraction", 0.0),
        ),
        (
            without(TRITON_SAMPLE, "nv_trt_llm_kv_cache_block_metrics"),
            TritonSignals(6 / 16, None, None, 0.0),
        ),
        (TRITON_SAMPLE.replace('model="tensorrt_llm"', 'model="llama"'), TritonSignals(None, None)),
        ("", TritonSignals(None, None)),
        (
            TRITON_SAMPLE
            + 'nv_trt_llm_request_metrics{model="tensorrt_llm",request_type="active",version="2"} 14\n'
            + 'nv_trt_llm_request_metrics{model="tensorrt_llm",request_type="max",version="2"} 64\n',
            TritonSignals((6 + 14) / (16 + 64), 24 / 64, "used/max", 0.0),
        ),
        (without(TRITON_SAMPLE, 'request_type="active"'), TritonSignals(None, 24 / 64, "used/max", 0.0)),
        (
            TRITON_SAMPLE.replace('request_type="max",version="1"} 16', 'request_type="max",version="1"} 0'),
            TritonSignals(None, 24 / 64, "used/max", 0.0),
        ),
        (
            # saturated: the executor holds at most max active (executorImpl.cpp), so active = max
            TRITON_SAMPLE.replace(
                'request_type="active",version="1"} 6', 'request_type="active",version="1"} 16'
            ),
            TritonSignals(1.0, 24 / 64, "used/max", 0.0),
        ),
        (
            # Triton's pending count is no signal (0 for tensorrt_llm; a non-zero value changes nothing)
            TRITON_SAMPLE.replace(
                'nv_inference_pending_request_count{model="tensorrt_llm",version="1"} 0',
                'nv_inference_pending_request_count{model="tensorrt_llm",version="1"} 9',
            ),
            TritonSignals(6 / 16, 24 / 64, "used/max", 0.0),
        ),
        # the saturated capture: active = max and admitted requests waiting for KV blocks
        (TRITON_SATURATED, TritonSignals(16 / 16, 32 / 32, "used/max", 8.0)),
    ],
    ids=[
        "reference sample",
        "waiting absent → same signals",
        "no request family → saturation missing",
        "used absent → fraction",
        "max 0 → fraction",
        "no KV family → missing",
        "other model only → missing",
        "empty page → missing",
        "versions add up",
        "active absent → saturation missing",
        "max 0 → saturation missing (no division by zero)",
        "saturated → 1",
        "pending is not read",
        "saturated capture",
    ],
)
def test_signals_from_text(page: str, expected: TritonSignals) -> None:
    assert signals_from_text(page) == expected


def test_signals_of_another_model_name() -> None:
    page = TRITON_SAMPLE.replace('model="tensorrt_llm"', 'model="llama"')
    assert signals_from_text(page, model="llama").active_request_utilization == 6 / 16


def test_malformed_page_is_a_parse_error() -> None:
    with pytest.raises(MetricsParseError):
        signals_from_text('nv_trt_llm_request_metrics{model="tensorrt_llm" 3\n')


def pod(
    name: str = "p",
    phase: str = "Running",
    ready: str | None = "True",
    scheduled: tuple[str, str] | None = ("True", ""),
    ip: str | None = "127.1.0.5",
    deleting: bool = False,
) -> dict[str, Any]:
    conditions = []
    if scheduled is not None:
        conditions.append({"type": "PodScheduled", "status": scheduled[0], "reason": scheduled[1]})
    if ready is not None:
        conditions.append({"type": "Ready", "status": ready})
    meta: dict[str, Any] = {"name": name}
    if deleting:
        meta["deletionTimestamp"] = "2026-11-29T19:00:00Z"
    status: dict[str, Any] = {"phase": phase, "conditions": conditions}
    if ip:
        status["podIP"] = ip
    return {"metadata": meta, "status": status}


@pytest.mark.parametrize(
    ("manifest", "state"),
    [
        (pod(), PodState.READY),
        (pod(ready="False"), PodState.STARTING),
        (pod(phase="Pending", ready=None, ip=None), PodState.STARTING),
        (
            pod(phase="Pending", ready=None, scheduled=("False", "Unschedulable"), ip=None),
            PodState.UNSCHEDULABLE,
        ),
        (
            pod(phase="Pending", ready=None, scheduled=("False", "SchedulingGated"), ip=None),
            PodState.STARTING,
        ),
        (pod(deleting=True), PodState.TERMINATING),
        (pod(phase="Failed", ready="False"), PodState.TERMINATING),
        (pod(phase="Succeeded", ready="False"), PodState.TERMINATING),
        ({"metadata": {"name": "bare"}}, PodState.STARTING),
    ],
    ids=[
        "ready",
        "running not ready",
        "pending scheduled",
        "unschedulable",
        "gated",
        "deleting",
        "failed",
        "succeeded",
        "no status",
    ],
)
def test_pod_state(manifest: dict[str, Any], state: PodState) -> None:
    assert pod_state(manifest) == state


def test_scrape_pods_reads_ready_pods_only_and_tolerates_failures() -> None:
    fetched: list[str] = []

    def fetch(url: str, timeout: float) -> str:
        fetched.append(url)
        if "127.1.0.6" in url:
            raise ConnectionRefusedError("refused")
        if "127.1.0.7" in url:
            return "garbage {{{\n"
        return TRITON_SAMPLE

    pods = [
        pod("a", ip="127.1.0.5"),
        pod("b", ip="127.1.0.6"),
        pod("c", ip="127.1.0.7"),
        pod("d", ready="False", ip="127.1.0.8"),
        pod("e", phase="Pending", ready=None, scheduled=("False", "Unschedulable"), ip=None),
        pod("f", ip=None),
    ]
    out = scrape_pods(pods, port=8002, fetch=fetch)
    assert sorted(fetched) == [f"http://127.1.0.{i}:8002/metrics" for i in (5, 6, 7)]
    assert [(p.name, p.state, p.value(ACTIVE)) for p in out] == [
        ("a", PodState.READY, 6 / 16),
        ("b", PodState.READY, None),
        ("c", PodState.READY, None),
        ("d", PodState.STARTING, None),
        ("e", PodState.UNSCHEDULABLE, None),
        ("f", PodState.READY, None),
    ]
    assert out[0].value(KV) == pytest.approx(24 / 64)


# --- Prometheus ---------------------------------------------------------------------------------


def vector(*series: tuple[dict[str, str], str]) -> str:
    return json.dumps(
        {
            "status": "success",
            "data": {
                "resultType": "vector",
                "result": [{"metric": m, "value": [1.7e9, v]} for m, v in series],
            },
        }
    )


def test_instant_query_parses_a_vector_and_skips_nan() -> None:
    urls: list[str] = []

    def get(url: str, timeout: float) -> str:
        urls.append(url)
        return vector(({"pod": "a"}, "2"), ({"pod": "b"}, "NaN"))

    assert instant_query("http://prom:9090/", "up", get=get) == [({"pod": "a"}, 2.0)]
    assert urls == ["http://prom:9090/api/v1/query?query=up"]


@pytest.mark.parametrize(
    "answer",
    [
        json.dumps({"status": "error", "errorType": "bad_data", "error": "parse error"}),
        json.dumps({"status": "success", "data": {"resultType": "matrix", "result": []}}),
        "<html>not json</html>",
    ],
    ids=["error answer", "not a vector", "not json"],
)
def test_instant_query_errors(answer: str) -> None:
    with pytest.raises(PrometheusError):
        instant_query("http://prom:9090", "up", get=lambda url, timeout: answer)


def test_instant_query_unreachable() -> None:
    def get(url: str, timeout: float) -> str:
        raise ConnectionRefusedError("refused")

    with pytest.raises(PrometheusError, match="refused"):
        instant_query("http://prom:9090", "up", get=get)


def test_prometheus_pods_maps_series_to_ready_pods() -> None:
    def get(url: str, timeout: float) -> str:
        if "active" in url:  # the active-request-utilization query
            return vector(
                ({"namespace": "ns", "pod": "a"}, "0.75"),
                ({"namespace": "ns", "pod": "c"}, "-1"),
                ({"namespace": "ns", "pod": "d"}, "0.9"),
            )
        return vector(({"namespace": "ns", "pod": "a"}, "0.5"), ({"namespace": "ns", "pod": "b"}, "1.2"))

    pods = [pod("a"), pod("b"), pod("c"), pod("d", ready="False")]
    out = prometheus_pods("http://prom", "ns", pods, get=get)
    assert [(p.name, p.state, p.value(ACTIVE), p.value(KV)) for p in out] == [
        ("a", PodState.READY, 0.75, 0.5),
        ("b", PodState.READY, None, 1.0),
        ("c", PodState.READY, 0.0, None),
        ("d", PodState.STARTING, None, None),
    ]


def test_promql_expressions() -> None:
    active = 'nv_trt_llm_request_metrics{model="tensorrt_llm", request_type="active", namespace="ns"}'
    max_ = 'nv_trt_llm_request_metrics{model="tensorrt_llm", request_type="max", namespace="ns"} > 0'
    assert active_request_utilization_expr('namespace="ns"') == (
        f"sum by (namespace, pod) ({active}) / sum by (namespace, pod) ({max_})"
    )
    kv = kv_cache_expr()
    assert kv.count("nv_trt_llm_kv_cache_block_metrics") == 3
    assert 'kv_cache_block_type="max"} > 0)' in kv and " or " in kv
    # neither the waiting gauge nor Triton's pending count is queried (upstream audit B1–B3)
    assert "waiting" not in active_request_utilization_expr() + kv
    assert "pending" not in active_request_utilization_expr() + kv


def test_chart_recording_rules_match_the_code() -> None:
    shipped = yaml.safe_load((REPO / "charts/trtllm-operator/files/prometheus-rules.yaml").read_text())
    assert shipped == recording_rules()
    records = [r["record"] for r in shipped["groups"][0]["rules"]]
    assert records == [ACTIVE_REQUEST_UTILIZATION_RECORD, KV_CACHE_RECORD]


def token_histogram(name: str, kind: str, total: int, cumulative: tuple[int, ...]) -> str:
    """One histogram of ``tensorrt_llm`` in the text format, counts per ``le`` 10 … 1000, +Inf."""
    labels = f'model="tensorrt_llm",response_metric_type="{kind}",version="1"'
    lines = [
        f"# HELP {name} TRT LLM response metrics",
        f"# TYPE {name} histogram",
        f"{name}_count{{{labels}}} {cumulative[-1]}",
        f"{name}_sum{{{labels}}} {total}",
    ]
    for le, count in zip(("10", "50", "100", "500", "1000", "+Inf"), cumulative, strict=True):
        lines.append(f'{name}_bucket{{{labels},le="{le}"}} {count}')
    return "\n".join(lines) + "\n"


#: The backend's token-length histograms as tensorrtllm_backend ≥ v0.16.0 registers them
#: (v0.19.0 ``custom_metrics_reporter.cc`` ``InitializeReporter``: family ``nv_llm_input_token_len`` /
#: ``nv_llm_output_token_len``, labels ``model``, ``version``, ``response_metric_type``, buckets
#: 10/50/100/500/1000): three finished requests of 700, 900 and 800 prompt and 50, 120, 30 output tokens.
TOKEN_HISTOGRAMS = token_histogram(
    "nv_llm_output_token_len", "total_output_tokens", 200, (0, 2, 2, 3, 3, 3)
) + token_histogram("nv_llm_input_token_len", "total_input_tokens", 2400, (0, 0, 0, 0, 3, 3))


def test_the_capacity_counters_read_the_token_length_histograms() -> None:
    """The histograms' ``_sum`` and ``_count`` are the token counts the capacity recommendation's token
    weighting reads (prompt and output tokens of the finished requests, and how many finished); a page
    without them (the captured 2.51 CPU stand-in, or a backend before v0.16.0) leaves them missing."""
    counters = signals_from_text(TRITON_SAMPLE + TOKEN_HISTOGRAMS).counters()
    tokens = (counters["prompt_tokens"], counters["output_tokens"], counters["finished"])
    assert tokens == (2400.0, 200.0, 3.0)
    # Another model's series is not the engine's.
    other = TOKEN_HISTOGRAMS.replace('model="tensorrt_llm"', 'model="ensemble"')
    counters = signals_from_text(TRITON_SAMPLE + other).counters()
    assert counters["prompt_tokens"] is counters["output_tokens"] is counters["finished"] is None
    counters = signals_from_text(TRITON_SAMPLE).counters()
    assert counters["prompt_tokens"] is counters["output_tokens"] is counters["finished"] is None
