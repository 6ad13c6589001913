"""Discrete-event simulation of an autoscaled fleet of TensorRT-LLM replicas.

Events (a ``heapq`` of ``(time, seq, kind, arg)``): request arrivals, the end of one replica
iteration, a replica becoming ready after its cold start, metric samples, and autoscaler ticks.
Nothing happens per token: an iteration is one event, and every sequence in it advances by one token
(finish iterations are known at admission, so finishing is a heap pop).

Replica model (TensorRT-LLM inflight batching with the default ``GUARANTEED_NO_EVICT`` capacity
scheduler and FCFS order; paged KV cache; chunked context when :attr:`ReplicaSpec.chunked_context`):

- Requests join at iteration boundaries. At the start of an iteration the scheduler admits waiting
  requests in arrival order while (a) the batch holds fewer than ``max_batch_size`` sequences,
  (b) the request's full reservation ``input + output`` tokens fits in the KV tokens not yet
  reserved, and (c) its prompt fits the iteration's token budget ``max_num_tokens`` minus one token
  per decoding sequence. The first request that does not fit stops admission (no overtaking).
- An admitted request runs its context phase in that iteration, which emits its first token at the
  iteration's end (that instant defines TTFT), then one token per iteration until ``output`` tokens.
  The reservation is ``input + output`` tokens, or ``input + max(output, reserve_output_tokens)``
  when clients send a larger ``max_tokens`` than they use.
- Iteration time comes from :class:`~trtllm_operator.simulate.perf.IterationModel`.
- Without chunked context a prompt longer than ``min(max_seq_len - 1, max_num_tokens)`` is rejected
  by the server (``maxInputLen``, see :data:`UPSTREAM_MAX_INPUT_LEN`) and a request whose reservation
  exceeds the whole KV cache can never be scheduled: both are counted as dropped.
- The server generates at most ``max_seq_len - input`` tokens (:data:`UPSTREAM_MAX_NEW_TOKENS`):
  a longer output, and the reservation of a larger ``reserve_output_tokens``, is capped there
  (:meth:`ReplicaSpec.served`, :meth:`ReplicaSpec.reservation`).

With chunked context (``spec.server.enableChunkedContext``, Triton's ``enable_chunked_context``) a
prompt up to ``max_seq_len - 1`` tokens is accepted (the server's limit becomes
``maxSequenceLen - 1``; a reservation beyond the whole KV cache is still dropped) and its context
runs over several iterations, as TensorRT-LLM's micro-batch scheduler with its default
``FIRST_COME_FIRST_SERVED`` chunking policy does (:data:`UPSTREAM_CHUNKING`): each iteration the
decoding sequences take one token each of ``max_num_tokens``; the rest is shared by the sequences
in their context phase in arrival order (those already chunking first, then new admissions), each
taking its whole remaining context when it fits, else the largest multiple of ``tokens_per_block``
(the chunk unit) that fits. A sequence emits its first token at the end of the iteration of its
last chunk. Admission (a) and (b) are unchanged (the whole ``input + output`` is reserved at
admission); (c) becomes "gets a chunk of at least one token", and the first request that gets none
stops admission (upstream would still schedule a later prompt shorter than the leftover, under one
chunk unit: not modelled). A later chunk attends the KV of the earlier ones, so those count as
cached tokens attended in the iteration time.

Fleet model: arrivals are routed to Ready replicas (``random``: what a Kubernetes Service's
kube-proxy does, seeded; or ``least-outstanding``); with no Ready replica they wait in a front queue.
A new replica holds its GPUs from creation and serves after ``cold_start_s``; when more GPUs would
be needed than ``max_gpus`` allows, the extra pods stay Pending (no GPU-hours) until GPUs free up.
Scale-down removes Pending pods first, then starting ones, then the Ready replica with the least
work; a removed Ready replica stops receiving requests, hands its waiting requests back to the
router and keeps its GPUs until its running sequences finish (graceful drain).

Metrics: every ``sample_period_s`` each Ready pod's internal state is recorded
(:class:`~trtllm_operator.metrics.exposition.ReplicaInternals`: the requests its executor holds, this
iteration's batch, KV blocks, completions, first-response times), and an autoscaler tick at time t sees
the *exposition* of the sample taken at ``t - metrics_lag_s`` (scrape and export delay): the families
:func:`~trtllm_operator.metrics.exposition.exposition` says the real Triton + TensorRT-LLM server
exports for that state — ``active`` capped at the executor's ``max``, ``waiting = active − scheduled``,
KV blocks, success counters and (with ``histogram_latencies``) the TTFT histogram. The executor's own
queue beyond ``max`` is not on the page, so no policy can read it. Mapping: the replica's queue plus its
running sequences are the executor's requests; the running sequences (decoding, plus those admitted
at this iteration's start, plus those with a context chunk in this iteration) are ``scheduled``, those
with context tokens in this iteration are ``context`` (upstream counts a chunked context request in
``numScheduledRequests`` / ``numContextRequests`` only in the iterations that run one of its chunks:
the micro-batch scheduler puts it in ``contextRequests`` only when its chunk size is > 0); ``max`` is
``max_batch_size`` (pipeline parallelism 1).

A replica served by ``trtllm-serve`` (:attr:`ReplicaSpec.frontend`, the pytorch backend's ``api:
openai``) exports instead what that server exports
(:mod:`trtllm_operator.metrics.serve_exposition`): ``request_success_total`` and four latency
histograms, each request recorded when it finishes, from its arrival at the pod, the start of the
iteration that first scheduled it, its first token and its last; no Triton family, no gauge, so
nothing of its queue or batch.
"""

