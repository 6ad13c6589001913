"""Pure fixtures for LLMEngine decision tests: a valid spec, its prepared engine, and observations
(builder Job, pod, cluster state) as :func:`trtllm_operator.decide.engine.decide_engine` sees them."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from engine_builder.report import build_report
from trtllm_operator.decide.compatibility import NodeGPUs
from trtllm_operator.decide.engine import BuildQueue, EngineObservation
from trtllm_operator.decide.engine_spec import PreparedEngine, prepare_engine

CONFIGS = Path(__file__).resolve().parents[1] / "fixtures" / "model-configs"
H100 = "NVIDIA-H100-80GB-HBM3"
NOW = "2026-11-29T19:00:00Z"


def config(name: str) -> dict[str, Any]:
    return dict(json.loads((CONFIGS / f"{name}.json").read_text()))


TINY = config("TinyLlama__TinyLlama-1.1B-Chat-v1.0")
LLAMA70B = config("meta-llama__Llama-3.1-70B-Instruct")


def spec(**changes: Any) -> dict[str, Any]:
    """A valid LLMEngine spec (TinyLlama FP8 on H100, S3 storage) with dotted-path ``changes``."""
    base: dict[str, Any] = {
        "model": {"source": "hf://TinyLlama/TinyLlama-1.1B-Chat-v1.0"},
        "runtime": {"image": "nvcr.io/nvidia/tritonserver:26.03-trtllm-python-py3"},
        "quantization": {"format": "fp8", "kvCacheDtype": "fp8"},
        "gpu": {"product": H100},
        "storage": {"s3": {"bucket": "engines", "prefix": "cache"}},
    }
    out = copy.deepcopy(base)
    for path, value in changes.items():
        node = out
        *parents, leaf = path.split("__")
        for p in parents:
            node = node.setdefault(p, {})
        node[leaf] = value
    return out


def prepared(
    s: dict[str, Any] | None = None,
    hf: dict[str, Any] | None = TINY,
    name: str = "e",
    node_gpus: NodeGPUs | None = None,
) -> PreparedEngine:
    """``node_gpus``: as the operator read the nodes (None: none of the product, the catalog's count)."""
    result = prepare_engine(name, s or spec(), hf_config=hf, node_gpus=node_gpus)
    assert isinstance(result, PreparedEngine), result
    return result


def job(*conditions: tuple[str, str], **status: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "build-x", "ownerReferences": []},
        "spec": {"activeDeadlineSeconds": 600},
        "status": {
            "conditions": [{"type": t, "status": "True", "reason": r} for t, r in conditions],
            **status,
        },
    }


def pod(
    phase: str, *, exit_code: int | None = None, message: str | None = None, **extra: Any
) -> dict[str, Any]:
    status: dict[str, Any] = {"phase": phase, **extra}
    if exit_code is not None:
        term: dict[str, Any] = {"exitCode": exit_code, "reason": "Error" if exit_code else "Completed"}
        if message is not None:
            term["message"] = message
        status["containerStatuses"] = [{"name": "builder", "state": {"terminated": term}}]
    return {"metadata": {"creationTimestamp": "2026-11-29T18:00:00Z"}, "status": status}


def observe(**kw: Any) -> EngineObservation:
    base: dict[str, Any] = {
        "generation": 1,
        "status": {},
        "cache_entry": None,
        "job": None,
        "pods": [],
        "queue": BuildQueue(0, 2, 0),
    }
    base.update(kw)
    return EngineObservation(**base)


def good_report(p: Any, **changes: Any) -> dict[str, Any]:
    """A builder report of a verified success for ``p`` (the builder's own ``build_report``), with
    ``changes`` to its fields (``None`` drops one)."""
    fields: dict[str, Any] = {
        "status": "Succeeded",
        "engine_key": p.key,
        "artifact_uri": f"s3://engines/cache/{p.key}",
        "manifest_digest": "sha256:" + "1" * 64,
    }
    return build_report(**{**fields, **changes})
