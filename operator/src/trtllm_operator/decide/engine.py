"""The LLMEngine controller's decisions, pure: spec → build spec → engine key → what to do.

One reconcile is two pure steps around the handler's reads:

1. :func:`prepare_engine` — validate the spec against the GPU catalog and (when the model's
   ``config.json`` is known) the capacity planner; map it to the builder's
   :class:`~engine_builder.spec.BuildSpec`; compute the engine key, the storage location and the
   deterministic names of everything that follows from the key (builder Job, build-spec
   ConfigMap, cache index entry). Returns :class:`PreparedEngine` or :class:`InvalidEngine`.
2. :func:`decide_engine` — given what the handler found (cache index entry for this key and
   storage, the builder Job and its pods, the build queue), the new status, conditions, the Event
   to post and the actions to take (:class:`CreateBuild`, :class:`RecordArtifact`,
   :class:`AdoptJob`, :class:`EnsurePVC`).

Level-based: the decision depends only on the current state of the world, never on which event
triggered it, so running it twice (a retry, a restarted operator, a timer) is harmless.

Names (every one derived from the key, so a retry or a second LLMEngine never duplicates):

* builder Job and build-spec ConfigMap: ``build-<key[:16]>-<storage-id[:6]>``;
* cache index entry (ConfigMap, not owned — artifacts outlive LLMEngines):
  ``trtllm-engine-<key[:20]>-<storage-id[:8]>``;
* operator-created PVC: ``<engine>-artifacts`` (the API's ``storage.createPVC``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import ValidationError

from engine_builder.contract import (
    BuildLimits,
    BuildSpec,
    Calibration,
    ModelSource,
    Output,
    Parallelism,
    Quantization,
    SpeculativeDecoding,
    Target,
)
from engine_builder.planner import GPUSpec, Plan, PlanInputError, lookup, plan_from_build_spec
from engine_builder.planner.formats import MIN_SM
from trtllm_operator.api import (
    CONDITION_DEGRADED,
    CONDITION_PLANNED,
    CONDITION_PROGRESSING,
    CONDITION_READY,
    LLMEngineSpec,
)
from trtllm_operator.api.engine import StorageSpec, builder_gpus
from trtllm_operator.decide.compatibility import ALLOW_PARTIAL_ARTIFACT_ANNOTATION
from trtllm_operator.decide.conditions import Condition, condition
from trtllm_operator.decide.engine_failure import (
    REASON_UNSCHEDULABLE,
    BuilderReport,
    classify_failure,
    job_condition,
    latest_report,
    unschedulable_message,
)
from trtllm_operator.decide.engine_progress import BuildProgress

LABEL_PREFIX = "llm.trtllm-operator.dev"
LABEL_ENGINE_KEY = f"{LABEL_PREFIX}/engine-key"
LABEL_STORAGE_ID = f"{LABEL_PREFIX}/storage-id"
LABEL_ENGINE = f"{LABEL_PREFIX}/engine"
LABEL_COMPONENT = "app.kubernetes.io/component"
LABEL_MANAGED_BY = "app.kubernetes.io/managed-by"
LABEL_NAME = "app.kubernetes.io/name"
MANAGED_BY = "trtllm-operator"
COMPONENT_BUILDER = "engine-builder"
COMPONENT_ARTIFACT = "engine-artifact"
#: Key of the cache index ConfigMap's data entry holding the artifact record (JSON).
ARTIFACT_DATA_KEY = "artifact.json"
#: Key of the build-spec ConfigMap's data entry (YAML).
BUILD_SPEC_DATA_KEY = "build.yaml"

Phase = Literal["Pending", "Planning", "Queued", "Building", "Ready", "Failed"]

# Event / condition reasons (stable; documented in docs/operator.md).
R_INVALID_SPEC = "InvalidSpec"
R_DOES_NOT_FIT = "DoesNotFit"
R_PLANNED = "PlanFits"
R_PLAN_SKIPPED = "ModelConfigUnavailable"
R_QUEUED = "Queued"
R_BUILD_STARTED = "BuildStarted"
R_BUILDING = "Building"
R_BUILD_RUNNING = "BuildRunning"
R_BUILD_UNSCHEDULABLE = "BuildUnschedulable"
R_BUILD_SUCCEEDED = "BuildSucceeded"
R_BUILD_FAILED = "BuildFailed"
R_ARTIFACT_REUSED = "ArtifactReused"
R_ARTIFACT_READY = "ArtifactReady"
R_ARTIFACT_COMPLETE = "Complete"
R_COMPILE_SKIPPED = "CompileSkipped"
R_NO_ARTIFACT = "NoArtifact"

#: Condition type: False when the recorded artifact lacks a part its backend needs (a ``tensorrt``
#: artifact built with ``--skip-compile`` has no engine; ``cache import --allow-partial``).
CONDITION_ARTIFACT_COMPLETE = "ArtifactComplete"


# ------------------------------------------------------------------------------------ storage
@dataclass(frozen=True)
class StorageLocation:
    """Where artifacts of one LLMEngine go. ``identity`` names the storage (two LLMEngines share an
    artifact only when both key and identity match); ``storage_id`` is its 16-hex-digit hash
    (label-safe). ``kind``: ``pvc`` (existing or operator-created claim) or ``s3``."""

    kind: Literal["pvc", "s3"]
    identity: str
    claim_name: str | None = None
    sub_path: str | None = None
    create_size: str | None = None
    create_storage_class: str | None = None
    create_access_mode: str = "ReadWriteOnce"
    bucket: str | None = None
    prefix: str | None = None
    endpoint: str | None = None
    s3_secret: str | None = None

    #: Mount path of the artifact volume in the builder pod (PVC storage).
    MOUNT_PATH = "/artifacts"

    @staticmethod
    def created_pvc_name(engine_name: str) -> str:
        """Name of the PVC the operator creates for ``storage.createPVC`` of LLMEngine ``engine_name``:
        ``<engine_name[:53]>-artifacts`` (at most 63 characters; dots kept).

        The one home of this name: the builder mounts it, the engine controller creates it and serving
        pods mount it. Existing clusters hold PVCs under exactly these names, so it must not change.
        A truncated name never ends in ``.`` (``x.-artifacts`` is not a valid object name, so no PVC
        can exist under it).
        """
        return f"{engine_name[: 63 - len('-artifacts')].rstrip('.')}-artifacts"

    @property
    def storage_id(self) -> str:
        return hashlib.sha256(self.identity.encode()).hexdigest()[:16]

    @property
    def created_by_operator(self) -> bool:
        return self.create_size is not None

    def artifact_root(self) -> str:
        """The builder's ``output.artifact_root``: the mount path, or ``s3://bucket/prefix``."""
        if self.kind == "s3":
            return f"s3://{self.bucket}/{(self.prefix or '').strip('/')}".rstrip("/")
        return self.MOUNT_PATH

    def artifact_uri(self, key: str) -> str:
        """Where the artifact of ``key`` lives, as the API reports it (``pvc://claim/path/key``)."""
        if self.kind == "s3":
            return f"{self.artifact_root()}/{key}"
        path = "/".join(p for p in ((self.sub_path or "").strip("/"), key) if p)
        return f"pvc://{self.claim_name}/{path}"


