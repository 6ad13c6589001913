"""What every controller does the same way around its pure decision: lock, apply children, write.

Both controllers reconcile in one shape — **observe → decide → act → write** (the LLMEngine
controller's ``_decide_and_act`` is the model): read the object and its world, ask a pure function
in ``decide/`` for an :class:`~trtllm_operator.decide.outcome.Outcome`, perform its actions
(children through :func:`apply_owned`), then :func:`write_outcome`. This module holds the pieces
that shape shares, so each exists once:

* :data:`OBJECT_LOCKS` — one per-object lock registry: reconciles of one object are serialised
  within the process (kopf may run a create handler, a timer and a watch-event handler of the same
  object on different threads);
* :func:`apply_owned` — create a child, or patch it when what the operator rendered for it changed;
  never an object it does not control (:func:`~trtllm_operator.decide.ownership.control_conflict`:
  the result is ``not_owned`` with a :class:`~trtllm_operator.decide.ownership.ChildConflict`);
  :func:`read_children` — the same check over every child of a parent before any is written, so a
  conflict stops the reconcile with nothing half-applied;
  :func:`add_owner` — a second parent shares an existing child (a builder Job of the same key);
  :func:`set_owner` — an artifact PVC or cache entry follows the current ``reclaimPolicy``;
  :func:`release_claim` — a PVC someone else uses no longer goes with the LLMEngine that made it;
* :func:`write_outcome` — status and conditions through the optimistic-concurrency status writer,
  then the outcome's Events.

Children are read from the watch caches (:mod:`trtllm_operator.handlers.indexes`) by
:func:`read_children`; :func:`apply_owned` writes nothing when the cached copy is this parent's and
carries the same rendered hash, and reads the child fresh before any write it decides on.
"""

from __future__ import annotations

import asyncio
import copy
import functools
import logging
import threading
import time
from collections.abc import Callable, Collection, Hashable, Iterator, Mapping, Sequence
from concurrent.futures import Executor
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from kubernetes.client.exceptions import ApiException

from trtllm_operator.api.owners import controller_of, is_owned_by
from trtllm_operator.api.wire import (
    ANNOTATION_RENDERED_HASH,
    ANNOTATION_REPLICAS_WRITTEN,
    GPU_PRODUCT_LABEL,
    GPU_RESOURCE,
)
from trtllm_operator.decide.compatibility import NodeGPUs, node_gpus
from trtllm_operator.decide.outcome import Outcome
from trtllm_operator.decide.ownership import ChildConflict, control_conflict
from trtllm_operator.handlers import indexes
from trtllm_operator.kube.client import LLM_ENGINE, NODE, PVC, Kube, ReadOnlyKube, Resource, WriteNeeded
from trtllm_operator.kube.events import post_event
from trtllm_operator.kube.status import update_conditions
from trtllm_operator.metrics.operator_metrics import RESYNCS
from trtllm_operator.render.serving import content_hash

log = logging.getLogger(__name__)


# ------------------------------------------------------------------------------ locks
class ObjectLocks:
    """A lock per key (e.g. ``(kind, namespace, name)``), created on first use and kept."""

    def __init__(self) -> None:
        self._locks: dict[Hashable, threading.Lock] = {}
        self._guard = threading.Lock()

    def lock(self, *key: Hashable) -> threading.Lock:
        """The lock of ``key`` (the same object for the same key, for the life of the process)."""
        with self._guard:
            return self._locks.setdefault(key, threading.Lock())

    @contextmanager
    def hold(self, *key: Hashable) -> Iterator[None]:
        """Hold the lock of ``key`` for the ``with`` block."""
        with self.lock(*key):
            yield


class Workqueue:
    """Coalesces requests to reconcile one object while an earlier request still waits for a thread
    (controller-runtime's workqueue does the same): a burst of watch events — a workload's status
    moving through its replicas, an engine becoming Ready for its 50 deployments — costs one
    reconcile per object instead of one per event. Level-based reconciles make this safe: the one
    that runs reads the state after every event it replaced.

    :meth:`run` is awaited from an ``async`` kopf handler; the reconcile runs in :attr:`executor`
    (kopf's thread pool, set at startup; None: asyncio's default pool)."""

    def __init__(self) -> None:
        self._pending: set[Hashable] = set()
        self.executor: Executor | None = None

    async def run(self, key: Hashable, fn: Callable[[], None]) -> None:
        """Run ``fn`` in the pool unless a call for ``key`` is already waiting to start."""
        if key in self._pending:
            return
        self._pending.add(key)

        def call() -> None:
            self._pending.discard(key)  # from here on, a new event needs a new reconcile
            fn()

        try:
            await asyncio.get_running_loop().run_in_executor(self.executor, call)
        finally:
            self._pending.discard(key)


