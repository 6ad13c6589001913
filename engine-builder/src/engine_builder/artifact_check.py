"""Verify an engine artifact against its ``manifest.json`` before anything of it is loaded.

One module for both sides: the builder's ``package`` stage writes the manifest with
:func:`manifest_digest` (re-exported by :mod:`engine_builder.contract`), and every serving pod runs
this file's source as ``verify-artifact.py`` before Triton starts (the operator renders it into the
model-repository ConfigMap; the ``launch.sh`` of every pod calls it). It imports only the standard
library, because the serving image has neither the operator nor engine-builder installed.

What a serving pod checks (:func:`check_artifact`), in order; the first failure stops the pod:

1. ``manifest.json`` is present, and its digest (:func:`manifest_digest`) is the one the operator
   recorded in the LLMEngine's ``status.artifact.manifestDigest`` (passed as ``--manifest-digest``;
   without a recorded digest, the manifest's own ``manifestDigest`` field must match its content);
2. every path the manifest lists is relative, without ``..`` (:func:`safe_relative_path`);
3. no symbolic link anywhere under the artifact, and no file the manifest does not list (a Python
   file dropped into ``triton/<model>/1/`` would run inside Triton);
4. every listed file is present, a regular file, of the listed size and sha256.

A failure is printed as one line ``ArtifactTampered: <path>: <what>`` on stderr, also written to
``/dev/termination-log`` when that file is writable (Kubernetes' default ``terminationMessagePath``;
with ``terminationMessagePolicy: FallbackToLogsOnError`` the kubelet takes the log tail otherwise,
Kubernetes docs "Customizing the termination message"), and the process exits
:data:`EXIT_TAMPERED`. The operator turns that termination message into the LLMDeployment's
``ArtifactTampered`` condition (:mod:`trtllm_operator.decide.artifact_integrity`).
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path, PurePosixPath
from typing import Any

#: First word of the failure line (and of the termination message); the operator's condition
#: reason.
TAMPERED = "ArtifactTampered"
#: Exit status of a failed verification (2 is the launch script's own "unfilled template").
EXIT_TAMPERED = 3
MANIFEST = "manifest.json"
#: Kubernetes' default ``terminationMessagePath`` (core/v1 Container).
TERMINATION_LOG = "/dev/termination-log"
#: Files hashed in parallel (``hashlib`` releases the GIL while hashing large buffers).
HASH_THREADS = 8


class TamperedError(Exception):
    """The artifact does not match its manifest; ``path`` is the file at fault."""

    def __init__(self, path: str, what: str) -> None:
        super().__init__(f"{path}: {what}")
        self.path = path
        self.what = what

    def line(self) -> str:
        return f"{TAMPERED}: {self}"


def canonical_json(data: Any) -> str:
    """JSON with sorted keys, no whitespace, UTF-8 kept: identical input → identical bytes.

    The one copy: the engine key (:func:`engine_builder.spec.engine_key`), the builder's stage
    fingerprints and the manifest digest all hash it. It lives here because this module runs alone
    in the serving pod (standard library only); :mod:`engine_builder.spec` imports it."""
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def manifest_digest(manifest: dict[str, Any]) -> str:
    """``sha256:<hex>`` over the canonical JSON of ``manifest`` minus ``stageTimings`` and
    ``manifestDigest``."""
    content = {k: v for k, v in manifest.items() if k not in ("stageTimings", "manifestDigest")}
    return "sha256:" + hashlib.sha256(canonical_json(content).encode("utf-8")).hexdigest()


def safe_relative_path(rel: str) -> str:
    """``rel`` if it is a relative POSIX path that stays inside its root, else ``ValueError``.

    Refused: empty, absolute (``/x``), a ``..`` component, a backslash or NUL (a Windows-style or
    truncated path) — an S3 key or a manifest entry like ``../../etc/x`` would otherwise write or
    read outside the artifact directory.
    """
    if not rel or "\x00" in rel or "\\" in rel:
        raise ValueError(f"{rel!r}: not a plain relative path")
    path = PurePosixPath(rel)
    if path.is_absolute() or ".." in path.parts:
        raise ValueError(f"{rel!r}: absolute or contains '..': it would leave the artifact directory")
    return path.as_posix()


def sha256_file(path: Path, chunk: int = 1 << 20) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


def _walk(root: Path) -> Iterable[tuple[str, Path]]:
    """Every entry under ``root`` (relative POSIX path, path); symbolic links are not followed."""
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        base = Path(dirpath)
        for name in [*dirnames, *filenames]:
            path = base / name
            yield path.relative_to(root).as_posix(), path


def read_manifest(root: Path, expected_digest: str | None) -> dict[str, Any]:
    """``root/manifest.json``, checked against ``expected_digest`` (or its own field)."""
    path = root / MANIFEST
    if path.is_symlink() or not path.is_file():
        raise TamperedError(MANIFEST, "missing or not a regular file")
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise TamperedError(MANIFEST, f"unreadable: {exc}") from exc
    if not isinstance(manifest, dict) or not isinstance(manifest.get("files"), list):
        raise TamperedError(MANIFEST, "not an engine-builder manifest (no 'files' list)")
    digest = manifest_digest(manifest)
    want = expected_digest or manifest.get("manifestDigest")
    if digest != want:
        source = "the LLMEngine's status.artifact.manifestDigest" if expected_digest else "its manifestDigest"
        raise TamperedError(MANIFEST, f"content digest {digest} is not {want} ({source})")
    return manifest


def check_artifact(root: Path, expected_digest: str | None = None) -> tuple[int, int]:
    """Verify the artifact at ``root`` (see the module docstring); returns ``(files, bytes)``.

    Raises :class:`TamperedError` naming the first file at fault.
    """
    manifest = read_manifest(root, expected_digest)
    listed: dict[str, dict[str, Any]] = {}
    for i, entry in enumerate(manifest["files"]):
        if not isinstance(entry, dict) or not isinstance(entry.get("path"), str):
            raise TamperedError(MANIFEST, f"files[{i}] has no path")
        try:
            listed[safe_relative_path(entry["path"])] = entry
        except ValueError as exc:
            raise TamperedError(MANIFEST, f"files[{i}]: {exc}") from exc
    for rel, path in sorted(_walk(root)):
        if path.is_symlink():
            raise TamperedError(
                rel, f"is a symbolic link (to {os.readlink(path)}); artifacts hold regular files only"
            )
        if path.is_dir() or rel == MANIFEST:
            continue
        if rel not in listed:
            raise TamperedError(rel, "not listed in manifest.json: a file was added to the artifact")
    for rel, entry in sorted(listed.items()):
        path = root / rel
        if not path.is_file():
            raise TamperedError(rel, "listed in manifest.json but missing")
        size = path.stat().st_size
        if size != entry.get("size"):
            raise TamperedError(rel, f"size {size} bytes, manifest.json says {entry.get('size')}")

    def digest(rel: str) -> tuple[str, str]:
        return rel, sha256_file(root / rel)

    with ThreadPoolExecutor(max_workers=HASH_THREADS) as pool:
        for rel, got in pool.map(digest, sorted(listed)):
            if got != listed[rel].get("sha256"):
                raise TamperedError(rel, f"sha256 {got} is not {listed[rel].get('sha256')} (manifest.json)")
    return len(listed), sum(int(e.get("size") or 0) for e in listed.values())


def _report(line: str) -> None:
    print(line, file=sys.stderr, flush=True)
    if not os.path.isfile(TERMINATION_LOG):
        return  # not in a container: the log tail carries the line
    try:
        with open(TERMINATION_LOG, "w", encoding="utf-8") as f:
            f.write(line)
    except OSError:
        pass  # not writable: with FallbackToLogsOnError the log tail carries the line


def main(argv: list[str] | None = None) -> int:
    """``python3 verify-artifact.py ROOT [--manifest-digest sha256:<hex>]``."""
    args = list(sys.argv[1:] if argv is None else argv)
    expected = None
    if "--manifest-digest" in args:
        i = args.index("--manifest-digest")
        expected = args[i + 1] if i + 1 < len(args) else None
        del args[i : i + 2]
    if len(args) != 1:
        print("usage: verify-artifact.py ROOT [--manifest-digest sha256:<hex>]", file=sys.stderr)
        return 2
    root = Path(args[0])
    started = time.monotonic()
    try:
        files, size = check_artifact(root, expected)
    except TamperedError as exc:
        _report(exc.line())
        return EXIT_TAMPERED
    took = time.monotonic() - started
    print(f"artifact verified: {files} files, {size} bytes match manifest.json ({took:.1f} s)", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
