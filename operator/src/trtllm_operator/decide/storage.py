"""Where an LLMEngine's artifacts live, and the names that follow from the storage. Pure.

:class:`StorageLocation` is ``spec.storage`` resolved (an existing PVC and sub-path, a PVC the
operator creates, or S3) with the identity two LLMEngines must share to share an artifact. Every
name derived from the engine key and the storage lives here, so a retry or a second LLMEngine
with the same key never creates a duplicate:

* builder Job and build-spec ConfigMap: ``build-<key[:16]>-<storage-id[:6]>``
  (:func:`builder_job_name`);
* cache index entry (ConfigMap, not owned — artifacts outlive LLMEngines):
  ``trtllm-engine-<key[:20]>-<storage-id[:8]>`` (:func:`cache_entry_name`);
* operator-created PVC: ``<engine[:53]>-artifacts`` (:meth:`StorageLocation.created_pvc_name`,
  the API's ``storage.createPVC``);
* the artifact root the builder writes under (:meth:`StorageLocation.artifact_root`): the PVC's mount
  path, or ``s3://<bucket>/<prefix>/<namespace>`` — on S3 the LLMEngine's namespace is part of the
  location, so an LLMEngine in one namespace never writes where another namespace's engines read (a
  bucket is global, the cache index is per namespace). Artifacts recorded before the namespace was
  added keep their recorded ``uri`` (serving reads the record, never recomputes it); only new builds
  and imports use the namespaced root. The engine key and the cache entry names do not include it.

Inside the root each build publishes a directory that did not exist before
(:func:`engine_builder.contract.artifact_dir_name`: ``<key>``, or ``<key>-<build id>`` when ``<key>``
is taken): an artifact directory is written once and never replaced, because serving pods mount it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from trtllm_operator.api.engine import StorageSpec


@dataclass(frozen=True)
class StorageLocation:
    """Where artifacts of one LLMEngine go. ``identity`` names the storage (two LLMEngines share an
    artifact only when both key and identity match); ``storage_id`` is its 16-hex-digit hash
    (label-safe). ``kind``: ``pvc`` (existing or operator-created claim) or ``s3``."""

    kind: Literal["pvc", "s3"]
    identity: str
    claim_name: str | None = None
    sub_path: str | None = None
    create_size: str | None = None
    create_storage_class: str | None = None
    create_access_mode: str = "ReadWriteOnce"
    bucket: str | None = None
    prefix: str | None = None
    endpoint: str | None = None
    s3_secret: str | None = None
    #: The LLMEngine's namespace; on S3 the last segment of :meth:`artifact_root`.
    namespace: str | None = None

    #: Mount path of the artifact volume in the builder pod (PVC storage).
    MOUNT_PATH = "/artifacts"

    @staticmethod
    def created_pvc_name(engine_name: str) -> str:
        """Name of the PVC the operator creates for ``storage.createPVC`` of LLMEngine ``engine_name``:
        ``<engine_name[:53]>-artifacts`` (at most 63 characters; dots kept).

        The one home of this name: the builder mounts it, the engine controller creates it and serving
        pods mount it. Existing clusters hold PVCs under exactly these names, so it must not change.
        A truncated name never ends in ``.`` (``x.-artifacts`` is not a valid object name, so no PVC
        can exist under it).
        """
        return f"{engine_name[: 63 - len('-artifacts')].rstrip('.')}-artifacts"

    @property
    def storage_id(self) -> str:
        return hashlib.sha256(self.identity.encode()).hexdigest()[:16]

    @property
    def created_by_operator(self) -> bool:
        return self.create_size is not None

    def artifact_root(self) -> str:
        """The builder's ``output.artifact_root``: the mount path, or ``s3://bucket/prefix/namespace``."""
        if self.kind == "s3":
            path = "/".join(p for p in ((self.prefix or "").strip("/"), self.namespace or "") if p)
            return f"s3://{self.bucket}/{path}".rstrip("/")
        return self.MOUNT_PATH

    def artifact_uri(self, name: str) -> str:
        """Where the artifact directory ``name`` (the engine key, or ``<key>-<build id>``) lives, as the
        API reports it (``pvc://claim/path/name``, ``s3://bucket/prefix/namespace/name``)."""
        if self.kind == "s3":
            return f"{self.artifact_root()}/{name}"
        path = "/".join(p for p in ((self.sub_path or "").strip("/"), name) if p)
        return f"pvc://{self.claim_name}/{path}"

    def artifact_dir(self, uri: str) -> str | None:
        """The artifact directory name a builder report's ``artifactURI`` names in this storage: ``uri``
        is ``<artifact_root()>/<name>`` (what the builder writes: ``/artifacts/<name>``, ``s3://…/<name>``)
        or :meth:`artifact_uri` of it; None when ``uri`` lies elsewhere (another prefix, namespace,
        claim) or names a nested path."""
        name = uri.rstrip("/").rpartition("/")[2]
        if not name or name in (".", ".."):
            return None
        forms = (f"{self.artifact_root()}/{name}", self.artifact_uri(name))
        return name if uri.rstrip("/") in forms else None


