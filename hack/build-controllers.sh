#!/usr/bin/env bash
# Builds the add-on controllers the tests run next to the local control plane, from their Go modules
# (pinned versions), into the testbin cache, one directory per component and version:
#
#   $ROOT/lws-$LWS_VERSION/bin/lws-controller     LeaderWorkerSet's manager (sigs.k8s.io/lws cmd/)
#   $ROOT/lws-$LWS_VERSION/config/                its CRDs and webhook configurations, same module
#
#   $ROOT/prometheus-$PROMETHEUS_VERSION/bin/prometheus
#                                                 Prometheus server (github.com/prometheus/prometheus
#                                                 cmd/prometheus), service discovery cut to kubernetes_sd
#   $ROOT/prometheus-operator-$PROMETHEUS_OPERATOR_VERSION/bin/operator
#                                                 prometheus-operator (cmd/operator)
#   $ROOT/prometheus-operator-$PROMETHEUS_OPERATOR_VERSION/config/crd/
#                                                 its monitoring.coreos.com CRDs, same module
#   $ROOT/prometheus-adapter-$PROMETHEUS_ADAPTER_VERSION/bin/adapter
#                                                 prometheus-adapter (sigs.k8s.io/prometheus-adapter
#                                                 cmd/adapter), custom.metrics.k8s.io
#   $ROOT/keda-$KEDA_VERSION/bin/keda             KEDA's operator (github.com/kedacore/keda/v2 cmd/operator)
#   $ROOT/keda-$KEDA_VERSION/bin/keda-adapter     KEDA's metrics API server (cmd/adapter),
#                                                 external.metrics.k8s.io
#   $ROOT/keda-$KEDA_VERSION/bin/keda-admission-webhooks
#                                                 KEDA's admission webhooks (cmd/webhooks)
#   $ROOT/keda-$KEDA_VERSION/config/crd/          its keda.sh and eventing.keda.sh CRDs, same module
#   $ROOT/keda-$KEDA_VERSION/config/webhooks/     its ValidatingWebhookConfiguration (validation_webhooks.yaml)
#
#   hack/build-controllers.sh             # builds what is missing, prints one `<component>=<dir>` line each
#   hack/build-controllers.sh lws ...     # only the named components (lws, prometheus,
#                                         # prometheus-operator, prometheus-adapter, keda)
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
# Prometheus 3.16.0: Go module github.com/prometheus/prometheus v0.316.0 (the module's VERSION file
# says 3.16.0; Prometheus tags its Go module as v0.3XX.Y for release 3.XX.Y).
PROMETHEUS_VERSION=${PROMETHEUS_VERSION:-v0.316.0}
# prometheus-operator: the newest version of the root module the Go module proxy here lists (v0.85.0).
PROMETHEUS_OPERATOR_VERSION=${PROMETHEUS_OPERATOR_VERSION:-v0.85.0}
PROMETHEUS_ADAPTER_VERSION=${PROMETHEUS_ADAPTER_VERSION:-v0.12.0}
# KEDA: the release the operator renders ScaledObjects for (tests/fixtures/upstream/keda-v2.20.2, the
# ScaledObject CRD its unit tests validate against; docs/autoscaling.md).
KEDA_VERSION=${KEDA_VERSION:-v2.20.2}

ROOT=${TRTLLM_OPERATOR_TESTBIN_ROOT:-${XDG_CACHE_HOME:-$HOME/.cache}/trtllm-operator/testbin}
mkdir -p "$ROOT"

log() { echo "[build-controllers] $*" >&2; }
# shellcheck source=hack/lib/lock.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib/lock.sh"

# One build per component directory at a time (another worktree's test run may be building it).
locked() {
  local dir=$1
  mkdir -p "$dir"
  exec 8>"$dir/.build.lock"
  take_lock 8 "$dir/.build.lock" "$dir" build-controllers
}

need_go() {
  if ! command -v go >/dev/null 2>&1; then
    log "ERROR: the Go toolchain (>= 1.26, as the controllers' go.mod) is needed; install it from https://go.dev/dl/"
    exit 1
  fi
}

