"""trtllm-bench report parsing (fixtures in tests/fixtures/trtllm-bench), the sweep summary, and the
benchmark Job's in-container script run against a stand-in ``trtllm-bench`` on PATH."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from trtllm_operator.tuning.bench_script import SCRIPT
from trtllm_operator.tuning.report import (
    COMPACT_KEYS,
    SWEEP_FORMAT,
    ReportError,
    compact_report,
    load_results,
    overall_recommendation,
    parse_report,
    parse_results,
    summarize,
)

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "trtllm-bench"
FULL = FIXTURES / "llama-3.1-8b-fp8-h100-128-128.report.json"
SWEEP = FIXTURES / "llama-3.1-8b-fp8-h100-sweep.json"


def full_report() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(FULL.read_text())
    return data


def test_full_report() -> None:
    (r,) = load_results(FULL)
    assert r.output_tokens_per_s == 28312.0  # NVIDIA's published number (README)
    assert r.requests_per_s == pytest.approx(28312.0 / 128, rel=1e-4)
    assert (r.input_tokens, r.output_tokens) == (128, 128)
    assert r.max_batch_size == 2048 and r.max_num_tokens == 8192
    assert r.concurrency is None  # not in a bare report
    assert r.ttft_ms is not None and r.ttft_ms.p90 is not None and r.ttft_ms.p50 < r.ttft_ms.p99
    assert r.tensorrt_llm_version == "1.0.0"
    assert r.output_tokens_per_s_per_gpu == 28312.0


def test_sweep_summary_fixture() -> None:
    results = load_results(SWEEP)
    assert [r.concurrency for r in results] == [1, 8, 32, 128, 256, 512, 1024, 2048]
    assert results[-1].error == "trtllm-bench exited with 1"
    ok = [r for r in results if r.error is None]
    tputs = [r.output_tokens_per_s for r in ok]
    assert tputs == sorted(tputs)  # the modelled curve rises monotonically
    (curve,) = summarize(results)
    assert curve.axis == "concurrency"
    assert curve.knee is not None and curve.knee.x == 512
    assert curve.recommended_max_batch_size == 640
    assert overall_recommendation([curve]) == 640
    assert len(SWEEP.read_text()) <= 4000  # fits a termination message


def test_per_gpu_from_world_size_when_absent() -> None:
    rep = full_report()
    del rep["performance"]["output_throughput_per_gpu_tok_s"]
    rep["world_info"]["world_size"] = 2
    assert parse_report(rep).output_tokens_per_s_per_gpu == pytest.approx(14156.0)


def test_report_without_streaming_has_no_latency_percentiles() -> None:
    rep = full_report()
    del rep["streaming_metrics"]
    r = parse_report(rep)
    assert r.ttft_ms is None and r.tpot_ms is None


def test_older_percentiles_without_p90() -> None:
    rep = full_report()
    del rep["streaming_metrics"]["ttft_percentiles"]["p90"]
    ttft = parse_report(rep).ttft_ms
    assert ttft is not None and ttft.p90 is None


@pytest.mark.parametrize(
    ("mutate", "fragment"),
    [
        (lambda r: r.pop("performance"), "report has no 'performance' section"),
        (
            lambda r: r["performance"].pop("system_output_throughput_tok_s"),
            "performance.system_output_throughput_tok_s",
        ),
        (
            lambda r: r["performance"].update(request_throughput_req_s="fast"),
            "'performance.request_throughput_req_s'",
        ),
        (lambda r: r["request_info"].pop("avg_output_length"), "request_info.avg_output_length"),
        (lambda r: r.update(performance=[1]), "report 'performance' must be an object"),
        (
            lambda r: r["streaming_metrics"].update(ttft_percentiles={"p50": 1.0}),
            "streaming_metrics.ttft_percentiles.p99",
        ),
    ],
)
def test_bad_reports_name_the_key(mutate: Any, fragment: str) -> None:
    rep = full_report()
    mutate(rep)
    with pytest.raises(ReportError, match=fragment.replace("(", r"\(").replace(".", r"\.")):
        parse_report(rep)


def test_bad_documents(tmp_path: Path) -> None:
    with pytest.raises(ReportError, match="unknown sweep format"):
        parse_results({"format": "x", "results": []})
    with pytest.raises(ReportError, match=r"sweep results\[0\]: report has no 'performance'"):
        parse_results({"format": SWEEP_FORMAT, "results": [{"report": {}}]})
    bad = tmp_path / "r.json"
    bad.write_text("{not json")
    with pytest.raises(ReportError, match="cannot read a JSON report"):
        load_results(bad)
    with pytest.raises(ReportError, match="must be a JSON object"):
        parse_results([1, 2])


def test_compact_keeps_only_the_listed_keys() -> None:
    small = compact_report(full_report())
    assert set(small) == set(COMPACT_KEYS)
    for section, keys in COMPACT_KEYS.items():
        assert set(small[section]) <= set(keys)
    assert set(small["streaming_metrics"]["ttft_percentiles"]) == {"p50", "p90", "p99"}
    # the compact form parses to the same numbers (to 4 significant digits)
    a, b = parse_report(full_report()), parse_report(small)
    assert b.output_tokens_per_s == pytest.approx(a.output_tokens_per_s, rel=1e-3)
    assert b.ttft_ms is not None and a.ttft_ms is not None
    assert b.ttft_ms.p99 == pytest.approx(a.ttft_ms.p99, rel=1e-3)


def test_summarize_axis_and_errors() -> None:
    results = load_results(SWEEP)
    with pytest.raises(ValueError, match="axis must be"):
        summarize(results, "batch")
    # by maxBatchSize every run has the same runtime limit (2048): no curve
    (curve,) = summarize(results, "maxBatchSize")
    assert curve.knee is None and "fewer than two" in curve.message


# ------------------------------------------------------------------------- the in-container script
FAKE_BENCH = r"""#!/usr/bin/env python3
import json, sys
args = sys.argv[1:]
def opt(name, default=None):
    return args[args.index(name) + 1] if name in args else default
