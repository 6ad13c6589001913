"""The metrics table of docs/observability.md matches the operator's registry, and the registry's
helpers behave (reconcile timing, exposition parsed back with prometheus_client's parser)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from prometheus_client import generate_latest
from prometheus_client.metrics import MetricWrapperBase
from prometheus_client.parser import text_string_to_metric_families

from trtllm_operator.metrics import operator_metrics as om

DOC = Path(__file__).resolve().parents[2] / "docs" / "observability.md"
METRICS = [m for m in vars(om).values() if isinstance(m, MetricWrapperBase)]


def _doc_rows() -> dict[str, tuple[str, str]]:
    """exported name → (type, labels cell) of the table under '## Metrics'."""
    section = DOC.read_text(encoding="utf-8").split("## Metrics", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        m = re.match(r"^\| `(trtllm_operator_[a-z_]+)` \| (\w+) \| ([^|]*) \|", line)
        if m:
            rows[m.group(1)] = (m.group(2), m.group(3))
    return rows


def _exported(metric: MetricWrapperBase) -> str:
    name: str = metric._name
    return name + "_total" if metric._type == "counter" else name


def test_every_registered_metric_is_documented_with_type_and_labels() -> None:
    rows = _doc_rows()
    assert len(METRICS) == len(rows), sorted(rows)
    for metric in METRICS:
        name = _exported(metric)
        assert name in rows, f"{name} missing from the metrics table of docs/observability.md"
        type_, labels = rows[name]
        assert type_ == metric._type
        # label names are the backticked words outside the parenthesised value lists
        documented = set(re.findall(r"`(\w+)`", re.sub(r"\([^()]*\)", "", labels)))
        assert documented == set(metric._labelnames), (name, labels)


@pytest.mark.parametrize("metric", METRICS, ids=_exported)
def test_names_follow_prometheus_conventions(metric: MetricWrapperBase) -> None:
    name = metric._name
    assert name.startswith("trtllm_operator_")
    if metric._type == "histogram":
        assert name.endswith("_seconds")
    assert not name.endswith("_total")  # the client adds it to counters


def test_observe_reconcile_counts_result_and_time() -> None:
    def sample(name: str, **labels: str) -> float:
        value = om.REGISTRY.get_sample_value(name, labels)
        return value or 0.0

    ok0 = sample("trtllm_operator_reconciles_total", kind="Test", result="success")
    err0 = sample("trtllm_operator_reconciles_total", kind="Test", result="error")
    with om.observe_reconcile("Test"):
        pass
    with pytest.raises(RuntimeError), om.observe_reconcile("Test"):
        raise RuntimeError("boom")
    assert sample("trtllm_operator_reconciles_total", kind="Test", result="success") == ok0 + 1
    assert sample("trtllm_operator_reconciles_total", kind="Test", result="error") == err0 + 1
    assert sample("trtllm_operator_reconcile_duration_seconds_count", kind="Test") >= 2


def test_exposition_parses_back() -> None:
    names = {f.name for f in text_string_to_metric_families(generate_latest(om.REGISTRY).decode())}
    # the parser strips _total from counter families; every registered base name comes back
    assert {m._name for m in METRICS} <= names
