"""The real API server rejects every manifest in tests/fixtures/invalid/ with a message naming the
offending field (OpenAPI types, enums, bounds and CEL rules of the generated CRDs)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from kubernetes import client
from kubernetes.client.rest import ApiException
from support.cluster import LocalCluster

from trtllm_operator.api import DEPLOYMENT_KIND, DEPLOYMENT_PLURAL, ENGINE_PLURAL, GROUP, VERSION

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
CORPUS = sorted((FIXTURES / "invalid").glob("*.yaml"))
PLURALS = {"LLMEngine": ENGINE_PLURAL, DEPLOYMENT_KIND: DEPLOYMENT_PLURAL}


def _create(api: client.CustomObjectsApi, namespace: str, body: dict, dry_run: bool) -> None:
    api.create_namespaced_custom_object(
        GROUP,
        VERSION,
        namespace,
        PLURALS[body["kind"]],
        body,
        dry_run="All" if dry_run else None,
        field_validation="Strict",  # as kubectl apply does: unknown fields are errors
    )


def _error(exc: ApiException) -> str:
    try:
        return str(json.loads(exc.body)["message"])
    except (TypeError, ValueError, KeyError):
        return str(exc.body)


@pytest.mark.parametrize(
    "name", ["minimal-engine", "minimal-deployment", "deployment-autoscaling-keda", "int-or-string-values"]
)
def test_minimal_manifests_are_accepted(cluster: LocalCluster, namespace: str, name: str) -> None:
    """The corpus bases are valid, so each invalid case fails only for its one defect. Quantities
    written as integers (``cpu: 8``) are admitted, as in a Pod (fresh-user trial: they were refused)."""
    for body in yaml.safe_load_all((FIXTURES / "valid" / f"{name}.yaml").read_text()):
        _create(client.CustomObjectsApi(cluster.api), namespace, body, dry_run=False)


def test_every_invalid_manifest_is_rejected_naming_the_field(cluster: LocalCluster, namespace: str) -> None:
    assert len(CORPUS) >= 160
    api = client.CustomObjectsApi(cluster.api)
    problems = []
    for path in CORPUS:
        body = yaml.safe_load(path.read_text(encoding="utf-8"))
        expects = [
            line.removeprefix("# expect: ")
            for line in path.read_text(encoding="utf-8").splitlines()
            if line.startswith("# expect: ")
        ]
        try:
            _create(api, namespace, body, dry_run=True)
        except ApiException as exc:
            message = _error(exc)
            if exc.status not in (400, 422):
                problems.append(f"{path.name}: HTTP {exc.status}: {message}")
            missing = [e for e in expects if e not in message]
            if missing:
                problems.append(f"{path.name}: message lacks {missing}: {message}")
        else:
            problems.append(f"{path.name}: accepted, expected a rejection")
    assert not problems, "\n".join(problems)


def test_kubectl_apply_reports_the_field(cluster: LocalCluster, namespace: str) -> None:
    """What a user sees: kubectl's error names the field and the fix."""
    path = FIXTURES / "invalid" / "engine-awq-block-size-without-awq.yaml"
    proc = cluster.kubectl("apply", "-n", namespace, "-f", str(path), check=False)
    assert proc.returncode != 0
    assert "spec.quantization.awqBlockSize" in proc.stderr
    assert "only valid with format int4_awq or w4a8_awq" in proc.stderr