# A throw-away wrapper module in $dir/src that requires only <module>@<version>, so the build list is that
# module's own go.mod (a dependency's replace directives do not apply: only for modules without any, or
# whose replaced modules the root module requires at the same version, as prometheus-operator's). `go
# install pkg@version` would do the same but also asks the proxy for the module's version list
# (deprecation check), which some proxies refuse.
#   wrapper_module DIR MODULE VERSION
#   wrapper_build DIR PACKAGE BINARY [go build flags...]   -> DIR/bin/BINARY
wrapper_module() {
  local dir=$1 module=$2 version=$3
  mkdir -p "$dir/bin" "$dir/src"
  (
    cd "$dir/src"
    [ -f go.mod ] || go mod init "example.invalid/$(basename "$dir" | tr -c 'a-z0-9\n' '_')bin" >/dev/null 2>&1
    GOFLAGS=-mod=mod go get "$module@$version" >&2
  )
}

wrapper_build() {
  local dir=$1 pkg=$2 binary=$3
  shift 3
  (
    cd "$dir/src"
    GOFLAGS=-mod=mod CGO_ENABLED=0 go build -trimpath "$@" -o "$dir/bin/$binary.tmp" "$pkg"
    mv "$dir/bin/$binary.tmp" "$dir/bin/$binary"
  )
}

