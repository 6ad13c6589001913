"""What ``make demo`` prints (hack/demo/driver.py), without running it."""

from __future__ import annotations

import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest
from localcluster.__main__ import env_command
from localcluster.controlplane import DEFAULT_WORK_DIR
from support.demo import DRIVER, demo_driver, demo_driver_in


def test_signal_readings_print_only_what_is_measured_or_targeted() -> None:
    """Fresh-user trial: the demo printed ``active/max -%`` — a signal it does not scale on and that
    had no reading. Targeted signals show their reading and target (or "no reading yet"); others only
    with a reading."""
    readings = demo_driver().signal_readings
    targets = {"kvCacheUtilization": 0.6}
    assert readings(targets, {}) == "kvCacheUtilization no reading yet (target 60%)"
    auto = {"kvCacheUtilizationPercent": 45, "activeRequestUtilizationPercent": None}
    assert readings(targets, auto) == "kvCacheUtilization 45% (target 60%)"
    auto["activeRequestUtilizationPercent"] = 12
    assert readings(targets, auto) == "activeRequestUtilization 12%, kvCacheUtilization 45% (target 60%)"
    assert readings({}, {}) == "no autoscaling signals"
    assert "-%" not in readings(targets, {})


def test_down_names_the_demo_directory_only_when_it_exists(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Fresh-user trial: ``make demo-down`` after an interrupted demo said its files stay in a
    directory that was never created."""
    work = tmp_path / "demo"
    module = demo_driver_in(work, monkeypatch)
    assert module.down() == 0
    out = capsys.readouterr().out
    assert "nothing of the demo is running" in out
    assert "files stay" not in out
    work.mkdir()
    assert module.down() == 0
    assert f"its files stay in {work}" in capsys.readouterr().out


def test_local_cluster_use_hint_keeps_the_work_dir(tmp_path: Path) -> None:
    """Fresh-user trial: ``hack/local-cluster --work-dir X up`` printed ``hack/local-cluster env``,
    which reads the default directory instead of X."""
    assert env_command(tmp_path / "c") == f"hack/local-cluster --work-dir {tmp_path / 'c'} env"
    assert env_command(DEFAULT_WORK_DIR) == "hack/local-cluster env"


def _make_dry_run(target: str) -> str:
    repo = DRIVER.parents[2]
    return subprocess.run(
        ["make", "-n", "-C", str(repo), target], capture_output=True, text=True, check=True
    ).stdout


def test_make_demo_builds_only_the_control_plane() -> None:
    """Fresh-user trial: ``make demo`` built the LeaderWorkerSet controller, which only the tests
    use; ``make testbin`` still builds both for them."""
    demo = _make_dry_run("demo")
    assert "hack/build-testbin.sh" in demo
    assert "hack/build-controllers.sh" not in demo
    testbin = _make_dry_run("testbin")
    assert "hack/build-testbin.sh" in testbin and "hack/build-controllers.sh" in testbin


def test_make_cluster_up_builds_only_the_control_plane() -> None:
    """Fresh-user trial: ``make cluster-up`` built the LeaderWorkerSet controller and the Prometheus
    stack, which ``hack/local-cluster up`` never starts (hack/localcluster runs etcd, the Kubernetes
    control plane and kwok; the tests start the add-ons themselves)."""
    up = _make_dry_run("cluster-up")
    assert "hack/build-testbin.sh" in up and "hack/local-cluster up" in up
    assert "hack/build-controllers.sh" not in up


def test_decision_summary_says_the_decisions_were_observed_while_watching_the_status() -> None:
    """Fresh-user trial 42 F6: the summary labelled the watched decisions "(status.autoscaling)", which
    sent the user to a status that by then held other entries (holds replace holds)."""
    hold = {
        "time": "2026-12-04T15:44:20Z",
        "fromReplicas": 3,
        "toReplicas": 3,
        "reason": "ScaleDownStabilized",
        "message": "scale-down to 2 held",
    }
    header, line = demo_driver().decision_summary([hold])
    assert "as observed while watching status.autoscaling" in header
    assert "(status.autoscaling)" not in header
    assert line == "  15:44:20  3 → 3  ScaleDownStabilized: scale-down to 2 held"


def test_go_further_points_curl_at_a_pod_the_api_still_serves(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Fresh-user trial 50 X3: right after the final scale-down the pod runner's state still listed the
    removed pod (it notices a deletion a few seconds late), so the printed curl pointed at it. The pod
    the API server lists as terminating, or no longer lists, is not offered."""
    module = demo_driver_in(tmp_path / "demo", monkeypatch)

    def pod(ip: str, deleting: bool) -> SimpleNamespace:
        return SimpleNamespace(
            metadata=SimpleNamespace(deletion_timestamp="2026-12-05T05:16:52Z" if deleting else None),
            status=SimpleNamespace(pod_ip=ip),
        )

    listed = [pod("127.27.0.2", deleting=True), pod("127.27.0.3", deleting=False)]

    class Core:
        def __init__(self, api: object) -> None:
            pass

        def list_namespaced_pod(self, namespace: str, label_selector: str) -> SimpleNamespace:
            assert (namespace, label_selector) == (
                module.NS,
                f"{module.DEPLOYMENT_LABEL}={module.TINY_DEPLOYMENT}",
            )
            return SimpleNamespace(items=listed)

    monkeypatch.setattr(module.client, "CoreV1Api", Core)
    demo = module.Demo()
    demo.bin_dir = tmp_path / "bin"
    demo.summary["sample"] = {"address": "127.27.0.2", "request": {}, "text": "Hello"}
    # the runner's state: both pods ready, the removed one not yet noticed
    monkeypatch.setattr(demo, "ready_addresses", lambda: ["127.27.0.2", "127.27.0.3"])
    demo.go_further()
    out = capsys.readouterr().out
    assert "curl -s 127.27.0.3:8000/v2/models/ensemble/generate" in out
    assert "127.27.0.2" not in out
    # once the API no longer lists it either, the same
    listed[:] = [pod("127.27.0.3", deleting=False)]
    demo.go_further()
    assert "127.27.0.2" not in capsys.readouterr().out
