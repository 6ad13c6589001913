"""With ``api: openai``/``both`` the built-in autoscaler and the tuning advisor read ``:9000/metrics``.

Triton's OpenAI frontend opens no metrics port (r26.03 ``main.py`` starts only KServe HTTP/gRPC
besides itself) and serves Triton's metrics at ``GET /metrics`` on its own port. Real HTTP here: a
Triton metrics page (the captured CPU-Triton exposition) served on one local port standing in for
8002 and another for 9000; the pod's IP is 127.0.0.1.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from trtllm_operator.api.deployment import LLMDeploymentSpec
from trtllm_operator.api.signals import ACTIVE_REQUEST_UTILIZATION, KV_CACHE_UTILIZATION
from trtllm_operator.handlers import autoscaler, tuning

PAGE = (Path(__file__).resolve().parents[1] / "fixtures" / "triton_metrics_cpu_standin.txt").read_bytes()


class _Metrics(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        if self.path != "/metrics":
            self.send_error(404)
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.end_headers()
        self.wfile.write(PAGE)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def ports(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[int, int]]:
    """``(triton metrics port, openai port)``: only the second one serves metrics."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Metrics)
    closed = ThreadingHTTPServer(("127.0.0.1", 0), _Metrics)
    dead = closed.server_address[1]
    closed.server_close()  # nothing listens there
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setattr(autoscaler, "METRICS_PORT", dead)
    monkeypatch.setattr(autoscaler, "OPENAI_METRICS_PORT", server.server_address[1])
    try:
        yield dead, server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


def pod() -> dict[str, Any]:
    return {
        "metadata": {"name": "chat-0", "labels": {}},
        "status": {
            "phase": "Running",
            "podIP": "127.0.0.1",
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def spec(api: str) -> LLMDeploymentSpec:
    return LLMDeploymentSpec.model_validate({"engineRef": {"name": "e"}, "server": {"api": api}})


@pytest.mark.parametrize("api", ["openai", "both"])
def test_autoscaler_scrapes_the_openai_port(ports: tuple[int, int], api: str) -> None:
    (signals,), problem = autoscaler._signals(spec(api), "ns", [pod()])
    assert problem is None
    assert signals.value(KV_CACHE_UTILIZATION) is not None
    assert signals.value(ACTIVE_REQUEST_UTILIZATION) is not None
    # the same pod with api: triton is read on the (dead) metrics port: nothing
    (blind,), _ = autoscaler._signals(spec("triton"), "ns", [pod()])
    assert blind.value(KV_CACHE_UTILIZATION) is None and blind.value(ACTIVE_REQUEST_UTILIZATION) is None


def test_tuning_samples_the_openai_port(ports: tuple[int, int], monkeypatch: pytest.MonkeyPatch) -> None:
    _, openai_port = ports
    monkeypatch.setattr(tuning, "metrics_port", lambda api: openai_port if api != "triton" else ports[0])

    class Kube:
        def list(self, *args: Any, **kw: Any) -> list[dict[str, Any]]:
            return [pod()]

    deployment = {"metadata": {"name": "chat", "namespace": "ns"}, "spec": {"server": {"api": "openai"}}}
    sample = tuning.sample_deployment(Kube(), deployment, now=0.0)  # type: ignore[arg-type]
    assert sample.kv_cache_utilization is not None and sample.replicas == 1
    deployment["spec"] = {"server": {"api": "triton"}}
    assert tuning.sample_deployment(Kube(), deployment, now=0.0).kv_cache_utilization is None  # type: ignore[arg-type]
