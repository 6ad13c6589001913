"""Fresh-user trial findings, against the real control plane with kwok nodes, operator in-process.

1. A serving pod whose container cannot start (here a crash loop, as the kubelet reports it) is
   explained on the LLMDeployment (reason ``ReplicasFailing``), not "ReplicasStarting" forever.
   kwok runs no kubelet: the test writes the kubelet's report itself (``pods/status``), shaped as
   the kubelet writes it — a Running pod, Ready False, the container ``waiting`` with reason
   ``CrashLoopBackOff`` (Kubernetes v1.34 ``pkg/kubelet/container/sync_result.go``) and its last
   termination. kwok's stages leave it alone (hack/kwok/pod-ready.yaml matches Pending pods only).
   Likewise a builder pod that never starts (kwok outcome ``pending``: it stays Pending) whose
   container waits with ``CreateContainerConfigError`` and the kubelet's message for a Secret key
   that does not exist (pkg/kubelet/kubelet_pods.go "couldn't find key %v in Secret %v/%v") is
   explained on the LLMEngine (reason ``BuilderPodFailing``, naming spec.model.credentialsSecretRef).
2. Raising ``spec.storage.createPVC.size`` grows the operator-created claim where the StorageClass
   allows expansion, and is reported (``StorageExpanded=False``, the API server's words) where it
   does not. The real kube-apiserver decides: its PersistentVolumeClaimResize admission plugin is on
   by default (pkg/kubeapiserver/options/plugins.go; the local control plane disables only
   TaintNodesByCondition). The local control plane runs no PV binder, so the test binds the claim
   the operator created to a PV itself, as the binder would (claim Bound: only a bound claim grows).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client
from support.api import Api, find_condition
from support.cluster import LocalCluster
from support.manifests import OUTCOME, a_cached_engine, a_deployment, an_engine, create_token_secret
from support.operator import running_operator
from support.wait import wait_for

from trtllm_operator.api import ENGINE_PLURAL

pytestmark = pytest.mark.slow


@pytest.fixture
def deployments(cluster: LocalCluster, namespace: str) -> Iterator[Api]:
    a = Api(cluster, namespace)
    with a.artifact_pvc():
        yield a


def crash_looping(pod: Any, container: str) -> dict[str, Any]:
    """``pod``'s status as the kubelet reports ``container`` crash-looping (exit 1, backing off)."""
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    name = pod.metadata.name
    conditions = [
        {
            "type": t,
            "status": "False",
            "reason": "ContainersNotReady",
            "lastTransitionTime": now,
            "message": f"containers with unready status: [{container}]",
        }
        for t in ("Ready", "ContainersReady")
    ]
    statuses = [
        {
            "name": c.name,
            "image": c.image,
            "imageID": "",
            "ready": False,
            "started": False,
            "restartCount": 3,
            "state": {
                "waiting": {
                    "reason": "CrashLoopBackOff",
                    # kuberuntime_manager.go doBackOff: "back-off %s restarting failed container=%s
                    # pod=%s" with format.Pod (name_namespace(uid))
                    "message": f"back-off 40s restarting failed container={c.name} "
                    f"pod={name}_{pod.metadata.namespace}({pod.metadata.uid})",
                }
            },
            "lastState": {
                "terminated": {"exitCode": 1, "reason": "Error", "startedAt": now, "finishedAt": now}
            },
        }
        for c in pod.spec.containers
        if c.name == container
    ]
    return {"status": {"phase": "Running", "conditions": conditions, "containerStatuses": statuses}}


