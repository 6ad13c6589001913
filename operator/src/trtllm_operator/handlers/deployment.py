"""LLMDeployment controller: kopf wiring and I/O around the pure renderers and decisions.

One idempotent, level-based :func:`reconcile` per LLMDeployment, called from

* create / update / resume of the LLMDeployment,
* every event of a Deployment (or LeaderWorkerSet) this controller labelled — the workload status
  changes whenever a pod becomes Ready or goes away, so status follows the pods within a watch
  round-trip,
* every event of an LLMEngine that changes what a deployment reads of it (a new key, Ready; not
  kopf's bookkeeping or ``status.usedBy``: :func:`_serving_view`) for the deployments that
  reference it,
* one loop over every LLMDeployment every ``RESYNC_SECONDS`` for drift (not a kopf timer per
  object: no finalizer, :func:`~trtllm_operator.handlers.plumbing.resync_forever`).

A reconcile runs on the watch-cached LLMDeployment, proven current before any write
(:func:`~trtllm_operator.handlers.plumbing.cache_first`).

Each reconcile follows observe → decide → act → write (:mod:`trtllm_operator.handlers.plumbing`):
read the LLMDeployment, its engine and its pods → decide how it is served
(:func:`~trtllm_operator.decide.serving.plan_serving`: compatibility gate, partial-artifact gate,
parameters, placement, Triton files; a refusal goes straight to the status) → render the plan
(:func:`~trtllm_operator.render.children.render_plan`) → create or patch the children
(:func:`~trtllm_operator.handlers.plumbing.apply_owned`: patched only when the hash of the rendered
manifest changed; ``spec.replicas`` is always copied from the LLMDeployment, the single writer
through the scale subresource) → prune model-repository ConfigMaps nothing references → observe pods
by engine key → optional automatic rollback → decide the status
(:func:`~trtllm_operator.decide.deployment_status.deployment_status`) and write it with an Event
per condition transition. ``status.usedBy`` of the engine is kept from a kopf index.

The controller never writes ``spec`` of anything it does not own, never deletes user data, and
reports every problem as a condition.
"""

from __future__ import annotations

import asyncio
import copy
import logging
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import kopf
from kubernetes.client.exceptions import ApiException
from pydantic import ValidationError

from engine_builder.planner import PlanInputError, lookup
from trtllm_operator.api import CONDITION_ROUTED
from trtllm_operator.api.deployment import AutoscalingSpec, ServerSpec
from trtllm_operator.api.engine import LLMEngineSpec
from trtllm_operator.api.owners import is_controlled_by, owner_names
from trtllm_operator.api.wire import (
    ANNOTATION_RENDERED_HASH,
    ANNOTATION_ROLLBACK_REASON,
    ANNOTATION_ROLLED_BACK_FROM,
    ANNOTATION_ROLLED_BACK_HASH,
    COMPONENT_MODEL_REPOSITORY,
    DEPLOYMENT_PLURAL,
    DEPLOYMENT_REVISION_ANNOTATION,
    ENGINE_PLURAL,
    FRONTEND_TRTLLM_SERVE,
    GROUP,
    KOPF_ANNOTATION_PREFIX,
    LABEL_COMPONENT,
    LABEL_DEPLOYMENT,
    LABEL_ENGINE_KEY,
    LABEL_FRONTEND,
    LWS_CRD_NAME,
    LWS_WORKER_INDEX_LABEL,
    POD_TEMPLATE_HASH_LABEL,
    VERSION,
)
from trtllm_operator.decide.artifact_integrity import R_ARTIFACT_TAMPERED, tampered_artifact
from trtllm_operator.decide.autoscaling import workload_replicas
from trtllm_operator.decide.compatibility import gpu_product_aliases
from trtllm_operator.decide.conditions import condition
from trtllm_operator.decide.deployment_status import (
    Observation,
    deployment_status,
    engine_readiness,
    serving_fixes,
    workload_scale_reverted,
)
from trtllm_operator.decide.outcome import EventToPost
from trtllm_operator.decide.ownership import R_CHILD_CONFLICT, ChildConflict
from trtllm_operator.decide.pod_problems import stuck_containers
from trtllm_operator.decide.policy import Refusal, refusal_text, serving_refusal
from trtllm_operator.decide.rollout import (
    RollbackDecision,
    decide_rollback,
    pod_view,
    rollout_progress,
    workload_view,
)
from trtllm_operator.decide.serving import ServingRefusal, plan_serving
from trtllm_operator.decide.serving_params import short_key
from trtllm_operator.handlers import indexes
from trtllm_operator.handlers.credentials import ensure_credentials
from trtllm_operator.handlers.plumbing import (
    OBJECT_LOCKS,
    WORKQUEUE,
    apply_owned,
    cache_first,
    handled_by_kopf,
    is_newest,
    known_version,
    node_gpus_of,
    read_children,
    release_claim,
    replicas_patch,
    start_resync,
    with_rendered_hash,
    write_outcome,
    written_replicas,
)
from trtllm_operator.handlers.release import stamp_field, stamped, unready_reason, unstamped_reason
from trtllm_operator.kube.client import (
    CONFIG_MAP,
    CRD,
    DEPLOYMENT,
    INFERENCE_POOL,
    LLM_DEPLOYMENT,
    LLM_ENGINE,
    LWS,
    NETWORK_POLICY,
    PDB,
    POD,
    REPLICA_SET,
    SECRET,
    SERVICE,
    Kube,
    Resource,
    default_kube,
)
from trtllm_operator.kube.events import post_event
from trtllm_operator.kube.status import update_conditions
from trtllm_operator.logging import object_context
from trtllm_operator.metrics.operator_metrics import observe_reconcile, observe_resume
from trtllm_operator.render.children import Children, render_plan
from trtllm_operator.render.leaderworkerset import replica_selector_string, workload_names
from trtllm_operator.render.network_policy import serving_network
from trtllm_operator.render.service import endpoint
from trtllm_operator.render.serving import child_name, content_hash
from trtllm_operator.settings import current

