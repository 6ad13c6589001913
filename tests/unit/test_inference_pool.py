"""``spec.routing.inferencePool``: the InferencePool the operator renders, against upstream's CRD.

``tests/fixtures/upstream/gateway-api-inference-extension-v1.6.0/inference.networking.k8s.io_inferencepools.yaml``
is kubernetes-sigs/gateway-api-inference-extension ``config/crd/bases/…`` at tag v1.6.0, unmodified.
Fields the API server would prune are errors here (a misspelt field would vanish on apply). The
real API server's verdict is tests/integration/test_inference_pool.py.
"""

from __future__ import annotations

import copy
from dataclasses import replace
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from support.serving import serving_params

from trtllm_operator.api.deployment import LLMDeploymentSpec
from trtllm_operator.api.wire import (
    ENGINE_TYPE_LABEL,
    ENGINE_TYPE_TRITON_TRTLLM,
    INFERENCE_POOL_API_VERSION,
    LABEL_DEPLOYMENT,
)
from trtllm_operator.commands._schema import _strict
from trtllm_operator.decide.serving_params import (
    InferencePoolSettings,
    OwnerRef,
    ServerSettings,
    ServingParams,
)
from trtllm_operator.render.children import render_plan
from trtllm_operator.render.deployment import desired_deployment
from trtllm_operator.render.inferencepool import desired_inference_pool
from trtllm_operator.render.model_repository import desired_model_repository
from trtllm_operator.render.serving import OPENAI_PORT

UPSTREAM = (
    Path(__file__).resolve().parents[1] / "fixtures" / "upstream" / "gateway-api-inference-extension-v1.6.0"
)
CRD = UPSTREAM / "inference.networking.k8s.io_inferencepools.yaml"
KEY = "c" * 64


@cache
def pool_schema() -> dict[str, Any]:
    crd = yaml.safe_load(CRD.read_text(encoding="utf-8"))
    (version,) = crd["spec"]["versions"]
    assert version["served"] and version["storage"]
    assert f"{crd['spec']['group']}/{version['name']}" == INFERENCE_POOL_API_VERSION
    assert crd["spec"]["names"]["kind"] == "InferencePool"
    schema: dict[str, Any] = _strict(version["schema"]["openAPIV3Schema"])
    return schema


PICKER = InferencePoolSettings("epp", 9002, "FailOpen")


def params(pool: InferencePoolSettings | None = PICKER, api: str = "openai") -> ServingParams:
    return serving_params(
        owner=OwnerRef("llama", "u-1"),
        engine_key=KEY,
        image="nvcr.io/nvidia/tritonserver:26.03-trtllm-python-py3",
        artifact_sub_path=f"trtllm/{KEY}",
        replicas=1,
        server=ServerSettings(api=api),
        inference_pool=pool,
    )


POOLS = {
    "with picker": InferencePoolSettings("epp", 9002, "FailOpen"),
    "picker defaults": InferencePoolSettings("llama-epp"),
    "no picker": InferencePoolSettings(),
}


@pytest.mark.parametrize("pool", POOLS.values(), ids=POOLS.keys())
def test_rendered_pool_validates_against_the_upstream_crd(pool: InferencePoolSettings) -> None:
    obj = desired_inference_pool(params(pool))
    assert obj is not None
    jsonschema.Draft7Validator(pool_schema()).validate(obj)
    assert obj["apiVersion"] == "inference.networking.k8s.io/v1" and obj["kind"] == "InferencePool"
    assert obj["metadata"]["name"] == "llama" and obj["metadata"]["ownerReferences"][0]["uid"] == "u-1"
    assert obj["spec"]["targetPorts"] == [{"number": OPENAI_PORT}]
    if pool.picker_service:
        assert obj["spec"]["endpointPickerRef"] == {
            "kind": "Service",
            "name": pool.picker_service,
            "port": {"number": pool.picker_port},
            "failureMode": pool.failure_mode,
        }
    else:
        assert "endpointPickerRef" not in obj["spec"]


