"""A real Triton Inference Server on the CPU for tests and ``make demo`` (docs/triton-cpu.md).

* :func:`runtime` installs (once per machine, ``hack/triton-runtime.sh``) and returns the runtime:
  ``tritonserver`` 2.51.0 from ``nvidia-pytriton==0.7.0``, its Python backend and stub, and the
  stub's Python environment.
* :func:`start` runs ``tritonserver`` for a model repository on an address and returns a
  :class:`Server` (PID, URLs, log); :meth:`Server.stop` / :func:`stop` end it by PID.
* :func:`run_launch_script` executes the operator's rendered ``launch.sh`` as a serving pod would,
  with the pod's mounts mapped onto directories of this machine (see its docstring).

What plays the serving image here (``image/``): ``backends/tensorrtllm/`` is the **CPU stand-in
for the TensorRT-LLM engine** (a Python-based backend named ``tensorrtllm``, not the GPU engine),
and ``all_models/`` holds stand-ins for the image's Python model code (pre/post-processing, BLS,
the LLM-API model). Everything else — the server, the ensemble scheduler, the HTTP/gRPC APIs,
the metrics endpoint, the Python backend, the tokenizers — is the real thing.

Command line: ``hack/triton-cpu start --address 127.1.0.5 --model-repository DIR`` prints the
PID; ``hack/triton-cpu stop PID``.

Standard library only: the demo, the tests and the command line all import it.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RUNTIME_SCRIPT = ROOT / "hack" / "triton-runtime.sh"
IMAGE = Path(__file__).resolve().parent / "image"
#: The serving image's model code and backends, as the rendered launch script expects them.
IMAGE_ALL_MODELS = IMAGE / "all_models"
STANDIN_BACKEND = IMAGE / "backends" / "tensorrtllm"
#: ``tritonserver`` wrapper put first on ``PATH`` for launch scripts (see :func:`run_launch_script`).
POD_BIN = Path(__file__).resolve().parent / "podbin"

TRITON_VERSION = "2.51.0"
#: Seconds Triton waits for in-flight requests and model unloads at exit (``--exit-timeout-secs``).
EXIT_TIMEOUT_SECS = 5
#: Seconds the Python backend waits for a stub to start (``stub-timeout-seconds``, default 30).
STUB_TIMEOUT_SECS = 180


class TritonError(RuntimeError):
    """The runtime could not be installed, or a server did not start or stop; says why."""


_runtime: Path | None = None


def runtime() -> Path:
    """The installed runtime directory (installs it first if needed: ~12 s warm, a few minutes cold).

    Raises :class:`TritonError` with the installer's output when the install fails.
    """
    global _runtime  # noqa: PLW0603 - one install per process
    if _runtime is not None and (_runtime / ".complete").exists():
        return _runtime
    proc = subprocess.run(["bash", str(RUNTIME_SCRIPT)], capture_output=True, text=True, check=False)
    if proc.returncode != 0 or not proc.stdout.strip():
        raise TritonError(f"{RUNTIME_SCRIPT} failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
    _runtime = Path(proc.stdout.strip().splitlines()[-1])
    return _runtime


def server_env(rt: Path, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """Environment of a server: the stub's Python first on ``PATH`` (the stub uses the first
    ``python3`` there), the runtime's shared libraries on ``LD_LIBRARY_PATH``, one thread for PyTorch
    (the machine is shared; the stand-in is tiny)."""
    env = dict(os.environ if base is None else base)
    env["PATH"] = f"{rt / 'venv' / 'bin'}:{env.get('PATH', '/usr/bin:/bin')}"
    env["LD_LIBRARY_PATH"] = f"{rt / 'lib'}:{env.get('LD_LIBRARY_PATH', '')}".rstrip(":")
    env.pop("PYTHONPATH", None)
    env.pop("VIRTUAL_ENV", None)
    env.setdefault("OMP_NUM_THREADS", "1")
    env.setdefault("TRANSFORMERS_VERBOSITY", "error")
    env["HF_HUB_OFFLINE"] = "1"
    return env


def backend_directory(rt: Path, work: Path) -> Path:
    """``<work>/backends``: ``python`` (the runtime's Python backend) and ``tensorrtllm`` (the CPU
    stand-in, a Python-based backend), as ``/opt/tritonserver/backends`` is laid out in the image."""
    backends = work / "backends"
    backends.mkdir(parents=True, exist_ok=True)
    for name, target in (("python", rt / "backends" / "python"), ("tensorrtllm", STANDIN_BACKEND)):
        link = backends / name
        if not link.exists():
            link.symlink_to(target, target_is_directory=True)
    return backends


def environment_args(backends: Path, address: str) -> list[str]:
    """What this machine adds to the pod's own ``tritonserver`` arguments: the backend directory, the
    pod's address (a pod has its own network namespace; here a loopback address stands in), exit
    and stub start-up timeouts."""
    return [
        f"--backend-directory={backends}",
        f"--http-address={address}",
        f"--grpc-address={address}",
        f"--metrics-address={address}",
        f"--exit-timeout-secs={EXIT_TIMEOUT_SECS}",
        # A shared 2-core machine can take longer than the default 30 s to start a stub that
        # imports PyTorch; the stub's handshake then fails with boost::interprocess::lock_exception.
        f"--backend-config=python,stub-timeout-seconds={STUB_TIMEOUT_SECS}",
    ]


@dataclass
class Server:
    """One running ``tritonserver`` (or launch script) and where it answers."""

    pid: int
    address: str
    http_port: int
    grpc_port: int
    metrics_port: int
    log_path: Path
    work_dir: Path
    proc: subprocess.Popen[bytes] | None = field(default=None, repr=False)
    #: The ``TRITON_ADMIN_KEY`` the launch script ran with (the value of Triton's ``admin-key``
    #: header for its restricted APIs); None for a server started without a launch script.
    admin_key: str | None = field(default=None, repr=False)

    @property
    def url(self) -> str:
        return f"http://{self.address}:{self.http_port}"

    @property
    def metrics_url(self) -> str:
        return f"http://{self.address}:{self.metrics_port}/metrics"

    def alive(self) -> bool:
        if self.proc is not None:
            return self.proc.poll() is None
        return _pid_alive(self.pid)

    def ready(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.url}/v2/health/ready", timeout=2) as resp:
                return bool(resp.status == 200)
        except (urllib.error.URLError, OSError):
            return False

    def wait_ready(self, timeout: float = 120.0) -> None:
        """Until ``/v2/health/ready`` answers 200. Raises :class:`TritonError` with the log tail when
        the server exits or ``timeout`` seconds pass."""
        deadline = time.monotonic() + timeout
        while not self.ready():
            if not self.alive():
                raise TritonError(f"tritonserver (pid {self.pid}) exited:\n{self.log_tail()}")
            if time.monotonic() > deadline:
                raise TritonError(
                    f"tritonserver (pid {self.pid}) not ready after {timeout:.0f} s:\n{self.log_tail()}"
                )
            time.sleep(0.25)

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def log_tail(self, lines: int = 40) -> str:
        return "\n".join(self.log_text().splitlines()[-lines:])

    def stop(self, timeout: float = 30.0) -> None:
        stop(self.pid, timeout=timeout)
        if self.proc is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=1)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    with contextlib.suppress(OSError):
        if Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1].startswith("Z"):
            return False
    return True


def stop(pid: int, timeout: float = 30.0) -> bool:
    """Stop what :func:`start` / :func:`run_launch_script` started: SIGTERM to the process that was
    started in its own session (the launch script forwards it to ``mpirun``, which forwards it to
    every rank), then SIGTERM to every process group left in that session (``mpirun`` gives ranks
    their own groups), SIGKILL to what is left after ``timeout`` s. Only processes of that session
    are touched. Returns True if it had to kill."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    signalled: set[int] = set()
    while time.monotonic() < deadline:
        members = _session(pid)
        if not members:
            return False
        if not _pid_alive(pid) or time.monotonic() > deadline - timeout / 2:
            for pgid in {g for _, g in members} - signalled:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(pgid, signal.SIGTERM)
                signalled.add(pgid)
        time.sleep(0.1)
    for member, _ in _session(pid):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(member, signal.SIGKILL)
    return True


