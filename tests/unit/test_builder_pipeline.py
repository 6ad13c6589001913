"""engine-builder end to end on the CPU with a tiny random Llama (ModelOpt, transformers, moto).

The pipeline runs in-process (one import of torch/ModelOpt for the whole module) through
``package`` with ``--skip-compile`` — there is no TensorRT-LLM toolchain here — for every format
ModelOpt calibrates on the CPU × (TP 1, TP 2, PP 2); then the failure classes, resume after a
SIGKILL in the middle of ``quantize`` (a real subprocess), and S3 against moto's server on
127.0.0.1.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from moto.server import ThreadedMotoServer
from support.ports import bound_socket

pytest.importorskip("modelopt.torch.quantization")

from engine_builder.contract import artifact_dir_key
from engine_builder.fetch import s3_client
from engine_builder.package import manifest_digest
from engine_builder.pipeline import Options, run
from engine_builder.report import EXIT_CODES
from engine_builder.tinymodel import make_tiny_model

pytestmark = [pytest.mark.slow, pytest.mark.quantize]

QUANT_ALGO = {
    "none": None,
    "fp8": "FP8",
    "int8_sq": "W8A8_SQ_PER_CHANNEL",
    "int4_awq": "W4A16_AWQ",
    "w4a8_awq": "W4A8_AWQ",
}
PARALLEL = {"tp1": (1, 1), "tp2": (2, 1), "pp2": (1, 2)}


@pytest.fixture(scope="module")
def format_workdirs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """One work directory per format, shared by its three parallelism cases: the calibration is
    reused across them (the ``quantize`` stage does not depend on parallelism)."""
    return {fmt: tmp_path_factory.mktemp(f"work-{fmt}") for fmt in QUANT_ALGO}


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("tiny-llama")
    make_tiny_model(path)
    return path


def write_spec(tmp: Path, model_uri: str | Path, **overrides: Any) -> Path:
    spec: dict[str, Any] = {
        "model": {"uri": str(model_uri)},
        "backend": "tensorrt",
        "runtime_image": "nvcr.io/nvidia/tritonserver:25.05-trtllm-python-py3",
        "quantization": {
            "format": "none",
            "calibration": {"dataset": "bundled", "num_samples": 2, "max_seq_length": 16},
        },
        "target": {"gpu_product": "NVIDIA-H100-80GB-HBM3", "sm": 90},
        "output": {"artifact_root": str(tmp / "artifacts"), "termination_log": str(tmp / "termination-log")},
    }
    for key, value in overrides.items():
        if isinstance(value, dict) and isinstance(spec.get(key), dict):
            spec[key] = {**spec[key], **value}
        else:
            spec[key] = value
    path = tmp / "build.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def run_in_process(
    tmp: Path,
    spec: Path,
    *,
    skip_compile: bool = True,
    from_stage: str | None = None,
    serving_root: str | None = None,
    workdir: Path | None = None,
) -> tuple[int, dict[str, Any]]:
    options = Options(skip_compile=skip_compile, serving_root=serving_root)
    code = run(spec, workdir or tmp / "work", from_stage, options)
    termination = json.loads((tmp / "termination-log").read_text())
    return code, termination


def cli_run(spec: Path, workdir: Path, *flags: str) -> list[str]:
    """The command line of ``engine-builder run`` of ``spec`` in ``workdir`` (this interpreter's
    ``-m engine_builder.cli``), then ``flags``."""
    cli = [sys.executable, "-m", "engine_builder.cli"]
    return [*cli, "run", "--spec", str(spec), "--workdir", str(workdir), *flags]


#: tests/: ``support.builder_pause`` runs the builder paused in quantize until signalled.
TESTS = Path(__file__).resolve().parents[1]


def signalled_in_quantize(
    cmd: list[str], workdir: Path, sig: signal.Signals
) -> tuple[subprocess.Popen[bytes], bool]:
    """Start ``cmd`` (``engine-builder run --workdir workdir …``, :func:`cli_run`) through
    tests/support/builder_pause.py, which stops the builder in its quantize stage after the first
    calibration batch and says so in a file; then send ``sig``. The builder cannot leave quantize before
    the signal, however slow or fast the machine. Returns the process (not waited for) and whether the
    signal was sent (False: the builder ended, or 240 s passed, without pausing in quantize)."""
    assert cmd[:3] == [sys.executable, "-m", "engine_builder.cli"], cmd
    paused = workdir.parent / f"{workdir.name}.paused-in-quantize"
    path = os.pathsep.join(p for p in (str(TESTS), os.environ.get("PYTHONPATH")) if p)
    proc = subprocess.Popen(
        [sys.executable, "-m", "support.builder_pause", str(paused), *cmd[3:]],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "PYTHONPATH": path},
    )
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and proc.poll() is None:
        if paused.exists():
            proc.send_signal(sig)
            return proc, True
        time.sleep(0.1)
    return proc, False


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def check_manifest(artifact: Path, termination: dict[str, Any]) -> dict[str, Any]:
    manifest = json.loads((artifact / "manifest.json").read_text())
    assert manifest["manifestDigest"] == termination["manifestDigest"] == manifest_digest(manifest)
    on_disk = sorted(p.relative_to(artifact).as_posix() for p in artifact.rglob("*") if p.is_file())
    listed = sorted(entry["path"] for entry in manifest["files"])
    assert listed == [p for p in on_disk if p != "manifest.json"]
    for entry in manifest["files"]:
        assert sha256(artifact / entry["path"]) == entry["sha256"], entry["path"]
        assert (artifact / entry["path"]).stat().st_size == entry["size"]
    assert manifest["sizeBytes"] == termination["sizeBytes"] == sum(e["size"] for e in manifest["files"])
    return manifest


@pytest.mark.parametrize("parallel", sorted(PARALLEL))
@pytest.mark.parametrize("fmt", sorted(QUANT_ALGO))
def test_formats_by_parallelism_through_package(
    tmp_path: Path, tiny_model: Path, format_workdirs: dict[str, Path], fmt: str, parallel: str
) -> None:
    tp, pp = PARALLEL[parallel]
    quant: dict[str, Any] = {"format": fmt}
    if fmt in ("int4_awq", "w4a8_awq"):
        quant["awq_block_size"] = 64
    if fmt == "fp8":
        quant["kv_cache_dtype"] = "fp8"
    build: dict[str, Any] = {}
    if fmt == "int8_sq":
        quant["kv_cache_dtype"] = "int8"
        # an INT8 KV cache turns paged context FMHA off (TensorRT-LLM builder.py): the LLMEngine API
        # refuses it unless build.pagedContextFMHA is false, and so does the builder's plan stage
        build["paged_context_fmha"] = False
    spec = write_spec(
        tmp_path, tiny_model, quantization=quant, parallelism={"tensor": tp, "pipeline": pp}, build=build
    )
    code, termination = run_in_process(tmp_path, spec, workdir=format_workdirs[fmt])

    assert code == 0, termination
    assert termination["status"] == "Partial"
    assert termination["reason"] == "CompileSkipped"
    assert "compile: --skip-compile" in termination["skipped"]
    ran_or_resumed = set(termination["stageTimings"]) | set(termination.get("resumed", []))
    assert ran_or_resumed >= {"fetch", "inspect", "plan", "quantize", "convert", "package"}
    key = termination["engineKey"]
    artifact = tmp_path / "artifacts" / key
    assert termination["artifactURI"] == str(artifact)

    config = json.loads((artifact / "checkpoint" / "config.json").read_text())
    assert config["mapping"]["tp_size"] == tp
    assert config["mapping"]["pp_size"] == pp
    assert config["mapping"]["world_size"] == tp * pp
    assert config["quantization"]["quant_algo"] == QUANT_ALGO[fmt]
    kv = {"fp8": "FP8", "int8_sq": "INT8"}.get(fmt)
    assert config["quantization"]["kv_cache_quant_algo"] == kv
    if fmt in ("int4_awq", "w4a8_awq"):
        assert config["quantization"]["group_size"] == 64
    ranks = sorted(p.name for p in (artifact / "checkpoint").glob("rank*.safetensors"))
    assert ranks == [f"rank{r}.safetensors" for r in range(tp * pp)]

    manifest = check_manifest(artifact, termination)
    assert manifest["engineKey"] == key
    assert manifest["compile"]["status"] == "skipped"
    assert manifest["partial"] is True and manifest["missing"][0].startswith("engine/")
    assert manifest["ranks"] == [
        {"rank": r, "files": [f"checkpoint/rank{r}.safetensors"]} for r in range(tp * pp)
    ]
    assert manifest["keyInputs"]["quantization"]["format"] == fmt
    assert manifest["versions"]["nvidia-modelopt"] and manifest["versions"]["torch"]
    assert manifest["versions"]["tensorrt_llm"] is None
    assert manifest["plan"]["fits"] is True
    pbtxt = (artifact / "triton" / "tensorrt_llm" / "config.pbtxt").read_text()
    assert "${" not in pbtxt
    assert f'string_value: "{tmp_path / "artifacts"}/{key}/engine"' in pbtxt


def test_pytorch_backend_writes_unified_checkpoint_and_llmapi_model(tmp_path: Path, tiny_model: Path) -> None:
    spec = write_spec(tmp_path, tiny_model, backend="pytorch", quantization={"format": "fp8"})
    code, termination = run_in_process(tmp_path, spec, skip_compile=False)
    assert code == 0, termination
    assert termination["status"] == "Succeeded"
    artifact = Path(termination["artifactURI"])
    config = json.loads((artifact / "checkpoint" / "config.json").read_text())
    assert config["quantization_config"]["quant_method"] == "modelopt"
    assert (artifact / "checkpoint" / "tokenizer.json").is_file()
    model_yaml = yaml.safe_load((artifact / "triton" / "tensorrt_llm" / "1" / "model.yaml").read_text())
    assert model_yaml["backend"] == "pytorch"
    assert model_yaml["model"].endswith(f"{termination['engineKey']}/checkpoint")
    manifest = check_manifest(artifact, termination)
    assert manifest["compile"]["status"] == "skipped"
    assert manifest["partial"] is False and manifest["missing"] == []  # pytorch needs no engine
    assert manifest["triton"]["layout"] == "llmapi"


def test_nvfp4_on_cpu_fails_classified(tmp_path: Path, tiny_model: Path) -> None:
    spec = write_spec(
        tmp_path,
        tiny_model,
        quantization={"format": "nvfp4"},
        target={"gpu_product": "NVIDIA-B200", "sm": 100},  # the planner refuses nvfp4 below SM 100
    )
    code, termination = run_in_process(tmp_path, spec)
    assert code == EXIT_CODES["RequiresGPU"] == termination["exitCode"]
    assert termination["status"] == "Failed"
    assert termination["reason"] == "RequiresGPU"
    assert termination["stage"] == "quantize"
    assert termination["retryable"] is False


def test_resume_skips_done_stages_and_compile_needs_the_toolchain(
    tmp_path: Path, tiny_model: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = write_spec(tmp_path, tiny_model, quantization={"format": "fp8"})
    code, first = run_in_process(tmp_path, spec)
    assert code == 0
    records = {
        p.stem: json.loads(p.read_text())
        for p in (tmp_path / "work" / "state").glob("*.json")
        if p.stem != "key_inputs"
    }
    capsys.readouterr()

    code, again = run_in_process(tmp_path, spec)
    out = capsys.readouterr().out
    assert code == 0
    for stage in ("fetch", "inspect", "plan", "quantize", "convert", "compile", "package"):
        assert f"[{stage}] already" in out
        assert json.loads((tmp_path / "work" / "state" / f"{stage}.json").read_text()) == records[stage]
    assert again["manifestDigest"] == first["manifestDigest"]

    # The first run exported the quantized model from memory; the quantize stage persisted only the
    # ModelOpt state and the scales (FP8 max calibration leaves the weights as loaded).
    assert records["convert"]["result"]["model_source"] == "memory"
    assert records["quantize"]["result"]["state"] == "scales"
    state_bytes = (tmp_path / "work" / "quantized" / "modelopt_state.pth").stat().st_size
    weight_bytes = sum(p.stat().st_size for p in tiny_model.glob("*.safetensors"))
    assert state_bytes < weight_bytes / 10
    # The report says what calibration used.
    assert first["calibration"] == {
        "dataset": "bundled",
        "samples": 2,
        "tokens": records["quantize"]["result"]["tokens"],
        "batchSize": 32,
        "maxSeqLength": 16,
    }
    assert 2 < first["calibration"]["tokens"] <= 2 * 16

    # Resuming at convert loads the model and restores that state: the same checkpoint bytes.
    code, rerun = run_in_process(tmp_path, spec, from_stage="convert")
    out = capsys.readouterr().out
    assert code == 0
    assert "[quantize] already" in out and "[convert] already" not in out
    assert rerun["manifestDigest"] == first["manifestDigest"]
    convert_record = json.loads((tmp_path / "work" / "state" / "convert.json").read_text())
    assert convert_record["result"]["model_source"] == "loaded"

    # Without --skip-compile the skipped compile is not "complete": it runs, and there is no
    # trtllm-build on this machine.
    code, failed = run_in_process(tmp_path, spec, skip_compile=False)
    assert code == EXIT_CODES["ToolchainMissing"]
    assert failed["reason"] == "ToolchainMissing"
    assert failed["stage"] == "compile"
    assert "trtllm-build" in failed["message"]
    # The report's timings are this run's: only compile ran; the rest was resumed. No stale
    # package timing from the earlier run, no "skipped compile" from the earlier run.
    assert set(failed["stageTimings"]) == {"compile"}
    assert failed["resumed"] == ["fetch", "inspect", "plan", "quantize", "convert"]
    assert "skipped" not in failed or not any(s.startswith("compile") for s in failed["skipped"])
    # No record of the earlier run's package stage is left claiming the artifact is packaged.
    assert not (tmp_path / "work" / "state" / "package.json").exists()
    assert (tmp_path / "work" / "state" / "convert.json").exists()
    # The artifact published by the --skip-compile run is still there, and its manifest says it is
    # partial (no engine) rather than claiming to be complete.
    manifest = json.loads((Path(first["artifactURI"]) / "manifest.json").read_text())
    assert manifest["partial"] is True
    assert manifest["missing"] and manifest["missing"][0].startswith("engine/")


def test_changing_parallelism_reuses_the_calibration(
    tmp_path: Path, tiny_model: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, first = run_in_process(tmp_path, write_spec(tmp_path, tiny_model, quantization={"format": "fp8"}))
    assert code == 0
    quantize_record = json.loads((tmp_path / "work" / "state" / "quantize.json").read_text())
    capsys.readouterr()
    spec = write_spec(tmp_path, tiny_model, quantization={"format": "fp8"}, parallelism={"tensor": 2})
    code, second = run_in_process(tmp_path, spec)
    out = capsys.readouterr().out
    assert code == 0
    assert second["engineKey"] != first["engineKey"]
    assert "[quantize] already done" in out
    assert "[plan] already" not in out and "[convert] already" not in out
    assert json.loads((tmp_path / "work" / "state" / "quantize.json").read_text()) == quantize_record
    config = json.loads((Path(second["artifactURI"]) / "checkpoint" / "config.json").read_text())
    assert config["mapping"]["tp_size"] == 2


@pytest.mark.parametrize(
    ("overrides", "reason", "stage", "field"),
    [
        ({"parallelism": {"tensor": 3}}, "BadSpec", "plan", "parallelism.tensor"),
        ({"model": {"uri": "/nonexistent/model"}}, "ModelNotFound", "fetch", "model.uri"),
        (
            {"quantization": {"format": "int4_awq", "awq_block_size": 128}, "parallelism": {"tensor": 2}},
            "BadSpec",
            "plan",
            "quantization.awq_block_size",
        ),
        ({"target": {"gpu_product": "NVIDIA-NOT-A-GPU", "sm": 90}}, "BadSpec", "plan", "target.gpu_product"),
        ({"target": {"gpu_product": "NVIDIA-H100-80GB-HBM3", "sm": 80}}, "BadSpec", "plan", "target.sm"),
        (
            {"quantization": {"format": "fp8"}, "target": {"gpu_product": "NVIDIA-A100-SXM4-80GB", "sm": 80}},
            "BadSpec",
            "plan",
            "quantization.format",
        ),
        # an INT8 KV cache with build.paged_context_fmha left on: refused as the LLMEngine API does
        # (formats.paged_context_fmha_refusal; trial 51 Y6), not built with the FMHA silently off
        (
            {"quantization": {"format": "int8_sq", "kv_cache_dtype": "int8"}},
            "BadSpec",
            "plan",
            "quantization.kv_cache_dtype",
        ),
    ],
)
def test_bad_specs_fail_at_the_right_stage(
    tmp_path: Path, tiny_model: Path, overrides: dict[str, Any], reason: str, stage: str, field: str | None
) -> None:
    spec = write_spec(tmp_path, tiny_model, **overrides)
    code, termination = run_in_process(tmp_path, spec)
    assert (code, termination["reason"], termination["stage"]) == (EXIT_CODES[reason], reason, stage)
    assert code != 0
    if field:
        assert termination["field"] == field
    assert not (tmp_path / "artifacts").exists()


def test_unknown_format_fails_before_fetch_via_cli(tmp_path: Path, tiny_model: Path) -> None:
    spec = write_spec(tmp_path, tiny_model, quantization={"format": "fp16"})
    proc = subprocess.run(
        cli_run(spec, tmp_path / "w"),
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
    )
    termination = json.loads((tmp_path / "termination-log").read_text())
    assert proc.returncode == EXIT_CODES["BadSpec"]
    assert (termination["reason"], termination["stage"], termination["field"]) == (
        "BadSpec",
        "fetch",
        "quantization.format",
    )


# ------------------------------------------------------------------------------------------------
# S3 against moto's server on 127.0.0.1


@pytest.fixture
def s3_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()  # bound to port 0: the kernel's pick, read back
    endpoint = f"http://{host}:{port}"
    for key, value in {
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
    }.items():
        monkeypatch.setenv(key, value)
    try:
        yield endpoint
    finally:
        server.stop()


def test_s3_source_and_s3_artifact_root(tmp_path: Path, tiny_model: Path, s3_env: str) -> None:
    client = s3_client()
    client.create_bucket(Bucket="models")
    client.create_bucket(Bucket="artifacts")
    for f in tiny_model.iterdir():
        client.upload_file(str(f), "models", f"llama/tiny/{f.name}")
    client.put_object(Bucket="models", Key="llama/tiny/README.md", Body=b"not fetched")

    spec = write_spec(tmp_path, "s3://models/llama/tiny", output={"artifact_root": "s3://artifacts/engines"})
    code, termination = run_in_process(tmp_path, spec)
    assert code == 0, termination
    fetched = sorted(p.name for p in (tmp_path / "work" / "source").iterdir())
    assert fetched == sorted(p.name for p in tiny_model.iterdir())
    key = termination["engineKey"]
    assert termination["artifactURI"] == f"s3://artifacts/engines/{key}"
    listed = client.list_objects_v2(Bucket="artifacts", Prefix=f"engines/{key}/")
    names = {o["Key"].split(f"{key}/", 1)[1] for o in listed["Contents"]}
    assert {"manifest.json", "checkpoint/config.json", "checkpoint/rank0.safetensors"} <= names
    body = client.get_object(Bucket="artifacts", Key=f"engines/{key}/manifest.json")["Body"].read()
    assert json.loads(body)["manifestDigest"] == termination["manifestDigest"]


def test_s3_missing_prefix_is_model_not_found(tmp_path: Path, tiny_model: Path, s3_env: str) -> None:
    s3_client().create_bucket(Bucket="models")
    spec = write_spec(tmp_path, tiny_model, model={"uri": "s3://models/nothing-here"})
    code, termination = run_in_process(tmp_path, spec)
    assert (code, termination["reason"], termination["stage"]) == (20, "ModelNotFound", "fetch")


def test_unreachable_s3_is_download_failed(
    tmp_path: Path, tiny_model: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> None:
    closed = bound_socket()  # held, never listening: connections to its port are refused
    request.addfinalizer(closed.close)
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{closed.getsockname()[1]}")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    spec = write_spec(tmp_path, tiny_model, model={"uri": "s3://models/llama"})
    code, termination = run_in_process(tmp_path, spec)
    assert (code, termination["reason"], termination["stage"]) == (11, "DownloadFailed", "fetch")
    assert termination["retryable"] is True


# ------------------------------------------------------------------------------------------------
# Kill in the middle of quantize, resume, same manifest


def test_sigkill_during_quantize_then_resume_gives_the_same_manifest(
    tmp_path: Path, tiny_model: Path
) -> None:
    calib = tmp_path / "calib.txt"
    calib.write_text(
        "\n".join(f"sample {i}: the quick brown fox jumps over the lazy dog {i % 97}" for i in range(80))
    )
    quant = {
        "format": "int8_sq",
        "calibration": {"dataset": str(calib), "num_samples": 80, "max_seq_length": 16},
    }
    ref_dir = tmp_path / "reference"
    ref_dir.mkdir()
    code, reference = run_in_process(
        ref_dir, write_spec(ref_dir, tiny_model, quantization=quant), serving_root="/artifacts"
    )
    assert code == 0, reference
    ref_manifest = json.loads((Path(reference["artifactURI"]) / "manifest.json").read_text())

    run_dir = tmp_path / "killed"
    run_dir.mkdir()
    spec = write_spec(run_dir, tiny_model, quantization=quant)
    cmd = cli_run(spec, run_dir / "work", "--skip-compile", "--serving-root", "/artifacts")
    proc, killed = signalled_in_quantize(cmd, run_dir / "work", signal.SIGKILL)
    proc.wait(timeout=30)
    assert killed, "the builder finished before it could be killed in quantize"
    state_dir = run_dir / "work" / "state"
    assert (state_dir / "convert.json").exists() is False
    assert (state_dir / "quantize.json").exists() is False
    assert json.loads((state_dir / "plan.json").read_text())["status"] == "done"

    resumed = subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=600)
    assert resumed.returncode == 0, resumed.stdout[-2000:] + resumed.stderr[-2000:]
    assert "[plan] already done" in resumed.stdout
    assert "[quantize] already" not in resumed.stdout
    termination = json.loads((run_dir / "termination-log").read_text())
    manifest = json.loads((Path(termination["artifactURI"]) / "manifest.json").read_text())

    assert manifest["manifestDigest"] == ref_manifest["manifestDigest"] == termination["manifestDigest"]
    assert {k: v for k, v in manifest.items() if k != "stageTimings"} == {
        k: v for k, v in ref_manifest.items() if k != "stageTimings"
    }
    checkpoint_hashes = {
        e["path"]: e["sha256"] for e in manifest["files"] if e["path"].startswith("checkpoint/")
    }
    assert checkpoint_hashes == {
        e["path"]: e["sha256"] for e in ref_manifest["files"] if e["path"].startswith("checkpoint/")
    }


def test_sigterm_during_quantize_reports_timeout(tmp_path: Path, tiny_model: Path) -> None:
    """activeDeadlineSeconds / pod deletion: SIGTERM must become reason Timeout (exit 18) with the
    report written — not a QuantizationFailed from the stage's own error handling."""
    calib = tmp_path / "calib.txt"
    calib.write_text("\n".join(f"line {i}: a sentence long enough to calibrate on {i}" for i in range(200)))
    quant = {
        "format": "int8_sq",
        "calibration": {"dataset": str(calib), "num_samples": 200, "max_seq_length": 16},
    }
    spec = write_spec(tmp_path, tiny_model, quantization=quant)
    cmd = cli_run(spec, tmp_path / "work")
    proc, sent = signalled_in_quantize(cmd, tmp_path / "work", signal.SIGTERM)
    code = proc.wait(timeout=60)
    assert sent, "the builder finished before SIGTERM could be sent in quantize"
    termination = json.loads((tmp_path / "termination-log").read_text())
    assert code == EXIT_CODES["Timeout"] == termination["exitCode"]
    assert (termination["reason"], termination["stage"], termination["retryable"]) == (
        "Timeout",
        "quantize",
        True,
    )


