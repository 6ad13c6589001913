"""``api: openai`` and ``spec.routing.inferencePool`` against the real API server, operator in-process.

The InferencePool CRD is upstream's (kubernetes-sigs/gateway-api-inference-extension v1.6.0,
vendored under ``tests/fixtures/upstream/gateway-api-inference-extension-v1.6.0/``), installed in the
local control plane for the test that needs it: the API server validates the InferencePool the
operator renders with upstream's own schema (pruning and CEL), and the ``api: openai`` Deployment,
Service and ConfigMap with the built-in types. Engines become Ready through the engine cache
(as in test_deployment_controller.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from support.addons import wait_established
from support.api import Api as SharedApi
from support.cluster import LocalCluster
from support.manifests import a_cached_engine, a_deployment
from support.operator import running_operator
from support.wait import wait_for

POOL_GROUP, POOL_VERSION, POOLS = "inference.networking.k8s.io", "v1", "inferencepools"
CRD = (
    Path(__file__).resolve().parents[1]
    / "fixtures"
    / "upstream"
    / "gateway-api-inference-extension-v1.6.0"
    / "inference.networking.k8s.io_inferencepools.yaml"
)


class Api(SharedApi):
    def pool(self, name: str) -> dict[str, Any] | None:
        try:
            obj: dict[str, Any] = self.custom.get_namespaced_custom_object(
                POOL_GROUP, POOL_VERSION, self.ns, POOLS, name
            )
        except client.ApiException as exc:
            if exc.status == 404:
                return None
            raise
        return obj


@pytest.fixture
def api(cluster: LocalCluster, namespace: str) -> Iterator[Api]:
    a = Api(cluster, namespace)
    with a.artifact_pvc():
        yield a


@pytest.fixture
def pool_crd(cluster: LocalCluster) -> Iterator[None]:
    """Upstream's InferencePool CRD, installed for one test and removed after it."""
    cluster.kubectl("apply", "--server-side", "-f", str(CRD))
    wait_established(cluster, [f"{POOLS}.{POOL_GROUP}"])
    yield
    cluster.kubectl("delete", "--wait=false", "-f", str(CRD))


ROUTING = {
    "inferencePool": {"enabled": True, "endpointPickerRef": {"name": "chat-epp", "failureMode": "FailOpen"}}
}


def test_without_the_crd_routing_is_reported_not_installed(cluster: LocalCluster, api: Api) -> None:
    engine = a_cached_engine("llama-fp8")
    api.cache_artifact(engine)
    api.create(engine)
    api.create(
        a_deployment("chat", "llama-fp8", replicas=2, server={"api": "openai"}, routing=ROUTING),
    )
    with running_operator(cluster, [api.ns]):
        cond = api.wait_condition("chat", "Routed", status="False", timeout=90, desc="Routed=False")
        assert cond["reason"] == "InferencePoolNotInstalled"
        assert "inference.networking.k8s.io/v1" in cond["message"]
        # serving itself goes on: the OpenAI Deployment exists
        dep = wait_for(lambda: _deployment(api, "chat"), timeout=60, desc="Deployment chat")
        ports = {p.name: p.container_port for p in dep.spec.template.spec.containers[0].ports}
        assert ports == {"openai": 9000}


def _deployment(api: Api, name: str) -> Any:
    try:
        return api.apps.read_namespaced_deployment(name, api.ns)
    except client.ApiException as exc:
        if exc.status == 404:
            return None
        raise


