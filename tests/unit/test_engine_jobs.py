"""Builder Jobs nobody needs any more, pure (issue 24 leftovers): a superseded build is stopped only
when no other LLMEngine wants its key; a succeeded build gets its TTL only after its artifact is
recorded; a failed build is never expired (it is the memory of the failure)."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import pytest
from support.engine_decisions import NOW, good_report, job, observe, pod, prepared, spec

from trtllm_operator.api.engine import StorageSpec
from trtllm_operator.api.wire import LABEL_STORAGE_ID
from trtllm_operator.decide.conditions import merge_conditions
from trtllm_operator.decide.engine import RecordArtifact, decide_engine
from trtllm_operator.decide.engine_jobs import (
    ExpireJob,
    StopBuild,
    expire_job,
    superseded_builds,
    superseded_why,
    wants_key,
)
from trtllm_operator.decide.storage import builder_job_name, engine_storage_id, storage_location

UID = "uid-a"
OLD_KEY = "a" * 64
NEW_KEY = "b" * 64
BUILDER_LABELS = {
    "app.kubernetes.io/managed-by": "trtllm-operator",
    "app.kubernetes.io/component": "engine-builder",
}


def engine(
    name: str = "a",
    uid: str = UID,
    *,
    key: str | None = None,
    phase: str | None = "Building",
    generation: int = 1,
    observed: int | None = 1,
    deleting: bool = False,
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "ns", "uid": uid, "generation": generation}
    if deleting:
        meta["deletionTimestamp"] = "2026-12-02T06:00:00Z"
    status: dict[str, Any] = {}
    if phase is not None:
        status = {"phase": phase, "observedGeneration": observed, "engineKey": key}
    return {"metadata": meta, "status": status}


def builder_job(
    name: str = "build-old",
    *,
    key: str = OLD_KEY,
    owners: tuple[str, ...] = (UID,),
    conditions: tuple[str, ...] = (),
    labels: dict[str, str] | None = None,
    annotated: bool = True,
    deleting: bool = False,
) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": name,
        "uid": f"job-{name}",
        "resourceVersion": "42",
        "labels": dict(BUILDER_LABELS if labels is None else labels),
        "annotations": {"llm.trtllm-operator.dev/engine-key": key} if annotated else {},
        "ownerReferences": [
            {"apiVersion": "llm.trtllm-operator.dev/v1alpha1", "kind": "LLMEngine", "name": o, "uid": o}
            for o in owners
        ],
    }
    if deleting:
        meta["deletionTimestamp"] = "2026-12-02T06:00:00Z"
    return {
        "metadata": meta,
        "spec": {},
        "status": {"conditions": [{"type": t, "status": "True"} for t in conditions]},
    }


def stops(
    jobs: list[dict[str, Any]], engines: list[dict[str, Any]], wanted: str | None = "build-new"
) -> list[str]:
    me = engine(key=NEW_KEY)
    return [
        s.job_name
        for s in superseded_builds(me, wanted_job=wanted, why="w", jobs=jobs, engines=[me, *engines])
    ]


# ----------------------------------------------------------------------------- superseded builds
def test_a_running_build_of_the_old_key_nobody_wants_is_stopped_with_a_message() -> None:
    me = engine(key=NEW_KEY)
    why = superseded_why("a", new_key_short=NEW_KEY[:12])
    (stop,) = superseded_builds(me, wanted_job="build-new", why=why, jobs=[builder_job()], engines=[me])
    assert stop == StopBuild(
        job_name="build-old",
        uid="job-build-old",
        resource_version="42",
        key=OLD_KEY,
        message=(
            f"stopped builder Job build-old (engine key {'a' * 12}…): LLMEngine a now builds engine key "
            f"{'b' * 12}…, and no other LLMEngine in the namespace wants that key in that storage; the "
            "artifact storage and the engine cache are untouched"
        ),
    )


def test_an_invalid_engine_wants_no_build_at_all() -> None:
    me = engine(key=None, phase="Failed")
    why = superseded_why("a", new_key_short=None, invalid_reason="InvalidSpec")
    assert why == "LLMEngine a is InvalidSpec and wants no build"
    jobs = [builder_job("build-old"), builder_job("build-older", key="c" * 64)]
    got = superseded_builds(me, wanted_job=None, why=why, jobs=jobs, engines=[me])
    assert [s.job_name for s in got] == ["build-old", "build-older"]


def test_the_build_the_engine_wants_is_never_stopped() -> None:
    assert stops([builder_job("build-new", key=NEW_KEY)], []) == []


@pytest.mark.parametrize(
    ("other", "kept"),
    [
        (engine("b", "uid-b", key=OLD_KEY, phase="Building"), True),  # wants the key: the shared build stays
        (engine("b", "uid-b", key=OLD_KEY, phase="Failed"), True),  # e.g. a ChildConflict on that key
        (engine("b", "uid-b", key=NEW_KEY, phase="Building"), False),  # wants another key
        (engine("b", "uid-b", key=None, phase="Failed"), False),  # invalid: wants no build
        (engine("b", "uid-b", key=OLD_KEY, deleting=True), False),  # being deleted: wants nothing
        (engine("b", "uid-b", phase=None), True),  # never reconciled: its key is unknown
        (engine("b", "uid-b", key=NEW_KEY, phase="Planning"), True),  # still planning: unknown
        (engine("b", "uid-b", key=NEW_KEY, generation=2, observed=1), True),  # edited, not decided yet
    ],
)
def test_another_engine_that_wants_or_may_want_the_key_keeps_the_build(
    other: dict[str, Any], kept: bool
) -> None:
    assert stops([builder_job(owners=(UID, "uid-b"))], [other]) == ([] if kept else ["build-old"])


STORE = {"pvc": {"claimName": "engine-store"}}
MINE = {"pvc": {"claimName": "mine"}}


def in_storage(obj: dict[str, Any], storage: dict[str, Any]) -> dict[str, Any]:
    """``obj`` (an engine) with ``spec.storage``."""
    return {**obj, "spec": {"storage": storage}}


def job_in(storage: dict[str, Any], owner: dict[str, Any]) -> dict[str, Any]:
    """The old key's builder Job of ``owner`` in ``storage``, named and labelled as the operator does."""
    sid = engine_storage_id(in_storage(owner, storage))
    assert sid is not None
    job = builder_job(builder_job_name(OLD_KEY, sid), owners=(UID,))
    job["metadata"]["labels"][LABEL_STORAGE_ID] = sid
    return job


