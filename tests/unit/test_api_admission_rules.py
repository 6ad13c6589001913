"""The admission rules themselves: every CEL rule reports a reason the user can read, the labels and
container names the rules protect are the ones the renderers write, and the Kubernetes CEL functions
the offline check (``trtllm-operator render``) implements behave like the API server's.

The corpus of invalid manifests is checked against the real API server in
tests/integration/test_api_admission.py and against the offline check in test_render_command.py.
"""

from __future__ import annotations

import copy
import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import yaml
from celpy import celtypes

from trtllm_operator.api.common import CEL_KEY
from trtllm_operator.api.crd import deployment_crd, engine_crd
from trtllm_operator.api.deployment import SERVING_LABEL_KEYS
from trtllm_operator.api.engine import BUILDER_POD_LABEL_KEYS
from trtllm_operator.api.wire import (
    BENCHMARK_CONTAINER,
    BUILDER_CONTAINER,
    FETCH_CONTAINER,
    GROUP,
    SERVER_CONTAINER,
)
from trtllm_operator.commands._cel_library import _parse_quantity, format_string
from trtllm_operator.commands._schema import manifest_errors
from trtllm_operator.decide.engine_spec import PreparedEngine, prepare_engine
from trtllm_operator.render.benchmark_job import desired_benchmark_job
from trtllm_operator.render.builder_job import desired_builder_job
from trtllm_operator.render.children import desired_children
from trtllm_operator.settings import Settings

REPO = Path(__file__).resolve().parents[2]
KEY = "e" * 64
TINY = json.loads(
    (REPO / "tests/fixtures/model-configs/TinyLlama__TinyLlama-1.1B-Chat-v1.0.json").read_text()
)


def _rules(node: dict[str, Any], path: str = "") -> list[tuple[str, dict[str, str]]]:
    found = [(path, r) for r in node.get(CEL_KEY, [])]
    for key, child in (node.get("properties") or {}).items():
        found += _rules(child, f"{path}.{key}")
    for key in ("items", "additionalProperties"):
        if isinstance(node.get(key), dict):
            found += _rules(node[key], f"{path}[]")
    return found


