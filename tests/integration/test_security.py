"""Issue 24's High findings, each as an attack against the real control plane that must fail.

The operator runs in-process against a real API server, scheduler, Job controller and garbage
collector with kwok GPU nodes (tests/support). Each test plays the attacker — a user who may create
LLMEngines and LLMDeployments in a namespace — and checks that the operator refuses with a
condition naming what and why, and that the attacked object is untouched:

* child takeover: a workload or Service that someone else created under the deployment's name is
  neither patched nor adopted (``ChildConflict``);
* a forged engine-cache entry is not trusted;
* Secrets reach pods only when marked usable by whoever controls them (``SecretNotAllowed``);
* ``reclaimPolicy`` Delete → Retain keeps the artifact PVC when the LLMEngine is deleted, and a PVC
  that an LLMDeployment serves from is never deleted with its LLMEngine;
* a builder log tail that echoes credentials reaches neither the LLMEngine's status nor its Events
  (one redactor at every write, :mod:`engine_builder.redaction`);
* a tampered artifact file stops the serving pod before Triton starts, and the LLMDeployment says
  which file (``ArtifactTampered``).
"""

from __future__ import annotations

import base64
import http.server
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest
from kubernetes import client
from support.api import Api as SharedApi
from support.artifacts import cache_artifact, write_manifest
from support.cluster import LocalCluster
from support.manifests import DELAY_MS, EXIT_CODE, H100, MESSAGE, OUTCOME, a_cached_engine, a_deployment
from support.operator import HF_CONFIG_DIR, running_operator
from support.ports import free_port
from support.wait import wait_for

from trtllm_operator.api.wire import (
    ANNOTATION_ENGINE_KEY,
    ARTIFACT_DATA_KEY,
    DEPLOYMENT_PLURAL,
    ENGINE_PLURAL,
    GROUP,
    LABEL_DEPLOYMENT,
    LABEL_SECRET_USABLE,
    VERSION,
)
from trtllm_operator.decide.engine_spec import PreparedEngine, prepare_engine
from trtllm_operator.handlers import autoscaler as autoscaler_handlers
from trtllm_operator.kube import SECRET, Kube
from trtllm_operator.render.builder_job import storage_labels

pytestmark = pytest.mark.slow


#: Builder pods that kwok runs for 300 ms (no retries), for the tests here that do build.
KWOK_GPU = {"product": H100, "backoffLimit": 0, "podAnnotations": {DELAY_MS: "300"}}


class Api(SharedApi):
    """The shared wrapper plus conditions of either kind and the engine's PVC."""

    def condition_of(self, plural: str, name: str, type_: str) -> dict[str, Any] | None:
        status = self.get(plural, name).get("status") or {}
        return next((c for c in status.get("conditions") or [] if c["type"] == type_), None)

    def ready_reason(self, plural: str, name: str, reason: str) -> dict[str, Any] | None:
        cond = self.condition_of(plural, name, "Ready")
        return cond if cond is not None and cond["reason"] == reason else None

    def pvc(self, name: str) -> dict[str, Any] | None:
        try:
            return dict(self.san(self.core.read_namespaced_persistent_volume_claim(name, self.ns)))
        except client.ApiException as exc:
            if exc.status == 404:
                return None
            raise


@pytest.fixture
def api(cluster: LocalCluster, namespace: str) -> Iterator[Api]:
    a = Api(cluster, namespace)
    with a.artifact_pvc():
        yield a


def foreign_deployment(name: str) -> dict[str, Any]:
    """A plain Deployment a user created under the name an LLMDeployment will want."""
    labels = {"app": "theirs"}
    return {
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "app", "image": "registry.example/theirs:1"}]},
            },
        },
    }


