"""``LLMEngine``: what to build — model, quantization, parallelism, build limits, target GPU, storage.

Spec fields mirror the TensorRT-LLM flags they control (reference ``tensorrt-llm.md`` §1–§3):
``quantization.format`` is ``quantize.py --qformat``, ``build.maxNumTokens`` is
``trtllm-build --max_num_tokens`` and so on, so a user who knows TensorRT-LLM recognises them.
Limits left unset are derived by the capacity planner and reported in ``status.plan``.

Immutability (a deliberate choice, see docs/api.md): no engine-defining field is immutable. A GitOps
edit of the quantization, parallelism or runtime image changes the engine key, and the operator
builds the new engine next to the old one; deployments roll over when it is ready. Only the storage
*location* is fixed once set (the artifacts already written there would otherwise be orphaned);
``createPVC.size`` may grow.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import Field, model_validator

from engine_builder.planner import BUILD_LIMITS, MAX_GPUS_PER_REPLICA, PARALLELISM_LIMITS
from engine_builder.planner.formats import (
    AWQ_FORMATS,
    AWQ_MAX_SAMPLES,
    BUNDLED_CALIBRATION_DATASET,
    BUNDLED_CALIBRATION_SAMPLES,
    CNN_DAILYMAIL_COLUMN,
    CNN_DAILYMAIL_CONFIG,
    DEFAULT_CALIBRATION_BATCH_SIZE,
    DEFAULT_CALIBRATION_DATASET,
    DEFAULT_CALIBRATION_MAX_SEQ_LENGTH,
    DEFAULT_CALIBRATION_SAMPLES,
    FP8_CONTEXT_FMHA_FORMATS,
    KV_CACHE_DTYPE_TABLE,
    PYTORCH_KV_REFUSAL,
    QUANT_FORMAT_TABLE,
    TENSORRT_EP_REFUSAL,
    KVCacheDtype,
    QuantFormat,
    describe_formats,
    format_refusal,
    formats_without_backend,
    kv_dtypes_without_backend,
    paged_context_fmha_refusal,
)
from trtllm_operator.api.common import (
    DNS1123_SUBDOMAIN_FMT,
    LABEL_VALUE,
    ApiModel,
    ClassName,
    Conditions,
    CPUQuantity,
    ImageReference,
    Labels,
    ObjectName,
    PodAnnotations,
    Quantity,
    SecretKeyRef,
    Tolerations,
    apparmor_containers_rule,
    cel,
    fraction_rule,
    image_rules,
    lit,
    model_config,
    mx,
    relative_path_rules,
    reserved_label_keys_rule,
)
from trtllm_operator.api.wire import (
    BENCHMARK_CONTAINER,
    BUILDER_CONTAINER,
    GPU_PRODUCT_LABEL,
)

Backend = Literal["tensorrt", "pytorch"]
GemmPlugin = Literal["auto", "float16", "bfloat16", "float32", "disable"]
SpeculativeMode = Literal["none", "draft_tokens_external", "medusa", "eagle", "lookahead_decoding"]
EnginePhase = Literal["Pending", "Planning", "Queued", "Building", "Unschedulable", "Ready", "Failed"]
ReclaimPolicy = Literal["Retain", "Delete"]

__all__ = ["AWQ_FORMATS", "KVCacheDtype", "QuantFormat"]  # the format table (engine_builder) is their home


def _cel_list(names: tuple[str, ...]) -> str:
    """A CEL list literal of strings: ``['a', 'b']``."""
    return "[" + ", ".join(f"'{n}'" for n in names) + "]"


def _or(names: tuple[str, ...]) -> str:
    return " or ".join(names)


#: Formats that run only on data-centre Blackwell, and KV dtypes TensorRT-LLM refuses there.
_BLACKWELL_ONLY = tuple(f for f, i in QUANT_FORMAT_TABLE.items() if i.min_sm >= 100)
_NOT_ON_BLACKWELL_KV = tuple(k for k, i in KV_CACHE_DTYPE_TABLE.items() if i.sm100_unsupported)
#: Formats with which trtllm-build keeps paged context FMHA on for an FP8 KV cache.
_FP8_CONTEXT_FMHA = FP8_CONTEXT_FMHA_FORMATS
_PYTORCH_NO_FORMAT = formats_without_backend("pytorch")
_TRTLLM_NO_FORMAT = formats_without_backend("tensorrt")
_PYTORCH_NO_KV = kv_dtypes_without_backend("pytorch")

# Model source URIs (docs/api.md "Model sources"): each mistake gets its own message.
#: Hugging Face repo ids as huggingface_hub 2.4.0 ``utils/_validators.py`` ``validate_repo_id`` checks
#: them (namespace required here): [A-Za-z0-9._-] parts of 1–96 characters starting and ending with a
#: letter, digit or '_', no '--' or '..', not ending in '.git'.
_HF_PART = r"[A-Za-z0-9_]([A-Za-z0-9_.-]{0,94}[A-Za-z0-9_])?"
HF_SOURCE = rf"^hf://{_HF_PART}/{_HF_PART}$"
#: pvc://<claim>[/<path>]: a PVC name (DNS-1123 subdomain, ValidatePersistentVolumeName) and a path
#: inside it without '..' segments (the builder mounts the claim and must stay inside it).
PVC_SOURCE = rf"^pvc://{DNS1123_SUBDOMAIN_FMT}(/.*)?$"
#: s3://<bucket>[/<prefix>]: Amazon S3 general purpose bucket naming rules
#: (https://docs.aws.amazon.com/AmazonS3/latest/userguide/bucketnamingrules.html): 3–63 lowercase
#: letters, digits, '.' and '-', starting and ending with a letter or digit, no two adjacent periods,
#: not an IP address, no ``xn--`` prefix.
S3_BUCKET = r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]"
S3_BUCKET_HINT = (
    "3-63 lowercase letters, digits, '.' and '-', starting and ending with a letter or digit, no '..', "
    "not an IP address, not starting with xn--"
)


def s3_bucket_ok(expr: str, *, scheme: str = "") -> str:
    """CEL boolean: ``expr`` (a bare bucket, or a ``scheme``-prefixed URI) names a valid S3 bucket."""
    start, end = f"^{scheme}", "(/|$)" if scheme else "$"
    return (
        f"{expr}.matches({lit(start + S3_BUCKET + end)}) && !{expr}.matches({lit(start + '[^/]*[.][.]')}) "
        f"&& !{expr}.matches({lit(start + '[0-9]+[.][0-9]+[.][0-9]+[.][0-9]+' + end)}) "
        f"&& !{expr}.startsWith({lit(scheme + 'xn--')})"
    )


_SOURCE_FORMS = "hf://<org>/<name>, pvc://<claim>[/<path>] or s3://<bucket>[/<prefix>]"


class ModelSpec(ApiModel):
    """The Hugging Face-format checkpoint to build from."""

    model_config = model_config(
        cel(
            "self.source.matches('^(hf|pvc|s3)://')",
            f"source must start with hf://, pvc:// or s3://: {_SOURCE_FORMS}, e.g. "
            "hf://meta-llama/Llama-3.1-8B-Instruct",
            message_expression=mx(
                f'source "%s" has no supported scheme: use {_SOURCE_FORMS} (a Hugging Face URL '
                "https://huggingface.co/<org>/<name> is written hf://<org>/<name>)",
                "self.source",
            ),
            field_path=".source",
        ),
        cel(
            f"!self.source.startsWith('hf://') || (self.source.matches({lit(HF_SOURCE)}) && "
            "!self.source.contains('--') && !self.source.contains('..') && !self.source.endsWith('.git'))",
            "an hf:// source must be hf://<org>/<name>, a Hugging Face repo id: letters, digits, '.', '_' "
            "and '-' (no '--' or '..', not ending in .git), e.g. hf://meta-llama/Llama-3.1-8B-Instruct",
            message_expression=mx(
                'source "%s" is not a Hugging Face repo: write hf://<org>/<name> with letters, digits, . _ '
                "and - (no -- or .., no .git, no revision or file path: put the revision in revision), "
                "e.g. hf://meta-llama/Llama-3.1-8B-Instruct",
                "self.source",
            ),
            field_path=".source",
        ),
        cel(
            f"!self.source.startsWith('pvc://') || (self.source.matches({lit(PVC_SOURCE)}) && "
            "self.source.matches('^pvc://[^/]{1,253}(/|$)'))",
            "the claim of a pvc:// source must be a PersistentVolumeClaim name (lowercase letters, "
            "digits, '-' and '.'), e.g. pvc://models/llama-3.1-8b",
            message_expression=mx(
                'source "%s" does not name a PersistentVolumeClaim: write pvc://<claim>[/<path>] where '
                "<claim> is the PVC name in this namespace (lowercase letters, digits, - and .), e.g. "
                "pvc://models/llama-3.1-8b",
                "self.source",
            ),
            field_path=".source",
        ),
        cel(
            f"!self.source.startsWith('pvc://') || !self.source.matches({lit('^pvc://[^/]*/(.*/)?[.][.](/|$)')})",
            "the path of a pvc:// source must not contain a '..' segment (it would leave the claim)",
            message_expression=mx(
                'source "%s" leaves its claim through a .. segment: give the directory inside the PVC, '
                "e.g. pvc://models/llama-3.1-8b",
                "self.source",
            ),
            field_path=".source",
        ),
        cel(
            f"!self.source.startsWith('s3://') || ({s3_bucket_ok('self.source', scheme='s3://')})",
            f"the bucket of an s3:// source must be a valid S3 bucket name: {S3_BUCKET_HINT}",
            message_expression=mx(
                f'source "%s" does not name a valid S3 bucket: write s3://<bucket>[/<prefix>] where the '
                f"bucket has {S3_BUCKET_HINT}",
                "self.source",
            ),
            field_path=".source",
        ),
        cel(
            "!has(self.revision) || self.source.startsWith('hf://')",
            "revision is only used with hf:// sources; remove it, or pin the content of the "
            "PVC or S3 prefix instead",
            field_path=".revision",
        ),
        cel(
            "!has(self.credentialsSecretRef) || !self.source.startsWith('pvc://')",
            "credentialsSecretRef is not used with pvc:// sources; remove it",
            field_path=".credentialsSecretRef",
        ),
    )

    source: str = Field(
        min_length=6,
        max_length=512,
        description="Where the checkpoint comes from, exactly one of: hf://<org>/<name> (Hugging Face "
        "Hub repo), pvc://<claim>[/<path>] (a directory in a PersistentVolumeClaim in this namespace), "
        "s3://<bucket>[/<prefix>] (an S3-compatible bucket prefix).",
    )
    revision: str | None = Field(
        default=None,
        min_length=1,
        max_length=128,
        description="Hugging Face revision: a commit sha (recommended: reproducible engine keys), "
        "branch or tag. Only for hf:// sources. Default: main.",
    )
    credentials_secret_ref: SecretKeyRef | None = Field(
        default=None,
        description="Secret key holding the Hugging Face token (hf://) or, for s3://, a Secret whose "
        "keys AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY are injected (key names the access key id). "
        "Injected into the builder pod only. The Secret must be labelled "
        "llm.trtllm-operator.dev/usable-by-llm-resources=true (docs/security.md).",
    )


class RuntimeSpec(ApiModel):
    """The TensorRT-LLM runtime: the image that builds the engine AND serves it."""

    model_config = model_config(*image_rules("image"))

    image: ImageReference = Field(
        description="TensorRT-LLM/Triton image, e.g. nvcr.io/nvidia/tritonserver:26.03-trtllm-python-py3 "
        "(TensorRT-LLM 1.2.0). An engine only loads on the TensorRT-LLM version that built it, so this "
        "image is part of the engine key and deployments serve with it. Pin a version tag or a digest "
        "(:latest and untagged images are refused: they move).",
    )
    image_pull_secrets: Annotated[list[ObjectName], Field(max_length=8)] | None = Field(
        default=None, description="Names of Secrets for pulling the image (e.g. an NGC API key)."
    )


class CalibrationSpec(ApiModel):
    """Post-training-quantization calibration (NVIDIA ModelOpt ``mtq.quantize`` forward loop). The
    defaults are NVIDIA's recipe (TensorRT-LLM ``examples/quantization/quantize.py``: cnn_dailymail,
    512 samples of at most 512 tokens), batched by 32 (benchmarks/RESULTS.md "quantize-cuda")."""

    model_config = model_config(
        cel(
            f"self.dataset != {lit(BUNDLED_CALIBRATION_DATASET)} "
            f"|| (has(self.numSamples) && self.numSamples <= {BUNDLED_CALIBRATION_SAMPLES})",
            f"dataset {BUNDLED_CALIBRATION_DATASET} holds {BUNDLED_CALIBRATION_SAMPLES} samples: set "
            f"numSamples to {BUNDLED_CALIBRATION_SAMPLES} or less, or use dataset "
            f"{DEFAULT_CALIBRATION_DATASET}",
            field_path=".numSamples",
        ),
    )

    dataset: str = Field(
        default=DEFAULT_CALIBRATION_DATASET,
        min_length=1,
        max_length=256,
        description=f"'{DEFAULT_CALIBRATION_DATASET}' (the default, as TensorRT-LLM's quantize scripts: "
        f"the Hugging Face dataset, config {CNN_DAILYMAIL_CONFIG}, '{CNN_DAILYMAIL_COLUMN}' column, fetched "
        "by the builder with the model's token; the build fails with DownloadFailed when it cannot), "
        "another Hugging Face dataset name ('text' column of its train split), a path inside the "
        f"builder (a dataset directory, a .txt or .jsonl file), or '{BUNDLED_CALIBRATION_DATASET}': "
        f"the {BUNDLED_CALIBRATION_SAMPLES} short offline samples shipped with the builder, an explicit "
        "choice for builders without network access.",
    )
    num_samples: int | None = Field(
        default=None,
        ge=1,
        le=65536,
        description="Calibration samples (quantize.py --calib_size), used exactly: a dataset with fewer "
        f"fails the build (BadSpec). Unset: {DEFAULT_CALIBRATION_SAMPLES}, or {AWQ_MAX_SAMPLES} for AWQ "
        f"formats, which accept at most {AWQ_MAX_SAMPLES}. status.build.calibration reports what was used.",
    )
    batch_size: int = Field(
        default=DEFAULT_CALIBRATION_BATCH_SIZE,
        ge=1,
        le=1024,
        description="Samples per calibration forward pass; halved automatically on GPU out-of-memory.",
    )
    max_seq_length: int = Field(
        default=DEFAULT_CALIBRATION_MAX_SEQ_LENGTH,
        ge=8,
        le=131072,
        description="Tokens per calibration sample, at most (quantize.py --calib_max_seq_length).",
    )


#: The calibration the previous release's CRD defaulted (release 3898a0c,
#: ``crds/llm.trtllm-operator.dev_llmengines.yaml``: ``spec.quantization.default.calibration`` and
#: ``spec.quantization.properties.calibration.default``) and the API server therefore stored in every
#: LLMEngine created without one. Its builders (engine-key/v1) calibrated on the bundled text whatever
#: ``numSamples`` said; this release refuses ``bundled`` with more than its samples. A stored
#: calibration exactly equal to it is read as not set (:meth:`QuantizationSpec._previous_crd_default`).
PREVIOUS_CRD_CALIBRATION_DEFAULT: dict[str, Any] = {
    "dataset": "bundled",
    "numSamples": 512,
    "batchSize": 1,
    "maxSeqLength": 512,
}


class QuantizationSpec(ApiModel):
    """Weight/activation quantization and KV-cache precision (NVIDIA ModelOpt recipes)."""

    model_config = model_config(
        cel(
            f"!has(self.calibration) || !has(self.calibration.numSamples) "
            f"|| !(self.format in {_cel_list(AWQ_FORMATS)}) "
            f"|| self.calibration.numSamples <= {AWQ_MAX_SAMPLES}",
            f"format {_or(AWQ_FORMATS)} calibrates on at most {AWQ_MAX_SAMPLES} samples (TensorRT-LLM's AWQ "
            f"limit): set calibration.numSamples to {AWQ_MAX_SAMPLES} or less, or leave it unset",
            field_path=".calibration.numSamples",
        ),
        cel(
            f"!has(self.awqBlockSize) || self.format in {_cel_list(AWQ_FORMATS)}",
            f"awqBlockSize is only valid with format {_or(AWQ_FORMATS)}; remove it or change format",
            field_path=".awqBlockSize",
        ),
        cel(
            f"!(self.format in {_cel_list(_BLACKWELL_ONLY)}) "
            f"|| !(self.kvCacheDtype in {_cel_list(_NOT_ON_BLACKWELL_KV)})",
            f"kvCacheDtype {_or(_NOT_ON_BLACKWELL_KV)} cannot be combined with format "
            f"{_or(_BLACKWELL_ONLY)}: they run only on Blackwell (SM 100+), where TensorRT-LLM rejects "
            "an INT8 KV cache; use kvCacheDtype fp8 or auto",
            field_path=".kvCacheDtype",
        ),
    )

    format: QuantFormat = Field(
        default="none",
        description=f"Quantization format: {describe_formats()}.",
    )
    kv_cache_dtype: KVCacheDtype = Field(
        default="auto",
        description="KV-cache precision: auto (model dtype), fp8 (SM 89+, halves KV bytes vs bf16) or int8.",
    )
    awq_block_size: Literal[64, 128] | None = Field(
        default=None,
        description="AWQ group size in weights (quantize.py --awq_block_size); only with "
        f"{_or(AWQ_FORMATS)}. Default 128.",
    )
    calibration: CalibrationSpec = Field(
        default_factory=CalibrationSpec,
        description="Calibration data, used when format or kvCacheDtype needs calibration (format none "
        "with kvCacheDtype auto calibrates nothing).",
    )

    @model_validator(mode="before")
    @classmethod
    def _previous_crd_default(cls, data: Any) -> Any:
        """A calibration exactly equal to :data:`PREVIOUS_CRD_CALIBRATION_DEFAULT` is read as not set:
        the previous release's CRD stored it in every LLMEngine that left calibration out, and this
        release refuses it (``bundled`` holds fewer samples), so without this such an engine would
        turn Failed after an upgrade. Read as unset it gets this release's defaults, like an engine
        created now. Only the read changes: the stored object keeps its value (docs/install.md,
        "Upgrade")."""
        if isinstance(data, dict) and data.get("calibration") == PREVIOUS_CRD_CALIBRATION_DEFAULT:
            return {k: v for k, v in data.items() if k != "calibration"}
        return data


#: spec.parallelism.expert's range (its one home: engine_builder.planner.PARALLELISM_LIMITS), for the
#: CEL rules that must not fire on a value the range refuses.
_EP_LOW, _EP_HIGH = PARALLELISM_LIMITS["ep"].low, PARALLELISM_LIMITS["ep"].high


class ParallelismSpec(ApiModel):
    """How one replica is split over GPUs (TensorRT-LLM Mapping)."""

    model_config = model_config(
        cel(
            # Not when expert is itself out of its range: that error alone is the fix (fresh-user
            # trial 41: expert 65 was told to make tensor a multiple of it, above tensor's own limit).
            f"self.expert < {_EP_LOW} || self.expert > {_EP_HIGH} || self.tensor % self.expert == 0",
            "expert must divide tensor: TensorRT-LLM splits the tensor-parallel ranks of an MoE "
            "layer into expert × (tensor / expert); set tensor to a multiple of expert",
            field_path=".expert",
        ),
        cel(  # the bound's one home: engine_builder.planner.MAX_GPUS_PER_REPLICA (plan checks it too)
            f"self.tensor * self.pipeline <= {MAX_GPUS_PER_REPLICA}",
            f"tensor × pipeline (GPUs per replica) must be at most {MAX_GPUS_PER_REPLICA}; lower tensor "
            "or pipeline",
            field_path=".tensor",
        ),
    )

    tensor: int = Field(
        default=1,
        ge=PARALLELISM_LIMITS["tp"].low,
        le=PARALLELISM_LIMITS["tp"].high,
        description="Tensor parallelism (tp_size): GPUs that split every layer. Must divide the "
        "model's attention heads (checked by the operator against the model config).",
    )
    pipeline: int = Field(
        default=1,
        ge=PARALLELISM_LIMITS["pp"].low,
        le=PARALLELISM_LIMITS["pp"].high,
        description="Pipeline parallelism (pp_size): GPUs that split the layers into stages.",
    )
    expert: int = Field(
        default=1,
        ge=PARALLELISM_LIMITS["ep"].low,
        le=PARALLELISM_LIMITS["ep"].high,
        description="Expert parallelism (moe_ep_size) for mixture-of-experts models. Reuses the "
        "tensor-parallel GPUs: must divide tensor; the remaining factor tensor/expert is the MoE "
        "tensor parallelism. GPUs per replica stay tensor × pipeline.",
    )
    multi_node: bool = Field(
        default=False,
        description="Allow one replica to span several nodes when tensor × pipeline exceeds the GPUs "
        "of one node of spec.gpu.product. Served by a LeaderWorkerSet (the LWS CRD must be installed) "
        "with one pod per node; without it the operator refuses such a layout and names the smallest "
        "fitting alternative. Placement only: it does not change the engine key.",
    )


class DraftModelSpec(ModelSpec):
    """The draft model of draft_tokens_external: built in the builder Job as a second engine (same
    quantization, parallelism and limits), placed in the artifact under draft/ and served as
    tensorrt_llm_draft behind tensorrt_llm_bls. It must share the target's vocabulary."""


