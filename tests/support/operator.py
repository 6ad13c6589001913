"""Run the operator against the test cluster: in-process (default) or as a subprocess.

In-process (:func:`running_operator`): the same entry point as ``trtllm-operator run``
(:func:`trtllm_operator.commands.run.run_operator`) in a thread, with kopf's ``stop_flag`` and
``ready_flag``. Handler exceptions surface in the test, and nothing is mocked: kopf watches the
real API server. Stopping it is a graceful kopf shutdown — enough for "the operator went away in
the middle of a build" (no state survives besides what is in the cluster).

Subprocess (:func:`operator_process`): ``python -m trtllm_operator.cli run`` with the settings as
``TRTLLM_OPERATOR_*`` environment variables; :meth:`OperatorProcess.kill` sends SIGKILL — the
hard version of the same test (no shutdown code runs at all).

Both watch only the given namespaces and use fast settings (:func:`fast_settings`): 1 s error
backoff, a 10 s watch server timeout (so shutdown never waits on a long poll), a short resync
timer, no metrics or liveness ports (several operators start per session; ports would collide).

kopf's default handler registry is process-global: the handlers register on first import and stay;
one in-process operator at a time.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trtllm_operator.commands.run import run_operator
from trtllm_operator.kube import Kube, set_default_kube
from trtllm_operator.settings import ENV_PREFIX, Settings

from .cluster import LocalCluster

REPO_ROOT = Path(__file__).resolve().parents[2]
#: Model configs the operator may use for planning (``<org>__<name>.json``).
HF_CONFIG_DIR = REPO_ROOT / "tests" / "fixtures" / "model-configs"


def fast_settings(namespaces: Sequence[str], **overrides: Any) -> Settings:
    """Settings for tests: only ``namespaces``, quick retries, no ports; ``overrides`` win."""
    base: dict[str, Any] = {
        "namespaces": tuple(namespaces),
        "standalone": True,
        "operator_namespace": namespaces[0],
        "error_backoff_seconds": 1.0,
        "watch_server_timeout_seconds": 10,
        "resync_seconds": 10.0,
        "liveness_port": None,
        "listen_address": "127.0.0.1",
        "metrics_port": None,
        "hf_config_dir": str(HF_CONFIG_DIR),
        # No Hub here: plan from the fixtures (tests of the fetch point hf_endpoint at a LocalHub).
        "hf_config_fetch": False,
        "builder_shm_bytes": 2**30,
    }
    base.update(overrides)
    return Settings.model_validate(base)


@dataclass
class InProcessOperator:
    """Handle on an operator thread."""

    settings: Settings
    thread: threading.Thread
    stop_flag: threading.Event
    errors: list[BaseException] = field(default_factory=list)

    def stop(self, timeout: float = 30.0) -> None:
        """Graceful kopf shutdown; raises if it does not stop or if the operator crashed."""
        self.stop_flag.set()
        self.thread.join(timeout)
        if self.thread.is_alive():
            raise AssertionError(f"the operator did not stop within {timeout} s")
        if self.errors:
            raise AssertionError(f"the operator crashed: {self.errors[0]!r}") from self.errors[0]


@contextmanager
def running_operator(
    cluster: LocalCluster, namespaces: Sequence[str], **overrides: Any
) -> Iterator[InProcessOperator]:
    """Run the operator in this process, watching ``namespaces``, until the block exits."""
    settings = fast_settings(namespaces, **overrides)
    previous = os.environ.get("KUBECONFIG")
    os.environ["KUBECONFIG"] = str(cluster.kubeconfig)  # kopf logs in from the kubeconfig
    set_default_kube(Kube(cluster.api_client(), settings.field_manager))
    stop = threading.Event()
    ready = threading.Event()
    handle = InProcessOperator(settings=settings, thread=threading.Thread(), stop_flag=stop)

    def target() -> None:
        try:
            run_operator(settings, stop_flag=stop, ready_flag=ready, configure_logging=False)
        except BaseException as exc:  # surfaced by stop()
            handle.errors.append(exc)
            ready.set()

    handle.thread = threading.Thread(target=target, name="trtllm-operator", daemon=True)
    handle.thread.start()
    try:
        if not ready.wait(60):
            raise AssertionError("the operator did not become ready within 60 s")
        if handle.errors:
            raise AssertionError(f"the operator failed to start: {handle.errors[0]!r}") from handle.errors[0]
        yield handle
    finally:
        if handle.thread.is_alive():
            handle.stop()
        set_default_kube(None)
        if previous is None:
            os.environ.pop("KUBECONFIG", None)
        else:
            os.environ["KUBECONFIG"] = previous


def settings_env(settings: Settings) -> dict[str, str]:
    """``TRTLLM_OPERATOR_*`` variables that reproduce ``settings`` in a subprocess."""
    env: dict[str, str] = {}
    for name, value in settings.model_dump().items():
        key = ENV_PREFIX + name.upper()
        if value is None:
            env[key] = ""
        elif isinstance(value, tuple | list):
            env[key] = ",".join(str(v) for v in value)
        elif isinstance(value, bool):
            env[key] = "true" if value else "false"
        else:
            env[key] = str(value)
    return env


@dataclass
class OperatorProcess:
    """Handle on ``trtllm-operator run`` in a subprocess; its output goes to ``log_path``."""

    proc: subprocess.Popen[bytes]
    log_path: Path

    def kill(self) -> None:
        """SIGKILL: no shutdown code runs (the hard 'operator died' case)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(30)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")


@contextmanager
def operator_process(
    cluster: LocalCluster, namespaces: Sequence[str], log_path: Path, **overrides: Any
) -> Iterator[OperatorProcess]:
    """Start ``python -m trtllm_operator.cli run`` watching ``namespaces``; killed on exit."""
    settings = fast_settings(namespaces, **overrides)
    env = {**cluster.env(), **settings_env(settings)}
    with open(log_path, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "trtllm_operator.cli", "run", "--verbose"],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    handle = OperatorProcess(proc=proc, log_path=log_path)
    try:
        yield handle
    finally:
        handle.kill()
