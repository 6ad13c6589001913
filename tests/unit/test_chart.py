"""The Helm chart (charts/trtllm-operator), rendered by the real helm and checked against the
Kubernetes 1.34 OpenAPI schemas (kubernetes-validate), the `restricted` Pod Security Standard, the
operator's own command line and settings, and least-privilege RBAC.

Needs the bundled helm (hack/build-testbin.sh); skipped when it is not built. The real PodSecurity
admission and the RBAC of the installed chart are exercised by tests/e2e.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml
from localcluster import ClusterError, find_bin_dir
from support.metrics_auth import METRICS_READER_RULE
from support.serving import serving_params

from trtllm_operator.api.wire import FRONTEND_TRTLLM_SERVE, LABEL_FRONTEND
from trtllm_operator.cli import build_parser
from trtllm_operator.commands._schema import _strict
from trtllm_operator.commands.run import settings_from_args
from trtllm_operator.decide.serving_params import ServerSettings
from trtllm_operator.metrics.operator_metrics import AUTOSCALER_DESIRED_REPLICAS
from trtllm_operator.render.deployment import desired_deployment
from trtllm_operator.render.leaderworkerset import desired_leaderworkerset
from trtllm_operator.render.model_repository import desired_model_repository
from trtllm_operator.render.serving import METRICS_PORT, TRTLLM_SERVE_METRICS_PATH
from trtllm_operator.settings import ENV_PREFIX, Settings, env_names

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "charts" / "trtllm-operator"
K8S_VERSION = "1.34.4"
SECURITY_DOC = REPO / "docs" / "security.md"

#: Value sets rendered by every test (name → helm --set arguments).
VALUE_SETS: dict[str, list[str]] = {
    "default": [],  # watches the release's namespace only (#24: namespaced is the default)
    "cluster-wide": ["--set", "clusterWide=true"],
    "namespaced": ["--set", "watchNamespaces={team-a,team-b}"],
    "everything": [
        "--set",
        "watchNamespaces={team-a}",
        "--set",
        "metrics.serviceMonitor.enabled=true",
        "--set",
        "prometheusRule.enabled=true",
        "--set",
        "grafanaDashboard.enabled=true",
        "--set",
        "servingNetworkPolicy.clientNamespaces={gateway}",
        "--set",
        "servingPodMonitor.enabled=true",
        "--set",
        "metrics.certSecret=operator-metrics-tls",
    ],
    "pod-monitor-all-namespaces": [
        "--set",
        "clusterWide=true",
        "--set",
        "servingPodMonitor.enabled=true",
        "--set",
        "servingPodMonitor.interval=5s",
    ],
    "peering": ["--set", "replicaCount=2", "--set", "settings.logFormat=text"],
    "no-service": ["--set", "metrics.service.enabled=false", "--set", "serviceAccount.name=op"],
    # the GPU catalog ConfigMap in the release's namespace, which is not watched
    "gpu-catalog": ["--set", "watchNamespaces={team-a}", "--set", "settings.gpuCatalogConfigmap=gpus"],
    "custom-builder": [
        "--set",
        "builder.image=registry.example/engine-builder:1.2.0",
        "--set",
        "builder.delivery=false",
        "--set",
        "builder.deliveryImage=mirror.example/trtllm-operator:0.1.0",
    ],
}
#: Kinds from CustomResourceDefinitions: no Kubernetes schema; validated against the upstream CRDs
#: (prometheus-operator v0.85.0, tests/fixtures/upstream/prometheus-operator-v0.85.0/README.md).
CRD_KINDS = {"ServiceMonitor", "PrometheusRule", "PodMonitor"}
UPSTREAM_CRDS = REPO / "tests" / "fixtures" / "upstream" / "prometheus-operator-v0.85.0"
LLM_GROUP = "llm.trtllm-operator.dev"


# ----------------------------------------------------------------------------- helm
@pytest.fixture(scope="module")
def helm_bin() -> Path:
    try:
        path = find_bin_dir() / "helm"
    except ClusterError as exc:
        pytest.skip(f"helm not built: {exc}")
    if not path.exists():
        pytest.skip(f"helm not built at {path} (run hack/build-testbin.sh)")
    return path


@pytest.fixture(scope="module")
def helm_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    home = tmp_path_factory.mktemp("helm")
    return {
        **os.environ,
        "HELM_CACHE_HOME": str(home / "cache"),
        "HELM_CONFIG_HOME": str(home / "config"),
        "HELM_DATA_HOME": str(home / "data"),
    }


def run_helm(helm: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(helm), *args], capture_output=True, text=True, env=env, timeout=60, check=False
    )


def render(helm: Path, env: dict[str, str], values: list[str], *extra: str) -> list[dict[str, Any]]:
    """``helm template`` (namespace ``trtllm-system``) → the rendered objects."""
    proc = run_helm(
        helm,
        env,
        "template",
        "rel",
        str(CHART),
        "--namespace",
        "trtllm-system",
        "--kube-version",
        K8S_VERSION,
        *values,
        *extra,
    )
    assert proc.returncode == 0, proc.stderr
    return [doc for doc in yaml.safe_load_all(proc.stdout) if doc]


@pytest.fixture(scope="module")
def rendered(helm_bin: Path, helm_env: dict[str, str]) -> dict[str, list[dict[str, Any]]]:
    return {name: render(helm_bin, helm_env, values) for name, values in VALUE_SETS.items()}


def only(objs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [o for o in objs if o["kind"] == kind]


# ----------------------------------------------------------------------------- lint and schemas
@pytest.mark.parametrize("value_set", sorted(VALUE_SETS))
def test_helm_lint_strict(helm_bin: Path, helm_env: dict[str, str], value_set: str) -> None:
    proc = run_helm(
        helm_bin,
        helm_env,
        "lint",
        "--strict",
        str(CHART),
        "--kube-version",
        K8S_VERSION,
        *VALUE_SETS[value_set],
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "0 chart(s) failed" in proc.stdout


def test_values_schema_rejects_unknown_keys_and_bad_values(helm_bin: Path, helm_env: dict[str, str]) -> None:
    for bad, field in (
        (["--set", "watchNamespace=a"], "watchNamespace"),
        (["--set", "watchNamespaces={Not_A_Namespace}"], "watchNamespaces"),
        (["--set", "settings.logFormat=xml"], "logFormat"),
        (["--set", "clusterWide=true", "--set", "watchNamespaces={team-a}"], "leave watchNamespaces empty"),
        (["--set", "metrics.auth=yes"], "auth"),
        (["--set", "servingNetworkPolicy.namespaces={team-a}"], "namespaces"),
        (["--set", "servingNetworkPolicy.clientNamespaces={Bad_Name}"], "clientNamespaces"),
        (["--set", "settings.gpuCatalogConfigmap=Bad_Name"], "gpuCatalogConfigmap"),
    ):
        proc = run_helm(
            helm_bin, helm_env, "template", "rel", str(CHART), "--kube-version", K8S_VERSION, *bad
        )
        assert proc.returncode != 0, f"{bad} was accepted"
        assert field in proc.stderr, proc.stderr


#: The NetworkPolicy values of the previous chart (release 3898a0c, charts/trtllm-operator/values.yaml
#: ``servingNetworkPolicy``), which this chart does not have.
PREVIOUS_POLICY_VALUES = {
    "namespaces": "{team-a}",
    "clientPodSelector.matchLabels.trtllm-operator\\.dev/client": "true",
    "monitoringNamespaceSelector.matchLabels.kubernetes\\.io/metadata\\.name": "monitoring",
}


@pytest.mark.parametrize("key", sorted(PREVIOUS_POLICY_VALUES))
def test_a_previous_charts_policy_value_is_refused_naming_both_fixes(
    helm_bin: Path, helm_env: dict[str, str], key: str
) -> None:
    """Set by a user (the previous docs/security.md advised it) or brought by ``--reuse-values``:
    refused, naming the upgrade flag and how to remove the value; removed (null), the render passes."""
    top = key.split(".", 1)[0]
    template = ("template", "rel", str(CHART), "--kube-version", K8S_VERSION)
    proc = run_helm(
        helm_bin, helm_env, *template, "--set", f"servingNetworkPolicy.{key}={PREVIOUS_POLICY_VALUES[key]}"
    )
    assert proc.returncode != 0, f"{key} was accepted"
    assert f"servingNetworkPolicy.{top} is a value of the previous chart" in proc.stderr, proc.stderr
    assert "--reset-then-reuse-values" in proc.stderr
    assert f"--set servingNetworkPolicy.{top}=null" in proc.stderr
    removed = run_helm(helm_bin, helm_env, *template, "--set", f"servingNetworkPolicy.{top}=null")
    assert removed.returncode == 0, removed.stderr


@pytest.mark.parametrize("value_set", sorted(VALUE_SETS))
def test_rendered_objects_validate_against_kubernetes_schemas(
    rendered: dict[str, list[dict[str, Any]]], value_set: str
) -> None:
    objs = rendered[value_set]
    assert {"Deployment", "ServiceAccount"} <= {o["kind"] for o in objs} or value_set == "no-service"
    validated = 0
    for obj in objs:
        if obj["kind"] in CRD_KINDS:
            continue
        kubernetes_validate.validate(obj, K8S_VERSION, strict=True)
        validated += 1
    assert validated >= 4


def test_a_schema_violation_is_caught(rendered: dict[str, list[dict[str, Any]]]) -> None:
    """The validation above can fail: a misspelled field in the rendered Deployment is rejected."""
    (dep,) = only(rendered["default"], "Deployment")
    dep["spec"]["template"]["spec"]["containers"][0]["securityContex"] = {}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(dep, K8S_VERSION, strict=True)


def test_chart_crds_are_the_generated_crds_byte_for_byte(helm_bin: Path, helm_env: dict[str, str]) -> None:
    top = {p.name: p.read_bytes() for p in (REPO / "crds").glob("*.yaml")}
    chart = {p.name: p.read_bytes() for p in (CHART / "crds").glob("*.yaml")}
    assert (
        set(top)
        == set(chart)
        == {
            f"{LLM_GROUP}_llmengines.yaml",
            f"{LLM_GROUP}_llmdeployments.yaml",
        }
    )
    for name, content in top.items():
        assert chart[name] == content, f"charts/trtllm-operator/crds/{name} differs from crds/{name}"
    # helm ships them (--include-crds) and they are valid CustomResourceDefinitions
    crds = only(render(helm_bin, helm_env, [], "--include-crds"), "CustomResourceDefinition")
    assert {c["metadata"]["name"] for c in crds} == {f"llmengines.{LLM_GROUP}", f"llmdeployments.{LLM_GROUP}"}
    for crd in crds:
        kubernetes_validate.validate(crd, K8S_VERSION, strict=True)


# ----------------------------------------------------------------------------- CRD-based kinds
def upstream_schema(kind: str) -> dict[str, Any]:
    """The kind's ``openAPIV3Schema`` from prometheus-operator's CRD, strict about unknown fields
    (the API server would prune them silently: a typo would vanish)."""
    crd = yaml.safe_load((UPSTREAM_CRDS / f"monitoring.coreos.com_{kind.lower()}s.yaml").read_text())
    (version,) = (v for v in crd["spec"]["versions"] if v["name"] == "v1")
    schema: dict[str, Any] = _strict(version["schema"]["openAPIV3Schema"])
    return schema


@pytest.mark.parametrize("value_set", sorted(VALUE_SETS))
def test_monitoring_objects_validate_against_the_upstream_crds(
    rendered: dict[str, list[dict[str, Any]]], value_set: str
) -> None:
    for obj in rendered[value_set]:
        if obj["kind"] in CRD_KINDS:
            assert obj["apiVersion"] == "monitoring.coreos.com/v1"
            jsonschema.Draft7Validator(upstream_schema(obj["kind"])).validate(obj)
    (monitor,) = only(rendered["everything"], "PodMonitor")
    broken = {**monitor, "spec": {**monitor["spec"], "podMetricEndpoints": []}}  # a typo is caught
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft7Validator(upstream_schema("PodMonitor")).validate(broken)


def serving_pods() -> dict[str, dict[str, Any]]:
    """Pod templates the operator renders: a one-node replica's pod, a LeaderWorkerSet's leader and
    worker (trtllm_operator.render, the same code the controller runs)."""
    base = serving_params(tensor_parallelism=2)
    one = replace(base, gpus_per_node=8)
    multi = replace(base, gpus_per_node=1)
    lws = desired_leaderworkerset(multi, desired_model_repository(multi))["spec"]["leaderWorkerTemplate"]
    return {
        "deployment": desired_deployment(one, desired_model_repository(one))["spec"]["template"],
        "lws-leader": lws["leaderTemplate"],
        "lws-worker": lws["workerTemplate"],
    }


def test_serving_pod_monitor_scrapes_the_pods_that_serve(rendered: dict[str, list[dict[str, Any]]]) -> None:
    """Audit B6: the chart ships the scrape configuration of the Triton pods. prometheus-operator
    v0.85.0 (``pkg/prometheus/promcfg.go`` ``generatePodMonitorConfig``) keeps a target when the
    pod's labels match ``selector.matchLabels`` and the container port's name is the endpoint's
    ``port``; ``namespaceSelector`` picks the namespaces (``any`` = all). Every serving pod the
    operator renders matches; LeaderWorkerSet workers declare no ``metrics`` port (their ranks
    serve nothing), so only the leaders are scraped."""
    (monitor,) = only(rendered["everything"], "PodMonitor")
    assert monitor["metadata"]["namespace"] == "trtllm-system"
    assert monitor["spec"]["namespaceSelector"] == {"matchNames": ["team-a"]}  # watchNamespaces
    (anywhere,) = only(rendered["pod-monitor-all-namespaces"], "PodMonitor")
    assert anywhere["spec"]["namespaceSelector"] == {"any": True}
    endpoint, openai, trtllm_serve = anywhere["spec"]["podMetricsEndpoints"]
    assert endpoint == {"port": "metrics", "path": "/metrics", "interval": "5s"}
    # Prometheus' Kubernetes SD names a pod label __meta_kubernetes_pod_label_<name, non-alphanumerics
    # as _> (Prometheus docs, kubernetes_sd_config "pod" role); a missing label reads as ""
    source = "__meta_kubernetes_pod_label_" + re.sub(r"[^A-Za-z0-9_]", "_", LABEL_FRONTEND)
    by_frontend = [{"sourceLabels": [source], "regex": FRONTEND_TRTLLM_SERVE}]
    # pods of the OpenAI frontend (spec.server.api openai/both): /metrics on the "openai" port,
    # except trtllm-serve's (pytorch backend), whose /metrics is JSON: /prometheus/metrics for them
    assert openai == {
        "port": "openai",
        "path": "/metrics",
        "interval": "5s",
        "relabelings": [{**by_frontend[0], "action": "drop"}],
    }
    assert trtllm_serve == {
        "port": "openai",
        "path": TRTLLM_SERVE_METRICS_PATH,
        "interval": "5s",
        "relabelings": [{**by_frontend[0], "action": "keep"}],
    }
    torch = serving_params(backend="pytorch", server=ServerSettings(api="openai", decoupled=True))
    labels = desired_deployment(torch, desired_model_repository(torch))["spec"]["template"]["metadata"][
        "labels"
    ]
    assert labels[LABEL_FRONTEND] == FRONTEND_TRTLLM_SERVE
    assert LABEL_FRONTEND not in serving_pods()["deployment"]["metadata"]["labels"]
    selector = monitor["spec"]["selector"]["matchLabels"]
    scraped = set()
    for role, template in serving_pods().items():
        assert selector.items() <= template["metadata"]["labels"].items(), role
        ports = {
            p["name"]: p["containerPort"] for c in template["spec"]["containers"] for p in c.get("ports", [])
        }
        if endpoint["port"] in ports:
            assert ports[endpoint["port"]] == METRICS_PORT
            scraped.add(role)
    assert scraped == {"deployment", "lws-leader"}
    for name in ("default", "namespaced", "peering"):
        assert not only(rendered[name], "PodMonitor")


def test_operator_service_monitor_keeps_the_deployments_namespace_label(
    rendered: dict[str, list[dict[str, Any]]],
) -> None:
    """Audit B12: the operator's per-LLMDeployment series carry a ``namespace`` label (the
    LLMDeployment's). Prometheus renames a scraped label that clashes with a target label to
    ``exported_<name>`` unless ``honor_labels`` is true (Prometheus docs, scrape_config
    ``honor_labels``; prometheus-operator Endpoint ``honorLabels``), and the dashboard's
    ``namespace=~"$namespace"`` then matched the operator's namespace instead."""
    (monitor,) = only(rendered["everything"], "ServiceMonitor")
    (endpoint,) = monitor["spec"]["endpoints"]
    assert endpoint["honorLabels"] is True
    assert {"namespace", "name"} <= set(AUTOSCALER_DESIRED_REPLICAS._labelnames)


