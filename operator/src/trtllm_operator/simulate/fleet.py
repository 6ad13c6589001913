"""Build a simulated replica from a model config, a GPU and a quantization, via the capacity planner.

The planner (``engine_builder.planner``) gives what the operator would deploy: weight bytes and KV
bytes per token per GPU, the KV-cache capacity in tokens (``max_kv_tokens``) and the recommended
``max_batch_size`` / ``max_num_tokens``. The GPU catalog gives the datasheet rates the
iteration-time model (:mod:`trtllm_operator.simulate.perf`) scales with.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from importlib import resources
from pathlib import Path
from typing import Any

from engine_builder.planner import (
    Architecture,
    Plan,
    PlanIssue,
    PlanRequest,
    bounded_warnings,
    load_hf_config,
    lookup,
    plan,
)
from trtllm_operator.decide.serving_params import MAX_TOKENS_FIELD, max_tokens_shortfall
from trtllm_operator.simulate.engine import ReplicaSpec
from trtllm_operator.simulate.perf import (
    BENCH_KV_FRACTION,
    BENCH_MAX_BATCH_SIZE,
    BENCH_MAX_NUM_TOKENS,
    CALIBRATION,
    DEFAULT_EFFICIENCY,
    CalibrationPoint,
    Efficiency,
    GPURates,
    IterationModel,
    ModelCosts,
    Replica,
)


class ReplicaInputError(ValueError):
    """The replica's settings break a planner rule: ``issues`` are the plan's reasons of kind
    ``invalid`` (a bad value, such as ``maxNumTokens`` below one KV block or a tensor parallelism
    that does not divide the heads), each naming its API field and fix — bad input, not a model that
    does not fit (``trtllm-operator plan`` exits 2 for them too)."""

    def __init__(self, issues: tuple[PlanIssue, ...]) -> None:
        super().__init__("; ".join(str(issue) for issue in issues))
        self.issues = issues


class ReplicaDoesNotFitError(ValueError):
    """The model does not fit on the replica's GPUs (a memory shortfall, not a broken rule): ``plan``
    is the planner's plan, whose ``reasons`` say why and whose ``recommended`` names the tensor
    parallelism and the GPU that would fit (``None`` when none does), so that a command can name its
    own flags and the values to try."""

    def __init__(self, message: str, plan: Plan) -> None:
        super().__init__(message)
        self.plan = plan


@dataclass(frozen=True)
class ReplicaSetup:
    """A replica spec plus the planner's plan it came from (for reports)."""

    spec: ReplicaSpec
    plan: Plan
    rates: GPURates
    costs: ModelCosts


def one_node_issue(tp: int, pp: int, gpus_per_node: int, product: str) -> PlanIssue:
    """The simulator models a replica of one node (one Triton pod; fresh-user trial 38 F5). A replica
    beyond one node is, in the operator, a LeaderWorkerSet group of ``ceil(tp × pp / gpus_per_node)``
    pods whose leader runs ``mpirun`` over the group (``trtllm_operator.render.leaderworkerset``);
    its tensor/pipeline traffic crosses the inter-node network, which the performance fit (single-node
    TP 1–2 points, docs/simulator.md) does not represent, and its group restarts and schedules as one
    (``RecreateGroupOnPodRestart``), which the fleet model does not. So it is refused, not guessed."""
    return PlanIssue(
        "spec.parallelism",
        f"tensor × pipeline = {tp * pp} GPUs exceeds the {gpus_per_node} GPUs of one {product} node, and "
        "simulate models replicas of one node: a multi-node replica (spec.parallelism.multiNode: true, a "
        "LeaderWorkerSet group) is not modelled.",
        f"lower tensor/pipeline parallelism to at most {gpus_per_node} GPUs per replica; "
        "`trtllm-operator plan --multi-node` checks whether the multi-node engine fits.",
    )


def quantized(quantization: str) -> str:
    """``without quantization`` for ``spec.quantization.format`` ``none``, else ``with FORMAT
    quantization``: for messages (fresh-user trial 44 F13: "does not fit … with none")."""
    return "without quantization" if quantization == "none" else f"with {quantization} quantization"