def storage_location(engine_name: str, storage: StorageSpec) -> StorageLocation:
    """The :class:`StorageLocation` of ``spec.storage`` (exactly one of pvc, createPVC, s3)."""
    if storage.pvc is not None:
        sub = (storage.pvc.sub_path or "").strip("/") or None
        return StorageLocation(
            kind="pvc",
            identity=f"pvc:{storage.pvc.claim_name}/{sub or ''}",
            claim_name=storage.pvc.claim_name,
            sub_path=sub,
        )
    if storage.create_pvc is not None:
        claim = StorageLocation.created_pvc_name(engine_name)
        return StorageLocation(
            kind="pvc",
            identity=f"pvc:{claim}/",
            claim_name=claim,
            create_size=storage.create_pvc.size,
            create_storage_class=storage.create_pvc.storage_class_name,
            create_access_mode=storage.create_pvc.access_mode,
        )
    if storage.s3 is not None:
        s3 = storage.s3
        prefix = s3.prefix.strip("/")
        return StorageLocation(
            kind="s3",
            identity=f"s3:{s3.endpoint or 'aws'}/{s3.bucket}/{prefix}",
            bucket=s3.bucket,
            prefix=prefix,
            endpoint=s3.endpoint,
            s3_secret=s3.credentials_secret_ref.name if s3.credentials_secret_ref else None,
        )
    raise ValueError("spec.storage: set exactly one of pvc, createPVC or s3")


def builder_job_name(key: str, storage_id: str) -> str:
    """Builder Job (and build-spec ConfigMap) name for an engine key in a storage."""
    return f"build-{key[:16]}-{storage_id[:6]}"


def cache_entry_name(key: str, storage_id: str) -> str:
    """Cache index ConfigMap name for an engine key in a storage."""
    return f"trtllm-engine-{key[:20]}-{storage_id[:8]}"


# ------------------------------------------------------------------------------------ prepare
@dataclass(frozen=True)
class InvalidEngine:
    """The spec cannot be built. ``field``: API path (``spec.parallelism.tensor``); ``message``:
    what is wrong and how to fix it; ``reason``: InvalidSpec or DoesNotFit."""

    field: str
    message: str
    reason: str = R_INVALID_SPEC
    plan: Plan | None = None

    @property
    def text(self) -> str:
        return f"{self.field}: {self.message}"


