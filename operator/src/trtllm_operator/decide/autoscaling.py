"""The autoscaling policy: a pure function from a metrics snapshot to a replica decision.

One call of :func:`decide` is one autoscaler tick. It takes

* a :class:`Snapshot` — the scale target's current ``spec.replicas`` and, per pod, its scheduling
  state and its value of each signal of the registry (:mod:`trtllm_operator.api.signals`:
  active-request utilization, KV-cache utilization; ``None`` when missing);
* an :class:`AutoscalerState` — the recommendation history and recent scale events, the only memory
  the policy has (JSON-serialisable: the simulator keeps it in memory; so does the operator, which
  also writes it to ``status.autoscaling.policyState`` when :func:`same_memory` says a restart
  would otherwise lose what a later decision reads, and picks it up after a restart with
  :func:`resume`);
* a :class:`Policy` — targets, tolerance, min/max, and per-direction stabilization windows and rate
  limits (the ``spec.autoscaling`` of an LLMDeployment, see :func:`policy_from_spec`);
* ``now`` — seconds since the epoch (a float; the policy never reads a clock),

and returns a :class:`Decision`: from/to replicas, the signal values it saw, a stable ``reason``
string, a human message, the ``ScalingLimited`` reason if a limit held it back, and the updated
state to carry into the next tick. Nothing here does I/O, so the operator's kopf timer and the
offline simulator run exactly the same code.

The algorithm is Kubernetes' HorizontalPodAutoscaler (``pkg/controller/podautoscaler``:
``replica_calculator.go`` ``calcPlainMetricReplicas``, ``horizontal.go``
``stabilizeRecommendationWithBehaviors`` and ``convertDesiredReplicasWithBehaviorRate``), with the
same names where it has them, so that users who know HPA can predict it. Per enabled signal::

    ratio   = mean(signal over Ready pods with data) / target
    desired = ceil(ratio × number of pods averaged)          # HPA's formula
    desired = current        if |1 − ratio| ≤ tolerance

and the recommendation is the maximum over signals. Pods are treated as HPA treats them:

* **Ready pod, metric present** — averaged.
* **Ready pod, metric missing or stale** — on a scale-up counted as 0 (so it does not push scale-up);
  on a scale-down counted as exactly at target (so it holds its own replica). If filling it in
  flips the direction, or lands within tolerance, the signal recommends ``current``: a pod without
  data never makes the policy remove more capacity than the pods with data justify.
* **Starting pod** (scheduled, not Ready yet: pulling the image, loading the engine) — on a scale-up
  counted as 0 (capacity that is coming); otherwise ignored.
* **Unschedulable pod** (``PodScheduled=False``, reason ``Unschedulable``: typically no free GPU) —
  *not capacity*: left out of every average, and while one exists no scale-up is made; the decision
  reports ``ScalingLimited``/``InsufficientGPU`` instead. Scale-down still works (the ReplicaSet
  controller deletes unscheduled pods first). This is where the policy departs from HPA, which counts
  such pods as unready and keeps adding replicas that can never start.
* **Terminating / finished pods** — ignored.
* **Replicas without a pod** (``replicas`` above the number of pods: the workload controller has not
  created them yet) — no scale-up until they exist and the scheduler has placed them or marked them
  Unschedulable (``AwaitingPods``), so a slow control plane cannot make the policy pile up replicas
  before it knows whether GPUs are free.

A signal with no data at all is invalid. No valid signal → no change (``MissingMetrics``). Some
signals invalid and the valid ones recommend scaling down → no change either (HPA's rule for
invalid metrics).

Then, as HPA with ``behavior``: the stabilized recommendation is the *minimum* of recommendations
within the scale-up window (scale up only when load has stayed high for the whole window) and the
*maximum* within the scale-down window (scale down only to the highest count needed in the window);
rate limits cap the change per period (``Pods``/``Percent`` policies, ``selectPolicy`` Max/Min/
Disabled, periods counted from recorded scale events); then ``minReplicas``/``maxReplicas``.

Defaults and why (``DEFAULT_*`` below; the simulator's benchmark compares them with HPA's):

* tolerance 0.1 — HPA's default; smaller values chase the noise of a per-iteration gauge.
* scale-up window 15 s — a single burst must not buy a GPU replica that takes minutes to load its
  engine and will be idle by then (HPA: 0 s). It holds three decisions at ``scrapeIntervalSeconds: 5``
  but one or two at the default 15 (docs/autoscaling.md "Defaults and why").
* scale-up rate: the larger of +100 % or +4 pods per 60 s — HPA's own limits (per 15 s there),
  stretched to the cold start of a Triton pod (engine load and KV-cache allocation take ~1 min), so
  the next step is taken once the previous one can have served.
* scale-down window 300 s — HPA's default; removing a GPU replica is cheap but getting it back costs
  a cold start, so capacity is released only after five quiet minutes.
* scale-down rate: the larger of −1 pod or −10 % per 60 s — slow drain: one replica at a time for
  small fleets, 10 % for large ones, each step re-measured before the next (HPA: −100 % per 15 s).
* targets: active-request utilization 0.5 and KV-cache utilization 0.8. Active-request utilization is
  ``active / max`` (the executor's admission cap): by Little's law it follows the load below
  saturation, and at 1 further requests wait in the executor's queue, which Triton does not export —
  so the target leaves headroom below 1 for growth during a cold start. It cannot exceed 1: past
  saturation the proportional formula asks for ``1 / target`` times the replicas per tick (× 2 at
  0.5), not for what the backlog needs. 0.5 is the setting the benchmark's tuning half chose
  (benchmarks/RESULTS.md: 0.7 left the executor's queue growing unseen at the ×10 trace's peaks).
  Above ~80 % KV blocks the batcher holds requests back under ``GUARANTEED_NO_EVICT`` (they show as
  ``waiting``), so latency rises before saturation shows.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, Literal

from trtllm_operator.api import deployment as api
from trtllm_operator.api import signals as registry
from trtllm_operator.api.signals import ACTIVE_REQUEST_UTILIZATION, KV_CACHE_UTILIZATION
from trtllm_operator.decide import capacity as capmod

__all__ = [
    "ACTIVE_REQUEST_UTILIZATION",
    "DEFAULT_ACTIVE_REQUEST_UTILIZATION",
    "DEFAULT_KV_CACHE_UTILIZATION",
    "DEFAULT_SCALE_DOWN",
    "DEFAULT_SCALE_UP",
    "DEFAULT_TOLERANCE",
    "HPA_DEFAULT_SCALE_DOWN",
    "HPA_DEFAULT_SCALE_UP",
    "KV_CACHE_UTILIZATION",
    "SIGNALS",
    "AutoscalerState",
    "Decision",
    "PodSignals",
    "PodState",
    "Policy",
    "RateLimit",
    "Reason",
    "Recommendation",
    "ScaleEvent",
    "ScalingRules",
    "Snapshot",
    "capacity_from_spec",
    "decide",
    "policy_from_spec",
    "quantity",
    "record_decision",
    "refuse_retired_targets",
    "refuse_scale_to_zero",
    "resume",
    "rules_manifest",
    "same_memory",
    "scaling_rules_from_spec",
    "signal_status",
]

#: Signal names, as in ``spec.autoscaling.targets`` and ``status.autoscaling`` (the registry,
#: :data:`trtllm_operator.api.signals.SIGNALS`, has one record per signal).
SIGNALS: tuple[str, ...] = registry.names()

DEFAULT_TOLERANCE = 0.1

#: Name of the capacity recommendation in ``Decision.desired_by_signal`` (:mod:`.capacity`).
CAPACITY = "capacity"


def _recommended(name: str) -> float:
    return next(s.recommended for s in registry.SIGNALS if s.name == name)


DEFAULT_ACTIVE_REQUEST_UTILIZATION = _recommended(ACTIVE_REQUEST_UTILIZATION)
DEFAULT_KV_CACHE_UTILIZATION = _recommended(KV_CACHE_UTILIZATION)

#: Digits kept when rounding ``ratio × pods`` before ``ceil``, so float noise (3.0000000001) does
#: not add a replica. HPA computes in integer milli-units, which has the same effect.
_ROUND_DIGITS = 9


class Reason(StrEnum):
    """Stable reason strings of a decision (``status.autoscaling.lastDecisions[].reason``).

    Names follow HPA's conditions where HPA has one (``ScaleUpStabilized``, ``ScaleUpLimit``,
    ``TooManyReplicas``, ...).
    """

    #: A signal is above target beyond tolerance: scaling up.
    ABOVE_TARGET = "AboveTarget"
    #: Every signal is below target beyond tolerance: scaling down.
    BELOW_TARGET = "BelowTarget"
    #: The recommendation equals the current count because a signal is within tolerance of its target.
    WITHIN_TOLERANCE = "WithinTolerance"
    #: Higher recommendation held back: load has not stayed high for the whole scale-up window.
    SCALE_UP_STABILIZED = "ScaleUpStabilized"
    #: Lower recommendation held back by the scale-down window.
    SCALE_DOWN_STABILIZED = "ScaleDownStabilized"
    #: Scale-up capped by the scale-up rate limits.
    SCALE_UP_LIMIT = "ScaleUpLimit"
    #: Scale-down capped by the scale-down rate limits.
    SCALE_DOWN_LIMIT = "ScaleDownLimit"
    #: Capped at (or brought down to) ``maxReplicas``.
    TOO_MANY_REPLICAS = "TooManyReplicas"
    #: Capped at (or brought up to) ``minReplicas``.
    TOO_FEW_REPLICAS = "TooFewReplicas"
    #: Scale-up refused: pods of this deployment cannot be scheduled (no free GPU).
    INSUFFICIENT_GPU = "InsufficientGPU"
    #: Scale-up deferred: replicas asked for earlier have no pod yet (the workload controller has not
    #: created them), so whether they can be scheduled is not known.
    AWAITING_PODS = "AwaitingPods"
    #: No usable metric for any signal, or scale-down refused because a signal has no data.
    MISSING_METRICS = "MissingMetrics"
    #: A signal is outside tolerance, but HPA's ``ceil(ratio × pods)`` is the current count: fewer
    #: replicas would put it above target.
    ROUNDED_UP = "RoundedUp"
    #: The current count is kept because pods are not Ready: starting pods count as idle on a
    #: scale-up (HPA's rule), and a signal above target on fewer Ready pods than replicas never
    #: recommends fewer.
    PODS_NOT_READY = "PodsNotReady"
    #: ``spec.replicas`` is 0: autoscaling is paused until something scales the target up (as HPA).
    SCALING_DISABLED = "ScalingDisabled"


#: ``ScalingLimited`` condition reasons (a subset of :class:`Reason`).
LIMIT_REASONS = frozenset(
    {
        Reason.SCALE_UP_LIMIT,
        Reason.SCALE_DOWN_LIMIT,
        Reason.TOO_MANY_REPLICAS,
        Reason.TOO_FEW_REPLICAS,
        Reason.INSUFFICIENT_GPU,
    }
)


# --- policy -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RateLimit:
    """One rate-limit policy, HPA's ``HPAScalingPolicy``.

    ``type`` ``"Pods"``: at most ``value`` pods added/removed per ``period_seconds``;
    ``"Percent"``: at most ``value`` percent of the replicas at the start of the period.
    """

    type: Literal["Pods", "Percent"]
    value: int
    period_seconds: int

    def __post_init__(self) -> None:
        if self.type not in ("Pods", "Percent"):
            raise ValueError(f"rate limit type {self.type!r}: use 'Pods' or 'Percent'")
        if self.value <= 0:
            raise ValueError(f"rate limit value {self.value}: must be > 0")
        if not 0 < self.period_seconds <= 1800:
            raise ValueError(f"rate limit periodSeconds {self.period_seconds}: must be in 1..1800 (as HPA)")


@dataclass(frozen=True)
class ScalingRules:
    """Behavior in one direction, HPA's ``HPAScalingRules``.

    ``stabilization_window_seconds``: how far back recommendations are considered (seconds, ≥ 0).
    ``select_policy``: ``"Max"`` picks the rate limit allowing the largest change, ``"Min"`` the
    smallest, ``"Disabled"`` forbids scaling in this direction.
    """

    stabilization_window_seconds: int
    policies: tuple[RateLimit, ...]
    select_policy: Literal["Max", "Min", "Disabled"] = "Max"

    def __post_init__(self) -> None:
        if not 0 <= self.stabilization_window_seconds <= 3600:
            raise ValueError(
                f"stabilizationWindowSeconds {self.stabilization_window_seconds}: must be in 0..3600 (as HPA)"
            )
        if self.select_policy not in ("Max", "Min", "Disabled"):
            raise ValueError(f"selectPolicy {self.select_policy!r}: use Max, Min or Disabled")
        if not self.policies and self.select_policy != "Disabled":
            raise ValueError("behavior needs at least one rate-limit policy (or selectPolicy: Disabled)")


DEFAULT_SCALE_UP = ScalingRules(
    stabilization_window_seconds=15,
    policies=(RateLimit("Percent", 100, 60), RateLimit("Pods", 4, 60)),
)
DEFAULT_SCALE_DOWN = ScalingRules(
    stabilization_window_seconds=300,
    policies=(RateLimit("Pods", 1, 60), RateLimit("Percent", 10, 60)),
)
#: Kubernetes' HPA defaults (autoscaling/v2 ``behavior`` left empty), for comparison.
HPA_DEFAULT_SCALE_UP = ScalingRules(
    stabilization_window_seconds=0,
    policies=(RateLimit("Percent", 100, 15), RateLimit("Pods", 4, 15)),
)
HPA_DEFAULT_SCALE_DOWN = ScalingRules(
    stabilization_window_seconds=300,
    policies=(RateLimit("Percent", 100, 15),),
)


@dataclass(frozen=True, init=False)
class Policy:
    """What :func:`decide` aims for; mirrors ``LLMDeployment.spec.autoscaling``.

    Targets: one keyword per signal of the registry (:mod:`trtllm_operator.api.signals`), named as
    the API model's attribute — ``active_request_utilization`` (active / max requests, in (0, 1]),
    ``kv_cache_utilization`` (fraction of KV-cache blocks in use, in (0, 1]) …; ``None`` disables a
    signal (at least one must be
    enabled); a signal not given takes its registry ``policy_default``. They are kept, enabled only
    and in registry order, in ``signal_targets`` and read with :meth:`targets` or as attributes.
    ``tolerance``: relative dead band around each target.

    Raises ``ValueError`` naming the ``spec.autoscaling`` field on an inconsistent policy, and
    ``TypeError`` for a keyword that is no signal.
    """

    min_replicas: int
    max_replicas: int
    signal_targets: tuple[tuple[str, float], ...]
    tolerance: float
    scale_up: ScalingRules
    scale_down: ScalingRules
    capacity: capmod.CapacityParams | None

    def __init__(
        self,
        min_replicas: int = 1,
        max_replicas: int = 10,
        *,
        tolerance: float = DEFAULT_TOLERANCE,
        scale_up: ScalingRules = DEFAULT_SCALE_UP,
        scale_down: ScalingRules = DEFAULT_SCALE_DOWN,
        signal_targets: Iterable[tuple[str, float]] | None = None,
        capacity: capmod.CapacityParams | None = None,
        **targets: float | None,
    ) -> None:
        signals = registry.SIGNALS
        unknown = sorted(set(targets) - {s.attr for s in signals})
        if unknown:
            raise TypeError(
                f"Policy: unknown target(s) {', '.join(unknown)}; the signals are "
                f"{', '.join(s.attr for s in signals)}"
            )
        # ``signal_targets`` (what dataclasses.replace passes): exactly these signals on, the rest off.
        base = dict(signal_targets) if signal_targets is not None else None
        chosen = [
            (
                s,
                targets[s.attr]
                if s.attr in targets
                else (s.policy_default if base is None else base.get(s.name)),
            )
            for s in signals
        ]
        enabled = tuple((s.name, float(v)) for s, v in chosen if v is not None)
        object.__setattr__(self, "min_replicas", min_replicas)
        object.__setattr__(self, "max_replicas", max_replicas)
        object.__setattr__(self, "signal_targets", enabled)
        object.__setattr__(self, "tolerance", tolerance)
        object.__setattr__(self, "scale_up", scale_up)
        object.__setattr__(self, "scale_down", scale_down)
        object.__setattr__(self, "capacity", capacity)
        if self.min_replicas < 1:
            raise ValueError(f"spec.autoscaling.minReplicas {self.min_replicas}: must be ≥ 1")
        if self.max_replicas < self.min_replicas:
            raise ValueError(
                f"spec.autoscaling.maxReplicas {self.max_replicas} is below minReplicas "
                f"{self.min_replicas}: raise maxReplicas or lower minReplicas"
            )
        if not enabled:
            raise ValueError(
                f"spec.autoscaling.targets: enable at least one of {', '.join(s.name for s in signals)}"
            )
        for s, value in chosen:
            if value is None:
                continue
            if s.fraction and not 0 < value <= 1:
                raise ValueError(
                    f"spec.autoscaling.targets.{s.name} {value}: must be a fraction in (0, 1], "
                    f"e.g. {s.example:g}"
                )
            if not value > 0:
                raise ValueError(f"spec.autoscaling.targets.{s.name} {value}: must be > 0")
        if not 0 <= self.tolerance < 1:
            raise ValueError(f"spec.autoscaling.tolerance {self.tolerance}: must be in [0, 1), e.g. 0.1")

    def __getattr__(self, attr: str) -> float | None:
        """A signal's target by its attribute name (``policy.kv_cache_utilization``); ``None`` = off."""
        for s in registry.SIGNALS:
            if s.attr == attr:
                return self.targets().get(s.name)
        raise AttributeError(attr)

    def targets(self) -> dict[str, float]:
        """The enabled signals and their targets, by signal name."""
        return dict(self.signal_targets)

    def history_seconds(self) -> int:
        """How long state entries matter: the longest window or rate-limit period."""
        spans = [self.scale_up.stabilization_window_seconds, self.scale_down.stabilization_window_seconds]
        spans += [p.period_seconds for p in self.scale_up.policies + self.scale_down.policies]
        return max(spans)


