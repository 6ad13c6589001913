"""The build spec: the one document the operator writes and a builder Job reads, and the engine key.

The operator turns an ``LLMEngine`` into a :class:`BuildSpec` (a pure function on its side), stores
it as YAML in a ConfigMap and mounts it into the builder Job. The builder validates it with this
model, so a spec the builder cannot honour fails at the ``fetch`` stage's preflight with reason
``BadSpec`` rather than half-way through a GPU build.

The engine key (docs/design.md §3) is ``sha256`` over the canonical JSON of everything that makes an
engine valid: :meth:`BuildSpec.key_inputs`. Anything that does not change the bytes of the artifact
(where it is stored, progress reporting, resources of the build pod) stays out of the key, so two
``LLMEngine`` objects that differ only in such fields share one artifact.

Field names are snake_case here (this is the builder's own format); the Kubernetes API uses
camelCase and is mapped by the operator.
"""

from __future__ import annotations

import hashlib
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from engine_builder.artifact_check import canonical_json
from engine_builder.planner.formats import (
    AWQ_MAX_SAMPLES,
    BUNDLED_CALIBRATION_DATASET,
    BUNDLED_CALIBRATION_SAMPLES,
    CNN_DAILYMAIL_COLUMN,
    CNN_DAILYMAIL_CONFIG,
    DEFAULT_CALIBRATION_BATCH_SIZE,
    DEFAULT_CALIBRATION_DATASET,
    DEFAULT_CALIBRATION_MAX_SEQ_LENGTH,
    DEFAULT_CALIBRATION_SAMPLES,
    Backend,
    KVCacheDtype,
    QuantFormat,
    default_calibration_samples,
    format_info,
)
from engine_builder.planner.plan import DERIVED_LIMITS_RULE, DERIVED_LIMITS_RULE_ABOVE_INPUT_LEN

#: Bumped when the meaning of a key input changes, so old artifacts are never reused by mistake.
#: v2: calibration means what it says (NVIDIA's cnn_dailymail recipe by default, ``num_samples`` used
#: exactly; v1 builders calibrated the bundled 101 samples whatever ``num_samples`` said), and an
#: engine that calibrates nothing (format none, KV cache auto) no longer keys on calibration settings.
ENGINE_KEY_SCHEMA = "trtllm-operator.dev/engine-key/v2"

