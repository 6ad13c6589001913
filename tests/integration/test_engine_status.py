"""The shared kube/ shell against the real API server: status writes from several writers (merge by
condition type, resourceVersion precondition, retry on 409), create-or-get, events."""

from __future__ import annotations

import datetime as dt
import threading
from typing import Any

import pytest
from support.cluster import LocalCluster

from trtllm_operator.decide.conditions import condition
from trtllm_operator.kube import (
    CONFIG_MAP,
    EVENT,
    LLM_ENGINE,
    Kube,
    patch_status,
    post_event,
    update_conditions,
)

ENGINE: dict[str, Any] = {
    "apiVersion": "llm.trtllm-operator.dev/v1alpha1",
    "kind": "LLMEngine",
    "metadata": {"name": "shared"},
    "spec": {
        "model": {"source": "hf://TinyLlama/TinyLlama-1.1B-Chat-v1.0"},
        "runtime": {"image": "nvcr.io/nvidia/tritonserver:26.03-trtllm-python-py3"},
        "gpu": {"product": "NVIDIA-H100-80GB-HBM3"},
        "storage": {"s3": {"bucket": "engines"}},
    },
}


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
