"""Table-driven planner checks with hand-computed values (real configs, every format and KV dtype).

The expected numbers below were computed by hand from the config shapes, independently of the
planner code:

* per GPU, for each PP rank, ``(linear, other)`` parameters — ``linear`` are the quantizable
  projections (q, k, v, o, MLP / experts), ``other`` the tensors that stay 16-bit (embedding on PP
  rank 0, final norm and vocab-parallel ``lm_head`` on the last rank, layer norms, MoE router,
  Qwen2 q/k/v biases). Example, Llama-3.1-8B TP 1 PP 1: linear = 32 × (2·4096·4096 + 2·4096·1024 +
  3·4096·14336) = 6,979,321,856; other = 32 × 2·4096 + 4096 + 2 × 128,256·4096 = 1,050,939,392.
* KV bytes per token per GPU = 2 × ceil(layers / PP) × ceil(kv_heads / TP) × head_dim × bytes.

Weight bytes per GPU = max over PP ranks of ceil(linear × bytes(format) + other × 2).
"""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import pytest

from engine_builder.planner import (
    Architecture,
    PlanRequest,
    kv_bytes_per_token_per_gpu,
    load_hf_config,
    weight_bytes_per_gpu,
)

CONFIGS = Path(__file__).resolve().parents[1] / "fixtures" / "model-configs"
MODELS = {
    "llama8b": "meta-llama__Llama-3.1-8B-Instruct.json",
    "llama70b": "meta-llama__Llama-3.1-70B-Instruct.json",
    "mixtral": "mistralai__Mixtral-8x7B-v0.1.json",
    "qwen25_7b": "Qwen__Qwen2.5-7B-Instruct.json",
}

#: Bytes per quantized linear weight, block scales included (docs/planner.md, formats.py).
BYTES_PER_LINEAR_PARAM = {
    "none": Fraction(2),
    "fp8": Fraction(1),
    "int8_sq": Fraction(1),
    "int4_awq": Fraction(1, 2) + Fraction(2, 128),  # FP16 scale per 128-element block
    "w4a8_awq": Fraction(1, 2) + Fraction(2, 128),
    "nvfp4": Fraction(1, 2) + Fraction(1, 16),  # FP8 scale per 16 elements
    "mxfp8": Fraction(1) + Fraction(1, 32),  # E8M0 scale per 32 elements
}

# (model, tp, pp, [(linear, other) per PP rank], kv bytes/token/GPU at fp16, at fp8/int8)
TABLE = [
    ("llama8b", 1, 1, [(6979321856, 1050939392)], 131072, 65536),
    ("llama8b", 2, 1, [(3489660928, 788271104)], 65536, 32768),
    ("llama8b", 4, 1, [(1744830464, 656936960)], 32768, 16384),
    ("llama8b", 8, 1, [(872415232, 591269888)], 16384, 8192),
    ("llama8b", 1, 2, [(3489660928, 525467648), (3489660928, 525471744)], 65536, 32768),
    ("llama8b", 2, 2, [(1744830464, 525467648), (1744830464, 262803456)], 32768, 16384),
    ("llama8b", 4, 2, [(872415232, 525467648), (872415232, 131469312)], 16384, 8192),
    ("llama8b", 8, 2, [(436207616, 525467648), (436207616, 65802240)], 8192, 4096),
    ("llama70b", 1, 1, [(68451041280, 2102665216)], 327680, 163840),
    ("llama70b", 2, 1, [(34225520640, 1577328640)], 163840, 81920),
    ("llama70b", 4, 1, [(17112760320, 1314660352)], 81920, 40960),
    ("llama70b", 8, 1, [(8556380160, 1183326208)], 40960, 20480),
    ("llama70b", 1, 2, [(34225520640, 1051328512), (34225520640, 1051336704)], 163840, 81920),
    ("llama70b", 2, 2, [(17112760320, 1051328512), (17112760320, 526000128)], 81920, 40960),
    ("llama70b", 4, 2, [(8556380160, 1051328512), (8556380160, 263331840)], 40960, 20480),
    ("llama70b", 8, 2, [(4278190080, 1051328512), (4278190080, 131997696)], 20480, 10240),
    ("mixtral", 1, 1, [(46439333888, 263458816)], 131072, 65536),
    ("mixtral", 2, 1, [(23219666944, 197922816)], 65536, 32768),
    ("mixtral", 4, 1, [(11609833472, 165154816)], 32768, 16384),
    ("mixtral", 8, 1, [(5804916736, 148770816)], 16384, 8192),
    ("mixtral", 1, 2, [(23219666944, 131727360), (23219666944, 131731456)], 65536, 32768),
    ("mixtral", 2, 2, [(11609833472, 131727360), (11609833472, 66195456)], 32768, 16384),
    ("mixtral", 4, 2, [(5804916736, 131727360), (5804916736, 33427456)], 16384, 8192),
    ("mixtral", 8, 2, [(2902458368, 131727360), (2902458368, 17043456)], 8192, 4096),
    # Qwen2.5-7B: 28 heads, 4 KV heads; at TP 8 the KV heads are replicated (ceil(4/8) = 1).
    ("qwen25_7b", 1, 1, [(6525288448, 1090328064)], 57344, 28672),
    ("qwen25_7b", 2, 1, [(3262644224, 817764864)], 28672, 14336),
    ("qwen25_7b", 4, 1, [(1631322112, 681483264)], 14336, 7168),
    ("qwen25_7b", 8, 1, [(841351168, 613347840)], 14336, 7168),
    ("qwen25_7b", 1, 2, [(3262644224, 545162240), (3262644224, 545165824)], 28672, 14336),
    ("qwen25_7b", 2, 2, [(1631322112, 545129984), (1631322112, 272634880)], 14336, 7168),
    ("qwen25_7b", 4, 2, [(815661056, 545113856), (815661056, 136369408)], 7168, 3584),
    ("qwen25_7b", 8, 2, [(420675584, 545108480), (420675584, 68239360)], 7168, 3584),
]


