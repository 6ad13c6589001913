"""Signal source ``pods``: scrape each Ready serving pod's Triton metrics port directly.

How a pod counts (:func:`pod_state`, the policy's :class:`~trtllm_operator.decide.autoscaling.PodState`):

* ``metadata.deletionTimestamp`` set, or phase ``Succeeded``/``Failed`` → TERMINATING (ignored);
* phase ``Pending`` with condition ``PodScheduled=False``, reason ``Unschedulable`` → UNSCHEDULABLE
  (the scheduler found no node with a free GPU: not capacity, blocks further scale-up);
* condition ``Ready=True`` → READY (scraped);
* anything else (scheduled, image pull, engine load) → STARTING.

Each READY pod with a ``status.podIP`` is fetched at ``http://<podIP>:<port>/metrics`` (default
port 8002) with a timeout, in parallel. A pod whose fetch fails (refused, timeout, non-200, a page
that does not parse) or whose page lacks a family reports that signal as missing (``None``): the
policy then holds replicas instead of scaling down on no data. A live scrape is never stale; there
is no cache.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from trtllm_operator.decide.autoscaling import PodSignals, PodState
from trtllm_operator.metrics.http import bounded_get
from trtllm_operator.metrics.signals import DEFAULT_MODEL, MetricsParseError, TritonSignals, signals_from_text

__all__ = [
    "DEFAULT_PORT",
    "DEFAULT_TIMEOUT_SECONDS",
    "fetch_metrics",
    "pod_state",
    "scrape_pods",
    "scrape_triton",
]

log = logging.getLogger(__name__)

DEFAULT_PORT = 8002
DEFAULT_TIMEOUT_SECONDS = 2.0
#: Parallel fetches at most (a fleet of hundreds of pods is scraped in batches of this size).
MAX_WORKERS = 16

Fetch = Callable[[str, float], str]


def _condition(pod: Mapping[str, Any], type_: str) -> Mapping[str, Any] | None:
    for cond in (pod.get("status") or {}).get("conditions") or []:
        if cond.get("type") == type_:
            return dict(cond)
    return None


def pod_state(pod: Mapping[str, Any]) -> PodState:
    """How a pod (a manifest dict as the API server returns it) counts towards capacity."""
    meta = pod.get("metadata") or {}
    status = pod.get("status") or {}
    phase = status.get("phase")
    if meta.get("deletionTimestamp") or phase in ("Succeeded", "Failed"):
        return PodState.TERMINATING
    scheduled = _condition(pod, "PodScheduled")
    if (
        phase == "Pending"
        and scheduled is not None
        and scheduled.get("status") == "False"
        and scheduled.get("reason") == "Unschedulable"
    ):
        return PodState.UNSCHEDULABLE
    ready = _condition(pod, "Ready")
    if phase == "Running" and ready is not None and ready.get("status") == "True":
        return PodState.READY
    return PodState.STARTING


def fetch_metrics(url: str, timeout: float) -> str:
    """GET ``url`` and return the body: bounded in size and time, no redirects
    (:func:`~trtllm_operator.metrics.http.bounded_get`). Raises ``OSError`` on failure."""
    return bounded_get(url, timeout).decode("utf-8", errors="replace")


def _scrape_one(url: str, timeout: float, model: str, fetch: Fetch) -> TritonSignals:
    try:
        return signals_from_text(fetch(url, timeout), model)
    except (OSError, MetricsParseError, ValueError) as exc:
        log.debug("scrape %s failed: %s", url, exc)
        return TritonSignals(None, None)


def scrape_triton(
    pods: Sequence[Mapping[str, Any]],
    *,
    port: int = DEFAULT_PORT,
    timeout: float = DEFAULT_TIMEOUT_SECONDS,
    model: str = DEFAULT_MODEL,
    fetch: Fetch = fetch_metrics,
) -> list[tuple[PodState, TritonSignals]]:
    """State and parsed page of each of ``pods`` (the READY ones scraped in parallel; others, and
    unreachable pods, get empty :class:`TritonSignals`). Order follows ``pods``; never raises for an
    unreachable pod."""
    states = [pod_state(p) for p in pods]
    urls: dict[int, str] = {}
    for i, (pod, state) in enumerate(zip(pods, states, strict=True)):
        ip = (pod.get("status") or {}).get("podIP")
        if state == PodState.READY and ip:
            host = f"[{ip}]" if ":" in ip else ip
            urls[i] = f"http://{host}:{port}/metrics"
    results: dict[int, TritonSignals] = {}
    if urls:
        with ThreadPoolExecutor(max_workers=min(MAX_WORKERS, len(urls))) as pool:
            futures = {i: pool.submit(_scrape_one, url, timeout, model, fetch) for i, url in urls.items()}
            results = {i: f.result() for i, f in futures.items()}
    return [(state, results.get(i, TritonSignals(None, None))) for i, state in enumerate(states)]


def scrape_pods(
    pods: Sequence[Mapping[str, Any]],
    *,
    port: int = DEFAULT_PORT,
    timeout: float = DEFAULT_TIMEOUT_SECONDS,
    model: str = DEFAULT_MODEL,
    fetch: Fetch = fetch_metrics,
) -> tuple[PodSignals, ...]:
    """The policy's view of ``pods``: state of each, signals of the READY ones (scraped in parallel).

    Never raises for an unreachable pod (its signals are ``None``). Order follows ``pods``.
    """
    scraped = scrape_triton(pods, port=port, timeout=timeout, model=model, fetch=fetch)
    return tuple(
        PodSignals(
            name=str((pod.get("metadata") or {}).get("name", "")),
            state=state,
            values=signals.values(),
            counters=signals.counters(),
        )
        for pod, (state, signals) in zip(pods, scraped, strict=True)
    )