@dataclass(frozen=True)
class PreparedEngine:
    """A valid LLMEngine mapped to its build: everything that follows from the spec alone."""

    name: str
    spec: LLMEngineSpec
    gpu: GPUSpec
    build_spec: BuildSpec
    key: str
    storage: StorageLocation
    plan: Plan | None
    plan_note: str | None = None

    @property
    def key_short(self) -> str:
        return self.key[:12]

    @property
    def deletes_with_engine(self) -> bool:
        """reclaimPolicy Delete on an operator-created PVC: the PVC and the cache index entry are
        owned by the LLMEngine and go with it. For an existing PVC or S3 (shared storage) the
        operator never deletes data; Delete is treated as Retain there (docs/operator.md)."""
        return self.storage.created_by_operator and self.spec.storage.reclaim_policy == "Delete"

    @property
    def job_name(self) -> str:
        return builder_job_name(self.key, self.storage.storage_id)

    @property
    def cache_name(self) -> str:
        return cache_entry_name(self.key, self.storage.storage_id)


def gpu_products(spec_product: str, gpu: GPUSpec) -> list[str]:
    """Values of ``nvidia.com/gpu.product`` a builder pod may run on: the catalog's canonical name
    and the product as the user wrote it (they differ for aliases such as ``H100``)."""
    return sorted({gpu.product, spec_product})


def to_build_spec(spec: LLMEngineSpec, gpu: GPUSpec, storage: StorageLocation) -> BuildSpec:
    """Map an LLMEngine spec to the builder's build spec (camelCase API → the builder's snake_case).

    ``target.gpu_product`` is the catalog's canonical product (an alias and the full name give the
    same key); unset build limits stay unset (the builder's planner derives them).
    """
    q = spec.quantization
    sd = spec.build.speculative_decoding
    draft = (
        ModelSource(uri=sd.draft_model.source, revision=sd.draft_model.revision) if sd.draft_model else None
    )
    return BuildSpec(
        model=ModelSource(uri=spec.model.source, revision=spec.model.revision),
        backend=spec.backend,
        runtime_image=spec.runtime.image,
        quantization=Quantization(
            format=q.format,
            kv_cache_dtype=q.kv_cache_dtype,
            awq_block_size=q.awq_block_size,
            calibration=Calibration(
                dataset=q.calibration.dataset,
                num_samples=q.calibration.num_samples,
                batch_size=q.calibration.batch_size,
                max_seq_length=q.calibration.max_seq_length,
            ),
        ),
        parallelism=Parallelism(
            tensor=spec.parallelism.tensor,
            pipeline=spec.parallelism.pipeline,
            expert=spec.parallelism.expert,
            multi_node=spec.parallelism.multi_node,
        ),
        build=BuildLimits(
            max_batch_size=spec.build.max_batch_size,
            max_num_tokens=spec.build.max_num_tokens,
            max_input_len=spec.build.max_input_len,
            max_seq_len=spec.build.max_seq_len,
            max_beam_width=spec.build.max_beam_width,
            gemm_plugin=spec.build.gemm_plugin,
            paged_context_fmha=spec.build.paged_context_fmha,
            speculative_decoding=SpeculativeDecoding(
                mode=sd.mode, max_draft_len=sd.max_draft_len or 0, draft_model=draft
            ),
            workers=spec.build.workers,
        ),
        target=Target(gpu_product=gpu.product, sm=gpu.sm),
        output=Output(artifact_root=storage.artifact_root()),
    )


def _pydantic_field(exc: ValidationError) -> tuple[str, str]:
    err = exc.errors()[0]
    path = "spec." + ".".join(str(p) for p in err["loc"]) if err["loc"] else "spec"
    return path, f"{err['msg']} (got {err.get('input')!r})"


