"""A multi-node LLMDeployment through the real LeaderWorkerSet controller.

LWS's manager (kubernetes-sigs/lws v0.9.0 by default: the module proxy here refuses the source of v0.10.0,
the release the operator renders for; hack/build-controllers.sh says what differs), built from its Go
module by hack/build-controllers.sh, its admission webhooks reached by the API server:
tests/support/lws.py) turns the operator's LeaderWorkerSet into StatefulSets and pods; kwok runs the pods.
What the operator depends on comes from LWS itself, not from this test: the pods' names, the
``worker-index`` label its replica selector reads, the
``LWS_LEADER_ADDRESS``/``LWS_GROUP_SIZE``/``LWS_WORKER_INDEX`` environment ``launch.sh`` and ``worker.sh``
read, the headless Service that makes the group's DNS names resolve, the status the LLMDeployment's status
follows, the group's recreation when a pod's container restarts (the rendered
``RecreateGroupOnPodRestart``), and the scale path (LLMDeployment replicas → LeaderWorkerSet groups).

Expected values are LWS v0.10.0's documented behaviour (``pkg/utils/pod/pod_utils.go``
``AddLWSVariables``: ``LWS_LEADER_ADDRESS = <lws>-<group>.<subdomain>.<ns>``; leader pods
``<lws>-<group>`` of the leader StatefulSet ``<lws>``, workers ``<lws>-<group>-<index>`` of the
group's StatefulSet ``<lws>-<group>``, ``pkg/controllers/pod_controller.go``), written out here.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from support.api import Api
from support.cluster import LocalCluster
from support.lws import (
    GROUP_INDEX_LABEL,
    WORKER_INDEX_LABEL,
    Lws,
    leaderworkerset,
    lws_pods,
    running_lws,
    selected,
)
from support.manifests import a_deployment, a_multi_node_engine
from support.operator import running_operator
from support.wait import wait_for

from trtllm_operator.api import GROUP, VERSION

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def lws(cluster: LocalCluster) -> Iterator[Lws]:
    with running_lws(cluster) as running:
        yield running


@pytest.fixture
def api(cluster: LocalCluster, namespace: str, lws: Lws) -> Iterator[Api]:
    a = Api(cluster, namespace)
    with a.artifact_pvc():
        yield a


def env_of(pod: Any) -> dict[str, str]:
    return {e.name: e.value for e in pod.spec.containers[0].env or [] if e.value is not None}


def test_multi_node_replicas_become_lws_groups_with_the_environment_the_launch_scripts_read(
    cluster: LocalCluster, api: Api, lws: Lws
) -> None:
    engine = a_multi_node_engine("big")  # 16 ranks on 8-GPU H100 nodes: two pods per replica
    api.cache_artifact(engine)
    api.create(engine)
    api.create(a_deployment("big", "big", replicas=1))
    ns = api.ns
    name = "big-lws"  # the operator's LeaderWorkerSet (render.leaderworkerset: <deployment>-lws)

    with running_operator(cluster, [ns]):
        pods = wait_for(
            lambda: (p := lws_pods(api, name)) and len(p) == 2 and p, 90, desc="the group's 2 pods"
        )
        assert set(pods) == {"big-lws-0", "big-lws-0-1"}
        leader, worker = pods["big-lws-0"], pods["big-lws-0-1"]
        # the LWS pod webhook's labels and environment
        assert (
            leader.metadata.labels[WORKER_INDEX_LABEL] == "0"
            and leader.metadata.labels[GROUP_INDEX_LABEL] == "0"
        )
        assert (
            worker.metadata.labels[WORKER_INDEX_LABEL] == "1"
            and worker.metadata.labels[GROUP_INDEX_LABEL] == "0"
        )
        for pod, index in ((leader, "0"), (worker, "1")):
            env = env_of(pod)
            assert env["LWS_LEADER_ADDRESS"] == f"big-lws-0.big-lws.{ns}", env
            assert env["LWS_GROUP_SIZE"] == "2" and env["LWS_WORKER_INDEX"] == index, env
            assert pod.spec.subdomain == "big-lws" and pod.spec.hostname == pod.metadata.name
        # the leader template runs the leader's script, the worker template the worker's
        assert leader.spec.containers[0].command[-1].endswith("/launch.sh"), leader.spec.containers[0].command
        assert worker.spec.containers[0].command[-1].endswith("/worker.sh"), worker.spec.containers[0].command

        # LWS's headless Service answers <pod>.big-lws.<ns> for every pod of the group, Ready or not
        headless = wait_for(
            lambda: api.core.read_namespaced_service("big-lws", ns), 30, desc="LWS's headless Service"
        )
        assert headless.spec.cluster_ip == "None" and headless.spec.publish_not_ready_addresses is True
        headless_selector = ",".join(f"{k}={v}" for k, v in headless.spec.selector.items())
        assert selected(api, headless_selector) == {"big-lws-0", "big-lws-0-1"}
        # the client Service and the LLMDeployment's replica selector pick the leader only, as LWS's
        # own scale-subresource selector does
        client_svc = api.core.read_namespaced_service("big", ns)
        assert selected(api, ",".join(f"{k}={v}" for k, v in client_svc.spec.selector.items())) == {
            "big-lws-0"
        }

        def ready() -> dict[str, Any] | None:
            s = api.status("big")
            return s if s.get("readyReplicas") == 1 and s.get("phase") == "Ready" else None

        # the operator counts Ready leader pods; LWS counts a group ready once all its pods are (it
        # may report a moment later): both say one ready replica
        status = wait_for(ready, 90, desc="big Ready: its group's leader pod is Ready")

        def lws_ready() -> dict[str, Any] | None:
            obj = leaderworkerset(api, name)
            return obj if (obj.get("status") or {}).get("readyReplicas") == 1 else None

        lws_obj = wait_for(lws_ready, 60, desc="the LeaderWorkerSet's status: 1 ready replica")
        assert (
            selected(api, status["selector"])
            == selected(api, lws_obj["status"]["hpaPodSelector"])
            == {"big-lws-0"}
        )

        # a worker's container restarts (the kubelet's report; kwok reports none itself): with the
        # rendered restartPolicy RecreateGroupOnPodRestart, LWS deletes the group's leader and so the
        # whole group (pkg/controllers/pod_controller.go handleRestartPolicy) — an MPI job cannot lose
        # a rank, and the leader's mpirun starts again with every worker
        uids = {n: p.metadata.uid for n, p in pods.items()}
        worker = api.core.read_namespaced_pod("big-lws-0-1", ns)
        statuses = [
            api.core.api_client.sanitize_for_serialization(c) for c in worker.status.container_statuses
        ]
        for c in statuses:
            c["restartCount"] = 1
        api.core.patch_namespaced_pod_status("big-lws-0-1", ns, {"status": {"containerStatuses": statuses}})

        def recreated() -> dict[str, Any] | None:
            now = lws_pods(api, name)
            fresh = set(now) == set(uids) and all(now[n].metadata.uid != uids[n] for n in uids)
            return now if fresh else None

        pods = wait_for(recreated, 90, desc="the group recreated: new leader and worker pods")
        for pod_name, index in (("big-lws-0", "0"), ("big-lws-0-1", "1")):
            env = env_of(pods[pod_name])
            assert env["LWS_LEADER_ADDRESS"] == f"big-lws-0.big-lws.{ns}" and env["LWS_WORKER_INDEX"] == index
        wait_for(ready, 90, desc="big Ready again after the group's recreation")

        # scaling the LLMDeployment adds a group: LWS creates its leader and worker (the nodes have
        # GPUs for one group only, so the second stays Pending; its pods are created all the same)
        api.custom.patch_namespaced_custom_object(
            GROUP, VERSION, ns, "llmdeployments", "big", {"spec": {"replicas": 2}}
        )
        pods = wait_for(lambda: (p := lws_pods(api, name)) and len(p) == 4 and p, 90, desc="two groups' pods")
        assert set(pods) == {"big-lws-0", "big-lws-0-1", "big-lws-1", "big-lws-1-1"}
        for pod_name, index in (("big-lws-1", "0"), ("big-lws-1-1", "1")):
            pod = pods[pod_name]
            assert pod.metadata.labels[GROUP_INDEX_LABEL] == "1"
            env = env_of(pod)
            assert (
                env["LWS_LEADER_ADDRESS"] == f"big-lws-1.big-lws.{ns}" and env["LWS_WORKER_INDEX"] == index
            ), env
        lws_obj = leaderworkerset(api, name)
        assert lws_obj["spec"]["replicas"] == 2
