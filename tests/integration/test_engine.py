"""LLMEngine controller against a real API server, scheduler, Job controller, GC and kwok GPU nodes.

The operator runs in-process (tests/support/operator.py). Builder pods "run" on kwok: the test puts
kwok's outcome annotations on them through ``spec.gpu.podAnnotations`` — a real user feature — with
the builder's JSON report (engine_builder.report.build_report) as the termination message.
"""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client
from support.api import Api, condition, find_condition
from support.cluster import LocalCluster
from support.hub import HubRepo, local_hub
from support.manifests import (
    DELAY_MS,
    H100,
    LLAMA_8B,
    MESSAGE,
    TINYLLAMA,
    a_deployment,
    an_engine,
    create_token_secret,
    hf_config,
    manifest_for,
    success_report,
)
from support.operator import HF_CONFIG_DIR, operator_process, running_operator
from support.ports import bound_socket, free_port
from support.wait import wait_for

from engine_builder.contract import artifact_dir_name
from engine_builder.package import manifest_digest
from engine_builder.pipeline import load_spec
from engine_builder.planner import plan_from_build_spec
from engine_builder.planner.plan import DEFAULT_CONCURRENT_SEQUENCES, DERIVED_LIMITS_RULE, MAX_SEQ_LEN_RULE
from engine_builder.report import EXIT_CODES, build_report
from trtllm_operator.api.wire import (
    ARTIFACT_DATA_KEY,
    ENGINE_PLURAL,
    GROUP,
    LABEL_ENGINE_KEY,
    LABEL_SECRET_USABLE,
    VERSION,
)
from trtllm_operator.cli import main
from trtllm_operator.decide.engine_spec import InvalidEngine, PreparedEngine, prepare_engine
from trtllm_operator.decide.storage import cache_entry_name
from trtllm_operator.render.builder_job import BUILD_SPEC_DATA_KEY, desired_build_spec_configmap
from trtllm_operator.settings import Settings

pytestmark = pytest.mark.slow


