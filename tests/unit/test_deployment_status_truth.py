"""LLMDeployment status that tells the truth (issue #25 item 5, fresh-user trial):

A. the engine fails or is deleted while pods of the previous key still serve: not "nothing is
   served"; the phase, Ready, Degraded and Streaming say what is served and what is wrong;
B. serving pods the scheduler cannot place are reported with its message, not "starting" forever;
C. the Streaming message names only the endpoints of the chosen API's frontend.

Pure: :func:`trtllm_operator.decide.deployment_status.deployment_status` and
:func:`trtllm_operator.decide.rollout.pod_view`; expected strings are written out here.
"""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from trtllm_operator.decide.deployment_status import (
    Observation,
    deployment_status,
    streaming_condition,
)
from trtllm_operator.decide.rollout import PodView, RolloutProgress, pod_view

NEW, OLD = "n" * 64, "o" * 64
#: Example text of a PodScheduled=False/Unschedulable message (the status passes it through
#: verbatim; tests/integration/test_deployment_controller.py reads the real scheduler's).
NO_GPU = (
    "0/5 nodes are available: 1 node(s) had untolerated taint(s), 4 Insufficient nvidia.com/gpu. "
    "preemption: 0/5 nodes are available: 5 No preemption victims found for incoming pod."
)
FAILED_MSG = (
    "LLMEngine 'llama-fp8' failed: BuildFailed: trtllm-build exited 1; fix it (kubectl describe "
    "llmengine llama-fp8): this deployment is rendered once the engine is Ready"
)


def obs(**kw: Any) -> Observation:
    base: dict[str, Any] = dict(
        generation=4,
        spec_replicas=1,
        engine_name="llama-fp8",
        engine_state="ready",
        desired_engine_key=NEW,
        endpoint="http://x",
        selector="a=b",
        decoupled=True,
    )
    base.update(kw)
    return Observation(**base)


def conds(decision: Any) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in decision.conditions}


def state(decision: Any, type_: str) -> tuple[str, str]:
    c = conds(decision)[type_]
    return c["status"], c["reason"]


# ------------------------------------------------------------------ A: the old key still serves
def test_rebuild_failed_while_the_old_key_serves_is_degraded_not_failed() -> None:
    # Trial case A: engine spec edited, rebuild failed; the Deployment is 1/1 on the old key.
    served_streaming = {
        "type": "Streaming",
        "status": "True",
        "reason": "Decoupled",
        "message": "spec.server.decoupled is true: …",
        "observedGeneration": 3,
    }
    s = deployment_status(
        obs(
            engine_state="failed",
            engine_message=FAILED_MSG,
            previous_engine_key=OLD,
            pods=1,
            ready_pods=1,
            previous_conditions=[served_streaming],
        )
    )
    assert s.status["phase"] == "Degraded"
    assert s.status["engineKey"] == OLD  # what every pod serves
    assert state(s, "Ready") == ("True", "EngineFailed")
    assert state(s, "Progressing") == ("False", "EngineFailed")
    assert state(s, "Degraded") == ("True", "EngineFailed")
    message = conds(s)["Degraded"]["message"]
    assert message.startswith("1/1 replicas Ready, still serving engine key oooooooooooooooo; ")
    assert "LLMEngine 'llama-fp8' failed: BuildFailed: trtllm-build exited 1" in message
    # Streaming: what the serving pods answer, not "no model is served yet"
    assert state(s, "Streaming") == ("True", "Decoupled")
    assert "no model is served" not in conds(s)["Streaming"]["message"]
    assert conds(s)["Streaming"]["observedGeneration"] == 4
    # The engine problem is a Warning even though Ready stays True.
    assert {(e.type, e.reason) for e in s.events if e.reason == "EngineFailed"} == {
        ("Warning", "EngineFailed")
    }


