"""Check an LLMEngine / LLMDeployment manifest the way the API server would, without a cluster.

Used by ``trtllm-operator render`` so a manifest that ``kubectl apply`` would reject is not rendered.
Three passes over ``spec``, all driven by the generated CRD schema (:mod:`trtllm_operator.api.crd`,
the same schema as ``crds/*.yaml``):

1. structural: types, enums, ranges, patterns and required keys (``jsonschema``), with unknown fields
   rejected where the schema does not set ``x-kubernetes-preserve-unknown-fields`` (``kubectl apply``
   refuses them: its ``--validate`` defaults to ``strict``, server-side field validation, KEP-2885,
   Kubernetes ≥ 1.27; a client that sends no ``fieldValidation`` gets them pruned with a warning, so
   a typo would vanish);
2. defaults from the schema filled in, as the API server does before CEL;
3. the CEL ``x-kubernetes-validations`` rules (and their ``messageExpression``), evaluated with
   ``cel-python`` plus the Kubernetes library functions our rules call
   (:mod:`trtllm_operator.commands._cel_library`). As on the API server
   (apiextensions-apiserver@v0.34.4 ``pkg/registry/customresource/strategy.go`` ``hasBlockingErr``),
   CEL runs unless a structural error is of a blocking kind (unsupported enum value, missing required
   field, too long, too many items, wrong type). Transition rules (``oldSelf``) are skipped: there is
   no old object offline; the API server checks those.

Also checks ``apiVersion``, ``metadata.name`` (a DNS-1123 subdomain) and ``metadata.namespace``
(a DNS-1123 label). Every message names the field path (``spec.autoscaling.minReplicas``).
"""

from __future__ import annotations

import contextlib
import copy
import math
import re
from collections.abc import Iterator
from functools import cache
from typing import Any

#: DNS-1123 label (namespaces): lower-case alphanumerics and '-', ≤ 63, alphanumeric at both ends.
DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
#: DNS-1123 subdomain (object names): labels joined by '.', ≤ 253.
DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def namespace_error(value: object) -> str | None:
    """Why ``value`` is not a valid namespace name (DNS-1123 label), or None when it is."""
    if not isinstance(value, str) or len(value) > 63 or not DNS1123_LABEL.match(value):
        return (
            f"{value!r} is not a valid namespace: use at most 63 lower-case letters, digits and '-', "
            "starting and ending with a letter or digit (DNS-1123 label)"
        )
    return None


def _strict(node: Any) -> Any:
    """A copy of an OpenAPI schema that rejects unknown properties and accepts ``nullable`` nulls."""
    if isinstance(node, list):
        return [_strict(n) for n in node]
    if not isinstance(node, dict):
        return node
    out = {k: _strict(v) for k, v in node.items()}
    if (
        out.get("type") == "object"
        and "properties" in out
        and "additionalProperties" not in out
        and not out.get("x-kubernetes-preserve-unknown-fields")
    ):
        out["additionalProperties"] = False
    if out.get("nullable") and isinstance(out.get("type"), str):
        out["type"] = [out["type"], "null"]
    # OpenAPI 3.0 booleans → JSON Schema 2020-12 numbers.
    for bound, key in (("minimum", "exclusiveMinimum"), ("maximum", "exclusiveMaximum")):
        if isinstance(out.get(key), bool) and out.pop(key) and bound in out:
            out[key] = out.pop(bound)
    return out


@cache
def _schemas() -> dict[str, dict[str, Any]]:
    from trtllm_operator.api import DEPLOYMENT_KIND, ENGINE_KIND  # noqa: PLC0415
    from trtllm_operator.api.crd import deployment_crd, engine_crd  # noqa: PLC0415

    out = {}
    for kind, crd in ((ENGINE_KIND, engine_crd()), (DEPLOYMENT_KIND, deployment_crd())):
        out[kind] = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return out


def _path(base: str, parts: Any) -> str:
    out = base
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return out


#: jsonschema keywords whose failure the API server reports as a blocking error (NotSupported,
#: Required, TooLong, TooMany, TypeInvalid — an int-or-string's ``anyOf`` is its type): CEL rules are
#: then not evaluated.
_BLOCKING = {
    "enum",
    "required",
    "maxLength",
    "maxItems",
    "maxProperties",
    "type",
    "additionalProperties",
    "anyOf",
}


