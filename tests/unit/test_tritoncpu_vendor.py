"""The vendored Triton r26.03 files (hack/tritoncpu/vendor/triton-r26.03/) are upstream's, byte for byte.

``SOURCES`` (written by ``hack/tritoncpu/vendor/update.sh`` from git directories of
triton-inference-server/server and /core) records each file's repository, commit and git blob id;
the blob id is git's SHA-1 of ``blob <size>\\0<content>``, so a local edit of a vendored file, a
file missing or a file added without provenance fails here.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
VENDOR = REPO / "hack" / "tritoncpu" / "vendor" / "triton-r26.03"
#: The release branch's tips the README names (triton-inference-server/server and /core r26.03).
SERVER_COMMIT = "f72de0733e63cb7ada8bd374930de1a86ba9fe6b"
CORE_COMMIT = "aa81fad455f60b625046966c6d6a644918eeebb3"


def git_blob_id(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data, usedforsecurity=False).hexdigest()


def sources() -> list[tuple[str, str, str, str]]:
    rows = []
    for line in (VENDOR / "SOURCES").read_text().splitlines():
        if line and not line.startswith("#"):
            repo, commit, path, blob = line.split()
            rows.append((repo, commit, path, blob))
    return rows


def test_git_blob_id_is_gits() -> None:
    # `printf 'hello\n' | git hash-object --stdin`
    assert git_blob_id(b"hello\n") == "ce013625030ba8dba906f756967f9e9ca394464a"


def test_every_vendored_file_is_upstreams_at_the_recorded_commit() -> None:
    rows = sources()
    assert {(repo, commit) for repo, commit, _, _ in rows} == {
        ("triton-inference-server/server", SERVER_COMMIT),
        ("triton-inference-server/core", CORE_COMMIT),
    }
    for repo, _commit, path, blob in rows:
        local = VENDOR / repo.rsplit("/", 1)[1] / path
        assert local.is_file(), f"{local} is listed in SOURCES but missing"
        assert git_blob_id(local.read_bytes()) == blob, f"{local} differs from {repo} {path} ({blob})"


def test_nothing_is_vendored_without_provenance() -> None:
    listed = {VENDOR / repo.rsplit("/", 1)[1] / path for repo, _, path, _ in sources()}
    present = {p for p in VENDOR.rglob("*") if p.is_file() and p.parent != VENDOR}
    assert present == listed, sorted(str(p.relative_to(VENDOR)) for p in present ^ listed)


def test_the_files_the_overlay_needs_are_there_with_their_licenses() -> None:
    paths = {(repo.rsplit("/", 1)[1], path) for repo, _, path, _ in sources()}
    for needed in [
        ("server", "python/openai/openai_frontend/main.py"),
        ("server", "python/openai/requirements.txt"),
        ("server", "LICENSE"),
        ("core", "python/tritonserver/__init__.py"),
        ("core", "python/tritonserver/_api/_server.py"),
        ("core", "python/tritonserver/_c/tritonserver_pybind.cc"),
        ("core", "include/triton/core/tritonserver.h"),
        ("core", "LICENSE"),
    ]:
        assert needed in paths, needed
    for repo in ("server", "core"):
        text = (VENDOR / repo / "LICENSE").read_text()
        assert "Redistribution and use in source and binary forms" in text
        assert "Neither the name of NVIDIA CORPORATION nor the names of its" in text
    readme = (VENDOR / "README.md").read_text()
    assert SERVER_COMMIT in readme and CORE_COMMIT in readme