def test_engine_deleted_while_serving_names_the_served_key() -> None:
    # Trial case B: LLMEngine deleted while usedBy listed the deployment; pods still serve.
    previous = [
        {"type": "Ready", "status": "True", "reason": "AllReplicasReady", "message": "x"},
        {"type": "Degraded", "status": "False", "reason": "AsExpected", "message": "all 1 replicas serve"},
    ]
    s = deployment_status(
        obs(
            engine_state="missing",
            previous_engine_key=OLD,
            pods=1,
            ready_pods=1,
            decoupled=False,
            previous_conditions=previous,
        )
    )
    assert s.status["phase"] == "Degraded"
    assert state(s, "Ready") == ("True", "EngineNotFound")
    # The earlier "Degraded=False AsExpected: all 1 replicas serve …" does not stay behind.
    assert state(s, "Degraded") == ("True", "EngineNotFound")
    msg = conds(s)["Ready"]["message"]
    assert "still serving engine key oooooooooooooooo" in msg and "spec.engineRef.name" in msg
    # What to do, and that nothing of the user's was deleted (fresh-user trial, last session).
    assert "apply the LLMEngine again" in msg and "never removes" in msg
    # No Streaming condition from before: the spec's (the pods were rendered from it), determinate.
    assert state(s, "Streaming") == ("False", "NotDecoupled")
    assert ("Warning", "EngineNotFound") in [(e.type, e.reason) for e in s.events]


def test_some_replicas_down_while_the_engine_failed_is_not_ready() -> None:
    s = deployment_status(
        obs(
            engine_state="failed",
            engine_message=FAILED_MSG,
            previous_engine_key=OLD,
            spec_replicas=3,
            ready_pods=2,
        )
    )
    assert s.status["phase"] == "Degraded" and state(s, "Ready") == ("False", "EngineFailed")
    assert conds(s)["Ready"]["message"].startswith("2/3 replicas Ready, still serving engine key")


def test_rebuild_in_progress_while_the_old_key_serves_is_progressing() -> None:
    s = deployment_status(
        obs(
            engine_state="not_ready",
            engine_message="waiting for LLMEngine 'llama-fp8' (phase Building)",
            previous_engine_key=OLD,
            pods=1,
            ready_pods=1,
        )
    )
    assert s.status["phase"] == "Progressing"
    assert state(s, "Ready") == ("True", "EngineNotReady")
    assert state(s, "Progressing") == ("True", "EngineNotReady")
    assert state(s, "Degraded") == ("False", "AsExpected")
    assert (
        "still serving engine key oooooooooooooooo; waiting for LLMEngine 'llama-fp8' (phase Building)"
        in (conds(s)["Progressing"]["message"])
    )
    assert state(s, "Streaming") == ("True", "Decoupled")
    assert not [e for e in s.events if e.type == "Warning"]


def test_streaming_kept_from_the_served_rendering_while_the_engine_is_not_ready() -> None:
    # decoupled flipped to true while the engine rebuilds: the pods (not re-rendered) still refuse
    # streaming, which the condition written with their rendering said; it stays.
    served = {"type": "Streaming", "status": "False", "reason": "NotDecoupled", "message": "served text"}
    s = deployment_status(
        obs(engine_state="not_ready", previous_engine_key=OLD, ready_pods=1, previous_conditions=[served])
    )
    assert state(s, "Streaming") == ("False", "NotDecoupled")
    assert conds(s)["Streaming"]["message"] == "served text"
    # An Unknown from before this rule is not kept: the spec's instead.
    unknown = {"type": "Streaming", "status": "Unknown", "reason": "EngineNotReady", "message": "no model"}
    s = deployment_status(
        obs(engine_state="failed", previous_engine_key=OLD, ready_pods=1, previous_conditions=[unknown])
    )
    assert state(s, "Streaming") == ("True", "Decoupled")


def test_nothing_served_stays_pending_or_failed() -> None:
    # Never served (no engineKey): Pending, Streaming Unknown, Degraded False (nothing degraded).
    fresh = deployment_status(obs(engine_state="not_ready"))
    assert fresh.status["phase"] == "Pending" and state(fresh, "Streaming") == ("Unknown", "EngineNotReady")
    assert state(fresh, "Degraded") == ("False", "EngineNotReady")
    # Served before, every pod gone: Failed engine → Failed; Degraded True.
    gone = deployment_status(obs(engine_state="failed", engine_message=FAILED_MSG, previous_engine_key=OLD))
    assert gone.status["phase"] == "Failed" and state(gone, "Ready") == ("False", "EngineFailed")
    assert state(gone, "Streaming") == ("Unknown", "EngineNotReady")
    missing = deployment_status(obs(engine_state="missing", previous_engine_key=OLD))
    assert missing.status["phase"] == "Pending" and state(missing, "Degraded") == ("True", "EngineNotFound")


