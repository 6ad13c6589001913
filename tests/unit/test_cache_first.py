"""Issue #20: the reconcile's read-only first pass and the drift loop (handlers/plumbing.py)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from kubernetes import client
from support.apistub import stub_server

from trtllm_operator.handlers import indexes, plumbing
from trtllm_operator.kube.client import DEPLOYMENT, EVENT, LLM_DEPLOYMENT, Kube, ReadOnlyKube, WriteNeeded
from trtllm_operator.metrics.operator_metrics import RESYNCS


def _unreachable_kube() -> Kube:
    cfg = client.Configuration()
    cfg.host = "https://127.0.0.1:9"  # discard port: a request that were sent would fail, not hang
    return Kube(client.ApiClient(cfg))


def test_read_only_kube_refuses_every_write_it_cannot_prove_current_and_marks_it() -> None:
    # A cached copy without a resourceVersion can never be confirmed current: no request is sent.
    probe = ReadOnlyKube(_unreachable_kube(), (LLM_DEPLOYMENT, "ns", "chat"), {"metadata": {}})
    manifest = {"metadata": {"name": "chat", "namespace": "ns"}}
    writes = [
        lambda: probe.create(DEPLOYMENT, "ns", manifest),
        lambda: probe.create_or_get(DEPLOYMENT, "ns", manifest),
        lambda: probe.patch(DEPLOYMENT, "ns", "chat", {"spec": {}}),
        lambda: probe.delete(DEPLOYMENT, "ns", "chat"),
        # its own status, but not conditional on the cached resourceVersion: refused
        lambda: probe.patch(LLM_DEPLOYMENT, "ns", "chat", {"status": {}}, subresource="status"),
        # another object's status, conditional: refused
        lambda: probe.patch(
            LLM_DEPLOYMENT,
            "ns",
            "other",
            {"metadata": {"resourceVersion": "1"}, "status": {}},
            subresource="status",
        ),
        # an Event before its status was written: refused
        lambda: probe.create(EVENT, "ns", {"metadata": {"generateName": "chat."}}),
    ]
    for write in writes:
        probe.wanted = False
        with pytest.raises(WriteNeeded):
            write()
        assert probe.wanted and not probe.live and probe.fresh is None


def test_a_cached_copy_is_trusted_only_at_the_newest_known_version() -> None:
    obj = {"metadata": {"namespace": "ns", "name": "x", "resourceVersion": "5"}}
    plumbing.known_version(LLM_DEPLOYMENT, "ns", "x", None)
    assert plumbing.is_newest(LLM_DEPLOYMENT, obj)  # nothing known yet
    plumbing.known_version(LLM_DEPLOYMENT, "ns", "x", {"metadata": {"resourceVersion": "7"}})
    assert not plumbing.is_newest(LLM_DEPLOYMENT, obj)  # behind the operator's own write
    plumbing.known_version(LLM_DEPLOYMENT, "ns", "x", obj)
    assert plumbing.is_newest(LLM_DEPLOYMENT, obj)
    plumbing.known_version(LLM_DEPLOYMENT, "ns", "x", None)  # deleted: forgotten


def test_a_known_version_is_forgotten_once_the_watch_cache_shows_it() -> None:
    """After the operator's own write (version 7), a cached copy at 5 is behind it; once the watch
    delivered 7, a later copy (8: kopf's bookkeeping PATCH) is newer and trusted without a GET."""
    plumbing.known_version(LLM_DEPLOYMENT, "ns", "x", {"metadata": {"resourceVersion": "7"}})
    at = {v: {"metadata": {"namespace": "ns", "name": "x", "resourceVersion": v}} for v in ("5", "7", "8")}
    assert not plumbing.is_newest(LLM_DEPLOYMENT, at["8"])  # 7 not shown yet: 8 cannot be told from 5
    indexes.shown(LLM_DEPLOYMENT, at["5"])  # an older event: still waiting for 7
    assert not plumbing.is_newest(LLM_DEPLOYMENT, at["5"])
    indexes.shown(LLM_DEPLOYMENT, at["7"])
    assert plumbing.is_newest(LLM_DEPLOYMENT, at["8"])


def test_the_drift_loop_visits_every_object_in_turn_and_survives_errors() -> None:
    seen: list[tuple[str, str]] = []

    def reconcile(namespace: str, name: str) -> None:
        seen.append((namespace, name))
        if name == "b":
            raise RuntimeError("API down")

    async def run() -> None:
        keys = [("ns", "a"), ("ns", "b"), ("ns", "c")]
        for _, name in keys:
            plumbing.handled_by_kopf("test", "ns", name)
        task = asyncio.create_task(plumbing.resync_forever("test", lambda: keys, lambda: 0.01, reconcile))
        deadline = asyncio.get_running_loop().time() + 60  # a bound for a loaded machine, not a goal
        while len(seen) < 6 and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.01)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)

    asyncio.run(run())
    # b's error did not stop the loop; every round visits every object, in order
    assert seen[:6] == [("ns", "a"), ("ns", "b"), ("ns", "c")] * 2
    # each visit is counted (trtllm_operator_resyncs_total: what a restart's reconciles came from)
    assert RESYNCS.labels(kind="test")._value.get() == len(seen)


