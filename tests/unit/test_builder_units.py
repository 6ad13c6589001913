"""engine_builder: pure pieces of the pipeline — source URIs, disk preflight, report/exit codes,
trtllm-build flags and log classification, progress/ETA, spec-vs-model rules."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import httpx2  # huggingface_hub's HTTP client
import pytest
from botocore.exceptions import ClientError, EndpointConnectionError, NoCredentialsError
from huggingface_hub import errors
from support.hub import HubRepo, local_hub

from engine_builder.fetch import (
    SourceRef,
    _classify_hf,
    _classify_s3,
    check_disk,
    fetch,
    parse_source,
    required_disk_bytes,
    wanted,
)
from engine_builder.pipeline import STAGES, _check_spec_against_model, load_spec
from engine_builder.progress import Progress
from engine_builder.report import (
    DETERMINISTIC_REASONS,
    EXIT_CODES,
    MAX_REPORT_BYTES,
    BuildError,
    build_report,
    exit_code_for,
)
from engine_builder.spec import BuildSpec
from engine_builder.trtllm_build import classify_build_log, trtllm_build_command


def a_spec(**overrides: Any) -> BuildSpec:
    data: dict[str, Any] = {
        "model": {"uri": "hf://org/model", "revision": "abc"},
        "runtime_image": "nvcr.io/nvidia/tritonserver:25.05-trtllm-python-py3",
        "target": {"gpu_product": "NVIDIA-H100-80GB-HBM3", "sm": 90},
    }
    for key, value in overrides.items():
        data[key] = value
    return BuildSpec.model_validate(data)


TINY = {
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "num_hidden_layers": 2,
    "hidden_size": 128,
    "intermediate_size": 256,
}


@pytest.mark.parametrize(
    ("uri", "expected"),
    [
        ("hf://meta-llama/Llama-3.1-8B", SourceRef("hf", "meta-llama/Llama-3.1-8B")),
        ("pvc://models/llama/8b", SourceRef("pvc", "/mnt/m/models/llama/8b")),
        ("s3://bucket/some/prefix/", SourceRef("s3", "bucket", "some/prefix/")),
        ("s3://bucket", SourceRef("s3", "bucket", "")),
        ("/data/llama", SourceRef("local", "/data/llama")),
    ],
)
def test_parse_source(uri: str, expected: SourceRef) -> None:
    assert parse_source(uri, pvc_root="/mnt/m") == expected


@pytest.mark.parametrize("uri", ["gs://bucket/x", "hf://", "hf://a/b/c", "s3:///prefix", "pvc://"])
def test_bad_source_uri_is_bad_spec(uri: str) -> None:
    with pytest.raises(BuildError) as info:
        parse_source(uri)
    assert info.value.reason == "BadSpec"
    assert info.value.field == "model.uri"


@pytest.mark.parametrize(
    ("name", "fetched"),
    [
        ("model-00001-of-00004.safetensors", True),
        ("model.safetensors.index.json", True),
        ("config.json", True),
        ("tokenizer.json", True),
        ("sub/tokenizer.model", True),
        ("pytorch_model.bin", False),
        ("original/consolidated.00.pth", False),
        ("README.md", False),
    ],
)
def test_allow_patterns(name: str, fetched: bool) -> None:
    assert wanted(name) is fetched


def test_disk_preflight() -> None:
    need = required_disk_bytes(10 << 30, downloads=True)
    assert need == 2 * (10 << 30) + (256 << 20)
    assert required_disk_bytes(10 << 30, downloads=False) < need
    check_disk(need, need, "/w")
    with pytest.raises(BuildError) as info:
        check_disk(need, need - 1, "/w")
    assert info.value.reason == "InsufficientDisk"
    assert "GiB needed" in info.value.message


def test_exit_codes_are_distinct_and_safe() -> None:
    codes = list(EXIT_CODES.values())
    assert len(codes) == len(set(codes))
    assert all(1 <= c < 126 for c in codes)
    assert set(EXIT_CODES) >= DETERMINISTIC_REASONS
    for reason in ("BadSpec", "AuthFailed", "UnsupportedArchitecture", "DoesNotFit", "ToolchainMissing"):
        assert reason in DETERMINISTIC_REASONS
    for reason in ("DownloadFailed", "Timeout", "CompileFailed", "InternalError"):
        assert reason not in DETERMINISTIC_REASONS


@pytest.mark.parametrize(
    ("status", "reason", "code"),
    [
        ("Succeeded", None, 0),
        ("Partial", "CompileSkipped", 0),
        ("Failed", "BadSpec", 10),
        ("Failed", "ToolchainMissing", 16),
        ("Failed", "SomethingNew", 1),
    ],
)
def test_exit_code_for(status: Any, reason: str | None, code: int) -> None:
    assert exit_code_for(status, reason) == code


def test_report_is_compact_and_bounded() -> None:
    report = build_report(
        status="Failed",
        reason="CompileFailed",
        message="x" * 20000 + " the real error at the end",
        stage="compile",
        engine_key="k" * 64,
        stage_timings={s: 1.23456 for s in STAGES},
    )
    encoded = json.dumps(report, separators=(",", ":")).encode()
    assert len(encoded) <= MAX_REPORT_BYTES
    assert report["message"].endswith("the real error at the end")
    assert report["exitCode"] == 17
    assert report["retryable"] is True
    assert report["stageTimings"]["fetch"] == 1.235
    ok = build_report(status="Succeeded", engine_key="k", manifest_digest="sha256:x")
    assert "reason" not in ok and "retryable" not in ok


def test_trtllm_build_command_sets_limits_and_flags() -> None:
    spec = a_spec(
        build={
            "max_input_len": 4096,
            "gemm_plugin": "auto",
            "paged_context_fmha": False,
            "workers": 2,
            "speculative_decoding": {"mode": "medusa", "max_draft_len": 63},
        }
    )
    limits = {"max_batch_size": 64, "max_seq_len": 8192, "max_num_tokens": 16384}
    cmd = trtllm_build_command(spec, limits, Path("/w/ckpt"), Path("/w/engine"))
    args = dict(zip(cmd[1::2], cmd[2::2], strict=False))
    assert cmd[0] == "trtllm-build"
    assert args["--checkpoint_dir"] == "/w/ckpt"
    assert args["--output_dir"] == "/w/engine"
    assert (args["--max_batch_size"], args["--max_seq_len"], args["--max_num_tokens"]) == (
        "64",
        "8192",
        "16384",
    )
    assert args["--max_input_len"] == "4096"
    assert args["--use_paged_context_fmha"] == "disable"
    assert args["--kv_cache_type"] == "paged"
    assert args["--workers"] == "2"
    assert args["--speculative_decoding_mode"] == "medusa"
    assert args["--max_draft_len"] == "63"
    assert "--tp_size" not in cmd  # parallelism is the checkpoint's mapping


def test_trtllm_build_command_defaults() -> None:
    limits = {"max_batch_size": 8, "max_seq_len": 512, "max_num_tokens": 2048}
    cmd = trtllm_build_command(a_spec(), limits, Path("c"), Path("e"))
    assert "--max_input_len" not in cmd
    assert "--speculative_decoding_mode" not in cmd
    assert cmd[cmd.index("--use_paged_context_fmha") + 1] == "enable"


@pytest.mark.parametrize(
    ("lines", "rc", "reason"),
    [
        (["[TRT] [E] 2: [virtualMemoryBuffer.cpp] CUDA_ERROR_OUT_OF_MEMORY"], 1, "GPUOutOfMemory"),
        (["torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"], 1, "GPUOutOfMemory"),
        (["terminate called after throwing an instance of 'std::bad_alloc'"], -6, "HostOutOfMemory"),
        (["RuntimeError: No CUDA GPUs are available"], 1, "RequiresGPU"),
        (["ValueError: Unsupported architecture: FooForCausalLM"], 1, "UnsupportedArchitecture"),
        (["building rank 0"], -9, "HostOutOfMemory"),
        (["AssertionError: something else"], 1, "CompileFailed"),
    ],
)
def test_classify_build_log(lines: list[str], rc: int, reason: str) -> None:
    assert classify_build_log(lines, rc) == reason


def test_progress_eta_and_file(tmp_path: Path) -> None:
    now = [100.0]
    out = io.StringIO()
    progress = Progress(
        tmp_path / "progress.json", STAGES, stream=out, clock=lambda: now[0], min_interval_s=0
    )
    progress.start("quantize")
    now[0] = 110.0
    progress.update(25, 100, "samples", "calibrating")
    state = json.loads((tmp_path / "progress.json").read_text())
    assert state["stage"] == "quantize"
    assert state["stageIndex"] == STAGES.index("quantize") + 1
    assert state["stagePercent"] == 25.0
    assert state["etaSeconds"] == 30.0  # 10 s for 25 → 30 s for the remaining 75
    assert state["percent"] == round(100 * (3 + 0.25) / len(STAGES), 1)
    assert "ETA 30s" in out.getvalue()


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        (
            {"quantization": {"format": "int4_awq", "awq_block_size": 128}, "parallelism": {"tensor": 2}},
            "quantization.awq_block_size",
        ),
        (
            {"backend": "pytorch", "quantization": {"format": "fp8", "kv_cache_dtype": "int8"}},
            "quantization.kv_cache_dtype",
        ),
        ({"quantization": {"format": "mxfp8"}}, "quantization.format"),
        # Audit B8: ModelOpt 0.47 export_tensorrt_llm_checkpoint writes mapping.moe_ep_size 1
        # (modelopt/torch/export/tensorrt_llm_utils.py), so a tensorrt engine is never expert-parallel.
        ({"parallelism": {"tensor": 2, "expert": 2}}, "parallelism.expert"),
    ],
)
def test_spec_against_model_rules(overrides: dict[str, Any], field: str) -> None:
    with pytest.raises(BuildError) as info:
        _check_spec_against_model(a_spec(**overrides), TINY)
    assert info.value.reason == "BadSpec"
    assert info.value.field == field


@pytest.mark.parametrize(
    "overrides",
    [
        {"parallelism": {"tensor": 2}},
        {"parallelism": {"tensor": 4}},  # KV heads replicated (tp multiple of kv heads)
        {"parallelism": {"pipeline": 2}},
        {"quantization": {"format": "int4_awq", "awq_block_size": 64}, "parallelism": {"tensor": 2}},
        {"backend": "pytorch", "parallelism": {"tensor": 2, "expert": 2}},  # moe_expert_parallel_size
    ],
)
def test_spec_against_model_accepts(overrides: dict[str, Any]) -> None:
    _check_spec_against_model(a_spec(**overrides), TINY)


def test_load_spec_names_the_bad_field(tmp_path: Path) -> None:
    path = tmp_path / "build.yaml"
    path.write_text(
        "model: {uri: /m}\nruntime_image: img\ntarget: {gpu_product: NVIDIA-H100-80GB-HBM3, sm: 90}\n"
        "quantization: {format: fp16}\n"
    )
    with pytest.raises(BuildError) as info:
        load_spec(path)
    assert info.value.reason == "BadSpec"
    assert info.value.field == "quantization.format"
    path.write_text("model: [unclosed\n")
    with pytest.raises(BuildError, match="not valid YAML"):
        load_spec(path)


def _hf_error(cls_name: str, status: int) -> Exception:
    request = httpx2.Request("GET", "https://huggingface.co/api/models/org/model")
    cls = getattr(errors, cls_name)
    return cls("boom", response=httpx2.Response(status, request=request))


@pytest.mark.parametrize(
    ("cls_name", "status", "reason", "field"),
    [
        ("GatedRepoError", 403, "AuthFailed", None),
        ("RepositoryNotFoundError", 401, "ModelNotFound", "model.uri"),
        ("RevisionNotFoundError", 404, "ModelNotFound", "model.revision"),
        ("HfHubHTTPError", 401, "AuthFailed", None),
        ("HfHubHTTPError", 403, "AuthFailed", None),
        ("HfHubHTTPError", 503, "DownloadFailed", None),
    ],
)
def test_hf_failures_are_classified(cls_name: str, status: int, reason: str, field: str | None) -> None:
    err = _classify_hf(_hf_error(cls_name, status), SourceRef("hf", "org/model"), "main")
    assert (err.reason, err.field) == (reason, field)


def test_hf_network_error_is_download_failed() -> None:
    assert _classify_hf(ConnectionError("refused"), SourceRef("hf", "org/m"), None).reason == "DownloadFailed"


@pytest.mark.parametrize(
    ("code", "reason"),
    [
        ("NoSuchBucket", "ModelNotFound"),
        ("AccessDenied", "AuthFailed"),
        ("InvalidAccessKeyId", "AuthFailed"),
        ("SignatureDoesNotMatch", "AuthFailed"),
        ("SlowDown", "DownloadFailed"),
    ],
)
def test_s3_client_errors_are_classified(code: str, reason: str) -> None:
    exc = ClientError({"Error": {"Code": code, "Message": "x"}}, "ListObjectsV2")
    assert _classify_s3(exc, "s3://b/p/").reason == reason


def test_s3_credentials_and_endpoint_errors_are_classified() -> None:
    assert _classify_s3(NoCredentialsError(), "s3://b/").reason == "AuthFailed"
    assert _classify_s3(EndpointConnectionError(endpoint_url="http://127.0.0.1:1"), "s3://b/").reason == (
        "DownloadFailed"
    )


#: The builder's Hub downloads run against tests/support/hub.py (the Hub's resolve and model-info
#: routes, token checks) through the real huggingface_hub client, at HF_ENDPOINT.
SHA = HubRepo({}).commit


def _files(sizes: dict[str, int]) -> dict[str, bytes]:
    return {name: bytes([65 + i % 26]) * size for i, (name, size) in enumerate(sizes.items())}


def test_hf_fetch_pins_the_revision_filters_files_and_passes_the_token(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    files = _files(
        {
            "config.json": 10,
            "model-00001-of-00002.safetensors": 100,
            "model-00002-of-00002.safetensors": 50,
            "model.safetensors.index.json": 5,
            "tokenizer.json": 20,
            "pytorch_model.bin": 150,
            "README.md": 3,
        }
    )
    with local_hub({"org/model": HubRepo(files, token="hf_secret")}) as hub:
        monkeypatch.setenv("HF_ENDPOINT", hub.url + "/")  # a trailing slash, as users write it
        monkeypatch.setenv("MY_TOKEN", "hf_secret")
        seen: list[tuple[float, float | None]] = []
        result = fetch(
            "hf://org/model",
            revision="main",
            token_env="MY_TOKEN",
            dest=tmp_path / "src",
            progress=lambda done, total, unit, msg: seen.append((done, total)),
        )
    assert result.revision == SHA
    assert sorted(result.files) == [
        "config.json",
        "model-00001-of-00002.safetensors",
        "model-00002-of-00002.safetensors",
        "model.safetensors.index.json",
        "tokenizer.json",
    ]
    for name in result.files:
        assert (tmp_path / "src" / name).read_bytes() == files[name]
    assert hub.requests[0] == ("GET", "/api/models/org/model/revision/main?blobs=true", True)
    downloads = {path for _, path, _ in hub.requests[1:]}
    assert downloads == {f"/org/model/resolve/{SHA}/{name}" for name in result.files}  # pinned sha
    assert all(token for _, _, token in hub.requests)
    assert seen[-1] == (185, 185)


def test_hf_fetch_of_a_gated_repository_without_or_with_a_wrong_token_is_auth_failed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    files = _files({"config.json": 10, "model.safetensors": 100})
    with local_hub({"org/gated": HubRepo(files, token="hf_right")}) as hub:
        monkeypatch.setenv("HF_ENDPOINT", hub.url)
        with pytest.raises(BuildError) as info:
            fetch("hf://org/gated", revision=None, token_env="NO_SUCH_TOKEN_VAR", dest=tmp_path / "a")
        assert info.value.reason == "AuthFailed" and "gated" in info.value.message
        monkeypatch.setenv("MY_TOKEN", "hf_wrong")
        with pytest.raises(BuildError) as info:
            fetch("hf://org/gated", revision=None, token_env="MY_TOKEN", dest=tmp_path / "b")
        assert info.value.reason == "AuthFailed" and "401" in info.value.message
        with pytest.raises(BuildError) as info:
            fetch("hf://org/absent", revision=None, token_env="MY_TOKEN", dest=tmp_path / "c")
        assert info.value.reason == "ModelNotFound"


def test_hf_fetch_size_mismatch_is_download_failed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    files = _files({"config.json": 10, "model.safetensors": 100})
    with local_hub({"org/model": HubRepo(files, listed_sizes={"model.safetensors": 101})}) as hub:
        monkeypatch.setenv("HF_ENDPOINT", hub.url)
        with pytest.raises(BuildError) as info:
            fetch("hf://org/model", revision=None, token_env="NO_SUCH_TOKEN_VAR", dest=tmp_path / "src")
    assert info.value.reason == "DownloadFailed"
    assert "model.safetensors" in info.value.message


def test_hf_repo_without_safetensors_is_model_not_found(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    files = _files({"config.json": 10, "pytorch_model.bin": 100})
    with local_hub({"org/model": HubRepo(files)}) as hub:
        monkeypatch.setenv("HF_ENDPOINT", hub.url)
        with pytest.raises(BuildError) as info:
            fetch("hf://org/model", revision=None, token_env="NO_SUCH_TOKEN_VAR", dest=tmp_path / "src")
    assert info.value.reason == "ModelNotFound"
    assert "safetensors" in info.value.message
    assert [path for _, path, _ in hub.requests] == ["/api/models/org/model?blobs=true"]


def _published(tmp_path: Path) -> tuple[dict[str, Any], str]:
    """A published artifact directory: one file and a manifest.json over it (package's format)."""
    from engine_builder.contract import MANIFEST_SCHEMA, engine_key, manifest_digest  # noqa: PLC0415
    from engine_builder.package import sha256_file  # noqa: PLC0415

    key_inputs = {"backend": "tensorrt", "model": {"uri": "hf://org/tiny"}}
    key = engine_key(key_inputs)
    root = tmp_path / key
    (root / "engine").mkdir(parents=True)
    (root / "engine" / "rank0.engine").write_bytes(b"x" * 100)
    manifest: dict[str, Any] = {
        "schema": MANIFEST_SCHEMA,
        "engineKey": key,
        "keyInputs": key_inputs,
        "backend": "tensorrt",
        "runtimeImage": "nvcr.io/nvidia/tritonserver:26.03-trtllm-python-py3",
        "target": {"gpuProduct": "NVIDIA-H100-80GB-HBM3", "sm": 90},
        "files": [
            {
                "path": "engine/rank0.engine",
                "size": 100,
                "sha256": sha256_file(root / "engine" / "rank0.engine"),
            }
        ],
    }
    manifest["manifestDigest"] = manifest_digest(manifest)
    (root / "manifest.json").write_text(json.dumps(manifest))
    pkg = {"manifest_path": str(root / "manifest.json"), "manifest_digest": manifest["manifestDigest"]}
    return pkg, key


def test_success_is_reported_only_for_a_published_artifact_that_verifies(tmp_path: Path) -> None:
    from engine_builder.pipeline import _verify_published  # noqa: PLC0415

    pkg, key = _published(tmp_path)
    assert _verify_published(pkg, key) is None
    wrong_key = _verify_published(pkg, "0" * 64)
    assert wrong_key is not None and "manifest.engineKey" in wrong_key.message
    assert wrong_key.reason == "InternalError" and wrong_key.stage == "report"
    other_digest = _verify_published({**pkg, "manifest_digest": "sha256:" + "1" * 64}, key)
    assert other_digest is not None and "not the packaged one" in other_digest.message
    (Path(pkg["manifest_path"]).parent / "engine" / "rank0.engine").write_bytes(b"x" * 99)
    short = _verify_published(pkg, key)
    assert short is not None and "not 100 bytes" in short.message
    Path(pkg["manifest_path"]).unlink()
    gone = _verify_published(pkg, key)
    assert gone is not None and "does not verify" in gone.message


def _builder_commands() -> dict[str, str]:
    """``engine-builder``'s sub-commands and their one-line help, from its parser."""
    import argparse  # noqa: PLC0415

    from engine_builder.pipeline import _parser  # noqa: PLC0415

    sub = next(a for a in _parser()._actions if isinstance(a, argparse._SubParsersAction))
    return {c.dest: c.help or "" for c in sub._choices_actions}


def test_check_help_says_what_it_writes() -> None:
    """Fresh-user trial 48 V7: ``engine-builder --help`` said check "writes nothing", but a failing
    check writes its report to output.termination_log (test_builder_pipeline.py
    ::test_check_refuses_what_the_plan_stage_refuses_without_building), creating its directory."""
    text = _builder_commands()["check"]
    assert not text.endswith("writes nothing")
    assert "on a failure, the report to output.termination_log" in text


def test_readme_layout_names_every_builder_command() -> None:
    """Fresh-user trial 48 V8: README's layout row listed run|stages|make-tiny-model, not check (the
    operator's init container runs it, docs/operator.md)."""
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    commands = list(_builder_commands())
    listed = "\\|".join(commands)  # a | in a Markdown table cell is escaped
    assert f"(`engine-builder {listed}`)" in readme, commands
