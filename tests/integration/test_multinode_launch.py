"""A multi-node replica's leader and worker scripts run for real: sshd, ssh and Open MPI's
``mpirun``/``orted`` between pod sandboxes on the loopback, with stand-in ``tritonserver`` ranks.

Each pod is a sandbox (``hack/podsandbox``): its own filesystem layer with the rendered ConfigMap at
``/etc/trtllm-operator``, the artifact and the image's model code, its own host name and PID
namespace, a loopback address, and an ``/etc/hosts`` that answers the names LeaderWorkerSet gives
its pods (kubernetes-sigs/lws v0.10.0: ``LWS_LEADER_ADDRESS = <lws>-<group>.<lws>.<ns>``,
``pkg/utils/pod/pod_utils.go``; workers ``<lws>-<group>-<i>``, ``pkg/controllers/pod_controller.go``)
— as the headless Service ``<lws>`` that LWS creates makes cluster DNS answer them.

The "image" is this machine: Open MPI 4.1 (Debian ``openmpi-bin``), OpenSSH's ``sshd``, and a
stand-in ``tritonserver`` at ``/opt/tritonserver/bin`` that records where it runs, with which
environment and model repository, and stays alive. Its ``sshd_config`` gives ssh sessions
``PATH=/nonexistent`` (``SetEnv``): neither ``orted`` nor ``tritonserver`` is on the PATH of a process
that sshd starts, as in NVIDIA's images where Open MPI lives in ``/opt/hpcx/ompi`` and Triton in
``/opt/tritonserver`` (sshd(8) "LOGIN PROCESS": sessions get sshd's environment, not the image's
``ENV``). Audit A2 and A3: with main's scripts the workers ran only sshd (no model repository) and
``mpirun`` started before the workers existed; a rank on a worker was "unable to find the
specified executable" (``tritonserver``) and ``orted`` was "command not found".
"""

from __future__ import annotations

import hashlib
import random
import sys
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

from trtllm_operator.decide.serving_params import OwnerRef, ServingParams
from trtllm_operator.decide.triton_config import repository_files
from trtllm_operator.handlers.credentials import new_ssh_key_pair
from trtllm_operator.render.launch import RANK_ENV, RANK_ENV_SCRIPT, leader_script, worker_script
from trtllm_operator.render.leaderworkerset import leaderworkerset_name
from trtllm_operator.render.model_repository import configmap_data, volume_items
from trtllm_operator.render.serving import CONFIG_MOUNT

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "hack"))
from podsandbox import IMAGE_PATH, File, Pod, SandboxError, check_host, hosts_file, start_pod, wait_for
from support.artifacts import write_manifest
from support.ports import free_port

pytestmark = pytest.mark.slow

#: Stand-in for ``tritonserver``: writes what it sees to /var/log/ranks/<host>-rank<N>, then stays up
#: (its process name stays ``tritonserver``, which the leader's watchdog counts).
STUB_TRITONSERVER = r"""#!/bin/bash
out=/var/log/ranks/$(hostname)-rank${OMPI_COMM_WORLD_RANK:-x}
mkdir -p /var/log/ranks
{
  echo "host=$(hostname)"
  echo "rank=${OMPI_COMM_WORLD_RANK:-}"
  echo "engine_key=${ENGINE_KEY:-}"
  echo "worker_index=${LWS_WORKER_INDEX:-}"
  echo "args=$*"
  if [ -f /model-repository/tensorrt_llm/config.pbtxt ]; then
    echo "repository=$(sha256sum < /model-repository/tensorrt_llm/config.pbtxt | cut -c1-64)"
  fi
} > "$out.tmp"
mv "$out.tmp" "$out"
while true; do sleep 1; done
"""