@pytest.mark.parametrize(
    ("engine_state", "said"),
    [
        ("missing", "does not exist in this namespace"),
        ("not_ready", "is not Ready"),
        ("failed", "is not Ready"),
    ],
)
def test_streaming_says_an_engine_that_does_not_exist_does_not_exist(engine_state: str, said: str) -> None:
    """Fresh-user trial 46 T8: d-missing (engineRef to no-such-engine) had Ready=False EngineNotFound
    beside Streaming "(LLMEngine 'no-such-engine' is not Ready)"."""
    s = deployment_status(obs(engine_state=engine_state))
    message = conds(s)["Streaming"]["message"]
    assert state(s, "Streaming") == ("Unknown", "EngineNotReady")
    assert message.startswith(
        f"no model is served yet (LLMEngine {obs().engine_name!r} {said}); once it is: "
    )


@pytest.mark.parametrize(
    ("engine_state", "previous_key", "ready", "replicas"),
    list(itertools.product(("ready", "not_ready", "failed", "missing"), (None, OLD), (0, 1, 3), (1, 3))),
)
def test_conditions_agree_with_each_other(
    engine_state: str, previous_key: str | None, ready: int, replicas: int
) -> None:
    progress = RolloutProgress(ready >= replicas, replicas, ready, ready, 0, f"{ready}/{replicas} on key n")
    s = deployment_status(
        obs(
            engine_state=engine_state,
            previous_engine_key=previous_key,
            ready_pods=ready,
            pods=ready,
            spec_replicas=replicas,
            progress=progress,
        )
    )
    c = conds(s)
    phase = s.status["phase"]
    serving = ready >= 1 and (engine_state == "ready" or previous_key is not None)
    # Streaming is Unknown exactly when the engine is not Ready and no pod serves (with a Ready
    # engine it describes the rendering being rolled out, whose pods answer as it says).
    unknown = engine_state != "ready" and not serving
    assert (c["Streaming"]["status"] == "Unknown") == unknown, c["Streaming"]
    assert ("no model is served yet" in c["Streaming"]["message"]) == unknown
    if c["Ready"]["status"] == "True":
        assert ready >= 1
    if phase == "Ready":
        assert c["Ready"]["status"] == "True" and c["Degraded"]["status"] == "False"
    if phase == "Degraded":
        assert c["Degraded"]["status"] == "True"
    if c["Degraded"]["status"] == "False":
        assert "all" not in c["Degraded"]["message"] or phase == "Ready"
    if serving and engine_state != "ready":
        assert phase != "Failed" and "still serving engine key" in c["Ready"]["message"]


# ------------------------------------------------------------------ B: unschedulable replicas
def a_pod(scheduled: dict[str, Any] | None, phase: str = "Pending") -> dict[str, Any]:
    conditions = [scheduled] if scheduled else []
    return {"metadata": {"labels": {}}, "status": {"phase": phase, "conditions": conditions}}


def test_pod_view_carries_the_schedulers_message() -> None:
    unschedulable = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": NO_GPU}
    assert pod_view(a_pod(unschedulable)).unschedulable == NO_GPU
    assert pod_view(a_pod({"type": "PodScheduled", "status": "True"}, "Running")).unschedulable is None
    # Scheduling gates are no capacity problem (reason SchedulingGated).
    gated = {"type": "PodScheduled", "status": "False", "reason": "SchedulingGated"}
    assert pod_view(a_pod(gated)).unschedulable is None
    assert pod_view(a_pod(None)) == PodView("", False, False, None)