def _structural_errors(spec: Any, schema: dict[str, Any], base: str = "spec") -> tuple[list[str], bool]:
    """Schema errors of ``spec`` (found at ``base``) and whether one of them blocks the CEL rules."""
    from jsonschema import Draft202012Validator  # type: ignore[import-untyped]  # noqa: PLC0415

    validator = Draft202012Validator(_strict(schema))
    errors: list[str] = _beyond_int64(spec, schema, base)
    blocking = bool(errors)
    for err in sorted(validator.iter_errors(spec), key=lambda e: [str(p) for p in e.absolute_path]):
        path = _path(base, err.absolute_path)
        blocking = blocking or err.validator in _BLOCKING
        if err.validator == "additionalProperties" and isinstance(err.instance, dict):
            known = set((err.schema.get("properties") or {}).keys())
            for key in sorted(set(err.instance) - known):
                errors.append(
                    f"{path}.{key}: unknown field; kubectl apply refuses it (strict field validation). "
                    "Remove it or fix its "
                    f"spelling (known fields here: {', '.join(sorted(known))})"
                )
        else:
            errors.append(_message(path, err.validator, err.validator_value, err.instance, err.message))
    return errors, blocking


#: The largest magnitude a JSON number may have and still count as an integer: kube-openapi
#: ``pkg/validation/validate`` type validator, ``swag.IsFloat64AJSONInteger`` (±2^53).
_JSON_INTEGER_LIMIT = 2**53


def _beyond_int64(spec: Any, schema: dict[str, Any], base: str) -> list[str]:
    """Integer fields holding a number the API server cannot take as an integer: an integer outside
    int64 is decoded as a float (Go ``encoding/json`` into ``interface{}``: ``int64`` when it fits,
    else ``float64``) and a float counts as an integer only when integral and within ±2^53
    (:data:`_JSON_INTEGER_LIMIT`), so both are "must be of type integer", a blocking error. jsonschema
    takes any integral number, and the CEL pass could not carry it (cel-python's ``IntType`` is
    int64: fresh-user trial 53 #1, a traceback)."""
    from trtllm_operator.api.common import INT_OR_STRING  # noqa: PLC0415

    out = []
    for path, value, node in _cel_nodes(spec, schema, base):
        integer = node.get("type") == "integer" or node.get(INT_OR_STRING)
        if not integer or isinstance(value, bool) or not isinstance(value, int | float):
            continue
        fits = (
            -(2**63) <= value < 2**63
            if isinstance(value, int)
            else value.is_integer() and abs(value) <= _JSON_INTEGER_LIMIT
        )
        if not fits and (isinstance(value, int) or value.is_integer()):
            out.append(
                f"{path}: Invalid value: {value!r}: must be of type integer (the API server reads a number "
                'beyond 64-bit integers as a float: "number"); write a smaller number'
            )
    return out


#: The ``anyOf`` of an ``x-kubernetes-int-or-string`` node (api/crd.py).
INT_OR_STRING_BRANCHES = [{"type": "integer"}, {"type": "string"}]


def _message(path: str, validator: Any, expected: Any, instance: Any, default: str) -> str:
    """The API server's wording for the common schema failures (``kubectl apply`` says the same)."""
    if validator == "required" and isinstance(instance, dict):
        missing = [k for k in expected if k not in instance]
        return "; ".join(f"{path}.{k}: Required value" for k in missing)
    if validator == "enum":
        return f"{path}: Unsupported value: {instance!r}: supported values: {', '.join(map(repr, expected))}"
    words = {
        "minimum": "greater than or equal to",
        "maximum": "less than or equal to",
        "exclusiveMinimum": "greater than",
        "exclusiveMaximum": "less than",
    }
    if validator in words:
        return f"{path}: Invalid value: {instance!r}: should be {words[validator]} {expected}"
    if validator == "type":
        return f"{path}: Invalid value: {instance!r}: must be of type {expected}"
    if validator == "anyOf" and expected == INT_OR_STRING_BRANCHES:  # a quantity written as 0.5
        return (  # the API server: 'in body must be of type integer,string: "number"'
            f"{path}: Invalid value: {instance!r}: must be of type integer,string; write a fractional "
            f'quantity as a string, e.g. "{instance}" or "500m"'
        )
    if validator == "maxLength":
        return f"{path}: Too long: may not be more than {expected} bytes"
    if validator in ("maxItems", "maxProperties"):
        return f"{path}: Too many: {len(instance)}: must have at most {expected} items"
    if validator == "minItems":
        return f"{path}: Invalid value: {len(instance)}: should have at least {expected} items"
    if validator == "minLength":
        return f"{path}: Invalid value: {instance!r}: should be at least {expected} chars long"
    return f"{path}: {default}"


