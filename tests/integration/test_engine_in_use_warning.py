"""The chart's ValidatingAdmissionPolicy warns when an LLMEngine that LLMDeployments serve is deleted.

A fresh-user trial deleted an LLMEngine its LLMDeployment used: ``kubectl delete`` succeeded without a
word, and only the deployment's status said ``EngineNotFound`` afterwards. The policy
(charts/trtllm-operator/templates/engine-in-use-warning.yaml) reads the engine's own
``status.usedBy`` — a ValidatingAdmissionPolicy cannot look up other objects — and with
``validationActions: [Warn]`` the API server returns its message as a Warning header (kubectl prints
it) while the deletion goes on (kubernetes v1.34 docs, "Validating Admission Policy"). Checked on the
real kube-apiserver v1.34.4 of the local control plane: the CEL (``join`` included) compiles there.
"""

from __future__ import annotations

from pathlib import Path

from support.api import Api
from support.cluster import LocalCluster
from support.manifests import a_cached_engine
from support.wait import wait_for

from trtllm_operator.api import ENGINE_PLURAL, GROUP, VERSION

CHART = Path(__file__).resolve().parents[2] / "charts" / "trtllm-operator"
TEMPLATE = "templates/engine-in-use-warning.yaml"


def test_deleting_a_served_engine_warns_and_deletes(cluster: LocalCluster, api: Api) -> None:
    rendered = cluster.helm(
        "template", "rel", str(CHART), "-n", api.ns, "--kube-version", "1.34.4",
        "--set", f"watchNamespaces={{{api.ns}}}", "--show-only", TEMPLATE,
    ).stdout  # fmt: skip
    cluster.kubectl("apply", "-f", "-", input=rendered)
    try:
        for name, users in (("served", ["chat", "batch"]), ("idle", [])):
            api.create(a_cached_engine(name))
            if users:
                api.custom.patch_namespaced_custom_object_status(
                    GROUP, VERSION, api.ns, ENGINE_PLURAL, name, {"status": {"usedBy": users}}
                )

        def warned() -> str:
            # A server-side dry run passes admission as the deletion will: wait until the policy is live.
            dry = cluster.kubectl("delete", "llmengine", "served", "-n", api.ns, "--dry-run=server")
            return dry.stderr

        warning = wait_for(lambda: "Warning:" in (w := warned()) and w, timeout=60, desc="the policy warns")
        assert "LLMEngine served is served by LLMDeployment(s) chat, batch" in warning, warning
        assert "applied again" in warning and "EngineNotFound" in warning

        deleted = cluster.kubectl("delete", "llmengine", "served", "-n", api.ns, "--wait=false")
        assert "is served by LLMDeployment(s) chat, batch" in deleted.stderr, deleted.stderr
        assert 'llmengine.llm.trtllm-operator.dev "served" deleted' in deleted.stdout  # a warning only
        quiet = cluster.kubectl("delete", "llmengine", "idle", "-n", api.ns, "--wait=false")
        assert "Warning" not in quiet.stderr, quiet.stderr
    finally:
        cluster.kubectl("delete", "-f", "-", "--ignore-not-found", input=rendered)  # cluster scoped