# ----------------------------------------------------------------------------- child takeover
def test_foreign_workload_under_the_deployment_name_is_neither_patched_nor_adopted(
    cluster: LocalCluster, api: Api
) -> None:
    engine = a_cached_engine("llama", gpu=KWOK_GPU)
    cache_artifact(api.core, api.ns, engine)
    api.create(engine)
    theirs = api.apps.create_namespaced_deployment(api.ns, foreign_deployment("chat"))
    api.create(a_deployment("chat", "llama", replicas=3))

    with running_operator(cluster, [api.ns]):
        cond = wait_for(
            lambda: api.ready_reason(DEPLOYMENT_PLURAL, "chat", "ChildConflict"),
            timeout=60,
            desc="chat refused with ChildConflict",
        )
        assert "Deployment chat already exists" in cond["message"]
        assert "no controller ownerReference" in cond["message"]
        assert api.get(DEPLOYMENT_PLURAL, "chat")["status"]["phase"] == "Failed"
        # Nothing else of the deployment was written either: it stopped before any child.
        assert api.core.list_namespaced_service(api.ns).items == []
        # Let a few more reconciles pass (resync is 10 s in tests), then check the victim.
        wait_for(
            lambda: any(
                e.reason == "ChildConflict"
                for e in api.core.list_namespaced_event(
                    api.ns, field_selector="involvedObject.name=chat,involvedObject.kind=LLMDeployment"
                ).items
            ),
            desc="a Warning Event names the conflict",
        )
    after = api.apps.read_namespaced_deployment("chat", api.ns)
    assert after.metadata.generation == theirs.metadata.generation == 1  # spec never written
    assert {m.manager for m in after.metadata.managed_fields} & {"trtllm-operator"} == set()
    assert not after.metadata.owner_references
    assert after.spec.replicas == 1
    assert after.spec.template.spec.containers[0].image == "registry.example/theirs:1"


def test_foreign_service_stops_the_rollout_and_clears_once_removed(cluster: LocalCluster, api: Api) -> None:
    engine = a_cached_engine("llama", gpu=KWOK_GPU)
    cache_artifact(api.core, api.ns, engine)
    api.create(engine)
    api.core.create_namespaced_service(
        api.ns,
        {"metadata": {"name": "chat"}, "spec": {"selector": {"app": "theirs"}, "ports": [{"port": 80}]}},
    )
    api.create(a_deployment("chat", "llama"))

    with running_operator(cluster, [api.ns]):
        cond = wait_for(lambda: api.ready_reason(DEPLOYMENT_PLURAL, "chat", "ChildConflict"), timeout=60)
        assert "Service chat already exists" in cond["message"]
        assert api.apps.list_namespaced_deployment(api.ns).items == []
        svc = api.core.read_namespaced_service("chat", api.ns)
        assert svc.spec.selector == {"app": "theirs"} and not svc.metadata.owner_references

        api.core.delete_namespaced_service("chat", api.ns)
        wait_for(
            lambda: api.apps.list_namespaced_deployment(api.ns).items,
            timeout=60,
            desc="the workload is created once the foreign Service is gone",
        )
        svc = wait_for(lambda: _service(api, "chat"), timeout=30)
        assert svc.metadata.owner_references[0].kind == "LLMDeployment"


# ----------------------------------------------------------------------------- serving hardening
def _read(fn: Any, *args: Any) -> Any:
    try:
        return fn(*args)
    except client.ApiException as exc:
        if exc.status == 404:
            return None
        raise


