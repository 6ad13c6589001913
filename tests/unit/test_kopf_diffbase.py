"""Issue #20: kopf's diff-base essence without deep-copying what it throws away
(handlers/diffbase.py ``LeanAnnotationsDiffBaseStorage``; kopf 1.45.2
``kopf/_cogs/configs/diffbase.py`` ``DiffBaseStorage.build`` deep-copies the whole object, status and
managedFields included, on every watch event of an LLMEngine or LLMDeployment)."""

from __future__ import annotations

import copy
from typing import Any

import kopf
import pytest
from kopf._cogs.structs import bodies
from support.kopf_settings import configured_settings

from trtllm_operator.api.wire import KOPF_ANNOTATION_PREFIX
from trtllm_operator.handlers.diffbase import LeanAnnotationsDiffBaseStorage


class _NoCopy:
    """A value that refuses to be deep-copied: where it sits, a deep copy fails the test."""

    def __deepcopy__(self, memo: Any) -> Any:
        raise AssertionError("deep-copied a stanza the essence drops")


def _body(status: Any, managed: Any) -> dict[str, Any]:
    last = '{"spec":{"replicas":1}}\n'
    return {
        "apiVersion": "llm.trtllm-operator.dev/v1alpha1",
        "kind": "LLMDeployment",
        "metadata": {
            "name": "d",
            "namespace": "ns",
            "uid": "u",
            "resourceVersion": "7",
            "labels": {"team": "a"},
            "annotations": {
                f"{KOPF_ANNOTATION_PREFIX}/last-handled-configuration": last,
                "kubectl.kubernetes.io/last-applied-configuration": "{}",
                "keep": "me",
            },
            "ownerReferences": [{"kind": "X", "name": "x", "uid": "o"}],
            "managedFields": managed,
        },
        "spec": {"replicas": 2, "engineRef": {"name": "e"}, "autoscaling": {"enabled": True}},
        "status": status,
    }


EXTRA_FIELDS: list[list[Any]] = [
    [],
    ["spec.autoscaling"],
    ["status.phase"],
    [("status", "conditions")],
    ["metadata.labels", "metadata.ownerReferences"],
    ["metadata.managedFields"],
    ["metadata"],
    ["status.absent.field", "spec.absent"],
]


@pytest.mark.parametrize("extra", EXTRA_FIELDS)
def test_the_essence_is_kopfs_field_for_field(extra: list[Any]) -> None:
    """kopf's own storage and the lean one build the same essence, whatever extra fields the handlers
    ask for (in spec, status, metadata, the whole body), and leave the body untouched."""
    status = {"phase": "Ready", "conditions": [{"type": "Ready", "status": "True"}], "plan": {"a": [1, 2]}}
    body = _body(status, [{"manager": "kubectl", "fieldsV1": {"f:spec": {}}}])
    before = copy.deepcopy(body)
    theirs = kopf.AnnotationsDiffBaseStorage(prefix=KOPF_ANNOTATION_PREFIX)
    ours = LeanAnnotationsDiffBaseStorage(prefix=KOPF_ANNOTATION_PREFIX)
    expected = theirs.build(body=bodies.Body(body), extra_fields=extra)
    assert ours.build(body=bodies.Body(body), extra_fields=extra) == expected
    assert body == before


def test_the_operators_diffbase_storage_copies_neither_status_nor_managed_fields() -> None:
    """The storage the operator configures (``startup.configure_kopf``) deep-copies only what the
    essence keeps. Failed before (kopf's ``AnnotationsDiffBaseStorage``: the whole body)."""
    settings = configured_settings()
    body = _body({"plan": _NoCopy()}, [{"manager": "kubelet", "fieldsV1": _NoCopy()}])
    essence = settings.persistence.diffbase_storage.build(body=bodies.Body(body))
    assert essence == {
        "metadata": {"labels": {"team": "a"}, "annotations": {"keep": "me"}},
        "spec": {"replicas": 2, "engineRef": {"name": "e"}, "autoscaling": {"enabled": True}},
    }


def test_the_storage_refuses_another_kopf(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("trtllm_operator.handlers.diffbase.importlib.metadata.version", lambda name: "1.46.0")
    with pytest.raises(RuntimeError, match=r"1\.45\.2"):
        LeanAnnotationsDiffBaseStorage(prefix=KOPF_ANNOTATION_PREFIX)
