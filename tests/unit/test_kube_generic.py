"""Issue #20 (operator memory): :class:`~trtllm_operator.kube.client.Kube` talks to the API server
through the kubernetes client's generic calls (``ApiClient.param_serialize`` + ``call_api``,
kubernetes-client/python 37.0.1), never through the typed API classes (``CoreV1Api`` …) and their
models, which cost the operator ≈ 96 MiB of resident memory before it handled any object
(benchmarks/RESULTS.md, "What holds the memory").

* The guard: importing what ``trtllm-operator run`` imports, and then using every request the
  operator makes, loads no ``kubernetes.client.api.*`` module and no model module kopf does not
  load itself (kopf imports ``V1ObjectMeta`` and ``V1OwnerReference``).
* The behaviour: each request is byte-for-byte the request of the typed method it replaces — method,
  path (quoting included), query, ``Accept``, ``Content-Type`` (merge patch, JSON patch, the
  strategic merge patch ``rest.py`` turns a non-list JSON patch into), ``Authorization``, body
  (``DeleteOptions`` preconditions included) — the answer is the same dict, and errors raise the
  same ``ApiException`` subclass with the same status and body. Both sides run against
  tests/support/apistub.py, which records what arrives.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException, ConflictException
from support.apistub import StubServer, stub_server

from trtllm_operator.kube.client import (
    CONFIG_MAP,
    CRD,
    DEPLOYMENT,
    JOB,
    JSON_PATCH,
    LLM_DEPLOYMENT,
    LLM_ENGINE,
    LWS,
    MERGE_PATCH,
    METADATA_ONLY,
    NODE,
    POD,
    REPLICA_SET,
    SECRET,
    SERVICE,
    Kube,
)
from trtllm_operator.kube.metrics_auth import MetricsAuthorizer

TESTS = Path(__file__).resolve().parents[1]
FM = "trtllm-operator"
G, V = LLM_DEPLOYMENT.group, LLM_DEPLOYMENT.version
OBJECT = {
    "apiVersion": "v1",
    "kind": "ConfigMap",
    "metadata": {"name": "a b", "namespace": "ns", "resourceVersion": "7", "labels": {"x": "y"}},
}
LIST = {"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": "9"}, "items": [OBJECT]}
#: An apps/v1 object: the typed models refuse one without the spec fields they require.
APPS = {**OBJECT, "apiVersion": "apps/v1", "spec": {"selector": {"matchLabels": {"a": "b"}}, "template": {}}}
CRD_OBJECT = {
    **OBJECT,
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "spec": {"group": "y.z", "names": {"kind": "X", "plural": "x"}, "scope": "Namespaced", "versions": []},
}

GUARD = """
import json, sys
TYPED = ("kubernetes.client.api.", "kubernetes.client.models.")
def typed():
    return {m for m in sys.modules if m.startswith(TYPED)}
import kopf
kopf_own = typed()
import trtllm_operator.cli, trtllm_operator.commands.run, trtllm_operator.handlers
import trtllm_operator.kube.metrics_tls, trtllm_operator.metrics.operator_metrics
from support.apistub import stub_server
from trtllm_operator.handlers import deployment, plumbing
from trtllm_operator.kube.client import *
from trtllm_operator.kube.metrics_auth import MetricsAuthorizer
def attempt(call):  # what is imported matters here, not the answer (the other tests check it)
    try:
        call()
    except Exception:
        pass
