"""``LLMDeployment``: how to serve an ``LLMEngine`` — Triton fleet, autoscaling, rollout, service.

Server fields are the Triton ``tensorrt_llm/config.pbtxt`` parameters they render to (reference
``tensorrt-llm.md`` §4.3), in camelCase: ``kvCacheFreeGpuMemFraction`` is
``kv_cache_free_gpu_mem_fraction`` and so on.

``spec.replicas`` has one writer at a time: the user (or ``kubectl scale``) while autoscaling is
disabled or in ``hpa``/``keda`` mode (the HPA writes through the scale subresource), the operator's
built-in autoscaler while ``autoscaling.enabled`` and ``mode: builtin``. Nothing here is immutable:
changing ``engineRef`` rolls the fleet to the other engine.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import Field, create_model

from trtllm_operator.api.common import (
    Affinity,
    Annotations,
    ApiModel,
    ClassName,
    Conditions,
    CPUQuantity,
    ImageReference,
    Labels,
    ObjectName,
    PodAnnotations,
    PodsOrPercent,
    Quantity,
    SurgePodsOrPercent,
    Tolerations,
    apparmor_containers_rule,
    cel,
    fraction_rule,
    image_rules,
    model_config,
    mx,
    reserved_label_keys_rule,
)
from trtllm_operator.api.signals import EXTERNAL_MODES, RETIRED, SIGNALS, RetiredSignal, Signal, snake
from trtllm_operator.api.wire import (
    FETCH_CONTAINER,
    LABEL_COMPONENT,
    LABEL_INSTANCE,
    LABEL_MANAGED_BY,
    LABEL_NAME,
    SERVER_CONTAINER,
)

BatchingStrategy = Literal["inflight_fused_batching", "inflight_batching", "v1"]
BatchSchedulerPolicy = Literal["guaranteed_no_evict", "max_utilization"]
AutoscalingMode = Literal["builtin", "hpa", "keda"]
MetricsSource = Literal["pods", "prometheus"]
ServiceType = Literal["ClusterIP", "NodePort", "LoadBalancer"]
ServingAPI = Literal["triton", "openai", "both"]
DeploymentPhase = Literal["Pending", "Progressing", "Ready", "Degraded", "Failed"]


#: The most serving replicas an LLMDeployment may ask for: ``spec.replicas``,
#: ``spec.autoscaling.minReplicas`` and ``maxReplicas`` (the CRD's ``maximum``), and the bound
#: ``trtllm-operator simulate`` puts on its replica flags and ``static:N``.
MAX_REPLICAS = 1000
#: ``spec.replicas`` when a manifest does not write it (the CRD's ``default``): the replicas the
#: operator runs with autoscaling off, and that ``trtllm-operator simulate --deployment`` names.
DEFAULT_REPLICAS = 1


class EngineRef(ApiModel):
    """Reference to an LLMEngine in the same namespace."""

    name: ObjectName = Field(description="Name of the LLMEngine to serve.")


class ServerResources(ApiModel):
    """Resources of each serving pod besides its GPUs (GPUs = the engine's tensor × pipeline)."""

    cpu: CPUQuantity | None = Field(default=None, description="CPU cores (request), e.g. 8.")
    memory: Quantity | None = Field(default=None, description="Host memory (request and limit), e.g. 64Gi.")
    ephemeral_storage: Quantity | None = Field(
        default=None, description="Scratch disk (request and limit), e.g. 50Gi."
    )
    shared_memory: Quantity = Field(
        default="2Gi",
        description="Size of the /dev/shm memory volume (NCCL and Triton's Python backend use it).",
    )


#: Triton model names of the TensorRT-engine model repository other than the ensemble (and the
#: optional BLS model): a served model name equal to one of them would be two models in one directory.
RESERVED_MODEL_NAMES = ("preprocessing", "postprocessing", "tensorrt_llm", "tensorrt_llm_bls")


class OpenAIFrontendSpec(ApiModel):
    """Triton's OpenAI-compatible frontend (``api: openai`` or ``both``; docs/serving.md)."""

    model_config = model_config(
        cel(
            "!has(self.servedModelName) || !(self.servedModelName in "
            + "["
            + ", ".join(f"'{n}'" for n in RESERVED_MODEL_NAMES)
            + "])",
            "servedModelName must not be the name of another model of the Triton model repository "
            f"({', '.join(RESERVED_MODEL_NAMES)}); pick another, e.g. the LLMDeployment's name",
            field_path=".servedModelName",
        ),
    )

    served_model_name: str | None = Field(
        default=None,
        min_length=1,
        max_length=63,
        pattern=r"^[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?$",
        description="The `model` clients send to /v1/chat/completions and /v1/completions, and the id "
        "/v1/models lists: the text-in/text-out Triton model (the ensemble) is served under this name "
        "(letters, digits, '.', '_', '-'; it is a directory name, so no '/'). Default: ensemble (tensorrt "
        "backend), the LLMDeployment's name (pytorch backend, trtllm-serve). With api: both the KServe "
        "path follows it: /v2/models/<servedModelName>/generate.",
    )
    default_max_tokens: int | None = Field(
        default=None,
        ge=1,
        le=1_000_000,
        description="Tokens generated when a request sets neither max_tokens nor "
        "max_completion_tokens (--default-max-tokens). Unset: the frontend's default, 16. Triton's "
        "frontend only: refused with trtllm-serve (pytorch backend), which has no such flag.",
    )


class ServerSpec(ApiModel):
    """Triton Inference Server settings (tensorrt_llm model config.pbtxt parameters)."""

    model_config = model_config(
        *image_rules("image"),
        fraction_rule("kvCacheFreeGpuMemFraction", example=0.9),
        cel(
            "self.api != 'triton' || !has(self.openai) || "
            "(!has(self.openai.servedModelName) && !has(self.openai.defaultMaxTokens))",
            "openai settings apply to the OpenAI frontend only; set api: openai (or both), or remove "
            "spec.server.openai",
            field_path=".openai",
        ),
    )

    image: ImageReference | None = Field(
        default=None,
        description="Override the serving image. Default: the LLMEngine's spec.runtime.image. An "
        "image with another TensorRT-LLM version cannot load the engine: the deployment then gets "
        "condition EngineIncompatible and is not rolled out.",
    )
    resources: ServerResources = Field(default_factory=ServerResources)
    api: ServingAPI = Field(
        default="triton",
        description="Client protocol. triton: Triton's KServe v2 HTTP/gRPC (ports 8000/8001, metrics "
        "8002). openai: the OpenAI-compatible API (/v1/chat/completions, /v1/completions, /v1/models; "
        "port 9000, metrics at :9000/metrics) served by Triton's OpenAI frontend (tensorrt backend, one "
        "GPU per replica) or by TensorRT-LLM's trtllm-serve (pytorch backend, one node per replica; "
        "metrics at :9000/prometheus/metrics, no autoscaling signals). both: the OpenAI API on 9000 and "
        "KServe v2 on 8000/8001 from the same process (tensorrt backend only; docs/serving.md).",
    )
    openai: OpenAIFrontendSpec = Field(
        default_factory=OpenAIFrontendSpec,
        description="OpenAI frontend settings (used when api is openai or both).",
    )
    kv_cache_free_gpu_mem_fraction: float = Field(
        default=0.9,
        gt=0,
        le=1,
        description="Fraction of GPU memory left free after loading the engine that the KV cache "
        "takes (kv_cache_free_gpu_mem_fraction), in (0, 1]. A fraction whose KV cache cannot hold one "
        "sequence of the engine's maxSeqLen is refused (condition reason KVCacheTooSmall): TensorRT-LLM "
        "would cut maxSeqLen to the pool at start.",
    )
    enable_kv_cache_reuse: bool = Field(
        default=True,
        description="Reuse KV-cache blocks of shared prompt prefixes (enable_kv_cache_reuse); needs "
        "an engine built with paged context FMHA: for a tensorrt engine without it (build.pagedContextFMHA "
        "false) it is rendered false, as TensorRT-LLM's executor would turn it off anyway.",
    )
    batching_strategy: BatchingStrategy = Field(
        default="inflight_fused_batching",
        description="Triton gpt_model_type: inflight_fused_batching (recommended), inflight_batching or v1.",
    )
    batch_scheduler_policy: BatchSchedulerPolicy = Field(
        default="guaranteed_no_evict",
        description="guaranteed_no_evict (admit only what finishes without eviction) or "
        "max_utilization (pack more sequences, may pause some).",
    )
    max_queue_delay_microseconds: int = Field(
        default=0,
        ge=0,
        le=10_000_000,
        description="Triton dynamic batching max_queue_delay_microseconds (microseconds).",
    )
    max_queue_size: int = Field(
        default=0,
        ge=0,
        description="Requests queued per model before Triton rejects new ones; 0 = unbounded.",
    )
    decoupled: bool = Field(
        default=False,
        description="Decoupled (streaming) mode: tokens are returned as they are generated "
        "(generate_stream, gRPC streaming).",
    )
    instance_count: int = Field(
        default=1,
        ge=1,
        le=64,
        description="Instances of the pre/postprocessing (tokenizer) models per pod (tensorrt backend). "
        "The pytorch backend serves one LLM-API model instance per pod and refuses more: each instance "
        "would load the whole model on the same GPUs; scale with replicas.",
    )
    max_tokens_in_paged_kv_cache: int | None = Field(
        default=None,
        ge=1,
        description="Upper bound on KV-cache tokens (max_tokens_in_paged_kv_cache); the smaller of "
        "this and the free-memory fraction wins. Unset = no bound. A bound below one sequence of the "
        "engine's maxSeqLen × maxBeamWidth, counted in whole KV blocks as the backend rounds it (up on "
        "tensorrt, down on pytorch), is refused (condition reason KVCacheTooSmall): TensorRT-LLM would "
        "cut maxSeqLen to it at start (docs/serving.md: for beam search on tensorrt the operator counts "
        "the worst case).",
    )
    enable_chunked_context: bool = Field(
        default=False,
        description="Prefill long prompts in chunks (enable_chunked_context): each iteration takes, in "
        "arrival order, what fits of maxNumTokens after the decoding sequences, in whole KV blocks "
        "(TensorRT-LLM microBatchScheduler); prompts up to maxSeqLen - 1 are then accepted. Needs "
        "paged context FMHA: with a tensorrt engine built without it the deployment is refused "
        "(condition reason PagedContextFMHARequired).",
    )


def targets_model(signals: Sequence[Signal], retired: Sequence[RetiredSignal] = RETIRED) -> type[ApiModel]:
    """``spec.autoscaling.targets``: one optional field per signal of ``signals`` (the registry,
    :mod:`trtllm_operator.api.signals`), > 0, or in (0, 1] with the percentage rule for fractions; and
    one per ``retired`` target, kept in the schema only so that admission refuses it with a message
    naming what replaced it (a pruned unknown field would be accepted and ignored)."""
    fields: dict[str, Any] = {
        s.attr: (
            float | None,
            Field(default=None, gt=0, le=1 if s.fraction else None, description=s.target_description),
        )
        for s in signals
    }
    for r in retired:
        fields[r.attr] = (
            float | None,
            Field(default=None, description=f"Removed; refused. {r.message}."),
        )
    base = type(
        "_Targets",
        (ApiModel,),
        {
            "model_config": model_config(
                *(fraction_rule(s.name, example=s.example) for s in signals if s.fraction),
                *(cel(f"!has(self.{r.name})", r.message, field_path=f".{r.name}") for r in retired),
            ),
            "__module__": __name__,
        },
    )
    return create_model(
        "AutoscalingTargets",
        __base__=base,
        __module__=__name__,
        __doc__="Per-signal targets; desired replicas is the maximum over the signals that are set.",
        **fields,
    )


def retired_targets_set(targets: ApiModel, retired: Sequence[RetiredSignal] = RETIRED) -> list[RetiredSignal]:
    """The retired targets an object sets (admission refuses them; objects stored before that rule
    can still carry them)."""
    return [r for r in retired if getattr(targets, r.attr, None) is not None]


def targets_of(targets: ApiModel, signals: Sequence[Signal] = SIGNALS) -> dict[str, float | None]:
    """``spec.autoscaling.targets`` by signal name (``None``: unset), in registry order."""
    return {s.name: getattr(targets, s.attr, None) for s in signals}


if TYPE_CHECKING:
    AutoscalingTargets = ApiModel
else:
    AutoscalingTargets = targets_model(SIGNALS)


class ScalingRules(ApiModel):
    """Rate limits for one direction (like HPA behavior). With both maxReplicasPerStep and percent
    set, the larger change is allowed; with neither, scale-up allows +4 pods or +100 % and scale-down
    −1 pod or −10 % per 60 s."""

    stabilization_window_seconds: int | None = Field(
        default=None,
        ge=0,
        le=3600,
        description="Seconds of past recommendations considered; the most conservative wins. "
        "Default: 15 for scaleUp, 300 for scaleDown (docs/autoscaling.md).",
    )
    max_replicas_per_step: int | None = Field(
        default=None, ge=1, description="At most this many replicas added/removed per period."
    )
    percent: int | None = Field(
        default=None,
        ge=1,
        le=1000,
        description="At most this percent of current replicas per period. With maxReplicasPerStep "
        "also set, the larger change is allowed (HPA selectPolicy Max).",
    )
    period_seconds: int = Field(
        default=60, ge=1, le=1800, description="Length of a rate-limit period in seconds."
    )


class ScalingBehavior(ApiModel):
    """Stabilization and rate limits."""

    scale_up: ScalingRules = Field(
        default_factory=ScalingRules,
        description="Scale-up rate limits. Default stabilization window 15 s (the lowest "
        "recommendation of the last 15 s wins).",
    )
    scale_down: ScalingRules = Field(
        default_factory=ScalingRules,
        description="Scale-down rate limits. Default stabilization window 300 s (the highest "
        "recommendation of the last 5 minutes wins).",
    )


class MetricsSpec(ApiModel):
    """Where the autoscaler reads signals."""

    model_config = model_config(
        cel(
            "self.source != 'prometheus' || has(self.prometheusURL)",
            "prometheusURL is required when source is prometheus; set it, e.g. "
            "http://prometheus-operated.monitoring:9090",
            field_path=".prometheusURL",
            reason="FieldValueRequired",
        ),
    )

    source: MetricsSource = Field(
        default="pods",
        description="pods: scrape each serving pod's metrics endpoint (Triton's :8002/metrics with "
        "server.api triton; the OpenAI frontend's :9000/metrics with openai or both). prometheus: "
        "query a Prometheus server.",
    )
    prometheus_url: str | None = Field(
        default=None,
        alias="prometheusURL",
        max_length=512,
        pattern=r"^https?://",
        description="Prometheus base URL, e.g. http://prometheus-operated.monitoring:9090; must start "
        "with one of the operator's allowedPrometheusURLs (the operator pod queries it).",
    )
    scrape_interval_seconds: int = Field(
        default=15, ge=1, le=600, description="Seconds between metric reads."
    )


#: Why ``minReplicas: 0`` is refused in every mode (audit A6). Every trigger the operator can render
#: (``targets.activeRequestUtilization``, ``kvCacheUtilization``) is read from the
#: serving pods' own Triton metrics, so at zero replicas there is no series to wake on: KEDA's
#: Prometheus scaler reads an empty query result as 0 (``ignoreNullValues`` defaults to true) and
#: reports the trigger active only when the value exceeds ``activationThreshold`` (default 0)
#: (kedacore/keda v2.20.2 ``pkg/scalers/prometheus_scaler.go`` ``ExecutePromQuery``,
#: ``GetMetricsAndActivity``), and its executor scales a ScaledObject up from 0 only while a trigger
#: is active (``pkg/scaling/executor/scale_scaledobjects.go`` ``RequestScale``). A trigger that
#: exists without serving pods (a request queue in front of them, e.g. the KEDA HTTP add-on's
#: interceptor) is what scale to zero needs; the API has none yet, so the rule refuses 0 outright.
SCALE_TO_ZERO_REFUSAL = (
    "minReplicas 0 (scale to zero) could never scale back up: every autoscaling trigger "
    f"({', '.join(f'targets.{s.name}' for s in SIGNALS)}) is read "
    "from the serving pods' own metrics, which vanish with the last pod, and no trigger that exists "
    "without serving pods (a request queue in front of them) is configured or can be; set "
    "minReplicas: 1 or more"
)


def _one_of(items: Sequence[str]) -> str:
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} or {items[-1]}"


