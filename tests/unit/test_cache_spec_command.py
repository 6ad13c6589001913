"""`trtllm-operator cache spec`: the build spec for an LLMEngine manifest, for a run outside the cluster."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from trtllm_operator.cli import main

ENGINE = """
apiVersion: llm.trtllm-operator.dev/v1alpha1
kind: LLMEngine
metadata: {name: NAME}
spec:
  model: {source: hf://meta-llama/Llama-3.1-8B-Instruct}
  runtime: {image: nvcr.io/nvidia/tritonserver:26.03-trtllm-python-py3}
  quantization: {format: fp8}
  gpu: {product: NVIDIA-H100-80GB-HBM3}
  storage: {pvc: {claimName: engines}}
"""
DEPLOYMENT = """
apiVersion: llm.trtllm-operator.dev/v1alpha1
kind: LLMDeployment
metadata: {name: chat}
spec: {engineRef: {name: a}}
"""


def run(tmp_path: Path, text: str, *extra: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    path = tmp_path / "in.yaml"
    path.write_text(text)
    code = main(["cache", "spec", "-f", str(path), *extra])
    out, err = capsys.readouterr()
    return code, out, err


def test_multi_document_file_picks_the_engine(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = ENGINE.replace("NAME", "a") + "---\n" + DEPLOYMENT
    code, out, _ = run(tmp_path, text, "--artifact-root", str(tmp_path / "store"), capsys=capsys)
    assert code == 0
    first, _, body = out.partition("\n")
    assert first.startswith("# engine key: ") and len(first.split()[-1]) == 64
    spec = yaml.safe_load(body)
    assert spec["output"] == {
        "artifact_root": str(tmp_path / "store"),
        "termination_log": str(tmp_path / "store" / "termination-log"),
    }


def test_without_the_model_config_a_note_says_the_checks_were_skipped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Fresh-user trial 49 W10: without --hf-config-dir (or with one that lacks the model's file) the
    spec was printed with nothing on stderr, though the planner's checks had not run."""
    code, out, err = run(tmp_path, ENGINE.replace("NAME", "a"), capsys=capsys)
    assert code == 0 and out.startswith("# engine key: ")
    assert err == (
        "trtllm-operator cache spec: note: LLMEngine a: the model-config checks (the model on spec.backend, "
        "heads divisible by tensor parallelism, memory fit) were skipped (no --hf-config-dir); the builder's "
        "plan stage runs them before it quantizes or compiles: pass --hf-config-dir <directory of "
        "<org>__<name>.json> to run them now\n"
    )
    code, _, err = run(tmp_path, ENGINE.replace("NAME", "a"), "--hf-config-dir", str(tmp_path), capsys=capsys)
    assert code == 0
    assert f"were skipped (no meta-llama__Llama-3.1-8B-Instruct.json in --hf-config-dir {tmp_path})" in err
    configs = Path(__file__).resolve().parents[1] / "fixtures" / "model-configs"
    code, _, err = run(tmp_path, ENGINE.replace("NAME", "a"), "--hf-config-dir", str(configs), capsys=capsys)
    assert (code, err) == (0, "")
    # a checkpoint on a PVC: no file name to look up, so the note names plan --model-config instead
    pvc = ENGINE.replace("NAME", "a").replace("hf://meta-llama/Llama-3.1-8B-Instruct", "pvc://models/llama")
    code, _, err = run(tmp_path, pvc, "--hf-config-dir", str(configs), capsys=capsys)
    assert code == 0
    assert "were skipped (spec.model.source 'pvc://models/llama' is not hf://" in err, err
    assert err.endswith("trtllm-operator plan --model-config <its config.json> runs them now\n"), err


def test_several_engines_need_a_name(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = ENGINE.replace("NAME", "a") + "---\n" + ENGINE.replace("NAME", "b")
    code, _, err = run(tmp_path, text, capsys=capsys)
    assert code == 2 and "2 LLMEngines" in err and "--name" in err
    code, out, _ = run(tmp_path, text, "--name", "b", "--termination-log", "/tmp/t", capsys=capsys)
    assert code == 0
    assert yaml.safe_load(out.partition("\n")[2])["output"]["termination_log"] == "/tmp/t"


@pytest.mark.parametrize(
    ("text", "message"),
    [(DEPLOYMENT, "no LLMEngine"), ("kind: [unclosed", "cannot read YAML")],
)
def test_bad_input_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, message: str
) -> None:
    code, _, err = run(tmp_path, text, capsys=capsys)
    assert code == 2 and message in err


def _manifest(backend: str, compile_status: str, **extra: object) -> dict[str, object]:
    from engine_builder.package import manifest_digest  # noqa: PLC0415
    from engine_builder.spec import engine_key  # noqa: PLC0415

    key_inputs = {"backend": backend, "model": {"uri": "hf://org/tiny"}}
    manifest: dict[str, object] = {
        "engineKey": engine_key(key_inputs),
        "keyInputs": key_inputs,
        "backend": backend,
        "runtimeImage": "nvcr.io/nvidia/tritonserver:26.03-trtllm-python-py3",
        "target": {"gpuProduct": "NVIDIA-H100-80GB-HBM3", "sm": 90},
        "compile": {
            "status": compile_status,
            "reason": "--skip-compile" if compile_status == "skipped" else None,
        },
        "files": [{"path": "checkpoint/rank0.safetensors", "size": 4096, "sha256": "0" * 64}],
        **extra,
    }
    manifest["manifestDigest"] = manifest_digest(manifest)
    return manifest


@pytest.mark.parametrize(
    ("backend", "compile_status", "extra", "partial"),
    [
        ("tensorrt", "done", {}, False),
        ("tensorrt", "skipped", {}, True),  # a manifest from before "missing" existed
        ("tensorrt", "skipped", {"partial": True, "missing": ["engine/ (compile skipped)"]}, True),
        ("pytorch", "skipped", {}, False),  # the pytorch backend serves the checkpoint: no engine needed
    ],
)
def test_import_refuses_a_partial_artifact_unless_allowed(
    backend: str, compile_status: str, extra: dict[str, object], partial: bool
) -> None:
    from trtllm_operator.commands.cache import (  # noqa: PLC0415
        PartialArtifactError,
        record_from_manifest,
        storage_from_uri,
    )

    manifest = _manifest(backend, compile_status, **extra)
    storage = storage_from_uri("pvc://engines")
    if partial:
        with pytest.raises(PartialArtifactError, match="--allow-partial") as info:
            record_from_manifest(manifest, storage, "2026-11-29T20:00:00Z")
        assert "--skip-compile" in str(info.value)
    record = record_from_manifest(manifest, storage, "2026-11-29T20:00:00Z", allow_partial=True)
    assert record["partial"] is partial
    assert bool(record["missing"]) is partial
    if not partial:
        assert record_from_manifest(manifest, storage, "2026-11-29T20:00:00Z")["partial"] is False


def test_import_of_a_partial_artifact_exits_2_before_any_api_call(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import json  # noqa: PLC0415

    path = tmp_path / "manifest.json"
    path.write_text(json.dumps(_manifest("tensorrt", "skipped")))
    argv = ["cache", "import", "--manifest", str(path), "-n", "default", "--storage", "pvc://engines"]
    # an unreachable kubeconfig: the refusal must come before any API call
    code = main([*argv, "--kubeconfig", str(tmp_path / "missing-kubeconfig")])
    err = capsys.readouterr().err
    assert code == 2
    assert "partial" in err and "--allow-partial" in err and "compile skipped" in err


def test_cache_list_with_a_bad_kubeconfig_is_one_line_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "kubeconfig"
    bad.write_text("garbage: [\n")
    assert main(["cache", "list", "-n", "x", "--kubeconfig", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"trtllm-operator cache list: error: cannot load kubeconfig {bad}:")
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1


#: A build id as engine_builder.package.new_build_id writes it (UTC time, 6 random hex digits).
BUILD_ID = "20261201t100000z-3f9a1c"


@pytest.mark.parametrize(
    ("storage_uri", "namespace", "artifact_uri"),
    [
        ("pvc://engines", "ml", "pvc://engines/{key}-" + BUILD_ID),
        ("pvc://engines/team/a", "ml", "pvc://engines/team/a/{key}-" + BUILD_ID),
        ("s3://bucket/cache", "ml", "s3://bucket/cache/ml/{key}-" + BUILD_ID),
        ("pvc://engines", "ml", "pvc://engines/{key}"),  # the plain directory, named explicitly
    ],
)
def test_import_records_a_rebuilt_write_once_directory(
    storage_uri: str, namespace: str, artifact_uri: str
) -> None:
    """#24 write-once artifacts: a rebuild of a key whose <key>/ was taken publishes
    <key>-<build id>/; import records that directory (not <root>/<key>) once the manifest's key
    matches the directory's."""
    from trtllm_operator.commands.cache import record_from_manifest, storage_from_uri  # noqa: PLC0415

    manifest = _manifest("pytorch", "skipped")
    uri = artifact_uri.format(key=manifest["engineKey"])
    storage = storage_from_uri(storage_uri)
    record = record_from_manifest(
        manifest, storage, "2026-12-01T10:05:00Z", namespace=namespace, artifact_uri=uri
    )
    assert record["uri"] == uri
    assert record["engineKey"] == manifest["engineKey"]
    # without --artifact-uri: <root>/<key>, as before
    plain = record_from_manifest(manifest, storage, "2026-12-01T10:05:00Z", namespace=namespace)
    assert plain["uri"] == uri.removesuffix("-" + BUILD_ID)


@pytest.mark.parametrize(
    ("artifact_uri", "message"),
    [
        ("pvc://engines/{other}-" + BUILD_ID, "names engine key"),  # another key's directory
        ("pvc://other-claim/{key}-" + BUILD_ID, "not a directory directly under"),  # another storage
        ("pvc://engines/nested/{key}-" + BUILD_ID, "not a directory directly under"),
        ("pvc://engines/{key}-latest", "not an artifact directory name"),  # no build id
        ("pvc://engines/..", "not a directory directly under"),
        ("s3://bucket/cache/ml/{key}-" + BUILD_ID, "not a directory directly under"),  # S3 for a PVC
    ],
)
def test_import_refuses_an_artifact_uri_of_another_key_or_place(artifact_uri: str, message: str) -> None:
    from trtllm_operator.commands.cache import record_from_manifest, storage_from_uri  # noqa: PLC0415

    manifest = _manifest("pytorch", "skipped")
    uri = artifact_uri.format(key=manifest["engineKey"], other="ab" * 32)
    with pytest.raises(ValueError, match=message) as info:
        record_from_manifest(
            manifest, storage_from_uri("pvc://engines"), "2026-12-01T10:05:00Z", artifact_uri=uri
        )
    assert "--artifact-uri" in str(info.value)
    assert f"pvc://engines/{manifest['engineKey']}[-<build id>]" in str(info.value)


def test_import_of_a_bad_artifact_uri_exits_2_before_any_api_call(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import json  # noqa: PLC0415

    manifest = _manifest("pytorch", "skipped")
    path = tmp_path / "manifest.json"
    path.write_text(json.dumps(manifest))
    argv = ["cache", "import", "--manifest", str(path), "-n", "ml", "--storage", "s3://bucket/cache"]
    other_namespace = f"s3://bucket/cache/team-b/{manifest['engineKey']}-{BUILD_ID}"
    code = main(
        [*argv, "--artifact-uri", other_namespace, "--kubeconfig", str(tmp_path / "missing-kubeconfig")]
    )
    err = capsys.readouterr().err
    assert code == 2
    assert "--artifact-uri" in err and f"s3://bucket/cache/ml/{manifest['engineKey']}[-<build id>]" in err


REPO = Path(__file__).resolve().parents[2]
INVALID_ENGINES = sorted((REPO / "tests" / "fixtures" / "invalid").glob("engine-*.yaml"))


@pytest.mark.parametrize("path", INVALID_ENGINES, ids=lambda p: p.name)
def test_a_manifest_the_api_server_refuses_is_refused(path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Fresh-user trial: ``cache spec`` printed a build spec (exit 0) for manifests ``render`` and the
    API server refuse (``:latest`` images, maxInputLen = maxSeqLen, ...): it runs render's checks."""
    text = path.read_text(encoding="utf-8")
    expects = [line[len("# expect: ") :] for line in text.splitlines() if line.startswith("# expect: ")]
    code = main(["cache", "spec", "-f", str(path)])
    out, err = capsys.readouterr()
    assert code == 2, (path.name, out)
    assert out == ""
    for fragment in expects:
        assert fragment in err, (fragment, err)


def test_hf_config_dir_and_filename_are_read_as_render_reads_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Fresh-user trial 50 X7: ``--hf-config-dir`` naming a file or a missing path was ignored (rc 0,
    the planner's checks skipped, nothing on stderr), though ``render --model-config`` takes a file and
    refuses a missing path; ``-f -`` and ``-f DIR`` failed with a raw errno. Now a missing path is one
    line, rc 2; the model's config.json (or a model folder) runs the checks; -f reads as render's -f."""
    import io  # noqa: PLC0415

    configs = Path(__file__).resolve().parents[1] / "fixtures" / "model-configs"
    deepseek = (
        ENGINE.replace("NAME", "ds")
        .replace("hf://meta-llama/Llama-3.1-8B-Instruct", "hf://deepseek-ai/DeepSeek-V3")
        .replace("NVIDIA-H100-80GB-HBM3", "NVIDIA-H200")
        .replace("quantization: {format: fp8}", "quantization: {format: fp8}\n  parallelism: {tensor: 8}")
    )
    code, _, err = run(tmp_path, deepseek, "--hf-config-dir", str(configs), capsys=capsys)
    assert code == 2 and "deepseek_v3" in err, err  # the directory: refused on the tensorrt backend
    file = configs / "deepseek-ai__DeepSeek-V3.json"
    code, out, err = run(tmp_path, deepseek, "--hf-config-dir", str(file), capsys=capsys)
    assert code == 2 and "deepseek_v3" in err and out == "", err  # the file: the same checks
    folder = tmp_path / "DeepSeek-V3"
    folder.mkdir()
    (folder / "config.json").write_text(file.read_text())
    code, _, err = run(tmp_path, deepseek, "--hf-config-dir", str(folder), capsys=capsys)
    assert code == 2 and "deepseek_v3" in err, err  # a model folder: its config.json
    missing = tmp_path / "nonexistent-dir"
    code, out, err = run(tmp_path, deepseek, "--hf-config-dir", str(missing), capsys=capsys)
    assert (code, out) == (2, "")
    prefix = "trtllm-operator cache spec: error: "
    assert err == f"{prefix}--hf-config-dir: cannot read {missing}: no such file or directory\n"
    (tmp_path / "bad.json").write_text("[1, 2]")
    code, _, err = run(tmp_path, deepseek, "--hf-config-dir", str(tmp_path / "bad.json"), capsys=capsys)
    assert code == 2 and "--hf-config-dir:" in err and "is not a JSON object" in err, err
    # -f - (standard input) and -f DIR, as render reads them
    monkeypatch.setattr("sys.stdin", io.StringIO(ENGINE.replace("NAME", "a")))
    assert main(["cache", "spec", "-f", "-"]) == 0
    assert capsys.readouterr().out.startswith("# engine key: ")
    folder = tmp_path / "manifests"
    folder.mkdir()
    (folder / "engine.yaml").write_text(ENGINE.replace("NAME", "a"))
    assert main(["cache", "spec", "-f", str(folder)]) == 0
    assert capsys.readouterr().out.startswith("# engine key: ")
    assert main(["cache", "spec", "-f", str(tmp_path / "nope.yaml")]) == 2
    err = capsys.readouterr().err
    assert err == f"{prefix}{tmp_path / 'nope.yaml'}: cannot read YAML: No such file or directory\n"
