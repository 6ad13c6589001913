"""A closed-loop load generator of real generate requests to real Triton servers (tritonclient).

``concurrency`` workers each send one request at a time to the ensemble (``text_input``,
``max_tokens``) through Triton's gRPC streaming inference API (``tritonclient.grpc``
``async_stream_infer``: the way a client talks to a decoupled model — Triton's HTTP infer
endpoint refuses decoupled models), picking the next ready server round-robin — what a Service in
front of the pods does. The set of servers is re-read from ``addresses()`` before every request,
so new replicas get load as they come up. Bounded: it stops on :meth:`stop` or after
``max_seconds``.
"""

from __future__ import annotations

import contextlib
import itertools
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import tritonclient.grpc as grpcclient
from tritonclient.utils import InferenceServerException

PROMPTS = (
    "The operator scales Triton replicas when",
    "Kubernetes schedules GPU pods onto nodes that",
    "A tiny Llama generates text on the CPU because",
    "TensorRT-LLM engines are built once and",
)


@dataclass
class LoadStats:
    sent: int = 0
    ok: int = 0
    failed: int = 0
    last_error: str = ""
    latencies: list[float] = field(default_factory=list)


class Client:
    """One gRPC stream to one server; :meth:`generate` sends a request and gathers its responses
    until Triton's final-response flag (``enable_empty_final_response``)."""

    def __init__(self, address: str, timeout: float = 120) -> None:
        self.address = address
        self.timeout = timeout
        self.client = grpcclient.InferenceServerClient(f"{address}:8001")
        self.results: queue.Queue[tuple[Any, Any]] = queue.Queue()
        self.client.start_stream(callback=lambda result, error: self.results.put((result, error)))
        self._ids = itertools.count()

    def generate(
        self, prompt: str, max_tokens: int, *, model: str = "ensemble", stream: bool = False
    ) -> list[str]:
        """The ``text_output`` of every response (one, or one per token when ``stream``)."""
        text = grpcclient.InferInput("text_input", [1, 1], "BYTES")
        text.set_data_from_numpy(np.array([[prompt.encode()]], dtype=np.object_))
        tokens = grpcclient.InferInput("max_tokens", [1, 1], "INT32")
        tokens.set_data_from_numpy(np.array([[max_tokens]], dtype=np.int32))
        flag = grpcclient.InferInput("stream", [1, 1], "BOOL")
        flag.set_data_from_numpy(np.array([[stream]], dtype=bool))
        self.client.async_stream_infer(
            model,
            [text, tokens, flag],
            request_id=str(next(self._ids)),
            outputs=[grpcclient.InferRequestedOutput("text_output")],
            enable_empty_final_response=True,
        )
        texts = []
        while True:
            result, error = self.results.get(timeout=self.timeout)
            if error is not None:
                raise error
            out = result.as_numpy("text_output")
            if out is not None and out.size:
                value = out.reshape(-1)[0]
                texts.append(value.decode(errors="replace") if isinstance(value, bytes) else str(value))
            if result.get_response().parameters["triton_final_response"].bool_param:
                return texts

    def close(self) -> None:
        self.client.stop_stream()
        self.client.close()


def generate(address: str, prompt: str, max_tokens: int, *, stream: bool = False) -> list[str]:
    """One request through the ensemble on ``address``:8001; the text of each response."""
    client = Client(address)
    try:
        return client.generate(prompt, max_tokens, stream=stream)
    finally:
        client.close()


class LoadGenerator:
    def __init__(
        self,
        addresses: Callable[[], list[str]],
        *,
        concurrency: int,
        max_tokens: int,
        max_seconds: float = 600,
    ) -> None:
        self.addresses = addresses
        self.concurrency = concurrency
        self.max_tokens = max_tokens
        self.max_seconds = max_seconds
        self.stats = LoadStats()
        #: The first exception ``addresses`` raised (e.g. the demo's StepError for a failed pod): it
        #: stops every worker, without a traceback, for the caller to raise after :meth:`stop`.
        self.error: Exception | None = None
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._rr = itertools.count()
        self._threads = [
            threading.Thread(target=self._worker, args=(i,), daemon=True) for i in range(concurrency)
        ]

    def _next_address(self) -> str | None:
        current = self.addresses()
        if not current:
            return None
        return current[next(self._rr) % len(current)]

    def _worker(self, index: int) -> None:
        deadline = time.monotonic() + self.max_seconds
        clients: dict[str, Client] = {}
        try:
            while not self._stop.is_set() and time.monotonic() < deadline:
                try:
                    address = self._next_address()
                except Exception as exc:
                    with self._lock:
                        if self.error is None:
                            self.error = exc
                    self._stop.set()
                    break
                if address is None:
                    self._stop.wait(0.5)
                    continue
                t0 = time.monotonic()
                with self._lock:
                    self.stats.sent += 1
                try:
                    if address not in clients:
                        clients[address] = Client(address)
                    clients[address].generate(PROMPTS[index % len(PROMPTS)], self.max_tokens)
                except (InferenceServerException, OSError, queue.Empty) as exc:
                    with self._lock:
                        self.stats.failed += 1
                        self.stats.last_error = f"{address}: {exc}"
                    broken = clients.pop(address, None)
                    if broken is not None:
                        with contextlib.suppress(Exception):
                            broken.close()
                    self._stop.wait(0.5)
                    continue
                with self._lock:
                    self.stats.ok += 1
                    self.stats.latencies.append(time.monotonic() - t0)
        finally:
            for client in clients.values():
                with contextlib.suppress(Exception):
                    client.close()

    def start(self) -> LoadGenerator:
        for t in self._threads:
            t.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(timeout=150)
