#!/usr/bin/env bash
# Debian packages the tests need (root, as on CI and developer machines here). Idempotent.
set -euo pipefail
pkgs=()
command -v prometheus >/dev/null 2>&1 || pkgs+=(prometheus)
# Open MPI's mpirun: the operator's launch.sh starts one tritonserver per tensor-parallel rank with
# it; tests and make demo run that script for real (docs/triton-cpu.md).
command -v mpirun >/dev/null 2>&1 || pkgs+=(openmpi-bin)
if [ ${#pkgs[@]} -gt 0 ]; then
  echo "[ci-deps] installing Debian packages: ${pkgs[*]}" >&2
  if [ "$(id -u)" != 0 ]; then echo "[ci-deps] ERROR: need root (or install ${pkgs[*]} yourself)" >&2; exit 1; fi
  apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${pkgs[@]}" >&2
fi
