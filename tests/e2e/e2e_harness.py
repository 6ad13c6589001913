"""Helpers of the e2e tier: the installed release, its ServiceAccount's kubeconfig, and the operator
command built from the chart's Deployment (see conftest.py for the fixture that uses them)."""

from __future__ import annotations

import base64
import os
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client
from support.cluster import LocalCluster
from support.hub import HubRepo, LocalHub
from support.operator import HF_CONFIG_DIR
from support.ports import free_ports
from support.process import stop_process

REPO_ROOT = Path(__file__).resolve().parents[2]
CHART = REPO_ROOT / "charts" / "trtllm-operator"
RELEASE = "e2e"
#: The model of the flow: its real config.json (tests/fixtures/model-configs) is served by the
#: local Hub (tests/support/hub.py) behind :data:`HF_TOKEN`, the token in the test's Secret.
TINYLLAMA = "hf://TinyLlama/TinyLlama-1.1B-Chat-v1.0"
#: A fake Hugging Face token, recognisable and unique per run; it may not leave its Secret (and the
#: request to the Hub).
HF_TOKEN = "hf_e2eFAKE" + base64.b32encode(os.urandom(15)).decode().lower()
#: Settings for a quick test (the chart passes them through ``settings.extraEnv``). No model-config
#: directory: the plan check runs with the chart's defaults (``hfConfigFetch: true``), only
#: ``hfEndpoint`` points at the local Hub (:func:`helm_values`).
FAST_ENV = {
    "TRTLLM_OPERATOR_ERROR_BACKOFF_SECONDS": "1",
    "TRTLLM_OPERATOR_WATCH_SERVER_TIMEOUT_SECONDS": "10",
    "TRTLLM_OPERATOR_RESYNC_SECONDS": "10",
    "TRTLLM_OPERATOR_BUILDER_SHM_BYTES": str(2**30),
}


#: The GPU catalog extension of the test release (``settings.gpuCatalogConfigmap``): a ConfigMap of
#: this name in the operator's namespace (which the release does not watch), adding :data:`CATALOG_GPU`.
GPU_CATALOG = "gpu-catalog"
CATALOG_GPU = "NVIDIA-E2E-CATALOG-GPU"
GPU_CATALOG_DATA = {"extra.yaml": f"gpus:\n  - product: {CATALOG_GPU}\n    memoryMiB: 81559\n    sm: 90\n"}


@dataclass
class Installed:
    """The chart installed, and the operator process running as its ServiceAccount."""

    cluster: LocalCluster
    operator_namespace: str
    namespace: str  # the watched workload namespace
    service_account: str
    kubeconfig: Path  # the ServiceAccount's token, nothing else
    log_path: Path
    proc: subprocess.Popen[bytes] | None = None
    liveness_port: int = 0
    metrics_port: int = 0
    #: Triton's metrics port the operator scrapes on every serving pod (handlers.autoscaler.METRICS_PORT,
    #: 8002 in the product), moved to a free port where emulators stand in for Triton on the pods'
    #: IPs (0: the product's port; see :func:`container_command`).
    serving_metrics_port: int = 0
    helm_output: str = ""
    hub: LocalHub | None = None  # the local Hub at settings.hfEndpoint
    extra: dict[str, Any] = field(default_factory=dict)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def kubectl_as_operator(self, *args: str, check: bool = False) -> subprocess.CompletedProcess[str]:
        """kubectl with the operator's kubeconfig (the ServiceAccount token)."""
        proc = subprocess.run(
            [str(self.cluster.bin_dir / "kubectl"), f"--kubeconfig={self.kubeconfig}", *args],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        if check and proc.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed: {proc.stderr}")
        return proc

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        stop_process(self.proc, grace=10, kill_wait=10)


def token_kubeconfig(cluster: LocalCluster, token: str, path: Path) -> Path:
    """A kubeconfig with the admin kubeconfig's server and CA, and ``token`` as the only credential."""
    admin = yaml.safe_load(cluster.kubeconfig.read_text())
    ctx_name = admin["current-context"]
    ctx = next(c["context"] for c in admin["contexts"] if c["name"] == ctx_name)
    cluster_entry = next(c["cluster"] for c in admin["clusters"] if c["name"] == ctx["cluster"])
    if "certificate-authority" in cluster_entry:  # inline it: the file stays self-contained
        ca = Path(cluster_entry.pop("certificate-authority")).read_bytes()
        cluster_entry["certificate-authority-data"] = base64.b64encode(ca).decode()
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "local", "cluster": cluster_entry}],
        "users": [{"name": "operator", "user": {"token": token}}],
        "contexts": [{"name": "operator", "context": {"cluster": "local", "user": "operator"}}],
        "current-context": "operator",
    }
    path.write_text(yaml.safe_dump(config))
    path.chmod(0o600)
    return path