#: Stand-in for TensorRT-LLM's ``trtllm-llmapi-launch`` with its upstream behaviour
#: (tensorrt_llm/llmapi/trtllm-llmapi-launch): the command on rank 0, the MGMN worker elsewhere.
STUB_LLMAPI_LAUNCH = r"""#!/bin/bash
if [ "${OMPI_COMM_WORLD_RANK:-0}" -eq 0 ]; then exec "$@"; fi
mkdir -p /var/log/ranks
out=/var/log/ranks/$(hostname)-mgmn$OMPI_COMM_WORLD_RANK
echo "mgmn_worker_node rank=$OMPI_COMM_WORLD_RANK host=$(hostname)" > "$out"
while true; do sleep 1; done
"""

NAMESPACE = "team-a"
ENGINE_KEY = "e" * 64


#: The artifact each pod mounts at /artifact: one engine file and the manifest the pods' launch
#: scripts verify before anything starts (verify-artifact.py, issue 24 item 4).
ARTIFACT_FILES = {"engine/config.json": "{}\n"}


def artifact_with_manifest(root: Path) -> tuple[dict[str, str], str]:
    """``ARTIFACT_FILES`` plus their ``manifest.json`` (written under ``root``); and its digest."""
    for rel, text in ARTIFACT_FILES.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    digest = write_manifest(root, engineKey=ENGINE_KEY)
    return {**ARTIFACT_FILES, "manifest.json": (root / "manifest.json").read_text()}, digest


def a_replica(**overrides: object) -> ServingParams:
    """TP 2 on 1-GPU nodes: a leader and one worker, one rank each."""
    base = ServingParams(
        name="llama",
        namespace=NAMESPACE,
        owner=OwnerRef("llama", "uid-1"),
        engine_name="llama-fp8",
        engine_key=ENGINE_KEY,
        backend="tensorrt",
        image="nvcr.io/nvidia/tritonserver:26.03-trtllm-python-py3",
        gpu_product="NVIDIA-H100-80GB-HBM3",
        artifact_claim="engines",
        artifact_sub_path=ENGINE_KEY,
        tensor_parallelism=2,
        gpus_per_node=1,
    )
    return replace(base, **overrides)  # type: ignore[arg-type]


@dataclass
class Group:
    """One LeaderWorkerSet group's pods as sandboxes, and where they are."""

    params: ServingParams
    data: dict[str, str]
    work: Path
    port: int
    names: list[str]
    addresses: list[str]
    key: Path
    pods: dict[int, Pod]
    artifact: dict[str, str]
    #: The private key the leader mounts: ``key`` (its own deployment's), or another's.
    leader_key: Path

    @property
    def lws(self) -> str:
        return leaderworkerset_name(self.params.name)

    def fqdn(self, index: int) -> str:
        return f"{self.names[index]}.{self.lws}.{NAMESPACE}"

    def files(self, index: int) -> dict[str, File]:
        cm = {"data": self.data}
        files = {
            f"{CONFIG_MOUNT}/{item['path']}": File(self.data[item["key"]], item.get("mode", 0o644))
            for item in volume_items(cm)
        }
        files |= {
            "/etc/hosts": File(
                hosts_file({self.addresses[i]: [self.fqdn(i), self.names[i]] for i in range(len(self.names))})
            ),
            "/opt/tritonserver/bin/tritonserver": File(STUB_TRITONSERVER, 0o755),
            "/usr/local/bin/trtllm-llmapi-launch": File(STUB_LLMAPI_LAUNCH, 0o755),
            "/root/.bashrc": File('[ -z "$PS1" ] && return\n'),  # Ubuntu's: nothing for ssh commands
            "/etc/ssh/sshd_config": File(
                f"ListenAddress {self.addresses[index]}\nPermitRootLogin prohibit-password\n"
                "PasswordAuthentication no\nKbdInteractiveAuthentication no\nUsePAM no\n"
                "SetEnv PATH=/nonexistent\n"
            ),
        }
        # the deployment's Secret <name>-credentials as the pods mount it (render.credentials,
        # defaultMode 0400): the private key on the leader, authorized_keys on the workers
        if index == 0:
            files["/etc/trtllm-operator-ssh/id_ed25519"] = File(self.leader_key.read_bytes(), 0o400)
        else:
            files["/etc/trtllm-operator-ssh/authorized_keys"] = File(
                self.key.with_suffix(".pub").read_bytes(), 0o400
            )
        files |= {f"/artifact/{rel}": File(text) for rel, text in self.artifact.items()}
        return files

    def env(self, index: int) -> dict[str, str]:
        """The container's environment: the image's PATH, the pod's env, what LWS injects."""
        return {
            "PATH": IMAGE_PATH,
            "ENGINE_KEY": ENGINE_KEY,
            "LWS_LEADER_ADDRESS": self.fqdn(0),
            "LWS_GROUP_SIZE": str(len(self.names)),
            "LWS_WORKER_INDEX": str(index),
            "TRITON_ADMIN_KEY": "admin-" + "0" * 58,  # from the Secret (secretKeyRef)
        }

    def start(self, index: int) -> Pod:
        script = "launch.sh" if index == 0 else "worker.sh"
        pod = start_pod(
            self.names[index],
            self.addresses[index],
            self.work / f"pod-{index}",
            files=self.files(index),
            env=self.env(index),
            command=["/bin/bash", f"{CONFIG_MOUNT}/{script}"],
        )
        self.pods[index] = pod
        return pod

    def ranks(self) -> dict[str, dict[str, str]]:
        """Every rank record the stand-ins wrote, by file name (``<host>-rank<N>``)."""
        out = {}
        for pod in self.pods.values():
            for f in pod.path("/var/log/ranks").glob("*"):
                if not f.name.endswith(".tmp"):
                    out[f.name] = dict(
                        line.split("=", 1) for line in f.read_text().splitlines() if "=" in line
                    )
        return out

    def logs(self) -> list[Pod]:
        return list(self.pods.values())


