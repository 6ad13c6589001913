"""The autoscaling signal registry: one :class:`Signal` record per signal, read by every consumer.

A signal is named once here, and everything that names it iterates :data:`SIGNALS`:

* the API — ``spec.autoscaling.targets.<name>`` and ``status.autoscaling.<name>`` (pydantic models
  built from the registry in :mod:`trtllm_operator.api.deployment`), the CEL rules that need a target
  when autoscaling is on and that refuse a signal in a mode that cannot render it;
* the built-in policy (:class:`trtllm_operator.decide.autoscaling.Policy` targets,
  :class:`~trtllm_operator.decide.autoscaling.PodSignals` values) and the status the autoscaler
  writes (:mod:`trtllm_operator.decide.autoscaler`);
* the Prometheus recording rules and the ``mode: hpa`` / ``mode: keda`` renderers (the record, the
  prometheus-adapter metric and the KEDA trigger are named after :attr:`Signal.series`);
* the signal table of ``docs/autoscaling.md`` (:func:`docs_table`; a unit test fails when it is stale).

How a signal is *measured* is the one thing not here, because it is not a wire fact: the formula on a
Triton ``/metrics`` page (:mod:`trtllm_operator.metrics.signals`) and its PromQL
(:mod:`trtllm_operator.metrics.prometheus`), each a table keyed by :attr:`Signal.name` that a unit test
checks against this registry. A new signal is therefore one entry here plus its two formulas.

Every mode renders every signal unless the entry lists the mode in :attr:`Signal.refused_modes`;
admission then refuses ``targets.<name>`` in that mode (:func:`mode_refusal_rules`), and the
renderer refuses it too (for objects stored before the rule).

Pure data: imports nothing of the operator, so every layer can read it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Literal

__all__ = [
    "ACTIVE_REQUEST_UTILIZATION",
    "EXTERNAL_MODES",
    "KV_CACHE_UTILIZATION",
    "RETIRED",
    "SIGNALS",
    "ExternalMode",
    "RetiredSignal",
    "Signal",
    "adapter_rules",
    "docs_table",
    "names",
    "snake",
]

#: The modes in which something other than the operator's own policy scales (it renders an object).
ExternalMode = Literal["hpa", "keda"]
EXTERNAL_MODES: tuple[ExternalMode, ...] = ("hpa", "keda")


def snake(camel: str) -> str:
    """``kvCacheUtilization`` → ``kv_cache_utilization`` (the pydantic attribute of a field)."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", camel).lower()


@dataclass(frozen=True)
class Signal:
    """One autoscaling signal.

    ``name``: the camelCase key of ``spec.autoscaling.targets``, ``status.autoscaling`` and
    ``lastDecisions[].signals``. ``title``: what the docs call it. ``fraction``: the target is a
    fraction in (0, 1] (otherwise any value > 0); ``example``: the value the fraction rule's message
    suggests. ``recommended``: the target the docs recommend (and the simulator's ``builtin`` uses);
    ``policy_default``: the target of a ``Policy()`` built without it (``None``: off).
    ``target_description`` / ``status_description``: the CRD texts. ``status_digits``: decimals kept in
    ``status.autoscaling``; ``status_percent``: also write ``<name>Percent`` (× 100, a printer column).
    ``value_max``: a measured value is clamped to [0, value_max] (``None``: [0, ∞)).
    ``series``: the Prometheus name: recording rule ``namespace_pod:<series>:<record_op>``, the
    prometheus-adapter Pods metric ``<series>`` (``mode: hpa``) and, without the ``trtllm_`` prefix and
    with dashes, the KEDA trigger name. ``refused_modes``: external modes that cannot render this signal,
    each with why (admission names it).
    """

    name: str
    title: str
    fraction: bool
    example: float
    recommended: float
    policy_default: float | None
    target_description: str
    status_description: str
    status_digits: int
    series: str
    record_op: str
    status_percent: bool = False
    value_max: float | None = None
    refused_modes: Mapping[ExternalMode, str] = field(default_factory=dict)

    @property
    def attr(self) -> str:
        """The snake_case attribute of the API models and of ``Policy``."""
        return snake(self.name)

    @property
    def record(self) -> str:
        """The recording rule (Prometheus ``level:metric:operations`` convention)."""
        return f"namespace_pod:{self.series}:{self.record_op}"

    @property
    def adapter_metric(self) -> str:
        """The Pods metric prometheus-adapter serves from :attr:`record` (``mode: hpa``)."""
        return self.series

    @property
    def keda_trigger(self) -> str:
        """The name of this signal's KEDA trigger (``mode: keda``)."""
        return self.series.removeprefix("trtllm_").replace("_", "-")

    @property
    def percent_name(self) -> str:
        """The status field of the × 100 printer column (when :attr:`status_percent`)."""
        return f"{self.name}Percent"

    def rendered_in(self, mode: str) -> bool:
        """Whether ``mode`` (builtin, hpa, keda) can scale on this signal."""
        return mode not in self.refused_modes

    def clamp(self, value: float | None) -> float | None:
        """A measured value within [0, :attr:`value_max`]; ``None`` stays ``None`` (missing)."""
        if value is None:
            return None
        value = max(value, 0.0)
        return value if self.value_max is None else min(value, self.value_max)

    def target_bounds(self) -> str:
        """The allowed targets, as the messages say them."""
        return "a fraction in (0, 1]" if self.fraction else "> 0"


ACTIVE_REQUEST_UTILIZATION = "activeRequestUtilization"
KV_CACHE_UTILIZATION = "kvCacheUtilization"

