"""`trtllm-operator cache spec`: the build spec for an LLMEngine manifest, for a run outside the cluster."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from trtllm_operator.cli import main

ENGINE = """
apiVersion: llm.trtllm-operator.dev/v1alpha1
kind: LLMEngine
metadata: {name: NAME}
spec:
  model: {source: hf://meta-llama/Llama-3.1-8B-Instruct}
  runtime: {image: nvcr.io/nvidia/tritonserver:26.03-trtllm-python-py3}
  quantization: {format: fp8}
  gpu: {product: NVIDIA-H100-80GB-HBM3}
  storage: {pvc: {claimName: engines}}
"""
DEPLOYMENT = """
apiVersion: llm.trtllm-operator.dev/v1alpha1
kind: LLMDeployment
metadata: {name: chat}
spec: {engineRef: {name: a}}
"""


def run(tmp_path: Path, text: str, *extra: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    path = tmp_path / "in.yaml"
    path.write_text(text)
    code = main(["cache", "spec", "-f", str(path), *extra])
    out, err = capsys.readouterr()
    return code, out, err


def test_multi_document_file_picks_the_engine(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = ENGINE.replace("NAME", "a") + "---\n" + DEPLOYMENT
    code, out, _ = run(tmp_path, text, "--artifact-root", str(tmp_path / "store"), capsys=capsys)
    assert code == 0
    first, _, body = out.partition("\n")
    assert first.startswith("# engine key: ") and len(first.split()[-1]) == 64
    spec = yaml.safe_load(body)
    assert spec["output"] == {
        "artifact_root": str(tmp_path / "store"),
        "termination_log": str(tmp_path / "store" / "termination-log"),
    }


def test_several_engines_need_a_name(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = ENGINE.replace("NAME", "a") + "---\n" + ENGINE.replace("NAME", "b")
    code, _, err = run(tmp_path, text, capsys=capsys)
    assert code == 2 and "2 LLMEngines" in err and "--name" in err
    code, out, _ = run(tmp_path, text, "--name", "b", "--termination-log", "/tmp/t", capsys=capsys)
    assert code == 0
    assert yaml.safe_load(out.partition("\n")[2])["output"]["termination_log"] == "/tmp/t"


@pytest.mark.parametrize(
    ("text", "message"),
    [(DEPLOYMENT, "no LLMEngine"), ("kind: [unclosed", "cannot read YAML")],
)
def test_bad_input_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, message: str
) -> None:
    code, _, err = run(tmp_path, text, capsys=capsys)
    assert code == 2 and message in err