#: The operator's one workqueue (reconciles triggered by watch events of other objects).
WORKQUEUE = Workqueue()


# ------------------------------------------------------------------------------ resync
#: The running resync loops (:func:`start_resync`), cancelled by :func:`stop_resyncs`.
_resync_tasks: list[asyncio.Task[None]] = []


#: (kind, namespace, name) of every object kopf has handled in this process (a create, update or
#: resume handler of its kind was called): the drift loops visit only those (:func:`resync_forever`).
_handled: set[tuple[str, str, str]] = set()


def handled_by_kopf(kind: str, namespace: str, name: str, *, gone: bool = False) -> None:
    """Record that kopf called a create/update/resume handler of ``kind`` for the object (``gone``:
    it was deleted; forget it)."""
    if gone:
        _handled.discard((kind, namespace, name))
    else:
        _handled.add((kind, namespace, name))


async def resync_forever(
    kind: str,
    keys: Callable[[], Sequence[tuple[str, str]]],
    period: Callable[[], float],
    reconcile: Callable[[str, str], None],
) -> None:
    """Re-reconcile every object of ``kind`` once per ``period()`` seconds, one at a time and spread
    evenly over the period, through :data:`WORKQUEUE` (coalesced with a reconcile already waiting).
    ``keys()``: the (namespace, name) of every object, from its watch cache.

    An object kopf has not handled yet in this process (:func:`handled_by_kopf`: after a start,
    kopf resumes every object, which reconciles it or finds it settled) is left to that handling
    and visited in a later round: at 1,000 + 1,000 objects kopf resumed for minutes, and the loop's
    first round — one period after start — reconciled hundreds of objects ahead of their resume, a
    metadata GET of the credentials Secret each (benchmarks/scale.py, issue #20).

    One loop per kind instead of a kopf timer per object: kopf puts a finalizer on every object with
    a timer (kopf 1.45.2 ``kopf/on.py``: ``timer(...)`` registers ``requires_finalizer=True``) — a
    PATCH when the object is created and another when it is deleted, and deletion of every object
    blocked on a running operator — and runs one asyncio task per object. Errors are logged and the
    loop goes on (the next round retries)."""
    loop = asyncio.get_running_loop()

    def resynced(namespace: str, name: str) -> None:
        RESYNCS.labels(kind=kind).inc()
        reconcile(namespace, name)

    await asyncio.sleep(period())
    while True:
        objects = [(ns, n) for ns, n in keys() if (kind, ns, n) in _handled]
        if not objects:
            await asyncio.sleep(period())
            continue
        step = period() / len(objects)
        for namespace, name in objects:
            started = loop.time()
            try:
                await WORKQUEUE.run((kind, namespace, name), functools.partial(resynced, namespace, name))
            except Exception as exc:  # a resync must never stop the loop
                log.warning("resync of %s %s/%s failed: %s", kind, namespace, name, exc)
            await asyncio.sleep(max(0.0, step - (loop.time() - started)))


def start_resync(
    kind: str,
    keys: Callable[[], Sequence[tuple[str, str]]],
    period: Callable[[], float],
    reconcile: Callable[[str, str], None],
) -> None:
    """Start :func:`resync_forever` on the running event loop (from a ``@kopf.on.startup`` handler)."""
    task = asyncio.get_running_loop().create_task(
        resync_forever(kind, keys, period, reconcile), name=f"resync {kind}"
    )
    _resync_tasks.append(task)


async def stop_resyncs() -> None:
    """Cancel every resync loop (``@kopf.on.cleanup``)."""
    tasks = list(_resync_tasks)
    _resync_tasks.clear()
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


#: The operator's one per-object lock registry. Keys start with the controller's kind of work
#: (``"LLMEngine"``, ``"LLMDeployment"``, ``"benchmark"``, ``"advisor"``) so that controllers of
#: different concerns on the same object never wait for each other.
OBJECT_LOCKS = ObjectLocks()


# ------------------------------------------------------------------------------ cache first
_T = TypeVar("_T")

#: The newest copy of an object this process knows (its own writes, its fresh reads): one home,
#: :mod:`trtllm_operator.handlers.indexes`, whose watch caches forget an entry once they show it.
known_version = indexes.known_version
is_newest = indexes.is_newest