def test_service_monitor_scrapes_the_metrics_service(rendered: dict[str, list[dict[str, Any]]]) -> None:
    objs = rendered["everything"]
    (monitor,) = only(objs, "ServiceMonitor")
    (service,) = only(objs, "Service")
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    selector = monitor["spec"]["selector"]["matchLabels"]
    assert selector.items() <= service["metadata"]["labels"].items()
    (endpoint,) = monitor["spec"]["endpoints"]
    assert endpoint["port"] in {p["name"] for p in service["spec"]["ports"]}
    assert re.fullmatch(r"[0-9]+(ms|s|m|h)", endpoint["interval"])
    # metrics.secure (default): HTTPS with the self-signed certificate, unverified, as kubebuilder's
    # config/prometheus/monitor.yaml
    assert (endpoint["scheme"], endpoint["tlsConfig"]) == ("https", {"insecureSkipVerify": True})
    (dep,) = only(objs, "Deployment")
    container_ports = {
        p["name"]: p["containerPort"] for p in dep["spec"]["template"]["spec"]["containers"][0]["ports"]
    }
    (port,) = service["spec"]["ports"]
    assert container_ports[port["targetPort"]] == port["port"]
    assert selector.items() <= dep["spec"]["template"]["metadata"]["labels"].items()
    for name in ("default", "namespaced", "peering"):
        assert not only(rendered[name], "ServiceMonitor") and not only(rendered[name], "PrometheusRule")