def test_serving_children_carry_the_deployments_own_credentials_and_network_policy(
    cluster: LocalCluster, api: Api
) -> None:
    """Issue 24 item 5 on the real API server: the operator creates ``chat-credentials`` (Triton's
    admin header value and the SSH key pair; immutable, controlled by the LLMDeployment) before the
    pods that reference it, a client Service without the metrics port, and the NetworkPolicy
    ``chat`` — admitted (validated) by the API server. NetworkPolicy is enforced only by a network
    plugin; this control plane has none, so what the policy admits is checked on its rules
    (tests/unit/test_serving_hardening.py), not on traffic. Turning the setting off removes it."""
    from cryptography.hazmat.primitives.serialization import (  # noqa: PLC0415
        Encoding,
        PublicFormat,
        load_ssh_private_key,
    )

    engine = a_cached_engine("llama", gpu=KWOK_GPU)
    cache_artifact(api.core, api.ns, engine)
    api.create(engine)
    api.create(a_deployment("chat", "llama"))
    net = client.NetworkingV1Api(api.core.api_client)
    with running_operator(cluster, [api.ns], serving_client_namespaces=("gateway",)) as operator:
        dep = wait_for(lambda: _read(api.apps.read_namespaced_deployment, "chat", api.ns), timeout=60)
        uid = api.get(DEPLOYMENT_PLURAL, "chat")["metadata"]["uid"]
        secret = api.core.read_namespaced_secret("chat-credentials", api.ns)
        assert secret.immutable is True
        (ref,) = secret.metadata.owner_references
        assert (ref.kind, ref.uid, ref.controller) == ("LLMDeployment", uid, True)
        data = {k: base64.b64decode(v).decode() for k, v in secret.data.items()}
        assert len(data["triton-admin-key"]) == 64 and int(data["triton-admin-key"], 16) >= 0
        key = load_ssh_private_key(data["id_ed25519"].encode(), password=None)
        public = key.public_key().public_bytes(Encoding.OpenSSH, PublicFormat.OpenSSH).decode()
        assert data["authorized_keys"].startswith(public + " ")
        (container,) = dep.spec.template.spec.containers
        env = {e.name: e for e in container.env}
        assert env["TRITON_ADMIN_KEY"].value_from.secret_key_ref.name == "chat-credentials"
        assert data["triton-admin-key"] not in json.dumps(api.san(dep))  # by reference only

        svc = api.core.read_namespaced_service("chat", api.ns)
        assert {p.port for p in svc.spec.ports} == {8000, 8001}  # no 8002 on the client Service
        assert 8002 in {p.container_port for p in container.ports}  # scraped per pod

        live = wait_for(lambda: _read(net.read_namespaced_network_policy, "chat", api.ns), timeout=30)
        policy = api.san(live)
        assert policy["metadata"]["ownerReferences"][0]["uid"] == uid
        assert policy["spec"]["podSelector"] == {"matchLabels": {LABEL_DEPLOYMENT: "chat"}}
        assert policy["spec"]["policyTypes"] == ["Ingress"]
        clients, metrics = policy["spec"]["ingress"]
        assert {p["port"] for p in clients["ports"]} == {8000, 8001}
        assert clients["from"][0] == {"podSelector": {}}  # the namespace's own pods
        assert clients["from"][1]["namespaceSelector"]["matchExpressions"][0]["values"] == ["gateway"]
        assert {p["port"] for p in metrics["ports"]} == {8002}
        (monitoring,) = metrics["from"]
        assert set(monitoring["namespaceSelector"]["matchExpressions"][0]["values"]) == {
            "monitoring",
            operator.settings.operator_namespace,
        }
        # a later reconcile (a spec change) keeps the values running pods use: no rewrite
        api.patch(DEPLOYMENT_PLURAL, "chat", {"spec": {"replicas": 2}})
        generation = api.get(DEPLOYMENT_PLURAL, "chat")["metadata"]["generation"]
        wait_for(
            lambda: (
                api.get(DEPLOYMENT_PLURAL, "chat").get("status", {}).get("observedGeneration") == generation
            ),
            timeout=60,
        )
        again = api.core.read_namespaced_secret("chat-credentials", api.ns)
        assert again.data == secret.data
        assert again.metadata.resource_version == secret.metadata.resource_version
    with running_operator(cluster, [api.ns], serving_network_policy=False):
        wait_for(
            lambda: _read(net.read_namespaced_network_policy, "chat", api.ns) is None,
            timeout=60,
            desc="the NetworkPolicy the operator created is removed when the setting is off",
        )


def test_foreign_secret_under_the_credentials_name_is_neither_used_nor_adopted(
    cluster: LocalCluster, api: Api
) -> None:
    """A Secret ``chat-credentials`` someone else created (its values chosen by them) is a
    ChildConflict: no pod is rendered to use it, and it is not patched or adopted."""
    engine = a_cached_engine("llama", gpu=KWOK_GPU)
    cache_artifact(api.core, api.ns, engine)
    api.create(engine)
    theirs = api.core.create_namespaced_secret(
        api.ns,
        {"metadata": {"name": "chat-credentials"}, "stringData": {"triton-admin-key": "known-to-them"}},
    )
    api.create(a_deployment("chat", "llama"))
    with running_operator(cluster, [api.ns]):
        cond = wait_for(lambda: api.ready_reason(DEPLOYMENT_PLURAL, "chat", "ChildConflict"), timeout=60)
        assert "Secret chat-credentials already exists" in cond["message"]
        assert "no controller ownerReference" in cond["message"]
        assert api.apps.list_namespaced_deployment(api.ns).items == []
        api.core.delete_namespaced_secret("chat-credentials", api.ns)
        wait_for(
            lambda: api.apps.list_namespaced_deployment(api.ns).items,
            timeout=60,
            desc="served once the foreign Secret is gone, with a Secret of its own",
        )
    ours = api.core.read_namespaced_secret("chat-credentials", api.ns)
    assert (
        ours.metadata.uid != theirs.metadata.uid and ours.metadata.owner_references[0].kind == "LLMDeployment"
    )
    assert base64.b64decode(ours.data["triton-admin-key"]).decode() != "known-to-them"


