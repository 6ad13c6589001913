"""Watch caches: what the reconciles read, from kopf indexes over watch streams kopf holds open.

A reconcile used to GET its object, its engine, each child, the engine-cache entry, the builder
Job, and LIST its pods and the GPU nodes — 10 to 20 requests per reconcile, most of the API traffic
of a burst (benchmarks/scale.py, RESULTS.md "Load"). controller-runtime operators (LWS, KServe)
read those from informer caches; kopf's equivalent is ``@kopf.index``: kopf keeps each index from
the watch stream of its resource, and does not start resource-changing handlers until every index
has been filled by the first listing (kopf docs, "Indexing" → "Readiness": handlers are blocked
until all indexes are populated), so a restarted operator never decides from an empty cache.

The indexes here are keyed by ``(namespace, name)`` (one value) or by a label (several values) and
hold a slim copy: without ``metadata.managedFields`` and kopf's annotations, and for children only
what the reconciles read (:func:`_trim`, :func:`_workload`). They are ``async`` functions, so kopf runs them
on its event loop, never in the thread pool that runs the (synchronous) handlers.

**What may be read from a cache, and what is read fresh.** A cache can lag the API server by a
watch round-trip. Reading from it is safe where a stale answer only delays a write that the next
watch event triggers anyway (level-based reconcile), and where every write it leads to is guarded
by the API server itself. So:

* from the caches (:func:`get`, :func:`serving_pods`, :func:`gpus_per_node`,
  :func:`crd_installed`, :func:`custom_metrics_api_services`): the engine an LLMDeployment serves and
  the engine whose
  ``status.usedBy`` is kept (a merge patch of that field alone, whose only writer is the
  LLMDeployment controller and whose value comes from an index: a stale copy can only delay it
  to the next event — :func:`trtllm_operator.handlers.deployment.sync_used_by`); the children,
  to decide that nothing needs writing (a cached child with this parent's controller reference and
  the same rendered hash is left alone); serving pods (counts for status); nodes (GPUs per node); whether the
  LeaderWorkerSet CRD is installed; whether the custom metrics API is registered and Available (mode
  hpa: the condition says so, and the 30 s resync of that mode reads it again); the builder Jobs an
  LLMEngine owns (:func:`builder_jobs_owned_by`: candidates for a superseded build, each read fresh before any
  deletion);
* the object being reconciled: from its cache, when the cached ``resourceVersion`` is the newest
  this process wrote or read (:func:`~trtllm_operator.handlers.plumbing.cache_first`), with a
  client that writes only once that copy is proven current — its own status write guarded by what
  the decision read of the cached copy (uid, generation, deletion, honoured annotations, status:
  ``kube/status.py`` ``status_guard``; the API server refuses it otherwise), any other write after
  a GET shows the same ``resourceVersion``; else the reconcile starts again on the fresh object. So
  status transitions and their Events are decided against the last status written (a stale copy
  re-posted Events and met 409s in benchmarks/scale.py) and a spec the cache does not show yet is
  never rendered backwards;
* fresh (a GET of the API server), always: every child about to be written (ownership checked on
  the fresh copy before a patch, :func:`~trtllm_operator.handlers.plumbing.apply_owned`; a create
  goes through ``create_or_get``, 409 → read the existing object and check its ownership);
  deletion guards (``release_claim``: a PVC in use must not keep the ownerReference that would
  garbage-collect it; pruning ConfigMaps lists the ReplicaSets that still mount them; a superseded
  builder Job and the LLMEngines that might still want its key, before it is stopped); the
  engine-cache entry and builder Job before a build is started (a build is the expensive action);
  the build queue (``build_queue``: the concurrent-build limit counts running Jobs from the API
  server).

Reads return deep copies (:func:`get`: callers may change them), except :func:`peek`, the cached
object itself for checks that only read it and run several times per object at a restart (the
settled tests of the resume and of the replayed listings, the autoscaler's resume, ``usedBy``).

Outside a running operator (a reconcile called directly, e.g. from a test without kopf) nothing is
bound and every read falls back to the API server.
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Callable, Mapping
from typing import Any

import kopf

from trtllm_operator.api.owners import is_owned_by
from trtllm_operator.api.wire import (
    COMPONENT_BUILDER,
    COMPONENT_MODEL_REPOSITORY,
    CUSTOM_METRICS_API_SERVICES,
    DEPLOYMENT_PLURAL,
    ENGINE_PLURAL,
    GPU_PRODUCT_LABEL,
    GPU_RESOURCE,
    GROUP,
    KOPF_ANNOTATION_PREFIX,
    LABEL_COMPONENT,
    LABEL_DEPLOYMENT,
    LABEL_MANAGED_BY,
    MANAGED_BY,
    VERSION,
)
from trtllm_operator.kube.client import (
    CONFIG_MAP,
    CRD,
    DEPLOYMENT,
    JOB,
    LLM_DEPLOYMENT,
    LLM_ENGINE,
    NETWORK_POLICY,
    NODE,
    PDB,
    POD,
    SERVICE,
    Kube,
    Resource,
)

#: Objects the operator manages carry this label (children, cache entries, builder Jobs): only
#: those are cached, so a namespace's other ConfigMaps, Services … cost no memory here.
_MANAGED = {LABEL_MANAGED_BY: MANAGED_BY}

#: The bound indexes (kopf passes them to startup handlers); None outside a running operator.
_indices: dict[str, Any] | None = None


def _trim(body: Mapping[str, Any], *, keep: tuple[str, ...] | None = None) -> dict[str, Any]:
    """The object without ``metadata.managedFields`` (half of a small object's size) and kopf's
    bookkeeping annotations (its diff-base repeats the whole spec); ``keep``: only these top-level
    fields besides ``apiVersion``, ``kind`` and ``metadata`` (None: all)."""
    out = {
        k: v for k, v in body.items() if keep is None or k in keep or k in ("apiVersion", "kind", "metadata")
    }
    meta = dict(out.get("metadata") or {})
    meta.pop("managedFields", None)
    annotations = meta.get("annotations")
    if annotations and any(k.startswith(KOPF_ANNOTATION_PREFIX) for k in annotations):
        meta["annotations"] = {
            k: v for k, v in annotations.items() if not k.startswith(KOPF_ANNOTATION_PREFIX)
        }
    out["metadata"] = meta
    return out


def _by_name(
    namespace: str | None, name: str | None, body: Mapping[str, Any], *, keep: tuple[str, ...] | None = None
) -> dict[Any, Any]:
    return {(namespace, name): _trim(body, keep=keep)}


#: What the reconciles read of a cached child (issue 20: the caches held whole objects — pod
#: templates, Triton configs — 665 MiB at 1,000 + 1,000). Every child is written only after a fresh
#: GET (``plumbing.apply_owned``), so a slim cached copy decides only "unchanged" (ownership, the
#: rendered-hash annotation, ``spec.replicas``) and what the status reports (a workload's ``status``,
#: a pod's ``status`` and labels).
_METADATA_ONLY: tuple[str, ...] = ()


def _workload(body: Mapping[str, Any]) -> dict[str, Any]:
    """A Deployment: metadata, ``status``, and of its spec only ``replicas`` (no pod template)."""
    out = _trim(body, keep=("status",))
    replicas = (body.get("spec") or {}).get("replicas")
    out["spec"] = {} if replicas is None else {"replicas": replicas}
    return out


def _metadata_only(body: Mapping[str, Any]) -> dict[str, Any]:
    """A Service, PodDisruptionBudget or NetworkPolicy: its metadata (ownership, rendered hash)."""
    return _trim(body, keep=_METADATA_ONLY)


def _pod(body: Mapping[str, Any]) -> dict[str, Any]:
    """A pod: metadata and ``status`` (what the status is decided from), not the pod spec."""
    return _trim(body, keep=("status",))


def _configmap(body: Mapping[str, Any]) -> dict[str, Any]:
    """A ConfigMap the operator manages: a model-repository ConfigMap (Triton's files, only ever
    compared by its rendered hash) without its data; cache entries and build specs with theirs."""
    component = ((body.get("metadata") or {}).get("labels") or {}).get(LABEL_COMPONENT)
    return _trim(body, keep=_METADATA_ONLY if component == COMPONENT_MODEL_REPOSITORY else None)


def _watched_configmap(body: Mapping[str, Any]) -> dict[str, Any]:
    """Any ConfigMap of a watched namespace: one the operator manages as its index keeps it
    (:func:`_configmap`); any other (``kube-root-ca.crt``, the user's own: no index or handler
    matches it, all filter on the managed-by label) without its data."""
    labels = (body.get("metadata") or {}).get("labels") or {}
    return (
        _configmap(body) if labels.get(LABEL_MANAGED_BY) == MANAGED_BY else _trim(body, keep=_METADATA_ONLY)
    )


def _node(body: Mapping[str, Any]) -> dict[str, Any]:
    """A node: metadata and ``status.allocatable`` (GPUs per node)."""
    out = _trim(body, keep=_METADATA_ONLY)
    allocatable = (body.get("status") or {}).get("allocatable")
    out["status"] = {} if allocatable is None else {"allocatable": allocatable}
    return out


def _crd(body: Mapping[str, Any]) -> dict[str, Any]:
    """A CustomResourceDefinition: metadata (the index reads its name) and ``spec.group`` (kopf 1.45.2
    ``kopf/_core/reactor/observation.py`` ``process_discovered_resource_event`` reads it from the
    same watch stream, to re-scan that group), not its schemas."""
    out = _trim(body, keep=_METADATA_ONLY)
    group = (body.get("spec") or {}).get("group")
    out["spec"] = {} if group is None else {"group": group}
    return out


#: (API group, plural) → what kopf keeps of each object of a resource the operator only indexes and
#: watches with event handlers (no change handler, so no diff-base, finalizer or progress of kopf's):
#: the same slim copy as its index (handlers/watchstream.py applies it to every listed and watched
#: object before kopf queues it). At a restart kopf holds every listed object until every index is
#: filled; a pod's spec, a Deployment's pod template, a model-repository ConfigMap's files and a CRD's
#: schemas were most of that. Every consumer of these resources — the indexes above and the event
#: handlers ``deployment.on_workload_event``, ``deployment.on_serving_pod_event``,
#: ``engine.builder_pod_event`` — reads only what the projection keeps
#: (tests/unit/test_watch_projection.py runs each on the full and the projected object, and fails
#: when a handler is registered for one of these resources without being reviewed here). Jobs (whole
#: in their cache), LeaderWorkerSets and the operator's own LLMEngines / LLMDeployments are stored
#: whole.
PROJECTIONS: dict[tuple[str, str], Callable[[Mapping[str, Any]], dict[str, Any]]] = {
    (POD.group, POD.plural): _pod,
    (DEPLOYMENT.group, DEPLOYMENT.plural): _workload,
    (CONFIG_MAP.group, CONFIG_MAP.plural): _watched_configmap,
    (SERVICE.group, SERVICE.plural): _metadata_only,
    (PDB.group, PDB.plural): _metadata_only,
    (NETWORK_POLICY.group, NETWORK_POLICY.plural): _metadata_only,
    (NODE.group, NODE.plural): _node,
    (CRD.group, CRD.plural): _crd,
}


# ----------------------------------------------------------------------------- newest known
#: (kind, namespace, name) → the newest copy of an LLMEngine or LLMDeployment this process knows and
#: its watch cache has not shown yet: read fresh from the API server, or returned by the operator's
#: own write (slim, as the cache holds it: :func:`_trim`). A cached copy with another version may be
#: behind that write (:func:`~trtllm_operator.handlers.plumbing.cache_first` then reconciles on this
#: copy instead). The entry is dropped once the cache holds that version (:func:`shown`, called from
#: the kind's ``@kopf.on.event`` handler: kopf 1.45.2 ``kopf/_core/reactor/processing.py``
#: ``process_resource_event`` updates the indexes before it runs the event handlers): the watch
#: delivers an object's versions in order, so every copy the cache holds from then on is at least as
#: new. Entries live only between a write and its watch event, so this holds few objects.
_known_versions: dict[tuple[str, str, str], dict[str, Any]] = {}
_known_lock = threading.Lock()


def known_version(res: Resource, namespace: str, name: str, obj: Mapping[str, Any] | None) -> None:
    """Record ``obj`` (fresh from the API server, or as a write returned it) as the newest copy of
    the object this process knows; None forgets the object (deleted)."""
    key = (res.kind, namespace, name)
    version = None if obj is None else (obj.get("metadata") or {}).get("resourceVersion")
    with _known_lock:
        if obj is not None and version and _cached_version(res, namespace, name) != version:
            _known_versions[key] = _trim(copy.deepcopy(dict(obj)))
        else:
            _known_versions.pop(key, None)


def newest_known(res: Resource, namespace: str, name: str) -> dict[str, Any] | None:
    """The copy :func:`known_version` recorded and the watch cache has not shown yet (a deep copy),
    or None. As much the newest this process knows as a cached copy at that version would be: it is
    what the API server returned for the operator's own write or fresh read."""
    with _known_lock:
        known = _known_versions.get((res.kind, namespace, name))
        return copy.deepcopy(known) if known is not None else None


def _cached_version(res: Resource, namespace: str, name: str) -> str | None:
    """The ``resourceVersion`` of the cached copy (None: no cache, not cached): when the cache shows
    a version already, every later cached copy is at least as new — nothing to remember."""
    index = _index(_BY_NAME[res]) if res in _BY_NAME else None
    values = list(index.get((namespace, name), ())) if index is not None else []
    return values[0]["metadata"].get("resourceVersion") if values else None


def is_newest(res: Resource, obj: Mapping[str, Any]) -> bool:
    """Whether ``obj`` (e.g. from a watch cache) carries the newest ``resourceVersion`` this process
    knows for it (:func:`known_version`), or the cache has shown that version already (nothing
    pending)."""
    meta = obj.get("metadata") or {}
    known = _known_versions.get((res.kind, str(meta.get("namespace")), str(meta.get("name"))))
    return known is None or known["metadata"].get("resourceVersion") == meta.get("resourceVersion")


def shown(res: Resource, body: Mapping[str, Any]) -> None:
    """The watch cache of ``res`` now holds ``body`` (called from a watch-event handler, after kopf
    indexed the event): forget a known version equal to its own."""
    meta = body.get("metadata") or {}
    key = (res.kind, str(meta.get("namespace")), str(meta.get("name")))
    version = meta.get("resourceVersion")
    with _known_lock:
        known = _known_versions.get(key)
        if version and known is not None and known["metadata"].get("resourceVersion") == version:
            del _known_versions[key]


# ----------------------------------------------------------------------------- the indexes
# One per resource the reconciles read; the function name is the index's kopf id (and kwarg name).
@kopf.index(GROUP, VERSION, ENGINE_PLURAL)
async def cached_llmengines(namespace: str | None, name: str | None, body: kopf.Body, **_: Any) -> Any:
    return _by_name(namespace, name, body)


@kopf.index(GROUP, VERSION, DEPLOYMENT_PLURAL)
async def cached_llmdeployments(namespace: str | None, name: str | None, body: kopf.Body, **_: Any) -> Any:
    return _by_name(namespace, name, body)


@kopf.index(DEPLOYMENT.group, DEPLOYMENT.version, DEPLOYMENT.plural, labels=_MANAGED)
async def cached_deployments(namespace: str | None, name: str | None, body: kopf.Body, **_: Any) -> Any:
    return {(namespace, name): _workload(body)}


@kopf.index(SERVICE.group, SERVICE.version, SERVICE.plural, labels=_MANAGED)
async def cached_services(namespace: str | None, name: str | None, body: kopf.Body, **_: Any) -> Any:
    return {(namespace, name): _metadata_only(body)}


@kopf.index(PDB.group, PDB.version, PDB.plural, labels=_MANAGED)
async def cached_pdbs(namespace: str | None, name: str | None, body: kopf.Body, **_: Any) -> Any:
    return {(namespace, name): _metadata_only(body)}


@kopf.index(NETWORK_POLICY.group, NETWORK_POLICY.version, NETWORK_POLICY.plural, labels=_MANAGED)
async def cached_network_policies(namespace: str | None, name: str | None, body: kopf.Body, **_: Any) -> Any:
    return {(namespace, name): _metadata_only(body)}


@kopf.index(CONFIG_MAP.group, CONFIG_MAP.version, CONFIG_MAP.plural, labels=_MANAGED)
async def cached_configmaps(namespace: str | None, name: str | None, body: kopf.Body, **_: Any) -> Any:
    """ConfigMaps the operator manages (:func:`_configmap`)."""
    return {(namespace, name): _configmap(body)}


@kopf.index(
    CONFIG_MAP.group,
    CONFIG_MAP.version,
    CONFIG_MAP.plural,
    labels={**_MANAGED, LABEL_COMPONENT: COMPONENT_MODEL_REPOSITORY, LABEL_DEPLOYMENT: kopf.PRESENT},
)
async def cached_model_repositories(
    namespace: str | None, name: str | None, body: kopf.Body, **_: Any
) -> Any:
    """Model-repository ConfigMap names by (namespace, value of the LLMDeployment label)."""
    return {(namespace, body["metadata"]["labels"][LABEL_DEPLOYMENT]): name}


@kopf.index(JOB.group, JOB.version, JOB.plural, labels=_MANAGED)
async def cached_jobs(namespace: str | None, name: str | None, body: kopf.Body, **_: Any) -> Any:
    return _by_name(namespace, name, body)


@kopf.index(JOB.group, JOB.version, JOB.plural, labels={**_MANAGED, LABEL_COMPONENT: COMPONENT_BUILDER})
async def cached_builder_jobs_by_owner(
    namespace: str | None, name: str | None, body: kopf.Body, **_: Any
) -> Any:
    """Builder Job names by (namespace, UID of each LLMEngine owning the Job): the Jobs an LLMEngine
    started or joined, whatever key they build (a superseded build is found here)."""
    refs = (body.get("metadata") or {}).get("ownerReferences") or []
    return {(namespace, r["uid"]): name for r in refs if r.get("kind") == LLM_ENGINE.kind and r.get("uid")}


@kopf.index(POD.group, POD.version, POD.plural, labels={LABEL_DEPLOYMENT: kopf.PRESENT})
async def cached_serving_pods(namespace: str | None, body: kopf.Body, **_: Any) -> Any:
    """Serving pods by (namespace, value of the LLMDeployment label): metadata and ``status`` (what
    the status is decided from), not the pod spec."""
    return {(namespace, body["metadata"]["labels"][LABEL_DEPLOYMENT]): _pod(body)}


@kopf.index("", "v1", "nodes", labels={GPU_PRODUCT_LABEL: kopf.PRESENT})
async def cached_gpu_nodes(body: kopf.Body, **_: Any) -> Any:
    """GPU product label → allocatable GPUs of each node carrying it."""
    product = body["metadata"]["labels"][GPU_PRODUCT_LABEL]
    allocatable = (body.get("status") or {}).get("allocatable") or {}
    try:
        gpus = int(allocatable.get(GPU_RESOURCE, 0))
    except ValueError:
        gpus = 0
    return {product: gpus}


@kopf.index("apiextensions.k8s.io", "v1", "customresourcedefinitions")
async def cached_crds(name: str | None, **_: Any) -> Any:
    """Names of the installed CustomResourceDefinitions (``leaderworkersets.leaderworkerset.x-k8s.io``)."""
    return {name: True}


def _custom_metrics_api_service(name: str | None, **_: Any) -> bool:
    return name in CUSTOM_METRICS_API_SERVICES


@kopf.index("apiregistration.k8s.io", "v1", "apiservices", when=_custom_metrics_api_service)
async def cached_custom_metrics_api_services(name: str | None, status: Any, **_: Any) -> Any:
    """The APIServices that register the custom metrics API (``v1beta2`` / ``v1beta1``
    ``.custom.metrics.k8s.io``, :data:`~trtllm_operator.api.wire.CUSTOM_METRICS_API_SERVICES`): name →
    their ``Available`` condition (``{}`` before the aggregator sets one). Mode hpa's HPA reads its
    metrics there (handlers/autoscaler.py); only these two names are watched into the cache."""
    conditions = (status or {}).get("conditions") or []
    available = next((c for c in conditions if c.get("type") == "Available"), None)
    return {name: {k: available.get(k) for k in ("status", "reason", "message")} if available else {}}


_BY_NAME: dict[Resource, str] = {
    LLM_ENGINE: "cached_llmengines",
    LLM_DEPLOYMENT: "cached_llmdeployments",
    DEPLOYMENT: "cached_deployments",
    SERVICE: "cached_services",
    PDB: "cached_pdbs",
    CONFIG_MAP: "cached_configmaps",
    JOB: "cached_jobs",
    NETWORK_POLICY: "cached_network_policies",
}
_ALL = (
    *_BY_NAME.values(),
    "cached_model_repositories",
    "cached_builder_jobs_by_owner",
    "cached_serving_pods",
    "cached_gpu_nodes",
    "cached_crds",
    "cached_custom_metrics_api_services",
)


@kopf.on.startup()
async def bind_indexes(**kwargs: Any) -> None:
    """Keep the operator's index objects (kopf fills them in place from the watches)."""
    global _indices  # noqa: PLW0603 - one operator per process; tests start and stop it in turn
    _indices = {name: kwargs[name] for name in _ALL if name in kwargs}


@kopf.on.cleanup()
async def unbind_indexes(**_: Any) -> None:
    global _indices  # noqa: PLW0603
    _indices = None


# ----------------------------------------------------------------------------- reads
def _index(name: str) -> Any:
    indices = _indices
    return None if indices is None else indices.get(name)


def cached(res: Resource) -> bool:
    """Whether ``res`` is read from a watch cache in this process (a running operator)."""
    return res in _BY_NAME and _index(_BY_NAME[res]) is not None


def get(kube: Kube, res: Resource, namespace: str, name: str) -> dict[str, Any] | None:
    """The object from its watch cache (a deep copy: callers may change it), or None when the cache
    has no such object. Without a cache for ``res`` (no running operator, a resource not cached):
    a GET. Objects the cache does not hold because they lack the operator's managed-by label are
    reported absent: callers create through ``create_or_get``, which reads the real one on 409."""
    index = _index(_BY_NAME[res]) if res in _BY_NAME else None
    if index is None:
        return kube.get(res, namespace, name)
    values = list(index.get((namespace, name), ()))  # list(): one step under the GIL
    return copy.deepcopy(values[0]) if values else None


def peek(res: Resource, namespace: str, name: str) -> Mapping[str, Any] | None:
    """The object as its watch cache holds it, **not** copied: for checks that only read it (the
    settled tests of a restart's resume and of the watches' replayed listing call this several times
    per object; a deep copy each was the operator's own largest cost there). Callers must not
    change it or keep it. None when the cache has no such object, or without a cache for ``res``
    (callers then treat the object as unknown, as :func:`get` without a running operator would
    read it)."""
    index = _index(_BY_NAME[res]) if res in _BY_NAME else None
    values = list(index.get((namespace, name), ())) if index is not None else []
    return values[0] if values else None


def in_namespace(kube: Kube, res: Resource, namespace: str) -> list[dict[str, Any]]:
    """Every object of ``res`` in ``namespace`` from its watch cache (deep copies); without a cache
    for ``res``, a LIST."""
    index = _index(_BY_NAME[res]) if res in _BY_NAME else None
    if index is None:
        return kube.list(res, namespace)
    keys = [k for k in list(index) if k[0] == namespace]
    found = (list(index.get(k, ())) for k in keys)
    return [copy.deepcopy(values[0]) for values in found if values]


def names(res: Resource) -> list[tuple[str, str]]:
    """(namespace, name) of every object of ``res`` in its watch cache; empty without a cache."""
    index = _index(_BY_NAME[res]) if res in _BY_NAME else None
    if index is None:
        return []
    return [(str(ns), str(n)) for ns, n in list(index) if ns and n]


def serving_pods(kube: Kube, namespace: str, deployment_label: str) -> list[dict[str, Any]]:
    """Pods labelled ``LABEL_DEPLOYMENT=deployment_label`` (the LLMDeployment's serving pods)."""
    index = _index("cached_serving_pods")
    if index is None:
        pods = kube.list(POD, namespace, label_selector=f"{LABEL_DEPLOYMENT}={deployment_label}")
        return pods
    return [copy.deepcopy(p) for p in list(index.get((namespace, deployment_label), ()))]


def builder_jobs_owned_by(kube: Kube, namespace: str, uid: str) -> list[dict[str, Any]]:
    """The builder Jobs (labels managed-by and component ``engine-builder``) with an ownerReference to
    the LLMEngine ``uid``, from the watch caches; without a cache, listed from the API server."""
    index = _index("cached_builder_jobs_by_owner")
    if index is None:
        selector = f"{LABEL_MANAGED_BY}={MANAGED_BY},{LABEL_COMPONENT}={COMPONENT_BUILDER}"
        jobs = kube.list(JOB, namespace, label_selector=selector)
        return [j for j in jobs if is_owned_by(j, uid)]
    names = sorted({str(n) for n in list(index.get((namespace, uid), ()))})
    found = (get(kube, JOB, namespace, n) for n in names)
    return [j for j in found if j is not None]


def model_repositories(namespace: str, deployment_label: str) -> set[str] | None:
    """Names of the model-repository ConfigMaps labelled for the LLMDeployment; None without a cache."""
    index = _index("cached_model_repositories")
    return None if index is None else {str(n) for n in list(index.get((namespace, deployment_label), ()))}


def gpu_allocatable(products: list[str]) -> list[int] | None:
    """Allocatable GPUs of each node labelled with one of ``products`` (a node carries one label
    value, so none is counted twice); None without a cache (the caller lists nodes)."""
    index = _index("cached_gpu_nodes")
    if index is None:
        return None
    return [g for p in dict.fromkeys(products) for g in list(index.get(p, ()))]


def custom_metrics_api_services() -> dict[str, dict[str, Any]] | None:
    """The custom metrics API's APIServices that exist, name → their ``Available`` condition
    (``status``, ``reason``, ``message``; ``{}`` without one); None without a cache (the caller reads
    them)."""
    index = _index("cached_custom_metrics_api_services")
    if index is None:
        return None
    return {str(n): dict(values[0]) for n, values in list(index.items()) if values}


def crd_installed(name: str) -> bool | None:
    """Whether the CRD ``name`` is installed; None without a cache (the caller reads it)."""
    index = _index("cached_crds")
    return None if index is None else name in index
