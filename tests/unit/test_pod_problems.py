"""Pods whose containers wait on what will not clear by itself are explained, naming the field to fix.

Trial: a builder pod waiting with ``CreateContainerConfigError`` ("couldn't find key tok in Secret
…") left the LLMEngine at "Building starting" until activeDeadlineSeconds; a serving pod in
``ImagePullBackOff`` left the LLMDeployment at "ReplicasStarting: 0/1 replicas Ready".

Pod statuses are shaped as the kubelet writes them (``status.containerStatuses[].state.waiting``
``{reason, message}``; ``initContainerStatuses`` alike). The reason strings are the kubelet's,
Kubernetes v1.34: ``pkg/kubelet/images/types.go`` (ErrImagePull, ImagePullBackOff,
InvalidImageName), ``pkg/kubelet/kuberuntime/kuberuntime_container.go`` (CreateContainerConfigError,
CreateContainerError, and the normal ContainerCreating / PodInitializing),
``pkg/kubelet/container/sync_result.go`` (CrashLoopBackOff); the Secret-key message is
``pkg/kubelet/kubelet_pods.go``'s "couldn't find key %v in Secret %v/%v".
"""

from __future__ import annotations

from typing import Any

import pytest
from support.engine_decisions import NOW, job, observe, prepared, spec

from trtllm_operator.decide.deployment_status import Observation, deployment_status, serving_fixes
from trtllm_operator.decide.engine import decide_engine, holds_build_slot
from trtllm_operator.decide.pod_problems import StuckContainer, stuck_containers
from trtllm_operator.decide.rollout import RolloutProgress

NEW = "n" * 64
IMAGE = "nvcr.io/nvidia/tritonserver:26.03-trtllm-python-py3x"
PULL_BACK_OFF = {"reason": "ImagePullBackOff", "message": f'Back-off pulling image "{IMAGE}"'}
ERR_PULL = {
    "reason": "ErrImagePull",
    "message": f"failed to pull and unpack image {IMAGE!r}: not found",
}
NO_KEY = {"reason": "CreateContainerConfigError", "message": "couldn't find key tok in Secret ml/hf-token"}
CREATING = {"reason": "ContainerCreating"}
INITIALIZING = {"reason": "PodInitializing"}


