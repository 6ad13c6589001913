"""An API outage on a local control plane of its own: etcd and kube-apiserver stopped (SIGTERM), then
restarted with the same binaries, flags, ports, data dir and certificates (their argv read from
``/proc/PID/cmdline``). Used by tests/integration/test_faults.py (the operator survives it) and
benchmarks/outage.py (how soon it acts afterwards)."""

from __future__ import annotations

import ssl
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from localcluster import ControlPlane

from .process import stop_process
from .wait import wait_for


def stop_component(cp: ControlPlane, name: str) -> list[str]:
    """SIGTERM one control-plane component; returns its argv (without the binary) for the restart."""
    pid = cp.pids[name]
    argv = Path(f"/proc/{pid}/cmdline").read_bytes().rstrip(b"\0").split(b"\0")
    stop_process(cp._procs[name])
    return [a.decode() for a in argv[1:]]


def readyz(server: str) -> bool:
    """kube-apiserver's ``/readyz`` answers 200 (the local control plane's self-signed certificate)."""
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    with urllib.request.urlopen(f"{server}/readyz", timeout=2, context=ctx) as resp:
        return bool(resp.status == 200)


@contextmanager
def api_outage(cp: ControlPlane, server: str) -> Iterator[None]:
    """kube-apiserver and etcd down for the block; restarted afterwards (also when the block fails),
    and, when the block succeeded, returns once ``/readyz`` answers."""
    apiserver_argv = stop_component(cp, "kube-apiserver")
    etcd_argv = stop_component(cp, "etcd")
    try:
        yield
    finally:  # same binaries, flags, ports, data dir and certificates as before
        cp._spawn("etcd", etcd_argv)
        cp._spawn("kube-apiserver", apiserver_argv)
    wait_for(lambda: readyz(server), timeout=60, interval=0.1, desc="kube-apiserver /readyz")
