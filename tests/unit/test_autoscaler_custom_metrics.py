"""``mode: hpa`` without the custom metrics API its HPA reads (fresh-user trial 46 T3): on the demo
cluster, with no prometheus-adapter and so no APIService ``v1beta2``/``v1beta1.custom.metrics.k8s.io``,
the LLMDeployment said ``ScalingActive=True HPARendered`` while nothing could serve the HPA's Pods
metrics. ``sync_external_autoscaler`` (handlers/autoscaler.py) through an in-memory stand-in for the
API server, and the pure decision (decide/autoscaler.py ``custom_metrics_problem``)."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

import pytest
from support.manifests import an_autoscaled_deployment

from trtllm_operator.api.wire import CUSTOM_METRICS_API_SERVICES
from trtllm_operator.decide.autoscaler import custom_metrics_problem
from trtllm_operator.handlers import indexes
from trtllm_operator.handlers.autoscaler import sync_external_autoscaler
from trtllm_operator.kube.client import API_SERVICE, EVENT, HPA, JSON_PATCH, LLM_DEPLOYMENT, Kube, Resource

NS = "ns"
AVAILABLE = {"type": "Available", "status": "True", "reason": "Passed", "message": "all checks passed"}
#: kube-aggregator's words for an APIService whose Service has no endpoints (v0.34.4
#: pkg/controllers/status/remote/remote_available_controller.go).
NO_ENDPOINTS = {
    "type": "Available",
    "status": "False",
    "reason": "MissingEndpoints",
    "message": 'endpointslices for service/prometheus-adapter in "monitoring" have no addresses with port '
    'name "https"',
}


class StoreKube(Kube):
    """Objects by (kind, name); HPAs created as given; the status subresource's JSON patch applied
    (its ``test`` ops not checked); Events kept in :attr:`events`; every GET recorded in :attr:`gets`."""

    def __init__(self) -> None:
        super().__init__(None)  # type: ignore[arg-type]  # no API client: nothing is sent
        self.objects: dict[tuple[str, str], dict[str, Any]] = {}
        self.events: list[dict[str, Any]] = []
        self.gets: list[tuple[str, str]] = []

    def get(self, res: Resource, namespace: str | None, name: str, **_: Any) -> dict[str, Any] | None:
        self.gets.append((res.kind, name))
        found = self.objects.get((res.kind, name))
        return copy.deepcopy(found) if found is not None else None

    def create(self, res: Resource, namespace: str, body: Mapping[str, Any]) -> dict[str, Any]:
        assert res == EVENT, res
        self.events.append(dict(body))
        return dict(body)

    def create_or_get(
        self, res: Resource, namespace: str, body: Mapping[str, Any], *, read_first: bool = True
    ) -> tuple[dict[str, Any], bool]:
        assert res == HPA, res
        self.objects[(res.kind, body["metadata"]["name"])] = copy.deepcopy(dict(body))
        return copy.deepcopy(dict(body)), True

    def patch(
        self,
        res: Resource,
        namespace: str,
        name: str,
        body: Any,
        *,
        subresource: str | None = None,
        content_type: str = "",
    ) -> dict[str, Any]:
        assert (res, subresource, content_type) == (LLM_DEPLOYMENT, "status", JSON_PATCH), (res, subresource)
        obj = self.objects[(res.kind, name)]
        for op in body:
            path = op["path"].split("/")[1:]
            if op["op"] == "add" and path == ["status"]:
                obj["status"] = copy.deepcopy(op["value"])
            elif op["op"] == "add" and path[0] == "status":
                obj.setdefault("status", {})[path[1]] = copy.deepcopy(op["value"])
        return copy.deepcopy(obj)


def _hpa_deployment() -> dict[str, Any]:
    body = an_autoscaled_deployment("chat", "llama", max_replicas=3, up={}, down={})
    body["spec"]["autoscaling"]["mode"] = "hpa"
    body["metadata"].update(namespace=NS, uid="uid-chat", generation=1, resourceVersion="1")
    return body


def _api_service(name: str, *conditions: dict[str, str]) -> dict[str, Any]:
    version, group = name.split(".", 1)
    return {
        "apiVersion": "apiregistration.k8s.io/v1",
        "kind": "APIService",
        "metadata": {"name": name},
        "spec": {"group": group, "version": version},
        "status": {"conditions": list(conditions)},
    }


def _sync(kube: StoreKube) -> dict[str, dict[str, Any]]:
    obj = _hpa_deployment()
    kube.objects[("LLMDeployment", "chat")] = copy.deepcopy(obj)
    sync_external_autoscaler(kube, obj, created=True)
    status = kube.objects[("LLMDeployment", "chat")].get("status") or {}
    return {c["type"]: c for c in status.get("conditions") or []}


def test_no_custom_metrics_api_is_not_scaling_active() -> None:
    """The trial's cluster: no adapter. The HPA is applied (it scales once the API serves), but
    ScalingActive is False, names both APIServices and the fix, and one Warning says the same."""
    kube = StoreKube()
    got = _sync(kube)
    assert ("HorizontalPodAutoscaler", "chat") in kube.objects, "the HPA is applied all the same"
    active = got["ScalingActive"]
    assert (active["status"], active["reason"]) == ("False", "CustomMetricsAPIMissing"), active
    assert active["message"] == (
        "HorizontalPodAutoscaler chat reads its Pods metrics from the custom metrics API, and no APIService "
        "registers it (v1beta2.custom.metrics.k8s.io or v1beta1.custom.metrics.k8s.io): install "
        'prometheus-adapter with the rule config of docs/autoscaling.md "mode: hpa" (its Helm chart\'s '
        "rules.custom), or use mode builtin; the HPA stays applied and scales once that API serves its "
        "metrics"
    ), active["message"]
    assert [(e["type"], e["reason"], e["message"]) for e in kube.events] == [
        ("Normal", "HorizontalPodAutoscalerCreated", "created HorizontalPodAutoscaler chat"),
        ("Warning", "CustomMetricsAPIMissing", active["message"]),
    ]


@pytest.mark.parametrize("name", CUSTOM_METRICS_API_SERVICES)
def test_an_available_custom_metrics_api_is_hpa_rendered(name: str) -> None:
    """prometheus-adapter registers v1beta1 (its chart) or v1beta2 (its walkthrough, the integration
    tests): either one Available is what the HPA's discovery takes."""
    kube = StoreKube()
    kube.objects[("APIService", name)] = _api_service(name, AVAILABLE)
    active = _sync(kube)["ScalingActive"]
    assert (active["status"], active["reason"]) == ("True", "HPARendered"), active
    assert [e["reason"] for e in kube.events] == ["HorizontalPodAutoscalerCreated"]


