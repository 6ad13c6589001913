"""The operator's log lines: text or JSON, keyed by the object's namespace/name, secrets redacted.

``trtllm-operator run`` calls :func:`configure_logging` with the settings ``log_format``
(``text`` | ``json``) and ``log_level``. One handler on the root logger formats every record —
the operator's own loggers, kopf's, the kubernetes client's.

Object keys. A record about one object carries its namespace and name:

* kopf's per-object logger (the ``logger`` kwarg of handlers, kopf's own "Handler … succeeded"
  lines) attaches ``k8s_ref`` (apiVersion, kind, name, uid, namespace);
* the operator's module loggers get them from :func:`object_context`, which the reconcile entry
  points enter (a context variable: each kopf handler thread has its own).

JSON lines (one object per line, keys sorted as below)::

    {"time": "2026-11-29T19:30:00.123Z", "level": "INFO", "logger": "trtllm_operator.handlers.engine",
     "message": "builder Job … created", "namespace": "team-a", "name": "llama-8b",
     "kind": "LLMEngine", "uid": "…", "exception": "Traceback …"}

``namespace``/``name``/``kind``/``uid`` are present when known; ``exception`` when the record has
one. Text lines: ``[time] logger [LEVEL] [namespace/name] message``.

Redaction (defence in depth: the operator never reads Secret values, but an exception message or a
third-party library might echo a header or an environment variable): :func:`redact`, from
:mod:`engine_builder.redaction` (the one redactor shared with status and Event writes and the
builder's termination message; it lists the forms it covers), replaces credentials with
``[REDACTED]`` in the message, in exception text and in every extra string field.
"""

from __future__ import annotations

import contextvars
import datetime as dt
import json
import logging
import re
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any, TextIO

# One redactor for logs, status, Events and the builder's termination message (its module lists the
# forms and their sources).
from engine_builder.redaction import redact

# ----------------------------------------------------------------------------- object context
_object: contextvars.ContextVar[Mapping[str, str] | None] = contextvars.ContextVar(
    "trtllm_operator_log_object", default=None
)


@contextmanager
def object_context(kind: str, namespace: str, name: str) -> Iterator[None]:
    """Key every log record made inside the block (same thread/task) with this object."""
    token = _object.set({"kind": kind, "namespace": namespace, "name": name})
    try:
        yield
    finally:
        _object.reset(token)


def object_of(record: logging.LogRecord) -> dict[str, str]:
    """kind/namespace/name/uid of the object a record is about (kopf's ``k8s_ref`` first, then
    :func:`object_context`); empty when the record is about no object."""
    ref = getattr(record, "k8s_ref", None)
    out: dict[str, str] = {}
    if isinstance(ref, Mapping) and ref.get("name"):
        for key in ("kind", "namespace", "name", "uid"):
            if ref.get(key):
                out[key] = str(ref[key])
        return out
    ctx = _object.get()
    return {k: v for k, v in (ctx or {}).items() if v}


# ----------------------------------------------------------------------------- formatters
#: LogRecord attributes that are not "extra" fields.
_STANDARD = set(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {
    "message",
    "asctime",
    "k8s_ref",
    "k8s_skip",
    "settings",
    "taskName",
}


def _jsonable(value: Any) -> Any:
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, int | float | bool) or value is None:
        return value
    return redact(str(value))


class JsonFormatter(logging.Formatter):
    """One JSON object per line (see the module docstring for the keys)."""

    def format(self, record: logging.LogRecord) -> str:
        stamp = dt.datetime.fromtimestamp(record.created, dt.UTC)
        out: dict[str, Any] = {
            "time": stamp.strftime("%Y-%m-%dT%H:%M:%S.") + f"{stamp.microsecond // 1000:03d}Z",
            "level": record.levelname,
            "logger": record.name,
            "message": redact(record.getMessage()),
        }
        out.update(object_of(record))
        for key, value in vars(record).items():
            if key not in _STANDARD and key not in out and not key.startswith("_"):
                out[key] = _jsonable(value)
        if record.exc_info:
            out["exception"] = redact(self.formatException(record.exc_info))
        elif record.exc_text:
            out["exception"] = redact(record.exc_text)
        return json.dumps(out, ensure_ascii=False, default=str)