def model_costs(arch: Architecture, p: Plan) -> ModelCosts:
    """Per-GPU costs of one replica: weights and KV bytes from the plan, FLOPs from active parameters."""
    world = p.tp * p.pp
    return ModelCosts(
        weight_bytes_per_gpu=float(p.weight_bytes_per_gpu),
        flops_per_token_per_gpu=2.0 * arch.params_active_per_token() / world,
        kv_bytes_per_token_per_gpu=float(p.kv_bytes_per_token_per_gpu),
    )


def replica_setup(
    hf_config: dict[str, Any] | str | Path,
    gpu: str,
    *,
    quantization: str = "fp8",
    kv_cache_dtype: str = "auto",
    tp: int = 1,
    pp: int = 1,
    max_batch_size: int | None = None,
    max_num_tokens: int | None = None,
    kv_cache_free_gpu_mem_fraction: float = 0.9,
    efficiency: Efficiency = DEFAULT_EFFICIENCY,
    chunked_context: bool = False,
    max_seq_len: int | None = None,
    max_tokens_in_paged_kv_cache: int | None = None,
    backend: str = "tensorrt",
    max_input_len: int | None = None,
    paged_context_fmha: bool = True,
) -> ReplicaSetup:
    """Plan one replica and build its :class:`ReplicaSpec`.

    ``hf_config``: a Hugging Face ``config.json`` (path or parsed). Unset ``max_batch_size`` /
    ``max_num_tokens`` / ``max_seq_len`` (the engine's ``spec.build.*``, tokens) take the planner's
    values (``max_seq_len``: derived from the KV cache, above ``max_input_len`` when that is set,
    docs/planner.md); ``chunked_context`` is the
    deployment's ``spec.server.enableChunkedContext`` (:attr:`ReplicaSpec.chunked_context`);
    ``max_tokens_in_paged_kv_cache`` its ``spec.server.maxTokensInPagedKvCache`` (tokens), which bounds
    the pool: :func:`kv_pool_limit`, in whole KV blocks rounded as ``backend`` (the engine's
    ``spec.backend``) rounds it; ``backend`` and ``paged_context_fmha`` (its
    ``spec.build.pagedContextFMHA``) also go to the planner's rules, which refuse a KV cache that turns
    paged context FMHA off only on tensorrt with it on (fresh-user trial 51 Y6). Raises
    ``engine_builder.planner.PlanInputError`` for a value the planner cannot take at all,
    :class:`ReplicaInputError` for one that breaks a planner rule or for ``tp × pp`` beyond one node
    (:func:`one_node_issue`), and :class:`ReplicaDoesNotFitError` (a ``ValueError``) when the model
    does not fit (naming the planner's reasons, with the plan).
    """
    config = hf_config if isinstance(hf_config, dict) else load_hf_config(str(hf_config))
    arch = Architecture.from_hf_config(config)
    gpu_spec = lookup(gpu)
    request = PlanRequest(
        quantization=quantization,
        kv_cache_dtype=kv_cache_dtype,
        tp=tp,
        pp=pp,
        max_batch_size=max_batch_size,
        max_num_tokens=max_num_tokens,
        kv_cache_free_gpu_mem_fraction=kv_cache_free_gpu_mem_fraction,
        max_seq_len=max_seq_len,
        max_input_len=max_input_len,
        gpus_per_node=gpu_spec.gpus_per_node,  # the catalog's (4 for GB200), as `plan` takes it
        backend=backend,
        paged_context_fmha=paged_context_fmha,
    )
    # After the request's own checks, so that a value the API refuses at all (--pp 80, tensor ×
    # pipeline above 64) says so rather than "more than one node" (fresh-user trial 40 F3).
    if tp * pp > gpu_spec.gpus_per_node:
        raise ReplicaInputError((one_node_issue(tp, pp, gpu_spec.gpus_per_node, gpu_spec.product),))
    p = plan(arch, request, gpu_spec)
    invalid = tuple(r for r in p.reasons if r.kind == "invalid")
    if invalid:  # a rule broken (trial 37b F7: maxNumTokens 1 was "the model does not fit")
        raise ReplicaInputError(invalid)
    if not p.fits or p.max_kv_tokens <= 0:
        reasons = "; ".join(str(r) for r in p.reasons) or "no KV cache left"
        raise ReplicaDoesNotFitError(
            f"the model does not fit on {tp * pp} × {gpu_spec.product} {quantized(quantization)}: {reasons}",
            p,
        )
    pool = kv_pool_limit(p, max_tokens_in_paged_kv_cache, backend)
    rates = GPURates.from_gpu(gpu_spec)
    costs = model_costs(arch, p)
    model = IterationModel.build(costs, rates, quantization, efficiency)
    spec = ReplicaSpec(
        gpus=tp * pp,
        max_kv_tokens=pool,
        max_batch_size=max_batch_size or p.max_batch_size,
        max_num_tokens=max_num_tokens or p.max_num_tokens,
        model=model,
        tokens_per_block=p.tokens_per_block,
        chunked_context=chunked_context,
        max_seq_len=p.max_seq_len,
    )
    if pool < p.max_kv_tokens:  # the planner's warnings counted in the bounded pool (trial 45 A14)
        bounded = bounded_warnings(
            p, gpu_spec, max_batch_size, pool, backend=backend, paged_context_fmha=paged_context_fmha
        )
        p = replace(p, warnings=bounded)
    return ReplicaSetup(spec=spec, plan=p, rates=rates, costs=costs)


