"""desired_children from raw API objects: the examples' LLMEngine + LLMDeployment, the gate, placement."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from trtllm_operator.decide.compatibility import NODE_SELECTOR_PRODUCT_FIELD
from trtllm_operator.decide.engine_spec import PreparedEngine, prepare_engine
from trtllm_operator.decide.serving_params import artifact_location
from trtllm_operator.render.builder_job import desired_artifact_pvc
from trtllm_operator.render.children import desired_children
from trtllm_operator.settings import Settings

REPO = Path(__file__).resolve().parents[2]
KEY = "d" * 64


def example(name: str) -> tuple[dict[str, Any], dict[str, Any]]:
    docs = list(yaml.safe_load_all((REPO / "examples" / name).read_text()))
    engine = next(d for d in docs if d["kind"] == "LLMEngine")
    deployment = next(d for d in docs if d["kind"] == "LLMDeployment")
    for d in (engine, deployment):
        d["metadata"].update(namespace="team-a", uid="uid-" + d["metadata"]["name"])
    engine["status"] = {
        "phase": "Ready",
        "engineKey": KEY,
        "artifact": {"uri": f"pvc://{engine['metadata']['name']}-artifacts/{KEY}", "sizeBytes": 9 * 10**9},
    }
    return engine, deployment


def test_example_renders_every_child() -> None:
    engine, deployment = example("llama-3.1-8b-fp8-h100.yaml")
    out = desired_children(deployment, engine, gpus_per_node=8, lws_installed=False)
    assert out.incompatibilities == [] and out.blocked is None
    kinds = [m["kind"] for m in out.manifests()]
    assert kinds == ["ConfigMap", "Deployment", "Service", "PodDisruptionBudget"]
    pod = out.workload["spec"]["template"]["spec"]  # type: ignore[index]
    c = pod["containers"][0]
    assert c["image"] == engine["spec"]["runtime"]["image"]
    assert c["resources"]["limits"] == {"memory": "32Gi", "nvidia.com/gpu": "1"}
    assert c["resources"]["requests"]["cpu"] == "8"
    vol = next(v for v in pod["volumes"] if v["name"] == "artifact")
    assert vol["persistentVolumeClaim"]["claimName"] == "llama-3-1-8b-fp8-artifacts"
    assert out.workload["spec"]["replicas"] == 2  # type: ignore[index]


def test_incompatible_image_or_gpu_renders_nothing() -> None:
    engine, deployment = example("llama-3.1-8b-fp8-h100.yaml")
    dep = copy.deepcopy(deployment)
    dep["spec"]["server"]["image"] = "nvcr.io/nvidia/tritonserver:25.05-trtllm-python-py3"
    out = desired_children(dep, engine, gpus_per_node=8, lws_installed=True)
    assert [i.field for i in out.incompatibilities] == ["spec.server.image"] and out.manifests() == []
    dep = copy.deepcopy(deployment)
    dep["spec"]["scheduling"] = {"nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"}}
    out = desired_children(dep, engine, gpus_per_node=8, lws_installed=True)
    assert [i.field for i in out.incompatibilities] == [NODE_SELECTOR_PRODUCT_FIELD] and out.manifests() == []
    assert "SM 80" in out.incompatibilities[0].message() and "SM 90" in out.incompatibilities[0].message()
    dep["metadata"]["annotations"] = {}
    dep["spec"]["scheduling"] = {}
    dep["spec"]["server"]["image"] = "registry.local/triton:26.03-trtllm"
    dep["metadata"]["annotations"] = {
        "llm.trtllm-operator.dev/compatible-runtime-images": engine["spec"]["runtime"]["image"]
    }
    assert desired_children(dep, engine, gpus_per_node=8, lws_installed=True).incompatibilities == []


def test_partial_artifact_renders_nothing_without_the_opt_in() -> None:
    engine, deployment = example("llama-3.1-8b-fp8-h100.yaml")
    engine["status"]["artifact"].update(partial=True, missing=["engine/ (compile skipped: --skip-compile)"])
    out = desired_children(deployment, engine, gpus_per_node=8, lws_installed=False)
    assert out.manifests() == [] and out.blocked is not None
    assert out.blocked[0] == "PartialArtifact" and "compile skipped" in out.blocked[1]
    deployment["metadata"]["annotations"] = {"llm.trtllm-operator.dev/allow-partial-artifact": "true"}
    out = desired_children(deployment, engine, gpus_per_node=8, lws_installed=False)
    assert out.blocked is None and [m["kind"] for m in out.manifests()][1] == "Deployment"


def test_replica_larger_than_node_needs_leaderworkerset() -> None:
    engine, deployment = example("llama-3.1-8b-fp8-h100.yaml")
    engine["spec"]["parallelism"] = {"tensor": 8, "pipeline": 2}
    out = desired_children(deployment, engine, gpus_per_node=8, lws_installed=False)
    assert out.blocked is not None and out.blocked[0] == "LeaderWorkerSetRequired"
    assert out.manifests() == []
    out = desired_children(deployment, engine, gpus_per_node=8, lws_installed=True)
    assert out.workload is not None and out.workload["kind"] == "LeaderWorkerSet"


def test_artifact_location() -> None:
    engine, _ = example("llama-3.1-8b-fp8-h100.yaml")
    assert artifact_location(engine) == ("llama-3-1-8b-fp8-artifacts", KEY)
    engine["status"]["artifact"] = {}
    engine["spec"]["storage"] = {"pvc": {"claimName": "models", "subPath": "engines/"}}
    assert artifact_location(engine) == ("models", f"engines/{KEY}")
    engine["spec"]["storage"] = {
        "s3": {
            "bucket": "engines",
            "prefix": "llm/",
            "endpoint": "http://minio:9000",
            "credentialsSecretRef": {"name": "s3-creds", "key": "AWS_ACCESS_KEY_ID"},
        }
    }
    dep = example("llama-3.1-8b-fp8-h100.yaml")[1]
    out = desired_children(dep, engine, gpus_per_node=8, lws_installed=False)
    assert out.blocked is None and out.workload is not None
    pod = out.workload["spec"]["template"]["spec"]
    assert next(v for v in pod["volumes"] if v["name"] == "artifact")["emptyDir"] == {}
    (init,) = pod["initContainers"]
    assert init["command"][-3:] == ["engines", f"llm/{KEY}", "/artifact"]
    env = {e["name"]: e for e in init["env"]}
    assert env["AWS_ENDPOINT_URL"]["value"] == "http://minio:9000"
    assert env["AWS_SECRET_ACCESS_KEY"]["valueFrom"]["secretKeyRef"] == {
        "name": "s3-creds",
        "key": "AWS_SECRET_ACCESS_KEY",
    }
    mount = next(m for m in pod["containers"][0]["volumeMounts"] if m["name"] == "artifact")
    assert mount == {"name": "artifact", "mountPath": "/artifact", "readOnly": True}


@pytest.mark.parametrize(
    ("engine_name", "claim"),
    [
        ("my.engine", "my.engine-artifacts"),
        ("llama", "llama-artifacts"),
        ("a" * 60, "a" * 53 + "-artifacts"),
        ("b" * 52 + ".cd", "b" * 52 + "-artifacts"),  # a cut that would end in "." drops it
        ("x" * 40 + "." + "y" * 30, "x" * 40 + "." + "y" * 12 + "-artifacts"),
    ],
)
def test_serving_mounts_the_pvc_the_engine_controller_creates(engine_name: str, claim: str) -> None:
    """One name for the operator-created artifact PVC: what the engine controller creates (and the
    builder writes to) is what serving pods mount, for dotted names and names over 53 characters."""
    engine, _ = example("llama-3.1-8b-fp8-h100.yaml")
    engine["metadata"]["name"] = engine_name
    engine["spec"]["storage"] = {"createPVC": {"size": "100Gi"}}
    engine["status"]["artifact"] = {}
    prepared = prepare_engine(engine_name, engine["spec"])
    assert isinstance(prepared, PreparedEngine), prepared
    pvc = desired_artifact_pvc(engine, prepared, Settings())
    assert pvc["metadata"]["name"] == claim
    assert prepared.storage.claim_name == claim
    assert artifact_location(engine) == (claim, KEY)
