"""A KV cache that cannot hold one sequence of maxSeqLen, found before anything is scheduled.

TensorRT-LLM refuses to start when its paged KV pool is smaller than ``beam_width × tokensPerBlock ×
maxBlocksPerSeq`` ("maxTokensInPagedKvCache (1664) must be large enough to process at least 1
sequence to completion", triton-inference-server/tensorrtllm_backend#168; docs/reference/
tensorrt-llm.md §7.2). The pool is ``kvCacheFreeGpuMemFraction`` of the memory left after the
weights — a deployment field, while maxSeqLen is the engine's. A fresh-user trial set
``kvCacheFreeGpuMemFraction: 0.0001`` on a deployment: the operator rolled it out and ``plan``
derived a 96-token maxSeqLen without a word.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from engine_builder.planner import (
    Architecture,
    PlanRequest,
    kv_pool_tokens,
    lookup,
    one_sequence_kv_tokens,
    plan,
)
from trtllm_operator.cli import main
from trtllm_operator.decide.engine_spec import plan_status
from trtllm_operator.decide.serving_params import kv_cache_refusal, max_tokens_shortfall

REPO = Path(__file__).resolve().parents[2]
LLAMA_8B = REPO / "tests" / "fixtures" / "model-configs" / "meta-llama__Llama-3.1-8B-Instruct.json"
EXAMPLE = REPO / "examples" / "llama-3.1-8b-fp8-h100.yaml"


def llama_plan(**request: Any) -> Any:
    arch = Architecture.from_hf_config(json.loads(LLAMA_8B.read_text()))
    return plan(arch, PlanRequest(quantization="fp8", kv_cache_dtype="fp8", **request), lookup("H100"))


def test_one_sequence_is_whole_blocks_times_beams() -> None:
    assert one_sequence_kv_tokens(2048, 32) == 2048
    assert one_sequence_kv_tokens(2049, 32) == 2080
    assert one_sequence_kv_tokens(100, 32, max_beam_width=4) == 4 * 128
    assert kv_pool_tokens(0, 0.9, 10, 32) == 0
    assert kv_pool_tokens(1000 * 64, 0.5, 10, 32) == 3200


def test_the_plan_names_the_fraction_when_it_is_the_cause() -> None:
    short = llama_plan(max_seq_len=16384, kv_cache_free_gpu_mem_fraction=0.0001)
    assert not short.fits
    (reason,) = short.reasons
    assert reason.field == "spec.build.maxSeqLen"
    assert "less than one sequence of maxSeqLen 16384" in reason.message
    assert "raise kvCacheFreeGpuMemFraction (now 0.0001; the default is 0.9)" in reason.fix
    # At the default fraction the same engine fits, and the fix does not blame the fraction.
    assert llama_plan(max_seq_len=16384).fits


def test_a_derived_max_seq_len_below_the_floor_is_a_warning() -> None:
    derived = llama_plan(kv_cache_free_gpu_mem_fraction=0.0001)
    assert derived.fits and derived.max_seq_len_source == "derived" and derived.max_seq_len < 2048
    (warning,) = [w for w in derived.warnings if w.field == "spec.build.maxSeqLen"]
    assert f"derived as {derived.max_seq_len} tokens, below 2048" in warning.message
    assert "raise kvCacheFreeGpuMemFraction" in warning.fix
    assert not [w for w in llama_plan().warnings if "derived as" in w.message]


def test_deployment_fraction_checked_against_the_engine_plan() -> None:
    engine_plan = plan_status(llama_plan(max_seq_len=16384))
    assert engine_plan is not None and engine_plan["freeBytesPerGPU"] > 0
    assert kv_cache_refusal("llama", engine_plan, 0.9, 16384) is None
    message = kv_cache_refusal("llama", engine_plan, 0.0001, 16384)
    assert message is not None
    assert message.startswith("spec.server.kvCacheFreeGpuMemFraction 0.0001 gives a KV cache of ")
    assert "less than one sequence of its maxSeqLen 16384 (16384 tokens)" in message
    smallest = float(message.split("to at least ")[1].split(" ")[0])
    assert kv_cache_refusal("llama", engine_plan, smallest, 16384) is None
    assert kv_cache_refusal("llama", engine_plan, round(smallest - 0.01, 2), 16384) is not None
    # Nothing to check against: no plan, or one written before freeBytesPerGPU existed.
    assert kv_cache_refusal("llama", None, 0.0001, 16384) is None
    assert kv_cache_refusal("llama", {"kvBytesPerTokenPerGPU": 65536}, 0.0001, 16384) is None


def _docs(fraction: float) -> list[dict[str, Any]]:
    docs = [d for d in yaml.safe_load_all(EXAMPLE.read_text()) if d]
    dep = next(d for d in docs if d["kind"] == "LLMDeployment")
    dep["spec"]["server"]["kvCacheFreeGpuMemFraction"] = fraction
    return docs


def test_render_refuses_what_the_operator_refuses(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "all.yaml"
    path.write_text(yaml.safe_dump_all(_docs(0.0001)))
    assert main(["render", "-f", str(path), "--model-config", str(LLAMA_8B)]) == 1
    err = capsys.readouterr().err
    assert "KVCacheTooSmall: spec.server.kvCacheFreeGpuMemFraction 0.0001 gives a KV cache of" in err
    path.write_text(yaml.safe_dump_all(_docs(0.5)))
    assert main(["render", "-f", str(path), "--model-config", str(LLAMA_8B)]) == 0


def test_simulate_says_why_a_tiny_kv_cache_drops_everything(capsys: pytest.CaptureFixture[str]) -> None:
    """Fresh-user trial: ``simulate --kv-cache-free-gpu-mem-fraction 0.0001`` dropped all 800 requests
    and exited 0 with no word on why; the plan's warnings now go to stderr."""
    args = ["simulate", "--trace", "poisson:rate=2,duration=5", "--model-config", str(LLAMA_8B)]
    assert main([*args, "--gpu", "H100", "--kv-cache-free-gpu-mem-fraction", "0.0001"]) == 0
    err = capsys.readouterr().err
    assert "trtllm-operator simulate: warning: spec.build.maxSeqLen: maxSeqLen was derived as" in err
    assert "raise --kv-cache-free-gpu-mem-fraction (now 0.0001" in err
    # The fix names simulate's flags, not the spec fields it has no flag for (fresh-user trial).
    assert "(--kv-cache-dtype)" in err and "raise tensor parallelism (--tp)" in err
    assert "set maxSeqLen (--max-seq-len) to see what it needs" in err  # simulate's flag (trial 37b F4)
    assert main([*args, "--gpu", "H100"]) == 0
    assert "warning" not in capsys.readouterr().err


