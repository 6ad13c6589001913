"""Why a build failed, from what the API server shows: the builder's report, pod and Job state.

The builder (``engine-builder run``) ends every run with a compact JSON report written to the
container's termination-message path (docs/design.md §4); Kubernetes copies it into
``status.containerStatuses[].state.terminated.message`` of the pod (``terminationMessagePolicy:
FallbackToLogsOnError`` puts the log tail there when the process died before writing it). Its exit
code maps to the failure class as well (:data:`engine_builder.report.EXIT_CODES`).

Classification, most specific first:

1. a parseable report with a ``reason`` → that reason and message;
2. the container was ``OOMKilled`` → ``HostOutOfMemory``;
3. the exit code is one of the builder's codes → its reason;
4. the Job failed with ``DeadlineExceeded`` → ``Timeout``;
5. otherwise ``Unknown`` with whatever message Kubernetes gave.

Everything here is pure: inputs are manifests as dicts.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from engine_builder import contract as builder_report
from trtllm_operator.api.wire import BUILDER_CONTAINER, CHECK_CONTAINER

#: Reasons the operator adds to the builder's own (not produced by the builder process).
REASON_TIMEOUT = "Timeout"
REASON_HOST_OOM = "HostOutOfMemory"
REASON_UNKNOWN = "Unknown"
REASON_UNSCHEDULABLE = "Unschedulable"
#: The builder Job completed (exit 0) but left no report naming a manifest: nothing to record.
REASON_ARTIFACT_MISSING = "ArtifactMissing"
#: The builder Job completed, but its report does not check out (engine key, artifact, digest).
REASON_ARTIFACT_UNVERIFIED = "ArtifactUnverified"


def exit_code_reasons() -> dict[int, str]:
    """Exit code → failure reason, from the builder's own table."""
    return {code: reason for reason, code in builder_report.EXIT_CODES.items() if code != 0}


def deterministic_exit_codes() -> list[int]:
    """Exit codes of failures a retry cannot fix (bad spec, out of memory, unsupported architecture):
    the builder Job's podFailurePolicy fails the Job on them at once. Sorted."""
    return sorted(
        code
        for reason, code in builder_report.EXIT_CODES.items()
        if code != 0 and reason in builder_report.DETERMINISTIC_REASONS
    )


def is_deterministic(reason: str | None) -> bool:
    """Whether a failure with ``reason`` would fail again with the same spec."""
    return reason in builder_report.DETERMINISTIC_REASONS


@dataclass(frozen=True)
class BuilderReport:
    """The builder's report (:func:`engine_builder.report.build_report`), as the operator uses it.

    ``status``: Succeeded | Partial | Failed. ``stage_timings``: seconds per finished stage.
    ``size_bytes``: artifact size in bytes. ``manifest_digest``: ``sha256:<hex>``.
    ``calibration``: what the quantize stage calibrated on (``dataset``, ``samples``, ``tokens``,
    ``batchSize``, ``maxSeqLength``), None when it did not run.
    """

    status: str
    reason: str | None = None
    message: str | None = None
    stage: str | None = None
    field: str | None = None
    engine_key: str | None = None
    artifact_uri: str | None = None
    manifest_digest: str | None = None
    size_bytes: int | None = None
    stage_timings: Mapping[str, float] | None = None
    #: TensorRT-LLM and TensorRT the artifact was built with (``engine_builder.contract.RUNTIME_LIBRARIES``
    #: keys; a value is ``None`` when the library was not installed in the builder).
    versions: Mapping[str, str | None] | None = None
    calibration: Mapping[str, Any] | None = None

    @property
    def succeeded(self) -> bool:
        return self.status in ("Succeeded", "Partial")


REPORT_STATUSES = ("Succeeded", "Partial", "Failed")


def parse_report(text: str | None) -> BuilderReport | None:
    """The report in a termination message, or None when the message is not a builder report
    (empty, a log tail from FallbackToLogsOnError, truncated JSON, or an unknown ``status``)."""
    if not text:
        return None
    try:
        data = json.loads(text.strip())
    except ValueError:
        return None
    if not isinstance(data, dict) or data.get("status") not in REPORT_STATUSES:
        return None
    timings = data.get("stageTimings")
    size = data.get("sizeBytes")
    return BuilderReport(
        status=str(data["status"]),
        reason=_str(data.get("reason")),
        message=_str(data.get("message")),
        stage=_str(data.get("stage")),
        field=_str(data.get("field")),
        engine_key=_str(data.get("engineKey")),
        artifact_uri=_str(data.get("artifactURI")),
        manifest_digest=_str(data.get("manifestDigest")),
        size_bytes=size if isinstance(size, int) and not isinstance(size, bool) else None,
        stage_timings={str(k): float(v) for k, v in timings.items() if isinstance(v, int | float)}
        if isinstance(timings, dict)
        else None,
        versions=builder_report.runtime_versions(data["versions"])
        if isinstance(data.get("versions"), dict)
        else None,
        calibration=_calibration(data.get("calibration")),
    )


#: The report's ``calibration`` keys (engine_builder.report.calibration_report) and their types.
_CALIBRATION_KEYS: dict[str, type] = {
    "dataset": str,
    "samples": int,
    "tokens": int,
    "batchSize": int,
    "maxSeqLength": int,
}


