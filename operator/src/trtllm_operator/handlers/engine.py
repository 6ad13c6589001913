"""LLMEngine controller: kopf wiring and I/O around the pure decisions in ``decide/engine.py``.

One idempotent :func:`reconcile` per LLMEngine, called from

* ``on.create`` / ``on.update`` / ``on.resume`` (a new or changed spec, an operator restart),
* a slow loop over every LLMEngine (``resync_seconds``: drift — a child deleted or changed behind
  our back; one loop, not a kopf timer per object, so no finalizer:
  :func:`~trtllm_operator.handlers.plumbing.resync_forever`),
* watch events of builder Jobs and pods (progress, completion, failure, unschedulable pods): the
  owning LLMEngines are reconciled, and when a build ends, the LLMEngines waiting in the queue.

It reads the world (engine — the watch-cached copy, proven current before any write:
:func:`~trtllm_operator.handlers.plumbing.cache_first` —, cache index entry, builder Job, pods,
queue), asks
:func:`~trtllm_operator.decide.engine.decide_engine` what to do, performs the actions, writes the
status (``update_conditions``: merge by type, optimistic concurrency) and posts an Event when the
phase or reason changes. Before deciding, a running builder Job of a key the LLMEngine no longer
wants is stopped when no other LLMEngine wants it (:func:`stop_superseded_builds`); a succeeded
build's Job gets its TTL once its artifact is recorded
(:class:`~trtllm_operator.decide.engine_jobs.ExpireJob`). Reconciles of one LLMEngine are
serialised by a per-object lock; starting builds is serialised operator-wide, so the
concurrent-build limit holds.
"""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import json
import logging
import os
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from decimal import Decimal
from typing import Any

import kopf
import yaml
from kubernetes.client.exceptions import ApiException
from kubernetes.utils import parse_quantity

from engine_builder.contract import BuildSpec
from engine_builder.planner import GPUSpec, PlanInputError, load_catalog_extension, lookup
from trtllm_operator.api import CONDITION_STORAGE_EXPANDED
from trtllm_operator.api.engine import LLMEngineSpec
from trtllm_operator.api.owners import is_controlled_by, is_owned_by, owner_names
from trtllm_operator.api.wire import (
    ANNOTATION_ENGINE_KEY,
    BUILD_SPEC_DATA_KEY,
    BUILDER_CONTAINER,
    COMPONENT_BUILDER,
    ENGINE_PLURAL,
    GROUP,
    JOB_NAME_LABEL,
    LABEL_COMPONENT,
    LABEL_MANAGED_BY,
    MANAGED_BY,
    VERSION,
)
from trtllm_operator.decide.compatibility import NodeGPUs, gpu_product_aliases
from trtllm_operator.decide.conditions import Condition, rfc3339
from trtllm_operator.decide.engine import (
    R_PVC_EXPANSION_REFUSED,
    R_PVC_EXPANSION_REQUESTED,
    AdoptJob,
    BuildQueue,
    CreateBuild,
    EngineDecision,
    EngineObservation,
    EnsurePVC,
    RecordArtifact,
    ReplaceBuild,
    build_queue_of,
    build_slots,
    decide_conflict,
    decide_engine,
    decide_fetching,
    decide_invalid,
    queue_order,
)
from trtllm_operator.decide.engine_cache import parse_record
from trtllm_operator.decide.engine_failure import job_condition, unschedulable_message
from trtllm_operator.decide.engine_hints import ClaimState, builder_claims, claim_state
from trtllm_operator.decide.engine_jobs import (
    R_BUILD_STOPPED,
    ExpireJob,
    is_finished,
    superseded_builds,
    superseded_why,
)
from trtllm_operator.decide.engine_progress import BuildProgress, parse_progress
from trtllm_operator.decide.engine_spec import InvalidEngine, PreparedEngine, hf_config_name, prepare_engine
from trtllm_operator.decide.ownership import ChildConflict, marker_conflict
from trtllm_operator.decide.pod_problems import stuck_containers
from trtllm_operator.decide.policy import (
    Refusal,
    engine_refusal,
    refusal_text,
    secret_references,
    secret_refusal,
)
from trtllm_operator.decide.pvc_growth import PVCGrowth, pvc_growth, refusal_message, storage_expanded
from trtllm_operator.events import ARTIFACT_RECORDED
from trtllm_operator.handlers import indexes
from trtllm_operator.handlers.plumbing import (
    OBJECT_LOCKS,
    add_owner,
    cache_first,
    forget_claim,
    handled_by_kopf,
    node_gpus_of,
    release_claim,
    set_owner,
    start_resync,
    write_outcome,
)
from trtllm_operator.handlers.release import stamp_field, unready_reason, unstamped_reason
from trtllm_operator.kube import (
    CONFIG_MAP,
    EVENT,
    JOB,
    LLM_DEPLOYMENT,
    LLM_ENGINE,
    POD,
    PVC,
    SECRET,
    Kube,
    default_kube,
    post_event,
)
from trtllm_operator.kube.client import ReadOnlyKube, api_message
from trtllm_operator.logging import object_context
from trtllm_operator.metrics.operator_metrics import (
    BUILD_STAGE_DURATION,
    BUILDS,
    BUILDS_FINISHED,
    ENGINE_CACHE_LOOKUPS,
    RECONCILE_DURATION,
    RECONCILES,
    observe_resume,
)
from trtllm_operator.render.builder_job import (
    builder_identity,
    cache_entry_labels,
    desired_artifact_pvc,
    desired_build_spec_configmap,
    desired_builder_job,
    desired_cache_entry,
    engine_owner,
    storage_labels,
)
from trtllm_operator.settings import Settings, current

log = logging.getLogger(__name__)

#: Labels every builder Job and pod carries (watch filter and list selector).
BUILDER_LABELS = {LABEL_MANAGED_BY: MANAGED_BY, LABEL_COMPONENT: COMPONENT_BUILDER}
BUILDER_SELECTOR = ",".join(f"{k}={v}" for k, v in BUILDER_LABELS.items())

#: Held while counting running builds and creating a Job, so the limit holds across threads.
_start_lock = threading.Lock()


# ----------------------------------------------------------------------------- inputs
_catalog_cache: dict[tuple[str, str | None, str | None], tuple[float, dict[str, GPUSpec]]] = {}


