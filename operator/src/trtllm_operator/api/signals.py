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
    "BATCH_UTILIZATION",
    "EXTERNAL_MODES",
    "KV_CACHE_UTILIZATION",
    "QUEUE_DEPTH_PER_REPLICA",
    "SIGNALS",
    "ExternalMode",
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
    """``queueDepthPerReplica`` → ``queue_depth_per_replica`` (the pydantic attribute of a field)."""
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


QUEUE_DEPTH_PER_REPLICA = "queueDepthPerReplica"
KV_CACHE_UTILIZATION = "kvCacheUtilization"
BATCH_UTILIZATION = "batchUtilization"

#: Every signal, in the order the API, the status and the renderers list them.
SIGNALS: tuple[Signal, ...] = (
    Signal(
        name=QUEUE_DEPTH_PER_REPLICA,
        title="queue depth",
        fraction=False,
        example=4.0,
        recommended=4.0,
        policy_default=4.0,
        target_description="Target waiting requests per ready replica "
        '(nv_trt_llm_request_metrics{request_type="waiting"}).',
        status_description="Waiting requests per ready replica.",
        status_digits=3,
        series="trtllm_queue_depth",
        record_op="sum",
    ),
    Signal(
        name=KV_CACHE_UTILIZATION,
        title="KV-cache utilization",
        fraction=True,
        example=0.8,
        recommended=0.8,
        policy_default=0.8,
        target_description="Target KV-cache utilization (used / max blocks) per replica, in (0, 1].",
        status_description="KV-cache utilization averaged over ready replicas, normally 0-1 (not bounded "
        "here: a status write must never fail on a metric glitch).",
        status_digits=4,
        status_percent=True,
        value_max=1.0,
        series="trtllm_kv_cache_utilization",
        record_op="ratio",
    ),
    Signal(
        name=BATCH_UTILIZATION,
        title="inflight-batch utilization",
        fraction=True,
        example=0.5,
        recommended=0.5,
        policy_default=None,
        target_description="Target inflight-batch utilization per replica, in (0, 1]: (active + waiting "
        'requests) / max requests (nv_trt_llm_request_metrics{request_type="active"|"waiting"|"max"}); '
        "above 1 when requests wait. Recommended 0.5 (docs/autoscaling.md).",
        status_description="Inflight-batch utilization, (active + waiting) / max requests, averaged over "
        "ready replicas (above 1 when requests wait).",
        status_digits=4,
        series="trtllm_batch_utilization",
        record_op="ratio",
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