#: ``python -c`` program: the operator's command line (``trtllm_operator.cli``) with Triton's metrics
#: port, the one the autoscaler scrapes on each serving pod, set to ``argv[1]`` first — what
#: tests/integration/test_autoscaling.py does in-process with monkeypatch.
_CLI_WITH_SERVING_METRICS_PORT = (
    "import sys\n"
    "from trtllm_operator.handlers import autoscaler\n"
    "autoscaler.METRICS_PORT = int(sys.argv[1])\n"
    "from trtllm_operator.cli import main\n"
    "sys.exit(main(sys.argv[2:]))\n"
)


def container_command(
    deployment: Any,
    pod_namespace: str,
    liveness_port: int,
    metrics_port: int,
    python: str = sys.executable,
    serving_metrics_port: int = 0,
) -> tuple[list[str], dict[str, str]]:
    """The operator container's args and env (from the installed Deployment) as a local command.

    ``fieldRef: metadata.namespace`` becomes ``pod_namespace``; the liveness flag and the metrics
    variable get the free local ports (several test sessions share this machine's ports). ``python``:
    the interpreter whose ``trtllm_operator`` runs (another release's virtualenv in test_upgrade.py).
    ``serving_metrics_port`` (not 0): the port the operator scrapes on serving pods instead of
    Triton's 8002 — the pods' IPs are loopback addresses of this machine, where a fixed port could be
    taken by another session, a demo or any wildcard listener.
    """
    (container,) = deployment.spec.template.spec.containers
    args = [
        f"--liveness-port={liveness_port}" if arg.startswith("--liveness-port=") else arg
        for arg in container.args
    ]
    env: dict[str, str] = {}
    for var in container.env:
        if var.value is not None:
            env[var.name] = var.value
        elif var.value_from and var.value_from.field_ref:
            assert var.value_from.field_ref.field_path == "metadata.namespace", var
            env[var.name] = pod_namespace
        else:
            raise AssertionError(f"unsupported env source in the chart: {var}")
    env["TRTLLM_OPERATOR_METRICS_PORT"] = str(metrics_port)
    if serving_metrics_port:
        return [python, "-c", _CLI_WITH_SERVING_METRICS_PORT, str(serving_metrics_port), *args], env
    return [python, "-m", "trtllm_operator.cli", *args], env


def hub_repos() -> dict[str, HubRepo]:
    """What the local Hub serves: the flow model's real config.json, gated behind :data:`HF_TOKEN`."""
    repo = TINYLLAMA.removeprefix("hf://")
    config = (HF_CONFIG_DIR / (repo.replace("/", "__") + ".json")).read_bytes()
    return {repo: HubRepo({"config.json": config}, token=HF_TOKEN)}


def helm_values(namespace: str, hub_url: str) -> str:
    """Values of the test release (YAML): watch ``namespace``, debug logs, the fast settings, the
    per-deployment serving NetworkPolicy (the chart's default, stated), and ``settings.hfEndpoint``
    at the local Hub (``hub_url``): the plan check itself (``settings.hfConfigFetch``) keeps the
    chart's default; the GPU catalog extension :data:`GPU_CATALOG` in the operator's namespace."""
    extra_env = [{"name": k, "value": v} for k, v in FAST_ENV.items()]
    values = {
        "watchNamespaces": [namespace],
        "settings": {
            "logLevel": "DEBUG",
            "logFormat": "json",
            "extraEnv": extra_env,
            "hfEndpoint": hub_url,
            "gpuCatalogConfigmap": GPU_CATALOG,
        },
        "servingNetworkPolicy": {"enabled": True},
        # the flow's engine writes to this (fake) MinIO endpoint
        "policy": {"allowedS3Endpoints": ["http://minio.storage.svc:9000"]},
    }
    return yaml.safe_dump(values)