from __future__ import annotations

import bisect
import heapq
import random
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from trtllm_operator.api.wire import FRONTEND_TRTLLM_SERVE
from trtllm_operator.metrics.exposition import (
    Family,
    FirstResponseHistogram,
    ReplicaInternals,
    TokenHistogram,
    exposition,
    samples,
)
from trtllm_operator.metrics.serve_exposition import FinishedRequest, ServeMetrics
from trtllm_operator.simulate.perf import IterationModel
from trtllm_operator.simulate.traces import MAX_TRACE_SPAN_S, Request

_ARRIVAL = 0
_ITER_END = 1
_READY = 2
_SAMPLE = 3
_TICK = 4
_START = 5

#: Where the server rejects a long prompt (read at NVIDIA/TensorRT-LLM blob commits, main branch 2025;
#: not pinned to a release tag): ``cpp/tensorrt_llm/batch_manager/trtGptModel.h`` (commit 2e2327b9)
#: sets ``mMaxInputLen = mMaxSequenceLen - 1`` "since chunked context is enabled", else (context FMHA
#: with packed input, what the operator's engines use) ``min(mMaxSequenceLen - 1, maxNumTokens)``;
#: ``cpp/tensorrt_llm/batch_manager/llmRequest.cpp`` (commit 119c6e60) ``LlmRequest::validate`` throws
#: "Prompt length (%d) exceeds maximum input length (%d)" for ``mPromptLen > maxInputLen``.
UPSTREAM_MAX_INPUT_LEN = (
    "TensorRT-LLM trtGptModel.h (2e2327b9) maxInputLen; llmRequest.cpp (119c6e60) LlmRequest::validate"
)

#: Where the server caps the output (NVIDIA/TensorRT-LLM, same caveat: the v1.2.x tags' copy is not in
#: the stored index): ``cpp/tensorrt_llm/batch_manager/llmRequest.cpp`` (commit 119c6e60)
#: ``LlmRequest::validate``: "if (mPromptLen + mMaxNewTokens + draftLenPerEngineStep > maxSequenceLen)
#: … Number of requested output tokens is changed to (%d)", ``mMaxNewTokens = maxSequenceLen -
#: mPromptLen - draftLenPerEngineStep`` (no draft tokens here: 0). Older releases have the same rule in
#: ``cpp/include/tensorrt_llm/batch_manager/llmRequest.h`` (``validate(maxInputLen, maxSequenceLen)``).
#: The capacity scheduler reserves the capped ``mMaxNewTokens``.
UPSTREAM_MAX_NEW_TOKENS = "TensorRT-LLM llmRequest.cpp (119c6e60) LlmRequest::validate mMaxNewTokens"

#: How a context is chunked (NVIDIA/TensorRT-LLM, same caveat): ``cpp/tensorrt_llm/batch_manager/
#: trtGptModelInflightBatching.cpp`` (commit 00825c4e): with ``enableChunkedContext`` the chunk unit is
#: the KV cache's tokens per block (256 at least under sliding-window attention: not modelled) and the
#: policy ``ContextChunkingPolicy::kFIRST_COME_FIRST_SERVED`` unless configured; the micro-batch
#: scheduler's ``maxContextLength`` is ``maxNumTokens``. ``microBatchScheduler.cpp`` (commit 0a949d31)
#: ``operator()``: generation requests each take their beam width (1) of ``maxNumTokensRuntime`` first;
#: when the contexts' remaining lengths do not fit the rest, ``setCtxRequestsChunkSize<kFIRST_COME_
#: FIRST_SERVED>`` gives each context, in order, ``min(capacity, remaining)``, rounded down to a
#: multiple of the chunk unit when that is less than its remaining length, and lowers the capacity by
#: it; a context with chunk size 0 is not scheduled this iteration. ``capacityScheduler.cpp`` (commit
#: 02a10fed) ``GuaranteedNoEvictScheduler``: generation-in-progress requests first, then the
#: context-phase ones (chunking already started or not) in the active list's (arrival) order.
UPSTREAM_CHUNKING = "TensorRT-LLM microBatchScheduler.cpp (0a949d31) setCtxRequestsChunkSize FCFS"


