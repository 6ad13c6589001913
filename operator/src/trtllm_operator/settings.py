"""The operator's own configuration: environment variables and ``trtllm-operator run`` flags.

One immutable :class:`Settings` object, built once at start-up (:func:`Settings.from_env`, then
:meth:`Settings.with_overrides` for command-line flags) and handed to every handler through
:func:`current`. Every field has a documented default, so an operator started with no
configuration at all watches the whole cluster with sane limits; ``docs/operator.md`` carries the
same table (generated from these descriptions by :func:`settings_table`).

Precedence: command-line flag > environment variable > default. Environment variables are named
``TRTLLM_OPERATOR_<FIELD>`` in upper case (lists are comma-separated, booleans ``true|false|1|0``).

This module is pure (no Kubernetes access): the GPU catalog extension *ConfigMap* is read by the
handlers at start-up; here it is only a name.
"""

from __future__ import annotations

import difflib
import json
import os
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from trtllm_operator import __version__
from trtllm_operator.api.wire import OPERATOR

ENV_PREFIX = "TRTLLM_OPERATOR_"
#: ``TRTLLM_OPERATOR_*`` variables that are not operator settings but are read by the development
#: tooling, so a developer's shell may carry them into an operator started from it:
#: hack/localcluster/testbin.py (``TRTLLM_OPERATOR_TESTBIN``), hack/build-testbin.sh and
#: hack/build-controllers.sh (``TRTLLM_OPERATOR_TESTBIN_ROOT``). :meth:`Settings.from_env` refuses
#: every other name with the prefix that is not a setting.
TOOLING_VARIABLES = (f"{ENV_PREFIX}TESTBIN", f"{ENV_PREFIX}TESTBIN_ROOT")
#: The operator image the chart deploys by default (charts/trtllm-operator/values.yaml
#: image.repository, tag = appVersion = this version); it carries the builder bundle.
DEFAULT_DELIVERY_IMAGE = f"ghcr.io/trtllm-operator/trtllm-operator:{__version__}"


class SettingsError(ValueError):
    """An environment variable or flag has a value the operator cannot use (the message names it)."""