def prepare_engine(
    name: str,
    raw_spec: Mapping[str, Any],
    *,
    catalog_extra: Mapping[str, GPUSpec] | None = None,
    hf_config: Mapping[str, Any] | None = None,
) -> PreparedEngine | InvalidEngine:
    """Validate and map one LLMEngine spec. Never raises for bad input: returns :class:`InvalidEngine`.

    ``catalog_extra``: GPU catalog extension (operator setting). ``hf_config``: the model's
    ``config.json`` when the operator can see it; without it only the catalog rules are checked here
    (the builder's ``plan`` stage checks the rest and fails with ``BadSpec``).
    """
    try:
        spec = LLMEngineSpec.model_validate(raw_spec)
    except ValidationError as exc:
        path, msg = _pydantic_field(exc)
        return InvalidEngine(
            path, msg + "; fix the field to match the LLMEngine schema (kubectl explain llmengine.spec)"
        )
    try:
        gpu = lookup(spec.gpu.product, catalog_extra)
    except PlanInputError as exc:
        return InvalidEngine(exc.field, exc.message)
    fmt = spec.quantization.format
    if gpu.sm < MIN_SM[fmt]:
        ok = sorted(f for f, sm in MIN_SM.items() if gpu.sm >= sm)
        return InvalidEngine(
            "spec.quantization.format",
            f"{fmt} needs compute capability {MIN_SM[fmt] / 10:.1f}+ but {gpu.product} is SM {gpu.sm}; "
            f"use one of {', '.join(ok)} or a newer GPU (spec.gpu.product).",
        )
    if spec.quantization.kv_cache_dtype == "fp8" and gpu.sm < 89:
        return InvalidEngine(
            "spec.quantization.kvCacheDtype",
            f"an FP8 KV cache needs compute capability 8.9+ but {gpu.product} is SM {gpu.sm}; "
            "use int8 or auto.",
        )
    storage = storage_location(name, spec.storage)
    build_spec = to_build_spec(spec, gpu, storage)
    plan: Plan | None = None
    note: str | None = None
    if hf_config is not None:
        try:
            plan = plan_from_build_spec(build_spec, hf_config, catalog_extra)
        except PlanInputError as exc:
            return InvalidEngine(exc.field, exc.message)
        if not plan.fits:
            first = plan.reasons[0]
            memory = (
                first.field in ("spec.parallelism.tensor", "spec.build.maxSeqLen")
                and "exceed" in first.message
            )
            text = "; ".join(f"{r.field}: {r.message} Fix: {r.fix}" for r in plan.reasons[1:])
            message = f"{first.message} Fix: {first.fix}" + (f"; {text}" if text else "")
            return InvalidEngine(first.field, message, R_DOES_NOT_FIT if memory else R_INVALID_SPEC, plan)
    else:
        note = "the model's config.json is not available to the operator; the builder plans at its plan stage"
    return PreparedEngine(
        name=name,
        spec=spec,
        gpu=gpu,
        build_spec=build_spec,
        key=build_spec.engine_key(),
        storage=storage,
        plan=plan,
        plan_note=note,
    )


def plan_status(plan: Plan | None) -> dict[str, Any] | None:
    """``status.plan`` (camelCase) from a planner result."""
    if plan is None:
        return None
    rec = plan.recommended
    out: dict[str, Any] = {
        "fits": plan.fits,
        "gpuMemoryBytes": plan.gpu_memory_bytes,
        "weightBytesPerGPU": plan.weight_bytes_per_gpu,
        "activationBytesPerGPU": plan.activation_bytes_per_gpu,
        "kvBytesPerTokenPerGPU": plan.kv_bytes_per_token_per_gpu,
        "kvCacheBytesPerGPU": plan.kv_cache_bytes_per_gpu,
        "maxKVTokens": plan.max_kv_tokens,
        "maxConcurrentSequences": plan.max_concurrent_sequences,
        "recommended": {
            "maxBatchSize": rec.get("max_batch_size"),
            "maxNumTokens": rec.get("max_num_tokens"),
            "maxSeqLen": rec.get("max_seq_len"),
        },
    }
    if plan.reasons:
        out["reasons"] = [str(r) for r in plan.reasons][:32]
    return out


# ------------------------------------------------------------------------------------ decide
@dataclass(frozen=True)
class CreateBuild:
    """Write the build-spec ConfigMap and create the builder Job (both named ``job_name``)."""

    job_name: str


@dataclass(frozen=True)
class AdoptJob:
    """Add this LLMEngine to the ownerReferences of an existing builder Job of the same key (the
    Job then lives until every LLMEngine waiting for it is gone)."""

    job_name: str


@dataclass(frozen=True)
class EnsurePVC:
    """Create the operator-managed artifact PVC if missing (never owned by the LLMEngine)."""

    claim_name: str


@dataclass(frozen=True)
class RecordArtifact:
    """Write the cache index entry for a completed build (create-or-keep). ``owned``: the entry is
    owned by the LLMEngine (only for an operator-created PVC with reclaimPolicy Delete)."""

    record: Mapping[str, Any]
    owned: bool = False


Action = CreateBuild | AdoptJob | EnsurePVC | RecordArtifact


@dataclass(frozen=True)
class BuildQueue:
    """The operator-wide build queue as seen by one reconcile.

    ``active``: builder Jobs running now (all watched namespaces), ``limit``: the concurrent-build
    setting, ``ahead``: LLMEngines waiting (phase Queued) that were created before this one.
    """

    active: int
    limit: int
    ahead: int

    @property
    def may_start(self) -> bool:
        return self.active + self.ahead < self.limit

    @property
    def position(self) -> int:
        """1-based position among waiting builds."""
        return self.ahead + 1