class LookaheadSpec(ApiModel):
    """Lookahead decoding's (W, N, G) (TensorRT-LLM examples/lookahead/README.md): the engine is
    built with max_draft_len derived from them and the runtime (the tensorrt_llm model's
    lookahead_window_size / lookahead_ngram_size / lookahead_verification_set_size) reserves them."""

    model_config = model_config(
        # LookaheadDecodingConfig::isLegal (TensorRT-LLM 1.2 cpp/tensorrt_llm/executor/decodingConfig.cpp).
        cel(
            "self.ngramSize != 1 || (self.windowSize == 1 && self.verificationSetSize == 0)",
            "ngramSize 1 needs windowSize 1 and verificationSetSize 0 (TensorRT-LLM "
            "LookaheadDecodingConfig::isLegal); use ngramSize ≥ 2, e.g. (4, 3, 4)",
            field_path=".ngramSize",
        ),
    )

    window_size: int = Field(
        ge=1, description="W: n-grams in the lookahead branch (Jacobi window). Upstream default 4."
    )
    ngram_size: int = Field(
        ge=1, description="N: tokens per n-gram (most accepted per step). Upstream default 3."
    )
    verification_set_size: int = Field(ge=0, description="G: n-grams verified per step. Upstream default 4.")


class SpeculativeDecodingSpec(ApiModel):
    """Speculative decoding (trtllm-build --speculative_decoding_mode / --max_draft_len)."""

    model_config = model_config(
        # Only draft_tokens_external: medusa and eagle are refused by their own rule below, so
        # asking for their maxDraftLen / draftModel would send the user to fill fields for a mode
        # that cannot be used.
        cel(
            "self.mode != 'draft_tokens_external' || (has(self.maxDraftLen) && self.maxDraftLen >= 1)",
            "maxDraftLen (>= 1) is required with mode draft_tokens_external; set it, e.g. maxDraftLen: 4",
            field_path=".maxDraftLen",
            reason="FieldValueRequired",
        ),
        # TensorRT-LLM derives it: "--max_draft_len == max_draft_len(W, N, G)" (1.2
        # examples/lookahead/README.md; executor/decodingConfig.cpp calculateSpeculativeResourceTuple).
        cel(
            "self.mode != 'lookahead_decoding' || !has(self.maxDraftLen)",
            "maxDraftLen is derived for lookahead_decoding from lookahead (W, N, G) as TensorRT-LLM "
            "does: (N == 1 ? 0 : N - 2) + (W - 1 + G) × (N - 1); remove maxDraftLen",
            field_path=".maxDraftLen",
        ),
        cel(
            "(self.mode == 'lookahead_decoding') == has(self.lookahead)",
            "lookahead (windowSize, ngramSize, verificationSetSize) is required with mode "
            "lookahead_decoding and only used with it; set both or neither",
            field_path=".lookahead",
            reason="FieldValueRequired",
        ),
        cel(
            "self.mode != 'none' || !has(self.maxDraftLen) || self.maxDraftLen == 0",
            "maxDraftLen must be unset or 0 when mode is none; set a mode or remove maxDraftLen",
            field_path=".maxDraftLen",
        ),
        cel(
            "self.mode != 'draft_tokens_external' || has(self.draftModel)",
            "draftModel is required with mode draft_tokens_external: give the source of the draft model",
            field_path=".draftModel",
            reason="FieldValueRequired",
        ),
        # Medusa and EAGLE engines are built from a checkpoint that carries the heads, combined
        # with the base model by TensorRT-LLM's own converters (1.2: examples/medusa/
        # convert_checkpoint.py --medusa_model_dir/--num_medusa_heads, examples/eagle/
        # convert_checkpoint.py --eagle_model_dir, num_eagle_layers in the checkpoint config);
        # the builder's ModelOpt export of a Hugging Face model has no heads, so such an engine
        # would build without them.
        cel(
            "!(self.mode in ['medusa', 'eagle'])",
            "speculativeDecoding.mode medusa and eagle are not supported: TensorRT-LLM builds them "
            "from a checkpoint whose heads its own converter combined with the base model "
            "(examples/medusa and examples/eagle convert_checkpoint.py), which this builder does not "
            "do, so the engine would lack its heads; use draft_tokens_external or lookahead_decoding",
            message_expression=mx(
                "speculativeDecoding.mode %s is not supported: TensorRT-LLM 1.2 builds it from a "
                "checkpoint whose heads its own converter combined with the base model "
                "(examples/medusa and examples/eagle convert_checkpoint.py), which this builder does "
                "not do, so the engine would lack its heads; use draft_tokens_external or "
                "lookahead_decoding",
                "self.mode",
            ),
            field_path=".mode",
        ),
        cel(
            "!has(self.draftModel) || self.mode in ['draft_tokens_external', 'medusa', 'eagle']",
            "draftModel is only used with mode draft_tokens_external, medusa or eagle; remove it or "
            "change mode (lookahead_decoding needs no extra model)",
            field_path=".draftModel",
        ),
    )

    mode: SpeculativeMode = Field(
        default="none",
        description="none, draft_tokens_external (a separate draft model proposes tokens; clients "
        "call tensorrt_llm_bls with num_draft_tokens) or lookahead_decoding (no extra model). medusa "
        "and eagle are refused (the builder does not combine their heads with the base model), and "
        "every mode is refused with backend pytorch.",
    )
    max_draft_len: int | None = Field(
        default=None,
        ge=0,
        le=256,
        description="Maximum draft tokens verified per step (trtllm-build --max_draft_len); required "
        "with draft_tokens_external; derived for lookahead_decoding (leave unset).",
    )
    draft_model: DraftModelSpec | None = None
    lookahead: LookaheadSpec | None = Field(
        default=None,
        description="(W, N, G) of lookahead_decoding (required with it); maxDraftLen is derived from them.",
    )


