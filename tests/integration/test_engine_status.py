"""The shared kube/ shell against the real API server: status writes from several writers (merge by
condition type, guarded by what the decision read, retry when refused), create-or-get, events."""

from __future__ import annotations

import datetime as dt
import threading
from typing import Any

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families
from support.cluster import LocalCluster
from support.manifests import a_deployment, an_engine

from trtllm_operator.api.wire import ANNOTATION_ALLOW_PARTIAL_ARTIFACT
from trtllm_operator.decide.conditions import condition
from trtllm_operator.kube import (
    CONFIG_MAP,
    EVENT,
    LLM_DEPLOYMENT,
    LLM_ENGINE,
    Kube,
    patch_status,
    post_event,
    update_conditions,
)
from trtllm_operator.kube.client import ReadOnlyKube, Resource, WriteNeeded
from trtllm_operator.metrics.operator_metrics import REGISTRY

#: The engine the status writers share; nothing here reads its spec (no operator runs).
ENGINE = an_engine("shared").manifest()


@pytest.fixture
def kube(cluster: LocalCluster) -> Kube:
    return Kube(cluster.api_client(), "trtllm-operator-test")


def test_concurrent_writers_never_lose_each_others_conditions(kube: Kube, namespace: str) -> None:
    kube.create(LLM_ENGINE, namespace, ENGINE)
    errors: list[BaseException] = []

    def writer(type_: str, n: int) -> None:
        try:
            for i in range(n):
                update_conditions(
                    kube,
                    LLM_ENGINE,
                    namespace,
                    "shared",
                    [condition(type_, i % 2 == 0, "Step", f"write {i}")],
                )
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(t, 12)) for t in ("Ready", "ScalingLimited", "Planned")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors
    final = kube.get(LLM_ENGINE, namespace, "shared")
    assert final is not None
    conds = {c["type"]: c for c in final["status"]["conditions"]}
    assert set(conds) == {"Ready", "ScalingLimited", "Planned"}
    assert all(c["message"] == "write 11" and c["status"] == "False" for c in conds.values())


def test_transition_time_kept_when_status_unchanged_and_noop_writes_skipped(
    kube: Kube, namespace: str
) -> None:
    kube.create(LLM_ENGINE, namespace, ENGINE)
    t0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    first = update_conditions(
        kube, LLM_ENGINE, namespace, "shared", [condition("Ready", False, "A")], now=lambda: t0
    )
    assert first is not None
    rv = first["metadata"]["resourceVersion"]
    same = update_conditions(kube, LLM_ENGINE, namespace, "shared", [condition("Ready", False, "A")])
    assert same is not None and same["metadata"]["resourceVersion"] == rv, "a no-op must not write"
    later = update_conditions(
        kube, LLM_ENGINE, namespace, "shared", [condition("Ready", False, "B")], status={"phase": "Queued"}
    )
    assert later is not None
    (ready,) = later["status"]["conditions"]
    assert (ready["reason"], ready["lastTransitionTime"]) == ("B", "2026-01-01T00:00:00Z")
    assert later["status"]["phase"] == "Queued"


def test_stale_write_is_retried_on_conflict(kube: Kube, namespace: str) -> None:
    kube.create(LLM_ENGINE, namespace, ENGINE)
    calls: list[str] = []

    def mutate(obj: dict[str, Any]) -> dict[str, Any]:
        calls.append(obj["metadata"]["resourceVersion"])
        if len(calls) == 1:  # someone else writes between our read and our patch
            update_conditions(kube, LLM_ENGINE, namespace, "shared", [condition("Planned", True, "Other")])
        return {"phase": "Building"}

    result = patch_status(kube, LLM_ENGINE, namespace, "shared", mutate)
    assert result is not None and result["status"]["phase"] == "Building"
    assert len(calls) == 2 and calls[0] != calls[1]
    assert result["status"]["conditions"][0]["reason"] == "Other", "the other writer's condition survived"
    assert patch_status(kube, LLM_ENGINE, namespace, "missing", mutate) is None


def test_create_or_get_and_events(kube: Kube, namespace: str) -> None:
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "child"}, "data": {"a": "1"}}
    first, created = kube.create_or_get(CONFIG_MAP, namespace, body)
    again, created_again = kube.create_or_get(CONFIG_MAP, namespace, {**body, "data": {"a": "2"}})
    assert created and not created_again
    assert again["metadata"]["uid"] == first["metadata"]["uid"] and again["data"] == {"a": "1"}
    assert kube.get(CONFIG_MAP, namespace, "nope") is None
    assert kube.delete(CONFIG_MAP, namespace, "child") and not kube.delete(CONFIG_MAP, namespace, "child")

    engine = kube.create(LLM_ENGINE, namespace, ENGINE)
    post_event(kube, engine, "BuildStarted", "x" * 5000, type_="Normal")
    events = kube.list(EVENT, namespace, field_selector="involvedObject.name=shared")
    (event,) = events
    assert (event["reason"], event["involvedObject"]["uid"]) == ("BuildStarted", engine["metadata"]["uid"])
    assert len(event["message"]) == 1024