def test_a_rebuild_publishes_a_new_directory_and_never_touches_the_mounted_one(
    tmp_path: Path, tiny_model: Path
) -> None:
    """Write-once artifact locations (#24): serving pods mount ``<root>/<key>`` by subPath; a second
    build of the same key (its cache entry deleted) publishes ``<key>-<build id>`` and leaves every
    file of the first one as it was — same inode, same bytes."""
    spec = write_spec(tmp_path, tiny_model)
    code, first = run_in_process(tmp_path, spec)
    assert code == 0, first
    key = first["engineKey"]
    mounted = tmp_path / "artifacts" / key
    assert first["artifactURI"] == str(mounted)
    before = {p: (p.stat().st_ino, sha256(p)) for p in mounted.rglob("*") if p.is_file()}

    code, second = run_in_process(tmp_path, spec, from_stage="package")
    assert code == 0, second
    rebuilt = Path(second["artifactURI"])
    assert rebuilt.parent == mounted.parent and rebuilt != mounted
    assert artifact_dir_key(rebuilt.name) == key and rebuilt.name.startswith(f"{key}-")
    assert {p: (p.stat().st_ino, sha256(p)) for p in mounted.rglob("*") if p.is_file()} == before
    check_manifest(mounted, first)
    check_manifest(rebuilt, second)
    assert second["manifestDigest"] == first["manifestDigest"]  # same inputs, same artifact
    assert sorted(p.name for p in mounted.parent.iterdir()) == sorted([key, rebuilt.name])  # no staging left


