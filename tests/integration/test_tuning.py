"""Tuning end to end: benchmark Jobs for Ready engines and the KV-cache advisor, real control plane.

The whole operator runs in-process. Engines become Ready through the engine cache (an artifact
recorded for the key, as ``trtllm-operator cache import`` does), so no builder Job runs; the
artifact PVC is a pre-bound PV/PVC pair. Benchmark pods "run" on kwok: ``spec.benchmark.podAnnotations``
carries kwok's outcome and the termination message — for success the sweep summary fixture
(tests/fixtures/trtllm-bench/llama-3.1-8b-fp8-h100-sweep.json, exactly what the Job's script writes).
The advisor test serves Triton ``/metrics`` on the kwok pods' IPs with the metrics emulator
(:mod:`trtllm_operator.emulator`) at a sustained high KV-cache utilization.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from support.api import Api as SharedApi
from support.cluster import LocalCluster
from support.manifests import (
    DELAY_MS,
    EXIT_CODE,
    H100,
    IMAGE,
    MESSAGE,
    OUTCOME,
    a_cached_engine,
    a_deployment,
)
from support.operator import running_operator
from support.ports import free_port
from support.wait import wait_for

from trtllm_operator.api import GROUP, VERSION
from trtllm_operator.emulator import Control, Fleet
from trtllm_operator.handlers import tuning as tuning_handlers

pytestmark = pytest.mark.slow

SWEEP = Path(__file__).resolve().parents[1] / "fixtures" / "trtllm-bench" / "llama-3.1-8b-fp8-h100-sweep.json"


class Api(SharedApi):
    """The shared wrapper plus the benchmark's status, Job and pod."""

    def benchmark(self, engine: str) -> dict[str, Any]:
        return dict((self.get("llmengines", engine).get("status") or {}).get("benchmark") or {})

    def job(self, name: str) -> dict[str, Any] | None:
        try:
            return dict(self.san(self.batch.read_namespaced_job(name, self.ns)))
        except client.ApiException as exc:
            if exc.status == 404:
                return None
            raise

    def job_pod(self, job: str) -> dict[str, Any] | None:
        return next(iter(self.job_pods(job)), None)


@pytest.fixture
def api(cluster: LocalCluster, namespace: str) -> Iterator[Api]:
    a = Api(cluster, namespace)
    with a.artifact_pvc():
        yield a


def test_benchmark_job_on_the_engine_gpu_and_results_in_status(cluster: LocalCluster, api: Api) -> None:
    sweep = SWEEP.read_text().strip()
    good = a_cached_engine(
        "llama",
        tp=2,
        benchmark={
            "values": [1, 8, 32, 128, 256, 512, 1024, 2048],
            "podAnnotations": {OUTCOME: "succeed", MESSAGE: sweep, DELAY_MS: "500"},
        },
    )
    bad = a_cached_engine(
        "broken",
        max_batch_size=32,
        benchmark={
            "values": [8, 64],
            "podAnnotations": {OUTCOME: "fail", EXIT_CODE: "1", MESSAGE: "RuntimeError: CUDA out of memory"},
        },
    )
    plain = a_cached_engine("plain", max_batch_size=16)  # no spec.benchmark: no Job
    for e in (good, bad, plain):
        api.cache_artifact(e)
        api.create(e)

    with running_operator(cluster, [api.ns]):
        status = wait_for(
            lambda: (s := api.benchmark("llama")).get("phase") == "Succeeded" and s,
            timeout=90,
            desc="benchmark Succeeded",
        )
        engine = api.get("llmengines", "llama")
        key = engine["status"]["engineKey"]
        assert engine["status"]["phase"] == "Ready"
        assert status["engineKey"] == key
        job = api.job(status["jobName"])
        assert job is not None and job["metadata"]["name"].startswith(f"bench-{key[:16]}-")
        owner = job["metadata"]["ownerReferences"][0]
        assert (owner["kind"], owner["name"]) == ("LLMEngine", "llama")
        pod_spec = job["spec"]["template"]["spec"]
        (container,) = pod_spec["containers"]
        assert container["image"] == IMAGE
        assert container["resources"]["limits"]["nvidia.com/gpu"] == "2"
        assert pod_spec["automountServiceAccountToken"] is False
        mount = next(m for m in container["volumeMounts"] if m["name"] == "artifact")
        assert mount == {
            "name": "artifact",
            "mountPath": "/artifact",
            "readOnly": True,
            "subPath": f"trtllm/{key}",
        }
        volume = next(v for v in pod_spec["volumes"] if v["name"] == "artifact")
        assert volume["persistentVolumeClaim"] == {"claimName": "engines", "readOnly": True}
        pod = api.job_pod(job["metadata"]["name"])
        assert pod is not None
        node = api.core.read_node(pod["spec"]["nodeName"])
        assert node.metadata.labels["nvidia.com/gpu.product"] == H100

        # the sweep summary from the termination message, in status
        assert status["recommendedMaxBatchSize"] == 640
        (curve,) = status["curves"]
        assert (curve["inputTokens"], curve["outputTokens"], curve["knee"]) == (128, 128, 512)
        runs = status["runs"]
        assert [r["concurrency"] for r in runs] == [1, 8, 32, 128, 256, 512, 1024, 2048]
        assert runs[0]["outputTokensPerSecond"] == pytest.approx(384.1)
        assert runs[0]["ttftMs"]["p99"] > runs[0]["ttftMs"]["p50"] > 0
        assert runs[-1]["error"] == "trtllm-bench exited with 1"
        assert "advice only" in status["message"]
        # never written into spec
        assert "maxBatchSize" in engine["spec"]["build"] and engine["spec"]["build"]["maxBatchSize"] == 64
        assert "BenchmarkSucceeded" in api.event_reasons("llama")

        failed = wait_for(
            lambda: (s := api.benchmark("broken")).get("phase") == "Failed" and s,
            timeout=60,
            desc="benchmark Failed",
        )
        assert "the benchmark Job failed" in failed["message"]
        assert "CUDA out of memory" in failed["message"]
        assert not api.benchmark("plain")
        jobs = [j.metadata.name for j in api.batch.list_namespaced_job(api.ns).items]
        assert sorted(n.split("-")[0] for n in jobs) == ["bench", "bench"]  # none for "plain"

        # an edited benchmark spec runs a new Job for the same key
        api.custom.patch_namespaced_custom_object(
            GROUP,
            VERSION,
            api.ns,
            "llmengines",
            "llama",
            {"spec": {"benchmark": {"values": [1, 8, 32, 128, 256, 512, 1024]}}},
        )
        rerun = wait_for(
            lambda: (
                (s := api.benchmark("llama")).get("jobName") != status["jobName"]
                and s.get("phase") == "Succeeded"
                and s
            ),
            timeout=90,
            desc="second benchmark",
        )
        assert rerun["engineKey"] == key


