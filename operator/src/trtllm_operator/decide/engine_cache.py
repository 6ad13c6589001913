"""The engine cache index: records of artifacts that exist, pure.

The operator cannot look inside PVCs or buckets, so "an artifact with this key exists in this
storage" is recorded in a ConfigMap (:func:`trtllm_operator.render.builder_job.desired_cache_entry`)
when a build completes or ``trtllm-operator cache import`` registers one built elsewhere. This
module builds those records (:func:`artifact_record`, :func:`prepared_record`,
:func:`record_from_build`), reads them back (:func:`parse_record`) and derives what the LLMEngine's
status says about them (:func:`artifact_status`, the ``ArtifactComplete`` condition
:func:`artifact_complete`).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from engine_builder.contract import artifact_dir_key, is_digest
from trtllm_operator.api.wire import ANNOTATION_ALLOW_PARTIAL_ARTIFACT, ARTIFACT_DATA_KEY
from trtllm_operator.decide.engine_failure import (
    REASON_ARTIFACT_MISSING,
    REASON_ARTIFACT_UNVERIFIED,
    BuilderReport,
    Failure,
)
from trtllm_operator.decide.engine_spec import PreparedEngine
from trtllm_operator.decide.storage import StorageLocation

log = logging.getLogger(__name__)

#: Condition type: False when the recorded artifact lacks a part its backend needs (a ``tensorrt``
#: artifact built with ``--skip-compile`` has no engine; ``cache import --allow-partial``).
CONDITION_ARTIFACT_COMPLETE = "ArtifactComplete"
R_ARTIFACT_COMPLETE = "Complete"
R_COMPILE_SKIPPED = "CompileSkipped"
R_NO_ARTIFACT = "NoArtifact"


def artifact_record(
    *,
    key: str,
    storage: StorageLocation,
    runtime_image: str,
    gpu_product: str,
    sm: int,
    backend: str,
    recorded_at: str,
    uri: str | None = None,
    manifest_digest: str | None = None,
    size_bytes: int | None = None,
    stage_timings: Mapping[str, float] | None = None,
    calibration: Mapping[str, Any] | None = None,
    tensorrt_llm_version: str | None = None,
    tensorrt_version: str | None = None,
    source: str = "import",
    built_by: str | None = None,
    missing: Sequence[str] = (),
) -> dict[str, Any]:
    """One engine cache index record (camelCase JSON): which artifact of ``key`` exists in which
    storage, and what it was built for. ``uri`` defaults to the storage's ``<root>/<key>``.
    ``missing``: what the backend needs but the artifact lacks (the manifest's ``missing``); non-empty
    makes the record ``partial: true``."""
    return {
        "partial": bool(missing),
        "missing": list(missing) or None,
        "engineKey": key,
        "storageIdentity": storage.identity,
        "storageId": storage.storage_id,
        "uri": uri or storage.artifact_uri(key),
        "manifestDigest": manifest_digest,
        "sizeBytes": size_bytes,
        "stageTimings": dict(stage_timings) if stage_timings else None,
        "calibration": dict(calibration) if calibration else None,
        "tensorrtLLMVersion": tensorrt_llm_version,
        "tensorrtVersion": tensorrt_version,
        "runtimeImage": runtime_image,
        "gpuProduct": gpu_product,
        "sm": sm,
        "backend": backend,
        "source": source,
        "builtBy": built_by,
        "recordedAt": recorded_at,
    }


def verify_build(
    prepared: PreparedEngine, report: BuilderReport | None, *, job_name: str, pods_left: bool
) -> Failure | None:
    """Why a completed builder Job's artifact cannot be recorded (a :class:`Failure`), or None when
    its report checks out.

    The operator cannot read the artifact storage; what it has is the builder's report (the
    termination message of the pod that exited 0). The builder reports success only after reading
    back the ``manifest.json`` it published and checking it with the verifier ``cache import``
    uses (:func:`engine_builder.contract.verify_manifest`: key = sha256 of the key inputs, digest,
    every listed file in place). Here the report must exist, say ``Succeeded`` or ``Partial``,
    carry this engine's key, an artifact ``<storage>/<key>[-<build id>]`` and a ``sha256:`` manifest
    digest. The artifact must be a directory of this engine's key directly under the storage's
    artifact root (on S3 the namespaced one): a report naming another prefix, namespace or key is
    refused. Reasons: ``ArtifactMissing`` (no report, or one without engine key, artifact URI or
    manifest digest), else ``ArtifactUnverified``.
    """
    retry = f"after fixing it, delete Job {job_name} to build again (kubectl delete job {job_name})"
    if report is None:
        where = (
            "its pod's termination message holds no builder report"
            if pods_left
            else "its pod is gone, so its report cannot be read"
        )
        return Failure(
            REASON_ARTIFACT_MISSING,
            f"builder Job {job_name} completed (exit 0) but {where}: no manifest was verified and "
            "nothing was recorded. The container must run engine-builder (check spec.runtime.image, "
            f"the operator's builderImage and the builder log: kubectl logs job/{job_name}); {retry}",
            deterministic=False,
        )
    if not report.succeeded:
        return Failure(
            REASON_ARTIFACT_UNVERIFIED,
            f"builder Job {job_name} completed (exit 0) but its report says {report.status}"
            f"{': ' + report.message if report.message else ''}; nothing was recorded; {retry}",
            deterministic=False,
        )
    named = (
        ("engineKey", report.engine_key),
        ("artifactURI", report.artifact_uri),
        ("manifestDigest", report.manifest_digest),
    )
    if not report.engine_key or not report.artifact_uri or not report.manifest_digest:
        missing = " and ".join(field for field, value in named if not value)
        return Failure(
            REASON_ARTIFACT_MISSING,
            f"the builder report names no {missing}: the build published no verified manifest; "
            f"nothing was recorded; read the builder log (kubectl logs job/{job_name}); {retry}",
            deterministic=False,
        )
    if report.engine_key != prepared.key:
        return Failure(
            REASON_ARTIFACT_UNVERIFIED,
            f"the builder report's engineKey {str(report.engine_key)[:12]}… is not this engine's key "
            f"{prepared.key_short}…: the artifact was built from another spec (build spec ConfigMap "
            f"{job_name} edited?); nothing was recorded; {retry}",
            deterministic=False,
        )
    name = prepared.storage.artifact_dir(report.artifact_uri)
    if name is None or artifact_dir_key(name) != prepared.key:
        return Failure(
            REASON_ARTIFACT_UNVERIFIED,
            f"the builder report's artifactURI {report.artifact_uri} is not "
            f"{prepared.storage.artifact_root()}/{prepared.key_short}…[-<build id>] (this engine's "
            f"storage and key); nothing was recorded; {retry}",
            deterministic=False,
        )
    if not is_digest(report.manifest_digest):
        return Failure(
            REASON_ARTIFACT_UNVERIFIED,
            f"the builder report's manifestDigest {report.manifest_digest!r} is not sha256:<64 hex>; "
            f"nothing was recorded; {retry}",
            deterministic=False,
        )
    return None


def prepared_record(prepared: PreparedEngine, *, recorded_at: str, **fields: Any) -> dict[str, Any]:
    """:func:`artifact_record` of ``prepared``'s artifact: its key, storage, runtime image, GPU
    (product, SM) and backend, recorded at ``recorded_at`` (RFC 3339); ``fields``: the rest of
    :func:`artifact_record`'s keywords (``uri``, ``missing``, ``source``, …). TypeError for a keyword
    it does not take."""
    return artifact_record(
        key=prepared.key,
        storage=prepared.storage,
        runtime_image=prepared.build_spec.runtime_image,
        gpu_product=prepared.gpu.product,
        sm=prepared.gpu.sm,
        backend=prepared.build_spec.backend,
        recorded_at=recorded_at,
        **fields,
    )


def record_from_build(
    prepared: PreparedEngine, report: BuilderReport, *, job_name: str, recorded_at: str
) -> dict[str, Any]:
    """The record of a completed builder Job whose report :func:`verify_build` accepted: URI,
    digest, size, timings and the TensorRT-LLM / TensorRT versions from the builder's report."""
    return prepared_record(
        prepared,
        recorded_at=recorded_at,
        # The API form of the verified location (verify_build: the report names a directory of
        # this key in this storage); serving pods mount or download exactly this directory.
        uri=prepared.storage.artifact_uri(
            prepared.storage.artifact_dir(str(report.artifact_uri)) or prepared.key
        ),
        manifest_digest=report.manifest_digest,
        size_bytes=report.size_bytes,
        stage_timings=report.stage_timings,
        tensorrt_llm_version=(report.versions or {}).get("tensorrt_llm"),
        tensorrt_version=(report.versions or {}).get("tensorrt"),
        calibration=report.calibration,
        source=f"job/{job_name}",
        built_by=prepared.name,
        missing=[report.message or "compile skipped"]
        if report.status == "Partial" and prepared.build_spec.backend == "tensorrt"
        else (),
    )


