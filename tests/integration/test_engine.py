"""LLMEngine controller against a real API server, scheduler, Job controller, GC and kwok GPU nodes.

The operator runs in-process (tests/support/operator.py). Builder pods "run" on kwok: the test puts
kwok's outcome annotations on them through ``spec.gpu.podAnnotations`` — a real user feature — with
the builder's JSON report (engine_builder.report.build_report) as the termination message.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from support.cluster import LocalCluster
from support.operator import HF_CONFIG_DIR, running_operator
from support.wait import wait_for

from engine_builder.report import EXIT_CODES, build_report
from trtllm_operator.api import ENGINE_PLURAL, GROUP, VERSION
from trtllm_operator.decide.engine import (
    ARTIFACT_DATA_KEY,
    LABEL_ENGINE_KEY,
    PreparedEngine,
    cache_entry_name,
    prepare_engine,
)

H100 = "NVIDIA-H100-80GB-HBM3"
TINYLLAMA = "hf://TinyLlama/TinyLlama-1.1B-Chat-v1.0"
OUTCOME = "kwok.trtllm-operator.dev/outcome"
EXIT_CODE = "kwok.trtllm-operator.dev/exit-code"
MESSAGE = "kwok.trtllm-operator.dev/message"
DELAY_MS = "kwok.trtllm-operator.dev/delay-ms"

pytestmark = pytest.mark.slow


# ----------------------------------------------------------------------------- fixture builders
class EngineBuilder:
    """Fluent LLMEngine manifest: ``an_engine("e").fp8().tp(2).on(H100).succeeds(report)``."""

    def __init__(self, name: str) -> None:
        self.body: dict[str, Any] = {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "LLMEngine",
            "metadata": {"name": name, "labels": {"team": "a"}},
            "spec": {
                "model": {"source": TINYLLAMA, "credentialsSecretRef": {"name": "hf", "key": "token"}},
                "runtime": {"image": "nvcr.io/nvidia/tritonserver:26.03-trtllm-python-py3"},
                "quantization": {"format": "fp8", "kvCacheDtype": "fp8"},
                "gpu": {"product": H100, "backoffLimit": 0, "podAnnotations": {DELAY_MS: "300"}},
                "storage": {"s3": {"bucket": "engines", "prefix": "cache"}},
            },
        }

    @property
    def name(self) -> str:
        return str(self.body["metadata"]["name"])

    @property
    def spec(self) -> dict[str, Any]:
        return dict(self.body["spec"])

    def fmt(self, fmt: str, kv: str = "auto") -> EngineBuilder:
        self.body["spec"]["quantization"] = {"format": fmt, "kvCacheDtype": kv}
        return self

    def tp(self, n: int) -> EngineBuilder:
        self.body["spec"].setdefault("parallelism", {})["tensor"] = n
        return self

    def on(self, product: str) -> EngineBuilder:
        self.body["spec"]["gpu"]["product"] = product
        return self

    def max_batch_size(self, n: int) -> EngineBuilder:
        self.body["spec"].setdefault("build", {})["maxBatchSize"] = n
        return self

    def backoff_limit(self, n: int) -> EngineBuilder:
        self.body["spec"]["gpu"]["backoffLimit"] = n
        return self

    def pvc(self, claim: str, sub_path: str | None = None) -> EngineBuilder:
        pvc: dict[str, Any] = {"claimName": claim}
        if sub_path:
            pvc["subPath"] = sub_path
        self.body["spec"]["storage"] = {"pvc": pvc}
        return self

    def create_pvc(self, size: str) -> EngineBuilder:
        self.body["spec"]["storage"] = {"createPVC": {"size": size}}
        return self

    def pod(self, **annotations: str) -> EngineBuilder:
        self.body["spec"]["gpu"]["podAnnotations"].update(annotations)
        return self

    def runs_for(self, ms: int) -> EngineBuilder:
        return self.pod(**{DELAY_MS: str(ms)})

    def succeeds(self, report: dict[str, Any] | None = None) -> EngineBuilder:
        self.pod(**{OUTCOME: "succeed"})
        if report is not None:
            self.pod(**{MESSAGE: json.dumps(report, separators=(",", ":"))})
        return self

    def fails(self, exit_code: int, message: str) -> EngineBuilder:
        return self.pod(**{OUTCOME: "fail", EXIT_CODE: str(exit_code), MESSAGE: message})

    def prepared(self) -> PreparedEngine:
        """What the operator will compute for this spec (the pure function it uses)."""
        result = prepare_engine(self.name, self.spec, hf_config=_hf_config(TINYLLAMA))
        assert isinstance(result, PreparedEngine), result
        return result

    def manifest(self) -> dict[str, Any]:
        return copy.deepcopy(self.body)


def an_engine(name: str) -> EngineBuilder:
    return EngineBuilder(name)


def _hf_config(source: str) -> dict[str, Any]:
    path = Path(HF_CONFIG_DIR) / (source.removeprefix("hf://").replace("/", "__") + ".json")
    return dict(json.loads(path.read_text()))


def success_report(prepared: PreparedEngine) -> dict[str, Any]:
    return build_report(
        status="Succeeded",
        engine_key=prepared.key,
        artifact_uri=prepared.storage.artifact_uri(prepared.key),
        manifest_digest="sha256:" + "ab" * 32,
        size_bytes=1_234_567,
        stage_timings={"fetch": 1.5, "quantize": 12.25, "compile": 30.0, "package": 0.5},
    )


# ----------------------------------------------------------------------------- cluster helpers
class Api:
    def __init__(self, cluster: LocalCluster, namespace: str) -> None:
        self.ns = namespace
        self.core = client.CoreV1Api(cluster.api)
        self.batch = client.BatchV1Api(cluster.api)
        self.custom = client.CustomObjectsApi(cluster.api)
        self.san = cluster.api.sanitize_for_serialization

    def create(self, engine: EngineBuilder) -> dict[str, Any]:
        return dict(
            self.custom.create_namespaced_custom_object(
                GROUP, VERSION, self.ns, ENGINE_PLURAL, engine.manifest()
            )
        )

    def engine(self, name: str) -> dict[str, Any]:
        return dict(self.custom.get_namespaced_custom_object(GROUP, VERSION, self.ns, ENGINE_PLURAL, name))

    def patch_engine(self, name: str, body: dict[str, Any]) -> None:
        self.custom.patch_namespaced_custom_object(
            GROUP, VERSION, self.ns, ENGINE_PLURAL, name, body, _content_type="application/merge-patch+json"
        )

    def delete_engine(self, name: str) -> None:
        self.custom.delete_namespaced_custom_object(GROUP, VERSION, self.ns, ENGINE_PLURAL, name)

    def jobs(self) -> list[dict[str, Any]]:
        return [self.san(j) for j in self.batch.list_namespaced_job(self.ns).items]

    def pods(self, job: str) -> list[dict[str, Any]]:
        items = self.core.list_namespaced_pod(
            self.ns, label_selector=f"batch.kubernetes.io/job-name={job}"
        ).items
        return [self.san(p) for p in items]

    def configmap(self, name: str) -> dict[str, Any] | None:
        try:
            return dict(self.san(self.core.read_namespaced_config_map(name, self.ns)))
        except client.ApiException as exc:
            if exc.status == 404:
                return None
            raise

    def event_reasons(self, name: str) -> list[str]:
        items = self.core.list_namespaced_event(self.ns, field_selector=f"involvedObject.name={name}").items
        return [e.reason for e in items]

    def phase(self, name: str) -> str | None:
        return (self.engine(name).get("status") or {}).get("phase")

    def wait_phase(self, name: str, phase: str, timeout: float = 60) -> dict[str, Any]:
        def check() -> dict[str, Any] | None:
            e = self.engine(name)
            return e if (e.get("status") or {}).get("phase") == phase else None

        return wait_for(check, timeout=timeout, desc=f"LLMEngine {name} phase {phase}")


def condition(engine: dict[str, Any], type_: str) -> dict[str, Any]:
    for c in (engine.get("status") or {}).get("conditions") or []:
        if c["type"] == type_:
            return dict(c)
    raise AssertionError(f"no {type_} condition in {engine.get('status')}")


@pytest.fixture
def api(cluster: LocalCluster, namespace: str) -> Api:
    return Api(cluster, namespace)


@pytest.fixture
def operator(cluster: LocalCluster, namespace: str) -> Iterator[None]:
    with running_operator(cluster, [namespace]):
        yield


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
    assert container["command"][:2] == ["engine-builder", "run"]
    token = next(e for e in container["env"] if e["name"] == "HF_TOKEN")
    assert token["valueFrom"]["secretKeyRef"] == {"name": "hf", "key": "token"}
    terms = pod_spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert terms["nodeSelectorTerms"][0]["matchExpressions"][0]["values"] == [H100]
    build_spec_cm = api.configmap(prepared.job_name)
    assert (
        build_spec_cm is not None
        and prepared.key[:63] == build_spec_cm["metadata"]["labels"][LABEL_ENGINE_KEY]
    )

    pod = wait_for(lambda: next((p for p in api.pods(prepared.job_name) if p["spec"].get("nodeName")), None))
    node = api.core.read_node(pod["spec"]["nodeName"])
    assert node.metadata.labels["nvidia.com/gpu.product"] == H100

    engine = api.wait_phase("llama-fp8", "Ready")
    status = engine["status"]
    assert status["engineKey"] == prepared.key
    assert status["engineKeyShort"] == prepared.key[:12]
    assert status["observedGeneration"] == engine["metadata"]["generation"]
    assert status["artifact"]["uri"] == f"s3://engines/cache/{prepared.key}"
    assert status["artifact"]["manifestDigest"] == "sha256:" + "ab" * 32
    assert status["artifact"]["sizeBytes"] == 1_234_567
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
    assert record["manifestDigest"] == "sha256:" + "ab" * 32
    assert record["gpuProduct"] == H100
    wait_for(lambda: {"BuildStarted", "BuildSucceeded"} <= set(api.event_reasons("llama-fp8")), desc="events")
