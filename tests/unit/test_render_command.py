"""``trtllm-operator render``: every child manifest of the examples, and refusals with exit codes."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml

from trtllm_operator.cli import main

REPO = Path(__file__).resolve().parents[2]
K8S_SCHEMA = "1.34.0"
EXAMPLES = sorted(
    p.name for p in (REPO / "examples").glob("*.yaml") if "kind: LLMDeployment" in p.read_text()
)


def inference_pool_schema() -> dict[str, Any]:
    """``openAPIV3Schema`` of the vendored upstream InferencePool CRD (gateway-api-inference-extension
    v1.6.0), strict."""
    from trtllm_operator.commands._schema import _strict  # noqa: PLC0415

    crd = yaml.safe_load(
        (REPO / "tests/fixtures/upstream/gateway-api-inference-extension-v1.6.0")
        .joinpath("inference.networking.k8s.io_inferencepools.yaml")
        .read_text()
    )
    schema: dict[str, Any] = _strict(crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"])
    return schema


def _needs_lws(example: str) -> list[str]:
    return ["--lws"] if "multiNode: true" in (REPO / "examples" / example).read_text() else []


@pytest.mark.parametrize("example", EXAMPLES)
def test_examples_render_every_child(example: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["render", "-f", str(REPO / "examples" / example), *_needs_lws(example)]) == 0
    docs = list(yaml.safe_load_all(capsys.readouterr().out))
    kinds = sorted(d["kind"] for d in docs)
    assert kinds.count("ConfigMap") == kinds.count("Service") == kinds.count("PodDisruptionBudget") >= 1
    workloads = [d for d in docs if d["kind"] in ("Deployment", "LeaderWorkerSet")]
    assert len(workloads) == kinds.count("Service")
    for cm in (d for d in docs if d["kind"] == "ConfigMap"):
        assert not any("${" in v for k, v in cm["data"].items() if not k.endswith(".sh"))
    for doc in docs:
        if doc["kind"] == "InferencePool":  # upstream's CRD (strict: what the API server would prune fails)
            jsonschema.Draft7Validator(inference_pool_schema()).validate(doc)
        elif doc["kind"] != "LeaderWorkerSet":  # not a built-in kind
            # no uid before the LLMDeployment is created: no ownerReferences (an empty uid is refused
            # by the API server; tests/integration/test_render_dry_run.py applies the output)
            assert "ownerReferences" not in doc["metadata"], doc["metadata"]
            # The control plane's version is 1.34; the newest schema the validator ships is strict
            # about unknown fields, which is the point of the check.
            assert kubernetes_validate.validate(doc, K8S_SCHEMA, strict=True)
    workload = workloads[0]
    if workload["kind"] == "Deployment":  # the check is real: an unknown pod field is rejected
        workload["spec"]["template"]["spec"]["gpuCount"] = 1
        with pytest.raises(kubernetes_validate.ValidationError):
            kubernetes_validate.validate(workload, K8S_SCHEMA, strict=True)


def test_separate_engine_file_and_refusals(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    docs = list(yaml.safe_load_all((REPO / "examples" / "llama-3.1-8b-fp8-h100.yaml").read_text()))
    engine = next(d for d in docs if d["kind"] == "LLMEngine")
    dep = next(d for d in docs if d["kind"] == "LLMDeployment")
    (tmp_path / "engine.yaml").write_text(yaml.safe_dump(engine))
    (tmp_path / "dep.yaml").write_text(yaml.safe_dump(dep))
    assert main(["render", "-f", str(tmp_path / "dep.yaml"), "--engine", str(tmp_path / "engine.yaml")]) == 0
    out = list(yaml.safe_load_all(capsys.readouterr().out))
    deployment = next(d for d in out if d["kind"] == "Deployment")
    key = deployment["metadata"]["annotations"]["llm.trtllm-operator.dev/engine-key"]
    assert len(key) == 64
    assert deployment["spec"]["template"]["spec"]["volumes"][0]["persistentVolumeClaim"]["claimName"] == (
        "llama-3-1-8b-fp8-artifacts"
    )

    assert main(["render", "-f", str(tmp_path / "dep.yaml")]) == 2  # engine missing
    assert "spec.engineRef.name" in capsys.readouterr().err

    dep["spec"]["server"]["image"] = "nvcr.io/nvidia/tritonserver:25.05-trtllm-python-py3"
    (tmp_path / "dep.yaml").write_text(yaml.safe_dump(dep))
    assert main(["render", "-f", str(tmp_path / "dep.yaml"), "--engine", str(tmp_path / "engine.yaml")]) == 1
    assert "EngineIncompatible" in capsys.readouterr().err

    dep["spec"]["server"].pop("image")
    engine["spec"]["parallelism"] = {"tensor": 8, "pipeline": 2}
    (tmp_path / "dep.yaml").write_text(yaml.safe_dump(dep))
    (tmp_path / "engine.yaml").write_text(yaml.safe_dump(engine))
    args = ["render", "-f", str(tmp_path / "dep.yaml"), "--engine", str(tmp_path / "engine.yaml")]
    assert main(args) == 1
    assert "LeaderWorkerSetRequired" in capsys.readouterr().err
    assert main([*args, "--lws"]) == 0
    assert "kind: LeaderWorkerSet" in capsys.readouterr().out


def test_multi_node_example_renders_the_leader_and_worker_scripts(capsys: pytest.CaptureFixture[str]) -> None:
    """Acceptance (issue 18): ``render`` of a multi-node example shows the fixed scripts: the leader
    waits for its worker before ``mpirun``, the worker assembles the model repository, then sshd."""
    example = REPO / "examples" / "llama-3.1-405b-fp8-multinode.yaml"
    assert main(["render", "-f", str(example)]) == 1  # without LeaderWorkerSet: refused, not half-rendered
    assert "LeaderWorkerSetRequired" in capsys.readouterr().err
    assert main(["render", "-f", str(example), "--lws"]) == 0
    docs = list(yaml.safe_load_all(capsys.readouterr().out))
    (cm,) = (d for d in docs if d["kind"] == "ConfigMap")
    (lws,) = (d for d in docs if d["kind"] == "LeaderWorkerSet")
    (svc,) = (d for d in docs if d["kind"] == "Service")
    assert lws["metadata"]["name"] == "llama-3-1-405b-lws" and svc["metadata"]["name"] == "llama-3-1-405b"
    leader, worker = cm["data"]["launch.sh"], cm["data"]["worker.sh"]
    assert leader.index("waiting for worker") < leader.index('"$mpirun_bin" --allow-run-as-root')
    assert worker.index('cp -rL "/etc/trtllm-operator/model-repository/."') < worker.index(
        "exec /usr/sbin/sshd"
    )
    assert "rank-env.sh" in cm["data"]
    template = lws["spec"]["leaderWorkerTemplate"]
    assert (
        template["workerTemplate"]["spec"]["containers"][0]["command"][-1] == "/etc/trtllm-operator/worker.sh"
    )


def _example_pair() -> tuple[dict[str, Any], dict[str, Any]]:
    docs = list(yaml.safe_load_all((REPO / "examples" / "llama-3.1-8b-fp8-h100.yaml").read_text()))
    return (
        next(d for d in docs if d["kind"] == "LLMDeployment"),
        next(d for d in docs if d["kind"] == "LLMEngine"),
    )


def _set(doc: dict[str, Any], path: str, value: Any) -> None:
    *parents, last = path.split(".")
    for key in parents:
        doc = doc.setdefault(key, {})
    if value is _DELETE:
        doc.pop(last, None)
    else:
        doc[last] = value


_DELETE = object()


@pytest.mark.parametrize(
    ("kind", "path", "value", "fragments"),
    [
        ("LLMDeployment", "metadata.name", _DELETE, ["metadata.name: missing"]),
        ("LLMDeployment", "metadata.namespace", "BAD NS", ["metadata.namespace", "DNS-1123 label"]),
        ("LLMDeployment", "spec.bogusField", 1, ["spec.bogusField: unknown field"]),
        ("LLMDeployment", "spec.server.bogus", "x", ["spec.server.bogus: unknown field"]),
        ("LLMDeployment", "spec.replicas", -1, ["spec.replicas", "greater than or equal to 0"]),
        (
            "LLMDeployment",
            "spec.autoscaling",
            {"mode": "builtin", "minReplicas": 5, "maxReplicas": 2},
            ["spec.autoscaling.minReplicas", "minReplicas 5 must be less than or equal to maxReplicas 2"],
        ),
        ("LLMEngine", "spec.quantization.format", "fp4", ["spec.quantization.format", "Unsupported value"]),
        ("LLMEngine", "spec.parallelism.tensr", 2, ["spec.parallelism.tensr: unknown field"]),
        # YAML's .nan / .inf, which kubectl cannot turn into JSON; every range check passes NaN (trial 51 Y8)
        (
            "LLMDeployment",
            "spec.server.kvCacheFreeGpuMemFraction",
            float("nan"),
            [
                "spec.server.kvCacheFreeGpuMemFraction: Invalid value: .nan: not a finite number",
                "error converting YAML to JSON: json: unsupported value: NaN",
            ],
        ),
        ("LLMEngine", "spec.build.maxBatchSize", -float("inf"), ["maxBatchSize: Invalid value: -.inf"]),
    ],
)
def test_manifest_the_api_server_rejects_exits_2(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    kind: str,
    path: str,
    value: Any,
    fragments: list[str],
) -> None:
    dep, engine = _example_pair()
    _set(dep if kind == "LLMDeployment" else engine, path, value)
    (tmp_path / "all.yaml").write_text(yaml.safe_dump_all([engine, dep]))
    assert main(["render", "-f", str(tmp_path / "all.yaml")]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    for fragment in fragments:
        assert fragment in err, err


@pytest.mark.parametrize(
    ("flags", "fragment"),
    [
        (["--gpus-per-node", "0"], "--gpus-per-node must be >= 1"),
        (["--namespace", "BAD NS"], "--namespace: 'BAD NS' is not a valid namespace"),
        (["--namespace=-x"], "DNS-1123 label"),
        (["--namespace", "a" * 64], "DNS-1123 label"),
        (["--operator-namespace", "Not_NS"], "--operator-namespace: 'Not_NS' is not a valid namespace"),
    ],
)
def test_bad_flags_exit_2(flags: list[str], fragment: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["render", "-f", str(REPO / "examples" / "llama-3.1-8b-fp8-h100.yaml"), *flags]) == 2
    assert fragment in capsys.readouterr().err


CORPUS = sorted((REPO / "tests" / "fixtures" / "invalid").glob("*.yaml"))


@pytest.mark.parametrize("path", CORPUS, ids=lambda p: p.name)
def test_offline_check_matches_the_api_server_corpus(path: Path) -> None:
    """Every case the API server refuses (tests/integration/test_api_admission.py) is refused offline
    with the same message fragments: cel-python plus the Kubernetes CEL functions our rules use."""
    from trtllm_operator.commands._schema import manifest_errors  # noqa: PLC0415

    text = path.read_text(encoding="utf-8")
    expects = [line[len("# expect: ") :] for line in text.splitlines() if line.startswith("# expect: ")]
    errors = manifest_errors(yaml.safe_load(text))
    assert errors, f"{path.name}: not caught offline"
    for fragment in expects:
        assert any(fragment in e for e in errors), (fragment, errors)


ENGINE_CORPUS = [p for p in CORPUS if "\nkind: LLMEngine\n" in p.read_text(encoding="utf-8")]


@pytest.mark.parametrize("path", ENGINE_CORPUS, ids=lambda p: p.name)
def test_render_of_an_engine_alone_prints_its_errors(path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Fresh-user trial 44 F17: ``render -f`` of an engine manifest said only "no LLMDeployment in
    FILE", never the engine's errors (119 of the corpus's 200 cases). Each is now refused with its
    expected messages, as render refuses it beside a deployment, then "nothing to render"."""
    text = path.read_text(encoding="utf-8")
    expects = [line[len("# expect: ") :] for line in text.splitlines() if line.startswith("# expect: ")]
    name = yaml.safe_load(text)["metadata"]["name"]
    assert main(["render", "-f", str(path)]) == 2
    lines = capsys.readouterr().err.splitlines()
    errors, last = lines[:-1], lines[-1]
    assert errors and all(e.startswith(f"trtllm-operator render: error: LLMEngine {name}: ") for e in errors)
    for fragment in expects:
        assert any(fragment in e for e in errors), (fragment, errors)
    assert last == (
        f"trtllm-operator render: error: no LLMDeployment in {path}: nothing to render (render prints an "
        f"LLMDeployment's children); it holds LLMEngine {name} (refused: the errors above)"
    )