def _service(api: Api, name: str) -> Any:
    try:
        return api.core.read_namespaced_service(name, api.ns)
    except client.ApiException as exc:
        if exc.status == 404:
            return None
        raise


def test_forged_cache_entry_is_not_trusted(cluster: LocalCluster, api: Api) -> None:
    engine = a_cached_engine("llama", gpu=KWOK_GPU)
    prepared = prepare_engine("llama", engine["spec"])
    assert isinstance(prepared, PreparedEngine)
    # Same name and data as a real entry, pointing at a PVC the attacker controls — but without the
    # labels and full-key annotation the operator writes.
    record = {"engineKey": prepared.key, "uri": "pvc://attacker/" + prepared.key, "storageId": "x"}
    api.core.create_namespaced_config_map(
        api.ns,
        {"metadata": {"name": prepared.cache_name}, "data": {ARTIFACT_DATA_KEY: json.dumps(record)}},
    )
    api.create(engine)
    with running_operator(cluster, [api.ns]):
        cond = wait_for(lambda: api.ready_reason(ENGINE_PLURAL, "llama", "ChildConflict"), timeout=60)
    assert f"ConfigMap {prepared.cache_name} already exists" in cond["message"]
    assert ANNOTATION_ENGINE_KEY in cond["message"] or "label" in cond["message"]
    status = api.get(ENGINE_PLURAL, "llama")["status"]
    assert status["phase"] == "Failed" and not status.get("artifact")
    assert api.jobs() == []


