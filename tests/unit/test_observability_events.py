"""Event reasons: the documented table, the catalogue (trtllm_operator.events) and the code agree.

The code side is read from the sources (AST), not from the catalogue: every ``post_event`` call in
the handlers is resolved to the reason strings it can post — string literals, f-strings (as
patterns), local variables (their assigned literals), and a short list of dynamic expressions
whose values come from the decision modules (also read from their sources). A reason posted in
code but missing from the table fails, and so does a documented reason no code posts.
"""

from __future__ import annotations

import ast
import importlib
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from engine_builder.report import EXIT_CODES
from trtllm_operator import events
from trtllm_operator.decide import engine as decide_engine
from trtllm_operator.decide import engine_failure, ownership, policy
from trtllm_operator.decide.autoscaler import (
    CONFLICT_REASONS,
    CUSTOM_METRICS_API_MISSING,
    CUSTOM_METRICS_API_UNAVAILABLE,
)
from trtllm_operator.decide.autoscaling import Reason
from trtllm_operator.decide.deployment_status import WORKLOAD_SCALE_REVERTED

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "operator" / "src" / "trtllm_operator"
DOC = ROOT / "docs" / "observability.md"


def _module(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"))


def _constants(tree: ast.Module) -> dict[str, str]:
    out: dict[str, str] = {}
    for node in tree.body:
        # reason constants imported from another decision module resolve through it
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("trtllm_operator.decide."):
            mod = importlib.import_module(node.module or "")
            for alias in node.names:
                value = getattr(mod, alias.name, None)
                if isinstance(value, str):
                    out[alias.asname or alias.name] = value
        if (
            isinstance(node, ast.Assign)
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
        ):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    out[target.id] = node.value.value
    return out


def _functions(tree: ast.Module) -> list[ast.FunctionDef]:
    return [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)]


def _resolve(
    expr: ast.expr, func: ast.FunctionDef, consts: dict[str, str], dynamic: Callable[[str], set[str]]
) -> set[str]:
    """Reason strings ``expr`` can evaluate to (f-strings as ``re:`` patterns)."""
    if isinstance(expr, ast.Constant) and isinstance(expr.value, str):
        return {expr.value}
    if isinstance(expr, ast.JoinedStr):
        pattern = "".join(
            re.escape(v.value) if isinstance(v, ast.Constant) else "[A-Za-z]+" for v in expr.values
        )
        return {"re:" + pattern}
    if isinstance(expr, ast.IfExp):
        return _resolve(expr.body, func, consts, dynamic) | _resolve(expr.orelse, func, consts, dynamic)
    if isinstance(expr, ast.BoolOp):  # ``problem or "Scaling"``: any of its operands
        return set().union(*(_resolve(v, func, consts, dynamic) for v in expr.values))
    if isinstance(expr, ast.Constant) and expr.value is None:  # "no problem": no reason
        return set()
    if isinstance(expr, ast.Name):
        if expr.id in consts:
            return {consts[expr.id]}
        values: set[str] = set()
        for node in ast.walk(func):
            if not isinstance(node, ast.Assign):
                continue
            for target in node.targets:
                if isinstance(target, ast.Name) and target.id == expr.id:
                    values |= _resolve(node.value, func, consts, dynamic)
                elif isinstance(target, ast.Tuple):
                    for i, elt in enumerate(target.elts):
                        if isinstance(elt, ast.Name) and elt.id == expr.id:
                            if isinstance(node.value, ast.Tuple):
                                values |= _resolve(node.value.elts[i], func, consts, dynamic)
                            else:
                                values |= dynamic(ast.unparse(node.value) + f"[{i}]")
        assert values, f"cannot resolve reason variable {expr.id!r} in {func.name}"
        return values
    if isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name) and expr.value.id == "events":
        return {getattr(events, expr.attr)}
    return dynamic(ast.unparse(expr))


def _calls(tree: ast.Module, name: str, arg: int) -> list[tuple[ast.expr, ast.FunctionDef]]:
    found = []
    for func in _functions(tree):
        for node in ast.walk(func):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == name:
                found.append((node.args[arg], func))
    return found


