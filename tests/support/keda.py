"""KEDA's real operator and metrics API server next to the local control plane.

``hack/build-controllers.sh keda`` builds both from KEDA's Go module at the release the operator
renders for (kedacore/keda v2.20.2: ``cmd/operator`` → ``bin/keda``, ``cmd/adapter`` →
``bin/keda-adapter``, its ``replace`` directives honoured) and copies its CRDs
(``config/crd/bases``). :func:`running_keda` installs the CRDs and runs both as local processes the way
KEDA's release runs them in namespace ``keda`` (``pkg/util/env_resolver.go`` ``GetPodNamespace``'s
default), with KEDA's own certificate management:

- the operator (``cmd/operator/main.go`` flags cited below) with ``--enable-cert-rotation``: its
  rotator (``pkg/certificates/certificate_manager.go``, open-policy-agent/cert-controller v0.16.0)
  issues a CA and a certificate for ``keda-operator``/``keda-metrics-apiserver`` (and their
  ``.keda.svc`` names) into Secret ``kedaorg-certs``, injects the CA into the APIService
  ``v1beta1.external.metrics.k8s.io``, and — ``RestartOnSecretRefresh`` — exits 0 once it has
  written a new Secret so that its pod restarts with it mounted. The harness plays the kubelet:
  it copies the Secret into the certificate directory (:class:`support.lws.SecretVolume`) and starts
  the operator again after that exit (the Deployment's ``restartPolicy: Always``). The restarted
  operator serves its gRPC metrics service (``pkg/metricsservice/server.go``, mutual TLS from
  ``ca.crt``/``tls.crt``/``tls.key`` of ``--cert-dir``, ``pkg/metricsservice/utils/tls.go``).
- the metrics API server (``cmd/adapter/main.go``) with the same certificate directory: its gRPC
  client to the operator uses the same files (``NewGrpcClient(..., SecureServing.ServerCert.
  CertDirectory, ...)``), and it serves ``external.metrics.k8s.io/v1beta1`` with ``tls.crt`` (what
  the release's manifests pass: ``--cert-dir``, ``--tls-cert-file``, ``--tls-private-key-file``),
  which kube-apiserver verifies against the injected CA for ``keda-metrics-apiserver.keda.svc``.

Reaching the adapter: as prometheus-adapter's (tests/support/monitoring.py) — a selector-less Service
``keda-metrics-apiserver`` and an EndpointSlice with this host's address
(tests/support/host_service.py); the local control plane runs kube-apiserver with
``--enable-aggregator-routing=true`` and the front-proxy flags. The adapter
reaches the operator at ``127.0.0.1:<port>`` with ``--metrics-service-grpc-authority`` set to the
operator's Service name, which the certificate names (the flag exists for exactly this:
"if the Host Authority is not the same as the address used").

KEDA's admission webhooks (``cmd/webhooks``, ``bin/keda-admission-webhooks``; the release's
``config/webhooks/webhooks.yaml`` Deployment ``keda-admission``, which KEDA's Helm chart installs too)
run beside them: :func:`admission_webhooks` registers KEDA's own ValidatingWebhookConfiguration
``keda-admission`` (``config/webhooks/validation_webhooks.yaml``: every webhook, its rules,
``failurePolicy: Ignore``, ``timeoutSeconds: 10`` as shipped) with one change, ``clientConfig``: the
release names Service ``keda-admission-webhooks`` (port 443 → 9443) and the rotator injects its CA;
here ``clientConfig.url`` is ``https://127.0.0.1:<port><path>`` — kube-apiserver runs on this host and
calls the process directly — with the ``caBundle`` of a self-signed certificate for 127.0.0.1 that
the openssl CLI makes into the webhook's ``--cert-dir`` (``tls.crt``/``tls.key``, controller-runtime's
webhook server's file names). So the operator keeps ``--enable-webhook-patching=false``: the
configuration's caBundle is this harness's, not the rotator's. They refuse, among others, a ScaledObject
whose target another ScaledObject or an HPA already scales (``apis/keda/v1alpha1/
scaledobject_webhook.go`` ``verifyScaledObjects`` / ``verifyHpas``); with ``failurePolicy: Ignore`` an
unreachable webhook admits everything, so :func:`running_keda` waits until one refuses a dry run.
"""

from __future__ import annotations

import base64
import json
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client
from kubernetes.utils import parse_quantity

