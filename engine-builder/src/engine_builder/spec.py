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
import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

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


class SpeculativeDecoding(_Model):
    mode: SpeculativeMode = "none"
    max_draft_len: int = Field(default=0, ge=0)
    draft_model: ModelSource | None = None


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
        spec_draft = data["build"]["speculative_decoding"].get("draft_model")
        if spec_draft:
            spec_draft.pop("token_env", None)
        if self.quantization.format == "none" and self.quantization.kv_cache_dtype == "auto":
            data["quantization"].pop("calibration", None)  # nothing is calibrated
        data["schema"] = ENGINE_KEY_SCHEMA
        # The product is informative; the SM decides where an engine loads. Keep both: the safe rule
        # (docs/reference/tensorrt-llm.md §3.3) is "same GPU SKU", so a different product is a different
        # engine.
        return data

    def engine_key(self) -> str:
        """``sha256`` hex digest (64 chars) of the canonical JSON of :meth:`key_inputs`."""
        return engine_key(self.key_inputs())


def canonical_json(data: Any) -> str:
    """JSON with sorted keys, no whitespace, UTF-8 kept: identical input → identical bytes."""
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def engine_key(key_inputs: dict[str, Any]) -> str:
    return hashlib.sha256(canonical_json(key_inputs).encode("utf-8")).hexdigest()