class Settings(BaseModel):
    """Operator configuration. Units are in the field names (``_seconds``, ``_bytes``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    namespaces: tuple[str, ...] = Field(
        default=(),
        description="Namespaces to watch (comma-separated in the environment). Empty means the whole "
        "cluster (cluster-wide RBAC needed).",
    )
    standalone: bool = Field(
        default=True,
        description="Run without kopf peering (one operator replica; the chart uses replicas: 1 and the "
        "Recreate strategy).",
    )
    operator_namespace: str = Field(
        default="trtllm-operator",
        description="Namespace the operator runs in (the chart sets it from the pod's namespace); the "
        "GPU catalog ConfigMap is read from here.",
    )
    max_concurrent_builds: int = Field(
        default=2,
        ge=1,
        description="Builder Jobs running at once across all watched namespaces; further LLMEngines wait "
        "in phase Queued with their position in status, served round-robin by namespace. A builder Job "
        "whose pod cannot be scheduled (phase Unschedulable) or whose container cannot start "
        "(BuilderPodFailing) holds no slot.",
    )
    builder_image: str | None = Field(
        default=None,
        description="Image of the builder Job. Unset: the LLMEngine's spec.runtime.image (an engine must be "
        "built by the TensorRT-LLM version that serves it, so the builder runs in the serving image, e.g. "
        "the stock nvcr.io/nvidia/tritonserver:<yy.mm>-trtllm-python-py3, into which builder_delivery "
        "brings engine-builder).",
    )
    builder_delivery: bool = Field(
        default=True,
        description="Deliver engine-builder into the builder Job: an init container of "
        "builder_delivery_image copies the bundle onto a shared emptyDir and the builder container runs "
        "it with the image's own python3 (python3 -m engine_builder), so a stock TensorRT-LLM image "
        "builds. false: the builder image must contain the engine-builder command itself (e.g. "
        "builder_image built from engine-builder/Dockerfile).",
    )
    builder_delivery_image: str = Field(
        default=DEFAULT_DELIVERY_IMAGE,
        min_length=1,
        description="Image the builder Job's init container copies the engine-builder bundle from "
        "(/opt/engine-builder): the operator image (operator/Dockerfile); the chart sets it to the image "
        "it deploys the operator with.",
    )
    allowed_image_registries: tuple[str, ...] = Field(
        default=(),
        description="Registry or registry/path prefixes (comma-separated) that every image an LLMEngine "
        "or LLMDeployment names must start with (spec.runtime.image, spec.server.image), e.g. "
        "nvcr.io/nvidia. These images receive the Secrets the objects reference. Empty: any image "
        "(docs/security.md: then whoever creates an LLMEngine chooses the code its Secrets reach).",
    )
    allowed_s3_endpoints: tuple[str, ...] = Field(
        default=(),
        description="S3 endpoint URLs (comma-separated) an LLMEngine's spec.storage.s3.endpoint may name; "
        "builder and serving pods send signed requests, the model and the artifact there. Empty: no "
        "custom endpoint, only AWS S3.",
    )
    allowed_prometheus_urls: tuple[str, ...] = Field(
        default=(),
        description="URL prefixes (comma-separated) an LLMDeployment's "
        "spec.autoscaling.metrics.prometheusURL may start with; the operator pod itself queries it. "
        "Empty: the prometheus metrics source is refused.",
    )
    serving_network_policy: bool = Field(
        default=True,
        description="Render a NetworkPolicy <name> for every LLMDeployment's serving pods: client ports "
        "from the namespace (and serving_client_namespaces; from anywhere for a NodePort/LoadBalancer "
        "Service), the metrics port from the operator's and the monitoring namespaces, multi-node pods "
        "from the same deployment only (docs/security.md). false: none is rendered and the ones the "
        "operator created are deleted. Enforced only by a network plugin that implements NetworkPolicy.",
    )
    serving_client_namespaces: tuple[str, ...] = Field(
        default=(),
        description="Namespaces (comma-separated) whose pods may use the serving pods' client ports besides "
        "the deployment's own namespace: a gateway, an InferencePool's endpoint picker, clients elsewhere.",
    )
    serving_monitoring_namespaces: tuple[str, ...] = Field(
        default=("monitoring",),
        description="Namespaces (comma-separated) whose pods may scrape the serving pods' metrics port "
        "(Prometheus); the operator's namespace always may.",
    )
    image_pull_policy: Literal["Always", "IfNotPresent", "Never"] = Field(
        default="IfNotPresent", description="imagePullPolicy of the builder container."
    )
    builder_shm_bytes: int = Field(
        default=16 * 2**30,
        ge=2**26,
        description="Size limit of the builder's /dev/shm (memory-backed emptyDir), bytes. NCCL and "
        "PyTorch data loaders need more than the container runtime's 64 MiB default.",
    )
    builder_run_as_non_root: bool = Field(
        default=False,
        description="Run the builder container as the Triton images' triton-server user (uid/gid 1000, "
        "fsGroup 1000, no capabilities: the restricted Pod Security Standard). Needs an artifact volume "
        "that uid or gid can write: Kubernetes applies fsGroup to most ReadWriteOnce block volumes, not "
        "to NFS, hostPath or ReadWriteMany CSI volumes with the default fsGroupPolicy (docs/security.md). "
        "false: the image's user (root), no privilege escalation, RuntimeDefault seccomp (baseline).",
    )
    builder_succeeded_job_ttl_seconds: int | None = Field(
        default=86400,
        ge=0,
        description="ttlSecondsAfterFinished the operator sets on a builder Job that completed once its "
        "artifact is recorded in the engine cache: Kubernetes' TTL-after-finished controller then deletes "
        "the Job and its pods that long after it finished (0: at once). Failed builder Jobs are never "
        "expired: while one exists its LLMEngine stays Failed instead of rebuilding a deterministic "
        "failure (delete it to retry). Unset (empty): succeeded Jobs are kept.",
    )
    builder_service_account: str | None = Field(
        default=None,
        description="serviceAccountName of builder pods (the token is never mounted); unset: namespace "
        "default.",
    )
    gpu_catalog_configmap: str | None = Field(
        default=None,
        description="Name of a ConfigMap in operator_namespace whose data entries (YAML/JSON) add GPU "
        "products to the built-in catalog.",
    )
    gpu_catalog_file: str | None = Field(
        default=None, description="Path of a YAML/JSON file adding GPU products to the built-in catalog."
    )
    hf_config_dir: str | None = Field(
        default=None,
        description="Directory of Hugging Face config.json files named <org>__<name>.json (e.g. "
        "meta-llama__Llama-3.1-8B-Instruct.json). With the model's config the operator validates "
        "parallelism against the model and fills status.plan before any build; without it the builder "
        "plans at its plan stage.",
    )
    hf_config_fetch: bool = Field(
        default=True,
        description="Fetch config.json of hf:// models from the Hugging Face Hub (huggingface_hub) when "
        "it is not in hf_config_dir, with the token the builder uses: the value of "
        "spec.model.credentialsSecretRef, read only from a Secret labelled "
        "llm.trtllm-operator.dev/usable-by-llm-resources=true (docs/security.md); no token without one.",
    )
    hf_endpoint: str | None = Field(
        default=None,
        description="Hugging Face Hub endpoint for hf_config_fetch (a mirror or a private Hub, as "
        "huggingface_hub's HF_ENDPOINT); unset: huggingface_hub's default (the HF_ENDPOINT environment "
        "variable, else https://huggingface.co). When set, builder Jobs get it as HF_ENDPOINT: the "
        "builder downloads from the Hub the plan was made from.",
    )
    pvc_storage_class: str | None = Field(
        default=None,
        description="storageClassName of PVCs the operator creates for artifacts; unset: cluster default.",
    )
    resync_seconds: float = Field(
        default=300.0,
        gt=0,
        description="Period of the drift loop that re-reconciles every LLMEngine (children changed or "
        "deleted behind the operator's back), one engine at a time spread over the period. Read at "
        "every round.",
    )
    build_progress_seconds: float = Field(
        default=15.0,
        gt=0,
        description="Period of the timer that reads build progress (stage, percent) from the last lines "
        "of each running builder pod's log into status.build (a pod without a log is retried after a "
        "minute).",
    )
    error_backoff_seconds: float = Field(
        default=15.0,
        gt=0,
        description="Delay before retrying a reconcile that failed on an API error.",
    )
    watch_server_timeout_seconds: int | None = Field(
        default=None,
        gt=0,
        description="Server-side timeout of watch requests (kopf settings.watching.server_timeout); unset: "
        "kopf default.",
    )
    listen_address: str = Field(
        default="0.0.0.0",
        description="Address the liveness and metrics endpoints listen on (127.0.0.1 keeps them local).",
    )
    liveness_port: int | None = Field(
        default=8081,
        ge=0,
        le=65535,
        description="Port of the liveness endpoint http://LISTEN_ADDRESS:PORT/healthz; unset (empty) "
        "disables it.",
    )
    metrics_port: int | None = Field(
        default=8080,
        ge=0,
        le=65535,
        description="Port of the Prometheus /metrics endpoint; unset (empty) disables it.",
    )
    metrics_auth: bool = Field(
        default=True,
        description="Serve /metrics only to clients the API server authenticates (TokenReview) and "
        "authorizes for get on the non-resource URL /metrics (SubjectAccessReview), as "
        "controller-runtime's metrics filter; needs create on tokenreviews and subjectaccessreviews "
        "(the chart grants it). false: anyone who reaches the port reads it.",
    )
    metrics_secure: bool = Field(
        default=True,
        description="Serve /metrics over HTTPS, as controller-runtime's SecureServing (kubebuilder's "
        "--metrics-secure, default true): with tls.crt and tls.key from METRICS_CERT_DIR, else a "
        "self-signed certificate made at start (scrapers skip verification and rely on the token "
        "check). false: plain HTTP.",
    )
    metrics_cert_dir: str | None = Field(
        default=None,
        description="Directory holding tls.crt and tls.key for the HTTPS /metrics (reloaded when they "
        "change); unset, or either file missing: a self-signed certificate.",
    )
    log_format: Literal["text", "json"] = Field(default="text", description="Log line format.")
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = Field(default="INFO", description="Log level.")
    field_manager: str = Field(
        default=OPERATOR, description="fieldManager name on every write the operator makes."
    )

    @field_validator(
        "namespaces",
        "allowed_image_registries",
        "allowed_s3_endpoints",
        "allowed_prometheus_urls",
        "serving_client_namespaces",
        "serving_monitoring_namespaces",
        mode="before",
    )
    @classmethod
    def _split(cls, value: Any) -> Any:
        if isinstance(value, str):
            return tuple(part.strip() for part in value.split(",") if part.strip())
        return value

    @property
    def clusterwide(self) -> bool:
        """True when no namespace list is configured."""
        return not self.namespaces

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        """Settings from ``TRTLLM_OPERATOR_*`` variables (``os.environ`` when ``environ`` is None).

        Raises :class:`SettingsError` naming the variable when a value is invalid, and when a
        ``TRTLLM_OPERATOR_*`` variable is no setting (a misspelled name would otherwise leave the
        default in force without a word), with the nearest setting's name. An empty value means
        "unset" for optional fields.
        """
        env = os.environ if environ is None else environ
        names = env_names()
        unknown = sorted(k for k in env if k.startswith(ENV_PREFIX) and k not in names + TOOLING_VARIABLES)
        if unknown:
            parts = []
            for key in unknown:
                # compared without the prefix, which every name shares
                near = difflib.get_close_matches(
                    key.removeprefix(ENV_PREFIX), [n.removeprefix(ENV_PREFIX) for n in names], n=1
                )
                hint = (
                    f"did you mean {ENV_PREFIX}{near[0]}?" if near else "docs/operator.md lists the settings"
                )
                parts.append(f"{key} is not an operator setting ({hint})")
            raise SettingsError("invalid operator settings: " + "; ".join(parts))
        raw: dict[str, Any] = {}
        for name, field in cls.model_fields.items():
            key = ENV_PREFIX + name.upper()
            if key not in env:
                continue
            value = env[key]
            if value == "" and _is_optional(field.annotation):
                raw[name] = None
            else:
                raw[name] = value
        try:
            return cls.model_validate(raw)
        except ValidationError as exc:
            raise SettingsError(_explain(exc, env_names=True)) from exc

    def with_overrides(self, **overrides: Any) -> Settings:
        """A copy with the non-None ``overrides`` applied and validated (flags over environment)."""
        data = self.model_dump()
        data.update({k: v for k, v in overrides.items() if v is not None})
        try:
            return type(self).model_validate(data)
        except ValidationError as exc:
            raise SettingsError(_explain(exc, env_names=False)) from exc


def _is_optional(annotation: Any) -> bool:
    return "None" in repr(annotation)


def _explain(exc: ValidationError, *, env_names: bool) -> str:
    parts = []
    for err in exc.errors():
        field = str(err["loc"][0]) if err["loc"] else "?"
        name = ENV_PREFIX + field.upper() if env_names else "--" + field.replace("_", "-")
        parts.append(f"{name}: {err['msg']} (got {err.get('input')!r})")
    return "invalid operator settings: " + "; ".join(parts)


_current: Settings | None = None


def configure(settings: Settings) -> None:
    """Make ``settings`` the process-wide settings returned by :func:`current`."""
    global _current  # noqa: PLW0603 - one operator per process; set once at start-up
    _current = settings


def current() -> Settings:
    """The configured settings, or :meth:`Settings.from_env` on first use."""
    global _current  # noqa: PLW0603
    if _current is None:
        _current = Settings.from_env()
    return _current


def env_names() -> tuple[str, ...]:
    """The environment variable of every setting, in the order of :class:`Settings`."""
    return tuple(ENV_PREFIX + name.upper() for name in Settings.model_fields)


def chart_settings_file() -> str:
    """``charts/trtllm-operator/files/operator-settings.json``: :func:`env_names` as a JSON list, which
    the chart reads to refuse a ``settings.extraEnv`` name that is no setting (checked current by
    tests/unit/test_engine_settings.py)."""
    return json.dumps(list(env_names()), indent=2) + "\n"


def settings_table() -> str:
    """A Markdown table of every setting: environment variable, default, description."""
    rows = ["| environment variable | default | meaning |", "| --- | --- | --- |"]
    for name, field in Settings.model_fields.items():
        default = field.default
        shown = "(unset)" if default is None or default == () else f"`{default}`"
        rows.append(f"| `{ENV_PREFIX}{name.upper()}` | {shown} | {field.description} |")
    return "\n".join(rows)
