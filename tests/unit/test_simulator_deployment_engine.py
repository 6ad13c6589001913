"""``simulate --deployment`` with the LLMEngine in the same input (fresh-user trial 44): the pair is
checked as ``render -f`` checks it (F24), and the replica's server settings the simulator cannot
honour are named (F27)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from trtllm_operator.cli import main

REPO = Path(__file__).resolve().parents[2]
CONFIGS = REPO / "tests" / "fixtures" / "model-configs"
QWEN_7B = CONFIGS / "Qwen__Qwen2.5-7B-Instruct.json"
LLAMA_8B = CONFIGS / "meta-llama__Llama-3.1-8B-Instruct.json"
LLAMA_70B = CONFIGS / "meta-llama__Llama-3.1-70B-Instruct.json"
TRACE = "poisson:rate=1,duration=5"
#: The 8B example and simulate's replica flags for it on an H100, JSON output.
EXAMPLE_8B = REPO / "examples" / "llama-3.1-8b-fp8-h100.yaml"
SIMULATE_8B_H100 = [
    "simulate",
    "--trace",
    TRACE,
    "--model-config",
    str(LLAMA_8B),
    "--gpu",
    "H100",
    "--output",
    "json",
]


def _docs(example: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((REPO / "examples" / example).read_text()) if d]


def _deployment(docs: list[dict[str, Any]]) -> dict[str, Any]:
    return next(d for d in docs if d["kind"] == "LLMDeployment")


def _write(tmp_path: Path, docs: list[dict[str, Any]], name: str = "in.yaml") -> str:
    path = tmp_path / name
    path.write_text(yaml.safe_dump_all(docs))
    return str(path)


def test_a_deployment_render_refuses_to_serve_is_refused_in_renders_words(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """F24: the pytorch ``api: openai`` example (trtllm-serve) with autoscaling added ran a whole
    autoscaling simulation, though ``render`` refuses it (``OpenAIFrontendUnsupported``: trtllm-serve
    exports neither signal). simulate now applies render's serving gate
    (decide.serving.plan_serving) to the LLMEngine of the input and refuses it with render's words."""
    docs = _docs("qwen2.5-7b-pytorch-openai.yaml")
    dep = _deployment(docs)
    dep["spec"].pop("replicas", None)
    targets = {"activeRequestUtilization": 0.5}
    dep["spec"]["autoscaling"] = {"enabled": True, "maxReplicas": 4, "targets": targets}
    path = _write(tmp_path, docs)
    assert main(["render", "-f", path]) == 1
    rendered = capsys.readouterr().err
    assert "qwen2-5-7b-chat: OpenAIFrontendUnsupported: spec.autoscaling.enabled:" in rendered, rendered
    args = ["simulate", "--trace", TRACE, "--model-config", str(QWEN_7B), "--gpu", "H100"]
    assert main([*args, "--quantization", "fp8", "--kv-cache-dtype", "fp8", "--deployment", path]) == 2
    err = capsys.readouterr().err
    refusal = next(line for line in rendered.splitlines() if "OpenAIFrontendUnsupported" in line)
    words = refusal.split(": error: ", 1)[1]
    assert f"trtllm-operator simulate: error: --deployment {path}: {words}" in err, err
    assert "render refuses it too" in err, err


def test_the_engine_of_the_input_is_checked_as_render_checks_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """F24: the LLMEngine beside the deployment was "not read (nor checked)": an engine render refuses
    for its schema (an unknown field, as kubectl apply refuses it) is refused here too, with render's
    message; the example as shipped still runs."""
    docs = _docs("autoscaled-deployment.yaml")
    engine = next(d for d in docs if d["kind"] == "LLMEngine")
    engine["spec"]["build"]["maxBatchSise"] = 8
    path = _write(tmp_path, docs)
    args = ["simulate", "--trace", TRACE, "--model-config", str(LLAMA_8B), "--gpu", "H100"]
    assert main([*args, "--deployment", path]) == 2
    err = capsys.readouterr().err
    name = engine["metadata"]["name"]
    assert f"--deployment {path}: LLMEngine {name}: spec.build.maxBatchSise: unknown field" in err, err
    del engine["spec"]["build"]["maxBatchSise"]
    assert main([*args, "--deployment", _write(tmp_path, docs), "--output", "json"]) == 0