# ----------------------------------------------------------------------------- Secrets
def test_secret_not_marked_usable_is_refused_and_marking_it_lets_the_build_start(
    cluster: LocalCluster, api: Api
) -> None:
    api.core.create_namespaced_secret(api.ns, {"metadata": {"name": "hf"}, "stringData": {"token": "hf_x"}})
    engine = a_cached_engine("gated", gpu=KWOK_GPU)
    engine["spec"]["model"]["credentialsSecretRef"] = {"name": "hf", "key": "token"}
    api.create(engine)
    with running_operator(cluster, [api.ns]):
        cond = wait_for(lambda: api.ready_reason(ENGINE_PLURAL, "gated", "SecretNotAllowed"), timeout=60)
        assert cond["message"].startswith("spec.model.credentialsSecretRef.name: Secret")
        assert f"{LABEL_SECRET_USABLE}=true" in cond["message"]
        assert api.jobs() == []

        api.core.patch_namespaced_secret(
            "hf", api.ns, {"metadata": {"labels": {LABEL_SECRET_USABLE: "true"}}}
        )
        api.patch(ENGINE_PLURAL, "gated", {"metadata": {"labels": {"retry": "1"}}})
        job = wait_for(lambda: next(iter(api.jobs()), None), timeout=60, desc="the build starts")
    env = job["spec"]["template"]["spec"]["containers"][0]["env"]
    assert {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf", "key": "token"}}} in env


def test_operator_reads_only_secret_metadata(cluster: LocalCluster, namespace: str) -> None:
    core = client.CoreV1Api(cluster.api)
    core.create_namespaced_secret(
        namespace, {"metadata": {"name": "s", "labels": {"a": "b"}}, "stringData": {"k": "sekrit-value"}}
    )
    kube = Kube(cluster.api_client())
    meta = kube.get_metadata(SECRET, namespace, "s")
    assert meta is not None and meta["labels"] == {"a": "b"} and meta["name"] == "s"
    assert "sekrit" not in json.dumps(meta)
    assert kube.get_metadata(SECRET, namespace, "absent") is None


# ----------------------------------------------------------------------------- reclaim
def _delete_policy_engine(name: str) -> tuple[dict[str, Any], PreparedEngine]:
    engine = a_cached_engine(
        name, gpu=KWOK_GPU, storage={"createPVC": {"size": "20Gi"}, "reclaimPolicy": "Delete"}
    )
    prepared = prepare_engine(name, engine["spec"])
    assert isinstance(prepared, PreparedEngine)
    return engine, prepared


def _owners(api: Api, claim: str) -> list[str]:
    return [r["name"] for r in ((api.pvc(claim) or {}).get("metadata") or {}).get("ownerReferences") or []]


def test_reclaim_policy_delete_then_retain_keeps_the_artifact(cluster: LocalCluster, api: Api) -> None:
    engine, _ = _delete_policy_engine("drop")
    api.create(engine)
    with running_operator(cluster, [api.ns]):
        # The operator creates the PVC with the build (it stays Pending: no PV binder here; the
        # ownerReference follows the policy whatever the build does).
        wait_for(lambda: _owners(api, "drop-artifacts") == ["drop"], timeout=60, desc="Delete: owned")
        api.patch(ENGINE_PLURAL, "drop", {"spec": {"storage": {"reclaimPolicy": "Retain"}}})
        wait_for(
            lambda: api.pvc("drop-artifacts") is not None and _owners(api, "drop-artifacts") == [],
            timeout=60,
            desc="Retain: the PVC no longer goes with the LLMEngine",
        )
        sentinel = _owned_configmap(
            api, "sentinel", "drop", api.get(ENGINE_PLURAL, "drop")["metadata"]["uid"]
        )
        api.delete(ENGINE_PLURAL, "drop")
        wait_for(
            lambda: _configmap_gone(api, sentinel), timeout=90, desc="GC collected the engine's dependents"
        )
        assert api.jobs() == []
    kept = api.pvc("drop-artifacts")
    assert kept is not None and not kept["metadata"].get("deletionTimestamp")


def test_pvc_an_llmdeployment_serves_from_is_not_deleted_with_its_engine(
    cluster: LocalCluster, api: Api
) -> None:
    engine, prepared = _delete_policy_engine("drop")
    cache_artifact(api.core, api.ns, engine)  # built earlier: the PVC and its cache entry exist
    api.core.create_namespaced_persistent_volume_claim(
        api.ns,
        {
            "metadata": {"name": "drop-artifacts", "labels": storage_labels(prepared)},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "20Gi"}}},
        },
    )
    api.create(engine)
    with running_operator(cluster, [api.ns]):
        wait_for(lambda: _owners(api, "drop-artifacts") == ["drop"], timeout=60, desc="Delete: owned")
        api.create(a_deployment("chat", "drop"))
        wait_for(lambda: api.apps.list_namespaced_deployment(api.ns).items, timeout=60)
        assert _owners(api, "drop-artifacts") == [], "served claim released before the pods were created"
        uid = api.get(ENGINE_PLURAL, "drop")["metadata"]["uid"]
        sentinel = _owned_configmap(api, "sentinel", "drop", uid)
        api.delete(ENGINE_PLURAL, "drop")
        wait_for(
            lambda: _configmap_gone(api, sentinel), timeout=90, desc="GC collected the engine's dependents"
        )
    kept = api.pvc("drop-artifacts")
    assert kept is not None and not kept["metadata"].get("deletionTimestamp")


def _owned_configmap(api: Api, name: str, owner: str, uid: str) -> str:
    """A ConfigMap owned by LLMEngine ``owner``: once it is gone, the garbage collector has processed
    the owner's deletion (so whatever is still there was deliberately kept)."""
    ref = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "LLMEngine", "name": owner, "uid": uid}
    api.core.create_namespaced_config_map(api.ns, {"metadata": {"name": name, "ownerReferences": [ref]}})
    return name


def _configmap_gone(api: Api, name: str) -> bool:
    try:
        api.core.read_namespaced_config_map(name, api.ns)
    except client.ApiException as exc:
        if exc.status == 404:
            return True
        raise
    return False