# ----------------------------------------------------------------------------- scenarios
def test_build_runs_on_target_gpu_and_engine_becomes_ready(api: Api, operator: None) -> None:
    eng = an_engine("llama-fp8")
    prepared = eng.prepared()
    eng.succeeds(success_report(prepared)).runs_for(1500)
    api.create(eng)

    job = wait_for(lambda: next(iter(api.jobs()), None), desc="builder Job")
    assert job["metadata"]["name"] == prepared.job_name
    assert job["metadata"]["name"].startswith(f"build-{prepared.key[:16]}")
    owner = job["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["name"], owner["controller"]) == ("LLMEngine", "llama-fp8", True)
    spec = job["spec"]
    assert spec["backoffLimit"] == 0
    assert spec["activeDeadlineSeconds"] == 14400
    rules = spec["podFailurePolicy"]["rules"]
    assert rules[0]["action"] == "FailJob"
    assert EXIT_CODES["GPUOutOfMemory"] in rules[0]["onExitCodes"]["values"]
    assert EXIT_CODES["DownloadFailed"] not in rules[0]["onExitCodes"]["values"]
    assert rules[1] == {
        "action": "Ignore",
        "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}],
    }
    pod_spec = spec["template"]["spec"]
    assert pod_spec["restartPolicy"] == "Never"
    assert pod_spec["automountServiceAccountToken"] is False
    (container,) = pod_spec["containers"]
    assert container["terminationMessagePolicy"] == "FallbackToLogsOnError"
    assert container["resources"]["limits"]["nvidia.com/gpu"] == "1"
    # engine-builder delivered into the stock image (docs/engine-builder.md, "Running on a stock image")
    assert container["command"][:4] == ["python3", "-m", "engine_builder", "run"]
    (delivery,) = pod_spec["initContainers"]
    assert delivery["command"][:2] == ["cp", "-R"]
    token = next(e for e in container["env"] if e["name"] == "HF_TOKEN")
    assert token["valueFrom"]["secretKeyRef"] == {"name": "hf", "key": "token"}
    terms = pod_spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert terms["nodeSelectorTerms"][0]["matchExpressions"][0]["values"] == [H100]
    build_spec_cm = api.configmap(prepared.job_name)
    assert (
        build_spec_cm is not None
        and prepared.key[:63] == build_spec_cm["metadata"]["labels"][LABEL_ENGINE_KEY]
    )

    pod = wait_for(
        lambda: next((p for p in api.job_pods(prepared.job_name) if p["spec"].get("nodeName")), None)
    )
    node = api.core.read_node(pod["spec"]["nodeName"])
    assert node.metadata.labels["nvidia.com/gpu.product"] == H100

    engine = api.wait_phase("llama-fp8", "Ready")
    status = engine["status"]
    assert status["engineKey"] == prepared.key
    assert status["engineKeyShort"] == prepared.key[:12]
    assert status["observedGeneration"] == engine["metadata"]["generation"]
    # on S3 the builder publishes under the engine's namespace (#24: a bucket is shared, the cache
    # index is per namespace)
    assert status["artifact"]["uri"] == f"s3://engines/cache/{api.ns}/{prepared.key}"
    assert status["artifact"]["manifestDigest"] == manifest_for(prepared)["manifestDigest"]
    assert status["artifact"]["sizeBytes"] == manifest_for(prepared)["sizeBytes"]
    assert status["build"]["stageTimings"] == {
        "fetch": 1.5,
        "quantize": 12.25,
        "compile": 30.0,
        "package": 0.5,
    }
    assert status["build"]["jobName"] == prepared.job_name
    assert status["plan"]["fits"] is True and status["plan"]["maxKVTokens"] > 0
    assert condition(engine, "Ready")["status"] == "True"
    assert condition(engine, "Progressing")["status"] == "False"
    assert condition(engine, "Planned")["status"] == "True"

    index = api.configmap(cache_entry_name(prepared.key, prepared.storage.storage_id))
    assert index is not None
    assert not index["metadata"].get("ownerReferences"), "artifacts must outlive the LLMEngine"
    record = json.loads(index["data"][ARTIFACT_DATA_KEY])
    assert record["manifestDigest"] == manifest_for(prepared)["manifestDigest"]
    assert record["gpuProduct"] == H100
    wait_for(lambda: {"BuildStarted", "BuildSucceeded"} <= set(api.event_reasons("llama-fp8")), desc="events")


def test_exit_0_without_a_report_or_manifest_fails_and_records_nothing(api: Api, operator: None) -> None:
    """The builder pod exits 0 with an empty termination message (kwok's default for a Job's pod;
    on a real node: an image whose entrypoint never ran engine-builder): no manifest was verified,
    so the LLMEngine is Failed with ArtifactMissing, never Ready, and no cache entry is written."""
    eng = an_engine("wrote-nothing")
    prepared = eng.prepared()
    api.create(eng.succeeds())

    engine = api.wait_phase("wrote-nothing", "Failed")
    job = api.batch.read_namespaced_job(prepared.job_name, api.ns)
    assert job.status.succeeded == 1, "the Job itself completed (exit 0)"
    build = engine["status"]["build"]
    assert build["reason"] == "ArtifactMissing"
    assert "holds no builder report" in build["message"]
    assert f"kubectl delete job {prepared.job_name}" in build["message"]
    assert condition(engine, "Ready")["status"] == "False"
    assert condition(engine, "Degraded")["reason"] == "ArtifactMissing"
    assert condition(engine, "ArtifactComplete")["status"] != "True"
    assert not engine["status"].get("artifact")
    assert api.configmap(cache_entry_name(prepared.key, prepared.storage.storage_id)) is None
    wait_for(lambda: "ArtifactMissing" in api.event_reasons("wrote-nothing"), desc="ArtifactMissing Event")
    assert "BuildSucceeded" not in api.event_reasons("wrote-nothing")

    # An LLMDeployment of the Failed engine says so (phase Failed, EngineFailed naming the engine and
    # its reason), not a silent Pending (issue #25 trial).
    api.custom.create_namespaced_custom_object(
        GROUP, VERSION, api.ns, "llmdeployments", a_deployment("serves-nothing", "wrote-nothing")
    )

    def failed() -> dict[str, Any] | None:
        obj = api.custom.get_namespaced_custom_object(
            GROUP, VERSION, api.ns, "llmdeployments", "serves-nothing"
        )
        return obj if (obj.get("status") or {}).get("phase") == "Failed" else None

    deployment = wait_for(failed, timeout=30, desc="LLMDeployment phase Failed")
    ready = find_condition(deployment, "Ready")
    assert ready is not None and ready["reason"] == "EngineFailed", ready
    assert "LLMEngine 'wrote-nothing' failed: ArtifactMissing" in ready["message"], ready
    wait_for(lambda: "EngineFailed" in api.event_reasons("serves-nothing"), desc="EngineFailed Event")
    # nothing is served (the engine failed): Streaming is Unknown; spec.server.decoupled defaults to
    # false, so the message says streams will be refused and the fix.
    streaming = find_condition(deployment, "Streaming")
    assert streaming is not None, deployment["status"]
    assert (streaming["status"], streaming["reason"]) == ("Unknown", "EngineNotReady"), streaming
    assert "set spec.server.decoupled: true" in streaming["message"], streaming


@pytest.mark.parametrize(
    ("reason", "exit_code", "message", "expected_in_message"),
    [
        # the builder's report in the termination message: its reason and message win
        ("GPUOutOfMemory", 14, None, "lower max_batch_size"),
        ("DownloadFailed", 11, None, "lower max_batch_size"),
        # no report (the process died before writing it; FallbackToLogsOnError gives the log tail):
        # the exit code says what happened
        (
            "BadSpec",
            10,
            "Traceback ...\nValueError: tp=3 does not divide 32 heads",
            "does not divide 32 heads",
        ),
        ("Unknown", 3, "segfault in libfoo", "segfault in libfoo"),
    ],
)
def test_failed_build_reports_its_classified_reason(
    api: Api, operator: None, reason: str, exit_code: int, message: str | None, expected_in_message: str
) -> None:
    eng = an_engine("broken")
    prepared = eng.prepared()
    if message is None:
        report = build_report(
            status="Failed",
            reason=reason,
            stage="compile",
            message="engine build ran out of GPU memory; lower max_batch_size or raise tensor parallelism",
            engine_key=prepared.key,
        )
        message = json.dumps(report)
    api.create(eng.fails(exit_code, message))

    engine = api.wait_phase("broken", "Failed")
    build = engine["status"]["build"]
    assert build["reason"] == reason
    assert expected_in_message in build["message"]
    assert condition(engine, "Degraded")["reason"] == reason
    assert condition(engine, "Ready")["status"] == "False"
    wait_for(
        lambda: (
            "BuildFailed" in " ".join(api.event_reasons("broken")) or reason in api.event_reasons("broken")
        )
    )


def test_deterministic_failure_is_not_retried(api: Api, operator: None) -> None:
    eng = an_engine("oom").backoff_limit(3)
    report = build_report(
        status="Failed", reason="GPUOutOfMemory", stage="quantize", message="CUDA out of memory"
    )
    api.create(eng.fails(EXIT_CODES["GPUOutOfMemory"], json.dumps(report)))

    engine = api.wait_phase("oom", "Failed")
    assert engine["status"]["build"]["reason"] == "GPUOutOfMemory"
    assert "deterministic" in engine["status"]["build"]["message"]
    job = api.jobs()[0]
    failed = [c for c in job["status"]["conditions"] if c["type"] == "Failed"]
    assert failed and failed[0]["reason"] == "PodFailurePolicy"
    assert len(api.job_pods(job["metadata"]["name"])) == 1, (
        "backoffLimit 3 but a deterministic failure ran once"
    )


def test_unschedulable_build_says_why(api: Api, operator: None) -> None:
    eng = an_engine("no-h200").on("NVIDIA-H200")  # in the catalog, but no such node in the cluster
    api.create(eng)

    def degraded() -> dict[str, Any] | None:
        e = api.engine("no-h200")
        cond = next(
            (c for c in (e.get("status") or {}).get("conditions") or [] if c["type"] == "Degraded"), None
        )
        return e if cond and cond["reason"] == "BuildUnschedulable" else None

    engine = wait_for(degraded, timeout=60, desc="Degraded=BuildUnschedulable")
    assert engine["status"]["phase"] == "Unschedulable", "its own phase, not Building"
    assert condition(engine, "Ready")["reason"] == "BuildUnschedulable"
    message = condition(engine, "Degraded")["message"]
    assert "node affinity" in message or "didn't match" in message, message
    assert "nvidia.com/gpu.product=NVIDIA-H200" in message
    assert engine["status"]["build"]["reason"] == "Unschedulable"


def test_plan_from_the_hub_with_the_builders_token(cluster: LocalCluster, namespace: str) -> None:
    """Issue 25 item 2: with the chart's default settings (hfConfigFetch on, no config directory) the
    operator fetches config.json of an hf:// model through huggingface_hub with the token of the
    engine's opted-in credentialsSecretRef — the builder's token — from a Hub-like server
    (tests/support/hub.py; HF_ENDPOINT = settings.hf_endpoint), and plans. A wrong token: the plan
    condition says why, and the engine still builds (the builder plans at its plan stage)."""
    api = Api(cluster, namespace)
    create_token_secret(api.core, namespace)  # hf/token = "hf_x", labelled usable by LLM resources
    marked = {"name": "hf-wrong", "labels": {LABEL_SECRET_USABLE: "true"}}
    api.core.create_namespaced_secret(namespace, {"metadata": marked, "stringData": {"token": "hf_nope"}})
    config = (HF_CONFIG_DIR / (LLAMA_8B.removeprefix("hf://").replace("/", "__") + ".json")).read_bytes()
    repo = LLAMA_8B.removeprefix("hf://")
    defaults = Settings()
    assert defaults.hf_config_fetch and defaults.hf_config_dir is None, "the chart passes neither"
    with (
        local_hub({repo: HubRepo({"config.json": config}, token="hf_x")}) as hub,
        running_operator(cluster, [namespace], hf_config_dir=None, hf_config_fetch=True, hf_endpoint=hub.url),
    ):
        eng = an_engine("from-hub").fmt("none")
        eng.body["spec"]["model"]["source"] = LLAMA_8B
        api.create(eng)

        def planned() -> dict[str, Any] | None:
            return (api.engine(eng.name).get("status") or {}).get("plan") or None

        plan = wait_for(planned, timeout=60, desc="status.plan from the Hub's config.json")
        assert plan["fits"] is True and plan["maxSeqLenRule"]
        assert condition(api.engine(eng.name), "Planned")["status"] == "True"
        assert (("HEAD", f"/{repo}/resolve/main/config.json", True)) in hub.requests

        wrong = an_engine("wrong-token").fmt("none")
        wrong.body["spec"]["model"]["source"] = LLAMA_8B
        wrong.body["spec"]["model"]["credentialsSecretRef"] = {"name": "hf-wrong", "key": "token"}
        api.create(wrong)

        def unknown() -> dict[str, Any] | None:
            # Planned=Unknown FetchingModelConfig (phase Planning) while the request is out, first
            cond = find_condition(api.engine(wrong.name), "Planned")
            return cond if cond and cond["reason"] == "ModelConfigUnavailable" else None

        cond = wait_for(unknown, timeout=60, desc="ModelConfigUnavailable, wrong token")
        assert cond["status"] == "Unknown"
        assert "not fetched from the Hub" in cond["message"] and "401" in cond["message"], cond["message"]
        assert "plan stage" in cond["message"]
        assert (api.engine(wrong.name).get("status") or {}).get("plan") is None


def test_a_new_engine_says_planning_while_an_unreachable_hub_is_retried(
    cluster: LocalCluster, namespace: str
) -> None:
    """Fresh-user trial: with the Hub unreachable the fetch retries for ~23 s (huggingface_hub 2.4.0:
    ``http_backoff`` after a failed metadata request) and the engine had no phase at all meanwhile.
    Now it is ``Planning`` with ``Planned=Unknown`` ``FetchingModelConfig`` at once, then
    ``ModelConfigUnavailable`` saying why, and it goes on to build."""
    closed = bound_socket()  # held, never listening: connections to its port are refused
    try:
        hub_url = f"http://127.0.0.1:{closed.getsockname()[1]}"
        api = Api(cluster, namespace)
        with running_operator(
            cluster, [namespace], hf_config_dir=None, hf_config_fetch=True, hf_endpoint=hub_url
        ):
            eng = an_engine("offline").fmt("none")
            eng.body["spec"]["model"]["source"] = LLAMA_8B
            del eng.body["spec"]["model"]["credentialsSecretRef"]
            api.create(eng)

            def fetching() -> dict[str, Any] | None:
                e = api.engine(eng.name)
                cond = find_condition(e, "Planned")
                return e if cond and cond["reason"] == "FetchingModelConfig" else None

            engine = wait_for(fetching, timeout=10, interval=0.2, desc="Planned=Unknown FetchingModelConfig")
            assert engine["status"]["phase"] == "Planning"
            assert hub_url in condition(engine, "Planned")["message"]

            def unavailable() -> dict[str, Any] | None:
                cond = find_condition(api.engine(eng.name), "Planned")
                return cond if cond and cond["reason"] == "ModelConfigUnavailable" else None

            cond = wait_for(unavailable, timeout=90, desc="Planned=Unknown ModelConfigUnavailable")
            assert "not fetched from the Hub" in cond["message"], cond
            assert api.engine(eng.name)["status"]["phase"] in ("Queued", "Building", "Unschedulable")
    finally:
        closed.close()


A100 = "NVIDIA-A100-SXM4-80GB"  # hack/localcluster/nodes.py DEFAULT_NODES: a100-0, a100-1, 4 GPUs each
LLAMA_70B = "hf://meta-llama/Llama-3.1-70B-Instruct"


def test_tp4_pp4_engine_on_4_gpu_nodes_gets_a_builder_that_schedules(api: Api, operator: None) -> None:
    """Issue 25 item 3: a TP 4 × PP 4 engine (16 ranks) on 4-GPU nodes. The builder asks for one GPU
    per build worker (trtllm-build builds the ranks one after another), so its pod is scheduled on
    a 4-GPU node; the one-node rule reads 4 from the nodes (not the catalog's 8); a builder larger
    than any node is refused with the field, the nodes' count and the fix."""
    eng = an_engine("tp4pp4").on(A100).fmt("none")
    eng.body["spec"]["model"]["source"] = LLAMA_70B
    eng.body["spec"]["parallelism"] = {"tensor": 4, "pipeline": 4, "multiNode": True}
    eng.runs_for(600_000)
    api.create(eng)
    job = wait_for(lambda: next(iter(api.jobs()), None), timeout=60, desc="the builder Job")

    def scheduled() -> dict[str, Any] | None:
        pods = api.job_pods(job["metadata"]["name"])
        return pods[0] if pods and (pods[0].get("spec") or {}).get("nodeName") else None

    pod = wait_for(scheduled, timeout=90, desc="the builder pod on a node")
    assert pod["spec"]["nodeName"].startswith("a100-")
    builder = next(c for c in pod["spec"]["containers"] if c["name"] == "builder")
    assert builder["resources"]["limits"]["nvidia.com/gpu"] == "1"
    # the engine's status can land after its builder pod is scheduled (a loop pass at load 20 read
    # the engine before any status was written)
    wait_for(
        lambda: (api.engine(eng.name).get("status") or {}).get("phase") in ("Building", "Queued"),
        timeout=60,
        desc="the engine Building or Queued",
    )

    # Without multiNode the one-node rule uses the nodes' 4 GPUs (the catalog says 8 for this board).
    one_node = an_engine("tp4pp4-one-node").on(A100).fmt("none")
    one_node.body["spec"]["model"]["source"] = LLAMA_70B
    one_node.body["spec"]["parallelism"] = {"tensor": 2, "pipeline": 4}
    api.create(one_node)
    refused = api.wait_phase(one_node.name, "Failed")
    message = condition(refused, "Ready")["message"]
    assert message.startswith("spec.parallelism"), message
    assert "exceeds the 4 GPUs of one node" in message, message

    # A builder asking for more GPUs than any node has: refused before any Job, naming field and fix.
    wide = an_engine("tp4pp4-8-workers").on(A100).fmt("none")
    wide.body["spec"]["model"]["source"] = LLAMA_70B
    wide.body["spec"]["parallelism"] = {"tensor": 4, "pipeline": 4, "multiNode": True}
    wide.body["spec"]["build"] = {"workers": 8}
    api.create(wide)
    refused = api.wait_phase(wide.name, "Failed")
    assert condition(refused, "Ready")["reason"] == "DoesNotFit"
    message = condition(refused, "Ready")["message"]
    assert message.startswith("spec.build.workers"), message
    assert "request 8 nvidia.com/gpu" in message and "set spec.build.workers to at most 4" in message
    assert f"labelled nvidia.com/gpu.product={A100}" in message
    assert len(api.jobs()) == 1, "no Job for the refused engines"


def test_pending_or_missing_claim_is_named_with_its_state(api: Api, operator: None) -> None:
    """The builder mounts spec.storage.pvc: a claim that exists but is not bound (no PersistentVolume,
    no StorageClass; this control plane runs no PV controller, so no Event says why) is named as
    Pending; a claim that does not exist is named as missing. Both engines are Unschedulable."""
    api.core.create_namespaced_persistent_volume_claim(
        api.ns,
        {
            "metadata": {"name": "unbound-engines"},
            "spec": {
                "accessModes": ["ReadWriteOnce"],
                "resources": {"requests": {"storage": "10Gi"}},
                "storageClassName": "",
            },
        },
    )
    api.create(an_engine("pending-claim").pvc("unbound-engines"))
    api.create(an_engine("missing-claim").pvc("no-such-claim"))

    def unschedulable(name: str) -> dict[str, Any] | None:
        e = api.engine(name)
        return e if (e.get("status") or {}).get("phase") == "Unschedulable" else None

    pending = wait_for(lambda: unschedulable("pending-claim"), timeout=60, desc="pending-claim Unschedulable")
    message = condition(pending, "Degraded")["message"]
    assert "PersistentVolumeClaim unbound-engines is Pending (no Event on it says why)" in message, message
    assert "spec.storage.pvc.claimName" in message
    assert "does not exist" not in message and ": bind it to a PersistentVolume" in message
    missing = wait_for(lambda: unschedulable("missing-claim"), timeout=60, desc="missing-claim Unschedulable")
    message = condition(missing, "Degraded")["message"]
    # trial 46 T5: created, not bound; the cluster has nodes of the product, so no word about GPUs
    assert (
        "PersistentVolumeClaim no-such-claim does not exist: create PersistentVolumeClaim no-such-claim"
    ) in message, message
    assert "bind it" not in message and "no node labelled" not in message, message


def test_editing_gpu_resources_replaces_a_pending_builder_job(api: Api, operator: None) -> None:
    """A Job's pod template is immutable: a builder Job whose pod never got a node (100Ti of host
    memory: no node has that much; more GPUs than any node has is refused before any Job) is
    replaced when spec.gpu.resources changes, and the new one schedules."""
    eng = an_engine("resized")
    eng.body["spec"]["gpu"]["resources"] = {"gpus": 2, "memory": "100Ti"}
    prepared = eng.prepared()
    api.create(eng.succeeds(success_report(prepared)))
    api.wait_phase("resized", "Unschedulable")
    old = api.batch.read_namespaced_job(prepared.job_name, api.ns)
    assert old.spec.template.spec.containers[0].resources.limits["memory"] == "100Ti"

    api.patch(ENGINE_PLURAL, "resized", {"spec": {"gpu": {"resources": {"gpus": 1, "memory": "64Gi"}}}})
    resized = an_engine("resized")
    resized.body["spec"]["gpu"]["resources"] = {"gpus": 1, "memory": "64Gi"}
    assert resized.prepared().key == prepared.key, "gpu.resources is outside the engine key"

    def replacement() -> Any:
        try:
            job = api.batch.read_namespaced_job(prepared.job_name, api.ns)
        except client.ApiException as exc:
            if exc.status == 404:
                return None
            raise
        return job if job.metadata.uid != old.metadata.uid else None

    new = wait_for(replacement, timeout=60, desc="a new builder Job under the same name")
    limits = new.spec.template.spec.containers[0].resources.limits
    assert (limits["nvidia.com/gpu"], limits["memory"]) == ("1", "64Gi")
    engine = api.wait_phase("resized", "Ready", timeout=60)
    assert engine["status"]["artifact"]["manifestDigest"] == manifest_for(prepared)["manifestDigest"]
    assert "BuildReplaced" in api.event_reasons("resized")
    assert [p["metadata"]["ownerReferences"][0]["uid"] for p in api.job_pods(prepared.job_name)] == [
        new.metadata.uid
    ], "only the new Job's pod is left"


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (lambda e: e.tp(3), "spec.parallelism.tensor"),  # TinyLlama: 32 heads, 4 KV heads
        (lambda e: e.on("NVIDIA-A100-SXM4-80GB"), "spec.quantization.format"),  # FP8 needs SM 89+
        (lambda e: e.on("NVIDIA-Imaginary-9000"), "spec.gpu.product"),
        # A build limit trtllm-build would silently raise (check_max_num_tokens): operator-side,
        # since the KV block size is the builder's (docs/api.md "Validation").
        (lambda e: e.limits(maxNumTokens=16), "spec.build.maxNumTokens"),
    ],
)
def test_invalid_spec_fails_naming_the_field_without_a_job(
    api: Api, operator: None, mutate: Any, field: str
) -> None:
    api.create(mutate(an_engine("bad")))
    engine = api.wait_phase("bad", "Failed")
    assert engine["status"]["build"]["reason"] == "InvalidSpec"
    message = condition(engine, "Ready")["message"]
    assert message.startswith(field)
    assert "use " in message.lower(), f"the condition names no fix: {message}"
    assert "engineKey" not in engine["status"]
    assert api.jobs() == []
    # fixing the field starts a build (level-based: the next spec change is acted on)
    api.patch(
        ENGINE_PLURAL, "bad", {"spec": {**an_engine("bad").tp(1).spec, "build": {"maxNumTokens": None}}}
    )
    wait_for(api.jobs, desc="builder Job after the fix")