def test_pool_selects_exactly_the_serving_pods_and_labels_them_for_the_picker() -> None:
    p = params()
    pool = desired_inference_pool(p)
    assert pool is not None
    dep = desired_deployment(p, desired_model_repository(p))
    labels = dep["spec"]["template"]["metadata"]["labels"]
    selector = pool["spec"]["selector"]["matchLabels"]
    assert selector == {LABEL_DEPLOYMENT: "llama"} and selector.items() <= labels.items()
    assert selector == dep["spec"]["selector"]["matchLabels"]
    # the picker reads Triton TRT-LLM metric names for pods with this label (its default is vLLM's)
    assert labels[ENGINE_TYPE_LABEL] == ENGINE_TYPE_TRITON_TRTLLM == "triton-tensorrt-llm"
    # the pool's first target port is where the picker scrapes /metrics: the frontend's port
    ports = {c["name"]: c["containerPort"] for c in dep["spec"]["template"]["spec"]["containers"][0]["ports"]}
    assert pool["spec"]["targetPorts"][0]["number"] == ports["openai"]

    off = replace(p, inference_pool=None)
    assert desired_inference_pool(off) is None
    off_dep = desired_deployment(off, desired_model_repository(off))
    assert ENGINE_TYPE_LABEL not in off_dep["spec"]["template"]["metadata"]["labels"]


def test_a_users_engine_type_label_is_kept() -> None:
    """Fresh-user trial 49 W8: ``spec.podLabels`` ``inference.networking.k8s.io/engine-type: vllm`` was
    overwritten with ``triton-tensorrt-llm``, silently. The value names an engine configuration of the
    picker, which its deployer may define (EPP v1.5.0 factories.go ``engineConfigs``): it is kept."""
    for value in ("vllm", "my-triton-trtllm"):
        p = replace(params(), pod_labels={ENGINE_TYPE_LABEL: value, "team": "a"})
        labels = desired_deployment(p, desired_model_repository(p))["spec"]["template"]["metadata"]["labels"]
        assert labels[ENGINE_TYPE_LABEL] == value and labels["team"] == "a"


def test_the_check_catches_what_the_api_server_would_prune_or_refuse() -> None:
    obj = desired_inference_pool(params())
    assert obj is not None
    pruned = copy.deepcopy(obj)
    pruned["spec"]["targetPortNumber"] = 9000  # the v1alpha2 field name: pruned by v1
    with pytest.raises(jsonschema.ValidationError, match="targetPortNumber"):
        jsonschema.Draft7Validator(pool_schema()).validate(pruned)
    bad = copy.deepcopy(obj)
    bad["spec"]["endpointPickerRef"]["failureMode"] = "FailSafe"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft7Validator(pool_schema()).validate(bad)


def test_routing_needs_the_openai_api() -> None:
    with pytest.raises(ValueError, match="openai"):
        desired_inference_pool(params(api="triton"))
    spec = LLMDeploymentSpec.model_validate(
        {
            "engineRef": {"name": "e"},
            "server": {"api": "both"},
            "routing": {"inferencePool": {"enabled": True, "endpointPickerRef": {"name": "epp"}}},
        }
    )
    ref = spec.routing.inference_pool.endpoint_picker_ref
    assert ref is not None and (ref.port, ref.failure_mode) == (9002, "FailClose")


def test_render_plan_carries_the_pool() -> None:
    from trtllm_operator.decide.compatibility import Placement  # noqa: PLC0415
    from trtllm_operator.decide.serving import ServingPlan  # noqa: PLC0415
    from trtllm_operator.decide.triton_config import model_repository_files  # noqa: PLC0415

    p = params()
    placement = Placement(kind="Deployment", nodes_per_replica=1)
    children = render_plan(ServingPlan(p, placement, model_repository_files(p)))
    assert children.inference_pool is not None
    assert children.inference_pool in children.manifests()
