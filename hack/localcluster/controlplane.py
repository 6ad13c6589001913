"""A real Kubernetes control plane on 127.0.0.1 from locally built binaries, with kwok as the kubelets.

Components (each a child process with its log in ``<work_dir>/logs/<name>.log`` and its PID in
``<work_dir>/state.json``): etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok.
See docs/local-cluster.md for the flags and why each is there, and
docs/reference/local-control-plane.md §B/§C for the sources.

Auth: a random static bearer token for user ``admin`` in group ``system:masters`` (token file), RBAC
authorization, and a ServiceAccount signing key so that TokenRequest (``kubectl create token SA``)
works and RBAC applies to ServiceAccount tokens. The apiserver self-signs its serving certificate
into ``<work_dir>/pki``; the kubeconfig embeds that CA.
"""

from __future__ import annotations

import base64
import contextlib
import ctypes
import datetime
import functools
import json
import os
import secrets
import shutil
import signal
import socket
import ssl
import subprocess
import time
import urllib.error
import urllib.request
import zlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from kubernetes import client, config

from .nodes import DEFAULT_NODES, create_nodes, wait_nodes_ready

REPO_ROOT = Path(__file__).resolve().parents[2]
KWOK_STAGES_DIR = REPO_ROOT / "hack" / "kwok"
DEFAULT_WORK_DIR = REPO_ROOT / ".local" / "cluster"
COMPONENTS = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok")
#: Pod IPs of the developer cluster (.local/cluster). Every other cluster gets its own /16 of the
#: loopback range (pod_cidr_for), so the demo, a test session and a dev cluster running side by side
#: never hand out the same pod IP (emulators bind to pod IPs on port 8002).
POD_CIDR = "127.1.0.0/16"
# Virtual Service IPs (no kube-proxy here, nothing ever connects to them); a /16 holds the load
# benchmark's 1,000 LLMDeployment Services (a /24 ran out at 254).
SERVICE_CIDR = "10.0.0.0/16"
SA_ISSUER = "https://kubernetes.default.svc.cluster.local"
#: kubernetes v1.34.4 cmd/kubeadm/app/constants/constants.go FrontProxyClientCertCommonName
FRONT_PROXY_CLIENT_CN = "front-proxy-client"
# Controllers the tests and the operator need (canonical names, cmd/kube-controller-manager/names).
# No node-lifecycle controller: kwok nodes never heartbeat, so nothing evicts their pods.
CONTROLLERS = (
    "job-controller",
    "cronjob-controller",
    "deployment-controller",
    "replicaset-controller",
    "statefulset-controller",
    "daemonset-controller",
    "garbage-collector-controller",
    "namespace-controller",
    "serviceaccount-controller",
    "pod-garbage-collector-controller",
    "ttl-after-finished-controller",
    # No endpoints/endpointslice controllers: kwok pod IPs are loopback addresses, which the API
    # server refuses in Endpoints/EndpointSlices ("may not be in the loopback range"), so they would
    # only post a stream of FailedToUpdateEndpointSlices warnings. Nothing here reads endpoints.
    "disruption-controller",
    "resourcequota-controller",
    "clusterrole-aggregation-controller",  # fills the aggregated admin/edit/view ClusterRoles
)

Log = Callable[[str], None]


#: kube-apiserver audit policy (audit.k8s.io/v1; the first matching rule wins): writes at level
#: Metadata (who, verb, objectRef, response code; no bodies), one event per request
#: (ResponseComplete; RequestReceived omitted). Reads, leases and events are not logged: they are
#: most of the traffic and no test asks about them.
AUDIT_POLICY = """\
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
  - level: None
    verbs: [get, list, watch]
  - level: None
    resources:
      - group: coordination.k8s.io
        resources: [leases]
      - group: ""
        resources: [events]
      - group: events.k8s.io
        resources: [events]
  - level: Metadata
"""


class ClusterError(RuntimeError):
    """The control plane failed to start or stop; the message includes the failing component's log tail."""


