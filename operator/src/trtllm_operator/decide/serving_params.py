"""An LLMDeployment and the LLMEngine it serves, flattened into :class:`ServingParams`. Pure.

:func:`serving_params` maps the two raw API objects onto one frozen :class:`ServingParams` — the
settled input every serving renderer in ``render/`` is a pure function of (the same parameters
always give the same manifests, byte for byte). Like the engine's spec → build-spec mapping
(:mod:`trtllm_operator.decide.engine_spec`), it refuses what cannot be served
(:class:`ServingInputError`) before anything is rendered.

Also here: where the engine artifact is (:func:`artifact_location` for a PVC, :func:`s3_artifact`
for S3, downloaded by an init container of the serving pod) and where it is mounted in the Triton
container (:data:`ARTIFACT_MOUNT` and the directories inside it).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from engine_builder.contract import DRAFT_DIR
from engine_builder.planner import (
    DEFAULT_KV_CACHE_FREE_GPU_MEM_FRACTION,
    DEFAULT_TOKENS_PER_BLOCK,
    kv_pool_tokens,
    max_tokens_pool_blocks,
    one_sequence_kv_tokens,
    why_one_sequence,
)
from engine_builder.planner.formats import engine_paged_context_fmha
from trtllm_operator.api.deployment import LLMDeploymentSpec
from trtllm_operator.api.engine import LLMEngineSpec
from trtllm_operator.api.owners import owner_reference
from trtllm_operator.api.wire import API_VERSION, DEPLOYMENT_KIND, SHORT_KEY_LEN
from trtllm_operator.decide.storage import StorageLocation

#: Where the artifact is mounted inside the Triton container, and what the builder's package stage
#: put in it: the Triton model repository pieces, the engine (tensorrt backend: config.json +
#: rank<N>.engine), the unified checkpoint (pytorch backend) and the Hugging Face tokenizer.
ARTIFACT_MOUNT = "/artifact"
ARTIFACT_MODEL_REPOSITORY = f"{ARTIFACT_MOUNT}/triton"
ARTIFACT_ENGINE_DIR = f"{ARTIFACT_MOUNT}/engine"
ARTIFACT_CHECKPOINT_DIR = f"{ARTIFACT_MOUNT}/checkpoint"
ARTIFACT_TOKENIZER_DIR = f"{ARTIFACT_MOUNT}/tokenizer"
#: The draft engine of ``draft_tokens_external`` (engine_builder.package ``DRAFT_DIR``).
ARTIFACT_DRAFT_ENGINE_DIR = f"{ARTIFACT_MOUNT}/{DRAFT_DIR}/engine"

Backend = Literal["tensorrt", "pytorch"]


@dataclass(frozen=True)
class OwnerRef:
    """The LLMDeployment that owns every child (garbage collection, ``kubectl tree``)."""

    name: str
    uid: str
    api_version: str = API_VERSION
    kind: str = DEPLOYMENT_KIND

    def manifest(self) -> dict[str, Any]:
        return owner_reference(self.api_version, self.kind, self.name, self.uid)


@dataclass(frozen=True)
class ServerSettings:
    """Triton / TensorRT-LLM runtime knobs from ``LLMDeployment.spec.server`` (docs/reference/tensorrt-llm.md
    §4.3)."""

    kv_cache_free_gpu_mem_fraction: float = 0.9
    enable_kv_cache_reuse: bool = True
    batching_strategy: str = "inflight_fused_batching"
    batch_scheduler_policy: str = "guaranteed_no_evict"
    max_queue_delay_microseconds: int = 0
    max_queue_size: int = 0
    decoupled: bool = False
    instance_count: int = 1
    max_tokens_in_paged_kv_cache: int | None = None
    enable_chunked_context: bool = False
    shared_memory: str = "2Gi"
    #: ``spec.server.api``: triton (KServe v2 by ``tritonserver``), openai or both (Triton's
    #: OpenAI-compatible frontend, :func:`trtllm_operator.render.serving.openai_frontend_args`).
    api: str = "triton"
    served_model_name: str | None = None
    default_max_tokens: int | None = None


@dataclass(frozen=True)
class InferencePoolSettings:
    """``spec.routing.inferencePool`` when enabled: the endpoint picker it names, if any."""

    picker_service: str | None = None
    picker_port: int = 9002
    failure_mode: str = "FailClose"


@dataclass(frozen=True)
class Rollout:
    """``spec.rollout``: GPU-safe defaults — never more GPUs than the replicas own (``maxSurge: 0``)."""

    max_surge: int | str = 0
    max_unavailable: int | str = 1
    progress_deadline_seconds: int = 1800
    auto_rollback: bool = False


@dataclass(frozen=True)
class S3Artifact:
    """An artifact in S3: ``s3://<bucket>/<prefix>`` (the prefix ends in the engine key).

    Serving pods download it into a node-local emptyDir in an init container (the serving image
    carries engine-builder and thus boto3). ``secret`` names a Secret with keys
    ``AWS_ACCESS_KEY_ID`` / ``AWS_SECRET_ACCESS_KEY``; ``None`` = pod identity.
    """

    bucket: str
    prefix: str
    endpoint: str | None = None
    secret: str | None = None

    @property
    def uri(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}"


@dataclass(frozen=True)
class ServingParams:
    """Everything the serving children are rendered from.

    Fields (units in the name or stated): ``replicas`` is ``spec.replicas`` (the scale subresource,
    the single writer for replica counts); ``gpus_per_node`` is the ``nvidia.com/gpu`` capacity of one
    node of ``gpu_product`` (decides Deployment vs LeaderWorkerSet); ``artifact_claim`` /
    ``artifact_sub_path`` locate ``<storage root>/<engineKey>`` on a PVC; ``artifact_bytes`` is the
    artifact size (sizes the startup probe), ``None`` if unknown.
    """

    name: str
    namespace: str
    owner: OwnerRef
    engine_name: str
    engine_key: str
    backend: Backend
    image: str
    gpu_product: str
    artifact_claim: str
    artifact_sub_path: str
    #: Set for S3 storage (then ``artifact_claim``/``artifact_sub_path`` are empty).
    artifact_s3: S3Artifact | None = None
    replicas: int = 1
    tensor_parallelism: int = 1
    pipeline_parallelism: int = 1
    expert_parallelism: int = 1
    gpus_per_node: int = 8
    artifact_bytes: int | None = None
    #: ``status.artifact.manifestDigest`` of the engine (``sha256:<hex>``): the manifest every pod
    #: verifies the artifact against before Triton starts; ``None`` if none was recorded.
    manifest_digest: str | None = None
    max_batch_size: int = 64
    max_beam_width: int = 1
    max_num_tokens: int | None = None
    max_seq_len: int | None = None
    kv_cache_dtype: str = "auto"
    #: ``spec.build.speculativeDecoding.mode`` of the engine (draft_tokens_external: the artifact
    #: carries a draft engine, served as a second model behind the BLS).
    speculative_mode: str = "none"
    #: ``spec.build.speculativeDecoding.lookahead`` as (W, N, G) for lookahead_decoding.
    lookahead: tuple[int, int, int] | None = None
    server: ServerSettings = ServerSettings()
    rollout: Rollout = Rollout()
    cpu: str | None = None
    memory: str | None = None
    ephemeral_storage: str | None = None
    node_selector: Mapping[str, str] = field(default_factory=dict)
    tolerations: tuple[Mapping[str, Any], ...] = ()
    affinity: Mapping[str, Any] = field(default_factory=dict)
    #: Other spellings of ``gpu_product`` a node label may carry (the catalog's canonical name when
    #: the engine names an alias such as ``H100``).
    gpu_product_aliases: tuple[str, ...] = ()
    priority_class_name: str | None = None
    runtime_class_name: str | None = None
    image_pull_secrets: tuple[str, ...] = ()
    pod_labels: Mapping[str, str] = field(default_factory=dict)
    pod_annotations: Mapping[str, str] = field(default_factory=dict)
    service_type: str = "ClusterIP"
    service_annotations: Mapping[str, str] = field(default_factory=dict)
    service_labels: Mapping[str, str] = field(default_factory=dict)
    #: ``spec.routing.inferencePool`` (``None``: disabled).
    inference_pool: InferencePoolSettings | None = None

    @property
    def world_size(self) -> int:
        """MPI ranks (= GPUs) of one replica: tensor × pipeline parallelism (docs/reference/tensorrt-llm.md
        §4.4)."""
        return self.tensor_parallelism * self.pipeline_parallelism

    @property
    def short_key(self) -> str:
        return short_key(self.engine_key)

    @property
    def nodes_per_replica(self) -> int:
        """Nodes one replica spans: ceil(world size / GPUs per node)."""
        return -(-self.world_size // self.gpus_per_node)

    @property
    def multi_node(self) -> bool:
        return self.world_size > self.gpus_per_node


def short_key(engine_key: str) -> str:
    """The pod-label form of an engine key (first :data:`SHORT_KEY_LEN` hex digits)."""
    return engine_key[:SHORT_KEY_LEN]


class ServingInputError(ValueError):
    """The engine or deployment cannot be turned into serving parameters; ``reason`` is CamelCase."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


