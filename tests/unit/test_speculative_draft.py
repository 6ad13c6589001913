"""Draft-target speculative decoding (``draft_tokens_external``, audit A8): the draft model is a
second engine with its own engine key, counted by the planner, built by the builder Job (fetched
with its own credentials and volume) and wired into Triton as upstream wires it.

Upstream, NVIDIA/TensorRT-LLM 1.2 ``examples/draft_target_model/README.md``: both engines are built
with ``--use_paged_context_fmha=enable``, only the target with ``--speculative_decoding_mode
draft_tokens_external --max_draft_len``; the Triton repository copies ``tensorrt_llm`` to
``tensorrt_llm_draft`` (``name: "tensorrt_llm_draft"``, ``engine_dir`` the draft engine,
``enable_kv_cache_reuse:True``) and fills ``tensorrt_llm_bls`` with
``tensorrt_llm_model_name:tensorrt_llm,tensorrt_llm_draft_model_name:tensorrt_llm_draft``; the BLS
reads ``tensorrt_llm_draft_model_name`` (tensorrtllm_backend v0.19.0
``all_models/inflight_batcher_llm/tensorrt_llm_bls/1/model.py``). On main before this change the
builder never fetched the draft model and neither renderer emitted a draft model.
"""

from __future__ import annotations

import copy
import json
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from engine_builder.planner import Architecture, PlanRequest, draft_kv_tokens, lookup, plan
from engine_builder.spec import BuildSpec
from engine_builder.triton import TritonModelParams, render_trtllm_repository
from engine_builder.trtllm_build import trtllm_build_command
from trtllm_operator.decide.engine_spec import InvalidEngine, PreparedEngine, prepare_engine
from trtllm_operator.decide.serving_params import OwnerRef, ServingParams
from trtllm_operator.decide.triton_config import repository_files
from trtllm_operator.render.builder_job import desired_builder_job
from trtllm_operator.settings import Settings

CONFIGS = Path(__file__).resolve().parents[1] / "fixtures" / "model-configs"
LLAMA70B = json.loads((CONFIGS / "meta-llama__Llama-3.1-70B-Instruct.json").read_text())
TINY = json.loads((CONFIGS / "TinyLlama__TinyLlama-1.1B-Chat-v1.0.json").read_text())
PARAM = re.compile(r'parameters: \{ key: "([^"]+)" value: \{ string_value: "([^"]*)" \} \}')
DRAFT = {
    "mode": "draft_tokens_external",
    "maxDraftLen": 4,
    "draftModel": {
        "source": "hf://TinyLlama/TinyLlama-1.1B-Chat-v1.0",
        "credentialsSecretRef": {"name": "d", "key": "t"},
    },
}
ENGINE: dict[str, Any] = {
    "model": {"source": "pvc://models/llama-70b"},
    "runtime": {"image": "nvcr.io/nvidia/tritonserver:26.03-trtllm-python-py3"},
    "quantization": {"format": "fp8", "kvCacheDtype": "fp8"},
    "parallelism": {"tensor": 2},
    "build": {"maxBatchSize": 8, "maxSeqLen": 4096, "speculativeDecoding": DRAFT},
    "gpu": {"product": "NVIDIA-H100-80GB-HBM3"},
    "storage": {"pvc": {"claimName": "engines"}},
}


def prepared(**build: Any) -> PreparedEngine:
    spec = copy.deepcopy(ENGINE)
    spec["build"].update(build)
    result = prepare_engine("llama", spec)
    assert isinstance(result, PreparedEngine), result
    return result


def params_of(text: str) -> dict[str, str]:
    return dict(PARAM.findall(text))


