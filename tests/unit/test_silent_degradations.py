"""Audit rows B7, B9, B10 (issue 26 item 5): what trtllm-build or the executor would change silently.

- B7: TensorRT-LLM's executor turns KV-cache block reuse and chunked context off for an engine
  without paged context FMHA (``cpp/tensorrt_llm/batch_manager/trtGptModelInflightBatching.cpp`` and
  ``cpp/tensorrt_llm/executor/executorImpl.cpp`` ``fixExecutorConfig``), and trtllm-build drops paged
  context FMHA for an FP8 KV cache with a format outside FP8/W4A8_AWQ/NVFP4 (1.2
  ``tensorrt_llm/builder.py``). The artifact's repository and the deployment's must not enable them.
- B9: without ``--logits_dtype`` the engine takes the checkpoint's ``logits_dtype`` (TensorRT-LLM
  ``tensorrt_llm/commands/build.py`` ``build_model``), ``float16`` from ModelOpt 0.47 for bf16 models
  (``modelopt/torch/export/tensorrt_llm_utils.py``), while tensorrtllm_backend v0.19.0 fills
  ``logits_datatype`` with ``TYPE_FP32`` (README.md, ``all_models/inflight_batcher_llm``).
- B10: ``PluginConfig.from_arguments`` (TensorRT-LLM ``tensorrt_llm/plugin/plugin.py``, stored
  c20322ff) records an explicit disable only for the literal ``--gemm_plugin disable``; NVFP4 turns
  the GEMM plugin on otherwise.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from engine_builder.package import triton_params
from engine_builder.spec import BuildSpec
from engine_builder.triton import render_trtllm_repository
from engine_builder.trtllm_build import trtllm_build_command
from trtllm_operator.decide.serving import ServingPlan, ServingRefusal, plan_serving

REPO = Path(__file__).resolve().parents[2]
KEY = "c" * 64
LIMITS = {"max_batch_size": 8, "max_seq_len": 512, "max_num_tokens": 2048}
#: trtllm-build --logits_dtype value → the Triton type that describes the same tensor.
TRITON_TYPE = {"float32": "TYPE_FP32", "float16": "TYPE_FP16"}


def build_spec(**overrides: Any) -> BuildSpec:
    data: dict[str, Any] = {
        "model": {"uri": "hf://org/model", "revision": "abc"},
        "runtime_image": "nvcr.io/nvidia/tritonserver:26.03-trtllm-python-py3",
        "target": {"gpu_product": "NVIDIA-H100-80GB-HBM3", "sm": 90},
        **overrides,
    }
    return BuildSpec.model_validate(data)


def flag(cmd: list[str], name: str) -> str | None:
    return cmd[cmd.index(name) + 1] if name in cmd else None


def parameter(config: str, key: str) -> str:
    m = re.search(r'key: "' + key + r'"\s*value: \{\s*string_value: "([^"]*)"', config)
    assert m, key
    return m.group(1)


@pytest.mark.parametrize("gemm", ["disable", "auto", "bfloat16"])
def test_gemm_plugin_is_always_passed(gemm: str) -> None:
    """B10: ``disable`` reaches trtllm-build as the literal ``--gemm_plugin disable``."""
    cmd = trtllm_build_command(build_spec(build={"gemm_plugin": gemm}), LIMITS, Path("c"), Path("e"))
    assert flag(cmd, "--gemm_plugin") == gemm


def test_engine_logits_dtype_is_what_the_triton_repository_declares() -> None:
    """B9: the engine's logits dtype is set explicitly, and the artifact's repository declares the
    same type for context and generation logits (tensorrt_llm, ensemble)."""
    spec = build_spec(quantization={"format": "fp8", "kv_cache_dtype": "fp8"})
    cmd = trtllm_build_command(spec, LIMITS, Path("c"), Path("e"))
    dtype = flag(cmd, "--logits_dtype")
    assert dtype in TRITON_TYPE
    files = render_trtllm_repository(triton_params(spec, LIMITS, "/models/k"))
    for model in ("tensorrt_llm", "ensemble"):
        config = files[f"{model}/config.pbtxt"]
        for name in ("context_logits", "generation_logits"):
            m = re.search(r'name: "' + name + r'"\s*data_type: (TYPE_\w+)', config)
            assert m, (model, name)
            assert m.group(1) == TRITON_TYPE[str(dtype)], (model, name)


@pytest.mark.parametrize(
    ("quantization", "paged_context_fmha", "reuse"),
    [
        ({"format": "fp8", "kv_cache_dtype": "fp8"}, True, "true"),
        ({"format": "nvfp4", "kv_cache_dtype": "fp8"}, True, "true"),
        # trtllm-build drops paged context FMHA (builder.py): FP8 KV with INT8 SmoothQuant / INT4 AWQ
        ({"format": "int8_sq", "kv_cache_dtype": "fp8"}, True, "false"),
        ({"format": "int4_awq", "kv_cache_dtype": "fp8"}, True, "false"),
        ({"format": "none", "kv_cache_dtype": "int8"}, True, "false"),
        ({"format": "fp8", "kv_cache_dtype": "fp8"}, False, "false"),
    ],
)
def test_artifact_enables_reuse_only_for_an_engine_that_can(
    quantization: dict[str, str], paged_context_fmha: bool, reuse: str
) -> None:
    """B7, builder side: the artifact's default repository (a build spec need not pass admission)."""
    spec = build_spec(quantization=quantization, build={"paged_context_fmha": paged_context_fmha})
    config = render_trtllm_repository(triton_params(spec, LIMITS, "/models/k"))["tensorrt_llm/config.pbtxt"]
    assert parameter(config, "enable_kv_cache_reuse") == reuse