def storage_location(engine_name: str, storage: StorageSpec, namespace: str | None = None) -> StorageLocation:
    """The :class:`StorageLocation` of ``spec.storage`` (exactly one of pvc, createPVC, s3) of an
    LLMEngine in ``namespace`` (part of the S3 artifact root; not of ``identity``, whose cache index
    is already per namespace)."""
    if storage.pvc is not None:
        sub = (storage.pvc.sub_path or "").strip("/") or None
        return StorageLocation(
            kind="pvc",
            identity=f"pvc:{storage.pvc.claim_name}/{sub or ''}",
            claim_name=storage.pvc.claim_name,
            sub_path=sub,
        )
    if storage.create_pvc is not None:
        claim = StorageLocation.created_pvc_name(engine_name)
        return StorageLocation(
            kind="pvc",
            identity=f"pvc:{claim}/",
            claim_name=claim,
            create_size=storage.create_pvc.size,
            create_storage_class=storage.create_pvc.storage_class_name,
            create_access_mode=storage.create_pvc.access_mode,
        )
    if storage.s3 is not None:
        s3 = storage.s3
        prefix = s3.prefix.strip("/")
        return StorageLocation(
            kind="s3",
            identity=f"s3:{s3.endpoint or 'aws'}/{s3.bucket}/{prefix}",
            bucket=s3.bucket,
            prefix=prefix,
            endpoint=s3.endpoint,
            s3_secret=s3.credentials_secret_ref.name if s3.credentials_secret_ref else None,
            namespace=namespace,
        )
    raise ValueError("spec.storage: set exactly one of pvc, createPVC or s3")


def engine_storage_id(engine: Mapping[str, Any]) -> str | None:
    """:attr:`StorageLocation.storage_id` of an LLMEngine object's current ``spec.storage`` (the
    storage part of its builder Job's name and ``storage-id`` label), or None when the object has no
    ``spec.storage`` or one that does not parse (unknown: a caller must not conclude it differs)."""
    meta = engine.get("metadata") or {}
    raw = (engine.get("spec") or {}).get("storage")
    if not isinstance(raw, Mapping):
        return None
    try:
        storage = StorageSpec.model_validate(raw)
        return storage_location(str(meta.get("name") or ""), storage, meta.get("namespace")).storage_id
    except ValueError:  # pydantic's ValidationError is one; so is storage_location's "set exactly one"
        return None


def builder_job_name(key: str, storage_id: str) -> str:
    """Builder Job (and build-spec ConfigMap) name for an engine key in a storage."""
    return f"build-{key[:16]}-{storage_id[:6]}"


def cache_entry_name(key: str, storage_id: str) -> str:
    """Cache index ConfigMap name for an engine key in a storage."""
    return f"trtllm-engine-{key[:20]}-{storage_id[:8]}"