def a_pod(
    name: str,
    phase: str = "Pending",
    *,
    containers: dict[str, dict[str, Any]] | None = None,
    init: dict[str, dict[str, Any]] | None = None,
    **meta: Any,
) -> dict[str, Any]:
    """A pod whose containers (name → ``state.waiting``) wait, as the kubelet reports them."""

    def statuses(waiting: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
        return [
            {"name": n, "ready": False, "restartCount": 0, "image": IMAGE, "state": {"waiting": w}}
            for n, w in waiting.items()
        ]

    status: dict[str, Any] = {"phase": phase}
    if containers is not None:
        status["containerStatuses"] = statuses(containers)
    if init is not None:
        status["initContainerStatuses"] = statuses(init)
    return {
        "metadata": {"name": name, "creationTimestamp": "2026-11-29T18:00:00Z", **meta},
        "status": status,
    }


def test_only_reasons_that_will_not_clear_are_reported() -> None:
    pods = [
        a_pod("a", containers={"triton": CREATING}),
        a_pod("b", containers={"triton": INITIALIZING}, init={"fetch-artifact": ERR_PULL}),
        a_pod("c", "Running", containers={"triton": {"reason": "CrashLoopBackOff", "message": "back-off"}}),
        a_pod("d", containers={"triton": PULL_BACK_OFF}, deletionTimestamp="2026-11-29T18:01:00Z"),
        a_pod("e", "Failed", containers={"triton": PULL_BACK_OFF}),
        a_pod("f"),  # not yet started by the kubelet: no statuses
    ]
    assert stuck_containers(pods) == [
        StuckContainer("b", "fetch-artifact", True, "ErrImagePull", ERR_PULL["message"]),
        StuckContainer("c", "triton", False, "CrashLoopBackOff", "back-off"),
    ]


def conds(decision: Any) -> dict[str, tuple[str, str, str]]:
    return {c["type"]: (c["status"], c["reason"], c.get("message", "")) for c in decision.conditions}


def test_builder_pod_with_a_missing_secret_key_names_the_credentials_field() -> None:
    # The trial: spec.model.credentialsSecretRef {name: hf-token, key: tok}, the Secret has no "tok".
    p = prepared(
        spec(
            model={
                "source": "hf://TinyLlama/TinyLlama-1.1B-Chat-v1.0",
                "credentialsSecretRef": {"name": "hf-token", "key": "tok"},
            }
        )
    )
    pod = a_pod("b-1", containers={"builder": NO_KEY})
    d = decide_engine(p, observe(job=job(), pods=[pod]), now=NOW)
    c = conds(d)
    assert d.phase == "Building" and d.actions == []
    assert c["Ready"][:2] == ("False", "BuilderPodFailing")
    assert c["Progressing"][:2] == ("True", "BuilderPodFailing")
    assert c["Degraded"][:2] == ("True", "BuilderPodFailing")
    message = c["Ready"][2]
    assert (
        "container builder is waiting: CreateContainerConfigError: couldn't find key tok in Secret "
        in message
    )
    assert "(spec.model.credentialsSecretRef)" in message
    assert d.status["build"]["reason"] == "BuilderPodFailing"
    assert d.event is not None and (d.event.type, d.event.reason) == ("Warning", "BuilderPodFailing")
    # The same state again posts no second Event.
    again = decide_engine(
        p, observe(job=job(), pods=[pod], status=d.status | {"conditions": d.conditions}), now=NOW
    )
    assert again.event is None


@pytest.mark.parametrize(
    ("container", "init", "field"),
    [
        ("builder", False, "spec.runtime.image, or the operator's builder_image (chart value builder.image)"),
        (
            "deliver-engine-builder",
            True,
            "the operator's builder_delivery_image (chart value builder.deliveryImage)",
        ),
    ],
)
def test_builder_pod_that_cannot_pull_names_the_image_setting(container: str, init: bool, field: str) -> None:
    waiting = {container: PULL_BACK_OFF}
    pod = a_pod("b-1", containers=None if init else waiting, init=waiting if init else None)
    d = decide_engine(prepared(), observe(job=job(), pods=[pod]), now=NOW)
    reason, message = conds(d)["Degraded"][1:]
    assert reason == "BuilderPodFailing"
    kind = "init container" if init else "container"
    assert f"pod b-1 {kind} {container} is waiting: ImagePullBackOff: Back-off pulling image" in message
    assert f"fix the image ({field}" in message


def test_a_builder_whose_container_cannot_start_holds_no_build_slot() -> None:
    # The trial: the stuck build held one of maxConcurrentBuilds for activeDeadlineSeconds (4 h).
    active = job()
    assert not holds_build_slot(active, [a_pod("b-1", containers={"builder": NO_KEY})])
    assert not holds_build_slot(active, [a_pod("b-1", init={"deliver-engine-builder": ERR_PULL})])
    assert holds_build_slot(active, [a_pod("b-1", containers={"builder": CREATING})])


def test_a_builder_pod_still_creating_is_starting() -> None:
    d = decide_engine(
        prepared(), observe(job=job(), pods=[a_pod("b-1", containers={"builder": CREATING})]), now=NOW
    )
    assert conds(d)["Progressing"][:2] == ("True", "BuildStarted")
    assert conds(d)["Degraded"][0] == "False"


def obs(**kw: Any) -> Observation:
    base: dict[str, Any] = dict(
        generation=4,
        spec_replicas=1,
        engine_name="llama",
        engine_state="ready",
        desired_engine_key=NEW,
        endpoint="http://x",
        selector="a=b",
        progress=RolloutProgress(False, 1, 1, 0, 0, "0/1 replicas Ready on engine key nnnnnnnnnnnnnnnn"),
        pods=1,
    )
    base.update(kw)
    return Observation(**base)


ENGINE = {
    "metadata": {"name": "llama"},
    "spec": {
        "storage": {
            "s3": {"bucket": "b", "credentialsSecretRef": {"name": "s3-creds", "key": "AWS_ACCESS_KEY_ID"}}
        }
    },
}


def test_serving_pod_in_image_pull_back_off_is_failing_not_starting() -> None:
    pods = [a_pod("llama-0", containers={"triton": PULL_BACK_OFF})]
    s = deployment_status(obs(stuck=stuck_containers(pods), fixes=serving_fixes(ENGINE)))
    c = {x["type"]: x for x in s.conditions}
    assert s.status["phase"] == "Progressing"
    assert (c["Ready"]["status"], c["Ready"]["reason"]) == ("False", "ReplicasFailing")
    assert (c["Progressing"]["status"], c["Progressing"]["reason"]) == ("True", "ReplicasFailing")
    assert (c["Degraded"]["status"], c["Degraded"]["reason"]) == ("True", "ReplicasFailing")
    msg = c["Ready"]["message"]
    # the count once (trial 34): all pods are on the desired key, so only "on engine key" is printed
    assert msg.startswith("0/1 replicas Ready on engine key "), msg
    assert (
        "1 container(s) cannot start: pod llama-0 container triton is waiting: ImagePullBackOff: "
        f'Back-off pulling image "{IMAGE}"' in msg
    )
    assert "fix the image (spec.server.image, or the LLMEngine's spec.runtime.image when it is unset" in msg
    assert ("Warning", "ReplicasFailing") in [(e.type, e.reason) for e in s.events]


def test_every_replica_pulling_one_bad_image_is_one_problem() -> None:
    pods = [a_pod(f"llama-{i}", containers={"triton": PULL_BACK_OFF}) for i in range(3)]
    s = deployment_status(
        obs(spec_replicas=3, pods=3, stuck=stuck_containers(pods), fixes=serving_fixes(ENGINE))
    )
    msg = next(x["message"] for x in s.conditions if x["type"] == "Degraded")
    assert "3 container(s) cannot start: pod llama-0 " in msg
    assert "other problem" not in msg


def test_fetch_init_container_missing_s3_key_names_the_engines_secret_field() -> None:
    waiting = {
        "reason": "CreateContainerConfigError",
        "message": "couldn't find key AWS_SECRET_ACCESS_KEY in Secret ml/s3-creds",
    }
    pods = [a_pod("llama-0", containers={"triton": INITIALIZING}, init={"fetch-artifact": waiting})]
    s = deployment_status(obs(stuck=stuck_containers(pods), fixes=serving_fixes(ENGINE)))
    msg = next(x["message"] for x in s.conditions if x["type"] == "Ready")
    assert "init container fetch-artifact is waiting: CreateContainerConfigError" in msg
    assert "(LLMEngine llama's spec.storage.s3.credentialsSecretRef)" in msg


def test_scaling_into_failing_pods_keeps_ready_but_is_degraded() -> None:
    progress = RolloutProgress(False, 2, 2, 1, 0, "1/2 replicas Ready on engine key nnnnnnnnnnnnnnnn")
    pods = [
        a_pod(
            "llama-1",
            "Running",
            containers={
                "triton": {
                    "reason": "CrashLoopBackOff",
                    "message": "back-off 5m0s restarting failed container=triton",
                }
            },
        )
    ]
    s = deployment_status(
        obs(
            spec_replicas=2,
            pods=2,
            ready_pods=1,
            previous_engine_key=NEW,
            progress=progress,
            stuck=stuck_containers(pods),
        )
    )
    c = {x["type"]: (x["status"], x["reason"]) for x in s.conditions}
    assert s.status["phase"] == "Degraded"
    assert c["Ready"] == ("True", "Scaling")
    assert c["Progressing"] == ("True", "ReplicasFailing")
    assert c["Degraded"] == ("True", "ReplicasFailing")
    msg = next(x["message"] for x in s.conditions if x["type"] == "Degraded")
    assert "kubectl logs --previous llama-1 -c triton" in msg


def test_unschedulable_pods_win_over_failing_ones() -> None:
    pods = [a_pod("llama-0", containers={"triton": PULL_BACK_OFF})]
    s = deployment_status(obs(stuck=stuck_containers(pods), unschedulable=["0/1 nodes are available"]))
    assert next(x["reason"] for x in s.conditions if x["type"] == "Ready") == "ReplicasUnschedulable"
