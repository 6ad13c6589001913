"""``backend: pytorch`` + ``api: openai``: ``trtllm-serve``, every rendered flag checked against upstream.

The 26.03 serving images carry TensorRT-LLM 1.2.0 (operator ``decide/image_catalog.py``, Triton's
compatibility matrix). ``trtllm-serve`` is the ``serve`` click command of NVIDIA/TensorRT-LLM
``tensorrt_llm/commands/serve.py``. The v1.2.0 tag's copy is not in the stored upstream index and the
PyPI ``tensorrt-llm`` 1.2.0 release is a 10 kB stub without the package, so the flags are checked
against the two stored versions around it: :data:`SERVE_OPTIONS_1_1` (commit
4c05a74891e4df8066f08ed4ce14b0972abe4e25, the 1.1 line: ``ChoiceWithAlias`` backends,
``--disagg_cluster_uri``, no ``--revision``) and :data:`SERVE_OPTIONS_1_3` (commit
00209af149e7774406881a37283dce303571eb11, the 1.3 line: ``--config`` alias, ``--chat_template``).
Each table is the option declarations of ``serve`` at that commit, as declared (names and aliases,
with the value type click converts to); a flag the operator renders must be declared, with the same
type, in both — so also in 1.2.0, unless it was removed and re-added in between.

``--served_model_name`` is in neither (NVIDIA/TensorRT-LLM PR #11711 added ``--served-model-name`` on
main in 2026-02); ``openai_server.py`` names a local model directory by its last path component
(``self.model = model_dir.name``, every stored version from 0.17 to the 1.3 line), so the pod links
the checkpoint under the served model name.
"""

from __future__ import annotations

import shlex
from dataclasses import replace
from typing import Any

import pytest
import yaml
from support.serving import serving_params

from trtllm_operator.decide.serving import (
    OPENAI_UNSUPPORTED,
    ServingPlan,
    ServingRefusal,
    openai_frontend_refusal,
    plan_serving,
)
from trtllm_operator.decide.serving_params import (
    ARTIFACT_CHECKPOINT_DIR,
    ARTIFACT_TOKENIZER_DIR,
    InferencePoolSettings,
    ServerSettings,
    ServingParams,
)
from trtllm_operator.decide.triton_config import TRTLLM_SERVE_OPTIONS, model_repository_files
from trtllm_operator.render.deployment import desired_deployment, probes
from trtllm_operator.render.launch import launch_script
from trtllm_operator.render.model_repository import desired_model_repository, volume_items
from trtllm_operator.render.service import desired_service, endpoint
from trtllm_operator.render.serving import (
    CONFIG_MOUNT,
    OPENAI_PORT,
    TRTLLM_SERVE_MODEL_DIR,
    trtllm_serve_args,
)

