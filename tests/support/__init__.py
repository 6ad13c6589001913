"""Test support, shared by every tier (no test module imports another).

- cluster.py, operator.py, wait.py: the local control plane, the operator run against it, polling.
- ports.py: TCP ports without a bind-release-reuse race where avoidable; prometheus.py: a real Prometheus.
- manifests.py, api.py, artifacts.py: manifest builders, the one API wrapper, cached engines.
- messages.py: what a test asks of an error message (that it names the mutated field).
- scripts.py: a repository script outside any package (benchmarks/, hack/) loaded as a module;
  demo.py: the demo driver loaded that way, its work paths moved under a test directory.
- engine_decisions.py, serving.py: pure fixtures for decision and rendering unit tests.
- fidelity.py: the tiny Llama built by the real engine-builder for a real Triton (tests/fidelity and
  benchmarks/triton_cpu.py); builder_pause.py: the builder stopped in quantize until a test signals it.
"""