def test_a_registered_but_unavailable_custom_metrics_api_says_why() -> None:
    kube = StoreKube()
    name = "v1beta1.custom.metrics.k8s.io"
    kube.objects[("APIService", name)] = _api_service(name, NO_ENDPOINTS)
    active = _sync(kube)["ScalingActive"]
    assert (active["status"], active["reason"]) == ("False", "CustomMetricsAPIUnavailable"), active
    assert (
        f"APIService {name} is not Available (MissingEndpoints: {NO_ENDPOINTS['message']}): check the "
        "adapter that serves it (kubectl describe apiservice)" in active["message"]
    ), active["message"]


def test_a_running_operator_reads_the_api_services_from_its_watch_cache(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 20: as the KEDA check reads the CRDs' watch, no GET of an APIService per resync — the
    kopf index over the two APIServices answers (here: an empty index, no adapter)."""
    monkeypatch.setattr(indexes, "_indices", {"cached_custom_metrics_api_services": {}})
    kube = StoreKube()
    kube.objects[("APIService", "v1beta1.custom.metrics.k8s.io")] = _api_service(
        "v1beta1.custom.metrics.k8s.io", AVAILABLE
    )  # in the API server, not (yet) in the cache: the cache is what is read
    active = _sync(kube)["ScalingActive"]
    assert active["reason"] == "CustomMetricsAPIMissing", active
    assert not [g for g in kube.gets if g[0] == API_SERVICE.kind], kube.gets


@pytest.mark.parametrize(
    ("services", "reason"),
    [
        ({}, "CustomMetricsAPIMissing"),
        ({"v1beta2.custom.metrics.k8s.io": {}}, "CustomMetricsAPIUnavailable"),  # no condition yet
        ({"v1beta1.custom.metrics.k8s.io": {"status": "False"}}, "CustomMetricsAPIUnavailable"),
        ({"v1beta1.custom.metrics.k8s.io": {"status": "True"}}, None),
        (
            {
                "v1beta1.custom.metrics.k8s.io": {"status": "False"},
                "v1beta2.custom.metrics.k8s.io": {"status": "True"},
            },
            None,
        ),
    ],
)
def test_custom_metrics_problem(services: dict[str, dict[str, str]], reason: str | None) -> None:
    problem = custom_metrics_problem("chat", services)
    assert (problem[0] if problem else None) == reason, problem