from .addons import (
    apply,
    component_dirs,
    crd_docs,
    crds_and_namespace,
    ignore_not_found,
    raw_items,
    wait_api_service_available,
)
from .cluster import LocalCluster
from .host_service import host_address, host_service
from .lws import SecretVolume
from .ports import free_port
from .process import Process, start_process
from .wait import wait_for

#: kedacore/keda v2.20.2 pkg/util/env_resolver.go GetPodNamespace: "keda" when POD_NAMESPACE is unset.
NAMESPACE = "keda"
#: cmd/operator/main.go defaults: --cert-secret-name, --operator-service-name,
#: --metrics-server-service-name; the APIService the rotator injects its CA into.
CERT_SECRET = "kedaorg-certs"
OPERATOR_SERVICE = "keda-operator"
METRICS_SERVICE = "keda-metrics-apiserver"
EXTERNAL_METRICS_GROUP = "external.metrics.k8s.io"
EXTERNAL_METRICS_VERSION = "v1beta1"
APISERVICE = f"{EXTERNAL_METRICS_VERSION}.{EXTERNAL_METRICS_GROUP}"
#: cert-controller v0.16.0 pkg/rotator/rotator.go, logged just before os.Exit(0) (RestartOnSecretRefresh)
RESTART_MESSAGE = "Secrets have been updated; exiting so pod can be restarted"
#: config/webhooks/service.yaml: the Service the release's webhook configuration names
WEBHOOK_SERVICE = "keda-admission-webhooks"
#: apis/keda/v1alpha1 (group keda.sh, version v1alpha1, plural scaledobjects)
KEDA_GROUP, KEDA_VERSION = "keda.sh", "v1alpha1"
#: config/webhooks/validation_webhooks.yaml: the ValidatingWebhookConfiguration's name
WEBHOOK_CONFIGURATION = "keda-admission"
#: kube-apiserver's prefix of a validating webhook's refusal (k8s.io/apiserver v0.34.4
#: pkg/admission/plugin/webhook/errors/statuserror.go ToStatusErr), then KEDA's message; HTTP 403
#: (controller-runtime v0.23.3 pkg/webhook/admission/response.go: Denied → ValidationResponse, Forbidden).
SCALED_OBJECT_REFUSED = 'admission webhook "vscaledobject.kb.io" denied the request: '


class KedaError(RuntimeError):
    """KEDA could not be built, installed or started; the message says why (with its logs)."""


@dataclass
class Keda:
    """The running KEDA: its operator (the current process: it restarts once, see the module doc) and
    metrics API server."""

    operator: Process
    adapter: Process
    webhooks: Process


def external_metric(
    cluster: LocalCluster, namespace: str, metric: str, scaled_object: str
) -> list[dict[str, Any]]:
    """``items`` of ``GET /apis/external.metrics.k8s.io/v1beta1/namespaces/<ns>/<metric>`` with the
    selector KEDA puts on its HPA's External metrics (controllers/keda/hpa.go: label
    ``scaledobject.keda.sh/name`` = the ScaledObject), i.e. what the HPA controller asks."""
    return raw_items(
        cluster,
        f"/apis/{EXTERNAL_METRICS_GROUP}/{EXTERNAL_METRICS_VERSION}/namespaces/{namespace}/{metric}"
        f"?labelSelector=scaledobject.keda.sh%2Fname%3D{scaled_object}",
    )


def milli(value: Any) -> Decimal:
    """A Kubernetes quantity (``"250m"``, ``"1"``) as an exact ``Decimal``."""
    return Decimal(str(parse_quantity(value)))


def hpa_external_averages(hpa: Any) -> dict[str, Decimal]:
    """An HPA's (client model) ``status.currentMetrics`` of type External with an ``averageValue``:
    metric name → value. For KEDA's ``AverageValue`` triggers that value is the metric's sum divided
    by the scale's ``status.replicas``, rounded up to a milli-unit (kubernetes v1.34.4
    ``pkg/controller/podautoscaler/replica_calculator.go`` ``GetExternalPerPodMetricReplicas``:
    ``usage = ceil(usage / statusReplicas)`` in milli-units; ``horizontal.go``: ``statusReplicas :=
    scale.Status.Replicas``)."""
    return {
        m.external.metric.name: milli(m.external.current.average_value)
        for m in hpa.status.current_metrics or []
        if m.type == "External" and m.external and m.external.current and m.external.current.average_value
    }


