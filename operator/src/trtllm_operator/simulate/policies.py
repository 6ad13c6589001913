"""Autoscaling strategies for the simulator.

- ``builtin``, ``hpa-queue`` and ``kv-only`` are the operator's own policy code,
  :func:`trtllm_operator.decide.autoscaling.decide`, run tick by tick on the simulated pods' metrics
  with different ``Policy`` settings:

  * ``builtin`` — the operator's defaults (its windows and rate limits) with the recommended
    targets (queue depth 4, KV-cache utilization 0.8, inflight-batch utilization 0.5), evaluated every
    ``metrics.scrapeIntervalSeconds`` (15 s by default, as the operator's
    autoscaler timer does) on metrics it scrapes from the pods at that moment (2 s old: Triton
    refreshes its metrics every 2 s by default, ``--metrics-interval-ms 2000``). Or the
    ``spec.autoscaling`` of an LLMDeployment manifest (:func:`from_deployment`).
  * ``hpa-queue`` — the setup of NVIDIA's "Autoscaling and Load Balancing Generative AI w/ Triton
    Server and TensorRT-LLM" guide (triton-inference-server/tutorials,
    ``Deployment/Kubernetes/TensorRT-LLM_Autoscaling_and_Load_Balancing``): one Pods metric per
    replica with ``averageValue: 1000m`` and no ``behavior``, i.e. Kubernetes HPA defaults (tolerance
    0.1, no scale-up window, +100 %/+4 pods per 15 s, 300 s scale-down window, −100 % per 15 s,
    15 s sync period). The guide's metric is a queue-to-compute time ratio; here it is the waiting
    queue depth per replica (target 1), read through Prometheus and prometheus-adapter, so 15 s old.
  * ``kv-only`` — the builtin policy with the queue signal disabled (KV-cache utilization only).

- ``static:N`` — N replicas for the whole run.
- ``oracle`` — a clairvoyant reference (:class:`OraclePolicy`): it sees the future arrivals, its
  replicas start instantly and it is evaluated without metric lag. See its docstring.
"""

from __future__ import annotations

import bisect
import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from trtllm_operator.api.deployment import AutoscalingSpec
from trtllm_operator.decide import autoscaling as asc
from trtllm_operator.metrics.signals import (
    DEFAULT_MODEL,
    KV_CACHE_BLOCKS,
    REQUEST_METRICS,
    Sample,
    signals_from_samples,
)
from trtllm_operator.simulate.engine import Observation, PodSample, ReplicaSpec
from trtllm_operator.simulate.perf import steady_concurrency
from trtllm_operator.simulate.traces import Request

_STATES = {
    "Ready": asc.PodState.READY,
    "Starting": asc.PodState.STARTING,
    "Unschedulable": asc.PodState.UNSCHEDULABLE,
    "Terminating": asc.PodState.TERMINATING,
}


def _samples(m: PodSample) -> list[Sample]:
    """A simulated pod's metrics as the Triton series the operator reads (reference §5.1)."""
    model = {"model": DEFAULT_MODEL}
    return [
        (REQUEST_METRICS, {**model, "request_type": "waiting"}, float(m.waiting)),
        (REQUEST_METRICS, {**model, "request_type": "active"}, float(m.active)),
        (REQUEST_METRICS, {**model, "request_type": "max"}, float(m.max_active)),
        (KV_CACHE_BLOCKS, {**model, "kv_cache_block_type": "used"}, float(m.kv_used_blocks)),
        (KV_CACHE_BLOCKS, {**model, "kv_cache_block_type": "max"}, float(m.kv_max_blocks)),
    ]


def snapshot_of(obs: Observation) -> asc.Snapshot:
    """The operator's :class:`~trtllm_operator.decide.autoscaling.Snapshot` for a simulated tick: each
    pod's series go through the operator's own signal formulas
    (:func:`~trtllm_operator.metrics.signals.signals_from_samples`), so every registry signal is fed."""
    pods = []
    for view in obs.pods:
        m = view.metrics
        values = signals_from_samples(_samples(m)).values() if m is not None else {}
        pods.append(asc.PodSignals(name=f"replica-{view.pod}", state=_STATES[view.state], values=values))
    return asc.Snapshot(replicas=obs.replicas, pods=tuple(pods))


@dataclass
class SharedPolicy:
    """The operator's policy (same code as its kopf timer), with its state kept between ticks."""

    name: str
    policy: asc.Policy
    sync_period_s: float = 15.0
    metrics_lag_s: float = 2.0
    cold_start_s: float | None = None
    state: asc.AutoscalerState = field(default_factory=asc.AutoscalerState)
    reasons: Counter[str] = field(default_factory=Counter)

    def decide(self, obs: Observation) -> int:
        """One tick of :func:`~trtllm_operator.decide.autoscaling.decide`; the decision is applied."""
        decision = asc.decide(snapshot_of(obs), self.state, self.policy, obs.time_s)
        self.state = decision.state
        self.reasons[str(decision.reason)] += 1
        return decision.to_replicas


