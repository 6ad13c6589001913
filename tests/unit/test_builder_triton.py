"""engine_builder.triton: Triton model-repository rendering (pure, table-driven)."""

from __future__ import annotations

import re

import pydantic
import pytest
import yaml

from engine_builder.triton import (
    LLMAPIModelParams,
    TemplateError,
    TritonModelParams,
    check_no_placeholders,
    render_llmapi_model,
    render_trtllm_repository,
    tensorrt_llm_parameters,
)

TRT = "tensorrt_llm/config.pbtxt"
ENS = "ensemble/config.pbtxt"
BASE = {"engine_dir": "/artifacts/k/engine", "tokenizer_dir": "/artifacts/k/tokenizer"}


def _params_of(text: str) -> dict[str, str]:
    """parameters: { key: "k" value: { string_value: "v" } } → {k: v}."""
    pattern = r'parameters: \{ key: "([^"]+)" value: \{ string_value: "((?:[^"\\]|\\.)*)" \} \}'
    return dict(re.findall(pattern, text))


def _balanced(text: str) -> bool:
    stack: list[str] = []
    pairs = {"}": "{", "]": "["}
    in_string = False
    prev = ""
    for ch in text:
        if ch == '"' and prev != "\\":
            in_string = not in_string
        elif not in_string and ch in "{[":
            stack.append(ch)
        elif not in_string and ch in "}]" and (not stack or stack.pop() != pairs[ch]):
            return False
        prev = ch
    return not stack and not in_string


def test_default_repository_has_four_models_and_no_placeholders() -> None:
    files = render_trtllm_repository(TritonModelParams(**BASE))
    configs = sorted(p for p in files if p.endswith("config.pbtxt"))
    assert configs == [
        "ensemble/config.pbtxt",
        "postprocessing/config.pbtxt",
        "preprocessing/config.pbtxt",
        "tensorrt_llm/config.pbtxt",
    ]
    for model in ("ensemble", "postprocessing", "preprocessing", "tensorrt_llm"):
        assert files[f"{model}/1/.gitkeep"] == ""
    for path, text in files.items():
        assert "${" not in text, path
        assert _balanced(text), path


def test_bls_is_optional() -> None:
    files = render_trtllm_repository(TritonModelParams(**BASE, include_bls=True, bls_instance_count=3))
    bls = files["tensorrt_llm_bls/config.pbtxt"]
    assert "count: 3 kind: KIND_CPU" in bls
    assert _params_of(bls)["tensorrt_llm_model_name"] == "tensorrt_llm"


def test_bls_instances_default_to_the_max_batch_size() -> None:
    """TensorRT-LLM triton_backend docs model_config.md (tensorrt_llm_bls, bls_instance_count): "set
    the number of model instances to the maximum batch size supported by the TRT engine to allow
    concurrent request execution" — one instance runs one request at a time."""
    params = TritonModelParams(**{**BASE, "triton_max_batch_size": 24}, include_bls=True)
    assert "count: 24 kind: KIND_CPU" in render_trtllm_repository(params)["tensorrt_llm_bls/config.pbtxt"]


@pytest.mark.parametrize(
    ("field", "value", "key", "expected"),
    [
        ("kv_cache_free_gpu_mem_fraction", 0.85, "kv_cache_free_gpu_mem_fraction", "0.85"),
        ("enable_kv_cache_reuse", False, "enable_kv_cache_reuse", "false"),
        ("batching_strategy", "V1", "gpt_model_type", "V1"),
        ("batch_scheduler_policy", "max_utilization", "batch_scheduler_policy", "max_utilization"),
        ("max_tokens_in_paged_kv_cache", 259840, "max_tokens_in_paged_kv_cache", "259840"),
        ("enable_chunked_context", True, "enable_chunked_context", "true"),
        ("gpu_device_ids", ((0, 1), (2, 3)), "gpu_device_ids", "0,1;2,3"),
        ("max_attention_window_size", (4096, 8192), "max_attention_window_size", "4096,8192"),
        ("decoding_mode", "top_k_top_p", "decoding_mode", "top_k_top_p"),
        ("max_beam_width", 4, "max_beam_width", "4"),
    ],
)
def test_server_settings_reach_tensorrt_llm_parameters(
    field: str, value: object, key: str, expected: str
) -> None:
    files = render_trtllm_repository(TritonModelParams(**BASE, **{field: value}))
    assert _params_of(files["tensorrt_llm/config.pbtxt"])[key] == expected


def test_reference_defaults_are_explicit() -> None:
    params = _params_of(render_trtllm_repository(TritonModelParams(**BASE))["tensorrt_llm/config.pbtxt"])
    assert params["gpt_model_path"] == BASE["engine_dir"]
    assert params["gpt_model_type"] == "inflight_fused_batching"
    assert params["kv_cache_free_gpu_mem_fraction"] == "0.9"
    assert params["enable_kv_cache_reuse"] == "true"
    assert params["batch_scheduler_policy"] == "guaranteed_no_evict"
    assert params["executor_worker_path"] == "/opt/tritonserver/backends/tensorrtllm/trtllmExecutorWorker"
    # Unset optional parameters are left out (the backend default applies), never rendered empty.
    assert "max_tokens_in_paged_kv_cache" not in params
    assert "gpu_device_ids" not in params


