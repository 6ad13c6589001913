"""Iteration-time model of one TensorRT-LLM replica, calibrated to NVIDIA's published throughput.

One inflight-batching iteration runs the scheduled context (prefill) tokens and one decode token for
every generating sequence. Its duration is modelled as a sum of four roofline-style terms::

    t_iter = overhead_s                                         (launch / scheduling, per iteration)
           + weight_bytes_per_gpu / (HBM_bw × eta_weights)       (weights streamed once per iteration)
           + tokens × flops_per_token_per_gpu / (peak × eta_compute)  (GEMMs for every scheduled token)
           + kv_tokens × kv_bytes_per_token_per_gpu / (HBM_bw × eta_kv)  (attention reads the KV cache)

where ``tokens`` = prefill tokens + decoding sequences, ``kv_tokens`` = the summed context length of
the decoding sequences, ``peak`` the dense tensor-core rate for the compute format (FP8 for fp8 /
w4a8 / nvfp4-on-Hopper weights, BF16 otherwise) and ``HBM_bw`` the memory bandwidth. The
four unknowns ``overhead_s, 1/eta_weights, 1/eta_compute, 1/eta_kv`` enter linearly, so they are
fitted by least squares on relative error against :data:`CALIBRATION` — NVIDIA's
TensorRT-LLM "Performance Overview" throughput tables — using the steady state of a saturated
replica (:func:`steady_state_throughput`). The fitted constants are :data:`DEFAULT_EFFICIENCY`;
``tests/unit/test_simulator_calibration.py`` re-fits and checks every published point within the
accuracy docs/simulator.md states (its tolerances are the test's own, not the model's).

GPU rates come from the planner's GPU catalog (``engine_builder.planner.catalog``: dense datasheet
HBM bandwidth and FP16/FP8/FP4 tensor TFLOPS), so the model extends to every GPU in the catalog; the
efficiencies are fitted on Hopper (H100 SXM, H200) only, so numbers for other generations are
extrapolations.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from engine_builder.planner import GPUSpec
from engine_builder.planner.formats import QUANT_FORMAT_TABLE


@dataclass(frozen=True, slots=True)
class GPURates:
    """Dense peak rates of one GPU: HBM bandwidth in bytes/s, tensor-core FLOP/s per format."""

    name: str
    hbm_bytes_per_s: float
    bf16_flops: float
    fp8_flops: float | None
    fp4_flops: float | None = None

    @staticmethod
    def from_gpu(gpu: GPUSpec) -> GPURates:
        """Rates from the planner's GPU catalog entry (its datasheet numbers).

        Raises ``ValueError`` naming the product when the catalog entry lacks the bandwidth or the
        FP16/BF16 rate (add them with the catalog extension's ``memoryBandwidthBytesPerS`` and
        ``fp16DenseTflops``).
        """
        if not gpu.memory_bandwidth_bytes_per_s or not gpu.fp16_dense_tflops:
            raise ValueError(
                f"--gpu {gpu.product}: the GPU catalog has no memory bandwidth or FP16 TFLOPS for it; "
                "add memoryBandwidthBytesPerS and fp16DenseTflops to the catalog extension"
            )
        tera = 1e12
        return GPURates(
            name=gpu.product,
            hbm_bytes_per_s=float(gpu.memory_bandwidth_bytes_per_s),
            bf16_flops=gpu.fp16_dense_tflops * tera,
            fp8_flops=gpu.fp8_dense_tflops * tera if gpu.fp8_dense_tflops else None,
            fp4_flops=gpu.fp4_dense_tflops * tera if gpu.fp4_dense_tflops else None,
        )


def compute_flops(rates: GPURates, quantization: str) -> float:
    """Peak dense FLOP/s for the GEMMs of a quantization format on this GPU.

    The format table's ``compute`` kind decides: FP8 activations (fp8, w4a8_awq, mxfp8) use the FP8
    rate; nvfp4 the FP4 rate where the GPU has one (else FP8); weight-only formats (int4_awq) and
    none the BF16 rate.
    """
    info = QUANT_FORMAT_TABLE.get(quantization.lower())
    kind = info.compute if info is not None else "bf16"
    if kind == "fp4":
        return rates.fp4_flops or rates.fp8_flops or rates.bf16_flops
    if kind == "fp8" and rates.fp8_flops:
        return rates.fp8_flops
    return rates.bf16_flops


@dataclass(frozen=True, slots=True)
class ModelCosts:
    """Per-GPU costs of one model replica (from the capacity planner's plan).

    ``weight_bytes_per_gpu`` in bytes; ``flops_per_token_per_gpu`` = 2 × active parameters / (TP × PP)
    in FLOP; ``kv_bytes_per_token_per_gpu`` in bytes.
    """

    weight_bytes_per_gpu: float
    flops_per_token_per_gpu: float
    kv_bytes_per_token_per_gpu: float


@dataclass(frozen=True, slots=True)
class Efficiency:
    """Fitted constants of the iteration-time model (see the module docstring)."""

    overhead_s: float
    inv_eta_weights: float
    inv_eta_compute: float
    inv_eta_kv: float


@dataclass(frozen=True, slots=True)
class IterationModel:
    """``iteration_s(tokens, kv_tokens) = a + b × tokens + c × kv_tokens`` in seconds."""

    fixed_s: float
    per_token_s: float
    per_kv_token_s: float

    def iteration_s(self, tokens: int, kv_tokens: int) -> float:
        """Duration of one iteration scheduling ``tokens`` tokens that attend ``kv_tokens`` cached tokens."""
        return self.fixed_s + self.per_token_s * tokens + self.per_kv_token_s * kv_tokens

    @staticmethod
    def build(costs: ModelCosts, rates: GPURates, quantization: str, eff: Efficiency) -> IterationModel:
        """Turn per-GPU model costs and GPU rates into the three coefficients with fitted efficiencies."""
        flops = compute_flops(rates, quantization)
        return IterationModel(
            fixed_s=eff.overhead_s + eff.inv_eta_weights * costs.weight_bytes_per_gpu / rates.hbm_bytes_per_s,
            per_token_s=eff.inv_eta_compute * costs.flops_per_token_per_gpu / flops,
            per_kv_token_s=eff.inv_eta_kv * costs.kv_bytes_per_token_per_gpu / rates.hbm_bytes_per_s,
        )


# --------------------------------------------------------------------------------------------------
# Calibration data and fit

#: TensorRT-LLM's defaults for the scheduler limits the benchmark runs used (BuildConfig / LLM API:
#: max_batch_size 2048, max_num_tokens 8192; reference §3.1) and the KV fraction the overview says
#: it "in many cases" used (0.95).
BENCH_MAX_BATCH_SIZE = 2048
BENCH_MAX_NUM_TOKENS = 8192
BENCH_KV_FRACTION = 0.95


def bench_max_num_tokens(isl: int) -> int:
    """The token budget of a benchmark run: 8192, or the prompt length + 1024 when longer.

    Without chunked context a prompt must fit one iteration next to the decoding sequences, so the
    20000/2000 rows cannot have run with 8192 (trtllm-bench derives its limits from the dataset;
    the exact value it chose is not published, and with at most ~100 sequences in flight any budget
    of prompt + a few hundred tokens gives the same steady state).
    """
    return max(BENCH_MAX_NUM_TOKENS, isl + 1024)


CALIBRATION_SOURCE = (
    "NVIDIA TensorRT-LLM docs, Performance Overview, throughput tables (trtllm-bench, PyTorch backend, "
    "ModelOpt FP8 checkpoints nvidia/Llama-3.1-8B-Instruct-FP8 and nvidia/Llama-3.3-70B-Instruct-FP8): "
    "https://github.com/NVIDIA/TensorRT-LLM/blob/00f37686aa854010d68bcbd0f4ab000221541ca6/"
    "docs/source/performance/perf-overview.md (v1.0-era)"
)


@dataclass(frozen=True, slots=True)
class CalibrationPoint:
    """One published number: total output tokens/s of a saturated replica for uniform ISL/OSL."""

    model: str  # config file stem under tests/fixtures/model-configs/
    gpu: str
    tp: int
    isl: int
    osl: int
    output_tokens_per_s: float


_ISL_OSL = (
    (128, 128),
    (128, 2048),
    (128, 4096),
    (500, 2000),
    (1000, 1000),
    (1000, 2000),
    (2048, 128),
    (2048, 2048),
    (5000, 500),
    (20000, 2000),
)
_TABLES: dict[tuple[str, str, int], tuple[float, ...]] = {
    ("meta-llama__Llama-3.1-8B-Instruct", "H200", 1): (
        27911, 26221, 18027, 20770, 17744, 16828, 3538, 12194, 3902, 1804,
    ),
    ("meta-llama__Llama-3.1-8B-Instruct", "H100", 1): (
        28312, 22714, 14325, 17660, 15220, 13899, 3450, 9305, 3459, 1351,
    ),
    # Llama 3.3 70B has the Llama 3.1 70B architecture.
    ("meta-llama__Llama-3.1-70B-Instruct", "H200", 1): (
        3803, 4336, 2872, 3666, 2909, 2994, 442, 2003, 566, 283,
    ),
    ("meta-llama__Llama-3.1-70B-Instruct", "H100", 2): (
        6378, 6651, 4199, 5222, 4205, 4146, 762, 3082, 898, 437,
    ),
}  # fmt: skip

CALIBRATION: tuple[CalibrationPoint, ...] = tuple(
    CalibrationPoint(model, gpu, tp, isl, osl, tput)
    for (model, gpu, tp), values in _TABLES.items()
    for (isl, osl), tput in zip(_ISL_OSL, values, strict=True)
)


def steady_concurrency(
    isl: int, osl: int, max_kv_tokens: int, max_batch_size: int, max_num_tokens: int
) -> float:
    """Sequences in flight in a saturated replica under ``GUARANTEED_NO_EVICT``.

    Bounded by max_batch_size, by the KV reservation (each sequence reserves ISL + OSL tokens) and by
    the per-iteration token budget (on average B·ISL/OSL prefill tokens + B decode tokens ≤
    max_num_tokens).
    """
    return max(
        1.0,
        min(
            float(max_batch_size),
            math.floor(max_kv_tokens / (isl + osl)),
            max_num_tokens / (isl / osl + 1.0),
        ),
    )


def steady_state_terms(isl: int, osl: int, concurrency: float) -> tuple[float, float]:
    """Average (tokens, kv_tokens) per iteration at ``concurrency`` sequences in flight.

    Each sequence lives OSL iterations: one context iteration (ISL tokens, emits the first token) and
    OSL − 1 decode iterations attending on average ISL + OSL/2 cached tokens.
    """
    decode_share = (osl - 1) / osl
    tokens = concurrency * isl / osl + concurrency * decode_share
    kv_tokens = concurrency * decode_share * (isl + osl / 2.0)
    return tokens, kv_tokens


def steady_state_throughput(
    model: IterationModel,
    isl: int,
    osl: int,
    max_kv_tokens: int,
    *,
    max_batch_size: int = BENCH_MAX_BATCH_SIZE,
    max_num_tokens: int | None = None,
) -> float:
    """Output tokens/s of a saturated replica: B tokens per iteration (one per sequence in flight).

    ``max_num_tokens`` defaults to the benchmark's budget, :func:`bench_max_num_tokens`.
    """
    budget = bench_max_num_tokens(isl) if max_num_tokens is None else max_num_tokens
    b = steady_concurrency(isl, osl, max_kv_tokens, max_batch_size, budget)
    tokens, kv_tokens = steady_state_terms(isl, osl, b)
    return b / model.iteration_s(round(tokens), round(kv_tokens))


def saturated_request_rate(
    model: IterationModel, isl: int, osl: int, *, max_kv_tokens: int, max_batch_size: int, max_num_tokens: int
) -> float:
    """Requests/s one saturated replica completes at mean prompt ``isl`` and output ``osl`` tokens:
    :func:`steady_state_throughput` (output tokens/s at the replica's own limits) over ``osl``. The
    capacity prior κ of :mod:`trtllm_operator.decide.capacity` (``CapacityParams.prior_rps``)."""
    if isl < 1 or osl < 1:
        raise ValueError(f"saturated_request_rate: isl {isl} and osl {osl} must be ≥ 1 token")
    tput = steady_state_throughput(
        model, isl, osl, max_kv_tokens, max_batch_size=max_batch_size, max_num_tokens=max_num_tokens
    )
    return tput / osl


def output_token_weight(
    model: IterationModel, isl: int, osl: int, *, max_kv_tokens: int, max_batch_size: int, max_num_tokens: int
) -> float:
    """What one generated token costs a saturated replica, in prompt tokens, at mean prompt ``isl`` and
    output ``osl``: the ratio of the partial derivatives of the replica time a request takes,
    ``1 / saturated_request_rate``, by ``osl`` and by ``isl`` (central differences of ±10 %). The
    ``output_token_weight`` of the capacity recommendation's token weighting
    (:class:`~trtllm_operator.decide.capacity.CapacityParams`), so that a request's cost
    ``prompt + weight × output`` is proportional to its share of the replica near these lengths.

    On Llama-3.1-70B FP8, TP 2 on H100 (the benchmark's replica) at the Azure conversation trace's mean
    lengths (1,155 / 211) it is about 2: decode runs a weight pass per iteration shared by the batch
    and reads the sequence's KV cache on top of the token's own GEMMs. Raises ``ValueError`` for
    lengths < 1."""
    if isl < 1 or osl < 1:
        raise ValueError(f"output_token_weight: isl {isl} and osl {osl} must be ≥ 1 token")

    def seconds(i: int, o: int) -> float:
        rate = saturated_request_rate(
            model,
            i,
            o,
            max_kv_tokens=max_kv_tokens,
            max_batch_size=max_batch_size,
            max_num_tokens=max_num_tokens,
        )
        return 1.0 / rate

    di, do = max(1, round(isl * 0.1)), max(1, round(osl * 0.1))
    by_prompt = (seconds(isl + di, osl) - seconds(max(1, isl - di), osl)) / (isl + di - max(1, isl - di))
    by_output = (seconds(isl, osl + do) - seconds(isl, max(1, osl - do))) / (osl + do - max(1, osl - do))
    if by_prompt <= 0:
        raise ValueError(f"output_token_weight: the replica time does not grow with the prompt at isl {isl}")
    return max(0.0, by_output / by_prompt)


@dataclass(frozen=True, slots=True)
class Replica:
    """What the fit needs about one calibration configuration."""

    costs: ModelCosts
    rates: GPURates
    quantization: str
    max_kv_tokens: int


def _solve(matrix: list[list[float]], rhs: list[float]) -> list[float]:
    """Gaussian elimination with partial pivoting (tiny dense systems only)."""
    n = len(rhs)
    a = [[*row, rhs[i]] for i, row in enumerate(matrix)]
    for col in range(n):
        pivot = max(range(col, n), key=lambda r: abs(a[r][col]))
        if abs(a[pivot][col]) < 1e-300:
            raise ValueError("calibration fit is singular")
        a[col], a[pivot] = a[pivot], a[col]
        for r in range(n):
            if r != col:
                f = a[r][col] / a[col][col]
                for c in range(col, n + 1):
                    a[r][c] -= f * a[col][c]
    return [a[i][n] / a[i][i] for i in range(n)]


def fit_efficiency(points: Sequence[tuple[CalibrationPoint, Replica]]) -> Efficiency:
    """Non-negative least-squares fit of the four constants on relative error of iteration time.

    For each point the observed iteration time is B / published throughput; the model is linear in
    ``x = (overhead_s, 1/eta_weights, 1/eta_compute, 1/eta_kv)``. Rows are divided by the observed
    time so every point weighs the same regardless of its scale.
    """
    rows: list[list[float]] = []
    for point, rep in points:
        b = steady_concurrency(
            point.isl, point.osl, rep.max_kv_tokens, BENCH_MAX_BATCH_SIZE, BENCH_MAX_NUM_TOKENS
        )
        tokens, kv_tokens = steady_state_terms(point.isl, point.osl, b)
        observed = b / point.output_tokens_per_s
        flops = compute_flops(rep.rates, rep.quantization)
        features = [
            1.0,
            rep.costs.weight_bytes_per_gpu / rep.rates.hbm_bytes_per_s,
            tokens * rep.costs.flops_per_token_per_gpu / flops,
            kv_tokens * rep.costs.kv_bytes_per_token_per_gpu / rep.rates.hbm_bytes_per_s,
        ]
        rows.append([f / observed for f in features])
    # Active-set least squares: a constant that comes out negative (unphysical) is pinned to 0 and
    # the rest re-fitted.
    free = [0, 1, 2, 3]
    while True:
        ata = [[sum(r[i] * r[j] for r in rows) for j in free] for i in free]
        atb = [sum(r[i] for r in rows) for i in free]
        solved = dict(zip(free, _solve(ata, atb), strict=True))
        negative = [i for i, v in solved.items() if v < 0]
        if not negative:
            break
        free.remove(min(negative, key=lambda i: solved[i]))
    x = [solved.get(i, 0.0) for i in range(4)]
    return Efficiency(*x)


#: Result of :func:`fit_efficiency` over :data:`CALIBRATION` (regenerate with
#: ``python -m trtllm_operator.simulate.calibrate``; the unit test checks it is within 2 % of the
#: current fit, so small changes in the planner's memory estimates do not fail it).
DEFAULT_EFFICIENCY = Efficiency(
    overhead_s=0.0,
    inv_eta_weights=0.9479,
    inv_eta_compute=1.8285,
    inv_eta_kv=1.1816,
)