def test_prometheus_rule_carries_the_recording_rules_file(rendered: dict[str, list[dict[str, Any]]]) -> None:
    (rule,) = only(rendered["everything"], "PrometheusRule")
    assert rule["apiVersion"] == "monitoring.coreos.com/v1"
    assert rule["metadata"]["namespace"] == "trtllm-system"
    source = yaml.safe_load((CHART / "files" / "prometheus-rules.yaml").read_text())
    assert rule["spec"] == source
    groups = rule["spec"]["groups"]
    assert groups and all(g["name"] and g["rules"] for g in groups)
    records = [r for g in groups for r in g["rules"]]
    for r in records:
        assert set(r) <= {"record", "expr", "labels"} and r["expr"].strip()
        assert re.fullmatch(r"[a-zA-Z_:][a-zA-Z0-9_:]*", r["record"]), r["record"]
    assert {r["record"] for r in records} >= {
        "namespace_pod:trtllm_active_request_utilization:ratio",
        "namespace_pod:trtllm_kv_cache_utilization:ratio",
    }


# ----------------------------------------------------------------------------- pod security
def test_operator_pod_meets_the_restricted_pod_security_standard(
    rendered: dict[str, list[dict[str, Any]]],
) -> None:
    """The fields the `restricted` profile checks (the e2e tier installs into a namespace that
    enforces it, where the real PodSecurity admission decides)."""
    for name, objs in rendered.items():
        (dep,) = only(objs, "Deployment")
        pod = dep["spec"]["template"]["spec"]
        assert not pod.get("hostNetwork") and not pod.get("hostPID") and not pod.get("hostIPC"), name
        assert all("hostPath" not in v for v in pod.get("volumes", [])), name
        assert pod["securityContext"]["runAsNonRoot"] is True
        assert pod["securityContext"]["runAsUser"] != 0
        assert pod["securityContext"]["seccompProfile"]["type"] == "RuntimeDefault"
        for c in pod["containers"] + pod.get("initContainers", []):
            sc = c["securityContext"]
            assert sc["allowPrivilegeEscalation"] is False, (name, c["name"])
            assert sc["capabilities"]["drop"] == ["ALL"] and not sc["capabilities"].get("add")
            assert sc.get("privileged") is not True
            assert sc["readOnlyRootFilesystem"] is True
            assert all("hostPort" not in p for p in c.get("ports", []))
            assert c["resources"]["requests"]["memory"] and c["resources"]["limits"]["memory"]


