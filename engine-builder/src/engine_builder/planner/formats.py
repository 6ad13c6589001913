"""Bytes per parameter by quantization format, and which tensors stay unquantized.

Each format stores the quantized *linear* weights (attention q/k/v/o, MLP and MoE expert
projections) in a narrower type plus scaling factors; everything else — the input embedding,
``lm_head``, norms, the MoE router and biases — stays in the checkpoint dtype. Sources:

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
"""

from __future__ import annotations

from fractions import Fraction
from typing import Literal

from engine_builder.planner.architecture import TensorKind

QuantFormat = Literal["none", "fp8", "int8_sq", "int4_awq", "w4a8_awq", "nvfp4", "mxfp8"]
KVCacheDtype = Literal["auto", "fp8", "int8"]

QUANT_FORMATS: tuple[str, ...] = ("none", "fp8", "int8_sq", "int4_awq", "w4a8_awq", "nvfp4", "mxfp8")
KV_CACHE_DTYPES: tuple[str, ...] = ("auto", "fp8", "int8")

#: Bytes of an unquantized engine weight / activation (fp16 or bf16; fp32 checkpoints become fp16).
ENGINE_DTYPE_BYTES = 2

#: Default AWQ block (group) size: ``quantize.py --awq_block_size`` default 128 (reference §1.1).
DEFAULT_AWQ_BLOCK_SIZE = 128

#: Minimum SM (compute capability × 10) per format. FP8 compute: Ada/Hopper (SM 89+); INT4 AWQ with
#: FP8 activations (w4a8_awq) "require SM >= 89"; INT8 SmoothQuant not on SM 70/75 (support matrix,
#: reference §1.2). NVFP4 and MXFP8 tensor-core formats are Blackwell (SM 100+).
MIN_SM: dict[str, int] = {
    "none": 0,
    "fp8": 89,
    "int8_sq": 80,
    "int4_awq": 0,
    "w4a8_awq": 89,
    "nvfp4": 100,
    "mxfp8": 100,
}


def quantized_bytes_per_param(fmt: str, awq_block_size: int = DEFAULT_AWQ_BLOCK_SIZE) -> Fraction:
    """Exact bytes per quantized linear weight element, block scales included (see module docstring).

    ``none`` → 2; ``fp8``/``int8_sq`` → 1; ``int4_awq``/``w4a8_awq`` → 1/2 + 2/``awq_block_size``
    (0.515625 at 128); ``nvfp4`` → 1/2 + 1/16 = 0.5625; ``mxfp8`` → 1 + 1/32 = 1.03125.
    Raises ``ValueError`` for an unknown format.
    """
    if fmt == "none":
        return Fraction(ENGINE_DTYPE_BYTES)
    if fmt in ("fp8", "int8_sq"):
        return Fraction(1)
    if fmt in ("int4_awq", "w4a8_awq"):
        return Fraction(1, 2) + Fraction(2, awq_block_size)
    if fmt == "nvfp4":
        return Fraction(1, 2) + Fraction(1, 16)
    if fmt == "mxfp8":
        return Fraction(1) + Fraction(1, 32)
    raise ValueError(f"unknown quantization format {fmt!r}; expected one of {QUANT_FORMATS}")


def bytes_per_param(kind: TensorKind, fmt: str, awq_block_size: int = DEFAULT_AWQ_BLOCK_SIZE) -> Fraction:
    """Bytes per element of a tensor of ``kind`` under ``fmt``: only ``linear`` is quantized."""
    if kind == "linear":
        return quantized_bytes_per_param(fmt, awq_block_size)
    return Fraction(ENGINE_DTYPE_BYTES)


def kv_dtype_bytes(kv_cache_dtype: str) -> int:
    """Bytes per KV-cache element: ``auto`` = the engine dtype (fp16/bf16, 2), ``fp8`` and ``int8`` 1."""
    if kv_cache_dtype == "auto":
        return ENGINE_DTYPE_BYTES
    if kv_cache_dtype in ("fp8", "int8"):
        return 1
    raise ValueError(f"unknown KV cache dtype {kv_cache_dtype!r}; expected one of {KV_CACHE_DTYPES}")
