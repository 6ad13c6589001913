"""simulate's flag errors and ``--deployment`` manifests without an autoscaler (fresh-user trial 38
F4–F7): every error names the flag the user typed, its value and a fix that works in simulate.

Upstream behaviour relied on: none beyond the operator's own rendering — a multi-node replica is a
LeaderWorkerSet group (``trtllm_operator.render.leaderworkerset``), and an LLMDeployment whose
autoscaling is off keeps ``spec.replicas`` (``api.deployment.LLMDeploymentSpec.replicas``).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from trtllm_operator.api.deployment import DEFAULT_REPLICAS, LLMDeploymentSpec
from trtllm_operator.cli import main

REPO = Path(__file__).resolve().parents[2]
CONFIGS = REPO / "tests" / "fixtures" / "model-configs"
LLAMA_8B = CONFIGS / "meta-llama__Llama-3.1-8B-Instruct.json"
LLAMA_70B = CONFIGS / "meta-llama__Llama-3.1-70B-Instruct.json"
DEEPSEEK_V3 = CONFIGS / "deepseek-ai__DeepSeek-V3.json"
DEEPSEEK_FP8_TP8 = ["--model-config", str(DEEPSEEK_V3), "--gpu", "H200", "--tp", "8", "--quantization", "fp8"]
TRACE = "poisson:rate=1,duration=5"
BASE = ["simulate", "--trace", TRACE, "--model-config", str(LLAMA_8B), "--gpu", "H100"]


def _err(capsys: pytest.CaptureFixture[str], args: list[str], code: int = 2) -> str:
    assert main(args) == code
    return capsys.readouterr().err


# -- F4: the KV free-memory fraction's errors name the flag ------------------------------------------


@pytest.mark.parametrize("value", ["0", "1.5", "nan"])
def test_a_bad_kv_cache_fraction_names_the_flag_the_user_typed(
    value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Trial 38 F4: "error: spec.server.kvCacheFreeGpuMemFraction: must be in (0, 1], got 0.0" named
    no flag, though the user typed --kv-cache-free-gpu-mem-fraction."""
    err = _err(capsys, [*BASE, "--kv-cache-free-gpu-mem-fraction", value])
    assert (
        "error: spec.server.kvCacheFreeGpuMemFraction (--kv-cache-free-gpu-mem-fraction): must be in (0, 1]"
    ) in err, err


# -- F5: a replica beyond one node is refused, naming the flags ---------------------------------------


@pytest.mark.parametrize(("gpu", "tp", "pp", "node"), [("H100", 8, 2, 8), ("GB200", 4, 2, 4)])
def test_a_replica_beyond_one_node_says_simulate_models_one_node(
    gpu: str, tp: int, pp: int, node: int, capsys: pytest.CaptureFixture[str]
) -> None:
    """Trial 38 F5: "spec.parallelism: … exceeds the 8 GPUs of one node. Fix: … or set
    spec.parallelism.multiNode: true" named no flag, and simulate has no way to set it. GB200's node
    is the catalog's 4 GPUs (the planner was asked with the default 8 before)."""
    args = ["simulate", "--trace", TRACE, "--model-config", str(LLAMA_70B), "--gpu", gpu]
    err = _err(capsys, [*args, "--tp", str(tp), "--pp", str(pp)])
    said = f"error: spec.parallelism (--tp/--pp): tensor × pipeline = {tp * pp} GPUs exceeds the {node} "
    assert said in err, err
    assert "simulate models replicas of one node" in err, err
    assert f"Fix: lower tensor/pipeline parallelism to at most {node} GPUs per replica" in err, err
    assert "set spec.parallelism.multiNode: true" not in err, err


# -- F6: --deployment without an autoscaler ---------------------------------------------------------


def _manifest(tmp_path: Path, spec: dict[str, object]) -> str:
    doc = {"apiVersion": "llm.trtllm-operator.dev/v1alpha1", "kind": "LLMDeployment"}
    doc |= {"metadata": {"name": "fixed"}, "spec": {"engineRef": {"name": "e"}, **spec}}
    path = tmp_path / "d.yaml"
    path.write_text(yaml.safe_dump(doc))
    return str(path)