# ----------------------------------------------------------------------------- operator command line
def container_settings(dep: dict[str, Any], pod_namespace: str) -> tuple[Settings, dict[str, str]]:
    """Parse the chart's container args with the operator's own parser and its env with
    :meth:`Settings.from_env` — exactly what ``trtllm-operator`` does in the pod."""
    (container,) = dep["spec"]["template"]["spec"]["containers"]
    env: dict[str, str] = {}
    for var in container["env"]:
        if "value" in var:
            env[var["name"]] = var["value"]
        elif var.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") == "metadata.namespace":
            env[var["name"]] = pod_namespace
        else:
            raise AssertionError(f"unexpected env source {var}")
    args = build_parser().parse_args(container["args"])
    assert args.command == "run"
    return settings_from_args(args, Settings.from_env(env)), env


@pytest.mark.parametrize("value_set", sorted(VALUE_SETS))
def test_container_args_and_env_are_operator_settings(
    rendered: dict[str, list[dict[str, Any]]], value_set: str
) -> None:
    (dep,) = only(rendered[value_set], "Deployment")
    settings, env = container_settings(dep, "trtllm-system")
    unknown = {k for k in env if k.startswith(ENV_PREFIX)} - {
        ENV_PREFIX + f.upper() for f in Settings.model_fields
    }
    assert not unknown, f"the operator ignores {sorted(unknown)} (no such setting)"
    assert settings.operator_namespace == "trtllm-system"
    assert settings.max_concurrent_builds == 2
    # a succeeded builder Job expires a day after it finished, once its artifact is recorded
    assert settings.builder_succeeded_job_ttl_seconds == 86400
    # the admin's policy defaults (docs/security.md): NVIDIA's registry only, no custom S3 endpoint,
    # no Prometheus URL the operator may fetch
    assert settings.allowed_image_registries == ("nvcr.io/nvidia",)
    assert settings.allowed_s3_endpoints == () and settings.allowed_prometheus_urls == ()
    assert settings.metrics_port == 8080 and settings.liveness_port is not None
    ports = {p["name"]: p["containerPort"] for p in dep["spec"]["template"]["spec"]["containers"][0]["ports"]}
    assert ports["metrics"] == settings.metrics_port and ports["health"] == settings.liveness_port
    probe = dep["spec"]["template"]["spec"]["containers"][0]["livenessProbe"]["httpGet"]
    assert (probe["path"], probe["port"]) == ("/healthz", "health")
    expected_ns = {
        "namespaced": ("team-a", "team-b"),
        "everything": ("team-a",),
        "gpu-catalog": ("team-a",),
        "cluster-wide": (),
        "pod-monitor-all-namespaces": (),
    }.get(value_set, ("trtllm-system",))  # the default: the release's own namespace
    assert settings.namespaces == expected_ns
    assert settings.clusterwide is (expected_ns == ())
    assert settings.metrics_auth is True  # #24: /metrics for authorized clients only
    assert settings.metrics_secure is True  # #24: over HTTPS
    if value_set == "everything":  # metrics.certSecret: the Secret mounted where the operator reads
        pod = dep["spec"]["template"]["spec"]
        secret = "operator-metrics-tls"
        (volume,) = [v for v in pod["volumes"] if v.get("secret", {}).get("secretName") == secret]
        (mount,) = [m for m in pod["containers"][0]["volumeMounts"] if m["name"] == volume["name"]]
        assert settings.metrics_cert_dir == mount["mountPath"] and mount["readOnly"] is True
    else:
        assert settings.metrics_cert_dir is None  # the self-signed certificate
    assert settings.standalone is (dep["spec"]["replicas"] == 1)
    assert settings.log_format == ("text" if value_set == "peering" else "json")
    assert dep["spec"]["strategy"]["type"] == "Recreate"
    # issue 25 item 2: the plan check is on by default (config.json from the Hub, the builder's token)
    assert settings.hf_config_fetch is True and settings.hf_config_dir is None
    assert settings.hf_endpoint is None and ENV_PREFIX + "HF_ENDPOINT" not in env
    # the builder: delivered from the operator's own image (docs/engine-builder.md, "Running on a
    # stock image") unless the admin names a builder image that contains engine-builder
    if value_set == "custom-builder":
        assert settings.builder_image == "registry.example/engine-builder:1.2.0"
        assert settings.builder_delivery is False
        assert settings.builder_delivery_image == "mirror.example/trtllm-operator:0.1.0"
    else:
        assert settings.builder_image is None and settings.builder_delivery is True
        assert settings.builder_delivery_image == dep["spec"]["template"]["spec"]["containers"][0]["image"]


