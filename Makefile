# trtllm-operator — `make demo` runs the main job, `make test` runs every test tier.
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
VENV ?= .venv
PY := $(VENV)/bin/python
PYTEST := $(PY) -m pytest

.PHONY: help venv testbin control-plane triton-runtime lint unit integration fidelity e2e test crds demo demo-down cluster-up cluster-down

help:
	@echo "make demo       run the main job on a local control plane with kwok GPU nodes"
	@echo "make demo-down  stop everything the demo started"
	@echo "make test       lint + unit + integration + fidelity (real Triton) + e2e"
	@echo "make crds       regenerate crds/, the chart's copies and docs/api.md's field reference from the API models"

venv:
	@hack/venv.sh

# The control plane (hack/build-testbin.sh) and the add-on controllers the tests run beside it
# (hack/build-controllers.sh: LeaderWorkerSet, Prometheus, prometheus-operator, prometheus-adapter, KEDA),
# each from its Go module at a pinned version.
testbin: control-plane
	@addons=$$(hack/build-controllers.sh) && echo "[testbin] $$addons"

# The control plane alone (etcd, Kubernetes, kwok, helm): what the demo and the local cluster run.
control-plane:
	@bin=$$(hack/build-testbin.sh) && echo "[testbin] $$bin"

# The real tritonserver 2.51 (nvidia-pytriton 0.7.0) + the Python stub's environment, cached in
# ~/.cache/trtllm-operator/triton-2.51.0-*/ (docs/triton-cpu.md).
triton-runtime:
	@rt=$$(hack/triton-runtime.sh) && echo "[triton-runtime] $$rt"

lint: venv
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports

# helm (the chart tests) is the control plane's; no unit test runs an add-on controller.
unit: venv control-plane
	$(PYTEST) tests/unit

integration: venv testbin
	$(PYTEST) tests/integration

# Every model repository the builder packages and the operator renders, in a real Triton.
fidelity: venv triton-runtime
	$(PYTEST) tests/fidelity

e2e: venv testbin triton-runtime
	$(PYTEST) tests/e2e

# The add-on controllers (hack/build-controllers.sh) build in the background while lint, unit and
# fidelity run, none of which uses them: on a machine with an empty cache their ≈ 40 CPU-minutes of Go
# builds fill the core those tiers leave idle. integration's `testbin` then runs the same script, which
# waits on each component's build lock (hack/lib/lock.sh) and finds it built. Warm, the background run
# only checks the cache. The build runs in its own session (setsid), so a failing tier or Ctrl-C /
# SIGTERM stops the whole build, its `go build` children with it (they would otherwise keep the
# build locks, hack/lib/lock.sh), and removes its log.
test: venv control-plane
	@log=$$(mktemp -t trtllm-operator-addons.XXXXXX); \
	setsid hack/build-controllers.sh >"$$log" 2>&1 & addons=$$!; \
	stop_addons() { kill -TERM -- "-$$addons" 2>/dev/null || kill -TERM "$$addons" 2>/dev/null || true; rm -f "$$log"; }; \
	trap 'stop_addons; exit 130' INT TERM; \
	echo "[test] building the add-on controllers in the background (pid $$addons, log $$log)"; \
	$(MAKE) --no-print-directory lint unit fidelity || { rc=$$?; stop_addons; exit $$rc; }; \
	trap - INT TERM; \
	wait $$addons || { tail -n 40 "$$log"; echo "[test] hack/build-controllers.sh failed (log $$log)"; exit 1; }; \
	rm -f "$$log"; \
	$(MAKE) --no-print-directory integration e2e
	@echo "make test: all tiers passed"

crds: venv
	$(VENV)/bin/trtllm-operator crds --output-dir crds --chart-dir charts/trtllm-operator/crds --api-docs docs/api.md

# hack/local-cluster runs the control plane and kwok only: the add-on controllers are the tests' own.
cluster-up: venv control-plane
	hack/local-cluster up

cluster-down:
	hack/local-cluster down

demo: venv control-plane triton-runtime
	hack/demo.sh

demo-down:
	hack/demo.sh down