class EngineBuildSpec(ApiModel):
    """Engine limits and plugin flags (trtllm-build). Unset limits are derived by the capacity planner
    for the target GPU and reported in status.plan.recommended."""

    model_config = model_config(
        # trtllm-build clips max_input_len to max_seq_len with only a warning (TensorRT-LLM
        # tensorrt_llm/builder.py _init_max_seq_len, stored copy of the 1.x BuildConfig path); equal
        # would leave no room for a single generated token.
        cel(
            "!has(self.maxInputLen) || !has(self.maxSeqLen) || self.maxInputLen < self.maxSeqLen",
            "maxInputLen must be less than maxSeqLen (maxSeqLen counts prompt plus generated "
            "tokens; trtllm-build would silently clip maxInputLen); raise maxSeqLen or lower maxInputLen",
            message_expression=mx(
                "maxInputLen %d must be less than maxSeqLen %d (maxSeqLen counts prompt plus generated "
                "tokens; trtllm-build would silently clip maxInputLen): raise maxSeqLen or lower maxInputLen",
                "self.maxInputLen",
                "self.maxSeqLen",
            ),
            field_path=".maxInputLen",
        ),
        # trtllm-build lowers max_num_tokens to max_seq_len * max_batch_size with only a warning
        # (TensorRT-LLM tensorrt_llm/_common.py check_max_num_tokens, stored copy of the 1.x path).
        cel(
            "!has(self.maxNumTokens) || !has(self.maxSeqLen) || !has(self.maxBatchSize) || "
            "self.maxNumTokens <= self.maxSeqLen * self.maxBatchSize",
            "maxNumTokens must be at most maxSeqLen × maxBatchSize (trtllm-build would silently lower "
            "it); lower maxNumTokens or raise maxBatchSize",
            message_expression=mx(
                "maxNumTokens %d exceeds maxSeqLen × maxBatchSize = %d (trtllm-build would silently lower "
                "it to that): set maxNumTokens to at most %d or raise maxBatchSize",
                "self.maxNumTokens",
                "self.maxSeqLen * self.maxBatchSize",
                "self.maxSeqLen * self.maxBatchSize",
            ),
            field_path=".maxNumTokens",
        ),
        cel(
            "!has(self.speculativeDecoding) || self.speculativeDecoding.mode == 'none' "
            "|| self.maxBeamWidth == 1",
            "speculative decoding requires maxBeamWidth 1 in TensorRT-LLM; set maxBeamWidth to 1 "
            "or speculativeDecoding.mode to none",
            field_path=".maxBeamWidth",
        ),
        # "--use_paged_context_fmha=enable must be specified since we need KV-Cache reuse in this
        # approach" (NVIDIA/TensorRT-LLM 1.2 examples/draft_target_model/README.md).
        cel(
            "!has(self.speculativeDecoding) || self.speculativeDecoding.mode != 'draft_tokens_external' "
            "|| self.pagedContextFMHA",
            "speculativeDecoding.mode draft_tokens_external needs pagedContextFMHA true: TensorRT-LLM "
            "reuses the KV cache between draft and verification steps "
            "(examples/draft_target_model/README.md); set pagedContextFMHA: true",
            field_path=".pagedContextFMHA",
        ),
    )

    max_batch_size: int | None = Field(
        default=None,
        ge=BUILD_LIMITS["max_batch_size"].low,
        le=BUILD_LIMITS["max_batch_size"].high,
        description="Maximum sequences scheduled together (--max_batch_size). Default: planner.",
    )
    max_num_tokens: int | None = Field(
        default=None,
        ge=BUILD_LIMITS["max_num_tokens"].low,
        le=BUILD_LIMITS["max_num_tokens"].high,
        description="Maximum tokens (prompt + generated) processed per iteration across the batch, "
        "after padding removal (--max_num_tokens). Default: planner (TensorRT-LLM default 8192).",
    )
    max_input_len: int | None = Field(
        default=None,
        ge=BUILD_LIMITS["max_input_len"].low,
        le=BUILD_LIMITS["max_input_len"].high,
        description="Maximum prompt length in tokens (--max_input_len). Default: planner.",
    )
    max_seq_len: int | None = Field(
        default=None,
        ge=BUILD_LIMITS["max_seq_len"].low,
        le=BUILD_LIMITS["max_seq_len"].high,
        description="Maximum sequence length in tokens, prompt plus output (--max_seq_len). "
        "Default: derived by the planner for the target GPU — the largest of the model's context and "
        "the powers of two below it whose 16 full sequences fit in the KV cache (status.plan."
        "maxSeqLenRule, docs/planner.md); set it to the model's context to build for the full context.",
    )
    max_beam_width: int = Field(
        default=1,
        ge=BUILD_LIMITS["max_beam_width"].low,
        le=BUILD_LIMITS["max_beam_width"].high,
        description="Maximum beam-search width (--max_beam_width).",
    )
    gemm_plugin: GemmPlugin = Field(
        default="auto",
        description="GEMM plugin (--gemm_plugin, always passed): auto (model dtype), float16, bfloat16, "
        "float32 or disable (also turns off the GEMM plugin NVFP4 uses by default). tensorrt backend only.",
    )
    paged_context_fmha: bool = Field(
        default=True,
        alias="pagedContextFMHA",
        description="Paged context FMHA (--use_paged_context_fmha); needed for KV-cache reuse and "
        "chunked context at serving time. tensorrt backend only.",
    )
    speculative_decoding: SpeculativeDecodingSpec = Field(default_factory=SpeculativeDecodingSpec)
    workers: int = Field(
        default=1,
        ge=1,
        le=64,
        description="Ranks built in parallel (trtllm-build --workers); each worker needs its own "
        "GPU in the builder pod. At most tensor × pipeline.",
    )