# ----------------------------------------------------------------------------- RBAC
def rules_of(objs: list[dict[str, Any]]) -> Iterator[tuple[str, dict[str, Any]]]:
    for o in objs:
        if o["kind"] in ("Role", "ClusterRole"):
            for rule in o.get("rules", []):
                yield f"{o['kind']}/{o['metadata']['name']}", rule


def grants(objs: list[dict[str, Any]], kind: str, group: str, resource: str) -> set[str]:
    verbs: set[str] = set()
    for _, rule in rules_of([o for o in objs if o["kind"] == kind]):
        if group in rule.get("apiGroups", []) and resource in rule.get("resources", []):
            verbs |= set(rule["verbs"])
    return verbs


@pytest.mark.parametrize("value_set", sorted(VALUE_SETS))
def test_rbac_is_least_privilege(rendered: dict[str, list[dict[str, Any]]], value_set: str) -> None:
    objs = rendered[value_set]
    rules = list(rules_of(objs))
    assert rules
    for where, rule in rules:
        for key in ("apiGroups", "resources", "verbs"):
            assert not any("*" in item for item in rule.get(key, [])), f"wildcard in {where}: {rule}"
        if "nonResourceURLs" in rule:  # only the role a scraper is bound to (metrics.auth)
            assert where == "ClusterRole/trtllm-system-rel-trtllm-operator-metrics-reader", f"{where}: {rule}"
            assert rule == METRICS_READER_RULE, f"{where}: {rule}"
            continue
        if "resourceNames" in rule:  # only the GPU catalog ConfigMap (settings.gpuCatalogConfigmap)
            assert where == "Role/rel-trtllm-operator-gpu-catalog", f"{where}: {rule}"
            assert rule == {
                "apiGroups": [""],
                "resources": ["configmaps"],
                "resourceNames": ["gpus"],
                "verbs": ["get"],
            }
            continue
        if "secrets" in rule.get("resources", []):
            # get: metadata of referenced Secrets (opt-in label); create: each LLMDeployment's own
            # <name>-credentials, once. Never list/watch (all Secrets), patch/update/delete (any).
            assert rule["verbs"] == ["get", "create"] and rule["resources"] == ["secrets"], f"{where}: {rule}"
        assert not {"escalate", "bind", "impersonate"} & set(rule["verbs"]), f"{where}: {rule}"
        assert not {"clusterroles", "roles", "rolebindings", "clusterrolebindings"} & set(
            rule.get("resources", [])
        ), f"{where}: {rule}"
        if "nodes" in rule.get("resources", []):  # GPU counts per node: read-only
            assert set(rule["verbs"]) <= {"get", "list", "watch"}, f"{where}: {rule}"
        assert not any(r.endswith("/exec") or r.endswith("/attach") for r in rule.get("resources", []))
    kind = "ClusterRole" if value_set in ("cluster-wide", "pod-monitor-all-namespaces") else "Role"
    # the operator never deletes its users' objects (it deletes only a builder Job of its own that
    # never started, to replace it); the scale subresource is its only way to change replicas
    assert "delete" not in grants(objs, kind, LLM_GROUP, "llmengines")
    assert "delete" not in grants(objs, kind, LLM_GROUP, "llmdeployments")
    assert "update" not in grants(objs, kind, LLM_GROUP, "llmdeployments")
    assert {"get", "patch"} <= grants(objs, kind, LLM_GROUP, "llmdeployments/scale")
    assert {"create", "get", "list", "watch"} <= grants(objs, kind, "batch", "jobs")


def test_rbac_namespaced_mode_binds_roles_in_each_watched_namespace(
    rendered: dict[str, list[dict[str, Any]]],
) -> None:
    objs = rendered["namespaced"]
    roles = {(o["metadata"]["namespace"], o["metadata"]["name"]) for o in only(objs, "Role")}
    bindings = only(objs, "RoleBinding")
    assert {ns for ns, _ in roles} == {"team-a", "team-b"}
    for b in bindings:
        assert (b["metadata"]["namespace"], b["roleRef"]["name"]) in roles
        assert b["subjects"] == [
            {"kind": "ServiceAccount", "name": "rel-trtllm-operator", "namespace": "trtllm-system"}
        ]
    # cluster-scoped grants in namespaced mode: what kopf needs to discover and peer, GPU nodes read,
    # the custom metrics API's APIServices read (mode hpa, fresh-user trial 46 T3), and the reviews of
    # authenticated /metrics (metrics.auth)
    roles = {o["metadata"]["name"]: o for o in only(objs, "ClusterRole")}
    # cluster-scoped names carry the release's namespace (test_cluster_scoped_names_are_unique_per_...)
    assert set(roles) == {
        "trtllm-system-rel-trtllm-operator-cluster",
        "trtllm-system-rel-trtllm-operator-metrics-reader",
    }
    cluster_role = roles["trtllm-system-rel-trtllm-operator-cluster"]
    resources = {r for _, rule in rules_of([cluster_role]) for r in rule["resources"]}
    reviews = {"tokenreviews", "subjectaccessreviews"}
    assert resources == {"customresourcedefinitions", "clusterkopfpeerings", "nodes", "apiservices"} | reviews
    for _, rule in rules_of([cluster_role]):
        if set(rule["resources"]) <= reviews:
            assert rule["verbs"] == ["create"], rule
        else:
            assert not {"create", "delete", "update"} & set(rule["verbs"])
    # the default watches the release's namespace: a Role there, no cluster-wide namespaced grants
    default = rendered["default"]
    assert {(o["metadata"]["namespace"], o["metadata"]["name"]) for o in only(default, "Role")} == {
        ("trtllm-system", "rel-trtllm-operator")
    }
    assert "jobs" not in {
        r for _, rule in rules_of(only(default, "ClusterRole")) for r in rule.get("resources", [])
    }
    # cluster-wide mode (clusterWide: true, opt-in): one ClusterRole bound to the chart's
    # ServiceAccount, nothing namespaced
    wide = rendered["cluster-wide"]
    assert not only(wide, "Role") and not only(wide, "RoleBinding")
    (crb,) = only(wide, "ClusterRoleBinding")
    (sa,) = only(wide, "ServiceAccount")
    assert crb["subjects"][0]["name"] == sa["metadata"]["name"]


