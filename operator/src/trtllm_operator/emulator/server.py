"""The emulator's moving parts: a fleet of ``/metrics`` endpoints, the load ticker, control inputs.

* :class:`Fleet` — one HTTP endpoint per emulated Triton pod, each bound to its own address
  (a kwok pod's IP in 127.1.0.0/16: the whole 127.0.0.0/8 is loopback on Linux) on the metrics port
  (8002), serving ``GET /metrics``. A ticker thread advances every replica's load model every
  ``tick_seconds``, splitting the total arrival rate evenly over the endpoints (as a Service
  would). Thread-safe; a context manager.
* :class:`ControlServer` — a small JSON HTTP API on (by default) 127.0.0.1 to change the load at
  run time: ``GET /state``, ``GET|PUT /load`` (a :class:`~.model.Control` document),
  ``POST /endpoints`` ``{"address": "127.1.0.9"}``, ``DELETE /endpoints/<address>``.
* :class:`LoadFileWatcher` — the same control document from a JSON or YAML file, re-read when its
  modification time changes (a bad file is logged and the previous control kept).
* :class:`PodFollower` — optional: keeps the endpoints equal to the IPs of the Running pods that a
  label selector matches (the demo and the integration tests: pods come and go as the operator
  scales). Uses the ``kubernetes`` client; imported only when used.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import uuid
from collections.abc import Iterable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import yaml

from trtllm_operator.emulator.exposition import families, render
from trtllm_operator.emulator.model import Control, ReplicaState, ServingProfile

__all__ = ["ControlServer", "Endpoint", "Fleet", "LoadFileWatcher", "PodFollower", "load_control_file"]

log = logging.getLogger(__name__)

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True


class Endpoint:
    """One emulated Triton pod: its load state and its bound ``/metrics`` server."""

    def __init__(self, fleet: Fleet, address: str, port: int) -> None:
        self.address = address
        self.port = port
        self.state = ReplicaState(fleet.profile)
        self.gpu_uuid = f"GPU-{uuid.uuid5(uuid.NAMESPACE_URL, address)}"
        fleet_ref = fleet

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path.split("?")[0] != "/metrics":
                    self.send_error(404, "only /metrics is served on the metrics port")
                    return
                status, body = fleet_ref.page(address)
                data = body.encode()
                self.send_response(status)
                self.send_header("Content-Type", CONTENT_TYPE)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                log.debug("%s %s", address, format % args)

        self.httpd = _Server((address, port), Handler)
        self.port = self.httpd.server_address[1]  # the bound port (``port`` 0 picks a free one)
        self.thread = threading.Thread(
            target=self.httpd.serve_forever, name=f"emulator-{address}", daemon=True
        )
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=5)


class Fleet:
    """Emulated Triton pods sharing one load. ``port``: the metrics port every endpoint binds."""

    def __init__(
        self,
        profile: ServingProfile | None = None,
        *,
        port: int = 8002,
        control: Control | None = None,
        tick_seconds: float = 0.1,
    ) -> None:
        self.profile = profile or ServingProfile()
        self.port = port
        self.tick_seconds = tick_seconds
        self._control = control or Control()
        self._endpoints: dict[str, Endpoint] = {}
        self._lock = threading.RLock()
        self._stop = threading.Event()
        self._ticker: threading.Thread | None = None

    # -- endpoints ---------------------------------------------------------------------------
    def add(self, address: str) -> Endpoint:
        """Bind a new endpoint on ``address:port`` (idempotent). Raises ``OSError`` if it cannot bind."""
        with self._lock:
            if address in self._endpoints:
                return self._endpoints[address]
            endpoint = Endpoint(self, address, self.port)
            self._endpoints[address] = endpoint
            log.info("serving Triton metrics on http://%s:%d/metrics", address, endpoint.port)
            return endpoint

    def remove(self, address: str) -> None:
        with self._lock:
            endpoint = self._endpoints.pop(address, None)
        if endpoint is not None:
            endpoint.close()
            log.info("stopped http://%s:%d/metrics", address, self.port)

    def endpoint(self, address: str) -> Endpoint | None:
        with self._lock:
            return self._endpoints.get(address)

    def addresses(self) -> list[str]:
        with self._lock:
            return sorted(self._endpoints)

    # -- load --------------------------------------------------------------------------------
    @property
    def control(self) -> Control:
        with self._lock:
            return self._control

    def set_control(self, control: Control) -> None:
        with self._lock:
            self._control = control
        log.info("load: %s", json.dumps(control.to_dict()))

    def step(self, dt: float) -> None:
        """Advance every replica by ``dt`` seconds (the ticker calls this; tests may too)."""
        with self._lock:
            if not self._endpoints:
                return
            rate = self._control.arrival_rate / len(self._endpoints)
            for endpoint in self._endpoints.values():
                endpoint.state.step(rate, dt)

    def page(self, address: str) -> tuple[int, str]:
        """(HTTP status, body) of ``/metrics`` for one endpoint."""
        with self._lock:
            endpoint = self._endpoints.get(address)
            if endpoint is None:
                return 404, "no such endpoint\n"
            control = self._control.for_endpoint(address)
            if control.unavailable:
                return 503, "metrics unavailable (emulated failure)\n"
            return 200, render(families(endpoint.state, control, endpoint.gpu_uuid))

    def snapshot(self) -> dict[str, Any]:
        """JSON-able view: the control and every endpoint's gauges."""
        with self._lock:
            return {
                "control": self._control.to_dict(),
                "capacityPerReplicaRps": round(self.profile.capacity_rps, 3),
                "endpoints": {
                    a: {
                        "waiting": round(e.state.waiting, 3),
                        "active": round(e.state.active, 3),
                        "kvCacheUtilization": round(e.state.kv_used_blocks / self.profile.kv_blocks, 4),
                        "completed": round(e.state.completed, 3),
                    }
                    for a, e in sorted(self._endpoints.items())
                },
            }

    # -- lifecycle ---------------------------------------------------------------------------
    def start(self) -> Fleet:
        if self._ticker is None:
            self._ticker = threading.Thread(target=self._tick, name="emulator-ticker", daemon=True)
            self._ticker.start()
        return self

    def _tick(self) -> None:
        last = time.monotonic()
        while not self._stop.wait(self.tick_seconds):
            now = time.monotonic()
            self.step(now - last)
            last = now

    def stop(self) -> None:
        self._stop.set()
        if self._ticker is not None:
            self._ticker.join(timeout=5)
        for address in self.addresses():
            self.remove(address)

    def __enter__(self) -> Fleet:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def load_control_file(path: Path) -> Control:
    """Parse a control document from a JSON or YAML file (YAML is a superset of JSON)."""
    doc = yaml.safe_load(path.read_text()) or {}
    return Control.from_dict(doc)


