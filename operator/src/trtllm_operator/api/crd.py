"""CustomResourceDefinitions generated from the pydantic models.

Pydantic emits JSON Schema (draft 2020-12); Kubernetes wants a *structural* OpenAPI v3 schema
(https://kubernetes.io/docs/tasks/extend-kubernetes/custom-resources/custom-resource-definitions/#specifying-a-structural-schema):
no ``$ref``, every node typed, no ``anyOf`` of types, no ``null``. :func:`structural_schema` converts:

* ``$ref`` → the definition inlined; the referring field's description, default and CEL rules win
  over / are added to the definition's;
* ``anyOf [X, null]`` (an optional field) → ``X`` (an unset field is simply absent);
* ``exclusiveMinimum: n`` (draft 2020) → ``minimum: n, exclusiveMinimum: true`` (OpenAPI 3.0);
* ``const`` → a one-value ``enum``; ``title`` and ``default: null`` dropped;
* a nested model default (``default_factory=Model``) → the model's defaults as an object, so the API
  server fills them and ``kubectl get -o yaml`` shows the effective spec (the API server validates
  a default against the schema and CEL rules without applying nested defaults first, so ``{}``
  would not do).

The result is deterministic (same models → same bytes), which the staleness test relies on.
"""

from __future__ import annotations

import copy
from typing import Any

import yaml
from pydantic import BaseModel
from pydantic.json_schema import GenerateJsonSchema, JsonSchemaValue
from pydantic_core import core_schema

from trtllm_operator.api import wire
from trtllm_operator.api.common import CEL_KEY, cel, mx
from trtllm_operator.api.deployment import LLMDeploymentSpec, LLMDeploymentStatus
from trtllm_operator.api.engine import LLMEngineSpec, LLMEngineStatus

#: Longest object name: names prefix Jobs, PVCs, Services and label values (63 chars) the operator
#: derives from them (e.g. ``<name>-build-<key12>``).
MAX_NAME_LENGTH = 48

_KEEP = {
    "type",
    "description",
    "default",
    "enum",
    "format",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "minLength",
    "maxLength",
    "pattern",
    "minItems",
    "maxItems",
    "minProperties",
    "maxProperties",
    "required",
    "properties",
    "items",
    "additionalProperties",
    "nullable",
    CEL_KEY,
    "x-kubernetes-preserve-unknown-fields",
    "x-kubernetes-list-type",
    "x-kubernetes-list-map-keys",
    "x-kubernetes-map-type",
    "x-kubernetes-int-or-string",
    "anyOf",  # only [integer, string] beside x-kubernetes-int-or-string
}


class _CRDJsonSchema(GenerateJsonSchema):
    """Pydantic schema generator that records a nested model's defaults as the field's default."""

    def default_schema(self, schema: core_schema.WithDefaultSchema) -> JsonSchemaValue:
        factory = schema.get("default_factory")
        if factory is not None:
            value = factory()  # type: ignore[call-arg]
            if isinstance(value, BaseModel):
                json_schema = self.generate_inner(schema["schema"])
                json_schema["default"] = value.model_dump(by_alias=True, exclude_none=True, mode="json")
                return json_schema
        return super().default_schema(schema)


def _merge(outer: dict[str, Any], inner: dict[str, Any]) -> dict[str, Any]:
    """``inner`` with ``outer``'s keys on top; CEL rule lists are concatenated (inner first).

    A field's own description wins over its type's docstring; fields typed by a model usually carry
    none, so ``kubectl explain`` shows the model's docstring.
    """
    merged = dict(inner)
    for key, value in outer.items():
        if key == CEL_KEY and CEL_KEY in merged:
            merged[key] = [*merged[key], *value]
        else:
            merged[key] = value
    return merged


