"""The LLMEngine side of the integration tests: an API wrapper over one namespace, and conditions."""

from __future__ import annotations

from typing import Any

from kubernetes import client

from trtllm_operator.api import ENGINE_PLURAL, GROUP, VERSION

from .cluster import LocalCluster
from .manifests import EngineBuilder
from .wait import wait_for


class EngineApi:
    """LLMEngines, builder Jobs and pods, ConfigMaps and Events of one namespace."""

    def __init__(self, cluster: LocalCluster, namespace: str) -> None:
        self.ns = namespace
        self.core = client.CoreV1Api(cluster.api)
        self.batch = client.BatchV1Api(cluster.api)
        self.custom = client.CustomObjectsApi(cluster.api)
        self.san = cluster.api.sanitize_for_serialization

    def create(self, engine: EngineBuilder) -> dict[str, Any]:
        return dict(
            self.custom.create_namespaced_custom_object(
                GROUP, VERSION, self.ns, ENGINE_PLURAL, engine.manifest(self.ns)
            )
        )

    def engine(self, name: str) -> dict[str, Any]:
        return dict(self.custom.get_namespaced_custom_object(GROUP, VERSION, self.ns, ENGINE_PLURAL, name))

    def patch_engine(self, name: str, body: dict[str, Any]) -> None:
        self.custom.patch_namespaced_custom_object(
            GROUP, VERSION, self.ns, ENGINE_PLURAL, name, body, _content_type="application/merge-patch+json"
        )

    def delete_engine(self, name: str) -> None:
        self.custom.delete_namespaced_custom_object(GROUP, VERSION, self.ns, ENGINE_PLURAL, name)

    def jobs(self) -> list[dict[str, Any]]:
        return [self.san(j) for j in self.batch.list_namespaced_job(self.ns).items]

    def pods(self, job: str) -> list[dict[str, Any]]:
        items = self.core.list_namespaced_pod(
            self.ns, label_selector=f"batch.kubernetes.io/job-name={job}"
        ).items
        return [self.san(p) for p in items]

    def configmap(self, name: str) -> dict[str, Any] | None:
        try:
            return dict(self.san(self.core.read_namespaced_config_map(name, self.ns)))
        except client.ApiException as exc:
            if exc.status == 404:
                return None
            raise

    def event_reasons(self, name: str) -> list[str]:
        items = self.core.list_namespaced_event(self.ns, field_selector=f"involvedObject.name={name}").items
        return [e.reason for e in items]

    def phase(self, name: str) -> str | None:
        return (self.engine(name).get("status") or {}).get("phase")

    def wait_phase(self, name: str, phase: str, timeout: float = 60) -> dict[str, Any]:
        def check() -> dict[str, Any] | None:
            e = self.engine(name)
            return e if (e.get("status") or {}).get("phase") == phase else None

        return wait_for(check, timeout=timeout, desc=f"LLMEngine {name} phase {phase}")


def find_condition(engine: dict[str, Any], type_: str) -> dict[str, Any] | None:
    """The ``type_`` condition of ``engine``'s status, or None (yet): for :func:`wait_for` callbacks."""
    for c in (engine.get("status") or {}).get("conditions") or []:
        if c["type"] == type_:
            return dict(c)
    return None


def condition(engine: dict[str, Any], type_: str) -> dict[str, Any]:
    for c in (engine.get("status") or {}).get("conditions") or []:
        if c["type"] == type_:
            return dict(c)
    raise AssertionError(f"no {type_} condition in {engine.get('status')}")