@dataclass(frozen=True)
class EngineObservation:
    """What the handler read for one reconcile. Manifests are dicts as the API server returns them."""

    generation: int
    status: Mapping[str, Any]
    cache_entry: Mapping[str, Any] | None
    job: Mapping[str, Any] | None
    pods: Sequence[Mapping[str, Any]]
    queue: BuildQueue
    owns_job: bool = True
    pvc_exists: bool = True
    #: The builder's latest progress line (from the running pod's log), when the operator has one.
    progress: BuildProgress | None = None


@dataclass(frozen=True)
class EventToPost:
    type: Literal["Normal", "Warning"]
    reason: str
    message: str


@dataclass
class EngineDecision:
    """The outcome of one reconcile: ``status`` is a merge patch (None deletes a key)."""

    phase: Phase
    status: dict[str, Any]
    conditions: list[Condition]
    actions: list[Action] = field(default_factory=list)
    event: EventToPost | None = None


def artifact_record(
    *,
    key: str,
    storage: StorageLocation,
    runtime_image: str,
    gpu_product: str,
    sm: int,
    backend: str,
    recorded_at: str,
    uri: str | None = None,
    manifest_digest: str | None = None,
    size_bytes: int | None = None,
    stage_timings: Mapping[str, float] | None = None,
    tensorrt_llm_version: str | None = None,
    source: str = "import",
    built_by: str | None = None,
    missing: Sequence[str] = (),
) -> dict[str, Any]:
    """One engine cache index record (camelCase JSON): which artifact of ``key`` exists in which
    storage, and what it was built for. ``uri`` defaults to the storage's ``<root>/<key>``.
    ``missing``: what the backend needs but the artifact lacks (the manifest's ``missing``); non-empty
    makes the record ``partial: true``."""
    return {
        "partial": bool(missing),
        "missing": list(missing) or None,
        "engineKey": key,
        "storageIdentity": storage.identity,
        "storageId": storage.storage_id,
        "uri": uri or storage.artifact_uri(key),
        "manifestDigest": manifest_digest,
        "sizeBytes": size_bytes,
        "stageTimings": dict(stage_timings) if stage_timings else None,
        "tensorrtLLMVersion": tensorrt_llm_version,
        "runtimeImage": runtime_image,
        "gpuProduct": gpu_product,
        "sm": sm,
        "backend": backend,
        "source": source,
        "builtBy": built_by,
        "recordedAt": recorded_at,
    }


def record_from_build(
    prepared: PreparedEngine, report: BuilderReport | None, *, job_name: str, recorded_at: str
) -> dict[str, Any]:
    """The record of a completed builder Job: URI, digest, size and timings from the builder's
    report; without a report (pods already gone) the URI the storage implies and nothing else."""
    return artifact_record(
        key=prepared.key,
        storage=prepared.storage,
        runtime_image=prepared.build_spec.runtime_image,
        gpu_product=prepared.gpu.product,
        sm=prepared.gpu.sm,
        backend=prepared.build_spec.backend,
        recorded_at=recorded_at,
        uri=report.artifact_uri if report else None,
        manifest_digest=report.manifest_digest if report else None,
        size_bytes=report.size_bytes if report else None,
        stage_timings=report.stage_timings if report else None,
        source=f"job/{job_name}",
        built_by=prepared.name,
        missing=[report.message or "compile skipped"]
        if report and report.status == "Partial" and prepared.build_spec.backend == "tensorrt"
        else (),
    )


def _artifact_status(record: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "uri": record.get("uri"),
        "sizeBytes": record.get("sizeBytes"),
        "manifestDigest": record.get("manifestDigest"),
        "tensorrtLLMVersion": record.get("tensorrtLLMVersion"),
        "partial": bool(record.get("partial")),
        "missing": record.get("missing") or None,
    }


def artifact_complete(record: Mapping[str, Any] | None) -> tuple[bool | str, str, str]:
    """The ``ArtifactComplete`` condition ``(status, reason, message)`` for a cache record (None: no
    artifact yet → Unknown)."""
    if record is None:
        return "Unknown", R_NO_ARTIFACT, "no artifact recorded for this engine key yet"
    if not record.get("partial"):
        return True, R_ARTIFACT_COMPLETE, "the artifact has every part its backend needs"
    missing = "; ".join(record.get("missing") or ()) or "compile skipped"
    return (
        False,
        R_COMPILE_SKIPPED,
        f"partial artifact: {missing}. LLMDeployments refuse to roll it out unless annotated "
        f'{ALLOW_PARTIAL_ARTIFACT_ANNOTATION}: "true" (simulated clusters and tests only); build it '
        "with the TensorRT-LLM toolchain (engine-builder run without --skip-compile) for real serving",
    )


