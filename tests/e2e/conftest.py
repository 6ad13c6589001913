"""End-to-end tier: the Helm chart installed into the local control plane, the operator running with
exactly the chart's container arguments and environment, authenticated as the chart's
ServiceAccount.

One installation per module (:func:`installed`):

1. an operator namespace labelled ``pod-security.kubernetes.io/enforce=restricted`` (the real
   PodSecurity admission must accept the operator pod) and a workload namespace enforcing
   ``baseline`` (builder and Triton pods);
2. a GPU catalog ConfigMap in the operator namespace, then ``helm install`` of
   charts/trtllm-operator into the operator namespace, watching the workload namespace
   (``watchNamespaces``) and naming that ConfigMap (``settings.gpuCatalogConfigmap``), ``--wait``
   (kwok runs the operator pod);
3. a token for the chart's ServiceAccount (``kubectl create token``, TokenRequest) in a kubeconfig
   of its own: no admin credentials reach the operator;
4. ``python -m trtllm_operator.cli`` with the installed Deployment's ``args`` and ``env`` (read
   back from the API server), only the two listening ports moved to free local ports (and the port it
   scrapes on serving pods, where emulators stand in for Triton's 8002); ready when its liveness
   endpoint (the chart's probe) answers.

Teardown: SIGTERM then SIGKILL of the operator, ``helm uninstall``, namespaces deleted. A failing test
gets the tail of the operator log as a report section.
"""

from __future__ import annotations

from collections.abc import Generator, Iterator

import pytest
from e2e_harness import (
    CHART,
    GPU_CATALOG,
    GPU_CATALOG_DATA,
    RELEASE,
    Installed,
    helm_values,
    hub_repos,
    start_operator,
)
from kubernetes import client
from support.cluster import LocalCluster
from support.hub import LocalHub, local_hub
from support.ports import free_port

LOG_TAIL_LINES = 80
LOG_LINE_CHARS = 600  # debug lines carry whole objects
_running: dict[str, Installed] = {}


@pytest.fixture(scope="module")
def hub() -> Iterator[LocalHub]:
    """The local Hub (tests/support/hub.py) the release's ``settings.hfEndpoint`` points at."""
    with local_hub(hub_repos()) as running:
        yield running


@pytest.fixture(scope="module")
def installed(
    cluster: LocalCluster, hub: LocalHub, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Installed]:
    """The chart installed (release ``e2e``) and the operator running as its ServiceAccount.

    Watches one workload namespace (``Installed.namespace``); see the module docstring for the
    steps. Fails with the helm output or the operator log when a step does not complete (helm
    ``--wait`` 90 s, operator healthy 60 s).
    """
    work = tmp_path_factory.mktemp("e2e")
    core = client.CoreV1Api(cluster.api)
    op_ns = cluster.create_namespace("e2e-op")
    ns = cluster.create_namespace("e2e")
    core.patch_namespace(
        op_ns,
        {
            "metadata": {
                "labels": {
                    "pod-security.kubernetes.io/enforce": "restricted",
                    "pod-security.kubernetes.io/enforce-version": "latest",
                    "pod-security.kubernetes.io/warn": "restricted",
                }
            }
        },
    )
    # builder and Triton pods must pass the `baseline` Pod Security Standard (docs/security.md)
    core.patch_namespace(ns, {"metadata": {"labels": {"pod-security.kubernetes.io/enforce": "baseline"}}})
    handle = Installed(
        cluster=cluster,
        operator_namespace=op_ns,
        namespace=ns,
        service_account=f"{RELEASE}-trtllm-operator",
        kubeconfig=work / "operator.kubeconfig",
        log_path=work / "operator.log",
        hub=hub,
    )
    _running["installed"] = handle
    try:
        # the GPU catalog extension the release names (settings.gpuCatalogConfigmap), in the
        # operator's namespace, which it does not watch
        core.create_namespaced_config_map(
            op_ns, {"metadata": {"name": GPU_CATALOG}, "data": GPU_CATALOG_DATA}
        )
        proc = cluster.helm(
            "install",
            RELEASE,
            str(CHART),
            "--namespace",
            op_ns,
            "--wait",
            "--timeout",
            "90s",
            "--values",
            "-",
            input=helm_values(ns, hub.url),
            check=False,
            timeout=120,
        )
        handle.helm_output = proc.stdout + proc.stderr
        assert proc.returncode == 0, f"helm install failed:\n{handle.helm_output}"

        # emulators stand in for Triton on the pods' loopback IPs: a free port, not 8002
        # (support.ports.free_port's residual race: the operator must know it before any pod exists)
        handle.serving_metrics_port = free_port()
        start_operator(handle, work)
        yield handle
    finally:
        handle.stop()
        _running.pop("installed", None)
        cluster.helm("uninstall", RELEASE, "--namespace", op_ns, "--timeout", "60s", check=False, timeout=90)
        for name in (ns, op_ns):
            cluster.delete_namespace(name)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    running = _running.get("installed")
    if report.failed and running is not None and "installed" in getattr(item, "fixturenames", ()):
        tail = "\n".join(line[:LOG_LINE_CHARS] for line in running.log().splitlines()[-LOG_TAIL_LINES:])
        report.sections.append((f"operator log (last {LOG_TAIL_LINES} lines, {running.log_path})", tail))
    return report
