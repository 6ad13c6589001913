"""Has a serving pod found its artifact tampered with? Pure: pods in (raw API objects), a verdict out.

Every serving pod verifies the artifact against its ``manifest.json`` before Triton starts
(:mod:`engine_builder.artifact_check`, run as ``verify-artifact.py`` by ``launch.sh``); a mismatch
ends the container with a termination message ``ArtifactTampered: <file>: <what>``. The kubelet
copies that message into the pod's ``status.containerStatuses[].state.terminated.message`` (and, once
the container restarted, ``lastState.terminated.message``; core/v1 ``ContainerStatus``). This
module finds it so the LLMDeployment's status says which file, in which pod, instead of a bare
restart loop.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from engine_builder.contract import TAMPERED
from trtllm_operator.api.wire import LABEL_ENGINE_KEY

#: The condition reason (``Ready=False``, ``Degraded=True``) of a tampered artifact.
R_ARTIFACT_TAMPERED = TAMPERED
#: Longest verifier line kept in the condition message.
MAX_LINE = 512


def _terminated_messages(pod: Mapping[str, Any]) -> Iterable[str]:
    for status in (pod.get("status") or {}).get("containerStatuses") or ():
        for state in (status.get("state"), status.get("lastState")):
            message = ((state or {}).get("terminated") or {}).get("message")
            if message:
                yield str(message)


def tampered_line(message: str) -> str | None:
    """The verifier's ``ArtifactTampered: …`` line of a termination message (the message itself, or
    the last line of a log tail that ``FallbackToLogsOnError`` made the message), else ``None``."""
    for line in reversed(message.strip().splitlines()):
        if line.startswith(f"{TAMPERED}: "):
            return line[:MAX_LINE]
    return None


def tampered_artifact(pods: Iterable[Mapping[str, Any]], short_key: str, engine_name: str) -> str | None:
    """The condition message when a pod serving ``short_key`` (its engine-key label) stopped on a
    tampered artifact and is not Ready, else ``None``. Pods of another key are another artifact."""
    for pod in pods:
        meta = pod.get("metadata") or {}
        if (meta.get("labels") or {}).get(LABEL_ENGINE_KEY) != short_key or meta.get("deletionTimestamp"):
            continue
        conditions = (pod.get("status") or {}).get("conditions") or ()
        if any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions):
            continue
        for message in _terminated_messages(pod):
            line = tampered_line(message)
            if line is not None:
                return (
                    f"pod {meta.get('name')} refused to serve: {line}; the artifact of LLMEngine "
                    f"{engine_name!r} changed after it was built and verified: restore the file or "
                    "rebuild the engine (docs/security.md, Artifact integrity)"
                )
    return None
