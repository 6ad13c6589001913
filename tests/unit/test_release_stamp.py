"""Issue #20: a restart skips settled objects only when this release last reconciled them
(handlers/release.py ``status.reconciledBy``), and a reconcile decides on the operator's own last
write while the watch cache is behind it (handlers/plumbing.py ``cache_first``)."""

from __future__ import annotations

import copy
import functools
import re
from collections.abc import Iterator
from typing import Any

import kopf
import pytest
from kubernetes import client

from trtllm_operator.handlers import autoscaler, deployment, engine, indexes, plumbing
from trtllm_operator.handlers.release import release_stamp, stamp_field, stamped
from trtllm_operator.kube.client import DEPLOYMENT, LLM_DEPLOYMENT, LLM_ENGINE, Kube, set_default_kube
from trtllm_operator.metrics.operator_metrics import RESUMES
from trtllm_operator.settings import Settings, configure, current


def _unreachable_kube() -> Kube:
    cfg = client.Configuration()
    cfg.host = "https://127.0.0.1:9"  # discard port: a request that were sent would fail, not hang
    return Kube(client.ApiClient(cfg))


@pytest.fixture
def caches(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, dict[Any, list[dict[str, Any]]]]]:
    """Bound watch caches (what kopf fills in a running operator), empty, and a client that fails
    any request: everything these tests decide comes from the caches."""
    bound: dict[str, dict[Any, list[dict[str, Any]]]] = {name: {} for name in indexes._ALL}
    monkeypatch.setattr(indexes, "_indices", bound)
    set_default_kube(_unreachable_kube())
    saved = current()
    configure(Settings())
    yield bound
    configure(saved)
    set_default_kube(None)


def test_the_stamp_names_the_version_and_changes_with_deciding_settings_only() -> None:
    base = Settings()
    stamp = release_stamp(base)
    assert re.fullmatch(r"0\.1\.0\+[0-9a-f]{12}", stamp), stamp  # trtllm_operator.__version__
    assert release_stamp(Settings()) == stamp  # deterministic
    # the process's plumbing: a restart with another metrics port or log level reconciles nothing
    assert release_stamp(Settings(metrics_port=9999, log_level="DEBUG")) == stamp
    # what reaches the rendered children or the decisions: every object is reconciled again
    assert release_stamp(Settings(image_pull_policy="Always")) != stamp
    assert release_stamp(Settings(serving_network_policy=not base.serving_network_policy)) != stamp


def _engine(status: dict[str, Any]) -> dict[str, Any]:
    meta = {"namespace": "ns", "name": "e", "uid": "ue", "generation": 2, "resourceVersion": "10"}
    return {"metadata": meta, "spec": {}, "status": status}


def _ready_engine(**extra: Any) -> dict[str, Any]:
    ready = {"type": "Ready", "status": "True", "observedGeneration": 2}
    return _engine(
        {"phase": "Ready", "observedGeneration": 2, "engineKey": "k", "conditions": [ready], **extra}
    )


def test_a_resumed_engine_is_skipped_only_when_settled_and_stamped_by_this_release(
    caches: dict[str, dict[Any, list[dict[str, Any]]]],
) -> None:
    index = caches["cached_llmengines"]
    index[("ns", "e")] = [_ready_engine(**stamp_field())]
    assert stamped(index[("ns", "e")][0]) and engine.settled("ns", "e")
    index[("ns", "e")] = [_ready_engine()]  # an earlier release wrote it: no stamp
    assert not engine.settled("ns", "e")
    index[("ns", "e")] = [_ready_engine(reconciledBy="0.1.0+000000000000")]  # another release
    assert not engine.settled("ns", "e")
    index[("ns", "e")] = [_engine({"phase": "Building", **stamp_field()})]  # stamped, not settled
    assert not engine.settled("ns", "e")


