"""hack/lib/lock.sh: a build waiting on another process's build lock says what, by whom, how long.

Fresh-user trial: ``make testbin`` printed one "waiting for it" line and then nothing for many
minutes while another worktree compiled Kubernetes. The build scripts (hack/build-testbin.sh,
hack/build-controllers.sh, hack/triton-runtime.sh) take their lock through ``take_lock``.
"""

from __future__ import annotations

import os
import re
import subprocess
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
LOCK_SH = REPO / "hack" / "lib" / "lock.sh"


def _script(lock: Path, who: str, after: str) -> str:
    return f'set -euo pipefail; exec 9>"{lock}"; . "{LOCK_SH}"; take_lock 9 "{lock}" "thing X" {who}; {after}'


def _hold(lock: Path, after: str) -> subprocess.Popen[bytes]:
    holder = subprocess.Popen(["bash", "-c", _script(lock, "holder", after)])
    deadline = time.monotonic() + 10
    while not (lock.parent / (lock.name + ".pid")).exists():
        assert time.monotonic() < deadline, "the holder never took the lock"
        time.sleep(0.05)
    return holder


def _wait(lock: Path) -> str:
    env = {**os.environ, "TRTLLM_LOCK_REPORT_SECONDS": "1"}
    done = subprocess.run(
        ["bash", "-c", _script(lock, "waiter", "echo got")],
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert done.returncode == 0 and done.stdout == "got\n", done.stderr
    return done.stderr


def test_the_waiter_names_the_holder_and_reports_elapsed_time(tmp_path: Path) -> None:
    lock = tmp_path / ".build.lock"
    holder = _hold(lock, "sleep 3")
    err = _wait(lock)
    holder.wait(timeout=10)
    assert f"[waiter] waiting for the lock {lock}: pid {holder.pid} (" in err, err
    assert "is building thing X" in err
    assert re.search(rf"still waiting after \d+ s for pid {holder.pid} \(still running\)", err), err
    assert re.search(r"got the lock after \d+ s", err), err
    # The waiter now holds it and says so to the next one.
    assert (tmp_path / ".build.lock.pid").read_text().split(" ", 1)[1].strip() == "thing X"


def test_a_dead_holder_whose_child_keeps_the_lock_is_named(tmp_path: Path) -> None:
    """A killed build script's ``go build`` inherits the descriptor: the pid is gone, the lock is not."""
    lock = tmp_path / ".build.lock"
    holder = _hold(lock, "sleep 3 & exit 0")
    holder.wait(timeout=10)
    err = _wait(lock)
    assert "(no longer running; a child process it started still holds the lock)" in err, err
