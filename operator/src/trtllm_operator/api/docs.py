"""Markdown field reference generated from the CRD schemas (the section of docs/api.md between the
``BEGIN``/``END GENERATED`` markers), so the documentation says exactly what ``kubectl explain``
and the API server's validation say. Regenerate with ``trtllm-operator crds --api-docs docs/api.md``;
a unit test fails when the checked-in section is stale.
"""

from __future__ import annotations

import json
from typing import Any

from trtllm_operator.api.common import CEL_KEY
from trtllm_operator.api.crd import deployment_crd, engine_crd

BEGIN = "<!-- BEGIN GENERATED REFERENCE (trtllm-operator crds --api-docs docs/api.md) -->"
END = "<!-- END GENERATED REFERENCE -->"


def _type(node: dict[str, Any]) -> str:
    if node.get("x-kubernetes-int-or-string"):
        return "int or string"
    kind = str(node.get("type", ""))
    if kind == "array":
        return f"[]{_type(node['items'])}"
    if kind == "object" and isinstance(node.get("additionalProperties"), dict):
        return f"map[string]{_type(node['additionalProperties'])}"
    if node.get("x-kubernetes-preserve-unknown-fields"):
        return "object (passthrough)"
    if "enum" in node:
        return f"{kind}: " + " | ".join(str(v) for v in node["enum"])
    return kind


def _bounds(node: dict[str, Any]) -> str:
    parts = []
    if "minimum" in node:
        parts.append((">" if node.get("exclusiveMinimum") else "≥") + f" {node['minimum']}")
    if "maximum" in node:
        parts.append(("<" if node.get("exclusiveMaximum") else "≤") + f" {node['maximum']}")
    if "maxLength" in node:
        parts.append(f"≤ {node['maxLength']} chars")
    if "maxItems" in node:
        parts.append(f"≤ {node['maxItems']} items")
    return ", ".join(parts)


def _default(node: dict[str, Any]) -> str:
    if "default" not in node or isinstance(node["default"], dict):
        return ""
    return f"`{json.dumps(node['default'])}`"


def _cell(text: str, code: bool = False) -> str:
    text = text.replace("|", "\\|").replace("\n", " ")
    return text if code else text.replace("<", "&lt;").replace(">", "&gt;")


def _walk(
    node: dict[str, Any],
    path: str,
    required: bool,
    rows: list[str],
    rules: list[tuple[str, dict[str, str]]],
) -> None:
    for rule in node.get(CEL_KEY, []):
        rules.append((path, rule))
    if path:
        req = " (required)" if required else ""
        rows.append(
            f"| `{path}`{req} | {_cell(_type(node))} | {_default(node)} | {_bounds(node)} | "
            f"{_cell(node.get('description', ''))} |"
        )
    children = node.get("properties", {})
    needed = set(node.get("required", []))
    for name, child in children.items():
        _walk(child, f"{path}.{name}" if path else name, name in needed, rows, rules)
    items = node.get("items")
    if isinstance(items, dict):
        rules.extend((f"{path}[]", rule) for rule in items.get(CEL_KEY, []))
        for name, child in (items.get("properties") or {}).items():
            child_required = name in set(items.get("required", []))
            _walk(child, f"{path}[].{name}", child_required, rows, rules)
    values = node.get("additionalProperties")
    if isinstance(values, dict):
        rules.extend((f"{path}[*]", rule) for rule in values.get(CEL_KEY, []))


def render_reference() -> str:
    """The generated Markdown section, markers included."""
    out = [BEGIN, ""]
    for crd in (engine_crd(), deployment_crd()):
        kind = crd["spec"]["names"]["kind"]
        root = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
        rules: list[tuple[str, dict[str, str]]] = [("", r) for r in root.get(CEL_KEY, [])]
        for part in ("spec", "status"):
            rows: list[str] = []
            _walk(root["properties"][part], part, False, rows, rules)
            out += [
                f"### {kind} `{part}`",
                "",
                "| field | type | default | bounds | description |",
                "| --- | --- | --- | --- | --- |",
                *rows,
                "",
            ]
        out += [
            f"### {kind} validation rules (CEL)",
            "",
            "| on | kind | rule | message |",
            "| --- | --- | --- | --- |",
        ]
        for path, rule in rules:
            where = path + rule.get("fieldPath", "") if path else "metadata"
            change = "transition" if "oldSelf" in rule["rule"] else "create/update"
            out.append(
                f"| `{where}` | {change} | `{_cell(rule['rule'], code=True)}` | {_cell(rule['message'])} |"
            )
        out.append("")
    out.append(END)
    return "\n".join(out) + "\n"


def splice(document: str, reference: str) -> str:
    """``document`` with its generated section replaced by ``reference``.

    Raises ``ValueError`` when the markers are missing or out of order.
    """
    start, end = document.find(BEGIN), document.find(END)
    if start < 0 or end < start:
        raise ValueError(f"markers {BEGIN!r} … {END!r} not found in order")
    return document[:start] + reference.rstrip("\n") + document[end + len(END) :]
