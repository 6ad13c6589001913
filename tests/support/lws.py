"""The real LeaderWorkerSet controller next to the local control plane.

``hack/build-controllers.sh`` builds LWS's manager from its Go module (``sigs.k8s.io/lws/cmd``; the
operator renders for v0.10.0, v0.9.0 is built by default, as that script explains) and copies the module's
CRDs and webhook configurations beside it. :func:`running_lws` installs them as the release's kustomize
overlay does (kubernetes-sigs/lws v0.10.0 ``config/default/kustomization.yaml``: namespace ``lws-system``,
name prefix ``lws-``; ``config/webhook/kustomization.yaml``: ``mutating-patch.yaml`` and
``validating-patch.yaml`` give the pod webhooks their ``objectSelector``) and runs the manager as a local
process with its own certificate management (``internalCertManagement.enable``, the release default): it
issues its serving certificate into Secret ``lws-webhook-server-cert`` and injects the CA into both
webhook configurations; :class:`SecretVolume` copies that Secret into the manager's certificate directory,
as the kubelet's secret volume does for the release's Deployment.

**How the API server reaches the webhooks.** They are named by Service (``lws-webhook-service`` in
``lws-system``, port 443). The local control plane runs kube-apiserver with
``--enable-aggregator-routing=true`` (hack/localcluster/controlplane.py), so it dials the address of
the Service's EndpointSlice instead of the ClusterIP that nothing routes here, and checks the
certificate against ``lws-webhook-service.lws-system.svc`` (the name the manager's certificate is
issued for, ``pkg/cert/cert.go``). The slice holds this host's first non-loopback IPv4 address (the
API server refuses loopback addresses in EndpointSlices), where the manager's webhook server listens
(``webhook.host``/``webhook.port`` of its Configuration).

The webhooks are not optional: LWS's pod webhook (``pkg/webhooks/pod_webhook.go`` ``Default``) is
what gives the pods their ``worker-index``/``group-index`` labels and the ``LWS_LEADER_ADDRESS``,
``LWS_GROUP_SIZE`` and ``LWS_WORKER_INDEX`` environment the operator's launch scripts read.
"""

from __future__ import annotations

import base64
import copy
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client
from kubernetes.client.rest import ApiException

from trtllm_operator.emulator import Fleet

from .addons import apply, component_dirs, crd_docs, crds_and_namespace, ignore_not_found
from .api import Api
from .cluster import LocalCluster
from .host_service import host_address, host_service
from .ports import free_port
from .process import Process, start_process
from .wait import wait_for

#: kubernetes-sigs/lws v0.10.0: ``config/default/kustomization.yaml`` (``namespace: lws-system``,
#: ``namePrefix: lws-``), which is also ``pkg/utils`` ``GetOperatorNamespace``'s default.
NAMESPACE = "lws-system"
NAME_PREFIX = "lws-"
#: ``api/config/v1alpha1/defaults.go``: ``DefaultWebhookServiceName``, ``DefaultWebhookSecretName``.
WEBHOOK_SERVICE = "lws-webhook-service"
WEBHOOK_SECRET = "lws-webhook-server-cert"
#: ``pkg/cert/cert.go``: the configurations the manager injects its CA into.
WEBHOOK_CONFIGS = {
    "MutatingWebhookConfiguration": "lws-mutating-webhook-configuration",
    "ValidatingWebhookConfiguration": "lws-validating-webhook-configuration",
}
#: ``config/webhook/service.yaml``: port 443 (unnamed) → the manager's webhook port.
SERVICE_PORT = 443
#: ``api/leaderworkerset/v1/leaderworkerset_types.go``: the labels LWS's pod webhook puts on every pod
#: of a LeaderWorkerSet (``SetNameLabelKey``, ``WorkerIndexLabelKey``, ``GroupIndexLabelKey``), and the
#: resource (group, version, plural) of the kind.
SET_NAME_LABEL = "leaderworkerset.sigs.k8s.io/name"
WORKER_INDEX_LABEL = "leaderworkerset.sigs.k8s.io/worker-index"
GROUP_INDEX_LABEL = "leaderworkerset.sigs.k8s.io/group-index"
LWS = ("leaderworkerset.x-k8s.io", "v1", "leaderworkersets")


class LwsError(RuntimeError):
    """The LWS controller could not be built, installed or started; the message says why."""


def lws_dir() -> Path:
    """``<testbin>/lws-<version>``: ``bin/lws-controller`` and ``config/{crd,webhook}``, built by
    ``hack/build-controllers.sh`` when missing (cold: a few minutes)."""
    path = component_dirs("lws", error=LwsError)["lws"]
    if not (path / "bin" / "lws-controller").is_file():
        raise LwsError(f"hack/build-controllers.sh printed {path}, which has no bin/lws-controller")
    return path