def test_a_rebuild_on_s3_publishes_a_new_prefix(tmp_path: Path, tiny_model: Path, s3_env: str) -> None:
    client = s3_client()
    client.create_bucket(Bucket="artifacts")
    spec = write_spec(tmp_path, tiny_model, output={"artifact_root": "s3://artifacts/engines/team-a"})
    code, first = run_in_process(tmp_path, spec)
    assert code == 0, first
    key = first["engineKey"]
    assert first["artifactURI"] == f"s3://artifacts/engines/team-a/{key}"
    old = client.get_object(Bucket="artifacts", Key=f"engines/team-a/{key}/manifest.json")
    code, second = run_in_process(tmp_path, spec, from_stage="package")
    assert code == 0, second
    name = second["artifactURI"].rsplit("/", 1)[-1]
    assert second["artifactURI"] == f"s3://artifacts/engines/team-a/{name}" and name.startswith(f"{key}-")
    assert artifact_dir_key(name) == key
    again = client.get_object(Bucket="artifacts", Key=f"engines/team-a/{key}/manifest.json")
    assert again["ETag"] == old["ETag"] and again["LastModified"] == old["LastModified"]
    listed = client.list_objects_v2(Bucket="artifacts", Prefix=f"engines/team-a/{name}/")
    assert any(o["Key"].endswith("/manifest.json") for o in listed["Contents"])