# --- snapshot -----------------------------------------------------------------------------------


class PodState(StrEnum):
    """How a pod counts towards capacity."""

    #: Ready condition True: serving; its metrics are averaged.
    READY = "Ready"
    #: Scheduled (or about to be) but not Ready: image pull, engine load. Capacity that is coming.
    STARTING = "Starting"
    #: Pending with ``PodScheduled=False``, reason ``Unschedulable``: not capacity.
    UNSCHEDULABLE = "Unschedulable"
    #: Being deleted, Succeeded or Failed: ignored.
    TERMINATING = "Terminating"


@dataclass(frozen=True)
class PodSignals:
    """One pod as the policy sees it.

    ``values``: the pod's value of each signal, by signal name (:data:`SIGNALS`) — e.g. active / max
    requests for ``activeRequestUtilization`` (``nv_trt_llm_request_metrics``), used/max KV-cache
    blocks for ``kvCacheUtilization``. A
    signal left out, or ``None``, is missing or stale. Only READY pods' values are used.
    """

    name: str
    state: PodState = PodState.READY
    values: Mapping[str, float | None] = field(default_factory=dict)
    counters: Mapping[str, float | None] = field(default_factory=dict)

    def __post_init__(self) -> None:
        unknown = sorted(set(self.values) - set(registry.names()))
        if unknown:
            raise ValueError(f"unknown signal(s) {', '.join(unknown)}: use {', '.join(registry.names())}")
        extra = sorted(set(self.counters) - set(capmod.COUNTERS))
        if extra:
            raise ValueError(f"unknown counter(s) {', '.join(extra)}: use {', '.join(capmod.COUNTERS)}")

    def value(self, signal: str) -> float | None:
        """The value of ``signal`` (one of :data:`SIGNALS`)."""
        if signal not in registry.names():
            raise ValueError(f"unknown signal {signal!r}: use one of {', '.join(registry.names())}")
        return self.values.get(signal)


