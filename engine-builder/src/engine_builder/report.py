"""Failure classes, exit codes and the compact result the builder leaves for the operator.

The builder Job's container ends with one JSON document (≤ 4 KiB, Kubernetes' limit for a
termination message) written to ``spec.output.termination_log`` and an exit code that encodes the
failure class, so the operator's ``podFailurePolicy`` can stop retrying what cannot succeed without
parsing anything:

==== ========================= ============= ==================================================
code reason                    deterministic what to do
==== ========================= ============= ==================================================
0    (Succeeded / Partial)     —             —
1    InternalError             no            a bug: read the builder log
10   BadSpec                   yes           fix the named spec field
11   DownloadFailed            no            network/storage trouble; retried
12   UnsupportedArchitecture   yes           use a supported model_type (message lists them)
13   DoesNotFit                yes           more GPUs, a smaller format, lower limits (plan reasons)
14   GPUOutOfMemory            yes           lower max_batch_size / max_num_tokens, or more TP
15   HostOutOfMemory           yes           raise the builder pod's memory limit
16   ToolchainMissing          yes           use a TensorRT-LLM image that has trtllm-build
17   CompileFailed             no            read the trtllm-build log tail in the message
18   Timeout                   no            raise activeDeadlineSeconds
19   AuthFailed                yes           fix the token / credentials Secret
20   ModelNotFound             yes           fix model.uri / revision
21   InsufficientDisk          yes           give the builder a larger volume
22   RequiresGPU               yes           the format needs CUDA (e.g. nvfp4 calibration)
23   QuantizationFailed        no            read the message (ModelOpt error)
24   ConversionFailed          no            read the message (checkpoint export error)
==== ========================= ============= ==================================================

"Deterministic" = running the same spec again on the same kind of node gives the same failure;
:data:`DETERMINISTIC_REASONS` is that set. Codes stay below 126 so they never collide with the
shell's 126/127 or signal exits (128 + n, e.g. 137 for the OOM killer).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from engine_builder.redaction import redact

Reason = Literal[
    "InternalError",
    "BadSpec",
    "DownloadFailed",
    "UnsupportedArchitecture",
    "DoesNotFit",
    "GPUOutOfMemory",
    "HostOutOfMemory",
    "ToolchainMissing",
    "CompileFailed",
    "Timeout",
    "AuthFailed",
    "ModelNotFound",
    "InsufficientDisk",
    "RequiresGPU",
    "QuantizationFailed",
    "ConversionFailed",
]

#: reason → process exit code (the operator's podFailurePolicy keys on these).
EXIT_CODES: dict[str, int] = {
    "InternalError": 1,
    "BadSpec": 10,
    "DownloadFailed": 11,
    "UnsupportedArchitecture": 12,
    "DoesNotFit": 13,
    "GPUOutOfMemory": 14,
    "HostOutOfMemory": 15,
    "ToolchainMissing": 16,
    "CompileFailed": 17,
    "Timeout": 18,
    "AuthFailed": 19,
    "ModelNotFound": 20,
    "InsufficientDisk": 21,
    "RequiresGPU": 22,
    "QuantizationFailed": 23,
    "ConversionFailed": 24,
}

#: Reasons where a retry of the same spec cannot succeed (podFailurePolicy action FailJob).
DETERMINISTIC_REASONS: frozenset[str] = frozenset(
    {
        "BadSpec",
        "UnsupportedArchitecture",
        "DoesNotFit",
        "GPUOutOfMemory",
        "HostOutOfMemory",
        "ToolchainMissing",
        "AuthFailed",
        "ModelNotFound",
        "InsufficientDisk",
        "RequiresGPU",
    }
)

#: Kubernetes truncates termination messages at 4096 bytes.
MAX_REPORT_BYTES = 4096

Status = Literal["Succeeded", "Partial", "Failed"]


class BuildError(Exception):
    """A classified failure. ``reason`` is a key of :data:`EXIT_CODES`; ``field`` the field at fault:
    a build-spec path (dotted snake_case, ``quantization.awq_block_size``) for the builder's own
    checks, or the planner's API path (``spec.quantization.format``) for a planner issue;
    ``stage`` is filled in by the pipeline."""

    def __init__(self, reason: Reason, message: str, *, field: str | None = None) -> None:
        super().__init__(f"{reason}: {message}")
        self.reason: Reason = reason
        self.message = message
        self.field = field
        self.stage: str | None = None

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.reason]


def exit_code_for(status: Status, reason: str | None) -> int:
    """0 for Succeeded/Partial; the reason's code for Failed (InternalError's for an unknown one)."""
    if status != "Failed":
        return 0
    return EXIT_CODES.get(reason or "InternalError", EXIT_CODES["InternalError"])


def build_report(
    *,
    status: Status,
    reason: str | None = None,
    message: str = "",
    stage: str | None = None,
    field: str | None = None,
    engine_key: str | None = None,
    artifact_uri: str | None = None,
    manifest_digest: str | None = None,
    size_bytes: int | None = None,
    stage_timings: dict[str, float] | None = None,
    skipped: list[str] | None = None,
    resumed: list[str] | None = None,
    versions: dict[str, str | None] | None = None,
    calibration: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The compact result as plain data (camelCase keys, the operator's API style).

    Keys: ``status`` (Succeeded | Partial | Failed; Partial = a stage the backend needs was
    skipped on request, e.g. ``--skip-compile``), ``reason``, ``message``, ``stage``, ``field``,
    ``exitCode``, ``retryable``, ``engineKey``, ``artifactURI``, ``manifestDigest``
    (``sha256:<hex>``), ``sizeBytes``, ``stageTimings`` (seconds, 3 decimals, stages that ran in
    this run only), ``skipped``, ``resumed`` (stages whose record from an earlier run was reused),
    ``versions`` (TensorRT-LLM and TensorRT the artifact was built with, ``null`` = not installed:
    :func:`engine_builder.contract.runtime_versions`),
    ``calibration`` (what the quantize stage calibrated on: ``dataset``, ``samples``, ``tokens``,
    ``batchSize``, ``maxSeqLength``; :func:`calibration_report`).
    ``None`` values are dropped. The message passes :func:`engine_builder.redaction.redact` (the
    report becomes the pod's termination message, readable by anyone who can get pods) and is
    shortened so the JSON stays ≤ 4 KiB.
    """
    report: dict[str, Any] = {
        "status": status,
        "reason": reason,
        "message": redact(message),
        "stage": stage,
        "field": field,
        "exitCode": exit_code_for(status, reason),
        "retryable": None if status != "Failed" else (reason not in DETERMINISTIC_REASONS),
        "engineKey": engine_key,
        "artifactURI": artifact_uri,
        "manifestDigest": manifest_digest,
        "sizeBytes": size_bytes,
        "stageTimings": {k: round(v, 3) for k, v in (stage_timings or {}).items()} or None,
        "skipped": skipped or None,
        "resumed": resumed or None,
        "versions": versions,
        "calibration": calibration or None,
    }
    report = {k: v for k, v in report.items() if v is not None and v != ""}
    return _fit(report)


