"""The real monitoring chain (prometheus-operator, Prometheus, prometheus-adapter) by the local cluster.

``hack/build-controllers.sh`` builds, from their Go modules at pinned versions (versions there):
Prometheus (``github.com/prometheus/prometheus`` ``cmd/prometheus``, service discovery cut to
kubernetes_sd), prometheus-operator (``cmd/operator``, with its ``monitoring.coreos.com`` CRDs) and
prometheus-adapter (``sigs.k8s.io/prometheus-adapter`` ``cmd/adapter``). This module runs them:

- :func:`running_chart_monitoring` is the whole chain up to a running Prometheus for the serving pods:
  prometheus-operator, the chart's PodMonitor and PrometheusRule (``helm template``), a ``Prometheus``
  object, and the Prometheus binary running what the operator generated for it; ``mode: hpa``
  (tests/integration/test_hpa_controller.py, test_hpa_lws.py), ``mode: keda`` (test_keda_controller.py,
  test_keda_lws.py), the built-in autoscaler's ``metrics.source: prometheus``
  (test_autoscaling.py ``test_same_flow_through_a_real_prometheus``) and the KEDA triggers at zero
  pods (test_keda_scale_to_zero.py) read it. :func:`running_service_monitoring` is the same chain for
  the operator's own ``/metrics``: the chart's metrics Service and ServiceMonitor
  (:func:`chart_operator_metrics`), the Service's endpoint written as an EndpointSlice at an address of
  this host (:func:`endpoint_slice`; test_operator_scrape.py). Both go through :func:`running_monitors`.
- :func:`running_prometheus_operator` installs the CRDs and runs the real operator, which reconciles a
  ``Prometheus`` object into its configuration Secret ``prometheus-<name>`` (``prometheus.yaml.gz``,
  prometheus-operator v0.85.0 ``pkg/prometheus/common.go`` ``ConfigFilename``) and its rule ConfigMaps
  ``prometheus-<name>-rulefiles-<i>`` (``pkg/prometheus/server/rules.go``), from the PodMonitors,
  ServiceMonitors and PrometheusRules its selectors match.
- :func:`running_monitors` then plays the kubelet of the Prometheus pod that the operator's
  StatefulSet asks for (kwok runs no containers) and of its config-reloader sidecar (``$(VAR)``
  substitution, :func:`envsubst`): it runs the Prometheus binary with exactly the generated
  configuration, the rule ConfigMaps written where the pod mounts them
  (``RulesDir`` = ``/etc/prometheus/rules/<configmap>/``, ``pkg/prometheus/common.go``) — the one path
  rewritten, as a volume mount would place them.
- :func:`running_adapter` runs prometheus-adapter as an aggregated API server (``APIService``
  ``v1beta2.custom.metrics.k8s.io`` as prometheus-adapter v0.12.0 ``docs/walkthrough.md`` registers
  it) reached by kube-apiserver on this host's address through a Service's EndpointSlice (as
  tests/support/lws.py does for LWS's webhooks; the local control plane has
  ``--enable-aggregator-routing=true`` and the front-proxy flags, hack/localcluster/controlplane.py).
- :func:`running_hpa_controller` runs a second kube-controller-manager (the same binary as the
  control plane's) with only ``horizontal-pod-autoscaler-controller`` and a short sync period, so the
  shared control plane does not act on the HPAs other tests render, and the test need not wait the
  default 15 s per sync (kubernetes v1.34.4 ``pkg/controller/podautoscaler/config/v1alpha1/defaults.go``).
"""

from __future__ import annotations

import base64
import gzip
import re
import socket
import subprocess
import tempfile
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client
from kubernetes.client.rest import ApiException
from kubernetes.utils import parse_quantity
from localcluster import find_bin_dir

from trtllm_operator.emulator import Control
from trtllm_operator.emulator.model import ServingProfile

from .addons import (
    REPO_ROOT,
    apply,
    component_dirs,
    delete_crds,
    ignore_not_found,
    raw_items,
    wait_api_service_available,
    wait_established,
)
from .cluster import LocalCluster
from .host_service import host_address, host_endpoint_slice, host_service
from .ports import free_port
from .process import Process, start_process
from .prometheus import running_prometheus, scrape_targets
from .wait import wait_for