def kustomized_webhooks(webhook_dir: Path) -> list[dict[str, Any]]:
    """The two webhook configurations as ``config/default`` renders them: ``manifests.yaml`` with
    ``mutating-patch.yaml``/``validating-patch.yaml`` applied, names prefixed ``lws-``, the Service
    reference ``lws-webhook-service.lws-system``."""
    patches = {
        "MutatingWebhookConfiguration": yaml.safe_load((webhook_dir / "mutating-patch.yaml").read_text()),
        "ValidatingWebhookConfiguration": yaml.safe_load((webhook_dir / "validating-patch.yaml").read_text()),
    }
    out = []
    for doc in yaml.safe_load_all((webhook_dir / "manifests.yaml").read_text()):
        if not doc:
            continue
        body = copy.deepcopy(doc)
        for op in patches[body["kind"]]:
            # the release's patches are JSON 6902 `replace /webhooks/<i>`; anything else is a new
            # release this harness has not been taught
            parts = op["path"].split("/")
            if op["op"] != "replace" or parts[:2] != ["", "webhooks"] or len(parts) != 3:
                raise LwsError(f"unexpected patch {op['op']} {op['path']} in {webhook_dir}")
            body["webhooks"][int(parts[2])] = op["value"]
        body["metadata"]["name"] = NAME_PREFIX + body["metadata"]["name"]
        for hook in body["webhooks"]:
            svc = hook["clientConfig"]["service"]
            svc["name"], svc["namespace"] = NAME_PREFIX + svc["name"], NAMESPACE
        out.append(body)
    return out


@dataclass
class Lws(Process):
    """A running LWS controller: its process and log, and the address the API server calls."""

    host: str
    port: int


