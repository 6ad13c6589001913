"""Issue 24 item 4: the artifact verifier every serving pod runs (engine_builder.artifact_check), and
the operator's reading of its termination message (decide.artifact_integrity) into a condition."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from support.artifacts import write_manifest

from engine_builder.artifact_check import TamperedError, check_artifact, safe_relative_path
from engine_builder.contract import EXIT_TAMPERED, manifest_digest
from trtllm_operator.api.wire import LABEL_ENGINE_KEY
from trtllm_operator.decide.artifact_integrity import tampered_artifact, tampered_line
from trtllm_operator.decide.deployment_status import Observation, deployment_status
from trtllm_operator.render.launch import VERIFY_SCRIPT, verifier_source


def artifact(root: Path) -> str:
    (root / "engine").mkdir(parents=True)
    (root / "engine/rank0.engine").write_bytes(b"\0" * 4096)
    (root / "tokenizer").mkdir()
    (root / "tokenizer/tokenizer.json").write_text("{}")
    return write_manifest(root, engineKey="k" * 64)


def test_an_intact_artifact_verifies(tmp_path: Path) -> None:
    digest = artifact(tmp_path)
    assert check_artifact(tmp_path, digest) == (2, 4098)
    assert check_artifact(tmp_path) == (2, 4098)  # no recorded digest: the manifest's own field


def test_the_recorded_digest_is_what_counts(tmp_path: Path) -> None:
    artifact(tmp_path)
    with pytest.raises(TamperedError) as err:
        check_artifact(tmp_path, "sha256:" + "0" * 64)
    assert err.value.path == "manifest.json"


@pytest.mark.parametrize("entry", ["../../etc/passwd", "/etc/passwd", "a/../../b", "a\\b", ""])
def test_manifest_paths_outside_the_artifact_are_refused(tmp_path: Path, entry: str) -> None:
    with pytest.raises(ValueError, match=r"artifact directory|plain relative"):
        safe_relative_path(entry)
    (tmp_path / "x").write_text("x")
    write_manifest(tmp_path)
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    manifest["files"][0]["path"] = entry  # a self-consistent manifest that points outside
    manifest["manifestDigest"] = manifest_digest(manifest)
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(TamperedError, match=r"files\[0\]") as err:
        check_artifact(tmp_path)
    assert err.value.path == "manifest.json"


def test_a_symlinked_directory_is_refused(tmp_path: Path) -> None:
    artifact(tmp_path / "a")
    (tmp_path / "a/extra").symlink_to(tmp_path / "a/engine", target_is_directory=True)
    with pytest.raises(TamperedError, match="symbolic link") as err:
        check_artifact(tmp_path / "a")
    assert err.value.path == "extra"


def test_the_rendered_verifier_runs_alone_on_the_standard_library(tmp_path: Path) -> None:
    """What the pod runs: the ConfigMap's verify-artifact.py, with no project package importable
    (``-I``: isolated mode, no user site, no PYTHONPATH, no current directory)."""
    digest = artifact(tmp_path / "art")
    script = tmp_path / VERIFY_SCRIPT
    script.write_text(verifier_source())

    def verify() -> subprocess.CompletedProcess[str]:
        argv = [sys.executable, "-I", str(script), str(tmp_path / "art"), "--manifest-digest", digest]
        return subprocess.run(argv, capture_output=True, text=True, check=False, cwd=tmp_path)

    ok = verify()
    assert ok.returncode == 0 and "artifact verified: 2 files" in ok.stdout, ok.stderr
    (tmp_path / "art/tokenizer/tokenizer.json").write_text("[]")
    bad = verify()
    assert bad.returncode == EXIT_TAMPERED
    assert bad.stderr.startswith("ArtifactTampered: tokenizer/tokenizer.json: sha256 ")


KEY = "abcdef012345"
LINE = "ArtifactTampered: engine/rank0.engine: sha256 1 is not 2 (manifest.json)"


def pod(
    name: str, key: str = KEY, message: str | None = LINE, ready: bool = False, last: bool = False
) -> dict[str, Any]:
    terminated = {"terminated": {"exitCode": EXIT_TAMPERED, "message": message}} if message else {}
    status: dict[str, Any] = {
        "name": "triton",
        "state": {"waiting": {"reason": "CrashLoopBackOff"}} if last else terminated,
        "lastState": terminated if last else {},
    }
    return {
        "metadata": {"name": name, "labels": {LABEL_ENGINE_KEY: key}},
        "status": {
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
            "containerStatuses": [status],
        },
    }


def test_the_verifier_line_is_found_in_a_log_tail() -> None:
    assert tampered_line(f"starting\n{LINE}\n") == LINE
    assert tampered_line("Error: something else") is None


@pytest.mark.parametrize("last", [False, True])
def test_a_pod_that_refused_its_artifact_names_the_file(last: bool) -> None:
    msg = tampered_artifact([pod("ok", message=None), pod("bad", last=last)], KEY, "llama")
    assert msg is not None and "pod bad" in msg and "engine/rank0.engine" in msg and "'llama'" in msg


def test_other_keys_and_ready_pods_do_not_count() -> None:
    assert tampered_artifact([pod("old", key="other")], KEY, "e") is None
    assert tampered_artifact([pod("recovered", ready=True)], KEY, "e") is None


def test_a_tampered_artifact_fails_the_deployment_with_a_warning() -> None:
    msg = tampered_artifact([pod("bad")], KEY, "llama")
    assert msg is not None
    obs = Observation(
        generation=1,
        spec_replicas=1,
        engine_name="llama",
        engine_state="ready",
        blocked=("ArtifactTampered", msg),
    )
    decision = deployment_status(obs)
    ready = next(c for c in decision.conditions if c["type"] == "Ready")
    assert decision.status["phase"] == "Failed"
    assert ready["status"] == "False" and ready["reason"] == "ArtifactTampered" and msg == ready["message"]
    assert any(e.type == "Warning" and e.reason == "ArtifactTampered" for e in decision.events)


def test_manifest_digest_is_the_documented_hash_pinned_as_a_literal() -> None:
    """docs/engine-builder.md: ``manifestDigest`` = ``sha256:`` of the canonical JSON of the manifest
    without ``stageTimings`` and itself. The expected value is a literal from coreutils, not from the
    function under test: ``printf '%s' '{"files":[{"path":"engine/rank0.engine","sha256":"e3b0c442…",
    "size":0}],"partial":false,"schema":"engine-builder.trtllm-operator.dev/manifest/v1","sizeBytes":0}'
    | sha256sum`` (keys sorted, no whitespace)."""
    empty = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"  # sha256 of no bytes
    manifest = {
        "schema": "engine-builder.trtllm-operator.dev/manifest/v1",
        "sizeBytes": 0,
        "partial": False,
        "files": [{"size": 0, "sha256": empty, "path": "engine/rank0.engine"}],
        "stageTimings": {"fetch": 1.5},  # wall clock: left out
        "manifestDigest": "sha256:" + "0" * 64,  # itself: left out
    }
    expected = "sha256:fc67fcb73b1537505ba2e17f10622984efd26c46c26104d144b280e751efa61c"
    assert manifest_digest(manifest) == expected
    assert manifest_digest({**manifest, "stageTimings": {"fetch": 99.0}}) == expected
    assert manifest_digest({**manifest, "sizeBytes": 1}) != expected


def test_one_canonical_json_for_the_key_and_the_manifest_digest() -> None:
    """The engine key and the manifest digest hash the same canonical JSON: one function, in the
    standard-library-only module the serving pod runs (two copies could drift apart and make the
    builder's digest differ from the one the pod checks)."""
    import ast  # noqa: PLC0415

    import engine_builder  # noqa: PLC0415

    src = Path(engine_builder.__file__).parent
    defined = [
        str(path.relative_to(src))
        for path in sorted(src.rglob("*.py"))
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.FunctionDef) and node.name == "canonical_json"
    ]
    assert defined == ["artifact_check.py"]