#: prometheus-operator v0.85.0 pkg/prometheus/common.go
RULES_DIR = "/etc/prometheus/rules"
CONFIG_FILENAME = "prometheus.yaml.gz"
#: prometheus-adapter v0.12.0 docs/walkthrough.md "The Registered API"
CUSTOM_METRICS_GROUP = "custom.metrics.k8s.io"
CUSTOM_METRICS_VERSION = "v1beta2"
ADAPTER_SERVICE = "prometheus-adapter"
CHART = REPO_ROOT / "charts" / "trtllm-operator"


class MonitoringError(RuntimeError):
    """A monitoring component could not be built, started or reached; the message says why."""


#: The Triton metrics port the operator renders on every serving pod (render.serving, "metrics"):
#: Prometheus scrapes ``<pod IP>:8002``, so emulated pods bind it on their own IPs.
TRITON_METRICS_PORT = 8002


def require_triton_metrics_port_free() -> None:
    """Fail at once when something listens on 127.0.0.1:8002: the emulated pods bind port 8002 on
    this session's own pod IPs (127.N.0.0/16), and a wildcard listener would answer the scrapes."""
    with socket.socket() as probe:
        if probe.connect_ex(("127.0.0.1", TRITON_METRICS_PORT)) == 0:
            raise AssertionError(
                f"something listens on 127.0.0.1:{TRITON_METRICS_PORT} (a wildcard listener?)"
            )


def triton_load(requests: int, kv_cache_utilization: float) -> Control:
    """The emulated Triton pods' load, pinned: ``requests`` active requests each and KV-cache
    utilization ``kv_cache_utilization`` (a fraction), for ``Fleet(control=...)`` / ``set_control``."""
    return Control(fixed={"requests": requests, "kvCacheUtilization": kv_cache_utilization})


def active_per_pod(control: Control, profile: ServingProfile) -> float:
    """One emulated pod's active-request utilization under ``control`` (:func:`triton_load`), from the
    emulator's load model, not the operator's PromQL: min(requests, max_batch_size) / max_batch_size
    (the emulator reports ``profile.max_batch_size`` as Triton's ``request_type="max"``)."""
    return float(min(control.fixed["requests"], profile.max_batch_size) / profile.max_batch_size)


def adapter_values(control: Control, profile: ServingProfile) -> dict[str, Decimal]:
    """One emulated serving pod's values of the two ``mode: hpa`` Pods metrics under ``control``, from
    the emulator's load model (not the operator's PromQL), rounded to milli-units as prometheus-adapter
    serves them and the HPA controller reports them: active-request utilization
    (:func:`active_per_pod`) and KV-cache utilization round(k · kv_blocks) / kv_blocks."""
    kv = control.fixed["kvCacheUtilization"]
    kv_ratio = round(kv * profile.kv_blocks) / profile.kv_blocks
    return {
        "trtllm_active_request_utilization": Decimal(round(active_per_pod(control, profile) * 1000)) / 1000,
        "trtllm_kv_cache_utilization": Decimal(round(kv_ratio * 1000)) / 1000,
    }


# ---- prometheus-operator -----------------------------------------------------------------------
@contextmanager
def running_prometheus_operator(cluster: LocalCluster, namespace: str) -> Iterator[Process]:
    """The monitoring.coreos.com CRDs installed and the real prometheus-operator running, watching
    ``namespace``; on exit it is stopped and the CRDs removed (with every object of them)."""
    home = component_dirs("prometheus-operator", error=MonitoringError)["prometheus-operator"]
    crd_files = sorted((home / "config" / "crd").glob("*.yaml"))
    # BaseLoader: the CRDs' schemas hold a bare `=` (an enum value), which YAML 1.1's value tag makes
    # SafeLoader refuse; only the names are read here, kubectl applies the files as they are.
    names = [
        d["metadata"]["name"]
        for f in crd_files
        for d in yaml.load_all(f.read_text(), Loader=yaml.BaseLoader)
        if d
    ]
    work = Path(tempfile.mkdtemp(prefix="prometheus-operator-", dir=cluster.work_dir))
    operator: Process | None = None
    try:
        for f in crd_files:
            cluster.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(f))
        wait_established(cluster, names)
        operator = start_process(
            "prometheus-operator",
            [
                str(home / "bin" / "operator"),
                f"--namespaces={namespace}",
                f"--web.listen-address=127.0.0.1:{free_port()}",
                "--log-level=info",
            ],
            work,
            # pkg/k8sutil/k8sutil.go NewClusterConfig: the KUBECONFIG environment variable
            env={"KUBECONFIG": str(cluster.kubeconfig)},
        )
        yield operator
    finally:
        if operator is not None:
            operator.stop()
        delete_crds(cluster, names)


