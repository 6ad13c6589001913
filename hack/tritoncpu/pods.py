"""Real Triton servers behind kwok's serving pods: the part of a kubelet kwok does not play.

kwok marks pods Running and Ready without running a container. :class:`PodRunner` runs the
``triton`` container's command of every Running serving pod that a label selector matches — the
operator's rendered ``launch.sh``, from the pod's own ConfigMap volume, with the pod's artifact
volume (the PersistentVolume's ``hostPath`` + the mount's ``subPath``) — bound to the pod's IP
(:func:`tritoncpu.run_launch_script`), and stops it when the pod goes away. Like a kubelet running
the pod's ``readinessProbe`` (``/v2/health/ready``), it keeps the pod's ``Ready`` condition False
until the server answers ready (kwok set it True at once). Only loopback pod IPs are served
(the local control plane gives kwok pods 127.1.0.0/16).

A server that exits is restarted as a kubelet restarts the container of a pod with
``restartPolicy: Always`` (what the operator renders): at once, then after an exponential
back-off, with the pod not Ready meanwhile and its ``restartCount`` counted up (:func:`after_exit`).
A server that keeps exiting is "crash-looping": the runner stops restarting it and reports the pod
as failed, naming the exit and the log. The Python-backend shared memory a stopped or crashed server leaves in
``/dev/shm`` is removed (only its own: :func:`tritoncpu.remove_shm_regions`).

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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kubernetes.client.exceptions import ApiException

import tritoncpu
from trtllm_operator.decide.serving_params import ARTIFACT_MOUNT
from trtllm_operator.render.serving import CONFIG_MOUNT

log = logging.getLogger("tritoncpu.pods")

CONTAINER = "triton"


#: The kubelet's container restarts: the first exit is restarted at once, later ones after an
#: exponential back-off of 10 s, 20 s, 40 s, … capped at 300 s, reset once the container has run
#: 10 minutes without a problem. Kubernetes v1.34 documentation, Pod Lifecycle, "How Pods handle
#: problems with containers" ("Initial crash: … an immediate restart"; "Repeated crashes: …
#: exponential backoff delay") and "Container restart policy" ("10s, 20s, 40s, …, capped at 300
#: seconds"; "executed for 10 minutes without any problems, the kubelet resets the restart backoff").
RESTART_BACKOFF_INITIAL = 10.0
RESTART_BACKOFF_MAX = 300.0
RESTART_BACKOFF_RESET = 600.0
#: Exits in a row (without a 10-minute healthy run between them) after which the runner gives up on a
#: pod: a kubelet would keep restarting it, but the demo cannot pass with a server that never stays up,
#: so it fails at once naming the pod rather than waiting out a step's timeout.
CRASH_LOOP_LIMIT = 3


def restart_delay(restarts: int) -> float:
    """Seconds before restarting a container that had exited ``restarts`` times in a row before its
    latest exit: 0 (the initial crash is restarted at once), then 10, 20, 40, … capped at
    :data:`RESTART_BACKOFF_MAX` (see the constants' source)."""
    if restarts <= 0:
        return 0.0
    return float(min(RESTART_BACKOFF_INITIAL * 2 ** (restarts - 1), RESTART_BACKOFF_MAX))


def after_exit(
    crashes: int, ran_seconds: float, *, limit: int = CRASH_LOOP_LIMIT
) -> tuple[int, float | None]:
    """What the runner does when a pod's server exits after running ``ran_seconds``, ``crashes``
    being the exits in a row before this one. Returns ``(crashes including this one, delay)``:
    restart after ``delay`` seconds, or give up (``None``) at ``limit`` exits in a row. A run of
    :data:`RESTART_BACKOFF_RESET` seconds or more resets the count, as it resets the kubelet's back-off."""
    if ran_seconds >= RESTART_BACKOFF_RESET:
        crashes = 0
    crashes += 1
    if crashes >= limit:
        return crashes, None
    return crashes, restart_delay(crashes - 1)


def describe_exit(returncode: int | None) -> str:
    """``Popen.returncode`` in words: ``signal 6 (SIGABRT)`` for a process killed by a signal
    (negative code), ``exit code 134 (128 + signal 6, SIGABRT)`` for a shell or ``mpirun`` that
    reports a child's signal the shell way, else ``exit code N``."""
    import signal  # noqa: PLC0415

    def name(num: int) -> str:
        try:
            return signal.Signals(num).name
        except ValueError:
            return "unknown signal"

    if returncode is None:
        return "exit status unknown"
    if returncode < 0:
        return f"signal {-returncode} ({name(-returncode)})"
    if 128 < returncode < 128 + 65:
        return f"exit code {returncode} (128 + signal {returncode - 128}, {name(returncode - 128)})"
    return f"exit code {returncode}"


class PodSetupError(RuntimeError):
    """A pod's volumes cannot be mapped onto this machine; the message names the volume."""


@dataclass
class PodServer:
    pod: str
    address: str
    server: tritoncpu.Server
    started: float
    ready_at: float | None = None
    #: ``/dev/shm`` names its processes mapped (:func:`tritoncpu.shm_regions`), gathered while it runs.
    shm: set[str] = field(default_factory=set)
    shm_seen: float = 0.0


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
        #: pod → exits in a row (:func:`after_exit`), restarts so far (the container's
        #: ``restartCount``), and the monotonic time its server is due to restart.
        self.crashes: dict[str, int] = {}
        self.restarts: dict[str, int] = {}
        self.backoff: dict[str, float] = {}
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
        again = f" (restart {self.restarts[name]})" if self.restarts.get(name) else ""
        self.on_event(
            f"pod/{name}: started tritonserver{again} on {ip} (pid {server.pid}); log {server.log_path}"
        )
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

    def _set_ready(
        self, pod: Any, ready: bool, reason: str, message: str, *, exit: tuple[int | None, str] | None = None
    ) -> None:
        """The pod's ``Ready``/``ContainersReady`` conditions and its ``triton`` container's ``ready``
        and ``restartCount`` (with ``lastState.terminated`` when ``exit`` = (returncode, words) is
        given), as the kubelet reports them."""
        status = "True" if ready else "False"
        body: dict[str, Any] = {
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
        statuses = self._container_statuses(pod, ready, exit)
        if statuses:
            body["status"]["containerStatuses"] = statuses
        with contextlib.suppress(Exception):
            self.core.patch_namespaced_pod_status(pod.metadata.name, self.namespace, body)

    def _container_statuses(
        self, pod: Any, ready: bool, exit: tuple[int | None, str] | None
    ) -> list[dict[str, Any]]:
        """The pod's ``containerStatuses`` (a list the API replaces whole) with the ``triton``
        container's ``ready``, ``restartCount`` (restarts made by this runner) and, after an exit,
        ``lastState.terminated`` (a signal reported as 128 + its number, as container runtimes do)."""
        statuses = []
        for cs in (pod.status.container_statuses if pod.status is not None else None) or []:
            entry = self.core.api_client.sanitize_for_serialization(cs)
            if cs.name == CONTAINER:
                entry["ready"] = ready
                entry["restartCount"] = self.restarts.get(pod.metadata.name, 0)
                if exit is not None:
                    code, how = exit
                    entry["lastState"] = {
                        "terminated": {
                            "exitCode": (128 - code if code < 0 else code) if code is not None else 255,
                            "reason": "Error",
                            "message": how,
                            "finishedAt": _now(),
                        }
                    }
            statuses.append(entry)
        return statuses

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
                self._stop_server(ps)
                self.on_event(f"pod/{name}: gone, stopped its tritonserver (pid {ps.server.pid})")
            for name in set(self.backoff) - set(live):
                del self.backoff[name]
            for name, pod in live.items():
                ps = self.servers.get(name)
                if ps is None and name not in self.failed:
                    if time.monotonic() < self.backoff.get(name, 0.0):
                        continue
                    self.backoff.pop(name, None)
                    try:
                        self.servers[name] = self._start(pod)
                    except (PodSetupError, tritoncpu.TritonError, OSError) as exc:
                        self.failed[name] = str(exc)
                        self.on_event(f"pod/{name}: cannot run tritonserver: {exc}")
                    continue
                if ps is None:
                    continue
                self._record_shm(ps)
                if not ps.server.alive():
                    self.servers.pop(name)
                    self._exited(pod, ps)
                elif ps.ready_at is None and ps.server.ready():
                    ps.ready_at = time.monotonic()
                    self._set_ready(pod, True, "TritonReady", "/v2/health/ready answered 200")
                    self.on_event(
                        f"pod/{name}: tritonserver ready on {ps.address}:8000 "
                        f"after {ps.ready_at - ps.started:.1f} s"
                    )

    def _record_shm(self, ps: PodServer, *, every: float = 5.0) -> None:
        """Note the ``/dev/shm`` regions the server's processes map (every ``every`` s), so that
        they can be removed after it stops even if it died without unlinking them."""
        now = time.monotonic()
        if now - ps.shm_seen < every:
            return
        ps.shm_seen = now
        found = tritoncpu.shm_regions(ps.server.pid) - ps.shm
        if found:
            ps.shm |= found
            record = self.work_dir / f"{ps.pod}.shm-regions"
            names = set(record.read_text().split()) if record.exists() else set()
            record.write_text("\n".join(sorted(names | ps.shm)) + "\n")

    def _remove_shm(self, ps: PodServer) -> None:
        """Remove the regions the stopped server left (:func:`tritoncpu.remove_shm_regions`: only
        those no live process maps); the record file goes when nothing of it is left."""
        record = self.work_dir / f"{ps.pod}.shm-regions"
        names = ps.shm | (set(record.read_text().split()) if record.exists() else set())
        removed = tritoncpu.remove_shm_regions(names)
        if removed:
            self.on_event(f"pod/{ps.pod}: removed {len(removed)} shared-memory region(s) its server left")
        if not any((tritoncpu.SHM_DIR / n).exists() for n in names):
            record.unlink(missing_ok=True)

    def _stop_server(self, ps: PodServer) -> None:
        self._record_shm(ps, every=0.0)
        ps.server.stop()
        self._remove_shm(ps)

    def _exited(self, pod: Any, ps: PodServer) -> None:
        """The pod's server exited on its own: keep its log, remove its shared memory, and restart it
        after the kubelet's back-off with the pod not Ready meanwhile, or give up when it
        crash-loops (:func:`after_exit`)."""
        name = pod.metadata.name
        ran = time.monotonic() - ps.started
        code = ps.server.proc.returncode if ps.server.proc is not None else None
        how = describe_exit(code)
        self.restarts[name] = self.restarts.get(name, 0) + 1
        crash_log = self.work_dir / f"{name}.exit-{self.restarts[name]}.log"
        try:
            ps.server.log_path.replace(crash_log)
        except OSError:
            crash_log = ps.server.log_path
        tritoncpu.stop(ps.server.pid, timeout=10)  # what is left of its session (other ranks)
        self._remove_shm(ps)
        crashes, delay = after_exit(self.crashes.get(name, 0), ran)
        self.crashes[name] = crashes
        tail = (
            "\n".join(crash_log.read_text(errors="replace").splitlines()[-8:]) if crash_log.exists() else ""
        )
        if delay is None:
            self.failed[name] = (
                f"tritonserver is crash-looping: it exited {crashes} times in a row, the last time "
                f"after {ran:.0f} s with {how}; log {crash_log}"
            )
            self._set_ready(pod, False, "CrashLoopBackOff", self.failed[name], exit=(code, how))
            self.on_event(f"pod/{name}: {self.failed[name]}; not restarting it again:\n{tail}")
            return
        self.backoff[name] = time.monotonic() + delay
        self._set_ready(
            pod,
            False,
            "TritonExited",
            f"tritonserver exited ({how}); restarting {f'in {delay:.0f} s' if delay else 'now'}",
            exit=(code, how),
        )
        self.on_event(
            f"pod/{name}: tritonserver exited after {ran:.0f} s with {how} (log {crash_log}); as a kubelet "
            f"would for restartPolicy Always, restarting it {f'in {delay:.0f} s' if delay else 'now'} "
            f"(back-off, restartCount "
            f"{self.restarts[name]}), the pod unready meanwhile:\n{tail}"
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
                self._stop_server(ps)
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
            # pods whose server is waiting out its restart back-off; restarts so far per pod
            restarting = sorted(runner.backoff)
            restarts = dict(runner.restarts)
        text = json.dumps(
            {"pods": state, "failed": runner.failed, "restarting": restarting, "restarts": restarts},
            sort_keys=True,
        )
        if text != last:
            tmp = args.state.with_suffix(".tmp")
            tmp.write_text(text)
            tmp.replace(args.state)
            last = text
    runner.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
