"""Triton's OpenAI-compatible frontend on this machine's CPU Triton (docs/triton-cpu.md).

The ``-trtllm-python-py3`` images run ``/opt/tritonserver/python/openai/openai_frontend/main.py``
(triton-inference-server/server ``python/openai``) on the in-process ``tritonserver`` Python API.
The CPU runtime here (``nvidia-pytriton==0.7.0``) ships the ``tritonserver`` binary and
``libtritonserver.so`` (Triton 2.51) but not that Python API. So an overlay is assembled from the
two upstream repositories at the 26.03 images' release branch (``r26.03``), vendored here:

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

Sources: vendored in ``hack/tritoncpu/vendor/triton-r26.03/`` (README.md there: the upstream commits,
the path list, the BSD-3-Clause license; ``SOURCES`` holds every file's git blob id, which
tests/unit/test_tritoncpu_vendor.py checks). The overlay is built once per vendored tree and
builder (this module), next to the runtime in ``~/.cache/trtllm-operator/``.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from tritoncpu import STUB_TIMEOUT_SECS, TritonError, runtime

BRANCH = "r26.03"
#: The vendored upstream files: ``server/`` (triton-inference-server/server) and ``core/``
#: (triton-inference-server/core), each at its repository's own paths.
VENDOR = Path(__file__).resolve().parent / "vendor" / f"triton-{BRANCH}"
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


def _run(argv: list[str], **kw: object) -> None:
    proc = subprocess.run(argv, capture_output=True, text=True, check=False, **kw)  # type: ignore[call-overload]
    if proc.returncode != 0:
        raise TritonError(f"{' '.join(argv[:4])} … failed ({proc.returncode}):\n{proc.stderr[-3000:]}")


def vendored_files() -> list[tuple[str, str, str, str]]:
    """``(repository, commit, path, git blob id)`` of every vendored file, from ``SOURCES``; the file
    is ``VENDOR / <repository's last name> / path``."""
    rows = []
    for line in (VENDOR / "SOURCES").read_text().splitlines():
        if line and not line.startswith("#"):
            repo, commit, path, blob = line.split()
            rows.append((repo, commit, path, blob))
    return rows


def vendored_commits() -> dict[str, str]:
    """``{"server": commit, "core": commit}`` of the vendored files."""
    return {repo.rsplit("/", 1)[1]: commit for repo, commit, _path, _blob in vendored_files()}


def _stamp(python: Path) -> str:
    """What the overlay is built from: the vendored files, this builder, the runtime's interpreter."""
    digest = hashlib.sha256()
    for _repo, _commit, path, blob in vendored_files():
        digest.update(f"{path} {blob}\n".encode())
    digest.update(Path(__file__).read_bytes())
    digest.update(str(python.resolve()).encode())
    return digest.hexdigest()[:12]


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


def overlay() -> Overlay:
    """Build (once per vendored tree, in the runtime's cache directory) and return the overlay.

    A cold build installs the Python packages (uv's cache) and compiles the bindings (g++, about
    40 s on a 2-core machine); a concurrent second caller waits on a lock and reuses it.
    """
    rt = runtime()
    python = rt / "venv" / "bin" / "python"
    dest = rt.parent / f"triton-openai-{BRANCH}-{_stamp(python)}"
    done = dest / "COMPLETE"
    result = Overlay(dest / "frontend" / "openai", (dest / "core" / "python", dest / "site"))
    if done.exists():
        return result
    with (rt.parent / f".triton-openai-{BRANCH}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.exists():
            _build(rt, python, dest, result)
    return result


def _build(rt: Path, python: Path, dest: Path, result: Overlay) -> None:
    started = time.monotonic()
    shutil.rmtree(dest, ignore_errors=True)
    result.frontend.mkdir(parents=True)
    shutil.copytree(
        VENDOR / "server" / "python" / "openai" / "openai_frontend", result.frontend / "openai_frontend"
    )
    shutil.copytree(VENDOR / "core" / "python" / "tritonserver", dest / "core" / "python" / "tritonserver")
    shutil.copytree(VENDOR / "core" / "include", dest / "core" / "include")
    _patch_options(dest / "core" / "python" / "tritonserver" / "_api" / "_server.py")
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
    (dest / "COMPLETE").write_text(json.dumps({**vendored_commits(), "library": str(lib)}))
    print(
        f"[tritoncpu] OpenAI frontend overlay built in {time.monotonic() - started:.0f} s: {dest}",
        file=sys.stderr,
    )
