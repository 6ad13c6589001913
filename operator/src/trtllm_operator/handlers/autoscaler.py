"""Autoscaler wiring: the built-in autoscaler's kopf timer, and the HPA / KEDA children of the other modes.

**mode builtin** — a kopf timer on every LLMDeployment with ``spec.autoscaling.enabled``, ticking
every :data:`TICK_SECONDS` and evaluating once per ``spec.autoscaling.metrics.scrapeIntervalSeconds``
(:func:`autoscale_once`):

1. read the LLMDeployment fresh and map ``spec.autoscaling`` to a
   :class:`~trtllm_operator.decide.autoscaling.Policy`;
2. list its pods with ``status.selector`` (LeaderWorkerSet workers left out: only a group's leader
   serves the model's metrics), read the signals — scrape each Ready pod's ``:8002/metrics``
   (:mod:`trtllm_operator.metrics.scrape`) or query Prometheus (:mod:`trtllm_operator.metrics.prometheus`);
3. :func:`~trtllm_operator.decide.autoscaling.decide` with the policy state this process keeps in
   memory per object (by UID, as Kubernetes' HPA controller keeps its recommendations), or, after a
   restart or when ``status.autoscaling.policyState`` is no longer what this process left there,
   the persisted one carried over (:func:`~trtllm_operator.decide.autoscaler.state_for_tick`);
4. on a change, patch ``spec.replicas`` through the ``/scale`` subresource with the object's
   ``resourceVersion`` as precondition (a concurrent ``kubectl scale`` wins; the tick is retried);
5. write ``status.autoscaling`` (current signals for the printer columns, ``desiredReplicas``,
   ``lastScaleTime``, the last :data:`MAX_DECISIONS` decisions — every scale, and before each the
   last reason it was held for (:func:`~trtllm_operator.decide.autoscaling.record_decision`) — and
   the policy state when a restart would otherwise lose what a later decision reads
   (:func:`~trtllm_operator.decide.autoscaling.same_memory`)) and the conditions ``ScalingActive``
   (signals readable) and ``ScalingLimited`` (a limit held the count back: ``InsufficientGPU``,
   ``TooManyReplicas``, ``ScaleUpLimit`` …) through the shared optimistic-concurrency status writer,
   which skips a write that changes nothing — so an idle, settled deployment costs no write per
   evaluation (issue #20) — and writes nothing once the object, read fresh, is no longer in mode
   builtin; post an Event per scale and a Warning when ``InsufficientGPU`` starts.

**mode hpa / keda** — the autoscaler renders an autoscaling/v2 HorizontalPodAutoscaler
(:mod:`trtllm_operator.render.hpa`) or a KEDA ScaledObject (:mod:`trtllm_operator.render.keda`) owned
by the LLMDeployment, keeps it up to date (patched only when its rendered hash changes), and deletes
the one it owns when the mode changes or autoscaling is turned off. It never touches an object of
the same name that it does not own (a Warning Event says so). A refusal of the child by admission
(a webhook's or a ValidatingAdmissionPolicy's denial, or a webhook not reachable under ``failurePolicy:
Fail``: :func:`~trtllm_operator.decide.autoscaler.admission_refusal`; KEDA's webhooks refuse a
ScaledObject whose target another HPA or ScaledObject already targets) becomes ``ScalingActive``
``AdmissionRefused`` with its words — ``False`` when the creation was refused, ``True`` when the
change of the child already applied was (that one stays as last applied), but ``False`` again when
KEDA refused that change because another HPA or ScaledObject targets the deployment (Kubernetes' HPA
controller then stops both HPAs: :func:`~trtllm_operator.decide.autoscaler.refused_message`) — and a
Warning once per change, tried again by the resync timer. Leaving mode builtin (or turning
autoscaling off) removes the built-in's ``status.autoscaling`` and moves its ``ScalingLimited`` (and,
when off, ``ScalingActive``) to a reason that says who decides now
(:func:`~trtllm_operator.decide.autoscaler.retire_builtin`).

Both modes reconcile as the engine controller does — observe → decide → act → write: what to write
(conditions and their reasons, ``status.autoscaling``, Events, which child to render or remove) is
decided by the pure :mod:`trtllm_operator.decide.autoscaler`; this module reads, patches and writes.

Nothing here raises into kopf for expected problems (unreachable pods or Prometheus, invalid spec):
they become conditions and Events, and the timer carries on.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
import threading
import time
from collections.abc import Mapping
from typing import Any

import kopf
from kubernetes.client.exceptions import ApiException
from pydantic import ValidationError

from trtllm_operator.api.deployment import LLMDeploymentSpec
from trtllm_operator.api.owners import is_owned_by
from trtllm_operator.api.wire import (
    CUSTOM_METRICS_API_SERVICES,
    DEPLOYMENT_PLURAL,
    GROUP,
    LABEL_DEPLOYMENT,
    LWS_WORKER_INDEX_LABEL,
    SCALED_OBJECT_CRD_NAME,
    VERSION,
)
from trtllm_operator.decide.autoscaler import (
    KEDA_NOT_INSTALLED,
    Remembered,
    admission_refusal,
    custom_metrics_problem,
    decide_external,
    decide_invalid,
    decide_tick,
    external_conflict,
    external_failed,
    external_refused,
    external_rendered,
    failure_is_new,
    retire_builtin,
    state_for_tick,
    undelegated,
)
from trtllm_operator.decide.autoscaling import (
    Decision,
    PodSignals,
    Snapshot,
    decide,
    policy_from_spec,
)
from trtllm_operator.decide.conditions import rfc3339
from trtllm_operator.decide.ownership import control_conflict
from trtllm_operator.decide.policy import url_refusal
from trtllm_operator.decide.serving_params import OwnerRef
from trtllm_operator.handlers import indexes
from trtllm_operator.handlers.plumbing import apply_owned
from trtllm_operator.kube.client import (
    API_SERVICE,
    HPA,
    LLM_DEPLOYMENT,
    POD,
    SCALED_OBJECT,
    Kube,
    Resource,
    api_message,
    default_kube,
)
from trtllm_operator.kube.events import post_event
from trtllm_operator.kube.status import update_conditions
from trtllm_operator.metrics import operator_metrics as om
from trtllm_operator.metrics.prometheus import PrometheusError, prometheus_pods
from trtllm_operator.metrics.scrape import DEFAULT_PORT, pod_state, scrape_pods
from trtllm_operator.render.external_autoscaler import desired_external_autoscaler
from trtllm_operator.render.keda import keda_hpa_name
from trtllm_operator.render.serving import OPENAI_PORT, child_name, uses_openai_frontend
from trtllm_operator.settings import current

__all__ = ["MAX_DECISIONS", "TICK_SECONDS", "autoscale_once", "sync_external_autoscaler"]

log = logging.getLogger(__name__)

#: kopf timer interval (seconds); the evaluation cadence is ``metrics.scrapeIntervalSeconds``.
TICK_SECONDS = 1.0
#: Decisions kept in ``status.autoscaling.lastDecisions``.
MAX_DECISIONS = 10
#: Seconds between re-checks of an HPA / ScaledObject child (drift, deletion by hand).
EXTERNAL_RESYNC_SECONDS = 30.0
#: Triton's metrics port on the serving pods (``--metrics-port``, default 8002; the pods declare it as
#: container port ``metrics``). A module attribute so that in-process tests can point it elsewhere.
METRICS_PORT = DEFAULT_PORT
#: The metrics port of pods served by Triton's OpenAI frontend (``spec.server.api: openai``/``both``):
#: ``GET /metrics`` on the frontend's port, the same Triton families (render.serving.metrics_port).
OPENAI_METRICS_PORT = OPENAI_PORT

_last_tick: dict[str, float] = {}
_last_tick_lock = threading.Lock()
#: The policy state of each built-in-mode LLMDeployment (by UID) after its last evaluation, and the
#: ``status.autoscaling.policyState`` it left. Written only by that object's timer (kopf runs one at a
#: time per object); dropped when the object is deleted or leaves mode builtin.
_remembered: dict[str, Remembered] = {}


# ------------------------------------------------------------------------------ built-in mode
def _serving_pods(kube: Kube, namespace: str, name: str, status: Mapping[str, Any]) -> list[dict[str, Any]]:
    selector = status.get("selector") or f"{LABEL_DEPLOYMENT}={child_name(name)}"
    pods = kube.list(POD, namespace, label_selector=selector)
    return [p for p in pods if (p["metadata"].get("labels") or {}).get(LWS_WORKER_INDEX_LABEL, "0") == "0"]


def _signals(
    spec: LLMDeploymentSpec, namespace: str, pods: list[dict[str, Any]]
) -> tuple[tuple[PodSignals, ...], str | None]:
    """Per-pod signals and, when the source itself failed, why."""
    metrics = spec.autoscaling.metrics
    timeout = float(min(5, max(2, metrics.scrape_interval_seconds)))
    if metrics.source == "prometheus" and metrics.prometheus_url:
        blind = tuple(PodSignals(p["metadata"]["name"], pod_state(p)) for p in pods)
        # The operator pod itself fetches this URL: only where the admin allows (no SSRF).
        field = "spec.autoscaling.metrics.prometheusURL"
        refusal = url_refusal(field, metrics.prometheus_url, current().allowed_prometheus_urls)
        if refusal is not None:
            return blind, f"{refusal.field}: {refusal.message}"
        try:
            return prometheus_pods(metrics.prometheus_url, namespace, pods, timeout=timeout), None
        except PrometheusError as exc:
            return blind, str(exc)
    port = OPENAI_METRICS_PORT if uses_openai_frontend(spec.server.api) else METRICS_PORT
    return scrape_pods(pods, port=port, timeout=timeout), None


def autoscale_once(kube: Kube, namespace: str, name: str, now: float | None = None) -> Decision | None:
    """One built-in autoscaler evaluation of LLMDeployment ``namespace/name``; returns the decision.

    Observe (the object, its pods, their signals) → decide (the policy, then
    :func:`~trtllm_operator.decide.autoscaler.decide_tick`) → act (the scale patch, Events) → write
    (status and conditions). ``now``: seconds since the epoch (default: the wall clock). Returns None
    when the object is gone, autoscaling is off or not in builtin mode, the spec is invalid (reported
    as a condition), or a concurrent write won the scale patch.
    """
    # observe
    obj = kube.get(LLM_DEPLOYMENT, namespace, name)
    if obj is None:
        return None
    now = time.time() if now is None else now
    try:
        spec = LLMDeploymentSpec.model_validate(obj.get("spec") or {})
    except ValidationError as exc:
        log.warning("%s/%s: spec unreadable, not autoscaling: %s", namespace, name, exc)
        return None
    uid = obj["metadata"]["uid"]
    if not spec.autoscaling.enabled or spec.autoscaling.mode != "builtin":
        _remembered.pop(uid, None)
        return None
    status = obj.get("status") or {}
    auto_status = status.get("autoscaling") or {}
    generation = _generation(obj)
    try:
        policy = policy_from_spec(spec.autoscaling)
    except ValueError as exc:
        update_conditions(kube, LLM_DEPLOYMENT, namespace, name, decide_invalid(str(exc), generation))
        return None
    pods = _serving_pods(kube, namespace, name, status)
    signals, source_error = _signals(spec, namespace, pods)
    current = int((obj.get("spec") or {}).get("replicas", 1))

    # decide
    persisted = auto_status.get("policyState")
    interval = float(spec.autoscaling.metrics.scrape_interval_seconds)
    state, problem = state_for_tick(_remembered.get(uid), persisted, now, interval)
    if problem is not None:
        log.warning("%s/%s: %s", namespace, name, problem)
    decision = decide(Snapshot(current, signals), state, policy, now)
    outcome = decide_tick(
        decision,
        source_error=source_error,
        autoscaling_status=auto_status,
        conditions=status.get("conditions"),
        scale_time=rfc3339(dt.datetime.fromtimestamp(now, dt.UTC)),
        generation=generation,
        max_decisions=MAX_DECISIONS,
    )

    # act
    if outcome.scale_to is not None:
        body = {
            "metadata": {"resourceVersion": obj["metadata"]["resourceVersion"]},
            "spec": {"replicas": outcome.scale_to},
        }
        try:
            kube.patch(LLM_DEPLOYMENT, namespace, name, body, subresource="scale")
        except ApiException as exc:
            if exc.status in (404, 409):
                log.info(
                    "%s/%s changed while deciding (HTTP %d); next tick decides again",
                    namespace,
                    name,
                    exc.status,
                )
                return None
            raise
    if outcome.scale_event is not None:
        post_event(kube, obj, outcome.scale_event.reason, outcome.scale_event.message)

    # write (nothing once the object, read fresh, has left mode builtin: retire_builtin cleared it).
    # The decision is applied: its state is the memory now, whether or not the write gets through.
    _remembered[uid] = Remembered(persisted, decision.state)
    written = update_conditions(
        kube,
        LLM_DEPLOYMENT,
        namespace,
        name,
        outcome.conditions,
        status={"autoscaling": outcome.status},
        only_if=lambda fresh: _builtin_enabled(fresh.get("spec") or {}),
        # this tick's copy: an evaluation that changes nothing costs no second GET; a write carries
        # its resourceVersion, so a copy gone stale costs a 409 and a fresh read (only_if re-checked)
        current=obj,
    )
    left = ((written or {}).get("status") or {}).get("autoscaling") or {}
    if written is not None and left.get("policyState") == outcome.status.get("policyState", persisted):
        _remembered[uid] = Remembered(left.get("policyState"), decision.state)
    else:  # not written, or another writer's policyState: the next tick carries over what is there
        _remembered.pop(uid, None)
    for warning in outcome.warnings:
        post_event(kube, obj, warning.reason, warning.message, type_=warning.type)
    om.AUTOSCALER_CURRENT_REPLICAS.labels(namespace, name).set(decision.from_replicas)
    om.AUTOSCALER_DESIRED_REPLICAS.labels(namespace, name).set(decision.to_replicas)
    om.AUTOSCALER_DECISIONS.labels(str(decision.reason)).inc()
    return decision


def _generation(obj: Mapping[str, Any]) -> int | None:
    gen = (obj.get("metadata") or {}).get("generation")
    return int(gen) if gen is not None else None


def _due(uid: str, interval: float, now: float) -> bool:
    with _last_tick_lock:
        last = _last_tick.get(uid)
        if last is not None and now - last < interval - 0.05:
            return False
        _last_tick[uid] = now
        return True


def _autoscaling(spec: Mapping[str, Any]) -> Mapping[str, Any]:
    return (spec or {}).get("autoscaling") or {}


def _builtin_enabled(spec: Mapping[str, Any], **_: Any) -> bool:
    auto = _autoscaling(spec)
    return bool(auto.get("enabled")) and auto.get("mode", "builtin") == "builtin"


@kopf.timer(GROUP, VERSION, DEPLOYMENT_PLURAL, interval=TICK_SECONDS, when=_builtin_enabled)
def autoscaler_tick(name: str, namespace: str | None, uid: str, spec: Mapping[str, Any], **_: Any) -> None:
    """kopf timer: evaluate once per ``metrics.scrapeIntervalSeconds``."""
    if not namespace:
        return
    interval = float((_autoscaling(spec).get("metrics") or {}).get("scrapeIntervalSeconds", 15))
    if not _due(uid, interval, time.monotonic()):
        return
    autoscale_once(default_kube(), namespace, name)


@kopf.on.delete(GROUP, VERSION, DEPLOYMENT_PLURAL, optional=True)
def autoscaler_forget(name: str, namespace: str | None, uid: str, **_: Any) -> None:
    """Drop the in-memory tick time, policy state and per-object metric series of a deleted
    LLMDeployment."""
    with _last_tick_lock:
        _last_tick.pop(uid, None)
    _remembered.pop(uid, None)
    for gauge in (om.AUTOSCALER_CURRENT_REPLICAS, om.AUTOSCALER_DESIRED_REPLICAS):
        with contextlib.suppress(KeyError):
            gauge.remove(namespace or "", name)


# ------------------------------------------------------------------------------ hpa / keda modes
def _apply(kube: Kube, res: Resource, manifest: dict[str, Any], owner: Mapping[str, Any]) -> bool:
    """Create or update the HPA / ScaledObject; False when one of that name exists that this
    LLMDeployment does not own (left alone: the caller reports the conflict)."""
    child = manifest["metadata"]["name"]
    applied = apply_owned(kube, res, manifest, owner_uid=owner["metadata"]["uid"])
    if applied.result == "created":
        post_event(kube, owner, f"{res.kind}Created", f"created {res.kind} {child}")
    return applied.result != "not_owned"


def _remove(kube: Kube, res: Resource, owner: Mapping[str, Any], child: str) -> None:
    """Delete the HPA / ScaledObject ``child`` when ``owner`` owns it, with a Normal
    ``<Kind>Deleted`` Event (the twin of ``<Kind>Created``: the mode changed or autoscaling was
    turned off, and ``kubectl describe`` says where the object went)."""
    namespace, uid = owner["metadata"]["namespace"], owner["metadata"]["uid"]
    if res == SCALED_OBJECT and indexes.crd_installed(SCALED_OBJECT_CRD_NAME) is False:
        return  # no KEDA (the CRD watch cache says so): no ScaledObject to remove
    try:
        live = kube.get(res, namespace, child)
    except ApiException as exc:
        if exc.status == 404:  # the kind itself is not installed (no KEDA)
            return
        raise
    if live is not None and is_owned_by(live, uid):
        kube.delete(res, namespace, child)
        post_event(kube, owner, f"{res.kind}Deleted", _deleted_message(res.kind, child, owner))


def _deleted_message(kind: str, child: str, owner: Mapping[str, Any]) -> str:
    auto = _autoscaling(owner.get("spec") or {})
    why = (
        f"spec.autoscaling.mode is {auto.get('mode', 'builtin')}"
        if auto.get("enabled")
        else "spec.autoscaling.enabled is false"
    )
    return f"deleted {kind} {child}: {why}"


#: The child kind of each external mode.
_EXTERNAL_KINDS: dict[str, Resource] = {"hpa": HPA, "keda": SCALED_OBJECT}


def sync_external_autoscaler(kube: Kube, obj: Mapping[str, Any], *, created: bool = False) -> None:
    """Create, update or remove the HPA / ScaledObject an LLMDeployment's ``spec.autoscaling`` asks for.

    ``created``: the LLMDeployment was just created, so nothing can be its HPA / ScaledObject yet (an
    ownerReference names the owner's UID): nothing is read to be removed.

    Observe (the spec) → decide (:func:`~trtllm_operator.decide.autoscaler.decide_external`, then the
    render; :func:`~trtllm_operator.decide.autoscaler.retire_builtin` on ``obj``'s status) → act
    (apply / delete the children) → write (the ``ScalingActive`` condition, and what the built-in
    autoscaler left: ``status.autoscaling`` removed, ``ScalingLimited`` / ``ScalingActive`` moved on).
    """
    meta = obj["metadata"]
    namespace, name, uid = meta["namespace"], meta["name"], meta["uid"]
    try:
        spec = LLMDeploymentSpec.model_validate(obj.get("spec") or {})
    except ValidationError:
        return
    auto = spec.autoscaling
    plan = decide_external(auto)
    child = child_name(name)
    generation = _generation(obj)
    if not (auto.enabled and auto.mode == "builtin"):
        _remembered.pop(uid, None)
    # What the built-in autoscaler left (decided on this copy: a fresh object has nothing to retire).
    hpa = keda_hpa_name(name) if plan.render == "keda" else child
    retired, stale = (
        ([], {}) if created else retire_builtin(auto, obj.get("status") or {}, hpa=hpa, generation=generation)
    )
    for mode in () if created else plan.remove:
        _remove(kube, _EXTERNAL_KINDS[mode], obj, child)
    if plan.render is None:
        if retired or stale:
            update_conditions(kube, LLM_DEPLOYMENT, namespace, name, retired, status=stale)
        return
    owner = OwnerRef(name, uid)
    kind = _EXTERNAL_KINDS[plan.render]
    try:
        manifest = desired_external_autoscaler(name, namespace, owner, auto)
        # plan.render is set: the manifest is the mode's child
        owned = manifest is None or _apply(kube, kind, manifest, obj)
    except ValueError as exc:
        conditions, warning = external_failed("InvalidSpec", str(exc), generation)
    except ApiException as exc:
        refusal = admission_refusal(exc.status or 0, api_message(exc))
        if refusal is not None:
            # e.g. KEDA's webhooks: the target is already scaled by another HPA or ScaledObject. Not
            # raised (kopf would retry it forever, and say nothing on the object): the condition and a
            # Warning say why, and the resync timer tries again. Whether a child of ours stands (the
            # refused request was its change, not its creation) is read now: what stays applied.
            conditions, warning = external_refused(
                kind.kind,
                child,
                refusal,
                EXTERNAL_RESYNC_SECONDS,
                generation,
                standing=_controls(kube.get(kind, namespace, child), kind, uid),
            )
        elif exc.status == 404 and plan.render == "keda":
            conditions, warning = external_failed("KEDANotInstalled", KEDA_NOT_INSTALLED, generation)
        else:
            raise
    else:
        # mode hpa: the HPA is applied, but says nothing on this object when no custom metrics API
        # serves its Pods metrics (fresh-user trial 46 T3): ScalingActive says so instead of True.
        hpa_mode = owned and plan.render == "hpa"
        problem = custom_metrics_problem(child, _custom_metrics_api(kube)) if hpa_mode else None
        if owned and problem is None:
            rendered = external_rendered(plan.render, child, generation)
            update_conditions(kube, LLM_DEPLOYMENT, namespace, name, rendered + retired, status=stale)
            return
        if problem is not None:
            reason, message = problem
            conditions, warning = external_failed(reason, message, generation)
        else:
            conditions, warning = external_conflict(kind.kind, child, generation)
    # Nothing the operator rendered scales it (unless a refused change left the child standing with
    # ScalingActive True: undelegated keeps ScalingDelegated then): ScalingLimited must not name an HPA
    # that decides, and the Warning goes out once per change, not on every resync (fresh-user trial 35).
    status = obj.get("status") or {}
    limited = undelegated(retired, status, conditions[0])
    # Whether the failure is new is decided on the copy the condition write was computed from, not on
    # ``obj``: two syncs of one change (the create handler and the resync timer's first tick, both
    # reading a copy without the condition) write it once — the status write is guarded by the copy
    # it read, so the second reads again and finds nothing to write (kube/status.py patch_status) —
    # and so post one Warning, not two.
    read: list[Mapping[str, Any]] = []

    def keep_copy(fresh: Mapping[str, Any]) -> bool:
        read.append(fresh)
        return True

    update_conditions(
        kube,
        LLM_DEPLOYMENT,
        namespace,
        name,
        conditions + limited,
        status=stale,
        only_if=keep_copy,
    )
    if read and failure_is_new(read[-1].get("status") or {}, conditions[0]):
        post_event(kube, obj, warning.reason, warning.message, type_=warning.type)


def _custom_metrics_api(kube: Kube) -> dict[str, dict[str, Any]]:
    """The custom metrics API's APIServices, name → ``Available`` condition
    (:func:`~trtllm_operator.handlers.indexes.custom_metrics_api_services`): from the operator's watch
    of those two APIServices, as the KEDA check reads the CRDs' (issue 20: no GET per resync); read
    only outside a running operator (a sync called directly)."""
    cached = indexes.custom_metrics_api_services()
    if cached is not None:
        return cached
    found: dict[str, dict[str, Any]] = {}
    for name in CUSTOM_METRICS_API_SERVICES:
        service = kube.get(API_SERVICE, None, name)
        if service is not None:
            conditions = (service.get("status") or {}).get("conditions") or []
            available: Mapping[str, Any] = next((c for c in conditions if c.get("type") == "Available"), {})
            found[name] = {k: available[k] for k in ("status", "reason", "message") if k in available}
    return found


def _controls(live: Mapping[str, Any] | None, kind: Resource, uid: str) -> bool:
    """Whether ``live`` (the HPA / ScaledObject as read, None when absent) is this LLMDeployment's own."""
    return live is not None and control_conflict(live, kind.kind, uid) is None


def _external_mode(spec: Mapping[str, Any], **_: Any) -> bool:
    return _autoscaling(spec).get("mode", "builtin") in ("hpa", "keda")


def _sync_by_name(namespace: str | None, name: str, *, created: bool = False) -> None:
    """:func:`sync_external_autoscaler` on the LLMDeployment's watch-cached copy (a GET without a
    cache): the spec only selects what to apply or remove; every child write reads the child fresh
    (:func:`~trtllm_operator.handlers.plumbing.apply_owned`, :func:`_remove`) and the condition write
    reads the object fresh (:func:`~trtllm_operator.kube.status.update_conditions`). kopf runs the
    index before the handlers of the same watch event, so an update handler sees the new spec."""
    if not namespace:
        return
    kube = default_kube()
    obj = indexes.get(kube, LLM_DEPLOYMENT, namespace, name)
    if obj is not None:
        sync_external_autoscaler(kube, obj, created=created)


@kopf.on.resume(GROUP, VERSION, DEPLOYMENT_PLURAL)
@kopf.on.create(GROUP, VERSION, DEPLOYMENT_PLURAL)
@kopf.on.update(GROUP, VERSION, DEPLOYMENT_PLURAL, field="spec.autoscaling")
def autoscaler_mode_changed(name: str, namespace: str | None, reason: str = "", **_: Any) -> None:
    """(Re)render or remove the HPA / ScaledObject whenever ``spec.autoscaling`` changes.

    On a resume with the built-in autoscaler (no external child wanted), nothing is read: kopf
    resumes an object only when its spec is what it last handled with every handler done (kopf
    1.45.2 ``kopf/_core/intents/causes.py`` ``detect_changing_cause``), so a removal this handler
    owed was done before; the HPA GET per LLMDeployment made a restart at scale slower (issue 20)."""
    if reason == kopf.Reason.RESUME and not _external_mode(_cached_spec(namespace, name)):
        return
    _sync_by_name(namespace, name, created=reason == "create")


def _cached_spec(namespace: str | None, name: str) -> Mapping[str, Any]:
    if not namespace:
        return {}
    if not indexes.cached(LLM_DEPLOYMENT):
        obj: Mapping[str, Any] | None = indexes.get(default_kube(), LLM_DEPLOYMENT, namespace, name)
    else:
        obj = indexes.peek(LLM_DEPLOYMENT, namespace, name)  # read only, not copied
    return (obj or {}).get("spec") or {}


@kopf.timer(GROUP, VERSION, DEPLOYMENT_PLURAL, interval=EXTERNAL_RESYNC_SECONDS, when=_external_mode)
def autoscaler_external_resync(name: str, namespace: str | None, **_: Any) -> None:
    """Put back an HPA / ScaledObject deleted or edited by hand."""
    _sync_by_name(namespace, name)
