"""Issue #20, restart memory: kopf keeps of a resource the operator only indexes what its index keeps
(handlers/indexes.py ``PROJECTIONS``, applied by handlers/watchstream.py before kopf queues an
object), and nothing a consumer reads is lost.

Three checks: every handler kopf has registered for a projected resource is one reviewed here (a
new one fails until someone checks it reads only what the projection keeps); each reviewed
consumer — the indexes and the event handlers — gives the same result on the full and the projected
object, for objects whose dropped fields are all filled in; and the watch stream hands kopf the
projected objects (failed before: kopf got the pod spec, the pod template, the ConfigMap data).
"""

from __future__ import annotations

import asyncio
import copy
import json
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import kopf
import pytest
from kopf._cogs.clients import watching
from kopf._cogs.structs import references

import trtllm_operator.handlers  # noqa: F401 - registers every handler
from trtllm_operator.api.wire import (
    COMPONENT_BUILDER,
    COMPONENT_MODEL_REPOSITORY,
    GPU_PRODUCT_LABEL,
    GPU_RESOURCE,
    GROUP,
    JOB_NAME_LABEL,
    LABEL_COMPONENT,
    LABEL_DEPLOYMENT,
    LABEL_ENGINE_KEY,
    LABEL_MANAGED_BY,
    MANAGED_BY,
    VERSION,
)
from trtllm_operator.handlers import deployment, engine, indexes, watchstream

#: (API group, plural) → the handlers reviewed against its projection: each reads only metadata, and
#: what its own projection keeps (``status``; a Deployment's ``spec.replicas``; the data of the
#: ConfigMaps it keeps whole; a node's ``status.allocatable``; a CRD's name).
REVIEWED: dict[tuple[str, str], set[str]] = {
    ("", "pods"): {
        "trtllm_operator.handlers.indexes.cached_serving_pods",
        "trtllm_operator.handlers.deployment.on_serving_pod_event",
        "trtllm_operator.handlers.engine.builder_pod_event",
    },
    ("apps", "deployments"): {
        "trtllm_operator.handlers.indexes.cached_deployments",
        "trtllm_operator.handlers.deployment.on_workload_event",
    },
    ("", "configmaps"): {
        "trtllm_operator.handlers.indexes.cached_configmaps",
        "trtllm_operator.handlers.indexes.cached_model_repositories",
    },
    ("", "services"): {"trtllm_operator.handlers.indexes.cached_services"},
    ("policy", "poddisruptionbudgets"): {"trtllm_operator.handlers.indexes.cached_pdbs"},
    ("networking.k8s.io", "networkpolicies"): {"trtllm_operator.handlers.indexes.cached_network_policies"},
    ("", "nodes"): {"trtllm_operator.handlers.indexes.cached_gpu_nodes"},
    ("apiextensions.k8s.io", "customresourcedefinitions"): {"trtllm_operator.handlers.indexes.cached_crds"},
}


def _key(selector: references.Selector) -> tuple[str | None, str | None]:
    """(API group, plural) a handler's selector names (``kopf.index("", "v1", "pods")``: any_name)."""
    return selector.group, selector.plural or selector.any_name


def _handlers_of(group: str, plural: str) -> set[str]:
    registry = kopf.get_default_registry()
    found: set[str] = set()
    for sub in (registry._indexing, registry._watching, registry._spawning, registry._changing):
        for handler in sub.get_all_handlers():
            selector = handler.selector
            if selector is not None and _key(selector) == (group, plural):
                found.add(f"{handler.fn.__module__}.{handler.fn.__qualname__}")
    return found


def test_every_handler_of_a_projected_resource_was_reviewed_against_its_projection() -> None:
    assert set(indexes.PROJECTIONS) == set(REVIEWED)
    for (group, plural), reviewed in REVIEWED.items():
        assert _handlers_of(group, plural) == reviewed, (
            f"handlers of {group or 'core'}/{plural} changed: check that each reads only what "
            f"indexes.PROJECTIONS keeps of it (or keep more there), then update REVIEWED"
        )


def test_no_change_handler_of_a_projected_resource() -> None:
    """kopf's diff-base, finalizers and progress storage would read and patch the whole object:
    only event handlers and indexes may watch a projected resource."""
    registry = kopf.get_default_registry()
    for sub in (registry._changing, registry._spawning):
        for handler in sub.get_all_handlers():
            selector = handler.selector
            assert selector is None or _key(selector) not in indexes.PROJECTIONS