with stub_server() as stub:
    kube = Kube(stub.api_client())
    stub.answer = (200, {"kind": "PartialObjectMetadata", "metadata": {"name": "a"}, "items": [],
                         "status": {"authenticated": True, "user": {"username": "u"}, "allowed": True}})
    attempt(lambda: kube.get(CONFIG_MAP, "ns", "a"))
    attempt(lambda: kube.get(LLM_DEPLOYMENT, "ns", "a", subresource="status"))
    attempt(lambda: kube.get_metadata(SECRET, "ns", "a"))
    attempt(lambda: kube.list(JOB, None, label_selector="a=b"))
    attempt(lambda: kube.list(LLM_ENGINE, "ns"))
    attempt(lambda: kube.create(SERVICE, "ns", {"metadata": {"name": "a"}}))
    attempt(lambda: kube.create_or_get(LWS, "ns", {"metadata": {"name": "a"}}))
    attempt(lambda: kube.patch(DEPLOYMENT, "ns", "a", {"spec": {}}))
    attempt(lambda: kube.patch(JOB, "ns", "a", [{"op": "remove", "path": "/x"}], content_type=JSON_PATCH))
    attempt(lambda: kube.patch(LLM_DEPLOYMENT, "ns", "a", {"status": {}}, subresource="status"))
    attempt(lambda: kube.delete(CONFIG_MAP, "ns", "a", preconditions={"uid": "u"}))
    attempt(lambda: plumbing.node_gpus_of(kube, ["H100"], 8))
    attempt(lambda: deployment.lws_installed(kube))
    attempt(lambda: MetricsAuthorizer(kube.api_client).check("Bearer x", "/metrics", "GET"))
    stub.answer = (200, b"log")
    attempt(lambda: kube.pod_log("ns", "a"))