def _print(msg: str) -> None:
    print(f"[local-cluster] {msg}", flush=True)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago (bind to port 0, read it, close), for a
    process that binds it itself. Residual race: another process may take it before that bind (the
    component then fails to start with "address already in use"). Tests get ports from
    tests/support/ports.py, which binds port 0 in-process or hands over bound sockets where it can."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def crd_established(crd: Mapping[str, Any]) -> bool:
    """Whether CustomResourceDefinition ``crd`` (its JSON as the API server sends it) has condition
    ``Established`` ``True``. A CRD just created has ``status.conditions: null`` until the apiextensions
    controllers first write its status (k8s.io/apiextensions-apiserver v0.34.4
    ``pkg/apis/apiextensions/v1/types.go``: ``Conditions`` is ``json:"conditions"``, no ``omitempty``):
    that is "not yet", not an error. ``kubectl wait --for=condition=Established`` takes it for an error
    and exits 1 at once (kubectl v0.34.4 ``pkg/cmd/wait/condition.go`` ``checkCondition``:
    ``unstructured.NestedSlice`` fails on the null, and ``getObjAndCheckCondition`` returns that
    error), which failed an LWS install on a loaded machine ("``.status.conditions`` accessor error:
    <nil> is of the type <nil>, expected []interface{}")."""
    conditions = (crd.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions)


def wait_crds_established(api: client.ApiClient, names: Iterable[str], timeout: float = 60.0) -> None:
    """Wait until every CRD in ``names`` is Established (:func:`crd_established`), reading each one's
    JSON every 0.5 s; a read that fails (the API busy) counts as "not yet". Raises :class:`ClusterError`
    naming the CRDs not Established after ``timeout`` seconds."""
    extensions = client.ApiextensionsV1Api(api)
    pending = list(names)
    deadline = time.monotonic() + timeout
    last_exc: BaseException | None = None
    while True:
        waiting = []
        for name in pending:
            try:
                # the JSON itself: the client's models would reject a status the server has not filled
                crd = json.loads(
                    extensions.read_custom_resource_definition(name, _preload_content=False).data
                )
            except Exception as exc:
                last_exc = exc
                waiting.append(name)
                continue
            if not crd_established(crd):
                waiting.append(name)
        pending = waiting
        if not pending:
            return
        if time.monotonic() >= deadline:
            raise ClusterError(
                f"CRDs not Established after {timeout:.0f} s: {', '.join(pending)} (last error: {last_exc!r})"
            )
        time.sleep(0.5)


def tail(path: Path, lines: int = 40) -> str:
    """The last ``lines`` lines of a text file ('' if it does not exist)."""
    try:
        with path.open("rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - 64 * 1024))
            data = f.read().decode("utf-8", "replace")
    except FileNotFoundError:
        return ""
    return "\n".join(data.splitlines()[-lines:])


def die_with_parent() -> None:
    # Linux prctl(PR_SET_PDEATHSIG, SIGTERM): a test cluster does not outlive a killed pytest.
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)


def _pid_alive(pid: int, exe: str | None = None) -> bool:
    """True if ``pid`` runs (not a zombie) and, when ``exe`` is given, its argv[0] is ``exe``."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    if stat.rsplit(")", 1)[-1].split()[0] in ("Z", "X"):
        return False
    return exe is None or cmdline[0].decode() == exe


def pod_cidr_for(work_dir: Path) -> str:
    """The pod CIDR of the cluster rooted at ``work_dir``: 127.1.0.0/16 for the default developer
    cluster, else 127.N.0.0/16 with N in 2..201 derived from the work dir's path (stable per dir)."""
    resolved = str(Path(work_dir).resolve())
    if resolved == str(DEFAULT_WORK_DIR.resolve()):
        return POD_CIDR
    return f"127.{2 + zlib.crc32(resolved.encode()) % 200}.0.0/16"