#: How many GPUs the builder pod requests when ``spec.gpu.resources.gpus`` is unset — the text of the
#: CRD's field description; :func:`builder_gpus` computes it. A build needs one GPU per build worker,
#: not a replica's world size: ``trtllm-build`` uses ``min(torch.cuda.device_count(), --workers)``
#: workers and builds rank ``r`` on GPU ``r % workers``, one rank after another with one worker
#: (NVIDIA/TensorRT-LLM ``tensorrt_llm/commands/build.py`` ``main``/``parallel_build``, commit
#: 65f1d1536e18aea3380e6e270e00895a709333eb); the builder's calibration runs on one device
#: (engine_builder/quantize.py ``load_model``). So a TP4 × PP4 engine builds on one GPU of a 4-GPU node.
BUILDER_GPUS_DEFAULT = (
    "build.workers (one GPU per build worker: trtllm-build builds the ranks one after another on "
    "one GPU per worker, and calibration uses one GPU)"
)


class BuilderResources(ApiModel):
    """Resources of the builder pod."""

    cpu: CPUQuantity | None = Field(default=None, description="CPU cores (request), e.g. 16.")
    memory: Quantity | None = Field(
        default=None,
        description="Host memory (request and limit), e.g. 256Gi. Quantization loads the whole "
        "unquantized model in host memory for large models.",
    )
    ephemeral_storage: Quantity | None = Field(
        default=None, description="Scratch disk (request and limit), e.g. 500Gi."
    )
    gpus: int | None = Field(
        default=None,
        ge=1,
        le=16,
        description=f"GPUs (nvidia.com/gpu) for the builder pod. Default: {BUILDER_GPUS_DEFAULT}.",
    )