def apply_defaults(value: Any, schema: dict[str, Any]) -> Any:
    """``value`` with the schema's ``default`` values filled in for absent properties (recursively)."""
    if isinstance(value, dict):
        props = schema.get("properties") or {}
        out = dict(value)
        for key, sub in props.items():
            if key not in out and "default" in sub:
                out[key] = copy.deepcopy(sub["default"])
            if key in out:
                out[key] = apply_defaults(out[key], sub)
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict):
            for key, item in list(out.items()):
                if key not in props:
                    out[key] = apply_defaults(item, extra)
        return out
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [apply_defaults(v, schema["items"]) for v in value]
    return value


def _cel_nodes(value: Any, schema: dict[str, Any], path: str) -> Iterator[tuple[str, Any, dict[str, Any]]]:
    """Every (path, value, schema) below ``value``; map entries are ``path[key]`` as the API server
    prints them, object properties ``path.key``."""
    yield path, value, schema
    if isinstance(value, dict):
        props = schema.get("properties") or {}
        extra = schema.get("additionalProperties")
        for key, sub in value.items():
            if key in props:
                yield from _cel_nodes(sub, props[key], f"{path}.{key}")
            elif isinstance(extra, dict):
                yield from _cel_nodes(sub, extra, f"{path}[{key}]")
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for i, item in enumerate(value):
            yield from _cel_nodes(item, schema["items"], f"{path}[{i}]")


def to_cel(value: Any, schema: dict[str, Any]) -> Any:
    """``value`` as the API server hands it to CEL: typed by the schema (a JSON ``90`` in a
    ``number`` field is the double ``90.0``), objects and maps as CEL maps."""
    from celpy import celtypes  # noqa: PLC0415

    kind = schema.get("type")
    if isinstance(value, bool):
        return celtypes.BoolType(value)
    if kind == "number" and isinstance(value, int | float):
        return celtypes.DoubleType(float(value))
    if isinstance(value, int):
        return celtypes.IntType(value)
    if isinstance(value, float):
        return celtypes.DoubleType(value)
    if isinstance(value, str):
        return celtypes.StringType(value)
    if isinstance(value, list):
        items = schema.get("items")
        return celtypes.ListType([to_cel(v, items if isinstance(items, dict) else {}) for v in value])
    if isinstance(value, dict):
        props = schema.get("properties") or {}
        extra = schema.get("additionalProperties")
        fallback: dict[str, Any] = extra if isinstance(extra, dict) else {}
        return celtypes.MapType(
            {celtypes.StringType(k): to_cel(v, props.get(k) or fallback) for k, v in value.items()}
        )
    return value


@cache
def _program(rule: str) -> Any:
    import celpy  # noqa: PLC0415

    from trtllm_operator.commands._cel_library import FUNCTIONS  # noqa: PLC0415

    env = celpy.Environment()
    return env.program(env.compile(rule), functions=FUNCTIONS)


def _field_path(field_path: str) -> str:
    """A rule's ``fieldPath`` as the API server prints it: ``.a['b.c/d']`` → ``.a[b.c/d]``."""
    return field_path.replace("['", "[").replace("']", "]")


def _cel_errors(spec: Any, schema: dict[str, Any], base: str = "") -> list[str]:
    from celpy import celtypes  # noqa: PLC0415

    from trtllm_operator.api.common import CEL_KEY  # noqa: PLC0415

    errors: list[str] = []
    for path, value, node in _cel_nodes(spec, schema, base):
        for rule in node.get(CEL_KEY) or []:
            text = rule.get("rule", "")
            if "oldSelf" in text:
                continue
            try:
                activation = {"self": to_cel(value, node)}
                result = _program(text).evaluate(activation)
            except Exception:  # a value or rule cel-python cannot evaluate is left to the API server
                continue
            if isinstance(result, celtypes.BoolType) and not bool(result):
                message = str(rule.get("message", text))
                if rule.get("messageExpression"):
                    # As the API server: the static message when the expression fails.
                    with contextlib.suppress(Exception):
                        message = str(_program(rule["messageExpression"]).evaluate(activation))
                where = (path + _field_path(str(rule.get("fieldPath") or ""))).lstrip(".") or "<root>"
                errors.append(f"{where}: {message}")
    return errors


def _yaml_number(value: float) -> str:
    """A non-finite float as YAML writes it (``.nan``, ``.inf``, ``-.inf``)."""
    return ".nan" if math.isnan(value) else (".inf" if value > 0 else "-.inf")