log = logging.getLogger(__name__)

#: Fallback GPUs per node when no node of the engine's product exists yet and the product is not in
#: the GPU catalog (the catalog's gpusPerNode otherwise).
DEFAULT_GPUS_PER_NODE = 8
RESYNC_SECONDS = 30.0


# ------------------------------------------------------------------------------ observations
def gpus_per_node(kube: Kube, product: str) -> int:
    """GPUs of one node of ``product`` (:func:`~trtllm_operator.handlers.plumbing.node_gpus_of`): from
    the nodes, else the GPU catalog's gpusPerNode, else :data:`DEFAULT_GPUS_PER_NODE`."""
    try:
        fallback = lookup(product).gpus_per_node
    except PlanInputError:
        fallback = DEFAULT_GPUS_PER_NODE
    return node_gpus_of(kube, [product, *gpu_product_aliases(product)], fallback).count


def lws_installed(kube: Kube) -> bool:
    cached = indexes.crd_installed(LWS_CRD_NAME)
    if cached is not None:
        return cached
    return kube.get(CRD, None, LWS_CRD_NAME) is not None


# ------------------------------------------------------------------------------ writes
def _prune_configmaps(kube: Kube, namespace: str, owner_uid: str, name: str, keep: set[str]) -> None:
    """Delete this deployment's model-repository ConfigMaps that no ReplicaSet template uses —
    only those it controls: a label is no proof of ownership (anyone may set it).

    The watch cache says whether there is anything to prune (a model-repository ConfigMap of this
    deployment besides ``keep``); the deletion itself is decided on fresh lists."""
    selector = f"{LABEL_DEPLOYMENT}={child_name(name)}"
    others = indexes.model_repositories(namespace, child_name(name))
    if others is not None and not others - keep:
        return
    for rs in kube.list(REPLICA_SET, namespace, label_selector=selector):
        for vol in (rs.get("spec") or {}).get("template", {}).get("spec", {}).get("volumes") or []:
            if vol.get("configMap"):
                keep.add(vol["configMap"]["name"])
    for cm in kube.list(
        CONFIG_MAP, namespace, label_selector=f"{selector},{LABEL_COMPONENT}={COMPONENT_MODEL_REPOSITORY}"
    ):
        if cm["metadata"]["name"] not in keep and is_controlled_by(cm, owner_uid):
            kube.delete(CONFIG_MAP, namespace, cm["metadata"]["name"])


def sync_used_by(kube: Kube, namespace: str, engine_name: str, users: list[str]) -> None:
    """Set one engine's ``status.usedBy`` to ``users`` (sorted LLMDeployment names), if different.

    ``users`` comes from the :func:`llmdeployments_by_engine` index (kept by kopf from the watch), so
    this costs no read: the engine is the watch-cached copy, or — while that cache is behind the
    operator's own last write of the engine — the copy that write returned
    (:func:`~trtllm_operator.handlers.indexes.newest_known`). Listing every deployment and engine
    of the namespace instead made each reconcile O(objects) and a burst of N objects O(N²)
    (benchmarks/scale.py). Level-based: every event of the deployment or of the engine recomputes
    it from the index, so an entry cannot stay stale.

    The write is a merge patch of ``status.usedBy`` alone, **not** conditional on the engine's
    ``resourceVersion``: this controller is the field's only writer (the LLMEngine controller never
    writes it), the value comes from the index and not from the engine's status, and a merge patch
    leaves every other status field as it is — so a newer version of the engine (kopf's diff-base
    PATCH, which the watch delivers seconds later under load) changes nothing it decides. A
    conditional write met a 409 and a fresh GET for every engine in a burst (benchmarks/RESULTS.md
    "Load"). A deleted engine (404) is left alone."""
    # read only: the cached copy itself, not a deep copy (once per engine and per deployment at a restart)
    engine: Mapping[str, Any] | None = (
        indexes.peek(LLM_ENGINE, namespace, engine_name)
        if indexes.cached(LLM_ENGINE)
        else indexes.get(kube, LLM_ENGINE, namespace, engine_name)
    )
    if engine is not None and not is_newest(LLM_ENGINE, engine):
        engine = indexes.newest_known(LLM_ENGINE, namespace, engine_name) or engine
    if engine is None or engine["metadata"].get("deletionTimestamp"):
        return
    if list((engine.get("status") or {}).get("usedBy") or []) == users:
        return
    try:
        written = kube.patch(
            LLM_ENGINE, namespace, engine_name, {"status": {"usedBy": users}}, subresource="status"
        )
    except ApiException as exc:
        if exc.status != 404:
            raise
        return
    known_version(LLM_ENGINE, namespace, engine_name, written)


def _engine_ref(body: Mapping[str, Any] | None) -> str | None:
    ref = (((body or {}).get("spec") or {}).get("engineRef") or {}).get("name")
    return str(ref) if ref else None


def _users(index: Any, namespace: str, engine_name: str, exclude: str | None = None) -> list[str]:
    """LLMDeployments referencing ``engine_name`` per the index (minus ``exclude``, being deleted)."""
    names = {str(n) for n in index.get((namespace, engine_name), ())} if index is not None else set()
    names.discard(exclude or "")
    return sorted(names)


def _sync_refs(namespace: str | None, refs: list[str | None], index: Any, exclude: str | None = None) -> None:
    if not namespace or index is None:
        return
    kube = default_kube()
    for ref in dict.fromkeys(r for r in refs if r):
        sync_used_by(kube, namespace, ref, _users(index, namespace, ref, exclude))