def kv_cache_refusal(
    engine_name: str,
    engine_plan: Mapping[str, Any] | None,
    fraction: float,
    max_seq_len: int | None,
    max_beam_width: int = 1,
) -> str | None:
    """The message (condition reason ``KVCacheTooSmall``) when
    ``spec.server.kvCacheFreeGpuMemFraction`` = ``fraction`` leaves a KV cache smaller than one
    sequence of the engine's ``max_seq_len`` (× ``max_beam_width``;
    :func:`engine_builder.planner.one_sequence_kv_tokens`), which TensorRT-LLM would serve with
    maxSeqLen cut (:data:`CLAMPED_AT_START`). None when it holds one, or when the engine's
    ``status.plan`` (``engine_plan``) lacks the free bytes or the bytes per token (no plan, or one
    written by an older operator): then nothing is known to check.

    The pool is the planner's (:func:`engine_builder.planner.kv_pool_tokens`) at the deployment's
    fraction over the engine plan's ``freeBytesPerGPU``. The message names the field, the value, the
    tokens it gives and the smallest fraction (rounded up to 0.01) that holds one sequence.
    """
    plan = engine_plan or {}
    free, per_token = plan.get("freeBytesPerGPU"), plan.get("kvBytesPerTokenPerGPU")
    if not max_seq_len or not isinstance(free, int) or not isinstance(per_token, int) or per_token <= 0:
        return None
    if free <= 0:  # the engine's plan does not fit at all: its own condition says so
        return None
    block = DEFAULT_TOKENS_PER_BLOCK
    tokens = kv_pool_tokens(free, fraction, per_token, block)
    need = one_sequence_kv_tokens(max_seq_len, block, max_beam_width)
    if tokens >= need:
        return None
    smallest = max(0.01, math.ceil(need * per_token / free * 100) / 100)
    while smallest <= 1 and kv_pool_tokens(free, smallest, per_token, block) < need:
        smallest = round(smallest + 0.01, 2)
    beams = f" × beam width {max_beam_width}" if max_beam_width > 1 else ""
    fix = (
        f"set spec.server.kvCacheFreeGpuMemFraction to at least {smallest:g} (the default is "
        f"{DEFAULT_KV_CACHE_FREE_GPU_MEM_FRACTION:g}), or serve an engine built with a lower "
        "spec.build.maxSeqLen"
        if smallest <= 1
        else "even all of the free memory does not hold one; serve an engine built with a lower "
        "spec.build.maxSeqLen, an FP8 KV cache or more tensor parallelism"
    )
    return (
        f"spec.server.kvCacheFreeGpuMemFraction {fraction:g} gives a KV cache of {tokens} tokens per GPU "
        f"({fraction:g} × {free / 2**30:.2f} GiB free after LLMEngine {engine_name!r}'s weights, "
        f"{per_token} bytes per token), less than one sequence of its maxSeqLen {max_seq_len}{beams} "
        f"({need} tokens); {why_one_sequence('tensorrt', max_beam_width)}. Nothing was rolled out: {fix}"
    )


