"""Builder Job, build-spec ConfigMap, artifact PVC and cache entry manifests (pure renderers)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from engine_builder.report import DETERMINISTIC_REASONS, EXIT_CODES
from engine_builder.spec import BuildSpec
from trtllm_operator.api.crd import engine_crd
from trtllm_operator.decide.engine_cache import prepared_record
from trtllm_operator.decide.engine_hints import unschedulable_hint
from trtllm_operator.decide.engine_spec import PreparedEngine, prepare_engine
from trtllm_operator.render.builder_job import (
    desired_artifact_pvc,
    desired_build_spec_configmap,
    desired_builder_job,
    desired_cache_entry,
)
from trtllm_operator.settings import Settings

K8S_VERSION = "1.34"
CONFIGS = Path(__file__).resolve().parents[1] / "fixtures" / "model-configs"
TINY = json.loads((CONFIGS / "TinyLlama__TinyLlama-1.1B-Chat-v1.0.json").read_text())
LLAMA70B = json.loads((CONFIGS / "meta-llama__Llama-3.1-70B-Instruct.json").read_text())
ENGINE = {"metadata": {"name": "llama", "namespace": "ml", "uid": "0b6a-uid"}}
SETTINGS = Settings()
BASE: dict[str, Any] = {
    "model": {
        "source": "hf://TinyLlama/TinyLlama-1.1B-Chat-v1.0",
        "credentialsSecretRef": {"name": "hf", "key": "token"},
    },
    "runtime": {"image": "nvcr.io/nvidia/tritonserver:26.03-trtllm-python-py3", "imagePullSecrets": ["ngc"]},
    "quantization": {"format": "fp8", "kvCacheDtype": "fp8"},
    "gpu": {"product": "H100"},
    "storage": {"pvc": {"claimName": "models", "subPath": "engines"}},
}


def prepared(hf: Any = TINY, **changes: Any) -> PreparedEngine:
    spec = copy.deepcopy(BASE)
    spec.update(changes)
    result = prepare_engine("llama", spec, hf_config=hf)
    assert isinstance(result, PreparedEngine), result
    return result


def container(job: dict[str, Any]) -> dict[str, Any]:
    (c,) = job["spec"]["template"]["spec"]["containers"]
    return dict(c)


def test_job_is_a_valid_kubernetes_object_with_the_safety_settings() -> None:
    p = prepared()
    job = desired_builder_job(ENGINE, p, SETTINGS)
    kubernetes_validate.validate(job, K8S_VERSION, strict=True)
    assert job["metadata"]["name"] == p.job_name
    assert job["metadata"]["ownerReferences"] == [
        {
            "apiVersion": "llm.trtllm-operator.dev/v1alpha1",
            "kind": "LLMEngine",
            "name": "llama",
            "uid": "0b6a-uid",
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    pod = job["spec"]["template"]["spec"]
    assert pod["restartPolicy"] == "Never"
    assert pod["automountServiceAccountToken"] is False
    assert pod["imagePullSecrets"] == [{"name": "ngc"}]
    c = container(job)
    assert c["terminationMessagePolicy"] == "FallbackToLogsOnError"
    assert c["image"] == BASE["runtime"]["image"]
    assert c["command"] == [
        "python3",
        "-m",
        "engine_builder",
        "run",
        "--spec",
        "/etc/engine-builder/build.yaml",
        "--workdir",
        f"/artifacts/.work/{p.key}",
    ]
    # engine-builder delivered by the operator image into the stock runtime image
    (init,) = pod["initContainers"]
    assert init["image"] == SETTINGS.builder_delivery_image
    assert init["command"] == ["cp", "-R", "/opt/engine-builder/.", "/opt/trtllm-builder/"]
    assert init["volumeMounts"] == [{"name": "engine-builder", "mountPath": "/opt/trtllm-builder"}]
    assert {"name": "engine-builder", "mountPath": "/opt/trtllm-builder", "readOnly": True} in c[
        "volumeMounts"
    ]
    assert {"name": "engine-builder", "emptyDir": {"sizeLimit": "512Mi"}} in pod["volumes"]
    assert {"name": "PYTHONPATH", "value": "/opt/trtllm-builder/lib"} in c["env"]
    assert {"name": "dshm", "mountPath": "/dev/shm"} in c["volumeMounts"]
    assert {"name": "artifacts", "mountPath": "/artifacts", "subPath": "engines"} in c["volumeMounts"]
    assert {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "16384Mi"}} in pod["volumes"]
    token = next(e for e in c["env"] if e["name"] == "HF_TOKEN")
    assert token == {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf", "key": "token"}}}
    # alias H100 → the canonical GFD product is the affinity (and also the alias as written)
    expr = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ][0]["matchExpressions"][0]
    assert expr == {
        "key": "nvidia.com/gpu.product",
        "operator": "In",
        "values": ["H100", "NVIDIA-H100-80GB-HBM3"],
    }


def test_pod_failure_policy_fails_fast_only_on_deterministic_exit_codes() -> None:
    rules = desired_builder_job(ENGINE, prepared(), SETTINGS)["spec"]["podFailurePolicy"]["rules"]
    codes = set(rules[0]["onExitCodes"]["values"])
    assert codes == {EXIT_CODES[r] for r in DETERMINISTIC_REASONS}
    assert EXIT_CODES["DownloadFailed"] not in codes and EXIT_CODES["Timeout"] not in codes
    assert rules[0]["onExitCodes"]["containerName"] == "builder"
    assert rules[1] == {
        "action": "Ignore",
        "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}],
    }


@pytest.mark.parametrize(
    ("changes", "hf", "gpus", "memory"),
    [
        ({}, TINY, "1", "11Gi"),  # 1.1 B params × 2 B × 1.25 + 8 GiB, rounded up
        (
            {"parallelism": {"tensor": 2, "pipeline": 2}, "quantization": {"format": "int4_awq"}},
            TINY,
            "1",  # one build worker: trtllm-build builds the 4 ranks one after another on one GPU
            "11Gi",
        ),
        ({"parallelism": {"tensor": 4}}, LLAMA70B, "1", "173Gi"),
        (
            {"gpu": {"product": "H100", "resources": {"gpus": 2, "memory": "300Gi", "cpu": "16"}}},
            TINY,
            "2",
            "300Gi",
        ),
        ({}, None, "1", None),  # no plan, no memory request
    ],
)
def test_gpus_and_host_memory(changes: dict[str, Any], hf: Any, gpus: str, memory: str | None) -> None:
    c = container(desired_builder_job(ENGINE, prepared(hf, **changes), SETTINGS))
    assert c["resources"]["limits"]["nvidia.com/gpu"] == gpus
    assert c["resources"]["limits"].get("memory") == memory
    assert c["resources"]["requests"].get("memory") == memory


def test_placement_and_pod_metadata_come_from_spec_gpu() -> None:
    gpu = {
        "product": "NVIDIA-H100-80GB-HBM3",
        "nodeSelector": {"pool": "build"},
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
        "podAnnotations": {"kwok.trtllm-operator.dev/outcome": "succeed"},
        "podLabels": {"team": "ml", "app.kubernetes.io/component": "ignored"},
        "runtimeClassName": "nvidia",
        "activeDeadlineSeconds": 600,
        "backoffLimit": 1,
    }
    job = desired_builder_job(
        ENGINE, prepared(gpu=gpu), SETTINGS.with_overrides(builder_image="registry/builder:1")
    )
    kubernetes_validate.validate(job, K8S_VERSION, strict=True)
    template = job["spec"]["template"]
    pod = template["spec"]
    assert pod["nodeSelector"] == {"pool": "build"}
    assert pod["tolerations"] == [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    assert pod["runtimeClassName"] == "nvidia"
    assert template["metadata"]["annotations"] == {"kwok.trtllm-operator.dev/outcome": "succeed"}
    assert template["metadata"]["labels"]["team"] == "ml"
    assert template["metadata"]["labels"]["app.kubernetes.io/component"] == "engine-builder"  # ours win
    assert (job["spec"]["activeDeadlineSeconds"], job["spec"]["backoffLimit"]) == (600, 1)
    assert container(job)["image"] == "registry/builder:1"


def test_s3_storage_and_model_secrets() -> None:
    p = prepared(
        model={
            "source": "s3://models/llama",
            "credentialsSecretRef": {"name": "model-s3", "key": "AWS_ACCESS_KEY_ID"},
        },
        storage={
            "s3": {
                "bucket": "engines",
                "prefix": "prod",
                "endpoint": "http://minio.storage:9000",
                "credentialsSecretRef": {"name": "engines-s3", "key": "AWS_ACCESS_KEY_ID"},
            }
        },
        hf=None,
    )
    job = desired_builder_job(ENGINE, p, SETTINGS)
    kubernetes_validate.validate(job, K8S_VERSION, strict=True)
    c = container(job)
    env = {e["name"]: e for e in c["env"]}
    assert "HF_TOKEN" not in env
    assert env["AWS_ENDPOINT_URL"]["value"] == "http://minio.storage:9000"
    assert env["AWS_SECRET_ACCESS_KEY"]["valueFrom"]["secretKeyRef"] == {
        "name": "engines-s3",
        "key": "AWS_SECRET_ACCESS_KEY",
    }
    assert c["command"][-1] == "/work"
    assert yaml.safe_load(desired_build_spec_configmap(ENGINE, p)["data"]["build.yaml"])["output"][
        "artifact_root"
    ] == ("s3://engines/prod")


def test_builder_gets_the_hub_endpoint_of_the_plan_check() -> None:
    """Issue 25: the operator's hfEndpoint (the plan check's Hub) reaches the builder as HF_ENDPOINT,
    the variable huggingface_hub 2.4.0 reads (huggingface_hub/constants.py ENDPOINT); unset: no
    variable, huggingface_hub's default."""
    p = prepared()
    env = {e["name"]: e for e in container(desired_builder_job(ENGINE, p, SETTINGS))["env"]}
    assert "HF_ENDPOINT" not in env
    mirror = Settings(hf_endpoint="https://hub.mirror.example:8443")
    job = desired_builder_job(ENGINE, p, mirror)
    kubernetes_validate.validate(job, K8S_VERSION, strict=True)
    env = {e["name"]: e for e in container(job)["env"]}
    assert env["HF_ENDPOINT"] == {"name": "HF_ENDPOINT", "value": "https://hub.mirror.example:8443"}
    assert env["HF_TOKEN"]["valueFrom"]["secretKeyRef"] == {"name": "hf", "key": "token"}


