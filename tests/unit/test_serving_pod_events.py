"""A serving pod's change re-reconciles the LLMDeployment it serves (handlers/deployment.py
``on_serving_pod_event``): a reconcile woken by the workload's status may have read the pod cache
before the pod's own change reached it (benchmarks/scale.py: deployments Ready 55 s after their
pods, woken only by the drift resync)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from trtllm_operator.api.wire import LABEL_DEPLOYMENT, LABEL_ENGINE_KEY
from trtllm_operator.handlers import deployment


def _pod(uid: str = "p1", *, ready: bool = False, phase: str = "Running", **status: Any) -> dict[str, Any]:
    labels = {LABEL_DEPLOYMENT: "chat", LABEL_ENGINE_KEY: "abc"}
    conditions = [{"type": "Ready", "status": "True" if ready else "False"}]
    return {
        "metadata": {"namespace": "ns", "name": f"chat-{uid}", "uid": uid, "labels": labels},
        "status": {"phase": phase, "conditions": conditions, **status},
    }


@pytest.fixture
def queued(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str | None, str]]:
    out: list[tuple[str | None, str]] = []

    async def record(namespace: str | None, name: str) -> None:
        out.append((namespace, name))

    monkeypatch.setattr(deployment, "_queue_reconcile", record)
    monkeypatch.setattr(deployment, "_pods_seen", {})
    return out


def _event(type_: str | None, pod: dict[str, Any]) -> None:
    asyncio.run(deployment.on_serving_pod_event({"type": type_, "object": pod}))


def test_a_pod_turning_ready_reconciles_its_deployment_once(queued: list[tuple[str | None, str]]) -> None:
    _event("ADDED", _pod())
    assert queued == [("ns", "chat")]
    _event("MODIFIED", _pod())  # nothing the status reads changed (e.g. a condition's timestamp)
    assert queued == [("ns", "chat")]
    _event("MODIFIED", _pod(ready=True))  # the change a workload-triggered reconcile can miss
    assert queued == [("ns", "chat")] * 2
    _event("MODIFIED", _pod(ready=True))
    assert queued == [("ns", "chat")] * 2


def test_phase_stuck_container_and_deletion_reconcile(queued: list[tuple[str | None, str]]) -> None:
    _event("ADDED", _pod())
    waiting = {"name": "triton", "state": {"waiting": {"reason": "CrashLoopBackOff", "message": "x"}}}
    _event("MODIFIED", _pod(containerStatuses=[waiting]))
    _event("MODIFIED", _pod(phase="Failed", containerStatuses=[waiting]))
    _event("DELETED", _pod(phase="Failed", containerStatuses=[waiting]))
    assert queued == [("ns", "chat")] * 4


def test_the_listing_of_a_pod_its_settled_owner_reports_wakes_nothing(
    queued: list[tuple[str | None, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    settled = {"chat": True}
    monkeypatch.setattr(deployment, "settled", lambda namespace, name: settled[name])
    _event(None, _pod(ready=True))  # kopf's (re)listing at a start: type None
    assert queued == []
    settled["chat"] = False
    _event(None, _pod("p2", ready=True))
    assert queued == [("ns", "chat")]


def test_unlabelled_or_anonymous_objects_are_ignored(queued: list[tuple[str | None, str]]) -> None:
    pod = _pod()
    del pod["metadata"]["labels"][LABEL_DEPLOYMENT]
    _event("ADDED", pod)
    _event("ADDED", {"metadata": {"labels": {LABEL_DEPLOYMENT: "chat"}}})
    assert queued == []