print(json.dumps(sorted(typed() - kopf_own)))
"""


def test_the_operator_loads_no_typed_api_class_or_model() -> None:
    # Fails on the typed Kube: kube/client.py's _API_CLASSES loaded CoreV1Api & co. at import.
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")])}
    out = subprocess.run(
        [sys.executable, "-c", GUARD], capture_output=True, text=True, env=env, check=False, timeout=300
    )
    assert out.returncode == 0, out.stderr
    loaded = json.loads(out.stdout.strip().splitlines()[-1])
    assert loaded == [], f"the operator loaded typed kubernetes client modules: {loaded}"


@pytest.fixture(scope="module")
def stub() -> Iterator[StubServer]:
    with stub_server() as server:
        yield server


Typed = Callable[[client.ApiClient], Any]
Generic = Callable[[Kube], Any]
DELETE_OPTIONS = client.V1DeleteOptions(
    propagation_policy="Background", preconditions=client.V1Preconditions(uid="u1", resource_version="7")
)

#: (what, the typed method's call as the operator made it before, Kube's call, the answer).
CASES: list[tuple[str, Typed, Generic, Any]] = [
    (
        "get core",
        lambda a: client.CoreV1Api(a).read_namespaced_config_map("a b", "ns"),
        lambda k: k.get(CONFIG_MAP, "ns", "a b"),
        OBJECT,
    ),
    (
        "get custom status",
        lambda a: client.CustomObjectsApi(a).get_namespaced_custom_object_status(
            G, V, "ns", "llmdeployments", "a"
        ),
        lambda k: k.get(LLM_DEPLOYMENT, "ns", "a", subresource="status"),
        OBJECT,
    ),
    (
        "get cluster-scoped",
        lambda a: client.ApiextensionsV1Api(a).read_custom_resource_definition("x.y.z"),
        lambda k: k.get(CRD, None, "x.y.z"),
        {
            **OBJECT,
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "spec": {
                "group": "y.z",
                "names": {"kind": "X", "plural": "x"},
                "scope": "Namespaced",
                "versions": [],
            },
        },
    ),
    (
        "list all namespaces",
        lambda a: client.BatchV1Api(a).list_job_for_all_namespaces(
            label_selector="a=b,c in (d)", field_selector="metadata.name=x"
        ),
        lambda k: k.list(JOB, None, label_selector="a=b,c in (d)", field_selector="metadata.name=x"),
        LIST,
    ),
    (
        "list namespaced",
        lambda a: client.AppsV1Api(a).list_namespaced_replica_set("ns", label_selector="a=b"),
        lambda k: k.list(REPLICA_SET, "ns", label_selector="a=b"),
        {**LIST, "items": [APPS]},
    ),
    (
        "list custom",
        lambda a: client.CustomObjectsApi(a).list_namespaced_custom_object(G, V, "ns", "llmengines"),
        lambda k: k.list(LLM_ENGINE, "ns"),
        LIST,
    ),
    (
        "list nodes",
        lambda a: client.CoreV1Api(a).list_node(label_selector="nvidia.com/gpu.product=H100"),
        lambda k: k.list(NODE, None, label_selector="nvidia.com/gpu.product=H100"),
        LIST,
    ),
    (
        "create core",
        lambda a: client.CoreV1Api(a).create_namespaced_service(
            "ns", {"metadata": {"name": "s"}}, field_manager=FM
        ),
        lambda k: k.create(SERVICE, "ns", {"metadata": {"name": "s"}}),
        OBJECT,
    ),
    (
        "create custom",
        lambda a: client.CustomObjectsApi(a).create_namespaced_custom_object(
            LWS.group, LWS.version, "ns", LWS.plural, {"metadata": {"name": "s"}}, field_manager=FM
        ),
        lambda k: k.create(LWS, "ns", {"metadata": {"name": "s"}}),
        OBJECT,
    ),
    (
        "merge patch with a resourceVersion precondition",
        lambda a: client.AppsV1Api(a).patch_namespaced_deployment(
            "d",
            "ns",
            {"metadata": {"resourceVersion": "7"}, "spec": {"replicas": 2}},
            field_manager=FM,
            _content_type=MERGE_PATCH,
        ),
        lambda k: k.patch(
            DEPLOYMENT, "ns", "d", {"metadata": {"resourceVersion": "7"}, "spec": {"replicas": 2}}
        ),
        APPS,
    ),
    (
        "JSON patch",
        lambda a: client.BatchV1Api(a).patch_namespaced_job(
            "j", "ns", [{"op": "remove", "path": "/spec/x"}], field_manager=FM, _content_type=JSON_PATCH
        ),
        lambda k: k.patch(JOB, "ns", "j", [{"op": "remove", "path": "/spec/x"}], content_type=JSON_PATCH),
        OBJECT,
    ),
    (
        "JSON patch type, object body: strategic merge (rest.py)",
        lambda a: client.CoreV1Api(a).patch_namespaced_config_map(
            "c", "ns", {"data": {"k": "v"}}, field_manager=FM, _content_type=JSON_PATCH
        ),
        lambda k: k.patch(CONFIG_MAP, "ns", "c", {"data": {"k": "v"}}, content_type=JSON_PATCH),
        OBJECT,
    ),
    (
        "status subresource patch",
        lambda a: client.CustomObjectsApi(a).patch_namespaced_custom_object_status(
            G,
            V,
            "ns",
            "llmdeployments",
            "a",
            {"status": {"phase": "Ready"}},
            field_manager=FM,
            _content_type=MERGE_PATCH,
        ),
        lambda k: k.patch(LLM_DEPLOYMENT, "ns", "a", {"status": {"phase": "Ready"}}, subresource="status"),
        OBJECT,
    ),
    (
        "scale subresource patch",
        lambda a: client.CustomObjectsApi(a).patch_namespaced_custom_object_scale(
            G,
            V,
            "ns",
            "llmdeployments",
            "a",
            {"spec": {"replicas": 3}},
            field_manager=FM,
            _content_type=MERGE_PATCH,
        ),
        lambda k: k.patch(LLM_DEPLOYMENT, "ns", "a", {"spec": {"replicas": 3}}, subresource="scale"),
        OBJECT,
    ),
    (
        "delete core with preconditions",
        lambda a: client.CoreV1Api(a).delete_namespaced_config_map("c", "ns", body=DELETE_OPTIONS),
        lambda k: k.delete(CONFIG_MAP, "ns", "c", preconditions={"uid": "u1", "resourceVersion": "7"}),
        OBJECT,
    ),
    (
        "delete custom, foreground",
        lambda a: client.CustomObjectsApi(a).delete_namespaced_custom_object(
            G, V, "ns", "llmengines", "e", body=client.V1DeleteOptions(propagation_policy="Foreground")
        ),
        lambda k: k.delete(LLM_ENGINE, "ns", "e", propagation="Foreground"),
        OBJECT,
    ),
    (
        "metadata-only read",
        lambda a: client.CoreV1Api(a).read_namespaced_secret(
            "s", "ns", _headers={"Accept": METADATA_ONLY}, _preload_content=False
        ),
        lambda k: k.get_metadata(SECRET, "ns", "s"),
        {"kind": "PartialObjectMetadata", "metadata": {"name": "s", "labels": {"a": "b"}}},
    ),
    (
        "pod log",
        lambda a: client.CoreV1Api(a).read_namespaced_pod_log(
            "p", "ns", container="c", tail_lines=20, _request_timeout=5.0
        ),
        lambda k: k.pod_log("ns", "p", container="c"),
        b"line 1\nline 2\n",
    ),
]


@pytest.mark.parametrize(("typed", "generic", "answer"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_each_request_is_the_typed_methods_request(
    stub: StubServer, typed: Typed, generic: Generic, answer: Any
) -> None:
    api_client = stub.api_client()
    stub.answer = (200, answer)
    stub.take()
    before = typed(api_client)
    (sent_before,) = stub.take()
    after = generic(Kube(api_client, FM))
    (sent_after,) = stub.take()
    assert sent_after == sent_before
    if isinstance(answer, bytes):  # the pod log: text
        assert after == before
    elif after is not True:  # a delete answers True
        if isinstance(getattr(before, "data", None), bytes):  # the metadata-only read: the raw answer
            expected = json.loads(before.data)["metadata"]
        else:
            expected = api_client.sanitize_for_serialization(before)
            expected = expected.get("items", expected)
        assert after == expected


def test_the_metrics_authorizer_sends_the_typed_reviews(stub: StubServer) -> None:
    api_client = stub.api_client()
    answer = {
        "spec": {"token": "abc"},
        "status": {
            "authenticated": True,
            "allowed": True,
            "user": {"username": "u", "groups": ["g"], "extra": {}},
        },
    }
    stub.answer = (200, answer)
    stub.take()
    client.AuthenticationV1Api(api_client).create_token_review(
        client.V1TokenReview(spec=client.V1TokenReviewSpec(token="abc")), _request_timeout=10.0
    )
    client.AuthorizationV1Api(api_client).create_subject_access_review(
        client.V1SubjectAccessReview(
            spec=client.V1SubjectAccessReviewSpec(
                user="u",
                groups=["g"],
                extra={},
                non_resource_attributes=client.V1NonResourceAttributes(path="/metrics", verb="get"),
            )
        ),
        _request_timeout=10.0,
    )
    typed = stub.take()
    assert MetricsAuthorizer(api_client).check("Bearer abc", "/metrics", "GET") is None
    assert stub.take() == typed


@pytest.mark.parametrize("status", [404, 409, 422, 500])
def test_errors_raise_the_typed_clients_exception(stub: StubServer, status: int) -> None:
    api_client = stub.api_client()
    body = {"kind": "Status", "status": "Failure", "reason": "X", "code": status}
    stub.answer = (status, body)
    with pytest.raises(ApiException) as typed:
        client.CoreV1Api(api_client).create_namespaced_service(
            "ns", {"metadata": {"name": "s"}}, field_manager=FM
        )
    kube = Kube(api_client, FM)
    with pytest.raises(ApiException) as generic:
        kube.create(SERVICE, "ns", {"metadata": {"name": "s"}})
    assert type(generic.value) is type(typed.value)
    assert (generic.value.status, generic.value.reason, generic.value.body) == (
        typed.value.status,
        typed.value.reason,
        typed.value.body,
    )
    if status == 409:
        assert isinstance(generic.value, ConflictException)
    # a read answers None for 404 and raises the rest
    if status == 404:
        assert kube.get(POD, "ns", "p") is None
        assert kube.delete(POD, "ns", "p") is False
    else:
        with pytest.raises(type(typed.value)):
            kube.get(POD, "ns", "p")


def test_an_empty_answer_is_an_empty_object(stub: StubServer) -> None:
    stub.answer = (200, b"")
    assert Kube(stub.api_client(), FM).delete(CONFIG_MAP, "ns", "c") is True
