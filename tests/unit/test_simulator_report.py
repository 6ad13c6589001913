"""Summaries, timelines and the ``trtllm-operator simulate`` command."""

from __future__ import annotations

import csv
import io
import json
import math
from pathlib import Path

import pytest
import yaml

from trtllm_operator.cli import main
from trtllm_operator.decide import autoscaling as asc
from trtllm_operator.simulate.engine import SimulationResult
from trtllm_operator.simulate.report import (
    MAX_TIMELINE_ROWS,
    TimelineTooLongError,
    check_timeline_rows,
    percentile,
    summarize,
    timeline,
    write_timeline_csv,
)
from trtllm_operator.simulate.traces import Request

ROOT = Path(__file__).resolve().parents[2]
TRACE = ROOT / "tests" / "fixtures" / "traces" / "azure-llm-2023-conv-head800.csv"
LLAMA_8B = ROOT / "tests" / "fixtures" / "model-configs" / "meta-llama__Llama-3.1-8B-Instruct.json"
NAN = math.nan


def a_result() -> SimulationResult:
    reqs = [Request(0.0, 10, 11), Request(1.0, 10, 1), Request(2.0, 10, 5), Request(3.0, 10, 5)]
    return SimulationResult(
        requests=reqs,
        first_token_s=[0.5, 3.0, 2.1, NAN],  # TTFT 0.5 s, 2 s, 0.1 s, dropped
        done_s=[1.5, 3.0, 2.5, NAN],
        dropped=1,
        gpu_seconds=7200.0,
        scale_events=2,
        max_queue=3,
        end_s=4.0,
        replica_history=[(0.0, 1, 1), (2.0, 3, 1)],
        queue_history=[(0.0, 0), (1.0, 3)],
        gpus_per_replica=2,
    )


@pytest.mark.parametrize(("q", "expected"), [(0, 1.0), (50, 2.5), (100, 4.0), (90, 3.7)])
def test_percentile_interpolates_like_numpy(q: float, expected: float) -> None:
    assert percentile([1.0, 2.0, 3.0, 4.0], q) == pytest.approx(expected)
    assert math.isnan(percentile([], 50))


def test_summary_counts_dropped_requests_as_slo_misses() -> None:
    s = summarize(a_result(), slo_ttft_ms=1000)
    assert s["requests"] == 4 and s["dropped"] == 1
    assert s["slo_attainment"] == 0.5  # 0.5 s and 0.1 s meet 1 s; the 2 s one and the dropped one miss
    assert s["ttft_p50_ms"] == pytest.approx(500.0)
    assert s["tpot_p50_ms"] == pytest.approx(100.0)  # (1.5-0.5)/10 and (2.5-2.1)/4
    assert s["gpu_hours"] == 2.0 and s["scale_events"] == 2 and s["max_queue"] == 3
    assert s["mean_replicas"] == pytest.approx((1 * 2 + 3 * 2) / 4) and s["max_replicas"] == 3


def test_timeline_buckets_by_arrival(tmp_path: Path) -> None:
    rows = timeline(a_result(), slo_ttft_ms=1000, interval_s=2.0)
    assert [r.arrivals for r in rows] == [2, 2]
    assert [r.target_replicas for r in rows] == [1, 3]
    assert rows[0].slo_attainment == 0.5 and rows[1].slo_attainment == 0.5
    out = tmp_path / "t.csv"
    write_timeline_csv(rows, out)
    parsed = list(csv.DictReader(out.open()))
    assert parsed[1]["target_replicas"] == "3" and parsed[0]["max_waiting"] == "3"


def test_timeline_refuses_more_rows_than_the_cap_before_allocating_them() -> None:
    # Fresh-user trial 44 F11: interval 1e-9 of a 4 s run was 4e9 rows, allocated until MemoryError.
    with pytest.raises(TimelineTooLongError) as caught:
        timeline(a_result(), slo_ttft_ms=1000, interval_s=1e-9)
    assert caught.value.rows == 4_000_000_000 and caught.value.smallest_interval_s == 4e-5
    assert "4,000,000,000 timeline rows for 4 s of simulated time, above the 100,000" in str(caught.value)
    assert "use an interval of at least 4e-05 s" in str(caught.value)
    assert len(timeline(a_result(), slo_ttft_ms=1000, interval_s=4e-5)) == MAX_TIMELINE_ROWS