class LoadFileWatcher:
    """Re-read ``path`` into ``fleet`` whenever its modification time changes."""

    def __init__(self, fleet: Fleet, path: Path, poll_seconds: float = 0.25) -> None:
        self.fleet = fleet
        self.path = path
        self.poll_seconds = poll_seconds
        self._seen: float | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="emulator-load-file", daemon=True)

    def check(self) -> None:
        try:
            mtime = self.path.stat().st_mtime
        except FileNotFoundError:
            return
        if mtime == self._seen:
            return
        self._seen = mtime
        try:
            self.fleet.set_control(load_control_file(self.path))
        except (ValueError, yaml.YAMLError) as exc:
            log.error("%s: %s (keeping the previous load)", self.path, exc)

    def _run(self) -> None:
        while not self._stop.wait(self.poll_seconds):
            self.check()

    def start(self) -> LoadFileWatcher:
        self.check()
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)


class ControlServer:
    """JSON control API for a :class:`Fleet` on ``bind:port`` (port 0: pick a free one)."""

    def __init__(self, fleet: Fleet, port: int, bind: str = "127.0.0.1") -> None:
        self.fleet = fleet

        class Handler(BaseHTTPRequestHandler):
            def _reply(self, status: int, doc: Any) -> None:
                data = (json.dumps(doc, indent=1) + "\n").encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _body(self) -> Any:
                length = int(self.headers.get("Content-Length") or 0)
                return json.loads(self.rfile.read(length) or b"{}")

            def do_GET(self) -> None:
                if self.path == "/state":
                    self._reply(200, fleet.snapshot())
                elif self.path == "/load":
                    self._reply(200, fleet.control.to_dict())
                else:
                    self._reply(404, {"error": "use GET /state, GET|PUT /load, POST|DELETE /endpoints"})

            def do_PUT(self) -> None:
                if self.path != "/load":
                    self._reply(404, {"error": "PUT /load only"})
                    return
                try:
                    fleet.set_control(Control.from_dict(self._body()))
                except ValueError as exc:  # json.JSONDecodeError is a ValueError
                    self._reply(400, {"error": str(exc)})
                    return
                self._reply(200, fleet.control.to_dict())

            def do_POST(self) -> None:
                if self.path != "/endpoints":
                    self._reply(404, {"error": "POST /endpoints only"})
                    return
                try:
                    address = str(self._body()["address"])
                    fleet.add(address)
                except (ValueError, KeyError) as exc:
                    self._reply(400, {"error": f"body must be {{'address': IP}}: {exc}"})
                    return
                except OSError as exc:
                    self._reply(409, {"error": f"cannot bind {exc}"})
                    return
                self._reply(201, {"addresses": fleet.addresses()})

            def do_DELETE(self) -> None:
                prefix = "/endpoints/"
                if not self.path.startswith(prefix):
                    self._reply(404, {"error": "DELETE /endpoints/<address> only"})
                    return
                fleet.remove(self.path[len(prefix) :])
                self._reply(200, {"addresses": fleet.addresses()})

            def log_message(self, format: str, *args: Any) -> None:
                log.debug("control %s", format % args)

        self.httpd = _Server((bind, port), Handler)
        self.port = self.httpd.server_address[1]
        self._thread = threading.Thread(target=self.httpd.serve_forever, name="emulator-control", daemon=True)

    def start(self) -> ControlServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