def test_pvc_model_source_is_mounted_read_only() -> None:
    p = prepared(model={"source": "pvc://weights/llama"}, hf=None)
    job = desired_builder_job(ENGINE, p, SETTINGS)
    c = container(job)
    assert {"name": "model", "mountPath": "/models/weights", "readOnly": True} in c["volumeMounts"]
    assert {"name": "model", "persistentVolumeClaim": {"claimName": "weights", "readOnly": True}} in job[
        "spec"
    ]["template"]["spec"]["volumes"]


def test_a_pvc_model_is_checked_first_from_the_delivery_image() -> None:
    """Fresh-user trial: tensor parallelism that does not divide the heads of a pvc:// model got a
    builder Job (the operator cannot read the model to plan) that failed only after the TensorRT-LLM
    image was pulled. ``engine-builder check`` runs first, from the small delivery image, on the same
    read-only claim; its deterministic exit codes fail the Job as the builder's do."""
    job = desired_builder_job(ENGINE, prepared(model={"source": "pvc://weights/llama"}, hf=None), SETTINGS)
    pod = job["spec"]["template"]["spec"]
    deliver, check = pod["initContainers"]
    assert (deliver["name"], check["name"]) == ("deliver-engine-builder", "check-model")
    assert check["image"] == SETTINGS.builder_delivery_image != container(job)["image"]
    assert check["command"] == ["engine-builder", "check", "--spec", "/etc/engine-builder/build.yaml"]
    assert {m["name"]: m.get("readOnly") for m in check["volumeMounts"]} == {
        "build-spec": True,
        "model": True,
    }
    assert check["securityContext"] == deliver["securityContext"]
    assert kubernetes_validate.validate(job, K8S_VERSION, strict=True)
    rules = job["spec"]["podFailurePolicy"]["rules"]
    assert [r["onExitCodes"]["containerName"] for r in rules if "onExitCodes" in r] == [
        "builder",
        "check-model",
    ]
    assert rules[0]["onExitCodes"]["values"] == rules[1]["onExitCodes"]["values"]
    # a model the operator planned (hf:// with its config.json), or no delivery: no check container
    hub = desired_builder_job(ENGINE, prepared(), SETTINGS)["spec"]["template"]["spec"]
    assert [c["name"] for c in hub["initContainers"]] == ["deliver-engine-builder"]
    plain = desired_builder_job(
        ENGINE, prepared(model={"source": "pvc://weights/llama"}, hf=None), Settings(builder_delivery=False)
    )
    assert "initContainers" not in plain["spec"]["template"]["spec"]