def _all_consts(tree: ast.Module) -> dict[str, str]:
    consts = _constants(tree)
    # names imported from trtllm_operator.events / decide.engine resolve through those modules
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module in (
            "trtllm_operator.events",
            "trtllm_operator.decide.engine",
        ):
            mod = events if node.module == "trtllm_operator.events" else decide_engine
            for alias in node.names:
                value = getattr(mod, alias.name, None)
                if isinstance(value, str):
                    consts[alias.asname or alias.name] = value
    return consts


def _no_dynamic(expr: str) -> set[str]:
    raise AssertionError(f"unknown dynamic reason expression {expr!r}: list its values in this test")


def _engine_event_reasons() -> set[str]:
    """Reasons of ``decide_engine``'s Events (``decision.event.reason``): the ``_event_for`` calls."""
    tree = _module(SRC / "decide" / "engine.py")
    consts = _constants(tree)
    failures = set(EXIT_CODES) - {"Succeeded"} | {
        engine_failure.REASON_TIMEOUT,
        engine_failure.REASON_HOST_OOM,
        engine_failure.REASON_UNKNOWN,
    }
    dynamic = {
        # the spec's own reasons, and what the admin's policy refuses (handlers/engine.py)
        "invalid.reason": {decide_engine.R_INVALID_SPEC, decide_engine.R_DOES_NOT_FIT} | _POLICY_REASONS,
        "failure.reason": failures,
        "unverified.reason": {
            engine_failure.REASON_ARTIFACT_MISSING,
            engine_failure.REASON_ARTIFACT_UNVERIFIED,
            engine_failure.REASON_UNKNOWN,
        },
    }
    out: set[str] = set()
    for expr, func in _calls(tree, "_event_for", 2):
        out |= _resolve(expr, func, consts, lambda e: dynamic.get(e) or _no_dynamic(e))
    # Events built directly (the plan's warnings); _event_for's own EventToPost passes its argument.
    for expr, func in _calls(tree, "EventToPost", 1):
        if func.name != "_event_for":
            out |= _resolve(expr, func, consts, lambda e: dynamic.get(e) or _no_dynamic(e))
    return out


#: What :mod:`trtllm_operator.decide.policy` refuses (``Refusal.reason``, an LLMEngine's
#: InvalidEngine reason or an LLMDeployment's blocked reason); URLNotAllowed goes to the
#: autoscaler's ScalingActive condition, which posts no Event.
_POLICY_REASONS = {policy.R_SECRET_NOT_ALLOWED, policy.R_IMAGE_NOT_ALLOWED, policy.R_ENDPOINT_NOT_ALLOWED}


def _blocked_reasons() -> set[str]:
    """Reasons of ``ServingRefusal.blocked`` (decide/serving.py) and ServingInputError
    (decide/serving_params.py), and what the handler blocks on itself: a child it does not control,
    what the admin's policy refuses."""
    out: set[str] = {ownership.R_CHILD_CONFLICT} | _POLICY_REASONS
    for node in ast.walk(_module(SRC / "decide" / "serving.py")):
        if isinstance(node, ast.keyword) and node.arg == "blocked" and isinstance(node.value, ast.Tuple):
            first = node.value.elts[0]
            if isinstance(first, ast.Constant):
                out.add(first.value)
    for expr, _ in _calls(_module(SRC / "decide" / "serving_params.py"), "ServingInputError", 0):
        assert isinstance(expr, ast.Constant), ast.unparse(expr)
        out.add(expr.value)
    return out


def _deployment_condition_reasons() -> set[str]:
    """Reasons of the conditions whose transitions the LLMDeployment controller posts as Events."""
    tree = _module(SRC / "decide" / "deployment_status.py")
    consts = _constants(tree)
    posted = {consts[t] for t in ("READY", "PROGRESSING", "ENGINE_INCOMPATIBLE")}
    dynamic = {"obs.blocked[0]": _blocked_reasons()}
    out: set[str] = set()
    for func in _functions(tree):
        for node in ast.walk(func):
            if not (
                isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "_cond"
            ):
                continue
            type_ = node.args[0]
            if isinstance(type_, ast.Name) and consts.get(type_.id) in posted:
                out |= _resolve(node.args[2], func, consts, lambda e: dynamic.get(e) or _no_dynamic(e))
    return out