#: :attr:`ReplicaSpec.frontend` of a replica served by Triton (C++ ``tensorrtllm`` backend or LLM-API model).
FRONTEND_TRITON = "triton"
FRONTENDS = (FRONTEND_TRITON, FRONTEND_TRTLLM_SERVE)


@dataclass(frozen=True, slots=True)
class ServeInternals:
    """A trtllm-serve replica at one sample: its page, as its collector gives it
    (:meth:`~trtllm_operator.metrics.serve_exposition.ServeMetrics.families`). Unlike Triton's, its
    exposition needs nothing hidden of the replica: the collector holds only what it exports."""

    families: tuple[Family, ...]


@dataclass(frozen=True, slots=True)
class ReplicaSpec:
    """One replica (one Triton pod) of the model: GPUs, KV capacity and scheduler limits."""

    gpus: int
    max_kv_tokens: int
    max_batch_size: int
    max_num_tokens: int
    model: IterationModel
    tokens_per_block: int = 32
    #: Triton runs with ``--metrics-config histogram_latencies=true`` (the operator sets it): the
    #: exposition carries ``nv_inference_first_response_histogram_ms``.
    histogram_latencies: bool = True
    #: Output tokens each request reserves: its ``max_tokens`` as clients send it. 0 reserves the
    #: request's actual output length (clients that set ``max_tokens`` tight); otherwise the
    #: reservation is ``max(output, reserve_output_tokens)`` (generation still stops at the actual
    #: length, as at an end-of-sequence token).
    reserve_output_tokens: int = 0
    #: Chunked context (the deployment's ``spec.server.enableChunkedContext``, rendered as Triton's
    #: ``enable_chunked_context``): prompts longer than ``max_num_tokens`` are served in chunks of
    #: ``tokens_per_block`` multiples (:data:`UPSTREAM_CHUNKING`) instead of being rejected.
    chunked_context: bool = False
    #: The engine's ``maxSequenceLen`` (the plan's ``max_seq_len``, tokens): the server rejects a
    #: prompt longer than ``max_seq_len - 1`` with chunked context, ``min(max_seq_len - 1,
    #: max_num_tokens)`` without (:data:`UPSTREAM_MAX_INPUT_LEN`), and generates at most
    #: ``max_seq_len - input`` tokens (:data:`UPSTREAM_MAX_NEW_TOKENS`). None: no such limit (a
    #: hand-built spec; ``max_num_tokens`` is then the prompt limit without chunked context).
    max_seq_len: int | None = None
    #: The process that serves the replica and so writes its page: :data:`FRONTEND_TRITON` (Triton with
    #: the TensorRT-LLM backend, the families of :mod:`trtllm_operator.metrics.exposition`) or
    #: ``trtllm-serve`` (:data:`~trtllm_operator.api.wire.FRONTEND_TRTLLM_SERVE`, the pytorch backend's
    #: ``api: openai``: the families of :mod:`trtllm_operator.metrics.serve_exposition`, none of
    #: Triton's).
    frontend: str = FRONTEND_TRITON

    def reservation(self, req: Request) -> int:
        """KV tokens ``GUARANTEED_NO_EVICT`` reserves for a request: prompt + max new tokens, the
        latter ``max(output, reserve_output_tokens)`` capped at ``max_seq_len - input``
        (:data:`UPSTREAM_MAX_NEW_TOKENS`)."""
        new = max(req.output_tokens, self.reserve_output_tokens)
        if self.max_seq_len is not None and self.max_seq_len - req.input_tokens >= 1:
            new = min(new, self.max_seq_len - req.input_tokens)
        return req.input_tokens + new

    def served(self, req: Request) -> Request:
        """``req`` as the server runs it: its output capped at ``max_seq_len - input`` tokens
        (:data:`UPSTREAM_MAX_NEW_TOKENS`; the server truncates, the request is not refused).
        Unchanged when it is within, without ``max_seq_len``, or when the prompt leaves no room (the
        server rejects that prompt: :meth:`accepts`)."""
        if self.max_seq_len is None:
            return req
        room = self.max_seq_len - req.input_tokens
        if room < 1 or req.output_tokens <= room:
            return req
        return Request(req.arrival_s, req.input_tokens, room)

    def __post_init__(self) -> None:
        if self.max_kv_tokens <= 0:
            raise ValueError(f"max_kv_tokens must be > 0, got {self.max_kv_tokens} (the model does not fit)")
        if self.max_batch_size <= 0 or self.max_num_tokens <= 0 or self.gpus <= 0:
            raise ValueError("gpus, max_batch_size and max_num_tokens must be > 0")
        if self.reserve_output_tokens < 0:
            raise ValueError(f"reserve_output_tokens must be >= 0, got {self.reserve_output_tokens}")
        if self.tokens_per_block <= 0:
            raise ValueError(f"tokens_per_block must be > 0, got {self.tokens_per_block}")
        if self.frontend not in FRONTENDS:
            raise ValueError(f"frontend must be one of {', '.join(FRONTENDS)}, got {self.frontend!r}")
        if self.chunked_context and self.max_num_tokens < self.tokens_per_block:
            # Every partial chunk is a multiple of tokens_per_block (UPSTREAM_CHUNKING): a prompt longer
            # than max_num_tokens would never get a chunk.
            raise ValueError(
                f"max_num_tokens {self.max_num_tokens} is below tokens_per_block {self.tokens_per_block}: "
                "with chunked context every partial chunk is a multiple of tokens_per_block, so a longer "
                "prompt would never be scheduled; raise max_num_tokens to at least tokens_per_block"
            )

    def accepts(self, req: Request) -> bool:
        """Whether the server accepts ``req`` and can ever schedule it: its prompt is within the
        server's maximum input length (:data:`UPSTREAM_MAX_INPUT_LEN`: ``max_seq_len - 1``, and
        without chunked context also ``max_num_tokens``) and its reservation within the whole KV
        cache."""
        if not self.chunked_context and req.input_tokens > self.max_num_tokens:
            return False
        if self.max_seq_len is not None and req.input_tokens > self.max_seq_len - 1:
            return False
        return self.reservation(req) <= self.max_kv_tokens


