"""kopf's watch streams without ``metadata.managedFields``, and its first listings in pages.

**What kopf does** (kopf 1.45.2): each watched resource is listed, then watched
(``kopf/_cogs/clients/watching.py`` ``continuous_watch``: ``fetching.fetch_objs``, then
``watch_objs``), and every object of the listing goes to a per-object worker that keeps it until
every index of the operator is filled (``kopf/_core/reactor/queueing.py`` ``watcher``,
``kopf/_core/reactor/processing.py`` ``process_resource_event``: ``operator_indexed.wait_for``). At
a restart the operator therefore holds **every** watched object at once — LLMEngines,
LLMDeployments and all their children and pods — as the API server sent it, ``managedFields``
included (38–46 % of an LLMEngine's, pod's or Deployment's JSON at 400 + 400,
benchmarks/scale.py). And ``fetch_objs`` asks for the whole list in one response unless
``settings.watching.chunk_size`` is set (``None`` by default: no ``limit``), so each resource's
complete list is in memory at once as bytes, text and objects while its items are queued.

**What this module changes**:

* :func:`install` wraps kopf's ``watching.infinite_watch`` (looked up at call time by
  ``queueing.watcher``) so that every listed or watched object loses ``metadata.managedFields``
  before kopf queues it. Nothing here reads them: the operator's caches dropped them already
  (:func:`trtllm_operator.handlers.indexes._trim`), kopf's diff-base and progress storage read
  ``spec``, labels and annotations, and every write the operator makes is a patch or a create of
  its own rendering, never the watched body sent back.
* For a resource the operator only indexes and watches with event handlers (pods, Deployments,
  ConfigMaps, Services, PodDisruptionBudgets, NetworkPolicies, nodes, CRDs), :func:`infinite_watch`
  also hands kopf only what its index keeps (:data:`trtllm_operator.handlers.indexes.PROJECTIONS`:
  no pod spec, no Deployment pod template, no model-repository files, no CRD schemas), so that is
  all kopf holds of each listed object while it waits for every index, and all its event handlers
  see. Nothing is lost to a decision: the indexes keep the same copy as before, the event handlers
  read only metadata and ``status``, and every child is read fresh before it is written
  (:mod:`trtllm_operator.handlers.indexes`).
* Every object kopf is handed (projected or whole) has its keys and short strings interned
  (:func:`interned`): kopf parses each watch event on its own (``json.loads`` shares equal keys only
  within one document), so each of thousands of objects held its own copy of ``metadata``,
  ``lastTransitionTime``, ``ml``, ``True``, the image reference … — about half of what the objects
  cost: 53 MiB parsed one by one, 28 MiB interned, for 1,000 LLMEngines, 1,000 LLMDeployments and
  1,000 of each child and pod as projected (tracemalloc, on objects listed from a converged
  benchmarks/scale.py run). The indexes' copies and the reconciles' deep copies share those strings
  (``copy.deepcopy`` returns a ``str`` itself).
* :data:`LIST_CHUNK`: the page size of kopf's first listings (``settings.watching.chunk_size``, set
  by :func:`trtllm_operator.handlers.startup.configure_kopf`), so a listing's transient copies are
  one page, not the whole resource.

Either alone did not lower the restart's peak RSS at 400 + 400 (238 MiB each, 239 without); both
together did (208 MiB): the whole-list response is the peak while the objects still carry their
``managedFields``. :func:`install` refuses any kopf but the pinned one (operator/pyproject.toml),
like :mod:`trtllm_operator.handlers.readiness`.
"""

from __future__ import annotations

import importlib.metadata
import sys
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

from kopf._cogs.clients import watching

from trtllm_operator.handlers.indexes import PROJECTIONS
from trtllm_operator.handlers.readiness import KOPF_VERSION

#: Objects per page of kopf's first listing of each watched resource (``limit`` / ``continue``;
#: Kubernetes API concepts, "Retrieving large results sets in chunks"): 10 requests instead of one
#: for a resource of 1,000 objects at a restart.
LIST_CHUNK = 100

_kopf_infinite_watch = watching.infinite_watch


Projection = Callable[[Mapping[str, Any]], dict[str, Any]]

#: String values of at most this many characters are interned (names, namespaces, label values,
#: condition types and reasons, timestamps, image references); longer ones — condition messages,
#: kopf's diff-base, files — are seldom equal across objects and stay as parsed.
INTERN_MAX_CHARS = 64


def interned(value: Any) -> Any:
    """``value`` (parsed JSON: dicts, lists, strings, numbers, booleans, None) rebuilt with every
    dict key and every string of at most :data:`INTERN_MAX_CHARS` characters replaced by its
    interned copy (:func:`sys.intern`): equal to ``value``, but each such string is held once however
    many objects carry it. Interned strings are dropped from the interpreter's table when nothing
    refers to them any more (they are not immortal; Python docs, ``sys.intern``)."""
    if isinstance(value, dict):
        return {sys.intern(k) if type(k) is str else k: interned(v) for k, v in value.items()}
    if isinstance(value, list):
        return [interned(v) for v in value]
    if type(value) is str and len(value) <= INTERN_MAX_CHARS:
        return sys.intern(value)
    return value


def without_managed_fields(event: Any, project: Projection | None = None) -> Any:
    """``event`` (a watch event or kopf's bookmark marker) with ``object.metadata.managedFields``
    removed in place, and its object replaced by ``project(object)`` when given, then by its
    :func:`interned` copy; anything else unchanged."""
    if isinstance(event, dict):
        obj = event.get("object")
        if isinstance(obj, dict) and isinstance(obj.get("metadata"), dict):
            obj["metadata"].pop("managedFields", None)
            event["object"] = interned(project(obj) if project is not None else obj)
    return event


def projection(resource: Any) -> Projection | None:
    """What kopf keeps of each object of ``resource`` (kopf's ``references.Resource``):
    :data:`trtllm_operator.handlers.indexes.PROJECTIONS`, None (the whole object) for the others."""
    group, plural = getattr(resource, "group", None), getattr(resource, "plural", None)
    return PROJECTIONS.get((group, plural)) if isinstance(group, str) and isinstance(plural, str) else None


async def infinite_watch(**kwargs: Any) -> AsyncIterator[Any]:
    """kopf's ``watching.infinite_watch`` (same keyword arguments), its events without
    ``managedFields``, for a resource the operator only indexes projected (:func:`projection`), and
    interned (:func:`interned`)."""
    project = projection(kwargs.get("resource"))
    async for event in _kopf_infinite_watch(**kwargs):
        yield without_managed_fields(event, project)


def install() -> None:
    """Make kopf's watchers use :func:`infinite_watch` (idempotent; before ``kopf.run``).

    Raises :class:`RuntimeError` when the installed kopf is not
    :data:`~trtllm_operator.handlers.readiness.KOPF_VERSION`."""
    installed = importlib.metadata.version("kopf")
    if installed != KOPF_VERSION:
        raise RuntimeError(
            f"trtllm_operator.handlers.watchstream wraps kopf {KOPF_VERSION}'s watching.infinite_watch, "
            f"but kopf {installed} is installed: re-read kopf's watching/queueing and update it"
        )
    watching.infinite_watch = infinite_watch