#: kopf's diff-base annotation (kopf 1.45.2 ``AnnotationsDiffBaseStorage``, this operator's prefix).
KOPF_DIFF_BASE = "kopf.trtllm-operator.dev/last-handled-configuration"
#: Status values Python's ``json.dumps`` writes other than Go does (kube/client.py ``go_json``):
#: non-ASCII, HTML-escaped characters, a control character, floats in positional and exponent form.
AWKWARD_MESSAGE = "tokens \u2265 1 \u2014 <ok> & caf\u00e9 \u2028 tab\t"
AWKWARD_TIMINGS = {"fetch": 1e-05, "plan": 0.1, "compile": 1.2345e16, "report": 1.5e-07, "quantize": 100.0}


class CountingKube(Kube):
    """A :class:`Kube` that records its GETs and its refused writes."""

    def __init__(self, parent: Kube) -> None:
        super().__init__(parent.api_client, parent.field_manager)
        self.gets = 0
        self.refused: list[int] = []

    def get(self, res: Resource, namespace: str | None, name: str, **kw: Any) -> dict[str, Any] | None:
        self.gets += 1
        return super().get(res, namespace, name, **kw)

    def patch(self, *args: Any, **kw: Any) -> dict[str, Any]:
        try:
            return super().patch(*args, **kw)
        except Exception as exc:
            self.refused.append(getattr(exc, "status", 0))
            raise


def _with_awkward_status(kube: Kube, namespace: str) -> dict[str, Any]:
    """The engine ``shared``, created, with a status Python and Go write differently; as read back."""
    kube.create(LLM_ENGINE, namespace, ENGINE)
    update_conditions(
        kube,
        LLM_ENGINE,
        namespace,
        "shared",
        [condition("Ready", False, "Building", AWKWARD_MESSAGE)],
        status={"build": {"stageTimings": AWKWARD_TIMINGS}},
    )
    obj = kube.get(LLM_ENGINE, namespace, "shared")
    assert obj is not None and obj["status"]["conditions"][0]["message"] == AWKWARD_MESSAGE
    return obj


def test_kopfs_annotation_patch_between_read_and_write_does_not_refuse_the_status_write(
    kube: Kube, namespace: str
) -> None:
    """Issue #20: kopf's diff-base PATCH lands between the operator's read and its status write (at
    1,000 + 1,000: 989 status writes refused with 409, each followed by a GET and a second decision).
    The write is guarded by what the decision read (uid, generation, status …), not by the whole
    object's resourceVersion: it lands at once — also with a status Go writes other than Python.
    Failed before the change (409, then a GET and ``mutate`` again)."""
    obj = _with_awkward_status(kube, namespace)
    kube.patch(
        LLM_ENGINE, namespace, "shared", {"metadata": {"annotations": {KOPF_DIFF_BASE: '{"spec": {}}'}}}
    )
    counting = CountingKube(kube)
    seen: list[dict[str, Any]] = []

    def mutate(current: dict[str, Any]) -> dict[str, Any]:
        seen.append(current)
        return {"phase": "Building", "build": None}

    result = patch_status(counting, LLM_ENGINE, namespace, "shared", mutate, current=obj)
    assert (len(seen), counting.gets, counting.refused) == (1, 0, [])
    assert result is not None and result["status"]["phase"] == "Building" and "build" not in result["status"]
    assert result["status"]["conditions"][0]["message"] == AWKWARD_MESSAGE, "the rest of the status kept"
    assert KOPF_DIFF_BASE in result["metadata"]["annotations"]

    # The reconcile's read-only client (plumbing.cache_first) lets the guarded write through without
    # the confirming GET, and the Events after it.
    cached = kube.get(LLM_ENGINE, namespace, "shared")
    assert cached is not None
    kube.patch(LLM_ENGINE, namespace, "shared", {"metadata": {"annotations": {KOPF_DIFF_BASE: '{"a": 1}'}}})
    probe = ReadOnlyKube(kube, (LLM_ENGINE, namespace, "shared"), cached)
    written = update_conditions(
        probe, LLM_ENGINE, namespace, "shared", [condition("Ready", True, "Ok")], current=cached
    )
    assert written is not None and probe.status_written and probe.fresh is None and not probe.wanted