def _chart_template(
    namespace: str, work: Path, sets: list[str], show_only: list[str]
) -> list[dict[str, Any]]:
    """The chart's ``show_only`` templates as ``helm template`` renders them (release ``rel`` in
    ``namespace``, Kubernetes 1.34.4, each of ``sets`` a ``--set``; helm's homes under ``work/helm``)."""
    env = {
        "PATH": "/usr/bin:/bin",
        **{k: str(work / "helm") for k in ("HELM_CACHE_HOME", "HELM_CONFIG_HOME", "HELM_DATA_HOME")},
    }
    out = subprocess.run(
        [
            str(find_bin_dir() / "helm"),
            "template",
            "rel",
            str(CHART),
            "--namespace",
            namespace,
            "--kube-version",
            "1.34.4",
            *(a for s in sets for a in ("--set", s)),
            *(a for t in show_only for a in ("--show-only", t)),
        ],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    ).stdout
    return [d for d in yaml.safe_load_all(out) if d]


def chart_monitoring(namespace: str, labels: dict[str, str], work: Path) -> list[dict[str, Any]]:
    """The chart's PodMonitor and PrometheusRule (``helm template``), scraping every second and
    labelled ``labels`` (``servingPodMonitor.labels``, ``prometheusRule.labels``)."""
    sets = [
        "servingPodMonitor.enabled=true",
        "servingPodMonitor.interval=1s",
        f"servingPodMonitor.namespaces[0]={namespace}",
        "prometheusRule.enabled=true",
        *(f"servingPodMonitor.labels.{k}={v}" for k, v in labels.items()),
        *(f"prometheusRule.labels.{k}={v}" for k, v in labels.items()),
    ]
    docs = _chart_template(
        namespace, work, sets, ["templates/servingpodmonitor.yaml", "templates/prometheusrule.yaml"]
    )
    if sorted(d["kind"] for d in docs) != ["PodMonitor", "PrometheusRule"]:
        raise MonitoringError(f"helm template gave no PodMonitor and PrometheusRule: {docs}")
    return docs


def chart_operator_metrics(
    namespace: str, labels: dict[str, str], work: Path, sets: list[str]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The operator's metrics Service and its ServiceMonitor as the chart renders them with
    ``metrics.serviceMonitor.enabled``, the ServiceMonitor labelled ``labels``
    (``metrics.serviceMonitor.labels``) and each of ``sets`` a ``--set`` (``helm template``, release in
    ``namespace``)."""
    sets = [
        "metrics.serviceMonitor.enabled=true",
        *(f"metrics.serviceMonitor.labels.{k}={v}" for k, v in labels.items()),
        *sets,
    ]
    docs = _chart_template(namespace, work, sets, ["templates/service.yaml", "templates/servicemonitor.yaml"])
    by_kind = {d["kind"]: d for d in docs}
    if sorted(by_kind) != ["Service", "ServiceMonitor"] or len(docs) != 2:
        raise MonitoringError(f"helm template gave no metrics Service and ServiceMonitor: {docs}")
    return by_kind["Service"], by_kind["ServiceMonitor"]


def endpoint_slice(service: dict[str, Any], host: str, port: int) -> dict[str, Any]:
    """The EndpointSlice the EndpointSlice controller would write for ``service`` if its one port's
    target listened at ``host``:``port``: labelled ``kubernetes.io/service-name``, its port named as the
    Service's. The local control plane runs no EndpointSlice controller (kwok pod IPs are loopback
    addresses, which the API server refuses in EndpointSlices: hack/localcluster/controlplane.py
    ``CONTROLLERS``), so a test writes it, at a non-loopback address of this host
    (:func:`support.host_service.host_address`), marked as not the controller's."""
    (svc_port,) = service["spec"]["ports"]
    meta = service["metadata"]
    return host_endpoint_slice(
        meta["name"], meta["namespace"], port_name=svc_port["name"], host=host, host_port=port
    )