@pytest.mark.parametrize(
    ("other", "kept"),
    [
        # trial 46 T1: the same key in another storage builds its own Job and never reads this one's
        (in_storage(engine("b", "uid-b", key=OLD_KEY), STORE), False),
        (in_storage(engine("b", "uid-b", key=OLD_KEY), {"createPVC": {"size": "100Gi"}}), False),
        (in_storage(engine("b", "uid-b", phase=None), STORE), False),  # undecided, but another storage
        (in_storage(engine("b", "uid-b", key=OLD_KEY), {"pvc": {**MINE["pvc"], "subPath": "x"}}), False),
        # the same key in the same storage: the shared build stays
        (in_storage(engine("b", "uid-b", key=OLD_KEY), MINE), True),
        (in_storage(engine("b", "uid-b", phase=None), MINE), True),
        (in_storage(engine("b", "uid-b", key=OLD_KEY), {}), True),  # storage unknown: key only, kept
    ],
)
def test_only_an_engine_of_the_same_key_and_storage_keeps_the_build(
    other: dict[str, Any], kept: bool
) -> None:
    me = in_storage(engine(key=NEW_KEY), MINE)
    job = job_in(MINE, me)
    got = superseded_builds(me, wanted_job="build-new", why="w", jobs=[job], engines=[me, other])
    assert [s.job_name for s in got] == ([] if kept else [job["metadata"]["name"]])


