"""The load model behind each emulated Triton replica: a fluid queue in front of an inflight batcher.

Per replica, with requests arriving at ``rate`` requests/s (the fleet splits its total evenly, as
a Service does)::

    blocks_per_request = ceil((input_tokens + output_tokens) / tokens_per_block)
                         # GUARANTEED_NO_EVICT reserves a request's whole length up front
    max_active         = min(max_batch_size, kv_blocks // blocks_per_request)
    request_seconds    = prefill_seconds + output_tokens / decode_tokens_per_second

and every step of ``dt`` seconds::

    waiting += rate·dt                               (arrivals)
    done     = active·dt / request_seconds           (completions, exponential service)
    admit    = min(waiting, max_active − active)     (the batcher takes what fits)
    used KV blocks = active × blocks_per_request

So below saturation (``rate < max_active / request_seconds``) the queue stays near 0 and KV
utilization follows the load; above it the waiting queue grows by the excess and KV utilization sits
at ``max_active × blocks_per_request / kv_blocks``. The defaults (64 sequences, 1600 blocks of 64
tokens, 1024 + 256 tokens, 40 tokens/s per sequence) give ≈ 9.7 requests/s per replica and a
saturated KV utilization of 0.8 — illustrative numbers of the order of an 8B model on one H100,
not a calibration (the simulator of ``trtllm-operator simulate`` has the calibrated model).

:class:`Control` pins or disturbs what a replica exports, for tests: ``fixed`` gauges bypass the
model, ``omit`` drops families (an older backend), ``unavailable`` makes ``/metrics`` fail.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

__all__ = ["Control", "ReplicaState", "ServingProfile"]


@dataclass(frozen=True)
class ServingProfile:
    """Capacity of one replica. Tokens, blocks and sequences are counts; times in seconds."""

    max_batch_size: int = 64
    kv_blocks: int = 1600
    tokens_per_block: int = 64
    input_tokens: int = 1024
    output_tokens: int = 256
    decode_tokens_per_second: float = 40.0
    prefill_seconds: float = 0.2
    max_queue_size: int | None = None

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if value is not None and value <= 0:
                raise ValueError(f"--{f.name.replace('_', '-')} {value}: must be > 0")

    @property
    def blocks_per_request(self) -> int:
        return math.ceil((self.input_tokens + self.output_tokens) / self.tokens_per_block)

    @property
    def max_active(self) -> int:
        """Sequences in flight at most: the batch size or what the KV cache can reserve."""
        return max(1, min(self.max_batch_size, self.kv_blocks // self.blocks_per_request))

    @property
    def request_seconds(self) -> float:
        return self.prefill_seconds + self.output_tokens / self.decode_tokens_per_second

    @property
    def capacity_rps(self) -> float:
        """Requests per second one replica sustains."""
        return self.max_active / self.request_seconds


_CONTROL_KEYS = {"arrivalRate", "fixed", "omit", "unavailable", "endpoints"}
_FIXED_KEYS = {"requests", "scheduled", "kvCacheUtilization"}
#: Gauges a control document may no longer pin, and why: each is derived by the upstream relations
#: (:mod:`trtllm_operator.metrics.exposition`), so pinning it could export a page no server exports.
_DERIVED_KEYS = {
    "waiting": "waiting is derived (active − scheduled); pin requests and scheduled",
    "active": "active is derived (min(requests, max)); pin requests",
    "pending": "Triton's pending count is 0 for tensorrt_llm (execute returns at enqueue); pin requests",
}


@dataclass(frozen=True)
class Control:
    """What the fleet is told to do (the load file / control endpoint document, camelCase keys).

    ``arrivalRate``: total requests/s over all endpoints; ``fixed``: internal state pinned on every
    endpoint — ``requests`` (held by the executor: active plus its unexported queue) and ``scheduled``
    (this iteration's batch) as counts, ``kvCacheUtilization`` as a fraction; the exported gauges
    follow from them (:func:`trtllm_operator.emulator.exposition.internals`);
    ``omit``: family names not exported; ``unavailable``: ``/metrics`` answers 503;
    ``endpoints``: per-address overrides of ``fixed``/``omit``/``unavailable``.
    """

    arrival_rate: float = 0.0
    fixed: Mapping[str, float] = field(default_factory=dict)
    omit: frozenset[str] = frozenset()
    unavailable: bool = False
    endpoints: Mapping[str, Control] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any], *, nested: bool = False) -> Control:
        """Parse a control document. Raises ``ValueError`` naming the bad key."""
        if not isinstance(doc, Mapping):
            raise ValueError(f"control document must be a mapping, got {type(doc).__name__}")
        allowed = _CONTROL_KEYS - ({"arrivalRate", "endpoints"} if nested else set())
        unknown = set(doc) - allowed
        if unknown:
            raise ValueError(f"unknown control key(s) {sorted(unknown)}: use {sorted(allowed)}")
        rate = float(doc.get("arrivalRate", 0.0))
        if rate < 0:
            raise ValueError(f"arrivalRate {rate}: must be ≥ 0 (requests per second)")
        fixed = {str(k): float(v) for k, v in (doc.get("fixed") or {}).items()}
        derived = sorted(set(fixed) & set(_DERIVED_KEYS))
        if derived:
            raise ValueError(f"fixed.{derived[0]} cannot be pinned: {_DERIVED_KEYS[derived[0]]}")
        bad = set(fixed) - _FIXED_KEYS
        if bad:
            raise ValueError(f"unknown fixed gauge(s) {sorted(bad)}: use {sorted(_FIXED_KEYS)}")
        if any(fixed.get(k, 0.0) < 0 for k in ("requests", "scheduled")):
            raise ValueError("fixed.requests and fixed.scheduled must be ≥ 0 (counts)")
        if "requests" in fixed and fixed.get("scheduled", 0.0) > fixed["requests"]:
            raise ValueError(
                f"fixed.scheduled {fixed['scheduled']:g} exceeds fixed.requests {fixed['requests']:g}: "
                "the batch is drawn from the requests the executor holds"
            )
        if not 0 <= fixed.get("kvCacheUtilization", 0.0) <= 1:
            raise ValueError("fixed.kvCacheUtilization must be a fraction in [0, 1]")
        endpoints = {
            str(addr): cls.from_dict(sub, nested=True) for addr, sub in (doc.get("endpoints") or {}).items()
        }
        return cls(
            rate, fixed, frozenset(doc.get("omit") or ()), bool(doc.get("unavailable", False)), endpoints
        )

    def for_endpoint(self, address: str) -> Control:
        """The control that applies to one endpoint (its override, else the fleet-wide one)."""
        return self.endpoints.get(address, self)

    def to_dict(self, *, nested: bool = False) -> dict[str, Any]:
        """Inverse of :meth:`from_dict` (``nested``: an ``endpoints`` entry, without ``arrivalRate``)."""
        out: dict[str, Any] = {} if nested else {"arrivalRate": self.arrival_rate}
        if self.fixed:
            out["fixed"] = dict(self.fixed)
        if self.omit:
            out["omit"] = sorted(self.omit)
        if self.unavailable:
            out["unavailable"] = True
        if self.endpoints:
            out["endpoints"] = {a: c.to_dict(nested=True) for a, c in self.endpoints.items()}
        return out


@dataclass
class ReplicaState:
    """Mutable state of one replica: gauges (fluid, may be fractional) and cumulative counters."""

    profile: ServingProfile = field(default_factory=ServingProfile)
    waiting: float = 0.0
    active: float = 0.0
    admitted_last_step: float = 0.0
    completed: float = 0.0
    rejected: float = 0.0
    iterations: int = 0
    busy_seconds: float = 0.0
    queue_seconds: float = 0.0

    def step(self, rate: float, dt: float) -> None:
        """Advance by ``dt`` seconds with ``rate`` requests/s arriving at this replica."""
        if dt <= 0:
            return
        p = self.profile
        self.waiting += rate * dt
        if p.max_queue_size is not None and self.waiting > p.max_queue_size:
            self.rejected += self.waiting - p.max_queue_size
            self.waiting = float(p.max_queue_size)
        done = min(self.active, self.active * dt / p.request_seconds)
        self.active -= done
        self.completed += done
        admit = max(0.0, min(self.waiting, p.max_active - self.active))
        self.waiting -= admit
        self.active += admit
        self.admitted_last_step = admit
        self.queue_seconds += self.waiting * dt
        if self.active > 0:
            self.busy_seconds += dt
            self.iterations += max(1, round(dt * 50))  # ~20 ms per decoder iteration

    @property
    def kv_used_blocks(self) -> int:
        return min(self.profile.kv_blocks, round(self.active * self.profile.blocks_per_request))