#: Labels the operator sets on builder and benchmark pods (render/builder_job.py, benchmark_job.py):
#: a user value for them would be overwritten, so they are refused (as is any key under the API group).
BUILDER_POD_LABEL_KEYS = (
    "app.kubernetes.io/name",
    "app.kubernetes.io/managed-by",
    "app.kubernetes.io/component",
)
#: Seven days: the longest deadline accepted for a builder or benchmark Job.
MAX_JOB_DEADLINE_SECONDS = 7 * 24 * 3600


class GPUSpec(ApiModel):
    """The target GPU (engines are specific to the GPU they were built on) and the builder pod's
    placement. Deployments of this engine are scheduled on the same GPU product."""

    model_config = model_config(
        # The product is a value of the nvidia.com/gpu.product node label the pods require
        # (IsValidLabelValue, as ValidateNodeSelectorRequirement checks it on the Job's pod).
        cel(
            f"self.product.matches({lit(LABEL_VALUE)})",
            "product must be a node label value as GPU Feature Discovery writes it (letters, digits, "
            "'-', '_' and '.'; spaces become '-'), e.g. NVIDIA-H100-80GB-HBM3",
            message_expression=mx(
                f'product "%s" is not a node label value: use the {GPU_PRODUCT_LABEL} label of your GPU '
                "nodes as GPU Feature Discovery writes it (spaces become -), e.g. NVIDIA-H100-80GB-HBM3 "
                f"(kubectl get nodes -L {GPU_PRODUCT_LABEL})",
                "self.product",
            ),
            field_path=".product",
        ),
        # Contradiction: the builder pod always requires nvidia.com/gpu.product In [product].
        cel(
            f"!has(self.nodeSelector) || !({lit(GPU_PRODUCT_LABEL)} in self.nodeSelector) || "
            f"self.nodeSelector[{lit(GPU_PRODUCT_LABEL)}] == self.product",
            f"nodeSelector {GPU_PRODUCT_LABEL} contradicts gpu.product: no node can match both; remove "
            "it from nodeSelector (the operator already requires gpu.product) or change gpu.product",
            message_expression=mx(
                f'nodeSelector {GPU_PRODUCT_LABEL}="%s" contradicts gpu.product "%s": the builder pod would '
                "never schedule; remove the key from nodeSelector (the operator already requires "
                "gpu.product) or change gpu.product",
                f"self.nodeSelector[{lit(GPU_PRODUCT_LABEL)}]",
                "self.product",
            ),
            field_path=f".nodeSelector['{GPU_PRODUCT_LABEL}']",
        ),
        reserved_label_keys_rule(BUILDER_POD_LABEL_KEYS, ".podLabels"),
        apparmor_containers_rule("podAnnotations", (BUILDER_CONTAINER,)),
    )

    product: str = Field(
        min_length=1,
        max_length=63,
        description="GPU product as in the nvidia.com/gpu.product node label (GPU Feature Discovery), "
        "e.g. NVIDIA-H100-80GB-HBM3, NVIDIA-H200, NVIDIA-A100-SXM4-80GB.",
    )
    resources: BuilderResources = Field(default_factory=BuilderResources)
    node_selector: Labels | None = Field(
        default=None,
        description="Extra node labels for the builder pod (the gpu.product label is always added).",
    )
    tolerations: Tolerations | None = Field(
        default=None, description="Tolerations for the builder pod (e.g. for tainted GPU nodes)."
    )
    runtime_class_name: ClassName | None = Field(
        default=None,
        description="RuntimeClass of the builder pod, e.g. nvidia, where the cluster needs one.",
    )
    pod_annotations: PodAnnotations | None = Field(
        default=None, description="Annotations added to builder pods."
    )
    pod_labels: Labels | None = Field(default=None, description="Labels added to builder pods.")
    active_deadline_seconds: int = Field(
        default=14400,
        ge=60,
        le=MAX_JOB_DEADLINE_SECONDS,
        description="Seconds a build may run before it is stopped and marked Failed (reason "
        "Timeout). Default 4 h, at most 7 days.",
    )
    backoff_limit: int = Field(
        default=2,
        ge=0,
        le=20,
        description="Retries of a failed builder pod before the build is marked Failed. Stages "
        "resume from the artifact directory.",
    )


class ExistingPVCStorage(ApiModel):
    """An existing PersistentVolumeClaim in this namespace."""

    model_config = model_config(
        cel(
            "self == oldSelf",
            "storage.pvc is immutable once set (artifacts already live there); create a new "
            "LLMEngine to use other storage",
        ),
        *relative_path_rules("subPath", "subPath"),
    )

    claim_name: ObjectName = Field(description="Name of the PVC.")
    sub_path: str | None = Field(
        default=None,
        max_length=512,
        description="Directory inside the PVC used as the storage root (relative: no leading / and no "
        "'..' segment; the pods mount it as a subPath).",
    )


class CreatePVCStorage(ApiModel):
    """A PVC that the operator creates for this engine (named <engine>-artifacts)."""

    model_config = model_config(
        cel(
            "has(self.storageClassName) == has(oldSelf.storageClassName) && "
            "(!has(self.storageClassName) || self.storageClassName == oldSelf.storageClassName)",
            "storage.createPVC.storageClassName is immutable; create a new LLMEngine to use "
            "another StorageClass",
            field_path=".storageClassName",
        ),
        cel(
            "self.accessMode == oldSelf.accessMode",
            "storage.createPVC.accessMode is immutable; create a new LLMEngine to change it",
            field_path=".accessMode",
        ),
        cel(
            # size is int-or-string (common.INT_OR_STRING): integers compare as integers, a string
            # as a quantity; across forms through asApproximateFloat (exact below 2^53 bytes).
            "type(self.size) == int ? (type(oldSelf.size) == int ? self.size >= oldSelf.size : "
            "double(self.size) >= quantity(oldSelf.size).asApproximateFloat()) : "
            "(type(oldSelf.size) == int ? quantity(self.size).asApproximateFloat() >= double(oldSelf.size) : "
            "quantity(self.size).compareTo(quantity(oldSelf.size)) >= 0)",
            "storage.createPVC.size can only grow (PVC expansion); keep it or raise it",
            field_path=".size",
        ),
    )

    size: Quantity = Field(description="Capacity, e.g. 200Gi (an 8B FP8 engine needs ~10Gi; a 70B ~75Gi).")
    storage_class_name: ClassName | None = Field(
        default=None, description="StorageClass; default: the cluster default."
    )
    access_mode: Literal["ReadWriteOnce", "ReadWriteMany", "ReadWriteOncePod"] = Field(
        default="ReadWriteOnce",
        description="Access mode. Use ReadWriteMany when serving replicas run on several nodes.",
    )


class S3Storage(ApiModel):
    """An S3-compatible bucket prefix; serving pods download the artifact at start."""

    model_config = model_config(
        cel(
            "self.bucket == oldSelf.bucket && self.prefix == oldSelf.prefix",
            "storage.s3.bucket and storage.s3.prefix are immutable once set; create a new "
            "LLMEngine to use another location",
        ),
        cel(
            s3_bucket_ok("self.bucket"),
            f"bucket must be a valid S3 bucket name: {S3_BUCKET_HINT}",
            message_expression=mx(
                f'bucket "%s" is not a valid S3 bucket name: {S3_BUCKET_HINT}', "self.bucket"
            ),
            field_path=".bucket",
        ),
        cel(
            "!has(self.endpoint) || self.endpoint.matches('^https?://[^/?#]+')",
            "endpoint must be an http:// or https:// URL with a host, e.g. http://minio.storage:9000",
            message_expression=mx(
                'endpoint "%s" is not an http(s) URL: write the scheme and host, e.g. '
                "http://minio.storage:9000",
                "self.endpoint",
            ),
            field_path=".endpoint",
        ),
    )

    bucket: str = Field(min_length=3, max_length=63, description="Bucket name.")
    prefix: str = Field(
        default="trtllm-engines",
        max_length=512,
        description="Key prefix under which <engineKey>/ directories are written.",
    )
    endpoint: str | None = Field(
        default=None,
        max_length=512,
        description="Endpoint URL for non-AWS S3 (MinIO, Ceph), e.g. http://minio.storage:9000; must be "
        "one of the operator's allowedS3Endpoints.",
    )
    credentials_secret_ref: SecretKeyRef | None = Field(
        default=None,
        description="Secret with AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY keys, labelled "
        "llm.trtllm-operator.dev/usable-by-llm-resources=true; unset = pod identity.",
    )


