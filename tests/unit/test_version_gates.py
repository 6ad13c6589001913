"""Runtime version gates (issue 26 item 4, audit A9 and A10).

- A9: TensorRT-LLM 1.2.x has no MXFP8 ``QuantAlgo`` and cannot load MXFP8 checkpoints; loading arrived
  after 1.2.1 (NVIDIA/TensorRT-LLM PR #14962; the format table's ``min_runtime``). An ``mxfp8`` engine
  is refused where the runtime's TensorRT-LLM is older: by the operator for a runtime image in the image
  catalog, by the builder from the TensorRT-LLM it runs with.
- A10: an engine deserializes only on the TensorRT that built it (docs/reference/tensorrt-llm.md §3.3).
  The builder records TensorRT-LLM and TensorRT from the installed libraries (manifest and report,
  ``None`` when absent: the CPU ``--skip-compile`` path); the operator records them in
  ``status.artifact`` and refuses a serving image whose catalog entry (Triton's release compatibility
  matrix, triton-inference-server/server ``docs/introduction/compatibility.md`` @0f963c9a) differs.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from engine_builder.contract import runtime_versions
from engine_builder.package import versions
from engine_builder.pipeline import _check_runtime
from engine_builder.report import BuildError, build_report
from engine_builder.spec import BuildSpec
from trtllm_operator.decide.compatibility import engine_incompatibilities
from trtllm_operator.decide.engine_cache import artifact_status, record_from_build
from trtllm_operator.decide.engine_failure import parse_report
from trtllm_operator.decide.engine_spec import InvalidEngine, PreparedEngine, prepare_engine
from trtllm_operator.decide.image_catalog import image_versions

IMAGE_2603 = "nvcr.io/nvidia/tritonserver:26.03-trtllm-python-py3"
IMAGE_2512 = "nvcr.io/nvidia/tritonserver:25.12-trtllm-python-py3"


def _dist(root: Path, name: str, version: str) -> None:
    info = root / f"{name}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")


def test_builder_reads_tensorrt_and_tensorrt_llm_from_the_installed_libraries(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Absent libraries are recorded as absent (None); installed ones by their installed version."""
    absent = versions()
    assert "tensorrt" in absent and "tensorrt_llm" in absent
    assert runtime_versions(absent) == {"tensorrt_llm": None, "tensorrt": None}  # this CPU machine
    _dist(tmp_path, "tensorrt_llm", "1.2.0rc8")
    _dist(tmp_path, "tensorrt", "10.14.1.48")
    monkeypatch.setattr(sys, "path", [str(tmp_path), *sys.path])
    assert runtime_versions(versions()) == {"tensorrt_llm": "1.2.0rc8", "tensorrt": "10.14.1.48"}


def test_report_carries_the_versions_into_status_artifact() -> None:
    """Builder report → the operator's record of a completed Job → ``status.artifact``."""
    built = {"tensorrt_llm": "1.2.0", "tensorrt": "10.14.1.48"}
    prepared = prepare_engine("e", engine_spec(IMAGE_2603, "fp8"))
    assert isinstance(prepared, PreparedEngine), prepared
    text = json.dumps(build_report(status="Succeeded", engine_key=prepared.key, versions=built))
    report = parse_report(text)
    assert report is not None and report.versions == built
    record = record_from_build(prepared, report, job_name="j", recorded_at="2026-12-02T00:00:00Z")
    status = artifact_status(record)
    assert (status["tensorrtLLMVersion"], status["tensorrtVersion"]) == ("1.2.0", "10.14.1.48")
    absent = parse_report(json.dumps(build_report(status="Partial", versions=runtime_versions({}))))
    assert absent is not None and absent.versions == {"tensorrt_llm": None, "tensorrt": None}


