"""The operator's own builder Jobs against a real control plane (issue 24 leftovers): a superseded
build is stopped, a recorded success expires, a failure is kept.

Real kube-apiserver, Job controller, garbage collector and TTL-after-finished controller (the local
control plane runs ``ttl-after-finished-controller`` among kube-controller-manager's controllers:
hack/localcluster/controlplane.py ``CONTROLLERS``), kwok GPU nodes, the operator in-process. Builder
pods "run" on kwok as in tests/integration/test_engine.py: ``outcome: run`` keeps one Running (a
build that would take hours), ``succeeds``/``fails`` end it with the builder's report.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from support.api import Api, condition, find_condition
from support.cluster import LocalCluster
from support.manifests import DELAY_MS, OUTCOME, an_engine, success_report
from support.operator import running_operator
from support.wait import wait_for

from engine_builder.report import EXIT_CODES, build_report
from trtllm_operator.api import ENGINE_PLURAL
from trtllm_operator.decide.engine_spec import PreparedEngine

pytestmark = pytest.mark.slow


def job_names(api: Api) -> set[str]:
    return {j["metadata"]["name"] for j in api.jobs()}


def running_build(api: Api, name: str, prepared: PreparedEngine) -> dict[str, Any]:
    """Wait until ``name``'s builder pod for ``prepared`` runs on a node; the Job."""
    wait_for(
        lambda: any(
            (p.get("status") or {}).get("phase") == "Running" for p in api.job_pods(prepared.job_name)
        ),
        timeout=60,
        desc=f"builder pod of {prepared.job_name} Running",
    )
    return next(j for j in api.jobs() if j["metadata"]["name"] == prepared.job_name)


def events(api: Api, name: str, reason: str) -> list[str]:
    items = api.core.list_namespaced_event(api.ns, field_selector=f"involvedObject.name={name}").items
    return [e.message for e in items if e.reason == reason]


# ----------------------------------------------------------------------------- superseded builds
def test_an_engine_defining_edit_mid_build_stops_the_old_job_and_starts_the_new_one(
    api: Api, operator: None
) -> None:
    old = an_engine("edited").pod(**{OUTCOME: "run"})  # a build that would run for hours
    before = old.prepared()
    api.create(old)
    running_build(api, "edited", before)

    new = an_engine("edited").max_batch_size(64)
    after = new.prepared()
    assert after.key != before.key, "maxBatchSize is in the engine key"
    api.patch(ENGINE_PLURAL, "edited", {"spec": new.succeeds(success_report(after)).manifest(api.ns)["spec"]})

    wait_for(lambda: before.job_name not in job_names(api), timeout=60, desc="the superseded Job deleted")
    assert api.job_pods(before.job_name) == [], "its pod went first (foreground deletion)"
    engine = api.wait_phase("edited", "Ready", timeout=60)
    assert engine["status"]["engineKey"] == after.key
    assert job_names(api) == {after.job_name}, "the new key's Job, and only it"
    (message,) = wait_for(lambda: events(api, "edited", "BuildStopped"), desc="BuildStopped Event")
    assert f"stopped builder Job {before.job_name} (engine key {before.key[:12]}…)" in message
    assert f"now builds engine key {after.key[:12]}" in message
    # nothing but the Job: the build-spec ConfigMap (the operator's, owned by the LLMEngine) stays
    # until the LLMEngine goes; no artifact or cache entry of the old key was ever written
    assert api.configmap(before.job_name) is not None
    assert api.configmap(before.cache_name) is None


