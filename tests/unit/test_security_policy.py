"""Pure security decisions: which children the operator may touch, what the admin allows.

Table-driven tests of :mod:`trtllm_operator.decide.ownership` and :mod:`trtllm_operator.decide.policy`.
Image references are normalised as distribution/reference ``ParseNormalizedNamed`` does
(``docker.io/library/`` for official images), which the table spells out case by case.
"""

from __future__ import annotations

from typing import Any

import pytest

from trtllm_operator.api.engine import LLMEngineSpec
from trtllm_operator.api.wire import LABEL_SECRET_USABLE
from trtllm_operator.decide.ownership import ChildConflict, control_conflict, marker_conflict
from trtllm_operator.decide.policy import (
    R_ENDPOINT_NOT_ALLOWED,
    R_IMAGE_NOT_ALLOWED,
    R_SECRET_NOT_ALLOWED,
    engine_refusal,
    image_allowed,
    normalize_image,
    refusal_text,
    secret_refusal,
    serving_refusal,
    url_refusal,
)


def obj(*refs: dict[str, Any], labels: dict[str, str] | None = None, **meta: Any) -> dict[str, Any]:
    return {"metadata": {"name": "chat", "ownerReferences": list(refs), "labels": labels or {}, **meta}}


def ref(uid: str, controller: bool = True, kind: str = "LLMDeployment", name: str = "chat") -> dict[str, Any]:
    return {
        "apiVersion": "llm.trtllm-operator.dev/v1alpha1",
        "kind": kind,
        "name": name,
        "uid": uid,
        "controller": controller,
    }


@pytest.mark.parametrize(
    ("live", "conflict_contains"),
    [
        (obj(ref("u1")), None),
        (obj(), "has no controller ownerReference"),
        (obj(ref("u1", controller=False)), "has no controller ownerReference"),  # owner, not controller
        (obj(ref("u2")), "is controlled by LLMDeployment chat (uid u2)"),
        (obj(ref("u2", kind="ReplicaSet", name="rs")), "is controlled by ReplicaSet rs"),
        (obj(ref("u2"), deletionTimestamp="2026-01-01T00:00:00Z"), "resolves itself once it is gone"),
    ],
)
def test_only_children_controlled_by_the_parent_are_modified(
    live: dict[str, Any], conflict_contains: str | None
) -> None:
    conflict = control_conflict(live, "Deployment", "u1")
    if conflict_contains is None:
        assert conflict is None
    else:
        assert conflict is not None and conflict_contains in conflict.why
        assert conflict.kind == "Deployment" and conflict.name == "chat"


def test_conflict_message_names_object_reason_and_fix() -> None:
    message = ChildConflict("Service", "chat", "has no controller ownerReference").message("LLMDeployment")
    assert message.startswith("Service chat already exists and has no controller ownerReference")
    assert "does not modify, adopt or trust it" in message
    assert "Delete or rename that Service, or give this LLMDeployment another name" in message


def test_conflict_and_secret_refusals_say_when_they_are_tried_again() -> None:
    # Fresh-user trial 46 T8: after following the fix (delete the clash, label the Secret) nothing said
    # when the operator would look again; it is the object's next change or its drift loop's period.
    conflict = ChildConflict("Deployment", "clash", "has no controller ownerReference")
    assert conflict.message("LLMDeployment", 30.0).endswith(
        "; tried again on the next change of this LLMDeployment or within 30 s"
    )
    unmarked = secret_refusal("spec.model.credentialsSecretRef.name", "hf", "team-a", {"name": "hf"})
    assert unmarked is not None
    text = refusal_text(unmarked, "LLMEngine", 300.0)
    assert text.startswith(unmarked.message)
    assert text.endswith("; tried again on the next change of this LLMEngine or within 300 s")
    # a refusal fixed by editing the object itself is retried at once: no note
    image = engine_refusal(_engine_spec(), "ns", secrets={}, allowed_image_registries=("registry.example",))
    assert image is not None and refusal_text(image, "LLMEngine", 300.0) == image.message


