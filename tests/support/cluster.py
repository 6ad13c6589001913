"""The test-session handle on a local control plane (see hack/localcluster and docs/local-cluster.md).

One cluster per pytest run, in its own work dir under /tmp, so it coexists with a developer's
``hack/local-cluster up`` cluster in ``.local/cluster``.
"""

from __future__ import annotations

import json
import os
import subprocess
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kubernetes import client, config
from kubernetes.client.rest import ApiException
from localcluster import ControlPlane

from .wait import wait_for

#: Write verbs as the audit log names them (POST create, PUT update, PATCH and server-side apply
#: patch, DELETE delete/deletecollection): k8s.io/apiserver pkg/endpoints/request/requestinfo.go.
WRITE_VERBS = frozenset({"create", "update", "patch", "delete", "deletecollection"})


class CommandError(subprocess.CalledProcessError):
    """A kubectl/helm call failed; str() includes its stderr."""

    def __str__(self) -> str:
        stderr = (self.stderr or "").strip()
        stdout = (self.stdout or "").strip()[-2000:]
        return f"{super().__str__()}\nstderr: {stderr}\nstdout: {stdout}"


@dataclass
class LocalCluster:
    """A running local control plane: kubeconfig, server URL, binaries, and helpers to talk to it."""

    control_plane: ControlPlane
    _api: client.ApiClient | None = field(default=None, repr=False)

    @property
    def kubeconfig(self) -> Path:
        return self.control_plane.kubeconfig

    @property
    def server(self) -> str:
        return self.control_plane.server

    @property
    def bin_dir(self) -> Path:
        return self.control_plane.bin_dir

    @property
    def work_dir(self) -> Path:
        return self.control_plane.work_dir

    def env(self) -> dict[str, str]:
        """os.environ plus KUBECONFIG for this cluster and the bundled binaries first on PATH."""
        return {
            **os.environ,
            "KUBECONFIG": str(self.kubeconfig),
            "PATH": f"{self.bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
        }

    def _run(
        self,
        argv: list[str],
        check: bool,
        input: str | None,
        timeout: float,
        env: dict[str, str] | None = None,
    ) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run(
            argv, input=input, capture_output=True, text=True, timeout=timeout, check=False, env=env
        )
        if check and proc.returncode != 0:
            raise CommandError(proc.returncode, argv, proc.stdout, proc.stderr)
        return proc

    def kubectl(
        self, *args: str, check: bool = True, input: str | None = None, timeout: float = 120.0
    ) -> subprocess.CompletedProcess[str]:
        """Run the bundled kubectl against this cluster; output captured as text.

        Raises CommandError (a CalledProcessError whose str() shows stderr) when ``check`` and it fails.
        """
        argv = [str(self.bin_dir / "kubectl"), f"--kubeconfig={self.kubeconfig}", *args]
        return self._run(argv, check, input, timeout)

    def helm(
        self, *args: str, check: bool = True, input: str | None = None, timeout: float = 300.0
    ) -> subprocess.CompletedProcess[str]:
        """Run the bundled helm against this cluster (helm's cache/config/data dirs in the work dir)."""
        home = self.work_dir / "helm"
        env = {
            **self.env(),
            "HELM_CACHE_HOME": str(home / "cache"),
            "HELM_CONFIG_HOME": str(home / "config"),
            "HELM_DATA_HOME": str(home / "data"),
        }
        argv = [str(self.bin_dir / "helm"), f"--kubeconfig={self.kubeconfig}", *args]
        return self._run(argv, check, input, timeout, env=env)

    def api_client(self) -> client.ApiClient:
        """A fresh kubernetes ApiClient configured from the kubeconfig (caller closes it)."""
        return config.new_client_from_config(config_file=str(self.kubeconfig))

    @property
    def api(self) -> client.ApiClient:
        """A shared ApiClient for fixtures (do not close)."""
        if self._api is None:
            self._api = self.api_client()
        return self._api

    # ---- audit log --------------------------------------------------------------------------
    def audit_mark(self) -> int:
        """Where the audit log ends now: pass it to :meth:`audit_events` to see only later requests."""
        log = self.control_plane.audit_log
        return log.stat().st_size if log.exists() else 0

    def audit_events(self, since: int = 0) -> list[dict[str, Any]]:
        """kube-apiserver audit events (write requests; see localcluster's AUDIT_POLICY) logged after
        byte offset ``since`` (from :meth:`audit_mark`). The log is written in blocking mode, so a
        request that got its response is already in it."""
        with self.control_plane.audit_log.open("rb") as f:
            f.seek(since)
            data = f.read()
        return [json.loads(line) for line in data.splitlines() if line.strip()]

    def log_tails(self, lines: int = 40) -> dict[str, str]:
        """Component name → last ``lines`` lines of its log."""
        return self.control_plane.log_tails(lines)

    # ---- namespaces -------------------------------------------------------------------------
    def create_namespace(self, prefix: str = "t", labels: dict[str, str] | None = None) -> str:
        """Create ``<prefix>-<uuid8>`` with ``labels``; returns once its ``default`` ServiceAccount exists.

        ServiceAccount admission is on (as in a real cluster), so a pod created before the
        serviceaccount controller made ``default`` would be rejected. Labels that admission reads
        (e.g. Pod Security's ``pod-security.kubernetes.io/enforce``) belong here, in the creation: the
        PodSecurity plugin reads a namespace from its informer's cache and asks the API server only
        when the cache has none (kubernetes v1.34 staging/src/k8s.io/pod-security-admission/admission
        ``namespaceGetter.GetNamespace``), so labels patched on after the creation are not seen
        until the cache catches up, and a pod admitted before that is judged as unlabelled.
        """
        name = f"{prefix}-{uuid.uuid4().hex[:8]}"
        core = client.CoreV1Api(self.api)
        core.create_namespace(
            {"metadata": {"name": name, "labels": {"trtllm-operator.dev/test": "true", **(labels or {})}}}
        )
        wait_for(
            lambda: core.read_namespaced_service_account("default", name),
            timeout=30,
            desc=f"ServiceAccount {name}/default",
        )
        return name

    def strip_finalizers(self, namespace: str) -> int:
        """Remove metadata.finalizers from every object in ``namespace`` (all listable kinds, CRs too).

        Returns how many objects were patched. Errors on single kinds are ignored (best effort).
        """
        patched = 0
        for path in self._namespaced_collections(namespace):
            try:
                listing = self._call("GET", path)
            except ApiException:
                continue
            for item in listing.get("items", []):
                meta = item.get("metadata", {})
                if meta.get("finalizers"):
                    try:
                        self._call(
                            "PATCH",
                            f"{path}/{meta['name']}",
                            body={"metadata": {"finalizers": None}},
                            content_type="application/merge-patch+json",
                        )
                        patched += 1
                    except ApiException as exc:
                        if exc.status != 404:
                            raise
        return patched

    def delete_namespace(self, namespace: str) -> None:
        """Strip finalizers of the namespace's objects, then delete it without waiting."""
        self.strip_finalizers(namespace)
        try:
            client.CoreV1Api(self.api).delete_namespace(namespace)
        except ApiException as exc:
            if exc.status != 404:
                raise

    def _call(self, method: str, path: str, body: Any = None, content_type: str | None = None) -> Any:
        """A raw API request (discovery, generic list/patch); returns the decoded JSON body."""
        headers = {"Accept": "application/json"}
        if content_type:
            headers["Content-Type"] = content_type
        method, url, headers, body, _ = self.api.param_serialize(
            method, path, header_params=headers, body=body, auth_settings=["BearerToken"]
        )
        resp = self.api.call_api(method, url, header_params=headers, body=body, _request_timeout=30)
        data = resp.read()
        if resp.status >= 400:
            raise ApiException(status=resp.status, reason=f"{resp.reason}: {data[:500]!r}")
        return json.loads(data)

    def _namespaced_collections(self, namespace: str) -> list[str]:
        """API paths of every namespaced resource collection that supports list and patch."""
        group_versions = [("/api/v1", self._call("GET", "/api/v1"))]
        for group in self._call("GET", "/apis").get("groups", []):
            gv = group["preferredVersion"]["groupVersion"]
            try:
                group_versions.append((f"/apis/{gv}", self._call("GET", f"/apis/{gv}")))
            except ApiException:
                continue  # e.g. an aggregated API that is not available
        paths = []
        for base, resources in group_versions:
            for res in resources.get("resources", []):
                verbs = set(res.get("verbs", []))
                if res.get("namespaced") and "/" not in res["name"] and {"list", "patch"} <= verbs:
                    if res["name"] == "events":
                        continue  # never carry finalizers; many objects
                    paths.append(f"{base}/namespaces/{namespace}/{res['name']}")
        return paths
