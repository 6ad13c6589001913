"""Rollout math: is the new engine key fully served, and should the operator roll back? Pure.

Kubernetes' own ``updatedReplicas`` counts pods of the newest ReplicaSet, which is not the same as
"serving the new engine": a pod can be updated and still loading, and an old-key pod can still be
terminating with requests in flight. The rollout is **complete only when every pod of the
deployment carries the new engine-key label, is Ready, none of another key remains, and the
workload controller has observed the latest template** (docs/design.md §5). The pods are counted by the
engine-key label the renderer puts on every pod.

Automatic rollback (``spec.rollout.autoRollback``) mirrors ``kubectl rollout undo``: when the
workload reports its progress deadline exceeded (``Progressing=False``, reason
``ProgressDeadlineExceeded``) and new-key pods are still not Ready, the previous key's pod template
(from the previous ReplicaSet) is restored, and the failed key is remembered so the operator does
not roll it forward again until the engine key changes.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from trtllm_operator.api.wire import LABEL_ENGINE_KEY


@dataclass(frozen=True)
class PodView:
    """What the rollout needs to know about one pod."""

    short_key: str
    ready: bool
    terminating: bool = False
    #: The scheduler's message when the pod cannot be placed (``PodScheduled=False``, reason
    #: ``Unschedulable``: e.g. "0/4 nodes are available: 4 Insufficient nvidia.com/gpu."), else None.
    unschedulable: str | None = None


@dataclass(frozen=True)
class WorkloadView:
    """The workload's (Deployment / LeaderWorkerSet) generation and status counters."""

    generation: int
    observed_generation: int
    replicas: int
    updated_replicas: int
    ready_replicas: int
    progress_deadline_exceeded: bool = False


def pod_view(pod: Mapping[str, Any]) -> PodView:
    """A pod (raw API object) as the rollout sees it: its engine-key label, Ready, terminating, and
    the scheduler's message while it cannot be scheduled (the kube-scheduler sets ``PodScheduled``
    False with reason ``Unschedulable``: ``v1.PodReasonUnschedulable``, k8s.io/api core/v1 types.go)."""
    labels = pod["metadata"].get("labels") or {}
    status = pod.get("status") or {}
    conds = status.get("conditions") or []
    ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in conds)
    unschedulable = next(
        (
            str(c.get("message") or "no node satisfies the pod's requests")
            for c in conds
            if c.get("type") == "PodScheduled"
            and c.get("status") == "False"
            and c.get("reason") == "Unschedulable"
        ),
        None,
    )
    if status.get("phase") not in (None, "Pending"):
        unschedulable = None
    return PodView(
        labels.get(LABEL_ENGINE_KEY, ""),
        ready,
        bool(pod["metadata"].get("deletionTimestamp")),
        unschedulable,
    )


def workload_view(workload: Mapping[str, Any] | None) -> WorkloadView | None:
    """A Deployment or LeaderWorkerSet (raw API object) as the rollout sees it."""
    if workload is None:
        return None
    status = workload.get("status") or {}
    generation = workload["metadata"].get("generation", 0)
    deadline = any(
        c.get("type") == "Progressing"
        and c.get("status") == "False"
        and c.get("reason") == "ProgressDeadlineExceeded"
        for c in status.get("conditions") or []
    )
    return WorkloadView(
        generation=generation,
        # LeaderWorkerSet status has no observedGeneration: treat it as observed.
        observed_generation=status.get("observedGeneration", generation),
        replicas=status.get("replicas", 0),
        updated_replicas=status.get("updatedReplicas", 0),
        ready_replicas=status.get("readyReplicas", 0),
        progress_deadline_exceeded=deadline,
    )


@dataclass(frozen=True)
class RolloutProgress:
    """Counts by key and the verdict. ``serving_new`` counts non-terminating pods with the new key."""

    complete: bool
    desired: int
    serving_new: int
    ready_new: int
    old_pods: int
    message: str


def rollout_progress(
    desired_short_key: str, desired_replicas: int, workload: WorkloadView | None, pods: Sequence[PodView]
) -> RolloutProgress:
    """Count pods by engine key and decide whether the rollout of ``desired_short_key`` is complete."""
    new = [p for p in pods if p.short_key == desired_short_key and not p.terminating]
    ready_new = sum(p.ready for p in new)
    old = [p for p in pods if p.short_key != desired_short_key]
    if workload is None:
        return RolloutProgress(
            False, desired_replicas, len(new), ready_new, len(old), "workload not created yet"
        )
    observed = workload.observed_generation >= workload.generation
    complete = (
        observed
        and workload.updated_replicas == desired_replicas
        and workload.replicas == desired_replicas
        and len(new) == desired_replicas
        and ready_new == desired_replicas
        and not old
    )
    if complete:
        msg = f"all {desired_replicas} replicas serve engine key {desired_short_key}"
    else:
        msg = _progress_message(
            desired_short_key, desired_replicas, workload, new=len(new), ready_new=ready_new, old=old
        )
    return RolloutProgress(complete, desired_replicas, len(new), ready_new, len(old), msg)


def _progress_message(
    short_key: str, desired: int, workload: WorkloadView, *, new: int, ready_new: int, old: Sequence[PodView]
) -> str:
    """What an incomplete rollout is waiting for, in words that are true of what is observed.

    Only pods of ``short_key`` and more or fewer of them than ``desired``: the replica count changed
    (kubectl scale, the autoscaler), so "3 Ready, 2 desired; scaling down", never "3/2 replicas
    Ready". The workload's ``observedGeneration`` lags any spec change, ``spec.replicas`` included:
    "the new template" is said only when pods of another engine key show the template did change
    (fresh-user trial 42 F7); otherwise the lag is "its latest spec (generation N)".
    """
    if not old and new != desired:
        # the workload controller's lag, if any, is this scale step: nothing more to say
        direction = "down" if new > desired else "up"
        return f"{ready_new} Ready, {desired} desired; scaling {direction} on engine key {short_key}"
    by_key = Counter(p.short_key for p in old)
    olds = ", ".join(f"{n} on {k}" for k, n in sorted(by_key.items()))
    msg = f"{ready_new}/{desired} replicas Ready on engine key {short_key}" + (
        f"; {olds} still running" if olds else ""
    )
    if workload.observed_generation < workload.generation:
        change = "the new template" if old else f"its latest spec (generation {workload.generation})"
        msg += f"; waiting for the workload controller to observe {change}"
    return msg


@dataclass(frozen=True)
class RollbackDecision:
    """Restore ``to_key``'s pod template; ``failed_key`` is not rolled forward again."""

    failed_key: str
    to_key: str
    reason: str


def decide_rollback(
    progress: RolloutProgress,
    workload: WorkloadView | None,
    *,
    auto_rollback: bool,
    desired_key: str,
    previous_key: str | None,
    progress_deadline_seconds: int,
) -> RollbackDecision | None:
    """Roll back when enabled, a previous key exists, and the deadline passed without completion."""
    if not auto_rollback or previous_key is None or previous_key == desired_key:
        return None
    if progress.complete or workload is None or not workload.progress_deadline_exceeded:
        return None
    if progress.ready_new >= progress.desired:
        return None
    return RollbackDecision(
        failed_key=desired_key,
        to_key=previous_key,
        reason=(
            f"pods of engine key {desired_key[:16]} were not Ready within progressDeadlineSeconds="
            f"{progress_deadline_seconds} ({progress.ready_new}/{progress.desired} Ready): "
            f"rolled back to {previous_key[:16]}"
        ),
    )