@pytest.mark.parametrize(
    ("image", "expected"),
    [
        (IMAGE_2603, ("1.2.0", "10.14.1.48")),
        (IMAGE_2512 + "@sha256:" + "0" * 64, ("1.1.0", "10.13.3.9")),
        ("nvcr.io/nvidia/tritonserver:26.07-trtllm-python-py3", ("1.2.1", "10.14.1.48")),
        ("nvcr.io/nvidia/tensorrt-llm/release:1.2.0", ("1.2.0", None)),
        ("nvcr.io/nvidia/tritonserver:26.03-py3", None),  # no TensorRT-LLM in it
        ("registry.example.com/mirror/tritonserver:26.03-trtllm-python-py3", None),  # not catalogued
    ],
)
def test_image_catalog(image: str, expected: tuple[str, str | None] | None) -> None:
    got = image_versions(image)
    assert (None if got is None else (got.tensorrt_llm, got.tensorrt)) == expected


def build_spec(fmt: str) -> BuildSpec:
    return BuildSpec.model_validate(
        {
            "model": {"uri": "hf://org/model"},
            "backend": "pytorch",
            "runtime_image": IMAGE_2603,
            "quantization": {"format": fmt},
            "target": {"gpu_product": "NVIDIA-B200", "sm": 100},
        }
    )


@pytest.mark.parametrize("installed", ["1.2.0rc8", "1.2.1"])
def test_builder_refuses_mxfp8_on_a_tensorrt_llm_that_cannot_load_it(installed: str) -> None:
    with pytest.raises(BuildError) as info:
        _check_runtime(build_spec("mxfp8"), {"tensorrt_llm": installed})
    assert info.value.reason == "BadSpec" and info.value.field == "quantization.format"
    assert f"TensorRT-LLM {installed}" in info.value.message and "1.3" in info.value.message


@pytest.mark.parametrize(
    ("fmt", "installed"), [("mxfp8", "1.3.0"), ("mxfp8", None), ("fp8", "1.2.0"), ("nvfp4", "0.19.0")]
)
def test_builder_accepts_what_its_runtime_loads(fmt: str, installed: str | None) -> None:
    _check_runtime(build_spec(fmt), {"tensorrt_llm": installed})


def engine_spec(image: str, fmt: str = "mxfp8") -> dict[str, Any]:
    return {
        "model": {"source": "hf://meta-llama/Llama-3.1-8B-Instruct"},
        "backend": "pytorch",
        "runtime": {"image": image},
        "quantization": {"format": fmt},
        "gpu": {"product": "NVIDIA-B200"},
        "storage": {"createPVC": {"size": "50Gi"}},
    }


def test_operator_refuses_mxfp8_for_a_catalogued_runtime_that_cannot_load_it() -> None:
    refused = prepare_engine("e", engine_spec(IMAGE_2603))
    assert isinstance(refused, InvalidEngine), refused
    assert refused.field == "spec.quantization.format"
    assert "mxfp8" in refused.message and IMAGE_2603 in refused.message
    assert "TensorRT-LLM 1.2.0" in refused.message and "1.3" in refused.message
    # the same engine on fp8, or on an image the catalog does not know (the builder checks there)
    assert isinstance(prepare_engine("e", engine_spec(IMAGE_2603, "fp8")), PreparedEngine)
    private = "registry.example.com/trtllm:2026-07"
    assert isinstance(prepare_engine("e", engine_spec(private)), PreparedEngine)


IMAGE_2404 = "nvcr.io/nvidia/tritonserver:24.04-trtllm-python-py3"  # TensorRT-LLM 0.9.0


