"""Engine artifacts for integration tests, without a GPU build.

- :func:`cache_artifact`: records an artifact for an LLMEngine's key in the engine cache, exactly
  as ``trtllm-operator cache import`` does, so the operator serves the engine from cache (no Job).
- :func:`prebound_artifact_pvc`: a PV/PVC pair already Bound (the local control plane runs no PV
  binder), so serving pods that mount the artifact volume can be scheduled.
- :func:`write_manifest`: a ``manifest.json`` listing every file of a directory with its size and
  sha256, as the builder's ``package`` stage writes them, so the directory verifies as an artifact.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kubernetes import client

from engine_builder.artifact_check import sha256_file
from engine_builder.contract import manifest_digest
from trtllm_operator.decide.engine_cache import prepared_record
from trtllm_operator.decide.engine_spec import PreparedEngine, prepare_engine
from trtllm_operator.render.builder_job import desired_cache_entry


def write_manifest(root: Path, **fields: Any) -> str:
    """Write ``root/manifest.json`` over every file under ``root`` (``fields`` added to the manifest,
    e.g. ``engineKey``); returns its ``manifestDigest``."""
    files = sorted(p for p in root.rglob("*") if p.is_file() and p.name != "manifest.json")
    manifest: dict[str, Any] = {
        **fields,
        "files": [
            {"path": p.relative_to(root).as_posix(), "size": p.stat().st_size, "sha256": sha256_file(p)}
            for p in files
        ],
    }
    manifest["manifestDigest"] = digest = manifest_digest(manifest)
    (root / "manifest.json").write_text(json.dumps(manifest, indent=2, sort_keys=True))
    return digest


def cache_artifact(
    core: client.CoreV1Api,
    namespace: str,
    engine: dict[str, Any],
    missing: tuple[str, ...] = (),
    manifest_digest: str | None = None,
) -> PreparedEngine:
    """Record an artifact for ``engine``'s key (``missing`` non-empty: a partial artifact, like
    ``cache import --allow-partial``). Returns the prepared engine (key, storage, GPU)."""
    prepared = prepare_engine(engine["metadata"]["name"], engine["spec"])
    assert isinstance(prepared, PreparedEngine), prepared
    record = prepared_record(
        prepared,
        recorded_at="2026-11-29T20:00:00Z",
        size_bytes=9 * 10**9,
        missing=missing,
        manifest_digest=manifest_digest,
    )
    core.create_namespaced_config_map(namespace, desired_cache_entry(namespace, record))
    return prepared


def prebound_artifact_pvc(core: client.CoreV1Api, namespace: str, claim: str = "engines") -> str:
    """Create PV ``<claim>-<namespace>`` and PVC ``claim``, both Bound; returns the PV name."""
    pv = f"{claim}-{namespace}"
    core.create_persistent_volume(
        {
            "metadata": {"name": pv},
            "spec": {
                "capacity": {"storage": "100Gi"},
                "accessModes": ["ReadWriteMany"],
                "hostPath": {"path": "/tmp/engines"},
                "storageClassName": "",
                "claimRef": {"namespace": namespace, "name": claim},
            },
        }
    )
    core.create_namespaced_persistent_volume_claim(
        namespace,
        {
            "metadata": {"name": claim, "annotations": {"pv.kubernetes.io/bind-completed": "yes"}},
            "spec": {
                "accessModes": ["ReadWriteMany"],
                "resources": {"requests": {"storage": "100Gi"}},
                "storageClassName": "",
                "volumeName": pv,
            },
        },
    )
    core.patch_persistent_volume_status(pv, {"status": {"phase": "Bound"}})
    core.patch_namespaced_persistent_volume_claim_status(
        claim,
        namespace,
        {"status": {"phase": "Bound", "accessModes": ["ReadWriteMany"], "capacity": {"storage": "100Gi"}}},
    )
    return pv
