#!/usr/bin/env bash
# Re-vendors triton-r26.03/ from git directories (bare or not) of triton-inference-server/server and
# triton-inference-server/core: exactly the files hack/tritoncpu/openai_frontend.py needs, unmodified,
# at the tips of their release branch r26.03, and writes SOURCES (repository, commit, path, git blob
# id of every file; tests/unit/test_tritoncpu_vendor.py checks the copies against it).
#
#   hack/tritoncpu/vendor/update.sh SERVER_GIT CORE_GIT
set -euo pipefail
BRANCH=r26.03
here=$(cd "$(dirname "$0")" && pwd)
dest="$here/triton-$BRANCH"
server_git=$1
core_git=$2
gitdir() { if [ -d "$1/.git" ]; then echo "$1/.git"; else echo "$1"; fi; }
# What is vendored, per repository (everything else of those repositories is not needed):
#   server: the frontend's package and its requirements (the pins the overlay follows);
#   core:   the in-process Python API, its pybind11 bindings' source, and the one C header they include.
server_paths=(python/openai/openai_frontend python/openai/requirements.txt LICENSE)
core_paths=(python/tritonserver/__init__.py python/tritonserver/py.typed python/tritonserver/_api
  python/tritonserver/_c include/triton/core/tritonserver.h LICENSE)
rm -rf "$dest/server" "$dest/core"
mkdir -p "$dest"
{
  echo "# repository commit path git-blob-id (written by update.sh; do not edit)"
  for repo in server core; do
    if [ "$repo" = server ]; then g=$(gitdir "$server_git"); paths=("${server_paths[@]}")
    else g=$(gitdir "$core_git"); paths=("${core_paths[@]}"); fi
    commit=$(git --git-dir="$g" rev-parse "$BRANCH^{commit}")
    mkdir -p "$dest/$repo"
    git --git-dir="$g" archive "$commit" "${paths[@]}" | tar x -C "$dest/$repo"
    git --git-dir="$g" ls-tree -r "$commit" "${paths[@]}" |
      while read -r _mode _type blob path; do
        echo "triton-inference-server/$repo $commit $path $blob"
      done
  done
} > "$dest/SOURCES"
echo "vendored into $dest:" >&2
awk 'NR > 1 {print $1, substr($2, 1, 12), $3}' "$dest/SOURCES" >&2
