"""The pydantic models: wire names, defaults, status dumps, and what pydantic itself rejects."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path
from typing import get_args

import pytest
from pydantic import ValidationError

from trtllm_operator.api import (
    API_VERSION,
    DEPLOYMENT_PLURAL,
    ENGINE_PLURAL,
    Condition,
    LLMDeploymentSpec,
    LLMDeploymentStatus,
    LLMEngineSpec,
    LLMEngineStatus,
)
from trtllm_operator.api.docs import BEGIN, END, render_reference, splice
from trtllm_operator.api.engine import PlanStatus, QuantFormat

ROOT = Path(__file__).resolve().parents[2]
MINIMAL_ENGINE = {
    "model": {"source": "hf://meta-llama/Llama-3.1-8B-Instruct"},
    "runtime": {"image": "nvcr.io/nvidia/tritonserver:26.03-trtllm-python-py3"},
    "gpu": {"product": "NVIDIA-H100-80GB-HBM3"},
    "storage": {"createPVC": {"size": "50Gi"}},
}


def test_constants() -> None:
    assert API_VERSION == "llm.trtllm-operator.dev/v1alpha1"
    assert (ENGINE_PLURAL, DEPLOYMENT_PLURAL) == ("llmengines", "llmdeployments")


def test_engine_defaults_and_wire_names() -> None:
    spec = LLMEngineSpec.model_validate(MINIMAL_ENGINE)
    assert spec.backend == "tensorrt"
    assert (spec.quantization.format, spec.quantization.kv_cache_dtype) == ("none", "auto")
    assert (spec.parallelism.tensor, spec.parallelism.pipeline, spec.parallelism.expert) == (1, 1, 1)
    assert spec.build.max_batch_size is None  # left to the capacity planner
    assert spec.storage.reclaim_policy == "Retain"
    wire = spec.model_dump(by_alias=True, exclude_none=True, mode="json")
    assert wire["build"]["pagedContextFMHA"] is True
    assert wire["storage"]["createPVC"] == {"size": "50Gi", "accessMode": "ReadWriteOnce"}
    # Round trip: what the operator dumps, it parses back to the same model.
    assert LLMEngineSpec.model_validate(wire) == spec


def test_acronym_aliases_follow_kubernetes_conventions() -> None:
    plan = PlanStatus(
        weight_bytes_per_gpu=1, kv_bytes_per_token_per_gpu=2, kv_cache_bytes_per_gpu=3, max_kv_tokens=4
    )
    assert set(plan.model_dump(by_alias=True, exclude_none=True)) == {
        "weightBytesPerGPU",
        "kvBytesPerTokenPerGPU",
        "kvCacheBytesPerGPU",
        "maxKVTokens",
    }
    spec = LLMDeploymentSpec.model_validate(
        {"engineRef": {"name": "e"}, "autoscaling": {"metrics": {"prometheusURL": "http://p:9090"}}}
    )
    assert spec.autoscaling.metrics.prometheus_url == "http://p:9090"
    assert spec.server.kv_cache_free_gpu_mem_fraction == 0.9


def test_status_dump_is_a_merge_patch_without_nulls() -> None:
    now = datetime(2026, 11, 29, 19, 0, tzinfo=UTC)
    status = LLMEngineStatus(
        phase="Failed",
        conditions=[
            Condition(
                type="Ready",
                status="False",
                reason="GPUOutOfMemory",
                message="spec.build.maxNumTokens: lower it",
                last_transition_time=now,
                observed_generation=2,
            )
        ],
    )
    assert status.model_dump(by_alias=True, exclude_none=True, mode="json") == {
        "phase": "Failed",
        "conditions": [
            {
                "type": "Ready",
                "status": "False",
                "reason": "GPUOutOfMemory",
                "message": "spec.build.maxNumTokens: lower it",
                "lastTransitionTime": "2026-11-29T19:00:00Z",
                "observedGeneration": 2,
            }
        ],
    }
    assert LLMDeploymentStatus().model_dump(by_alias=True, exclude_none=True) == {}


def test_unknown_keys_are_ignored_not_fatal() -> None:
    """An operator older than the CRD must keep running when it meets a newer field."""
    spec = LLMEngineSpec.model_validate({**MINIMAL_ENGINE, "futureField": {"x": 1}})
    assert not hasattr(spec, "futureField")


def test_integer_quantities_are_read_as_their_strings() -> None:
    """The API server keeps ``cpu: 8`` an integer (x-kubernetes-int-or-string); the operator reads
    the same string as for ``"8"``, so what it renders and compares does not depend on the quoting."""
    gpu = {"product": "NVIDIA-H100-80GB-HBM3", "resources": {"cpu": 8, "memory": 68719476736}}
    spec = LLMEngineSpec.model_validate(
        {**MINIMAL_ENGINE, "gpu": gpu, "storage": {"createPVC": {"size": 10**11}}}
    )
    assert (spec.gpu.resources.cpu, spec.gpu.resources.memory) == ("8", "68719476736")
    assert spec.storage.create_pvc is not None and spec.storage.create_pvc.size == "100000000000"
    dep = LLMDeploymentSpec.model_validate({"engineRef": {"name": "e"}, "server": {"resources": {"cpu": 4}}})
    assert dep.server.resources.cpu == "4"
    with pytest.raises(ValidationError):  # YAML true is not a quantity (bool is an int in Python)
        LLMEngineSpec.model_validate({**MINIMAL_ENGINE, "gpu": {**gpu, "resources": {"cpu": True}}})


@pytest.mark.parametrize(
    ("patch", "field"),
    [
        ({"gpu": {"product": "NVIDIA-H100-80GB-HBM3", "resources": {"memory": "64 GB"}}}, "memory"),
        ({"parallelism": {"tensor": 0}}, "tensor"),
        ({"quantization": {"format": "fp4"}}, "format"),
        ({"quantization": {"awqBlockSize": 32}}, "awqBlockSize"),
        ({"model": {"source": "hf://a/b", "credentialsSecretRef": {"name": "Bad_Name", "key": "t"}}}, "name"),
    ],
)
def test_pydantic_rejects_single_field_errors_naming_the_field(patch: dict[str, object], field: str) -> None:
    with pytest.raises(ValidationError) as err:
        LLMEngineSpec.model_validate({**MINIMAL_ENGINE, **patch})
    assert field in str(err.value)


@pytest.mark.parametrize(
    ("reason", "ok"), [("Built", True), ("Build_Failed", True), ("bad reason", False), ("", False)]
)
def test_condition_reason_follows_metav1(reason: str, ok: bool) -> None:
    now = datetime(2026, 11, 29, tzinfo=UTC)
    if ok:
        Condition(type="Ready", status="True", reason=reason, last_transition_time=now)
    else:
        with pytest.raises(ValidationError):
            Condition(type="Ready", status="True", reason=reason, last_transition_time=now)


def test_docs_reference_is_fresh() -> None:
    text = (ROOT / "docs" / "api.md").read_text(encoding="utf-8")
    assert BEGIN in text and END in text
    assert splice(text, render_reference()) == text, "docs/api.md field reference is stale: run `make crds`"


def test_readme_lists_every_quantization_format_the_api_accepts() -> None:
    """Fresh-user trial 42 F2: the README's list left out mxfp8, which the CRD accepts. The list is the
    API's ``QuantFormat`` (its home, engine_builder's format table) less ``none``."""
    text = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    listed = re.search(r"quantization — ([a-z0-9_, ]+) —", text)
    assert listed is not None, "README.md no longer lists the quantization formats as 'quantization — … —'"
    assert listed.group(1).split(", ") == [f for f in get_args(QuantFormat) if f != "none"]


def test_splice_needs_markers() -> None:
    with pytest.raises(ValueError, match="markers"):
        splice("no markers here", render_reference())
