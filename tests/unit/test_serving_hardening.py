"""Issue 24 item 5, the serving workloads: Triton's admin APIs behind a per-deployment header, the
deployment's own SSH key for multi-node replicas, client-only Services and the per-deployment
NetworkPolicy. Rendering only; the API server admits them in tests/integration/test_security.py,
real Triton refuses the restricted APIs in tests/fidelity/test_triton_fidelity.py, real sshd/ssh use
the key in tests/integration/test_multinode_launch.py."""

from __future__ import annotations

import dataclasses
import subprocess
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
from support.serving import serving_params

from trtllm_operator.api.wire import LABEL_DEPLOYMENT
from trtllm_operator.decide.serving_params import ServingParams
from trtllm_operator.handlers.credentials import new_ssh_key_pair
from trtllm_operator.render.credentials import desired_credentials_secret
from trtllm_operator.render.deployment import desired_deployment
from trtllm_operator.render.launch import launch_script, leader_script, worker_script
from trtllm_operator.render.leaderworkerset import desired_leaderworkerset
from trtllm_operator.render.model_repository import desired_model_repository
from trtllm_operator.render.network_policy import ServingNetwork, desired_network_policy, serving_network
from trtllm_operator.settings import Settings

K8S_VERSION = "1.34.0"
NETWORK = ServingNetwork(operator_namespace="trtllm-operator", client_namespaces=("gateway",))


def pod_spec(params: ServingParams) -> dict[str, Any]:
    spec: dict[str, Any] = desired_deployment(params, desired_model_repository(params))["spec"]["template"][
        "spec"
    ]
    return spec


def multi_node() -> ServingParams:
    return serving_params(tensor_parallelism=8, pipeline_parallelism=2, gpus_per_node=8)


# ----------------------------------------------------------------------------- restricted APIs
def test_tritonserver_restricts_admin_apis_behind_the_pods_admin_key() -> None:
    """Flags as triton-inference-server/server r24.10 (v2.51.0) src/command_line_parser.cc parses
    them: ``--http-restricted-api`` and ``--grpc-restricted-protocol``, ``<apis>:<key>=<value>``."""
    script = launch_script(serving_params(), ["ensemble", "postprocessing", "preprocessing", "tensorrt_llm"])
    value = "shared-memory,model-repository,trace,logging:admin-key=${TRITON_ADMIN_KEY}"
    assert f'"--http-restricted-api={value}"' in script
    assert f'"--grpc-restricted-protocol={value}"' in script
    # the value comes from the pod's environment; an unset or empty one stops the pod before Triton
    assert script.index('if [ -z "${TRITON_ADMIN_KEY:-}" ]') < script.index("exec tritonserver")
    env = {e["name"]: e for e in pod_spec(serving_params())["containers"][0]["env"]}
    assert env["TRITON_ADMIN_KEY"] == {
        "name": "TRITON_ADMIN_KEY",
        "valueFrom": {"secretKeyRef": {"name": "llama-credentials", "key": "triton-admin-key"}},
    }


def test_the_admin_key_stops_an_unset_pod(tmp_path: Path) -> None:
    """The check lines as bash runs them: unset and empty values exit 2, a value passes."""
    script = launch_script(serving_params(), ["tensorrt_llm"])
    start = script.index('if [ -z "${TRITON_ADMIN_KEY:-}" ]')
    check = script[start : script.index("fi\n", start) + 3]
    (tmp_path / "check.sh").write_text("set -euo pipefail\n" + check + "echo passed\n")
    for env, code in (({}, 2), ({"TRITON_ADMIN_KEY": ""}, 2), ({"TRITON_ADMIN_KEY": "k"}, 0)):
        proc = subprocess.run(
            ["bash", str(tmp_path / "check.sh")], env=env, capture_output=True, text=True, check=False
        )
        assert proc.returncode == code, (env, proc.stdout, proc.stderr)


def test_openai_frontend_gets_no_tritonserver_restriction_flags() -> None:
    """The OpenAI frontend starts Triton in-process; its KServe frontends take no restriction
    (r26.03 src/python/tritonfrontend/_api/_kservehttp.py: "DLIS-7215: Add restricted protocol
    support"), and ``tritonserver`` flags do not apply: none are rendered (docs/security.md)."""
    script = launch_script(
        serving_params(server=serving_params().server.__class__(api="both")), ["tensorrt_llm"]
    )
    assert "restricted" not in script and "TRITON_ADMIN_KEY" not in script


