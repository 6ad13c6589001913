#!/usr/bin/env bash
# Creates or reuses the project virtualenv (.venv) with both distributions installed editable and
# their test extras, including the builder's heavy [quantize] extra (PyTorch, ModelOpt).
# uv's cache (~/.cache/uv) makes a second install on the same machine take seconds: PyTorch and its
# CUDA libraries (several GB) are downloaded once per machine and hard-linked afterwards.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}
UV_VERSION=0.13.8
CACHE=${XDG_CACHE_HOME:-$HOME/.cache}/trtllm-operator
UV_ENV="$CACHE/uv-$UV_VERSION"
PYTHON=${PYTHON:-python3}

log() { echo "[venv] $*" >&2; }

if ! "$PYTHON" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' 2>/dev/null; then
  log "ERROR: Python >= 3.11 is required ($PYTHON is $("$PYTHON" --version 2>&1)); set PYTHON=/path/to/python3.11+"
  exit 1
fi
if [ ! -x "$UV_ENV/bin/uv" ]; then
  log "bootstrapping uv $UV_VERSION into $UV_ENV"
  "$PYTHON" -m venv "$UV_ENV"
  "$UV_ENV/bin/pip" install --quiet "uv==$UV_VERSION"
fi
UV="$UV_ENV/bin/uv"

stamp=$(cat operator/pyproject.toml engine-builder/pyproject.toml engine-builder/bundle-requirements.txt \
  hack/venv.sh | sha256sum | cut -c1-16)
if [ -x "$VENV/bin/python" ] && [ "$(cat "$VENV/.trtllm-stamp" 2>/dev/null)" = "$stamp" ]; then
  exit 0
fi
start=$(date +%s)
[ -x "$VENV/bin/python" ] || "$UV" venv --quiet --python "$PYTHON" "$VENV"
log "installing trtllm-engine-builder[quantize,s3,test] and trtllm-operator[test,sim] (editable) into $VENV"
# The builder bundle's pins (engine-builder/bundle-requirements.txt, the one home of those versions) as
# constraints: the unit tests build the bundle with uv offline from this install's cache
# (tests/unit/test_builder_delivery.py), so the virtualenv must hold exactly those versions. Unconstrained,
# boto3 1.44.8 let the resolver take the newest botocore (1.44.18 on 2026-12-05) while the bundle pins
# 1.44.8, and a machine with an empty cache failed the bundle's offline install.
constraints=$(mktemp)
trap 'rm -f "$constraints"' EXIT
grep -oE '^[A-Za-z0-9_.-]+==[^ \\]+' engine-builder/bundle-requirements.txt > "$constraints"
"$UV" pip install --python "$VENV/bin/python" --constraint "$constraints" \
  -e "./engine-builder[quantize,s3,test]" -e "./operator[test,sim]"
echo "$stamp" > "$VENV/.trtllm-stamp"
log "virtualenv ready in $(( $(date +%s) - start )) s"
