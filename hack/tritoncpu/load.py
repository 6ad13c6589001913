"""A closed-loop load generator of real generate requests to real Triton servers (tritonclient).

``concurrency`` workers each send one request at a time to the ensemble (``text_input``,
``max_tokens``) through Triton's KServe v2 inference API (``tritonclient.http``), picking the next
ready server round-robin — what a Service in front of the pods does. The set of servers is
re-read from ``addresses()`` before every request, so new replicas get load as they come up.
Bounded: it stops on :meth:`stop` or after ``max_seconds``.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import tritonclient.http as httpclient
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


def generate(
    address: str, prompt: str, max_tokens: int, *, model: str = "ensemble", timeout: float = 120
) -> str:
    """One generate request through ``model`` on ``address``:8000; returns ``text_output``."""
    client = httpclient.InferenceServerClient(
        f"{address}:8000", network_timeout=timeout, connection_timeout=timeout
    )
    try:
        text = httpclient.InferInput("text_input", [1, 1], "BYTES")
        text.set_data_from_numpy(np.array([[prompt.encode()]], dtype=np.object_))
        tokens = httpclient.InferInput("max_tokens", [1, 1], "INT32")
        tokens.set_data_from_numpy(np.array([[max_tokens]], dtype=np.int32))
        result = client.infer(model, [text, tokens], outputs=[httpclient.InferRequestedOutput("text_output")])
        out = result.as_numpy("text_output")
        value = out.reshape(-1)[0]
        return value.decode() if isinstance(value, bytes) else str(value)
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
        while not self._stop.is_set() and time.monotonic() < deadline:
            address = self._next_address()
            if address is None:
                self._stop.wait(0.5)
                continue
            t0 = time.monotonic()
            with self._lock:
                self.stats.sent += 1
            try:
                generate(address, PROMPTS[index % len(PROMPTS)], self.max_tokens)
            except (InferenceServerException, OSError) as exc:
                with self._lock:
                    self.stats.failed += 1
                    self.stats.last_error = f"{address}: {exc}"
                self._stop.wait(0.2)
                continue
            with self._lock:
                self.stats.ok += 1
                self.stats.latencies.append(time.monotonic() - t0)

    def start(self) -> LoadGenerator:
        for t in self._threads:
            t.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(timeout=150)
