"""Issue #20: the status write guarded by what the decision read (kube/status.py ``status_guard``),
and the JSON it is sent as (kube/client.py ``go_json``). Against the real API server:
tests/integration/test_engine_status.py."""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException
from support.apistub import stub_server

from trtllm_operator.api.wire import ANNOTATION_ALLOW_PARTIAL_ARTIFACT, ANNOTATION_COMPATIBLE_IMAGES
from trtllm_operator.kube.client import (
    JSON_PATCH,
    LLM_DEPLOYMENT,
    LLM_ENGINE,
    PATCH_NOT_APPLIED,
    Kube,
    ReadOnlyKube,
    Resource,
    WriteNeeded,
    go_json,
    is_guarded,
    is_patch_refused,
)
from trtllm_operator.kube.status import GUARDED_ATTEMPTS, guarded_status_patch, patch_status, status_guard
from trtllm_operator.metrics.operator_metrics import REGISTRY


def test_go_json_writes_what_gos_encoding_json_writes() -> None:
    """The bytes Go 1.26's ``json.NewEncoder(os.Stdout).Encode`` wrote for the same value (checked
    once with the Go toolchain; 20,000 random floats agreed too): sorted keys, no spaces, UTF-8 as
    it is, ``<``, ``>``, ``&``, U+2028 and control characters escaped, floats positional between
    1e-6 and 1e21 and ``e-7`` (not ``e-07``) below."""
    value = {
        "b": [1, 2.0, 0.1, 1e-5, 1e-7, 1.5e21, 1e16, -0.0, True, None],
        "a": 'a<b>&c — é \u2028 \b\f\n\x01"\\ \x7f',
    }
    expected = (
        '{"a":"a\\u003cb\\u003e\\u0026c — é \\u2028 \\b\\f\\n\\u0001\\"\\\\ \x7f",'
        '"b":[1,2,0.1,0.00001,1e-7,1.5e+21,10000000000000000,-0,true,null]}'
    )
    assert go_json(value) == expected.encode()
    assert json.loads(go_json(value)) == value  # and it reads back the same
    with pytest.raises(ValueError, match="no JSON form"):
        go_json(float("nan"))


def _deployment(annotations: dict[str, str] | None, status: dict[str, Any] | None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "chat", "namespace": "ns", "uid": "u1", "generation": 3}
    if annotations is not None:
        meta["annotations"] = annotations
    obj: dict[str, Any] = {"metadata": meta, "spec": {"replicas": 1}}
    if status is not None:
        obj["status"] = status
    return obj


def test_the_guard_tests_what_the_decision_reads_and_nothing_kopf_writes() -> None:
    """uid, generation, deletion, the honoured annotations (present: their value; absent: null, in
    an annotations map the copy has), the whole status — not kopf's annotations, labels, finalizers,
    resourceVersion."""
    status = {"phase": "Ready", "conditions": [{"type": "Ready", "status": "True"}]}
    obj = _deployment({ANNOTATION_COMPATIBLE_IMAGES: "img:1", "team": "a"}, status)
    ops = status_guard(LLM_DEPLOYMENT, obj)
    assert ops == [
        {"op": "test", "path": "/metadata/uid", "value": "u1"},
        {"op": "test", "path": "/metadata/generation", "value": 3},
        {"op": "test", "path": "/metadata/deletionTimestamp", "value": None},
        {
            "op": "test",
            "path": "/metadata/annotations/llm.trtllm-operator.dev~1compatible-runtime-images",
            "value": "img:1",
        },
        {
            "op": "test",
            "path": "/metadata/annotations/llm.trtllm-operator.dev~1allow-partial-artifact",
            "value": None,
        },
        {"op": "test", "path": "/status", "value": status},
    ]
    assert ANNOTATION_ALLOW_PARTIAL_ARTIFACT.replace("/", "~1") in ops[4]["path"]
    # Without an annotations map no annotation is tested: json-patch fails a test whose parent is
    # missing, and kopf's diff-base may have added the map by the time the write lands.
    bare = status_guard(LLM_DEPLOYMENT, _deployment(None, None))
    assert [op["path"] for op in bare] == [
        "/metadata/uid",
        "/metadata/generation",
        "/metadata/deletionTimestamp",
        "/status",
    ]
    assert bare[-1]["value"] is None
    # An LLMEngine's decision reads no annotation of its own.
    assert "annotations" not in json.dumps(status_guard(LLM_ENGINE, _deployment({"x": "y"}, None)))