def kv_pool_limit(p: Plan, max_tokens: int | None, backend: str = "tensorrt") -> int:
    """The KV pool of a replica whose deployment sets ``maxTokensInPagedKvCache`` = ``max_tokens``
    (tokens; ``None``: unset): the smaller of it and the plan's pool from the free-memory fraction
    (``p.max_kv_tokens``). TensorRT-LLM: "if both are specified, firstly the
    ``freeGpuMemoryFraction`` is used to compute the number of tokens …, and then the minimum between
    this computed number of tokens and ``maxTokens`` is used" (NVIDIA/TensorRT-LLM
    ``docs/source/reference/memory.md``, docs/reference/tensorrt-llm.md §7.2; the operator renders the
    field as Triton's ``max_tokens_in_paged_kv_cache``, tensorrtllm_backend v0.19.0
    ``all_models/inflight_batcher_llm/tensorrt_llm/config.pbtxt``, §4.3).

    Raises :class:`ReplicaInputError` when that pool holds less than one sequence of the plan's
    ``max_seq_len``: the LLMDeployment controller refuses such a deployment (condition reason
    ``KVCacheTooSmall``), by the same check and words,
    :func:`trtllm_operator.decide.serving_params.max_tokens_shortfall`."""
    if max_tokens is None or max_tokens >= p.max_kv_tokens:
        return p.max_kv_tokens
    short = max_tokens_shortfall(
        max_tokens, p.max_seq_len, 1, p.tokens_per_block, pool=p.max_kv_tokens, backend=backend
    )
    if short is not None:
        message, fix = short
        refused = "the operator refuses such a deployment too (KVCacheTooSmall) and rolls nothing out"
        raise ReplicaInputError((PlanIssue(MAX_TOKENS_FIELD, f"{message}; {refused}.", fix),))
    return max_tokens


def calibration_config(model: str) -> dict[str, Any]:
    """The Hugging Face config of a calibration model, shipped with the package."""
    ref = resources.files("trtllm_operator.simulate") / "calibration_models" / f"{model}.json"
    return load_hf_config(str(ref))


def calibration_replicas() -> list[tuple[CalibrationPoint, Replica]]:
    """Every published calibration point with its planned replica (FP8 weights, FP8 KV cache).

    NVIDIA's FP8 checkpoints quantize the KV cache to FP8 as well (assumption, stated in
    docs/simulator.md); the benchmark settings are max_batch_size 2048, max_num_tokens 8192 and a
    KV free-memory fraction of 0.95.
    """
    cache: dict[tuple[str, str, int], Replica] = {}
    out: list[tuple[CalibrationPoint, Replica]] = []
    for point in CALIBRATION:
        key = (point.model, point.gpu, point.tp)
        if key not in cache:
            setup = replica_setup(
                calibration_config(point.model),
                point.gpu,
                quantization="fp8",
                kv_cache_dtype="fp8",
                tp=point.tp,
                max_batch_size=BENCH_MAX_BATCH_SIZE,
                max_num_tokens=BENCH_MAX_NUM_TOKENS,
                kv_cache_free_gpu_mem_fraction=BENCH_KV_FRACTION,
            )
            cache[key] = Replica(setup.costs, setup.rates, "fp8", setup.plan.max_kv_tokens)
        out.append((point, cache[key]))
    return out