FLAG = "flag"  # is_flag=True: takes no value
#: ``serve`` options at NVIDIA/TensorRT-LLM 4c05a748 ``tensorrt_llm/commands/serve.py`` (1.1 line).
SERVE_OPTIONS_1_1: dict[str, object] = {
    "--tokenizer": str,
    "--host": str,
    "--port": int,
    "--backend": ("pytorch", "tensorrt", "_autodeploy", "trt"),
    "--log_level": str,
    "--max_beam_width": int,
    "--max_batch_size": int,
    "--max_num_tokens": int,
    "--max_seq_len": int,
    "--tp_size": int,
    "--pp_size": int,
    "--ep_size": int,
    "--cluster_size": int,
    "--gpus_per_node": int,
    "--kv_cache_free_gpu_memory_fraction": float,
    "--num_postprocess_workers": int,
    "--trust_remote_code": FLAG,
    "--extra_llm_api_options": str,
    "--reasoning_parser": str,
    "--metadata_server_config_file": str,
    "--server_role": str,
    "--fail_fast_on_attention_window_too_large": FLAG,
    "--disagg_cluster_uri": str,
    "--enable_chunked_prefill": FLAG,
    "--media_io_kwargs": str,
}
#: ``serve`` options at NVIDIA/TensorRT-LLM 00209af1 ``tensorrt_llm/commands/serve.py`` (1.3 line),
#: aliases listed as their own names.
SERVE_OPTIONS_1_3: dict[str, object] = {
    "--tokenizer": str,
    "--custom_tokenizer": str,
    "--host": str,
    "--port": int,
    "--backend": ("pytorch", "tensorrt", "_autodeploy", "trt"),
    "--custom_module_dirs": str,
    "--log_level": str,
    "--max_beam_width": int,
    "--max_batch_size": int,
    "--max_num_tokens": int,
    "--max_seq_len": int,
    "--tensor_parallel_size": int,
    "--tp_size": int,
    "--pipeline_parallel_size": int,
    "--pp_size": int,
    "--context_parallel_size": int,
    "--cp_size": int,
    "--moe_expert_parallel_size": int,
    "--ep_size": int,
    "--moe_cluster_parallel_size": int,
    "--cluster_size": int,
    "--gpus_per_node": int,
    "--free_gpu_memory_fraction": float,
    "--kv_cache_free_gpu_memory_fraction": float,
    "--num_postprocess_workers": int,
    "--trust_remote_code": FLAG,
    "--revision": str,
    "--config": str,
    "--extra_llm_api_options": str,
    "--reasoning_parser": str,
    "--tool_parser": str,
    "--metadata_server_config_file": str,
    "--server_role": str,
    "--fail_fast_on_attention_window_too_large": FLAG,
    "--otlp_traces_endpoint": str,
    "--disagg_cluster_uri": str,
    "--enable_chunked_prefill": FLAG,
    "--media_io_kwargs": str,
    "--chat_template": str,
}
#: ``TorchLlmArgs``/``BaseLlmArgs`` fields the ``--extra_llm_api_options`` YAML may set (NVIDIA/
#: TensorRT-LLM ``tensorrt_llm/llmapi/llm_args.py``, stored 1.x versions: ``kv_cache_config``,
#: ``enable_chunked_prefill``, ``scheduler_config``, ``return_perf_metrics: bool = Field(default=False,
#: description="Return perf metrics.")``), with the ``KvCacheConfig`` / ``SchedulerConfig`` keys.
LLM_ARGS = {"kv_cache_config", "enable_chunked_prefill", "scheduler_config", "return_perf_metrics"}
KV_CACHE_CONFIG_KEYS = {"free_gpu_memory_fraction", "enable_block_reuse", "max_tokens", "dtype"}
SCHEDULER_POLICIES = {"GUARANTEED_NO_EVICT", "MAX_UTILIZATION"}


def params(**server: Any) -> ServingParams:
    settings = {"api": "openai", "decoupled": True, **server}
    return serving_params(
        backend="pytorch",
        max_num_tokens=8192,
        max_seq_len=8192,
        server=ServerSettings(**settings),
    )


def parse(argv: list[str], options: dict[str, object]) -> tuple[list[str], dict[str, object]]:
    """``argv`` (after the program) as click would read it against ``options``: the positional
    arguments and ``{flag: converted value}``; an undeclared flag or a bad value fails."""
    positional: list[str] = []
    values: dict[str, object] = {}
    it = iter(argv)
    for word in it:
        if not word.startswith("--"):
            positional.append(word)
            continue
        assert word in options, f"{word} is not an option of trtllm-serve"
        kind = options[word]
        if kind == FLAG:
            values[word] = True
            continue
        value = next(it)
        if isinstance(kind, tuple):
            assert value in kind, f"{word} {value}: not one of {kind}"
            values[word] = value
        else:
            assert callable(kind)
            values[word] = kind(value)
    return positional, values