@pytest.fixture
def group_factory(tmp_path: Path) -> Iterator[object]:
    try:
        check_host("/usr/sbin/sshd", "ssh", "ssh-keygen", "mpirun", "orted")
    except SandboxError as exc:
        pytest.fail(f"{exc}", pytrace=False)
    # the deployment's key pair, as the operator generates it (handlers.credentials)
    private, public = new_ssh_key_pair(f"{NAMESPACE}/llama")
    key = tmp_path / "id_ed25519"
    key.write_text(private)
    key.with_suffix(".pub").write_text(public)
    other = tmp_path / "other_deployment_id_ed25519"
    other.write_text(new_ssh_key_pair(f"{NAMESPACE}/other")[0])
    groups: list[Group] = []

    def make(params: ServingParams, wait_seconds: int = 120, foreign_key: bool = False) -> Group:
        net = f"127.{random.randint(16, 250)}.{random.randint(1, 250)}"
        nodes = params.nodes_per_replica
        lws = leaderworkerset_name(params.name)
        addresses = [f"{net}.{i + 1}" for i in range(nodes)]
        port = free_port(addresses[0])  # sshd binds it itself: support.ports.free_port's residual race
        art_dir = tmp_path / f"artifact-{len(groups)}"
        art_dir.mkdir()
        artifact, digest = artifact_with_manifest(art_dir)
        params = replace(params, manifest_digest=digest)  # as the LLMEngine's status records it
        files = repository_files(params)
        models = sorted({p.split("/", 1)[0] for p in files})
        data = configmap_data(params, files)
        # the ConfigMap's scripts, rendered with a free port and a test-sized deadline
        data["launch.sh"] = leader_script(params, models, wait_seconds=wait_seconds, ssh_port=port)
        data["worker.sh"] = worker_script(params, models, ssh_port=port)
        assert data[RANK_ENV_SCRIPT] == RANK_ENV
        names = [f"{lws}-0", *(f"{lws}-0-{i}" for i in range(1, nodes))]
        group = Group(
            params,
            data,
            tmp_path / f"group-{len(groups)}",
            port,
            names,
            addresses,
            key,
            {},
            artifact,
            other if foreign_key else key,
        )
        groups.append(group)
        return group

    yield make
    for group in groups:
        for pod in group.pods.values():
            pod.stop()