# ----------------------------------------------------------------------------- bounded inputs
class _Flood(http.server.BaseHTTPRequestHandler):
    """Answers every GET with a 100 MB Prometheus text page (comment lines), counting what it sent."""

    sent: ClassVar[list[int]] = []
    SIZE = 100 * 10**6

    def do_GET(self) -> None:
        line = b"# " + b"x" * 1021 + b"\n"
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.end_headers()
        sent = 0
        try:
            while sent < self.SIZE:
                self.wfile.write(line * 64)
                sent += len(line) * 64
        except OSError:  # the client hung up
            pass
        self.sent.append(sent)

    def log_message(self, *args: Any) -> None:
        pass


def test_a_100_mb_metrics_page_is_cut_off_and_the_operator_stays_responsive(
    cluster: LocalCluster, api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The operator must know the port before the pod (and its IP) exists, so the server cannot bind
    # port 0: support.ports.free_port's residual race applies (a lost race fails the bind loudly).
    port = free_port()
    monkeypatch.setattr(autoscaler_handlers, "METRICS_PORT", port)
    engine = a_cached_engine("llama", gpu=KWOK_GPU)
    cache_artifact(api.core, api.ns, engine)
    api.create(engine)
    flood = a_deployment("flood", "llama")
    flood["spec"]["autoscaling"] = {
        "enabled": True,
        "minReplicas": 1,
        "maxReplicas": 2,
        "targets": {"activeRequestUtilization": 0.7},
        "metrics": {"source": "pods", "scrapeIntervalSeconds": 1},
    }
    api.create(flood)
    servers: list[http.server.ThreadingHTTPServer] = []
    with running_operator(cluster, [api.ns]):
        pod = wait_for(
            lambda: next(
                (
                    p
                    for p in api.core.list_namespaced_pod(
                        api.ns, label_selector="llm.trtllm-operator.dev/deployment=flood"
                    ).items
                    if p.status.pod_ip and p.status.phase == "Running"
                ),
                None,
            ),
            timeout=60,
            desc="the serving pod runs with an IP",
        )
        server = http.server.ThreadingHTTPServer((pod.status.pod_ip, port), _Flood)
        servers.append(server)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        try:
            wait_for(lambda: len(_Flood.sent) >= 3, timeout=60, desc="three scrapes of the flood")
            # Each scrape was cut off near the operator's limit, far below the 100 MB offered.
            assert max(_Flood.sent) < 16 * 2**20, _Flood.sent
            decisions = (api.get(DEPLOYMENT_PLURAL, "flood").get("status") or {}).get("autoscaling") or {}
            assert decisions.get("activeRequestUtilization") is None  # no data: nothing was parsed
            # Meanwhile the operator serves everything else: a new deployment rolls out.
            api.create(a_deployment("other", "llama"))
            wait_for(
                lambda: (
                    api.apps.list_namespaced_deployment(api.ns, field_selector="metadata.name=other").items
                ),
                timeout=30,
                desc="another deployment reconciled during the flood",
            )
        finally:
            for s in servers:
                s.shutdown()
                s.server_close()


def test_a_config_json_with_1e18_layers_is_refused_and_the_operator_stays_responsive(
    cluster: LocalCluster, api: Api, tmp_path: Path
) -> None:
    configs = tmp_path / "configs"
    configs.mkdir()
    config = json.loads((HF_CONFIG_DIR / "meta-llama__Llama-3.1-8B-Instruct.json").read_text())
    config["num_hidden_layers"] = 1e18
    (configs / "evil__huge.json").write_text(json.dumps(config))
    for name in ("meta-llama__Llama-3.1-8B-Instruct.json",):
        (configs / name).write_text((HF_CONFIG_DIR / name).read_text())
    huge = a_cached_engine("huge", gpu=KWOK_GPU)
    huge["spec"]["model"]["source"] = "hf://evil/huge"
    api.create(huge)
    fine = a_cached_engine("fine", gpu=KWOK_GPU)
    cache_artifact(api.core, api.ns, fine)
    with running_operator(cluster, [api.ns], hf_config_dir=str(configs)):
        cond = wait_for(lambda: api.ready_reason(ENGINE_PLURAL, "huge", "InvalidSpec"), timeout=60)
        assert cond["message"].startswith("num_hidden_layers: 1000000000000000000 is larger than")
        api.create(fine)
        wait_for(
            lambda: (api.get(ENGINE_PLURAL, "fine").get("status") or {}).get("phase") == "Ready",
            timeout=30,
            desc="another engine reconciled right after",
        )
    assert api.jobs() == []


class _Counting(http.server.BaseHTTPRequestHandler):
    hits: ClassVar[list[str]] = []

    def do_GET(self) -> None:
        self.hits.append(self.path)
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b'{"status":"success","data":{"resultType":"vector","result":[]}}')

    def log_message(self, *args: Any) -> None:
        pass