def target_required_rule(signals: Sequence[Signal]) -> dict[str, str]:
    """CEL: an enabled ``spec.autoscaling`` sets at least one target of ``signals``."""
    return cel(
        "!self.enabled || " + " || ".join(f"has(self.targets.{s.name})" for s in signals),
        f"set at least one of {_one_of([f'targets.{s.name}' for s in signals])} when autoscaling is enabled",
        field_path=".targets",
        reason="FieldValueRequired",
    )


def mode_refusal_rules(signals: Sequence[Signal]) -> list[dict[str, str]]:
    """CEL: one rule per (signal, external mode) the registry marks as not rendered, naming the
    field, its value, why and the fix."""
    rules = []
    for s in signals:
        for mode in EXTERNAL_MODES:
            if s.rendered_in(mode):
                continue
            why = s.refused_modes[mode]
            fix = f"unset targets.{s.name} or use mode builtin"
            rules.append(
                cel(
                    f"!self.enabled || self.mode != '{mode}' || !has(self.targets.{s.name})",
                    f"targets.{s.name} cannot drive mode {mode} ({why}); {fix}",
                    message_expression=mx(
                        f"targets.{s.name} %s cannot drive mode {mode} ({why}); {fix}",
                        f"self.targets.{s.name}",
                    ),
                    field_path=f".targets.{s.name}",
                )
            )
    return rules