def test_operator_refuses_the_pytorch_backend_on_a_catalogued_runtime_without_it() -> None:
    """Fresh-user trial 48 V10: backend pytorch on the 24.04 image (TensorRT-LLM 0.9.0; the PyTorch
    backend came in 0.17) rendered with rc 0; refused on spec.backend naming the image, its version and
    the fix. 25.01 (0.17.0), the tensorrt backend, and an image the catalog does not know pass."""
    refused = prepare_engine("e", engine_spec(IMAGE_2404, "fp8"))
    assert isinstance(refused, InvalidEngine), refused
    assert refused.field == "spec.backend"
    assert refused.message.startswith(
        "backend pytorch needs TensorRT-LLM 0.17 or newer (its PyTorch backend came in 0.17), but the "
        f"runtime has TensorRT-LLM 0.9.0: spec.runtime.image {IMAGE_2404} carries TensorRT-LLM 0.9.0"
    )
    assert "Fix: use a runtime image with a newer TensorRT-LLM" in refused.message
    image_2501 = "nvcr.io/nvidia/tritonserver:25.01-trtllm-python-py3"
    assert isinstance(prepare_engine("e", engine_spec(image_2501, "fp8")), PreparedEngine)
    assert isinstance(
        prepare_engine("e", {**engine_spec(IMAGE_2404, "fp8"), "backend": "tensorrt"}), PreparedEngine
    )
    assert isinstance(
        prepare_engine("e", engine_spec("registry.example.com/trtllm:0.9", "fp8")), PreparedEngine
    )


def test_builder_refuses_the_pytorch_backend_on_a_tensorrt_llm_without_it() -> None:
    with pytest.raises(BuildError) as info:
        _check_runtime(build_spec("fp8"), {"tensorrt_llm": "0.16.0"})
    assert info.value.reason == "BadSpec" and info.value.field == "backend"
    assert "backend pytorch needs TensorRT-LLM 0.17" in info.value.message
    _check_runtime(build_spec("fp8"), {"tensorrt_llm": "0.17.0.post1"})


def pair(
    runtime_image: str, built: dict[str, str | None], server_image: str | None = None
) -> tuple[dict[str, Any], dict[str, Any]]:
    engine = {
        "metadata": {"name": "e"},
        "spec": {"runtime": {"image": runtime_image}, "gpu": {"product": "NVIDIA-H100-80GB-HBM3"}},
        "status": {
            "artifact": {
                "tensorrtLLMVersion": built.get("tensorrt_llm"),
                "tensorrtVersion": built.get("tensorrt"),
            }
        },
    }
    deployment: dict[str, Any] = {"metadata": {"name": "d", "annotations": {}}, "spec": {}}
    if server_image:
        deployment["spec"]["server"] = {"image": server_image}
        deployment["metadata"]["annotations"]["llm.trtllm-operator.dev/compatible-runtime-images"] = (
            runtime_image
        )
    return deployment, engine


def test_gate_refuses_an_artifact_built_by_another_tensorrt_naming_both() -> None:
    # Built by a builder image with TensorRT-LLM 1.1 / TensorRT 10.13 (e.g. the operator's builder_image),
    # served by 26.03 (1.2.0 / 10.14.1.48).
    dep, engine = pair(IMAGE_2603, {"tensorrt_llm": "1.1.0", "tensorrt": "10.13.3.9"})
    (problem,) = engine_incompatibilities(dep, engine)
    message = problem.message()
    assert problem.field == "spec.server.image"
    assert "TensorRT-LLM 1.2.0 / TensorRT 10.14.1.48" in message  # the serving image's
    assert "TensorRT-LLM 1.1.0 / TensorRT 10.13.3.9" in message  # what built the engine
    # A server image declared compatible by annotation is still checked against the catalog.
    dep, engine = pair(IMAGE_2603, {"tensorrt_llm": "1.2.0rc8", "tensorrt": "10.14.1.48"}, IMAGE_2512)
    (problem,) = engine_incompatibilities(dep, engine)
    assert "TensorRT 10.13.3.9" in problem.message() and "TensorRT 10.14.1.48" in problem.message()


@pytest.mark.parametrize(
    "built",
    [
        {"tensorrt_llm": "1.2.0rc8", "tensorrt": "10.14.1.48"},  # the 26.03 image's own wheel
        {"tensorrt_llm": None, "tensorrt": None},  # CPU --skip-compile: nothing known
        {"tensorrt_llm": "1.2.0", "tensorrt": None},
    ],
)
def test_gate_accepts_matching_or_unknown_versions(built: dict[str, str | None]) -> None:
    dep, engine = pair(IMAGE_2603, built)
    assert engine_incompatibilities(dep, engine) == []