# ----------------------------------------------------------------------------- full objects
_OWNER = [
    {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "LLMDeployment",
        "name": "chat",
        "uid": "u-d",
        "controller": True,
    }
]
_KOPF = {"kopf.trtllm-operator.dev/last-handled-configuration": "{}"}


def _meta(name: str, **more: Any) -> dict[str, Any]:
    return {
        "name": name,
        "namespace": "ml",
        "uid": f"u-{name}",
        "resourceVersion": "7",
        "generation": 3,
        "creationTimestamp": "2026-12-04T22:00:00Z",
        "managedFields": [{"manager": "kube-controller-manager", "fieldsV1": {"f:spec": {}}}],
        **more,
    }


def _pod_spec() -> dict[str, Any]:
    return {
        "nodeName": "h100-0",
        "containers": [{"name": "triton", "image": "nvcr.io/nvidia/tritonserver:25.01", "args": ["x"] * 20}],
        "volumes": [{"name": "model-repository", "configMap": {"name": "chat-abc"}}],
    }


def serving_pod(*, ready: bool, waiting: str | None = None, deleting: bool = False) -> dict[str, Any]:
    labels = {LABEL_DEPLOYMENT: "chat", LABEL_ENGINE_KEY: "k1", LABEL_MANAGED_BY: MANAGED_BY}
    meta = _meta(
        "chat-7d9-x",
        labels=labels,
        ownerReferences=[{"kind": "ReplicaSet", "name": "chat-7d9", "uid": "u-rs"}],
    )
    if deleting:
        meta["deletionTimestamp"] = "2026-12-04T22:05:00Z"
    state = {"waiting": {"reason": waiting, "message": "back-off pulling"}} if waiting else {"running": {}}
    status = {
        "phase": "Running" if ready else "Pending",
        "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        "containerStatuses": [{"name": "triton", "ready": ready, "state": state}],
    }
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": _pod_spec(), "status": status}


def builder_pod(*, unschedulable: bool) -> dict[str, Any]:
    labels = {LABEL_MANAGED_BY: MANAGED_BY, LABEL_COMPONENT: COMPONENT_BUILDER, JOB_NAME_LABEL: "build-k1"}
    conds = [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "0/4 nodes"}]
    status = {"phase": "Pending", "conditions": conds if unschedulable else []}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": _meta("build-k1-x", labels=labels),
        "spec": _pod_spec(),
        "status": status,
    }


def workload() -> dict[str, Any]:
    labels = {LABEL_DEPLOYMENT: "chat", LABEL_MANAGED_BY: MANAGED_BY}
    meta = _meta("chat", labels=labels, ownerReferences=_OWNER, annotations={f"{GROUP}/rendered-hash": "h1"})
    spec = {
        "replicas": 2,
        "selector": {"matchLabels": labels},
        "template": {"metadata": {"labels": labels}, "spec": _pod_spec()},
    }
    status = {"replicas": 2, "readyReplicas": 1, "updatedReplicas": 2, "observedGeneration": 3}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta, "spec": spec, "status": status}


def configmap(component: str | None, *, managed: bool = True) -> dict[str, Any]:
    labels = {LABEL_DEPLOYMENT: "chat"}
    if managed:
        labels[LABEL_MANAGED_BY] = MANAGED_BY
    if component:
        labels[LABEL_COMPONENT] = component
    data = {"config.pbtxt": "name: 'ensemble'\n" * 50, "record.json": '{"key": "k1"}'}
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": _meta(f"cm-{component}", labels=labels, ownerReferences=_OWNER),
        "data": data,
        "binaryData": {"b": "AAAA"},
    }


def child(kind: str, api_version: str) -> dict[str, Any]:
    labels = {LABEL_MANAGED_BY: MANAGED_BY, LABEL_DEPLOYMENT: "chat"}
    meta = _meta(
        "chat", labels=labels, ownerReferences=_OWNER, annotations={f"{GROUP}/rendered-hash": "h1", **_KOPF}
    )
    return {
        "apiVersion": api_version,
        "kind": kind,
        "metadata": meta,
        "spec": {"ports": [{"port": 8000}]},
        "status": {"loadBalancer": {}},
    }


def node() -> dict[str, Any]:
    status = {
        "allocatable": {GPU_RESOURCE: "8", "cpu": "96"},
        "capacity": {GPU_RESOURCE: "8", "cpu": "96"},
        "images": [{"names": ["nvcr.io/x"], "sizeBytes": 1}] * 5,
        "conditions": [{"type": "Ready", "status": "True"}],
    }
    meta = _meta("h100-0", labels={GPU_PRODUCT_LABEL: "NVIDIA-H100-80GB-HBM3"})
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": meta,
        "spec": {"podCIDR": "10.0.0.0/24"},
        "status": status,
    }


