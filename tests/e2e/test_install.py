"""The chart installed with Helm, the whole flow run by the operator as the chart's ServiceAccount.

Flow (:func:`flow`, once per module): Secrets with recognisable fake credentials (a Hugging Face
token, S3 access and secret keys) → an LLMEngine that uses both → builder Job (kwok completes its
pod with the builder's JSON report as the termination message) → Ready → an LLMDeployment serving
it → pods Ready → ``kubectl scale`` → more pods Ready. Every write the operator makes goes through
the RBAC of the chart (see conftest.py); the tests then check what it did and did not do.
"""

from __future__ import annotations

import base64
import importlib.util
import json
import os
import re
import subprocess
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from e2e_harness import (
    CATALOG_GPU,
    CHART,
    GPU_CATALOG,
    HF_TOKEN,
    RELEASE,
    TINYLLAMA,
    Installed,
    hub_repos,
    token_kubeconfig,
)
from kubernetes import client
from support.api import Api
from support.manifests import (
    EngineBuilder,
    a_deployment,
    an_autoscaled_deployment,
    an_engine,
    create_token_secret,
)
from support.metrics_auth import delete_metrics_reader, get_metrics, metrics_tokens
from support.wait import wait_for

from engine_builder.report import build_report
from trtllm_operator.api import DEPLOYMENT_PLURAL, ENGINE_PLURAL, GROUP, VERSION
from trtllm_operator.api.wire import LABEL_SECRET_USABLE
from trtllm_operator.decide.engine_spec import PreparedEngine, prepare_engine

pytestmark = pytest.mark.slow

#: The (fake) MinIO endpoint the flow's engine writes to (helm_values allows it).
MINIO = "http://minio.storage.svc:9000"
SA_TOKEN_PATH = "/var/run/secrets/kubernetes.io/serviceaccount"

#: Fake credentials, recognisable and unique per run; none may leave its Secret (HF_TOKEN, in
#: e2e_harness, goes to the local Hub too: the plan check's request).
S3_ACCESS_KEY = "AKIAE2EFAKE" + base64.b32encode(os.urandom(5)).decode()
S3_SECRET_KEY = "e2eFakeS3Secret/" + base64.b64encode(os.urandom(18)).decode()


#: What an RBAC denial looks like in the operator's log: the API's "Forbidden" reason, the client's
#: "(403)" status, or a 403 code/status field — not any "403" (timestamps, resource versions and
#: uids contain it).
_DENIAL = re.compile(r"[Ff]orbidden|\(403\)|\b(?:HTTP|status|code)\W{0,3}403\b")


def rbac_denials(log: str) -> list[str]:
    return [line for line in log.splitlines() if _DENIAL.search(line)]


def needles() -> dict[str, str]:
    """Every form a leaked credential could take: raw, base64, and a 16-character core."""
    out: dict[str, str] = {}
    for name, value in (
        ("HF token", HF_TOKEN),
        ("S3 access key", S3_ACCESS_KEY),
        ("S3 secret key", S3_SECRET_KEY),
    ):
        out[name] = value
        out[f"{name} (base64)"] = base64.b64encode(value.encode()).decode()
        out[f"{name} (core)"] = value[-16:]
    return out


# ----------------------------------------------------------------------------- the flow
@dataclass
class Flow:
    engine: dict[str, Any]
    deployment: dict[str, Any]
    prepared: PreparedEngine
    builder_pods: list[dict[str, Any]] = field(default_factory=list)
    server_pods: list[dict[str, Any]] = field(default_factory=list)


def status_of(api: Api, plural: str, name: str) -> dict[str, Any]:
    return dict(api.get(plural, name).get("status") or {})


def live_pods(api: Api, selector: str) -> list[dict[str, Any]]:
    """The pods ``selector`` matches, not being deleted, as JSON."""
    items = api.core.list_namespaced_pod(api.ns, label_selector=selector).items
    return [
        api.apps.api_client.sanitize_for_serialization(p)
        for p in items
        if p.metadata.deletion_timestamp is None
    ]


def ready_pods(pods: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        p
        for p in pods
        if any(
            c["type"] == "Ready" and c["status"] == "True"
            for c in p.get("status", {}).get("conditions") or []
        )
    ]


def an_s3_engine(name: str) -> EngineBuilder:
    """The shared :func:`an_engine` (TinyLlama, the ``hf`` token Secret, kwok's builder pod) writing
    to the fake MinIO with the ``s3-credentials`` Secret."""
    return an_engine(name).runs_for(500).s3("engines", "e2e", endpoint=MINIO, credentials="s3-credentials")


