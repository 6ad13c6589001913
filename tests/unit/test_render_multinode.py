"""Multi-node replicas as LeaderWorkerSet renders and names them (audit A1–A3), checked against the
upstream sources that decide names, DNS and process launch.

Upstream facts used (kubernetes-sigs/lws v0.10.0; the same lines in v0.9.0):

* ``pkg/controllers/leaderworkerset_controller.go`` ``reconcileHeadlessServices`` calls
  ``pkg/utils/controller/controller_utils.go`` ``CreateHeadlessServiceIfNotExists(…, lws.Name, …)``:
  the headless Service is named after the LWS and created **only if no Service of that name
  exists**; ``pkg/webhooks/leaderworkerset_webhook.go``: "the lws name is used as the name for
  headless service".
* Leader StatefulSet ``serviceName: lws.Name``; worker StatefulSet named after the leader pod,
  ``serviceName: lws.Name`` (``SubdomainShared``, the default), ordinals from 1
  (``pkg/controllers/pod_controller.go``): pods ``<lws>-<group>`` and ``<lws>-<group>-<i>``.
* ``pkg/utils/pod/pod_utils.go`` ``AddLWSVariables``: ``LWS_LEADER_ADDRESS =
  fmt.Sprintf("%s-%s.%s.%s", lwsName, groupIndex, pod.Spec.Subdomain, namespace)``,
  ``LWS_GROUP_SIZE`` = the size annotation, ``LWS_WORKER_INDEX``.
* Kubernetes DNS for pods with ``hostname``/``subdomain`` and a headless Service named like the
  subdomain: ``<hostname>.<subdomain>.<namespace>`` (kubernetes.io "DNS for Services and Pods",
  "A/AAAA records" of a pod's hostname and subdomain).
"""

from __future__ import annotations

import re
import subprocess

import pytest
from support.serving import serving_params

from trtllm_operator.decide.serving_params import OwnerRef, ServingParams
from trtllm_operator.render.launch import (
    RANK_ENV,
    launch_script,
    leader_script,
    worker_hosts,
    worker_script,
)
from trtllm_operator.render.leaderworkerset import (
    desired_leaderworkerset,
    leaderworkerset_name,
    replica_selector_string,
)
from trtllm_operator.render.model_repository import desired_model_repository
from trtllm_operator.render.service import desired_service

DNS1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")


def a_replica(**overrides: object) -> ServingParams:
    """Fixture builder: Llama-3.1-405B FP8, TP 8 × PP 3 on 8-GPU H100 nodes (3 pods per replica)."""
    base = {"name": "llama-405b", "owner": OwnerRef("llama-405b", "uid-1"), "engine_name": "llama-405b-fp8"}
    multi = {"tensor_parallelism": 8, "pipeline_parallelism": 3, "gpus_per_node": 8, "replicas": 1}
    return serving_params(**{**base, **multi, **overrides})


def lws_env(lws: str, group: int, size: int, namespace: str, worker_index: int = 0) -> dict[str, str]:
    """What LWS's pod webhook injects (pod_utils.go AddLWSVariables), the subdomain being the LWS's
    name (SubdomainShared: the StatefulSets' serviceName is lws.Name)."""
    return {
        "LWS_LEADER_ADDRESS": "%s-%s.%s.%s" % (lws, group, lws, namespace),  # noqa: UP031 (Go's format)
        "LWS_GROUP_SIZE": str(size),
        "LWS_WORKER_INDEX": str(worker_index),
        "PATH": "/usr/bin:/bin",
    }


def test_client_service_never_takes_the_headless_service_name() -> None:
    """Audit A1: LWS creates its headless Service ``<lws name>`` only if no Service of that name
    exists; the client Service used to be that name, so the pods' DNS names never resolved."""
    params = a_replica()
    cm = desired_model_repository(params)
    lws = desired_leaderworkerset(params, cm)["metadata"]["name"]
    service = desired_service(params)
    assert service["metadata"]["name"] == "llama-405b"  # status.endpoint keeps its name
    assert lws == "llama-405b-lws" == leaderworkerset_name("llama-405b")
    assert service["metadata"]["name"] != lws
    assert DNS1035.match(lws)  # the LWS webhook's rule for the headless Service's name