def refusal_message(exc: client.ApiException) -> str:
    """The ``message`` of the Status an API server refusal carries (its body), or the raw body."""
    try:
        return str(json.loads(exc.body or "")["message"])
    except (ValueError, KeyError, TypeError):
        return str(exc.body)


def serving_cert(directory: Path) -> bytes:
    """A self-signed ``tls.crt``/``tls.key`` for IP 127.0.0.1 (and the release's Service name) made by
    the openssl CLI in ``directory``; returns the certificate (PEM), the webhook configuration's
    caBundle."""
    directory.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "2",
            "-subj",
            f"/CN={WEBHOOK_SERVICE}.{NAMESPACE}.svc",
            "-addext",
            f"subjectAltName=IP:127.0.0.1,DNS:{WEBHOOK_SERVICE}.{NAMESPACE}.svc",
            "-keyout",
            str(directory / "tls.key"),
            "-out",
            str(directory / "tls.crt"),
        ],
        check=True,
        capture_output=True,
    )
    return (directory / "tls.crt").read_bytes()


def admission_webhooks(home: Path, port: int, ca_bundle: bytes) -> dict[str, Any]:
    """KEDA's ValidatingWebhookConfiguration (``<home>/config/webhooks/validation_webhooks.yaml``, as
    hack/build-controllers.sh copied it from the module) with each webhook's ``clientConfig`` turned
    from the release's Service into ``url: https://127.0.0.1:<port><path>`` with ``ca_bundle`` (PEM);
    everything else — rules, ``failurePolicy``, ``timeoutSeconds``, ``sideEffects`` — as shipped."""
    body: dict[str, Any] = yaml.safe_load(
        (home / "config" / "webhooks" / "validation_webhooks.yaml").read_text()
    )
    if (
        body.get("kind") != "ValidatingWebhookConfiguration"
        or body["metadata"]["name"] != WEBHOOK_CONFIGURATION
    ):
        raise KedaError(
            f"unexpected webhook configuration in {home / 'config' / 'webhooks'}: {body.get('kind')}"
        )
    for hook in body["webhooks"]:
        service = hook["clientConfig"]["service"]
        if (service["name"], service["namespace"]) != (WEBHOOK_SERVICE, NAMESPACE):
            raise KedaError(f"webhook {hook['name']} names Service {service}, not {WEBHOOK_SERVICE}")
        hook["clientConfig"] = {
            "url": f"https://127.0.0.1:{port}{service['path']}",
            "caBundle": base64.b64encode(ca_bundle).decode(),
        }
    return body


def a_scaled_object(name: str, target: str, *, namespace: str | None = None, **spec: Any) -> dict[str, Any]:
    """A ScaledObject of the apps/v1 Deployment ``target`` (1 to 2 replicas) with one cron trigger (no
    scaler reads anything outside the cluster); ``spec``: more ``spec`` fields (e.g.
    ``idleReplicaCount``)."""
    metadata = {"name": name} if namespace is None else {"name": name, "namespace": namespace}
    return {
        "apiVersion": f"{KEDA_GROUP}/{KEDA_VERSION}",
        "kind": "ScaledObject",
        "metadata": metadata,
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": target},
            "minReplicaCount": 1,
            "maxReplicaCount": 2,
            "triggers": [
                {
                    "type": "cron",
                    "metadata": {
                        "timezone": "UTC",
                        "start": "0 * * * *",
                        "end": "1 * * * *",
                        "desiredReplicas": "2",
                    },
                }
            ],
            **spec,
        },
    }


def _wait_webhooks_serving(cluster: LocalCluster, webhooks: Process, timeout: float) -> None:
    """Until a server-side dry-run create of a ScaledObject with ``idleReplicaCount`` equal to
    ``minReplicaCount`` is refused by KEDA's webhook (``verifyReplicaCount``,
    ``CheckReplicaCountBoundsAreValid`` in apis/keda/v1alpha1/scaledobject_types.go; the CRD's schema
    does not check it, unlike min > max, which its CEL rule refuses first): with ``failurePolicy:
    Ignore`` an admitted dry run only says that the webhook was not reached yet."""
    probe = a_scaled_object("webhook-probe", "webhook-probe", namespace=NAMESPACE, idleReplicaCount=1)
    custom = client.CustomObjectsApi(cluster.api)
    expected = SCALED_OBJECT_REFUSED + "IdleReplicaCount=1 must be less than MinReplicaCount=1"

    def refused() -> bool:
        webhooks.check()
        try:
            custom.create_namespaced_custom_object(
                KEDA_GROUP, KEDA_VERSION, NAMESPACE, "scaledobjects", probe, dry_run="All"
            )
        except client.ApiException as exc:
            if refusal_message(exc) == expected:
                return True
            raise KedaError(f"dry run refused, not by KEDA's webhook: HTTP {exc.status} {exc.body}") from exc
        return False

    try:
        wait_for(refused, timeout, interval=0.5, desc="KEDA's admission webhook refusing a dry run")
    except AssertionError as exc:
        raise KedaError(f"{exc}\nkeda-admission-webhooks log:\n{webhooks.log_tail()}") from exc