__all__ = ["Backend", "KVCacheDtype", "QuantFormat"]  # re-exported: the format table is their home
SpeculativeMode = Literal["none", "draft_tokens_external", "medusa", "eagle", "lookahead_decoding"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ModelSource(_Model):
    """Where the Hugging Face-format checkpoint comes from."""

    uri: str = Field(
        description="hf://org/name, pvc://claim/path (mounted at /models/<claim>), s3://bucket/prefix, "
        "or a local directory path."
    )
    revision: str | None = Field(
        default=None, description="Hugging Face revision (commit sha, branch or tag); pin a sha."
    )
    token_env: str = Field(
        default="HF_TOKEN",
        description="Environment variable holding the Hugging Face token (set by the Job from a Secret).",
    )


class Calibration(_Model):
    """ModelOpt post-training-quantization calibration settings (defaults: NVIDIA's recipe,
    :mod:`engine_builder.planner.formats`)."""

    dataset: str = Field(
        default=DEFAULT_CALIBRATION_DATASET,
        min_length=1,
        description=f"'{DEFAULT_CALIBRATION_DATASET}' (the default: Hugging Face dataset, config "
        f"{CNN_DAILYMAIL_CONFIG}, column '{CNN_DAILYMAIL_COLUMN}', loaded with the model's token), another "
        "Hugging Face dataset name ('text' column of its train split), a local directory (a dataset "
        "with a train split and a 'text' column) or file (.txt one sample per line, .jsonl with a "
        f"'text' field), or '{BUNDLED_CALIBRATION_DATASET}' (a small offline text set shipped with the "
        "builder: an explicit choice for builders without network access).",
    )
    num_samples: int | None = Field(
        default=None,
        ge=1,
        description=f"Calibration samples, used exactly or refused. Unset: "
        f"{DEFAULT_CALIBRATION_SAMPLES} ({AWQ_MAX_SAMPLES} for AWQ formats, which accept at most "
        f"{AWQ_MAX_SAMPLES}).",
    )
    batch_size: int = Field(
        default=DEFAULT_CALIBRATION_BATCH_SIZE, ge=1, description="Calibration batch size."
    )
    max_seq_length: int = Field(
        default=DEFAULT_CALIBRATION_MAX_SEQ_LENGTH,
        ge=8,
        description="Tokens per calibration sample (at most).",
    )


class Quantization(_Model):
    format: QuantFormat = "none"
    kv_cache_dtype: KVCacheDtype = "auto"
    awq_block_size: int | None = Field(default=None, description="AWQ group size (64 or 128).")
    calibration: Calibration = Calibration()

    @model_validator(mode="after")
    def _awq_sample_limit(self) -> Quantization:
        n = self.calibration.num_samples
        if n is not None and format_info(self.format).awq and n > AWQ_MAX_SAMPLES:
            raise ValueError(
                f"calibration.num_samples {n} is more than format {self.format} calibrates on (at most "
                f"{AWQ_MAX_SAMPLES}, as TensorRT-LLM's quantize_by_modelopt.py clamps AWQ); set it to "
                f"{AWQ_MAX_SAMPLES} or less, or leave it unset"
            )
        if (
            self.calibration.dataset == BUNDLED_CALIBRATION_DATASET
            and self.calibration_samples > BUNDLED_CALIBRATION_SAMPLES
        ):
            raise ValueError(
                f"calibration.num_samples {self.calibration_samples}: dataset {BUNDLED_CALIBRATION_DATASET} "
                f"holds {BUNDLED_CALIBRATION_SAMPLES} samples; set num_samples to "
                f"{BUNDLED_CALIBRATION_SAMPLES} or less, or use another dataset"
            )
        return self

    @property
    def calibration_samples(self) -> int:
        """The samples calibration uses: ``calibration.num_samples``, or the format's default."""
        n = self.calibration.num_samples
        return n if n is not None else default_calibration_samples(self.format)


class Parallelism(_Model):
    tensor: int = Field(default=1, ge=1)
    pipeline: int = Field(default=1, ge=1)
    expert: int = Field(default=1, ge=1)
    multi_node: bool = Field(
        default=False,
        description="Allow one replica to span several nodes (tensor × pipeline > GPUs per node). "
        "Placement only: not part of the engine key.",
    )

    @property
    def world_size(self) -> int:
        """GPUs (MPI ranks) one replica uses: tensor × pipeline (expert parallelism reuses them)."""
        return self.tensor * self.pipeline


#: Where the Job's environment carries the draft model's Hugging Face token (its own Secret key).
DRAFT_TOKEN_ENV = "HF_TOKEN_DRAFT"


def lookahead_max_draft_len(window_size: int, ngram_size: int, verification_set_size: int) -> int:
    """``max_draft_len`` of a lookahead engine for ``(W, N, G)``, as TensorRT-LLM derives it:
    ``(0 if N == 1 else N - 2) + (W - 1 + G) * (N - 1)`` (1.2 ``cpp/tensorrt_llm/executor/
    decodingConfig.cpp`` ``LookaheadDecodingConfig::calculateSpeculativeResourceTuple``, "maxDraftTokens";
    ``examples/lookahead/README.md``: the engine's ``--max_draft_len`` must equal it)."""
    return (0 if ngram_size == 1 else ngram_size - 2) + (window_size - 1 + verification_set_size) * (
        ngram_size - 1
    )


class Lookahead(_Model):
    """Lookahead decoding's ``(W, N, G)``: the executor's ``LookaheadDecodingConfig``, read by the
    Triton backend from ``lookahead_window_size`` / ``lookahead_ngram_size`` /
    ``lookahead_verification_set_size``."""

    window_size: int = Field(ge=1)
    ngram_size: int = Field(ge=1)
    verification_set_size: int = Field(ge=0)

    @model_validator(mode="after")
    def _legal(self) -> Lookahead:
        # LookaheadDecodingConfig::isLegal (decodingConfig.cpp, 1.2).
        if self.ngram_size == 1 and (self.window_size != 1 or self.verification_set_size != 0):
            raise ValueError("ngram_size 1 needs window_size 1 and verification_set_size 0 (isLegal)")
        return self


class SpeculativeDecoding(_Model):
    mode: SpeculativeMode = "none"
    max_draft_len: int = Field(default=0, ge=0)
    draft_model: ModelSource | None = None
    lookahead: Lookahead | None = None

    @model_validator(mode="after")
    def _lookahead(self) -> SpeculativeDecoding:
        if (self.mode == "lookahead_decoding") != (self.lookahead is not None):
            raise ValueError("lookahead is required with mode lookahead_decoding and only used with it")
        if self.lookahead is not None:
            la = self.lookahead
            derived = lookahead_max_draft_len(la.window_size, la.ngram_size, la.verification_set_size)
            if self.max_draft_len != derived:
                raise ValueError(
                    f"max_draft_len {self.max_draft_len} is not the {derived} that lookahead "
                    f"({la.window_size}, {la.ngram_size}, {la.verification_set_size}) needs "
                    "(TensorRT-LLM examples/lookahead/README.md)"
                )
        return self


class BuildLimits(_Model):
    """``trtllm-build`` limits and plugin flags (None = let the planner derive a default)."""

    max_batch_size: int | None = Field(default=None, ge=1)
    max_num_tokens: int | None = Field(default=None, ge=1)
    max_input_len: int | None = Field(default=None, ge=1)
    max_seq_len: int | None = Field(default=None, ge=2)
    max_beam_width: int = Field(default=1, ge=1)
    gemm_plugin: str = "auto"
    paged_context_fmha: bool = True
    speculative_decoding: SpeculativeDecoding = SpeculativeDecoding()
    workers: int = Field(default=1, ge=1, description="Parallel build workers (each needs its own GPU).")


class Target(_Model):
    gpu_product: str = Field(description="GPU Feature Discovery product name, e.g. NVIDIA-H100-80GB-HBM3.")
    sm: int = Field(description="Compute capability × 10 of the target GPU, e.g. 90 for Hopper.")


class Output(_Model):
    """Where the artifact goes; not part of the engine key."""

    artifact_root: str = Field(
        default="/artifacts",
        description="Storage root: a mounted directory or s3://bucket/prefix. The artifact is written to "
        "<artifact_root>/<engine_key>/.",
    )
    termination_log: str = Field(
        default="/dev/termination-log",
        description="Where the report stage writes its compact JSON (≤ 4 KiB).",
    )


class BuildSpec(_Model):
    api_version: Literal["engine-builder.trtllm-operator.dev/v1"] = "engine-builder.trtllm-operator.dev/v1"
    model: ModelSource
    backend: Backend = "tensorrt"
    runtime_image: str = Field(description="The TensorRT-LLM/Triton image that builds and serves.")
    quantization: Quantization = Quantization()
    parallelism: Parallelism = Parallelism()
    build: BuildLimits = BuildLimits()
    target: Target
    output: Output = Output()

    def key_inputs(self) -> dict[str, Any]:
        """Everything that makes an engine valid (docs/design.md §3), as plain JSON data."""
        data = self.model_dump(mode="json", exclude={"output"})
        data["model"].pop("token_env", None)
        data["parallelism"].pop("multi_node", None)
        sd = data["build"]["speculative_decoding"]
        spec_draft = sd.get("draft_model")
        if spec_draft:
            spec_draft.pop("token_env", None)
        if sd.get("lookahead") is None:  # keys of engines without lookahead stay as they were
            sd.pop("lookahead", None)
        if self.quantization.format == "none" and self.quantization.kv_cache_dtype == "auto":
            data["quantization"].pop("calibration", None)  # nothing is calibrated
        data["schema"] = ENGINE_KEY_SCHEMA
        # A limit left to the planner is derived by a rule (engine_builder.planner.plan); name the rule
        # so that changing it changes the key instead of reusing an engine built under the old one.
        limits = self.build
        if None in (limits.max_seq_len, limits.max_batch_size, limits.max_num_tokens):
            data["build"]["derived_limits"] = DERIVED_LIMITS_RULE
        if limits.max_seq_len is None and limits.max_input_len is not None:
            data["build"]["derived_limits"] = DERIVED_LIMITS_RULE_ABOVE_INPUT_LEN
        # The product is informative; the SM decides where an engine loads. Keep both: the safe rule
        # (docs/reference/tensorrt-llm.md §3.3) is "same GPU SKU", so a different product is a different
        # engine.
        return data

    def engine_key(self) -> str:
        """``sha256`` hex digest (64 chars) of the canonical JSON of :meth:`key_inputs`."""
        return engine_key(self.key_inputs())

    def draft_spec(self) -> BuildSpec | None:
        """The draft model's own build spec (mode ``draft_tokens_external``), else ``None``.

        The draft engine is an ordinary engine with its own engine key: the draft checkpoint,
        quantized like the target (same format, KV-cache dtype and calibration) and built with the
        target's parallelism (both engines run on the replica's ranks) and limits, with paged
        context FMHA on and no speculative mode — as NVIDIA/TensorRT-LLM
        ``examples/draft_target_model/README.md`` (1.2) builds it: ``--use_paged_context_fmha=enable``
        for both engines ("we need KV-Cache reuse in this approach"), ``--speculative_decoding_mode
        draft_tokens_external --max_draft_len`` only for the target.
        """
        sd = self.build.speculative_decoding
        if sd.mode != "draft_tokens_external" or sd.draft_model is None:
            return None
        return self.model_copy(
            update={
                "model": sd.draft_model,
                "build": self.build.model_copy(
                    update={
                        "max_beam_width": 1,
                        "paged_context_fmha": True,
                        "speculative_decoding": SpeculativeDecoding(),
                    }
                ),
            }
        )


def engine_key(key_inputs: dict[str, Any]) -> str:
    return hashlib.sha256(canonical_json(key_inputs).encode("utf-8")).hexdigest()
