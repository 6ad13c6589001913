"""The Grafana dashboard shipped in the chart refers only to metric names that really exist.

Sources for the external names (see docs/reference/tensorrt-llm.md §5):
- Triton core: server docs/user_guide/metrics.md (nv_inference_*, nv_gpu_*, nv_cpu_*).
- TensorRT-LLM backend: custom_metrics_reporter.cc (nv_trt_llm_*, nv_llm_*_token_len).
- DCGM exporter: default counters (DCGM_FI_DEV_GPU_UTIL, …).
Operator names come from the operator's own registry, not from a list in this test.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from trtllm_operator.metrics.operator_metrics import metric_names

DASHBOARD = Path(__file__).resolve().parents[2] / "charts/trtllm-operator/files/grafana-dashboard.json"

TRITON_FAMILIES = {
    "nv_inference_request_success",
    "nv_inference_request_failure",
    "nv_inference_count",
    "nv_inference_exec_count",
    "nv_inference_pending_request_count",
    "nv_inference_request_duration_us",
    "nv_inference_queue_duration_us",
    "nv_inference_compute_input_duration_us",
    "nv_inference_compute_infer_duration_us",
    "nv_inference_compute_output_duration_us",
    "nv_inference_first_response_histogram_ms",
    "nv_gpu_utilization",
    "nv_gpu_memory_total_bytes",
    "nv_gpu_memory_used_bytes",
    "nv_gpu_power_usage",
    "nv_gpu_power_limit",
    "nv_energy_consumption",
    "nv_cpu_utilization",
    "nv_cpu_memory_total_bytes",
    "nv_cpu_memory_used_bytes",
}
TRTLLM_FAMILIES = {
    "nv_trt_llm_request_metrics",
    "nv_trt_llm_runtime_memory_metrics",
    "nv_trt_llm_kv_cache_block_metrics",
    "nv_trt_llm_inflight_batcher_metrics",
    "nv_trt_llm_v1_metrics",
    "nv_trt_llm_general_metrics",
    "nv_trt_llm_disaggregated_serving_metrics",
    "nv_llm_input_token_len",
    "nv_llm_output_token_len",
}
DCGM_FIELDS = {
    "DCGM_FI_DEV_GPU_UTIL",
    "DCGM_FI_DEV_FB_USED",
    "DCGM_FI_DEV_FB_FREE",
    "DCGM_FI_DEV_POWER_USAGE",
}
HISTOGRAM_SUFFIXES = ("_bucket", "_sum", "_count")

METRIC_TOKEN = re.compile(r"\b(nv_[a-z0-9_]+|DCGM_FI_[A-Z0-9_]+|trtllm_operator_[a-z0-9_]+)\b")


def known_external(name: str) -> bool:
    families = TRITON_FAMILIES | TRTLLM_FAMILIES | DCGM_FIELDS
    if name in families:
        return True
    return any(name.endswith(s) and name[: -len(s)] in families for s in HISTOGRAM_SUFFIXES)


def load() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(DASHBOARD.read_text())
    return data


def panel_targets(dashboard: dict[str, Any]) -> list[tuple[str, str]]:
    return [
        (panel["title"], target["expr"])
        for panel in dashboard["panels"]
        if panel["type"] != "row"
        for target in panel["targets"]
    ]


def test_dashboard_shape() -> None:
    dashboard = load()
    assert dashboard["uid"] == "trtllm-operator"
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids)), "panel ids must be unique"
    for panel in dashboard["panels"]:
        assert {"h", "w", "x", "y"} <= panel["gridPos"].keys()
        assert panel["gridPos"]["x"] + panel["gridPos"]["w"] <= 24
        if panel["type"] != "row":
            assert panel["targets"], panel["title"]
            assert panel["datasource"]["type"] == "prometheus"
    assert {v["name"] for v in dashboard["templating"]["list"]} == {"datasource", "namespace"}


def test_every_query_uses_real_metric_names() -> None:
    operator_names = metric_names()
    seen: set[str] = set()
    for title, expr in panel_targets(load()):
        names = METRIC_TOKEN.findall(expr)
        assert names, f"panel {title!r} queries no known metric: {expr}"
        for name in names:
            seen.add(name)
            if name.startswith("trtllm_operator_"):
                assert name in operator_names, f"panel {title!r}: {name} is not exported by the operator"
            else:
                assert known_external(name), f"panel {title!r}: {name} is not a Triton/TRT-LLM/DCGM metric"
    # The fleet signals operations teams asked for are all on the dashboard.
    for required in (
        "nv_inference_request_success",
        "nv_llm_output_token_len_sum",
        "nv_inference_first_response_histogram_ms_bucket",
        "nv_inference_queue_duration_us",
        "nv_trt_llm_request_metrics",
        "nv_trt_llm_kv_cache_block_metrics",
        "DCGM_FI_DEV_GPU_UTIL",
    ):
        assert required in seen, required


def test_unknown_metric_names_are_caught() -> None:
    assert not known_external("nv_trt_llm_kv_cache_utilization")
    assert "trtllm_operator_reconciles_total" in metric_names()
    assert "trtllm_operator_made_up_total" not in metric_names()