def test_records_are_trusted_only_with_every_marker() -> None:
    labels = {"app.kubernetes.io/managed-by": "trtllm-operator", "c": "artifact"}
    ok = {"metadata": {"name": "e", "labels": dict(labels), "annotations": {"key": "abc"}}}
    assert marker_conflict(ok, "ConfigMap", labels=labels, annotations={"key": "abc"}) is None
    forged = {"metadata": {"name": "e", "labels": dict(labels), "annotations": {"key": "other"}}}
    conflict = marker_conflict(forged, "ConfigMap", labels=labels, annotations={"key": "abc"})
    assert (
        conflict is not None and conflict.why == "lacks the annotation key=abc the operator puts on its own"
    )
    unlabelled = {"metadata": {"name": "e"}}
    conflict = marker_conflict(unlabelled, "ConfigMap", labels=labels)
    assert conflict is not None and "app.kubernetes.io/managed-by=trtllm-operator" in conflict.why


@pytest.mark.parametrize(
    ("image", "normalized"),
    [
        ("ubuntu", "docker.io/library/ubuntu"),
        ("ubuntu:24.04", "docker.io/library/ubuntu:24.04"),
        ("org/app:1", "docker.io/org/app:1"),
        (
            "nvcr.io/nvidia/tritonserver:26.03-trtllm-python-py3",
            "nvcr.io/nvidia/tritonserver:26.03-trtllm-python-py3",
        ),
        ("localhost/app", "localhost/app"),
        ("registry:5000/app", "registry:5000/app"),
    ],
)
def test_image_references_are_normalised_like_container_runtimes(image: str, normalized: str) -> None:
    assert normalize_image(image) == normalized


@pytest.mark.parametrize(
    ("image", "allowed"),
    [
        ("nvcr.io/nvidia/tritonserver:26.03-trtllm-python-py3", True),
        ("nvcr.io/nvidia/tritonserver@sha256:" + "a" * 64, True),
        ("nvcr.io/nvidia-evil/tritonserver:1", False),  # a prefix must end at a path boundary
        ("nvcr.io/nvidiax:1", False),
        ("evil.example/nvcr.io/nvidia/tritonserver:1", False),
        ("nvidia/tritonserver:1", False),  # docker.io/nvidia/…, not nvcr.io
        ("registry.example/team/builder:1", True),
    ],
)
def test_image_allowlist_matches_at_component_boundaries(image: str, allowed: bool) -> None:
    assert image_allowed(image, ("nvcr.io/nvidia", "registry.example/team/")) is allowed


def test_empty_image_allowlist_allows_any_image() -> None:
    assert image_allowed("anything/at:all", ())


def test_secret_must_exist_and_carry_the_opt_in_label() -> None:
    field = "spec.model.credentialsSecretRef.name"
    missing = secret_refusal(field, "hf", "team-a", None)
    assert (
        missing is not None and missing.reason == R_SECRET_NOT_ALLOWED and "does not exist" in missing.message
    )
    unmarked = secret_refusal(field, "hf", "team-a", {"name": "hf", "labels": {LABEL_SECRET_USABLE: "yes"}})
    assert unmarked is not None and unmarked.field == field
    assert f"kubectl label secret hf -n team-a {LABEL_SECRET_USABLE}=true" in unmarked.message
    assert secret_refusal(field, "hf", "team-a", {"labels": {LABEL_SECRET_USABLE: "true"}}) is None


@pytest.mark.parametrize(
    ("endpoint", "refused"),
    [
        (None, False),
        ("http://minio.storage:9000", False),
        ("http://MINIO.storage:9000/", False),
        ("http://minio.storage:9001", True),
        ("https://minio.storage:9000", True),
        ("http://169.254.169.254", True),
    ],
)
def test_s3_endpoints_must_be_on_the_allowlist(endpoint: str | None, refused: bool) -> None:
    spec = _engine_spec(storage={"s3": {"bucket": "engines", **({"endpoint": endpoint} if endpoint else {})}})
    marked = {"hf": {"labels": {LABEL_SECRET_USABLE: "true"}}}
    refusal = engine_refusal(spec, "ns", secrets=marked, allowed_s3_endpoints=("http://minio.storage:9000",))
    assert (refusal is not None) is refused
    if refusal is not None:
        assert refusal.reason == R_ENDPOINT_NOT_ALLOWED and refusal.field == "spec.storage.s3.endpoint"