def start_operator(handle: Installed, work: Path, python: str = sys.executable) -> None:
    """Run the installed release's operator locally as its ServiceAccount, until healthy.

    A token for the chart's ServiceAccount (``kubectl create token``, TokenRequest) in a kubeconfig of
    its own (``handle.kubeconfig``), then ``python -m trtllm_operator.cli`` with the installed
    Deployment's ``args`` and ``env`` (read back from the API server), only the two listening ports
    moved to free local ports (and the serving pods' metrics port, ``handle.serving_metrics_port``,
    where set); ready when its liveness endpoint (the chart's probe) answers. Fails
    with the operator log when it exits or is not healthy within 60 s.
    """
    cluster, op_ns = handle.cluster, handle.operator_namespace
    token = cluster.kubectl(
        "create", "token", handle.service_account, "-n", op_ns, "--duration", "1h"
    ).stdout.strip()
    assert token.count(".") == 2, "kubectl create token did not return a JWT"
    token_kubeconfig(cluster, token, handle.kubeconfig)
    deployment = client.AppsV1Api(cluster.api).read_namespaced_deployment(handle.service_account, op_ns)
    # the operator process binds both itself: support.ports.free_port's residual race; distinct from
    # each other and from the serving pods' metrics port, which nobody holds until the emulators start
    avoid = {handle.serving_metrics_port} if handle.serving_metrics_port else set()
    handle.liveness_port, handle.metrics_port = free_ports(2, avoid=avoid)
    argv, container_env = container_command(
        deployment,
        op_ns,
        handle.liveness_port,
        handle.metrics_port,
        python=python,
        serving_metrics_port=handle.serving_metrics_port,
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRTLLM_OPERATOR_")}
    env.pop("KUBECONFIG", None)
    env.update(container_env)
    env["KUBECONFIG"] = str(handle.kubeconfig)
    env["HOME"] = str(work)  # no ~/.kube/config fallback to admin credentials
    with open(handle.log_path, "ab") as out:
        handle.proc = subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT, cwd=work)
    url = f"http://127.0.0.1:{handle.liveness_port}/healthz"

    def healthy() -> bool:
        if not handle.alive():
            code = handle.proc.returncode if handle.proc else None
            raise AssertionError(f"the operator exited ({code}):\n{handle.log()[-4000:]}")
        try:
            with urllib.request.urlopen(url, timeout=2) as resp:
                return bool(resp.status == 200)
        except OSError:
            return False

    deadline = time.monotonic() + 60
    while not healthy():
        if time.monotonic() > deadline:
            raise AssertionError(f"the operator was not healthy within 60 s:\n{handle.log()[-4000:]}")
        time.sleep(0.3)


def release_tree(commit: str, dest: Path) -> Path:
    """The tree of ``commit`` (``git archive`` of this repository's history) in ``dest``, with its
    own virtualenv made by its own hack/venv.sh (``dest/.venv``; the shared uv cache makes it
    seconds). Fails naming the fix when the history lacks the commit (a shallow clone)."""
    _extract(commit, dest)
    venv = subprocess.run(
        [str(dest / "hack" / "venv.sh")],
        cwd=dest,
        env={**os.environ, "VENV": ".venv"},
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert venv.returncode == 0, f"the virtualenv of {commit} failed:\n{venv.stderr[-4000:]}"
    return dest


def release_chart(commit: str, dest: Path) -> Path:
    """Only the chart of ``commit`` (``git archive`` of charts/trtllm-operator) under ``dest``; returns
    the chart's directory. No virtualenv: for tests that install the chart and run no operator."""
    _extract(commit, dest, "charts/trtllm-operator")
    return dest / "charts" / "trtllm-operator"


def _extract(commit: str, dest: Path, *paths: str) -> None:
    """``git archive commit [paths]`` of this repository's history, extracted into ``dest``. Fails
    naming the fix when the history lacks the commit (a shallow clone)."""
    found = subprocess.run(
        ["git", "-C", str(REPO_ROOT), "cat-file", "-e", f"{commit}^{{commit}}"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert found.returncode == 0, (
        f"commit {commit} (the previous release) is not in this clone's history: {found.stderr.strip()}"
        " — fetch it (git fetch --unshallow, or clone without --depth)"
    )
    dest.mkdir(parents=True, exist_ok=True)
    archive = subprocess.Popen(
        ["git", "-C", str(REPO_ROOT), "archive", commit, *paths], stdout=subprocess.PIPE
    )
    subprocess.run(["tar", "-x", "-C", str(dest)], stdin=archive.stdout, check=True)
    assert archive.wait(60) == 0, f"git archive {commit} failed"