def test_the_write_is_the_merge_patch_applied_to_the_status_tested() -> None:
    old = {"phase": "Progressing", "build": {"stage": "plan", "percent": 10}, "gone": "x"}
    ops = guarded_status_patch(
        LLM_DEPLOYMENT,
        _deployment({}, old),
        {"phase": "Ready", "build": {"percent": 50}, "gone": None, "no": None},
    )
    writes = [op for op in ops if op["op"] != "test"]
    assert writes == [
        {"op": "add", "path": "/status/phase", "value": "Ready"},
        {"op": "add", "path": "/status/build", "value": {"stage": "plan", "percent": 50}},
        {"op": "remove", "path": "/status/gone"},
    ]
    first = guarded_status_patch(LLM_DEPLOYMENT, _deployment({}, None), {"phase": "Pending", "no": None})
    assert first[-1] == {"op": "add", "path": "/status", "value": {"phase": "Pending"}}
    assert is_guarded(first, JSON_PATCH) and not is_guarded(first[-1:], JSON_PATCH)
    assert not is_guarded({"status": {}}, JSON_PATCH)


def _api_error(status: int, answer: dict[str, Any]) -> ApiException:
    exc = ApiException(status=status, reason="x")
    exc.body = json.dumps(answer)
    return exc


def test_a_refused_guard_is_told_from_an_invalid_status() -> None:
    """Both are 422 with reason Invalid; a patch that did not apply carries the generic message
    (k8s.io/apiserver v0.34.4 patch.go ``applyJSPatch``), a validation error names the object
    (the answer below is what the local API server sent for an unsupported ``status.phase``)."""
    refused = {
        "kind": "Status",
        "status": "Failure",
        "message": PATCH_NOT_APPLIED,
        "reason": "Invalid",
        "code": 422,
    }
    invalid = {
        "kind": "Status",
        "message": 'LLMEngine.llm.trtllm-operator.dev "shared" is invalid: [status.phase: Unsupported value]',
        "reason": "Invalid",
        "details": {"name": "shared", "kind": "LLMEngine"},
        "code": 422,
    }
    assert is_patch_refused(_api_error(422, refused))
    assert not is_patch_refused(_api_error(422, invalid))
    assert not is_patch_refused(_api_error(409, refused))
    assert not is_patch_refused(RuntimeError("x"))


#: The body the API server answers a JSON patch with when one of its ``test`` operations fails:
#: k8s.io/apiserver v0.34.4 ``pkg/endpoints/handlers/patch.go`` ``applyJSPatch`` wraps json-patch's
#: error (gopkg.in/evanphx/json-patch.v4 v4.12.0 ``patch.go`` ``Patch.test``: "testing value %s
#: failed") in ``errors.NewGenericServerResponse(422, "", schema.GroupResource{}, "", err.Error(), 0,
#: false)``; k8s.io/apimachinery v0.34.4 ``pkg/api/errors/errors.go`` gives it reason ``Invalid``, the
#: fixed message and no causes (``isUnexpectedResponse`` false: json-patch's text, the failed path
#: included, is dropped), so ``details`` is empty (every ``StatusDetails`` field is ``omitempty``)
#: and which test failed cannot be told from the answer.
TEST_FAILED_BODY = {
    "kind": "Status",
    "apiVersion": "v1",
    "metadata": {},
    "status": "Failure",
    "message": "the server rejected our request due to an error in our request",
    "reason": "Invalid",
    "details": {},
    "code": 422,
}