@pytest.mark.parametrize(
    ("parallelism", "field"), [({"tensor": 3}, "tensor"), ({"pipeline": 64}, "pipeline")]
)
def test_parallelism_refusal_is_the_planners(
    tmp_path: Path, tiny_model: Path, parallelism: dict[str, int], field: str
) -> None:
    """The builder said "use a divisor of 2" where the operator's planner listed the valid sizes: the
    head and layer rules have one home (planner.validate), so the builder's BadSpec carries the
    planner's message and fix."""
    from engine_builder.planner import Architecture, PlanRequest, load_hf_config, lookup, validate  # noqa: PLC0415

    spec = write_spec(tmp_path, tiny_model, parallelism=parallelism)
    code, termination = run_in_process(tmp_path, spec)
    assert (code, termination["reason"], termination["field"]) == (
        EXIT_CODES["BadSpec"],
        "BadSpec",
        f"parallelism.{field}",
    )
    arch = Architecture.from_hf_config(load_hf_config(tiny_model / "config.json"))
    request = PlanRequest(tp=parallelism.get("tensor", 1), pp=parallelism.get("pipeline", 1))
    issues = validate(arch, request, lookup("NVIDIA-H100-80GB-HBM3"))
    assert issues
    for issue in issues:
        assert issue.message in termination["message"] and issue.fix in termination["message"], termination
    assert "divisor of" not in termination["message"]