@pytest.mark.parametrize("autoscaling", [None, {"enabled": False, "maxReplicas": 8}], ids=["none", "off"])
def test_a_deployment_without_autoscaling_runs_its_spec_replicas(
    tmp_path: Path, autoscaling: dict[str, object] | None, capsys: pytest.CaptureFixture[str]
) -> None:
    """Trial 38 F6: "--deployment: the manifest has no spec.autoscaling; add one or use --policy",
    after planning, and --policy is refused beside --deployment. The operator keeps spec.replicas
    when autoscaling is off, so simulate runs that many; the replica takes the manifest's server."""
    spec: dict[str, object] = {"replicas": 3, "server": {"enableChunkedContext": True}}
    if autoscaling is not None:
        spec["autoscaling"] = autoscaling
    path = _manifest(tmp_path, spec)
    assert main([*BASE, "--deployment", path, "--output", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["policy"] == f"static:3 ({path}: spec.replicas, autoscaling off)", out
    assert out["mean_replicas"] == 3 and out["replica"]["chunked_context"] is True, out


@pytest.mark.parametrize(
    ("flag", "value"), [("--policy", "static:3"), ("--min-replicas", "2"), ("--max-replicas", "4")]
)
def test_a_flag_beside_a_deployment_without_autoscaling_names_spec_replicas(
    tmp_path: Path, flag: str, value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Fresh-user trial 40 F6: with autoscaling off the manifest runs static:spec.replicas, but a
    conflicting --policy / --min-replicas / --max-replicas said the manifest "takes it from
    spec.autoscaling…"; it names spec.replicas, what is simulated."""
    path = _manifest(tmp_path, {"replicas": 2})
    err = _err(capsys, [*BASE, "--deployment", path, flag, value])
    said = f"trtllm-operator simulate: error: {flag} cannot be combined with --deployment {path}, whose "
    said += "autoscaling is off (no spec.autoscaling, or enabled: false): it simulates spec.replicas (2) "
    assert said in err, err
    assert "spec.autoscaling." not in err and "builtin autoscaler" not in err, err


@pytest.mark.parametrize(
    ("spec", "refusal"),
    [
        (
            {
                "autoscaling": {
                    "enabled": True,
                    "mode": "hpa",
                    "maxReplicas": 4,
                    "targets": {"kvCacheUtilization": 0.8},
                }
            },
            "spec.autoscaling.mode is 'hpa'; only builtin is simulated",
        ),
        (
            {
                "autoscaling": {
                    "enabled": True,
                    "mode": "keda",
                    "maxReplicas": 4,
                    "metrics": {"source": "prometheus", "prometheusURL": "http://prometheus.monitoring:9090"},
                    "targets": {"kvCacheUtilization": 0.8},
                }
            },
            "spec.autoscaling.mode is 'keda'; only builtin is simulated",
        ),
        ({"replicas": 0}, "spec.replicas is 0 with autoscaling off"),
    ],
    ids=["hpa", "keda", "replicas-0"],
)
@pytest.mark.parametrize("flag", [["--policy", "builtin"], ["--min-replicas", "2"]], ids=["policy", "min"])
def test_a_manifest_simulate_cannot_run_is_refused_before_a_flag_beside_it(
    tmp_path: Path, spec: dict[str, object], refusal: str, flag: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """Fresh-user trial 41 (left-over, low): ``--deployment`` (mode hpa/keda, or spec.replicas 0) with
    ``--policy`` said "--policy cannot be combined … edit it in the manifest"; doing so met a second,
    different refusal (only builtin is simulated / serves nothing). That one comes first, with its fix
    (drop --deployment and pass --policy with the manifest's server settings), and alone."""
    path = _manifest(tmp_path, spec)
    err = _err(capsys, [*BASE, "--deployment", path, *flag])
    assert f"trtllm-operator simulate: error: --deployment: {refusal}" in err, err
    assert f"drop --deployment {path} and pass --policy POLICY" in err, err
    assert "cannot be combined" not in err, err


@pytest.mark.parametrize("bare", [False, True], ids=["manifest", "bare-spec.autoscaling"])
def test_a_deployment_that_does_not_write_spec_replicas_is_said_to_run_the_default(
    tmp_path: Path, bare: bool, capsys: pytest.CaptureFixture[str]
) -> None:
    """Fresh-user trial 41 (left-over, low): ``spec.autoscaling: {enabled: false}`` was described as
    running "spec.replicas (1)", a value the manifest does not write. The messages say it is not set
    and that 1 is the API's default (api.deployment.DEFAULT_REPLICAS, the CRD's default)."""
    assert LLMDeploymentSpec.model_fields["replicas"].default == DEFAULT_REPLICAS
    if bare:
        path = tmp_path / "autoscaling.yaml"
        path.write_text("enabled: false\n")
    else:
        path = Path(_manifest(tmp_path, {"autoscaling": {"enabled": False}}))
    said = f"spec.replicas (not set: the default, {DEFAULT_REPLICAS})"
    err = _err(capsys, [*BASE, "--deployment", str(path), "--max-replicas", "3"])
    assert f"it simulates {said} fixed replicas" in err, err
    assert main([*BASE, "--deployment", str(path), "--output", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["policy"] == f"static:{DEFAULT_REPLICAS} ({path}: {said}, autoscaling off)", out


@pytest.mark.parametrize(
    ("parallelism", "said"),
    [
        (["--pp", "80"], "spec.parallelism.pipeline (--pp): 80 is above the API's limit of 64"),
        (["--tp", "65"], "spec.parallelism.tensor (--tp): 65 is above the API's limit of 64"),
        (
            ["--tp", "8", "--pp", "16"],
            "spec.parallelism.tensor (--tp): tensor × pipeline = 8 × 16 = 128 GPUs per replica is above "
            "the API's limit of 64",
        ),
    ],
)
def test_parallelism_the_api_refuses_is_refused_naming_the_flag_and_the_limit(
    parallelism: list[str], said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Fresh-user trial 40 F3: the LLMEngine CRD caps tensor and pipeline at 64 each and their product
    at 64; simulate said only "more than one node", which a multi-node engine would answer."""
    err = _err(capsys, [*BASE, *parallelism])
    assert f"trtllm-operator simulate: error: {said}" in err, err
    assert "simulate models replicas of one node" not in err, err


def test_a_deployment_that_cannot_be_simulated_says_so_before_planning_with_a_fix_that_works(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The check comes before the replica is planned (a bad --tp would be said first otherwise), and
    the fix is the flags that carry the manifest's server settings (--deployment refuses them)."""
    server = {"enableChunkedContext": True, "kvCacheFreeGpuMemFraction": 0.92}
    path = _manifest(tmp_path, {"replicas": 0, "server": server})
    err = _err(capsys, [*BASE, "--deployment", path, "--tp", "3"])
    assert "spec.replicas is 0 with autoscaling off" in err, err
    assert "spec.parallelism.tensor" not in err, err  # not planned
    fix = f"drop --deployment {path} and pass --policy POLICY --kv-cache-free-gpu-mem-fraction 0.92 "
    fix += "--chunked-context"
    assert fix in err, err
    hpa = {"enabled": True, "mode": "hpa", "maxReplicas": 4, "targets": {"kvCacheUtilization": 0.8}}
    path = _manifest(tmp_path, {"autoscaling": hpa})
    err = _err(capsys, [*BASE, "--deployment", path])
    assert "only builtin is simulated" in err, err
    assert "--policy POLICY --kv-cache-free-gpu-mem-fraction 0.9 (" in err, err


def test_the_chunked_context_fix_names_the_manifest_field_with_a_deployment(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Trial 38 F6 nit: with --deployment the maxNumTokens warning's fix led with --chunked-context,
    which --deployment refuses."""
    path = _manifest(tmp_path, {"replicas": 1})
    args = [*BASE, "--max-num-tokens", "256", "--output", "json"]
    assert main([*args, "--deployment", path]) == 0
    err = capsys.readouterr().err
    assert f"enable chunked context (spec.server.enableChunkedContext of --deployment {path})" in err, err
    assert "--chunked-context" not in err, err
    assert main(args) == 0
    assert "enable chunked context (--chunked-context) or raise maxNumTokens" in capsys.readouterr().err


# -- F7: argparse-level errors: the flag, the value and what to give --------------------------------


@pytest.mark.parametrize(
    ("command", "flag", "value", "hint"),
    [
        ("simulate", "--max-seq-len", "nan", "use an integer from 2 to 4194304 (spec.build.maxSeqLen)"),
        ("simulate", "--max-seq-len", "1e6", "(spec.build.maxSeqLen), written in decimal digits (1000000)"),
        ("simulate", "--max-num-tokens", "1.5", "use an integer from 1 to 1048576 (spec.build.maxNumTokens)"),
        ("simulate", "--max-batch-size", "0x10", "use an integer from 1 to 8192 (spec.build.maxBatchSize)"),
        ("simulate", "--max-seq-len", "", "use an integer from 2 to 4194304"),
        ("simulate", "--kv-cache-free-gpu-mem-fraction", "abc", "not a number; use a fraction in (0, 1]"),
        ("plan", "--max-seq-len", "nan", "use an integer from 2 to 4194304 (spec.build.maxSeqLen)"),
    ],
)
def test_a_value_argparse_refuses_names_the_flag_the_value_and_what_to_give(
    command: str, flag: str, value: str, hint: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Trial 38 F7: "argument --max-seq-len: invalid int value: 'nan'" under the 30-line usage block,
    with no range."""
    args = [command, "--model-config", str(LLAMA_8B), "--gpu", "H100", flag, value]
    if command == "simulate":
        args += ["--trace", TRACE]
    with pytest.raises(SystemExit) as exited:
        main(args)
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert f"trtllm-operator {command}: error: argument {flag}: invalid value {value!r}: " in err, err
    assert hint in err, err
    assert "usage:" not in err and f"trtllm-operator {command} --help lists every flag" in err, err


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--min-replicas", "0"], "--min-replicas must be >= 1, got 0"),
        (["--min-replicas", "70"], "--max-replicas (default 64) is below --min-replicas 70"),
        (["--min-replicas", "3", "--max-replicas", "2"], "--max-replicas 2 is below --min-replicas 3"),
    ],
)
def test_replica_bounds_say_the_values_they_got(
    flags: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Trial 38 F7: "--min-replicas must be >= 1 and --max-replicas >= --min-replicas" without the value."""
    assert message in _err(capsys, [*BASE, *flags]), message


# -- trial 40 F2: replica counts above the API's limit ----------------------------------------------


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (
            ["--initial-replicas", "100000"],
            "--initial-replicas 100000 is above the API's limit of 1000 replicas (spec.replicas)",
        ),
        (
            ["--max-replicas", "1001"],
            "--max-replicas 1001 is above the API's limit of 1000 replicas (spec.autoscaling.maxReplicas)",
        ),
        (
            ["--min-replicas", "1001", "--max-replicas", "1001"],
            "--min-replicas 1001 is above the API's limit of 1000",
        ),
        (
            ["--policy", "static:1001"],
            "--policy static:1001: above the API's limit of 1000 replicas (spec.replicas)",
        ),
    ],
)
def test_replica_counts_above_the_apis_limit_are_refused(
    args: list[str], said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Fresh-user trial 40 F2: ``--initial-replicas 100000`` ran for over 10 minutes at 1.1 GiB, and
    ``--max-replicas 1001`` was accepted, though the LLMDeployment CRD's ``maximum`` for spec.replicas,
    minReplicas and maxReplicas is 1000 (``api.deployment.MAX_REPLICAS``, the CRD's value: the
    generated CRD is checked against the model in test_api_crds)."""
    err = _err(capsys, [*BASE, *args])
    assert said in err, err


def test_the_replica_limit_is_the_crds() -> None:
    """The bound simulate applies is the one the API server enforces (the generated CRD's maximum)."""
    from trtllm_operator.api.deployment import MAX_REPLICAS  # noqa: PLC0415

    crd = yaml.safe_load((REPO / "crds" / "llm.trtllm-operator.dev_llmdeployments.yaml").read_text())
    spec = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
    assert spec["replicas"]["maximum"] == MAX_REPLICAS
    auto = spec["autoscaling"]["properties"]
    assert auto["minReplicas"]["maximum"] == auto["maxReplicas"]["maximum"] == MAX_REPLICAS


@pytest.mark.parametrize(
    ("flags", "said", "tries"),
    [
        (
            ["--model-config", str(LLAMA_70B), "--gpu", "H100"],
            "Fix: raise tensor (or pipeline) parallelism (--tp, --pp), quantize further (--quantization; "
            "this GPU supports fp8, int8_sq, int4_awq, w4a8_awq), or use a GPU with more memory (--gpu).",
            "Values to try, each fits on its own with the other flags as given: --tp 2 (on "
            "NVIDIA-H100-80GB-HBM3) or --gpu NVIDIA-H200 (at --tp 1).",
        ),
        (
            ["--model-config", str(LLAMA_8B), "--gpu", "H100", "--max-seq-len", "4194304"],
            "or raise tensor parallelism (--tp).",
            "Values to try, each fits on its own with the other flags as given: --tp 8 (on "
            "NVIDIA-H100-80GB-HBM3).",
        ),
        (
            [*DEEPSEEK_FP8_TP8, "--max-seq-len", "4194304"],
            "or raise tensor parallelism beyond one node (not simulated: --tp 8 × --pp 1 is already the 8 "
            "GPUs of one NVIDIA-H200 node; `trtllm-operator plan --multi-node` checks whether a multi-node "
            "engine fits).",  # trial 44 F13: at --tp 8 of an 8-GPU node, "(--tp)" could not be followed
            "No --tp of one NVIDIA-H200 node and no larger --gpu of the catalog fits with the "
            "other flags as given; follow the fix above.",
        ),
    ],
    ids=["weights", "max-seq-len", "none"],
)
def test_does_not_fit_names_the_flags_and_the_values_to_try(
    flags: list[str], said: str, tries: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Fresh-user trial 41 (left-over, low): simulate's "does not fit" said "see recommended", which
    only `plan` prints, and "raise tensor (or pipeline) parallelism" named no flag. It names the flags,
    and the planner's alternatives as flag values (or that there is none)."""
    err = _err(capsys, ["simulate", "--trace", TRACE, *flags])
    assert "trtllm-operator simulate: error: the model does not fit on " in err, err
    assert said in err and err.rstrip().endswith(tries), err
    assert "see recommended" not in err, err


def test_does_not_fit_says_without_quantization_and_no_tp_beyond_one_node(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Fresh-user trial 44 F13: "does not fit on 8 × NVIDIA-L4 with none" (--quantization none), and
    "raise tensor parallelism (--tp)" at --tp 8, already the node's 8 GPUs, beyond which simulate
    refuses (one node per replica). It says "without quantization", and the tensor-parallelism fix is
    the multi-node one that simulate does not model, pointing at plan --multi-node."""
    flags = ["--model-config", str(LLAMA_70B), "--gpu", "L4", "--tp", "8", "--max-seq-len", "65536"]
    err = _err(capsys, ["simulate", "--trace", TRACE, *flags])
    assert "error: the model does not fit on 8 × NVIDIA-L4 without quantization: " in err, err
    assert "(--tp)" not in err and "with none" not in err, err
    assert (
        "or raise tensor parallelism beyond one node (not simulated: --tp 8 × --pp 1 is already the 8 GPUs "
        "of one NVIDIA-L4 node; `trtllm-operator plan --multi-node` checks whether a multi-node engine fits)"
    ) in err, err
    deepseek = ["--model-config", str(DEEPSEEK_V3), "--gpu", "H100", "--tp", "8"]
    err = _err(capsys, ["simulate", "--trace", TRACE, *deepseek])
    assert "does not fit on 8 × NVIDIA-H100-80GB-HBM3 without quantization" in err, err
    assert "raise tensor (or pipeline) parallelism beyond one node (not simulated: --tp 8 × --pp 1" in err
    err = _err(capsys, ["simulate", "--trace", TRACE, "--model-config", str(LLAMA_70B), "--gpu", "L4"])
    assert "raise tensor (or pipeline) parallelism (--tp, --pp)" in err, err  # below a node's GPUs: as before


def test_a_synthetic_key_given_twice_is_refused_and_seed_is_one_key(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Fresh-user trial 43 F4 through the CLI: a repeated key ran with the last value. ``--seed`` seeds
    a spec without its own ``seed`` key (written with spaces too) and is no second key beside it."""
    args = ["--model-config", str(LLAMA_8B), "--gpu", "H100", "--output", "json"]
    err = _err(capsys, ["simulate", "--trace", "poisson:rate=1,rate=2,duration=5", *args])
    assert "error: --trace 'poisson:rate=1,rate=2,duration=5': 'rate' is given twice" in err, err
    runs = []
    for trace, seed in (("poisson:rate=1,duration=5, seed = 3", "0"), ("poisson:rate=1,duration=5", "3")):
        assert main(["simulate", "--trace", trace, "--seed", seed, *args]) == 0
        runs.append(json.loads(capsys.readouterr().out))
    assert runs[0] == runs[1], runs


def test_a_synthetic_trace_without_requests_is_refused_with_the_fix_and_the_spec_as_typed(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Fresh-user trial 43 F5: "--trace '…' has no requests", no fix, and its echo was the only one
    without the ",seed=0" the command appended to every other."""
    spec = "poisson:rate=1e-300,duration=1e300"
    for trace in (spec, "poisson:rate=1_000,duration=5"):
        err = _err(capsys, ["simulate", "--trace", trace, "--model-config", str(LLAMA_8B), "--gpu", "H100"])
        assert err.startswith(f"trtllm-operator simulate: error: --trace {trace!r}: "), err
        assert "seed=" not in err, err
    err = _err(capsys, ["simulate", "--trace", spec, "--model-config", str(LLAMA_8B), "--gpu", "H100"])
    assert "raise 'rate'" in err and "has no requests" not in err, err


@pytest.mark.timeout(60)
def test_a_trace_spanning_more_than_a_day_is_refused_naming_the_span_the_cap_and_the_fix(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Fresh-user trial 43 F1 (the part the request cap left): ``poisson:rate=1e-6,duration=1e12`` is
    10^6 expected requests, within the cap, over 10^12 simulated seconds — the run did not end in a
    minute (a metrics sample every simulated second). A trace may span one day (MAX_TRACE_SPAN_S);
    --time-scale stretches a file trace past it too. Here a file trace of 2 requests, 2 days apart."""
    from trtllm_operator.simulate.traces import MAX_TRACE_SPAN_S  # noqa: PLC0415

    assert MAX_TRACE_SPAN_S == 86_400
    trace = tmp_path / "t.jsonl"
    trace.write_text(
        "\n".join(
            json.dumps({"timestamp": ms, "input_length": 10, "output_length": 10}) for ms in (0, 172_800_000)
        )
    )
    args = ["simulate", "--model-config", str(LLAMA_8B), "--gpu", "H100", "--trace", str(trace)]
    err = _err(capsys, args)
    said = f"error: --trace {str(trace)!r}: its last request arrives at 172,800 s, later than the 86,400 s "
    assert said + "(one day) a simulated trace may span" in err, err
    assert "Cut the trace shorter, or raise --time-scale to 2 or more" in err, err
    err = _err(capsys, [*args, "--time-scale", "0.5"])
    assert "arrives at 345,600 s after --time-scale 0.5" in err and "--time-scale to 2 or more" in err, err
    assert main([*args, "--time-scale", "2", "--output", "json"]) == 0  # the fix works: 86,400 s
    capsys.readouterr()
    # A synthetic spec names its own key.
    err = _err(capsys, [*args[:-2], "--trace", "poisson:rate=0.001,duration=200000"])
    assert "later than the 86,400 s (one day)" in err and "Lower 'duration', or raise --time-scale" in err, (
        err
    )


@pytest.mark.parametrize(
    ("document", "fix"),
    [
        (
            "enabled: false\n",  # a bare spec.autoscaling mapping: it cannot hold spec.replicas
            "is a bare spec.autoscaling mapping, which cannot hold spec.replicas: set its enabled: true, "
            "maxReplicas and a target (targets.activeRequestUtilization or targets.kvCacheUtilization) to "
            "simulate the autoscaler, give a whole LLMDeployment manifest with spec.replicas for another "
            "fixed count, or drop --deployment to use --max-replicas",
        ),
        (
            "spec:\n  autoscaling: {enabled: false}\n",  # a bare spec without spec.replicas
            "Add spec.replicas to the manifest for another fixed count, set spec.autoscaling's enabled: "
            "true, maxReplicas and a target (targets.activeRequestUtilization or "
            "targets.kvCacheUtilization) to simulate its autoscaler, or drop --deployment to use "
            "--max-replicas",
        ),
    ],
    ids=["bare-spec.autoscaling", "spec-without-replicas"],
)
def test_the_cannot_be_combined_fix_fits_a_manifest_without_spec_replicas(
    tmp_path: Path, document: str, fix: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A manifest whose autoscaling is off and that writes no spec.replicas got "Edit spec.replicas (or
    spec.autoscaling) in the manifest": there is none to edit, and a bare spec.autoscaling mapping cannot
    hold one. The fix says what to do for that manifest; following its autoscaling part runs."""
    path = tmp_path / "d.yaml"
    path.write_text(document)
    err = _err(capsys, [*BASE, "--deployment", str(path), "--max-replicas", "3"])
    assert fix in err, err
    assert "Edit spec.replicas" not in err, err
    on = {"enabled": True, "maxReplicas": 3, "targets": {"kvCacheUtilization": 0.8}}
    path.write_text(yaml.safe_dump(on if document.startswith("enabled") else {"spec": {"autoscaling": on}}))
    assert main([*BASE, "--deployment", str(path), "--output", "json"]) == 0, capsys.readouterr().err
    assert json.loads(capsys.readouterr().out)["policy"] == f"builtin ({path})"
