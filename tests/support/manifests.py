"""Manifest builders shared by the integration tests — one of each, instead of a copy per module.

- :func:`an_engine` / :class:`EngineBuilder`: a fluent LLMEngine whose builder pod "runs" on kwok
  (TinyLlama, S3 storage, the ``hf``/``token`` Secret); kwok's outcome annotations ride on
  ``spec.gpu.podAnnotations`` — a real user feature — with the builder's own JSON report
  (:func:`success_report`) as the termination message.
- :func:`a_cached_engine`: an LLMEngine served from the engine cache (Llama-3.1-8B FP8 on the ``engines``
  PVC), for tests that record its artifact with :func:`support.artifacts.cache_artifact` (no build);
  :func:`a_multi_node_engine`: one whose replica spans two nodes (a LeaderWorkerSet group).
- :func:`a_deployment` and :func:`an_autoscaled_deployment`: LLMDeployments.
- :func:`create_token_secret`: the Hugging Face token Secret :func:`an_engine` references.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from kubernetes import client

from engine_builder.package import manifest_digest
from engine_builder.report import build_report
from trtllm_operator.api import GROUP, VERSION
from trtllm_operator.api.wire import LABEL_SECRET_USABLE
from trtllm_operator.decide.engine_spec import PreparedEngine, prepare_engine

from .operator import HF_CONFIG_DIR

H100 = "NVIDIA-H100-80GB-HBM3"
IMAGE = "nvcr.io/nvidia/tritonserver:26.03-trtllm-python-py3"
TINYLLAMA = "hf://TinyLlama/TinyLlama-1.1B-Chat-v1.0"
LLAMA_8B = "hf://meta-llama/Llama-3.1-8B-Instruct"
# kwok stage annotations on builder pods (hack/kwok): outcome (succeed, fail, fail-check, run, pending),
# exit code, termination message, run time.
OUTCOME = "kwok.trtllm-operator.dev/outcome"
EXIT_CODE = "kwok.trtllm-operator.dev/exit-code"
MESSAGE = "kwok.trtllm-operator.dev/message"
DELAY_MS = "kwok.trtllm-operator.dev/delay-ms"


class EngineBuilder:
    """Fluent LLMEngine manifest: ``an_engine("e").tp(2).on(H100).succeeds(report)``."""

    def __init__(self, name: str) -> None:
        self.body: dict[str, Any] = {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "LLMEngine",
            "metadata": {"name": name, "labels": {"team": "a"}},
            "spec": {
                "model": {"source": TINYLLAMA, "credentialsSecretRef": {"name": "hf", "key": "token"}},
                "runtime": {"image": IMAGE},
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

    def limits(self, **build: int) -> EngineBuilder:
        self.body["spec"].setdefault("build", {}).update(build)
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

    def s3(
        self, bucket: str, prefix: str, *, endpoint: str | None = None, credentials: str | None = None
    ) -> EngineBuilder:
        """Storage on S3; ``credentials``: the Secret whose ``AWS_ACCESS_KEY_ID`` (and the secret key
        beside it) the builder reads."""
        s3: dict[str, Any] = {"bucket": bucket, "prefix": prefix}
        if endpoint:
            s3["endpoint"] = endpoint
        if credentials:
            s3["credentialsSecretRef"] = {"name": credentials, "key": "AWS_ACCESS_KEY_ID"}
        self.body["spec"]["storage"] = {"s3": s3}
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

    def fails_check(self, exit_code: int, message: str) -> EngineBuilder:
        """The builder pod's model check (init container ``check-model``) fails; the builder never runs."""
        return self.pod(**{OUTCOME: "fail-check", EXIT_CODE: str(exit_code), MESSAGE: message})

    def model(self, source: str) -> EngineBuilder:
        """The model source; a pvc:// one without credentials (the API refuses them together)."""
        self.body["spec"]["model"] = {"source": source}
        return self

    def prepared(self) -> PreparedEngine:
        """What the operator will compute for this spec (the pure function it uses)."""
        result = prepare_engine(self.name, self.spec, hf_config=hf_config(TINYLLAMA))
        assert isinstance(result, PreparedEngine), result
        return result

    def manifest(self, namespace: str | None = None) -> dict[str, Any]:
        """The LLMEngine body; in ``namespace``, a builder report (:meth:`succeeds`) names where the
        builder of an engine there publishes: on S3 the artifact root ends in the namespace
        (:meth:`~trtllm_operator.decide.storage.StorageLocation.artifact_root`)."""
        body = copy.deepcopy(self.body)
        annotations = body["spec"]["gpu"]["podAnnotations"]
        if namespace is None or MESSAGE not in annotations or "s3" not in body["spec"]["storage"]:
            return body
        try:
            report = json.loads(annotations[MESSAGE])
        except ValueError:  # a failure's plain-text message (fails()): no artifact named
            return body
        if not isinstance(report, dict):
            return body
        plain = self.prepared().storage.artifact_root()
        placed = prepare_engine(self.name, self.spec, hf_config=hf_config(TINYLLAMA), namespace=namespace)
        assert isinstance(placed, PreparedEngine), placed
        uri = str(report.get("artifactURI") or "")
        if uri.startswith(plain + "/"):
            report["artifactURI"] = placed.storage.artifact_root() + uri[len(plain) :]
            annotations[MESSAGE] = json.dumps(report, separators=(",", ":"))
        return body


