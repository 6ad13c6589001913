"""LLMDeployment controller against the real control plane with kwok GPU nodes, operator in-process.

The whole operator runs (LLMEngine controller included). Engines become Ready through the engine
cache, exactly as after ``trtllm-operator cache import``: the test records an artifact for the
engine's key in the cache index (a ConfigMap the LLMEngine controller reads), so no builder Job has
to run. The artifact PVC is a pre-bound PV/PVC pair (the local control plane runs no PV binder).
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import pytest
from support.api import Api
from support.cluster import LocalCluster
from support.manifests import H100, IMAGE, a_cached_engine, a_deployment
from support.operator import running_operator
from support.wait import wait_for

from trtllm_operator.api import GROUP, VERSION

KEY_LABEL = "llm.trtllm-operator.dev/engine-key"


@pytest.fixture
def api(cluster: LocalCluster, namespace: str) -> Iterator[Api]:
    a = Api(cluster, namespace)
    with a.artifact_pvc():
        yield a


def node_product(api: Api, node: str) -> str:
    return str(api.core.read_node(node).metadata.labels.get("nvidia.com/gpu.product"))


def test_serves_engine_then_rolls_to_new_key_one_pod_at_a_time(cluster: LocalCluster, api: Api) -> None:
    engine = a_cached_engine("llama-fp8", tp=2)
    key_a = api.cache_artifact(engine).key
    changed = copy.deepcopy(engine)
    changed["spec"]["build"]["maxBatchSize"] = 128
    key_b = api.cache_artifact(changed).key
    assert key_a != key_b
    api.create(engine)
    api.create(a_deployment("chat", "llama-fp8", replicas=2))

    with running_operator(cluster, [api.ns]):

        def ready_on(key: str) -> dict[str, Any] | None:
            s = api.status("chat")
            want = s.get("desiredReplicas")
            ok = s.get("phase") == "Ready" and s.get("engineKey") == key and s.get("readyReplicas") == want
            return s if ok else None

        status = wait_for(lambda: ready_on(key_a), timeout=90, desc="chat Ready on key A")
        assert status["replicas"] == 2 and status["updatedReplicas"] == 2 and status["desiredReplicas"] == 2
        assert status["endpoint"] == f"http://chat.{api.ns}.svc:8000"
        assert status["selector"] == "llm.trtllm-operator.dev/deployment=chat"
        assert status["observedGeneration"] == 1
        pods = api.pods("chat")
        assert len(pods) == 2
        for pod in pods:
            assert node_product(api, pod.spec.node_name) == H100
            assert pod.metadata.labels[KEY_LABEL] == key_a[:16]
            assert pod.spec.containers[0].resources.limits["nvidia.com/gpu"] == "2"
        engine_status = api.get("llmengines", "llama-fp8")["status"]
        assert engine_status.get("usedBy") == ["chat"]
        dep = api.apps.read_namespaced_deployment("chat", api.ns)
        assert dep.spec.strategy.rolling_update.max_surge == 0
        assert dep.spec.strategy.rolling_update.max_unavailable == 1

        # Change the engine: a new key (cached) → the fleet rolls, one pod at a time.
        api.custom.patch_namespaced_custom_object(
            GROUP, VERSION, api.ns, "llmengines", "llama-fp8", {"spec": {"build": {"maxBatchSize": 128}}}
        )
        samples: list[tuple[str | None, list[tuple[str, bool]]]] = []

        def rolled() -> bool:
            s = api.status("chat")
            pods = [
                (
                    p.metadata.labels.get(KEY_LABEL, ""),
                    any(c.type == "Ready" and c.status == "True" for c in p.status.conditions or []),
                )
                for p in api.pods("chat")
            ]
            samples.append((s.get("engineKey"), pods))
            return s.get("phase") == "Ready" and s.get("engineKey") == key_b

        wait_for(rolled, timeout=120, interval=0.1, desc="chat Ready on key B")
        for served, pods in samples:
            assert len(pods) <= 2, f"maxSurge 0: never more pods than replicas, saw {pods}"
            assert sum(ready for _, ready in pods) >= 1, f"maxUnavailable 1: one pod at a time, saw {pods}"
            if served == key_b:  # completion is reported only when every pod serves the new key
                assert all(k == key_b[:16] for k, _ in pods), pods
        assert any(
            served == key_a and any(k == key_b[:16] for k, _ in pods) for served, pods in samples
        ) or any(served == key_a and len(pods) < 2 for served, pods in samples), (
            "the rollout was never observed in progress"
        )
        assert all(p.metadata.labels[KEY_LABEL] == key_b[:16] for p in api.pods("chat"))
        rs = api.apps.list_namespaced_replica_set(
            api.ns, label_selector="llm.trtllm-operator.dev/deployment=chat"
        )
        templates = [(r.spec.replicas, r.spec.template.metadata.annotations) for r in rs.items]
        assert sorted(r.spec.replicas for r in rs.items) == [0, 2], (
            templates
        )  # exactly one template change  # old ReplicaSet scaled down, new one up
        # One writer for replicas: the scale subresource (kubectl scale, HPA) → spec.replicas → workload.
        api.custom.patch_namespaced_custom_object_scale(
            GROUP, VERSION, api.ns, "llmdeployments", "chat", {"spec": {"replicas": 3}}
        )
        wait_for(
            lambda: ready_on(key_b) and api.status("chat")["readyReplicas"] == 3, timeout=60, desc="3 ready"
        )
        assert api.apps.read_namespaced_deployment("chat", api.ns).spec.replicas == 3
        scale = api.custom.get_namespaced_custom_object_scale(
            GROUP, VERSION, api.ns, "llmdeployments", "chat"
        )
        assert scale["status"]["replicas"] == 3
        assert scale["status"]["selector"] == "llm.trtllm-operator.dev/deployment=chat"
        # Scaling the Deployment itself is set back, with a Warning that says who owns the count.
        wait_for(lambda: api.status("chat").get("desiredReplicas") == 3, timeout=30, desc="desired 3")
        api.apps.patch_namespaced_deployment_scale("chat", api.ns, {"spec": {"replicas": 5}})

        def reverted() -> Any:
            events = api.core.list_namespaced_event(api.ns, field_selector="involvedObject.name=chat").items
            return next((e for e in events if e.reason == "WorkloadScaleReverted"), None)

        event = wait_for(reverted, timeout=30, desc="a WorkloadScaleReverted Event")
        assert event.type == "Warning" and "Deployment/chat was scaled to 5 directly" in event.message, event
        assert "kubectl scale llmdeployment chat --replicas N" in event.message, event.message
        wait_for(
            lambda: api.apps.read_namespaced_deployment("chat", api.ns).spec.replicas == 3,
            timeout=30,
            desc="the Deployment back at 3",
        )
        # One direct scale, one Warning: each Deployment event after the revert (the ReplicaSet
        # scaling, pod status) reconciles again, and a watch-cached copy from before the revert
        # posted it again (fresh-user trial 34: 8 in one second).
        wait_for(
            lambda: api.apps.read_namespaced_deployment("chat", api.ns).status.replicas == 3,
            timeout=30,
            desc="the extra pods gone",
        )
        events = api.core.list_namespaced_event(api.ns, field_selector="involvedObject.name=chat").items
        assert [e.reason for e in events].count("WorkloadScaleReverted") == 1, [e.message for e in events]
        cms = api.core.list_namespaced_config_map(
            api.ns, label_selector="app.kubernetes.io/component=model-repository"
        ).items
        assert 1 <= len(cms) <= 2

        # Deleting the deployment removes it from the engine's status.usedBy.
        api.custom.delete_namespaced_custom_object(GROUP, VERSION, api.ns, "llmdeployments", "chat")
        wait_for(
            lambda: api.get("llmengines", "llama-fp8")["status"].get("usedBy") == [],
            timeout=30,
            desc="usedBy emptied",
        )


def test_incompatible_or_unplaceable_is_reported_and_nothing_rolls(cluster: LocalCluster, api: Api) -> None:
    engine = a_cached_engine("llama-fp8", tp=2)
    api.cache_artifact(engine)
    api.create(engine)
    other_image = "nvcr.io/nvidia/tritonserver:25.05-trtllm-python-py3"
    api.create(a_deployment("img", "llama-fp8", replicas=2, server={"image": other_image}))
    a100 = {"nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"}}
    api.create(a_deployment("gpu", "llama-fp8", scheduling=a100, replicas=2))
    # A required node affinity whose only term excludes the engine's GPU: admitted (the API server
    # cannot see the engine), refused by the operator with the term's path and the fix.
    not_h100 = {"key": "nvidia.com/gpu.product", "operator": "NotIn", "values": [H100]}
    terms = {"nodeSelectorTerms": [{"matchExpressions": [not_h100]}]}
    affinity = {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": terms}}}
    api.create(a_deployment("aff", "llama-fp8", scheduling=affinity, replicas=2))
    api.create(a_deployment("waiting", "not-built-yet", replicas=2))
    # 16 ranks > 8 GPUs of an H100 node, and this cluster has no LeaderWorkerSet CRD. (A model the
    # operator has no config.json for: the planner's own multi-node check is skipped.)
    big = a_cached_engine("big", tp=2)
    big["spec"]["model"]["source"] = "hf://example-org/large-model"
    big["spec"]["parallelism"] = {"tensor": 8, "pipeline": 2}
    api.cache_artifact(big)
    api.create(big)
    api.create(a_deployment("big", "big", replicas=2))

    with running_operator(cluster, [api.ns]):
        img = wait_for(lambda: api.condition("img", "EngineIncompatible"), timeout=60, desc="img condition")
        assert img["status"] == "True" and img["reason"] == "ImageMismatch"
        assert other_image in img["message"] and IMAGE in img["message"]
        gpu = wait_for(lambda: api.condition("gpu", "EngineIncompatible"), timeout=60, desc="gpu condition")
        assert (
            gpu["status"] == "True" and "NVIDIA-A100-SXM4-80GB" in gpu["message"] and H100 in gpu["message"]
        )
        # The condition names the field and the fix (issue 21).
        assert gpu["message"].startswith('spec.scheduling.nodeSelector["nvidia.com/gpu.product"]')
        assert "remove the key from spec.scheduling.nodeSelector" in gpu["message"]
        assert "remove spec.server.image" in img["message"]
        aff = wait_for(lambda: api.condition("aff", "EngineIncompatible"), timeout=60, desc="aff condition")
        assert aff["status"] == "True" and aff["reason"] == "GPUMismatch", aff
        assert aff["message"].startswith(
            "spec.scheduling.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
            ".nodeSelectorTerms[0].matchExpressions[0]"
        ), aff
        assert "could never be scheduled" in aff["message"] and "allow the engine's product" in aff["message"]
        waiting = wait_for(lambda: api.condition("waiting", "Ready"), timeout=60, desc="waiting condition")
        assert waiting["status"] == "False" and waiting["reason"] == "EngineNotFound"
        assert api.status("img")["phase"] == "Failed"
        lws = api.wait_condition(
            "big", "Ready", reason="LeaderWorkerSetRequired", timeout=60, desc="big: LeaderWorkerSetRequired"
        )
        assert lws["status"] == "False" and "install LeaderWorkerSet" in lws["message"]
        names = {d.metadata.name for d in api.apps.list_namespaced_deployment(api.ns).items}
        assert names == set(), f"nothing may be rolled out, found {names}"
        assert api.pods("img") == [] and api.pods("gpu") == [] and api.pods("big") == []
        assert api.pods("aff") == []


def test_partial_artifact_rolls_out_only_with_the_opt_in(cluster: LocalCluster, api: Api) -> None:
    engine = a_cached_engine("partial", tp=2)
    api.cache_artifact(engine, missing=("engine/ (compile skipped: --skip-compile)",))
    api.create(engine)
    api.create(a_deployment("plain", "partial", replicas=1))
    opted = a_deployment("opted", "partial", replicas=1)
    opted["metadata"]["annotations"] = {"llm.trtllm-operator.dev/allow-partial-artifact": "true"}
    api.create(opted)

    with running_operator(cluster, [api.ns]):
        refused = api.wait_condition(
            "plain", "Ready", reason="PartialArtifact", timeout=60, desc="plain: PartialArtifact"
        )
        assert refused["status"] == "False" and "allow-partial-artifact" in refused["message"]
        assert api.status("plain")["phase"] == "Failed"
        wait_for(
            lambda: [
                d for d in api.apps.list_namespaced_deployment(api.ns).items if d.metadata.name == "opted"
            ],
            timeout=60,
            desc="the opted-in deployment's workload",
        )
        engine_status = api.get("llmengines", "partial")["status"]
        complete = next(c for c in engine_status["conditions"] if c["type"] == "ArtifactComplete")
        assert (complete["status"], complete["reason"]) == ("False", "CompileSkipped")
        names = {d.metadata.name for d in api.apps.list_namespaced_deployment(api.ns).items}
        assert names == {"opted"}, f"only the opted-in deployment may roll out, found {names}"


@pytest.mark.slow
def test_auto_rollback_when_new_key_never_becomes_ready(cluster: LocalCluster, api: Api) -> None:
    """New-key pods never become Ready (built for H200: the cluster has none, they stay Pending) past
    progressDeadlineSeconds → the previous key's pod template is restored."""
    good, bad = a_cached_engine("llama-a", tp=2), a_cached_engine("llama-b", tp=2, product="NVIDIA-H200")
    key_a, key_b = api.cache_artifact(good).key, api.cache_artifact(bad).key
    api.create(good)
    api.create(bad)
    rollout = {"progressDeadlineSeconds": 60, "autoRollback": True}
    api.create(a_deployment("chat", "llama-a", replicas=2, rollout=rollout))

    with running_operator(cluster, [api.ns]):
        wait_for(
            lambda: (
                api.status("chat").get("engineKey") == key_a and api.status("chat").get("readyReplicas") == 2
            ),
            timeout=90,
            desc="chat Ready on key A",
        )
        # Serve the other engine: its pods need H200 nodes, which this cluster does not have.
        api.custom.patch_namespaced_custom_object(
            GROUP,
            VERSION,
            api.ns,
            "llmdeployments",
            "chat",
            {"spec": {"engineRef": {"name": "llama-b"}}},
        )
        degraded = api.wait_condition(
            "chat", "Degraded", reason="RolledBack", timeout=150, desc="Degraded=True RolledBack"
        )
        assert (
            degraded["status"] == "True"
            and key_b[:16] in degraded["message"]
            and key_a[:16] in degraded["message"]
        )
        wait_for(
            lambda: (
                api.status("chat").get("readyReplicas") == 2
                and all(p.metadata.labels[KEY_LABEL] == key_a[:16] for p in api.pods("chat"))
            ),
            timeout=60,
            desc="previous key serving again",
        )
        status = api.status("chat")
        assert status["engineKey"] == key_a and status["phase"] == "Degraded"
        dep = api.apps.read_namespaced_deployment("chat", api.ns)
        assert dep.metadata.annotations["llm.trtllm-operator.dev/rolled-back-from"] == key_b
        events = api.core.list_namespaced_event(api.ns, field_selector="involvedObject.name=chat").items
        assert any(e.reason == "RolledBack" and e.type == "Warning" for e in events)

        # Fixing the spec (back to the good engine) clears the hold; the fleet is Ready again.
        api.custom.patch_namespaced_custom_object(
            GROUP, VERSION, api.ns, "llmdeployments", "chat", {"spec": {"engineRef": {"name": "llama-a"}}}
        )
        wait_for(lambda: api.status("chat").get("phase") == "Ready", timeout=60, desc="Ready after the fix")
        assert (api.condition("chat", "Degraded") or {}).get("status") == "False"
        annotations = api.apps.read_namespaced_deployment("chat", api.ns).metadata.annotations
        assert "llm.trtllm-operator.dev/rolled-back-from" not in annotations