def catalog_extension(kube: Kube, settings: Settings) -> dict[str, GPUSpec]:
    """GPU catalog extension from the settings' file and ConfigMap (re-read at most every 60 s).

    A broken extension is logged and ignored (the built-in catalog still works): the operator
    never stops reconciling because of its own configuration.
    """
    now = time.monotonic()
    cache_key = (settings.operator_namespace, settings.gpu_catalog_configmap, settings.gpu_catalog_file)
    cached = _catalog_cache.get(cache_key)
    if cached is not None and now - cached[0] < 60:
        return cached[1]
    extra: dict[str, GPUSpec] = {}
    sources: list[tuple[str, str]] = []
    if settings.gpu_catalog_file:
        try:
            with open(settings.gpu_catalog_file, encoding="utf-8") as fh:
                sources.append((settings.gpu_catalog_file, fh.read()))
        except OSError as exc:
            log.warning("GPU catalog file %s unreadable: %s", settings.gpu_catalog_file, exc)
    if settings.gpu_catalog_configmap:
        try:
            cm = kube.get(CONFIG_MAP, settings.operator_namespace, settings.gpu_catalog_configmap)
        except ApiException as exc:
            log.warning(
                "GPU catalog ConfigMap %s/%s (operator setting gpuCatalogConfigmap) unreadable: %s %s",
                settings.operator_namespace,
                settings.gpu_catalog_configmap,
                exc.status,
                exc.reason,
            )
            cm = None
        for key, text in sorted(((cm or {}).get("data") or {}).items()):
            sources.append((f"configmap/{settings.gpu_catalog_configmap}/{key}", text))
    for where, text in sources:
        try:
            extra.update(load_catalog_extension(text))
        except (PlanInputError, yaml.YAMLError) as exc:
            log.warning("ignoring GPU catalog extension %s: %s", where, exc)
    if extra:
        log.debug(
            "GPU catalog extension: %s (%s)", ", ".join(sorted(extra)), ", ".join(w for w, _ in sources)
        )
    _catalog_cache[cache_key] = (now, extra)
    return extra


def _node_gpus(kube: Kube, spec: Mapping[str, Any], catalog_extra: Mapping[str, GPUSpec]) -> NodeGPUs | None:
    """GPUs per node of the engine's GPU product, from the nodes (the catalog's gpusPerNode when no
    node has it yet); None for a product the catalog does not know (prepare_engine refuses it)."""
    product = str((spec.get("gpu") or {}).get("product") or "")
    try:
        gpu = lookup(product, catalog_extra)
    except PlanInputError:
        return None
    return node_gpus_of(kube, [product, *gpu_product_aliases(product)], gpu.gpus_per_node)


#: config.json files read, per (endpoint, repo, revision, sha256 of the token): a config fetched with
#: one namespace's token is never served to an engine without it.
_hf_configs: dict[tuple[str, str, str | None, str], Mapping[str, Any]] = {}
#: Failed fetches, per the same key: (monotonic time, why); retried after HF_RETRY_SECONDS.
_hf_failures: dict[tuple[str, str, str | None, str], tuple[float, str]] = {}
HF_RETRY_SECONDS = 60.0


def hub_token(kube: Kube, namespace: str, spec: Mapping[str, Any]) -> tuple[str | None, str | None]:
    """The Hugging Face token the builder gets (``spec.model.credentialsSecretRef``) and why there is
    none. The value is read only from a Secret that carries the opt-in label (checked on its metadata
    first, :func:`~trtllm_operator.decide.policy.secret_refusal`): the same trust rule that lets the
    Secret into a builder pod lets the operator use it for the same model (docs/security.md)."""
    ref = (spec.get("model") or {}).get("credentialsSecretRef") or {}
    name, key = ref.get("name"), ref.get("key")
    if not name or not key:
        return None, None
    refusal = secret_refusal(
        "spec.model.credentialsSecretRef.name", name, namespace, kube.get_metadata(SECRET, namespace, name)
    )
    if refusal is not None:
        return None, refusal.message
    secret = kube.get(SECRET, namespace, name) or {}
    value = (secret.get("data") or {}).get(key)
    if value is None:
        return None, f"Secret {namespace}/{name} has no key {key!r} (spec.model.credentialsSecretRef.key)"
    return base64.b64decode(value).decode("utf-8").strip(), None


def hf_config_for(
    spec: Mapping[str, Any],
    settings: Settings,
    token: str | None = None,
    before_fetch: Callable[[str], None] | None = None,
) -> tuple[Mapping[str, Any] | None, str | None]:
    """The model's ``config.json`` if the operator can see it (settings ``hf_config_dir``, then
    ``hf_config_fetch`` through huggingface_hub with ``token`` at ``hf_endpoint``), else None and
    why. Only hf:// sources. Successes are cached; a failed fetch is retried after
    :data:`HF_RETRY_SECONDS`. ``before_fetch`` is called with what is fetched from where just
    before a request goes to the Hub."""
    model = spec.get("model") or {}
    source = str(model.get("source") or "")
    if not source.startswith("hf://"):
        return None, None
    repo = source[len("hf://") :]
    revision = model.get("revision")
    name = hf_config_name(source)
    if settings.hf_config_dir and name:
        path = os.path.join(settings.hf_config_dir, name)
        if os.path.exists(path):
            found = _read_config(path, repo)
            if found is not None:
                return found, None
    if not settings.hf_config_fetch:
        return None, "fetching config.json from the Hub is off (operator setting hfConfigFetch)"
    endpoint = settings.hf_endpoint or ""
    cache_key = (endpoint, repo, revision, hashlib.sha256((token or "").encode()).hexdigest())
    if cache_key in _hf_configs:
        return _hf_configs[cache_key], None
    failed = _hf_failures.get(cache_key)
    if failed is not None and time.monotonic() - failed[0] < HF_RETRY_SECONDS:
        return None, failed[1]
    from huggingface_hub import constants, hf_hub_download  # noqa: PLC0415 - only with hf_config_fetch

    if before_fetch is not None:
        where = settings.hf_endpoint or constants.ENDPOINT
        before_fetch(f"fetching config.json of {repo} from the Hub ({where}) for the capacity plan")
    try:
        with tempfile.TemporaryDirectory(prefix="hf-config-") as cache:
            path = hf_hub_download(
                repo,
                "config.json",
                revision=revision,
                token=token or False,  # False: never a token from the operator's own environment
                endpoint=settings.hf_endpoint,
                cache_dir=cache,
            )
            found = _read_config(path, repo)
    except Exception as exc:  # network, gated repo, wrong token, missing file: say so, plan later
        first = (str(exc).strip().splitlines() or [""])[0]
        why = f"config.json of {repo} not fetched from the Hub ({type(exc).__name__}: {first})"
        if token is None:
            why += "; no token was sent (spec.model.credentialsSecretRef)"
        log.info("%s", why)
        _hf_failures[cache_key] = (time.monotonic(), why)
        return None, why
    if found is None:
        return None, f"config.json of {repo} is not a JSON object of at most {MAX_CONFIG_BYTES} bytes"
    _hf_failures.pop(cache_key, None)
    _hf_configs[cache_key] = found
    return found, None