def test_the_trial_46_createpvc_engine_next_to_a_pvc_engine_of_its_old_key_stops_its_build() -> None:
    """llama-3-1-8b-fp8 (createPVC) changed key; demo-llama-3-1-8b-fp8 (pvc engine-store) still has
    the old key: the createPVC Job build-<old>-<its storage> is stopped."""
    create = {"createPVC": {"size": "200Gi"}}
    me = in_storage(engine("llama-3-1-8b-fp8", key=NEW_KEY), create)
    demo = in_storage(engine("demo-llama-3-1-8b-fp8", "uid-b", key=OLD_KEY, phase="Failed"), STORE)
    job = job_in(create, me)
    got = superseded_builds(me, wanted_job="build-new", why="w", jobs=[job], engines=[me, demo])
    assert [s.job_name for s in got] == [job["metadata"]["name"]]


def test_engine_storage_id_is_the_storage_part_of_the_builder_job_name() -> None:
    e = in_storage(engine("e"), {"pvc": {"claimName": "store", "subPath": "/a/"}})
    same = storage_location("e", StorageSpec.model_validate({"pvc": {"claimName": "store", "subPath": "a"}}))
    assert engine_storage_id(e) == same.storage_id
    assert engine_storage_id(engine("e")) is None  # no spec.storage
    assert engine_storage_id(in_storage(engine("e"), {"pvc": {}})) is None  # does not parse


@pytest.mark.parametrize(
    "candidate",
    [
        builder_job(conditions=("Complete",)),  # finished: holds no GPU (its record or TTL decide)
        builder_job(conditions=("Failed",)),  # the memory of a failure: kept
        builder_job(owners=("uid-b",)),  # not this engine's
        builder_job(labels={}),  # not the operator's builder (no labels)
        builder_job(labels={"app.kubernetes.io/managed-by": "someone-else"}),
        builder_job(annotated=False),  # no full-key annotation
        builder_job(deleting=True),  # already being deleted
    ],
)
def test_only_a_running_operator_builder_this_engine_owns_is_stopped(candidate: dict[str, Any]) -> None:
    assert stops([candidate], []) == []


@pytest.mark.parametrize(
    ("status", "generation", "wanted"),
    [
        ({"phase": "Ready", "observedGeneration": 3, "engineKey": OLD_KEY}, 3, True),
        ({"phase": "Ready", "observedGeneration": 3, "engineKey": NEW_KEY}, 3, False),
        ({"phase": "Ready", "observedGeneration": 2, "engineKey": OLD_KEY}, 3, None),
        ({"phase": "Pending", "observedGeneration": 3}, 3, None),
        ({}, 1, None),
    ],
)
def test_wants_key_is_unknown_until_the_current_generation_is_decided(
    status: dict[str, Any], generation: int, wanted: bool | None
) -> None:
    e = {"metadata": {"name": "b", "uid": "u", "generation": generation}, "status": status}
    assert wants_key(e, OLD_KEY) is wanted


# ----------------------------------------------------------------------------- TTL of recorded builds
def _complete(ttl: int | None = None, *, failed: bool = False, deleting: bool = False) -> dict[str, Any]:
    j = job(("Failed", "BackoffLimitExceeded") if failed else ("Complete", ""))
    j["metadata"]["resourceVersion"] = "7"
    if ttl is not None:
        j["spec"]["ttlSecondsAfterFinished"] = ttl
    if deleting:
        j["metadata"]["deletionTimestamp"] = "2026-12-02T06:00:00Z"
    return j


def test_expire_job_sets_the_ttl_only_on_a_completed_job_without_it() -> None:
    assert expire_job(_complete(), 3600) == ExpireJob("build-x", 3600, "7")
    assert expire_job(_complete(86400), 3600) == ExpireJob("build-x", 3600, "7")  # the setting changed
    assert expire_job(_complete(3600), 3600) is None  # already set: no write
    assert expire_job(_complete(), None) is None  # setting unset: succeeded Jobs are kept
    assert expire_job(_complete(failed=True), 0) is None  # a failure is never expired
    assert expire_job(_complete(deleting=True), 0) is None
    assert expire_job(job(), 0) is None  # still running


