"""benchmarks/scale.py's report of the operator's own /metrics at convergence (the benchmark itself
is not run by the tests: benchmarks/RESULTS.md records its runs)."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

from support.scripts import load_script

from trtllm_operator.metrics.operator_metrics import metric_names

SCALE = Path(__file__).resolve().parents[2] / "benchmarks" / "scale.py"


def _scale() -> ModuleType:
    return load_script(SCALE)


def test_operator_time_reports_histograms_and_counters_with_the_status_write_refusals() -> None:
    """Issue #20 (trial 38 F10): the refused guarded status writes and the fallbacks to the merge
    patch are reported beside the reconcile times; counters are listed as counts, not as histograms
    of 0 observations. Failed before: no status_write lines, and every counter series printed as
    "0 observations, 0.0 s in all"."""
    scale = _scale()
    m = {
        "reconcile_duration_seconds{LLMEngine} count": 4.0,
        "reconcile_duration_seconds{LLMEngine} sum": 2.0,
        "reconciles{kind=LLMEngine,result=success} total": 4.0,
        "status_write_refusals{kind=LLMDeployment} total": 26.0,
    }
    assert scale.operator_metric_lines(m) == [
        "- reconcile_duration_seconds{LLMEngine}: 4 observations, 2.0 s in all, 500 ms mean",
        "- reconciles{kind=LLMEngine,result=success}: 4",
        "- resumes{}: 0",
        "- resyncs{}: 0",
        "- status_write_fallbacks{}: 0",
        "- status_write_refusals{kind=LLMDeployment}: 26",
    ]


def test_every_metric_the_benchmark_reads_is_one_the_operator_exports() -> None:
    scale = _scale()
    assert set(scale.OPERATOR_HISTOGRAMS) | set(scale.OPERATOR_COUNTERS) <= metric_names()
