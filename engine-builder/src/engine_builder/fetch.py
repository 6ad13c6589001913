"""``fetch``: get the Hugging Face-format checkpoint onto local disk (or find it on a mounted volume).

Sources (``spec.model.uri``):

* ``hf://org/name`` — Hugging Face Hub through ``huggingface_hub``. The token is read from the
  environment variable named by ``spec.model.token_env`` (the Job sets it from a Secret). The
  revision is resolved once to a commit sha and every file is downloaded at that sha, so a branch
  moving during the download cannot mix two snapshots. Only :data:`ALLOW_PATTERNS` are fetched.
* ``pvc://claim/path`` — a PersistentVolumeClaim the Job mounts at ``<pvc_root>/<claim>``
  (``pvc_root`` defaults to ``/models``; ``--pvc-root`` or ``ENGINE_BUILDER_PVC_ROOT`` change it). Used
  in place, never copied.
* ``s3://bucket/prefix`` — through ``boto3``. Endpoint and credentials come from boto3's own
  environment variables (``AWS_ENDPOINT_URL_S3`` / ``AWS_ENDPOINT_URL``, ``AWS_ACCESS_KEY_ID``,
  ``AWS_SECRET_ACCESS_KEY``, ``AWS_REGION``), which the Job sets; nothing S3-specific is in the spec.
* a plain local directory path — used in place.

Before downloading, the listed sizes are summed and compared with the free space of the work
directory (:func:`check_disk`); after downloading, every file's size is checked against the listing.
Failures are classified: ``AuthFailed`` (401/403, gated repo, bad S3 credentials),
``ModelNotFound`` (no such repo/revision/bucket/prefix/directory), ``DownloadFailed`` (network,
endpoint unreachable, size mismatch), ``InsufficientDisk``, ``BadSpec`` (unknown scheme).

Paths stay inside the model directory: an S3 key or a Hub file name that is absolute or holds
``..`` is refused before anything is downloaded (:func:`safe_name`), and a mounted or local
directory may hold symbolic links only to files inside the same claim (or directory) —
:func:`check_links`; a link out of it (``/etc/…``, another mount) is refused. Both fail with
``ModelNotFound`` naming the path.
"""

# ruff: noqa: PLC0415 - huggingface_hub / boto3 are imported only for the scheme in use, so a bad spec fails in milliseconds.

from __future__ import annotations

import fnmatch
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from engine_builder.artifact_check import safe_relative_path
from engine_builder.report import BuildError

#: Files a build needs: weights, configs, tokenizer. Everything else in a repo is skipped.
ALLOW_PATTERNS: tuple[str, ...] = (
    "*.safetensors",
    "*.safetensors.index.json",
    "config.json",
    "generation_config.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "tokenizer.model",
    "special_tokens_map.json",
    "added_tokens.json",
    "vocab.json",
    "merges.txt",
    "*.tiktoken",
    "chat_template.jinja",
)

DEFAULT_PVC_ROOT = "/models"

#: Free space required = listed bytes × this factor + 256 MiB: the download itself plus the
#: converted checkpoint, which is at most the source's size (quantized formats are smaller).
DISK_FACTOR = 2.0
DISK_MARGIN_BYTES = 256 << 20

Scheme = Literal["hf", "pvc", "s3", "local"]
ProgressFn = Callable[[float, float | None, str, str], None]


@dataclass(frozen=True)
class SourceRef:
    """A parsed ``model.uri``. ``location``: HF repo id, bucket, or local directory; ``prefix``: S3
    key prefix (no leading slash, ends with ``/`` unless empty)."""

    scheme: Scheme
    location: str
    prefix: str = ""


