"""The demo's pod runner plays a kubelet for crashed servers (hack/tritoncpu/pods.py), removes the
shared memory its servers leave (hack/tritoncpu/__init__.py), and a failed pod reaches the demo's
driver as the failure (hack/tritoncpu/load.py, hack/demo/driver.py). Fresh-user trial 42 F12, F13."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import tritoncpu
from support.demo import demo_driver, demo_driver_in
from tritoncpu import pods
from tritoncpu.load import LoadGenerator


# -- restart back-off (kubelet: at once, then 10 s doubling, cap 300 s, reset after 10 min) ---------
@pytest.mark.parametrize(
    ("restarts", "delay"),
    [(0, 0.0), (1, 10.0), (2, 20.0), (3, 40.0), (5, 160.0), (6, 300.0), (30, 300.0)],
)
def test_restart_delay_is_the_kubelets_back_off(restarts: int, delay: float) -> None:
    assert pods.restart_delay(restarts) == delay


@pytest.mark.parametrize(
    ("crashes", "ran", "expected"),
    [
        (0, 8.0, (1, 0.0)),  # initial crash: restart at once
        (1, 30.0, (2, 10.0)),  # second in a row: after 10 s
        (2, 30.0, (3, None)),  # third in a row: crash-looping, give up (fail the demo at once)
        (2, 600.0, (1, 0.0)),  # ran 10 minutes: the back-off was reset
    ],
)
def test_after_exit_restarts_with_back_off_then_gives_up(
    crashes: int, ran: float, expected: tuple[int, float | None]
) -> None:
    assert pods.after_exit(crashes, ran) == expected


@pytest.mark.parametrize(
    ("code", "words"),
    [
        (-6, "signal 6 (SIGABRT)"),
        (134, "exit code 134 (128 + signal 6, SIGABRT)"),
        (1, "exit code 1"),
        (None, "exit status unknown"),
    ],
)
def test_describe_exit_names_the_signal(code: int | None, words: str) -> None:
    assert pods.describe_exit(code) == words


# -- the pod runner restarts a crashed server; fails a crash-looping one naming pod, exit, log ------
class FakeServer:
    def __init__(self, log: Path, pid: int) -> None:
        self.pid, self.log_path, self.is_alive = pid, log, True
        self.proc = SimpleNamespace(returncode=None)
        log.parent.mkdir(parents=True, exist_ok=True)
        log.write_text(
            "terminate called after throwing an instance of 'boost::interprocess::lock_exception'\n"
        )

    def alive(self) -> bool:
        return self.is_alive

    def ready(self) -> bool:
        return True

    def crash(self, code: int) -> None:
        self.is_alive, self.proc.returncode = False, code

    def stop(self) -> None:
        self.is_alive = False


def a_pod(name: str) -> Any:
    triton = SimpleNamespace(name="triton", restart_count=0)
    return SimpleNamespace(
        metadata=SimpleNamespace(name=name, deletion_timestamp=None),
        status=SimpleNamespace(pod_ip="127.1.0.9", phase="Running", container_statuses=[triton]),
    )


class FakeCore:
    def __init__(self, pod: Any) -> None:
        self.pod = pod
        self.patches: list[dict[str, Any]] = []
        self.api_client = SimpleNamespace(sanitize_for_serialization=lambda cs: {"name": cs.name})

    def list_namespaced_pod(self, namespace: str, label_selector: str) -> Any:
        return SimpleNamespace(items=[self.pod])

    def patch_namespaced_pod_status(self, name: str, namespace: str, body: dict[str, Any]) -> None:
        self.patches.append(body)


def test_a_crashed_server_is_restarted_unready_then_a_crash_loop_fails_naming_pod_exit_and_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pod = a_pod("tiny-chat-abc")
    core = FakeCore(pod)
    events: list[str] = []
    runner = pods.PodRunner(core, "ns", "sel", tmp_path, on_event=events.append)
    started: list[FakeServer] = []

    def start(p: Any) -> pods.PodServer:
        server = FakeServer(tmp_path / p.metadata.name / "pod.log", 100 + len(started))
        started.append(server)
        return pods.PodServer(p.metadata.name, p.status.pod_ip, server, time.monotonic())  # type: ignore[arg-type]

    monkeypatch.setattr(runner, "_start", start)
    monkeypatch.setattr(tritoncpu, "stop", lambda pid, timeout=30.0: False)
    monkeypatch.setattr(tritoncpu, "shm_regions", lambda pid: set())
    runner.sync()
    runner.sync()
    assert runner.ready_addresses() == ["127.1.0.9"]

    for crash in (1, 2):
        started[-1].crash(134)
        runner.sync()
        assert runner.failed == {}, "one crash must not end the demo"
        assert runner.ready_addresses() == []
        assert "tiny-chat-abc" in runner.backoff
        ready = [c for b in core.patches if "conditions" in b["status"] for c in b["status"]["conditions"]]
        assert ready[-1]["type"] in ("Ready", "ContainersReady") and ready[-1]["status"] == "False"
        counts = [
            b["status"]["containerStatuses"][0]["restartCount"]
            for b in core.patches
            if "containerStatuses" in b["status"]
        ]
        assert counts[-1] == crash
        assert (tmp_path / f"tiny-chat-abc.exit-{crash}.log").exists()
        assert f"tiny-chat-abc.exit-{crash}.log" in events[-1] and "restarting it" in events[-1]
        if crash == 2:
            runner.sync()  # a repeated crash: in back-off (10 s), not restarted yet
            assert len(started) == crash
            assert "restarting it in 10 s" in events[-1]
            runner.backoff["tiny-chat-abc"] = 0.0  # the back-off has passed
        runner.sync()
        assert len(started) == crash + 1
        runner.sync()
        assert runner.ready_addresses() == ["127.1.0.9"]

    started[-1].crash(134)
    runner.sync()
    why = runner.failed["tiny-chat-abc"]
    assert "crash-looping" in why and "128 + signal 6, SIGABRT" in why
    assert str(tmp_path / "tiny-chat-abc.exit-3.log") in why
    runner.sync()
    assert len(started) == 3, "a crash-looping server is not restarted again"


# -- shared memory: only the stopped server's own regions are removed -----------------------------
MAPS = """\
7f0000000000-7f0000100000 rw-s 00000000 00:1a 123  /dev/shm/prefix0_1c823f98-5697-4de9-9ea9-bdb9a5e6d5a5
7f0000100000-7f0000200000 rw-s 00000000 00:1a 124  /dev/shm/prefix1_250d8a59 (deleted)
7f0000200000-7f0000300000 r-xp 00000000 08:01 999  /usr/lib/libc.so.6
7f0000300000-7f0000400000 rw-p 00000000 00:00 0
7f0000400000-7f0000500000 rw-s 00000000 00:1a 125  /dev/shm/sub/dir
"""


def test_shm_names_reads_the_dev_shm_mappings_of_proc_maps() -> None:
    assert tritoncpu.shm_names(MAPS) == {"prefix0_1c823f98-5697-4de9-9ea9-bdb9a5e6d5a5", "prefix1_250d8a59"}


def test_remove_shm_regions_removes_only_recorded_regions_no_process_maps(tmp_path: Path) -> None:
    for name in ("prefix0_ours", "prefix1_ours", "prefix0_ci_server", "prefix0_still_mapped"):
        (tmp_path / name).write_bytes(b"\0")
    removed = tritoncpu.remove_shm_regions(
        ["prefix0_ours", "prefix1_ours", "prefix0_still_mapped", "prefix0_gone", "../etc"],
        in_use={"prefix0_still_mapped", "prefix0_ci_server"},
        shm_dir=tmp_path,
    )
    assert removed == ["prefix0_ours", "prefix1_ours"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["prefix0_ci_server", "prefix0_still_mapped"]


def test_shm_regions_of_a_live_session_lists_what_it_maps(tmp_path: Path) -> None:
    """A real process of its own session that maps a /dev/shm file: found by its session id."""
    name = f"trtllm-test-{tmp_path.name}"
    code = (
        "import mmap,os,sys,time\n"
        f"fd=os.open('/dev/shm/{name}',os.O_CREAT|os.O_RDWR,0o600); os.ftruncate(fd,4096)\n"
        "m=mmap.mmap(fd,4096); os.close(fd); print('ok',flush=True); time.sleep(30)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, start_new_session=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == b"ok"
        assert name in tritoncpu.shm_regions(proc.pid)
        assert tritoncpu.remove_shm_regions([name]) == [], "a region a live process maps stays"
    finally:
        proc.kill()
        proc.wait()
    assert tritoncpu.remove_shm_regions([name]) == [name]
    assert not Path(f"/dev/shm/{name}").exists()


# -- a failed pod reaches the driver as the failure ------------------------------------------------
def test_a_load_thread_stops_on_the_address_callbacks_error_without_a_traceback() -> None:
    module = demo_driver()
    failure = module.StepError("a serving pod's tritonserver failed: pod/p: crash-looping")

    def addresses() -> list[str]:
        raise failure

    uncaught: list[Any] = []
    old = threading.excepthook
    threading.excepthook = uncaught.append
    try:
        load = LoadGenerator(addresses, concurrency=4, max_tokens=1, max_seconds=5).start()
        load.stop()
    finally:
        threading.excepthook = old
    assert uncaught == []
    assert load.error is failure


def test_wait_for_raises_a_step_error_at_once_instead_of_retrying_it() -> None:
    module = demo_driver()
    calls: list[int] = []

    def fn() -> None:
        calls.append(1)
        raise module.StepError("pod/p crash-looping")

    with pytest.raises(module.StepError, match="crash-looping"):
        module.wait_for(fn, timeout=30, desc="the autoscaler", interval=0.1)
    assert len(calls) == 1  # raised at the first call: not retried until the 30 s timeout


def test_the_sample_request_waits_for_a_ready_server_while_the_only_pod_restarts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With its server in restart back-off the only pod has no ready address: the sample request
    waits for one (it took ``ready_addresses()[0]`` and died with an IndexError)."""
    module = demo_driver()
    demo = module.Demo()
    answers = iter([[], [], ["127.1.0.9"]])
    monkeypatch.setattr(demo, "ready_addresses", lambda: next(answers, ["127.1.0.9"]))
    sent: list[str] = []
    monkeypatch.setattr(
        module, "http_json", lambda url, *a, **k: sent.append(url) or {"text_output": "hello"}
    )
    monkeypatch.setattr(module.time, "sleep", lambda s: None)
    demo._request()
    assert sent == ["http://127.1.0.9:8000/v2/models/ensemble/generate"]


def test_demo_down_removes_the_regions_the_pod_runner_recorded_and_no_other(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Fresh-user trial 42 F13: ``make demo-down`` left the servers' Python-backend regions in
    /dev/shm. It removes those the pod runner recorded (e.g. after the runner was killed), not
    a region it did not record."""
    work = tmp_path / "demo"
    module = demo_driver_in(work, monkeypatch)
    ours, other = (Path(f"/dev/shm/trtllm-test-{tmp_path.name}-{n}") for n in ("ours", "other"))
    try:
        ours.write_bytes(b"\0")
        other.write_bytes(b"\0")
        (work / "pods").mkdir(parents=True)
        (work / "pods" / "tiny-chat-abc.shm-regions").write_text(f"{ours.name}\n")
        assert module.down(quiet=True) == 0
        assert not ours.exists()
        assert other.exists()
        assert not (work / "pods" / "tiny-chat-abc.shm-regions").exists()
    finally:
        ours.unlink(missing_ok=True)
        other.unlink(missing_ok=True)