class StorageSpec(ApiModel):
    """Where artifacts live: exactly one of pvc, createPVC or s3. Artifacts are written to
    <root>/<engineKey>/ and shared by every LLMEngine with the same key."""

    model_config = model_config(
        cel(
            "(has(self.pvc) ? 1 : 0) + (has(self.createPVC) ? 1 : 0) + (has(self.s3) ? 1 : 0) == 1",
            "set exactly one of storage.pvc, storage.createPVC or storage.s3",
        ),
        cel(
            "has(self.pvc) == has(oldSelf.pvc) && has(self.createPVC) == has(oldSelf.createPVC) "
            "&& has(self.s3) == has(oldSelf.s3)",
            "the storage kind (pvc, createPVC or s3) is immutable; create a new LLMEngine to move artifacts",
        ),
    )

    pvc: ExistingPVCStorage | None = None
    create_pvc: CreatePVCStorage | None = Field(default=None, alias="createPVC")
    s3: S3Storage | None = None
    reclaim_policy: ReclaimPolicy = Field(
        default="Retain",
        description="What happens to this engine's artifact when the LLMEngine is deleted: Retain "
        "(keep it; default) or Delete (remove it once no other LLMEngine uses the same key).",
    )


# --- benchmark (trtllm-bench after a build; docs/tuning.md) ------------------------------------


class BenchmarkWorkload(ApiModel):
    """One synthetic workload: every request has these prompt and output lengths."""

    input_tokens: int = Field(ge=1, le=1_048_576, description="Prompt tokens per request (ISL).")
    output_tokens: int = Field(ge=1, le=1_048_576, description="Output tokens per request (OSL).")


class BenchmarkSpec(ApiModel):
    """Run ``trtllm-bench`` against the Ready engine (each new engine key once) and report the
    throughput knee and a recommended maxBatchSize in ``status.benchmark``. Results only: the
    operator never changes the spec from them."""

    model_config = model_config(
        cel(
            "(has(self.workloads) ? size(self.workloads) : 1) "
            "* (has(self.values) ? size(self.values) : 6) <= 8",
            "workloads × values must be at most 8 runs (the results travel in the pod's 4 KiB "
            "termination message); drop sweep values or workloads",
            field_path=".values",
        ),
        cel(
            "!has(self.mode) || self.mode != 'latency' || !has(self.sweep) || self.sweep == 'concurrency'",
            "mode latency runs at batch 1 (trtllm-bench latency has no --max_batch_size); use "
            "sweep: concurrency or mode: throughput",
            field_path=".sweep",
        ),
        fraction_rule("kvCacheFreeGpuMemFraction", example=0.9),
        apparmor_containers_rule("podAnnotations", (BENCHMARK_CONTAINER,)),
    )

    mode: Literal["throughput", "latency"] = Field(
        default="throughput",
        description="trtllm-bench sub-command: throughput (in-flight batching under load) or latency "
        "(batch 1, streaming).",
    )
    workloads: Annotated[list[BenchmarkWorkload], Field(min_length=1, max_length=4)] = Field(
        default_factory=lambda: [BenchmarkWorkload(input_tokens=128, output_tokens=128)],
        description="ISL/OSL pairs; one curve (and knee) each. Default 128/128.",
    )
    sweep: Literal["concurrency", "maxBatchSize"] = Field(
        default="concurrency",
        description="What the sweep varies: concurrency (--concurrency, requests in flight) or "
        "maxBatchSize (--max_batch_size, the runtime batch limit).",
    )
    values: Annotated[list[Annotated[int, Field(ge=1, le=4096)]], Field(min_length=1, max_length=8)] = Field(
        default_factory=lambda: [1, 8, 32, 64, 128, 256],
        description="Sweep values, sequences. Default 1, 8, 32, 64, 128, 256.",
    )
    num_requests: int = Field(default=512, ge=1, le=100_000, description="Requests per run (--num_requests).")
    warmup: int = Field(default=2, ge=0, le=1000, description="Warm-up requests per run (--warmup).")
    streaming: bool = Field(
        default=True,
        description="Stream tokens (--streaming, throughput mode): needed for TTFT and TPOT.",
    )
    kv_cache_free_gpu_mem_fraction: float | None = Field(
        default=None,
        gt=0,
        le=1,
        description="--kv_cache_free_gpu_mem_fraction; unset: trtllm-bench's default (0.90).",
    )
    active_deadline_seconds: int = Field(
        default=7200,
        ge=60,
        le=MAX_JOB_DEADLINE_SECONDS,
        description="Deadline of the benchmark Job, seconds (at most 7 days).",
    )
    pod_annotations: PodAnnotations | None = Field(
        default=None, description="Annotations added to the benchmark pod."
    )