def crd() -> dict[str, Any]:
    spec = {
        "group": "leaderworkerset.x-k8s.io",
        "names": {"plural": "leaderworkersets"},
        "versions": [{"name": "v1", "schema": {"openAPIV3Schema": {"type": "object"}}}],
    }
    meta = _meta("leaderworkersets.leaderworkerset.x-k8s.io")
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": meta,
        "spec": spec,
        "status": {"conditions": []},
    }


#: (API group, plural) → full objects of it, each with the fields its projection drops filled in.
OBJECTS: dict[tuple[str, str], list[dict[str, Any]]] = {
    ("", "pods"): [
        serving_pod(ready=True),
        serving_pod(ready=False, waiting="ImagePullBackOff"),
        serving_pod(ready=True, deleting=True),
        builder_pod(unschedulable=True),
        builder_pod(unschedulable=False),
    ],
    ("apps", "deployments"): [workload()],
    ("", "configmaps"): [
        configmap(COMPONENT_MODEL_REPOSITORY),
        configmap("engine-artifact"),
        configmap(None),
        configmap(COMPONENT_MODEL_REPOSITORY, managed=False),
    ],
    ("", "services"): [child("Service", "v1")],
    ("policy", "poddisruptionbudgets"): [child("PodDisruptionBudget", "policy/v1")],
    ("networking.k8s.io", "networkpolicies"): [child("NetworkPolicy", "networking.k8s.io/v1")],
    ("", "nodes"): [node()],
    ("apiextensions.k8s.io", "customresourcedefinitions"): [crd()],
}


def _projected(key: tuple[str, str], obj: dict[str, Any]) -> dict[str, Any]:
    """``obj`` as kopf now stores it: through the operator's watch stream."""
    event = watchstream.without_managed_fields(
        {"type": None, "object": copy.deepcopy(obj)}, indexes.PROJECTIONS[key]
    )
    projected: dict[str, Any] = event["object"]
    return projected


def _full(obj: dict[str, Any]) -> dict[str, Any]:
    """``obj`` as kopf stored it before (without ``managedFields`` only)."""
    event = watchstream.without_managed_fields({"type": None, "object": copy.deepcopy(obj)})
    full: dict[str, Any] = event["object"]
    return full


def test_the_projection_drops_what_no_consumer_reads() -> None:
    """The point of it (failed before: no projection, the objects whole)."""
    pod = _projected(("", "pods"), serving_pod(ready=True))
    assert set(pod) == {"apiVersion", "kind", "metadata", "status"}
    deploy = _projected(("apps", "deployments"), workload())
    assert deploy["spec"] == {"replicas": 2}
    repo, entry, _, foreign = (_projected(("", "configmaps"), c) for c in OBJECTS[("", "configmaps")])
    assert "data" not in repo and "binaryData" not in repo and "data" not in foreign
    assert entry["data"] == configmap("engine-artifact")["data"]  # the engine cache's records stay
    assert _projected(("apiextensions.k8s.io", "customresourcedefinitions"), crd())["spec"] == {
        "group": "leaderworkerset.x-k8s.io"
    }
    assert _projected(("", "nodes"), node())["status"] == {"allocatable": {GPU_RESOURCE: "8", "cpu": "96"}}


def _index_calls(key: tuple[str, str]) -> list[Callable[..., Any]]:
    registry = kopf.get_default_registry()
    return [
        h.fn
        for h in registry._indexing.get_all_handlers()
        if h.selector is not None and _key(h.selector) == key
    ]


def _matches(fn: Callable[..., Any], obj: dict[str, Any]) -> bool:
    """Whether kopf would call the index ``fn`` for ``obj`` (its label filter)."""
    registry = kopf.get_default_registry()
    handler = next(h for h in registry._indexing.get_all_handlers() if h.fn is fn)
    labels = obj["metadata"].get("labels") or {}
    for label, value in (handler.labels or {}).items():
        if label not in labels or (value is not kopf.PRESENT and labels[label] != value):
            return False
    return True