class TextFormatter(logging.Formatter):
    """``[time] logger [LEVEL] [namespace/name] message`` (kopf's FULL format plus the object)."""

    def __init__(self) -> None:
        super().__init__("[%(asctime)s] %(name)-20.20s [%(levelname)-8.8s] %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        obj = object_of(record)
        if obj.get("name"):
            prefix = f"[{obj['namespace']}/{obj['name']}]" if obj.get("namespace") else f"[{obj['name']}]"
            record = logging.makeLogRecord(vars(record))
            record.msg, record.args = f"{prefix} {record.getMessage()}", None
        return redact(super().format(record))


class RedactingFormatter(logging.Formatter):
    """``%(message)s`` with :func:`redact` applied (for kopf's log-to-Event poster)."""

    def __init__(self) -> None:
        super().__init__("%(message)s")

    def format(self, record: logging.LogRecord) -> str:
        return redact(super().format(record))


def redact_kopf_events() -> int:
    """Give kopf's log-to-Event poster (the handler on ``kopf.objects`` that posts warnings as
    Events with reason ``Logging``) a redacting formatter; returns how many handlers it set.

    Event messages are readable by anyone who can list Events in the namespace, so they get the
    same redaction as log lines. Idempotent.
    """
    count = 0
    for handler in logging.getLogger("kopf.objects").handlers:
        if type(handler).__name__ == "K8sPoster":
            handler.setFormatter(RedactingFormatter())
            count += 1
    return count


class _OperatorHandler(logging.StreamHandler[TextIO]):
    """Marks the handler :func:`configure_logging` installs (replaced on a second call)."""


#: kopf's success line of a timer run (``kopf._core.actions.execution``: ``f"{handler} succeeded."``).
_TIMER_SUCCEEDED = re.compile(r"^Timer '[^']+' succeeded\.$")


class DemoteTimerSuccess(logging.Filter):
    """Turn kopf's ``Timer '…' succeeded.`` lines (INFO, one per tick per object: about once a
    second per building LLMEngine) into DEBUG records, and drop them below ``level``.

    Everything else passes unchanged — kopf's failure and retry lines of the same timers
    (``Timer '…' failed with an exception. Will retry.``) keep their WARNING/ERROR level, and
    create/update handlers' ``Handler '…' succeeded.`` (once per change) stays INFO.
    """

    def __init__(self, level: int | str = logging.INFO) -> None:
        super().__init__()
        self.level = logging.getLevelName(level) if isinstance(level, str) else level

    def filter(self, record: logging.LogRecord) -> bool:
        if (
            record.levelno == logging.INFO
            and record.name.startswith("kopf")
            and _TIMER_SUCCEEDED.match(record.getMessage())
        ):
            record.levelno, record.levelname = logging.DEBUG, "DEBUG"
        return record.levelno >= self.level


def configure_logging(log_format: str = "text", level: str = "INFO", stream: TextIO | None = None) -> None:
    """Send every log record to ``stream`` (stderr) in ``log_format`` (text | json) at ``level``.

    Replaces the stream handlers on the root logger (kopf's included) so each line is formatted
    once; ``kopf.objects`` keeps its Event-posting handler and propagates to the root. Idempotent.
    No record below ``level`` is written, whatever level a library gives its own logger; kopf's
    per-tick ``Timer '…' succeeded.`` lines count as DEBUG (:class:`DemoteTimerSuccess`).
    """
    if log_format not in ("text", "json"):
        raise ValueError(f"log_format: {log_format!r} is not one of text, json")
    handler = _OperatorHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter() if log_format == "json" else TextFormatter())
    # The handler enforces the level too: a library logger with its own lower level (setLevel
    # DEBUG) would otherwise reach the output below ``level``.
    handler.setLevel(level)
    handler.addFilter(DemoteTimerSuccess(level))
    root = logging.getLogger()
    for old in list(root.handlers):
        if isinstance(old, logging.StreamHandler):
            root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)
    # As kopf.configure: asyncio's internals only in debug mode.
    logging.getLogger("asyncio").propagate = level == "DEBUG"
    # The kubernetes client logs request and response bodies at DEBUG: never below INFO.
    logging.getLogger("kubernetes").setLevel(max(logging.INFO, logging.getLevelName(level)))
    logging.getLogger("urllib3").setLevel(logging.WARNING)
