"""``trtllm-operator render`` output applies to a real API server (fresh-user trial, issue 25).

Each example with an LLMDeployment is rendered as a user renders a manifest from git (no
``metadata.uid``) and sent through ``kubectl apply --dry-run=server``: the real kube-apiserver of the
integration cluster validates and admits every object (schema, strict field validation, defaulting,
admission), then persists nothing. Kinds whose CRD the cluster lacks (InferencePool, LeaderWorkerSet
when not installed) are left out of the apply and named in the skip list; the built-in kinds are all
applied.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from support.cluster import LocalCluster

from trtllm_operator.cli import main

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = sorted(
    p.name for p in (REPO / "examples").glob("*.yaml") if "kind: LLMDeployment" in p.read_text()
)
BUILT_IN = {"ConfigMap", "Deployment", "Service", "PodDisruptionBudget", "NetworkPolicy"}


def served_kinds(cluster: LocalCluster) -> set[str]:
    """The kinds the API server serves (the last column of ``kubectl api-resources``)."""
    kinds = cluster.kubectl("api-resources", "--no-headers").stdout
    return {line.split()[-1] for line in kinds.splitlines() if line.strip()}


@pytest.mark.parametrize("example", EXAMPLES)
def test_rendered_children_pass_a_server_side_dry_run(
    example: str, cluster: LocalCluster, namespace: str, capsys: pytest.CaptureFixture[str]
) -> None:
    flags = ["--lws"] if "multiNode: true" in (REPO / "examples" / example).read_text() else []
    assert main(["render", "-f", str(REPO / "examples" / example), "-n", namespace, *flags]) == 0
    out = capsys.readouterr().out
    docs = [d for d in yaml.safe_load_all(out) if d]
    kinds = served_kinds(cluster)
    applied = [d for d in docs if d["kind"] in kinds]
    assert {d["kind"] for d in applied} >= {"ConfigMap", "Service", "PodDisruptionBudget"}
    assert {d["kind"] for d in docs if d["kind"] not in kinds} <= {"InferencePool", "LeaderWorkerSet"}
    proc = cluster.kubectl(
        "apply", "--dry-run=server", "-f", "-", input=yaml.safe_dump_all(applied), check=False
    )
    assert proc.returncode == 0, proc.stderr
    # one "<kind>[.<group>]/<name> created (server dry run)" line per object
    lines = [line for line in proc.stdout.splitlines() if line.endswith("(server dry run)")]
    assert len(lines) == len(applied), proc.stdout
    for doc in applied:
        kind, name = doc["kind"].lower(), doc["metadata"]["name"]
        assert any(line.startswith(kind) and f"/{name} created" in line for line in lines), (kind, name)


def test_an_owner_reference_without_uid_is_what_the_server_refused(
    cluster: LocalCluster, namespace: str
) -> None:
    """Why render leaves ownerReferences out for a manifest without uid: the API server refuses an
    empty one (the check above is not vacuous)."""
    cm = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": "owned",
            "namespace": namespace,
            "ownerReferences": [
                {
                    "apiVersion": "llm.trtllm-operator.dev/v1alpha1",
                    "kind": "LLMDeployment",
                    "name": "x",
                    "uid": "",
                }
            ],
        },
    }
    proc = cluster.kubectl("apply", "--dry-run=server", "-f", "-", input=yaml.safe_dump(cm), check=False)
    assert proc.returncode != 0 and "uid" in proc.stderr, proc.stderr


def test_a_kubectl_list_with_int_or_string_values_renders_children_the_server_admits(
    cluster: LocalCluster, namespace: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The fresh-user trial's inputs together: a ``kind: List`` on stdin (what ``kubectl get -o yaml``
    prints), ``rollout.maxSurge: "25%"`` and unquoted ``cpu: 4``. The API server admits the
    LLMEngine and LLMDeployment as written, and the rendered children (the Deployment's percentage
    surge, the container's quantity) pass its server-side dry run."""
    import io  # noqa: PLC0415

    docs = list(yaml.safe_load_all((REPO / "examples" / "llama-3.1-8b-fp8-h100.yaml").read_text()))
    dep = next(d for d in docs if d["kind"] == "LLMDeployment")
    dep["spec"]["rollout"] = {"maxSurge": "25%", "maxUnavailable": 0}
    dep["spec"].setdefault("server", {})["resources"] = {"cpu": 4, "memory": 34359738368}
    listed = {"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""}, "items": docs}
    proc = cluster.kubectl(
        "apply", "--dry-run=server", "-n", namespace, "-f", "-", input=yaml.safe_dump(listed), check=False
    )
    assert proc.returncode == 0, proc.stderr  # kubectl expands the List; the CRDs take both forms
    monkeypatch.setattr("sys.stdin", io.StringIO(yaml.safe_dump(listed)))
    assert main(["render", "-f", "-", "-n", namespace]) == 0
    out = [d for d in yaml.safe_load_all(capsys.readouterr().out) if d]
    (workload,) = [d for d in out if d["kind"] == "Deployment"]
    assert workload["spec"]["strategy"]["rollingUpdate"]["maxSurge"] == "25%"
    applied = [d for d in out if d["kind"] in BUILT_IN]
    proc = cluster.kubectl(
        "apply", "--dry-run=server", "-f", "-", input=yaml.safe_dump_all(applied), check=False
    )
    assert proc.returncode == 0, proc.stderr