def an_engine(name: str) -> EngineBuilder:
    return EngineBuilder(name)


def hf_config(source: str) -> dict[str, Any]:
    """The model config the operator plans with (tests/fixtures/model-configs)."""
    path = Path(HF_CONFIG_DIR) / (source.removeprefix("hf://").replace("/", "__") + ".json")
    return dict(json.loads(path.read_text()))


def manifest_for(prepared: PreparedEngine) -> dict[str, Any]:
    """An engine-builder manifest.json for ``prepared`` (as the package stage writes it), its
    ``manifestDigest`` computed by the builder's own ``engine_builder.package.manifest_digest``."""
    spec = prepared.build_spec
    manifest: dict[str, Any] = {
        "schema": "engine-builder.trtllm-operator.dev/manifest/v1",
        "engineKey": prepared.key,
        "keyInputs": spec.key_inputs(),
        "backend": spec.backend,
        "runtimeImage": spec.runtime_image,
        "target": {"gpuProduct": spec.target.gpu_product, "sm": spec.target.sm},
        "versions": {"tensorrt_llm": "1.2.0"},
        "compile": {"status": "done", "reason": None},
        "partial": False,
        "missing": [],
        "files": [{"path": "checkpoint/rank0.safetensors", "size": 4096, "sha256": "0" * 64}],
        "sizeBytes": 4096,
        "stageTimings": {"fetch": 0.5, "quantize": 3.0, "package": 0.1},
    }
    manifest["manifestDigest"] = manifest_digest(manifest)
    return manifest


def success_report(prepared: PreparedEngine) -> dict[str, Any]:
    """The report the builder leaves after a build of ``prepared`` (engine_builder.report.build_report),
    naming the manifest of :func:`manifest_for` by its digest."""
    manifest = manifest_for(prepared)
    return build_report(
        status="Succeeded",
        engine_key=prepared.key,
        artifact_uri=prepared.storage.artifact_uri(prepared.key),
        manifest_digest=manifest["manifestDigest"],
        size_bytes=manifest["sizeBytes"],
        stage_timings={"fetch": 1.5, "quantize": 12.25, "compile": 30.0, "package": 0.5},
    )


def create_token_secret(core: client.CoreV1Api, namespace: str, token: str = "hf_x") -> None:
    """The Hugging Face token Secret ``an_engine`` references (``hf``/``token``: ``token``), labelled
    usable by LLM resources — without the label the operator refuses it (reason ``SecretNotAllowed``)."""
    marked = {"name": "hf", "labels": {LABEL_SECRET_USABLE: "true"}}
    core.create_namespaced_secret(namespace, {"metadata": marked, "stringData": {"token": token}})