def _server(tmp_path: Path, **server: object) -> str:
    docs = _docs("llama-3.1-8b-fp8-h100.yaml")
    _deployment(docs)["spec"]["server"].update(server)
    return _write(tmp_path, docs, "server.yaml")


FP8_8B = [
    *("simulate", "--trace", TRACE, "--model-config", str(LLAMA_8B), "--gpu", "H100"),
    *("--quantization", "fp8", "--kv-cache-dtype", "fp8", "--max-seq-len", "16384"),
]


def test_max_tokens_in_paged_kv_cache_bounds_the_simulated_pool(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """F27: spec.server.maxTokensInPagedKvCache 40,000 was ignored: the replica had the fraction's
    pool of about a million tokens. TensorRT-LLM takes the smaller of the two (memory.md, reference
    §7.2), and so does the replica now, with a note naming the field and both pools."""
    path = _server(tmp_path, maxTokensInPagedKvCache=40000)
    assert main([*FP8_8B, "--deployment", path, "--output", "json"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["replica"]["max_kv_tokens"] == 40000
    said = f"note: spec.server.maxTokensInPagedKvCache of --deployment {path} bounds the replica's KV cache"
    assert f"{said} to 40,000 tokens (the free-memory fraction's pool is" in err, err


def test_the_planner_warnings_count_sequences_in_the_bounded_pool(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Fresh-user trial 45 A14: with maxTokensInPagedKvCache 20,000 binding, the maxBatchSize warning
    still said "exceeds the 61 sequences of maxSeqLen 16384 … (494 at 2048 tokens)" — the fraction's
    pool of about a million tokens — two lines above the note that the pool is 20,000 tokens. It is
    counted in the bounded pool now (engine_builder.planner.bounded_warnings): 1 sequence, 9 at 2,048."""
    path = _server(tmp_path, maxTokensInPagedKvCache=20000)
    assert main([*FP8_8B, "--deployment", path, "--output", "json"]) == 0
    err = capsys.readouterr().err
    assert (
        "warning: spec.build.maxBatchSize: maxBatchSize 256 exceeds the 1 sequence of maxSeqLen 16384 "
        "tokens the KV cache holds per replica (9 at 2048 tokens)"
    ) in err, err
    assert "61 sequences" not in err, err


def test_max_tokens_below_one_sequence_is_refused_as_the_operator_refuses_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """F27 (F26's simulate side): 16,000 tokens cannot hold one sequence of maxSeqLen 16,384; the run is
    refused naming the field, the value and the fixes instead of simulating a pool 63× larger. Trial 45
    A1: it said "TensorRT-LLM refuses to start", which upstream does not (it cuts maxSeqLen to the pool,
    decide.serving_params.CLAMPED_AT_START), and render let it through; both now give the operator's
    check (decide.serving_params.max_tokens_shortfall): in render's words when the engine is in the
    input, in the same words from the replica's plan when only the deployment is."""
    path = _server(tmp_path, maxTokensInPagedKvCache=16000)
    assert main([*FP8_8B, "--deployment", path]) == 2
    err = capsys.readouterr().err
    said = (
        "16,000 tokens (500 KV blocks of 32: tensorrt rounds it up to whole blocks) is less than one "
        "sequence of maxSeqLen 16,384 (16,384 tokens in KV blocks of 32); "
        "TensorRT-LLM starts anyway and cuts maxSeqLen and maxInputLen to what the pool holds"
    )
    assert (
        f"--deployment {path}: llama-3-1-8b: KVCacheTooSmall: "
        f"spec.server.maxTokensInPagedKvCache 16000: {said}" in err
    )
    assert "(render refuses it too, and the operator serves nothing for it)" in err, err
    docs = [d for d in yaml.safe_load_all(Path(path).read_text()) if d["kind"] == "LLMDeployment"]
    alone = _write(tmp_path, docs, "alone.yaml")
    assert main([*FP8_8B, "--deployment", alone]) == 2
    err = capsys.readouterr().err
    assert f"error: spec.server.maxTokensInPagedKvCache of --deployment {alone}: {said}" in err, err
    assert "the operator refuses such a deployment too (KVCacheTooSmall)" in err, err
    assert (
        "Fix: raise it to at least 16,353, or leave it out (the pool is then the free-memory fraction's, "
        in err
    )


def test_server_settings_the_replica_does_not_model_are_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """F27: batchSchedulerPolicy max_utilization (examples/llama-3.1-70b-fp8-tp2-h200.yaml's) was
    simulated as guaranteed_no_evict without a word; a note now names each such field, its value and
    what the replica runs instead. A manifest at the defaults gets no such note."""
    path = _server(tmp_path, batchSchedulerPolicy="max_utilization", maxQueueSize=10)
    assert main([*FP8_8B, "--deployment", path, "--output", "json"]) == 0
    err = capsys.readouterr().err
    assert (
        f"note: --deployment {path}: spec.server.batchSchedulerPolicy max_utilization is not simulated: the "
        "replica runs as guaranteed_no_evict"
    ) in err, err
    assert "; spec.server.maxQueueSize 10 is not simulated: the replica runs as 0" in err, err
    assert main([*FP8_8B, "--deployment", _server(tmp_path), "--output", "json"]) == 0
    assert "is not simulated" not in capsys.readouterr().err


def test_the_llmengine_of_the_input_is_the_replica_where_the_flags_are_left_out(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """F12: ``--deployment examples/llama-3.1-8b-fp8-h100.yaml`` without format flags simulated a BF16
    engine with a BF16 KV cache (458,624 tokens, maxBatchSize 223, maxSeqLen 16,384 derived), not the
    file's FP8 engine (maxBatchSize 256, maxSeqLen 16,384), and said only that the engine "is not
    read". The engine's fields now fill the flags left out, and a note says which."""
    example = str(EXAMPLE_8B)
    base = SIMULATE_8B_H100
    assert main([*base, "--deployment", example]) == 0
    out, err = capsys.readouterr()
    replica = json.loads(out)["replica"]
    assert (replica["max_batch_size"], replica["max_num_tokens"], replica["max_seq_len"]) == (
        256,
        8192,
        16384,
    )
    said = f"note: the replica is LLMEngine llama-3-1-8b-fp8's (--deployment {example}): --quantization fp8"
    assert said in err and "--max-batch-size 256 (spec.build.maxBatchSize)" in err, err
    assert "warning: --" not in err, err
    flags = ["--quantization", "fp8", "--kv-cache-dtype", "fp8", "--max-batch-size", "256"]
    assert main([*base, *flags, "--max-seq-len", "16384", "--max-num-tokens", "8192"]) == 0
    assert json.loads(capsys.readouterr().out)["replica"] == replica  # the FP8 engine's pool, not BF16's


def test_the_llmengines_max_input_len_moves_the_derived_max_seq_len_as_plan_derives_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Fresh-user trial 51 Y5: an engine with maxInputLen 30000 and no maxSeqLen was simulated at the
    maxSeqLen derived without it (16,384), while plan, render and the operator derive one above
    30,000. simulate now passes the engine's maxInputLen to the planner, as plan --max-input-len."""
    docs = _docs("llama-3.1-8b-fp8-h100.yaml")
    engine = next(d for d in docs if d["kind"] == "LLMEngine")
    engine["spec"]["build"].pop("maxSeqLen")
    engine["spec"]["build"]["maxInputLen"] = 30000
    path = _write(tmp_path, docs)
    args = ["--model-config", str(LLAMA_8B), "--gpu", "L40S"]  # without maxInputLen: 16,384 there
    sim = ["simulate", "--trace", TRACE, *args, "--deployment", path, "--output", "json"]
    assert main(sim) == 0
    replica = json.loads(capsys.readouterr().out)["replica"]
    flags = ["--quantization", "fp8", "--kv-cache-dtype", "fp8", "--max-batch-size", "256"]
    assert main(["plan", *args, *flags, "--max-num-tokens", "8192", "--max-input-len", "30000"]) == 0
    planned = json.loads(capsys.readouterr().out)
    assert replica["max_seq_len"] == planned["max_seq_len"] > 30000, (replica, planned["max_seq_len"])


def test_the_engines_backend_and_paged_context_fmha_decide_the_paged_context_fmha_rules(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The planner refuses a KV cache that turns paged context FMHA off as the API does (trial 51 Y6):
    only on tensorrt with build.pagedContextFMHA on. simulate --deployment plans with the engine's
    spec.backend and build.pagedContextFMHA, so an engine the API admits (INT8 KV cache with
    pagedContextFMHA: false) is simulated and one it refuses is refused in its words."""
    docs = list(yaml.safe_load_all((REPO / "examples" / "llama-3.1-8b-fp8-h100.yaml").read_text()))
    engine = next(d for d in docs if d["kind"] == "LLMEngine")
    engine["spec"]["quantization"]["kvCacheDtype"] = "int8"
    path = tmp_path / "engine.yaml"
    args = ["simulate", "--trace", TRACE, "--model-config", str(LLAMA_8B), "--gpu", "H100", "--deployment"]
    path.write_text(yaml.safe_dump_all(docs))
    assert main([*args, str(path)]) == 2
    assert "kvCacheDtype int8 does not work with build.pagedContextFMHA" in capsys.readouterr().err
    engine["spec"]["build"]["pagedContextFMHA"] = False
    path.write_text(yaml.safe_dump_all(docs))
    assert main([*args, str(path)]) == 0, capsys.readouterr().err


def test_a_flag_that_contradicts_the_llmengine_is_simulated_with_a_warning_naming_both_values(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """F12: ``--quantization none`` beside the FP8 engine was simulated without a word; the flag given
    still wins (it is what was typed), and a warning names the field, both values and the flag to
    pass. ``--gpu`` is compared too (it is required, so never taken)."""
    example = str(REPO / "examples" / "llama-3.1-8b-fp8-h100.yaml")
    args = ["simulate", "--trace", TRACE, "--model-config", str(LLAMA_8B), "--gpu", "H200"]
    # w4a8_awq, not none: the engine's FP8 KV cache keeps paged context FMHA only with fp8, w4a8_awq or
    # nvfp4, and none is refused as the API refuses it (trial 51 Y6)
    assert main([*args, "--quantization", "w4a8_awq", "--tp", "2", "--deployment", example]) == 0
    err = capsys.readouterr().err
    engine = f"LLMEngine llama-3-1-8b-fp8 of --deployment {example}"
    assert (
        f"warning: --quantization w4a8_awq contradicts {engine}, whose spec.quantization.format is fp8: the "
        "flag's w4a8_awq is simulated, not the engine. Fix: pass --quantization fp8, or leave --quantization "
        "out"
    ) in err, err
    assert f"warning: --tp 2 contradicts {engine}, whose spec.parallelism.tensor is 1" in err, err
    assert f"warning: --gpu H200 contradicts {engine}, whose spec.gpu.product is NVIDIA-H100-80GB-HBM3" in err


@pytest.mark.parametrize(
    ("rps", "said"),
    [
        (9.4, "is 69% above the replica's saturated_requests_per_second 5.551 for this trace"),
        (2.0, "is 64% below the replica's saturated_requests_per_second 5.551 for this trace"),
        (5.0, None),  # within the target's headroom (5.551 × 0.8 ≤ 5 ≤ 5.551 / 0.8): no note
    ],
)
def test_a_capacity_prior_far_from_the_replicas_saturated_rate_is_noted(
    rps: float, said: str | None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """F22: the capacity example's requestsPerSecond 9.4 (measured for the Azure trace) planned every
    decision beside a trace whose replica saturates at 5.551/s, and simulate, which prints both, said
    nothing. A note names both numbers when the prior is outside capacity.target's headroom."""
    docs = _docs("capacity-autoscaled-deployment.yaml")
    _deployment(docs)["spec"]["autoscaling"]["capacity"]["requestsPerSecond"] = rps
    path = _write(tmp_path, docs)
    trace = "gamma:rate=6,duration=20,cv=3,isl=2000,osl=300"
    args = ["simulate", "--trace", trace, "--model-config", str(LLAMA_70B), "--gpu", "H200"]
    assert main([*args, "--deployment", path, "--output", "json"]) == 0
    out, err = capsys.readouterr()
    replica = json.loads(out)["replica"]
    assert replica["saturated_requests_per_second"] == 5.551
    # ... at the trace's mean lengths (isl 2000, osl 300), with the weight of an output token there:
    # the values of spec.autoscaling.capacity's token weighting (promptTokens, outputTokens,
    # outputTokenWeight); the weight is the performance model's (tests/unit/test_capacity_tokens.py)
    assert (replica["mean_prompt_tokens"], replica["mean_output_tokens"]) == (2000.0, 300.0)
    assert 1.0 < replica["output_token_weight"] < 4.0
    if said is None:
        assert "spec.autoscaling.capacity.requestsPerSecond" not in err, err
    else:
        prefix = f"note: spec.autoscaling.capacity.requestsPerSecond {rps:g} of --deployment {path} "
        assert prefix + said in err, err
        assert "Fix: set requestsPerSecond near 5.551 for this traffic" in err, err


def test_with_token_weighting_the_prior_is_compared_at_the_lengths_it_holds_for(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Fresh-user trial 51 Y3: with token weighting, requestsPerSecond counts requests of promptTokens /
    outputTokens, but the note compared it with the trace's saturated rate. The trace's own rate (5.551
    at 2,000 / 300 tokens) beside promptTokens 200 / outputTokens 50 is far below what the replica
    completes of such short requests: now noted, with the rate at those lengths (no note before)."""
    docs = _docs("capacity-autoscaled-deployment.yaml")
    capacity = _deployment(docs)["spec"]["autoscaling"]["capacity"]
    capacity.update(requestsPerSecond=5.551, promptTokens=200, outputTokens=50, outputTokenWeight=2)
    path = _write(tmp_path, docs)
    trace = "gamma:rate=6,duration=20,cv=3,isl=2000,osl=300"
    args = ["simulate", "--trace", trace, "--model-config", str(LLAMA_70B), "--gpu", "H200"]
    assert main([*args, "--deployment", path, "--output", "json"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["replica"]["saturated_requests_per_second"] == 5.551
    said = re.search(
        r"requestsPerSecond 5\.551 of --deployment \S+ is (\d+)% below the replica's saturated rate "
        r"([\d.]+) requests/s at promptTokens 200 and outputTokens 50, the lengths it holds for",
        err,
    )
    assert said, err
    assert float(said.group(2)) > 5.551 / 0.8, said.group(2)  # outside the target's headroom
    assert f"Fix: set requestsPerSecond near {float(said.group(2)):g} at those lengths" in err, err


@pytest.mark.parametrize(("prompt", "output"), [(1_000_000, 1_000_000), (70_000, 100), (1_000, 1_000_000)])
def test_token_weighting_lengths_the_replica_never_serves_are_said_not_priced(
    prompt: int, output: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Fresh-user trial 52 #2 and #3: lengths within the API's limits but beyond what the engine serves
    (a prompt over maxSeqLen - 1 = 65,535 tokens here, the server's maximum input length with chunked
    context: simulate.engine.UPSTREAM_MAX_INPUT_LEN) crashed the note (a rate under 0.0005/s rounded to
    0, ZeroDivisionError, rc 1) or priced them. A request of those lengths is never served, so the note
    says the lengths are what to fix."""
    docs = _docs("capacity-autoscaled-deployment.yaml")
    capacity = _deployment(docs)["spec"]["autoscaling"]["capacity"]
    capacity.update(promptTokens=prompt, outputTokens=output, outputTokenWeight=2)
    path = _write(tmp_path, docs)
    trace = "gamma:rate=6,duration=20,cv=3,isl=2000,osl=300"
    args = ["simulate", "--trace", trace, "--model-config", str(LLAMA_70B), "--gpu", "H200"]
    assert main([*args, "--deployment", path, "--output", "json"]) == 0
    err = capsys.readouterr().err
    assert (
        f"note: spec.autoscaling.capacity promptTokens {prompt} and outputTokens {output} of --deployment "
        f"{path}: this replica does not serve a request of these lengths (a prompt over its maximum input "
        "length, 65535 tokens, prompt + output over its maxSeqLen 65536, whose outputs the server cuts, or a "
        "reservation over its whole KV cache)"
    ) in err, err
    assert "requests/s at promptTokens" not in err, err


def test_what_of_the_engine_the_replica_does_not_take_is_said(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Fresh-user trial 45 A11: the speculative example's draft model (weights, KV cache, tokens per
    step) was simulated away without a word, and a 70B config.json beside the 8B engine ran a 70B
    replica under the 8B engine's name. The first is a note; the model is compared where the flag says
    which it is (a <org>__<name>.json file name, as the operator's hfConfigDir names it, or
    _name_or_path), else a note says it was not compared."""
    llama_70b = REPO / "tests" / "fixtures" / "model-configs" / "meta-llama__Llama-3.1-70B-Instruct.json"
    base = ["simulate", "--trace", TRACE, "--gpu", "H100", "--output", "json"]
    speculative = str(REPO / "examples" / "speculative-decoding-draft-model.yaml")
    assert main([*base, "--model-config", str(llama_70b), "--deployment", speculative]) == 0
    err = capsys.readouterr().err
    assert (
        "note: spec.build.speculativeDecoding (draft_tokens_external, draft model "
        "hf://meta-llama/Llama-3.2-1B-Instruct, maxDraftLen 4) of LLMEngine llama-3-1-70b-spec-1b-draft"
    ) in err, err
    assert "seems not to be" not in err and "is not compared" not in err, err
    example = str(REPO / "examples" / "llama-3.1-8b-fp8-h100.yaml")
    assert main([*base, "--model-config", str(llama_70b), "--deployment", example]) == 0
    err = capsys.readouterr().err
    assert (
        f"warning: --model-config {llama_70b} seems not to be LLMEngine llama-3-1-8b-fp8 of --deployment "
        f"{example}'s model, spec.model.source hf://meta-llama/Llama-3.1-8B-Instruct: its file name is "
        "another model's than meta-llama__Llama-3.1-8B-Instruct.json"
    ) in err, err
    plain = tmp_path / "config.json"
    plain.write_text(LLAMA_8B.read_text())
    assert main([*base, "--model-config", str(plain), "--deployment", example]) == 0
    assert (
        f"note: --model-config {plain} is not compared with LLMEngine llama-3-1-8b-fp8"
        in capsys.readouterr().err
    )
    assert main([*base, "--model-config", str(LLAMA_8B), "--deployment", example]) == 0
    err = capsys.readouterr().err
    assert "seems not to be" not in err and "is not compared" not in err, err


def test_an_engine_beside_the_referenced_one_is_noted_without_contradicting_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Fresh-user trial 52 #7: with the referenced LLMEngine and another one in the input, one note said
    the replica is the referenced engine's and the next that it is "the one the flags describe"."""
    docs = _docs("capacity-autoscaled-deployment.yaml")
    other = json.loads(json.dumps(next(d for d in docs if d["kind"] == "LLMEngine")))
    other["metadata"]["name"] = "unused-engine"
    path = _write(tmp_path, [*docs, other])
    args = ["simulate", "--trace", TRACE, "--model-config", str(LLAMA_70B), "--gpu", "H200"]
    assert main([*args, "--deployment", path, "--output", "json"]) == 0
    err = capsys.readouterr().err
    assert (
        f"note: --deployment {path}: LLMEngine unused-engine is not read (nor checked): the LLMDeployment's "
        "spec.engineRef names 'llama-3-1-70b-fp8-tp2'; the replica is LLMEngine llama-3-1-70b-fp8-tp2's\n"
    ) in err, err
    assert "the flags describe" not in err, err


def test_the_engines_max_input_len_bounds_the_planners_warnings_as_for_render(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Fresh-user trial 52 #8: the 8B example (maxInputLen 8,192 = maxNumTokens, maxSeqLen 16,384) got
    "maxNumTokens 8192 is below maxSeqLen 16384" from simulate, where render and the operator, which
    give the planner maxInputLen, say nothing of it: simulate passed maxInputLen only for a derived
    maxSeqLen. The planner's warnings are now the same as render's."""
    example = str(EXAMPLE_8B)
    args = SIMULATE_8B_H100
    assert main([*args, "--deployment", example]) == 0
    simulated = [line for line in capsys.readouterr().err.splitlines() if "warning:" in line]
    assert main(["render", "-f", example, "--model-config", str(CONFIGS)]) == 0
    rendered = [line for line in capsys.readouterr().err.splitlines() if "warning:" in line]
    assert not any("maxNumTokens" in line for line in simulated), simulated

    def what(lines: list[str]) -> list[str]:  # simulate's fixes name its flags: compare what is said
        return [line.split("spec.build.", 1)[1].split(" Fix:")[0] for line in lines]

    assert what(simulated) == what(rendered), (simulated, rendered)