@dataclass(frozen=True)
class Snapshot:
    """The scale target at one instant: ``replicas`` is its current ``spec.replicas``."""

    replicas: int
    pods: tuple[PodSignals, ...] = ()

    def count(self, state: PodState) -> int:
        """Number of pods in ``state``."""
        return sum(1 for p in self.pods if p.state == state)

    def average(self, signal: str) -> float | None:
        """Mean of ``signal`` over READY pods that report it; ``None`` if none does."""
        values = [v for p in self.pods if p.state == PodState.READY and (v := p.value(signal)) is not None]
        return sum(values) / len(values) if values else None


# --- state --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Recommendation:
    """An unstabilized recommendation (replicas) made at ``time`` (epoch seconds)."""

    time: float
    replicas: int


@dataclass(frozen=True)
class ScaleEvent:
    """A scale made at ``time`` (epoch seconds): ``change`` > 0 up, < 0 down."""

    time: float
    change: int


@dataclass(frozen=True)
class AutoscalerState:
    """The policy's memory between ticks. Serialise with :meth:`to_dict` / :meth:`from_dict`.

    Persist the state returned in a :class:`Decision` only once the decision has been applied
    (the scale patch succeeded): it records the scale event that rate limits count. A caller that
    keeps the state in memory between ticks (the operator) needs to persist it only when
    :func:`same_memory` says the persisted copy no longer carries it, and carries a persisted copy
    into a tick with :func:`resume`.
    """

    recommendations: tuple[Recommendation, ...] = ()
    scale_events: tuple[ScaleEvent, ...] = ()
    capacity: capmod.CapacityState | None = None

    def to_dict(self) -> dict[str, Any]:
        """Compact JSON form: ``{"recommendations": [[t, n], ...], "scaleEvents": [[t, Δ], ...]}``, plus
        ``"capacity"`` (:meth:`~trtllm_operator.decide.capacity.CapacityState.to_dict`) when the
        capacity recommendation is on."""
        out: dict[str, Any] = {
            "recommendations": [[round(r.time, 3), r.replicas] for r in self.recommendations],
            "scaleEvents": [[round(e.time, 3), e.change] for e in self.scale_events],
        }
        if self.capacity is not None:
            out["capacity"] = self.capacity.to_dict()
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> AutoscalerState:
        """Inverse of :meth:`to_dict`. Raises ``ValueError`` on a malformed document."""
        if not data:
            return cls()
        try:
            recs = tuple(Recommendation(float(t), int(n)) for t, n in data.get("recommendations", []))
            events = tuple(ScaleEvent(float(t), int(c)) for t, c in data.get("scaleEvents", []))
        except (TypeError, ValueError) as exc:
            raise ValueError(f"autoscaler state is malformed ({exc}); expected {cls().to_dict()}") from exc
        capacity = data.get("capacity")
        return cls(recs, events, None if capacity is None else capmod.CapacityState.from_dict(capacity))


