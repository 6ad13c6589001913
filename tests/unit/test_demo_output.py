"""What ``make demo`` prints (hack/demo/driver.py), without running it."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

DRIVER = Path(__file__).resolve().parents[2] / "hack" / "demo" / "driver.py"


def driver() -> ModuleType:
    spec = importlib.util.spec_from_file_location("demo_driver", DRIVER)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_signal_readings_print_only_what_is_measured_or_targeted() -> None:
    """Fresh-user trial: the demo printed ``active/max -%`` — a signal it does not scale on and that
    had no reading. Targeted signals show their reading and target (or "no reading yet"); others only
    with a reading."""
    readings = driver().signal_readings
    targets = {"kvCacheUtilization": 0.6}
    assert readings(targets, {}) == "kvCacheUtilization no reading yet (target 60%)"
    auto = {"kvCacheUtilizationPercent": 45, "activeRequestUtilizationPercent": None}
    assert readings(targets, auto) == "kvCacheUtilization 45% (target 60%)"
    auto["activeRequestUtilizationPercent"] = 12
    assert readings(targets, auto) == "activeRequestUtilization 12%, kvCacheUtilization 45% (target 60%)"
    assert readings({}, {}) == "no autoscaling signals"
    assert "-%" not in readings(targets, {})