def test_replicas_that_cannot_be_scheduled_are_not_starting() -> None:
    # Trial: replicas 10, no autoscaling, 3 pods Pending with Insufficient nvidia.com/gpu.
    progress = RolloutProgress(False, 10, 10, 7, 0, "7/10 replicas Ready on engine key nnnnnnnnnnnnnnnn")
    s = deployment_status(
        obs(spec_replicas=10, pods=10, ready_pods=7, progress=progress, unschedulable=[NO_GPU] * 3)
    )
    assert s.status["phase"] == "Degraded"
    assert state(s, "Ready") == ("False", "ReplicasUnschedulable")
    assert state(s, "Progressing") == ("True", "ReplicasUnschedulable")
    assert state(s, "Degraded") == ("True", "ReplicasUnschedulable")
    msg = conds(s)["Ready"]["message"]
    # the count once (trial 34: "7/10 replicas Ready; 7/10 replicas Ready on engine key …")
    assert msg.startswith("7/10 replicas Ready on engine key ") and msg.count("7/10") == 1, msg
    assert (
        "3 pod(s) cannot be scheduled: 0/5 nodes are available: 1 node(s) had untolerated taint(s), " in msg
    )
    assert "4 Insufficient nvidia.com/gpu" in msg and "lower spec.replicas" in msg
    assert ("Warning", "ReplicasUnschedulable") in [(e.type, e.reason) for e in s.events]
    # None Ready at all: still trying (Progressing), not Degraded-while-serving.
    cold = deployment_status(obs(spec_replicas=2, pods=2, progress=progress, unschedulable=[NO_GPU, "other"]))
    assert cold.status["phase"] == "Progressing" and state(cold, "Ready") == (
        "False",
        "ReplicasUnschedulable",
    )
    assert "2 pod(s) cannot be scheduled" in conds(cold)["Ready"]["message"]
    assert "(and 1 other message(s))" in conds(cold)["Ready"]["message"]


#: The scheduler's message when no node has the pod's nodeSelector labels (kubernetes v1.34.4
#: nodeaffinity ``ErrReasonPod`` in ``FitError.Error``'s "0/<all> nodes are available: <n> <reason>.").
NO_LABEL = (
    "0/5 nodes are available: 5 node(s) didn't match Pod's node affinity/selector. preemption: 0/5 nodes "
    "are available: 5 Preemption is not helpful for scheduling."
)


def test_unschedulable_for_the_deployments_node_selector_names_it_not_replicas() -> None:
    # Trial 46 T8: spec.scheduling.nodeSelector {pool: none} matches no node; "lower spec.replicas"
    # cannot help, the selector can.
    progress = RolloutProgress(False, 1, 1, 0, 0, "0/1 replicas Ready on engine key nnnnnnnnnnnnnnnn")
    s = deployment_status(
        obs(progress=progress, pods=1, unschedulable=[NO_LABEL], node_selector={"pool": "none"})
    )
    msg = conds(s)["Ready"]["message"]
    assert state(s, "Ready") == ("False", "ReplicasUnschedulable")
    assert "no node has the labels pool=none of spec.scheduling.nodeSelector" in msg, msg
    assert msg.endswith("label nodes or change the selector"), msg
    assert "lower spec.replicas" not in msg
    # affinity set: named too
    aff = deployment_status(obs(progress=progress, pods=1, unschedulable=[NO_LABEL], node_affinity=True))
    assert "the required node affinity of spec.scheduling.affinity" in conds(aff)["Ready"]["message"]
    # some nodes mismatch, others lack GPUs: both fixes
    mixed = NO_LABEL.replace("5 node(s) didn't", "2 node(s) didn't").replace(
        "available: 2", "available: 3 Insufficient nvidia.com/gpu, 2"
    )
    m = deployment_status(obs(progress=progress, pods=1, unschedulable=[mixed], node_selector={"pool": "a"}))
    text = conds(m)["Ready"]["message"]
    assert "2 of 5 nodes lack the labels pool=a of spec.scheduling.nodeSelector" in text, text
    assert "lower spec.replicas" in text
    # no selector of the deployment's own (the engine's GPU label alone): the generic fix stays
    plain = deployment_status(obs(progress=progress, pods=1, unschedulable=[NO_LABEL]))
    assert "spec.scheduling" not in conds(plain)["Ready"]["message"]


def test_scaling_up_into_unschedulable_pods_keeps_ready_but_is_degraded() -> None:
    progress = RolloutProgress(False, 3, 3, 2, 0, "2/3 replicas Ready on engine key nnnnnnnnnnnnnnnn")
    s = deployment_status(
        obs(
            spec_replicas=3,
            pods=3,
            ready_pods=2,
            previous_engine_key=NEW,
            progress=progress,
            unschedulable=[NO_GPU],
        )
    )
    assert s.status["phase"] == "Degraded"
    assert state(s, "Ready") == ("True", "Scaling")  # still serving: GitOps health does not flap
    assert state(s, "Progressing") == ("True", "ReplicasUnschedulable")
    assert state(s, "Degraded") == ("True", "ReplicasUnschedulable")
    assert ("Warning", "ReplicasUnschedulable") in [(e.type, e.reason) for e in s.events]
    assert "1 pod(s) cannot be scheduled" in conds(s)["Degraded"]["message"]
    # Without unschedulable pods, the same scale-up is plain Scaling.
    plain = deployment_status(
        obs(spec_replicas=3, pods=3, ready_pods=2, previous_engine_key=NEW, progress=progress)
    )
    assert plain.status["phase"] == "Ready" and state(plain, "Degraded") == ("False", "AsExpected")


