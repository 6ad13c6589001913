"""The local cluster's kwok stages (hack/kwok/): a serving pod annotated
``kwok.trtllm-operator.dev/ready: probe`` starts Running but not Ready, and the demo's serving pods
carry that annotation, so the operator never sees a pod Ready before its server answers (fresh-user
trial 42 F5: kwok set tiny-chat's new pods Ready ~3 s before the pod runner started tritonserver, and
the operator posted AllReplicasReady). The selectors are jq expressions evaluated by kwok; this test
reads them as text (kwok v0.8.0 Stage API: spec.selector.matchExpressions are ANDed)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
READY_ANNOTATION = "kwok.trtllm-operator.dev/ready"
PENDING = {"key": ".status.phase", "operator": "In", "values": ["Pending"]}


def pending_pod_stages() -> list[dict[str, Any]]:
    """The stages that take a Pending pod to Running (every file of hack/kwok/)."""
    stages = [
        doc
        for path in sorted((ROOT / "hack" / "kwok").glob("*.yaml"))
        for doc in yaml.safe_load_all(path.read_text(encoding="utf-8"))
        if doc and doc.get("kind") == "Stage" and doc["spec"]["resourceRef"]["kind"] == "Pod"
    ]
    return [
        s
        for s in stages
        if {"key": ".status.phase", "operator": "In", "values": ["Pending"]}
        in s["spec"]["selector"]["matchExpressions"]
        and "phase: Running" in s["spec"]["next"].get("statusTemplate", "")
    ]


def ready_rule(stage: dict[str, Any]) -> tuple[str, list[str]]:
    (rule,) = [e for e in stage["spec"]["selector"]["matchExpressions"] if READY_ANNOTATION in e["key"]]
    return rule["operator"], rule["values"]


def condition_status(template: str, type_: str) -> str:
    """The status the stage's template writes for condition ``type_``."""
    found = re.search(rf'status: "(True|False)"\n(?:\s+\w+: .*\n)*?\s+type: {type_}\n', template)
    assert found is not None, f"no {type_} condition in the template"
    return found.group(1)


def test_a_pod_annotated_ready_probe_starts_running_and_unready() -> None:
    stages = pending_pod_stages()
    rules = {s["metadata"]["name"]: ready_rule(s) for s in stages}
    # disjoint: the annotation's value 'probe' selects exactly one stage, every other value the others
    assert sorted(rules.values()) == [("In", ["probe"]), ("NotIn", ["probe"])], rules
    for stage in stages:
        template = stage["spec"]["next"]["statusTemplate"]
        ready = "False" if ready_rule(stage)[0] == "In" else "True"
        assert condition_status(template, "Ready") == ready, stage["metadata"]["name"]
        assert condition_status(template, "ContainersReady") == ready, stage["metadata"]["name"]


def test_the_demos_serving_pods_wait_for_the_pod_runners_readiness_check() -> None:
    manifest = yaml.safe_load((ROOT / "examples" / "demo" / "tiny-chat.yaml").read_text(encoding="utf-8"))
    assert manifest["spec"]["podAnnotations"][READY_ANNOTATION] == "probe"
