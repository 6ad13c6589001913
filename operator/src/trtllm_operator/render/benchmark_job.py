"""The benchmark Job: ``trtllm-bench`` against a Ready LLMEngine's artifact, as a manifest.

Pure: inputs are the raw LLMEngine (``spec.benchmark`` set, ``status.engineKey`` and
``status.artifact`` of a Ready engine), the operator settings and the node-label values of the GPU
product; no client, no clock. Choices, and why:

* **Name** ``bench-<engineKey[:16]>-<hash(spec.benchmark)[:8]>``: one Job per engine key and
  benchmark spec, so a retry or a restarted operator finds the same Job (AlreadyExists), and an
  edited ``spec.benchmark`` runs a new one.
* **Image**: the engine's ``spec.runtime.image`` — an engine only loads in the TensorRT-LLM
  version that built it, and that image ships ``trtllm-bench``.
* **GPUs** = world size (tensor × pipeline), on a node whose ``nvidia.com/gpu.product`` is the
  engine's product (required node affinity, as the builder and the servers): a benchmark on another
  GPU measures something else.
* **Artifact** mounted **read-only** at ``/artifact`` (the PVC sub-path ``<root>/<engineKey>``,
  like the serving pods); the engine is ``/artifact/engine`` (tensorrt backend) or the checkpoint
  ``/artifact/checkpoint`` (pytorch backend); ``--model_path`` points at a directory with
  ``config.json`` and the tokenizer. S3 artifacts are not mounted (the handler reports it).
* **Parallelism**: a TensorRT engine carries its own world (``trtllm-bench`` reads it from the
  engine); the PyTorch backend gets ``--tp/--pp[/--ep]`` from ``spec.parallelism``, mapped as the
  serving pods' ``model.yaml`` is
  (:func:`~trtllm_operator.decide.triton_config.llm_api_parallelism`).
* **No service-account token**, no service links, ``restartPolicy: Never``, ``backoffLimit: 0``
  (a failed benchmark is reported, not retried: it costs GPU hours).
* **Results** through the termination message (``/dev/termination-log``, the sweep summary of
  :mod:`trtllm_operator.tuning.bench_script`, ≤ 4 KiB), ``FallbackToLogsOnError`` so a crash
  leaves the log tail there; full reports are in the pod log.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

from trtllm_operator.api.engine import BenchmarkSpec, LLMEngineSpec
from trtllm_operator.api.wire import (
    ANNOTATION_ENGINE_KEY,
    BENCHMARK_CONTAINER,
    COMPONENT_BENCHMARK,
    GPU_RESOURCE,
    LABEL_COMPONENT,
    LABEL_ENGINE,
    LABEL_ENGINE_KEY,
    LABEL_MANAGED_BY,
    LABEL_NAME,
    MANAGED_BY,
)
from trtllm_operator.decide.serving_params import (
    ARTIFACT_CHECKPOINT_DIR,
    ARTIFACT_ENGINE_DIR,
    ARTIFACT_MOUNT,
    ARTIFACT_TOKENIZER_DIR,
    artifact_location,
)
from trtllm_operator.decide.triton_config import llm_api_parallelism
from trtllm_operator.render.builder_job import engine_job_pod_spec, engine_owner
from trtllm_operator.settings import Settings
from trtllm_operator.tuning.bench_script import SCRIPT
from trtllm_operator.tuning.report import COMPACT_KEYS, SWEEP_FORMAT

__all__ = [
    "BENCH_CONTAINER",
    "benchmark_config",
    "benchmark_job_name",
    "benchmark_spec_hash",
    "desired_benchmark_job",
]

BENCH_CONTAINER = BENCHMARK_CONTAINER


def benchmark_spec_hash(bench: BenchmarkSpec) -> str:
    """sha256 (hex) of the benchmark spec as JSON (pod annotations left out: they do not change
    what is measured)."""
    data = bench.model_dump(mode="json", by_alias=True, exclude={"pod_annotations"})
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()


def benchmark_job_name(engine_key: str, bench: BenchmarkSpec) -> str:
    """``bench-<key[:16]>-<spec hash[:8]>`` (31 characters)."""
    return f"bench-{engine_key[:16]}-{benchmark_spec_hash(bench)[:8]}"


def _model_name(spec: LLMEngineSpec, engine_name: str) -> str:
    """``--model``: the Hugging Face repo id for hf:// sources, else the engine's name.
    trtllm-bench wants a name, not a path (``BenchmarkEnvironment`` rejects existing paths)."""
    source = spec.model.source
    return source[len("hf://") :] if source.startswith("hf://") else engine_name


def benchmark_config(spec: LLMEngineSpec, engine_name: str) -> dict[str, Any]:
    """The JSON document the in-container script reads (see :mod:`~trtllm_operator.tuning.bench_script`).

    Raises ValueError when ``spec.benchmark`` is unset.
    """
    bench = spec.benchmark
    if bench is None:
        raise ValueError("spec.benchmark is not set: nothing to benchmark")
    tensorrt = spec.backend == "tensorrt"
    cfg: dict[str, Any] = {
        "format": SWEEP_FORMAT,
        "keep": {k: list(v) for k, v in COMPACT_KEYS.items()},
        "model": _model_name(spec, engine_name),
        "modelPath": ARTIFACT_TOKENIZER_DIR if tensorrt else ARTIFACT_CHECKPOINT_DIR,
        "backend": spec.backend,
        "engineDir": ARTIFACT_ENGINE_DIR if tensorrt else None,
        "mode": bench.mode,
        "axis": bench.sweep,
        "values": sorted(set(bench.values)),
        "pairs": [{"inputTokens": w.input_tokens, "outputTokens": w.output_tokens} for w in bench.workloads],
        "numRequests": bench.num_requests,
        "warmup": bench.warmup,
        "streaming": bench.streaming,
        "kvFraction": bench.kv_cache_free_gpu_mem_fraction,
        "world": None,
    }
    if not tensorrt:
        # trtllm-bench takes the world of a TensorRT engine from the engine (get_settings_from_engine
        # reads its config.json); for the PyTorch backend it takes --tp/--pp/--ep, which default to
        # 1/1/None (tensorrt_llm/bench/benchmark/throughput.py and low_latency.py, "World
        # Configuration" options, at 000a01de66f0; utils/general.py get_settings() builds the
        # mapping from them): without them a TP>1 engine is benchmarked on one GPU.
        tp, pp, ep = llm_api_parallelism(
            spec.parallelism.tensor, spec.parallelism.pipeline, spec.parallelism.expert
        )
        cfg["world"] = {"tp": tp, "pp": pp, "ep": ep}
    return cfg


def desired_benchmark_job(
    engine: Mapping[str, Any], settings: Settings, gpu_products: Sequence[str]
) -> dict[str, Any]:
    """The ``batch/v1`` Job benchmarking ``engine`` (see the module docstring for every choice).

    ``engine``: the raw LLMEngine with ``metadata.name/namespace/uid``, ``spec.benchmark``,
    ``status.engineKey`` and an artifact location. ``gpu_products``: accepted values of
    ``nvidia.com/gpu.product`` (the product as written and its catalog name). Errors: ValueError
    without ``spec.benchmark`` or ``status.engineKey``;
    :class:`~trtllm_operator.decide.serving_params.ServingInputError` for an artifact that cannot be
    mounted (S3).
    """
    meta = engine["metadata"]
    spec = LLMEngineSpec.model_validate(engine.get("spec") or {})
    bench = spec.benchmark
    if bench is None:
        raise ValueError("spec.benchmark is not set: nothing to benchmark")
    key = str((engine.get("status") or {}).get("engineKey") or "")
    if not key:
        raise ValueError("status.engineKey is not set: the engine is not built yet")
    claim, sub_path = artifact_location(engine)
    name = benchmark_job_name(key, bench)
    gpus = spec.parallelism.tensor * spec.parallelism.pipeline
    labels = {
        LABEL_NAME: "trtllm-bench",
        LABEL_MANAGED_BY: MANAGED_BY,
        LABEL_COMPONENT: COMPONENT_BENCHMARK,
        LABEL_ENGINE_KEY: key[:63],
        LABEL_ENGINE: str(meta["name"])[:63],
    }
    mount: dict[str, Any] = {"name": "artifact", "mountPath": ARTIFACT_MOUNT, "readOnly": True}
    if sub_path:
        mount["subPath"] = sub_path
    container: dict[str, Any] = {
        "name": BENCH_CONTAINER,
        "image": spec.runtime.image,
        "imagePullPolicy": settings.image_pull_policy,
        "command": ["python3", "-c", SCRIPT, json.dumps(benchmark_config(spec, str(meta["name"])))],
        "env": [{"name": "HF_HUB_OFFLINE", "value": "1"}, {"name": "HF_HUB_DISABLE_TELEMETRY", "value": "1"}],
        "resources": {"limits": {GPU_RESOURCE: str(gpus)}, "requests": {GPU_RESOURCE: str(gpus)}},
        "volumeMounts": [mount, {"name": "dshm", "mountPath": "/dev/shm"}],
        "terminationMessagePath": "/dev/termination-log",
        "terminationMessagePolicy": "FallbackToLogsOnError",
    }
    volumes = [
        {"name": "artifact", "persistentVolumeClaim": {"claimName": claim, "readOnly": True}},
        {
            "name": "dshm",
            "emptyDir": {"medium": "Memory", "sizeLimit": f"{settings.builder_shm_bytes // 2**20}Mi"},
        },
    ]
    pod_spec = engine_job_pod_spec(spec, gpu_products, [container], volumes)
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "namespace": meta["namespace"],
            "labels": labels,
            "annotations": {ANNOTATION_ENGINE_KEY: key},
            "ownerReferences": [engine_owner(engine)],
        },
        "spec": {
            "backoffLimit": 0,
            "activeDeadlineSeconds": bench.active_deadline_seconds,
            "template": {
                "metadata": {"labels": labels, "annotations": dict(bench.pod_annotations or {})},
                "spec": pod_spec,
            },
        },
    }
