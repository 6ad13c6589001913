"""``spec.server.api: openai | both``: Triton's OpenAI-compatible frontend, checked against upstream.

The frontend is triton-inference-server/server ``python/openai`` at branch r26.03 (commit f72de07),
the release branch of the 26.03 ``-trtllm-python-py3`` images the examples use, vendored unmodified
under ``hack/tritoncpu/vendor/triton-r26.03/server/`` (README.md there; the fidelity tier serves it
for real): the rendered command is parsed by upstream's own
``parse_args`` (an unknown flag, a misspelt one or a bad value fails here as it would in the pod),
and the probe paths must be routes of that router.
"""

from __future__ import annotations

import argparse
import ast
import shlex
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml
from support.serving import serving_params

from trtllm_operator.api.deployment import LLMDeploymentSpec
from trtllm_operator.decide.serving import OPENAI_UNSUPPORTED, ServingPlan, ServingRefusal, plan_serving
from trtllm_operator.decide.serving_params import (
    ARTIFACT_TOKENIZER_DIR,
    OwnerRef,
    ServerSettings,
    ServingParams,
)
from trtllm_operator.decide.triton_config import OPENAI_FRONTEND_INPUTS, model_repository_files
from trtllm_operator.render.deployment import desired_deployment
from trtllm_operator.render.launch import launch_script
from trtllm_operator.render.model_repository import desired_model_repository
from trtllm_operator.render.service import desired_service, endpoint
from trtllm_operator.render.serving import (
    MODEL_REPOSITORY,
    OPENAI_FRONTEND_MAIN,
    OPENAI_PORT,
    metrics_port,
    openai_frontend_args,
)

REPO = Path(__file__).resolve().parents[2]
UPSTREAM = (
    REPO
    / "hack"
    / "tritoncpu"
    / "vendor"
    / "triton-r26.03"
    / "server"
    / "python"
    / "openai"
    / "openai_frontend"
)
KEY = "a" * 64


def upstream_parser() -> Any:
    """``parse_args`` of upstream ``main.py`` r26.03, run against an argv we give it."""
    tree = ast.parse((UPSTREAM / "main.py").read_text())
    (func,) = (n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "parse_args")
    namespace: dict[str, Any] = {"argparse": argparse}
    exec(compile(ast.Module(body=[func], type_ignores=[]), "main.py", "exec"), namespace)

    def parse(argv: list[str]) -> argparse.Namespace:
        import sys  # noqa: PLC0415

        saved = sys.argv
        sys.argv = ["main.py", *argv]
        try:
            result: argparse.Namespace = namespace["parse_args"]()
        finally:
            sys.argv = saved
        return result

    return parse


def upstream_routes() -> set[str]:
    tree = ast.parse((UPSTREAM / "frontend" / "fastapi" / "routers" / "observability.py").read_text())
    routes = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get":
            first = node.args[0]
            if isinstance(first, ast.Constant) and isinstance(first.value, str):
                routes.add(first.value)
    return routes


def params(api: str = "openai", **server: Any) -> ServingParams:
    return serving_params(
        owner=OwnerRef("llama", "u"),
        engine_key=KEY,
        image="nvcr.io/nvidia/tritonserver:26.03-trtllm-python-py3",
        artifact_sub_path=f"trtllm/{KEY}",
        replicas=1,
        server=ServerSettings(api=api, **server),
    )


def exec_line(p: ServingParams) -> list[str]:
    script = launch_script(p)
    (line,) = [ln for ln in script.splitlines() if ln.startswith("exec ")]
    return shlex.split(line.removeprefix("exec "))


def test_upstream_parser_is_real() -> None:
    parse = upstream_parser()
    with pytest.raises(SystemExit):
        parse(["--model-repository=/m", "--openai-prot=9000"])  # misspelt: argparse refuses
    with pytest.raises(SystemExit):
        parse(["--tokenizer=/t"])  # --model-repository is required
    assert parse(["--model-repository=/m"]).openai_port == 9000  # upstream's default port


