"""tests/support/wait.py: returns the first truthy value, retries on exceptions but not on failed
assertions, fails with context."""

from __future__ import annotations

import itertools

import pytest
from support.wait import wait_for


def test_returns_first_truthy_value() -> None:
    values = iter([None, 0, "", {"ready": True}])
    assert wait_for(lambda: next(values), timeout=5, interval=0) == {"ready": True}


def test_exceptions_count_as_not_yet() -> None:
    calls = itertools.count()

    def flaky() -> str:
        if next(calls) < 2:
            raise KeyError("not there yet")
        return "ok"

    assert wait_for(flaky, timeout=5, interval=0) == "ok"


@pytest.mark.parametrize(
    ("fn", "expected"),
    [
        (lambda: [], "last value: []"),
        (lambda: {}["missing"], "last exception: KeyError('missing')"),
    ],
)
def test_timeout_names_what_and_last_outcome(fn, expected: str) -> None:
    with pytest.raises(AssertionError) as info:
        wait_for(fn, timeout=0.05, interval=0.01, desc="the widget")
    assert "the widget" in str(info.value)
    assert expected in str(info.value)


def test_a_failed_assertion_fails_at_once_not_as_a_timeout() -> None:
    calls = itertools.count()

    def check() -> bool:
        next(calls)
        raise AssertionError("replicas 3 != 2")

    with pytest.raises(AssertionError, match="replicas 3 != 2") as info:
        wait_for(check, timeout=30, interval=0.01, desc="the widget")
    assert "timed out" not in str(info.value)
    assert next(calls) == 1  # called once: no retry