def prepared_engine(body: dict[str, Any], namespace: str) -> PreparedEngine:
    """What the operator computes for ``body`` in ``namespace`` (the same pure function, with the
    config.json the local Hub serves), for the builder report (on S3 the builder publishes under
    ``<prefix>/<namespace>``)."""
    config = hub_repos()[TINYLLAMA.removeprefix("hf://")].files["config.json"]
    result = prepare_engine(
        body["metadata"]["name"], body["spec"], hf_config=json.loads(config), namespace=namespace
    )
    assert isinstance(result, PreparedEngine), result
    return result


@pytest.fixture(scope="module")
def flow(installed: Installed) -> Flow:
    cluster, ns = installed.cluster, installed.namespace
    api = Api(cluster, ns)
    usable = {LABEL_SECRET_USABLE: "true"}  # the Secrets' owner lets LLM resources use them
    create_token_secret(api.core, ns, HF_TOKEN)
    api.core.create_namespaced_secret(
        ns,
        {
            "metadata": {"name": "s3-credentials", "labels": usable},
            "stringData": {"AWS_ACCESS_KEY_ID": S3_ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": S3_SECRET_KEY},
        },
    )

    chat = an_s3_engine("chat")
    prepared = prepared_engine(chat.manifest(), ns)
    report = build_report(
        status="Succeeded",
        engine_key=prepared.key,
        artifact_uri=prepared.storage.artifact_uri(prepared.key),
        manifest_digest="sha256:" + "e2" * 32,
        size_bytes=2_345_678,
        stage_timings={"fetch": 2.0, "quantize": 20.0, "compile": 40.0, "package": 1.0},
    )
    # (the report already names the namespaced artifact: the plain manifest, not manifest(ns))
    engine = chat.succeeds(report).manifest()
    api.create(engine)
    result = Flow(engine=engine, deployment={}, prepared=prepared)

    # the builder pod, read while it exists (a finished Job's pod may be collected later)
    result.builder_pods = wait_for(
        lambda: live_pods(api, f"batch.kubernetes.io/job-name={prepared.job_name}"),
        timeout=60,
        desc=f"builder pod of Job {prepared.job_name}",
    )
    wait_for(
        lambda: status_of(api, ENGINE_PLURAL, "chat").get("phase") == "Ready",
        timeout=60,
        desc="LLMEngine chat Ready",
    )
    result.engine = api.get(ENGINE_PLURAL, "chat")

    api.create(a_deployment("chat", "chat"))

    def serving(n: int) -> dict[str, Any] | None:
        s = status_of(api, DEPLOYMENT_PLURAL, "chat")
        return s if s.get("phase") == "Ready" and s.get("readyReplicas") == n else None

    wait_for(lambda: serving(1), timeout=60, desc="LLMDeployment chat Ready with 1 replica")
    # a user scales through the scale subresource, as `kubectl scale` and an HPA do
    cluster.kubectl("scale", "-n", ns, f"{DEPLOYMENT_PLURAL}.{GROUP}/chat", "--replicas=2")
    wait_for(lambda: serving(2), timeout=60, desc="LLMDeployment chat Ready with 2 replicas")
    result.deployment = api.get(DEPLOYMENT_PLURAL, "chat")
    result.server_pods = live_pods(api, f"{GROUP}/deployment=chat")
    return result


# ----------------------------------------------------------------------------- tests
def test_operator_pod_is_admitted_under_restricted_pod_security(installed: Installed) -> None:
    core = client.CoreV1Api(installed.cluster.api)
    ns = installed.operator_namespace
    labels = core.read_namespace(ns).metadata.labels
    assert labels["pod-security.kubernetes.io/enforce"] == "restricted"
    pods = core.list_namespaced_pod(ns, label_selector="app.kubernetes.io/instance=e2e").items
    assert len(pods) == 1, "the chart's Deployment made no pod: PodSecurity admission rejected it?"
    assert pods[0].status.phase == "Running"
    assert "violate" not in installed.helm_output, installed.helm_output
    # the admission is really enforcing: a privileged pod is refused in the same namespace
    privileged = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "privileged", "namespace": ns},
        "spec": {"containers": [{"name": "c", "image": "busybox", "securityContext": {"privileged": True}}]},
    }
    proc = installed.cluster.kubectl(
        "apply", "--dry-run=server", "-f", "-", input=json.dumps(privileged), check=False
    )
    assert proc.returncode != 0 and "violates PodSecurity" in proc.stderr, proc.stderr


