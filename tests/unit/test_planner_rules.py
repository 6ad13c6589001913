"""validate(): the rules that need the GPU catalog, each naming the API field and the fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine_builder.planner import (
    Architecture,
    PlanInputError,
    PlanRequest,
    load_hf_config,
    lookup,
    plan,
    validate,
)

CONFIGS = Path(__file__).resolve().parents[1] / "fixtures" / "model-configs"
LLAMA_70B = "meta-llama__Llama-3.1-70B-Instruct.json"
QWEN_7B = "Qwen__Qwen2.5-7B-Instruct.json"
MIXTRAL = "mistralai__Mixtral-8x7B-v0.1.json"
QWEN_MOE = "Qwen__Qwen1.5-MoE-A2.7B-Chat.json"
DEEPSEEK = "deepseek-ai__DeepSeek-V3.json"
H100 = "NVIDIA-H100-80GB-HBM3"
A100 = "NVIDIA-A100-SXM4-80GB"


def fields(config: str, gpu: str, **request: object) -> list[str]:
    arch = Architecture.from_hf_config(load_hf_config(CONFIGS / config))
    issues = validate(arch, PlanRequest(**request), lookup(gpu))
    for issue in issues:
        assert issue.message and issue.fix and issue.kind == "invalid"
    return [i.field for i in issues]


@pytest.mark.parametrize(
    ("config", "gpu", "request_fields", "expected"),
    [
        # Formats need the right SM.
        (LLAMA_70B, A100, {"quantization": "fp8", "tp": 4}, ["spec.quantization.format"]),
        (LLAMA_70B, A100, {"quantization": "w4a8_awq", "tp": 4}, ["spec.quantization.format"]),
        (LLAMA_70B, A100, {"quantization": "int4_awq", "tp": 4}, []),
        (LLAMA_70B, A100, {"quantization": "int8_sq", "tp": 4}, []),
        # … and the format keeps paged context FMHA with an FP8 KV cache only if fp8, w4a8_awq or nvfp4;
        # an INT8 KV cache turns it off whatever the format (the API's rules at the default
        # build.pagedContextFMHA: true; fresh-user trial 51 Y6: plan answered "fits").
        (
            LLAMA_70B,
            A100,
            {"kv_cache_dtype": "fp8", "tp": 4},
            ["spec.quantization.format", "spec.quantization.kvCacheDtype"],
        ),
        (LLAMA_70B, A100, {"kv_cache_dtype": "int8", "tp": 4}, ["spec.quantization.kvCacheDtype"]),
        (LLAMA_70B, A100, {"kv_cache_dtype": "int8", "tp": 4, "paged_context_fmha": False}, []),
        (
            LLAMA_70B,
            H100,
            {"quantization": "int4_awq", "kv_cache_dtype": "fp8"},
            ["spec.quantization.format"],
        ),
        (LLAMA_70B, H100, {"quantization": "w4a8_awq", "kv_cache_dtype": "fp8"}, []),
        (LLAMA_70B, H100, {"kv_cache_dtype": "fp8", "tp": 4, "backend": "pytorch"}, []),
        (LLAMA_70B, "NVIDIA-L40S", {"quantization": "fp8", "tp": 4}, []),
        (LLAMA_70B, H100, {"quantization": "nvfp4", "tp": 4}, ["spec.quantization.format"]),
        (
            LLAMA_70B,
            H100,
            {"quantization": "mxfp8", "tp": 4, "backend": "pytorch"},
            ["spec.quantization.format"],
        ),
        (LLAMA_70B, "NVIDIA-B200", {"quantization": "nvfp4", "tp": 4}, []),
        (LLAMA_70B, "NVIDIA-GB200", {"quantization": "mxfp8", "tp": 4, "backend": "pytorch"}, []),
        # mxfp8 only on the pytorch backend, as the LLMEngine API says (fresh-user trial 48 V5: plan
        # answered "fits" for the default backend tensorrt).
        (LLAMA_70B, "NVIDIA-GB200", {"quantization": "mxfp8", "tp": 4}, ["spec.quantization.format"]),
        # TensorRT-LLM's builder raises on SM 100-119 for INT4 weight-only, SmoothQuant, INT8 KV.
        (LLAMA_70B, "NVIDIA-B200", {"quantization": "int8_sq", "tp": 4}, ["spec.quantization.format"]),
        (LLAMA_70B, "NVIDIA-B200", {"quantization": "int4_awq", "tp": 4}, ["spec.quantization.format"]),
        (
            LLAMA_70B,
            "NVIDIA-GB200",
            {"kv_cache_dtype": "int8", "tp": 4, "paged_context_fmha": False},
            ["spec.quantization.kvCacheDtype"],
        ),
        (LLAMA_70B, "NVIDIA-B200", {"quantization": "fp8", "kv_cache_dtype": "fp8", "tp": 4}, []),
        # maxNumTokens below one KV block.
        (LLAMA_70B, H100, {"tp": 4, "max_num_tokens": 1}, ["spec.build.maxNumTokens"]),
        (LLAMA_70B, H100, {"tp": 4, "max_num_tokens": 32}, []),
        (
            LLAMA_70B,
            H100,
            {"tp": 4, "max_num_tokens": 63, "tokens_per_block": 64},
            ["spec.build.maxNumTokens"],
        ),
        (
            LLAMA_70B,
            H100,
            {"quantization": "int4_awq", "awq_block_size": 32},
            ["spec.quantization.awqBlockSize"],
        ),
        # TP divides the heads (64) and divides or is a multiple of the KV heads (8).
        (LLAMA_70B, H100, {"tp": 3}, ["spec.parallelism.tensor", "spec.parallelism.tensor"]),
        (LLAMA_70B, H100, {"tp": 16, "multi_node": True}, []),  # KV heads replicated ×2
        (LLAMA_70B, H100, {"tp": 16}, ["spec.parallelism"]),  # 16 GPUs > one 8-GPU node
        (LLAMA_70B, H100, {"tp": 4, "pp": 4, "gpus_per_node": 16}, []),
        (QWEN_7B, H100, {"tp": 8}, ["spec.parallelism.tensor"]),  # 28 heads
        (QWEN_7B, H100, {"tp": 7}, ["spec.parallelism.tensor"]),  # 4 KV heads: neither divides
        (QWEN_7B, H100, {"tp": 4}, []),
        # PP ≤ layers (Qwen2.5-7B: 28). Llama 3.1 70B's 80 layers are above the API's pp limit of 64,
        # which PlanRequest refuses first (test_planner_interface, fresh-user trial 40 F3).
        (QWEN_7B, H100, {"pp": 29, "multi_node": True}, ["spec.parallelism.pipeline"]),
        (QWEN_7B, H100, {"pp": 28, "multi_node": True}, []),
        # EP: MoE only, divides the experts and the TP size (on pytorch: tensorrt refuses EP > 1, below).
        (LLAMA_70B, H100, {"tp": 2, "ep": 2}, ["spec.parallelism.expert"]),
        (MIXTRAL, H100, {"tp": 2, "ep": 2, "backend": "pytorch"}, []),
        (MIXTRAL, H100, {"tp": 2, "ep": 4, "backend": "pytorch"}, ["spec.parallelism.expert"]),
        (QWEN_MOE, H100, {"tp": 8, "ep": 8, "backend": "pytorch"}, ["spec.parallelism.expert"]),  # 60 experts
        (QWEN_MOE, H100, {"tp": 4, "ep": 4, "backend": "pytorch"}, []),
        # tensorrt: no expert parallelism, the LLMEngine API's rule (trial 50 X5); a dense model gets
        # only the MoE rule (its fix, expert 1, is the whole story).
        (MIXTRAL, H100, {"tp": 2, "ep": 2}, ["spec.parallelism.expert"]),
        (LLAMA_70B, H100, {"tp": 2, "ep": 2, "backend": "tensorrt"}, ["spec.parallelism.expert"]),
        # MLA has no per-head KV cache: any TP dividing the 128 heads is fine.
        (DEEPSEEK, "NVIDIA-B200", {"tp": 8, "quantization": "fp8"}, []),
    ],
)
def test_rules(config: str, gpu: str, request_fields: dict[str, object], expected: list[str]) -> None:
    assert fields(config, gpu, **request_fields) == expected


@pytest.mark.parametrize("backend", ["tensorrt", "pytorch"])
@pytest.mark.parametrize("gpu", [A100, H100, "NVIDIA-B200"])
def test_format_fixes_offer_only_formats_the_backend_builds(gpu: str, backend: str) -> None:
    """Fresh-user trial 49 W4: ``plan --gpu H100 --quantization mxfp8 --backend pytorch`` offered "use
    one of none, fp8, int8_sq, …", and int8_sq then met the backend's refusal. Every format a format
    refusal offers (the SM rule's and the SM 100–119 rule's) now passes validate() on this GPU and
    backend."""
    from engine_builder.planner.formats import QUANT_FORMATS  # noqa: PLC0415

    arch = Architecture.from_hf_config(load_hf_config(CONFIGS / LLAMA_70B))
    spec = lookup(gpu)
    offered_any = False
    for fmt in QUANT_FORMATS:
        for issue in validate(arch, PlanRequest(quantization=fmt, tp=4, backend=backend), spec):
            if issue.field != "spec.quantization.format" or not issue.fix.startswith("use one of "):
                continue
            offered = issue.fix.removeprefix("use one of ").split(" on this GPU")[0].split(", ")
            offered_any = True
            for choice in offered:
                again = validate(arch, PlanRequest(quantization=choice, tp=4, backend=backend), spec)
                assert [i for i in again if i.field == "spec.quantization.format"] == [], (fmt, choice, again)
    assert offered_any


def test_fix_lists_valid_tensor_parallelism() -> None:
    """Qwen2.5-7B's config.json: 28 attention heads, 4 KV heads. 7 divides 28 but fits neither
    KV-head rule, so it is not offered (a fresh-user trial followed the fix to TP 7 and was refused)."""
    arch = Architecture.from_hf_config(load_hf_config(CONFIGS / QWEN_7B))
    assert (arch.num_attention_heads, arch.num_kv_heads) == (28, 4)
    for tp in (3, 8):
        issues = validate(arch, PlanRequest(tp=tp), lookup(H100))
        assert issues and all("[1, 2, 4]." in i.fix for i in issues), issues
    # every value offered passes the rules it was offered for
    for offered in (1, 2, 4):
        assert not [i for i in validate(arch, PlanRequest(tp=offered), lookup(H100)) if "tensor" in i.field]
    assert [i.field for i in validate(arch, PlanRequest(tp=7), lookup(H100))] == ["spec.parallelism.tensor"]


@pytest.mark.parametrize(
    ("request_fields", "field"),
    [
        ({"tokens_per_block": 7}, "tokensPerBlock"),
        ({"tokens_per_block": 48}, "tokensPerBlock"),
        ({"tokens_per_block": 2048}, "tokensPerBlock"),
        ({"max_seq_len": 99_999_999_999}, "spec.build.maxSeqLen"),
        ({"max_num_tokens": 2_000_000}, "spec.build.maxNumTokens"),
    ],
)
def test_request_bounds_are_bad_input(request_fields: dict[str, object], field: str) -> None:
    with pytest.raises(PlanInputError) as err:
        PlanRequest(**request_fields)  # type: ignore[arg-type]
    assert err.value.field == field


@pytest.mark.parametrize("tokens_per_block", [1, 8, 32, 64, 128, 1024])
def test_tokens_per_block_powers_of_two_accepted(tokens_per_block: int) -> None:
    assert PlanRequest(tokens_per_block=tokens_per_block).tokens_per_block == tokens_per_block


@pytest.mark.parametrize(
    ("overrides", "message_part"),
    [
        ({"num_key_value_heads": 5}, "does not divide num_attention_heads 64"),
        ({"num_key_value_heads": 3}, "does not divide num_attention_heads 64"),
    ],
)
def test_kv_heads_must_divide_attention_heads(overrides: dict[str, object], message_part: str) -> None:
    config = {**load_hf_config(CONFIGS / LLAMA_70B), **overrides}
    with pytest.raises(PlanInputError) as err:
        Architecture.from_hf_config(config)
    assert err.value.field == "num_key_value_heads"
    assert message_part in err.value.message


# -- the one-node rule names the smallest fitting alternative (fresh-user trial 46 T6) ----------------
LLAMA_8B = "meta-llama__Llama-3.1-8B-Instruct.json"


def _one_node_fix(config: str, gpu: str, **request: object) -> str:
    arch = Architecture.from_hf_config(load_hf_config(CONFIGS / config))
    result = plan(arch, PlanRequest(**request), lookup(gpu))
    (issue,) = [r for r in result.reasons if r.field == "spec.parallelism"]
    return issue.fix


@pytest.mark.parametrize(
    ("config", "request_fields", "named"),
    [
        # The trial's spec: Llama-3.1-8B FP8 at tensor 16 on 8-GPU H100 nodes; one GPU holds it.
        (LLAMA_8B, {"quantization": "fp8", "tp": 16}, "tensor 1 × pipeline 1 = 1 GPU,"),
        # 70B in 16-bit needs two H100s; at equal size the pipeline the user asked for is kept.
        (LLAMA_70B, {"tp": 16}, "tensor 2 × pipeline 1 = 2 GPUs,"),
        (LLAMA_70B, {"tp": 8, "pp": 2}, "tensor 1 × pipeline 2 = 2 GPUs,"),
    ],
)
def test_a_layout_beyond_one_node_names_the_smallest_fitting_one(
    config: str, request_fields: dict[str, object], named: str
) -> None:
    """docs/api.md spec.parallelism.multiNode: "without it the operator refuses such a layout and names
    the smallest fitting alternative"; the fix said only "lower tensor/pipeline parallelism"."""
    fix = _one_node_fix(config, H100, **request_fields)
    assert f"lower tensor/pipeline parallelism to {named} the smallest layout that fits" in fix, fix
    assert "on one 8-GPU node, or set spec.parallelism.multiNode: true" in fix, fix
    # what it names does fit on one node
    layout = fix.split("to tensor ", 1)[1]
    tp, pp = int(layout.split(" ", 1)[0]), int(layout.split("pipeline ", 1)[1].split(" ", 1)[0])
    arch = Architecture.from_hf_config(load_hf_config(CONFIGS / config))
    fields = {**request_fields, "tp": tp, "pp": pp}
    assert tp * pp <= 8 and plan(arch, PlanRequest(**fields), lookup(H100)).fits  # type: ignore[arg-type]


def test_a_layout_beyond_one_node_that_nothing_of_one_node_fits_says_so() -> None:
    """DeepSeek-V3 (671 B) in 16-bit fits on no 8 × L4 node: the fix says so and names multiNode."""
    fix = _one_node_fix(DEEPSEEK, "NVIDIA-L4", tp=16)
    assert fix.startswith("no layout of at most 8 GPUs (one node) fits this model in memory: set "), fix


def test_a_layout_beyond_one_node_with_another_rule_broken_gives_the_bound() -> None:
    """With another rule broken too (FP8 on an A100), no layout is planned: the bound alone."""
    fix = _one_node_fix(LLAMA_8B, A100, quantization="fp8", tp=16)
    assert fix.startswith("lower tensor/pipeline parallelism to at most 8 GPUs per replica, or set "), fix