def calibration_report(quantize_result: dict[str, Any]) -> dict[str, Any] | None:
    """The report's ``calibration`` from the quantize stage's result (None when it has none)."""
    if "samples" not in quantize_result:
        return None
    keys = {
        "dataset": "dataset",
        "samples": "samples",
        "tokens": "tokens",
        "batchSize": "batch_size",
        "maxSeqLength": "max_seq_length",
    }
    return {k: quantize_result[v] for k, v in keys.items() if quantize_result.get(v) is not None}


def _fit(report: dict[str, Any]) -> dict[str, Any]:
    """Shorten ``message`` (keeping its tail, where errors usually are) until the JSON fits."""
    encoded = json.dumps(report, separators=(",", ":"))
    if len(encoded.encode()) <= MAX_REPORT_BYTES:
        return report
    message = str(report.get("message", ""))
    overflow = len(encoded.encode()) - MAX_REPORT_BYTES + 32
    report["message"] = "…" + message[-max(0, len(message) - overflow) :] if overflow < len(message) else "…"
    encoded = json.dumps(report, separators=(",", ":"))
    while len(encoded.encode()) > MAX_REPORT_BYTES and report.get("message"):
        report["message"] = "…" + str(report["message"])[64:]
        encoded = json.dumps(report, separators=(",", ":"))
    if len(encoded.encode()) > MAX_REPORT_BYTES:
        report.pop("stageTimings", None)
    return report


def write_termination_log(path: str | Path, report: dict[str, Any]) -> None:
    """Write the report as compact JSON to ``path`` (the container's termination-message file).

    Best effort: a missing parent directory is created; an unwritable path is reported on stderr by
    the caller, never turned into a different failure.
    """
    p = Path(path)
    if str(p) != "/dev/termination-log":
        p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(json.dumps(report, separators=(",", ":"), ensure_ascii=False), encoding="utf-8")