def builtin(min_replicas: int = 1, max_replicas: int = 64, **overrides: object) -> SharedPolicy:
    """The operator's policy with its shipped defaults and recommended targets.

    Targets: ``queueDepthPerReplica`` 4, ``kvCacheUtilization`` 0.8 and ``batchUtilization`` 0.5
    (docs/autoscaling.md, benchmarks/RESULTS.md). ``overrides``: any ``Policy`` field.
    """
    policy = asc.Policy(
        min_replicas=min_replicas,
        max_replicas=max_replicas,
        queue_depth_per_replica=asc.DEFAULT_QUEUE_DEPTH_PER_REPLICA,
        kv_cache_utilization=asc.DEFAULT_KV_CACHE_UTILIZATION,
        batch_utilization=asc.DEFAULT_BATCH_UTILIZATION,
    )
    if overrides:
        policy = replace(policy, **overrides)  # type: ignore[arg-type]
    return SharedPolicy("builtin", policy)


def from_deployment(manifest: dict[str, Any]) -> SharedPolicy:
    """The builtin policy of an LLMDeployment manifest (or of a bare ``spec.autoscaling`` mapping).

    Uses the operator's own mapping (``policy_from_spec``) and evaluates every
    ``metrics.scrapeIntervalSeconds``. Raises ``ValueError`` naming the field when the manifest
    cannot drive the built-in autoscaler (disabled, not ``mode: builtin``, no ``maxReplicas``...).
    """
    section: Any = manifest
    if "spec" in manifest or manifest.get("kind") == "LLMDeployment":
        section = (manifest.get("spec") or {}).get("autoscaling")
        if section is None:
            raise ValueError("--deployment: the manifest has no spec.autoscaling; add one or use --policy")
    try:
        spec = AutoscalingSpec.model_validate(section)
    except ValueError as exc:
        raise ValueError(f"--deployment: spec.autoscaling is invalid: {exc}") from None
    if not spec.enabled:
        raise ValueError("--deployment: spec.autoscaling.enabled is false; set it to true to simulate it")
    if spec.mode != "builtin":
        raise ValueError(f"--deployment: spec.autoscaling.mode is {spec.mode!r}; only builtin is simulated")
    policy = asc.policy_from_spec(spec)
    return SharedPolicy("builtin", policy, sync_period_s=float(spec.metrics.scrape_interval_seconds))


def hpa_queue(min_replicas: int = 1, max_replicas: int = 64, target: float = 1.0) -> SharedPolicy:
    """HPA defaults on waiting requests per replica (NVIDIA's Triton autoscaling guide setup)."""
    policy = asc.Policy(
        min_replicas=min_replicas,
        max_replicas=max_replicas,
        queue_depth_per_replica=target,
        kv_cache_utilization=None,
        tolerance=0.1,
        scale_up=asc.HPA_DEFAULT_SCALE_UP,
        scale_down=asc.HPA_DEFAULT_SCALE_DOWN,
    )
    return SharedPolicy("hpa-queue", policy, sync_period_s=15.0, metrics_lag_s=15.0)


def kv_only(min_replicas: int = 1, max_replicas: int = 64, target: float | None = None) -> SharedPolicy:
    """The builtin policy on KV-cache utilization alone."""
    policy = asc.Policy(
        min_replicas=min_replicas,
        max_replicas=max_replicas,
        queue_depth_per_replica=None,
        kv_cache_utilization=target if target is not None else asc.DEFAULT_KV_CACHE_UTILIZATION,
    )
    return SharedPolicy("kv-only", policy)


@dataclass
class StaticPolicy:
    """A fixed fleet of ``replicas`` for the whole run."""

    replicas: int
    name: str = "static"
    sync_period_s: float = 60.0
    metrics_lag_s: float = 0.0
    cold_start_s: float | None = None

    def decide(self, obs: Observation) -> int:
        """Always ``replicas``."""
        return self.replicas


def request_work_s(req: Request, spec: ReplicaSpec, batch: float) -> float:
    """Replica-seconds of GPU time one request needs when batched with ``batch`` others.

    From the iteration-time model: its prompt and output tokens each cost ``per_token_s``, each of
    its decode steps reads its growing context (``per_kv_token_s`` × out × (in + out/2)), and it
    carries 1/``batch`` of the fixed per-iteration cost for each of its ``out`` iterations.
    """
    m = spec.model
    return (
        m.per_token_s * (req.input_tokens + req.output_tokens)
        + m.per_kv_token_s * req.output_tokens * (req.input_tokens + req.output_tokens / 2.0)
        + m.fixed_s * req.output_tokens / batch
    )


