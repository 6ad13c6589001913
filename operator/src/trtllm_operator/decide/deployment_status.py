"""``LLMDeployment.status`` from what the controller observed. Pure: no client, no clock.

One function, :func:`deployment_status`, turns an :class:`Observation` into the status fields this
controller owns and the conditions it writes (``Ready``, ``Progressing``, ``Degraded``,
``EngineIncompatible``, ``Streaming``); ``status.autoscaling`` and ``ScalingLimited`` belong to the
autoscaler and are never touched here. Condition times are filled in by
:func:`trtllm_operator.decide.conditions.merge_conditions`.

Phases (API ``DeploymentPhase``): ``Pending`` — waiting for the engine (``Failed`` when the engine
itself is ``Failed``: reason ``EngineFailed`` names it and its reason); ``Progressing`` — rolling
out or starting replicas; ``Ready`` — every replica Ready on the desired engine key; ``Degraded`` —
serving, but a rollout failed or was rolled back; ``Failed`` — cannot be served as specified
(incompatible engine, no LeaderWorkerSet, bad settings).

``engineKey`` reports the key actually served by **every** pod: it moves to the new key only when
the rollout is complete (:func:`trtllm_operator.decide.rollout.rollout_progress`); during a rollout
it keeps the previous value.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from trtllm_operator.api import CONDITION_STREAMING
from trtllm_operator.decide.compatibility import Incompatibility
from trtllm_operator.decide.outcome import EventToPost, Outcome
from trtllm_operator.decide.rollout import RollbackDecision, RolloutProgress

READY = "Ready"
PROGRESSING = "Progressing"
DEGRADED = "Degraded"
ENGINE_INCOMPATIBLE = "EngineIncompatible"
STREAMING = CONDITION_STREAMING

EngineState = Literal["missing", "not_ready", "failed", "ready"]


def engine_readiness(engine: Mapping[str, Any] | None) -> tuple[EngineState, str]:
    """``(missing|not_ready|failed|ready, message)``: Ready means phase Ready, a key and an artifact,
    and a status that describes the engine's current spec (``observedGeneration``); failed means
    phase ``Failed`` for the current spec (the message names the engine and its Ready reason)."""
    if engine is None:
        return "missing", ""
    status = engine.get("status") or {}
    ready = next((c for c in status.get("conditions") or () if c.get("type") == "Ready"), None)
    name = engine["metadata"]["name"]
    generation = engine["metadata"].get("generation")
    observed = status.get("observedGeneration", generation)
    if status.get("phase") == "Ready" and status.get("engineKey") and status.get("artifact"):
        if observed == generation:
            return "ready", ""
        # The spec changed and the engine controller has not caught up: its status (key, artifact)
        # describes the previous spec. Rendering now would pair the old key with new settings.
        return "not_ready", f"waiting for LLMEngine {name!r} to observe generation {generation}"
    detail = f": {ready.get('reason')}: {ready.get('message')}" if ready and ready.get("message") else ""
    if status.get("phase") == "Failed" and observed == generation:
        # The failure class (ArtifactMissing, GPUOutOfMemory, DoesNotFit …) is the Degraded reason;
        # Ready's is the generic BuildFailed / InvalidSpec.
        degraded = next((c for c in status.get("conditions") or () if c.get("type") == "Degraded"), None)
        why = degraded if degraded and degraded.get("status") == "True" and degraded.get("message") else ready
        cause = f": {why.get('reason')}: {why.get('message')}" if why and why.get("message") else ""
        return "failed", (
            f"LLMEngine {name!r} failed{cause}; fix it (kubectl describe llmengine {name}): this "
            "deployment is rendered once the engine is Ready"
        )
    return "not_ready", f"waiting for LLMEngine {name!r} (phase {status.get('phase') or 'Pending'}){detail}"


@dataclass(frozen=True)
class Observation:
    """Everything :func:`deployment_status` needs.

    ``engine_state``/``engine_message``: the referenced LLMEngine; ``incompatibilities``: the
    compatibility gate; ``blocked``: ``(reason, message)`` when the replica cannot be placed or
    rendered (e.g. ``LeaderWorkerSetRequired``); ``progress``: pod counts by key (``None`` before
    the workload exists); ``pods``/``ready_pods``: non-terminating pods of the deployment;
    ``previous_engine_key``: ``status.engineKey`` before this reconcile; ``rolled_back``: set while a
    failed key is held back.
    """

    generation: int
    spec_replicas: int
    engine_name: str
    engine_state: EngineState
    engine_message: str = ""
    desired_engine_key: str | None = None
    incompatibilities: Sequence[Incompatibility] = ()
    blocked: tuple[str, str] | None = None
    progress: RolloutProgress | None = None
    updated_replicas: int = 0
    pods: int = 0
    ready_pods: int = 0
    deadline_exceeded: bool = False
    previous_engine_key: str | None = None
    rolled_back: RollbackDecision | None = None
    endpoint: str | None = None
    selector: str | None = None
    #: ``status.conditions`` before this reconcile (their transitions become Events).
    previous_conditions: Sequence[Mapping[str, Any]] = ()
    #: ``spec.server.decoupled`` (the ``Streaming`` condition); None: not reported.
    decoupled: bool | None = None


#: The outcome of one LLMDeployment reconcile: status fields (camelCase, ready to patch), the
#: conditions to merge and the Events of their transitions. No actions: the controller applies the
#: rendered children before it decides the status.
DeploymentDecision = Outcome[None]

#: Ready=False reasons that are expected steps, not problems (Normal events).
_WAITING = frozenset({"EngineNotReady", "ReplicasStarting", "EngineRollout"})


def condition_events(
    old: Sequence[Mapping[str, Any]] | None, new: Sequence[dict[str, Any]]
) -> list[EventToPost]:
    """The Events of the transitions from ``old`` to ``new`` a user reads in ``kubectl describe``:
    ``Ready`` changing status or reason (the phase story: EngineNotReady → ReplicasStarting →
    AllReplicasReady, Scaling, EngineRollout, a problem); ``Progressing`` only when ``Ready`` did
    not change with it (in every other outcome it repeats Ready's reason); ``EngineIncompatible``
    turning True, or back to False after it was True (not its first "Compatible"). A Warning for a
    problem (incompatible engine, Ready=False for a reason that is not an expected step), else
    Normal. Message ``<type>=<status>: <message>``.

    One Event per condition and transition cost 7 Events per LLMDeployment created
    (benchmarks/scale.py); this is 3."""
    changed = transitions(old, new)
    ready_changed = any(c["type"] == READY for c in changed)
    was_incompatible = any(
        c.get("type") == ENGINE_INCOMPATIBLE and c.get("status") == "True" for c in old or ()
    )
    out: list[EventToPost] = []
    for cond in changed:
        if cond["type"] == PROGRESSING and ready_changed:
            continue
        if cond["type"] == ENGINE_INCOMPATIBLE and cond["status"] != "True" and not was_incompatible:
            continue
        if cond["type"] not in (READY, PROGRESSING, ENGINE_INCOMPATIBLE):
            continue
        problem = cond["type"] == ENGINE_INCOMPATIBLE and cond["status"] == "True"
        problem |= cond["type"] == READY and cond["status"] == "False" and cond["reason"] not in _WAITING
        message = f"{cond['type']}={cond['status']}: {cond['message']}"
        out.append(EventToPost("Warning" if problem else "Normal", cond["reason"], message))
    return out


#: What the backends answer a streaming request on a model that is not decoupled: tensorrtllm_backend
#: ``inflight_batcher_llm/src/utils.cc`` (``createRequestsFromInputTensors``) throws "Streaming is
#: only supported if model is deployed using decoupled mode."; the LLM-API model (TensorRT-LLM
#: ``triton_backend/all_models/llmapi/tensorrt_llm/1/model.py``) raises "Streaming is only supported
#: in decoupled mode."; tensorrtllm_backend ``docs/model_config.md`` (commit 7bc57da): ``decoupled_mode``
#: "Must be set to `true` for requests setting the `stream` tensor to `true`".
STREAMING_OFF = (
    "spec.server.decoupled is false: requests that stream (KServe generate_stream or a stream: true "
    'input, gRPC streaming, OpenAI stream: true) are refused by the backend with "Streaming is only '
    'supported if model is deployed using decoupled mode"; non-streaming requests work. To stream, '
    "set spec.server.decoupled: true (the pods roll)"
)
STREAMING_ON = (
    "spec.server.decoupled is true: streaming requests get one response per generated token "
    "(generate_stream, gRPC streaming, OpenAI stream: true); non-streaming requests one response"
)


def streaming_condition(decoupled: bool, generation: int, waiting_for: str | None = None) -> dict[str, Any]:
    """The ``Streaming`` condition of ``spec.server.decoupled``: ``True``/``Decoupled`` or
    ``False``/``NotDecoupled`` (the message says what a streaming request gets and the fix).

    ``waiting_for``: the LLMEngine is not Ready (building, failed, missing), so no model is served
    and nothing answers a request yet: ``Unknown``/``EngineNotReady``, the message saying what a
    streaming request will get once it is."""
    then = STREAMING_ON if decoupled else STREAMING_OFF
    if waiting_for is not None:
        message = f"no model is served yet (LLMEngine {waiting_for!r} is not Ready); once it is: {then}"
        return {**_cond(STREAMING, False, "EngineNotReady", message, generation), "status": "Unknown"}
    if decoupled:
        return _cond(STREAMING, True, "Decoupled", then, generation)
    return _cond(STREAMING, False, "NotDecoupled", then, generation)


def _cond(type_: str, status: bool, reason: str, message: str, generation: int) -> dict[str, Any]:
    return {
        "type": type_,
        "status": "True" if status else "False",
        "reason": reason,
        "message": message,
        "observedGeneration": generation,
    }


def deployment_status(obs: Observation) -> DeploymentDecision:
    """The status this controller writes for ``obs`` (see the module docstring for the rules), and
    the Events of the condition transitions from ``obs.previous_conditions``."""
    gen = obs.generation
    fields: dict[str, Any] = {
        "observedGeneration": gen,
        "desiredReplicas": obs.spec_replicas,
        "replicas": obs.pods,
        "readyReplicas": obs.ready_pods,
        "updatedReplicas": obs.updated_replicas,
        "engineKey": obs.previous_engine_key,
        "endpoint": obs.endpoint,
        "selector": obs.selector,
    }

    def out(phase: str, *conds: dict[str, Any]) -> DeploymentDecision:
        conditions = list(conds)
        if obs.decoupled is not None:
            waiting = None if obs.engine_state == "ready" else obs.engine_name
            conditions.append(streaming_condition(obs.decoupled, gen, waiting))
        return Outcome(
            {**fields, "phase": phase},
            conditions,
            events=condition_events(obs.previous_conditions, conditions),
        )

    if obs.engine_state == "failed":
        # Not a wait: the engine will not become Ready without a change. Say so, naming it.
        msg = obs.engine_message or f"LLMEngine {obs.engine_name!r} failed"
        return out(
            "Failed",
            _cond(READY, False, "EngineFailed", msg, gen),
            _cond(PROGRESSING, False, "EngineFailed", msg, gen),
            _cond(DEGRADED, True, "EngineFailed", msg, gen),
        )
    if obs.engine_state != "ready":
        reason = "EngineNotFound" if obs.engine_state == "missing" else "EngineNotReady"
        msg = obs.engine_message or (
            f"LLMEngine {obs.engine_name!r} not found in this namespace: create it or fix spec.engineRef.name"
            if obs.engine_state == "missing"
            else f"waiting for LLMEngine {obs.engine_name!r} to become Ready"
        )
        return out(
            "Pending",
            _cond(READY, False, reason, msg, gen),
            _cond(PROGRESSING, False, reason, msg, gen),
        )

    if obs.incompatibilities:
        msg = "; ".join(i.message() for i in obs.incompatibilities) + ": nothing was rolled out"
        reason = "ImageMismatch" if obs.incompatibilities[0].field == "spec.server.image" else "GPUMismatch"
        return out(
            "Failed",
            _cond(ENGINE_INCOMPATIBLE, True, reason, msg, gen),
            _cond(READY, False, "EngineIncompatible", msg, gen),
            _cond(PROGRESSING, False, "EngineIncompatible", msg, gen),
            _cond(DEGRADED, True, "EngineIncompatible", msg, gen),
        )
    compatible = _cond(ENGINE_INCOMPATIBLE, False, "Compatible", "server image and GPU match the engine", gen)

    if obs.blocked is not None:
        reason, msg = obs.blocked
        return out(
            "Failed",
            compatible,
            _cond(READY, False, reason, msg, gen),
            _cond(PROGRESSING, False, reason, msg, gen),
            _cond(DEGRADED, True, reason, msg, gen),
        )

    progress = obs.progress
    ready_msg = f"{obs.ready_pods}/{obs.spec_replicas} replicas Ready"
    all_ready = obs.ready_pods >= obs.spec_replicas

    if obs.rolled_back is not None:
        msg = obs.rolled_back.reason
        return out(
            "Degraded",
            compatible,
            _cond(READY, all_ready, "RolledBack", f"{ready_msg}; {msg}", gen),
            _cond(PROGRESSING, False, "RolledBack", msg, gen),
            _cond(DEGRADED, True, "RolledBack", msg, gen),
        )

    if progress is not None and progress.complete:
        fields["engineKey"] = obs.desired_engine_key
        reason = "ScaledToZero" if obs.spec_replicas == 0 else "AllReplicasReady"
        return out(
            "Ready",
            compatible,
            _cond(READY, True, reason, progress.message, gen),
            _cond(PROGRESSING, False, "RolloutComplete", progress.message, gen),
            _cond(DEGRADED, False, "AsExpected", progress.message, gen),
        )

    msg = progress.message if progress is not None else "creating the workload"
    if obs.deadline_exceeded:
        msg = f"{msg}; no progress within spec.rollout.progressDeadlineSeconds"
        return out(
            "Degraded",
            compatible,
            _cond(READY, False, "ProgressDeadlineExceeded", msg, gen),
            _cond(PROGRESSING, False, "ProgressDeadlineExceeded", msg, gen),
            _cond(DEGRADED, True, "ProgressDeadlineExceeded", msg, gen),
        )
    rolling_key = obs.previous_engine_key not in (None, obs.desired_engine_key)
    if not rolling_key and obs.previous_engine_key is not None and obs.ready_pods >= 1:
        # Same engine, only the replica count changed (kubectl scale, the autoscaler): the
        # deployment keeps serving, so Ready stays True — a GitOps health check must not flap on
        # every autoscaling step. Progressing says what is moving.
        scaling = f"{obs.ready_pods} Ready, {obs.spec_replicas} desired; {msg}"
        return out(
            "Ready",
            compatible,
            _cond(READY, True, "Scaling", scaling, gen),
            _cond(PROGRESSING, True, "Scaling", scaling, gen),
            _cond(DEGRADED, False, "AsExpected", msg, gen),
        )
    reason = "EngineRollout" if rolling_key else "ReplicasStarting"
    return out(
        "Progressing",
        compatible,
        _cond(READY, False, reason, f"{ready_msg}; {msg}", gen),
        _cond(PROGRESSING, True, reason, msg, gen),
        _cond(DEGRADED, False, "AsExpected", msg, gen),
    )


#: Event reason (Warning) when the workload's replica count, changed on the workload itself, is
#: set back to the LLMDeployment's ``spec.replicas``.
WORKLOAD_SCALE_REVERTED = "WorkloadScaleReverted"


def workload_scale_reverted(
    name: str,
    workload: str,
    *,
    live_replicas: int | None,
    spec_replicas: int,
    last_desired: int | None,
    autoscaled: bool,
) -> EventToPost | None:
    """The Warning to post when the workload (Deployment / LeaderWorkerSet ``workload``, e.g.
    ``Deployment/chat``) was scaled directly and is about to be set back to ``spec_replicas``.

    ``last_desired``: ``status.desiredReplicas`` of the previous reconcile (what the workload was
    last given). A live count equal to it is a pending ``spec.replicas`` change, not a manual scale;
    ``None`` (never reconciled) says nothing.
    """
    if live_replicas is None or last_desired is None or live_replicas in (spec_replicas, last_desired):
        return None
    owner = (
        "spec.autoscaling is enabled, so the autoscaler sets spec.replicas: change "
        "spec.autoscaling.minReplicas / maxReplicas, or set spec.autoscaling.enabled: false and "
        f"kubectl scale llmdeployment {name} --replicas N"
        if autoscaled
        else f"scale the LLMDeployment instead: kubectl scale llmdeployment {name} --replicas N"
    )
    return EventToPost(
        "Warning",
        WORKLOAD_SCALE_REVERTED,
        f"{workload} was scaled to {live_replicas} directly; its replica count follows LLMDeployment "
        f"{name} spec.replicas ({spec_replicas}) and was set back. {owner}",
    )


def transitions(
    old: Sequence[Mapping[str, Any]] | None, new: Sequence[dict[str, Any]]
) -> list[dict[str, Any]]:
    """Conditions of ``new`` whose status or reason differs from ``old`` (one Event each)."""
    before = {c.get("type"): (c.get("status"), c.get("reason")) for c in old or ()}
    return [c for c in new if before.get(c["type"]) != (c["status"], c["reason"])]
