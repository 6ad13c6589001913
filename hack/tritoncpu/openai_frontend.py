"""Triton's OpenAI-compatible frontend on this machine's CPU Triton (docs/triton-cpu.md).

The ``-trtllm-python-py3`` images run ``/opt/tritonserver/python/openai/openai_frontend/main.py``
(triton-inference-server/server ``python/openai``) on the in-process ``tritonserver`` Python API.
The CPU runtime here (``nvidia-pytriton==0.7.0``) ships the ``tritonserver`` binary and
``libtritonserver.so`` (Triton 2.51) but not that Python API, and this machine cannot reach GitHub.
So the overlay is assembled from local git checkouts of the two upstream repositories, at the 26.03
images' release branch (``r26.03``):

- ``python/openai`` of triton-inference-server/server, unmodified;
- ``python/tritonserver`` of triton-inference-server/core: its pure-Python API unmodified except two
  defaults that read this machine's paths from the environment (``backend_directory``: the image's
  ``/opt/tritonserver/backends``; ``backend_configuration``: the Python backend's stub timeout, as
  :func:`tritoncpu.environment_args` gives ``tritonserver``) — the frontend's command line has no
  flag for either; and its pybind11 bindings compiled here against that branch's
  ``include/triton/core/tritonserver.h`` and linked to the runtime's 2.51 ``libtritonserver.so``
  (every C API function the r26.03 bindings call exists in 2.51);
- the frontend's Python requirements (``python/openai/requirements.txt`` r26.03: fastapi 0.121.2,
  httpx 0.27.2, openai 1.107.3, partial-json-parser; plus uvicorn) and transformers 4.56.2: the
  frontend calls ``tokenizer.all_special_tokens_extended``, which transformers 5 (the runtime's)
  no longer has. A ``sitecustomize`` drops ``PYTHONPATH`` once the frontend's interpreter started,
  so the Python-backend stubs the in-process server starts keep the runtime's own packages.

Sources: ``TRITON_SERVER_GIT`` and ``TRITON_CORE_GIT`` name git directories (bare or not) of those
repositories holding branch ``r26.03``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from tritoncpu import STUB_TIMEOUT_SECS, TritonError, runtime

BRANCH = "r26.03"
SERVER_GIT_ENV = "TRITON_SERVER_GIT"
CORE_GIT_ENV = "TRITON_CORE_GIT"
#: Python packages of the frontend's process (see the module docstring).
REQUIREMENTS = (
    "fastapi==0.121.2",
    "httpx==0.27.2",
    "openai==1.107.3",
    "partial-json-parser==0.2.1.1.post7",
    "starlette==0.49.3",
    "uvicorn==0.54.0",
    "transformers==4.56.2",
    "jinja2==3.1.6",
    "pybind11==3.1.0",
)
SITECUSTOMIZE = """\
# trtllm-operator hack/tritoncpu: this overlay is for the OpenAI frontend's process only. Triton's
# Python-backend stubs, which the in-process server starts, keep the runtime venv's packages.
import os

os.environ.pop("PYTHONPATH", None)
"""


@dataclass(frozen=True)
class Overlay:
    """What a launch script running the frontend needs: ``frontend`` replaces the image's
    ``/opt/tritonserver/python/openai``; ``pythonpath`` goes before the runtime's packages."""

    frontend: Path
    pythonpath: tuple[Path, ...]

    def env(self, backends: Path) -> dict[str, str]:
        return {
            "PYTHONPATH": os.pathsep.join(str(p) for p in self.pythonpath),
            "TRITONCPU_BACKEND_DIRECTORY": str(backends),
            "TRITONCPU_BACKEND_CONFIG": json.dumps(
                {"python": {"stub-timeout-seconds": str(STUB_TIMEOUT_SECS)}}
            ),
        }


def sources() -> tuple[Path, Path] | None:
    """``(server git, core git)`` from the environment, or None when either is unset."""
    server, core = os.environ.get(SERVER_GIT_ENV), os.environ.get(CORE_GIT_ENV)
    if not server or not core:
        return None
    return Path(server), Path(core)


def _run(argv: list[str], **kw: object) -> None:
    proc = subprocess.run(argv, capture_output=True, text=True, check=False, **kw)  # type: ignore[call-overload]
    if proc.returncode != 0:
        raise TritonError(f"{' '.join(argv[:4])} … failed ({proc.returncode}):\n{proc.stderr[-3000:]}")