#: Defaults of ``spec.autoscaling.capacity``: the setting benchmarks/autoscaling.py's tuning set chose
#: for the capacity recommendation (benchmarks/RESULTS.md "Autoscaling"; the simulator's
#: ``--policy capacity`` reads the same values, so what the benchmark reports is what the field does).
CAPACITY_TARGET = 0.8
CAPACITY_SMOOTHING_SECONDS = 60
CAPACITY_FORECAST_SECONDS = 0


class CapacitySpec(ApiModel):
    """The capacity recommendation (built-in mode; docs/autoscaling.md "Capacity recommendation"):
    replicas = ceil(arrivals / (requestsPerSecond × target)), arrivals measured per pod from Triton's
    success counter and the executor's active requests, the capacity corrected online from
    saturated pods. It joins the targets' recommendations (the largest wins), so the targets stay on
    as saturation checks."""

    model_config = model_config(
        cel(
            "self.forecastSeconds == 0 || self.smoothingSeconds > 0",
            "forecastSeconds projects the smoothed arrival trend, and with smoothingSeconds 0 there is "
            "none; set smoothingSeconds (e.g. 60) or forecastSeconds: 0",
            field_path=".forecastSeconds",
        ),
        cel(
            "has(self.promptTokens) == has(self.outputTokenWeight) "
            "&& has(self.outputTokens) == has(self.outputTokenWeight)",
            "token weighting needs promptTokens, outputTokens and outputTokenWeight together (the "
            "lengths requestsPerSecond holds for and what an output token costs in prompt tokens); set "
            "all three or none",
            field_path=".outputTokenWeight",
        ),
    )

    target: float = Field(
        default=CAPACITY_TARGET,
        gt=0,
        le=1,
        description="Fraction of a replica's estimated capacity to run it at, in (0, 1]; lower leaves "
        "more headroom for load that rises during a cold start.",
    )
    requests_per_second: float | None = Field(
        default=None,
        gt=0,
        le=1_000_000,
        description="Requests/s one replica completes when saturated, for this deployment's typical "
        "prompt and output lengths (a profile: trtllm-bench, genai-perf, or `trtllm-operator simulate` "
        "with your traffic); corrected online from saturated pods, and an edit starts the correction "
        "again from the new value. Unset: learned from the pods alone, which reacts later "
        "(docs/autoscaling.md).",
    )
    smoothing_seconds: int = Field(
        default=CAPACITY_SMOOTHING_SECONDS,
        ge=0,
        le=3600,
        description="Time constant of the arrival rate's smoothing (level and trend); 0: the last "
        "evaluation's rate. A rise is never smoothed below what the Ready replicas' measured rate needs.",
    )
    forecast_seconds: int = Field(
        default=CAPACITY_FORECAST_SECONDS,
        ge=0,
        le=3600,
        description="How far ahead a rising arrival trend is projected for a scale-up (e.g. the pods' "
        "cold start); 0: no forecast. A falling trend is never projected. Needs smoothingSeconds > 0 "
        "(the trend is the smoothed one).",
    )
    prompt_tokens: int | None = Field(
        default=None,
        ge=1,
        le=10_000_000,
        description="Token weighting (with outputTokens and outputTokenWeight): the mean prompt tokens "
        "of the requests requestsPerSecond holds for. Each request then counts as (prompt + "
        "outputTokenWeight × output tokens) over this length's cost, measured from the TensorRT-LLM "
        "backend's token-length histograms (nv_llm_input_token_len, nv_llm_output_token_len; backend "
        "0.16+), so traffic with longer prompts than the profile's is sized for what it costs. Without "
        "requestsPerSecond the weighting works as well (the capacity learned from the pods is counted in "
        "requests of these lengths), and the lengths only set that unit: any typical values do.",
    )
    output_tokens: int | None = Field(
        default=None,
        ge=0,
        le=10_000_000,
        description="Token weighting: the mean output tokens of the requests requestsPerSecond holds "
        "for (see promptTokens).",
    )
    output_token_weight: float | None = Field(
        default=None,
        ge=0,
        le=1000,
        description="Token weighting: what one generated token costs a saturated replica, in prompt "
        "tokens (`trtllm-operator simulate` prints the performance model's as "
        "replica.output_token_weight; about 2.1 for Llama-3.1-70B FP8 on 2 × H100 at 1,154 / 211 tokens).",
    )


