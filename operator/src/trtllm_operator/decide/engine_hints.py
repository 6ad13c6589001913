"""What to do about an unschedulable builder pod: hints from the scheduler's message. Pure.

The scheduler says *that* a pod does not fit (``0/5 nodes are available: …``); the hint says which
field of the LLMEngine fixes it — the claims the builder mounts and why they cannot be used, or
the GPU request (:func:`trtllm_operator.api.engine.builder_gpus`, the number the builder Job
requests) and the node label it needs.
"""

from __future__ import annotations

from trtllm_operator.api.engine import builder_gpus
from trtllm_operator.api.wire import GPU_PRODUCT_LABEL, GPU_RESOURCE
from trtllm_operator.decide.engine_spec import PreparedEngine


def unschedulable_hint(prepared: PreparedEngine, scheduler_message: str) -> str:
    """What to do about an unschedulable builder pod, from the scheduler's ``message`` ("" if none).

    About PersistentVolumeClaims ("unbound immediate PersistentVolumeClaims", ``persistentvolumeclaim
    "x" not found``): the claims the builder mounts (``spec.storage``, a ``pvc://`` model source),
    why they cannot be used and which field fixes it. About GPUs or node placement (``nvidia.com/gpu``,
    node affinity/selector, taints): the GPU request and the node label it needs. Anything else
    (e.g. ``Insufficient cpu``): no hint, the scheduler's message says it.
    """
    text = scheduler_message.lower()
    if "persistentvolumeclaim" in text:
        return f" ({_pvc_hint(prepared, scheduler_message)})"
    if any(w in text for w in (GPU_RESOURCE, "affinity", "selector", "taint")):
        return (
            f" (needs {_gpu_request_text(prepared)} on a node labelled "
            f"{GPU_PRODUCT_LABEL}={prepared.gpu.product})"
        )
    return ""


def _pvc_hint(prepared: PreparedEngine, scheduler_message: str) -> str:
    storage = prepared.storage
    claims: list[tuple[str, str]] = []  # (claim, the fix)
    if storage.kind == "pvc" and storage.claim_name:
        if storage.created_by_operator:
            fix = (
                "no StorageClass can provision it (no default StorageClass, or no provisioner): set "
                "spec.storage.createPVC.storageClassName, or use spec.storage.pvc with an existing "
                "bound claim"
                if not storage.create_storage_class
                else f"StorageClass {storage.create_storage_class!r} has not provisioned it: check that the "
                "class exists and its provisioner runs, or use spec.storage.pvc with an existing bound claim"
            )
            claims.append((storage.claim_name, fix))
        else:
            claims.append(
                (
                    storage.claim_name,
                    "bind it to a PersistentVolume (or give it a StorageClass that provisions one), or fix "
                    "spec.storage.pvc.claimName",
                )
            )
    source = prepared.spec.model.source
    if source.startswith("pvc://"):
        model_claim = source[len("pvc://") :].split("/", 1)[0]
        claims.append((model_claim, "it holds the model (spec.model.source): bind it or fix the source"))
    missing = "not found" in scheduler_message.lower()
    named = [(c, f) for c, f in claims if f'"{c}"' in scheduler_message] or claims
    if not named:
        return "a PersistentVolumeClaim the builder pod mounts is not usable"
    state = "does not exist" if missing else "is Pending (not bound)"
    return "; ".join(f"PersistentVolumeClaim {c} {state}: {f}" for c, f in named)


def _gpu_request_text(prepared: PreparedEngine) -> str:
    return f"{builder_gpus(prepared.spec)} {GPU_RESOURCE}"