def test_draft_spec_is_its_own_engine_built_like_upstream() -> None:
    spec = prepared().build_spec
    draft = spec.draft_spec()
    assert draft is not None
    assert draft.model.uri == "hf://TinyLlama/TinyLlama-1.1B-Chat-v1.0"
    assert draft.model.token_env == "HF_TOKEN_DRAFT"
    assert draft.engine_key() != spec.engine_key()
    assert draft.quantization == spec.quantization and draft.parallelism == spec.parallelism
    target_cmd = trtllm_build_command(
        spec, {"max_batch_size": 8, "max_seq_len": 4096, "max_num_tokens": 8192}, Path("c"), Path("e")
    )
    draft_cmd = trtllm_build_command(
        draft, {"max_batch_size": 8, "max_seq_len": 4096, "max_num_tokens": 8192}, Path("c"), Path("e")
    )
    assert target_cmd[target_cmd.index("--speculative_decoding_mode") + 1] == "draft_tokens_external"
    assert target_cmd[target_cmd.index("--max_draft_len") + 1] == "4"
    assert "--speculative_decoding_mode" not in draft_cmd and "--max_draft_len" not in draft_cmd
    assert draft_cmd[draft_cmd.index("--use_paged_context_fmha") + 1] == "enable"
    # Other modes have no draft engine.
    lookahead = spec.model_copy(
        update={
            "build": spec.build.model_copy(
                update={
                    "speculative_decoding": spec.build.speculative_decoding.model_copy(
                        update={"mode": "lookahead_decoding", "draft_model": None}
                    )
                }
            )
        }
    )
    assert lookahead.draft_spec() is None
    # The draft model is part of the target's key: another draft is another target engine.
    other = prepared(speculativeDecoding={**DRAFT, "draftModel": {"source": "hf://org/other-draft"}})
    assert other.key != prepared().key


def test_planner_counts_the_draft_engines_weights_and_kv_cache() -> None:
    gpu = lookup("NVIDIA-H100-80GB-HBM3")
    target, draft = Architecture.from_hf_config(LLAMA70B), Architecture.from_hf_config(TINY)
    request = PlanRequest(quantization="fp8", kv_cache_dtype="fp8", tp=2, max_batch_size=8, max_seq_len=4096)
    alone = plan(target, request, gpu)
    both = plan(target, request, gpu, draft=draft)
    assert both.draft is not None and alone.draft is None
    load = both.draft
    assert load.max_kv_tokens == draft_kv_tokens(8, 4096) == 8 * 4096
    assert load.weight_bytes_per_gpu > 0.5e9  # 1.1 B parameters in FP8 over TP 2
    assert load.kv_cache_bytes_per_gpu == load.max_kv_tokens * load.kv_bytes_per_token_per_gpu
    assert alone.free_bytes_per_gpu - both.free_bytes_per_gpu == load.total_bytes_per_gpu
    assert both.max_kv_tokens < alone.max_kv_tokens
    assert both.to_json_dict()["draft"]["max_kv_tokens"] == 8 * 4096
    assert "draft" not in alone.to_json_dict()
    # A draft too large for what is left is reported as not fitting, naming the draft engine.
    huge = plan(target, replace(request, max_seq_len=131072, max_batch_size=64), gpu, draft=target)
    assert not huge.fits and "draft engine" in huge.reasons[0].message


