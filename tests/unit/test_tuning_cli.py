"""``trtllm-operator tune``: bench reports, the simulator and the KV history give the operator's answer."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from trtllm_operator.cli import main

REPO = Path(__file__).resolve().parents[2]
SWEEP = REPO / "tests/fixtures/trtllm-bench/llama-3.1-8b-fp8-h100-sweep.json"
FULL = REPO / "tests/fixtures/trtllm-bench/llama-3.1-8b-fp8-h100-128-128.report.json"
CONFIG = (
    REPO / "operator/src/trtllm_operator/simulate/calibration_models/meta-llama__Llama-3.1-8B-Instruct.json"
)


def run_json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict:  # type: ignore[type-arg]
    assert main(["tune", *argv, "--output", "json"]) == 0
    return dict(json.loads(capsys.readouterr().out))


def test_bench_report_sweep(capsys: pytest.CaptureFixture[str]) -> None:
    doc = run_json(capsys, "--bench-report", str(SWEEP))
    assert doc["recommendedMaxBatchSize"] == 640
    assert doc["curves"][0]["knee"] == 512
    assert doc["runs"][-1]["error"] == "trtllm-bench exited with 1"


def test_bare_reports_with_concurrency(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    full = json.loads(FULL.read_text())
    files = []
    for conc, tput in ((16, 5000.0), (64, 13000.0), (256, 14000.0)):
        full["performance"]["system_output_throughput_tok_s"] = tput
        f = tmp_path / f"r{conc}.json"
        f.write_text(json.dumps(full))
        files.append(f"{f}@{conc}")
    doc = run_json(capsys, "--bench-report", *files)
    assert [r["concurrency"] for r in doc["runs"]] == [16, 64, 256]
    assert doc["curves"][0]["knee"] == 64 and doc["recommendedMaxBatchSize"] == 80


def test_simulate_matches_the_recorded_sweep(capsys: pytest.CaptureFixture[str]) -> None:
    # the fixture's curve came from the same replica model (README): same knee, same recommendation
    doc = run_json(
        capsys,
        "--simulate",
        "--model-config",
        str(CONFIG),
        "--gpu",
        "H100",
        "--quantization",
        "fp8",
        "--kv-cache-dtype",
        "fp8",
        "--values",
        "1,8,32,128,256,512,1024",
    )
    assert doc["curves"][0]["knee"] == 512 and doc["recommendedMaxBatchSize"] == 640
    sweep = run_json(capsys, "--bench-report", str(SWEEP))
    got = [r["outputTokensPerSecond"] for r in doc["runs"]]
    want = [r["outputTokensPerSecond"] for r in sweep["runs"] if r["error"] is None]
    assert got == pytest.approx(want, rel=2e-3)


def test_kv_history(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    rows = [[1_800_000_000 + 30 * i, 0.9, 2.0, 2] for i in range(61)]
    f = tmp_path / "h.json"
    f.write_text(json.dumps(rows))
    doc = run_json(capsys, "--kv-history", str(f), "--replicas", "2", "--max-batch-size", "64")
    assert [r["type"] for r in doc["recommendations"]] == ["KVCacheHigh", "AddReplicas"]
    assert doc["recommendations"][1]["changes"] == [
        {"field": "spec.replicas", "current": 2, "recommended": 3}
    ]


def test_table_output(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["tune", "--bench-report", str(SWEEP)]) == 0
    out = capsys.readouterr().out
    assert "recommended maxBatchSize: 640" in out and "knee at concurrency 512" in out


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        (["--bench-report", "/nonexistent.json"], "cannot read a JSON report"),
        (["--bench-report", f"{SWEEP}@x"], "positive concurrency"),
        (["--simulate", "--gpu", "H100"], "needs --model-config and --gpu"),
        (["--simulate", "--model-config", str(CONFIG), "--gpu", "H100", "--values", "a,b"], "--values"),
        (["--simulate", "--model-config", str(CONFIG), "--gpu", "NoSuchGPU"], "NoSuchGPU"),
        # Explicit fp8 on Ampere is refused; the default (none) is not FP8.
        (["--simulate", "--model-config", str(CONFIG), "--gpu", "A100", "--quantization", "fp8"], "SM 89"),
        (["--kv-history", "/nonexistent.json"], "cannot read a JSON history"),
    ],
)
def test_bad_input_exit_2(capsys: pytest.CaptureFixture[str], argv: list[str], fragment: str) -> None:
    assert main(["tune", *argv]) == 2
    err = capsys.readouterr().err
    assert fragment in err
    # commands.say, the one home of the prefix: every line "trtllm-operator tune: error: …", as plan
    # and simulate print theirs (it lacked the "error:").
    assert all(line.startswith("trtllm-operator tune: error: ") for line in err.splitlines()), err


def _options(command: str) -> dict[str, argparse.Action]:
    from trtllm_operator.cli import build_parser  # noqa: PLC0415

    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return {flag: action for action in sub.choices[command]._actions for flag in action.option_strings}


def test_simulate_takes_the_replica_flags_as_plan_and_simulate_do(capsys: pytest.CaptureFixture[str]) -> None:
    """``tune --simulate`` declared its own --model-config, --gpu and --tp (``type=int``: "invalid int
    value: '1.5'", other help texts) beside plan's and simulate's one home,
    commands.add_replica_arguments; it takes commands.add_model_arguments now, --pp with it."""
    tune, plan, simulate = _options("tune"), _options("plan"), _options("simulate")
    for flag in ("--model-config", "--gpu", "--quantization", "--kv-cache-dtype", "--tp", "--pp"):
        for other in (plan, simulate):
            default = other[flag].default
            if other is simulate and flag in ("--quantization", "--kv-cache-dtype", "--tp", "--pp"):
                # unset there, so that --deployment's LLMEngine fills a flag left out; plan's default
                # otherwise (commands.simulate.engine_flags, fresh-user trial 44 F12)
                assert default is None, flag
                default = plan[flag].default
            assert (tune[flag].help, tune[flag].default) == (other[flag].help, default), flag
            assert getattr(tune[flag].type, "__name__", None) == getattr(other[flag].type, "__name__", None)
    assert not tune["--model-config"].required and plan["--model-config"].required  # other sources
    args = ["tune", "--simulate", "--model-config", str(CONFIG), "--gpu", "H100", "--values", "1,8"]
    with pytest.raises(SystemExit) as exited:
        main([*args, "--tp", "1.5"])
    assert exited.value.code == 2
    assert (
        "argument --tp: invalid value '1.5': not a whole number; use an integer ≥ 1"
        in capsys.readouterr().err
    )
    assert main([*args, "--pp", "2", "--output", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["runs"], (
        "pipeline parallelism is modelled as simulate models it"
    )