def cache_first(
    kube: Kube,
    res: Resource,
    namespace: str,
    name: str,
    run: Callable[[Kube, dict[str, Any] | None], _T],
) -> _T:
    """Run a reconcile ``run(kube, obj)`` on the watch-cached copy of its object, with a client that
    lets a write through only once that copy is known to be the current object
    (:class:`~trtllm_operator.kube.client.ReadOnlyKube`): its own status write guarded by the
    cached copy (:func:`~trtllm_operator.kube.status.status_guard`: the API server applies it only
    if uid, generation, deletion, the honoured annotations and the whole status are still the
    cached copy's — a bookkeeping PATCH of kopf's in between does not refuse it) and the Events
    after it, or any other write after a fresh GET shows the same ``resourceVersion``. When the copy
    turns out not to be current (that GET shows another version, the status write is refused), the
    reconcile runs again on the fresh object with the real client.

    So a reconcile that finds everything as it should be costs no request for its object (a
    resync, a replayed watch event, a restart), one that only moves the status costs its PATCH, and
    every other write is decided on a copy verified current before the first write (no later than
    the GET at the start it replaces): a spec change the cache does not show yet is never rendered
    backwards, and status transitions and their Events are decided against the status the API
    server holds. The cached copy is used only when its ``resourceVersion`` is the newest this
    process knows of (:func:`known_version`: its own last status write or fresh read), so a cache
    still behind the operator's own write — where "nothing to do" could be a stale answer — is never
    trusted: the object is read fresh. Once the watch cache shows that newest version, the process forgets it
    (:func:`~trtllm_operator.handlers.indexes.known_version`): every later cached copy is newer (a
    watch delivers versions in order), so kopf's own bookkeeping PATCH after the operator's status
    write no longer forces a fresh GET. Without a cache (no running operator) the object is read
    fresh at once."""
    if indexes.cached(res):
        cached = indexes.get(kube, res, namespace, name)
        # A cached copy at another version than the newest this process knows may be behind that
        # version or ahead of it (a user's change the watch delivered while the remembered version
        # was not yet forgotten), and resource versions are opaque (Kubernetes API concepts,
        # "Resource versions": clients must not compare them for order). So such a copy is read
        # fresh below, never replaced by the remembered one: doing that decided "nothing to do" on
        # generation 1 while generation 2 waited (CI, tests/integration/test_engine.py and
        # test_builder_jobs.py; which sequence left the old version remembered was not established).
        if cached is not None and indexes.is_newest(res, cached):
            # The confirming GET's copy is recorded when it is read, before the writes it lets
            # through record theirs: recorded after the reconcile (as it was), it replaced the
            # version of the reconcile's own status write with the older one, the next reconcile
            # trusted a cache still behind that write, and its status write was refused (the 409 —
            # 422 with the guarded write — of almost every new LLMDeployment, benchmarks/scale.py).
            probe = ReadOnlyKube(
                kube,
                (res, namespace, name),
                cached,
                on_fresh=functools.partial(known_version, res, namespace, name),
            )
            try:
                result = run(probe, cached)
            except WriteNeeded:
                pass
            else:
                if not probe.wanted:
                    return result
            if probe.fresh is not None and not probe.live:
                # its confirming GET showed another version and nothing was written since: that
                # copy is as fresh as a second GET would be
                return run(kube, probe.fresh)
    obj = kube.get(res, namespace, name)
    known_version(res, namespace, name, obj)
    return run(kube, obj)


# ------------------------------------------------------------------------------ children
def with_rendered_hash(manifest: Mapping[str, Any]) -> tuple[dict[str, Any], str]:
    """A deep copy of ``manifest`` annotated with the sha256 of its rendering
    (:data:`~trtllm_operator.api.wire.ANNOTATION_RENDERED_HASH`), and that hash."""
    body = copy.deepcopy(dict(manifest))
    digest = content_hash(body)
    body["metadata"].setdefault("annotations", {})[ANNOTATION_RENDERED_HASH] = digest
    return body, digest


def replicas_patch(replicas: int) -> dict[str, Any]:
    """The merge patch that sets a workload's ``spec.replicas`` to ``replicas``, with
    :data:`~trtllm_operator.api.wire.ANNOTATION_REPLICAS_WRITTEN` in the same request: how the
    LLMDeployment controller later tells its own count from one written through ``/scale`` by
    someone else (:func:`~trtllm_operator.decide.deployment_status.workload_scale_reverted`)."""
    return {
        "metadata": {"annotations": {ANNOTATION_REPLICAS_WRITTEN: str(replicas)}},
        "spec": {"replicas": replicas},
    }


