"""The tiny Llama built by the real engine-builder and served by a real Triton: helpers shared by
tests/fidelity/test_triton_fidelity.py and benchmarks/triton_cpu.py (a benchmark imports no test module).

- :func:`build`: the real engine-builder (in-process, ``--skip-compile``) on the operator's build spec
  for the LLMEngine :func:`engine_doc` describes, cached per shape for the process; returns :class:`Built`.
- :func:`deployment_doc`: the LLMDeployment the operator renders the model repository for.
- :func:`post`: a JSON request to the server, an HTTP error raised as an AssertionError with its body.

Importing it needs engine-builder's quantize extra only when :func:`build` quantizes.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from engine_builder.pipeline import Options, run
from engine_builder.spec import BuildSpec
from trtllm_operator.decide.engine_spec import PreparedEngine, prepare_engine

SERVING_ROOT = "/artifacts"  # where the builder's packaged files say the artifact is


def engine_doc(backend: str, fmt: str, tp: int, draft: bool = False) -> dict[str, Any]:
    quant: dict[str, Any] = {
        "format": fmt,
        "calibration": {"dataset": "bundled", "numSamples": 4, "batchSize": 2, "maxSeqLength": 32},
    }
    if fmt == "fp8":
        quant["kvCacheDtype"] = "fp8"
    if fmt == "int8_sq":
        quant["kvCacheDtype"] = "int8"
    if fmt in ("int4_awq", "w4a8_awq"):
        quant["awqBlockSize"] = 64
    build: dict[str, Any] = {"maxBatchSize": 16, "maxNumTokens": 1024, "maxInputLen": 256, "maxSeqLen": 512}
    if fmt == "int8_sq":
        # an INT8 KV cache turns paged context FMHA off (TensorRT-LLM builder.py): the LLMEngine API
        # and the builder refuse it unless build.pagedContextFMHA is false
        # (formats.paged_context_fmha_refusal)
        build["pagedContextFMHA"] = False
    if draft:
        # The builder packages tensorrt_llm_bls with as many instances as the max batch size
        # (upstream's rule); each is a Python stub process, and sixteen of them next to two ranks
        # took the TP-2 draft case past its 300 s start on a loaded 2-core CI machine.
        build["maxBatchSize"] = 4
        build["speculativeDecoding"] = {
            "mode": "draft_tokens_external",
            "maxDraftLen": 4,
            "draftModel": {"source": "pvc://models/tiny-llama-draft"},
        }
    name = f"tiny-{backend}-{fmt}-tp{tp}{'-draft' if draft else ''}".replace("_", "-")
    return {
        "metadata": {"name": name, "namespace": "fidelity"},
        "spec": {
            "model": {"source": "pvc://models/tiny-llama"},
            "backend": backend,
            "runtime": {"image": "nvcr.io/nvidia/tritonserver:26.03-trtllm-python-py3"},
            "quantization": quant,
            "parallelism": {"tensor": tp, "pipeline": 1},
            "build": build,
            "gpu": {"product": "NVIDIA-H100-80GB-HBM3"},
            "storage": {"pvc": {"claimName": "engine-store"}},
        },
    }


@dataclass
class Built:
    engine: dict[str, Any]
    artifact: Path
    spec: BuildSpec
    manifest: dict[str, Any]


_built: dict[tuple[str, str, int, bool], Built] = {}


def build(volumes: Path, backend: str, fmt: str, tp: int, draft: bool = False) -> Built:
    """Run the real engine-builder (in-process) on the operator's build spec for this LLMEngine."""
    if (backend, fmt, tp, draft) in _built:
        return _built[(backend, fmt, tp, draft)]
    doc = engine_doc(backend, fmt, tp, draft)
    prepared = prepare_engine(doc["metadata"]["name"], doc["spec"])
    assert isinstance(prepared, PreparedEngine), prepared
    store = volumes / "engine-store"
    spec = prepared.build_spec.model_copy(
        update={
            "output": prepared.build_spec.output.model_copy(
                update={
                    "artifact_root": str(store),
                    "termination_log": str(volumes / f"term-{prepared.key[:8]}"),
                }
            )
        }
    )
    spec_path = volumes / f"build-{prepared.key[:12]}.yaml"
    spec_path.write_text(yaml.safe_dump(spec.model_dump(mode="json")))
    # One work directory per format: the quantize stage (calibration) is shared by both backends
    # and parallelisms when the builder finds it done.
    code = run(
        spec_path,
        volumes / f"work-{fmt}-{backend}{'-draft' if draft else ''}",
        None,
        Options(skip_compile=True, pvc_root=str(volumes), serving_root=SERVING_ROOT),
    )
    term = json.loads((volumes / f"term-{prepared.key[:8]}").read_text())
    assert code == 0, term
    artifact = store / prepared.key
    doc["status"] = {
        "engineKey": prepared.key,
        "phase": "Ready",
        # the builder report's digest, as the operator records it: every pod verifies against it
        "artifact": {"uri": f"pvc://engine-store/{prepared.key}", "manifestDigest": term["manifestDigest"]},
    }
    built = Built(doc, artifact, spec, json.loads((artifact / "manifest.json").read_text()))
    _built[(backend, fmt, tp, draft)] = built
    return built


def deployment_doc(engine: dict[str, Any], decoupled: bool) -> dict[str, Any]:
    return {
        "metadata": {"name": "fidelity", "namespace": "fidelity", "uid": "0"},
        "spec": {
            "engineRef": {"name": engine["metadata"]["name"]},
            "replicas": 1,
            # A paged KV pool of 64 blocks of 32 tokens, so that the load test's requests fill a
            # visible part of it (the default sizes it from GPU memory the CPU stand-in does not have).
            "server": {"decoupled": decoupled, "maxTokensInPagedKvCache": 2048},
        },
    }


def post(url: str, body: dict[str, Any], timeout: float = 60) -> dict[str, Any]:
    req = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return dict(json.loads(resp.read()))
    except urllib.error.HTTPError as exc:
        raise AssertionError(f"{url}: HTTP {exc.code}: {exc.read().decode(errors='replace')}") from exc