def prometheus_object(
    name: str, namespace: str, labels: dict[str, str], cluster: LocalCluster, token_file: Path, ca_file: Path
) -> dict[str, Any]:
    """A ``Prometheus`` (prometheus-operator v0.85.0 ``pkg/apis/monitoring/v1/prometheus_types.go``)
    selecting the chart's PodMonitor, ServiceMonitor and PrometheusRule by ``labels``, evaluating rules
    every second. ServiceMonitors are discovered through EndpointSlices (``serviceDiscoveryRole``; unset,
    the operator generates the ``endpoints`` role, and v1 Endpoints are deprecated since Kubernetes 1.33)."""
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "Prometheus",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "version": "v3.16.0",  # what hack/build-controllers.sh builds (module v0.316.0)
            "replicas": 1,
            "podMonitorSelector": {"matchLabels": labels},
            "serviceMonitorSelector": {"matchLabels": labels},
            "serviceDiscoveryRole": "EndpointSlice",
            "ruleSelector": {"matchLabels": labels},
            "scrapeInterval": "1s",
            "evaluationInterval": "1s",
            # No external labels: prometheus_replica's "$(POD_NAME)" is expanded by the config
            # reloader sidecar, which this harness does not run (empty name = no label, CRD docs).
            "replicaExternalLabelName": "",
            "prometheusExternalLabelName": "",
            # kubernetes_sd against this API server (api_server, authorization, tls_config in each
            # kubernetes_sd_config: pkg/prometheus/promcfg.go generateK8SSDConfig)
            "apiserverConfig": {
                "host": cluster.server,
                "authorization": {"credentialsFile": str(token_file)},
                "tlsConfig": {"caFile": str(ca_file)},
            },
        },
    }


@contextmanager
def running_chart_monitoring(cluster: LocalCluster, namespace: str, name: str, work: Path) -> Iterator[str]:
    """The chain from the chart to a running Prometheus, for the serving pods of ``namespace``: the
    chart's PodMonitor and PrometheusRule (:func:`chart_monitoring`) through :func:`running_monitors`.
    Yields Prometheus's URL."""
    labels = {"prometheus": name}
    work.mkdir(parents=True, exist_ok=True)
    docs = chart_monitoring(namespace, labels, work)
    pod_monitor = next(d["metadata"]["name"] for d in docs if d["kind"] == "PodMonitor")
    with running_monitors(
        cluster, namespace, name, work, docs, f"podMonitor/{namespace}/{pod_monitor}/"
    ) as url:
        yield url


def podmonitor_scraped(url: str, namespace: str, pods: set[str]) -> set[str] | None:
    """The pods of ``namespace`` that Prometheus at ``url`` scrapes through a PodMonitor (its jobs
    ``podMonitor/<namespace>/<name>/<endpoint>``), once its discovery has seen every one of ``pods``
    (scraped, or dropped by the PodMonitor's relabelling): ``None`` before that, when a pod missing from
    the scraped set would prove nothing."""
    data = scrape_targets(url)
    mine = [
        t
        for t in data["activeTargets"] + data["droppedTargets"]
        if t["scrapePool"].startswith(f"podMonitor/{namespace}/")
    ]
    seen = {t["discoveredLabels"].get("__meta_kubernetes_pod_name") for t in mine}
    if not seen >= pods:
        return None
    return {t["labels"]["pod"] for t in data["activeTargets"] if t in mine}