def written_replicas(live: Mapping[str, Any] | None) -> int | None:
    """The count :func:`replicas_patch` (or :func:`apply_owned`) last wrote to ``live``; None when it
    carries none (written before the annotation existed) or an unreadable one."""
    value = (((live or {}).get("metadata") or {}).get("annotations") or {}).get(ANNOTATION_REPLICAS_WRITTEN)
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


Applied = Literal["created", "patched", "unchanged", "not_owned"]


@dataclass(frozen=True)
class ApplyResult:
    """What :func:`apply_owned` did (``result``) and the live object afterwards (as read when
    nothing was written); ``conflict`` says why for ``not_owned``."""

    live: dict[str, Any]
    result: Applied
    conflict: ChildConflict | None = None


class _Unread:
    """Marker: the caller has not read the live object (``apply_owned`` GETs it)."""


UNREAD = _Unread()


def controller_uid(manifest: Mapping[str, Any]) -> str:
    """The UID of the controller ownerReference a rendered child carries. Raises ``ValueError``
    for a manifest without one (a renderer bug: every child names its parent)."""
    ref = controller_of(manifest)
    if ref is None or not ref.get("uid"):
        raise ValueError(
            f"{manifest.get('kind')} {manifest['metadata'].get('name')}: no controller ownerReference"
        )
    return str(ref["uid"])


def read_children(
    kube: Kube,
    children: Sequence[tuple[Resource, Mapping[str, Any]]],
    *,
    create_first: Collection[Resource] = (),
) -> tuple[list[dict[str, Any] | None], ChildConflict | None]:
    """The live object under each child's name (None: absent), and the first one the parent does
    not control (:func:`~trtllm_operator.decide.ownership.control_conflict`), read before anything
    is written. Hand each live object to :func:`apply_owned` (``live=``) to spare a second GET.

    Read from the watch caches where the operator runs them (:func:`indexes.get`): a conflict seen
    there stops the reconcile before any write; a child the cache shows outdated is read fresh by
    :func:`apply_owned` before it is written. The caches hold only objects carrying the operator's
    managed-by label, so a name the cache lacks is read from the API server: a foreign object under
    the child's name (no label) must be found here, before anything is written (issue 24 item 1) —
    except for the resources in ``create_first``: their absence from the cache is taken as it is
    (None), and :func:`apply_owned` creates them at once; a foreign object under the name answers
    that create with 409 AlreadyExists, and the object read then is refused by the same
    :func:`~trtllm_operator.decide.ownership.control_conflict` (result ``not_owned``). The caller
    applies those before anything that must not exist next to a foreign object (the workload whose
    pods would use them) and stops at the first ``not_owned`` (issue 20: one GET per child saved)."""
    lives: list[dict[str, Any] | None] = []
    conflict: ChildConflict | None = None
    for res, manifest in children:
        meta = manifest["metadata"]
        live = indexes.get(kube, res, meta["namespace"], meta["name"])
        if live is None and indexes.cached(res) and res not in create_first:
            if isinstance(kube, ReadOnlyKube) and not kube.confirm():  # a create is due
                raise WriteNeeded(f"create {res.kind} {meta['name']}: the cached parent is not current")
            live = kube.get(res, meta["namespace"], meta["name"])
        lives.append(live)
        if conflict is None and live is not None:
            conflict = control_conflict(live, res.kind, controller_uid(manifest))
    return lives, conflict


