"""Inputs a user or a model publisher controls are bounded before the operator spends on them.

* :func:`trtllm_operator.metrics.http.bounded_get` against real local HTTP servers: a body over the
  limit, a redirect, a server that drips bytes, a declared oversize ``Content-Length``;
* the capacity planner's ``config.json`` limits (1e18 layers, ``Infinity``, ``NaN``, a huge RoPE
  factor) and its time budget.
"""

from __future__ import annotations

import http.server
import importlib
import json
import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest

from engine_builder.planner import Architecture, PlanInputError, PlanRequest, load_hf_config, lookup, plan
from engine_builder.planner.architecture import CONFIG_LIMITS
from engine_builder.planner.plan import rotary_factor
from trtllm_operator.metrics.http import (
    FetchTimeoutError,
    RedirectRefusedError,
    ResponseTooLargeError,
    bounded_get,
)

CONFIGS = Path(__file__).resolve().parents[1] / "fixtures" / "model-configs"


class _Handler(http.server.BaseHTTPRequestHandler):
    routes: ClassVar[dict[str, Any]] = {}

    def do_GET(self) -> None:
        self.routes[self.path](self)

    def log_message(self, *args: Any) -> None:
        pass


def _big(h: _Handler) -> None:
    h.send_response(200)
    h.end_headers()
    try:
        for _ in range(1000):
            h.wfile.write(b"x" * 65536)
    except OSError:
        pass


def _declared(h: _Handler) -> None:
    h.send_response(200)
    h.send_header("Content-Length", str(10**9))
    h.end_headers()


def _redirect(h: _Handler) -> None:
    h.send_response(302)
    h.send_header("Location", "http://169.254.169.254/latest/meta-data/")
    h.end_headers()


def _drip(h: _Handler) -> None:
    h.send_response(200)
    h.end_headers()
    try:
        for _ in range(50):
            h.wfile.write(b"#\n")
            h.wfile.flush()
            time.sleep(0.1)
    except OSError:
        pass


def _small(h: _Handler) -> None:
    body = b"nv_inference_pending_request_count 0\n"
    h.send_response(200)
    h.send_header("Content-Length", str(len(body)))
    h.end_headers()
    h.wfile.write(body)


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    _Handler.routes = {
        "/big": _big,
        "/declared": _declared,
        "/redirect": _redirect,
        "/drip": _drip,
        "/ok": _small,
    }
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()
    srv.server_close()


def test_small_page_is_returned(server: str) -> None:
    assert bounded_get(server + "/ok", 5) == b"nv_inference_pending_request_count 0\n"


def test_body_over_the_limit_is_cut_off(server: str) -> None:
    with pytest.raises(ResponseTooLargeError, match="more than 1048576 bytes"):
        bounded_get(server + "/big", 10, max_bytes=2**20)


def test_declared_oversize_is_refused_before_reading(server: str) -> None:
    with pytest.raises(ResponseTooLargeError, match="1000000000 bytes announced"):
        bounded_get(server + "/declared", 5)


def test_redirects_are_never_followed(server: str) -> None:
    with pytest.raises(RedirectRefusedError, match=r"169\.254\.169\.254"):
        bounded_get(server + "/redirect", 5)


def test_a_dripping_server_is_cut_off_at_the_deadline(server: str) -> None:
    with pytest.raises(FetchTimeoutError):
        bounded_get(server + "/drip", 0.5)


def test_only_http_urls_are_fetched() -> None:
    with pytest.raises(OSError, match="only http and https"):
        bounded_get("file:///etc/passwd", 5)


def _llama() -> dict[str, Any]:
    return dict(json.loads((CONFIGS / "meta-llama__Llama-3.1-8B-Instruct.json").read_text()))


@pytest.mark.parametrize(
    ("key", "value", "match"),
    [
        ("num_hidden_layers", 1e18, "1000000000000000000 is larger than the planner accepts (1024)"),
        ("num_hidden_layers", 10**18, "is larger than the planner accepts"),
        ("num_hidden_layers", float("inf"), "must be a positive integer"),
        ("num_hidden_layers", float("nan"), "must be a positive integer"),
        ("hidden_size", 2**40, "is larger than the planner accepts (2147483647)"),
        ("vocab_size", 2.5, "must be a positive integer"),
    ],
)
def test_config_integers_are_bounded(key: str, value: float, match: str) -> None:
    config = _llama()
    config[key] = value
    with pytest.raises(PlanInputError, match=re.escape(match)) as err:
        Architecture.from_hf_config(config)
    assert err.value.field == key


def test_a_real_config_is_within_the_limits() -> None:
    for path in CONFIGS.glob("*.json"):
        config = json.loads(path.read_text())
        layers = config.get("num_hidden_layers") or (config.get("text_config") or {}).get("num_hidden_layers")
        if layers:
            assert layers <= CONFIG_LIMITS["num_hidden_layers"], path.name


def test_rope_factor_is_bounded() -> None:
    config = _llama()
    config["rope_scaling"] = {"rope_type": "linear", "factor": 1e300}
    with pytest.raises(PlanInputError, match=r"rope_scaling\.factor"):
        rotary_factor(Architecture.from_hf_config(config))


def test_the_plan_budget_is_cpu_time_not_wall_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    """A plan that waits (the operator's thread kept off the CPU by a loaded machine) does not spend
    the budget: before, a wall-clock budget failed a Ready engine re-planned under load."""
    # the module, not the function ``engine_builder.planner.plan`` that the package exports
    plan_module = importlib.import_module("engine_builder.planner.plan")
    computed = plan_module._compute

    def slow_compute(*args: Any, **kwargs: Any) -> Any:
        time.sleep(0.3)  # off the CPU, as a thread waiting for the GIL or a core
        return computed(*args, **kwargs)

    monkeypatch.setattr(plan_module, "_compute", slow_compute)
    arch = Architecture.from_hf_config(load_hf_config(CONFIGS / "meta-llama__Llama-3.1-8B-Instruct.json"))
    request = PlanRequest(quantization="fp8", tp=1, max_seq_len=8192, max_batch_size=64)
    assert plan_module.plan(arch, request, lookup("H200"), budget_seconds=0.2).fits


def test_a_spent_plan_budget_names_the_field() -> None:
    arch = Architecture.from_hf_config(load_hf_config(CONFIGS / "meta-llama__Llama-3.1-8B-Instruct.json"))
    request = PlanRequest(quantization="fp8", tp=1, max_seq_len=8192, max_batch_size=64)
    with pytest.raises(PlanInputError, match="budget") as info:
        plan(arch, request, lookup("H200"), budget_seconds=0.0)
    assert info.value.field == "plan"