def _autoscaler_event_reasons() -> set[str]:
    """Reasons of the ``Event``s decide/autoscaler.py hands the autoscaler handler: the scale Events,
    the InsufficientGPU Warning, and ``external_failed``'s reasons (the handler's call arguments)."""
    tree = _module(SRC / "decide" / "autoscaler.py")
    consts = _constants(tree)
    handler = _module(SRC / "handlers" / "autoscaler.py")
    failed: set[str] = set()
    for expr, _ in _calls(handler, "external_failed", 0):
        if isinstance(expr, ast.Name) and expr.id == "reason":
            # ``reason, message = custom_metrics_problem(...)``: the reasons that function returns
            failed |= {CUSTOM_METRICS_API_MISSING, CUSTOM_METRICS_API_UNAVAILABLE}
            continue
        assert isinstance(expr, ast.Constant), ast.unparse(expr)
        failed.add(expr.value)
    if list(_calls(handler, "external_conflict", 0)):  # external_failed with CONFLICT_REASONS
        failed |= set(CONFLICT_REASONS.values())
    dynamic = {
        # posted only when decision.limited == Reason.INSUFFICIENT_GPU
        "str(decision.limited)": {str(Reason.INSUFFICIENT_GPU)},
    }
    out: set[str] = set()
    for expr, func in _calls(tree, "Event", 0):
        if func.name == "external_failed" and isinstance(expr, ast.Name) and expr.id == "reason":
            out |= failed
            continue
        out |= _resolve(expr, func, consts, lambda e: dynamic.get(e) or _no_dynamic(e))
    return out


def _posted_in_code() -> set[str]:
    autoscaler = _autoscaler_event_reasons()
    dynamic = {
        # handlers/plumbing.write_outcome posts the Events of both controllers' outcomes
        "event.reason": _engine_event_reasons() | _deployment_condition_reasons(),
        # handlers/autoscaler.py posts the Events decide/autoscaler.py decided
        "outcome.scale_event.reason": autoscaler,
        "warning.reason": autoscaler,
        # handlers/deployment.py posts decide.deployment_status.workload_scale_reverted's Event
        "reverted.reason": {WORKLOAD_SCALE_REVERTED},
    }
    out: set[str] = set()
    for path in sorted((SRC / "handlers").glob("*.py")):
        tree = _module(path)
        consts = _all_consts(tree)
        for expr, func in _calls(tree, "post_event", 2):
            out |= _resolve(expr, func, consts, lambda e: dynamic.get(e) or _no_dynamic(e))
    return out


def _documented() -> list[tuple[str, str, str]]:
    """(reason, object, type) rows of the Event reasons table in docs/observability.md."""
    text = DOC.read_text(encoding="utf-8")
    section = text.split("## Events", 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in section.splitlines():
        m = re.match(r"^\| `([A-Za-z]+)` \| ([^|]+) \| ([^|]+) \|", line)
        if m:
            rows.append((m.group(1), m.group(2).strip(), m.group(3).strip()))
    return rows


def test_docs_table_is_the_catalogue() -> None:
    assert events.reasons_table() in DOC.read_text(encoding="utf-8"), (
        "docs/observability.md: paste trtllm_operator.events.reasons_table() into the Events section"
    )
    assert [(r.reason, r.kind, r.type) for r in events.REASONS] == _documented()


def test_every_reason_posted_in_code_is_documented() -> None:
    documented = events.reasons()
    posted = _posted_in_code()
    literal = {r for r in posted if not r.startswith("re:")}
    assert literal - documented == set(), "posted but not in trtllm_operator.events / docs"
    for pattern in (r[3:] for r in posted if r.startswith("re:")):
        assert any(re.fullmatch(pattern, d) for d in documented), f"no documented reason matches {pattern}"


def test_every_documented_reason_is_posted() -> None:
    posted = _posted_in_code()
    patterns = [re.compile(r[3:]) for r in posted if r.startswith("re:")]
    stale = {
        r.reason
        for r in events.REASONS
        if r.controller != "kopf"
        and r.reason not in posted
        and not any(p.fullmatch(r.reason) for p in patterns)
    }
    assert stale == set(), "documented but no code posts it"


def test_builder_failure_classes_are_documented() -> None:
    assert set(EXIT_CODES) - {"Succeeded"} <= set(events.BUILD_FAILURES)


@pytest.mark.parametrize("reason", sorted(events.reasons()))
def test_reasons_are_camel_case(reason: str) -> None:
    assert re.fullmatch(r"[A-Z][A-Za-z0-9]+", reason)