@contextmanager
def running_monitors(
    cluster: LocalCluster, namespace: str, name: str, work: Path, docs: list[dict[str, Any]], want_job: str
) -> Iterator[str]:
    """prometheus-operator (:func:`running_prometheus_operator`) with the monitoring objects ``docs``
    (PodMonitors, ServiceMonitors, PrometheusRules, labelled ``prometheus: <name>``) and a
    ``Prometheus`` ``name`` selecting them (:func:`prometheus_object`); once its generated
    configuration has a job named ``want_job``…, the Prometheus binary playing that object's pod with
    exactly that configuration (:func:`generated_config`, :func:`reloader_env`,
    :func:`mounted_config`). Yields Prometheus's URL."""
    labels = {"prometheus": name}
    home = component_dirs("prometheus", error=MonitoringError)["prometheus"]
    custom = client.CustomObjectsApi(cluster.api)
    # The token and CA the generated kubernetes_sd_configs read (prometheus_object's apiserverConfig).
    work.mkdir(parents=True, exist_ok=True)
    token_file, ca_file = work / "token", work / "ca.crt"
    token_file.write_text(cluster.control_plane.token)
    ca_file.write_bytes((cluster.control_plane.pki_dir / "apiserver.crt").read_bytes())
    plurals = {
        "PodMonitor": "podmonitors",
        "ServiceMonitor": "servicemonitors",
        "PrometheusRule": "prometheusrules",
    }
    with running_prometheus_operator(cluster, namespace):
        for doc in docs:
            custom.create_namespaced_custom_object(
                "monitoring.coreos.com", "v1", namespace, plurals[doc["kind"]], doc
            )
        custom.create_namespaced_custom_object(
            "monitoring.coreos.com",
            "v1",
            namespace,
            "prometheuses",
            prometheus_object(name, namespace, labels, cluster, token_file, ca_file),
        )
        generated = generated_config(cluster, namespace, name, want_job=want_job)
        env = reloader_env(cluster, namespace, name)
        config = mounted_config(generated, work / "prometheus", env)
        with running_prometheus(config, work, binary=str(home / "bin" / "prometheus")) as url:
            yield url


@contextmanager
def running_service_monitoring(
    cluster: LocalCluster,
    namespace: str,
    name: str,
    work: Path,
    *,
    service: dict[str, Any],
    monitor: dict[str, Any],
    host: str,
    port: int,
) -> Iterator[str]:
    """``service`` and ``monitor`` (a ServiceMonitor selecting it, labelled ``prometheus: <name>``)
    created in ``namespace``, the Service's endpoint at ``host``:``port`` (:func:`endpoint_slice`), and
    Prometheus configured by prometheus-operator from the monitor (:func:`running_monitors`). Yields
    Prometheus's URL."""
    core = client.CoreV1Api(cluster.api)
    core.create_namespaced_service(namespace, service)
    client.DiscoveryV1Api(cluster.api).create_namespaced_endpoint_slice(
        namespace, endpoint_slice(service, host, port)
    )
    job = f"serviceMonitor/{namespace}/{monitor['metadata']['name']}/"
    with running_monitors(cluster, namespace, name, work, [monitor], job) as url:
        yield url


@dataclass
class GeneratedConfig:
    """What prometheus-operator generated for one ``Prometheus``: the configuration and the rule files
    (ConfigMap name → file name → content)."""

    config: dict[str, Any]
    rule_files: dict[str, dict[str, str]]


def generated_config(
    cluster: LocalCluster, namespace: str, name: str, *, want_job: str, timeout: float = 60.0
) -> GeneratedConfig:
    """Wait until the operator's configuration Secret for Prometheus ``name`` has a scrape job whose
    name starts with ``want_job`` and its rule ConfigMaps exist; return both."""
    core = client.CoreV1Api(cluster.api)

    def config() -> dict[str, Any] | None:
        try:
            secret = core.read_namespaced_secret(f"prometheus-{name}", namespace)
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise
        raw = (secret.data or {}).get(CONFIG_FILENAME)
        if not raw:
            return None
        doc: dict[str, Any] = yaml.safe_load(gzip.decompress(base64.b64decode(raw)))
        jobs = [j["job_name"] for j in doc.get("scrape_configs") or []]
        return doc if any(j.startswith(want_job) for j in jobs) else None

    doc = wait_for(config, timeout, interval=0.5, desc=f"prometheus-operator's config with job {want_job}*")
    rule_files: dict[str, dict[str, str]] = {}
    for pattern in doc.get("rule_files") or []:
        # RulesDir/<configmap>/*.yaml (pkg/prometheus/server/rules.go, common.go)
        cm_name = Path(pattern).parent.name
        if not pattern.startswith(f"{RULES_DIR}/"):
            raise MonitoringError(f"rule_files entry {pattern!r} is not under {RULES_DIR}")
        cm = wait_for(
            lambda n=cm_name: _read_configmap(core, namespace, n), timeout, desc=f"ConfigMap {cm_name}"
        )
        rule_files[cm_name] = dict(cm.data or {})
    return GeneratedConfig(doc, rule_files)


def _read_configmap(core: client.CoreV1Api, namespace: str, name: str) -> Any:
    try:
        return core.read_namespaced_config_map(name, namespace)
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise


def reloader_env(cluster: LocalCluster, namespace: str, name: str, timeout: float = 60.0) -> dict[str, str]:
    """The environment of the ``config-reloader`` container of the operator's StatefulSet
    ``prometheus-<name>``, as the kubelet resolves it for pod ``prometheus-<name>-0``: plain values
    (``SHARD``, pkg/operator/config_reloader.go ``ShardEnvVar``) and ``fieldRef: metadata.name``."""
    apps = client.AppsV1Api(cluster.api)
    sts = wait_for(
        lambda: apps.read_namespaced_stateful_set(f"prometheus-{name}", namespace),
        timeout,
        desc=f"StatefulSet prometheus-{name}",
    )
    pod_name = f"prometheus-{name}-0"
    env: dict[str, str] = {}
    for c in sts.spec.template.spec.containers:
        if c.name != "config-reloader":
            continue
        for e in c.env or []:
            if e.value is not None:
                env[e.name] = e.value
            elif (
                e.value_from
                and e.value_from.field_ref
                and e.value_from.field_ref.field_path == "metadata.name"
            ):
                env[e.name] = pod_name
    if not env:
        raise MonitoringError(f"StatefulSet prometheus-{name} has no config-reloader environment: {sts.spec}")
    return env


def envsubst(text: str, env: dict[str, str]) -> str:
    """``$(VAR)`` replaced by ``env[VAR]``, what prometheus-config-reloader does to the generated file
    before Prometheus reads it (prometheus-operator v0.85.0 cmd/prometheus-config-reloader
    ``--config-envsubst-file``; the generated sharding rule is ``regex: $(SHARD);|.+;.+``). An unknown
    variable is an error, not left in place."""

    def one(m: re.Match[str]) -> str:
        if m.group(1) not in env:
            raise MonitoringError(f"the generated configuration uses $({m.group(1)}), not in {sorted(env)}")
        return env[m.group(1)]

    return re.sub(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)", one, text)


def mounted_config(generated: GeneratedConfig, work: Path, env: dict[str, str]) -> dict[str, Any]:
    """The generated configuration as the Prometheus pod sees it: ``$(VAR)`` substituted from the
    config reloader's ``env`` (:func:`envsubst`), the rule ConfigMaps written under
    ``work/rules/<configmap>/`` and ``rule_files`` pointing there (the pod's volume mounts). Fails if
    the configuration names any other path under /etc/prometheus (a mount this harness does not play)."""
    config: dict[str, Any] = yaml.safe_load(envsubst(yaml.safe_dump(generated.config), env))
    rules_root = work / "rules"
    for cm_name, files in generated.rule_files.items():
        d = rules_root / cm_name
        d.mkdir(parents=True, exist_ok=True)
        for fname, text in files.items():
            (d / fname).write_text(text)
    config["rule_files"] = [
        str(rules_root / Path(p).relative_to(RULES_DIR)) for p in generated.config.get("rule_files") or []
    ]
    leftover = "/etc/prometheus" in yaml.safe_dump(config)
    if leftover:
        raise MonitoringError(
            "the generated configuration names a path under /etc/prometheus besides the rule files: "
            + yaml.safe_dump(config)
        )
    return config