def test_the_caches_hold_what_the_reconciles_read_and_no_more() -> None:
    """Issue 20 (RSS): a cached workload keeps its metadata, ``spec.replicas`` and ``status`` — not its
    pod template; a Service only its metadata; a model-repository ConfigMap no data; an LLMDeployment
    no kopf annotations (its diff-base repeats the spec) and no managedFields."""
    meta = {
        "name": "chat",
        "namespace": "ns",
        "uid": "u",
        "resourceVersion": "3",
        "labels": {"app.kubernetes.io/component": "model-repository"},
        "annotations": {"kopf.trtllm-operator.dev/last-handled-configuration": "{}", "keep": "me"},
        "ownerReferences": [{"kind": "LLMDeployment", "uid": "p", "controller": True}],
        "managedFields": [{"manager": "x"}],
    }
    template = {"spec": {"containers": [{"name": "triton"}]}}
    workload = {"kind": "Deployment", "metadata": meta, "spec": {"replicas": 2, "template": template}}
    workload["status"] = {"readyReplicas": 2}
    (cached,) = asyncio.run(indexes.cached_deployments(namespace="ns", name="chat", body=workload)).values()
    assert cached["spec"] == {"replicas": 2} and cached["status"] == {"readyReplicas": 2}
    assert cached["metadata"]["annotations"] == {"keep": "me"} and "managedFields" not in cached["metadata"]
    assert cached["metadata"]["ownerReferences"] == meta["ownerReferences"]
    service = {"kind": "Service", "metadata": meta, "spec": {"ports": [{"port": 8000}]}}
    (cached,) = asyncio.run(indexes.cached_services(namespace="ns", name="chat", body=service)).values()
    assert set(cached) == {"kind", "metadata"}
    cm = {"kind": "ConfigMap", "metadata": meta, "data": {"config.pbtxt": "x" * 1000}}
    (cached,) = asyncio.run(indexes.cached_configmaps(namespace="ns", name="chat", body=cm)).values()
    assert "data" not in cached
    entry = {**cm, "metadata": {**meta, "labels": {}}}
    (cached,) = asyncio.run(indexes.cached_configmaps(namespace="ns", name="chat", body=entry)).values()
    assert cached["data"] == cm["data"]  # a cache entry's record is read from the cache
    llmd = {"kind": "LLMDeployment", "metadata": meta, "spec": {"replicas": 2}, "status": {"phase": "Ready"}}
    (cached,) = asyncio.run(indexes.cached_llmdeployments(namespace="ns", name="chat", body=llmd)).values()
    assert cached["spec"] == llmd["spec"] and cached["status"] == llmd["status"]
    assert cached["metadata"]["annotations"] == {"keep": "me"}


def test_the_drift_loop_leaves_an_object_to_kopf_until_kopf_has_handled_it() -> None:
    """Issue #20, restart at 1,000 + 1,000: kopf resumed objects for minutes and the drift loop's
    first round (one period after start) reconciled hundreds of them ahead of their resume, each a
    metadata GET of its credentials Secret. The loop now visits only objects kopf has handled in
    this process (a create, update or resume handler ran: ``plumbing.handled_by_kopf``), and forgets
    a deleted one."""
    seen: list[str] = []

    async def run() -> None:
        keys = [("ns", "resumed"), ("ns", "waiting")]
        plumbing.handled_by_kopf("kopf-test", "ns", "resumed")
        plumbing.handled_by_kopf("kopf-test", "ns", "gone")
        plumbing.handled_by_kopf("kopf-test", "ns", "gone", gone=True)
        task = asyncio.create_task(
            plumbing.resync_forever(
                "kopf-test", lambda: [*keys, ("ns", "gone")], lambda: 0.01, lambda ns, n: seen.append(n)
            )
        )
        deadline = asyncio.get_running_loop().time() + 60  # a bound for a loaded machine, not a goal
        while len(seen) < 3 and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.01)
        assert set(seen) == {"resumed"}  # not the one kopf has not resumed yet, nor the deleted one
        plumbing.handled_by_kopf("kopf-test", "ns", "waiting")  # kopf resumed it
        while "waiting" not in seen and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.01)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)

    asyncio.run(run())
    assert "waiting" in seen and "gone" not in seen


def test_the_confirming_read_is_never_recorded_over_the_reconciles_own_write() -> None:
    """Issue #20: a reconcile on the cached copy (version 1) confirms it with a GET (version 1),
    creates children and writes its status (version 2). ``cache_first`` recorded the GET's copy
    after the reconcile, over version 2: with the watch cache still at 1 the next reconcile trusted
    it, and its status write was refused — a 409 (422 with the guarded write) and a GET for almost
    every new LLMDeployment in benchmarks/scale.py. Failed before: version 2 was forgotten."""
    at = {v: {"metadata": {"namespace": "ns", "name": "x", "resourceVersion": v}} for v in ("1", "2")}

    def run(kube: Kube, obj: dict[str, Any] | None) -> None:
        assert isinstance(kube, ReadOnlyKube) and kube.confirm()  # a child is about to be written
        plumbing.known_version(LLM_DEPLOYMENT, "ns", "x", at["2"])  # what write_outcome records

    with stub_server() as stub:
        stub.answer = (200, at["1"])
        indexes._indices = {"cached_llmdeployments": {("ns", "x"): [at["1"]]}}
        try:
            plumbing.cache_first(Kube(stub.api_client()), LLM_DEPLOYMENT, "ns", "x", run)
            assert not plumbing.is_newest(LLM_DEPLOYMENT, at["1"]), "the cache is behind the status write"
        finally:
            indexes._indices = None
            plumbing.known_version(LLM_DEPLOYMENT, "ns", "x", None)