def test_flow_passes_as_the_chart_service_account(installed: Installed, flow: Flow) -> None:
    whoami = installed.kubectl_as_operator("auth", "whoami", "-o", "json", check=True)
    username = json.loads(whoami.stdout)["status"]["userInfo"]["username"]
    assert username == f"system:serviceaccount:{installed.operator_namespace}:{installed.service_account}"

    engine_status = flow.engine["status"]
    assert engine_status["engineKey"] == flow.prepared.key
    assert engine_status["artifact"]["uri"] == flow.prepared.storage.artifact_uri(flow.prepared.key)
    assert engine_status["observedGeneration"] == flow.engine["metadata"]["generation"]
    status = flow.deployment["status"]
    assert status["readyReplicas"] == 2 and status["engineKey"] == flow.prepared.key
    assert len(ready_pods(flow.server_pods)) == 2
    assert installed.alive(), "the operator died"
    # the operator's own NetworkPolicy for the deployment (servingNetworkPolicy.enabled, the chart's
    # default) was created with the chart's RBAC and selects the servers
    name = flow.deployment["metadata"]["name"]
    policy = client.NetworkingV1Api(installed.cluster.api).read_namespaced_network_policy(
        name, installed.namespace
    )
    for pod in flow.server_pods:
        assert policy.spec.pod_selector.match_labels.items() <= pod["metadata"]["labels"].items()
    # and its credentials Secret (created with the chart's secrets/create), referenced by the pods
    secret = client.CoreV1Api(installed.cluster.api).read_namespaced_secret(
        f"{name}-credentials", installed.namespace
    )
    assert secret.immutable and secret.metadata.owner_references[0].kind == "LLMDeployment"
    log = installed.log()
    denied = rbac_denials(log)
    assert not denied, "RBAC denied the operator:\n" + "\n".join(denied[:10])
    assert flow.prepared.key in log, "the operator log does not show the build (is it the right log?)"


def condition_of(obj: dict[str, Any], kind: str) -> dict[str, Any] | None:
    return next((c for c in (obj.get("status") or {}).get("conditions") or [] if c["type"] == kind), None)


def test_chart_defaults_plan_an_hf_model_from_the_hub_with_the_token_secret(
    installed: Installed, flow: Flow
) -> None:
    """Issue 25: with the chart's default values (``hfConfigFetch: true``, no model-config
    directory) and only ``hfEndpoint`` at the local Hub (tests/support/hub.py, the Hub's resolve
    API, the repository gated behind the token of the test's Secret), the operator fetches
    config.json with that token and plans before the build. The local Hub serves the gated file only
    for ``Bearer <HF_TOKEN>`` (401 otherwise), so a plan means the token reached it. A missing or a
    wrong token: ``Planned=Unknown`` ``ModelConfigUnavailable`` saying why, no plan."""
    hub = installed.hub
    assert hub is not None
    assert "TRTLLM_OPERATOR_HF_CONFIG_DIR" not in installed.log(), "planned from a directory?"
    plan = flow.engine["status"].get("plan")
    assert plan, flow.engine["status"]
    assert plan["fits"] is True and plan["maxSeqLenRule"], plan
    planned = condition_of(flow.engine, "Planned")
    assert planned is not None and planned["status"] == "True", planned
    repo = TINYLLAMA.removeprefix("hf://")
    assert ("HEAD", f"/{repo}/resolve/main/config.json", True) in hub.requests, hub.requests
    assert not [path for _, path, sent in hub.requests if not sent], "a request without the token"
    # the builder downloads from the same Hub (HF_ENDPOINT, huggingface_hub 2.4.0 constants.ENDPOINT)
    (builder,) = (c for p in flow.builder_pods for c in p["spec"]["containers"] if c["name"] == "builder")
    assert {"name": "HF_ENDPOINT", "value": hub.url} in builder["env"], builder["env"]

    api = Api(installed.cluster, installed.namespace)
    usable = {LABEL_SECRET_USABLE: "true"}
    api.core.create_namespaced_secret(
        installed.namespace,
        {"metadata": {"name": "hf-wrong", "labels": usable}, "stringData": {"token": "hf_e2eWRONG"}},
    )
    # never built: a GPU product no node has (the plan check runs before the build anyway)
    wrong = an_s3_engine("wrong-token").on("NVIDIA-H200").manifest()
    wrong["spec"]["model"]["credentialsSecretRef"] = {"name": "hf-wrong", "key": "token"}
    missing = an_s3_engine("no-token").on("NVIDIA-H200").manifest()
    del missing["spec"]["model"]["credentialsSecretRef"]
    expected = {"wrong-token": "401", "no-token": "no token was sent"}
    try:
        for body in (wrong, missing):
            api.create(body)
        for name, why in expected.items():

            def unknown(name: str = name) -> dict[str, Any] | None:
                # (Planned=Unknown FetchingModelConfig comes first, while the request is out)
                cond = condition_of(api.get(ENGINE_PLURAL, name), "Planned")
                return cond if cond and cond["reason"] == "ModelConfigUnavailable" else None

            cond = wait_for(unknown, timeout=60, desc=f"Planned=Unknown ModelConfigUnavailable for {name}")
            assert cond["status"] == "Unknown", cond
            assert "not fetched from the Hub" in cond["message"] and why in cond["message"], cond
            assert not status_of(api, ENGINE_PLURAL, name).get("plan")
    finally:
        for name in expected:
            api.custom.delete_namespaced_custom_object(GROUP, VERSION, api.ns, ENGINE_PLURAL, name)
        api.core.delete_namespaced_secret("hf-wrong", installed.namespace)

    def gone() -> bool:
        items = api.custom.list_namespaced_custom_object(GROUP, VERSION, api.ns, ENGINE_PLURAL)["items"]
        return not {e["metadata"]["name"] for e in items} & expected.keys()

    wait_for(gone, timeout=60, desc="the two engines gone")