def parse_source(uri: str, pvc_root: str = DEFAULT_PVC_ROOT) -> SourceRef:
    """Parse ``spec.model.uri``. Raises :class:`BuildError` ``BadSpec`` (field ``model.uri``)."""
    if uri.startswith("hf://"):
        repo = uri[len("hf://") :].strip("/")
        if repo.count("/") > 1 or not repo:
            raise _bad_uri(uri, "hf:// takes a repo id: hf://org/name")
        return SourceRef("hf", repo)
    if uri.startswith("pvc://"):
        rest = uri[len("pvc://") :].strip("/")
        if not rest:
            raise _bad_uri(uri, "pvc:// takes a claim and an optional path: pvc://claim/path")
        try:
            rest = safe_relative_path(rest)
        except ValueError as exc:
            raise _bad_uri(uri, f"the path must stay inside the claim: {exc}") from exc
        return SourceRef("pvc", str(Path(pvc_root) / rest))
    if uri.startswith("s3://"):
        rest = uri[len("s3://") :]
        bucket, _, prefix = rest.partition("/")
        if not bucket:
            raise _bad_uri(uri, "s3:// takes a bucket and prefix: s3://bucket/prefix")
        prefix = prefix.strip("/")
        return SourceRef("s3", bucket, prefix + "/" if prefix else "")
    if "://" in uri:
        raise _bad_uri(uri, "unknown scheme; use hf://, pvc://, s3:// or a local directory path")
    return SourceRef("local", uri)


def _bad_uri(uri: str, message: str) -> BuildError:
    return BuildError("BadSpec", f"model.uri {uri!r}: {message}", field="model.uri")


def wanted(relative_path: str) -> bool:
    """True when a file (path relative to the model root) matches :data:`ALLOW_PATTERNS`."""
    name = relative_path.rsplit("/", 1)[-1]
    return any(fnmatch.fnmatch(name, pattern) for pattern in ALLOW_PATTERNS)


def safe_name(rel: str, where: str) -> str:
    """``rel`` (an S3 key below the prefix, a Hub file name) if it stays inside the download
    directory, else ``BuildError`` ``ModelNotFound`` naming it."""
    try:
        return safe_relative_path(rel)
    except ValueError as exc:
        raise BuildError("ModelNotFound", f"{where}: refusing file {exc}", field="model.uri") from exc


def check_links(root: Path, bound: Path) -> None:
    """Refuse a symbolic link under ``root`` that resolves outside ``bound`` (or nowhere): files
    are read through links (a Hugging Face cache snapshot links into its ``blobs/``), so a link to
    ``/etc/…`` or another volume would be copied into the artifact."""
    limit = bound.resolve()
    for path in sorted(root.rglob("*")):
        if not path.is_symlink():
            continue
        target = path.resolve()
        if not target.exists() or not target.is_relative_to(limit):
            raise BuildError(
                "ModelNotFound",
                f"{path}: symbolic link to {target}, outside {bound}; the model directory may link "
                "only to files inside it",
                field="model.uri",
            )


def check_disk(required_bytes: int, free_bytes: int, where: str) -> None:
    """Raise ``InsufficientDisk`` when ``free_bytes < required_bytes`` (both in bytes)."""
    if free_bytes < required_bytes:
        raise BuildError(
            "InsufficientDisk",
            f"{where}: {free_bytes / 2**30:.2f} GiB free, {required_bytes / 2**30:.2f} GiB needed "
            f"(download + converted checkpoint); give the builder a larger work volume",
        )


def required_disk_bytes(listed_bytes: int, downloads: bool) -> int:
    """Bytes of free space a build needs for a source of ``listed_bytes`` (see :data:`DISK_FACTOR`)."""
    factor = DISK_FACTOR if downloads else DISK_FACTOR - 1.0
    return int(listed_bytes * factor) + DISK_MARGIN_BYTES


@dataclass(frozen=True)
class FetchResult:
    """Where the checkpoint is, what was fetched (relative path → bytes), and the resolved revision."""

    model_dir: Path
    files: dict[str, int]
    revision: str | None
    downloaded: bool

    def to_json_dict(self) -> dict[str, Any]:
        return {
            "model_dir": str(self.model_dir),
            "files": self.files,
            "bytes": sum(self.files.values()),
            "revision": self.revision,
            "downloaded": self.downloaded,
        }


def fetch(
    uri: str,
    *,
    revision: str | None,
    token_env: str,
    dest: Path,
    pvc_root: str = DEFAULT_PVC_ROOT,
    progress: ProgressFn | None = None,
) -> FetchResult:
    """Fetch ``uri`` into ``dest`` (downloads) or locate it (pvc/local). See the module docstring."""
    ref = parse_source(uri, pvc_root)
    report: ProgressFn = progress or (lambda done, total, unit, msg: None)
    if ref.scheme in ("pvc", "local"):
        return locate(ref, dest, pvc_root)
    dest.mkdir(parents=True, exist_ok=True)
    if ref.scheme == "hf":
        return _fetch_hf(ref, revision, os.environ.get(token_env) or None, dest, report)
    return _fetch_s3(ref, dest, report)


