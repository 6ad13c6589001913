"""``sync_external_autoscaler`` (handlers/autoscaler.py) when admission refuses the ScaledObject:
what the condition, ``ScalingLimited`` and the Warning say, through an in-memory stand-in for the
API server (fresh-user trial 38 F9). Against the real API server and KEDA's own webhooks:
tests/integration/test_keda_webhooks.py."""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from typing import Any

from kubernetes.client.exceptions import ApiException
from support.manifests import a_keda_deployment

from trtllm_operator.api.wire import ANNOTATION_RENDERED_HASH
from trtllm_operator.handlers.autoscaler import EXTERNAL_RESYNC_SECONDS, sync_external_autoscaler
from trtllm_operator.kube.client import EVENT, JSON_PATCH, LLM_DEPLOYMENT, SCALED_OBJECT, Kube, Resource

NS = "ns"
UID = "uid-chat"
#: KEDA's refusal as kube-apiserver returns it (tests/integration/test_keda_webhooks.py sees these words
#: from kedacore/keda v2.20.2's webhook; HTTP 403: controller-runtime's ``Denied``).
REFUSAL = (
    "admission webhook \"vscaledobject.kb.io\" denied the request: the workload 'chat' of type "
    "'llm.trtllm-operator.dev/v1alpha1.LLMDeployment' is already managed by the hpa 'users-hpa'"
)
DELEGATED = {
    "type": "ScalingLimited",
    "status": "Unknown",
    "reason": "ScalingDelegated",
    "message": "mode keda: KEDA's, for the ScaledObject the operator renders, HorizontalPodAutoscaler "
    "chat-keda decides the replica count; its own conditions say whether a limit holds it back: "
    "kubectl describe hpa chat-keda",
    "observedGeneration": 1,
    "lastTransitionTime": "2026-12-03T15:00:00Z",
}


class StoreKube(Kube):
    """Objects by (kind, name) in one namespace; a write of a ScaledObject refused with ``status`` and
    ``refusal`` (by default KEDA's 403 and :data:`REFUSAL`); the status subresource's JSON patch
    applied (its ``test`` ops not checked); Events kept in :attr:`events`."""

    def __init__(self, refusal: str = REFUSAL, status: int = 403) -> None:
        super().__init__(None)  # type: ignore[arg-type]  # no API client: nothing is sent
        self.objects: dict[tuple[str, str], dict[str, Any]] = {}
        self.events: list[dict[str, Any]] = []
        self.refusal, self.status = refusal, status

    def get(self, res: Resource, namespace: str | None, name: str, **_: Any) -> dict[str, Any] | None:
        found = self.objects.get((res.kind, name))
        return copy.deepcopy(found) if found is not None else None

    def _refuse(self, res: Resource) -> None:
        if res == SCALED_OBJECT:
            raise _with_body(self.refusal, self.status)

    def create(self, res: Resource, namespace: str, body: Mapping[str, Any]) -> dict[str, Any]:
        if res == EVENT:
            self.events.append(dict(body))
            return dict(body)
        self._refuse(res)
        raise AssertionError(f"unexpected create of {res.kind}")

    def create_or_get(
        self, res: Resource, namespace: str, body: Mapping[str, Any], *, read_first: bool = True
    ) -> tuple[dict[str, Any], bool]:
        self._refuse(res)
        raise AssertionError(f"unexpected create of {res.kind}")

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
        self._refuse(res)
        assert (res, subresource, content_type) == (LLM_DEPLOYMENT, "status", JSON_PATCH), (res, subresource)
        obj = self.objects[(res.kind, name)]
        for op in body:
            path = op["path"].split("/")[1:]
            if op["op"] == "add" and path == ["status"]:
                obj["status"] = copy.deepcopy(op["value"])
            elif op["op"] == "add" and path[0] == "status":
                obj.setdefault("status", {})[path[1]] = copy.deepcopy(op["value"])
        return copy.deepcopy(obj)


def _with_body(message: str, status: int) -> ApiException:
    exc = ApiException(status=status, reason="Forbidden")
    exc.body = json.dumps({"kind": "Status", "status": "Failure", "message": message, "code": status})
    return exc


def _keda_deployment(status: dict[str, Any] | None = None) -> dict[str, Any]:
    body = a_keda_deployment(
        "chat", "llama", prometheus_url="http://prometheus.monitoring:9090", active_target=0.5, down_window=6
    )
    body["metadata"].update(namespace=NS, uid=UID, generation=1, resourceVersion="1")
    if status is not None:
        body["status"] = status
    return body


def _conditions(kube: StoreKube) -> dict[str, dict[str, Any]]:
    obj = kube.objects[("LLMDeployment", "chat")]
    return {c["type"]: c for c in (obj.get("status") or {}).get("conditions") or []}


