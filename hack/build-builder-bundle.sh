#!/usr/bin/env bash
# Builds the engine-builder bundle: the self-contained, pure-Python builder the operator delivers
# into a stock TensorRT-LLM image (docs/engine-builder.md, "Running on a stock image").
#
#   hack/build-builder-bundle.sh DEST
#
# DEST/lib is a `pip install --no-deps --target` of ./engine-builder and of
# engine-builder/bundle-requirements.txt: nothing the image already has (torch, transformers,
# tensorrt_llm, pydantic, numpy, ...) is copied, so the image's own versions are the ones imported.
# operator/Dockerfile runs this script; so does tests/unit/test_builder_delivery.py.
#
# BUNDLE_PIP: the installer command (default `python3 -m pip install`); it must accept
# --no-deps --require-hashes --target DIR -r FILE and PATH, as pip and `uv pip install` do.
set -euo pipefail
cd "$(dirname "$0")/.."
DEST=${1:?usage: hack/build-builder-bundle.sh DEST}
read -r -a PIP <<<"${BUNDLE_PIP:-python3 -m pip install}"
rm -rf "$DEST/lib"
mkdir -p "$DEST/lib"
# Build engine-builder from a clean copy: setuptools reuses an in-tree build/ directory, which could
# carry files since deleted from src/ into the bundle.
SRC=$(mktemp -d)
trap 'rm -rf "$SRC"' EXIT
cp -R engine-builder/pyproject.toml engine-builder/src "$SRC/"
# The pins with their PyPI sha256 (hash-checking mode: any file without a matching hash fails), then
# engine-builder itself from the copy (a local directory has no hash to check, so it is a second call).
"${PIP[@]}" --no-deps --require-hashes --target "$DEST/lib" -r engine-builder/bundle-requirements.txt
"${PIP[@]}" --no-deps --target "$DEST/lib" "$SRC"
# Console scripts point at the build machine's interpreter: the Job runs `python3 -m engine_builder`.
rm -rf "$DEST/lib/bin" "$DEST/lib/.lock"  # uv leaves its lock file in the target
find "$DEST/lib" -name '__pycache__' -type d -prune -exec rm -rf {} +
# Readable by the builder container whatever uid it runs as.
chmod -R a+rX "$DEST"
test -f "$DEST/lib/engine_builder/__main__.py"
echo "[bundle] $DEST/lib: $(du -sh "$DEST/lib" | cut -f1)" >&2