@pytest.mark.parametrize("api", ["openai", "both"])
def test_rendered_command_parses_with_upstream_main(api: str) -> None:
    p = params(api, default_max_tokens=512)
    argv = exec_line(p)
    assert argv == openai_frontend_args(p)
    assert argv[:2] == ["python3", OPENAI_FRONTEND_MAIN]
    ns = upstream_parser()(argv[2:])
    assert ns.model_repository == MODEL_REPOSITORY
    assert ns.tokenizer == ARTIFACT_TOKENIZER_DIR  # chat template: the tokenizer's tokenizer_config.json
    assert ns.openai_port == OPENAI_PORT
    assert ns.default_max_tokens == 512
    assert ns.host == "0.0.0.0"  # upstream default: reachable from the Service
    assert ns.enable_kserve_frontends is (api == "both")
    if api == "both":
        assert (ns.kserve_http_port, ns.kserve_grpc_port) == (8000, 8001)
    # without defaultMaxTokens the flag is left out: upstream's default applies
    assert upstream_parser()(openai_frontend_args(params(api))[2:]).default_max_tokens == 16


def container(p: ServingParams) -> dict[str, Any]:
    dep = desired_deployment(p, desired_model_repository(p))
    c: dict[str, Any] = dep["spec"]["template"]["spec"]["containers"][0]
    return c


def test_ports_probes_service_and_endpoint_follow_the_api() -> None:
    routes = upstream_routes()
    assert {"/health/ready", "/metrics"} <= routes
    expected = {
        "triton": {"http": 8000, "grpc": 8001, "metrics": 8002},
        "openai": {"openai": 9000},
        "both": {"openai": 9000, "http": 8000, "grpc": 8001},
    }
    for api, ports in expected.items():
        p = params(api)
        c = container(p)
        assert {x["name"]: x["containerPort"] for x in c["ports"]} == ports, api
        svc = desired_service(p)
        assert {x["name"]: (x["port"], x["targetPort"]) for x in svc["spec"]["ports"]} == {
            n: (port, n)
            for n, port in ports.items()
            if n != "metrics"  # scraped per pod, not a client port
        }, api
        if api == "triton":
            assert c["readinessProbe"]["httpGet"] == {"path": "/v2/health/ready", "port": "http"}
            assert endpoint(p) == "http://llama.team-a.svc:8000"
            assert metrics_port(api) == 8002
            continue
        for probe in ("startupProbe", "readinessProbe"):
            get = c[probe]["httpGet"]
            assert get["port"] == "openai" and get["path"] in routes, (api, probe)
        assert c["livenessProbe"] == {
            "tcpSocket": {"port": "openai"},
            "periodSeconds": 15,
            "timeoutSeconds": 5,
            "failureThreshold": 4,
        }
        assert c["startupProbe"]["failureThreshold"] >= 180  # the whole model load (30 min unknown size)
        assert endpoint(p) == "http://llama.team-a.svc:9000/v1"  # the OpenAI client's base_url
        assert metrics_port(api) == OPENAI_PORT and "/metrics" in routes


def test_repository_serves_the_ensemble_under_the_served_name_with_the_frontends_inputs() -> None:
    triton = model_repository_files(params("triton"))
    assert "ensemble/config.pbtxt" in triton
    assert not any(n in text for text in triton.values() for n in OPENAI_FRONTEND_INPUTS)

    files = model_repository_files(params("openai", served_model_name="llama-3.1-8b"))
    assert "ensemble/config.pbtxt" not in files and "ensemble/1/.gitkeep" not in files
    ens = files["llama-3.1-8b/config.pbtxt"]
    assert 'name: "llama-3.1-8b"' in ens and 'platform: "ensemble"' in ens
    assert files["llama-3.1-8b/1/.gitkeep"] == ""
    trt = files["tensorrt_llm/config.pbtxt"]
    for name in OPENAI_FRONTEND_INPUTS:
        assert f'{{ name: "{name}" data_type: TYPE_BOOL dims: [ 1 ] optional: true }}' in ens
        assert f'input_map {{ key: "{name}" value: "{name}" }}' in ens  # consumed: else Triton refuses
        assert (
            f'{{ name: "{name}" data_type: TYPE_BOOL dims: [ 1 ] reshape: {{ shape: [ ] }} optional: true }}'
            in trt
        )
    # the frontend sends the echo input only for completions: the backend excludes the prompt
    assert 'key: "exclude_input_in_output" value: { string_value: "true" }' in trt
    assert (
        'key: "exclude_input_in_output" value: { string_value: "false" }'
        in triton["tensorrt_llm/config.pbtxt"]
    )
    # every other file is what api: triton renders
    assert {k: v for k, v in files.items() if not k.startswith(("llama", "tensorrt_llm/"))} == {
        k: v for k, v in triton.items() if not k.startswith(("ensemble", "tensorrt_llm/"))
    }
    # the launch script copies the renamed model's directory
    script = desired_model_repository(params("openai", served_model_name="llama-3.1-8b"))["data"]["launch.sh"]
    assert "for m in llama-3.1-8b postprocessing preprocessing tensorrt_llm; do" in script
    assert model_repository_files(params("both")).keys() == triton.keys()  # default name: ensemble


