"""spec.parallelism.multiNode: lets one replica span nodes, without changing the engine key."""

from __future__ import annotations

import json
from pathlib import Path

from engine_builder.planner import plan_from_build_spec
from engine_builder.spec import BuildSpec, ModelSource, Parallelism, Quantization, Target
from trtllm_operator.api import LLMEngineSpec

CONFIGS = Path(__file__).resolve().parents[1] / "fixtures" / "model-configs"


def spec(tensor: int, multi_node: bool) -> BuildSpec:
    return BuildSpec(
        model=ModelSource(uri="hf://meta-llama/Llama-3.1-70B-Instruct"),
        runtime_image="nvcr.io/nvidia/tritonserver:26.03-trtllm-python-py3",
        quantization=Quantization(format="fp8"),
        parallelism=Parallelism(tensor=tensor, multi_node=multi_node),
        target=Target(gpu_product="NVIDIA-H100-80GB-HBM3", sm=90),
    )


def test_multi_node_is_placement_only() -> None:
    assert spec(16, True).engine_key() == spec(16, False).engine_key()


def test_tp_beyond_one_node_needs_multi_node() -> None:
    config = json.loads((CONFIGS / "meta-llama__Llama-3.1-70B-Instruct.json").read_text())
    refused = plan_from_build_spec(spec(16, False), config)
    assert not refused.fits
    assert any("multiNode" in r.fix for r in refused.reasons)
    allowed = plan_from_build_spec(spec(16, True), config)
    assert allowed.fits, allowed.reasons


def test_api_field_maps_from_camel_case() -> None:
    parsed = LLMEngineSpec.model_validate(
        {
            "model": {"source": "hf://meta-llama/Llama-3.1-70B-Instruct"},
            "runtime": {"image": "nvcr.io/nvidia/tritonserver:26.03-trtllm-python-py3"},
            "gpu": {"product": "NVIDIA-H100-80GB-HBM3"},
            "parallelism": {"tensor": 16, "multiNode": True},
            "storage": {"pvc": {"claimName": "engines"}},
        }
    )
    assert parsed.parallelism.multi_node is True