#: The deployment field :func:`max_tokens_shortfall` checks.
MAX_TOKENS_FIELD = "spec.server.maxTokensInPagedKvCache"


def max_tokens_shortfall(
    max_tokens: int | None,
    max_seq_len: int | None,
    max_beam_width: int = 1,
    tokens_per_block: int = DEFAULT_TOKENS_PER_BLOCK,
    *,
    pool: int | None = None,
    backend: str = "tensorrt",
) -> tuple[str, str] | None:
    """``(message, fix)`` when ``spec.server.maxTokensInPagedKvCache`` = ``max_tokens`` (tokens) holds
    less than one sequence of the engine's ``max_seq_len`` × ``max_beam_width``
    (:func:`engine_builder.planner.one_sequence_kv_tokens`, in KV blocks of ``tokens_per_block``);
    ``None`` when it holds one, or when either is unset. The bound is compared in whole blocks, rounded
    as ``backend`` (``spec.backend``) rounds it (:func:`engine_builder.planner.max_tokens_pool_blocks`:
    up on tensorrt, down on pytorch; fresh-user trial 47 U4), and the fix's "maxSeqLen at most" is the
    longest sequence those blocks hold. The one home of this check: the LLMDeployment
    controller's serving gate (:func:`serving_params`, condition reason ``KVCacheTooSmall``), hence
    ``render``, and ``simulate`` (:func:`trtllm_operator.simulate.fleet.kv_pool_limit`). Needs no plan:
    the pool is at most ``max_tokens`` whatever the free memory. ``pool``: the free-memory fraction's
    pool in tokens, when known, named in the fix. Why it is refused:
    :func:`engine_builder.planner.why_one_sequence`."""
    if max_tokens is None or not max_seq_len:
        return None
    need = one_sequence_kv_tokens(max_seq_len, tokens_per_block, max_beam_width)
    blocks = max_tokens_pool_blocks(max_tokens, tokens_per_block, backend)
    if blocks * tokens_per_block >= need:
        return None
    beams = f" × beam width {max_beam_width}" if max_beam_width > 1 else ""
    longest = blocks // max_beam_width * tokens_per_block
    # The smallest bound that rounds to one sequence's blocks: up (tensorrt) any value above the
    # block below; down (pytorch) the whole blocks themselves.
    smallest = need if backend == "pytorch" else need - tokens_per_block + 1
    rounding = "down" if backend == "pytorch" else "up"
    of_pool = f", {pool:,} tokens" if pool is not None else ""
    fix = f"raise it to at least {smallest:,}, or leave it out (the pool is then the free-memory fraction's"
    fix += f"{of_pool})"
    if longest >= tokens_per_block:
        fix += f", or serve an engine built with spec.build.maxSeqLen at most {longest:,}"
    block_s = "block" if blocks == 1 else "blocks"
    return (
        f"{max_tokens:,} {'token' if max_tokens == 1 else 'tokens'} ({blocks:,} KV {block_s} of "
        f"{tokens_per_block}: {backend} rounds it {rounding} to whole blocks) is less than one sequence of "
        f"maxSeqLen {max_seq_len:,}{beams} ({need:,} tokens in KV blocks of {tokens_per_block}); "
        f"{why_one_sequence(backend, max_beam_width)}",
        fix,
    )


