"""The quantization-format table: one record per format and per KV-cache dtype, read by every module.

Everything the project knows about a format lives in :data:`QUANT_FORMAT_TABLE` (weights) and
:data:`KV_CACHE_DTYPE_TABLE` (KV cache): the API's enum and its CEL rules, the planner's byte counts
and hardware floors, the builder's ModelOpt recipe and the ``quant_algo`` its export must write,
the simulator's compute rate. Adding a format is one entry here (plus the ``Literal`` below, which
``mypy`` needs spelled out; a unit test checks the two agree).

Bytes per quantized *linear* weight (attention q/k/v/o, MLP and MoE expert projections); everything
else — the input embedding, ``lm_head``, norms, the MoE router and biases — stays in the checkpoint
dtype. Sources:

* ``fp8`` (ModelOpt ``FP8_DEFAULT_CFG``, exported ``quant_algo=FP8``): 1 byte per weight, one FP32
  per-tensor weight scale and one activation scale per linear. ``lm_head`` is excluded
  (``exclude_modules: ["lm_head"]`` in the exported checkpoint, reference §1.4; ``--quantize_lm_head``
  is off by default, §1.1).
* ``int8_sq`` (``W8A8_SQ_PER_CHANNEL``): 1 byte per weight, an FP32 scale per output channel and a
  smoothing factor per input channel.
* ``int4_awq`` (``W4A16_AWQ``): 4-bit weights packed two per byte, one FP16 scale per block of
  ``awq_block_size`` input elements (default 128, ``--awq_block_size``, reference §1.1), and a
  ``pre_quant_scale`` per input channel (exported ``group_size: 128, pre_quant_scale: true``, §1.4).
* ``w4a8_awq`` (``W4A8_AWQ``): same weight layout as ``int4_awq`` (4-bit + FP16 block scales); the
  FP8 activation scales are per tensor.
* ``nvfp4`` (``NVFP4``): 4-bit E2M1 weights, one FP8 (E4M3) scale per block of 16 elements plus one
  FP32 global scale per tensor (the format's definition; the reference's §7.1 quotes the same
  "FP8 scale bytes per 16 elements" for the NVFP4 KV cache).
* ``mxfp8`` (OCP microscaling): 1-byte FP8 weights, one E8M0 (1-byte) scale per block of 32 elements.
* ``none``: the checkpoint dtype. TensorRT-LLM's ``--dtype auto`` converts an FP32 checkpoint to
  FP16 (reference §1.1), so the engine holds 2 bytes per weight for fp16, bf16 and fp32 sources.

Scales that are per tensor or per channel (fp8, int8_sq, the AWQ ``pre_quant_scale``) are left out
of the byte count: they are vectors of at most a few thousand elements per linear, under 0.1 % of
the weights (≈ 27 MB for Llama-3.1-70B int8_sq). Block scales (AWQ, NVFP4, MXFP8) are counted
exactly: they are 1.6–12.5 % of the quantized weights.

ModelOpt recipes and exported ``quant_algo`` names: TensorRT-LLM's
``tensorrt_llm/quantization/quantize_by_modelopt.py`` (``quant_cfg_choices()`` and its
``QUANT_ALGO`` table; NVIDIA/TensorRT-LLM@042c510d, reference §1.2), measured on ModelOpt 0.47.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from importlib import resources
from typing import Literal, get_args

from engine_builder.planner.architecture import TensorKind
from engine_builder.release import version_tuple

#: The format names, spelled out for type checkers; equal to the keys of :data:`QUANT_FORMAT_TABLE`.
QuantFormat = Literal["none", "fp8", "int8_sq", "int4_awq", "w4a8_awq", "nvfp4", "mxfp8"]
#: The KV-cache dtypes; equal to the keys of :data:`KV_CACHE_DTYPE_TABLE`.
KVCacheDtype = Literal["auto", "fp8", "int8"]
Backend = Literal["tensorrt", "pytorch"]
#: Which tensor-core rate a format's GEMMs run at (the simulator's roofline).
ComputeKind = Literal["bf16", "fp8", "fp4"]

#: Bytes of an unquantized engine weight / activation (fp16 or bf16; fp32 checkpoints become fp16).
ENGINE_DTYPE_BYTES = 2

#: Default AWQ block (group) size: ``quantize.py --awq_block_size`` default 128 (reference §1.1).
DEFAULT_AWQ_BLOCK_SIZE = 128

#: Data-centre Blackwell (SM 100–119): TensorRT-LLM's ``builder.py`` ``build()`` raises
#: "INT8/INT4 quantization is not supported on SM>=100" (INT4/INT8 weight-only, INT8 KV cache) and
#: "SmoothQuant is not supported on SM>=100" there; SM 120 is not affected.
SM100_RANGE = range(100, 120)


@dataclass(frozen=True)
class QuantFormatInfo:
    """One quantization format.

    ``weight_bits`` / ``scale_bytes`` / ``scale_block``: the stored weight element and its block
    scales (``scale_block`` 0 = none, ``None`` = one scale per ``awq_block_size`` elements).
    ``min_sm``: compute capability × 10 it needs (support matrix, reference §1.2; NVFP4 and MXFP8
    tensor-core formats are Blackwell). ``awq``: an AWQ recipe (``awqBlockSize`` applies, calibration
    clamped to :data:`AWQ_MAX_SAMPLES`). ``modelopt_config``: the ``modelopt.torch.quantization``
    config name. ``quant_algo``: what ``export_tensorrt_llm_checkpoint`` writes (``None`` for none).
    ``backends``: where it can be built. ``calibration_needs_cuda``: ModelOpt's calibration asserts
    CUDA tensors (measured, reference §1.4). ``fp8_context_fmha``: ``builder.py`` keeps paged
    context FMHA on with an FP8 KV cache only for FP8, W4A8_AWQ and NVFP4 checkpoints.
    ``sm100_unsupported``: refused by ``builder.py`` on :data:`SM100_RANGE`. ``min_runtime``: the
    first TensorRT-LLM version that can load it (``None``: every supported version); ``runtime_note``
    says where that comes from. ``compute``: the GEMM rate it runs at.
    """

    name: str
    description: str
    weight_bits: int
    scale_bytes: int = 0
    scale_block: int | None = 0
    min_sm: int = 0
    awq: bool = False
    modelopt_config: str | None = None
    quant_algo: str | None = None
    backends: frozenset[str] = frozenset({"tensorrt", "pytorch"})
    calibration_needs_cuda: bool = False
    fp8_context_fmha: bool = False
    sm100_unsupported: bool = False
    min_runtime: tuple[int, ...] | None = None
    runtime_note: str = ""
    compute: ComputeKind = "bf16"

    def bytes_per_weight(self, awq_block_size: int = DEFAULT_AWQ_BLOCK_SIZE) -> Fraction:
        """Exact bytes per quantized linear weight element, block scales included."""
        value = Fraction(self.weight_bits, 8)
        block = awq_block_size if self.scale_block is None else self.scale_block
        if block:
            value += Fraction(self.scale_bytes, block)
        return value


@dataclass(frozen=True)
class KVCacheDtypeInfo:
    """One KV-cache dtype: ``bytes`` per element, the exported ``kv_cache_quant_algo``, the SM floor,
    the backends that accept it, and whether data-centre Blackwell refuses it."""

    name: str
    description: str
    bytes: int
    quant_algo: str | None
    min_sm: int = 0
    backends: frozenset[str] = frozenset({"tensorrt", "pytorch"})
    sm100_unsupported: bool = False


_TRTLLM_ONLY = frozenset({"tensorrt"})
_PYTORCH_ONLY = frozenset({"pytorch"})

#: Every quantization format, in the API's order.
QUANT_FORMAT_TABLE: dict[str, QuantFormatInfo] = {
    info.name: info
    for info in (
        QuantFormatInfo("none", "model dtype", weight_bits=16),
        QuantFormatInfo(
            "fp8",
            "FP8 weights+activations, SM 89+",
            weight_bits=8,
            min_sm=89,
            modelopt_config="FP8_DEFAULT_CFG",
            quant_algo="FP8",
            fp8_context_fmha=True,
            compute="fp8",
        ),
        QuantFormatInfo(
            "int8_sq",
            "INT8 SmoothQuant",
            weight_bits=8,
            min_sm=80,
            modelopt_config="INT8_SMOOTHQUANT_CFG",
            quant_algo="W8A8_SQ_PER_CHANNEL",
            backends=_TRTLLM_ONLY,
            sm100_unsupported=True,
        ),
        QuantFormatInfo(
            "int4_awq",
            "INT4 weights, AWQ",
            weight_bits=4,
            scale_bytes=2,
            scale_block=None,
            awq=True,
            modelopt_config="INT4_AWQ_CFG",
            quant_algo="W4A16_AWQ",
            sm100_unsupported=True,
        ),
        QuantFormatInfo(
            "w4a8_awq",
            "INT4 weights, FP8 activations, SM 89+",
            weight_bits=4,
            scale_bytes=2,
            scale_block=None,
            min_sm=89,
            awq=True,
            modelopt_config="W4A8_AWQ_BETA_CFG",
            quant_algo="W4A8_AWQ",
            fp8_context_fmha=True,
            compute="fp8",
        ),
        QuantFormatInfo(
            "nvfp4",
            "Blackwell",
            weight_bits=4,
            scale_bytes=1,
            scale_block=16,
            min_sm=100,
            modelopt_config="NVFP4_DEFAULT_CFG",
            quant_algo="NVFP4",
            calibration_needs_cuda=True,
            fp8_context_fmha=True,
            compute="fp4",
        ),
        QuantFormatInfo(
            "mxfp8",
            "Blackwell; pytorch backend on TensorRT-LLM 1.3+",
            weight_bits=8,
            scale_bytes=1,
            scale_block=32,
            min_sm=100,
            modelopt_config="MXFP8_DEFAULT_CFG",
            backends=_PYTORCH_ONLY,
            min_runtime=(1, 3),
            runtime_note="TensorRT-LLM 1.2.x has no MXFP8 QuantAlgo; MXFP8 checkpoint loading arrived on "
            "main after 1.2.1 (NVIDIA/TensorRT-LLM PR #14962, merged 2026-06-04)",
            compute="fp8",
        ),
    )
}

#: Every KV-cache dtype, in the API's order (exported names: reference §1.2 ``KV_CACHE_QUANT_ALGO_LIST``).
KV_CACHE_DTYPE_TABLE: dict[str, KVCacheDtypeInfo] = {
    info.name: info
    for info in (
        KVCacheDtypeInfo("auto", "model dtype", bytes=ENGINE_DTYPE_BYTES, quant_algo=None),
        KVCacheDtypeInfo("fp8", "SM 89+, halves KV bytes vs bf16", bytes=1, quant_algo="FP8", min_sm=89),
        KVCacheDtypeInfo(
            "int8",
            "tensorrt backend only",
            bytes=1,
            quant_algo="INT8",
            backends=_TRTLLM_ONLY,
            sm100_unsupported=True,
        ),
    )
}

QUANT_FORMATS: tuple[str, ...] = tuple(QUANT_FORMAT_TABLE)
KV_CACHE_DTYPES: tuple[str, ...] = tuple(KV_CACHE_DTYPE_TABLE)
#: AWQ formats (``awqBlockSize`` applies).
AWQ_FORMATS: tuple[str, ...] = tuple(f for f, i in QUANT_FORMAT_TABLE.items() if i.awq)
#: Minimum SM (compute capability × 10) per format.
MIN_SM: dict[str, int] = {f: i.min_sm for f, i in QUANT_FORMAT_TABLE.items()}
#: ModelOpt calibration caps AWQ at 32 samples ("AWQ calibration could take longer with calib_size =
#: …, Using calib_size=32 instead", quantize_by_modelopt.py). Here a larger ``num_samples`` with an AWQ
#: format is refused (never silently fewer) and 32 is the AWQ formats' default.
AWQ_MAX_SAMPLES = 32

# NVIDIA's default calibration recipe: TensorRT-LLM ``examples/quantization/quantize.py`` (TL@059c97c1)
# ``--calib_dataset cnn_dailymail``, ``--calib_size 512``, ``--calib_max_seq_length 512``; its
# ``tensorrt_llm/quantization/quantize_by_modelopt.py`` (TL@042c510d, TL@585c7565)
# ``get_calib_dataloader``: ``load_dataset(name, name="3.0.0", split="train")``, the first
# ``calib_size`` of its ``article`` column, tokenized with ``padding=True, truncation=True,
# max_length=calib_max_seq_length`` (left padding, ``get_tokenizer``), moved to the model's device.
# The script's ``--batch_size`` default is 1; this project's default is 32: ModelOpt's calibration
# costs a fixed host time per forward pass (host-device syncs in its quantizers), so FP8 + FP8-KV
# calibration of the Llama-3.1-8B shape on an H200 took 2.9x a plain forward pass at batch 8, 1.43x at
# 32 and 1.31x at 64 (benchmarks/RESULTS.md "quantize-cuda"). Max calibration does not depend on the
# batching (padding tokens aside); halved automatically on GPU out-of-memory.
#: The default calibration dataset (a Hugging Face dataset name).
DEFAULT_CALIBRATION_DATASET = "cnn_dailymail"
#: The ``cnn_dailymail`` configuration and text column TensorRT-LLM's loader reads.
CNN_DAILYMAIL_CONFIG = "3.0.0"
CNN_DAILYMAIL_COLUMN = "article"
#: The offline text set shipped with the builder (an explicit choice, never the default).
BUNDLED_CALIBRATION_DATASET = "bundled"
DEFAULT_CALIBRATION_SAMPLES = 512
DEFAULT_CALIBRATION_BATCH_SIZE = 32
DEFAULT_CALIBRATION_MAX_SEQ_LENGTH = 512


def bundled_calibration_texts() -> list[str]:
    """The samples of the ``bundled`` calibration set (package data ``data/calibration.txt``, CC0;
    one sample per non-empty line, ``#`` lines skipped)."""
    text = resources.files("engine_builder").joinpath("data", "calibration.txt").read_text("utf-8")
    return [line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#")]


#: How many samples the ``bundled`` set holds (a larger ``num_samples`` with it is refused).
BUNDLED_CALIBRATION_SAMPLES = len(bundled_calibration_texts())


def default_calibration_samples(fmt: str) -> int:
    """Calibration samples when ``num_samples`` is not set: 512, or 32 for AWQ formats (as
    TensorRT-LLM's ``quantize_and_export`` uses for AWQ)."""
    return AWQ_MAX_SAMPLES if format_info(fmt).awq else DEFAULT_CALIBRATION_SAMPLES


if set(get_args(QuantFormat)) != set(QUANT_FORMATS) or set(get_args(KVCacheDtype)) != set(KV_CACHE_DTYPES):
    raise AssertionError("QuantFormat / KVCacheDtype literals disagree with the format tables")


def format_info(fmt: str) -> QuantFormatInfo:
    """The table entry of ``fmt``. Raises ``ValueError`` for an unknown format."""
    try:
        return QUANT_FORMAT_TABLE[fmt]
    except KeyError:
        raise ValueError(f"unknown quantization format {fmt!r}; expected one of {QUANT_FORMATS}") from None


def kv_info(kv_cache_dtype: str) -> KVCacheDtypeInfo:
    """The table entry of a KV-cache dtype. Raises ``ValueError`` for an unknown one."""
    try:
        return KV_CACHE_DTYPE_TABLE[kv_cache_dtype]
    except KeyError:
        raise ValueError(
            f"unknown KV cache dtype {kv_cache_dtype!r}; expected one of {KV_CACHE_DTYPES}"
        ) from None


def formats_where(predicate: str, value: object = True) -> tuple[str, ...]:
    """Formats whose field ``predicate`` equals ``value`` (e.g. ``formats_where("awq")``)."""
    return tuple(f for f, i in QUANT_FORMAT_TABLE.items() if getattr(i, predicate) == value)


def formats_without_backend(backend: str) -> tuple[str, ...]:
    """Formats that cannot be built for ``backend``."""
    return tuple(f for f, i in QUANT_FORMAT_TABLE.items() if backend not in i.backends)


def kv_dtypes_without_backend(backend: str) -> tuple[str, ...]:
    """KV-cache dtypes that ``backend`` does not accept."""
    return tuple(k for k, i in KV_CACHE_DTYPE_TABLE.items() if backend not in i.backends)


#: The refusal of a KV-cache dtype the pytorch backend does not accept (:func:`kv_dtypes_without_backend`),
#: as (what, fix): the one text of this rule. The LLMEngine API's CEL rule on ``spec`` says
#: ``"what; fix"`` (``trtllm_operator.api.engine``, the message ``render`` and ``kubectl apply`` print);
#: the planner's :func:`~engine_builder.planner.plan.validate` says it as a ``PlanIssue`` (``plan``
#: prints ``what. Fix: fix``; fresh-user trial 49 W3: ``plan --backend pytorch --kv-cache-dtype int8``
#: answered "fits").
PYTORCH_KV_REFUSAL: tuple[str, str] = (
    f"kvCacheDtype {' or '.join(kv_dtypes_without_backend('pytorch'))} is not supported by the pytorch "
    "backend",
    f"use fp8 (SM {KV_CACHE_DTYPE_TABLE['fp8'].min_sm}+) or auto, or backend tensorrt with "
    "build.pagedContextFMHA: false (an INT8 KV cache turns paged context FMHA off there)",
)


def format_refusal(backend: str, fmt: str | None = None) -> tuple[str, str]:
    """The refusal of a quantization format that ``backend`` cannot build
    (:func:`formats_without_backend`), as (what, fix): the one text of this rule. With ``fmt`` None
    it names every such format: the LLMEngine API's CEL rule on ``spec`` (``"what; fix"``,
    ``trtllm_operator.api.engine``), which cannot name the value; the planner's
    :func:`~engine_builder.planner.plan.validate` (trial 48 V5) and the builder's spec check name the
    one given. The fix names the backends that build it and the formats ``backend`` builds."""
    refused = (fmt,) if fmt is not None else formats_without_backend(backend)
    others = " or ".join(sorted({b for f in refused for b in format_info(f).backends}))
    builds = ", ".join(f for f in QUANT_FORMATS if backend in format_info(f).backends)
    return (
        f"format {' or '.join(refused)} is not supported by the {backend} backend, only by {others}",
        f"set backend: {others}, or use a format the {backend} backend builds ({builds})",
    )


#: The refusal of expert parallelism on the tensorrt backend, as (what, fix) templates whose ``%d`` are
#: (expert, tensor) and (expert,): the one text of this rule. ModelOpt's
#: ``export_tensorrt_llm_checkpoint`` writes ``moe_ep_size 1`` (the LLMEngine API's comment on its rule
#: cites it). The API's CEL rule on ``spec`` fills them with ``strings.format`` (``"what; fix"``,
#: ``trtllm_operator.api.engine``); the planner's :func:`~engine_builder.planner.plan.validate` says it
#: as a ``PlanIssue`` (fresh-user trial 50 X5: ``plan --tp 2 --ep 2`` on tensorrt answered "fits").
TENSORRT_EP_REFUSAL: tuple[str, str] = (
    "parallelism.expert %d is not supported by the tensorrt backend: ModelOpt's TensorRT-LLM "
    "checkpoint export has no expert-parallel argument and writes moe_ep_size 1, so the "
    "engine would be MoE tensor-parallel over %d GPUs instead",
    "set expert: 1, or backend: pytorch (served with moe_expert_parallel_size %d)",
)


#: Formats with which ``trtllm-build`` keeps paged context FMHA for an FP8 KV cache
#: (:func:`paged_context_fmha_kept`).
FP8_CONTEXT_FMHA_FORMATS: tuple[str, ...] = formats_where("fp8_context_fmha")


def paged_context_fmha_refusal(
    kv_cache_dtype: str, fmt: str, *, fp8_keeps: bool | None = None
) -> tuple[str, str]:
    """The refusal of a KV-cache dtype with which ``trtllm-build`` turns paged context FMHA off
    (:func:`paged_context_fmha_kept`) although ``build.pagedContextFMHA`` asks for it, on the tensorrt
    backend, as (what, fix): the one text of the two rules (``kv_cache_dtype`` int8, or fp8 with a format
    that does not keep it). The LLMEngine API's CEL rules on ``spec`` say ``"what; fix"`` with
    ``fmt="%s"`` filled by ``strings.format`` (``trtllm_operator.api.engine``; ``fp8_keeps`` then says
    which branch of its ternary: whether the format keeps paged context FMHA with an FP8 KV cache); the
    planner's :func:`~engine_builder.planner.plan.validate` names the format (fresh-user trial 51 Y6:
    ``plan --kv-cache-dtype int8`` and ``--quantization none --kv-cache-dtype fp8`` answered "fits").
    Each fix offers only what the other rules accept next to the format: an FP8 KV cache only with a
    format that keeps paged context FMHA with it, never INT8."""
    keeps = format_info(fmt).fp8_context_fmha if fp8_keeps is None else fp8_keeps
    kept = " or ".join(FP8_CONTEXT_FMHA_FORMATS)
    if kv_cache_dtype == "int8":
        what = (
            "kvCacheDtype int8 does not work with build.pagedContextFMHA (trtllm-build silently turns it "
            "off, which breaks KV-cache reuse and chunked context)"
        )
        if keeps:
            return (
                what,
                f"set build.pagedContextFMHA: false, kvCacheDtype fp8 (kept with format {fmt}) or "
                "kvCacheDtype auto",
            )
        return (
            what,
            f"set build.pagedContextFMHA: false or kvCacheDtype auto (with format {fmt} an FP8 KV cache "
            f"turns it off too; only {kept} keep it)",
        )
    if kv_cache_dtype == "fp8":
        with_sm = " or ".join(f"{f} (SM {format_info(f).min_sm}+)" for f in FP8_CONTEXT_FMHA_FORMATS)
        return (
            f"with kvCacheDtype fp8 and build.pagedContextFMHA the format must be {kept}, not {fmt}: for "
            "any other format trtllm-build silently turns paged context FMHA off (TensorRT-LLM builder.py), "
            "which breaks KV-cache reuse and chunked context",
            "set build.pagedContextFMHA: false or kvCacheDtype auto (kvCacheDtype int8 turns it off too), "
            f"or use format {with_sm}",
        )
    raise ValueError(f"kvCacheDtype {kv_cache_dtype} keeps paged context FMHA with every format")


def paged_context_fmha_kept(fmt: str, kv_cache_dtype: str) -> bool:
    """Whether ``trtllm-build`` keeps paged context FMHA on for this format and KV-cache dtype.

    TensorRT-LLM 1.2 ``tensorrt_llm/builder.py`` ``build()``: with an FP8 KV cache, a checkpoint whose
    ``quant_algo`` is not FP8, W4A8_AWQ or NVFP4 gets ``use_paged_context_fmha = False`` ("FP8 Paged
    Context FMHA is disabled because FP8 context FMHA is disabled"); an INT8 KV cache always turns it
    off ("Paged Context FMHA is disabled because it doesn't work with int8 kv cache currently"). The
    executor then disables KV-cache reuse and chunked context.
    """
    if kv_cache_dtype == "int8":
        return False
    if kv_cache_dtype == "fp8":
        return format_info(fmt).fp8_context_fmha
    return True


def kv_cache_dtype_choices(
    fmt: str, sm: int, backend: str = "tensorrt", paged_context_fmha: bool = True
) -> tuple[str, ...]:
    """The KV-cache dtypes every rule accepts next to these other fields, in the API's order: the
    backend takes it, a GPU of compute capability ``sm`` runs it (``min_sm``; SM 100–119 refuses an
    ``sm100_unsupported`` one), and on the tensorrt backend with ``build.pagedContextFMHA``
    ``trtllm-build`` keeps paged context FMHA with it (:func:`paged_context_fmha_kept`). The fixes a
    KV-cache refusal offers, so that following one never meets another refusal."""
    return tuple(
        k
        for k, i in KV_CACHE_DTYPE_TABLE.items()
        if backend in i.backends
        and sm >= i.min_sm
        and not (i.sm100_unsupported and sm in SM100_RANGE)
        and (backend != "tensorrt" or not paged_context_fmha or paged_context_fmha_kept(fmt, k))
    )


def runtime_cannot_load(fmt: str, tensorrt_llm_version: str | None) -> str | None:
    """Why TensorRT-LLM ``tensorrt_llm_version`` cannot load checkpoints of ``fmt`` (audit A9), or
    ``None`` when it can or when the version is not known (``None`` or not a version string).

    The floor is the format's :attr:`QuantFormatInfo.min_runtime`; its ``runtime_note`` says why.
    """
    info = format_info(fmt)
    if info.min_runtime is None or not tensorrt_llm_version:
        return None
    try:
        have = version_tuple(tensorrt_llm_version)
    except ValueError:
        return None
    if have >= info.min_runtime:
        return None
    need = ".".join(str(p) for p in info.min_runtime)
    return (
        f"format {fmt} needs TensorRT-LLM {need} or newer to load, but the runtime has TensorRT-LLM "
        f"{tensorrt_llm_version} ({info.runtime_note})"
    )


#: ``spec.backend`` → the first TensorRT-LLM release that has it. pytorch: "The PyTorch backend of
#: TensorRT-LLM is available in version 0.17 and later" (TensorRT-LLM docs, PyTorch Backend page of
#: every release 0.18.2–1.1, e.g. https://nvidia.github.io/TensorRT-LLM/0.19.0/torch.html). Only
#: floors the docs state are here (fresh-user trial 48 V10): not a ceiling for tensorrt (its removal is
#: on TensorRT-LLM ``main`` after 1.2, the first release without it is not confirmed: docs/reference/
#: tensorrt-llm.md §0), nor the Triton LLM-API model's or OpenAI frontend's first image.
BACKEND_MIN_RUNTIME: dict[str, tuple[int, ...]] = {"pytorch": (0, 17)}


def runtime_lacks_backend(backend: str, tensorrt_llm_version: str | None) -> str | None:
    """Why TensorRT-LLM ``tensorrt_llm_version`` has no ``backend`` (:data:`BACKEND_MIN_RUNTIME`), or
    ``None`` when it has it or the version is not known (``None`` or not a version string)."""
    floor = BACKEND_MIN_RUNTIME.get(backend)
    if floor is None or not tensorrt_llm_version:
        return None
    try:
        have = version_tuple(tensorrt_llm_version)
    except ValueError:
        return None
    if have >= floor:
        return None
    need = ".".join(str(p) for p in floor)
    return (
        f"backend {backend} needs TensorRT-LLM {need} or newer (its PyTorch backend came in {need}), but "
        f"the runtime has TensorRT-LLM {tensorrt_llm_version}"
    )


def engine_paged_context_fmha(backend: str, paged_context_fmha: bool, fmt: str, kv_cache_dtype: str) -> bool:
    """Whether the served engine has paged context FMHA, the one thing KV-cache block reuse and chunked
    context need on the engine path (audit B7).

    ``tensorrt``: the build asked for it (``build.pagedContextFMHA``) and ``trtllm-build`` kept it
    (:func:`paged_context_fmha_kept`). Without it TensorRT-LLM's executor silently turns both off
    (``cpp/tensorrt_llm/batch_manager/trtGptModelInflightBatching.cpp`` ``fixExecutorConfig``: block
    reuse; ``cpp/tensorrt_llm/executor/executorImpl.cpp`` ``fixExecutorConfig``: chunked context), so
    a repository that enables them describes a server that does not exist. ``pytorch``: no engine is
    built; the LLM API decides both at load time (True).
    """
    if backend != "tensorrt":
        return True
    return paged_context_fmha and paged_context_fmha_kept(fmt, kv_cache_dtype)


def describe_formats() -> str:
    """``none (model dtype), fp8 (…), …`` for API descriptions and CLI help."""
    return ", ".join(f"{f} ({i.description})" for f, i in QUANT_FORMAT_TABLE.items())


def quantized_bytes_per_param(fmt: str, awq_block_size: int = DEFAULT_AWQ_BLOCK_SIZE) -> Fraction:
    """Exact bytes per quantized linear weight element, block scales included (see module docstring).

    ``none`` → 2; ``fp8``/``int8_sq`` → 1; ``int4_awq``/``w4a8_awq`` → 1/2 + 2/``awq_block_size``
    (0.515625 at 128); ``nvfp4`` → 1/2 + 1/16 = 0.5625; ``mxfp8`` → 1 + 1/32 = 1.03125.
    Raises ``ValueError`` for an unknown format.
    """
    return format_info(fmt).bytes_per_weight(awq_block_size)


def bytes_per_param(kind: TensorKind, fmt: str, awq_block_size: int = DEFAULT_AWQ_BLOCK_SIZE) -> Fraction:
    """Bytes per element of a tensor of ``kind`` under ``fmt``: only ``linear`` is quantized."""
    if kind == "linear":
        return quantized_bytes_per_param(fmt, awq_block_size)
    return Fraction(ENGINE_DTYPE_BYTES)


def kv_dtype_bytes(kv_cache_dtype: str) -> int:
    """Bytes per KV-cache element: ``auto`` = the engine dtype (fp16/bf16, 2), ``fp8`` and ``int8`` 1."""
    return kv_info(kv_cache_dtype).bytes
