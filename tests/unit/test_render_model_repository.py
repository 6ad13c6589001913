"""Rendered config.pbtxt / model.yaml checked parameter by parameter (docs/reference/tensorrt-llm.md §4.3,
§3.5)."""

from __future__ import annotations

import re
from dataclasses import replace

import pytest
import yaml

from trtllm_operator.decide.serving_params import OwnerRef, ServerSettings, ServingParams
from trtllm_operator.decide.triton_config import check_filled, repository_files
from trtllm_operator.render.model_repository import desired_model_repository

KEY = "c" * 64
PARAM = re.compile(r'parameters: \{ key: "([^"]+)" value: \{ string_value: "([^"]*)" \} \}')


def params(**overrides: object) -> ServingParams:
    base = ServingParams(
        name="llama",
        namespace="ns",
        owner=OwnerRef("llama", "u"),
        engine_name="e",
        engine_key=KEY,
        backend="tensorrt",
        image="img:1",
        gpu_product="NVIDIA-H100-80GB-HBM3",
        artifact_claim="pvc",
        artifact_sub_path=KEY,
        max_batch_size=128,
        max_beam_width=1,
        server=ServerSettings(
            kv_cache_free_gpu_mem_fraction=0.85,
            enable_kv_cache_reuse=False,
            batching_strategy="inflight_fused_batching",
            batch_scheduler_policy="max_utilization",
            max_queue_delay_microseconds=100,
            max_queue_size=32,
            decoupled=True,
            instance_count=3,
            max_tokens_in_paged_kv_cache=65536,
            enable_chunked_context=True,
        ),
    )
    return replace(base, **overrides)  # type: ignore[arg-type]


def parameters(text: str) -> dict[str, str]:
    return dict(PARAM.findall(text))


# The reference's tensorrt_llm parameter list (§4.3), value expected for the settings above
# (deployment value where the deployment sets it, the backend default otherwise).
EXPECTED_TENSORRT_LLM = {
    "max_beam_width": "1",
    "gpt_model_type": "inflight_fused_batching",  # spec.server.batchingStrategy
    "gpt_model_path": "/artifact/engine",  # engine_dir: the artifact's engine directory
    "max_tokens_in_paged_kv_cache": "65536",  # spec.server.maxTokensInPagedKvCache
    "batch_scheduler_policy": "max_utilization",  # spec.server.batchSchedulerPolicy
    "kv_cache_free_gpu_mem_fraction": "0.85",  # spec.server.kvCacheFreeGpuMemFraction
    "kv_cache_host_memory_bytes": "0",
    "kv_cache_onboard_blocks": "true",
    "exclude_input_in_output": "false",
    "cancellation_check_period_ms": "100",
    "stats_check_period_ms": "100",
    "enable_kv_cache_reuse": "false",  # spec.server.enableKvCacheReuse
    "normalize_log_probs": "true",
    "enable_chunked_context": "true",  # spec.server.enableChunkedContext
    "num_nodes": "1",
    "lora_cache_optimal_adapter_size": "8",
    "lora_cache_max_adapter_size": "64",
    "lora_cache_gpu_memory_fraction": "0.05",
    "lora_cache_host_memory_bytes": "1073741824",
    "executor_worker_path": "/opt/tritonserver/backends/tensorrtllm/trtllmExecutorWorker",
    "gpu_weights_percent": "1.0",
    "enable_context_fmha_fp32_acc": "false",
    "multi_block_mode": "true",
    "cuda_graph_mode": "false",
    "cuda_graph_cache_size": "0",
    "speculative_decoding_fast_logits": "false",
    "FORCE_CPU_ONLY_INPUT_TENSORS": "no",
}


def test_tensorrt_llm_config_every_parameter() -> None:
    files = repository_files(params())
    text = files["tensorrt_llm/config.pbtxt"]
    got = parameters(text)
    for key, value in EXPECTED_TENSORRT_LLM.items():
        assert got.get(key) == value, key
    # Parameters left to the backend default are absent rather than "${…}" (docs/reference/tensorrt-llm.md
    # §4.2).
    assert set(got) == set(EXPECTED_TENSORRT_LLM)
    # Must-fill, non-string positions (docs/reference/tensorrt-llm.md §4.3).
    assert 'backend: "tensorrtllm"' in text
    assert re.search(r"^max_batch_size: 128$", text, re.M)  # engine max_batch_size
    assert "model_transaction_policy { decoupled: true }" in text  # spec.server.decoupled
    assert "preferred_batch_size: [ 128 ]" in text
    assert "max_queue_delay_microseconds: 100" in text  # spec.server.maxQueueDelayMicroseconds
    assert "default_queue_policy: { max_queue_size: 32 }" in text  # spec.server.maxQueueSize


def test_pre_and_postprocessing_and_ensemble() -> None:
    files = repository_files(params())
    pre = files["preprocessing/config.pbtxt"]
    post = files["postprocessing/config.pbtxt"]
    assert parameters(pre)["tokenizer_dir"] == "/artifact/tokenizer"
    assert parameters(pre)["add_special_tokens"] == "true"
    assert parameters(post) == {"tokenizer_dir": "/artifact/tokenizer", "skip_special_tokens": "true"}
    for text in (pre, post):
        assert "instance_group [ { count: 3 kind: KIND_CPU } ]" in text  # spec.server.instanceCount
        assert re.search(r"^max_batch_size: 128$", text, re.M)
    assert re.search(r"^max_batch_size: 128$", files["ensemble/config.pbtxt"], re.M)
    assert set(files) >= {
        "ensemble/config.pbtxt",
        "preprocessing/config.pbtxt",
        "tensorrt_llm/config.pbtxt",
        "postprocessing/config.pbtxt",
    }