@dataclass
class OraclePolicy:
    """Clairvoyant fluid sizing: the replicas the *future* work needs, with instant cold starts.

    Definition. Let B* be the steady-state batch of a saturated replica for the trace's mean input
    and output length (:func:`~trtllm_operator.simulate.perf.steady_concurrency`) and w(r) the
    replica-seconds request r needs at that batch (:func:`request_work_s`). The demand at time t is
    ``D(t) = Σ_{r arriving in [t, t + window_s)} w(r) / window_s`` replicas. At every tick t (every
    ``sync_period_s``) the oracle sets ``ceil(max_{t ≤ t' ≤ t + horizon_s} D(t') / utilization)``
    replicas (at least 1). It has perfect foresight of arrivals, replicas serve the moment they
    are created (cold start 0), metrics lag is irrelevant (it reads no metrics) and it scales down
    at once. ``utilization`` = 1 is the fluid lower bound, which queues at the peaks; the benchmark
    picks the largest utilization (cheapest plan) whose run still meets the SLO target, so the
    oracle is "the cheapest clairvoyant plan of this family that meets the SLO".
    """

    requests: Sequence[Request]
    spec: ReplicaSpec
    utilization: float = 1.0
    window_s: float = 30.0
    horizon_s: float = 30.0
    lookback_s: float = 30.0
    name: str = "oracle"
    sync_period_s: float = 5.0
    metrics_lag_s: float = 0.0
    cold_start_s: float | None = 0.0
    _times: list[float] = field(default_factory=list, repr=False)
    _prefix: list[float] = field(default_factory=list, repr=False)

    def __post_init__(self) -> None:
        if not 0 < self.utilization <= 1.5:
            raise ValueError(f"oracle utilization must be in (0, 1.5], got {self.utilization}")
        n = max(1, len(self.requests))
        mean_in = sum(r.input_tokens for r in self.requests) / n
        mean_out = sum(r.output_tokens for r in self.requests) / n
        batch = steady_concurrency(
            max(1, round(mean_in)),
            max(1, round(mean_out)),
            self.spec.max_kv_tokens,
            self.spec.max_batch_size,
            self.spec.max_num_tokens,
        )
        self._times = [r.arrival_s for r in self.requests]
        self._prefix = [0.0]
        for r in self.requests:
            self._prefix.append(self._prefix[-1] + request_work_s(r, self.spec, batch))

    def demand(self, t: float) -> float:
        """D(t): replicas needed by the work arriving in [t, t + window_s)."""
        lo = bisect.bisect_left(self._times, t)
        hi = bisect.bisect_left(self._times, t + self.window_s)
        return (self._prefix[hi] - self._prefix[lo]) / self.window_s

    def desired_at(self, t: float) -> int:
        """The oracle's replica count at time t."""
        span = self.lookback_s + self.horizon_s
        steps = max(1, int(span / self.sync_period_s))
        start = t - self.lookback_s
        peak = max(self.demand(start + k * span / steps) for k in range(steps + 1))
        return max(1, math.ceil(round(peak / self.utilization, 9)))

    def peak(self, end_s: float, start_s: float = 0.0) -> int:
        """The largest count the oracle uses in [start_s, end_s] (static provisioning at peak)."""
        ticks = int((end_s - start_s) / self.sync_period_s) + 1
        return max(self.desired_at(start_s + k * self.sync_period_s) for k in range(ticks))

    def decide(self, obs: Observation) -> int:
        """Replicas for the work arriving around now (see the class docstring)."""
        return self.desired_at(obs.time_s)


def parse_policy(
    text: str,
    requests: Sequence[Request],
    spec: ReplicaSpec,
    *,
    min_replicas: int = 1,
    max_replicas: int = 64,
) -> SharedPolicy | StaticPolicy | OraclePolicy:
    """``builtin | hpa-queue | kv-only | static:N | oracle[:UTILIZATION]`` → a policy object.

    Raises ``ValueError`` naming ``--policy`` and the accepted forms.
    """
    if text == "builtin":
        return builtin(min_replicas, max_replicas)
    if text == "hpa-queue":
        return hpa_queue(min_replicas, max_replicas)
    if text == "kv-only":
        return kv_only(min_replicas, max_replicas)
    kind, _, arg = text.partition(":")
    try:
        if kind == "static" and arg:
            n = int(arg)
            if n < 1:
                raise ValueError
            return StaticPolicy(n, name=f"static:{n}")
        if kind == "oracle":
            return OraclePolicy(requests, spec, utilization=float(arg) if arg else 1.0)
    except ValueError:
        pass
    raise ValueError(
        f"--policy {text!r}: use builtin, hpa-queue, kv-only, static:N (N ≥ 1) or oracle[:UTILIZATION]"
    )