def test_a_crash_looping_serving_pod_is_explained(cluster: LocalCluster, deployments: Api) -> None:
    api = deployments
    engine = a_cached_engine("llama")
    api.cache_artifact(engine)
    api.create(engine)
    api.create(a_deployment("chat", "llama", replicas=1, server={"api": "triton"}))
    with running_operator(cluster, [api.ns]):
        wait_for(lambda: api.status("chat").get("phase") == "Ready", timeout=90, desc="chat Ready")
        (pod,) = api.pods("chat")
        api.core.patch_namespaced_pod_status(pod.metadata.name, api.ns, crash_looping(pod, "triton"))

        ready = api.wait_condition(
            "chat", "Ready", reason="ReplicasFailing", timeout=60, desc="Ready=False ReplicasFailing"
        )
        assert ready["status"] == "False"
        assert (
            f"pod {pod.metadata.name} container triton is waiting: CrashLoopBackOff: back-off 40s "
            "restarting failed container=triton" in ready["message"]
        )
        assert f"kubectl logs --previous {pod.metadata.name} -c triton" in ready["message"]
        degraded = api.condition("chat", "Degraded")
        assert degraded is not None and (degraded["status"], degraded["reason"]) == (
            "True",
            "ReplicasFailing",
        )
        events = api.core.list_namespaced_event(api.ns, field_selector="involvedObject.name=chat").items
        assert any(e.reason == "ReplicasFailing" and e.type == "Warning" for e in events)


def test_a_builder_pod_waiting_on_a_missing_secret_key_is_explained(
    cluster: LocalCluster, namespace: str
) -> None:
    api = Api(cluster, namespace)
    create_token_secret(api.core, namespace)  # Secret hf with key "token"; the engine asks for "tok"
    eng = an_engine("tok").pod(**{OUTCOME: "pending"})
    eng.body["spec"]["model"]["credentialsSecretRef"] = {"name": "hf", "key": "tok"}
    with running_operator(cluster, [namespace]):
        api.create(eng)
        job = wait_for(lambda: api.jobs() and api.jobs()[0]["metadata"]["name"], 60, desc="builder Job")
        pod = wait_for(
            lambda: next((p for p in api.job_pods(job) if (p.get("spec") or {}).get("nodeName")), None),
            60,
            desc="builder pod scheduled",
        )
        name = pod["metadata"]["name"]
        container = pod["spec"]["containers"][0]
        message = f"couldn't find key tok in Secret {namespace}/hf"
        api.core.patch_namespaced_pod_status(
            name,
            namespace,
            {
                "status": {
                    "phase": "Pending",
                    "containerStatuses": [
                        {
                            "name": container["name"],
                            "image": container["image"],
                            "imageID": "",
                            "ready": False,
                            "started": False,
                            "restartCount": 0,
                            "state": {
                                "waiting": {"reason": "CreateContainerConfigError", "message": message}
                            },
                        }
                    ],
                }
            },
        )
        ready = wait_for(
            lambda: (
                (c := find_condition(api.engine("tok"), "Ready")) and c["reason"] == "BuilderPodFailing" and c
            ),
            60,
            desc="Ready=False BuilderPodFailing",
        )
        assert ready["status"] == "False"
        assert (
            f"pod {name} container builder is waiting: CreateContainerConfigError: {message}; fix the "
            "Secret reference (spec.model.credentialsSecretRef)" in ready["message"]
        )
        degraded = find_condition(api.engine("tok"), "Degraded")
        assert degraded is not None and (degraded["status"], degraded["reason"]) == (
            "True",
            "BuilderPodFailing",
        )
        assert api.engine("tok")["status"]["build"]["reason"] == "BuilderPodFailing"
        wait_for(
            lambda: "BuilderPodFailing" in api.event_reasons("tok"), 30, desc="a BuilderPodFailing Event"
        )


