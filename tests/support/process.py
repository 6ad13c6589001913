"""A component the tests run as a local process: started with its output in a log file, checked, stopped.

One home for what the harnesses did each with a copy: the add-on controllers (support/lws.py,
support/monitoring.py, support/keda.py: :class:`Process`, :func:`start_process`), Prometheus
(support/prometheus.py) and the control-plane outage (support/outage.py: :func:`stop_process`).
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

from localcluster.controlplane import die_with_parent


def stop_process(proc: subprocess.Popen[bytes], grace: float = 15.0, kill_wait: float = 5.0) -> None:
    """SIGTERM ``proc`` and wait ``grace`` seconds for it to exit; then SIGKILL it and wait ``kill_wait``
    seconds (``subprocess.TimeoutExpired`` if it still has not exited)."""
    proc.terminate()
    try:
        proc.wait(grace)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(kill_wait)


@dataclass
class Process:
    """A component run as a local process, with its log (stdout and stderr together)."""

    name: str
    proc: subprocess.Popen[bytes]
    log: Path

    def log_tail(self, lines: int = 40) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])

    def check(self) -> None:
        """Fail (``AssertionError`` with the log's tail) if the process has exited."""
        if self.proc.poll() is not None:
            raise AssertionError(f"{self.name} exited ({self.proc.returncode}):\n{self.log_tail()}")

    def stop(self) -> None:
        """:func:`stop_process` with its default grace (15 s, then SIGKILL)."""
        stop_process(self.proc)


def start_process(name: str, argv: list[str], work: Path, env: dict[str, str] | None = None) -> Process:
    """Run ``argv`` in directory ``work``, its output to ``work/<name>.log``, its environment
    ``PATH=/usr/bin:/bin`` plus ``env``; the child dies with this process (``die_with_parent``, as
    localcluster's components)."""
    log = work / f"{name}.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            argv,
            stdout=out,
            stderr=subprocess.STDOUT,
            env={"PATH": "/usr/bin:/bin", **(env or {})},
            cwd=work,
            preexec_fn=die_with_parent,  # noqa: PLW1509 (as localcluster's components)
        )
    return Process(name, proc, log)
