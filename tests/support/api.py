"""The one API wrapper of the integration and e2e tests: LLMEngines and LLMDeployments of one namespace,
their children (Jobs, pods, ConfigMaps, Events), the engine cache, and the waits on them.

A module adds only what is its own, in a subclass (``class Api(SharedApi)``).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from kubernetes import client

from trtllm_operator.api import DEPLOYMENT_KIND, DEPLOYMENT_PLURAL, ENGINE_KIND, ENGINE_PLURAL, GROUP, VERSION
from trtllm_operator.decide.engine_spec import PreparedEngine
from trtllm_operator.emulator import Control, Fleet, PodFollower

from .artifacts import cache_artifact, prebound_artifact_pvc
from .cluster import LocalCluster
from .manifests import EngineBuilder, a_cached_engine
from .wait import wait_for, wait_settled

#: The label an LLMDeployment's pods carry (its name the value); :data:`SELECTOR` selects one's pods.
DEPLOYMENT_LABEL = "llm.trtllm-operator.dev/deployment"
SELECTOR = DEPLOYMENT_LABEL + "={}"
#: The plural :meth:`Api.create` posts a body of each kind to.
PLURALS = {ENGINE_KIND: ENGINE_PLURAL, DEPLOYMENT_KIND: DEPLOYMENT_PLURAL}


class Api:
    """Custom objects, pods, Jobs, ConfigMaps, Events and the engine cache of one namespace."""

    def __init__(self, cluster: LocalCluster, ns: str) -> None:
        self.ns = ns
        self.core = client.CoreV1Api(cluster.api)
        self.apps = client.AppsV1Api(cluster.api)
        self.batch = client.BatchV1Api(cluster.api)
        self.custom = client.CustomObjectsApi(cluster.api)
        #: A client model object as the JSON the API server sent (dicts, camelCase keys).
        self.san = cluster.api.sanitize_for_serialization

    # ------------------------------------------------------------------ custom objects, either kind
    def create(self, obj: EngineBuilder | dict[str, Any]) -> dict[str, Any]:
        """Create an LLMEngine or LLMDeployment: a manifest, or an :class:`EngineBuilder` (its manifest in
        this namespace, :meth:`EngineBuilder.manifest`); the plural comes from the body's ``kind``."""
        body = obj.manifest(self.ns) if isinstance(obj, EngineBuilder) else obj
        kind = body.get("kind")
        if kind not in PLURALS:
            raise ValueError(f"create: kind {kind!r} is not one of {sorted(PLURALS)}; set the body's kind")
        return dict(self.custom.create_namespaced_custom_object(GROUP, VERSION, self.ns, PLURALS[kind], body))

    def items(self, plural: str) -> list[dict[str, Any]]:
        listing = self.custom.list_namespaced_custom_object(GROUP, VERSION, self.ns, plural)
        return list(listing["items"])

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

    # ------------------------------------------------------------------ LLMEngines
    def engine(self, name: str) -> dict[str, Any]:
        return self.get(ENGINE_PLURAL, name)

    def phase(self, name: str) -> str | None:
        """The LLMEngine's ``status.phase``."""
        return (self.engine(name).get("status") or {}).get("phase")

    def wait_phase(self, name: str, phase: str, timeout: float = 60) -> dict[str, Any]:
        """Until the LLMEngine is in ``phase``; the engine."""

        def check() -> dict[str, Any] | None:
            e = self.engine(name)
            return e if (e.get("status") or {}).get("phase") == phase else None

        return wait_for(check, timeout=timeout, desc=f"LLMEngine {name} phase {phase}")

    # ------------------------------------------------------------------ LLMDeployments
    def deployment(self, name: str) -> dict[str, Any]:
        return self.get(DEPLOYMENT_PLURAL, name)

    def status(self, name: str) -> dict[str, Any]:
        """The LLMDeployment's status."""
        return self.deployment(name).get("status") or {}

    def replicas(self, name: str) -> int:
        return int(self.deployment(name)["spec"]["replicas"])

    def autoscaling(self, name: str) -> dict[str, Any]:
        return self.status(name).get("autoscaling") or {}

    def condition(self, name: str, type_: str) -> dict[str, Any] | None:
        """The LLMDeployment's ``type_`` condition, or None."""
        return next((c for c in self.status(name).get("conditions") or [] if c["type"] == type_), None)

    def wait_condition(
        self, name: str, type_: str, *, timeout: float = 30.0, desc: str = "", **fields: str
    ) -> dict[str, Any]:
        """Wait until the LLMDeployment's ``type_`` condition has every ``fields`` value (e.g.
        ``reason="ScalingDisabled"``, ``status="False"``); return that condition.
        :func:`~tests.support.wait.wait_for` with ``desc`` (default: the condition looked for)."""

        def matching() -> dict[str, Any] | None:
            c = self.condition(name, type_)
            return c if c is not None and all(c.get(k) == v for k, v in fields.items()) else None

        wanted = " ".join(f"{k}={v}" for k, v in fields.items())
        return wait_for(matching, timeout=timeout, desc=desc or f"{name} {type_} {wanted}")

    def set_load(self, fleet: Fleet, **fixed: float) -> float:
        fleet.set_control(Control(fixed=fixed))
        return time.monotonic()

    @contextmanager
    def follow_pods(self, fleet: Fleet) -> Iterator[Fleet]:
        """``fleet``'s Triton metrics emulators kept on the IPs of this namespace's Running LLMDeployment
        pods (:class:`~trtllm_operator.emulator.PodFollower`, polling every 0.3 s) until the block ends;
        yields ``fleet``."""
        follower = PodFollower(fleet, self.core, self.ns, DEPLOYMENT_LABEL, poll_seconds=0.3).start()
        try:
            yield fleet
        finally:
            follower.stop()

    def pods(self, name: str) -> list[Any]:
        """The LLMDeployment's pods not being deleted (client model objects)."""
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

    # ------------------------------------------------------------------ children and the namespace
    def jobs(self) -> list[dict[str, Any]]:
        return [self.san(j) for j in self.batch.list_namespaced_job(self.ns).items]

    def job_pods(self, job: str) -> list[dict[str, Any]]:
        """The pods of Job ``job`` (as JSON)."""
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

    def events(self, name: str, reason: str | None = None) -> list[Any]:
        """The core/v1 Events of the object ``name`` in this namespace (of ``reason`` only, if given)."""
        items = self.core.list_namespaced_event(self.ns, field_selector=f"involvedObject.name={name}").items
        return [e for e in items if reason is None or e.reason == reason]

    def settled_events(self, name: str, reason: str, quiet: float, timeout: float = 60) -> list[Any]:
        """The Events of ``reason`` about ``name`` once there is one and, for ``quiet`` seconds, no other
        (nor a higher ``count`` on one): a Warning posted twice for one change is two Events here (the
        operator posts each with ``count: 1``, kube/events.py ``post_event``), which a wait for the
        first one would miss. ``timeout``: seconds beyond the quiet window."""
        return wait_settled(
            lambda: self.events(name, reason),
            quiet,
            quiet + timeout,
            desc=f"{reason} Events of {name}",
            key=lambda events: sorted((e.metadata.uid, e.count) for e in events),
        )

    def event_reasons(self, name: str) -> list[str]:
        return [e.reason for e in self.events(name)]

    def cache_artifact(self, engine: dict[str, Any], missing: tuple[str, ...] = ()) -> PreparedEngine:
        """Record an artifact for the engine's key in the engine cache (as ``cache import`` does)."""
        return cache_artifact(self.core, self.ns, engine, missing)

    @contextmanager
    def artifact_pvc(self, claim: str = "engines") -> Iterator[str]:
        """A pre-bound PV/PVC pair (the local control plane has no PV binder), by default the ``engines``
        claim of :func:`~support.manifests.a_cached_engine`; yields the PV's name and deletes the PV
        (cluster scoped: the namespace's deletion leaves it) on exit."""
        pv = prebound_artifact_pvc(self.core, self.ns, claim)
        try:
            yield pv
        finally:
            self.core.delete_persistent_volume(pv)

    @contextmanager
    def with_cached_engine(self, name: str = "llama") -> Iterator[Api]:
        """LLMEngine ``name`` (:func:`~support.manifests.a_cached_engine`) created Ready-able from an
        artifact recorded in the engine cache on :meth:`artifact_pvc`'s claim; yields this wrapper and
        deletes the PV on exit."""
        with self.artifact_pvc():
            engine = a_cached_engine(name)
            self.cache_artifact(engine)
            self.create(engine)
            yield self


def find_condition(obj: dict[str, Any], type_: str) -> dict[str, Any] | None:
    """The ``type_`` condition of ``obj``'s status, or None (yet): for :func:`wait_for` callbacks."""
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c["type"] == type_:
            return dict(c)
    return None


def condition(obj: dict[str, Any], type_: str) -> dict[str, Any]:
    """The ``type_`` condition of ``obj``'s status; fails the test when there is none."""
    found = find_condition(obj, type_)
    if found is None:
        raise AssertionError(f"no {type_} condition in {obj.get('status')}")
    return found


def wait_serving(api: Api, fleet: Fleet, name: str, replicas: int, timeout: float = 90) -> None:
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
