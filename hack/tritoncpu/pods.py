"""Real Triton servers behind kwok's serving pods: the part of a kubelet kwok does not play.

kwok marks pods Running and Ready without running a container. :class:`PodRunner` runs the
``triton`` container's command of every Running serving pod that a label selector matches — the
operator's rendered ``launch.sh``, from the pod's own ConfigMap volume, with the pod's artifact
volume (the PersistentVolume's ``hostPath`` + the mount's ``subPath``) — bound to the pod's IP
(:func:`tritoncpu.run_launch_script`), and stops it when the pod goes away. Like a kubelet running
the pod's ``readinessProbe`` (``/v2/health/ready``), it keeps the pod's ``Ready`` condition False
until the server answers ready (kwok set it True at once). Only loopback pod IPs are served
(the local control plane gives kwok pods 127.1.0.0/16).

Uses the ``kubernetes`` client (the project virtualenv); ``core_api`` is a ``CoreV1Api``.
"""

from __future__ import annotations

import base64
import contextlib
import datetime as dt
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kubernetes.client.exceptions import ApiException

import tritoncpu
from trtllm_operator.decide.serving_params import ARTIFACT_MOUNT
from trtllm_operator.render.serving import CONFIG_MOUNT

log = logging.getLogger("tritoncpu.pods")

CONTAINER = "triton"


class PodSetupError(RuntimeError):
    """A pod's volumes cannot be mapped onto this machine; the message names the volume."""


@dataclass
class PodServer:
    pod: str
    address: str
    server: tritoncpu.Server
    started: float
    ready_at: float | None = None