def _status_write_counts(kind: str) -> tuple[float, float, float]:
    """(refused guarded status writes, fallbacks to the merge patch, 422 patch API errors) of
    ``kind``, as the operator's /metrics serves them: the exposition of its registry
    (commands/run.py serves :data:`REGISTRY`), parsed back with prometheus_client's parser. The
    registry is process-wide: callers compare deltas."""
    samples = {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(generate_latest(REGISTRY).decode())
        for s in family.samples
    }

    def value(name: str, **labels: str) -> float:
        return samples.get((name, frozenset(labels.items())), 0.0)

    return (
        value("trtllm_operator_status_write_refusals_total", kind=kind),
        value("trtllm_operator_status_write_fallbacks_total", kind=kind),
        value("trtllm_operator_api_errors_total", verb="patch", code="422"),
    )


def _change_status(kube: Kube, res: Resource, namespace: str, name: str) -> None:
    update_conditions(kube, res, namespace, name, [condition("Planned", True, "Other", "another writer")])


def _change_spec(kube: Kube, res: Resource, namespace: str, name: str) -> None:
    spec = {"gpu": {"nodeSelector": {"pool": "a"}}} if res == LLM_ENGINE else {"replicas": 3}
    kube.patch(res, namespace, name, {"spec": spec})


def _set_honoured_annotation(kube: Kube, res: Resource, namespace: str, name: str) -> None:
    kube.patch(
        res, namespace, name, {"metadata": {"annotations": {ANNOTATION_ALLOW_PARTIAL_ARTIFACT: "true"}}}
    )


@pytest.mark.parametrize(
    ("res", "change"),
    [
        (LLM_ENGINE, _change_status),
        (LLM_ENGINE, _change_spec),
        (LLM_DEPLOYMENT, _change_status),
        (LLM_DEPLOYMENT, _change_spec),
        (LLM_DEPLOYMENT, _set_honoured_annotation),
    ],
    ids=["engine-status", "engine-spec", "deployment-status", "deployment-spec", "deployment-annotation"],
)
def test_a_change_of_what_the_decision_read_refuses_the_status_write_and_it_is_decided_again(
    kube: Kube, namespace: str, res: Resource, change: Any
) -> None:
    """The guard keeps what the resourceVersion precondition guaranteed: a status (another writer's
    condition), spec (generation) or honoured annotation changed between the read and the write
    refuses the write (422, json-patch ``test failed``), and the status is decided again on the object
    read fresh — the other writer's condition survives, the decision sees the new generation. Each
    refusal counts in ``trtllm_operator_status_write_refusals_total`` (not as an API error; before
    trial 38 F10 it was only a DEBUG line), and a write whose second attempt lands is no fallback."""
    if res == LLM_ENGINE:
        kube.create(LLM_ENGINE, namespace, ENGINE)
        name = "shared"
    else:
        body = a_deployment("chat", "shared")
        body["metadata"]["annotations"] = {"team": "a"}  # a map the absent annotation is tested in
        kube.create(LLM_DEPLOYMENT, namespace, body)
        name = "chat"
    update_conditions(kube, res, namespace, name, [condition("Ready", False, "Pending")])
    obj = kube.get(res, namespace, name)
    assert obj is not None
    change(kube, res, namespace, name)
    counting = CountingKube(kube)
    seen: list[dict[str, Any]] = []

    def mutate(current: dict[str, Any]) -> dict[str, Any]:
        seen.append(current)
        return {"observedGeneration": current["metadata"]["generation"]}

    before = _status_write_counts(res.kind)
    result = patch_status(counting, res, namespace, name, mutate, current=obj)
    assert (len(seen), counting.gets, counting.refused) == (2, 1, [422])
    assert _status_write_counts(res.kind) == (before[0] + 1, before[1], before[2])
    assert result is not None
    assert result["status"]["observedGeneration"] == result["metadata"]["generation"]
    if change is _change_status:
        assert {c["type"] for c in result["status"]["conditions"]} == {"Ready", "Planned"}

    # The reconcile's read-only client: refused, the reconcile starts again on a fresh GET.
    cached = kube.get(res, namespace, name)
    assert cached is not None
    update_conditions(kube, res, namespace, name, [condition("Planned", False, "Again", "a later write")])
    probe = ReadOnlyKube(kube, (res, namespace, name), cached)
    with pytest.raises(WriteNeeded):
        update_conditions(probe, res, namespace, name, [condition("Ready", True, "Ok")], current=cached)
    assert probe.wanted and not probe.status_written
    assert _status_write_counts(res.kind) == (before[0] + 2, before[1], before[2])