def _calibration(value: Any) -> dict[str, Any] | None:
    if not isinstance(value, dict):
        return None
    out = {
        k: value[k]
        for k, kind in _CALIBRATION_KEYS.items()
        if isinstance(value.get(k), kind) and not isinstance(value.get(k), bool)
    }
    return out or None


def _str(value: Any) -> str | None:
    return str(value) if value not in (None, "") else None


# --------------------------------------------------------------------------- pod and Job views
def builder_terminated(pod: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """``state.terminated`` (or ``lastState.terminated``) of the builder container, if any; the
    model check's (init container :data:`CHECK_CONTAINER`, ``engine-builder check``) when it failed:
    then the builder never ran, and the check's report is the build's."""
    for cs in (pod.get("status") or {}).get("initContainerStatuses") or []:
        term = (cs.get("state") or {}).get("terminated") or {}
        if cs.get("name") == CHECK_CONTAINER and term.get("exitCode"):
            return dict(term)
    for cs in (pod.get("status") or {}).get("containerStatuses") or []:
        if cs.get("name") != BUILDER_CONTAINER:
            continue
        for key in ("state", "lastState"):
            term = (cs.get(key) or {}).get("terminated")
            if term:
                return dict(term)
    return None


def unschedulable_message(pods: Sequence[Mapping[str, Any]]) -> str | None:
    """The scheduler's message when the newest pending builder pod cannot be scheduled."""
    for pod in sorted(pods, key=_created, reverse=True):
        status = pod.get("status") or {}
        if status.get("phase") not in (None, "Pending"):
            continue
        for cond in status.get("conditions") or []:
            if (
                cond.get("type") == "PodScheduled"
                and cond.get("status") == "False"
                and cond.get("reason") == "Unschedulable"
            ):
                return str(cond.get("message") or "no node satisfies the builder pod's requests")
    return None


def job_condition(job: Mapping[str, Any], type_: str) -> Mapping[str, Any] | None:
    """The Job condition of ``type_`` with status True (Complete, Failed, …), if present."""
    for cond in (job.get("status") or {}).get("conditions") or []:
        if cond.get("type") == type_ and cond.get("status") == "True":
            return dict(cond)
    return None


def _created(pod: Mapping[str, Any]) -> str:
    return str((pod.get("metadata") or {}).get("creationTimestamp") or "")


def latest_report(pods: Sequence[Mapping[str, Any]], *, succeeded: bool) -> BuilderReport | None:
    """The report of the newest pod in phase Succeeded (``succeeded``) or Failed."""
    phase = "Succeeded" if succeeded else "Failed"
    for pod in sorted(pods, key=_created, reverse=True):
        if (pod.get("status") or {}).get("phase") != phase:
            continue
        term = builder_terminated(pod)
        report = parse_report(term.get("message") if term else None)
        if report is not None:
            return report
    return None


@dataclass(frozen=True)
class Failure:
    """A classified build failure. ``deterministic``: retrying with the same spec fails again."""

    reason: str
    message: str
    deterministic: bool


def classify_failure(job: Mapping[str, Any], pods: Sequence[Mapping[str, Any]]) -> Failure:
    """Classify a failed builder Job (see the module docstring for the order of evidence)."""
    failed_cond = job_condition(job, "Failed") or {}
    job_reason = failed_cond.get("reason")
    job_message = str(failed_cond.get("message") or "")
    if job_reason == "DeadlineExceeded":
        deadline = (job.get("spec") or {}).get("activeDeadlineSeconds")
        return Failure(
            REASON_TIMEOUT,
            f"the build ran longer than activeDeadlineSeconds={deadline}; raise "
            "spec.gpu.activeDeadlineSeconds (calibration and compilation of large models take hours) or "
            "use more GPUs (spec.build.workers).",
            deterministic=False,
        )
    codes = exit_code_reasons()
    for pod in sorted(pods, key=_created, reverse=True):
        if (pod.get("status") or {}).get("phase") != "Failed":
            continue
        term = builder_terminated(pod)
        if term is None:
            continue
        report = parse_report(term.get("message"))
        if report is not None and report.reason:
            where = ", ".join(
                part for part in (f"stage {report.stage}" if report.stage else "", report.field or "") if part
            )
            return Failure(
                report.reason,
                (report.message or f"builder failed with {report.reason}") + (f" ({where})" if where else ""),
                is_deterministic(report.reason),
            )
        if term.get("reason") == "OOMKilled":
            return Failure(
                REASON_HOST_OOM,
                "the builder container was killed for exceeding its memory limit; raise "
                "spec.gpu.resources.memory (quantization holds the unquantized model in host memory).",
                is_deterministic(REASON_HOST_OOM),
            )
        code = term.get("exitCode")
        tail = str(term.get("message") or "").strip()
        if isinstance(code, int) and code in codes:
            reason = codes[code]
            return Failure(
                reason, tail or f"builder exited with code {code} ({reason})", is_deterministic(reason)
            )
        return Failure(
            REASON_UNKNOWN,
            tail or f"builder exited with code {code}: {term.get('reason') or 'Error'}",
            deterministic=False,
        )
    return Failure(
        REASON_UNKNOWN, job_message or f"builder Job failed ({job_reason or 'no reason given'})", False
    )
