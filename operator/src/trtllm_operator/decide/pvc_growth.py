"""Growing the operator-created artifact PVC when ``spec.storage.createPVC.size`` is raised. Pure.

``createPVC.size`` may only grow (the CRD's CEL rule). Kubernetes expands a claim when its
``spec.resources.requests.storage`` is raised (kubernetes/website v1.34
``content/en/docs/concepts/storage/persistent-volumes.md``, "Expanding Persistent Volumes Claims":
"You can only expand a PVC if its storage class's ``allowVolumeExpansion`` field is set to true").
The API server's ``PersistentVolumeClaimResize`` admission plugin (on by default,
``pkg/kubeapiserver/options/plugins.go``; ``plugin/pkg/admission/storage/persistentvolume/resize/
admission.go``) refuses a larger request with "Only bound persistent volume claims can be expanded"
or "only dynamically provisioned pvc can be resized and the storageclass that provisions the pvc
must support resize" (no StorageClass, or one without ``allowVolumeExpansion: true``).

The operator raises the request of the claim it created for this engine (the claim carries the
operator's storage labels: ``handlers.engine.untrusted_child`` refuses any other) and reports the
outcome in the LLMEngine's ``StorageExpanded`` condition: True once the claim requests the spec's
size (the message quotes ``status.capacity``: the provisioner finishes the expansion), False with
the API server's refusal, the field and the fix. The condition appears only once a growth was asked
for; a claim already at the spec's size with no such history writes nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from trtllm_operator.api import CONDITION_STORAGE_EXPANDED
from trtllm_operator.api.common import quantity_value
from trtllm_operator.decide.conditions import Condition, condition
from trtllm_operator.decide.engine import R_PVC_EXPANSION_REFUSED, R_PVC_EXPANSION_REQUESTED
from trtllm_operator.decide.engine_spec import PreparedEngine

SIZE_FIELD = "spec.storage.createPVC.size"


@dataclass(frozen=True)
class PVCGrowth:
    """Raise claim ``claim``'s storage request from ``have`` to ``want``."""

    claim: str
    have: str
    want: str


def _request(pvc: Mapping[str, Any]) -> str | None:
    value = (((pvc.get("spec") or {}).get("resources") or {}).get("requests") or {}).get("storage")
    return str(value) if value else None


def pvc_growth(prepared: PreparedEngine, pvc: Mapping[str, Any] | None) -> PVCGrowth | None:
    """The growth the operator-created claim needs: its request is below ``createPVC.size``.
    None for storage the operator did not create, no claim yet, or a request already as large."""
    st = prepared.storage
    if not st.created_by_operator or st.create_size is None or pvc is None:
        return None
    have = _request(pvc)
    if have is None:
        return None
    try:
        smaller = quantity_value(have) < quantity_value(st.create_size)
    except ValueError:
        return None
    return PVCGrowth(st.claim_name or "", have, st.create_size) if smaller else None


def refusal_message(growth: PVCGrowth, api_message: str, storage_class: str | None) -> str:
    """The ``StorageExpanded`` False message: the field, the API server's words, the fixes."""
    sc = (
        f"set allowVolumeExpansion: true on StorageClass {storage_class} (kubectl patch storageclass "
        f"{storage_class} -p '{{\"allowVolumeExpansion\": true}}'; the operator retries at its next "
        "reconcile)"
        if storage_class
        else "the claim has no StorageClass, so it cannot be expanded"
    )
    return (
        f"{SIZE_FIELD} is {growth.want}, but the API server refused to grow PersistentVolumeClaim "
        f"{growth.claim} from {growth.have}: {api_message.strip()}. Kubernetes expands only a bound "
        f"claim whose StorageClass has allowVolumeExpansion: true: {sc}; or use a new claim of the "
        "size needed (spec.storage.pvc.claimName naming a larger PVC, or a new LLMEngine whose "
        "createPVC starts at that size). The claim keeps its artifacts either way"
    )


def storage_expanded(
    prepared: PreparedEngine,
    pvc: Mapping[str, Any] | None,
    *,
    grown: bool,
    refusal: str | None,
    previous: Sequence[Mapping[str, Any]],
    generation: int,
) -> Condition | None:
    """The ``StorageExpanded`` condition after this reconcile: ``grown``: the request was raised now;
    ``refusal``: the message of :func:`refusal_message` when the API server refused it. None while no
    growth was ever asked for (no previous ``StorageExpanded`` condition, nothing raised now)."""
    if refusal is not None:
        return condition(
            CONDITION_STORAGE_EXPANDED,
            False,
            R_PVC_EXPANSION_REFUSED,
            refusal,
            observed_generation=generation,
        )
    st = prepared.storage
    had = any(c.get("type") == CONDITION_STORAGE_EXPANDED for c in previous)
    if pvc is None or not st.created_by_operator or st.create_size is None or not (grown or had):
        return None
    request = st.create_size if grown else (_request(pvc) or st.create_size)
    capacity = ((pvc.get("status") or {}).get("capacity") or {}).get("storage")
    message = (
        f"PersistentVolumeClaim {st.claim_name} requests {request} ({SIZE_FIELD} {st.create_size}); "
        f"its capacity is {capacity or 'not reported yet'} (status.capacity: the StorageClass's "
        "provisioner grows the volume, some drivers only once a pod mounts it)"
    )
    return condition(
        CONDITION_STORAGE_EXPANDED, True, R_PVC_EXPANSION_REQUESTED, message, observed_generation=generation
    )