def _autoscaled_deployment(tmp_path: Path, fraction: float | None) -> Path:
    docs = list(yaml.safe_load_all((REPO / "examples" / "autoscaled-deployment.yaml").read_text()))
    dep = next(d for d in docs if d and d["kind"] == "LLMDeployment")
    if fraction is not None:
        dep["spec"].setdefault("server", {})["kvCacheFreeGpuMemFraction"] = fraction
    path = tmp_path / "dep.yaml"
    path.write_text(yaml.safe_dump(dep))
    return path


def _simulated_kv_tokens(out: str) -> int:
    return int(json.loads(out)["replica"]["max_kv_tokens"])


#: A short simulate run of Llama 3.1 8B on an H100 (what both simulate tests below vary).
SIMULATE_SMALL = ["simulate", "--trace", "poisson:rate=2,duration=5"]
SIMULATE_SMALL += ["--model-config", str(LLAMA_8B), "--gpu", "H100"]


def test_simulate_deployment_uses_the_manifests_kv_cache_fraction(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Fresh-user trial: ``simulate --deployment`` with spec.server.kvCacheFreeGpuMemFraction 0.001
    simulated the default 0.9 pool (no warning, nothing dropped). The manifest's fraction is used, as
    ``--kv-cache-free-gpu-mem-fraction`` would be without --deployment."""
    args = [*SIMULATE_SMALL, "--quantization", "fp8", "--output", "json"]
    assert main([*args, "--deployment", str(_autoscaled_deployment(tmp_path, 0.001))]) == 0
    captured = capsys.readouterr()
    tiny = _simulated_kv_tokens(captured.out)
    assert "raise spec.server.kvCacheFreeGpuMemFraction of --deployment" in captured.err
    assert "(now 0.001" in captured.err
    assert main([*args, "--kv-cache-free-gpu-mem-fraction", "0.001"]) == 0
    assert _simulated_kv_tokens(capsys.readouterr().out) == tiny
    assert main([*args, "--deployment", str(_autoscaled_deployment(tmp_path, None))]) == 0
    default = _simulated_kv_tokens(capsys.readouterr().out)
    assert main(args) == 0  # no manifest, no flag: the field's default 0.9 on both paths
    assert _simulated_kv_tokens(capsys.readouterr().out) == default > 100 * tiny


@pytest.mark.parametrize(
    ("flag", "value", "field"),
    [
        ("--min-replicas", "3", "spec.autoscaling.minReplicas"),
        ("--max-replicas", "8", "spec.autoscaling.maxReplicas"),
        ("--policy", "capacity", "spec.autoscaling"),
        ("--kv-cache-free-gpu-mem-fraction", "0.5", "spec.server.kvCacheFreeGpuMemFraction"),
    ],
)
def test_simulate_refuses_flags_the_deployment_sets(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flag: str, value: str, field: str
) -> None:
    """Fresh-user trial: ``simulate --deployment base.yaml --min-replicas 3`` ran with the manifest's
    minReplicas, the flag silently ignored. A flag the manifest sets is refused, naming both."""
    path = _autoscaled_deployment(tmp_path, None)
    args = SIMULATE_SMALL
    assert main([*args, "--deployment", str(path), flag, value]) == 2
    err = capsys.readouterr().err
    assert f"{flag} cannot be combined with --deployment {path}, which takes it from {field}" in err


def _bounded(tokens: int) -> list[dict[str, Any]]:
    docs = [d for d in yaml.safe_load_all(EXAMPLE.read_text()) if d]
    dep = next(d for d in docs if d["kind"] == "LLMDeployment")
    dep["spec"]["server"]["maxTokensInPagedKvCache"] = tokens
    return docs


@pytest.mark.parametrize("tokens", [1, 16000])
def test_a_max_tokens_bound_below_one_sequence_is_refused_as_the_fraction_is(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], tokens: int
) -> None:
    """Fresh-user trials 44 F26 / 45 A1: ``spec.server.maxTokensInPagedKvCache`` 1 (or 16,000 under
    the example engine's maxSeqLen 16,384) was rendered, and rolled out by the operator, while simulate
    refused it. TensorRT-LLM would start and cut maxSeqLen to the pool (trtGptModelInflightBatching.cpp
    clampWindowSizesToFitAtLeastOneSequence); the serving gate now refuses it with the fraction's
    reason, KVCacheTooSmall, naming the field, the value and the fixes — without --model-config, as the
    bound needs no plan."""
    path = tmp_path / "bounded.yaml"
    path.write_text(yaml.safe_dump_all(_bounded(tokens)))
    assert main(["render", "-f", str(path)]) == 1
    err = capsys.readouterr().err
    assert (
        f"KVCacheTooSmall: spec.server.maxTokensInPagedKvCache {tokens}: {tokens:,} "
        f"{'token' if tokens == 1 else 'tokens'} ({-(-tokens // 32):,} KV "
        f"{'block' if tokens == 1 else 'blocks'} of 32: tensorrt rounds it up to whole blocks) is less "
        "than one sequence of maxSeqLen 16,384 (16,384 tokens in KV blocks of 32); TensorRT-LLM starts "
        "anyway and cuts maxSeqLen and maxInputLen to what the pool holds"
    ) in err, err
    assert "Nothing was rolled out: raise it to at least 16,353, or leave it out" in err, err
    # The longest maxSeqLen the rounded-up blocks hold (trial 47 U4): 1 token is one block of 32.
    assert f"spec.build.maxSeqLen at most {16000 if tokens == 16000 else 32:,}" in err, err
    path.write_text(yaml.safe_dump_all(_bounded(16384)))
    assert main(["render", "-f", str(path)]) == 0


@pytest.mark.parametrize(
    ("backend", "tokens", "refused", "longest"),
    [
        # tensorrt rounds maxTokens UP to whole blocks (kvCacheManager.cpp calculatePrimaryBlocks
        # tc::ceilDiv): 16,353..16,383 are 512 blocks, one sequence of 16,384.
        ("tensorrt", 16383, False, None),
        ("tensorrt", 16353, False, None),
        ("tensorrt", 16352, True, 16352),
        ("tensorrt", 16320, True, 16320),
        # pytorch rounds DOWN (resource_manager.py calculate_max_num_blocks, int(max_tokens // block)).
        ("pytorch", 16383, True, 16352),
        ("pytorch", 16384, False, None),
    ],
)
def test_the_max_tokens_bound_is_compared_in_whole_blocks_as_the_backend_rounds_it(
    backend: str, tokens: int, refused: bool, longest: int | None
) -> None:
    """Fresh-user trial 47 U4: 16,383 tokens was refused as less than one 16,384-token sequence,
    although TensorRT-LLM's C++ executor rounds maxTokens up to 512 blocks of 32 = 16,384 tokens, and
    the suggested "maxSeqLen at most 16,352" was rounded down where it rounds up."""
    short = max_tokens_shortfall(tokens, 16384, 1, 32, backend=backend)
    assert (short is not None) == refused, short
    if short is not None:
        message, fix = short
        assert f"maxSeqLen at most {longest:,}" in fix, fix
        assert f"{backend} rounds it {'up' if backend == 'tensorrt' else 'down'}" in message, message
        smallest = 16353 if backend == "tensorrt" else 16384
        assert f"raise it to at least {smallest:,}" in fix, fix
        assert max_tokens_shortfall(smallest, 16384, 1, 32, backend=backend) is None
        assert max_tokens_shortfall(smallest - 1, 16384, 1, 32, backend=backend) is not None


def test_render_accepts_a_max_tokens_bound_that_rounds_up_to_one_sequence(tmp_path: Path) -> None:
    """Fresh-user trial 47 U4, end to end: render refused maxTokensInPagedKvCache 16,383 on the
    tensorrt example engine (maxSeqLen 16,384)."""
    path = tmp_path / "bounded.yaml"
    path.write_text(yaml.safe_dump_all(_bounded(16383)))
    assert main(["render", "-f", str(path)]) == 0


def test_render_names_the_bound_check_it_skips_for_a_derived_max_seq_len(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Fresh-user trial 47 U11: with spec.build.maxSeqLen unset and no --model-config, a
    maxTokensInPagedKvCache of 1,000 rendered with exit 0 and a note naming only the heads and memory
    checks. The maxSeqLen to compare with is the planner's derived one, which needs the model's config:
    the note now names this check too (and docs/serving.md says when it runs)."""
    docs = _bounded(1000)
    engine = next(d for d in docs if d["kind"] == "LLMEngine")
    del engine["spec"]["build"]["maxSeqLen"]
    path = tmp_path / "derived.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    assert main(["render", "-f", str(path)]) == 0
    err = capsys.readouterr().err
    assert (
        "memory fit, and spec.server.maxTokensInPagedKvCache 1000 of LLMDeployment "
        "llama-3-1-8b against one sequence of the derived maxSeqLen, as spec.build.maxSeqLen is unset) "
        "were skipped"
    ) in err, err
    # with the model's config the derived maxSeqLen is known and the bound is refused
    configs = REPO / "tests" / "fixtures" / "model-configs"
    assert main(["render", "-f", str(path), "--model-config", str(configs)]) == 1
    assert "KVCacheTooSmall: spec.server.maxTokensInPagedKvCache 1000" in capsys.readouterr().err


def test_a_beam_bound_says_what_tensorrt_does_with_it() -> None:
    """Fresh-user trial 47 U5: with maxBeamWidth 4 (maxInputLen 8,192, maxSeqLen 16,384) a bound of
    40,960 tokens was refused saying "TensorRT-LLM starts anyway and cuts maxSeqLen", but its start-up
    clamp (trtGptModelInflightBatching.cpp clampWindowSizesToFitAtLeastOneSequence) counts the cheapest
    sequence, 256 context blocks + 256 output blocks × 4 = 40,960 tokens, and cuts nothing. The rule
    stays maxSeqLen × beam (the worst case); on tensorrt the message now says so. On pytorch the pool
    is divided by the beam width (get_max_atten_window_upper_bound): the clamp claim stands."""
    short = max_tokens_shortfall(40960, 16384, 4, 32, backend="tensorrt")
    assert short is not None
    assert "16,384 × beam width 4 (65,536 tokens" in short[0], short
    assert "TensorRT-LLM starts anyway" not in short[0], short
    assert "the operator counts the worst case, a beam search whose beams each run to maxSeqLen" in short[0]
    pytorch = max_tokens_shortfall(40960, 16384, 4, 32, backend="pytorch")
    assert pytorch is not None
    assert "TensorRT-LLM starts anyway and cuts maxSeqLen" in pytorch[0], pytorch
    one_beam = max_tokens_shortfall(16000, 16384, 1, 32, backend="tensorrt")
    assert one_beam is not None
    assert "TensorRT-LLM starts anyway and cuts maxSeqLen" in one_beam[0], one_beam


def test_one_node_and_one_sequence_words_are_singular_for_one(capsys: pytest.CaptureFixture[str]) -> None:
    """Fresh-user trial 47 U12: "exceeds the 1 GPUs of one node" (render --gpus-per-node 1)."""
    configs = REPO / "tests" / "fixtures" / "model-configs"
    example = REPO / "examples" / "llama-3.1-70b-fp8-tp2-h200.yaml"
    assert main(["render", "-f", str(example), "--model-config", str(configs), "--gpus-per-node", "1"]) == 2
    assert "tensor × pipeline = 2 GPUs exceeds the 1 GPU of one node." in capsys.readouterr().err


def test_render_counts_the_batch_warning_in_the_bounded_pool(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Fresh-user trial 47 U8: with maxTokensInPagedKvCache 16,384 render still said "maxBatchSize 256
    exceeds the 61 sequences" (the fraction's pool) while simulate --deployment, on the same input,
    counted the bounded pool: 1 sequence. render now counts it as simulate does."""
    path = tmp_path / "bounded.yaml"
    path.write_text(yaml.safe_dump_all(_bounded(16384)))
    configs = REPO / "tests" / "fixtures" / "model-configs"
    assert main(["render", "-f", str(path), "--model-config", str(configs)]) == 0
    err = capsys.readouterr().err
    assert "maxBatchSize 256 exceeds the 1 sequence of maxSeqLen 16384 tokens the KV cache holds" in err, err
    assert "61 sequences" not in err, err