def test_render_of_valid_engines_alone_names_them(capsys: pytest.CaptureFixture[str]) -> None:
    example = REPO / "examples" / "llama-3.1-8b-max-seq-len.yaml"
    assert main(["render", "-f", str(example)]) == 2
    assert capsys.readouterr().err == (
        f"trtllm-operator render: error: no LLMDeployment in {example}: nothing to render (render prints "
        "an LLMDeployment's children); it holds LLMEngine llama-3-1-8b-derived-len (no error), LLMEngine "
        "llama-3-1-8b-full-context (no error)\n"
    )


@pytest.mark.parametrize(
    "path", sorted((REPO / "tests" / "fixtures" / "valid").glob("*.yaml")), ids=lambda p: p.name
)
def test_offline_check_accepts_the_valid_fixtures(path: Path) -> None:
    from trtllm_operator.commands._schema import manifest_errors  # noqa: PLC0415

    for doc in yaml.safe_load_all(path.read_text(encoding="utf-8")):
        if isinstance(doc, dict):
            assert manifest_errors(doc) == []


def test_model_config_runs_the_planner_checks_the_operator_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without the model's config.json the planner's checks cannot run: render says so on stderr;
    with ``--model-config`` a tensor parallelism that does not divide Llama-3.1-8B's 32 attention
    heads (its public config.json) is refused as the operator refuses it (InvalidSpec)."""
    dep, engine = _example_pair()
    engine["spec"]["parallelism"]["tensor"] = 3
    (tmp_path / "all.yaml").write_text(yaml.safe_dump_all([engine, dep]))
    config = REPO / "tests" / "fixtures" / "model-configs" / "meta-llama__Llama-3.1-8B-Instruct.json"
    assert main(["render", "-f", str(tmp_path / "all.yaml")]) == 0
    assert "--model-config" in capsys.readouterr().err
    assert main(["render", "-f", str(tmp_path / "all.yaml"), "--model-config", str(config)]) == 2
    err = capsys.readouterr().err
    assert "spec.parallelism.tensor: tensor parallelism 3 does not divide the 32 attention heads" in err
    assert ".;" not in err  # several reasons read as sentences
    engine["spec"]["parallelism"]["tensor"] = 2
    (tmp_path / "all.yaml").write_text(yaml.safe_dump_all([engine, dep]))
    assert (
        main(["render", "-n", "team-a", "-f", str(tmp_path / "all.yaml"), "--model-config", str(config)]) == 0
    )
    captured = capsys.readouterr()
    assert "skipped" not in captured.err
    assert all(d["metadata"]["namespace"] == "team-a" for d in yaml.safe_load_all(captured.out))
    # A directory is read as the operator's hfConfigDir (trial 44 F16): without the engine's file, skipped.
    assert main(["render", "-f", str(tmp_path / "all.yaml"), "--model-config", str(tmp_path)]) == 0
    assert (
        f"no meta-llama__Llama-3.1-8B-Instruct.json in --model-config {tmp_path}" in capsys.readouterr().err
    )
    (tmp_path / "config.json").write_text("{")
    assert (
        main(["render", "-f", str(tmp_path / "all.yaml"), "--model-config", str(tmp_path / "config.json")])
        == 2
    )
    assert "--model-config: cannot read" in capsys.readouterr().err


def test_deepseek_v3_on_the_tensorrt_backend_is_refused_and_plan_takes_the_backend(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Fresh-user trial 48 V1: DeepSeek-V3 with the default backend (tensorrt) rendered and planned
    with rc 0, though trtllm-build has no DeepseekV3ForCausalLM; render and plan refuse it naming
    spec.backend and the fix, and accept it with backend pytorch (plan's --backend)."""
    dep, engine = _example_pair()
    engine["spec"]["model"]["source"] = "hf://deepseek-ai/DeepSeek-V3"
    engine["spec"]["gpu"]["product"] = "NVIDIA-H200"
    engine["spec"]["parallelism"]["tensor"] = 8
    engine["spec"]["build"]["maxBatchSize"] = 32
    engine["spec"]["quantization"]["kvCacheDtype"] = "auto"
    config = REPO / "tests" / "fixtures" / "model-configs" / "deepseek-ai__DeepSeek-V3.json"
    for backend, code in (("tensorrt", 2), ("pytorch", 0)):
        engine["spec"]["backend"] = backend
        (tmp_path / "all.yaml").write_text(yaml.safe_dump_all([engine, dep]))
        assert main(["render", "-f", str(tmp_path / "all.yaml"), "--model-config", str(config)]) == code
        err = capsys.readouterr().err
        assert ("spec.backend: backend tensorrt cannot build deepseek_v3" in err) == (code == 2), err
    args = ["plan", "--model-config", str(config), "--gpu", "H200", "--tp", "8", "--quantization", "fp8"]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith("trtllm-operator plan: error: spec.backend (--backend): backend tensorrt cannot")
    assert err.rstrip().endswith("Pass --backend pytorch")
    assert main([*args, "--backend", "pytorch"]) == 0


