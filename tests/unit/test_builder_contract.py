"""One home per fact between the operator and the builder: the quantization-format table, the
builder contract module, and the import-linter rule that keeps the operator on that contract."""

from __future__ import annotations

import configparser
import pkgutil
from pathlib import Path
from typing import Any, get_args

import pytest

import engine_builder
from engine_builder import contract, pipeline
from engine_builder.planner import formats
from engine_builder.planner.formats import (
    KV_CACHE_DTYPE_TABLE,
    KV_CACHE_DTYPES,
    QUANT_FORMAT_TABLE,
    QUANT_FORMATS,
    paged_context_fmha_kept,
)
from engine_builder.spec import BuildSpec
from trtllm_operator.api import AWQ_FORMATS, LLMEngineSpec
from trtllm_operator.api.crd import engine_crd

ROOT = Path(__file__).resolve().parents[2]


def _engine_schema() -> dict[str, Any]:
    schema: dict[str, Any] = engine_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return schema["properties"]["spec"]["properties"]  # type: ignore[no-any-return]


def test_api_enums_equal_the_format_table() -> None:
    quant = _engine_schema()["quantization"]["properties"]
    assert quant["format"]["enum"] == list(QUANT_FORMATS)
    assert quant["kvCacheDtype"]["enum"] == list(KV_CACHE_DTYPES)
    assert set(get_args(formats.QuantFormat)) == set(QUANT_FORMAT_TABLE)
    assert set(get_args(formats.KVCacheDtype)) == set(KV_CACHE_DTYPE_TABLE)
    spec_schema = BuildSpec.model_json_schema()["$defs"]["Quantization"]["properties"]
    assert spec_schema["format"]["enum"] == list(QUANT_FORMATS)
    assert tuple(AWQ_FORMATS) == tuple(f for f, i in QUANT_FORMAT_TABLE.items() if i.awq)


def test_api_rules_are_generated_from_the_table() -> None:
    rules = [
        r["rule"]
        for r in _engine_schema()["quantization"]["x-kubernetes-validations"]
        if "awqBlockSize" in r["rule"]
    ]
    assert rules == [f"!has(self.awqBlockSize) || self.format in {[f for f in AWQ_FORMATS]!r}"]
    description = _engine_schema()["quantization"]["properties"]["format"]["description"]
    for name, info in QUANT_FORMAT_TABLE.items():
        assert f"{name} ({info.description})" in description


@pytest.mark.parametrize(
    ("fmt", "kv", "kept"),
    [
        # TensorRT-LLM 1.2 tensorrt_llm/builder.py build(): FP8 KV keeps paged context FMHA only for
        # quant_algo FP8 / W4A8_AWQ / NVFP4; INT8 KV always turns it off.
        ("fp8", "fp8", True),
        ("w4a8_awq", "fp8", True),
        ("nvfp4", "fp8", True),
        ("none", "fp8", False),
        ("int4_awq", "fp8", False),
        ("int8_sq", "fp8", False),
        ("fp8", "int8", False),
        ("int4_awq", "auto", True),
    ],
)
def test_paged_context_fmha_rule_follows_trtllm_builder(fmt: str, kv: str, kept: bool) -> None:
    assert paged_context_fmha_kept(fmt, kv) is kept


def test_stages_are_the_pipelines_own() -> None:
    assert tuple(pipeline.STAGE_FUNCS) == contract.STAGES[:-1]
    assert set(contract.STAGE_HELP) == set(contract.STAGES)


def _forbidden_for_operator() -> set[str]:
    parser = configparser.ConfigParser()
    parser.read(ROOT / ".importlinter")
    section = parser["importlinter:contract:operator-uses-builder-contract"]
    assert section["source_modules"].split() == ["trtllm_operator"]
    return set(section["forbidden_modules"].split())


def test_every_builder_module_is_classified_for_the_operator() -> None:
    """A new module of the builder is either part of the contract or forbidden to the operator."""
    allowed = {
        "engine_builder.contract",
        "engine_builder.planner",
        "engine_builder.redaction",
        "engine_builder.release",
        "engine_builder.triton",
    }
    modules = {info.name for info in pkgutil.iter_modules(engine_builder.__path__, "engine_builder.")}
    forbidden = _forbidden_for_operator()
    assert modules - allowed == forbidden, (
        "classify each engine_builder module: add it to .importlinter's operator-uses-builder-contract "
        "forbidden_modules, or (if the operator needs it and it is light) to the allowed set here"
    )


def test_the_contract_module_needs_no_heavy_import() -> None:
    """The contract reaches only the report, the build spec and the version helpers (stdlib +
    pydantic) and the artifact verifier (stdlib only)."""
    source = (Path(contract.__file__)).read_text(encoding="utf-8")
    imports = {line.split()[1] for line in source.splitlines() if line.startswith(("from ", "import "))}
    assert imports <= {
        "__future__",
        "hashlib",
        "re",
        "typing",
        "engine_builder.artifact_check",
        "engine_builder.release",
        "engine_builder.report",
        "engine_builder.spec",
    }


def test_operator_spec_round_trips_every_format() -> None:
    base = {
        "model": {"source": "hf://org/name"},
        "runtime": {"image": "nvcr.io/nvidia/tritonserver:26.03-trtllm-python-py3"},
        "gpu": {"product": "NVIDIA-H100-80GB-HBM3"},
        "storage": {"createPVC": {"size": "10Gi"}},
    }
    for fmt in QUANT_FORMATS:
        spec = LLMEngineSpec.model_validate({**base, "quantization": {"format": fmt}})
        assert spec.quantization.format == fmt
