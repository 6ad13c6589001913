"""Capacity-aware recommendation: arrival rate over per-replica capacity, corrected online. Pure.

An opt-in addition to the HPA-style policy of :mod:`trtllm_operator.decide.autoscaling`
(``Policy(capacity=CapacityParams(...))``): one more recommendation, named ``capacity``, that joins
the per-signal recommendations (their maximum is taken, then the same stabilization windows, rate
limits, min/max and pod rules apply, and the decision's message says what it saw).

What it reads, per Ready pod, from the page a real Triton + TensorRT-LLM server exports
(reference ``triton-metrics-semantics.md``; :mod:`trtllm_operator.metrics.exposition`):

* ``completed`` — ``nv_inference_request_success{model="tensorrt_llm"}``, Triton core's counter of
  requests that finished successfully (core ``src/metric_model_reporter.cc``), cumulative since the
  pod started;
* ``active`` / ``max`` — ``nv_trt_llm_request_metrics{request_type="active"|"max"}``: requests the
  executor has fetched (at most ``max``) and its admission cap;

Between two ticks a pod *admitted* ``Δcompleted + Δactive`` requests (Little's law bookkeeping: what
entered its executor's active set either finished or is still active) and *completed*
``Δcompleted``. Summed over the pods measured at both ticks, and scaled by (Ready pods with data /
pods measured) — a pod that has no previous sample (just Ready, or restarted) already takes its
share of a Service's random routing — this is the fleet's arrival rate λ: exact while no pod is
saturated and the traffic is spread evenly; a saturated pod (``active / max ≥ saturated_at``) holds
further requests in the executor's queue, which no backend exports, so λ is then a lower bound.

Capacity κ (requests/s one replica completes when saturated) starts from ``prior_rps`` (the
performance model's profile, when the caller has one) and is corrected online, as Dynamo's SLA
planner corrects its profile with observed values: every saturated pod's completion rate is a
measurement of κ, and κ moves by ``correction`` of the gap to their mean. Without a prior and before any
saturation, κ is the largest ``completion rate / (active / max)`` among the pods (each pod's
throughput extrapolated to a full batch — an over-estimate, since per-request time grows with the
batch; the saturation correction brings it down).

λ is optionally smoothed (``smoothing_s``: Holt's linear method, a level and a trend with gain
``1 − exp(−Δt / τ)`` per tick), and a rising trend is projected ``forecast_s`` ahead (a pod's cold
start) so that a scale-up starts before the load arrives; a falling trend is never projected, so the
forecast only ever adds replicas. The recommendation is ``ceil(λ' / (κ × target))`` with
``λ' = (level + max(trend, 0) × forecast_s) × (1 + saturated share)``: when pods are saturated the
unseen backlog is growing, and the share of saturated pods is what is known of it. Smoothing filters
a spike on the way up, but it must not scale down in the middle of a rise (a rising rate's level
lags it: on the benchmark's tuning set that scaled a fleet down, saturated it, then over-scaled it):
the count is never below ``min(Ready pods, ceil(λ × (1 + saturated share) / (κ × target)))``,
what this tick's measured rate needs of the replicas already serving (a pod just Ready, whose page
has no samples yet, is serving too: counting only the pods with data let the lagging level scale a
serving pod away mid-rise whenever a pod had become Ready since the last scrape — issue 19). Scale-down
safety (as llm-d WVA's analyzer): the caller keeps active-request utilization as a signal, so no
count below what keeps it under its target is ever recommended.

**Token weighting** (opt-in: ``output_token_weight`` and ``prior_tokens``): a request's cost is
not one unit but ``prompt + r × output`` tokens (``r``: what one generated token costs in prompt
tokens, from the performance model), against ``prior_tokens``' cost, the lengths κ's prior holds for.
The only exported token counts are the backend's token-length histograms
(``nv_llm_input_token_len`` / ``nv_llm_output_token_len``, tensorrtllm_backend ≥ v0.16.0:
:mod:`trtllm_operator.metrics.exposition`), observed once per request at completion; so the mean cost
of the requests that finished since the last tick (over the measured pods) stands for the requests
that arrived, and λ, κ's saturated measurements and the extrapolation are all multiplied by (that
cost / the prior's): λ and κ are counted in requests *of the prior's lengths*. A tick with no finished
request keeps the last cost (the prior's before any). Without the two parameters, or on pages without
the histograms (backends before v0.16.0), the factor is 1 and nothing changes.

The memory (each pod's previous counters, κ, λ's level and trend and when they were measured) lives
in :class:`~trtllm_operator.decide.autoscaling.AutoscalerState` (``status.autoscaling.policyState``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "COUNTERS",
    "CapacityEstimate",
    "CapacityParams",
    "CapacityState",
    "PodCounters",
    "PodMemory",
    "estimate",
]

#: Names of the per-pod values the estimate reads (``PodSignals.counters``), each an exported sample.
COUNTERS = ("completed", "active", "max", "prompt_tokens", "output_tokens", "finished")


@dataclass(frozen=True)
class CapacityParams:
    """``target``: fraction of the estimated capacity to run each replica at, in (0, 1];
    ``prior_rps``: requests/s a saturated replica completes, from a profile (``None``: learn it);
    ``saturated_at``: active / max at or above which a pod counts as saturated;
    ``correction``: gain of the online correction of κ towards saturated pods' rates, in (0, 1];
    ``smoothing_s``: time constant of the arrival rate's level and trend (Holt's linear smoothing;
    0: the level is the last tick's rate and the trend is off);
    ``forecast_s``: how far ahead the rising trend is projected for a scale-up (typically the pods'
    cold start; 0: no forecast). A falling trend is never projected: the forecast only adds.
    ``output_token_weight`` (``r``) and ``prior_tokens`` (mean prompt and output tokens per request
    that κ's prior holds for): token weighting (the module's docstring), on when both are set.
    """

    target: float = 0.8
    prior_rps: float | None = None
    saturated_at: float = 0.95
    correction: float = 0.5
    smoothing_s: float = 0.0
    forecast_s: float = 0.0
    output_token_weight: float | None = None
    prior_tokens: tuple[float, float] | None = None

    @property
    def reference_cost(self) -> float | None:
        """The cost of a request of ``prior_tokens``' lengths, ``prompt + r × output`` tokens
        (``None``: token weighting off)."""
        if self.output_token_weight is None or self.prior_tokens is None:
            return None
        prompt, output = self.prior_tokens
        return prompt + self.output_token_weight * output

    def __post_init__(self) -> None:
        if not 0 < self.target <= 1:
            raise ValueError(f"capacity target {self.target}: must be a fraction in (0, 1], e.g. 0.8")
        if self.prior_rps is not None and not (self.prior_rps > 0 and math.isfinite(self.prior_rps)):
            raise ValueError(f"capacity prior {self.prior_rps}: must be > 0 requests/s, or unset")
        if not 0 < self.saturated_at <= 1:
            raise ValueError(f"saturated_at {self.saturated_at}: must be in (0, 1], e.g. 0.95")
        if not 0 < self.correction <= 1:
            raise ValueError(f"capacity correction {self.correction}: must be in (0, 1], e.g. 0.5")
        if not (self.smoothing_s >= 0 and math.isfinite(self.smoothing_s)):
            raise ValueError(f"capacity smoothing {self.smoothing_s} s: must be ≥ 0 seconds, e.g. 60")
        if not (self.forecast_s >= 0 and math.isfinite(self.forecast_s)):
            raise ValueError(f"capacity forecast {self.forecast_s} s: must be ≥ 0 seconds, e.g. 60")
        if (self.output_token_weight is None) != (self.prior_tokens is None):
            raise ValueError(
                "capacity token weighting needs both the output token weight and the prior's mean "
                "prompt and output tokens (or neither)"
            )
        if self.output_token_weight is not None and not (
            self.output_token_weight >= 0 and math.isfinite(self.output_token_weight)
        ):
            raise ValueError(f"output token weight {self.output_token_weight}: must be ≥ 0, e.g. 2")
        if self.prior_tokens is not None and not (
            all(t >= 0 and math.isfinite(t) for t in self.prior_tokens) and (self.reference_cost or 0) > 0
        ):
            raise ValueError(f"prior tokens {self.prior_tokens}: must be ≥ 0 (prompt, output), not both 0")
        if self.forecast_s > 0 and self.smoothing_s <= 0:
            raise ValueError(
                f"capacity forecast {self.forecast_s:g} s with smoothing 0: the forecast projects the "
                "smoothed trend, and without smoothing there is none; set a smoothing time or forecast 0"
            )


@dataclass(frozen=True)
class PodCounters:
    """One Ready pod's exported values (``None`` when its page lacks the sample)."""

    name: str
    completed: float | None
    active: float | None
    max: float | None
    prompt_tokens: float | None = None
    output_tokens: float | None = None
    finished: float | None = None

    @classmethod
    def of(cls, name: str, counters: Mapping[str, float | None]) -> PodCounters:
        """From ``PodSignals.counters`` (keys :data:`COUNTERS`)."""
        return cls(
            name,
            counters.get("completed"),
            counters.get("active"),
            counters.get("max"),
            counters.get("prompt_tokens"),
            counters.get("output_tokens"),
            counters.get("finished"),
        )

    def tokens(self) -> tuple[float, float, float] | None:
        """``(prompt tokens, output tokens, finished requests)`` when the page has all three."""
        if self.prompt_tokens is None or self.output_tokens is None or self.finished is None:
            return None
        return self.prompt_tokens, self.output_tokens, self.finished


