"""What every add-on controller harness (support/lws.py, support/monitoring.py, support/keda.py)
does with the local control plane: build its components (``hack/build-controllers.sh``), apply
manifests server-side, install and remove CRDs with the component's namespace, read an aggregated
API, and wait for an aggregated APIService to be Available with its server's logs at hand when it is
not. The components themselves run as :class:`support.process.Process`."""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client
from localcluster import wait_crds_established

from .cluster import LocalCluster
from .process import Process
from .wait import wait_for

REPO_ROOT = Path(__file__).resolve().parents[2]
BUILD_SCRIPT = REPO_ROOT / "hack" / "build-controllers.sh"


def component_dirs(*components: str, error: type[Exception]) -> dict[str, Path]:
    """``component → <testbin>/<component>-<version>``, built by ``hack/build-controllers.sh`` when
    missing (cold: minutes, see docs/local-cluster.md); ``error`` with the script's stderr tail when
    it fails."""
    proc = subprocess.run([str(BUILD_SCRIPT), *components], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        tail = "\n".join(proc.stderr.splitlines()[-30:])
        raise error(f"hack/build-controllers.sh {' '.join(components)} failed ({proc.returncode}):\n{tail}")
    return {k: Path(v) for k, v in (line.split("=", 1) for line in proc.stdout.splitlines() if "=" in line)}


def crd_docs(home: Path) -> list[dict[str, Any]]:
    """The CRDs ``hack/build-controllers.sh`` copied into ``<home>/config/crd/*.yaml``, file by file."""
    return [
        d
        for f in sorted((home / "config" / "crd").glob("*.yaml"))
        for d in yaml.safe_load_all(f.read_text())
        if d
    ]


def apply(cluster: LocalCluster, docs: list[dict[str, Any]]) -> None:
    """``kubectl apply --server-side --force-conflicts`` of ``docs``."""
    cluster.kubectl("apply", "--server-side", "--force-conflicts", "-f", "-", input=yaml.safe_dump_all(docs))


def wait_established(cluster: LocalCluster, names: Iterable[str], timeout: float = 60.0) -> None:
    """Wait until every CRD in ``names`` is Established: localcluster's ``wait_crds_established``, which
    the control plane's own CRD install uses too (not ``kubectl wait``, which fails on a CRD just
    created: localcluster ``crd_established``)."""
    wait_crds_established(cluster.api, names, timeout)


def delete_crds(cluster: LocalCluster, names: Iterable[str]) -> None:
    """Delete the CRDs ``names`` (and with them every object of theirs), waiting up to 60 s."""
    crds = [f"crd/{n}" for n in names]
    cluster.kubectl("delete", "--ignore-not-found", "--wait=true", "--timeout=60s", *crds)


def ignore_not_found(delete: Callable[..., Any], *args: Any) -> None:
    """``delete(*args)``, an object already gone (404) being fine (kubectl's ``--ignore-not-found``)."""
    try:
        delete(*args)
    except client.ApiException as exc:
        if exc.status != 404:
            raise


def wait_namespace_gone_if_terminating(cluster: LocalCluster, namespace: str, timeout: float = 300.0) -> None:
    """When Namespace ``namespace`` exists and is being deleted (an earlier test's, removed by
    :func:`crds_and_namespace` without waiting), wait until it is gone. While it terminates the API
    server refuses to create anything in it (``NamespaceLifecycle`` admission: HTTP 403 "unable to
    create new content in namespace ... because it is being terminated"), applying it again changes
    nothing, and the namespace controller deletes what a new install puts into it. Worse, it can
    deadlock: an aggregated APIService the new install registers before its server serves fails the
    namespace controller's discovery, and a discovery error, though "not fatal" for the deletion of
    the content it did find, is returned, so the namespace keeps its finalizer
    (kubernetes/kubernetes v1.34.4 pkg/controller/namespace/deletion/namespaced_resources_deleter.go
    ``deleteAllContent``) — while that content includes the Service the APIService needs to become
    available (the likely cause, not reproduced, of KEDA's ``keda`` namespace still terminating
    180 s into the next test's setup in a CI run). The timeout's
    message carries the namespace's status conditions, where that controller says what holds it
    (``NamespaceDeletionDiscoveryFailure``, ``NamespaceContentRemaining``,
    ``NamespaceFinalizersRemaining``)."""
    core = client.CoreV1Api(cluster.api)

    def gone() -> bool:
        try:
            ns = core.read_namespace(namespace)
        except client.ApiException as exc:
            if exc.status == 404:
                return True
            raise
        if ns.metadata.deletion_timestamp is None:
            return True  # not being deleted: applying it is a no-op
        conditions = [(c.type, c.status, c.reason, c.message) for c in ns.status.conditions or []]
        last_conditions[:] = conditions
        return False

    last_conditions: list[tuple[str, str, str | None, str | None]] = []
    try:
        wait_for(gone, timeout, interval=0.5, desc=f"terminating namespace {namespace} gone")
    except AssertionError as exc:
        raise AssertionError(f"{exc}; its conditions: {last_conditions}") from exc


@contextmanager
def crds_and_namespace(cluster: LocalCluster, crds: list[dict[str, Any]], namespace: str) -> Iterator[None]:
    """``crds`` applied and Established and Namespace ``namespace`` applied, the component's own (as its
    release installs them); on exit, also when the block or the install fails, the CRDs deleted (and
    with them every object of theirs, :func:`delete_crds`), then the namespace (not waited for: the
    next install waits, :func:`wait_namespace_gone_if_terminating`)."""
    names = [d["metadata"]["name"] for d in crds]
    try:
        apply(cluster, crds)
        wait_established(cluster, names)
        wait_namespace_gone_if_terminating(cluster, namespace)
        apply(cluster, [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}])
        yield
    finally:
        delete_crds(cluster, names)
        ignore_not_found(client.CoreV1Api(cluster.api).delete_namespace, namespace)


def raw_items(cluster: LocalCluster, path: str) -> list[dict[str, Any]]:
    """``items`` of ``kubectl get --raw <path>``: a list an aggregated API (custom or external
    metrics) serves, as the HPA controller asks for it."""
    out = cluster.kubectl("get", "--raw", path).stdout
    items: list[dict[str, Any]] = yaml.safe_load(out)["items"]
    return items


def wait_api_service_available(
    registration: client.ApiregistrationV1Api,
    name: str,
    timeout: float,
    servers: Sequence[Process],
    error: type[Exception],
) -> None:
    """Wait until APIService ``name`` is Available, checking that each of ``servers`` still runs;
    on timeout raise ``error`` with the APIService's conditions and every server's log tail."""

    def available() -> bool:
        for server in servers:
            server.check()
        svc = registration.read_api_service(name)
        return any(c.type == "Available" and c.status == "True" for c in svc.status.conditions or [])

    try:
        wait_for(available, timeout, interval=0.5, desc=f"APIService {name} Available")
    except AssertionError as exc:
        conditions = registration.read_api_service(name).status.conditions
        logs = "".join(f"\n{server.name} log:\n{server.log_tail()}" for server in servers)
        raise error(f"{exc}\nconditions: {conditions}{logs}") from exc
