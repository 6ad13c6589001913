"""KEDA's admission webhooks (kedacore/keda v2.20.2 ``cmd/webhooks``), as a KEDA installed by its
release manifests or Helm chart runs them, through tests/support/keda.py: KEDA's own
ValidatingWebhookConfiguration ``keda-admission`` (``config/webhooks/validation_webhooks.yaml``,
``failurePolicy: Ignore``) pointed at the webhook process.

What they refuse, from ``apis/keda/v1alpha1/scaledobject_webhook.go`` (``validateWorkload``, on
create and on update — ``ValidateUpdate`` skips it only for a finalizer's removal with the spec
unchanged, ``isRemovingFinalizer``; ``config/webhooks/validation_webhooks.yaml`` registers no webhook
for HPAs, so an HPA made after a ScaledObject is admitted and refuses the ScaledObject's next change):

- ``verifyScaledObjects``: another ScaledObject of the namespace with the same ``scaleTargetRef``
  (group/version.kind and name) — "the workload '<name>' of type '<gvk>' is already managed by the
  ScaledObject '<other>'";
- ``verifyHpas``: an HPA of the namespace on the same target that the incoming ScaledObject does not
  own (an ownerReference of kind ScaledObject and its name; the HPA annotation
  ``validations.keda.sh/hpa-ownership: "false"`` opts out) — "the workload '<name>' of type '<gvk>' is
  already managed by the hpa '<hpa>'".

The webhook lists both from its informer cache (``kc.List``), so an object created a moment ago may
not be seen yet: each refusal is first awaited with server-side dry runs (admission webhooks with
``sideEffects: None`` are called for dry runs; ``verifyCPUMemoryScalers``, the one check that skips
dry runs, does not apply to these triggers), then the real create is refused. Without the webhooks
the dry runs are admitted and the waits time out.
"""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client
from support.api import Api
from support.cluster import LocalCluster
from support.keda import (
    KEDA_GROUP,
    KEDA_VERSION,
    SCALED_OBJECT_REFUSED,
    a_scaled_object,
    refusal_message,
    running_keda,
)
from support.manifests import an_autoscaled_deployment
from support.operator import running_operator
from support.wait import wait_for

from trtllm_operator.api import GROUP, VERSION
from trtllm_operator.handlers.autoscaler import EXTERNAL_RESYNC_SECONDS
from trtllm_operator.render.keda import keda_hpa_name

pytestmark = pytest.mark.slow

#: apis/keda/v1alpha1/gvkr_types.go GVKString of an apps/v1 Deployment target
DEPLOYMENT_GVK = "apps/v1.Deployment"
#: Seconds without a new Event before the Warnings of one change are counted: the two syncs of a
#: creation (the create handler and the resync timer's first tick) post within a second or two.
BURST_QUIET_SECONDS = 10.0


def refusal(custom: client.CustomObjectsApi, ns: str, body: dict[str, Any], dry_run: bool) -> str | None:
    """The API server's message when it refuses to create ``body`` in ``ns``; None when admitted."""
    try:
        custom.create_namespaced_custom_object(
            KEDA_GROUP, KEDA_VERSION, ns, "scaledobjects", body, **({"dry_run": "All"} if dry_run else {})
        )
    except client.ApiException as exc:
        return refusal_message(exc)
    return None


def wait_refused(custom: client.CustomObjectsApi, ns: str, body: dict[str, Any], message: str) -> None:
    """Until a dry run of ``body`` is refused with KEDA's ``message`` (the webhook's cache has caught
    up), then the real create is refused with it and nothing is created."""
    expected = SCALED_OBJECT_REFUSED + message
    wait_for(
        lambda: refusal(custom, ns, body, dry_run=True) == expected,
        60,
        interval=0.5,
        desc=f"KEDA's webhook refusing ScaledObject {body['metadata']['name']}: {message}",
    )
    assert refusal(custom, ns, body, dry_run=False) == expected
    names = [
        o["metadata"]["name"]
        for o in custom.list_namespaced_custom_object(KEDA_GROUP, KEDA_VERSION, ns, "scaledobjects")["items"]
    ]
    assert body["metadata"]["name"] not in names, names


