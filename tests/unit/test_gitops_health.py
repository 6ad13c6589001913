"""The Argo CD Lua health check and the Flux CEL health expressions, run by real runtimes.

Lua: lupa (a real Lua interpreter), the way Argo CD runs `resource.customizations.health.*`: the
object is the global `obj` and the script returns a table with `status` and `message`.
CEL: cel-python evaluates the Flux `healthCheckExprs` against the same objects.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import celpy
import lupa
import pytest
import yaml

CHART_FILES = Path(__file__).resolve().parents[2] / "charts" / "trtllm-operator" / "files"
LUA_SCRIPT = (CHART_FILES / "argocd-health.lua").read_text()
FLUX_CHECKS = yaml.safe_load((CHART_FILES / "flux-health-checks.yaml").read_text())["healthCheckExprs"]


def cond(type_: str, status: str, reason: str = "R", message: str = "") -> dict[str, Any]:
    return {"type": type_, "status": status, "reason": reason, "message": message}


def obj(kind: str, generation: int, status: dict[str, Any] | None) -> dict[str, Any]:
    body: dict[str, Any] = {
        "apiVersion": "llm.trtllm-operator.dev/v1alpha1",
        "kind": kind,
        "metadata": {"name": "x", "namespace": "ns", "generation": generation},
        "spec": {},
    }
    if status is not None:
        body["status"] = status
    return body


def argo_health(body: dict[str, Any]) -> tuple[str, str]:
    lua = lupa.LuaRuntime(unpack_returned_tuples=True)
    lua.globals().obj = lua.table_from(body, recursive=True)
    result = lua.execute(LUA_SCRIPT)
    return str(result["status"]), str(result["message"])


def flux_health(body: dict[str, Any]) -> str:
    """'inProgress', 'failed' or 'current', evaluated in kustomize-controller's order; an object
    for which no expression is true (or whose fields are missing) stays in progress."""
    check = next(c for c in FLUX_CHECKS if c["kind"] == body["kind"])
    env = celpy.Environment()
    activation = {k: celpy.json_to_cel(v) for k, v in body.items()}
    for key in ("inProgress", "failed", "current"):
        program = env.program(env.compile(check[key]))
        try:
            if bool(program.evaluate(activation)):
                return key
        except celpy.CELEvalError:
            continue
    return "inProgress"


READY = cond("Ready", "True", "EngineReady", "engine built")
NOT_READY = cond("Ready", "False", "Building", "stage quantize 40%")

CASES = [
    # (kind, generation, status, argo status, flux status)
    ("LLMEngine", 1, None, "Progressing", "inProgress"),
    (
        "LLMEngine",
        2,
        {"observedGeneration": 1, "phase": "Ready", "conditions": [READY]},
        "Progressing",
        "inProgress",
    ),
    (
        "LLMEngine",
        2,
        {"observedGeneration": 2, "phase": "Building", "conditions": [NOT_READY]},
        "Progressing",
        "inProgress",
    ),
    (
        "LLMEngine",
        2,
        {"observedGeneration": 2, "phase": "Ready", "conditions": [READY]},
        "Healthy",
        "current",
    ),
    (
        "LLMEngine",
        3,
        {
            "observedGeneration": 3,
            "phase": "Failed",
            "conditions": [
                cond("Ready", "False", "GPUOutOfMemory", "lower maxNumTokens"),
                cond("Degraded", "True", "GPUOutOfMemory", "lower maxNumTokens"),
            ],
        },
        "Degraded",
        "failed",
    ),
    (
        "LLMDeployment",
        1,
        {
            "observedGeneration": 1,
            "conditions": [
                cond("Ready", "False", "EngineIncompatible", "image differs"),
                cond("EngineIncompatible", "True", "ImageMismatch", "server image a != engine image b"),
            ],
        },
        "Degraded",
        "failed",
    ),
    (
        "LLMDeployment",
        4,
        {
            "observedGeneration": 4,
            "conditions": [
                cond("Ready", "True", "RolloutComplete", "3/3 replicas serve engine abc"),
                cond("ScalingLimited", "True", "InsufficientGPU", "no free GPU"),
            ],
        },
        "Healthy",
        "current",
    ),
    ("LLMDeployment", 5, {"observedGeneration": 4, "conditions": [READY]}, "Progressing", "inProgress"),
]


@pytest.mark.parametrize(("kind", "generation", "status", "argo", "flux"), CASES)
def test_health_checks_agree(
    kind: str, generation: int, status: dict[str, Any] | None, argo: str, flux: str
) -> None:
    body = obj(kind, generation, status)
    argo_status, message = argo_health(body)
    assert argo_status == argo, message
    assert message
    assert flux_health(body) == flux


def test_degraded_message_names_the_cause() -> None:
    body = obj(
        "LLMEngine",
        1,
        {
            "observedGeneration": 1,
            "phase": "Failed",
            "conditions": [
                cond("Degraded", "True", "UnsupportedArchitecture", "FP8 needs SM 89+; use an H100")
            ],
        },
    )
    assert argo_health(body) == ("Degraded", "FP8 needs SM 89+; use an H100")
