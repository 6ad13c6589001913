"""The ScaledObjects the operator renders (``mode: keda``) against KEDA's own CRD schema.

``tests/fixtures/upstream/keda-v2.20.2/keda.sh_scaledobjects.yaml`` is kedacore/keda
``config/crd/bases/keda.sh_scaledobjects.yaml`` at tag v2.20.2, unmodified. Fields the API server
would prune (not in the schema) are errors here: a misspelled field would otherwise vanish on
apply, and KEDA would run with its default instead of ours.
"""

from __future__ import annotations

import copy
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from trtllm_operator.api.deployment import AutoscalingSpec
from trtllm_operator.api.wire import KEDA_API_VERSION
from trtllm_operator.commands._schema import _strict
from trtllm_operator.decide.serving_params import OwnerRef
from trtllm_operator.render.keda import desired_scaled_object

CRD = (
    Path(__file__).resolve().parents[1]
    / "fixtures"
    / "upstream"
    / "keda-v2.20.2"
    / "keda.sh_scaledobjects.yaml"
)
OWNER = OwnerRef("llama", "0b6a4f3e-0000-4000-8000-000000000001")


@cache
def scaled_object_schema() -> dict[str, Any]:
    crd = yaml.safe_load(CRD.read_text(encoding="utf-8"))
    (version,) = (v for v in crd["spec"]["versions"] if v["name"] == "v1alpha1")
    assert version["served"] and version["storage"]
    assert f"{crd['spec']['group']}/{version['name']}" == KEDA_API_VERSION
    schema: dict[str, Any] = _strict(version["schema"]["openAPIV3Schema"])
    return schema


def keda(**kw: Any) -> AutoscalingSpec:
    doc: dict[str, Any] = {
        "enabled": True,
        "mode": "keda",
        "minReplicas": 1,
        "maxReplicas": 8,
        "targets": {"activeRequestUtilization": 0.7, "kvCacheUtilization": 0.8},
        "metrics": {"source": "prometheus", "prometheusURL": "http://prom:9090"},
    }
    doc.update(kw)
    return AutoscalingSpec.model_validate(doc)


SPECS = {
    "defaults": keda(),
    "saturation only": keda(targets={"activeRequestUtilization": 0.5}),
    "kv only, behavior": keda(
        targets={"kvCacheUtilization": 0.7},
        behavior={
            "scaleUp": {"stabilizationWindowSeconds": 0, "maxReplicasPerStep": 2, "percent": 100},
            "scaleDown": {"stabilizationWindowSeconds": 600, "maxReplicasPerStep": 1},
        },
        metrics={"source": "prometheus", "prometheusURL": "https://prom:9090", "scrapeIntervalSeconds": 5},
    ),
}


@pytest.mark.parametrize("auto", SPECS.values(), ids=SPECS.keys())
def test_rendered_scaled_objects_validate_against_kedas_crd(auto: AutoscalingSpec) -> None:
    obj = desired_scaled_object("llama", "ns", OWNER, auto)
    jsonschema.Draft7Validator(scaled_object_schema()).validate(obj)
    # the CRD's schema admits minReplicaCount 0 (minimum: 0): only our admission keeps it >= 1 (A6)
    assert scaled_object_schema()["properties"]["spec"]["properties"]["minReplicaCount"]["minimum"] == 0
    assert obj["spec"]["minReplicaCount"] >= 1


def test_the_check_catches_what_the_api_server_would_prune_or_refuse() -> None:
    obj = desired_scaled_object("llama", "ns", OWNER, keda())
    pruned = copy.deepcopy(obj)
    pruned["spec"]["minReplicas"] = 1  # the HPA's name, not KEDA's: pruned on apply
    with pytest.raises(jsonschema.ValidationError, match="minReplicas"):
        jsonschema.Draft7Validator(scaled_object_schema()).validate(pruned)
    untyped = copy.deepcopy(obj)
    untyped["spec"]["triggers"][0]["metadata"]["threshold"] = 4  # trigger metadata is map[string]string
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft7Validator(scaled_object_schema()).validate(untyped)