@pytest.mark.parametrize("name", ["a", "llama-405b", "x" * 63, "a-very-long-deployment-name-" + "z" * 30])
def test_lws_name_keeps_pod_and_revision_names_within_63(name: str) -> None:
    lws = leaderworkerset_name(name)
    assert DNS1035.match(lws) and len(lws) <= 47
    # worker StatefulSet <lws>-<group>; its pods' controller-revision-hash <sts>-<hash, ≤ 10 chars>
    assert len(f"{lws}-9999-") + 10 <= 63
    assert leaderworkerset_name(name) != leaderworkerset_name(name + "b")


@pytest.mark.parametrize(("group", "size"), [(0, 2), (3, 3), (12, 4)])
def test_leader_derives_the_worker_dns_names_lws_gives(group: int, size: int) -> None:
    """The host list the leader hands to ``mpirun``: its own host name, then every worker's DNS
    name as LWS names the pods and Kubernetes DNS publishes them."""
    params = a_replica(pipeline_parallelism=size)
    lws, ns = leaderworkerset_name(params.name), params.namespace
    script = "\n".join(worker_hosts(params)) + '\nprintf "%s\\n" "$leader" "${workers[@]}"\n'
    out = subprocess.run(
        ["bash", "-c", script], env=lws_env(lws, group, size, ns), capture_output=True, text=True, check=True
    ).stdout.split()
    expected_workers = [f"{lws}-{group}-{i}.{lws}.{ns}" for i in range(1, size)]
    assert out == [f"{lws}-{group}", *expected_workers]


def test_leader_refuses_a_group_of_another_size() -> None:
    params = a_replica()
    lws = leaderworkerset_name(params.name)
    script = "\n".join(worker_hosts(params))
    res = subprocess.run(
        ["bash", "-c", script],
        env=lws_env(lws, 0, 2, params.namespace),
        capture_output=True,
        text=True,
        check=False,
    )
    assert res.returncode == 2 and "LWS_GROUP_SIZE is 2; rendered for 3 pods per group" in res.stderr
    res = subprocess.run(
        ["bash", "-c", script], env={"PATH": "/usr/bin:/bin"}, capture_output=True, text=True, check=False
    )
    assert res.returncode != 0 and "LWS_LEADER_ADDRESS" in res.stderr


@pytest.mark.parametrize("backend", ["tensorrt", "pytorch"])
def test_every_rendered_script_is_valid_bash(backend: str) -> None:
    multi = a_replica(backend=backend)
    single = a_replica(backend=backend, tensor_parallelism=4, pipeline_parallelism=1)
    scripts = {
        "leader": leader_script(multi),
        "worker": worker_script(multi),
        "rank-env": RANK_ENV,
        "one-node": launch_script(single),
    }
    for role, text in scripts.items():
        res = subprocess.run(["bash", "-n"], input=text, capture_output=True, text=True, check=False)
        assert res.returncode == 0, f"{backend} {role}: {res.stderr}"
    for role in ("leader", "worker"):
        assert (
            scripts[role]
            == desired_model_repository(multi)["data"][f"{'launch' if role == 'leader' else role}.sh"]
        )