@dataclass(frozen=True)
class PodMemory:
    """What the previous tick saw of a pod: when (the tick's time), its completed counter and active
    gauge, and with token weighting its token histograms' prompt and output sums and count."""

    name: str
    time: float
    completed: float
    active: float
    tokens: tuple[float, float, float] | None = None


@dataclass(frozen=True)
class CapacityState:
    """Memory between ticks: ``pods`` (previous counters), ``capacity_rps`` (κ, ``None`` until known),
    ``arrival_rps`` (the arrival rate's level λ, ``None`` until two samples of some pod), ``trend_rps``
    (its smoothed change, requests/s per second; 0 without smoothing), ``time`` (when λ was
    last measured) and ``prior_rps`` (the prior κ started from: when the parameters' prior differs —
    the user edited ``requestsPerSecond`` — κ starts again from the new one)."""

    pods: tuple[PodMemory, ...] = ()
    capacity_rps: float | None = None
    arrival_rps: float | None = None
    trend_rps: float = 0.0
    time: float | None = None
    prior_rps: float | None = None
    cost_tokens: float | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON form: ``{"pods": [[name, t, completed, active], ...], "capacityRps", "arrivalRps",
        "trendRps", "time", "priorRps"}``; with token weighting a pod's entry ends with its prompt and
        output token sums and finished count, and ``"costTokens"`` is the last measured mean cost."""
        out = {
            "pods": [[p.name, round(p.time, 3), p.completed, p.active, *(p.tokens or ())] for p in self.pods],
            "capacityRps": None if self.capacity_rps is None else round(self.capacity_rps, 6),
            "arrivalRps": None if self.arrival_rps is None else round(self.arrival_rps, 6),
            "trendRps": round(self.trend_rps, 6),
            "time": None if self.time is None else round(self.time, 3),
            "priorRps": self.prior_rps,
        }
        if self.cost_tokens is not None:
            out["costTokens"] = round(self.cost_tokens, 6)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> CapacityState:
        """Inverse of :meth:`to_dict` (a document without ``trendRps`` / ``time``, as earlier releases
        wrote, reads as no trend). Raises ``ValueError`` on a malformed document."""
        if not data:
            return cls()
        try:
            pods = tuple(_pod_memory(entry) for entry in data.get("pods", []))
            cap, arr, when = data.get("capacityRps"), data.get("arrivalRps"), data.get("time")
            prior, cost = data.get("priorRps"), data.get("costTokens")
            return cls(
                pods,
                None if cap is None else float(cap),
                None if arr is None else float(arr),
                float(data.get("trendRps") or 0.0),
                None if when is None else float(when),
                None if prior is None else float(prior),
                None if cost is None else float(cost),
            )
        except (TypeError, ValueError) as exc:
            raise ValueError(f"capacity state is malformed ({exc}); expected {cls().to_dict()}") from exc


def _pod_memory(entry: Sequence[Any]) -> PodMemory:
    """One pod of :meth:`CapacityState.to_dict`'s list: 4 values, or 7 with token weighting."""
    if len(entry) not in (4, 7):
        raise ValueError(f"a pod's memory has 4 or 7 values, not {len(entry)}")
    name, t, completed, active, *tokens = entry
    prompt_output_finished = (float(tokens[0]), float(tokens[1]), float(tokens[2])) if tokens else None
    return PodMemory(str(name), float(t), float(completed), float(active), prompt_output_finished)