# ----------------------------------------------------------------------------- SSH key
def test_multi_node_pods_mount_their_half_of_the_deployments_key() -> None:
    params = multi_node()
    lws = desired_leaderworkerset(params, desired_model_repository(params))["spec"]["leaderWorkerTemplate"]
    for template, key in ((lws["leaderTemplate"], "id_ed25519"), (lws["workerTemplate"], "authorized_keys")):
        volumes = {v["name"]: v for v in template["spec"]["volumes"]}
        assert volumes["ssh-key"]["secret"] == {
            "secretName": "llama-credentials",
            "defaultMode": 0o400,
            "items": [{"key": key, "path": key}],
        }
        mounts = {m["name"]: m for m in template["spec"]["containers"][0]["volumeMounts"]}
        assert mounts["ssh-key"] == {
            "name": "ssh-key",
            "mountPath": "/etc/trtllm-operator-ssh",
            "readOnly": True,
        }
    leader = leader_script(params, ["tensorrt_llm"])
    assert 'ssh_opts+=(-o IdentitiesOnly=yes -i "/etc/trtllm-operator-ssh/id_ed25519")' in leader
    worker = worker_script(params, ["tensorrt_llm"])
    # sshd accepts only the deployment's key, from a root-owned copy
    assert '-o "AuthorizedKeysFile=/etc/ssh/trtllm-operator/authorized_keys"' in worker
    assert worker.index('install -m 0600 "/etc/trtllm-operator-ssh/authorized_keys"') < worker.index("exec ")


def test_generated_key_pair_is_what_openssh_reads(tmp_path: Path) -> None:
    """OpenSSH's own ``ssh-keygen -y`` derives the same public key from the private key the operator
    stores (the format ``ssh -i`` reads); two deployments never share a key."""
    private, public = new_ssh_key_pair("team-a/llama")
    assert private.startswith("-----BEGIN OPENSSH PRIVATE KEY-----\n")
    path = tmp_path / "id_ed25519"
    path.write_text(private)
    path.chmod(0o600)
    derived = subprocess.run(
        ["ssh-keygen", "-y", "-f", str(path)], capture_output=True, text=True, check=True
    )
    assert public.split()[:2] == derived.stdout.split()[:2]
    assert public.startswith("ssh-ed25519 ") and public.endswith(" team-a/llama\n")
    assert new_ssh_key_pair("team-a/llama")[0] != private


def test_credentials_secret_is_owned_and_immutable() -> None:
    secret = desired_credentials_secret(
        serving_params(), admin_key="a", ssh_private_key="b", ssh_public_key="c"
    )
    kubernetes_validate.validate(secret, K8S_VERSION, strict=True)
    assert secret["immutable"] is True
    (ref,) = secret["metadata"]["ownerReferences"]
    assert ref["controller"] is True and ref["uid"] == "uid-1" and ref["kind"] == "LLMDeployment"
    assert set(secret["stringData"]) == {"triton-admin-key", "id_ed25519", "authorized_keys"}


class _SecretsSeen:
    """Records the Secret calls :func:`ensure_credentials` makes (a stand-in for the operator's
    client in a unit test; the API server's side is tests/integration/test_security.py)."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.stored: dict[str, Any] | None = None

    def get_metadata(self, _res: Any, _namespace: str, _name: str) -> dict[str, Any] | None:
        self.calls.append("get")
        return None if self.stored is None else dict(self.stored["metadata"])

    def create(self, _res: Any, _namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        self.calls.append("create")
        self.stored = body
        return body


def test_credentials_are_checked_once_per_period_not_per_reconcile(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 20: a reconcile that changes nothing makes no request; the Secret's presence is
    re-checked at most every CONFIRM_SECONDS (and at once for another LLMDeployment uid)."""
    from trtllm_operator.handlers import credentials  # noqa: PLC0415

    monkeypatch.setattr(credentials, "_CONFIRMED", {})
    clock = [1000.0]
    monkeypatch.setattr(credentials.time, "monotonic", lambda: clock[0])
    kube = _SecretsSeen()
    params = serving_params()
    assert credentials.ensure_credentials(kube, params) is None  # type: ignore[arg-type]
    assert kube.calls == ["get", "create"]
    for _ in range(5):
        assert credentials.ensure_credentials(kube, params) is None  # type: ignore[arg-type]
    assert kube.calls == ["get", "create"]
    clock[0] += credentials.CONFIRM_SECONDS
    assert credentials.ensure_credentials(kube, params) is None  # type: ignore[arg-type]
    assert kube.calls == ["get", "create", "get"]
    # the same name under a recreated LLMDeployment (new uid): checked now, and it is not its Secret
    other = dataclasses.replace(params, owner=dataclasses.replace(params.owner, uid="uid-2"))
    conflict = credentials.ensure_credentials(kube, other)  # type: ignore[arg-type]
    assert conflict is not None and kube.calls[-1] == "get"