def locate(ref: SourceRef, dest: Path | None, pvc_root: str) -> FetchResult:
    """The model directory of a pvc:// or local source, checked (``config.json`` present, links
    inside the claim) where it lies; ``dest``: where the build will write (its free disk is checked),
    None for a check that writes nothing (``engine-builder check``)."""
    root = Path(ref.location)
    if not (root / "config.json").is_file():
        what = "mounted claim path" if ref.scheme == "pvc" else "directory"
        raise BuildError(
            "ModelNotFound",
            f"{what} {root} has no config.json (is the volume mounted and the path right?)",
            field="model.uri",
        )
    # a pvc:// model may link anywhere in its own claim (<pvc_root>/<claim>), a local one only inside
    claim = Path(pvc_root) / root.relative_to(pvc_root).parts[0] if ref.scheme == "pvc" else root
    check_links(root, claim)
    files = {
        str(p.relative_to(root)): p.stat().st_size
        for p in sorted(root.rglob("*"))
        if p.is_file() and wanted(str(p.relative_to(root)))
    }
    if dest is not None:
        check_disk(required_disk_bytes(sum(files.values()), downloads=False), _free(dest), str(dest))
    return FetchResult(root, files, None, downloaded=False)


def _free(path: Path) -> int:
    probe = path
    while not probe.exists():
        probe = probe.parent
    return shutil.disk_usage(probe).free


# ------------------------------------------------------------------------------------------------
# Hugging Face Hub


def _fetch_hf(
    ref: SourceRef, revision: str | None, token: str | None, dest: Path, progress: ProgressFn
) -> FetchResult:
    from huggingface_hub import HfApi, hf_hub_download

    # HF_ENDPOINT (the operator passes its hfEndpoint setting; a mirror or a private Hub), read now:
    # huggingface_hub 2.4.0 reads it once, at import (constants.py: ENDPOINT =
    # os.getenv("HF_ENDPOINT", "https://huggingface.co").rstrip("/")); None is that default.
    endpoint = (os.environ.get("HF_ENDPOINT") or "").rstrip("/") or None
    api = HfApi(endpoint=endpoint)
    try:
        info = api.model_info(ref.location, revision=revision, token=token, files_metadata=True)
        sha = info.sha or revision
        where = f"hf://{ref.location}@{sha}"
        listing = {
            safe_name(s.rfilename, where): int(s.size or 0)
            for s in (info.siblings or [])
            if wanted(s.rfilename)
        }
        if not any(name.endswith(".safetensors") for name in listing):
            raise BuildError(
                "ModelNotFound",
                f"hf://{ref.location}@{sha}: no *.safetensors weights (only safetensors checkpoints "
                "are supported)",
                field="model.uri",
            )
        check_disk(required_disk_bytes(sum(listing.values()), downloads=True), _free(dest), str(dest))
        total = sum(listing.values())
        done = 0
        for name in sorted(listing):
            progress(done, total, "bytes", f"downloading {name}")
            hf_hub_download(ref.location, name, revision=sha, token=token, local_dir=dest, endpoint=endpoint)
            done += listing[name]
        progress(total, total, "bytes", "downloaded")
    except BuildError:
        raise
    except Exception as exc:  # classified below; anything unknown is a download failure
        raise _classify_hf(exc, ref, revision) from exc
    _verify_sizes(dest, listing)
    return FetchResult(dest, listing, sha, downloaded=True)


