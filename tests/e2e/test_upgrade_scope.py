"""Upgrade of a release that watches every namespace: refused until the user chooses its scope.

A release whose chart watched every namespace by default (:data:`CLUSTER_WIDE_DEFAULT_RELEASE`; only
its chart, no operator runs here), installed with no values, runs the operator with
``--all-namespaces``; this tree's chart is namespaced by default (``clusterWide: false``, issue 24).
charts/trtllm-operator/templates/deployment.yaml reads the running operator Deployment with Helm's
``lookup`` on upgrade and fails naming ``clusterWide`` and ``watchNamespaces`` when it finds
``--all-namespaces`` and neither is set (docs/install.md, "Upgrade").

``lookup`` reads the live cluster only on a real install/upgrade or with ``--dry-run=server``;
under ``helm template`` and a client ``--dry-run`` it returns an empty value (Helm docs, "Using the
lookup function": "Keep in mind that Helm is not supposed to contact the Kubernetes API Server
during a helm template|install|upgrade|delete|rollback --dry-run operation. To test lookup against a
running cluster, ... --dry-run=server should be used instead" — helm/helm-www
content/en/docs/chart_template_guide/functions_and_pipelines.md @ 180dccac; "When no object is
found, an empty value is returned"). So the refusal is tested here against a real API server with
real ``helm upgrade`` runs; the render-only paths are shown not to see it.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from e2e_harness import CHART, release_chart
from kubernetes import client
from support.cluster import LocalCluster

pytestmark = pytest.mark.slow

#: A release (commit of main) whose chart ran the operator with ``--all-namespaces`` when
#: ``watchNamespaces`` was empty: the upgrade test's previous release when this test was written
#: (support/releases.py, KEY_MIGRATION). Pinned, not PREVIOUS_RELEASE: users may skip releases, so the
#: refusal must hold for an upgrade from it after PREVIOUS_RELEASE moved on to a namespaced-default chart.
CLUSTER_WIDE_DEFAULT_RELEASE = "3898a0c46fe698e6dbcf90e262af8ba5b29d827a"
RELEASE = "scope"
OPERATOR = f"{RELEASE}-trtllm-operator"  # the charts' fullname (both releases' _helpers.tpl)


@pytest.fixture(scope="module")
def previous_chart(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return release_chart(CLUSTER_WIDE_DEFAULT_RELEASE, tmp_path_factory.mktemp("previous"))


@pytest.fixture
def cluster_wide_release(cluster: LocalCluster, previous_chart: Path) -> Iterator[str]:
    """The previous release's chart installed with no values (its default: every namespace) into a
    namespace of its own; yields the namespace."""
    ns = cluster.create_namespace("scope")
    try:
        cluster.helm("install", RELEASE, str(previous_chart), "--namespace", ns, timeout=120)
        yield ns
    finally:
        cluster.helm("uninstall", RELEASE, "--namespace", ns, "--timeout", "60s", check=False, timeout=90)
        cluster.delete_namespace(ns)


def operator_args(cluster: LocalCluster, ns: str) -> list[str]:
    """The args of the operator container as the API server stores them."""
    deployment = client.AppsV1Api(cluster.api).read_namespaced_deployment(OPERATOR, ns)
    (container,) = deployment.spec.template.spec.containers
    return list(container.args)


def revision(cluster: LocalCluster, ns: str) -> int:
    status = yaml.safe_load(cluster.helm("status", RELEASE, "--namespace", ns, "-o", "yaml").stdout)
    return int(status["version"])


def refused_naming_both_choices(proc: subprocess.CompletedProcess[str]) -> bool:
    """helm failed with the chart's message: why (``--all-namespaces``) and both fixes."""
    return (
        proc.returncode != 0
        and "--all-namespaces" in proc.stderr
        and "--set clusterWide=true" in proc.stderr
        and "--set 'watchNamespaces={a,b}'" in proc.stderr
    )