def test_plan_refuses_mxfp8_on_the_tensorrt_backend_as_the_api_does(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Fresh-user trial 48 V5: ``plan --quantization mxfp8`` answered "fits" (rc 0) with the default
    backend tensorrt, which the LLMEngine API refuses for mxfp8; plan now refuses it too (the same
    formats_without_backend table) and plans it with ``--backend pytorch``. plan, the API's CEL rule
    (what render prints) and the builder's spec check say it in one text (formats.format_refusal;
    they had three wordings)."""
    from engine_builder.pipeline import _check_spec_against_model  # noqa: PLC0415
    from engine_builder.planner.formats import format_refusal  # noqa: PLC0415
    from engine_builder.report import BuildError  # noqa: PLC0415
    from engine_builder.spec import BuildSpec  # noqa: PLC0415
    from trtllm_operator.commands._schema import manifest_errors  # noqa: PLC0415

    config = REPO / "tests" / "fixtures" / "model-configs" / "meta-llama__Llama-3.1-8B-Instruct.json"
    args = ["plan", "--model-config", str(config), "--gpu", "B200", "--quantization", "mxfp8"]
    assert main(args) == 2
    err = capsys.readouterr().err
    what, fix = format_refusal("tensorrt", "mxfp8")
    assert f"spec.quantization.format (--quantization): {what}. Fix: {fix}." in err, err
    assert main([*args, "--backend", "pytorch"]) == 0
    # the API's rule names every format the backend refuses: mxfp8 alone on tensorrt
    assert format_refusal("tensorrt") == (what, fix)
    engine = yaml.safe_load(
        (REPO / "tests" / "fixtures" / "invalid" / "engine-mxfp8-on-tensorrt.yaml").read_text()
    )
    assert any(f"{what}; {fix}" in e for e in manifest_errors(engine)), manifest_errors(engine)
    spec = BuildSpec.model_validate(
        {
            "model": {"uri": "hf://org/model", "revision": "abc"},
            "runtime_image": "nvcr.io/nvidia/tritonserver:25.05-trtllm-python-py3",
            "target": {"gpu_product": "NVIDIA-B200", "sm": 100},
            "quantization": {"format": "mxfp8"},
        }
    )
    tiny = {"num_attention_heads": 4, "num_key_value_heads": 2, "num_hidden_layers": 2}
    with pytest.raises(BuildError) as refused:
        _check_spec_against_model(spec, tiny)
    assert (refused.value.field, refused.value.message) == ("quantization.format", f"{what}; {fix}")


def test_plan_refuses_an_int8_kv_cache_on_the_pytorch_backend_in_the_apis_words(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Fresh-user trial 49 W3: ``plan --backend pytorch --kv-cache-dtype int8`` answered "fits" (rc 0),
    while render and the API refuse it. plan now refuses it with the API's words: one text
    (formats.PYTORCH_KV_REFUSAL) that the CEL rule says as "what; fix" and plan as "what. Fix: fix"."""
    from engine_builder.planner.formats import PYTORCH_KV_REFUSAL  # noqa: PLC0415
    from trtllm_operator.commands._schema import manifest_errors  # noqa: PLC0415

    what, fix = PYTORCH_KV_REFUSAL
    engine = next(
        d
        for d in yaml.safe_load_all((REPO / "examples" / "qwen2.5-7b-pytorch.yaml").read_text())
        if d["kind"] == "LLMEngine"
    )
    engine["spec"]["quantization"]["kvCacheDtype"] = "int8"
    assert any(f"{what}; {fix}" in e for e in manifest_errors(engine))  # what render prints
    config = REPO / "tests" / "fixtures" / "model-configs" / "meta-llama__Llama-3.1-8B-Instruct.json"
    args = ["plan", "--model-config", str(config), "--gpu", "H100", "--quantization", "fp8"]
    assert main([*args, "--kv-cache-dtype", "int8", "--backend", "pytorch"]) == 2
    err = capsys.readouterr().err
    assert f"spec.quantization.kvCacheDtype (--kv-cache-dtype): {what}. Fix: {fix}." in err, err
    assert main([*args, "--kv-cache-dtype", "int8"]) == 2  # the tensorrt backend: another rule (trial 51 Y6)
    assert PYTORCH_KV_REFUSAL[0] not in capsys.readouterr().err
    assert main([*args, "--kv-cache-dtype", "fp8", "--backend", "pytorch"]) == 0


def test_plan_refuses_kv_caches_that_turn_paged_context_fmha_off_in_the_apis_words(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Fresh-user trial 51 Y6: ``plan --kv-cache-dtype int8`` (tensorrt) and ``--quantization none
    --kv-cache-dtype fp8`` answered "fits" (rc 0), while the API refuses both at the default
    build.pagedContextFMHA: true; and plan's capacity fix offered "an FP8 KV cache or an INT8 KV cache"
    for format none. plan now refuses them with the API's words (one text,
    formats.paged_context_fmha_refusal, that the CEL rules say as "what; fix"), its fix says that plan
    assumes the default, and the capacity fix offers them only with build.pagedContextFMHA: false."""
    from engine_builder.planner.formats import paged_context_fmha_refusal  # noqa: PLC0415
    from trtllm_operator.commands._schema import manifest_errors  # noqa: PLC0415

    engine = next(
        d
        for d in yaml.safe_load_all((REPO / "examples" / "llama-3.1-8b-fp8-h100.yaml").read_text())
        if d["kind"] == "LLMEngine"
    )
    config = REPO / "tests" / "fixtures" / "model-configs" / "meta-llama__Llama-3.1-8B-Instruct.json"
    args = ["plan", "--model-config", str(config), "--gpu", "H100"]
    for fmt, kv, flag in (
        ("fp8", "int8", "spec.quantization.kvCacheDtype (--kv-cache-dtype)"),
        ("int4_awq", "int8", "spec.quantization.kvCacheDtype (--kv-cache-dtype)"),
        ("none", "fp8", "spec.quantization.format (--quantization)"),
        ("int8_sq", "fp8", "spec.quantization.format (--quantization)"),
    ):
        what, fix = paged_context_fmha_refusal(kv, fmt)
        engine["spec"]["quantization"].update(format=fmt, kvCacheDtype=kv)
        engine["spec"].setdefault("build", {}).pop("pagedContextFMHA", None)
        assert any(f"{what}; {fix}" in e for e in manifest_errors(engine)), (fmt, kv)  # what render prints
        assert main([*args, "--quantization", fmt, "--kv-cache-dtype", kv]) == 2, (fmt, kv)
        err = capsys.readouterr().err
        assert f"{flag}: {what}. Fix: " in err, err
        assert (
            "set build.pagedContextFMHA: false in the LLMEngine (plan has no flag for it and assumes " in err
        )
        engine["spec"]["build"]["pagedContextFMHA"] = False  # the fix it offers is admitted
        assert not any("pagedContextFMHA" in e for e in manifest_errors(engine)), (fmt, kv)
    assert main([*args, "--quantization", "fp8", "--kv-cache-dtype", "fp8"]) == 0  # kept: no refusal
    capsys.readouterr()
    # the capacity fix (maxBatchSize above what the KV cache holds) for format none at the default
    big = REPO / "tests" / "fixtures" / "model-configs" / "meta-llama__Llama-3.1-70B-Instruct.json"
    over = [
        "--tp",
        "4",
        "--gpu",
        "H200",
        "--max-seq-len",
        "8192",
        "--max-batch-size",
        "256",
        "--output",
        "table",
    ]
    assert main(["plan", "--model-config", str(big), *over]) == 0
    out = capsys.readouterr().out
    assert (
        "use an FP8 or INT8 KV cache (spec.quantization.kvCacheDtype) with build.pagedContextFMHA: false"
        in out
    ), out
    assert "an FP8 KV cache or an INT8 KV cache" not in out


def test_plan_refuses_expert_parallelism_on_the_tensorrt_backend_in_the_apis_words(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Fresh-user trial 50 X5: ``plan --tp 2 --ep 2`` (default backend tensorrt) answered "fits" for
    Mixtral, while render and the API refuse expert parallelism on tensorrt. plan now refuses it with
    the API's words: one text (formats.TENSORRT_EP_REFUSAL) that the CEL rule fills as "what; fix"."""
    from engine_builder.planner.formats import TENSORRT_EP_REFUSAL  # noqa: PLC0415
    from trtllm_operator.commands._schema import manifest_errors  # noqa: PLC0415

    what, fix = TENSORRT_EP_REFUSAL
    engine = next(
        d
        for d in yaml.safe_load_all((REPO / "examples" / "mixtral-8x7b-int4-awq-tp2.yaml").read_text())
        if d["kind"] == "LLMEngine"
    )
    engine["spec"]["parallelism"]["expert"] = 2
    tp = engine["spec"]["parallelism"]["tensor"]
    said = f"{what % (2, tp)}; {fix % 2}"
    assert any(said in e for e in manifest_errors(engine)), manifest_errors(engine)  # what render prints
    config = REPO / "tests" / "fixtures" / "model-configs" / "mistralai__Mixtral-8x7B-v0.1.json"
    args = ["plan", "--model-config", str(config), "--gpu", "H100", "--tp", "2"]
    assert main([*args, "--ep", "2"]) == 2
    err = capsys.readouterr().err
    assert f"spec.parallelism.expert (--ep): {what % (2, 2)}. Fix: {fix % 2}." in err, err
    assert main([*args, "--ep", "2", "--backend", "pytorch"]) == 0
    assert main(args) == 0


