"""Locating (and, if needed, building) the control-plane binaries."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from .controlplane import REPO_ROOT, ClusterError

BUILD_SCRIPT = REPO_ROOT / "hack" / "build-testbin.sh"
NEEDED = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl", "kwok", "helm")
GO_HINT = (
    "the Go toolchain (>= 1.24) is needed to build the local control plane's binaries "
    "(kube-apiserver, etcd, kwok, helm): install it from https://go.dev/dl/ (or your package manager), "
    "put `go` on PATH, then run hack/build-testbin.sh (a cold build takes ~7 min on 2 cores); "
    "or point TRTLLM_OPERATOR_TESTBIN at a directory holding the built binaries"
)


def find_bin_dir(build: bool = True) -> Path:
    """The directory holding the control-plane binaries.

    ``$TRTLLM_OPERATOR_TESTBIN`` if set; otherwise what ``hack/build-testbin.sh`` prints, which builds
    missing binaries first (cold: ~7 min) when ``build`` is true. Raises ClusterError with a how-to when
    Go is missing or the build fails.
    """
    override = os.environ.get("TRTLLM_OPERATOR_TESTBIN")
    if override:
        path = Path(override)
        missing = [b for b in NEEDED if not (path / b).is_file()]
        if missing:
            raise ClusterError(f"TRTLLM_OPERATOR_TESTBIN={path} lacks {missing}")
        return path
    if shutil.which("go") is None:
        raise ClusterError(f"`go` not found on PATH: {GO_HINT}")
    if not build:
        raise ClusterError("binaries not located; run hack/build-testbin.sh")
    proc = subprocess.run([str(BUILD_SCRIPT)], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise ClusterError(
            f"hack/build-testbin.sh failed ({proc.returncode}); last output:\n"
            + "\n".join(proc.stderr.splitlines()[-30:])
            + f"\n{GO_HINT}"
        )
    path = Path(proc.stdout.strip().splitlines()[-1])
    missing = [b for b in NEEDED if not (path / b).is_file()]
    if missing:
        raise ClusterError(f"hack/build-testbin.sh printed {path}, which lacks {missing}")
    return path