def test_gpu_catalog_configmap_is_readable_by_name_in_the_operators_namespace(
    helm_bin: Path, helm_env: dict[str, str], rendered: dict[str, list[dict[str, Any]]]
) -> None:
    """settings.gpuCatalogConfigmap: the operator GETs that ConfigMap in its own namespace
    (handlers/engine.py catalog_extension, Settings.operator_namespace). A fresh-user trial found it
    unreadable when watchNamespaces names only other namespaces (no Role there): now a Role with get
    on exactly that name (resourceNames), bound to the chart's ServiceAccount, and the setting passed
    to the operator (parsed by its own Settings)."""
    objs = rendered["gpu-catalog"]
    (dep,) = only(objs, "Deployment")
    settings, _ = container_settings(dep, "trtllm-system")
    assert settings.gpu_catalog_configmap == "gpus" and settings.operator_namespace == "trtllm-system"
    assert "trtllm-system" not in settings.namespaces  # no watched-namespace Role grants it there
    in_own_ns = [o for o in only(objs, "Role") if o["metadata"]["namespace"] == "trtllm-system"]
    assert [r["rules"] for r in in_own_ns] == [
        [{"apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["gpus"], "verbs": ["get"]}]
    ]
    (binding,) = [o for o in only(objs, "RoleBinding") if o["metadata"]["namespace"] == "trtllm-system"]
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": in_own_ns[0]["metadata"]["name"],
    }  # fmt: skip
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "rel-trtllm-operator", "namespace": "trtllm-system"}
    ]
    # where a Role or the ClusterRole already grants get on ConfigMaps there, no second grant
    for extra in (["--set", "clusterWide=true"], []):
        others = render(helm_bin, helm_env, [*extra, "--set", "settings.gpuCatalogConfigmap=gpus"])
        assert not [r for _, r in rules_of(others) if "resourceNames" in r], extra
        assert "get" in grants(others, "ClusterRole" if extra else "Role", "", "configmaps")
    # without the setting: no catalog Role, no variable
    assert not [r for _, r in rules_of(rendered["namespaced"]) if "resourceNames" in r]


def test_cluster_scoped_names_are_unique_per_release_namespace(
    helm_bin: Path, helm_env: dict[str, str]
) -> None:
    """Release names are unique per namespace only: a second install of release ``rel`` in another
    namespace must not name a cluster-scoped object as the first does (Helm would refuse to take over
    the other release's object). Every cluster-scoped kind the chart renders, both watch modes."""
    namespaced = {"Role", "RoleBinding", "Deployment", "Service", "ServiceAccount", "ConfigMap"}
    namespaced |= CRD_KINDS
    for values in ([], ["--set", "clusterWide=true"], ["--set", "watchNamespaces={team-a}"]):
        names: list[set[str]] = []
        for ns in ("trtllm-system", "other-system"):
            proc = run_helm(
                helm_bin, helm_env, "template", "rel", str(CHART), "--namespace", ns,
                "--kube-version", K8S_VERSION, *values,
            )  # fmt: skip
            assert proc.returncode == 0, proc.stderr
            objs = [d for d in yaml.safe_load_all(proc.stdout) if d]
            cluster_scoped = [o for o in objs if o["kind"] not in namespaced]
            assert {o["kind"] for o in cluster_scoped} == {
                "ClusterRole",
                "ClusterRoleBinding",
                "ValidatingAdmissionPolicy",  # engineInUseWarning
                "ValidatingAdmissionPolicyBinding",
            }, values
            assert all("namespace" not in o["metadata"] for o in cluster_scoped)
            names.append({f"{o['kind']}/{o['metadata']['name']}" for o in cluster_scoped})
            for crb in only(cluster_scoped, "ClusterRoleBinding"):  # bound to this release's role
                assert crb["roleRef"]["name"] in {
                    o["metadata"]["name"] for o in only(cluster_scoped, "ClusterRole")
                }
            for binding in only(cluster_scoped, "ValidatingAdmissionPolicyBinding"):  # this release's
                assert binding["spec"]["policyName"] in {
                    o["metadata"]["name"] for o in only(cluster_scoped, "ValidatingAdmissionPolicy")
                }
        assert names[0] and not names[0] & names[1], (values, names)


# ----------------------------------------------------------------------------- the docs' RBAC summaries
INSTALL_DOC = REPO / "docs" / "install.md"
#: (API group, resource) → (verbs, scope in namespaced mode, scope with clusterWide); "" = core.
Grants = dict[tuple[str, str], tuple[frozenset[str], str, str]]


def rendered_grants(helm_bin: Path, helm_env: dict[str, str]) -> Grants:
    """What the operator's ServiceAccount is granted, from the rendered chart: namespaced mode
    (watchNamespaces) and clusterWide. Scopes: "watched namespaces" (the Role in each), "every
    namespace" (clusterWide's ClusterRole, for a resource the namespaced Role grants), "cluster" (a
    ClusterRole, cluster-scoped resource), "—" (not granted in that mode). The metrics-reader role is
    the scraper's, not the operator's."""
    per_mode: list[dict[tuple[str, str], tuple[set[str], str]]] = []
    for values in (["--set", "watchNamespaces={team-a}"], ["--set", "clusterWide=true"]):
        mode: dict[tuple[str, str], tuple[set[str], str]] = {}
        for obj in render(helm_bin, helm_env, values):
            if obj["kind"] not in ("Role", "ClusterRole") or obj["metadata"]["name"].endswith(
                "-metrics-reader"
            ):
                continue
            for rule in obj["rules"]:
                for group in rule["apiGroups"]:
                    for resource in rule["resources"]:
                        verbs, _ = mode.get((group, resource), (set(), ""))
                        mode[(group, resource)] = (verbs | set(rule["verbs"]), obj["kind"])
        per_mode.append(mode)
    namespaced, wide = per_mode
    out: Grants = {}
    for key in namespaced.keys() | wide.keys():
        ns_verbs, ns_kind = namespaced.get(key, (set(), ""))
        cw_verbs, _ = wide.get(key, (set(), ""))
        assert not ns_verbs or not cw_verbs or ns_verbs == cw_verbs, (key, ns_verbs, cw_verbs)
        ns_scope = {"Role": "watched namespaces", "ClusterRole": "cluster", "": "—"}[ns_kind]
        cw_scope = "every namespace" if ns_kind == "Role" else "cluster" if cw_verbs else "—"
        out[key] = (frozenset(ns_verbs or cw_verbs), ns_scope, cw_scope)
    return out