# ---- prometheus-adapter -------------------------------------------------------------------------
@contextmanager
def running_adapter(
    cluster: LocalCluster,
    namespace: str,
    prometheus_url: str,
    rules: list[dict[str, Any]],
    timeout: float = 120.0,
) -> Iterator[Process]:
    """prometheus-adapter serving ``rules`` (its config file's ``rules`` list, prometheus-adapter
    v0.12.0 docs/config.md) from ``prometheus_url`` as ``custom.metrics.k8s.io/v1beta2``, registered
    with the aggregator; yields once the APIService is Available. On exit the APIService goes first
    (an unavailable aggregated API would fail every later discovery, namespace deletion's included),
    then the adapter and its Service."""
    home = component_dirs("prometheus-adapter", error=MonitoringError)["prometheus-adapter"]
    work = Path(tempfile.mkdtemp(prefix="prometheus-adapter-", dir=cluster.work_dir))
    (work / "config.yaml").write_text(yaml.safe_dump({"rules": rules}))
    host = host_address()
    port = free_port(host)  # the adapter binds it itself: support.ports' residual race
    kc = str(cluster.kubeconfig)
    registration = client.ApiregistrationV1Api(cluster.api)
    apiservice = f"{CUSTOM_METRICS_VERSION}.{CUSTOM_METRICS_GROUP}"
    adapter: Process | None = None
    try:
        apply(
            cluster,
            [
                *host_service(ADAPTER_SERVICE, namespace, port=443, host=host, host_port=port),
            ],
        )
        adapter = start_process(
            "prometheus-adapter",
            [
                str(home / "bin" / "adapter"),
                f"--bind-address={host}",
                f"--secure-port={port}",
                f"--cert-dir={work / 'certs'}",  # self-signed; the APIService skips TLS verification
                f"--config={work / 'config.yaml'}",
                f"--prometheus-url={prometheus_url}/",
                "--metrics-relist-interval=2s",
                f"--lister-kubeconfig={kc}",
                f"--authentication-kubeconfig={kc}",
                f"--authorization-kubeconfig={kc}",
                "--v=2",
            ],
            work,
        )
        # docs/walkthrough.md's APIService (insecureSkipTLSVerify, as deploy/manifests/api-service.yaml)
        apply(
            cluster,
            [
                {
                    "apiVersion": "apiregistration.k8s.io/v1",
                    "kind": "APIService",
                    "metadata": {"name": apiservice},
                    "spec": {
                        "group": CUSTOM_METRICS_GROUP,
                        "version": CUSTOM_METRICS_VERSION,
                        "groupPriorityMinimum": 100,
                        "versionPriority": 100,
                        "insecureSkipTLSVerify": True,
                        "service": {"name": ADAPTER_SERVICE, "namespace": namespace, "port": 443},
                    },
                }
            ],
        )

        assert adapter is not None
        wait_api_service_available(registration, apiservice, timeout, [adapter], MonitoringError)
        yield adapter
    finally:
        ignore_not_found(registration.delete_api_service, apiservice)
        if adapter is not None:
            adapter.stop()


def custom_metric(cluster: LocalCluster, namespace: str, metric: str, selector: str) -> list[dict[str, Any]]:
    """``items`` of ``GET /apis/custom.metrics.k8s.io/v1beta2/namespaces/<ns>/pods/*/<metric>`` (what
    the HPA controller asks for a Pods metric)."""
    return raw_items(
        cluster,
        f"/apis/{CUSTOM_METRICS_GROUP}/{CUSTOM_METRICS_VERSION}/namespaces/{namespace}/pods/*/{metric}"
        f"?labelSelector={urllib.parse.quote(selector, safe='')}",
    )


# ---- the HPA controller -------------------------------------------------------------------------
def hpa_pods_averages(hpa: Any) -> dict[str, Decimal]:
    """An HPA's (client model) ``status.currentMetrics`` of type Pods: metric name → current
    ``averageValue``, the mean of the values the custom-metrics API served for the pods that the scale
    subresource's ``status.selector`` selects, over those with a value (kubernetes v1.34.4
    ``pkg/controller/podautoscaler/replica_calculator.go`` ``GetMetricReplicas`` →
    ``calcPlainMetricReplicas``; ``metrics/utilization.go`` ``GetMetricUsageRatio``)."""
    return {
        m.pods.metric.name: Decimal(str(parse_quantity(m.pods.current.average_value)))
        for m in hpa.status.current_metrics or []
        if m.type == "Pods" and m.pods and m.pods.current
    }


@contextmanager
def running_hpa_controller(cluster: LocalCluster, sync_period: str = "1s") -> Iterator[Process]:
    """kube-controller-manager running only ``horizontal-pod-autoscaler-controller`` (canonical name,
    kubernetes v1.34.4 cmd/kube-controller-manager/names), every ``sync_period``."""
    work = Path(tempfile.mkdtemp(prefix="hpa-controller-", dir=cluster.work_dir))
    proc = start_process(
        "kube-controller-manager-hpa",
        [
            str(cluster.bin_dir / "kube-controller-manager"),
            f"--kubeconfig={cluster.kubeconfig}",
            "--leader-elect=false",
            "--bind-address=127.0.0.1",
            f"--secure-port={free_port()}",
            "--controllers=horizontal-pod-autoscaler-controller",
            f"--horizontal-pod-autoscaler-sync-period={sync_period}",
        ],
        work,
    )
    try:
        yield proc
    finally:
        proc.stop()