def _rollback(kube: Kube, namespace: str, workload: Mapping[str, Any], decision: RollbackDecision) -> bool:
    """Restore the pod template of the ReplicaSet serving ``decision.to_key`` (``rollout undo``)."""
    selector = f"{LABEL_ENGINE_KEY}={short_key(decision.to_key)}"
    candidates = [
        rs
        for rs in kube.list(REPLICA_SET, namespace, label_selector=selector)
        if is_controlled_by(rs, workload["metadata"]["uid"])
    ]
    if not candidates:
        return False
    newest = max(
        candidates,
        key=lambda rs: int((rs["metadata"].get("annotations") or {}).get(DEPLOYMENT_REVISION_ANNOTATION, 0)),
    )
    template = copy.deepcopy(newest["spec"]["template"])
    template["metadata"].get("labels", {}).pop(POD_TEMPLATE_HASH_LABEL, None)
    failed_hash = (workload["metadata"].get("annotations") or {}).get(ANNOTATION_RENDERED_HASH, "")
    annotations = {
        ANNOTATION_ROLLED_BACK_FROM: decision.failed_key,
        ANNOTATION_ROLLED_BACK_HASH: failed_hash,
        ANNOTATION_ROLLBACK_REASON: decision.reason,
        ANNOTATION_RENDERED_HASH: "rolled-back",
    }
    kube.patch(
        DEPLOYMENT,
        namespace,
        workload["metadata"]["name"],
        {"metadata": {"annotations": annotations}, "spec": {"template": template}},
    )
    return True


# ------------------------------------------------------------------------------ reconcile
def reconcile(kube: Kube, namespace: str, name: str) -> None:
    """Bring one LLMDeployment's children and status to the desired state (idempotent)."""
    with (
        OBJECT_LOCKS.hold(LLM_DEPLOYMENT.kind, namespace, name),
        observe_reconcile(LLM_DEPLOYMENT.kind),
        object_context(LLM_DEPLOYMENT.kind, namespace, name),
    ):
        _reconcile(kube, namespace, name)


def _reconcile(kube: Kube, namespace: str, name: str) -> None:
    # On the cached copy first; anything to write (a child, the status, an Event) is decided again
    # on a fresh GET: status transitions and their Events against the last status written
    # (plumbing.cache_first).
    cache_first(kube, LLM_DEPLOYMENT, namespace, name, lambda k, obj: _reconcile_object(k, name, obj))