#: Largest config.json the operator reads (bytes); real ones are a few KiB.
MAX_CONFIG_BYTES = 1 << 20


def _read_config(path: str, repo: str) -> Mapping[str, Any] | None:
    """A model's config.json, or None when it is too large or not a JSON object (the builder then
    plans at its plan stage, with its own limits)."""
    if os.path.getsize(path) > MAX_CONFIG_BYTES:
        log.warning("config.json of %s is larger than %d bytes; not read", repo, MAX_CONFIG_BYTES)
        return None
    with open(path, encoding="utf-8") as fh:
        doc = json.load(fh)
    return doc if isinstance(doc, dict) else None


def _watched(settings: Settings) -> list[str | None]:
    return list(settings.namespaces) if settings.namespaces else [None]


def _is_active(job: Mapping[str, Any]) -> bool:
    return job_condition(job, "Complete") is None and job_condition(job, "Failed") is None


def _queue_inputs(
    kube: Kube, namespaces: Sequence[str | None]
) -> tuple[list[Mapping[str, Any]], list[Mapping[str, Any]], list[Mapping[str, Any]]]:
    """The LLMEngines, builder Jobs (ended ones too: when a namespace's latest build ended is part of
    the queue's order) and, where a Job is active, builder pods in ``namespaces``."""
    engines: list[Mapping[str, Any]] = []
    jobs: list[Mapping[str, Any]] = []
    pods: list[Mapping[str, Any]] = []
    for ns in namespaces:
        here = kube.list(JOB, ns, label_selector=BUILDER_SELECTOR)
        jobs += here
        if any(_is_active(j) for j in here):
            pods += kube.list(POD, ns, label_selector=BUILDER_SELECTOR)
        engines += kube.list(LLM_ENGINE, ns)
    return engines, jobs, pods


def build_queue(kube: Kube, settings: Settings, engine: Mapping[str, Any]) -> BuildQueue:
    """The build queue as ``engine`` sees it over the watched namespaces
    (:func:`~trtllm_operator.decide.engine.build_queue_of`)."""
    engines, jobs, pods = _queue_inputs(kube, _watched(settings))
    return build_queue_of(engine, engines, jobs, pods, settings.max_concurrent_builds)


# ----------------------------------------------------------------------------- reconcile
def reconcile(namespace: str, name: str, *, kube: Kube | None = None) -> EngineDecision | None:
    """Bring one LLMEngine's children and status in line with its spec. Idempotent.

    Returns the decision (None when the object is gone or being deleted). Raises ApiException on
    API errors (the kopf handlers turn that into a delayed retry).
    """
    kube = kube or default_kube(current().field_manager)
    started = time.monotonic()
    result = "error"
    try:
        with object_context(LLM_ENGINE.kind, namespace, name):
            decision = _reconcile_locked(kube, namespace, name)
        result = "invalid" if decision is not None and decision.status.get("engineKey") is None else "success"
        return decision
    finally:
        RECONCILES.labels(kind=LLM_ENGINE.kind, result=result).inc()
        RECONCILE_DURATION.labels(kind=LLM_ENGINE.kind).observe(time.monotonic() - started)


def _reconcile_locked(kube: Kube, namespace: str, name: str) -> EngineDecision | None:
    with OBJECT_LOCKS.hold(LLM_ENGINE.kind, namespace, name):
        # On the cached copy, proven current before any write (plumbing.cache_first): status
        # transitions and their Events are decided against the last status written.
        return cache_first(kube, LLM_ENGINE, namespace, name, lambda k, obj: _reconcile_object(k, name, obj))


def _reconcile_object(kube: Kube, name: str, engine: dict[str, Any] | None) -> EngineDecision | None:
    if engine is None or engine["metadata"].get("deletionTimestamp"):
        return None
    namespace = str(engine["metadata"]["namespace"])
    settings = current()
    spec = engine.get("spec") or {}
    catalog_extra = catalog_extension(kube, settings)
    token, no_token = hub_token(kube, namespace, spec) if settings.hf_config_fetch else (None, None)

    def fetching(message: str) -> None:
        # the fetch may take long (an unreachable Hub: ~23 s of retries): say so first
        early = decide_fetching(
            int(engine["metadata"].get("generation") or 0), engine.get("status") or {}, message
        )
        if early is not None:
            _write(kube, engine, early, status_extra={})
            fresh = kube.get(LLM_ENGINE, namespace, name)
            if fresh is not None:
                engine.update(fresh)
                if isinstance(kube, ReadOnlyKube):  # the copy decided on is now this one
                    kube.version = fresh["metadata"].get("resourceVersion")

    hf_config, why = hf_config_for(spec, settings, token, before_fetch=fetching)
    prepared = prepare_engine(
        name,
        spec,
        catalog_extra=catalog_extra,
        hf_config=hf_config,
        node_gpus=_node_gpus(kube, spec, catalog_extra),
        config_note=f"{why}; {no_token}" if why and no_token else why,
        namespace=namespace,
    )
    generation = int(engine["metadata"].get("generation") or 0)
    status = engine.get("status") or {}
    if isinstance(prepared, PreparedEngine):
        refusal = policy_refusal(kube, settings, namespace, prepared.spec)
        if refusal is not None:
            message = refusal_text(refusal, LLM_ENGINE.kind, settings.resync_seconds)
            prepared = InvalidEngine(refusal.field, message, refusal.reason)
    if not isinstance(prepared, PreparedEngine):
        why = superseded_why(name, new_key_short=None, invalid_reason=prepared.reason)
        stop_superseded_builds(kube, engine, wanted_job=None, why=why)
        obs = EngineObservation(generation, status, None, None, [], _no_queue(settings))
        decision = decide_invalid(prepared, obs, settings.resync_seconds)
        _write(kube, engine, decision, status_extra=stamp_field())
        return decision
    why = superseded_why(name, new_key_short=prepared.key_short)
    stop_superseded_builds(kube, engine, wanted_job=prepared.job_name, why=why)
    decision = _decide_and_act(
        kube, settings=settings, engine=engine, prepared=prepared, generation=generation, status=status
    )
    # status.usedBy is written by the LLMDeployment controller (one writer per field). A whole
    # reconcile's outcome carries this release's stamp (handlers/release.py).
    _write(kube, engine, decision, status_extra=stamp_field())
    if "Queued" in (decision.phase, status.get("phase")):
        update_build_gauges(kube)
    return decision