@pytest.mark.parametrize("crd", [engine_crd(), deployment_crd()], ids=["engine", "deployment"])
def test_every_cel_rule_has_a_readable_reason(crd: dict[str, Any]) -> None:
    """Without a reason the API server prints the schema type as the value (``Invalid value:
    "object"``); Forbidden / Required print the message only."""
    rules = _rules(crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"])
    assert len(rules) > 40
    for path, rule in rules:
        assert rule.get("reason") in ("FieldValueForbidden", "FieldValueRequired"), (path, rule)
        assert rule["message"].strip(), (path, rule)


def _serving_children() -> list[dict[str, Any]]:
    docs = list(yaml.safe_load_all((REPO / "examples/llama-3.1-8b-fp8-h100.yaml").read_text()))
    engine = next(d for d in docs if d["kind"] == "LLMEngine")
    deployment = next(d for d in docs if d["kind"] == "LLMDeployment")
    for d in (engine, deployment):
        d["metadata"].update(namespace="ml", uid="uid")
    engine["spec"]["storage"] = {"s3": {"bucket": "engines"}}  # the S3 fetch init container too
    engine["status"] = {"phase": "Ready", "engineKey": KEY, "artifact": {"uri": f"s3://engines/x/{KEY}"}}
    out = desired_children(deployment, engine, gpus_per_node=8, lws_installed=False)
    assert out.workload is not None and out.service is not None
    return [out.workload["spec"]["template"], {"metadata": out.service["metadata"]}]


def _builder_pod() -> dict[str, Any]:
    spec = yaml.safe_load((REPO / "tests/fixtures/valid/minimal-engine.yaml").read_text())["spec"]
    spec["model"]["source"] = "hf://TinyLlama/TinyLlama-1.1B-Chat-v1.0"
    prepared = prepare_engine("llama", spec, hf_config=TINY)
    assert isinstance(prepared, PreparedEngine), prepared
    meta = {"metadata": {"name": "llama", "namespace": "ml", "uid": "uid"}}
    return dict(desired_builder_job(meta, prepared, Settings())["spec"]["template"])


def _benchmark_pod() -> dict[str, Any]:
    body: dict[str, Any] = yaml.safe_load((REPO / "tests/fixtures/valid/minimal-engine.yaml").read_text())
    body["metadata"].update(namespace="ml", uid="uid")
    body["spec"]["benchmark"] = {}
    body["status"] = {"phase": "Ready", "engineKey": KEY, "artifact": {"uri": f"pvc://a/{KEY}"}}
    return dict(desired_benchmark_job(body, Settings(), ["H100"])["spec"]["template"])


def _owned(key: str, reserved: tuple[str, ...]) -> bool:
    return key in reserved or key.startswith(GROUP + "/")


def test_the_reserved_label_keys_are_the_ones_the_operator_writes() -> None:
    """A user label under one of these keys would be overwritten, so admission refuses it: the
    reserved sets must cover every label the renderers put on pods and Services."""
    for obj in _serving_children():
        for key in obj["metadata"]["labels"]:
            assert _owned(key, SERVING_LABEL_KEYS), key
    for pod in (_builder_pod(), _benchmark_pod()):
        for key in pod["metadata"]["labels"]:
            assert _owned(key, BUILDER_POD_LABEL_KEYS), key
        for key in pod["metadata"].get("annotations") or {}:
            assert not key.startswith(GROUP + "/") or key == f"{GROUP}/engine-key"


def test_the_apparmor_rule_names_the_rendered_containers() -> None:
    """``ValidateAppArmorPodAnnotations`` wants an existing container; the rule lists these names."""
    serving = _serving_children()[0]["spec"]
    assert {c["name"] for c in serving["containers"] + serving.get("initContainers", [])} == {
        SERVER_CONTAINER,
        FETCH_CONTAINER,
    }
    assert [c["name"] for c in _builder_pod()["spec"]["containers"]] == [BUILDER_CONTAINER]
    assert [c["name"] for c in _benchmark_pod()["spec"]["containers"]] == [BENCHMARK_CONTAINER]


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("64Gi", Decimal(64 * 2**30)),
        ("500m", Decimal("0.5")),
        ("1.5", Decimal("1.5")),
        (".5", Decimal("0.5")),
        ("1e3", Decimal(1000)),
        ("2E", Decimal(2 * 10**18)),  # E alone is exa, not an exponent
        ("-1Mi", Decimal(-(2**20))),
        ("+8", Decimal(8)),
        ("100k", Decimal(100_000)),
    ],
)
def test_quantities_parse_as_resource_quantity_does(text: str, value: Decimal) -> None:
    # Examples from k8s.io/apimachinery@v0.34.4 pkg/api/resource/quantity.go and the CEL quantity
    # library's documentation (k8s.io/apiserver@v0.34.4 pkg/cel/library/quantity.go).
    assert _parse_quantity(text) == value


@pytest.mark.parametrize("text", ["64 GB", "Mi", "1,5", "200K", "1.5.2", ""])
def test_non_quantities_are_refused(text: str) -> None:
    with pytest.raises(ValueError):
        _parse_quantity(text)


def test_format_prints_like_the_api_server() -> None:
    """cel-go's ``format``: lists of strings as ``["a", "b"]``, whole doubles without a fraction
    (strings observed from the API server in tests/fixtures/invalid)."""
    args = celtypes.ListType(
        [
            celtypes.ListType([celtypes.StringType("A b"), celtypes.StringType("X/y")]),
            celtypes.DoubleType(90.0),
            celtypes.DoubleType(0.9),
            celtypes.IntType(3),
        ]
    )
    assert (
        str(format_string(celtypes.StringType("bad %s; %s %s %d %%"), args))
        == 'bad ["A b", "X/y"]; 90 0.9 3 %'
    )


def _engine(**over: Any) -> dict[str, Any]:
    body: dict[str, Any] = yaml.safe_load((REPO / "tests/fixtures/valid/minimal-engine.yaml").read_text())
    body["spec"].update(copy.deepcopy(over))
    return body


def test_annotations_total_size_is_bounded() -> None:
    """``ValidateAnnotations`` caps keys plus values at 256 KiB per object; the operator keeps 1 KiB."""
    big = {f"note-{i}": "v" * 8000 for i in range(33)}
    errors = manifest_errors(_engine(gpu={"product": "NVIDIA-H100-80GB-HBM3", "podAnnotations": big}))
    assert any(e.startswith("spec.gpu.podAnnotations: annotations take ") for e in errors), errors
    fine = {f"note-{i}": "v" * 8000 for i in range(30)}
    assert manifest_errors(_engine(gpu={"product": "NVIDIA-H100-80GB-HBM3", "podAnnotations": fine})) == []