def _sample(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


def _counts(kind: str) -> tuple[float, float, float]:
    """(refusals, fallbacks, 422 patch errors) of ``kind`` so far: the registry is process-wide."""
    return (
        _sample("trtllm_operator_status_write_refusals_total", kind=kind),
        _sample("trtllm_operator_status_write_fallbacks_total", kind=kind),
        _sample("trtllm_operator_api_errors_total", verb="patch", code="422"),
    )


def test_a_refused_guarded_status_write_is_counted_as_a_refusal_not_an_api_error() -> None:
    """Issue #20 (trial 38 F10): the 422 of a failed guard is an answer (not in api_errors_total) and
    was counted nowhere. Failed before: no ``status_write_refusals`` counter."""
    assert is_patch_refused(_api_error(422, TEST_FAILED_BODY))
    obj = _deployment({}, {"phase": "Pending"})
    guarded = guarded_status_patch(LLM_DEPLOYMENT, obj, {"phase": "Ready"})
    with stub_server() as stub:
        kube = Kube(stub.api_client())
        stub.answer = (422, TEST_FAILED_BODY)
        before = _counts("LLMDeployment")
        with pytest.raises(ApiException) as err:
            kube.patch(LLM_DEPLOYMENT, "ns", "chat", guarded, subresource="status", content_type=JSON_PATCH)
        assert err.value.status == 422
        assert _counts("LLMDeployment") == (before[0] + 1, before[1], before[2])

        # The reconcile's read-only client (plumbing.cache_first): the same refusal, counted once.
        probe = ReadOnlyKube(kube, (LLM_DEPLOYMENT, "ns", "chat"), {**obj, "metadata": {**obj["metadata"]}})
        with pytest.raises(WriteNeeded):
            probe.patch(LLM_DEPLOYMENT, "ns", "chat", guarded, subresource="status", content_type=JSON_PATCH)
        assert _counts("LLMDeployment") == (before[0] + 2, before[1], before[2])

        # Not a guarded status write: a JSON patch of the object, or an invalid status (422 that names
        # the object) — neither is a refusal.
        plain = [{"op": "test", "path": "/spec/replicas", "value": 1}]
        with pytest.raises(ApiException):
            kube.patch(LLM_DEPLOYMENT, "ns", "chat", plain, content_type=JSON_PATCH)
        invalid = 'LLMDeployment "chat" is invalid: [status.phase]'
        stub.answer = (422, {**TEST_FAILED_BODY, "message": invalid})
        with pytest.raises(ApiException):
            kube.patch(LLM_DEPLOYMENT, "ns", "chat", guarded, subresource="status", content_type=JSON_PATCH)
        assert _counts("LLMDeployment") == (before[0] + 2, before[1], before[2] + 1)


class ScriptedKube(Kube):
    """A :class:`Kube` whose object reads return ``obj`` and whose PATCHes answer the next of
    ``answers`` (an exception to raise, or the object to return) through the real :meth:`Kube.patch`."""

    def __init__(self, obj: dict[str, Any], answers: list[ApiException | dict[str, Any]]) -> None:
        super().__init__(client.ApiClient(client.Configuration()))
        self.obj, self.answers = obj, answers
        self.sent: list[Any] = []

    def get(self, res: Resource, namespace: str | None, name: str, **kw: Any) -> dict[str, Any] | None:
        return self.obj

    def _patch(self, res: Resource, namespace: str, name: str, body: Any, **kw: Any) -> dict[str, Any]:
        self.sent.append(body)
        answer = self.answers.pop(0)
        if isinstance(answer, ApiException):
            raise answer
        return answer


def test_the_fallback_to_the_merge_patch_is_counted_once_per_write() -> None:
    """After :data:`GUARDED_ATTEMPTS` refusals the write is a merge patch conditional on
    resourceVersion: two refusals and one fallback counted, for LLMEngine. A write whose second
    guarded attempt lands counts one refusal and no fallback. Failed before: no counters."""
    obj = {"metadata": {"name": "e", "uid": "u1", "generation": 1, "resourceVersion": "5"}, "status": {}}
    before = _counts("LLMEngine")
    refused = [_api_error(422, TEST_FAILED_BODY) for _ in range(GUARDED_ATTEMPTS)]
    conflict = _api_error(409, {"kind": "Status", "reason": "Conflict", "code": 409})
    kube = ScriptedKube(obj, [*refused, conflict, obj])
    assert patch_status(kube, LLM_ENGINE, "ns", "e", lambda o: {"phase": "Ready"}) is obj
    assert [isinstance(body, list) for body in kube.sent] == [True] * GUARDED_ATTEMPTS + [False, False]
    assert _counts("LLMEngine") == (before[0] + GUARDED_ATTEMPTS, before[1] + 1, before[2])

    kube = ScriptedKube(obj, [_api_error(422, TEST_FAILED_BODY), obj])
    assert patch_status(kube, LLM_ENGINE, "ns", "e", lambda o: {"phase": "Ready"}) is obj
    assert _counts("LLMEngine") == (before[0] + GUARDED_ATTEMPTS + 1, before[1] + 1, before[2])