# <module>'s directory in the module cache as the wrapper module in DIR resolved it.
wrapper_module_dir() {
  (cd "$1/src" && GOFLAGS=-mod=mod go list -m -f '{{.Dir}}' "$2")
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
  # LWS's go.mod has no replace directives. The main package is sigs.k8s.io/lws/cmd (the release
  # Makefile: `go build -o bin/manager cmd/main.go` with -X sigs.k8s.io/lws/pkg/version.GitVersion=<tag>).
  wrapper_module "$dir" sigs.k8s.io/lws "$LWS_VERSION"
  wrapper_build "$dir" sigs.k8s.io/lws/cmd lws-controller \
    -ldflags "-s -w -X sigs.k8s.io/lws/pkg/version.GitVersion=$LWS_VERSION"
  # CRDs and webhook configurations from the same module version
  local src
  src=$(wrapper_module_dir "$dir" sigs.k8s.io/lws)
  rm -rf "$dir/config" && mkdir -p "$dir/config/crd" "$dir/config/webhook"
  cp "$src"/config/crd/bases/*.yaml "$dir/config/crd/"
  cp "$src"/config/webhook/*.yaml "$dir/config/webhook/"
  touch "$dir/config/.complete"
  log "LeaderWorkerSet built in $(( $(date +%s) - start )) s"
}

# Prometheus, built the way its .promu.yml does (`./cmd/prometheus`, -X github.com/prometheus/common/
# version.*) with two differences that cut the build: no `builtinassets` tag (the web UI's assets are
# not embedded; the HTTP API the tests use is unaffected, web/ui/ui.go serves assets from disk without
# the tag) and the build tags `remove_all_sd enable_kubernetes_sd`, which plugins/plugin_*.go define
# (`//go:build !remove_all_sd || enable_<name>_sd`): every service discovery but kubernetes_sd (and
# file/http, plugins/minimum.go, always in) is left out. prometheus-operator's generated configuration
# uses kubernetes_sd_configs only.
build_prometheus() {
  local dir="$ROOT/prometheus-$PROMETHEUS_VERSION"
  [ -x "$dir/bin/prometheus" ] && return 0
  locked "$dir"
  [ -x "$dir/bin/prometheus" ] && return 0
  need_go
  local start
  start=$(date +%s)
  log "building Prometheus $PROMETHEUS_VERSION (github.com/prometheus/prometheus/cmd/prometheus)"
  wrapper_module "$dir" github.com/prometheus/prometheus "$PROMETHEUS_VERSION"
  local release
  release=$(cat "$(wrapper_module_dir "$dir" github.com/prometheus/prometheus)/VERSION")
  wrapper_build "$dir" github.com/prometheus/prometheus/cmd/prometheus prometheus \
    -tags "netgo remove_all_sd enable_kubernetes_sd" \
    -ldflags "-s -w -X github.com/prometheus/common/version.Version=$release"
  log "Prometheus built in $(( $(date +%s) - start )) s"
}

# prometheus-operator's go.mod replaces its own pkg/apis/monitoring and pkg/client modules with the
# directories beside it (`=> ./pkg/...`); those are separate modules, absent from the root module's zip,
# and a dependency's replace directives do not apply anyway. So a wrapper module requires the root
# module at the version, which requires both at the same version (tagged on the same release commit),
# and builds its Makefile's main package (`go build -ldflags=... ./cmd/operator/`).
build_prometheus_operator() {
  local dir="$ROOT/prometheus-operator-$PROMETHEUS_OPERATOR_VERSION"
  [ -x "$dir/bin/operator" ] && [ -f "$dir/config/.complete" ] && return 0
  locked "$dir"
  [ -x "$dir/bin/operator" ] && [ -f "$dir/config/.complete" ] && return 0
  need_go
  local start src
  start=$(date +%s)
  log "building prometheus-operator $PROMETHEUS_OPERATOR_VERSION (cmd/operator)"
  wrapper_module "$dir" github.com/prometheus-operator/prometheus-operator "$PROMETHEUS_OPERATOR_VERSION"
  wrapper_build "$dir" github.com/prometheus-operator/prometheus-operator/cmd/operator operator \
    -ldflags "-s -w -X github.com/prometheus/common/version.Version=${PROMETHEUS_OPERATOR_VERSION#v}"
  src=$(wrapper_module_dir "$dir" github.com/prometheus-operator/prometheus-operator)
  rm -rf "$dir/config" && mkdir -p "$dir/config/crd"
  cp "$src"/example/prometheus-operator-crd/*.yaml "$dir/config/crd/"
  touch "$dir/config/.complete"
  log "prometheus-operator built in $(( $(date +%s) - start )) s"
}

# prometheus-adapter: a wrapper module like LWS's (its go.mod has no replace directives); the Makefile
# builds `CGO_ENABLED=0 go build sigs.k8s.io/prometheus-adapter/cmd/adapter`.
build_prometheus_adapter() {
  local dir="$ROOT/prometheus-adapter-$PROMETHEUS_ADAPTER_VERSION"
  [ -x "$dir/bin/adapter" ] && return 0
  locked "$dir"
  [ -x "$dir/bin/adapter" ] && return 0
  need_go
  local start
  start=$(date +%s)
  log "building prometheus-adapter $PROMETHEUS_ADAPTER_VERSION (sigs.k8s.io/prometheus-adapter/cmd/adapter)"
  wrapper_module "$dir" sigs.k8s.io/prometheus-adapter "$PROMETHEUS_ADAPTER_VERSION"
  wrapper_build "$dir" sigs.k8s.io/prometheus-adapter/cmd/adapter adapter -ldflags "-s -w"
  log "prometheus-adapter built in $(( $(date +%s) - start )) s"
}

# KEDA: built inside a copy of its module, not in a wrapper: its go.mod pins Kubernetes, controller-runtime,
# the Prometheus libraries and cel-go with `replace` directives (kedacore/keda v2.20.2 go.mod, "pin k8s.io
# to v0.35.5 & sigs.k8s.io/controller-runtime to v0.23.3"), which apply only when KEDA is the main module;
# all of them replace by version (no local paths), so the module zip is a complete main module and its
# go.sum checks every download. The main packages and -X flags are its Makefile's `manager`, `adapter` and
# `webhooks` targets (`go build -ldflags "-X=github.com/kedacore/keda/v2/version.Version=$(VERSION) ..." -o
# bin/keda cmd/operator/main.go`, `-o bin/keda-adapter cmd/adapter/main.go`, `-o
# bin/keda-admission-webhooks cmd/webhooks/main.go`; they build with -mod=vendor after `go mod vendor`,
# the same module versions). Only the binaries not yet built are built (a cache from before the webhooks
# were added gains just that one). The CRDs are its config/crd/bases, the webhook configuration its
# config/webhooks/validation_webhooks.yaml.
KEDA_BINARIES=(operator:keda adapter:keda-adapter webhooks:keda-admission-webhooks)
keda_complete() {
  local dir=$1 b
  for b in "${KEDA_BINARIES[@]}"; do [ -x "$dir/bin/${b#*:}" ] || return 1; done
  [ -f "$dir/config/.complete" ] && [ -f "$dir/config/webhooks/validation_webhooks.yaml" ]
}

build_keda() {
  local dir="$ROOT/keda-$KEDA_VERSION"
  keda_complete "$dir" && return 0
  locked "$dir"
  keda_complete "$dir" && return 0
  need_go
  local start src b pkgs=() names=()
  start=$(date +%s)
  for b in "${KEDA_BINARIES[@]}"; do
    [ -x "$dir/bin/${b#*:}" ] || { pkgs+=("./cmd/${b%%:*}"); names+=("${b#*:}"); }
  done
  log "building KEDA $KEDA_VERSION (github.com/kedacore/keda/v2 ${pkgs[*]:-config only})"
  src=$(cd "$ROOT" && GOFLAGS=-mod=mod go mod download -json "github.com/kedacore/keda/v2@$KEDA_VERSION" \
    | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')
  [ -n "$src" ] || { log "ERROR: go mod download github.com/kedacore/keda/v2@$KEDA_VERSION failed"; exit 1; }
  rm -rf "$dir/src" && cp -r "$src" "$dir/src" && chmod -R u+w "$dir/src"
  mkdir -p "$dir/bin"
  if [ ${#pkgs[@]} -gt 0 ]; then
    rm -rf "$dir/bin/.tmp" && mkdir -p "$dir/bin/.tmp"
    (
      cd "$dir/src"
      # one package: -o names the file; several: -o names a directory (a binary per package's last element)
      CGO_ENABLED=0 go build -trimpath \
        -ldflags "-s -w -X=github.com/kedacore/keda/v2/version.Version=$KEDA_VERSION" \
        -o "$dir/bin/.tmp/" "${pkgs[@]}"
    )
    local i
    for i in "${!pkgs[@]}"; do mv "$dir/bin/.tmp/$(basename "${pkgs[$i]}")" "$dir/bin/${names[$i]}"; done
    rm -rf "$dir/bin/.tmp"
  fi
  # A complete config/ stays in place (tests of other worktrees may be reading its CRDs); the webhook
  # configuration is added by rename.
  if [ ! -f "$dir/config/.complete" ]; then
    rm -rf "$dir/config" && mkdir -p "$dir/config/crd"
    cp "$dir"/src/config/crd/bases/*.yaml "$dir/config/crd/"
  fi
  mkdir -p "$dir/config/webhooks"
  cp "$dir/src/config/webhooks/validation_webhooks.yaml" "$dir/config/webhooks/.validation_webhooks.yaml.tmp"
  mv "$dir/config/webhooks/.validation_webhooks.yaml.tmp" "$dir/config/webhooks/validation_webhooks.yaml"
  touch "$dir/config/.complete"
  log "KEDA built in $(( $(date +%s) - start )) s"
}

components=("$@")
[ ${#components[@]} -gt 0 ] || components=(lws prometheus prometheus-operator prometheus-adapter keda)
for c in "${components[@]}"; do
  case $c in
    lws) build_lws; echo "lws=$ROOT/lws-$LWS_VERSION" ;;
    prometheus) build_prometheus; echo "prometheus=$ROOT/prometheus-$PROMETHEUS_VERSION" ;;
    prometheus-operator)
      build_prometheus_operator
      echo "prometheus-operator=$ROOT/prometheus-operator-$PROMETHEUS_OPERATOR_VERSION" ;;
    prometheus-adapter)
      build_prometheus_adapter
      echo "prometheus-adapter=$ROOT/prometheus-adapter-$PROMETHEUS_ADAPTER_VERSION" ;;
    keda) build_keda; echo "keda=$ROOT/keda-$KEDA_VERSION" ;;
    *) log "ERROR: unknown component '$c' (lws, prometheus, prometheus-operator, prometheus-adapter, keda)"; exit 2 ;;
  esac
done
