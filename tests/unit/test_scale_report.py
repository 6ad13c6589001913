"""benchmarks/scale.py's report of the operator's own /metrics at convergence (the benchmark itself
is not run by the tests: benchmarks/RESULTS.md records its runs)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
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


def test_memory_stats_split_the_highest_rss_sample(tmp_path: Path) -> None:
    """Issue #20 (rss48): ``--memory-stats`` reports what the operator's peak RSS was made of — live
    Python objects, memory the allocators hold free, code, the rest — when its RSS got there.
    Failed before: no such report (the RSS alone, VmHWM)."""
    scale = _scale()
    mib = 2**20
    low = {"rss": 100 * mib, "file": 26 * mib, "pymalloc_arenas": 40 * mib, "pymalloc_used": 39 * mib}
    peak = {
        "rss": 257 * mib,
        "file": 27 * mib,
        "glibc_used": 38 * mib,
        "glibc_free": 24 * mib,
        "glibc_mmap": 2 * mib,
        "pymalloc_arenas": 165 * mib,
        "pymalloc_used": 160 * mib,
        "pymalloc_free": 3 * mib,
    }
    path = tmp_path / "memstats.jsonl"
    later = {**peak, "rss": 258 * mib, "pymalloc_used": 100 * mib, "pymalloc_free": 63 * mib}
    lines = [
        {**peak, **low, "glibc_used": 0, "glibc_free": 0, "glibc_mmap": 0},
        peak,
        later,
        {"rss": 300 * mib},
    ]
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    # the last sample has no allocator statistics: not one; 257 MiB is within 1 % of the highest
    # (258), and the first there: what was in use when the RSS got there
    m = scale.memory_at_peak(path)
    assert m["rss"] == 257 and m["pymalloc_used"] == 160 and m["glibc_free"] == 24
    assert m["pymalloc_free"] == 5 and m["other"] == 1  # 257 - 27 - (165 + 38 + 24 + 2)
    assert scale.memory_line(m) == (
        "RSS 257 MiB = live objects 160 (pymalloc) + 38 (glibc malloc) MiB; held free 5 (pymalloc, of "
        "165 MiB of arenas) + 24 (glibc) MiB; glibc mmapped 2 MiB; file-backed 27 MiB; other 1 MiB"
    )
    assert scale.memory_at_peak(tmp_path / "none.jsonl") == {}
    assert scale.memory_line({}) == "no samples"


def test_the_memory_sampler_runs_in_a_python_process(tmp_path: Path) -> None:
    """The sampler (benchmarks/memprofile/sitecustomize.py) writes samples memory_at_peak reads, and
    copies back what else the process wrote to its stderr while it read pymalloc's statistics."""
    out = tmp_path / "memstats.jsonl"
    env = {
        **os.environ,
        "PYTHONPATH": str(SCALE.parent / "memprofile"),
        "TRTLLM_BENCH_MEMSTATS": str(out),
    }
    code = "import sys, time\nfor i in range(30):\n    print('line', i, file=sys.stderr)\n    time.sleep(0.1)"
    done = subprocess.run(
        [sys.executable, "-c", code], check=False, env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    # each line once (one written while fd 2 was redirected comes back a moment later)
    assert sorted(x for x in done.stderr.splitlines() if x.startswith("line")) == sorted(
        f"line {i}" for i in range(30)
    )
    m = _scale().memory_at_peak(out)
    assert m["rss"] > 0 and m["pymalloc_used"] > 0 and m["file"] > 0
