"""What the operator's admin lets an LLMEngine or LLMDeployment do. Pure.

Creating these objects makes the operator create pods on the user's behalf, with the user's
choices in them. Four of those choices reach further than the user's own rights might, so the
admin bounds them (operator settings; docs/security.md):

* **images** — ``spec.runtime.image`` (builder and server) and ``spec.server.image`` run with the
  Secrets the object references: with ``allowed_image_registries`` set, each must start with one
  of its entries (:func:`image_refusal`);
* **Secrets** — a ``credentialsSecretRef`` names a Secret of the namespace that is put into a pod
  the user shapes; it must carry :data:`~trtllm_operator.api.wire.LABEL_SECRET_USABLE` ``"true"``,
  set by whoever controls the Secret (:func:`secret_refusal`);
* **S3 endpoints** — ``spec.storage.s3.endpoint`` receives signed requests, the model and the
  artifact; it must be one of ``allowed_s3_endpoints`` (:func:`endpoint_refusal`);
* **Prometheus URLs** — ``spec.autoscaling.metrics.prometheusURL`` is fetched by the operator pod
  itself; it must start with one of ``allowed_prometheus_urls`` (:func:`url_refusal`).

Each check returns a :class:`Refusal` naming the field, the value, why, and the fix, or None.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from trtllm_operator.api.engine import LLMEngineSpec
from trtllm_operator.api.wire import LABEL_SECRET_USABLE, SECRET_USABLE_VALUE
from trtllm_operator.decide.outcome import retry_note

R_IMAGE_NOT_ALLOWED = "ImageNotAllowed"
R_SECRET_NOT_ALLOWED = "SecretNotAllowed"
R_ENDPOINT_NOT_ALLOWED = "EndpointNotAllowed"
R_URL_NOT_ALLOWED = "URLNotAllowed"

#: Docker Hub, where an image reference without a registry host resolves
#: (distribution/reference ``normalize.go``: ``defaultDomain``, ``officialRepoPrefix``).
DOCKER_HUB = "docker.io"


@dataclass(frozen=True)
class Refusal:
    """``field`` (API path), ``reason`` (CamelCase) and ``message`` (value, why, fix)."""

    field: str
    reason: str
    message: str


def refusal_text(refusal: Refusal, kind: str, retry_seconds: float) -> str:
    """``refusal``'s message for the ``kind`` object's conditions. A Secret refusal waits on the
    Secret (created or labelled), which the operator does not watch: it says when the object is
    looked at again (``retry_seconds``: the period of that controller's drift loop). The others
    clear by editing the object itself, at once."""
    if refusal.reason == R_SECRET_NOT_ALLOWED:
        return f"{refusal.message}; {retry_note(kind, retry_seconds)}"
    return refusal.message


def normalize_image(image: str) -> str:
    """``image`` with its registry host made explicit, as container runtimes resolve it
    (distribution/reference ``ParseNormalizedNamed``): ``ubuntu`` → ``docker.io/library/ubuntu``,
    ``org/app:1`` → ``docker.io/org/app:1``; a first component with ``.`` or ``:`` or
    ``localhost`` is a host and stays."""
    first, sep, _ = image.partition("/")
    if sep and ("." in first or ":" in first or first == "localhost"):
        return image
    if not sep:
        return f"{DOCKER_HUB}/library/{image}"
    return f"{DOCKER_HUB}/{image}"


def image_allowed(image: str, registries: Iterable[str]) -> bool:
    """Whether ``image`` starts with one of ``registries`` (``host`` or ``host/path`` prefixes) at a
    component boundary: ``nvcr.io/nvidia`` allows ``nvcr.io/nvidia/tritonserver:26.03-…`` but not
    ``nvcr.io/nvidia-evil/x``. An empty ``registries`` allows every image."""
    entries = [normalize_image(r.strip().rstrip("/")) for r in registries if r.strip()]
    if not entries:
        return True
    ref = normalize_image(image)
    return any(ref == e or (ref.startswith(e) and ref[len(e)] in "/:@") for e in entries)


def image_refusal(field: str, image: str | None, registries: Iterable[str]) -> Refusal | None:
    """A refusal when ``image`` is set and outside ``registries`` (see :func:`image_allowed`)."""
    registries = tuple(registries)
    if not image or image_allowed(image, registries):
        return None
    return Refusal(
        field,
        R_IMAGE_NOT_ALLOWED,
        f"image {image!r} is not from a registry the operator's admin allows ({', '.join(registries)}): "
        "use an image from one of them, or ask the admin to add its registry (operator setting "
        "allowedImageRegistries)",
    )


def secret_refusal(
    field: str, name: str, namespace: str, metadata: Mapping[str, Any] | None
) -> Refusal | None:
    """A refusal unless the Secret (its ``metadata``, None when absent) carries the opt-in label."""
    label = f"{LABEL_SECRET_USABLE}={SECRET_USABLE_VALUE}"
    if metadata is None:
        return Refusal(
            field,
            R_SECRET_NOT_ALLOWED,
            f"Secret {namespace}/{name} does not exist: create it (labelled {label}) or fix the name",
        )
    if (metadata.get("labels") or {}).get(LABEL_SECRET_USABLE) != SECRET_USABLE_VALUE:
        return Refusal(
            field,
            R_SECRET_NOT_ALLOWED,
            f"Secret {namespace}/{name} is not marked for use by LLM resources: whoever controls it may "
            f"label it {label} (kubectl label secret {name} -n {namespace} {label}), which lets anyone "
            "who can create LLMEngines or LLMDeployments in this namespace put it into a builder or "
            "serving pod",
        )
    return None


def _endpoint_key(url: str) -> str:
    parts = urllib.parse.urlsplit(url.strip())
    return urllib.parse.urlunsplit(
        (parts.scheme.lower(), parts.netloc.lower(), parts.path.rstrip("/"), "", "")
    )


def endpoint_refusal(field: str, endpoint: str | None, allowed: Iterable[str]) -> Refusal | None:
    """A refusal when ``endpoint`` is set and is not one of ``allowed`` (scheme, host, port and
    path compared; an empty ``allowed`` allows only the default AWS endpoint, i.e. no endpoint)."""
    if not endpoint:
        return None
    allowed = tuple(allowed)
    if _endpoint_key(endpoint) in {_endpoint_key(a) for a in allowed}:
        return None
    listed = ", ".join(allowed) if allowed else "none: only AWS S3 (leave endpoint unset)"
    return Refusal(
        field,
        R_ENDPOINT_NOT_ALLOWED,
        f"S3 endpoint {endpoint!r} is not allowed by the operator's admin (allowed: {listed}); "
        "use an allowed endpoint or ask the admin to add it (operator setting allowedS3Endpoints)",
    )


def url_refusal(field: str, url: str | None, allowed_prefixes: Iterable[str]) -> Refusal | None:
    """A refusal when ``url`` is set and starts with none of ``allowed_prefixes`` (compared after
    lower-casing scheme and host; an entry must end at a path boundary). Empty: every URL refused."""
    if not url:
        return None
    allowed = tuple(p for p in allowed_prefixes if p.strip())
    key = _endpoint_key(url)
    for prefix in allowed:
        p = _endpoint_key(prefix)
        if key == p or key.startswith(p.rstrip("/") + "/"):
            return None
    listed = ", ".join(allowed) if allowed else "none"
    return Refusal(
        field,
        R_URL_NOT_ALLOWED,
        f"{url!r} is not a URL the operator's admin allows it to fetch (allowed prefixes: {listed}); "
        "use an allowed Prometheus URL or ask the admin to add it (operator setting "
        "allowedPrometheusURLs)",
    )


def secret_references(spec: LLMEngineSpec) -> list[tuple[str, str]]:
    """``(field, Secret name)`` of every Secret an LLMEngine puts into a pod (builder, serving)."""
    refs: list[tuple[str, str]] = []
    if spec.model.credentials_secret_ref is not None and not spec.model.source.startswith("pvc://"):
        refs.append(("spec.model.credentialsSecretRef.name", spec.model.credentials_secret_ref.name))
    s3 = spec.storage.s3
    if s3 is not None and s3.credentials_secret_ref is not None:
        refs.append(("spec.storage.s3.credentialsSecretRef.name", s3.credentials_secret_ref.name))
    return refs


def engine_refusal(
    spec: LLMEngineSpec,
    namespace: str,
    *,
    secrets: Mapping[str, Mapping[str, Any] | None],
    allowed_image_registries: Iterable[str] = (),
    allowed_s3_endpoints: Iterable[str] = (),
) -> Refusal | None:
    """The first thing an LLMEngine asks for that the admin does not allow, or None.

    ``secrets``: metadata of each Secret :func:`secret_references` names (None when absent).
    """
    refusal = image_refusal("spec.runtime.image", spec.runtime.image, allowed_image_registries)
    if refusal is not None:
        return refusal
    if spec.storage.s3 is not None:
        refusal = endpoint_refusal("spec.storage.s3.endpoint", spec.storage.s3.endpoint, allowed_s3_endpoints)
        if refusal is not None:
            return refusal
    for field, name in secret_references(spec):
        refusal = secret_refusal(field, name, namespace, secrets.get(name))
        if refusal is not None:
            return refusal
    return None


def serving_refusal(
    server_image: str | None,
    engine_spec: LLMEngineSpec,
    namespace: str,
    *,
    secrets: Mapping[str, Mapping[str, Any] | None],
    allowed_image_registries: Iterable[str] = (),
    allowed_s3_endpoints: Iterable[str] = (),
) -> Refusal | None:
    """The first thing serving an LLMDeployment would do that the admin does not allow, or None:
    its ``spec.server.image`` outside the registries, and — because serving pods of an S3 artifact
    receive the engine's storage Secret and talk to its endpoint — the same checks as the engine's
    for those (re-checked here: a label or a setting may have changed since the engine was built).
    """
    refusal = image_refusal("spec.server.image", server_image, allowed_image_registries)
    if refusal is not None:
        return refusal
    s3 = engine_spec.storage.s3
    if s3 is None:
        return None
    field = "spec.engineRef (the engine's spec.storage.s3"
    refusal = endpoint_refusal(f"{field}.endpoint)", s3.endpoint, allowed_s3_endpoints)
    if refusal is None and s3.credentials_secret_ref is not None:
        name = s3.credentials_secret_ref.name
        refusal = secret_refusal(f"{field}.credentialsSecretRef)", name, namespace, secrets.get(name))
    return refusal
