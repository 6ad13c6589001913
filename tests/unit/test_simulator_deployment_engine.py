"""``simulate --deployment`` with the LLMEngine in the same input (fresh-user trial 44): the pair is
checked as ``render -f`` checks it (F24), and the replica's server settings the simulator cannot
honour are named (F27)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from trtllm_operator.cli import main

REPO = Path(__file__).resolve().parents[2]
CONFIGS = REPO / "tests" / "fixtures" / "model-configs"
QWEN_7B = CONFIGS / "Qwen__Qwen2.5-7B-Instruct.json"
LLAMA_8B = CONFIGS / "meta-llama__Llama-3.1-8B-Instruct.json"
TRACE = "poisson:rate=1,duration=5"


def _docs(example: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((REPO / "examples" / example).read_text()) if d]


def _deployment(docs: list[dict[str, Any]]) -> dict[str, Any]:
    return next(d for d in docs if d["kind"] == "LLMDeployment")


def _write(tmp_path: Path, docs: list[dict[str, Any]], name: str = "in.yaml") -> str:
    path = tmp_path / name
    path.write_text(yaml.safe_dump_all(docs))
    return str(path)


def test_a_deployment_render_refuses_to_serve_is_refused_in_renders_words(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """F24: the pytorch ``api: openai`` example (trtllm-serve) with autoscaling added ran a whole
    autoscaling simulation, though ``render`` refuses it (``OpenAIFrontendUnsupported``: trtllm-serve
    exports neither signal). simulate now applies render's serving gate
    (decide.serving.plan_serving) to the LLMEngine of the input and refuses it with render's words."""
    docs = _docs("qwen2.5-7b-pytorch-openai.yaml")
    dep = _deployment(docs)
    dep["spec"].pop("replicas", None)
    targets = {"activeRequestUtilization": 0.5}
    dep["spec"]["autoscaling"] = {"enabled": True, "maxReplicas": 4, "targets": targets}
    path = _write(tmp_path, docs)
    assert main(["render", "-f", path]) == 1
    rendered = capsys.readouterr().err
    assert "qwen2-5-7b-chat: OpenAIFrontendUnsupported: spec.autoscaling.enabled:" in rendered, rendered
    args = ["simulate", "--trace", TRACE, "--model-config", str(QWEN_7B), "--gpu", "H100"]
    assert main([*args, "--quantization", "fp8", "--kv-cache-dtype", "fp8", "--deployment", path]) == 2
    err = capsys.readouterr().err
    refusal = next(line for line in rendered.splitlines() if "OpenAIFrontendUnsupported" in line)
    words = refusal.split(": error: ", 1)[1]
    assert f"trtllm-operator simulate: error: --deployment {path}: {words}" in err, err
    assert "render refuses it too" in err, err


def test_the_engine_of_the_input_is_checked_as_render_checks_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """F24: the LLMEngine beside the deployment was "not read (nor checked)": an engine render refuses
    for its schema (an unknown field, as kubectl apply refuses it) is refused here too, with render's
    message; the example as shipped still runs."""
    docs = _docs("autoscaled-deployment.yaml")
    engine = next(d for d in docs if d["kind"] == "LLMEngine")
    engine["spec"]["build"]["maxBatchSise"] = 8
    path = _write(tmp_path, docs)
    args = ["simulate", "--trace", TRACE, "--model-config", str(LLAMA_8B), "--gpu", "H100"]
    assert main([*args, "--deployment", path]) == 2
    err = capsys.readouterr().err
    name = engine["metadata"]["name"]
    assert f"--deployment {path}: LLMEngine {name}: spec.build.maxBatchSise: unknown field" in err, err
    del engine["spec"]["build"]["maxBatchSise"]
    assert main([*args, "--deployment", _write(tmp_path, docs), "--output", "json"]) == 0
