"""Status writes that several writers can share without losing each other's fields.

The LLMEngine controller, the LLMDeployment controller and the autoscaler all write ``status`` of
objects they share (conditions above all). A JSON merge patch replaces lists wholesale, so two
writers that each send "their" ``conditions`` list would erase each other's entries. Every status
write therefore goes through :func:`patch_status`:

1. read the object (fresh, from the API server),
2. let the caller compute a status patch from that snapshot (``mutate``),
3. send it as a merge patch on the ``status`` subresource **with** ``metadata.resourceVersion`` —
   the API server rejects it with 409 Conflict if anybody wrote in between,
4. on 409 start again from 1 (up to ``attempts`` times).

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
from trtllm_operator.decide.conditions import merge_conditions
from trtllm_operator.kube.client import Kube, Resource

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
    ``{}``: nothing to write). Returns the object after the write (or as read when nothing was
    written); None when the object does not exist. Raises :class:`StatusConflictError` after
    ``attempts`` consecutive 409s, other ``ApiException`` as they come.

    ``current``: the object as the caller already has it (e.g. from a watch cache), used instead of
    the first GET. The write still carries its ``resourceVersion``, so a stale copy costs a 409 and
    a fresh read, never a lost update; a stale copy that needs no write skips it, and the watch event
    of the newer version reconciles again.
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
        body = {"metadata": {"resourceVersion": obj["metadata"]["resourceVersion"]}, "status": dict(patch)}
        try:
            return kube.patch(res, namespace, name, body, subresource="status")
        except ApiException as exc:
            if exc.status != 409:
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