@pytest.mark.parametrize(("api", "triton"), [("inflight_batching", "inflight_batching"), ("v1", "V1")])
def test_batching_strategy_spelling(api: str, triton: str) -> None:
    p = params(server=ServerSettings(batching_strategy=api))
    got = parameters(repository_files(p)["tensorrt_llm/config.pbtxt"])
    assert got["gpt_model_type"] == triton


def test_multi_node_declares_num_nodes() -> None:
    p = params(tensor_parallelism=16, gpus_per_node=8)
    assert parameters(repository_files(p)["tensorrt_llm/config.pbtxt"])["num_nodes"] == "2"


def pytorch(**overrides: object) -> ServingParams:
    """The fixture on the pytorch backend: one LLM-API model instance (instanceCount 1)."""
    base = params(backend="pytorch")
    return replace(base, server=replace(base.server, instance_count=1), **overrides)  # type: ignore[arg-type]


def test_pytorch_model_yaml_from_server_settings() -> None:
    p = pytorch(
        tensor_parallelism=2,
        pipeline_parallelism=2,
        expert_parallelism=2,
        max_num_tokens=8192,
        max_seq_len=4096,
        kv_cache_dtype="fp8",
    )
    files = repository_files(p)
    assert set(files) == {"tensorrt_llm/config.pbtxt", "tensorrt_llm/1/model.yaml"}
    doc = yaml.safe_load(files["tensorrt_llm/1/model.yaml"])
    assert doc["model"] == "/artifact/checkpoint" and doc["backend"] == "pytorch"
    assert (doc["tensor_parallel_size"], doc["pipeline_parallel_size"], doc["moe_expert_parallel_size"]) == (
        2,
        2,
        2,
    )
    assert (doc["max_batch_size"], doc["max_num_tokens"], doc["max_seq_len"]) == (128, 8192, 4096)
    assert doc["kv_cache_config"] == {
        "free_gpu_memory_fraction": 0.85,
        "enable_block_reuse": False,
        "max_tokens": 65536,
        "dtype": "fp8",
    }
    assert doc["enable_chunked_prefill"] is True
    assert doc["triton_config"] == {"max_batch_size": 0, "decoupled": True}


@pytest.mark.parametrize("decoupled", [True, False])
def test_pytorch_config_pbtxt_carries_triton_config_without_auto_complete(decoupled: bool) -> None:
    """Audit A4. Upstream's llmapi ``model.py`` (TensorRT-LLM ``triton_backend/all_models/llmapi/
    tensorrt_llm/1/model.py``, e.g. commit 044a90d209e3) sets the model's transaction policy and
    max_batch_size from ``model.yaml``'s ``triton_config`` only in ``auto_complete_config()``; the
    Python backend runs that only when auto-complete is on (``python_backend`` ``src/python_be.cc``
    ``ModelState::Create``), and the pods start ``tritonserver --disable-auto-complete-config``. So
    ``config.pbtxt`` itself must say what ``triton_config`` says, or a ``decoupled: true``
    (streaming) deployment loads non-decoupled."""
    p = pytorch()
    p = replace(p, server=replace(p.server, decoupled=decoupled))
    files = repository_files(p)
    triton_config = yaml.safe_load(files["tensorrt_llm/1/model.yaml"])["triton_config"]
    assert triton_config == {"max_batch_size": 0, "decoupled": decoupled}
    config = files["tensorrt_llm/config.pbtxt"]
    # what auto_complete_config() would have set: set_model_transaction_policy(dict(decoupled=...)),
    # set_max_batch_size(int(triton_config["max_batch_size"]))
    assert re.findall(r"^model_transaction_policy \{ decoupled: (\w+) \}$", config, re.M) == [
        str(decoupled).lower()
    ]
    assert re.findall(r"^max_batch_size: (\d+)$", config, re.M) == ["0"]
    assert "--disable-auto-complete-config" in desired_model_repository(p)["data"]["launch.sh"]


def test_pytorch_backend_refuses_more_than_one_model_instance() -> None:
    """Audit A5. The llmapi ``model.py`` builds one full ``LLM()`` per Triton model instance on the
    pod's GPUs (``initialize()``; versions after TensorRT-LLM 1.2 raise "gpu_device_ids parameter
    required when instance count > 1", commit 044a90d209e3): more than one instance is refused
    with the field, the value and the fix, and the rendered model always has exactly one."""
    with pytest.raises(ValueError, match=r"instanceCount 3 .*pytorch backend.*spec.replicas"):
        repository_files(params(backend="pytorch"))  # the fixture's instance_count is 3
    config = repository_files(pytorch())["tensorrt_llm/config.pbtxt"]
    assert re.findall(r"instance_group \[ \{ count: (\d+) kind: KIND_CPU \} \]", config) == ["1"]


def test_no_placeholder_survives_and_one_is_refused() -> None:
    for backend in ("tensorrt", "pytorch"):
        cm = desired_model_repository(params(backend=backend) if backend == "tensorrt" else pytorch())
        assert not any("${" in v for k, v in cm["data"].items() if k != "launch.sh")
    with pytest.raises(ValueError, match=r"tensorrt_llm/config.pbtxt: unfilled.*\$\{engine_dir\}"):
        check_filled(
            {
                "tensorrt_llm/config.pbtxt": 'parameters: { key: "gpt_model_path" value: '
                '{ string_value: "${engine_dir}" } }'
            }
        )