def _decide_and_act(
    kube: Kube,
    *,
    settings: Settings,
    engine: Mapping[str, Any],
    prepared: PreparedEngine,
    generation: int,
    status: Mapping[str, Any],
) -> EngineDecision:
    ns = engine["metadata"]["namespace"]
    uid = engine["metadata"]["uid"]
    # The cache entry and the builder Job come from the watch caches; when they show neither, a
    # build would start (the expensive action): both are read again from the API server first.
    entry = indexes.get(kube, CONFIG_MAP, ns, prepared.cache_name)
    job = indexes.get(kube, JOB, ns, prepared.job_name)
    if entry is None and job is None and indexes.cached(JOB):
        entry = kube.get(CONFIG_MAP, ns, prepared.cache_name)
        job = kube.get(JOB, ns, prepared.job_name)
    pvc = (
        kube.get(PVC, ns, prepared.storage.claim_name or "") if prepared.storage.created_by_operator else None
    )
    spec_cm = kube.get(CONFIG_MAP, ns, prepared.job_name) if entry is None else None
    conflict = untrusted_child(prepared, entry=entry, job=job, pvc=pvc, spec_cm=spec_cm)
    obs = EngineObservation(generation, status, None, None, [], _no_queue(settings))
    if conflict is not None:
        decision = decide_conflict(prepared, conflict, obs, settings.resync_seconds)
        return decision
    record = parse_record(entry)
    pods = kube.list(POD, ns, label_selector=f"{JOB_NAME_LABEL}={prepared.job_name}") if job else []
    owns = job is None or is_owned_by(job, uid)
    now = rfc3339(dt.datetime.now(dt.UTC))
    progress = _progress.get((ns, prepared.job_name)) if job is not None else None
    claims = observe_claims(kube, ns, prepared) if unschedulable_message(pods) is not None else {}
    outdated = None
    if job is not None and is_controlled_by(job, uid) and _is_active(job) and not _started(pods):
        outdated = sizing_change(job, desired_builder_job(engine, prepared, settings))
    obs = EngineObservation(
        generation,
        status,
        record,
        job,
        pods,
        _no_queue(settings),
        owns,
        pvc is not None,
        progress,
        claims,
        outdated,
    )
    sync_reclaim(kube, engine, prepared, pvc=pvc, entry=entry)
    release_shared_claims(kube, engine, prepared)
    ttl = settings.builder_succeeded_job_ttl_seconds
    storage = grow_claim(kube, engine, prepared, pvc=pvc, status=status, generation=generation)
    if record is None and job is None:
        # Counting running builds and creating ours must not interleave with another reconcile.
        with _start_lock:
            obs = replace(obs, queue=build_queue(kube, settings, engine))
            decision = decide_engine(prepared, obs, now=now, job_ttl_seconds=ttl)
            decision.conditions.extend(storage)
            _act(kube, settings, engine, prepared, decision)
            if any(isinstance(a, CreateBuild) for a in decision.actions):
                ENGINE_CACHE_LOOKUPS.labels(result="miss").inc()  # no artifact: a build starts
            return decision
    decision = decide_engine(prepared, obs, now=now, job_ttl_seconds=ttl)
    decision.conditions.extend(storage)
    if decision.phase != "Building":
        _progress.pop((ns, prepared.job_name), None)
        _progress_read_at.pop((ns, engine["metadata"]["name"]), None)
    _act(kube, settings, engine, prepared, decision)
    return decision


def grow_claim(
    kube: Kube,
    engine: Mapping[str, Any],
    prepared: PreparedEngine,
    *,
    pvc: Mapping[str, Any] | None,
    status: Mapping[str, Any],
    generation: int,
) -> list[Condition]:
    """Raise the operator-created claim's storage request to ``spec.storage.createPVC.size`` when it
    is smaller (decide.pvc_growth; ``pvc`` passed :func:`untrusted_child`: it is this operator's),
    and the ``StorageExpanded`` condition saying how that went. The API server's refusal (403 from
    the PersistentVolumeClaimResize admission plugin, 422 from validation) is reported, never raised."""
    growth = pvc_growth(prepared, pvc)
    refusal: str | None = None
    previous = status.get("conditions") or []
    if growth is not None:
        refusal = _patch_request(kube, engine["metadata"]["namespace"], growth, pvc or {})
        was: Mapping[str, Any] = next(
            (c for c in previous if c.get("type") == CONDITION_STORAGE_EXPANDED), {}
        )
        if refusal is not None and was.get("reason") != R_PVC_EXPANSION_REFUSED:
            post_event(kube, engine, R_PVC_EXPANSION_REFUSED, refusal, type_="Warning")
        elif refusal is None:
            message = f"PersistentVolumeClaim {growth.claim}: storage request {growth.have} → {growth.want}"
            post_event(kube, engine, R_PVC_EXPANSION_REQUESTED, message)
    cond = storage_expanded(
        prepared,
        pvc,
        grown=growth is not None and refusal is None,
        refusal=refusal,
        previous=previous,
        generation=generation,
    )
    return [cond] if cond is not None else []


def _patch_request(kube: Kube, namespace: str, growth: PVCGrowth, pvc: Mapping[str, Any]) -> str | None:
    """PATCH the claim's ``spec.resources.requests.storage``; the refusal message, or None."""
    try:
        kube.patch(
            PVC, namespace, growth.claim, {"spec": {"resources": {"requests": {"storage": growth.want}}}}
        )
    except ApiException as exc:
        if exc.status not in (403, 422):
            raise
        storage_class = (pvc.get("spec") or {}).get("storageClassName")
        return refusal_message(growth, api_message(exc), str(storage_class) if storage_class else None)
    log.info(
        "PersistentVolumeClaim %s/%s: storage request %s → %s",
        namespace,
        growth.claim,
        growth.have,
        growth.want,
    )
    return None


def _started(pods: list[dict[str, Any]]) -> bool:
    """Whether any pod of the Job was scheduled (has a node) or has left Pending."""
    return any(
        (p.get("spec") or {}).get("nodeName") or (p.get("status") or {}).get("phase") not in (None, "Pending")
        for p in pods
    )