def artifact_location(engine: Mapping[str, Any]) -> tuple[str, str]:
    """``(claim name, sub path)`` of a Ready engine's artifact directory ``<root>/<engineKey>``.

    From ``status.artifact.uri`` (``pvc://<claim>/<path>``); without one, from ``spec.storage``
    (``pvc.claimName`` + ``subPath``, or the operator-created claim,
    :meth:`~trtllm_operator.decide.storage.StorageLocation.created_pvc_name`).
    Errors: :class:`ServingInputError` ``ArtifactUnsupported`` for S3 storage (this function locates
    PVC artifacts only; an S3 artifact is served through :func:`s3_artifact`, which an init container
    of the serving pod downloads into a node-local volume) or when no location can be derived.
    """
    status = engine.get("status") or {}
    key = status.get("engineKey") or ""
    uri = (status.get("artifact") or {}).get("uri") or ""
    if uri.startswith("pvc://"):
        claim, _, path = uri[len("pvc://") :].partition("/")
        if claim and path:
            return claim, path.strip("/")
    storage = (engine.get("spec") or {}).get("storage") or {}
    if uri.startswith("s3://") or storage.get("s3"):
        raise ServingInputError("ArtifactUnsupported", "the engine's artifact is in S3, not on a PVC")
    if storage.get("pvc"):
        sub = (storage["pvc"].get("subPath") or "").strip("/")
        return storage["pvc"]["claimName"], f"{sub}/{key}" if sub else key
    if storage.get("createPVC"):
        return StorageLocation.created_pvc_name(engine["metadata"]["name"]), key
    raise ServingInputError(
        "ArtifactUnsupported", "the engine reports no artifact location (status.artifact.uri)"
    )