# ------------------------------------------------------------------ C: Streaming per API
def message(decoupled: bool, api: str, backend: str | None) -> str:
    return str(streaming_condition(decoupled, 1, api=api, backend=backend)["message"])


@pytest.mark.parametrize("decoupled", [True, False])
def test_streaming_message_names_only_the_frontends_endpoints(decoupled: bool) -> None:
    triton = message(decoupled, "triton", "tensorrt")
    assert "generate_stream" in triton and "ModelStreamInfer" in triton
    assert "OpenAI" not in triton and "/v1/" not in triton

    openai = message(decoupled, "openai", "tensorrt")  # Triton's OpenAI frontend
    assert "OpenAI stream: true on /v1/chat/completions and /v1/completions" in openai
    assert "generate_stream" not in openai and "gRPC" not in openai and "KServe" not in openai

    serve = message(decoupled, "openai", "pytorch")  # trtllm-serve
    assert "trtllm-serve" in serve and "/v1/chat/completions" in serve
    assert "generate_stream" not in serve and "gRPC" not in serve and "KServe" not in serve

    both = message(decoupled, "both", "tensorrt")
    assert "/v1/chat/completions" in both and "generate_stream" in both and "ModelStreamInfer" in both


def test_streaming_off_quotes_the_backend_that_refuses() -> None:
    # tensorrtllm_backend inflight_batcher_llm/src/utils.cc; TensorRT-LLM llmapi model.py
    assert '"Streaming is only supported if model is deployed using decoupled mode."' in message(
        False, "triton", "tensorrt"
    )
    assert '"Streaming is only supported in decoupled mode."' in message(False, "triton", "pytorch")
    # trtllm-serve has no non-streaming mode: the message says it cannot honour decoupled false.
    serve = message(False, "openai", "pytorch")
    assert "cannot honour" in serve and "set spec.server.decoupled: true" in serve
    assert "refused by the backend" not in serve


def test_streaming_condition_from_the_observation_uses_api_and_backend() -> None:
    s = deployment_status(obs(api="openai", backend="pytorch", progress=None))
    msg = conds(s)["Streaming"]["message"]
    assert "trtllm-serve" in msg and "generate_stream" not in msg
    waiting = deployment_status(obs(api="triton", decoupled=False, engine_state="not_ready"))
    msg = conds(waiting)["Streaming"]["message"]
    assert msg.startswith("no model is served yet") and "OpenAI" not in msg and "generate_stream" in msg


def test_a_refused_change_says_the_pods_keep_serving() -> None:
    """Fresh-user trial: spec.server.image edited to another image on a serving deployment gave phase
    Failed, Ready=False "nothing was rolled out" while its pod still served; the message now says so."""
    from trtllm_operator.decide.compatibility import Incompatibility  # noqa: PLC0415

    wrong = Incompatibility("spec.server.image", "nvcr.io/nvidia/tritonserver:25.01", "nvcr.io/x:26.03")
    serving = obs(previous_engine_key=OLD, pods=1, ready_pods=1, incompatibilities=[wrong])
    msg = conds(deployment_status(serving))["Ready"]["message"]
    assert msg.endswith(
        "the 1 Ready replica(s) keep serving engine key oooooooooooooooo as rendered before this change"
    )
    blocked = obs(previous_engine_key=OLD, pods=1, ready_pods=1, blocked=("KVCacheTooSmall", "too small"))
    assert (
        "too small; the 1 Ready replica(s) keep serving"
        in conds(deployment_status(blocked))["Ready"]["message"]
    )
    nothing = conds(deployment_status(obs(incompatibilities=[wrong])))["Ready"]["message"]
    assert "keep serving" not in nothing
