"""Dependency hashes of what the images install (issue 24, "no dependency hashes"): the operator
image's operator/requirements.lock and the builder bundle's engine-builder/bundle-requirements.txt pin
every distribution by version and PyPI sha256, and the installs run in hash-checking mode
(pip "Hash-checking mode", --require-hashes: a file whose hash is not listed fails the install).

The hashes themselves came from PyPI (uv pip compile --generate-hashes; the simple index's
hashes.sha256); these tests check the files agree with the direct pins of the two pyproject.toml files
and are wired into the builds, not the hashes' values (no network in tests)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LOCK = ROOT / "operator" / "requirements.lock"
BUNDLE = ROOT / "engine-builder" / "bundle-requirements.txt"


def _normalize(name: str) -> str:
    """PEP 503 normalized project name."""
    return re.sub(r"[-_.]+", "-", name).lower()


def pinned_with_hashes(path: Path) -> dict[str, tuple[str, list[str]]]:
    """``{name: (version, [sha256, ...])}`` of a requirements file in pip's hash format."""
    text = re.sub(r"\\\n", " ", path.read_text())
    out: dict[str, tuple[str, list[str]]] = {}
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        m = re.fullmatch(r"([A-Za-z0-9_.-]+)==([^\s;]+)((?:\s+--hash=sha256:[0-9a-f]{64})*)", line)
        assert m, f"{path.name}: not `name==version --hash=sha256:...`: {line!r}"
        out[_normalize(m[1])] = (m[2], re.findall(r"sha256:([0-9a-f]{64})", m[3]))
    return out


def direct_pins(pyproject: Path) -> dict[str, str]:
    deps = tomllib.loads(pyproject.read_text())["project"]["dependencies"]
    pins = {}
    for dep in deps:
        m = re.fullmatch(r"([A-Za-z0-9_.-]+)==(\S+)", dep)
        assert m, f"{pyproject}: a runtime dependency not pinned with ==: {dep!r}"
        pins[_normalize(m[1])] = m[2]
    return pins


@pytest.mark.parametrize("path", [LOCK, BUNDLE], ids=lambda p: p.name)
def test_every_pin_carries_its_hashes(path: Path) -> None:
    pins = pinned_with_hashes(path)
    assert pins
    for name, (_, hashes) in pins.items():
        assert hashes, f"{path.name}: {name} has no --hash"


def test_the_lock_holds_the_pyproject_pins() -> None:
    lock = pinned_with_hashes(LOCK)
    wanted = {
        **direct_pins(ROOT / "operator" / "pyproject.toml"),
        **direct_pins(ROOT / "engine-builder" / "pyproject.toml"),
    }
    del wanted["trtllm-engine-builder"]  # installed from the tree, --no-deps
    differing = {
        n: (v, lock.get(n, ("missing",))[0]) for n, v in wanted.items() if lock.get(n, ("",))[0] != v
    }
    assert not differing, (
        f"pyproject pin vs operator/requirements.lock (regenerate it, see its header): {differing}"
    )
    assert "setuptools" in lock  # the build backend, installed without build isolation


def test_the_bundle_pins_match_the_builder_extras() -> None:
    """The bundle's ModelOpt and boto3 are the versions engine-builder's [quantize] / [s3] extras pin
    (the versions the tests run)."""
    extras = tomllib.loads((ROOT / "engine-builder" / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    pins = {
        _normalize(m[1]): m[2]
        for dep in extras["quantize"] + extras["s3"]
        if (m := re.fullmatch(r"([A-Za-z0-9_.-]+)==(\S+)", dep))
    }
    bundle = pinned_with_hashes(BUNDLE)
    for name in ("nvidia-modelopt", "boto3"):
        assert bundle[name][0] == pins[name], name


def test_the_installs_run_in_hash_checking_mode() -> None:
    dockerfile = (ROOT / "operator" / "Dockerfile").read_text()
    assert "--require-hashes -r operator/requirements.lock" in dockerfile
    assert "--no-deps --no-build-isolation ./engine-builder ./operator" in dockerfile
    script = (ROOT / "hack" / "build-builder-bundle.sh").read_text()
    assert '--require-hashes --target "$DEST/lib" -r engine-builder/bundle-requirements.txt' in script
