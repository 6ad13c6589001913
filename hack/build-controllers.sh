#!/usr/bin/env bash
# Builds the add-on controllers the tests run next to the local control plane, from their Go modules
# (pinned versions), into the testbin cache, one directory per component and version:
#
#   $ROOT/lws-$LWS_VERSION/bin/lws-controller     LeaderWorkerSet's manager (sigs.k8s.io/lws cmd/)
#   $ROOT/lws-$LWS_VERSION/config/                its CRDs and webhook configurations, same module
#
#   hack/build-controllers.sh       # builds what is missing, prints one `<component>=<dir>` line each
#
# LWS_VERSION: v0.9.0 by default, one release before the one the operator renders for
# (trtllm_operator.render.leaderworkerset cites kubernetes-sigs/lws v0.10.0): the Go module proxy these
# machines use answers 403 "This module version is not available" for the v0.10.0 source zip while it
# serves v0.9.0. Between the two, what the operator relies on is unchanged: api/leaderworkerset/v1
# differs only by `replicas` bounds (+kubebuilder Minimum=0 / Maximum=1000000, which the operator's own
# CRD already enforces on spec.replicas), and pkg/webhooks/pod_webhook.go only in the subgroup-size
# rule (subGroupSize, which the operator never sets). LWS_VERSION=v0.10.0 builds where the proxy serves
# it (the integration test passed with both here). Env: TRTLLM_OPERATOR_TESTBIN_ROOT as
# hack/build-testbin.sh. See docs/reference/local-control-plane.md §D.
set -euo pipefail

LWS_VERSION=${LWS_VERSION:-v0.9.0}

ROOT=${TRTLLM_OPERATOR_TESTBIN_ROOT:-${XDG_CACHE_HOME:-$HOME/.cache}/trtllm-operator/testbin}
mkdir -p "$ROOT"

log() { echo "[build-controllers] $*" >&2; }

# One build per component directory at a time (another worktree's test run may be building it).
locked() {
  local dir=$1
  mkdir -p "$dir"
  exec 8>"$dir/.build.lock"
  if ! flock -n 8; then
    log "another build is building $dir; waiting for it"
    flock 8
  fi
}

need_go() {
  if ! command -v go >/dev/null 2>&1; then
    log "ERROR: the Go toolchain (>= 1.26, as the controllers' go.mod) is needed; install it from https://go.dev/dl/"
    exit 1
  fi
}

build_lws() {
  local dir="$ROOT/lws-$LWS_VERSION"
  [ -x "$dir/bin/lws-controller" ] && [ -f "$dir/config/.complete" ] && return 0
  locked "$dir"
  [ -x "$dir/bin/lws-controller" ] && [ -f "$dir/config/.complete" ] && return 0
  need_go
  local start
  start=$(date +%s)
  log "building LeaderWorkerSet $LWS_VERSION (sigs.k8s.io/lws/cmd)"
  mkdir -p "$dir/bin" "$dir/src"
  # A throw-away wrapper module that requires only LWS, so the build list is LWS's own go.mod
  # (it has no replace directives). `go install pkg@version` would do the same but also asks the
  # proxy for the module's version list (deprecation check), which some proxies refuse.
  # The main package is sigs.k8s.io/lws/cmd (the release Makefile: `go build -o bin/manager
  # cmd/main.go` with -X sigs.k8s.io/lws/pkg/version.GitVersion=<tag>).
  (
    cd "$dir/src"
    [ -f go.mod ] || go mod init example.invalid/lwsbin >/dev/null 2>&1
    GOFLAGS=-mod=mod go get "sigs.k8s.io/lws@$LWS_VERSION" >&2
    GOFLAGS=-mod=mod CGO_ENABLED=0 go build -trimpath \
      -ldflags "-s -w -X sigs.k8s.io/lws/pkg/version.GitVersion=$LWS_VERSION" \
      -o "$dir/bin/lws-controller" sigs.k8s.io/lws/cmd
  )
  # CRDs and webhook configurations from the same module version
  local src
  src=$(GOFLAGS=-mod=mod go mod download -json "sigs.k8s.io/lws@$LWS_VERSION" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')
  rm -rf "$dir/config" && mkdir -p "$dir/config/crd" "$dir/config/webhook"
  cp "$src"/config/crd/bases/*.yaml "$dir/config/crd/"
  cp "$src"/config/webhook/*.yaml "$dir/config/webhook/"
  touch "$dir/config/.complete"
  log "LeaderWorkerSet built in $(( $(date +%s) - start )) s"
}

build_lws
echo "lws=$ROOT/lws-$LWS_VERSION"
