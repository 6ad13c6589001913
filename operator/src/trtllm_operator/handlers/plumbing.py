"""What every controller does the same way around its pure decision: lock, apply children, write.

Both controllers reconcile in one shape — **observe → decide → act → write** (the LLMEngine
controller's ``_decide_and_act`` is the model): read the object and its world, ask a pure function
in ``decide/`` for an :class:`~trtllm_operator.decide.outcome.Outcome`, perform its actions
(children through :func:`apply_owned`), then :func:`write_outcome`. This module holds the pieces
that shape shares, so each exists once:

* :data:`OBJECT_LOCKS` — one per-object lock registry: reconciles of one object are serialised
  within the process (kopf may run a create handler, a timer and a watch-event handler of the same
  object on different threads);
* :func:`apply_owned` — create a child, or patch it when what the operator rendered for it changed;
  :func:`add_owner` — a second parent shares an existing child (a builder Job of the same key);
* :func:`write_outcome` — status and conditions through the optimistic-concurrency status writer,
  then the outcome's Events.

Designed so two planned changes stay inside :func:`apply_owned`: refusing to modify or adopt an
object the operator does not control (a controller ownerReference with the parent's UID; today
only ``owner_uid`` callers get that check) and reading the live object from a watch cache instead
of a GET per reconcile (today :meth:`~trtllm_operator.kube.client.Kube.create_or_get`, one call).
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Hashable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Literal

from kubernetes.client.exceptions import ApiException

from trtllm_operator.api.owners import is_owned_by
from trtllm_operator.api.wire import ANNOTATION_RENDERED_HASH
from trtllm_operator.decide.outcome import Outcome
from trtllm_operator.kube.client import Kube, Resource
from trtllm_operator.kube.events import post_event
from trtllm_operator.kube.status import update_conditions
from trtllm_operator.render.serving import content_hash


# ------------------------------------------------------------------------------ locks
class ObjectLocks:
    """A lock per key (e.g. ``(kind, namespace, name)``), created on first use and kept."""

    def __init__(self) -> None:
        self._locks: dict[Hashable, threading.Lock] = {}
        self._guard = threading.Lock()

    def lock(self, *key: Hashable) -> threading.Lock:
        """The lock of ``key`` (the same object for the same key, for the life of the process)."""
        with self._guard:
            return self._locks.setdefault(key, threading.Lock())

    @contextmanager
    def hold(self, *key: Hashable) -> Iterator[None]:
        """Hold the lock of ``key`` for the ``with`` block."""
        with self.lock(*key):
            yield


#: The operator's one per-object lock registry. Keys start with the controller's kind of work
#: (``"LLMEngine"``, ``"LLMDeployment"``, ``"benchmark"``, ``"advisor"``) so that controllers of
#: different concerns on the same object never wait for each other.
OBJECT_LOCKS = ObjectLocks()


# ------------------------------------------------------------------------------ children
def with_rendered_hash(manifest: Mapping[str, Any]) -> tuple[dict[str, Any], str]:
    """A deep copy of ``manifest`` annotated with the sha256 of its rendering
    (:data:`~trtllm_operator.api.wire.ANNOTATION_RENDERED_HASH`), and that hash."""
    body = copy.deepcopy(dict(manifest))
    digest = content_hash(body)
    body["metadata"].setdefault("annotations", {})[ANNOTATION_RENDERED_HASH] = digest
    return body, digest


Applied = Literal["created", "patched", "unchanged", "not_owned"]


@dataclass(frozen=True)
class ApplyResult:
    """What :func:`apply_owned` did (``result``) and the live object afterwards (as read when
    nothing was written)."""

    live: dict[str, Any]
    result: Applied


def apply_owned(
    kube: Kube, res: Resource, manifest: Mapping[str, Any], *, owner_uid: str | None = None
) -> ApplyResult:
    """Create the child ``manifest``, or merge-patch the live one when its rendered hash changed.

    The hash of the rendered manifest is kept in an annotation, so an unchanged rendering costs one
    GET and no write. ``spec.replicas`` is compared to the live object on its own: a scale through
    the parent's scale subresource reaches the child even when nothing else changed. The patch
    carries ``labels``, ``annotations``, ``ownerReferences`` and ``spec``.

    ``owner_uid``: when given, a live object without an ownerReference to that UID is not touched
    (``not_owned``: someone else's object under the child's name; the caller reports it).
    Raises ``ApiException`` from the API server.
    """
    namespace = manifest["metadata"]["namespace"]
    name = manifest["metadata"]["name"]
    body, digest = with_rendered_hash(manifest)
    live, created = kube.create_or_get(res, namespace, body)
    if created:
        return ApplyResult(live, "created")
    if owner_uid is not None and not is_owned_by(live, owner_uid):
        return ApplyResult(live, "not_owned")
    live_hash = (live["metadata"].get("annotations") or {}).get(ANNOTATION_RENDERED_HASH)
    if live_hash == digest:
        want = (body.get("spec") or {}).get("replicas")
        if want is None or (live.get("spec") or {}).get("replicas") == want:
            return ApplyResult(live, "unchanged")
        return ApplyResult(kube.patch(res, namespace, name, {"spec": {"replicas": want}}), "patched")
    patch: dict[str, Any] = {
        "metadata": {k: body["metadata"][k] for k in ("labels", "annotations", "ownerReferences")}
    }
    if "spec" in body:
        patch["spec"] = body["spec"]
    return ApplyResult(kube.patch(res, namespace, name, patch), "patched")


def add_owner(kube: Kube, res: Resource, namespace: str, name: str, reference: Mapping[str, Any]) -> bool:
    """Add ``reference`` (a non-controller ownerReference) to an existing object, unless one with
    its UID is there: a second parent shares the child, which then lives until every owner is gone.

    Conditional on the object's ``resourceVersion``: a concurrent change answers 409, which is left
    to the next reconcile (returns False, as for a missing object). Other ``ApiException`` raise.
    """
    obj = kube.get(res, namespace, name)
    if obj is None or is_owned_by(obj, reference.get("uid")):
        return False
    refs = [*(obj["metadata"].get("ownerReferences") or []), dict(reference)]
    body = {"metadata": {"resourceVersion": obj["metadata"]["resourceVersion"], "ownerReferences": refs}}
    try:
        kube.patch(res, namespace, name, body)
    except ApiException as exc:
        if exc.status != 409:
            raise
        return False
    return True


# ------------------------------------------------------------------------------ write
def write_outcome(
    kube: Kube,
    res: Resource,
    obj: Mapping[str, Any],
    outcome: Outcome[Any],
    *,
    status_extra: Mapping[str, Any] | None = None,
) -> None:
    """Write ``outcome`` for ``obj``: its ``status`` (plus ``status_extra``) and conditions through
    :func:`~trtllm_operator.kube.status.update_conditions` (merge by type, 409 retry, no write when
    nothing changes), then post each of its Events."""
    meta = obj["metadata"]
    update_conditions(
        kube,
        res,
        meta["namespace"],
        meta["name"],
        outcome.conditions,
        status={**outcome.status, **(status_extra or {})},
    )
    for event in outcome.all_events():
        post_event(kube, obj, event.reason, event.message, type_=event.type)
