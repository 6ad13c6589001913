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

What is left out: KEDA's admission webhooks (``cmd/webhooks``, a separate optional Deployment;
``--enable-webhook-patching=false`` so the rotator does not wait for their configuration).
"""

from __future__ import annotations

import base64
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kubernetes import client

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
#: apis/keda/v1alpha1 (group keda.sh, version v1alpha1, plural scaledobjects)
KEDA_GROUP, KEDA_VERSION = "keda.sh", "v1alpha1"


class KedaError(RuntimeError):
    """KEDA could not be built, installed or started; the message says why (with its logs)."""


@dataclass
class Keda:
    """The running KEDA: its operator (the current process: it restarts once, see the module doc) and
    metrics API server."""

    operator: Process
    adapter: Process


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


@contextmanager
def running_keda(cluster: LocalCluster, watch_namespace: str, timeout: float = 180.0) -> Iterator[Keda]:
    """KEDA's CRDs installed, its operator and metrics API server running (ScaledObjects of
    ``watch_namespace``: ``WATCH_NAMESPACE``, pkg/util/watch.go), the APIService Available. On exit:
    the ScaledObjects deleted while the operator still runs (it removes its finalizer), the APIService
    (an unavailable aggregated API fails every discovery), both processes, the CRDs and namespace ``keda``."""
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
    operator: Process | None = None
    adapter: Process | None = None
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
            wait_api_service_available(registration, APISERVICE, timeout, [adapter, operator], KedaError)
            # Available without insecureSkipTLSVerify: kube-apiserver verified the adapter's certificate
            # against the CA the rotator injected, the one in Secret kedaorg-certs.
            ca_bundle = registration.read_api_service(APISERVICE).spec.ca_bundle
            if not ca_bundle or base64.b64decode(ca_bundle) != (certs / "ca.crt").read_bytes():
                raise KedaError(f"APIService {APISERVICE} has no caBundle from {CERT_SECRET}: {ca_bundle!r}")
            yield Keda(operator, adapter)
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
            ignore_not_found(registration.delete_api_service, APISERVICE)
            for p in (adapter, operator):
                if p is not None:
                    p.stop()
            volume.halt.set()
            if volume.is_alive():
                volume.join(5)