@pytest.mark.parametrize(
    "image",
    [
        "nvcr.io/nvidia/tritonserver:26.03-trtllm-python-py3",
        "registry.local:5000/trt/triton:1.2.0",
        "nvcr.io/nvidia/tritonserver@sha256:" + "a" * 64,
        "nvcr.io/nvidia/tritonserver:latest@sha256:" + "b" * 64,  # the digest pins it
        "[fd00::1]:5000/triton:26.03",
    ],
)
def test_pinned_images_are_admitted(image: str) -> None:
    assert manifest_errors(_engine(runtime={"image": image})) == []


def _kv_errors(fmt: str, kv: str, *, backend: str = "tensorrt", paged: bool = True) -> list[str]:
    """The offline admission errors about the KV cache for this format / KV dtype / backend."""
    spec: dict[str, Any] = {"quantization": {"format": fmt, "kvCacheDtype": kv}, "backend": backend}
    if backend == "tensorrt":
        spec["build"] = {"pagedContextFMHA": paged}
    errors = manifest_errors(_engine(**spec))
    return [e for e in errors if "kvCacheDtype" in e]


@pytest.mark.parametrize("fmt", ["none", "int8_sq", "int4_awq"])
def test_int8_kv_refusal_offers_only_fixes_valid_for_the_format(fmt: str) -> None:
    """A fresh-user trial went in a circle: int8 → "use kvCacheDtype fp8" → "format must be fp8 …".
    With a format for which trtllm-build drops paged context FMHA with an FP8 KV cache too, fp8 is not
    offered; each fix offered is admitted."""
    (error,) = _kv_errors(fmt, "int8")
    assert "set build.pagedContextFMHA: false or kvCacheDtype auto" in error, error
    assert "kvCacheDtype fp8 (" not in error and "use kvCacheDtype fp8" not in error, error
    assert _kv_errors(fmt, "int8", paged=False) == []
    assert _kv_errors(fmt, "auto") == []
    assert _kv_errors(fmt, "fp8"), "fp8 is refused for this format, so it must not be offered"


@pytest.mark.parametrize("fmt", ["fp8", "w4a8_awq"])
def test_int8_kv_refusal_offers_fp8_where_it_keeps_paged_context_fmha(fmt: str) -> None:
    (error,) = _kv_errors(fmt, "int8")
    assert "kvCacheDtype fp8" in error and "kvCacheDtype auto" in error, error
    assert _kv_errors(fmt, "fp8") == []


def test_fp8_kv_refusal_names_the_format_and_never_offers_int8() -> None:
    (error,) = _kv_errors("none", "fp8")
    assert "not none" in error and "kvCacheDtype auto" in error, error
    assert "int8 turns it off too" in error and "use kvCacheDtype int8" not in error, error
    # each fix offered is admitted
    assert _kv_errors("none", "fp8", paged=False) == []
    assert _kv_errors("none", "auto") == []
    assert _kv_errors("fp8", "fp8") == []