def a_cached_engine(
    name: str, *, tp: int = 1, max_batch_size: int = 64, product: str = H100, **spec: Any
) -> dict[str, Any]:
    """An LLMEngine for serving tests: Llama-3.1-8B FP8 on the ``engines`` PVC (``spec`` keys override)."""
    body: dict[str, Any] = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "LLMEngine",
        "metadata": {"name": name},
        "spec": {
            "model": {"source": LLAMA_8B},
            "backend": "tensorrt",
            "runtime": {"image": IMAGE},
            "quantization": {"format": "fp8", "kvCacheDtype": "fp8"},
            "parallelism": {"tensor": tp, "pipeline": 1},
            "build": {"maxBatchSize": max_batch_size, "maxNumTokens": 8192, "maxSeqLen": 8192},
            "gpu": {"product": product},
            "storage": {"pvc": {"claimName": "engines", "subPath": "trtllm"}},
        },
    }
    body["spec"].update(copy.deepcopy(spec))
    return body


def a_multi_node_engine(name: str) -> dict[str, Any]:
    """:func:`a_cached_engine` with 16 ranks (tensor 8 × pipeline 2, ``multiNode: true``) on 8-GPU H100
    nodes: one replica is a LeaderWorkerSet group of two pods (leader and one worker), 8 GPUs each. The
    model has no config.json in the operator's catalog, so only the one-node rule decides the placement."""
    engine = a_cached_engine(name, tp=8)
    engine["spec"]["model"]["source"] = "hf://example-org/large-model"
    engine["spec"]["parallelism"] = {"tensor": 8, "pipeline": 2, "multiNode": True}
    return engine


def a_deployment(name: str, engine: str, replicas: int = 1, **spec: Any) -> dict[str, Any]:
    """An LLMDeployment of ``engine`` (``spec`` keys are added to the spec)."""
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "LLMDeployment",
        "metadata": {"name": name},
        "spec": {"engineRef": {"name": engine}, "replicas": replicas, **spec},
    }


def an_autoscaled_deployment(
    name: str,
    engine: str,
    *,
    max_replicas: int,
    up: dict[str, Any],
    down: dict[str, Any],
    metrics: dict[str, Any] | None = None,
    scheduling: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """An LLMDeployment the built-in autoscaler drives (1 replica to start, 1..``max_replicas``)."""
    spec: dict[str, Any] = {
        "autoscaling": {
            "enabled": True,
            "mode": "builtin",
            "minReplicas": 1,
            "maxReplicas": max_replicas,
            "targets": {"activeRequestUtilization": 0.5, "kvCacheUtilization": 0.8},
            "behavior": {"scaleUp": up, "scaleDown": down},
            "metrics": metrics or {"source": "pods", "scrapeIntervalSeconds": 1},
        },
    }
    if scheduling:
        spec["scheduling"] = scheduling
    return a_deployment(name, engine, replicas=1, **spec)


def a_keda_deployment(
    name: str, engine: str, *, prometheus_url: str, active_target: float, down_window: int
) -> dict[str, Any]:
    """An LLMDeployment in ``mode: keda`` as the KEDA integration tests drive it (1..2 replicas): the
    operator renders a ScaledObject whose Prometheus triggers read ``prometheus_url``; targets
    ``active_target`` active requests per replica and 0.8 KV-cache utilization; scale-up unstabilized
    (up to 4 a step), scale-down by one a second after a ``down_window``-second window, signals every
    second."""
    body = an_autoscaled_deployment(
        name,
        engine,
        max_replicas=2,
        up={"stabilizationWindowSeconds": 0, "maxReplicasPerStep": 4, "periodSeconds": 1},
        down={"stabilizationWindowSeconds": down_window, "maxReplicasPerStep": 1, "periodSeconds": 1},
        metrics={"source": "prometheus", "prometheusURL": prometheus_url, "scrapeIntervalSeconds": 1},
    )
    body["spec"]["autoscaling"]["mode"] = "keda"
    body["spec"]["autoscaling"]["targets"] = {
        "activeRequestUtilization": active_target,
        "kvCacheUtilization": 0.8,
    }
    return body