def test_an_engine_turning_invalid_mid_build_stops_its_job(api: Api, operator: None) -> None:
    eng = an_engine("broken-later").pod(**{OUTCOME: "run"})
    prepared = eng.prepared()
    api.create(eng)
    running_build(api, "broken-later", prepared)

    api.patch(
        ENGINE_PLURAL, "broken-later", {"spec": {"parallelism": {"tensor": 3}}}
    )  # 32 heads: InvalidSpec
    engine = api.wait_phase("broken-later", "Failed")
    assert engine["status"]["build"]["reason"] == "InvalidSpec"
    wait_for(lambda: job_names(api) == set(), timeout=60, desc="the Job of the now unwanted build deleted")
    (message,) = wait_for(lambda: events(api, "broken-later", "BuildStopped"), desc="BuildStopped Event")
    assert f"stopped builder Job {prepared.job_name}" in message
    assert "LLMEngine broken-later is InvalidSpec and wants no build" in message


def test_a_shared_build_is_stopped_only_when_no_engine_wants_its_key(api: Api, operator: None) -> None:
    a = an_engine("a").pod(**{OUTCOME: "run"})
    shared = a.prepared()
    api.create(a)
    job = running_build(api, "a", shared)
    api.create(an_engine("b").pod(**{OUTCOME: "run"}))  # the same key: b joins the running build

    def owners() -> list[str]:
        live = next((j for j in api.jobs() if j["metadata"]["name"] == shared.job_name), None)
        return sorted(o["name"] for o in ((live or {}).get("metadata") or {}).get("ownerReferences") or [])

    wait_for(lambda: owners() == ["a", "b"], desc="both LLMEngines own the one Job")

    moved = an_engine("a").max_batch_size(64)
    elsewhere = moved.prepared()
    api.patch(
        ENGINE_PLURAL, "a", {"spec": moved.succeeds(success_report(elsewhere)).manifest(api.ns)["spec"]}
    )
    api.wait_phase("a", "Ready", timeout=60)  # its new build ran and was recorded: a reconciled on it
    kept = next(j for j in api.jobs() if j["metadata"]["name"] == shared.job_name)
    assert kept["metadata"]["uid"] == job["metadata"]["uid"] and not kept["metadata"].get("deletionTimestamp")
    assert events(api, "a", "BuildStopped") == [], "b still wants the key"

    # b leaves the key too: nobody wants the build any more, and b (an owner) stops it
    api.patch(ENGINE_PLURAL, "b", {"spec": an_engine("b").max_batch_size(16).pod(**{OUTCOME: "run"}).spec})
    wait_for(lambda: shared.job_name not in job_names(api), timeout=60, desc="the shared Job deleted")
    (message,) = wait_for(lambda: events(api, "b", "BuildStopped"), desc="BuildStopped on b")
    assert shared.job_name in message


def test_an_engine_of_the_same_key_in_another_storage_does_not_keep_a_superseded_build(
    api: Api, operator: None
) -> None:
    """Fresh-user trial 46 T1: a build is shared per key and storage (the Job is
    build-<key>-<storage>). "other" has a's key in another S3 prefix, so it runs its own Job and can
    never read a's artifact: when a moves to another key, a's old Job is stopped all the same."""
    a = an_engine("a").pod(**{OUTCOME: "run"})
    before = a.prepared()
    api.create(a)
    running_build(api, "a", before)
    other = an_engine("other").s3("engines", prefix="elsewhere").pod(**{OUTCOME: "run"})
    theirs = other.prepared()
    assert theirs.key == before.key and theirs.job_name != before.job_name, "same key, another storage"
    api.create(other)
    running_build(api, "other", theirs)

    moved = an_engine("a").max_batch_size(64)
    api.patch(
        ENGINE_PLURAL,
        "a",
        {"spec": moved.succeeds(success_report(moved.prepared())).manifest(api.ns)["spec"]},
    )
    wait_for(lambda: before.job_name not in job_names(api), timeout=60, desc="a's superseded Job deleted")
    (message,) = wait_for(lambda: events(api, "a", "BuildStopped"), desc="BuildStopped on a")
    assert before.job_name in message and "wants that key in that storage" in message
    assert theirs.job_name in job_names(api), "other's own build of the key runs on"