def _conds(
    gen: int,
    *,
    ready: tuple[bool, str, str],
    progressing: tuple[bool, str, str],
    degraded: tuple[bool, str, str],
    planned: tuple[bool | str, str, str],
    artifact: tuple[bool | str, str, str] | None = None,
) -> list[Condition]:
    complete = artifact or artifact_complete(None)
    return [
        condition(CONDITION_READY, ready[0], ready[1], ready[2], observed_generation=gen),
        condition(
            CONDITION_PROGRESSING, progressing[0], progressing[1], progressing[2], observed_generation=gen
        ),
        condition(CONDITION_DEGRADED, degraded[0], degraded[1], degraded[2], observed_generation=gen),
        condition(CONDITION_PLANNED, planned[0], planned[1], planned[2], observed_generation=gen),
        condition(
            CONDITION_ARTIFACT_COMPLETE, complete[0], complete[1], complete[2], observed_generation=gen
        ),
    ]


def _planned(prepared: PreparedEngine) -> tuple[bool | str, str, str]:
    if prepared.plan is None:
        return "Unknown", R_PLAN_SKIPPED, prepared.plan_note or ""
    p = prepared.plan
    return (
        True,
        R_PLANNED,
        f"{p.weight_bytes_per_gpu / 2**30:.1f} GiB weights per GPU, KV cache {p.max_kv_tokens} tokens "
        f"({p.max_concurrent_sequences} sequences of {p.max_seq_len} tokens) on {p.gpu_product}",
    )


def _event_for(
    previous: Mapping[str, Any], phase: str, reason: str, message: str, warning: bool
) -> EventToPost | None:
    """An Event when (phase, reason) differs from the previous status. The previous reason is the
    Degraded condition's when it was True, else the Progressing condition's — the same reasons
    the decisions put there, so a repeated reconcile of an unchanged state posts nothing."""
    prev: dict[str, Mapping[str, Any]] = {c.get("type", ""): c for c in previous.get("conditions") or []}
    degraded = prev.get(CONDITION_DEGRADED) or {}
    progressing = prev.get(CONDITION_PROGRESSING) or {}
    prev_reason = degraded.get("reason") if degraded.get("status") == "True" else progressing.get("reason")
    if previous.get("phase") == phase and prev_reason == reason:
        return None
    return EventToPost("Warning" if warning else "Normal", reason, message)


def decide_invalid(invalid: InvalidEngine, obs: EngineObservation) -> EngineDecision:
    """An invalid spec: phase Failed, Ready False, the field and the fix in the conditions. No action:
    the operator waits for the next spec change (never a hot loop)."""
    gen = obs.generation
    text = invalid.text
    planned: tuple[bool | str, str, str] = (False, invalid.reason, text)
    status = {
        "phase": "Failed",
        "observedGeneration": gen,
        "plan": plan_status(invalid.plan),
        "build": {"reason": invalid.reason, "message": text},
    }
    conds = _conds(
        gen,
        ready=(False, invalid.reason, text),
        progressing=(False, invalid.reason, "waiting for a spec change"),
        degraded=(True, invalid.reason, text),
        planned=planned,
    )
    return EngineDecision(
        "Failed", status, conds, [], _event_for(obs.status, "Failed", invalid.reason, text, True)
    )