class AutoscalingSpec(ApiModel):
    """Autoscaling on active-request utilization (admission saturation) and KV-cache utilization, and
    optionally on arrivals over capacity (``capacity``, built-in mode)."""

    model_config = model_config(
        cel(
            "!has(self.maxReplicas) || self.minReplicas <= self.maxReplicas",
            "minReplicas must be less than or equal to maxReplicas; raise maxReplicas or lower minReplicas",
            # both values in the message (apiextensions.k8s.io/v1 ValidationRule.messageExpression,
            # kubernetes.io/docs/tasks/extend-kubernetes/custom-resources/custom-resource-definitions/
            # "The messageExpression field"); the static message is its fallback
            message_expression=mx(
                "minReplicas %d must be less than or equal to maxReplicas %d; raise maxReplicas or lower "
                "minReplicas",
                "self.minReplicas",
                "self.maxReplicas",
            ),
            field_path=".minReplicas",
        ),
        cel(
            "!self.enabled || has(self.maxReplicas)",
            "maxReplicas is required when autoscaling is enabled; set it or set enabled: false",
            field_path=".maxReplicas",
            reason="FieldValueRequired",
        ),
        target_required_rule(SIGNALS),
        *mode_refusal_rules(SIGNALS),
        cel("self.minReplicas >= 1", SCALE_TO_ZERO_REFUSAL, field_path=".minReplicas"),
        cel(
            "self.mode != 'keda' || self.metrics.source == 'prometheus'",
            "mode keda reads metrics from Prometheus; set metrics.source to prometheus and "
            "metrics.prometheusURL",
            field_path=".metrics.source",
        ),
        cel(
            "!has(self.capacity) || self.mode == 'builtin'",
            "capacity is computed by the operator's own autoscaler (mode builtin); an "
            "HorizontalPodAutoscaler or a KEDA ScaledObject cannot carry it: set mode: builtin or "
            "remove capacity",
            message_expression=mx(
                "capacity is computed by the operator's own autoscaler (mode builtin), not mode %s: an "
                "HorizontalPodAutoscaler or a KEDA ScaledObject cannot carry it; set mode: builtin or "
                "remove capacity",
                "self.mode",
            ),
            field_path=".capacity",
        ),
        cel(
            "!has(self.capacity) || self.metrics.source == 'pods'",
            "capacity reads each pod's request counters from its metrics endpoint (metrics.source: "
            "pods); the Prometheus source does not query them: set metrics.source: pods or remove "
            "capacity",
            field_path=".capacity",
        ),
    )

    enabled: bool = Field(default=False, description="Turn autoscaling on.")
    mode: AutoscalingMode = Field(
        default="builtin",
        description="builtin: the operator scales spec.replicas itself. hpa: render a "
        "HorizontalPodAutoscaler (needs a custom-metrics adapter). keda: render a KEDA ScaledObject.",
    )
    min_replicas: int = Field(
        default=1,
        ge=0,
        le=MAX_REPLICAS,
        description="Lower bound on replicas; at least 1 in every mode (0 is refused: no trigger "
        "could scale the deployment back up, docs/autoscaling.md).",
    )
    max_replicas: int | None = Field(
        default=None, ge=1, le=MAX_REPLICAS, description="Upper bound on replicas (required when enabled)."
    )
    targets: AutoscalingTargets = Field(default_factory=AutoscalingTargets)
    tolerance: float = Field(
        default=0.1,
        ge=0,
        lt=1,
        description="Ignore ratios (signal / target) within 1 ± tolerance; avoids flapping.",
    )
    behavior: ScalingBehavior = Field(default_factory=ScalingBehavior)
    metrics: MetricsSpec = Field(default_factory=MetricsSpec)
    capacity: CapacitySpec | None = Field(
        default=None,
        description="Also scale on arrivals over per-replica capacity (mode builtin, metrics.source "
        "pods); unset: off. An empty object ({}) turns it on with the defaults.",
    )