def _standing(kube: StoreKube) -> dict[str, Any]:
    """The LLMDeployment ``chat`` in mode keda whose ScaledObject the operator applied earlier (its
    rendered hash an earlier spec's, so this sync patches it) and whose ScalingLimited names KEDA's HPA."""
    obj = _keda_deployment({"conditions": [DELEGATED]})
    kube.objects[("LLMDeployment", "chat")] = copy.deepcopy(obj)
    kube.objects[("ScaledObject", "chat")] = {
        "apiVersion": "keda.sh/v1alpha1",
        "kind": "ScaledObject",
        "metadata": {
            "name": "chat",
            "namespace": NS,
            "annotations": {ANNOTATION_RENDERED_HASH: "an earlier spec.autoscaling"},
            "ownerReferences": [
                {
                    "apiVersion": obj["apiVersion"],
                    "kind": "LLMDeployment",
                    "name": "chat",
                    "uid": UID,
                    "controller": True,
                }
            ],
        },
        "spec": {},
    }
    return obj


def test_a_change_refused_because_a_users_hpa_targets_the_deployment_says_nothing_scales() -> None:
    """KEDA's ValidateUpdate refused the patch of the ScaledObject the operator applied earlier because
    the user's HPA ``users-hpa`` targets the LLMDeployment too (verifyHpas). The ScaledObject stands,
    but Kubernetes' HPA controller stops both HPAs on the same pods (kubernetes v1.34.4
    pkg/controller/podautoscaler/horizontal.go validateAndParseSelector, AmbiguousSelector), so
    ScalingActive is False and ScalingLimited no longer names KEDA's HPA as the one that decides.
    Before: True, "the ScaledObject as last applied still scales this deployment", ScalingDelegated."""
    kube = StoreKube()
    sync_external_autoscaler(kube, _standing(kube))
    got = _conditions(kube)
    active = got["ScalingActive"]
    assert (active["status"], active["reason"]) == ("False", "AdmissionRefused"), active
    assert active["message"].startswith(
        "the API server refused the change to ScaledObject chat, which stays as last applied, but nothing "
        "the operator rendered scales this deployment while HorizontalPodAutoscaler users-hpa also targets "
        "it: Kubernetes' HPA controller stops that HPA and KEDA's HPA for chat (AmbiguousSelector: pods "
        "controlled by multiple HPAs); delete HorizontalPodAutoscaler users-hpa: " + REFUSAL
    ), active["message"]
    limited = got["ScalingLimited"]
    assert (limited["status"], limited["reason"]) == ("Unknown", "AdmissionRefused"), limited
    assert [(e["type"], e["reason"], e["message"]) for e in kube.events] == [
        ("Warning", "AdmissionRefused", active["message"])
    ]


def test_a_change_refused_by_a_policy_keeps_the_standing_scaled_object_delegated() -> None:
    """A ValidatingAdmissionPolicy's denial of the patch (kube-apiserver v1.34.4's words, 422) says
    nothing about another autoscaler: the ScaledObject stays as last applied, ScalingActive stays
    True and ScalingLimited keeps naming KEDA's HPA, whose own conditions say whether it scales — and
    the message claims no more than what stays applied (before: "still scales this deployment")."""
    denial = (
        "scaledobjects.keda.sh \"chat\" is forbidden: ValidatingAdmissionPolicy 'keda-limits' with binding "
        "'keda-limits' denied request: failed expression: object.spec.maxReplicaCount <= 2"
    )
    kube = StoreKube(denial, 422)
    sync_external_autoscaler(kube, _standing(kube))
    got = _conditions(kube)
    active = got["ScalingActive"]
    assert (active["status"], active["reason"]) == ("True", "AdmissionRefused"), active
    assert active["message"] == (
        f"the API server refused the change to ScaledObject chat, which stays as last applied: {denial} "
        f"(tried again every {EXTERNAL_RESYNC_SECONDS:g} s)"
    ), active["message"]
    assert got["ScalingLimited"] == DELEGATED, got["ScalingLimited"]
    assert [(e["type"], e["reason"], e["message"]) for e in kube.events] == [
        ("Warning", "AdmissionRefused", active["message"])
    ]


def test_two_syncs_of_one_refused_creation_post_one_warning() -> None:
    """At creation the create handler and the resync timer's first tick each sync from a copy without
    the condition (bc586e7 saw two Warnings in tests/integration/test_keda_webhooks.py). The second
    finds the condition written by the first when it writes, and posts nothing."""
    kube = StoreKube()
    obj = _keda_deployment()
    kube.objects[("LLMDeployment", "chat")] = copy.deepcopy(obj)
    sync_external_autoscaler(kube, obj, created=True)
    sync_external_autoscaler(kube, obj)  # the same stale copy, as the timer's tick read it
    active = _conditions(kube)["ScalingActive"]
    assert (active["status"], active["reason"]) == ("False", "AdmissionRefused"), active
    assert active["message"].startswith("the API server refused ScaledObject chat, so nothing"), active
    assert [(e["type"], e["reason"]) for e in kube.events] == [("Warning", "AdmissionRefused")]
    # a later resync with the condition in place: still one
    sync_external_autoscaler(kube, kube.objects[("LLMDeployment", "chat")])
    assert len(kube.events) == 1