def _session(sid: int) -> list[tuple[int, int]]:
    """(pid, process group) of the live processes of session ``sid``."""
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, IndexError, ValueError):
            fields = stat.read_text().rsplit(") ", 1)[1].split()
            if int(fields[3]) == sid and fields[0] != "Z":
                out.append((int(stat.parent.name), int(fields[2])))
    return out


def _spawn(argv: list[str], env: Mapping[str, str], log_path: Path, cwd: Path) -> subprocess.Popen[bytes]:
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("ab") as log:
        return subprocess.Popen(
            argv,
            cwd=cwd,
            env=dict(env),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def start(
    model_repository: Path | str,
    *,
    address: str = "127.0.0.1",
    http_port: int = 8000,
    grpc_port: int = 8001,
    metrics_port: int = 8002,
    work_dir: Path | None = None,
    extra_args: Iterable[str] = (),
    log_path: Path | None = None,
) -> Server:
    """Start ``tritonserver --model-repository=<repo>`` bound to ``address`` (not waiting for it).

    Its log goes to ``log_path`` (default ``<work_dir>/tritonserver.log``); call
    :meth:`Server.wait_ready`. Raises :class:`TritonError` if the runtime cannot be installed.
    """
    rt = runtime()
    work = Path(work_dir) if work_dir else Path(tempfile.mkdtemp(prefix="tritoncpu-"))
    work.mkdir(parents=True, exist_ok=True)
    backends = backend_directory(rt, work)
    argv = [
        str(rt / "bin" / "tritonserver"),
        f"--model-repository={Path(model_repository).resolve()}",
        f"--http-port={http_port}",
        f"--grpc-port={grpc_port}",
        f"--metrics-port={metrics_port}",
        "--disable-auto-complete-config",
        *environment_args(backends, address),
        *extra_args,
    ]
    log = log_path or work / "tritonserver.log"
    proc = _spawn(argv, server_env(rt), log, work)
    (work / "server.json").write_text(json.dumps({"pid": proc.pid, "argv": argv}))
    return Server(proc.pid, address, http_port, grpc_port, metrics_port, log, work, proc)


# ------------------------------------------------------------------------------ shared memory
#: Where POSIX shared memory lives (``shm_open`` names are files here on Linux).
SHM_DIR = Path("/dev/shm")


def shm_names(maps_text: str) -> set[str]:
    """The ``/dev/shm`` names mapped in a ``/proc/<pid>/maps`` text (``proc(5)``: the sixth field is
    the path, `` (deleted)`` appended once unlinked).

    The Python backend's shared memory is such a mapping: each stub's region (the Triton process and
    its ``triton_python_backend_stub`` both map it) is a ``shm_open`` object named
    ``<shm-region-prefix-name><unique suffix>`` (triton-inference-server/python_backend r24.10
    ``src/stub_launcher.cc`` ``StubLauncher::Initialize``/``Setup``; the prefix is the
    ``--backend-config=python,shm-region-prefix-name=…`` the launch script passes, ``prefix<rank>_``
    here). The parent unlinks it only when the stub is torn down cleanly (``src/shm_manager.cc``
    ``~SharedMemoryManager``: ``shared_memory_object::remove`` when it created the region), so a
    server that aborts or is killed leaves it behind.
    """
    names = set()
    for line in maps_text.splitlines():
        fields = line.split(None, 5)
        if len(fields) == 6:
            path = fields[5].removesuffix(" (deleted)")
            if path.startswith(f"{SHM_DIR}/") and "/" not in path[len(str(SHM_DIR)) + 1 :]:
                names.add(path[len(str(SHM_DIR)) + 1 :])
    return names


def _maps_of(pids: Iterable[int]) -> set[str]:
    names: set[str] = set()
    for pid in pids:
        with contextlib.suppress(OSError):
            names |= shm_names(Path(f"/proc/{pid}/maps").read_text())
    return names


def shm_regions(pid: int) -> set[str]:
    """The ``/dev/shm`` names mapped by the live processes of the session ``pid`` leads (what
    :func:`start` / :func:`run_launch_script` started: the script, ``mpirun``, every rank's
    ``tritonserver`` and its Python-backend stubs). Only these are ever this server's own."""
    return _maps_of(member for member, _ in _session(pid))


def shm_in_use() -> set[str]:
    """The ``/dev/shm`` names any live process of this machine maps now."""
    return _maps_of(int(p.name) for p in Path("/proc").glob("[0-9]*"))


def remove_shm_regions(
    names: Iterable[str], *, in_use: set[str] | None = None, shm_dir: Path = SHM_DIR
) -> list[str]:
    """Unlink the regions ``names`` (recorded by :func:`shm_regions` while their server ran) that
    still exist and that no live process maps (``in_use``, default :func:`shm_in_use`): a region
    another process still maps is never removed, so servers running concurrently (the CI's) keep
    theirs. Returns the names removed, sorted."""
    wanted = sorted({n for n in names if n and "/" not in n and n not in (".", "..")})
    if not wanted:
        return []
    busy = shm_in_use() if in_use is None else in_use
    removed = []
    for name in wanted:
        if name in busy:
            continue
        with contextlib.suppress(FileNotFoundError):
            (shm_dir / name).unlink()
            removed.append(name)
    return removed


# ------------------------------------------------------------------------------------ launch.sh
def pod_mounts(*, artifact: Path, config: Path, repository: Path) -> dict[str, str]:
    """The serving pod's mount paths and the image's model-code directory, mapped to directories
    here. The paths come from their homes in ``trtllm_operator`` (``render.serving``,
    ``decide.serving_params``; imported here:
    only the tests and the demo, which run in the project virtualenv, lay out pods)."""
    from trtllm_operator.decide.serving_params import ARTIFACT_MOUNT  # noqa: PLC0415
    from trtllm_operator.render.serving import (  # noqa: PLC0415
        CONFIG_MOUNT,
        IMAGE_TEMPLATES,
        MODEL_REPOSITORY,
    )

    images = {str(Path(p).parent) for p in IMAGE_TEMPLATES.values()}  # /app/all_models
    return {
        MODEL_REPOSITORY: str(repository),
        CONFIG_MOUNT: str(config),
        ARTIFACT_MOUNT: str(artifact),
        **dict.fromkeys(images, str(IMAGE_ALL_MODELS)),
    }


def localize(text: str, mounts: Mapping[str, str]) -> str:
    """``text`` (a launch script, a ``config.pbtxt``) with every pod mount path replaced by its
    directory here, in one pass; only where a path starts (not inside another path)."""
    import re  # noqa: PLC0415

    pattern = re.compile(
        r"(?<![\w./-])("
        + "|".join(re.escape(m) for m in sorted(mounts, key=len, reverse=True))
        + r")(?=[/\"'\s;:]|$)"
    )
    return pattern.sub(lambda m: mounts[m.group(1)], text)


def write_configmap(
    data: Mapping[str, str], items: Iterable[Mapping[str, object]], dest: Path, mounts: Mapping[str, str]
) -> None:
    """Materialize a ConfigMap volume: each ``items`` entry (``key``, ``path``, ``mode``) from ``data``
    at ``dest/<path>``, with pod paths inside the files localized (what the pod reads at
    ``/artifact/...`` is under the artifact directory here)."""
    for item in items:
        key, rel = str(item["key"]), str(item["path"])
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(localize(data[key], mounts))
        mode = item.get("mode")
        if isinstance(mode, int):
            target.chmod(mode)


def run_launch_script(
    configmap_data: Mapping[str, str],
    volume_items: Iterable[Mapping[str, object]],
    artifact: Path,
    *,
    address: str,
    work_dir: Path,
    launch_key: str = "launch.sh",
    log_path: Path | None = None,
    extra_mounts: Mapping[str, str] | None = None,
    extra_env: Mapping[str, str] | None = None,
) -> Server:
    """Run the operator's rendered ``launch.sh`` the way a serving pod runs it, on this machine.

    The pod's volumes become directories: the model-repository ConfigMap is written with its
    volume ``items`` (``trtllm_operator.render.model_repository.volume_items``), the artifact volume
    is ``artifact``, the ``/model-repository`` emptyDir is ``<work_dir>/model-repository``, and the
    image's ``/app/all_models`` is :data:`IMAGE_ALL_MODELS`. The script and files are run as rendered
    except that those mount paths are rewritten (:func:`localize`). ``tritonserver`` on ``PATH`` is
    a wrapper (``podbin/tritonserver``) that execs the real server with the pod's own arguments
    plus :func:`environment_args` (backend directory, the pod's address). ``mpirun`` is the
    machine's Open MPI (``hack/ci-deps.sh`` installs it), exactly as the script calls it.

    ``extra_mounts`` maps further paths (e.g. the ``serving_root`` the builder's packaged files name).
    Ports are the pod's: 8000/8001/8002 on ``address``. Returns the :class:`Server` of the script
    (its PID is the script's process group).

    A script that runs Triton's OpenAI frontend (``spec.server.api: openai``/``both``) gets
    ``--host=<address>`` after its ``--openai-port`` (the pod's address, as :func:`environment_args`
    gives ``tritonserver``); ``extra_mounts`` must then map ``/opt/tritonserver/python/openai`` and
    ``extra_env`` carry :meth:`tritoncpu.openai_frontend.Overlay.env` (docs/triton-cpu.md).
    """
    rt = runtime()
    work = Path(work_dir)
    if work.exists():
        shutil.rmtree(work)
    config, repository = work / "config", work / "model-repository"
    repository.mkdir(parents=True)
    mounts = {
        **pod_mounts(artifact=Path(artifact).resolve(), config=config, repository=repository),
        **(extra_mounts or {}),
    }
    write_configmap(configmap_data, volume_items, config, mounts)
    script = config / launch_key
    if not script.exists():
        raise TritonError(f"the ConfigMap has no {launch_key}")
    if "mpirun " in script.read_text() and shutil.which("mpirun") is None:
        raise TritonError(
            f"{launch_key} runs mpirun (tensor/pipeline parallelism > 1) and this machine has none: "
            "install Open MPI (hack/ci-deps.sh as root, or apt-get install openmpi-bin)"
        )
    text = script.read_text()
    port = re.search(r"--openai-port=(\d+)", text)
    if port is not None:
        script.write_text(text.replace(port.group(0), f"{port.group(0)} --host={address}", 1))
    backends = backend_directory(rt, work)
    env = server_env(rt)
    # A pod gets TRITON_ADMIN_KEY from its Secret <name>-credentials (secretKeyRef); here: the
    # caller's (extra_env, e.g. PodRunner resolving the pod's reference), else a fresh random value.
    env["TRITON_ADMIN_KEY"] = secrets.token_hex(32)
    env.update(extra_env or {})
    env["PATH"] = f"{POD_BIN}:{env['PATH']}"
    env["TRITONCPU_REAL_SERVER"] = str(rt / "bin" / "tritonserver")
    env["TRITONCPU_ENV_ARGS"] = "\n".join(environment_args(backends, address))
    env["OMPI_MCA_rmaps_base_oversubscribe"] = "1"  # more ranks than the 2 cores of this machine
    env["OMPI_ALLOW_RUN_AS_ROOT"] = "1"
    env["OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"] = "1"
    log = log_path or work / "pod.log"
    proc = _spawn(["bash", str(script)], env, log, work)
    (work / "server.json").write_text(json.dumps({"pid": proc.pid, "address": address}))
    return Server(proc.pid, address, 8000, 8001, 8002, log, work, proc, env["TRITON_ADMIN_KEY"])