def apply_owned(
    kube: Kube,
    res: Resource,
    manifest: Mapping[str, Any],
    *,
    owner_uid: str | None = None,
    live: dict[str, Any] | _Unread | None = UNREAD,
) -> ApplyResult:
    """Create the child ``manifest``, or merge-patch the live one when its rendered hash changed.

    The hash of the rendered manifest is kept in an annotation, so an unchanged rendering costs one
    GET and no write. ``spec.replicas`` is compared to the live object on its own: a scale through
    the parent's scale subresource reaches the child even when nothing else changed. The patch
    carries ``labels``, ``annotations``, ``ownerReferences`` and ``spec``. Every write of a
    ``spec.replicas`` carries :data:`~trtllm_operator.api.wire.ANNOTATION_REPLICAS_WRITTEN` (not part
    of the hash: a child without it is not written just to add it).

    Ownership: a live object whose controller ownerReference is not the parent's (``owner_uid``,
    default the manifest's own controller reference) is neither patched nor adopted: the result is
    ``not_owned`` with the :class:`~trtllm_operator.decide.ownership.ChildConflict` to report.
    ``live``: the object as :func:`read_children` read it (None: absent), else it is read here.
    When ``live`` may come from a watch cache, it only decides "unchanged": before a patch the child
    is read again from the API server, and ownership and difference are decided on that fresh copy
    (a cache can lag by a watch round-trip; a write must not). Raises ``ApiException`` from the API
    server.
    """
    namespace = manifest["metadata"]["namespace"]
    name = manifest["metadata"]["name"]
    uid = owner_uid or controller_uid(manifest)
    body, digest = with_rendered_hash(manifest)
    want = (body.get("spec") or {}).get("replicas")
    if want is not None:
        body["metadata"]["annotations"][ANNOTATION_REPLICAS_WRITTEN] = str(want)
    from_cache = not isinstance(live, _Unread) and indexes.cached(res)
    if isinstance(live, _Unread):
        current = kube.get(res, namespace, name)
    elif live is not None and from_cache:
        if _unchanged(live, res, uid, body, digest):
            return ApplyResult(live, "unchanged")
        current = kube.get(res, namespace, name)  # about to write: decide on a fresh copy
    else:
        current = live
    if current is None:
        # absent in the cache: create at once (a 409 reads the object that was there after all)
        current, created = kube.create_or_get(res, namespace, body, read_first=not from_cache)
        if created:
            return ApplyResult(current, "created")
    conflict = control_conflict(current, res.kind, uid)
    if conflict is not None:
        return ApplyResult(current, "not_owned", conflict)
    live_hash = (current["metadata"].get("annotations") or {}).get(ANNOTATION_RENDERED_HASH)
    if live_hash == digest:
        if want is None or (current.get("spec") or {}).get("replicas") == want:
            return ApplyResult(current, "unchanged")
        return ApplyResult(kube.patch(res, namespace, name, replicas_patch(want)), "patched")
    patch: dict[str, Any] = {
        "metadata": {k: body["metadata"][k] for k in ("labels", "annotations", "ownerReferences")}
    }
    if "spec" in body:
        patch["spec"] = body["spec"]
    return ApplyResult(kube.patch(res, namespace, name, patch), "patched")


def _unchanged(
    live: Mapping[str, Any], res: Resource, uid: str, body: Mapping[str, Any], digest: str
) -> bool:
    """Whether ``live`` is this parent's child with the rendered hash ``digest`` and the wanted
    ``spec.replicas``: nothing to write."""
    if control_conflict(live, res.kind, uid) is not None:
        return False
    if (live["metadata"].get("annotations") or {}).get(ANNOTATION_RENDERED_HASH) != digest:
        return False
    want = (body.get("spec") or {}).get("replicas")
    return want is None or (live.get("spec") or {}).get("replicas") == want


def add_owner(kube: Kube, res: Resource, namespace: str, name: str, reference: Mapping[str, Any]) -> bool:
    """Add ``reference`` (a non-controller ownerReference) to an existing object, unless one with
    its UID is there: a second parent shares the child, which then lives until every owner is gone.

    Conditional on the object's ``resourceVersion``: a concurrent change answers 409, which is left
    to the next reconcile (returns False, as for a missing object). Other ``ApiException`` raise.
    """
    obj = kube.get(res, namespace, name)
    return obj is not None and set_owner(kube, res, obj, reference, present=True)


def set_owner(
    kube: Kube, res: Resource, obj: Mapping[str, Any], reference: Mapping[str, Any], *, present: bool
) -> bool:
    """Make ``obj`` carry (``present``) or not carry the ownerReference with ``reference``'s UID —
    how an artifact PVC or cache entry follows the current ``reclaimPolicy``. Returns whether it
    wrote. Conditional on ``resourceVersion`` (409 → False, left to the next reconcile)."""
    uid = reference.get("uid")
    if is_owned_by(obj, uid) == present:
        return False
    meta = obj["metadata"]
    if res == PVC:
        forget_claim(meta["namespace"], meta["name"])
    refs = [r for r in meta.get("ownerReferences") or [] if r.get("uid") != uid]
    if present:
        refs.append(dict(reference))
    body = {"metadata": {"resourceVersion": meta["resourceVersion"], "ownerReferences": refs or None}}
    try:
        kube.patch(res, meta["namespace"], meta["name"], body)
    except ApiException as exc:
        if exc.status != 409:
            raise
        return False
    return True


