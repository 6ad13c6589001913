"""The demo's driver (``hack/demo/driver.py``) loaded for unit tests, with its work paths moved."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest

from support.scripts import load_script

DRIVER = Path(__file__).resolve().parents[2] / "hack" / "demo" / "driver.py"


def demo_driver() -> ModuleType:
    """A fresh module of the demo's driver (``load_script``)."""
    return load_script(DRIVER)


def demo_driver_in(work: Path, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """A fresh driver module whose work directory, cluster directory, pid file and pod-state file
    lie under ``work`` (undone with ``monkeypatch``); nothing is created."""
    module = demo_driver()
    for name, path in {
        "WORK": work,
        "CLUSTER_DIR": work / "cluster",
        "PIDS": work / "pids",
        "POD_STATE": work / "triton-pods.json",
    }.items():
        monkeypatch.setattr(module, name, path)
    return module