@dataclass(frozen=True)
class CapacityEstimate:
    """One tick's estimate. ``arrival_rps``: this tick's measured λ; ``level_rps`` / ``forecast_rps``:
    its smoothed level and the level plus the rising trend over ``forecast_s`` (what the count is
    sized for); ``desired``: replicas for it at the target (``None``: no rate known yet); ``held``:
    whether this tick's measured rate kept ``desired`` up (no scale-down in the middle of a rise).
    ``sized_replicas`` / ``now_replicas``: the unrounded counts, forecast (resp. this tick's rate) ×
    (1 + saturated / measured) / (κ × target), whose ceilings (at least 1; the second at most
    ``ready``, the Ready pods) ``desired`` is the larger of; ``None`` when ``desired`` is.
    With token weighting: ``cost_tokens`` (the mean cost of the requests the rate was weighted by),
    ``reference_tokens`` (the prior's), ``cost_measured`` (whether ``cost_tokens`` was measured this
    tick) and ``requests_rps`` (λ in plain requests; ``arrival_rps`` is in requests of the prior's
    lengths)."""

    arrival_rps: float | None
    capacity_rps: float | None
    saturated: int
    measured: int
    desired: int | None
    state: CapacityState
    level_rps: float | None = None
    forecast_rps: float | None = None
    held: bool = False
    sized_replicas: float | None = None
    now_replicas: float | None = None
    ready: int = 0
    cost_tokens: float | None = None
    reference_tokens: float | None = None
    cost_measured: bool = False
    requests_rps: float | None = None

    @property
    def cost_ratio(self) -> float:
        """What the request rates were multiplied by: cost / the prior's cost (1 without weighting)."""
        if self.cost_tokens is None or not self.reference_tokens:
            return 1.0
        return self.cost_tokens / self.reference_tokens

    def summary(self, target: float) -> str:
        """For the decision's message: every number the count is computed from."""
        if not self.state.pods:
            return (
                "capacity: no Ready pod's page has the samples it reads ("
                'nv_inference_request_success{model="tensorrt_llm"}, nv_trt_llm_request_metrics '
                "active and max): no request rate"
            )
        if self.arrival_rps is None or self.capacity_rps is None:
            return "capacity: no request rate yet (needs two samples of a pod's counters)"
        rate = self.level_rps
        sized = ""
        if (
            self.forecast_rps is not None
            and self.level_rps is not None
            and self.forecast_rps > self.level_rps
        ):
            sized = f", rising: forecast {self.forecast_rps:.3g}/s"
            rate = self.forecast_rps
        elif self.level_rps is not None and self.level_rps != self.arrival_rps:
            sized = f", smoothed {self.level_rps:.3g}/s"
        boost = ""
        if self.saturated and self.measured:
            # the hidden backlog of saturated pods (the module's docstring): the rate is scaled up
            boost = f" (rate × {1 + self.saturated / self.measured:.3g}: their backlog is not exported)"
        pods = len(self.state.pods)
        over = (
            f"over {self.measured} pod(s)"
            if self.measured == pods
            else f"over {pods} pods ({self.measured} measured at both samples, scaled to all)"
        )
        if self.cost_tokens is not None and self.reference_tokens and self.requests_rps is not None:
            since = "finished since the last evaluation" if self.cost_measured else "last measured"
            over += (
                f" (token-weighted: {self.requests_rps:.3g} requests/s × {self.cost_ratio:.3g}, their mean "
                f"cost {self.cost_tokens:.4g} tokens ({since}) over {self.reference_tokens:.4g} for "
                "promptTokens / outputTokens)"
            )
        elif self.reference_tokens:  # weighting on, no length measured yet (fresh-user trial 51 Y2)
            over += (
                " (token weighting: no request's token lengths measured yet — no finished request, or "
                "pages without nv_llm_input_token_len / nv_llm_output_token_len (TensorRT-LLM backend "
                "v0.16.0+) — so each request counts as one of promptTokens / outputTokens)"
            )
        # The count with its quotient, both recomputable from what is printed (fresh-user trials 37b
        # F5 and 38 F8: _quotient).
        count = ""
        if self.desired is not None and self.sized_replicas is not None and rate is not None:
            capacity = self.capacity_rps

            def quotient(of: float, exact: float) -> str:
                return _quotient(
                    of,
                    saturated=self.saturated,
                    measured=self.measured,
                    capacity=capacity,
                    target=target,
                    exact=exact,
                )

            sized_count = max(1, math.ceil(self.sized_replicas))
            shown = quotient(rate, self.sized_replicas)
            count = f": {shown} → {sized_count}"
            if self.held and self.now_replicas is not None:
                now = quotient(self.arrival_rps, self.now_replicas)
                count += (
                    f", held at {self.desired}: this tick's rate needs them (no scale-down mid-rise): "
                    f"min({self.ready} Ready pods, ceil({now})) → {self.desired}"
                )
        return (
            f"capacity: arrivals {self.arrival_rps:.3g}/s {over}{sized}, "
            f"{self.saturated} saturated{boost}, capacity {self.capacity_rps:.3g}/s per replica "
            f"(target {target:g}){count}"
        )