class LLMEngineSpec(ApiModel):
    """Desired state of an LLMEngine: a TensorRT-LLM engine (or quantized checkpoint) to build."""

    model_config = model_config(
        # The PyTorch backend's LLM API takes speculative decoding as ``speculative_config`` (a
        # DecodingBaseConfig subclass), not as trtllm-build flags; its draft-target form changed
        # across 1.x (TensorRT-LLM tensorrt_llm/llmapi/llm_args.py: DraftTargetDecodingConfig
        # ``decoding_type`` "DraftTarget" with ``pytorch_weights_path``, later "Draft_Target" with
        # ``speculative_model``), and it has no lookahead_decoding, medusa or draft_tokens_external
        # mode of the engine path. The operator does not render speculative_config yet, so the
        # pytorch backend refuses every mode rather than serving without it.
        cel(
            "self.backend != 'pytorch' || self.build.speculativeDecoding.mode == 'none'",
            "build.speculativeDecoding is not supported with backend pytorch: its LLM API takes "
            "speculative decoding as speculative_config (TensorRT-LLM llmapi/llm_args.py), which the "
            "operator does not render yet; set mode none or use backend tensorrt",
            message_expression=mx(
                "build.speculativeDecoding.mode %s is not supported with backend pytorch: its LLM API "
                "takes speculative decoding as speculative_config (TensorRT-LLM llmapi/llm_args.py), "
                "which the operator does not render yet; set mode none or use backend tensorrt",
                "self.build.speculativeDecoding.mode",
            ),
            field_path=".build.speculativeDecoding.mode",
        ),
        cel(
            f"self.backend != 'pytorch' || !(self.quantization.kvCacheDtype in {_cel_list(_PYTORCH_NO_KV)})",
            "; ".join(PYTORCH_KV_REFUSAL),  # the planner's words too (plan --backend pytorch)
            field_path=".quantization.kvCacheDtype",
        ),
        cel(
            f"self.backend != 'pytorch' || !(self.quantization.format in {_cel_list(_PYTORCH_NO_FORMAT)})",
            "; ".join(format_refusal("pytorch")),  # the planner's and the builder's words too
            field_path=".quantization.format",
        ),
        # TensorRT-LLM 1.2 tensorrt_llm/builder.py build() turns paged context FMHA off for an INT8
        # KV cache, and for an FP8 one unless the checkpoint is FP8, W4A8_AWQ or NVFP4
        # (engine_builder.planner.formats.paged_context_fmha_kept). Each message offers only the
        # fixes the other rules accept for this format: kvCacheDtype fp8 only where the format keeps
        # paged context FMHA with it (those formats need SM 89+ themselves, so the GPU runs an FP8
        # KV cache too); never int8 (it turns paged context FMHA off whatever the format). Formats
        # that run only on Blackwell are left to QuantizationSpec's rule: no INT8 KV cache there at
        # all, so build.pagedContextFMHA: false would not help.
        cel(
            "self.backend != 'tensorrt' || self.quantization.kvCacheDtype != 'int8' "
            f"|| !self.build.pagedContextFMHA || self.quantization.format in {_cel_list(_BLACKWELL_ONLY)}",
            "kvCacheDtype int8 does not work with build.pagedContextFMHA (trtllm-build silently "
            "turns it off, which breaks KV-cache reuse and chunked context); set "
            f"build.pagedContextFMHA: false or kvCacheDtype auto (or kvCacheDtype fp8 with format "
            f"{_or(_FP8_CONTEXT_FMHA)})",
            # the planner's words too (plan's validate): formats.paged_context_fmha_refusal
            message_expression=(
                f"self.quantization.format in {_cel_list(_FP8_CONTEXT_FMHA)} ? "
                + mx(
                    "; ".join(paged_context_fmha_refusal("int8", "%s", fp8_keeps=True)),
                    "self.quantization.format",
                )
                + " : "
                + mx(
                    "; ".join(paged_context_fmha_refusal("int8", "%s", fp8_keeps=False)),
                    "self.quantization.format",
                )
            ),
            field_path=".quantization.kvCacheDtype",
        ),
        cel(
            "self.backend != 'tensorrt' || self.quantization.kvCacheDtype != 'fp8' "
            f"|| !self.build.pagedContextFMHA || self.quantization.format in {_cel_list(_FP8_CONTEXT_FMHA)}",
            f"with kvCacheDtype fp8 and build.pagedContextFMHA the format must be {_or(_FP8_CONTEXT_FMHA)}: "
            "for any other format trtllm-build silently turns paged context FMHA off (TensorRT-LLM "
            "builder.py), which breaks KV-cache reuse and chunked context; set build.pagedContextFMHA: "
            "false or kvCacheDtype auto (kvCacheDtype int8 turns it off too), or change the format",
            message_expression=mx(
                "; ".join(
                    paged_context_fmha_refusal("fp8", "%s", fp8_keeps=False)
                ),  # the planner's words too
                "self.quantization.format",
            ),
            field_path=".quantization.format",
        ),
        cel(
            f"self.backend != 'tensorrt' || !(self.quantization.format in {_cel_list(_TRTLLM_NO_FORMAT)})",
            "; ".join(format_refusal("tensorrt")),  # the planner's and the builder's words too
            field_path=".quantization.format",
        ),
        # Audit B8. A TensorRT-LLM checkpoint carries its MoE split in config.json ``mapping``
        # (``moe_tp_size`` × ``moe_ep_size`` = ``tp_size``: NVIDIA/TensorRT-LLM@cf44a1cc
        # ``tensorrt_llm/mapping.py`` ``Mapping``), and trtllm-build builds what the checkpoint says.
        # ModelOpt 0.47 ``export_tensorrt_llm_checkpoint`` takes only inference_tensor_parallel /
        # inference_pipeline_parallel and writes ``moe_tp_size = tp_size``, ``moe_ep_size = 1``
        # (``modelopt/torch/export/tensorrt_llm_utils.py`` ``convert_to_tensorrt_llm_config``): an
        # expert-parallel engine cannot come out of it, so the layout is refused rather than built
        # as MoE tensor parallelism under an engine key that says expert parallelism.
        cel(
            # Not when expert is itself out of its range (PARALLELISM_LIMITS): that error alone is the
            # fix; the pytorch backend this suggests refuses the value too (fresh-user trial 41).
            "self.backend != 'tensorrt' || self.parallelism.expert == 1 || "
            f"self.parallelism.expert < {_EP_LOW} || self.parallelism.expert > {_EP_HIGH}",
            "parallelism.expert > 1 is not supported by the tensorrt backend: ModelOpt's TensorRT-LLM "
            "checkpoint export has no expert-parallel argument and writes moe_ep_size 1, so the engine "
            "would not be expert-parallel; use backend pytorch (moe_expert_parallel_size) or expert: 1",
            message_expression=mx(
                "; ".join(TENSORRT_EP_REFUSAL),  # the planner's words too (plan, default --backend tensorrt)
                "self.parallelism.expert",
                "self.parallelism.tensor",
                "self.parallelism.expert",
            ),
            field_path=".parallelism.expert",
        ),
        cel(
            # Not when tensor or pipeline is itself refused (below 1): that error alone is the fix.
            "self.parallelism.tensor < 1 || self.parallelism.pipeline < 1 || "
            "self.build.workers <= self.parallelism.tensor * self.parallelism.pipeline",
            "build.workers must be at most tensor × pipeline (one worker per rank); lower workers",
            field_path=".build.workers",
        ),
        # trtllm-build silently uses min(visible GPUs, --workers) workers (TensorRT-LLM
        # tensorrt_llm/commands/build.py main(), stored copy of the 1.x path).
        cel(
            "!has(self.gpu.resources.gpus) || self.gpu.resources.gpus >= self.build.workers",
            "gpu.resources.gpus must be at least build.workers (each worker builds on its own "
            "GPU); raise gpus or lower build.workers",
            field_path=".gpu.resources.gpus",
        ),
    )

    model: ModelSpec
    backend: Backend = Field(
        default="tensorrt",
        description="tensorrt: quantize, convert and compile a TensorRT engine (trtllm-build), served "
        "by Triton's tensorrtllm backend. pytorch: quantize to a unified checkpoint, no compile, "
        "served by Triton's LLM-API model. The runtime image decides which is available "
        "(TensorRT-LLM removed the engine path after 1.2).",
    )
    runtime: RuntimeSpec
    quantization: QuantizationSpec = Field(default_factory=QuantizationSpec)
    parallelism: ParallelismSpec = Field(default_factory=ParallelismSpec)
    build: EngineBuildSpec = Field(default_factory=EngineBuildSpec)
    gpu: GPUSpec
    storage: StorageSpec
    benchmark: BenchmarkSpec | None = Field(
        default=None,
        description="Optional trtllm-bench sweep after each successful build; results in "
        "status.benchmark (docs/tuning.md).",
    )


# --- status ------------------------------------------------------------------------------------


class ArtifactStatus(ApiModel):
    """The built artifact of status.engineKey; absent while that key has none recorded (queued,
    building, failed, an invalid spec without a key), as condition ArtifactComplete (NoArtifact) says."""

    uri: str | None = Field(
        default=None, description="Location: pvc://<claim>/<path>/<engineKey> or s3://<bucket>/<...>."
    )
    size_bytes: int | None = Field(default=None, ge=0, description="Total size in bytes.")
    manifest_digest: str | None = Field(
        default=None, description="sha256:<hex> of manifest.json (inputs, versions, per-rank digests)."
    )
    tensorrt_llm_version: str | None = Field(
        default=None,
        alias="tensorrtLLMVersion",
        description="TensorRT-LLM version that built it, read from the installed library by the builder "
        "(manifest versions.tensorrt_llm); unset when the builder had none (CPU --skip-compile).",
    )
    tensorrt_version: str | None = Field(
        default=None,
        description="TensorRT version that built it (manifest versions.tensorrt); an engine deserializes "
        "only on the same TensorRT. Compared with the serving image's before rollout.",
    )
    partial: bool | None = Field(
        default=None,
        description="True when the artifact lacks a part its backend needs: a tensorrt artifact "
        "built with --skip-compile has no engine (condition ArtifactComplete says what is missing).",
    )
    missing: list[str] | None = Field(
        default=None, description="What the backend needs but the artifact lacks (from the manifest)."
    )


class RecommendedLimits(ApiModel):
    """Limits the planner derives (used for unset spec.build fields); when the plan does not fit,
    what would (tensorParallelism, gpuProduct) and a note saying so, or why nothing does."""

    max_batch_size: int | None = Field(default=None, ge=0, description="Sequences.")
    max_num_tokens: int | None = Field(default=None, ge=0, description="Tokens per iteration.")
    max_input_len: int | None = Field(default=None, ge=0, description="Prompt tokens.")
    max_seq_len: int | None = Field(default=None, ge=0, description="Prompt + output tokens.")
    tensor_parallelism: int | None = Field(
        default=None,
        ge=1,
        description="Plan does not fit: the smallest spec.parallelism.tensor that fits on this GPU "
        "(one alternative).",
    )
    gpu_product: str | None = Field(
        default=None,
        description="Plan does not fit: the smallest GPU product of the catalog that fits at the "
        "given parallelism (another alternative).",
    )
    note: str | None = Field(
        default=None,
        description="Plan does not fit or is invalid: what the recommendations are (alternatives, each "
        "alone enough) or why nothing fits and what to change.",
    )