class RolloutSpec(ApiModel):
    """GPU-safe rolling updates. The default (maxSurge 0, maxUnavailable 1) needs no spare GPUs."""

    model_config = model_config(
        cel(
            # int-or-string: 0 or "0%" is zero, as apps validation's getIntOrPercentValue(...) == 0 (a
            # list [0, '0%'] would not compile: the API server's CEL wants homogeneous literals)
            "!((type(self.maxSurge) == int ? self.maxSurge == 0 : self.maxSurge == '0%') && "
            "(type(self.maxUnavailable) == int ? self.maxUnavailable == 0 : self.maxUnavailable == '0%'))",
            "maxSurge and maxUnavailable cannot both be 0 (the rollout could never progress); set "
            "maxUnavailable: 1 or maxSurge: 1",
            field_path=".maxUnavailable",
        ),
    )

    max_surge: SurgePodsOrPercent = Field(
        default=0,
        description="Extra pods (each needs its own GPUs) during a rollout: a count, or a percentage of "
        "replicas rounded up (e.g. 25%), as a Deployment's maxSurge (above 100% too; a replica that spans "
        "nodes, a LeaderWorkerSet, takes at most 100%).",
    )
    max_unavailable: PodsOrPercent = Field(
        default=1,
        description="Pods that may be down during a rollout: a count, or a percentage of replicas "
        "rounded down (e.g. 25%), as a Deployment's maxUnavailable.",
    )
    progress_deadline_seconds: int = Field(
        default=1800,
        ge=60,
        le=86_400,
        description="Seconds a rollout may make no progress before Progressing=False "
        "(engine load and KV allocation can take minutes); at most one day.",
    )
    auto_rollback: bool = Field(
        default=False,
        description="When the deadline passes, serve the previous engine again (status only; spec "
        "is not rewritten).",
    )


