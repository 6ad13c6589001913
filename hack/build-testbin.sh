#!/usr/bin/env bash
# Builds the local control plane's binaries from their Go modules (pinned versions) into a cache
# outside the repository, once per version set. See docs/reference/local-control-plane.md §A.
#
#   hack/build-testbin.sh            # builds what is missing, prints the bin directory
#
# Env: TRTLLM_OPERATOR_TESTBIN_ROOT (default ~/.cache/trtllm-operator/testbin).
# kube-apiserver, kube-controller-manager, kube-scheduler and kubectl come from k8s.io/kubernetes through
# a throw-away wrapper module whose replace directives point every staging module at its published
# version (k/k's own go.mod maps them to ./staging, which `go install pkg@version` refuses).
set -euo pipefail

K8S_VERSION=${K8S_VERSION:-1.34.4}
ETCD_VERSION=${ETCD_VERSION:-v3.6.16}
KWOK_VERSION=${KWOK_VERSION:-v0.8.0}
HELM_VERSION=${HELM_VERSION:-v3.22.0}

ROOT=${TRTLLM_OPERATOR_TESTBIN_ROOT:-${XDG_CACHE_HOME:-$HOME/.cache}/trtllm-operator/testbin}
W="$ROOT/k8s-v$K8S_VERSION-etcd-$ETCD_VERSION-kwok-$KWOK_VERSION-helm-$HELM_VERSION"
BIN="$W/bin"
mkdir -p "$BIN"

log() { echo "[build-testbin] $*" >&2; }

# One build at a time per version set: a second caller (another test process, another worktree) waits
# for the first and then finds everything built, instead of compiling the same binaries in parallel.
# shellcheck source=hack/lib/lock.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib/lock.sh"
exec 9>"$W/.build.lock"
take_lock 9 "$W/.build.lock" "the control-plane binaries in $BIN" build-testbin

all_built=1
for b in kube-apiserver kube-controller-manager kube-scheduler kubectl etcd kwok helm; do
  [ -x "$BIN/$b" ] || all_built=0
done
if [ "$all_built" = 1 ]; then
  echo "$BIN"
  exit 0
fi
if ! command -v go >/dev/null 2>&1; then
  log "ERROR: the Go toolchain (>= 1.24) is needed to build the control plane; install it from https://go.dev/dl/"
  exit 1
fi
export GOFLAGS=-mod=mod
export CGO_ENABLED=0

need() { [ -x "$BIN/$1" ] || return 0; return 1; }

if need kube-apiserver || need kube-controller-manager || need kube-scheduler || need kubectl; then
  start=$(date +%s)
  log "building Kubernetes v$K8S_VERSION (kube-apiserver, kube-controller-manager, kube-scheduler, kubectl); first build takes a while"
  mkdir -p "$W/k8s-src" && cd "$W/k8s-src"
  [ -f go.mod ] || go mod init example.invalid/testbin >/dev/null 2>&1
  GOMOD=$(go mod download -json "k8s.io/kubernetes@v$K8S_VERSION" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
  for m in $(sed -n 's#^[[:space:]]*\(k8s.io/[a-z0-9-]*\) => \./staging/src/.*#\1#p' "$GOMOD"); do
    go mod edit -replace="$m=$m@v0.${K8S_VERSION#1.}"
  done
  if ! grep -q '^godebug' go.mod; then grep -E '^godebug ' "$GOMOD" >> go.mod || true; fi
  go get -tool "k8s.io/kubernetes/cmd/kube-apiserver@v$K8S_VERSION" \
                "k8s.io/kubernetes/cmd/kube-controller-manager@v$K8S_VERSION" \
                "k8s.io/kubernetes/cmd/kube-scheduler@v$K8S_VERSION" \
                "k8s.io/kubernetes/cmd/kubectl@v$K8S_VERSION" >&2
  minor=$(echo "$K8S_VERSION" | cut -d. -f2)
  LDF="-s -w -X k8s.io/component-base/version.gitVersion=v$K8S_VERSION -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor -X k8s.io/component-base/version.gitTreeState=clean -X k8s.io/client-go/pkg/version.gitVersion=v$K8S_VERSION -X k8s.io/client-go/pkg/version.gitMajor=1 -X k8s.io/client-go/pkg/version.gitMinor=$minor"
  go build -trimpath -ldflags "$LDF" -o "$BIN/" \
    k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
    k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubectl
  log "Kubernetes built in $(( $(date +%s) - start )) s"
fi

if need etcd; then
  start=$(date +%s)
  log "building etcd $ETCD_VERSION"
  mkdir -p "$W/etcd-src" && cd "$W/etcd-src"
  [ -f go.mod ] || go mod init example.invalid/etcdbin >/dev/null 2>&1
  go get -tool "go.etcd.io/etcd/server/v3@$ETCD_VERSION" >&2
  go build -trimpath -ldflags "-s -w" -o "$BIN/etcd" go.etcd.io/etcd/server/v3
  log "etcd built in $(( $(date +%s) - start )) s"
fi

if need kwok; then
  start=$(date +%s)
  log "building kwok $KWOK_VERSION"
  GOBIN="$BIN" go install "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION"
  log "kwok built in $(( $(date +%s) - start )) s"
fi

if need helm; then
  start=$(date +%s)
  log "building helm $HELM_VERSION"
  GOBIN="$BIN" go install -ldflags "-X helm.sh/helm/v3/internal/version.version=$HELM_VERSION" "helm.sh/helm/v3/cmd/helm@$HELM_VERSION"
  log "helm built in $(( $(date +%s) - start )) s"
fi

echo "$BIN"
