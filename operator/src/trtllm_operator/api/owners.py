"""ownerReferences: how a child names its parent, and how the operator finds a child's parent. Pure.

Kubernetes' own helpers for this live in its API machinery
(``k8s.io/apimachinery/pkg/apis/meta/v1/controller_ref.go``: ``NewControllerRef``,
``GetControllerOf``, ``IsControlledBy``); these are the same rules over plain manifests (camelCase
dicts), the one place the operator builds or scans ``metadata.ownerReferences``:

* :func:`owner_reference` — the reference a child carries to its LLMEngine or LLMDeployment;
* :func:`is_owned_by` — any reference to this UID (the garbage collector keeps the child while one
  owner is left);
* :func:`is_controlled_by` — the ``controller: true`` reference is this UID (at most one per object);
* :func:`owner_names` — names of the owners of one of our kinds (watch events of children find
  the parents to reconcile).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from trtllm_operator.api.wire import GROUP


def owner_reference(
    api_version: str, kind: str, name: str, uid: str, *, controller: bool = True
) -> dict[str, Any]:
    """An ownerReference to ``kind/name`` (``uid``): ``controller`` for the parent that created
    the child; ``blockOwnerDeletion`` so foreground deletion of the parent waits for the child."""
    return {
        "apiVersion": api_version,
        "kind": kind,
        "name": name,
        "uid": uid,
        "controller": controller,
        "blockOwnerDeletion": True,
    }


def reference_to(owner: Mapping[str, Any], *, controller: bool = True) -> dict[str, Any]:
    """:func:`owner_reference` to the object ``owner`` (a manifest with apiVersion, kind, name, uid)."""
    meta = owner["metadata"]
    return owner_reference(
        owner["apiVersion"], owner["kind"], meta["name"], meta["uid"], controller=controller
    )


def _refs(obj: Mapping[str, Any] | None) -> list[Mapping[str, Any]]:
    return list(((obj or {}).get("metadata") or {}).get("ownerReferences") or [])


def is_owned_by(obj: Mapping[str, Any] | None, uid: str | None) -> bool:
    """Whether any ownerReference of ``obj`` points at ``uid``."""
    return bool(uid) and any(r.get("uid") == uid for r in _refs(obj))


def is_controlled_by(obj: Mapping[str, Any] | None, uid: str | None) -> bool:
    """Whether the controller reference of ``obj`` (``controller: true``) points at ``uid``."""
    return bool(uid) and any(r.get("controller") and r.get("uid") == uid for r in _refs(obj))


def owner_names(obj: Mapping[str, Any] | None, kind: str, *, group: str = GROUP) -> list[str]:
    """Names of the owners of ``obj`` of ``kind`` in API group ``group`` (any version), in order."""
    return [
        str(r.get("name"))
        for r in _refs(obj)
        if r.get("kind") == kind and str(r.get("apiVersion", "")).startswith(f"{group}/")
    ]
