"""A stand-in API server for unit tests of the operator's client (trtllm_operator.kube.client): it
records every request (method, path with query, the headers that carry meaning, JSON body) and
answers each with the status and JSON body the test set (:attr:`StubServer.answer`; a 200 answer
to a POST goes out as 201, as the API server answers a create).

Not a Kubernetes API server: it checks nothing; tests/integration run against the real one.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from kubernetes import client

#: Request headers a recorded request keeps (the rest — Host, Content-Length — say nothing of the call).
HEADERS = ("Accept", "Content-Type", "Authorization")


@dataclass(frozen=True)
class Request:
    method: str
    path: str  # with the query string, as sent
    headers: tuple[tuple[str, str | None], ...]
    body: Any  # the JSON body decoded, None without one


class StubServer:
    """Records requests in :attr:`requests`; answers ``answer`` = (status, JSON body)."""

    def __init__(self) -> None:
        self.requests: list[Request] = []
        self.answer: tuple[int, Any] = (200, {})
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def _handle(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                stub.requests.append(
                    Request(
                        self.command,
                        self.path,
                        tuple((h, self.headers.get(h)) for h in HEADERS),
                        json.loads(raw) if raw else None,
                    )
                )
                status, body = stub.answer
                if status == 200 and self.command == "POST":
                    status = 201  # the API server answers a create 201 Created
                data = body if isinstance(body, bytes) else json.dumps(body).encode()
                self.send_response(status)
                self.send_header(
                    "Content-Type", "text/plain" if isinstance(body, bytes) else "application/json"
                )
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                self._handle()

            def do_POST(self) -> None:
                self._handle()

            def do_PATCH(self) -> None:
                self._handle()

            def do_DELETE(self) -> None:
                self._handle()

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"

    def api_client(self, token: str = "t0ken") -> client.ApiClient:
        """An ApiClient for this server that sends ``Authorization: Bearer <token>``."""
        cfg = client.Configuration()
        cfg.host = self.url
        cfg.api_key["authorization"] = token
        cfg.api_key_prefix["authorization"] = "Bearer"
        return client.ApiClient(cfg)

    def take(self) -> list[Request]:
        """The requests recorded since the last take."""
        out, self.requests = self.requests, []
        return out


@contextmanager
def stub_server() -> Iterator[StubServer]:
    stub = StubServer()
    thread = threading.Thread(target=stub._server.serve_forever, daemon=True)
    thread.start()
    try:
        yield stub
    finally:
        stub._server.shutdown()
        stub._server.server_close()
