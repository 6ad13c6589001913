#!/usr/bin/env bash
# Installs the CPU serving runtime for tests and `make demo` (docs/triton-cpu.md), once per machine,
# and prints its directory (the last line of stdout). Idempotent: a complete install is reused.
#
#   ~/.cache/trtllm-operator/triton-2.51.0-<stamp>/
#     venv/                    Python for the Python-backend stub: nvidia-pytriton 0.7.0 (bundles
#                              tritonserver 2.51.0 = Triton 24.10, its Python backend and stubs),
#                              numpy<2 (the stub's numpy ABI), torch (CPU execution), transformers
#                              (reads the tokenizers the builder writes with transformers 5.x),
#                              safetensors, PyYAML
#     bin/tritonserver         -> the real server binary inside the wheel
#     backends/python/         libtriton_python.so + triton_python_backend_utils.py from the wheel,
#                              and the stub for this Python (python_backend_stubs/<X.Y>/)
#     lib/                     the shared libraries the stub links against: the wheel's bundled ones
#                              and this interpreter's libpython (start the server with
#                              LD_LIBRARY_PATH=lib/)
#
# Pins: every package is pinned; torch and transformers match the project virtualenv so uv's cache
# serves them by hard link (no second download of PyTorch). PYTHON: the interpreter (>= 3.8, <= 3.13,
# the stub versions the wheel ships), default python3.
set -euo pipefail
cd "$(dirname "$0")/.."
TRITON_VERSION=2.51.0
PYTRITON_VERSION=0.7.0
PINS=(
  "nvidia-pytriton==$PYTRITON_VERSION"
  "numpy==1.26.4"
  "torch==2.11.0"
  "transformers==5.24.0"
  "tokenizers==0.23.3"
  "safetensors==0.8.0"
  "pyyaml==6.0.3"
)
UV_VERSION=0.13.8
CACHE=${XDG_CACHE_HOME:-$HOME/.cache}/trtllm-operator
PYTHON=${PYTHON:-python3}
log() { echo "[triton-runtime] $*" >&2; }

stamp=$( (cat hack/triton-runtime.sh; "$PYTHON" -c 'import sys; print(sys.version)') | sha256sum | cut -c1-12)
DEST="$CACHE/triton-$TRITON_VERSION-$stamp"
if [ -f "$DEST/.complete" ]; then
  echo "$DEST"
  exit 0
fi
start=$(date +%s)
UV="$CACHE/uv-$UV_VERSION/bin/uv"
if [ ! -x "$UV" ]; then
  log "bootstrapping uv $UV_VERSION"
  "$PYTHON" -m venv "$CACHE/uv-$UV_VERSION"
  "$CACHE/uv-$UV_VERSION/bin/pip" install --quiet "uv==$UV_VERSION"
fi
pyver=$("$PYTHON" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')
libdir=$("$PYTHON" -c 'import sysconfig; print(sysconfig.get_config_var("LIBDIR") or "")')
ldlib=$("$PYTHON" -c 'import sysconfig; print(sysconfig.get_config_var("LDLIBRARY") or "")')

# Built in place (a venv does not survive a rename); .complete marks a finished install, and a
# concurrent second install waits on the lock.
mkdir -p "$CACHE"
exec 9>"$CACHE/.triton-$TRITON_VERSION.lock"
# shellcheck source=hack/lib/lock.sh
. hack/lib/lock.sh  # the working directory is the repository root (cd above)
take_lock 9 "$CACHE/.triton-$TRITON_VERSION.lock" "tritonserver $TRITON_VERSION in $DEST" triton-runtime
if [ -f "$DEST/.complete" ]; then
  echo "$DEST"
  exit 0
fi
tmp="$DEST"
rm -rf "$tmp"
mkdir -p "$tmp"
trap 'rm -rf "$tmp"' EXIT
log "installing tritonserver $TRITON_VERSION (nvidia-pytriton $PYTRITON_VERSION) and the stub's Python $pyver environment into $DEST"
"$UV" venv --quiet --python "$PYTHON" "$tmp/venv"
"$UV" pip install --quiet --python "$tmp/venv/bin/python" "${PINS[@]}" >&2
site=$("$tmp/venv/bin/python" -c 'import pytriton, os; print(os.path.dirname(pytriton.__file__))')
server="$site/tritonserver"
stub="$server/python_backend_stubs/$pyver/triton_python_backend_stub"
if [ ! -x "$stub" ]; then
  log "ERROR: nvidia-pytriton $PYTRITON_VERSION ships no Python-backend stub for Python $pyver ($(ls "$server/python_backend_stubs" | tr '\n' ' ')); set PYTHON to one of those"
  exit 1
fi
mkdir -p "$tmp/bin" "$tmp/backends/python" "$tmp/lib"
ln -s "$server/bin/tritonserver" "$tmp/bin/tritonserver"
cp "$server/backends/python/libtriton_python.so" "$server/backends/python/triton_python_backend_utils.py" \
  "$tmp/backends/python/"
cp "$stub" "$tmp/backends/python/"
# The stub finds the wheel's bundled libraries (libcudart) through an $ORIGIN-relative rpath that a
# copy loses: lib/ links them, and the server is started with LD_LIBRARY_PATH=lib/.
for f in "$site/../nvidia_pytriton.libs/"*; do ln -s "$(readlink -f "$f")" "$tmp/lib/$(basename "$f")"; done
# The stub embeds CPython through libpython<X.Y>.so; use this interpreter's own (a pyenv or
# distribution build), so the stub and the venv's standard library are the same version.
if [ -n "$libdir" ] && [ -e "$libdir/libpython$pyver.so.1.0" ]; then
  ln -s "$libdir/libpython$pyver.so.1.0" "$tmp/lib/libpython$pyver.so.1.0"
elif [ -n "$libdir" ] && [ -n "$ldlib" ] && [ -e "$libdir/$ldlib" ]; then
  ln -s "$libdir/$ldlib" "$tmp/lib/libpython$pyver.so.1.0"
elif ! ldconfig -p 2>/dev/null | grep -q "libpython$pyver.so.1.0"; then
  log "ERROR: no shared libpython$pyver.so.1.0 for the Python-backend stub: install your distribution's"
  log "       libpython$pyver package (Debian: apt-get install libpython$pyver) or use a Python built"
  log "       with --enable-shared (PYTHON=...)"
  exit 1
fi
# Check: the server runs, and the stub resolves every shared library.
help=$("$tmp/bin/tritonserver" --help 2>&1 || true)
[[ "$help" == *--model-repository* ]] || { log "ERROR: $tmp/bin/tritonserver does not run: ${help:0:300}"; exit 1; }
if LD_LIBRARY_PATH="$tmp/lib" ldd "$tmp/backends/python/triton_python_backend_stub" | grep -q "not found"; then
  log "ERROR: the Python-backend stub misses shared libraries:"
  LD_LIBRARY_PATH="$tmp/lib" ldd "$tmp/backends/python/triton_python_backend_stub" | grep "not found" >&2
  exit 1
fi
echo "tritonserver=$TRITON_VERSION nvidia-pytriton=$PYTRITON_VERSION python=$pyver pins=${PINS[*]}" > "$tmp/VERSIONS"
trap - EXIT
touch "$DEST/.complete"
log "runtime ready in $(( $(date +%s) - start )) s"
echo "$DEST"
