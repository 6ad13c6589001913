"""What to do about an unschedulable builder pod: hints from the scheduler's message. Pure.

The scheduler says *that* a pod does not fit (``0/5 nodes are available: …``); the hint says which
field of the LLMEngine fixes it — the claims the builder mounts and why they cannot be used, or
the GPU request (:func:`trtllm_operator.api.engine.builder_gpus`, the number the builder Job
requests) and the node label it needs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from trtllm_operator.api.engine import builder_gpus
from trtllm_operator.api.wire import GPU_PRODUCT_LABEL, GPU_RESOURCE
from trtllm_operator.decide.engine_spec import PreparedEngine, gpu_products


@dataclass(frozen=True)
class ClaimState:
    """A PersistentVolumeClaim the builder mounts, as the API server shows it: ``phase`` (``Pending``,
    ``Bound``, ``Lost``; None: the claim does not exist) and the newest Event on it (``reason``,
    ``message``: e.g. the PV controller's ``FailedBinding`` / ``ProvisioningFailed`` /
    ``WaitForFirstConsumer``), None when there is none."""

    phase: str | None
    event_reason: str | None = None
    event_message: str | None = None


def claim_state(pvc: Mapping[str, Any] | None, events: Sequence[Mapping[str, Any]]) -> ClaimState:
    """The :class:`ClaimState` of a PVC (None: not found) and the core/v1 Events about it."""
    if pvc is None:
        return ClaimState(None)
    phase = str((pvc.get("status") or {}).get("phase") or "Pending")

    def when(e: Mapping[str, Any]) -> str:
        return str(
            e.get("lastTimestamp")
            or e.get("eventTime")
            or e.get("firstTimestamp")
            or (e.get("metadata") or {}).get("creationTimestamp")
            or ""
        )

    newest = max(events, key=when, default=None)
    if newest is None:
        return ClaimState(phase)
    return ClaimState(
        phase, str(newest.get("reason") or "") or None, str(newest.get("message") or "") or None
    )


def builder_claims(prepared: PreparedEngine) -> list[str]:
    """The PersistentVolumeClaims the builder pod mounts: the artifact storage's and a ``pvc://``
    model source's."""
    claims: list[str] = []
    if prepared.storage.kind == "pvc" and prepared.storage.claim_name:
        claims.append(prepared.storage.claim_name)
    source = prepared.spec.model.source
    if source.startswith("pvc://"):
        claims.append(source[len("pvc://") :].split("/", 1)[0])
    return claims


def pod_gpu_request(pods: Sequence[Mapping[str, Any]]) -> int | None:
    """``nvidia.com/gpu`` the newest pod requests (its containers' limits, else requests, summed —
    extended resources must have equal requests and limits), None without a pod or a GPU request."""
    newest = max(
        pods, key=lambda p: str((p.get("metadata") or {}).get("creationTimestamp") or ""), default=None
    )
    if newest is None:
        return None
    total = 0
    for container in (newest.get("spec") or {}).get("containers") or []:
        resources = container.get("resources") or {}
        value = (resources.get("limits") or {}).get(GPU_RESOURCE) or (resources.get("requests") or {}).get(
            GPU_RESOURCE
        )
        try:
            total += int(str(value)) if value is not None else 0
        except ValueError:
            continue
    return total or None


def unschedulable_hint(
    prepared: PreparedEngine,
    scheduler_message: str,
    claims: Mapping[str, ClaimState] | None = None,
    requested_gpus: int | None = None,
) -> str:
    """What to do about an unschedulable builder pod, from the scheduler's ``message`` ("" if none)
    and the observed state of the claims it mounts (``claims``, by name; may be empty).

    About PersistentVolumeClaims (the scheduler names them, or an observed claim is not Bound): the
    claims the builder mounts (``spec.storage``, a ``pvc://`` model source), their state — Pending
    (with the reason of the newest Event on the claim: bind it) or missing (create it) — and which
    field fixes it; and, when the nodes the operator read for the engine
    (:attr:`PreparedEngine.node_gpus`) have no GPU of its product, that too, as the pod would stay
    unschedulable once its claims are usable (trial 46 T5: the user learnt it only then). About
    GPUs or node placement (``nvidia.com/gpu``, node affinity/selector, taints): the GPU request —
    what the pod requests (``requested_gpus``, from :func:`pod_gpu_request`), else what the Job is
    rendered with — the node label it needs and how many GPUs such a node has. Anything else (e.g.
    ``Insufficient cpu``): no hint, the scheduler's message says it.
    """
    claims = claims or {}
    text = scheduler_message.lower()
    unbound = any(state.phase != "Bound" for state in claims.values())
    if "persistentvolumeclaim" in text or "persistent volume" in text or unbound:
        return f" ({_pvc_hint(prepared, scheduler_message, claims)}{_no_gpu_node_note(prepared)})"
    if any(w in text for w in (GPU_RESOURCE, "affinity", "selector", "taint")):
        gpus = requested_gpus if requested_gpus is not None else builder_gpus(prepared.spec)
        nodes = prepared.node_gpus
        capacity = f"; GPUs per node: {nodes.describe(prepared.gpu.product)}" if nodes is not None else ""
        return (
            f" (the builder pod requests {gpus} {GPU_RESOURCE} on one node labelled "
            f"{GPU_PRODUCT_LABEL}={prepared.gpu.product}{capacity})"
        )
    return ""


