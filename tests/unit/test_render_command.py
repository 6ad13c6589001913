"""``trtllm-operator render``: every child manifest of the examples, and refusals with exit codes."""

from __future__ import annotations

from pathlib import Path

import kubernetes_validate
import pytest
import yaml

from trtllm_operator.cli import main

REPO = Path(__file__).resolve().parents[2]
K8S_SCHEMA = "1.34.0"
EXAMPLES = sorted(
    p.name for p in (REPO / "examples").glob("*.yaml") if "kind: LLMDeployment" in p.read_text()
)


@pytest.mark.parametrize("example", EXAMPLES)
def test_examples_render_every_child(example: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["render", "-f", str(REPO / "examples" / example)]) == 0
    docs = list(yaml.safe_load_all(capsys.readouterr().out))
    kinds = sorted(d["kind"] for d in docs)
    assert kinds.count("ConfigMap") == kinds.count("Service") == kinds.count("PodDisruptionBudget") >= 1
    workloads = [d for d in docs if d["kind"] in ("Deployment", "LeaderWorkerSet")]
    assert len(workloads) == kinds.count("Service")
    for cm in (d for d in docs if d["kind"] == "ConfigMap"):
        assert not any("${" in v for k, v in cm["data"].items() if k != "launch.sh")
    for doc in docs:
        if doc["kind"] != "LeaderWorkerSet":  # not a built-in kind
            doc["metadata"]["ownerReferences"][0]["uid"] = "00000000-0000-0000-0000-000000000000"
            # The control plane's version is 1.34; the newest schema the validator ships is strict
            # about unknown fields, which is the point of the check.
            assert kubernetes_validate.validate(doc, K8S_SCHEMA, strict=True)
    workload = workloads[0]
    if workload["kind"] == "Deployment":  # the check is real: an unknown pod field is rejected
        workload["spec"]["template"]["spec"]["gpuCount"] = 1
        with pytest.raises(kubernetes_validate.ValidationError):
            kubernetes_validate.validate(workload, K8S_SCHEMA, strict=True)


def test_separate_engine_file_and_refusals(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    docs = list(yaml.safe_load_all((REPO / "examples" / "llama-3.1-8b-fp8-h100.yaml").read_text()))
    engine = next(d for d in docs if d["kind"] == "LLMEngine")
    dep = next(d for d in docs if d["kind"] == "LLMDeployment")
    (tmp_path / "engine.yaml").write_text(yaml.safe_dump(engine))
    (tmp_path / "dep.yaml").write_text(yaml.safe_dump(dep))
    assert main(["render", "-f", str(tmp_path / "dep.yaml"), "--engine", str(tmp_path / "engine.yaml")]) == 0
    out = list(yaml.safe_load_all(capsys.readouterr().out))
    deployment = next(d for d in out if d["kind"] == "Deployment")
    key = deployment["metadata"]["annotations"]["llm.trtllm-operator.dev/engine-key"]
    assert len(key) == 64
    assert deployment["spec"]["template"]["spec"]["volumes"][0]["persistentVolumeClaim"]["claimName"] == (
        "llama-3-1-8b-fp8-artifacts"
    )

    assert main(["render", "-f", str(tmp_path / "dep.yaml")]) == 2  # engine missing
    assert "spec.engineRef.name" in capsys.readouterr().err

    dep["spec"]["server"]["image"] = "nvcr.io/nvidia/tritonserver:25.05-trtllm-python-py3"
    (tmp_path / "dep.yaml").write_text(yaml.safe_dump(dep))
    assert main(["render", "-f", str(tmp_path / "dep.yaml"), "--engine", str(tmp_path / "engine.yaml")]) == 1
    assert "EngineIncompatible" in capsys.readouterr().err

    dep["spec"]["server"].pop("image")
    engine["spec"]["parallelism"] = {"tensor": 8, "pipeline": 2}
    (tmp_path / "dep.yaml").write_text(yaml.safe_dump(dep))
    (tmp_path / "engine.yaml").write_text(yaml.safe_dump(engine))
    args = ["render", "-f", str(tmp_path / "dep.yaml"), "--engine", str(tmp_path / "engine.yaml")]
    assert main(args) == 1
    assert "LeaderWorkerSetRequired" in capsys.readouterr().err
    assert main([*args, "--lws"]) == 0
    assert "kind: LeaderWorkerSet" in capsys.readouterr().out