@pytest.mark.parametrize(
    ("verb", "resource", "where", "allowed"),
    [
        ("list", "secrets", "watched", False),
        ("watch", "secrets", "watched", False),
        # the operator's own <name>-credentials are created once and never changed (docs/security.md)
        ("patch", "secrets", "watched", False),
        ("update", "secrets", "watched", False),
        ("delete", "secrets", "watched", False),
        ("get", "secrets", "operator", False),
        ("get", "secrets", "default", False),
        ("create", "secrets", "default", False),
        ("watch", "secrets", "all", False),
        ("delete", "nodes", "cluster", False),
        ("create", "clusterroles", "cluster", False),
        ("create", "rolebindings", "watched", False),
        ("*", "*", "all", False),
        ("delete", f"llmengines.{GROUP}", "watched", False),
        ("delete", f"llmdeployments.{GROUP}", "watched", False),
        ("create", "pods", "watched", False),
        ("create", "pods/exec", "watched", False),
        ("list", f"llmengines.{GROUP}", "default", False),  # namespaced mode: only the watched one
        # what the operator needs (so a "no" above is not just a broken token)
        ("list", f"llmengines.{GROUP}", "watched", True),
        ("patch", f"llmdeployments.{GROUP}/scale", "watched", True),
        ("create", "jobs.batch", "watched", True),
        # authenticated /metrics (metrics.auth): the reviews of a scraper's token, nothing else
        ("create", "tokenreviews.authentication.k8s.io", "cluster", True),
        ("create", "subjectaccessreviews.authorization.k8s.io", "cluster", True),
        ("get", "tokenreviews.authentication.k8s.io", "cluster", False),
        # metadata of referenced Secrets (opt-in label); the code asks for metadata only
        ("get", "secrets", "watched", True),
        # each LLMDeployment's own credentials Secret and NetworkPolicy
        ("create", "secrets", "watched", True),
        ("create", "networkpolicies.networking.k8s.io", "watched", True),
        ("watch", "networkpolicies.networking.k8s.io", "watched", True),  # its watch cache of its own
        ("delete", "networkpolicies.networking.k8s.io", "default", False),
        ("watch", "customresourcedefinitions.apiextensions.k8s.io", "cluster", True),
    ],
)
def test_service_account_is_not_excessive(
    installed: Installed, verb: str, resource: str, where: str, allowed: bool
) -> None:
    scope = {
        "watched": ["-n", installed.namespace],
        "operator": ["-n", installed.operator_namespace],
        "default": ["-n", "default"],
        "all": ["--all-namespaces"],
        "cluster": [],
    }[where]
    base, _, sub = resource.partition("/")
    args = ["auth", "can-i", verb, base, *scope]
    if sub:
        args.append(f"--subresource={sub}")
    proc = installed.kubectl_as_operator(*args)
    answer = proc.stdout.strip()
    assert answer in ("yes", "no"), proc.stderr
    assert (answer == "yes") is allowed, f"can-i {verb} {resource} ({where}) = {answer}"