def test_status_says_what_is_served_when_pods_cannot_be_placed_or_the_engine_is_gone(
    cluster: LocalCluster, api: Api
) -> None:
    """Issue #25 item 5 (fresh-user trial). Replicas the scheduler cannot place are reported with its
    message (not "starting" forever); an LLMEngine deleted while its pods serve leaves a status that
    names the served key (phase Degraded, EngineNotFound) and a Streaming condition of what they
    serve, not "no model is served yet"."""
    engine = a_cached_engine("wide", tp=8)  # one pod = 8 GPUs = one whole H100 node (2 in the cluster)
    key = api.cache_artifact(engine).key
    api.create(engine)
    api.create(a_deployment("big", "wide", replicas=1, server={"api": "triton"}))

    with running_operator(cluster, [api.ns]):
        wait_for(
            lambda: api.status("big").get("phase") == "Ready" and api.status("big").get("engineKey") == key,
            timeout=90,
            desc="big Ready",
        )
        streaming = api.condition("big", "Streaming")
        assert streaming is not None and (streaming["status"], streaming["reason"]) == (
            "False",
            "NotDecoupled",
        )
        assert "generate_stream" in streaming["message"] and "OpenAI" not in streaming["message"]

        # 3 replicas of 8 GPUs on two 8-GPU H100 nodes: the third cannot be scheduled.
        api.custom.patch_namespaced_custom_object_scale(
            GROUP, VERSION, api.ns, "llmdeployments", "big", {"spec": {"replicas": 3}}
        )
        wait_for(lambda: api.unschedulable("big") == 1, timeout=60, desc="one pod Unschedulable")
        pending = next(
            c.message
            for p in api.pods("big")
            for c in p.status.conditions or []
            if c.type == "PodScheduled" and c.reason == "Unschedulable"
        )
        degraded = api.wait_condition(
            "big",
            "Degraded",
            reason="ReplicasUnschedulable",
            timeout=60,
            desc="Degraded=True ReplicasUnschedulable",
        )
        assert degraded["status"] == "True" and "1 pod(s) cannot be scheduled: " in degraded["message"]
        assert pending.strip() in degraded["message"]  # the scheduler's own words
        assert "nvidia.com/gpu" in pending, pending
        assert api.status("big")["phase"] == "Degraded"
        events = api.core.list_namespaced_event(api.ns, field_selector="involvedObject.name=big").items
        assert any(e.reason == "ReplicasUnschedulable" and e.type == "Warning" for e in events)

        api.custom.patch_namespaced_custom_object_scale(
            GROUP, VERSION, api.ns, "llmdeployments", "big", {"spec": {"replicas": 1}}
        )
        wait_for(lambda: api.status("big").get("phase") == "Ready", timeout=60, desc="Ready at 1 replica")

        # The engine is deleted while its pod serves: the pod is kept, and the status says so.
        api.custom.delete_namespaced_custom_object(GROUP, VERSION, api.ns, "llmengines", "wide")
        ready = api.wait_condition(
            "big", "Ready", reason="EngineNotFound", timeout=60, desc="Ready reason EngineNotFound"
        )
        assert ready["status"] == "True" and f"still serving engine key {key[:16]}" in ready["message"]
        status = api.status("big")
        assert status["phase"] == "Degraded" and status["engineKey"] == key
        degraded = api.condition("big", "Degraded")
        assert degraded is not None and (degraded["status"], degraded["reason"]) == ("True", "EngineNotFound")
        streaming = api.condition("big", "Streaming")
        assert streaming is not None and (streaming["status"], streaming["reason"]) == (
            "False",
            "NotDecoupled",
        )
        assert len(api.pods("big")) == 1 and api.status("big")["readyReplicas"] == 1
        assert "apply the LLMEngine again" in ready["message"], ready["message"]

        # What the message tells the user to do: the same LLMEngine applied again is Ready from the
        # engine cache (no builder Job), and the serving pod is the same pod (nothing rolled).
        pod_uid = api.pods("big")[0].metadata.uid
        api.create(copy.deepcopy(engine))
        wait_for(
            lambda: (c := api.condition("big", "Ready")) and c["reason"] != "EngineNotFound" and c,
            timeout=60,
            desc="Ready no longer EngineNotFound",
        )
        wait_for(lambda: api.status("big").get("phase") == "Ready", timeout=60, desc="big Ready again")
        assert [p.metadata.uid for p in api.pods("big")] == [pod_uid]
        assert not api.batch.list_namespaced_job(api.ns).items