def test_a_pvc_model_the_spec_does_not_fit_fails_at_the_model_check(
    api: Api, operator: None, tmp_path: Path
) -> None:
    """Fresh-user trial: tensor parallelism 3 for a model on a PVC (32 attention heads) got a builder
    Job that failed only in the builder, after the TensorRT-LLM image; the same spec on a hub model is
    refused before any Job. The operator cannot read a pvc:// model, so the Job's first step is
    ``engine-builder check`` (init container ``check-model``, the small delivery image): its report is
    the engine's condition, naming the field and the fix, and the Job controller fails the Job on its
    exit code (podFailurePolicy FailJob on the init container) — no retry, the builder never runs."""
    import numpy as np  # noqa: PLC0415
    from safetensors.numpy import save_file  # noqa: PLC0415

    from engine_builder.pipeline import Options, check  # noqa: PLC0415

    # The report engine-builder check writes for this spec, on a model laid out like the claim's.
    model = tmp_path / "models" / "models" / "tiny"
    model.mkdir(parents=True)
    (model / "config.json").write_text(json.dumps(hf_config(TINYLLAMA)))
    (model / "tokenizer.json").write_text("{}")
    save_file(
        {"model.embed_tokens.weight": np.zeros((4, 4), dtype=np.float16)}, str(model / "model.safetensors")
    )
    eng = an_engine("on-pvc").model("pvc://models/tiny").tp(3)
    on_hub = {**eng.spec, "model": {"source": TINYLLAMA}}  # the same spec, config.json readable: no Job
    assert isinstance(prepare_engine("x", on_hub, hf_config=hf_config(TINYLLAMA)), InvalidEngine)
    prepared = prepare_engine(eng.name, eng.spec, hf_config=None)  # what the operator does for pvc://
    assert isinstance(prepared, PreparedEngine) and prepared.plan is None
    build_spec = yaml.safe_load(
        desired_build_spec_configmap(
            {"metadata": {"name": eng.name, "namespace": "x", "uid": "u"}}, prepared
        )["data"][BUILD_SPEC_DATA_KEY]
    )
    build_spec["output"]["termination_log"] = str(tmp_path / "termination-log")
    spec = tmp_path / "build.yaml"
    spec.write_text(yaml.safe_dump(build_spec))
    code = check(spec, Options(pvc_root=str(tmp_path / "models")))
    report = (tmp_path / "termination-log").read_text()
    assert code == EXIT_CODES["BadSpec"], report
    with api.artifact_pvc("models"):  # the model's claim, bound
        api.create(eng.fails_check(code, report).body)  # a failure report: no artifact to place
        engine = api.wait_phase("on-pvc", "Failed", timeout=60)
    (job,) = api.jobs()
    pod_spec = job["spec"]["template"]["spec"]
    assert [c["name"] for c in pod_spec["initContainers"]] == ["deliver-engine-builder", "check-model"]
    failed = [c for c in job["status"]["conditions"] if c["type"] == "Failed"]
    assert failed and failed[0]["reason"] == "PodFailurePolicy", job["status"]
    assert job["status"].get("failed") == 1  # no retry
    assert engine["status"]["build"]["reason"] == "BadSpec"
    message = condition(engine, "Ready")["message"]
    assert "parallelism.tensor: tensor parallelism 3 does not divide the 32 attention heads" in message
    assert "Fix: use a tensor parallelism that divides 32" in message