def test_no_credential_appears_anywhere(installed: Installed, flow: Flow) -> None:
    cluster = installed.cluster
    haystacks: dict[str, str] = {"operator log": installed.log()}
    for ns in (installed.namespace, installed.operator_namespace):
        # every object of every listable kind (statuses, ConfigMaps, annotations, pods, Jobs...),
        # except the Secrets that hold the credentials
        for path in cluster._namespaced_collections(ns):
            if path.endswith("/secrets"):
                continue
            for item in cluster._call("GET", path).get("items", []):
                haystacks[f"{path}/{item['metadata']['name']}"] = json.dumps(item)
        for event in client.CoreV1Api(cluster.api).list_namespaced_event(ns).items:
            haystacks[f"event {ns}/{event.metadata.name}"] = json.dumps(
                cluster.api.sanitize_for_serialization(event)
            )
    assert any(k.endswith(f"/{ENGINE_PLURAL}/chat") for k in haystacks), sorted(haystacks)[:20]
    assert any("/configmaps/" in k for k in haystacks) and any(k.startswith("event ") for k in haystacks)
    leaks = [
        f"{what} in {where}"
        for where, text in haystacks.items()
        for what, needle in needles().items()
        if needle in text
    ]
    assert not leaks, leaks
    # the scan does find a credential where one is: the Secrets themselves (data is base64)
    secrets = cluster._call("GET", f"/api/v1/namespaces/{installed.namespace}/secrets")
    assert {"HF token (base64)", "S3 secret key (base64)"} <= {
        what for what, needle in needles().items() if needle in json.dumps(secrets)
    }
    # the credentials do reach the builder and the servers, by reference only
    refs = {
        (e["name"], e["valueFrom"]["secretKeyRef"]["name"])
        for p in flow.builder_pods
        for c in p["spec"]["containers"]
        for e in c.get("env", [])
        if "valueFrom" in e and "secretKeyRef" in e["valueFrom"]
    }
    assert ("AWS_SECRET_ACCESS_KEY", "s3-credentials") in refs
    assert any(secret == "hf" for _, secret in refs), refs


def test_builder_and_server_pods_mount_no_service_account_token(flow: Flow) -> None:
    assert flow.builder_pods and len(flow.server_pods) == 2
    for pod in flow.builder_pods + flow.server_pods:
        name, spec = pod["metadata"]["name"], pod["spec"]
        assert spec.get("automountServiceAccountToken") is False, name
        for volume in spec.get("volumes") or []:
            assert not volume["name"].startswith("kube-api-access-"), (name, volume)
            sources = (volume.get("projected") or {}).get("sources") or []
            assert not any("serviceAccountToken" in s for s in sources), (name, volume)
        for c in spec["containers"] + (spec.get("initContainers") or []):
            for mount in c.get("volumeMounts") or []:
                assert not mount["mountPath"].startswith(SA_TOKEN_PATH), (name, c["name"], mount)


def test_gpu_catalog_configmap_is_read_in_the_operators_unwatched_namespace(
    installed: Installed, flow: Flow
) -> None:
    """settings.gpuCatalogConfigmap names a ConfigMap in the operator's namespace, which this release
    does not watch (a fresh-user trial: no Role there, the read was Forbidden). The operator, as the
    chart's ServiceAccount, reads it (its products in the log; the flow's engine reconciled it), and
    may get that ConfigMap only — not another one, not a list."""
    op_ns = installed.operator_namespace
    assert op_ns != installed.namespace
    for args, allowed in (
        (("get", f"configmaps/{GPU_CATALOG}"), "yes"),
        (("get", "configmaps/another"), "no"),
        (("list", "configmaps"), "no"),
        (("patch", f"configmaps/{GPU_CATALOG}"), "no"),
    ):
        proc = installed.kubectl_as_operator("auth", "can-i", *args, "-n", op_ns)
        assert proc.stdout.strip() == allowed, (args, proc.stdout, proc.stderr)
    wait_for(
        lambda: any(
            "GPU catalog extension" in line and CATALOG_GPU in line for line in installed.log().splitlines()
        ),
        timeout=30,
        desc=f"the operator's log shows {CATALOG_GPU} from ConfigMap {op_ns}/{GPU_CATALOG}",
    )
    assert "GPU catalog ConfigMap" not in installed.log()  # the "unreadable" warning