@pytest.mark.parametrize("gpu", ["NVIDIA-A100-SXM4-80GB", "NVIDIA-H100-80GB-HBM3", "NVIDIA-B200"])
@pytest.mark.parametrize("backend", ["tensorrt", "pytorch"])
@pytest.mark.parametrize("paged", [True, False])
def test_planner_kv_fixes_pass_the_admission_rules(gpu: str, backend: str, paged: bool) -> None:
    """The planner's KV-cache refusals (FP8 below SM 89, INT8 on SM 100–119) offer
    kv_cache_dtype_choices; every one of those passes the planner and the API's CEL rules next to the
    same format, backend and pagedContextFMHA (on A100 it said "use int8 or auto", and int8 was then
    refused for pagedContextFMHA)."""
    from engine_builder.planner import Architecture, PlanRequest, lookup, validate  # noqa: PLC0415
    from engine_builder.planner.formats import (  # noqa: PLC0415
        KV_CACHE_DTYPES,
        PYTORCH_KV_REFUSAL,
        QUANT_FORMATS,
        format_info,
        paged_context_fmha_refusal,
    )

    INT8_KV_PAGED = paged_context_fmha_refusal("int8", "none")[0]  # noqa: N806
    arch = Architecture.from_hf_config(TINY)
    spec = lookup(gpu)
    for fmt in QUANT_FORMATS:
        if backend not in format_info(fmt).backends or spec.sm < format_info(fmt).min_sm:
            continue
        for kv in KV_CACHE_DTYPES:
            req = PlanRequest(quantization=fmt, kv_cache_dtype=kv, backend=backend, paged_context_fmha=paged)
            # the backend's refusal is the API's own rule and text (PYTORCH_KV_REFUSAL, trial 49 W3),
            # whose fix names the SM it needs; the GPU's refusals offer kv_cache_dtype_choices
            kv_issues = [
                i
                for i in validate(arch, req, spec)
                if i.field == "spec.quantization.kvCacheDtype"
                and i.message != f"{PYTORCH_KV_REFUSAL[0]}."
                and not i.message.startswith(INT8_KV_PAGED)  # the API's own rule and text (trial 51 Y6)
            ]
            for issue in kv_issues:
                offered = (
                    issue.fix.removeprefix("use kvCacheDtype ").removesuffix(" on this GPU.").split(" or ")
                )
                assert offered and offered[0], issue
                for choice in offered:
                    again = PlanRequest(
                        quantization=fmt, kv_cache_dtype=choice, backend=backend, paged_context_fmha=paged
                    )
                    assert not [i for i in validate(arch, again, spec) if "kvCacheDtype" in i.field], (
                        fmt,
                        choice,
                    )
                    assert _kv_errors(fmt, choice, backend=backend, paged=paged) == [], (fmt, kv, choice)
    if gpu == "NVIDIA-A100-SXM4-80GB" and backend == "tensorrt" and paged:
        req = PlanRequest(quantization="none", kv_cache_dtype="fp8")
        (issue,) = [i for i in validate(arch, req, spec) if i.field == "spec.quantization.kvCacheDtype"]
        assert issue.fix == "use kvCacheDtype auto on this GPU.", issue


@pytest.mark.parametrize("mode", ["medusa", "eagle"])
def test_refused_speculative_mode_is_the_only_error(mode: str) -> None:
    """The trial's medusa engine was also told to set maxDraftLen and draftModel, fields of a mode
    that is refused anyway: only the mode is named."""
    errors = manifest_errors(_engine(build={"speculativeDecoding": {"mode": mode}}))
    assert len(errors) == 1, errors
    assert errors[0].startswith(
        f"spec.build.speculativeDecoding.mode: speculativeDecoding.mode {mode} is not"
    ), errors


@pytest.mark.parametrize("parallelism", [{"tensor": -2}, {"pipeline": 0}])
def test_a_refused_parallelism_does_not_also_blame_workers(parallelism: dict[str, int]) -> None:
    """Fresh-user trial: ``tensor: -2`` also got ``build.workers must be at most tensor × pipeline``
    although workers was never set."""
    errors = manifest_errors(_engine(parallelism=parallelism))
    assert errors, parallelism
    assert not [e for e in errors if e.startswith("spec.build.workers")], errors


@pytest.mark.parametrize(("paged", "offered"), [(True, "auto"), (False, "auto or int8")])
def test_operator_planner_kv_fix_follows_the_engines_paged_context_fmha(paged: bool, offered: str) -> None:
    """The operator's plan (prepare_engine → plan_from_build_spec) passes the engine's backend and
    build.pagedContextFMHA to the planner: an FP8 KV cache on an A100 is offered int8 only where the
    API then admits it."""
    spec = _engine(
        quantization={"format": "none", "kvCacheDtype": "fp8"},
        gpu={"product": "NVIDIA-A100-SXM4-80GB"},
        build={"pagedContextFMHA": paged},
    )["spec"]
    prepared = prepare_engine("llama", spec, hf_config=TINY)
    assert not isinstance(prepared, PreparedEngine)
    assert prepared.field == "spec.quantization.kvCacheDtype", prepared
    assert f"use kvCacheDtype {offered} on this GPU." in prepared.text, prepared.text


def test_int8_kv_on_pytorch_offers_tensorrt_only_with_paged_context_fmha_off() -> None:
    """ "or backend tensorrt" alone led to the pagedContextFMHA refusal (build.pagedContextFMHA defaults
    to true); the message says what the tensorrt backend needs, and following it is admitted."""
    (error,) = _kv_errors("none", "int8", backend="pytorch")
    assert "or backend tensorrt with build.pagedContextFMHA: false" in error, error
    assert "fp8 (SM 89+)" in error, error
    assert _kv_errors("none", "int8", backend="tensorrt", paged=False) == []
