"""kube.access: what ``run`` asks the API server before kopf starts (fresh-user trial 51 Y11).

The real API server's answers (RBAC, discovery, ServiceAccount tokens) are in
tests/integration/test_run_access.py; here the pure parts and the retry schedule, against the stub
server that records requests (tests/support/apistub.py)."""

from __future__ import annotations

import pytest
from support.apistub import stub_server

from trtllm_operator.kube.access import Access, AccessDeniedError, describe, wait_for_access, wanted

#: (group, version, name) → (plural, namespaced), as discovery would answer; "gone" is not served.
SERVED = {
    ("batch", "v1", "jobs"): ("jobs", True),
    ("", "v1", "Pod"): ("pods", True),  # a kind, as a kopf selector may name it
    ("", "v1", "nodes"): ("nodes", False),
}


def resolve(group: str, version: str, name: str) -> tuple[str, bool] | None:
    return SERVED.get((group, version, name))


def test_wanted_asks_list_and_watch_per_namespace_and_cluster_scoped_once() -> None:
    watched = [("batch", "v1", "jobs"), ("", "v1", "Pod"), ("", "v1", "nodes"), ("x.io", "v1", "gone")]
    got = wanted(watched, resolve, ["b", "a"])
    assert got == sorted(
        [Access("batch", "jobs", ns, verb) for ns in ("a", "b") for verb in ("list", "watch")]
        + [Access("", "pods", ns, verb) for ns in ("a", "b") for verb in ("list", "watch")]
        + [Access("", "nodes", "", verb) for verb in ("list", "watch")]
    )
    # cluster-wide: every resource once; no namespaces, which kopf 1.45.2 lists only for a namespaced
    # operator that scans (trial 53 #5: --all-namespaces asked for them)
    wide = wanted(watched, resolve, [])
    assert {(a.resource, a.namespace) for a in wide} == {("jobs", ""), ("pods", ""), ("nodes", "")}
    assert len(wide) == 6


def test_describe_groups_verbs_resources_and_namespaces() -> None:
    denied = [
        Access("batch", "jobs", "ml", "watch"),
        Access("batch", "jobs", "ml", "list"),
        Access("", "pods", "ml", "list"),
        Access("", "nodes", "", "list"),
        Access("", "nodes", "", "watch"),
    ]
    assert describe(denied) == (
        "cluster-wide: list/watch nodes; in namespace ml: list pods and list/watch jobs.batch"
    )
    error = AccessDeniedError(denied, "system:serviceaccount:ml:op", attempts=3, seconds=2)
    assert str(error).startswith(
        "the API server does not allow user system:serviceaccount:ml:op what the operator watches: "
        "cluster-wide: list/watch nodes; in namespace ml: list pods and list/watch jobs.batch (asked 3 times "
        "over 2 s). kopf would retry"
    )


def test_wait_for_access_asks_again_only_what_was_refused() -> None:
    wanted_access = [Access("batch", "jobs", "ml", "list"), Access("batch", "jobs", "ml", "watch")]
    notes: list[str] = []
    with stub_server() as stub:
        api = stub.api_client()
        stub.answer = (200, {"status": {"allowed": False}})
        slept: list[float] = []

        def sleep(seconds: float) -> None:
            slept.append(seconds)
            stub.answer = (200, {"status": {"allowed": True}})  # the binding arrived

        wait_for_access(api, wanted_access, (1, 2), on_retry=notes.append, sleep=sleep)
        reviews = [r.body for r in stub.take()]
        assert slept == [1]
        assert len(reviews) == 4  # both asked, both refused; both asked again
        assert reviews[0] == {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SelfSubjectAccessReview",
            "spec": {
                "resourceAttributes": {
                    "verb": "list",
                    "group": "batch",
                    "resource": "jobs",
                    "namespace": "ml",
                }
            },
        }
        assert notes == [
            "the API server does not (yet) allow in namespace ml: list/watch jobs.batch; asking again 2 "
            "times over 3 s (a new RoleBinding takes a moment to apply)"
        ]

        stub.answer = (200, {"status": {"allowed": False}})
        with pytest.raises(AccessDeniedError) as caught:
            wait_for_access(api, wanted_access, (0, 0), sleep=lambda _: None)
        assert caught.value.denied == tuple(wanted_access)
        assert caught.value.user is None  # the stub's SelfSubjectReview names no user
        assert "the operator's credentials" in str(caught.value)
        api.close()