def _reconcile_object(kube: Kube, name: str, obj: dict[str, Any] | None) -> None:
    if obj is None or obj["metadata"].get("deletionTimestamp"):
        return
    namespace = str(obj["metadata"]["namespace"])
    spec = obj.get("spec") or {}
    engine_name = (spec.get("engineRef") or {}).get("name")
    generation = obj["metadata"].get("generation", 0)
    old_status = obj.get("status") or {}
    engine = indexes.get(kube, LLM_ENGINE, namespace, engine_name) if engine_name else None

    selector = f"{LABEL_DEPLOYMENT}={child_name(name)}"
    state, message = engine_readiness(engine)
    # Failed/Succeeded pods serve nothing and are replaced by the ReplicaSet: not counted at all.
    every_pod = indexes.serving_pods(kube, namespace, child_name(name))
    pods = [
        p
        for p in every_pod
        if _is_replica_pod(p) and (p.get("status") or {}).get("phase") not in ("Failed", "Succeeded")
    ]
    live_pods = [p for p in pods if not p["metadata"].get("deletionTimestamp")]
    server = spec.get("server") or {}
    scheduling = spec.get("scheduling") or {}
    node_affinity = ((scheduling.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    )
    base = Observation(
        generation=generation,
        # what the workload is given: spec.replicas, within the built-in autoscaler's range
        spec_replicas=_workload_replicas(spec),
        engine_name=engine_name or "",
        engine_state=state,
        engine_message=message,
        previous_engine_key=old_status.get("engineKey"),
        previous_conditions=old_status.get("conditions") or [],
        # one pod per replica (a LeaderWorkerSet's leaders): kept from the last rendering until
        # the children are rendered again (render.leaderworkerset.replica_selector, audit B5)
        selector=old_status.get("selector") or selector,
        pods=len(live_pods),
        ready_pods=sum(pod_view(p).ready for p in live_pods),
        decoupled=bool(server.get("decoupled", ServerSpec.model_fields["decoupled"].default)),
        api=str(server.get("api") or ServerSpec.model_fields["api"].default),
        backend=_served_backend(engine, live_pods),
        unschedulable=[u for u in (pod_view(p).unschedulable for p in live_pods) if u is not None],
        node_selector={str(k): str(v) for k, v in (scheduling.get("nodeSelector") or {}).items()},
        node_affinity=bool(node_affinity),
        stuck=stuck_containers(live_pods),
        fixes=serving_fixes(engine),
    )
    if state != "ready" or engine is None:
        # Pods of the previous engine keep serving; only the replica count follows spec.replicas.
        _follow_replicas(kube, namespace, name, obj["metadata"]["uid"], base.spec_replicas)
        _write_status(kube, obj, base)
        return

    espec = engine.get("spec") or {}
    refusal = _policy_refusal(kube, namespace, spec, espec)
    if refusal is not None:
        blocked = (
            refusal.reason,
            f"{refusal.field}: {refusal_text(refusal, LLM_DEPLOYMENT.kind, RESYNC_SECONDS)}",
        )
        _write_status(kube, obj, replace(base, blocked=blocked))
        return
    product = (espec.get("gpu") or {}).get("product", "")
    per_node = gpus_per_node(kube, product)
    # decide how it is served (gates, parameters, placement, files), then render, then act
    plan = plan_serving(obj, engine, gpus_per_node=per_node, lws_installed=lws_installed(kube))
    if not isinstance(plan, ServingRefusal) and plan.params.artifact_claim:
        # Serving pods mount the claim: it no longer goes with the LLMEngine that created it.
        release_claim(kube, namespace, plan.params.artifact_claim)
    if isinstance(plan, ServingRefusal):
        desired_key = (engine.get("status") or {}).get("engineKey")
        refused = replace(
            base,
            desired_engine_key=desired_key,
            incompatibilities=plan.incompatibilities,
            blocked=plan.blocked,
        )
        _write_status(kube, obj, refused)
        return

    plan = replace(plan, params=replace(plan.params, replicas=base.spec_replicas))
    params = plan.params
    children = render_plan(plan, serving_network(current()))
    workload, rolled_back, conflict = _sync_children(kube, obj, children)
    if conflict is not None:
        blocked = (R_CHILD_CONFLICT, conflict.message(LLM_DEPLOYMENT.kind, RESYNC_SECONDS))
        _write_status(kube, obj, replace(base, desired_engine_key=params.engine_key, blocked=blocked))
        return
    view = workload_view(workload)
    pod_views = [pod_view(p) for p in pods]
    progress = rollout_progress(params.short_key, params.replicas, view, pod_views)
    if rolled_back is None and workload is not None and workload["kind"] == "Deployment":
        decision = decide_rollback(
            progress,
            view,
            auto_rollback=params.rollout.auto_rollback,
            desired_key=params.engine_key,
            previous_key=old_status.get("engineKey"),
            progress_deadline_seconds=params.rollout.progress_deadline_seconds,
        )
        if decision is not None and _rollback(kube, namespace, workload, decision):
            post_event(kube, obj, "RolledBack", decision.reason, type_="Warning")
            rolled_back = decision
    updated = sum(1 for p in pod_views if p.short_key == params.short_key and not p.terminating)
    if view is not None:
        updated = min(updated, view.updated_replicas)
    # Failed pods and LWS workers included: any pod that verified the artifact may have refused it.
    tampered = tampered_artifact(every_pod, params.short_key, params.engine_name)
    _write_status(
        kube,
        obj,
        replace(
            base,
            desired_engine_key=params.engine_key,
            progress=progress,
            updated_replicas=updated,
            deadline_exceeded=bool(view and view.progress_deadline_exceeded),
            rolled_back=rolled_back,
            endpoint=endpoint(params),
            selector=replica_selector_string(params),
            blocked=None if tampered is None else (R_ARTIFACT_TAMPERED, tampered),
        ),
    )


def _policy_refusal(
    kube: Kube, namespace: str, spec: Mapping[str, Any], engine_spec: Mapping[str, Any]
) -> Refusal | None:
    """What the admin does not allow in serving this deployment
    (:func:`~trtllm_operator.decide.policy.serving_refusal`); reads Secret metadata only."""
    try:
        espec = LLMEngineSpec.model_validate(engine_spec)
    except ValidationError:
        return None  # plan_serving reports the malformed spec
    settings = current()
    s3 = espec.storage.s3
    names = [s3.credentials_secret_ref.name] if s3 is not None and s3.credentials_secret_ref else []
    return serving_refusal(
        (spec.get("server") or {}).get("image"),
        espec,
        namespace,
        secrets={n: kube.get_metadata(SECRET, namespace, n) for n in names},
        allowed_image_registries=settings.allowed_image_registries,
        allowed_s3_endpoints=settings.allowed_s3_endpoints,
    )


def _workload_replicas(spec: Mapping[str, Any]) -> int:
    """The replica count the workload is given for this LLMDeployment ``spec``
    (:func:`~trtllm_operator.decide.autoscaling.workload_replicas`); ``spec.replicas`` when
    ``spec.autoscaling`` cannot be read (the autoscaler reports that itself)."""
    replicas = int(spec.get("replicas", 1))
    try:
        auto = AutoscalingSpec.model_validate(spec.get("autoscaling") or {})
    except ValidationError:
        return replicas
    return workload_replicas(replicas, auto)


def _workloads(kube: Kube, name: str) -> list[tuple[Resource, str]]:
    """Every (resource, name) the workload may have (render.leaderworkerset.workload_names)."""
    kinds = {"Deployment": DEPLOYMENT, "LeaderWorkerSet": LWS}
    installed = None
    out = []
    for kind, wname in workload_names(name):
        if kind == "LeaderWorkerSet":
            installed = lws_installed(kube) if installed is None else installed
            if not installed:
                continue
        out.append((kinds[kind], wname))
    return out


def _follow_replicas(kube: Kube, namespace: str, name: str, owner_uid: str, replicas: int) -> None:
    """Copy ``spec.replicas`` to an existing workload this deployment controls, without touching
    its template (a workload someone else owns is left alone; the next full reconcile reports it)."""
    for res, wname in _workloads(kube, name):
        live = indexes.get(kube, res, namespace, wname)
        if live is None or (live.get("spec") or {}).get("replicas") == replicas:
            continue
        if indexes.cached(res):
            live = kube.get(res, namespace, wname)  # about to write: ownership from a fresh copy
        if is_controlled_by(live, owner_uid) and (live or {}).get("spec", {}).get("replicas") != replicas:
            kube.patch(res, namespace, wname, replicas_patch(replicas))


def _served_backend(engine: Mapping[str, Any] | None, pods: list[dict[str, Any]]) -> str | None:
    """The engine's ``spec.backend``; without the engine (deleted), ``pytorch`` when the pods are
    trtllm-serve's (:data:`~trtllm_operator.api.wire.LABEL_FRONTEND`), else unknown (None)."""
    if engine is not None:
        return str((engine.get("spec") or {}).get("backend") or LLMEngineSpec.model_fields["backend"].default)
    labels = [(p["metadata"].get("labels") or {}).get(LABEL_FRONTEND) for p in pods]
    return "pytorch" if FRONTEND_TRTLLM_SERVE in labels else None


def _is_replica_pod(pod: Mapping[str, Any]) -> bool:
    """Deployment pods, and LeaderWorkerSet leaders (one per replica)."""
    labels = pod["metadata"].get("labels") or {}
    return bool(labels.get(LWS_WORKER_INDEX_LABEL, "0") == "0")


def _sync_children(
    kube: Kube, obj: Mapping[str, Any], children: Children
) -> tuple[dict[str, Any] | None, RollbackDecision | None, ChildConflict | None]:
    """Create/patch the children; returns the live workload, a rollback still in force, and the
    first child this deployment does not control (then the workload was not written).

    The workload is read fresh when the cache lacks it (a foreign one under its name stops the
    reconcile before anything is written); the other children — the credentials Secret,
    NetworkPolicy, Service, PodDisruptionBudget, model-repository ConfigMap — are created first
    when the cache lacks them, a 409 reading the object there and refusing it when it is not
    this deployment's (:func:`~trtllm_operator.handlers.plumbing.read_children` ``create_first``).
    They are applied before the workload, so its pods never start next to a foreign one."""
    namespace, name = obj["metadata"]["namespace"], obj["metadata"]["name"]
    uid = obj["metadata"]["uid"]
    assert children.configmap and children.workload and children.service and children.pdb and children.params
    res = DEPLOYMENT if children.workload["kind"] == "Deployment" else LWS
    wname = children.workload["metadata"]["name"]
    reads = [
        (res, children.workload),
        (SERVICE, children.service),
        (PDB, children.pdb),
        (CONFIG_MAP, children.configmap),
    ]
    if children.network_policy is not None:
        reads.append((NETWORK_POLICY, children.network_policy))
    lives, conflict = read_children(kube, reads, create_first=(SERVICE, PDB, CONFIG_MAP, NETWORK_POLICY))
    live, live_service, live_pdb, live_cm = lives[:4]
    if conflict is None:
        # Triton's admin header value and the SSH key: before any pod that mounts them. A new
        # deployment (no workload yet) creates it first: a 409 reads the one that is there.
        conflict = ensure_credentials(kube, children.params, create_first=live is None)
    if conflict is not None:
        return live, None, conflict
    passive: list[tuple[Resource, Mapping[str, Any], dict[str, Any] | None]] = []
    if children.network_policy is not None:
        passive.append((NETWORK_POLICY, children.network_policy, lives[4]))
    passive += [(SERVICE, children.service, live_service), (PDB, children.pdb, live_pdb)]
    held: RollbackDecision | None = None
    annotations = (live or {}).get("metadata", {}).get("annotations") or {}
    held_hash = annotations.get(ANNOTATION_ROLLED_BACK_HASH)
    held_now = live is not None and bool(held_hash) and held_hash == with_rendered_hash(children.workload)[1]
    if not held_now:
        passive.append((CONFIG_MAP, children.configmap, live_cm))
    for child_res, manifest, child_live in passive:
        applied = apply_owned(kube, child_res, manifest, live=child_live)
        if applied.conflict is not None:
            return live, None, applied.conflict
    if live is not None and held_now:
        # This exact rendering failed and was rolled back: keep the restored template until the
        # engine key or a setting changes; only the replica count follows spec.replicas.
        held = RollbackDecision(
            children.params.engine_key, "", annotations.get(ANNOTATION_ROLLBACK_REASON, "rolled back")
        )
        want = children.params.replicas
        if (live.get("spec") or {}).get("replicas") != want:
            live = kube.patch(res, namespace, wname, replicas_patch(want))
    else:
        reverted = _scale_reverted(obj, children, live)
        if reverted is not None and indexes.cached(res):
            # The cached copy may predate the operator's own revert (the watch lags by a round-trip):
            # decide on the workload as it is before posting, so one direct scale is one Warning.
            live = kube.get(res, namespace, wname)
            reverted = _scale_reverted(obj, children, live)
        if reverted is not None:
            post_event(kube, obj, reverted.reason, reverted.message, type_=reverted.type)
        if live is not None and annotations.get(ANNOTATION_ROLLED_BACK_FROM):
            # A new key or setting arrived after a rollback: clear the hold, roll forward.
            kube.patch(
                res,
                namespace,
                wname,
                {
                    "metadata": {
                        "annotations": {
                            ANNOTATION_ROLLED_BACK_FROM: None,
                            ANNOTATION_ROLLED_BACK_HASH: None,
                            ANNOTATION_ROLLBACK_REASON: None,
                        }
                    }
                },
            )
        applied = apply_owned(kube, res, children.workload, live=live)
        if applied.conflict is not None:
            return applied.live, None, applied.conflict
        live = applied.live
    for other, other_name in _workloads(kube, name):
        if (other, other_name) == (res, wname):
            continue
        stale = kube.get(other, namespace, other_name)
        if stale is not None and is_controlled_by(stale, uid):
            kube.delete(other, namespace, other_name)
    if children.network_policy is None:
        # TRTLLM_OPERATOR_SERVING_NETWORK_POLICY=false: remove the one this deployment controls
        policy = indexes.get(kube, NETWORK_POLICY, namespace, child_name(name))
        if policy is not None and is_controlled_by(policy, uid):
            kube.delete(NETWORK_POLICY, namespace, child_name(name))
    _sync_inference_pool(kube, obj, children.inference_pool)
    _prune_configmaps(kube, namespace, uid, name, {children.configmap["metadata"]["name"]})
    return live, held, None


def _scale_reverted(
    obj: Mapping[str, Any], children: Children, live: Mapping[str, Any] | None
) -> EventToPost | None:
    """:func:`~trtllm_operator.decide.deployment_status.workload_scale_reverted` for the live
    workload ``live`` and the rendered ``children``."""
    assert children.workload is not None and children.params is not None
    spec = obj.get("spec") or {}
    return workload_scale_reverted(
        obj["metadata"]["name"],
        f"{children.workload['kind']}/{children.workload['metadata']['name']}",
        live_replicas=None if live is None else (live.get("spec") or {}).get("replicas"),
        written_replicas=written_replicas(live),
        target_replicas=children.params.replicas,
        spec_replicas=int(spec.get("replicas", 1)),
        last_desired=(obj.get("status") or {}).get("desiredReplicas"),
        autoscaled=bool((spec.get("autoscaling") or {}).get("enabled")),
    )


#: Condition type of ``spec.routing.inferencePool`` (written only while a pool is asked for or was).
ROUTED = CONDITION_ROUTED


def _sync_inference_pool(kube: Kube, obj: Mapping[str, Any], desired: Mapping[str, Any] | None) -> None:
    """Create/patch the InferencePool ``spec.routing.inferencePool`` asks for, or delete the one this
    deployment owns when it no longer does. Condition ``Routed``: True when applied; False with
    ``InferencePoolNotInstalled`` when the cluster has no ``inference.networking.k8s.io/v1``
    InferencePool kind (the create answers 404), ``InferencePoolConflict`` when an InferencePool of
    that name belongs to someone else."""
    meta = obj["metadata"]
    namespace, name, uid = meta["namespace"], meta["name"], meta["uid"]
    pool_name = child_name(name)

    def routed(status: bool, reason: str, message: str) -> None:
        cond = condition(ROUTED, status, reason, message, observed_generation=meta.get("generation"))
        update_conditions(kube, LLM_DEPLOYMENT, namespace, name, [cond])

    if desired is None:
        # Only a deployment that once asked for a pool has a Routed condition: no extra GET (and
        # no InferencePool permission or kind needed) for every other one.
        conditions = (obj.get("status") or {}).get("conditions") or []
        was = next((c for c in conditions if c.get("type") == ROUTED), None)
        if was is None:
            return
        live = kube.get(INFERENCE_POOL, namespace, pool_name)
        if live is not None and is_controlled_by(live, uid):
            kube.delete(INFERENCE_POOL, namespace, pool_name)
        if was.get("reason") != "RoutingDisabled":
            routed(False, "RoutingDisabled", "spec.routing.inferencePool is off")
        return
    try:
        applied = apply_owned(kube, INFERENCE_POOL, desired)
    except ApiException as exc:
        if exc.status != 404:
            raise
        routed(
            False,
            "InferencePoolNotInstalled",
            "spec.routing.inferencePool: the cluster has no InferencePool kind "
            "(inference.networking.k8s.io/v1): install the Gateway API Inference Extension's CRDs, "
            "or set routing.inferencePool.enabled: false",
        )
        return
    if applied.result == "not_owned":
        routed(
            False,
            "InferencePoolConflict",
            f"InferencePool {pool_name} exists but is not owned by this LLMDeployment: delete or rename it",
        )
        return
    routed(True, "InferencePoolApplied", f"InferencePool {pool_name} selects the serving pods")


def _write_status(kube: Kube, obj: Mapping[str, Any], observation: Observation) -> None:
    # every outcome of a whole reconcile, stamped with this release (handlers/release.py)
    write_outcome(kube, LLM_DEPLOYMENT, obj, deployment_status(observation), status_extra=stamp_field())


# ------------------------------------------------------------------------------ settled
def settled(namespace: str, name: str) -> bool:
    """Whether the watch caches show LLMDeployment ``name`` converged, so a reconcile on them would
    find nothing to do: its status is ``Ready`` for its current generation, on the key its engine
    (cached, ``Ready``) reports, and its Deployment (cached) has rolled out that generation with
    every replica updated and ready, as many as the status reports. False without the caches
    (:func:`unsettled` says which test failed).

    Used where a reconcile would only confirm what is there: the replayed listing of the watches
    (``type`` None) does not re-queue a settled deployment through its workload or engine, and
    kopf's resume does not reconcile one this release stamped (:func:`resumed_settled`). What this
    does not see (a child changed or deleted behind the operator's back) is drift: the resync loop
    reconciles every LLMDeployment within :data:`RESYNC_SECONDS`."""
    return unsettled(namespace, name) is None


def unsettled(namespace: str, name: str) -> str | None:
    """Why :func:`settled` is False for LLMDeployment ``name``: the first of its tests that fails on
    the cached objects, as a short sentence naming the object and field; None when settled."""
    if not indexes.cached(LLM_DEPLOYMENT) or not indexes.cached(DEPLOYMENT):
        return "no watch cache"
    # read-only views of the cached objects (no copy: this runs several times per object at a restart)
    obj = indexes.peek(LLM_DEPLOYMENT, namespace, name)
    if obj is None:
        return "not in the LLMDeployment cache"
    meta, spec, status = obj["metadata"], obj.get("spec") or {}, obj.get("status") or {}
    if meta.get("deletionTimestamp"):
        return "being deleted"
    unready = unready_reason(obj)
    if unready is not None:
        return unready
    engine_name = _engine_ref(obj)
    engine = indexes.peek(LLM_ENGINE, namespace, engine_name) if engine_name else None
    estatus = (engine or {}).get("status") or {}
    if engine is None:
        return f"engine {engine_name!r} not in the LLMEngine cache"
    if estatus.get("phase") != "Ready":
        return f"engine {engine_name} status.phase is {estatus.get('phase')!r}"
    if not status.get("engineKey") or estatus.get("engineKey") != status.get("engineKey"):
        return f"status.engineKey {status.get('engineKey')!r} is not engine {engine_name}'s"
    workload = indexes.peek(DEPLOYMENT, namespace, child_name(name))
    if workload is None:
        return f"Deployment {child_name(name)} not in the Deployment cache"
    if workload["metadata"].get("deletionTimestamp"):
        return f"Deployment {child_name(name)} being deleted"
    if not is_controlled_by(workload, meta.get("uid")):
        return f"Deployment {child_name(name)} not controlled by this LLMDeployment"
    wstatus, wgeneration = workload.get("status") or {}, workload["metadata"].get("generation")
    replicas = spec.get("replicas", 1)
    if wstatus.get("observedGeneration") != wgeneration:
        return (
            f"Deployment {child_name(name)} status.observedGeneration "
            f"{wstatus.get('observedGeneration')} != generation {wgeneration}"
        )
    if (workload.get("spec") or {}).get("replicas") != replicas:
        return f"Deployment {child_name(name)} spec.replicas != spec.replicas {replicas}"
    counts = {k: wstatus.get(k) or 0 for k in ("replicas", "updatedReplicas", "readyReplicas")}
    if any(v != replicas for v in counts.values()):
        shown = ", ".join(f"{k} {v}" for k, v in counts.items())
        return f"Deployment {child_name(name)} status {shown}, spec.replicas {replicas}"
    if status.get("readyReplicas") != replicas:
        return f"status.readyReplicas {status.get('readyReplicas')} != spec.replicas {replicas}"
    return None


def resumed_settled(namespace: str, name: str) -> bool:
    """Whether kopf's resume of LLMDeployment ``name`` needs no reconcile: :func:`settled`, and its
    cached status stamped by this release (:func:`~trtllm_operator.handlers.release.stamped`)."""
    return resume_unsettled(namespace, name) is None


def resume_unsettled(namespace: str, name: str) -> str | None:
    """Why kopf's resume of LLMDeployment ``name`` reconciles it (:func:`resumed_settled` False):
    another release's stamp, or :func:`unsettled`'s reason; None when it needs no reconcile."""
    cached = indexes.peek(LLM_DEPLOYMENT, namespace, name)
    if cached is None:
        return "not in the LLMDeployment cache"
    if not stamped(cached):
        return unstamped_reason(cached)
    return unsettled(namespace, name)


# ------------------------------------------------------------------------------ kopf wiring
def _safe_reconcile(namespace: str | None, name: str | None) -> None:
    if not namespace or not name:
        return
    reconcile(default_kube(), namespace, name)


@kopf.index(GROUP, VERSION, DEPLOYMENT_PLURAL)
async def llmdeployments_by_engine(
    namespace: str | None, name: str | None, spec: Mapping[str, Any], meta: Mapping[str, Any], **_: Any
) -> dict[tuple[str, str], str] | None:
    """(namespace, engineRef.name) → LLMDeployment names, kept by kopf from the watch stream
    (``async``: kopf runs it on its event loop, not in the handlers' thread pool)."""
    ref = _engine_ref({"spec": spec})
    if not namespace or not name or not ref or meta.get("deletionTimestamp"):
        return None
    return {(namespace, ref): name}


@kopf.on.resume(GROUP, VERSION, DEPLOYMENT_PLURAL)
@kopf.on.create(GROUP, VERSION, DEPLOYMENT_PLURAL)
@kopf.on.update(GROUP, VERSION, DEPLOYMENT_PLURAL)
def on_deployment(
    *,
    name: str,
    namespace: str | None,
    body: Mapping[str, Any],
    old: Mapping[str, Any] | None = None,
    llmdeployments_by_engine: Any = None,
    reason: str = "",
    **_: Any,
) -> None:
    # kopf resumes an object only when its spec is what it last handled with every handler done
    # (kopf 1.45.2 kopf/_core/intents/causes.py detect_changing_cause: RESUME only ``if not diff and
    # initial``; a change is an UPDATE with the resume handlers mixed in). A resumed deployment the
    # caches show settled and that this same release last reconciled (handlers/release.py) needs
    # nothing; one of an earlier release (or other settings) is reconciled at once: that release may
    # have rendered differently (tests/e2e/test_upgrade.py). Drift is the resync loop's.
    if namespace:
        handled_by_kopf(LLM_DEPLOYMENT.kind, namespace, name)  # the drift loop may visit it now
    if reason != kopf.Reason.RESUME or not namespace:
        _safe_reconcile(namespace, name)
    else:
        why = resume_unsettled(namespace, name)
        observe_resume(LLM_DEPLOYMENT.kind, reconciled=why is not None)
        if why is not None:
            with object_context(LLM_DEPLOYMENT.kind, namespace, name):
                log.info("resumed, reconciling: %s", why)
            _safe_reconcile(namespace, name)
    # The engine it serves, and the one it served before an engineRef change, list it (or not).
    _sync_refs(namespace, [_engine_ref(body), _engine_ref(old)], llmdeployments_by_engine)


@kopf.on.startup()
async def start_deployment_resync(llmdeployments_by_engine: Any = None, **_: Any) -> None:
    """Drift: every LLMDeployment re-reconciled once per :data:`RESYNC_SECONDS`, spread over the
    period (:func:`~trtllm_operator.handlers.plumbing.resync_forever`: one loop, not a kopf timer
    per object — no finalizer). A settled object costs no request for itself (``cache_first``); its
    credentials Secret's metadata is read at most once per ``credentials.CONFIRM_SECONDS`` (no watch
    on Secrets), so the first visit after a start costs one GET."""

    def resync(namespace: str, name: str) -> None:
        _safe_reconcile(namespace, name)
        cached = indexes.get(default_kube(), LLM_DEPLOYMENT, namespace, name)
        _sync_refs(namespace, [_engine_ref(cached)], llmdeployments_by_engine)

    start_resync(LLM_DEPLOYMENT.kind, lambda: indexes.names(LLM_DEPLOYMENT), lambda: RESYNC_SECONDS, resync)


@kopf.on.event(GROUP, VERSION, DEPLOYMENT_PLURAL)
def on_deployment_event(event: Mapping[str, Any], llmdeployments_by_engine: Any = None, **_: Any) -> None:
    """A deleted LLMDeployment leaves its engine's ``status.usedBy`` (no finalizer needed: the watch
    reports the deletion; a deletion missed while the operator was down is healed by the engine's
    next event, which recomputes ``usedBy`` from the index)."""
    if event.get("type") != "DELETED":
        indexes.shown(LLM_DEPLOYMENT, event.get("object") or {})
    if event.get("type") == "DELETED":
        obj = event.get("object") or {}
        meta = obj.get("metadata") or {}
        if meta.get("namespace") and meta.get("name"):
            known_version(LLM_DEPLOYMENT, meta["namespace"], meta["name"], None)
            handled_by_kopf(LLM_DEPLOYMENT.kind, meta["namespace"], meta["name"], gone=True)
        _sync_refs(meta.get("namespace"), [_engine_ref(obj)], llmdeployments_by_engine, meta.get("name"))


#: Workloads (Deployment, LeaderWorkerSet) this controller labelled.
_WORKLOAD_LABELS = {LABEL_DEPLOYMENT: kopf.PRESENT}


@kopf.on.event(DEPLOYMENT.group, DEPLOYMENT.version, DEPLOYMENT.plural, labels=_WORKLOAD_LABELS)
@kopf.on.event(LWS.group, LWS.version, LWS.plural, labels=_WORKLOAD_LABELS)
async def on_workload_event(event: Mapping[str, Any], **_: Any) -> None:
    """Status follows the pods: every change of an owned Deployment (or LeaderWorkerSet, when its
    CRD is installed; kopf starts that watch when the CRD appears) re-reconciles its owner
    (coalesced: :data:`~trtllm_operator.handlers.plumbing.WORKQUEUE`)."""
    obj = event.get("object") or {}
    namespace = (obj.get("metadata") or {}).get("namespace")
    for owner in owner_names(obj, LLM_DEPLOYMENT.kind)[:1]:
        if event.get("type") is None and namespace and settled(namespace, owner):
            continue  # the watch's (re)listing (kopf: type None) of a workload its owner reports as is
        await _queue_reconcile(namespace, owner)


#: Serving pod UID → :func:`_pod_fingerprint` of its last watch event.
_pods_seen: dict[str, tuple[Any, ...]] = {}


def _pod_fingerprint(pod: Mapping[str, Any]) -> tuple[Any, ...]:
    """What an LLMDeployment's status reads of one of its pods: its rollout view (engine key, Ready,
    terminating, unschedulable), its phase and its stuck containers."""
    return (pod_view(pod), (pod.get("status") or {}).get("phase"), tuple(stuck_containers([pod])))


@kopf.on.event(POD.group, POD.version, POD.plural, labels=_WORKLOAD_LABELS)
async def on_serving_pod_event(event: Mapping[str, Any], **_: Any) -> None:
    """A serving pod changed what its LLMDeployment's status reads of it (:func:`_pod_fingerprint`),
    or went away: re-reconcile that LLMDeployment (coalesced:
    :data:`~trtllm_operator.handlers.plumbing.WORKQUEUE`).

    The workload's status follows its pods, but on another watch: a reconcile woken by the
    Deployment's ``readyReplicas`` can read the pod cache before that pod's Ready is in it, and then
    nothing but the drift resync woke the LLMDeployment again (benchmarks/scale.py at 100 + 100:
    2 to 5 deployments Ready 55 s after their pods). The pod's label value is the LLMDeployment's
    name (``render.serving.child_name`` of a name of at most ``api.crd.MAX_NAME_LENGTH``)."""
    obj = event.get("object") or {}
    meta = obj.get("metadata") or {}
    uid, namespace = meta.get("uid"), meta.get("namespace")
    owner = (meta.get("labels") or {}).get(LABEL_DEPLOYMENT)
    if not uid or not namespace or not owner:
        return
    if event.get("type") == "DELETED":
        _pods_seen.pop(uid, None)
    else:
        fingerprint = _pod_fingerprint(obj)
        if _pods_seen.get(uid) == fingerprint:
            return
        _pods_seen[uid] = fingerprint
        if event.get("type") is None and settled(namespace, owner):
            return  # the watch's (re)listing (kopf: type None) of a pod its owner reports as is
    await _queue_reconcile(namespace, owner)


async def _queue_reconcile(namespace: str | None, name: str) -> None:
    await WORKQUEUE.run((LLM_DEPLOYMENT.kind, namespace, name), lambda: _safe_reconcile(namespace, name))


#: (namespace, LLMEngine name) → :func:`_serving_view` of its last watch event.
_engine_views: dict[tuple[str, str], str] = {}


def _serving_view(engine: Mapping[str, Any]) -> str:
    """Hash of what an LLMDeployment's reconcile reads of its engine: spec, status but
    ``status.usedBy`` (the LLMDeployment controller's own write), uid, generation, labels,
    annotations but kopf's bookkeeping (``KOPF_ANNOTATION_PREFIX``), deletion. An engine event that
    leaves it unchanged — kopf's diff-base patch, a ``usedBy`` update — re-reconciles no deployment:
    each of those events used to re-reconcile every deployment of the engine (benchmarks/scale.py)."""
    meta = engine.get("metadata") or {}
    return content_hash(
        {
            "uid": meta.get("uid"),
            "generation": meta.get("generation"),
            "labels": meta.get("labels") or {},
            "annotations": {
                k: v
                for k, v in (meta.get("annotations") or {}).items()
                if not k.startswith(KOPF_ANNOTATION_PREFIX)
            },
            "deletionTimestamp": meta.get("deletionTimestamp"),
            "spec": engine.get("spec") or {},
            "status": {k: v for k, v in (engine.get("status") or {}).items() if k != "usedBy"},
        }
    )


@kopf.on.event(GROUP, VERSION, ENGINE_PLURAL)
async def on_engine_event(event: Mapping[str, Any], llmdeployments_by_engine: Any = None, **_: Any) -> None:
    """A new engine key or a change of readiness re-reconciles every deployment referencing it
    (coalesced per object: :data:`~trtllm_operator.handlers.plumbing.WORKQUEUE`)."""
    obj = event.get("object") or {}
    meta = obj.get("metadata") or {}
    namespace, engine_name = meta.get("namespace"), meta.get("name")
    if not namespace or not engine_name:
        return
    users = _users(llmdeployments_by_engine, namespace, engine_name)
    if event.get("type") == "DELETED":
        known_version(LLM_ENGINE, namespace, engine_name, None)
        handled_by_kopf(LLM_ENGINE.kind, namespace, engine_name, gone=True)
        _engine_views.pop((namespace, engine_name), None)
    else:
        indexes.shown(LLM_ENGINE, obj)
        view = _serving_view(obj)
        if _engine_views.get((namespace, engine_name)) == view:
            users = []  # kopf's bookkeeping, status.usedBy: nothing a deployment reads
        elif event.get("type") is None:  # the watch's (re)listing: only deployments not settled on it
            users = [d for d in users if not settled(namespace, d)]
        _engine_views[(namespace, engine_name)] = view

        def used_by() -> None:
            now = _users(llmdeployments_by_engine, namespace, engine_name)
            sync_used_by(default_kube(), namespace, engine_name, now)

        await WORKQUEUE.run(("usedBy", namespace, engine_name), used_by)
    await asyncio.gather(*(_queue_reconcile(namespace, d) for d in users))