def decide_engine(prepared: PreparedEngine, obs: EngineObservation, *, now: str) -> EngineDecision:
    """Status, conditions, Event and actions for a valid LLMEngine (see the module docstring).

    Order of truth: a cache index entry for (key, storage) → Ready; else the builder Job's state;
    else start a build (or queue it). ``now``: RFC 3339 timestamp used for a new cache record.
    """
    gen = obs.generation
    base: dict[str, Any] = {
        "observedGeneration": gen,
        "engineKey": prepared.key,
        "engineKeyShort": prepared.key_short,
        "plan": plan_status(prepared.plan),
    }
    planned = _planned(prepared)
    job = obs.job
    build: dict[str, Any] = {
        "jobName": job["metadata"]["name"] if job else None,
        "stage": None,
        "percent": None,
        "reason": None,
        "message": None,
    }
    actions: list[Action] = []
    if job is not None and not obs.owns_job:
        actions.append(AdoptJob(prepared.job_name))

    # 1. the artifact is recorded: reuse it
    if obs.cache_entry is not None:
        record = obs.cache_entry
        reused = job is None or record.get("builtBy") not in (None, prepared.name)
        reason = R_ARTIFACT_REUSED if reused else R_BUILD_SUCCEEDED
        message = f"artifact {record.get('uri')} with engine key {prepared.key_short} is ready" + (
            " (reused, no build)" if reused else ""
        )
        if record.get("partial"):
            message += "; partial artifact: compile skipped, no TensorRT engine (see ArtifactComplete)"
        if record.get("stageTimings"):
            build["stageTimings"] = record.get("stageTimings")
        if job is not None:
            build.update(_job_times(job))
        build["stage"] = "done" if not reused or job is not None else None
        build["percent"] = 100 if build["stage"] else None
        status = {**base, "phase": "Ready", "artifact": _artifact_status(record), "build": build}
        conds = _conds(
            gen,
            ready=(True, R_ARTIFACT_READY, message),
            progressing=(False, reason, message),
            degraded=(False, R_ARTIFACT_READY, ""),
            planned=planned,
            artifact=artifact_complete(record),
        )
        return EngineDecision(
            "Ready", status, conds, actions, _event_for(obs.status, "Ready", reason, message, False)
        )

    # 2. a builder Job exists: follow it
    if job is not None:
        build.update(_job_times(job))
        if job_condition(job, "Complete"):
            report = latest_report(obs.pods, succeeded=True)
            record = record_from_build(prepared, report, job_name=prepared.job_name, recorded_at=now)
            actions.append(RecordArtifact(record, owned=prepared.deletes_with_engine))
            message = f"built artifact {record['uri']} (engine key {prepared.key_short})"
            if record.get("partial"):
                message += "; partial artifact: compile skipped, no TensorRT engine (see ArtifactComplete)"
            build.update(stage="done", percent=100, stageTimings=record.get("stageTimings"))
            status = {**base, "phase": "Ready", "artifact": _artifact_status(record), "build": build}
            conds = _conds(
                gen,
                ready=(True, R_ARTIFACT_READY, message),
                progressing=(False, R_BUILD_SUCCEEDED, message),
                degraded=(False, R_ARTIFACT_READY, ""),
                planned=planned,
                artifact=artifact_complete(record),
            )
            event = _event_for(obs.status, "Ready", R_BUILD_SUCCEEDED, message, False)
            return EngineDecision("Ready", status, conds, actions, event)
        if job_condition(job, "Failed"):
            failure = classify_failure(job, obs.pods)
            report = latest_report(obs.pods, succeeded=False)
            retry = (
                "deterministic: fix the spec (a new engine key starts a new build)"
                if failure.deterministic
                else f"to retry with the same spec delete Job {prepared.job_name}"
            )
            message = f"{failure.message} [{retry}]"
            build.update(
                reason=failure.reason,
                message=message,
                stage=report.stage if report else None,
                stageTimings=dict(report.stage_timings) if report and report.stage_timings else None,
            )
            status = {**base, "phase": "Failed", "artifact": None, "build": build}
            conds = _conds(
                gen,
                ready=(False, R_BUILD_FAILED, message),
                progressing=(False, failure.reason, message),
                degraded=(True, failure.reason, message),
                planned=planned,
            )
            event = _event_for(obs.status, "Failed", failure.reason, f"{R_BUILD_FAILED}: {message}", True)
            return EngineDecision("Failed", status, conds, actions, event)
        pending = unschedulable_message(obs.pods)
        if pending is not None:
            message = f"builder pod cannot be scheduled: {pending}{unschedulable_hint(prepared, pending)}"
            build.update(reason=REASON_UNSCHEDULABLE, message=message, stage="scheduling")
            status = {**base, "phase": "Building", "build": build}
            conds = _conds(
                gen,
                ready=(False, R_BUILDING, "build not finished"),
                progressing=(True, R_BUILD_UNSCHEDULABLE, message),
                degraded=(True, R_BUILD_UNSCHEDULABLE, message),
                planned=planned,
            )
            event = _event_for(obs.status, "Building", R_BUILD_UNSCHEDULABLE, message, True)
            return EngineDecision("Building", status, conds, actions, event)
        running = any((p.get("status") or {}).get("phase") == "Running" for p in obs.pods)
        reason = R_BUILD_RUNNING if running else R_BUILD_STARTED
        message = f"builder Job {prepared.job_name} " + ("running" if running else "starting")
        build.update(stage="running" if running else "starting", percent=None)
        if running and obs.progress is not None:
            build.update(obs.progress.status())
        status = {**base, "phase": "Building", "build": build}
        conds = _conds(
            gen,
            ready=(False, R_BUILDING, "build not finished"),
            progressing=(True, reason, message),
            degraded=(False, R_BUILDING, ""),
            planned=planned,
        )
        return EngineDecision(
            "Building",
            status,
            conds,
            actions,
            _event_for(obs.status, "Building", reason, message, False),
        )

    # 3. nothing yet: start a build, or wait in the queue
    if not obs.queue.may_start:
        q = obs.queue
        message = (
            f"queued at position {q.position}: {q.active} of {q.limit} concurrent builds running "
            "(operator setting maxConcurrentBuilds)"
        )
        build.update(reason=R_QUEUED, message=message, stage="queued", jobName=None)
        status = {**base, "phase": "Queued", "build": build}
        conds = _conds(
            gen,
            ready=(False, R_QUEUED, message),
            progressing=(True, R_QUEUED, message),
            degraded=(False, R_QUEUED, ""),
            planned=planned,
        )
        return EngineDecision(
            "Queued", status, conds, actions, _event_for(obs.status, "Queued", R_QUEUED, message, False)
        )
    if prepared.storage.created_by_operator and not obs.pvc_exists:
        actions.append(EnsurePVC(prepared.storage.claim_name or ""))
    actions.append(CreateBuild(prepared.job_name))
    message = f"created builder Job {prepared.job_name} for engine key {prepared.key_short}"
    build.update(jobName=prepared.job_name, stage="starting")
    status = {**base, "phase": "Building", "artifact": None, "build": build}
    conds = _conds(
        gen,
        ready=(False, R_BUILDING, "build not finished"),
        progressing=(True, R_BUILD_STARTED, message),
        degraded=(False, R_BUILDING, ""),
        planned=planned,
    )
    return EngineDecision(
        "Building",
        status,
        conds,
        actions,
        _event_for(obs.status, "Building", R_BUILD_STARTED, message, False),
    )