def test_a_missing_watched_namespace_fails_the_install_naming_the_value_and_the_fix(
    installed: Installed, tmp_path: Path
) -> None:
    """A name in watchNamespaces that does not exist: the install fails before creating anything,
    naming the value, the namespace and the fix (the chart's lookup; Helm alone would say only
    ``namespaces "…" not found`` while creating the Role). Without a cluster (helm template) the chart
    cannot know, and renders."""
    cluster = installed.cluster
    ns = cluster.create_namespace("e2e-miss")
    missing = f"no-such-{ns}"
    values = ["--set", f"watchNamespaces={{{installed.namespace},{missing}}}"]
    try:
        proc = cluster.helm(
            "install", "e2e-miss", str(CHART), "--namespace", ns, *values, check=False, timeout=120
        )
        assert proc.returncode != 0, proc.stdout
        assert f'watchNamespaces: namespace "{missing}" does not exist' in proc.stderr, proc.stderr
        assert f"kubectl create namespace {missing}" in proc.stderr, proc.stderr
        listed = cluster.helm("list", "--namespace", ns, "--all", "-q").stdout.split()
        assert "e2e-miss" not in listed  # failed at render time: no release, nothing created
        rbac = client.RbacAuthorizationV1Api(cluster.api)
        assert not [r for r in rbac.list_cluster_role().items if r.metadata.name.startswith(f"{ns}-")]
        offline = cluster.helm(
            "template",
            "e2e-miss",
            str(CHART),
            "--namespace",
            ns,
            "--kube-version",
            "1.34.4",
            *values,
            check=False,
            timeout=60,
        )
        assert offline.returncode == 0, offline.stderr
    finally:
        cluster.helm("uninstall", "e2e-miss", "--namespace", ns, check=False, timeout=90)
        cluster.delete_namespace(ns)


def test_a_release_of_the_same_name_in_another_namespace_installs_beside_the_first(
    installed: Installed,
) -> None:
    """Release names are unique per namespace only: a second release named like the module's
    (``e2e``) in another namespace installs — its cluster-scoped objects carry its namespace — and
    its uninstall leaves the first release's ClusterRoles and ClusterRoleBinding in place."""
    cluster = installed.cluster
    rbac = client.RbacAuthorizationV1Api(cluster.api)

    def cluster_scoped(ns: str) -> set[str]:
        roles = {f"ClusterRole/{r.metadata.name}" for r in rbac.list_cluster_role().items}
        bindings = {f"ClusterRoleBinding/{b.metadata.name}" for b in rbac.list_cluster_role_binding().items}
        return {n for n in roles | bindings if n.split("/", 1)[1].startswith(f"{ns}-{RELEASE}-")}

    first = cluster_scoped(installed.operator_namespace)
    ns = cluster.create_namespace("e2e-same")
    try:
        proc = cluster.helm("install", RELEASE, str(CHART), "--namespace", ns, check=False, timeout=120)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert first == {
            f"ClusterRole/{installed.operator_namespace}-{RELEASE}-trtllm-operator-cluster",
            f"ClusterRole/{installed.operator_namespace}-{RELEASE}-trtllm-operator-metrics-reader",
            f"ClusterRoleBinding/{installed.operator_namespace}-{RELEASE}-trtllm-operator-cluster",
        }
        assert len(cluster_scoped(ns)) == len(first)
        # NOTES.txt names the metrics-reader ClusterRole to bind
        assert f"{ns}-{RELEASE}-trtllm-operator-metrics-reader" in proc.stdout, proc.stdout
    finally:
        cluster.helm("uninstall", RELEASE, "--namespace", ns, "--wait", check=False, timeout=90)
        cluster.delete_namespace(ns)
    assert cluster_scoped(ns) == set()
    assert cluster_scoped(installed.operator_namespace) == first


def test_default_install_watches_only_its_own_namespace(installed: Installed, tmp_path: Path) -> None:
    """No values (#24): namespaced mode in the release's namespace is the default — a Role there, no
    namespaced grant anywhere else (a second release, own namespace)."""
    cluster = installed.cluster
    ns = cluster.create_namespace("e2e-def")
    try:
        cluster.helm("install", "e2e-def", str(CHART), "--namespace", ns, timeout=120)
        sa = "e2e-def-trtllm-operator"
        token = cluster.kubectl("create", "token", sa, "-n", ns, "--duration", "10m").stdout.strip()
        kubeconfig = token_kubeconfig(cluster, token, tmp_path / "def.kubeconfig")

        def can(*args: str) -> str:
            argv = [str(cluster.bin_dir / "kubectl"), f"--kubeconfig={kubeconfig}", "auth", "can-i", *args]
            proc = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
            return proc.stdout.strip()

        assert can("list", f"llmengines.{GROUP}", "-n", ns) == "yes"
        assert can("create", "jobs.batch", "-n", ns) == "yes"
        assert can("create", "tokenreviews.authentication.k8s.io") == "yes"
        for args in (
            ("list", f"llmengines.{GROUP}", "--all-namespaces"),
            ("list", f"llmengines.{GROUP}", "-n", "default"),
            ("create", "jobs.batch", "-n", "default"),
            ("get", "secrets", "-n", "default"),
            ("watch", "namespaces"),
        ):
            assert can(*args) == "no", args
        objs = [
            o for o in yaml.safe_load_all(cluster.helm("get", "manifest", "e2e-def", "-n", ns).stdout) if o
        ]
        roles = {(o["metadata"].get("namespace"), o["metadata"]["name"]) for o in objs if o["kind"] == "Role"}
        assert roles == {(ns, "e2e-def-trtllm-operator")}
        (dep,) = [o for o in objs if o["kind"] == "Deployment"]
        assert f"--namespace={ns}" in dep["spec"]["template"]["spec"]["containers"][0]["args"]
    finally:
        cluster.helm("uninstall", "e2e-def", "--namespace", ns, check=False, timeout=90)
        cluster.delete_namespace(ns)