def _requests(job: Mapping[str, Any]) -> dict[str, Decimal]:
    """The builder container's requests and limits, as ``requests.<name>`` / ``limits.<name>`` →
    quantity (parsed: the API server may write a quantity in another canonical form)."""
    containers = ((((job.get("spec") or {}).get("template") or {}).get("spec") or {}).get("containers")) or []
    out: dict[str, Decimal] = {}
    for c in containers:
        if c.get("name") != BUILDER_CONTAINER:
            continue
        for kind in ("requests", "limits"):
            for name, value in ((c.get("resources") or {}).get(kind) or {}).items():
                out[f"{kind}.{name}"] = Decimal(str(parse_quantity(value)))  # type: ignore[no-untyped-call]
    return out


def sizing_change(live: Mapping[str, Any], desired: Mapping[str, Any]) -> str | None:
    """What differs between the builder container's requests/limits of the live Job and of the Job
    the current spec renders (``limits.nvidia.com/gpu 16 → 1``), or None. A Job's pod template is
    immutable, so a change means a new Job."""
    have, want = _requests(live), _requests(desired)
    changed = [
        f"{k} {_fmt(have.get(k))} → {_fmt(want.get(k))}"
        for k in sorted(set(have) | set(want))
        if have.get(k) != want.get(k)
    ]
    return ", ".join(changed) or None


def _fmt(value: Decimal | None) -> str:
    return "unset" if value is None else format(value.normalize(), "f")


def observe_claims(kube: Kube, namespace: str, prepared: PreparedEngine) -> dict[str, ClaimState]:
    """The PersistentVolumeClaims the builder mounts (:func:`builder_claims`), each with its phase
    and the newest Event about it (the PV controller's binding or provisioning reason). Read only
    while the builder pod is unschedulable. Events that cannot be listed (RBAC) leave the reason out."""
    states: dict[str, ClaimState] = {}
    for claim in builder_claims(prepared):
        pvc = kube.get(PVC, namespace, claim)
        events: list[dict[str, Any]] = []
        if pvc is not None:
            selector = f"involvedObject.kind=PersistentVolumeClaim,involvedObject.name={claim}"
            try:
                events = kube.list(EVENT, namespace, field_selector=selector)
            except ApiException as exc:
                log.debug("events of PVC %s/%s not listed: %s", namespace, claim, exc.reason)
        states[claim] = claim_state(pvc, events)
    return states


# ----------------------------------------------------------------------------- trust and reclaim
def policy_refusal(kube: Kube, settings: Settings, namespace: str, spec: LLMEngineSpec) -> Refusal | None:
    """What the admin does not allow in ``spec`` (:func:`~trtllm_operator.decide.policy.engine_refusal`);
    reads only the metadata of the Secrets it references (:meth:`Kube.get_metadata`)."""
    secrets = {name: kube.get_metadata(SECRET, namespace, name) for _, name in secret_references(spec)}
    return engine_refusal(
        spec,
        namespace,
        secrets=secrets,
        allowed_image_registries=settings.allowed_image_registries,
        allowed_s3_endpoints=settings.allowed_s3_endpoints,
    )


def untrusted_child(
    prepared: PreparedEngine,
    *,
    entry: Mapping[str, Any] | None,
    job: Mapping[str, Any] | None,
    pvc: Mapping[str, Any] | None,
    spec_cm: Mapping[str, Any] | None,
) -> ChildConflict | None:
    """The first object under this engine's names the operator must not trust
    (:mod:`trtllm_operator.decide.ownership`): a cache entry, builder Job or build-spec ConfigMap
    without the builder's labels and full-key annotation, a builder Job or build-spec ConfigMap not
    owned by an LLMEngine (a shared build outlives the LLMEngine that started it, so a remaining
    non-controller owner is enough) or a build spec for another key, an artifact PVC
    without the labels the operator gave it."""
    key = {ANNOTATION_ENGINE_KEY: prepared.key}
    if entry is not None:
        labels = cache_entry_labels(prepared.key, prepared.storage.storage_id)
        conflict = marker_conflict(entry, "ConfigMap", labels=labels, annotations=key)
        if conflict is not None:
            return conflict
    if job is not None:
        conflict = marker_conflict(job, "Job", labels=builder_identity(prepared), annotations=key)
        if conflict is None and not owner_names(job, LLM_ENGINE.kind):
            conflict = ChildConflict("Job", prepared.job_name, "is not owned by an LLMEngine")
        if conflict is not None:
            return conflict
    if spec_cm is not None:
        conflict = marker_conflict(spec_cm, "ConfigMap", labels=builder_identity(prepared))
        if conflict is None and not owner_names(spec_cm, LLM_ENGINE.kind):
            conflict = ChildConflict("ConfigMap", prepared.job_name, "is not owned by an LLMEngine")
        if conflict is None and not _same_build(spec_cm, prepared):
            why = "holds a build spec for another engine key or artifact location"
            conflict = ChildConflict("ConfigMap", prepared.job_name, why)
        if conflict is not None:
            return conflict
    if pvc is not None:
        return marker_conflict(pvc, "PersistentVolumeClaim", labels=storage_labels(prepared))
    return None


def _same_build(spec_cm: Mapping[str, Any], prepared: PreparedEngine) -> bool:
    """Whether a build-spec ConfigMap builds ``prepared``'s key into its artifact root (fields outside
    the key, such as ``parallelism.multi_node``, may differ between LLMEngines sharing the build)."""
    try:
        spec = BuildSpec.model_validate(
            yaml.safe_load((spec_cm.get("data") or {}).get(BUILD_SPEC_DATA_KEY) or "")
        )
    except (yaml.YAMLError, ValueError):
        return False
    return (
        spec.engine_key() == prepared.key
        and spec.output.artifact_root == prepared.build_spec.output.artifact_root
    )