def _resolve(node: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    """Flatten ``$ref`` / ``allOf`` / ``anyOf [X, null]`` into one node (not recursive)."""
    node = dict(node)
    if "$ref" in node:
        name = node.pop("$ref").rsplit("/", 1)[-1]
        node = _merge(node, _resolve(copy.deepcopy(defs[name]), defs))
    if "allOf" in node:
        parts = node.pop("allOf")
        if len(parts) != 1:
            raise ValueError(f"allOf with {len(parts)} parts is not structural: {parts}")
        node = _merge(node, _resolve(parts[0], defs))
    if "anyOf" in node and node.get("x-kubernetes-int-or-string"):
        node.pop("anyOf")  # int | str: _convert writes the int-or-string anyOf
    if "anyOf" in node:
        branches = [b for b in node.pop("anyOf") if b.get("type") != "null"]
        if len(branches) != 1:
            raise ValueError(f"anyOf of several types is not structural: {branches}")
        node = _merge(node, _resolve(branches[0], defs))
    return node


def _convert(node: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    node = _resolve(node, defs)
    if "const" in node:
        node["enum"] = [node.pop("const")]
    if node.get("default", 0) is None:
        del node["default"]
    if "description" in node:
        node["description"] = " ".join(node["description"].split())
    for key, flag in (("exclusiveMinimum", "minimum"), ("exclusiveMaximum", "maximum")):
        value = node.get(key)
        if value is not None and not isinstance(value, bool):
            node[flag] = value
            node[key] = True
    if node.get("x-kubernetes-int-or-string"):
        # An int-or-string value (a Kubernetes quantity): the model declares the string form; the CRD
        # takes both, as controller-gen's schema for resource.Quantity (common.INT_OR_STRING).
        node.pop("type", None)
        node["anyOf"] = [{"type": "integer"}, {"type": "string"}]
    if node.get("x-kubernetes-preserve-unknown-fields"):
        node.pop("additionalProperties", None)
        node["type"] = "object"
    if "properties" in node:
        node["properties"] = {k: _convert(v, defs) for k, v in node["properties"].items()}
    if "items" in node:
        node["items"] = _convert(node["items"], defs)
    extra = node.get("additionalProperties")
    if isinstance(extra, dict):
        node["additionalProperties"] = _convert(extra, defs)
    unknown = set(node) - _KEEP
    if unknown - {"title"}:
        raise ValueError(f"schema keys not supported in a CRD: {sorted(unknown)} in {node}")
    out = {k: node[k] for k in sorted(node, key=_key_order) if k in _KEEP}
    if "type" not in out and not out.get("x-kubernetes-int-or-string"):
        raise ValueError(f"schema node without a type is not structural: {node}")
    return out


_ORDER = ["description", "type", "format", "default", "enum", "required", "properties", "items"]


def _key_order(key: str) -> tuple[int, str]:
    return (_ORDER.index(key) if key in _ORDER else len(_ORDER), key)


def structural_schema(model: type[BaseModel]) -> dict[str, Any]:
    """Structural OpenAPI v3 schema of ``model`` (camelCase names), as a plain dict.

    Raises ``ValueError`` when the model uses a construct a CRD cannot express (a union of types).
    """
    raw = model.model_json_schema(by_alias=True, mode="validation", schema_generator=_CRDJsonSchema)
    defs = raw.pop("$defs", {})
    return _convert(raw, defs)


def _root_schema(
    kind: str,
    description: str,
    spec: type[BaseModel],
    status: type[BaseModel],
    *rules: dict[str, str],
) -> dict[str, Any]:
    return {
        "description": description,
        "type": "object",
        "required": ["spec"],
        "properties": {
            "apiVersion": {"type": "string", "description": "APIVersion of this object."},
            "kind": {"type": "string", "description": "Kind of this object."},
            # Only name and generateName may be described under metadata (structural schema rules);
            # describing name lets the CEL rules below report their errors on metadata.name.
            "metadata": {"type": "object", "properties": {"name": {"type": "string"}}},
            "spec": structural_schema(spec),
            "status": structural_schema(status),
        },
        CEL_KEY: [
            cel(
                f"self.metadata.name.size() <= {MAX_NAME_LENGTH}",
                f"metadata.name must be at most {MAX_NAME_LENGTH} characters: the operator derives "
                f"the names of the {kind}'s Jobs, PVCs and Services from it",
                message_expression=mx(
                    f'metadata.name "%s" has %d characters but must be at most {MAX_NAME_LENGTH} characters '
                    f"(the operator derives the names of the {kind}'s Jobs, PVCs and Services and label "
                    "values from it): choose a shorter name",
                    "self.metadata.name",
                    "self.metadata.name.size()",
                ),
                field_path=".metadata.name",
            ),
            *rules,
        ],
    }


def _column(name: str, json_path: str, type_: str, description: str, priority: int = 0) -> dict[str, Any]:
    column: dict[str, Any] = {
        "name": name,
        "type": type_,
        "jsonPath": json_path,
        "description": description,
    }
    if priority:
        column["priority"] = priority
    return column


_AGE = _column("Age", ".metadata.creationTimestamp", "date", "Time since creation.")


def _crd(
    kind: str,
    *,
    plural: str,
    singular: str,
    short_names: tuple[str, ...],
    schema: dict[str, Any],
    columns: list[dict[str, Any]],
    subresources: dict[str, Any],
) -> dict[str, Any]:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {
            "name": f"{plural}.{wire.GROUP}",
            "labels": {wire.LABEL_PART_OF: wire.OPERATOR},
        },
        "spec": {
            "group": wire.GROUP,
            "scope": "Namespaced",
            "names": {
                "kind": kind,
                "listKind": f"{kind}List",
                "plural": plural,
                "singular": singular,
                "shortNames": list(short_names),
                "categories": [wire.CATEGORY],
            },
            "versions": [
                {
                    "name": wire.VERSION,
                    "served": True,
                    "storage": True,
                    "schema": {"openAPIV3Schema": schema},
                    "subresources": subresources,
                    "additionalPrinterColumns": columns,
                }
            ],
        },
    }


def engine_crd() -> dict[str, Any]:
    """The ``llmengines.llm.trtllm-operator.dev`` CRD."""
    schema = _root_schema(
        wire.ENGINE_KIND,
        "LLMEngine is a TensorRT-LLM engine (or quantized checkpoint for the PyTorch backend) that "
        "the operator builds once per engine key on a GPU of the target product and stores as an "
        "artifact that LLMDeployments serve.",
        LLMEngineSpec,
        LLMEngineStatus,
    )
    columns = [
        _column("Phase", ".status.phase", "string", "Build phase."),
        _column(
            "Stage",
            ".status.build.stage",
            "string",
            "Builder stage (queued, starting, running, fetch … package, done).",
        ),
        _column("Progress", ".status.build.percent", "integer", "Overall build progress, percent."),
        _column("Quant", ".spec.quantization.format", "string", "Quantization format."),
        _column("TP", ".spec.parallelism.tensor", "integer", "Tensor parallelism."),
        _column("PP", ".spec.parallelism.pipeline", "integer", "Pipeline parallelism."),
        _column("GPU", ".spec.gpu.product", "string", "Target GPU product."),
        _column("Key", ".status.engineKeyShort", "string", "Engine key (first 12 hex chars)."),
        _column(
            "Partial",
            ".status.artifact.partial",
            "boolean",
            "true: the artifact lacks a part its backend needs (e.g. no compiled engine).",
        ),
        _column("Backend", ".spec.backend", "string", "tensorrt or pytorch.", priority=1),
        _column("Model", ".spec.model.source", "string", "Model source.", priority=1),
        _AGE,
    ]
    return _crd(
        wire.ENGINE_KIND,
        plural=wire.ENGINE_PLURAL,
        singular=wire.ENGINE_SINGULAR,
        short_names=wire.ENGINE_SHORT_NAMES,
        schema=schema,
        columns=columns,
        subresources={"status": {}},
    )


def deployment_crd() -> dict[str, Any]:
    """The ``llmdeployments.llm.trtllm-operator.dev`` CRD (with the scale subresource)."""
    schema = _root_schema(
        wire.DEPLOYMENT_KIND,
        "LLMDeployment serves an LLMEngine with a fleet of Triton Inference Server pods, rolled out "
        "GPU-safely and autoscaled on queue depth and KV-cache utilization.",
        LLMDeploymentSpec,
        LLMDeploymentStatus,
        # The Service is named after the LLMDeployment and Service names are DNS-1035 labels
        # (ValidateServiceName = NameIsDNS1035Label, core validation.go v1.34.4): a name starting with
        # a digit would be admitted here and refused on the Service.
        cel(
            "self.metadata.name.matches('^[a-z]')",
            "metadata.name must start with a lowercase letter: the Service named after the "
            "LLMDeployment must be a DNS-1035 label",
            message_expression=mx(
                'metadata.name "%s" must start with a lowercase letter: the Service named after the '
                "LLMDeployment must be a DNS-1035 label; e.g. prefix it: llm-%s",
                "self.metadata.name",
                "self.metadata.name",
            ),
            field_path=".metadata.name",
        ),
    )
    columns = [
        _column("Engine", ".spec.engineRef.name", "string", "Served LLMEngine."),
        _column("Ready", ".status.readyReplicas", "integer", "Replicas serving requests."),
        _column("Desired", ".spec.replicas", "integer", "Desired replicas."),
        _column(
            "Active%",
            ".status.autoscaling.activeRequestUtilizationPercent",
            "integer",
            "Active / max requests in percent (100 = saturated).",
        ),
        _column(
            "KV%",
            ".status.autoscaling.kvCacheUtilizationPercent",
            "integer",
            "KV-cache utilization in percent.",
        ),
        _column("Phase", ".status.phase", "string", "Serving phase."),
        # The key the pods serve, which the Engine column (spec.engineRef) does not say while a new
        # engine is not Ready or rolling out (trial 46 T7). The full key: a printer column is a
        # JSONPath (no substring), and a short copy in status would be a second home of it.
        _column(
            "Key",
            ".status.engineKey",
            "string",
            "Engine key served by every pod (the LLMEngine's Key column shows its first 12 characters).",
            priority=1,
        ),
        _column("API", ".spec.server.api", "string", "Client API: triton, openai or both.", priority=1),
        _column(
            "Endpoint",
            ".status.endpoint",
            "string",
            "In-cluster endpoint: KServe v2 base URL (api triton) or OpenAI base URL (openai, both).",
            priority=1,
        ),
        _AGE,
    ]
    subresources = {
        "status": {},
        "scale": {
            "specReplicasPath": ".spec.replicas",
            "statusReplicasPath": ".status.replicas",
            "labelSelectorPath": ".status.selector",
        },
    }
    return _crd(
        wire.DEPLOYMENT_KIND,
        plural=wire.DEPLOYMENT_PLURAL,
        singular=wire.DEPLOYMENT_SINGULAR,
        short_names=wire.DEPLOYMENT_SHORT_NAMES,
        schema=schema,
        columns=columns,
        subresources=subresources,
    )


def all_crds() -> dict[str, dict[str, Any]]:
    """File name → CRD manifest, for ``crds/`` and the chart's ``crds/``."""
    return {
        f"{wire.GROUP}_{wire.ENGINE_PLURAL}.yaml": engine_crd(),
        f"{wire.GROUP}_{wire.DEPLOYMENT_PLURAL}.yaml": deployment_crd(),
    }


HEADER = (
    "# Generated by `trtllm-operator crds` (make crds) from the pydantic models in\n"
    "# operator/src/trtllm_operator/api/. Do not edit: change the models and regenerate.\n"
)


def render_yaml(crd: dict[str, Any]) -> str:
    """One CRD as YAML text with the generated-file header (deterministic)."""
    return HEADER + yaml.safe_dump(crd, sort_keys=False, width=100, allow_unicode=True)