def test_check_refuses_what_the_plan_stage_refuses_without_building(tmp_path: Path, tiny_model: Path) -> None:
    """``engine-builder check`` (the builder Job's first step for a pvc:// model, whose config.json the
    operator cannot read): the plan stage's refusal, its report and exit code, in seconds; nothing
    written to the artifact root, and no disk preflight (the check container has no work volume)."""
    from engine_builder.pipeline import check, main  # noqa: PLC0415

    pvc_root = tmp_path / "models"
    (pvc_root / "models").mkdir(parents=True)
    (pvc_root / "models" / "tiny").symlink_to(tiny_model, target_is_directory=True)
    spec = write_spec(tmp_path, "pvc://models/tiny", parallelism={"tensor": 3})
    code = check(spec, Options(pvc_root=str(pvc_root)))
    termination = json.loads((tmp_path / "termination-log").read_text())
    assert (code, termination["reason"], termination["stage"], termination["field"]) == (
        EXIT_CODES["BadSpec"],
        "BadSpec",
        "plan",
        "parallelism.tensor",
    )
    assert termination["status"] == "Failed" and "Fix:" in termination["message"]
    assert not (tmp_path / "artifacts").exists()
    # a spec the model takes: 0, no report; a missing model: the fetch stage's ModelNotFound
    (tmp_path / "termination-log").unlink()
    ok = write_spec(tmp_path, "pvc://models/tiny", parallelism={"tensor": 2})
    assert main(["check", "--spec", str(ok), "--pvc-root", str(pvc_root)]) == 0
    assert not (tmp_path / "termination-log").exists()
    gone = write_spec(tmp_path, "pvc://models/gone")
    assert main(["check", "--spec", str(gone), "--pvc-root", str(pvc_root)]) == EXIT_CODES["ModelNotFound"]
    assert json.loads((tmp_path / "termination-log").read_text())["stage"] == "fetch"
    # a model that is downloaded is the build's to check: nothing fetched here
    hub = write_spec(tmp_path, "hf://meta-llama/Llama-3.1-8B-Instruct", parallelism={"tensor": 3})
    assert main(["check", "--spec", str(hub)]) == 0