@dataclass
class ControlPlane:
    """One local control plane rooted at ``work_dir``, using the binaries in ``bin_dir``.

    ``start()`` brings it up (etcd → apiserver /readyz → controller-manager + scheduler → kwok →
    nodes → CRDs); ``stop()`` ends every process it started, by PID. The state (ports, PIDs, token)
    lives in ``work_dir/state.json`` so another process can stop it (``hack/local-cluster down``).
    ``detach=True`` starts the processes in their own session so they outlive the caller; otherwise
    they get SIGTERM when the caller dies.
    """

    work_dir: Path
    bin_dir: Path
    kwok_stages_dir: Path = KWOK_STAGES_DIR
    crds_dir: Path | None = REPO_ROOT / "crds"
    detach: bool = False
    log: Log = _print
    #: kube-apiserver audit policy (default :data:`AUDIT_POLICY`: writes only);
    #: benchmarks/scale.py passes one that logs reads too, to count requests per client.
    audit_policy: str = AUDIT_POLICY
    ports: dict[str, int] = field(default_factory=dict)
    pids: dict[str, int] = field(default_factory=dict)
    token: str = ""
    versions: dict[str, str] = field(default_factory=dict)
    pod_cidr: str = ""
    _procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict, repr=False)

    # ---- paths -------------------------------------------------------------------------------
    @property
    def kubeconfig(self) -> Path:
        return self.work_dir / "kubeconfig"

    @property
    def logs_dir(self) -> Path:
        return self.work_dir / "logs"

    @property
    def pki_dir(self) -> Path:
        return self.work_dir / "pki"

    @property
    def audit_log(self) -> Path:
        """kube-apiserver's audit log: one JSON event per write request (see AUDIT_POLICY)."""
        return self.logs_dir / "audit.log"

    @property
    def state_file(self) -> Path:
        return self.work_dir / "state.json"

    @property
    def server(self) -> str:
        return f"https://127.0.0.1:{self.ports['kube-apiserver']}"

    def bin(self, name: str) -> str:
        return str(self.bin_dir / name)

    def log_file(self, component: str) -> Path:
        return self.logs_dir / f"{component}.log"

    # ---- state -------------------------------------------------------------------------------
    def save_state(self) -> None:
        state = {
            "bin_dir": str(self.bin_dir),
            "ports": self.ports,
            "pids": self.pids,
            "server": self.server if "kube-apiserver" in self.ports else None,
            "kubeconfig": str(self.kubeconfig),
            "versions": self.versions,
            "pod_cidr": self.pod_cidr,
        }
        self.state_file.write_text(json.dumps(state, indent=2) + "\n")

    @classmethod
    def load(cls, work_dir: Path, log: Log = _print) -> ControlPlane | None:
        """The control plane recorded in ``work_dir/state.json``, or None if there is none."""
        try:
            state = json.loads((work_dir / "state.json").read_text())
        except FileNotFoundError:
            return None
        cp = cls(work_dir=work_dir, bin_dir=Path(state["bin_dir"]), log=log, detach=True)
        cp.ports = {k: int(v) for k, v in state.get("ports", {}).items()}
        cp.pids = {k: int(v) for k, v in state.get("pids", {}).items()}
        cp.versions = dict(state.get("versions", {}))
        cp.pod_cidr = str(state.get("pod_cidr", ""))
        return cp

    def alive(self) -> dict[str, bool]:
        """Component name → whether its recorded process still runs."""
        return {name: _pid_alive(pid, self.bin(name)) for name, pid in self.pids.items()}

    def log_tails(self, lines: int = 40) -> dict[str, str]:
        """Component name → last ``lines`` lines of its log."""
        return {name: tail(self.log_file(name), lines) for name in COMPONENTS if self.log_file(name).exists()}

    # ---- start -------------------------------------------------------------------------------
    def _spawn(self, name: str, argv: list[str], env: dict[str, str] | None = None) -> None:
        self.logs_dir.mkdir(parents=True, exist_ok=True)
        with self.log_file(name).open("ab") as logf:
            proc = subprocess.Popen(
                [self.bin(name), *argv],
                stdin=subprocess.DEVNULL,
                stdout=logf,
                stderr=subprocess.STDOUT,
                cwd=self.work_dir,
                env={**os.environ, **(env or {})},
                start_new_session=self.detach,
                preexec_fn=None if self.detach else die_with_parent,  # noqa: PLW1509
            )
        self._procs[name] = proc
        self.pids[name] = proc.pid
        self.save_state()

    def _check_running(self, name: str) -> None:
        proc = self._procs.get(name)
        if proc is not None and proc.poll() is not None:
            raise ClusterError(
                f"{name} exited with code {proc.returncode} during start-up; last lines of "
                f"{self.log_file(name)}:\n{tail(self.log_file(name))}"
            )

    def _wait(self, what: str, component: str, probe: Callable[[], bool], timeout: float) -> None:
        deadline = time.monotonic() + timeout
        last_exc: BaseException | None = None
        while time.monotonic() < deadline:
            self._check_running(component)
            try:
                if probe():
                    return
            except Exception as exc:
                last_exc = exc
            time.sleep(0.2)
        raise ClusterError(
            f"{what} not ready after {timeout:.0f} s (last error: {last_exc!r}); last lines of "
            f"{self.log_file(component)}:\n{tail(self.log_file(component))}"
        )

    @staticmethod
    def _http_ok(url: str, ctx: ssl.SSLContext | None = None) -> bool:
        try:
            with urllib.request.urlopen(url, timeout=2, context=ctx) as resp:
                return bool(resp.status == 200)
        except urllib.error.HTTPError:
            return False

    def _write_keys_and_tokens(self) -> None:
        self.pki_dir.mkdir(parents=True, exist_ok=True)
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        (self.pki_dir / "sa.key").write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.TraditionalOpenSSL,
                serialization.NoEncryption(),
            )
        )
        (self.pki_dir / "sa.pub").write_bytes(
            key.public_key().public_bytes(
                serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
            )
        )
        self.token = secrets.token_hex(24)
        tokens = self.pki_dir / "tokens.csv"
        tokens.write_text(f'{self.token},admin,admin-uid,"system:masters"\n')
        tokens.chmod(0o600)

    def _write_front_proxy_pki(self) -> None:
        """The aggregation layer's front-proxy PKI, as kubeadm lays it out (kubernetes v1.34.4
        cmd/kubeadm/app/constants/constants.go: ``front-proxy-ca.crt``, ``front-proxy-client.crt``
        with CN ``front-proxy-client``): a CA, and a client certificate it signs that kube-apiserver
        presents when it proxies a request to an aggregated API server (e.g. prometheus-adapter's
        custom.metrics.k8s.io); that server trusts the forwarded X-Remote-* headers only from a client
        certificate of this CA with an allowed name (read from ConfigMap
        kube-system/extension-apiserver-authentication, which kube-apiserver publishes)."""
        now = datetime.datetime.now(datetime.UTC)
        ca_key = ec.generate_private_key(ec.SECP256R1())
        ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "front-proxy-ca")])
        ca = (
            x509.CertificateBuilder()
            .subject_name(ca_name)
            .issuer_name(ca_name)
            .public_key(ca_key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=365))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    key_cert_sign=True,
                    crl_sign=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .sign(ca_key, hashes.SHA256())
        )
        key = ec.generate_private_key(ec.SECP256R1())
        cert = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, FRONT_PROXY_CLIENT_CN)]))
            .issuer_name(ca_name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=365))
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
            .sign(ca_key, hashes.SHA256())
        )
        pem = serialization.Encoding.PEM
        (self.pki_dir / "front-proxy-ca.crt").write_bytes(ca.public_bytes(pem))
        (self.pki_dir / "front-proxy-client.crt").write_bytes(cert.public_bytes(pem))
        client_key = self.pki_dir / "front-proxy-client.key"
        client_key.write_bytes(
            key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
        )
        client_key.chmod(0o600)

    def _write_audit_policy(self) -> Path:
        path = self.work_dir / "audit-policy.yaml"
        path.write_text(self.audit_policy)
        return path

    def _write_kubeconfig(self) -> None:
        ca = (self.pki_dir / "apiserver.crt").read_bytes()
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "local",
                    "cluster": {
                        "server": self.server,
                        "certificate-authority-data": base64.b64encode(ca).decode(),
                    },
                }
            ],
            "users": [{"name": "admin", "user": {"token": self.token}}],
            "contexts": [{"name": "local", "context": {"cluster": "local", "user": "admin"}}],
            "current-context": "local",
        }
        self.kubeconfig.write_text(yaml.safe_dump(config, sort_keys=False))
        self.kubeconfig.chmod(0o600)

    def _component_versions(self) -> dict[str, str]:
        def first_line(*argv: str) -> str:
            out = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
            text = (out.stdout or out.stderr).strip()
            return text.splitlines()[0] if text else f"(exit {out.returncode})"

        return {
            "etcd": first_line(self.bin("etcd"), "--version"),
            "kube-apiserver": first_line(self.bin("kube-apiserver"), "--version"),
            "kube-controller-manager": first_line(self.bin("kube-controller-manager"), "--version"),
            "kube-scheduler": first_line(self.bin("kube-scheduler"), "--version"),
            "kwok": first_line(self.bin("kwok"), "--version"),
            "kubectl": first_line(self.bin("kubectl"), "version", "--client"),
            "helm": first_line(self.bin("helm"), "version", "--short"),
        }

    def start(self, timeout: float = 120.0) -> None:
        """Start every component and wait until the cluster serves, nodes are Ready and CRDs established.

        Raises ClusterError with the failing component's log tail; processes already started are
        stopped first.
        """
        missing = [c for c in (*COMPONENTS, "kubectl") if not (self.bin_dir / c).is_file()]
        if missing:
            raise ClusterError(f"missing binaries in {self.bin_dir}: {missing}; run hack/build-testbin.sh")
        t0 = time.monotonic()
        self.work_dir.mkdir(parents=True, exist_ok=True)
        self.pod_cidr = self.pod_cidr or pod_cidr_for(self.work_dir)
        self.log(f"pod IPs from {self.pod_cidr}")
        self.versions = self._component_versions()
        for name, version in self.versions.items():
            self.log(f"{name}: {version}")
        try:
            self._start(timeout)
        except BaseException:
            with contextlib.suppress(Exception):
                self.stop()
            raise
        self.log(f"control plane ready at {self.server} in {time.monotonic() - t0:.1f} s")

    def _start(self, timeout: float) -> None:
        self._write_keys_and_tokens()
        self._write_front_proxy_pki()
        self.ports = {"etcd": free_port(), "etcd-peer": free_port()}
        etcd_url = f"http://127.0.0.1:{self.ports['etcd']}"
        peer_url = f"http://127.0.0.1:{self.ports['etcd-peer']}"
        self._spawn(
            "etcd",
            [
                "--name=default",
                f"--data-dir={self.work_dir / 'etcd'}",
                f"--listen-client-urls={etcd_url}",
                f"--advertise-client-urls={etcd_url}",
                f"--listen-peer-urls={peer_url}",
                f"--initial-advertise-peer-urls={peer_url}",
                f"--initial-cluster=default={peer_url}",
                "--unsafe-no-fsync=true",
                "--log-level=warn",
            ],
        )
        self._wait("etcd", "etcd", lambda: self._http_ok(f"{etcd_url}/health"), timeout)

        self.ports["kube-apiserver"] = free_port()
        pki = self.pki_dir
        self._spawn(
            "kube-apiserver",
            [
                f"--etcd-servers={etcd_url}",
                "--bind-address=127.0.0.1",
                "--advertise-address=127.0.0.1",
                f"--secure-port={self.ports['kube-apiserver']}",
                f"--cert-dir={pki}",
                f"--token-auth-file={pki / 'tokens.csv'}",
                "--authorization-mode=RBAC",
                f"--service-account-issuer={SA_ISSUER}",
                f"--service-account-key-file={pki / 'sa.pub'}",
                f"--service-account-signing-key-file={pki / 'sa.key'}",
                f"--service-cluster-ip-range={SERVICE_CIDR}",
                # The node-lifecycle controller (not run) would remove TaintNodesByCondition's
                # not-ready taint; without it kwok nodes would stay unschedulable.
                "--disable-admission-plugins=TaintNodesByCondition",
                "--endpoint-reconciler-type=none",
                # Webhooks (and aggregated APIs) are reached at their Service's EndpointSlice address,
                # not its ClusterIP, which nothing routes here (no kube-proxy): kubernetes v1.34.4
                # cmd/kube-apiserver/app/server.go buildServiceResolver → NewEndpointServiceResolver
                # (k8s.io/apiserver pkg/util/proxy ResolveEndpoint). The LeaderWorkerSet controller's
                # webhooks are served on a host address (tests/support/lws.py).
                "--enable-aggregator-routing=true",
                # The aggregation layer's front proxy, with kubeadm's values (kubernetes v1.34.4
                # cmd/kubeadm/app/phases/controlplane/manifests.go getAPIServerCommand): how
                # kube-apiserver authenticates itself to an aggregated API server (APIService, e.g.
                # prometheus-adapter's custom.metrics.k8s.io) and passes on the requesting user.
                f"--requestheader-client-ca-file={pki / 'front-proxy-ca.crt'}",
                f"--requestheader-allowed-names={FRONT_PROXY_CLIENT_CN}",
                "--requestheader-username-headers=X-Remote-User",
                "--requestheader-group-headers=X-Remote-Group",
                "--requestheader-extra-headers-prefix=X-Remote-Extra-",
                f"--proxy-client-cert-file={pki / 'front-proxy-client.crt'}",
                f"--proxy-client-key-file={pki / 'front-proxy-client.key'}",
                # Reach "kubelets" (kwok nodes: 127.0.0.1, nothing listening) by IP: the default
                # order tries the node's Hostname first, a DNS lookup of e.g. "h100-0" that would
                # leave the machine (pods/log, pods/exec requests).
                "--kubelet-preferred-address-types=InternalIP",
                "--allow-privileged=true",
                "--enable-priority-and-fairness=false",
                "--profiling=false",
                # Every write request, so tests can prove who wrote what (e.g. "a settled object's
                # children get no write"); blocking: the event is in the file before the response.
                f"--audit-policy-file={self._write_audit_policy()}",
                f"--audit-log-path={self.audit_log}",
                # Never rotated: readers (tests, benchmarks/scale.py) read this one file from an
                # offset. Unset, the size limit is the log library's default, 100 MB
                # (gopkg.in/natefinch/lumberjack.v2 Logger.MaxSize, which k8s.io/apiserver v0.34.4
                # pkg/server/options/audit.go fills from --audit-log-maxsize): a 5,000 + 5,000
                # benchmark burst rotated it and scale.py counted only the burst's end. In MB.
                "--audit-log-maxsize=1048576",
                "--audit-log-format=json",
                "--audit-log-mode=blocking",
            ],
        )
        insecure = ssl.create_default_context()
        insecure.check_hostname = False
        insecure.verify_mode = ssl.CERT_NONE
        self._wait(
            "kube-apiserver /readyz",
            "kube-apiserver",
            lambda: self._http_ok(f"{self.server}/readyz", insecure),
            timeout,
        )
        self._write_kubeconfig()
        self.save_state()

        kc = str(self.kubeconfig)
        # No --authentication/authorization-kubeconfig: /healthz is always allowed, and without a
        # --client-ca-file on the apiserver they only log "extension-apiserver-authentication not found".
        common = [
            f"--kubeconfig={kc}",
            "--leader-elect=false",
            "--bind-address=127.0.0.1",
        ]
        self.ports["kube-controller-manager"] = free_port()
        self._spawn(
            "kube-controller-manager",
            [
                *common,
                f"--secure-port={self.ports['kube-controller-manager']}",
                f"--controllers={','.join(CONTROLLERS)}",
                f"--service-cluster-ip-range={SERVICE_CIDR}",
            ],
        )
        self.ports["kube-scheduler"] = free_port()
        self._spawn("kube-scheduler", [*common, f"--secure-port={self.ports['kube-scheduler']}"])
        kwok_home = self.work_dir / "kwok-home"  # kwok auto-loads ~/.kwok/kwok.yaml: isolate HOME
        kwok_home.mkdir(exist_ok=True)
        stages = sorted(self.kwok_stages_dir.glob("*.yaml"))
        self._spawn(
            "kwok",
            [
                f"--kubeconfig={kc}",
                *(f"--config={s}" for s in stages),
                "--manage-all-nodes=true",
                f"--cidr={self.pod_cidr}",
                "--node-ip=127.0.0.1",
                "--node-lease-duration-seconds=0",
            ],
            env={"HOME": str(kwok_home)},
        )
        for name in ("kube-controller-manager", "kube-scheduler"):
            url = f"https://127.0.0.1:{self.ports[name]}/healthz"
            self._wait(f"{name} /healthz", name, functools.partial(self._http_ok, url, insecure), timeout)

        api = config.new_client_from_config(config_file=kc)
        try:
            names = create_nodes(api, DEFAULT_NODES)
            try:
                wait_nodes_ready(api, names, timeout=timeout)
            except TimeoutError as exc:
                self._check_running("kwok")
                raise ClusterError(f"{exc}; last lines of kwok log:\n{tail(self.log_file('kwok'))}") from exc
            core = client.CoreV1Api(api)

            def default_sa() -> bool:
                core.read_namespaced_service_account("default", "default")
                return True

            self._wait("ServiceAccount default/default", "kube-controller-manager", default_sa, timeout)
        finally:
            api.close()
        self.apply_crds(timeout)
        self.save_state()

    def kubectl(
        self, *args: str, input: str | None = None, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        """Run the bundled kubectl against this cluster (text mode, output captured)."""
        proc = subprocess.run(
            [self.bin("kubectl"), f"--kubeconfig={self.kubeconfig}", *args],
            input=input,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        if check and proc.returncode != 0:
            raise ClusterError(f"kubectl {' '.join(args)} failed ({proc.returncode}): {proc.stderr.strip()}")
        return proc

    def apply_crds(self, timeout: float = 60.0) -> list[str]:
        """Apply every ``crds_dir/*.yaml`` (server-side) and wait until each CRD is Established."""
        if self.crds_dir is None or not self.crds_dir.is_dir():
            return []
        files = sorted(self.crds_dir.glob("*.yaml"))
        names: list[str] = []
        for f in files:
            for doc in yaml.safe_load_all(f.read_text()):
                if isinstance(doc, dict) and doc.get("kind") == "CustomResourceDefinition":
                    names.append(doc["metadata"]["name"])
        if not names:
            return []
        for f in files:
            self.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(f))
        api = config.new_client_from_config(config_file=str(self.kubeconfig))
        try:
            wait_crds_established(api, names, timeout)
        finally:
            api.close()
        self.log(f"CRDs established: {', '.join(names)}")
        return names

    # ---- stop --------------------------------------------------------------------------------
    def stop(self, grace: float = 10.0) -> list[str]:
        """SIGTERM every recorded component (reverse start order), SIGKILL after ``grace`` s.

        Only PIDs whose executable is the component's binary are signalled. Returns the names that
        had to be killed. Removes the PIDs from the state file.
        """
        killed: list[str] = []
        order = [c for c in reversed(COMPONENTS) if c in self.pids]
        for name in order:
            pid = self.pids[name]
            if _pid_alive(pid, self.bin(name)):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        for name in order:
            pid = self.pids[name]
            proc = self._procs.get(name)
            while _pid_alive(pid, self.bin(name)) and time.monotonic() < deadline:
                if proc is not None and proc.poll() is not None:
                    break
                time.sleep(0.1)
            if _pid_alive(pid, self.bin(name)):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
                killed.append(name)
            if proc is not None:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(timeout=5)
        self.pids = {}
        self._procs = {}
        if self.state_file.exists():
            self.save_state()
        return killed

    def remove(self) -> None:
        """Delete the work dir (call after stop())."""
        shutil.rmtree(self.work_dir, ignore_errors=True)

    def describe(self) -> dict[str, Any]:
        """Server, kubeconfig, and per-component PID/alive/log path (for ``status``)."""
        alive = self.alive()
        return {
            "server": self.server if "kube-apiserver" in self.ports else None,
            "kubeconfig": str(self.kubeconfig),
            "components": {
                name: {
                    "pid": self.pids.get(name),
                    "running": alive.get(name, False),
                    "log": str(self.log_file(name)),
                }
                for name in COMPONENTS
            },
        }