#: Labels the operator sets on serving pods and the Service (render/serving.py ``common_labels``): a
#: user value for them would be overwritten, so they are refused (as is any key under the API group).
SERVING_LABEL_KEYS = (LABEL_NAME, LABEL_INSTANCE, LABEL_MANAGED_BY, LABEL_COMPONENT)


class ServiceSpec(ApiModel):
    """The Service in front of the serving pods: HTTP 8000, gRPC 8001, metrics 8002 (api: triton);
    OpenAI 9000 (api: openai); OpenAI 9000, HTTP 8000, gRPC 8001 (api: both)."""

    model_config = model_config(reserved_label_keys_rule(SERVING_LABEL_KEYS, ".labels"))

    type: ServiceType = Field(default="ClusterIP", description="ClusterIP, NodePort or LoadBalancer.")
    annotations: Annotations | None = Field(default=None, description="Annotations on the Service.")
    labels: Labels | None = Field(default=None, description="Labels on the Service.")


class EndpointPickerRef(ApiModel):
    """The endpoint picker (EPP) Service the Gateway asks which pod gets each request (InferencePool
    ``spec.endpointPickerRef``, kind Service)."""

    name: ObjectName = Field(description="Name of the endpoint picker's Service in this namespace.")
    port: int = Field(
        default=9002,
        ge=1,
        le=65535,
        description="Service port of the endpoint picker's ext-proc gRPC server (the upstream EPP's "
        "default is 9002).",
    )
    failure_mode: Literal["FailOpen", "FailClose"] = Field(
        default="FailClose",
        description="What the Gateway does when the picker does not answer: FailClose (reject) or "
        "FailOpen (route anyway).",
    )


class InferencePoolSpec(ApiModel):
    """An InferencePool (Gateway API Inference Extension, inference.networking.k8s.io/v1) named after
    the LLMDeployment, selecting its serving pods on the OpenAI port (docs/serving.md)."""

    enabled: bool = Field(default=False, description="Render the InferencePool.")
    endpoint_picker_ref: EndpointPickerRef | None = Field(
        default=None,
        description="The endpoint picker that routes for this pool (deploy it from the Gateway API "
        "Inference Extension's charts). Unset: the pool has no endpointPickerRef.",
    )


class RoutingSpec(ApiModel):
    """Routing of client traffic beyond the Service."""

    inference_pool: InferencePoolSpec = Field(default_factory=InferencePoolSpec)


class SchedulingSpec(ApiModel):
    """Placement of serving pods. The engine's gpu.product node label is always required."""

    node_selector: Labels | None = Field(default=None, description="Extra node labels.")
    tolerations: Tolerations | None = Field(default=None, description="Pod tolerations.")
    affinity: Affinity | None = Field(
        default=None,
        description="core/v1 Affinity copied to the pods; the engine's gpu.product requirement is added "
        "to every required node selector term.",
    )
    priority_class_name: ClassName | None = Field(
        default=None, description="PriorityClass of the serving pods."
    )
    runtime_class_name: ClassName | None = Field(
        default=None, description="RuntimeClass of the serving pods, e.g. nvidia."
    )


class TuningSpec(ApiModel):
    """The KV-cache and batch advisor (docs/tuning.md): it keeps a KV-cache utilization history and
    writes recommendations to ``status.recommendations``. It never writes ``spec``."""

    model_config = model_config(
        cel(
            "self.lowThreshold < self.highThreshold",
            "lowThreshold must be below highThreshold; lower lowThreshold or raise highThreshold",
            message_expression=mx(
                "lowThreshold %s must be below highThreshold %s; lower lowThreshold or raise highThreshold",
                "self.lowThreshold",
                "self.highThreshold",
            ),
            field_path=".lowThreshold",
        ),
        fraction_rule("highThreshold", example=0.8, below_one=True),
        fraction_rule("lowThreshold", example=0.5, below_one=True),
    )

    enabled: bool = Field(default=False, description="Turn the advisor on.")
    window_seconds: int = Field(
        default=1800,
        ge=60,
        le=86_400,
        description="History window the rules look at, seconds (default 30 min).",
    )
    interval_seconds: int = Field(
        default=30, ge=1, le=3600, description="Seconds between samples and evaluations."
    )
    high_threshold: float = Field(
        default=0.8,
        gt=0,
        lt=1,
        description="KV-cache utilization counted as high (fraction); sustained above it: raise "
        "maxNumTokens or lower maxBatchSize.",
    )
    low_threshold: float = Field(
        default=0.5,
        gt=0,
        lt=1,
        description="KV-cache utilization counted as low; sustained below it: shrink the KV allocation.",
    )