# ----------------------------------------------------------------------------- expiry
def test_a_succeeded_job_expires_after_its_record_and_the_engine_stays_ready(
    api: Api, cluster: LocalCluster, namespace: str
) -> None:
    eng = an_engine("expiring")
    prepared = eng.prepared()
    mark = cluster.audit_mark()
    with running_operator(cluster, [namespace], builder_succeeded_job_ttl_seconds=0):
        api.create(eng.succeeds(success_report(prepared)))
        api.wait_phase("expiring", "Ready", timeout=60)
        wait_for(lambda: job_names(api) == set(), timeout=60, desc="the succeeded Job expired")
        # a reconcile after the Job is gone (a spec change outside the key: generation 2) decides
        # Ready from the record: nothing is rebuilt
        api.patch(ENGINE_PLURAL, "expiring", {"spec": {"gpu": {"podAnnotations": {DELAY_MS: "100"}}}})
        engine = wait_for(
            lambda: (
                e
                if (find_condition(e := api.engine("expiring"), "Ready") or {}).get("observedGeneration") == 2
                else None
            ),
            desc="generation 2 decided",
        )
    assert engine["status"]["phase"] == "Ready"
    assert condition(engine, "Progressing")["reason"] == "BuildSucceeded", "not ArtifactReused: it built it"
    assert engine["status"]["build"]["jobName"] == prepared.job_name
    assert api.jobs() == [] and api.configmap(prepared.cache_name) is not None
    assert "ArtifactReused" not in api.event_reasons("expiring")

    writes = [
        (e["verb"], e["objectRef"].get("resource"), e["objectRef"].get("name"), e.get("userAgent", ""))
        for e in cluster.audit_events(mark)
        if e["objectRef"].get("namespace") == namespace and e.get("responseStatus", {}).get("code", 0) < 300
    ]
    job_writes = [w for w in writes if w[1] == "jobs" and w[2] == prepared.job_name]
    record = next(i for i, w in enumerate(writes) if w[:3] == ("create", "configmaps", prepared.cache_name))
    ttl = next(i for i, w in enumerate(writes) if w[:3] == ("patch", "jobs", prepared.job_name))
    assert record < ttl, "the TTL is set only after the artifact is recorded"
    assert sum(1 for w in job_writes if w[0] == "create") == 1, "built once"
    deletes = [w for w in job_writes if w[0] == "delete"]
    assert deletes and all(w[3].endswith("ttl-after-finished-controller") for w in deletes), deletes


def test_a_failed_job_is_kept_and_its_engine_stays_failed(
    api: Api, cluster: LocalCluster, namespace: str
) -> None:
    """Failure memory is unchanged: even with a TTL of 0 for succeeded Jobs, a deterministic failure
    keeps its Job (no ttlSecondsAfterFinished), so the engine stays Failed and nothing rebuilds."""
    eng = an_engine("oom")
    report = build_report(status="Failed", reason="GPUOutOfMemory", stage="quantize", message="CUDA OOM")
    with running_operator(cluster, [namespace], builder_succeeded_job_ttl_seconds=0):
        api.create(eng.fails(EXIT_CODES["GPUOutOfMemory"], json.dumps(report)))
        api.wait_phase("oom", "Failed", timeout=60)
        (failed,) = api.jobs()
        api.patch(ENGINE_PLURAL, "oom", {"spec": {"gpu": {"podAnnotations": {DELAY_MS: "100"}}}})  # same key
        engine = wait_for(
            lambda: (
                e
                if (find_condition(e := api.engine("oom"), "Ready") or {}).get("observedGeneration") == 2
                else None
            ),
            desc="generation 2 decided",
        )
    assert engine["status"]["phase"] == "Failed"
    assert engine["status"]["build"]["reason"] == "GPUOutOfMemory"
    (job,) = api.jobs()
    assert job["metadata"]["uid"] == failed["metadata"]["uid"], "the same Job: nothing rebuilt"
    assert job["spec"].get("ttlSecondsAfterFinished") is None, "a failed builder Job never expires"
    assert len(api.job_pods(job["metadata"]["name"])) == 1
