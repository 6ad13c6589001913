#!/usr/bin/env bash
# Debian packages the tests need (root, as on CI and developer machines here). Idempotent.
#   openmpi-bin    see below
#   openssh-server sshd (the LeaderWorkerSet workers' main process), run per test in a pod sandbox
#                  (hack/podsandbox); never started as a system service here (policy-rc.d denies it
#                  during the install)
set -euo pipefail
pkgs=()
# Open MPI's mpirun (and orted): the operator's launch.sh starts one tritonserver per tensor-parallel
# rank with it; tests and make demo run that script for real (docs/triton-cpu.md), and the
# multi-node scripts across pod sandboxes (tests/integration/test_multinode_launch.py).
command -v mpirun >/dev/null 2>&1 && command -v orted >/dev/null 2>&1 || pkgs+=(openmpi-bin)
[ -x /usr/sbin/sshd ] || pkgs+=(openssh-server)
if [ ${#pkgs[@]} -gt 0 ]; then
  echo "[ci-deps] installing Debian packages: ${pkgs[*]}" >&2
  if [ "$(id -u)" != 0 ]; then echo "[ci-deps] ERROR: need root (or install ${pkgs[*]} yourself)" >&2; exit 1; fi
  policy=/usr/sbin/policy-rc.d
  own_policy=0
  if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\n# ci-deps: no service starts while installing\nexit 101\n' > "$policy"
    chmod 755 "$policy"
    own_policy=1
  fi
  trap '[ "$own_policy" = 1 ] && rm -f "$policy"' EXIT
  apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${pkgs[@]}" >&2
fi