def non_finite_errors(value: Any, path: str) -> list[str]:
    """Every NaN or infinity in ``value`` (found at ``path``; ``""``: a whole document), each naming its
    field. YAML has them
    (``.nan``, ``.inf``) and JSON has not: kubectl converts the manifest to JSON (sigs.k8s.io/yaml
    ``YAMLToJSON``), whose encoder refuses them (Go ``encoding/json``: kubectl v1.34.4 says ``error
    converting YAML to JSON: json: unsupported value: NaN``), so such a manifest never reaches the API
    server. The range checks cannot say so: every comparison
    with NaN is false (fresh-user trial 51 Y8: ``target: .nan`` got "should be less than or equal to 1")."""
    if isinstance(value, float) and not math.isfinite(value):
        go = "NaN" if math.isnan(value) else ("+Inf" if value > 0 else "-Inf")  # strconv.FormatFloat
        return [
            f"{path or 'the document'}: Invalid value: {_yaml_number(value)}: not a finite number, which "
            "JSON cannot carry (kubectl refuses the file: error converting YAML to JSON: json: unsupported "
            f"value: {go}); write a finite number, or quote it where a string is meant"
        ]
    if isinstance(value, dict):
        return [e for k, v in value.items() for e in non_finite_errors(v, f"{path}.{k}" if path else str(k))]
    if isinstance(value, list):
        return [e for i, v in enumerate(value) for e in non_finite_errors(v, f"{path}[{i}]")]
    return []


def manifest_errors(doc: dict[str, Any]) -> list[str]:
    """Everything the API server would reject in ``doc`` that can be checked here; empty = valid.

    ``doc`` is one LLMEngine or LLMDeployment manifest (a dict as read from YAML). Other kinds
    return ``[]``. Messages start with the field path.
    """
    from trtllm_operator.api import API_VERSION  # noqa: PLC0415

    schema = _schemas().get(str(doc.get("kind")))
    if schema is None:
        return []
    errors: list[str] = []
    if doc.get("apiVersion") != API_VERSION:
        errors.append(f"apiVersion: {doc.get('apiVersion')!r} is not {API_VERSION!r}")
    metadata = doc.get("metadata")
    if not isinstance(metadata, dict):
        errors.append("metadata: missing; set metadata.name")
        metadata = {}
    name = metadata.get("name")
    if not name:
        errors.append("metadata.name: missing; every object needs a name")
    elif not isinstance(name, str) or len(name) > 253 or not DNS1123_SUBDOMAIN.match(name):
        errors.append(
            f"metadata.name: {name!r} is not a valid name: lower-case letters, digits, '-' and '.' "
            "(DNS-1123 subdomain)"
        )
    for field in ("labels", "annotations"):  # ObjectMeta: map[string]string (trial 53 #4)
        values = metadata.get(field)
        for key, value in values.items() if isinstance(values, dict) else []:
            if not isinstance(value, str):
                errors.append(
                    f"metadata.{field}.{key}: Invalid value: {value!r}: must be a string (kubectl: cannot "
                    f"unmarshal it into the {field}' map[string]string); quote it"
                )
    if "namespace" in metadata:
        problem = namespace_error(metadata["namespace"])
        if problem:
            errors.append(f"metadata.namespace: {problem}")
    spec_schema = schema["properties"]["spec"]
    spec = doc.get("spec")
    if spec is None:
        return [*errors, "spec: missing"]
    non_finite = non_finite_errors(spec, "spec")
    if non_finite:  # kubectl cannot even send it
        return [*errors, *non_finite]
    structural, blocking = _structural_errors(spec, spec_schema)
    errors.extend(structural)
    if not blocking:  # as the API server: CEL on the defaulted object unless a blocking error (no status)
        whole = {k: v for k, v in doc.items() if k != "status"}
        errors.extend(_cel_errors(apply_defaults(whole, schema), schema))
    return errors


def section_errors(kind: str, path: str, value: Any) -> list[str]:
    """What :func:`manifest_errors` reports about one part of a ``kind`` manifest given on its own:
    ``path`` is where it sits (``spec.autoscaling``), ``value`` its content. The same schema, unknown
    fields, defaults and CEL rules, with the same messages and paths, for a tool that takes only that
    part (``simulate --deployment`` with a bare ``spec.autoscaling`` mapping)."""
    schema = _schemas()[kind]
    for part in path.split("."):
        schema = schema["properties"][part]
    non_finite = non_finite_errors(value, path)
    if non_finite:
        return non_finite
    structural, blocking = _structural_errors(value, schema, base=path)
    if blocking:
        return structural
    return structural + _cel_errors(apply_defaults(value, schema), schema, base=f".{path}")