def bind(core: client.CoreV1Api, namespace: str, claim: str, size: str, storage_class: str) -> str:
    """Bind ``claim`` to a new PV of its class, as the PV controller's binder would (it does not run
    here): the PV's claimRef and the claim's volumeName, both Bound."""
    pv = f"{claim}-{namespace}"
    core.create_persistent_volume(
        {
            "metadata": {"name": pv},
            "spec": {
                "capacity": {"storage": size},
                "accessModes": ["ReadWriteOnce"],
                "hostPath": {"path": f"/tmp/{pv}"},
                "storageClassName": storage_class,
                "claimRef": {"namespace": namespace, "name": claim},
            },
        }
    )
    core.patch_persistent_volume_status(pv, {"status": {"phase": "Bound"}})
    core.patch_namespaced_persistent_volume_claim(
        claim,
        namespace,
        {
            "metadata": {"annotations": {"pv.kubernetes.io/bind-completed": "yes"}},
            "spec": {"volumeName": pv},
        },
    )
    core.patch_namespaced_persistent_volume_claim_status(
        claim,
        namespace,
        {"status": {"phase": "Bound", "accessModes": ["ReadWriteOnce"], "capacity": {"storage": size}}},
    )
    return pv


@pytest.mark.parametrize("expandable", [True, False])
def test_raising_create_pvc_size_grows_the_claim_or_says_why_not(
    cluster: LocalCluster, namespace: str, expandable: bool
) -> None:
    api = Api(cluster, namespace)
    create_token_secret(api.core, namespace)
    storage = client.StorageV1Api(cluster.api)
    sc = f"{'grows' if expandable else 'fixed'}-{namespace}"
    storage.create_storage_class(
        {
            "metadata": {"name": sc},
            "provisioner": "example.com/no-provisioner",
            "allowVolumeExpansion": expandable,
        }
    )
    eng = an_engine("e").pod(**{OUTCOME: "run"})
    eng.body["spec"]["storage"] = {"createPVC": {"size": "1Gi", "storageClassName": sc}}
    pv = None
    try:
        with running_operator(cluster, [namespace]):
            api.create(eng)
            claim = wait_for(
                lambda: next(
                    (
                        p
                        for p in api.core.list_namespaced_persistent_volume_claim(namespace).items
                        if p.metadata.name == "e-artifacts"
                    ),
                    None,
                ),
                timeout=60,
                desc="the operator created PVC e-artifacts",
            )
            assert claim.spec.resources.requests["storage"] == "1Gi"
            pv = bind(api.core, namespace, "e-artifacts", "1Gi", sc)
            api.patch(ENGINE_PLURAL, "e", {"spec": {"storage": {"createPVC": {"size": "2Gi"}}}})

            expanded = wait_for(
                lambda: find_condition(api.engine("e"), "StorageExpanded"),
                timeout=60,
                desc="condition StorageExpanded",
            )
            request = api.core.read_namespaced_persistent_volume_claim("e-artifacts", namespace)
            if expandable:
                assert (expanded["status"], expanded["reason"]) == ("True", "PVCExpansionRequested")
                assert request.spec.resources.requests["storage"] == "2Gi"
                assert expanded["message"].startswith(
                    "PersistentVolumeClaim e-artifacts requests 2Gi (spec.storage.createPVC.size 2Gi); "
                    "its capacity is 1Gi"
                )
                assert "PVCExpansionRequested" in api.event_reasons("e")
            else:
                assert (expanded["status"], expanded["reason"]) == ("False", "PVCExpansionRefused")
                assert request.spec.resources.requests["storage"] == "1Gi"
                message = expanded["message"]
                assert message.startswith(
                    "spec.storage.createPVC.size is 2Gi, but the API server refused to grow "
                    "PersistentVolumeClaim e-artifacts from 1Gi: "
                )
                # the admission plugin's own words (plugin/pkg/admission/storage/persistentvolume/resize)
                assert (
                    "only dynamically provisioned pvc can be resized and the storageclass that provisions "
                    "the pvc must support resize" in message
                )
                assert f"set allowVolumeExpansion: true on StorageClass {sc}" in message
                wait_for(
                    lambda: "PVCExpansionRefused" in api.event_reasons("e"),
                    timeout=30,
                    desc="a PVCExpansionRefused Event",
                )
    finally:
        storage.delete_storage_class(sc)
        if pv is not None:
            api.core.delete_persistent_volume(pv)