def test_default_max_seq_len_for_llama_8b_on_h100_is_bounded_by_the_rule(
    api: Api, operator: None, tmp_path: Path
) -> None:
    """Issue 25 item 4: no maxSeqLen in the spec → the operator's plan (the real Llama-3.1-8B config.json)
    derives the length by the documented rule, never the model's 131,072 tokens; the build spec the
    builder reads leaves it unset, its own plan stage derives the same length, and the engine key names
    the rule. Above the model's context the planner's warning reaches status.plan.warnings and one
    PlanWarnings Event (trial 34 F4)."""
    eng = an_engine("llama-default-len").fmt("none")
    eng.body["spec"]["model"]["source"] = LLAMA_8B
    api.create(eng)

    def planned() -> dict[str, Any] | None:
        status = api.engine(eng.name).get("status") or {}
        return status if (status.get("plan") or {}).get("recommended") and status.get("engineKey") else None

    status = wait_for(planned, timeout=60, desc="status.plan of the engine")
    plan = status["plan"]
    context = hf_config(LLAMA_8B)["max_position_embeddings"]
    length = plan["recommended"]["maxSeqLen"]
    kv_tokens = plan["maxKVTokens"]
    sequences = DEFAULT_CONCURRENT_SEQUENCES
    # The rule (docs/planner.md): the largest power of two (or the context) whose 16 sequences fit.
    assert context == 131_072 and length < context and length & (length - 1) == 0
    assert sequences * length <= kv_tokens < sequences * 2 * length
    assert plan["maxConcurrentSequences"] >= sequences and plan["fits"] is True
    assert plan["maxSeqLenRule"] == MAX_SEQ_LEN_RULE

    # What the builder reads: the length stays unset, its plan stage derives the same, the key names the rule.
    job = wait_for(lambda: next(iter(api.jobs()), None), timeout=60, desc="the builder Job")
    cm = api.configmap(job["metadata"]["name"])
    assert cm is not None
    spec_path = tmp_path / BUILD_SPEC_DATA_KEY
    spec_path.write_text(cm["data"][BUILD_SPEC_DATA_KEY])
    build_spec = load_spec(spec_path)
    assert build_spec.build.max_seq_len is None
    assert plan_from_build_spec(build_spec, hf_config(LLAMA_8B)).max_seq_len == length
    assert build_spec.key_inputs()["build"]["derived_limits"] == DERIVED_LIMITS_RULE
    assert build_spec.engine_key() == status["engineKey"]

    # Asked for explicitly, the full context is planned as given (and still fits a few sequences).
    api.patch(ENGINE_PLURAL, eng.name, {"spec": {"build": {"maxSeqLen": context}}})

    def replanned() -> dict[str, Any] | None:
        p = (api.engine(eng.name).get("status") or {}).get("plan") or {}
        return p if (p.get("recommended") or {}).get("maxSeqLen") == context else None

    full = wait_for(replanned, timeout=60, desc="the plan at the full context")
    assert full.get("maxSeqLenRule") is None and full["maxConcurrentSequences"] < sequences
    assert full.get("warnings") is None

    # Trial 34 F4: above the model's context it still fits, and the planner's warning reaches the
    # status, the Planned message and one PlanWarnings Warning Event (it was dropped before).
    beyond = 2 * context
    api.patch(ENGINE_PLURAL, eng.name, {"spec": {"build": {"maxSeqLen": beyond}}})

    def warned() -> dict[str, Any] | None:
        p = (api.engine(eng.name).get("status") or {}).get("plan") or {}
        return p if (p.get("recommended") or {}).get("maxSeqLen") == beyond and p.get("warnings") else None

    long = wait_for(warned, timeout=60, desc="status.plan.warnings above the model's context")
    assert long["fits"] is True
    assert any(
        w.startswith("spec.build.maxSeqLen: ") and f"max_position_embeddings {context}" in w
        for w in long["warnings"]
    )
    assert "(status.plan.warnings)" in condition(api.engine(eng.name), "Planned")["message"]
    wait_for(lambda: api.event_reasons(eng.name).count("PlanWarnings") == 1, timeout=30, desc="the Event")