def test_openai_deployment_and_its_inference_pool(cluster: LocalCluster, api: Api, pool_crd: None) -> None:
    engine = a_cached_engine("llama-fp8")
    api.cache_artifact(engine)
    api.create(engine)
    spec = {"api": "openai", "openai": {"servedModelName": "llama-3.1-8b", "defaultMaxTokens": 256}}
    api.create(a_deployment("chat", "llama-fp8", replicas=2, server=spec, routing=ROUTING))

    with running_operator(cluster, [api.ns]):
        status = wait_for(
            lambda: (s := api.status("chat")).get("phase") == "Ready" and s.get("readyReplicas") == 2 and s,
            timeout=120,
            desc="chat Ready",
        )
        assert status["endpoint"] == f"http://chat.{api.ns}.svc:9000/v1"
        cond = api.wait_condition("chat", "Routed", status="True", timeout=60, desc="Routed=True")
        assert cond["reason"] == "InferencePoolApplied"

        # the Deployment the API server accepted: the frontend's command, port, probes, picker label
        dep = api.apps.read_namespaced_deployment("chat", api.ns)
        pod = dep.spec.template
        (container,) = pod.spec.containers
        assert {p.name: p.container_port for p in container.ports} == {"openai": 9000}
        assert container.readiness_probe.http_get.path == "/health/ready"
        assert container.liveness_probe.tcp_socket.port == "openai"
        assert pod.metadata.labels["inference.networking.k8s.io/engine-type"] == "triton-tensorrt-llm"
        svc = api.core.read_namespaced_service("chat", api.ns)
        assert [(p.name, p.port) for p in svc.spec.ports] == [("openai", 9000)]
        cms = api.core.list_namespaced_config_map(
            api.ns, label_selector="llm.trtllm-operator.dev/deployment=chat"
        )
        (cm,) = [c for c in cms.items if "launch.sh" in (c.data or {})]
        assert "openai_frontend/main.py" in cm.data["launch.sh"]
        assert "--default-max-tokens=256" in cm.data["launch.sh"]
        assert 'name: "llama-3.1-8b"' in cm.data["llama-3.1-8b__config.pbtxt"]

        # the InferencePool the API server accepted with upstream's schema: nothing pruned
        pool = api.pool("chat")
        assert pool is not None
        assert pool["metadata"]["ownerReferences"][0]["kind"] == "LLMDeployment"
        assert pool["spec"]["selector"] == {"matchLabels": {"llm.trtllm-operator.dev/deployment": "chat"}}
        assert pool["spec"]["targetPorts"] == [{"number": 9000}]
        assert pool["spec"]["endpointPickerRef"] == {
            "group": "",  # upstream's schema default
            "kind": "Service",
            "name": "chat-epp",
            "port": {"number": 9002},
            "failureMode": "FailOpen",
        }
        assert pool["spec"]["appProtocol"] == "http"  # upstream's schema default
        # the pool selects exactly the serving pods
        selector = ",".join(f"{k}={v}" for k, v in pool["spec"]["selector"]["matchLabels"].items())
        assert len(api.core.list_namespaced_pod(api.ns, label_selector=selector).items) == 2

        # routing off: the operator deletes its pool and says so
        api.patch("llmdeployments", "chat", {"spec": {"routing": {"inferencePool": None}}})
        wait_for(lambda: api.pool("chat") is None, timeout=60, desc="InferencePool deleted")
        cond = api.wait_condition("chat", "Routed", status="False", timeout=60, desc="Routed=False")
        assert cond["reason"] == "RoutingDisabled"


def test_admission_refuses_a_pool_without_the_openai_api(api: Api) -> None:
    body = a_deployment("kserve", "llama-fp8", replicas=2, routing={"inferencePool": {"enabled": True}})
    with pytest.raises(client.ApiException) as err:
        api.create(body)
    assert err.value.status == 422
    assert "spec.routing.inferencePool.enabled" in err.value.body
    assert "needs server.api openai or both" in err.value.body


def test_pytorch_openai_deployment_runs_trtllm_serve(cluster: LocalCluster, api: Api) -> None:
    """``backend: pytorch`` + ``api: openai``: the pod runs ``trtllm-serve`` (rendered flags checked
    against upstream in tests/unit/test_render_trtllm_serve.py); the API server accepts the Deployment,
    Service and ConfigMap; ``api: both`` is refused with a condition naming the fix."""
    engine = a_cached_engine("llama-torch")
    engine["spec"]["backend"] = "pytorch"
    api.cache_artifact(engine)
    api.create(engine)
    spec = {"api": "openai", "decoupled": True, "openai": {"servedModelName": "llama-3.1-8b"}}
    api.create(a_deployment("torch-chat", "llama-torch", replicas=2, server=spec))
    api.create(
        a_deployment("torch-both", "llama-torch", replicas=2, server={"api": "both", "decoupled": True}),
    )

    with running_operator(cluster, [api.ns]):
        status = wait_for(
            lambda: (
                (s := api.status("torch-chat")).get("phase") == "Ready" and s.get("readyReplicas") == 2 and s
            ),
            timeout=120,
            desc="torch-chat Ready",
        )
        assert status["endpoint"] == f"http://torch-chat.{api.ns}.svc:9000/v1"
        pod = api.apps.read_namespaced_deployment("torch-chat", api.ns).spec.template
        (container,) = pod.spec.containers
        assert {p.name: p.container_port for p in container.ports} == {"openai": 9000}
        for probe in (container.startup_probe, container.readiness_probe, container.liveness_probe):
            assert probe.http_get.path == "/health" and probe.http_get.port == "openai"
        svc = api.core.read_namespaced_service("torch-chat", api.ns)
        assert [(p.name, p.port) for p in svc.spec.ports] == [("openai", 9000)]
        cms = api.core.list_namespaced_config_map(
            api.ns, label_selector="llm.trtllm-operator.dev/deployment=torch-chat"
        )
        (cm,) = [c for c in cms.items if "launch.sh" in (c.data or {})]
        assert (
            "exec trtllm-serve /tmp/trtllm-serve/llama-3.1-8b --host 0.0.0.0 --port 9000"
            in cm.data["launch.sh"]
        )
        assert "return_perf_metrics: true" in cm.data["trtllm-serve__extra-llm-api-options.yaml"]
        assert not [k for k in cm.data if k.endswith("config.pbtxt")]  # no Triton model repository

        cond = api.wait_condition(
            "torch-both", "Ready", reason="OpenAIFrontendUnsupported", timeout=60, desc="torch-both refused"
        )
        assert cond["status"] == "False"
        assert "no KServe v2 frontend" in cond["message"] and "api: openai" in cond["message"]
        assert _deployment(api, "torch-both") is None
