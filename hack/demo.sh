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
if [ "${1:-}" != "down" ]; then
  # One `make demo` at a time per work directory: a second run while the first is still running
  # would stop the first's control plane under it. (A finished demo left up is fine: the next run
  # replaces it.) The lock is released when this process exits.
  LOCK="${TRTLLM_DEMO_DIR:-$ROOT/.local/demo}.lock"
  mkdir -p "$(dirname "$LOCK")"
  exec 9>"$LOCK"
  if ! flock -n 9; then
    echo "[demo] another 'make demo' is running in this checkout (lock $LOCK held by pid $(cat "$LOCK.pid" 2>/dev/null || echo '?'));" >&2
    echo "[demo] wait for it to finish, or stop it with 'make demo-down'." >&2
    exit 1
  fi
  echo $$ > "$LOCK.pid"
fi
exec "$PY" "$ROOT/hack/demo/driver.py" "$@"