def wait_change_refused(custom: client.CustomObjectsApi, ns: str, name: str, expected: str) -> None:
    """Until a dry-run change of ScaledObject ``name`` (a label: ``ValidateUpdate`` skips validation
    only for a finalizer's removal with the spec unchanged, ``isRemovingFinalizer``) is refused with
    ``expected``: KEDA's webhook lists HPAs from its informer cache, so a refusal that depends on an
    HPA just created holds only once the cache has it."""

    def refused() -> str | None:
        try:
            custom.patch_namespaced_custom_object(
                KEDA_GROUP,
                KEDA_VERSION,
                ns,
                "scaledobjects",
                name,
                {"metadata": {"labels": {"probe": "webhook-cache"}}},
                dry_run="All",
                _content_type="application/merge-patch+json",
            )
        except client.ApiException as exc:
            return refusal_message(exc)
        return None

    wait_for(lambda: refused() == expected, 60, interval=0.5, desc=f"KEDA refusing a change of {name}")


def test_kedas_webhooks_refuse_a_second_scaler_of_one_target(cluster: LocalCluster, api: Api) -> None:
    ns = api.ns
    custom = client.CustomObjectsApi(cluster.api)
    hpa_api = client.AutoscalingV2Api(cluster.api)
    with running_keda(cluster, ns):
        # verifyScaledObjects: a second ScaledObject on the same Deployment
        assert refusal(custom, ns, a_scaled_object("first", "web"), dry_run=False) is None
        wait_refused(
            custom,
            ns,
            a_scaled_object("second", "web"),
            f"the workload 'web' of type '{DEPLOYMENT_GVK}' is already managed by the ScaledObject 'first'",
        )

        # verifyHpas: a ScaledObject on a Deployment an HPA (not the ScaledObject's) already scales
        hpa_api.create_namespaced_horizontal_pod_autoscaler(
            ns, an_hpa_on("apps/v1", "Deployment", "api", "users-hpa")
        )
        wait_refused(
            custom,
            ns,
            a_scaled_object("third", "api"),
            f"the workload 'api' of type '{DEPLOYMENT_GVK}' is already managed by the hpa 'users-hpa'",
        )


def an_hpa_on(target_api_version: str, kind: str, target: str, name: str) -> client.V2HorizontalPodAutoscaler:
    """A user's own HPA (CPU utilization) of ``target``: not owned by anything."""
    return client.V2HorizontalPodAutoscaler(
        metadata=client.V1ObjectMeta(name=name),
        spec=client.V2HorizontalPodAutoscalerSpec(
            scale_target_ref=client.V2CrossVersionObjectReference(
                api_version=target_api_version, kind=kind, name=target
            ),
            min_replicas=1,
            max_replicas=2,
            metrics=[
                client.V2MetricSpec(
                    type="Resource",
                    resource=client.V2ResourceMetricSource(
                        name="cpu", target=client.V2MetricTarget(type="Utilization", average_utilization=50)
                    ),
                )
            ],
        ),
    )


