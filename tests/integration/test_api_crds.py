"""The generated CRDs on a real API server: examples accepted, defaults equal to the models',
status and scale subresources, printer columns, kubectl explain, and the immutability decisions."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from support.cluster import LocalCluster
from support.wait import wait_for

from trtllm_operator.api import (
    DEPLOYMENT_KIND,
    ENGINE_KIND,
    Condition,
    LLMDeploymentSpec,
    LLMDeploymentStatus,
    LLMEngineSpec,
    LLMEngineStatus,
)
from trtllm_operator.api.deployment import AutoscalingStatus, ScalingDecision
from trtllm_operator.api.engine import ArtifactStatus, BuildStatus, PlanStatus, RecommendedLimits

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((ROOT / "examples").glob("*.yaml"))
SPECS: dict[str, Any] = {ENGINE_KIND: LLMEngineSpec, DEPLOYMENT_KIND: LLMDeploymentSpec}
NOW = datetime(2026, 11, 29, 19, 0, 0, tzinfo=UTC)


def _get(cluster: LocalCluster, namespace: str, resource: str) -> dict[str, Any]:
    out = cluster.kubectl("get", "-n", namespace, resource, "-o", "json").stdout
    return dict(json.loads(out))


def _dump(model: Any) -> dict[str, Any]:
    return dict(model.model_dump(by_alias=True, exclude_none=True, mode="json"))


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_example_is_accepted_and_defaulted_like_the_models(
    cluster: LocalCluster, namespace: str, path: Path
) -> None:
    cluster.kubectl("apply", "--dry-run=server", "-n", namespace, "-f", str(path))
    cluster.kubectl("create", "-n", namespace, "-f", str(path))
    for doc in yaml.safe_load_all(path.read_text(encoding="utf-8")):
        if not doc:
            continue
        stored = _get(cluster, namespace, f"{doc['kind'].lower()}/{doc['metadata']['name']}")
        # The API server applied the CRD defaults; the models' defaults must give the same spec.
        parsed = SPECS[doc["kind"]].model_validate(stored["spec"])
        assert _dump(parsed) == stored["spec"]
        assert _dump(SPECS[doc["kind"]].model_validate(doc["spec"])) == stored["spec"]


def _apply_example(cluster: LocalCluster, namespace: str, name: str) -> None:
    cluster.kubectl("apply", "-n", namespace, "-f", str(ROOT / "examples" / name))


def test_status_subresource_takes_model_dumps_and_kubectl_wait_sees_ready(
    cluster: LocalCluster, namespace: str
) -> None:
    _apply_example(cluster, namespace, "llama-3.1-8b-fp8-h100.yaml")
    key = "ab" * 32
    status = LLMEngineStatus(
        phase="Ready",
        observed_generation=1,
        engine_key=key,
        engine_key_short=key[:12],
        artifact=ArtifactStatus(uri=f"pvc://x/{key}", size_bytes=9_100_000_000, manifest_digest="sha256:00"),
        plan=PlanStatus(
            fits=True,
            weight_bytes_per_gpu=8_500_000_000,
            kv_bytes_per_token_per_gpu=65536,
            kv_cache_bytes_per_gpu=60_000_000_000,
            max_kv_tokens=915_527,
            max_concurrent_sequences=55,
            recommended=RecommendedLimits(max_batch_size=256, max_num_tokens=8192),
            reasons=["fits with 60 GB of KV cache"],
        ),
        build=BuildStatus(
            job_name="llama-3-1-8b-fp8-build-abababababab",
            stage="report",
            percent=100,
            stage_timings={"fetch": 41.5, "quantize": 14.3, "compile": 120.0},
            start_time=NOW,
            completion_time=NOW,
        ),
        used_by=["llama-3-1-8b"],
        conditions=[
            Condition(
                type="Ready", status="True", reason="Built", last_transition_time=NOW, observed_generation=1
            )
        ],
    )
    patch = json.dumps({"status": _dump(status)})
    cluster.kubectl(
        "patch",
        "-n",
        namespace,
        "llmengine/llama-3-1-8b-fp8",
        "--subresource=status",
        "--type=merge",
        "-p",
        patch,
    )
    stored = _get(cluster, namespace, "llmengine/llama-3-1-8b-fp8")
    assert LLMEngineStatus.model_validate(stored["status"]) == status
    cluster.kubectl(
        "wait", "-n", namespace, "llmengine/llama-3-1-8b-fp8", "--for=condition=Ready", "--timeout=10s"
    )
    # A status write never changes the spec generation.
    assert stored["metadata"]["generation"] == 1


def test_scale_subresource_and_columns(cluster: LocalCluster, namespace: str) -> None:
    _apply_example(cluster, namespace, "llama-3.1-8b-fp8-h100.yaml")
    cluster.kubectl("scale", "-n", namespace, "llmdeployment/llama-3-1-8b", "--replicas=3")
    stored = _get(cluster, namespace, "llmdeployment/llama-3-1-8b")
    assert stored["spec"]["replicas"] == 3

    status = LLMDeploymentStatus(
        phase="Ready",
        observed_generation=stored["metadata"]["generation"],
        replicas=3,
        ready_replicas=2,
        updated_replicas=3,
        desired_replicas=3,
        selector="app.kubernetes.io/instance=llama-3-1-8b",
        engine_key="cd" * 32,
        endpoint=f"http://llama-3-1-8b.{namespace}.svc:8000",
        autoscaling=AutoscalingStatus(
            active_request_utilization=0.75,
            active_request_utilization_percent=75,
            kv_cache_utilization=0.734,
            kv_cache_utilization_percent=73,
            desired_replicas=3,
            last_scale_time=NOW,
            last_decisions=[
                ScalingDecision(
                    time=NOW,
                    from_replicas=2,
                    to_replicas=3,
                    signals={"activeRequestUtilization": 0.75},
                    reason="AboveTarget",
                )
            ],
        ),
        conditions=[
            Condition(type="Ready", status="True", reason="AllReplicasServing", last_transition_time=NOW)
        ],
    )
    cluster.kubectl(
        "patch",
        "-n",
        namespace,
        "llmdeployment/llama-3-1-8b",
        "--subresource=status",
        "--type=merge",
        "-p",
        json.dumps({"status": _dump(status)}),
    )
    scale = json.loads(
        cluster.kubectl(
            "get", "-n", namespace, "llmdeployment/llama-3-1-8b", "--subresource=scale", "-o", "json"
        ).stdout
    )
    assert scale["spec"]["replicas"] == 3
    assert scale["status"] == {"replicas": 3, "selector": "app.kubernetes.io/instance=llama-3-1-8b"}

    table = cluster.kubectl("get", "llm", "-n", namespace).stdout
    lines = table.splitlines()
    deployment_header = next(line for line in lines if line.startswith("NAME") and "ENGINE" in line)
    assert deployment_header.split() == [
        "NAME",
        "ENGINE",
        "READY",
        "DESIRED",
        "ACTIVE%",
        "KV%",
        "PHASE",
        "AGE",
    ]
    engine_header = next(line for line in lines if line.startswith("NAME") and "QUANT" in line)
    assert engine_header.split() == [
        "NAME",
        "PHASE",
        "STAGE",
        "PROGRESS",
        "QUANT",
        "TP",
        "PP",
        "GPU",
        "KEY",
        "PARTIAL",
        "AGE",
    ]
    row = next(line for line in lines if "llmdeployment" in line and "llama-3-1-8b" in line).split()
    assert row[1:7] == ["llama-3-1-8b-fp8", "2", "3", "75", "73", "Ready"]
    row = next(line for line in lines if "llmengine" in line).split()
    assert row[1:5] == ["fp8", "1", "1", "NVIDIA-H100-80GB-HBM3"]
    # -o wide: the key the pods serve (trial 46 T7), then API and Endpoint
    wide = cluster.kubectl("get", "llmd", "-n", namespace, "-o", "wide").stdout.splitlines()
    header, row = wide[0].split(), wide[1].split()
    assert header[-4:] == ["KEY", "API", "ENDPOINT", "AGE"], header
    assert row[header.index("KEY")] == "cd" * 32


def test_kubectl_explain_prints_descriptions(cluster: LocalCluster) -> None:
    # The API server publishes a new CRD's OpenAPI document a few seconds after the CRD is created.
    out = wait_for(
        lambda: cluster.kubectl("explain", "llmengine.spec.quantization").stdout,
        timeout=60,
        interval=1.0,
        desc="kubectl explain llmengine.spec.quantization",
    )
    text = " ".join(out.split())  # kubectl wraps descriptions at 80 columns
    assert "Weight/activation quantization and KV-cache precision" in text
    for field in ("format", "kvCacheDtype", "awqBlockSize", "calibration"):
        assert f"{field}\t<" in out or f"{field} <" in text
    assert "only with int4_awq or w4a8_awq" in text
    out = cluster.kubectl("explain", "llmdeployment.spec.server.kvCacheFreeGpuMemFraction").stdout
    assert "in (0, 1]" in " ".join(out.split())


def test_engine_edits_are_accepted_but_storage_location_is_immutable(
    cluster: LocalCluster, namespace: str
) -> None:
    _apply_example(cluster, namespace, "llama-3.1-8b-fp8-h100.yaml")
    engine = "llmengine/llama-3-1-8b-fp8"

    def patch(body: dict[str, Any], check: bool = True) -> Any:
        return cluster.kubectl(
            "patch", "-n", namespace, engine, "--type=merge", "-p", json.dumps({"spec": body}), check=check
        )

    # A GitOps edit of engine-defining fields makes a new engine, not a rejection.
    # AWQ calibrates on at most 32 samples (refused above that, not clamped): the example asks 512.
    patch(
        {
            "quantization": {
                "format": "int4_awq",
                "kvCacheDtype": "auto",
                "awqBlockSize": 64,
                "calibration": {"numSamples": 32},
            }
        }
    )
    patch(
        {
            "parallelism": {"tensor": 2},
            "runtime": {"image": "nvcr.io/nvidia/tritonserver:26.07-trtllm-python-py3"},
        }
    )
    assert _get(cluster, namespace, engine)["metadata"]["generation"] == 3
    # The PVC may grow, not shrink; its class and the storage kind stay.
    patch({"storage": {"createPVC": {"size": "80Gi"}}})
    proc = patch({"storage": {"createPVC": {"size": "10Gi"}}}, check=False)
    assert (
        proc.returncode != 0 and "spec.storage.createPVC.size" in proc.stderr and "only grow" in proc.stderr
    )
    # Both int-or-string forms of a quantity compare by value: 80Gi as bytes is the same size; fewer
    # bytes as an integer are a shrink; a string after an integer is compared with it.
    patch({"storage": {"createPVC": {"size": 80 * 2**30}}})
    for smaller in (10 * 2**30, "10Gi"):
        proc = patch({"storage": {"createPVC": {"size": smaller}}}, check=False)
        assert proc.returncode != 0 and "only grow" in proc.stderr, (smaller, proc.stderr)
    patch({"storage": {"createPVC": {"size": "81Gi"}}})
    proc = patch({"storage": {"createPVC": {"storageClassName": "other"}}}, check=False)
    assert proc.returncode != 0 and "storageClassName is immutable" in proc.stderr
    proc = patch({"storage": {"createPVC": None, "pvc": {"claimName": "shared"}}}, check=False)
    assert proc.returncode != 0 and "storage kind" in proc.stderr
    # Reclaim policy is not a location: it may change.
    patch({"storage": {"reclaimPolicy": "Delete"}})