def test_served_model_name_admission() -> None:
    ok = LLMDeploymentSpec.model_validate(
        {"engineRef": {"name": "e"}, "server": {"api": "openai", "openai": {"servedModelName": "llama-3.1"}}}
    )
    assert ok.server.openai.served_model_name == "llama-3.1"
    with pytest.raises(ValueError, match=r"servedModelName|pattern"):
        LLMDeploymentSpec.model_validate(
            {"engineRef": {"name": "e"}, "server": {"openai": {"servedModelName": "meta-llama/Llama"}}}
        )
    with pytest.raises(ValueError, match="api"):
        LLMDeploymentSpec.model_validate({"engineRef": {"name": "e"}, "server": {"api": "grpc"}})


def example(api: str) -> tuple[dict[str, Any], dict[str, Any]]:
    docs = list(yaml.safe_load_all((REPO / "examples" / "llama-3.1-8b-fp8-h100.yaml").read_text()))
    engine = next(d for d in docs if d["kind"] == "LLMEngine")
    dep = next(d for d in docs if d["kind"] == "LLMDeployment")
    dep["metadata"].update(namespace="team-a", uid="u")
    dep["spec"]["server"]["api"] = api
    engine["metadata"]["namespace"] = "team-a"
    engine["status"] = {
        "engineKey": KEY,
        "artifact": {"uri": f"pvc://llama-3-1-8b-fp8-artifacts/{KEY}", "sizeBytes": 9 * 2**30},
    }
    return dep, engine


def test_plan_refuses_what_the_frontend_cannot_serve() -> None:
    dep, engine = example("openai")
    plan = plan_serving(dep, engine, gpus_per_node=8, lws_installed=False)
    assert isinstance(plan, ServingPlan), plan
    assert "ensemble/config.pbtxt" in plan.files

    engine["spec"]["parallelism"] = {"tensor": 2, "pipeline": 1}
    refused = plan_serving(dep, engine, gpus_per_node=8, lws_installed=False)
    assert isinstance(refused, ServingRefusal) and refused.blocked is not None
    reason, message = refused.blocked
    assert reason == OPENAI_UNSUPPORTED
    assert "spec.server.api openai" in message and "2 ranks" in message and "api: triton" in message

    dep, engine = example("both")
    engine["spec"]["backend"] = "pytorch"
    refused = plan_serving(dep, engine, gpus_per_node=8, lws_installed=False)
    assert isinstance(refused, ServingRefusal) and refused.blocked is not None
    assert refused.blocked[0] == OPENAI_UNSUPPORTED and "pytorch" in refused.blocked[1]
    # the same engines serve with api: triton
    dep["spec"]["server"]["api"] = "triton"
    assert isinstance(plan_serving(dep, engine, gpus_per_node=8, lws_installed=False), ServingPlan)


def test_triton_api_renders_what_it_always_did() -> None:
    p = params("triton")
    assert replace(p, server=ServerSettings()) == p  # triton is the default
    script = launch_script(p)
    assert "exec tritonserver" in script and OPENAI_FRONTEND_MAIN not in script
