"""Serving children rendered from ServingParams: Deployment, LeaderWorkerSet, Service, PDB, launch script."""

from __future__ import annotations

import re
from typing import Any

import pytest
from support.serving import KEY_A, KEY_B, serving_params

from trtllm_operator.api.wire import ANNOTATION_CONFIG_HASH, LABEL_DEPLOYMENT, LABEL_ENGINE_KEY
from trtllm_operator.decide.serving_params import ServerSettings, ServingParams
from trtllm_operator.render.deployment import (
    STARTUP_BASE_SECONDS,
    STARTUP_UNKNOWN_SIZE_SECONDS,
    desired_deployment,
    startup_budget_seconds,
)
from trtllm_operator.render.launch import WORKER_WAIT_SECONDS, launch_script
from trtllm_operator.render.leaderworkerset import desired_leaderworkerset
from trtllm_operator.render.model_repository import desired_model_repository
from trtllm_operator.render.pdb import desired_pdb
from trtllm_operator.render.service import desired_service, endpoint
from trtllm_operator.render.serving import child_name


def render(params: ServingParams) -> tuple[dict[str, Any], dict[str, Any]]:
    cm = desired_model_repository(params)
    return cm, desired_deployment(params, cm)


def container(workload: dict[str, Any]) -> dict[str, Any]:
    c: dict[str, Any] = workload["spec"]["template"]["spec"]["containers"][0]
    return c


def test_tp2_pp2_renders_one_pod_with_4_gpus_and_4_ranks() -> None:
    params = serving_params(tensor_parallelism=2, pipeline_parallelism=2)
    cm, dep = render(params)
    res = container(dep)["resources"]
    assert res["limits"]["nvidia.com/gpu"] == "4"
    assert res["requests"]["nvidia.com/gpu"] == "4"
    script = cm["data"]["launch.sh"]
    ranks = re.findall(r"-n 1 tritonserver ([^\\&]*)", script)
    assert len(ranks) == 4
    # rank 0 serves every model; ranks 1..3 load only tensorrt_llm (launch_triton_server.py leader mode)
    assert "--load-model" not in ranks[0]
    assert all("--model-control-mode=explicit --load-model=tensorrt_llm" in r for r in ranks[1:])
    assert [re.search(r"prefix(\d+)_", r).group(1) for r in ranks] == ["0", "1", "2", "3"]  # type: ignore[union-attr]
    assert script.count("\\\n  : -n 1 tritonserver") == 3  # one app context per rank, ":"-separated
    assert "world_size=4" in script and 'wait "$mpi"' in script


def test_world_size_one_execs_plain_tritonserver() -> None:
    script = launch_script(serving_params())
    assert "mpirun" not in script
    assert re.search(r"^exec tritonserver --model-repository=/model-repository", script, re.M)


@pytest.mark.parametrize(
    "params",
    [
        serving_params(),
        serving_params(tensor_parallelism=2),
        serving_params(backend="pytorch", tensor_parallelism=2),
    ],
    ids=["one rank", "tensorrt tp2", "pytorch tp2"],
)
def test_every_tritonserver_turns_on_the_ttft_histogram(params: ServingParams) -> None:
    """Audit B6 (TTFT panels). triton-inference-server/core r24.11 (Triton 2.52)
    ``src/metric_model_reporter.cc`` ``MetricReporterConfig::ParseConfig`` enables latency
    histograms only for the global metrics-config pair ``histogram_latencies`` = ``true``, and
    ``InitializeHistograms`` then creates ``nv_inference_first_response_histogram_ms``
    (``src/metrics.cc``) for decoupled models: the dashboard's TTFT panel has data only with it.
    tritonserver's syntax is ``--metrics-config <setting>=<value>`` (docs/user_guide/metrics.md)."""
    script = launch_script(params)
    starts = re.findall(r"tritonserver --model-repository=[^\n]*", script)
    assert starts, script
    for line in starts:
        assert "--metrics-config=histogram_latencies=true" in line.split(), line


def test_pytorch_backend_runs_one_triton_process_owning_all_gpus() -> None:
    params = serving_params(backend="pytorch", tensor_parallelism=4)
    cm, dep = render(params)
    assert container(dep)["resources"]["limits"]["nvidia.com/gpu"] == "4"
    assert "mpirun" not in cm["data"]["launch.sh"]
    assert "tensorrt_llm__1__model.yaml" in cm["data"]