def _settled_deployment(caches: dict[str, dict[Any, list[dict[str, Any]]]], **extra: Any) -> None:
    meta = {"namespace": "ns", "name": "d", "uid": "ud", "generation": 1, "resourceVersion": "20"}
    ready = {"type": "Ready", "status": "True", "observedGeneration": 1}
    status = {"phase": "Ready", "observedGeneration": 1, "engineKey": "k", "readyReplicas": 1, **extra}
    caches["cached_llmdeployments"][("ns", "d")] = [
        {
            "metadata": meta,
            "spec": {"engineRef": {"name": "e"}, "replicas": 1},
            "status": {**status, "conditions": [ready]},
        }
    ]
    caches["cached_llmengines"][("ns", "e")] = [_ready_engine()]
    owner = {"kind": "LLMDeployment", "uid": "ud", "controller": True}
    workload_meta = {"namespace": "ns", "name": "d", "generation": 3, "ownerReferences": [owner]}
    workload_status = {"observedGeneration": 3, "replicas": 1, "readyReplicas": 1, "updatedReplicas": 1}
    caches["cached_deployments"][("ns", "d")] = [
        {"metadata": workload_meta, "spec": {"replicas": 1}, "status": workload_status}
    ]


@pytest.mark.parametrize("stamp", ["this", None, "other"])
def test_a_resumed_deployment_is_reconciled_unless_settled_and_stamped_by_this_release(
    caches: dict[str, dict[Any, list[dict[str, Any]]]], monkeypatch: pytest.MonkeyPatch, stamp: str | None
) -> None:
    extra = {"this": stamp_field(), None: {}, "other": {"reconciledBy": "0.1.0+000000000000"}}[stamp]
    _settled_deployment(caches, **extra)
    assert deployment.settled("ns", "d")  # what the caches show, whoever reconciled it
    reconciled: list[tuple[str | None, str | None]] = []
    monkeypatch.setattr(deployment, "_safe_reconcile", lambda ns, name: reconciled.append((ns, name)))
    body = caches["cached_llmdeployments"][("ns", "d")][0]
    deployment.on_deployment(name="d", namespace="ns", body=body, reason=kopf.Reason.RESUME)
    assert reconciled == ([] if stamp == "this" else [("ns", "d")])
    reconciled.clear()
    # a creation or change is always reconciled
    deployment.on_deployment(name="d", namespace="ns", body=body, reason=kopf.Reason.UPDATE)
    assert reconciled == [("ns", "d")]


