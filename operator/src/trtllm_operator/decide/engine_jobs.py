"""Builder Jobs nobody needs any more, pure: a superseded build is stopped, a recorded one expires.

Builds are shared per content-addressed key and storage: the builder Job of a key and storage is
named from them (:func:`~trtllm_operator.decide.storage.builder_job_name`), the LLMEngine that starts
it is its controller owner and every other LLMEngine of the same key and storage that finds it
running joins it as a further owner (``AdoptJob``). Two decisions about such Jobs live here:

* **Stop a superseded build** (:func:`superseded_builds`). An LLMEngine whose engine key changed (an
  engine-defining edit) or that turned invalid (``InvalidSpec``, ``DoesNotFit`` or a refusal of the
  admin's policy: it wants no build at all) may still own a running builder Job of its old key. That
  Job burns GPU hours for an engine nobody wants, unless another LLMEngine still wants that key in
  that storage (an LLMEngine of the same key but another storage builds its own Job, and could never
  read this one's artifact). The operator deletes it only when all of this holds: the Job carries
  the builder's labels and full-key annotation and an ownerReference to this LLMEngine (the operator
  made it for this engine, :func:`~trtllm_operator.decide.ownership.marker_conflict` rules), it has
  not finished (a finished Job holds no GPU; a failed one is the memory of a deterministic failure,
  below), it is not being deleted, and no other LLMEngine of the namespace wants its key in its
  storage (the Job's ``storage-id`` label against
  :func:`~trtllm_operator.decide.storage.engine_storage_id` of the other LLMEngine's spec) — where
  an LLMEngine of that storage whose current generation has not been decided yet (no status for it,
  or still ``Pending`` / ``Planning``) counts as wanting it: its key is unknown, so the Job is kept
  and looked at again at the next reconcile; so does one whose storage cannot be told (a Job without
  the label, a spec without a parseable ``storage``). Artifacts, cache entries, PVCs and anything a
  user made are never touched.
* **Expire a recorded build** (:func:`expire_job`). A builder Job that completed and whose artifact
  is recorded in the engine cache has done its work: the record (the cache index entry,
  ``status.artifact``) is what every later reconcile reads. The operator then sets the Job's
  ``spec.ttlSecondsAfterFinished`` (operator setting ``builder_succeeded_job_ttl_seconds``) and
  Kubernetes' TTL-after-finished controller deletes it, with its pods, that long after it finished
  (counted from the ``Complete`` condition's ``lastTransitionTime``, foreground, conditional on the
  Job's UID: kubernetes/kubernetes ``pkg/controller/ttlafterfinished/ttlafterfinished_controller.go``
  ``processJob`` / ``jobFinishTime``, commit 003e8629).
  The field may be set on a Job that has already finished ("You can set the TTL seconds at any
  time … Manually set this field of existing, already finished Jobs", kubernetes.io
  docs/concepts/workloads/controllers/ttlafterfinished, "Updating TTL for finished Jobs"; the API
  server's update validation, kubernetes/kubernetes ``pkg/apis/batch/validation/validation.go``
  ``ValidateJobSpecUpdate``, makes ``completions``, ``selector`` and the pod template immutable
  (commit 3989b185; later versions add ``completionMode``, ``podFailurePolicy``,
  ``backoffLimitPerIndex``, ``managedBy``, ``successPolicy``), never ``ttlSecondsAfterFinished``;
  tests/integration/test_builder_jobs.py patches a finished Job on the v1.34.4 API server of the
  test control plane). A **failed** Job never gets a TTL: under its
  key-derived name it is what keeps a deterministic failure from being rebuilt in a loop (the
  LLMEngine stays ``Failed`` while it exists; deleting it is how a user asks for a retry), and a
  Job that completed without a verifiable report (``ArtifactMissing``, ``ArtifactUnverified``) has
  no record, so it is kept the same way.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from trtllm_operator.api.owners import is_owned_by
from trtllm_operator.api.wire import (
    ANNOTATION_ENGINE_KEY,
    COMPONENT_BUILDER,
    LABEL_COMPONENT,
    LABEL_MANAGED_BY,
    LABEL_STORAGE_ID,
    MANAGED_BY,
)
from trtllm_operator.decide.engine_failure import job_condition
from trtllm_operator.decide.storage import engine_storage_id

#: Event reason: the operator deleted a builder Job no LLMEngine wants any more.
R_BUILD_STOPPED = "BuildStopped"

#: Phases of an LLMEngine whose engine key is not decided yet (its key is unknown).
_UNDECIDED_PHASES = (None, "", "Pending", "Planning")


@dataclass(frozen=True)
class StopBuild:
    """Delete builder Job ``job_name`` (foreground; conditional on its ``uid`` and
    ``resource_version``, so a Job another LLMEngine joined meanwhile is not deleted); ``message``
    says which Job and why (the Event posted on the LLMEngine)."""

    job_name: str
    uid: str
    resource_version: str
    key: str
    message: str


@dataclass(frozen=True)
class ExpireJob:
    """Set ``spec.ttlSecondsAfterFinished`` of the completed builder Job ``job_name`` (its artifact
    is recorded), conditional on the ``resource_version`` it was judged at."""

    job_name: str
    ttl_seconds: int
    resource_version: str


def is_finished(job: Mapping[str, Any]) -> bool:
    """Whether the Job has a ``Complete`` or ``Failed`` condition (True)."""
    return job_condition(job, "Complete") is not None or job_condition(job, "Failed") is not None


def is_operator_builder(job: Mapping[str, Any]) -> bool:
    """Whether ``job`` carries the builder's managed-by and component labels and a full engine key
    annotation — what every builder Job the operator creates has
    (:func:`~trtllm_operator.render.builder_job.builder_identity`)."""
    meta = job.get("metadata") or {}
    labels = meta.get("labels") or {}
    return (
        labels.get(LABEL_MANAGED_BY) == MANAGED_BY
        and labels.get(LABEL_COMPONENT) == COMPONENT_BUILDER
        and bool((meta.get("annotations") or {}).get(ANNOTATION_ENGINE_KEY))
    )


def wants_key(engine: Mapping[str, Any], key: str) -> bool | None:
    """Whether ``engine`` wants engine key ``key`` now: True or False, or None when its current
    generation has not been decided yet (no status for it, or phase Pending / Planning). An
    LLMEngine being deleted wants nothing."""
    meta = engine.get("metadata") or {}
    if meta.get("deletionTimestamp"):
        return False
    status = engine.get("status") or {}
    if status.get("observedGeneration") != meta.get("generation") or status.get("phase") in _UNDECIDED_PHASES:
        return None
    return status.get("engineKey") == key


def wants_build(engine: Mapping[str, Any], key: str, storage_id: str | None) -> bool | None:
    """Whether ``engine`` wants the build of engine key ``key`` in the storage ``storage_id`` (a
    builder Job's ``storage-id`` label; None: unknown): False when its spec's storage is another one
    (:func:`~trtllm_operator.decide.storage.engine_storage_id`; whatever its key, it builds its own
    Job), else :func:`wants_key`."""
    if storage_id is not None:
        theirs = engine_storage_id(engine)
        if theirs is not None and theirs != storage_id:
            return False
    return wants_key(engine, key)


def superseded_builds(
    engine: Mapping[str, Any],
    *,
    wanted_job: str | None,
    why: str,
    jobs: Sequence[Mapping[str, Any]],
    engines: Sequence[Mapping[str, Any]],
) -> list[StopBuild]:
    """The builder Jobs to stop for ``engine`` (see the module docstring), in name order.

    ``wanted_job``: the builder Job the LLMEngine's current spec maps to (None: it wants none, its
    spec is invalid or refused); ``why``: what changed, for the message; ``jobs``: candidate builder
    Jobs of its namespace; ``engines``: every LLMEngine of the namespace (``engine`` included).
    """
    meta = engine["metadata"]
    uid = str(meta["uid"])
    others = [e for e in engines if (e.get("metadata") or {}).get("uid") != uid]
    out: list[StopBuild] = []
    for job in sorted(jobs, key=lambda j: str(j["metadata"]["name"])):
        jm = job["metadata"]
        if jm["name"] == wanted_job or jm.get("deletionTimestamp") or is_finished(job):
            continue
        if not is_operator_builder(job) or not is_owned_by(job, uid):
            continue
        key = str(jm["annotations"][ANNOTATION_ENGINE_KEY])
        storage_id = (jm.get("labels") or {}).get(LABEL_STORAGE_ID)
        if any(wants_build(e, key, storage_id) is not False for e in others):
            continue
        out.append(
            StopBuild(
                job_name=str(jm["name"]),
                uid=str(jm.get("uid") or ""),
                resource_version=str(jm.get("resourceVersion") or ""),
                key=key,
                message=(
                    f"stopped builder Job {jm['name']} (engine key {key[:12]}…): {why}, and no other "
                    "LLMEngine in the namespace wants that key in that storage; the artifact storage "
                    "and the engine cache are untouched"
                ),
            )
        )
    return out


def superseded_why(name: str, *, new_key_short: str | None, invalid_reason: str | None = None) -> str:
    """The reason part of a :class:`StopBuild` message: the LLMEngine's new key, or why it wants no
    build (``invalid_reason``: InvalidSpec, DoesNotFit or a policy refusal)."""
    if new_key_short is not None:
        return f"LLMEngine {name} now builds engine key {new_key_short}…"
    return f"LLMEngine {name} is {invalid_reason or 'invalid'} and wants no build"


def expire_job(job: Mapping[str, Any], ttl_seconds: int | None) -> ExpireJob | None:
    """The TTL to set on a builder Job whose artifact is recorded: an :class:`ExpireJob` when the
    Job completed (``Complete``; never a ``Failed`` one), is not being deleted and its
    ``ttlSecondsAfterFinished`` differs from ``ttl_seconds``; None otherwise or when ``ttl_seconds``
    is None (the setting keeps succeeded Jobs)."""
    meta = job.get("metadata") or {}
    if ttl_seconds is None or meta.get("deletionTimestamp") or job_condition(job, "Complete") is None:
        return None
    if job_condition(job, "Failed") is not None:
        return None
    if (job.get("spec") or {}).get("ttlSecondsAfterFinished") == ttl_seconds:
        return None
    return ExpireJob(str(meta["name"]), ttl_seconds, str(meta.get("resourceVersion") or ""))