def test_pod_template_placement_probes_and_volumes() -> None:
    params = serving_params(artifact_bytes=16 * 10**9)
    _, dep = render(params)
    spec = dep["spec"]
    assert spec["replicas"] == 2
    assert spec["strategy"]["rollingUpdate"] == {"maxSurge": 0, "maxUnavailable": 1}
    pod = spec["template"]
    assert pod["metadata"]["labels"][LABEL_ENGINE_KEY] == KEY_A[:16]
    assert spec["selector"]["matchLabels"] == {LABEL_DEPLOYMENT: "llama"}
    assert pod["spec"]["automountServiceAccountToken"] is False
    terms = pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert terms["nodeSelectorTerms"] == [
        {
            "matchExpressions": [
                {"key": "nvidia.com/gpu.product", "operator": "In", "values": ["NVIDIA-H100-80GB-HBM3"]}
            ]
        }
    ]
    c = container(dep)
    artifact = next(m for m in c["volumeMounts"] if m["name"] == "artifact")
    assert artifact["readOnly"] is True and artifact["subPath"] == f"trtllm/{KEY_A}"
    vol = next(v for v in pod["spec"]["volumes"] if v["name"] == "artifact")
    assert vol["persistentVolumeClaim"] == {"claimName": "engines", "readOnly": True}
    assert c["readinessProbe"]["httpGet"]["path"] == "/v2/health/ready"
    assert c["livenessProbe"]["httpGet"]["path"] == "/v2/health/live"
    startup = c["startupProbe"]
    assert startup["periodSeconds"] * startup["failureThreshold"] >= startup_budget_seconds(16 * 10**9, 1)
    assert {p["containerPort"] for p in c["ports"]} == {8000, 8001, 8002}


@pytest.mark.parametrize(
    ("size", "world", "expected"),
    [
        (None, 1, STARTUP_UNKNOWN_SIZE_SECONDS),
        (0, 1, STARTUP_UNKNOWN_SIZE_SECONDS),
        # verify (whole artifact) + load (bytes per rank), each at 100 MiB/s
        (100 * 2**20, 1, STARTUP_BASE_SECONDS + 1 + 1),
        (70 * 10**9, 2, STARTUP_BASE_SECONDS + 668 + 334),  # 70 GB → 667.6 s; 35 GB → 333.8 s
        (70 * 10**9, 8, STARTUP_BASE_SECONDS + 668 + 84),
    ],
)
def test_startup_budget_scales_with_bytes_per_rank(size: int | None, world: int, expected: int) -> None:
    assert startup_budget_seconds(size, world) == expected


def test_config_change_rolls_pods_replica_change_does_not() -> None:
    _, base = render(serving_params())
    _, scaled = render(serving_params(replicas=5))
    _, tuned = render(serving_params(server=ServerSettings(kv_cache_free_gpu_mem_fraction=0.8)))
    _, new_engine = render(serving_params(engine_key=KEY_B, artifact_sub_path=f"trtllm/{KEY_B}"))

    def h(d: dict[str, Any]) -> str:
        return str(d["spec"]["template"]["metadata"]["annotations"][ANNOTATION_CONFIG_HASH])

    assert h(base) == h(scaled) and base["spec"]["template"] == scaled["spec"]["template"]
    assert h(base) != h(tuned)
    assert h(base) != h(new_engine)
    assert new_engine["spec"]["template"]["metadata"]["labels"][LABEL_ENGINE_KEY] == KEY_B[:16]


def test_configmap_is_immutable_and_content_addressed() -> None:
    cm1, dep = render(serving_params())
    cm2, _ = render(serving_params(server=ServerSettings(max_queue_size=10)))
    assert cm1["immutable"] is True
    assert cm1["metadata"]["name"] != cm2["metadata"]["name"]
    assert cm1["metadata"]["name"].startswith("llama-repo-")
    vol = next(v for v in dep["spec"]["template"]["spec"]["volumes"] if v["name"] == "config")
    paths = {i["path"] for i in vol["configMap"]["items"]}
    assert "model-repository/tensorrt_llm/config.pbtxt" in paths and "launch.sh" in paths
    assert cm1["metadata"]["ownerReferences"][0]["uid"] == "uid-1"


