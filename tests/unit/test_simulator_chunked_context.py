"""Chunked context in the simulated replica (issue 19 item 5, "replicas as deployed").

Upstream behaviour each test relies on (NVIDIA/TensorRT-LLM, blob commits read on the main branch,
2025, not pinned to a release tag; the constants ``UPSTREAM_MAX_INPUT_LEN`` / ``UPSTREAM_CHUNKING`` of
``trtllm_operator.simulate.engine`` give the details):

- without chunked context the maximum input length is ``min(maxSequenceLen - 1, maxNumTokens)``
  (``cpp/tensorrt_llm/batch_manager/trtGptModel.h``, commit 2e2327b9) and ``LlmRequest::validate``
  (``llmRequest.cpp``, commit 119c6e60) rejects a longer prompt; with it the limit is
  ``maxSequenceLen - 1``;
- ``microBatchScheduler.cpp`` (commit 0a949d31): decoding sequences take one token each of
  ``maxNumTokens``; ``setCtxRequestsChunkSize<kFIRST_COME_FIRST_SERVED>`` gives each context, in
  order, ``min(capacity, remaining)``, rounded down to a multiple of the chunk unit (tokens per block,
  ``trtGptModelInflightBatching.cpp`` commit 00825c4e) when it is cut; the first token comes after
  the last chunk (the request is in the context phase until then).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import yaml

from trtllm_operator.cli import main
from trtllm_operator.metrics.exposition import ReplicaInternals
from trtllm_operator.simulate import policies
from trtllm_operator.simulate.engine import ReplicaSpec, Simulation, _Replica
from trtllm_operator.simulate.perf import IterationModel
from trtllm_operator.simulate.report import summarize
from trtllm_operator.simulate.traces import Request, read_azure_csv, time_scale

REPO = Path(__file__).resolve().parents[2]
AZURE = REPO / "tests" / "fixtures" / "traces" / "azure-llm-2023-conv-head800.csv"
LLAMA_8B = REPO / "tests" / "fixtures" / "model-configs" / "meta-llama__Llama-3.1-8B-Instruct.json"

#: 10 ms per iteration + 1 ms per scheduled token + 10 µs per cached token attended.
MODEL = IterationModel(fixed_s=0.01, per_token_s=0.001, per_kv_token_s=1e-5)


def a_replica(chunked: bool, **kw: int) -> ReplicaSpec:
    args = {"gpus": 1, "max_kv_tokens": 100_000, "max_batch_size": 256, "max_num_tokens": 1024}
    args.update(kw)
    return ReplicaSpec(model=MODEL, chunked_context=chunked, **args)  # type: ignore[arg-type]


class Recorded(Simulation):
    """Records every iteration's (decoding sequences, context tokens) and the replica's internals
    (built through ReplicaInternals, which raises when the state breaks an invariant of the real
    executor's counters)."""

    def __init__(self, *a: object, **kw: object) -> None:
        super().__init__(*a, **kw)  # type: ignore[arg-type]
        self.iterations: list[tuple[int, int]] = []
        self.internals: list[ReplicaInternals] = []

    def _start_iteration(self, r: _Replica, now: float) -> None:
        decoding = len(r.heap)
        super()._start_iteration(r, now)
        if r.busy:
            self.iterations.append((decoding, r.new_tokens))
            self.internals.append(self._internals(r, now))
            spec = self.spec
            assert decoding + r.new_tokens <= spec.max_num_tokens
            assert 0 <= r.ctx_tokens <= r.kv_reserved <= spec.max_kv_tokens
            assert len(r.heap) + len(r.chunking) <= spec.max_batch_size


def run(reqs: list[Request], spec: ReplicaSpec) -> Recorded:
    sim = Recorded(reqs, spec, policies.StaticPolicy(1), initial_replicas=1)
    sim.result = sim.run()  # type: ignore[attr-defined]
    return sim


def test_a_prompt_of_three_budgets_is_dropped_without_chunking_and_served_with_it() -> None:
    req = [Request(0.0, 3 * 1024, 5)]
    off = run(req, a_replica(chunked=False))
    assert off.result.dropped == 1 and math.isnan(off.first_token[0])  # type: ignore[attr-defined]
    on = run(req, a_replica(chunked=True))
    assert on.result.dropped == 0  # type: ignore[attr-defined]
    # Three context iterations of 1024 tokens each (no decoding sequence shares the budget); each
    # chunk attends the earlier chunks' KV (0, 1024, 2048 tokens). No token before the last chunk.
    assert on.iterations[:3] == [(0, 1024)] * 3
    chunks = [0.01 + 1.024 + 1e-5 * kv for kv in (0, 1024, 2048)]
    assert on.first_token[0] == pytest.approx(sum(chunks))
    assert on.first_token[0] >= 3 * 1.034  # TTFT ≥ 3 iterations of a full budget
    # Then four decode iterations attending 3073..3076 cached tokens.
    assert on.done[0] == pytest.approx(sum(chunks) + 4 * 0.011 + 1e-5 * sum(range(3073, 3077)))


def test_chunks_share_the_budget_with_decoding_sequences_in_tokens_per_block_multiples() -> None:
    # A (100 tokens) fits whole; B (2000) takes the largest multiple of 32 left (896 of 900); next
    # iteration A decodes (1 token), so B gets 992 of 999; then its last 112 tokens.
    reqs = [Request(0.0, 100, 50), Request(0.0, 2000, 5)]
    sim = run(reqs, a_replica(chunked=True, max_num_tokens=1000, tokens_per_block=32))
    assert sim.iterations[:4] == [(0, 100 + 896), (1, 992), (1, 112), (2, 0)]
    it1 = 0.01 + 0.996
    it2 = 0.01 + 0.001 * (992 + 1) + 1e-5 * (101 + 896)  # A's 101 cached tokens + B's first chunk
    it3 = 0.01 + 0.001 * (112 + 1) + 1e-5 * (102 + 1888)
    assert sim.first_token[0] == pytest.approx(it1)
    assert sim.first_token[1] == pytest.approx(it1 + it2 + it3)
    # On the page B is scheduled and in its context phase in every iteration that runs a chunk,
    # active throughout; context_tokens are that iteration's prompt tokens.
    first, second, third = sim.internals[:3]
    assert (first.requests, first.scheduled, first.context, first.context_tokens) == (2, 2, 2, 996)
    assert (second.requests, second.scheduled, second.context, second.context_tokens) == (2, 2, 1, 992)
    assert (third.scheduled, third.context, third.context_tokens) == (2, 1, 112)
    assert sim.internals[3].context == 0


def test_without_chunking_the_same_requests_run_as_before() -> None:
    # The switch off: B (2000 > 1000 tokens) is rejected; A alone, one context iteration.
    reqs = [Request(0.0, 100, 50), Request(0.0, 2000, 5)]
    sim = run(reqs, a_replica(chunked=False, max_num_tokens=1000))
    assert sim.result.dropped == 1  # type: ignore[attr-defined]
    assert sim.iterations[0] == (0, 100) and sim.first_token[0] == pytest.approx(0.11)


def test_chunked_context_still_drops_a_reservation_beyond_the_kv_cache() -> None:
    reqs = [Request(0.0, 5000, 10), Request(0.0, 3000, 10)]
    sim = run(reqs, a_replica(chunked=True, max_kv_tokens=4000))
    assert sim.result.dropped == 1 and math.isnan(sim.first_token[0])  # type: ignore[attr-defined]
    assert not math.isnan(sim.done[1])


def test_chunked_context_rejects_a_prompt_beyond_max_seq_len_minus_one() -> None:
    # With chunked context TensorRT-LLM's maximum input length is maxSequenceLen - 1 (trtGptModel.h).
    reqs = [Request(0.0, 4096, 10), Request(0.0, 4095, 10)]
    sim = run(reqs, ReplicaSpec(1, 100_000, 256, 1024, MODEL, chunked_context=True, max_seq_len=4096))
    assert sim.result.dropped == 1 and math.isnan(sim.first_token[0])  # type: ignore[attr-defined]
    assert not math.isnan(sim.done[1])
    # Without chunked context the limit is min(maxSequenceLen - 1, maxNumTokens) (trtGptModel.h): a
    # max_seq_len - 1 below max_num_tokens applies too (it did not before trial 37b F4).
    off = run([Request(0.0, 1000, 10)], ReplicaSpec(1, 100_000, 256, 1024, MODEL, max_seq_len=512))
    assert off.result.dropped == 1  # type: ignore[attr-defined]


def test_a_budget_below_one_chunk_unit_is_refused() -> None:
    with pytest.raises(ValueError, match="max_num_tokens 16 is below tokens_per_block 32"):
        a_replica(chunked=True, max_num_tokens=16, tokens_per_block=32)
    a_replica(chunked=False, max_num_tokens=16, tokens_per_block=32)  # no chunks, no constraint


def test_a_trace_with_long_prompts_is_served_and_the_page_stays_consistent() -> None:
    reqs = time_scale(read_azure_csv(AZURE), 20.0)
    long_prompts = sum(1 for r in reqs if r.input_tokens > 2048)
    assert long_prompts > 0  # the fixture has prompts longer than the budget below
    spec = dict(max_kv_tokens=200_000, max_batch_size=64, max_num_tokens=2048)
    off = run(reqs, a_replica(chunked=False, **spec))
    on = run(reqs, a_replica(chunked=True, **spec))
    assert off.result.dropped == long_prompts  # type: ignore[attr-defined]
    assert on.result.dropped == 0  # type: ignore[attr-defined]
    assert summarize(on.result, 2000)["requests"] == len(reqs)  # type: ignore[attr-defined]
    for req, first, done in zip(reqs, on.first_token, on.done, strict=True):
        assert req.arrival_s < first <= done
    assert any(i.scheduled > 0 for i in on.internals)


def _deployment(tmp_path: Path, chunked: bool | None) -> Path:
    docs = list(yaml.safe_load_all((REPO / "examples" / "autoscaled-deployment.yaml").read_text()))
    dep = next(d for d in docs if d and d["kind"] == "LLMDeployment")
    if chunked is not None:
        dep["spec"].setdefault("server", {})["enableChunkedContext"] = chunked
    path = tmp_path / "dep.yaml"
    path.write_text(yaml.safe_dump(dep))
    return path


#: Ten 12,000-token prompts: longer than the planner's max_num_tokens (8192) for Llama 3.1 8B on H100,
#: shorter than its max_seq_len (16384).
LONG = ["simulate", "--trace", "poisson:rate=2,duration=5,isl=12000,osl=10", "--model-config", str(LLAMA_8B)]
LONG += ["--gpu", "H100", "--quantization", "fp8", "--output", "json"]


def _run_json(capsys: pytest.CaptureFixture[str], args: list[str]) -> dict[str, object]:
    assert main(args) == 0
    out: dict[str, object] = json.loads(capsys.readouterr().out)
    return out


def test_cli_chunked_context_flag_and_the_manifests_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    default = _run_json(capsys, [*LONG, "--policy", "static:1"])
    assert default["replica"]["chunked_context"] is False  # type: ignore[index]
    assert default["dropped"] == default["requests"]  # every prompt is longer than max_num_tokens
    flag = _run_json(capsys, [*LONG, "--policy", "static:1", "--chunked-context"])
    assert flag["replica"]["chunked_context"] is True and flag["dropped"] == 0  # type: ignore[index]
    on = _run_json(capsys, [*LONG, "--deployment", str(_deployment(tmp_path, True))])
    assert on["replica"]["chunked_context"] is True and on["dropped"] == 0  # type: ignore[index]
    off = _run_json(capsys, [*LONG, "--deployment", str(_deployment(tmp_path, None))])
    assert off["replica"]["chunked_context"] is False  # type: ignore[index]
    assert off["dropped"] == off["requests"]
    # 20,000-token prompts exceed the plan's max_seq_len - 1: the server rejects them even chunked.
    beyond = [a.replace("isl=12000", "isl=20000") for a in LONG]
    too_long = _run_json(capsys, [*beyond, "--policy", "static:1", "--chunked-context"])
    assert too_long["dropped"] == too_long["requests"]


def test_cli_refuses_chunked_context_beside_a_deployment(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _deployment(tmp_path, False)
    assert main([*LONG, "--deployment", str(path), "--chunked-context"]) == 2
    err = capsys.readouterr().err
    assert (
        f"--chunked-context cannot be combined with --deployment {path}, which takes it from "
        "spec.server.enableChunkedContext (set or not)" in err
    )


def test_with_chunked_context_the_plan_does_not_warn_that_long_prompts_are_rejected(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Fresh-user trial 37b F2: the planner's "prompts longer than maxNumTokens are rejected unless
    chunked context is enabled" was printed with chunked context on; without it, its fix names
    simulate's flags."""
    argv = [*LONG, "--max-num-tokens", "2048", "--policy", "static:1"]
    assert main(argv) == 0
    err = capsys.readouterr().err
    assert "unless chunked context is enabled" in err and "--chunked-context" in err, err
    assert main([*argv, "--chunked-context"]) == 0
    assert "unless chunked context is enabled" not in capsys.readouterr().err
