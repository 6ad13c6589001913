"""Polling with a deadline: the only way tests wait (no bare sleeps)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_for(fn: Callable[[], T], timeout: float = 30.0, interval: float = 0.2, desc: str = "condition") -> T:
    """Call ``fn`` every ``interval`` s until it returns something truthy; return that value.

    Exceptions raised by ``fn`` count as "not yet" (the object may not exist yet, the API may be
    busy) — except AssertionError: a failed check inside ``fn`` fails the test at once, with its own
    message, instead of being retried into a timeout. After ``timeout`` seconds raises
    AssertionError naming ``desc`` with the last value returned or exception raised.
    """
    deadline = time.monotonic() + timeout
    last: object = None
    last_exc: BaseException | None = None
    while True:
        try:
            value = fn()
        except AssertionError:
            raise
        except Exception as exc:
            last_exc, last = exc, None
        else:
            if value:
                return value
            last, last_exc = value, None
        if time.monotonic() >= deadline:
            detail = f"last exception: {last_exc!r}" if last_exc is not None else f"last value: {last!r}"
            raise AssertionError(f"timed out after {timeout:.1f} s waiting for {desc}; {detail}")
        time.sleep(interval)