@pytest.mark.parametrize("options", [SERVE_OPTIONS_1_1, SERVE_OPTIONS_1_3], ids=["4c05a748", "00209af1"])
def test_every_rendered_flag_is_declared_upstream(options: dict[str, object]) -> None:
    p = replace(params(served_model_name="llama-3.1-8b"), tensor_parallelism=4, expert_parallelism=4)
    cmd = trtllm_serve_args(p)
    assert cmd[0] == "trtllm-serve"
    positional, values = parse(cmd[1:], options)
    assert positional == [f"{TRTLLM_SERVE_MODEL_DIR}/llama-3.1-8b"]  # MODEL: the one argument
    assert values == {
        "--host": "0.0.0.0",
        "--port": OPENAI_PORT,
        "--backend": "pytorch",
        "--tokenizer": ARTIFACT_TOKENIZER_DIR,
        "--tp_size": 4,
        "--pp_size": 1,
        "--ep_size": 4,
        "--max_batch_size": 64,
        "--max_num_tokens": 8192,
        "--max_seq_len": 8192,
        "--kv_cache_free_gpu_memory_fraction": 0.9,
        "--extra_llm_api_options": f"{CONFIG_MOUNT}/model-repository/{TRTLLM_SERVE_OPTIONS}",
    }


def test_expert_parallelism_one_is_left_to_trtllm_and_limits_follow_the_engine() -> None:
    cmd = trtllm_serve_args(replace(params(), max_num_tokens=None, max_seq_len=None, max_batch_size=32))
    _, values = parse(cmd[1:], SERVE_OPTIONS_1_1)
    assert "--ep_size" not in values and "--max_num_tokens" not in values and "--max_seq_len" not in values
    assert values["--max_batch_size"] == 32


def test_the_options_yaml_holds_llm_arguments_only() -> None:
    p = params(
        kv_cache_free_gpu_mem_fraction=0.85,
        max_tokens_in_paged_kv_cache=100_000,
        enable_kv_cache_reuse=False,
        enable_chunked_context=True,
    )
    (path, text), *rest = model_repository_files(replace(p, kv_cache_dtype="fp8")).items()
    assert not rest and path == TRTLLM_SERVE_OPTIONS  # no Triton model repository
    doc = yaml.safe_load(text)
    assert set(doc) <= LLM_ARGS, set(doc) - LLM_ARGS
    assert set(doc["kv_cache_config"]) <= KV_CACHE_CONFIG_KEYS
    # the YAML's kv_cache_config replaces the flag's whole: the fraction is in both, equal
    assert doc == {
        "kv_cache_config": {
            "free_gpu_memory_fraction": 0.85,
            "enable_block_reuse": False,
            "max_tokens": 100_000,
            "dtype": "fp8",
        },
        "enable_chunked_prefill": True,
        "return_perf_metrics": True,  # mounts /prometheus/metrics
    }
    # trtllm-serve's own scheduler (GUARANTEED_NO_EVICT) is kept; only the other policy is passed
    other = yaml.safe_load(
        model_repository_files(params(batch_scheduler_policy="max_utilization"))[TRTLLM_SERVE_OPTIONS]
    )
    assert other["scheduler_config"] == {"capacity_scheduler_policy": "MAX_UTILIZATION"}
    assert other["scheduler_config"]["capacity_scheduler_policy"] in SCHEDULER_POLICIES


def test_launch_script_links_the_checkpoint_under_the_served_name_and_execs_trtllm_serve() -> None:
    p = params(served_model_name="llama-3.1-8b")
    script = launch_script(p)
    lines = script.splitlines()
    assert lines[0] == "#!/bin/bash" and "set -euo pipefail" in lines
    verify = next(i for i, line in enumerate(lines) if "verify-artifact.py" in line)
    link = lines.index(f"ln -sfn {ARTIFACT_CHECKPOINT_DIR} {TRTLLM_SERVE_MODEL_DIR}/llama-3.1-8b")
    (exec_line,) = [line for line in lines if line.startswith("exec ")]
    assert verify < link < lines.index(exec_line)  # the artifact is checked before anything reads it
    assert shlex.split(exec_line)[1:] == trtllm_serve_args(p)
    assert "/model-repository" not in script.replace(f"{CONFIG_MOUNT}/model-repository", "")  # no Triton
    assert "tritonserver" not in script
    # default served name: the LLMDeployment's
    assert f"{TRTLLM_SERVE_MODEL_DIR}/llama " in launch_script(params())


def test_the_options_file_is_mounted_where_the_flag_points() -> None:
    p = params()
    cm = desired_model_repository(p)
    items = volume_items(cm)
    (item,) = [i for i in items if i["key"].startswith("trtllm-serve")]
    assert f"{CONFIG_MOUNT}/{item['path']}" == trtllm_serve_args(p)[-1]


