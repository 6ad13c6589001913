"""Raising spec.storage.createPVC.size grows the operator-created claim (decide.pvc_growth).

Trial: the size was raised, the API server accepted it (CEL: grow only), and nothing happened to the
claim. Kubernetes grows a claim when its spec.resources.requests.storage is raised, and refuses that
unless the claim is bound and its StorageClass has allowVolumeExpansion: true (the
PersistentVolumeClaimResize admission plugin's messages are quoted below, v1.34
plugin/pkg/admission/storage/persistentvolume/resize/admission.go).
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from support.engine_decisions import prepared, spec

from trtllm_operator.api.common import quantity_value
from trtllm_operator.decide.pvc_growth import PVCGrowth, pvc_growth, refusal_message, storage_expanded

ADMISSION = (
    'persistentvolumeclaims "e-artifacts" is forbidden: only dynamically provisioned pvc can be resized '
    "and the storageclass that provisions the pvc must support resize"
)


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("10Gi", Decimal(10 * 2**30)),
        ("1Ti", Decimal(2**40)),
        ("1500M", Decimal(1_500_000_000)),
        ("1.5Gi", Decimal(3 * 2**29)),
        ("2e3", Decimal(2000)),
        ("500m", Decimal("0.5")),
        ("12", Decimal(12)),
        # E and Ei are suffixes (exa, exbi), not exponents (apimachinery suffix.go interpret).
        ("2E", Decimal(2 * 10**18)),
        ("1Ei", Decimal(2**60)),
        ("1.5Ei", Decimal(3 * 2**59)),
        ("3E2", Decimal(300)),
        ("1e999999999", Decimal("1e999999999")),
        # ParseQuantity caps binary-SI amounts at math.MaxInt64.
        ("999999Ei", Decimal(2**63 - 1)),
    ],
)
def test_quantities_are_read_as_kubernetes_writes_them(text: str, value: Decimal) -> None:
    assert quantity_value(text) == value


def test_a_non_quantity_is_refused() -> None:
    with pytest.raises(ValueError, match="not a Kubernetes quantity"):
        quantity_value("ten gigs")


@pytest.mark.parametrize("text", ["1e1.5", "1Ei5", "1EE"])
def test_an_exponent_must_be_an_integer(text: str) -> None:
    with pytest.raises(ValueError, match="not a Kubernetes quantity"):
        quantity_value(text)


def created(size: str) -> Any:
    return prepared(spec(storage={"createPVC": {"size": size}}), name="e")


def claim(
    request: str, capacity: str | None = None, storage_class: str | None = "standard"
) -> dict[str, Any]:
    pvc: dict[str, Any] = {
        "metadata": {"name": "e-artifacts"},
        "spec": {"resources": {"requests": {"storage": request}}, "accessModes": ["ReadWriteOnce"]},
        "status": {"phase": "Bound", "capacity": {"storage": capacity or request}},
    }
    if storage_class:
        pvc["spec"]["storageClassName"] = storage_class
    return pvc


def test_a_smaller_claim_is_grown_to_the_spec_size() -> None:
    assert pvc_growth(created("20Gi"), claim("10Gi")) == PVCGrowth("e-artifacts", "10Gi", "20Gi")


@pytest.mark.parametrize("request_", ["20Gi", "21474836480", "1Ti"])
def test_a_claim_as_large_or_larger_is_left_alone(request_: str) -> None:
    # 20Gi written in another form is the same size; never shrink (Kubernetes refuses it anyway).
    assert pvc_growth(created("20Gi"), claim(request_)) is None


def test_an_absurd_size_is_compared_as_the_api_server_caps_it() -> None:
    # The API server stores 999999Ei as int64 max: the claim is then as large as the spec asks.
    assert pvc_growth(created("999999Ei"), claim("9223372036854775807")) is None
    assert pvc_growth(created("1e999999999"), claim("1Gi")) == PVCGrowth("e-artifacts", "1Gi", "1e999999999")


def test_only_the_operator_created_claim_is_grown() -> None:
    mine = prepared(spec(storage={"pvc": {"claimName": "e-artifacts"}}), name="e")
    assert pvc_growth(mine, claim("1Gi")) is None  # storage.pvc: the user's claim, never touched
    assert pvc_growth(created("20Gi"), None) is None  # not created yet: EnsurePVC creates it at size


def test_a_refusal_names_the_field_the_api_servers_words_and_the_fixes() -> None:
    message = refusal_message(PVCGrowth("e-artifacts", "10Gi", "20Gi"), ADMISSION, "standard")
    assert message.startswith(
        "spec.storage.createPVC.size is 20Gi, but the API server refused to grow PersistentVolumeClaim "
        f"e-artifacts from 10Gi: {ADMISSION}."
    )
    assert "allowVolumeExpansion: true on StorageClass standard" in message
    assert "spec.storage.pvc.claimName" in message and "a new LLMEngine" in message
    assert "no StorageClass" in refusal_message(PVCGrowth("e-artifacts", "10Gi", "20Gi"), ADMISSION, None)


def test_storage_expanded_condition() -> None:
    p = created("20Gi")
    refused = storage_expanded(p, claim("10Gi"), grown=False, refusal="no", previous=[], generation=3)
    assert refused is not None
    assert (refused["status"], refused["reason"], refused["message"]) == (
        "False",
        "PVCExpansionRefused",
        "no",
    )
    grown = storage_expanded(p, claim("10Gi"), grown=True, refusal=None, previous=[], generation=3)
    assert grown is not None and (grown["status"], grown["reason"]) == ("True", "PVCExpansionRequested")
    assert grown["message"].startswith(
        "PersistentVolumeClaim e-artifacts requests 20Gi (spec.storage.createPVC.size 20Gi); "
        "its capacity is 10Gi"
    )
    # Nothing asked for, nothing written; once written, it follows the claim (capacity catches up).
    assert storage_expanded(p, claim("20Gi"), grown=False, refusal=None, previous=[], generation=3) is None
    later = storage_expanded(
        p, claim("20Gi", "20Gi"), grown=False, refusal=None, previous=[grown], generation=4
    )
    assert later is not None and later["status"] == "True" and "its capacity is 20Gi" in later["message"]