#: Every signal, in the order the API, the status and the renderers list them. Each measures what the
#: real server exports (reference ``triton-metrics-semantics.md``; tensorrtllm_backend v0.19.0
#: ``inflight_batcher_llm/src/model_instance_state.cc`` ``WaitForStats()``).
SIGNALS: tuple[Signal, ...] = (
    Signal(
        name=ACTIVE_REQUEST_UTILIZATION,
        title="active-request utilization (admission saturation)",
        fraction=True,
        example=0.5,
        recommended=0.5,
        policy_default=0.5,
        target_description="Target active-request utilization per replica, in (0, 1]: active / max "
        'requests (nv_trt_llm_request_metrics{request_type="active"} / {request_type="max"}, max = the '
        "executor's maxNumActiveRequests = max batch size × pipeline parallelism). 1 means saturated: "
        "the executor admits no more and further requests wait in its queue, which Triton does not "
        "export.",
        status_description="Active-request utilization, active / max requests, averaged over ready "
        "replicas (0-1; 1 = saturated, requests beyond it wait unseen).",
        status_digits=4,
        status_percent=True,
        value_max=1.0,
        series="trtllm_active_request_utilization",
        record_op="ratio",
    ),
    Signal(
        name=KV_CACHE_UTILIZATION,
        title="KV-cache utilization",
        fraction=True,
        example=0.8,
        recommended=0.8,
        policy_default=0.8,
        target_description="Target KV-cache utilization (used / max blocks, "
        "nv_trt_llm_kv_cache_block_metrics) per replica, in (0, 1].",
        status_description="KV-cache utilization averaged over ready replicas, normally 0-1 (not bounded "
        "here: a status write must never fail on a metric glitch).",
        status_digits=4,
        status_percent=True,
        value_max=1.0,
        series="trtllm_kv_cache_utilization",
        record_op="ratio",
    ),
)


@dataclass(frozen=True)
class RetiredSignal:
    """A target the API once had and now refuses: ``name`` (the ``targets.<name>`` key), the signal
    that replaced it, and why it did not measure what it claimed. Admission refuses the field with
    :attr:`message`; the operator refuses it in objects stored before that rule."""

    name: str
    replaced_by: str
    why: str

    @property
    def attr(self) -> str:
        """The snake_case attribute of the API model."""
        return snake(self.name)

    @property
    def message(self) -> str:
        """The refusal, naming the field, why and the fix."""
        return f"targets.{self.name} was removed: {self.why}; set targets.{self.replaced_by} instead"


#: Targets that were removed because their series do not measure what the name claimed (upstream
#: audit B1–B3). Refused, not aliased: their meaning changed, so a silent alias would change scaling.
RETIRED: tuple[RetiredSignal, ...] = (
    RetiredSignal(
        name="queueDepthPerReplica",
        replaced_by=ACTIVE_REQUEST_UTILIZATION,
        why='nv_trt_llm_request_metrics{request_type="waiting"} is active − scheduled requests (admitted '
        "but not in this iteration's batch), not a backlog, the executor's queue is not exported, and "
        "Triton's pending count stays 0 for tensorrt_llm (tensorrtllm_backend model_instance_state.cc)",
    ),
    RetiredSignal(
        name="batchUtilization",
        replaced_by=ACTIVE_REQUEST_UTILIZATION,
        why="(active + waiting) / max counted waiting twice (waiting is a subset of active); "
        "active / max is the saturation it meant",
    ),
)


def names(signals: Iterable[Signal] | None = None) -> tuple[str, ...]:
    """The signal names of ``signals`` (default: :data:`SIGNALS`), in order."""
    return tuple(s.name for s in (SIGNALS if signals is None else signals))


def _modes(signal: Signal) -> str:
    return ", ".join(m for m in ("builtin", *EXTERNAL_MODES) if signal.rendered_in(m))


def docs_table(signals: Iterable[Signal] | None = None) -> str:
    """The Markdown table of ``docs/autoscaling.md`` (between the ``signal registry`` markers)."""
    rows = [
        "| target (`spec.autoscaling.targets.`) | signal | bounds | recommended | modes "
        "| recording rule | HPA metric (prometheus-adapter) | KEDA trigger |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for s in SIGNALS if signals is None else signals:
        hpa = f"`{s.adapter_metric}`" if s.rendered_in("hpa") else "— (refused)"
        keda = f"`{s.keda_trigger}`" if s.rendered_in("keda") else "— (refused)"
        rows.append(
            f"| `{s.name}` | {s.title} | {s.target_bounds()} | {s.recommended:g} | {_modes(s)} "
            f"| `{s.record}` | {hpa} | {keda} |"
        )
    return "\n".join(rows) + "\n"


def adapter_rules(signals: Iterable[Signal] | None = None) -> str:
    """prometheus-adapter's ``rules.custom`` (YAML) serving each HPA-rendered signal's recording rule
    as the Pods metric ``mode: hpa`` asks for (prometheus-adapter ``docs/config.md``: ``seriesQuery``,
    ``resources.overrides``, ``name.as``, ``metricsQuery``)."""
    lines = ["rules:", "  custom:"]
    for s in SIGNALS if signals is None else signals:
        if not s.rendered_in("hpa"):
            continue
        lines += [
            f'  - seriesQuery: \'{s.record}{{namespace!="",pod!=""}}\'',
            "    resources: {overrides: {namespace: {resource: namespace}, pod: {resource: pod}}}",
            f'    name: {{matches: ".*", as: "{s.adapter_metric}"}}',
            "    metricsQuery: 'max(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)'",
        ]
    return "\n".join(lines) + "\n"
