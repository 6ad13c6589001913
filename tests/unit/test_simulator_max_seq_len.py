"""The engine's maxSeqLen in the simulator, and simulate's replica flags (fresh-user trial 37b F3, F4,
F7, F8).

Upstream behaviour relied on (NVIDIA/TensorRT-LLM, blob commits of the main branch, 2025; the v1.2.x
tags' copies are not in the stored index; ``trtllm_operator.simulate.engine`` gives the details):

- ``cpp/tensorrt_llm/batch_manager/llmRequest.cpp`` (commit 119c6e60) ``LlmRequest::validate``: when
  ``mPromptLen + mMaxNewTokens + draftLenPerEngineStep > maxSequenceLen`` "Number of requested output
  tokens is changed to" ``maxSequenceLen - mPromptLen - draftLenPerEngineStep`` (0 draft tokens here);
  the request is served, its output cut (``UPSTREAM_MAX_NEW_TOKENS``); older releases have the same
  rule in ``cpp/include/tensorrt_llm/batch_manager/llmRequest.h``;
- ``cpp/tensorrt_llm/batch_manager/trtGptModel.h`` (commit 2e2327b9): the maximum input length is
  ``maxSequenceLen - 1`` with chunked context, ``min(maxSequenceLen - 1, maxNumTokens)`` without
  (``UPSTREAM_MAX_INPUT_LEN``).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import yaml

from trtllm_operator.cli import main
from trtllm_operator.simulate import policies
from trtllm_operator.simulate.engine import ReplicaSpec, Simulation
from trtllm_operator.simulate.perf import IterationModel
from trtllm_operator.simulate.traces import Request

REPO = Path(__file__).resolve().parents[2]
LLAMA_8B = REPO / "tests" / "fixtures" / "model-configs" / "meta-llama__Llama-3.1-8B-Instruct.json"

#: Every iteration takes 10 ms, whatever it holds: times count iterations.
FLAT = IterationModel(fixed_s=0.01, per_token_s=0.0, per_kv_token_s=0.0)


def spec(**kw: object) -> ReplicaSpec:
    args: dict[str, object] = {"gpus": 1, "max_kv_tokens": 100_000, "max_batch_size": 64}
    args |= {"max_num_tokens": 1024, "model": FLAT, "chunked_context": True, "max_seq_len": 4096}
    args.update(kw)
    return ReplicaSpec(**args)  # type: ignore[arg-type]


def run(reqs: list[Request], replica: ReplicaSpec) -> Simulation:
    sim = Simulation(reqs, replica, policies.StaticPolicy(1), initial_replicas=1)
    sim.result = sim.run()  # type: ignore[attr-defined]
    return sim


# -- F3: output and reservation capped at maxSeqLen - prompt ----------------------------------------


def test_the_output_stops_at_max_seq_len_minus_the_prompt() -> None:
    """Trial 37b F3: a 32,766-token prompt asking 5,000 tokens of a maxSeqLen-32,768 engine decoded
    all 5,000; TensorRT-LLM generates 2. Here: a 4,000-token prompt asks 500 of maxSeqLen 4,096."""
    sim = run([Request(0.0, 4000, 500)], spec())
    assert sim.result.dropped == 0  # type: ignore[attr-defined]
    assert sim.result.requests[0].output_tokens == 96  # type: ignore[attr-defined]
    # First token after the 4 context chunks of 1024/1024/1024/928, then 95 more decode iterations.
    assert sim.first_token[0] == pytest.approx(4 * 0.01)
    assert sim.done[0] - sim.first_token[0] == pytest.approx(95 * 0.01)
    # Within maxSeqLen nothing changes.
    within = run([Request(0.0, 4000, 96)], spec())
    assert within.done[0] == pytest.approx(sim.done[0])


def test_the_reservation_is_capped_too_also_a_larger_reserve_output_tokens() -> None:
    replica = spec(reserve_output_tokens=10_000)
    assert replica.reservation(Request(0.0, 1000, 10)) == 4096  # 1000 + min(10000, 3096)
    assert spec().reservation(Request(0.0, 4000, 500)) == 4096
    assert spec(max_seq_len=None).reservation(Request(0.0, 4000, 500)) == 4500  # hand-built: no cap
    # A KV cache of 5,000 tokens: uncapped 1000 + 10000 would never fit (dropped); capped it runs.
    sim = run([Request(0.0, 1000, 10)], spec(reserve_output_tokens=10_000, max_kv_tokens=5000))
    assert sim.result.dropped == 0 and not math.isnan(sim.done[0])  # type: ignore[attr-defined]


def test_without_chunked_context_max_seq_len_minus_one_bounds_the_prompt_too() -> None:
    # maxInputLen = min(maxSequenceLen - 1, maxNumTokens): 1,000 > 511 is rejected although it fits
    # max_num_tokens 1024; 511 is served with its output cut to the 1 token left.
    replica = spec(chunked_context=False, max_seq_len=512)
    sim = run([Request(0.0, 1000, 10), Request(0.0, 511, 10)], replica)
    assert sim.result.dropped == 1 and math.isnan(sim.first_token[0])  # type: ignore[attr-defined]
    assert sim.result.requests[1].output_tokens == 1  # type: ignore[attr-defined]
    assert sim.done[1] == pytest.approx(sim.first_token[1])


# -- F4: --max-seq-len ------------------------------------------------------------------------------

BASE = ["simulate", "--model-config", str(LLAMA_8B), "--gpu", "H100", "--quantization", "fp8"]
BASE += ["--kv-cache-dtype", "fp8", "--output", "json"]


def _trace(tmp_path: Path, lengths: list[tuple[int, int]]) -> str:
    path = tmp_path / "t.jsonl"
    lines = [
        json.dumps({"timestamp": 1000 * i, "input_length": i_, "output_length": o})
        for i, (i_, o) in enumerate(lengths)
    ]
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def _run_json(capsys: pytest.CaptureFixture[str], args: list[str]) -> tuple[dict[str, object], str]:
    assert main(args) == 0
    captured = capsys.readouterr()
    out: dict[str, object] = json.loads(captured.out)
    return out, captured.err


def test_cli_max_seq_len_is_the_drop_threshold_and_caps_the_output(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Trial 37b F3/F4: the engine's maxSeqLen could not be given; the planner's derived value (32,768
    here) was the chunked-context threshold and outputs ran past it."""
    trace = _trace(tmp_path, [(4095, 1), (4096, 1), (4000, 500)])
    args = [*BASE, "--trace", trace, "--policy", "static:1", "--chunked-context"]
    derived, _ = _run_json(capsys, args)
    assert derived["dropped"] == 0 and derived["replica"]["max_seq_len"] == 32768  # type: ignore[index]
    out, err = _run_json(capsys, [*args, "--max-seq-len", "4096"])
    assert out["dropped"] == 1 and out["replica"]["max_seq_len"] == 4096, out  # type: ignore[index]
    assert "1 request(s) ask for more output than maxSeqLen 4096 minus their prompt" in err, err
    # the dropped one is said too (fresh-user trial 38 F1: dropped with no word, exit 0)
    assert "1 request(s) are rejected by the server and count as dropped" in err, err
    assert "the longest here: 4096 tokens" in err and "--max-seq-len ≥ 4097" in err, err
    assert "rejected by the server" not in _run_json(capsys, args)[1]
    # Without chunked context maxSeqLen - 1 bounds the prompt below max_num_tokens as well.
    off, _ = _run_json(capsys, [*BASE, "--trace", trace, "--policy", "static:1", "--max-seq-len", "4096"])
    assert off["replica"]["max_num_tokens"] == 8192 and off["dropped"] == 1  # type: ignore[index]


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("0", "spec.build.maxSeqLen (--max-seq-len): must be an integer ≥ 2 (one prompt token and one"),
        # trial 38 F3: 1 ran (and plan said it fits) though the CRD's minimum is 2
        ("1", "spec.build.maxSeqLen (--max-seq-len): must be an integer ≥ 2 (one prompt token and one"),
        ("5000000", "spec.build.maxSeqLen (--max-seq-len): 5000000 is above the API's limit of 4194304"),
        # The planner's own rule: the KV cache must hold one whole sequence; its fix names the flag.
        ("3000000", "lower maxSeqLen (--max-seq-len) to at most"),
    ],
)
def test_cli_max_seq_len_is_checked_by_the_planner_naming_the_flag(
    value: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    args = [*BASE, "--trace", "poisson:rate=1,duration=2", "--max-seq-len", value]
    assert main(args) == 2
    assert message in capsys.readouterr().err


def test_cli_max_seq_len_beside_a_deployment_is_the_replica_and_a_warning_names_the_engines(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """As --max-num-tokens: a flag given is the replica's, beside --deployment too; where it contradicts
    the LLMEngine of the input a warning names both values (fresh-user trial 44 F12)."""
    example = REPO / "examples" / "capacity-autoscaled-deployment.yaml"
    assert any(d and d.get("kind") == "LLMEngine" for d in yaml.safe_load_all(example.read_text()))
    trace = _trace(tmp_path, [(4095, 10), (4096, 10)])
    args = [*BASE, "--trace", trace, "--deployment", str(example), "--max-seq-len", "4096"]
    out, err = _run_json(capsys, args)
    assert out["dropped"] == 1 and out["replica"]["max_seq_len"] == 4096  # type: ignore[index]
    assert (
        "warning: --max-seq-len 4096 contradicts LLMEngine llama-3-1-70b-fp8-tp2 of --deployment "
        f"{example}, whose spec.build.maxSeqLen is 65536: the flag's 4096 is simulated"
    ) in err, err


# -- F7 / F8: planner messages name simulate's flags ------------------------------------------------


@pytest.mark.parametrize("chunked", [[], ["--chunked-context"]], ids=["plain", "chunked"])
def test_cli_max_num_tokens_below_a_block_is_a_bad_flag_not_a_model_that_does_not_fit(
    chunked: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """Trial 37b F7: "error: the model does not fit on 1 × … : spec.build.maxNumTokens: … Fix: use
    maxNumTokens ≥ 32" for --max-num-tokens 1."""
    args = [*BASE, "--trace", "poisson:rate=1,duration=2", "--max-num-tokens", "1", *chunked]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "does not fit" not in err, err
    assert "error: spec.build.maxNumTokens (--max-num-tokens): maxNumTokens 1 is below one KV block" in err
    assert "Fix: use maxNumTokens (--max-num-tokens) ≥ 32" in err, err


def test_cli_max_batch_size_warning_names_tp_and_max_seq_len(capsys: pytest.CaptureFixture[str]) -> None:
    """Trial 37b F8: "…use more tensor parallelism or a lower maxSeqLen" named no simulate flag."""
    args = [*BASE, "--trace", "poisson:rate=1,duration=2", "--max-batch-size", "8192"]
    assert main(args) == 0
    err = capsys.readouterr().err
    assert "use more tensor parallelism (--tp) or a lower maxSeqLen (--max-seq-len)." in err, err


@pytest.mark.parametrize("value", ["8193", "99999999"])
def test_cli_max_batch_size_above_the_apis_limit_names_the_flag_and_the_limit(
    value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Trial 38 F3: 8193 ran (the CRD's maximum is 8192), and 99999999 was "the model does not fit …
    spec.parallelism.tensor: … runtime 47780.6 GiB … raise tensor (or pipeline) parallelism"."""
    args = [*BASE, "--trace", "poisson:rate=1,duration=2", "--max-batch-size", value]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert (
        f"error: spec.build.maxBatchSize (--max-batch-size): {value} is above the API's limit of 8192; "
        "use a value ≤ 8192"
    ) in err, err
    assert "does not fit" not in err and "tensor" not in err, err


# -- trial 38 F2: κ and the oracle from the requests the replica accepts ----------------------------


def test_kappa_and_the_oracle_count_only_the_requests_the_replica_accepts() -> None:
    """Trial 38 F2: κ stayed 17.52/s with 2,703 of the longest prompts dropped (22.93 on the accepted
    ones), and an oracle held 1.567 mean replicas for a trace whose every request was dropped. The
    predicate is the simulation's own (``ReplicaSpec.accepts``)."""
    replica = spec(max_seq_len=2048)
    short = [Request(float(i), 500, 100) for i in range(40)]
    long = [Request(i + 0.5, 4000, 100) for i in range(40)]  # over maxSeqLen - 1: rejected
    both = sorted(short + long, key=lambda r: r.arrival_s)
    assert policies.accepted(both, replica) == short
    assert policies.profiled_capacity_rps(both, replica) == policies.profiled_capacity_rps(short, replica)
    # the guard: the long prompts would change κ if they were counted
    roomy = spec(max_seq_len=8192)
    assert policies.profiled_capacity_rps(both, roomy) != policies.profiled_capacity_rps(short, roomy)
    oracle, alone = policies.OraclePolicy(both, replica), policies.OraclePolicy(short, replica)
    assert [oracle.demand(t) for t in range(0, 40, 5)] == [alone.demand(t) for t in range(0, 40, 5)]
    nothing = policies.OraclePolicy(long, replica, utilization=0.01)
    assert nothing.demand(0.0) == 0.0 and nothing.peak(40.0) == 1
    with pytest.raises(ValueError, match="no request that the replica accepts"):
        policies.profiled_capacity_rps(long, replica)


def test_cli_kappa_ignores_rejected_requests_and_capacity_without_any_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Trial 38 F2 through the CLI: the rejected requests do not move ``saturated_requests_per_second``;
    with none accepted it is null, and ``--policy capacity`` (whose prior it is) is refused, naming
    the way out."""
    kept = [(500, 100)] * 20
    mixed = _trace(tmp_path, [x for pair in zip(kept, [(4000, 100)] * 20, strict=True) for x in pair])
    (tmp_path / "kept").mkdir()
    alone = _trace(tmp_path / "kept", kept)
    args = ["--policy", "static:1", "--max-seq-len", "2048"]
    out, _ = _run_json(capsys, [*BASE, "--trace", mixed, *args])
    ref, _ = _run_json(capsys, [*BASE, "--trace", alone, *args])
    assert out["dropped"] == 20, out
    kappa = out["replica"]["saturated_requests_per_second"]  # type: ignore[index]
    assert kappa == ref["replica"]["saturated_requests_per_second"], (out, ref)  # type: ignore[index]
    rejected = _trace(tmp_path, [(4000, 100)] * 5)
    none, _ = _run_json(capsys, [*BASE, "--trace", rejected, *args])
    assert none["dropped"] == 5 and none["replica"]["saturated_requests_per_second"] is None, none  # type: ignore[index]
    assert main([*BASE, "--trace", rejected, "--policy", "capacity", "--max-seq-len", "2048"]) == 2
    err = capsys.readouterr().err
    assert "--policy capacity: its prior κ needs a request the replica serves" in err, err
    assert "--policy capacity-learned" in err, err


@pytest.mark.parametrize("chunked", [False, True], ids=["no-chunking", "chunked"])
def test_cli_rejected_note_never_asks_for_a_limit_above_the_apis(
    tmp_path: Path, chunked: bool, capsys: pytest.CaptureFixture[str]
) -> None:
    """Fresh-user trial 43 F3: a prompt of 10^9 tokens got "Fix: --max-seq-len ≥ 1000000001", which
    the flag refuses (the LLMEngine schema's limit, BUILD_LIMITS). The note says no engine serves it
    and names the limit instead; a prompt within the limits still gets the flags' values."""
    from engine_builder.planner import BUILD_LIMITS  # noqa: PLC0415

    seq_high, tokens_high = BUILD_LIMITS["max_seq_len"].high, BUILD_LIMITS["max_num_tokens"].high
    longest = seq_high + 1  # above both limits: no maxSeqLen − 1 and no maxNumTokens reaches it
    trace = _trace(tmp_path, [(longest, 10), (100, 10)])
    args = [*BASE, "--trace", trace, "--policy", "static:1", *(["--chunked-context"] if chunked else [])]
    out, err = _run_json(capsys, args)
    assert out["dropped"] == 1, out
    assert f"--max-seq-len ≥ {longest + 1}" not in err and f"--max-num-tokens ≥ {longest}" not in err, err
    assert f"{longest:,} tokens is above what any engine serves" in err, err
    assert f"spec.build.maxSeqLen is at most {seq_high:,}, the API's limit" in err, err
    if not chunked:
        said = f"--chunked-context (--max-num-tokens cannot reach {longest:,}: spec.build.maxNumTokens is at "
        assert f"{said}most {tokens_high:,})" in err, err
    within = _trace(tmp_path, [(40_000, 10)])
    _, err = _run_json(capsys, [*BASE, "--trace", within, "--policy", "static:1"])
    assert "Fix: --max-seq-len ≥ 40001, and --chunked-context or --max-num-tokens ≥ 40000" in err, err


@pytest.mark.parametrize(
    "planned",
    [
        {},  # the derived maxSeqLen
        {"max_seq_len": 131072},  # the model's whole context, a KV cache of few such sequences
        {"kv_cache_free_gpu_mem_fraction": 0.05},  # a small KV cache: maxSeqLen derived below it
        {"max_seq_len": 8192, "kv_cache_free_gpu_mem_fraction": 0.05, "chunked_context": True},
    ],
)
def test_a_planned_replica_rejects_only_by_the_prompt_bounds(planned: dict[str, object]) -> None:
    """Fresh-user trial 40 F10: the rejected-request note's "or a reservation larger than the whole KV
    cache" cannot happen through the CLI. The planner refuses a KV cache smaller than one sequence of
    maxSeqLen, and a reservation — clients' max_tokens included — is capped at maxSeqLen, so a replica
    the command plans accepts every prompt within its maximum input length. This is why the clause
    was removed; it holds before and after that commit."""
    from trtllm_operator.simulate.fleet import replica_setup  # noqa: PLC0415

    spec = replica_setup(LLAMA_8B, "H100", quantization="fp8", **planned).spec  # type: ignore[arg-type]
    assert spec.max_seq_len is not None and spec.max_seq_len <= spec.max_kv_tokens, spec
    longest = spec.max_seq_len - 1 if spec.chunked_context else min(spec.max_seq_len - 1, spec.max_num_tokens)
    for reserve in (0, spec.max_seq_len, 10**9):
        greedy = ReplicaSpec(**{**_fields(spec), "reserve_output_tokens": reserve})
        for prompt in (1, longest // 2, longest):
            assert greedy.accepts(Request(0.0, prompt, 10**9)), (reserve, prompt)


def _fields(spec: ReplicaSpec) -> dict[str, object]:
    return {name: getattr(spec, name) for name in ReplicaSpec.__dataclass_fields__}


def test_cli_rejected_note_names_only_the_prompt_bounds(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Fresh-user trial 40 F10: the note said "…, or a reservation larger than the whole KV cache (never
    schedulable)", a case a planned replica never has (test above): a clause no user could meet."""
    trace = _trace(tmp_path, [(40_000, 10), (100, 10)])
    _, err = _run_json(
        capsys, [*BASE, "--trace", trace, "--policy", "static:1", "--reserve-output-tokens", "4000000"]
    )
    assert "1 request(s) are rejected by the server and count as dropped" in err, err
    assert "whole KV cache" not in err and "a larger KV cache" not in err, err
