"""The LLMEngine controller's decision, pure: what the world looks like → status, Event, actions.

One reconcile is two pure steps around the handler's reads:

1. :func:`~trtllm_operator.decide.engine_spec.prepare_engine` — the spec mapped to its build
   (:mod:`trtllm_operator.decide.engine_spec`; storage and names in
   :mod:`trtllm_operator.decide.storage`). Returns a ``PreparedEngine`` or an ``InvalidEngine``.
2. :func:`decide_engine` — given what the handler found (cache index entry for this key and
   storage, the builder Job and its pods, the build queue), the new status, conditions, the Event
   to post and the actions to take (:class:`CreateBuild`, :class:`RecordArtifact`,
   :class:`AdoptJob`, :class:`EnsurePVC`, :class:`~trtllm_operator.decide.engine_jobs.ExpireJob`),
   as an :class:`~trtllm_operator.decide.outcome.Outcome`.
   :func:`decide_invalid` does the same for an invalid spec.

Level-based: the decision depends only on the current state of the world, never on which event
triggered it, so running it twice (a retry, a restarted operator, a timer) is harmless.
Cache records live in :mod:`trtllm_operator.decide.engine_cache`, the Unschedulable hints in
:mod:`trtllm_operator.decide.engine_hints`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from trtllm_operator.api import (
    CONDITION_DEGRADED,
    CONDITION_PLANNED,
    CONDITION_PROGRESSING,
    CONDITION_READY,
    ENGINE_KIND,
)
from trtllm_operator.api.wire import BUILDER_CONTAINER, CHECK_CONTAINER, DELIVERY_CONTAINER, JOB_NAME_LABEL
from trtllm_operator.decide.conditions import Condition, condition
from trtllm_operator.decide.engine_cache import (
    CONDITION_ARTIFACT_COMPLETE,
    artifact_complete,
    artifact_status,
    record_from_build,
    verify_build,
)
from trtllm_operator.decide.engine_failure import (
    REASON_UNKNOWN,
    REASON_UNSCHEDULABLE,
    Failure,
    classify_failure,
    job_condition,
    latest_report,
    unschedulable_message,
)
from trtllm_operator.decide.engine_hints import ClaimState, pod_gpu_request, unschedulable_hint
from trtllm_operator.decide.engine_jobs import ExpireJob, expire_job
from trtllm_operator.decide.engine_progress import BuildProgress
from trtllm_operator.decide.engine_spec import (
    R_DOES_NOT_FIT,
    R_INVALID_SPEC,
    InvalidEngine,
    PreparedEngine,
    plan_status,
    plan_warnings,
)
from trtllm_operator.decide.outcome import EventToPost, Outcome
from trtllm_operator.decide.ownership import R_CHILD_CONFLICT, ChildConflict
from trtllm_operator.decide.pod_problems import Fixes, stuck_containers, stuck_summary

__all__ = [
    "R_DOES_NOT_FIT",
    "R_INVALID_SPEC",
    "Action",
    "AdoptJob",
    "BuildQueue",
    "BuildSlots",
    "CreateBuild",
    "EngineDecision",
    "EngineObservation",
    "EnsurePVC",
    "ExpireJob",
    "Phase",
    "RecordArtifact",
    "ReplaceBuild",
    "decide_conflict",
    "decide_engine",
    "decide_invalid",
    "plan_status",
]

Phase = Literal["Pending", "Planning", "Queued", "Building", "Unschedulable", "Ready", "Failed"]

# Event / condition reasons (stable; documented in docs/operator.md). InvalidSpec and DoesNotFit
# come with the spec (engine_spec), Complete / CompileSkipped / NoArtifact with the cache record.
R_PLANNED = "PlanFits"
R_PLAN_SKIPPED = "ModelConfigUnavailable"
R_PLAN_FETCHING = "FetchingModelConfig"
#: The plan fits and the planner warns (``status.plan.warnings``): a Warning Event when they change.
R_PLAN_WARNINGS = "PlanWarnings"
R_QUEUED = "Queued"
R_BUILD_STARTED = "BuildStarted"
R_BUILDING = "Building"
R_BUILD_RUNNING = "BuildRunning"
R_BUILD_UNSCHEDULABLE = "BuildUnschedulable"
#: A builder pod's container waits on something that will not clear by itself (a bad image, a missing
#: Secret key: :data:`~trtllm_operator.decide.pod_problems.STUCK_REASONS`).
R_BUILDER_POD_FAILING = "BuilderPodFailing"
R_BUILD_REPLACED = "BuildReplaced"
R_BUILD_SUCCEEDED = "BuildSucceeded"
R_BUILD_FAILED = "BuildFailed"
R_ARTIFACT_REUSED = "ArtifactReused"
R_ARTIFACT_READY = "ArtifactReady"
#: ``StorageExpanded`` (decide.pvc_growth) True: the operator-created claim was asked to grow to
#: ``spec.storage.createPVC.size``; False: the API server refused (a Warning Event too).
R_PVC_EXPANSION_REQUESTED = "PVCExpansionRequested"
R_PVC_EXPANSION_REFUSED = "PVCExpansionRefused"


@dataclass(frozen=True)
class CreateBuild:
    """Write the build-spec ConfigMap and create the builder Job (both named ``job_name``)."""

    job_name: str


@dataclass(frozen=True)
class ReplaceBuild:
    """Delete the builder Job (foreground: its pods go first) so the next reconcile creates it anew
    from the current spec. Only for a Job this LLMEngine controls whose pod was never scheduled."""

    job_name: str


@dataclass(frozen=True)
class AdoptJob:
    """Add this LLMEngine to the ownerReferences of an existing builder Job of the same key (the
    Job then lives until every LLMEngine waiting for it is gone)."""

    job_name: str


@dataclass(frozen=True)
class EnsurePVC:
    """Create the operator-managed artifact PVC if missing (never owned by the LLMEngine)."""

    claim_name: str


@dataclass(frozen=True)
class RecordArtifact:
    """Write the cache index entry for a completed build (create-or-keep). ``owned``: the entry is
    owned by the LLMEngine (only for an operator-created PVC with reclaimPolicy Delete)."""

    record: Mapping[str, Any]
    owned: bool = False


Action = CreateBuild | AdoptJob | EnsurePVC | RecordArtifact | ReplaceBuild | ExpireJob


@dataclass(frozen=True)
class BuildQueue:
    """The operator-wide build queue as seen by one reconcile (:func:`build_queue_of`).

    ``active``: builder Jobs holding a slot now (all watched namespaces), ``limit``: the
    concurrent-build setting, ``ahead``: LLMEngines Queued before this one in the queue's order
    (:func:`queue_ranks`: round-robin by namespace), ``unreconciled_ahead``: LLMEngines before this
    one without a phase yet (created with it, their first reconcile not written). Those count for the
    position only: one may turn out Ready from the cache and never queue, and holding this engine
    back for it would leave it Queued until the next queue move.
    """

    active: int
    limit: int
    ahead: int
    unreconciled_ahead: int = 0

    @property
    def may_start(self) -> bool:
        return self.active + self.ahead < self.limit

    @property
    def position(self) -> int:
        """1-based position among waiting builds (distinct for engines created together)."""
        return self.ahead + self.unreconciled_ahead + 1


#: Phases of an LLMEngine not reconciled yet (or still fetching its model config): ahead in the
#: order, it counts for the position (:attr:`BuildQueue.unreconciled_ahead`), so engines created at
#: the same moment get distinct positions whatever order their reconciles run in.
_UNRECONCILED_PHASES = (None, "", "Pending", "Planning")

#: An LLMEngine's place in the build queue (:func:`queue_ranks`): its turn in its namespace, when
#: that turn came (and whether a build's end brought it), then ``creationTimestamp``, namespace, name.
QueueRank = tuple[int, str, bool, str, str, str]


def _ref(obj: Mapping[str, Any]) -> tuple[str, str]:
    meta = obj.get("metadata") or {}
    return str(meta.get("namespace") or ""), str(meta["name"])


def is_waiting(engine: Mapping[str, Any]) -> bool:
    """Whether an LLMEngine takes part in the build queue: not being deleted, and ``Queued`` or not
    reconciled yet (:data:`_UNRECONCILED_PHASES`)."""
    if (engine.get("metadata") or {}).get("deletionTimestamp"):
        return False
    phase = (engine.get("status") or {}).get("phase")
    return phase == "Queued" or phase in _UNRECONCILED_PHASES


#: The builder's image (render.builder_job: the operator's builder_image, else spec.runtime.image).
BUILDER_IMAGE_FIELD = (
    "spec.runtime.image, or the operator's builder_image (chart value builder.image) when set"
)
#: The delivery init container's image (render.builder_job: settings.builder_delivery_image).
DELIVERY_IMAGE_FIELD = "the operator's builder_delivery_image (chart value builder.deliveryImage)"


def builder_fixes(prepared: PreparedEngine) -> Fixes:
    """The fields that set the builder pod's images and name the Secrets it reads
    (render.builder_job ``_env``): each ``credentialsSecretRef`` of the spec."""
    spec = prepared.spec
    secrets: dict[str, str] = {}
    if prepared.storage.kind == "s3" and prepared.storage.s3_secret:
        secrets[prepared.storage.s3_secret] = "spec.storage.s3.credentialsSecretRef"
    draft = spec.build.speculative_decoding.draft_model
    if draft is not None and draft.credentials_secret_ref is not None:
        secrets[draft.credentials_secret_ref.name] = (
            "spec.build.speculativeDecoding.draftModel.credentialsSecretRef"
        )
    if spec.model.credentials_secret_ref is not None:
        secrets[spec.model.credentials_secret_ref.name] = "spec.model.credentialsSecretRef"
    return Fixes(
        images={
            BUILDER_CONTAINER: BUILDER_IMAGE_FIELD,
            DELIVERY_CONTAINER: DELIVERY_IMAGE_FIELD,
            CHECK_CONTAINER: DELIVERY_IMAGE_FIELD,
        },
        secrets=secrets,
        image_default=BUILDER_IMAGE_FIELD,
    )


def holds_build_slot(job: Mapping[str, Any], pods: Sequence[Mapping[str, Any]]) -> bool:
    """Whether an active builder Job counts against ``maxConcurrentBuilds``: yes unless its pod cannot
    be scheduled (``PodScheduled=False``, reason ``Unschedulable``; the engine is in phase
    Unschedulable) or its container cannot start (a bad image, a missing Secret key:
    :func:`~trtllm_operator.decide.pod_problems.stuck_containers`, reason BuilderPodFailing). Such a
    build may wait forever (no node with the product, a Pending claim) or until
    activeDeadlineSeconds; it must not keep others queued behind it. When it does start later, more
    than ``limit`` builds may run for a while (docs/operator.md, "The build queue")."""
    if job_condition(job, "Complete") is not None or job_condition(job, "Failed") is not None:
        return False
    return unschedulable_message(pods) is None and not stuck_containers(pods)


@dataclass(frozen=True)
class BuildSlots:
    """What the builder Jobs say about the queue (:func:`build_slots`): ``held``: Jobs holding a slot
    per namespace; ``last_end``: per namespace, when its latest builder Job ended (the
    ``lastTransitionTime`` of its ``Complete`` or ``Failed`` condition, k8s.io/api batch/v1
    ``JobCondition``)."""

    held: Mapping[str, int] = field(default_factory=dict)
    last_end: Mapping[str, str] = field(default_factory=dict)

    @property
    def active(self) -> int:
        return sum(self.held.values())


def build_slots(jobs: Sequence[Mapping[str, Any]], pods: Sequence[Mapping[str, Any]]) -> BuildSlots:
    """:class:`BuildSlots` from the builder ``jobs`` and their ``pods`` (label
    ``batch.kubernetes.io/job-name``), all watched namespaces."""
    by_job: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    for pod in pods:
        meta = pod.get("metadata") or {}
        key = (str(meta.get("namespace") or ""), str((meta.get("labels") or {}).get(JOB_NAME_LABEL)))
        by_job.setdefault(key, []).append(pod)
    held: dict[str, int] = {}
    last_end: dict[str, str] = {}
    for job in jobs:
        namespace = _ref(job)[0]
        ended = job_condition(job, "Complete") or job_condition(job, "Failed")
        if ended is not None:
            at = str(ended.get("lastTransitionTime") or "")
            last_end[namespace] = max(last_end.get(namespace, ""), at)
        elif holds_build_slot(job, by_job.get(_ref(job), [])):
            held[namespace] = held.get(namespace, 0) + 1
    return BuildSlots(held, last_end)


def queue_ranks(
    waiting: Sequence[Mapping[str, Any]], slots: BuildSlots | None = None
) -> dict[tuple[str, str], QueueRank]:
    """The build queue's order over the ``waiting`` LLMEngines (all watched namespaces), keyed by
    (namespace, name): round-robin by namespace, so one namespace with many LLMEngines does not make
    the others wait behind all of them. An LLMEngine's rank is

    1. its turn: the builds its namespace holds a slot for, plus its index among its namespace's
       waiting LLMEngines (oldest ``creationTimestamp`` first, then name) — the k-th build of every
       namespace goes before the (k+1)-th of any, and within a namespace the order stays FIFO;
    2. when that turn came: its ``creationTimestamp``, or when its namespace's latest build ended if
       that is not earlier — so when a slot frees, a namespace that has just had it goes after one
       that was already waiting, also within the same second (with one slot, namespaces take turns
       instead of the oldest draining first);
    3. then ``creationTimestamp``, namespace, name.

    A pure function of the LLMEngines and the builder Jobs; total and deterministic (one distinct
    rank per (namespace, name): a later entry of the same name replaces an earlier one)."""
    slots = slots or BuildSlots()
    by_ref = {_ref(e): str((e.get("metadata") or {}).get("creationTimestamp") or "") for e in waiting}
    by_namespace: dict[str, list[tuple[str, str]]] = {}
    for (namespace, name), created in by_ref.items():
        by_namespace.setdefault(namespace, []).append((created, name))
    ranks: dict[tuple[str, str], QueueRank] = {}
    for namespace, members in by_namespace.items():
        held = slots.held.get(namespace, 0)
        since = slots.last_end.get(namespace, "")
        for index, (created, name) in enumerate(sorted(members)):
            after_build = bool(since) and since >= created
            ranks[(namespace, name)] = (
                held + index,
                max(created, since),
                after_build,
                created,
                namespace,
                name,
            )
    return ranks


def queue_order(
    engines: Sequence[Mapping[str, Any]], slots: BuildSlots | None = None
) -> list[tuple[str, str]]:
    """(namespace, name) of the waiting ``engines`` (:func:`is_waiting`), first in the queue first
    (:func:`queue_ranks`)."""
    ranks = queue_ranks([e for e in engines if is_waiting(e)], slots)
    return sorted(ranks, key=ranks.__getitem__)


def build_queue_of(
    engine: Mapping[str, Any],
    engines: Sequence[Mapping[str, Any]],
    jobs: Sequence[Mapping[str, Any]],
    pods: Sequence[Mapping[str, Any]],
    limit: int,
) -> BuildQueue:
    """The build queue as ``engine`` sees it: ``jobs`` are the builder Jobs and ``pods`` their pods
    (label ``batch.kubernetes.io/job-name``), ``engines`` the LLMEngines, all watched namespaces.
    ``engine`` takes part in the order whatever its phase (it is the one asking)."""
    slots = build_slots(jobs, pods)
    me = _ref(engine)
    others = [e for e in engines if _ref(e) != me and is_waiting(e)]
    ranks = queue_ranks([*others, engine], slots)
    before = [(other.get("status") or {}).get("phase") for other in others if ranks[_ref(other)] < ranks[me]]
    return BuildQueue(
        active=slots.active,
        limit=limit,
        ahead=before.count("Queued"),
        unreconciled_ahead=sum(1 for phase in before if phase in _UNRECONCILED_PHASES),
    )


@dataclass(frozen=True)
class EngineObservation:
    """What the handler read for one reconcile. Manifests are dicts as the API server returns them."""

    generation: int
    status: Mapping[str, Any]
    cache_entry: Mapping[str, Any] | None
    job: Mapping[str, Any] | None
    pods: Sequence[Mapping[str, Any]]
    queue: BuildQueue
    owns_job: bool = True
    pvc_exists: bool = True
    #: The builder's latest progress line (from the running pod's log), when the operator has one.
    progress: BuildProgress | None = None
    #: The PersistentVolumeClaims the builder mounts, as read while its pod is unschedulable
    #: (:func:`~trtllm_operator.decide.engine_hints.builder_claims`); empty otherwise.
    claims: Mapping[str, ClaimState] = field(default_factory=dict)
    #: What changed in the sizing of a builder Job this LLMEngine controls whose pod was never
    #: scheduled (``spec.gpu.resources`` edited after the Job was created), e.g.
    #: ``nvidia.com/gpu 16 → 1``; None when nothing did or the Job is not replaceable.
    job_outdated: str | None = None


#: The outcome of one LLMEngine reconcile (status merge patch, conditions, actions, Event).
EngineDecision = Outcome[Action]


def _conds(
    gen: int,
    *,
    ready: tuple[bool, str, str],
    progressing: tuple[bool, str, str],
    degraded: tuple[bool, str, str],
    planned: tuple[bool | str, str, str],
    artifact: tuple[bool | str, str, str] | None = None,
) -> list[Condition]:
    complete = artifact or artifact_complete(None)
    return [
        condition(CONDITION_READY, ready[0], ready[1], ready[2], observed_generation=gen),
        condition(
            CONDITION_PROGRESSING, progressing[0], progressing[1], progressing[2], observed_generation=gen
        ),
        condition(CONDITION_DEGRADED, degraded[0], degraded[1], degraded[2], observed_generation=gen),
        condition(CONDITION_PLANNED, planned[0], planned[1], planned[2], observed_generation=gen),
        condition(
            CONDITION_ARTIFACT_COMPLETE, complete[0], complete[1], complete[2], observed_generation=gen
        ),
    ]


def _planned(prepared: PreparedEngine) -> tuple[bool | str, str, str]:
    if prepared.plan is None:
        return "Unknown", R_PLAN_SKIPPED, prepared.plan_note or ""
    p = prepared.plan
    warned = f"; warnings on {', '.join(dict.fromkeys(w.field for w in p.warnings))} (status.plan.warnings)"
    return (
        True,
        R_PLANNED,
        f"{p.weight_bytes_per_gpu / 2**30:.1f} GiB weights per GPU, KV cache {p.max_kv_tokens} tokens "
        f"({p.max_concurrent_sequences} sequences of {p.max_seq_len} tokens) on {p.gpu_product}"
        + (warned if p.warnings else ""),
    )


def _plan_warnings_event(previous: Mapping[str, Any], prepared: PreparedEngine) -> EventToPost | None:
    """A Warning Event with the planner's warnings (docs/planner.md "Warnings") when they differ from
    the ``status.plan.warnings`` the previous status shows: once per change of the plan's warnings, so
    a reconcile of an unchanged engine posts nothing; None for a plan without warnings."""
    warnings = plan_warnings(prepared.plan)
    if not warnings or warnings == ((previous.get("plan") or {}).get("warnings") or []):
        return None
    return EventToPost(
        "Warning",
        R_PLAN_WARNINGS,
        "the plan fits, with warnings (status.plan.warnings): " + " ".join(warnings),
    )


def _event_for(
    previous: Mapping[str, Any], phase: str, reason: str, message: str, warning: bool
) -> EventToPost | None:
    """An Event when (phase, reason) differs from the previous status. The previous reason is the
    Degraded condition's when it was True, else the Progressing condition's — the same reasons
    the decisions put there, so a repeated reconcile of an unchanged state posts nothing."""
    prev: dict[str, Mapping[str, Any]] = {c.get("type", ""): c for c in previous.get("conditions") or []}
    degraded = prev.get(CONDITION_DEGRADED) or {}
    progressing = prev.get(CONDITION_PROGRESSING) or {}
    prev_reason = degraded.get("reason") if degraded.get("status") == "True" else progressing.get("reason")
    if previous.get("phase") == phase and prev_reason == reason:
        return None
    return EventToPost("Warning" if warning else "Normal", reason, message)


#: When a refused LLMEngine is looked at again (the Progressing message of a refusal). A refusal can
#: depend on other objects (a Secret's label, the operator's policy): those are re-read at every
#: reconcile, which any change of the LLMEngine (a label or annotation included) and the operator's
#: drift timer (setting ``resync_seconds``) start.
def recheck(retry_seconds: float) -> str:
    """The Progressing message of a refusal; ``retry_seconds``: the drift loop's period (setting
    ``resync_seconds``, passed by the handler: its one home is :mod:`trtllm_operator.settings`)."""
    return (
        "checked again when this LLMEngine changes (editing any label or annotation retries at once) and "
        f"within {retry_seconds:g} s at the operator's periodic resync (setting resyncSeconds)"
    )


def decide_invalid(invalid: InvalidEngine, obs: EngineObservation, retry_seconds: float) -> EngineDecision:
    """An invalid spec: phase Failed, Ready False, the field and the fix in the conditions. No action:
    the operator waits for the next spec change (never a hot loop)."""
    gen = obs.generation
    text = invalid.text
    planned: tuple[bool | str, str, str] = (False, invalid.reason, text)
    status = {
        "phase": "Failed",
        "observedGeneration": gen,
        # No key for an invalid spec: nothing of an earlier key's stays (its artifact included, which
        # ArtifactComplete's NoArtifact below would contradict: fresh-user trial 46 T9).
        "engineKey": None,
        "engineKeyShort": None,
        "artifact": None,
        "plan": plan_status(invalid.plan),
        "build": {"reason": invalid.reason, "message": text},
    }
    conds = _conds(
        gen,
        ready=(False, invalid.reason, text),
        progressing=(False, invalid.reason, recheck(retry_seconds)),
        degraded=(True, invalid.reason, text),
        planned=planned,
    )
    return EngineDecision(status, conds, [], _event_for(obs.status, "Failed", invalid.reason, text, True))


def decide_fetching(generation: int, status: Mapping[str, Any], message: str) -> EngineDecision | None:
    """Before the operator fetches the model's config.json from the Hub (seconds; about 23 more when
    the Hub cannot be reached: huggingface_hub 2.4.0 retries a failed metadata request with
    ``http_backoff``, waits 1, 2, 4, 8, 8 s): an LLMEngine without a phase gets phase ``Planning`` and
    ``Planned=Unknown`` ``FetchingModelConfig`` with ``message`` at once. None when it has a phase
    already (a later reconcile's fetch does not flip Ready, Building... to Planning)."""
    if status.get("phase") not in (None, "", "Pending"):
        return None
    conds = _conds(
        generation,
        ready=(False, R_PLAN_FETCHING, message),
        progressing=(True, R_PLAN_FETCHING, message),
        degraded=(False, R_PLAN_FETCHING, ""),
        planned=("Unknown", R_PLAN_FETCHING, message),
    )
    return EngineDecision({"phase": "Planning", "observedGeneration": generation}, conds, [], None)


def decide_conflict(
    prepared: PreparedEngine, conflict: ChildConflict, obs: EngineObservation, retry_seconds: float
) -> EngineDecision:
    """A child or record under this engine's names that the operator does not control or trust
    (:mod:`trtllm_operator.decide.ownership`): phase Failed, ``Ready=False`` reason ``ChildConflict``
    with what and why, no action. Re-checked on every reconcile: it clears once the object is gone;
    the message says when (``retry_seconds``: the drift loop's period, setting ``resync_seconds``)."""
    gen = obs.generation
    text = conflict.message(ENGINE_KIND, retry_seconds)
    status = {
        "phase": "Failed",
        "observedGeneration": gen,
        "engineKey": prepared.key,
        "engineKeyShort": prepared.key_short,
        "artifact": None,  # none is verified while the conflict stands (ArtifactComplete: NoArtifact)
        "plan": plan_status(prepared.plan),
        "build": {"reason": R_CHILD_CONFLICT, "message": text},
    }
    conds = _conds(
        gen,
        ready=(False, R_CHILD_CONFLICT, text),
        progressing=(
            False,
            R_CHILD_CONFLICT,
            "stopped: an object under this engine's names is not the operator's",
        ),
        degraded=(True, R_CHILD_CONFLICT, text),
        planned=_planned(prepared),
    )
    return EngineDecision(status, conds, [], _event_for(obs.status, "Failed", R_CHILD_CONFLICT, text, True))


def decide_engine(
    prepared: PreparedEngine, obs: EngineObservation, *, now: str, job_ttl_seconds: int | None = None
) -> EngineDecision:
    """Status, conditions, Event and actions for a valid LLMEngine (see the module docstring).

    Order of truth: a cache index entry for (key, storage) → Ready; else the builder Job's state;
    else start a build (or queue it). ``now``: RFC 3339 timestamp used for a new cache record.
    ``job_ttl_seconds``: the ``ttlSecondsAfterFinished`` a completed builder Job gets once its
    artifact is recorded (operator setting ``builder_succeeded_job_ttl_seconds``; None: kept —
    :func:`~trtllm_operator.decide.engine_jobs.expire_job`).
    """
    gen = obs.generation
    base: dict[str, Any] = {
        "observedGeneration": gen,
        "engineKey": prepared.key,
        "engineKeyShort": prepared.key_short,
        "plan": plan_status(prepared.plan),
    }
    planned = _planned(prepared)
    job = obs.job
    build: dict[str, Any] = {
        "jobName": job["metadata"]["name"] if job else None,
        "stage": None,
        "percent": None,
        "reason": None,
        "message": None,
    }
    actions: list[Action] = []

    def out(
        phase: Phase,
        *,
        ready: tuple[bool, str, str],
        progressing: tuple[bool, str, str],
        degraded: tuple[bool, str, str],
        event: EventToPost | None,
        record: Mapping[str, Any] | None = None,
        **fields: Any,
    ) -> EngineDecision:
        """The outcome in ``phase``; ``record``: the cache record (status.artifact, ArtifactComplete).
        Without a record for this key ``status.artifact`` is cleared: it describes the current key's
        artifact or nothing, as ArtifactComplete (NoArtifact) does — never an earlier key's (fresh-user
        trial 46 T9). Pods serving an earlier key keep it: their workload carries its URI, the cache
        entry keeps its record, and a deployment renders only from a Ready engine's status."""
        fields["artifact"] = artifact_status(record) if record is not None else None
        status = {**base, "phase": phase, **fields, "build": build}
        complete = artifact_complete(record) if record is not None else None
        conds = _conds(
            gen, ready=ready, progressing=progressing, degraded=degraded, planned=planned, artifact=complete
        )
        warned = _plan_warnings_event(obs.status, prepared)
        return EngineDecision(status, conds, actions, event, [warned] if warned else [])

    if job is not None and not obs.owns_job:
        actions.append(AdoptJob(prepared.job_name))

    # 1. the artifact is recorded: reuse it
    if obs.cache_entry is not None:
        record = obs.cache_entry
        # Built by this LLMEngine: its Job is still there, or it is gone (expired after the record,
        # engine_jobs.expire_job) and the status already said BuildSucceeded for this key.
        reused = record.get("builtBy") not in (None, prepared.name) or (
            job is None and not _succeeded_before(obs.status, prepared.key)
        )
        reason = R_ARTIFACT_REUSED if reused else R_BUILD_SUCCEEDED
        message = f"artifact {record.get('uri')} with engine key {prepared.key_short} is ready" + (
            " (reused, no build)" if reused else ""
        )
        if record.get("partial"):
            message += "; partial artifact: compile skipped, no TensorRT engine (see ArtifactComplete)"
        if record.get("stageTimings"):
            build["stageTimings"] = record.get("stageTimings")
        if record.get("calibration"):
            build["calibration"] = record.get("calibration")
        if job is not None:
            build.update(_job_times(job))
            expire = expire_job(job, job_ttl_seconds)
            if expire is not None:
                actions.append(expire)
        elif not reused:
            build["jobName"] = _built_by_job(record)  # the Job that built it (expired since)
        build["stage"] = "done" if not reused or job is not None else None
        build["percent"] = 100 if build["stage"] else None
        return out(
            "Ready",
            ready=(True, R_ARTIFACT_READY, message),
            progressing=(False, reason, message),
            degraded=(False, R_ARTIFACT_READY, ""),
            event=_event_for(obs.status, "Ready", reason, message, False),
            record=record,
        )

    # 2. a builder Job exists: follow it
    if job is not None:
        build.update(_job_times(job))
        if job_condition(job, "Complete"):
            report = latest_report(obs.pods, succeeded=True)
            unverified = verify_build(prepared, report, job_name=prepared.job_name, pods_left=bool(obs.pods))
            if unverified is not None or report is None:
                unverified = unverified or Failure(REASON_UNKNOWN, "no builder report", deterministic=False)
                message = unverified.message
                build.update(
                    reason=unverified.reason, message=message, stage=report.stage if report else None
                )
                return out(
                    "Failed",
                    ready=(False, R_BUILD_FAILED, message),
                    progressing=(False, unverified.reason, message),
                    degraded=(True, unverified.reason, message),
                    event=_event_for(
                        obs.status, "Failed", unverified.reason, f"{R_BUILD_FAILED}: {message}", True
                    ),
                )
            record = record_from_build(prepared, report, job_name=prepared.job_name, recorded_at=now)
            actions.append(RecordArtifact(record, owned=prepared.deletes_with_engine))
            expire = expire_job(job, job_ttl_seconds)  # after the record: the actions run in order
            if expire is not None:
                actions.append(expire)
            message = f"built artifact {record['uri']} (engine key {prepared.key_short})"
            if record.get("partial"):
                message += "; partial artifact: compile skipped, no TensorRT engine (see ArtifactComplete)"
            build.update(
                stage="done",
                percent=100,
                stageTimings=record.get("stageTimings"),
                calibration=record.get("calibration"),
            )
            return out(
                "Ready",
                ready=(True, R_ARTIFACT_READY, message),
                progressing=(False, R_BUILD_SUCCEEDED, message),
                degraded=(False, R_ARTIFACT_READY, ""),
                event=_event_for(obs.status, "Ready", R_BUILD_SUCCEEDED, message, False),
                record=record,
            )
        if job_condition(job, "Failed"):
            failure = classify_failure(job, obs.pods)
            report = latest_report(obs.pods, succeeded=False)
            retry = (
                "deterministic: fix the spec (a new engine key starts a new build)"
                if failure.deterministic
                else f"to retry with the same spec delete Job {prepared.job_name}"
            )
            message = f"{failure.message} [{retry}]"
            build.update(
                reason=failure.reason,
                message=message,
                stage=report.stage if report else None,
                stageTimings=dict(report.stage_timings) if report and report.stage_timings else None,
                calibration=dict(report.calibration) if report and report.calibration else None,
            )
            return out(
                "Failed",
                ready=(False, R_BUILD_FAILED, message),
                progressing=(False, failure.reason, message),
                degraded=(True, failure.reason, message),
                event=_event_for(obs.status, "Failed", failure.reason, f"{R_BUILD_FAILED}: {message}", True),
            )
        if obs.job_outdated is not None:
            actions.append(ReplaceBuild(prepared.job_name))
            message = (
                f"builder Job {prepared.job_name} has not started and its requests changed "
                f"({obs.job_outdated}): replacing it with one sized from the current spec.gpu.resources"
            )
            build.update(reason=R_BUILD_REPLACED, message=message, stage="scheduling")
            return out(
                "Building",
                ready=(False, R_BUILDING, "build not finished"),
                progressing=(True, R_BUILD_REPLACED, message),
                degraded=(False, R_BUILDING, ""),
                event=_event_for(obs.status, "Building", R_BUILD_REPLACED, message, False),
            )
        pending = unschedulable_message(obs.pods)
        if pending is not None:
            hint = unschedulable_hint(prepared, pending, obs.claims, pod_gpu_request(obs.pods))
            message = f"builder pod cannot be scheduled: {pending}{hint}"
            build.update(reason=REASON_UNSCHEDULABLE, message=message, stage="scheduling")
            return out(
                "Unschedulable",
                ready=(False, R_BUILD_UNSCHEDULABLE, message),
                progressing=(True, R_BUILD_UNSCHEDULABLE, message),
                degraded=(True, R_BUILD_UNSCHEDULABLE, message),
                event=_event_for(obs.status, "Unschedulable", R_BUILD_UNSCHEDULABLE, message, True),
            )
        stuck = stuck_containers(obs.pods)
        if stuck:
            # The kubelet retries, but nothing changes until the spec (or the Secret) does: without
            # this the build would sit in "starting" until activeDeadlineSeconds.
            message = (
                f"builder Job {prepared.job_name}: {stuck_summary(stuck, builder_fixes(prepared))} "
                "[the kubelet retries a fixed Secret or image by itself; a spec field outside the engine "
                f"key (a credentialsSecretRef) reaches the pod only if Job {prepared.job_name} is deleted]"
            )
            build.update(reason=R_BUILDER_POD_FAILING, message=message, stage="starting", percent=None)
            return out(
                "Building",
                ready=(False, R_BUILDER_POD_FAILING, message),
                progressing=(True, R_BUILDER_POD_FAILING, message),
                degraded=(True, R_BUILDER_POD_FAILING, message),
                event=_event_for(obs.status, "Building", R_BUILDER_POD_FAILING, message, True),
            )
        phases = {(p.get("status") or {}).get("phase") for p in obs.pods}
        # A pod that has finished while the Job controller has not yet marked the Job complete still
        # counts as running: "starting" again would post a second BuildStarted for the same build.
        # Only a new pod of a retry (Pending) is a new start.
        running = "Running" in phases or (bool(phases & {"Succeeded", "Failed"}) and "Pending" not in phases)
        reason = R_BUILD_RUNNING if running else R_BUILD_STARTED
        message = f"builder Job {prepared.job_name} " + ("running" if running else "starting")
        build.update(stage="running" if running else "starting", percent=None)
        if running and obs.progress is not None:
            build.update(obs.progress.status())
        return out(
            "Building",
            ready=(False, R_BUILDING, "build not finished"),
            progressing=(True, reason, message),
            degraded=(False, R_BUILDING, ""),
            event=_event_for(obs.status, "Building", reason, message, False),
        )

    # 3. nothing yet: start a build, or wait in the queue
    if not obs.queue.may_start:
        q = obs.queue
        message = (
            f"queued at position {q.position}: {q.active} of {q.limit} concurrent builds running "
            "(operator setting maxConcurrentBuilds)"
        )
        build.update(reason=R_QUEUED, message=message, stage="queued", jobName=None)
        return out(
            "Queued",
            ready=(False, R_QUEUED, message),
            progressing=(True, R_QUEUED, message),
            degraded=(False, R_QUEUED, ""),
            event=_event_for(obs.status, "Queued", R_QUEUED, message, False),
        )
    if prepared.storage.created_by_operator and not obs.pvc_exists:
        actions.append(EnsurePVC(prepared.storage.claim_name or ""))
    actions.append(CreateBuild(prepared.job_name))
    message = f"created builder Job {prepared.job_name} for engine key {prepared.key_short}"
    build.update(jobName=prepared.job_name, stage="starting")
    return out(
        "Building",
        ready=(False, R_BUILDING, "build not finished"),
        progressing=(True, R_BUILD_STARTED, message),
        degraded=(False, R_BUILDING, ""),
        event=_event_for(obs.status, "Building", R_BUILD_STARTED, message, False),
    )


def _succeeded_before(status: Mapping[str, Any], key: str) -> bool:
    """Whether the previous status says this LLMEngine's build of ``key`` succeeded (Progressing
    reason BuildSucceeded): its builder Job may since have expired."""
    if status.get("engineKey") != key:
        return False
    return any(
        c.get("type") == CONDITION_PROGRESSING and c.get("reason") == R_BUILD_SUCCEEDED
        for c in status.get("conditions") or []
    )


def _built_by_job(record: Mapping[str, Any]) -> str | None:
    """The builder Job named in a cache record's ``source`` (``job/<name>``), or None."""
    source = str(record.get("source") or "")
    return source[len("job/") :] if source.startswith("job/") else None


def _job_times(job: Mapping[str, Any]) -> dict[str, Any]:
    st = job.get("status") or {}
    out: dict[str, Any] = {
        "startTime": st.get("startTime"),
        "completionTime": st.get("completionTime"),
        "attempts": int(st.get("failed") or 0) + int(st.get("succeeded") or 0) + int(st.get("active") or 0),
    }
    return out