def test_build_spec_configmap_round_trips_to_the_same_key() -> None:
    p = prepared()
    cm = desired_build_spec_configmap(ENGINE, p)
    kubernetes_validate.validate(cm, K8S_VERSION, strict=True)
    spec = BuildSpec.model_validate(yaml.safe_load(cm["data"]["build.yaml"]))
    assert spec.engine_key() == p.key
    assert cm["metadata"]["name"] == p.job_name
    assert cm["metadata"]["ownerReferences"][0]["uid"] == "0b6a-uid"


@pytest.mark.parametrize(("policy", "owned"), [("Retain", False), ("Delete", True)])
def test_created_pvc_is_owned_only_with_reclaim_policy_delete(policy: str, owned: bool) -> None:
    p = prepared(storage={"createPVC": {"size": "80Gi", "storageClassName": "fast"}, "reclaimPolicy": policy})
    pvc = desired_artifact_pvc(ENGINE, p, SETTINGS)
    kubernetes_validate.validate(pvc, K8S_VERSION, strict=True)
    assert pvc["metadata"]["name"] == "llama-artifacts"
    assert pvc["spec"] == {
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": "80Gi"}},
        "storageClassName": "fast",
    }
    assert bool(pvc["metadata"].get("ownerReferences")) is owned
    assert p.deletes_with_engine is owned


