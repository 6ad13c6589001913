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


def wait_settled(
    fn: Callable[[], T],
    quiet: float,
    timeout: float,
    interval: float = 0.5,
    desc: str = "condition",
    key: Callable[[T], object] = lambda value: value,
) -> T:
    """:func:`wait_for` ``fn`` to return something truthy, then keep calling it every ``interval`` s
    until ``key`` of its value has not changed for ``quiet`` seconds (a quiet window: nothing more
    arrives); return the last value read. For counting what arrives in bursts — Events, writes — where
    the first reading would miss a second, duplicate one.

    Exceptions raised by ``fn`` during the window count as "no reading" (as in :func:`wait_for`),
    except AssertionError. After ``timeout`` seconds in all (it must exceed ``quiet``) raises
    AssertionError naming ``desc`` with the last value.
    """
    assert timeout > quiet, f"timeout {timeout} s leaves no room for a {quiet} s quiet window"
    deadline = time.monotonic() + timeout
    value = wait_for(fn, timeout, interval, desc)
    since = time.monotonic()
    while time.monotonic() - since < quiet:
        if time.monotonic() >= deadline:
            raise AssertionError(
                f"timed out after {timeout:.1f} s waiting for {desc} to stay unchanged for {quiet:.1f} s; "
                f"last value: {value!r}"
            )
        time.sleep(interval)
        try:
            new = fn()
        except AssertionError:
            raise
        except Exception:
            continue
        if key(new) != key(value):
            since = time.monotonic()
        value = new
    return value