def sync_reclaim(
    kube: Kube,
    engine: Mapping[str, Any],
    prepared: PreparedEngine,
    *,
    pvc: Mapping[str, Any] | None,
    entry: Mapping[str, Any] | None,
) -> None:
    """Owner references follow the *current* ``reclaimPolicy`` (it may change after creation).

    The operator-created PVC and the cache entry carry this LLMEngine's ownerReference — so the
    garbage collector deletes them with it — only while ``reclaimPolicy`` is ``Delete`` and nothing
    else holds the claim: no LLMDeployment serves this engine (``status.usedBy``) and no other
    LLMEngine of the namespace names the claim (``storage.pvc`` or a ``pvc://`` model source). Any
    holder keeps the artifact; those holders also release the claim themselves
    (:func:`release_shared_claims`, the LLMDeployment controller), so the window between a new
    holder and this engine's next reconcile is closed from both sides.
    """
    if not prepared.storage.created_by_operator or (pvc is None and entry is None):
        return
    want = prepared.deletes_with_engine and not (engine.get("status") or {}).get("usedBy")
    if want:
        claim = prepared.storage.claim_name or ""
        ns, name = engine["metadata"]["namespace"], engine["metadata"]["name"]
        engines = kube.list(LLM_ENGINE, ns)
        deployments = kube.list(LLM_DEPLOYMENT, ns)
        want = not any(claim in claims_of(e) for e in engines if e["metadata"]["name"] != name) and not any(
            ((d.get("spec") or {}).get("engineRef") or {}).get("name") == name for d in deployments
        )
    reference = engine_owner(engine)
    for res, obj in ((PVC, pvc), (CONFIG_MAP, entry)):
        if obj is not None and set_owner(kube, res, obj, reference, present=want):
            log.info(
                "%s %s %s the LLMEngine",
                res.kind,
                obj["metadata"]["name"],
                "now goes with" if want else "outlives",
            )


def claims_of(engine: Mapping[str, Any]) -> set[str]:
    """PVC names an LLMEngine reads or writes: ``storage.pvc.claimName`` and a ``pvc://`` model source."""
    spec = engine.get("spec") or {}
    claims = {str(((spec.get("storage") or {}).get("pvc") or {}).get("claimName") or "")}
    source = str((spec.get("model") or {}).get("source") or "")
    if source.startswith("pvc://"):
        claims.add(source[len("pvc://") :].split("/", 1)[0])
    return claims - {""}


def release_shared_claims(kube: Kube, engine: Mapping[str, Any], prepared: PreparedEngine) -> None:
    """A PVC this engine uses but another LLMEngine created (and would delete with itself under
    ``reclaimPolicy: Delete``) loses that LLMEngine's ownerReference: it is shared now, so it is kept."""
    ns, uid = engine["metadata"]["namespace"], engine["metadata"]["uid"]
    for claim in sorted(claims_of(engine)):
        release_claim(kube, ns, claim, keep_uid=uid)


def _no_queue(settings: Settings) -> BuildQueue:
    """The build queue when it does not matter (a build exists or the spec is invalid)."""
    return BuildQueue(0, settings.max_concurrent_builds, 0)


def _act(
    kube: Kube,
    settings: Settings,
    engine: Mapping[str, Any],
    prepared: PreparedEngine,
    decision: EngineDecision,
) -> None:
    ns = engine["metadata"]["namespace"]
    for action in decision.actions:
        if isinstance(action, EnsurePVC):
            forget_claim(ns, action.claim_name)  # it may carry this LLMEngine's ownerReference
            _, created = kube.create_or_get(PVC, ns, desired_artifact_pvc(engine, prepared, settings))
            if created:
                log.info("created artifact PVC %s/%s", ns, action.claim_name)
        elif isinstance(action, CreateBuild):
            kube.create_or_get(CONFIG_MAP, ns, desired_build_spec_configmap(engine, prepared))
            _, created = kube.create_or_get(JOB, ns, desired_builder_job(engine, prepared, settings))
            log.info("builder Job %s/%s %s", ns, action.job_name, "created" if created else "already exists")
        elif isinstance(action, ReplaceBuild):
            # Foreground: the Job goes only after its (never scheduled) pods, so the new Job's pods
            # are the only ones under its name; its DELETED event reconciles and creates it anew.
            if kube.delete(JOB, ns, action.job_name, propagation="Foreground"):
                log.info("deleted builder Job %s/%s to replace it (requests changed)", ns, action.job_name)
        elif isinstance(action, AdoptJob):
            _adopt(kube, engine, ns, action.job_name)
        elif isinstance(action, ExpireJob):
            _expire(kube, ns, action)
        elif isinstance(action, RecordArtifact):
            entry = desired_cache_entry(ns, action.record, owner=engine if action.owned else None)
            _, created = kube.create_or_get(CONFIG_MAP, ns, entry)
            if created:
                for stage, seconds in (action.record.get("stageTimings") or {}).items():
                    BUILD_STAGE_DURATION.labels(stage=stage).observe(float(seconds))
                post_event(
                    kube,
                    engine,
                    ARTIFACT_RECORDED,
                    f"recorded {action.record.get('uri')} in the engine cache",
                )


def _expire(kube: Kube, ns: str, action: ExpireJob) -> None:
    """Set ``spec.ttlSecondsAfterFinished`` of a completed builder Job whose artifact is recorded
    (:func:`~trtllm_operator.decide.engine_jobs.expire_job`): Kubernetes' TTL-after-finished
    controller deletes it then. Conditional on the ``resourceVersion`` it was judged at: a Job
    changed since (409) or gone (404) is left to the reconcile its watch event starts."""
    body = {
        "metadata": {"resourceVersion": action.resource_version},
        "spec": {"ttlSecondsAfterFinished": action.ttl_seconds},
    }
    try:
        kube.patch(JOB, ns, action.job_name, body)
    except ApiException as exc:
        if exc.status not in (404, 409):
            raise
        log.debug("builder Job %s/%s not given its TTL now: %s", ns, action.job_name, exc.reason)
        return
    log.info(
        "builder Job %s/%s: artifact recorded, ttlSecondsAfterFinished %d",
        ns,
        action.job_name,
        action.ttl_seconds,
    )


