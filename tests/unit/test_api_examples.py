"""Every example parses with the API models and validates against the generated CRD schema.

The API server (integration tests) is the real judge, including CEL; this tier catches a typo in
an example or a model/schema mismatch in a second, without a cluster.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from trtllm_operator.api import (
    API_VERSION,
    DEPLOYMENT_KIND,
    ENGINE_KIND,
    LLMDeploymentSpec,
    LLMEngineSpec,
)
from trtllm_operator.api.crd import MAX_NAME_LENGTH, deployment_crd, engine_crd

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((ROOT / "examples").glob("*.yaml"))
SPECS = {ENGINE_KIND: LLMEngineSpec, DEPLOYMENT_KIND: LLMDeploymentSpec}
SCHEMAS = {
    ENGINE_KIND: engine_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"],
    DEPLOYMENT_KIND: deployment_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"],
}


def _docs(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text(encoding="utf-8")) if d]


def test_the_six_scenarios_exist() -> None:
    assert len(EXAMPLES) >= 6
    engines = [d for p in EXAMPLES for d in _docs(p) if d["kind"] == ENGINE_KIND]
    specs = [LLMEngineSpec.model_validate(d["spec"]) for d in engines]
    assert any(s.backend == "pytorch" for s in specs)
    # A mixture-of-experts model split over GPUs; the tensorrt backend cannot be expert-parallel
    # (ModelOpt 0.47 modelopt/torch/export/tensorrt_llm_utils.py writes moe_ep_size 1).
    assert any(s.quantization.format == "int4_awq" and s.parallelism.tensor > 1 for s in specs)
    assert not any(s.backend == "tensorrt" and s.parallelism.expert > 1 for s in specs)
    assert any(s.parallelism.tensor == 2 and s.gpu.product == "NVIDIA-H200" for s in specs)
    assert any(s.build.speculative_decoding.draft_model is not None for s in specs)
    deployments = [d for p in EXAMPLES for d in _docs(p) if d["kind"] == DEPLOYMENT_KIND]
    assert any(LLMDeploymentSpec.model_validate(d["spec"]).autoscaling.enabled for d in deployments)


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_example_is_commented_and_valid(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    assert text.startswith("#"), f"{path.name}: start with a comment that explains the scenario"
    engines = {d["metadata"]["name"] for d in _docs(path) if d["kind"] == ENGINE_KIND}
    for doc in _docs(path):
        assert doc["apiVersion"] == API_VERSION
        name = doc["metadata"]["name"]
        assert len(name) <= MAX_NAME_LENGTH
        SPECS[doc["kind"]].model_validate(doc["spec"])
        jsonschema.Draft4Validator(SCHEMAS[doc["kind"]]).validate(doc)
        if doc["kind"] == DEPLOYMENT_KIND:
            assert doc["spec"]["engineRef"]["name"] in engines, f"{name}: engine not in {path.name}"


def test_schema_rejects_what_the_models_reject() -> None:
    """A spot check that bounds reach the schema: out-of-range and unknown-enum values fail both."""
    doc = _docs(ROOT / "examples" / "llama-3.1-8b-fp8-h100.yaml")[1]
    doc["spec"]["server"]["kvCacheFreeGpuMemFraction"] = 0
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft4Validator(SCHEMAS[DEPLOYMENT_KIND]).validate(doc)
    with pytest.raises(ValueError, match=r"kvCacheFreeGpuMemFraction"):
        LLMDeploymentSpec.model_validate(doc["spec"])
    engine = _docs(ROOT / "examples" / "llama-3.1-8b-fp8-h100.yaml")[0]
    engine["spec"]["quantization"]["format"] = "fp4"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft4Validator(SCHEMAS[ENGINE_KIND]).validate(engine)
