"""Rendered serving pods against the real API server's Pod Security admission (issue 24, item 5).

Kubernetes' built-in ``PodSecurity`` admission plugin (enabled by default in kube-apiserver v1.34)
enforces the Pod Security Standards on a namespace labelled
``pod-security.kubernetes.io/enforce=<level>`` (kubernetes.io, "Pod Security Admission" and "Pod
Security Standards"). Each test creates a Pod from the pod template the operator renders, with
``dryRun=All`` (admission runs, nothing is stored), in a namespace enforcing the level the pod
claims, and shows the check can fail: the same pod without its security context is refused.

* one-node replicas (Deployment pods, with and without the S3 fetch init container): ``restricted``;
* multi-node replicas (LeaderWorkerSet leader and worker pods, which run ``sshd``/``mpirun`` as the
  image's root user): ``baseline``;
* builder pods: ``baseline`` by default (the image's root user writes the artifact volume),
  ``restricted`` with the operator setting ``builder_run_as_non_root``.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client
from support.cluster import LocalCluster
from support.serving import serving_params

from trtllm_operator.decide.engine_spec import PreparedEngine, prepare_engine
from trtllm_operator.decide.serving_params import S3Artifact, ServingParams
from trtllm_operator.render.builder_job import desired_builder_job
from trtllm_operator.render.deployment import desired_deployment
from trtllm_operator.render.leaderworkerset import desired_leaderworkerset
from trtllm_operator.render.model_repository import desired_model_repository
from trtllm_operator.settings import Settings

pytestmark = pytest.mark.slow

KEY = "c" * 64
ENFORCE = "pod-security.kubernetes.io/enforce"


def a_replica(**overrides: Any) -> ServingParams:
    return serving_params(
        **{"engine_key": KEY, "artifact_sub_path": f"trtllm/{KEY}", "replicas": 1, **overrides}
    )


def templates(params: ServingParams) -> dict[str, dict[str, Any]]:
    """Every pod template the operator renders for ``params``, by role."""
    cm = desired_model_repository(params)
    if not params.multi_node:
        return {"server": desired_deployment(params, cm)["spec"]["template"]}
    lws = desired_leaderworkerset(params, cm)["spec"]["leaderWorkerTemplate"]
    return {"leader": lws["leaderTemplate"], "worker": lws["workerTemplate"]}


def without_security_context(template: dict[str, Any]) -> dict[str, Any]:
    stripped = copy.deepcopy(template)
    stripped["spec"].pop("securityContext", None)
    for c in stripped["spec"].get("containers", []) + stripped["spec"].get("initContainers", []):
        c.pop("securityContext", None)
    return stripped


@pytest.fixture
def core(cluster: LocalCluster) -> client.CoreV1Api:
    return client.CoreV1Api(cluster.api)


@pytest.fixture
def enforcing(cluster: LocalCluster) -> Iterator[Any]:
    """``enforcing(level)`` → a fresh namespace that enforces ``level``."""
    created: list[str] = []

    def make(level: str) -> str:
        # in the creation, not patched on after it (LocalCluster.create_namespace says why: a pod
        # admitted before PodSecurity's cache saw the patch was judged unlabelled, i.e. privileged)
        ns = cluster.create_namespace(f"psa-{level}", labels={ENFORCE: level, f"{ENFORCE}-version": "v1.34"})
        created.append(ns)
        return ns

    yield make
    for ns in created:
        cluster.delete_namespace(ns)


def admit(core: client.CoreV1Api, namespace: str, template: dict[str, Any], name: str) -> str | None:
    """Create a Pod from ``template`` with ``dryRun=All``: None when admitted, else the refusal."""
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {**template["metadata"], "name": name}}
    pod["spec"] = template["spec"]
    try:
        core.create_namespaced_pod(namespace, pod, dry_run="All")
    except client.ApiException as exc:
        return str(json.loads(exc.body)["message"])
    return None


@pytest.mark.parametrize(
    "params",
    [
        a_replica(),
        a_replica(tensor_parallelism=4),
        a_replica(backend="pytorch", tensor_parallelism=2),
        a_replica(
            artifact_claim="",
            artifact_sub_path="",
            artifact_s3=S3Artifact(bucket="engines", prefix=f"cache/{KEY}", endpoint=None, secret="s3"),
        ),
    ],
    ids=["tp1", "tp4", "pytorch-tp2", "s3-fetch-init"],
)
def test_one_node_serving_pods_meet_restricted(
    core: client.CoreV1Api, enforcing: Any, params: ServingParams
) -> None:
    ns = enforcing("restricted")
    for role, template in templates(params).items():
        assert admit(core, ns, template, f"{role}-ok") is None, role
        refusal = admit(core, ns, without_security_context(template), f"{role}-bare")
        assert refusal is not None and 'violates PodSecurity "restricted' in refusal, refusal


def test_multi_node_serving_pods_meet_baseline_not_restricted(core: client.CoreV1Api, enforcing: Any) -> None:
    """LeaderWorkerSet pods run sshd and mpirun as the image's root user: baseline, not restricted
    (documented in docs/security.md); they still drop privilege escalation and use RuntimeDefault."""
    params = a_replica(tensor_parallelism=8, pipeline_parallelism=2, gpus_per_node=8)
    baseline, restricted = enforcing("baseline"), enforcing("restricted")
    for role, template in templates(params).items():
        assert admit(core, baseline, template, f"{role}-ok") is None, role
        refusal = admit(core, restricted, template, f"{role}-restricted")
        assert refusal is not None and "runAsNonRoot" in refusal, refusal
        spec = template["spec"]
        assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
        assert spec["containers"][0]["securityContext"]["allowPrivilegeEscalation"] is False


REPO = Path(__file__).resolve().parents[2]


def builder_template(settings: Settings) -> dict[str, Any]:
    """The builder pod of the minimal LLMEngine fixture (TinyLlama's config for the plan)."""
    spec = yaml.safe_load((REPO / "tests/fixtures/valid/minimal-engine.yaml").read_text())["spec"]
    spec["model"]["source"] = "hf://TinyLlama/TinyLlama-1.1B-Chat-v1.0"
    config = REPO / "tests/fixtures/model-configs/TinyLlama__TinyLlama-1.1B-Chat-v1.0.json"
    prepared = prepare_engine("llama", spec, hf_config=json.loads(config.read_text()))
    assert isinstance(prepared, PreparedEngine), prepared
    meta = {"metadata": {"name": "llama", "namespace": "ml", "uid": "uid"}}
    return dict(desired_builder_job(meta, prepared, settings)["spec"]["template"])


def test_builder_pods_meet_baseline_and_restricted_when_non_root(
    core: client.CoreV1Api, enforcing: Any
) -> None:
    """The builder runs as the image's root user by default (it writes the artifact volume, whose
    ownership Kubernetes manages only for some volume types): baseline, with the delivery init
    container non-root; ``builder_run_as_non_root`` makes it restricted (docs/security.md)."""
    baseline, restricted = enforcing("baseline"), enforcing("restricted")
    default = builder_template(Settings())
    assert admit(core, baseline, default, "builder-ok") is None
    refusal = admit(core, restricted, default, "builder-root")
    assert refusal is not None and "runAsNonRoot" in refusal, refusal
    non_root = builder_template(Settings(builder_run_as_non_root=True))
    assert admit(core, restricted, non_root, "builder-non-root") is None
    refusal = admit(core, restricted, without_security_context(non_root), "builder-bare")
    assert refusal is not None and 'violates PodSecurity "restricted' in refusal, refusal
