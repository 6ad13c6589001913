"""Smoke tests proving the local control plane is real: scheduling on GPU nodes, Job outcomes from
kwok stages (hack/kwok/pod-outcome.yaml), unschedulable pods, ServiceAccount tokens under RBAC."""

from __future__ import annotations

import ipaddress
import json
import socket
from typing import Any

from kubernetes import client
from localcluster import add_gpu_nodes, delete_nodes, node_is_ready
from support.cluster import LocalCluster
from support.wait import wait_for

H100 = "NVIDIA-H100-80GB-HBM3"
OUTCOME = "kwok.trtllm-operator.dev/outcome"
EXIT_CODE = "kwok.trtllm-operator.dev/exit-code"
MESSAGE = "kwok.trtllm-operator.dev/message"
DELAY_MS = "kwok.trtllm-operator.dev/delay-ms"


def _container(gpus: int = 0) -> dict[str, Any]:
    c: dict[str, Any] = {"name": "main", "image": "example.invalid/smoke:1"}
    if gpus:
        c["resources"] = {"limits": {"nvidia.com/gpu": str(gpus)}}
    return c


def _job(name: str, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {
            "backoffLimit": 0,
            "template": {
                "metadata": {"annotations": annotations or {}},
                "spec": {"restartPolicy": "Never", "containers": [_container()]},
            },
        },
    }


def _job_condition(batch: client.BatchV1Api, ns: str, name: str) -> str | None:
    job = batch.read_namespaced_job(name, ns)
    for cond in job.status.conditions or []:
        if cond.type in ("Complete", "Failed") and cond.status == "True":
            return str(cond.type)
    return None


def _job_pod(core: client.CoreV1Api, ns: str, job: str) -> Any:
    pods = core.list_namespaced_pod(ns, label_selector=f"job-name={job}").items
    assert len(pods) == 1, [p.metadata.name for p in pods]
    return pods[0]


def _job_pod_phase(core: client.CoreV1Api, ns: str, job: str) -> str | None:
    """The phase of the Job's one pod; None while the Job controller has made none (for wait_for:
    a second pod is a failure at once, not a reason to wait)."""
    pods = core.list_namespaced_pod(ns, label_selector=f"job-name={job}").items
    assert len(pods) <= 1, [p.metadata.name for p in pods]
    return str(pods[0].status.phase) if pods else None


def _ready_node(core: client.CoreV1Api, name: str) -> Any:
    node = core.read_node(name)
    return node if node_is_ready(node) else None


def test_gpu_deployment_lands_on_h100_and_becomes_ready(cluster: LocalCluster, namespace: str) -> None:
    apps, core = client.AppsV1Api(cluster.api), client.CoreV1Api(cluster.api)
    apps.create_namespaced_deployment(
        namespace,
        {
            "metadata": {"name": "llm"},
            "spec": {
                "replicas": 2,
                "selector": {"matchLabels": {"app": "llm"}},
                "template": {
                    "metadata": {"labels": {"app": "llm"}},
                    "spec": {"nodeSelector": {"nvidia.com/gpu.product": H100}, "containers": [_container(2)]},
                },
            },
        },
    )
    wait_for(
        lambda: (apps.read_namespaced_deployment("llm", namespace).status.ready_replicas or 0) == 2,
        timeout=30,
        desc="Deployment llm with 2 ready replicas",
    )
    pods = core.list_namespaced_pod(namespace, label_selector="app=llm").items
    assert len(pods) == 2
    for pod in pods:
        node = core.read_node(pod.spec.node_name)
        assert node.metadata.labels["nvidia.com/gpu.product"] == H100, pod.spec.node_name
        assert pod.status.phase == "Running"
        assert {c.type: c.status for c in pod.status.conditions}["Ready"] == "True"
    ips = {pod.status.pod_ip for pod in pods}
    assert len(ips) == 2, f"pod IPs not distinct: {ips}"
    pod_cidr = ipaddress.ip_network(cluster.control_plane.pod_cidr)
    assert pod_cidr.subnet_of(ipaddress.ip_network("127.0.0.0/8")), pod_cidr
    assert all(ipaddress.ip_address(ip) in pod_cidr for ip in ips), ips
    # A test can serve on a pod's IP (the whole 127.0.0.0/8 is loopback on Linux).
    with socket.socket() as srv:
        srv.bind((sorted(ips)[0], 0))
        srv.listen(1)
        with socket.create_connection(srv.getsockname(), timeout=5):
            pass