def test_cluster_wide_install_grants_cluster_wide_reads_and_no_secret_listing(
    installed: Installed, tmp_path: Path
) -> None:
    """clusterWide: true (an opt-in since #24) — a ClusterRole; the same limits hold (second
    release, own namespace)."""
    cluster = installed.cluster
    ns = cluster.create_namespace("e2e-cw")
    try:
        cluster.helm(
            "install", "e2e-cw", str(CHART), "--namespace", ns, "--set", "clusterWide=true", timeout=120
        )
        sa = "e2e-cw-trtllm-operator"
        token = cluster.kubectl("create", "token", sa, "-n", ns, "--duration", "10m").stdout.strip()
        kubeconfig = token_kubeconfig(cluster, token, tmp_path / "cw.kubeconfig")

        def can(*args: str) -> str:
            argv = [str(cluster.bin_dir / "kubectl"), f"--kubeconfig={kubeconfig}", "auth", "can-i", *args]
            proc = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
            return proc.stdout.strip()

        assert can("list", f"llmengines.{GROUP}", "--all-namespaces") == "yes"
        # no namespaces: kopf 1.45.2 lists them only for a namespaced operator that scans
        # (observation.py namespace_observer), and the operator scans only cluster-wide (trial 53 #5)
        assert can("watch", "namespaces") == "no"
        assert can("create", "jobs.batch", "-n", "default") == "yes"
        # the opt-in label of referenced Secrets is read in every namespace it serves (metadata only
        # in the code; Kubernetes has no metadata-only verb)
        assert can("get", "secrets", "-n", "default") == "yes"
        for args in (
            ("list", "secrets", "--all-namespaces"),
            ("watch", "secrets", "-n", ns),
            ("delete", "nodes"),
            ("create", "clusterroles"),
            ("*", "*", "--all-namespaces"),
            ("delete", f"llmengines.{GROUP}", "-n", "default"),
        ):
            assert can(*args) == "no", args
        objs = yaml.safe_load_all(cluster.helm("get", "manifest", "e2e-cw", "-n", ns).stdout)
        kinds = {o["kind"] for o in objs if o}
        assert {"ClusterRole", "ClusterRoleBinding"} <= kinds and "Role" not in kinds
    finally:
        cluster.helm("uninstall", "e2e-cw", "--namespace", ns, check=False, timeout=90)
        cluster.delete_namespace(ns)


def test_operator_metrics_answer_only_an_authorized_token(installed: Installed) -> None:
    """The operator, running with the chart's RBAC (TokenReview and SubjectAccessReview create),
    serves /metrics over HTTPS (metrics.secure, the chart's default) to a ServiceAccount bound to the
    metrics-reader rule only; liveness needs no token (the kubelet's probe has none)."""
    cluster, ns = installed.cluster, installed.namespace
    tokens = metrics_tokens(cluster, ns)
    try:
        assert get_metrics(installed.metrics_port)[0] == 401
        assert get_metrics(installed.metrics_port, token=tokens.stranger)[0] == 403
        assert get_metrics(installed.metrics_port, token=tokens.reader)[0] == 200

        def get(path: str, port: int) -> int:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=30) as resp:
                return int(resp.status)

        assert get("/healthz", installed.liveness_port) == 200
        assert not rbac_denials(installed.log()), rbac_denials(installed.log())
    finally:
        delete_metrics_reader(cluster, ns)


#: The built-in autoscaler is wired in (its module exists and the handlers package imports it).
_HANDLERS = importlib.util.find_spec("trtllm_operator.handlers")
AUTOSCALER = (
    importlib.util.find_spec("trtllm_operator.handlers.autoscaler") is not None
    and _HANDLERS is not None
    and _HANDLERS.origin is not None
    and "autoscaler" in Path(_HANDLERS.origin).read_text()
)