@contextmanager
def running_keda(cluster: LocalCluster, watch_namespace: str, timeout: float = 180.0) -> Iterator[Keda]:
    """KEDA's CRDs installed, its operator and metrics API server running (ScaledObjects of
    ``watch_namespace``: ``WATCH_NAMESPACE``, pkg/util/watch.go), the APIService Available, its
    admission webhooks registered and refusing (every namespace, as the release's ``WATCH_NAMESPACE:
    ""``). On exit: the ScaledObjects deleted while the operator still runs (it removes its
    finalizer), the webhook configuration, the APIService (an unavailable aggregated API fails every
    discovery), the three processes, the CRDs and namespace ``keda``."""
    home = component_dirs("keda", error=KedaError)["keda"]
    work = Path(tempfile.mkdtemp(prefix="keda-", dir=cluster.work_dir))
    certs = work / "certs"
    (work / "ca").mkdir()
    host = host_address()
    adapter_port = free_port(host)  # each binds its own port: support.ports' residual race
    grpc_port = free_port()
    core = client.CoreV1Api(cluster.api)
    registration = client.ApiregistrationV1Api(cluster.api)
    env = {
        "KUBECONFIG": str(cluster.kubeconfig),
        "WATCH_NAMESPACE": watch_namespace,
        "POD_NAMESPACE": NAMESPACE,
        "KEDA_CLUSTER_OBJECT_NAMESPACE": NAMESPACE,  # pkg/util/env_resolver.go GetClusterObjectNamespace
    }
    operator_argv = [
        str(home / "bin" / "keda"),
        # cmd/operator/main.go (v2.20.2) flags
        "--leader-elect=false",
        "--enable-cert-rotation=true",
        f"--cert-dir={certs}",
        "--enable-webhook-patching=false",
        f"--metrics-service-bind-address=127.0.0.1:{grpc_port}",
        "--metrics-bind-address=0",  # controller-runtime: "0" serves no metrics
        "--health-probe-bind-address=0",
        f"--ca-dir={work / 'ca'}",  # scalers' extra CAs: none (default /custom/ca)
        "--zap-log-level=info",
    ]
    admission = client.AdmissionregistrationV1Api(cluster.api)
    webhook_port = free_port()  # binds it itself (controller-runtime webhook.Options.Port, every address)
    webhook_ca = serving_cert(work / "webhook-certs")
    operator: Process | None = None
    adapter: Process | None = None
    webhooks: Process | None = None
    volume = SecretVolume(core, certs, CERT_SECRET, NAMESPACE)
    with crds_and_namespace(cluster, crd_docs(home), NAMESPACE):
        try:
            apply(
                cluster,
                [
                    *host_service(METRICS_SERVICE, NAMESPACE, port=443, host=host, host_port=adapter_port),
                    # No caBundle and no insecureSkipTLSVerify: the operator's rotator injects its CA.
                    {
                        "apiVersion": "apiregistration.k8s.io/v1",
                        "kind": "APIService",
                        "metadata": {"name": APISERVICE},
                        "spec": {
                            "group": EXTERNAL_METRICS_GROUP,
                            "version": EXTERNAL_METRICS_VERSION,
                            "groupPriorityMinimum": 100,
                            "versionPriority": 100,
                            "service": {"name": METRICS_SERVICE, "namespace": NAMESPACE, "port": 443},
                        },
                    },
                ],
            )
            volume.start()
            operator = start_process("keda-operator", operator_argv, work, env)
            # The release's webhooks.yaml: POD_NAMESPACE, WATCH_NAMESPACE "" (every namespace), the
            # certificate directory; cmd/webhooks/main.go (v2.20.2) flags.
            webhooks = start_process(
                "keda-admission-webhooks",
                [
                    str(home / "bin" / "keda-admission-webhooks"),
                    f"--port={webhook_port}",
                    f"--cert-dir={work / 'webhook-certs'}",
                    "--metrics-bind-address=0",  # default :8080; controller-runtime: "0" serves none
                    "--health-probe-bind-address=0",  # default :8081; the dry-run probe stands in
                    "--zap-log-level=info",
                ],
                work,
                {**env, "WATCH_NAMESPACE": ""},
            )
            apply(cluster, [admission_webhooks(home, webhook_port, webhook_ca)])

            # First start: the rotator fills the empty Secret and exits 0 for a restart with it mounted.
            def issued_or_serving() -> bool:
                assert operator is not None
                if operator.proc.poll() is None:
                    return (
                        certs / "tls.crt"
                    ).exists() and "Starting Metrics Service gRPC Server" in operator.log.read_text(
                        errors="replace"
                    )
                if operator.proc.returncode == 0 and RESTART_MESSAGE in operator.log.read_text(
                    errors="replace"
                ):
                    return True
                raise AssertionError(
                    f"KEDA's operator exited ({operator.proc.returncode}):\n{operator.log_tail()}"
                )

            wait_for(issued_or_serving, timeout, interval=0.3, desc="KEDA's certificates issued")
            if operator.proc.poll() is not None:
                wait_for((certs / "tls.crt").exists, 30, interval=0.2, desc="kedaorg-certs mounted")
                operator = start_process("keda-operator-restarted", operator_argv, work, env)
            wait_for(
                issued_or_serving,
                timeout,
                interval=0.3,
                desc="KEDA's operator serving its gRPC metrics service",
            )

            adapter = start_process(
                "keda-adapter",
                [
                    str(home / "bin" / "keda-adapter"),
                    # cmd/adapter/main.go (v2.20.2) flags
                    f"--metrics-service-address=127.0.0.1:{grpc_port}",
                    f"--metrics-service-grpc-authority={OPERATOR_SERVICE}.{NAMESPACE}.svc",
                    f"--port={free_port()}",  # its own /metrics listener (default 8080)
                    # sigs.k8s.io/custom-metrics-apiserver v1.35.0 (AdapterBase) and k8s.io/apiserver
                    # serving / delegated authn-authz flags
                    f"--bind-address={host}",
                    f"--secure-port={adapter_port}",
                    f"--cert-dir={certs}",
                    f"--tls-cert-file={certs / 'tls.crt'}",
                    f"--tls-private-key-file={certs / 'tls.key'}",
                    f"--lister-kubeconfig={cluster.kubeconfig}",
                    f"--authentication-kubeconfig={cluster.kubeconfig}",
                    f"--authorization-kubeconfig={cluster.kubeconfig}",
                    "--zap-log-level=info",
                ],
                work,
                env,
            )

            assert operator is not None and adapter is not None
            _wait_webhooks_serving(cluster, webhooks, timeout)
            wait_api_service_available(
                registration, APISERVICE, timeout, [adapter, operator, webhooks], KedaError
            )
            # Available without insecureSkipTLSVerify: kube-apiserver verified the adapter's certificate
            # against the CA the rotator injected, the one in Secret kedaorg-certs.
            ca_bundle = registration.read_api_service(APISERVICE).spec.ca_bundle
            if not ca_bundle or base64.b64decode(ca_bundle) != (certs / "ca.crt").read_bytes():
                raise KedaError(f"APIService {APISERVICE} has no caBundle from {CERT_SECRET}: {ca_bundle!r}")
            yield Keda(operator, adapter, webhooks)
        finally:
            if operator is not None and operator.proc.poll() is None:
                cluster.kubectl(
                    "delete",
                    "scaledobjects.keda.sh",
                    "--all",
                    "-n",
                    watch_namespace,
                    "--ignore-not-found",
                    "--wait=true",
                    "--timeout=60s",
                )
            ignore_not_found(admission.delete_validating_webhook_configuration, WEBHOOK_CONFIGURATION)
            ignore_not_found(registration.delete_api_service, APISERVICE)
            for p in (adapter, operator, webhooks):
                if p is not None:
                    p.stop()
            volume.halt.set()
            if volume.is_alive():
                volume.join(5)