@pytest.mark.parametrize("key", sorted(OBJECTS), ids=lambda k: f"{k[0] or 'core'}/{k[1]}")
def test_every_index_holds_the_same_from_the_projected_object(key: tuple[str, str]) -> None:
    """What the caches serve into decisions is unchanged: each index of the resource, called the way
    kopf calls it, on the full object and on the projected one."""
    fns = _index_calls(key)
    assert fns
    for obj in OBJECTS[key]:
        for fn in fns:
            if not _matches(fn, obj):
                continue

            def call(body: dict[str, Any], fn: Callable[..., Any] = fn) -> Any:
                meta = body["metadata"]
                return asyncio.run(
                    fn(
                        namespace=meta.get("namespace"),
                        name=meta.get("name"),
                        body=kopf.Body(body),
                        labels=meta.get("labels"),
                    )
                )

            assert call(_projected(key, obj)) == call(_full(obj)), (fn.__name__, obj["metadata"]["name"])


@pytest.fixture
def queued(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Any]]:
    """What the LLMDeployment event handlers do, recorded (reconciles queued, settled asked)."""
    calls: list[Any] = []

    async def queue(namespace: str | None, name: str) -> None:
        calls.append(("reconcile", namespace, name))

    def settled(namespace: str, name: str) -> bool:
        calls.append(("settled?", namespace, name))
        return False

    monkeypatch.setattr(deployment, "_queue_reconcile", queue)
    monkeypatch.setattr(deployment, "settled", settled)
    monkeypatch.setattr(deployment, "_pods_seen", {})
    yield calls


@pytest.mark.parametrize("type_", [None, "MODIFIED", "DELETED"])
def test_the_llmdeployment_event_handlers_act_the_same_on_the_projected_objects(
    queued: list[Any], type_: str | None
) -> None:
    for key, handler in (
        (("", "pods"), deployment.on_serving_pod_event),
        (("apps", "deployments"), deployment.on_workload_event),
    ):
        for obj in OBJECTS[key]:
            seen = []
            for body in (_full(obj), _projected(key, obj)):
                queued.clear()
                deployment._pods_seen.clear()
                asyncio.run(handler(event={"type": type_, "object": body}))
                seen.append(list(queued))
            assert seen[0] == seen[1], (handler.__name__, obj["metadata"]["name"])


def test_what_the_pod_handlers_compare_is_the_same_on_the_projected_pods() -> None:
    """The serving pod handler acts only when its fingerprint of a pod changes: the same fingerprint
    from the projected pod (the recorded effects above compare one event each)."""
    for obj in OBJECTS[("", "pods")]:
        assert deployment._pod_fingerprint(_projected(("", "pods"), obj)) == deployment._pod_fingerprint(
            _full(obj)
        )


def test_the_builder_pod_event_acts_the_same_on_the_projected_objects(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[Any] = []
    job = {
        "metadata": {
            "name": "build-k1",
            "ownerReferences": [
                {"kind": "LLMEngine", "apiVersion": f"{GROUP}/{VERSION}", "name": "e", "uid": "u-e"}
            ],
        }
    }

    class Kube:
        def get(self, res: Any, namespace: str, name: str) -> dict[str, Any]:
            calls.append(("get", res.kind, namespace, name))
            return job

    monkeypatch.setattr(engine, "default_kube", lambda *_: Kube())
    monkeypatch.setattr(
        engine, "reconcile", lambda namespace, owner, **_: calls.append(("reconcile", namespace, owner))
    )
    monkeypatch.setattr(engine, "reconcile_queued", lambda: calls.append(("queue moves",)))
    for obj in OBJECTS[("", "pods")]:
        seen = []
        for body in (_full(obj), _projected(("", "pods"), obj)):
            calls.clear()
            engine.builder_pod_event(body=kopf.Body(body), namespace=body["metadata"]["namespace"])
            seen.append(list(calls))
        assert seen[0] == seen[1], obj["metadata"]["name"]
        if obj is OBJECTS[("", "pods")][3]:  # the unschedulable builder pod holds no build slot
            assert ("queue moves",) in seen[0]


# ----------------------------------------------------------------------------- the watch stream
@pytest.fixture
def stream(
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[Callable[[references.Resource, dict[str, Any]], dict[str, Any]]]:
    """One listed object through kopf's watch stream with the operator's wrapper installed."""

    def through(resource: references.Resource, obj: dict[str, Any]) -> dict[str, Any]:
        async def kopfs(**_: Any) -> AsyncIterator[Any]:
            yield {"type": None, "object": copy.deepcopy(obj)}

        async def collect() -> list[Any]:
            return [
                e async for e in watching.infinite_watch(settings=None, resource=resource, namespace="ml")
            ]

        monkeypatch.setattr(watchstream, "_kopf_infinite_watch", kopfs)
        (event,) = asyncio.run(collect())
        stored: dict[str, Any] = event["object"]
        return stored

    monkeypatch.setattr(watching, "infinite_watch", watching.infinite_watch)  # restored afterwards
    watchstream.install()
    yield through


def _resource(group: str, version: str, plural: str) -> references.Resource:
    return references.Resource(group=group, version=version, plural=plural, namespaced=True)


def test_kopf_stores_the_projection_of_an_indexed_resource_and_the_whole_llm_objects(
    stream: Callable[[references.Resource, dict[str, Any]], dict[str, Any]],
) -> None:
    """Failed before: kopf held the pod spec, the pod template and the model-repository files."""
    pod = stream(_resource("", "v1", "pods"), serving_pod(ready=True))
    assert "spec" not in pod and pod["status"]["phase"] == "Running"
    assert stream(_resource("apps", "v1", "deployments"), workload())["spec"] == {"replicas": 2}
    assert "data" not in stream(_resource("", "v1", "configmaps"), configmap(COMPONENT_MODEL_REPOSITORY))
    llm = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "LLMEngine",
        "metadata": _meta("e"),
        "spec": {"model": "m"},
        "status": {"phase": "Ready"},
    }
    stored = stream(_resource(GROUP, VERSION, "llmengines"), llm)
    assert stored["spec"] == {"model": "m"} and stored["status"] == {
        "phase": "Ready"
    }  # change handlers read it
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": _meta("j"), "spec": {"template": {}}}
    assert stream(_resource("batch", "v1", "jobs"), job)["spec"] == {"template": {}}


# ----------------------------------------------------------------------------- interned strings
def _parsed(obj: dict[str, Any]) -> dict[str, Any]:
    """``obj`` as kopf gets it from one watch event: parsed on its own, no string shared with any
    other object (``json.loads`` shares equal keys only within one document)."""
    parsed: dict[str, Any] = json.loads(json.dumps(obj))
    return parsed


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, dict):
        for k, v in value.items():
            yield k
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)
    elif isinstance(value, str):
        yield value


