"""A pure fixture for rendering tests: the ServingParams of one LLMDeployment."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from trtllm_operator.decide.serving_params import OwnerRef, ServingParams

KEY_A = "a" * 64
KEY_B = "b" * 64


def serving_params(**overrides: Any) -> ServingParams:
    """Fixture builder: Llama on one H100, TP 1, engine key A."""
    base = ServingParams(
        name="llama",
        namespace="team-a",
        owner=OwnerRef("llama", "uid-1"),
        engine_name="llama-fp8",
        engine_key=KEY_A,
        backend="tensorrt",
        image="nvcr.io/nvidia/tritonserver:25.05-trtllm-python-py3",
        gpu_product="NVIDIA-H100-80GB-HBM3",
        artifact_claim="engines",
        artifact_sub_path=f"trtllm/{KEY_A}",
        replicas=2,
    )
    return replace(base, **overrides)