def test_cache_entry_is_unowned_and_labelled_by_key_and_storage() -> None:
    p = prepared()
    record = prepared_record(
        p,
        recorded_at="2026-11-29T19:00:00Z",
        source=f"job/{p.job_name}",
    )
    cm = desired_cache_entry("ml", record)
    kubernetes_validate.validate(cm, K8S_VERSION, strict=True)
    assert cm["metadata"]["name"] == p.cache_name
    assert "ownerReferences" not in cm["metadata"]
    labels = cm["metadata"]["labels"]
    assert labels["llm.trtllm-operator.dev/engine-key"] == p.key[:63]
    assert labels["llm.trtllm-operator.dev/storage-id"] == p.storage.storage_id
    stored = json.loads(cm["data"]["artifact.json"])
    assert stored["uri"] == f"pvc://models/engines/{p.key}"
    assert stored["gpuProduct"] == "NVIDIA-H100-80GB-HBM3" and stored["sm"] == 90


@pytest.mark.parametrize(
    ("changes", "gpus"),
    [
        ({}, 1),
        ({"parallelism": {"tensor": 4}}, 1),
        ({"parallelism": {"tensor": 2, "pipeline": 2}, "build": {"workers": 2}}, 2),
        ({"parallelism": {"tensor": 4}, "gpu": {"product": "H100", "resources": {"gpus": 2}}}, 2),
    ],
)
def test_unschedulable_hint_and_crd_name_the_gpus_the_job_requests(
    changes: dict[str, Any], gpus: int
) -> None:
    """One number: what ``kubectl describe pod`` shows the Job requesting is what the hint and the
    CRD's field description say (a TP-4 build asked for 4 GPUs while the hint said 1)."""
    p = prepared(TINY, **changes)
    requested = container(desired_builder_job(ENGINE, p, SETTINGS))["resources"]["requests"]["nvidia.com/gpu"]
    assert requested == str(gpus)
    hint = unschedulable_hint(p, "0/5 nodes are available: 5 Insufficient nvidia.com/gpu.")
    assert f"the builder pod requests {gpus} nvidia.com/gpu on one node" in hint
    resources = engine_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"][
        "properties"
    ]["gpu"]["properties"]["resources"]["properties"]
    description = resources["gpus"]["description"]
    assert "Default: build.workers (one GPU per build worker" in description