def test_same_key_reuses_artifact_key_change_rebuilds_label_change_does_not(api: Api, operator: None) -> None:
    first = an_engine("first")
    prepared = first.prepared()
    api.create(first.succeeds(success_report(prepared)))
    api.wait_phase("first", "Ready")

    # a second LLMEngine with the same key (other name, labels and pod annotations): no second Job
    second = an_engine("second").runs_for(50)
    second.body["metadata"]["labels"] = {"team": "b"}
    assert second.prepared().key == prepared.key
    api.create(second)
    engine = api.wait_phase("second", "Ready")
    assert condition(engine, "Progressing")["reason"] == "ArtifactReused"
    assert engine["status"]["artifact"]["manifestDigest"] == manifest_for(prepared)["manifestDigest"]
    assert len(api.jobs()) == 1

    # a label change keeps the key: nothing is built
    api.patch(ENGINE_PLURAL, "first", {"metadata": {"labels": {"team": "c"}}})
    wait_for(lambda: api.engine("first")["metadata"]["labels"]["team"] == "c")
    api.patch(
        ENGINE_PLURAL, "first", {"spec": {"gpu": {"podAnnotations": {DELAY_MS: "100"}}}}
    )  # outside the key too
    wait_for(
        lambda: (find_condition(api.engine("first"), "Ready") or {}).get("observedGeneration") == 2,
        desc="generation 2 seen",
    )
    assert len(api.jobs()) == 1

    # a key change (maxBatchSize) builds a new engine under a new name
    api.patch(ENGINE_PLURAL, "first", {"spec": {"build": {"maxBatchSize": 64}}})
    jobs = wait_for(lambda: api.jobs() if len(api.jobs()) == 2 else None, desc="second Job")
    new_key = api.engine("first")["status"]["engineKey"]
    assert new_key != prepared.key
    assert {j["metadata"]["name"] for j in jobs} == {
        prepared.job_name,
        first.max_batch_size(64).prepared().job_name,
    }


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=2) as resp:
        resp.read()
        return resp