def _job_times(job: Mapping[str, Any]) -> dict[str, Any]:
    st = job.get("status") or {}
    out: dict[str, Any] = {
        "startTime": st.get("startTime"),
        "completionTime": st.get("completionTime"),
        "attempts": int(st.get("failed") or 0) + int(st.get("succeeded") or 0) + int(st.get("active") or 0),
    }
    return out


def unschedulable_hint(prepared: PreparedEngine, scheduler_message: str) -> str:
    """What to do about an unschedulable builder pod, from the scheduler's ``message`` ("" if none).

    About PersistentVolumeClaims ("unbound immediate PersistentVolumeClaims", ``persistentvolumeclaim
    "x" not found``): the claims the builder mounts (``spec.storage``, a ``pvc://`` model source),
    why they cannot be used and which field fixes it. About GPUs or node placement (``nvidia.com/gpu``,
    node affinity/selector, taints): the GPU request and the node label it needs. Anything else
    (e.g. ``Insufficient cpu``): no hint, the scheduler's message says it.
    """
    text = scheduler_message.lower()
    if "persistentvolumeclaim" in text:
        return f" ({_pvc_hint(prepared, scheduler_message)})"
    if any(w in text for w in ("nvidia.com/gpu", "affinity", "selector", "taint")):
        return (
            f" (needs {_gpu_request_text(prepared)} on a node labelled "
            f"nvidia.com/gpu.product={prepared.gpu.product})"
        )
    return ""


def _pvc_hint(prepared: PreparedEngine, scheduler_message: str) -> str:
    storage = prepared.storage
    claims: list[tuple[str, str]] = []  # (claim, the fix)
    if storage.kind == "pvc" and storage.claim_name:
        if storage.created_by_operator:
            fix = (
                "no StorageClass can provision it (no default StorageClass, or no provisioner): set "
                "spec.storage.createPVC.storageClassName, or use spec.storage.pvc with an existing "
                "bound claim"
                if not storage.create_storage_class
                else f"StorageClass {storage.create_storage_class!r} has not provisioned it: check that the "
                "class exists and its provisioner runs, or use spec.storage.pvc with an existing bound claim"
            )
            claims.append((storage.claim_name, fix))
        else:
            claims.append(
                (
                    storage.claim_name,
                    "bind it to a PersistentVolume (or give it a StorageClass that provisions one), or fix "
                    "spec.storage.pvc.claimName",
                )
            )
    source = prepared.spec.model.source
    if source.startswith("pvc://"):
        model_claim = source[len("pvc://") :].split("/", 1)[0]
        claims.append((model_claim, "it holds the model (spec.model.source): bind it or fix the source"))
    missing = "not found" in scheduler_message.lower()
    named = [(c, f) for c, f in claims if f'"{c}"' in scheduler_message] or claims
    if not named:
        return "a PersistentVolumeClaim the builder pod mounts is not usable"
    state = "does not exist" if missing else "is Pending (not bound)"
    return "; ".join(f"PersistentVolumeClaim {c} {state}: {f}" for c, f in named)


def _gpu_request_text(prepared: PreparedEngine) -> str:
    return f"{builder_gpus(prepared.spec)} nvidia.com/gpu"
