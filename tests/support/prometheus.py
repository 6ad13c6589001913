"""A real Prometheus server for tests: the Go-built Prometheus 3.16 (``hack/build-controllers.sh``,
kubernetes_sd only), run by tests/support/monitoring.py on the configuration prometheus-operator
generates from the chart's PodMonitor/ServiceMonitor. No test writes its own scrape configuration.

:func:`running_prometheus` starts it on 127.0.0.1 with a given configuration, waits for ``/-/ready``
and stops it on exit. Prometheus binds its listen address itself, so its port comes from
:func:`support.ports.free_port`; when the residual race is lost (the log says "address already in
use") the start is retried on another port (:func:`support.ports.retry_on_address_in_use`).
"""

from __future__ import annotations

import json
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml

from .ports import ADDRESS_IN_USE_TEXT, address_in_use_error, retry_on_address_in_use
from .process import stop_process

#: Seconds Prometheus gets to exit after SIGTERM before it is killed, and to exit after SIGKILL.
STOP_GRACE, KILL_WAIT = 20.0, 10.0


@contextmanager
def running_prometheus(
    config: dict[str, Any], work: Path, *, binary: str, ready_timeout: float = 60.0
) -> Iterator[str]:
    """Prometheus ``binary`` with ``config`` (written to ``work/prometheus.yml``; TSDB and log in
    ``work``), ready; yields its base URL ``http://127.0.0.1:<port>``. Fails the test if it exits or
    never gets ready."""
    config_path = work / "prometheus.yml"
    config_path.write_text(yaml.safe_dump(config))
    log = work / "prometheus.log"

    def start(port: int) -> tuple[subprocess.Popen[bytes], str]:
        with open(log, "wb") as out:
            proc = subprocess.Popen(
                [
                    binary,
                    f"--config.file={config_path}",
                    f"--storage.tsdb.path={work / 'tsdb'}",
                    f"--web.listen-address=127.0.0.1:{port}",
                    "--log.level=warn",
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + ready_timeout
        while True:
            if proc.poll() is not None:
                text = log.read_text(errors="replace")[-2000:]
                if ADDRESS_IN_USE_TEXT in text:
                    raise address_in_use_error(text)
                raise AssertionError(f"prometheus exited {proc.returncode}: {text}")
            try:
                with urllib.request.urlopen(f"{url}/-/ready", timeout=2) as resp:
                    if resp.status == 200:
                        return proc, url
            except OSError:
                pass  # not listening yet
            if time.monotonic() >= deadline:
                stop_process(proc, STOP_GRACE, KILL_WAIT)
                text = log.read_text(errors="replace")[-2000:]
                raise AssertionError(f"prometheus not ready within {ready_timeout:.0f} s: {text}")
            time.sleep(0.2)

    proc, url = retry_on_address_in_use(start)
    try:
        yield url
    finally:
        stop_process(proc, STOP_GRACE, KILL_WAIT)


def promql(url: str, query: str) -> list[dict[str, Any]]:
    """``data.result`` of an instant query (``/api/v1/query``, what KEDA's Prometheus scaler reads too)."""
    with urllib.request.urlopen(
        f"{url}/api/v1/query?" + urllib.parse.urlencode({"query": query}), timeout=5
    ) as resp:
        doc = json.loads(resp.read())
    assert doc["status"] == "success", doc
    return list(doc["data"]["result"])


def scrape_targets(url: str) -> dict[str, Any]:
    """``data`` of ``/api/v1/targets`` (prometheus v0.316.0 ``web/api/v1/api.go`` ``TargetDiscovery``):
    ``activeTargets`` — discovered and kept by relabelling, i.e. scraped (``labels``, ``scrapePool``,
    ``health``) — and ``droppedTargets`` — discovered, then dropped by relabelling
    (``discoveredLabels``, ``scrapePool``; all of them unless the job sets ``keep_dropped_targets``)."""
    with urllib.request.urlopen(f"{url}/api/v1/targets", timeout=5) as resp:
        doc = json.loads(resp.read())
    assert doc["status"] == "success", doc
    return dict(doc["data"])