class PlanStatus(ApiModel):
    """Capacity plan summary for one GPU of the target product (engine_builder planner)."""

    fits: bool | None = Field(default=None, description="Whether weights + activations + a KV cache fit.")
    gpu_memory_bytes: int | None = Field(default=None, ge=0, description="GPU memory in bytes.")
    weight_bytes_per_gpu: int | None = Field(
        default=None, alias="weightBytesPerGPU", ge=0, description="Weight bytes per GPU."
    )
    activation_bytes_per_gpu: int | None = Field(
        default=None,
        alias="activationBytesPerGPU",
        ge=0,
        description="Activation workspace bytes per GPU (from maxNumTokens).",
    )
    free_bytes_per_gpu: int | None = Field(
        default=None,
        alias="freeBytesPerGPU",
        description="GPU bytes left per GPU after weights, activations and runtime buffers; the KV "
        "pool is kvCacheFreeGpuMemFraction of it (a deployment's fraction is checked against it). "
        "Negative when they do not fit.",
    )
    kv_bytes_per_token_per_gpu: int | None = Field(
        default=None, alias="kvBytesPerTokenPerGPU", ge=0, description="KV-cache bytes per token per GPU."
    )
    kv_cache_bytes_per_gpu: int | None = Field(
        default=None,
        alias="kvCacheBytesPerGPU",
        ge=0,
        description="KV-cache pool bytes per GPU (from the free-memory fraction).",
    )
    max_kv_tokens: int | None = Field(
        default=None, alias="maxKVTokens", ge=0, description="Tokens the KV pool holds."
    )
    max_concurrent_sequences: int | None = Field(
        default=None, ge=0, description="Sequences of maxSeqLen tokens that fit in the KV pool."
    )
    recommended: RecommendedLimits | None = None
    max_seq_len_rule: str | None = Field(
        default=None,
        max_length=512,
        description="Set when spec.build.maxSeqLen is unset: the rule that derived "
        "recommended.maxSeqLen (docs/planner.md, 'Defaults').",
    )
    reasons: Annotated[list[str], Field(max_length=32)] | None = Field(
        default=None, description="Why it does not fit, or the assumptions made."
    )
    warnings: Annotated[list[str], Field(max_length=32)] | None = Field(
        default=None,
        description="What the planner warns about, whether or not the plan fits (docs/planner.md, "
        "'Warnings'): maxSeqLen above the model's context, maxBatchSize above the sequences the KV "
        "cache holds, maxNumTokens below the longest prompt; each names the field and the fix.",
    )


class CalibrationStatus(ApiModel):
    """What the build's calibration used (the builder's report)."""

    dataset: str | None = Field(default=None, description="The calibration dataset.")
    samples: int | None = Field(default=None, ge=0, description="Samples calibrated on.")
    tokens: int | None = Field(
        default=None, ge=0, description="Real (not padding) tokens forwarded per calibration pass."
    )
    batch_size: int | None = Field(default=None, ge=0, description="Samples per forward pass.")
    max_seq_length: int | None = Field(default=None, ge=0, description="Tokens per sample, at most.")


class BuildStatus(ApiModel):
    """The current or last build."""

    job_name: str | None = Field(default=None, description="Name of the builder Job.")
    stage: str | None = Field(
        default=None,
        description="Current stage: fetch, inspect, plan, quantize, convert, compile, package, report.",
    )
    percent: int | None = Field(default=None, ge=0, le=100, description="Overall progress, 0-100.")
    stage_timings: dict[str, float] | None = Field(
        default=None, description="Seconds spent per finished stage."
    )
    calibration: CalibrationStatus | None = Field(
        default=None,
        description="What the quantize stage calibrated on (dataset, samples, tokens); absent when "
        "nothing was calibrated.",
    )
    reason: str | None = Field(
        default=None,
        description="Failure class: GPUOutOfMemory, HostOutOfMemory, UnsupportedArchitecture, "
        "DownloadFailed, AuthFailed, Timeout, BadSpec, Unknown.",
    )
    message: str | None = Field(default=None, description="Failure details and the fix.")
    attempts: int | None = Field(default=None, ge=0, description="Builder pod attempts so far.")
    start_time: datetime | None = Field(default=None, description="When the Job started.")
    completion_time: datetime | None = Field(default=None, description="When the Job finished.")


class LatencyPercentiles(ApiModel):
    """Milliseconds."""

    p50: float | None = Field(default=None, description="Median, ms.")
    p90: float | None = Field(default=None, description="90th percentile, ms.")
    p99: float | None = Field(default=None, description="99th percentile, ms.")


class BenchmarkRun(ApiModel):
    """One trtllm-bench run of the sweep."""

    input_tokens: int | None = Field(default=None, description="Prompt tokens per request.")
    output_tokens: int | None = Field(default=None, description="Output tokens per request.")
    concurrency: int | None = Field(default=None, description="--concurrency of the run.")
    max_batch_size: int | None = Field(default=None, description="Runtime max batch size of the run.")
    output_tokens_per_second: float | None = Field(
        default=None, description="Output tokens/s, whole replica."
    )
    output_tokens_per_second_per_gpu: float | None = Field(
        default=None, alias="outputTokensPerSecondPerGPU", description="Output tokens/s per GPU."
    )
    requests_per_second: float | None = Field(default=None, description="Completed requests/s.")
    ttft_ms: LatencyPercentiles | None = Field(
        default=None, alias="ttftMs", description="Time to first token."
    )
    tpot_ms: LatencyPercentiles | None = Field(
        default=None, alias="tpotMs", description="Time per output token."
    )
    error: str | None = Field(default=None, description="Why the run failed.")


class BenchmarkCurve(ApiModel):
    """The knee of one workload's throughput curve."""

    input_tokens: int | None = Field(default=None, description="Prompt tokens per request.")
    output_tokens: int | None = Field(default=None, description="Output tokens per request.")
    knee: float | None = Field(default=None, description="Sweep value at the knee (sequences).")
    knee_output_tokens_per_second: float | None = Field(
        default=None, description="Output tokens/s at the knee."
    )
    recommended_max_batch_size: int | None = Field(default=None, description="ceil(knee × 1.25).")
    message: str | None = Field(default=None, description="How the knee was found, or why not.")


class BenchmarkStatus(ApiModel):
    """The last benchmark of this engine (docs/tuning.md)."""

    engine_key: str | None = Field(default=None, description="Engine key benchmarked.")
    job_name: str | None = Field(default=None, description="Benchmark Job.")
    phase: Literal["Running", "Succeeded", "Failed"] | None = Field(
        default=None, description="Running, Succeeded or Failed."
    )
    mode: str | None = Field(default=None, description="throughput or latency.")
    sweep: str | None = Field(default=None, description="concurrency or maxBatchSize.")
    tensorrt_llm_version: str | None = Field(
        default=None, alias="tensorrtLLMVersion", description="TensorRT-LLM version in the reports."
    )
    completion_time: datetime | None = Field(default=None, description="When the results were recorded.")
    runs: Annotated[list[BenchmarkRun], Field(max_length=32)] | None = Field(
        default=None, description="One entry per trtllm-bench run."
    )
    curves: Annotated[list[BenchmarkCurve], Field(max_length=8)] | None = Field(
        default=None, description="Knee per workload."
    )
    recommended_max_batch_size: int | None = Field(
        default=None,
        description="Largest per-workload recommendation: knee + 25 %. Advice only; spec is not changed.",
    )
    message: str | None = Field(default=None, description="Summary or failure details.")


class LLMEngineStatus(ApiModel):
    """Observed state of an LLMEngine."""

    phase: EnginePhase | None = Field(
        default=None,
        description="Pending, Planning, Queued (waiting for GPUs or for a build of the same key), "
        "Building, Unschedulable (the builder pod cannot be placed: no node with the GPU product or "
        "count, a PersistentVolumeClaim that is Pending or missing; the Degraded condition says which), "
        "Ready or Failed.",
    )
    observed_generation: int | None = Field(
        default=None, ge=0, description="metadata.generation this status describes."
    )
    engine_key: str | None = Field(
        default=None, description="sha256 of everything that makes the engine valid (64 hex chars)."
    )
    engine_key_short: str | None = Field(
        default=None, description="First 12 characters of engineKey (printer column)."
    )
    artifact: ArtifactStatus | None = None
    plan: PlanStatus | None = None
    build: BuildStatus | None = None
    benchmark: BenchmarkStatus | None = None
    used_by: Annotated[list[str], Field(max_length=256)] | None = Field(
        default=None, description="Names of LLMDeployments in this namespace serving this engine."
    )
    reconciled_by: str | None = Field(
        default=None,
        max_length=64,
        description="The operator release (version+digest of its code and deciding settings) that last "
        "reconciled this object: a restarted operator of the same release skips it when it is settled.",
    )
    conditions: Conditions | None = Field(
        default=None,
        description="Ready (artifact usable), Progressing (planning/building), Degraded, "
        "Planned (capacity plan fits), ArtifactComplete, StorageExpanded (a raised "
        "spec.storage.createPVC.size: the claim requests it, or the API server's refusal and the fix).",
    )


def builder_gpus(spec: LLMEngineSpec) -> int:
    """GPUs (``nvidia.com/gpu``) the builder pod of ``spec`` requests: ``spec.gpu.resources.gpus``,
    else :data:`BUILDER_GPUS_DEFAULT` (``build.workers``).

    The one home of this number: the builder Job requests it
    (:func:`trtllm_operator.render.builder_job.desired_builder_job`), the Unschedulable hint names it
    (:func:`trtllm_operator.decide.engine_hints.unschedulable_hint`) and the CRD describes it. Like a
    Kubernetes ``SetDefaults_*`` function, it sits next to the field whose default it is.
    """
    if spec.gpu.resources.gpus:
        return spec.gpu.resources.gpus
    return spec.build.workers