def test_advisor_recommends_after_sustained_high_kv_through_the_emulator(
    cluster: LocalCluster, api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = a_cached_engine("llama")
    api.cache_artifact(engine)
    api.create(engine)
    api.create(
        a_deployment(
            "chat", "llama", replicas=2, tuning={"enabled": True, "windowSeconds": 60, "intervalSeconds": 1}
        )
    )
    # A free port in place of Triton's 8002 (a fixed port collides with another session, a demo, or a
    # wildcard listener). The advisor scrapes the port render.serving.metrics_port names for the
    # deployment's api, so that is pointed at this one, as the autoscaler's METRICS_PORT is in
    # test_autoscaling.py. The emulators bind it per pod IP as pods appear (not port 0: the port must
    # be known first): free_port's residual race.
    port = free_port()
    monkeypatch.setattr(tuning_handlers, "metrics_port", lambda api: port)
    with (
        Fleet(port=port, control=Control(fixed={"requests": 0, "kvCacheUtilization": 0.93})) as fleet,
        api.follow_pods(fleet),
        running_operator(cluster, [api.ns]),
    ):
        wait_for(lambda: len(fleet.addresses()) == 2, timeout=90, desc="2 serving pods with emulators")

        def recommended() -> list[dict[str, Any]] | None:
            status = api.get("llmdeployments", "chat").get("status") or {}
            return status.get("recommendations") or None

        # nothing before the window has enough evidence
        status = api.get("llmdeployments", "chat").get("status") or {}
        assert not status.get("recommendations")
        recs = wait_for(recommended, timeout=150, interval=1.0, desc="a tuning recommendation")
    assert [r["type"] for r in recs] == ["KVCacheHigh", "RaiseKVCacheFraction"]
    high, capacity = recs
    ev = high["evidence"]
    assert ev["windowSeconds"] == 60 and ev["samples"] >= 10
    assert ev["kvCacheUtilizationP50"] == pytest.approx(0.93, abs=0.01)
    history = api.get("llmdeployments", "chat")["status"]["tuning"]["history"]
    assert ev["fractionAboveHigh"] == 1.0, history
    assert ev["waitingPerReplicaP50"] == 0
    changes = {c["field"]: (c["current"], c["recommended"]) for c in high["changes"]}
    assert changes["LLMEngine spec.build.maxBatchSize"] == (64, 48)  # 64 / (0.93 / 0.7) → 48
    assert changes["LLMEngine spec.build.maxNumTokens"] == (8192, 11008)  # × 1.33, up to 256
    assert capacity["changes"] == [
        {"field": "spec.server.kvCacheFreeGpuMemFraction", "current": 0.9, "recommended": 0.95}
    ]
    dep = api.get("llmdeployments", "chat")
    history = dep["status"]["tuning"]["history"]
    assert len(history) >= ev["samples"] and all(
        row[1] == pytest.approx(0.93, abs=0.01) for row in history[-5:]
    )
    # advice only: spec untouched
    assert (
        "kvCacheFreeGpuMemFraction" not in (dep["spec"].get("server") or {})
        or dep["spec"]["server"]["kvCacheFreeGpuMemFraction"] == 0.9
    )
    assert api.get("llmengines", "llama")["spec"]["build"]["maxBatchSize"] == 64
    assert "TuningRecommendation" in api.event_reasons("chat")