def resume(persisted: AutoscalerState, until: float) -> AutoscalerState:
    """The state to carry into an evaluation when all there is of the previous ones is ``persisted``
    (an operator restart): the last recommendation is taken to have been made until ``until`` (epoch
    seconds; pass the time of the evaluation before this one, ``now`` − the evaluation interval).

    The operator writes its state only when :func:`same_memory` says a restart would read it
    differently, so the persisted copy ends where the last *change* of recommendation began, not at
    the last evaluation: every evaluation since recommended that same count, the last one at most one
    interval before ``now``. With no downtime that is exact; after downtime the run is taken to have
    lasted through it, as Kubernetes' HPA controller treats a history it does not have (kubernetes
    v1.34.4 ``pkg/controller/podautoscaler/horizontal.go`` ``recordInitialRecommendation`` seeds
    the current count at the time it first sees the HPA): a restart never scales down early, and a
    scale-up after a quiet spell waits its scale-up window. An empty state stays empty
    (:func:`decide` seeds it with the current count).
    """
    if not persisted.recommendations:
        return persisted
    last = persisted.recommendations[-1]
    if until <= last.time:
        return persisted
    return AutoscalerState(
        (*persisted.recommendations, Recommendation(until, last.replicas)),
        persisted.scale_events,
        persisted.capacity,
    )


def _memory(state: AutoscalerState, horizon: float) -> tuple[Any, ...]:
    """What any decision after ``horizon`` reads of ``state``, times at the persisted precision
    (:meth:`AutoscalerState.to_dict`): the stabilization windows take the minimum / maximum of the
    recommendations after a cutoff, so of a run of consecutive equal recommendations only the last
    one's time matters (the run is in a window exactly while that one is); entries at or before
    ``horizon`` are read by nothing."""
    runs: list[tuple[float, int]] = []
    for r in state.recommendations:
        if r.time <= horizon:
            continue
        if runs and runs[-1][1] == r.replicas:
            runs[-1] = (round(r.time, 3), r.replicas)
        else:
            runs.append((round(r.time, 3), r.replicas))
    events = tuple((round(e.time, 3), e.change) for e in state.scale_events if e.time > horizon)
    return tuple(runs), events, _capacity_memory(state.capacity)


def _capacity_memory(capacity: capmod.CapacityState | None) -> dict[str, Any] | None:
    """What of the capacity memory a later decision reads differently, times aside: each pod's
    counters and the rate's level and trend, κ. The times alone move at every evaluation of an idle
    deployment (no request: the same counters, level 0, trend 0), and a restarted operator that reads
    an older copy with the same values measures the same rate (no change of the counters over a
    longer span is still 0) and smooths the same level — so an idle deployment with the capacity
    recommendation on costs no write per evaluation either."""
    if capacity is None:
        return None
    memory = capacity.to_dict()
    # [name, time, completed, active(, prompt tokens, output tokens, finished)]: all but the time
    memory["pods"] = [[name, *values] for name, _, *values in memory["pods"]]
    del memory["time"]
    return memory


def same_memory(persisted: AutoscalerState, state: AutoscalerState, *, now: float, horizon: float) -> bool:
    """Whether an operator restarted after the evaluation at ``now`` would carry ``persisted`` (what
    ``status.autoscaling.policyState`` holds) into its next evaluation as the same memory as
    ``state`` (the one it has in memory after deciding at ``now``), so ``state`` needs no write.

    Same memory: ``persisted`` after :func:`resume` until ``now`` and ``state`` give every later
    :func:`decide` the same
    stabilization minima and maxima, rate-limit counts and capacity state — the same recommendation
    runs (each up to its last time) and scale events after ``horizon`` (:attr:`Decision.horizon`),
    times compared to the millisecond the JSON form keeps. An idle deployment that recommends the
    same count at every evaluation therefore has nothing new to persist; a new count or a scale
    event is written once; entries that leave the horizon cost no write (neither copy is read there).
    The capacity memory is compared without its times (:func:`_capacity_memory`).
    """
    return _memory(resume(persisted, now), horizon) == _memory(state, horizon)


