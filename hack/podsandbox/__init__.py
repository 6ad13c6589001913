"""Run a serving pod's scripts on this machine the way a pod runs them, with Linux namespaces.

A "pod" here is a process tree with what a container gives its processes, and nothing mocked:

* its own **filesystem**: an overlay of this machine's root (the "image": bash, Open MPI's
  ``mpirun``/``orted``, OpenSSH's ``sshd``/``ssh``) with the pod's files on top (the volumes: the
  ConfigMap at its mount path, the artifact, the image's model code, ``/etc/hosts`` as the
  cluster's DNS would answer, ``/etc/ssh/sshd_config``), fresh ``/tmp`` and ``/run``, its own
  ``/proc``;
* its own **host name** (UTS namespace) and **PID namespace** (the main process is PID 1, so
  ``pgrep`` sees only the pod's processes, as in a container);
* an **environment** given in full (``env -i``), like a container's ``ENV`` plus the pod's ``env``;
* a **loopback address** of its own (``127.x.y.z``) for the servers it starts: pods share this
  machine's network namespace, so each pod's ``/etc/ssh/sshd_config`` names its ``ListenAddress``.

Needs root (mount, UTS and PID namespaces; overlayfs), util-linux ``unshare``, and for SSH the
Debian packages ``openssh-server`` and ``openmpi-bin`` (``hack/ci-deps.sh``). Everything a pod
starts lives in its PID namespace and dies with it (:meth:`Pod.stop`). Standard library only.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

#: ``PATH`` of the pods' "image": the serving image's ``ENV PATH`` puts ``/opt/tritonserver/bin``
#: first (Triton's ``build.py`` Dockerfile); here a stand-in ``tritonserver`` goes there.
IMAGE_PATH = "/opt/tritonserver/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


class SandboxError(RuntimeError):
    """The machine cannot run pod sandboxes (not root, no overlayfs, missing programs)."""


def check_host(*programs: str) -> None:
    """Raise :class:`SandboxError` saying what is missing (root, ``unshare``, ``programs``)."""
    if os.geteuid() != 0:
        raise SandboxError("pod sandboxes need root (mount, UTS and PID namespaces, overlayfs)")
    missing = [
        p for p in ("unshare", "chroot", *programs) if shutil.which(p) is None and not Path(p).exists()
    ]
    if missing:
        raise SandboxError(f"missing on this machine: {', '.join(missing)} (run hack/ci-deps.sh as root)")


@dataclass(frozen=True)
class File:
    """A file in the pod: ``content`` at an absolute path, with ``mode``."""

    content: str | bytes
    mode: int = 0o644


@dataclass
class Pod:
    """One running pod sandbox: ``proc`` is ``unshare`` (its child is the pod's PID 1)."""

    name: str
    address: str
    work: Path
    log: Path
    proc: subprocess.Popen[bytes]

    def path(self, pod_path: str) -> Path:
        """Where a file the pod wrote at ``pod_path`` (absolute) is on this machine (its layer)."""
        return self.work / "upper" / pod_path.lstrip("/")

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def alive(self) -> bool:
        return self.proc.poll() is None

    def signal_main(self, sig: int) -> None:
        """Send ``sig`` to the pod's PID 1 (its main process), as the kubelet does on stop."""
        for child in _children(self.proc.pid):
            os.kill(child, sig)

    def wait(self, timeout: float) -> int:
        return self.proc.wait(timeout)

    def stop(self) -> None:
        """Kill the pod: ``unshare --kill-child`` takes PID 1 and thereby every process of the pod."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(10)


def _children(pid: int) -> list[int]:
    out = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True, check=False).stdout
    return [int(p) for p in out.split()]


def hosts_file(entries: Mapping[str, Sequence[str]]) -> str:
    """``/etc/hosts`` text: ``{address: [names…]}`` plus localhost."""
    lines = ["127.0.0.1 localhost"] + [f"{addr} {' '.join(names)}" for addr, names in entries.items()]
    return "\n".join(lines) + "\n"


def start_pod(
    name: str,
    address: str,
    work: Path,
    *,
    files: Mapping[str, File],
    env: Mapping[str, str],
    command: Sequence[str],
) -> Pod:
    """Start ``command`` (argv, run inside the pod) as the main process of a new pod.

    ``files``: absolute pod path → :class:`File`, laid over this machine's root. ``env``: the
    complete environment (``HOSTNAME`` and ``HOME`` are added unless given). ``work`` (created;
    must not exist) holds the pod's layer (``upper/``: every file the pod writes ends up there) and
    ``pod.log`` (its stdout and stderr).
    """
    check_host()
    work.mkdir(parents=True)
    upper, scratch, merged = work / "upper", work / "overlay-work", work / "root"
    for d in (upper, scratch, merged):
        d.mkdir()
    for pod_path, f in files.items():
        target = upper / pod_path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(f.content, bytes):
            target.write_bytes(f.content)
        else:
            target.write_text(f.content)
        target.chmod(f.mode)
    full_env = {"HOSTNAME": name, "HOME": "/root", **env}
    setup = "\n".join(
        [
            "set -e",
            f'R="{merged}"',
            f'mount -t overlay overlay -o "lowerdir=/,upperdir={upper},workdir={scratch}" "$R"',
            'mount --rbind /dev "$R/dev"',
            'mount -t proc proc "$R/proc"',
            'mount -t tmpfs tmpfs "$R/tmp"',
            'mount -t tmpfs tmpfs "$R/run"',
            f"hostname {name}",
            'exec chroot "$R" /usr/bin/env -i "$@"',
        ]
    )
    argv = [
        "unshare",
        "--mount",
        "--uts",
        "--pid",
        "--fork",
        "--kill-child",
        "--propagation",
        "private",
        "/bin/bash",
        "-c",
        setup,
        "pod-setup",
        *[f"{k}={v}" for k, v in full_env.items()],
        *command,
    ]
    log = work / "pod.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    return Pod(name, address, work, log, proc)


def wait_for(predicate: object, timeout: float, desc: str, pods: Sequence[Pod] = ()) -> None:
    """Poll ``predicate()`` until true; on timeout raise ``AssertionError`` with the pods' logs."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():  # type: ignore[operator]
            return
        time.sleep(0.2)
    logs = "\n".join(f"--- {p.name} ---\n{p.output()[-3000:]}" for p in pods)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {desc}\n{logs}")
