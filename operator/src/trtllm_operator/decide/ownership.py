"""Which existing objects the operator may modify, adopt or trust. Pure.

Every child's name derives from its parent (docs/design.md), so anyone who may create objects in
the namespace can create one under that name first. The operator must not then act as a *confused
deputy*: patching, adopting or deleting an object someone else created (a user who may only create
LLMDeployments could otherwise rewrite — and through the garbage collector delete — any workload
of the same name), or trusting what such an object says (a forged cache entry or builder Job
could point an LLMEngine at an artifact the user never built).

Two rules, one per kind of child:

* **Controlled children** (a serving workload, its Service, PodDisruptionBudget, model-repository
  ConfigMap, HPA or ScaledObject; a builder Job and its build-spec ConfigMap): modified only when
  their controller ownerReference (``controller: true``, at most one per object — Kubernetes
  ``IsControlledBy``) carries the parent's UID, and never adopted: :func:`control_conflict`.
* **Shared records** that deliberately outlive their creator (engine cache entries, the artifact
  PVC under ``reclaimPolicy: Retain``, a builder Job another LLMEngine of the same key started):
  trusted only when they carry the operator's ``app.kubernetes.io/managed-by`` label, their
  component label and the full engine-key annotation (or engine label) they must have:
  :func:`marker_conflict`.

A refusal is a :class:`ChildConflict`; the controllers report it as ``Ready=False`` with reason
:data:`R_CHILD_CONFLICT` and stop that reconcile before writing any child.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from trtllm_operator.api.owners import controller_of, is_controlled_by
from trtllm_operator.decide.outcome import retry_note

#: Condition reason (``Ready=False``, ``Degraded=True``) and Event reason of a refused child.
R_CHILD_CONFLICT = "ChildConflict"


@dataclass(frozen=True)
class ChildConflict:
    """An object under a child's name that the operator does not control (or does not trust).

    ``kind``/``name``: the object; ``why``: what is wrong with it, in words.
    """

    kind: str
    name: str
    why: str

    def message(self, parent_kind: str, retry_seconds: float | None = None) -> str:
        """The condition message: what exists, why it is refused, the fix, and (``retry_seconds``:
        the parent controller's drift period) when the operator looks again."""
        text = (
            f"{self.kind} {self.name} already exists and {self.why}: the operator does not modify, "
            f"adopt or trust it, and stopped here. Delete or rename that {self.kind}, or give this "
            f"{parent_kind} another name"
        )
        if retry_seconds is None:
            return text
        return f"{text}; {retry_note(parent_kind, retry_seconds)}"


def control_conflict(live: Mapping[str, Any], kind: str, parent_uid: str) -> ChildConflict | None:
    """None when ``live`` is controlled by ``parent_uid``; else why not (see the module docstring).

    An object controlled by an earlier parent of the same name (deleted and re-created while the
    garbage collector had not yet removed its children) is a conflict too, which resolves itself
    once the garbage collector has done its work; the message says so.
    """
    if is_controlled_by(live, parent_uid):
        return None
    name = str((live.get("metadata") or {}).get("name", ""))
    ctrl = controller_of(live)
    if ctrl is None:
        return ChildConflict(kind, name, "has no controller ownerReference (someone else created it)")
    why = f"is controlled by {ctrl.get('kind')} {ctrl.get('name')} (uid {ctrl.get('uid')})"
    if (live.get("metadata") or {}).get("deletionTimestamp"):
        why += ", and is being deleted; this resolves itself once it is gone"
    elif ctrl.get("name") and ctrl.get("kind"):
        why += "; if that was a deleted object of this name, the garbage collector removes it shortly"
    return ChildConflict(kind, name, why)


def marker_conflict(
    live: Mapping[str, Any],
    kind: str,
    *,
    labels: Mapping[str, str],
    annotations: Mapping[str, str] | None = None,
) -> ChildConflict | None:
    """None when ``live`` carries every label and annotation given (exact values); else which one
    it lacks. For records the operator shares or keeps beyond one parent's life."""
    meta = live.get("metadata") or {}
    have_labels = meta.get("labels") or {}
    have_annotations = meta.get("annotations") or {}
    name = str(meta.get("name", ""))
    for key, want in labels.items():
        if have_labels.get(key) != want:
            return ChildConflict(kind, name, f"lacks the label {key}={want} the operator puts on its own")
    for key, want in (annotations or {}).items():
        if have_annotations.get(key) != want:
            return ChildConflict(
                kind, name, f"lacks the annotation {key}={want} the operator puts on its own"
            )
    return None