def test_operator_killed_mid_build_restarts_without_duplicates(
    api: Api, cluster: LocalCluster, namespace: str, tmp_path: Path
) -> None:
    eng = an_engine("resilient")
    prepared = eng.prepared()
    api.create(eng.succeeds(success_report(prepared)).runs_for(6000))
    port = free_port()  # the operator process binds it itself: free_port's residual race
    with operator_process(cluster, [namespace], tmp_path / "operator.log", liveness_port=port) as proc:
        wait_for(
            api.jobs,
            timeout=60,
            desc=f"Job from the subprocess operator; log:\n{proc.log()[-3000:]}",
        )
        wait_for(lambda: api.phase("resilient") == "Building", timeout=30)
        health = wait_for(lambda: _get(f"http://127.0.0.1:{port}/healthz"), desc="liveness endpoint")
        assert health.status == 200
        proc.kill()
    assert api.phase("resilient") == "Building"
    with running_operator(cluster, [namespace]):
        engine = api.wait_phase("resilient", "Ready", timeout=60)
        assert engine["status"]["artifact"]["manifestDigest"] == manifest_for(prepared)["manifestDigest"]
    assert [j["metadata"]["name"] for j in api.jobs()] == [prepared.job_name]
    assert len(api.job_pods(prepared.job_name)) == 1


def test_delete_engine_collects_job_keeps_artifact_index(api: Api, operator: None) -> None:
    eng = an_engine("short-lived")
    prepared = eng.prepared()
    api.create(eng.succeeds(success_report(prepared)))
    api.wait_phase("short-lived", "Ready")
    api.delete(ENGINE_PLURAL, "short-lived")
    wait_for(lambda: api.jobs() == [], timeout=60, desc="Job garbage-collected through ownerReferences")
    wait_for(lambda: api.configmap(prepared.job_name) is None, desc="build-spec ConfigMap collected")
    assert api.configmap(cache_entry_name(prepared.key, prepared.storage.storage_id)) is not None


def test_concurrent_build_limit_queues_with_position(api: Api, cluster: LocalCluster, namespace: str) -> None:
    with running_operator(cluster, [namespace], max_concurrent_builds=1):
        one = an_engine("one")
        api.create(one.succeeds(success_report(one.prepared())).runs_for(3000))
        wait_for(lambda: api.phase("one") == "Building")
        two = an_engine("two").max_batch_size(8)
        api.create(two.succeeds(success_report(two.prepared())))
        engine = api.wait_phase("two", "Queued")
        assert "position 1" in engine["status"]["build"]["message"]
        assert condition(engine, "Progressing")["reason"] == "Queued"
        assert len(api.jobs()) == 1
        api.wait_phase("one", "Ready", timeout=60)
        api.wait_phase("two", "Ready", timeout=60)
        assert len(api.jobs()) == 2


def test_unschedulable_build_holds_no_slot_and_simultaneous_engines_get_distinct_positions(
    api: Api, cluster: LocalCluster, namespace: str
) -> None:
    """Fresh-user trial (issue 25): with maxConcurrentBuilds 1, a build whose pod cannot be scheduled
    (no NVIDIA-H200 node) does not keep the next build queued; two LLMEngines applied together wait
    at positions 1 and 2 (creationTimestamp, then name), not both at 1."""
    with running_operator(cluster, [namespace], max_concurrent_builds=1):
        api.create(an_engine("stuck").on("NVIDIA-H200"))
        api.wait_phase("stuck", "Unschedulable", timeout=60)
        first = an_engine("first").max_batch_size(4)
        api.create(first.succeeds(success_report(first.prepared())).runs_for(600_000))
        api.wait_phase("first", "Building", timeout=60)
        pair = [an_engine(name).max_batch_size(size) for name, size in (("pair-a", 8), ("pair-b", 16))]
        for eng in pair:
            api.create(eng)
        for eng in pair:
            api.wait_phase(eng.name, "Queued")

        def positions() -> list[str] | None:
            now = [api.engine(eng.name)["status"]["build"]["message"] for eng in pair]
            return now if "position 1" in now[0] and "position 2" in now[1] else None

        messages = wait_for(positions, timeout=30, desc="pair-a at position 1, pair-b at 2")
        assert "1 of 1 concurrent builds running" in messages[0], messages
        assert len(api.jobs()) == 2  # stuck's and first's


