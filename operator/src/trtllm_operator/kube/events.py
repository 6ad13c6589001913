"""Kubernetes Events about the operator's objects (``kubectl describe`` shows them).

Events are ``core/v1`` Events with ``involvedObject`` pointing at the object, ``source.component``
and ``reportingComponent`` set to the operator's name. Posting is best effort: a failure is logged
and never fails a reconcile (an Event is a notification, the status is the contract).
Reasons are stable CamelCase strings; each controller lists its own in ``docs/operator.md``.
Messages pass :func:`engine_builder.redaction.redact` (Events are readable by anyone who can list
Events in the namespace).
"""

from __future__ import annotations

import datetime as dt
import logging
import socket
from collections.abc import Mapping
from typing import Any, Literal

from kubernetes.client.exceptions import ApiException

from engine_builder.redaction import redact
from trtllm_operator.api.wire import OPERATOR
from trtllm_operator.decide.conditions import rfc3339
from trtllm_operator.kube.client import EVENT, Kube

log = logging.getLogger(__name__)

#: Events' ``message`` is limited to 1 KiB by the API server's validation (core/v1 Event).
MAX_MESSAGE = 1024


def post_event(
    kube: Kube,
    obj: Mapping[str, Any],
    reason: str,
    message: str,
    *,
    type_: Literal["Normal", "Warning"] = "Normal",
    action: str | None = None,
    now: dt.datetime | None = None,
) -> None:
    """Post one Event about ``obj`` (a manifest with apiVersion, kind and metadata)."""
    meta = obj.get("metadata") or {}
    namespace = meta.get("namespace") or "default"
    stamp = rfc3339(now or dt.datetime.now(dt.UTC))
    body = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"generateName": f"{meta.get('name', 'object')}.", "namespace": namespace},
        "involvedObject": {
            "apiVersion": obj.get("apiVersion"),
            "kind": obj.get("kind"),
            "name": meta.get("name"),
            "namespace": namespace,
            "uid": meta.get("uid"),
        },
        "reason": reason,
        "message": redact(message)[:MAX_MESSAGE],
        "type": type_,
        "action": action or reason,
        "source": {"component": OPERATOR},
        "reportingComponent": OPERATOR,
        "reportingInstance": socket.gethostname()[:128],
        "firstTimestamp": stamp,
        "lastTimestamp": stamp,
        "count": 1,
    }
    try:
        kube.create(EVENT, namespace, body)
    except ApiException as exc:  # best effort
        log.warning("could not post event %s on %s/%s: %s", reason, namespace, meta.get("name"), exc.reason)