def test_prometheus_url_outside_the_allowlist_is_never_fetched(cluster: LocalCluster, api: Api) -> None:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Counting)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    engine = a_cached_engine("llama", gpu=KWOK_GPU)
    cache_artifact(api.core, api.ns, engine)
    api.create(engine)
    body = a_deployment("ssrf", "llama")
    body["spec"]["autoscaling"] = {
        "enabled": True,
        "minReplicas": 1,
        "maxReplicas": 2,
        "targets": {"activeRequestUtilization": 0.7},
        "metrics": {"source": "prometheus", "prometheusURL": url, "scrapeIntervalSeconds": 1},
    }
    api.create(body)
    try:
        with running_operator(cluster, [api.ns]):  # no allowed_prometheus_urls

            def refused() -> dict[str, Any] | None:
                c = api.condition_of(DEPLOYMENT_PLURAL, "ssrf", "ScalingActive")
                return c if c and "not a URL the operator's admin allows" in c["message"] else None

            cond = wait_for(refused, timeout=60, desc="ScalingActive says the URL is not allowed")
            assert cond["status"] == "False"
        assert _Counting.hits == [], "the operator fetched a URL the admin did not allow"
    finally:
        server.shutdown()
        server.server_close()


# ----------------------------------------------------------------------------- redaction
def test_credentials_in_a_builder_log_tail_reach_neither_status_nor_events(
    cluster: LocalCluster, api: Api
) -> None:
    """A builder that died before writing its report leaves its log tail as the termination message
    (``terminationMessagePolicy: FallbackToLogsOnError``); the operator copies it into the status
    message and a Warning Event. Credentials in it (here in three of the forms the redactor covers)
    are replaced before either write."""
    hf = "hf_" + "Zq8Wn3Lk5Jh7Gf9Ds1Ap2Om4In6Ub0Vy"
    nvapi = "nvapi-" + "Lr5Tq8Wz2Xc4Vb6Nm9Kj1Hg3Fd7Sa0Pq"
    tail = (
        f"Traceback (most recent call last):\nrequests.exceptions.HTTPError: 401 for "
        f"https://builder:pw-{hf[3:15]}@mirror.local/x with HF_TOKEN={hf}\nNGC_API_KEY={nvapi}"
    )
    engine = a_cached_engine("leaky", gpu=KWOK_GPU)
    engine["spec"]["gpu"]["podAnnotations"].update({OUTCOME: "fail", EXIT_CODE: "3", MESSAGE: tail})
    api.create(engine)
    with running_operator(cluster, [api.ns]):
        status = wait_for(
            lambda: (s := api.get(ENGINE_PLURAL, "leaky").get("status") or {}).get("phase") == "Failed" and s,
            timeout=90,
            desc="the build fails",
        )
        events = wait_for(
            lambda: [
                e.message or ""
                for e in api.core.list_namespaced_event(
                    api.ns, field_selector="involvedObject.name=leaky"
                ).items
                if e.type == "Warning"
            ],
            timeout=30,
            desc="a Warning Event about the failure",
        )
    written = json.dumps(status) + "\n".join(events)
    for secret in (hf, nvapi, f"pw-{hf[3:15]}"):
        assert secret not in written, f"{secret!r} leaked into status or Events"
    assert "[REDACTED]" in status["build"]["message"]
    assert "mirror.local" in status["build"]["message"], "the rest of the tail stays readable"
    assert any("[REDACTED]" in m for m in events)


# ----------------------------------------------------------------------------- artifact integrity
#: The kubelet's fallback termination message: "the last chunk of container log output ... limited
#: to 2048 bytes or 80 lines, whichever is smaller" (Kubernetes docs, "Determine the Reason for Pod
#: Failure", terminationMessagePolicy FallbackToLogsOnError).
FALLBACK_BYTES, FALLBACK_LINES = 2048, 80