def _arch(model: str) -> Architecture:
    return Architecture.from_hf_config(load_hf_config(CONFIGS / MODELS[model]))


def _expected_weight_bytes(ranks: list[tuple[int, int]], fmt: str) -> int:
    best = 0
    for linear, other in ranks:
        exact = linear * BYTES_PER_LINEAR_PARAM[fmt] + other * 2
        best = max(best, -(-exact.numerator // exact.denominator))
    return best


@pytest.mark.parametrize("fmt", list(BYTES_PER_LINEAR_PARAM))
@pytest.mark.parametrize(("model", "tp", "pp", "ranks", "kv16", "kv8"), TABLE)
def test_weight_bytes_per_gpu(
    model: str, tp: int, pp: int, ranks: list[tuple[int, int]], kv16: int, kv8: int, fmt: str
) -> None:
    request = PlanRequest(quantization=fmt, tp=tp, pp=pp)
    assert weight_bytes_per_gpu(_arch(model), request) == _expected_weight_bytes(ranks, fmt)


@pytest.mark.parametrize(("model", "tp", "pp", "ranks", "kv16", "kv8"), TABLE)
def test_params_per_rank(
    model: str, tp: int, pp: int, ranks: list[tuple[int, int]], kv16: int, kv8: int
) -> None:
    arch = _arch(model)
    assert [arch.params_per_rank(tp, pp, r) for r in range(pp)] == [lin + oth for lin, oth in ranks]


@pytest.mark.parametrize(("kv_dtype", "column"), [("auto", 0), ("fp8", 1), ("int8", 1)])
@pytest.mark.parametrize(("model", "tp", "pp", "ranks", "kv16", "kv8"), TABLE)
def test_kv_bytes_per_token_per_gpu(
    model: str,
    tp: int,
    pp: int,
    ranks: list[tuple[int, int]],
    kv16: int,
    kv8: int,
    kv_dtype: str,
    column: int,
) -> None:
    request = PlanRequest(kv_cache_dtype=kv_dtype, tp=tp, pp=pp)
    assert kv_bytes_per_token_per_gpu(_arch(model), request) == (kv16, kv8)[column]


def test_awq_block_size_64_doubles_the_scale_overhead() -> None:
    # Llama-3.1-8B TP 1: linear × (1/2 + 2/64) + other × 2.
    request = PlanRequest(quantization="int4_awq", awq_block_size=64)
    assert weight_bytes_per_gpu(_arch("llama8b"), request) == 6979321856 * 17 // 32 + 1050939392 * 2


def test_pipeline_split_gives_first_ranks_the_remainder() -> None:
    # 80 layers over 3 stages: 27, 27, 26 (numpy.array_split, as TensorRT-LLM's Mapping.pp_layers).
    assert _arch("llama70b").pp_layer_counts(3) == [27, 27, 26]
    # KV per token uses the fullest stage: 2 × 27 × 8 × 128 × 2.
    assert kv_bytes_per_token_per_gpu(_arch("llama70b"), PlanRequest(pp=3)) == 110592