value = int(opt("--concurrency", opt("--max_batch_size", "0")))
if value == int(os.environ.get("FAIL_AT", "-1")):
    sys.exit(3)
rep = json.load(open(os.environ["FULL_REPORT"]))
rep["performance"]["system_output_throughput_tok_s"] = 1000.0 * min(value, 64)
rep["args"] = args
with open(opt("--report_json"), "w") as fh:
    json.dump(rep, fh)
"""


def _run_script(tmp_path: Path, cfg: dict[str, Any], fail_at: int = -1) -> tuple[int, dict[str, Any], str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    fake = bin_dir / "trtllm-bench"
    fake.write_text(FAKE_BENCH.replace("import json, sys", "import json, os, sys"))
    fake.chmod(0o755)
    env = {
        **os.environ,
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        "FULL_REPORT": str(FULL),
        "FAIL_AT": str(fail_at),
    }
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT, json.dumps(cfg)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    last = proc.stdout.strip().splitlines()[-1]
    return proc.returncode, json.loads(last), proc.stdout


def _cfg(**over: Any) -> dict[str, Any]:
    cfg: dict[str, Any] = {
        "format": SWEEP_FORMAT,
        "keep": {k: list(v) for k, v in COMPACT_KEYS.items()},
        "model": "meta-llama/Llama-3.1-8B-Instruct",
        "modelPath": "/artifact/tokenizer",
        "backend": "tensorrt",
        "engineDir": "/artifact/engine",
        "mode": "throughput",
        "axis": "concurrency",
        "values": [8, 32, 64, 128],
        "pairs": [{"inputTokens": 16, "outputTokens": 8}],
        "numRequests": 4,
        "warmup": 0,
        "streaming": True,
        "kvFraction": 0.8,
    }
    cfg.update(over)
    return cfg


def test_script_sweeps_and_summarises(tmp_path: Path) -> None:
    rc, doc, out = _run_script(tmp_path, _cfg())
    assert rc == 0
    results = parse_results(doc)
    assert [r.concurrency for r in results] == [8, 32, 64, 128]
    assert [r.output_tokens_per_s for r in results] == [8000.0, 32000.0, 64000.0, 64000.0]
    (curve,) = summarize(results)
    assert curve.knee is not None and curve.knee.x == 64 and curve.recommended_max_batch_size == 80
    # the command line it ran, as the stand-in saw it
    assert (
        "+ trtllm-bench --model meta-llama/Llama-3.1-8B-Instruct --model_path /artifact/tokenizer throughput"
        in out
    )
    for flag in (
        "--backend tensorrt",
        "--engine_dir /artifact/engine",
        "--concurrency 8",
        "--streaming",
        "--kv_cache_free_gpu_mem_fraction 0.8",
        "--num_requests 4",
        "--warmup 0",
    ):
        assert flag in out
    assert len(json.dumps(doc, separators=(",", ":"))) <= 4000


@pytest.mark.parametrize("mode", ["throughput", "latency"])
def test_script_passes_the_pytorch_world_after_the_subcommand(tmp_path: Path, mode: str) -> None:
    """Audit A7: ``--tp/--pp/--ep`` are options of the ``throughput`` and ``latency`` subcommands
    (TensorRT-LLM ``tensorrt_llm/bench/benchmark/throughput.py``, ``low_latency.py`` at
    000a01de66f0), so they follow the subcommand on the command line, with the config's values."""
    world = {"tp": 4, "pp": 2, "ep": 2}
    cfg = _cfg(
        backend="pytorch",
        engineDir=None,
        modelPath="/artifact/checkpoint",
        world=world,
        values=[8],
        mode=mode,
    )
    rc, _, out = _run_script(tmp_path, cfg)
    assert rc == 0, out
    args = json.loads(next(line for line in out.splitlines() if line.startswith('{"engine"')))["args"]
    sub = args.index(mode)
    assert args[sub + 1 : sub + 3] == ["--backend", "pytorch"]
    assert [args[args.index(flag) + 1] for flag in ("--tp", "--pp", "--ep")] == ["4", "2", "2"]
    assert min(args.index(flag) for flag in ("--tp", "--pp", "--ep")) > sub
    rc, _, out = _run_script(tmp_path, _cfg(world={"tp": 2, "pp": 1, "ep": None}, values=[8]))
    args = json.loads(next(line for line in out.splitlines() if line.startswith('{"engine"')))["args"]
    assert args[args.index("--tp") + 1] == "2" and "--ep" not in args  # unset: trtllm-bench's default
    rc, _, out = _run_script(tmp_path, _cfg(values=[8]))  # tensorrt: the engine carries its world
    args = json.loads(next(line for line in out.splitlines() if line.startswith('{"engine"')))["args"]
    assert "--tp" not in args and "--pp" not in args