#: Claims read fresh and found without any LLMEngine ownerReference: (namespace, claim) → monotonic
#: time of that read. Only this operator puts LLMEngine ownerReferences on a PVC (the artifact PVC it
#: creates, :func:`set_owner`), and it forgets the claim here whenever it does (:func:`forget_claim`);
#: an entry also expires after :data:`RELEASED_SECONDS`, which bounds what a change by anyone else
#: could hide. So :func:`release_claim` — a deletion guard — reads the PVC fresh at least that often
#: and after every such write, instead of on every reconcile of every LLMDeployment using the claim.
_released: dict[tuple[str, str], float] = {}
_forgotten: dict[tuple[str, str], float] = {}
RELEASED_SECONDS = 60.0


def forget_claim(namespace: str, claim: str) -> None:
    """The operator is about to write PVC ``claim``'s ownerReferences: read it fresh next time
    (also when a read that started before now finishes after)."""
    _forgotten[(namespace, claim)] = time.monotonic()
    _released.pop((namespace, claim), None)


def release_claim(kube: Kube, namespace: str, claim: str, *, keep_uid: str | None = None) -> None:
    """Remove every LLMEngine ownerReference (but ``keep_uid``'s) from PVC ``claim``, if it has one:
    the claim is in use by someone other than the LLMEngine that created it. No write otherwise."""
    seen = _released.get((namespace, claim))
    if seen is not None and time.monotonic() - seen < RELEASED_SECONDS:
        return
    read_at = time.monotonic()
    pvc = kube.get(PVC, namespace, claim)
    if pvc is None:
        return
    if not any(r.get("kind") == LLM_ENGINE.kind for r in pvc["metadata"].get("ownerReferences") or []):
        if _forgotten.get((namespace, claim), -1.0) < read_at:
            _released[(namespace, claim)] = read_at
        return
    for ref in list(pvc["metadata"].get("ownerReferences") or []):
        if ref.get("kind") == LLM_ENGINE.kind and ref.get("uid") != keep_uid:
            if set_owner(kube, PVC, pvc, ref, present=False):
                log.info(
                    "PVC %s/%s is shared: kept when LLMEngine %s is deleted",
                    namespace,
                    claim,
                    ref.get("name"),
                )
            return


# ------------------------------------------------------------------------------ write
def write_outcome(
    kube: Kube,
    res: Resource,
    obj: Mapping[str, Any],
    outcome: Outcome[Any],
    *,
    status_extra: Mapping[str, Any] | None = None,
) -> None:
    """Write ``outcome`` for ``obj``: its ``status`` (plus ``status_extra``) and conditions through
    :func:`~trtllm_operator.kube.status.update_conditions` (merge by type, 409 retry, no write when
    nothing changes), then post each of its Events."""
    meta = obj["metadata"]
    written = update_conditions(
        kube,
        res,
        meta["namespace"],
        meta["name"],
        outcome.conditions,
        status={**outcome.status, **(status_extra or {})},
        current=obj,  # as the reconcile read it: the write is guarded by it (kube/status.py status_guard)
    )
    if written is not None:
        known_version(res, meta["namespace"], meta["name"], written)  # the newest this process knows
    for event in outcome.all_events():
        post_event(kube, obj, event.reason, event.message, type_=event.type)


# ------------------------------------------------------------------------------ nodes
def node_gpus_of(kube: Kube, products: Sequence[str], catalog_gpus_per_node: int) -> NodeGPUs:
    """GPUs per node of a GPU product, read from the nodes (RBAC: list nodes): the largest
    ``nvidia.com/gpu`` allocatable among the nodes whose ``nvidia.com/gpu.product`` label is one of
    ``products`` (the engine's product and its catalog spellings); ``catalog_gpus_per_node`` when no
    such node exists yet. One home for both controllers (builder sizing and serving placement)."""
    cached = indexes.gpu_allocatable(list(products))
    if cached is not None:  # the nodes' watch (handlers/indexes.py) in a running operator
        return node_gpus(list(cached), catalog_gpus_per_node)
    allocatable: list[str | int | None] = []
    seen: set[str] = set()
    for product in dict.fromkeys(products):
        for node in kube.list(NODE, None, label_selector=f"{GPU_PRODUCT_LABEL}={product}"):
            name = str((node.get("metadata") or {}).get("name") or "")
            if name in seen:
                continue
            seen.add(name)
            allocatable.append(((node.get("status") or {}).get("allocatable") or {}).get(GPU_RESOURCE))
    return node_gpus(allocatable, catalog_gpus_per_node)