def test_builder_job_fetches_the_draft_with_its_own_credentials_and_volume() -> None:
    job = desired_builder_job(
        {"metadata": {"name": "llama", "namespace": "ml", "uid": "u"}}, prepared(), Settings()
    )
    (c,) = job["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e for e in c["env"]}
    assert env["HF_TOKEN_DRAFT"]["valueFrom"]["secretKeyRef"] == {"name": "d", "key": "t"}
    pvc_draft = prepared(speculativeDecoding={**DRAFT, "draftModel": {"source": "pvc://drafts/tiny"}})
    job = desired_builder_job(
        {"metadata": {"name": "llama", "namespace": "ml", "uid": "u"}}, pvc_draft, Settings()
    )
    claims = {
        v["persistentVolumeClaim"]["claimName"]
        for v in job["spec"]["template"]["spec"]["volumes"]
        if "persistentVolumeClaim" in v
    }
    assert {"models", "drafts"} <= claims
    (c,) = job["spec"]["template"]["spec"]["containers"]
    assert "/models/drafts" in {m["mountPath"] for m in c["volumeMounts"]}


def test_draft_s3_secret_that_clashes_is_refused() -> None:
    spec = copy.deepcopy(ENGINE)
    spec["model"] = {
        "source": "s3://bucket/llama",
        "credentialsSecretRef": {"name": "a", "key": "AWS_ACCESS_KEY_ID"},
    }
    spec["build"]["speculativeDecoding"] = {
        **DRAFT,
        "draftModel": {
            "source": "s3://bucket/draft",
            "credentialsSecretRef": {"name": "b", "key": "AWS_ACCESS_KEY_ID"},
        },
    }
    result = prepare_engine("llama", spec)
    assert isinstance(result, InvalidEngine)
    assert result.field == "spec.build.speculativeDecoding.draftModel.credentialsSecretRef"
    assert "'b'" in result.message and "'a'" in result.message


def test_renderer_wires_the_draft_model_as_upstream() -> None:
    params = TritonModelParams(
        engine_dir="/a/engine",
        tokenizer_dir="/a/tokenizer",
        include_bls=True,
        draft_engine_dir="/a/draft/engine",
        draft_max_tokens_in_paged_kv_cache=4096,
        kv_cache_free_gpu_mem_fraction=0.85,
    )
    files = render_trtllm_repository(params)
    draft = files["tensorrt_llm_draft/config.pbtxt"]
    target = files["tensorrt_llm/config.pbtxt"]
    assert 'name: "tensorrt_llm_draft"\n' in draft and 'name: "tensorrt_llm"\n' not in draft
    dp, tp = params_of(draft), params_of(target)
    assert dp["gpt_model_path"] == "/a/draft/engine" and tp["gpt_model_path"] == "/a/engine"
    assert dp["max_tokens_in_paged_kv_cache"] == "4096" and "max_tokens_in_paged_kv_cache" not in tp
    assert dp["enable_kv_cache_reuse"] == "true"
    # Everything else is the target's file (upstream copies tensorrt_llm).
    assert {k: v for k, v in dp.items() if k not in ("gpt_model_path", "max_tokens_in_paged_kv_cache")} == {
        k: v for k, v in tp.items() if k != "gpt_model_path"
    }
    bls = params_of(files["tensorrt_llm_bls/config.pbtxt"])
    assert bls["tensorrt_llm_model_name"] == "tensorrt_llm"
    assert bls["tensorrt_llm_draft_model_name"] == "tensorrt_llm_draft"
    assert files["tensorrt_llm_draft/1/.gitkeep"] == ""
    with pytest.raises(ValueError, match="include_bls"):
        TritonModelParams(engine_dir="/a/engine", tokenizer_dir="/t", draft_engine_dir="/a/draft/engine")


def served(**fields: Any) -> ServingParams:
    """The ServingParams of deployment ``d`` serving engine ``e`` (key ``c…c``, TensorRT, one H100)
    from claim ``pvc``, with ``fields``."""
    return ServingParams(
        name="d",
        namespace="ns",
        owner=OwnerRef("d", "u"),
        engine_name="e",
        engine_key="c" * 64,
        backend="tensorrt",
        image="img",
        gpu_product="NVIDIA-H100-80GB-HBM3",
        artifact_claim="pvc",
        artifact_sub_path="c" * 64,
        **fields,
    )


def test_operator_serves_the_draft_engine_behind_the_bls() -> None:
    base = served(max_batch_size=8, max_seq_len=4096, speculative_mode="draft_tokens_external")
    files = repository_files(base)
    draft = params_of(files["tensorrt_llm_draft/config.pbtxt"])
    assert draft["gpt_model_path"] == "/artifact/draft/engine"
    assert draft["max_tokens_in_paged_kv_cache"] == str(draft_kv_tokens(8, 4096))
    assert (
        params_of(files["tensorrt_llm_bls/config.pbtxt"])["tensorrt_llm_draft_model_name"]
        == "tensorrt_llm_draft"
    )
    plain = repository_files(replace(base, speculative_mode="none"))
    assert "tensorrt_llm_draft/config.pbtxt" not in plain and "tensorrt_llm_bls/config.pbtxt" not in plain


def test_build_spec_round_trips_with_a_draft() -> None:
    spec = prepared().build_spec
    again = BuildSpec.model_validate(spec.model_dump(mode="json"))
    assert again.engine_key() == spec.engine_key()
    assert again.draft_spec() == spec.draft_spec()


@pytest.mark.parametrize(
    ("mode", "backend", "field", "needle"),
    [
        ("medusa", "tensorrt", "build.speculative_decoding.mode", "examples/medusa/convert_checkpoint.py"),
        ("eagle", "tensorrt", "build.speculative_decoding.mode", "examples/eagle/convert_checkpoint.py"),
        ("draft_tokens_external", "pytorch", "build.speculative_decoding.mode", "speculative_config"),
    ],
)
def test_builder_refuses_what_it_cannot_build(mode: str, backend: str, field: str, needle: str) -> None:
    """Audit A8: on main a medusa/eagle spec compiled an engine without heads; now BadSpec."""
    from engine_builder.pipeline import _check_speculative  # noqa: PLC0415
    from engine_builder.report import BuildError  # noqa: PLC0415

    spec = prepared().build_spec
    sd = spec.build.speculative_decoding.model_copy(update={"mode": mode})
    bad = spec.model_copy(
        update={"backend": backend, "build": spec.build.model_copy(update={"speculative_decoding": sd})}
    )
    with pytest.raises(BuildError) as info:
        _check_speculative(bad)
    assert info.value.reason == "BadSpec" and info.value.field == field and needle in info.value.message
    _check_speculative(spec)  # draft_tokens_external on tensorrt is built


LOOKAHEAD = {
    "mode": "lookahead_decoding",
    "lookahead": {"windowSize": 7, "ngramSize": 7, "verificationSetSize": 7},
}


@pytest.mark.parametrize(
    ("w", "n", "g", "expected"),
    # (7, 7, 7) → 83: NVIDIA/TensorRT-LLM 1.2 examples/lookahead/README.md builds with
    # --max_draft_len=83 for --lookahead_config=[7,7,7]; the others by the formula of
    # executor/decodingConfig.cpp calculateSpeculativeResourceTuple.
    [(7, 7, 7, 83), (4, 3, 4, 15), (1, 1, 0, 0), (2, 2, 1, 2)],
)
def test_lookahead_max_draft_len_is_derived_as_upstream(w: int, n: int, g: int, expected: int) -> None:
    from engine_builder.spec import lookahead_max_draft_len  # noqa: PLC0415

    assert lookahead_max_draft_len(w, n, g) == expected


def test_lookahead_reaches_the_engine_and_the_runtime() -> None:
    """On main the LLMEngine had no (W, N, G): the engine got no derived max_draft_len and the
    tensorrt_llm model decoding_mode lookahead without lookahead_window_size / _ngram_size /
    _verification_set_size, which the backend refuses ("Decoding mode is set to lookahead but
    lookahead parameters are not specified", tensorrtllm_backend v0.19.0
    inflight_batcher_llm/src/model_instance_state.cc)."""
    from engine_builder.package import triton_params  # noqa: PLC0415

    spec = copy.deepcopy(ENGINE)
    spec["build"]["speculativeDecoding"] = LOOKAHEAD
    result = prepare_engine("llama", spec)
    assert isinstance(result, PreparedEngine), result
    build = result.build_spec
    cmd = trtllm_build_command(
        build, {"max_batch_size": 8, "max_seq_len": 4096, "max_num_tokens": 8192}, Path("c"), Path("e")
    )
    assert cmd[cmd.index("--speculative_decoding_mode") + 1] == "lookahead_decoding"
    assert cmd[cmd.index("--max_draft_len") + 1] == "83"
    assert build.draft_spec() is None
    for files in (
        render_trtllm_repository(triton_params(build, {"max_batch_size": 8}, "/a")),
        repository_files(served(speculative_mode="lookahead_decoding", lookahead=(7, 7, 7))),
    ):
        p = params_of(files["tensorrt_llm/config.pbtxt"])
        assert p["decoding_mode"] == "lookahead"
        assert (
            p["lookahead_window_size"],
            p["lookahead_ngram_size"],
            p["lookahead_verification_set_size"],
        ) == (
            "7",
            "7",
            "7",
        )
    # The build spec refuses a max_draft_len that does not match (W, N, G).
    sd = build.build.speculative_decoding
    with pytest.raises(ValueError, match="max_draft_len 4 is not the 83"):
        type(sd).model_validate({**sd.model_dump(), "max_draft_len": 4})
    # Engines without lookahead keep their keys (no "lookahead": null among the key inputs).
    assert "lookahead" not in prepared().build_spec.key_inputs()["build"]["speculative_decoding"]