def test_model_config_prints_the_planners_warnings_the_operator_records(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Trial 34 F4: ``render --model-config`` dropped the planner's warnings (maxSeqLen above
    Llama-3.1-8B's 131,072-token context; maxBatchSize above the sequences the KV cache holds), which
    the operator records in status.plan.warnings: each is a ``warning:`` line on stderr, exit 0."""
    dep, engine = _example_pair()
    engine["spec"]["build"] = {"maxSeqLen": 1_000_000, "maxBatchSize": 256}
    (tmp_path / "all.yaml").write_text(yaml.safe_dump_all([engine, dep]))
    config = REPO / "tests" / "fixtures" / "model-configs" / "meta-llama__Llama-3.1-8B-Instruct.json"
    assert main(["render", "-f", str(tmp_path / "all.yaml"), "--model-config", str(config)]) == 0
    prefix = "trtllm-operator render: warning: "  # commands.say (fresh-user trial 41)
    err = capsys.readouterr().err.splitlines()
    warned = [line.removeprefix(prefix) for line in err if line.startswith(prefix)]
    name = engine["metadata"]["name"]
    assert [w.split(": ", 2)[1] for w in warned] == ["spec.build.maxBatchSize", "spec.build.maxSeqLen"]
    assert all(w.startswith(f"LLMEngine {name}: ") for w in warned)
    assert "exceeds the model's max_position_embeddings 131072" in warned[1]
    assert warned[1].endswith("Fix: use maxSeqLen ≤ 131072.")


def test_lws_refusal_names_the_offline_flag(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["render", "-f", str(REPO / "examples" / "llama-3.1-405b-fp8-multinode.yaml")]) == 1
    assert "pass --lws" in capsys.readouterr().err


def test_a_stored_deployment_renders_owner_references_with_its_uid(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``kubectl get llmd x -o yaml | trtllm-operator render -f -``-style input: the LLMDeployment has
    a uid, so the children are owned by it as the operator's would be."""
    docs = list(yaml.safe_load_all((REPO / "examples" / "llama-3.1-8b-fp8-h100.yaml").read_text()))
    uid = "4f8a3c1e-0000-4000-8000-000000000001"
    for doc in docs:
        if doc["kind"] == "LLMDeployment":
            doc["metadata"]["uid"] = uid
    path = tmp_path / "stored.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    assert main(["render", "-f", str(path)]) == 0
    out = capsys.readouterr()
    rendered = list(yaml.safe_load_all(out.out))
    assert rendered and all(d["metadata"]["ownerReferences"][0]["uid"] == uid for d in rendered)
    assert "ownerReferences left out" not in out.err


def _secret_refs(obj: Any) -> set[str]:
    """Names of the Secrets a manifest's pods use: ``secretKeyRef`` / ``secretRef`` and Secret volumes."""
    found: set[str] = set()
    if isinstance(obj, dict):
        for key, value in obj.items():
            if key in ("secretKeyRef", "secretRef") and isinstance(value, dict):
                found.add(value["name"])
            elif key == "secret" and isinstance(value, dict) and "secretName" in value:
                found.add(value["secretName"])
            else:
                found |= _secret_refs(value)
    elif isinstance(obj, list):
        for item in obj:
            found |= _secret_refs(item)
    return found


def _user_secrets(obj: Any) -> set[str]:
    """Secrets the input manifests name themselves (``credentialsSecretRef``): the user's, not the
    operator's."""
    if isinstance(obj, dict):
        own = {obj["credentialsSecretRef"]["name"]} if "credentialsSecretRef" in obj else set()
        return own.union(*(_user_secrets(v) for v in obj.values()))
    if isinstance(obj, list):
        return set().union(*(_user_secrets(v) for v in obj))
    return set()


@pytest.mark.parametrize("example", EXAMPLES)
def test_output_says_which_secret_the_operator_creates_that_it_leaves_out(
    example: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A fresh-user trial: the pods of ``render``'s output reference ``<name>-credentials``, which the
    output did not hold and did not mention. Every Secret the pods reference that the user's
    manifests do not name is the operator's own, and the output's head comment names it as left out."""
    source = REPO / "examples" / example
    assert main(["render", "-f", str(source), *_needs_lws(example)]) == 0
    out = capsys.readouterr().out
    docs = [d for d in yaml.safe_load_all(out) if d]
    assert not [d for d in docs if d["kind"] == "Secret"]
    inputs = list(yaml.safe_load_all(source.read_text()))
    (dep,) = [d for d in inputs if d and d["kind"] == "LLMDeployment"]
    operators = _secret_refs(docs) - _user_secrets(inputs)
    assert operators == {f"{dep['metadata']['name']}-credentials"}, operators
    head = [line for line in out.splitlines() if line.startswith("#")]
    for name in operators:
        assert any(line.startswith(f"# - Secret {name} ") for line in head), head
    assert any("Not rendered" in line for line in head), head


def _metrics_peers(docs: list[dict[str, Any]]) -> list[str]:
    """Namespaces the NetworkPolicy admits to the metrics port (the rule without a podSelector peer)."""
    (policy,) = [d for d in docs if d["kind"] == "NetworkPolicy"]
    (rule,) = [
        r for r in policy["spec"]["ingress"]
        if r.get("from") and all("namespaceSelector" in p for p in r["from"]) and len(r["ports"]) == 1
        and r["ports"][0]["port"] == 8002
    ]  # fmt: skip
    (peer,) = rule["from"]
    (expr,) = peer["namespaceSelector"]["matchExpressions"]
    assert expr["key"] == "kubernetes.io/metadata.name" and expr["operator"] == "In"
    return list(expr["values"])


def test_operator_namespace_flag_sets_the_networkpolicys_metrics_peer(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The operator admits its own namespace to the serving pods' metrics port (its autoscaler
    scrapes it). Offline the namespace is unknown: ``--operator-namespace`` (the chart's release
    namespace) sets it; without it the output says which namespace it assumed and how to set it."""
    monkeypatch.delenv("TRTLLM_OPERATOR_OPERATOR_NAMESPACE", raising=False)
    example = str(REPO / "examples" / "llama-3.1-8b-fp8-h100.yaml")
    assert main(["render", "-f", example, "--operator-namespace", "trtllm-system"]) == 0
    out = capsys.readouterr().out
    assert _metrics_peers([d for d in yaml.safe_load_all(out) if d]) == ["monitoring", "trtllm-system"]
    assert "trtllm-system (--operator-namespace)" in out
    assert main(["render", "-f", example]) == 0
    out = capsys.readouterr().out
    (assumed,) = [
        ns for ns in _metrics_peers([d for d in yaml.safe_load_all(out) if d]) if ns != "monitoring"
    ]
    assert f"{assumed} (the operator's default; pass --operator-namespace <the chart's namespace>)" in out


def test_dash_reads_the_manifests_from_stdin(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``render -f -`` as ``kubectl apply -f -``: a fresh-user trial piped a manifest in and got
    "No such file or directory: '-'"."""
    example = REPO / "examples" / "llama-3.1-8b-fp8-h100.yaml"
    assert main(["render", "-f", str(example)]) == 0
    from_file = capsys.readouterr().out
    monkeypatch.setattr("sys.stdin", io.StringIO(example.read_text()))
    assert main(["render", "-f", "-"]) == 0
    assert capsys.readouterr().out == from_file
    dep, engine = _example_pair()
    (tmp_path / "dep.yaml").write_text(yaml.safe_dump(dep))
    monkeypatch.setattr("sys.stdin", io.StringIO(yaml.safe_dump(engine)))
    assert main(["render", "-f", str(tmp_path / "dep.yaml"), "--engine", "-"]) == 0
    assert "kind: Deployment" in capsys.readouterr().out
    assert main(["render", "-f", "-", "--engine", "-"]) == 2
    assert "both read standard input" in capsys.readouterr().err


def test_every_invalid_object_is_reported_in_one_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The trial fixed one object's errors, re-ran, and only then saw the next object's."""
    dep, engine = _example_pair()
    second = yaml.safe_load(yaml.safe_dump(dep))
    second["metadata"]["name"] = "second"
    _set(dep, "spec.server.bogus", "x")
    _set(second, "spec.replicas", -1)
    _set(engine, "spec.parallelism.tensr", 2)
    (tmp_path / "all.yaml").write_text(yaml.safe_dump_all([dep, second, engine]))
    assert main(["render", "-f", str(tmp_path / "all.yaml")]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    name, engine_name = dep["metadata"]["name"], engine["metadata"]["name"]
    assert f"error: LLMDeployment {name}: spec.server.bogus: unknown field" in captured.err
    assert "error: LLMDeployment second: spec.replicas" in captured.err
    assert f"error: LLMEngine {engine_name}: spec.parallelism.tensr: unknown field" in captured.err


def _workload_replicas(out: str) -> int:
    (workload,) = [d for d in yaml.safe_load_all(out) if d and d["kind"] == "Deployment"]
    return int(workload["spec"]["replicas"])


@pytest.mark.parametrize(
    ("replicas", "autoscaling", "rendered", "note"),
    [
        # The fresh-user trial: replicas 5, maxReplicas 2 rendered "replicas: 5"; the operator then
        # scaled the deployment to 2 at its autoscaler's first tick.
        (5, {"enabled": True, "mode": "builtin", "maxReplicas": 2}, 2, "sets it to maxReplicas 2"),
        (1, {"enabled": True, "mode": "hpa", "minReplicas": 3, "maxReplicas": 4}, 3, "to minReplicas 3"),
        (5, {"enabled": False, "maxReplicas": 2}, 5, None),  # nothing scales it
        (0, {"enabled": True, "minReplicas": 1, "maxReplicas": 2}, 0, None),  # 0: paused, as HPA
        (2, {"enabled": True, "maxReplicas": 2}, 2, None),
    ],
)
def test_render_shows_the_replicas_the_autoscaler_sets(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    replicas: int,
    autoscaling: dict[str, Any],
    rendered: int,
    note: str | None,
) -> None:
    dep, engine = _example_pair()
    dep["spec"]["replicas"] = replicas
    dep["spec"]["autoscaling"] = {
        **autoscaling,
        "targets": {"activeRequestUtilization": 0.5},
        **(
            {
                "metrics": {
                    "source": "prometheus",
                    "prometheusURL": "http://prometheus-operated.monitoring:9090",
                }
            }
            if autoscaling.get("mode") == "hpa"
            else {}
        ),
    }
    (tmp_path / "all.yaml").write_text(yaml.safe_dump_all([engine, dep]))
    assert main(["render", "-f", str(tmp_path / "all.yaml")]) == 0, capsys.readouterr().err
    captured = capsys.readouterr()
    assert _workload_replicas(captured.out) == rendered
    if note is None:
        assert "spec.replicas" not in captured.err
    else:
        assert f"spec.replicas {replicas} is outside spec.autoscaling" in captured.err
        assert note in captured.err


def test_a_directory_is_read_as_kubectl_apply_reads_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Fresh-user trial: ``render -f manifests/`` (as ``kubectl apply -f manifests/``) failed with
    "Is a directory". Its .yaml/.yml/.json files are read, sorted, not recursively; others ignored."""
    dep, engine = _example_pair()
    (tmp_path / "b-deployment.yml").write_text(yaml.safe_dump(dep))
    (tmp_path / "a-engine.json").write_text(json.dumps(engine))
    (tmp_path / "README.md").write_text("not: [yaml")
    (tmp_path / "nested").mkdir()
    (tmp_path / "nested" / "x.yaml").write_text("not: [yaml")
    assert main(["render", "-f", str(tmp_path)]) == 0, capsys.readouterr().err
    assert "kind: Deployment" in capsys.readouterr().out


@pytest.mark.parametrize(("engine_ns", "dep_ns", "flag"), [("a", "b", []), ("b", None, ["-n", "a"])])
def test_an_engine_in_another_namespace_is_named_not_reported_missing(
    engine_ns: str, dep_ns: str | None, flag: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Fresh-user trial 44 F9: the engine in namespace a, the deployment in b gave "not found; pass it
    with --engine", a fix that cannot help (the engine is in the input). engineRef resolves in the
    LLMDeployment's namespace (its namespace: metadata.namespace, else -n)."""
    dep, engine = _example_pair()
    engine["metadata"]["namespace"] = engine_ns
    if dep_ns is not None:
        dep["metadata"]["namespace"] = dep_ns
    (tmp_path / "ns.yaml").write_text(yaml.safe_dump_all([engine, dep]))
    assert main(["render", "-f", str(tmp_path / "ns.yaml"), *flag]) == 2
    err = capsys.readouterr().err
    ref = engine["metadata"]["name"]
    assert err == (
        f"trtllm-operator render: error: LLMDeployment {dep['metadata']['name']}: spec.engineRef.name "
        f"{ref!r} names no LLMEngine of its namespace {dep_ns or 'a'}: the input's LLMEngine {ref} is in "
        f"namespace {engine_ns}, and engineRef resolves in the LLMDeployment's namespace. Fix: put both "
        "in one namespace (metadata.namespace)\n"
    )


_PROMETHEUS = {"source": "prometheus", "prometheusURL": "http://prometheus-operated.monitoring:9090"}


@pytest.mark.parametrize(
    ("mode", "kind"), [("hpa", "HorizontalPodAutoscaler"), ("keda", "ScaledObject"), ("builtin", None)]
)
def test_render_prints_the_autoscaler_object_the_operator_applies(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], mode: str, kind: str | None
) -> None:
    """Fresh-user trial: ``render`` printed no HPA (mode hpa) nor ScaledObject (mode keda) though the
    operator creates them. It prints the object the autoscaler handler applies: the same function
    (render.external_autoscaler.desired_external_autoscaler) from the same spec and owner."""
    from trtllm_operator.api.deployment import LLMDeploymentSpec  # noqa: PLC0415
    from trtllm_operator.decide.serving_params import OwnerRef  # noqa: PLC0415
    from trtllm_operator.handlers import autoscaler as handler  # noqa: PLC0415
    from trtllm_operator.render.external_autoscaler import desired_external_autoscaler  # noqa: PLC0415

    dep, engine = _example_pair()
    dep["metadata"]["uid"] = "0b7a5f3e-1111-4222-8333-444455556666"  # stored: ownerReferences kept
    dep["metadata"]["namespace"] = "team-a"
    dep["spec"]["autoscaling"] = {
        "enabled": True,
        "mode": mode,
        "minReplicas": 1,
        "maxReplicas": 4,
        "targets": {"activeRequestUtilization": 0.5},
        "metrics": _PROMETHEUS,
    }
    (tmp_path / "all.yaml").write_text(yaml.safe_dump_all([engine, dep]))
    assert main(["render", "-f", str(tmp_path / "all.yaml")]) == 0, capsys.readouterr().err
    captured = capsys.readouterr()
    docs = [d for d in yaml.safe_load_all(captured.out) if d]
    printed = [d for d in docs if d["kind"] in ("HorizontalPodAutoscaler", "ScaledObject")]
    # The handler applies what this function returns (handlers.autoscaler.sync_external_autoscaler).
    assert handler.desired_external_autoscaler is desired_external_autoscaler
    expected = desired_external_autoscaler(
        dep["metadata"]["name"],
        "team-a",
        OwnerRef(dep["metadata"]["name"], dep["metadata"]["uid"]),
        LLMDeploymentSpec.model_validate(dep["spec"]).autoscaling,
    )
    if kind is None:
        assert printed == [] and expected is None
        return
    assert [d["kind"] for d in printed] == [kind]
    assert printed == [expected]
    assert printed[0]["metadata"]["ownerReferences"][0]["uid"] == dep["metadata"]["uid"]
    assert ("KEDANotInstalled" in captured.err) == (mode == "keda")


def test_replicas_note_for_an_unset_replicas_follows_docs_gitops(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Fresh-user trial: with spec.replicas unset the note said "spec.replicas 1" and advised writing
    spec.replicas into git; docs/gitops.md says leave it out of autoscaled manifests."""
    dep, engine = _example_pair()
    dep["spec"].pop("replicas", None)
    dep["spec"]["autoscaling"] = {
        "enabled": True,
        "mode": "builtin",
        "minReplicas": 3,
        "maxReplicas": 4,
        "targets": {"activeRequestUtilization": 0.5},
    }
    (tmp_path / "all.yaml").write_text(yaml.safe_dump_all([engine, dep]))
    assert main(["render", "-f", str(tmp_path / "all.yaml")]) == 0, capsys.readouterr().err
    captured = capsys.readouterr()
    assert _workload_replicas(captured.out) == 3
    assert "spec.replicas (unset: the CRD default 1) is outside spec.autoscaling" in captured.err
    assert "write spec.replicas" not in captured.err
    assert "leave it out of the manifest in git" in captured.err


def _as_kubectl_get(*objects: dict[str, Any]) -> dict[str, Any]:
    """``kubectl get … -o yaml``'s shape: a ``v1`` ``List`` of stored objects (uid, resourceVersion,
    managedFields and status included)."""
    stored = []
    for i, obj in enumerate(objects):
        copy = yaml.safe_load(yaml.safe_dump(obj))
        copy["metadata"].update(
            namespace="default",
            uid=f"0000000{i}-1111-2222-3333-444444444444",
            resourceVersion=str(100 + i),
            creationTimestamp="2026-12-02T19:00:00Z",
            generation=1,
            managedFields=[{"manager": "kubectl-client-side-apply", "operation": "Update"}],
        )
        stored.append(copy)
    return {"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""}, "items": stored}


def test_a_kind_list_is_expanded_as_kubectl_apply_expands_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Fresh-user trial: ``kubectl get llmengine,llmdeployment -o yaml | render -f -`` said "no
    LLMDeployment in -"; kubectl apply takes that List (cli-runtime FlattenListVisitor)."""
    dep, engine = _example_pair()
    monkeypatch.setattr("sys.stdin", io.StringIO(yaml.safe_dump(_as_kubectl_get(engine, dep))))
    assert main(["render", "-f", "-"]) == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    (workload,) = [d for d in yaml.safe_load_all(out) if d and d["kind"] == "Deployment"]
    # the stored LLMDeployment's uid makes the ownerReferences, as on the cluster
    assert workload["metadata"]["ownerReferences"][0]["uid"] == "00000001-1111-2222-3333-444444444444"
    # a typed list (LLMDeploymentList), nested in a List, in a file: items without apiVersion/kind take
    # the list's apiVersion and kind less "List" (unstructuredJSONScheme.decodeToList)
    bare = {k: v for k, v in dep.items() if k not in ("apiVersion", "kind")}
    typed = {"apiVersion": dep["apiVersion"], "kind": "LLMDeploymentList", "items": [bare]}
    nested = {"apiVersion": "v1", "kind": "List", "items": [engine, typed]}
    (tmp_path / "list.yaml").write_text(yaml.safe_dump(nested))
    assert main(["render", "-f", str(tmp_path / "list.yaml")]) == 0, capsys.readouterr().err
    assert "kind: Deployment" in capsys.readouterr().out


def test_a_list_item_that_is_not_an_object_is_named(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    dep, engine = _example_pair()
    monkeypatch.setattr(
        "sys.stdin", io.StringIO(yaml.safe_dump({"kind": "List", "items": [engine, "x", dep]}))
    )
    assert main(["render", "-f", "-"]) == 2
    assert "standard input: items[1] is not an object" in capsys.readouterr().err


def test_one_object_in_two_files_of_a_directory_is_refused_naming_both(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Fresh-user trial: two files of ``-f DIR`` held the same LLMEngine and LLMDeployment with
    different specs; render printed the children twice, both from the first engine. kubectl apply
    would apply both copies in order (the last wins): what to render is ambiguous, so it is refused."""
    dep, engine = _example_pair()
    other_engine, other_dep = yaml.safe_load(yaml.safe_dump(engine)), yaml.safe_load(yaml.safe_dump(dep))
    other_engine["spec"]["parallelism"] = {"tensor": 2}
    other_dep["spec"]["replicas"] = 3
    (tmp_path / "a.yaml").write_text(yaml.safe_dump_all([engine, dep]))
    (tmp_path / "b.yaml").write_text(yaml.safe_dump_all([other_engine, other_dep]))
    assert main(["render", "-f", str(tmp_path)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    name, engine_name = dep["metadata"]["name"], engine["metadata"]["name"]
    for kind, obj in (("LLMEngine", engine_name), ("LLMDeployment", name)):
        index = 1 if kind == "LLMEngine" else 2
        assert (
            f"error: {kind} default/{obj} is in the input twice, with different contents: "
            f"{tmp_path / 'a.yaml'}: document {index} and {tmp_path / 'b.yaml'}: document {index}"
        ) in captured.err
    assert "only the last would exist; keep one of them" in captured.err
    # another namespace is another object; an identical copy (-f DIR and --engine DIR/file) is one
    other_dep["metadata"]["namespace"] = "staging"
    other_engine["metadata"]["namespace"] = "staging"
    (tmp_path / "b.yaml").write_text(yaml.safe_dump_all([other_engine, other_dep]))
    (tmp_path / "engine.yaml").write_text(yaml.safe_dump(engine))
    (tmp_path / "a.yaml").write_text(yaml.safe_dump(dep))
    assert main(["render", "-f", str(tmp_path), "--engine", str(tmp_path / "engine.yaml")]) == 0
    captured = capsys.readouterr()
    assert f"note: LLMEngine default/{engine_name} is in the input twice" in captured.err
    assert "identical; rendered once" in captured.err
    workloads = [d for d in yaml.safe_load_all(captured.out) if d and d["kind"] == "Deployment"]
    assert sorted((w["metadata"]["namespace"], w["spec"]["replicas"]) for w in workloads) == [
        ("default", dep["spec"].get("replicas", 1)),
        ("staging", 3),
    ]


def test_unquoted_integer_quantities_are_accepted(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Fresh-user trial: ``cpu: 8`` (unquoted, as in a Pod) was refused "must be of type string";
    Kubernetes quantities are int-or-string (apimachinery resource.Quantity)."""
    dep, engine = _example_pair()
    _set(engine, "spec.gpu.resources", {"cpu": 8, "memory": 68719476736})
    _set(dep, "spec.server.resources", {"cpu": 4, "memory": 34359738368})
    (tmp_path / "all.yaml").write_text(yaml.safe_dump_all([engine, dep]))
    assert main(["render", "-f", str(tmp_path / "all.yaml")]) == 0, capsys.readouterr().err
    (workload,) = [d for d in yaml.safe_load_all(capsys.readouterr().out) if d and d["kind"] == "Deployment"]
    requests = workload["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"]
    assert (requests["cpu"], requests["memory"]) == ("4", "34359738368")


@pytest.mark.parametrize("example", ["llama-3.1-8b-fp8-h100.yaml", "llama-3.1-405b-fp8-multinode.yaml"])
def test_a_percentage_rollout_reaches_the_workload_as_written(
    example: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Fresh-user trial: ``maxSurge: "25%"`` (as in a Deployment) was refused "must be of type integer".
    The Deployment and the LeaderWorkerSet take IntOrString there; the value passes through."""
    docs = list(yaml.safe_load_all((REPO / "examples" / example).read_text()))
    dep = next(d for d in docs if d["kind"] == "LLMDeployment")
    dep["spec"]["rollout"] = {"maxSurge": "25%", "maxUnavailable": 0}
    (tmp_path / "all.yaml").write_text(yaml.safe_dump_all(docs))
    assert main(["render", "-f", str(tmp_path / "all.yaml"), *_needs_lws(example)]) == 0, (
        capsys.readouterr().err
    )
    out = [d for d in yaml.safe_load_all(capsys.readouterr().out) if d]
    workload = next(d for d in out if d["kind"] in ("Deployment", "LeaderWorkerSet"))
    if workload["kind"] == "Deployment":
        assert workload["spec"]["strategy"]["rollingUpdate"] == {"maxSurge": "25%", "maxUnavailable": 0}
        assert kubernetes_validate.validate(workload, K8S_SCHEMA, strict=True)
    else:
        rolling = workload["spec"]["rolloutStrategy"]["rollingUpdateConfiguration"]
        assert (rolling["maxSurge"], rolling["maxUnavailable"]) == ("25%", 0)


@pytest.mark.parametrize("example", ["llama-3.1-8b-fp8-h100.yaml", "llama-3.1-405b-fp8-multinode.yaml"])
def test_a_surge_above_100_percent_reaches_a_deployment_and_is_refused_for_a_leaderworkerset(
    example: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Trial 34: ``maxSurge: "150%"`` was refused, though a Deployment admits any surge percentage
    (kubernetes@v1.34.4 pkg/apis/apps/validation ValidateRollingUpdateDeployment caps maxUnavailable
    only). A LeaderWorkerSet's webhook caps maxSurge at 100% too (sigs.k8s.io/lws@v0.9.0
    pkg/webhooks/leaderworkerset_webhook.go): the multi-node replica is refused naming the field."""
    docs = list(yaml.safe_load_all((REPO / "examples" / example).read_text()))
    dep = next(d for d in docs if d["kind"] == "LLMDeployment")
    dep["spec"]["rollout"] = {"maxSurge": "150%", "maxUnavailable": 0}
    (tmp_path / "all.yaml").write_text(yaml.safe_dump_all(docs))
    code = main(["render", "-f", str(tmp_path / "all.yaml"), *_needs_lws(example)])
    captured = capsys.readouterr()
    if _needs_lws(example):
        assert code == 1
        assert "InvalidSpec: spec.rollout.maxSurge 150%: a replica of 16 GPUs spans 2 nodes" in captured.err
        assert "set maxSurge to 100% or less" in captured.err
        return
    assert code == 0, captured.err
    (workload,) = [d for d in yaml.safe_load_all(captured.out) if d and d["kind"] == "Deployment"]
    assert workload["spec"]["strategy"]["rollingUpdate"] == {"maxSurge": "150%", "maxUnavailable": 0}
    assert kubernetes_validate.validate(workload, K8S_SCHEMA, strict=True)
    dep["spec"]["rollout"] = {"maxSurge": 1, "maxUnavailable": "150%"}
    (tmp_path / "all.yaml").write_text(yaml.safe_dump_all(docs))
    assert main(["render", "-f", str(tmp_path / "all.yaml")]) == 2
    assert 'spec.rollout.maxUnavailable: "150%" is not a percentage of replicas from 0% to 100%' in (
        capsys.readouterr().err
    )


@pytest.mark.parametrize(
    ("expert", "refused"),
    [
        (65, ["spec.parallelism.expert: Invalid value: 65: should be less than or equal to 64"]),
        (
            3,  # within the range: the tensorrt backend's and the divisibility rules still say why
            [
                "parallelism.expert 3 is not supported by the tensorrt backend",
                "expert must divide tensor",
            ],
        ),
    ],
)
def test_an_expert_parallelism_above_the_limit_is_refused_with_the_limit_alone(
    tmp_path: Path, expert: int, refused: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """Fresh-user trial 41 (left-over, low): ``expert: 65`` (tensorrt backend, tensor 8) was refused
    with the range and also told "or backend: pytorch (served with moe_expert_parallel_size 65)" and
    "set tensor to a multiple of expert", fixes the range (PARALLELISM_LIMITS, 64) refuses too. The
    CEL rules do not fire on a value its range refuses; every line has render's prefix."""
    dep, engine = _example_pair()
    engine["spec"]["parallelism"] = {"tensor": 8, "pipeline": 1, "expert": expert}
    (tmp_path / "all.yaml").write_text(yaml.safe_dump_all([engine, dep]))
    assert main(["render", "-f", str(tmp_path / "all.yaml")]) == 2
    err = capsys.readouterr().err
    lines = err.splitlines()
    name = engine["metadata"]["name"]
    assert len(lines) == len(refused), err
    for line, said in zip(lines, refused, strict=True):
        assert line.startswith(f"trtllm-operator render: error: LLMEngine {name}: "), err
        assert said in line, err
    if expert > 64:
        assert "pytorch" not in err and "multiple of expert" not in err, err


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["render", "-f", "/nonexistent/d.yaml"], "trtllm-operator render: error: cannot read input: "),
        (
            ["render", "-f", str(REPO / "examples" / "llama-3.1-8b-fp8-h100.yaml"), "-n", "Bad_NS"],
            "trtllm-operator render: error: --namespace: ",
        ),
        (
            ["cache", "spec", "-f", "/nonexistent/e.yaml"],
            "trtllm-operator cache spec: error: /nonexistent/e.yaml: ",
        ),
        (
            [
                "cache",
                "import",
                "--manifest",
                "/nonexistent/manifest.json",
                "-n",
                "ml",
                "--storage",
                "pvc://x",
            ],
            "trtllm-operator cache import: error: ",
        ),
        (
            ["cache", "list", "-n", "ml", "--kubeconfig", "/nonexistent/kubeconfig"],
            "trtllm-operator cache list: error: cannot load kubeconfig /nonexistent/kubeconfig: no such file",
        ),
    ],
    ids=["render-read", "render-namespace", "cache-spec", "cache-import", "kubeconfig"],
)
def test_render_cache_and_kubeconfig_errors_carry_the_commands_prefix(
    argv: list[str], said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Fresh-user trials 40 and 41 (left-over, low): render's, cache's and the kubeconfig errors began
    "error: …", "FILE: …" or "trtllm-operator cache list: cannot load …", without the
    "trtllm-operator COMMAND: error:" prefix that plan, simulate and argparse give (commands.say)."""
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith(said), err
    command = said.partition(": error: ")[0]
    assert all(line.startswith(f"{command}: ") for line in err.splitlines()), err


def test_a_deployment_with_chunked_context_is_not_told_to_enable_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Fresh-user trial 44 F6 (trial 45 A20): the 70B example's engine has maxNumTokens 8192 below
    maxInputLen 32768, and its LLMDeployment sets enableChunkedContext: true, yet render said "prompts
    longer than 8192 tokens are rejected unless chunked context is enabled. Fix: enable chunked
    context". The deployment answers that warning (engine_builder.planner.moot_with_chunked_context,
    as simulate already did); without chunked context it is still printed, once per engine."""
    config = REPO / "tests" / "fixtures" / "model-configs" / "meta-llama__Llama-3.1-70B-Instruct.json"
    example = REPO / "examples" / "llama-3.1-70b-fp8-tp2-h200.yaml"
    said = "spec.build.maxNumTokens: maxNumTokens 8192 is below maxInputLen 32768"
    assert main(["render", "-f", str(example), "--model-config", str(config)]) == 0
    err = capsys.readouterr().err
    assert "warning: LLMEngine llama-3-1-70b-fp8-tp2: spec.build.maxBatchSize" in err, err
    assert said not in err, err
    docs = [d for d in yaml.safe_load_all(example.read_text()) if d]
    dep = next(d for d in docs if d["kind"] == "LLMDeployment")
    dep["spec"]["server"]["enableChunkedContext"] = False
    second = json.loads(json.dumps(dep))
    second["metadata"]["name"] = "llama-3-1-70b-second"
    path = tmp_path / "unchunked.yaml"
    path.write_text(yaml.safe_dump_all([*docs, second]))
    assert main(["render", "-f", str(path), "--model-config", str(config)]) == 0
    err = capsys.readouterr().err
    assert err.count(said) == 1, err
    # trial 47 U10: the warning names the deployments it concerns
    assert (
        "(spec.server.enableChunkedContext is off in LLMDeployment llama-3-1-70b, llama-3-1-70b-second)"
        in err
    ), err
    second["spec"]["server"]["enableChunkedContext"] = True
    path.write_text(yaml.safe_dump_all([*docs, second]))
    assert main(["render", "-f", str(path), "--model-config", str(config)]) == 0
    assert (
        "(spec.server.enableChunkedContext is off in LLMDeployment llama-3-1-70b)" in capsys.readouterr().err
    )


def test_model_config_is_one_models_or_a_directory_of_each_engines(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Fresh-user trial 44 F16: ``render -f examples/ --model-config Qwen2.5-7B's config.json`` refused
    the Llama-3.1-405B engine with Qwen's 28 heads, and with Llama-8B's config every other engine got
    warnings computed from Llama-8B's shape. One config.json stands for one model: it is refused when the
    engines to render serve several, naming each; a directory in the operator's hfConfigDir layout
    (<org>__<name>.json) gives each engine its own."""
    configs = REPO / "tests" / "fixtures" / "model-configs"
    inputs = tmp_path / "in"
    inputs.mkdir()
    for example in ("llama-3.1-8b-fp8-h100.yaml", "llama-3.1-70b-fp8-tp2-h200.yaml"):
        (inputs / example).write_text((REPO / "examples" / example).read_text())
    llama_8b = configs / "meta-llama__Llama-3.1-8B-Instruct.json"
    assert main(["render", "-f", str(inputs), "--model-config", str(llama_8b)]) == 2
    err = capsys.readouterr().err
    assert (
        f"--model-config {llama_8b} is one model's config.json, but the LLMEngines to render serve 2 " in err
    )
    assert "LLMEngine llama-3-1-70b-fp8-tp2 (hf://meta-llama/Llama-3.1-70B-Instruct)" in err, err
    assert "LLMEngine llama-3-1-8b-fp8 (hf://meta-llama/Llama-3.1-8B-Instruct)" in err, err
    assert "Fix: pass a directory holding each model's config.json as <org>__<name>.json" in err, err
    assert main(["render", "-f", str(inputs), "--model-config", str(configs)]) == 0
    err = capsys.readouterr().err
    assert "LLMEngine llama-3-1-8b-fp8: spec.build.maxBatchSize: maxBatchSize 256 exceeds the 61 " in err, err
    assert "LLMEngine llama-3-1-70b-fp8-tp2: spec.build.maxBatchSize: maxBatchSize 128 exceeds the 18 " in err
    assert "were skipped" not in err, err
    # One model in the input: the file is that model's, as before.
    one = inputs / "llama-3.1-8b-fp8-h100.yaml"
    assert main(["render", "-f", str(one), "--model-config", str(llama_8b)]) == 0
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["render", "-f", str(one), "--model-config", str(empty)]) == 0
    assert (
        "LLMEngine llama-3-1-8b-fp8: the planner's checks (heads divisible by tensor parallelism, memory "
        f"fit) were skipped (no meta-llama__Llama-3.1-8B-Instruct.json in --model-config {empty})"
    ) in capsys.readouterr().err


@pytest.mark.parametrize(
    ("example", "config"),
    [
        ("capacity-autoscaled-deployment.yaml", "meta-llama__Llama-3.1-70B-Instruct.json"),
        ("mixtral-8x7b-int4-awq-tp2.yaml", "mistralai__Mixtral-8x7B-v0.1.json"),
        # trial 47 U7: the pytorch examples (maxNumTokens 8,192 under maxSeqLen 32,768) still warned
        ("qwen2.5-7b-pytorch.yaml", "Qwen__Qwen2.5-7B-Instruct.json"),
        ("qwen2.5-7b-pytorch-openai.yaml", "Qwen__Qwen2.5-7B-Instruct.json"),
    ],
)
def test_examples_serve_the_prompts_their_engines_accept(
    example: str, config: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Fresh-user trial 44 F7: these examples build maxInputLen above maxNumTokens (32,768 over 8,192;
    16,384 over 4,096) and served them without chunked context, so the longer prompts their engines
    accept were rejected and render warned. Their deployments now enable it, as the 70B example does."""
    configs = REPO / "tests" / "fixtures" / "model-configs"
    assert (
        main(["render", "-f", str(REPO / "examples" / example), "--model-config", str(configs / config)]) == 0
    )
    assert "unless chunked context is enabled" not in capsys.readouterr().err


def test_model_config_is_read_as_plan_reads_it_and_compared_with_the_model(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Fresh-user trial 47 U2/U3. (a) ``--model-config DIR`` holding config.json (a model folder, as
    plan and simulate read it) skipped every planner check with a note and exit 0: it is now that
    model's config. (b) A directory in the <org>__<name>.json layout whose file for the engine is
    missing (here: cased differently) is a warning naming the expected file and the near-match, not a
    note. (c) One file of another model (Qwen's on a Llama engine) planned silently with Qwen's shapes:
    it is now the warning simulate gives (decide.engine_spec.model_config_mismatch, one home)."""
    configs = REPO / "tests" / "fixtures" / "model-configs"
    llama = configs / "meta-llama__Llama-3.1-8B-Instruct.json"
    one = REPO / "examples" / "llama-3.1-8b-fp8-h100.yaml"
    snap = tmp_path / "snap"
    snap.mkdir()
    (snap / "config.json").write_text(llama.read_text())
    assert main(["render", "-f", str(one), "--model-config", str(snap)]) == 0
    err = capsys.readouterr().err
    assert "were skipped" not in err, err
    assert "LLMEngine llama-3-1-8b-fp8: spec.build.maxBatchSize: maxBatchSize 256 exceeds the 61 " in err, err
    cased = tmp_path / "cased"
    cased.mkdir()
    (cased / "meta-llama__llama-3.1-8b-instruct.json").write_text(llama.read_text())
    assert main(["render", "-f", str(one), "--model-config", str(cased)]) == 0
    err = capsys.readouterr().err
    assert (
        f"warning: LLMEngine llama-3-1-8b-fp8: --model-config {cased} holds no "
        "meta-llama__Llama-3.1-8B-Instruct.json; meta-llama__llama-3.1-8b-instruct.json differs only in case"
    ) in err, err
    qwen = configs / "Qwen__Qwen2.5-7B-Instruct.json"
    assert main(["render", "-f", str(one), "--model-config", str(qwen)]) == 0
    err = capsys.readouterr().err
    assert (
        f"warning: --model-config {qwen} seems not to be LLMEngine llama-3-1-8b-fp8's model, "
        "spec.model.source hf://meta-llama/Llama-3.1-8B-Instruct: its file name is another model's than "
        "meta-llama__Llama-3.1-8B-Instruct.json"
    ) in err, err
    assert main(["render", "-f", str(one), "--model-config", str(llama)]) == 0
    assert "seems not to be" not in capsys.readouterr().err


def test_gpus_per_node_reaches_the_engines_one_node_rule(capsys: pytest.CaptureFixture[str]) -> None:
    """Fresh-user trial 47 U1: ``render --gpus-per-node 1`` on a tensor-2 engine said
    LeaderWorkerSetRequired ("install LeaderWorkerSet"), which would not help a non-multiNode engine:
    the planner's one-node rule ran with the catalog's 8. The operator reads the node size from the
    nodes and refuses the engine (spec.parallelism); render now passes the flag to the same rule."""
    configs = REPO / "tests" / "fixtures" / "model-configs"
    example = REPO / "examples" / "llama-3.1-70b-fp8-tp2-h200.yaml"
    args = ["render", "-f", str(example), "--model-config", str(configs)]
    assert main([*args, "--gpus-per-node", "1"]) == 2
    err = capsys.readouterr().err
    assert (
        "LLMEngine llama-3-1-70b-fp8-tp2: spec.parallelism: tensor × pipeline = 2 GPUs exceeds the 1 " in err
    )
    assert "LeaderWorkerSetRequired" not in err, err
    assert main(args) == 0  # the catalog's 8 without the flag, as before


def test_an_engine_in_neither_file_names_both_files_and_what_they_hold(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Fresh-user trial 52 #9: with --engine given, a missing engine said "not found; pass it with
    --engine". Now the message names both files and the LLMEngines they hold."""
    dep, _ = _example_pair()
    other = next(
        d
        for d in yaml.safe_load_all((REPO / "examples" / "qwen2.5-7b-pytorch.yaml").read_text())
        if d["kind"] == "LLMEngine"
    )
    (tmp_path / "dep.yaml").write_text(yaml.safe_dump(dep))
    (tmp_path / "engine.yaml").write_text(yaml.safe_dump(other))
    argv = ["render", "-f", str(tmp_path / "dep.yaml")]
    assert main([*argv, "--engine", str(tmp_path / "engine.yaml")]) == 2
    assert capsys.readouterr().err.endswith(
        f"error: LLMDeployment {dep['metadata']['name']}: spec.engineRef.name 'llama-3-1-8b-fp8' is in "
        f"neither -f {tmp_path / 'dep.yaml'} nor --engine {tmp_path / 'engine.yaml'}, which hold LLMEngine "
        f"{other['metadata']['name']}. Fix: pass the file that holds LLMEngine llama-3-1-8b-fp8 with "
        "--engine, or correct spec.engineRef.name\n"
    )
    assert main(argv) == 2
    assert "spec.engineRef.name 'llama-3-1-8b-fp8' is not in -f " in capsys.readouterr().err