#: One exported sample: (sample name, labels, value), as a Prometheus text parser returns it.
Sample = tuple[str, Mapping[str, str], float]


@dataclass(frozen=True, slots=True)
class PodView:
    """One pod at a tick: its state now and its ``/metrics`` page from the (lagged) sample, if any.

    ``state``: ``Ready``, ``Starting`` (GPUs held, engine loading), ``Unschedulable`` (Pending for
    lack of GPUs) or ``Terminating`` (draining). ``metrics``: the samples the real server would
    export (:func:`~trtllm_operator.metrics.exposition.exposition`) — nothing else of the replica;
    ``None`` for a pod that was not Ready when the sample was taken (its metrics are missing, as for a
    freshly started pod).
    """

    pod: int
    state: str
    metrics: tuple[Sample, ...] | None


@dataclass(frozen=True, slots=True)
class Observation:
    """What an autoscaler sees at one tick: pods with their (possibly stale) metrics, the target."""

    time_s: float
    sample_time_s: float
    replicas: int  # the current target (spec.replicas)
    pods: tuple[PodView, ...]

    def count(self, state: str) -> int:
        """Number of pods in ``state``."""
        return sum(1 for p in self.pods if p.state == state)


class Policy(Protocol):
    """An autoscaling strategy driven by the simulator."""

    name: str
    sync_period_s: float
    metrics_lag_s: float

    @property
    def cold_start_s(self) -> float | None:
        """The cold start this policy's replicas obey instead of the fleet's (None: the fleet's; the
        oracle brings its own, see :class:`~trtllm_operator.simulate.policies.OraclePolicy`)."""
        ...

    def decide(self, obs: Observation) -> int:
        """Return the desired replica count."""
        ...


@dataclass(slots=True)
class _Replica:
    rid: int
    created_s: float
    gpu_start_s: float | None = None  # None while Pending
    ready: bool = False
    draining: bool = False
    stopped_s: float | None = None
    queue: deque[int] = field(default_factory=deque)
    heap: list[tuple[int, int]] = field(default_factory=list)
    new: list[int] = field(default_factory=list)
    # Sequences admitted with a chunked context still in progress: [request index, context tokens
    # done], in admission order; and how many of them run a (not last) chunk in this iteration.
    chunking: list[list[int]] = field(default_factory=list)
    mid_chunks: int = 0
    busy: bool = False
    start_pending: bool = False
    iteration: int = 0
    kv_reserved: int = 0
    ctx_tokens: int = 0
    # Triton's counters for this pod (cumulative since it started).
    completed: int = 0
    latency_s: float = 0.0
    ttft: FirstResponseHistogram = field(default_factory=FirstResponseHistogram)
    input_tokens: TokenHistogram = field(default_factory=TokenHistogram)
    output_tokens: TokenHistogram = field(default_factory=TokenHistogram)
    new_tokens: int = 0
    # trtllm-serve's MetricsCollector for this pod (only for ReplicaSpec.frontend trtllm-serve).
    serve: ServeMetrics | None = None


@dataclass
class SimulationResult:
    """Per-request outcomes and fleet history of one run (times in seconds)."""

    requests: Sequence[Request]
    first_token_s: list[float]  # NaN when dropped
    done_s: list[float]  # NaN when dropped
    dropped: int
    gpu_seconds: float
    scale_events: int
    max_queue: int
    end_s: float
    replica_history: list[tuple[float, int, int]]  # (time, target replicas, ready replicas)
    queue_history: list[tuple[float, int]]  # (sample time, total waiting requests)
    gpus_per_replica: int
    measure_from_s: float = 0.0  # GPU-hours, scale events and max queue count from here on


