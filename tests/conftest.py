"""Shared pytest fixtures: the local control plane (``cluster``) and a fresh namespace per test.

The cluster starts lazily, on the first test that asks for ``cluster`` or ``namespace`` (unit tests
never start it), once per pytest run, in its own work dir under /tmp; it stops at session end.
Failing tests that used it get the tail of each control-plane component's log as report sections.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
import time
from collections.abc import Generator, Iterator
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
for _p in (REPO_ROOT / "hack", REPO_ROOT / "tests"):
    if str(_p) not in sys.path:
        sys.path.insert(0, str(_p))

from localcluster import ClusterError, ControlPlane, find_bin_dir  # noqa: E402
from support.cluster import LocalCluster  # noqa: E402

LOG_TAIL_LINES = 30
_active: dict[str, LocalCluster] = {}  # "cluster" → the running session cluster (for log tails)


def _say(config: pytest.Config, msg: str, end: str = "") -> None:
    """Print to the real terminal even while pytest captures output (the make test log shows it)."""
    capman = config.pluginmanager.getplugin("capturemanager")
    if capman is not None:
        with capman.global_and_fixture_disabled():
            print(f"\n[cluster] {msg}" if msg else "", end=end, flush=True)
    else:
        print(f"[cluster] {msg}", flush=True)


@pytest.fixture(scope="session")
def cluster(request: pytest.FixtureRequest) -> Iterator[LocalCluster]:
    """The session's local control plane (etcd, kube-apiserver, controller-manager, scheduler, kwok).

    Builds the binaries first if they are missing (hack/build-testbin.sh, ~7 min cold); fails with
    a how-to when Go is missing. Applies crds/*.yaml. Logs component versions to the terminal.
    """
    cfg = request.config
    problem = None
    try:
        bin_dir = find_bin_dir()
    except ClusterError as exc:
        problem = f"local control plane unavailable: {exc}"
    if problem:
        pytest.fail(problem, pytrace=False)
    work_dir = Path(tempfile.mkdtemp(prefix="trtllm-op-cluster-"))
    cp = ControlPlane(work_dir=work_dir, bin_dir=bin_dir, detach=False, log=lambda m: _say(cfg, m))
    try:
        cp.start(timeout=180)
    except ClusterError as exc:
        problem = f"local control plane failed to start (logs in {cp.logs_dir}): {exc}"
    if problem:
        pytest.fail(problem, pytrace=False)
    handle = LocalCluster(control_plane=cp)
    _active["cluster"] = handle
    _say(cfg, "", end="\n")
    failed_before = request.session.testsfailed
    try:
        yield handle
    finally:
        _active.pop("cluster", None)
        t0 = time.monotonic()
        killed = cp.stop()
        failed = request.session.testsfailed > failed_before
        if failed:
            _say(cfg, f"stopped in {time.monotonic() - t0:.1f} s; logs kept in {cp.logs_dir}")
        else:
            shutil.rmtree(work_dir, ignore_errors=True)
        if killed:
            _say(cfg, f"had to SIGKILL: {', '.join(killed)}")


@pytest.fixture
def namespace(cluster: LocalCluster) -> Iterator[str]:
    """A fresh namespace ``t-<uuid8>`` (its default ServiceAccount exists); deleted afterwards.

    Teardown strips finalizers from every object left in it (so deletion cannot hang on an operator
    that is no longer running) and does not wait for the deletion to finish.
    """
    name = cluster.create_namespace("t")
    yield name
    cluster.delete_namespace(name)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    running = _active.get("cluster")
    if report.failed and running is not None and "cluster" in getattr(item, "fixturenames", ()):
        for name, text in running.log_tails(LOG_TAIL_LINES).items():
            report.sections.append((f"{name} log (last {LOG_TAIL_LINES} lines)", text))
    return report
