"""What every add-on controller harness (support/lws.py, support/monitoring.py, support/keda.py)
does with the local control plane: apply manifests server-side, install and remove CRDs, and wait
for an aggregated APIService to be Available with its server's logs at hand when it is not."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Protocol

import yaml
from kubernetes import client

from .cluster import LocalCluster
from .wait import wait_for


class LoggedProcess(Protocol):
    """A component run as a local process (support/monitoring.py ``Process``)."""

    name: str

    def check(self) -> None: ...

    def log_tail(self, lines: int = 40) -> str: ...


def apply(cluster: LocalCluster, docs: list[dict[str, Any]]) -> None:
    """``kubectl apply --server-side --force-conflicts`` of ``docs``."""
    cluster.kubectl("apply", "--server-side", "--force-conflicts", "-f", "-", input=yaml.safe_dump_all(docs))


def wait_established(cluster: LocalCluster, names: Iterable[str]) -> None:
    """Wait (60 s) until every CRD in ``names`` is Established."""
    cluster.kubectl("wait", "--for=condition=Established", "--timeout=60s", *(f"crd/{n}" for n in names))


def delete_crds(cluster: LocalCluster, names: Iterable[str]) -> None:
    """Delete the CRDs ``names`` (and with them every object of theirs), waiting up to 60 s."""
    crds = [f"crd/{n}" for n in names]
    cluster.kubectl("delete", "--ignore-not-found", "--wait=true", "--timeout=60s", *crds)


def wait_api_service_available(
    registration: client.ApiregistrationV1Api,
    name: str,
    timeout: float,
    servers: Sequence[LoggedProcess],
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