_NAN = float("nan")


def _families(internals: ReplicaInternals | ServeInternals) -> Iterable[Family]:
    """The families of a sampled replica's page: Triton's from its internal state, trtllm-serve's as
    sampled."""
    if isinstance(internals, ServeInternals):
        return internals.families
    return exposition(internals)


class Simulation:
    """One run: a request trace, a replica spec, a policy. Call :meth:`run` once. The requests are
    taken as the server runs them (:meth:`ReplicaSpec.served`: outputs capped at ``max_seq_len -
    input``), and the result's ``requests`` are those."""

    def __init__(
        self,
        requests: Sequence[Request],
        spec: ReplicaSpec,
        policy: Policy,
        *,
        initial_replicas: int = 1,
        cold_start_s: float = 120.0,
        max_gpus: int | None = None,
        sample_period_s: float = 1.0,
        routing: str = "random",
        seed: int = 0,
        drain_limit_s: float = 3600.0,
        measure_from_s: float = 0.0,
    ) -> None:
        if routing not in {"random", "least-outstanding"}:
            raise ValueError(f"routing must be 'random' or 'least-outstanding', got {routing!r}")
        if initial_replicas < 0:
            raise ValueError("initial_replicas must be >= 0")
        last = max((r.arrival_s for r in requests), default=0.0)
        if last > MAX_TRACE_SPAN_S:  # the command says so first, naming its flags (traces.span_error)
            raise ValueError(
                f"the last request arrives at {last:g} s, later than the {MAX_TRACE_SPAN_S} s a simulated "
                "trace may span (traces.MAX_TRACE_SPAN_S: the cost grows with the simulated time)"
            )
        # Outputs as the server generates them (capped at max_seq_len - prompt): the run, its
        # result and the report all see the served lengths.
        self.requests = requests if spec.max_seq_len is None else [spec.served(r) for r in requests]
        self.spec = spec
        self.policy = policy
        self.cold_start_s = cold_start_s if policy.cold_start_s is None else policy.cold_start_s
        self.max_gpus = max_gpus
        self.sample_period_s = sample_period_s
        self.routing = routing
        self.rng = random.Random(seed)
        self.initial_replicas = initial_replicas
        self.drain_limit_s = drain_limit_s
        self.measure_from_s = measure_from_s

        n = len(requests)
        self.first_token = [_NAN] * n
        self.done = [_NAN] * n
        self.dropped = 0
        self.events: list[tuple[float, int, int, int]] = []
        self.seq = 0
        self.replicas: dict[int, _Replica] = {}
        self.next_rid = 0
        self.ready_list: list[_Replica] = []
        self.front: deque[int] = deque()
        self.target = 0
        self.waiting = 0
        self.max_queue = 0
        self.scale_events = 0
        self.gpu_seconds = 0.0
        self.samples_t: list[float] = []
        self.samples: list[dict[int, ReplicaInternals | ServeInternals]] = []
        self.arrived_s = [_NAN] * n  # when each request reached its pod (Triton's clock starts there)
        self.scheduled_s = [_NAN] * n  # the start of the iteration that first scheduled it
        self.replica_history: list[tuple[float, int, int]] = []
        self.queue_history: list[tuple[float, int]] = []
        self.completed = 0

    # -- event plumbing -----------------------------------------------------------------------
    def _push(self, t: float, kind: int, arg: int) -> None:
        self.seq += 1
        heapq.heappush(self.events, (t, self.seq, kind, arg))

    # -- fleet ------------------------------------------------------------------------------------
    def _gpus_in_use(self) -> int:
        return sum(
            self.spec.gpus
            for r in self.replicas.values()
            if r.gpu_start_s is not None and r.stopped_s is None
        )

    def _schedule_pending(self, now: float) -> None:
        for r in sorted(self.replicas.values(), key=lambda r: r.rid):
            if r.gpu_start_s is None and not r.draining and r.stopped_s is None:
                if self.max_gpus is not None and self._gpus_in_use() + self.spec.gpus > self.max_gpus:
                    return
                r.gpu_start_s = now
                self._push(now + self.cold_start_s, _READY, r.rid)

    def _add_replica(self, now: float, ready_now: bool = False) -> None:
        r = _Replica(self.next_rid, now)
        if self.spec.frontend == FRONTEND_TRTLLM_SERVE:
            r.serve = ServeMetrics()
        self.next_rid += 1
        self.replicas[r.rid] = r
        if ready_now and (self.max_gpus is None or self._gpus_in_use() + self.spec.gpus <= self.max_gpus):
            r.gpu_start_s = now
            self._make_ready(r, now)

    def _make_ready(self, r: _Replica, now: float) -> None:
        r.ready = True
        self.ready_list.append(r)
        while self.front:
            idx = self.front.popleft()
            self.waiting -= 1
            self._enqueue(r, idx, now)

    def _stop(self, r: _Replica, now: float) -> None:
        r.stopped_s = now
        if r.gpu_start_s is not None:
            held = now - max(r.gpu_start_s, self.measure_from_s)
            self.gpu_seconds += max(0.0, held) * self.spec.gpus
        del self.replicas[r.rid]
        self._schedule_pending(now)

    def _live(self) -> list[_Replica]:
        return [r for r in self.replicas.values() if not r.draining]

    def _scale_to(self, desired: int, now: float) -> None:
        desired = max(0, desired)
        if desired != self.target and now >= self.measure_from_s:
            self.scale_events += 1
        self.target = desired
        live = self._live()
        if len(live) < desired:
            for _ in range(desired - len(live)):
                self._add_replica(now)
            self._schedule_pending(now)
        elif len(live) > desired:
            # Victims: Pending first, then starting (newest first), then Ready with least work.
            def order(r: _Replica) -> tuple[int, float]:
                if r.gpu_start_s is None:
                    return (0, -r.created_s)
                if not r.ready:
                    return (1, -r.created_s)
                return (2, len(r.queue) + len(r.heap) + len(r.chunking))

            for r in sorted(live, key=order)[: len(live) - desired]:
                self._retire(r, now)
        self.replica_history.append((now, self.target, len(self.ready_list)))

    def _retire(self, r: _Replica, now: float) -> None:
        r.draining = True
        if not r.ready:
            self._stop(r, now)
            return
        self.ready_list.remove(r)
        requeue = list(r.queue)
        r.queue.clear()
        self.waiting -= len(requeue)
        for idx in requeue:
            self._route(idx, now)
        if not r.heap and not r.chunking and not r.busy:
            self._stop(r, now)

    # -- requests ---------------------------------------------------------------------------------
    def _route(self, idx: int, now: float) -> None:
        if not self.ready_list:
            self.front.append(idx)
            self.waiting += 1
            self._track_queue(now)
            return
        if self.routing == "random":
            r = self.ready_list[self.rng.randrange(len(self.ready_list))]
        else:
            r = min(self.ready_list, key=lambda x: (len(x.queue) + len(x.heap) + len(x.chunking), x.rid))
        self._enqueue(r, idx, now)

    def _track_queue(self, now: float) -> None:
        if now >= self.measure_from_s and self.waiting > self.max_queue:
            self.max_queue = self.waiting

    def _enqueue(self, r: _Replica, idx: int, now: float) -> None:
        r.queue.append(idx)
        self.arrived_s[idx] = now
        self.waiting += 1
        self._track_queue(now)
        if not r.busy and not r.start_pending:
            # Start the iteration after every other event of this instant, so that requests
            # arriving together are scheduled together (the executor loop picks up its queue).
            r.start_pending = True
            self._push(now, _START, r.rid)

    def _start_iteration(self, r: _Replica, now: float) -> None:
        spec = self.spec
        reqs = self.requests
        decoding = len(r.heap)
        kv_tokens = r.ctx_tokens
        budget = spec.max_num_tokens - decoding
        if spec.chunked_context:
            prefill, kv_tokens = self._schedule_chunks(r, budget, now)
        else:
            prefill = 0
            queue = r.queue
            while queue and len(r.heap) < spec.max_batch_size:
                req = reqs[queue[0]]
                need = spec.reservation(req)
                if r.kv_reserved + need > spec.max_kv_tokens or prefill + req.input_tokens > budget:
                    break
                idx = queue.popleft()
                self.waiting -= 1
                self.scheduled_s[idx] = now
                prefill += req.input_tokens
                r.kv_reserved += need
                r.ctx_tokens += req.input_tokens
                r.new_tokens += req.input_tokens
                heapq.heappush(r.heap, (r.iteration + req.output_tokens - 1, idx))
                r.new.append(idx)
        if not r.heap and not r.chunking:
            r.busy = False
            return
        r.busy = True
        self._push(now + spec.model.iteration_s(prefill + decoding, kv_tokens), _ITER_END, r.rid)

    def _schedule_chunks(self, r: _Replica, capacity: int, now: float) -> tuple[int, int]:
        """Chunked context (:data:`UPSTREAM_CHUNKING`): give this iteration's ``capacity`` context
        tokens (``max_num_tokens`` minus one per decoding sequence) to the sequences in their context
        phase, first those already chunking, then new admissions, in arrival order; each takes its
        whole remaining context when it fits, else the largest multiple of ``tokens_per_block`` that
        does. A sequence whose last chunk runs joins the decoding heap and emits its first token at
        this iteration's end. Returns (context tokens scheduled, cached tokens attended: those of the
        decoding sequences plus the earlier chunks of the sequences chunking now)."""
        spec = self.spec
        reqs = self.requests
        unit = spec.tokens_per_block
        kv_tokens = r.ctx_tokens - sum(done for _, done in r.chunking)
        prefill = 0
        r.mid_chunks = 0

        def chunk_of(remaining: int) -> int:
            return remaining if remaining <= capacity else max(0, capacity) // unit * unit

        def run_chunk(idx: int, done: int, chunk: int) -> bool:
            """Schedule ``chunk`` tokens of ``idx``'s context; True when it was the last one."""
            nonlocal capacity, prefill
            capacity -= chunk
            prefill += chunk
            r.ctx_tokens += chunk
            r.new_tokens += chunk
            if done + chunk < reqs[idx].input_tokens:
                r.mid_chunks += 1
                return False
            heapq.heappush(r.heap, (r.iteration + reqs[idx].output_tokens - 1, idx))
            r.new.append(idx)
            return True

        still: list[list[int]] = []
        for entry in r.chunking:
            idx, done = entry
            chunk = chunk_of(reqs[idx].input_tokens - done)
            if chunk > 0:
                kv_tokens += done
                if run_chunk(idx, done, chunk):
                    continue
                entry[1] = done + chunk
            still.append(entry)
        r.chunking = still
        queue = r.queue
        while queue and len(r.heap) + len(r.chunking) < spec.max_batch_size:
            req = reqs[queue[0]]
            need = spec.reservation(req)
            chunk = chunk_of(req.input_tokens)
            if r.kv_reserved + need > spec.max_kv_tokens or chunk == 0:
                break
            idx = queue.popleft()
            self.waiting -= 1
            self.scheduled_s[idx] = now
            r.kv_reserved += need
            if not run_chunk(idx, 0, chunk):
                r.chunking.append([idx, chunk])
        return prefill, kv_tokens

    def _end_iteration(self, r: _Replica, now: float) -> None:
        for idx in r.new:
            self.first_token[idx] = now
            r.ttft.observe((now - self.arrived_s[idx]) * 1000.0)
        r.new.clear()
        r.new_tokens = 0
        r.ctx_tokens += len(r.heap)
        heap = r.heap
        reqs = self.requests
        while heap and heap[0][0] <= r.iteration:
            _, idx = heapq.heappop(heap)
            req = reqs[idx]
            r.kv_reserved -= self.spec.reservation(req)
            r.ctx_tokens -= req.input_tokens + req.output_tokens
            self.done[idx] = now
            self.completed += 1
            r.completed += 1
            r.latency_s += now - self.arrived_s[idx]
            r.input_tokens.observe(req.input_tokens)
            r.output_tokens.observe(req.output_tokens)
            if r.serve is not None:
                r.serve.finish(self._finished(idx, now))
        r.iteration += 1
        if r.draining and not heap and not r.chunking and not r.queue:
            r.busy = False
            self._stop(r, now)
            return
        self._start_iteration(r, now)

    def _finished(self, idx: int, now: float) -> FinishedRequest:
        """Request ``idx``, finished at ``now``, as trtllm-serve records it
        (:class:`~trtllm_operator.metrics.serve_exposition.FinishedRequest`). It stops at ``length`` when
        it generated all the tokens it could (its ``max_tokens``, :attr:`ReplicaSpec.reserve_output_tokens`
        when set, else its own output length; or ``max_seq_len`` minus its prompt), else at ``stop`` (an
        end-of-sequence token before that)."""
        req = self.requests[idx]
        limit = self.spec.reservation(req) - req.input_tokens
        return FinishedRequest(
            arrival_s=self.arrived_s[idx],
            first_scheduled_s=self.scheduled_s[idx],
            first_token_s=self.first_token[idx],
            last_token_s=now,
            output_tokens=req.output_tokens,
            finished_reason="length" if req.output_tokens >= limit else "stop",
        )

    # -- metrics and control ----------------------------------------------------------------------
    def _internals(self, r: _Replica, now: float) -> ReplicaInternals | ServeInternals:
        """The replica's state as the exposition reads it (hidden parts included); for trtllm-serve, its
        page (nothing of it is hidden: the page is all its collector holds)."""
        if r.serve is not None:
            return ServeInternals(r.serve.families())
        spec = self.spec
        tpb = spec.tokens_per_block
        max_blocks = spec.max_kv_tokens // tpb
        return ReplicaInternals(
            requests=len(r.queue) + len(r.heap) + len(r.chunking),
            scheduled=len(r.heap) + r.mid_chunks,
            context=len(r.new) + r.mid_chunks,
            context_tokens=r.new_tokens,
            max_active=spec.max_batch_size,
            # Each sequence holds ceil(ctx / tokens_per_block) blocks; half a block of rounding
            # per sequence on average.
            kv_used_blocks=min(
                max_blocks, (r.ctx_tokens + (len(r.heap) + len(r.chunking)) * tpb // 2) // tpb
            ),
            kv_max_blocks=max_blocks,
            tokens_per_block=tpb,
            completed=r.completed,
            latency_s_total=r.latency_s,
            iteration=r.iteration,
            timestamp_us=int(now * 1e6),
            first_response=FirstResponseHistogram(list(r.ttft.counts), r.ttft.sum_ms),
            histogram_latencies=spec.histogram_latencies,
            input_tokens=r.input_tokens.copy(),
            output_tokens=r.output_tokens.copy(),
        )

    def _sample(self, now: float) -> None:
        self.samples_t.append(now)
        self.samples.append({r.rid: self._internals(r, now) for r in self.ready_list})
        self.queue_history.append((now, self.waiting))

    def _forget_samples_before(self, i: int) -> None:
        """Drop the samples older than sample ``i``, the one this tick read: no later tick reads them
        (ticks come in time order and a policy's ``metrics_lag_s`` is fixed, so a later tick's sample is
        this one or a newer one), and nothing else reads ``samples`` (the report reads
        ``queue_history``). Without this a run kept one sample per Ready replica per simulated second
        (trial 45 A18: ``static:1000`` over a day ran out of memory); now it keeps those of about one
        ``sync_period_s + metrics_lag_s``."""
        if i > 0:
            del self.samples_t[:i]
            del self.samples[:i]

    def _observe(self, now: float) -> Observation:
        want = now - self.policy.metrics_lag_s
        i = bisect.bisect_right(self.samples_t, want) - 1
        sampled = self.samples[i] if i >= 0 else {}
        sample_t = self.samples_t[i] if i >= 0 else now
        self._forget_samples_before(i)
        views = []
        for r in sorted(self.replicas.values(), key=lambda r: r.rid):
            if r.draining:
                state = "Terminating"
            elif r.ready:
                state = "Ready"
            elif r.gpu_start_s is not None:
                state = "Starting"
            else:
                state = "Unschedulable"
            internals = sampled.get(r.rid) if state == "Ready" else None
            page = tuple(samples(_families(internals))) if internals is not None else None
            views.append(PodView(r.rid, state, page))
        return Observation(time_s=now, sample_time_s=sample_t, replicas=self.target, pods=tuple(views))

    def run(self) -> SimulationResult:
        """Run until every request finished or was dropped. Returns the result.

        Requests still unfinished ``drain_limit_s`` after the last arrival (a policy that leaves no
        replica to serve them) are counted as dropped, so ``served + dropped == requests`` always.
        """
        spec = self.spec
        self.target = self.initial_replicas
        for _ in range(self.initial_replicas):
            self._add_replica(0.0, ready_now=True)
        self._schedule_pending(0.0)
        self.replica_history.append((0.0, self.target, len(self.ready_list)))
        for idx, req in enumerate(self.requests):
            self._push(req.arrival_s, _ARRIVAL, idx)
        self._push(0.0, _SAMPLE, 0)
        self._push(self.policy.sync_period_s, _TICK, 0)
        n = len(self.requests)
        now = 0.0
        last_arrival = self.requests[-1].arrival_s if n else 0.0
        while self.events:
            now, _, kind, arg = heapq.heappop(self.events)
            if kind == _ITER_END:
                r = self.replicas.get(arg)
                if r is not None:
                    self._end_iteration(r, now)
            elif kind == _ARRIVAL:
                req = self.requests[arg]
                if not spec.accepts(req):
                    self.dropped += 1
                else:
                    self._route(arg, now)
            elif kind == _START:
                r = self.replicas.get(arg)
                if r is not None:
                    r.start_pending = False
                    if not r.busy:
                        self._start_iteration(r, now)
            elif kind == _READY:
                r = self.replicas.get(arg)
                if r is not None and not r.draining:
                    self._make_ready(r, now)
            elif kind == _SAMPLE:
                self._sample(now)
                self._push(now + self.sample_period_s, _SAMPLE, 0)
            elif kind == _TICK:
                if now > last_arrival + self.drain_limit_s:
                    break  # a policy that never serves the backlog: the rest count as dropped
                self._scale_to(self.policy.decide(self._observe(now)), now)
                self._push(now + self.policy.sync_period_s, _TICK, 0)
            if self.completed + self.dropped >= n:
                break
        for r in list(self.replicas.values()):
            self._stop(r, now)
        unfinished = n - self.completed - self.dropped
        self.dropped += unfinished
        return SimulationResult(
            requests=self.requests,
            first_token_s=self.first_token,
            done_s=self.done,
            dropped=self.dropped,
            gpu_seconds=self.gpu_seconds,
            scale_events=self.scale_events,
            max_queue=self.max_queue,
            end_s=now,
            replica_history=self.replica_history,
            queue_history=self.queue_history,
            gpus_per_replica=spec.gpus,
            measure_from_s=self.measure_from_s,
        )