class LLMDeploymentSpec(ApiModel):
    """Desired state of an LLMDeployment: a Triton fleet serving one LLMEngine."""

    model_config = model_config(
        reserved_label_keys_rule(SERVING_LABEL_KEYS, ".podLabels"),
        apparmor_containers_rule("podAnnotations", (SERVER_CONTAINER, FETCH_CONTAINER)),
        cel(
            "!has(self.routing) || !has(self.routing.inferencePool) || !self.routing.inferencePool.enabled"
            " || (has(self.server) && has(self.server.api) && self.server.api != 'triton')",
            "routing.inferencePool needs server.api openai or both: the endpoint picker reads "
            "OpenAI-format requests (the model field of /v1/chat/completions, /v1/completions); set "
            "server.api: openai",
            field_path=".routing.inferencePool.enabled",
        ),
    )

    engine_ref: EngineRef
    replicas: int = Field(
        default=DEFAULT_REPLICAS,
        ge=0,
        le=MAX_REPLICAS,
        description="Serving replicas (each uses tensor × pipeline GPUs). Written by the built-in "
        "autoscaler when autoscaling is enabled in builtin mode; `kubectl scale` and HPA/KEDA write it "
        "through the scale subresource.",
    )
    server: ServerSpec = Field(default_factory=ServerSpec)
    autoscaling: AutoscalingSpec = Field(default_factory=AutoscalingSpec)
    rollout: RolloutSpec = Field(default_factory=RolloutSpec)
    service: ServiceSpec = Field(default_factory=ServiceSpec)
    scheduling: SchedulingSpec = Field(default_factory=SchedulingSpec)
    tuning: TuningSpec = Field(default_factory=TuningSpec)
    routing: RoutingSpec = Field(default_factory=RoutingSpec)
    pod_annotations: PodAnnotations | None = Field(default=None, description="Annotations on pods.")
    pod_labels: Labels | None = Field(default=None, description="Labels on pods.")


# --- status ------------------------------------------------------------------------------------


class ScalingDecision(ApiModel):
    """One autoscaler decision."""

    time: datetime = Field(description="When the decision was made.")
    from_replicas: int = Field(ge=0, description="Replicas before.")
    to_replicas: int = Field(ge=0, description="Replicas after.")
    signals: dict[str, float] | None = Field(
        default=None, description="Signal values behind the decision, e.g. activeRequestUtilization."
    )
    reason: str | None = Field(
        default=None, description="Why, a stable reason (docs/autoscaling.md), e.g. AboveTarget."
    )
    message: str | None = Field(default=None, description="Human-readable explanation of the decision.")


def autoscaling_status_model(signals: Sequence[Signal]) -> type[ApiModel]:
    """``status.autoscaling``: the last value of each signal of ``signals`` (and its × 100 printer
    column where the registry asks for one), then the decision fields."""
    fields: dict[str, Any] = {}
    for s in signals:
        fields[s.attr] = (float | None, Field(default=None, ge=0, description=s.status_description))
        if s.status_percent:
            fields[snake(s.percent_name)] = (
                int | None,
                Field(default=None, ge=0, description=f"{s.name} × 100, rounded (printer column)."),
            )
    fields.update(
        desired_replicas=(int | None, Field(default=None, ge=0, description="Last computed desire.")),
        last_scale_time=(datetime | None, Field(default=None, description="When replicas last changed.")),
        last_decisions=(
            Annotated[list[ScalingDecision], Field(max_length=20)] | None,
            Field(
                default=None,
                description="The last 10 decisions, newest last (the operator keeps 10; the schema "
                "admits 20). Every scale; a hold replaces the hold before it (docs/autoscaling.md).",
            ),
        ),
        policy_state=(
            str | None,
            Field(
                default=None,
                max_length=65536,
                description="The built-in autoscaler's memory (JSON: recent recommendations and scale "
                "events as [epoch seconds, replicas] pairs), so stabilization windows and rate limits "
                "survive an operator restart. Written by the operator only, and only when what a later "
                "decision reads changes (a new recommended count, a scale), not at every evaluation; a "
                "restarted operator takes its last recommendation to have held until the evaluation "
                "before its first (docs/autoscaling.md, Writes).",
            ),
        ),
    )
    return create_model(
        "AutoscalingStatus",
        __base__=ApiModel,
        __module__=__name__,
        __doc__="Last observed signals and decisions. Status fields carry few bounds on purpose: the "
        "operator must always be able to write what it measured.",
        **fields,
    )


if TYPE_CHECKING:
    AutoscalingStatus = ApiModel
else:
    AutoscalingStatus = autoscaling_status_model(SIGNALS)