def test_build_queue_takes_turns_across_namespaces(api: Api, cluster: LocalCluster, namespace: str) -> None:
    """#24 (one global FIFO build queue): with maxConcurrentBuilds 1, one namespace builds a0 and
    queues a1 and a2; the other namespace's b0, applied last, is next (position 1: a0's running build
    was the first namespace's turn) and builds as soon as a0 ends, before the older a1; a1 and a2
    follow (decide.engine.queue_ranks)."""
    other_ns = cluster.create_namespace("t")
    other = Api(cluster, other_ns)
    create_token_secret(other.core, other_ns)
    try:
        with running_operator(cluster, [namespace, other_ns], max_concurrent_builds=1):
            a0 = an_engine("a0")
            api.create(a0.succeeds(success_report(a0.prepared())).runs_for(10_000))
            api.wait_phase("a0", "Building", timeout=60)
            for name, size in (("a1", 8), ("a2", 16)):
                eng = an_engine(name).max_batch_size(size)
                api.create(eng.succeeds(success_report(eng.prepared())).runs_for(3000))
                api.wait_phase(name, "Queued")
            b0 = an_engine("b0").max_batch_size(32)
            other.create(b0.succeeds(success_report(b0.prepared())).runs_for(3000))
            queued = other.wait_phase("b0", "Queued")
            assert api.phase("a0") == "Building", "a0 ended before b0 queued: the scenario did not happen"
            assert "position 1: 1 of 1 concurrent builds running" in queued["status"]["build"]["message"]

            other.wait_phase("b0", "Building", timeout=60)
            # a0's slot went to b0, not to a1 (older, first in a global FIFO)
            assert api.phase("a1") == "Queued"
            assert [j["metadata"]["name"] for j in api.jobs()] == [a0.prepared().job_name]
            api.wait_phase("a1", "Ready", timeout=90)
            api.wait_phase("a2", "Ready", timeout=90)
            assert other.phase("b0") == "Ready"
    finally:
        cluster.delete_namespace(other_ns)


def cache_import(tmp_path: Path, manifest: dict[str, Any], namespace: str, storage: str) -> list[str]:
    """The arguments of ``trtllm-operator cache import`` of ``manifest`` (written to
    ``tmp_path/manifest.json``) into ``namespace`` on ``storage``; more flags may follow."""
    path = tmp_path / "manifest.json"
    path.write_text(json.dumps(manifest))
    return ["cache", "import", "--manifest", str(path), "--namespace", namespace, "--storage", storage]