def stop_superseded_builds(
    kube: Kube, engine: Mapping[str, Any], *, wanted_job: str | None, why: str
) -> None:
    """Delete the running builder Jobs this LLMEngine owns but no longer wants (``wanted_job``: the
    one its current spec maps to, None for an invalid or refused spec) when no other LLMEngine of
    the namespace wants their key (:func:`~trtllm_operator.decide.engine_jobs.superseded_builds`),
    and post a ``BuildStopped`` Event naming each Job and why.

    The candidates and the other LLMEngines come from the watch caches (no request while nothing is
    to be stopped); before a deletion the Jobs and the namespace's LLMEngines are read fresh (a
    deletion guard) and decided on again, and the delete is
    conditional on the Job's UID and ``resourceVersion`` (another LLMEngine joining the build
    meanwhile changes it: 409, decided again at the next reconcile). Foreground propagation, as
    Kubernetes' own TTL-after-finished controller deletes Jobs (kubernetes/kubernetes
    ``pkg/controller/ttlafterfinished/ttlafterfinished_controller.go`` ``processJob``, commit
    003e8629): the Job stays, with a deletionTimestamp, until the garbage collector has deleted its
    pods (kubernetes.io docs/concepts/architecture/garbage-collection, "Foreground cascading
    deletion"), so it keeps its build slot (:func:`build_queue`) until its GPU is free, and no
    terminating pod shares its name with a new Job of the same key (as :class:`ReplaceBuild`)."""
    ns, uid = engine["metadata"]["namespace"], engine["metadata"]["uid"]
    candidates = [
        j
        for j in indexes.builder_jobs_owned_by(kube, ns, uid)
        if j["metadata"]["name"] != wanted_job
        and not is_finished(j)
        and not j["metadata"].get("deletionTimestamp")
    ]
    if not candidates:
        return
    cached = indexes.in_namespace(kube, LLM_ENGINE, ns)
    if not superseded_builds(engine, wanted_job=wanted_job, why=why, jobs=candidates, engines=cached):
        return  # another LLMEngine wants each of them (as the caches see it): no request
    fresh = [j for j in (kube.get(JOB, ns, c["metadata"]["name"]) for c in candidates) if j is not None]
    engines = kube.list(LLM_ENGINE, ns)
    for stop in superseded_builds(engine, wanted_job=wanted_job, why=why, jobs=fresh, engines=engines):
        preconditions = {"uid": stop.uid, "resourceVersion": stop.resource_version}
        try:
            deleted = kube.delete(
                JOB, ns, stop.job_name, propagation="Foreground", preconditions=preconditions
            )
        except ApiException as exc:
            if exc.status != 409:
                raise
            log.info("builder Job %s/%s changed since it was read; not stopped now", ns, stop.job_name)
            continue
        if deleted:
            log.info("%s", stop.message)
            post_event(kube, engine, R_BUILD_STOPPED, stop.message)


def _adopt(kube: Kube, engine: Mapping[str, Any], ns: str, child_name: str) -> None:
    """Add ``engine`` as a (non-controller) owner of the Job and its build-spec ConfigMap."""
    for res in (JOB, CONFIG_MAP):
        add_owner(kube, res, ns, child_name, engine_owner(engine, controller=False))


def _write(
    kube: Kube, engine: Mapping[str, Any], decision: EngineDecision, *, status_extra: Mapping[str, Any]
) -> None:
    write_outcome(kube, LLM_ENGINE, engine, decision, status_extra=status_extra)
    if decision.event is not None:
        if decision.event.reason == "ArtifactReused":
            ENGINE_CACHE_LOOKUPS.labels(result="hit").inc()
        elif decision.event.reason == "BuildSucceeded":
            BUILDS_FINISHED.labels(result="succeeded", reason="Succeeded").inc()
        elif decision.phase == "Failed" and decision.status.get("engineKey"):
            BUILDS_FINISHED.labels(result="failed", reason=decision.event.reason).inc()


def update_build_gauges(kube: Kube) -> None:
    """Set ``trtllm_operator_builds{state=active|queued}`` from the cluster: running builder Jobs and
    LLMEngines in phase Queued, over the watched namespaces. Best effort (an API error leaves the
    gauges as they were)."""
    active = queued = 0
    try:
        for ns in _watched(current()):
            active += sum(1 for j in kube.list(JOB, ns, label_selector=BUILDER_SELECTOR) if _is_active(j))
            queued += sum(
                1 for e in kube.list(LLM_ENGINE, ns) if (e.get("status") or {}).get("phase") == "Queued"
            )
    except ApiException as exc:
        log.debug("build gauges not updated: %s", exc.reason)
        return
    BUILDS.labels(state="active").set(active)
    BUILDS.labels(state="queued").set(queued)


def reconcile_queued(namespace: str | None = None) -> None:
    """Reconcile every LLMEngine waiting in the queue, first in the queue first
    (:func:`~trtllm_operator.decide.engine.queue_order`: round-robin by namespace), e.g. after a
    build ended."""
    kube = default_kube(current().field_manager)
    engines, jobs, pods = _queue_inputs(kube, _watched(current()) if namespace is None else [namespace])
    queued = {
        (e["metadata"]["namespace"], e["metadata"]["name"])
        for e in engines
        if (e.get("status") or {}).get("phase") == "Queued"
    }
    BUILDS.labels(state="queued").set(len(queued))
    for ns_, name in queue_order(engines, build_slots(jobs, pods)):
        if (ns_, name) not in queued:
            continue
        try:
            reconcile(ns_, name, kube=kube)
        except ApiException as exc:
            log.warning("reconcile of queued %s/%s failed: %s", ns_, name, exc.reason)


# ----------------------------------------------------------------------------- build progress
#: Latest progress line per builder Job ((namespace, job name)), read from its pod's log.
_progress: dict[tuple[str, str], BuildProgress] = {}
#: Pods whose log could not be read (uid → monotonic time of the next try): no retry storm on
#: nodes without a kubelet (kwok) or pods whose container has not started.
_log_retry_at: dict[str, float] = {}
_LOG_RETRY_SECONDS = 60.0
_LOG_TAIL_LINES = 20


def read_build_progress(kube: Kube, namespace: str, job_name: str) -> BuildProgress | None:
    """The newest progress line in the last lines of the Job's running builder pod, or None.

    Never raises: a log that cannot be read (no kubelet, container not started, timeout, RBAC)
    is logged once at DEBUG and retried after a minute; the status keeps the coarse stage.
    """
    try:
        pods = kube.list(POD, namespace, label_selector=f"{JOB_NAME_LABEL}={job_name}")
    except ApiException as exc:
        log.debug("builder pods of %s/%s not listed: %s", namespace, job_name, exc.reason)
        return None
    running = [p for p in pods if (p.get("status") or {}).get("phase") == "Running"]
    running.sort(key=lambda p: p["metadata"].get("creationTimestamp") or "", reverse=True)
    now = time.monotonic()
    for stale in [uid for uid, at in _log_retry_at.items() if at < now - 3600]:
        _log_retry_at.pop(stale, None)  # pods long gone
    for pod in running:
        meta = pod["metadata"]
        uid = meta.get("uid") or meta["name"]
        if _log_retry_at.get(uid, 0.0) > now:
            continue
        try:
            text = kube.pod_log(
                namespace, meta["name"], container=BUILDER_CONTAINER, tail_lines=_LOG_TAIL_LINES
            )
        except Exception as exc:  # ApiException, timeouts, connection errors: all "no log now"
            if uid not in _log_retry_at:
                log.debug(
                    "log of builder pod %s/%s unavailable (%s); using the coarse stage",
                    namespace,
                    meta["name"],
                    exc,
                )
            _log_retry_at[uid] = now + _LOG_RETRY_SECONDS
            continue
        _log_retry_at.pop(uid, None)
        return parse_progress(text)
    return None