def test_script_dataset_is_trtllm_bench_jsonl(tmp_path: Path) -> None:
    rc, _, out = _run_script(tmp_path, _cfg(values=[8]))
    assert rc == 0
    args = json.loads(next(line for line in out.splitlines() if line.startswith('{"engine"')))["args"]
    dataset = Path(args[args.index("--dataset") + 1])
    rows = [json.loads(line) for line in dataset.read_text().splitlines()]
    assert len(rows) == 4
    assert all(set(r) == {"task_id", "input_ids", "output_tokens"} for r in rows)
    assert all(len(r["input_ids"]) == 16 and r["output_tokens"] == 8 for r in rows)


def test_script_records_a_failed_run(tmp_path: Path) -> None:
    rc, doc, _ = _run_script(tmp_path, _cfg(), fail_at=32)
    assert rc == 0
    results = parse_results(doc)
    assert results[1].error == "trtllm-bench exited with 3"
    rc, doc, _ = _run_script(tmp_path, _cfg(values=[32]), fail_at=32)
    assert rc == 1


def test_script_latency_mode_and_batch_sweep(tmp_path: Path) -> None:
    rc, _, out = _run_script(tmp_path, _cfg(mode="latency", values=[1]))
    assert rc == 0 and " latency --backend tensorrt" in out and "--streaming" not in out
    rc, doc, out = _run_script(tmp_path, _cfg(axis="maxBatchSize", values=[16, 32]))
    assert rc == 0 and "--max_batch_size 16" in out and "--concurrency" not in out
    assert [r.max_batch_size for r in parse_results(doc)] == [16, 32]


def test_script_trims_to_the_termination_message_limit(tmp_path: Path) -> None:
    cfg = _cfg(
        values=[1, 2, 4, 8],
        pairs=[
            {"inputTokens": 4, "outputTokens": 4},
            {"inputTokens": 8, "outputTokens": 4},
            {"inputTokens": 16, "outputTokens": 4},
        ],
    )
    rc, doc, _ = _run_script(tmp_path, cfg)
    assert rc == 0
    assert len(json.dumps(doc, separators=(",", ":"))) <= 4000
    assert parse_results(doc)  # still a valid summary


# ------------------------------------------------------------------ what the handler writes to status
def test_benchmark_status_from_the_termination_message() -> None:
    from trtllm_operator.api.engine import BenchmarkStatus  # noqa: PLC0415
    from trtllm_operator.handlers.tuning import benchmark_results_status  # noqa: PLC0415

    fields = benchmark_results_status(SWEEP.read_text(), "concurrency")
    assert fields["recommendedMaxBatchSize"] == 640
    assert fields["curves"][0]["knee"] == 512
    assert fields["runs"][-1] == {
        "inputTokens": 128,
        "outputTokens": 128,
        "concurrency": 2048,
        "error": "trtllm-bench exited with 1",
    }
    # the status model (hence the CRD schema) accepts it
    BenchmarkStatus.model_validate({**fields, "phase": "Succeeded"})
    with pytest.raises(ReportError, match="not JSON"):
        benchmark_results_status("Traceback (most recent call last): … CUDA out of memory", "concurrency")


def test_advisor_config_from_spec_keeps_clear_thresholds_inside() -> None:
    from trtllm_operator.api.deployment import TuningSpec  # noqa: PLC0415
    from trtllm_operator.handlers.tuning import advisor_config  # noqa: PLC0415

    cfg = advisor_config(TuningSpec(enabled=True))
    assert (cfg.low, cfg.low_clear, cfg.high_clear, cfg.high) == (0.5, 0.55, 0.75, 0.8)
    narrow = advisor_config(TuningSpec(enabled=True, low_threshold=0.6, high_threshold=0.65))
    assert narrow.low < narrow.low_clear <= narrow.high_clear < narrow.high