class SecretVolume(threading.Thread):
    """What the kubelet does for a Secret volume: copies Secret ``namespace/name``'s keys into
    ``directory`` whenever they change (atomically, file by file). For LWS: its manager's pod
    (``config/default/manager_webhook_patch.yaml``) mounts Secret ``lws-webhook-server-cert`` at the
    webhook's certificate directory; the manager's certificate rotator (open-policy-agent/cert-controller
    v0.16.0 ``pkg/rotator/rotator.go`` ``ensureCertsMounted``) fills the Secret, then waits until
    ``tls.crt`` appears there before it starts the controllers. KEDA's operator uses the same rotator
    (tests/support/keda.py)."""

    def __init__(self, core: client.CoreV1Api, directory: Path, name: str, namespace: str) -> None:
        super().__init__(name=f"secret-volume-{namespace}-{name}", daemon=True)
        self.core, self.directory, self.secret, self.namespace = core, directory, name, namespace
        self.halt = threading.Event()

    def run(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        seen: dict[str, str] = {}
        while not self.halt.wait(0.3):
            try:
                data = self.core.read_namespaced_secret(self.secret, self.namespace).data or {}
            except ApiException:
                continue
            for key, value in data.items():
                if seen.get(key) != value:
                    tmp = self.directory / f".{key}.tmp"
                    tmp.write_bytes(base64.b64decode(value))
                    tmp.replace(self.directory / key)
                    seen[key] = value


@contextmanager
def running_lws(cluster: LocalCluster, timeout: float = 120.0) -> Iterator[Lws]:
    """Install LWS's CRDs and webhooks, run its manager until the webhooks answer; on exit stop it
    and remove the webhook configurations and the CRDs (with every LeaderWorkerSet), so that the rest
    of the session sees a cluster without LWS again."""
    home = lws_dir()
    host = host_address()
    port = free_port(host)  # the manager binds both itself: support.ports' residual race
    work = Path(tempfile.mkdtemp(prefix="lws-", dir=cluster.work_dir))
    core = client.CoreV1Api(cluster.api)
    admission = client.AdmissionregistrationV1Api(cluster.api)
    lws: Lws | None = None
    volume: SecretVolume | None = None
    with crds_and_namespace(cluster, crd_docs(home), NAMESPACE):
        try:
            apply(
                cluster,
                [
                    # config/internalcert/secret.yaml: the (empty) Secret the manager fills
                    {
                        "apiVersion": "v1",
                        "kind": "Secret",
                        "metadata": {"name": WEBHOOK_SECRET, "namespace": NAMESPACE},
                    },
                    *host_service(WEBHOOK_SERVICE, NAMESPACE, port=SERVICE_PORT, host=host, host_port=port),
                    *kustomized_webhooks(home / "config" / "webhook"),
                ],
            )
            health = free_port()
            config = {
                "apiVersion": "config.lws.x-k8s.io/v1alpha1",
                "kind": "Configuration",
                "leaderElection": {"leaderElect": False},
                "internalCertManagement": {"enable": True},
                "webhook": {"host": host, "port": port, "certDir": str(work / "certs")},
                "metrics": {"bindAddress": "0"},  # controller-runtime: "0" serves no metrics
                "health": {"healthProbeBindAddress": f"127.0.0.1:{health}"},
            }
            (work / "config.yaml").write_text(yaml.safe_dump(config))
            manager = start_process(
                "lws-controller",
                [
                    str(home / "bin" / "lws-controller"),
                    f"--config={work / 'config.yaml'}",
                    "--zap-log-level=2",
                ],
                work,
                {"KUBECONFIG": str(cluster.kubeconfig)},
            )
            lws = Lws(manager.name, manager.proc, manager.log, host, port)
            volume = SecretVolume(core, work / "certs", WEBHOOK_SECRET, NAMESPACE)
            volume.start()
            _wait_webhooks_served(lws, cluster, timeout)
            yield lws
        finally:
            if volume is not None:
                volume.halt.set()
                volume.join(5)
            # webhooks first: with failurePolicy Fail, a configuration left pointing at a stopped
            # manager would refuse every later write to a LeaderWorkerSet (the namespace cleanup's too)
            for kind, name in WEBHOOK_CONFIGS.items():
                delete = (
                    admission.delete_mutating_webhook_configuration
                    if kind.startswith("Mutating")
                    else admission.delete_validating_webhook_configuration
                )
                ignore_not_found(delete, name)
            if lws is not None:
                lws.stop()


def _wait_webhooks_served(lws: Lws, cluster: LocalCluster, timeout: float) -> None:
    """Until a server-side dry-run create of a LeaderWorkerSet passes LWS's own mutating and
    validating webhooks (dry runs call webhooks declaring ``sideEffects: None``): the manager has
    written its certificate, injected its CA and serves on the host address."""
    probe = {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": {"name": "probe", "namespace": NAMESPACE},
        "spec": {
            "leaderWorkerTemplate": {
                "size": 2,
                "workerTemplate": {"spec": {"containers": [{"name": "c", "image": "probe.invalid/none"}]}},
            }
        },
    }
    api = client.CustomObjectsApi(cluster.api)

    def admitted() -> bool:
        lws.check()
        api.create_namespaced_custom_object(*LWS[:2], NAMESPACE, LWS[2], probe, dry_run="All")
        return True

    try:
        wait_for(admitted, timeout, interval=0.5, desc="a LeaderWorkerSet admitted through LWS's webhooks")
    except AssertionError as exc:
        raise LwsError(f"{exc}\nlws-controller log:\n{lws.log_tail()}") from exc


# ---- what a test reads of a LeaderWorkerSet's groups ----------------------------------------------
def group_pods(lws_name: str, groups: int) -> set[str]:
    """The pods of ``groups`` groups of size 2 of LeaderWorkerSet ``lws_name``: leader ``<lws>-<g>`` (of
    the leader StatefulSet ``<lws>``) and worker ``<lws>-<g>-1`` (of the group's StatefulSet
    ``<lws>-<g>``; kubernetes-sigs/lws v0.9.0 ``pkg/controllers/pod_controller.go``)."""
    return {p for g in range(groups) for p in (f"{lws_name}-{g}", f"{lws_name}-{g}-1")}


def lws_pods(api: Api, lws_name: str) -> dict[str, Any]:
    """The pods of LeaderWorkerSet ``lws_name`` in ``api``'s namespace not being deleted, by name
    (client model objects)."""
    pods = api.core.list_namespaced_pod(api.ns, label_selector=f"{SET_NAME_LABEL}={lws_name}").items
    return {p.metadata.name: p for p in pods if p.metadata.deletion_timestamp is None}


def selected(api: Api, selector: str) -> set[str]:
    """The names of the pods of ``api``'s namespace that label selector ``selector`` selects."""
    return {p.metadata.name for p in api.core.list_namespaced_pod(api.ns, label_selector=selector).items}


def leaderworkerset(api: Api, name: str) -> dict[str, Any]:
    """LeaderWorkerSet ``name`` of ``api``'s namespace, as the API server sent it."""
    obj: dict[str, Any] = api.custom.get_namespaced_custom_object(*LWS[:2], api.ns, LWS[2], name)
    return obj


def groups_serving(api: Api, fleet: Fleet, deployment: str, lws_name: str, groups: int) -> bool:
    """LLMDeployment ``deployment`` serves from exactly ``groups`` groups of size 2: their pods and no
    other (:func:`group_pods`), each one emulated by ``fleet`` (workers too, :meth:`Api.follow_pods`), and
    ``groups`` ready replicas in both the LLMDeployment's status and LWS's own."""
    return (
        set(lws_pods(api, lws_name)) == group_pods(lws_name, groups)
        and len(fleet.addresses()) == 2 * groups
        and api.status(deployment).get("readyReplicas") == groups
        and (leaderworkerset(api, lws_name).get("status") or {}).get("readyReplicas") == groups
    )