class PodFollower:
    """Keep ``fleet``'s endpoints equal to the IPs of Running, not-deleting pods matching a selector.

    ``core_api``: a ``kubernetes.client.CoreV1Api``. Polls every ``poll_seconds``; an address that
    cannot be bound is logged and retried on the next poll.
    """

    def __init__(
        self, fleet: Fleet, core_api: Any, namespace: str, selector: str, poll_seconds: float = 0.5
    ) -> None:
        self.fleet = fleet
        self.core_api = core_api
        self.namespace = namespace
        self.selector = selector
        self.poll_seconds = poll_seconds
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="emulator-pod-follower", daemon=True)

    @staticmethod
    def serving_ips(pods: Iterable[Any]) -> set[str]:
        """IPs of pods that are Running and not being deleted (typed client ``V1Pod`` objects)."""
        return {
            p.status.pod_ip
            for p in pods
            if p.status is not None
            and p.status.pod_ip
            and p.status.phase == "Running"
            and p.metadata.deletion_timestamp is None
        }

    def sync(self) -> None:
        pods = self.core_api.list_namespaced_pod(self.namespace, label_selector=self.selector).items
        wanted = self.serving_ips(pods)
        for address in set(self.fleet.addresses()) - wanted:
            self.fleet.remove(address)
        for address in sorted(wanted - set(self.fleet.addresses())):
            try:
                self.fleet.add(address)
            except OSError as exc:
                log.warning("cannot bind %s:%d: %s", address, self.fleet.port, exc)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.sync()
            except Exception as exc:  # keep following through API hiccups
                log.warning("listing pods %s in %s failed: %s", self.selector, self.namespace, exc)
            self._stop.wait(self.poll_seconds)

    def start(self) -> PodFollower:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)