# ----------------------------------------------------------------------------- NetworkPolicy
def _rules(policy: dict[str, Any]) -> list[tuple[list[dict[str, Any]] | None, set[int] | None]]:
    return [
        (rule.get("from"), {p["port"] for p in rule["ports"]} if "ports" in rule else None)
        for rule in policy["spec"]["ingress"]
    ]


def _namespaces(peer: dict[str, Any]) -> set[str]:
    (expr,) = peer["namespaceSelector"]["matchExpressions"]
    assert expr["key"] == "kubernetes.io/metadata.name" and expr["operator"] == "In"
    return set(expr["values"])


def test_network_policy_one_node() -> None:
    policy = desired_network_policy(serving_params(), NETWORK)
    kubernetes_validate.validate(policy, K8S_VERSION, strict=True)
    assert policy["metadata"]["name"] == "llama" and policy["metadata"]["namespace"] == "team-a"
    assert policy["metadata"]["ownerReferences"][0]["uid"] == "uid-1"
    assert policy["spec"]["podSelector"] == {"matchLabels": {LABEL_DEPLOYMENT: "llama"}}
    assert policy["spec"]["policyTypes"] == ["Ingress"]  # egress stays open: S3 fetch, NCCL
    (clients_from, client_ports), (metrics_from, metrics_ports) = _rules(policy)
    assert client_ports == {8000, 8001}
    assert clients_from is not None
    assert clients_from[0] == {"podSelector": {}}  # the deployment's own namespace
    assert _namespaces(clients_from[1]) == {"gateway"}
    assert metrics_ports == {8002}
    assert metrics_from is not None and len(metrics_from) == 1
    assert _namespaces(metrics_from[0]) == {"trtllm-operator", "monitoring"}


@pytest.mark.parametrize("service_type", ["NodePort", "LoadBalancer"])
def test_network_policy_opens_client_ports_to_all_for_an_exposed_service(service_type: str) -> None:
    policy = desired_network_policy(serving_params(service_type=service_type), NETWORK)
    kubernetes_validate.validate(policy, K8S_VERSION, strict=True)
    (clients_from, client_ports), (metrics_from, metrics_ports) = _rules(policy)
    assert clients_from is None and client_ports == {8000, 8001}  # every source, client ports only
    assert metrics_ports == {8002} and metrics_from is not None


def test_network_policy_multi_node_admits_its_own_pods_only() -> None:
    policy = desired_network_policy(multi_node(), NETWORK)
    kubernetes_validate.validate(policy, K8S_VERSION, strict=True)
    *_, (peers, ports) = _rules(policy)
    assert ports is None  # ssh 22 and the ranks' MPI/NCCL ports, chosen at run time
    assert peers == [{"podSelector": {"matchLabels": {LABEL_DEPLOYMENT: "llama"}}}]


def test_network_policy_openai_frontend_serves_metrics_on_its_port() -> None:
    params = serving_params(server=serving_params().server.__class__(api="openai"))
    (_, client_ports), (_, metrics_ports) = _rules(desired_network_policy(params, NETWORK))
    assert client_ports == {9000} and metrics_ports == {9000}


def test_network_policy_settings() -> None:
    assert serving_network(Settings(serving_network_policy=False)) is None
    network = serving_network(
        Settings.from_env(
            {
                "TRTLLM_OPERATOR_OPERATOR_NAMESPACE": "ops",
                "TRTLLM_OPERATOR_SERVING_CLIENT_NAMESPACES": "gw, apps",
                "TRTLLM_OPERATOR_SERVING_MONITORING_NAMESPACES": "",
            }
        )
    )
    assert network == ServingNetwork("ops", ("gw", "apps"), ())