def example() -> tuple[dict[str, Any], dict[str, Any]]:
    docs = list(yaml.safe_load_all((REPO / "examples" / "llama-3.1-8b-fp8-h100.yaml").read_text()))
    engine = next(d for d in docs if d["kind"] == "LLMEngine")
    dep = next(d for d in docs if d["kind"] == "LLMDeployment")
    dep["metadata"].update(namespace="team-a", uid="u")
    engine["metadata"]["namespace"] = "team-a"
    engine["status"] = {
        "engineKey": KEY,
        "artifact": {"uri": f"pvc://llama-3-1-8b-fp8-artifacts/{KEY}", "sizeBytes": 9 * 2**30},
    }
    return dep, engine


def served_config(dep: dict[str, Any], engine: dict[str, Any]) -> str:
    plan = plan_serving(dep, engine, gpus_per_node=8, lws_installed=False)
    assert isinstance(plan, ServingPlan), plan
    return plan.files["tensorrt_llm/config.pbtxt"]


def test_deployment_reuse_follows_the_engine() -> None:
    """B7, operator side: reuse (on by default) is rendered only for an engine with paged context
    FMHA; the pytorch backend has no engine and keeps the setting."""
    dep, engine = example()
    dep["spec"]["server"].pop("enableKVCacheReuse", None)
    assert parameter(served_config(dep, engine), "enable_kv_cache_reuse") == "true"
    engine["spec"].setdefault("build", {})["pagedContextFMHA"] = False
    assert parameter(served_config(dep, engine), "enable_kv_cache_reuse") == "false"


def test_chunked_context_against_an_engine_without_paged_context_fmha_is_refused() -> None:
    dep, engine = example()
    dep["spec"]["server"]["enableChunkedContext"] = True
    assert parameter(served_config(dep, engine), "enable_chunked_context") == "true"
    engine["spec"].setdefault("build", {})["pagedContextFMHA"] = False
    refused = plan_serving(dep, engine, gpus_per_node=8, lws_installed=False)
    assert isinstance(refused, ServingRefusal) and refused.blocked is not None
    reason, message = refused.blocked
    assert reason == "PagedContextFMHARequired"
    assert "spec.server.enableChunkedContext" in message and "pagedContextFMHA false" in message
    assert "enableChunkedContext: false" in message
