#!/usr/bin/env bash
# `make demo` / `make demo-down`: the product end to end on a local control plane with kwok GPU nodes.
#
#   hack/demo.sh          run the demo (stops a previous demo first); leaves it running to explore
#   hack/demo.sh down     stop everything the demo started (operator, emulator, control plane)
#
# Implementation: hack/demo/driver.py (docs/demo.md). Work directory: .local/demo (git-ignored),
# or $TRTLLM_DEMO_DIR.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PY=${PYTHON:-$ROOT/.venv/bin/python}
if [ ! -x "$PY" ]; then
  echo "[demo] ERROR: $PY not found; create the virtualenv first: hack/venv.sh (or make venv)" >&2
  exit 1
fi
exec "$PY" "$ROOT/hack/demo/driver.py" "$@"