def _pod_log_tail(text: str) -> str:
    return "\n".join(text.splitlines()[-FALLBACK_LINES:])[-FALLBACK_BYTES:]


def _serving_artifact(root: Path) -> None:
    """A small artifact tree (what serving reads: engine, tokenizer, the Triton repository)."""
    for rel, data in (
        ("engine/config.json", b'{"version": "stand-in"}'),
        ("engine/rank0.engine", bytes(range(256)) * 64),
        ("tokenizer/tokenizer.json", b"{}"),
        ("triton/preprocessing/1/.gitkeep", b""),
    ):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)


def test_a_tampered_artifact_file_stops_the_pod_with_a_condition(
    cluster: LocalCluster, api: Api, tmp_path: Path
) -> None:
    """The serving pod's own rendered ``launch.sh`` (from the ConfigMap the operator created) runs
    for real against the artifact, as ``hack/tritoncpu`` runs it for kwok pods: intact, it verifies
    the artifact and goes on to start Triton; after one engine byte changed, it stops before Triton
    with ``ArtifactTampered`` naming the file. kwok then plays the kubelet (the container exits with
    that status and its log tail as the termination message) and the operator turns the message
    into the LLMDeployment's condition."""
    import tritoncpu  # noqa: PLC0415 - hack/ (on sys.path through tests/conftest.py)

    art = tmp_path / "artifact"
    _serving_artifact(art)
    engine = a_cached_engine("sealed", gpu=KWOK_GPU)
    digest = write_manifest(art, engineKey="stand-in")
    cache_artifact(api.core, api.ns, engine, manifest_digest=digest)
    api.create(engine)
    with running_operator(cluster, [api.ns]):
        api.create(a_deployment("chat", "sealed"))
        pod = wait_for(
            lambda: next(
                (
                    p
                    for p in api.core.list_namespaced_pod(
                        api.ns, label_selector=f"{LABEL_DEPLOYMENT}=chat"
                    ).items
                    if p.status.phase == "Running" and p.status.pod_ip
                ),
                None,
            ),
            timeout=90,
            desc="a Running serving pod",
        )
        (volume,) = [v for v in pod.spec.volumes if v.config_map is not None]
        data = api.core.read_namespaced_config_map(volume.config_map.name, api.ns).data
        items = [{"key": i.key, "path": i.path, "mode": i.mode} for i in volume.config_map.items]
        assert f"--manifest-digest {digest}" in data["launch.sh"], "the engine's recorded digest"

        def run(work: str) -> tuple[int | None, str]:
            server = tritoncpu.run_launch_script(
                data, items, art, address=pod.status.pod_ip, work_dir=tmp_path / work
            )
            wait_for(
                lambda: not server.alive() or "artifact verified" in server.log_text(),
                timeout=60,
                desc="the verifier's verdict",
            )
            assert server.proc is not None
            code = server.proc.poll()
            server.stop()
            return code, server.log_text()

        code, log = run("intact")
        assert code is None and "artifact verified: 4 files" in log, log  # on to Triton
        (art / "engine/rank0.engine").write_bytes(bytes(range(255, -1, -1)) * 64)
        code, log = run("tampered")
        assert code == 3, log
        tail = _pod_log_tail(log)
        assert tail.splitlines()[-1].startswith("ArtifactTampered: engine/rank0.engine: sha256 ")

        api.core.patch_namespaced_pod(
            pod.metadata.name,
            api.ns,
            {"metadata": {"annotations": {OUTCOME: "fail", EXIT_CODE: str(code), MESSAGE: tail}}},
        )
        ready = wait_for(
            lambda: api.ready_reason(DEPLOYMENT_PLURAL, "chat", "ArtifactTampered"),
            timeout=90,
            desc="Ready=False ArtifactTampered on the LLMDeployment",
        )
    assert ready["status"] == "False"
    assert f"pod {pod.metadata.name}" in ready["message"] and "engine/rank0.engine" in ready["message"]
    assert api.get(DEPLOYMENT_PLURAL, "chat")["status"]["phase"] == "Failed"