def doc_grants_table() -> Grants:
    """docs/security.md's table "What the chart grants", parsed (a row per group and resource list)."""
    text = SECURITY_DOC.read_text()
    header = "| API group | resources | verbs | namespaced (default) | `clusterWide: true` |"
    assert header in text
    out: Grants = {}
    for line in text.split(header, 1)[1].splitlines()[2:]:
        if not line.startswith("|"):
            break
        group, resources, verbs, ns_scope, cw_scope = (c.strip() for c in line.strip("|").split("|"))
        group = "" if group == "core" else group.strip("`")
        for resource in resources.split(","):
            key = (group, resource.strip().strip("`"))
            assert key not in out, f"{key} twice in the table"
            out[key] = (frozenset(v.strip() for v in verbs.split(",")), ns_scope, cw_scope)
    return out


def test_security_doc_grants_table_is_the_rendered_rbac(helm_bin: Path, helm_env: dict[str, str]) -> None:
    """docs/security.md's rule-by-rule table is what the chart renders, both ways: no rule missing
    from the doc (a fresh-user trial found the summaries understating Secret get/create in every
    namespace and omitting clusterkopfpeerings), no claim the chart does not make."""
    rendered_rbac, documented = rendered_grants(helm_bin, helm_env), doc_grants_table()
    assert documented.keys() == rendered_rbac.keys(), (
        f"not in the doc: {sorted(rendered_rbac.keys() - documented.keys())}; "
        f"not rendered: {sorted(documented.keys() - rendered_rbac.keys())}"
    )
    wrong = {k: (documented[k], rendered_rbac[k]) for k in documented if documented[k] != rendered_rbac[k]}
    assert not wrong, f"doc vs rendered: {wrong}"


_CLAIM = re.compile(r"`([a-z./]+)` ([a-z]+(?:/[a-z]+)*)")


def test_install_doc_watch_scope_summaries_match_the_rendered_rbac(
    helm_bin: Path, helm_env: dict[str, str]
) -> None:
    """docs/install.md's "Watch scope" table: every `resource` verbs/verbs claim is the rendered
    grant exactly; the namespaced row names every cluster-scoped grant of its ClusterRole, and the
    clusterWide row names Secrets' get and create in every namespace."""
    grants = rendered_grants(helm_bin, helm_env)
    by_resource = {resource: value for (_, resource), value in grants.items()}
    rows = {}
    for line in INSTALL_DOC.read_text().split("### Watch scope", 1)[1].splitlines():
        if line.startswith("| ") and not line.startswith("| values") and not line.startswith("| ---"):
            rows[line.split("|")[1].strip()] = line.split("|")[3]
        elif rows and not line.startswith("|"):
            break
    (default_row,) = (v for k, v in rows.items() if k.startswith("(default"))
    (wide_row,) = (v for k, v in rows.items() if k.startswith("`clusterWide: true`"))
    for row in rows.values():
        for resource, verbs in _CLAIM.findall(row):
            assert resource in by_resource, f"{resource}: no such grant"
            assert set(verbs.split("/")) == by_resource[resource][0], (resource, verbs, by_resource[resource])
    cluster_scoped = {r for r, (_, ns_scope, _) in by_resource.items() if ns_scope == "cluster"}
    assert cluster_scoped == {r for r, _ in _CLAIM.findall(default_row)} - {"secrets"}, default_row
    assert ("secrets", "get/create") in _CLAIM.findall(wide_row), wide_row
    assert "every namespace" in wide_row


# ----------------------------------------------------------------------------- NetworkPolicy
def _operator_env(docs: list[dict[str, Any]]) -> dict[str, str]:
    (deployment,) = only(docs, "Deployment")
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    return {e["name"]: e["value"] for e in container.get("env", []) if "value" in e}


def test_chart_renders_no_network_policy_and_passes_its_settings_to_the_operator(
    rendered: dict[str, list[dict[str, Any]]],
) -> None:
    """The operator renders one NetworkPolicy per LLMDeployment (render.network_policy), on by
    default; the chart only passes the admin's peers on — parsed by the operator's own Settings."""
    from trtllm_operator.settings import Settings  # noqa: PLC0415

    for name, docs in rendered.items():
        assert not only(docs, "NetworkPolicy"), name
    default = Settings.from_env(_operator_env(rendered["default"]))
    assert default.serving_network_policy is True
    assert default.serving_client_namespaces == ()
    assert default.serving_monitoring_namespaces == ("monitoring",)
    everything = Settings.from_env(_operator_env(rendered["everything"]))
    assert everything.serving_client_namespaces == ("gateway",)


# ----------------------------------------------------------------------------- settings.extraEnv
TEMPLATE = (CHART / "templates" / "deployment.yaml").read_text()
#: Container arguments of the chart that carry an operator setting (trtllm-operator run's flags).
ARG_SETTINGS = {
    "--namespace": "NAMESPACES",
    "--all-namespaces": "NAMESPACES",
    "--standalone": "STANDALONE",
    "--peering": "STANDALONE",
    "--liveness-port": "LIVENESS_PORT",
}


def chart_set_variables(rendered: dict[str, list[dict[str, Any]]]) -> set[str]:
    """Every TRTLLM_OPERATOR_* the chart sets: the env entries of the template (also the conditional
    ones) and the settings its container arguments carry."""
    names = set(re.findall(r"- name: (TRTLLM_OPERATOR_[A-Z0-9_]+)", TEMPLATE))
    for objs in rendered.values():
        (dep,) = only(objs, "Deployment")
        (container,) = dep["spec"]["template"]["spec"]["containers"]
        for arg in container["args"][1:]:
            flag = arg.split("=", 1)[0]
            assert flag in ARG_SETTINGS, f"chart argument {arg} is not in ARG_SETTINGS"
            names.add(ENV_PREFIX + ARG_SETTINGS[flag])
    return names


