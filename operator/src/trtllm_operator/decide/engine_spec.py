"""An LLMEngine spec mapped to its build, pure: validate, map to the builder's BuildSpec, key it.

:func:`prepare_engine` validates the spec against the GPU catalog and (when the model's
``config.json`` is known) the capacity planner, maps it to the builder's
:class:`~engine_builder.contract.BuildSpec` (:func:`to_build_spec`), computes the engine key and
resolves the storage (:mod:`trtllm_operator.decide.storage`). It returns a
:class:`PreparedEngine` — everything that follows from the spec alone — or an
:class:`InvalidEngine` naming the field and the fix. Never raises for bad input.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from engine_builder.contract import (
    DRAFT_TOKEN_ENV,
    BuildLimits,
    BuildSpec,
    Calibration,
    Lookahead,
    ModelSource,
    Output,
    Parallelism,
    Quantization,
    SpeculativeDecoding,
    Target,
    lookahead_max_draft_len,
)
from engine_builder.planner import (
    GPUSpec,
    Plan,
    PlanInputError,
    format_sm_issue,
    lookup,
    plan_from_build_spec,
)
from engine_builder.planner.formats import (
    AWQ_FORMATS,
    AWQ_MAX_SAMPLES,
    BUNDLED_CALIBRATION_DATASET,
    BUNDLED_CALIBRATION_SAMPLES,
    DEFAULT_CALIBRATION_DATASET,
    default_calibration_samples,
    kv_cache_dtype_choices,
    kv_info,
    runtime_cannot_load,
    runtime_lacks_backend,
)
from trtllm_operator.api import LLMEngineSpec
from trtllm_operator.api.engine import builder_gpus
from trtllm_operator.api.wire import GPU_RESOURCE
from trtllm_operator.decide.compatibility import NodeGPUs
from trtllm_operator.decide.image_catalog import image_versions
from trtllm_operator.decide.storage import (
    StorageLocation,
    builder_job_name,
    cache_entry_name,
    storage_location,
)

#: ``InvalidEngine.reason`` (and the Event / condition reason of an invalid spec).
R_INVALID_SPEC = "InvalidSpec"
#: ``InvalidEngine.reason`` when the model does not fit the target GPU's memory.
R_DOES_NOT_FIT = "DoesNotFit"
#: Time budget of one capacity plan inside a reconcile (seconds of the planning thread's CPU time,
#: not wall clock: engine_builder.planner.plan.plan). A plan of a real model takes milliseconds
#: (the planner bounds every config.json integer); the budget keeps a pathological config from
#: holding a reconcile thread.
PLAN_BUDGET_SECONDS = 2.0


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
    #: GPUs of one node of the target product (from the nodes, else the catalog).
    node_gpus: NodeGPUs | None = None

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
    la = sd.lookahead
    draft = (
        ModelSource(uri=sd.draft_model.source, revision=sd.draft_model.revision, token_env=DRAFT_TOKEN_ENV)
        if sd.draft_model
        else None
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
                num_samples=q.calibration.num_samples
                if q.calibration.num_samples is not None
                else default_calibration_samples(q.format),
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
                mode=sd.mode,
                # lookahead_decoding: derived from (W, N, G), never given (API rule).
                max_draft_len=lookahead_max_draft_len(la.window_size, la.ngram_size, la.verification_set_size)
                if la is not None
                else sd.max_draft_len or 0,
                draft_model=draft,
                lookahead=Lookahead(
                    window_size=la.window_size,
                    ngram_size=la.ngram_size,
                    verification_set_size=la.verification_set_size,
                )
                if la is not None
                else None,
            ),
            workers=spec.build.workers,
        ),
        target=Target(gpu_product=gpu.product, sm=gpu.sm),
        output=Output(artifact_root=storage.artifact_root()),
    )


def _s3_secret_clash(spec: LLMEngineSpec, storage: StorageLocation) -> str | None:
    """The builder pod has one set of AWS variables (render.builder_job): an S3 draft model whose
    Secret differs from another S3 Secret of the build (the model's, the storage's) is refused."""
    draft = spec.build.speculative_decoding.draft_model
    if draft is None or draft.credentials_secret_ref is None or not draft.source.startswith("s3://"):
        return None
    mine = draft.credentials_secret_ref.name
    ref = spec.model.credentials_secret_ref
    others = {ref.name} if ref is not None and spec.model.source.startswith("s3://") else set()
    if storage.kind == "s3" and storage.s3_secret:
        others.add(storage.s3_secret)
    if others - {mine}:
        return (
            f"Secret {mine!r} differs from the S3 Secret {sorted(others - {mine})[0]!r} the build also uses; "
            "the builder pod has one set of AWS credentials: use one Secret for every S3 location"
        )
    return None


def _pydantic_field(exc: ValidationError) -> tuple[str, str]:
    err = exc.errors()[0]
    path = "spec." + ".".join(str(p) for p in err["loc"]) if err["loc"] else "spec"
    return path, f"{err['msg']} (got {err.get('input')!r})"


def _calibration_problem(spec: LLMEngineSpec) -> InvalidEngine | None:
    """The calibration sample limits the CRD's CEL rules enforce, for specs that bypassed them."""
    q = spec.quantization
    n = q.calibration.num_samples
    field = "spec.quantization.calibration.numSamples"
    if n is not None and q.format in AWQ_FORMATS and n > AWQ_MAX_SAMPLES:
        return InvalidEngine(
            field,
            f"format {q.format} calibrates on at most {AWQ_MAX_SAMPLES} samples but numSamples is {n}; "
            f"set it to {AWQ_MAX_SAMPLES} or less, or leave it unset",
        )
    samples = n if n is not None else default_calibration_samples(q.format)
    if q.calibration.dataset == BUNDLED_CALIBRATION_DATASET and samples > BUNDLED_CALIBRATION_SAMPLES:
        return InvalidEngine(
            field,
            f"dataset {BUNDLED_CALIBRATION_DATASET} holds {BUNDLED_CALIBRATION_SAMPLES} samples but "
            f"{samples} are asked for; set numSamples to {BUNDLED_CALIBRATION_SAMPLES} or less, or use "
            f"dataset {DEFAULT_CALIBRATION_DATASET}",
        )
    return None