def _is_building(status: Mapping[str, Any], **_: Any) -> bool:
    return status.get("phase") == "Building" and bool((status.get("build") or {}).get("jobName"))


#: The progress timer ticks every second; it reads a log only every ``build_progress_seconds``
#: (read at call time, so the setting applies even when this module was imported before it was set).
_PROGRESS_TICK_SECONDS = 1.0
_progress_read_at: dict[tuple[str, str], float] = {}


@kopf.timer(GROUP, VERSION, ENGINE_PLURAL, interval=_PROGRESS_TICK_SECONDS, when=_is_building)
def engine_build_progress(*, namespace: str | None, name: str, status: kopf.Status, **_: Any) -> None:
    """While building: read the builder's progress line from its pod log; reconcile when it moved."""
    job_name = str((status.get("build") or {}).get("jobName") or "")
    if namespace is None or not job_name:
        return
    now = time.monotonic()
    if now - _progress_read_at.get((namespace, name), -1e9) < current().build_progress_seconds:
        return
    _progress_read_at[(namespace, name)] = now
    kube = default_kube(current().field_manager)
    progress = read_build_progress(kube, namespace, job_name)
    if progress is None or _progress.get((namespace, job_name)) == progress:
        return
    _progress[(namespace, job_name)] = progress
    try:
        reconcile(namespace, name, kube=kube)
    except ApiException as exc:
        log.warning("reconcile of %s/%s after build progress failed: %s", namespace, name, exc.reason)


# ----------------------------------------------------------------------------- kopf handlers
def _retrying(namespace: str | None, name: str) -> None:
    if namespace is None:
        return
    try:
        reconcile(namespace, name)
    except ApiException as exc:
        raise kopf.TemporaryError(
            f"API error {exc.status}: {exc.reason}", delay=current().error_backoff_seconds
        ) from exc


@kopf.on.resume(GROUP, VERSION, ENGINE_PLURAL)
@kopf.on.create(GROUP, VERSION, ENGINE_PLURAL)
@kopf.on.update(GROUP, VERSION, ENGINE_PLURAL)
def engine_changed(*, namespace: str | None, name: str, reason: str = "", **_: Any) -> None:
    """A new or changed LLMEngine, or the operator (re)started: reconcile it — on a restart not when
    its cached status shows it settled (:func:`settled`) and stamped by this same release
    (:func:`~trtllm_operator.handlers.release.stamped`; kopf resumes an object only when its spec is
    what it last handled with every handler done: kopf 1.45.2 ``kopf/_core/intents/causes.py``
    ``detect_changing_cause``). An engine an earlier release (or other settings) last reconciled is
    reconciled at once: that release may derive keys or render differently
    (tests/e2e/test_upgrade.py). Drift is the resync loop's."""
    if namespace:
        handled_by_kopf(LLM_ENGINE.kind, namespace, name)  # the drift loop may visit it now
    if reason == kopf.Reason.RESUME and namespace:
        why = unsettled(namespace, name)
        observe_resume(LLM_ENGINE.kind, reconciled=why is not None)
        if why is None:
            return
        with object_context(LLM_ENGINE.kind, namespace, name):
            log.info("resumed, reconciling: %s", why)
    _retrying(namespace, name)


def settled(namespace: str, name: str) -> bool:
    """Whether the watch-cached LLMEngine ``name`` is ``Ready`` for its current generation, with a
    ``Ready`` condition of that generation, no deletion under way, and this release's stamp (False
    without the cache; :func:`unsettled` says which test failed)."""
    return unsettled(namespace, name) is None


def unsettled(namespace: str, name: str) -> str | None:
    """Why :func:`settled` is False for LLMEngine ``name`` (the first test that fails on the cached
    copy, a short sentence); None when settled."""
    if not indexes.cached(LLM_ENGINE):
        return "no watch cache"
    engine = indexes.peek(LLM_ENGINE, namespace, name)  # read only, not copied
    if engine is None:
        return "not in the LLMEngine cache"
    if engine["metadata"].get("deletionTimestamp"):
        return "being deleted"
    unstamped = unstamped_reason(engine)
    if unstamped is not None:
        return unstamped
    return unready_reason(engine)


@kopf.on.startup()
async def start_engine_resync(**_: Any) -> None:
    """Slow drift correction (children changed or deleted behind the operator's back): every
    LLMEngine re-reconciled once per ``resync_seconds``, spread over the period
    (:func:`~trtllm_operator.handlers.plumbing.resync_forever`: one loop, not a kopf timer per
    object — no finalizer). A settled engine costs no request (``cache_first``)."""
    start_resync(
        LLM_ENGINE.kind,
        lambda: indexes.names(LLM_ENGINE),
        lambda: current().resync_seconds,
        _retrying,
    )


@kopf.on.event(JOB.group, JOB.version, JOB.plural, labels=BUILDER_LABELS)
def builder_job_event(*, type: str, body: kopf.Body, namespace: str | None, **_: Any) -> None:
    """A builder Job changed: reconcile its LLMEngines; when it ended, the queue moves."""
    if namespace is None:
        return
    for owner in owner_names(body, LLM_ENGINE.kind):
        try:
            reconcile(namespace, owner)
        except ApiException as exc:
            log.warning("reconcile of %s/%s after a Job event failed: %s", namespace, owner, exc.reason)
    if type == "DELETED" or not _is_active(body):
        reconcile_queued()
    update_build_gauges(default_kube(current().field_manager))


@kopf.on.event(POD.group, POD.version, POD.plural, labels=BUILDER_LABELS)
def builder_pod_event(*, body: kopf.Body, namespace: str | None, **_: Any) -> None:
    """A builder pod changed (scheduled, running, terminated): reconcile the Job's LLMEngines."""
    if namespace is None:
        return
    job_name = ((body.get("metadata") or {}).get("labels") or {}).get(JOB_NAME_LABEL)
    if not job_name:
        return
    kube = default_kube(current().field_manager)
    try:
        job = kube.get(JOB, namespace, job_name)
        for owner in owner_names(job, LLM_ENGINE.kind):
            reconcile(namespace, owner, kube=kube)
    except ApiException as exc:
        log.warning("reconcile after a pod event in %s failed: %s", namespace, exc.reason)
    if unschedulable_message([body]) is not None or stuck_containers([body]):
        # an unschedulable build, or one whose container cannot start, holds no slot
        # (decide.engine.holds_build_slot)
        reconcile_queued()