def _quotient(
    rate: float, *, saturated: int, measured: int, capacity: float, target: float, exact: float
) -> str:
    """``A[ × (1 + s/m)] / (B × C) = Q`` for a count whose unrounded value is ``exact`` (its ceiling the
    count): the operands with the fewest significant figures (6 to 17) from which the quotient,
    computed from the printed values as :func:`estimate` computes it, has ``exact``'s ceiling, and
    that quotient to as many decimals as its ceiling needs (:func:`_ceiling_digits`). So the line
    recomputes by hand: with ``.6g`` operands 54.400002 read 54.4, and 54.4 / (8.5 × 0.8) = 8, yet the
    count was 9 (fresh-user trial 38 F8); 17 figures give the floats themselves."""
    factor = f" × (1 + {saturated}/{measured})" if saturated and measured else ""
    boost = 1.0 + saturated / measured if saturated and measured else 1.0
    for figures in range(6, 18):
        a, b, c = (f"{v:.{figures}g}" for v in (rate, capacity, target))
        shown = round(float(a) * (boost / (float(b) * float(c))), 9)
        if math.ceil(shown) == math.ceil(exact):
            break
    return f"{a}{factor} / ({b} × {c}) = {_ceiling_digits(shown)}"


def _ceiling_digits(value: float) -> str:
    """``value`` with the fewest decimals (3 to 9, trailing zeros dropped) whose ceiling is
    ``value``'s: 8.0049 → ``8.005``, 8.000001 → ``8.000001``, 8.0 → ``8``. ``value`` is rounded to 9
    decimals already, as :func:`estimate` rounds it before taking the ceiling."""
    for decimals in range(3, 10):
        shown = f"{value:.{decimals}f}"
        if math.ceil(float(shown)) == math.ceil(value):
            break
    return shown.rstrip("0").rstrip(".") if "." in shown else shown


