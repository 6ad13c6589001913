"""The LLMDeployment side of the integration tests: an API wrapper and the "serving with metrics" wait."""

from __future__ import annotations

import time
from typing import Any

from kubernetes import client

from trtllm_operator.api import GROUP, VERSION
from trtllm_operator.decide.engine_spec import PreparedEngine
from trtllm_operator.emulator import Control, Fleet

from .artifacts import cache_artifact, prebound_artifact_pvc
from .cluster import LocalCluster
from .wait import wait_for

SELECTOR = "llm.trtllm-operator.dev/deployment={}"


class DeploymentApi:
    """Custom objects, pods, Jobs and the engine cache of one namespace: the API wrapper of the
    integration and e2e tests (a module adds only what is its own, in a subclass)."""

    def __init__(self, cluster: LocalCluster, ns: str) -> None:
        self.ns = ns
        self.core = client.CoreV1Api(cluster.api)
        self.apps = client.AppsV1Api(cluster.api)
        self.batch = client.BatchV1Api(cluster.api)
        self.custom = client.CustomObjectsApi(cluster.api)
        #: A client model object as the JSON the API server sent (dicts, camelCase keys).
        self.san = cluster.api.sanitize_for_serialization

    def items(self, plural: str) -> list[dict[str, Any]]:
        listing = self.custom.list_namespaced_custom_object(GROUP, VERSION, self.ns, plural)
        return list(listing["items"])

    def create(self, plural: str, body: dict[str, Any]) -> None:
        self.custom.create_namespaced_custom_object(GROUP, VERSION, self.ns, plural, body)

    def get(self, plural: str, name: str) -> dict[str, Any]:
        obj: dict[str, Any] = self.custom.get_namespaced_custom_object(GROUP, VERSION, self.ns, plural, name)
        return obj

    def patch(self, plural: str, name: str, body: dict[str, Any]) -> None:
        """A JSON merge patch of the object (RFC 7386)."""
        self.custom.patch_namespaced_custom_object(
            GROUP, VERSION, self.ns, plural, name, body, _content_type="application/merge-patch+json"
        )

    def delete(self, plural: str, name: str) -> None:
        self.custom.delete_namespaced_custom_object(GROUP, VERSION, self.ns, plural, name)

    def jobs(self) -> list[dict[str, Any]]:
        return [self.san(j) for j in self.batch.list_namespaced_job(self.ns).items]

    def deployment(self, name: str) -> dict[str, Any]:
        return self.get("llmdeployments", name)

    def status(self, name: str) -> dict[str, Any]:
        return self.deployment(name).get("status") or {}

    def replicas(self, name: str) -> int:
        return int(self.deployment(name)["spec"]["replicas"])

    def autoscaling(self, name: str) -> dict[str, Any]:
        return self.status(name).get("autoscaling") or {}

    def condition(self, name: str, type_: str) -> dict[str, Any] | None:
        return next((c for c in self.status(name).get("conditions") or [] if c["type"] == type_), None)

    def set_load(self, fleet: Fleet, **fixed: float) -> float:
        fleet.set_control(Control(fixed=fixed))
        return time.monotonic()

    def pods(self, name: str) -> list[Any]:
        """The deployment's pods not being deleted."""
        return [
            p
            for p in self.core.list_namespaced_pod(self.ns, label_selector=SELECTOR.format(name)).items
            if p.metadata.deletion_timestamp is None
        ]

    def unschedulable(self, name: str) -> int:
        return sum(
            1
            for p in self.pods(name)
            if any(
                c.type == "PodScheduled" and c.status == "False" and c.reason == "Unschedulable"
                for c in p.status.conditions or []
            )
        )

    def cache_artifact(self, engine: dict[str, Any], missing: tuple[str, ...] = ()) -> PreparedEngine:
        """Record an artifact for the engine's key in the engine cache (as ``cache import`` does)."""
        return cache_artifact(self.core, self.ns, engine, missing)

    def artifact_pvc(self) -> None:
        """A pre-bound PV/PVC pair (the local control plane has no PV binder)."""
        prebound_artifact_pvc(self.core, self.ns)


def wait_serving(api: DeploymentApi, fleet: Fleet, name: str, replicas: int, timeout: float = 90) -> None:
    """Until ``replicas`` pods are Ready, each with an emulator, and the autoscaler has read them."""

    def ok() -> bool:
        status = api.status(name)
        auto = status.get("autoscaling") or {}
        return (
            status.get("readyReplicas") == replicas
            and len(fleet.addresses()) == replicas
            # the saturation signal (active / max requests) has been read
            and auto.get("activeRequestUtilization") is not None
        )

    wait_for(ok, timeout=timeout, interval=0.3, desc=f"{name}: {replicas} ready replica(s) with metrics")