@pytest.mark.parametrize(
    ("field", "value", "needle", "path"),
    [
        ("triton_max_batch_size", 48, "max_batch_size: 48", ENS),
        ("triton_max_batch_size", 48, "preferred_batch_size: [ 48 ]", TRT),
        ("decoupled", True, "model_transaction_policy { decoupled: true }", TRT),
        ("max_queue_delay_microseconds", 250, "max_queue_delay_microseconds: 250", TRT),
        ("max_queue_size", 128, "max_queue_size: 128", "preprocessing/config.pbtxt"),
        ("preprocessing_instance_count", 5, "count: 5 kind: KIND_CPU", "preprocessing/config.pbtxt"),
        ("postprocessing_instance_count", 6, "count: 6 kind: KIND_CPU", "postprocessing/config.pbtxt"),
        ("tensorrt_llm_instance_count", 2, "count: 2 kind: KIND_CPU", TRT),
        ("triton_backend", "python", 'backend: "python"', TRT),
        ("logits_datatype", "TYPE_FP16", "data_type: TYPE_FP16 dims: [ -1, -1, -1 ]", ENS),
    ],
)
def test_scheduling_fields_are_rendered(field: str, value: object, needle: str, path: str) -> None:
    files = render_trtllm_repository(TritonModelParams(**BASE, **{field: value}))
    assert needle in files[path]


def test_python_models_always_get_the_keys_model_py_reads() -> None:
    files = render_trtllm_repository(TritonModelParams(**BASE))
    pre = _params_of(files["preprocessing/config.pbtxt"])
    assert pre["tokenizer_dir"] == BASE["tokenizer_dir"]
    assert pre["multimodal_model_path"] == ""
    assert pre["add_special_tokens"] == "true"
    post = _params_of(files["postprocessing/config.pbtxt"])
    assert post == {"tokenizer_dir": BASE["tokenizer_dir"], "skip_special_tokens": "true"}


def test_string_values_are_escaped() -> None:
    files = render_trtllm_repository(TritonModelParams(engine_dir='/a"b\\c', tokenizer_dir="/t"))
    assert r'string_value: "/a\"b\\c"' in files["tensorrt_llm/config.pbtxt"]


def test_placeholder_in_a_value_is_refused() -> None:
    with pytest.raises(TemplateError, match=r"tensorrt_llm/config.pbtxt:\d+: unfilled placeholder"):
        render_trtllm_repository(TritonModelParams(engine_dir="/x/${engine}", tokenizer_dir="/t"))


def test_check_no_placeholders_names_file_and_line() -> None:
    with pytest.raises(TemplateError, match=r"a/config.pbtxt:2"):
        check_no_placeholders({"a/config.pbtxt": "ok\nmax_batch_size: ${triton_max_batch_size}\n"})


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"kv_cache_free_gpu_mem_fraction": 0.0}, "kv_cache_free_gpu_mem_fraction"),
        ({"kv_cache_free_gpu_mem_fraction": 1.5}, "kv_cache_free_gpu_mem_fraction"),
        ({"triton_max_batch_size": 0}, "triton_max_batch_size"),
        ({"batching_strategy": "static"}, "batching_strategy"),
        ({"engine_dir": ""}, "engine_dir"),
        ({"unknown_knob": 1}, "unknown_knob"),
    ],
)
def test_bad_values_name_the_field(overrides: dict[str, object], field: str) -> None:
    with pytest.raises(pydantic.ValidationError, match=field):
        TritonModelParams(**{**BASE, **overrides})


def test_guided_decoding_needs_tokenizer_info() -> None:
    with pytest.raises(pydantic.ValidationError, match="xgrammar_tokenizer_info_path"):
        TritonModelParams(**BASE, guided_decoding_backend="xgrammar")
    params = TritonModelParams(
        **BASE, guided_decoding_backend="xgrammar", xgrammar_tokenizer_info_path="/x.json"
    )
    rendered = dict((k, v) for k, v in tensorrt_llm_parameters(params) if v is not None)
    assert rendered["tokenizer_dir"] == BASE["tokenizer_dir"]


def test_rendering_is_deterministic() -> None:
    p = TritonModelParams(**BASE, include_bls=True)
    assert render_trtllm_repository(p) == render_trtllm_repository(p)


def test_llmapi_model_yaml_carries_llm_arguments() -> None:
    files = render_llmapi_model(
        LLMAPIModelParams(
            model="/artifacts/k/checkpoint",
            tensor_parallel_size=2,
            pipeline_parallel_size=2,
            max_batch_size=64,
            max_num_tokens=8192,
            kv_cache_free_gpu_mem_fraction=0.8,
            enable_kv_cache_reuse=False,
            kv_cache_dtype="fp8",
            decoupled=True,
            batch_scheduler_policy="max_utilization",
        )
    )
    assert sorted(files) == ["tensorrt_llm/1/model.yaml", "tensorrt_llm/config.pbtxt"]
    doc = yaml.safe_load(files["tensorrt_llm/1/model.yaml"])
    assert doc["model"] == "/artifacts/k/checkpoint"
    assert doc["backend"] == "pytorch"
    assert (doc["tensor_parallel_size"], doc["pipeline_parallel_size"]) == (2, 2)
    assert doc["kv_cache_config"] == {
        "free_gpu_memory_fraction": 0.8,
        "enable_block_reuse": False,
        "dtype": "fp8",
    }
    assert doc["scheduler_config"] == {"capacity_scheduler_policy": "MAX_UTILIZATION"}
    assert doc["triton_config"] == {"max_batch_size": 0, "decoupled": True}
    # config.pbtxt repeats triton_config (upstream applies it only in auto_complete_config(), which
    # --disable-auto-complete-config skips) and has one instance (one full LLM() per instance)
    assert "model_transaction_policy { decoupled: true }" in files["tensorrt_llm/config.pbtxt"]
    assert "\nmax_batch_size: 0\n" in files["tensorrt_llm/config.pbtxt"]
    assert "count: 1 kind: KIND_CPU" in files["tensorrt_llm/config.pbtxt"]
    assert _balanced(files["tensorrt_llm/config.pbtxt"])
    assert "${" not in "".join(files.values())