def _classify_hf(exc: Exception, ref: SourceRef, revision: str | None) -> BuildError:
    from huggingface_hub import errors

    where = f"hf://{ref.location}" + (f"@{revision}" if revision else "")
    if isinstance(exc, errors.GatedRepoError):
        return BuildError("AuthFailed", f"{where}: gated repository; accept its terms and set a token")
    if isinstance(exc, errors.RevisionNotFoundError):
        return BuildError("ModelNotFound", f"{where}: revision not found", field="model.revision")
    if isinstance(exc, errors.RepositoryNotFoundError):
        return BuildError(
            "ModelNotFound",
            f"{where}: repository not found (or private: set the token Secret)",
            field="model.uri",
        )
    status = getattr(getattr(exc, "response", None), "status_code", None)
    if status in (401, 403):
        return BuildError("AuthFailed", f"{where}: HTTP {status}; check the token Secret")
    return BuildError("DownloadFailed", f"{where}: {type(exc).__name__}: {exc}")


# ------------------------------------------------------------------------------------------------
# S3


def s3_client() -> Any:
    """A boto3 S3 client configured from the environment, with short connect timeouts and few
    retries so an unreachable endpoint fails in seconds, not minutes."""
    import boto3
    from botocore.config import Config

    config = Config(
        connect_timeout=5,
        read_timeout=60,
        retries={"max_attempts": 3, "mode": "standard"},
        s3={"addressing_style": "path"},
    )
    return boto3.client("s3", config=config)


def _fetch_s3(ref: SourceRef, dest: Path, progress: ProgressFn) -> FetchResult:
    client = s3_client()
    where = f"s3://{ref.location}/{ref.prefix}"
    try:
        listing: dict[str, int] = {}
        paginator = client.get_paginator("list_objects_v2")
        for page in paginator.paginate(Bucket=ref.location, Prefix=ref.prefix):
            for obj in page.get("Contents", []):
                rel = obj["Key"][len(ref.prefix) :]
                if rel and not rel.endswith("/") and wanted(rel):
                    listing[safe_name(rel, where)] = int(obj["Size"])
        if "config.json" not in listing:
            raise BuildError("ModelNotFound", f"{where}: no config.json under this prefix", field="model.uri")
        check_disk(required_disk_bytes(sum(listing.values()), downloads=True), _free(dest), str(dest))
        total = sum(listing.values())
        done = 0
        for rel in sorted(listing):
            target = dest / rel
            if target.is_file() and target.stat().st_size == listing[rel]:
                done += listing[rel]
                continue  # resumed run: already complete
            target.parent.mkdir(parents=True, exist_ok=True)
            partial = target.with_name(target.name + ".part")
            seen = [done]

            def callback(n: int, seen: list[int] = seen, rel: str = rel) -> None:
                seen[0] += n
                progress(seen[0], total, "bytes", f"downloading {rel}")

            client.download_file(ref.location, ref.prefix + rel, str(partial), Callback=callback)
            os.replace(partial, target)
            done += listing[rel]
        progress(total, total, "bytes", "downloaded")
    except BuildError:
        raise
    except Exception as exc:
        raise _classify_s3(exc, where) from exc
    _verify_sizes(dest, listing)
    return FetchResult(dest, listing, None, downloaded=True)


def _classify_s3(exc: Exception, where: str) -> BuildError:
    from botocore import exceptions as bx

    if isinstance(exc, bx.NoCredentialsError | bx.PartialCredentialsError):
        return BuildError("AuthFailed", f"{where}: no S3 credentials in the environment")
    if isinstance(exc, bx.ClientError):
        code = str(exc.response.get("Error", {}).get("Code", ""))
        if code in ("NoSuchBucket", "NoSuchKey", "404"):
            return BuildError("ModelNotFound", f"{where}: {code}", field="model.uri")
        if code in ("AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "403", "401"):
            return BuildError("AuthFailed", f"{where}: {code}; check the S3 credentials Secret")
    if isinstance(exc, bx.EndpointConnectionError | bx.ConnectTimeoutError | bx.ReadTimeoutError):
        return BuildError("DownloadFailed", f"{where}: S3 endpoint unreachable: {exc}")
    return BuildError("DownloadFailed", f"{where}: {type(exc).__name__}: {exc}")


def _verify_sizes(root: Path, listing: dict[str, int]) -> None:
    for rel, size in listing.items():
        path = root / rel
        actual = path.stat().st_size if path.is_file() else -1
        if size and actual != size:
            raise BuildError("DownloadFailed", f"{rel}: {actual} bytes on disk, {size} listed (truncated?)")