def test_job_completes_with_termination_message(cluster: LocalCluster, namespace: str) -> None:
    batch, core = client.BatchV1Api(cluster.api), client.CoreV1Api(cluster.api)
    report = {
        "status": "ok",
        "engine": {"path": "s3://b/e", "tp": 2},
        "note": 'quotes "and" {braces}\nline 2',
    }
    batch.create_namespaced_job(namespace, _job("build", {MESSAGE: json.dumps(report)}))
    assert (
        wait_for(lambda: _job_condition(batch, namespace, "build"), desc="Job build finished") == "Complete"
    )
    pod = _job_pod(core, namespace, "build")
    assert pod.status.phase == "Succeeded"
    terminated = pod.status.container_statuses[0].state.terminated
    assert terminated.exit_code == 0
    assert json.loads(terminated.message) == report


def test_job_marked_to_fail_fails_with_exit_code_and_message(cluster: LocalCluster, namespace: str) -> None:
    batch, core = client.BatchV1Api(cluster.api), client.CoreV1Api(cluster.api)
    message = json.dumps({"error": "CUDA out of memory", "detail": {"requested": "80GiB"}})
    batch.create_namespaced_job(namespace, _job("build", {OUTCOME: "fail", EXIT_CODE: "3", MESSAGE: message}))
    assert wait_for(lambda: _job_condition(batch, namespace, "build"), desc="Job build finished") == "Failed"
    pod = _job_pod(core, namespace, "build")
    assert pod.status.phase == "Failed"
    terminated = pod.status.container_statuses[0].state.terminated
    assert terminated.exit_code == 3
    assert terminated.message == message


def test_pod_with_external_readiness_is_running_but_not_ready(cluster: LocalCluster, namespace: str) -> None:
    """Fresh-user trial 42 F5: kwok marked every pod Ready at once, so the demo's serving pods were
    Ready seconds before their tritonserver existed (a false AllReplicasReady). Annotated
    ``kwok.trtllm-operator.dev/readiness: external`` a pod stays unready until something else sets
    Ready, as a container with a readinessProbe starts unready; without it, nothing changes."""
    core = client.CoreV1Api(cluster.api)
    for name, marks in (("probed", {"kwok.trtllm-operator.dev/readiness": "external"}), ("plain", {})):
        core.create_namespaced_pod(
            namespace,
            {
                "metadata": {"name": name, "annotations": marks},
                "spec": {"nodeSelector": {"nvidia.com/gpu.product": H100}, "containers": [_container()]},
            },
        )
    for name in ("probed", "plain"):
        wait_for(
            lambda n=name: core.read_namespaced_pod(n, namespace).status.phase == "Running",  # type: ignore[misc]
            desc=f"pod {name} Running",
        )
    probed, plain = (core.read_namespaced_pod(n, namespace).status for n in ("probed", "plain"))
    assert {c.type: c.status for c in probed.conditions}["Ready"] == "False"
    assert {c.type: c.status for c in probed.conditions}["ContainersReady"] == "False"
    assert [c.ready for c in probed.container_statuses] == [False]
    assert probed.pod_ip
    assert {c.type: c.status for c in plain.conditions}["Ready"] == "True"
    assert [c.ready for c in plain.container_statuses] == [True]


def test_job_pod_with_outcome_run_stays_running(cluster: LocalCluster, namespace: str) -> None:
    batch, core = client.BatchV1Api(cluster.api), client.CoreV1Api(cluster.api)
    batch.create_namespaced_job(namespace, _job("long", {OUTCOME: "run"}))
    wait_for(lambda: _job_pod_phase(core, namespace, "long") == "Running", desc="pod of Job long Running")
    # A Job created later, with the same default delay, finishing proves the stages ran meanwhile.
    batch.create_namespaced_job(namespace, _job("short"))
    assert (
        wait_for(lambda: _job_condition(batch, namespace, "short"), desc="Job short finished") == "Complete"
    )
    assert _job_pod(core, namespace, "long").status.phase == "Running"
    assert _job_condition(batch, namespace, "long") is None