class RecommendedChange(ApiModel):
    """One field to change (in this LLMDeployment or its LLMEngine)."""

    field: str = Field(description="Where, e.g. spec.server.kvCacheFreeGpuMemFraction.")
    current: float | None = Field(default=None, description="Value now (None: unknown).")
    recommended: float = Field(description="Value recommended.")


class RecommendationEvidence(ApiModel):
    """What a recommendation rests on."""

    window_seconds: float | None = Field(default=None, description="History window, seconds.")
    samples: int | None = Field(default=None, description="Samples in the window.")
    kv_cache_utilization_p10: float | None = Field(
        default=None, alias="kvCacheUtilizationP10", description="10th percentile, fraction."
    )
    kv_cache_utilization_p50: float | None = Field(
        default=None, alias="kvCacheUtilizationP50", description="Median, fraction."
    )
    kv_cache_utilization_p90: float | None = Field(
        default=None, alias="kvCacheUtilizationP90", description="90th percentile, fraction."
    )
    fraction_above_high: float | None = Field(
        default=None, description="Share of samples above highThreshold."
    )
    fraction_below_low: float | None = Field(default=None, description="Share of samples below lowThreshold.")
    waiting_per_replica_p50: float | None = Field(
        default=None,
        alias="waitingPerReplicaP50",
        description="Median waiting requests per replica (nv_trt_llm_request_metrics waiting = active − "
        "scheduled: admitted but not scheduled, mostly a full KV cache; not a backlog).",
    )


class Recommendation(ApiModel):
    """A tuning recommendation: what to change, by how much, and the evidence. Advice only."""

    type: str = Field(description="KVCacheHigh, KVCacheLow, AddReplicas or RaiseKVCacheFraction.")
    message: str | None = Field(default=None, description="What and why, in words.")
    changes: Annotated[list[RecommendedChange], Field(max_length=8)] | None = Field(
        default=None, description="Fields to change and by how much."
    )
    evidence: RecommendationEvidence | None = Field(default=None, description="Window and percentiles.")
    since_unix: float | None = Field(default=None, description="When first raised (Unix seconds).")
    alternatives: Annotated[list[str], Field(max_length=4)] | None = Field(
        default=None, description="Other recommendation types that would also help."
    )


class TuningStatus(ApiModel):
    """The advisor's bounded history: [unixSeconds, kvCacheUtilization, waitingPerReplica,
    readyReplicas] rows, oldest first (-1: not measured)."""

    history: Annotated[list[list[float]], Field(max_length=2000)] | None = Field(
        default=None, description="Samples, oldest first."
    )
    last_evaluation_unix: float | None = Field(default=None, description="Last evaluation, Unix seconds.")
    message: str | None = Field(default=None, description="Why there is no recommendation, if so.")


class LLMDeploymentStatus(ApiModel):
    """Observed state of an LLMDeployment."""

    phase: DeploymentPhase | None = Field(
        default=None,
        description="Pending (engine not ready, nothing served), Progressing (rolling out, or a new "
        "engine pending while the previous key serves), Ready, Degraded (serving, but rolled back, the "
        "engine failed or was deleted, or replicas cannot be scheduled) or Failed.",
    )
    observed_generation: int | None = Field(
        default=None, ge=0, description="metadata.generation this status describes."
    )
    replicas: int | None = Field(default=None, ge=0, description="Pods that exist.")
    ready_replicas: int | None = Field(default=None, ge=0, description="Pods serving requests.")
    updated_replicas: int | None = Field(
        default=None, ge=0, description="Pods serving the current engine key."
    )
    desired_replicas: int | None = Field(
        default=None,
        ge=0,
        description=(
            "The replica count the workload is given: spec.replicas, brought into [minReplicas, maxReplicas] "
            "under the built-in autoscaler."
        ),
    )
    selector: str | None = Field(
        default=None, description="Label selector of the pods (for the scale subresource and HPA)."
    )
    engine_key: str | None = Field(default=None, description="Engine key actually served by all pods.")
    endpoint: str | None = Field(
        default=None,
        description="In-cluster endpoint: http://<svc>.<ns>.svc:8000 (api: triton, KServe v2) or the "
        "OpenAI base URL http://<svc>.<ns>.svc:9000/v1 (api: openai or both).",
    )
    reconciled_by: str | None = Field(
        default=None,
        max_length=64,
        description="The operator release (version+digest of its code and deciding settings) that last "
        "reconciled this object: a restarted operator of the same release skips it when it is settled.",
    )
    autoscaling: AutoscalingStatus | None = None
    recommendations: Annotated[list[Recommendation], Field(max_length=8)] | None = Field(
        default=None, description="The tuning advisor's current recommendations (spec.tuning)."
    )
    tuning: TuningStatus | None = None
    conditions: Conditions | None = Field(
        default=None,
        description="Ready, Progressing, Degraded (reason ReplicasUnschedulable: pods the scheduler "
        "cannot place, with its message; ReplicasFailing: containers that cannot start, e.g. "
        "ImagePullBackOff, with the kubelet's message and the field to fix), EngineIncompatible (image "
        "or GPU does not match the engine), "
        "ScalingLimited (the autoscaler: maxReplicas reached, not enough schedulable GPUs; Unknown "
        "ScalingDelegated in modes hpa / keda, where the HPA's own conditions say it), Routed (the "
        "InferencePool of spec.routing.inferencePool is applied), Streaming (spec.server.decoupled: "
        "whether streaming requests are answered, on the endpoints of spec.server.api).",
    )