def s3_artifact(engine: Mapping[str, Any]) -> S3Artifact | None:
    """The engine's artifact as an :class:`S3Artifact` when its storage is S3, else ``None``."""
    status = engine.get("status") or {}
    s3 = ((engine.get("spec") or {}).get("storage") or {}).get("s3")
    if not s3:
        return None
    uri = (status.get("artifact") or {}).get("uri") or ""
    if uri.startswith("s3://"):
        bucket, _, prefix = uri[len("s3://") :].partition("/")
    else:
        bucket = s3["bucket"]
        prefix = "/".join(
            p for p in (str(s3.get("prefix", "trtllm-engines")).strip("/"), status["engineKey"]) if p
        )
    secret = (s3.get("credentialsSecretRef") or {}).get("name")
    return S3Artifact(bucket, prefix.strip("/"), s3.get("endpoint"), secret)


def serving_params(
    deployment: Mapping[str, Any],
    engine: Mapping[str, Any],
    *,
    gpus_per_node: int,
    gpu_product_aliases: tuple[str, ...] = (),
) -> ServingParams:
    """Flatten an LLMDeployment and its Ready LLMEngine (raw API objects) into :class:`ServingParams`.

    The server image is ``spec.server.image`` or the engine's ``spec.runtime.image``; the engine's
    ``build.maxBatchSize`` (or the planner's recommendation in ``status.plan``) sizes Triton's
    batch. Errors: :class:`ServingInputError`; ``pydantic.ValidationError`` for a malformed spec.
    """
    dmeta, emeta = deployment["metadata"], engine["metadata"]
    dspec = LLMDeploymentSpec.model_validate(deployment.get("spec") or {})
    espec = LLMEngineSpec.model_validate(engine.get("spec") or {})
    estatus = engine.get("status") or {}
    s3 = s3_artifact(engine)
    claim, sub_path = ("", "") if s3 else artifact_location(engine)
    recommended = ((estatus.get("plan") or {}).get("recommended")) or {}
    la = espec.build.speculative_decoding.lookahead
    server, sched, rollout = dspec.server, dspec.scheduling, dspec.rollout
    # Audit B7: KV-cache reuse and chunked context need an engine with paged context FMHA; TensorRT-LLM's
    # executor turns both off silently without it (engine_builder.planner.formats
    # engine_paged_context_fmha). Reuse is on by default, so it follows the engine (rendered false);
    # chunked context is asked for explicitly, so asking for it here is refused.
    quant = espec.quantization
    paged_context_fmha = engine_paged_context_fmha(
        espec.backend, espec.build.paged_context_fmha, quant.format, quant.kv_cache_dtype
    )
    if server.enable_chunked_context and not paged_context_fmha:
        raise ServingInputError(
            "PagedContextFMHARequired",
            f"spec.server.enableChunkedContext is true but LLMEngine {emeta['name']!r} was built without "
            f"paged context FMHA (build.pagedContextFMHA {str(espec.build.paged_context_fmha).lower()}, "
            f"format {quant.format}, kvCacheDtype {quant.kv_cache_dtype}), and TensorRT-LLM turns chunked "
            "context off for such an engine; set enableChunkedContext: false, or serve an engine built "
            "with build.pagedContextFMHA: true",
        )
    max_seq_len = espec.build.max_seq_len or recommended.get("maxSeqLen")
    if espec.backend == "tensorrt":
        short = kv_cache_refusal(
            emeta["name"],
            estatus.get("plan"),
            server.kv_cache_free_gpu_mem_fraction,
            max_seq_len,
            espec.build.max_beam_width,
        )
        if short is not None:
            raise ServingInputError("KVCacheTooSmall", short)
    # Fresh-user trials 44 F26 / 45 A1: the bound needs no plan, and the pytorch backend clamps alike.
    bounded = max_tokens_shortfall(
        server.max_tokens_in_paged_kv_cache, max_seq_len, espec.build.max_beam_width, backend=espec.backend
    )
    if bounded is not None:
        message, fix = bounded
        raise ServingInputError(
            "KVCacheTooSmall",
            f"{MAX_TOKENS_FIELD} {server.max_tokens_in_paged_kv_cache}: {message} (LLMEngine "
            f"{emeta['name']!r}). Nothing was rolled out: {fix}",
        )
    return ServingParams(
        name=dmeta["name"],
        namespace=dmeta["namespace"],
        owner=OwnerRef(dmeta["name"], dmeta.get("uid", "")),
        engine_name=emeta["name"],
        engine_key=estatus["engineKey"],
        backend=espec.backend,
        image=server.image or espec.runtime.image,
        gpu_product=espec.gpu.product,
        gpu_product_aliases=gpu_product_aliases,
        artifact_claim=claim,
        artifact_sub_path=sub_path,
        artifact_s3=s3,
        replicas=dspec.replicas,
        tensor_parallelism=espec.parallelism.tensor,
        pipeline_parallelism=espec.parallelism.pipeline,
        expert_parallelism=espec.parallelism.expert,
        gpus_per_node=gpus_per_node,
        artifact_bytes=(estatus.get("artifact") or {}).get("sizeBytes"),
        manifest_digest=(estatus.get("artifact") or {}).get("manifestDigest"),
        max_batch_size=espec.build.max_batch_size or recommended.get("maxBatchSize") or 64,
        max_beam_width=espec.build.max_beam_width,
        max_num_tokens=espec.build.max_num_tokens or recommended.get("maxNumTokens"),
        max_seq_len=max_seq_len,
        kv_cache_dtype=espec.quantization.kv_cache_dtype,
        speculative_mode=espec.build.speculative_decoding.mode,
        lookahead=(la.window_size, la.ngram_size, la.verification_set_size) if la is not None else None,
        server=ServerSettings(
            kv_cache_free_gpu_mem_fraction=server.kv_cache_free_gpu_mem_fraction,
            enable_kv_cache_reuse=server.enable_kv_cache_reuse and paged_context_fmha,
            batching_strategy=server.batching_strategy,
            batch_scheduler_policy=server.batch_scheduler_policy,
            max_queue_delay_microseconds=server.max_queue_delay_microseconds,
            max_queue_size=server.max_queue_size,
            decoupled=server.decoupled,
            instance_count=server.instance_count,
            max_tokens_in_paged_kv_cache=server.max_tokens_in_paged_kv_cache,
            enable_chunked_context=server.enable_chunked_context,
            shared_memory=server.resources.shared_memory,
            api=server.api,
            served_model_name=server.openai.served_model_name,
            default_max_tokens=server.openai.default_max_tokens,
        ),
        rollout=Rollout(
            max_surge=rollout.max_surge,
            max_unavailable=rollout.max_unavailable,
            progress_deadline_seconds=rollout.progress_deadline_seconds,
            auto_rollback=rollout.auto_rollback,
        ),
        cpu=server.resources.cpu,
        memory=server.resources.memory,
        ephemeral_storage=server.resources.ephemeral_storage,
        node_selector=dict(sched.node_selector or {}),
        tolerations=tuple(t.model_dump(by_alias=True, exclude_none=True) for t in sched.tolerations or ()),
        affinity=dict(sched.affinity or {}),
        priority_class_name=sched.priority_class_name,
        runtime_class_name=sched.runtime_class_name,
        image_pull_secrets=tuple(espec.runtime.image_pull_secrets or ()),
        pod_labels=dict(dspec.pod_labels or {}),
        pod_annotations=dict(dspec.pod_annotations or {}),
        service_type=dspec.service.type,
        service_annotations=dict(dspec.service.annotations or {}),
        service_labels=dict(dspec.service.labels or {}),
        inference_pool=_inference_pool(dspec),
    )


def _inference_pool(dspec: LLMDeploymentSpec) -> InferencePoolSettings | None:
    pool = dspec.routing.inference_pool
    if not pool.enabled:
        return None
    ref = pool.endpoint_picker_ref
    if ref is None:
        return InferencePoolSettings()
    return InferencePoolSettings(ref.name, ref.port, ref.failure_mode)
