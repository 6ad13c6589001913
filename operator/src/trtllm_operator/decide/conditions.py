"""Standard ``metav1.Condition`` bookkeeping, pure.

Kubernetes API conventions: a condition list is keyed by ``type``; ``lastTransitionTime`` changes
only when ``status`` changes (a new reason or message alone keeps the old time), and
``observedGeneration`` says which spec generation the condition describes. Several writers (the
LLMDeployment controller, the autoscaler) own different condition types on the same object;
:func:`merge_conditions` touches only the types it is given, so writers never erase each other's.

Conditions are plain dicts in the API's camelCase shape::

    {"type": "Ready", "status": "True"|"False"|"Unknown", "reason": "CamelCase",
     "message": "...", "lastTransitionTime": "2026-11-29T19:00:00Z", "observedGeneration": 3}
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

Condition = dict[str, Any]


def rfc3339(now: dt.datetime) -> str:
    """``now`` as the API server's timestamp format (UTC, seconds, trailing ``Z``)."""
    return now.astimezone(dt.UTC).replace(microsecond=0).strftime("%Y-%m-%dT%H:%M:%SZ")


def condition(
    type_: str,
    status: bool | str,
    reason: str,
    message: str = "",
    *,
    observed_generation: int | None = None,
) -> Condition:
    """A condition without ``lastTransitionTime`` (filled in by :func:`merge_conditions`)."""
    if isinstance(status, bool):
        status = "True" if status else "False"
    if status not in ("True", "False", "Unknown"):
        raise ValueError(f"condition {type_}: status must be True, False or Unknown, not {status!r}")
    out: Condition = {"type": type_, "status": status, "reason": reason, "message": message}
    if observed_generation is not None:
        out["observedGeneration"] = observed_generation
    return out


def merge_conditions(
    existing: Sequence[Mapping[str, Any]] | None,
    updates: Iterable[Mapping[str, Any]],
    now: dt.datetime,
) -> list[Condition]:
    """``existing`` with ``updates`` applied by ``type``; other types are kept untouched, in order.

    ``lastTransitionTime`` is kept from the existing condition when ``status`` is unchanged, set to
    ``now`` otherwise (or when the update carries its own time, that one). New types are appended.
    """
    merged: list[Condition] = [dict(c) for c in existing or ()]
    index = {c.get("type"): i for i, c in enumerate(merged)}
    for update in updates:
        new = dict(update)
        old = merged[index[new["type"]]] if new["type"] in index else None
        if "lastTransitionTime" not in new:
            if old is not None and old.get("status") == new["status"] and old.get("lastTransitionTime"):
                new["lastTransitionTime"] = old["lastTransitionTime"]
            else:
                new["lastTransitionTime"] = rfc3339(now)
        if old is None:
            index[new["type"]] = len(merged)
            merged.append(new)
        else:
            merged[index[new["type"]]] = new
    return merged


def find(conditions: Sequence[Mapping[str, Any]] | None, type_: str) -> Mapping[str, Any] | None:
    """The condition of ``type_``, or None."""
    for c in conditions or ():
        if c.get("type") == type_:
            return c
    return None


def is_true(conditions: Sequence[Mapping[str, Any]] | None, type_: str) -> bool:
    """Whether the condition of ``type_`` exists with status ``True``."""
    c = find(conditions, type_)
    return c is not None and c.get("status") == "True"