def artifact_status(record: Mapping[str, Any]) -> dict[str, Any]:
    """``status.artifact`` (camelCase) of a cache record."""
    return {
        "uri": record.get("uri"),
        "sizeBytes": record.get("sizeBytes"),
        "manifestDigest": record.get("manifestDigest"),
        "tensorrtLLMVersion": record.get("tensorrtLLMVersion"),
        "tensorrtVersion": record.get("tensorrtVersion"),
        "partial": bool(record.get("partial")),
        "missing": record.get("missing") or None,
    }


def artifact_complete(record: Mapping[str, Any] | None) -> tuple[bool | str, str, str]:
    """The ``ArtifactComplete`` condition ``(status, reason, message)`` for a cache record (None: no
    artifact yet → Unknown)."""
    if record is None:
        return "Unknown", R_NO_ARTIFACT, "no artifact recorded for this engine key yet"
    if not record.get("partial"):
        return True, R_ARTIFACT_COMPLETE, "the artifact has every part its backend needs"
    missing = "; ".join(record.get("missing") or ()) or "compile skipped"
    return (
        False,
        R_COMPILE_SKIPPED,
        f"partial artifact: {missing}. LLMDeployments refuse to roll it out unless annotated "
        f'{ANNOTATION_ALLOW_PARTIAL_ARTIFACT}: "true" (simulated clusters and tests only); build it '
        "with the TensorRT-LLM toolchain (engine-builder run without --skip-compile) for real serving",
    )


def parse_record(cm: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The artifact record of a cache index ConfigMap (its ``artifact.json`` entry); None when the
    ConfigMap is None or its record is not a JSON object (logged: the entry is then ignored)."""
    if cm is None:
        return None
    try:
        record = json.loads(((cm.get("data") or {}).get(ARTIFACT_DATA_KEY)) or "")
    except ValueError:
        log.warning("cache index entry %s is not JSON; ignoring it", cm["metadata"]["name"])
        return None
    return record if isinstance(record, dict) else None