@pytest.mark.parametrize(
    "resource, objects",
    [
        (
            _resource(GROUP, VERSION, "llmengines"),
            [
                {
                    "apiVersion": f"{GROUP}/{VERSION}",
                    "kind": "LLMEngine",
                    "metadata": _meta(name, annotations={**_KOPF, "note": "x" * 65}),
                    "spec": {"model": {"source": "hf://m"}, "build": {"maxBatchSize": 8, "paged": True}},
                    "status": {
                        "phase": "Ready",
                        "conditions": [{"type": "Ready", "status": "True", "message": "y" * 65}],
                        "sizeBytes": None,
                        "ratio": 0.5,
                    },
                }
                for name in ("e-1", "e-2")
            ],
        ),
        (_resource("", "v1", "pods"), [serving_pod(ready=True), serving_pod(ready=True)]),
    ],
)
def test_kopf_holds_each_key_and_short_string_once_across_objects(
    stream: Callable[[references.Resource, dict[str, Any]], dict[str, Any]],
    resource: references.Resource,
    objects: list[dict[str, Any]],
) -> None:
    """Failed before: two objects parsed from two watch events held two copies of every key and
    value (``metadata``, ``namespace``, ``True`` …), for every object kopf and the indexes hold.
    Nothing changes but the identity of equal strings: kopf gets the same object (whole, or its
    projection) as before; strings longer than the limit are left as parsed."""
    project = watchstream.projection(resource) or (lambda o: o)
    first, second = (stream(resource, _parsed(o)) for o in objects)
    for obj, stored in zip(objects, (first, second), strict=True):
        expected = copy.deepcopy(obj)
        del expected["metadata"]["managedFields"]
        assert stored == project(expected)
    once = {s: s for s in _strings(first)}
    for s in ("metadata", "namespace", "ml", "True", "Ready", "conditions"):
        assert any(t is once[s] for t in _strings(second)), f"{s!r} held twice"
    limit = watchstream.INTERN_MAX_CHARS
    held: dict[str, str] = {}
    for s in (*_strings(first), *_strings(second)):
        if len(s) <= limit:
            assert held.setdefault(s, s) is s, f"{s!r} held twice"
    if resource.plural == "llmengines":
        longer = [s for s in _strings(first) if len(s) > limit]
        assert "x" * 65 in longer and "y" * 65 in longer  # kept, as parsed


def test_interning_keeps_every_json_value() -> None:
    value = {"a": [1, 2.5, True, False, None, "s", {"b": []}], "c": {}, "d": "x" * 100}
    assert watchstream.interned(value) == value
    assert [type(v) for v in watchstream.interned(value)["a"]] == [
        int,
        float,
        bool,
        bool,
        type(None),
        str,
        dict,
    ]
