"""Status writes that several writers can share without losing each other's fields.

The LLMEngine controller, the LLMDeployment controller and the autoscaler all write ``status`` of
objects they share (conditions above all). A JSON merge patch replaces lists wholesale, so two
writers that each send "their" ``conditions`` list would erase each other's entries. Every status
write therefore goes through :func:`patch_status`:

1. read the object (fresh, from the API server — or the copy the caller decided on),
2. let the caller compute a status patch from that snapshot (``mutate``),
3. send it as a JSON patch (RFC 6902) on the ``status`` subresource whose ``test`` operations
   check what the decision read of the object (:func:`status_guard`: ``uid``, ``generation``, no
   ``deletionTimestamp``, the annotations the kind's decision honours, the whole ``status``) — the
   API server refuses it (422) if any of that changed since the snapshot; a change of anything else
   (kopf's bookkeeping annotations, labels, finalizers) does not stand in its way,
4. on a refusal start again from 1 (up to ``attempts`` times); from the third attempt on, the
   write is a merge patch conditional on ``metadata.resourceVersion`` instead (409 when anything
   changed), so a guard that could never pass cannot loop.

:func:`update_conditions` is the common case: merge conditions by ``type`` (keeping
``lastTransitionTime`` when the status did not change, :mod:`trtllm_operator.decide.conditions`)
plus optional top-level status fields. Writes that would change nothing are skipped, so a
level-based reconcile that finds nothing to do costs one GET and no write. Every string of a status
patch passes :func:`engine_builder.redaction.redact_data` before it is compared and sent (builder
log tails and exception texts end up in messages; status is readable by anyone who can get the
object).
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from kubernetes.client.exceptions import ApiException

from engine_builder.redaction import redact_data
from trtllm_operator.api.wire import STATUS_INPUT_ANNOTATIONS
from trtllm_operator.decide.conditions import merge_conditions
from trtllm_operator.kube.client import JSON_PATCH, JsonPatch, Kube, Resource, is_patch_refused
from trtllm_operator.metrics.operator_metrics import STATUS_WRITE_FALLBACKS

log = logging.getLogger(__name__)

StatusMutation = Callable[[dict[str, Any]], Mapping[str, Any] | None]


class StatusConflictError(RuntimeError):
    """Every attempt of :func:`patch_status` met a 409: the object is written too often."""


def _subset_equal(patch: Mapping[str, Any], current: Mapping[str, Any]) -> bool:
    """Whether applying merge patch ``patch`` to ``current`` would leave it unchanged."""
    for key, value in patch.items():
        if value is None:
            if key in current:
                return False
        elif isinstance(value, Mapping):
            sub = current.get(key)
            if not isinstance(sub, Mapping) or not _subset_equal(value, sub):
                return False
        elif current.get(key) != value:
            return False
    return True


def _pointer(*keys: str) -> str:
    """An RFC 6901 JSON pointer: ``~`` → ``~0``, ``/`` → ``~1`` in each key."""
    return "".join("/" + k.replace("~", "~0").replace("/", "~1") for k in keys)


def _merged(target: Any, patch: Any) -> Any:
    """RFC 7386: ``patch`` (a JSON merge patch) applied to ``target``."""
    if not isinstance(patch, Mapping):
        return patch
    out = dict(target) if isinstance(target, Mapping) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = _merged(out.get(key), value)
    return out


def status_guard(res: Resource, obj: Mapping[str, Any]) -> JsonPatch:
    """The ``test`` operations that make a status write of ``obj`` land only on an object whose
    decision inputs are still those of ``obj``: ``metadata.uid`` (not a new object of the same
    name), ``metadata.generation`` (the spec: a custom resource's generation grows with every change
    outside ``metadata`` and ``status``, k8s.io/apiextensions-apiserver v0.34.4
    ``pkg/registry/customresource/strategy.go`` ``PrepareForUpdate``), ``metadata.deletionTimestamp``
    (still absent, or the same), each annotation of :data:`~trtllm_operator.api.wire.STATUS_INPUT_ANNOTATIONS`
    for ``res.kind``, and the whole ``status`` (the previous conditions every transition is decided
    from, and other writers' fields).

    A ``test`` whose value is ``null`` passes when the member is absent (gopkg.in/evanphx/json-patch.v4
    v4.12.0 ``patch.go`` ``Patch.test``: a missing key reads as nil, and a nil value matches it) but
    fails when its parent object is missing (``findObject`` returns nil: "test operation does not
    apply: is missing path"). So an annotation ``obj`` lacks is tested absent only when ``obj`` has
    an annotations map; an object without one (none set by the user, kopf's diff-base not written
    yet) may have one by the time the write lands — kopf's — and the absence of the annotation is
    then not tested: adding it is a change kopf hands to the update handler (kopf 1.45.2
    ``kopf/_cogs/configs/diffbase.py`` ``DiffBaseStorage.build``: the essence keeps
    ``metadata.annotations``), whose reconcile decides again on the object that has it — as it
    would for an annotation added just after the write."""
    meta = obj.get("metadata") or {}
    ops: JsonPatch = [{"op": "test", "path": "/metadata/uid", "value": meta.get("uid")}]
    if "generation" in meta:
        ops.append({"op": "test", "path": "/metadata/generation", "value": meta["generation"]})
    ops.append({"op": "test", "path": "/metadata/deletionTimestamp", "value": meta.get("deletionTimestamp")})
    annotations = meta.get("annotations")
    for key in STATUS_INPUT_ANNOTATIONS.get(res.kind, ()):
        if isinstance(annotations, Mapping):
            path = _pointer("metadata", "annotations", key)
            ops.append({"op": "test", "path": path, "value": annotations.get(key)})
    ops.append({"op": "test", "path": "/status", "value": obj.get("status")})
    return ops


def guarded_status_patch(res: Resource, obj: Mapping[str, Any], patch: Mapping[str, Any]) -> JsonPatch:
    """A JSON patch of the ``status`` subresource: :func:`status_guard` of ``obj``, then the merge
    patch ``patch`` applied to ``obj``'s status, one ``add`` (or ``remove``) per top-level field it
    changes — the whole status is tested first, so the result is what the merge patch would give."""
    ops = status_guard(res, obj)
    old = obj.get("status")
    if not isinstance(old, Mapping):
        ops.append({"op": "add", "path": "/status", "value": _merged({}, patch)})
        return ops
    new = _merged(old, patch)
    for key in patch:
        if key in new:
            ops.append({"op": "add", "path": _pointer("status", key), "value": new[key]})
        elif key in old:
            ops.append({"op": "remove", "path": _pointer("status", key)})
    return ops


#: Attempts of :func:`patch_status` sent as a guarded JSON patch; later ones are merge patches
#: conditional on ``resourceVersion``.
GUARDED_ATTEMPTS = 2


def patch_status(
    kube: Kube,
    res: Resource,
    namespace: str,
    name: str,
    mutate: StatusMutation,
    *,
    attempts: int = 8,
    current: Mapping[str, Any] | None = None,
) -> dict[str, Any] | None:
    """Read-compute-write ``status`` with an optimistic-concurrency retry loop.

    ``mutate(obj)`` gets the fresh object and returns a JSON merge patch for ``status`` (None or
    ``{}``: nothing to write); it must not change ``obj``, whose values the guard tests. Returns
    the object after the write (or as read when nothing was written); None when the object does not
    exist. Raises :class:`StatusConflictError` after ``attempts`` refused writes in a row, other
    ``ApiException`` as they come.

    The write is a JSON patch guarded by :func:`status_guard` of the copy ``mutate`` saw: it lands
    only if the object still has that copy's uid, generation, deletion state, honoured annotations
    and status — whatever else changed (kopf's diff-base annotation, which kopf 1.45.2 writes right
    after a handler, between the operator's read and its write). A refusal (a 422 with
    :data:`~trtllm_operator.kube.client.PATCH_NOT_APPLIED`: json-patch ``test failed``) reads the
    object again and asks ``mutate`` again. The first :data:`GUARDED_ATTEMPTS` attempts are guarded;
    the others are merge patches conditional on ``metadata.resourceVersion`` (409 on any change), so
    a guard that cannot pass on an unchanged object — a value the API server would write other than
    :func:`~trtllm_operator.kube.client.go_json` does — costs two refusals, never a loop. Each refusal
    counts in ``trtllm_operator_status_write_refusals_total`` (:meth:`Kube.patch`), each write that
    falls back to the merge patch once in ``trtllm_operator_status_write_fallbacks_total``, by kind.

    ``current``: the object as the caller already has it (e.g. from a watch cache), used instead of
    the first GET. The write is still guarded by it, so a stale copy costs a refusal and a fresh
    read, never a lost update; a stale copy that needs no write skips it, and the watch event of the
    newer version reconciles again.
    """
    for attempt in range(attempts):
        if attempt == 0 and current is not None:
            obj: dict[str, Any] | None = dict(current)
        else:
            obj = kube.get(res, namespace, name)
        if obj is None:
            return None
        patch = mutate(obj)
        if patch:  # status is readable by anyone who can get the object: one redactor for every write
            patch = redact_data(patch)
        if not patch or _subset_equal(patch, obj.get("status") or {}):
            return obj
        try:
            if attempt < GUARDED_ATTEMPTS:
                body = guarded_status_patch(res, obj, patch)
                return kube.patch(res, namespace, name, body, subresource="status", content_type=JSON_PATCH)
            merge = {
                "metadata": {"resourceVersion": obj["metadata"]["resourceVersion"]},
                "status": dict(patch),
            }
            if attempt == GUARDED_ATTEMPTS:  # once per write: the guarded attempts were all refused
                STATUS_WRITE_FALLBACKS.labels(kind=res.kind).inc()
            return kube.patch(res, namespace, name, merge, subresource="status")
        except ApiException as exc:
            if exc.status != 409 and not is_patch_refused(exc):
                raise
            log.debug("status of %s/%s changed under us (attempt %d), retrying", namespace, name, attempt + 1)
            time.sleep(min(0.05 * 2**attempt, 1.0))
    raise StatusConflictError(
        f"status of {res.kind} {namespace}/{name}: {attempts} conflicting writes in a row"
    )


def update_conditions(
    kube: Kube,
    res: Resource,
    namespace: str,
    name: str,
    conditions: Iterable[Mapping[str, Any]],
    *,
    status: Mapping[str, Any] | None = None,
    now: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC),
    current: Mapping[str, Any] | None = None,
    only_if: Callable[[Mapping[str, Any]], bool] | None = None,
) -> dict[str, Any] | None:
    """Merge ``conditions`` (by type) and the top-level ``status`` fields into the object's status.

    Condition types not listed are left as they are (another writer's). ``status`` is a merge patch
    (``None`` values delete keys); it must not contain ``conditions``. ``current``: as for
    :func:`patch_status`. ``only_if``: called with the object as read for each attempt; ``False``
    writes nothing (a writer whose decision no longer applies to the object, e.g. the built-in
    autoscaler after its mode changed).
    """
    updates = list(conditions)
    extra = dict(status or {})
    if "conditions" in extra:
        raise ValueError("pass conditions through the 'conditions' argument, not inside 'status'")

    def mutate(obj: dict[str, Any]) -> dict[str, Any]:
        if only_if is not None and not only_if(obj):
            return {}
        current = (obj.get("status") or {}).get("conditions") or []
        patch = dict(extra)
        merged = merge_conditions(current, updates, now())
        if merged != current:
            patch["conditions"] = merged
        return patch

    return patch_status(kube, res, namespace, name, mutate, current=current)