@pytest.mark.parametrize("span_s", [1.0, 3599.7, 86_400.0, 90_017.3, 7.77])
def test_the_smallest_interval_named_fits_the_cap(span_s: float) -> None:
    with pytest.raises(TimelineTooLongError) as caught:
        check_timeline_rows(span_s, 1e-9)
    smallest = caught.value.smallest_interval_s
    check_timeline_rows(span_s, smallest)  # does not raise: the advice is followable
    assert smallest < span_s / MAX_TIMELINE_ROWS * 1.1  # and not much coarser than needed


@pytest.mark.parametrize(
    ("timestamps_ms", "rows"),
    [
        # the trace's last arrival (10 s) already needs 10^10 rows: refused before the run
        ([0, 10_000], "10,000,000,000 timeline rows for 10 s of simulated time"),
        # one request at 0 s: the run, not the trace, lasts past 0 s; refused after the run
        ([0], " timeline rows for 0."),
    ],
)
def test_cli_refuses_a_timeline_interval_that_gives_too_many_rows(
    timestamps_ms: list[int], rows: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = tmp_path / "t.jsonl"
    line = '{{"timestamp": {}, "input_length": 100, "output_length": 10}}\n'
    trace.write_text("".join(line.format(t) for t in timestamps_ms))
    args = ["simulate", "--trace", str(trace), "--model-config", str(LLAMA_8B), "--gpu", "H100"]
    args += ["--timeline-interval-s", "1e-9", "--timeline", str(tmp_path / "t.csv")]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "trtllm-operator simulate: error: --timeline-interval-s 1e-09: " in err
    assert rows in err and "above the 100,000 a timeline holds; use an interval of at least" in err
    assert not (tmp_path / "t.csv").exists()


def test_cli_json_has_the_stable_keys(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["simulate", "--trace", str(TRACE), "--time-scale", "5", "--model-config", str(LLAMA_8B)]
    args += ["--gpu", "H100", "--quantization", "fp8", "--tp", "1", "--policy", "builtin", "--output", "json"]
    args += ["--timeline", str(tmp_path / "t.csv"), "--plot", str(tmp_path / "p.png"), "--seed", "1"]
    assert main(args) == 0
    out = json.loads(capsys.readouterr().out)
    for key in (
        "slo_attainment",
        "ttft_p50_ms",
        "ttft_p90_ms",
        "ttft_p99_ms",
        "tpot_p50_ms",
        "gpu_hours",
        "scale_events",
        "max_queue",
        "requests",
        "dropped",
    ):
        assert key in out, key
    assert out["requests"] == 800 and 0 <= out["slo_attainment"] <= 1
    assert (tmp_path / "t.csv").read_text().startswith("start_s,arrivals")
    assert (tmp_path / "p.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert main(args) == 0  # same seed, same numbers
    assert json.loads(capsys.readouterr().out) == out


def test_cli_writes_the_operators_decisions(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # The decision messages (what status.autoscaling.lastDecisions shows in the operator) were not
    # in any output: the capacity policy's "held at N" could not be seen (fresh-user trial 36 F3).
    args = ["simulate", "--trace", str(TRACE), "--time-scale", "5", "--model-config", str(LLAMA_8B)]
    args += [
        "--gpu",
        "H100",
        "--quantization",
        "fp8",
        "--tp",
        "1",
        "--policy",
        "capacity",
        "--output",
        "json",
    ]
    args += ["--decisions", str(tmp_path / "d.csv"), "--cold-start-s", "45"]
    assert main(args) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["cold_start_s"] == 45.0
    rows = list(csv.DictReader((tmp_path / "d.csv").open()))
    assert rows and list(rows[0]) == ["time_s", "from_replicas", "to_replicas", "reason", "message"]
    times = [float(r["time_s"]) for r in rows]
    assert times == sorted(times) and times[1] - times[0] == pytest.approx(15.0)  # the policy's sync period
    assert {r["reason"] for r in rows} <= {str(reason) for reason in asc.Reason}
    assert any("capacity:" in r["message"] for r in rows)  # the capacity recommendation explains itself
    assert all(int(r["to_replicas"]) >= 1 for r in rows)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--policy", "static:0"], "--policy"),
        (["--gpu", "H999"], "unknown GPU product"),
        (["--trace", "/nope.csv"], "no such file"),
        (["--slo-ttft-ms", "0"], "--slo-ttft-ms"),
        (["--reserve-output-tokens", "-1"], "--reserve-output-tokens"),
        (["--initial-replicas", "-1"], "--initial-replicas must be >= 0"),
        (["--timeline-interval-s", "0", "--timeline", "x.csv"], "--timeline-interval-s must be > 0"),
        (["--timeline", "/nonexistent/dir/x.csv"], "--timeline /nonexistent/dir/x.csv: directory"),
        (["--plot", "/nonexistent/dir/p.png"], "--plot /nonexistent/dir/p.png: directory"),
        (["--deployment", str(ROOT / "README.md")], "--deployment"),
        (["--max-gpus", "0"], "--max-gpus 0 is below the 1 GPUs of one replica"),
        (["--max-gpus", "1", "--tp", "2"], "--max-gpus 1 is below the 2 GPUs"),
        (["--time-scale", "0"], "--time-scale must be > 0"),
        (["--tp", "0"], "--tp and --pp must be >= 1"),
        # nan and inf passed the range checks (nan < 0 is False) and crashed the oracle (trial 36).
        (["--policy", "oracle", "--cold-start-s", "nan"], "--cold-start-s must be a finite number >= 0"),
        (["--policy", "oracle", "--cold-start-s", "inf"], "--cold-start-s must be a finite number >= 0"),
        (["--slo-ttft-ms", "nan"], "--slo-ttft-ms must be a finite number > 0"),
        (["--time-scale", "inf"], "--time-scale must be a finite number > 0"),
        (["--timeline-interval-s", "nan", "--timeline", "x.csv"], "--timeline-interval-s must be a finite"),
        (["--policy", "oracle:2"], "0 < UTILIZATION ≤ 1.5"),
        (["--policy", "wva-saturation", "--decisions", "d.csv"], "--decisions with --policy wva-saturation"),
        (["--decisions", "/nonexistent/dir/d.csv"], "--decisions /nonexistent/dir/d.csv: directory"),
        # An autoscaler at 0 replicas never scales: the run served nothing with rc 0 (trial 36 F6).
        (["--initial-replicas", "0"], "--initial-replicas 0 with --policy builtin: an autoscaler does not"),
    ],
)
def test_cli_bad_input_exits_2_naming_the_flag(
    extra: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["simulate", "--trace", str(TRACE), "--model-config", str(LLAMA_8B), "--gpu", "H100"]
    assert main([*args, *extra]) == 2
    assert message in capsys.readouterr().err


def test_cli_simulates_a_deployment_manifest(capsys: pytest.CaptureFixture[str]) -> None:
    example = ROOT / "examples" / "autoscaled-deployment.yaml"
    args = ["simulate", "--trace", str(TRACE), "--time-scale", "5", "--model-config", str(LLAMA_8B)]
    args += ["--gpu", "H100", "--deployment", str(example), "--output", "json"]
    assert main(args) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["policy"] == f"builtin ({example})" and out["requests"] == 800


def test_cli_table_defaults_to_no_quantization(capsys: pytest.CaptureFixture[str]) -> None:
    # No --quantization: the API's default (none) applies, so an Ampere GPU works without FP8.
    args = ["simulate", "--trace", str(TRACE), "--time-scale", "5", "--model-config", str(LLAMA_8B)]
    args += ["--gpu", "A100", "--policy", "static:2", "--output", "table"]
    assert main(args) == 0
    lines = {line.split()[0]: line for line in capsys.readouterr().out.splitlines() if line.strip()}
    replica = lines["replica"]
    assert "{" not in replica and "gpus=1, max_kv_tokens=" in replica


def _autoscaled(tmp_path: Path, autoscaling: dict[str, object], *, bare: bool = False) -> Path:
    docs = list(yaml.safe_load_all((ROOT / "examples" / "autoscaled-deployment.yaml").read_text()))
    dep = next(d for d in docs if d["kind"] == "LLMDeployment")
    dep["spec"]["autoscaling"].update(autoscaling)
    out = tmp_path / "dep.yaml"
    out.write_text(yaml.safe_dump(dep["spec"]["autoscaling"] if bare else dep))
    return out


@pytest.mark.parametrize("bare", [False, True], ids=["manifest", "bare-autoscaling"])
def test_cli_deployment_with_misspelled_fields_is_refused_as_render_refuses_it(
    tmp_path: Path, bare: bool, capsys: pytest.CaptureFixture[str]
) -> None:
    """A fresh-user trial's minReplica: 3 and targets.kvCacheUtilisation were silently ignored
    (the simulation ran with the defaults); render and kubectl apply refuse them."""
    bad = _autoscaled(tmp_path, {"minReplica": 3, "targets": {"kvCacheUtilisation": 0.8}}, bare=bare)
    args = ["simulate", "--trace", str(TRACE), "--model-config", str(LLAMA_8B), "--gpu", "H100"]
    assert main([*args, "--deployment", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "spec.autoscaling.minReplica: unknown field" in err, err
    assert "spec.autoscaling.targets.kvCacheUtilisation: unknown field" in err, err
    if not bare:  # the same messages render prints for the manifest
        from trtllm_operator.commands._schema import manifest_errors  # noqa: PLC0415

        for message in manifest_errors(yaml.safe_load(bad.read_text())):
            assert f"LLMDeployment chat-autoscaled: {message}" in err, (message, err)


def test_cli_bare_autoscaling_cel_rules_apply(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = _autoscaled(tmp_path, {"minReplicas": 5, "maxReplicas": 2}, bare=True)
    args = ["simulate", "--trace", str(TRACE), "--model-config", str(LLAMA_8B), "--gpu", "H100"]
    assert main([*args, "--deployment", str(bad)]) == 2
    assert "spec.autoscaling" in capsys.readouterr().err


def _example_docs() -> list[dict[str, object]]:
    return list(yaml.safe_load_all((ROOT / "examples" / "autoscaled-deployment.yaml").read_text()))


def test_cli_deployment_reads_a_kind_list_and_stdin_as_render_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Trial 34 F3: a ``kind: List`` holding the LLMEngine and the LLMDeployment (which ``render -f``
    expands) was read as a bare spec.autoscaling ("spec.autoscaling.apiVersion: unknown field", ...),
    and ``--deployment -`` was a file named '-'. Now both are read as render reads them: the List's
    LLMDeployment is checked as a manifest (its own typo named), and stdin simulates it."""
    docs = _example_docs()
    dep = next(d for d in docs if d["kind"] == "LLMDeployment")
    typo = {**dep, "spec": {**dep["spec"], "autoscaling": {**dep["spec"]["autoscaling"], "minReplica": 2}}}  # type: ignore[dict-item]
    listed = tmp_path / "list.yaml"
    listed.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": [docs[0], typo]}))
    args = ["simulate", "--trace", str(TRACE), "--time-scale", "5", "--model-config", str(LLAMA_8B)]
    args += ["--gpu", "H100", "--output", "json"]
    assert main([*args, "--deployment", str(listed)]) == 2
    err = capsys.readouterr().err
    assert "LLMDeployment chat-autoscaled: spec.autoscaling.minReplica: unknown field" in err, err
    assert "apiVersion" not in err and "items" not in err, err
    monkeypatch.setattr(
        "sys.stdin", io.StringIO(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": docs}))
    )
    assert main([*args, "--deployment", "-"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["policy"] == "builtin (-)"
    # Trial 35: the LLMEngine beside it was silently not used; trial 44 F12: it is the replica, and a
    # note says which of its fields were taken.
    said = "note: the replica is LLMEngine llama-3-1-8b-fp8-autoscaled's (--deployment -): --quantization fp8"
    assert said in err, err
    assert "--max-batch-size" in err


@pytest.mark.parametrize(
    ("kinds", "message"),
    [
        (["LLMEngine"], "no LLMDeployment (it holds LLMEngine llama-3-1-8b-fp8-autoscaled)"),
        (["LLMDeployment", "LLMDeployment"], "2 LLMDeployments (LLMDeployment chat-autoscaled, "),
    ],
    ids=["engine-only", "two-deployments"],
)
def test_cli_deployment_without_exactly_one_llmdeployment_says_what_it_found(
    tmp_path: Path, kinds: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Trial 34 F3: a file holding only the LLMEngine said "the manifest has no spec.autoscaling"
    (it took the LLMEngine for the deployment)."""
    docs = _example_docs()
    chosen = []
    for i, kind in enumerate(kinds):
        doc = dict(next(d for d in docs if d["kind"] == kind))
        if i:
            doc["metadata"] = {"name": f"other-{i}"}
        chosen.append(doc)
    path = tmp_path / "some.yaml"
    path.write_text(yaml.safe_dump_all(chosen))
    args = ["simulate", "--trace", str(TRACE), "--model-config", str(LLAMA_8B), "--gpu", "H100"]
    assert main([*args, "--deployment", str(path)]) == 2
    err = capsys.readouterr().err
    assert f"--deployment {path}: {message}" in err, err
    assert "spec.autoscaling; add one" not in err


def test_cli_deployment_that_cannot_be_read_names_the_flag(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Trial 35: ``--deployment nope.yaml`` printed ``[Errno 2] No such file or directory: …`` alone."""
    missing = tmp_path / "nope.yaml"
    args = ["simulate", "--trace", str(TRACE), "--model-config", str(LLAMA_8B), "--gpu", "H100"]
    assert main([*args, "--deployment", str(missing)]) == 2
    assert f"error: --deployment {missing}: No such file or directory" in capsys.readouterr().err
