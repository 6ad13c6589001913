"""The benchmark Job renderer: image, GPUs, node affinity, read-only artifact, no SA token, results
through the termination message; validated against the Kubernetes Job schema."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from trtllm_operator.api.engine import BenchmarkSpec, LLMEngineSpec
from trtllm_operator.decide.serving_params import ServingInputError
from trtllm_operator.render.benchmark_job import (
    BENCH_CONTAINER,
    benchmark_config,
    benchmark_job_name,
    desired_benchmark_job,
)
from trtllm_operator.settings import Settings

REPO = Path(__file__).resolve().parents[2]
KEY = "a1b2c3d4" * 8
K8S_VERSION = "1.34.0"
PRODUCTS = ["H100", "NVIDIA-H100-80GB-HBM3"]


def engine(**spec_over: Any) -> dict[str, Any]:
    body: dict[str, Any] = yaml.safe_load((REPO / "tests/fixtures/valid/minimal-engine.yaml").read_text())
    body["metadata"].update(name="llama", namespace="team-a", uid="uid-1")
    body["spec"]["benchmark"] = {
        "values": [1, 16, 64],
        "workloads": [{"inputTokens": 128, "outputTokens": 128}],
    }
    body["spec"].update(spec_over)
    body["status"] = {
        "phase": "Ready",
        "engineKey": KEY,
        "artifact": {"uri": f"pvc://llama-artifacts/engines/{KEY}"},
    }
    return body


def render(body: dict[str, Any]) -> dict[str, Any]:
    return desired_benchmark_job(body, Settings(), PRODUCTS)


def test_job_spec() -> None:
    job = render(engine(parallelism={"tensor": 2, "pipeline": 2}))
    meta, spec = job["metadata"], job["spec"]
    pod = spec["template"]["spec"]
    (c,) = pod["containers"]
    assert meta["name"] == benchmark_job_name(
        KEY, BenchmarkSpec.model_validate(engine()["spec"]["benchmark"])
    )
    assert meta["name"].startswith(f"bench-{KEY[:16]}-") and len(meta["name"]) == 31
    assert meta["annotations"]["llm.trtllm-operator.dev/engine-key"] == KEY
    assert meta["ownerReferences"][0]["uid"] == "uid-1" and meta["ownerReferences"][0]["controller"] is True
    assert meta["labels"]["app.kubernetes.io/component"] == "engine-benchmark"
    assert c["name"] == BENCH_CONTAINER
    assert c["image"] == "nvcr.io/nvidia/tritonserver:26.03-trtllm-python-py3"  # the engine's runtime image
    assert c["resources"]["limits"]["nvidia.com/gpu"] == "4"  # world size = 2 × 2
    assert c["resources"]["requests"]["nvidia.com/gpu"] == "4"
    term = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ]
    assert term == [
        {"matchExpressions": [{"key": "nvidia.com/gpu.product", "operator": "In", "values": PRODUCTS}]}
    ]
    art = next(m for m in c["volumeMounts"] if m["name"] == "artifact")
    assert art == {
        "name": "artifact",
        "mountPath": "/artifact",
        "readOnly": True,
        "subPath": f"engines/{KEY}",
    }
    vol = next(v for v in pod["volumes"] if v["name"] == "artifact")
    assert vol["persistentVolumeClaim"] == {"claimName": "llama-artifacts", "readOnly": True}
    assert pod["automountServiceAccountToken"] is False
    assert pod["enableServiceLinks"] is False
    assert pod["restartPolicy"] == "Never" and spec["backoffLimit"] == 0
    assert spec["activeDeadlineSeconds"] == 7200
    assert c["terminationMessagePath"] == "/dev/termination-log"
    assert c["terminationMessagePolicy"] == "FallbackToLogsOnError"
    assert c["command"][:2] == ["python3", "-c"]
    cfg = json.loads(c["command"][3])
    assert cfg["model"] == "meta-llama/Llama-3.1-8B-Instruct"
    assert (cfg["backend"], cfg["engineDir"], cfg["modelPath"]) == (
        "tensorrt",
        "/artifact/engine",
        "/artifact/tokenizer",
    )
    assert cfg["values"] == [1, 16, 64] and cfg["axis"] == "concurrency" and cfg["mode"] == "throughput"


def test_job_validates_against_the_kubernetes_schema() -> None:
    job = render(engine(parallelism={"tensor": 2}))
    assert kubernetes_validate.validate(job, K8S_VERSION, strict=True)
    broken = copy.deepcopy(job)
    broken["spec"]["template"]["spec"]["containers"][0]["volumeMounts"][0]["readOnly"] = "yes"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, K8S_VERSION, strict=True)


def test_pytorch_backend_uses_the_checkpoint() -> None:
    body = engine(backend="pytorch")
    body["spec"]["quantization"] = {"format": "fp8", "kvCacheDtype": "fp8"}
    cfg = benchmark_config(LLMEngineSpec.model_validate(body["spec"]), "llama")
    assert (
        cfg["engineDir"] is None
        and cfg["modelPath"] == "/artifact/checkpoint"
        and cfg["backend"] == "pytorch"
    )


def test_pytorch_backend_benchmarks_the_engines_parallelism() -> None:
    """Audit A7. ``trtllm-bench throughput|latency`` default ``--tp 1 --pp 1`` and ``--ep`` unset
    for the PyTorch backend (TensorRT-LLM ``tensorrt_llm/bench/benchmark/throughput.py`` and
    ``low_latency.py`` at 000a01de66f0, "World Configuration" options; ``utils/general.py``
    ``get_settings()`` maps them to ``tp_size``/``pp_size``/``moe_ep_size``). The Job passes the
    engine's parallelism, mapped exactly as the serving pods' ``model.yaml`` is; a TensorRT engine
    carries its own (``get_settings_from_engine`` reads the engine's config), so none is passed."""
    body = engine(backend="pytorch", parallelism={"tensor": 4, "pipeline": 2, "expert": 2})
    spec = LLMEngineSpec.model_validate(body["spec"])
    assert benchmark_config(spec, "llama")["world"] == {"tp": 4, "pp": 2, "ep": 2}
    body = engine(backend="pytorch", parallelism={"tensor": 2})
    assert benchmark_config(LLMEngineSpec.model_validate(body["spec"]), "llama")["world"] == {
        "tp": 2,
        "pp": 1,
        "ep": None,  # expert 1: unset, as model.yaml leaves moe_expert_parallel_size out
    }
    tensorrt = LLMEngineSpec.model_validate(engine(parallelism={"tensor": 4})["spec"])
    assert benchmark_config(tensorrt, "llama")["world"] is None


def test_pvc_model_source_uses_the_engine_name() -> None:
    body = engine()
    body["spec"]["model"] = {"source": "pvc://models/llama"}
    assert (
        json.loads(render(body)["spec"]["template"]["spec"]["containers"][0]["command"][3])["model"]
        == "llama"
    )


def test_scheduling_fields_pass_through() -> None:
    body = engine()
    body["spec"]["gpu"].update(
        nodeSelector={"pool": "gpu"},
        tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
        runtimeClassName="nvidia",
    )
    body["spec"]["runtime"]["imagePullSecrets"] = ["ngc"]
    body["spec"]["benchmark"]["podAnnotations"] = {"kwok.trtllm-operator.dev/outcome": "succeed"}
    job = render(body)
    pod = job["spec"]["template"]
    assert pod["metadata"]["annotations"] == {"kwok.trtllm-operator.dev/outcome": "succeed"}
    assert pod["spec"]["nodeSelector"] == {"pool": "gpu"}
    assert pod["spec"]["tolerations"][0]["key"] == "nvidia.com/gpu"
    assert pod["spec"]["runtimeClassName"] == "nvidia"
    assert pod["spec"]["imagePullSecrets"] == [{"name": "ngc"}]
    # annotations do not change what is measured, so not the name either
    assert job["metadata"]["name"] == render(engine())["metadata"]["name"]


def test_name_follows_key_and_benchmark_spec() -> None:
    a = render(engine())["metadata"]["name"]
    other = engine()
    other["spec"]["benchmark"]["values"] = [1, 16, 64, 128]
    assert render(other)["metadata"]["name"] != a
    newer = engine()
    newer["status"]["engineKey"] = "f" * 64
    assert render(newer)["metadata"]["name"] != a


def test_errors() -> None:
    body = engine()
    del body["spec"]["benchmark"]
    with pytest.raises(ValueError, match=r"spec\.benchmark is not set"):
        render(body)
    body = engine()
    del body["status"]["engineKey"]
    with pytest.raises(ValueError, match=r"status\.engineKey is not set"):
        render(body)
    body = copy.deepcopy(engine())
    body["status"]["artifact"]["uri"] = f"s3://bucket/{KEY}"
    body["spec"]["storage"] = {"s3": {"bucket": "bucket"}}
    with pytest.raises(ServingInputError, match="S3"):
        render(body)