def _template(helm: Path, env: dict[str, str], *values: str) -> subprocess.CompletedProcess[str]:
    return run_helm(helm, env, "template", "rel", str(CHART), "--kube-version", K8S_VERSION, *values)


def test_extra_env_values_are_strings_in_env_var_shape(helm_bin: Path, helm_env: dict[str, str]) -> None:
    """A fresh-user trial's number value passed the schema and failed at apply with a Go unmarshal
    error, leaving a failed release: the schema refuses it before anything is applied."""
    for bad in (
        ["--set-json", 'settings.extraEnv=[{"name": "HTTPS_PROXY_PORT", "value": 3128}]'],
        ["--set-json", 'settings.extraEnv=[{"name": "X"}]'],
        ["--set-json", 'settings.extraEnv=[{"name": "X", "value": "a", "valueFrom": {}}]'],
        ["--set-json", 'settings.extraEnv=[{"name": "X", "valu": "a"}]'],
    ):
        proc = _template(helm_bin, helm_env, *bad)
        assert proc.returncode != 0, f"{bad} was accepted"
        assert "/settings/extraEnv/0" in proc.stderr, proc.stderr
    secret = {"secretKeyRef": {"name": "proxy", "key": "url"}}
    good = json.dumps([{"name": "HTTPS_PROXY", "valueFrom": secret}, {"name": "NO_PROXY", "value": "3128"}])
    docs = [
        d
        for d in yaml.safe_load_all(
            _template(helm_bin, helm_env, "--set-json", f"settings.extraEnv={good}").stdout
        )
        if d
    ]
    (dep,) = only(docs, "Deployment")
    env = dep["spec"]["template"]["spec"]["containers"][0]["env"]
    assert {"name": "HTTPS_PROXY", "valueFrom": secret} in env and {
        "name": "NO_PROXY",
        "value": "3128",
    } in env


def test_extra_env_refuses_a_variable_the_chart_sets_naming_the_chart_value(
    helm_bin: Path, helm_env: dict[str, str], rendered: dict[str, list[dict[str, Any]]]
) -> None:
    """TRTLLM_OPERATOR_MAX_CONCURRENT_BUILDS in extraEnv was rendered twice; every variable the chart
    sets is refused, naming the value that sets it."""
    names = chart_set_variables(rendered)
    assert ENV_PREFIX + "MAX_CONCURRENT_BUILDS" in names and names <= set(env_names())
    for name in sorted(names):
        proc = _template(
            helm_bin, helm_env, "--set-json", f'settings.extraEnv=[{{"name": "{name}", "value": "1"}}]'
        )
        assert proc.returncode != 0, f"{name} was accepted"
        assert f"settings.extraEnv: {name} is set by the chart from " in proc.stderr, proc.stderr
    proc = _template(
        helm_bin,
        helm_env,
        "--set-json",
        'settings.extraEnv=[{"name": "TRTLLM_OPERATOR_MAX_CONCURRENT_BUILDS", "value": "4"}]',
    )
    assert "from settings.concurrentBuilds; set that value instead" in proc.stderr, proc.stderr


def test_extra_env_takes_every_other_setting_and_refuses_unknown_ones(
    helm_bin: Path, helm_env: dict[str, str], rendered: dict[str, list[dict[str, Any]]]
) -> None:
    others = sorted(set(env_names()) - chart_set_variables(rendered))
    assert ENV_PREFIX + "RESYNC_SECONDS" in others
    for name in others:
        extra = json.dumps([{"name": name, "value": ""}])
        proc = _template(helm_bin, helm_env, "--set-json", f"settings.extraEnv={extra}")
        assert proc.returncode == 0, (name, proc.stderr)
    proc = _template(
        helm_bin,
        helm_env,
        "--set-json",
        'settings.extraEnv=[{"name": "TRTLLM_OPERATOR_BOGUS", "value": "1"}]',
    )
    assert proc.returncode != 0
    assert "settings.extraEnv: TRTLLM_OPERATOR_BOGUS is not an operator setting" in proc.stderr, proc.stderr
    listed = proc.stderr.split("The settings extraEnv may set: ", 1)[1].split(";", 1)[0].split(", ")
    assert sorted(listed) == others


def test_builder_delivery_off_needs_a_builder_image(helm_bin: Path, helm_env: dict[str, str]) -> None:
    """Without delivery and without builder.image every build would run the stock serving image,
    which has no engine-builder: refused, naming both values."""
    proc = _template(helm_bin, helm_env, "--set", "builder.delivery=false")
    assert proc.returncode != 0
    assert "builder.delivery is false but builder.image is empty" in proc.stderr, proc.stderr
    assert "builder.delivery=true" in proc.stderr and "Set builder.image" in proc.stderr
    ok = _template(
        helm_bin, helm_env, "--set", "builder.delivery=false", "--set", "builder.image=r.example/eb:1"
    )
    assert ok.returncode == 0, ok.stderr


def test_engine_in_use_warning_warns_only_in_the_watched_namespaces(
    helm_bin: Path, helm_env: dict[str, str]
) -> None:
    """The policy of tests/integration/test_engine_in_use_warning.py: Warn, never Deny; bound to the
    namespaces the release watches (every namespace when cluster-wide); off with the value."""
    base = ["template", "rel", str(CHART), "--namespace", "trtllm-system", "--kube-version", K8S_VERSION]

    def binding(*values: str) -> list[dict[str, Any]]:
        proc = run_helm(helm_bin, helm_env, *base, *values)
        assert proc.returncode == 0, proc.stderr
        return only([d for d in yaml.safe_load_all(proc.stdout) if d], "ValidatingAdmissionPolicyBinding")

    (default,) = binding()
    assert default["spec"]["validationActions"] == ["Warn"]
    (term,) = default["spec"]["matchResources"]["namespaceSelector"]["matchExpressions"]
    assert term == {"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["trtllm-system"]}
    (teams,) = binding("--set", "watchNamespaces={team-a,team-b}")
    assert teams["spec"]["matchResources"]["namespaceSelector"]["matchExpressions"][0]["values"] == [
        "team-a",
        "team-b",
    ]
    (everywhere,) = binding("--set", "clusterWide=true")
    assert "matchResources" not in everywhere["spec"]
    assert binding("--set", "engineInUseWarning=false") == []