def _now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class PodRunner:
    """Keep one real ``tritonserver`` per Running pod matching ``selector`` in ``namespace``."""

    def __init__(
        self,
        core_api: Any,
        namespace: str,
        selector: str,
        work_dir: Path,
        *,
        poll_seconds: float = 1.0,
        on_event: Callable[[str], None] | None = None,
    ) -> None:
        self.core = core_api
        self.namespace = namespace
        self.selector = selector
        self.work_dir = Path(work_dir)
        self.poll_seconds = poll_seconds
        self.on_event = on_event or (lambda msg: log.info("%s", msg))
        self.servers: dict[str, PodServer] = {}
        self.failed: dict[str, str] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="tritoncpu-pod-runner", daemon=True)

    # -- pod → directories -------------------------------------------------------------------------
    def _host_path(self, pvc_name: str) -> Path:
        pvc = self.core.read_namespaced_persistent_volume_claim(pvc_name, self.namespace)
        pv_name = pvc.spec.volume_name
        if not pv_name:
            raise PodSetupError(f"PVC {pvc_name} is not bound to a PersistentVolume")
        pv = self.core.read_persistent_volume(pv_name)
        if pv.spec.host_path is None:
            raise PodSetupError(
                f"PV {pv_name} of PVC {pvc_name} is not a hostPath volume: nothing on this machine"
            )
        return Path(pv.spec.host_path.path)

    def _start(self, pod: Any) -> PodServer:
        name, ip = pod.metadata.name, pod.status.pod_ip
        if not ip.startswith("127."):
            raise PodSetupError(f"pod IP {ip} is not a loopback address: it is not on this machine")
        container = next((c for c in pod.spec.containers if c.name == CONTAINER), None)
        if container is None:
            raise PodSetupError(f"no container named {CONTAINER!r}")
        volumes = {v.name: v for v in pod.spec.volumes or []}
        configmap = artifact = None
        for mount in container.volume_mounts or []:
            vol = volumes[mount.name]
            if vol.config_map is not None and mount.mount_path == CONFIG_MOUNT:
                cm = self.core.read_namespaced_config_map(vol.config_map.name, self.namespace)
                items = [
                    {"key": i.key, "path": i.path, **({"mode": i.mode} if i.mode is not None else {})}
                    for i in vol.config_map.items or []
                ]
                configmap = (cm.data or {}, items)
            elif vol.persistent_volume_claim is not None and mount.mount_path == ARTIFACT_MOUNT:
                artifact = self._host_path(vol.persistent_volume_claim.claim_name) / (mount.sub_path or "")
        if configmap is None or artifact is None:
            raise PodSetupError("the pod mounts no model-repository ConfigMap or no artifact PVC")
        if not artifact.is_dir():
            raise PodSetupError(f"artifact directory {artifact} does not exist on this machine")
        env = self._secret_env(container)
        self._set_ready(pod, False, "TritonStarting", "tritonserver is loading the models (hack/tritoncpu)")
        server = tritoncpu.run_launch_script(
            configmap[0], configmap[1], artifact, address=ip, work_dir=self.work_dir / name, extra_env=env
        )
        self.on_event(f"pod/{name}: started tritonserver on {ip} (pid {server.pid}); log {server.log_path}")
        return PodServer(name, ip, server, time.monotonic())

    def _secret_env(self, container: Any) -> dict[str, str]:
        """The container's environment variables that reference a Secret key (``secretKeyRef``,
        e.g. ``TRITON_ADMIN_KEY`` from ``<deployment>-credentials``), resolved as the kubelet
        resolves them; a missing Secret or key stops the pod as it would a kubelet's
        (CreateContainerConfigError)."""
        env: dict[str, str] = {}
        for var in container.env or []:
            ref = var.value_from.secret_key_ref if var.value_from is not None else None
            if ref is None:
                continue
            try:
                secret = self.core.read_namespaced_secret(ref.name, self.namespace)
            except ApiException as exc:
                raise PodSetupError(f"env {var.name}: Secret {ref.name}: {exc.status} {exc.reason}") from exc
            data = secret.data or {}
            if ref.key not in data:
                raise PodSetupError(f"env {var.name}: Secret {ref.name} has no key {ref.key!r}")
            env[var.name] = base64.b64decode(data[ref.key]).decode()
        return env

    def _set_ready(self, pod: Any, ready: bool, reason: str, message: str) -> None:
        status = "True" if ready else "False"
        body = {
            "status": {
                "conditions": [
                    {
                        "type": t,
                        "status": status,
                        "reason": reason,
                        "message": message,
                        "lastTransitionTime": _now(),
                    }
                    for t in ("Ready", "ContainersReady")
                ]
            }
        }
        with contextlib.suppress(Exception):
            self.core.patch_namespaced_pod_status(pod.metadata.name, self.namespace, body)

    # -- loop --------------------------------------------------------------------------------------
    def sync(self) -> None:
        pods = self.core.list_namespaced_pod(self.namespace, label_selector=self.selector).items
        live = {
            p.metadata.name: p
            for p in pods
            if p.status is not None
            and p.status.pod_ip
            and p.status.phase == "Running"
            and p.metadata.deletion_timestamp is None
        }
        with self._lock:
            for name in set(self.servers) - set(live):
                ps = self.servers.pop(name)
                ps.server.stop()
                self.on_event(f"pod/{name}: gone, stopped its tritonserver (pid {ps.server.pid})")
            for name, pod in live.items():
                ps = self.servers.get(name)
                if ps is None and name not in self.failed:
                    try:
                        self.servers[name] = self._start(pod)
                    except (PodSetupError, tritoncpu.TritonError, OSError) as exc:
                        self.failed[name] = str(exc)
                        self.on_event(f"pod/{name}: cannot run tritonserver: {exc}")
                    continue
                if ps is None:
                    continue
                if not ps.server.alive():
                    self.servers.pop(name)
                    self.failed[name] = "tritonserver exited"
                    self._set_ready(pod, False, "TritonExited", "tritonserver exited; see its log")
                    self.on_event(f"pod/{name}: tritonserver exited:\n{ps.server.log_tail(15)}")
                elif ps.ready_at is None and ps.server.ready():
                    ps.ready_at = time.monotonic()
                    self._set_ready(pod, True, "TritonReady", "/v2/health/ready answered 200")
                    self.on_event(
                        f"pod/{name}: tritonserver ready on {ps.address}:8000 "
                        f"after {ps.ready_at - ps.started:.1f} s"
                    )

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.sync()
            except Exception as exc:
                log.warning("pod runner: %s", exc)
            self._stop.wait(self.poll_seconds)

    def start(self) -> PodRunner:
        self._thread.start()
        return self

    def ready_addresses(self) -> list[str]:
        with self._lock:
            return sorted(ps.address for ps in self.servers.values() if ps.ready_at is not None)

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=10)
        with self._lock:
            for ps in self.servers.values():
                ps.server.stop()
            self.servers.clear()

    def __enter__(self) -> PodRunner:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def main(argv: list[str] | None = None) -> int:
    """``python -m tritoncpu.pods --namespace NS --selector SEL --work-dir DIR [--kubeconfig F]
    [--state FILE]``: run until SIGTERM/SIGINT, then stop every server it started. ``--state``
    is rewritten (JSON: pod → address, pid, ready, log) on every change."""
    import argparse  # noqa: PLC0415
    import json  # noqa: PLC0415
    import signal  # noqa: PLC0415

    from kubernetes import client, config  # noqa: PLC0415

    parser = argparse.ArgumentParser(prog="python -m tritoncpu.pods", description=main.__doc__)
    parser.add_argument("--namespace", required=True)
    parser.add_argument("--selector", required=True)
    parser.add_argument("--work-dir", required=True, type=Path)
    parser.add_argument("--kubeconfig")
    parser.add_argument("--state", type=Path)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    config.load_kube_config(config_file=args.kubeconfig)  # type: ignore[no-untyped-call]
    runner = PodRunner(client.CoreV1Api(), args.namespace, args.selector, args.work_dir, on_event=log.info)
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    signal.signal(signal.SIGINT, lambda *_: done.set())
    runner.start()
    last = ""
    while not done.wait(0.5):
        if args.state is None:
            continue
        with runner._lock:
            state = {
                name: {
                    "address": ps.address,
                    "pid": ps.server.pid,
                    "ready": ps.ready_at is not None,
                    "log": str(ps.server.log_path),
                }
                for name, ps in runner.servers.items()
            }
        text = json.dumps({"pods": state, "failed": runner.failed}, sort_keys=True)
        if text != last:
            tmp = args.state.with_suffix(".tmp")
            tmp.write_text(text)
            tmp.replace(args.state)
            last = text
    runner.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