def _no_gpu_node_note(prepared: PreparedEngine) -> str:
    """``; and no node …`` when the nodes the operator read have no GPU of the engine's product
    (:class:`~trtllm_operator.decide.compatibility.NodeGPUs` ``nodes == 0``: none labelled with it,
    or none with ``nvidia.com/gpu`` allocatable), else ""."""
    nodes = prepared.node_gpus
    if nodes is None or nodes.from_nodes:
        return ""
    labels = " or ".join(gpu_products(prepared.spec.gpu.product, prepared.gpu))
    return (
        f"; and no node labelled {GPU_PRODUCT_LABEL}={labels} has {GPU_RESOURCE} allocatable, so the "
        "builder pod cannot be scheduled once its claims are usable either: add such a node, or set "
        "spec.gpu.product to a GPU the cluster has"
    )


@dataclass(frozen=True)
class _ClaimFix:
    """A claim the builder mounts and what fixes it: ``unbound`` when it exists but is not Bound,
    ``missing`` when it does not exist."""

    claim: str
    unbound: str
    missing: str


def _claim_fixes(prepared: PreparedEngine) -> list[_ClaimFix]:
    storage = prepared.storage
    fixes: list[_ClaimFix] = []
    if storage.kind == "pvc" and storage.claim_name:
        if storage.created_by_operator:  # the operator creates it: missing or Pending, provisioning is why
            fix = (
                "no StorageClass can provision it (no default StorageClass, or no provisioner): set "
                "spec.storage.createPVC.storageClassName, or use spec.storage.pvc with an existing "
                "bound claim"
                if not storage.create_storage_class
                else f"StorageClass {storage.create_storage_class!r} has not provisioned it: check that the "
                "class exists and its provisioner runs, or use spec.storage.pvc with an existing bound claim"
            )
            fixes.append(_ClaimFix(storage.claim_name, fix, fix))
        else:
            fixes.append(
                _ClaimFix(
                    storage.claim_name,
                    "bind it to a PersistentVolume (or give it a StorageClass that provisions one), or fix "
                    "spec.storage.pvc.claimName",
                    # the access mode advice is spec.storage.createPVC.accessMode's (api/engine.py)
                    f"create PersistentVolumeClaim {storage.claim_name} in this namespace (ReadWriteMany "
                    "when serving replicas run on several nodes), or fix spec.storage.pvc.claimName",
                )
            )
    source = prepared.spec.model.source
    if source.startswith("pvc://"):
        model_claim = source[len("pvc://") :].split("/", 1)[0]
        fixes.append(
            _ClaimFix(
                model_claim,
                "it holds the model (spec.model.source): bind it or fix the source",
                f"it holds the model (spec.model.source): create PersistentVolumeClaim {model_claim} with "
                "the model on it, or fix the source",
            )
        )
    return fixes


def _pvc_hint(prepared: PreparedEngine, scheduler_message: str, observed: Mapping[str, ClaimState]) -> str:
    fixes = _claim_fixes(prepared)
    seen = [
        (f, observed[f.claim]) for f in fixes if f.claim in observed and observed[f.claim].phase != "Bound"
    ]
    if seen:
        return "; ".join(
            f"PersistentVolumeClaim {f.claim} {_state_text(state)}: "
            f"{f.missing if state.phase is None else f.unbound}"
            for f, state in seen
        )
    missing = "not found" in scheduler_message.lower()
    named = [f for f in fixes if f'"{f.claim}"' in scheduler_message] or fixes
    if not named:
        return "a PersistentVolumeClaim the builder pod mounts is not usable"
    if missing:
        return "; ".join(f"PersistentVolumeClaim {f.claim} does not exist: {f.missing}" for f in named)
    return "; ".join(f"PersistentVolumeClaim {f.claim} is Pending (not bound): {f.unbound}" for f in named)


def _state_text(state: ClaimState) -> str:
    """``does not exist`` or ``is <phase>`` with the newest Event's reason and message."""
    if state.phase is None:
        return "does not exist"
    if state.event_reason:
        why = f"{state.event_reason}: {state.event_message}" if state.event_message else state.event_reason
        return f"is {state.phase} ({why})"
    return f"is {state.phase} (no Event on it says why)"
