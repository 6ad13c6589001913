"""``simulate --deployment`` whose LLMEngine is not in the input (fresh-user trial 45 A12: the usual
GitOps layout, one object per file): a note names the engine not found and how to pass it, since the
replica is then the flags' (BF16 defaults for an FP8 engine: half its KV pool)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from trtllm_operator.cli import main

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "llama-3.1-8b-fp8-h100.yaml"
LLAMA_8B = REPO / "tests" / "fixtures" / "model-configs" / "meta-llama__Llama-3.1-8B-Instruct.json"
SIMULATE = [
    "simulate",
    "--trace",
    "poisson:rate=1,duration=5",
    "--model-config",
    str(LLAMA_8B),
    "--gpu",
    "H100",
]


def _split(tmp_path: Path) -> tuple[Path, Path]:
    docs = [d for d in yaml.safe_load_all(EXAMPLE.read_text()) if d]
    deployment = tmp_path / "deployment.yaml"
    engine = tmp_path / "engine.yaml"
    deployment.write_text(yaml.safe_dump(next(d for d in docs if d["kind"] == "LLMDeployment")))
    engine.write_text(yaml.safe_dump(next(d for d in docs if d["kind"] == "LLMEngine")))
    return deployment, engine


def test_an_engine_ref_the_input_does_not_hold_is_noted_with_how_to_pass_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    deployment, _ = _split(tmp_path)
    assert main([*SIMULATE, "--deployment", str(deployment)]) == 0
    err = capsys.readouterr().err
    said = (
        f"note: --deployment {deployment}: the LLMDeployment's spec.engineRef names LLMEngine "
        "'llama-3-1-8b-fp8', which the input does not hold: the replica is the one the flags describe "
        "(--model-config, --gpu, --tp, --pp, --quantization, --kv-cache-dtype, --max-batch-size, "
        "--max-num-tokens, --max-seq-len, with their defaults)"
    )
    assert said in err, err
    assert "--deployment DIR" in err and "--deployment -" in err, err


def test_the_fix_the_note_gives_finds_the_engine(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _split(tmp_path)  # both files in one directory: the note's first fix
    assert main([*SIMULATE, "--deployment", str(tmp_path)]) == 0
    err = capsys.readouterr().err
    assert "which the input does not hold" not in err, err
    assert "note: the replica is LLMEngine llama-3-1-8b-fp8's" in err, err


def test_a_bare_autoscaling_mapping_names_no_engine_and_gets_no_note(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bare = tmp_path / "bare.yaml"
    bare.write_text(
        "enabled: true\nminReplicas: 1\nmaxReplicas: 4\ntargets: {activeRequestUtilization: 0.8}\n"
    )
    assert main([*SIMULATE, "--deployment", str(bare)]) == 0
    assert "which the input does not hold" not in capsys.readouterr().err
