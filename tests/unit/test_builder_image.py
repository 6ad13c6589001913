"""The builder image (engine-builder/Dockerfile) keeps the TensorRT-LLM image's pins (audit B11).

TensorRT-LLM 1.2 pins ``nvidia-modelopt[torch]~=0.37.0`` and ``setuptools<80`` (NVIDIA/TensorRT-LLM
``requirements.txt``); the builder needs ModelOpt 0.47, whose own requirements want
``setuptools>=80``. A plain ``pip install nvidia-modelopt==0.47.0`` into the image (what the
Dockerfile did) silently replaces both. The Dockerfile now installs the builder as the delivered
bundle (``--no-deps --target``, hack/build-builder-bundle.sh) and fails its own build when the
image's ``pip freeze`` changes or ``pip check`` fails.

Here the Dockerfile's ``RUN`` chain, up to and including ``pip check`` (what follows compiles CUDA
extensions), runs against a stand-in image: a venv first on ``PATH`` holding a ModelOpt 0.37
distribution (metadata only, the version the real image pins). The bundle installer is given uv
offline, as in test_builder_delivery.py; nothing else in the commands is changed.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "engine-builder" / "Dockerfile"
#: Where the Dockerfile puts the builder (its ENV PYTHONPATH / ENGINE_BUILDER_BUNDLE).
IMAGE_DEST = "/opt/engine-builder"


def _uv() -> Path:
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "trtllm-operator"
    found = sorted(cache.glob("uv-*/bin/uv"))
    assert found, f"no uv under {cache}: run hack/venv.sh"
    return found[-1]


def run_commands() -> list[str]:
    """The commands of the Dockerfile's RUN instruction, in order."""
    text = DOCKERFILE.read_text(encoding="utf-8")
    joined = re.sub(r"\\\n", " ", text)
    runs = [line[len("RUN ") :] for line in joined.splitlines() if line.startswith("RUN ")]
    assert len(runs) == 1, runs
    return [c.strip() for c in runs[0].split(" && ")]


def until_pip_check(commands: list[str]) -> list[str]:
    end = next(i for i, c in enumerate(commands) if c.endswith("pip check"))
    return commands[: end + 1]


def env_of_dockerfile() -> dict[str, str]:
    """``ENV`` values of the Dockerfile that the RUN chain reads (the builder's import path)."""
    text = re.sub(r"\\\n", " ", DOCKERFILE.read_text(encoding="utf-8"))
    return dict(re.findall(r"\b(PYTHONPATH|ENGINE_BUILDER_BUNDLE|PYTHONSAFEPATH)=(\S+)", text))


@pytest.fixture
def image(tmp_path: Path) -> Path:
    """A venv standing in for the image's Python: pip (for freeze/check) and ModelOpt 0.37.

    pip is the base interpreter's own, linked in through a ``.pth`` (``ensurepip`` would take ~25 s
    on this machine); it is a distribution of the venv's path like any other."""
    venv = tmp_path / "trtllm-image"
    base = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([base, "-m", "venv", "--without-pip", str(venv)], check=True)
    where = subprocess.run(
        [base, "-c", "import os, pip; print(os.path.dirname(os.path.dirname(pip.__file__)))"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    site = next(venv.glob("lib/python3*/site-packages"))
    pip_dir = venv / "image-pip"
    pip_dir.mkdir()
    for item in [Path(where) / "pip", *Path(where).glob("pip-*.dist-info")]:
        (pip_dir / item.name).symlink_to(item)
    (site / "image-pip.pth").write_text(f"{pip_dir}\n", encoding="utf-8")
    info = site / "nvidia_modelopt-0.37.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: nvidia-modelopt\nVersion: 0.37.0\n")
    (info / "INSTALLER").write_text("pip\n")
    (info / "RECORD").write_text(
        "".join(f"{info.name}/{name},,\n" for name in ("METADATA", "INSTALLER", "RECORD")), encoding="utf-8"
    )
    return venv


def _run(commands: list[str], image: Path, dest: Path) -> subprocess.CompletedProcess[str]:
    dest.mkdir(parents=True)  # the Dockerfile's WORKDIR /opt/engine-builder/src creates it
    script = " && ".join(commands).replace(IMAGE_DEST, str(dest))
    env = {
        "PATH": f"{image / 'bin'}:/usr/local/bin:/usr/bin:/bin",
        "HOME": os.environ.get("HOME", "/root"),
        "BUNDLE_PIP": f"{_uv()} pip install --offline --quiet --python {image / 'bin' / 'python3'}",
        **{k: v.replace(IMAGE_DEST, str(dest)) for k, v in env_of_dockerfile().items()},
    }
    if "XDG_CACHE_HOME" in os.environ:
        env["XDG_CACHE_HOME"] = os.environ["XDG_CACHE_HOME"]
    return subprocess.run(
        ["sh", "-c", script], check=False, cwd=ROOT, env=env, capture_output=True, text=True
    )


def _freeze(image: Path) -> str:
    out = subprocess.run(
        [str(image / "bin" / "python3"), "-m", "pip", "freeze", "--all"],
        check=True,
        capture_output=True,
        text=True,
    )
    return out.stdout


def test_the_builder_is_installed_beside_the_image_and_the_image_is_checked(
    image: Path, tmp_path: Path
) -> None:
    commands = until_pip_check(run_commands())
    assert any("build-builder-bundle.sh" in c for c in commands), commands
    assert not any(re.search(r"pip install(?!.*--target)", c) for c in commands), commands
    before = _freeze(image)
    assert "nvidia-modelopt==0.37.0" in before
    dest = tmp_path / "engine-builder"
    proc = _run(commands, image, dest)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert _freeze(image) == before  # ModelOpt 0.37, setuptools, pip: the image's own
    assert (dest / "image-constraints.txt").read_text() == before
    bundled = sorted(p.name for p in (dest / "lib").glob("nvidia_modelopt-*.dist-info"))
    assert bundled == ["nvidia_modelopt-0.47.0.dist-info"]
    # The builder's interpreter (the Dockerfile's PYTHONPATH) imports the bundle's ModelOpt.
    env = {**os.environ, **{k: v.replace(IMAGE_DEST, str(dest)) for k, v in env_of_dockerfile().items()}}
    version = subprocess.run(
        [
            str(image / "bin" / "python3"),
            "-c",
            "import importlib.metadata as m; print(m.version('nvidia-modelopt'))",
        ],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert version.stdout.strip() == "0.47.0"


def test_a_change_to_the_image_fails_the_build(image: Path, tmp_path: Path) -> None:
    """The guard itself: a step that changes the image's site-packages (here it removes the image's
    ModelOpt, as an upgrade would) makes the freeze comparison fail the build."""
    commands = until_pip_check(run_commands())
    bundle = next(i for i, c in enumerate(commands) if "build-builder-bundle.sh" in c)
    # The bundle itself is the other test's subject; here it is replaced by the intruding step.
    commands[bundle] = "PYTHONPATH= python3 -m pip uninstall --quiet -y nvidia-modelopt"
    proc = _run(commands, image, tmp_path / "engine-builder")
    assert proc.returncode != 0
    assert "-nvidia-modelopt==0.37.0" in proc.stdout