def estimate(
    pods: Sequence[PodCounters], state: CapacityState, params: CapacityParams, now: float
) -> CapacityEstimate:
    """λ, κ and the replicas they need, from the Ready pods' counters and the previous tick's memory.

    A pod whose counter went down (restarted) or that has no previous sample is only remembered.
    """
    previous = {p.name: p for p in state.pods}
    reference = params.reference_cost
    memory: list[PodMemory] = []
    arrivals = 0.0
    measured = saturated = 0
    saturated_rates: list[float] = []
    extrapolated = 0.0
    cost_sum = finished_sum = 0.0
    for pod in pods:
        if pod.completed is None or pod.active is None or not pod.max:
            continue
        t = now
        tokens = pod.tokens() if reference is not None else None
        memory.append(PodMemory(pod.name, t, pod.completed, pod.active, tokens))
        utilization = min(max(pod.active / pod.max, 0.0), 1.0)
        before = previous.get(pod.name)
        if before is None or t <= before.time or pod.completed < before.completed:
            continue
        span = t - before.time
        done = (pod.completed - before.completed) / span
        arrivals += max(0.0, done + (pod.active - before.active) / span)
        measured += 1
        if tokens is not None and before.tokens is not None and params.output_token_weight is not None:
            prompt, output, finished = (now_ - then for now_, then in zip(tokens, before.tokens, strict=True))
            if finished > 0 and prompt >= 0 and output >= 0:
                cost_sum += prompt + params.output_token_weight * output
                finished_sum += finished
        was = min(max(before.active / pod.max, 0.0), 1.0)
        if utilization >= params.saturated_at:
            saturated += 1
            if was >= params.saturated_at:
                saturated_rates.append(done)
        elif utilization > 0:
            extrapolated = max(extrapolated, done / max(utilization, was, 1e-9))
    # Token weighting (the module's docstring): every request rate below is counted in requests of
    # the prior's lengths, scaled by the mean cost of the requests finished since the last tick.
    # ``cost``: measured now, else the last measured; None before any (pages without the token-length
    # histograms, or nothing finished yet), when every request counts as one of the prior's lengths.
    cost: float | None = None
    if reference is not None:
        cost = cost_sum / finished_sum if finished_sum > 0 else state.cost_tokens
    ratio = cost / reference if cost is not None and reference else 1.0
    # κ learned online belongs to the prior it started from: a new prior (an edited
    # requestsPerSecond, or one set or unset) starts it again, so the edit takes effect.
    learned = state.capacity_rps if state.prior_rps == params.prior_rps else None
    capacity = learned if learned is not None else params.prior_rps
    if capacity is None and extrapolated > 0:
        capacity = extrapolated * ratio
    if capacity is not None and saturated_rates:
        mean = sum(saturated_rates) / len(saturated_rates) * ratio
        capacity += params.correction * (mean - capacity)
    # A pod with data but no previous sample (just Ready, or restarted) already takes traffic that
    # the sum misses: with a Service's random routing its share is the measured pods' mean.
    with_data = len(memory)
    requests = arrivals * with_data / measured if measured else None
    arrival = None if requests is None else requests * ratio
    level, trend, when = state.arrival_rps, state.trend_rps, state.time
    if arrival is not None:
        level, trend = _smooth(arrival, state, params, now)
        when = now
    forecast = None if level is None else level + max(0.0, trend) * params.forecast_s
    desired: int | None = None
    held = False
    sized_q: float | None = None
    now_q: float | None = None
    if arrival is not None and forecast is not None and capacity is not None and capacity > 0:
        boost = (1.0 + saturated / measured) / (capacity * params.target)
        sized_q, now_q = round(forecast * boost, 9), round(arrival * boost, 9)
        desired = max(1, math.ceil(sized_q))
        # No scale-down below what this tick's measured rate needs (the module's docstring).
        needed_now = min(len(pods), max(1, math.ceil(now_q)))  # the Ready pods, with data or not
        held = needed_now > desired
        desired = max(desired, needed_now)
    new_state = CapacityState(tuple(memory), capacity, level, trend, when, params.prior_rps, cost)
    return CapacityEstimate(
        arrival,
        capacity,
        saturated,
        measured,
        desired,
        new_state,
        level,
        forecast,
        held,
        sized_q,
        now_q,
        len(pods),
        cost,
        reference,
        finished_sum > 0,
        requests,
    )


def _smooth(arrival: float, state: CapacityState, params: CapacityParams, now: float) -> tuple[float, float]:
    """Holt's linear smoothing of the arrival rate (level, trend) with gain ``1 − exp(−Δt / τ)``
    per tick, ``τ`` = ``smoothing_s``. Without smoothing, or without a previous level, the level is
    this tick's rate and the trend 0."""
    if params.smoothing_s <= 0 or state.arrival_rps is None or state.time is None or now <= state.time:
        return arrival, 0.0
    span = now - state.time
    gain = 1.0 - math.exp(-span / params.smoothing_s)
    predicted = state.arrival_rps + state.trend_rps * span
    level = max(0.0, predicted + gain * (arrival - predicted))
    trend = state.trend_rps + gain * ((level - state.arrival_rps) / span - state.trend_rps)
    return level, trend