@pytest.mark.skipif(
    not AUTOSCALER, reason="the built-in autoscaler (handlers/autoscaler.py) is not there yet"
)
def test_builtin_autoscaler_scales_through_the_scale_subresource(installed: Installed, flow: Flow) -> None:
    """Load on emulated Triton metrics (the pods' IPs, on ``installed.serving_metrics_port`` in place
    of Triton's 8002) → the operator, as the chart's ServiceAccount, patches ``/scale`` → more pods
    Ready."""
    from trtllm_operator.emulator import Control, Fleet, PodFollower  # noqa: PLC0415

    api = Api(installed.cluster, installed.namespace)
    # (kvCacheUtilization stays under the shared builder's 0.8 target: requests alone scale it)
    deployment = an_autoscaled_deployment(
        "auto",
        "chat",
        max_replicas=3,
        up={"stabilizationWindowSeconds": 0, "maxReplicasPerStep": 4, "periodSeconds": 1},
        down={"stabilizationWindowSeconds": 300, "maxReplicasPerStep": 1, "periodSeconds": 1},
    )
    idle = Control(fixed={"requests": 0, "kvCacheUtilization": 0.2})
    assert installed.serving_metrics_port, "the operator scrapes Triton's fixed 8002 (conftest.installed)"
    with Fleet(port=installed.serving_metrics_port, control=idle) as fleet:
        follower = PodFollower(fleet, api.core, api.ns, f"{GROUP}/deployment=auto", poll_seconds=0.3).start()
        try:
            api.create(deployment)

            def reading(n: int) -> bool:
                s = status_of(api, DEPLOYMENT_PLURAL, "auto")
                auto = s.get("autoscaling") or {}
                return s.get("readyReplicas") == n and auto.get("activeRequestUtilization") is not None

            wait_for(lambda: reading(1), timeout=60, interval=0.3, desc="auto: 1 replica, metrics read")
            fleet.set_control(Control(fixed={"requests": 80, "kvCacheUtilization": 0.5}))
            wait_for(lambda: reading(3), timeout=60, interval=0.3, desc="auto: scaled to 3 Ready replicas")
        finally:
            follower.stop()
    obj = api.get(DEPLOYMENT_PLURAL, "auto")
    assert obj["spec"]["replicas"] == 3
    scale_writers = {
        m["manager"] for m in obj["metadata"].get("managedFields", []) if m.get("subresource") == "scale"
    }
    assert scale_writers == {"trtllm-operator"}, obj["metadata"].get("managedFields")
    log = installed.log()
    denied = rbac_denials(log)
    assert not denied, "RBAC denied the autoscaler:\n" + "\n".join(denied[:10])


def test_uninstall_removes_the_operator_and_keeps_crds_artifacts_and_cache_index(
    installed: Installed, flow: Flow
) -> None:
    """Last in the module: ``helm uninstall`` (docs/install.md, "what stays")."""
    cluster, ns = installed.cluster, installed.namespace
    installed.stop()
    cluster.helm("uninstall", "e2e", "--namespace", installed.operator_namespace, "--wait", timeout=120)
    api = Api(cluster, ns)
    rbac = client.RbacAuthorizationV1Api(cluster.api)
    prefix = f"{installed.operator_namespace}-e2e-trtllm-operator"  # cluster-scoped names (_helpers.tpl)
    assert not [r for r in rbac.list_cluster_role().items if r.metadata.name.startswith(prefix)]
    assert not [b for b in rbac.list_cluster_role_binding().items if b.metadata.name.startswith(prefix)]
    assert not rbac.list_namespaced_role(ns).items
    assert (
        not client.CoreV1Api(cluster.api)
        .list_namespaced_service_account(
            installed.operator_namespace, field_selector="metadata.name=e2e-trtllm-operator"
        )
        .items
    )
    # the token died with its ServiceAccount
    proc = installed.kubectl_as_operator("auth", "can-i", "list", f"llmengines.{GROUP}", "-n", ns)
    assert proc.stdout.strip() != "yes", proc.stdout + proc.stderr
    # what stays: the CRDs, the user's objects, the serving fleet, the engine-cache index
    ext = client.ApiextensionsV1Api(cluster.api)
    for plural in (ENGINE_PLURAL, DEPLOYMENT_PLURAL):
        assert ext.read_custom_resource_definition(f"{plural}.{GROUP}")
    assert status_of(api, ENGINE_PLURAL, "chat")["phase"] == "Ready"
    assert client.AppsV1Api(cluster.api).read_namespaced_deployment("chat", ns).spec.replicas == 2
    index = api.core.list_namespaced_config_map(
        ns, label_selector="app.kubernetes.io/component=engine-artifact"
    )
    assert [cm.metadata.labels["llm.trtllm-operator.dev/engine-key"] for cm in index.items] == [
        flow.prepared.key[:63]
    ]