def test_delay_ms_keeps_job_pod_running_before_outcome(cluster: LocalCluster, namespace: str) -> None:
    batch, core = client.BatchV1Api(cluster.api), client.CoreV1Api(cluster.api)
    batch.create_namespaced_job(namespace, _job("slow", {DELAY_MS: "2500"}))
    wait_for(lambda: _job_pod_phase(core, namespace, "slow") == "Running", desc="pod of Job slow Running")
    assert wait_for(lambda: _job_condition(batch, namespace, "slow"), desc="Job slow finished") == "Complete"
    terminated = _job_pod(core, namespace, "slow").status.container_statuses[0].state.terminated
    # API timestamps have 1 s resolution: 2.5 s in Running shows as at least 2 s.
    assert (terminated.finished_at - terminated.started_at).total_seconds() >= 2, terminated


def test_pod_asking_for_9_gpus_is_unschedulable(cluster: LocalCluster, namespace: str) -> None:
    core = client.CoreV1Api(cluster.api)
    core.create_namespaced_pod(
        namespace, {"metadata": {"name": "too-big"}, "spec": {"containers": [_container(9)]}}
    )

    def scheduled_condition() -> Any:
        pod = core.read_namespaced_pod("too-big", namespace)
        return next((c for c in pod.status.conditions or [] if c.type == "PodScheduled"), None)

    cond = wait_for(scheduled_condition, desc="PodScheduled condition on pod too-big")
    assert (cond.status, cond.reason) == ("False", "Unschedulable")
    assert "nvidia.com/gpu" in cond.message
    pod = core.read_namespaced_pod("too-big", namespace)
    assert pod.status.phase == "Pending"
    assert pod.spec.node_name is None


def test_service_account_token_is_subject_to_rbac(cluster: LocalCluster, namespace: str) -> None:
    cluster.kubectl("create", "serviceaccount", "op", "-n", namespace)
    token = cluster.kubectl("create", "token", "op", "-n", namespace).stdout.strip()
    as_sa = [
        "--kubeconfig=/dev/null",
        f"--server={cluster.server}",
        "--insecure-skip-tls-verify",
        f"--token={token}",
    ]
    kubectl = str(cluster.bin_dir / "kubectl")
    denied = cluster._run(
        [kubectl, *as_sa, "get", "pods", "-n", namespace], check=False, input=None, timeout=60
    )
    assert denied.returncode != 0 and "forbidden" in denied.stderr.lower(), denied.stderr
    cluster.kubectl(
        "create",
        "rolebinding",
        "op-view",
        "--clusterrole=view",
        f"--serviceaccount={namespace}:op",
        "-n",
        namespace,
    )
    wait_for(
        lambda: (
            cluster._run(
                [kubectl, *as_sa, "get", "pods", "-n", namespace], check=False, input=None, timeout=60
            ).returncode
            == 0
        ),
        desc="ServiceAccount token allowed after RoleBinding to view",
    )
    other = cluster._run([kubectl, *as_sa, "get", "nodes"], check=False, input=None, timeout=60)
    assert other.returncode != 0 and "forbidden" in other.stderr.lower(), other.stderr


def test_add_gpu_nodes_creates_ready_labelled_nodes(cluster: LocalCluster) -> None:
    core = client.CoreV1Api(cluster.api)
    names = add_gpu_nodes(cluster.api, 2, product="NVIDIA-L40S", gpus=4, prefix="smoke-l40s")
    try:
        assert names == ["smoke-l40s-0", "smoke-l40s-1"]
        for name in names:
            node = wait_for(lambda name=name: _ready_node(core, name), desc=f"node {name} Ready")
            assert node.metadata.labels["nvidia.com/gpu.product"] == "NVIDIA-L40S"
            assert node.metadata.labels["nvidia.com/gpu.count"] == "4"
            assert node.status.allocatable["nvidia.com/gpu"] == "4"
    finally:
        delete_nodes(core, names)
