"""Summaries, per-interval timelines and plots of simulation runs.

:func:`summarize` returns the stable JSON keys of ``trtllm-operator simulate --output json``:
``requests``, ``dropped``, ``slo_ttft_ms``, ``slo_attainment`` (fraction of *all* requests whose
TTFT ≤ the target; dropped requests count as misses), ``ttft_p50_ms``, ``ttft_p90_ms``,
``ttft_p99_ms`` (over served requests), ``tpot_p50_ms`` (time per output token after the first,
over served requests with more than one output token), ``gpu_hours`` (GPU-seconds held by replicas,
Pending pods excluded, / 3600, in simulated time), ``scale_events`` (changes of the target replica
count), ``max_queue`` (most requests waiting at once, fleet-wide), ``duration_s``,
``mean_replicas`` and ``max_replicas``. With a warm-up (``measure_from_s`` > 0) everything counts
from that instant on.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trtllm_operator.simulate.engine import SimulationResult


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """Linear-interpolation percentile (numpy's default) of pre-sorted values; NaN when empty."""
    if not sorted_values:
        return math.nan
    pos = (len(sorted_values) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def _ms(x: float) -> float | None:
    return None if math.isnan(x) else round(x * 1000.0, 3)


def replica_time_average(result: SimulationResult) -> tuple[float, int]:
    """Time-averaged and maximum target replica count from ``measure_from_s`` to the end."""
    start = result.measure_from_s
    hist = result.replica_history
    if not hist:
        return 0.0, 0
    area = 0.0
    peak = 0
    for (t0, n, _), (t1, _, _) in zip(hist, [*hist[1:], (result.end_s, 0, 0)], strict=True):
        if t1 > start or t0 >= start:  # the segment [t0, t1) reaches into the measured window
            peak = max(peak, n)
        area += n * (max(t1, start) - max(t0, start))
    span = result.end_s - start
    return (area / span if span > 0 else float(hist[-1][1])), peak


def summarize(result: SimulationResult, slo_ttft_ms: float) -> dict[str, Any]:
    """The stable summary of one run (see the module docstring for each key).

    Only requests arriving at or after ``result.measure_from_s`` count (a warm-up before it is
    simulated but not reported).
    """
    start = result.measure_from_s
    n = 0
    dropped = 0
    ttfts: list[float] = []
    tpots: list[float] = []
    met = 0
    slo_s = slo_ttft_ms / 1000.0
    for req, first, done in zip(result.requests, result.first_token_s, result.done_s, strict=True):
        if req.arrival_s < start:
            continue
        n += 1
        if math.isnan(first):
            dropped += 1
            continue
        ttft = first - req.arrival_s
        ttfts.append(ttft)
        if ttft <= slo_s:
            met += 1
        if req.output_tokens > 1 and not math.isnan(done):
            tpots.append((done - first) / (req.output_tokens - 1))
    ttfts.sort()
    tpots.sort()
    mean_replicas, max_replicas = replica_time_average(result)
    return {
        "requests": n,
        "dropped": dropped,
        "slo_ttft_ms": slo_ttft_ms,
        "slo_attainment": round(met / n, 6) if n else None,
        "ttft_p50_ms": _ms(percentile(ttfts, 50)),
        "ttft_p90_ms": _ms(percentile(ttfts, 90)),
        "ttft_p99_ms": _ms(percentile(ttfts, 99)),
        "tpot_p50_ms": _ms(percentile(tpots, 50)),
        "gpu_hours": round(result.gpu_seconds / 3600.0, 6),
        "scale_events": result.scale_events,
        "max_queue": result.max_queue,
        "duration_s": round(result.end_s - start, 3),
        "mean_replicas": round(mean_replicas, 3),
        "max_replicas": max_replicas,
    }


@dataclass(frozen=True)
class TimelineRow:
    """One interval of a run: load, fleet and latency of the requests arriving in it."""

    start_s: float
    arrivals: int
    input_tokens: int
    output_tokens: int
    target_replicas: int
    ready_replicas: int
    max_waiting: int
    ttft_p50_ms: float | None
    ttft_p99_ms: float | None
    slo_attainment: float | None


#: The most rows :func:`timeline` returns: every row is held in memory (and written to the CSV), so an
#: interval far below the run's length (``simulate --timeline-interval-s 1e-9``) took the machine's
#: memory until MemoryError (fresh-user trial 44 F11). 100,000 rows are a day-long run at 1 s (with the
#: hour of drain after its last arrival) or a 100 s run at 1 ms; a few tens of MB.
MAX_TIMELINE_ROWS = 100_000


class TimelineTooLongError(ValueError):
    """An interval that gives a run of ``span_s`` seconds more than :data:`MAX_TIMELINE_ROWS` rows.
    ``rows``: how many it would give (``None`` when too many to count in floating point);
    ``smallest_interval_s``: the smallest interval, rounded up to two significant digits, that gives at
    most :data:`MAX_TIMELINE_ROWS`."""

    def __init__(self, span_s: float, interval_s: float) -> None:
        ratio = span_s / interval_s
        self.span_s = span_s
        self.interval_s = interval_s
        self.rows = math.ceil(ratio) if math.isfinite(ratio) else None
        exact = span_s / MAX_TIMELINE_ROWS
        scale = 10.0 ** (math.floor(math.log10(exact)) - 1)
        smallest = float(f"{math.ceil(exact / scale - 1e-9) * scale:.2g}")
        if math.ceil(span_s / smallest) > MAX_TIMELINE_ROWS:  # rounding in floating point
            smallest = float(f"{smallest + scale:.2g}")
        self.smallest_interval_s = smallest
        rows = "more than 10^308" if self.rows is None else f"{self.rows:,}"
        super().__init__(
            f"{rows} timeline rows for {span_s:g} s of simulated time, above the {MAX_TIMELINE_ROWS:,} "
            f"a timeline holds; use an interval of at least {smallest:g} s"
        )


def check_timeline_rows(span_s: float, interval_s: float) -> None:
    """Raise :class:`TimelineTooLongError` when :func:`timeline` of a run of ``span_s`` simulated
    seconds at ``interval_s`` would give more than :data:`MAX_TIMELINE_ROWS` rows (one per started
    interval from 0 to ``span_s``)."""
    if span_s / interval_s > MAX_TIMELINE_ROWS:
        raise TimelineTooLongError(span_s, interval_s)


def timeline(result: SimulationResult, slo_ttft_ms: float, interval_s: float = 60.0) -> list[TimelineRow]:
    """Per-interval rows from 0 to the end of the run (interval in simulated seconds). Raises
    :class:`ValueError` for an interval ≤ 0 and :class:`TimelineTooLongError` (a ``ValueError``) for
    one that gives more than :data:`MAX_TIMELINE_ROWS` rows, before anything is allocated."""
    if interval_s <= 0:
        raise ValueError(f"timeline interval must be > 0 s, got {interval_s}")
    check_timeline_rows(result.end_s, interval_s)
    buckets = max(1, math.ceil(result.end_s / interval_s))
    arrivals = [0] * buckets
    tin = [0] * buckets
    tout = [0] * buckets
    ttfts: list[list[float]] = [[] for _ in range(buckets)]
    missed = [0] * buckets
    for req, first in zip(result.requests, result.first_token_s, strict=True):
        b = min(buckets - 1, int(req.arrival_s / interval_s))
        arrivals[b] += 1
        tin[b] += req.input_tokens
        tout[b] += req.output_tokens
        if math.isnan(first):
            missed[b] += 1
        else:
            ttfts[b].append(first - req.arrival_s)
    target = [0] * buckets
    ready = [0] * buckets
    hist = result.replica_history
    j = 0
    last = (0, 0)
    for b in range(buckets):
        end = (b + 1) * interval_s
        while j < len(hist) and hist[j][0] < end:
            last = (hist[j][1], hist[j][2])
            j += 1
        target[b], ready[b] = last
    waiting = [0] * buckets
    for t, w in result.queue_history:
        b = min(buckets - 1, int(t / interval_s))
        waiting[b] = max(waiting[b], w)
    slo_s = slo_ttft_ms / 1000.0
    rows = []
    for b in range(buckets):
        values = sorted(ttfts[b])
        total = len(values) + missed[b]
        rows.append(
            TimelineRow(
                start_s=b * interval_s,
                arrivals=arrivals[b],
                input_tokens=tin[b],
                output_tokens=tout[b],
                target_replicas=target[b],
                ready_replicas=ready[b],
                max_waiting=waiting[b],
                ttft_p50_ms=_ms(percentile(values, 50)),
                ttft_p99_ms=_ms(percentile(values, 99)),
                slo_attainment=round(sum(1 for v in values if v <= slo_s) / total, 4) if total else None,
            )
        )
    return rows


def write_timeline_csv(rows: Sequence[TimelineRow], path: str | Path) -> None:
    """Write timeline rows as CSV with a header (empty cells for intervals without requests)."""
    fields = list(TimelineRow.__dataclass_fields__)
    with Path(path).open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(fields)
        for row in rows:
            writer.writerow(["" if getattr(row, f) is None else getattr(row, f) for f in fields])


#: The columns of ``simulate --decisions``: the fields of ``status.autoscaling.lastDecisions``.
DECISION_FIELDS = ("time_s", "from_replicas", "to_replicas", "reason", "message")


def write_decisions_csv(decisions: Sequence[tuple[float, int, int, str, str]], path: str | Path) -> None:
    """Write the operator's policy decisions (``SharedPolicy.decisions``: one tuple per tick, in
    :data:`DECISION_FIELDS` order) as CSV with a header. Raises ``OSError`` when ``path`` cannot be
    written."""
    with Path(path).open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(DECISION_FIELDS)
        writer.writerows(decisions)


def plot_runs(
    runs: Mapping[str, Sequence[TimelineRow]],
    path: str | Path,
    *,
    slo_ttft_ms: float,
    title: str = "",
) -> None:
    """PNG with three panels sharing the time axis: load (requests/s), target replicas, TTFT p99.

    ``runs`` maps a label to its timeline (same interval for all). Needs matplotlib (the
    ``trtllm-operator[sim]`` extra); uses the Agg backend, so no display is needed.
    """
    import matplotlib  # noqa: PLC0415 - optional dependency, imported only when plotting

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    fig, (ax_load, ax_rep, ax_ttft) = plt.subplots(3, 1, figsize=(10, 9), sharex=True)
    first = next(iter(runs.values()))
    interval = first[1].start_s - first[0].start_s if len(first) > 1 else 60.0
    xs = [r.start_s / 60.0 for r in first]
    ax_load.step(xs, [r.arrivals / interval for r in first], where="post", color="black")
    ax_load.set_ylabel("arrivals (requests/s)")
    for label, rows in runs.items():
        x = [r.start_s / 60.0 for r in rows]
        ax_rep.step(x, [r.target_replicas for r in rows], where="post", label=label)
        ax_ttft.plot(x, [r.ttft_p99_ms if r.ttft_p99_ms is not None else math.nan for r in rows], label=label)
    ax_rep.set_ylabel("replicas (target)")
    ax_rep.legend(loc="upper left", fontsize="small", ncol=3)
    ax_ttft.axhline(slo_ttft_ms, color="grey", linestyle="--", linewidth=1, label="TTFT SLO")
    ax_ttft.set_yscale("log")
    ax_ttft.set_ylabel("TTFT p99 (ms)")
    ax_ttft.set_xlabel("simulated time (min)")
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