def test_upgrade_of_a_release_watching_every_namespace_is_refused_until_its_scope_is_chosen(
    cluster: LocalCluster, cluster_wide_release: str
) -> None:
    ns = cluster_wide_release
    # the premise: the previous chart's default really runs the operator on every namespace
    before = operator_args(cluster, ns)
    assert "--all-namespaces" in before and not any(a.startswith("--namespace=") for a in before), before
    assert revision(cluster, ns) == 1

    # default values (the install gave none, so Helm has none to carry over): refused, nothing changed
    plain = cluster.helm("upgrade", RELEASE, str(CHART), "--namespace", ns, check=False, timeout=120)
    assert refused_naming_both_choices(plain), plain.stdout + plain.stderr
    assert revision(cluster, ns) == 1
    assert operator_args(cluster, ns) == before
    # a server-side dry run reads the live Deployment too: the refusal can be previewed
    preview = cluster.helm(
        "upgrade", RELEASE, str(CHART), "--namespace", ns, "--dry-run=server", check=False, timeout=120
    )
    assert refused_naming_both_choices(preview), preview.stdout + preview.stderr
    # render-only paths cannot see the running operator (lookup is empty): they render the narrowed
    # scope without complaint — why docs/install.md sends users to a real (or server dry-run) upgrade
    for render_only in (
        # (helm template assumes Kubernetes v1.20 unless told; the chart requires >= 1.30)
        ("template", RELEASE, str(CHART), "--namespace", ns, "--is-upgrade", "--kube-version", "1.34.4"),
        ("upgrade", RELEASE, str(CHART), "--namespace", ns, "--dry-run=client"),
    ):
        proc = cluster.helm(*render_only, check=False, timeout=120)
        assert proc.returncode == 0, proc.stderr
        assert f"- --namespace={ns}" in proc.stdout and "--all-namespaces" not in proc.stdout, proc.stdout

    # the user keeps the scope: upgraded, still every namespace, with the cluster-wide RBAC
    kept = cluster.helm(
        "upgrade",
        RELEASE,
        str(CHART),
        "--namespace",
        ns,
        "--set",
        "clusterWide=true",
        check=False,
        timeout=120,
    )
    assert kept.returncode == 0, kept.stderr
    assert revision(cluster, ns) == 2
    after = operator_args(cluster, ns)
    assert "--all-namespaces" in after and not any(a.startswith("--namespace=") for a in after), after
    kinds = {
        o["kind"]
        for o in yaml.safe_load_all(cluster.helm("get", "manifest", RELEASE, "--namespace", ns).stdout)
        if o
    }
    assert {"ClusterRole", "ClusterRoleBinding"} <= kinds and "Role" not in kinds, kinds


def test_upgrade_narrowed_by_watch_namespaces_and_then_with_defaults_is_accepted(
    cluster: LocalCluster, cluster_wide_release: str
) -> None:
    """The other choice (name the namespaces) is accepted; once the running operator no longer
    watches every namespace, an upgrade to the chart's defaults is not refused (the check reads the
    live arguments, not a remembered value)."""
    ns = cluster_wide_release
    assert "--all-namespaces" in operator_args(cluster, ns)
    narrowed = cluster.helm(
        "upgrade", RELEASE, str(CHART), "--namespace", ns, "--set", f"watchNamespaces={{{ns}}}",
        check=False, timeout=120,
    )  # fmt: skip
    assert narrowed.returncode == 0, narrowed.stderr
    args = operator_args(cluster, ns)
    assert f"--namespace={ns}" in args and "--all-namespaces" not in args, args
    # --reset-values: the chart's defaults only (without it Helm would carry the last --set over)
    defaults = cluster.helm(
        "upgrade", RELEASE, str(CHART), "--namespace", ns, "--reset-values", check=False, timeout=120
    )
    assert defaults.returncode == 0, defaults.stderr
    assert revision(cluster, ns) == 3
    args = operator_args(cluster, ns)
    assert f"--namespace={ns}" in args and "--all-namespaces" not in args, args