def test_a_cached_copy_at_another_version_than_the_operators_own_write_is_read_fresh(
    caches: dict[str, dict[Any, list[dict[str, Any]]]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The operator remembers 7 (its own status write) as not yet shown by the watch. The cache
    shows 8, a user's spec change newer than 7, and resource versions cannot be ordered (Kubernetes
    API concepts, "Resource versions"): the reconcile reads the object fresh and decides on it,
    never on the remembered 7, which decided "nothing to do" on generation 1 while generation 2
    waited (CI: tests/integration/test_engine.py, test_same_key_reuses_artifact_...). Once the
    cache shows the version it knows, the cache serves again without a request."""
    meta = {"namespace": "ns", "name": "x", "uid": "u"}
    written = {"metadata": {**meta, "resourceVersion": "7", "generation": 1}, "status": {"phase": "Ready"}}
    user = {"metadata": {**meta, "resourceVersion": "8", "generation": 2}, "status": {"phase": "Ready"}}
    caches["cached_llmdeployments"][("ns", "x")] = [user]
    plumbing.known_version(LLM_DEPLOYMENT, "ns", "x", written)
    gets: list[str] = []

    def get(self: Kube, res: Any, namespace: str, name: str, **_: Any) -> dict[str, Any]:
        gets.append(name)
        return dict(user)

    monkeypatch.setattr(Kube, "get", get)
    seen: list[tuple[str, int]] = []

    def run(kube: Kube, obj: dict[str, Any] | None) -> None:
        assert obj is not None
        seen.append((obj["metadata"]["resourceVersion"], obj["metadata"]["generation"]))

    plumbing.cache_first(_unreachable_kube(), LLM_DEPLOYMENT, "ns", "x", run)
    assert seen == [("8", 2)] and gets == ["x"]
    # the fresh read is now the newest known, and the cache shows it: served with no request
    plumbing.cache_first(_unreachable_kube(), LLM_DEPLOYMENT, "ns", "x", run)
    assert seen[-1] == ("8", 2) and gets == ["x"]
    plumbing.known_version(LLM_DEPLOYMENT, "ns", "x", None)


def test_a_deployment_without_its_cached_workload_is_not_settled(
    caches: dict[str, dict[Any, list[dict[str, Any]]]],
) -> None:
    # The skip reads only the caches: no workload cached, not settled (and no request).
    _settled_deployment(caches, **stamp_field())
    del caches["cached_deployments"][("ns", "d")]
    assert not deployment.resumed_settled("ns", "d")
    assert indexes.cached(DEPLOYMENT) and indexes.cached(LLM_ENGINE)


def test_a_confirming_read_that_shows_another_version_is_reused_not_read_again(
    caches: dict[str, dict[Any, list[dict[str, Any]]]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The cached copy (5) is not the current object (6: kopf's bookkeeping PATCH the watch has not
    delivered yet): the GET before a child write shows it, the reconcile starts again on that copy
    with the real client — one GET in all, not a second one."""
    meta = {"namespace": "ns", "name": "x", "uid": "u"}
    caches["cached_llmdeployments"][("ns", "x")] = [{"metadata": {**meta, "resourceVersion": "5"}}]
    current = {"metadata": {**meta, "resourceVersion": "6"}}
    gets: list[str] = []

    def get(self: Kube, res: Any, namespace: str, name: str, **_: Any) -> dict[str, Any]:
        gets.append(name)
        return dict(current)

    monkeypatch.setattr(Kube, "get", get)
    seen: list[str] = []

    def run(kube: Kube, obj: dict[str, Any] | None) -> None:
        assert obj is not None
        seen.append(obj["metadata"]["resourceVersion"])
        if obj["metadata"]["resourceVersion"] == "5":  # decided on the cached copy: a child to create
            kube.create(DEPLOYMENT, "ns", {"metadata": {"name": "child"}})

    plumbing.cache_first(_unreachable_kube(), LLM_DEPLOYMENT, "ns", "x", run)
    assert seen == ["5", "6"] and gets == ["x"]
    plumbing.known_version(LLM_DEPLOYMENT, "ns", "x", None)


def test_used_by_is_written_alone_from_the_cache_and_unconditionally(
    caches: dict[str, dict[Any, list[dict[str, Any]]]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``status.usedBy`` (this controller its only writer, the value from the index): no GET, a merge
    patch of that field alone without a ``resourceVersion`` (kopf's diff-base PATCH the cache has
    not shown yet must not make it a 409), and nothing when the cached copy already says so."""
    caches["cached_llmengines"][("ns", "e")] = [_ready_engine(usedBy=["a"])]
    patches: list[tuple[str, Any, str | None]] = []

    def patch(self: Kube, res: Any, namespace: str, name: str, body: Any, **kw: Any) -> dict[str, Any]:
        patches.append((name, body, kw.get("subresource")))
        return _ready_engine(usedBy=body["status"]["usedBy"])

    monkeypatch.setattr(Kube, "patch", patch)
    kube = _unreachable_kube()  # a GET would fail
    deployment.sync_used_by(kube, "ns", "e", ["a"])
    assert patches == []
    deployment.sync_used_by(kube, "ns", "e", ["a", "b"])
    assert patches == [("e", {"status": {"usedBy": ["a", "b"]}}, "status")]
    plumbing.known_version(LLM_ENGINE, "ns", "e", None)


def _mutate(caches: dict[str, dict[Any, list[dict[str, Any]]]], path: str, value: Any) -> None:
    """Set ``value`` at ``cache_name:key.key…`` in the one cached object of that index."""
    index, dotted = path.split(":")
    obj = next(iter(caches[index].values()))[0]
    *parents, last = dotted.split(".")
    for part in parents:
        obj = obj[int(part)] if isinstance(obj, list) else obj[part]
    obj[last] = value


@pytest.mark.parametrize(
    ("path", "value", "reason"),
    [
        ("cached_llmdeployments:status.phase", "Progressing", "status.phase is 'Progressing'"),
        ("cached_llmdeployments:metadata.generation", 2, "status.observedGeneration 1 != generation 2"),
        ("cached_llmdeployments:status.conditions.0.status", "False", "condition Ready is 'False'"),
        ("cached_llmdeployments:status.engineKey", "old", "status.engineKey 'old' is not engine e's"),
        ("cached_llmengines:status.phase", "Building", "engine e status.phase is 'Building'"),
        ("cached_deployments:status.observedGeneration", 2, "Deployment d status.observedGeneration 2"),
        ("cached_deployments:status.readyReplicas", 0, "Deployment d status replicas 1, updatedReplicas 1, "),
        ("cached_llmdeployments:status.readyReplicas", 0, "status.readyReplicas 0 != spec.replicas 1"),
    ],
)
def test_unsettled_names_the_first_test_that_fails(
    caches: dict[str, dict[Any, list[dict[str, Any]]]], path: str, value: Any, reason: str
) -> None:
    """What a restart reconciles, and why, is read from the log (benchmarks/scale.py counts the
    reasons): :func:`deployment.unsettled` names the failing test; settled() agrees with it."""
    _settled_deployment(caches, **stamp_field())
    assert deployment.unsettled("ns", "d") is None and deployment.resume_unsettled("ns", "d") is None
    _mutate(caches, path, value)
    why = deployment.unsettled("ns", "d")
    assert why is not None and why.startswith(reason), why
    assert not deployment.settled("ns", "d") and deployment.resume_unsettled("ns", "d") == why


def test_a_resume_logs_why_it_reconciles_and_counts_both_outcomes(
    caches: dict[str, dict[Any, list[dict[str, Any]]]],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    def count(result: str) -> float:
        return RESUMES.labels(kind="LLMDeployment", result=result)._value.get()

    settled_before, reconciled_before = count("settled"), count("reconciled")
    monkeypatch.setattr(deployment, "_safe_reconcile", lambda ns, name: None)
    _settled_deployment(caches)  # no stamp: an earlier release
    body = caches["cached_llmdeployments"][("ns", "d")][0]
    with caplog.at_level("INFO", logger=deployment.log.name):
        deployment.on_deployment(name="d", namespace="ns", body=body, reason=kopf.Reason.RESUME)
    assert [r.getMessage() for r in caplog.records] == [
        "resumed, reconciling: no status.reconciledBy (last reconciled by an earlier release)"
    ]
    _settled_deployment(caches, **stamp_field())
    body = caches["cached_llmdeployments"][("ns", "d")][0]
    deployment.on_deployment(name="d", namespace="ns", body=body, reason=kopf.Reason.RESUME)
    assert (count("settled") - settled_before, count("reconciled") - reconciled_before) == (1, 1)
    assert engine.unsettled("ns", "e") == "no status.reconciledBy (last reconciled by an earlier release)"


def test_the_source_digest_is_read_once_when_threads_ask_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """kopf's handler threads all ask for the stamp when the operator starts: one reads the sources,
    the others wait for its answer (functools.cache alone let every thread read them)."""
    import threading  # noqa: PLC0415
    import time  # noqa: PLC0415

    from trtllm_operator.handlers import release  # noqa: PLC0415

    reads: list[int] = []
    real = release._code_digest.__wrapped__

    def slow_digest() -> str:
        reads.append(1)
        time.sleep(0.05)  # long enough for every thread to arrive while the first one reads
        return str(real())

    cached = functools.cache(slow_digest)
    monkeypatch.setattr(release, "_code_digest", cached)
    results: list[str] = []
    threads = [threading.Thread(target=lambda: results.append(release.code_digest())) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(reads) == 1
    assert len(set(results)) == 1 and len(results) == 8


def test_the_restarts_read_only_checks_copy_no_cached_object(
    caches: dict[str, dict[Any, list[dict[str, Any]]]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue #20, restart: kopf resumes every object and replays every watched object at once; the
    settled tests (resume, and the listing of workloads, pods and engines), the autoscaler's resume
    and ``usedBy`` only read the caches, several times per object — a deep copy of the LLMDeployment,
    its engine and its Deployment on each read was the operator's own largest cost of a restart
    (py-spy, benchmarks/scale.py). They now read the cached objects in place (``indexes.peek``) and
    change nothing. Failed before (``indexes.get`` deep-copies)."""
    _settled_deployment(caches, **stamp_field())
    caches["cached_llmengines"][("ns", "e")] = [_ready_engine(usedBy=["d"], **stamp_field())]
    before = copy.deepcopy(caches)

    def refuse(*_: Any, **__: Any) -> Any:
        raise AssertionError("a read-only check deep-copied a cached object")

    with monkeypatch.context() as patched:
        patched.setattr(indexes.copy, "deepcopy", refuse)
        assert deployment.resume_unsettled("ns", "d") is None and deployment.settled("ns", "d")
        assert engine.unsettled("ns", "e") is None
        assert autoscaler._cached_spec("ns", "d") == {"engineRef": {"name": "e"}, "replicas": 1}
        deployment.sync_used_by(_unreachable_kube(), "ns", "e", ["d"])  # as cached: no write or request
    assert caches == before