def test_leader_waits_for_every_worker_before_mpirun_and_finds_orted() -> None:
    """Audit A3: the wait (with its deadline and log lines) comes before ``mpirun``; ``mpirun`` is
    called by the absolute path it has on the leader, with ``--prefix`` of that Open MPI install,
    so ``orted`` is found on workers whose ssh sessions lack the image's PATH (Open MPI 4.1
    mpirun(1): "--prefix <dir>: Prefix directory that will be used to set the PATH and
    LD_LIBRARY_PATH on the remote node before invoking Open MPI or the target process")."""
    script = leader_script(a_replica())
    wait = script.index('until err=$(ssh "${ssh_opts[@]}" "$w" true 2>&1); do')
    run = script.index('"$mpirun_bin" --allow-run-as-root')
    assert wait < run
    assert 'echo "waiting for worker $w (ssh port 22; up to 900 s for the group)"' in script
    assert "is not reachable over ssh after 900 s" in script
    assert (
        '--prefix "$ompi_prefix"' in script
        and 'ompi_prefix="$(dirname "$(dirname "$mpirun_bin")")"' in script
    )
    assert "--mca plm_rsh_no_tree_spawn 1" in script  # workers never ssh to each other
    # every rank behind rank-env.sh, which loads its own pod's saved environment
    assert script.count("/bin/bash /etc/trtllm-operator/rank-env.sh tritonserver") == 24
    assert 'export -p > "/run/trtllm-operator/pod-env.sh.tmp"' in script
    assert '. "/run/trtllm-operator/pod-env.sh"' in RANK_ENV and 'exec "$@"' in RANK_ENV


def test_pytorch_multi_node_runs_trtllm_llmapi_launch_on_every_rank() -> None:
    """TensorRT-LLM's ``trtllm-llmapi-launch`` runs its command on rank 0 and
    ``tensorrt_llm.llmapi.mgmn_worker_node`` on the other ranks (``tensorrt_llm/llmapi/
    trtllm-llmapi-launch``): one ``tritonserver`` per replica, on the leader."""
    script = leader_script(a_replica(backend="pytorch"))
    assert "-n 24 /bin/bash /etc/trtllm-operator/rank-env.sh trtllm-llmapi-launch tritonserver " in script
    assert "world_size=1" in script  # the leader's watchdog counts its one tritonserver


def test_worker_assembles_the_repository_before_sshd() -> None:
    """Audit A2: a worker's ranks load /model-repository like the leader's; sshd (what the leader
    waits for) starts only once it is assembled."""
    script = worker_script(a_replica())
    assemble = script.index('cp -rL "/etc/trtllm-operator/model-repository/." "$repo/"')
    sshd = script.index('exec /usr/sbin/sshd "${sshd_opts[@]}"')
    assert assemble < sshd
    assert (
        leader_script(a_replica()).split("# The pod's environment")[0].split("set -euo pipefail\n")[1]
        == (script.split("# The pod's environment")[0].split("set -euo pipefail\n")[1])
    )  # the same repository on every pod


def test_status_selector_selects_only_group_leaders() -> None:
    """Audit B5: LWS's own HPA selector (``status.hpaPodSelector``) is ``leaderworkerset.sigs.k8s.io/
    name=<lws>,leaderworkerset.sigs.k8s.io/worker-index=0`` ("select leaders",
    ``leaderworkerset_controller.go`` ``updateStatus``); the leader StatefulSet's pods carry
    ``worker-index: "0"`` and the pod webhook gives each worker its index (``pod_webhook.go``).
    ``status.selector`` of a multi-node LLMDeployment selects the same pods — one per replica — so
    an HPA or the autoscaler never counts workers (which export no metrics) as missing pods."""
    multi = a_replica()
    selector = replica_selector_string(multi)
    assert (
        selector == "leaderworkerset.sigs.k8s.io/worker-index=0,llm.trtllm-operator.dev/deployment=llama-405b"
    )
    wanted = dict(kv.split("=") for kv in selector.split(","))
    lws = desired_leaderworkerset(multi, desired_model_repository(multi))["spec"]["leaderWorkerTemplate"]
    pods = {
        "leader": {
            **lws["leaderTemplate"]["metadata"]["labels"],
            "leaderworkerset.sigs.k8s.io/worker-index": "0",
        },
        **{
            f"worker-{i}": {
                **lws["workerTemplate"]["metadata"]["labels"],
                "leaderworkerset.sigs.k8s.io/worker-index": str(i),
            }
            for i in (1, 2)
        },
    }
    assert [role for role, labels in pods.items() if wanted.items() <= labels.items()] == ["leader"]
    single = a_replica(pipeline_parallelism=1)
    assert replica_selector_string(single) == "llm.trtllm-operator.dev/deployment=llama-405b"