def test_user_affinity_keeps_gpu_product_requirement() -> None:
    user = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]},
                    {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["b"]}]},
                ]
            }
        },
        "podAntiAffinity": {"x": 1},
    }
    _, dep = render(serving_params(affinity=user))
    aff = dep["spec"]["template"]["spec"]["affinity"]
    terms = aff["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert len(terms) == 2
    assert all(t["matchExpressions"][-1]["key"] == "nvidia.com/gpu.product" for t in terms)
    assert aff["podAntiAffinity"] == {"x": 1}
    assert (
        len(
            user["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0][
                "matchExpressions"
            ]
        )
        == 1
    )  # input not mutated


def test_replica_larger_than_a_node_renders_a_leaderworkerset() -> None:
    params = serving_params(tensor_parallelism=8, pipeline_parallelism=2, gpus_per_node=8)
    cm = desired_model_repository(params)
    with pytest.raises(ValueError, match="LeaderWorkerSet"):
        desired_deployment(params, cm)
    lws = desired_leaderworkerset(params, cm)
    assert lws["apiVersion"] == "leaderworkerset.x-k8s.io/v1"
    assert lws["metadata"]["name"] == "llama-lws"  # not the client Service's name (audit A1)
    tmpl = lws["spec"]["leaderWorkerTemplate"]
    assert tmpl["size"] == 2
    leader, worker = (
        tmpl["leaderTemplate"]["spec"]["containers"][0],
        tmpl["workerTemplate"]["spec"]["containers"][0],
    )
    assert leader["resources"]["limits"]["nvidia.com/gpu"] == "8"
    assert worker["resources"]["limits"]["nvidia.com/gpu"] == "8"
    # every pod assembles the model repository its ranks load (audit A2): the worker runs
    # worker.sh, which does so before it starts sshd; both mount the artifact and the ConfigMap
    assert leader["command"] == ["/bin/bash", "/etc/trtllm-operator/launch.sh"]
    assert worker["command"] == ["/bin/bash", "/etc/trtllm-operator/worker.sh"]
    for c in (leader, worker):
        assert {m["mountPath"] for m in c["volumeMounts"]} >= {
            "/artifact",
            "/etc/trtllm-operator",
            "/model-repository",
            "/run/trtllm-operator",
        }
    assert "readinessProbe" in leader and worker["readinessProbe"] == {
        "tcpSocket": {"port": "ssh"},
        "periodSeconds": 10,
        "timeoutSeconds": 5,
    }
    assert worker["ports"] == [{"name": "ssh", "containerPort": 22, "protocol": "TCP"}]  # no metrics port
    assert {"launch.sh", "worker.sh", "rank-env.sh"} <= set(cm["data"])
    script = cm["data"]["launch.sh"]
    assert (
        '--host "$hosts"' in script
        and len(re.findall(r"-n 1 /bin/bash /etc/trtllm-operator/rank-env.sh tritonserver", script)) == 16
    )
    assert "world_size=8" in script  # the leader watches its own node's 8 ranks
    assert desired_service(params)["spec"]["selector"]["leaderworkerset.sigs.k8s.io/worker-index"] == "0"
    # the leader's startup budget includes the wait for its workers
    one_node = startup_budget_seconds(params.artifact_bytes, params.world_size)
    period = leader["startupProbe"]["periodSeconds"]
    assert leader["startupProbe"]["failureThreshold"] * period >= one_node + WORKER_WAIT_SECONDS


def test_service_pdb_and_endpoint() -> None:
    params = serving_params()
    svc = desired_service(params)
    # client ports only: Triton's metrics port 8002 stays on the pods (scraped per pod), never on a
    # Service that may be a NodePort or LoadBalancer (issue 24 item 5)
    assert {(p["name"], p["port"]) for p in svc["spec"]["ports"]} == {("http", 8000), ("grpc", 8001)}
    for service_type in ("NodePort", "LoadBalancer"):
        exposed = desired_service(serving_params(service_type=service_type))
        assert exposed["spec"]["type"] == service_type
        assert 8002 not in {p["port"] for p in exposed["spec"]["ports"]}
    ports = container(render(params)[1])["ports"]
    assert {"name": "metrics", "containerPort": 8002, "protocol": "TCP"} in ports
    assert svc["spec"]["selector"] == {LABEL_DEPLOYMENT: "llama"}
    pdb = desired_pdb(params)
    assert pdb["spec"] == {"maxUnavailable": 1, "selector": {"matchLabels": {LABEL_DEPLOYMENT: "llama"}}}
    assert endpoint(params) == "http://llama.team-a.svc:8000"


def test_child_names_are_valid_dns_labels() -> None:
    long = "x" * 80
    name = child_name(long, "repo-0123456789")
    assert len(name) <= 63 and re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", name)
    assert child_name(long, "a") != child_name(long + "y", "a")
    assert child_name("llama") == "llama"


def test_serving_pods_are_hardened_and_offline() -> None:
    """Issue 24 item 5: one-node pods run as Triton's non-root ``triton-server`` user (uid 1000,
    triton-inference-server/server build.py) with no capabilities; multi-node pods keep root for
    sshd. Every serving pod loads only from the artifact (``HF_HUB_OFFLINE``). The real API server's
    PodSecurity admission checks the levels in tests/integration/test_pod_security.py."""
    _, dep = render(serving_params())
    spec = dep["spec"]["template"]["spec"]
    assert spec["securityContext"] == {
        "seccompProfile": {"type": "RuntimeDefault"},
        "runAsNonRoot": True,
        "runAsUser": 1000,
        "runAsGroup": 1000,
    }
    assert container(dep)["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
    }
    env = {e["name"]: e.get("value") for e in container(dep)["env"]}
    assert env["HF_HUB_OFFLINE"] == "1" and env["HOME"] == "/tmp"
    multi = serving_params(tensor_parallelism=8, pipeline_parallelism=2, gpus_per_node=8)
    lws = desired_leaderworkerset(multi, desired_model_repository(multi))["spec"]["leaderWorkerTemplate"]
    for template in (lws["leaderTemplate"], lws["workerTemplate"]):
        assert "runAsUser" not in template["spec"]["securityContext"]
        assert template["spec"]["containers"][0]["securityContext"] == {"allowPrivilegeEscalation": False}
