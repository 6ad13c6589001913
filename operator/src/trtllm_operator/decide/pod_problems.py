"""Pods whose containers wait on something that will not clear by itself (a bad image, a missing
Secret key, a crash loop), as the kubelet reports it, and the field that fixes it. Pure.

The kubelet writes ``status.containerStatuses[]`` / ``status.initContainerStatuses[]`` entries with
``state.waiting: {reason, message}``. The reasons, Kubernetes v1.34:

* ``pkg/kubelet/images/types.go``: ``ErrImagePull`` (``ErrImagePull``), ``ImagePullBackOff``
  (``ErrImagePullBackOff``, "kubelet is backing off image pull"), ``InvalidImageName``
  (``ErrInvalidImageName``, "Unable to parse the image name");
* ``pkg/kubelet/kuberuntime/kuberuntime_container.go``: ``CreateContainerConfigError``
  (``ErrCreateContainerConfig``; e.g. ``pkg/kubelet/kubelet_pods.go`` ``makeEnvironmentVariables``:
  "couldn't find key %v in Secret %v/%v", or the Secret's ``secret "<name>" not found``),
  ``CreateContainerError`` (``ErrCreateContainer``);
* ``pkg/kubelet/container/sync_result.go``: ``CrashLoopBackOff`` (``ErrCrashLoopBackOff``, "a
  container Terminated and Kubelet is backing off the restart").

The kubelet retries all of them (with back-off), but none changes without a change of the pod's
inputs: the image, the Secret, the program. ``ContainerCreating`` / ``PodInitializing`` (the normal
waits, same kuberuntime file) are not problems and are not reported.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

REASON_ERR_IMAGE_PULL = "ErrImagePull"
REASON_IMAGE_PULL_BACK_OFF = "ImagePullBackOff"
REASON_INVALID_IMAGE_NAME = "InvalidImageName"
REASON_CREATE_CONTAINER_CONFIG = "CreateContainerConfigError"
REASON_CREATE_CONTAINER = "CreateContainerError"
REASON_CRASH_LOOP_BACK_OFF = "CrashLoopBackOff"

#: Waiting reasons about the image: fixed by the image reference (or the pull Secrets).
IMAGE_REASONS = frozenset({REASON_ERR_IMAGE_PULL, REASON_IMAGE_PULL_BACK_OFF, REASON_INVALID_IMAGE_NAME})
#: Every waiting reason that will not clear by itself (see the module docstring).
STUCK_REASONS = IMAGE_REASONS | {
    REASON_CREATE_CONTAINER_CONFIG,
    REASON_CREATE_CONTAINER,
    REASON_CRASH_LOOP_BACK_OFF,
}


@dataclass(frozen=True)
class StuckContainer:
    """One container of a pod waiting with a reason of :data:`STUCK_REASONS`."""

    pod: str
    container: str
    init: bool
    reason: str
    message: str


@dataclass(frozen=True)
class Fixes:
    """Which spec field fixes what, for the pods of one object.

    ``images``: container name → the field(s) that set its image; ``secrets``: Secret name → the
    field that names it (a ``credentialsSecretRef``); ``image_default``: for a container not in
    ``images``."""

    images: Mapping[str, str] = field(default_factory=dict)
    secrets: Mapping[str, str] = field(default_factory=dict)
    image_default: str = "the image of the pod's container"


def stuck_containers(pods: Sequence[Mapping[str, Any]]) -> list[StuckContainer]:
    """The containers (init containers first) of pods that are not finished or terminating and wait
    with a reason of :data:`STUCK_REASONS`, in pod order."""
    out: list[StuckContainer] = []
    for pod in pods:
        meta = pod.get("metadata") or {}
        status = pod.get("status") or {}
        if meta.get("deletionTimestamp") or status.get("phase") in ("Succeeded", "Failed"):
            continue
        for key, init in (("initContainerStatuses", True), ("containerStatuses", False)):
            for cs in status.get(key) or []:
                waiting = (cs.get("state") or {}).get("waiting") or {}
                reason = waiting.get("reason")
                if reason in STUCK_REASONS:
                    out.append(
                        StuckContainer(
                            str(meta.get("name") or ""),
                            str(cs.get("name") or ""),
                            init,
                            str(reason),
                            str(waiting.get("message") or "").strip(),
                        )
                    )
    return out


def _secret_fields(message: str, secrets: Mapping[str, str]) -> list[str]:
    """The fields of ``secrets`` whose Secret the kubelet's message names (``<ns>/<name>`` in
    "couldn't find key …", ``"<name>"`` in the API's not-found message)."""
    return [f for name, f in secrets.items() if f"/{name}" in message or f'"{name}"' in message]


def fix_for(stuck: StuckContainer, fixes: Fixes) -> str:
    """What to change for ``stuck``: the field and the fix."""
    if stuck.reason in IMAGE_REASONS:
        where = fixes.images.get(stuck.container, fixes.image_default)
        return f"fix the image ({where}): it must exist and be pullable with the pod's imagePullSecrets"
    if stuck.reason == REASON_CREATE_CONTAINER_CONFIG:
        named = _secret_fields(stuck.message, fixes.secrets)
        fields = ", ".join(named or sorted(set(fixes.secrets.values())))
        where = f" ({fields})" if fields else ""
        return (
            f"fix the Secret reference{where}: the Secret must exist in this namespace and hold the "
            "key it names (kubectl get secret <name> -o jsonpath='{.data}')"
        )
    if stuck.reason == REASON_CRASH_LOOP_BACK_OFF:
        return (
            f"the container keeps exiting: kubectl logs --previous {stuck.pod} -c {stuck.container} says why"
        )
    return f"the container runtime cannot create the container: kubectl describe pod {stuck.pod}"


def stuck_note(stuck: StuckContainer, fixes: Fixes) -> str:
    """``pod <p> <init container|container> <c> is waiting: <Reason>: <kubelet message>; <fix>``."""
    kind = "init container" if stuck.init else "container"
    message = f": {stuck.message}" if stuck.message else ""
    fix = fix_for(stuck, fixes)
    return f"pod {stuck.pod} {kind} {stuck.container} is waiting: {stuck.reason}{message}; {fix}"


def stuck_summary(stuck: Sequence[StuckContainer], fixes: Fixes) -> str:
    """``"N container(s) cannot start: <the first one's note>"`` (and how many other distinct
    problems: the same container, reason and message on several pods, e.g. every replica pulling
    one bad image, is one problem); "" for none."""
    if not stuck:
        return ""
    problems = list(dict.fromkeys((s.container, s.reason, s.message) for s in stuck))
    more = f" (and {len(problems) - 1} other problem(s))" if len(problems) > 1 else ""
    return f"{len(stuck)} container(s) cannot start: {stuck_note(stuck[0], fixes)}{more}"