def _archive(git_dir: Path, paths: list[str], dest: Path) -> None:
    dest.mkdir(parents=True, exist_ok=True)
    archive = subprocess.run(
        ["git", f"--git-dir={_git_dir(git_dir)}", "archive", BRANCH, *paths],
        capture_output=True,
        check=False,
    )
    if archive.returncode != 0:
        raise TritonError(f"git archive {BRANCH} of {git_dir}: {archive.stderr.decode()[-2000:]}")
    untar = subprocess.run(
        ["tar", "x", "-C", str(dest)], input=archive.stdout, capture_output=True, check=False
    )
    if untar.returncode != 0:
        raise TritonError(f"tar x into {dest}: {untar.stderr.decode()[-2000:]}")


def _git_dir(path: Path) -> Path:
    return path / ".git" if (path / ".git").exists() else path


def _commit(git_dir: Path) -> str:
    out = subprocess.run(
        ["git", f"--git-dir={_git_dir(git_dir)}", "rev-parse", BRANCH],
        capture_output=True,
        text=True,
        check=False,
    )
    if out.returncode != 0:
        raise TritonError(f"{git_dir} has no branch {BRANCH}: {out.stderr.strip()}")
    return out.stdout.strip()


def _patch_options(server_py: Path) -> None:
    text = server_py.read_text()
    replacements = {
        '    backend_directory: str = "/opt/tritonserver/backends"': (
            "    backend_directory: str = "
            'os.environ.get("TRITONCPU_BACKEND_DIRECTORY", "/opt/tritonserver/backends")'
        ),
        "        default_factory=dict[str, dict[str, str]]\n    )\n    host_policies": (
            '        default_factory=lambda: json.loads(os.environ.get("TRITONCPU_BACKEND_CONFIG", "{}"))\n'
            "    )\n    host_policies"
        ),
    }
    for old, new in replacements.items():
        if text.count(old) != 1:
            raise TritonError(f"{server_py}: expected one {old.strip()!r} to patch")
        text = text.replace(old, new)
    if "\nimport os\n" not in text:
        text = text.replace("\nimport json\n", "\nimport json\nimport os\n", 1)
    server_py.write_text(text)


def overlay(server_git: Path, core_git: Path) -> Overlay:
    """Build (once per pair of commits, in the runtime's cache directory) and return the overlay."""
    rt = runtime()
    stamp = f"{_commit(server_git)[:12]}-{_commit(core_git)[:12]}"
    dest = rt.parent / f"triton-openai-{BRANCH}-{stamp}"
    done = dest / "COMPLETE"
    result = Overlay(dest / "frontend" / "openai", (dest / "core" / "python", dest / "site"))
    if done.exists():
        return result
    shutil.rmtree(dest, ignore_errors=True)
    _archive(server_git, ["python/openai"], dest / "server")
    (dest / "frontend").mkdir(parents=True)
    (dest / "server" / "python" / "openai").rename(result.frontend)
    _archive(core_git, ["python/tritonserver", "include"], dest / "core")
    _patch_options(dest / "core" / "python" / "tritonserver" / "_api" / "_server.py")
    python = rt / "venv" / "bin" / "python"
    uv = shutil.which("uv") or str(next(rt.parent.glob("uv-*/bin/uv"), "uv"))
    _run([uv, "pip", "install", "-q", "--target", str(dest / "site"), "--python", str(python), *REQUIREMENTS])
    for numpy in (dest / "site").glob("numpy*"):  # the runtime's numpy 1.x (the stub's ABI) stays
        shutil.rmtree(numpy)
    (dest / "site" / "sitecustomize.py").write_text(SITECUSTOMIZE)
    lib = next((rt / "venv").rglob("nvidia_pytriton.libs/libtritonserver-*.so"))
    includes = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['include'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    suffix = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_config_var('EXT_SUFFIX'))"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    c_dir = dest / "core" / "python" / "tritonserver" / "_c"
    _run(
        [
            "g++",
            "-O1",
            "-shared",
            "-fPIC",
            "-std=c++17",
            f"-I{includes}",
            f"-I{dest / 'site' / 'pybind11' / 'include'}",
            f"-I{dest / 'core' / 'include'}",
            str(c_dir / "tritonserver_pybind.cc"),
            "-o",
            str(c_dir / f"triton_bindings{suffix}"),
            f"-L{lib.parent}",
            f"-l:{lib.name}",
            f"-Wl,-rpath,{lib.parent}",
        ]
    )
    done.write_text(
        json.dumps({"server": _commit(server_git), "core": _commit(core_git), "library": str(lib)})
    )
    return result
