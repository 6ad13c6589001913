"""kopf's annotation diff-base storage without the deep copy of what it throws away.

**What kopf does** (kopf 1.45.2, ``kopf/_cogs/configs/diffbase.py`` ``DiffBaseStorage.build``): for
every watch event of a resource with change handlers (LLMEngine, LLMDeployment), the processing of
the event (``kopf/_core/reactor/processing.py`` ``_detect_causes``) builds the object's "essence" to
compare with the last-handled one: ``copy.deepcopy(dict(body))`` of the **whole** object, then it
deletes ``apiVersion``, ``kind``, ``metadata`` and ``status`` from the copy and picks back
``metadata.labels``, ``metadata.annotations`` and the handlers' extra fields from the body. The
copy of ``status`` (an LLMEngine's capacity plan, conditions) and ``metadata.managedFields`` is made
only to be deleted: 9 % of an operator restart's samples at 200 + 200 (py-spy, benchmarks/scale.py,
every listed object resumed at once), and again on every status update during a burst.

**What this module changes**: :class:`LeanAnnotationsDiffBaseStorage` hands kopf's own ``build``
a shallow view of the body without ``status`` and ``metadata.managedFields`` (unless an extra field
of a handler reads them), so kopf deep-copies only what the essence keeps. The essence is kopf's,
field for field (tests/unit/test_kopf_diffbase.py compares both classes over bodies with extra
fields in spec, status and metadata); ``fetch`` and ``store`` are kopf's. Construction refuses any
kopf but the pinned one, like :mod:`trtllm_operator.handlers.readiness`: an upgrade re-reads the
upstream code above.
"""

from __future__ import annotations

import importlib.metadata
from collections.abc import Iterable, Mapping
from typing import Any, cast

import kopf
from kopf._cogs.structs import bodies, dicts

from trtllm_operator.handlers.readiness import KOPF_VERSION


def _top(field: dicts.FieldSpec) -> tuple[str, ...]:
    """The first two keys of a field path (``"status.x.y"`` → ``("status", "x")``)."""
    return tuple(dicts.parse_field(field)[:2])


class LeanAnnotationsDiffBaseStorage(kopf.AnnotationsDiffBaseStorage):
    """kopf's ``AnnotationsDiffBaseStorage`` whose :meth:`build` copies only the kept stanzas.

    Raises :class:`RuntimeError` when the installed kopf is not
    :data:`~trtllm_operator.handlers.readiness.KOPF_VERSION`."""

    def __init__(self, **kwargs: Any) -> None:
        installed = importlib.metadata.version("kopf")
        if installed != KOPF_VERSION:
            raise RuntimeError(
                f"trtllm_operator.handlers.diffbase narrows kopf {KOPF_VERSION}'s DiffBaseStorage.build, "
                f"but kopf {installed} is installed: re-read kopf's diffbase.py and update it"
            )
        super().__init__(**kwargs)

    def build(
        self,
        *,
        body: bodies.Body,
        extra_fields: Iterable[dicts.FieldSpec] | None = None,
    ) -> bodies.BodyEssence:
        extra = list(extra_fields or [])
        tops = {_top(f) for f in extra}  # () for a field of None: the whole body
        keep_status = any(t[:1] in ((), ("status",)) for t in tops)
        keep_managed = any(t in ((), ("metadata",), ("metadata", "managedFields")) for t in tops)
        lean: dict[str, Any] = {k: v for k, v in body.items() if k != "status" or keep_status}
        meta = body.get("metadata")
        if isinstance(meta, Mapping) and "managedFields" in meta and not keep_managed:
            lean["metadata"] = {k: v for k, v in meta.items() if k != "managedFields"}
        return super().build(body=bodies.Body(cast(bodies.RawBody, lean)), extra_fields=extra)