def _success(p: Any) -> list[dict[str, Any]]:
    return [pod("Succeeded", exit_code=0, message=json.dumps(good_report(p)))]


def test_a_succeeded_build_is_recorded_first_then_its_job_gets_the_ttl() -> None:
    p = prepared()
    d = decide_engine(p, observe(job=_complete(), pods=_success(p)), now=NOW, job_ttl_seconds=600)
    assert d.phase == "Ready"
    record, expire = d.actions
    assert isinstance(record, RecordArtifact), "the record is written before the Job may expire"
    assert expire == ExpireJob("build-x", 600, "7")


def test_without_the_setting_a_succeeded_job_is_kept() -> None:
    p = prepared()
    d = decide_engine(p, observe(job=_complete(), pods=_success(p)), now=NOW, job_ttl_seconds=None)
    assert [type(a) for a in d.actions] == [RecordArtifact]


def test_a_completed_job_without_a_verified_report_is_not_expired() -> None:
    # exit 0 but no report: Failed with ArtifactMissing, nothing recorded; the Job stays (the
    # message says to delete it to retry)
    p = prepared()
    d = decide_engine(
        p, observe(job=_complete(), pods=[pod("Succeeded", exit_code=0)]), now=NOW, job_ttl_seconds=0
    )
    assert d.phase == "Failed" and d.actions == []


def test_a_failed_build_is_never_expired() -> None:
    p = prepared()
    failed = _complete(failed=True)
    d = decide_engine(p, observe(job=failed, pods=[pod("Failed", exit_code=10)]), now=NOW, job_ttl_seconds=0)
    assert d.phase == "Failed" and d.actions == []


def _recorded(p: Any) -> dict[str, Any]:
    first = decide_engine(p, observe(job=_complete(), pods=_success(p)), now=NOW, job_ttl_seconds=600)
    (record, _) = first.actions
    assert isinstance(record, RecordArtifact)
    return dict(record.record)


def test_an_engine_ready_from_its_record_gives_the_completed_job_its_ttl() -> None:
    p = prepared()
    d = decide_engine(p, observe(cache_entry=_recorded(p), job=_complete()), now=NOW, job_ttl_seconds=600)
    assert d.phase == "Ready" and d.actions == [ExpireJob("build-x", 600, "7")]
    again = decide_engine(
        p, observe(cache_entry=_recorded(p), job=_complete(600)), now=NOW, job_ttl_seconds=600
    )
    assert again.actions == []


def test_the_job_expiring_after_a_success_changes_nothing_the_engine_says() -> None:
    p = prepared()
    record = _recorded(p)
    with_job = decide_engine(p, observe(cache_entry=record, job=_complete(600)), now=NOW, job_ttl_seconds=600)
    status = {
        **with_job.status,
        "conditions": merge_conditions([], with_job.conditions, dt.datetime(2026, 1, 1)),
    }
    gone = decide_engine(p, observe(cache_entry=record, status=status), now=NOW, job_ttl_seconds=600)
    assert gone.phase == "Ready" and gone.actions == [], "nothing rebuilt"
    assert gone.event is None, "no ArtifactReused Event when the Job expires"
    progressing = {c["type"]: c["reason"] for c in gone.conditions}["Progressing"]
    assert progressing == "BuildSucceeded"
    assert gone.status["build"]["jobName"] == p.job_name  # from the record's source job/<name>
    assert gone.status["build"]["stage"] == "done"


def test_an_engine_that_never_built_the_artifact_still_says_reused() -> None:
    p = prepared(spec(), name="other")
    record = _recorded(prepared())  # built by "e"
    d = decide_engine(p, observe(cache_entry=record), now=NOW, job_ttl_seconds=600)
    assert {c["type"]: c["reason"] for c in d.conditions}["Progressing"] == "ArtifactReused"
    assert d.status["build"]["jobName"] is None