# --- decision -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Decision:
    """The outcome of one tick.

    ``from_replicas`` → ``to_replicas`` (equal when nothing changes); ``recommendation``: the raw
    max-over-signals count before windows and limits; ``signals``: mean value per enabled signal over
    Ready pods (``None`` = no data); ``desired_by_signal``: each valid signal's own count;
    ``limited``: the ``ScalingLimited`` reason when a limit (rate, min/max, GPU) held the count back,
    else ``None``; ``state``: carry into the next call; ``horizon``: see the field.
    """

    time: float
    from_replicas: int
    to_replicas: int
    reason: Reason
    message: str
    recommendation: int
    signals: dict[str, float | None]
    desired_by_signal: dict[str, int]
    ready_replicas: int
    unschedulable_replicas: int
    limited: Reason | None
    state: AutoscalerState = field(repr=False, default_factory=AutoscalerState)
    #: Epoch seconds: ``state`` entries at or before it are read by no later decision (``time`` − the
    #: policy's :meth:`Policy.history_seconds`); :func:`same_memory` compares states above it.
    horizon: float = 0.0

    @property
    def scaled(self) -> bool:
        """True when the decision changes the replica count."""
        return self.to_replicas != self.from_replicas

    def to_status(self) -> dict[str, Any]:
        """One ``status.autoscaling.lastDecisions[]`` entry (the API's ``ScalingDecision``).

        ``{"time": RFC 3339, "fromReplicas", "toReplicas", "signals": {name: value}, "reason",
        "message"}``; signals without data are left out of ``signals``.
        """
        return {
            "time": datetime.fromtimestamp(self.time, UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "fromReplicas": self.from_replicas,
            "toReplicas": self.to_replicas,
            "signals": {name: round(value, 4) for name, value in self.signals.items() if value is not None},
            "reason": str(self.reason),
            "message": self.message,
        }


# --- the policy ---------------------------------------------------------------------------------


class _Held(StrEnum):
    """Why one signal recommended exactly the current count (the rule that held it)."""

    #: ``|1 − ratio| ≤ tolerance``.
    TOLERANCE = "tolerance"
    #: Outside tolerance, but ``ceil(ratio × pods)`` is the current count.
    ROUNDING = "rounding"
    #: Ready pods without data, filled in as HPA does, brought it back to the current count.
    MISSING = "missing"
    #: Pods not Ready (starting, unschedulable, not created) kept the count: starting pods counted
    #: as idle on a scale-up, or fewer Ready pods than replicas (never fewer above target).
    NOT_READY = "not-ready"


@dataclass(frozen=True)
class _SignalResult:
    desired: int | None  # None: no data at all (invalid signal)
    ratio: float | None
    held: _Held | None = None  # set when desired == current because of this rule
    present: int = 0  # Ready pods with data
    missing: int = 0  # Ready pods without data


def _ceil(x: float) -> int:
    return math.ceil(round(x, _ROUND_DIGITS))


def _replicas_for_signal(
    values: Sequence[float | None], starting: int, current: int, target: float, tolerance: float
) -> _SignalResult:
    """HPA's ``calcPlainMetricReplicas`` for one signal (values: one per READY pod)."""
    present = [v for v in values if v is not None]
    missing = len(values) - len(present)
    if not present:
        return _SignalResult(None, None, missing=missing)
    ratio = sum(present) / len(present) / target

    def result(desired: int, held: _Held | None) -> _SignalResult:
        return _SignalResult(
            desired, ratio, held if desired == current else None, present=len(present), missing=missing
        )

    scale_up_with_starting = starting > 0 and ratio > 1.0
    if not scale_up_with_starting and missing == 0:
        if abs(1.0 - ratio) <= tolerance:
            return result(current, _Held.TOLERANCE)
        desired = _ceil(ratio * len(present))
        # Unschedulable pods are not averaged, so ready < current is possible: a signal above
        # target never recommends fewer replicas (nor one below target more) than current.
        if (ratio > 1.0 and desired < current) or (ratio < 1.0 and desired > current):
            return result(current, _Held.NOT_READY)
        return result(desired, _Held.ROUNDING)
    filled = list(present)
    if missing:
        # Scale-down: missing pods count as exactly at target; scale-up: as idle.
        filled += [target if ratio < 1.0 else 0.0] * missing
    if scale_up_with_starting:
        filled += [0.0] * starting
    new_ratio = sum(filled) / len(filled) / target
    fill = _Held.MISSING if missing else _Held.NOT_READY
    if (
        abs(1.0 - new_ratio) <= tolerance
        or (ratio < 1.0 and new_ratio > 1.0)
        or (ratio > 1.0 and new_ratio < 1.0)
    ):
        return result(current, fill)
    desired = _ceil(new_ratio * len(filled))
    if (new_ratio < 1.0 and desired > current) or (new_ratio > 1.0 and desired < current):
        return result(current, fill)
    return result(desired, fill)


#: Which rule is named when several signals hold the count (the first that applies).
_HELD_ORDER = (_Held.TOLERANCE, _Held.MISSING, _Held.NOT_READY, _Held.ROUNDING)
_HELD_REASON = {
    _Held.TOLERANCE: Reason.WITHIN_TOLERANCE,
    _Held.MISSING: Reason.MISSING_METRICS,
    _Held.NOT_READY: Reason.PODS_NOT_READY,
    _Held.ROUNDING: Reason.ROUNDED_UP,
}


def _held_phrase(
    name: str,
    result: _SignalResult,
    value: float | None,
    target: float,
    *,
    policy: Policy,
    snapshot: Snapshot,
) -> str:
    """Why ``name`` recommended the current count, in words (``result.held`` is set)."""
    seen = f"{name} {_fmt(value)} vs target {target:g}"
    ratio = result.ratio or 0.0
    current = snapshot.replicas
    if result.held == _Held.TOLERANCE:
        return f"{seen} is within tolerance {policy.tolerance:g} (ratio {ratio:.3g})"
    if result.held == _Held.ROUNDING:
        return (
            f"{seen}: ceil(ratio {ratio:.3g} × {result.present} pod(s)) = {current}, "
            "fewer replicas would put it above target"
        )
    if result.held == _Held.MISSING:
        counted = "at target" if ratio < 1.0 else "as idle"
        return (
            f"{seen} on {result.present} Ready pod(s) with data; {result.missing} Ready pod(s) without "
            f"data counted {counted} (HPA's rule) keep {current}"
        )
    starting = snapshot.count(PodState.STARTING)
    ready = result.present + result.missing
    if ratio > 1.0 and starting:
        return f"{seen}: {starting} starting pod(s) counted as idle (HPA's rule) keep {current}"
    return f"{seen} on {ready} Ready pod(s) of {current} replicas: not Ready pods keep {current}"


def _change_in_period(events: Sequence[ScaleEvent], now: float, period: int, *, up: bool) -> int:
    cutoff = now - period
    return sum(abs(e.change) for e in events if e.time > cutoff and (e.change > 0) == up)


def _scale_up_limit(current: int, events: Sequence[ScaleEvent], now: float, rules: ScalingRules) -> int:
    """HPA's ``calculateScaleUpLimitWithScalingRules``."""
    if rules.select_policy == "Disabled":
        return current
    proposals = []
    for p in rules.policies:
        start = (
            current
            - _change_in_period(events, now, p.period_seconds, up=True)
            + _change_in_period(events, now, p.period_seconds, up=False)
        )
        if p.type == "Pods":
            proposals.append(start + p.value)
        else:
            proposals.append(_ceil(start * (1 + p.value / 100)))
    return min(proposals) if rules.select_policy == "Min" else max(proposals)


def _scale_down_limit(current: int, events: Sequence[ScaleEvent], now: float, rules: ScalingRules) -> int:
    """HPA's ``calculateScaleDownLimitWithBehaviors``."""
    if rules.select_policy == "Disabled":
        return current
    proposals = []
    for p in rules.policies:
        start = (
            current
            - _change_in_period(events, now, p.period_seconds, up=True)
            + _change_in_period(events, now, p.period_seconds, up=False)
        )
        if p.type == "Pods":
            proposals.append(start - p.value)
        else:
            proposals.append(math.floor(round(start * (1 - p.value / 100), _ROUND_DIGITS)))
    return max(proposals) if rules.select_policy == "Min" else min(proposals)


def _pod_counts(snapshot: Snapshot) -> str:
    """``"1 of 2 replica(s) Ready, 1 starting"`` (unschedulable / without a pod when there are any)."""
    ready = snapshot.count(PodState.READY)
    parts = [f"{ready} of {snapshot.replicas} replica(s) Ready"]
    for state, word in ((PodState.STARTING, "starting"), (PodState.UNSCHEDULABLE, "unschedulable")):
        if n := snapshot.count(state):
            parts.append(f"{n} {word}")
    podless = snapshot.replicas - sum(1 for p in snapshot.pods if p.state != PodState.TERMINATING)
    if podless > 0:
        parts.append(f"{podless} without a pod yet")
    return ", ".join(parts)


def _fmt(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3g}"


def decide(snapshot: Snapshot, state: AutoscalerState, policy: Policy, now: float) -> Decision:
    """One autoscaler tick: the replica count to set now, and why.

    ``now`` is seconds since the epoch (any monotonic time base works if used consistently with
    the state). Pure: the same inputs always give the same :class:`Decision`. Never raises for
    missing metrics; raises ``ValueError`` only for a negative ``snapshot.replicas``.
    """
    current = snapshot.replicas
    if current < 0:
        raise ValueError(f"snapshot.replicas {current}: must be ≥ 0")
    targets = policy.targets()
    ready = [p for p in snapshot.pods if p.state == PodState.READY]
    starting = snapshot.count(PodState.STARTING)
    unschedulable = snapshot.count(PodState.UNSCHEDULABLE)
    signals = {name: snapshot.average(name) for name in targets}
    horizon = now - policy.history_seconds()
    events = tuple(e for e in state.scale_events if e.time > horizon)
    recs = tuple(r for r in state.recommendations if r.time > horizon)
    estimate: capmod.CapacityEstimate | None = None
    # With the capacity recommendation off its memory is dropped: turned on again later, it starts
    # afresh (fresh-user trial 37 F1: a removed and re-added `capacity` kept the old κ).
    capacity_state: capmod.CapacityState | None = None
    if policy.capacity is not None:
        counters = [capmod.PodCounters.of(p.name, p.counters) for p in ready]
        estimate = capmod.estimate(counters, state.capacity or capmod.CapacityState(), policy.capacity, now)
        capacity_state = estimate.state

    def done(
        to: int,
        reason: Reason,
        message: str,
        *,
        recommendation: int,
        desired_by_signal: dict[str, int],
        limited: Reason | None,
        new_recs: tuple[Recommendation, ...],
    ) -> Decision:
        new_events = events + ((ScaleEvent(now, to - current),) if to != current else ())
        return Decision(
            time=now,
            from_replicas=current,
            to_replicas=to,
            reason=reason,
            message=message,
            recommendation=recommendation,
            signals=signals,
            desired_by_signal=desired_by_signal,
            ready_replicas=len(ready),
            unschedulable_replicas=unschedulable,
            limited=limited,
            state=AutoscalerState(new_recs, new_events, capacity_state),
            horizon=horizon,
        )

    if current == 0:
        return done(
            0,
            Reason.SCALING_DISABLED,
            "spec.replicas is 0: autoscaling paused",
            recommendation=0,
            desired_by_signal={},
            limited=None,
            new_recs=recs,
        )
    bounded = replicas_in_range(current, policy.min_replicas, policy.max_replicas)
    if bounded != current:
        above = bounded < current
        msg = (
            f"current replicas {current} above maxReplicas {policy.max_replicas}"
            if above
            else f"current replicas {current} below minReplicas {policy.min_replicas}"
        )
        return done(
            bounded,
            Reason.TOO_MANY_REPLICAS if above else Reason.TOO_FEW_REPLICAS,
            msg,
            recommendation=bounded,
            desired_by_signal={},
            limited=None,
            new_recs=recs,
        )

    # 1. Per-signal recommendation (HPA's replica calculator), max over valid signals.
    desired_by_signal: dict[str, int] = {}
    results: dict[str, _SignalResult] = {}
    invalid: list[str] = []
    for name, target in targets.items():
        result = _replicas_for_signal(
            [p.value(name) for p in ready], starting, current, target, policy.tolerance
        )
        results[name] = result
        if result.desired is None:
            invalid.append(name)
        else:
            desired_by_signal[name] = result.desired
    summary = ", ".join(f"{n}={_fmt(signals[n])} (target {targets[n]:g})" for n in targets)
    if estimate is not None and policy.capacity is not None:
        summary += "; " + estimate.summary(policy.capacity.target)
        if estimate.desired is not None and desired_by_signal:
            desired_by_signal[CAPACITY] = estimate.desired
    if not desired_by_signal:
        reason = Reason.MISSING_METRICS
        message = (
            f"no metrics for {', '.join(invalid)} from any of the {len(ready)} Ready pod(s) "
            f"({_pod_counts(snapshot)}): holding {current}"
        )
        recommendation = current
    else:
        recommendation = max(desired_by_signal.values())
        if invalid and recommendation < current:
            reason = Reason.MISSING_METRICS
            message = f"{', '.join(invalid)} has no data: not scaling down ({summary})"
            recommendation = current
        elif recommendation > current:
            driver = max(desired_by_signal, key=lambda n: desired_by_signal[n])
            reason = Reason.ABOVE_TARGET
            message = f"{driver} above target: {summary}"
        elif recommendation < current:
            reason = Reason.BELOW_TARGET
            message = f"all signals below target: {summary}"
        else:
            # Every signal that asks for exactly the current count says which rule held it there.
            holding = [n for n in targets if results[n].held is not None]
            if CAPACITY in desired_by_signal and desired_by_signal[CAPACITY] == current:
                holding.append(CAPACITY)
            rule = min(
                (h for n in holding if n in results and (h := results[n].held) is not None),
                key=_HELD_ORDER.index,
                default=_Held.TOLERANCE,
            )
            reason = _HELD_REASON[rule]
            phrases = "; ".join(
                f"capacity recommends {current}"
                if n == CAPACITY
                else _held_phrase(n, results[n], signals[n], targets[n], policy=policy, snapshot=snapshot)
                for n in holding
            )
            message = f"holding {current}: {phrases} ({summary})"

    # 2. Stabilization windows (HPA's stabilizeRecommendationWithBehaviors). A fresh state is
    # seeded with the current count, as HPA seeds a new HPA, so losing the state never scales
    # down at once (and a scale-up waits for one full scale-up window).
    if not state.recommendations:
        recs = (Recommendation(now, current),)
    up_cutoff = now - policy.scale_up.stabilization_window_seconds
    down_cutoff = now - policy.scale_down.stabilization_window_seconds
    up_rec = min([recommendation] + [r.replicas for r in recs if r.time > up_cutoff])
    down_rec = max([recommendation] + [r.replicas for r in recs if r.time > down_cutoff])
    stabilized = min(max(current, up_rec), down_rec)
    new_recs = (*recs, Recommendation(now, recommendation))
    # A raw recommendation below minReplicas is clamped in step 3: a window holding exactly the
    # minimum (or less) is not a stabilization worth reporting.
    held_by_window = stabilized > max(recommendation, policy.min_replicas) or recommendation > current
    if stabilized != recommendation and held_by_window:
        if recommendation > current:
            reason = Reason.SCALE_UP_STABILIZED
            window = policy.scale_up.stabilization_window_seconds
            message = (
                f"scale-up to {recommendation} stabilized: lowest recommendation in the last {window}s "
                f"is {stabilized} ({summary})"
            )
        else:
            reason = Reason.SCALE_DOWN_STABILIZED
            window = policy.scale_down.stabilization_window_seconds
            message = (
                f"scale-down to {max(recommendation, policy.min_replicas)} stabilized: highest "
                f"recommendation in the last {window}s "
                f"is {stabilized} ({summary})"
            )

    # 3. Rate limits and min/max (HPA's convertDesiredReplicasWithBehaviorRate). "wanted N" is the
    # stabilized count; when a window made it, say which (fresh-user trial 38 F8: "wanted 6" beside a
    # capacity count of 5 was the scale-down window's highest recommendation, unsaid).
    final = stabilized
    asked = f"{stabilized}"
    if stabilized != recommendation:
        direction, extreme, rules = (
            ("scale-up", "lowest", policy.scale_up)
            if stabilized > current
            else ("scale-down", "highest", policy.scale_down)
        )
        asked += (
            f" (the {extreme} recommendation in the {direction} window's last "
            f"{rules.stabilization_window_seconds}s; this tick's: {recommendation})"
        )
    limited: Reason | None = None
    if stabilized > current:
        up_limit = max(current, _scale_up_limit(current, events, now, policy.scale_up))
        if policy.max_replicas > up_limit:
            cap, why = up_limit, Reason.SCALE_UP_LIMIT
        else:
            cap, why = policy.max_replicas, Reason.TOO_MANY_REPLICAS
        if stabilized > cap:
            final, limited, reason = cap, why, why
            by = "the scale-up rate limit" if why is Reason.SCALE_UP_LIMIT else "maxReplicas"
            message = f"wanted {asked}, capped at {cap} by {by} ({summary})"
    elif stabilized < current:
        down_limit = min(current, _scale_down_limit(current, events, now, policy.scale_down))
        if policy.min_replicas < down_limit:
            floor, why = down_limit, Reason.SCALE_DOWN_LIMIT
        else:
            floor, why = policy.min_replicas, Reason.TOO_FEW_REPLICAS
        if stabilized < floor:
            final, limited, reason = floor, why, why
            by = "the scale-down rate limit" if why is Reason.SCALE_DOWN_LIMIT else "minReplicas"
            if why is Reason.SCALE_DOWN_LIMIT and stabilized < policy.min_replicas:
                # HPA bounds a scale-down by minReplicas and the rate limit in one step, the larger
                # winning (convertDesiredReplicasWithBehaviorRate: minimumAllowedReplicas =
                # max(MinReplicas, scaleDownLimit); kubernetes v1.34.4
                # pkg/controller/podautoscaler/horizontal.go, called from
                # normalizeDesiredReplicasWithBehaviors after stabilization): no count below
                # minReplicas is ever wanted, so say minReplicas and what the signals asked for
                # (trial 46 T8: "wanted 0, floored at 2 by the scale-down rate limit", minReplicas 1).
                asked = f"{policy.min_replicas} (minReplicas; the signals ask for {asked})"
            message = f"wanted {asked}, floored at {floor} by {by} ({summary})"

    # At minReplicas with every signal below target beyond tolerance, the floor is what holds the
    # count (whether the formula's ceil or a window would also have): say so, not "within tolerance".
    if (
        final == current == policy.min_replicas
        and desired_by_signal
        and not invalid
        and all((results[n].ratio or 0.0) < 1.0 - policy.tolerance for n in desired_by_signal if n in results)
    ):
        limited = reason = Reason.TOO_FEW_REPLICAS
        message = (
            f"holding {current} at minReplicas {policy.min_replicas}: every signal below target ({summary})"
        )

    # 4. Unschedulable pods: no more scale-up, report the limit; scale-down proceeds.
    if unschedulable and final >= current:
        wanted = final
        final, limited, reason = current, Reason.INSUFFICIENT_GPU, Reason.INSUFFICIENT_GPU
        message = (
            f"{unschedulable} pod(s) cannot be scheduled (insufficient GPU): holding {current}"
            + (f" instead of {wanted}" if wanted > current else "")
            + f" ({summary})"
        )

    # 5. Replicas without a pod yet: wait for them (and the scheduler's verdict) before adding more.
    awaiting = current - sum(1 for p in snapshot.pods if p.state != PodState.TERMINATING)
    if awaiting > 0 and final > current:
        wanted = final
        final, reason = current, Reason.AWAITING_PODS
        message = (
            f"{awaiting} of {current} replica(s) have no pod yet: holding {current} instead of {wanted} "
            f"until they are created and scheduled ({summary})"
        )

    return done(
        final,
        reason,
        message,
        recommendation=recommendation,
        desired_by_signal=desired_by_signal,
        limited=limited,
        new_recs=new_recs,
    )


def signal_status(signals: Mapping[str, float | None]) -> dict[str, float | int | None]:
    """The signal fields of ``status.autoscaling`` for a decision's ``signals``: every registry signal
    (``None`` clears one without data), rounded to its ``status_digits``, and ``<name>Percent`` where
    the registry asks for a printer column."""
    out: dict[str, float | int | None] = {}
    for s in registry.SIGNALS:
        value = signals.get(s.name)
        out[s.name] = None if value is None else round(value, s.status_digits)
        if s.status_percent:
            out[s.percent_name] = None if value is None else round(value * 100)
    return out


def record_decision(
    previous: Sequence[Mapping[str, Any]], decision: Decision, limit: int = 10
) -> list[dict[str, Any]] | None:
    """The new ``status.autoscaling.lastDecisions`` list, or None when ``decision`` adds nothing.

    Every scale is appended. A hold (no change) replaces the hold recorded before it, so the list
    keeps the scale steps, each preceded by the last reason it was held for, and a flapping hold
    reason cannot push the scale steps out of the last ``limit`` entries. A hold with the same reason
    and message as the last entry adds nothing (None); one whose message changed (other pod counts,
    other signal values) replaces it, so the newest hold never shows counts that are no longer true.
    """
    entry = decision.to_status()
    kept = [dict(e) for e in previous]
    if decision.scaled:
        return [*kept, entry][-limit:]
    last = kept[-1] if kept else None
    last_is_hold = last is not None and last.get("fromReplicas") == last.get("toReplicas")
    if (
        last is not None
        and last.get("reason") == entry["reason"]
        and (not last_is_hold or last.get("message") == entry["message"])
    ):
        return None
    if last_is_hold:
        kept = kept[:-1]
    return [*kept, entry][-limit:]


# --- from the LLMDeployment API -----------------------------------------------------------------


def scaling_rules_from_spec(rules: api.ScalingRules, default: ScalingRules) -> ScalingRules:
    """One direction of ``spec.autoscaling.behavior`` as :class:`ScalingRules`.

    Unset ``stabilizationWindowSeconds`` takes ``default``'s. ``maxReplicasPerStep`` becomes a
    ``Pods`` rate limit and ``percent`` a ``Percent`` one, both per ``periodSeconds``; with both set
    the larger change is allowed (``selectPolicy: Max``); with neither, ``default``'s limits apply.
    """
    window = rules.stabilization_window_seconds
    policies: list[RateLimit] = []
    if rules.max_replicas_per_step is not None:
        policies.append(RateLimit("Pods", rules.max_replicas_per_step, rules.period_seconds))
    if rules.percent is not None:
        policies.append(RateLimit("Percent", rules.percent, rules.period_seconds))
    return ScalingRules(
        stabilization_window_seconds=default.stabilization_window_seconds if window is None else window,
        policies=tuple(policies) or default.policies,
        select_policy="Max",
    )


def refuse_scale_to_zero(spec: api.AutoscalingSpec) -> None:
    """Raise ``ValueError`` naming the field, the value and the fix when ``spec.autoscaling``
    asks for ``minReplicas: 0``, in any mode (:data:`~trtllm_operator.api.deployment.SCALE_TO_ZERO_REFUSAL`
    says why). Admission refuses it first (the CEL rule with the same text); this catches objects
    stored before that rule existed, so neither the built-in autoscaler nor a rendered HPA or KEDA
    ScaledObject ever takes a deployment to zero replicas it cannot leave."""
    if spec.min_replicas < 1:
        raise ValueError(f"spec.autoscaling.minReplicas: {api.SCALE_TO_ZERO_REFUSAL}")


def replicas_in_range(current: int, min_replicas: int, max_replicas: int) -> int:
    """``spec.replicas`` as an autoscaler sets it before it looks at any metric: above
    ``max_replicas`` → ``max_replicas``, below ``min_replicas`` → ``min_replicas``, 0 stays 0
    (autoscaling paused). Counts of replicas in, a count out.

    The one home of this clamp: :func:`decide` applies it at the built-in autoscaler's first tick,
    and ``trtllm-operator render`` shows its result. It is also the HorizontalPodAutoscaler's (modes
    hpa, keda): kubernetes/kubernetes ``pkg/controller/podautoscaler/horizontal.go``
    ``reconcileAutoscaler`` (v1.34) — ``scale.Spec.Replicas == 0 && minReplicas != 0``: scaling
    disabled; ``currentReplicas > MaxReplicas``: "Current number of replicas above
    Spec.MaxReplicas"; ``currentReplicas < minReplicas``: "… below Spec.MinReplicas".
    """
    if current == 0:
        return 0
    return max(min_replicas, min(current, max_replicas))


def autoscaled_replicas(replicas: int, spec: api.AutoscalingSpec) -> int:
    """What an autoscaler sets an LLMDeployment's ``spec.replicas`` (``replicas``) to before it
    reads any metric, in every mode (:func:`replicas_in_range`); ``replicas`` itself when autoscaling
    is off or has no ``maxReplicas`` (then nothing scales it)."""
    if not spec.enabled or spec.max_replicas is None:
        return replicas
    return replicas_in_range(replicas, spec.min_replicas, spec.max_replicas)


def workload_replicas(replicas: int, spec: api.AutoscalingSpec) -> int:
    """The replica count the LLMDeployment controller gives the workload (Deployment /
    LeaderWorkerSet) for ``spec.replicas`` = ``replicas``.

    Under the built-in autoscaler (enabled, mode ``builtin``, a spec its policy accepts), a count
    outside ``[minReplicas, maxReplicas]`` is brought into range (:func:`autoscaled_replicas`): the
    autoscaler's next evaluation sets ``spec.replicas`` to exactly that, before reading any metric,
    as Kubernetes' HPA does with a target scaled outside its bounds (kubernetes/kubernetes
    ``pkg/controller/podautoscaler/horizontal.go`` ``reconcileAutoscaler``: "Current number of
    replicas above Spec.MaxReplicas" → ``desiredReplicas = MaxReplicas``, no metric read). Copying
    the count first started pods above ``maxReplicas`` for one evaluation (fresh-user trial 34: 1 → 5
    → 3 with ``maxReplicas`` 3). 0 stays 0 (autoscaling paused). Otherwise (autoscaling off, modes
    hpa / keda, whose HorizontalPodAutoscaler decides, or a spec the built-in refuses: nothing
    corrects the count) ``replicas`` itself."""
    if not (spec.enabled and spec.mode == "builtin"):
        return replicas
    try:
        policy_from_spec(spec)
    except ValueError:
        return replicas
    return autoscaled_replicas(replicas, spec)


def refuse_retired_targets(spec: api.AutoscalingSpec) -> None:
    """Raise ``ValueError`` naming the field, why it was removed and what replaced it when
    ``spec.autoscaling.targets`` sets a retired target (:data:`trtllm_operator.api.signals.RETIRED`).
    Admission refuses it first (the CEL rule with the same text); this catches objects stored
    before that rule, so no mode scales on a series that does not measure what it claimed."""
    retired = api.retired_targets_set(spec.targets)
    if retired:
        raise ValueError(f"spec.autoscaling.{retired[0].message}")


def policy_from_spec(spec: api.AutoscalingSpec) -> Policy:
    """The :class:`Policy` of an LLMDeployment's ``spec.autoscaling`` (built-in mode).

    Raises ``ValueError`` naming the field when the spec cannot drive the built-in autoscaler
    (``maxReplicas`` unset, no target, ``minReplicas`` 0: :func:`refuse_scale_to_zero`, a retired
    target: :func:`refuse_retired_targets`).
    """
    if spec.max_replicas is None:
        raise ValueError("spec.autoscaling.maxReplicas is required when autoscaling is enabled: set it")
    refuse_scale_to_zero(spec)
    refuse_retired_targets(spec)
    targets = api.targets_of(spec.targets, registry.SIGNALS)
    return Policy(
        min_replicas=spec.min_replicas,
        max_replicas=spec.max_replicas,
        tolerance=spec.tolerance,
        scale_up=scaling_rules_from_spec(spec.behavior.scale_up, DEFAULT_SCALE_UP),
        scale_down=scaling_rules_from_spec(spec.behavior.scale_down, DEFAULT_SCALE_DOWN),
        signal_targets=tuple((name, value) for name, value in targets.items() if value is not None),
        capacity=capacity_from_spec(spec.capacity),
    )


def capacity_from_spec(spec: api.CapacitySpec | None) -> capmod.CapacityParams | None:
    """The :class:`~trtllm_operator.decide.capacity.CapacityParams` of ``spec.autoscaling.capacity``
    (``None``: the capacity recommendation is off). ``requestsPerSecond`` is the prior κ,
    ``promptTokens`` / ``outputTokens`` / ``outputTokenWeight`` the token weighting (all three or none,
    which the API server's CEL rule checks), and the saturation threshold and correction gain keep their
    defaults."""
    if spec is None:
        return None
    weighted = (
        spec.prompt_tokens is not None
        and spec.output_tokens is not None
        and spec.output_token_weight is not None
    )
    return capmod.CapacityParams(
        target=spec.target,
        prior_rps=spec.requests_per_second,
        smoothing_s=float(spec.smoothing_seconds),
        forecast_s=float(spec.forecast_seconds),
        output_token_weight=spec.output_token_weight if weighted else None,
        prior_tokens=(float(spec.prompt_tokens or 0), float(spec.output_tokens or 0)) if weighted else None,
    )


def rules_manifest(rules: ScalingRules, tolerance: float | None = None) -> dict[str, Any]:
    """autoscaling/v2 ``HPAScalingRules`` (camelCase dict) for HPA and KEDA manifests."""
    out: dict[str, Any] = {
        "stabilizationWindowSeconds": rules.stabilization_window_seconds,
        "selectPolicy": rules.select_policy,
    }
    if rules.policies:
        out["policies"] = [
            {"type": p.type, "value": p.value, "periodSeconds": p.period_seconds} for p in rules.policies
        ]
    if tolerance is not None:
        out["tolerance"] = quantity(tolerance)
    return out


def quantity(value: float) -> str:
    """A Kubernetes quantity string in milli-units when needed: 4 → "4", 0.8 → "800m", 2.5 → "2500m"."""
    milli = round(value * 1000)
    return str(milli // 1000) if milli % 1000 == 0 else f"{milli}m"