def config_digest(params: ServingParams) -> str:
    return hashlib.sha256(repository_files(params)["tensorrt_llm/config.pbtxt"].encode()).hexdigest()


def test_leader_waits_for_its_worker_then_every_rank_runs_with_its_pods_repository_and_environment(
    group_factory: object,
) -> None:
    params = a_replica()
    group = group_factory(params)  # type: ignore[operator]
    leader = group.start(0)
    # the worker comes later (its image is still being pulled): the leader waits and says so
    wait_for(lambda: "waiting for worker" in leader.output(), 30, "the leader's wait line", group.logs())
    assert group.ranks() == {}  # no mpirun, no rank, before the worker is reachable
    assert leader.alive()
    worker = group.start(1)
    wait_for(lambda: len(group.ranks()) == 2, 90, "a rank on each pod", group.logs())
    out = leader.output()
    assert f"worker {group.fqdn(1)} is reachable" in out
    assert out.index("waiting for worker") < out.index("is reachable") < out.index("1 of 1 workers reachable")
    ranks = group.ranks()
    leader_rank, worker_rank = ranks[f"{group.names[0]}-rank0"], ranks[f"{group.names[1]}-rank1"]
    # rank 0 on the leader serves every model; rank 1 on the worker loads only tensorrt_llm
    assert "--load-model" not in leader_rank["args"]
    assert "--model-control-mode=explicit --load-model=tensorrt_llm" in worker_rank["args"]
    for index, rank in ((0, leader_rank), (1, worker_rank)):
        assert rank["host"] == group.names[index]
        # the pod's own environment (rank-env.sh), not sshd's; its own assembled model repository
        assert rank["engine_key"] == ENGINE_KEY and rank["worker_index"] == str(index)
        assert rank["repository"] == config_digest(params), f"pod {index}: no model repository"
    assert worker.alive() and leader.alive()

    # losing a worker ends the replica (the container restarts; LWS recreates the group)
    worker.stop()
    code = leader.wait(60)
    assert code != 0, leader.output()


def test_leader_gives_up_after_the_deadline_naming_the_worker(group_factory: object) -> None:
    group = group_factory(a_replica(), wait_seconds=3)  # type: ignore[operator]
    leader = group.start(0)
    assert leader.wait(60) == 1, leader.output()
    out = leader.output()
    assert f"worker {group.fqdn(1)} is not reachable over ssh after 3 s (last error: " in out
    assert "not starting mpirun" in out and group.ranks() == {}


def test_a_key_of_another_deployment_is_refused_by_the_workers(group_factory: object) -> None:
    """One SSH key per deployment (issue 24 item 5): the workers' sshd accepts only their own
    deployment's key, so a leader holding another deployment's key — or a key baked into the image —
    never logs in; the leader gives up naming the worker."""
    group = group_factory(a_replica(), wait_seconds=8, foreign_key=True)  # type: ignore[operator]
    worker = group.start(1)
    wait_for(lambda: "sshd on port" in worker.output(), 60, "the worker's sshd", group.logs())
    leader = group.start(0)
    assert leader.wait(60) == 1, leader.output()
    out = leader.output()
    assert f"worker {group.fqdn(1)} is not reachable over ssh after 8 s" in out
    assert "Permission denied" in out and group.ranks() == {}


def test_pytorch_replica_runs_one_tritonserver_and_mgmn_workers(group_factory: object) -> None:
    params = a_replica(backend="pytorch", tensor_parallelism=3)
    group = group_factory(params)  # type: ignore[operator]
    group.start(1)
    group.start(2)
    group.start(0)
    wait_for(lambda: len(group.ranks()) == 3, 90, "three ranks", group.logs())
    ranks = group.ranks()
    assert set(ranks) == {f"{group.names[0]}-rank0", f"{group.names[1]}-mgmn1", f"{group.names[2]}-mgmn2"}
    server = ranks[f"{group.names[0]}-rank0"]
    assert server["repository"] == config_digest(params)
    assert "--load-model" not in server["args"]  # one tritonserver serves the replica