def test_imported_artifact_is_served_from_cache_without_a_job(
    api: Api,
    operator: None,
    cluster: LocalCluster,
    namespace: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    eng = an_engine("imported")
    prepared = eng.prepared()
    kubeconfig = str(cluster.kubeconfig)
    argv = cache_import(tmp_path, manifest_for(prepared), namespace, "s3://engines/cache")
    assert main([*argv, "--kubeconfig", kubeconfig]) == 0
    # on S3 an import is recorded where builds in that namespace publish (#24)
    assert f"registered s3://engines/cache/{namespace}/{prepared.key}" in capsys.readouterr().out

    api.create(eng)
    engine = api.wait_phase("imported", "Ready")
    assert condition(engine, "Progressing")["reason"] == "ArtifactReused"
    assert engine["status"]["artifact"]["manifestDigest"] == manifest_for(prepared)["manifestDigest"]
    assert engine["status"]["artifact"]["tensorrtLLMVersion"] == "1.2.0"
    assert api.jobs() == []

    assert main(["cache", "list", "-n", namespace, "-o", "json", "--kubeconfig", kubeconfig]) == 0
    (listed,) = json.loads(capsys.readouterr().out)
    assert (listed["engineKey"], listed["source"]) == (prepared.key, "import")
    # Without --namespace it looks where kubectl would: the context's namespace (none in this
    # kubeconfig), else "default"; finding nothing it says where entries are (#25 item 6).
    assert main(["cache", "list", "--kubeconfig", kubeconfig]) == 0
    err = capsys.readouterr().err
    assert "no cache entries in namespace 'default' (no --namespace given" in err, err
    assert namespace in err and "--all-namespaces" in err, err
    # `kubectl config set-context --current --namespace NS` (the demo suggests it) is honoured
    # (what that command writes: the current context's `namespace` field)
    config = yaml.safe_load(Path(kubeconfig).read_text())
    current = next(c for c in config["contexts"] if c["name"] == config["current-context"])
    current["context"]["namespace"] = namespace
    with_ns = tmp_path / "kubeconfig-with-namespace"
    with_ns.write_text(yaml.safe_dump(config))
    assert main(["cache", "list", "-o", "json", "--kubeconfig", str(with_ns)]) == 0
    assert [r["engineKey"] for r in json.loads(capsys.readouterr().out)] == [prepared.key]

    # another storage is another cache: the same key there is not reused
    other = an_engine("elsewhere").pvc("models", "engines")
    assert other.prepared().key == prepared.key
    api.create(other)
    wait_for(lambda: [j for j in api.jobs() if j["metadata"]["name"] == other.prepared().job_name])


def test_import_of_a_rebuilt_write_once_directory_is_served_from_it(
    api: Api,
    operator: None,
    cluster: LocalCluster,
    namespace: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """#24 write-once artifacts: a rebuild published <key>-<build id>/ (its <key>/ was taken);
    ``cache import --artifact-uri`` records that directory, and the LLMEngine is Ready from it."""
    eng = an_engine("rebuilt").pvc("models", "engines")
    prepared = eng.prepared()
    rebuilt = f"pvc://models/engines/{prepared.key}-20261201t100000z-3f9a1c"  # new_build_id's form
    argv = cache_import(tmp_path, manifest_for(prepared), namespace, "pvc://models/engines")
    argv += ["--kubeconfig", str(cluster.kubeconfig)]
    assert main([*argv, "--artifact-uri", rebuilt]) == 0
    assert f"registered {rebuilt} " in capsys.readouterr().out

    api.create(eng)
    engine = api.wait_phase("rebuilt", "Ready")
    assert condition(engine, "Progressing")["reason"] == "ArtifactReused"
    assert engine["status"]["artifact"]["uri"] == rebuilt
    assert api.jobs() == []


def test_partial_artifact_is_refused_or_imported_as_partial(
    api: Api,
    operator: None,
    cluster: LocalCluster,
    namespace: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    eng = an_engine("partial")
    prepared = eng.prepared()
    manifest = manifest_for(prepared)
    manifest.update(
        compile={"status": "skipped", "reason": "--skip-compile"},
        partial=True,
        missing=["engine/ (compile skipped: --skip-compile): Triton's TensorRT-LLM backend has no engine"],
    )
    manifest["manifestDigest"] = manifest_digest(manifest)
    argv = cache_import(tmp_path, manifest, namespace, "s3://engines/cache")
    argv += ["--kubeconfig", str(cluster.kubeconfig)]
    assert main(argv) == 2
    assert "--allow-partial" in capsys.readouterr().err
    assert api.configmap(cache_entry_name(prepared.key, prepared.storage.storage_id)) is None

    assert main([*argv, "--allow-partial"]) == 0
    assert "PARTIAL" in capsys.readouterr().out
    api.create(eng)
    engine = api.wait_phase("partial", "Ready")
    complete = condition(engine, "ArtifactComplete")
    assert (complete["status"], complete["reason"]) == ("False", "CompileSkipped")
    assert "partial artifact: compile skipped" in condition(engine, "Ready")["message"]
    assert engine["status"]["artifact"]["partial"] is True
    assert api.jobs() == []


def test_tampered_manifest_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    manifest = manifest_for(an_engine("x").prepared())
    manifest["keyInputs"]["parallelism"]["tensor"] = 2
    assert main(cache_import(tmp_path, manifest, "default", "s3://bucket1/p")) == 2
    assert "manifest.engineKey" in capsys.readouterr().err


def test_created_pvc_is_kept_unless_reclaim_policy_delete(api: Api, operator: None) -> None:
    keep = an_engine("keep").create_pvc("20Gi")
    drop = an_engine("drop").create_pvc("20Gi").max_batch_size(16)
    drop.body["spec"]["storage"]["reclaimPolicy"] = "Delete"
    api.create(keep)
    api.create(drop)

    def pvc(name: str) -> dict[str, Any] | None:
        try:
            return dict(api.san(api.core.read_namespaced_persistent_volume_claim(name, api.ns)))
        except client.ApiException as exc:
            if exc.status == 404:
                return None
            raise

    kept = wait_for(lambda: pvc("keep-artifacts"), desc="PVC keep-artifacts")
    dropped = wait_for(lambda: pvc("drop-artifacts"), desc="PVC drop-artifacts")
    assert kept["spec"]["resources"]["requests"]["storage"] == "20Gi"
    assert not kept["metadata"].get("ownerReferences")
    assert dropped["metadata"]["ownerReferences"][0]["name"] == "drop"
    job = wait_for(
        lambda: next((j for j in api.jobs() if j["metadata"]["name"] == keep.prepared().job_name), None)
    )
    volumes = job["spec"]["template"]["spec"]["volumes"]
    assert {"name": "artifacts", "persistentVolumeClaim": {"claimName": "keep-artifacts"}} in volumes

    api.delete(ENGINE_PLURAL, "keep")
    api.delete(ENGINE_PLURAL, "drop")
    wait_for(
        lambda: (
            (pvc("drop-artifacts") or {}).get("metadata", {}).get("deletionTimestamp")
            or not pvc("drop-artifacts")
        ),
        timeout=90,
        desc="PVC of a reclaimPolicy Delete engine collected",
    )
    assert pvc("keep-artifacts") is not None and not pvc("keep-artifacts")["metadata"].get(
        "deletionTimestamp"
    )


def test_second_engine_joins_a_running_build_and_keeps_it_alive(api: Api, operator: None) -> None:
    a = an_engine("a")
    prepared = a.prepared()
    api.create(a.succeeds(success_report(prepared)).runs_for(5000))
    wait_for(lambda: api.phase("a") == "Building")
    api.create(an_engine("b"))  # same key, created while the build runs

    def owners() -> list[str]:
        jobs = api.jobs()
        assert len(jobs) == 1, [j["metadata"]["name"] for j in jobs]
        return sorted(o["name"] for o in jobs[0]["metadata"].get("ownerReferences") or [])

    wait_for(lambda: owners() == ["a", "b"], desc="both LLMEngines own the one Job")
    api.delete(ENGINE_PLURAL, "a")
    engine = api.wait_phase("b", "Ready", timeout=60)
    assert engine["status"]["build"]["jobName"] == prepared.job_name
    wait_for(lambda: owners() == ["b"], timeout=90, desc="the garbage collector drops the deleted owner")


def test_gpu_catalog_extension_from_a_configmap(api: Api, cluster: LocalCluster, namespace: str) -> None:
    catalog = "gpus:\n  - product: NVIDIA-H100-80GB-HBM3-Custom\n    memoryMiB: 81559\n    sm: 90\n"
    api.core.create_namespaced_config_map(
        namespace,
        {"metadata": {"name": "gpu-catalog"}, "data": {"extra.yaml": catalog, "broken.yaml": "gpus: 3"}},
    )
    with running_operator(cluster, [namespace], gpu_catalog_configmap="gpu-catalog"):
        api.create(an_engine("custom").on("NVIDIA-H100-80GB-HBM3-Custom"))
        job = wait_for(lambda: next(iter(api.jobs()), None), desc="Job for a product from the extension")
        expr = job["spec"]["template"]["spec"]["affinity"]["nodeAffinity"][
            "requiredDuringSchedulingIgnoredDuringExecution"
        ]
        assert expr["nodeSelectorTerms"][0]["matchExpressions"][0]["values"] == [
            "NVIDIA-H100-80GB-HBM3-Custom"
        ]
        # no node carries that product: the build waits and says why
        wait_for(
            lambda: (
                (find_condition(api.engine("custom"), "Degraded") or {}).get("reason") == "BuildUnschedulable"
            ),
            timeout=60,
        )


def test_a_rebuild_is_recorded_at_its_new_directory_and_never_at_the_mounted_one(
    api: Api, operator: None
) -> None:
    """Write-once artifact locations (#24), through the operator: an engine is built at
    ``<root>/<key>``; its Job and cache entry deleted, the next build reports ``<key>-<build id>`` —
    what engine-builder publishes when ``<key>`` exists (tests/unit/test_builder_pipeline.py::
    test_a_rebuild_on_s3_publishes_a_new_prefix) — and the cache entry and ``status.artifact.uri``
    move there, the location serving pods read; the old one is never named again."""
    eng = an_engine("once")
    prepared = eng.prepared()
    api.create(eng.succeeds(success_report(prepared)))
    engine = api.wait_phase("once", "Ready")
    root = f"s3://engines/cache/{api.ns}"
    assert engine["status"]["artifact"]["uri"] == f"{root}/{prepared.key}"

    rebuilt = artifact_dir_name(prepared.key, "20261202t040000z-0a1b2c")
    report = build_report(
        status="Succeeded",
        engine_key=prepared.key,
        artifact_uri=f"{root}/{rebuilt}",
        manifest_digest=manifest_for(prepared)["manifestDigest"],
        size_bytes=4096,
    )
    api.patch(ENGINE_PLURAL, "once", {"spec": {"gpu": {"podAnnotations": {MESSAGE: json.dumps(report)}}}})
    wait_for(
        lambda: (find_condition(api.engine("once"), "Ready") or {}).get("observedGeneration") == 2,
        desc="generation 2 seen",
    )
    # force a rebuild: the Job (and its pods) first, then the cache entry
    api.batch.delete_namespaced_job(prepared.job_name, api.ns, propagation_policy="Foreground")
    wait_for(lambda: not api.jobs() and not api.job_pods(prepared.job_name), desc="old Job and pods gone")
    api.core.delete_namespaced_config_map(prepared.cache_name, api.ns)

    def moved() -> dict[str, Any] | None:
        status = api.engine("once").get("status") or {}
        uri = (status.get("artifact") or {}).get("uri")
        return status if status.get("phase") == "Ready" and uri == f"{root}/{rebuilt}" else None

    wait_for(moved, timeout=60, desc="status.artifact.uri at the rebuilt directory")
    entry = api.configmap(prepared.cache_name)
    assert entry is not None
    assert json.loads(entry["data"][ARTIFACT_DATA_KEY])["uri"] == f"{root}/{rebuilt}"
    assert len(api.jobs()) == 1