def prepare_engine(
    name: str,
    raw_spec: Mapping[str, Any],
    *,
    catalog_extra: Mapping[str, GPUSpec] | None = None,
    hf_config: Mapping[str, Any] | None = None,
    node_gpus: NodeGPUs | None = None,
    config_note: str | None = None,
    namespace: str | None = None,
) -> PreparedEngine | InvalidEngine:
    """Validate and map one LLMEngine spec. Never raises for bad input: returns :class:`InvalidEngine`.

    ``catalog_extra``: GPU catalog extension (operator setting). ``hf_config``: the model's
    ``config.json`` when the operator can see it; without it only the catalog rules are checked here
    (the builder's ``plan`` stage checks the rest and fails with ``BadSpec``). ``node_gpus``: GPUs of
    one node of the target product as read from the cluster's nodes (None: the catalog's
    ``gpusPerNode``); the plan's one-node rule uses it, and a builder pod that requests more GPUs
    (:func:`~trtllm_operator.api.engine.builder_gpus`) than the largest such node has is refused
    (``DoesNotFit``) — a pod can never span nodes. ``config_note``: why ``hf_config`` is None (the
    ``Planned=Unknown`` condition says it). ``namespace``: the LLMEngine's namespace, the last segment
    of an S3 artifact root (:meth:`~trtllm_operator.decide.storage.StorageLocation.artifact_root`);
    the operator always passes it, None only in offline tools that never build.
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
    too_old = format_sm_issue(fmt, gpu, spec.backend)  # the planner's rule and words, as `plan` says them
    if too_old is not None:
        return InvalidEngine(too_old.field, f"{too_old.message} Fix: {too_old.fix}")
    kv = spec.quantization.kv_cache_dtype
    kv_min_sm = kv_info(kv).min_sm
    if gpu.sm < kv_min_sm:
        # only the KV dtypes the API admits next to this format, backend and pagedContextFMHA
        # (an INT8 KV cache only with build.pagedContextFMHA: false on the tensorrt backend)
        choices = kv_cache_dtype_choices(fmt, gpu.sm, spec.backend, spec.build.paged_context_fmha)
        return InvalidEngine(
            "spec.quantization.kvCacheDtype",
            f"an {kv.upper()} KV cache needs compute capability {kv_min_sm / 10:.1f}+ but {gpu.product} "
            f"is SM {gpu.sm}; use kvCacheDtype {' or '.join(choices)} on this GPU.",
        )
    nodes = node_gpus or NodeGPUs(gpu.gpus_per_node, 0)
    wanted = builder_gpus(spec)
    if nodes.from_nodes and wanted > nodes.count:
        field = "spec.gpu.resources.gpus" if spec.gpu.resources.gpus else "spec.build.workers"
        return InvalidEngine(
            field,
            f"the builder pod would request {wanted} {GPU_RESOURCE} but a {gpu.product} node has "
            f"{nodes.describe(spec.gpu.product)}; a pod runs on one node. Fix: set {field} to at most "
            f"{nodes.count} (trtllm-build builds the ranks one after another on one GPU per worker).",
            R_DOES_NOT_FIT,
        )
    runtime = image_versions(spec.runtime.image)
    lacks = runtime_lacks_backend(spec.backend, runtime.tensorrt_llm if runtime else None)
    if runtime is not None and lacks:
        return InvalidEngine(
            "spec.backend",
            f"{lacks}: spec.runtime.image {spec.runtime.image} carries TensorRT-LLM {runtime.tensorrt_llm} "
            f"(per {runtime.source}). Fix: use a runtime image with a newer TensorRT-LLM (e.g. "
            "nvcr.io/nvidia/tritonserver:26.03-trtllm-python-py3), or backend: tensorrt.",
        )
    problem = runtime_cannot_load(fmt, runtime.tensorrt_llm if runtime else None)
    if runtime is not None and problem:
        return InvalidEngine(
            "spec.quantization.format",
            f"{problem}: spec.runtime.image {spec.runtime.image} carries TensorRT-LLM {runtime.tensorrt_llm} "
            f"(per {runtime.source}), which could not load the checkpoint; use a runtime image with a newer "
            "TensorRT-LLM, or another format (fp8 needs no newer runtime).",
        )
    calibration = _calibration_problem(spec)
    if calibration is not None:
        return calibration
    storage = storage_location(name, spec.storage, namespace)
    clash = _s3_secret_clash(spec, storage)
    if clash is not None:
        return InvalidEngine("spec.build.speculativeDecoding.draftModel.credentialsSecretRef", clash)
    build_spec = to_build_spec(spec, gpu, storage)
    plan: Plan | None = None
    note: str | None = None
    if hf_config is not None:
        try:
            plan = plan_from_build_spec(
                build_spec,
                hf_config,
                catalog_extra,
                budget_seconds=PLAN_BUDGET_SECONDS,
                gpus_per_node=nodes.count,
            )
        except PlanInputError as exc:
            return InvalidEngine(exc.field, exc.message)
        if not plan.fits:
            first = plan.reasons[0]
            memory = (
                first.field in ("spec.parallelism.tensor", "spec.build.maxSeqLen")
                and "exceed" in first.message
            )
            pieces = [f"{first.message} Fix: {first.fix}"]
            pieces += [f"{r.field}: {r.message} Fix: {r.fix}" for r in plan.reasons[1:]]
            message = " ".join(p if p.endswith(".") else p + "." for p in pieces)
            return InvalidEngine(first.field, message, R_DOES_NOT_FIT if memory else R_INVALID_SPEC, plan)
    else:
        why = config_note or "the model's config.json is not available to the operator"
        note = f"{why}; the builder plans at its plan stage"
    return PreparedEngine(
        name=name,
        spec=spec,
        gpu=gpu,
        build_spec=build_spec,
        key=build_spec.engine_key(),
        storage=storage,
        plan=plan,
        plan_note=note,
        node_gpus=nodes,
    )


def _not_fit_note(plan: Plan) -> str:
    """``status.plan.recommended.note`` of a plan that does not fit: never left empty — the
    alternatives the planner found (each alone enough), or why none exists and what to change."""
    if any(r.kind == "invalid" for r in plan.reasons):
        return (
            "the spec is invalid (reasons): fix the fields named there; limits are recommended once it "
            "plans. maxNumTokens/maxSeqLen are the values it was planned with"
        )
    rec = plan.recommended
    where = f"on {plan.gpu_product} at tensor {plan.tp} × pipeline {plan.pp}"
    options = []
    if rec.get("tensor_parallelism"):
        options.append(f"spec.parallelism.tensor: {rec['tensor_parallelism']}")
    if rec.get("gpu_product"):
        options.append(f"spec.gpu.product: {rec['gpu_product']}")
    memory = "reasons: " + ", ".join(r.field for r in plan.reasons)
    if options:
        return (
            f"does not fit {where} ({memory}); each of these alone fits with the same build limits: "
            + "; ".join(options)
            + ". Other ways: the fixes in reasons (quantize further, a lower maxSeqLen, an FP8 KV cache)"
        )
    return (
        f"does not fit {where} ({memory}), and neither more tensor parallelism (up to the GPUs of one "
        "node) nor a larger GPU of the catalog fits it with the same build limits: quantize further "
        "(spec.quantization.format), lower spec.build.maxSeqLen / maxBatchSize, use an FP8 KV cache, "
        "or add pipeline parallelism (reasons say which part is short)"
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
        "freeBytesPerGPU": plan.free_bytes_per_gpu,
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
    # Explicit None for every key a plan may leave out: the status is merge-patched, so a rule, a
    # refusal's reasons and alternatives, or warnings of an earlier plan are removed, not kept.
    out["recommended"].update(
        tensorParallelism=None if plan.fits else rec.get("tensor_parallelism"),
        gpuProduct=None if plan.fits else rec.get("gpu_product"),
        note=None if plan.fits else _not_fit_note(plan),
    )
    out["maxSeqLenRule"] = plan.max_seq_len_rule
    out["reasons"] = [str(r) for r in plan.reasons][:32] or None
    out["warnings"] = plan_warnings(plan) or None
    return out


def hf_config_name(source: str) -> str | None:
    """The file name of a model's ``config.json`` in a directory of them (the operator's
    ``hfConfigDir``, ``render --model-config DIR``, ``cache spec --hf-config-dir``):
    ``<org>__<name>.json`` for an ``hf://<org>/<name>`` ``spec.model.source``; ``None`` for a source
    that names no Hugging Face repository (a PVC or S3 checkpoint)."""
    if not source.startswith("hf://"):
        return None
    return source[len("hf://") :].replace("/", "__") + ".json"


def model_config_mismatch(path: str, source: str) -> str | None:
    """Whether the ``--model-config`` at ``path`` (a ``config.json``, or a directory holding one) is the
    model of ``spec.model.source`` ``source``: the reason it is another model's (its ``_name_or_path``
    names another ``<org>/<name>``, or its file name is another model's ``<org>__<name>.json``,
    :func:`hf_config_name`); ``""`` when it names this one; ``None`` when nothing in it says which model
    it is, or ``source`` is not ``hf://``. The one home of this comparison: ``simulate --deployment``
    and ``render`` (fresh-user trials 45 A11, 47 U3)."""
    import json  # noqa: PLC0415
    from pathlib import Path  # noqa: PLC0415

    expected = hf_config_name(source)
    if expected is None:
        return None
    file = Path(path)
    named: str | None = None
    try:
        loaded = json.loads((file / "config.json" if file.is_dir() else file).read_text())
        if isinstance(loaded, dict) and isinstance(loaded.get("_name_or_path"), str):
            named = loaded["_name_or_path"]
    except (OSError, ValueError):  # the plan refuses an unreadable config by name
        pass
    repo = source[len("hf://") :]
    if named is not None and "/" in named and named != repo:
        return f"its _name_or_path is {named}"
    if file.suffix == ".json" and "__" in file.name and file.name != expected:
        return f"its file name is another model's than {expected} (the operator's hfConfigDir names)"
    if named == repo or file.name == expected:
        return ""
    return None


def plan_warnings(plan: Plan | None) -> list[str]:
    """``status.plan.warnings``: the planner's warnings (:attr:`Plan.warnings`, each
    ``"<field>: <message> Fix: <fix>"``; docs/planner.md "Warnings"), at most 32; empty without a plan."""
    return [str(w) for w in plan.warnings][:32] if plan is not None else []