@pytest.mark.cached_engine("llama")
def test_mode_keda_under_kedas_webhooks(cluster: LocalCluster, api: Api) -> None:
    """What the operator does where KEDA's webhooks are on: (1) a switch from mode hpa to keda — the
    operator deletes its HPA, then creates the ScaledObject (admitted: the webhook's cache no longer
    held the HPA here; had it, the refusal below would apply until the next resync); (2) mode keda on
    an LLMDeployment that a user's own HPA (another name) already scales — KEDA refuses the operator's
    ScaledObject (``verifyHpas``). Before, the operator raised the 403 into kopf, which retried the
    handler and the resync timer forever with nothing on the object (no condition, no Event); (3) a
    user's HPA made after the operator's ScaledObject, then a change of ``spec.autoscaling`` — KEDA
    refuses the operator's patch (``ValidateUpdate`` → ``verifyHpas``); the ScaledObject stays as last
    applied, but its HPA and the user's target one LLMDeployment, which Kubernetes' HPA controller
    refuses to scale (AmbiguousSelector), so ScalingActive False, AdmissionRefused, naming the user's
    HPA; the change is applied once that HPA is gone. Each refused change posts exactly one Warning,
    counted after a quiet window (the check stopped at the first Warning before, so a duplicate
    passed)."""
    ns = api.ns
    hpa_api = client.AutoscalingV2Api(cluster.api)
    custom = client.CustomObjectsApi(cluster.api)
    prom = {"source": "prometheus", "prometheusURL": "http://prometheus.invalid:9090"}

    def scaled_object(name: str) -> dict[str, Any] | None:
        try:
            return dict(
                custom.get_namespaced_custom_object(KEDA_GROUP, KEDA_VERSION, ns, "scaledobjects", name)
            )
        except client.ApiException as exc:
            if exc.status == 404:
                return None
            raise

    with running_keda(cluster, ns):
        hpa_api.create_namespaced_horizontal_pod_autoscaler(
            ns, an_hpa_on(f"{GROUP}/{VERSION}", "LLMDeployment", "taken", "users-hpa")
        )
        taken = an_autoscaled_deployment("taken", "llama", max_replicas=2, up={}, down={}, metrics=prom)
        taken["spec"]["autoscaling"]["mode"] = "keda"
        moved = an_autoscaled_deployment("moved", "llama", max_replicas=2, up={}, down={}, metrics=prom)
        moved["spec"]["autoscaling"]["mode"] = "hpa"
        api.create(moved)
        with running_operator(cluster, [ns]):
            # (1) hpa → keda
            wait_for(
                lambda: hpa_api.read_namespaced_horizontal_pod_autoscaler("moved", ns), 60, desc="HPA moved"
            )
            # no custom metrics API here (KEDA serves only external.metrics.k8s.io): T3 of trial 46
            api.wait_condition("moved", "ScalingActive", reason="CustomMetricsAPIMissing", timeout=60)
            api.patch("llmdeployments", "moved", {"spec": {"autoscaling": {"mode": "keda"}}})
            wait_for(lambda: scaled_object("moved"), 120, interval=0.5, desc="ScaledObject moved")
            api.wait_condition("moved", "ScalingActive", reason="KEDARendered", timeout=60)

            # (2) a user's HPA already scales the LLMDeployment: refused, reported, and applied once
            # that HPA is gone (the resync timer tries again)
            api.create(taken)
            refused = api.wait_condition("taken", "ScalingActive", reason="AdmissionRefused", timeout=60)
            assert refused["status"] == "False", refused
            keda_says = (
                f"{SCALED_OBJECT_REFUSED}the workload 'taken' of type '{GROUP}/{VERSION}.LLMDeployment' is "
                "already managed by the hpa 'users-hpa'"
            )
            assert refused["message"].startswith("the API server refused ScaledObject taken"), refused
            assert keda_says in refused["message"], refused
            assert scaled_object("taken") is None
            # Exactly one Warning, with the condition's words, once no other has come for a while: the
            # create handler and the resync timer's first tick both sync at creation from a copy without
            # the condition; the one whose status write finds it written posts none
            # (tests/unit/test_autoscaler_external_refusal.py). A second, duplicate Warning fails here.
            warnings = api.settled_events("taken", "AdmissionRefused", quiet=BURST_QUIET_SECONDS)
            assert [(e.type, e.message) for e in warnings] == [("Warning", refused["message"])], warnings
            hpa_api.delete_namespaced_horizontal_pod_autoscaler("users-hpa", ns)
            wait_for(
                lambda: scaled_object("taken"), 90, interval=0.5, desc="ScaledObject taken after the resync"
            )
            api.wait_condition("taken", "ScalingActive", reason="KEDARendered", timeout=30)

            # (3) a refused CHANGE of the ScaledObject the operator applied: a user's HPA on the
            # LLMDeployment created after it (KEDA v2.20.2 has no HPA webhook, so it is admitted), then
            # a change of spec.autoscaling; KEDA's ValidateUpdate runs the same validateWorkload →
            # verifyHpas as on create and refuses the operator's patch. The ScaledObject as last applied
            # stands, but KEDA's HPA for it and the user's HPA now target one LLMDeployment (shown
            # below), and kubernetes v1.34.4 pkg/controller/podautoscaler/horizontal.go
            # validateAndParseSelector stops every HPA of pods that two HPAs select (ScalingActive False
            # "AmbiguousSelector" on each): nothing the operator rendered scales, ScalingActive False,
            # reason AdmissionRefused (decide/autoscaler.py external_refused). No HPA controller runs in
            # this module: the two HPAs on one target are checked here, the controller's verdict is not.
            hpa_api.create_namespaced_horizontal_pod_autoscaler(
                ns, an_hpa_on(f"{GROUP}/{VERSION}", "LLMDeployment", "taken", "users-hpa")
            )
            kedas_hpa = wait_for(
                lambda: hpa_api.read_namespaced_horizontal_pod_autoscaler(keda_hpa_name("taken"), ns),
                60,
                desc="KEDA's HPA of taken",
            )
            users_hpa = hpa_api.read_namespaced_horizontal_pod_autoscaler("users-hpa", ns)
            assert (
                kedas_hpa.spec.scale_target_ref.to_dict()
                == users_hpa.spec.scale_target_ref.to_dict()
                == {
                    "api_version": f"{GROUP}/{VERSION}",
                    "kind": "LLMDeployment",
                    "name": "taken",
                }
            ), (kedas_hpa.spec.scale_target_ref, users_hpa.spec.scale_target_ref)
            wait_change_refused(custom, ns, "taken", keda_says)
            api.patch("llmdeployments", "taken", {"spec": {"autoscaling": {"maxReplicas": 3}}})
            standing = api.wait_condition("taken", "ScalingActive", reason="AdmissionRefused", timeout=60)
            assert standing["status"] == "False", standing
            assert standing["message"].startswith(
                "the API server refused the change to ScaledObject taken, which stays as last applied, but "
                "nothing the operator rendered scales this deployment while HorizontalPodAutoscaler "
                "users-hpa also targets it: Kubernetes' HPA controller stops that HPA and KEDA's HPA for "
                "taken (AmbiguousSelector: pods controlled by multiple HPAs); delete "
                f"HorizontalPodAutoscaler users-hpa: {keda_says} (tried again every "
            ), standing
            applied = scaled_object("taken")
            assert applied is not None and applied["spec"]["maxReplicaCount"] == 2, applied
            # One Warning for this change, counted after a window longer than the resync timer's
            # interval, so the timer's next try (refused again) falls inside it and posts none.
            warnings = api.settled_events("taken", "AdmissionRefused", quiet=EXTERNAL_RESYNC_SECONDS + 5)
            assert sorted((e.type, e.message) for e in warnings) == sorted(
                [("Warning", refused["message"]), ("Warning", standing["message"])]
            ), warnings
            # the change goes through once the user's HPA is gone (the resync timer tries again)
            hpa_api.delete_namespaced_horizontal_pod_autoscaler("users-hpa", ns)
            wait_for(
                lambda: (scaled_object("taken") or {}).get("spec", {}).get("maxReplicaCount") == 3,
                90,
                interval=0.5,
                desc="ScaledObject taken with maxReplicaCount 3 after the resync",
            )
            api.wait_condition("taken", "ScalingActive", reason="KEDARendered", timeout=30)