def test_probes_ports_service_and_endpoint() -> None:
    p = params()
    got = probes(p)
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        assert got[probe]["httpGet"] == {"path": "/health", "port": "openai"}
    dep = desired_deployment(p, desired_model_repository(p))
    (container,) = dep["spec"]["template"]["spec"]["containers"]
    assert [(port["name"], port["containerPort"]) for port in container["ports"]] == [("openai", OPENAI_PORT)]
    assert [(port["name"], port["port"]) for port in desired_service(p)["spec"]["ports"]] == [
        ("openai", OPENAI_PORT)
    ]
    assert endpoint(p) == f"http://llama.team-a.svc:{OPENAI_PORT}/v1"


def _refusal(p: ServingParams, **kw: Any) -> tuple[str, str]:
    got = openai_frontend_refusal(p, **kw)
    assert got is not None
    return got


@pytest.mark.parametrize(
    ("change", "autoscaling", "names"),
    [
        (
            {"server": ServerSettings(api="both", decoupled=True)},
            False,
            ("api both", "no KServe v2", "api: openai"),
        ),
        ({"tensor_parallelism": 16}, False, ("16 GPUs", "2 nodes", "api: triton")),
        (
            {"server": ServerSettings(api="openai")},
            False,
            ("spec.server.decoupled is false", "decoupled: true"),
        ),
        (
            {"server": ServerSettings(api="openai", decoupled=True, max_queue_size=8)},
            False,
            ("maxQueueSize is 8",),
        ),
        (
            {"server": ServerSettings(api="openai", decoupled=True, default_max_tokens=64)},
            False,
            ("openai.defaultMaxTokens is 64",),
        ),
        ({"inference_pool": InferencePoolSettings()}, False, ("spec.routing.inferencePool", "JSON")),
        ({}, True, ("spec.autoscaling.enabled", "activeRequestUtilization", "kvCacheUtilization")),
    ],
)
def test_what_trtllm_serve_cannot_serve_is_refused_with_the_field_and_fix(
    change: dict[str, Any], autoscaling: bool, names: tuple[str, ...]
) -> None:
    reason, message = _refusal(replace(params(), **change), autoscaling=autoscaling)
    assert reason == OPENAI_UNSUPPORTED
    for name in names:
        assert name in message, message


def test_plan_serving_a_pytorch_engine_with_the_openai_api() -> None:
    engine: dict[str, Any] = {
        "metadata": {"name": "llama-torch", "namespace": "team-a"},
        "spec": {
            "model": {"source": "hf://meta-llama/Llama-3.1-8B-Instruct"},
            "backend": "pytorch",
            "runtime": {"image": "nvcr.io/nvidia/tritonserver:26.03-trtllm-python-py3"},
            "quantization": {"format": "fp8"},
            "parallelism": {"tensor": 2, "pipeline": 1},
            "gpu": {"product": "NVIDIA-H100-80GB-HBM3"},
            "storage": {"pvc": {"claimName": "engines"}},
        },
        "status": {"engineKey": "c" * 64, "phase": "Ready", "artifact": {"uri": f"pvc://engines/{'c' * 64}"}},
    }
    dep: dict[str, Any] = {
        "metadata": {"name": "chat", "namespace": "team-a", "uid": "u"},
        "spec": {
            "engineRef": {"name": "llama-torch"},
            "server": {"api": "openai", "decoupled": True, "openai": {"servedModelName": "llama-3.1-8b"}},
        },
    }
    plan = plan_serving(dep, engine, gpus_per_node=8, lws_installed=False)
    assert isinstance(plan, ServingPlan), plan
    assert list(plan.files) == [TRTLLM_SERVE_OPTIONS]
    dep["spec"]["autoscaling"] = {"enabled": True, "targets": {"kvCacheUtilization": 0.8}}
    refused = plan_serving(dep, engine, gpus_per_node=8, lws_installed=False)
    assert isinstance(refused, ServingRefusal) and refused.blocked is not None
    assert refused.blocked[0] == OPENAI_UNSUPPORTED and "spec.autoscaling.enabled" in refused.blocked[1]