def test_no_endpoint_allowlist_means_aws_only() -> None:
    spec = _engine_spec(storage={"s3": {"bucket": "engines", "endpoint": "http://minio:9000"}})
    refusal = engine_refusal(spec, "ns", secrets={})
    assert refusal is not None and "only AWS S3" in refusal.message


@pytest.mark.parametrize(
    ("url", "refused"),
    [
        ("http://prometheus.monitoring.svc:9090", False),
        ("http://prometheus.monitoring.svc:9090/", False),
        ("http://prometheus.monitoring.svc:9090/api", False),
        ("http://prometheus.monitoring.svc:90901", True),
        ("http://prometheus.monitoring.svc.evil:9090", True),
        ("http://169.254.169.254/latest/meta-data", True),
    ],
)
def test_prometheus_urls_must_start_with_an_allowed_prefix(url: str, refused: bool) -> None:
    field = "spec.autoscaling.metrics.prometheusURL"
    refusal = url_refusal(field, url, ("http://prometheus.monitoring.svc:9090",))
    assert (refusal is not None) is refused


def test_no_prometheus_allowlist_refuses_every_url() -> None:
    refusal = url_refusal("f", "http://prometheus:9090", ())
    assert refusal is not None and "allowed prefixes: none" in refusal.message


def _engine_spec(**overrides: Any) -> LLMEngineSpec:
    spec: dict[str, Any] = {
        "model": {"source": "hf://org/model", "credentialsSecretRef": {"name": "hf", "key": "token"}},
        "runtime": {"image": "nvcr.io/nvidia/tritonserver:26.03-trtllm-python-py3"},
        "gpu": {"product": "NVIDIA-H100-80GB-HBM3"},
        "storage": {"pvc": {"claimName": "engines"}},
    }
    spec.update(overrides)
    return LLMEngineSpec.model_validate(spec)


def test_engine_refusal_checks_image_then_endpoint_then_every_secret() -> None:
    marked = {"labels": {LABEL_SECRET_USABLE: "true"}}
    spec = _engine_spec(
        storage={
            "s3": {"bucket": "engines", "credentialsSecretRef": {"name": "s3", "key": "AWS_ACCESS_KEY_ID"}}
        }
    )
    assert engine_refusal(spec, "ns", secrets={"hf": marked, "s3": marked}) is None
    refusal = engine_refusal(spec, "ns", secrets={"hf": marked, "s3": None})
    assert refusal is not None and refusal.field == "spec.storage.s3.credentialsSecretRef.name"
    refusal = engine_refusal(spec, "ns", secrets={}, allowed_image_registries=("registry.example",))
    assert (
        refusal is not None
        and refusal.reason == R_IMAGE_NOT_ALLOWED
        and refusal.field == "spec.runtime.image"
    )


def test_serving_refusal_checks_the_server_image_and_the_engines_s3_secret() -> None:
    spec = _engine_spec(
        storage={
            "s3": {"bucket": "engines", "credentialsSecretRef": {"name": "s3", "key": "AWS_ACCESS_KEY_ID"}}
        }
    )
    refusal = serving_refusal(
        "evil.example/x:1", spec, "ns", secrets={}, allowed_image_registries=("nvcr.io",)
    )
    assert refusal is not None and refusal.field == "spec.server.image"
    refusal = serving_refusal(None, spec, "ns", secrets={"s3": {"labels": {}}})
    assert refusal is not None and refusal.reason == R_SECRET_NOT_ALLOWED
    assert (
        serving_refusal(None, spec, "ns", secrets={"s3": {"labels": {LABEL_SECRET_USABLE: "true"}}}) is None
    )
